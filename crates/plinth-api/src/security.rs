//! Security defaults of pipeline Pods, shared by every builder of them (the controllers'
//! workflow Jobs and the health agent's CronJobs) so the two cannot drift apart.
//!
//! * [`injected_container`]: the context of the containers Plinth injects (reader,
//!   work-writer, status-writer, health-state-creator): no privilege escalation, every
//!   capability dropped, not privileged, non-root, seccomp `RuntimeDefault`, read-only
//!   root filesystem (they write only to their `emptyDir` mounts). A cluster-wide
//!   default context (the kratix ConfigMap's `workflows.defaultContainerSecurityContext`)
//!   is kept underneath, so a policy that demands more of every container (e.g.
//!   `runAsUser`) is met; the hardened fields always win.
//! * [`health_pod`]: the Pod-level context of a health check: `runAsNonRoot: true` and
//!   seccomp `RuntimeDefault`, as SKE's health agent documents. A container's own
//!   `securityContext` overrides it field by field (Kubernetes' precedence), so a check
//!   that must run as root says so in its container. Workflow Pods have no Pod-level
//!   context, as in Kratix, so existing pipelines that run as root keep running.
use serde_json::{Value, json};

/// The hardened `securityContext` of an injected container, over `base` (a cluster
/// default; ignored unless it is a JSON object).
pub fn injected_container(base: Option<&Value>) -> Value {
    let mut sc = base
        .filter(|b| b.is_object())
        .cloned()
        .unwrap_or_else(|| json!({}));
    for (k, v) in [
        ("allowPrivilegeEscalation", json!(false)),
        ("capabilities", json!({"drop": ["ALL"]})),
        ("privileged", json!(false)),
        ("readOnlyRootFilesystem", json!(true)),
        ("runAsNonRoot", json!(true)),
        ("seccompProfile", json!({"type": "RuntimeDefault"})),
    ] {
        sc[k] = v;
    }
    sc
}

/// The Pod-level `securityContext` of a health check's Pod.
pub fn health_pod() -> Value {
    json!({"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn injected_fields_win_over_the_cluster_default_and_other_fields_stay() {
        let base =
            json!({"runAsNonRoot": false, "runAsUser": 1000, "readOnlyRootFilesystem": false});
        let sc = injected_container(Some(&base));
        assert_eq!(sc["runAsNonRoot"], true);
        assert_eq!(sc["readOnlyRootFilesystem"], true);
        assert_eq!(sc["runAsUser"], 1000);
        assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]));
        assert_eq!(sc["seccompProfile"]["type"], "RuntimeDefault");
        assert_eq!(
            injected_container(Some(&json!("not an object"))),
            injected_container(None)
        );
    }

    #[test]
    fn a_health_pod_defaults_to_non_root_with_the_runtime_seccomp_profile() {
        let p = health_pod();
        assert_eq!(p["runAsNonRoot"], true);
        assert_eq!(p["seccompProfile"]["type"], "RuntimeDefault");
    }
}
