//! `plinth manifests`: print the manifests a real cluster needs, as multi-document YAML.

use anyhow::Context;
use clap::Subcommand;
use serde_json::Value;

/// Arguments of `plinth manifests`.
#[derive(clap::Args)]
pub struct ManifestsArgs {
    /// Which manifests to print.
    #[command(subcommand)]
    pub what: ManifestsCommand,
}

/// The manifest sets `plinth manifests` can print. Each variant maps to a function
/// returning a list of JSON documents (see [`documents`]).
#[derive(Subcommand, Clone, Debug)]
pub enum ManifestsCommand {
    /// CustomResourceDefinitions of every platform.kratix.io/v1alpha1 kind.
    Crds,
}

/// The documents of one manifest set, in apply order.
pub fn documents(what: &ManifestsCommand) -> anyhow::Result<Vec<Value>> {
    match what {
        ManifestsCommand::Crds => crd_documents(),
    }
}

/// The Kratix CRDs as JSON documents.
pub fn crd_documents() -> anyhow::Result<Vec<Value>> {
    plinth_api::crds::all_crds()
        .iter()
        .map(|crd| serde_json::to_value(crd).context("serialising a CustomResourceDefinition"))
        .collect()
}

/// Renders documents as one YAML stream (documents separated by `---`).
pub fn to_yaml_stream(docs: &[Value]) -> anyhow::Result<String> {
    let mut out = String::new();
    for doc in docs {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(doc).context("rendering YAML")?);
    }
    Ok(out)
}

/// Runs `plinth manifests`.
pub async fn run(args: ManifestsArgs) -> anyhow::Result<()> {
    let docs = documents(&args.what)?;
    print!("{}", to_yaml_stream(&docs)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crds_render_as_a_parseable_yaml_stream() {
        let docs = documents(&ManifestsCommand::Crds).unwrap();
        let yaml = to_yaml_stream(&docs).unwrap();
        let back: Vec<Value> = serde_saphyr::from_multiple(&yaml).unwrap();
        assert_eq!(back.len(), 11);
        assert_eq!(back, docs);
        assert!(back.iter().all(|d| d["kind"] == "CustomResourceDefinition"));
    }
}
