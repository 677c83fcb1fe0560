//! The controllers' one status writer against the embedded API server, through a client
//! that records every request it sends: a change computed from a copy the writer holds
//! is sent without a read when the copy is current, costs a 409 and a fresh read when it
//! is not (and then loses nothing written meanwhile), and "nothing to change" is decided
//! on a copy only when it is as current as a read (the reconcile's own write's answer).

use crate::placement_support;

use std::sync::{Arc, Mutex};

use axum::extract::Request;
use axum::middleware::{self, Next};
use axum::response::Response;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::{Client, Resource};
use placement_support::wait_for;
use plinth_api::Work;
use plinth_apiserver::testing::TestServer;
use plinth_controllers::support::{
    Basis, Latest, patch_status_from, set_condition, update_status_from,
};
use serde_json::{Value, json};

/// The requests a client sent, as `METHOD path` and the answer's status code.
#[derive(Clone, Default)]
struct Sent(Arc<Mutex<Vec<String>>>);

impl Sent {
    /// The requests since the last call.
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut self.0.lock().unwrap())
    }
}

/// An API server serving Works, with no controller writing to them.
async fn start() -> TestServer {
    let server = TestServer::start().await.expect("API server starts");
    let crds: Api<CustomResourceDefinition> = Api::all(server.client());
    let work = plinth_api::crds::all_crds()
        .into_iter()
        .find(|c| c.spec.names.kind == "Work")
        .expect("the Work CRD");
    crds.create(&Default::default(), &work).await.unwrap();
    wait_for("Works served", || async {
        let works = Api::<Work>::namespaced(server.client(), "default");
        works.list(&Default::default()).await.is_ok()
    })
    .await;
    server
}

/// A client of `server` that records into the returned [`Sent`].
fn recording_client(server: &TestServer) -> (Client, Sent) {
    let sent = Sent::default();
    let log = sent.clone();
    let router = server
        .router()
        .layer(middleware::from_fn(move |req: Request, next: Next| {
            let log = log.clone();
            async move {
                let line = format!("{} {}", req.method(), req.uri().path());
                let response: Response = next.run(req).await;
                let code = response.status().as_u16();
                log.0.lock().unwrap().push(format!("{line} {code}"));
                response
            }
        }));
    (Client::new(router, "default"), sent)
}

const WORK_STATUS: &str = "/apis/platform.kratix.io/v1alpha1/namespaces/default/works/w/status";
const WORK: &str = "/apis/platform.kratix.io/v1alpha1/namespaces/default/works/w";

async fn create_work(client: &Client) -> Work {
    let w: Work = serde_json::from_value(json!({
        "apiVersion": "platform.kratix.io/v1alpha1",
        "kind": "Work",
        "metadata": {"name": "w", "namespace": "default"},
        "spec": {"promiseName": "p", "workloadGroups": []},
    }))
    .unwrap();
    Api::<Work>::namespaced(client.clone(), "default")
        .create(&Default::default(), &w)
        .await
        .unwrap()
}

/// A server with the Work `w`, the Work as created, and its API through a recording
/// client (nothing recorded yet).
async fn recorded_work() -> (TestServer, Work, Api<Work>, Sent) {
    let server = start().await;
    let created = create_work(&server.client()).await;
    let (client, sent) = recording_client(&server);
    let api = Api::<Work>::namespaced(client, "default");
    (server, created, api, sent)
}

/// The Work `w` as `DynamicObject`s (the JSON form requests are written in): its API
/// through a recording client, the Work as read through it (not recorded), and the
/// recording.
async fn recorded_json_work() -> (TestServer, Api<DynamicObject>, DynamicObject, Sent) {
    let server = start().await;
    create_work(&server.client()).await;
    let (client, sent) = recording_client(&server);
    let ar = ApiResource::erase::<Work>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(client, "default", &ar);
    let copy = api.get("w").await.unwrap();
    sent.take();
    (server, api, copy, sent)
}

/// What a write from a stale copy sends: the 409, the fresh read, the write.
fn conflict_read_write() -> Vec<String> {
    vec![
        format!("PATCH {WORK_STATUS} 409"),
        format!("GET {WORK} 200"),
        format!("PATCH {WORK_STATUS} 200"),
    ]
}

/// Another writer sets `workPlacementsCreated` to `n`.
async fn written_meanwhile(client: &Client, n: i64) {
    Api::<Work>::namespaced(client.clone(), "default")
        .patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"workPlacementsCreated": n}})),
        )
        .await
        .unwrap();
}

fn placements(w: &Work) -> (Option<i64>, Option<i64>) {
    let s = w.status.as_ref();
    (
        s.and_then(|s| s.work_placements),
        s.and_then(|s| s.work_placements_created),
    )
}

/// Sets `workPlacements` to `n` from `known`.
async fn set_placements(api: &Api<Work>, known: &Work, n: i64) -> Work {
    patch_status_from(api, known, |cur: &Work| {
        let has = cur.status.as_ref().and_then(|s| s.work_placements);
        (has != Some(n)).then(|| json!({"workPlacements": n}))
    })
    .await
    .unwrap()
    .expect("the Work exists")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_from_a_current_copy_is_sent_without_a_read() {
    let (_server, created, api, sent) = recorded_work().await;

    let latest = Latest::new(&created);
    let written = set_placements(&api, &latest.get(), 1).await;
    assert_eq!(sent.take(), vec![format!("PATCH {WORK_STATUS} 200")]);
    assert_eq!(placements(&written), (Some(1), None));
    latest.remember(Some(written));

    // What the write returned is current too: the next change needs no read either.
    let again = set_placements(&api, &latest.get(), 2).await;
    assert_eq!(sent.take(), vec![format!("PATCH {WORK_STATUS} 200")]);
    assert_eq!(placements(&again), (Some(2), None));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_copy_with_nothing_to_change_costs_no_request_a_cached_one_a_read() {
    let (_server, created, api, sent) = recorded_work().await;

    // What this reconcile's own write returned is as current as a read.
    let latest = Latest::new(&created);
    latest
        .patch_status(&api, |_: &Work| Some(json!({"workPlacements": 1})))
        .await
        .unwrap();
    sent.take();
    let unchanged = latest
        .patch_status(&api, |cur: &Work| {
            let has = cur.status.as_ref().and_then(|s| s.work_placements);
            (has != Some(1)).then(|| json!({"workPlacements": 1}))
        })
        .await
        .unwrap()
        .expect("the Work exists");
    assert!(sent.take().is_empty(), "nothing sent");
    assert_eq!(placements(&unchanged), (Some(1), None));

    // The same copy given as a watch cache's is checked on a read.
    let same = set_placements(&api, &unchanged, 1).await;
    assert_eq!(sent.take(), vec![format!("GET {WORK} 200")]);
    assert_eq!(placements(&same), (Some(1), None));
    // Given as fresh, it decides without a read.
    patch_status_from(&api, Basis::Fresh(&same), |cur: &Work| {
        let has = cur.status.as_ref().and_then(|s| s.work_placements);
        (has != Some(1)).then(|| json!({"workPlacements": 1}))
    })
    .await
    .unwrap();
    assert!(sent.take().is_empty(), "nothing sent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_without_a_resource_version_is_not_trusted() {
    let (_server, created, api, sent) = recorded_work().await;
    for version in [None, Some(String::new())] {
        let mut copy = created.clone();
        copy.metadata.resource_version = version.clone();
        let n = if version.is_none() { 1 } else { 2 };
        let written = set_placements(&api, &copy, n).await;
        assert_eq!(
            sent.take(),
            vec![
                format!("GET {WORK} 200"),
                format!("PATCH {WORK_STATUS} 200")
            ],
            "resourceVersion {version:?}"
        );
        assert_eq!(placements(&written), (Some(n), None));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_from_a_copy_of_an_object_deleted_meanwhile_is_none() {
    let server = start().await;
    let plain = server.client();
    let copy = create_work(&plain).await;
    Api::<Work>::namespaced(plain.clone(), "default")
        .delete("w", &Default::default())
        .await
        .unwrap();
    let (client, sent) = recording_client(&server);
    let api = Api::<Work>::namespaced(client, "default");

    let written = patch_status_from(&api, &copy, |_: &Work| Some(json!({"workPlacements": 1})))
        .await
        .expect("a missing object is not an error");
    assert!(written.is_none(), "nothing was written");
    assert_eq!(sent.take(), vec![format!("PATCH {WORK_STATUS} 404")]);
}

/// Conditions are one list, which a merge patch replaces whole: a write from a stale copy
/// must not drop a condition another writer added meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_condition_added_meanwhile_survives_a_write_from_a_stale_copy() {
    let (server, api, stale, sent) = recorded_json_work().await;
    let plain = server.client();
    let ar = ApiResource::erase::<Work>(&());
    let other: Api<DynamicObject> = Api::namespaced_with(plain.clone(), "default", &ar);
    update_status_from(
        &other,
        &other.get("w").await.unwrap(),
        |s: &mut Value, _| {
            set_condition(s, "Other", "True", "Meanwhile", "written meanwhile", None)
        },
    )
    .await
    .unwrap();
    sent.take();

    let written = update_status_from(&api, &stale, |s: &mut Value, _| {
        set_condition(
            s,
            "Mine",
            "True",
            "Mine",
            "written from the stale copy",
            None,
        )
    })
    .await
    .unwrap();
    assert_eq!(sent.take(), conflict_read_write());
    let stored = api.get("w").await.unwrap();
    for obj in [&written, &stored] {
        let types: Vec<&str> = obj.data["status"]["conditions"]
            .as_array()
            .expect("conditions")
            .iter()
            .filter_map(|c| c["type"].as_str())
            .collect();
        assert_eq!(types, ["Other", "Mine"]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_from_a_stale_copy_is_made_again_on_a_fresh_read_and_keeps_the_other_write() {
    let server = start().await;
    let plain = server.client();
    let stale = create_work(&plain).await;
    written_meanwhile(&plain, 7).await;
    let (client, sent) = recording_client(&server);
    let api = Api::<Work>::namespaced(client, "default");

    let written = set_placements(&api, &stale, 1).await;
    assert_eq!(sent.take(), conflict_read_write());
    assert_eq!(placements(&written), (Some(1), Some(7)));
    let stored = api.get("w").await.unwrap();
    assert_eq!(placements(&stored), (Some(1), Some(7)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_to_change_is_decided_on_a_fresh_read_not_on_the_copy() {
    let (server, created, api, sent) = recorded_work().await;
    let copy = set_placements(&api, &created, 1).await;
    sent.take();
    // Someone else takes the value back: the copy still shows it.
    Api::<Work>::namespaced(server.client(), "default")
        .patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"workPlacements": null}})),
        )
        .await
        .unwrap();

    let written = set_placements(&api, &copy, 1).await;
    assert_eq!(
        sent.take(),
        vec![
            format!("GET {WORK} 200"),
            format!("PATCH {WORK_STATUS} 200")
        ]
    );
    assert_eq!(placements(&written), (Some(1), None));
}

/// The JSON form requests use: a stale copy of a request-like object is merged with a
/// key written meanwhile, never replacing it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_status_change_from_a_stale_copy_keeps_the_other_write() {
    let (server, api, stale, sent) = recorded_json_work().await;
    let plain = server.client();
    assert!(stale.meta().resource_version.is_some());
    written_meanwhile(&plain, 3).await;
    sent.take();

    let written = update_status_from(&api, &stale, |s: &mut Value, _| {
        s["workPlacements"] = json!(4);
        true
    })
    .await
    .unwrap();
    assert_eq!(sent.take().len(), 3, "a 409, a fresh read, the write");
    assert_eq!(written.data["status"]["workPlacements"], json!(4));
    assert_eq!(written.data["status"]["workPlacementsCreated"], json!(3));
}
