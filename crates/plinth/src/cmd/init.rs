//! `plinth init promise`: a new Promise directory (kratix-cli's layout and flags).

use std::path::PathBuf;

use crate::authoring::scaffold::{PromiseInit, init_promise};

/// Arguments of `plinth init`.
#[derive(clap::Args)]
pub struct InitArgs {
    #[command(subcommand)]
    what: InitCommand,
}

#[derive(clap::Subcommand)]
enum InitCommand {
    /// Create a new Promise: promise.yaml (or, with --split, api.yaml and
    /// dependencies.yaml), example-resource.yaml, README.md and one test case
    /// (tests/example/request.yaml).
    #[command(
        after_help = "Examples:\n  plinth init promise postgresql --group syntasso.io --kind Database\n  \
plinth init promise postgresql --group syntasso.io --kind Database --version v1 --split",
        disable_version_flag = true
    )]
    Promise(InitPromiseArgs),
}

/// Arguments of `plinth init promise`.
#[derive(clap::Args)]
pub struct InitPromiseArgs {
    /// The Promise's name (metadata.name; a DNS-1123 label).
    name: String,
    /// The API group of the requests the Promise provides (e.g. example.org).
    #[arg(long, short = 'g')]
    group: String,
    /// The kind of the requests the Promise provides (e.g. Database).
    #[arg(long, short = 'k')]
    kind: String,
    /// The API version [default: v1alpha1].
    #[arg(long, short = 'v')]
    version: Option<String>,
    /// The plural of the kind [default: the kind in lower case with an `s`].
    #[arg(long)]
    plural: Option<String>,
    /// Split the Promise into api.yaml, dependencies.yaml and workflow files
    /// (assembled with `plinth build promise`).
    #[arg(long)]
    split: bool,
    /// The directory to write into.
    #[arg(long, short = 'd', default_value = ".")]
    dir: PathBuf,
}

/// Runs `plinth init`.
pub fn run(args: InitArgs) -> anyhow::Result<()> {
    let InitCommand::Promise(a) = args.what;
    let p = PromiseInit::new(
        &a.name,
        &a.group,
        &a.kind,
        a.version.as_deref(),
        a.plural.as_deref(),
        a.split,
    )?;
    let files = init_promise(&a.dir, &p)?;
    for f in &files {
        println!("created {}", a.dir.join(f).display());
    }
    let where_ = if a.dir.as_os_str() == "." {
        "the current directory".to_string()
    } else {
        a.dir.display().to_string()
    };
    println!("{} promise bootstrapped in {where_}", a.name);
    Ok(())
}
