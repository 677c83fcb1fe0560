//! `plinth quickstart`.

use anyhow::bail;

/// Arguments of `plinth quickstart`.
#[derive(clap::Args)]
pub struct QuickstartArgs {}

/// Runs `plinth quickstart`.
pub async fn run(_args: QuickstartArgs) -> anyhow::Result<()> {
    bail!("`plinth quickstart` is not available in this build yet")
}
