//! Secret values kept out of everything Plinth displays: the web view's files, `plinth
//! diff`, `plinth test` and `plinth render` output, the quickstart's listing.
//!
//! Every object of kind `Secret` (at any depth: a `List`'s items, a Promise's
//! dependencies) has each value of `data` and `stringData` replaced by a marker holding a
//! short SHA-256 of the value, so the keys stay readable and a changed value still shows
//! as a changed line. A `data` value is hashed after base64 decoding, so the same value
//! given in `data` or in `stringData` gets the same marker. The hash is a fingerprint for
//! spotting changes, not a protection of weak values: a guessable password can be found
//! by hashing guesses. Text that is not valid YAML but names kind `Secret` is not shown.

use std::borrow::Cow;

use base64::Engine as _;
use serde_json::Value;
use sha2::{Digest as _, Sha256};

/// Hex digits of the hash kept in a marker (48 bits: enough to tell values apart).
const HASH_DIGITS: usize = 12;

/// The fields of a Secret shown as they are (their values, for `data` and `stringData`,
/// become markers); any other field of an object of kind Secret is a marker whole.
const SECRET_FIELDS: &[&str] = &[
    "apiVersion",
    "kind",
    "metadata",
    "type",
    "immutable",
    "data",
    "stringData",
];

/// The annotation kubectl keeps the whole applied object in (Secret values included).
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The marker that replaces one value: `<redacted sha256:…>`.
pub fn marker(value: &[u8]) -> String {
    let digest = hex::encode(Sha256::digest(value));
    format!("<redacted sha256:{}>", &digest[..HASH_DIGITS])
}

/// `text` (one or more YAML or JSON documents) with every Secret's values replaced by
/// markers. Text without a Secret comes back as it is (formatting kept); text with one
/// is re-serialised as YAML documents.
pub fn documents(text: &str) -> Cow<'_, str> {
    if !text.contains("Secret") {
        return Cow::Borrowed(text);
    }
    let Ok(mut docs) = serde_saphyr::from_multiple::<Value>(text) else {
        return if plinth_api::secrets::names_secret_kind(text) {
            Cow::Owned(format!(
                "# not shown: this text is not valid YAML and names kind Secret ({})\n",
                marker(text.as_bytes())
            ))
        } else {
            Cow::Borrowed(text)
        };
    };
    let mut changed = false;
    for d in &mut docs {
        changed |= value(d);
    }
    if !changed {
        return Cow::Borrowed(text);
    }
    Cow::Owned(
        docs.iter()
            .filter(|d| !d.is_null())
            .map(|d| serde_saphyr::to_string(d).unwrap_or_else(|_| format!("{d}\n")))
            .collect::<Vec<_>>()
            .join("---\n"),
    )
}

/// Replaces the values of every Secret inside `v` by markers; true when one was replaced.
pub fn value(v: &mut Value) -> bool {
    match v {
        Value::Object(m) => {
            let mut changed = false;
            if m.get("kind").and_then(Value::as_str) == Some("Secret") {
                changed |= redact_map(m.get_mut("data"), true);
                changed |= redact_map(m.get_mut("stringData"), false);
                changed |= redact_last_applied(m.get_mut("metadata"));
                // A field a Secret does not have (`token:` beside `data`) may still hold
                // a value meant to be one: shown as a marker too.
                for (k, v) in m.iter_mut() {
                    if !SECRET_FIELDS.contains(&k.as_str()) && !v.is_null() {
                        *v = Value::String(marker(v.to_string().as_bytes()));
                        changed = true;
                    }
                }
            }
            // Markers are strings, so walking the redacted fields again changes nothing.
            for child in m.values_mut() {
                changed |= value(child);
            }
            changed
        }
        Value::Array(a) => a.iter_mut().fold(false, |c, x| value(x) | c),
        _ => false,
    }
}

fn redact_map(field: Option<&mut Value>, base64: bool) -> bool {
    let Some(Value::Object(m)) = field else {
        return false;
    };
    for v in m.values_mut() {
        let bytes = match &*v {
            Value::String(s) if base64 => base64::engine::general_purpose::STANDARD
                .decode(s)
                .unwrap_or_else(|_| s.clone().into_bytes()),
            Value::String(s) => s.clone().into_bytes(),
            other => other.to_string().into_bytes(),
        };
        *v = Value::String(marker(&bytes));
    }
    !m.is_empty()
}

/// The last-applied annotation holds the Secret as JSON: redacted the same way, or
/// replaced by a marker when it does not parse.
fn redact_last_applied(meta: Option<&mut Value>) -> bool {
    let Some(a) = meta
        .and_then(|m| m.get_mut("annotations"))
        .and_then(|a| a.get_mut(LAST_APPLIED))
    else {
        return false;
    };
    let text = a.as_str().unwrap_or_default().to_string();
    *a = Value::String(match serde_json::from_str::<Value>(&text) {
        Ok(mut obj) => {
            value(&mut obj);
            obj.to_string()
        }
        Err(_) => marker(text.as_bytes()),
    });
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\n  namespace: team\n\
        data:\n  password: aHVudGVyMg==\nstringData:\n  token: s3cr3t-token\n";

    #[test]
    fn secret_values_become_markers_with_their_keys() {
        let out = documents(SECRET);
        assert!(!out.contains("aHVudGVyMg=="), "{out}");
        assert!(!out.contains("hunter2"), "{out}");
        assert!(!out.contains("s3cr3t-token"), "{out}");
        assert!(
            out.contains(&format!("password: {}", marker(b"hunter2"))),
            "data is hashed decoded: {out}"
        );
        assert!(
            out.contains(&format!("token: {}", marker(b"s3cr3t-token"))),
            "{out}"
        );
        assert!(out.contains("name: db"), "{out}");
    }

    #[test]
    fn a_secret_of_another_shape_shows_no_value() {
        let out = documents("- kind: Secret\n  token: SUPERSECRET43\n  metadata: {name: x}\n");
        assert!(!out.contains("SUPERSECRET43"), "{out}");
        assert!(out.contains("token: <redacted sha256:"), "{out}");
        assert!(out.contains("name: x"), "{out}");
    }

    #[test]
    fn a_changed_value_changes_its_marker() {
        let other = SECRET.replace("s3cr3t-token", "other-token");
        assert_ne!(documents(SECRET), documents(&other));
        assert_eq!(documents(SECRET), documents(SECRET));
    }

    #[test]
    fn text_without_secrets_is_kept_as_written() {
        let cm = "# a comment\nkind: ConfigMap\ndata: {password: plain}\n";
        assert!(matches!(documents(cm), Cow::Borrowed(t) if t == cm));
        let mentions = "kind: ConfigMap\ndata:\n  note: a Secret is elsewhere\n";
        assert!(matches!(documents(mentions), Cow::Borrowed(_)));
    }

    #[test]
    fn secrets_among_documents_and_nested_are_redacted() {
        let text = format!(
            "kind: ConfigMap\ndata: {{a: b}}\n---\n{SECRET}---\nkind: List\nitems:\n- kind: Secret\n  stringData: {{k: nested-value}}\n"
        );
        let out = documents(&text);
        assert!(out.contains("a: b"), "{out}");
        assert!(
            !out.contains("s3cr3t-token") && !out.contains("nested-value"),
            "{out}"
        );
        assert_eq!(out.matches("<redacted sha256:").count(), 3, "{out}");
    }

    #[test]
    fn last_applied_configuration_is_redacted_too() {
        let text = "kind: Secret\nmetadata:\n  annotations:\n    kubectl.kubernetes.io/last-applied-configuration: \
            '{\"kind\":\"Secret\",\"stringData\":{\"k\":\"in-annotation\"}}'\nstringData: {k: in-annotation}\n";
        let out = documents(text);
        assert!(!out.contains("in-annotation"), "{out}");
    }

    #[test]
    fn unparsable_text_naming_a_secret_is_not_shown() {
        let cut = "kind: Secret\nstringData:\n  k: \"unterminated-secret\n  : [\n";
        let out = documents(cut);
        assert!(!out.contains("unterminated-secret"), "{out}");
        assert!(out.starts_with("# not shown"), "{out}");
        let json = "{\"kind\": \"Secret\", \"stringData\": {\"k\": \"v\"";
        assert!(documents(json).starts_with("# not shown"));
        let item = "items:\n- kind: Secret\n  stringData: {k: \"open\n";
        assert!(
            documents(item).starts_with("# not shown"),
            "{}",
            documents(item)
        );
        // Another kind whose name starts the same is not hidden.
        let store = "kind: SecretStore\nspec: [\n";
        assert!(matches!(documents(store), Cow::Borrowed(_)));
    }
}
