//! Validation of the webhook configurations themselves (kube-apiserver's rules for
//! `admissionregistration.k8s.io/v1`), so that a configuration that could not be
//! called is refused with a field error when it is written, not at the first request
//! it would have reached.

use std::collections::HashSet;

use serde_json::Value;

use super::config::{GROUP, MUTATING, VALIDATING};
use crate::app::{cause, is_dns1123_subdomain};
use crate::resource::{Cause, ResourceInfo};

/// Whether `info` is MutatingWebhookConfiguration or ValidatingWebhookConfiguration.
pub(crate) fn is_configuration(info: &ResourceInfo) -> bool {
    info.group == GROUP && (info.plural == MUTATING || info.plural == VALIDATING)
}

/// The field errors of a webhook configuration (empty when it is valid).
pub(crate) fn configuration_causes(info: &ResourceInfo, obj: &Value) -> Vec<Cause> {
    let mutating = info.plural == MUTATING;
    let mut out = Vec::new();
    let mut names = HashSet::new();
    let hooks = obj.get("webhooks").and_then(Value::as_array);
    for (i, w) in hooks.into_iter().flatten().enumerate() {
        let at = format!("webhooks[{i}]");
        let name = w.get("name").and_then(Value::as_str).unwrap_or_default();
        check_name(&at, name, &mut names, &mut out);
        check_enum(w, &at, "failurePolicy", &["Fail", "Ignore"], &mut out);
        check_enum(w, &at, "matchPolicy", &["Exact", "Equivalent"], &mut out);
        if mutating {
            check_enum(
                w,
                &at,
                "reinvocationPolicy",
                &["Never", "IfNeeded"],
                &mut out,
            );
        }
        check_side_effects(w, &at, &mut out);
        check_review_versions(w, &at, &mut out);
        check_timeout(w, &at, &mut out);
        check_client_config(w, &at, &mut out);
        check_rules(w, &at, &mut out);
    }
    out
}

fn check_name(at: &str, name: &str, seen: &mut HashSet<String>, out: &mut Vec<Cause>) {
    let field = format!("{at}.name");
    if name.is_empty() {
        out.push(cause("FieldValueRequired", &field, "Required value"));
    } else if !is_dns1123_subdomain(name) || name.split('.').count() < 3 {
        out.push(cause(
            "FieldValueInvalid",
            &field,
            format!(
                "Invalid value: {name:?}: should be a domain with at least three segments separated by dots"
            ),
        ));
    } else if !seen.insert(name.to_string()) {
        out.push(cause(
            "FieldValueDuplicate",
            &field,
            format!("Duplicate value: {name:?}"),
        ));
    }
}

fn check_enum(w: &Value, at: &str, key: &str, allowed: &[&str], out: &mut Vec<Cause>) {
    if let Some(v) = w.get(key).and_then(Value::as_str)
        && !allowed.contains(&v)
    {
        out.push(unsupported(&format!("{at}.{key}"), v, allowed));
    }
}

fn unsupported(field: &str, v: &str, allowed: &[&str]) -> Cause {
    let list: Vec<String> = allowed.iter().map(|a| format!("{a:?}")).collect();
    cause(
        "FieldValueNotSupported",
        field,
        format!(
            "Unsupported value: {v:?}: supported values: {}",
            list.join(", ")
        ),
    )
}

fn check_side_effects(w: &Value, at: &str, out: &mut Vec<Cause>) {
    let field = format!("{at}.sideEffects");
    match w.get("sideEffects").and_then(Value::as_str) {
        None | Some("") => out.push(cause(
            "FieldValueRequired",
            &field,
            "Required value: must specify one of None, NoneOnDryRun",
        )),
        Some("None" | "NoneOnDryRun") => {}
        Some(v) => out.push(unsupported(&field, v, &["None", "NoneOnDryRun"])),
    }
}

fn check_review_versions(w: &Value, at: &str, out: &mut Vec<Cause>) {
    let field = format!("{at}.admissionReviewVersions");
    let versions: Vec<&str> = w
        .get("admissionReviewVersions")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if versions.is_empty() {
        out.push(cause(
            "FieldValueRequired",
            &field,
            "Required value: must specify one of v1",
        ));
    } else if !versions.contains(&"v1") {
        out.push(cause(
            "FieldValueInvalid",
            &field,
            format!("Invalid value: {versions:?}: must include at least one of v1"),
        ));
    }
}

fn check_timeout(w: &Value, at: &str, out: &mut Vec<Cause>) {
    if let Some(t) = w.get("timeoutSeconds").and_then(Value::as_i64)
        && !(1..=30).contains(&t)
    {
        out.push(cause(
            "FieldValueInvalid",
            &format!("{at}.timeoutSeconds"),
            format!("Invalid value: {t}: the timeout value must be between 1 and 30 seconds"),
        ));
    }
}

fn check_client_config(w: &Value, at: &str, out: &mut Vec<Cause>) {
    let at = format!("{at}.clientConfig");
    let cc = w.get("clientConfig");
    let url = cc.and_then(|c| c.get("url")).and_then(Value::as_str);
    let service = cc.and_then(|c| c.get("service")).filter(|s| !s.is_null());
    match (url, service) {
        (Some(_), Some(_)) | (None, None) => out.push(cause(
            "FieldValueRequired",
            &at,
            "Required value: exactly one of url or service is required",
        )),
        (Some(u), None) => check_url(&format!("{at}.url"), u, out),
        (None, Some(s)) => check_service(&format!("{at}.service"), s, out),
    }
}

fn check_url(field: &str, u: &str, out: &mut Vec<Cause>) {
    let why = match reqwest::Url::parse(u) {
        Err(e) => Some(format!("host must be specified: {e}")),
        Ok(url) if url.scheme() != "https" => Some("'https' is the only allowed URL scheme".into()),
        Ok(url) if !url.username().is_empty() || url.password().is_some() => {
            Some("user information is not permitted in the URL".into())
        }
        Ok(url) if url.fragment().is_some() => {
            Some("fragments are not permitted in the URL".into())
        }
        Ok(url) if url.query().is_some() => {
            Some("query parameters are not permitted in the URL".into())
        }
        Ok(_) => None,
    };
    if let Some(why) = why {
        out.push(cause(
            "FieldValueInvalid",
            field,
            format!("Invalid value: {u:?}: {why}"),
        ));
    }
}

fn check_service(at: &str, s: &Value, out: &mut Vec<Cause>) {
    for key in ["name", "namespace"] {
        if s.get(key).and_then(Value::as_str).is_none_or(str::is_empty) {
            out.push(cause(
                "FieldValueRequired",
                &format!("{at}.{key}"),
                "Required value: service name and namespace are required",
            ));
        }
    }
    if let Some(p) = s.get("port").and_then(Value::as_i64)
        && !(1..=65535).contains(&p)
    {
        out.push(cause(
            "FieldValueInvalid",
            &format!("{at}.port"),
            format!(
                "Invalid value: {p}: port is not valid: must be between 1 and 65535, inclusive"
            ),
        ));
    }
    if let Some(path) = s.get("path").and_then(Value::as_str)
        && !path.starts_with('/')
    {
        out.push(cause(
            "FieldValueInvalid",
            &format!("{at}.path"),
            format!("Invalid value: {path:?}: must start with a '/'"),
        ));
    }
}

fn check_rules(w: &Value, at: &str, out: &mut Vec<Cause>) {
    let rules = w.get("rules").and_then(Value::as_array);
    for (j, r) in rules.into_iter().flatten().enumerate() {
        let at = format!("{at}.rules[{j}]");
        for key in ["operations", "apiGroups", "apiVersions", "resources"] {
            if r.get(key)
                .and_then(Value::as_array)
                .is_none_or(|a| a.is_empty())
            {
                out.push(cause(
                    "FieldValueRequired",
                    &format!("{at}.{key}"),
                    "Required value",
                ));
            }
        }
        let ops = r.get("operations").and_then(Value::as_array);
        for (k, op) in ops.into_iter().flatten().enumerate() {
            let op = op.as_str().unwrap_or_default();
            let allowed = ["*", "CREATE", "UPDATE", "DELETE", "CONNECT"];
            if !allowed.contains(&op) {
                out.push(unsupported(&format!("{at}.operations[{k}]"), op, &allowed));
            }
        }
        check_enum(r, &at, "scope", &["*", "Cluster", "Namespaced"], out);
    }
}
