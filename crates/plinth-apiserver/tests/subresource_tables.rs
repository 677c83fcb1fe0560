//! `status` and `scale` subresources asked for as a `Table` (`kubectl get --subresource`),
//! answered as kube-apiserver does for built-in kinds and custom resources alike: the status
//! subresource prints the object with its kind's columns; the scale subresource prints the
//! `autoscaling/v1` Scale with columns of its own (built-in: `Name`, `Desired`, `Available`,
//! `Age`; custom resources: the apiextensions scale columns); a kind without the
//! subresource answers 404 `the server could not find the requested resource`.

use std::process::Command;

use plinth_apiserver::testing::TestServer;
use serde_json::{Value, json};

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

async fn send(
    client: &kube::Client,
    method: &str,
    uri: &str,
    accept: &str,
    body: Option<Value>,
) -> Result<Value, kube::Error> {
    let mut req = http::Request::builder().method(method).uri(uri);
    if !accept.is_empty() {
        req = req.header("accept", accept);
    }
    let body = match body {
        Some(b) => {
            req = req.header("content-type", "application/json");
            serde_json::to_vec(&b).unwrap()
        }
        None => Vec::new(),
    };
    client.request::<Value>(req.body(body).unwrap()).await
}

fn columns(table: &Value) -> Vec<&str> {
    table["columnDefinitions"]
        .as_array()
        .unwrap_or_else(|| panic!("not a Table: {table}"))
        .iter()
        .filter(|c| c["priority"] == 0)
        .map(|c| c["name"].as_str().unwrap())
        .collect()
}

fn cells(table: &Value) -> &Vec<Value> {
    assert_eq!(table["kind"], "Table", "{table}");
    assert_eq!(table["rows"].as_array().map(Vec::len), Some(1), "{table}");
    table["rows"][0]["cells"].as_array().unwrap()
}

/// A Pod, a Deployment (2 replicas) and a `Pool` custom resource (size 3) whose CRD has
/// printer columns and status and scale subresources, all in `default`.
async fn objects(client: &kube::Client) {
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "valid-pod"},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause"}]}});
    send(
        client,
        "POST",
        "/api/v1/namespaces/default/pods",
        "",
        Some(pod),
    )
    .await
    .unwrap();
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]}}}});
    let uri = "/apis/apps/v1/namespaces/default/deployments";
    send(client, "POST", uri, "", Some(deployment))
        .await
        .unwrap();
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "pools.example.test"},
        "spec": {"group": "example.test", "scope": "Namespaced",
            "names": {"plural": "pools", "singular": "pool", "kind": "Pool", "listKind": "PoolList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                "additionalPrinterColumns": [
                    {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"}],
                "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.size",
                    "statusReplicasPath": ".status.ready"}}}]}});
    let uri = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    send(client, "POST", uri, "", Some(crd)).await.unwrap();
    let pool = json!({"apiVersion": "example.test/v1", "kind": "Pool",
        "metadata": {"name": "p"}, "spec": {"size": 3}});
    let uri = "/apis/example.test/v1/namespaces/default/pools";
    send(client, "POST", uri, "", Some(pool)).await.unwrap();
    let status = json!({"status": {"phase": "Ready", "ready": 1}});
    let req = http::Request::patch(format!("{uri}/p/status"))
        .header("content-type", "application/merge-patch+json")
        .body(serde_json::to_vec(&status).unwrap())
        .unwrap();
    client.request::<Value>(req).await.unwrap();
}

#[tokio::test]
async fn status_tables_print_the_object_and_scale_tables_the_scale() {
    let ts = TestServer::start().await.unwrap();
    let c = ts.client();
    objects(&c).await;

    // Pods: the status subresource prints the Pod; there is no scale subresource.
    let pods = "/api/v1/namespaces/default/pods/valid-pod";
    let t = send(&c, "GET", &format!("{pods}/status"), TABLE, None)
        .await
        .unwrap();
    assert_eq!(columns(&t), ["Name", "Ready", "Status", "Restarts", "Age"]);
    assert_eq!(
        cells(&t)[..3],
        [json!("valid-pod"), json!("0/1"), json!("Pending")]
    );
    let err = send(&c, "GET", &format!("{pods}/scale"), TABLE, None)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(e) if e.code == 404
            && e.message == "the server could not find the requested resource"),
        "{err}"
    );

    // Deployments: status prints the Deployment; scale prints the Scale.
    let web = "/apis/apps/v1/namespaces/default/deployments/web";
    let t = send(&c, "GET", &format!("{web}/status"), TABLE, None)
        .await
        .unwrap();
    assert_eq!(
        columns(&t),
        ["Name", "Ready", "Up-to-date", "Available", "Age"]
    );
    assert_eq!(cells(&t)[0], "web");
    let t = send(&c, "GET", &format!("{web}/scale"), TABLE, None)
        .await
        .unwrap();
    assert_eq!(columns(&t), ["Name", "Desired", "Available", "Age"]);
    assert_eq!(t["columnDefinitions"][0]["format"], "");
    assert_eq!(cells(&t)[..3], [json!("web"), json!(2), json!(0)]);
    assert_eq!(
        t["rows"][0]["object"]["kind"], "PartialObjectMetadata",
        "{t}"
    );
    // The Scale itself without a Table in the Accept header, and as metadata.
    let s = send(&c, "GET", &format!("{web}/scale"), "application/json", None)
        .await
        .unwrap();
    assert_eq!(
        (&s["kind"], &s["spec"]["replicas"]),
        (&json!("Scale"), &json!(2))
    );
    let m = send(
        &c,
        "GET",
        &format!("{web}/scale"),
        "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io",
        None,
    )
    .await
    .unwrap();
    assert_eq!(
        (&m["kind"], &m["metadata"]["name"]),
        (&json!("PartialObjectMetadata"), &json!("web"))
    );
    // A scale write answers in the same form.
    let req = http::Request::patch(format!("{web}/scale"))
        .header("content-type", "application/merge-patch+json")
        .header("accept", TABLE)
        .body(br#"{"spec":{"replicas":4}}"#.to_vec())
        .unwrap();
    let t: Value = c.request(req).await.unwrap();
    assert_eq!(cells(&t)[..2], [json!("web"), json!(4)]);

    // A custom resource: status prints its printer columns; scale the apiextensions
    // scale columns, read from the Scale.
    let pool = "/apis/example.test/v1/namespaces/default/pools/p";
    let t = send(&c, "GET", &format!("{pool}/status"), TABLE, None)
        .await
        .unwrap();
    assert_eq!(columns(&t), ["Name", "Size", "Phase"]);
    assert_eq!(cells(&t)[..], [json!("p"), json!(3), json!("Ready")]);
    let t = send(&c, "GET", &format!("{pool}/scale"), TABLE, None)
        .await
        .unwrap();
    assert_eq!(columns(&t), ["Name", "Desired", "Available", "Age"]);
    assert_eq!(t["columnDefinitions"][0]["format"], "name");
    assert_eq!(t["columnDefinitions"][3]["type"], "date");
    assert_eq!(cells(&t)[..3], [json!("p"), json!(3), json!(1)]);
}

fn kubectl(kc: &std::path::Path, home: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new("kubectl")
        .args(args)
        .args(["-n", "default"])
        .env("KUBECONFIG", kc)
        .env("HOME", home)
        .output()
        .unwrap()
}

#[tokio::test]
async fn kubectl_get_subresource_prints_as_on_kubernetes() {
    if Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_err()
    {
        println!("SKIPPED: kubectl not found on PATH");
        return;
    }
    let ts = TestServer::start_https().await.unwrap();
    objects(&ts.client()).await;
    let kc = ts.kubeconfig().unwrap();
    let home = ts.path().to_path_buf();
    let runs = tokio::task::spawn_blocking(move || {
        [
            &["get", "pod", "valid-pod", "--subresource=status"][..],
            &["get", "pod", "valid-pod", "--subresource=scale"],
            &["get", "deployment", "web", "--subresource=status"],
            &["get", "deployment", "web", "--subresource=scale"],
            &["get", "pool", "p", "--subresource=status"],
            &["get", "pool", "p", "--subresource=scale"],
        ]
        .map(|args| kubectl(&kc, &home, args))
    })
    .await
    .unwrap();
    let text = |o: &std::process::Output| {
        let out = String::from_utf8_lossy(&o.stdout).to_string();
        let words: Vec<Vec<String>> = out
            .lines()
            .map(|l| l.split_whitespace().map(String::from).collect())
            .collect();
        (
            o.status.success(),
            words,
            String::from_utf8_lossy(&o.stderr).to_string(),
        )
    };
    let head = |w: &Vec<Vec<String>>, n: usize| -> Vec<Vec<String>> {
        w.iter().map(|l| l[..n.min(l.len())].to_vec()).collect()
    };
    let v = |s: &[&[&str]]| -> Vec<Vec<String>> {
        s.iter()
            .map(|l| l.iter().map(|w| w.to_string()).collect())
            .collect()
    };

    let (ok, words, err) = text(&runs[0]);
    assert!(ok, "{err}");
    assert_eq!(
        head(&words, 4),
        v(&[
            &["NAME", "READY", "STATUS", "RESTARTS"],
            &["valid-pod", "0/1", "Pending", "0"]
        ])
    );
    let (ok, words, err) = text(&runs[1]);
    assert!(!ok && words.is_empty(), "{words:?}");
    assert!(
        err.contains("the server could not find the requested resource"),
        "{err}"
    );
    let (ok, words, err) = text(&runs[2]);
    assert!(ok, "{err}");
    assert_eq!(head(&words, 2), v(&[&["NAME", "READY"], &["web", "0/2"]]));
    let (ok, words, err) = text(&runs[3]);
    assert!(ok, "{err}");
    assert_eq!(
        head(&words, 3),
        v(&[&["NAME", "DESIRED", "AVAILABLE"], &["web", "2", "0"]])
    );
    let (ok, words, err) = text(&runs[4]);
    assert!(ok, "{err}");
    assert_eq!(
        words,
        v(&[&["NAME", "SIZE", "PHASE"], &["p", "3", "Ready"]])
    );
    let (ok, words, err) = text(&runs[5]);
    assert!(ok, "{err}");
    assert_eq!(
        head(&words, 3),
        v(&[&["NAME", "DESIRED", "AVAILABLE"], &["p", "3", "1"]])
    );
}
