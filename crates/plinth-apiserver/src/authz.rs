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
//!   sends), `SubjectAccessReview` and `LocalSubjectAccessReview` (about the subject
//!   their spec names; creating them is authorized like any create) are answered here
//!   from the same snapshot, and `SelfSubjectReview` (authentication.k8s.io/v1,
//!   `kubectl auth whoami`) from the request's identity.
//! * Impersonation (`Impersonate-User`, `-Group`, `-Uid`, `-Extra-*` headers, `kubectl
//!   --as`) as kube-apiserver checks it: the requester needs `impersonate` on each user
//!   (or ServiceAccount), group, uid and extra it names; the request is then authorized
//!   as the impersonated user, who also gets `system:authenticated`.
//! * `ServerConfig::always_allow` (kept as `App::always_allow`) is kube-apiserver's `--authorization-mode=RBAC,AlwaysAllow`:
//!   what RBAC does not allow is allowed (upstream's kubectl test environment).
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
    GROUP as RBAC_GROUP, MASTERS_GROUP as MASTERS, RbacSnapshot, RequestAttributes,
    authenticated_rules, authorize, forbidden_message, request_attributes, rule_allows,
};
use crate::registry::rkey;

const RBAC_PLURALS: [&str; 4] = [
    "roles",
    "clusterroles",
    "rolebindings",
    "clusterrolebindings",
];

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
        let snap = stored_snapshot(&self.app.store).await.inspect_err(|_| {
            self.stale.store(true, Ordering::SeqCst);
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
        Ok(authorize(attrs, &*self.snapshot().await?).allowed() || self.app.always_allow)
    }
}

/// The stored Roles, ClusterRoles and their bindings, read now (aggregated ClusterRoles
/// with the rules they hold).
///
/// # Errors
/// 500 when the store cannot be read or holds an RBAC object that does not decode.
pub(crate) async fn stored_snapshot(store: &crate::store::Store) -> Result<RbacSnapshot, ApiError> {
    let mut lists = Vec::with_capacity(4);
    for p in RBAC_PLURALS {
        let objects = store
            .all_of(rkey(RBAC_GROUP, p))
            .await
            .map_err(|e| ApiError::internal(format!("reading RBAC objects: {e}")))?;
        lists.push(objects);
    }
    RbacSnapshot::from_values(&lists[0], &lists[1], &lists[2], &lists[3])
        .map_err(|e| ApiError::internal(format!("decoding stored RBAC objects: {e}")))
}

/// Kubernetes's bootstrap bindings for `system:authenticated`: discovery and public
/// info (`system:discovery`, `system:public-info-viewer`) and self-reviews
/// (`system:basic-user`).
fn default_grant(a: &RequestAttributes) -> bool {
    a.groups.iter().any(|g| g == "system:authenticated")
        && authenticated_rules().iter().any(|r| rule_allows(r, a))
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
/// `Impersonate-Group`, `Impersonate-Uid`, `Impersonate-Extra-<key>`), checked as
/// kube-apiserver checks them: the requester needs `impersonate` on each `users` (or
/// `serviceaccounts`), `groups`, `uids` and `userextras/<key>` it names; groups or a uid
/// without a user are refused. `Err` is the 403 to answer.
async fn impersonated(
    authz: &Authorizer,
    id: &Identity,
    headers: &http::HeaderMap,
) -> Result<Option<Identity>, Response> {
    let values = |name: &str| -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok().map(String::from))
            .collect()
    };
    let user = values("impersonate-user").into_iter().next();
    let groups = values("impersonate-group");
    let uid = values("impersonate-uid").into_iter().next();
    let mut extra: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for (name, v) in headers {
        if let Some(key) = name.as_str().strip_prefix("impersonate-extra-")
            && let Ok(v) = v.to_str()
        {
            let key = percent_decode(key);
            extra.entry(key).or_default().push(v.to_string());
        }
    }
    let Some(user) = user else {
        if groups.is_empty() && uid.is_none() && extra.is_empty() {
            return Ok(None);
        }
        let refs: Vec<String> = groups
            .iter()
            .map(|g| format!("{{Group  {g}  authentication.k8s.io/v1  }}"))
            .collect();
        let e = ApiError::new(
            403,
            "Forbidden",
            format!(
                "requested [{}] without impersonating a user",
                refs.join(" ")
            ),
        );
        return Err(e.into_response());
    };
    // What the requester must be allowed to impersonate, as kube-apiserver asks it.
    let mut asks: Vec<RequestAttributes> = Vec::new();
    let ask = |resource: &str, sub: &str, group: &str, ns: &str, name: &str| RequestAttributes {
        user: id.user.clone(),
        groups: id.groups.clone(),
        verb: "impersonate".into(),
        resource_request: true,
        api_group: group.into(),
        resource: resource.into(),
        subresource: sub.into(),
        namespace: ns.into(),
        name: name.into(),
        path: String::new(),
    };
    let sa = user
        .strip_prefix("system:serviceaccount:")
        .and_then(|r| r.split_once(':'));
    match sa {
        Some((ns, name)) => asks.push(ask("serviceaccounts", "", "", ns, name)),
        None => asks.push(ask("users", "", "", "", &user)),
    }
    for g in &groups {
        asks.push(ask("groups", "", "", "", g));
    }
    if let Some(u) = &uid {
        asks.push(ask("uids", "", "authentication.k8s.io", "", u));
    }
    for (k, vs) in &extra {
        for v in vs {
            asks.push(ask("userextras", k, "authentication.k8s.io", "", v));
        }
    }
    for a in &asks {
        match authz.allowed(a).await {
            Ok(true) => {}
            Ok(false) => return Err(forbidden(a)),
            Err(e) => return Err(e.into_response()),
        }
    }
    let mut all_groups = groups;
    if let Some((ns, _)) = sa {
        all_groups.push("system:serviceaccounts".into());
        all_groups.push(format!("system:serviceaccounts:{ns}"));
    }
    if user != "system:anonymous" && !all_groups.iter().any(|g| g == "system:authenticated") {
        all_groups.push("system:authenticated".into());
    }
    Ok(Some(Identity {
        user,
        groups: all_groups,
        uid: uid.unwrap_or_default(),
        extra,
    }))
}

/// `%XX` escapes decoded (impersonated extra keys are percent-encoded in header names).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Ok(v) = u8::from_str_radix(&s[i + 1..i + 3], 16)
        {
            out.push(v);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Which access review a request creates.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Review {
    /// `SelfSubjectAccessReview`: about the requester.
    SelfSubject,
    /// `SubjectAccessReview` (cluster-scoped): about the subject its spec names.
    Subject,
    /// `LocalSubjectAccessReview` in this namespace: about the spec's subject, for
    /// resources of that namespace only.
    Local,
}

impl Review {
    fn kind(self) -> &'static str {
        match self {
            Review::SelfSubject => "SelfSubjectAccessReview",
            Review::Subject => "SubjectAccessReview",
            Review::Local => "LocalSubjectAccessReview",
        }
    }

    fn of(attrs: &RequestAttributes) -> Option<Review> {
        if !attrs.resource_request || attrs.api_group != "authorization.k8s.io" {
            return None;
        }
        match attrs.resource.as_str() {
            "selfsubjectaccessreviews" => Some(Review::SelfSubject),
            "subjectaccessreviews" => Some(Review::Subject),
            "localsubjectaccessreviews" => Some(Review::Local),
            _ => None,
        }
    }
}

/// kube-apiserver's 422 for an access review whose spec breaks its rules.
fn invalid_review(review: Review, field: &str, value: &Value, why: &str) -> ApiError {
    let message = format!("Invalid value: {}: {why}", go_print(value));
    ApiError {
        code: 422,
        reason: "Invalid",
        message: format!(
            "{}.authorization.k8s.io \"\" is invalid: {field}: {message}",
            review.kind()
        ),
        details: Some(json!({
            "group": "authorization.k8s.io", "kind": review.kind(),
            "causes": [{"reason": "FieldValueInvalid", "message": message, "field": field}],
        })),
    }
}

/// A value as kube-apiserver's `Invalid value` prints it: a string quoted, a missing
/// struct `null`, a struct as its JSON.
fn go_print(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

/// Answers an access review: a `SelfSubjectAccessReview` about `id`, a
/// `SubjectAccessReview` or `LocalSubjectAccessReview` (in `namespace`) about the user and
/// groups its spec names, evaluated by the same RBAC snapshot as every request. The
/// answer is 201 with the review and its `status.allowed`, as kube-apiserver's.
async fn access_review(
    authz: &Authorizer,
    id: &Identity,
    req: Request,
    review: Review,
    namespace: &str,
) -> Response {
    let pretty = crate::app::pretty_requested(req.headers(), req.uri().query());
    let answer = async {
        let mut spec = read_review(req, review).await?["spec"].take();
        if spec.is_null() {
            spec = json!({});
        }
        let (user, groups) = review_subject(id, review, &spec)?;
        check_review_target(review, &mut spec, namespace)?;
        let attrs = review_attributes(&spec, user, groups);
        let allowed = authz.allowed(&attrs).await?;
        Ok::<_, ApiError>(review_answer(review, namespace, spec, allowed, pretty))
    };
    answer
        .await
        .unwrap_or_else(|refused| refused.into_response())
}

/// The review in the request body, JSON or protobuf (kubectl sends built-in kinds as
/// protobuf); `Err` is the 400 to answer.
async fn read_review(req: Request, review: Review) -> Result<Value, ApiError> {
    let body = axum::body::to_bytes(req.into_body(), 1 << 20)
        .await
        .map_err(|e| ApiError::bad_request(format!("reading body: {e}")))?;
    let parsed = if body.starts_with(b"k8s\0") {
        crate::protobuf::decode(&body).map_err(|e| e.to_string())
    } else {
        serde_json::from_slice(&body).map_err(|e| format!("invalid JSON: {e}"))
    };
    parsed.map_err(|e| ApiError::bad_request(format!("{}: {e}", review.kind())))
}

fn str_field(v: &Value, k: &str) -> String {
    v[k].as_str().unwrap_or("").to_string()
}

/// Whom the review asks about: the requester for a self review, else the spec's user and
/// groups (at least one of them).
fn review_subject(
    id: &Identity,
    review: Review,
    spec: &Value,
) -> Result<(String, Vec<String>), ApiError> {
    if review == Review::SelfSubject {
        return Ok((id.user.clone(), id.groups.clone()));
    }
    let groups: Vec<String> = crate::validation::str_items(&spec["groups"])
        .into_iter()
        .map(String::from)
        .collect();
    let user = str_field(spec, "user");
    if user.is_empty() && groups.is_empty() {
        return Err(invalid_review(
            review,
            "spec.user",
            &json!(""),
            "at least one of user or group must be specified",
        ));
    }
    Ok((user, groups))
}

/// Exactly one of resource and non-resource attributes; a local review is about a
/// resource in its own namespace (filled in when the spec leaves it out).
fn check_review_target(review: Review, spec: &mut Value, namespace: &str) -> Result<(), ApiError> {
    let object = |k: &str| spec.get(k).filter(|v| v.is_object()).cloned();
    let (ra, nra) = (
        object("resourceAttributes"),
        object("nonResourceAttributes"),
    );
    match (&ra, &nra) {
        (Some(_), Some(n)) => {
            return Err(invalid_review(
                review,
                "spec.nonResourceAttributes",
                n,
                "cannot be specified in combination with resourceAttributes",
            ));
        }
        (None, None) => {
            return Err(invalid_review(
                review,
                "spec.resourceAttributes",
                &Value::Null,
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            ));
        }
        _ => {}
    }
    if review != Review::Local {
        return Ok(());
    }
    if let Some(n) = &nra {
        return Err(invalid_review(
            review,
            "spec.nonResourceAttributes",
            n,
            "disallowed on this kind of request",
        ));
    }
    let ns = ra
        .as_ref()
        .map(|r| str_field(r, "namespace"))
        .unwrap_or_default();
    if ns.is_empty() {
        spec["resourceAttributes"]["namespace"] = json!(namespace);
    } else if ns != namespace {
        return Err(ApiError::bad_request(format!(
            "spec.resourceAttributes.namespace must match namespace: {namespace}"
        )));
    }
    Ok(())
}

/// The request a checked review describes, as the authorizer reads requests.
fn review_attributes(spec: &Value, user: String, groups: Vec<String>) -> RequestAttributes {
    if let Some(ra) = spec.get("resourceAttributes").filter(|v| v.is_object()) {
        return RequestAttributes {
            user,
            groups,
            verb: str_field(ra, "verb"),
            resource_request: true,
            namespace: str_field(ra, "namespace"),
            api_group: str_field(ra, "group"),
            resource: str_field(ra, "resource"),
            subresource: str_field(ra, "subresource"),
            name: str_field(ra, "name"),
            path: String::new(),
        };
    }
    let nra = &spec["nonResourceAttributes"];
    RequestAttributes {
        user,
        groups,
        verb: str_field(nra, "verb"),
        path: str_field(nra, "path"),
        ..Default::default()
    }
}

/// 201 with the review and its `status.allowed` (Kubernetes' RBAC authorizer gives no
/// reason on a denial either).
fn review_answer(
    review: Review,
    namespace: &str,
    spec: Value,
    allowed: bool,
    pretty: bool,
) -> Response {
    let mut metadata = json!({"creationTimestamp": null});
    if review == Review::Local {
        metadata["namespace"] = json!(namespace);
    }
    let out = json!({
        "kind": review.kind(),
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": metadata,
        "spec": spec,
        "status": {"allowed": allowed},
    });
    let text = if pretty {
        serde_json::to_string_pretty(&out).unwrap_or_default()
    } else {
        out.to_string()
    };
    (
        http::StatusCode::CREATED,
        [(http::header::CONTENT_TYPE, "application/json")],
        text,
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
    let impersonating = req
        .headers()
        .keys()
        .any(|k| k.as_str().starts_with("impersonate-"));
    let headers = if impersonating {
        req.headers().clone()
    } else {
        http::HeaderMap::new()
    };
    match impersonated(&authz, &id, &headers).await {
        Ok(Some(as_id)) => {
            req.extensions_mut().insert(as_id.clone());
            id = as_id;
        }
        Ok(None) => {}
        Err(refused) => return refused,
    }
    let attrs = request_attributes(
        req.method().as_str(),
        req.uri().path(),
        req.uri().query().unwrap_or(""),
        &id.user,
        &id.groups,
    );
    let review = Review::of(&attrs);
    if review.is_some() && attrs.verb != "create" {
        return ApiError::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
        .into_response();
    }
    if review == Some(Review::SelfSubject) {
        return access_review(&authz, &id, req, Review::SelfSubject, "").await;
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
    if let Some(r) = review {
        return access_review(&authz, &id, req, r, &attrs.namespace).await;
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
