//! The marketplace `redis` Promise end to end with kubectl: its API installs, its promise
//! workflow delivers the operator's manifests, the example request becomes a
//! RedisFailover in the Git state store, and deletion removes both.
//!
//! The Promise's image `ghcr.io/syntasso/kratix-marketplace/redis-configure-pipeline`
//! cannot be pulled here. It is image-mapped to a script doing what the image does: on
//! the promise workflow it copies the dependency manifests shipped next to the Promise
//! (`internal/configure-pipeline/resources/dependencies`), on the resource workflow it
//! renders `redis-instance.yaml` for the request.

use crate::support;

use std::os::unix::fs::PermissionsExt;

use support::*;

fn pipeline_script(resources: &std::path::Path) -> String {
    format!(
        r#"#!/bin/sh
set -eu
res="{}"
if [ "$KRATIX_WORKFLOW_TYPE" = promise ]; then
  cp "$res"/dependencies/* /kratix/output/
else
  size=$(sed -n 's/^ *size: *//p' /kratix/input/object.yaml | head -n1 | tr -d "\"'")
  replicas=1
  [ "$size" = large ] && replicas=3
  sed -e "s/NAME_PLACEHOLDER/$KRATIX_OBJECT_NAME/" -e "s/replicas: 3/replicas: $replicas/" "$res/redis-instance.yaml" > /kratix/output/redis-instance.yaml
fi
"#,
        resources.display()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
async fn marketplace_redis_end_to_end() {
    let resources = corpus("kratix-marketplace/redis/internal/configure-pipeline/resources");
    // Not under /tmp: the sandbox gives every container a private /tmp.
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let script = dir.path().join("redis-pipeline.sh");
    std::fs::write(&script, pipeline_script(&resources.canonicalize().unwrap())).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let map = dir.path().join("images.yaml");
    std::fs::write(
        &map,
        format!("images:\n  - image: \"ghcr.io/syntasso/kratix-marketplace/redis-configure-pipeline:*\"\n    command: [\"{}\"]\n", script.display()),
    )
    .unwrap();

    let p = Plinth::up(&["--image-map", map.to_str().unwrap()]).await;
    let client = p.client().await;
    let repo = p.repo();
    p.kubectl(&[
        "apply",
        "-f",
        &corpus("kratix-marketplace/redis/promise.yaml").to_string_lossy(),
    ]);
    let promises = promise_api(&client);
    wait_until(90, "Promise redis Available", || async {
        promises
            .get("redis")
            .await
            .is_ok_and(|o| o.data["status"]["status"] == "Available")
    })
    .await;

    // The operator's manifests reach the Destination byte for byte.
    let crd_path = "local/dependencies/redis/promise-configure/5058f/databases.spotahome.com_redisfailovers.yaml";
    wait_until(60, crd_path, || async {
        repo_file(&repo, "main", crd_path).is_some()
    })
    .await;
    let shipped = std::fs::read_to_string(
        resources.join("dependencies/databases.spotahome.com_redisfailovers.yaml"),
    )
    .unwrap();
    assert!(
        repo_file(&repo, "main", crd_path).unwrap() == shipped,
        "dependency written byte for byte"
    );
    assert!(
        repo_file(
            &repo,
            "main",
            "local/dependencies/redis/promise-configure/5058f/all-redis-operator-resources.yaml"
        )
        .is_some()
    );
    let table = p.kubectl(&["get", "promises", "redis"]);
    assert!(
        table.contains("Available") && table.contains("v0.1.0"),
        "{table}"
    );

    // The example request.
    p.kubectl(&[
        "apply",
        "-f",
        &corpus("kratix-marketplace/redis/resource-request.yaml").to_string_lossy(),
    ]);
    let instances = dynamic(
        &client,
        "marketplace.kratix.io",
        "v1alpha1",
        "redis",
        "redis",
        Some("default"),
    );
    wait_until(90, "redis example Reconciled", || async {
        instances
            .get("example")
            .await
            .is_ok_and(|o| condition(&o, "Reconciled").is_some_and(|c| c.0 == "True"))
    })
    .await;
    let instance =
        "local/resources/default/redis/example/instance-configure/5058f/redis-instance.yaml";
    wait_until(60, instance, || async {
        repo_file(&repo, "main", instance).is_some()
    })
    .await;
    let rendered = repo_file(&repo, "main", instance).unwrap();
    assert!(
        rendered.contains("kind: RedisFailover") && rendered.contains("name: example"),
        "{rendered}"
    );
    assert!(
        rendered.contains("replicas: 1"),
        "size small renders one replica: {rendered}"
    );
    let got = p.kubectl(&["get", "redis", "example", "-o", "jsonpath={.spec.size}"]);
    assert_eq!(got, "small", "the schema default/value is kept");

    // Deletion removes what was written, then the Promise's dependencies and API.
    p.kubectl(&[
        "delete",
        "-f",
        &corpus("kratix-marketplace/redis/resource-request.yaml").to_string_lossy(),
    ]);
    wait_until(60, "instance file removed", || async {
        repo_file(&repo, "main", instance).is_none()
    })
    .await;
    p.kubectl(&["delete", "promise", "redis", "--timeout=90s"]);
    wait_until(60, "dependencies removed", || async {
        repo_file(&repo, "main", crd_path).is_none()
    })
    .await;
    assert!(
        !p.kubectl_raw(&["get", "crd", "redis.marketplace.kratix.io"])
            .status
            .success(),
        "API CRD removed"
    );
    assert_settled_silent(&p.client().await, SILENCE).await;
}
