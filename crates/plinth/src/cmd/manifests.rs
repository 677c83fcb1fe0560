//! `plinth manifests`.

use anyhow::bail;

/// Arguments of `plinth manifests`.
#[derive(clap::Args)]
pub struct ManifestsArgs {}

/// Runs `plinth manifests`.
pub async fn run(_args: ManifestsArgs) -> anyhow::Result<()> {
    bail!("`plinth manifests` is not available in this build yet")
}
