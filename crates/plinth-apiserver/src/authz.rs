//! RBAC enforcement: the middleware that authorizes every authenticated request with
//! [`crate::rbac::authorize`] against a cached snapshot of the stored Roles,
//! ClusterRoles, RoleBindings and ClusterRoleBindings.
//!
//! * Members of `system:masters` (the admin identity, and the in-process controllers,
//!   which act as the admin) are allowed everything without a lookup, as Kubernetes's
//!   privileged-group authorizer does.
//! * Every other identity (ServiceAccounts, users) needs a matching rule; otherwise the
//!   answer is `403 Forbidden` with Kubernetes's `Status` message, e.g.
//!   `configmaps "x" is forbidden: User "system:serviceaccount:ns:sa" cannot get
//!   resource "configmaps" in API group "" in the namespace "ns"`.
//! * Kubernetes's default bindings for authenticated users are built in: discovery,
//!   OpenAPI, version and health paths (`system:discovery`,
//!   `system:public-info-viewer`) and creating `selfsubjectaccessreviews` /
//!   `selfsubjectrulesreviews` (`system:basic-user`).
//! * `SelfSubjectAccessReview` (authorization.k8s.io/v1, what `kubectl auth can-i`
//!   sends) is answered here from the same snapshot, and `SelfSubjectReview`
//!   (authentication.k8s.io/v1, `kubectl auth whoami`) from the request's identity.
//! * Impersonation (`Impersonate-User` / `Impersonate-Group` headers, `kubectl --as`)
//!   is honoured for `system:masters` members and refused (403) for everyone else.
//!
//! The snapshot is loaded lazily and marked stale whenever an RBAC object changes (a
//! watch on the four RBAC resources, plus an immediate mark after any write through the
//! API to `rbac.authorization.k8s.io`), so authorization does not read SQLite per request.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::app::App;
use crate::auth::Identity;
use crate::error::ApiError;
use crate::rbac::{
    RbacSnapshot, RequestAttributes, authorize, forbidden_message, request_attributes,
};
use crate::registry::rkey;

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";
const RBAC_PLURALS: [&str; 4] = [
    "roles",
    "clusterroles",
    "rolebindings",
    "clusterrolebindings",
];
const MASTERS: &str = "system:masters";

/// The cached RBAC snapshot of one API server.
pub(crate) struct Authorizer {
    app: Arc<App>,
    snapshot: RwLock<Option<Arc<RbacSnapshot>>>,
    stale: AtomicBool,
}

impl Authorizer {
    /// An authorizer over `app`'s store; spawns the task that marks the snapshot stale
    /// on RBAC changes (returned so the server can stop it).
    pub(crate) fn start(app: Arc<App>) -> (Arc<Authorizer>, tokio::task::JoinHandle<()>) {
        let a = Arc::new(Authorizer {
            app: app.clone(),
            snapshot: RwLock::new(None),
            stale: AtomicBool::new(true),
        });
        let mut rxs: Vec<_> = RBAC_PLURALS
            .iter()
            .map(|p| app.hub.subscribe(&rkey(RBAC_GROUP, p)))
            .collect();
        let weak = Arc::downgrade(&a);
        let task = tokio::spawn(async move {
            let mut merged = futures::stream::select_all(
                rxs.drain(..)
                    .map(|rx| Box::pin(tokio_stream::wrappers::BroadcastStream::new(rx))),
            );
            use futures::StreamExt;
            // Any event (or a lag, which may have hidden one) invalidates the snapshot.
            while merged.next().await.is_some() {
                match weak.upgrade() {
                    Some(a) => a.stale.store(true, Ordering::SeqCst),
                    None => return,
                }
            }
        });
        (a, task)
    }

    /// The current snapshot, reloading it from the store when stale.
    async fn snapshot(&self) -> Result<Arc<RbacSnapshot>, ApiError> {
        if !self.stale.load(Ordering::SeqCst)
            && let Some(s) = self.snapshot.read().unwrap().clone()
        {
            return Ok(s);
        }
        // Cleared before reading, so a change that lands during the load marks it again.
        self.stale.store(false, Ordering::SeqCst);
        let mut lists = Vec::with_capacity(4);
        for p in RBAC_PLURALS {
            match self.app.store.all_of(rkey(RBAC_GROUP, p)).await {
                Ok(v) => lists.push(v),
                Err(e) => {
                    self.stale.store(true, Ordering::SeqCst);
                    return Err(ApiError::internal(format!("reading RBAC objects: {e}")));
                }
            }
        }
        let snap =
            RbacSnapshot::from_values(&lists[0], &lists[1], &lists[2], &lists[3]).map_err(|e| {
                self.stale.store(true, Ordering::SeqCst);
                ApiError::internal(format!("decoding stored RBAC objects: {e}"))
            })?;
        let snap = Arc::new(snap);
        *self.snapshot.write().unwrap() = Some(snap.clone());
        Ok(snap)
    }

    /// Decides `attrs` (built-in default grants first, then the stored RBAC objects).
    async fn allowed(&self, attrs: &RequestAttributes) -> Result<bool, ApiError> {
        if attrs.groups.iter().any(|g| g == MASTERS) || default_grant(attrs) {
            return Ok(true);
        }
        Ok(authorize(attrs, &*self.snapshot().await?).allowed())
    }
}

/// Kubernetes's bootstrap bindings for `system:authenticated`: discovery and public
/// info (`system:discovery`, `system:public-info-viewer`) and self-reviews
/// (`system:basic-user`).
fn default_grant(a: &RequestAttributes) -> bool {
    if !a.groups.iter().any(|g| g == "system:authenticated") {
        return false;
    }
    if !a.resource_request {
        let p = a.path.as_str();
        return a.verb == "get"
            && (p == "/api"
                || p.starts_with("/api/")
                || p == "/apis"
                || p.starts_with("/apis/")
                || p.starts_with("/openapi")
                || matches!(
                    p,
                    "/version" | "/version/" | "/healthz" | "/livez" | "/readyz"
                ));
    }
    a.verb == "create"
        && ((a.api_group == "authorization.k8s.io"
            && matches!(
                a.resource.as_str(),
                "selfsubjectaccessreviews" | "selfsubjectrulesreviews"
            ))
            || (a.api_group == "authentication.k8s.io" && a.resource == "selfsubjectreviews"))
}

/// Answers a SelfSubjectReview (`authentication.k8s.io/v1`, what `kubectl auth whoami`
/// sends): the requester's user name and groups, after impersonation.
fn self_subject_review(id: &Identity, api_version: &str) -> Response {
    let out = json!({
        "kind": "SelfSubjectReview",
        "apiVersion": api_version,
        "metadata": {"creationTimestamp": null},
        "status": {"userInfo": {"username": id.user, "groups": id.groups}},
    });
    (
        http::StatusCode::CREATED,
        [(http::header::CONTENT_TYPE, "application/json")],
        out.to_string(),
    )
        .into_response()
}

fn forbidden(attrs: &RequestAttributes) -> Response {
    let mut e = ApiError::new(403, "Forbidden", forbidden_message(attrs));
    if attrs.resource_request {
        e.details =
            Some(json!({"name": attrs.name, "group": attrs.api_group, "kind": attrs.resource}));
    }
    e.into_response()
}

/// The identity a request acts as after impersonation headers (`Impersonate-User`,
/// `Impersonate-Group`); `Err` with the refused request's attributes when the caller may
/// not impersonate.
fn impersonated(id: &Identity, req: &Request) -> Result<Option<Identity>, Box<RequestAttributes>> {
    let headers = req.headers();
    let Some(user) = headers
        .get("impersonate-user")
        .and_then(|v| v.to_str().ok())
    else {
        return Ok(None);
    };
    if !id.groups.iter().any(|g| g == MASTERS) {
        let attrs = RequestAttributes {
            user: id.user.clone(),
            groups: id.groups.clone(),
            verb: "impersonate".into(),
            resource_request: true,
            resource: "users".into(),
            name: user.to_string(),
            ..Default::default()
        };
        return Err(Box::new(attrs));
    }
    let mut groups: Vec<String> = headers
        .get_all("impersonate-group")
        .iter()
        .filter_map(|v| v.to_str().ok().map(String::from))
        .collect();
    if let Some(rest) = user.strip_prefix("system:serviceaccount:")
        && let Some((ns, _)) = rest.split_once(':')
    {
        groups.push("system:serviceaccounts".into());
        groups.push(format!("system:serviceaccounts:{ns}"));
    }
    groups.push("system:authenticated".into());
    Ok(Some(Identity {
        user: user.to_string(),
        groups,
    }))
}

/// Answers a SelfSubjectAccessReview for `id`.
async fn self_subject_access_review(authz: &Authorizer, id: &Identity, req: Request) -> Response {
    let body = match axum::body::to_bytes(req.into_body(), 1 << 20).await {
        Ok(b) => b,
        Err(e) => return ApiError::bad_request(format!("reading body: {e}")).into_response(),
    };
    // kubectl sends built-in kinds as protobuf.
    let parsed = if body.starts_with(b"k8s\0") {
        crate::protobuf::decode(&body)
    } else {
        serde_json::from_slice(&body).map_err(|e| format!("invalid JSON: {e}"))
    };
    let review: Value = match parsed {
        Ok(v) => v,
        Err(e) => {
            return ApiError::bad_request(format!("SelfSubjectAccessReview: {e}")).into_response();
        }
    };
    let spec = &review["spec"];
    let s = |v: &Value, k: &str| v[k].as_str().unwrap_or("").to_string();
    let attrs = if let Some(ra) = spec.get("resourceAttributes").filter(|v| v.is_object()) {
        RequestAttributes {
            user: id.user.clone(),
            groups: id.groups.clone(),
            verb: s(ra, "verb"),
            resource_request: true,
            namespace: s(ra, "namespace"),
            api_group: s(ra, "group"),
            resource: s(ra, "resource"),
            subresource: s(ra, "subresource"),
            name: s(ra, "name"),
            path: String::new(),
        }
    } else if let Some(nra) = spec.get("nonResourceAttributes").filter(|v| v.is_object()) {
        RequestAttributes {
            user: id.user.clone(),
            groups: id.groups.clone(),
            verb: s(nra, "verb"),
            path: s(nra, "path"),
            ..Default::default()
        }
    } else {
        return ApiError::bad_request(
            "SelfSubjectAccessReview spec: exactly one of resourceAttributes or nonResourceAttributes must be set",
        )
        .into_response();
    };
    let allowed = match authz.allowed(&attrs).await {
        Ok(a) => a,
        Err(e) => return e.into_response(),
    };
    // Kubernetes's RBAC authorizer gives no reason on a denial either.
    let status = json!({"allowed": allowed});
    let out = json!({
        "kind": "SelfSubjectAccessReview",
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": {"creationTimestamp": null},
        "spec": spec,
        "status": status,
    });
    (
        http::StatusCode::CREATED,
        [(http::header::CONTENT_TYPE, "application/json")],
        out.to_string(),
    )
        .into_response()
}

/// Middleware: authorizes the request's [`Identity`] (set by the authentication layer;
/// requests without one — health checks — pass through).
pub(crate) async fn authorize_request(
    State(authz): State<Arc<Authorizer>>,
    mut req: Request,
    next: Next,
) -> Response {
    let Some(mut id) = req.extensions().get::<Identity>().cloned() else {
        return next.run(req).await;
    };
    match impersonated(&id, &req) {
        Ok(Some(as_id)) => {
            req.extensions_mut().insert(as_id.clone());
            id = as_id;
        }
        Ok(None) => {}
        Err(attrs) => return forbidden(&attrs),
    }
    let attrs = request_attributes(
        req.method().as_str(),
        req.uri().path(),
        req.uri().query().unwrap_or(""),
        &id.user,
        &id.groups,
    );
    if attrs.resource_request
        && attrs.api_group == "authorization.k8s.io"
        && attrs.resource == "selfsubjectaccessreviews"
        && attrs.verb == "create"
    {
        return self_subject_access_review(&authz, &id, req).await;
    }
    if attrs.resource_request
        && attrs.api_group == "authentication.k8s.io"
        && attrs.resource == "selfsubjectreviews"
        && attrs.verb == "create"
    {
        let version = req
            .uri()
            .path()
            .trim_start_matches("/apis/authentication.k8s.io/")
            .split('/')
            .next()
            .unwrap_or("v1")
            .to_string();
        return self_subject_review(&id, &format!("authentication.k8s.io/{version}"));
    }
    match authz.allowed(&attrs).await {
        Ok(true) => {}
        Ok(false) => {
            tracing::debug!("denied: {}", forbidden_message(&attrs));
            return forbidden(&attrs);
        }
        Err(e) => return e.into_response(),
    }
    let rbac_write = attrs.resource_request
        && attrs.api_group == RBAC_GROUP
        && !matches!(attrs.verb.as_str(), "get" | "list" | "watch");
    let resp = next.run(req).await;
    if rbac_write {
        // The write is committed before the answer: the next request must see it.
        authz.stale.store(true, Ordering::SeqCst);
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(user: &str, groups: &[&str], method: &str, path: &str) -> RequestAttributes {
        let g: Vec<String> = groups.iter().map(|s| s.to_string()).collect();
        request_attributes(method, path, "", user, &g)
    }

    #[test]
    fn authenticated_users_get_discovery_and_self_reviews_only() {
        let sa = ["system:serviceaccounts", "system:authenticated"];
        assert!(default_grant(&attrs(
            "system:serviceaccount:a:b",
            &sa,
            "GET",
            "/apis/platform.kratix.io/v1alpha1"
        )));
        assert!(default_grant(&attrs(
            "system:serviceaccount:a:b",
            &sa,
            "GET",
            "/openapi/v3"
        )));
        assert!(default_grant(&attrs(
            "system:serviceaccount:a:b",
            &sa,
            "POST",
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
        )));
        assert!(!default_grant(&attrs(
            "system:serviceaccount:a:b",
            &sa,
            "GET",
            "/api/v1/namespaces/a/configmaps"
        )));
        assert!(!default_grant(&attrs(
            "system:serviceaccount:a:b",
            &sa,
            "POST",
            "/apis"
        )));
        assert!(!default_grant(&attrs("anonymous", &[], "GET", "/apis")));
    }

    #[test]
    fn forbidden_answer_has_kubernetes_shape() {
        let a = attrs(
            "system:serviceaccount:default:sa",
            &["system:authenticated"],
            "GET",
            "/api/v1/namespaces/default/secrets/s",
        );
        let resp = forbidden(&a);
        assert_eq!(resp.status(), 403);
        assert_eq!(
            forbidden_message(&a),
            "secrets \"s\" is forbidden: User \"system:serviceaccount:default:sa\" cannot get resource \"secrets\" in API group \"\" in the namespace \"default\""
        );
    }
}
