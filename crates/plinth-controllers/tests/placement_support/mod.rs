//! Shared set-up for the Work → files integration tests: an embedded API server with the
//! Kratix CRDs, the scheduler / WorkPlacement / Destination / state store controllers on
//! its client, and a `file://` bare Git repository as the GitStateStore.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use plinth_api::work_content;
use plinth_api::{Destination, GitStateStore, Work, WorkPlacement};
use plinth_apiserver::testing::TestServer;
use plinth_controllers::{Context, ControllerConfig};
use serde_json::{Value, json};

/// A workload group to put in a test Work: `(directory, selectors [(source, labels)],
/// files [(path, content)])`.
pub type GroupSpec<'a> = (
    &'a str,
    Vec<(&'a str, BTreeMap<String, String>)>,
    Vec<(&'a str, &'a str)>,
);

/// One running platform.
pub struct Env {
    pub server: TestServer,
    pub client: Client,
    pub ctx: Arc<Context>,
    pub repo: PathBuf,
    _dir: tempfile::TempDir,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Env {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// The "settled means silent" window (see `TestServer::assert_settled_silent`).
pub const SILENCE: Duration = plinth_apiserver::testing::SILENCE_WINDOW;

/// How long a test waits for the controllers to converge.
pub const CONVERGE: Duration = Duration::from_secs(60);

/// Starts the API server, registers the Kratix CRDs, creates a bare repository with a
/// `main` branch and starts the controllers with short intervals.
pub async fn start() -> Env {
    start_with(|_| {}).await
}

/// [`start`] with the controller configuration adjusted by `f`.
pub async fn start_with(f: impl FnOnce(&mut ControllerConfig)) -> Env {
    let server = TestServer::start().await.expect("API server starts");
    let client = server.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in plinth_api::crds::all_crds() {
        crds.create(&PostParams::default(), &crd)
            .await
            .expect("CRD registers");
    }
    // Wait until every Kratix kind is served.
    wait_for("Kratix kinds served", || async {
        Api::<Destination>::all(client.clone())
            .list(&Default::default())
            .await
            .is_ok()
            && Api::<Work>::all(client.clone())
                .list(&Default::default())
                .await
                .is_ok()
            && Api::<WorkPlacement>::all(client.clone())
                .list(&Default::default())
                .await
                .is_ok()
            && Api::<GitStateStore>::all(client.clone())
                .list(&Default::default())
                .await
                .is_ok()
    })
    .await;
    let ns: Api<Namespace> = Api::all(client.clone());
    for n in ["default", "kratix-platform-system", "team-a"] {
        let _ = ns
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": n}})).unwrap(),
            )
            .await;
    }

    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("state.git");
    plinth_statestore::git::init_bare(&repo, "main").expect("bare repo");

    let mut config = ControllerConfig {
        requeue_short: Duration::from_millis(200),
        requeue_default: Duration::from_millis(500),
        requeue_slow: Duration::from_secs(2),
        data_dir: dir.path().join("data"),
        git_batch_window: Duration::from_millis(20),
        ..ControllerConfig::default()
    };
    f(&mut config);
    let ctx = Context::new(client.clone(), config);
    let tasks = spawn_controllers(&ctx);
    Env {
        server,
        client,
        ctx,
        repo,
        _dir: dir,
        tasks,
    }
}

fn spawn_controllers(ctx: &Arc<Context>) -> Vec<tokio::task::JoinHandle<()>> {
    vec![
        tokio::spawn(plinth_controllers::work::run(ctx.clone())),
        tokio::spawn(plinth_controllers::workplacement::run(ctx.clone())),
        tokio::spawn(plinth_controllers::destination::run(ctx.clone())),
        tokio::spawn(plinth_controllers::statestore::run(ctx.clone())),
    ]
}

/// Polls `f` every 100 ms until it returns true; panics naming `what` after [`CONVERGE`].
pub async fn wait_for<F, Fut>(what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + CONVERGE;
    loop {
        if f().await {
            return;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out waiting for: {what}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

impl Env {
    /// Stops the controllers and starts fresh ones (empty registry and caches) with the
    /// same configuration and data directory, as a process restart would.
    pub async fn restart_controllers(&mut self) {
        for t in self.tasks.drain(..) {
            t.abort();
            let _ = t.await;
        }
        self.ctx = Context::new(self.client.clone(), (*self.ctx.config()).clone());
        self.tasks = spawn_controllers(&self.ctx);
    }

    /// `file://` URL of the bare repository.
    pub fn repo_url(&self) -> String {
        format!("file://{}", self.repo.display())
    }

    /// Creates GitStateStore `name` on the bare repository and waits until it is Ready.
    pub async fn git_store(&self, name: &str) {
        let api: Api<GitStateStore> = Api::all(self.client.clone());
        let obj: GitStateStore = serde_json::from_value(json!({
            "apiVersion": "platform.kratix.io/v1alpha1",
            "kind": "GitStateStore",
            "metadata": {"name": name},
            "spec": {"url": self.repo_url(), "branch": "main", "authMethod": "basicAuth"},
        }))
        .unwrap();
        api.create(&PostParams::default(), &obj).await.unwrap();
        wait_for(&format!("GitStateStore {name} Ready"), || async {
            api.get(name)
                .await
                .ok()
                .and_then(|s| s.status)
                .and_then(|s| s.status)
                .as_deref()
                == Some("Ready")
        })
        .await;
    }

    /// Applies a Destination from YAML text, pointing it at GitStateStore `store`.
    pub async fn destination_from_yaml(&self, yaml: &str, store: &str) -> Destination {
        let mut v: Value = serde_saphyr::from_str(yaml).expect("destination YAML");
        v["spec"]["stateStoreRef"] = json!({"kind": "GitStateStore", "name": store});
        self.create_destination(v).await
    }

    /// Creates a Destination from JSON.
    pub async fn create_destination(&self, v: Value) -> Destination {
        let d: Destination = serde_json::from_value(v).unwrap();
        Api::<Destination>::all(self.client.clone())
            .create(&PostParams::default(), &d)
            .await
            .expect("Destination created")
    }

    /// Waits until Destination `name` is Ready.
    pub async fn destination_ready(&self, name: &str) {
        let api: Api<Destination> = Api::all(self.client.clone());
        wait_for(&format!("Destination {name} Ready"), || async {
            api.get(name).await.ok().is_some_and(|d| {
                cond(&d.status.and_then(|s| s.conditions), "Ready").is_some_and(|c| c.0 == "True")
            })
        })
        .await;
    }

    /// Creates a Work in `ns`: `resource` empty = dependency Work. `groups` are
    /// `(directory, selectors [(source, labels)], files [(path, content)])`.
    pub async fn create_work(
        &self,
        ns: &str,
        name: &str,
        promise: &str,
        resource: &str,
        pipeline: &str,
        groups: &[GroupSpec<'_>],
    ) -> Work {
        let groups: Vec<Value> = groups
            .iter()
            .map(|(dir, sels, files)| {
                json!({
                    "id": plinth_api::hash::workload_group_id(dir),
                    "directory": dir,
                    "workloads": files.iter().map(|(p, c)| json!({"filepath": p, "content": work_content::encode(c.as_bytes())})).collect::<Vec<_>>(),
                    "destinationSelectors": sels.iter().map(|(s, l)| json!({"source": s, "matchLabels": l})).collect::<Vec<_>>(),
                })
            })
            .collect();
        let mut labels =
            json!({"kratix.io/promise-name": promise, "kratix.io/pipeline-name": pipeline});
        if !resource.is_empty() {
            labels["kratix.io/resource-name"] = json!(resource);
        }
        let mut spec = json!({"promiseName": promise, "workloadGroups": groups});
        if !resource.is_empty() {
            spec["resourceName"] = json!(resource);
        }
        let w: Work = serde_json::from_value(json!({
            "apiVersion": "platform.kratix.io/v1alpha1",
            "kind": "Work",
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": spec,
        }))
        .unwrap();
        Api::<Work>::namespaced(self.client.clone(), ns)
            .create(&PostParams::default(), &w)
            .await
            .expect("Work created")
    }

    /// WorkPlacements of a Work.
    pub async fn placements(&self, ns: &str, work: &str) -> Vec<WorkPlacement> {
        let lp = kube::api::ListParams::default().labels(&format!("kratix.io/work={work}"));
        Api::<WorkPlacement>::namespaced(self.client.clone(), ns)
            .list(&lp)
            .await
            .unwrap()
            .items
    }

    /// Waits until the Work's condition `type_` has `status` and `reason`; returns its message.
    pub async fn work_condition(
        &self,
        ns: &str,
        name: &str,
        type_: &str,
        status: &str,
        reason: &str,
    ) -> String {
        let api: Api<Work> = Api::namespaced(self.client.clone(), ns);
        let deadline = tokio::time::Instant::now() + CONVERGE;
        let mut last = None;
        loop {
            let got = api
                .get(name)
                .await
                .ok()
                .and_then(|w| cond(&w.status.and_then(|s| s.conditions), type_));
            if let Some((s, r, m)) = &got
                && s == status
                && r == reason
            {
                return m.clone();
            }
            last = got.or(last);
            if tokio::time::Instant::now() > deadline {
                panic!(
                    "timed out waiting for Work {ns}/{name} {type_}={status}/{reason}; last seen {last:?}"
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until the WorkPlacement is Ready (written) and returns it.
    pub async fn placement_ready(&self, ns: &str, name: &str) -> WorkPlacement {
        let api: Api<WorkPlacement> = Api::namespaced(self.client.clone(), ns);
        wait_for(&format!("WorkPlacement {ns}/{name} Ready"), || async {
            api.get(name).await.ok().is_some_and(|w| {
                cond(&w.status.and_then(|s| s.conditions), "Ready").is_some_and(|c| c.0 == "True")
            })
        })
        .await;
        api.get(name).await.unwrap()
    }

    /// Deletes a Work and waits until it is gone.
    pub async fn delete_work(&self, ns: &str, name: &str) {
        let api: Api<Work> = Api::namespaced(self.client.clone(), ns);
        api.delete(name, &DeleteParams::default()).await.unwrap();
        wait_for(&format!("Work {ns}/{name} gone"), || async {
            api.get_opt(name).await.unwrap().is_none()
        })
        .await;
    }

    /// Merge-patches a Destination's labels.
    pub async fn relabel_destination(&self, name: &str, labels: Value) {
        let api: Api<Destination> = Api::all(self.client.clone());
        api.patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": labels}})),
        )
        .await
        .unwrap();
    }

    /// Files on `main` (sorted), via the git CLI.
    pub fn files(&self) -> Vec<String> {
        let out = git(&self.repo, &["ls-tree", "-r", "--name-only", "main"]);
        out.lines().map(String::from).collect()
    }

    /// Content of a file on `main`, via the git CLI.
    pub fn show(&self, path: &str) -> String {
        git(&self.repo, &["show", &format!("main:{path}")])
    }

    /// Number of commits on `main`.
    pub fn commits(&self) -> usize {
        git(&self.repo, &["rev-list", "--count", "main"])
            .trim()
            .parse()
            .unwrap()
    }

    /// Waits until `path` exists (or not) on `main`.
    pub async fn wait_file(&self, path: &str, present: bool) {
        wait_for(
            &format!("{path} {}", if present { "committed" } else { "removed" }),
            || async { self.files().iter().any(|f| f == path) == present },
        )
        .await;
    }
}

/// Commits a change to the bare repository from outside Plinth (a person or another
/// tool): clones it, runs `edit` in the work tree, commits everything and pushes.
pub fn external_commit(repo: &Path, message: &str, edit: impl FnOnce(&Path)) {
    let dir = tempfile::tempdir().unwrap();
    let wt = dir.path().join("wt");
    let run = |args: &[&str], cwd: &Path| {
        let out = Command::new("git")
            .args(args)
            .current_dir(cwd)
            .output()
            .expect("git CLI runs");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run(
        &[
            "clone",
            "-q",
            "--branch",
            "main",
            repo.to_str().unwrap(),
            wt.to_str().unwrap(),
        ],
        dir.path(),
    );
    edit(&wt);
    run(&["add", "-A"], &wt);
    run(
        &[
            "-c",
            "user.name=someone",
            "-c",
            "user.email=someone@example.test",
            "commit",
            "-q",
            "-m",
            message,
        ],
        &wt,
    );
    run(&["push", "-q", "origin", "main"], &wt);
}

/// Waits until an event with `reason` about object `name` exists in namespace `ns`
/// (cluster-scoped objects' events go to `default`); returns `(type, reporting
/// controller, note)`.
pub async fn wait_event(
    client: &Client,
    ns: &str,
    name: &str,
    reason: &str,
) -> (String, String, String) {
    use k8s_openapi::api::events::v1::Event;
    let api: Api<Event> = Api::namespaced(client.clone(), ns);
    let deadline = tokio::time::Instant::now() + CONVERGE;
    loop {
        if let Ok(list) = api.list(&Default::default()).await
            && let Some(e) = list.items.iter().find(|e| {
                e.reason.as_deref() == Some(reason)
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
            })
        {
            return (
                e.type_.clone().unwrap_or_default(),
                e.reporting_controller.clone().unwrap_or_default(),
                e.note.clone().unwrap_or_default(),
            );
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out waiting for event {reason} about {ns}/{name}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// moto's S3 server on a free loopback port, killed on drop.
pub struct Moto {
    pub port: u16,
    child: std::process::Child,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts moto (installed by scripts/install-test-deps.sh), or prints a SKIPPED line and
/// returns `None` when it is absent.
pub async fn moto() -> Option<Moto> {
    let tools = std::env::var_os("PLINTH_TEST_TOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/test-tools"));
    let bin = tools.join("venv/bin/moto_server");
    if !bin.exists() {
        println!(
            "SKIPPED: {} not found; run scripts/install-test-deps.sh",
            bin.display()
        );
        return None;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(&bin)
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("moto_server starts");
    let m = Moto { port, child };
    wait_for("moto_server listening", || async {
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
    })
    .await;
    Some(m)
}

impl Moto {
    /// `http://127.0.0.1:<port>/<path>` with moto's unsigned access.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}/{path}", self.port)
    }

    /// Creates a bucket.
    pub async fn create_bucket(&self, bucket: &str) {
        plinth_statestore::install_tls_provider();
        let r = reqwest::Client::new()
            .put(self.url(bucket))
            .send()
            .await
            .unwrap();
        assert!(
            r.status().is_success(),
            "creating bucket {bucket}: {}",
            r.status()
        );
    }

    /// An object's body, or `None` when it does not exist, read with S3 credentials
    /// through the bucket reader (moto refuses anonymous object reads).
    pub async fn get(&self, bucket: &str, key: &str) -> Option<String> {
        use plinth_statestore::{BucketAuth, BucketConfig, StateStore, StoreConfig};
        let mut cfg = BucketConfig::s3(
            format!("127.0.0.1:{}", self.port),
            bucket,
            BucketAuth::AccessKey {
                id: "minioadmin".into(),
                secret: "minioadmin".into(),
            },
        );
        cfg.insecure = true;
        let store = StateStore::open(StoreConfig::Bucket(cfg))
            .await
            .expect("bucket opens");
        store
            .read(key)
            .await
            .expect("bucket read")
            .map(|b| String::from_utf8(b).unwrap())
    }
}

/// `(status, reason, message)` of condition `type_`.
pub fn cond(
    conds: &Option<Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>>,
    type_: &str,
) -> Option<(String, String, String)> {
    conds
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// Runs `git --git-dir <repo> <args>` and returns stdout.
pub fn git(repo: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("--git-dir")
        .arg(repo)
        .args(args)
        .output()
        .expect("git CLI runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Labels from pairs.
pub fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A corpus file's text.
pub fn corpus(rel: &str) -> String {
    let p = Path::new(env!("PLINTH_CORPUS_DIR")).join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display()))
}

/// The Work's name as a `ResourceExt` helper would print it.
pub fn name_of<K: ResourceExt>(k: &K) -> String {
    k.name_any()
}
