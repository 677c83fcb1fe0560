//! The HTTP surface: discovery, the resource verbs (get, list, watch, create, update,
//! patch, delete, deletecollection), subresources (`status`, `log`, `token`) and the
//! object lifecycle rules of the Kubernetes API conventions (generation, finalizers,
//! deletionTimestamp, status subresource, optimistic concurrency).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, Method, StatusCode, header};
use serde_json::{Map, Value, json};

use crate::error::{ApiError, group_resource};
use crate::registry::{Registry, rkey};
use crate::resource::{Cause, ResourceInfo};
use crate::selector;
use crate::ssa::Owner;
use crate::store::{Hub, ObjKey, Store, StoreError, WriteOp, WriteOutcome};

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
    pub tokens: crate::auth::Tokens,
    /// Address served over HTTPS (for discovery's serverAddressByClientCIDRs).
    pub https_addr: std::sync::OnceLock<std::net::SocketAddr>,
    /// The CA certificate (PEM) of the HTTPS listener, published in every namespace as
    /// ConfigMap `kube-root-ca.crt` (key `ca.crt`), as Kubernetes does.
    pub ca_pem: Option<String>,
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

/// RFC 3339 timestamp with second precision (metav1.Time).
pub(crate) fn now() -> String {
    jiff::Timestamp::now()
        .round(jiff::Unit::Second)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| jiff::Timestamp::now().to_string())
}

fn json_response(code: StatusCode, v: &Value) -> Response {
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
fn name_error(info: &ResourceInfo, name: &str) -> Option<String> {
    if info.group == "rbac.authorization.k8s.io" {
        // RBAC names are path segments (e.g. `system:controller:x`).
        if name == "." || name == ".." || name.contains('/') || name.contains('%') {
            return Some(format!(
                "Invalid value: {name:?}: may not be '.' or '..' and may not contain '/' or '%'"
            ));
        }
        return None;
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

fn cause(reason: &str, field: &str, message: impl Into<String>) -> Cause {
    Cause {
        reason: reason.into(),
        message: message.into(),
        field: field.into(),
    }
}

/// Query parameters as a map (last value wins).
pub(crate) type Query = HashMap<String, String>;

fn query_of(uri: &http::Uri) -> Query {
    axum::extract::Query::<Vec<(String, String)>>::try_from_uri(uri)
        .map(|q| q.0.into_iter().collect())
        .unwrap_or_default()
}

fn truthy(q: &Query, k: &str) -> bool {
    q.get(k).is_some_and(|v| v == "true" || v == "1")
}

fn dry_run(q: &Query) -> bool {
    q.get("dryRun").is_some_and(|v| v == "All")
}

/// How the client wants objects rendered (`Accept` header).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Render {
    Plain,
    Table { include_object: String },
    Metadata,
}

fn render_of(headers: &HeaderMap, q: &Query) -> Render {
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

fn is_events_v1(info: &ResourceInfo) -> bool {
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

fn partial_metadata(obj: &Value) -> Value {
    json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": obj.get("metadata").cloned().unwrap_or(json!({}))})
}

// ---------------------------------------------------------------- routing

/// The main handler: everything under `/api` and `/apis` that is not discovery.
pub(crate) async fn handle(State(app): State<AppRef>, req: Request) -> Response {
    match dispatch(app, req).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

struct Target {
    info: Arc<ResourceInfo>,
    ns: Option<String>,
    name: Option<String>,
    sub: Option<String>,
}

fn not_found_path() -> ApiError {
    ApiError {
        code: 404,
        reason: "NotFound",
        message: "the server could not find the requested resource".into(),
        details: Some(json!({})),
    }
}

fn parse_target(reg: &Registry, path: &str) -> Result<Target, ApiError> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Err(not_found_path()),
    };
    let (ns, rest): (Option<String>, &[&str]) = match rest {
        ["namespaces", ns, plural, tail @ ..]
            if !(group.is_empty()
                && tail.is_empty()
                && (*plural == "status" || *plural == "finalize")) =>
        {
            (Some(ns.to_string()), &rest[2..])
        }
        _ => (None, rest),
    };
    let (plural, name, sub) = match rest {
        [p] => (*p, None, None),
        [p, n] => (*p, Some(n.to_string()), None),
        [p, n, s] => (*p, Some(n.to_string()), Some(s.to_string())),
        _ => return Err(not_found_path()),
    };
    let info = reg
        .lookup(group, version, plural)
        .ok_or_else(not_found_path)?;
    if ns.is_some() && !info.namespaced {
        return Err(not_found_path());
    }
    if ns.is_none() && info.namespaced && name.is_some() {
        return Err(not_found_path());
    }
    Ok(Target {
        info,
        ns,
        name,
        sub,
    })
}

async fn dispatch(app: AppRef, req: Request) -> Result<Response, ApiError> {
    let (parts, body) = req.into_parts();
    let q = query_of(&parts.uri);
    let t = parse_target(&app.registry, parts.uri.path())?;
    let render = render_of(&parts.headers, &q);
    let info = t.info.clone();
    let ns = t.ns.clone();
    let sub = t.sub.as_deref();
    if let Some(s) = sub {
        let ok = match s {
            "status" => info.status_subresource,
            "log" => info.group.is_empty() && info.plural == "pods",
            "token" => info.group.is_empty() && info.plural == "serviceaccounts",
            _ => false,
        };
        if !ok {
            return Err(not_found_path());
        }
    }
    let read_body = |body: Body| async {
        axum::body::to_bytes(body, app.max_body_bytes)
            .await
            .map_err(|_| {
                ApiError::new(
                    413,
                    "RequestEntityTooLarge",
                    format!(
                        "Request entity too large: limit is {} bytes",
                        app.max_body_bytes
                    ),
                )
            })
    };
    let content_type = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_string();
    let user_agent = parts
        .headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok());
    let owner = Owner::Update(crate::ssa::default_manager(
        q.get("fieldManager").map(|s| s.as_str()),
        user_agent,
    ));
    match (parts.method.clone(), t.name.clone()) {
        (Method::GET, Some(name)) => {
            if sub == Some("log") {
                return crate::logs::serve(&app, ns.unwrap_or_default(), name, &q).await;
            }
            let obj = get_object(&app, &info, ns.as_deref(), &name).await?;
            Ok(respond_objects(
                &info,
                &render,
                vec![obj],
                None,
                StatusCode::OK,
            ))
        }
        (Method::GET, None) => {
            if truthy(&q, "watch") {
                return crate::watch::watch(app.clone(), info, ns, &q, render).await;
            }
            list(&app, &info, ns, &q, &render).await
        }
        (Method::POST, None) => {
            let bytes = read_body(body).await?;
            let obj = decode_body(&content_type, &bytes)?;
            let warnings = field_validation(&info, &q, &obj)?;
            let created = create(&app, &info, ns.as_deref(), obj, dry_run(&q), &owner).await?;
            Ok(with_warnings(
                respond_objects(&info, &render, vec![created], None, StatusCode::CREATED),
                &warnings,
            ))
        }
        (Method::POST, Some(name)) if sub == Some("token") => {
            let bytes = read_body(body).await?;
            let obj = decode_body(&content_type, &bytes)?;
            let tr = crate::auth::token_request(&app, ns.unwrap_or_default(), name, obj).await?;
            Ok(json_response(StatusCode::CREATED, &tr))
        }
        (Method::PUT, Some(name)) => {
            let bytes = read_body(body).await?;
            let obj = decode_body(&content_type, &bytes)?;
            let warnings = field_validation(&info, &q, &obj)?;
            let status_only = sub == Some("status");
            let updated = update(
                &app,
                &info,
                ns.as_deref(),
                &name,
                obj,
                status_only,
                dry_run(&q),
                &owner,
            )
            .await?;
            Ok(with_warnings(
                respond_objects(&info, &render, vec![updated], None, StatusCode::OK),
                &warnings,
            ))
        }
        (Method::PATCH, Some(name)) if is_apply(&content_type) => {
            let bytes = read_body(body).await?;
            let status_only = sub == Some("status");
            let (obj, created) =
                apply_request(&app, &info, ns.as_deref(), &name, &bytes, status_only, &q).await?;
            let code = if created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            Ok(respond_objects(&info, &render, vec![obj], None, code))
        }
        (Method::PATCH, Some(name)) => {
            let bytes = read_body(body).await?;
            let status_only = sub == Some("status");
            let patched = patch(
                &app,
                &info,
                ns.as_deref(),
                &name,
                &content_type,
                &bytes,
                status_only,
                &q,
                &owner,
            )
            .await?;
            Ok(respond_objects(
                &info,
                &render,
                vec![patched],
                None,
                StatusCode::OK,
            ))
        }
        (Method::DELETE, Some(name)) => {
            let bytes = read_body(body).await?;
            let opts = DeleteOptions::parse(&bytes, &q)?;
            let out = delete(&app, &info, ns.as_deref(), &name, &opts).await?;
            Ok(respond_objects(
                &info,
                &render,
                vec![out],
                None,
                StatusCode::OK,
            ))
        }
        (Method::DELETE, None) => {
            let bytes = read_body(body).await?;
            let opts = DeleteOptions::parse(&bytes, &q)?;
            delete_collection(&app, &info, ns, &q, &opts).await
        }
        _ => Err(ApiError::new(
            405,
            "MethodNotAllowed",
            format!(
                "the server does not allow this method on the requested resource ({})",
                parts.method
            ),
        )),
    }
}

fn respond_objects(
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

/// Decodes a JSON or YAML request body into an object.
pub(crate) fn decode_body(content_type: &str, bytes: &[u8]) -> Result<Value, ApiError> {
    let ct = content_type.split(';').next().unwrap_or("").trim();
    let v: Value = if ct.ends_with("yaml") {
        let s = std::str::from_utf8(bytes)
            .map_err(|e| ApiError::bad_request(format!("request body is not UTF-8: {e}")))?;
        serde_saphyr::from_str(s)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML request body: {e}")))?
    } else if ct == "application/vnd.kubernetes.protobuf" {
        crate::protobuf::decode(bytes).map_err(|e| {
            if e.contains("not supported") {
                ApiError::new(415, "UnsupportedMediaType", e)
            } else {
                ApiError::bad_request(format!("error decoding protobuf request body: {e}"))
            }
        })?
    } else if ct.is_empty() || ct.ends_with("json") || ct == "*/*" {
        serde_json::from_slice(bytes)
            .map_err(|e| ApiError::bad_request(format!("error decoding JSON request body: {e}")))?
    } else {
        return Err(ApiError::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format ({ct}); accepted media types include: application/json, application/yaml"
            ),
        ));
    };
    if !v.is_object() {
        return Err(ApiError::bad_request(
            "the request body must be a JSON or YAML object",
        ));
    }
    Ok(v)
}

/// `fieldValidation=Strict|Warn|Ignore` (Kubernetes server-side field validation):
/// Strict answers 400 for fields the schema does not know; Warn returns them as
/// `Warning` headers; Ignore (and no parameter) prunes silently.
fn field_validation(info: &ResourceInfo, q: &Query, obj: &Value) -> Result<Vec<String>, ApiError> {
    let mode = q
        .get("fieldValidation")
        .map(String::as_str)
        .unwrap_or("Ignore");
    if mode != "Strict" && mode != "Warn" {
        return Ok(Vec::new());
    }
    let unknown = crate::schema::unknown_fields(info, obj);
    if unknown.is_empty() {
        return Ok(Vec::new());
    }
    if mode == "Strict" {
        return Err(ApiError::bad_request(crate::schema::strict_decoding_error(
            &unknown,
        )));
    }
    Ok(unknown
        .iter()
        .map(|p| format!("299 - \"unknown field \\\"{p}\\\"\""))
        .collect())
}

fn with_warnings(mut r: Response, warnings: &[String]) -> Response {
    for w in warnings {
        if let Ok(v) = http::HeaderValue::from_str(w) {
            r.headers_mut().append("warning", v);
        }
    }
    r
}

// ---------------------------------------------------------------- get / list

fn key_for(info: &ResourceInfo, ns: Option<&str>, name: &str) -> ObjKey {
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
        Ok(f)
    }

    pub(crate) fn parse(q: &Query) -> Result<Filter, ApiError> {
        let label = match q.get("labelSelector").filter(|s| !s.is_empty()) {
            Some(s) => Some(selector::parse_label_selector(s).map_err(ApiError::bad_request)?),
            None => None,
        };
        let field = match q.get("fieldSelector").filter(|s| !s.is_empty()) {
            Some(s) => selector::parse_field_selector(s).map_err(ApiError::bad_request)?,
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

async fn list(
    app: &App,
    info: &ResourceInfo,
    ns: Option<String>,
    q: &Query,
    render: &Render,
) -> Result<Response, ApiError> {
    let filter = Filter::for_resource(info, q)?;
    let limit: usize = q.get("limit").and_then(|l| l.parse().ok()).unwrap_or(0);
    let (after, token_rv) = match q.get("continue").filter(|s| !s.is_empty()) {
        Some(c) => {
            let (rv, ns, name) = decode_continue(c)?;
            (Some((ns, name)), Some(rv))
        }
        None => (None, None),
    };
    // Label-only selectors need just the metadata; field selectors need the object.
    let filter_fn: Box<dyn Fn(&str) -> bool + Send> = if filter.is_empty() {
        Box::new(|_| true)
    } else if filter.field.is_empty() {
        let needles = selector::required_label_needles(
            q.get("labelSelector").map(String::as_str).unwrap_or(""),
        );
        Box::new(move |s: &str| {
            needles.iter().all(|n| s.contains(n.as_str()))
                && serde_json::from_str::<MetaOnly>(s).is_ok_and(|m| {
                    filter.matches(&json!({"metadata": {"labels": m.metadata.labels}}))
                })
        })
    } else {
        Box::new(move |s: &str| serde_json::from_str::<Value>(s).is_ok_and(|v| filter.matches(&v)))
    };
    let res = match crate::snapshot::list_objects(
        &app.store,
        q.get("resourceVersion").map(String::as_str),
        q.get("resourceVersionMatch").map(String::as_str),
        token_rv,
        storage_rkey(info),
        ns,
        after,
        limit,
        filter_fn,
        |ns, name| encode_continue(0, ns, name),
    )
    .await?
    {
        crate::snapshot::Listed::Items(res) => res,
        crate::snapshot::Listed::Expired(response) => return Ok(response),
    };
    let rv = res.rv;
    let mut lm = json!({"resourceVersion": rv.to_string()});
    if let Some((ns, name)) = res.more_after {
        lm["continue"] = json!(encode_continue(rv, &ns, &name));
    }
    // Fast path: stored objects already carry this version's apiVersion; splice the
    // stored JSON into the list without parsing it.
    let storage = storage_info(app, info);
    let needle = format!("\"apiVersion\":\"{}\"", info.api_version());
    if *render == Render::Plain
        && storage.api_version() == info.api_version()
        && storage.kind == info.kind
        && res.items.iter().all(|s| s.contains(&needle))
    {
        let head = serde_json::to_string(
            &json!({"apiVersion": info.api_version(), "kind": info.list_kind, "metadata": lm}),
        )
        .unwrap_or_default();
        let total: usize = res.items.iter().map(|s| s.len() + 1).sum();
        let mut body = String::with_capacity(head.len() + total + 16);
        body.push_str(&head[..head.len() - 1]);
        body.push_str(",\"items\":[");
        for (i, item) in res.items.iter().enumerate() {
            if i > 0 {
                body.push(',');
            }
            body.push_str(item);
        }
        body.push_str("]}");
        return Ok((
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response());
    }
    let items = res
        .items
        .iter()
        .map(|s| serde_json::from_str::<Value>(s))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ApiError::internal(format!("corrupt stored object: {e}")))?;
    Ok(respond_objects(
        info,
        render,
        items,
        Some(lm),
        StatusCode::OK,
    ))
}

#[derive(serde::Deserialize)]
struct MetaOnly {
    #[serde(default)]
    metadata: MetaLabels,
}

#[derive(serde::Deserialize, Default)]
struct MetaLabels {
    #[serde(default)]
    labels: Option<serde_json::Map<String, Value>>,
}

fn encode_continue(rv: u64, ns: &str, name: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(json!({"rv": rv, "ns": ns, "name": name}).to_string())
}

fn decode_continue(c: &str) -> Result<(u64, String, String), ApiError> {
    use base64::Engine;
    let bad = || ApiError::bad_request(format!("invalid continue token {c:?}"));
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(c)
        .map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    Ok((
        v["rv"].as_u64().ok_or_else(bad)?,
        v["ns"].as_str().ok_or_else(bad)?.to_string(),
        v["name"].as_str().ok_or_else(bad)?.to_string(),
    ))
}

// ---------------------------------------------------------------- create

fn check_type(info: &ResourceInfo, obj: &mut Value) -> Result<(), ApiError> {
    let av = info.api_version();
    match obj.get("apiVersion").and_then(|v| v.as_str()) {
        Some(a) if a != av => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({a}) does not match the expected API version ({av})"
            )));
        }
        _ => {}
    }
    match obj.get("kind").and_then(|v| v.as_str()) {
        Some(k) if k != info.kind => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({}) for {}",
                info.kind,
                group_resource(info)
            )));
        }
        _ => {}
    }
    obj["apiVersion"] = json!(av);
    obj["kind"] = json!(info.kind);
    if obj
        .get("metadata")
        .is_some_and(|m| !m.is_object() && !m.is_null())
    {
        return Err(ApiError::bad_request("metadata must be an object"));
    }
    Ok(())
}

fn check_namespace_field(
    info: &ResourceInfo,
    ns: Option<&str>,
    obj: &mut Value,
) -> Result<(), ApiError> {
    if info.namespaced {
        let url_ns = ns.unwrap_or_default();
        if let Some(bns) = meta_str(obj, "namespace")
            && bns != url_ns
        {
            return Err(ApiError::bad_request(format!(
                "the namespace of the provided object ({bns}) does not match the namespace sent on the request ({url_ns})"
            )));
        }
        meta_mut(obj).insert("namespace".into(), json!(url_ns));
    } else {
        meta_mut(obj).remove("namespace");
    }
    Ok(())
}

fn random_suffix() -> String {
    use rand::Rng;
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// Drops empty metadata collections, as Kubernetes' `omitempty` serialization does.
fn normalize_metadata(obj: &mut Value) {
    if let Some(m) = obj.get_mut("metadata").and_then(|m| m.as_object_mut()) {
        for k in ["labels", "annotations", "finalizers", "ownerReferences"] {
            let empty = match m.get(k) {
                Some(Value::Null) => true,
                Some(Value::Array(a)) => a.is_empty(),
                Some(Value::Object(o)) => o.is_empty(),
                _ => false,
            };
            if empty {
                m.remove(k);
            }
        }
    }
}

/// Checks labels/annotations/finalizers shapes (metadata must be well typed).
fn check_metadata(info: &ResourceInfo, obj: &Value) -> Result<(), ApiError> {
    let name = meta_str(obj, "name").unwrap_or_default().to_string();
    let mut causes = Vec::new();
    for k in ["labels", "annotations"] {
        if let Some(v) = meta(obj).get(k)
            && !v.is_null()
        {
            match v.as_object() {
                Some(m) => {
                    for (lk, lv) in m {
                        if !lv.is_string() {
                            causes.push(cause(
                                "FieldValueTypeInvalid",
                                &format!("metadata.{k}.{lk}"),
                                "Invalid value: must be a string",
                            ));
                        }
                    }
                }
                None => causes.push(cause(
                    "FieldValueTypeInvalid",
                    &format!("metadata.{k}"),
                    "Invalid value: must be a map of strings",
                )),
            }
        }
    }
    if let Some(v) = meta(obj).get("finalizers")
        && !v.is_null()
        && !v
            .as_array()
            .is_some_and(|a| a.iter().all(|x| x.is_string()))
    {
        causes.push(cause(
            "FieldValueTypeInvalid",
            "metadata.finalizers",
            "Invalid value: must be a list of strings",
        ));
    }
    if causes.is_empty() {
        causes.extend(crate::validation::object_meta_causes(meta(obj)));
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(info, &name, causes))
    }
}

/// Creates an object (POST). Returns the stored object.
pub(crate) async fn create(
    app: &App,
    info: &ResourceInfo,
    ns: Option<&str>,
    mut obj: Value,
    dry_run: bool,
    owner: &Owner,
) -> Result<Value, ApiError> {
    check_type(info, &mut obj)?;
    let applied_fields = match owner {
        Owner::Apply => meta_mut(&mut obj).remove("managedFields"),
        _ => None,
    };
    check_namespace_field(info, ns, &mut obj)?;
    // Name or generateName.
    let name = match meta_str(&obj, "name") {
        Some(n) => n.to_string(),
        None => match meta_str(&obj, "generateName") {
            Some(g) => {
                let causes = crate::validation::generate_name_causes(g, &|candidate| {
                    let prefix = format!("Invalid value: {candidate:?}: ");
                    name_error(info, candidate)
                        .map(|m| m.strip_prefix(&prefix).unwrap_or(&m).to_string())
                        .into_iter()
                        .collect()
                });
                if !causes.is_empty() {
                    return Err(ApiError::invalid(info, "", causes));
                }
                let n = format!("{g}{}", random_suffix());
                meta_mut(&mut obj).insert("name".into(), json!(n));
                n
            }
            None => {
                return Err(ApiError::invalid(
                    info,
                    "",
                    vec![cause(
                        "FieldValueRequired",
                        "metadata.name",
                        "Required value: name or generateName is required",
                    )],
                ));
            }
        },
    };
    if let Some(msg) = name_error(info, &name) {
        return Err(ApiError::invalid(
            info,
            &name,
            vec![cause("FieldValueInvalid", "metadata.name", msg)],
        ));
    }
    normalize_metadata(&mut obj);
    check_metadata(info, &obj)?;
    if info.namespaced {
        let ns = ns.unwrap_or_default();
        let ns_obj = app
            .store
            .get(ObjKey {
                rkey: rkey("", "namespaces"),
                ns: String::new(),
                name: ns.to_string(),
            })
            .await?;
        match ns_obj {
            None => return Err(ApiError::not_found("", "namespaces", ns)),
            Some(n)
                if meta(&n)
                    .get("deletionTimestamp")
                    .is_some_and(|d| !d.is_null()) =>
            {
                return Err(ApiError {
                    code: 403,
                    reason: "Forbidden",
                    message: format!(
                        "{} \"{name}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                        group_resource(info)
                    ),
                    details: Some(
                        json!({"name": name, "group": info.group, "kind": info.plural, "causes": [{"reason": "NamespaceTerminating", "message": format!("namespace {ns} is being terminated"), "field": "metadata.namespace"}]}),
                    ),
                });
            }
            _ => {}
        }
    }
    {
        let m = meta_mut(&mut obj);
        m.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
        m.insert("creationTimestamp".into(), json!(now()));
        m.insert("generation".into(), json!(1));
        m.remove("resourceVersion");
        m.remove("deletionTimestamp");
        m.remove("deletionGracePeriodSeconds");
        m.remove("managedFields");
        m.remove("selfLink");
    }
    if info.status_subresource
        && !is_crd(info)
        && let Some(m) = obj.as_object_mut()
    {
        m.remove("status");
    }
    crate::kinds::prepare(app, info, &mut obj, None).await?;
    crate::schema::admit(info, &mut obj, None).map_err(|c| ApiError::invalid(info, &name, c))?;
    record_fields(info, None, &mut obj, owner, applied_fields);
    if dry_run {
        return Ok(obj);
    }
    let storage = storage_info(app, info);
    let stored_obj = present(&storage, obj);
    match app
        .store
        .write(WriteOp::Create {
            key: key_for(info, ns, &name),
            obj: stored_obj,
        })
        .await
    {
        Ok(WriteOutcome::Stored(v)) => {
            crate::kinds::after_write(app, info, &v).await?;
            if info.builtin && info.group.is_empty() && info.plural == "namespaces" {
                namespace_defaults(app, &name).await?;
            }
            Ok(v)
        }
        Ok(_) => Err(ApiError::internal("unexpected storage outcome")),
        Err(StoreError::AlreadyExists) => Err(ApiError::already_exists(info, &name)),
        Err(e) => Err(e.into()),
    }
}

/// What every namespace gets (Kubernetes' service-account controller and root-CA
/// publisher): a `default` ServiceAccount, so Pods without `serviceAccountName` can get
/// a token, and, when serving HTTPS, the ConfigMap `kube-root-ca.crt` holding the CA
/// (`ca.crt`) for in-cluster clients. Existing objects are left alone.
pub(crate) async fn namespace_defaults(app: &App, ns: &str) -> Result<(), ApiError> {
    let mut wanted = vec![(
        "serviceaccounts",
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}),
    )];
    if let Some(ca) = &app.ca_pem {
        wanted.push((
            "configmaps",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kube-root-ca.crt"}, "data": {"ca.crt": ca}}),
        ));
    }
    for (plural, obj) in wanted {
        let Some(info) = app.registry.lookup("", "v1", plural) else {
            continue;
        };
        match Box::pin(create(app, &info, Some(ns), obj, false, &Owner::Internal)).await {
            Ok(_) => {}
            Err(e) if e.code == 409 || e.code == 403 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn is_crd(info: &ResourceInfo) -> bool {
    info.group == "apiextensions.k8s.io" && info.plural == "customresourcedefinitions"
}

fn storage_info(app: &App, info: &ResourceInfo) -> Arc<ResourceInfo> {
    if is_events_v1(info)
        && let Some(core) = app.registry.lookup("", "v1", "events")
    {
        return core;
    }
    app.registry
        .storage_of(&info.group, &info.plural)
        .unwrap_or_else(|| Arc::new(info.clone()))
}

// ---------------------------------------------------------------- update / patch

/// Everything but metadata (and status, when it is a subresource): what `generation` tracks.
fn spec_part(info: &ResourceInfo, obj: &Value) -> Value {
    let mut m = obj.as_object().cloned().unwrap_or_default();
    m.remove("metadata");
    m.remove("apiVersion");
    m.remove("kind");
    if info.status_subresource {
        m.remove("status");
    }
    Value::Object(m)
}

/// Applies the update rules of the API conventions to `new` given the stored `old`.
async fn prepare_update(
    app: &App,
    info: &ResourceInfo,
    old: &Value,
    mut new: Value,
    status_only: bool,
) -> Result<Value, ApiError> {
    let name = meta_str(old, "name").unwrap_or_default().to_string();
    if status_only {
        // Only status changes through /status: everything else comes from the stored object.
        let status = new.as_object_mut().and_then(|m| m.remove("status"));
        let mut merged = old.clone();
        if let Some(m) = merged.as_object_mut() {
            match status {
                Some(s) => {
                    m.insert("status".into(), s);
                }
                None => {
                    m.remove("status");
                }
            }
        }
        merged = present(info, merged);
        crate::schema::admit(info, &mut merged, Some(old))
            .map_err(|c| ApiError::invalid(info, &name, c))?;
        return Ok(merged);
    }
    normalize_metadata(&mut new);
    check_metadata(info, &new)?;
    let old_meta = meta(old).clone();
    let old_fin = finalizers(old);
    let deleting = old_meta
        .get("deletionTimestamp")
        .is_some_and(|d| !d.is_null());
    if deleting {
        let added: Vec<String> = finalizers(&new)
            .into_iter()
            .filter(|f| !old_fin.contains(f))
            .collect();
        if !added.is_empty() {
            return Err(ApiError::invalid(
                info,
                &name,
                vec![cause(
                    "FieldValueForbidden",
                    "metadata.finalizers",
                    format!(
                        "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers {added:?}"
                    ),
                )],
            ));
        }
    }
    if let Some(uid) = meta_str(&new, "uid")
        && Some(uid) != old_meta.get("uid").and_then(|u| u.as_str())
    {
        return Err(ApiError::invalid(
            info,
            &name,
            vec![cause(
                "FieldValueInvalid",
                "metadata.uid",
                format!("Invalid value: {uid:?}: field is immutable"),
            )],
        ));
    }
    {
        let m = meta_mut(&mut new);
        for k in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "namespace",
            "name",
            "generation",
            "resourceVersion",
        ] {
            match old_meta.get(k) {
                Some(v) => {
                    m.insert(k.into(), v.clone());
                }
                None => {
                    m.remove(k);
                }
            }
        }
        m.remove("managedFields");
        m.remove("selfLink");
    }
    if info.status_subresource
        && let Some(m) = new.as_object_mut()
    {
        match old.get("status") {
            Some(s) => {
                m.insert("status".into(), s.clone());
            }
            None => {
                m.remove("status");
            }
        }
    }
    crate::kinds::prepare(app, info, &mut new, Some(old)).await?;
    crate::schema::admit(info, &mut new, Some(old))
        .map_err(|c| ApiError::invalid(info, &name, c))?;
    if spec_part(info, &new) != spec_part(info, &present(info, old.clone())) {
        let g = old_meta
            .get("generation")
            .and_then(|g| g.as_i64())
            .unwrap_or(0);
        meta_mut(&mut new).insert("generation".into(), json!(g + 1));
    }
    Ok(new)
}

/// Runs an update: `mutate` turns the stored object into the proposed new one. Retries
/// on storage conflicts unless the proposal carried its own resourceVersion.
#[allow(clippy::too_many_arguments)]
async fn update_with<F>(
    app: &App,
    info: &ResourceInfo,
    ns: Option<&str>,
    name: &str,
    status_only: bool,
    dry_run: bool,
    explicit_rv: bool,
    owner: &Owner,
    mut mutate: F,
) -> Result<Value, ApiError>
where
    F: FnMut(&Value) -> Result<Value, ApiError>,
{
    let key = key_for(info, ns, name);
    let storage = storage_info(app, info);
    for _ in 0..16 {
        let old_stored = get_object(app, info, ns, name).await?;
        let old = present(info, old_stored.clone());
        let mut new = mutate(&old)?;
        let applied_fields = match owner {
            Owner::Apply => meta_mut(&mut new).remove("managedFields"),
            _ => None,
        };
        check_type(info, &mut new)?;
        let body_name = meta_str(&new, "name").unwrap_or(name).to_string();
        if body_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        check_namespace_field(info, ns, &mut new)?;
        let old_rv = rv_of(&old);
        // Only a resourceVersion the client sent is a precondition (a patch result carries
        // the stored one).
        let wanted_rv = meta_str(&new, "resourceVersion").map(String::from);
        let conditional = explicit_rv && wanted_rv.is_some();
        if conditional
            && let Some(w) = &wanted_rv
            && w.parse::<u64>().ok() != Some(old_rv)
        {
            return Err(ApiError::conflict(
                info,
                name,
                "the object has been modified; please apply your changes to the latest version and try again",
            ));
        }
        let mut new = prepare_update(app, info, &old, new, status_only).await?;
        if !status_only {
            record_fields(info, Some(&old), &mut new, owner, applied_fields);
        }
        if new == old {
            return Ok(old);
        }
        if dry_run {
            return Ok(new);
        }
        match app
            .store
            .write(WriteOp::Update {
                key: key.clone(),
                obj: present(&storage, new),
                expected_rv: old_rv,
            })
            .await
        {
            Ok(WriteOutcome::Stored(v)) | Ok(WriteOutcome::Deleted(v)) => {
                crate::kinds::after_write(app, info, &v).await?;
                return Ok(present(info, v));
            }
            Ok(_) => return Err(ApiError::internal("unexpected storage outcome")),
            Err(StoreError::Conflict { .. }) if !conditional => continue,
            Err(StoreError::Conflict { .. }) => {
                return Err(ApiError::conflict(
                    info,
                    name,
                    "the object has been modified; please apply your changes to the latest version and try again",
                ));
            }
            Err(StoreError::NotFound) => {
                return Err(ApiError::not_found(&info.group, &info.plural, name));
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::conflict(
        info,
        name,
        "too many concurrent writers; try again",
    ))
}

/// PUT.
pub(crate) async fn update(
    app: &App,
    info: &ResourceInfo,
    ns: Option<&str>,
    name: &str,
    obj: Value,
    status_only: bool,
    dry_run: bool,
    owner: &Owner,
) -> Result<Value, ApiError> {
    let explicit = meta_str(&obj, "resourceVersion").is_some();
    update_with(
        app,
        info,
        ns,
        name,
        status_only,
        dry_run,
        explicit,
        owner,
        |_| Ok(obj.clone()),
    )
    .await
}

/// PATCH with one of the supported patch types.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn patch(
    app: &App,
    info: &ResourceInfo,
    ns: Option<&str>,
    name: &str,
    content_type: &str,
    bytes: &[u8],
    status_only: bool,
    q: &Query,
    owner: &Owner,
) -> Result<Value, ApiError> {
    let kind = crate::patch::PatchKind::from_content_type(content_type, info)?;
    let patch_doc: Value = serde_json::from_slice(bytes)
        .map_err(|e| ApiError::bad_request(format!("error decoding patch body: {e}")))?;
    let strict = q.get("fieldValidation").is_some_and(|v| v == "Strict");
    let explicit = match kind {
        crate::patch::PatchKind::Json => patch_doc.as_array().is_some_and(|ops| {
            ops.iter().any(|op| {
                op["path"] == "/metadata/resourceVersion"
                    && op["op"] != "test"
                    && op["op"] != "remove"
            })
        }),
        _ => patch_doc
            .pointer("/metadata/resourceVersion")
            .is_some_and(|v| !v.is_null()),
    };
    update_with(
        app,
        info,
        ns,
        name,
        status_only,
        dry_run(q),
        explicit,
        owner,
        |old| {
            let mut new = crate::patch::apply(kind, old, &patch_doc)?;
            check_patched_identity(old, &new)?;
            if !crate::patch::names_finalizers(kind, &patch_doc) {
                if let Some(kept) = meta(old).get("finalizers").cloned() {
                    meta_mut(&mut new).insert("finalizers".into(), kept);
                }
            }
            if strict {
                field_validation(info, q, &new)?;
            }
            Ok(new)
        },
    )
    .await
}

/// Sets `managedFields` on a proposed object: the ones server-side apply computed, or
/// the ownership of a non-apply write.
fn record_fields(
    info: &ResourceInfo,
    old: Option<&Value>,
    new: &mut Value,
    owner: &Owner,
    applied: Option<Value>,
) {
    match (owner, applied) {
        (Owner::Apply, Some(mf)) => {
            meta_mut(new).insert("managedFields".into(), mf);
        }
        _ => crate::ssa::record_update(info, old, new, owner),
    }
}

fn is_apply(content_type: &str) -> bool {
    content_type.split(';').next().unwrap_or("").trim() == "application/apply-patch+yaml"
}

/// Server-side apply (PATCH with `application/apply-patch+yaml`): creates the object when
/// absent, else merges the applied configuration under field ownership. Returns the
/// object and whether it was created. Errors: 400 without `fieldManager`, 409 on
/// ownership conflicts (unless `force=true`), as for create/update otherwise.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn apply_request(
    app: &App,
    info: &ResourceInfo,
    ns: Option<&str>,
    name: &str,
    bytes: &[u8],
    status_only: bool,
    q: &Query,
) -> Result<(Value, bool), ApiError> {
    let Some(manager) = q.get("fieldManager").filter(|m| !m.is_empty()) else {
        return Err(ApiError::bad_request(
            "fieldManager is required for apply requests",
        ));
    };
    if status_only {
        return Err(ApiError::new(
            415,
            "UnsupportedMediaType",
            "server-side apply of the status subresource is not supported by this API server; apply the object, or patch /status with a merge patch",
        ));
    }
    let force = truthy(q, "force");
    let config = decode_body("application/yaml", bytes)?;
    check_apply_config(info, name, &config)?;
    // Unknown fields: 400 under fieldValidation=Strict (kubectl's default), as for create.
    field_validation(info, q, &config)?;
    for _ in 0..4 {
        let live = match get_object(app, info, ns, name).await {
            Ok(v) => Some(present(info, v)),
            Err(e) if e.code == 404 => None,
            Err(e) => return Err(e),
        };
        if live.is_none() {
            let obj = crate::ssa::apply(info, None, &config, manager, force)?.object;
            match create(app, info, ns, obj, dry_run(q), &Owner::Apply).await {
                Err(e) if e.code == 409 && e.reason == "AlreadyExists" => continue,
                r => return r.map(|v| (v, true)),
            }
        }
        let updated = update_with(
            app,
            info,
            ns,
            name,
            false,
            dry_run(q),
            false,
            &Owner::Apply,
            |old| Ok(crate::ssa::apply(info, Some(old), &config, manager, force)?.object),
        )
        .await;
        match updated {
            Err(e) if e.code == 404 => continue,
            r => return r.map(|v| (v, false)),
        }
    }
    Err(ApiError::conflict(
        info,
        name,
        "the object was created and deleted concurrently; try again",
    ))
}

/// An applied configuration must name this resource's apiVersion and kind and the
/// object of the URL.
fn check_apply_config(info: &ResourceInfo, name: &str, config: &Value) -> Result<(), ApiError> {
    let av = config.get("apiVersion").and_then(|v| v.as_str());
    let kind = config.get("kind").and_then(|v| v.as_str());
    if av != Some(info.api_version().as_str()) || kind != Some(info.kind.as_str()) {
        return Err(ApiError::bad_request(format!(
            "the applied configuration has apiVersion {:?} and kind {:?}; this resource is {} {}",
            av.unwrap_or_default(),
            kind.unwrap_or_default(),
            info.api_version(),
            info.kind
        )));
    }
    match meta_str(config, "name") {
        Some(n) if n == name => Ok(()),
        Some(n) => Err(ApiError::bad_request(format!(
            "the name of the object ({n}) does not match the name on the URL ({name})"
        ))),
        None => Err(ApiError::bad_request(
            "metadata.name is required in an applied configuration",
        )),
    }
}

/// A patch may not remove an object's metadata or its name, and may not change its name
/// or namespace (Kubernetes answers 400 BadRequest); `uid` changes are rejected later as
/// an immutable field, and system fields (creationTimestamp, generation...) are reset
/// to the stored values as on any update.
fn check_patched_identity(old: &Value, new: &Value) -> Result<(), ApiError> {
    if !new.get("metadata").is_some_and(Value::is_object) {
        return Err(ApiError::bad_request(
            "metadata: Required value: a patch cannot remove an object's metadata".to_string(),
        ));
    }
    for field in ["name", "namespace"] {
        let (was, now) = (meta_str(old, field), meta_str(new, field));
        if was != now {
            return Err(ApiError::bad_request(format!(
                "metadata.{field}: Invalid value: {:?}: a patch cannot change the {field} of an object (was {:?})",
                now.unwrap_or_default(),
                was.unwrap_or_default()
            )));
        }
    }
    Ok(())
}

/// Internal update used by the garbage collector and lifecycle code.
pub(crate) async fn modify(
    app: &App,
    info: &ResourceInfo,
    ns: Option<&str>,
    name: &str,
    f: impl FnMut(&Value) -> Result<Value, ApiError>,
) -> Result<Value, ApiError> {
    update_with(
        app,
        info,
        ns,
        name,
        false,
        false,
        false,
        &Owner::Internal,
        f,
    )
    .await
}

// ---------------------------------------------------------------- delete

/// Parsed `DeleteOptions` (body or query).
#[derive(Debug, Default, Clone)]
pub(crate) struct DeleteOptions {
    pub propagation: Option<String>,
    pub precondition_rv: Option<u64>,
    pub precondition_uid: Option<String>,
    pub dry_run: bool,
}

impl DeleteOptions {
    fn parse(bytes: &[u8], q: &Query) -> Result<DeleteOptions, ApiError> {
        let mut o = DeleteOptions {
            propagation: q.get("propagationPolicy").cloned(),
            dry_run: dry_run(q),
            ..Default::default()
        };
        if q.get("orphanDependents").is_some_and(|v| v == "true") {
            o.propagation = Some("Orphan".into());
        }
        if !bytes.iter().all(|b| b.is_ascii_whitespace()) {
            let v: Value = serde_json::from_slice(bytes)
                .map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}")))?;
            if let Some(p) = v.get("propagationPolicy").and_then(|p| p.as_str()) {
                o.propagation = Some(p.into());
            }
            if v.get("orphanDependents").and_then(|p| p.as_bool()) == Some(true) {
                o.propagation = Some("Orphan".into());
            }
            if let Some(rv) = v
                .pointer("/preconditions/resourceVersion")
                .and_then(|p| p.as_str())
            {
                o.precondition_rv = rv.parse().ok();
            }
            if let Some(uid) = v.pointer("/preconditions/uid").and_then(|p| p.as_str()) {
                o.precondition_uid = Some(uid.into());
            }
            if v.get("dryRun")
                .and_then(|d| d.as_array())
                .is_some_and(|a| a.iter().any(|x| x == "All"))
            {
                o.dry_run = true;
            }
        }
        if let Some(p) = &o.propagation
            && !matches!(p.as_str(), "Background" | "Foreground" | "Orphan")
        {
            return Err(ApiError::bad_request(format!(
                "propagationPolicy {p:?} is not one of Background, Foreground, Orphan"
            )));
        }
        Ok(o)
    }
}

/// Deletes an object following finalizers and the propagation policy.
pub(crate) async fn delete(
    app: &App,
    info: &ResourceInfo,
    ns: Option<&str>,
    name: &str,
    opts: &DeleteOptions,
) -> Result<Value, ApiError> {
    let is_ns = info.group.is_empty() && info.plural == "namespaces";
    if is_ns && PROTECTED_NAMESPACES.contains(&name) {
        return Err(ApiError {
            code: 403,
            reason: "Forbidden",
            message: format!(
                "namespaces \"{name}\" is forbidden: this namespace may not be deleted"
            ),
            details: Some(json!({"name": name, "group": "", "kind": "namespaces"})),
        });
    }
    for _ in 0..16 {
        let old = present(info, get_object(app, info, ns, name).await?);
        if let Some(rv) = opts.precondition_rv
            && rv != rv_of(&old)
        {
            return Err(ApiError::conflict(
                info,
                name,
                &format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                    rv_of(&old)
                ),
            ));
        }
        if let Some(uid) = &opts.precondition_uid
            && Some(uid.as_str()) != meta_str(&old, "uid")
        {
            return Err(ApiError::conflict(
                info,
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    meta_str(&old, "uid").unwrap_or_default()
                ),
            ));
        }
        let already = meta(&old)
            .get("deletionTimestamp")
            .is_some_and(|d| !d.is_null());
        let mut fins = finalizers(&old);
        match opts.propagation.as_deref() {
            Some("Foreground") if !fins.iter().any(|f| f == "foregroundDeletion") => {
                fins.push("foregroundDeletion".into())
            }
            Some("Orphan") if !fins.iter().any(|f| f == "orphan") => fins.push("orphan".into()),
            _ => {}
        }
        if is_ns {
            if already {
                return Ok(old);
            }
            let mut new = old.clone();
            let m = meta_mut(&mut new);
            m.insert("deletionTimestamp".into(), json!(now()));
            m.insert("deletionGracePeriodSeconds".into(), json!(0));
            new["status"] = json!({"phase": "Terminating"});
            if opts.dry_run {
                return Ok(new);
            }
            return write_update(app, info, ns, name, new, rv_of(&old)).await;
        }
        if !fins.is_empty() {
            if already && fins == finalizers(&old) {
                return Ok(old);
            }
            let mut new = old.clone();
            set_finalizers(&mut new, fins);
            let m = meta_mut(&mut new);
            if !already {
                m.insert("deletionTimestamp".into(), json!(now()));
                m.insert("deletionGracePeriodSeconds".into(), json!(0));
            }
            if opts.dry_run {
                return Ok(new);
            }
            match write_update(app, info, ns, name, new, rv_of(&old)).await {
                Err(e) if e.code == 409 && opts.precondition_rv.is_none() => continue,
                r => return r,
            }
        }
        if opts.dry_run {
            return Ok(old);
        }
        if is_crd(info) {
            crate::kinds::remove_crd_resources(app, &old).await?;
        }
        match app
            .store
            .write(WriteOp::Delete {
                key: key_for(info, ns, name),
                expected_rv: Some(rv_of(&old)),
                expected_uid: None,
            })
            .await
        {
            Ok(WriteOutcome::Deleted(v)) => {
                if is_crd(info) {
                    app.registry.unregister_crd(name);
                }
                if info.builtin
                    && info.group == "rbac.authorization.k8s.io"
                    && info.plural == "clusterroles"
                {
                    Box::pin(crate::default_rbac::aggregate(app)).await?;
                }
                return Ok(present(info, v));
            }
            Ok(_) => return Err(ApiError::internal("unexpected storage outcome")),
            Err(StoreError::Conflict { .. }) if opts.precondition_rv.is_none() => continue,
            Err(StoreError::Conflict { .. }) => {
                return Err(ApiError::conflict(
                    info,
                    name,
                    "the object has been modified",
                ));
            }
            Err(StoreError::NotFound) => {
                return Err(ApiError::not_found(&info.group, &info.plural, name));
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::conflict(
        info,
        name,
        "too many concurrent writers; try again",
    ))
}

async fn write_update(
    app: &App,
    info: &ResourceInfo,
    ns: Option<&str>,
    name: &str,
    new: Value,
    expected_rv: u64,
) -> Result<Value, ApiError> {
    let storage = storage_info(app, info);
    match app
        .store
        .write(WriteOp::Update {
            key: key_for(info, ns, name),
            obj: present(&storage, new),
            expected_rv,
        })
        .await
    {
        Ok(WriteOutcome::Stored(v)) | Ok(WriteOutcome::Deleted(v)) => Ok(present(info, v)),
        Ok(_) => Err(ApiError::internal("unexpected storage outcome")),
        Err(StoreError::Conflict { .. }) => Err(ApiError::conflict(
            info,
            name,
            "the object has been modified",
        )),
        Err(StoreError::NotFound) => Err(ApiError::not_found(&info.group, &info.plural, name)),
        Err(e) => Err(e.into()),
    }
}

async fn delete_collection(
    app: &App,
    info: &ResourceInfo,
    ns: Option<String>,
    q: &Query,
    opts: &DeleteOptions,
) -> Result<Response, ApiError> {
    let filter = Filter::for_resource(info, q)?;
    let res = app
        .store
        .list(
            storage_rkey(info),
            ns,
            None,
            0,
            Box::new(move |o| filter.matches(o)),
        )
        .await?;
    let mut out = Vec::new();
    for o in res.items {
        let name = meta_str(&o, "name").unwrap_or_default().to_string();
        let ons = meta_str(&o, "namespace").map(String::from);
        match delete(app, info, ons.as_deref(), &name, opts).await {
            Ok(v) => out.push(v),
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    let lm = json!({"resourceVersion": app.store.head().to_string()});
    Ok(respond_objects(
        info,
        &Render::Plain,
        out,
        Some(lm),
        StatusCode::OK,
    ))
}

// ---------------------------------------------------------------- discovery

fn json_ok(v: Value) -> Response {
    json_response(StatusCode::OK, &v)
}

pub(crate) async fn version() -> Response {
    json_ok(json!({
        "major": "1", "minor": "33", "gitVersion": "v1.33.0+plinth",
        "gitCommit": "", "gitTreeState": "clean", "buildDate": "1970-01-01T00:00:00Z",
        "goVersion": "", "compiler": "rustc", "platform": format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
    }))
}

pub(crate) async fn api_versions(State(app): State<AppRef>) -> Response {
    let addr = app
        .https_addr
        .get()
        .map(|a| a.to_string())
        .unwrap_or_else(|| "127.0.0.1:6443".into());
    json_ok(json!({
        "kind": "APIVersions", "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": addr}],
    }))
}

fn group_json(g: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{g}/{v}"), "version": v}))
        .collect();
    json!({"name": g, "versions": vs, "preferredVersion": vs.first().cloned().unwrap_or(json!({}))})
}

pub(crate) async fn api_groups(State(app): State<AppRef>) -> Response {
    let groups: Vec<Value> = app
        .registry
        .groups()
        .iter()
        .map(|(g, vs)| group_json(g, vs))
        .collect();
    json_ok(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}))
}

pub(crate) async fn api_group(
    State(app): State<AppRef>,
    axum::extract::Path(group): axum::extract::Path<String>,
) -> Response {
    match app.registry.groups().get(&group) {
        Some(vs) => {
            let mut g = group_json(&group, vs);
            g["kind"] = json!("APIGroup");
            g["apiVersion"] = json!("v1");
            json_ok(g)
        }
        None => not_found_path().into_response(),
    }
}

fn resource_list(app: &App, group: &str, version: &str) -> Option<Value> {
    let all: Vec<ResourceInfo> = app
        .registry
        .all()
        .into_iter()
        .filter(|i| i.group == group && i.version == version)
        .collect();
    if all.is_empty() {
        return None;
    }
    let mut res = Vec::new();
    for i in &all {
        let mut r = json!({
            "name": i.plural, "singularName": i.singular, "namespaced": i.namespaced,
            "kind": i.kind, "verbs": i.verbs,
        });
        if !i.short_names.is_empty() {
            r["shortNames"] = json!(i.short_names);
        }
        if !i.categories.is_empty() {
            r["categories"] = json!(i.categories);
        }
        res.push(r);
        if i.status_subresource {
            res.push(json!({"name": format!("{}/status", i.plural), "singularName": "", "namespaced": i.namespaced, "kind": i.kind, "verbs": ["get", "patch", "update"]}));
        }
        if i.group.is_empty() && i.plural == "pods" {
            res.push(json!({"name": "pods/log", "singularName": "", "namespaced": true, "kind": "Pod", "verbs": ["get"]}));
        }
        if i.group.is_empty() && i.plural == "serviceaccounts" {
            res.push(json!({"name": "serviceaccounts/token", "singularName": "", "namespaced": true, "group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest", "verbs": ["create"]}));
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": res}),
    )
}

pub(crate) async fn core_resources(State(app): State<AppRef>) -> Response {
    resource_list(&app, "", "v1")
        .map(json_ok)
        .unwrap_or_else(|| not_found_path().into_response())
}

pub(crate) async fn group_resources(
    State(app): State<AppRef>,
    axum::extract::Path((group, version)): axum::extract::Path<(String, String)>,
) -> Response {
    resource_list(&app, &group, &version)
        .map(json_ok)
        .unwrap_or_else(|| not_found_path().into_response())
}

pub(crate) async fn openapi_index(State(app): State<AppRef>) -> Response {
    json_ok(crate::openapi::v3_index(&app.registry.all()))
}

pub(crate) async fn openapi_core(State(app): State<AppRef>) -> Response {
    crate::openapi::v3_group_version(&app.registry.all(), "", "v1")
        .map(json_ok)
        .unwrap_or_else(|| not_found_path().into_response())
}

pub(crate) async fn openapi_group(
    State(app): State<AppRef>,
    axum::extract::Path((group, version)): axum::extract::Path<(String, String)>,
) -> Response {
    crate::openapi::v3_group_version(&app.registry.all(), &group, &version)
        .map(json_ok)
        .unwrap_or_else(|| not_found_path().into_response())
}

pub(crate) async fn healthz() -> Response {
    (StatusCode::OK, [(header::CONTENT_TYPE, "text/plain")], "ok").into_response()
}

/// Builds the route table (without authentication).
pub(crate) fn routes(app: AppRef) -> axum::Router {
    use axum::routing::get;
    axum::Router::new()
        .route("/version", get(version))
        .route("/api", get(api_versions))
        .route("/api/v1", get(core_resources))
        .route("/apis", get(api_groups))
        .route("/apis/{group}", get(api_group))
        .route("/apis/{group}/{version}", get(group_resources))
        .route("/openapi/v3", get(openapi_index))
        .route("/openapi/v3/api/v1", get(openapi_core))
        .route("/openapi/v3/apis/{group}/{version}", get(openapi_group))
        .route("/readyz", get(healthz))
        .route("/livez", get(healthz))
        .route("/healthz", get(healthz))
        .fallback(handle)
        .with_state(app)
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

    #[test]
    fn continue_round_trip() {
        let c = encode_continue(7, "ns", "n");
        assert_eq!(decode_continue(&c).unwrap(), (7, "ns".into(), "n".into()));
        assert!(decode_continue("!!").is_err());
    }
}
