//! `plinth operator`.

use anyhow::bail;

/// Arguments of `plinth operator`.
#[derive(clap::Args)]
pub struct OperatorArgs {}

/// Runs `plinth operator`.
pub async fn run(_args: OperatorArgs) -> anyhow::Result<()> {
    bail!("`plinth operator` is not available in this build yet")
}
