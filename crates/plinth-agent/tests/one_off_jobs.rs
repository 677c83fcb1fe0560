//! A Job in a Destination's directory runs once per spec: after the cluster removes it
//! (its `ttlSecondsAfterFinished`, or by hand) the agent does not create it again, neither
//! on a change elsewhere in the directory nor after a restart; a change of its spec runs
//! it exactly once more, replacing a Job that is still there.

use crate::support;

use k8s_openapi::api::batch::v1::Job;
use kube::Api;
use kube::api::DeleteParams;
use plinth_agent::{Agent, AgentConfig};
use plinth_apiserver::testing::TestServer;
use support::StoreRepo;

fn job(tag: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-a\n---\n\
apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: once-64\n  namespace: team-a\nspec:\n  ttlSecondsAfterFinished: 30\n  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: run\n        image: busybox:{tag}\n        command: [\"true\"]\n"
    )
}

fn cm(v: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\n  namespace: team-a\ndata:\n  a: \"{v}\"\n"
    )
}

#[tokio::test]
async fn a_removed_job_is_not_run_again_until_its_spec_changes() {
    let server = TestServer::start().await.unwrap();
    let repo = StoreRepo::new();
    repo.commit("d64/resources/job.yaml", &job("1.36"));
    repo.commit("d64/resources/cm.yaml", &cm("1"));
    let source = repo.source();
    let cfg = AgentConfig::new("d64", source, "d64");
    let jobs: Api<Job> = Api::namespaced(server.client(), "team-a");

    let mut agent = Agent::new(cfg.clone(), server.client()).await.unwrap();
    let first = agent.sync_once().await;
    assert!(first.errors.is_empty(), "{:?}", first.errors);
    let uid1 = jobs.get("once-64").await.unwrap().metadata.uid.unwrap();

    // The cluster's TTL removes the finished Job; then another file of the output changes.
    jobs.delete("once-64", &DeleteParams::background())
        .await
        .unwrap();
    repo.commit("d64/resources/cm.yaml", &cm("2"));
    let pass = agent.sync_once().await;
    assert!(pass.errors.is_empty(), "{:?}", pass.errors);
    assert_eq!(pass.applied, 1, "only the ConfigMap: {pass:?}");
    assert!(
        jobs.get_opt("once-64").await.unwrap().is_none(),
        "the Job was created again"
    );
    let status = agent.status();
    let st = status
        .objects
        .iter()
        .find(|o| o.object.kind == "Job")
        .expect("the Job stays in the inventory");
    assert!(st.message.contains("already ran"), "{}", st.message);

    // A restarted agent (inventory read back from the cluster) does not run it either.
    let mut restarted = Agent::new(cfg.clone(), server.client()).await.unwrap();
    let pass = restarted.sync_once().await;
    assert!(pass.errors.is_empty(), "{:?}", pass.errors);
    assert!(
        jobs.get_opt("once-64").await.unwrap().is_none(),
        "the Job was created again after a restart"
    );
    assert_eq!(
        restarted.sync_once().await.api_writes,
        0,
        "a settled agent writes nothing"
    );

    // A new spec runs once.
    repo.commit("d64/resources/job.yaml", &job("1.37"));
    let pass = restarted.sync_once().await;
    assert!(pass.errors.is_empty(), "{:?}", pass.errors);
    let j = jobs.get("once-64").await.unwrap();
    assert_ne!(j.metadata.uid.as_deref(), Some(uid1.as_str()));
    let image = |j: &Job| {
        j.spec
            .as_ref()
            .unwrap()
            .template
            .spec
            .as_ref()
            .unwrap()
            .containers[0]
            .image
            .clone()
    };
    assert_eq!(image(&j).as_deref(), Some("busybox:1.37"));

    // And a new spec while the old Job is still there replaces it (the template is immutable).
    repo.commit("d64/resources/job.yaml", &job("1.38"));
    let pass = restarted.sync_once().await;
    assert!(pass.errors.is_empty(), "{:?}", pass.errors);
    let k = jobs.get("once-64").await.unwrap();
    assert_ne!(k.metadata.uid, j.metadata.uid);
    assert_eq!(image(&k).as_deref(), Some("busybox:1.38"));
    assert_eq!(restarted.sync_once().await.api_writes, 0);

    // A label added to the Job (its spec unchanged) is applied in place: the Job is not
    // run again, and the selector and labels the server set cause no error.
    assert!(
        k.spec.as_ref().unwrap().selector.is_some(),
        "the server set a selector"
    );
    let labelled = job("1.38").replace(
        "  name: once-64\n  namespace: team-a\n",
        "  name: once-64\n  namespace: team-a\n  labels: {team: a}\n",
    );
    assert_ne!(labelled, job("1.38"));
    repo.commit("d64/resources/job.yaml", &labelled);
    let pass = restarted.sync_once().await;
    assert!(pass.errors.is_empty(), "{:?}", pass.errors);
    let l = jobs.get("once-64").await.unwrap();
    assert_eq!(
        l.metadata.uid, k.metadata.uid,
        "a label change ran the Job again"
    );
    assert_eq!(l.metadata.labels.unwrap()["team"], "a");
}
