//! Kubernetes' default user-facing ClusterRoles on `plinth up`, aggregation, the
//! per-Promise ClusterRoles that aggregate into them, and `kubectl auth whoami` — driven
//! with the real kubectl as a user who is not an administrator.

use crate::support;

use serde_json::Value;
use support::{GADGET_PROMISE, Plinth};

const REQUEST: &str = r#"
apiVersion: example.test/v1
kind: Gadget
metadata:
  name: mine
spec:
  size: small
"#;

fn kubectl_available() -> bool {
    std::process::Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn as_user(p: &Plinth, token: &str, args: &[&str]) -> std::process::Output {
    let mut a = vec!["--token", token];
    a.extend_from_slice(args);
    p.kubectl_raw(&a)
}

fn rule_groups(role: &Value) -> Vec<String> {
    role["rules"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|r| r["apiGroups"].as_array().cloned().unwrap_or_default())
        .filter_map(|g| g.as_str().map(String::from))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_team_bound_to_edit_can_request_any_promise() {
    if !kubectl_available() {
        println!("SKIPPED: kubectl not found");
        return;
    }
    let p = Plinth::up(&[]).await;
    for role in ["cluster-admin", "admin", "edit", "view"] {
        p.kubectl(&["get", "clusterrole", role]);
    }
    let out = p.kubectl(&["auth", "whoami"]);
    assert!(out.contains("system:masters"), "{out}");

    p.kubectl(&["create", "namespace", "team-a"]);
    p.kubectl(&["create", "serviceaccount", "alice", "-n", "team-a"]);
    p.kubectl(&[
        "create",
        "rolebinding",
        "alice-edit",
        "--clusterrole=edit",
        "--serviceaccount=team-a:alice",
        "-n",
        "team-a",
    ]);
    let token = p.kubectl(&["create", "token", "alice", "-n", "team-a"]);
    let token = token.trim();

    let out = as_user(&p, token, &["auth", "whoami", "-o", "json"]);
    let who: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("whoami: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(
        who["status"]["userInfo"]["username"],
        "system:serviceaccount:team-a:alice"
    );

    let promise = p.dir.path().join("promise.yaml");
    std::fs::write(&promise, GADGET_PROMISE).unwrap();
    p.kubectl(&["apply", "-f", promise.to_str().unwrap()]);
    support::wait_until(
        60,
        "the gadget ClusterRoles aggregated into edit",
        || async {
            let out = p.kubectl_raw(&["get", "clusterrole", "edit", "-o", "json"]);
            serde_json::from_slice::<Value>(&out.stdout)
                .is_ok_and(|r| rule_groups(&r).iter().any(|g| g == "example.test"))
        },
    )
    .await;
    for role in ["view", "admin"] {
        let r: Value =
            serde_json::from_str(&p.kubectl(&["get", "clusterrole", role, "-o", "json"])).unwrap();
        assert!(
            rule_groups(&r).iter().any(|g| g == "example.test"),
            "{role}: {r}"
        );
    }

    let request = p.dir.path().join("request.yaml");
    std::fs::write(&request, REQUEST).unwrap();
    let out = as_user(
        &p,
        token,
        &["apply", "-n", "team-a", "-f", request.to_str().unwrap()],
    );
    assert!(
        out.status.success(),
        "alice creates a request: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = as_user(&p, token, &["get", "gadgets", "-n", "team-a"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Only in her namespace, and no RBAC of her own.
    let out = as_user(&p, token, &["get", "gadgets", "-n", "default"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("forbidden"));
    let out = as_user(
        &p,
        token,
        &[
            "create",
            "role",
            "r",
            "--verb=get",
            "--resource=pods",
            "-n",
            "team-a",
        ],
    );
    assert!(!out.status.success(), "edit cannot write Roles");

    // Deleting the Promise removes its ClusterRoles, and aggregation follows.
    p.kubectl(&[
        "delete",
        "promise",
        "gadget",
        "--wait=true",
        "--timeout=60s",
    ]);
    support::wait_until(60, "edit without the gadget rules", || async {
        let out = p.kubectl_raw(&["get", "clusterrole", "edit", "-o", "json"]);
        serde_json::from_slice::<Value>(&out.stdout)
            .is_ok_and(|r| !rule_groups(&r).iter().any(|g| g == "example.test"))
    })
    .await;
}
