//! A small SDK for pipeline containers written in Rust, mirroring the Kratix pipeline SDK
//! contract.
//!
//! ```no_run
//! use plinth_pipeline::sdk::Kratix;
//! use std::collections::BTreeMap;
//!
//! let kratix = Kratix::from_env();
//! let request = kratix.read_object().unwrap();
//! let size = request.pointer("/spec/size").and_then(|v| v.as_str()).unwrap_or("small");
//! kratix.write_output("deployment.yaml", format!("size: {size}\n")).unwrap();
//! kratix.write_status(&serde_json::json!({"message": "provisioning"})).unwrap();
//! kratix.write_destination_selectors(&[plinth_pipeline::sdk::DestinationSelector {
//!     directory: None,
//!     match_labels: BTreeMap::from([("env".to_string(), "dev".to_string())]),
//! }]).unwrap();
//! ```

use crate::control::WorkflowControl;
use crate::selectors::{DestinationSelectorEntry, clean_path};
use crate::{PipelineError, yaml};
use plinth_api::contract::{self, env};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

/// One entry of `destination-selectors.yaml` (see [`crate::selectors`] for the rules).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DestinationSelector {
    /// Top-level output directory to schedule; `None` = the default group.
    pub directory: Option<String>,
    /// Labels a Destination must carry (at least one).
    pub match_labels: BTreeMap<String, String>,
}

/// Access to the pipeline contract: the input object, the output and metadata
/// directories, and the `KRATIX_*` environment.
#[derive(Clone, Debug)]
pub struct Kratix {
    input_dir: PathBuf,
    output_dir: PathBuf,
    metadata_dir: PathBuf,
    env: BTreeMap<String, String>,
}

impl Kratix {
    /// The contract as a pipeline container sees it: `/kratix/input`, `/kratix/output`,
    /// `/kratix/metadata` (overridable with `INPUT_DIR`, `OUTPUT_DIR`, `METADATA_DIR`) and
    /// the process environment.
    pub fn from_env() -> Kratix {
        let env: BTreeMap<String, String> = std::env::vars().collect();
        let dir =
            |k: &str, d: &str| PathBuf::from(env.get(k).cloned().unwrap_or_else(|| d.to_string()));
        Kratix {
            input_dir: dir(env::INPUT_DIR, contract::INPUT_DIR),
            output_dir: dir(env::OUTPUT_DIR, contract::OUTPUT_DIR),
            metadata_dir: dir(env::METADATA_DIR, contract::METADATA_DIR),
            env,
        }
    }

    /// A contract rooted at explicit directories with an explicit environment (for tests
    /// and local runs).
    pub fn with_dirs(
        input_dir: impl Into<PathBuf>,
        output_dir: impl Into<PathBuf>,
        metadata_dir: impl Into<PathBuf>,
        env: BTreeMap<String, String>,
    ) -> Kratix {
        Kratix {
            input_dir: input_dir.into(),
            output_dir: output_dir.into(),
            metadata_dir: metadata_dir.into(),
            env,
        }
    }

    fn var(&self, k: &str) -> Option<&str> {
        self.env
            .get(k)
            .map(String::as_str)
            .filter(|s| !s.is_empty())
    }

    /// `KRATIX_WORKFLOW_ACTION`: `configure` or `delete`.
    pub fn workflow_action(&self) -> Option<&str> {
        self.var(env::WORKFLOW_ACTION)
    }
    /// `KRATIX_WORKFLOW_TYPE`: `promise` or `resource`.
    pub fn workflow_type(&self) -> Option<&str> {
        self.var(env::WORKFLOW_TYPE)
    }
    /// `KRATIX_PROMISE_NAME`.
    pub fn promise_name(&self) -> Option<&str> {
        self.var(env::PROMISE_NAME)
    }
    /// `KRATIX_PIPELINE_NAME`.
    pub fn pipeline_name(&self) -> Option<&str> {
        self.var(env::PIPELINE_NAME)
    }
    /// `KRATIX_OBJECT_NAME`.
    pub fn object_name(&self) -> Option<&str> {
        self.var(env::OBJECT_NAME)
    }
    /// `KRATIX_OBJECT_NAMESPACE`.
    pub fn object_namespace(&self) -> Option<&str> {
        self.var(env::OBJECT_NAMESPACE)
    }
    /// True when this is a Promise workflow.
    pub fn is_promise_workflow(&self) -> bool {
        self.workflow_type() == Some("promise")
    }
    /// True when this is a delete workflow (outputs are ignored).
    pub fn is_delete(&self) -> bool {
        self.workflow_action() == Some("delete")
    }
    /// `KRATIX_DRY_RUN` is `true`.
    pub fn is_dry_run(&self) -> bool {
        self.var(env::DRY_RUN) == Some("true")
    }

    /// Reads `object.yaml` (the Promise or resource request, including status).
    pub fn read_object(&self) -> Result<Value, PipelineError> {
        let path = self.input_dir.join(contract::OBJECT_FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| PipelineError::io(&path, e))?;
        Ok(yaml::parse_one(&path, &text)?.unwrap_or(Value::Null))
    }

    /// Writes `contents` to `<output>/<relative>` (creating directories). `relative` must
    /// stay inside the output directory (no absolute paths, no `..`).
    pub fn write_output(
        &self,
        relative: &str,
        contents: impl AsRef<[u8]>,
    ) -> Result<PathBuf, PipelineError> {
        let rel = Path::new(relative);
        if relative.is_empty()
            || rel.is_absolute()
            || rel
                .components()
                .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Err(PipelineError::UnsafePath {
                path: rel.to_path_buf(),
                reason: "output paths must be relative and must not contain `..`".into(),
            });
        }
        let path = self.output_dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| PipelineError::io(parent, e))?;
        }
        std::fs::write(&path, contents).map_err(|e| PipelineError::io(&path, e))?;
        Ok(path)
    }

    /// Writes a value as a YAML document to `<output>/<relative>`.
    pub fn write_output_yaml<T: serde::Serialize>(
        &self,
        relative: &str,
        value: &T,
    ) -> Result<PathBuf, PipelineError> {
        self.write_output(relative, yaml::to_string(value)?)
    }

    /// Writes `status.yaml`: top-level keys are merged into the object's status by the
    /// status-writer; `kratix` is reserved.
    pub fn write_status(&self, status: &Value) -> Result<PathBuf, PipelineError> {
        if status.get("kratix").is_some() {
            return Err(PipelineError::ForbiddenStatus(
                "the `kratix` key is reserved for Kratix".into(),
            ));
        }
        self.write_metadata(contract::STATUS_FILE, &yaml::to_string(status)?)
    }

    /// Writes `destination-selectors.yaml`. Each entry needs at least one label and a
    /// top-level (single element) directory or none.
    pub fn write_destination_selectors(
        &self,
        selectors: &[DestinationSelector],
    ) -> Result<PathBuf, PipelineError> {
        let entries: Vec<DestinationSelectorEntry> = selectors
            .iter()
            .map(|s| DestinationSelectorEntry {
                directory: s.directory.as_deref().map(clean_path),
                match_labels: s.match_labels.clone(),
            })
            .collect();
        let text = yaml::to_string(&entries)?;
        // Validate with the same rules the work-creator applies.
        crate::selectors::parse_destination_selectors(
            &text,
            Path::new(contract::DESTINATION_SELECTORS_FILE),
        )?;
        self.write_metadata(contract::DESTINATION_SELECTORS_FILE, &text)
    }

    /// Asks Kratix to suspend the workflow after this pipeline, until the
    /// `kratix.io/workflow-suspended` label is removed from the object.
    pub fn suspend(&self, message: Option<&str>) -> Result<PathBuf, PipelineError> {
        self.write_control(&WorkflowControl {
            suspend: Some(true),
            retry_after: None,
            message: message.map(Into::into),
        })
    }

    /// Asks Kratix to run this pipeline again after `retry_after` (a Go duration such as
    /// `30s` or `5m`; validated here).
    pub fn retry_after(
        &self,
        retry_after: &str,
        message: Option<&str>,
    ) -> Result<PathBuf, PipelineError> {
        plinth_api::duration::parse_go_duration(retry_after).map_err(|e| {
            PipelineError::metadata(contract::WORKFLOW_CONTROL_FILE, format!("retryAfter: {e}"))
        })?;
        self.write_control(&WorkflowControl {
            suspend: None,
            retry_after: Some(retry_after.to_string()),
            message: message.map(Into::into),
        })
    }

    fn write_control(&self, c: &WorkflowControl) -> Result<PathBuf, PipelineError> {
        self.write_metadata(contract::WORKFLOW_CONTROL_FILE, &yaml::to_string(c)?)
    }

    fn write_metadata(&self, file: &str, text: &str) -> Result<PathBuf, PipelineError> {
        std::fs::create_dir_all(&self.metadata_dir)
            .map_err(|e| PipelineError::io(&self.metadata_dir, e))?;
        let path = self.metadata_dir.join(file);
        std::fs::write(&path, text).map_err(|e| PipelineError::io(&path, e))?;
        Ok(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::ControlRequest;

    #[test]
    fn sdk_writes_what_the_adapter_reads() {
        let d = tempfile::tempdir().unwrap();
        let (i, o, m) = (
            d.path().join("in"),
            d.path().join("out"),
            d.path().join("meta"),
        );
        std::fs::create_dir_all(&i).unwrap();
        std::fs::write(
            i.join("object.yaml"),
            "apiVersion: x/v1\nkind: X\nspec:\n  size: big\n",
        )
        .unwrap();
        let env = BTreeMap::from([("KRATIX_WORKFLOW_TYPE".to_string(), "resource".to_string())]);
        let k = Kratix::with_dirs(&i, &o, &m, env);
        assert_eq!(k.read_object().unwrap()["spec"]["size"], "big");
        assert!(!k.is_promise_workflow());
        k.write_output("dev/a.yaml", "a: 1\n").unwrap();
        assert!(k.write_output("../escape.yaml", "x").is_err());
        k.write_destination_selectors(&[DestinationSelector {
            directory: Some("./dev".into()),
            match_labels: BTreeMap::from([("env".into(), "dev".into())]),
        }])
        .unwrap();
        assert!(
            k.write_destination_selectors(&[DestinationSelector {
                directory: Some("dev".into()),
                match_labels: BTreeMap::new()
            }])
            .is_err()
        );
        k.write_status(&serde_json::json!({"endpoint": "e"}))
            .unwrap();
        assert!(k.write_status(&serde_json::json!({"kratix": {}})).is_err());
        k.retry_after("2m", Some("later")).unwrap();
        assert!(matches!(
            WorkflowControl::read(&m).unwrap().request().unwrap(),
            ControlRequest::Retry { .. }
        ));
        assert!(k.retry_after("soon", None).is_err());
        let groups = crate::work_creator::build_workload_groups(
            &o,
            &d.path().join("none"),
            None,
            crate::WorkflowType::Resource,
        )
        .unwrap();
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].directory, ".");
        let sel = crate::selectors::read_destination_selectors(&m).unwrap();
        assert_eq!(sel[0].directory, "dev");
    }
}
