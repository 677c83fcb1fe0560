//! `destination-selectors.yaml` (written by pipelines) and the promise-scheduling file
//! (written by Kratix from the Promise's `destinationSelectors`).

use crate::{PipelineError, yaml};
use plinth_api::WorkloadGroupScheduling;
use plinth_api::contract::{DESTINATION_SELECTORS_FILE, PROMISE_SCHEDULING_FILE};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// One entry of `destination-selectors.yaml`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DestinationSelectorEntry {
    /// Top-level output directory this entry schedules; absent or `.` = the default group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directory: Option<String>,
    /// Labels a Destination must carry (at least one).
    #[serde(default)]
    pub match_labels: BTreeMap<String, String>,
}

/// A validated selector entry.
#[derive(Clone, Debug, PartialEq)]
pub struct ScheduledDirectory {
    /// Cleaned directory (`.` for the default group).
    pub directory: String,
    /// Labels.
    pub match_labels: BTreeMap<String, String>,
}

impl ScheduledDirectory {
    /// True for the default (root) group entry.
    pub fn is_root(&self) -> bool {
        self.directory == "."
    }
}

/// Lexical path cleaning as Go's `filepath.Clean` does: collapses `//`, drops `.`
/// elements, resolves `name/..`; empty → `.`.
pub fn clean_path(p: &str) -> String {
    let absolute = p.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in p.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|l| *l != "..") {
                    parts.pop();
                } else if !absolute {
                    parts.push("..");
                }
            }
            other => parts.push(other),
        }
    }
    let joined = parts.join("/");
    match (absolute, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_string(),
        (false, false) => joined,
    }
}

/// Parses and validates `destination-selectors.yaml` text: each entry's
/// `directory` is cleaned; it must be `.`/absent or a single relative path element (no
/// `..`, no `/`); each entry needs at least one label; directories must be unique.
pub fn parse_destination_selectors(
    text: &str,
    file: &Path,
) -> Result<Vec<ScheduledDirectory>, PipelineError> {
    let entries: Vec<DestinationSelectorEntry> = yaml::parse_one(file, text)?.unwrap_or_default();
    let mut seen = BTreeSet::new();
    let mut out = Vec::with_capacity(entries.len());
    for (i, e) in entries.into_iter().enumerate() {
        let raw = e.directory.clone().unwrap_or_default();
        let dir = clean_path(&raw);
        let bad = |reason: String| {
            PipelineError::metadata(DESTINATION_SELECTORS_FILE, format!("entry {i}: {reason}"))
        };
        if dir.starts_with('/') {
            return Err(bad(format!(
                "directory {raw:?} must be relative to the output directory"
            )));
        }
        if dir == ".." || dir.starts_with("../") {
            return Err(bad(format!(
                "directory {raw:?} leaves the output directory"
            )));
        }
        if dir.contains('/') {
            return Err(bad(format!(
                "directory {raw:?} is nested; only top-level directories can be scheduled"
            )));
        }
        if e.match_labels.is_empty() {
            return Err(bad(format!(
                "directory {dir:?} has no matchLabels; at least one label is required"
            )));
        }
        if !seen.insert(dir.clone()) {
            return Err(bad(format!("directory {dir:?} is listed more than once")));
        }
        out.push(ScheduledDirectory {
            directory: dir,
            match_labels: e.match_labels,
        });
    }
    Ok(out)
}

/// Reads `<metadata_dir>/destination-selectors.yaml` (missing = no entries).
pub fn read_destination_selectors(
    metadata_dir: &Path,
) -> Result<Vec<ScheduledDirectory>, PipelineError> {
    let path = metadata_dir.join(DESTINATION_SELECTORS_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => parse_destination_selectors(&text, &path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(PipelineError::io(path, e)),
    }
}

/// Reads the promise-scheduling file: a YAML list of `{matchLabels, source}` (missing file
/// or `None` path = no entries).
pub fn read_promise_scheduling(
    path: Option<&Path>,
) -> Result<Vec<WorkloadGroupScheduling>, PipelineError> {
    let Some(path) = path else {
        return Ok(Vec::new());
    };
    let list: Option<Vec<WorkloadGroupScheduling>> =
        yaml::read_optional(path).map_err(|e| match e {
            PipelineError::InvalidYaml { message, .. } => PipelineError::metadata(
                PROMISE_SCHEDULING_FILE,
                format!("{}: {message}", path.display()),
            ),
            other => other,
        })?;
    Ok(list.unwrap_or_default())
}

/// Squashes the `matchLabels` of entries with `source` into one map; on a key conflict the
/// first entry wins. `None` when the result is empty.
pub fn squash(
    entries: &[WorkloadGroupScheduling],
    source: &str,
) -> Option<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for e in entries
        .iter()
        .filter(|e| e.source.as_deref() == Some(source))
    {
        for (k, v) in e.match_labels.iter().flatten() {
            out.entry(k.clone()).or_insert_with(|| v.clone());
        }
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<ScheduledDirectory>, PipelineError> {
        parse_destination_selectors(text, Path::new("destination-selectors.yaml"))
    }

    #[test]
    fn clean_matches_go() {
        assert_eq!(clean_path(""), ".");
        assert_eq!(clean_path("./dev/"), "dev");
        assert_eq!(clean_path("a//b/../c"), "a/c");
        assert_eq!(clean_path("../x"), "../x");
        assert_eq!(clean_path("/a/../.."), "/");
    }

    #[test]
    fn valid_entries() {
        let s =
            parse("- directory: ./dev/\n  matchLabels: {env: dev}\n- matchLabels: {env: prod}\n")
                .unwrap();
        assert_eq!(s[0].directory, "dev");
        assert!(s[1].is_root());
        assert!(parse("").unwrap().is_empty());
    }

    #[test]
    fn invalid_entries_are_named() {
        let e = parse("- directory: a/b\n  matchLabels: {x: z}\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("nested"), "{e}");
        let e = parse("- directory: dev\n  matchLabels: {}\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("at least one label"), "{e}");
        let e = parse(
            "- directory: dev\n  matchLabels: {a: b}\n- directory: ./dev\n  matchLabels: {a: c}\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("more than once"), "{e}");
        let e = parse("- directory: ../up\n  matchLabels: {a: b}\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("leaves the output directory"), "{e}");
        let e = parse("- matchLabels: {a: b}\n- directory: .\n  matchLabels: {a: b}\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("more than once"), "{e}");
    }

    #[test]
    fn squash_first_wins() {
        let e = |k: &str, v: &str, s: &str| WorkloadGroupScheduling {
            match_labels: Some([(k.to_string(), v.to_string())].into()),
            source: Some(s.into()),
            ..Default::default()
        };
        let list = vec![
            e("env", "dev", "promise"),
            e("env", "prod", "promise"),
            e("zone", "a", "promise-workflow"),
        ];
        assert_eq!(squash(&list, "promise").unwrap()["env"], "dev");
        assert_eq!(squash(&list, "promise-workflow").unwrap()["zone"], "a");
        assert!(squash(&list, "resource-workflow").is_none());
    }
}
