//! Discovery (`/api`, `/apis`, resource lists), OpenAPI v3, version and health probes.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::{StatusCode, header};
use serde_json::{Value, json};

use crate::app::{App, AppRef, json_response, not_found_path};
use crate::resource::ResourceInfo;

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
        let storage = app.registry.storage_of(&i.group, &i.plural);
        let storage_version = storage
            .as_ref()
            .map_or(i.version.as_str(), |s| s.version.as_str());
        r["storageVersionHash"] = json!(storage_version_hash(&i.group, storage_version, &i.kind));
        res.push(r);
        if i.status_subresource {
            res.push(json!({"name": format!("{}/status", i.plural), "singularName": "", "namespaced": i.namespaced, "kind": i.kind, "verbs": ["get", "patch", "update"]}));
        }
        if app
            .registry
            .scale_of(&i.group, &i.version, &i.plural)
            .is_some()
        {
            res.push(json!({"name": format!("{}/scale", i.plural), "singularName": "", "namespaced": i.namespaced, "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": ["get", "patch", "update"]}));
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

/// `/openapi/v2`: as JSON, the Swagger 2.0 form of the `/openapi/v3` documents (every
/// served kind's definitions with their descriptions, and the paths); as protobuf (what
/// kubectl asks for, and reads only for an object whose group/version v3 does not list,
/// i.e. a kind that does not exist) a document with no definitions, so kubectl skips
/// client-side validation and reports the kind as unknown ("no matches for kind ...
/// ensure CRDs are installed first"), as it does against a Kubernetes API server.
pub(crate) async fn openapi_v2(State(app): State<AppRef>, headers: http::HeaderMap) -> Response {
    let wants_proto = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| {
            v.contains(crate::openapi::V2_PROTOBUF_ACCEPT)
                || v.contains(crate::openapi::V2_PROTOBUF_CONTENT_TYPE)
        });
    if wants_proto {
        (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                crate::openapi::V2_PROTOBUF_CONTENT_TYPE,
            )],
            crate::openapi::v2_empty_protobuf(),
        )
            .into_response()
    } else {
        json_ok(crate::openapi::v2_json(&app.registry.all()))
    }
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

/// `/readyz`: 200 once the server (and whoever started it) is ready, 503 before.
pub(crate) async fn readyz(State(app): State<AppRef>) -> Response {
    if app.ready.load(std::sync::atomic::Ordering::Acquire) {
        healthz().await
    } else {
        let body = "not ready: the platform is still registering its resources";
        (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::CONTENT_TYPE, "text/plain")],
            body,
        )
            .into_response()
    }
}

pub(crate) async fn healthz() -> Response {
    (StatusCode::OK, [(header::CONTENT_TYPE, "text/plain")], "ok").into_response()
}

/// kube-apiserver's `storageVersionHash` of a resource: the first 8 bytes of the SHA-256 of
/// `group/version/kind` of its storage version, base64. Clients compare it to notice a
/// storage version change; it is the same on every server for the same storage version.
pub(crate) fn storage_version_hash(group: &str, version: &str, kind: &str) -> String {
    use base64::Engine;
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(format!("{group}/{version}/{kind}").as_bytes());
    base64::engine::general_purpose::STANDARD.encode(&digest[..8])
}

#[cfg(test)]
mod tests {
    #[test]
    fn storage_version_hashes_are_kube_apiservers() {
        // The values a kube-apiserver lists in /api/v1 and /apis/apps/v1.
        assert_eq!(
            super::storage_version_hash("", "v1", "ConfigMap"),
            "qFsyl6wFWjQ="
        );
        assert_eq!(super::storage_version_hash("", "v1", "Pod"), "xPOwRZ+Yhw8=");
        assert_eq!(
            super::storage_version_hash("apps", "v1", "Deployment"),
            "8aSe+NMegvE="
        );
    }
}
