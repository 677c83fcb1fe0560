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

/// Canonical JSON text of a value: object keys sorted, no insignificant whitespace.
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
                out.push_str(&Value::String((*k).clone()).to_string());
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
        other => out.push_str(&other.to_string()),
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
