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

/// Readers opened so far, per state store (`KIND/NAME`), reused between page views.
#[derive(Default)]
pub struct Readers(Mutex<HashMap<String, Arc<dyn RecordReader>>>);

/// The files the request's WorkPlacements wrote, read from each Destination's state
/// store: `(version, [(Destination, path, content)])`, where version is the store's
/// current commit (Git) or listing version (bucket).
pub async fn files(
    client: &kube::Client,
    readers: &Readers,
    work_dir: &Path,
    promise: &str,
    r: &RequestNode,
) -> anyhow::Result<crate::web::html::Files> {
    let destinations: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &kratix_resource("Destination", "destinations"),
    );
    let mut dests: Vec<&str> = r
        .works
        .iter()
        .flat_map(|w| w.placements.iter().map(|p| p.destination.as_str()))
        .collect();
    dests.sort();
    dests.dedup();
    let mut version = String::new();
    let mut out = Vec::new();
    for dest in dests {
        let d = destinations
            .get(dest)
            .await
            .with_context(|| format!("reading Destination {dest}"))?;
        let store = StoreRef {
            kind: d
                .data
                .pointer("/spec/stateStoreRef/kind")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            name: d
                .data
                .pointer("/spec/stateStoreRef/name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
        };
        let reader = reader(client, readers, work_dir, &store).await?;
        let Listing::Changed {
            version: v,
            objects,
        } = reader
            .list(None)
            .await
            .with_context(|| format!("listing {}/{}", store.kind, store.name))?
        else {
            continue;
        };
        version = v;
        let root = d
            .data
            .pointer("/spec/path")
            .and_then(Value::as_str)
            .filter(|p| !p.is_empty())
            .unwrap_or(dest)
            .trim_matches('/')
            .to_string();
        let dir = format!("{root}/resources/{}/{promise}/{}/", r.namespace, r.name);
        for o in objects.iter().filter(|o| o.key.starts_with(&dir)) {
            let bytes = reader.get(&o.key).await?.unwrap_or_default();
            out.push((dest.to_string(), o.key.clone(), shown(&bytes)));
        }
    }
    Ok((version, out))
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
                    format!("cannot list Pods: {e}"),
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
                    ..LogParams::default()
                };
                let text = pods
                    .logs(&name, &lp)
                    .await
                    .unwrap_or_else(|e| format!("(no log: {e})"));
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
