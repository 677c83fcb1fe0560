//! Lists what the status tree is built from through the Kubernetes API (so it works
//! against `plinth up` and a real cluster), and watches the same kinds for `--watch` and
//! the web view's live updates.

use std::collections::BTreeMap;

use anyhow::Context as _;
use futures::{Stream, StreamExt};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::runtime::watcher;
use plinth_api::constants::labels;
use serde_json::Value;

use super::tree::Inputs;

/// `platform.kratix.io/v1alpha1` resource of `kind` with `plural`.
pub fn kratix_resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(plinth_api::GROUP, "v1alpha1", kind),
        plural,
    )
}

fn job_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("batch", "v1", "Job"), "jobs")
}

/// The request resource a Promise's `spec.api` serves, when it has one.
pub fn request_resource(promise: &Value) -> Option<ApiResource> {
    let gvk = plinth_api::request_crd::request_gvk(promise.pointer("/spec/api")?).ok()?;
    Some(ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(&gvk.group, &gvk.version, &gvk.kind),
        &gvk.plural,
    ))
}

async fn list(
    client: &kube::Client,
    ar: &ApiResource,
    lp: &ListParams,
) -> anyhow::Result<Vec<Value>> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), ar);
    let items = api
        .list(lp)
        .await
        .with_context(|| format!("listing {}", ar.plural))?
        .items;
    Ok(items
        .into_iter()
        .map(|o| serde_json::to_value(o).unwrap_or_default())
        .collect())
}

/// Lists Promises, their requests, the Kratix workflow Jobs, Works and WorkPlacements.
///
/// # Errors
/// API errors, naming the resource that could not be listed.
pub async fn collect(client: &kube::Client) -> anyhow::Result<Inputs> {
    let all = ListParams::default();
    let promises = list(client, &kratix_resource("Promise", "promises"), &all).await?;
    let mut requests = BTreeMap::new();
    for p in &promises {
        let Some(ar) = request_resource(p) else {
            continue;
        };
        let name = p
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        // A Promise whose API is not served yet has no requests to show.
        let items = list(client, &ar, &all).await.unwrap_or_default();
        requests.insert(name.to_string(), items);
    }
    let jobs = list(
        client,
        &job_resource(),
        &ListParams::default().labels(labels::PROMISE_NAME),
    )
    .await?;
    let works = list(client, &kratix_resource("Work", "works"), &all).await?;
    let placements = list(
        client,
        &kratix_resource("WorkPlacement", "workplacements"),
        &all,
    )
    .await?;
    Ok(Inputs {
        promises,
        requests,
        jobs,
        works,
        placements,
    })
}

/// The request resources of the Promises in `inputs` (to watch them too).
pub fn request_resources(inputs: &Inputs) -> Vec<ApiResource> {
    let mut out: Vec<ApiResource> = inputs
        .promises
        .iter()
        .filter_map(request_resource)
        .collect();
    out.sort_by(|a, b| (&a.group, &a.plural).cmp(&(&b.group, &b.plural)));
    out.dedup_by(|a, b| a.group == b.group && a.plural == b.plural);
    out
}

/// A stream that yields `()` whenever a Promise, Job, Work, WorkPlacement or a request of
/// one of `requests` changes (the API's watch; the first item comes after the initial
/// listing). Watch errors are retried with backoff by the watcher.
pub fn changes(
    client: &kube::Client,
    requests: &[ApiResource],
) -> impl Stream<Item = ()> + Send + use<> {
    let mut resources = vec![
        (
            kratix_resource("Promise", "promises"),
            watcher::Config::default(),
        ),
        (
            job_resource(),
            watcher::Config::default().labels(labels::PROMISE_NAME),
        ),
        (kratix_resource("Work", "works"), watcher::Config::default()),
        (
            kratix_resource("WorkPlacement", "workplacements"),
            watcher::Config::default(),
        ),
    ];
    resources.extend(
        requests
            .iter()
            .map(|r| (r.clone(), watcher::Config::default())),
    );
    let streams = resources.into_iter().map(|(ar, cfg)| {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
        watcher::watcher(api, cfg)
            .filter_map(|ev| async move {
                match ev {
                    Ok(
                        watcher::Event::Apply(_)
                        | watcher::Event::Delete(_)
                        | watcher::Event::InitDone,
                    ) => Some(()),
                    _ => None,
                }
            })
            .boxed()
    });
    futures::stream::select_all(streams)
}
