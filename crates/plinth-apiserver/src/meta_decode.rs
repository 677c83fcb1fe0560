//! Decoding errors of `metadata` (ObjectMeta) fields with the types kube-apiserver's Go
//! decoders expect, in the words of the decoder that meets them there:
//!
//! * a strategic merge patch's result goes through apimachinery's unstructured converter:
//!   `cannot restore map from string`, `cannot restore slice from int64`, `cannot convert
//!   bool to string`, `cannot restore struct from: string`;
//! * a request body, and a JSON or merge patch's result, through the JSON decoder:
//!   `json: cannot unmarshal string into Go struct field ObjectMeta.metadata.labels of type
//!   map[string]string`.
//!
//! The first ill-typed field in ObjectMeta's field order is reported, as the decoders
//! stop there.

use serde_json::Value;

use crate::error::ApiError;
use crate::resource::ResourceInfo;

/// What a field of ObjectMeta holds, as Go declares it.
#[derive(Clone, Copy)]
enum Shape {
    /// `string`.
    Str,
    /// `int64`.
    Int,
    /// `map[string]string`.
    StringMap,
    /// `[]string`.
    StringList,
    /// A list of structs (`[]v1.<name>`).
    StructList(&'static str),
}

/// ObjectMeta's fields whose types are checked, in the Go struct's order.
const FIELDS: &[(&str, Shape)] = &[
    ("name", Shape::Str),
    ("generateName", Shape::Str),
    ("namespace", Shape::Str),
    ("selfLink", Shape::Str),
    ("uid", Shape::Str),
    ("resourceVersion", Shape::Str),
    ("generation", Shape::Int),
    ("deletionGracePeriodSeconds", Shape::Int),
    ("labels", Shape::StringMap),
    ("annotations", Shape::StringMap),
    ("ownerReferences", Shape::StructList("OwnerReference")),
    ("finalizers", Shape::StringList),
    ("managedFields", Shape::StructList("ManagedFieldsEntry")),
];

/// A metadata field whose value the Go decoders refuse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MetaTypeError {
    /// apimachinery's unstructured converter's text (strategic merge patches).
    pub converter: String,
    /// encoding/json's text (bodies, JSON and merge patches).
    pub json: String,
}

/// The Go reflect kind of a decoded JSON value (`reflect.Kind`'s name).
fn go_kind(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "string",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float64",
        Value::Number(_) => "int64",
        Value::Array(_) => "slice",
        Value::Object(_) => "map",
        Value::Null => "invalid",
    }
}

/// The Go type of a decoded JSON value (`reflect.Type`'s name).
fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
        other => go_kind(other),
    }
}

/// encoding/json's name of a JSON value's kind.
fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "string",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
        Value::Null => "null",
    }
}

fn json_error(v: &Value, field: &str, go: &str) -> String {
    format!(
        "json: cannot unmarshal {} into Go struct field ObjectMeta.metadata.{field} of type {go}",
        json_kind(v)
    )
}

/// A scalar `want` ("string" or "int64") from `v`, as the converter converts primitives.
fn scalar_error(v: &Value, want: &str, field: &str) -> Option<MetaTypeError> {
    let ok = match (v, want) {
        (Value::Null, _) | (Value::String(_), "string") => true,
        (Value::Number(n), "int64") => n.is_i64() || n.as_f64().is_some_and(|f| f.fract() == 0.0),
        _ => false,
    };
    (!ok).then(|| MetaTypeError {
        converter: format!("cannot convert {} to {want}", go_type(v)),
        json: json_error(v, field, want),
    })
}

fn check_field(field: &str, shape: Shape, v: &Value) -> Option<MetaTypeError> {
    if v.is_null() {
        return None;
    }
    match shape {
        Shape::Str => scalar_error(v, "string", field),
        Shape::Int => scalar_error(v, "int64", field),
        Shape::StringMap => match v {
            Value::Object(m) => m.values().find_map(|x| scalar_error(x, "string", field)),
            other => Some(MetaTypeError {
                converter: format!("cannot restore map from {}", go_kind(other)),
                json: json_error(other, field, "map[string]string"),
            }),
        },
        Shape::StringList => match v {
            Value::Array(a) => a.iter().find_map(|x| scalar_error(x, "string", field)),
            other => Some(MetaTypeError {
                converter: format!("cannot restore slice from {}", go_kind(other)),
                json: json_error(other, field, "[]string"),
            }),
        },
        Shape::StructList(name) => match v {
            Value::Array(a) => {
                a.iter()
                    .find(|x| !x.is_object() && !x.is_null())
                    .map(|x| MetaTypeError {
                        converter: format!("cannot restore struct from: {}", go_kind(x)),
                        json: json_error(x, field, &format!("v1.{name}")),
                    })
            }
            other => Some(MetaTypeError {
                converter: format!("cannot restore slice from {}", go_kind(other)),
                json: json_error(other, field, &format!("[]v1.{name}")),
            }),
        },
    }
}

/// The first ObjectMeta field of `obj` that Kubernetes' decoders refuse, if any.
pub(crate) fn meta_type_error(kind: &str, obj: &Value) -> Option<MetaTypeError> {
    let meta = obj.get("metadata")?;
    let Some(m) = meta.as_object() else {
        if meta.is_null() {
            return None;
        }
        return Some(MetaTypeError {
            converter: format!("cannot restore struct from: {}", go_kind(meta)),
            json: format!(
                "json: cannot unmarshal {} into Go struct field {kind}.metadata of type v1.ObjectMeta",
                json_kind(meta)
            ),
        });
    };
    FIELDS
        .iter()
        .find_map(|(f, shape)| m.get(*f).and_then(|v| check_field(f, *shape, v)))
}

/// A value as Go's `fmt` prints it with `%+v` once decoded into `interface{}` (maps with
/// sorted keys, `map[k:v]`, lists `[a b]`, strings bare, null `<nil>`), which is how
/// kube-apiserver quotes a patch in its errors.
pub(crate) fn go_format(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(go_format).collect::<Vec<_>>().join(" ")
        ),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{k}:{}", go_format(&m[k])))
                .collect();
            format!("map[{}]", parts.join(" "))
        }
    }
}

/// Go's `%q` of a string: double-quoted with Go's escapes.
fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// kube-apiserver's answer to a patch whose result does not decode: 422 Invalid of no
/// kind and no name, one cause on the field `patch` whose value is `value` (the patch as
/// Go prints it for strategic merge patches, the patched object's JSON for JSON and merge
/// patches).
pub(crate) fn invalid_patch(value: &str, detail: &str) -> ApiError {
    let message = format!("Invalid value: {}: {detail}", go_quote(value));
    ApiError {
        code: 422,
        reason: "Invalid",
        message: format!(" \"\" is invalid: patch: {message}"),
        details: Some(serde_json::json!({
            "causes": [{"reason": "FieldValueInvalid", "message": message, "field": "patch"}],
        })),
    }
}

/// kube-apiserver's answer to a request body that does not decode into the kind:
/// 400 BadRequest `<Kind> in version "<v>" cannot be handled as a <Kind>: <error>`.
pub(crate) fn undecodable_body(info: &ResourceInfo, detail: &str) -> ApiError {
    ApiError::bad_request(format!(
        "{} in version {:?} cannot be handled as a {}: {detail}",
        info.kind, info.version, info.kind
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn err(meta: Value) -> Option<MetaTypeError> {
        meta_type_error("Pod", &json!({"metadata": meta}))
    }

    #[test]
    fn map_fields_refuse_what_is_not_a_map_of_strings() {
        let e = err(json!({"labels": "invalid"})).unwrap();
        assert_eq!(e.converter, "cannot restore map from string");
        assert_eq!(
            e.json,
            "json: cannot unmarshal string into Go struct field ObjectMeta.metadata.labels of type map[string]string"
        );
        let e = err(json!({"annotations": ["a"]})).unwrap();
        assert_eq!(e.converter, "cannot restore map from slice");
        assert!(e.json.contains("unmarshal array into Go struct field ObjectMeta.metadata.annotations of type map[string]string"));
        let e = err(json!({"labels": {"a": 1}})).unwrap();
        assert_eq!(e.converter, "cannot convert int64 to string");
        assert_eq!(
            e.json,
            "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type string"
        );
        assert_eq!(
            err(json!({"labels": {"a": "b"}, "annotations": null})),
            None
        );
    }

    #[test]
    fn list_struct_and_scalar_fields() {
        let e = err(json!({"finalizers": "x"})).unwrap();
        assert_eq!(e.converter, "cannot restore slice from string");
        let e = err(json!({"ownerReferences": ["x"]})).unwrap();
        assert_eq!(e.converter, "cannot restore struct from: string");
        assert!(e.json.ends_with("of type v1.OwnerReference"), "{}", e.json);
        let e = err(json!({"name": 5})).unwrap();
        assert_eq!(e.converter, "cannot convert int64 to string");
        let e = meta_type_error("Pod", &json!({"metadata": "x"})).unwrap();
        assert_eq!(
            e.json,
            "json: cannot unmarshal string into Go struct field Pod.metadata of type v1.ObjectMeta"
        );
        // The first field in ObjectMeta's order is reported.
        let e = err(json!({"finalizers": "x", "labels": "y"})).unwrap();
        assert_eq!(e.converter, "cannot restore map from string");
    }

    #[test]
    fn patches_are_quoted_as_go_prints_them() {
        let p = json!({"metadata": {"labels": "invalid", "b": [1, true, null]}});
        assert_eq!(
            go_format(&p),
            "map[metadata:map[b:[1 true <nil>] labels:invalid]]"
        );
        let e = invalid_patch(
            "map[metadata:map[labels:invalid]]",
            "cannot restore map from string",
        );
        assert_eq!(
            e.message,
            " \"\" is invalid: patch: Invalid value: \"map[metadata:map[labels:invalid]]\": cannot restore map from string"
        );
        assert_eq!(e.code, 422);
        assert_eq!(e.to_status()["details"]["causes"][0]["field"], "patch");
    }
}
