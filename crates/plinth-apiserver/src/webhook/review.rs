//! The `admission.k8s.io/v1` AdmissionReview a webhook receives, the checks of its
//! answer (kube-apiserver's rules: same uid, `patch` only with `patchType: JSONPatch`
//! and only from a mutating webhook), and a denial as the API error kube-apiserver
//! answers: `admission webhook "<name>" denied the request: <message>`, with the code,
//! reason and details (field causes) of the webhook's `status`.

use base64::Engine;
use serde::Deserialize;
use serde_json::{Value, json};

use super::attributes::Attributes;
use super::client::CallError;
use crate::error::ApiError;

/// The AdmissionReview for one call (`uid` fresh per call).
pub(super) fn request(
    attrs: &Attributes<'_>,
    uid: &str,
    new: Option<&Value>,
    old: Option<&Value>,
) -> Value {
    let info = attrs.info;
    let user = attrs.user();
    let kind = json!({"group": info.group, "version": info.version, "kind": info.kind});
    let resource = json!({"group": info.group, "version": info.version, "resource": info.plural});
    let mut options = json!({
        "apiVersion": "meta.k8s.io/v1",
        "kind": attrs.operation.options_kind(),
    });
    if attrs.dry_run {
        options["dryRun"] = json!(["All"]);
    }
    if let Some(m) = attrs.field_manager {
        options["fieldManager"] = json!(m);
    }
    let mut req = json!({
        "uid": uid,
        "kind": kind,
        "resource": resource,
        "requestKind": kind,
        "requestResource": resource,
        "name": attrs.name,
        "operation": attrs.operation.as_str(),
        "userInfo": {
            "username": user.user,
            "uid": user.uid,
            "groups": user.groups,
            "extra": user.extra,
        },
        "object": new.cloned().unwrap_or(Value::Null),
        "oldObject": old.cloned().unwrap_or(Value::Null),
        "dryRun": attrs.dry_run,
        "options": options,
    });
    let sub = attrs.subresource();
    if !sub.is_empty() {
        req["subResource"] = json!(sub);
        req["requestSubResource"] = json!(sub);
    }
    if !attrs.namespace.is_empty() {
        req["namespace"] = json!(attrs.namespace);
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req})
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Review {
    api_version: Option<String>,
    kind: Option<String>,
    response: Option<Response>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Response {
    #[serde(default)]
    uid: String,
    #[serde(default)]
    allowed: bool,
    status: Option<Value>,
    patch: Option<String>,
    patch_type: Option<String>,
    #[serde(default)]
    warnings: Vec<String>,
}

/// What a webhook answered, checked.
pub(super) struct Verdict {
    /// `allowed`.
    pub allowed: bool,
    /// `status` (the reason of a denial).
    pub status: Option<Value>,
    /// The decoded JSONPatch, when one was sent.
    pub patch: Option<json_patch::Patch>,
    /// `warnings`.
    pub warnings: Vec<String>,
}

/// Checks a response body against the request's `uid`.
///
/// # Errors
/// [`CallError::InvalidResponse`] naming what is wrong.
pub(super) fn verify(body: Value, uid: &str, mutating: bool) -> Result<Verdict, CallError> {
    let bad = |m: String| CallError::InvalidResponse(m);
    let review: Review =
        serde_json::from_value(body).map_err(|e| bad(format!("not an AdmissionReview: {e}")))?;
    let (av, kind) = (
        review.api_version.unwrap_or_default(),
        review.kind.unwrap_or_default(),
    );
    if av != "admission.k8s.io/v1" || kind != "AdmissionReview" {
        return Err(bad(format!(
            "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {av}, Kind={kind}"
        )));
    }
    let r = review
        .response
        .ok_or_else(|| bad("webhook response was absent".into()))?;
    if r.uid != uid {
        return Err(bad(format!(
            "expected response.uid={uid:?}, got {:?}",
            r.uid
        )));
    }
    let patch = match (r.patch.filter(|p| !p.is_empty()), r.patch_type) {
        (None, None) => None,
        (Some(_), _) if !mutating => {
            return Err(bad(
                "validating webhook may not return response.patch".into()
            ));
        }
        (Some(_), None) => {
            return Err(bad(
                "webhook returned response.patch but not response.patchType".into(),
            ));
        }
        (None, Some(_)) => {
            return Err(bad(
                "webhook returned response.patchType but not response.patch".into(),
            ));
        }
        (Some(p), Some(t)) if t == "JSONPatch" => Some(decode_patch(&p)?),
        (Some(_), Some(t)) => {
            return Err(bad(format!(
                "webhook returned invalid response.patchType of {t:?}"
            )));
        }
    };
    Ok(Verdict {
        allowed: r.allowed,
        status: r.status,
        patch,
        warnings: r.warnings,
    })
}

fn decode_patch(p: &str) -> Result<json_patch::Patch, CallError> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(p)
        .map_err(|e| CallError::InvalidResponse(format!("response.patch is not base64: {e}")))?;
    serde_json::from_slice(&bytes).map_err(|e| {
        CallError::InvalidResponse(format!(
            "received undecodable patch in webhook response: {e}"
        ))
    })
}

/// A denial as the API error: the webhook's status code (at least 400), reason and
/// details, its message prefixed with `admission webhook "<name>" denied the request`.
pub(super) fn denial(hook_name: &str, status: Option<&Value>) -> ApiError {
    let denied_by = format!("admission webhook {hook_name:?} denied the request");
    let field = |k: &str| {
        status
            .and_then(|s| s.get(k))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let message = match (field("message"), field("reason")) {
        (Some(m), _) => format!("{denied_by}: {m}"),
        (None, Some(r)) => format!("{denied_by}: {r}"),
        (None, None) => format!("{denied_by} without explanation"),
    };
    let code = status
        .and_then(|s| s.get("code"))
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| (400..600).contains(c))
        .unwrap_or(400);
    ApiError {
        code,
        reason: known_reason(field("reason").unwrap_or_default()),
        message,
        details: status.and_then(|s| s.get("details")).cloned(),
    }
}

/// A call failure under `failurePolicy: Fail`: 500 InternalError, as kube-apiserver
/// answers (`Internal error occurred: failed calling webhook "<name>": <cause>`).
pub(super) fn failed_call(hook_name: &str, e: &CallError) -> ApiError {
    let cause = format!("failed calling webhook {hook_name:?}: {e}");
    ApiError {
        code: 500,
        reason: "InternalError",
        message: format!("Internal error occurred: {cause}"),
        details: Some(json!({"causes": [{"message": cause}]})),
    }
}

/// The Kubernetes `StatusReason`s clients know; another reason is answered empty.
fn known_reason(r: &str) -> &'static str {
    const REASONS: [&str; 18] = [
        "Unauthorized",
        "Forbidden",
        "NotFound",
        "AlreadyExists",
        "Conflict",
        "Gone",
        "Invalid",
        "ServerTimeout",
        "Timeout",
        "TooManyRequests",
        "BadRequest",
        "MethodNotAllowed",
        "NotAcceptable",
        "RequestEntityTooLarge",
        "UnsupportedMediaType",
        "InternalError",
        "Expired",
        "ServiceUnavailable",
    ];
    REASONS.iter().find(|k| **k == r).copied().unwrap_or("")
}
