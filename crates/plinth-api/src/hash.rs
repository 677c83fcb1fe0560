//! md5 helpers.
//!
//! md5 is used for change detection and identifiers only, never for security, exactly as
//! Kratix does (so hashes and group ids match Kratix's).

use md5::{Digest, Md5};
use serde_json::{Map, Value, json};

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
    write_canonical(v, Form::Go, &mut out);
    out
}

/// How strings and floats are written.
#[derive(Clone, Copy)]
enum Form {
    /// As Go's `encoding/json` writes them (what Kratix hashes).
    Go,
    /// As `serde_json` writes them: what Plinth hashed before it matched Go. Jobs labelled
    /// with such a hash still count as runs of their spec, so upgrading Plinth re-runs
    /// nothing.
    Earlier,
}

fn write_canonical(v: &Value, form: Form, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(k, form, out);
                out.push(':');
                write_canonical(&m[k.as_str()], form, out);
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(x, form, out);
            }
            out.push(']');
        }
        Value::String(text) => write_string(text, form, out),
        Value::Number(n) => match n.as_f64().filter(|_| n.is_f64()) {
            Some(f) if matches!(form, Form::Go) => write_go_float(f, out),
            _ => out.push_str(&n.to_string()),
        },
        other => out.push_str(&other.to_string()),
    }
}

fn write_string(text: &str, form: Form, out: &mut String) {
    match form {
        Form::Go => write_go_string(text, out),
        Form::Earlier => out.push_str(&Value::String(text.to_string()).to_string()),
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

/// The Promise spec as Kratix hashes it. Kratix converts its typed Promise to a map
/// before hashing, so the hash covers that typed form rather than the stored object:
/// fields its types do not know are gone, empty lists and maps are left out, the
/// `workflows` block and its `config`, `promise` and `resource` parts are always there
/// (a Go struct is never empty to that conversion), and a `reconciliationInterval` is
/// written as Go prints a duration (`5m` becomes `5m0s`). Pipelines, dependencies and
/// the API are kept as written.
///
/// ```
/// use plinth_api::hash::{canonical_json, kratix_promise_spec};
/// let stored = serde_json::json!({"dependencies": [], "workflows": {"config": {"reconciliationInterval": "5m"}}});
/// assert_eq!(
///     canonical_json(&kratix_promise_spec(&stored)),
///     r#"{"workflows":{"config":{"reconciliationInterval":"5m0s"},"promise":{},"resource":{}}}"#
/// );
/// ```
pub fn kratix_promise_spec(spec: &Value) -> Value {
    let mut out = Map::new();
    if let Some(api) = spec.get("api").filter(|v| !v.is_null()) {
        out.insert("api".into(), api.clone());
    }
    out.insert("workflows".into(), kratix_workflows(spec.get("workflows")));
    if let Some(required) = non_empty_list(spec, "requiredPromises") {
        let typed = required
            .iter()
            .map(|r| Value::Object(non_empty_strings(r, &["name", "version"])))
            .collect();
        out.insert("requiredPromises".into(), Value::Array(typed));
    }
    if let Some(dependencies) = non_empty_list(spec, "dependencies") {
        out.insert("dependencies".into(), Value::Array(dependencies.clone()));
    }
    if let Some(selectors) = non_empty_list(spec, "destinationSelectors") {
        let typed = selectors
            .iter()
            .map(|s| {
                let mut m = Map::new();
                if let Some(labels) = s.get("matchLabels").filter(|l| is_non_empty_map(l)) {
                    m.insert("matchLabels".into(), labels.clone());
                }
                Value::Object(m)
            })
            .collect();
        out.insert("destinationSelectors".into(), Value::Array(typed));
    }
    Value::Object(out)
}

fn kratix_workflows(workflows: Option<&Value>) -> Value {
    let part = |name: &str| workflows.and_then(|w| w.get(name));
    let mut config = Map::new();
    if let Some(c) = part("config") {
        config = non_empty_strings(c, &["pipelineNamespace"]);
        if let Some(interval) = c.get("reconciliationInterval").and_then(Value::as_str) {
            let written = crate::duration::parse_go_duration(interval)
                .map(crate::duration::format_go_duration)
                .unwrap_or_else(|_| interval.to_string());
            config.insert("reconciliationInterval".into(), written.into());
        }
    }
    let triggers = |name: &str| {
        let mut m = Map::new();
        for action in ["configure", "delete"] {
            if let Some(list) = part(name).and_then(|t| non_empty_list(t, action)) {
                m.insert(action.into(), Value::Array(list.clone()));
            }
        }
        Value::Object(m)
    };
    json!({"config": config, "promise": triggers("promise"), "resource": triggers("resource")})
}

fn non_empty_list<'a>(v: &'a Value, key: &str) -> Option<&'a Vec<Value>> {
    v.get(key)
        .and_then(Value::as_array)
        .filter(|a| !a.is_empty())
}

fn is_non_empty_map(v: &Value) -> bool {
    v.as_object().is_some_and(|m| !m.is_empty())
}

/// The `keys` of `v` that hold a non-empty string (Go's `omitempty` on string fields).
fn non_empty_strings(v: &Value, keys: &[&str]) -> Map<String, Value> {
    keys.iter()
        .filter_map(|k| {
            let s = v.get(*k)?.as_str().filter(|s| !s.is_empty())?;
            Some((k.to_string(), Value::from(s)))
        })
        .collect()
}

/// Job hash label of a promise workflow: md5 of [`kratix_promise_spec`] in Go's JSON.
pub fn promise_workflow_hash(promise_spec: &Value) -> String {
    hash_for_spec(&kratix_promise_spec(promise_spec))
}

/// Job hash label of a resource workflow:
/// md5(`<md5(promise spec as Kratix hashes it)>-<md5(rrSpec)>` [+ `-dry-run`]).
pub fn resource_workflow_hash(promise_spec: &Value, rr_spec: &Value, dry_run: bool) -> String {
    resource_hash_in(
        Form::Go,
        &kratix_promise_spec(promise_spec),
        rr_spec,
        dry_run,
    )
}

fn resource_hash_in(form: Form, promise_spec: &Value, rr_spec: &Value, dry_run: bool) -> String {
    let spec_hash = |spec: &Value| {
        let mut text = String::new();
        write_canonical(spec, form, &mut text);
        md5_hex(text)
    };
    let mut s = format!("{}-{}", spec_hash(promise_spec), spec_hash(rr_spec));
    if dry_run {
        s.push_str("-dry-run");
    }
    compute_hash(&s)
}

/// Every hash label a Job run for this promise spec may carry: [`promise_workflow_hash`]
/// first (what Kratix writes), then those earlier Plinth releases wrote where they differ
/// (md5 of the stored spec, in Go's JSON and in `serde_json`'s), so Jobs those releases
/// ran are not run again.
pub fn promise_workflow_hashes(spec: &Value) -> Vec<String> {
    let mut earlier = String::new();
    write_canonical(spec, Form::Earlier, &mut earlier);
    distinct([
        promise_workflow_hash(spec),
        hash_for_spec(spec),
        md5_hex(earlier),
    ])
}

/// [`resource_workflow_hash`] and, where they differ, those earlier releases wrote (see
/// [`promise_workflow_hashes`]).
pub fn resource_workflow_hashes(
    promise_spec: &Value,
    rr_spec: &Value,
    dry_run: bool,
) -> Vec<String> {
    distinct([
        resource_workflow_hash(promise_spec, rr_spec, dry_run),
        resource_hash_in(Form::Go, promise_spec, rr_spec, dry_run),
        resource_hash_in(Form::Earlier, promise_spec, rr_spec, dry_run),
    ])
}

fn distinct(hashes: [String; 3]) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(3);
    for h in hashes {
        if !out.contains(&h) {
            out.push(h);
        }
    }
    out
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

    /// A stored Promise spec with what Kratix's typed form changes: an unknown field, empty
    /// lists, maps and strings, a duration, no promise workflows. The expected hashes are
    /// md5 of the JSON Go writes for Kratix's typed Promise, computed outside this code.
    fn stored_promise_spec() -> Value {
        json!({
            "api": {"kind": "CustomResourceDefinition"},
            "bogus": 1,
            "dependencies": [],
            "destinationSelectors": [{"matchLabels": {}}],
            "requiredPromises": [{"name": "db", "version": ""}],
            "workflows": {
                "config": {"reconciliationInterval": "90m", "pipelineNamespace": ""},
                "resource": {"configure": [{"name": "a && b", "n": 1.0}], "delete": []},
            },
        })
    }

    #[test]
    fn promise_hashes_are_those_of_kratix_typed_promise() {
        let spec = stored_promise_spec();
        assert_eq!(
            canonical_json(&kratix_promise_spec(&spec)),
            r#"{"api":{"kind":"CustomResourceDefinition"},"destinationSelectors":[{}],"requiredPromises":[{"name":"db"}],"workflows":{"config":{"reconciliationInterval":"1h30m0s"},"promise":{},"resource":{"configure":[{"n":1,"name":"a \u0026\u0026 b"}]}}}"#
        );
        assert_eq!(
            promise_workflow_hash(&spec),
            "c8e45b468e44d545912f95ddb2506770"
        );
        assert_eq!(
            resource_workflow_hash(&spec, &json!({"size": "s"}), false),
            "6dc7ca5ccb75ca230c24229e5b623a2a"
        );
        // A spec with nothing to drop still gains the always-present workflow parts.
        assert_eq!(
            canonical_json(&kratix_promise_spec(&json!({}))),
            r#"{"workflows":{"config":{},"promise":{},"resource":{}}}"#
        );
    }

    #[test]
    fn jobs_labelled_by_earlier_releases_still_match_their_spec() {
        let spec = stored_promise_spec();
        let hashes = promise_workflow_hashes(&spec);
        assert_eq!(hashes[0], promise_workflow_hash(&spec));
        // Earlier releases hashed the stored spec, in Go's JSON and in serde_json's.
        assert!(hashes.contains(&hash_for_spec(&spec)));
        let mut serde_form = String::new();
        write_canonical(&spec, Form::Earlier, &mut serde_form);
        assert!(serde_form.contains("a && b") && serde_form.contains("1.0"));
        assert!(hashes.contains(&md5_hex(&serde_form)));
        assert_eq!(hashes.len(), 3);

        let rr = json!({"size": "s"});
        let both = resource_workflow_hashes(&spec, &rr, false);
        assert_eq!(both[0], resource_workflow_hash(&spec, &rr, false));
        assert!(both.contains(&resource_hash_in(Form::Go, &spec, &rr, false)));
        assert_eq!(both.len(), 3);
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
