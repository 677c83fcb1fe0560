//! `workflow-control.yaml`: a pipeline asking to suspend or retry its workflow.

use crate::{PipelineError, yaml};
use plinth_api::contract::WORKFLOW_CONTROL_FILE;
use plinth_api::duration::parse_go_duration;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;

/// Contents of `/kratix/metadata/workflow-control.yaml`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct WorkflowControl {
    /// `true`: suspend the workflow after this pipeline until the
    /// `kratix.io/workflow-suspended` label is removed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    /// Go duration (`30s`, `5m`, `1h30m`): retry this pipeline after that long. Wins over
    /// `suspend`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<String>,
    /// Message shown on the pipeline's status entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// What a workflow-control file asks for.
#[derive(Clone, Debug, PartialEq)]
pub enum ControlRequest {
    /// Carry on (no file, or neither suspend nor retry).
    Continue,
    /// Suspend until the label is removed.
    Suspend {
        /// Optional message.
        message: Option<String>,
    },
    /// Run this pipeline again after `after`.
    Retry {
        /// Delay before the retry.
        after: Duration,
        /// Optional message.
        message: Option<String>,
    },
}

impl ControlRequest {
    /// True for [`ControlRequest::Suspend`] and [`ControlRequest::Retry`]: no Work is written
    /// and completion is not marked.
    pub fn is_suspended(&self) -> bool {
        !matches!(self, ControlRequest::Continue)
    }
}

impl WorkflowControl {
    /// Reads `workflow-control.yaml` from `metadata_dir` (missing file = default).
    pub fn read(metadata_dir: &Path) -> Result<WorkflowControl, PipelineError> {
        let path = metadata_dir.join(WORKFLOW_CONTROL_FILE);
        Ok(yaml::read_optional(&path)?.unwrap_or_default())
    }

    /// Interprets the file: a non-empty `retryAfter` means retry (its duration must parse),
    /// else `suspend: true` means suspend, else continue.
    pub fn request(&self) -> Result<ControlRequest, PipelineError> {
        if let Some(after) = self.retry_after.as_deref().filter(|s| !s.trim().is_empty()) {
            let after = parse_go_duration(after.trim()).map_err(|e| {
                PipelineError::metadata(WORKFLOW_CONTROL_FILE, format!("retryAfter: {e}"))
            })?;
            return Ok(ControlRequest::Retry {
                after,
                message: self.message.clone(),
            });
        }
        if self.suspend == Some(true) {
            return Ok(ControlRequest::Suspend {
                message: self.message.clone(),
            });
        }
        Ok(ControlRequest::Continue)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(parse_go_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(
            parse_go_duration("1h30m").unwrap(),
            Duration::from_secs(5400)
        );
        assert_eq!(
            parse_go_duration("1.5s").unwrap(),
            Duration::from_millis(1500)
        );
        assert_eq!(
            parse_go_duration("300ms").unwrap(),
            Duration::from_millis(300)
        );
        assert_eq!(parse_go_duration("0").unwrap(), Duration::ZERO);
        assert!(parse_go_duration("5").is_err());
        assert!(
            parse_go_duration("5d")
                .unwrap_err()
                .to_string()
                .contains("unknown unit")
        );
        assert!(parse_go_duration("-5s").is_err());
        assert!(parse_go_duration("").is_err());
    }

    #[test]
    fn retry_wins_over_suspend() {
        let c = WorkflowControl {
            suspend: Some(true),
            retry_after: Some("1m".into()),
            message: Some("m".into()),
        };
        assert_eq!(
            c.request().unwrap(),
            ControlRequest::Retry {
                after: Duration::from_secs(60),
                message: Some("m".into())
            }
        );
        let c = WorkflowControl {
            suspend: Some(true),
            retry_after: Some("".into()),
            message: None,
        };
        assert_eq!(
            c.request().unwrap(),
            ControlRequest::Suspend { message: None }
        );
        assert_eq!(
            WorkflowControl::default().request().unwrap(),
            ControlRequest::Continue
        );
        let c = WorkflowControl {
            retry_after: Some("soon".into()),
            ..Default::default()
        };
        assert!(
            c.request()
                .unwrap_err()
                .to_string()
                .contains("workflow-control.yaml: retryAfter")
        );
    }
}
