//! Promise test cases: render a request and compare what it produced with recorded
//! expectations, YAML-aware.
//!
//! A case is a folder `tests/<case>/` of the Promise directory:
//!
//! ```text
//! request.yaml          the resource request (required)
//! status.yaml           a status the request already has (optional)
//! destinations.yaml     Destinations to schedule to (optional; default as `plinth up`)
//! objects.yaml          extra objects applied before the request (optional)
//! expected/
//!   status.yaml         the status the request gets (timestamps left out)
//!   selectors.yaml      every workload group's selectors and Destinations
//!   outputs/<destination>/<path in the state store>   every file written
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use serde_json::{Value, json};

use super::render::{Progress, RenderInput, Rendered, render};
use super::yaml;

/// The folder of expectations inside a case.
pub const EXPECTED_DIR: &str = "expected";

/// One case's outcome.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// Everything matched.
    Passed,
    /// Expectations were rewritten.
    Updated,
    /// Differences (unified diffs) or a failed pipeline, as printable text.
    Failed(String),
}

/// The test cases under `dir/tests`, in name order.
///
/// # Errors
/// The folder cannot be read.
pub fn find_cases(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let tests = dir.join(super::layout::TESTS_DIR);
    if !tests.is_dir() {
        return Ok(Vec::new());
    }
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&tests)
        .with_context(|| format!("reading {}", tests.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("request.yaml").is_file())
        .collect();
    cases.sort();
    Ok(cases)
}

/// Renders one case with `promise` and compares (or, with `update`, records) its
/// expectations.
///
/// # Errors
/// A case file is invalid, or the render could not run (not a pipeline failure, which is
/// an [`Outcome::Failed`]).
pub async fn run_case(
    case: &Path,
    promise: &Value,
    image_map: Option<&Path>,
    update: bool,
    timeout: Duration,
    progress: &dyn Progress,
) -> anyhow::Result<Outcome> {
    let optional = |f: &str| -> anyhow::Result<Vec<Value>> {
        let p = case.join(f);
        if p.is_file() {
            yaml::read_docs(&p)
        } else {
            Ok(Vec::new())
        }
    };
    let input = RenderInput {
        promise: promise.clone(),
        request: Some(yaml::read_one(&case.join("request.yaml"))?),
        existing_status: optional("status.yaml")?.into_iter().next(),
        destinations: optional("destinations.yaml")?,
        objects: optional("objects.yaml")?,
        image_map: image_map.map(Path::to_path_buf),
        pipeline: None,
        timeout,
    };
    let rendered = render(&input, progress).await?;
    if let Some(f) = &rendered.failure {
        let mut text = format!("{}\n", crate::cmd::render::failure_line(f));
        for (c, log) in &f.logs {
            text.push_str(&format!("--- log of {c}:\n{log}\n"));
        }
        return Ok(Outcome::Failed(text));
    }
    let actual = actual_files(&rendered);
    let expected_dir = case.join(EXPECTED_DIR);
    if update {
        if expected_dir.exists() {
            std::fs::remove_dir_all(&expected_dir)
                .with_context(|| format!("removing {}", expected_dir.display()))?;
        }
        for (rel, text) in &actual {
            yaml::write_text(&expected_dir.join(rel), text)?;
        }
        return Ok(Outcome::Updated);
    }
    if !expected_dir.is_dir() {
        return Ok(Outcome::Failed(format!(
            "no expectations recorded in {}; run `plinth test --update` to record them\n",
            expected_dir.display()
        )));
    }
    let expected = read_tree(&expected_dir)?;
    let diffs = compare(&expected, &actual);
    Ok(if diffs.is_empty() {
        Outcome::Passed
    } else {
        Outcome::Failed(diffs)
    })
}

/// The files a render gives a case: scheduled outputs, status and selectors.
pub fn actual_files(r: &Rendered) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for f in r.outputs.iter().filter(|f| f.scheduled) {
        out.insert(
            format!("outputs/{}/{}", f.destination, f.path),
            f.content.clone(),
        );
    }
    out.insert("status.yaml".into(), yaml::to_yaml(&r.status));
    let groups: Vec<Value> = r
        .groups
        .iter()
        .map(|g| {
            json!({
                "pipeline": g.pipeline,
                "directory": g.directory,
                "selectors": g.selectors,
                "destinations": g.scheduled,
            })
        })
        .collect();
    out.insert(
        "selectors.yaml".into(),
        yaml::to_yaml(&Value::Array(groups)),
    );
    out
}

fn read_tree(root: &Path) -> anyhow::Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir)
            .with_context(|| format!("reading {}", dir.display()))?
            .flatten()
        {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p
                    .strip_prefix(root)
                    .expect("under root")
                    .to_string_lossy()
                    .into_owned();
                let text = std::fs::read_to_string(&p)
                    .with_context(|| format!("reading {}", p.display()))?;
                out.insert(rel, text);
            }
        }
    }
    Ok(out)
}

/// Unified diffs of every file that differs, is missing or is unexpected.
pub fn compare(expected: &BTreeMap<String, String>, actual: &BTreeMap<String, String>) -> String {
    let mut out = String::new();
    let keys: std::collections::BTreeSet<&String> = expected.keys().chain(actual.keys()).collect();
    for k in keys {
        match (expected.get(k), actual.get(k)) {
            (Some(e), Some(a)) => {
                if let Some(d) = yaml::yaml_diff(e, a, k) {
                    out.push_str(&d);
                }
            }
            (Some(e), None) => {
                out.push_str(&format!("missing output {k}\n"));
                if let Some(d) = yaml::yaml_diff(e, "", k) {
                    out.push_str(&d);
                }
            }
            (None, Some(a)) => {
                out.push_str(&format!("unexpected output {k}\n"));
                if let Some(d) = yaml::yaml_diff("", a, k) {
                    out.push_str(&d);
                }
            }
            (None, None) => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_unexpected_and_changed_files_are_reported() {
        let e = BTreeMap::from([
            ("a.yaml".to_string(), "x: 1\ny: 2\n".to_string()),
            ("gone.yaml".to_string(), "k: v\n".to_string()),
        ]);
        let a = BTreeMap::from([
            ("a.yaml".to_string(), "y: 2\nx: 1\n".to_string()),
            ("new.yaml".to_string(), "k: w\n".to_string()),
        ]);
        let d = compare(&e, &a);
        assert!(d.contains("missing output gone.yaml"), "{d}");
        assert!(d.contains("unexpected output new.yaml"), "{d}");
        assert!(!d.contains("a.yaml"), "reordered keys are equal: {d}");
    }
}
