//! `plinth up`.

use anyhow::bail;

/// Arguments of `plinth up`.
#[derive(clap::Args)]
pub struct UpArgs {}

/// Runs `plinth up`.
pub async fn run(_args: UpArgs) -> anyhow::Result<()> {
    bail!("`plinth up` is not available in this build yet")
}
