//! `plinth pipeline-adapter`.

use anyhow::bail;

/// Arguments of `plinth pipeline-adapter`.
#[derive(clap::Args)]
pub struct PipelineAdapterArgs {}

/// Runs `plinth pipeline-adapter`.
pub async fn run(_args: PipelineAdapterArgs) -> anyhow::Result<()> {
    bail!("`plinth pipeline-adapter` is not available in this build yet")
}
