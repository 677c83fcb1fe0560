//! RBAC escalation prevention as kube-apiserver enforces it: a user who may write Roles,
//! ClusterRoles and bindings still grants only what they hold, unless they may
//! `escalate` roles or `bind` the role named; setting an `aggregationRule` needs
//! everything. And the 422s for RBAC objects Kubernetes refuses.

use plinth_apiserver::testing::TestServer;
use serde_json::{Value, json};

const RBAC: &str = "/apis/rbac.authorization.k8s.io/v1";

/// A request as `user` (impersonated by the administrator's client).
fn as_user(user: &str, method: &str, path: &str, body: Option<Value>) -> http::Request<Vec<u8>> {
    let content_type = if method == "PATCH" {
        "application/merge-patch+json"
    } else {
        "application/json"
    };
    http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", content_type)
        .header("impersonate-user", user)
        .body(body.map(|b| b.to_string().into_bytes()).unwrap_or_default())
        .unwrap()
}

fn admin(method: &str, path: &str, body: Value) -> http::Request<Vec<u8>> {
    http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(body.to_string().into_bytes())
        .unwrap()
}

/// The answer's status code and `Status.message` (empty on success).
async fn send(c: &kube::Client, req: http::Request<Vec<u8>>) -> (u16, String) {
    match c.request::<Value>(req).await {
        Ok(_) => (200, String::new()),
        Err(kube::Error::Api(s)) => (s.code, s.message),
        Err(e) => panic!("transport error: {e}"),
    }
}

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> Value {
    json!({"apiGroups": groups, "resources": resources, "verbs": verbs})
}

fn cluster_role(name: &str, rules: Vec<Value>) -> Value {
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
           "metadata": {"name": name}, "rules": rules})
}

fn binding(
    kind: &str,
    name: &str,
    ns: Option<&str>,
    role_kind: &str,
    role: &str,
    user: &str,
) -> Value {
    let mut b = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind,
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}]});
    if let Some(ns) = ns {
        b["metadata"]["namespace"] = json!(ns);
    }
    b
}

/// `bob` may write every RBAC kind and read ConfigMaps, cluster-wide; nothing else.
async fn rbac_writer(c: &kube::Client) {
    let writer = cluster_role(
        "rbac-writer",
        vec![
            rule(
                &["rbac.authorization.k8s.io"],
                &[
                    "roles",
                    "clusterroles",
                    "rolebindings",
                    "clusterrolebindings",
                ],
                &["get", "create", "update", "patch"],
            ),
            rule(&[""], &["configmaps"], &["get", "list"]),
        ],
    );
    let (code, msg) = send(c, admin("POST", &format!("{RBAC}/clusterroles"), writer)).await;
    assert_eq!(code, 200, "{msg}");
    let b = binding(
        "ClusterRoleBinding",
        "bob-writer",
        None,
        "ClusterRole",
        "rbac-writer",
        "bob",
    );
    let (code, msg) = send(c, admin("POST", &format!("{RBAC}/clusterrolebindings"), b)).await;
    assert_eq!(code, 200, "{msg}");
}

#[tokio::test]
async fn nobody_grants_what_they_do_not_hold() {
    let ts = TestServer::start().await.unwrap();
    let c = ts.client();
    rbac_writer(&c).await;
    let roles = format!("{RBAC}/clusterroles");
    let bindings = format!("{RBAC}/clusterrolebindings");

    // Everything: refused, naming what is not held.
    let all = cluster_role("everything", vec![rule(&["*"], &["*"], &["*"])]);
    let (code, msg) = send(&c, as_user("bob", "POST", &roles, Some(all))).await;
    assert_eq!(code, 403, "{msg}");
    assert_eq!(
        msg,
        "clusterroles.rbac.authorization.k8s.io \"everything\" is forbidden: user \"bob\" (groups=[\"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"*\"], Resources:[\"*\"], Verbs:[\"*\"]}"
    );
    // Part held, part not: only the part not held is named, merged by verb.
    let some = cluster_role(
        "some",
        vec![rule(&[""], &["configmaps", "secrets"], &["get", "delete"])],
    );
    let (code, msg) = send(&c, as_user("bob", "POST", &roles, Some(some))).await;
    assert_eq!(code, 403);
    assert!(
        msg.ends_with("not currently held:\n{APIGroups:[\"\"], Resources:[\"configmaps\"], Verbs:[\"delete\"]}\n{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"delete\"]}"),
        "{msg}"
    );
    // What bob holds, he may hand on.
    let reader = cluster_role("cm-reader", vec![rule(&[""], &["configmaps"], &["get"])]);
    let (code, msg) = send(&c, as_user("bob", "POST", &roles, Some(reader))).await;
    assert_eq!(code, 200, "{msg}");
    // ...but not widen it afterwards.
    let widen = json!({"rules": [rule(&[""], &["configmaps", "secrets"], &["get"])]});
    let (code, msg) = send(
        &c,
        as_user("bob", "PATCH", &format!("{roles}/cm-reader"), Some(widen)),
    )
    .await;
    assert_eq!(code, 403, "{msg}");
    assert!(msg.contains("Resources:[\"secrets\"]"), "{msg}");

    // An aggregationRule gathers anything: it needs everything.
    let gather = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "gatherer"},
        "aggregationRule": {"clusterRoleSelectors": [
            {"matchLabels": {"kubernetes.io/bootstrapping": "rbac-defaults"}}]}});
    let (code, msg) = send(&c, as_user("bob", "POST", &roles, Some(gather))).await;
    assert_eq!(code, 403);
    assert_eq!(
        msg,
        "clusterroles.rbac.authorization.k8s.io \"gatherer\" is forbidden: must have cluster-admin privileges to use the aggregationRule"
    );

    // Binding: only roles whose rules bob holds.
    let to_admin = binding(
        "ClusterRoleBinding",
        "bob-admin",
        None,
        "ClusterRole",
        "cluster-admin",
        "bob",
    );
    let (code, msg) = send(
        &c,
        as_user("bob", "POST", &bindings, Some(to_admin.clone())),
    )
    .await;
    assert_eq!(code, 403);
    assert!(
        msg.starts_with(
            "clusterrolebindings.rbac.authorization.k8s.io \"bob-admin\" is forbidden: user \"bob\""
        ),
        "{msg}"
    );
    let to_reader = binding(
        "ClusterRoleBinding",
        "carol-reads",
        None,
        "ClusterRole",
        "cm-reader",
        "carol",
    );
    let (code, msg) = send(&c, as_user("bob", "POST", &bindings, Some(to_reader))).await;
    assert_eq!(code, 200, "{msg}");
    let to_nothing = binding(
        "ClusterRoleBinding",
        "x",
        None,
        "ClusterRole",
        "no-such-role",
        "bob",
    );
    let (code, msg) = send(&c, as_user("bob", "POST", &bindings, Some(to_nothing))).await;
    assert_eq!(code, 404, "{msg}");
    assert_eq!(
        msg,
        "clusterroles.rbac.authorization.k8s.io \"no-such-role\" not found"
    );

    // Nothing refused was stored.
    for name in ["everything", "some", "gatherer"] {
        let (code, _) = send(&c, admin("GET", &format!("{roles}/{name}"), json!(null))).await;
        assert_eq!(code, 404, "{name} was stored");
    }
    let (code, _) = send(
        &c,
        admin("GET", &format!("{bindings}/bob-admin"), json!(null)),
    )
    .await;
    assert_eq!(code, 404);

    // With `bind` on cluster-admin, bob may bind it (and still not create roles beyond him).
    let may_bind = cluster_role(
        "bind-admin",
        vec![
            json!({"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"],
                    "verbs": ["bind"], "resourceNames": ["cluster-admin"]}),
        ],
    );
    assert_eq!(send(&c, admin("POST", &roles, may_bind)).await.0, 200);
    let b = binding(
        "ClusterRoleBinding",
        "bob-bind",
        None,
        "ClusterRole",
        "bind-admin",
        "bob",
    );
    assert_eq!(send(&c, admin("POST", &bindings, b)).await.0, 200);
    let (code, msg) = send(&c, as_user("bob", "POST", &bindings, Some(to_admin))).await;
    assert_eq!(code, 200, "bind allows binding the named role: {msg}");
}

#[tokio::test]
async fn escalate_allows_roles_beyond_the_writer_in_its_namespace_only() {
    let ts = TestServer::start().await.unwrap();
    let c = ts.client();
    rbac_writer(&c).await;
    for ns in ["team-a", "team-b"] {
        let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        assert_eq!(
            send(&c, admin("POST", "/api/v1/namespaces", body)).await.0,
            200
        );
    }
    let escalate = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "escalate", "namespace": "team-a"},
        "rules": [rule(&["rbac.authorization.k8s.io"], &["roles"], &["escalate"])]});
    let path = |ns: &str, plural: &str| format!("{RBAC}/namespaces/{ns}/{plural}");
    assert_eq!(
        send(&c, admin("POST", &path("team-a", "roles"), escalate))
            .await
            .0,
        200
    );
    let b = binding(
        "RoleBinding",
        "bob-escalate",
        Some("team-a"),
        "Role",
        "escalate",
        "bob",
    );
    assert_eq!(
        send(&c, admin("POST", &path("team-a", "rolebindings"), b))
            .await
            .0,
        200
    );

    let secrets = |ns: &str| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
               "metadata": {"name": "secrets", "namespace": ns},
               "rules": [rule(&[""], &["secrets"], &["get"])]})
    };
    let (code, msg) = send(
        &c,
        as_user(
            "bob",
            "POST",
            &path("team-a", "roles"),
            Some(secrets("team-a")),
        ),
    )
    .await;
    assert_eq!(code, 200, "escalate in team-a: {msg}");
    let (code, msg) = send(
        &c,
        as_user(
            "bob",
            "POST",
            &path("team-b", "roles"),
            Some(secrets("team-b")),
        ),
    )
    .await;
    assert_eq!(code, 403, "no escalate in team-b: {msg}");
    // Binding that Role needs its rules or `bind`, which escalate is not.
    let b = binding(
        "RoleBinding",
        "carol-secrets",
        Some("team-a"),
        "Role",
        "secrets",
        "carol",
    );
    let (code, msg) = send(
        &c,
        as_user("bob", "POST", &path("team-a", "rolebindings"), Some(b)),
    )
    .await;
    assert_eq!(code, 403, "{msg}");
}

#[tokio::test]
async fn rbac_objects_kubernetes_refuses_are_422() {
    let ts = TestServer::start().await.unwrap();
    let c = ts.client();
    let cases = [
        (
            "clusterroles",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                   "metadata": {"name": "a"}, "aggregationRule": {"clusterRoleSelectors": []}}),
            "aggregationRule.clusterRoleSelectors: Required value: at least one clusterRoleSelector required if aggregationRule is non-nil",
        ),
        (
            "clusterroles",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                   "metadata": {"name": "b"}, "aggregationRule": {"clusterRoleSelectors": [
                       {"matchExpressions": [{"key": "x", "operator": "In"}]}]}}),
            "aggregationRule.clusterRoleSelectors[0].matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
        ),
        (
            "clusterroles",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                   "metadata": {"name": "c"}, "rules": [{"apiGroups": [""], "resources": ["pods"]}]}),
            "rules[0].verbs: Required value: verbs must contain at least one value",
        ),
        (
            "clusterrolebindings",
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": "d"}, "roleRef": {"kind": "Role", "name": "view"},
                   "subjects": [{"kind": "ServiceAccount", "name": "sa"}]}),
            "roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\"",
        ),
    ];
    for (plural, body, want) in cases {
        let (code, msg) = send(&c, admin("POST", &format!("{RBAC}/{plural}"), body)).await;
        assert_eq!(code, 422, "{msg}");
        assert!(msg.contains(want), "{msg}\nwanted: {want}");
    }
    // Defaults fill what `kubectl create` would have written; roleRef never changes.
    let b = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "viewers"}, "roleRef": {"kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "Group", "name": "viewers"},
                     {"kind": "ServiceAccount", "name": "sa", "namespace": "default"}]});
    let stored: Value = c
        .request(admin("POST", &format!("{RBAC}/clusterrolebindings"), b))
        .await
        .unwrap();
    assert_eq!(stored["roleRef"]["apiGroup"], "rbac.authorization.k8s.io");
    assert_eq!(
        stored["subjects"][0]["apiGroup"],
        "rbac.authorization.k8s.io"
    );
    assert_eq!(stored["subjects"][1]["apiGroup"], "");
    let mut changed = stored.clone();
    changed["roleRef"]["name"] = json!("edit");
    let (code, msg) = send(
        &c,
        admin(
            "PUT",
            &format!("{RBAC}/clusterrolebindings/viewers"),
            changed,
        ),
    )
    .await;
    assert_eq!(code, 422, "{msg}");
    assert!(msg.ends_with("cannot change roleRef"), "{msg}");
}
