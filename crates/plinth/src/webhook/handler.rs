//! The webhook endpoints: one validating path per admitted kind and a mutating path for
//! the kinds with defaulting, kubebuilder's names as Kratix serves them. Each turns an
//! `admission.k8s.io/v1` AdmissionReview into a call of `plinth_apiserver::admission`
//! and its decision back into a response: a denial carries the 422 `Invalid` status
//! with the field causes (the embedded server's message), a defaulting a JSON patch.

use std::sync::Arc;

use axum::Json;
use axum::extract::DefaultBodyLimit;
use kube::api::{Api, DynamicObject};
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview, Operation};
use kube::core::response::StatusDetails;
use kube::core::{ApiResource, GroupVersionKind, Status, response::StatusCause};
use plinth_apiserver::admission::{self, AdmittedKind, Lookup, LookupError};
use serde_json::Value;

/// Largest AdmissionReview accepted (kube-apiserver's request limit is 3 MiB; the
/// review carries the object and the old one).
const MAX_REVIEW_BYTES: usize = 7 * 1024 * 1024;

/// Reads other objects through the operator's client.
#[derive(Clone)]
pub struct KubeLookup {
    client: kube::Client,
}

impl KubeLookup {
    /// A lookup through `client`.
    pub fn new(client: kube::Client) -> KubeLookup {
        KubeLookup { client }
    }

    fn api(&self, kind: &str, plural: &str) -> Api<DynamicObject> {
        let gvk = GroupVersionKind::gvk(plinth_api::GROUP, plinth_api::VERSION, kind);
        Api::all_with(
            self.client.clone(),
            &ApiResource::from_gvk_with_plural(&gvk, plural),
        )
    }
}

fn lookup_err(what: String) -> impl FnOnce(kube::Error) -> LookupError {
    move |e| LookupError {
        what,
        message: plinth_api::kube_error::describe(&e),
    }
}

impl Lookup for KubeLookup {
    async fn destinations(&self) -> Result<Vec<Value>, LookupError> {
        let list = self
            .api("Destination", "destinations")
            .list(&Default::default())
            .await
            .map_err(lookup_err("Destinations".into()))?;
        list.items
            .into_iter()
            .map(|d| {
                serde_json::to_value(d).map_err(|e| LookupError {
                    what: "Destinations".into(),
                    message: e.to_string(),
                })
            })
            .collect()
    }

    async fn store_path(&self, kind: &str, name: &str) -> Result<Option<String>, LookupError> {
        let plural = match kind {
            "BucketStateStore" => "bucketstatestores",
            _ => "gitstatestores",
        };
        let found = self
            .api(kind, plural)
            .get_opt(name)
            .await
            .map_err(lookup_err(format!("{kind} {name:?}")))?;
        Ok(found.and_then(|s| {
            s.data
                .pointer("/spec/path")
                .and_then(Value::as_str)
                .map(str::to_string)
        }))
    }
}

/// The router of every webhook path, answering with `lookup`.
pub fn router<L: Lookup + Send + Sync + 'static>(lookup: Arc<L>) -> axum::Router {
    let mut router = axum::Router::new();
    for kind in admission::KINDS {
        let l = lookup.clone();
        router = router.route(
            &kind.validate_path(),
            axum::routing::post(move |Json(review): Json<AdmissionReview<DynamicObject>>| {
                let l = l.clone();
                async move { Json(to_wire(answer(kind, false, review, l.as_ref()).await)) }
            }),
        );
        if kind.mutates {
            let l = lookup.clone();
            router = router.route(
                &kind.mutate_path(),
                axum::routing::post(move |Json(review): Json<AdmissionReview<DynamicObject>>| {
                    let l = l.clone();
                    async move { Json(to_wire(answer(kind, true, review, l.as_ref()).await)) }
                }),
            );
        }
    }
    router.layer(DefaultBodyLimit::max(MAX_REVIEW_BYTES))
}

/// The review as the API server reads it: `response.patch` base64-encoded, as
/// `admission.k8s.io/v1` defines it (kube's type serializes the bytes as a list).
fn to_wire(review: AdmissionReview<DynamicObject>) -> Value {
    use base64::Engine as _;
    let mut v = serde_json::to_value(&review).unwrap_or_default();
    if let Some(patch) = review.response.as_ref().and_then(|r| r.patch.as_ref()) {
        v["response"]["patch"] =
            Value::String(base64::engine::general_purpose::STANDARD.encode(patch));
    }
    v
}

/// The response to one review: `mutate` answers only the defaulting patch, else the
/// validation of the defaulted object.
pub async fn answer<L: Lookup>(
    kind: AdmittedKind,
    mutate: bool,
    review: AdmissionReview<DynamicObject>,
    lookup: &L,
) -> AdmissionReview<DynamicObject> {
    let req: AdmissionRequest<DynamicObject> = match review.try_into() {
        Ok(r) => r,
        Err(e) => return AdmissionResponse::invalid(e.to_string()).into_review(),
    };
    let response = AdmissionResponse::from(&req);
    if let Some(refusal) = wrong_kind(kind, &req) {
        return response.deny(refusal).into_review();
    }
    let op = match req.operation {
        Operation::Create => admission::Operation::Create,
        Operation::Update => admission::Operation::Update,
        Operation::Delete | Operation::Connect => return response.into_review(),
    };
    let to_value =
        |o: &Option<DynamicObject>| o.as_ref().and_then(|o| serde_json::to_value(o).ok());
    let Some(obj) = to_value(&req.object) else {
        return response.deny("the review carries no object").into_review();
    };
    let old = to_value(&req.old_object);
    let decision = match admission::review(kind.kind, op, &obj, old.as_ref(), lookup).await {
        Ok(d) => d,
        Err(e) => return response.deny(e.to_string()).into_review(),
    };
    if mutate {
        return match response.clone().with_patch(decision.patch) {
            Ok(r) => r.into_review(),
            Err(e) => response.deny(e.to_string()).into_review(),
        };
    }
    if decision.allowed() {
        return response.into_review();
    }
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or(&req.name);
    denied(response, kind, name, decision.causes).into_review()
}

/// Why a review sent to `kind`'s path is refused when it is about another kind (a
/// webhook configuration whose rule points at the wrong path): judging it by this kind's
/// rules, or letting it through unjudged, would both be wrong.
fn wrong_kind(kind: AdmittedKind, req: &AdmissionRequest<DynamicObject>) -> Option<String> {
    if req.kind.group == kind.group && req.kind.kind == kind.kind {
        return None;
    }
    let group = if req.kind.group.is_empty() {
        "core".to_string()
    } else {
        req.kind.group.clone()
    };
    Some(format!(
        "this webhook admits {} ({}); the review is for {} ({group}): check the webhook configuration's rules for {}",
        kind.kind, kind.group, req.kind.kind, req.resource.resource
    ))
}

/// A denial as the embedded server answers it: 422 `Invalid`, its message, the causes.
fn denied(
    response: AdmissionResponse,
    kind: AdmittedKind,
    name: &str,
    causes: Vec<plinth_apiserver::resource::Cause>,
) -> AdmissionResponse {
    let message = admission::invalid_message(kind.group, kind.kind, name, &causes);
    let mut response = response.deny(&message);
    response.result = Status {
        code: 422,
        reason: "Invalid".into(),
        message,
        details: Some(StatusDetails {
            name: name.to_string(),
            group: kind.group.to_string(),
            kind: kind.kind.to_string(),
            causes: causes
                .into_iter()
                .map(|c| StatusCause {
                    reason: c.reason,
                    message: c.message,
                    field: c.field,
                })
                .collect(),
            uid: String::new(),
            retry_after_seconds: 0,
        }),
        ..Status::failure("", "Invalid")
    };
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A cluster with no Destinations and no state stores.
    struct Empty;

    impl Lookup for Empty {
        async fn destinations(&self) -> Result<Vec<Value>, LookupError> {
            Ok(Vec::new())
        }
        async fn store_path(&self, _: &str, _: &str) -> Result<Option<String>, LookupError> {
            Ok(None)
        }
    }

    fn admitted(name: &str) -> AdmittedKind {
        *admission::KINDS.iter().find(|k| k.kind == name).unwrap()
    }

    /// A CREATE review as kube-apiserver sends it, for `object` of `group`/`kind`.
    fn review(
        group: &str,
        kind: &str,
        resource: &str,
        object: Value,
    ) -> AdmissionReview<DynamicObject> {
        let gvk = json!({"group": group, "version": "v1alpha1", "kind": kind});
        serde_json::from_value(json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "d2b1c0a6-0000-4000-8000-000000000001",
                "kind": gvk, "requestKind": gvk,
                "resource": {"group": group, "version": "v1alpha1", "resource": resource},
                "requestResource": {"group": group, "version": "v1alpha1", "resource": resource},
                "name": object["metadata"]["name"], "operation": "CREATE",
                "userInfo": {"username": "kubernetes-admin"},
                "object": object, "dryRun": false,
            }
        }))
        .unwrap()
    }

    fn verdict(r: &AdmissionReview<DynamicObject>) -> (bool, String) {
        let resp = r.response.as_ref().expect("a response");
        (resp.allowed, resp.result.message.clone())
    }

    fn destination(name: &str) -> Value {
        json!({"apiVersion": "platform.kratix.io/v1alpha1", "kind": "Destination",
               "metadata": {"name": name},
               "spec": {"stateStoreRef": {"kind": "GitStateStore", "name": "default"}}})
    }

    #[tokio::test]
    async fn a_review_of_another_kind_is_refused_naming_both_kinds() {
        // A Destination review sent to the Promise path: refused, not judged by the
        // Promise rules nor let through.
        let r = answer(
            admitted("Promise"),
            false,
            review(
                "platform.kratix.io",
                "Destination",
                "destinations",
                destination("d1"),
            ),
            &Empty,
        )
        .await;
        let (allowed, message) = verdict(&r);
        assert!(!allowed, "{message}");
        assert!(
            message.contains("this webhook admits Promise (platform.kratix.io)")
                && message.contains("the review is for Destination (platform.kratix.io)")
                && message.contains("rules for destinations"),
            "{message}"
        );
        // A core kind names its group as kubectl does.
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        let r = answer(
            admitted("Promise"),
            true,
            review("", "ConfigMap", "configmaps", cm),
            &Empty,
        )
        .await;
        let (allowed, message) = verdict(&r);
        assert!(
            !allowed && message.contains("ConfigMap (core)"),
            "{message}"
        );
    }

    #[tokio::test]
    async fn a_review_of_the_paths_own_kind_is_judged_by_its_rules() {
        let judged = |d: Value| async move {
            let r = answer(
                admitted("Destination"),
                false,
                review("platform.kratix.io", "Destination", "destinations", d),
                &Empty,
            )
            .await;
            verdict(&r)
        };
        let mut with_path = destination("d1");
        with_path["spec"]["path"] = json!("dev");
        let (allowed, message) = judged(with_path).await;
        assert!(allowed, "{message}");
        let (allowed, message) = judged(destination("d2")).await;
        assert!(
            !allowed && message.contains("spec.path: Required value"),
            "{message}"
        );
    }
}
