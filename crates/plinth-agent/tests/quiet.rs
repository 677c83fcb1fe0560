//! A settled agent stays silent: a commit that changes another Destination's directory
//! of the same store moves the branch tip but makes no write to the target API. And a
//! pass does not wait on what the target refused: a CRD the API server would not store
//! is reported, not waited for until it is Established.

use crate::support;

use std::time::Duration;

use plinth_agent::{Agent, AgentConfig};
use plinth_apiserver::testing::TestServer;
use support::StoreRepo;

fn cm(name: &str, v: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: default\ndata:\n  k: \"{v}\"\n"
    )
}

#[tokio::test]
async fn a_commit_to_another_directory_makes_no_write() {
    let server = TestServer::start().await.unwrap();
    let repo = StoreRepo::new();
    repo.commit("mine/resources/a.yaml", &cm("a", "1"));
    repo.commit("other/resources/b.yaml", &cm("b", "1"));

    let source = repo.source();
    let mut agent = Agent::new(AgentConfig::new("mine", source, "mine"), server.client())
        .await
        .unwrap();
    let first = agent.sync_once().await;
    assert!(first.errors.is_empty(), "{:?}", first.errors);
    assert_eq!(first.applied, 1);
    assert!(first.api_writes > 0);

    repo.commit("other/resources/b.yaml", &cm("b", "2"));
    let quiet = agent.sync_once().await;
    assert_eq!(quiet.api_writes, 0, "{quiet:?}");
    assert!(
        !quiet.read_store,
        "nothing of this directory changed: {quiet:?}"
    );

    repo.commit("mine/resources/a.yaml", &cm("a", "2"));
    let changed = agent.sync_once().await;
    assert_eq!(changed.applied, 1, "{changed:?}");
    assert!(changed.api_writes > 0);
}

/// A CRD in a group Kubernetes reserves, which the API server refuses.
const REFUSED_CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.rbac.authorization.k8s.io}
spec:
  group: rbac.authorization.k8s.io
  names: {kind: Gadget, plural: gadgets, singular: gadget}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
";

#[tokio::test]
async fn a_refused_crd_is_reported_and_not_waited_for() {
    let server = TestServer::start().await.unwrap();
    let repo = StoreRepo::new();
    repo.commit("mine/dependencies/crd.yaml", REFUSED_CRD);
    repo.commit("mine/resources/a.yaml", &cm("a", "1"));

    let source = repo.source();
    let mut cfg = AgentConfig::new("mine", source, "mine");
    // Far longer than the bound below: a pass that waited for the refused CRD would
    // not end within it.
    cfg.crd_timeout = Duration::from_secs(600);
    let mut agent = Agent::new(cfg, server.client()).await.unwrap();
    let report = tokio::time::timeout(Duration::from_secs(120), agent.sync_once())
        .await
        .expect("the pass waited for a CRD the API refused");
    assert_eq!(report.applied, 1, "the ConfigMap is applied: {report:?}");
    assert_eq!(report.errors.len(), 1, "{:?}", report.errors);
    assert!(
        report.errors[0].contains("dependencies/crd.yaml")
            && report.errors[0].contains("rbac.authorization.k8s.io"),
        "the refusal names the file and the group: {:?}",
        report.errors
    );
}
