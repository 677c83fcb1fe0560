//! `plinth update dependencies PATH`: the Promise's static dependencies from a file or a
//! directory of YAML files (recursively), as kratix-cli does: into `dependencies.yaml`
//! (split) or `promise.yaml`'s `spec.dependencies` (flat). Objects without a namespace
//! get `default`, as kratix-cli gives them.

use std::path::Path;

use anyhow::{Context as _, bail};
use serde_json::{Value, json};

use super::layout::{self, DEPENDENCIES_FILE, PROMISE_FILE};
use super::yaml;

/// Reads the dependencies under `path` and stores them in the Promise in `dir`; returns
/// the file changed and how many objects it holds.
///
/// # Errors
/// `path` does not exist or holds no YAML object, a file is not valid YAML (named), or
/// there is no Promise in `dir`.
pub fn update_dependencies(dir: &Path, path: &Path) -> anyhow::Result<(String, usize)> {
    let deps = collect(path)?;
    if deps.is_empty() {
        bail!(
            "no YAML objects found in {}; nothing to update",
            path.display()
        );
    }
    let n = deps.len();
    let flat = !dir.join(DEPENDENCIES_FILE).is_file()
        && dir.join(PROMISE_FILE).is_file()
        && !layout::is_split(dir);
    if flat {
        let mut p = layout::read_flat(dir)?;
        p["spec"]["dependencies"] = Value::Array(deps);
        yaml::write(&dir.join(PROMISE_FILE), &p)?;
        Ok((PROMISE_FILE.into(), n))
    } else {
        yaml::write(&dir.join(DEPENDENCIES_FILE), &Value::Array(deps))?;
        Ok((DEPENDENCIES_FILE.into(), n))
    }
}

fn collect(path: &Path) -> anyhow::Result<Vec<Value>> {
    let meta = std::fs::metadata(path).with_context(|| format!("reading {}", path.display()))?;
    if meta.is_file() {
        return from_file(path);
    }
    let mut entries: Vec<_> = std::fs::read_dir(path)
        .with_context(|| format!("reading {}", path.display()))?
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    let mut out = Vec::new();
    for e in entries {
        if e.is_dir() {
            out.extend(collect(&e)?);
        } else if e.extension().is_some_and(|x| x == "yaml" || x == "yml") {
            out.extend(from_file(&e)?);
        }
    }
    Ok(out)
}

fn from_file(path: &Path) -> anyhow::Result<Vec<Value>> {
    let mut out = Vec::new();
    for mut doc in yaml::read_docs(path)? {
        if !doc.is_object() || doc["kind"].as_str().is_none_or(str::is_empty) {
            bail!(
                "{}: a document is not a Kubernetes object (no kind)",
                path.display()
            );
        }
        if doc["metadata"]["namespace"]
            .as_str()
            .is_none_or(str::is_empty)
        {
            doc["metadata"]["namespace"] = json!("default");
        }
        out.push(doc);
    }
    Ok(out)
}
