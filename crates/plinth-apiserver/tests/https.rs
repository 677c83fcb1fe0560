//! The network path: HTTPS with the generated CA, bearer-token authentication (admin
//! token from the kubeconfig, ServiceAccount tokens from TokenRequest, 401 otherwise),
//! and the real kubectl against it.

use std::process::Command;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, PostParams};
use kube::config::{AuthInfo, KubeConfigOptions, Kubeconfig};
use plinth_apiserver::testing::TestServer;
use serde_json::json;

async fn config(ts: &TestServer) -> kube::Config {
    let kc = Kubeconfig::read_from(ts.kubeconfig().unwrap()).unwrap();
    kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap()
}

#[tokio::test]
async fn https_with_admin_and_service_account_tokens() {
    let ts = TestServer::start_https().await.unwrap();
    let client = kube::Client::try_from(config(&ts).await).unwrap();
    let nss: Api<Namespace> = Api::all(client.clone());
    assert!(nss.list(&Default::default()).await.unwrap().items.len() >= 4);
    // The CA is published in every namespace for in-cluster clients.
    let ca: Api<ConfigMap> = Api::namespaced(client.clone(), "kratix-platform-system");
    let ca = ca.get("kube-root-ca.crt").await.unwrap();
    let pem = std::fs::read_to_string(ts.server().ca_cert_path().unwrap()).unwrap();
    assert_eq!(ca.data.unwrap()["ca.crt"], pem);

    // No token → 401.
    let mut anon = config(&ts).await;
    anon.auth_info = AuthInfo::default();
    let anon = kube::Client::try_from(anon).unwrap();
    match Api::<Namespace>::all(anon.clone())
        .list(&Default::default())
        .await
    {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 401),
        other => panic!("expected 401, got {other:?}"),
    }
    // A wrong token → 401.
    let mut wrong = config(&ts).await;
    wrong.auth_info.token = Some("nope".to_string().into());
    match Api::<Namespace>::all(kube::Client::try_from(wrong).unwrap())
        .list(&Default::default())
        .await
    {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 401),
        other => panic!("expected 401, got {other:?}"),
    }
    // Health endpoints answer without a token.
    let req = http::Request::get("/readyz").body(Vec::new()).unwrap();
    assert_eq!(anon.request_text(req).await.unwrap(), "ok");

    // A ServiceAccount token from TokenRequest authenticates while the account exists.
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
    let mut sa = ServiceAccount::default();
    sa.metadata.name = Some("builder".into());
    sas.create(&PostParams::default(), &sa).await.unwrap();
    let req = http::Request::post("/api/v1/namespaces/default/serviceaccounts/builder/token")
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}})).unwrap())
        .unwrap();
    let tr: serde_json::Value = client.request(req).await.unwrap();
    // Let the account read ConfigMaps (RBAC is enforced for everyone but system:masters).
    let roles: Api<Role> = Api::namespaced(client.clone(), "default");
    roles
        .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "cm-reader"}, "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]})).unwrap())
        .await
        .unwrap();
    let bindings: Api<RoleBinding> = Api::namespaced(client.clone(), "default");
    bindings
        .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "cm-reader"}, "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm-reader"}, "subjects": [{"kind": "ServiceAccount", "name": "builder", "namespace": "default"}]})).unwrap())
        .await
        .unwrap();
    let token = tr["status"]["token"].as_str().unwrap().to_string();
    assert!(tr["status"]["expirationTimestamp"].is_string());
    let mut sa_cfg = config(&ts).await;
    sa_cfg.auth_info = AuthInfo {
        token: Some(token.into()),
        ..Default::default()
    };
    let sa_client = kube::Client::try_from(sa_cfg).unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(sa_client.clone(), "default");
    cms.list(&Default::default()).await.unwrap();
    sas.delete("builder", &Default::default()).await.unwrap();
    match cms.list(&Default::default()).await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 401),
        other => panic!("expected 401 after the ServiceAccount is gone, got {other:?}"),
    }

    // The in-process router rejects a bad token too, but accepts no header as admin.
    let req = http::Request::get("/api/v1/namespaces")
        .header("authorization", "Bearer nope")
        .body(Vec::new())
        .unwrap();
    let in_proc = ts.client();
    assert!(in_proc.request_text(req).await.is_err());
}

#[tokio::test]
async fn kubectl_against_the_server() {
    if Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_err()
    {
        println!("SKIPPED: kubectl not found on PATH");
        return;
    }
    let ts = TestServer::start_https().await.unwrap();
    let kc = ts.kubeconfig().unwrap();
    let kc2 = kc.clone();
    let path = ts.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        let run = |args: &[&str]| {
            let out = Command::new("kubectl")
                .args(args)
                .env("KUBECONFIG", &kc2)
                .env("HOME", &path)
                .output()
                .unwrap();
            (
                out.status.success(),
                String::from_utf8_lossy(&out.stdout).to_string()
                    + &String::from_utf8_lossy(&out.stderr),
            )
        };
        // Imperative generators send protobuf bodies.
        let mut log = Vec::new();
        for args in [
            vec!["create", "namespace", "team-a"],
            vec![
                "create",
                "configmap",
                "c1",
                "-n",
                "team-a",
                "--from-literal=a=b",
            ],
            vec![
                "create",
                "secret",
                "generic",
                "s1",
                "-n",
                "team-a",
                "--from-literal=p=q",
            ],
            vec!["create", "serviceaccount", "sa1", "-n", "team-a"],
            vec![
                "create",
                "role",
                "r1",
                "-n",
                "team-a",
                "--verb=get",
                "--resource=configmaps",
            ],
            vec![
                "create",
                "rolebinding",
                "rb1",
                "-n",
                "team-a",
                "--role=r1",
                "--serviceaccount=team-a:sa1",
            ],
            vec![
                "get",
                "cm",
                "c1",
                "-n",
                "team-a",
                "-o",
                "jsonpath={.data.a}",
            ],
        ] {
            log.push(run(&args));
        }
        log
    })
    .await
    .unwrap();
    for (ok, text) in &out {
        assert!(ok, "{text}");
    }
    assert_eq!(out.last().unwrap().1, "b");
    let secret: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(ts.client(), "team-a");
    let s = secret.get("s1").await.unwrap();
    assert_eq!(s.data.unwrap()["p"].0, b"q");
}

#[tokio::test]
async fn readyz_waits_for_the_starter_to_mark_the_server_ready() {
    let ts = TestServer::start_with(|c| c.ready_on_start = false)
        .await
        .unwrap();
    let readyz = || http::Request::get("/readyz").body(Vec::new()).unwrap();
    let client = ts.client();
    match client.request_text(readyz()).await {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 503, "{s:?}"),
        other => panic!("expected 503 before mark_ready, got {other:?}"),
    }
    // Liveness does not wait: the process is alive while it finishes starting.
    let livez = http::Request::get("/livez").body(Vec::new()).unwrap();
    assert_eq!(client.request_text(livez).await.unwrap(), "ok");
    ts.server().mark_ready();
    assert_eq!(client.request_text(readyz()).await.unwrap(), "ok");
}
