//! The Job runner against the embedded API server (HTTPS, so in-pod kubectl works).

use crate::common;

use std::time::Duration;

use common::*;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Namespace, Pod, ServiceAccount};
use kube::api::{Api, ListParams, LogParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::await_condition;
use plinth_apiserver::testing::TestServer;
use plinth_runner::{EngineMode, RunnerConfig, SandboxMode};
use serde_json::json;

struct Platform {
    server: TestServer,
    config: RunnerConfig,
    runner: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Platform {
    fn drop(&mut self) {
        if let Some(h) = self.runner.take() {
            h.abort();
        }
    }
}

impl Platform {
    async fn start(test: &str) -> Option<Platform> {
        if !have_bwrap(test) {
            return None;
        }
        let server = TestServer::start_https().await.expect("api server");
        let addr = server.server().https_addr().expect("https");
        let ca =
            std::fs::read_to_string(server.server().ca_cert_path().expect("ca")).expect("ca pem");
        let mut config =
            RunnerConfig::new(server.data_dir(), addr.ip().to_string(), addr.port(), ca);
        config.engine = EngineMode::Disabled;
        config.sandbox = SandboxMode::Bwrap;
        config.retry_backoff = Duration::from_millis(10);
        let mut p = Platform {
            server,
            config,
            runner: None,
        };
        p.start_runner();
        Some(p)
    }

    fn start_runner(&mut self) {
        let client = self.server.client();
        let cfg = self.config.clone();
        self.runner = Some(tokio::spawn(async move {
            plinth_runner::run(client, cfg).await.expect("runner");
        }));
    }

    fn client(&self) -> kube::Client {
        self.server.client()
    }

    async fn namespace(&self, ns: &str) {
        let api: Api<Namespace> = Api::all(self.client());
        let _ = api
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap(),
            )
            .await;
        let sa: Api<ServiceAccount> = Api::namespaced(self.client(), ns);
        let _ = sa
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": "default"}})).unwrap(),
            )
            .await;
    }

    async fn create<K>(&self, ns: &str, v: serde_json::Value) -> K
    where
        K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + serde::Serialize
            + std::fmt::Debug,
    {
        let api: Api<K> = Api::namespaced(self.client(), ns);
        api.create(&PostParams::default(), &serde_json::from_value(v).unwrap())
            .await
            .expect("create")
    }

    async fn wait_job(&self, ns: &str, name: &str, cond: &'static str) -> Job {
        let api: Api<Job> = Api::namespaced(self.client(), ns);
        // Stop at the wanted condition or at a terminal one, whichever comes first.
        let done = move |j: Option<&Job>| {
            j.and_then(|j| j.status.as_ref())
                .and_then(|s| s.conditions.as_ref())
                .map(|cs| {
                    cs.iter().any(|c| {
                        (c.type_ == cond || c.type_ == "Complete" || c.type_ == "Failed")
                            && c.status == "True"
                    })
                })
                .unwrap_or(false)
        };
        let job = tokio::time::timeout(Duration::from_secs(60), await_condition(api, name, done))
            .await
            .unwrap_or_else(|_| panic!("Job {ns}/{name} did not reach {cond} in 60 s"))
            .expect("watch")
            .expect("job exists");
        let reached = job
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == cond && c.status == "True"));
        if !reached {
            let pods = self.pods_of(ns, name).await;
            panic!(
                "Job {ns}/{name} ended without {cond}: {:?}\npods: {:#?}",
                job.status,
                pods.iter().map(|p| &p.status).collect::<Vec<_>>()
            );
        }
        job
    }

    /// Events about the object `kind`/`name`: (type, reason, message, count).
    async fn events(&self, ns: &str, kind: &str, name: &str) -> Vec<(String, String, String, i32)> {
        let api: Api<Event> = Api::namespaced(self.client(), ns);
        let mut list = api.list(&ListParams::default()).await.unwrap().items;
        list.sort_by_key(|e| e.first_timestamp.clone().map(|t| t.0));
        list.into_iter()
            .filter(|e| {
                e.involved_object.kind.as_deref() == Some(kind)
                    && e.involved_object.name.as_deref() == Some(name)
            })
            .map(|e| {
                assert!(
                    e.first_timestamp.is_some() && e.last_timestamp.is_some(),
                    "{e:?}"
                );
                (
                    e.type_.unwrap_or_default(),
                    e.reason.unwrap_or_default(),
                    e.message.unwrap_or_default(),
                    e.count.unwrap_or(0),
                )
            })
            .collect()
    }

    async fn pods_of(&self, ns: &str, job: &str) -> Vec<Pod> {
        let api: Api<Pod> = Api::namespaced(self.client(), ns);
        let mut pods = api
            .list(&ListParams::default().labels(&format!("job-name={job}")))
            .await
            .unwrap()
            .items;
        pods.sort_by_key(|p| p.metadata.creation_timestamp.clone().map(|t| t.0));
        pods
    }
}

fn cond<'a>(job: &'a Job, t: &str) -> &'a k8s_openapi::api::batch::v1::JobCondition {
    job.status
        .as_ref()
        .unwrap()
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .find(|c| c.type_ == t)
        .unwrap_or_else(|| panic!("no {t} condition on {job:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_with_init_container_hands_files_to_the_container() {
    let Some(p) = Platform::start("job_with_init_container_hands_files_to_the_container").await
    else {
        return;
    };
    p.namespace("team-a").await;
    let job: Job = p
        .create(
            "team-a",
            json!({
                "metadata": {"name": "kratix-redis-example-instance-configure-x1y2z"},
                "spec": {"template": {
                    "metadata": {"labels": {"kratix.io/promise-name": "redis"}, "annotations": {"kratix.io/trace-parent": "00-t"}},
                    "spec": {
                        "restartPolicy": "OnFailure",
                        "volumes": [{"name": "shared-output", "emptyDir": {}}],
                        "initContainers": [{"name": "writer", "image": "busybox",
                            "command": ["sh", "-c", "echo from-init > /kratix/output/f; echo init done"],
                            "volumeMounts": [{"name": "shared-output", "mountPath": "/kratix/output"}]}],
                        "containers": [{"name": "status-writer", "image": "busybox",
                            "env": [{"name": "TRACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['kratix.io/trace-parent']"}}}],
                            "command": ["sh", "-c", "cat /kratix/output/f; echo $TRACE"],
                            "volumeMounts": [{"name": "shared-output", "mountPath": "/kratix/output"}]}]
                    }
                }}
            }),
        )
        .await;
    let name = job.metadata.name.clone().unwrap();
    let done = p.wait_job("team-a", &name, "Complete").await;
    let st = done.status.as_ref().unwrap();
    assert_eq!(st.succeeded, Some(1));
    assert_eq!(st.active, Some(0));
    assert!(st.start_time.is_some() && st.completion_time.is_some());
    assert_eq!(cond(&done, "SuccessCriteriaMet").status, "True");

    let pods = p.pods_of("team-a", &name).await;
    assert_eq!(pods.len(), 1);
    let pod = &pods[0];
    let pod_name = pod.metadata.name.clone().unwrap();
    assert!(pod_name.starts_with(&format!("{name}-")) && pod_name.len() == name.len() + 6);
    let labels = pod.metadata.labels.as_ref().unwrap();
    assert_eq!(labels["job-name"], name);
    assert_eq!(labels["batch.kubernetes.io/job-name"], name);
    assert_eq!(
        &labels["controller-uid"],
        done.metadata.uid.as_ref().unwrap()
    );
    assert_eq!(labels["kratix.io/promise-name"], "redis");
    let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!((owner.kind.as_str(), owner.controller), ("Job", Some(true)));
    let ps = pod.status.as_ref().unwrap();
    assert_eq!(ps.phase.as_deref(), Some("Succeeded"));
    assert_eq!(exit_code(container(ps, true, "writer")), 0);
    let t = container(ps, false, "status-writer")
        .state
        .as_ref()
        .unwrap()
        .terminated
        .as_ref()
        .unwrap();
    assert_eq!((t.exit_code, t.reason.as_deref()), (0, Some("Completed")));

    assert_eq!(
        read(&p.config.log_path("team-a", &pod_name, "status-writer")),
        "from-init\n00-t\n"
    );
    // The API server serves the same file.
    let pods_api: Api<Pod> = Api::namespaced(p.client(), "team-a");
    let logs = pods_api
        .logs(
            &pod_name,
            &LogParams {
                container: Some("writer".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(logs, "init done\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn env_and_env_from_config_map_and_secret_through_the_api() {
    let Some(p) = Platform::start("env_and_env_from_config_map_and_secret_through_the_api").await
    else {
        return;
    };
    p.namespace("team-a").await;
    let _: k8s_openapi::api::core::v1::ConfigMap = p
        .create(
            "team-a",
            json!({"metadata": {"name": "cfg"}, "data": {"REGION": "eu", "TIER": "gold"}}),
        )
        .await;
    let _: k8s_openapi::api::core::v1::Secret =
        p.create("team-a", json!({"metadata": {"name": "sec"}, "stringData": {"TOKEN": "t0k"}, "data": {"USER": "YWRtaW4="}})).await;
    let _: Job = p
        .create(
            "team-a",
            json!({
                "metadata": {"name": "env-job"},
                "spec": {"backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never",
                    "volumes": [{"name": "cfgvol", "configMap": {"name": "cfg", "items": [{"key": "TIER", "path": "tier.txt"}]}}],
                    "containers": [{"name": "c", "image": "alpine:3.20",
                        "envFrom": [{"configMapRef": {"name": "cfg"}, "prefix": "CFG_"}],
                        "env": [{"name": "U", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "USER"}}},
                                {"name": "T", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "TOKEN"}}},
                                {"name": "MSG", "value": "$(CFG_REGION)-$(U)"}],
                        "command": ["sh", "-c", "echo $MSG $T $CFG_TIER $(cat /etc/cfg/tier.txt)"],
                        "volumeMounts": [{"name": "cfgvol", "mountPath": "/etc/cfg"}]}]}}}
            }),
        )
        .await;
    let done = p.wait_job("team-a", "env-job", "Complete").await;
    assert_eq!(done.status.as_ref().unwrap().succeeded, Some(1));
    let pod = &p.pods_of("team-a", "env-job").await[0];
    let log = read(
        &p.config
            .log_path("team-a", pod.metadata.name.as_ref().unwrap(), "c"),
    );
    assert_eq!(log, "eu-admin t0k gold gold\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_container_fails_the_job_after_the_backoff_limit() {
    let Some(p) = Platform::start("failing_container_fails_the_job_after_the_backoff_limit").await
    else {
        return;
    };
    p.namespace("team-a").await;
    let _: Job = p
        .create(
            "team-a",
            json!({
                "metadata": {"name": "broken"},
                "spec": {"backoffLimit": 1, "template": {"spec": {"restartPolicy": "OnFailure",
                    "containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", "echo failing attempt; exit 3"]}]}}}
            }),
        )
        .await;
    let done = p.wait_job("team-a", "broken", "Failed").await;
    let failed = cond(&done, "Failed");
    assert_eq!(failed.reason.as_deref(), Some("BackoffLimitExceeded"));
    assert_eq!(
        cond(&done, "FailureTarget").reason.as_deref(),
        Some("BackoffLimitExceeded")
    );
    assert_eq!(done.status.as_ref().unwrap().failed, Some(2));
    assert_eq!(done.status.as_ref().unwrap().active, Some(0));
    let pods = p.pods_of("team-a", "broken").await;
    assert_eq!(pods.len(), 2, "backoffLimit 1 means one retry");
    for pod in &pods {
        let ps = pod.status.as_ref().unwrap();
        assert_eq!(ps.phase.as_deref(), Some("Failed"));
        let t = container(ps, false, "c")
            .state
            .as_ref()
            .unwrap()
            .terminated
            .as_ref()
            .unwrap();
        assert_eq!((t.exit_code, t.reason.as_deref()), (3, Some("Error")));
        let log = p
            .config
            .log_path("team-a", pod.metadata.name.as_ref().unwrap(), "c");
        assert_eq!(read(&log), "failing attempt\n");
    }
    assert_ne!(pods[0].metadata.name, pods[1].metadata.name);

    // The Job controller's and the kubelet's Events, as Kubernetes emits them.
    // The Job's final Event may land just after its status: wait for it.
    let mut job_events = p.events("team-a", "Job", "broken").await;
    for _ in 0..50 {
        if job_events.iter().any(|e| e.1 == "BackoffLimitExceeded") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        job_events = p.events("team-a", "Job", "broken").await;
    }
    for pod in &pods {
        let created = format!("Created pod: {}", pod.metadata.name.as_deref().unwrap());
        assert!(
            job_events
                .iter()
                .any(|(t, r, m, _)| t == "Normal" && r == "SuccessfulCreate" && *m == created),
            "{job_events:?}"
        );
    }
    assert!(
        job_events.iter().any(|(t, r, m, _)| t == "Warning"
            && r == "BackoffLimitExceeded"
            && m == "Job has reached the specified backoff limit"),
        "{job_events:?}"
    );
    let pod_events = p
        .events("team-a", "Pod", pods[0].metadata.name.as_deref().unwrap())
        .await;
    let reasons: Vec<&str> = pod_events.iter().map(|(_, r, _, _)| r.as_str()).collect();
    assert_eq!(
        reasons,
        ["Scheduled", "Pulled", "Created", "Started"],
        "{pod_events:?}"
    );
    // Which backend ran the container, where `kubectl describe pod` shows it.
    let c = container(pods[0].status.as_ref().unwrap(), false, "c");
    assert_eq!(
        c.container_id.as_deref(),
        Some(
            format!(
                "sandbox://team-a/{}/c",
                pods[0].metadata.name.as_deref().unwrap()
            )
            .as_str()
        )
    );
    assert_eq!(c.image_id, "host-userland:busybox");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_map_command_that_cannot_run_is_refused_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let map = dir.path().join("images.yaml");
    std::fs::write(dir.path().join("not-exec.sh"), "#!/bin/sh\n").unwrap();
    for (entry, expected) in [
        (
            "{image: a/b, command: [./missing.sh]}",
            "images[0] (image \"a/b\"): command",
        ),
        (
            "{image: a/c, command: [./not-exec.sh]}",
            "is not executable",
        ),
        (
            "{image: a/d, command: [no-such-program-anywhere]}",
            "is not an executable on PATH",
        ),
    ] {
        std::fs::write(&map, format!("images:\n- {entry}\n")).unwrap();
        let e = plinth_runner::image::ImageMap::load(&map)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(expected) && e.contains(&map.display().to_string()),
            "{e}"
        );
    }
    std::fs::write(&map, "images:\n- {image: a/e, command: [sh, -c, 'true']}\n").unwrap();
    plinth_runner::image::ImageMap::load(&map).unwrap();
}

/// Pids of live processes whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(marker))
                .unwrap_or(false)
                && plinth_runner::procs::alive(*pid)
        })
        .collect()
}

/// Waits until processes with `marker` in their command line run; returns their pids.
async fn wait_processes(marker: &str) -> Vec<u32> {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let found = processes_with(marker);
        if !found.is_empty() {
            return found;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no process runs {marker}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

type EventRow = (String, String, String, i32);

/// The Events of Pod `pod` in `team-a` once `ready` holds for them (10 s at most).
async fn wait_events(
    p: &Platform,
    pod: &str,
    ready: impl Fn(&[EventRow]) -> bool,
) -> Vec<EventRow> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let events = p.events("team-a", "Pod", pod).await;
        if ready(&events) {
            return events;
        }
        assert!(std::time::Instant::now() < deadline, "{events:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until no process has `marker` in its command line (10 s at most, for a loaded
/// machine); `what` says what failed.
async fn wait_processes_gone(marker: &str, what: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !processes_with(marker).is_empty() {
        assert!(std::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn wait_running(p: &Platform, ns: &str, pod: &str) {
    let api: Api<Pod> = Api::namespaced(p.client(), ns);
    let running = |o: Option<&Pod>| {
        o.and_then(|p| p.status.as_ref())
            .and_then(|s| s.container_statuses.as_ref())
            .is_some_and(|cs| {
                cs.iter()
                    .all(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
            })
    };
    tokio::time::timeout(Duration::from_secs(60), await_condition(api, pod, running))
        .await
        .expect("pod running in 60 s")
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_job_stops_its_processes_and_removes_its_files() {
    let Some(p) = Platform::start("deleting_a_job_stops_its_processes_and_removes_its_files").await
    else {
        return;
    };
    p.namespace("team-a").await;
    // Unique per test process, so that nothing else on the machine matches.
    let tag = format!("job-deletion-marker-{}", std::process::id());
    let marker = format!("sleep 100000; echo {tag}");
    let _: Job = p
        .create(
            "team-a",
            json!({"metadata": {"name": "sleeper"}, "spec": {"template": {"spec": {"restartPolicy": "Never",
                "terminationGracePeriodSeconds": 5,
                "volumes": [{"name": "scratch", "emptyDir": {}}],
                "containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", marker],
                    "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]}]}}}}),
        )
        .await;
    let pod_name = loop {
        if let Some(pod) = p.pods_of("team-a", "sleeper").await.pop() {
            break pod.metadata.name.unwrap();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    wait_running(&p, "team-a", &pod_name).await;
    let pod_dir = p.config.pod_dir("team-a", &pod_name);
    assert!(pod_dir.join("volumes/scratch").is_dir());
    let mut before = wait_processes(&tag).await;
    // The whole tree: the sandbox, the shell and its `sleep`.
    let below: Vec<u32> = before
        .iter()
        .flat_map(|pid| plinth_runner::procs::descendants(*pid))
        .map(|(pid, _)| pid)
        .collect();
    before.extend(below);
    assert!(
        before.len() >= 3,
        "sandbox, shell and sleep run: {before:?}"
    );
    let jobs: Api<Job> = Api::namespaced(p.client(), "team-a");
    jobs.delete("sleeper", &kube::api::DeleteParams::background())
        .await
        .unwrap();
    // Within the grace period (5 s) the whole tree is gone: sandbox, shell and sleep.
    let deadline = std::time::Instant::now() + Duration::from_secs(8);
    loop {
        let left = processes_with(&tag);
        let tree_gone = before.iter().all(|pid| !plinth_runner::procs::alive(*pid));
        if left.is_empty() && tree_gone && !pod_dir.exists() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "still running after the grace period: {left:?}; pod dir exists: {}",
            pod_dir.exists()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !p.config.log_path("team-a", &pod_name, "c").exists(),
        "a deleted Pod's logs go with it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standalone_pods_run_with_their_restart_policy() {
    let Some(p) = Platform::start("standalone_pods_run_with_their_restart_policy").await else {
        return;
    };
    p.namespace("team-a").await;
    let api: Api<Pod> = Api::namespaced(p.client(), "team-a");
    let _: Pod = p
        .create(
            "team-a",
            json!({"metadata": {"name": "once"}, "spec": {"restartPolicy": "Never",
                "containers": [{"name": "debug", "image": "busybox", "command": ["sh", "-c", "echo hi"]}]}}),
        )
        .await;
    let phase_is = |want: &'static str| {
        move |o: Option<&Pod>| {
            o.and_then(|p| p.status.as_ref())
                .and_then(|s| s.phase.as_deref())
                == Some(want)
        }
    };
    let done = tokio::time::timeout(
        Duration::from_secs(60),
        await_condition(api.clone(), "once", phase_is("Succeeded")),
    )
    .await
    .expect("standalone pod succeeds in 60 s")
    .unwrap()
    .unwrap();
    assert_eq!(
        exit_code(container(done.status.as_ref().unwrap(), false, "debug")),
        0
    );
    let logs = api.logs("once", &LogParams::default()).await.unwrap();
    assert_eq!(logs, "hi\n");
    let reasons: Vec<String> = wait_events(&p, "once", |events| events.len() >= 4)
        .await
        .into_iter()
        .map(|e| e.1)
        .collect();
    assert_eq!(reasons, ["Scheduled", "Pulled", "Created", "Started"]);

    // OnFailure: a failed run is followed by another, with restartCount and lastState.
    let _: Pod = p
        .create(
            "team-a",
            json!({"metadata": {"name": "flaky"}, "spec": {"restartPolicy": "OnFailure",
                "containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", "echo try; exit 2"]}]}}),
        )
        .await;
    let restarted = |o: Option<&Pod>| {
        o.and_then(|p| p.status.as_ref())
            .and_then(|s| s.container_statuses.as_ref())
            .is_some_and(|cs| cs[0].restart_count >= 2)
    };
    let pod = tokio::time::timeout(
        Duration::from_secs(60),
        await_condition(api.clone(), "flaky", restarted),
    )
    .await
    .expect("restarted twice in 60 s")
    .unwrap()
    .unwrap();
    let c = container(pod.status.as_ref().unwrap(), false, "c");
    let last = c
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .expect("lastState");
    assert_eq!(last.exit_code, 2);
    // Normal Events are recorded from a queue, so the second start may be counted just
    // after the status that shows it.
    let events = wait_events(&p, "flaky", |events| {
        events.iter().any(|e| e.1 == "Started" && e.3 >= 2)
    })
    .await;
    assert!(
        events
            .iter()
            .any(|(t, r, _, _)| t == "Warning" && r == "BackOff"),
        "{events:?}"
    );
    // Repeats are one Event with a count, as the Kubernetes recorder aggregates them.
    let started: Vec<_> = events.iter().filter(|e| e.1 == "Started").collect();
    assert_eq!(started.len(), 1, "{events:?}");
    // It would restart for ever: remove it.
    api.delete("flaky", &Default::default()).await.unwrap();

    // Never with a failure: one run, Failed.
    let _: Pod = p
        .create(
            "team-a",
            json!({"metadata": {"name": "fails"}, "spec": {"restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", "exit 4"]}]}}),
        )
        .await;
    let failed = tokio::time::timeout(
        Duration::from_secs(60),
        await_condition(api.clone(), "fails", phase_is("Failed")),
    )
    .await
    .expect("fails in 60 s")
    .unwrap()
    .unwrap();
    let c = container(failed.status.as_ref().unwrap(), false, "c");
    assert_eq!((exit_code(c), c.restart_count), (4, 0));

    // Deleting a standalone Pod stops it too.
    let tag = format!("bare-pod-deletion-marker-{}", std::process::id());
    let marker = format!("sleep 100000; echo {tag}");
    let _: Pod = p
        .create(
            "team-a",
            json!({"metadata": {"name": "sleepy"}, "spec": {"terminationGracePeriodSeconds": 3,
                "containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", marker]}]}}),
        )
        .await;
    wait_running(&p, "team-a", "sleepy").await;
    // Its containers run, so it is Ready (`kubectl wait --for=condition=Ready` relies on it).
    let ready = |o: Option<&Pod>| {
        o.and_then(|p| p.status.as_ref())
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
    };
    tokio::time::timeout(
        Duration::from_secs(10),
        await_condition(api.clone(), "sleepy", ready),
    )
    .await
    .expect("a running Pod is Ready")
    .unwrap();
    wait_processes(&tag).await;
    api.delete("sleepy", &Default::default()).await.unwrap();
    // The grace period is 3 s; allow for a loaded machine.
    wait_processes_gone(&tag, "the deleted Pod's processes still run").await;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    // Its files go once the deletion is seen, which may come just after the processes end.
    let dir = p.config.pod_dir("team-a", "sleepy");
    while dir.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the deleted Pod's files are still there: {}",
            dir.display()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn container_logs_are_capped_and_rotated() {
    let Some(mut p) = Platform::start("container_logs_are_capped_and_rotated").await else {
        return;
    };
    // A small cap keeps the test fast: 64 KiB × 3 files.
    if let Some(h) = p.runner.take() {
        h.abort();
    }
    p.config.container_log_max_size = 64 * 1024;
    p.config.container_log_max_files = 3;
    p.start_runner();
    p.namespace("team-a").await;
    // About 1 MB of numbered lines, then a last line.
    let _: Job = p
        .create(
            "team-a",
            json!({"metadata": {"name": "chatty"}, "spec": {"template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", "seq 1 150000; echo the-last-line"]}]}}}}),
        )
        .await;
    p.wait_job("team-a", "chatty", "Complete").await;
    let pod = p.pods_of("team-a", "chatty").await.remove(0);
    let pod_name = pod.metadata.name.unwrap();
    let log = p.config.log_path("team-a", &pod_name, "c");
    let dir = log.parent().unwrap();
    let files: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
    let total: u64 = files.iter().map(|f| f.metadata().unwrap().len()).sum();
    assert!(files.len() <= 3, "{files:?}");
    assert!(total <= 3 * 64 * 1024, "{total} bytes kept");
    assert!(std::fs::metadata(&log).unwrap().len() <= 64 * 1024);
    // `kubectl logs` still gives the end of the output.
    let api: Api<Pod> = Api::namespaced(p.client(), "team-a");
    let tail = api
        .logs(
            &pod_name,
            &LogParams {
                tail_lines: Some(2),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(tail, "150000\nthe-last-line\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_in_the_sandbox_uses_the_pods_service_account() {
    let Some(p) = Platform::start("kubectl_in_the_sandbox_uses_the_pods_service_account").await
    else {
        return;
    };
    if plinth_runner::config::find_on_path("kubectl").is_none() {
        println!(
            "SKIPPED: kubectl_in_the_sandbox_uses_the_pods_service_account: kubectl is not installed"
        );
        return;
    }
    p.namespace("team-b").await;
    let _: ServiceAccount = p
        .create("team-b", json!({"metadata": {"name": "pipeline"}}))
        .await;
    let _: k8s_openapi::api::rbac::v1::Role = p
        .create(
            "team-b",
            json!({"metadata": {"name": "read-cm"}, "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]}),
        )
        .await;
    let _: k8s_openapi::api::rbac::v1::RoleBinding = p
        .create(
            "team-b",
            json!({"metadata": {"name": "read-cm"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read-cm"},
                   "subjects": [{"kind": "ServiceAccount", "name": "pipeline", "namespace": "team-b"}]}),
        )
        .await;
    let _: k8s_openapi::api::core::v1::ConfigMap = p
        .create(
            "team-b",
            json!({"metadata": {"name": "marker-cm"}, "data": {"a": "b"}}),
        )
        .await;
    let _: Job = p
        .create(
            "team-b",
            json!({
                "metadata": {"name": "kubectl-job"},
                "spec": {"backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never", "serviceAccountName": "pipeline",
                    "containers": [{"name": "k", "image": "bitnami/kubectl:1.33",
                        "command": ["sh", "-c",
                          "set -e; kubectl get configmaps -n team-b -o name; env -u KUBECONFIG kubectl get configmaps -n team-b -o name; cat /var/run/secrets/kubernetes.io/serviceaccount/namespace; echo"]}]}}}
            }),
        )
        .await;
    let done = tokio::time::timeout(Duration::from_secs(90), async {
        loop {
            let api: Api<Job> = Api::namespaced(p.client(), "team-b");
            let j = api.get("kubectl-job").await.unwrap();
            let conds = j
                .status
                .as_ref()
                .and_then(|s| s.conditions.clone())
                .unwrap_or_default();
            if conds
                .iter()
                .any(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")
            {
                return j;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("job finished");
    let pod = &p.pods_of("team-b", "kubectl-job").await[0];
    let log = read(
        &p.config
            .log_path("team-b", pod.metadata.name.as_ref().unwrap(), "k"),
    );
    assert_eq!(
        cond(&done, "Complete").status,
        "True",
        "kubectl failed in the sandbox:\n{log}"
    );
    // Every namespace also holds the cluster CA as ConfigMap kube-root-ca.crt, as on
    // Kubernetes.
    assert_eq!(
        log,
        "configmap/kube-root-ca.crt\nconfigmap/marker-cm\nconfigmap/kube-root-ca.crt\nconfigmap/marker-cm\nteam-b\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unrunnable_image_fails_the_job_with_a_clear_message() {
    let Some(p) = Platform::start("unrunnable_image_fails_the_job_with_a_clear_message").await
    else {
        return;
    };
    p.namespace("team-a").await;
    let _: Job = p
        .create(
            "team-a",
            json!({"metadata": {"name": "noimage"}, "spec": {"backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "c", "image": "ghcr.io/example/private-pipeline:v1"}]}}}}),
        )
        .await;
    let done = p.wait_job("team-a", "noimage", "Failed").await;
    assert_eq!(
        cond(&done, "Failed").reason.as_deref(),
        Some("BackoffLimitExceeded")
    );
    let pod = &p.pods_of("team-a", "noimage").await[0];
    let ps = pod.status.as_ref().unwrap();
    assert_eq!(ps.phase.as_deref(), Some("Failed"));
    let w = container(ps, false, "c")
        .state
        .as_ref()
        .unwrap()
        .waiting
        .as_ref()
        .unwrap();
    assert_eq!(w.reason.as_deref(), Some("ErrImagePull"));
    let msg = w.message.as_deref().unwrap();
    assert!(
        msg.starts_with("image \"ghcr.io/example/private-pipeline:v1\" cannot be run: no container engine (podman/docker) found and no image-map entry matches; add one to"),
        "{msg}"
    );
    assert!(msg.ends_with("or install podman"), "{msg}");
    assert!(msg.contains("--image-map"), "{msg}");
    // The kubelet's warnings say the same where `kubectl describe pod` shows them.
    let events = p
        .events("team-a", "Pod", pod.metadata.name.as_deref().unwrap())
        .await;
    assert!(
        events
            .iter()
            .any(|(t, r, m, _)| t == "Warning" && r == "Failed" && m == "Error: ErrImagePull"),
        "{events:?}"
    );
    assert!(
        events
            .iter()
            .any(|(t, r, m, _)| t == "Warning" && r == "Failed" && m.contains("--image-map")),
        "{events:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn active_deadline_fails_the_job_with_deadline_exceeded() {
    let Some(p) = Platform::start("active_deadline_fails_the_job_with_deadline_exceeded").await
    else {
        return;
    };
    p.namespace("team-a").await;
    let _: Job = p
        .create(
            "team-a",
            json!({"metadata": {"name": "slow"}, "spec": {"activeDeadlineSeconds": 1, "template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox", "command": ["sleep", "30"]}]}}}}),
        )
        .await;
    let done = p.wait_job("team-a", "slow", "Failed").await;
    assert_eq!(
        cond(&done, "Failed").reason.as_deref(),
        Some("DeadlineExceeded")
    );
    let pod = &p.pods_of("team-a", "slow").await[0];
    assert_eq!(
        pod.status.as_ref().unwrap().reason.as_deref(),
        Some("DeadlineExceeded")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspended_job_starts_nothing_until_resumed() {
    let Some(p) = Platform::start("suspended_job_starts_nothing_until_resumed").await else {
        return;
    };
    p.namespace("team-a").await;
    let _: Job = p
        .create(
            "team-a",
            json!({"metadata": {"name": "held"}, "spec": {"suspend": true, "template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox", "command": ["true"]}]}}}}),
        )
        .await;
    let held = p.wait_job("team-a", "held", "Suspended").await;
    assert_eq!(
        cond(&held, "Suspended").reason.as_deref(),
        Some("JobSuspended")
    );
    assert!(p.pods_of("team-a", "held").await.is_empty());
    let api: Api<Job> = Api::namespaced(p.client(), "team-a");
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"suspend": false}})),
    )
    .await
    .unwrap();
    let done = p.wait_job("team-a", "held", "Complete").await;
    assert_eq!(cond(&done, "Suspended").status, "False");
    assert_eq!(p.pods_of("team-a", "held").await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runner_restart_marks_the_running_pod_and_retries() {
    let Some(mut p) = Platform::start("runner_restart_marks_the_running_pod_and_retries").await
    else {
        return;
    };
    p.namespace("team-a").await;
    let _: Job = p
        .create(
            "team-a",
            json!({"metadata": {"name": "survivor"}, "spec": {"backoffLimit": 2, "template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", "sleep 1; echo finished"]}]}}}}),
        )
        .await;
    // Wait until the first Pod runs, then stop the runner.
    let pods: Api<Pod> = Api::namespaced(p.client(), "team-a");
    tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let list = pods
                .list(&ListParams::default().labels("job-name=survivor"))
                .await
                .unwrap();
            if list
                .items
                .iter()
                .any(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("first pod running");
    p.runner.take().unwrap().abort();
    tokio::time::sleep(Duration::from_millis(100)).await;
    p.start_runner();
    let done = p.wait_job("team-a", "survivor", "Complete").await;
    let st = done.status.as_ref().unwrap();
    assert_eq!((st.succeeded, st.failed), (Some(1), Some(1)));
    let all = p.pods_of("team-a", "survivor").await;
    assert_eq!(all.len(), 2);
    let first = all
        .iter()
        .find(|p| p.status.as_ref().unwrap().phase.as_deref() == Some("Failed"))
        .unwrap();
    assert_eq!(
        first.status.as_ref().unwrap().reason.as_deref(),
        Some("NodeRestart")
    );
    let t = container(first.status.as_ref().unwrap(), false, "c")
        .state
        .as_ref()
        .unwrap()
        .terminated
        .as_ref()
        .unwrap();
    assert_eq!(t.reason.as_deref(), Some("NodeRestart"));
}

/// Changing a Job while its pipeline runs never kills the running Pod.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspending_a_running_job_lets_its_pod_finish() {
    let Some(p) = Platform::start("suspending_a_running_job_lets_its_pod_finish").await else {
        return;
    };
    p.namespace("team-a").await;
    let _: Job = p
        .create(
            "team-a",
            json!({"metadata": {"name": "long-step"}, "spec": {"template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", "sleep 1; echo marker"]}]}}}}),
        )
        .await;
    let pods: Api<Pod> = Api::namespaced(p.client(), "team-a");
    tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let list = pods
                .list(&ListParams::default().labels("job-name=long-step"))
                .await
                .unwrap();
            if list
                .items
                .iter()
                .any(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("pod running");
    let jobs: Api<Job> = Api::namespaced(p.client(), "team-a");
    jobs.patch(
        "long-step",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"suspend": true}})),
    )
    .await
    .unwrap();
    let done = p.wait_job("team-a", "long-step", "Complete").await;
    assert_eq!(done.status.as_ref().unwrap().succeeded, Some(1));
    let all = p.pods_of("team-a", "long-step").await;
    assert_eq!(all.len(), 1);
    let log = p
        .config
        .log_path("team-a", all[0].metadata.name.as_ref().unwrap(), "c");
    assert_eq!(read(&log), "marker\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_limit_bounds_concurrent_pods() {
    let Some(mut p) = Platform::start("parallel_limit_bounds_concurrent_pods").await else {
        return;
    };
    p.runner.take().unwrap().abort();
    p.config.max_parallel_jobs = 1;
    p.start_runner();
    p.namespace("team-a").await;
    for i in 0..3 {
        let _: Job = p
            .create(
                "team-a",
                json!({"metadata": {"name": format!("serial-{i}")}, "spec": {"template": {"spec": {"restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", "sleep 0.3"]}]}}}}),
            )
            .await;
    }
    let mut spans = Vec::new();
    for i in 0..3 {
        let name = format!("serial-{i}");
        p.wait_job("team-a", &name, "Complete").await;
        let pod = &p.pods_of("team-a", &name).await[0];
        let t = container(pod.status.as_ref().unwrap(), false, "c")
            .state
            .as_ref()
            .unwrap()
            .terminated
            .clone()
            .unwrap();
        spans.push((t.started_at.unwrap().0, t.finished_at.unwrap().0));
    }
    spans.sort();
    for w in spans.windows(2) {
        assert!(
            w[0].1 <= w[1].0,
            "pods overlapped with max_parallel_jobs = 1: {spans:?}"
        );
    }

    // A standalone Pod that runs for ever does not take the only slot: Jobs still run.
    let tag = format!("slot-holder-{}", std::process::id());
    let _: Pod = p
        .create(
            "team-a",
            json!({"metadata": {"name": "server"}, "spec": {"terminationGracePeriodSeconds": 1,
                "containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", format!("sleep 100000; echo {tag}")]}]}}),
        )
        .await;
    wait_running(&p, "team-a", "server").await;
    let _: Job = p
        .create(
            "team-a",
            json!({"metadata": {"name": "beside-a-server"}, "spec": {"template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", "true"]}]}}}}),
        )
        .await;
    p.wait_job("team-a", "beside-a-server", "Complete").await;
    Api::<Pod>::namespaced(p.client(), "team-a")
        .delete("server", &Default::default())
        .await
        .unwrap();
    wait_processes_gone(&tag, "the server Pod's processes still run").await;
}

/// `kubectl delete pod --grace-period=N` (DeleteOptions `gracePeriodSeconds`) sets how
/// long the containers get, over the Pod's own `terminationGracePeriodSeconds`: a
/// container that ignores SIGTERM is killed after 1 s, not the Pod's 30 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grace_period_given_at_deletion_overrides_the_pods() {
    let Some(p) = Platform::start("a_grace_period_given_at_deletion_overrides_the_pods").await
    else {
        return;
    };
    p.namespace("team-a").await;
    let tag = format!("ignores-term-{}", std::process::id());
    // An ignored signal stays ignored across exec, so `sleep` ignores SIGTERM too.
    let script = format!("trap '' TERM; sleep 100000; echo {tag}");
    let _: Pod = p
        .create(
            "team-a",
            json!({"metadata": {"name": "stubborn"}, "spec": {"terminationGracePeriodSeconds": 30,
                "containers": [{"name": "c", "image": "busybox", "command": ["sh", "-c", script]}]}}),
        )
        .await;
    wait_running(&p, "team-a", "stubborn").await;
    wait_processes(&tag).await;
    let api: Api<Pod> = Api::namespaced(p.client(), "team-a");
    let params = kube::api::DeleteParams {
        grace_period_seconds: Some(1),
        ..Default::default()
    };
    api.delete("stubborn", &params).await.unwrap();
    wait_processes_gone(
        &tag,
        "the Pod's processes outlived the 1 s grace period given at deletion",
    )
    .await;
}

/// Runs a Job of three quick init containers and one quick container with the given
/// status window; returns every version of its Pod and its Job the watch saw after
/// creation, and the Pod's Event reasons (one per occurrence).
async fn quick_job_versions(
    p: &mut Platform,
    ns: &str,
    window: Duration,
) -> (Vec<Pod>, Vec<Job>, Vec<String>) {
    use futures::StreamExt;
    use kube::api::{WatchEvent, WatchParams};
    if let Some(h) = p.runner.take() {
        h.abort();
    }
    p.config.status_window = window;
    p.start_runner();
    p.namespace(ns).await;
    let pods: Api<Pod> = Api::namespaced(p.client(), ns);
    let jobs: Api<Job> = Api::namespaced(p.client(), ns);
    let pods_rv = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version;
    let jobs_rv = jobs
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version;
    let mut pod_watch = pods
        .watch(&WatchParams::default(), &pods_rv.unwrap())
        .await
        .unwrap()
        .boxed();
    let mut job_watch = jobs
        .watch(&WatchParams::default(), &jobs_rv.unwrap())
        .await
        .unwrap()
        .boxed();
    let quick = |n: &str| json!({"name": n, "image": "busybox", "command": ["true"]});
    let _: Job = p
        .create(
            ns,
            json!({"metadata": {"name": "quick"}, "spec": {"template": {"spec": {"restartPolicy": "Never",
                "initContainers": [quick("a"), quick("b"), quick("c")], "containers": [quick("main")]}}}}),
        )
        .await;
    p.wait_job(ns, "quick", "Complete").await;
    // Everything written until the watches have been quiet for a second.
    async fn drain<K>(
        watch: &mut futures::stream::BoxStream<'_, kube::Result<WatchEvent<K>>>,
    ) -> Vec<K> {
        let mut seen = Vec::new();
        while let Ok(Some(Ok(event))) =
            tokio::time::timeout(Duration::from_secs(1), watch.next()).await
        {
            if let WatchEvent::Added(o) | WatchEvent::Modified(o) = event {
                seen.push(o);
            }
        }
        seen
    }
    let (pod_versions, job_versions) = (drain(&mut pod_watch).await, drain(&mut job_watch).await);
    let pod = p.pods_of(ns, "quick").await.remove(0);
    let api: Api<Event> = Api::namespaced(p.client(), ns);
    let name = pod.metadata.name.unwrap();
    let reasons = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(name.as_str()))
        // An Event repeated with the same message is one Event with a count.
        .flat_map(|e| {
            std::iter::repeat_n(e.reason.unwrap_or_default(), e.count.unwrap_or(1) as usize)
        })
        .collect();
    (pod_versions, job_versions, reasons)
}

/// A Pod's quick container changes gather into one status write per window, with every
/// kubelet Event still recorded, and the Job's last count is written with its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quick_status_changes_are_gathered_and_the_last_count_ends_the_job() {
    let Some(mut p) = Platform::start("quick_status_changes_are_gathered").await else {
        return;
    };
    let (every, _, _) = quick_job_versions(&mut p, "every-change", Duration::ZERO).await;
    let (gathered, jobs, reasons) =
        quick_job_versions(&mut p, "gathered", Duration::from_secs(30)).await;
    // Created, the first change, the final status; the container states in between are
    // in one window.
    assert!(
        gathered.len() <= 3 && gathered.len() < every.len(),
        "{} Pod versions gathered against {} written for every change",
        gathered.len(),
        every.len()
    );
    let last = gathered.last().unwrap().status.clone().unwrap();
    assert_eq!(last.phase.as_deref(), Some("Succeeded"));
    assert_eq!(last.init_container_statuses.unwrap().len(), 3);
    let mut reasons = reasons;
    reasons.sort();
    let mut expected = vec!["Scheduled".to_string()];
    for r in ["Pulled", "Created", "Started"] {
        expected.extend(std::iter::repeat_n(r.to_string(), 4));
    }
    expected.sort();
    assert_eq!(reasons, expected);
    // No Job version counts the success without the Complete condition it decides.
    for job in &jobs {
        let st = job.status.clone().unwrap_or_default();
        if st.succeeded == Some(1) {
            assert_eq!(cond(job, "Complete").status, "True", "{st:?}");
        }
    }
    assert!(
        jobs.iter()
            .any(|j| j.status.as_ref().and_then(|s| s.succeeded) == Some(1))
    );
}
