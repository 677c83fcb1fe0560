//! `plinth render PROMISE.yaml REQUEST.yaml`: runs a request's configure workflow (or,
//! with `--promise-workflow`, the Promise's own) locally and prints what it produced.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::bail;

use crate::authoring::render::{PlainLines, RenderInput, Rendered, render};
use crate::authoring::yaml;

/// Arguments of `plinth render`.
#[derive(clap::Args)]
#[command(
    long_about = "Runs a resource request's configure workflow on this machine, with no platform \
running, and prints what it produced: every output file with the path it would get at each \
matching Destination, the destination selectors, and the status the request would get. \
The Jobs are the ones the controllers build and run on the same runner (bubblewrap sandbox, \
image map, podman) as `plinth up`. On a pipeline failure the pipeline's logs are printed and \
the exit code is non-zero, naming the failed step.",
    after_help = "Examples:\n  plinth render promise.yaml example-resource.yaml\n  \
plinth render promise.yaml request.yaml --status status.yaml --destinations destinations.yaml\n  \
plinth render promise.yaml --promise-workflow"
)]
pub struct RenderArgs {
    /// The Promise (a YAML file holding one Promise).
    pub promise: PathBuf,
    /// The resource request (not needed with --promise-workflow).
    pub request: Option<PathBuf>,
    /// Run only this pipeline of the workflow.
    #[arg(long)]
    pub pipeline: Option<String>,
    /// A status the request already has (YAML mapping), as the pipeline would see it.
    #[arg(long)]
    pub status: Option<PathBuf>,
    /// Render the Promise's own configure workflow instead of a request's.
    #[arg(long)]
    pub promise_workflow: bool,
    /// Destinations to schedule to (YAML, one or more documents); default: `local`
    /// (environment=dev) and `platform` (environment=platform, strictMatchLabels), as
    /// `plinth up` creates.
    #[arg(long)]
    pub destinations: Option<PathBuf>,
    /// Extra objects applied before the request (YAML, one or more documents).
    #[arg(long)]
    pub objects: Option<PathBuf>,
    /// Image map for the runner (images run as local commands); default: `images.yaml`
    /// next to the Promise file, when present.
    #[arg(long, env = "PLINTH_IMAGE_MAP")]
    pub image_map: Option<PathBuf>,
    /// Give up when the workflow has not finished after this many seconds.
    #[arg(long, default_value_t = 120)]
    pub timeout: u64,
}

/// Runs `plinth render`; a failed pipeline makes the command fail naming the step.
pub async fn run(args: RenderArgs) -> anyhow::Result<()> {
    let promise = yaml::read_one(&args.promise)?;
    let request = match (&args.request, args.promise_workflow) {
        (Some(_), true) => bail!("give either REQUEST.yaml or --promise-workflow, not both"),
        (None, false) => bail!("give the request to render (REQUEST.yaml) or --promise-workflow"),
        (Some(r), false) => Some(yaml::read_one(r)?),
        (None, true) => None,
    };
    let input = RenderInput {
        promise,
        request,
        existing_status: args.status.as_deref().map(yaml::read_one).transpose()?,
        destinations: read_all(args.destinations.as_deref())?,
        objects: read_all(args.objects.as_deref())?,
        image_map: args
            .image_map
            .clone()
            .or_else(|| default_image_map(&args.promise)),
        pipeline: args.pipeline.clone(),
        timeout: Duration::from_secs(args.timeout),
    };
    let rendered = render(&input, &PlainLines).await?;
    print!("{}", report(&rendered));
    match &rendered.failure {
        None => Ok(()),
        Some(f) => bail!("{}", failure_line(f)),
    }
}

/// The documents of an optional YAML file.
pub fn read_all(path: Option<&Path>) -> anyhow::Result<Vec<serde_json::Value>> {
    path.map(yaml::read_docs)
        .transpose()
        .map(Option::unwrap_or_default)
}

/// `images.yaml` beside the Promise file, when it exists.
pub fn default_image_map(promise: &Path) -> Option<PathBuf> {
    let dir = promise.parent().filter(|p| !p.as_os_str().is_empty());
    let candidate = dir.unwrap_or(Path::new(".")).join("images.yaml");
    candidate
        .is_file()
        .then(|| candidate.canonicalize().unwrap_or(candidate))
}

/// One line naming the failed pipeline and step.
pub fn failure_line(f: &crate::authoring::render::Failure) -> String {
    match &f.step {
        Some(step) => format!(
            "pipeline {} failed at step {step}: {}",
            f.pipeline, f.message
        ),
        None => format!("pipeline {} failed: {}", f.pipeline, f.message),
    }
}

/// The human-readable report of a render: selectors, files, status, and logs on failure.
pub fn report(r: &Rendered) -> String {
    let mut out = String::new();
    out.push_str("Destination selectors:\n");
    if r.groups.is_empty() {
        out.push_str("  (no workload groups)\n");
    }
    for g in &r.groups {
        let sel = if g.selectors.is_empty() {
            "(none)".to_string()
        } else {
            g.selectors
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        let to = if g.scheduled.is_empty() {
            "no matching Destination: unscheduled".to_string()
        } else {
            g.scheduled.join(", ")
        };
        out.push_str(&format!(
            "  pipeline {} directory {}: {sel} -> {to}\n",
            g.pipeline, g.directory
        ));
    }
    out.push_str("\nOutputs:\n");
    if r.outputs.is_empty() {
        out.push_str("  (none)\n");
    }
    for f in &r.outputs {
        let note = if f.scheduled {
            ""
        } else {
            " (matches, but the request is scheduled to another Destination)"
        };
        out.push_str(&format!("--- {}: {}{note}\n", f.destination, f.path));
        let content = crate::redact::documents(&f.content);
        out.push_str(&content);
        if !content.ends_with('\n') {
            out.push('\n');
        }
    }
    out.push_str("\nStatus:\n");
    for line in yaml::to_yaml(&r.status).lines() {
        out.push_str(&format!("  {line}\n"));
    }
    if let Some(f) = &r.failure {
        out.push_str(&format!("\n{}\n", failure_line(f)));
        for (container, log) in &f.logs {
            out.push_str(&format!("--- log of {container}:\n{log}"));
            if !log.ends_with('\n') {
                out.push('\n');
            }
        }
    }
    out
}

/// Reads a Promise file or errors naming it.
pub fn read_promise(path: &Path) -> anyhow::Result<serde_json::Value> {
    let p = yaml::read_one(path)?;
    if p["kind"] != "Promise" {
        bail!("{} holds kind {} (want Promise)", path.display(), p["kind"]);
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::authoring::render::OutputFile;

    #[test]
    fn the_report_shows_secret_keys_but_not_their_values() {
        let secret = "apiVersion: v1\nkind: Secret\nmetadata: {name: db}\nstringData:\n  password: rendered-plain\n";
        let r = Rendered {
            works: Vec::new(),
            outputs: vec![OutputFile {
                destination: "local".into(),
                path: "local/resources/secret.yaml".into(),
                content: secret.into(),
                scheduled: true,
            }],
            groups: Vec::new(),
            status: serde_json::json!({"message": "ok"}),
            failure: None,
        };
        let out = report(&r);
        assert!(!out.contains("rendered-plain"), "{out}");
        assert!(
            out.contains(&format!(
                "password: {}",
                crate::redact::marker(b"rendered-plain")
            )),
            "{out}"
        );
    }
}
