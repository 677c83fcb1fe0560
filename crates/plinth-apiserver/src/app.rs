//! Shared server state and what every handler needs: [`App`], the request context
//! (query, rendering, content type, field manager), the metadata accessors of a JSON
//! object, object names, storage keys, rendering of responses and list/watch filters.
//! Handler modules (`verbs`, `discovery`, `watch`, `logs`, ...) depend on this module;
//! it depends on none of them.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::response::{IntoResponse, Response};
use http::{HeaderMap, StatusCode, header};
use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::registry::{Registry, rkey};
use crate::resource::{Cause, ResourceInfo};
use crate::selector;
use crate::ssa::Owner;
use crate::store::{Hub, ObjKey, Store};

/// Shared server state behind every handler.
pub struct App {
    /// Storage.
    pub store: Store,
    /// Watch fan-out.
    pub hub: Arc<Hub>,
    /// Served resources.
    pub registry: Registry,
    /// Data directory (pod logs live under `pod-logs/`).
    pub data_dir: PathBuf,
    /// Interval between BOOKMARK events on watches that ask for them.
    pub bookmark_interval: Duration,
    /// Poll interval for `log?follow=true`.
    pub log_poll_interval: Duration,
    /// Maximum request body size in bytes.
    pub max_body_bytes: usize,
    /// Token issuing and checking.
    pub tokens: crate::tokens::Tokens,
    /// Address served over HTTPS (for discovery's serverAddressByClientCIDRs).
    pub https_addr: std::sync::OnceLock<std::net::SocketAddr>,
    /// The CA certificate (PEM) of the HTTPS listener, published in every namespace as
    /// ConfigMap `kube-root-ca.crt` (key `ca.crt`), as Kubernetes does.
    pub ca_pem: Option<String>,
    /// Whether `/readyz` answers 200 (see `ServerConfig::ready_on_start`).
    pub ready: std::sync::atomic::AtomicBool,
    /// The registered admission webhooks and their pooled clients (`webhook`).
    pub(crate) webhooks: Arc<crate::webhook::config::Webhooks>,
    /// Whether Kratix kinds are admitted in-process (`crate::admission`); see
    /// `ServerConfig::builtin_admission`.
    pub builtin_admission: bool,
    /// kube-apiserver's `--authorization-mode=RBAC,AlwaysAllow`: what RBAC does not allow
    /// is allowed, and so is granting it (see `ServerConfig::always_allow`).
    pub always_allow: bool,
}

pub(crate) type AppRef = Arc<App>;

/// Namespaces that can never be deleted (Kubernetes protects the same ones).
pub const PROTECTED_NAMESPACES: [&str; 3] = ["default", "kube-system", "kube-public"];

// ---------------------------------------------------------------- small helpers

pub(crate) fn meta(v: &Value) -> &Map<String, Value> {
    static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    v.get("metadata")
        .and_then(|m| m.as_object())
        .unwrap_or_else(|| EMPTY.get_or_init(Map::new))
}

pub(crate) fn meta_mut(v: &mut Value) -> &mut Map<String, Value> {
    if !v.get("metadata").is_some_and(|m| m.is_object()) {
        v["metadata"] = json!({});
    }
    v["metadata"].as_object_mut().unwrap()
}

pub(crate) fn meta_str<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    meta(v)
        .get(k)
        .and_then(|x| x.as_str())
        .filter(|s| !s.is_empty())
}

pub(crate) fn rv_of(v: &Value) -> u64 {
    meta_str(v, "resourceVersion")
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

pub(crate) fn finalizers(v: &Value) -> Vec<String> {
    meta(v)
        .get("finalizers")
        .and_then(|f| f.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) fn set_finalizers(v: &mut Value, f: Vec<String>) {
    let m = meta_mut(v);
    if f.is_empty() {
        m.remove("finalizers");
    } else {
        m.insert("finalizers".into(), json!(f));
    }
}

pub(crate) fn json_response(code: StatusCode, v: &Value) -> Response {
    let body = serde_json::to_vec(v).unwrap_or_default();
    (code, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// DNS-1123 subdomain (most object names): lower-case alphanumerics, '-', '.', ≤ 253.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253 && !s.is_empty() && s.split('.').all(is_label_chars)
}

/// DNS-1123 label (namespace names): lower-case alphanumerics and '-', ≤ 63.
pub fn is_dns1123_label(s: &str) -> bool {
    s.len() <= 63 && is_label_chars(s)
}

fn is_label_chars(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// The name rule for a resource, with its Kubernetes error text.
pub(crate) fn name_error(info: &ResourceInfo, name: &str) -> Option<String> {
    if info.group == crate::rbac::GROUP {
        // RBAC names are path segments (e.g. `system:controller:x`).
        if name == "." || name == ".." || name.contains('/') || name.contains('%') {
            return Some(format!(
                "Invalid value: {name:?}: may not be '.' or '..' and may not contain '/' or '%'"
            ));
        }
        return None;
    }
    // A name of valid characters that is too long is refused for its length, as
    // kube-apiserver's first message says.
    let max = if info.group.is_empty() && info.plural == "namespaces" {
        63
    } else {
        253
    };
    if name.len() > max {
        return Some(format!(
            "Invalid value: {name:?}: must be no more than {max} characters"
        ));
    }
    if info.group.is_empty() && info.plural == "namespaces" {
        if !is_dns1123_label(name) {
            return Some(format!(
                "Invalid value: {name:?}: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
            ));
        }
        return None;
    }
    if !is_dns1123_subdomain(name) {
        return Some(format!(
            "Invalid value: {name:?}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        ));
    }
    None
}

pub(crate) fn cause(reason: &str, field: &str, message: impl Into<String>) -> Cause {
    Cause {
        reason: reason.into(),
        message: message.into(),
        field: field.into(),
    }
}

/// Query parameters as a map (last value wins).
pub(crate) type Query = HashMap<String, String>;

pub(crate) fn query_of(uri: &http::Uri) -> Query {
    axum::extract::Query::<Vec<(String, String)>>::try_from_uri(uri)
        .map(|q| q.0.into_iter().collect())
        .unwrap_or_default()
}

/// An integer query parameter (`limit`, `timeoutSeconds`, `gracePeriodSeconds`,
/// `tailLines`, `limitBytes`, `sinceSeconds`; all `int64` in Kubernetes): absent or empty
/// is `None`; a value that is not a 64-bit integer is a 400 naming the parameter and the
/// value, as kube-apiserver refuses a query it cannot convert, never a silent default.
pub(crate) fn query_int(q: &Query, name: &str) -> Result<Option<i64>, ApiError> {
    match q.get(name).map(String::as_str) {
        None | Some("") => Ok(None),
        Some(v) => v.parse::<i64>().map(Some).map_err(|_| {
            ApiError::bad_request(format!(
                "invalid value {v:?} for query parameter {name}: must be a 64-bit integer"
            ))
        }),
    }
}

/// [`query_int`] for a parameter that must be at least `min` (400 naming the parameter,
/// the value and the bound otherwise).
pub(crate) fn query_int_min(q: &Query, name: &str, min: i64) -> Result<Option<i64>, ApiError> {
    match query_int(q, name)? {
        Some(v) if v < min => Err(ApiError::bad_request(format!(
            "invalid value {v} for query parameter {name}: must be greater than or equal to {min}"
        ))),
        other => Ok(other),
    }
}

/// A boolean query parameter (`watch`, `force`), read as Go's `strconv.ParseBool` as
/// kube-apiserver does: absent or empty is false; `1 t T TRUE true True` and
/// `0 f F FALSE false False`; anything else is a 400 naming the parameter and the value
/// (a `watch=maybe` is not quietly a list).
pub(crate) fn truthy(q: &Query, k: &str) -> Result<bool, ApiError> {
    match q.get(k).map(String::as_str) {
        None | Some("") => Ok(false),
        Some("1" | "t" | "T" | "TRUE" | "true" | "True") => Ok(true),
        Some("0" | "f" | "F" | "FALSE" | "false" | "False") => Ok(false),
        Some(v) => Err(ApiError::bad_request(format!(
            "invalid value {v:?} for query parameter {k}: must be a boolean (true or false)"
        ))),
    }
}

pub(crate) fn dry_run(q: &Query) -> bool {
    q.get("dryRun").is_some_and(|v| v == "All")
}

/// What a resource request carries besides its target and body: the query, the
/// rendering the client asked for, the body's content type (`application/json` when
/// absent) and the field manager its writes are recorded under.
pub(crate) struct RequestContext {
    pub q: Query,
    pub render: Render,
    pub content_type: String,
    pub owner: Owner,
}

impl RequestContext {
    /// Reads the context from a request's URI and headers.
    pub(crate) fn of(uri: &http::Uri, headers: &HeaderMap) -> RequestContext {
        let q = query_of(uri);
        let render = render_of(headers, &q);
        let header_str = |h| {
            headers
                .get(h)
                .and_then(|v: &http::HeaderValue| v.to_str().ok())
        };
        let content_type = header_str(header::CONTENT_TYPE)
            .unwrap_or("application/json")
            .to_string();
        let owner = Owner::Update(crate::ssa::default_manager(
            q.get("fieldManager").map(|s| s.as_str()),
            header_str(header::USER_AGENT),
        ));
        RequestContext {
            q,
            render,
            content_type,
            owner,
        }
    }

    /// `dryRun=All`.
    pub(crate) fn dry_run(&self) -> bool {
        dry_run(&self.q)
    }
}

/// How the client wants objects rendered (`Accept` header).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Render {
    Plain,
    Table { include_object: String },
    Metadata,
}

pub(crate) fn render_of(headers: &HeaderMap, q: &Query) -> Render {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    // The first acceptable media type wins, as with content negotiation.
    for part in accept.split(',') {
        let p = part.replace(' ', "");
        if p.contains("as=Table") {
            return Render::Table {
                include_object: q
                    .get("includeObject")
                    .cloned()
                    .unwrap_or_else(|| "Metadata".into()),
            };
        }
        if p.contains("as=PartialObjectMetadata") {
            return Render::Metadata;
        }
        if p.starts_with("application/json") || p.starts_with("*/*") || p.is_empty() {
            return Render::Plain;
        }
    }
    Render::Plain
}

/// Rewrites a stored object to the requested version of its resource.
pub(crate) fn present(info: &ResourceInfo, mut obj: Value) -> Value {
    if info.builtin && info.plural == "events" {
        let from = obj.get("apiVersion").and_then(|a| a.as_str()).unwrap_or("");
        if info.group == "events.k8s.io" && from == "v1" {
            rename_fields(&mut obj, EVENT_FIELDS, false);
        } else if info.group.is_empty() && from == "events.k8s.io/v1" {
            rename_fields(&mut obj, EVENT_FIELDS, true);
        }
    }
    if crate::hpa::is_hpa(info) {
        crate::hpa::convert(info, &mut obj);
    }
    if let Some(m) = obj.as_object_mut() {
        m.insert("apiVersion".into(), json!(info.api_version()));
        m.insert("kind".into(), json!(info.kind));
    }
    obj
}

/// core/v1 Event field ↔ events.k8s.io/v1 Event field (the Kubernetes conversion);
/// both versions are one stored resource, as on Kubernetes.
const EVENT_FIELDS: &[(&str, &str)] = &[
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("reportingComponent", "reportingController"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
];

fn rename_fields(obj: &mut Value, pairs: &[(&str, &str)], to_core: bool) {
    if let Some(m) = obj.as_object_mut() {
        for (core, new) in pairs {
            let (from, to) = if to_core { (new, core) } else { (core, new) };
            if let Some(v) = m.remove(*from) {
                m.insert((*to).to_string(), v);
            }
        }
    }
}

/// Whether a response is pretty-printed, as kube-apiserver decides: `pretty=<bool>` in
/// the query, else a user agent of curl, Wget or a browser.
pub(crate) fn pretty_requested(headers: &http::HeaderMap, query: Option<&str>) -> bool {
    if let Some(v) = query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .find_map(|kv| kv.strip_prefix("pretty=").filter(|v| !v.is_empty()))
    {
        return matches!(v, "1" | "t" | "T" | "true" | "TRUE" | "True");
    }
    let ua = headers
        .get(http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    ua.starts_with("curl") || ua.starts_with("Wget") || ua.starts_with("Mozilla/5.0")
}

pub(crate) fn is_events_v1(info: &ResourceInfo) -> bool {
    info.builtin && info.group == "events.k8s.io" && info.plural == "events"
}

/// Storage key of a resource; events.k8s.io/v1 Events share core/v1 Events' storage.
pub(crate) fn storage_rkey(info: &ResourceInfo) -> String {
    if is_events_v1(info) {
        rkey("", "events")
    } else {
        rkey(&info.group, &info.plural)
    }
}

pub(crate) fn partial_metadata(obj: &Value) -> Value {
    json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": obj.get("metadata").cloned().unwrap_or(json!({}))})
}

// ---------------------------------------------------------------- routing
pub(crate) fn not_found_path() -> ApiError {
    ApiError {
        code: 404,
        reason: "NotFound",
        message: "the server could not find the requested resource".into(),
        details: Some(json!({})),
    }
}
pub(crate) fn respond_objects(
    info: &ResourceInfo,
    render: &Render,
    objs: Vec<Value>,
    list_meta: Option<Value>,
    code: StatusCode,
) -> Response {
    let single = list_meta.is_none();
    let objs: Vec<Value> = objs.into_iter().map(|o| present(info, o)).collect();
    match render {
        Render::Table { include_object } => {
            let lm = list_meta.unwrap_or_else(|| json!({}));
            let t = crate::table::render(info, &objs, lm, include_object);
            json_response(code, &t)
        }
        Render::Metadata if single => json_response(code, &partial_metadata(&objs[0])),
        Render::Metadata => {
            let items: Vec<Value> = objs.iter().map(partial_metadata).collect();
            json_response(
                code,
                &json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList", "metadata": list_meta.unwrap_or(json!({})), "items": items}),
            )
        }
        Render::Plain if single => {
            json_response(code, &objs.into_iter().next().unwrap_or(Value::Null))
        }
        Render::Plain => json_response(
            code,
            &json!({"apiVersion": info.api_version(), "kind": info.list_kind, "metadata": list_meta.unwrap_or(json!({})), "items": objs}),
        ),
    }
}

// ---------------------------------------------------------------- storage keys and reads

pub(crate) fn key_for(info: &ResourceInfo, ns: Option<&str>, name: &str) -> ObjKey {
    ObjKey {
        rkey: storage_rkey(info),
        ns: if info.namespaced {
            ns.unwrap_or_default().to_string()
        } else {
            String::new()
        },
        name: name.to_string(),
    }
}

/// Reads one object or answers 404.
pub(crate) async fn get_object(
    app: &App,
    info: &ResourceInfo,
    ns: Option<&str>,
    name: &str,
) -> Result<Value, ApiError> {
    app.store
        .get(key_for(info, ns, name))
        .await?
        .ok_or_else(|| ApiError::not_found(&info.group, &info.plural, name))
}

/// Parsed list/watch filters.
pub(crate) struct Filter {
    pub label: Option<kube::core::Selector>,
    pub field: Vec<selector::FieldReq>,
}

impl Filter {
    /// Like `parse`, with events.k8s.io/v1 field paths mapped to the stored core/v1 form.
    ///
    /// A field the resource does not index is refused (400 `field label not supported`)
    /// as kube-apiserver does: matching it as an empty value would make a typo select
    /// everything, and a `delete --field-selector` with one delete the whole collection.
    pub(crate) fn for_resource(info: &ResourceInfo, q: &Query) -> Result<Filter, ApiError> {
        let mut f = Filter::parse(q)?;
        if is_events_v1(info) {
            for r in f.field.iter_mut() {
                for (core, new) in EVENT_FIELDS {
                    if r.path == *new {
                        r.path = core.to_string();
                    } else if let Some(rest) = r.path.strip_prefix(&format!("{new}.")) {
                        r.path = format!("{core}.{rest}");
                    }
                }
            }
        }
        if let Some(r) = f
            .field
            .iter()
            .find(|r| !selector::field_supported(&info.group, &info.plural, &r.path))
        {
            return Err(ApiError::bad_request(format!(
                "field label not supported: {}",
                r.path
            )));
        }
        Ok(f)
    }

    pub(crate) fn parse(q: &Query) -> Result<Filter, ApiError> {
        let label = match q.get("labelSelector").filter(|s| !s.is_empty()) {
            Some(s) => Some(
                selector::parse_label_selector(s)
                    .map_err(|e| ApiError::bad_request(e.to_string()))?,
            ),
            None => None,
        };
        let field = match q.get("fieldSelector").filter(|s| !s.is_empty()) {
            Some(s) => selector::parse_field_selector(s)
                .map_err(|e| ApiError::bad_request(e.to_string()))?,
            None => Vec::new(),
        };
        Ok(Filter { label, field })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.label.as_ref().is_none_or(|l| l.selects_all()) && self.field.is_empty()
    }

    pub(crate) fn matches(&self, obj: &Value) -> bool {
        self.label
            .as_ref()
            .is_none_or(|l| selector::labels_match(l, obj))
            && selector::fields_match(&self.field, obj)
    }
}
pub(crate) fn is_crd(info: &ResourceInfo) -> bool {
    info.group == "apiextensions.k8s.io" && info.plural == "customresourcedefinitions"
}

pub(crate) fn storage_info(app: &App, info: &ResourceInfo) -> Arc<ResourceInfo> {
    if is_events_v1(info)
        && let Some(core) = app.registry.lookup("", "v1", "events")
    {
        return core;
    }
    app.registry
        .storage_of(&info.group, &info.plural)
        .unwrap_or_else(|| Arc::new(info.clone()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(is_dns1123_subdomain("a.b-c"));
        assert!(!is_dns1123_subdomain("Upper"));
        assert!(!is_dns1123_subdomain("-a"));
        assert!(!is_dns1123_label("a.b"));
        assert!(is_dns1123_label("kube-system"));
    }
}
