//! Compound Promises on a real `plinth up`: a parent Promise (`stack`, scheduled to
//! `environment: platform` as marketplace compound Promises are) whose pipeline outputs
//! requests for two sub-Promises (`database`, `cache`). The platform's own agent applies
//! Destination `platform`'s directory back into the platform, so the sub-requests are
//! created and run; deleting the parent's request prunes them, and their files go.
//! Also: the bootstrapped Destination `platform` takes only Works that select it.

use crate::support;

use serde_json::Value;
use support::*;

/// A sub-Promise `NAME` (kind `KIND`) rendering one ConfigMap per request to `local`;
/// `selectors` true adds `environment: dev`, false leaves the Promise without selectors
/// (its Namespace dependency must then not land on `platform`).
fn sub_promise(name: &str, kind: &str, selectors: bool) -> String {
    let sel = if selectors {
        "  destinationSelectors:\n    - matchLabels: {environment: dev}\n"
    } else {
        ""
    };
    format!(
        r#"apiVersion: platform.kratix.io/v1alpha1
kind: Promise
metadata:
  name: {name}
  labels: {{kratix.io/promise-version: v1.0.0}}
spec:
{sel}  api:
    apiVersion: apiextensions.k8s.io/v1
    kind: CustomResourceDefinition
    metadata: {{name: {name}s.compound.plinth.dev}}
    spec:
      group: compound.plinth.dev
      names: {{kind: {kind}, plural: {name}s, singular: {name}}}
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
                    size: {{type: string}}
  dependencies:
    - apiVersion: v1
      kind: Namespace
      metadata: {{name: {name}-system}}
  workflows:
    resource:
      configure:
        - apiVersion: platform.kratix.io/v1alpha1
          kind: Pipeline
          metadata: {{name: render}}
          spec:
            containers:
              - name: render
                image: busybox
                command: [sh, -c]
                args:
                  - |
                    set -eu
                    cat > /kratix/output/{name}.yaml <<YAML
                    apiVersion: v1
                    kind: ConfigMap
                    metadata:
                      name: {name}-${{KRATIX_OBJECT_NAME}}
                      namespace: default
                    YAML
"#
    )
}

/// The parent: its pipeline outputs one `Database` and one `Cache` request, labelled with
/// the parent as Kratix's compound Promises do.
const PARENT: &str = r#"apiVersion: platform.kratix.io/v1alpha1
kind: Promise
metadata:
  name: stack
spec:
  destinationSelectors:
    - matchLabels: {environment: platform}
  requiredPromises:
    - {name: database, version: v1.0.0}
    - {name: cache, version: v1.0.0}
  api:
    apiVersion: apiextensions.k8s.io/v1
    kind: CustomResourceDefinition
    metadata: {name: stacks.compound.plinth.dev}
    spec:
      group: compound.plinth.dev
      names: {kind: Stack, plural: stacks, singular: stack}
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
          metadata: {name: compose}
          spec:
            containers:
              - name: compose
                image: busybox
                command: [sh, -c]
                args:
                  - |
                    set -eu
                    size=$(sed -n 's/^ *size: *//p' /kratix/input/object.yaml | head -n1 | tr -d "'\"")
                    for pair in database:Database cache:Cache; do
                      name=${pair%%:*}; kind=${pair#*:}
                      cat > /kratix/output/$name.yaml <<YAML
                    apiVersion: compound.plinth.dev/v1alpha1
                    kind: $kind
                    metadata:
                      name: ${KRATIX_OBJECT_NAME}-$name
                      namespace: default
                      labels:
                        kratix.io/parent-promise-name: stack
                        kratix.io/parent-resource-name: ${KRATIX_OBJECT_NAME}
                    spec:
                      size: ${size}
                    YAML
                    done
"#;

const REQUEST: &str = "apiVersion: compound.plinth.dev/v1alpha1\nkind: Stack\nmetadata:\n  name: shop\n  namespace: default\nspec:\n  size: small\n";

fn reconciled(obj: &Value) -> bool {
    obj["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Reconciled" && c["status"] == "True")
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compound_promise_requests_sub_promises_on_the_platform_and_deleting_it_removes_them() {
    let p = Plinth::up(&[]).await;
    let dest = p
        .get(&["destination", "platform"])
        .expect("Destination platform bootstrapped");
    assert_eq!(dest["metadata"]["labels"]["environment"], "platform");
    assert_eq!(dest["spec"]["strictMatchLabels"], true);

    p.apply_yaml("database.yaml", &sub_promise("database", "Database", true));
    p.apply_yaml("cache.yaml", &sub_promise("cache", "Cache", false));
    p.apply_yaml("stack.yaml", PARENT);
    for promise in ["database", "cache", "stack"] {
        wait_until(60, &format!("Promise {promise} Available"), || async {
            p.get(&["promise", promise])
                .is_some_and(|v| v["status"]["status"] == "Available")
        })
        .await;
    }
    p.apply_yaml("request.yaml", REQUEST);

    // The parent's output goes to platform/, the agent creates the sub-requests, and they
    // run to files under local/.
    let repo = p.repo();
    wait_until(
        60,
        "sub-requests created on the platform and reconciled",
        || async {
            p.get(&["database", "shop-database", "-n", "default"])
                .is_some_and(|v| reconciled(&v))
                && p.get(&["cache", "shop-cache", "-n", "default"])
                    .is_some_and(|v| reconciled(&v))
        },
    )
    .await;
    let files = repo_files(&repo, "main");
    assert!(
        files.iter().any(
            |f| f.starts_with("platform/resources/default/stack/shop/compose/")
                && f.ends_with("database.yaml")
        ),
        "{files:?}"
    );
    for sub in ["database", "cache"] {
        assert!(
            files.iter().any(
                |f| f.starts_with(&format!("local/resources/default/{sub}/shop-{sub}/render/"))
            ),
            "{sub}'s files under local/: {files:?}"
        );
    }
    let db = p
        .get(&["database", "shop-database", "-n", "default"])
        .unwrap();
    assert_eq!(db["spec"]["size"], "small");
    assert_eq!(
        db["metadata"]["labels"]["kratix.io/parent-resource-name"],
        "shop"
    );
    // A Promise without selectors (cache) schedules its dependencies to local only:
    // Destination platform has strictMatchLabels.
    assert!(
        files
            .iter()
            .any(|f| f.starts_with("local/dependencies/cache/")),
        "{files:?}"
    );
    assert!(
        !files
            .iter()
            .any(|f| f.starts_with("platform/dependencies/cache/")
                || f.starts_with("platform/dependencies/database/")),
        "only Works selecting environment: platform land there: {files:?}"
    );

    // Deleting the parent's request removes its output, the agent prunes the
    // sub-requests, and their delete runs take their files away.
    p.kubectl(&["delete", "stack", "shop", "-n", "default", "--wait=false"]);
    wait_until(
        60,
        "sub-requests pruned and their files removed",
        || async {
            let files = repo_files(&repo, "main");
            p.get(&["database", "shop-database", "-n", "default"])
                .is_none()
                && p.get(&["cache", "shop-cache", "-n", "default"]).is_none()
                && !files
                    .iter()
                    .any(|f| f.contains("/shop-database/") || f.contains("/shop-cache/"))
                && !files
                    .iter()
                    .any(|f| f.starts_with("platform/resources/default/stack/"))
        },
    )
    .await;
    assert!(
        p.get(&["promise", "database"]).is_some(),
        "sub-Promises stay installed"
    );
    assert_settled_silent(&p.client().await, SILENCE).await;
}
