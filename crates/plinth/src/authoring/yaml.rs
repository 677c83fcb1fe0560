//! YAML reading, writing and comparison for the authoring commands.
//!
//! Documents are read with `serde-saphyr` (which refuses duplicate mapping keys) into
//! `serde_json::Value`, so generated files can never carry a key twice, and compared
//! "YAML-aware": every document is re-serialised with its mapping keys sorted, so key
//! order, quoting, indentation and comments do not count as differences.

use std::path::Path;

use anyhow::Context as _;
use serde_json::{Map, Value};

/// Every non-empty YAML document of `text`; `what` names the source in errors.
///
/// # Errors
/// A parse error (duplicate keys included) naming `what`.
pub fn parse_docs(text: &str, what: &str) -> anyhow::Result<Vec<Value>> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(text)
        .map_err(|e| anyhow::anyhow!("{what} is not valid YAML: {e}"))?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// Every non-empty YAML document of the file at `path`.
///
/// # Errors
/// The file cannot be read or is not valid YAML; the error names the file.
pub fn read_docs(path: &Path) -> anyhow::Result<Vec<Value>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    parse_docs(&text, &path.display().to_string())
}

/// The single document of the file at `path`.
///
/// # Errors
/// As [`read_docs`], or the file holds no document or more than one.
pub fn read_one(path: &Path) -> anyhow::Result<Value> {
    let mut docs = read_docs(path)?;
    match docs.len() {
        1 => Ok(docs.remove(0)),
        0 => anyhow::bail!("{} holds no YAML document", path.display()),
        n => anyhow::bail!(
            "{} holds {n} YAML documents; one was expected",
            path.display()
        ),
    }
}

/// `value` as one YAML document (keys in their current order).
pub fn to_yaml(value: &Value) -> String {
    serde_saphyr::to_string(value).unwrap_or_else(|_| format!("{value}\n"))
}

/// Writes `value` as YAML to `path`, creating parent directories.
///
/// # Errors
/// The file cannot be written; the error names it.
pub fn write(path: &Path, value: &Value) -> anyhow::Result<()> {
    write_text(path, &to_yaml(value))
}

/// Writes `text` to `path`, creating parent directories.
///
/// # Errors
/// The file cannot be written; the error names it.
pub fn write_text(path: &Path, text: &str) -> anyhow::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("creating {}", parent.display()))?;
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// `value` with every mapping's keys in sorted order (recursively).
pub fn sorted(value: &Value) -> Value {
    match value {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let mut out = Map::new();
            for k in keys {
                out.insert(k.clone(), sorted(&m[k]));
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

/// The canonical text of a file for comparison: YAML documents re-serialised with sorted
/// keys; text that is not YAML (or is a single plain string) is compared as it is.
pub fn canonical(text: &str) -> String {
    match serde_saphyr::from_multiple::<Value>(text) {
        Ok(docs) if !docs.iter().all(|d| d.is_string() || d.is_null()) => docs
            .iter()
            .filter(|d| !d.is_null())
            .map(|d| to_yaml(&sorted(d)))
            .collect::<Vec<_>>()
            .join("---\n"),
        _ => text.to_string(),
    }
}

/// A unified diff of `expected` against `actual` after canonicalising both, or `None`
/// when they are equal as YAML. `label` names the file in the `---`/`+++` headers.
pub fn yaml_diff(expected: &str, actual: &str, label: &str) -> Option<String> {
    labelled_diff(
        expected,
        actual,
        &format!("expected/{label}"),
        &format!("actual/{label}"),
    )
}

/// [`yaml_diff`] with the headers `--- old` and `+++ new` as given. Equality is judged on
/// the real values; the diff shows Secret values only as markers ([`crate::redact`]).
pub fn labelled_diff(old_text: &str, new_text: &str, old: &str, new: &str) -> Option<String> {
    let (e, a) = (canonical(old_text), canonical(new_text));
    if e == a {
        return None;
    }
    let (e, a) = (crate::redact::documents(&e), crate::redact::documents(&a));
    Some(
        similar::TextDiff::from_lines(&e, &a)
            .unified_diff()
            .context_radius(3)
            .header(old, new)
            .to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_order_and_formatting_do_not_count() {
        let a = "b: 1\na:\n  - x\n  - {y: 2, z: 3}\n";
        let b = "a: [x, {z: 3, y: 2}]\n# comment\nb: 1\n";
        assert_eq!(yaml_diff(a, b, "f.yaml"), None);
    }

    #[test]
    fn a_changed_value_gives_a_unified_diff() {
        let d = yaml_diff("a: 1\nb: 2\n", "b: 2\na: 3\n", "f.yaml").expect("differs");
        assert!(d.contains("--- expected/f.yaml"), "{d}");
        assert!(d.contains("-a: 1") && d.contains("+a: 3"), "{d}");
    }

    #[test]
    fn diffs_show_secret_values_as_markers_only() {
        let secret = |v: &str| {
            format!(
                "apiVersion: v1\nkind: Secret\nmetadata: {{name: s}}\nstringData:\n  password: {v}\n"
            )
        };
        let d = yaml_diff(&secret("old-value"), &secret("new-value"), "s.yaml").expect("differs");
        assert!(!d.contains("old-value") && !d.contains("new-value"), "{d}");
        let (m_old, m_new) = (
            crate::redact::marker(b"old-value"),
            crate::redact::marker(b"new-value"),
        );
        assert!(d.contains(&format!("-  password: {m_old}")), "{d}");
        assert!(d.contains(&format!("+  password: {m_new}")), "{d}");
        assert_eq!(yaml_diff(&secret("same"), &secret("same"), "s.yaml"), None);
    }

    #[test]
    fn duplicate_keys_are_refused() {
        let e = parse_docs("a: 1\na: 2\n", "x.yaml").unwrap_err();
        assert!(e.to_string().contains("x.yaml"), "{e}");
    }

    #[test]
    fn text_that_is_not_yaml_is_compared_as_text() {
        assert!(yaml_diff("hello world\n", "hello  world\n", "t.txt").is_some());
        assert!(yaml_diff("hello\n", "hello\n", "t.txt").is_none());
    }
}
