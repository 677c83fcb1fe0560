//! Fifty resource requests applied at once against one Git state store (the commit storm
//! Kratix users hit): every file lands byte-identical to the pipeline's output, nothing
//! fails, and the Git writer batches the writes into far fewer commits than there are
//! WorkPlacements.

use crate::support;

use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_requests_at_once_batch_into_few_commits() {
    const N: usize = 50;
    // A 2 s window of quiet (restarting with each write, up to 20 s) makes the batching
    // independent of how fast this machine runs pipelines; the default is 500 ms.
    let p = Plinth::up(&["--git-batch-window-ms", "2000"]).await;
    let client = p.client().await;
    let repo = p.repo();
    let promises = promise_api(&client);
    create_available(&promises, &webapp_sample("promise.yaml"), "webapp", 60).await;
    let before = commit_count(&repo, "main");

    let webapps = dynamic(
        &client,
        "quickstart.plinth.dev",
        "v1alpha1",
        "WebApp",
        "webapps",
        Some("default"),
    );
    let template = webapp_sample("request.yaml");
    for i in 0..N {
        let mut r = template.clone();
        r["metadata"]["name"] = format!("app-{i}").into();
        r["spec"]["image"] = format!("nginx:1.{i}").into();
        create(&webapps, &r).await;
    }
    wait_until(240, "every request Reconciled", || async {
        let list = webapps.list(&Default::default()).await.unwrap().items;
        list.len() == N
            && list
                .iter()
                .all(|o| condition(o, "Reconciled").is_some_and(|c| c.0 == "True"))
    })
    .await;

    let files = repo_files(&repo, "main");
    for i in 0..N {
        let path = format!("local/resources/default/webapp/app-{i}/render/5058f/deployment.yaml");
        let content = repo_file(&repo, "main", &path)
            .unwrap_or_else(|| panic!("{path} missing; files: {}", files.len()));
        // Byte-identical to what the pipeline script writes for this request.
        let expected = format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: app-{i}\n  namespace: webapps\nspec:\n  replicas: 2\n  selector:\n    matchLabels: {{app: app-{i}}}\n  template:\n    metadata:\n      labels: {{app: app-{i}}}\n    spec:\n      containers:\n        - name: app\n          image: nginx:1.{i}\n"
        );
        assert_eq!(content, expected, "{path}");
    }
    let placements = dynamic(
        &client,
        "platform.kratix.io",
        "v1alpha1",
        "WorkPlacement",
        "workplacements",
        Some("default"),
    );
    let wps = placements.list(&Default::default()).await.unwrap().items;
    assert_eq!(wps.len(), N);
    assert!(
        wps.iter()
            .all(|wp| condition(wp, "WriteSucceeded").is_some_and(|c| c.0 == "True")),
        "no write failed"
    );
    let commits = commit_count(&repo, "main") - before;
    println!("{N} WorkPlacements written in {commits} commits");
    assert!(
        commits > 0 && commits <= N / 5,
        "{commits} commits for {N} WorkPlacements: writes were not batched"
    );
}
