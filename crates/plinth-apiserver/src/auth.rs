//! Authentication: every request carries an [`Identity`] request extension.
//!
//! * The admin bearer token (written into `<data_dir>/kubeconfig`) → user `plinth-admin`,
//!   groups `system:masters`, `system:authenticated`.
//! * ServiceAccount tokens minted by the TokenRequest subresource
//!   (`POST /api/v1/namespaces/{ns}/serviceaccounts/{name}/token`): a JWT (HS256, signed
//!   with a server key kept in the data directory) naming the ServiceAccount and its uid;
//!   valid while unexpired and while that ServiceAccount exists →
//!   user `system:serviceaccount:<ns>:<name>`, groups `system:serviceaccounts`,
//!   `system:serviceaccounts:<ns>`, `system:authenticated`.
//! * The in-process router treats a request without an `Authorization` header as the
//!   admin; over the network such a request is answered 401.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::app::{App, AppRef, meta_str};
use crate::error::ApiError;

/// Who made a request (a request extension set by authentication).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Identity {
    /// User name, e.g. `plinth-admin` or `system:serviceaccount:default:builder`.
    pub user: String,
    /// Groups, e.g. `system:masters`, `system:authenticated`.
    pub groups: Vec<String>,
    /// The user's uid (a ServiceAccount's uid; `Impersonate-Uid`), empty when unknown.
    pub uid: String,
    /// Extra attributes (`Impersonate-Extra-<key>`).
    pub extra: std::collections::BTreeMap<String, Vec<String>>,
}

impl Identity {
    /// The administrator.
    pub fn admin() -> Identity {
        Identity {
            user: "plinth-admin".into(),
            groups: vec![
                crate::rbac::MASTERS_GROUP.into(),
                "system:authenticated".into(),
            ],
            ..Identity::default()
        }
    }
}

fn unauthorized() -> Response {
    ApiError::new(401, "Unauthorized", "Unauthorized").into_response()
}

/// Resolves a bearer token to an identity.
async fn identify(app: &App, token: &str) -> Option<Identity> {
    let admin = app.tokens.admin_token();
    if token.len() == admin.len()
        && token
            .bytes()
            .zip(admin.bytes())
            .fold(0u8, |a, (x, y)| a | (x ^ y))
            == 0
    {
        return Some(Identity::admin());
    }
    let (ns, name, uid) = app.tokens.verify(token)?;
    let sa = app
        .store
        .get(crate::store::ObjKey {
            rkey: crate::registry::rkey("", "serviceaccounts"),
            ns: ns.clone(),
            name: name.clone(),
        })
        .await
        .ok()??;
    if meta_str(&sa, "uid") != Some(uid.as_str()) {
        return None;
    }
    Some(Identity {
        user: format!("system:serviceaccount:{ns}:{name}"),
        groups: vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{ns}"),
            "system:authenticated".into(),
        ],
        uid,
        ..Identity::default()
    })
}

fn bearer(req: &Request) -> Option<Option<String>> {
    let h = req.headers().get(http::header::AUTHORIZATION)?;
    Some(
        h.to_str()
            .ok()
            .and_then(|s| s.strip_prefix("Bearer ").map(|t| t.trim().to_string())),
    )
}

fn is_health(path: &str) -> bool {
    matches!(path, "/readyz" | "/livez" | "/healthz")
}

/// Middleware for the network listener: a valid bearer token is required (health
/// endpoints excepted).
pub(crate) async fn network_auth(
    State(app): State<AppRef>,
    mut req: Request,
    next: Next,
) -> Response {
    let id = match bearer(&req) {
        Some(Some(t)) => identify(&app, &t).await,
        _ => None,
    };
    match id {
        Some(id) => {
            req.extensions_mut().insert(id);
            next.run(req).await
        }
        None if is_health(req.uri().path()) => next.run(req).await,
        None => unauthorized(),
    }
}

/// Middleware for the in-process router: no `Authorization` header means the admin.
pub(crate) async fn in_process_auth(
    State(app): State<AppRef>,
    mut req: Request,
    next: Next,
) -> Response {
    let id = match bearer(&req) {
        None => Some(Identity::admin()),
        Some(Some(t)) => identify(&app, &t).await,
        Some(None) => None,
    };
    match id {
        Some(id) => {
            req.extensions_mut().insert(id);
            next.run(req).await
        }
        None => unauthorized(),
    }
}

/// TokenRequest (authentication.k8s.io/v1) for a ServiceAccount.
pub(crate) async fn token_request(
    app: &Arc<App>,
    ns: String,
    name: String,
    body: Value,
) -> Result<Value, ApiError> {
    let info = app
        .registry
        .lookup("", "v1", "serviceaccounts")
        .ok_or_else(|| ApiError::internal("serviceaccounts not registered"))?;
    let sa = crate::app::get_object(app, &info, Some(&ns), &name).await?;
    let uid = meta_str(&sa, "uid").unwrap_or_default().to_string();
    if let Some(k) = body.get("kind").and_then(|k| k.as_str())
        && k != "TokenRequest"
    {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({k}) does not match the expected kind (TokenRequest)"
        )));
    }
    let audiences: Vec<String> = body
        .pointer("/spec/audiences")
        .and_then(|a| a.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let exp = body
        .pointer("/spec/expirationSeconds")
        .and_then(|e| e.as_i64())
        .unwrap_or(3600);
    if exp < 600 {
        return Err(ApiError::invalid(
            &crate::resource::ResourceInfo {
                group: "authentication.k8s.io".into(),
                version: "v1".into(),
                kind: "TokenRequest".into(),
                list_kind: String::new(),
                plural: "tokenrequests".into(),
                singular: "tokenrequest".into(),
                namespaced: true,
                short_names: vec![],
                categories: vec![],
                verbs: vec![],
                status_subresource: false,
                builtin: true,
                schema: None,
                printer_columns: vec![],
                storage: true,
            },
            &name,
            vec![crate::resource::Cause {
                reason: "FieldValueInvalid".into(),
                message: "may not specify a duration less than 10 minutes".into(),
                field: "spec.expirationSeconds".into(),
            }],
        ));
    }
    let (token, exp_at) = app.tokens.mint(&ns, &name, &uid, &audiences, exp);
    let exp_ts = jiff::Timestamp::from_second(exp_at)
        .map(|t| t.to_string())
        .unwrap_or_default();
    Ok(json!({
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"name": name, "namespace": ns, "creationTimestamp": crate::timestamp::now()},
        "spec": {"audiences": audiences, "expirationSeconds": exp, "boundObjectRef": body.pointer("/spec/boundObjectRef").cloned().unwrap_or(Value::Null)},
        "status": {"token": token, "expirationTimestamp": exp_ts},
    }))
}
