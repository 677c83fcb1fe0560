//! What went wrong in a pipeline's Job, in words for the object's conditions: the
//! pipeline, the container, its exit code or waiting reason, the attempt (n of
//! `backoffLimit + 1`) and the last lines of the container's log. The text depends only
//! on the failed attempt, never on time, so it changes (and the status is written) only
//! when another attempt fails.

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use kube::ResourceExt;
use kube::api::{Api, ListParams, LogParams};

use crate::context::Context;
use plinth_api::constants::labels;

/// Log lines quoted in a failure description.
pub const LOG_LINES: i64 = 5;
/// Longest quoted log line, in characters (longer lines are cut with `…`).
pub const MAX_LINE_CHARS: usize = 200;

/// The Job's failed attempts so far (`status.failed`).
pub fn failed_attempts(job: &Job) -> i32 {
    job.status.as_ref().and_then(|s| s.failed).unwrap_or(0)
}

/// Attempts the Job may make (`backoffLimit + 1`, Kubernetes' default limit 6).
pub fn max_attempts(job: &Job) -> i32 {
    job.spec.as_ref().and_then(|s| s.backoff_limit).unwrap_or(6) + 1
}

/// The first container of `pod` that failed: (name, what happened).
fn failed_container(pod: &Pod) -> Option<(String, String)> {
    let st = pod.status.as_ref()?;
    let all: Vec<&ContainerStatus> = st
        .init_container_statuses
        .iter()
        .chain(st.container_statuses.iter())
        .flatten()
        .collect();
    for c in &all {
        let state = c.state.as_ref();
        if let Some(t) = state.and_then(|s| s.terminated.as_ref())
            && t.exit_code != 0
        {
            let mut what = format!("exited with code {}", t.exit_code);
            if let Some(m) = t.message.as_deref().filter(|m| !m.is_empty()) {
                what.push_str(&format!(" ({m})"));
            }
            return Some((c.name.clone(), what));
        }
    }
    for c in &all {
        if let Some(w) = c.state.as_ref().and_then(|s| s.waiting.as_ref())
            && let Some(r) = w.reason.as_deref()
            && !matches!(r, "PodInitializing" | "ContainerCreating")
        {
            let m = w.message.as_deref().unwrap_or("");
            return Some((c.name.clone(), format!("could not start: {r}: {m}")));
        }
    }
    None
}

fn cut(line: &str) -> String {
    if line.chars().count() <= MAX_LINE_CHARS {
        line.to_string()
    } else {
        let mut s: String = line.chars().take(MAX_LINE_CHARS).collect();
        s.push('…');
        s
    }
}

/// Describes the latest failed attempt of `job`, or `None` when no attempt failed (or
/// its Pod is gone).
pub async fn describe(ctx: &Context, job: &Job) -> Option<String> {
    let failed = failed_attempts(job);
    if failed == 0 {
        return None;
    }
    let ns = job.namespace().unwrap_or_default();
    let uid = job.uid()?;
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let list = pods
        .list(&ListParams::default().labels(&format!("controller-uid={uid}")))
        .await
        .ok()?;
    let pod = list
        .items
        .into_iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed"))
        .max_by_key(|p| {
            (
                p.creation_timestamp().map(|t| t.0),
                p.resource_version()
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0),
            )
        })?;
    let pipeline = job
        .labels()
        .get(labels::PIPELINE_NAME)
        .cloned()
        .unwrap_or_else(|| job.name_any());
    let (container, what) = failed_container(&pod).unwrap_or_else(|| {
        let reason = pod
            .status
            .as_ref()
            .and_then(|s| s.reason.clone().or(s.message.clone()))
            .unwrap_or_else(|| "failed".into());
        (String::new(), reason)
    });
    let mut text = if container.is_empty() {
        format!("pipeline {pipeline:?}: Pod {} {what}", pod.name_any())
    } else {
        format!("pipeline {pipeline:?}: container {container:?} {what}")
    };
    text.push_str(&format!(" (attempt {failed} of {})", max_attempts(job)));
    if !container.is_empty() {
        let container_name = container.clone();
        let params = LogParams {
            container: Some(container),
            tail_lines: Some(LOG_LINES),
            limit_bytes: Some(16 * 1024),
            ..Default::default()
        };
        if let Ok(log) = pods.logs(&pod.name_any(), &params).await {
            text.push_str(&log_part(&pod.name_any(), &container_name, &log));
        }
    }
    Some(text)
}

/// What a failure message says of the failed container's log: its last non-empty lines
/// (each cut), or, when they quote a document of kind Secret (an output file echoed in
/// an error), where to read them instead: a status is read by many more people than a
/// Pod's log.
fn log_part(pod: &str, container: &str, log: &str) -> String {
    let lines: Vec<String> = log
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(cut)
        .collect();
    let start = lines.len().saturating_sub(LOG_LINES as usize);
    let tail = lines[start..].join("\n");
    if plinth_api::secrets::mentions_secret_kind(&tail) {
        format!(
            "; its last log lines are not shown here because they quote a document of \
             kind Secret (kubectl logs {pod} -c {container})"
        )
    } else if tail.is_empty() {
        String::new()
    } else {
        format!("; last log lines:\n{tail}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_lines_quoting_a_secret_stay_in_the_log() {
        let log = "error: broken.yaml: did not find expected node\n  1 | not: [valid\n  2 | kind: Secret\n  3 | value: SUPERSECRET\n";
        let part = log_part("p-1", "work-writer", log);
        assert!(!part.contains("SUPERSECRET"), "{part}");
        assert!(part.contains("kubectl logs p-1 -c work-writer"), "{part}");
        let plain = log_part("p-1", "c", "preparing\n\nboom: database unreachable\n");
        assert_eq!(
            plain,
            "; last log lines:\npreparing\nboom: database unreachable"
        );
        assert_eq!(log_part("p-1", "c", "\n"), "");
        // Another kind whose name starts the same is not a Secret.
        assert!(log_part("p", "c", "kind: SecretStore\n").contains("SecretStore"));
    }
}
