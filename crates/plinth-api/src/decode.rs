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
            message: e.into_inner().to_string(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
