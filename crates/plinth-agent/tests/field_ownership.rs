//! Field ownership on the destination: the agent takes back a field it declares when
//! another manager changes it (`kubectl scale` of declared replicas), once; it never
//! touches fields it does not declare (another manager's data key, an annotation); once
//! `replicas` leaves the output it gives the field up; idle passes write nothing.

use std::path::Path;
use std::process::Command;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{Patch, PatchParams};
use plinth_agent::{Agent, AgentConfig};
use plinth_apiserver::testing::TestServer;
use plinth_statestore::{GitConfig, StoreConfig};
use serde_json::json;

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .current_dir(dir)
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn commit(work: &Path, rel: &str, content: &str) {
    let p = work.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, content).unwrap();
    git(work, &["add", "-A"]);
    git(work, &["commit", "-q", "-m", rel]);
    git(work, &["push", "-q", "origin", "main"]);
}

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
    let root = tempfile::tempdir().unwrap();
    let bare = root.path().join("state.git");
    let work = root.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    git(
        root.path(),
        &["init", "-q", "--bare", "-b", "main", bare.to_str().unwrap()],
    );
    git(&work, &["init", "-q", "-b", "main"]);
    git(&work, &["remote", "add", "origin", bare.to_str().unwrap()]);
    commit(&work, "d65/resources/out.yaml", &output(Some(2)));
    let source = StoreConfig::Git(GitConfig::new(
        format!("file://{}", bare.display()),
        "main",
        root.path().join("clone"),
    ));
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
    commit(&work, "d65/resources/out.yaml", &output(None));
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
