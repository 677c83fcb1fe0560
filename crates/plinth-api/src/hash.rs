//! md5 helpers.
//!
//! md5 is used for change detection and identifiers only, never for security, exactly as
//! Kratix does (so hashes and group ids match Kratix's).

use md5::{Digest, Md5};
use serde_json::Value;

/// Lower-case hex md5 of `data` (32 characters).
pub fn md5_hex(data: impl AsRef<[u8]>) -> String {
    hex::encode(Md5::digest(data.as_ref()))
}

/// Kratix `hash.ComputeHash(s)`: md5 hex of a string.
pub fn compute_hash(s: &str) -> String {
    md5_hex(s.as_bytes())
}

/// Workload group id of an output directory: md5 hex of the cleaned directory
/// (`.` → [`crate::constants::DEFAULT_WORKLOAD_GROUP_ID`]).
pub fn workload_group_id(directory: &str) -> String {
    md5_hex(directory.as_bytes())
}

/// Kratix `ComputeHashForResource`: md5 hex of the JSON of the object's `spec` (`null` when
/// absent).
///
/// Object keys are serialised in sorted order (as Go's `json.Marshal` does for unstructured
/// maps), so the hash does not depend on key order in the source YAML.
pub fn hash_for_resource(object: &Value) -> String {
    let spec = object.get("spec").unwrap_or(&Value::Null);
    hash_for_spec(spec)
}

/// md5 hex of canonical JSON (sorted keys, no whitespace) of `spec`.
pub fn hash_for_spec(spec: &Value) -> String {
    md5_hex(canonical_json(spec).as_bytes())
}

/// Canonical JSON text of a value, byte for byte what Go's `encoding/json` writes for the
/// same unstructured value, so the hashes match those Kratix computed: object keys
/// sorted, no insignificant whitespace, `<`, `>`, `&`, U+2028 and U+2029 escaped as
/// `\u003c`…, and floats in Go's shortest form (`1` for `1.0`, `1e+21`, `1e-7`).
///
/// ```
/// use plinth_api::hash::canonical_json;
/// let spec = serde_json::json!({"b": "x && y", "a": 1.0});
/// assert_eq!(canonical_json(&spec), r#"{"a":1,"b":"x \u0026\u0026 y"}"#);
/// ```
pub fn canonical_json(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_go_string(k, out);
                out.push(':');
                write_canonical(&m[k.as_str()], out);
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(x, out);
            }
            out.push(']');
        }
        Value::String(text) => write_go_string(text, out),
        Value::Number(n) => match n.as_f64().filter(|_| n.is_f64()) {
            Some(f) => write_go_float(f, out),
            None => out.push_str(&n.to_string()),
        },
        other => out.push_str(&other.to_string()),
    }
}

/// A JSON string as Go's encoder escapes it (HTML-safe, which is its default).
fn write_go_string(text: &str, out: &mut String) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A float as Go's encoder writes it: the shortest decimal that reads back the same,
/// in exponent form below 1e-6 and from 1e21 on (`1e-7`, `1e+21`).
fn write_go_float(f: f64, out: &mut String) {
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let e = format!("{f:e}");
        let (mantissa, exponent) = e.split_once('e').unwrap_or((&e, "0"));
        let exponent: i32 = exponent.parse().unwrap_or(0);
        if exponent < 0 {
            out.push_str(&format!("{mantissa}e-{}", -exponent));
        } else {
            out.push_str(&format!("{mantissa}e+{exponent:02}"));
        }
    } else {
        out.push_str(&format!("{f}"));
    }
}

/// Job hash label of a resource workflow:
/// md5(`<md5(promiseSpec)>-<md5(rrSpec)>` [+ `-dry-run`]).
pub fn resource_workflow_hash(promise_spec: &Value, rr_spec: &Value, dry_run: bool) -> String {
    let mut s = format!("{}-{}", hash_for_spec(promise_spec), hash_for_spec(rr_spec));
    if dry_run {
        s.push_str("-dry-run");
    }
    compute_hash(&s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn default_group_id_is_md5_of_dot() {
        assert_eq!(
            workload_group_id("."),
            crate::constants::DEFAULT_WORKLOAD_GROUP_ID
        );
        assert_eq!(compute_hash(""), "d41d8cd98f00b204e9800998ecf8427e");
    }

    #[test]
    fn resource_hash_ignores_key_order_and_covers_only_spec() {
        let a = json!({"metadata": {"name": "a"}, "spec": {"x": 1, "y": {"b": 2, "a": 1}}});
        let b = json!({"metadata": {"name": "b"}, "spec": {"y": {"a": 1, "b": 2}, "x": 1}});
        assert_eq!(hash_for_resource(&a), hash_for_resource(&b));
        assert_eq!(canonical_json(&a["spec"]), r#"{"x":1,"y":{"a":1,"b":2}}"#);
        let c = json!({"spec": {"x": 2}});
        assert_ne!(hash_for_resource(&a), hash_for_resource(&c));
    }

    /// Expected texts are what Go's `json.Marshal` writes for the same values.
    #[test]
    fn canonical_json_is_what_go_writes() {
        let cases = [
            (
                json!("a && b <c> \u{2028}"),
                r#""a \u0026\u0026 b \u003cc\u003e \u2028""#,
            ),
            (
                json!("q\"\\\n\t\r\u{8}\u{c}\u{1}"),
                r#""q\"\\\n\t\r\b\f\u0001""#,
            ),
            (json!("ünï"), r#""ünï""#),
            (json!(1.0), "1"),
            (json!(0.5), "0.5"),
            (json!(-2.25), "-2.25"),
            (json!(1e21), "1e+21"),
            (json!(1.5e-7), "1.5e-7"),
            (json!(1e-10), "1e-10"),
            (json!(123456789.0), "123456789"),
            (json!(1e20), "100000000000000000000"),
            (json!(42), "42"),
            (json!(-7), "-7"),
            (
                json!({"<k>": [true, null]}),
                r#"{"\u003ck\u003e":[true,null]}"#,
            ),
        ];
        for (value, go) in cases {
            assert_eq!(canonical_json(&value), go, "{value}");
        }
    }

    #[test]
    fn dry_run_changes_the_workflow_hash() {
        let p = json!({"api": {}});
        let r = json!({"size": "s"});
        assert_ne!(
            resource_workflow_hash(&p, &r, false),
            resource_workflow_hash(&p, &r, true)
        );
    }
}
