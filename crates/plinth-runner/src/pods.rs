//! Pods as the kubelet runs them, shared by Job Pods and standalone Pods:
//! * one watch over all Pods: a deleted Pod (or one with `deletionTimestamp`) has its
//!   containers stopped (TERM, `terminationGracePeriodSeconds` (default 30 s), KILL) and
//!   its log directory removed; its private directory goes when its run ends; after
//!   each full list (the first, or a relist after the watch was lost), Pods deleted while
//!   nobody watched are stopped (no Delete event comes for them) and their files go
//!   ([`crate::sweep`]);
//! * standalone Pods (no controlling Job) run at once, outside the Job runner's
//!   `max_parallel_jobs` slots (those bound pipeline Jobs; a Pod that runs for ever must
//!   not hold pipelines up), with `restartPolicy` honoured: `Never` runs
//!   once, `OnFailure` runs again after a failure, `Always` (the default) runs again
//!   after every exit; restarts wait `retry_backoff` doubling up to `max_retry_backoff`
//!   (by default 10 s up to 6 min, close to the kubelet's CrashLoopBackOff), with
//!   `restartCount` and `lastState` kept;
//! * Events as the scheduler and the kubelet emit them: `Scheduled`, then per container
//!   `Pulled`, `Created`, `Started`, or a warning `Failed` (with the image-pull reason and
//!   what to do about it), `BackOff` before a restart.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateWaiting, ContainerStatus, ObjectReference, Pod, PodStatus,
};
use kube::api::Api;
use kube::runtime::watcher;
use plinth_api::events::EventType;
use tokio::sync::watch;

use crate::ctx::{Ctx, StopHandle};
use crate::error::RunnerError;
use crate::pod::{RunOptions, run_pod_once};
use crate::pod_status::write_pod_status;
use crate::procs::DEFAULT_GRACE_PERIOD;

/// A reference to `pod` for Events.
pub fn pod_reference(pod: &Pod) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: pod.metadata.name.clone(),
        namespace: pod.metadata.namespace.clone(),
        uid: pod.metadata.uid.clone(),
        resource_version: pod.metadata.resource_version.clone(),
        ..Default::default()
    }
}

/// Whether `pod` is controlled by a Job (the Job runner starts those).
pub fn controlled_by_job(pod: &Pod) -> bool {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "Job" && o.controller == Some(true))
}

fn grace_period(pod: &Pod) -> Duration {
    let secs = pod
        .metadata
        .deletion_grace_period_seconds
        .or_else(|| {
            pod.spec
                .as_ref()
                .and_then(|s| s.termination_grace_period_seconds)
        })
        .map(|s| Duration::from_secs(s.max(0) as u64));
    secs.unwrap_or(DEFAULT_GRACE_PERIOD)
}

fn finished(pod: &Pod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// Watches all Pods: stops deleted ones and starts standalone ones (module docs).
pub(crate) async fn watch_pods(ctx: Arc<Ctx>) {
    let api: Api<Pod> = Api::all(ctx.client.clone());
    let mut stream = watcher(api, watcher::Config::default()).boxed();
    // Pods of the full list being received; swept against when it is complete.
    let mut listed: HashSet<(String, String)> = Default::default();
    let mut listed_uids: HashSet<String> = Default::default();
    // Pods running when the (re)list began: those missing from it were deleted while
    // nobody watched, and no Delete event will come for them.
    let mut running_at_list: HashSet<String> = Default::default();
    while let Some(ev) = stream.next().await {
        if let Ok(watcher::Event::InitApply(pod)) = &ev {
            listed.insert((
                pod.metadata.namespace.clone().unwrap_or_default(),
                pod.metadata.name.clone().unwrap_or_default(),
            ));
            listed_uids.extend(pod.metadata.uid.clone());
        }
        match ev {
            Ok(watcher::Event::Init) => {
                listed.clear();
                listed_uids.clear();
                running_at_list = ctx.running_pods();
            }
            Ok(watcher::Event::InitDone) => {
                let gone = running_at_list.difference(&listed_uids);
                ctx.stop_unlisted(gone);
                let live = std::mem::take(&mut listed);
                let config = ctx.config.clone();
                let removed = tokio::task::spawn_blocking(move || {
                    crate::sweep::sweep(&config, &live, std::time::SystemTime::now())
                })
                .await
                .unwrap_or(0);
                if removed > 0 {
                    tracing::info!("removed the files of {removed} Pods that no longer exist");
                }
            }
            Ok(watcher::Event::Delete(pod)) => {
                ctx.stop_pod(&pod);
                let ns = pod.metadata.namespace.clone().unwrap_or_default();
                let name = pod.metadata.name.clone().unwrap_or_default();
                if let Some(dir) = ctx.config.log_path(&ns, &name, "x").parent() {
                    let _ = std::fs::remove_dir_all(dir);
                }
            }
            Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) => {
                if pod.metadata.deletion_timestamp.is_some() {
                    ctx.stop_pod(&pod);
                } else if !controlled_by_job(&pod) && !finished(&pod) {
                    start_standalone(&ctx, pod);
                }
            }
            Err(e) => {
                tracing::debug!(error = %e, "pod watch");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}

impl Ctx {
    /// A stop channel for the running `pod` (see [`RunOptions::stop`]), keyed by uid.
    pub(crate) fn register_stop(&self, pod: &Pod) -> watch::Receiver<Option<Duration>> {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let (tx, rx) = watch::channel(None);
        let grace = grace_period(pod);
        self.stops
            .lock()
            .expect("lock")
            .insert(uid, StopHandle { tx, grace });
        rx
    }

    pub(crate) fn unregister_stop(&self, uid: &str) {
        self.stops.lock().expect("lock").remove(uid);
    }

    fn stop_pod(&self, pod: &Pod) {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        if let Some(h) = self.stops.lock().expect("lock").get(&uid) {
            h.tx.send_replace(Some(grace_period(pod)));
        }
    }

    /// The uids of the Pods running now.
    fn running_pods(&self) -> HashSet<String> {
        self.stops.lock().expect("lock").keys().cloned().collect()
    }

    /// Stops the running Pods with these uids, which a full list no longer has.
    fn stop_unlisted<'a>(&self, uids: impl Iterator<Item = &'a String>) {
        let stops = self.stops.lock().expect("lock");
        for uid in uids {
            if let Some(h) = stops.get(uid) {
                tracing::info!(uid = %uid, "stopping a Pod deleted while the Pod watch was down");
                h.tx.send_replace(Some(h.grace));
            }
        }
    }
}

fn start_standalone(ctx: &Arc<Ctx>, pod: Pod) {
    let Some(uid) = pod.metadata.uid.clone() else {
        return;
    };
    if ctx.stops.lock().expect("lock").contains_key(&uid) {
        return;
    }
    let stop = ctx.register_stop(&pod);
    let ctx = ctx.clone();
    tokio::spawn(async move {
        let name = pod.metadata.name.clone().unwrap_or_default();
        if let Err(e) = run_standalone(&ctx, pod, stop).await {
            tracing::warn!(pod = %name, error = %e, "standalone pod");
        }
        ctx.unregister_stop(&uid);
    });
}

fn stopped(stop: &watch::Receiver<Option<Duration>>) -> bool {
    stop.borrow().is_some()
}

async fn run_standalone(
    ctx: &Ctx,
    pod: Pod,
    mut stop: watch::Receiver<Option<Duration>>,
) -> Result<(), RunnerError> {
    let ns = pod
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let policy = pod
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.clone())
        .unwrap_or_else(|| "Always".into());
    if !still_current(&api, &pod, &ns).await? {
        return Ok(());
    }
    let mut restarts = 0;
    let mut last: Option<PodStatus> = None;
    loop {
        // No Job slot: `max_parallel_jobs` bounds pipeline Jobs, and a long-running Pod
        // (`kubectl run` of a server or a debug shell) must not hold pipelines up.
        if stopped(&stop) {
            return Ok(());
        }
        let deadline = pod
            .spec
            .as_ref()
            .and_then(|s| s.active_deadline_seconds)
            .map(|s| tokio::time::Instant::now() + Duration::from_secs(s.max(0) as u64));
        let status = execute(
            ctx,
            &api,
            &pod,
            deadline,
            stop.clone(),
            restarts,
            last.as_ref(),
        )
        .await?;
        if stopped(&stop) {
            return Ok(());
        }
        let failed = status.phase.as_deref() == Some("Failed");
        let again = match policy.as_str() {
            "Never" => false,
            "OnFailure" => failed,
            _ => true,
        };
        if !again || status.reason.as_deref() == Some("DeadlineExceeded") {
            return Ok(());
        }
        restarts += 1;
        let delay = back_off(ctx, &api, &pod, &status, restarts).await?;
        last = Some(status);
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = stop.wait_for(|s| s.is_some()) => return Ok(()),
        }
    }
}

/// True if the stored Pod is still this one, not being deleted and not finished: the
/// watch may deliver an older state of a Pod that an earlier run just finished, so only
/// the stored Pod decides.
async fn still_current(api: &Api<Pod>, pod: &Pod, ns: &str) -> Result<bool, RunnerError> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let current = api
        .get_opt(&name)
        .await
        .map_err(|e| RunnerError::kube(format!("get Pod {ns}/{name}"), e))?;
    Ok(current.as_ref().is_some_and(|c| {
        c.metadata.uid == pod.metadata.uid
            && c.metadata.deletion_timestamp.is_none()
            && !finished(c)
    }))
}

/// Before restart number `restarts`: writes the `CrashLoopBackOff` status, records a
/// `BackOff` Warning per container, and returns the wait (`retry_backoff` doubling per
/// restart, capped at `max_retry_backoff`).
async fn back_off(
    ctx: &Ctx,
    api: &Api<Pod>,
    pod: &Pod,
    status: &PodStatus,
    restarts: i32,
) -> Result<Duration, RunnerError> {
    let delay = ctx
        .config
        .retry_backoff
        .saturating_mul(1u32 << (restarts - 1).min(16))
        .min(ctx.config.max_retry_backoff);
    let name = pod.metadata.name.as_deref().unwrap_or("");
    let waiting = back_off_status(status, restarts, pod, delay);
    write_pod_status(api, name, &waiting).await?;
    for c in pod.spec.iter().flat_map(|s| s.containers.iter()) {
        ctx.kubelet
            .record(
                &pod_reference(pod),
                EventType::Warning,
                "BackOff",
                format!(
                    "Back-off restarting failed container {} in pod {name}",
                    c.name
                ),
            )
            .await;
    }
    Ok(delay)
}

/// The status shown while a standalone Pod waits to run its containers again.
fn back_off_status(last: &PodStatus, restarts: i32, pod: &Pod, delay: Duration) -> PodStatus {
    let mut st = last.clone();
    st.phase = Some("Running".into());
    st.reason = None;
    st.message = None;
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    for c in st.container_statuses.iter_mut().flatten() {
        c.last_state = c.state.clone();
        c.restart_count = restarts;
        c.ready = false;
        c.started = Some(false);
        c.state = Some(ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some("CrashLoopBackOff".into()),
                message: Some(format!(
                    "back-off {}s restarting failed container={} pod={pod_name}",
                    delay.as_secs(),
                    c.name
                )),
            }),
            ..Default::default()
        });
    }
    st
}

/// What a restarted Pod's statuses carry from its previous run: `restartCount` and
/// each container's `lastState`.
#[derive(Clone)]
struct Carry {
    restarts: i32,
    last: Option<PodStatus>,
}

impl Carry {
    fn apply(&self, mut st: PodStatus) -> PodStatus {
        if self.restarts > 0 {
            for c in st.container_statuses.iter_mut().flatten() {
                c.restart_count = self.restarts;
                c.last_state = self
                    .last
                    .as_ref()
                    .and_then(|l| l.container_statuses.as_ref())
                    .and_then(|l| l.iter().find(|p| p.name == c.name))
                    .and_then(|p| p.state.clone().or(p.last_state.clone()));
            }
        }
        st
    }
}

/// Runs `pod` once, writing every status change (with `restartCount`/`lastState` carried
/// from `last`) and the kubelet's Events; returns the final status, also written.
pub(crate) async fn execute(
    ctx: &Ctx,
    api: &Api<Pod>,
    pod: &Pod,
    deadline: Option<tokio::time::Instant>,
    stop: watch::Receiver<Option<Duration>>,
    restarts: i32,
    last: Option<&PodStatus>,
) -> Result<PodStatus, RunnerError> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let reference = pod_reference(pod);
    if restarts == 0 {
        let note = format!(
            "Successfully assigned {ns}/{name} to {}",
            ctx.config.node_name
        );
        ctx.scheduler
            .record_queued(&reference, EventType::Normal, "Scheduled", note);
    }
    let carry = Carry {
        restarts,
        last: last.cloned(),
    };
    let (tx, rx) = watch::channel(PodStatus::default());
    let writer = spawn_status_writer(ctx, api, &reference, &name, carry.clone(), rx);
    let options = RunOptions {
        deadline,
        status: Some(tx),
        stop: Some(stop),
    };
    let result = run_pod_once(&ctx.client, &ctx.config, pod, options).await;
    let previous = match writer.take() {
        Some(w) => w.await.unwrap_or_default(),
        None => PodStatus::default(),
    };
    let status = match result {
        Ok(s) => carry.apply(s),
        Err(e) => PodStatus {
            phase: Some("Failed".into()),
            reason: Some("RunnerError".into()),
            message: Some(e.to_string()),
            start_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::now(),
            )),
            ..Default::default()
        },
    };
    for (t, reason, message) in pod_events(&previous, &status) {
        record_pod_event(&ctx.kubelet, &reference, t, reason, message).await;
    }
    write_pod_status(api, &name, &status).await?;
    Ok(status)
}

/// Records the Events of each status snapshot sent on `rx` and writes the snapshots:
/// the first at once, then at most one write per `status_window` carrying the latest
/// state (states in between are skipped). The task ends when the run does, without writing
/// what is left (the run's final status is written next), and returns the last status
/// whose Events it recorded.
fn spawn_status_writer(
    ctx: &Ctx,
    api: &Api<Pod>,
    reference: &ObjectReference,
    name: &str,
    carry: Carry,
    mut rx: watch::Receiver<PodStatus>,
) -> AbortOnDrop<PodStatus> {
    let (api, kubelet, window) = (api.clone(), ctx.kubelet.clone(), ctx.config.status_window);
    let (reference, name) = (reference.clone(), name.to_string());
    AbortOnDrop(Some(tokio::spawn(async move {
        let mut seen = PodStatus::default();
        let observe = async |seen: &mut PodStatus, rx: &mut watch::Receiver<PodStatus>| {
            let st = carry.apply(rx.borrow_and_update().clone());
            for (t, reason, message) in pod_events(seen, &st) {
                record_pod_event(&kubelet, &reference, t, reason, message).await;
            }
            *seen = st;
        };
        let mut written: Option<tokio::time::Instant> = None;
        while rx.changed().await.is_ok() {
            observe(&mut seen, &mut rx).await;
            // The first change is written at once; later ones gather until a window has
            // passed since the last write.
            if let Some(at) = written {
                let gathered = tokio::time::sleep_until(at + window);
                tokio::pin!(gathered);
                loop {
                    tokio::select! {
                        _ = &mut gathered => break,
                        changed = rx.changed() => match changed {
                            Ok(()) => observe(&mut seen, &mut rx).await,
                            Err(_) => return seen,
                        },
                    }
                }
            }
            if let Err(e) = write_pod_status(&api, &name, &seen).await {
                tracing::warn!(pod = %name, error = %e, "writing pod status");
            }
            written = Some(tokio::time::Instant::now());
        }
        seen
    })))
}

struct AbortOnDrop<T>(Option<tokio::task::JoinHandle<T>>);

impl<T> AbortOnDrop<T> {
    fn take(mut self) -> Option<tokio::task::JoinHandle<T>> {
        self.0.take()
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        if let Some(h) = self.0.take() {
            h.abort();
        }
    }
}

/// Waiting reasons that mean the image could not be pulled or run.
const IMAGE_REASONS: &[&str] = &[
    "ErrImagePull",
    "ImagePullBackOff",
    "ErrImageNeverPull",
    "InvalidImageName",
];

fn started(s: &ContainerStatus) -> bool {
    s.state
        .as_ref()
        .is_some_and(|st| st.running.is_some() || st.terminated.is_some())
}

fn waiting_reason(s: &ContainerStatus) -> Option<(&str, &str)> {
    let w = s.state.as_ref()?.waiting.as_ref()?;
    Some((w.reason.as_deref()?, w.message.as_deref().unwrap_or("")))
}

/// Records a Pod Event: a Warning is written before the Pod's status, so whoever sees
/// the Pod fail finds why among its Events; a Normal one is queued, so the Pod does not
/// wait on it.
async fn record_pod_event(
    kubelet: &plinth_api::events::EventRecorder,
    reference: &k8s_openapi::api::core::v1::ObjectReference,
    t: EventType,
    reason: &str,
    message: String,
) {
    match t {
        EventType::Normal => kubelet.record_queued(reference, t, reason, message),
        EventType::Warning => kubelet.record(reference, t, reason, message).await,
    }
}

/// The kubelet Events for the change from `prev` to `next` (per container, in order):
/// `Pulled`, `Created`, `Started` when a container started; a warning `Failed` when it
/// could not (an image reason gets "Failed to pull image" and `Error: <reason>`).
pub fn pod_events(prev: &PodStatus, next: &PodStatus) -> Vec<(EventType, &'static str, String)> {
    let mut out = Vec::new();
    let lists = |st: &PodStatus| -> Vec<ContainerStatus> {
        st.init_container_statuses
            .iter()
            .chain(st.container_statuses.iter())
            .flatten()
            .cloned()
            .collect()
    };
    let before: HashMap<String, ContainerStatus> = lists(prev)
        .into_iter()
        .map(|c| (c.name.clone(), c))
        .collect();
    for c in lists(next) {
        let old = before.get(&c.name);
        let was_started = old.is_some_and(|o| started(o) && o.restart_count == c.restart_count);
        if started(&c) && !was_started {
            let term = c.state.as_ref().and_then(|s| s.terminated.as_ref());
            if let Some(t) = term.filter(|t| t.reason.as_deref() == Some("StartError")) {
                out.push((
                    EventType::Warning,
                    "Failed",
                    format!("Error: {}", t.message.as_deref().unwrap_or("cannot start")),
                ));
                continue;
            }
            out.push((
                EventType::Normal,
                "Pulled",
                format!("Container image {:?} already present on machine", c.image),
            ));
            out.push((
                EventType::Normal,
                "Created",
                format!("Created container: {}", c.name),
            ));
            out.push((
                EventType::Normal,
                "Started",
                format!("Started container {}", c.name),
            ));
        }
        if let Some((reason, message)) = waiting_reason(&c)
            && !matches!(
                reason,
                "PodInitializing" | "ContainerCreating" | "CrashLoopBackOff"
            )
            && old.and_then(waiting_reason).map(|(r, _)| r) != Some(reason)
        {
            if IMAGE_REASONS.contains(&reason) {
                out.push((EventType::Warning, "Failed", message.to_string()));
            }
            out.push((
                EventType::Warning,
                "Failed",
                if IMAGE_REASONS.contains(&reason) {
                    format!("Error: {reason}")
                } else {
                    format!("Error: {message}")
                },
            ));
        }
    }
    if next.reason.as_deref() == Some("DeadlineExceeded")
        && prev.reason.as_deref() != Some("DeadlineExceeded")
    {
        out.push((
            EventType::Warning,
            "DeadlineExceeded",
            "Pod was active on the node longer than the specified deadline".into(),
        ));
    }
    out
}
