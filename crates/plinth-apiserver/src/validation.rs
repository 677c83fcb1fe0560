//! Field validation the Kubernetes API server applies to every object, with its messages
//! (`k8s.io/apimachinery/pkg/api/validation` and `pkg/util/validation`): qualified names
//! (label and annotation keys, finalizers), label values, the total annotation size,
//! `generateName` prefixes; and the container rules of a Pod spec that pipelines reuse.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::resource::Cause;

/// Longest name part of a qualified name and longest label value.
const MAX_LABEL_LEN: usize = 63;
/// Longest DNS-1123 subdomain (qualified-name prefix).
const MAX_SUBDOMAIN_LEN: usize = 253;
/// Limit of all annotation keys and values together, in bytes (256 KiB).
pub const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const SUBDOMAIN_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";

/// Kubernetes' `RegexError`: the message, examples and the regular expression.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let mut s = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            s.push_str(" or ");
        }
        s.push_str(&format!("'{e}', "));
    }
    s.push_str(&format!("regex used for validation is '{fmt}')"));
    s
}

fn max_len_error(n: usize) -> String {
    format!("must be no more than {n} characters")
}

fn is_alnum(c: char) -> bool {
    c.is_ascii_alphanumeric()
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn matches_qualified_part(s: &str) -> bool {
    !s.is_empty()
        && s.starts_with(is_alnum)
        && s.ends_with(is_alnum)
        && s.chars()
            .all(|c| is_alnum(c) || matches!(c, '-' | '_' | '.'))
}

/// Errors of a DNS-1123 subdomain (empty when valid).
pub fn dns1123_subdomain_errors(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    if s.len() > MAX_SUBDOMAIN_LEN {
        out.push(max_len_error(MAX_SUBDOMAIN_LEN));
    }
    let ok = !s.is_empty()
        && s.split('.').all(|part| {
            !part.is_empty()
                && part.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                && part.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        });
    if !ok {
        out.push(regex_error(SUBDOMAIN_MSG, SUBDOMAIN_FMT, &["example.com"]));
    }
    out
}

/// Errors of a DNS-1123 label of at most 63 characters (empty when valid).
pub fn dns1123_label_errors(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    if s.len() > MAX_LABEL_LEN {
        out.push(max_len_error(MAX_LABEL_LEN));
    }
    let ok = !s.is_empty()
        && s.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && s.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !ok {
        out.push(regex_error(LABEL_MSG, LABEL_FMT, &["my-name", "123-abc"]));
    }
    out
}

/// Kubernetes' `IsQualifiedName`: `[prefix/]name`, the prefix a DNS-1123 subdomain and the
/// name at most 63 alphanumerics, `-`, `_`, `.` (empty when valid).
pub fn qualified_name_errors(value: &str) -> Vec<String> {
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                return vec!["prefix part must be non-empty".into()];
            }
            let errs = dns1123_subdomain_errors(prefix);
            if !errs.is_empty() {
                return errs
                    .into_iter()
                    .map(|e| format!("prefix part {e}"))
                    .collect();
            }
            name
        }
        _ => {
            return vec![format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(
                    QUALIFIED_NAME_MSG,
                    QUALIFIED_NAME_FMT,
                    &["MyName", "my.name", "123-abc"]
                )
            )];
        }
    };
    let mut out = Vec::new();
    if name.is_empty() {
        out.push("name part must be non-empty".into());
    } else if name.len() > MAX_LABEL_LEN {
        out.push(format!("name part {}", max_len_error(MAX_LABEL_LEN)));
    }
    if !name.is_empty() && !matches_qualified_part(name) {
        out.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_MSG,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    out
}

/// Kubernetes' `IsValidLabelValue` (empty when valid; the empty string is valid).
pub fn label_value_errors(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    if value.len() > MAX_LABEL_LEN {
        out.push(max_len_error(MAX_LABEL_LEN));
    }
    if !value.is_empty() && !matches_qualified_part(value) {
        out.push(regex_error(
            LABEL_VALUE_MSG,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    out
}

/// `Invalid value: "<value>": <msg>` under `field`.
pub fn invalid(field: &str, value: &str, msg: &str) -> Cause {
    Cause {
        reason: "FieldValueInvalid".into(),
        message: format!("Invalid value: {}: {msg}", quote(value)),
        field: field.into(),
    }
}

/// `Required value[: <detail>]` under `field`.
pub fn required(field: &str, detail: &str) -> Cause {
    Cause {
        reason: "FieldValueRequired".into(),
        message: if detail.is_empty() {
            "Required value".into()
        } else {
            format!("Required value: {detail}")
        },
        field: field.into(),
    }
}

fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("{s:?}"))
}

/// Label map rules (`metadata.labels`, and any other label map at `field`): every key a
/// qualified name, every value a valid label value.
pub fn label_causes(labels: &serde_json::Map<String, Value>, field: &str) -> Vec<Cause> {
    let mut out = Vec::new();
    for (k, v) in labels {
        for e in qualified_name_errors(k) {
            out.push(invalid(field, k, &e));
        }
        if let Some(v) = v.as_str() {
            for e in label_value_errors(v) {
                out.push(invalid(field, v, &e));
            }
        }
    }
    out
}

/// Annotation rules: keys are qualified names (checked lower-cased, as Kubernetes does)
/// and keys plus values add up to at most [`TOTAL_ANNOTATION_SIZE_LIMIT`] bytes.
pub fn annotation_causes(annotations: &serde_json::Map<String, Value>, field: &str) -> Vec<Cause> {
    let mut out = Vec::new();
    let mut total = 0usize;
    for (k, v) in annotations {
        total += k.len() + v.as_str().map_or(0, str::len);
        for e in qualified_name_errors(&k.to_lowercase()) {
            out.push(invalid(field, k, &e));
        }
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        out.push(Cause {
            reason: "FieldValueTooLong".into(),
            message: format!("Too long: must have at most {TOTAL_ANNOTATION_SIZE_LIMIT} bytes"),
            field: field.into(),
        });
    }
    out
}

/// The ObjectMeta rules of the Kubernetes API server for labels, annotations and
/// finalizers (types are checked before this). `generateName` is checked at create by
/// [`generate_name_causes`].
pub fn object_meta_causes(meta: &serde_json::Map<String, Value>) -> Vec<Cause> {
    let mut out = Vec::new();
    if let Some(Value::Object(l)) = meta.get("labels") {
        out.extend(label_causes(l, "metadata.labels"));
    }
    if let Some(Value::Object(a)) = meta.get("annotations") {
        out.extend(annotation_causes(a, "metadata.annotations"));
    }
    if let Some(Value::Array(fs)) = meta.get("finalizers") {
        let mut seen = BTreeSet::new();
        for f in fs.iter().filter_map(Value::as_str) {
            for e in qualified_name_errors(f) {
                out.push(invalid("metadata.finalizers", f, &e));
            }
            if !seen.insert(f) {
                out.push(Cause {
                    reason: "FieldValueDuplicate".into(),
                    message: format!("Duplicate value: {}", quote(f)),
                    field: "metadata.finalizers".into(),
                });
            }
        }
    }
    out
}

/// `metadata.generateName` as Kubernetes checks it: the prefix must be valid under the
/// kind's name rule once a trailing `-` is masked (the random suffix follows it).
/// `name_check` returns the name rule's errors for a candidate name.
pub fn generate_name_causes(prefix: &str, name_check: &dyn Fn(&str) -> Vec<String>) -> Vec<Cause> {
    let masked = match prefix.strip_suffix('-') {
        Some(rest) if !rest.is_empty() => format!("{rest}a"),
        _ => prefix.to_string(),
    };
    name_check(&masked)
        .into_iter()
        .map(|e| invalid("metadata.generateName", prefix, &e))
        .collect()
}

/// What a pipeline's Pod already holds besides the user's containers and volumes: the
/// adapter containers, Kratix's volumes and the mount paths of the `/kratix` contract.
pub struct PodFrame<'a> {
    /// Container names taken by the pipeline adapter (`reader`, `work-writer`, ...).
    pub containers: &'a [&'a str],
    /// Volumes Kratix adds (`shared-input`, ...); user mounts may name them.
    pub volumes: &'a [&'a str],
    /// Mount paths Kratix gives every user container (`/kratix/input`, ...).
    pub mount_paths: &'a [&'a str],
}

/// Container names of a Pod spec at `field` (e.g. `spec.template.spec`), as kube-apiserver
/// validates them: every container, init container and ephemeral container has a name
/// (`Required value`), a DNS-1123 label, unique across the three lists (`Duplicate value`).
pub fn container_name_causes(pod_spec: &Value, field: &str) -> Vec<Cause> {
    let mut names = NameCauses::default();
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        names.check(pod_spec, field, list);
    }
    names.causes
}

/// Volume names of a Pod spec at `field`, as kube-apiserver validates them: each volume
/// has a name (`Required value`), a DNS-1123 label (so it is a safe directory name on the
/// node), unique in the list (`Duplicate value`).
pub fn volume_name_causes(pod_spec: &Value, field: &str) -> Vec<Cause> {
    let mut names = NameCauses::default();
    names.check(pod_spec, field, "volumes");
    names.causes
}

/// Sub-paths of every container's volume mounts in a Pod spec at `field`, as
/// kube-apiserver validates them: relative (`must be a relative path`) and never climbing
/// out of the volume (`must not contain '..'`).
pub fn sub_path_causes(pod_spec: &Value, field: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        let containers = pod_spec.get(list).and_then(Value::as_array);
        for (i, c) in containers.into_iter().flatten().enumerate() {
            let mounts = c.get("volumeMounts").and_then(Value::as_array);
            for (j, m) in mounts.into_iter().flatten().enumerate() {
                let Some(sub) = m.get("subPath").and_then(Value::as_str) else {
                    continue;
                };
                let at = format!("{field}.{list}[{i}].volumeMounts[{j}].subPath");
                if sub.starts_with('/') {
                    causes.push(invalid(&at, sub, "must be a relative path"));
                }
                if sub.split('/').any(|part| part == "..") {
                    causes.push(invalid(&at, sub, "must not contain '..'"));
                }
            }
        }
    }
    causes
}

/// The names seen so far in a Pod spec's named lists, and what is wrong with them.
#[derive(Default)]
struct NameCauses {
    seen: std::collections::BTreeSet<String>,
    causes: Vec<Cause>,
}

impl NameCauses {
    /// Each item of `pod_spec.<list>` has a `name` that is a DNS-1123 label not seen before.
    fn check(&mut self, pod_spec: &Value, field: &str, list: &str) {
        let items = pod_spec.get(list).and_then(Value::as_array);
        for (i, item) in items.into_iter().flatten().enumerate() {
            let at = format!("{field}.{list}[{i}].name");
            match item
                .get("name")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
            {
                None => self.causes.push(required(&at, "")),
                Some(name) => {
                    for e in dns1123_label_errors(name) {
                        self.causes.push(invalid(&at, name, &e));
                    }
                    if !self.seen.insert(name.to_string()) {
                        self.causes.push(duplicate(&at, name));
                    }
                }
            }
        }
    }
}

/// `Unsupported value: "<value>": supported values: "a", "b"` under `field`.
pub fn not_supported(field: &str, value: &str, supported: &[&str]) -> Cause {
    let list: Vec<String> = supported.iter().map(|s| quote(s)).collect();
    Cause {
        reason: "FieldValueNotSupported".into(),
        message: format!(
            "Unsupported value: {}: supported values: {}",
            quote(value),
            list.join(", ")
        ),
        field: field.into(),
    }
}

/// `Forbidden: <detail>` under `field`.
pub fn forbidden(field: &str, detail: &str) -> Cause {
    Cause {
        reason: "FieldValueForbidden".into(),
        message: format!("Forbidden: {detail}"),
        field: field.into(),
    }
}

/// The strings of a JSON array (what is not a string, or not an array, is left out).
pub fn str_items(v: &Value) -> Vec<&str> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect()
}

/// A LabelSelector's rules (Kubernetes `ValidateLabelSelector`): `matchLabels` as a
/// label map; each of `matchExpressions` with a known operator, values exactly when the
/// operator needs them, a qualified-name key and label values.
pub fn label_selector_causes(selector: &Value, field: &str) -> Vec<Cause> {
    let mut out = Vec::new();
    if let Some(labels) = selector.get("matchLabels").and_then(Value::as_object) {
        out.extend(label_causes(labels, &format!("{field}.matchLabels")));
    }
    let exprs = selector.get("matchExpressions").and_then(Value::as_array);
    for (i, e) in exprs.into_iter().flatten().enumerate() {
        let f = format!("{field}.matchExpressions[{i}]");
        let values = str_items(&e["values"]);
        let operator = e["operator"].as_str().unwrap_or_default();
        match operator {
            "In" | "NotIn" if values.is_empty() => out.push(required(
                &format!("{f}.values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if !values.is_empty() => out.push(forbidden(
                &format!("{f}.values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => out.push(invalid(
                &format!("{f}.operator"),
                other,
                "not a valid selector operator",
            )),
        }
        let key = e["key"].as_str().unwrap_or_default();
        for msg in qualified_name_errors(key) {
            out.push(invalid(&format!("{f}.key"), key, &msg));
        }
        for (j, v) in values.iter().enumerate() {
            for msg in label_value_errors(v) {
                out.push(invalid(&format!("{f}.values[{j}]"), v, &msg));
            }
        }
    }
    out
}

/// `Duplicate value: "<value>"` under `field`.
pub fn duplicate(field: &str, value: &str) -> Cause {
    Cause {
        reason: "FieldValueDuplicate".into(),
        message: format!("Duplicate value: {}", quote(value)),
        field: field.into(),
    }
}

/// `Not found: "<value>"` under `field`.
pub fn not_found(field: &str, value: &str) -> Cause {
    Cause {
        reason: "FieldValueNotFound".into(),
        message: format!("Not found: {}", quote(value)),
        field: field.into(),
    }
}

const ENV_NAME_MSG: &str = "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit";
const ENV_NAME_FMT: &str = "[-._a-zA-Z][-._a-zA-Z0-9]*";

fn env_name_errors(name: &str) -> Vec<String> {
    let ok = name.starts_with(|c: char| c.is_ascii_alphabetic() || matches!(c, '-' | '.' | '_'))
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'));
    if ok {
        Vec::new()
    } else {
        vec![regex_error(
            ENV_NAME_MSG,
            ENV_NAME_FMT,
            &["my.env-name", "MY_ENV.NAME", "MyEnvName1"],
        )]
    }
}

/// The container rules Kubernetes applies to a Pod (`ValidatePodSpec`), for the
/// containers and volumes of a pipeline at `field` (`spec.workflows.resource.configure[0]`):
/// every container has a DNS-1123 `name` unique in the Pod and an `image`; volumes have
/// unique DNS-1123 names; env entries have valid names and at most one of `value` and
/// `valueFrom`; every volume mount names a declared volume, has a `mountPath`, and mount
/// paths are unique per container.
pub fn pipeline_pod_causes(spec: &Value, field: &str, frame: &PodFrame) -> Vec<Cause> {
    let mut out = Vec::new();
    let mut volumes: BTreeSet<String> = frame.volumes.iter().map(|s| s.to_string()).collect();
    for (i, v) in spec["volumes"].as_array().into_iter().flatten().enumerate() {
        let f = format!("{field}.spec.volumes[{i}].name");
        match v["name"].as_str().unwrap_or_default() {
            "" => out.push(required(&f, "")),
            name => {
                out.extend(
                    dns1123_label_errors(name)
                        .iter()
                        .map(|e| invalid(&f, name, e)),
                );
                if !volumes.insert(name.to_string()) {
                    out.push(duplicate(&f, name));
                }
            }
        }
    }
    let mut names: BTreeSet<String> = frame.containers.iter().map(|s| s.to_string()).collect();
    for (i, c) in spec["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let cf = format!("{field}.spec.containers[{i}]");
        match c["name"].as_str().unwrap_or_default() {
            "" => out.push(required(&format!("{cf}.name"), "")),
            name => {
                let f = format!("{cf}.name");
                out.extend(
                    dns1123_label_errors(name)
                        .iter()
                        .map(|e| invalid(&f, name, e)),
                );
                if !names.insert(name.to_string()) {
                    out.push(duplicate(&f, name));
                }
            }
        }
        match c["image"].as_str().unwrap_or_default() {
            "" => out.push(required(&format!("{cf}.image"), "")),
            image if image.trim() != image => out.push(invalid(
                &format!("{cf}.image"),
                image,
                "must not have leading or trailing whitespace",
            )),
            _ => {}
        }
        out.extend(env_causes(c, &cf));
        out.extend(mount_causes(c, &cf, &volumes, frame));
    }
    out
}

fn env_causes(c: &Value, cf: &str) -> Vec<Cause> {
    let mut out = Vec::new();
    for (j, e) in c["env"].as_array().into_iter().flatten().enumerate() {
        let ef = format!("{cf}.env[{j}]");
        match e["name"].as_str().unwrap_or_default() {
            "" => out.push(required(&format!("{ef}.name"), "")),
            name => out.extend(
                env_name_errors(name)
                    .iter()
                    .map(|m| invalid(&format!("{ef}.name"), name, m)),
            ),
        }
        let has_value = e["value"].as_str().is_some_and(|v| !v.is_empty());
        if let Some(from) = e.get("valueFrom").filter(|v| !v.is_null()) {
            if has_value {
                out.push(Cause {
                    reason: "FieldValueInvalid".into(),
                    message: "Invalid value: \"\": may not be specified when `value` is not empty"
                        .into(),
                    field: format!("{ef}.valueFrom"),
                });
            }
            let sources = [
                "fieldRef",
                "resourceFieldRef",
                "configMapKeyRef",
                "secretKeyRef",
            ]
            .iter()
            .filter(|k| from.get(**k).is_some_and(|v| !v.is_null()))
            .count();
            if sources != 1 {
                out.push(Cause {
                    reason: "FieldValueInvalid".into(),
                    message: "Invalid value: \"\": must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`".into(),
                    field: format!("{ef}.valueFrom"),
                });
            }
        }
    }
    out
}

fn mount_causes(c: &Value, cf: &str, volumes: &BTreeSet<String>, frame: &PodFrame) -> Vec<Cause> {
    let mut out = Vec::new();
    let mut paths: BTreeSet<String> = frame.mount_paths.iter().map(|s| s.to_string()).collect();
    for (j, m) in c["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let mf = format!("{cf}.volumeMounts[{j}]");
        match m["name"].as_str().unwrap_or_default() {
            "" => out.push(required(&format!("{mf}.name"), "")),
            name if !volumes.contains(name) => out.push(not_found(&format!("{mf}.name"), name)),
            _ => {}
        }
        match m["mountPath"].as_str().unwrap_or_default() {
            "" => out.push(required(&format!("{mf}.mountPath"), "")),
            path => {
                if !paths.insert(path.trim_end_matches('/').to_string()) {
                    out.push(invalid(&format!("{mf}.mountPath"), path, "must be unique"));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn qualified_names_and_label_values_follow_kubernetes() {
        assert!(qualified_name_errors("app.kubernetes.io/name").is_empty());
        assert!(qualified_name_errors("MyName").is_empty());
        assert_eq!(
            qualified_name_errors("a b/c d"),
            [format!(
                "prefix part {}",
                regex_error(SUBDOMAIN_MSG, SUBDOMAIN_FMT, &["example.com"])
            )]
        );
        assert_eq!(
            qualified_name_errors("/x"),
            ["prefix part must be non-empty"]
        );
        assert_eq!(qualified_name_errors("a/"), ["name part must be non-empty"]);
        assert!(qualified_name_errors("a/b/c")[0].starts_with("a qualified name must consist"));
        assert!(qualified_name_errors(&"x".repeat(64))[0].contains("no more than 63"));
        assert!(label_value_errors("").is_empty());
        assert!(label_value_errors("my_value.1").is_empty());
        assert_eq!(
            label_value_errors("has space"),
            [
                "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
            ]
        );
    }

    #[test]
    fn object_meta_names_the_field() {
        let meta = json!({
            "labels": {"ok": "fine", "team": "a b"},
            "annotations": {"big": "x".repeat(TOTAL_ANNOTATION_SIZE_LIMIT)},
            "finalizers": ["example.com/f", "bad finalizer"]
        });
        let causes = object_meta_causes(meta.as_object().unwrap());
        let fields: Vec<_> = causes
            .iter()
            .map(|c| (c.field.as_str(), c.reason.as_str()))
            .collect();
        assert_eq!(
            fields,
            [
                ("metadata.labels", "FieldValueInvalid"),
                ("metadata.annotations", "FieldValueTooLong"),
                ("metadata.finalizers", "FieldValueInvalid"),
            ]
        );
        assert!(
            causes[0]
                .message
                .starts_with("Invalid value: \"a b\": a valid label")
        );
    }

    #[test]
    fn generate_name_may_end_with_a_dash() {
        let check = |s: &str| dns1123_subdomain_errors(s);
        assert!(generate_name_causes("web-", &check).is_empty());
        let c = generate_name_causes("Web_", &check);
        assert_eq!(c[0].field, "metadata.generateName");
    }

    #[test]
    fn pipeline_containers_are_checked_as_pod_containers() {
        let frame = PodFrame {
            containers: &["reader", "work-writer", "status-writer"],
            volumes: &["shared-input", "shared-output", "shared-metadata"],
            mount_paths: &["/kratix/input", "/kratix/output", "/kratix/metadata"],
        };
        let spec = json!({
            "volumes": [{"name": "cache", "emptyDir": {}}],
            "containers": [
                {"name": "a", "imag": "busybox"},
                {"name": "a", "image": "busybox", "env": [{"name": "1X", "value": "v"}],
                 "volumeMounts": [{"name": "nope", "mountPath": "/kratix/output"},
                                  {"name": "cache", "mountPath": "/cache"}]},
                {"name": "Bad_Name", "image": "x"},
                {"image": "x"},
                {"name": "reader", "image": "x"}
            ]
        });
        let got: Vec<(String, String)> = pipeline_pod_causes(&spec, "p", &frame)
            .into_iter()
            .map(|c| (c.field, c.reason))
            .collect();
        let want = [
            ("p.spec.containers[0].image", "FieldValueRequired"),
            ("p.spec.containers[1].name", "FieldValueDuplicate"),
            ("p.spec.containers[1].env[0].name", "FieldValueInvalid"),
            (
                "p.spec.containers[1].volumeMounts[0].name",
                "FieldValueNotFound",
            ),
            (
                "p.spec.containers[1].volumeMounts[0].mountPath",
                "FieldValueInvalid",
            ),
            ("p.spec.containers[2].name", "FieldValueInvalid"),
            ("p.spec.containers[3].name", "FieldValueRequired"),
            ("p.spec.containers[4].name", "FieldValueDuplicate"),
        ];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
        assert_eq!(got, want);
    }
}
