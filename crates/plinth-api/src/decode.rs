//! Strict typed decoding that names the field a value failed at, so admission and the
//! controllers report the same `spec.containers[0].command` path for the same fault.

use serde::de::DeserializeOwned;
use serde_json::Value;

/// A value that did not decode as its type: where and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// Dotted path below the decoded value (`spec.containers[0].command`); empty when
    /// the value itself has the wrong shape.
    pub field: String,
    /// serde's cause (`invalid type: string "echo hi", expected a sequence`).
    pub message: String,
}

impl FieldError {
    /// The path joined under `prefix` (`spec.workflows.resource.configure[0]`).
    pub fn field_under(&self, prefix: &str) -> String {
        match (prefix.is_empty(), self.field.is_empty()) {
            (_, true) => prefix.to_string(),
            (true, false) => self.field.clone(),
            (false, false) if self.field.starts_with('[') => format!("{prefix}{}", self.field),
            (false, false) => format!("{prefix}.{}", self.field),
        }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.field.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.field, self.message)
        }
    }
}

/// Decodes `value` as `T`; on failure names the deepest field serde reached.
pub fn typed<T: DeserializeOwned>(value: &Value) -> Result<T, FieldError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let field = match e.path().to_string() {
            p if p == "." => String::new(),
            p => p,
        };
        FieldError {
            field,
            message: plain_expectation(&e.into_inner().to_string()),
        }
    })
}

/// serde's message with the Rust type it expected said in Kubernetes' words:
/// `expected i32` → `expected an integer`, `expected struct ResourceRequirements` (or
/// `expected ResourceRequirements`) → `expected a mapping (ResourceRequirements)`.
fn plain_expectation(message: &str) -> String {
    let Some((head, expected)) = message.rsplit_once("expected ") else {
        return message.to_string();
    };
    let ty = expected
        .trim_start_matches("struct ")
        .trim_start_matches("enum ");
    let word = ty.split_whitespace().next().unwrap_or_default();
    let plain = match word {
        "i8" | "i16" | "i32" | "i64" | "u8" | "u16" | "u32" | "u64" | "usize" | "isize" => {
            format!("an integer{}", &ty[word.len()..])
        }
        "f32" | "f64" => format!("a number{}", &ty[word.len()..]),
        w if w.chars().next().is_some_and(|c| c.is_ascii_uppercase())
            && w.chars().all(|c| c.is_ascii_alphanumeric()) =>
        {
            format!("a mapping ({w}){}", &ty[word.len()..])
        }
        _ => return message.to_string(),
    };
    format!("{head}expected {plain}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rust_type_names_are_said_in_kubernetes_words() {
        for (given, said) in [
            (
                "invalid type: string \"x\", expected i32",
                "invalid type: string \"x\", expected an integer",
            ),
            (
                "invalid type: integer `5`, expected struct ResourceRequirements",
                "invalid type: integer `5`, expected a mapping (ResourceRequirements)",
            ),
            (
                "invalid type: sequence, expected EmptyDirVolumeSource",
                "invalid type: sequence, expected a mapping (EmptyDirVolumeSource)",
            ),
            (
                "invalid type: string \"echo hi\", expected a sequence",
                "invalid type: string \"echo hi\", expected a sequence",
            ),
            ("missing field `name`", "missing field `name`"),
        ] {
            assert_eq!(plain_expectation(given), said);
        }
    }

    #[test]
    fn names_the_field_of_a_type_error() {
        let e = typed::<k8s_openapi::api::core::v1::PodSpec>(
            &json!({"containers": [{"name": "a", "command": "echo hi"}]}),
        )
        .unwrap_err();
        assert_eq!(e.field, "containers[0].command");
        assert!(e.message.contains("expected a sequence"), "{e}");
        assert_eq!(e.field_under("spec"), "spec.containers[0].command");
        assert_eq!(
            FieldError {
                field: "[2]".into(),
                message: String::new()
            }
            .field_under("list"),
            "list[2]"
        );
    }
}
