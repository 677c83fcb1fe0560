//! Answers that clients match on, as kube-apiserver gives them: the error for a body that
//! does not decode, and discovery's storageVersionHash.

use plinth_apiserver::testing::TestServer;
use serde_json::Value;

fn post(path: &str, content_type: &str, body: &str) -> http::Request<Vec<u8>> {
    http::Request::post(path)
        .header("content-type", content_type)
        .body(body.as_bytes().to_vec())
        .unwrap()
}

#[tokio::test]
async fn an_undecodable_body_is_an_unrecognized_object_of_the_resources_kind() {
    let ts = TestServer::start().await.unwrap();
    // kubectl create --raw sends a YAML file as it is, labelled JSON.
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n";
    for (path, kind) in [
        ("/api/v1/namespaces", "Namespace"),
        ("/api/v1/namespaces/default/configmaps", "ConfigMap"),
        ("/apis/apps/v1/namespaces/default/deployments", "Deployment"),
    ] {
        let err = ts
            .client()
            .request::<Value>(post(path, "application/json", yaml))
            .await
            .unwrap_err();
        let kube::Error::Api(status) = err else {
            panic!("{path}: not an API error: {err}");
        };
        assert_eq!(status.code, 400, "{path}");
        let want = format!("the object provided is unrecognized (must be of type {kind}): ");
        assert!(
            status.message.starts_with(&want),
            "{path}: {}",
            status.message
        );
        assert!(
            status.message.contains("JSON"),
            "{path}: the cause is named: {}",
            status.message
        );
    }
}

#[tokio::test]
async fn discovery_lists_kube_apiservers_storage_version_hashes() {
    let ts = TestServer::start().await.unwrap();
    let list: Value = ts
        .client()
        .request(http::Request::get("/api/v1").body(Vec::new()).unwrap())
        .await
        .unwrap();
    let hash = |name: &str| {
        list["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .map(|r| r["storageVersionHash"].clone())
    };
    assert_eq!(hash("configmaps"), Some("qFsyl6wFWjQ=".into()));
    assert_eq!(hash("pods"), Some("xPOwRZ+Yhw8=".into()));
    // Subresources have none, as on kube-apiserver.
    assert_eq!(hash("pods/status"), Some(Value::Null));
}

#[tokio::test]
async fn container_and_volume_names_and_sub_paths_are_validated_in_every_pod_spec() {
    let ts = TestServer::start().await.unwrap();
    let cases = [
        (
            "/api/v1/namespaces/default/pods",
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":null,"image":"nginx"}]}}"#,
            "spec.containers[0].name: Required value",
        ),
        (
            "/apis/apps/v1/namespaces/default/deployments",
            r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d"},"spec":{"selector":{"matchLabels":{"a":"b"}},"template":{"metadata":{"labels":{"a":"b"}},"spec":{"containers":[{"name":"web","image":"i"}],"initContainers":[{"name":"web","image":"i"}]}}}}"#,
            "spec.template.spec.containers[0].name: Duplicate value: \"web\"",
        ),
        (
            "/apis/batch/v1/namespaces/default/cronjobs",
            r#"{"apiVersion":"batch/v1","kind":"CronJob","metadata":{"name":"c"},"spec":{"schedule":"@daily","jobTemplate":{"spec":{"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"Bad_Name","image":"i"}]}}}}}}"#,
            "spec.jobTemplate.spec.template.spec.containers[0].name: Invalid value: \"Bad_Name\"",
        ),
        // A volume name becomes a directory on the node: `..` is refused, as everywhere.
        (
            "/apis/batch/v1/namespaces/default/jobs",
            r#"{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j"},"spec":{"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"i"}],"volumes":[{"name":"../../../../home/u/.ssh","emptyDir":{}}]}}}}"#,
            "spec.template.spec.volumes[0].name: Invalid value: \"../../../../home/u/.ssh\"",
        ),
        (
            "/api/v1/namespaces/default/pods",
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"i"}],"volumes":[{"name":"v","emptyDir":{}},{"name":"v","emptyDir":{}}]}}"#,
            "spec.volumes[1].name: Duplicate value: \"v\"",
        ),
        // A sub-path stays inside its volume.
        (
            "/api/v1/namespaces/default/pods",
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"c","image":"i","volumeMounts":[{"name":"v","mountPath":"/m","subPath":"a/../../etc"}]}],"volumes":[{"name":"v","emptyDir":{}}]}}"#,
            "spec.containers[0].volumeMounts[0].subPath: Invalid value: \"a/../../etc\": must not contain '..'",
        ),
        (
            "/apis/batch/v1/namespaces/default/jobs",
            r#"{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j"},"spec":{"template":{"spec":{"restartPolicy":"Never","initContainers":[{"name":"c","image":"i","volumeMounts":[{"name":"v","mountPath":"/m","subPath":"/etc"}]}],"containers":[{"name":"d","image":"i"}],"volumes":[{"name":"v","emptyDir":{}}]}}}}"#,
            "spec.template.spec.initContainers[0].volumeMounts[0].subPath: Invalid value: \"/etc\": must be a relative path",
        ),
    ];
    for (path, body, want) in cases {
        let err = ts
            .client()
            .request::<Value>(post(path, "application/json", body))
            .await
            .unwrap_err();
        let kube::Error::Api(status) = err else {
            panic!("{path}: not an API error: {err}");
        };
        assert_eq!(status.code, 422, "{path}: {}", status.message);
        assert!(status.message.contains(want), "{path}: {}", status.message);
    }
}

#[tokio::test]
async fn the_api_server_keeps_service_kubernetes_in_default() {
    let ts = TestServer::start().await.unwrap();
    let svc: Value = ts
        .client()
        .request(
            http::Request::get("/api/v1/namespaces/default/services/kubernetes")
                .body(Vec::new())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(svc["metadata"]["labels"]["component"], "apiserver");
    assert_eq!(svc["spec"]["type"], "ClusterIP");
    assert_eq!(svc["spec"]["ports"][0]["name"], "https");
    assert_eq!(svc["spec"]["ports"][0]["port"], 443);
}

fn patch(path: &str, content_type: &str, body: &str) -> http::Request<Vec<u8>> {
    http::Request::patch(path)
        .header("content-type", content_type)
        .body(body.as_bytes().to_vec())
        .unwrap()
}

async fn api_error(ts: &TestServer, req: http::Request<Vec<u8>>) -> kube::core::Status {
    match ts.client().request::<Value>(req).await {
        Err(kube::Error::Api(s)) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn ill_typed_metadata_fields_fail_in_the_go_decoders_words() {
    let ts = TestServer::start().await.unwrap();
    let cm = "/api/v1/namespaces/default/configmaps";
    ts.client()
        .request::<Value>(post(
            cm,
            "application/json",
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}"#,
        ))
        .await
        .unwrap();
    // A strategic merge patch: the unstructured converter's error, the patch as Go prints it.
    for (field, detail) in [
        ("labels", "cannot restore map from string"),
        ("annotations", "cannot restore map from string"),
        ("finalizers", "cannot restore slice from string"),
    ] {
        let body = format!(r#"{{"metadata":{{"{field}":"invalid"}}}}"#);
        let s = api_error(
            &ts,
            patch(
                &format!("{cm}/c"),
                "application/strategic-merge-patch+json",
                &body,
            ),
        )
        .await;
        assert_eq!(s.code, 422, "{field}");
        assert_eq!(s.reason, "Invalid");
        assert_eq!(
            s.message,
            format!(
                " \"\" is invalid: patch: Invalid value: \"map[metadata:map[{field}:invalid]]\": {detail}"
            )
        );
        let d = s.details.unwrap();
        assert_eq!(d.causes[0].field, "patch");
        assert_eq!(d.kind, "");
    }
    // A merge patch: the JSON decoder's error, with the patched object quoted.
    let s = api_error(
        &ts,
        patch(
            &format!("{cm}/c"),
            "application/merge-patch+json",
            r#"{"metadata":{"labels":["a"]}}"#,
        ),
    )
    .await;
    assert_eq!(s.code, 422);
    assert!(
        s.message
            .starts_with(" \"\" is invalid: patch: Invalid value: \"{"),
        "{}",
        s.message
    );
    assert!(
        s.message.ends_with(": json: cannot unmarshal array into Go struct field ObjectMeta.metadata.labels of type map[string]string"),
        "{}",
        s.message
    );
    // A body: 400, the kind that could not be decoded named.
    let s = api_error(
        &ts,
        post(
            cm,
            "application/json",
            r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"d","annotations":{"a":1}}}"#,
        ),
    )
    .await;
    assert_eq!(s.code, 400);
    assert_eq!(
        s.message,
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: cannot unmarshal number into Go struct field ObjectMeta.metadata.annotations of type string"
    );
    // Nothing was written.
    let c: Value = ts
        .client()
        .request(
            http::Request::get(format!("{cm}/c"))
                .body(Vec::new())
                .unwrap(),
        )
        .await
        .unwrap();
    assert!(c["metadata"].get("labels").is_none());
}

#[tokio::test]
async fn nodes_are_stored_and_a_replace_at_resource_version_0_is_unconditional() {
    let ts = TestServer::start().await.unwrap();
    let c = ts.client();
    let node = |annotations: Value| {
        serde_json::json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "node-v1-test", "annotations": annotations, "resourceVersion": "0"}})
    };
    let mut created = node(serde_json::json!({}));
    created["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    c.request::<Value>(post(
        "/api/v1/nodes",
        "application/json",
        &created.to_string(),
    ))
    .await
    .unwrap();
    // kubectl replace of an object carrying resourceVersion "0": no precondition.
    let replaced: Value = c
        .request(
            http::Request::put("/api/v1/nodes/node-v1-test")
                .header("content-type", "application/json")
                .body(node(serde_json::json!({"a": "b"})).to_string().into_bytes())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(replaced["metadata"]["annotations"]["a"], "b");
    // A stale resourceVersion is still a conflict.
    let mut stale = node(serde_json::json!({"a": "c"}));
    stale["metadata"]["resourceVersion"] = serde_json::json!("1");
    let err = c
        .request::<Value>(
            http::Request::put("/api/v1/nodes/node-v1-test")
                .header("content-type", "application/json")
                .body(stale.to_string().into_bytes())
                .unwrap(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, kube::Error::Api(s) if s.code == 409));
    // kube's Table columns for Nodes.
    let table: Value = c
        .request(
            http::Request::get("/api/v1/nodes")
                .header("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
                .body(Vec::new())
                .unwrap(),
        )
        .await
        .unwrap();
    let names: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["priority"] == 0)
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Name", "Status", "Roles", "Age", "Version"]);
    assert_eq!(table["rows"][0]["cells"][1], "Unknown");
    assert_eq!(table["rows"][0]["cells"][2], "<none>");
}

#[tokio::test]
async fn openapi_v2_json_carries_the_built_in_kinds_with_their_descriptions() {
    let ts = TestServer::start().await.unwrap();
    let doc: Value = ts
        .client()
        .request(http::Request::get("/openapi/v2").body(Vec::new()).unwrap())
        .await
        .unwrap();
    assert_eq!(doc["swagger"], "2.0");
    let text = doc.to_string();
    for want in [
        "list of returned",
        "List of services",
        "Watch for changes to the described resources",
    ] {
        assert!(text.contains(want), "{want}");
    }
    let defs = doc["definitions"].as_object().unwrap();
    assert!(
        defs.keys().any(|k| k.ends_with("core.v1.Pod")),
        "Pod defined"
    );
    assert!(
        !text.contains("#/components/schemas/"),
        "references are v2's"
    );
    // Parameters carry their type inline, the body is a parameter.
    let post = &doc["paths"]["/api/v1/namespaces/{namespace}/configmaps"]["post"];
    let body = post["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["in"] == "body")
        .expect("a body parameter");
    assert!(
        body["schema"]["$ref"]
            .as_str()
            .unwrap()
            .starts_with("#/definitions/")
    );
    let get = &doc["paths"]["/api/v1/namespaces/{namespace}/configmaps"]["get"];
    let limit = get["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "limit")
        .expect("limit");
    assert_eq!(limit["type"], "integer");
}

/// kube-apiserver labels every Namespace with its name, on create and on every update,
/// so a webhook's or NetworkPolicy's namespaceSelector can pick one by name.
#[tokio::test]
async fn every_namespace_carries_its_name_as_a_label() {
    let ts = TestServer::start().await.unwrap();
    let body = r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team-a","labels":{"kubernetes.io/metadata.name":"other","tier":"x"}}}"#;
    let created: Value = ts
        .client()
        .request(post("/api/v1/namespaces", "application/json", body))
        .await
        .unwrap();
    assert_eq!(
        created["metadata"]["labels"],
        serde_json::json!({"kubernetes.io/metadata.name": "team-a", "tier": "x"})
    );
    let patch = http::Request::patch("/api/v1/namespaces/team-a")
        .header("content-type", "application/merge-patch+json")
        .body(br#"{"metadata":{"labels":{"kubernetes.io/metadata.name":null}}}"#.to_vec())
        .unwrap();
    let patched: Value = ts.client().request(patch).await.unwrap();
    assert_eq!(
        patched["metadata"]["labels"]["kubernetes.io/metadata.name"],
        "team-a"
    );
}

/// ConfigMaps and Secrets hold at most 1 MiB of values, as in Kubernetes, in each way the
/// bytes can arrive (a ConfigMap's `data` and `binaryData`, a Secret's `data` and
/// `stringData`), on create and on update; exactly 1 MiB is accepted.
#[tokio::test]
async fn configmap_and_secret_data_over_one_mebibyte_is_refused() {
    use base64::Engine;
    let ts = TestServer::start().await.unwrap();
    let mib = 1024 * 1024;
    let b64 = |n: usize| base64::engine::general_purpose::STANDARD.encode(vec![b'x'; n]);
    let text = |n: usize| "x".repeat(n);
    let cases = [
        ("configmaps", "ConfigMap", "data", text(mib), text(mib + 1)),
        (
            "configmaps",
            "ConfigMap",
            "binaryData",
            b64(mib),
            b64(mib + 1),
        ),
        ("secrets", "Secret", "data", b64(mib), b64(mib + 1)),
        ("secrets", "Secret", "stringData", text(mib), text(mib + 1)),
    ];
    for (i, (plural, kind, field, fits, too_big)) in cases.into_iter().enumerate() {
        let path = format!("/api/v1/namespaces/default/{plural}");
        let body = |name: &str, value: &str| {
            serde_json::json!({"apiVersion": "v1", "kind": kind, "metadata": {"name": name}, field: {"k": value}})
                .to_string()
        };
        let s = api_error(
            &ts,
            post(
                &path,
                "application/json",
                &body(&format!("big{i}"), &too_big),
            ),
        )
        .await;
        assert_eq!(s.code, 422, "{kind} {field}");
        assert!(
            s.message
                .ends_with("data: Too long: may not be more than 1048576 bytes"),
            "{kind} {field}: {}",
            s.message
        );
        let name = format!("fits{i}");
        ts.client()
            .request::<Value>(post(&path, "application/json", &body(&name, &fits)))
            .await
            .unwrap_or_else(|e| panic!("{kind} {field} of exactly 1 MiB: {e}"));
        let put = http::Request::put(format!("{path}/{name}"))
            .header("content-type", "application/json")
            .body(body(&name, &too_big).into_bytes())
            .unwrap();
        let s = api_error(&ts, put).await;
        assert_eq!(s.code, 422, "{kind} {field} update");
    }
}

/// A name of valid characters that is too long is refused for its length, with
/// kube-apiserver's message: 253 characters for most kinds, 63 for a namespace.
#[tokio::test]
async fn a_too_long_name_is_refused_for_its_length() {
    let ts = TestServer::start().await.unwrap();
    for (path, kind, max) in [
        ("/api/v1/namespaces/default/configmaps", "ConfigMap", 253),
        ("/api/v1/namespaces", "Namespace", 63),
    ] {
        let name = "a".repeat(max + 1);
        let body =
            format!(r#"{{"apiVersion":"v1","kind":"{kind}","metadata":{{"name":"{name}"}}}}"#);
        let s = api_error(&ts, post(path, "application/json", &body)).await;
        assert_eq!(s.code, 422, "{kind}");
        assert!(
            s.message
                .contains(&format!("must be no more than {max} characters")),
            "{kind}: {}",
            s.message
        );
        let fits = "a".repeat(max);
        let body =
            format!(r#"{{"apiVersion":"v1","kind":"{kind}","metadata":{{"name":"{fits}"}}}}"#);
        ts.client()
            .request::<Value>(post(path, "application/json", &body))
            .await
            .unwrap_or_else(|e| panic!("{kind} named with {max} characters: {e}"));
    }
}
