//! HorizontalPodAutoscalers as kube-apiserver serves them: `autoscaling/v2` (stored and
//! preferred) and `autoscaling/v1` views of one object, v2's defaults, the replica bounds
//! checked, and the Table columns `kubectl get hpa` prints.

use plinth_apiserver::testing::TestServer;
use serde_json::{Value, json};

fn req(method: &str, path: &str, body: Option<Value>) -> http::Request<Vec<u8>> {
    http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .header(
            "accept",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        )
        .body(body.map(|b| b.to_string().into_bytes()).unwrap_or_default())
        .unwrap()
}

fn plain(method: &str, path: &str, body: Option<Value>) -> http::Request<Vec<u8>> {
    http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(body.map(|b| b.to_string().into_bytes()).unwrap_or_default())
        .unwrap()
}

const V1: &str = "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers";
const V2: &str = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers";

#[tokio::test]
async fn one_autoscaler_is_served_as_v1_and_v2() {
    let ts = TestServer::start().await.unwrap();
    let c = ts.client();
    let group: Value = c
        .request(plain("GET", "/apis/autoscaling", None))
        .await
        .unwrap();
    // As kube-apiserver: v1 is preferred in discovery, v2 is stored.
    assert_eq!(group["preferredVersion"]["version"], "v1");
    assert_eq!(group["versions"].as_array().unwrap().len(), 2);

    // Created through v1 with a CPU target: read through v2 as a Resource metric.
    let created: Value = c
        .request(plain(
            "POST",
            V1,
            Some(json!({
                "apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": "frontend"},
                "spec": {"scaleTargetRef": {"apiVersion": "v1", "kind": "ReplicationController", "name": "frontend"},
                         "maxReplicas": 2, "targetCPUUtilizationPercentage": 70}
            })),
        ))
        .await
        .unwrap();
    assert_eq!(created["apiVersion"], "autoscaling/v1");
    assert_eq!(created["spec"]["minReplicas"], 1, "v1's default");
    assert_eq!(created["spec"]["targetCPUUtilizationPercentage"], 70);
    let v2: Value = c
        .request(plain("GET", &format!("{V2}/frontend"), None))
        .await
        .unwrap();
    assert_eq!(v2["apiVersion"], "autoscaling/v2");
    assert_eq!(
        v2["spec"]["metrics"],
        json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}}}])
    );
    assert!(v2["spec"].get("targetCPUUtilizationPercentage").is_none());

    // Created through v2 without metrics: CPU at 80%, seen by v1 as its target.
    c.request::<Value>(plain(
        "POST",
        V2,
        Some(json!({
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                     "minReplicas": 2, "maxReplicas": 3}
        })),
    ))
    .await
    .unwrap();
    let v1: Value = c
        .request(plain("GET", &format!("{V1}/web"), None))
        .await
        .unwrap();
    assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 80);
    let list: Value = c.request(plain("GET", V1, None)).await.unwrap();
    assert_eq!(list["kind"], "HorizontalPodAutoscalerList");
    assert_eq!(list["items"].as_array().unwrap().len(), 2);

    // A patch through v1 reaches the stored v2 object.
    c.request::<Value>(
        http::Request::patch(format!("{V1}/web"))
            .header("content-type", "application/merge-patch+json")
            .body(br#"{"spec":{"targetCPUUtilizationPercentage":50}}"#.to_vec())
            .unwrap(),
    )
    .await
    .unwrap();
    let v2: Value = c
        .request(plain("GET", &format!("{V2}/web"), None))
        .await
        .unwrap();
    assert_eq!(
        v2["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
        50
    );

    // kube's Table columns.
    let table: Value = c.request(req("GET", V2, None)).await.unwrap();
    let names: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "Name",
            "Reference",
            "Targets",
            "MinPods",
            "MaxPods",
            "Replicas",
            "Age"
        ]
    );
    let row = &table["rows"][0]["cells"];
    assert_eq!(row[1], "ReplicationController/frontend");
    assert_eq!(row[2], "cpu: <unknown>/70%");
    assert_eq!(row[3], "1");
    assert_eq!(row[4], 2);
}

#[tokio::test]
async fn replica_bounds_are_validated() {
    let ts = TestServer::start().await.unwrap();
    let err = ts
        .client()
        .request::<Value>(plain(
            "POST",
            V2,
            Some(json!({
                "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": "bad"},
                "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "d"}, "minReplicas": 3, "maxReplicas": 2}
            })),
        ))
        .await
        .unwrap_err();
    let kube::Error::Api(s) = err else {
        panic!("{err}")
    };
    assert_eq!(s.code, 422);
    assert_eq!(
        s.message,
        "HorizontalPodAutoscaler.autoscaling \"bad\" is invalid: spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`"
    );
}
