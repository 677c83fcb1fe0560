//! Readiness of applied objects, judged the way kstatus does: a Deployment is ready when
//! its rollout is observed and available, a Job when complete, a StatefulSet / DaemonSet /
//! ReplicaSet when all replicas are ready, a PersistentVolumeClaim when bound, anything
//! with a `Ready` condition by that condition, and anything else once it exists.
//! On the embedded server, kinds whose controllers only a real cluster runs are `Unknown`
//! with "no controller in embedded mode" instead of pretending.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// kstatus-style readiness.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Readiness {
    /// Reconciled and ready (kstatus `Current`).
    Ready,
    /// Being reconciled (kstatus `InProgress`).
    InProgress,
    /// Failed (kstatus `Failed`).
    Failed,
    /// Cannot be judged.
    Unknown,
}

impl Readiness {
    /// `Ready`, `InProgress`, `Failed` or `Unknown`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Readiness::Ready => "Ready",
            Readiness::InProgress => "InProgress",
            Readiness::Failed => "Failed",
            Readiness::Unknown => "Unknown",
        }
    }
}

/// Message of kinds nothing reconciles on the embedded server.
pub const NO_CONTROLLER: &str = "no controller in embedded mode";

/// Kinds whose controllers run only on a real cluster (the embedded server stores them).
const CONTROLLER_KINDS: &[(&str, &str)] = &[
    ("apps", "Deployment"),
    ("apps", "StatefulSet"),
    ("apps", "DaemonSet"),
    ("apps", "ReplicaSet"),
    ("", "ReplicationController"),
    ("", "Service"),
    ("", "PersistentVolumeClaim"),
    ("batch", "CronJob"),
    ("autoscaling", "HorizontalPodAutoscaler"),
    ("policy", "PodDisruptionBudget"),
    ("networking.k8s.io", "Ingress"),
];

fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or("")
}

fn i(v: &Value, p: &str) -> i64 {
    v.pointer(p).and_then(|x| x.as_i64()).unwrap_or(0)
}

fn condition<'a>(v: &'a Value, t: &str) -> Option<&'a Value> {
    v.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == t)
}

fn cond_true(v: &Value, t: &str) -> bool {
    condition(v, t).is_some_and(|c| c["status"] == "True")
}

/// Judges a live object. `embedded` is true when the target is Plinth's embedded server.
pub fn judge(live: &Value, embedded: bool) -> (Readiness, String) {
    let av = live["apiVersion"].as_str().unwrap_or_default();
    let kind = live["kind"].as_str().unwrap_or_default();
    let group = group_of(av);
    if embedded && CONTROLLER_KINDS.contains(&(group, kind)) {
        return (Readiness::Unknown, NO_CONTROLLER.into());
    }
    let generation = i(live, "/metadata/generation");
    let observed = live
        .pointer("/status/observedGeneration")
        .and_then(|x| x.as_i64());
    if observed.is_some_and(|o| o < generation) {
        return (
            Readiness::InProgress,
            "waiting for the controller to observe the latest generation".into(),
        );
    }
    match (group, kind) {
        ("apps", "Deployment") => {
            let want = live
                .pointer("/spec/replicas")
                .and_then(|x| x.as_i64())
                .unwrap_or(1);
            let updated = i(live, "/status/updatedReplicas");
            let avail = i(live, "/status/availableReplicas");
            if cond_true(live, "Available") && updated >= want && avail >= want {
                (
                    Readiness::Ready,
                    format!("{avail}/{want} replicas available"),
                )
            } else {
                (
                    Readiness::InProgress,
                    format!("{avail}/{want} replicas available, {updated} updated"),
                )
            }
        }
        ("apps", "StatefulSet") | ("apps", "ReplicaSet") | ("apps", "DaemonSet") => {
            let (want, ready) = if kind == "DaemonSet" {
                (
                    i(live, "/status/desiredNumberScheduled"),
                    i(live, "/status/numberReady"),
                )
            } else {
                (
                    live.pointer("/spec/replicas")
                        .and_then(|x| x.as_i64())
                        .unwrap_or(1),
                    i(live, "/status/readyReplicas"),
                )
            };
            let r = if ready >= want {
                Readiness::Ready
            } else {
                Readiness::InProgress
            };
            (r, format!("{ready}/{want} ready"))
        }
        ("batch", "Job") => {
            if cond_true(live, "Complete") {
                (Readiness::Ready, "complete".into())
            } else if cond_true(live, "Failed") {
                let m = condition(live, "Failed")
                    .and_then(|c| c["message"].as_str())
                    .unwrap_or("");
                (Readiness::Failed, format!("failed: {m}"))
            } else {
                (Readiness::InProgress, "running".into())
            }
        }
        ("", "PersistentVolumeClaim") => {
            match live.pointer("/status/phase").and_then(|p| p.as_str()) {
                Some("Bound") => (Readiness::Ready, "bound".into()),
                Some(p) => (Readiness::InProgress, format!("phase {p}")),
                None => (Readiness::InProgress, "not bound yet".into()),
            }
        }
        ("", "Namespace") => match live.pointer("/status/phase").and_then(|p| p.as_str()) {
            Some("Terminating") => (Readiness::InProgress, "terminating".into()),
            _ => (Readiness::Ready, String::new()),
        },
        _ => match condition(live, "Ready") {
            Some(c) if c["status"] == "True" => (Readiness::Ready, String::new()),
            Some(c) if c["status"] == "False" => {
                let reason = c["reason"].as_str().unwrap_or("");
                let m = c["message"].as_str().unwrap_or("");
                (Readiness::Failed, format!("Ready=False {reason}: {m}"))
            }
            Some(_) => (Readiness::InProgress, "Ready=Unknown".into()),
            None => (Readiness::Ready, String::new()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kstatus_rules() {
        let d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"generation": 2},
            "spec": {"replicas": 2}, "status": {"observedGeneration": 2, "updatedReplicas": 2, "availableReplicas": 2,
            "conditions": [{"type": "Available", "status": "True"}]}});
        assert_eq!(judge(&d, false).0, Readiness::Ready);
        assert_eq!(
            judge(&d, true),
            (Readiness::Unknown, NO_CONTROLLER.to_string())
        );
        let mut stale = d.clone();
        stale["metadata"]["generation"] = json!(3);
        assert_eq!(judge(&stale, false).0, Readiness::InProgress);
        let job = json!({"apiVersion": "batch/v1", "kind": "Job", "status": {"conditions": [{"type": "Complete", "status": "True"}]}});
        assert_eq!(judge(&job, true).0, Readiness::Ready);
        let cr = json!({"apiVersion": "x.io/v1", "kind": "Db", "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "R", "message": "m"}]}});
        assert_eq!(
            judge(&cr, true),
            (Readiness::Failed, "Ready=False R: m".to_string())
        );
    }
}
