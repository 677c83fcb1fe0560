//! Field ownership on the destination: the agent takes back a field it declares when
//! another manager changes it (`kubectl scale` of declared replicas), once; it never
//! touches fields it does not declare (another manager's data key, an annotation); once
//! `replicas` leaves the output it gives the field up; idle passes write nothing.

use crate::support;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{Patch, PatchParams};
use plinth_agent::{Agent, AgentConfig};
use plinth_apiserver::testing::TestServer;
use serde_json::json;
use support::StoreRepo;

fn output(replicas: Option<u32>) -> String {
    let replicas = replicas
        .map(|r| format!("  replicas: {r}\n"))
        .unwrap_or_default();
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: default\nspec:\n{replicas}  selector:\n    matchLabels: {{app: web}}\n  template:\n    metadata:\n      labels: {{app: web}}\n    spec:\n      containers:\n      - {{name: web, image: nginx}}\n---\n\
apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\n  namespace: default\ndata:\n  a: \"1\"\n"
    )
}

#[tokio::test]
async fn declared_fields_are_taken_back_once_and_others_are_left_alone() {
    let server = TestServer::start().await.unwrap();
    let repo = StoreRepo::new();
    repo.commit("d65/resources/out.yaml", &output(Some(2)));
    let source = repo.source();
    let mut agent = Agent::new(AgentConfig::new("d65", source, "d65"), server.client())
        .await
        .unwrap();
    let first = agent.sync_once().await;
    assert!(first.errors.is_empty(), "{:?}", first.errors);

    let deps: Api<Deployment> = Api::namespaced(server.client(), "default");
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let by = |m: &str| PatchParams {
        field_manager: Some(m.into()),
        ..Default::default()
    };
    deps.patch_scale(
        "web",
        &by("kubectl"),
        &Patch::Merge(json!({"spec": {"replicas": 5}})),
    )
    .await
    .unwrap();
    cms.patch(
        "cfg",
        &by("team-b"),
        &Patch::Merge(json!({"data": {"b": "2"}})),
    )
    .await
    .unwrap();
    cms.patch(
        "cfg",
        &by("kubectl-annotate"),
        &Patch::Merge(json!({"metadata": {"annotations": {"team-b/note": "x"}}})),
    )
    .await
    .unwrap();

    let pass = agent.sync_once().await;
    assert!(pass.errors.is_empty(), "{:?}", pass.errors);
    assert_eq!(pass.drift_corrected, 1, "{pass:?}");
    let drift_events = || async {
        Api::<k8s_openapi::api::core::v1::Event>::namespaced(server.client(), "default")
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some("DriftCorrected"))
            .map(|e| {
                (
                    e.involved_object.name.unwrap_or_default(),
                    e.count.unwrap_or(1),
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(drift_events().await, [("web".to_string(), 1)]);
    assert_eq!(
        deps.get("web").await.unwrap().spec.unwrap().replicas,
        Some(2)
    );
    let rvs = || async {
        (
            deps.get("web").await.unwrap().metadata.resource_version,
            cms.get("cfg").await.unwrap().metadata.resource_version,
        )
    };
    let settled = rvs().await;
    for _ in 0..5 {
        let idle = agent.sync_once().await;
        assert_eq!(idle.api_writes, 0, "an idle pass wrote: {idle:?}");
    }
    assert_eq!(rvs().await, settled, "an idle pass changed an object");
    assert_eq!(
        drift_events().await,
        [("web".to_string(), 1)],
        "one event, not one per pass"
    );
    let cm = cms.get("cfg").await.unwrap();
    assert_eq!(cm.data.as_ref().unwrap()["b"], "2");
    assert_eq!(cm.data.as_ref().unwrap()["a"], "1");
    assert_eq!(cm.metadata.annotations.unwrap()["team-b/note"], "x");

    // Replicas leave the output and someone scales to 4: they stay at 4, with no flap.
    deps.patch_scale(
        "web",
        &by("kubectl"),
        &Patch::Merge(json!({"spec": {"replicas": 4}})),
    )
    .await
    .unwrap();
    repo.commit("d65/resources/out.yaml", &output(None));
    let pass = agent.sync_once().await;
    assert!(pass.errors.is_empty(), "{:?}", pass.errors);
    assert_eq!(pass.drift_corrected, 0);
    assert_eq!(
        deps.get("web").await.unwrap().spec.unwrap().replicas,
        Some(4)
    );
    let settled = rvs().await;
    for _ in 0..5 {
        assert_eq!(agent.sync_once().await.api_writes, 0);
    }
    assert_eq!(rvs().await, settled);
    assert_eq!(
        deps.get("web").await.unwrap().spec.unwrap().replicas,
        Some(4)
    );
}
