//! Field-error constructors with the exact wording of Kubernetes'
//! `k8s.io/apimachinery/pkg/util/validation/field` errors, so kubectl users read the same
//! messages they get from a real cluster.

use serde_json::Value;

use crate::resource::Cause;

/// Render a value the way `field.Error` does: strings quoted, numbers and booleans bare,
/// `null` as `"null"`, objects and arrays as compact JSON.
pub(crate) fn render_value(v: &Value) -> String {
    match v {
        Value::String(s) => quote(s),
        Value::Null => "\"null\"".to_string(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        other => other.to_string(),
    }
}

/// Go `strconv.Quote`-like quoting (JSON string escaping is equivalent for our purposes).
pub(crate) fn quote(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

/// JSON type name of a value as the OpenAPI validator reports it (`string`, `integer`,
/// `number`, `boolean`, `object`, `array`, `null`).
pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(n) => {
            if n.as_f64()
                .is_some_and(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
            {
                "integer"
            } else {
                "number"
            }
        }
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn cause(reason: &str, field: &str, message: String) -> Cause {
    Cause {
        reason: reason.to_string(),
        message,
        field: field.to_string(),
    }
}

/// `Required value` (`FieldValueRequired`), with an optional detail.
pub(crate) fn required(field: &str, detail: &str) -> Cause {
    let message = if detail.is_empty() {
        "Required value".to_string()
    } else {
        format!("Required value: {detail}")
    };
    cause("FieldValueRequired", field, message)
}

/// `Invalid value: <value>: <detail>` (`FieldValueInvalid`).
pub(crate) fn invalid(field: &str, value: &Value, detail: &str) -> Cause {
    let message = if detail.is_empty() {
        format!("Invalid value: {}", render_value(value))
    } else {
        format!("Invalid value: {}: {detail}", render_value(value))
    };
    cause("FieldValueInvalid", field, message)
}

/// `Invalid value: "<type>": <detail>` (`FieldValueTypeInvalid`); the value shown is the
/// JSON type of the offending value, as the CRD validator does.
pub(crate) fn type_invalid(field: &str, value: &Value, detail: &str) -> Cause {
    cause(
        "FieldValueTypeInvalid",
        field,
        format!("Invalid value: {}: {detail}", quote(type_name(value))),
    )
}

/// `Unsupported value: "xl": supported values: "small", "large"` (`FieldValueNotSupported`).
pub(crate) fn not_supported(field: &str, value: &Value, supported: &[Value]) -> Cause {
    let list: Vec<String> = supported.iter().map(render_value).collect();
    let message = if list.is_empty() {
        format!("Unsupported value: {}", render_value(value))
    } else {
        format!(
            "Unsupported value: {}: supported values: {}",
            render_value(value),
            list.join(", ")
        )
    };
    cause("FieldValueNotSupported", field, message)
}

/// `Duplicate value: <value>` (`FieldValueDuplicate`).
pub(crate) fn duplicate(field: &str, value: &Value) -> Cause {
    cause(
        "FieldValueDuplicate",
        field,
        format!("Duplicate value: {}", render_value(value)),
    )
}

/// `Too long: may not be more than <max> bytes` (`FieldValueTooLong`).
pub(crate) fn too_long(field: &str, max: u64) -> Cause {
    cause(
        "FieldValueTooLong",
        field,
        format!("Too long: may not be more than {max} bytes"),
    )
}

/// `Too many: <actual>: must have at most <max> items` (`FieldValueTooMany`).
pub(crate) fn too_many(field: &str, actual: usize, max: u64) -> Cause {
    cause(
        "FieldValueTooMany",
        field,
        format!("Too many: {actual}: must have at most {max} items"),
    )
}

/// `Forbidden: <detail>` (`FieldValueForbidden`).
pub(crate) fn forbidden(field: &str, detail: &str) -> Cause {
    cause("FieldValueForbidden", field, format!("Forbidden: {detail}"))
}

/// A cause with a caller-chosen reason (used for CEL rules that set `reason`).
pub(crate) fn with_reason(reason: &str, field: &str, message: String) -> Cause {
    cause(reason, field, message)
}

/// The `Status.message` of a 422 answer, as `errors.NewInvalid` builds it:
/// `<qualified kind> "<name>" is invalid: <field>: <message>`, or with several causes
/// `... is invalid: [<field>: <message>, <field>: <message>]`.
///
/// `qualified_kind` is `Kind.group` (just `Kind` for the core group), e.g.
/// `Promise.platform.kratix.io`.
pub fn format_invalid(qualified_kind: &str, name: &str, causes: &[Cause]) -> String {
    let parts: Vec<String> = causes
        .iter()
        .map(|c| {
            if c.field.is_empty() {
                c.message.clone()
            } else {
                format!("{}: {}", c.field, c.message)
            }
        })
        .collect();
    let body = match parts.len() {
        0 => String::new(),
        1 => parts[0].clone(),
        _ => format!("[{}]", parts.join(", ")),
    };
    format!("{qualified_kind} {} is invalid: {body}", quote(name))
}

/// The message of the `400 BadRequest` answer for `fieldValidation=Strict` when an object
/// has fields its schema does not know: `strict decoding error: unknown field "spec.foo",
/// unknown field "spec.bar"` (the wording of the Kubernetes API server). `paths` come
/// from [`super::unknown_fields`]. With `fieldValidation=Warn`, send one `Warning` header
/// per path instead: `299 - "unknown field \"spec.foo\""`.
pub fn strict_decoding_error(paths: &[String]) -> String {
    let parts: Vec<String> = paths
        .iter()
        .map(|p| format!("unknown field {}", quote(p)))
        .collect();
    format!("strict decoding error: {}", parts.join(", "))
}
