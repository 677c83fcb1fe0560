//! Rotating a GitStateStore's credentials needs no restart: while the remote refuses the
//! old token the WorkPlacement and the store say `AuthenticationFailed` (naming the
//! Secret, never the token); once the Secret holds the new token the next write lands
//! with it, and the old token is not sent again.

use crate::placement_support;
use crate::statestore_support as git_servers;

use std::collections::BTreeMap;
use std::process::Command;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams, PostParams};
use placement_support::{start, wait_for};
use plinth_api::work_content;
use plinth_api::{GitStateStore, Work, WorkPlacement};
use serde_json::json;

fn ready(
    conds: Option<&Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>>,
    type_: &str,
) -> Option<(String, String, String)> {
    placement_support::cond(&conds.cloned(), type_)
}

/// Authentication failures lighttpd logged so far.
fn refusals(log: &std::path::Path) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("password doesn't match") || l.contains("wrong password"))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_secret_is_used_for_the_next_write_and_a_refused_token_is_shown() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(srv) = git_servers::https_git_server_with_users(
        tmp.path(),
        "placeholder-user:placeholder-token-1\n",
    ) else {
        return;
    };
    // The writer verifies TLS; trust the test server's certificate.
    // SAFETY: set before any thread of this test reads the environment for TLS.
    unsafe { std::env::set_var("SSL_CERT_FILE", &srv.cert) };
    let bare = srv.repos.join("state.git");
    plinth_statestore::git::init_bare(&bare, "main").unwrap();
    let env = start().await;
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), "default");
    let secret = |token: &str| -> Secret {
        serde_json::from_value(json!({"metadata": {"name": "git-71"},
            "stringData": {"username": "placeholder-user", "password": token}}))
        .unwrap()
    };
    secrets
        .create(&PostParams::default(), &secret("placeholder-token-1"))
        .await
        .unwrap();
    let stores: Api<GitStateStore> = Api::all(env.client.clone());
    stores
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
            "metadata": {"name": "remote"},
            "spec": {"url": srv.url("state.git"), "branch": "main", "authMethod": "basicAuth",
                "secretRef": {"name": "git-71", "namespace": "default"}}}))
            .unwrap(),
        )
        .await
        .unwrap();
    let store_ready = |want: &'static str| {
        let stores = stores.clone();
        async move {
            stores
                .get("remote")
                .await
                .ok()
                .and_then(|s| s.status)
                .is_some_and(|s| ready(s.conditions.as_ref(), "Ready").is_some_and(|c| c.0 == want))
        }
    };
    wait_for("store Ready", || store_ready("True")).await;
    env.create_destination(
        json!({"apiVersion": "platform.kratix.io/v1alpha1", "kind": "Destination",
        "metadata": {"name": "d71", "labels": {"env": "d71"}},
        "spec": {"path": "d71", "stateStoreRef": {"kind": "GitStateStore", "name": "remote"}}}),
    )
    .await;
    env.destination_ready("d71").await;
    let sel = BTreeMap::from([("env".to_string(), "d71".to_string())]);
    env.create_work(
        "team-a",
        "w71",
        "widget",
        "r71",
        "configure",
        &[(".", vec![("promise", sel)], vec![("a.yaml", "v: 1\n")])],
    )
    .await;
    wait_for("first commit", || async { list_has(&bare, "v: 1") }).await;

    // The remote now accepts only the new token; the request changes.
    std::fs::write(&srv.users, "placeholder-user:placeholder-token-2\n").unwrap();
    update_work(&env, "v: 2\n").await;
    let wps: Api<WorkPlacement> = Api::namespaced(env.client.clone(), "team-a");
    wait_for("WorkPlacement says AuthenticationFailed", || async {
        wps.list(&Default::default())
            .await
            .unwrap()
            .items
            .iter()
            .any(|wp| {
                ready(
                    wp.status.as_ref().and_then(|s| s.conditions.as_ref()),
                    "WriteSucceeded",
                )
                .is_some_and(|c| c.0 == "False" && c.1 == "AuthenticationFailed")
            })
    })
    .await;
    wait_for("store NotReady/AuthenticationFailed", || async {
        stores
            .get("remote")
            .await
            .ok()
            .and_then(|s| s.status)
            .is_some_and(|s| {
                ready(s.conditions.as_ref(), "Ready").is_some_and(|c| {
                    c.0 == "False"
                        && c.1 == "AuthenticationFailed"
                        && c.2.contains("git-71")
                        && !c.2.contains("placeholder-token")
                })
            })
    })
    .await;

    // Rotate the Secret: the next write uses the new token, with no restart.
    secrets
        .patch(
            "git-71",
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"password": "placeholder-token-2"}})),
        )
        .await
        .unwrap();
    wait_for("store Ready again", || store_ready("True")).await;
    wait_for("the change lands", || async { list_has(&bare, "v: 2") }).await;
    let log = srv.repos.parent().unwrap().join("error.log");
    let refused = refusals(&log);
    assert!(refused > 0, "the revoked token was refused, and logged so");
    update_work(&env, "v: 3\n").await;
    wait_for("the next change lands", || async {
        list_has(&bare, "v: 3")
    })
    .await;
    assert_eq!(
        refusals(&log),
        refused,
        "the old token was sent after the rotation"
    );
}

/// True when some file of the branch holds `needle`.
fn list_has(bare: &std::path::Path, needle: &str) -> bool {
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(bare)
        .args(["grep", "-l", needle, "main", "--"])
        .output()
        .unwrap();
    out.status.success() && !out.stdout.is_empty()
}

/// Replaces the Work's content, reading it again when the controllers wrote its status
/// in between (409 Conflict), as any client of a live object does.
async fn update_work(env: &placement_support::Env, content: &str) {
    let works: Api<Work> = Api::namespaced(env.client.clone(), "team-a");
    for _ in 0..10 {
        let mut w = works.get("w71").await.unwrap();
        let mut spec = serde_json::to_value(&w.spec).unwrap();
        spec["workloadGroups"][0]["workloads"][0]["content"] =
            json!(work_content::encode(content.as_bytes()));
        w.spec = serde_json::from_value(spec).unwrap();
        match works.replace("w71", &PostParams::default(), &w).await {
            Ok(_) => return,
            Err(kube::Error::Api(e)) if e.code == 409 => continue,
            Err(e) => panic!("replacing Work w71: {e}"),
        }
    }
    panic!("Work w71 kept changing: 10 conflicts in a row");
}
