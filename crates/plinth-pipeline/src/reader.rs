//! The reader role: writes the pipeline's object to `/kratix/input/object.yaml`
//! (kratix-spec §4.3, §4.5).

use crate::contract::OBJECT_FILE;
use crate::object::ObjectRef;
use crate::{PipelineError, yaml};
use kube::Client;
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
}

/// GETs the object (full, including status) and writes it as YAML to
/// `<input_dir>/object.yaml`. Returns the path written.
pub async fn run_reader(client: Client, args: ReaderArgs) -> Result<PathBuf, PipelineError> {
    let obj = args.object.get(client).await?;
    let mut value = serde_json::to_value(&obj).map_err(|e| PipelineError::Json {
        context: format!("serialising {}", args.object.describe()),
        source: e,
    })?;
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
