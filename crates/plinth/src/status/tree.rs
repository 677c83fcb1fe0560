//! The path of every resource request as a tree, built from listed objects (a pure
//! function, no API calls): Promise → its own workflow Jobs and Works → requests →
//! workflow Jobs (pipeline, phase, duration) → Works → WorkPlacements (Destination, file
//! count, commit or version) and the request's health. `plinth status` prints it and the
//! web view draws it as a map.

use std::collections::BTreeMap;

use jiff::Timestamp;
use plinth_api::constants::{condition_types, labels};
use serde::Serialize;
use serde_json::Value;

/// Everything the tree is built from, as the API lists it (JSON objects).
#[derive(Clone, Debug, Default)]
pub struct Inputs {
    /// Promises.
    pub promises: Vec<Value>,
    /// Resource requests per Promise name.
    pub requests: BTreeMap<String, Vec<Value>>,
    /// Jobs labelled with a Promise name (any namespace).
    pub jobs: Vec<Value>,
    /// Works (any namespace).
    pub works: Vec<Value>,
    /// WorkPlacements (any namespace).
    pub placements: Vec<Value>,
}

/// One condition of an object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Cond {
    /// Condition type, e.g. `Ready`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Machine-readable reason.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Human-readable message.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// A Promise and what hangs off it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PromiseNode {
    /// Promise name.
    pub name: String,
    /// `status.status` (`Available`, `Unavailable`), empty before the first status write.
    pub status: String,
    /// The Promise's conditions.
    pub conditions: Vec<Cond>,
    /// The Promise's own workflow Jobs (promise configure/delete pipelines).
    pub jobs: Vec<JobNode>,
    /// The Promise's own Works (promise pipelines, static dependencies).
    pub works: Vec<WorkNode>,
    /// Its resource requests, by namespace then name.
    pub requests: Vec<RequestNode>,
    /// True when anything below failed (a False condition, a failed Job, an unwritten
    /// placement, unhealthy).
    pub failed: bool,
}

/// A resource request and what its workflows produced.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RequestNode {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The request's conditions.
    pub conditions: Vec<Cond>,
    /// `status.healthStatus.state` (`healthy`, `degraded`, ...), when health is recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub health: Option<String>,
    /// Workflow Jobs, oldest first.
    pub jobs: Vec<JobNode>,
    /// Works the workflows created.
    pub works: Vec<WorkNode>,
    /// True when anything below failed.
    pub failed: bool,
}

/// One workflow Job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct JobNode {
    /// Job name.
    pub name: String,
    /// Namespace the Job runs in.
    pub namespace: String,
    /// Pipeline name (`kratix.io/pipeline-name`).
    pub pipeline: String,
    /// `Pending`, `Running`, `Succeeded` or `Failed`.
    pub phase: String,
    /// Start time (RFC 3339), when started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started: Option<String>,
    /// Seconds from start to completion (or to now while running).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_seconds: Option<i64>,
}

/// One Work.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WorkNode {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `Ready` condition status (`True`/`False`/`Unknown`), empty when not reported yet.
    pub ready: String,
    /// Its WorkPlacements, by name.
    pub placements: Vec<PlacementNode>,
}

/// One WorkPlacement: a workload group written to a Destination.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PlacementNode {
    /// Name.
    pub name: String,
    /// Target Destination.
    pub destination: String,
    /// Number of files (workloads) in the placement.
    pub files: usize,
    /// Paths of the files, as the workloads name them.
    pub paths: Vec<String>,
    /// Contents of the files as stored (gzip, then base64), in the order of `paths` (not
    /// part of the printed data).
    #[serde(skip)]
    pub contents: Vec<String>,
    /// `status.versionID`: the commit SHA (Git) or version (bucket) that holds them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// `Ready` condition status, empty when not reported yet.
    pub ready: String,
    /// Message of a `Ready` condition that is not `True`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// Builds the tree of every Promise in `inputs` (sorted by name), keeping only `promise`
/// and the request `request` (namespace, name) when given. `now` measures running Jobs.
pub fn build(
    inputs: &Inputs,
    promise: Option<&str>,
    request: Option<(&str, &str)>,
    now: Timestamp,
) -> Vec<PromiseNode> {
    let mut promises: Vec<&Value> = inputs
        .promises
        .iter()
        .filter(|p| promise.is_none_or(|n| name(p) == n))
        .collect();
    promises.sort_by_key(|p| name(p));
    promises
        .into_iter()
        .map(|p| promise_node(inputs, p, request, now))
        .collect()
}

fn promise_node(
    inputs: &Inputs,
    p: &Value,
    request: Option<(&str, &str)>,
    now: Timestamp,
) -> PromiseNode {
    let pname = name(p);
    let mut requests: Vec<RequestNode> = inputs
        .requests
        .get(pname)
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter(|r| request.is_none_or(|(ns, n)| namespace(r) == ns && name(r) == n))
        .map(|r| request_node(inputs, pname, r, now))
        .collect();
    requests.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    let jobs = jobs_of(inputs, pname, None, now);
    let works = works_of(inputs, pname, None);
    let conditions = conditions(p);
    let failed = any_false(&conditions)
        || jobs.iter().any(job_failed)
        || works.iter().any(work_failed)
        || requests.iter().any(|r| r.failed);
    PromiseNode {
        name: pname.to_string(),
        status: str_at(p, "/status/status").to_string(),
        conditions,
        jobs,
        works,
        requests,
        failed,
    }
}

fn request_node(inputs: &Inputs, promise: &str, r: &Value, now: Timestamp) -> RequestNode {
    let subject = (namespace(r), name(r));
    let jobs = jobs_of(inputs, promise, Some(subject), now);
    let works = works_of(inputs, promise, Some(subject));
    let conditions = conditions(r);
    let health = r
        .pointer("/status/healthStatus/state")
        .and_then(Value::as_str)
        .map(str::to_string);
    let failed = any_false(&conditions)
        || jobs.iter().any(job_failed)
        || works.iter().any(work_failed)
        || health.as_deref().is_some_and(health_bad);
    RequestNode {
        namespace: subject.0.to_string(),
        name: subject.1.to_string(),
        conditions,
        health,
        jobs,
        works,
        failed,
    }
}

/// True for a health state that should be highlighted (`unhealthy`, `degraded`).
pub fn health_bad(state: &str) -> bool {
    matches!(state, "unhealthy" | "degraded")
}

fn any_false(conds: &[Cond]) -> bool {
    conds.iter().any(|c| c.status == "False")
}

fn job_failed(j: &JobNode) -> bool {
    j.phase == "Failed"
}

fn work_failed(w: &WorkNode) -> bool {
    w.ready == "False" || w.placements.iter().any(|p| p.ready == "False")
}

/// Jobs of a Promise's own workflows (`subject` None) or of one request.
fn jobs_of(
    inputs: &Inputs,
    promise: &str,
    subject: Option<(&str, &str)>,
    now: Timestamp,
) -> Vec<JobNode> {
    let mut jobs: Vec<JobNode> = inputs
        .jobs
        .iter()
        .filter(|j| label(j, labels::PROMISE_NAME) == Some(promise))
        .filter(|j| match subject {
            None => label(j, labels::RESOURCE_NAME).is_none(),
            Some((ns, n)) => label(j, labels::RESOURCE_NAME) == Some(n) && namespace(j) == ns,
        })
        .map(|j| job_node(j, now))
        .collect();
    jobs.sort_by(|a, b| (&a.started, &a.name).cmp(&(&b.started, &b.name)));
    jobs
}

fn job_node(j: &Value, now: Timestamp) -> JobNode {
    let status = j.get("status").cloned().unwrap_or_default();
    let cond_true = |t: &str| {
        status["conditions"]
            .as_array()
            .is_some_and(|cs| cs.iter().any(|c| c["type"] == t && c["status"] == "True"))
    };
    let phase = if cond_true("Complete") || status["succeeded"].as_i64().unwrap_or(0) > 0 {
        "Succeeded"
    } else if cond_true("Failed") {
        "Failed"
    } else if status["active"].as_i64().unwrap_or(0) > 0 {
        "Running"
    } else {
        "Pending"
    };
    let started = status["startTime"].as_str().map(str::to_string);
    let start_ts = started.as_deref().and_then(|s| s.parse::<Timestamp>().ok());
    let end_ts = status["completionTime"]
        .as_str()
        .and_then(|s| s.parse::<Timestamp>().ok())
        .or_else(|| {
            // A failed Job has no completionTime: its Failed condition marks the end.
            status["conditions"].as_array().and_then(|cs| {
                cs.iter()
                    .find(|c| c["type"] == "Failed" && c["status"] == "True")
                    .and_then(|c| c["lastTransitionTime"].as_str())
                    .and_then(|s| s.parse::<Timestamp>().ok())
            })
        });
    let duration_seconds = start_ts.map(|s| {
        let end = end_ts.unwrap_or(now);
        (end.as_second() - s.as_second()).max(0)
    });
    JobNode {
        name: name(j).to_string(),
        namespace: namespace(j).to_string(),
        pipeline: label(j, labels::PIPELINE_NAME).unwrap_or("").to_string(),
        phase: phase.to_string(),
        started,
        duration_seconds,
    }
}

/// Works of a Promise's own workflows and dependencies (`subject` None) or of one request.
fn works_of(inputs: &Inputs, promise: &str, subject: Option<(&str, &str)>) -> Vec<WorkNode> {
    let mut works: Vec<WorkNode> = inputs
        .works
        .iter()
        .filter(|w| label(w, labels::PROMISE_NAME) == Some(promise))
        .filter(|w| match subject {
            None => label(w, labels::RESOURCE_NAME).is_none(),
            Some((ns, n)) => {
                let work_ns = label(w, labels::RESOURCE_NAMESPACE).unwrap_or(namespace(w));
                label(w, labels::RESOURCE_NAME) == Some(n) && work_ns == ns
            }
        })
        .map(|w| work_node(inputs, w))
        .collect();
    works.sort_by(|a, b| a.name.cmp(&b.name));
    works
}

fn work_node(inputs: &Inputs, w: &Value) -> WorkNode {
    let (ns, wname) = (namespace(w), name(w));
    let mut placements: Vec<PlacementNode> = inputs
        .placements
        .iter()
        .filter(|p| namespace(p) == ns && label(p, labels::WORK) == Some(wname))
        .map(placement_node)
        .collect();
    placements.sort_by(|a, b| a.name.cmp(&b.name));
    WorkNode {
        namespace: ns.to_string(),
        name: wname.to_string(),
        ready: condition(w, condition_types::READY)
            .map(|c| c.status)
            .unwrap_or_default(),
        placements,
    }
}

fn placement_node(p: &Value) -> PlacementNode {
    let workloads = p
        .pointer("/spec/workloads")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let field = |key: &str| -> Vec<String> {
        workloads
            .iter()
            .map(|w| w[key].as_str().unwrap_or_default().to_string())
            .collect()
    };
    let paths = field("filepath");
    let ready = condition(p, condition_types::READY);
    PlacementNode {
        name: name(p).to_string(),
        destination: str_at(p, "/spec/targetDestinationName").to_string(),
        files: paths.len(),
        paths,
        contents: field("content"),
        version: p
            .pointer("/status/versionID")
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
            .map(str::to_string),
        ready: ready.as_ref().map(|c| c.status.clone()).unwrap_or_default(),
        message: ready
            .filter(|c| c.status != "True")
            .map(|c| c.message)
            .unwrap_or_default(),
    }
}

/// The conditions of an object (`status.conditions`), in the order stored.
pub fn conditions(obj: &Value) -> Vec<Cond> {
    obj.pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .map(|c| Cond {
                    type_: c["type"].as_str().unwrap_or_default().to_string(),
                    status: c["status"].as_str().unwrap_or_default().to_string(),
                    reason: c["reason"].as_str().unwrap_or_default().to_string(),
                    message: c["message"].as_str().unwrap_or_default().to_string(),
                })
                .collect()
        })
        .unwrap_or_default()
}

fn condition(obj: &Value, type_: &str) -> Option<Cond> {
    conditions(obj).into_iter().find(|c| c.type_ == type_)
}

fn name(obj: &Value) -> &str {
    str_at(obj, "/metadata/name")
}

fn namespace(obj: &Value) -> &str {
    str_at(obj, "/metadata/namespace")
}

fn label<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj.pointer("/metadata/labels")
        .and_then(|l| l.get(key))
        .and_then(Value::as_str)
}

fn str_at<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn now() -> Timestamp {
        "2026-01-01T00:10:00Z".parse().unwrap()
    }

    fn inputs() -> Inputs {
        let promise = json!({"metadata": {"name": "gadget"}, "status": {"status": "Available",
            "conditions": [{"type": "Available", "status": "True", "reason": "PromiseAvailable"}]}});
        let other = json!({"metadata": {"name": "widget"}});
        let req = |ns: &str, n: &str, health: Option<&str>| {
            let mut r = json!({"metadata": {"name": n, "namespace": ns},
                "status": {"conditions": [{"type": "ConfigureWorkflowCompleted", "status": "True"}]}});
            if let Some(h) = health {
                r["status"]["healthStatus"] = json!({"state": h});
            }
            r
        };
        let job = |ns: &str, n: &str, resource: Option<&str>, status: Value| {
            let mut l = json!({labels::PROMISE_NAME: "gadget", labels::PIPELINE_NAME: "configure"});
            if let Some(r) = resource {
                l[labels::RESOURCE_NAME] = json!(r);
            }
            json!({"metadata": {"name": n, "namespace": ns, "labels": l}, "status": status})
        };
        let work = |n: &str, resource: Option<&str>, ready: &str| {
            let mut l = json!({labels::PROMISE_NAME: "gadget"});
            if let Some(r) = resource {
                l[labels::RESOURCE_NAME] = json!(r);
                l[labels::RESOURCE_NAMESPACE] = json!("default");
            }
            json!({"metadata": {"name": n, "namespace": "default", "labels": l},
                "status": {"conditions": [{"type": "Ready", "status": ready}]}})
        };
        Inputs {
            promises: vec![other, promise],
            requests: BTreeMap::from([(
                "gadget".to_string(),
                vec![
                    req("team", "zeta", Some("unhealthy")),
                    req("default", "mine", Some("healthy")),
                ],
            )]),
            jobs: vec![
                job(
                    "default",
                    "mine-2",
                    Some("mine"),
                    json!({"startTime": "2026-01-01T00:05:00Z", "active": 1}),
                ),
                job(
                    "default",
                    "mine-1",
                    Some("mine"),
                    json!({"startTime": "2026-01-01T00:00:00Z",
                    "completionTime": "2026-01-01T00:00:42Z", "succeeded": 1,
                    "conditions": [{"type": "Complete", "status": "True"}]}),
                ),
                // Same name in another namespace: not this request's.
                job("other", "mine-x", Some("mine"), json!({})),
                job(
                    "kratix-platform-system",
                    "gadget-p",
                    None,
                    json!({"conditions": [
                    {"type": "Failed", "status": "True", "lastTransitionTime": "2026-01-01T00:01:00Z"}],
                    "startTime": "2026-01-01T00:00:30Z"}),
                ),
            ],
            works: vec![
                work("mine-work", Some("mine"), "True"),
                work("gadget-deps", None, "True"),
            ],
            placements: vec![json!({
                "metadata": {"name": "mine-work.local", "namespace": "default",
                    "labels": {labels::WORK: "mine-work"}},
                "spec": {"targetDestinationName": "local",
                    "workloads": [{"filepath": "a.yaml", "content": "x"}, {"filepath": "b.yaml", "content": "y"}]},
                "status": {"versionID": "abc123", "conditions": [{"type": "Ready", "status": "True"}]},
            })],
        }
    }

    #[test]
    fn request_tree_has_jobs_works_placements_and_health() {
        let tree = build(&inputs(), None, None, now());
        assert_eq!(
            tree.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
            ["gadget", "widget"]
        );
        let g = &tree[0];
        assert_eq!(g.status, "Available");
        assert_eq!(
            g.requests
                .iter()
                .map(|r| format!("{}/{}", r.namespace, r.name))
                .collect::<Vec<_>>(),
            ["default/mine", "team/zeta"]
        );
        let mine = &g.requests[0];
        assert_eq!(mine.health.as_deref(), Some("healthy"));
        let jobs: Vec<_> = mine
            .jobs
            .iter()
            .map(|j| (j.name.as_str(), j.phase.as_str(), j.duration_seconds))
            .collect();
        // Oldest first; the running Job is measured to `now`.
        assert_eq!(
            jobs,
            [
                ("mine-1", "Succeeded", Some(42)),
                ("mine-2", "Running", Some(300))
            ]
        );
        assert_eq!(mine.works.len(), 1);
        let p = &mine.works[0].placements[0];
        assert_eq!(
            (
                p.destination.as_str(),
                p.files,
                p.version.as_deref(),
                p.ready.as_str()
            ),
            ("local", 2, Some("abc123"), "True")
        );
        assert!(!mine.failed);
        // Promise-level Jobs and Works are not a request's.
        assert_eq!(g.jobs.len(), 1);
        assert_eq!(g.jobs[0].phase, "Failed");
        assert_eq!(g.jobs[0].duration_seconds, Some(30));
        assert_eq!(g.works[0].name, "gadget-deps");
    }

    #[test]
    fn failures_are_marked_up_to_the_promise() {
        let tree = build(&inputs(), Some("gadget"), None, now());
        assert_eq!(tree.len(), 1);
        assert!(tree[0].requests[1].failed, "unhealthy request is a failure");
        assert!(tree[0].failed);

        let mut ok = inputs();
        ok.jobs.retain(|j| j["metadata"]["name"] != "gadget-p");
        let tree = build(&ok, Some("gadget"), Some(("default", "mine")), now());
        assert_eq!(tree[0].requests.len(), 1, "filtered to one request");
        assert!(!tree[0].failed, "{:?}", tree[0]);

        let mut bad = ok.clone();
        bad.placements[0]["status"]["conditions"] =
            json!([{"type": "Ready", "status": "False", "message": "path escapes"}]);
        let tree = build(&bad, Some("gadget"), Some(("default", "mine")), now());
        let p = &tree[0].requests[0].works[0].placements[0];
        assert_eq!(p.message, "path escapes");
        assert!(tree[0].requests[0].failed && tree[0].failed);
    }
}
