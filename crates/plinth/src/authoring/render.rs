//! Rendering a workflow locally: what a resource request's (or a Promise's) configure
//! workflow produces, with no platform running.
//!
//! [`render`] starts a private platform in a temporary data dir (the embedded API server,
//! the controllers and the Job runner, exactly as `plinth up` runs them, with the given
//! image map), registers a local Git state store and the Destinations, applies the
//! Promise, the extra objects and the request, and waits for the workflow to finish. So
//! the Jobs are the controllers' own (same builder, same adapter containers) and run on
//! the same runner backends. It then reads back the Works the pipelines produced and
//! works out, with the scheduler's matching rules and the state store layout, the path
//! every output file gets at every matching Destination.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, anyhow, bail};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use kube::{Client, ResourceExt};
use plinth_api::constants::{condition_types, labels, reasons};
use plinth_api::{Destination, Work, WorkPlacement};
use plinth_controllers::work::scheduler::{
    DestinationFacts, choose_for_resource, destination_matches, resolve_selectors,
};
use plinth_controllers::workplacement::{Target, resolve_target};
use serde_json::{Value, json};

use crate::platform::{Platform, PlatformOptions};

/// Name of the Git state store every rendered Destination writes to.
const RENDER_STORE: &str = "render";

/// Status fields Kratix manages itself: dropped from a given existing status (the
/// workflow sets them afresh) and from the rendered status where they carry times.
const KRATIX_STATUS_FIELDS: &[&str] = &[
    "conditions",
    "observedGeneration",
    "lastSuccessfulConfigureWorkflowTime",
    "workflows",
    "workflowsSucceeded",
    "workflowsFailed",
];

/// What to render.
#[derive(Clone, Debug, Default)]
pub struct RenderInput {
    /// The Promise object.
    pub promise: Value,
    /// The resource request; `None` renders the Promise's own configure workflow.
    pub request: Option<Value>,
    /// A status the request already has (its Kratix-managed fields are ignored).
    pub existing_status: Option<Value>,
    /// Destinations to schedule to; empty means `plinth up`'s defaults (`local`, labelled
    /// `environment: dev`, and `platform`, labelled `environment: platform`, strict).
    pub destinations: Vec<Value>,
    /// Objects applied before the request (ConfigMaps, Secrets, other requests...).
    pub objects: Vec<Value>,
    /// Runner image map (images run as local commands).
    pub image_map: Option<PathBuf>,
    /// Run only this pipeline of the workflow.
    pub pipeline: Option<String>,
    /// Give up after this long.
    pub timeout: Duration,
}

/// One output file at one Destination.
#[derive(Clone, Debug, PartialEq)]
pub struct OutputFile {
    /// Destination name.
    pub destination: String,
    /// Path relative to the state store's root (the Destination's path included).
    pub path: String,
    /// File content.
    pub content: String,
    /// False when the Destination matches but the scheduler would pick another one
    /// (a resource workload group goes to exactly one Destination).
    pub scheduled: bool,
}

/// How one workload group is scheduled.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupScheduling {
    /// Pipeline that produced it.
    pub pipeline: String,
    /// Output directory of the group (`.` for the default group).
    pub directory: String,
    /// The resolved selector (all sources merged, the Promise's own winning).
    pub selectors: BTreeMap<String, String>,
    /// Destinations that match, in name order.
    pub matching: Vec<String>,
    /// Destinations it would be written to.
    pub scheduled: Vec<String>,
}

/// Why the workflow failed.
#[derive(Clone, Debug, PartialEq)]
pub struct Failure {
    /// Failed pipeline.
    pub pipeline: String,
    /// Failed container (the step), when known.
    pub step: Option<String>,
    /// Each container's log, in run order, up to the failed one.
    pub logs: Vec<(String, String)>,
    /// The condition message Kratix reported.
    pub message: String,
}

/// One file of a Work, before scheduling.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkFile {
    /// Pipeline that produced it.
    pub pipeline: String,
    /// Path in the pipeline's output (`/kratix/output`).
    pub filepath: String,
    /// File content.
    pub content: String,
}

/// What a workflow produced.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rendered {
    /// Every file of the Works, ordered by pipeline then path.
    pub works: Vec<WorkFile>,
    /// Output files, ordered by Destination then path.
    pub outputs: Vec<OutputFile>,
    /// Scheduling of every workload group.
    pub groups: Vec<GroupScheduling>,
    /// The status the request (or Promise) would get, without Kratix's timestamps.
    pub status: Value,
    /// Set when the workflow failed.
    pub failure: Option<Failure>,
}

/// Plain progress lines on stderr; a seam for richer progress display.
pub trait Progress: Send + Sync {
    /// Reports that a step starts.
    fn step(&self, message: &str);
}

/// [`Progress`] that prints one line per step to stderr.
pub struct PlainLines;

impl Progress for PlainLines {
    fn step(&self, message: &str) {
        eprintln!("{message}");
    }
}

/// Renders `input` in a private temporary platform (removed afterwards).
///
/// # Errors
/// The platform cannot start, an object is refused by the API (the error names it), or
/// the workflow does not finish within `input.timeout`. A failing pipeline is not an
/// error: it is reported in [`Rendered::failure`].
pub async fn render(input: &RenderInput, progress: &dyn Progress) -> anyhow::Result<Rendered> {
    let data = tempfile::Builder::new()
        .prefix("plinth-render-")
        .tempdir()
        .context("creating a temporary data dir")?;
    progress.step("starting a private platform");
    let platform = Platform::start(PlatformOptions {
        image_map: input.image_map.clone(),
        git_batch_window: Duration::from_millis(50),
        ..PlatformOptions::private(data.path().to_path_buf())
    })
    .await
    .context("starting the private platform")?;
    let result = render_in(&platform, data.path(), input, progress).await;
    platform.shutdown().await;
    result
}

async fn render_in(
    platform: &Platform,
    data_dir: &Path,
    input: &RenderInput,
    progress: &dyn Progress,
) -> anyhow::Result<Rendered> {
    let client = platform.server.client();
    let deadline = Instant::now() + input.timeout;
    let destinations = register_destinations(&client, data_dir, &input.destinations).await?;
    let promise = promise_for(input)?;
    let promise_name = name_of(&promise, "the Promise")?;
    progress.step(&format!("installing Promise {promise_name}"));
    create(&client, &promise)
        .await
        .with_context(|| format!("applying Promise {promise_name}"))?;
    let promise_wf = Subject::promise(&promise_name);
    if let Some(failure) = wait_promise(&client, data_dir, &promise_wf, deadline).await? {
        return Ok(Rendered {
            failure: Some(failure),
            status: promise_status(&client, &promise_name).await?,
            ..Rendered::default()
        });
    }
    let Some(request) = &input.request else {
        let works = list_works(&client, None, &promise_wf).await?;
        let mut out = place(&works, &destinations)?;
        out.status = promise_status(&client, &promise_name).await?;
        return Ok(out);
    };
    for obj in &input.objects {
        progress.step(&format!(
            "applying {} {}",
            obj["kind"].as_str().unwrap_or("object"),
            obj["metadata"]["name"].as_str().unwrap_or("")
        ));
        apply_any(&client, obj).await?;
    }
    let (api, name, ns) = create_request(&client, &promise, request, input).await?;
    progress.step(&format!(
        "running the configure workflow of {} {ns}/{name}",
        request["kind"].as_str().unwrap_or("request")
    ));
    let subject = Subject::resource(&promise_name, &name, &ns);
    let failure = wait_request(&api, &client, data_dir, &subject, deadline).await?;
    let works = if failure.is_none() {
        list_works(&client, Some(&ns), &subject).await?
    } else {
        Vec::new()
    };
    let mut out = place(&works, &destinations)?;
    out.status = if failure.is_none() {
        settled_status(&api, &name, deadline).await?
    } else {
        clean_status(api.get(&name).await?.data.get("status"))
    };
    out.failure = failure;
    Ok(out)
}

/// The Promise as given, restricted to `input.pipeline` when one is named.
fn promise_for(input: &RenderInput) -> anyhow::Result<Value> {
    let mut promise = input.promise.clone();
    if promise["kind"] != "Promise" {
        bail!(
            "the Promise file holds kind {} (want Promise)",
            promise["kind"]
        );
    }
    let Some(wanted) = &input.pipeline else {
        return Ok(promise);
    };
    let kind = if input.request.is_some() {
        "resource"
    } else {
        "promise"
    };
    let list = &mut promise["spec"]["workflows"][kind]["configure"];
    let names: Vec<String> = list
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["metadata"]["name"].as_str().map(str::to_string))
        .collect();
    if !names.contains(wanted) {
        bail!(
            "--pipeline {wanted}: the Promise's {kind} configure workflow has no such pipeline (it has: {})",
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        );
    }
    if let Some(a) = list.as_array_mut() {
        a.retain(|p| p["metadata"]["name"].as_str() == Some(wanted));
    }
    Ok(promise)
}

fn name_of(obj: &Value, what: &str) -> anyhow::Result<String> {
    obj["metadata"]["name"]
        .as_str()
        .filter(|n| !n.is_empty())
        .map(str::to_string)
        .ok_or_else(|| anyhow!("{what} has no metadata.name"))
}

/// The objects a workflow is tracked by: its Jobs' and Works' labels.
struct Subject {
    promise: String,
    resource: Option<(String, String)>,
}

impl Subject {
    fn promise(promise: &str) -> Subject {
        Subject {
            promise: promise.into(),
            resource: None,
        }
    }

    fn resource(promise: &str, name: &str, ns: &str) -> Subject {
        Subject {
            promise: promise.into(),
            resource: Some((name.into(), ns.into())),
        }
    }

    fn selector(&self) -> String {
        let mut s = format!("{}={}", labels::PROMISE_NAME, self.promise);
        match &self.resource {
            Some((name, _)) => s.push_str(&format!(",{}={name}", labels::RESOURCE_NAME)),
            None => s.push_str(&format!(",{}=promise", labels::WORKFLOW_TYPE)),
        }
        s
    }
}

fn kratix_resource(kind: &str, plural: &str) -> ApiResource {
    let gvk = GroupVersionKind::gvk("platform.kratix.io", "v1alpha1", kind);
    ApiResource::from_gvk_with_plural(&gvk, plural)
}

/// Creates the local state store and the Destinations (given ones re-pointed at it).
async fn register_destinations(
    client: &Client,
    data_dir: &Path,
    given: &[Value],
) -> anyhow::Result<Vec<Destination>> {
    let repo = data_dir.join("render-store.git");
    plinth_statestore::git::init_bare(&repo, "main")
        .with_context(|| format!("creating the state store {}", repo.display()))?;
    let store = json!({
        "apiVersion": "platform.kratix.io/v1alpha1",
        "kind": "GitStateStore",
        "metadata": {"name": RENDER_STORE},
        "spec": {"url": format!("file://{}", repo.display()), "branch": "main", "authMethod": "basicAuth"},
    });
    create(client, &store).await?;
    let defaults = [
        json!({"apiVersion": "platform.kratix.io/v1alpha1", "kind": "Destination",
               "metadata": {"name": "local", "labels": {"environment": "dev"}},
               "spec": {"path": "local"}}),
        json!({"apiVersion": "platform.kratix.io/v1alpha1", "kind": "Destination",
               "metadata": {"name": "platform", "labels": {"environment": "platform"}},
               "spec": {"path": "platform", "strictMatchLabels": true}}),
    ];
    let list: &[Value] = if given.is_empty() { &defaults } else { given };
    let mut out = Vec::new();
    for d in list {
        if d["kind"] != "Destination" {
            bail!(
                "a Destinations file holds kind {} (want Destination)",
                d["kind"]
            );
        }
        let mut d = d.clone();
        d["spec"]["stateStoreRef"] = json!({"kind": "GitStateStore", "name": RENDER_STORE});
        let name = name_of(&d, "a Destination")?;
        create(client, &d)
            .await
            .with_context(|| format!("applying Destination {name}"))?;
        out.push(
            serde_json::from_value::<Destination>(d)
                .with_context(|| format!("reading Destination {name}"))?,
        );
    }
    out.sort_by_key(|d| d.name_any());
    Ok(out)
}

/// Creates a Kratix object (Promise, Destination, state store).
async fn create(client: &Client, obj: &Value) -> anyhow::Result<()> {
    let kind = obj["kind"].as_str().unwrap_or_default();
    let plural = match kind {
        "Promise" => "promises",
        "Destination" => "destinations",
        "GitStateStore" => "gitstatestores",
        other => bail!("unexpected kind {other}"),
    };
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &kratix_resource(kind, plural));
    let o: DynamicObject = serde_json::from_value(obj.clone())?;
    api.create(&PostParams::default(), &o).await?;
    Ok(())
}

/// Applies any object by discovering its kind (server-side apply).
async fn apply_any(client: &Client, obj: &Value) -> anyhow::Result<()> {
    let what = format!(
        "{} {}",
        obj["kind"].as_str().unwrap_or("object"),
        obj["metadata"]["name"].as_str().unwrap_or("")
    );
    let api_version = obj["apiVersion"].as_str().unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, obj["kind"].as_str().unwrap_or_default());
    let (ar, caps) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .with_context(|| format!("{what}: kind {api_version} {} is not served", gvk.kind))?;
    let name = name_of(obj, &what)?;
    let api: Api<DynamicObject> = match caps.scope {
        kube::discovery::Scope::Namespaced => {
            let ns = obj["metadata"]["namespace"].as_str().unwrap_or("default");
            ensure_namespace(client, ns).await?;
            Api::namespaced_with(client.clone(), ns, &ar)
        }
        kube::discovery::Scope::Cluster => Api::all_with(client.clone(), &ar),
    };
    api.patch(
        &name,
        &PatchParams::apply("plinth-render").force(),
        &Patch::Apply(obj),
    )
    .await
    .with_context(|| format!("applying {what}"))?;
    Ok(())
}

async fn ensure_namespace(client: &Client, ns: &str) -> anyhow::Result<()> {
    use k8s_openapi::api::core::v1::Namespace;
    let api: Api<Namespace> = Api::all(client.clone());
    if api.get_opt(ns).await?.is_none() {
        let obj: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}}))?;
        api.create(&PostParams::default(), &obj)
            .await
            .with_context(|| format!("creating namespace {ns}"))?;
    }
    Ok(())
}

/// Waits until the Promise is Available; returns its workflow's failure if it fails.
async fn wait_promise(
    client: &Client,
    data_dir: &Path,
    subject: &Subject,
    deadline: Instant,
) -> anyhow::Result<Option<Failure>> {
    let api: Api<DynamicObject> =
        Api::all_with(client.clone(), &kratix_resource("Promise", "promises"));
    loop {
        let p = api.get(&subject.promise).await?;
        let status = p.data.get("status").cloned().unwrap_or(Value::Null);
        if plinth_api::constants::promise_status::is_available(&status) {
            return Ok(None);
        }
        let ns = plinth_api::constants::SYSTEM_NAMESPACE;
        if let Some(f) = failed_job(client, data_dir, subject, ns, &status).await? {
            return Ok(Some(f));
        }
        if Instant::now() > deadline {
            bail!(
                "Promise {} did not become Available in time; its status: {}",
                subject.promise,
                crate::authoring::yaml::to_yaml(&status).trim_end()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Creates the request (paused while its existing status is written, so the workflow
/// sees that status).
async fn create_request(
    client: &Client,
    promise: &Value,
    request: &Value,
    input: &RenderInput,
) -> anyhow::Result<(Api<DynamicObject>, String, String)> {
    let crd = &promise["spec"]["api"];
    let plural = crd["spec"]["names"]["plural"]
        .as_str()
        .ok_or_else(|| anyhow!("the Promise has no spec.api (no request kind to render)"))?;
    let group = crd["spec"]["group"].as_str().unwrap_or_default();
    let api_version = request["apiVersion"].as_str().unwrap_or_default();
    let version = api_version.rsplit('/').next().unwrap_or_default();
    let kind = request["kind"].as_str().unwrap_or_default();
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let ar = ApiResource::from_gvk_with_plural(&gvk, plural);
    let name = name_of(request, "the request")?;
    let ns = request["metadata"]["namespace"]
        .as_str()
        .unwrap_or("default")
        .to_string();
    ensure_namespace(client, &ns).await?;
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
    let mut obj = request.clone();
    obj["metadata"]["namespace"] = json!(ns);
    let status = input
        .existing_status
        .as_ref()
        .map(|s| strip_kratix_fields(s.clone()));
    if status.is_some() {
        obj["metadata"]["labels"][labels::PAUSED] = json!(labels::TRUE);
    }
    let o: DynamicObject = serde_json::from_value(obj)?;
    api.create(&PostParams::default(), &o)
        .await
        .with_context(|| format!("applying the request {kind} {ns}/{name}"))?;
    if let Some(status) = status {
        api.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": status})),
        )
        .await
        .with_context(|| format!("setting the existing status of {ns}/{name}"))?;
        api.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {labels::PAUSED: null}}})),
        )
        .await?;
    }
    Ok((api, name, ns))
}

/// Waits until the request's configure workflow completed or failed.
async fn wait_request(
    api: &Api<DynamicObject>,
    client: &Client,
    data_dir: &Path,
    subject: &Subject,
    deadline: Instant,
) -> anyhow::Result<Option<Failure>> {
    let (name, ns) = subject.resource.clone().expect("a resource subject");
    loop {
        let rr = api.get(&name).await?;
        let status = rr.data.get("status").cloned().unwrap_or(Value::Null);
        let done = plinth_controllers::support::condition(
            &status,
            condition_types::CONFIGURE_WORKFLOW_COMPLETED,
        )
        .is_some_and(|c| c["status"] == "True");
        if done {
            return Ok(None);
        }
        if let Some(f) = failed_job(client, data_dir, subject, &ns, &status).await? {
            return Ok(Some(f));
        }
        if Instant::now() > deadline {
            bail!(
                "the configure workflow of {ns}/{name} did not finish in time; its status: {}",
                crate::authoring::yaml::to_yaml(&status).trim_end()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The failure of the subject's workflow: its first failed pipeline pod (the runner
/// would retry it, but a local render reports the first failure), or a failure Kratix
/// reports without one.
async fn failed_job(
    client: &Client,
    data_dir: &Path,
    subject: &Subject,
    ns: &str,
    status: &Value,
) -> anyhow::Result<Option<Failure>> {
    let condition = plinth_controllers::support::condition(
        status,
        condition_types::CONFIGURE_WORKFLOW_COMPLETED,
    );
    let message = condition
        .and_then(|c| c["message"].as_str())
        .unwrap_or_default()
        .to_string();
    let reported = condition.is_some_and(|c| {
        c["status"] == "False" && c["reason"] == reasons::CONFIGURE_WORKFLOW_FAILED
    });
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let lp = ListParams::default().labels(&subject.selector());
    let mut failed: Vec<Pod> = pods
        .list(&lp)
        .await?
        .items
        .into_iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed"))
        .collect();
    failed.sort_by_key(|p| p.metadata.creation_timestamp.clone());
    let Some(pod) = failed.into_iter().next() else {
        return Ok(reported.then(|| Failure {
            pipeline: String::new(),
            step: None,
            logs: Vec::new(),
            message,
        }));
    };
    let pipeline = pod
        .labels()
        .get(labels::PIPELINE_NAME)
        .cloned()
        .unwrap_or_default();
    let (step, code, logs) = failed_step(&pod, data_dir, ns);
    let message = match (&step, code) {
        (Some(s), Some(c)) => format!("container {s} exited with code {c}"),
        _ => message,
    };
    Ok(Some(Failure {
        pipeline,
        step,
        logs,
        message,
    }))
}

/// The failed container of a pipeline pod and the logs of the containers that ran.
fn failed_step(
    pod: &Pod,
    data_dir: &Path,
    ns: &str,
) -> (Option<String>, Option<i32>, Vec<(String, String)>) {
    let status = pod.status.clone().unwrap_or_default();
    let all: Vec<_> = status
        .init_container_statuses
        .unwrap_or_default()
        .into_iter()
        .chain(status.container_statuses.unwrap_or_default())
        .collect();
    let mut logs = Vec::new();
    let mut step = None;
    let mut code = None;
    for c in &all {
        let file = data_dir
            .join("pod-logs")
            .join(ns)
            .join(pod.name_any())
            .join(format!("{}.log", c.name));
        let ran = c.state.as_ref().is_some_and(|s| s.terminated.is_some());
        if ran {
            logs.push((
                c.name.clone(),
                std::fs::read_to_string(&file).unwrap_or_default(),
            ));
        }
        let exit = c
            .state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .map(|t| t.exit_code)
            .filter(|c| *c != 0);
        if exit.is_some() {
            step = Some(c.name.clone());
            code = exit;
            break;
        }
    }
    (step, code, logs)
}

/// The subject's Works (resource Works in `ns`, or the Promise's own).
async fn list_works(
    client: &Client,
    ns: Option<&str>,
    subject: &Subject,
) -> anyhow::Result<Vec<Work>> {
    let api: Api<Work> = match ns {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let mut lp =
        ListParams::default().labels(&format!("{}={}", labels::PROMISE_NAME, subject.promise));
    if let Some((name, _)) = &subject.resource {
        lp = lp.labels(&format!("{}={name}", labels::RESOURCE_NAME));
    }
    let mut works = api.list(&lp).await?.items;
    if subject.resource.is_none() {
        works.retain(|w| {
            w.spec
                .resource_name
                .as_deref()
                .unwrap_or_default()
                .is_empty()
        });
    }
    works.sort_by_key(|w| w.name_any());
    Ok(works)
}

/// Where every workload group of `works` goes: the scheduler's matching and choice,
/// and the state store layout of each matching Destination.
fn place(works: &[Work], destinations: &[Destination]) -> anyhow::Result<Rendered> {
    let facts: Vec<DestinationFacts> = destinations.iter().map(DestinationFacts::of).collect();
    let mut out = Rendered::default();
    for work in works {
        let pipeline = work
            .labels()
            .get(labels::PIPELINE_NAME)
            .cloned()
            .unwrap_or_default();
        let is_resource =
            work.labels().get(labels::WORK_TYPE).map(String::as_str) == Some("resource");
        for group in work.spec.workload_groups.as_deref().unwrap_or(&[]) {
            let empty = BTreeMap::new();
            let sels = group.destination_selectors.as_deref().unwrap_or(&[]);
            let selectors = resolve_selectors(sels.iter().map(|s| {
                (
                    s.source.as_deref().unwrap_or_default(),
                    s.match_labels.as_ref().unwrap_or(&empty),
                )
            }));
            let candidates: Vec<&DestinationFacts> = facts
                .iter()
                .filter(|d| destination_matches(d, &selectors, false))
                .collect();
            let matching: Vec<String> = candidates.iter().map(|d| d.name.clone()).collect();
            let scheduled: Vec<String> = if is_resource {
                choose_for_resource(
                    &work.namespace().unwrap_or_default(),
                    &work.name_any(),
                    &group.id,
                    &candidates,
                )
                .map(|d| vec![d.to_string()])
                .unwrap_or_default()
            } else {
                matching.clone()
            };
            for dest in destinations
                .iter()
                .filter(|d| matching.contains(&d.name_any()))
            {
                let wp = placement(work, group, &pipeline, &dest.name_any());
                let scheduled = scheduled.contains(&dest.name_any());
                for (path, content) in target_files(dest, &wp)? {
                    out.outputs.push(OutputFile {
                        destination: dest.name_any(),
                        path,
                        content,
                        scheduled,
                    });
                }
            }
            out.groups.push(GroupScheduling {
                pipeline: pipeline.clone(),
                directory: group.directory.clone(),
                selectors,
                matching,
                scheduled,
            });
        }
    }
    out.outputs
        .sort_by(|a, b| (&a.destination, &a.path).cmp(&(&b.destination, &b.path)));
    out.works = work_files(works);
    Ok(out)
}

/// Every file of `works`, decoded, ordered by pipeline then path.
pub fn work_files(works: &[Work]) -> Vec<WorkFile> {
    let mut out = Vec::new();
    for work in works {
        let pipeline = work
            .labels()
            .get(labels::PIPELINE_NAME)
            .cloned()
            .unwrap_or_default();
        for group in work.spec.workload_groups.as_deref().unwrap_or(&[]) {
            for w in group.workloads.as_deref().unwrap_or(&[]) {
                let content = plinth_controllers::workplacement::decode_workload(w)
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or_else(|e| format!("<undecodable: {e}>"));
                out.push(WorkFile {
                    pipeline: pipeline.clone(),
                    filepath: w.filepath.clone(),
                    content,
                });
            }
        }
    }
    out.sort_by(|a, b| (&a.pipeline, &a.filepath).cmp(&(&b.pipeline, &b.filepath)));
    out
}

/// The WorkPlacement the scheduler would create for `group` on `dest`.
fn placement(
    work: &Work,
    group: &plinth_api::WorkloadGroup,
    pipeline: &str,
    dest: &str,
) -> WorkPlacement {
    let mut wp = WorkPlacement::new(
        &format!("{}.{dest}", work.name_any()),
        plinth_api::WorkPlacementSpec {
            target_destination_name: Some(dest.to_string()),
            workloads: group.workloads.clone(),
            promise_name: work.spec.promise_name.clone(),
            resource_name: work.spec.resource_name.clone(),
            id: Some(group.id.clone()),
            ..Default::default()
        },
    );
    wp.metadata.namespace = work.namespace();
    wp.metadata.labels = Some(BTreeMap::from([(
        labels::PIPELINE_NAME.to_string(),
        pipeline.to_string(),
    )]));
    wp
}

/// `(path, content)` of every file `wp` writes at `dest`.
fn target_files(dest: &Destination, wp: &WorkPlacement) -> anyhow::Result<Vec<(String, String)>> {
    let text = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
    let target = resolve_target(dest, wp).map_err(|t| anyhow!("{}", t.message))?;
    Ok(match target {
        Target::Nested { dir, files } => files
            .into_iter()
            .map(|(p, c)| (format!("{dir}/{p}"), text(c)))
            .collect(),
        Target::Flat { files, .. } => files.into_iter().map(|(p, c)| (p, text(c))).collect(),
        Target::Aggregated { file } => {
            let docs: Vec<String> = wp
                .spec
                .workloads
                .iter()
                .flatten()
                .filter_map(|w| plinth_controllers::workplacement::decode_workload(w).ok())
                .map(text)
                .collect();
            vec![(file, docs.join("---\n"))]
        }
    })
}

async fn promise_status(client: &Client, name: &str) -> anyhow::Result<Value> {
    let api: Api<DynamicObject> =
        Api::all_with(client.clone(), &kratix_resource("Promise", "promises"));
    Ok(clean_status(api.get(name).await?.data.get("status")))
}

fn strip_kratix_fields(mut status: Value) -> Value {
    if let Some(m) = status.as_object_mut() {
        for k in KRATIX_STATUS_FIELDS {
            m.remove(*k);
        }
    }
    status
}

/// The request's status once the platform is done with it: every pipeline succeeded and
/// nothing changed for a moment (the Works' write results are reported after the
/// workflow completes).
async fn settled_status(
    api: &Api<DynamicObject>,
    name: &str,
    deadline: Instant,
) -> anyhow::Result<Value> {
    const STABLE: Duration = Duration::from_millis(1500);
    let mut last = Value::Null;
    let mut since = Instant::now();
    loop {
        let raw = api.get(name).await?.data.get("status").cloned();
        let status = clean_status(raw.as_ref());
        let complete = status["workflows"] == status["workflowsSucceeded"];
        if status != last {
            last = status;
            since = Instant::now();
        } else if complete && since.elapsed() >= STABLE {
            return Ok(last);
        }
        if Instant::now() > deadline {
            return Ok(last);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The status without what changes from run to run: condition transition times and
/// the last-run timestamp.
pub fn clean_status(status: Option<&Value>) -> Value {
    let mut s = status.cloned().unwrap_or_else(|| json!({}));
    if let Some(m) = s.as_object_mut() {
        m.remove("lastSuccessfulConfigureWorkflowTime");
        if let Some(cs) = m.get_mut("conditions").and_then(Value::as_array_mut) {
            for c in cs.iter_mut().filter_map(Value::as_object_mut) {
                c.remove("lastTransitionTime");
            }
            cs.sort_by(|a, b| a["type"].as_str().cmp(&b["type"].as_str()));
        }
        if let Some(wf) = m
            .get_mut("kratix")
            .and_then(|k| k.pointer_mut("/workflows"))
            .and_then(Value::as_object_mut)
        {
            wf.remove("lastSuccessfulConfigureWorkflowTime");
        }
        let pipelines = m
            .get_mut("kratix")
            .and_then(|k| k.pointer_mut("/workflows/pipelines"))
            .and_then(Value::as_array_mut);
        for p in pipelines
            .into_iter()
            .flatten()
            .filter_map(Value::as_object_mut)
        {
            p.remove("lastTransitionTime");
        }
    }
    s
}
