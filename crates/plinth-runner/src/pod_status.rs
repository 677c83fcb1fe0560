//! The one way the runner writes a Pod's status, as a kubelet does.

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use kube::api::{Api, Patch, PatchParams};

use crate::error::{RunnerError, not_found};

/// Writes `status` as the Pod's status: a JSON merge patch of the status subresource
/// that sets every field of `status` and clears the fields it leaves out, so the stored
/// status becomes `status` without reading the Pod first (the runner is the only writer
/// of the status of the Pods it runs, as a kubelet is). A Pod gone meanwhile is not an
/// error.
pub async fn write_pod_status(
    api: &Api<Pod>,
    name: &str,
    status: &PodStatus,
) -> Result<(), RunnerError> {
    let mut body = serde_json::to_value(status)
        .map_err(|e| RunnerError::Config(format!("status of Pod {name}: {e}")))?;
    if let Some(fields) = body.as_object_mut() {
        for f in POD_STATUS_FIELDS {
            fields.entry(f).or_insert(serde_json::Value::Null);
        }
    }
    let patch = serde_json::json!({ "status": body });
    match api
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if not_found(&e) => Ok(()),
        Err(e) => Err(RunnerError::kube(format!("update status of Pod {name}"), e)),
    }
}

/// The fields of a core/v1 PodStatus (cleared by [`write_pod_status`] when unset).
const POD_STATUS_FIELDS: [&str; 17] = [
    "conditions",
    "containerStatuses",
    "ephemeralContainerStatuses",
    "hostIP",
    "hostIPs",
    "initContainerStatuses",
    "message",
    "nominatedNodeName",
    "observedGeneration",
    "phase",
    "podIP",
    "podIPs",
    "qosClass",
    "reason",
    "resize",
    "resourceClaimStatuses",
    "startTime",
];
