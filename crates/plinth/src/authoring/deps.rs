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

/// Name of the container `--image` puts dependencies in, as kratix-cli names it.
pub const DEPS_CONTAINER: &str = "configure-deps";
/// Name of the Promise configure pipeline it goes in.
pub const DEPS_PIPELINE: &str = "dependencies";

/// `update dependencies PATH --image IMAGE`: the dependencies become the `resources/` of a
/// Promise configure step (`promise/configure/dependencies/configure-deps`) whose script
/// copies them to the output, and the static dependencies are cleared, as kratix-cli does.
/// Returns the step folder (relative).
///
/// # Errors
/// As [`update_dependencies`], or the step cannot be written.
pub fn dependencies_as_workflow(dir: &Path, path: &Path, image: &str) -> anyhow::Result<String> {
    if collect(path)?.is_empty() {
        bail!(
            "no YAML objects found in {}; nothing to update",
            path.display()
        );
    }
    let step = format!("workflows/promise/configure/{DEPS_PIPELINE}/{DEPS_CONTAINER}");
    if !dir.join(&step).is_dir() {
        super::container::add_container(
            dir,
            &super::container::AddContainer {
                lifecycle: "promise".into(),
                action: "configure".into(),
                pipeline: DEPS_PIPELINE.into(),
                image: image.into(),
                name: Some(DEPS_CONTAINER.into()),
                language: super::container::Language::Bash,
                sdk_path: None,
            },
        )?;
    }
    let resources = dir.join(&step).join("resources");
    copy_tree(path, &resources)?;
    if layout::is_split(dir) {
        let deps = dir.join(DEPENDENCIES_FILE);
        if deps.exists() {
            std::fs::remove_file(&deps).with_context(|| format!("removing {}", deps.display()))?;
        }
    } else {
        let mut p = layout::read_flat(dir)?;
        if let Some(spec) = p["spec"].as_object_mut() {
            spec.remove("dependencies");
        }
        yaml::write(&dir.join(PROMISE_FILE), &p)?;
    }
    Ok(step)
}

fn copy_tree(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to).with_context(|| format!("creating {}", to.display()))?;
    if from.is_file() {
        let name = from.file_name().context("a file name")?;
        std::fs::copy(from, to.join(name))
            .with_context(|| format!("copying {}", from.display()))?;
        return Ok(());
    }
    for e in std::fs::read_dir(from)
        .with_context(|| format!("reading {}", from.display()))?
        .flatten()
    {
        let p = e.path();
        if p.is_dir() {
            copy_tree(&p, &to.join(e.file_name()))?;
        } else {
            std::fs::copy(&p, to.join(e.file_name()))
                .with_context(|| format!("copying {}", p.display()))?;
        }
    }
    Ok(())
}
