//! `?labelSelector=` and `?fieldSelector=` parsing and matching.
//!
//! Label selector grammar (Kubernetes `labels.Parse`): comma-separated requirements,
//! each `key`, `!key`, `key=value`, `key==value`, `key!=value`, `key in (a,b)` or
//! `key notin (a,b)`. Parsed into `kube_core::Selector` expressions and matched with
//! `SelectorExt::matches`.
//!
//! Field selectors: `path=value`, `path==value`, `path!=value`, comma-separated, where
//! `path` is a dotted path into the object (`metadata.name`, `metadata.namespace`,
//! `involvedObject.name`, `status.phase`, ...).

use std::collections::{BTreeMap, BTreeSet};

use kube::core::{Expression, Selector, SelectorExt};
use serde_json::Value;

/// Why a `labelSelector` or `fieldSelector` does not parse (answered 400). Messages
/// quote the selector or requirement at fault.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// A `)` closes no `(`.
    #[error("unbalanced ')' in selector {selector:?}")]
    UnbalancedClose {
        /// The selector.
        selector: String,
    },
    /// A `(` is never closed.
    #[error("unbalanced '(' in selector {selector:?}")]
    UnbalancedOpen {
        /// The selector.
        selector: String,
    },
    /// A label selector requirement is malformed.
    #[error("invalid label selector requirement {requirement:?}: {cause}")]
    Requirement {
        /// The requirement.
        requirement: String,
        /// What is wrong (`invalid key`, `missing ')'`, ...).
        cause: &'static str,
    },
    /// A field selector requirement has no operator.
    #[error("invalid field selector {part:?}: expected path=value, path==value or path!=value")]
    FieldOperator {
        /// The requirement.
        part: String,
    },
    /// A field selector requirement has an empty path.
    #[error("invalid field selector {part:?}: empty field path")]
    EmptyFieldPath {
        /// The requirement.
        part: String,
    },
}

/// Parses a label selector string.
///
/// # Errors
/// A [`SelectorError`] naming the offending requirement or the unbalanced selector.
pub fn parse_label_selector(s: &str) -> Result<Selector, SelectorError> {
    let mut exprs = Vec::new();
    if s.trim().is_empty() {
        return Ok(Selector::from_iter(exprs));
    }
    for req in split_top(s)? {
        let req = req.trim();
        if req.is_empty() {
            // `a=b,,c` or a trailing comma: Kubernetes refuses them too.
            return Err(SelectorError::Requirement {
                requirement: s.to_string(),
                cause: "empty requirement between commas",
            });
        }
        exprs.push(parse_requirement(req)?);
    }
    Ok(Selector::from_iter(exprs))
}

/// The labels a selector requires by equality (`key=value` / `key==value`), as (key,
/// value) pairs; requirements of other shapes (`!=`, `in`, `notin`, existence) are left
/// to the full match. Only keys and values that need no JSON escaping are returned.
pub fn required_labels(s: &str) -> Vec<(String, String)> {
    let Ok(reqs) = split_top(s) else {
        return Vec::new();
    };
    reqs.iter()
        .filter_map(|r| {
            let r = r.trim();
            if r.contains("!=") || r.contains('(') {
                return None;
            }
            let (k, v) = r.split_once("==").or_else(|| r.split_once('='))?;
            let (k, v) = (k.trim(), v.trim());
            let plain = |x: &str| {
                x.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
            };
            (valid_key(k) && plain(k) && plain(v)).then(|| (k.to_string(), v.to_string()))
        })
        .collect()
}

/// Substrings that the stored JSON of every object matching the required labels
/// contains: `"key":"value"` for each pair. A list checks them before parsing an object,
/// so a selective selector skips most objects at the cost of a substring search; objects
/// that contain them are still matched properly. Label keys and values need no JSON
/// escaping, so the needle is exactly how the label is stored.
pub fn label_needles(required: &[(String, String)]) -> Vec<String> {
    required
        .iter()
        .map(|(k, v)| format!("\"{k}\":\"{v}\""))
        .collect()
}

/// Splits at commas that are not inside parentheses.
fn split_top(s: &str) -> Result<Vec<String>, SelectorError> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' => {
                depth += 1;
                cur.push(c)
            }
            ')' => {
                depth -= 1;
                if depth < 0 {
                    return Err(SelectorError::UnbalancedClose {
                        selector: s.to_string(),
                    });
                }
                cur.push(c)
            }
            ',' if depth == 0 => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    if depth != 0 {
        return Err(SelectorError::UnbalancedOpen {
            selector: s.to_string(),
        });
    }
    out.push(cur);
    Ok(out)
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 316
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

/// Why `v` is no label value, if it is not one.
fn value_problem(v: &str) -> Option<&'static str> {
    if v.len() > 63 {
        return Some("invalid value: must be no more than 63 characters");
    }
    let ok = v
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    (!ok).then_some("invalid value: only alphanumerics, '-', '_' and '.' are allowed")
}

fn parse_requirement(req: &str) -> Result<Expression, SelectorError> {
    let bad = |cause: &'static str| SelectorError::Requirement {
        requirement: req.to_string(),
        cause,
    };
    if let Some(k) = req.strip_prefix('!') {
        let k = k.trim();
        if !valid_key(k) {
            return Err(bad("invalid key"));
        }
        return Ok(Expression::DoesNotExist(k.to_string()));
    }
    for (op, neg) in [("!=", true), ("==", false), ("=", false)] {
        if let Some((k, v)) = req.split_once(op) {
            let (k, v) = (k.trim(), v.trim());
            if !valid_key(k) {
                return Err(bad("invalid key"));
            }
            if let Some(why) = value_problem(v) {
                return Err(bad(why));
            }
            return Ok(if neg {
                Expression::NotEqual(k.into(), v.into())
            } else {
                Expression::Equal(k.into(), v.into())
            });
        }
    }
    // set-based: key in (a,b) / key notin (a,b)
    if let Some(open) = req.find('(') {
        let head = req[..open].trim();
        let close = req.rfind(')').ok_or_else(|| bad("missing ')'"))?;
        if req[close + 1..].trim() != "" {
            return Err(bad("text after ')'"));
        }
        let values: BTreeSet<String> = req[open + 1..close]
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect();
        if let Some(why) = values.iter().find_map(|v| value_problem(v)) {
            return Err(bad(why));
        }
        let mut parts = head.split_whitespace();
        let key = parts.next().ok_or_else(|| bad("missing key"))?;
        let op = parts.next().ok_or_else(|| bad("missing operator"))?;
        if parts.next().is_some() || !valid_key(key) {
            return Err(bad("invalid key"));
        }
        return match op {
            "in" => Ok(Expression::In(key.into(), values)),
            "notin" => Ok(Expression::NotIn(key.into(), values)),
            _ => Err(bad("unknown operator (expected in or notin)")),
        };
    }
    let k = req.trim();
    let mut words = k.split_whitespace();
    if matches!(words.nth(1), Some("in" | "notin")) {
        return Err(bad("expected a '(' list of values after in or notin"));
    }
    if k.contains(char::is_whitespace) || !valid_key(k) {
        return Err(bad("invalid key"));
    }
    Ok(Expression::Exists(k.to_string()))
}

/// True when the object's labels match the selector.
pub fn labels_match(sel: &Selector, obj: &Value) -> bool {
    let labels: BTreeMap<String, String> = obj
        .pointer("/metadata/labels")
        .and_then(|l| l.as_object())
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default();
    sel.matches(&labels)
}

/// One field selector requirement.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldReq {
    /// Dotted path.
    pub path: String,
    /// Expected value.
    pub value: String,
    /// True for `!=`.
    pub negate: bool,
}

/// Parses a field selector.
///
/// # Errors
/// [`SelectorError::FieldOperator`] or [`SelectorError::EmptyFieldPath`] naming the
/// requirement.
pub fn parse_field_selector(s: &str) -> Result<Vec<FieldReq>, SelectorError> {
    let mut out = Vec::new();
    for part in s.split(',') {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        let (path, value, negate) = if let Some((k, v)) = part.split_once("!=") {
            (k, v, true)
        } else if let Some((k, v)) = part.split_once("==") {
            (k, v, false)
        } else if let Some((k, v)) = part.split_once('=') {
            (k, v, false)
        } else {
            return Err(SelectorError::FieldOperator {
                part: part.to_string(),
            });
        };
        let path = path.trim();
        if path.is_empty() {
            return Err(SelectorError::EmptyFieldPath {
                part: part.to_string(),
            });
        }
        out.push(FieldReq {
            path: path.to_string(),
            value: value.trim().to_string(),
            negate,
        });
    }
    Ok(out)
}

/// The fields every resource can be selected by.
const COMMON_FIELDS: &[&str] = &["metadata.name", "metadata.namespace"];

/// An Event's indexed fields, in the stored core/v1 spelling for both API groups.
const EVENT_INDEXED: &[&str] = &[
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
];

/// Further fields kube-apiserver indexes, by `(group, plural)`. Events are listed in the
/// stored core/v1 spelling (events.k8s.io/v1 paths are mapped to it before the check).
const KIND_FIELDS: &[(&str, &str, &[&str])] = &[
    (
        "",
        "pods",
        &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.podIPs",
            "status.nominatedNodeName",
        ],
    ),
    ("", "events", EVENT_INDEXED),
    ("events.k8s.io", "events", EVENT_INDEXED),
    ("", "secrets", &["type"]),
    ("", "namespaces", &["status.phase"]),
    ("", "nodes", &["spec.unschedulable"]),
    ("", "services", &["spec.clusterIP", "spec.type"]),
    ("", "replicationcontrollers", &["status.replicas"]),
    ("apps", "replicasets", &["status.replicas"]),
    ("batch", "jobs", &["status.successful"]),
    (
        "certificates.k8s.io",
        "certificatesigningrequests",
        &["spec.signerName"],
    ),
];

/// Whether resource `group`/`plural` can be selected by field `path`.
pub fn field_supported(group: &str, plural: &str, path: &str) -> bool {
    COMMON_FIELDS.contains(&path)
        || KIND_FIELDS
            .iter()
            .any(|(g, p, fields)| *g == group && *p == plural && fields.contains(&path))
}

/// Field value as a string (missing = empty, as Kubernetes field sets do).
fn field_value(obj: &Value, path: &str) -> String {
    let mut cur = obj;
    for seg in path.split('.') {
        match cur.get(seg) {
            Some(v) => cur = v,
            None => return String::new(),
        }
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// True when the object matches every requirement.
pub fn fields_match(reqs: &[FieldReq], obj: &Value) -> bool {
    reqs.iter()
        .all(|r| (field_value(obj, &r.path) == r.value) != r.negate)
}

#[cfg(test)]
mod tests {
    #[test]
    fn label_needles_are_in_every_matching_object() {
        let obj = serde_json::json!({"metadata": {"name": "x", "labels": {"kratix.io/resource-name": "r1", "app": "web"}}});
        let text = serde_json::to_string(&obj).unwrap();
        for sel in [
            "kratix.io/resource-name=r1",
            "app==web,kratix.io/resource-name = r1",
            "app in (web),app",
            "app!=db",
        ] {
            let parsed = super::parse_label_selector(sel).unwrap();
            assert!(super::labels_match(&parsed, &obj), "{sel}");
            for n in super::label_needles(&super::required_labels(sel)) {
                assert!(text.contains(&n), "{sel}: {n} not in {text}");
            }
        }
        assert_eq!(
            super::label_needles(&super::required_labels("a=b,c!=d,e in (f)")),
            vec!["\"a\":\"b\"".to_string()]
        );
        assert!(!text.contains(&super::label_needles(&super::required_labels("app=db"))[0]));
    }

    use super::*;
    use serde_json::json;

    fn obj(labels: Value) -> Value {
        json!({"metadata": {"name": "n", "namespace": "ns", "labels": labels}})
    }

    #[test]
    fn all_operators() {
        let o = obj(json!({"app": "web", "tier": "front"}));
        for (s, want) in [
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app in (web, db)", true),
            ("app notin (web)", false),
            ("tier", true),
            ("!tier", false),
            ("!missing", true),
            ("missing", false),
            ("app=web,tier in (front,back),!x", true),
            ("", true),
        ] {
            let sel = parse_label_selector(s).unwrap();
            assert_eq!(labels_match(&sel, &o), want, "{s}");
        }
    }

    #[test]
    fn round_trips_through_display() {
        for s in [
            "app=web",
            "app!=web",
            "app in (a,b)",
            "app notin (a,b)",
            "app",
            "!app",
        ] {
            let sel = parse_label_selector(s).unwrap();
            let again = parse_label_selector(&sel.to_string()).unwrap();
            assert_eq!(sel.to_string(), again.to_string());
        }
    }

    #[test]
    fn rejects_garbage() {
        for s in [
            "app=(",
            "a b",
            "app in a,b)",
            "app foo (a)",
            "=x",
            "app=we b",
            "a=b,,c",
            "a=b,",
        ] {
            assert!(parse_label_selector(s).is_err(), "{s}");
        }
        // Each says what is wrong.
        for (s, cause) in [
            ("a=b,,c", "empty requirement between commas"),
            (
                "a notin b",
                "expected a '(' list of values after in or notin",
            ),
            (
                &format!("k={}", "v".repeat(64)),
                "must be no more than 63 characters",
            ),
            ("k in (a, b c)", "only alphanumerics"),
        ] {
            let e = parse_label_selector(s).unwrap_err().to_string();
            assert!(e.contains(cause), "{s}: {e}");
        }
    }

    #[test]
    fn only_indexed_fields_can_be_selected() {
        assert!(field_supported("", "configmaps", "metadata.name"));
        assert!(field_supported(
            "platform.kratix.io",
            "promises",
            "metadata.namespace"
        ));
        assert!(!field_supported("", "configmaps", "metadata.nmae"));
        assert!(!field_supported("", "configmaps", "data.a"));
        assert!(field_supported("", "pods", "status.phase"));
        assert!(!field_supported("", "configmaps", "status.phase"));
        assert!(field_supported("", "events", "involvedObject.name"));
        assert!(field_supported("", "secrets", "type"));
    }

    #[test]
    fn field_selectors() {
        let o = json!({"metadata": {"name": "a", "namespace": "x"}, "involvedObject": {"kind": "Pod", "name": "p"}});
        let r = parse_field_selector("metadata.name=a,involvedObject.kind==Pod").unwrap();
        assert!(fields_match(&r, &o));
        let r = parse_field_selector("metadata.namespace!=x").unwrap();
        assert!(!fields_match(&r, &o));
        assert!(parse_field_selector("nonsense").is_err());
    }
}
