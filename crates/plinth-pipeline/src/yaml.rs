//! YAML helpers: generous parser budgets (pipeline outputs can be large CRD
//! bundles) and errors that name the file, line and column.

use crate::PipelineError;
use serde::de::DeserializeOwned;
use std::path::Path;

fn options() -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_events = 100_000_000;
    budget.max_nodes = 50_000_000;
    budget.max_documents = 1_000_000;
    budget.max_depth = 512;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options
}

fn yaml_error(path: &Path, e: serde_saphyr::Error) -> PipelineError {
    let location = e.location().map(|l| (l.line(), l.column()));
    PipelineError::InvalidYaml {
        path: path.to_path_buf(),
        location,
        message: e.to_string(),
    }
}

/// Checks that `text` is a valid YAML stream (any number of documents).
pub(crate) fn validate(path: &Path, text: &str) -> Result<(), PipelineError> {
    serde_saphyr::from_multiple_with_options::<serde::de::IgnoredAny>(text, options())
        .map(|_| ())
        .map_err(|e| yaml_error(path, e))
}

/// Parses a single YAML document; an empty file or `null` gives `None`.
pub(crate) fn parse_one<T: DeserializeOwned>(
    path: &Path,
    text: &str,
) -> Result<Option<T>, PipelineError> {
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple_with_options(text, options())
        .map_err(|e| yaml_error(path, e))?;
    let mut docs: Vec<serde_json::Value> = docs.into_iter().filter(|d| !d.is_null()).collect();
    match docs.len() {
        0 => Ok(None),
        1 => serde_json::from_value(docs.remove(0))
            .map(Some)
            .map_err(|e| PipelineError::InvalidYaml {
                path: path.to_path_buf(),
                location: None,
                message: e.to_string(),
            }),
        n => Err(PipelineError::InvalidYaml {
            path: path.to_path_buf(),
            location: None,
            message: format!("expected one YAML document, found {n}"),
        }),
    }
}

/// Reads and parses an optional single-document YAML file (`None` when missing or empty).
pub(crate) fn read_optional<T: DeserializeOwned>(path: &Path) -> Result<Option<T>, PipelineError> {
    match std::fs::read_to_string(path) {
        Ok(text) => parse_one(path, &text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(PipelineError::io(path, e)),
    }
}

/// Renders a value as YAML.
pub(crate) fn to_string<T: serde::Serialize>(value: &T) -> Result<String, PipelineError> {
    serde_saphyr::to_string(value)
        .map_err(|e| PipelineError::Config(format!("rendering YAML: {e}")))
}
