//! Job controller.

use crate::config::RunnerConfig;
use crate::error::RunnerError;

/// Runs the Job runner until the Job watch ends or the task is aborted.
pub async fn run(_client: kube::Client, _config: RunnerConfig) -> Result<(), RunnerError> {
    Ok(())
}
