//! The route table and the dispatch of resource requests to the verbs.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use http::{Method, StatusCode};
use serde_json::Value;

use crate::app::{
    AppRef, Render, RequestContext, json_response, not_found_path, respond_objects, truthy,
};
use crate::discovery::{
    api_group, api_groups, api_versions, core_resources, group_resources, healthz, openapi_core,
    openapi_group, openapi_index, openapi_v2, readyz, version,
};
use crate::error::ApiError;
use crate::registry::Registry;
use crate::resource::ResourceInfo;
use crate::verbs::{self, DeleteOptions};

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
        .route("/openapi/v2", get(openapi_v2))
        .route("/openapi/v3", get(openapi_index))
        .route("/openapi/v3/api/v1", get(openapi_core))
        .route("/openapi/v3/apis/{group}/{version}", get(openapi_group))
        .route("/readyz", get(readyz))
        .route("/livez", get(healthz))
        .route("/healthz", get(healthz))
        .fallback(handle)
        .with_state(app)
}

/// The main handler: everything under `/api` and `/apis` that is not discovery. Runs in
/// a request scope (the requester and subresource admission webhooks are told about);
/// the warnings webhooks gave become `Warning` headers of the answer, refused or not.
pub(crate) async fn handle(State(app): State<AppRef>, req: Request) -> Response {
    let user = req
        .extensions()
        .get::<crate::auth::Identity>()
        .cloned()
        .unwrap_or_default();
    let sub = parse_target(&app.registry, req.uri().path())
        .ok()
        .and_then(|t| t.sub);
    let (out, warnings) =
        crate::webhook::in_request(user, sub.as_deref(), dispatch(app, req)).await;
    let r = match out {
        Ok(r) => r,
        Err(e) => e.into_response(),
    };
    with_warnings(r, &warnings)
}

/// The resource (and object, subresource) a request path names.
struct Target {
    info: Arc<ResourceInfo>,
    ns: Option<String>,
    name: Option<String>,
    sub: Option<String>,
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

/// The served resource a request path names, as the metrics label it is counted under
/// (`plural[.group][/subresource]`), and whether the path names one object; `None` when
/// the path names nothing this server serves. Parsed exactly as requests are routed, so
/// the label set is bounded by the registry.
pub(crate) fn served_resource(reg: &Registry, path: &str) -> Option<(String, bool)> {
    let t = parse_target(reg, path).ok()?;
    check_subresource(reg, &t.info, t.sub.as_deref()).ok()?;
    let mut label = if t.info.group.is_empty() {
        t.info.plural.clone()
    } else {
        format!("{}.{}", t.info.plural, t.info.group)
    };
    if let Some(sub) = &t.sub {
        label = format!("{label}/{sub}");
    }
    Some((label, t.name.is_some()))
}

/// Subresources served: `status` and `scale` where the resource has one, `pods/log`,
/// `serviceaccounts/token`.
fn check_subresource(
    reg: &Registry,
    info: &ResourceInfo,
    sub: Option<&str>,
) -> Result<(), ApiError> {
    let ok = match sub {
        None => true,
        Some("status") => info.status_subresource,
        Some("scale") => reg
            .scale_of(&info.group, &info.version, &info.plural)
            .is_some(),
        Some("log") => info.group.is_empty() && info.plural == "pods",
        Some("token") => info.group.is_empty() && info.plural == "serviceaccounts",
        Some(_) => false,
    };
    if ok { Ok(()) } else { Err(not_found_path()) }
}

/// Reads a request body up to the server's limit (413 beyond it).
async fn read_body(app: &AppRef, body: Body) -> Result<axum::body::Bytes, ApiError> {
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
}

async fn dispatch(app: AppRef, req: Request) -> Result<Response, ApiError> {
    let (parts, body) = req.into_parts();
    let t = parse_target(&app.registry, parts.uri.path())?;
    let cx = RequestContext::of(&parts.uri, &parts.headers);
    check_subresource(&app.registry, &t.info, t.sub.as_deref())?;
    if t.sub.as_deref() == Some("scale") {
        return scale(&app, &t, &cx, &parts.method, body).await;
    }
    let watching = parts.method == Method::GET && t.name.is_none() && truthy(&cx.q, "watch")?;
    match (&parts.method, t.name.clone()) {
        (&Method::GET, Some(name)) => get(&app, &t, &cx, name).await,
        (&Method::GET, None) if watching => {
            crate::watch::watch(app.clone(), t.info, t.ns, &cx.q, cx.render).await
        }
        (&Method::GET, None) => verbs::list(&app, &t.info, t.ns, &cx.q, &cx.render).await,
        (&Method::POST, None) => {
            let bytes = read_body(&app, body).await?;
            let id = parts.extensions.get::<crate::auth::Identity>().cloned();
            create(&app, &t, &cx, &bytes, id.as_ref()).await
        }
        (&Method::POST, Some(name)) if t.sub.as_deref() == Some("token") => {
            let bytes = read_body(&app, body).await?;
            let obj = verbs::decode_body(&cx.content_type, &bytes)?;
            let ns = t.ns.unwrap_or_default();
            let tr = crate::auth::token_request(&app, ns, name, obj).await?;
            Ok(json_response(StatusCode::CREATED, &tr))
        }
        (&Method::PUT, Some(name)) => {
            let bytes = read_body(&app, body).await?;
            update(&app, &t, &cx, &name, &bytes).await
        }
        (&Method::PATCH, Some(name)) => {
            let bytes = read_body(&app, body).await?;
            patch(&app, &t, &cx, &name, &bytes).await
        }
        (&Method::DELETE, Some(name)) => {
            let bytes = read_body(&app, body).await?;
            let opts = DeleteOptions::parse(&bytes, &cx.q)?;
            let out = verbs::delete(&app, &t.info, t.ns.as_deref(), &name, &opts).await?;
            Ok(one(&t, &cx, out, StatusCode::OK))
        }
        (&Method::DELETE, None) => {
            let bytes = read_body(&app, body).await?;
            let opts = DeleteOptions::parse(&bytes, &cx.q)?;
            verbs::delete_collection(&app, &t.info, t.ns, &cx.q, &opts).await
        }
        (m, _) => Err(ApiError::new(
            405,
            "MethodNotAllowed",
            format!("the server does not allow this method on the requested resource ({m})"),
        )),
    }
}

/// GET, PUT or PATCH of `scale` where the resource has one (404 elsewhere).
async fn scale(
    app: &AppRef,
    t: &Target,
    cx: &RequestContext,
    method: &Method,
    body: Body,
) -> Result<Response, ApiError> {
    let i = &t.info;
    let paths = app.registry.scale_of(&i.group, &i.version, &i.plural);
    let (Some(paths), Some(name)) = (paths, t.name.as_deref()) else {
        return Err(not_found_path());
    };
    let ns = t.ns.as_deref();
    let scale = match *method {
        Method::GET => verbs::scale::get(app, i, &paths, ns, name).await?,
        Method::PUT | Method::PATCH => {
            let bytes = read_body(app, body).await?;
            let body = if *method == Method::PATCH {
                verbs::scale::ScaleWrite::Patch(&bytes)
            } else {
                verbs::scale::ScaleWrite::Put(&bytes)
            };
            verbs::scale::write(app, i, &paths, ns, name, cx, body).await?
        }
        ref m => {
            return Err(ApiError::new(
                405,
                "MethodNotAllowed",
                format!("the server does not allow this method on the requested resource ({m})"),
            ));
        }
    };
    // Rendered as asked, like any read: a Table of the Scale's own columns, or its
    // metadata.
    let out = match &cx.render {
        Render::Table { include_object } => {
            crate::table::render_scale(i, &paths, &scale, include_object)
        }
        Render::Metadata => crate::app::partial_metadata(&scale),
        Render::Plain => scale,
    };
    Ok(json_response(StatusCode::OK, &out))
}

/// One object rendered as the client asked.
fn one(t: &Target, cx: &RequestContext, obj: Value, code: StatusCode) -> Response {
    respond_objects(&t.info, &cx.render, vec![obj], None, code)
}

/// GET of one object, or of a Pod's log.
async fn get(
    app: &AppRef,
    t: &Target,
    cx: &RequestContext,
    name: String,
) -> Result<Response, ApiError> {
    if t.sub.as_deref() == Some("log") {
        return crate::logs::serve(app, t.ns.clone().unwrap_or_default(), name, &cx.q).await;
    }
    let obj = crate::app::get_object(app, &t.info, t.ns.as_deref(), &name).await?;
    Ok(one(t, cx, obj, StatusCode::OK))
}

/// POST to a collection.
async fn create(
    app: &AppRef,
    t: &Target,
    cx: &RequestContext,
    bytes: &[u8],
    requester: Option<&crate::auth::Identity>,
) -> Result<Response, ApiError> {
    let mut obj = verbs::decode_object(&t.info, &cx.content_type, bytes)?;
    let warnings = verbs::field_validation(&t.info, &cx.q, &obj)?;
    if crate::csr::is_csr(&t.info) {
        let anonymous = crate::auth::Identity::default();
        crate::csr::set_requester(&mut obj, requester.unwrap_or(&anonymous));
    }
    let ns = t.ns.as_deref();
    let created = verbs::create(app, &t.info, ns, obj, cx.dry_run(), &cx.owner).await?;
    Ok(with_warnings(
        one(t, cx, created, StatusCode::CREATED),
        &warnings,
    ))
}

/// PUT of an object or its status.
async fn update(
    app: &AppRef,
    t: &Target,
    cx: &RequestContext,
    name: &str,
    bytes: &[u8],
) -> Result<Response, ApiError> {
    let obj = verbs::decode_object(&t.info, &cx.content_type, bytes)?;
    let warnings = verbs::field_validation(&t.info, &cx.q, &obj)?;
    let status_only = t.sub.as_deref() == Some("status");
    let ns = t.ns.as_deref();
    let updated = verbs::update(app, &t.info, ns, name, obj, status_only, cx).await?;
    Ok(with_warnings(
        one(t, cx, updated, StatusCode::OK),
        &warnings,
    ))
}

/// PATCH of an object or its status; server-side apply by content type.
async fn patch(
    app: &AppRef,
    t: &Target,
    cx: &RequestContext,
    name: &str,
    bytes: &[u8],
) -> Result<Response, ApiError> {
    let status_only = t.sub.as_deref() == Some("status");
    let ns = t.ns.as_deref();
    if verbs::is_apply(&cx.content_type) {
        let (obj, created) =
            verbs::apply_request(app, &t.info, ns, name, bytes, status_only, &cx.q).await?;
        let code = if created {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        };
        return Ok(one(t, cx, obj, code));
    }
    let patched = verbs::patch(app, &t.info, ns, name, bytes, status_only, cx).await?;
    Ok(one(t, cx, patched, StatusCode::OK))
}

/// Adds `Warning` headers (field validation's `Warn` mode, admission webhooks' warnings).
fn with_warnings(mut r: Response, warnings: &[String]) -> Response {
    for w in warnings {
        if let Ok(v) = http::HeaderValue::from_str(w) {
            r.headers_mut().append("warning", v);
        }
    }
    r
}
