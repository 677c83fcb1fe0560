//! `plinth build promise`: assemble promise.yaml from the split layout (kratix-cli's flags).

use std::path::PathBuf;

use crate::authoring::{layout, yaml};

/// Arguments of `plinth build`.
#[derive(clap::Args)]
pub struct BuildArgs {
    #[command(subcommand)]
    what: BuildCommand,
}

#[derive(clap::Subcommand)]
enum BuildCommand {
    /// Assemble the Promise from api.yaml, dependencies.yaml and the workflow files of a
    /// split layout (or print promise.yaml of a flat one), to stdout or --output.
    #[command(
        after_help = "Examples:\n  plinth build promise postgresql --output promise.yaml\n  \
plinth build promise --dir path/to/promise"
    )]
    Promise(BuildPromiseArgs),
}

/// Arguments of `plinth build promise`.
#[derive(clap::Args)]
pub struct BuildPromiseArgs {
    /// The Promise's name [default: the name in promise.yaml, else the directory's name].
    name: Option<String>,
    /// The Promise directory.
    #[arg(long, short = 'd', default_value = ".")]
    dir: PathBuf,
    /// Write the Promise to this file instead of stdout.
    #[arg(long, short = 'o')]
    output: Option<PathBuf>,
}

/// Runs `plinth build`.
pub fn run(args: BuildArgs) -> anyhow::Result<()> {
    let BuildCommand::Promise(a) = args.what;
    let promise = layout::assemble(&a.dir, a.name.as_deref())?;
    match &a.output {
        Some(path) => {
            yaml::write(path, &promise)?;
            eprintln!(
                "built Promise {} into {}",
                promise["metadata"]["name"].as_str().unwrap_or_default(),
                path.display()
            );
        }
        None => print!("{}", yaml::to_yaml(&promise)),
    }
    Ok(())
}
