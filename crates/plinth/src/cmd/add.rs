//! `plinth add container`: a workflow step (kratix-cli's layout and flags).

use std::path::PathBuf;

use crate::authoring::container::{AddContainer, Language, add_container};

/// Arguments of `plinth add`.
#[derive(clap::Args)]
pub struct AddArgs {
    #[command(subcommand)]
    what: AddCommand,
}

#[derive(clap::Subcommand)]
enum AddCommand {
    /// Add a container to a workflow's pipeline (created when missing), with a step folder
    /// workflows/LIFECYCLE/ACTION/PIPELINE/NAME/ holding a runnable script, a Dockerfile
    /// and resources/, and an images.yaml entry so `plinth render`, `plinth test` and
    /// `plinth up --image-map images.yaml` run the script in place of the image.
    #[command(
        after_help = "LIFECYCLE is promise or resource; ACTION is configure or delete.\n\n\
Examples:\n  plinth add container resource/configure/instance --image example.org/db-configure:v0.1.0\n  \
plinth add container promise/configure/deps --image example.org/db-deps:v0.1.0 --name deploy-deps --language python"
    )]
    Container(AddContainerArgs),
}

/// Arguments of `plinth add container`.
#[derive(clap::Args)]
pub struct AddContainerArgs {
    /// LIFECYCLE/ACTION/PIPELINE-NAME, e.g. resource/configure/instance.
    target: String,
    /// The container's image.
    #[arg(long, short = 'i', value_parser = super::image::parse_image)]
    image: String,
    /// The container's name [default: derived from the image].
    #[arg(long, short = 'n')]
    name: Option<String>,
    /// The language of the generated step.
    #[arg(long, short = 'l', value_enum, default_value_t = Language::Bash)]
    language: Language,
    /// For --language rust: the plinth-pipeline crate's source directory
    /// [default: the one this binary was built from, when present].
    #[arg(long)]
    sdk_path: Option<PathBuf>,
    /// The Promise directory.
    #[arg(long, short = 'd', default_value = ".")]
    dir: PathBuf,
}

/// Runs `plinth add`.
pub fn run(args: AddArgs) -> anyhow::Result<()> {
    let AddCommand::Container(a) = args.what;
    let (lifecycle, action, pipeline) = AddContainer::parse_target(&a.target)?;
    let add = AddContainer {
        lifecycle,
        action,
        pipeline,
        image: a.image,
        name: a.name,
        language: a.language,
        sdk_path: a.sdk_path,
    };
    let (step, script) = add_container(&a.dir, &add)?;
    println!("generated {step}");
    println!("Customise your container by editing {script}");
    if add.language == Language::Rust {
        println!(
            "Build it with `cargo build --release --manifest-path {step}/Cargo.toml` before rendering"
        );
    }
    println!(
        "images.yaml maps {} to that script for plinth render and plinth test; build and push the image for a real cluster",
        add.image
    );
    Ok(())
}
