//! What the request page reads besides the tree: the files in the state store (through
//! the store's reader, as a Destination's agent reads them), the pipeline Pods' logs,
//! the health history, and the objects inside a WorkPlacement's files.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, ListParams, LogParams};
use plinth_controllers::health::history::HealthHistory;
use plinth_statestore::reader::{Listing, RecordReader, open_reader};
use serde_json::Value;
use tokio::sync::Mutex;

use crate::destination_agent::StoreRef;
use crate::status::collect::{kratix_resource, request_resource};
use crate::status::tree::{PlacementNode, RequestNode};

/// Largest file shown, in bytes; longer files are cut.
const MAX_FILE: usize = 64 * 1024;
/// Log lines shown per container (the last ones).
const LOG_LINES: i64 = 200;
/// Bytes of log read per container at most, so long lines are no way around
/// [`LOG_LINES`]; the page shows the end of what was read
/// ([`crate::web::html::LOG_SHOWN`]).
const LOG_BYTES: i64 = 256 * 1024;

/// Readers opened so far, per state store (`KIND/NAME`), reused between page views.
#[derive(Default)]
pub struct Readers(Mutex<HashMap<String, Arc<dyn RecordReader>>>);

/// The files the request's WorkPlacements wrote, listed from each Destination's state
/// store: `(version, [(Destination, path)])`, where version is the store's current
/// commit (Git) or listing version (bucket). Only names: the page loads a file's
/// content when it is opened ([`file`]), so a request with many large files costs a
/// listing, not their bytes.
pub async fn files(
    client: &kube::Client,
    readers: &Readers,
    work_dir: &Path,
    promise: &str,
    r: &RequestNode,
) -> anyhow::Result<crate::web::html::Files> {
    let mut version = String::new();
    let mut out = Vec::new();
    for dest in destinations_of(r) {
        let (reader, dir) = request_dir(client, readers, work_dir, promise, r, dest).await?;
        let Listing::Changed {
            version: v,
            objects,
        } = reader
            .list(None)
            .await
            .with_context(|| format!("listing {}", reader.describe()))?
        else {
            continue;
        };
        version = v;
        out.extend(
            objects
                .into_iter()
                .filter(|o| o.key.starts_with(&dir))
                .map(|o| (dest.to_string(), o.key)),
        );
    }
    Ok((version, out))
}

/// One file the request wrote to Destination `dest`, as the page shows it ([`shown`]);
/// `None` when the Destination is not one of the request's or the path is not in the
/// request's directory there (the page never reads anything else from a store).
pub async fn file(
    client: &kube::Client,
    readers: &Readers,
    work_dir: &Path,
    promise: &str,
    r: &RequestNode,
    dest: &str,
    path: &str,
) -> anyhow::Result<Option<String>> {
    if !destinations_of(r).contains(&dest) {
        return Ok(None);
    }
    let (reader, dir) = request_dir(client, readers, work_dir, promise, r, dest).await?;
    let unsafe_path = path.split('/').any(|s| s == "..") || path.contains(['\0', '\\']);
    if !path.starts_with(&dir) || unsafe_path {
        return Ok(None);
    }
    Ok(reader.get(path).await?.map(|b| shown(&b)))
}

/// The Destinations the request's WorkPlacements name, sorted, once each.
fn destinations_of(r: &RequestNode) -> Vec<&str> {
    let mut dests: Vec<&str> = r
        .works
        .iter()
        .flat_map(|w| w.placements.iter().map(|p| p.destination.as_str()))
        .collect();
    dests.sort();
    dests.dedup();
    dests
}

/// The reader of Destination `dest`'s state store and the request's directory in it.
async fn request_dir(
    client: &kube::Client,
    readers: &Readers,
    work_dir: &Path,
    promise: &str,
    r: &RequestNode,
    dest: &str,
) -> anyhow::Result<(Arc<dyn RecordReader>, String)> {
    let destinations: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &kratix_resource("Destination", "destinations"),
    );
    let d = destinations
        .get(dest)
        .await
        .with_context(|| format!("reading Destination {dest}"))?;
    let text = |ptr: &str| {
        d.data
            .pointer(ptr)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let store = StoreRef {
        kind: text("/spec/stateStoreRef/kind"),
        name: text("/spec/stateStoreRef/name"),
    };
    let reader = reader(client, readers, work_dir, &store).await?;
    let root = text("/spec/path");
    let root = if root.is_empty() { dest } else { &root }.trim_matches('/');
    let dir = format!("{root}/resources/{}/{promise}/{}/", r.namespace, r.name);
    Ok((reader, dir))
}

/// A file as the page shows it: Secret values redacted (before cutting, so a cut never
/// hides a Secret from the parser), then cut at [`MAX_FILE`] bytes.
fn shown(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut text = crate::redact::documents(&text).into_owned();
    if text.len() > MAX_FILE {
        let mut end = MAX_FILE;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str("\n… (cut)");
    }
    text
}

async fn reader(
    client: &kube::Client,
    readers: &Readers,
    work_dir: &Path,
    store: &StoreRef,
) -> anyhow::Result<Arc<dyn RecordReader>> {
    let key = format!("{}/{}", store.kind, store.name);
    let mut map = readers.0.lock().await;
    if let Some(r) = map.get(&key) {
        return Ok(r.clone());
    }
    let cfg =
        crate::destination_agent::store_config(client, store, &work_dir.join(&store.name)).await?;
    let r = open_reader(cfg)
        .await
        .with_context(|| format!("opening {key} for reading"))?;
    map.insert(key, r.clone());
    Ok(r)
}

/// The last lines of every container of the request's pipeline Pods, as
/// `(Job, container, log)`; a log that cannot be read says why instead.
pub async fn logs(client: &kube::Client, r: &RequestNode) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for job in &r.jobs {
        let pods: Api<Pod> = Api::namespaced(client.clone(), &job.namespace);
        let list = match pods
            .list(&ListParams::default().labels(&format!("job-name={}", job.name)))
            .await
        {
            Ok(l) => l.items,
            Err(e) => {
                out.push((
                    job.name.clone(),
                    "-".into(),
                    format!("cannot list Pods: {}", plinth_api::kube_error::describe(&e)),
                ));
                continue;
            }
        };
        for pod in list {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let spec = pod.spec.unwrap_or_default();
            let containers = spec
                .init_containers
                .unwrap_or_default()
                .into_iter()
                .chain(spec.containers)
                .map(|c| c.name);
            for c in containers {
                let lp = LogParams {
                    container: Some(c.clone()),
                    tail_lines: Some(LOG_LINES),
                    limit_bytes: Some(LOG_BYTES),
                    ..LogParams::default()
                };
                let text = pods.logs(&name, &lp).await.unwrap_or_else(|e| {
                    format!("(no log: {})", plinth_api::kube_error::describe(&e))
                });
                out.push((job.name.clone(), c, text));
            }
        }
    }
    out
}

/// `status.healthHistory` of the request (empty when it has none or cannot be read).
pub async fn history(client: &kube::Client, promise: &str, ns: &str, name: &str) -> HealthHistory {
    let promises: Api<DynamicObject> =
        Api::all_with(client.clone(), &kratix_resource("Promise", "promises"));
    let Ok(p) = promises.get(promise).await else {
        return HealthHistory::default();
    };
    let Some(ar) = request_resource(&serde_json::to_value(&p).unwrap_or_default()) else {
        return HealthHistory::default();
    };
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &ar);
    match api.get(name).await {
        Ok(o) => HealthHistory::from_status(&o.data["status"]),
        Err(_) => HealthHistory::default(),
    }
}

/// `Kind namespace/name` of every YAML document in a WorkPlacement's files (contents
/// that do not decode are left out).
pub fn objects(p: &PlacementNode) -> Vec<String> {
    p.contents
        .iter()
        // Work contents are stored gzip-compressed and base64-encoded, as Kratix does.
        .filter_map(|c| plinth_pipeline::work_creator::decode_content(c).ok())
        .flat_map(|b| {
            serde_saphyr::from_multiple::<Value>(&String::from_utf8_lossy(&b)).unwrap_or_default()
        })
        .filter(|d| d.is_object())
        .map(|d| {
            let s = |ptr: &str| {
                d.pointer(ptr)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            let ns = s("/metadata/namespace");
            let name = s("/metadata/name");
            let id = if ns.is_empty() {
                name
            } else {
                format!("{ns}/{name}")
            };
            format!("{} {id}", s("/kind"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use plinth_pipeline::work_creator::encode_content;

    #[test]
    fn shown_files_have_no_secret_values_even_when_cut() {
        let big = "x".repeat(MAX_FILE);
        let text = format!(
            "kind: Secret\nmetadata: {{name: s}}\nstringData:\n  password: plain-value\n  pad: {big}\n"
        );
        let out = shown(text.as_bytes());
        assert!(!out.contains("plain-value"), "{}", &out[..200]);
        assert!(
            out.contains("password: <redacted sha256:"),
            "{}",
            &out[..200]
        );
        assert!(out.len() < MAX_FILE + 64, "{}", out.len());
    }

    #[test]
    fn objects_are_read_from_encoded_contents() {
        let yaml = "apiVersion: v1\nkind: Namespace\nmetadata: {name: team}\n---\n\
                    apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, namespace: team}\n";
        let p = PlacementNode {
            name: "p".into(),
            destination: "local".into(),
            files: 2,
            paths: vec!["a.yaml".into(), "b.yaml".into()],
            contents: vec![
                encode_content(yaml.as_bytes()).unwrap(),
                "not base64".into(),
            ],
            version: None,
            ready: String::new(),
            message: String::new(),
        };
        assert_eq!(objects(&p), ["Namespace team", "ConfigMap team/cm"]);
    }
}
