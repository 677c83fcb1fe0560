//! The Promise directory, in kratix-cli's layout.
//!
//! Flat (the default): `promise.yaml` holds the whole Promise; `add container` edits its
//! workflows. Split (`init promise --split`): `api.yaml` (the CRD), `dependencies.yaml`
//! (a list of objects, may be empty) and `workflows/<promise|resource>/<configure|delete>/
//! workflow.yaml` (a list of Pipelines); `build promise` assembles them into one Promise.
//! Both layouts also hold `example-resource.yaml`, `README.md`, the pipeline step folders
//! `workflows/<type>/<action>/<pipeline>/<container>/`, and, Plinth's additions,
//! `images.yaml` (the runner's image map for the steps' scripts) and `tests/<case>/`.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use serde_json::{Value, json};

use super::yaml;

/// The flat layout's Promise file.
pub const PROMISE_FILE: &str = "promise.yaml";
/// The split layout's API (CRD) file.
pub const API_FILE: &str = "api.yaml";
/// The split layout's dependencies file.
pub const DEPENDENCIES_FILE: &str = "dependencies.yaml";
/// The example request.
pub const EXAMPLE_FILE: &str = "example-resource.yaml";
/// The runner image map of the Promise's steps.
pub const IMAGES_FILE: &str = "images.yaml";
/// The folder of test cases.
pub const TESTS_DIR: &str = "tests";
/// Label holding the Promise's version.
pub const VERSION_LABEL: &str = plinth_api::constants::labels::PROMISE_VERSION;

/// The workflow types (`promise`, `resource`) and actions (`configure`, `delete`).
pub const WORKFLOW_TYPES: [&str; 2] = ["promise", "resource"];
/// See [`WORKFLOW_TYPES`].
pub const WORKFLOW_ACTIONS: [&str; 2] = ["configure", "delete"];

/// True when `dir` uses the split layout (it has `api.yaml`).
pub fn is_split(dir: &Path) -> bool {
    dir.join(API_FILE).is_file()
}

/// `workflows/<type>/<action>/workflow.yaml` of the split layout.
pub fn workflow_file(dir: &Path, workflow_type: &str, action: &str) -> PathBuf {
    dir.join("workflows")
        .join(workflow_type)
        .join(action)
        .join("workflow.yaml")
}

/// Reads `promise.yaml` of a flat layout.
///
/// # Errors
/// The file is missing (the error says to run `plinth init promise`) or not a Promise.
pub fn read_flat(dir: &Path) -> anyhow::Result<Value> {
    let path = dir.join(PROMISE_FILE);
    if !path.is_file() {
        bail!(
            "no {PROMISE_FILE} or {API_FILE} in {}; run `plinth init promise` first",
            dir.display()
        );
    }
    let p = yaml::read_one(&path)?;
    if p["kind"] != "Promise" {
        bail!("{} holds kind {} (want Promise)", path.display(), p["kind"]);
    }
    Ok(p)
}

/// The pipelines of a split layout's workflow file (empty when it does not exist).
///
/// # Errors
/// The file is not a YAML list.
pub fn read_workflow(dir: &Path, workflow_type: &str, action: &str) -> anyhow::Result<Vec<Value>> {
    let path = workflow_file(dir, workflow_type, action);
    if !path.is_file() {
        return Ok(Vec::new());
    }
    let docs = yaml::read_docs(&path)?;
    match docs.as_slice() {
        [] => Ok(Vec::new()),
        [Value::Array(a)] => Ok(a.clone()),
        _ => bail!("{} must hold one YAML list of Pipelines", path.display()),
    }
}

/// The Promise a directory describes: `promise.yaml` as it is (flat), or assembled from
/// the split files, named `name` (else the existing `promise.yaml`'s name, else the
/// directory's name).
///
/// # Errors
/// Missing or invalid files, each named.
pub fn assemble(dir: &Path, name: Option<&str>) -> anyhow::Result<Value> {
    if !is_split(dir) {
        let mut p = read_flat(dir)?;
        if let Some(n) = name {
            p["metadata"]["name"] = json!(n);
        }
        return Ok(p);
    }
    let existing = dir
        .join(PROMISE_FILE)
        .is_file()
        .then(|| yaml::read_one(&dir.join(PROMISE_FILE)).ok())
        .flatten();
    let name = match name {
        Some(n) => n.to_string(),
        None => match existing
            .as_ref()
            .and_then(|p| p["metadata"]["name"].as_str())
        {
            Some(n) => n.to_string(),
            None => dir_name(dir)?,
        },
    };
    let labels = existing
        .as_ref()
        .map(|p| p["metadata"]["labels"].clone())
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({VERSION_LABEL: "v0.0.1"}));
    let mut spec = serde_json::Map::new();
    spec.insert("api".into(), yaml::read_one(&dir.join(API_FILE))?);
    let deps_path = dir.join(DEPENDENCIES_FILE);
    if deps_path.is_file() {
        match yaml::read_docs(&deps_path)?.as_slice() {
            [] => {}
            [Value::Array(a)] if a.is_empty() => {}
            [Value::Array(a)] => {
                spec.insert("dependencies".into(), Value::Array(a.clone()));
            }
            _ => bail!("{} must hold one YAML list of objects", deps_path.display()),
        }
    }
    let mut workflows = serde_json::Map::new();
    for t in WORKFLOW_TYPES {
        let mut actions = serde_json::Map::new();
        for a in WORKFLOW_ACTIONS {
            let pipelines = read_workflow(dir, t, a)?;
            if !pipelines.is_empty() {
                actions.insert(a.into(), Value::Array(pipelines));
            }
        }
        if !actions.is_empty() {
            workflows.insert(t.into(), Value::Object(actions));
        }
    }
    if !workflows.is_empty() {
        spec.insert("workflows".into(), Value::Object(workflows));
    }
    Ok(json!({
        "apiVersion": "platform.kratix.io/v1alpha1",
        "kind": "Promise",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
    }))
}

/// The directory's own name (for a Promise name).
fn dir_name(dir: &Path) -> anyhow::Result<String> {
    let abs = dir
        .canonicalize()
        .with_context(|| format!("reading {}", dir.display()))?;
    abs.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .context("the directory has no name; give the Promise name")
}
