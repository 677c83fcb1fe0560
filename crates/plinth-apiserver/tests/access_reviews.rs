//! authorization.k8s.io/v1 SubjectAccessReview and LocalSubjectAccessReview answered by
//! the RBAC authorizer (and by `RBAC,AlwaysAllow`), impersonation checked as
//! kube-apiserver checks it, and certificates.k8s.io/v1 CertificateSigningRequests that
//! carry their requester.

use plinth_apiserver::testing::TestServer;
use serde_json::{Value, json};

fn post(path: &str, body: Value) -> http::Request<Vec<u8>> {
    http::Request::post(path)
        .header("content-type", "application/json")
        .body(body.to_string().into_bytes())
        .unwrap()
}

async fn status_of(c: &kube::Client, req: http::Request<Vec<u8>>) -> kube::core::Status {
    match c.request::<Value>(req).await {
        Err(kube::Error::Api(s)) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn sar(user: &str, groups: &[&str]) -> Value {
    json!({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": user, "groups": groups,
                 "resourceAttributes": {"namespace": "ns", "verb": "create", "group": "autoscaling", "resource": "horizontalpodautoscalers"}}
    })
}

const SAR: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";

#[tokio::test]
async fn subject_access_reviews_are_answered_by_rbac() {
    let ts = TestServer::start().await.unwrap();
    let c = ts.client();
    let list: Value = c
        .request(
            http::Request::get("/apis/authorization.k8s.io/v1")
                .body(Vec::new())
                .unwrap(),
        )
        .await
        .unwrap();
    let r = list["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "subjectaccessreviews")
        .expect("served");
    assert_eq!(r["verbs"], json!(["create"]));
    assert_eq!(r["namespaced"], false);

    let out: Value = c
        .request(post(SAR, sar("bob", &["the-group"])))
        .await
        .unwrap();
    assert_eq!(out["kind"], "SubjectAccessReview");
    assert_eq!(out["status"]["allowed"], false, "bob has no binding");
    let out: Value = c
        .request(post(SAR, sar("root", &["system:masters"])))
        .await
        .unwrap();
    assert_eq!(out["status"]["allowed"], true);

    let s = status_of(
        &c,
        post(
            SAR,
            json!({"spec": {"resourceAttributes": {"verb": "get"}}}),
        ),
    )
    .await;
    assert_eq!(s.code, 422);
    assert!(
        s.message.ends_with(
            "spec.user: Invalid value: \"\": at least one of user or group must be specified"
        ),
        "{}",
        s.message
    );
    let s = status_of(&c, post(SAR, json!({"spec": {"user": "bob"}}))).await;
    assert_eq!(s.code, 422);
    assert!(
        s.message.contains(
            "exactly one of nonResourceAttributes or resourceAttributes must be specified"
        )
    );

    // Local reviews: the URL's namespace, and only it.
    let local = "/apis/authorization.k8s.io/v1/namespaces/ns/localsubjectaccessreviews";
    let out: Value = c
        .request(post(local, json!({"spec": {"user": "bob", "resourceAttributes": {"verb": "get", "resource": "pods"}}})))
        .await
        .unwrap();
    assert_eq!(out["kind"], "LocalSubjectAccessReview");
    assert_eq!(out["spec"]["resourceAttributes"]["namespace"], "ns");
    assert_eq!(out["status"]["allowed"], false);
    let s = status_of(
        &c,
        post(local, json!({"spec": {"user": "bob", "resourceAttributes": {"namespace": "other", "verb": "get", "resource": "pods"}}})),
    )
    .await;
    assert_eq!(s.code, 400);
    assert_eq!(
        s.message,
        "spec.resourceAttributes.namespace must match namespace: ns"
    );

    // Reviews are created, never stored.
    let s = status_of(&c, http::Request::get(SAR).body(Vec::new()).unwrap()).await;
    assert_eq!(s.code, 405);
}

#[tokio::test]
async fn impersonated_users_are_authorized_as_themselves() {
    let ts = TestServer::start().await.unwrap();
    let mut req = post(CSRS, csr("foo"));
    req.headers_mut()
        .insert("impersonate-user", "user1".parse().unwrap());
    let s = status_of(&ts.client(), req).await;
    assert_eq!(s.code, 403);
    assert_eq!(
        s.message,
        "certificatesigningrequests.certificates.k8s.io is forbidden: User \"user1\" cannot create resource \"certificatesigningrequests\" in API group \"certificates.k8s.io\" at the cluster scope"
    );
}

#[tokio::test]
async fn always_allow_allows_what_rbac_does_not() {
    let ts = TestServer::start_with(|c| c.always_allow = true)
        .await
        .unwrap();
    let out: Value = ts
        .client()
        .request(post(SAR, sar("bob", &["the-group"])))
        .await
        .unwrap();
    assert_eq!(out["status"]["allowed"], true);
}

fn csr(name: &str) -> Value {
    let pem = "-----BEGIN CERTIFICATE REQUEST-----\nMAA=\n-----END CERTIFICATE REQUEST-----\n";
    use base64::Engine as _;
    json!({
        "apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": {"name": name},
        "spec": {"request": base64::engine::general_purpose::STANDARD.encode(pem),
                 "signerName": "kubernetes.io/kube-apiserver-client",
                 "usages": ["digital signature", "key encipherment", "client auth"],
                 "username": "forged", "groups": ["system:masters"]}
    })
}

const CSRS: &str = "/apis/certificates.k8s.io/v1/certificatesigningrequests";

#[tokio::test]
async fn certificate_signing_requests_carry_the_impersonated_requester() {
    // Upstream's environment: user1 may create what RBAC alone would not let it.
    let ts = TestServer::start_with(|c| c.always_allow = true)
        .await
        .unwrap();
    let c = ts.client();
    let mut req = post(CSRS, csr("foo"));
    let h = req.headers_mut();
    h.insert("impersonate-user", "user1".parse().unwrap());
    h.append("impersonate-group", "group2".parse().unwrap());
    h.append("impersonate-group", ",,,chameleon".parse().unwrap());
    h.insert("impersonate-uid", "uid-1".parse().unwrap());
    let out: Value = c.request(req).await.unwrap();
    assert_eq!(out["spec"]["username"], "user1");
    assert_eq!(out["spec"]["uid"], "uid-1");
    assert_eq!(
        out["spec"]["groups"],
        json!(["group2", ",,,chameleon", "system:authenticated"])
    );

    // Without impersonation: the admin's own identity, not what the body claims.
    let out: Value = c.request(post(CSRS, csr("bar"))).await.unwrap();
    assert_eq!(out["spec"]["username"], "plinth-admin");
    // The spec cannot be changed afterwards.
    let mut changed = out.clone();
    changed["spec"]["username"] = json!("someone-else");
    let put: Value = c
        .request(
            http::Request::put(format!("{CSRS}/bar"))
                .header("content-type", "application/json")
                .body(changed.to_string().into_bytes())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(put["spec"]["username"], "plinth-admin");

    // kube's checks of the request, signer and usages.
    let mut bad = csr("bad");
    bad["spec"]["usages"] = json!(["flying"]);
    bad["spec"]["signerName"] = json!("nodomain");
    let s = status_of(&c, post(CSRS, bad)).await;
    assert_eq!(s.code, 422);
    let fields: Vec<String> = s
        .details
        .unwrap()
        .causes
        .into_iter()
        .map(|c| c.field)
        .collect();
    assert_eq!(fields, ["spec.signerName", "spec.usages[0]"]);

    // Groups without a user: refused as kube-apiserver refuses them.
    let mut req = http::Request::get("/api/v1/namespaces/default/pods")
        .body(Vec::new())
        .unwrap();
    req.headers_mut()
        .insert("impersonate-group", "foo".parse().unwrap());
    let s = status_of(&c, req).await;
    assert_eq!(s.code, 403);
    assert!(
        s.message.ends_with("without impersonating a user"),
        "{}",
        s.message
    );
}
