//! The preview of a Promise update on a running platform (`plinth diff`): which of its
//! requests would re-run and how their outputs would change, before anything is applied.
//!
//! A request re-runs when the Promise's spec changes (its workflow hash is derived from
//! the Promise spec). Each such request is rendered with the new Promise in a private
//! platform ([`super::render`]), given its current status and the platform's
//! Destinations, and the files it would produce are compared with those of the Works it
//! has now. Nothing is written to the platform.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, anyhow};
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
};
use kube::{Client, ResourceExt};
use plinth_api::Work;
use plinth_api::constants::labels;
use serde_json::{Value, json};

use super::render::{Failure, Progress, RenderInput, WorkFile, render, work_files};
use super::yaml;

/// What would happen to one request.
#[derive(Clone, Debug)]
pub struct RequestPreview {
    /// Namespace of the request.
    pub namespace: String,
    /// Name of the request.
    pub name: String,
    /// Unified diffs of the files that would change (empty: outputs unchanged).
    pub diffs: Vec<String>,
    /// Set when the new workflow would fail for this request.
    pub failure: Option<Failure>,
}

/// The preview of one Promise update.
#[derive(Clone, Debug)]
pub struct Preview {
    /// Promise name.
    pub promise: String,
    /// True when no Promise of that name is installed.
    pub new_promise: bool,
    /// Unified diff of the Promise's spec, or `None` when it is unchanged.
    pub spec_diff: Option<String>,
    /// The requests that would re-run (none when the spec is unchanged).
    pub requests: Vec<RequestPreview>,
}

/// How to render the requests.
#[derive(Clone, Debug)]
pub struct PreviewOptions {
    /// Runner image map.
    pub image_map: Option<PathBuf>,
    /// Per-request render timeout.
    pub timeout: Duration,
}

fn kratix_api(client: &Client, kind: &str, plural: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("platform.kratix.io", "v1alpha1", kind);
    Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, plural),
    )
}

/// Step: the platform's admission judges the Promise as `kubectl apply` would (a
/// server-side apply with `dryRun`: nothing is stored), so a Promise the platform would
/// refuse is an error naming its field, never a preview of installing it.
async fn admitted(client: &Client, new_promise: &Value, name: &str) -> anyhow::Result<()> {
    let params = PatchParams::apply("plinth-diff").dry_run().force();
    kratix_api(client, "Promise", "promises")
        .patch(name, &params, &Patch::Apply(clean_object(new_promise)))
        .await
        .map(|_| ())
        .map_err(|e| {
            anyhow!(
                "the platform refuses Promise {name}: {}",
                plinth_api::kube_error::describe(&e)
            )
        })
}

/// Previews applying `new_promise` on the platform `client` reaches.
///
/// # Errors
/// The platform cannot be read, or a render cannot run (a failing workflow is reported
/// in [`RequestPreview::failure`]).
pub async fn preview(
    client: &Client,
    new_promise: &Value,
    opts: &PreviewOptions,
    progress: &dyn Progress,
) -> anyhow::Result<Preview> {
    let name = new_promise["metadata"]["name"]
        .as_str()
        .ok_or_else(|| anyhow!("the Promise has no metadata.name"))?
        .to_string();
    admitted(client, new_promise, &name).await?;
    let current = kratix_api(client, "Promise", "promises")
        .get_opt(&name)
        .await
        .with_context(|| format!("reading Promise {name} from the platform"))?;
    let Some(current) = current else {
        return Ok(Preview {
            promise: name,
            new_promise: true,
            spec_diff: None,
            requests: Vec::new(),
        });
    };
    let old_spec = current.data.get("spec").cloned().unwrap_or(Value::Null);
    let spec_diff = yaml::labelled_diff(
        &yaml::to_yaml(&old_spec),
        &yaml::to_yaml(&new_promise["spec"]),
        "installed/spec",
        "new/spec",
    );
    let mut out = Preview {
        promise: name.clone(),
        new_promise: false,
        spec_diff,
        requests: Vec::new(),
    };
    if out.spec_diff.is_none() {
        return Ok(out);
    }
    let destinations = platform_destinations(client).await?;
    for rr in current_requests(client, &old_spec).await? {
        let (ns, rr_name) = (rr.namespace().unwrap_or_default(), rr.name_any());
        progress.step(&format!("rendering {ns}/{rr_name} with the new Promise"));
        let input = RenderInput {
            promise: clean_object(new_promise),
            request: Some(clean_object(&serde_json::to_value(&rr)?)),
            existing_status: rr.data.get("status").cloned(),
            destinations: destinations.clone(),
            objects: Vec::new(),
            image_map: opts.image_map.clone(),
            pipeline: None,
            timeout: opts.timeout,
        };
        let rendered = render(&input, progress).await?;
        let now = request_work_files(client, &name, &ns, &rr_name).await?;
        out.requests.push(RequestPreview {
            namespace: ns,
            name: rr_name,
            diffs: if rendered.failure.is_some() {
                Vec::new()
            } else {
                compare(&now, &rendered.works)
            },
            failure: rendered.failure,
        });
    }
    Ok(out)
}

/// The Promise's current requests, listed through its current API.
async fn current_requests(client: &Client, spec: &Value) -> anyhow::Result<Vec<DynamicObject>> {
    let crd = &spec["api"]["spec"];
    let (Some(group), Some(plural), Some(kind)) = (
        crd["group"].as_str(),
        crd["names"]["plural"].as_str(),
        crd["names"]["kind"].as_str(),
    ) else {
        return Ok(Vec::new());
    };
    let versions = crd["versions"].as_array().cloned().unwrap_or_default();
    let version = versions
        .iter()
        .find(|v| v["storage"] == true)
        .or(versions.first())
        .and_then(|v| v["name"].as_str())
        .unwrap_or("v1alpha1");
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let mut items = api
        .list(&ListParams::default())
        .await
        .with_context(|| format!("listing {plural}.{group}"))?
        .items;
    for i in &mut items {
        i.types = Some(kube::api::TypeMeta {
            api_version: format!("{group}/{version}"),
            kind: kind.to_string(),
        });
    }
    items.sort_by_key(|i| (i.namespace(), i.name_any()));
    Ok(items)
}

/// The platform's Destinations, as objects to create elsewhere.
async fn platform_destinations(client: &Client) -> anyhow::Result<Vec<Value>> {
    let list = kratix_api(client, "Destination", "destinations")
        .list(&ListParams::default())
        .await
        .context("listing the platform's Destinations")?;
    list.items
        .iter()
        .map(|d| Ok(clean_object(&serde_json::to_value(d)?)))
        .collect()
}

/// `apiVersion`, `kind`, name, namespace, labels, annotations and `spec` of an object.
fn clean_object(obj: &Value) -> Value {
    let m = &obj["metadata"];
    let mut meta = json!({"name": m["name"]});
    for k in ["namespace", "labels", "annotations"] {
        if !m[k].is_null() {
            meta[k] = m[k].clone();
        }
    }
    if let Some(a) = meta["annotations"].as_object_mut() {
        a.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
    let mut out = json!({"apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": meta});
    if !obj["spec"].is_null() {
        out["spec"] = obj["spec"].clone();
    }
    out
}

async fn request_work_files(
    client: &Client,
    promise: &str,
    ns: &str,
    name: &str,
) -> anyhow::Result<Vec<WorkFile>> {
    let api: Api<Work> = Api::namespaced(client.clone(), ns);
    let lp = ListParams::default().labels(&format!(
        "{}={promise},{}={name}",
        labels::PROMISE_NAME,
        labels::RESOURCE_NAME
    ));
    let works = api
        .list(&lp)
        .await
        .with_context(|| format!("listing the Works of {ns}/{name}"))?
        .items;
    Ok(work_files(&works))
}

/// Unified diffs between the files a request has now and those it would get, keyed by
/// `<pipeline>/<filepath>`.
fn compare(now: &[WorkFile], new: &[WorkFile]) -> Vec<String> {
    let key = |f: &WorkFile| format!("{}/{}", f.pipeline, f.filepath);
    let now: BTreeMap<String, String> = now.iter().map(|f| (key(f), f.content.clone())).collect();
    let new: BTreeMap<String, String> = new.iter().map(|f| (key(f), f.content.clone())).collect();
    let keys: std::collections::BTreeSet<&String> = now.keys().chain(new.keys()).collect();
    keys.into_iter()
        .filter_map(|k| {
            let (a, b) = (now.get(k), new.get(k));
            let note = match (a, b) {
                (Some(_), None) => "removed: ",
                (None, Some(_)) => "added: ",
                _ => "",
            };
            let empty = String::new();
            yaml::labelled_diff(
                a.unwrap_or(&empty),
                b.unwrap_or(&empty),
                &format!("{note}now/{k}"),
                &format!("{note}new/{k}"),
            )
        })
        .collect()
}
