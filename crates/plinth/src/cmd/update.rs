//! `plinth update api|dependencies`: edit a Promise directory (kratix-cli's flags).

use std::path::PathBuf;

use crate::authoring::api::{ApiUpdate, update_api};
use crate::authoring::deps::{dependencies_as_workflow, update_dependencies};

/// Arguments of `plinth update`.
#[derive(clap::Args)]
pub struct UpdateArgs {
    #[command(subcommand)]
    what: UpdateCommand,
}

#[derive(clap::Subcommand)]
enum UpdateCommand {
    /// Update the Promise API: add (`--property NAME:TYPE`) or remove (`--property NAME-`)
    /// properties of `spec`, or change its group, kind, version or plural. Types: string,
    /// number, integer, object, boolean; nest with `.` (e.g. `service.port:integer`).
    #[command(
        after_help = "Examples:\n  plinth update api --property region:string\n  \
plinth update api --property service.port:integer\n  plinth update api --property region-\n  \
plinth update api --group myorg.com --kind Database",
        disable_version_flag = true
    )]
    Api(UpdateApiArgs),
    /// Set the Promise's static dependencies (spec.dependencies, or dependencies.yaml in
    /// the split layout) from a YAML file or every YAML file under a directory.
    #[command(
        after_help = "Examples:\n  plinth update dependencies path/to/dir/\n  \
plinth update dependencies path/to/file.yaml"
    )]
    Dependencies(UpdateDepsArgs),
}

/// Arguments of `plinth update api`.
#[derive(clap::Args)]
pub struct UpdateApiArgs {
    /// A property to add (NAME:TYPE) or remove (NAME-); repeatable.
    #[arg(long, short = 'p')]
    property: Vec<String>,
    /// New API group.
    #[arg(long, short = 'g')]
    group: Option<String>,
    /// New kind.
    #[arg(long, short = 'k')]
    kind: Option<String>,
    /// New API version.
    #[arg(long, short = 'v')]
    version: Option<String>,
    /// New plural.
    #[arg(long)]
    plural: Option<String>,
    /// The Promise directory.
    #[arg(long, short = 'd', default_value = ".")]
    dir: PathBuf,
}

/// Arguments of `plinth update dependencies`.
#[derive(clap::Args)]
pub struct UpdateDepsArgs {
    /// A YAML file, or a directory whose YAML files (recursively) are the dependencies.
    path: PathBuf,
    /// Put the dependencies in a Promise configure workflow step with this image
    /// (promise/configure/dependencies/configure-deps) instead of spec.dependencies.
    #[arg(long, short = 'i', value_parser = super::image::parse_image)]
    image: Option<String>,
    /// The Promise directory.
    #[arg(long, short = 'd', default_value = ".")]
    dir: PathBuf,
}

/// Runs `plinth update`.
pub fn run(args: UpdateArgs) -> anyhow::Result<()> {
    match args.what {
        UpdateCommand::Api(a) => {
            let file = update_api(
                &a.dir,
                &ApiUpdate {
                    group: a.group,
                    kind: a.kind,
                    version: a.version,
                    plural: a.plural,
                    properties: a.property,
                },
            )?;
            println!("Promise api updated ({file})");
        }
        UpdateCommand::Dependencies(a) => match &a.image {
            Some(image) => {
                let step = dependencies_as_workflow(&a.dir, &a.path, image)?;
                println!("Dependencies added as a Promise workflow step: {step}");
                println!("Build and push {image} from {step} for a real cluster");
            }
            None => {
                let (file, n) = update_dependencies(&a.dir, &a.path)?;
                println!("Updated {file} ({n} objects)");
            }
        },
    }
    Ok(())
}
