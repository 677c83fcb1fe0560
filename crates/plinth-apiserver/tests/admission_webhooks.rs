//! Dynamic admission control: the server calls the webhooks that
//! Mutating- and ValidatingWebhookConfigurations register, over HTTPS verified against
//! their caBundle. A small HTTPS webhook server in the test (axum on the crate's own
//! listener, an rcgen certificate) records every AdmissionReview it receives and answers
//! by path: deny with field causes, allow with a warning, JSONPatch mutations, a
//! reinvocation pair, a slow answer.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::routing::post;
use axum::{Json, Router};
use base64::Engine;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use plinth_apiserver::testing::TestServer;
use serde_json::{Value, json};
use tower::ServiceExt;

/// What the webhook server received: (path, AdmissionReview request).
type Log = Arc<Mutex<Vec<(String, Value)>>>;

/// The test's webhook server.
struct Hooks {
    port: u16,
    ca_bundle: String,
    log: Log,
    _dir: tempfile::TempDir,
    _task: tokio::task::JoinHandle<()>,
}

impl Hooks {
    async fn start() -> Hooks {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let dir = tempfile::tempdir().unwrap();
        let files = plinth_apiserver::tls::load_or_create_with_names(
            dir.path(),
            &[
                "hook.webhooks.svc".to_string(),
                "sliced.webhooks.svc".to_string(),
            ],
        )
        .unwrap();
        let tls = plinth_apiserver::tls::server_config(&files).unwrap();
        let log: Log = Arc::default();
        let router = Router::new()
            .route("/{hook}", post(answer))
            .with_state(log.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let task = tokio::spawn(plinth_apiserver::listener::serve(
            listener,
            Some(tls),
            router,
            Default::default(),
            "test webhooks",
        ));
        Hooks {
            port,
            ca_bundle: base64::engine::general_purpose::STANDARD.encode(&files.ca_pem),
            log,
            _dir: dir,
            _task: task,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}/{path}", self.port)
    }

    /// The requests `path` received for objects named `name`.
    fn received(&self, path: &str, name: &str) -> Vec<Value> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter(|(p, r)| p == path && r["name"] == name)
            .map(|(_, r)| r.clone())
            .collect()
    }
}

/// The webhook server's answers, by path.
async fn answer(
    State(log): State<Log>,
    Path(hook): Path<String>,
    Json(review): Json<Value>,
) -> Json<Value> {
    let req = review["request"].clone();
    log.lock().unwrap().push((hook.clone(), req.clone()));
    let obj = &req["object"];
    let mut response = json!({"uid": req["uid"], "allowed": true});
    match hook.as_str() {
        "deny" => {
            response["allowed"] = json!(false);
            response["status"] = json!({
                "code": 422,
                "reason": "Invalid",
                "message": "data.colour: Unsupported value: \"red\"",
                "details": {"name": req["name"], "kind": "configmaps", "causes": [
                    {"reason": "FieldValueNotSupported", "field": "data.colour", "message": "Unsupported value: \"red\""}
                ]},
            });
        }
        "deny-bare" => {
            response["allowed"] = json!(false);
        }
        "allow" => {
            response["warnings"] = json!(["colour is deprecated"]);
        }
        "slow" => {
            tokio::time::sleep(Duration::from_secs(8)).await;
        }
        "label-b" => {
            let ops = if obj.pointer("/metadata/labels").is_some() {
                json!([{"op": "add", "path": "/metadata/labels/b", "value": "yes"}])
            } else {
                json!([{"op": "add", "path": "/metadata/labels", "value": {"b": "yes"}}])
            };
            set_patch(&mut response, &ops);
        }
        "seen-b" => {
            // Records in an annotation whether label b was there when this webhook saw
            // the object: "yes" only when it was called again after label-b.
            let seen = if obj.pointer("/metadata/labels/b").is_some() {
                "yes"
            } else {
                "no"
            };
            let ops = if obj.pointer("/metadata/annotations").is_some() {
                json!([{"op": "add", "path": "/metadata/annotations/seen-b", "value": seen}])
            } else {
                json!([{"op": "add", "path": "/metadata/annotations", "value": {"seen-b": seen}}])
            };
            set_patch(&mut response, &ops);
        }
        "wrong-uid" => {
            response["uid"] = json!("not-the-request");
        }
        other => panic!("no webhook at /{other}"),
    }
    Json(
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}),
    )
}

fn set_patch(response: &mut Value, ops: &Value) {
    response["patchType"] = json!("JSONPatch");
    response["patch"] =
        json!(base64::engine::general_purpose::STANDARD.encode(serde_json::to_vec(ops).unwrap()));
}

/// A webhook entry for ConfigMaps.
fn hook(name: &str, client_config: Value, operations: &[&str]) -> Value {
    json!({
        "name": name,
        "clientConfig": client_config,
        "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": operations, "resources": ["configmaps"], "scope": "*"}],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"],
    })
}

fn url_config(hooks: &Hooks, path: &str) -> Value {
    json!({"url": hooks.url(path), "caBundle": hooks.ca_bundle})
}

fn with(mut v: Value, key: &str, value: Value) -> Value {
    v[key] = value;
    v
}

async fn register(client: &kube::Client, mutating: bool, name: &str, webhooks: Vec<Value>) {
    let kind = if mutating {
        "MutatingWebhookConfiguration"
    } else {
        "ValidatingWebhookConfiguration"
    };
    let plural = if mutating {
        "mutatingwebhookconfigurations"
    } else {
        "validatingwebhookconfigurations"
    };
    let body = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
        "metadata": {"name": name}, "webhooks": webhooks,
    });
    let req = http::Request::post(format!("/apis/admissionregistration.k8s.io/v1/{plural}"))
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&body).unwrap())
        .unwrap();
    client.request_text(req).await.unwrap();
}

async fn namespace(client: &kube::Client, name: &str, labels: Value) {
    let ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
}

fn config_map(name: &str, labels: Value) -> ConfigMap {
    serde_json::from_value(
        json!({"metadata": {"name": name, "labels": labels}, "data": {"colour": "red"}}),
    )
    .unwrap()
}

/// POSTs a ConfigMap through the router; returns the status, `Warning` headers and body.
async fn post_raw(ts: &TestServer, ns: &str, cm: &ConfigMap) -> (u16, Vec<String>, Value) {
    let req = http::Request::post(format!("/api/v1/namespaces/{ns}/configmaps"))
        .header("content-type", "application/json")
        .body(axum::body::Body::from(serde_json::to_vec(cm).unwrap()))
        .unwrap();
    let resp = ts.router().oneshot(req).await.unwrap();
    let code = resp.status().as_u16();
    let warnings = resp
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
        .await
        .unwrap();
    (code, warnings, serde_json::from_slice(&body).unwrap())
}

fn api_error(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

#[tokio::test]
async fn validating_webhooks_deny_with_causes_allow_with_warnings_and_match_selectors() {
    let hooks = Hooks::start().await;
    let ts = TestServer::start().await.unwrap();
    let client = ts.client();
    namespace(&client, "team-a", json!({"team": "a"})).await;
    namespace(&client, "team-b", json!({})).await;
    register(
        &client,
        false,
        "colours",
        vec![
            with(
                hook(
                    "deny.colours.test",
                    url_config(&hooks, "deny"),
                    &["CREATE", "UPDATE"],
                ),
                "objectSelector",
                json!({"matchLabels": {"check": "strict"}}),
            ),
            with(
                hook(
                    "allow.colours.test",
                    url_config(&hooks, "allow"),
                    &["CREATE"],
                ),
                "namespaceSelector",
                json!({"matchExpressions": [{"key": "team", "operator": "In", "values": ["a"]}]}),
            ),
            with(
                hook(
                    "nodelete.colours.test",
                    url_config(&hooks, "deny-bare"),
                    &["DELETE"],
                ),
                "objectSelector",
                json!({"matchLabels": {"protected": "yes"}}),
            ),
        ],
    )
    .await;

    // Denied: the webhook's code, reason, message and causes reach the client.
    let (code, _, status) = post_raw(
        &ts,
        "team-b",
        &config_map("strict", json!({"check": "strict"})),
    )
    .await;
    assert_eq!(code, 422, "{status}");
    assert_eq!(status["reason"], "Invalid");
    assert_eq!(
        status["message"],
        "admission webhook \"deny.colours.test\" denied the request: data.colour: Unsupported value: \"red\""
    );
    assert_eq!(status["details"]["causes"][0]["field"], "data.colour");
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "team-b");
    assert!(
        cms.get_opt("strict").await.unwrap().is_none(),
        "a denied object is not stored"
    );
    let sent = hooks.received("deny", "strict");
    assert_eq!(sent.len(), 1);
    let r = &sent[0];
    assert_eq!(r["operation"], "CREATE");
    assert_eq!(r["namespace"], "team-b");
    assert_eq!(
        r["kind"],
        json!({"group": "", "version": "v1", "kind": "ConfigMap"})
    );
    assert_eq!(
        r["resource"],
        json!({"group": "", "version": "v1", "resource": "configmaps"})
    );
    assert_eq!(r["userInfo"]["username"], "plinth-admin");
    assert_eq!(r["object"]["data"]["colour"], "red");
    assert!(r["oldObject"].is_null());
    assert_eq!(r["options"]["kind"], "CreateOptions");
    assert_eq!(r["dryRun"], false);

    // Allowed in a namespace the namespaceSelector matches: stored, warning passed on.
    let (code, warnings, _) = post_raw(&ts, "team-a", &config_map("plain", json!({}))).await;
    assert_eq!(code, 201);
    assert_eq!(warnings, vec!["299 - \"colour is deprecated\"".to_string()]);
    assert_eq!(hooks.received("allow", "plain").len(), 1);
    assert!(
        hooks.received("deny", "plain").is_empty(),
        "objectSelector does not match"
    );

    // Neither selector matches in team-b without the label: nothing is sent.
    cms.create(&PostParams::default(), &config_map("quiet", json!({})))
        .await
        .unwrap();
    assert!(hooks.received("allow", "quiet").is_empty());
    assert!(hooks.received("deny", "quiet").is_empty());
    // Rules: a Secret is not sent to ConfigMap webhooks.
    let secret: Secret = serde_json::from_value(json!({"metadata": {"name": "plain"}})).unwrap();
    Api::<Secret>::namespaced(client.clone(), "team-a")
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    assert_eq!(
        hooks.received("allow", "plain").len(),
        1,
        "the Secret was not sent"
    );

    // UPDATE: the old object comes along; labelling an object into the selector denies it.
    let err = cms
        .patch(
            "quiet",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"check": "strict"}}})),
        )
        .await
        .unwrap_err();
    assert_eq!(api_error(err).code, 422);
    let r = &hooks.received("deny", "quiet")[0];
    assert_eq!(r["operation"], "UPDATE");
    assert_eq!(r["options"]["kind"], "UpdateOptions");
    assert!(r["oldObject"]["metadata"]["labels"].get("check").is_none());

    // DELETE of a protected object: denied without explanation, with the old object sent.
    cms.create(
        &PostParams::default(),
        &config_map("kept", json!({"protected": "yes"})),
    )
    .await
    .unwrap();
    let err = api_error(
        cms.delete("kept", &DeleteParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 400);
    assert_eq!(
        err.message,
        "admission webhook \"nodelete.colours.test\" denied the request without explanation"
    );
    let r = &hooks.received("deny-bare", "kept")[0];
    assert_eq!(r["operation"], "DELETE");
    assert!(r["object"].is_null());
    assert_eq!(r["oldObject"]["metadata"]["name"], "kept");
    assert!(cms.get_opt("kept").await.unwrap().is_some());

    // Dry run reaches webhooks whose sideEffects is None, with dryRun set.
    let dry = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let err = api_error(
        cms.create(&dry, &config_map("dry", json!({"check": "strict"})))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 422);
    assert_eq!(hooks.received("deny", "dry")[0]["dryRun"], true);

    // The configuration deleted: its webhooks are no longer called (the cache follows).
    let req = http::Request::delete(
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/colours",
    )
    .body(Vec::new())
    .unwrap();
    client.request_text(req).await.unwrap();
    cms.create(
        &PostParams::default(),
        &config_map("after", json!({"check": "strict"})),
    )
    .await
    .unwrap();
    assert!(hooks.received("deny", "after").is_empty());
}

#[tokio::test]
async fn mutating_webhooks_patch_in_name_order_with_reinvocation_before_validation() {
    let hooks = Hooks::start().await;
    let ts = TestServer::start().await.unwrap();
    let client = ts.client();
    // "a-seen" sorts before "b-label": seen-b runs first (no label yet), label-b adds the
    // label, and seen-b, IfNeeded, is called once more and sees it.
    register(
        &client,
        true,
        "b-label",
        vec![hook(
            "label.b.test",
            url_config(&hooks, "label-b"),
            &["CREATE"],
        )],
    )
    .await;
    register(
        &client,
        true,
        "a-seen",
        vec![with(
            hook("seen.b.test", url_config(&hooks, "seen-b"), &["CREATE"]),
            "reinvocationPolicy",
            json!("IfNeeded"),
        )],
    )
    .await;
    register(
        &client,
        false,
        "observer",
        vec![hook(
            "observe.b.test",
            url_config(&hooks, "allow"),
            &["CREATE"],
        )],
    )
    .await;

    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    cms.create(
        &PostParams::default(),
        &config_map("patched", json!({"app": "x"})),
    )
    .await
    .unwrap();
    let stored = cms.get("patched").await.unwrap();
    let labels = stored.metadata.labels.unwrap();
    assert_eq!(labels["b"], "yes");
    assert_eq!(labels["app"], "x");
    assert_eq!(stored.metadata.annotations.unwrap()["seen-b"], "yes");
    let seen = hooks.received("seen-b", "patched");
    assert_eq!(seen.len(), 2, "called, then reinvoked once");
    assert!(seen[0]["object"]["metadata"]["labels"].get("b").is_none());
    assert_eq!(seen[1]["object"]["metadata"]["labels"]["b"], "yes");
    assert_eq!(
        hooks.received("label-b", "patched").len(),
        1,
        "Never is not reinvoked"
    );
    // The validating webhook saw the mutated object.
    let observed = &hooks.received("allow", "patched")[0];
    assert_eq!(
        observed["object"]["metadata"]["annotations"]["seen-b"],
        "yes"
    );

    // An object without labels gets the whole map added.
    cms.create(&PostParams::default(), &config_map("bare", json!(null)))
        .await
        .unwrap();
    assert_eq!(
        cms.get("bare").await.unwrap().metadata.labels.unwrap()["b"],
        "yes"
    );
}

#[tokio::test]
async fn failure_policy_decides_for_webhooks_that_are_down_slow_untrusted_or_wrong() {
    let hooks = Hooks::start().await;
    let ts = TestServer::start().await.unwrap();
    let client = ts.client();
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let other_ca = {
        let dir = tempfile::tempdir().unwrap();
        let f = plinth_apiserver::tls::load_or_create(dir.path()).unwrap();
        base64::engine::general_purpose::STANDARD.encode(f.ca_pem)
    };
    let down =
        json!({"url": format!("https://127.0.0.1:{closed}/deny"), "caBundle": hooks.ca_bundle});
    let untrusted = json!({"url": hooks.url("deny"), "caBundle": other_ca});
    let selected = |name: &str, cc: Value, policy: &str| {
        let h = with(hook(name, cc, &["CREATE"]), "failurePolicy", json!(policy));
        with(
            h,
            "objectSelector",
            json!({"matchLabels": {"case": name.split('.').next().unwrap()}}),
        )
    };
    register(
        &client,
        false,
        "failures",
        vec![
            selected("down-fail.failures.test", down.clone(), "Fail"),
            selected("down-ignore.failures.test", down, "Ignore"),
            with(
                selected(
                    "slow-fail.failures.test",
                    url_config(&hooks, "slow"),
                    "Fail",
                ),
                "timeoutSeconds",
                json!(1),
            ),
            with(
                selected(
                    "slow-ignore.failures.test",
                    url_config(&hooks, "slow"),
                    "Ignore",
                ),
                "timeoutSeconds",
                json!(1),
            ),
            selected("untrusted-fail.failures.test", untrusted, "Fail"),
            selected(
                "uid-fail.failures.test",
                url_config(&hooks, "wrong-uid"),
                "Fail",
            ),
            selected(
                "missing-fail.failures.test",
                json!({"service": {"namespace": "webhooks", "name": "missing"}}),
                "Fail",
            ),
        ],
    )
    .await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let create = |case: &str| {
        let cms = cms.clone();
        let cm = config_map(&format!("{case}-cm"), json!({"case": case}));
        async move { cms.create(&PostParams::default(), &cm).await }
    };

    let err = api_error(create("down-fail").await.unwrap_err());
    assert_eq!(err.code, 500);
    assert_eq!(err.reason, "InternalError");
    assert!(
        err.message.starts_with(&format!(
            "Internal error occurred: failed calling webhook \"down-fail.failures.test\": failed to call webhook: Post \"https://127.0.0.1:{closed}/deny?timeout=10s\""
        )),
        "{}",
        err.message
    );
    create("down-ignore")
        .await
        .expect("Ignore lets the write through");

    let started = Instant::now();
    let err = api_error(create("slow-fail").await.unwrap_err());
    assert_eq!(err.code, 500);
    assert!(
        err.message.contains("slow-fail.failures.test"),
        "{}",
        err.message
    );
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "timeoutSeconds 1 bounds the call: {:?}",
        started.elapsed()
    );
    let started = Instant::now();
    create("slow-ignore")
        .await
        .expect("Ignore lets the write through");
    assert!(started.elapsed() < Duration::from_secs(6));

    let err = api_error(create("untrusted-fail").await.unwrap_err());
    assert_eq!(err.code, 500);
    assert!(
        err.message.to_lowercase().contains("certificate"),
        "{}",
        err.message
    );
    assert!(
        hooks.received("deny", "untrusted-fail-cm").is_empty(),
        "nothing is sent to an unverified server"
    );

    let err = api_error(create("uid-fail").await.unwrap_err());
    assert!(
        err.message
            .contains("received invalid webhook response: expected response.uid="),
        "{}",
        err.message
    );

    let err = api_error(create("missing-fail").await.unwrap_err());
    assert_eq!(err.code, 500);
    assert!(
        err.message
            .contains("cannot resolve service webhooks/missing: the Service does not exist"),
        "{}",
        err.message
    );
    for case in [
        "down-fail",
        "slow-fail",
        "untrusted-fail",
        "uid-fail",
        "missing-fail",
    ] {
        assert!(
            cms.get_opt(&format!("{case}-cm")).await.unwrap().is_none(),
            "{case} was stored"
        );
    }
}

#[tokio::test]
async fn service_client_config_resolves_through_the_stored_endpoints() {
    let hooks = Hooks::start().await;
    let ts = TestServer::start().await.unwrap();
    let client = ts.client();
    namespace(&client, "webhooks", json!({})).await;
    let create = |plural: &str, body: Value| {
        let req = http::Request::post(format!("/api/v1/namespaces/webhooks/{plural}"))
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&body).unwrap())
            .unwrap();
        let client = client.clone();
        async move { client.request_text(req).await.unwrap() }
    };
    create(
        "services",
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "hook"},
        "spec": {"ports": [{"name": "https", "port": 443, "targetPort": 9443}]}}),
    )
    .await;
    create("endpoints", json!({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "hook"},
        "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"name": "https", "port": hooks.port}]}]})).await;
    register(&client, false, "through-service", vec![hook(
        "deny.service.test",
        json!({"service": {"namespace": "webhooks", "name": "hook", "path": "/deny", "port": 443}, "caBundle": hooks.ca_bundle}),
        &["CREATE"],
    )]).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let err = api_error(
        cms.create(
            &PostParams::default(),
            &config_map("via-service", json!({})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(err.code, 422);
    assert!(
        err.message
            .starts_with("admission webhook \"deny.service.test\" denied the request"),
        "{}",
        err.message
    );
    assert_eq!(hooks.received("deny", "via-service").len(), 1);

    // A Service whose address is in an EndpointSlice (a not-ready endpoint is skipped).
    let req = http::Request::delete(
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/through-service",
    )
    .body(Vec::new())
    .unwrap();
    client.request_text(req).await.unwrap();
    create(
        "services",
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "sliced"},
        "spec": {"ports": [{"name": "https", "port": 8443}]}}),
    )
    .await;
    let slice = json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "sliced-x1", "labels": {"kubernetes.io/service-name": "sliced"}},
        "addressType": "IPv4",
        "endpoints": [
            {"addresses": ["127.0.0.2"], "conditions": {"ready": false}},
            {"addresses": ["127.0.0.1"], "conditions": {"ready": true}},
        ],
        "ports": [{"name": "https", "port": hooks.port, "protocol": "TCP"}],
    });
    let req = http::Request::post("/apis/discovery.k8s.io/v1/namespaces/webhooks/endpointslices")
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&slice).unwrap())
        .unwrap();
    client.request_text(req).await.unwrap();
    register(&client, false, "through-slice", vec![with(
        hook(
            "bare.slice.test",
            json!({"service": {"namespace": "webhooks", "name": "sliced", "path": "/deny-bare", "port": 8443}, "caBundle": hooks.ca_bundle}),
            &["CREATE"],
        ),
        "objectSelector",
        json!({"matchLabels": {"via": "slice"}}),
    )]).await;
    let err = api_error(
        cms.create(
            &PostParams::default(),
            &config_map("via-slice", json!({"via": "slice"})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(
        err.message,
        "admission webhook \"bare.slice.test\" denied the request without explanation"
    );
    assert_eq!(hooks.received("deny-bare", "via-slice").len(), 1);
}

#[tokio::test]
async fn webhook_configurations_are_validated_and_exempt_from_webhooks() {
    let hooks = Hooks::start().await;
    let ts = TestServer::start().await.unwrap();
    let client = ts.client();
    let body = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "bad"},
        "webhooks": [{"name": "short", "clientConfig": {"url": "http://127.0.0.1/x"},
            "sideEffects": "Some", "admissionReviewVersions": ["v1beta1"], "timeoutSeconds": 31}],
    });
    let req = http::Request::post(
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
    )
    .header("content-type", "application/json")
    .body(serde_json::to_vec(&body).unwrap())
    .unwrap();
    let err = api_error(client.request_text(req).await.unwrap_err());
    assert_eq!(err.code, 422);
    for field in [
        "webhooks[0].name",
        "webhooks[0].sideEffects",
        "webhooks[0].admissionReviewVersions",
        "webhooks[0].timeoutSeconds",
        "webhooks[0].clientConfig.url",
    ] {
        assert!(
            err.message.contains(field),
            "{field} missing from {}",
            err.message
        );
    }
    // A webhook for every resource is not called for webhook configurations.
    let everything = json!({
        "name": "all.everything.test", "clientConfig": url_config(&hooks, "deny-bare"),
        "rules": [{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*"]}],
        "sideEffects": "None", "admissionReviewVersions": ["v1"],
    });
    register(&client, false, "everything", vec![everything]).await;
    register(
        &client,
        false,
        "second",
        vec![hook(
            "second.everything.test",
            url_config(&hooks, "allow"),
            &["CREATE"],
        )],
    )
    .await;
    assert!(
        hooks.log.lock().unwrap().is_empty(),
        "configurations are exempt"
    );
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let err = api_error(
        cms.create(&PostParams::default(), &config_map("any", json!({})))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        err.message,
        "admission webhook \"all.everything.test\" denied the request without explanation"
    );
}

/// What kubectl prints for a denial is kube-apiserver's: the Status as the webhook gave
/// it (kubectl formats an `Invalid` one with causes by its causes).
#[tokio::test]
async fn kubectl_prints_the_webhook_denial() {
    if std::process::Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_err()
    {
        println!("SKIPPED: kubectl not found on PATH");
        return;
    }
    let hooks = Hooks::start().await;
    let ts = TestServer::start_https().await.unwrap();
    register(
        &ts.client(),
        false,
        "colours",
        vec![
            with(
                hook("deny.colours.test", url_config(&hooks, "deny"), &["CREATE"]),
                "objectSelector",
                json!({"matchLabels": {"denial": "causes"}}),
            ),
            with(
                hook(
                    "bare.colours.test",
                    url_config(&hooks, "deny-bare"),
                    &["CREATE"],
                ),
                "objectSelector",
                json!({"matchLabels": {"denial": "bare"}}),
            ),
        ],
    )
    .await;
    let kubectl_create = |denial: &str| {
        let file = ts.path().join(format!("{denial}.yaml"));
        std::fs::write(&file, format!(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: red-{denial}\n  labels:\n    denial: {denial}\ndata:\n  colour: red\n"
        )).unwrap();
        let kubeconfig = ts.kubeconfig().unwrap();
        let path = file.clone();
        async move {
            let out = tokio::task::spawn_blocking(move || {
                std::process::Command::new("kubectl")
                    .arg("--kubeconfig")
                    .arg(&kubeconfig)
                    .args(["create", "-f"])
                    .arg(&path)
                    .output()
                    .unwrap()
            })
            .await
            .unwrap();
            assert!(!out.status.success());
            (String::from_utf8_lossy(&out.stderr).into_owned(), file)
        }
    };
    let (stderr, file) = kubectl_create("bare").await;
    assert_eq!(
        stderr.trim(),
        format!(
            "Error from server: error when creating {:?}: admission webhook \"bare.colours.test\" denied the request without explanation",
            file.display().to_string()
        )
    );
    let (stderr, _) = kubectl_create("causes").await;
    assert!(stderr.contains("is invalid"), "{stderr}");
    assert!(
        stderr.contains("data.colour: Unsupported value: \"red\""),
        "{stderr}"
    );
}
