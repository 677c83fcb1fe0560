//! The reader role: writes the pipeline's object to `/kratix/input/object.yaml`.

use crate::{PipelineError, yaml};
use kube::Client;
use plinth_api::constants::{annotations, labels};
use plinth_api::contract::OBJECT_FILE;
use plinth_api::contract::ObjectRef;
use serde_json::Value;
use std::path::PathBuf;

/// Inputs of [`run_reader`].
#[derive(Clone, Debug)]
pub struct ReaderArgs {
    /// Directory to write `object.yaml` into (`/kratix/input`, or `INPUT_DIR`).
    pub input_dir: PathBuf,
    /// Output directory to create if missing (`/kratix/output`, or `OUTPUT_DIR`).
    pub output_dir: Option<PathBuf>,
    /// The object.
    pub object: ObjectRef,
    /// `KRATIX_DRY_RUN=true`: the object is an ephemeral dry-run request; write the real
    /// request's view instead (see [`dry_run_view`]).
    pub dry_run: bool,
}

/// What a dry-run pipeline sees as its input: the real resource
/// request's metadata and status with the proposed spec of the ephemeral dry-run request,
/// or — when the real request does not exist yet — the ephemeral request renamed to the
/// intended name and namespace, without the dry-run plumbing (labels, annotations,
/// ownerReferences, uid).
pub fn dry_run_view(ephemeral: &Value, real: Option<&Value>) -> Value {
    let spec = ephemeral.get("spec").cloned().unwrap_or(Value::Null);
    if let Some(real) = real {
        let mut out = real.clone();
        out["spec"] = spec;
        return out;
    }
    let mut out = ephemeral.clone();
    let ann = |k: &str| {
        ephemeral
            .pointer(&format!("/metadata/annotations/{}", k.replace('/', "~1")))
            .cloned()
    };
    let name = ann(annotations::DRY_RUN_RESOURCE_NAME);
    let namespace = ann(annotations::DRY_RUN_RESOURCE_NAMESPACE);
    if let Some(meta) = out.get_mut("metadata").and_then(Value::as_object_mut) {
        if let Some(n) = name {
            meta.insert("name".into(), n);
        }
        if let Some(ns) = namespace {
            meta.insert("namespace".into(), ns);
        }
        for key in ["ownerReferences", "uid", "resourceVersion", "generateName"] {
            meta.remove(key);
        }
        if let Some(l) = meta.get_mut("labels").and_then(Value::as_object_mut) {
            l.retain(|k, _| !k.starts_with(labels::DRY_RUN));
        }
        if let Some(a) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
            a.retain(|k, _| !k.starts_with("kratix.io/dry-run"));
        }
    }
    out
}

/// GETs the object (full, including status) and writes it as YAML to
/// `<input_dir>/object.yaml` (for dry runs, [`dry_run_view`] of it). Returns the path written.
pub async fn run_reader(client: Client, args: ReaderArgs) -> Result<PathBuf, PipelineError> {
    let obj = crate::object::get(&args.object, client.clone()).await?;
    let mut value = serde_json::to_value(&obj).map_err(|e| PipelineError::Json {
        context: format!("serialising {}", args.object.describe()),
        source: e,
    })?;
    if args.dry_run {
        let ann = |k: &str| {
            obj.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(k))
                .cloned()
        };
        let real = match ann(annotations::DRY_RUN_RESOURCE_NAME) {
            Some(name) => {
                let mut real_ref = args.object.clone();
                real_ref.name = name;
                if let Some(ns) =
                    ann(annotations::DRY_RUN_RESOURCE_NAMESPACE).filter(|s| !s.is_empty())
                {
                    real_ref.namespace = Some(ns);
                }
                match real_ref.api(client.clone()).get_opt(&real_ref.name).await {
                    Ok(found) => found.map(|o| serde_json::to_value(o).unwrap_or(Value::Null)),
                    Err(e) => {
                        return Err(PipelineError::kube(
                            format!("getting {}", real_ref.describe()),
                            e,
                        ));
                    }
                }
            }
            None => None,
        };
        value = dry_run_view(&value, real.as_ref());
    }
    // managedFields are server bookkeeping, not part of the object a pipeline acts on.
    if let Some(meta) = value.get_mut("metadata").and_then(|m| m.as_object_mut()) {
        meta.remove("managedFields");
    }
    std::fs::create_dir_all(&args.input_dir).map_err(|e| PipelineError::io(&args.input_dir, e))?;
    if let Some(out) = &args.output_dir {
        std::fs::create_dir_all(out).map_err(|e| PipelineError::io(out, e))?;
    }
    let path = args.input_dir.join(OBJECT_FILE);
    std::fs::write(&path, yaml::to_string(&value)?).map_err(|e| PipelineError::io(&path, e))?;
    tracing::info!(object = %args.object.describe(), path = %path.display(), "wrote input object");
    Ok(path)
}

/// Writes `text` (a YAML document: a health check's `spec.input`) verbatim as
/// `<input_dir>/object.yaml` and creates `output_dir`. Returns the path written.
///
/// # Errors
/// [`PipelineError::InvalidYaml`] when `text` is not YAML, [`PipelineError::Io`] naming
/// the path when a directory or the file cannot be written.
pub fn write_input(
    input_dir: &std::path::Path,
    output_dir: &std::path::Path,
    text: &str,
) -> Result<PathBuf, PipelineError> {
    let path = input_dir.join(OBJECT_FILE);
    yaml::validate(&path, text)?;
    std::fs::create_dir_all(input_dir).map_err(|e| PipelineError::io(input_dir, e))?;
    std::fs::create_dir_all(output_dir).map_err(|e| PipelineError::io(output_dir, e))?;
    std::fs::write(&path, text).map_err(|e| PipelineError::io(&path, e))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ephemeral() -> Value {
        json!({
            "apiVersion": "example.com/v1", "kind": "App",
            "metadata": {"name": "kratix-dry-run-d1-abcde", "namespace": "team-a", "uid": "u1",
                "labels": {"kratix.io/dry-run": "true", "kratix.io/dry-run-owner": "d1", "team": "a"},
                "annotations": {"kratix.io/dry-run-resource-name": "shop", "kratix.io/dry-run-resource-namespace": "team-a"},
                "ownerReferences": [{"kind": "DryRun", "name": "d1"}]},
            "spec": {"replicas": 5}
        })
    }

    #[test]
    fn dry_run_uses_real_metadata_with_the_proposed_spec() {
        let real = json!({"apiVersion": "example.com/v1", "kind": "App",
            "metadata": {"name": "shop", "namespace": "team-a", "uid": "real"},
            "spec": {"replicas": 2}, "status": {"url": "x"}});
        let v = dry_run_view(&ephemeral(), Some(&real));
        assert_eq!(v["metadata"]["uid"], "real");
        assert_eq!(v["spec"]["replicas"], 5);
        assert_eq!(v["status"]["url"], "x");
    }

    #[test]
    fn dry_run_of_a_new_request_uses_the_intended_name() {
        let v = dry_run_view(&ephemeral(), None);
        assert_eq!(v["metadata"]["name"], "shop");
        assert_eq!(v["metadata"]["namespace"], "team-a");
        assert!(
            v["metadata"].get("uid").is_none() && v["metadata"].get("ownerReferences").is_none()
        );
        assert_eq!(v["metadata"]["labels"], json!({"team": "a"}));
        assert_eq!(v["metadata"]["annotations"], json!({}));
        assert_eq!(v["spec"]["replicas"], 5);
    }
}
