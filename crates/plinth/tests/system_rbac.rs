//! Kratix's `rbac` system test on a real
//! `plinth up`, with RBAC enforced by the embedded API server: the corpus Promise
//! `rbac-promise` grants its pipelines `rbac.permissions` (same namespace, a specific
//! namespace, `*`), and the pipelines' own `kubectl` — authenticated as the pipeline's
//! ServiceAccount — reads exactly what was granted and is refused the rest (the corpus
//! scripts `exit 1` if a forbidden read succeeds). The pipelines use the stock image
//! `ghcr.io/syntasso/kratix-pipeline-utility` (host userland, incl. kubectl, in the
//! sandbox).
//!
//! Also checked: `kubectl auth can-i --as system:serviceaccount:...` answers the granted
//! matrix exactly; a ServiceAccount without bindings gets Kubernetes's 403 message; a
//! manual reconciliation keeps the RBAC objects (creationTimestamps unchanged); deleting
//! the request keeps the resource RBAC; deleting the Promise removes all of it.

use crate::support;

use kube::api::DeleteParams;
use serde_json::Value;
use support::*;

fn can_i(p: &Plinth, sa: &str, args: &[&str]) -> bool {
    let mut a = vec!["auth", "can-i"];
    a.extend_from_slice(args);
    a.extend_from_slice(&["--as", sa]);
    let out = p.kubectl_raw(&a);
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        text == "yes" || text == "no",
        "kubectl {}: {text} {}",
        a.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    text == "yes"
}

fn names(p: &Plinth, kind: &str, ns: Option<&str>) -> Vec<(String, String)> {
    let mut args = vec![
        "get",
        kind,
        "-l",
        "kratix.io/promise-name=rbac-promise",
        "-o",
        "json",
    ];
    match ns {
        Some(n) => args.extend_from_slice(&["-n", n]),
        None if kind.starts_with("cluster") => {}
        None => args.push("-A"),
    }
    let v: Value = serde_json::from_str(&p.kubectl(&args)).unwrap();
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            (
                o["metadata"]["name"].as_str().unwrap().to_string(),
                o["metadata"]["creationTimestamp"]
                    .as_str()
                    .unwrap_or("")
                    .to_string(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
async fn pipeline_permissions_are_enforced() {
    let p = Plinth::up(&[]).await;
    let client = p.client().await;
    p.kubectl(&[
        "apply",
        "-f",
        support::corpus("kratix-system-tests/rbac/resources.yaml")
            .to_str()
            .unwrap(),
    ]);

    let promises = promise_api(&client);
    create_available(
        &promises,
        &corpus_docs("kratix-system-tests/rbac/promise.yaml").remove(0),
        "rbac-promise",
        120,
    )
    .await;
    let promise = promises.get("rbac-promise").await.unwrap();
    assert_eq!(
        promise.data["status"]["kratix"]["workflows"]["pipelines"][0]["phase"],
        "Succeeded"
    );

    let requests = dynamic(
        &client,
        "test.kratix.io",
        "v1alpha1",
        "rbacbundle",
        "rbacbundle",
        Some("default"),
    );
    create(
        &requests,
        &corpus_docs("kratix-system-tests/rbac/resource-request.yaml").remove(0),
    )
    .await;
    wait_until(
        120,
        "rbac-resource-request ConfigureWorkflowCompleted",
        || async {
            requests.get("rbac-resource-request").await.is_ok_and(|o| {
                let c = condition(&o, "ConfigureWorkflowCompleted");
                assert!(
                    !c.as_ref().is_some_and(|c| c.1 == "ConfigureWorkflowFailed"),
                    "resource pipeline failed: {c:?}\n{}",
                    p.log()
                );
                c.is_some_and(|c| c.0 == "True")
            })
        },
    )
    .await;

    // The pipeline's in-pod kubectl saw its denials (the corpus script checks them).
    let logs = p.kubectl(&[
        "logs",
        "-n",
        "default",
        "-l",
        "kratix.io/pipeline-name=rbac-res",
        "-c",
        "do-commands",
        "--tail=-1",
    ]);
    assert!(
        logs.contains("forbidden"),
        "the pipeline was refused the ungranted reads:\n{logs}"
    );

    // can-i matrix of the promise pipeline's ServiceAccount.
    let pro =
        "system:serviceaccount:kratix-platform-system:rbac-promise-promise-configure-rbac-pro";
    assert!(can_i(
        &p,
        pro,
        &[
            "get",
            "configmap/rbac-promise-cm",
            "-n",
            "kratix-platform-system"
        ]
    ));
    assert!(!can_i(
        &p,
        pro,
        &["get", "configmap/other", "-n", "kratix-platform-system"]
    ));
    assert!(can_i(
        &p,
        pro,
        &["get", "configmap/rbac-promise-default-cm", "-n", "default"]
    ));
    assert!(!can_i(
        &p,
        pro,
        &["get", "configmap/rbac-promise-cant-see", "-n", "default"]
    ));
    assert!(can_i(&p, pro, &["get", "secrets", "-n", "default"]));
    assert!(can_i(&p, pro, &["list", "secrets", "-A"]));
    assert!(!can_i(&p, pro, &["delete", "secrets", "-n", "default"]));
    // … and of the resource pipeline's.
    let res = "system:serviceaccount:default:rbac-promise-resource-configure-rbac-res";
    assert!(can_i(
        &p,
        res,
        &["get", "secret/rbac-resource-secret", "-n", "default"]
    ));
    assert!(can_i(
        &p,
        res,
        &["patch", "secret/rbac-resource-secret", "-n", "default"]
    ));
    assert!(!can_i(
        &p,
        res,
        &[
            "get",
            "secret/rbac-resource-secret",
            "-n",
            "kratix-platform-system"
        ]
    ));
    assert!(can_i(
        &p,
        res,
        &[
            "get",
            "configmap/rbac-promise-cm",
            "-n",
            "kratix-platform-system"
        ]
    ));
    assert!(!can_i(
        &p,
        res,
        &["get", "configmap/rbac-promise-default-cm", "-n", "default"]
    ));
    assert!(can_i(&p, res, &["list", "promises.platform.kratix.io"]));
    assert!(!can_i(&p, res, &["delete", "promises.platform.kratix.io"]));

    // A ServiceAccount without bindings: Kubernetes's 403 message.
    p.kubectl(&["create", "serviceaccount", "nobody", "-n", "default"]);
    let token = p.kubectl(&["create", "token", "nobody", "-n", "default"]);
    let out = p.kubectl_raw(&[
        "--token",
        token.trim(),
        "get",
        "configmap",
        "rbac-promise-default-cm",
        "-n",
        "default",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(r#"configmaps "rbac-promise-default-cm" is forbidden: User "system:serviceaccount:default:nobody" cannot get resource "configmaps" in API group "" in the namespace "default""#),
        "{err}"
    );
    // Granting a Role takes effect on the next request.
    p.kubectl(&[
        "create",
        "role",
        "cm-reader",
        "-n",
        "default",
        "--verb=get",
        "--resource=configmaps",
    ]);
    p.kubectl(&[
        "create",
        "rolebinding",
        "cm-reader",
        "-n",
        "default",
        "--role=cm-reader",
        "--serviceaccount=default:nobody",
    ]);
    let out = p.kubectl_raw(&[
        "--token",
        token.trim(),
        "get",
        "configmap",
        "rbac-promise-default-cm",
        "-n",
        "default",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A manual reconciliation does not recreate the user RBAC objects.
    let before = (
        names(&p, "roles", None),
        names(&p, "rolebindings", None),
        names(&p, "clusterroles", None),
        names(&p, "clusterrolebindings", None),
    );
    assert!(
        before.2.iter().any(|(n, _)| n.contains("kratix-all-names")),
        "all-namespaces ClusterRole: {:?}",
        before.2
    );
    let jobs_before = p
        .kubectl(&[
            "get",
            "jobs",
            "-n",
            "kratix-platform-system",
            "-l",
            "kratix.io/pipeline-name=rbac-pro",
            "-o",
            "name",
        ])
        .lines()
        .count();
    p.kubectl(&[
        "label",
        "promise",
        "rbac-promise",
        "kratix.io/manual-reconciliation=true",
    ]);
    wait_until(120, "a second rbac-pro Job completes", || async {
        let jobs = p.kubectl(&[
            "get",
            "jobs",
            "-n",
            "kratix-platform-system",
            "-l",
            "kratix.io/pipeline-name=rbac-pro",
            "-o",
            "jsonpath={range .items[*]}{.status.succeeded}{\"\\n\"}{end}",
        ]);
        jobs.lines().filter(|l| l.trim() == "1").count() > jobs_before
    })
    .await;
    let after = (
        names(&p, "roles", None),
        names(&p, "rolebindings", None),
        names(&p, "clusterroles", None),
        names(&p, "clusterrolebindings", None),
    );
    assert_eq!(
        before, after,
        "RBAC objects kept with their creationTimestamps"
    );

    // Deleting the request keeps the resource pipeline's RBAC.
    requests
        .delete("rbac-resource-request", &DeleteParams::default())
        .await
        .unwrap();
    wait_until(90, "request gone", || async {
        requests
            .get_opt("rbac-resource-request")
            .await
            .unwrap()
            .is_none()
    })
    .await;
    assert!(
        names(&p, "roles", Some("default"))
            .iter()
            .any(|(n, _)| n.starts_with("rbac-promise-resource-configure-rbac-res"))
    );

    // Deleting the Promise removes all of it.
    promises
        .delete("rbac-promise", &DeleteParams::default())
        .await
        .unwrap();
    wait_until(120, "Promise gone", || async {
        promises.get_opt("rbac-promise").await.unwrap().is_none()
    })
    .await;
    wait_until(60, "RBAC removed", || async {
        names(&p, "roles", None).is_empty()
            && names(&p, "rolebindings", None).is_empty()
            && names(&p, "clusterroles", None).is_empty()
            && names(&p, "clusterrolebindings", None).is_empty()
    })
    .await;
}
