//! A compound Promise pins its component's version (Kratix bug log B69) on a real
//! `plinth up`: `db` at v1 then v2 (latest); the compound Promise `app` writes, in one file
//! for the Destination `platform`, a `Db` request and a ResourceBinding pinning it to v1,
//! in either order. Whatever the order, the sub-request has exactly one binding, runs at
//! v1 and never at v2; a hand patch of the binding to v2 is taken back by the platform's
//! agent (a Warning names the compound request that owns it) and runs nothing. A binding
//! that arrives after the platform created its own replaces it; two made by others stay
//! an error.

use crate::support;

use serde_json::Value;
use support::*;

/// The `db` Promise at `version`: its pipeline writes a ConfigMap to `local` and says its
/// version in its command line (`db-version=<version>`), so each Job shows the revision
/// it was built from.
fn db_promise(version: &str) -> String {
    r#"apiVersion: platform.kratix.io/v1alpha1
kind: Promise
metadata:
  name: db
  labels: {kratix.io/promise-version: VERSION}
spec:
  destinationSelectors:
    - matchLabels: {environment: dev}
  api:
    apiVersion: apiextensions.k8s.io/v1
    kind: CustomResourceDefinition
    metadata: {name: dbs.compound.plinth.dev}
    spec:
      group: compound.plinth.dev
      names: {kind: Db, plural: dbs, singular: db}
      scope: Namespaced
      versions:
        - name: v1alpha1
          served: true
          storage: true
          schema:
            openAPIV3Schema:
              type: object
              properties:
                spec:
                  type: object
                  properties:
                    size: {type: string}
  workflows:
    resource:
      configure:
        - apiVersion: platform.kratix.io/v1alpha1
          kind: Pipeline
          metadata: {name: render}
          spec:
            containers:
              - name: render
                image: busybox
                command: [sh, -c]
                args:
                  - |
                    set -eu
                    echo db-version=VERSION
                    cat > /kratix/output/db.yaml <<YAML
                    apiVersion: v1
                    kind: ConfigMap
                    metadata:
                      name: db-${KRATIX_OBJECT_NAME}
                      namespace: default
                    data:
                      version: VERSION
                    YAML
"#
    .replace("VERSION", version)
}

/// The compound Promise: its pipeline writes one file with a `Db` request and a
/// ResourceBinding pinning it to v1, the request first unless the request's
/// `spec.order` is `binding-first`.
const APP: &str = r#"apiVersion: platform.kratix.io/v1alpha1
kind: Promise
metadata:
  name: app
spec:
  destinationSelectors:
    - matchLabels: {environment: platform}
  api:
    apiVersion: apiextensions.k8s.io/v1
    kind: CustomResourceDefinition
    metadata: {name: apps.compound.plinth.dev}
    spec:
      group: compound.plinth.dev
      names: {kind: App, plural: apps, singular: app}
      scope: Namespaced
      versions:
        - name: v1alpha1
          served: true
          storage: true
          schema:
            openAPIV3Schema:
              type: object
              properties:
                spec:
                  type: object
                  properties:
                    order: {type: string}
  workflows:
    resource:
      configure:
        - apiVersion: platform.kratix.io/v1alpha1
          kind: Pipeline
          metadata: {name: compose}
          spec:
            containers:
              - name: compose
                image: busybox
                command: [sh, -c]
                args:
                  - |
                    set -eu
                    order=$(sed -n 's/^ *order: *//p' /kratix/input/object.yaml | head -n1 | tr -d "'\"")
                    db="${KRATIX_OBJECT_NAME}-db"
                    cat > /tmp/request.yaml <<YAML
                    apiVersion: compound.plinth.dev/v1alpha1
                    kind: Db
                    metadata:
                      name: $db
                      namespace: default
                      labels:
                        kratix.io/parent-promise-name: app
                        kratix.io/parent-resource-name: ${KRATIX_OBJECT_NAME}
                    spec:
                      size: small
                    YAML
                    cat > /tmp/binding.yaml <<YAML
                    apiVersion: platform.kratix.io/v1alpha1
                    kind: ResourceBinding
                    metadata:
                      name: $db-pin
                      namespace: default
                      labels:
                        kratix.io/promise-name: db
                        kratix.io/resource-name: $db
                    spec:
                      version: v1
                      promiseRef: {name: db}
                      resourceRef: {name: $db, namespace: default}
                    YAML
                    if [ "$order" = binding-first ]; then
                      first=/tmp/binding.yaml; second=/tmp/request.yaml
                    else
                      first=/tmp/request.yaml; second=/tmp/binding.yaml
                    fi
                    { cat $first; echo ---; cat $second; } > /kratix/output/db.yaml
"#;

fn app_request(name: &str, order: &str) -> String {
    format!(
        "apiVersion: compound.plinth.dev/v1alpha1\nkind: App\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  order: {order}\n"
    )
}

/// The bindings carrying `request`'s labels.
fn bindings_of(p: &Plinth, request: &str) -> Vec<Value> {
    let sel = format!("kratix.io/promise-name=db,kratix.io/resource-name={request}");
    p.get(&["resourcebindings", "-n", "default", "-l", &sel])
        .map_or_else(Vec::new, |v| {
            v["items"].as_array().cloned().unwrap_or_default()
        })
}

/// The versions the configure Jobs of `request` were built from (`db-version=<v>` in
/// their command lines).
fn job_versions(p: &Plinth, request: &str) -> Vec<String> {
    let sel = format!("kratix.io/promise-name=db,kratix.io/resource-name={request}");
    let jobs = p.get(&["jobs", "-n", "default", "-l", &sel]).unwrap();
    let mut out: Vec<String> = jobs["items"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|j| {
            let text = j["spec"]["template"].to_string();
            ["v1", "v2"]
                .into_iter()
                .filter(move |v| text.contains(&format!("db-version={v}")))
                .map(String::from)
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

fn condition<'a>(obj: &'a Value, type_: &str) -> Option<&'a Value> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

fn reconciled(obj: &Value) -> bool {
    condition(obj, "Reconciled").is_some_and(|c| c["status"] == "True")
}

/// Waits until `request` is reconciled at `version` through exactly one binding, which
/// is returned.
async fn wait_pinned(p: &Plinth, request: &str, version: &str, secs: u64) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    wait_until(
        secs + 1,
        &format!("{request} reconciled at {version} with one binding"),
        || async {
            if std::time::Instant::now() > deadline {
                panic!(
                    "timed out after {secs}s waiting for {request} reconciled at {version} with one binding\n{}",
                    state_of(p, request)
                );
            }
            let bs = bindings_of(p, request);
            p.get(&["db", request, "-n", "default"]).is_some_and(|db| {
                reconciled(&db) && db["status"]["promiseVersion"] == version
            }) && bs.len() == 1
                && bs[0]["spec"]["version"] == version
                && bs[0]["status"]["lastAppliedVersion"] == version
        },
    )
    .await;
    bindings_of(p, request).remove(0)
}

/// What a failed wait on `request` saw: its bindings, the request and its Jobs.
fn state_of(p: &Plinth, request: &str) -> String {
    format!(
        "bindings: {:#?}\nrequest: {:#}\njob versions: {:?}\ncompound requests: {:#}\nlog:\n{}",
        bindings_of(p, request)
            .iter()
            .map(|b| (
                &b["metadata"]["name"],
                &b["metadata"]["annotations"],
                &b["spec"],
                &b["status"]
            ))
            .collect::<Vec<_>>(),
        p.get(&["db", request, "-n", "default"])
            .map_or(Value::Null, |d| d["status"].clone()),
        job_versions(p, request),
        p.get(&["apps", "-n", "default"])
            .map_or(Value::Null, |a| a["items"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|a| a["status"].clone())
                .collect()),
        p.log(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compound_promise_pins_its_component_in_either_order_and_a_hand_patch_is_taken_back() {
    let p = Plinth::up(&[]).await;
    p.apply_yaml("db-v1.yaml", &db_promise("v1"));
    wait_until(60, "db v1 Available", || async {
        p.get(&["promise", "db"])
            .is_some_and(|v| v["status"]["status"] == "Available")
    })
    .await;
    p.apply_yaml("db-v2.yaml", &db_promise("v2"));
    wait_until(60, "db v2 is the latest revision", || async {
        p.get(&["promiserevisions", "-l", "kratix.io/promise-name=db"])
            .is_some_and(|v| {
                v["items"].as_array().is_some_and(|rs| {
                    rs.iter()
                        .any(|r| r["spec"]["version"] == "v2" && r["status"]["latest"] == true)
                })
            })
            && p.get(&["promise", "db"]).is_some_and(|v| {
                v["status"]["status"] == "Available"
                    && v["status"]["observedGeneration"] == v["metadata"]["generation"]
            })
    })
    .await;
    p.apply_yaml("app.yaml", APP);
    wait_until(60, "app Available", || async {
        p.get(&["promise", "app"])
            .is_some_and(|v| v["status"]["status"] == "Available")
    })
    .await;

    // Both orders of the one file: one binding, pinned to v1, adopted as the compound
    // output wrote it, and the request runs at v1 only.
    p.apply_yaml("app-a.yaml", &app_request("app-a", "request-first"));
    p.apply_yaml("app-b.yaml", &app_request("app-b", "binding-first"));
    for (request, binding) in [("app-a-db", "app-a-db-pin"), ("app-b-db", "app-b-db-pin")] {
        let b = wait_pinned(&p, request, "v1", 120).await;
        assert_eq!(
            b["metadata"]["name"], binding,
            "the output's binding is used"
        );
        assert_eq!(
            job_versions(&p, request),
            ["v1"],
            "{request} ran at v1 only"
        );
    }

    // A hand patch to v2 of the binding the compound output declares: the agent takes it
    // back within its interval (an idle directory included), a Warning on the binding
    // names the compound request that owns it, and no Job runs at v2.
    p.kubectl(&[
        "patch",
        "resourcebinding",
        "app-a-db-pin",
        "-n",
        "default",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"version":"v2"}}"#,
    ]);
    wait_until(75, "the hand patch taken back", || async {
        p.get(&["resourcebinding", "app-a-db-pin", "-n", "default"])
            .is_some_and(|b| b["spec"]["version"] == "v1")
    })
    .await;
    wait_until(15, "a Warning naming the compound request", || async {
        kubectl_events(&p).iter().any(|e| {
            e.type_ == "Warning"
                && e.kind == "ResourceBinding"
                && e.name == "app-a-db-pin"
                && e.message
                    .contains("owned by compound request default/app-a (Promise app)")
        })
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    wait_pinned(&p, "app-a-db", "v1", 30).await;
    assert_eq!(
        job_versions(&p, "app-a-db"),
        ["v1"],
        "no Job ran at v2 for app-a-db"
    );

    // A binding arriving after the platform made its own: the platform's goes, the late
    // one is used, with no double-binding error.
    p.apply_yaml(
        "late.yaml",
        "apiVersion: compound.plinth.dev/v1alpha1\nkind: Db\nmetadata:\n  name: late-db\n  namespace: default\nspec:\n  size: small\n",
    );
    wait_until(
        120,
        "late-db at v2 through the platform's own binding",
        || async {
            let bs = bindings_of(&p, "late-db");
            p.get(&["db", "late-db", "-n", "default"])
                .is_some_and(|db| reconciled(&db) && db["status"]["promiseVersion"] == "v2")
                && bs.len() == 1
                && bs[0]["spec"]["version"] == "latest"
                && bs[0]["metadata"]["annotations"]["plinth.dev/auto-created"] == "true"
        },
    )
    .await;
    let late_binding = |name: &str| {
        format!(
            "apiVersion: platform.kratix.io/v1alpha1\nkind: ResourceBinding\nmetadata:\n  name: {name}\n  namespace: default\n  labels: {{kratix.io/promise-name: db, kratix.io/resource-name: late-db}}\nspec:\n  version: v1\n  promiseRef: {{name: db}}\n  resourceRef: {{name: late-db, namespace: default}}\n"
        )
    };
    p.apply_yaml("late-pin.yaml", &late_binding("late-db-pin"));
    let b = wait_pinned(&p, "late-db", "v1", 60).await;
    assert_eq!(b["metadata"]["name"], "late-db-pin");
    let db = p.get(&["db", "late-db", "-n", "default"]).unwrap();
    assert!(
        condition(&db, "ReconcileSucceeded").is_none_or(|c| c["status"] != "False"),
        "no double-binding error: {db}"
    );

    // A second binding made by someone else: an error naming both, and neither deleted.
    p.apply_yaml("late-pin-2.yaml", &late_binding("late-db-pin-2"));
    wait_until(30, "the double-binding error", || async {
        p.get(&["db", "late-db", "-n", "default"])
            .is_some_and(|db| {
                condition(&db, "ReconcileSucceeded").is_some_and(|c| {
                    c["status"] == "False"
                        && c["message"]
                            .as_str()
                            .is_some_and(|m| m.contains("more than one ResourceBinding"))
                })
            })
    })
    .await;
    assert_eq!(bindings_of(&p, "late-db").len(), 2);
}
