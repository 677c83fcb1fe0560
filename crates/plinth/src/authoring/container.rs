//! `plinth add container LIFECYCLE/ACTION/PIPELINE --image IMAGE`: a workflow step, as
//! kratix-cli adds it (the container in the Promise's or the split workflow file, and a
//! folder `workflows/<lifecycle>/<action>/<pipeline>/<container>/` with `scripts/`,
//! `resources/` and a `Dockerfile`), plus an entry in `images.yaml` so that Plinth's runner
//! runs the step's script in place of the image until the image is built and pushed.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::bail;
use serde_json::{Value, json};
use sha1::{Digest, Sha1};

use super::layout::{self, IMAGES_FILE, PROMISE_FILE, WORKFLOW_ACTIONS, WORKFLOW_TYPES};
use super::yaml;

/// Languages of the generated step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Language {
    /// A POSIX shell script.
    Bash,
    /// A Python 3 script (standard library only).
    Python,
    /// A Go program (standard library only), run with `go run`.
    Go,
    /// A Rust crate using Plinth's pipeline SDK (`plinth-pipeline`).
    Rust,
}

/// What to add.
#[derive(Clone, Debug)]
pub struct AddContainer {
    /// `promise` or `resource`.
    pub lifecycle: String,
    /// `configure` or `delete`.
    pub action: String,
    /// Pipeline name.
    pub pipeline: String,
    /// Container image.
    pub image: String,
    /// Container name (default: derived from the image, as kratix-cli does).
    pub name: Option<String>,
    /// Step language.
    pub language: Language,
    /// Source of `plinth-pipeline` for Rust steps (a path dependency).
    pub sdk_path: Option<PathBuf>,
}

impl AddContainer {
    /// Parses `LIFECYCLE/ACTION/PIPELINE`.
    ///
    /// # Errors
    /// A wrong number of parts, or an unknown lifecycle or action, named.
    pub fn parse_target(target: &str) -> anyhow::Result<(String, String, String)> {
        let parts: Vec<&str> = target.split('/').collect();
        let [lifecycle, action, pipeline] = parts.as_slice() else {
            bail!(
                "invalid pipeline {target:?}: expected LIFECYCLE/ACTION/PIPELINE-NAME, e.g. resource/configure/instance"
            );
        };
        if !WORKFLOW_TYPES.contains(lifecycle) {
            bail!("invalid lifecycle: {lifecycle}, expected one of: promise, resource");
        }
        if !WORKFLOW_ACTIONS.contains(action) {
            bail!("invalid action: {action}, expected one of: configure, delete");
        }
        if pipeline.is_empty() {
            bail!("pipeline name cannot be empty");
        }
        Ok((
            lifecycle.to_string(),
            action.to_string(),
            pipeline.to_string(),
        ))
    }
}

/// The container name kratix-cli derives from an image: the repository (no tag, no
/// digest; a registry's `:port` kept) with `/`, `.`, `:` and `_` turned into `-`, lower
/// case, at most 63 characters (longer names end in a hash) — a valid container name.
pub fn container_name(image: &str) -> String {
    let without_digest = image.split('@').next().unwrap_or(image);
    // A tag is after the last ':' that follows the last '/' (an earlier ':' is a port).
    let last_slash = without_digest.rfind('/').map_or(0, |i| i + 1);
    let repo = match without_digest[last_slash..].find(':') {
        Some(i) => &without_digest[..last_slash + i],
        None => without_digest,
    };
    let name: String = repo.to_ascii_lowercase().replace(['/', '.', ':', '_'], "-");
    let name = name.trim_matches('-').to_string();
    if name.len() <= 63 {
        return name;
    }
    let hash = hex::encode(Sha1::digest(name.as_bytes()));
    let suffix = &hash[..7];
    let prefix = name[..63 - suffix.len() - 1].trim_end_matches('-');
    format!("{prefix}-{suffix}")
}

/// Adds the step to the Promise in `dir`; returns the step folder (relative) and the
/// script users edit.
///
/// # Errors
/// No Promise in `dir`, a container of that name already in the pipeline, or a write
/// failure; the Promise file is written last, after the step's files.
pub fn add_container(dir: &Path, add: &AddContainer) -> anyhow::Result<(String, String)> {
    let name = add
        .name
        .clone()
        .unwrap_or_else(|| container_name(&add.image));
    let container = json!({"name": name, "image": add.image});
    let split = layout::is_split(dir);
    let (file, mut doc) = if split {
        let f = layout::workflow_file(dir, &add.lifecycle, &add.action);
        let list = layout::read_workflow(dir, &add.lifecycle, &add.action)?;
        (f, Value::Array(list))
    } else {
        (dir.join(PROMISE_FILE), layout::read_flat(dir)?)
    };
    let list = if split {
        &mut doc
    } else {
        let wf = &mut doc["spec"]["workflows"][&add.lifecycle][&add.action];
        if !wf.is_array() {
            *wf = json!([]);
        }
        wf
    };
    let pipelines = list.as_array_mut().expect("a list");
    match pipelines
        .iter_mut()
        .find(|p| p["metadata"]["name"] == add.pipeline.as_str())
    {
        Some(p) => {
            let containers = &mut p["spec"]["containers"];
            if !containers.is_array() {
                *containers = json!([]);
            }
            let cs = containers.as_array_mut().expect("a list");
            if cs.iter().any(|c| c["name"] == name.as_str()) {
                bail!(
                    "image '{name}' already exists in Pipeline '{}'",
                    add.pipeline
                );
            }
            cs.push(container);
        }
        None => pipelines.push(json!({
            "apiVersion": "platform.kratix.io/v1alpha1",
            "kind": "Pipeline",
            "metadata": {"name": add.pipeline},
            "spec": {"containers": [container]},
        })),
    }
    let step = format!(
        "workflows/{}/{}/{}/{name}",
        add.lifecycle, add.action, add.pipeline
    );
    let script = write_step(dir, &step, add)?;
    map_image(dir, &add.image, &script)?;
    yaml::write(&file, &doc)?;
    Ok((step, script))
}

/// Writes the step folder; returns the script the image map runs (relative to `dir`).
fn write_step(dir: &Path, step: &str, add: &AddContainer) -> anyhow::Result<String> {
    let root = dir.join(step);
    // Git keeps no empty directory, and the Dockerfile's `ADD resources` fails without
    // one: a placeholder keeps it (the templates never ship hidden files).
    yaml::write_text(&root.join("resources/.gitkeep"), "")?;
    let (script, text, dockerfile) = match add.language {
        Language::Bash => ("pipeline.sh", BASH, DOCKERFILE_BASH.to_string()),
        Language::Python => ("pipeline.py", PYTHON, DOCKERFILE_PYTHON.to_string()),
        Language::Go => ("run.sh", GO_RUN, DOCKERFILE_GO.to_string()),
        Language::Rust => ("run.sh", RUST_RUN, DOCKERFILE_RUST.to_string()),
    };
    match add.language {
        Language::Go => yaml::write_text(&root.join("scripts/pipeline.go"), GO)?,
        Language::Rust => {
            yaml::write_text(&root.join("Cargo.toml"), &rust_manifest(add))?;
            yaml::write_text(&root.join("src/main.rs"), RUST_MAIN)?;
        }
        _ => {}
    }
    let script_path = root.join("scripts").join(script);
    yaml::write_text(&script_path, text)?;
    std::fs::set_permissions(&script_path, std::fs::Permissions::from_mode(0o755))?;
    yaml::write_text(&root.join("Dockerfile"), &dockerfile)?;
    Ok(format!("{step}/scripts/{script}"))
}

/// Adds or replaces the image's entry in `images.yaml`.
fn map_image(dir: &Path, image: &str, script: &str) -> anyhow::Result<()> {
    let path = dir.join(IMAGES_FILE);
    let mut map = if path.is_file() {
        yaml::read_one(&path)?
    } else {
        json!({"images": []})
    };
    if !map["images"].is_array() {
        bail!("{} has no `images` list", path.display());
    }
    let list = map["images"].as_array_mut().expect("a list");
    list.retain(|e| e["image"] != image);
    list.push(json!({"image": image, "command": [format!("./{script}")]}));
    yaml::write(&path, &map)
}

fn rust_manifest(add: &AddContainer) -> String {
    let sdk = add
        .sdk_path
        .clone()
        .or_else(|| {
            let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("../plinth-pipeline");
            here.canonicalize().ok()
        })
        .map(|p| format!("{{ path = \"{}\" }}", p.display()))
        .unwrap_or_else(|| "\"0.1\"".into());
    format!(
        "[package]\nname = \"pipeline\"\nversion = \"0.1.0\"\nedition = \"2024\"\n\n\
         [dependencies]\nplinth-pipeline = {sdk}\nserde_json = \"1\"\n\n[workspace]\n"
    )
}

const BASH: &str = include_str!("templates/pipeline.sh");
const DOCKERFILE_BASH: &str = include_str!("templates/Dockerfile.bash");
const PYTHON: &str = include_str!("templates/pipeline.py");
const DOCKERFILE_PYTHON: &str = include_str!("templates/Dockerfile.python");
const GO: &str = include_str!("templates/pipeline.go");
const GO_RUN: &str = include_str!("templates/run-go.sh");
const DOCKERFILE_GO: &str = include_str!("templates/Dockerfile.go");
const RUST_MAIN: &str = include_str!("templates/main.rs.txt");
const RUST_RUN: &str = include_str!("templates/run-rust.sh");
const DOCKERFILE_RUST: &str = include_str!("templates/Dockerfile.rust");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_names_follow_kratix_cli() {
        assert_eq!(
            container_name("ghcr.io/org/app-configure:v1"),
            "ghcr-io-org-app-configure"
        );
        // A registry port is not a tag; a digest is dropped.
        assert_eq!(
            container_name("localhost:5000/a/b:v1"),
            "localhost-5000-a-b"
        );
        let digest = format!("busybox@sha256:{}", "0".repeat(64));
        assert_eq!(container_name(&digest), "busybox");
        assert_eq!(container_name("Registry.io/a_b:1"), "registry-io-a-b");
        let long = format!("registry.example.org/{}:v1", "x".repeat(80));
        let n = container_name(&long);
        assert!(n.len() <= 63, "{n}");
        assert_eq!(n, container_name(&long));
    }

    #[test]
    fn every_language_gets_the_step_layout_with_resources() {
        for (i, language) in [
            Language::Bash,
            Language::Python,
            Language::Go,
            Language::Rust,
        ]
        .into_iter()
        .enumerate()
        {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(
                dir.path().join(PROMISE_FILE),
                "apiVersion: platform.kratix.io/v1alpha1\nkind: Promise\nmetadata: {name: app}\nspec: {}\n",
            )
            .unwrap();
            let add = AddContainer {
                lifecycle: "resource".into(),
                action: "configure".into(),
                pipeline: "instance".into(),
                image: format!("example.org/step{i}:v1"),
                name: None,
                language,
                sdk_path: None,
            };
            let (step, script) = add_container(dir.path(), &add).unwrap();
            let root = dir.path().join(&step);
            for part in ["resources", "scripts"] {
                assert!(root.join(part).is_dir(), "{language:?}: no {step}/{part}/");
            }
            assert!(root.join("resources/.gitkeep").is_file(), "{language:?}");
            assert!(root.join("Dockerfile").is_file(), "{language:?}");
            assert!(dir.path().join(&script).is_file(), "{language:?}: {script}");
        }
    }

    #[test]
    fn targets_are_checked() {
        assert!(AddContainer::parse_target("resource/configure/instance").is_ok());
        let e = AddContainer::parse_target("resources/configure/x").unwrap_err();
        assert!(e.to_string().contains("invalid lifecycle"), "{e}");
        let e = AddContainer::parse_target("resource/update/x").unwrap_err();
        assert!(e.to_string().contains("invalid action"), "{e}");
        assert!(AddContainer::parse_target("resource/configure").is_err());
    }
}
