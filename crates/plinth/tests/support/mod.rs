//! Shared harness of the binary's end-to-end tests: a real `plinth up` (or `operator`)
//! process on a temporary data dir, a kube client and kubectl pointed at it, and helpers
//! to read the Git state store with the `git` CLI.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::Value;

/// The shared corpus of real Kratix YAML (next to the repository).
pub fn corpus(rel: &str) -> PathBuf {
    Path::new(env!("PLINTH_CORPUS_DIR")).join(rel)
}

/// Every YAML document of a corpus file.
pub fn corpus_docs(rel: &str) -> Vec<Value> {
    let text =
        std::fs::read_to_string(corpus(rel)).unwrap_or_else(|e| panic!("reading {rel}: {e}"));
    serde_saphyr::from_multiple::<Value>(&text)
        .unwrap_or_else(|e| panic!("parsing {rel}: {e}"))
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

/// A running Plinth process, killed on drop.
pub struct Plinth {
    child: Child,
    pub dir: tempfile::TempDir,
    pub data: PathBuf,
    pub kubeconfig: PathBuf,
}

impl Drop for Plinth {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Plinth {
    /// Starts `plinth up --listen 127.0.0.1:0 --data-dir <tmp>/data <extra>` and waits
    /// until the API answers.
    pub async fn up(extra: &[&str]) -> Plinth {
        let dir = tempfile::tempdir().expect("temp dir");
        let data = dir.path().join("data");
        Self::spawn(dir, data, &["up", "--listen", "127.0.0.1:0"], extra).await
    }

    /// Starts `plinth up` on an existing data dir (e.g. after a kill).
    pub async fn up_in(dir: tempfile::TempDir, extra: &[&str]) -> Plinth {
        let data = dir.path().join("data");
        Self::spawn(dir, data, &["up", "--listen", "127.0.0.1:0"], extra).await
    }

    async fn spawn(dir: tempfile::TempDir, data: PathBuf, args: &[&str], extra: &[&str]) -> Plinth {
        // Two rustls providers are linked (ring via kube, aws-lc via object_store): pick one.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.path().join("plinth.log"))
            .expect("log file");
        let kubeconfig = data.join("kubeconfig");
        let _ = std::fs::remove_file(&kubeconfig);
        let stdout_path = dir.path().join("plinth.out");
        let stdout = std::fs::File::create(&stdout_path).expect("stdout file");
        let child = Command::new(env!("CARGO_BIN_EXE_plinth"))
            .args(args)
            .arg("--data-dir")
            .arg(&data)
            .args(extra)
            .env("RUST_BACKTRACE", "0")
            .stdout(stdout)
            .stderr(log)
            .spawn()
            .expect("start plinth");
        let mut p = Plinth {
            child,
            dir,
            data,
            kubeconfig,
        };
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            if let Ok(Some(status)) = p.child.try_wait() {
                panic!("plinth exited with {status}: {}", p.log());
            }
            // `plinth up` prints this once the bootstrap objects exist.
            let started = std::fs::read_to_string(&stdout_path)
                .unwrap_or_default()
                .contains("Press Ctrl-C to stop.");
            if started && p.kubeconfig.exists() {
                if let Ok(c) = p.try_client().await {
                    if c.apiserver_version().await.is_ok() {
                        return p;
                    }
                }
            }
            assert!(
                Instant::now() < deadline,
                "plinth not ready after 90s: {}",
                p.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Starts `plinth operator --kubeconfig <this platform's kubeconfig>` as a second
    /// process, without its admission webhooks (several replicas share this machine's
    /// ports; [`Plinth::operator_with`] passes other flags).
    pub fn operator(&self, identity: &str, lease_duration: u64) -> Child {
        self.operator_with(identity, lease_duration, &["--webhook-addr", "off"])
    }

    /// Like [`Plinth::operator`], with `extra` flags instead of `--webhook-addr off`.
    pub fn operator_with(&self, identity: &str, lease_duration: u64, extra: &[&str]) -> Child {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join(format!("operator-{identity}.log")))
            .unwrap();
        Command::new(env!("CARGO_BIN_EXE_plinth"))
            .args([
                "operator",
                "--identity",
                identity,
                "--lease-duration",
                &lease_duration.to_string(),
                "--kubeconfig",
            ])
            .arg(&self.kubeconfig)
            .arg("--data-dir")
            .arg(self.dir.path().join(format!("operator-{identity}")))
            .args(extra)
            .env("RUST_BACKTRACE", "0")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start plinth operator")
    }

    /// Kills the process with SIGKILL and returns its temp dir for a restart.
    pub fn kill(mut self) -> tempfile::TempDir {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let dir = tempfile::tempdir().unwrap();
        std::mem::replace(&mut self.dir, dir)
    }

    pub fn log(&self) -> String {
        let mut s = std::fs::read_to_string(self.dir.path().join("plinth.log")).unwrap_or_default();
        if s.len() > 6000 {
            s = s[s.len() - 6000..].to_string();
        }
        s
    }

    async fn try_client(&self) -> Result<kube::Client, String> {
        let kc = Kubeconfig::read_from(&self.kubeconfig).map_err(|e| e.to_string())?;
        let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .map_err(|e| e.to_string())?;
        kube::Client::try_from(cfg).map_err(|e| e.to_string())
    }

    /// A kube client authenticated with the admin token of the kubeconfig.
    pub async fn client(&self) -> kube::Client {
        self.try_client().await.expect("client from the kubeconfig")
    }

    /// Runs kubectl against this platform.
    pub fn kubectl_raw(&self, args: &[&str]) -> Output {
        Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.dir.path().join("kube-cache"))
            .args(args)
            .output()
            .expect("run kubectl")
    }

    /// Runs kubectl and requires success; returns stdout.
    pub fn kubectl(&self, args: &[&str]) -> String {
        let out = self.kubectl_raw(args);
        assert!(
            out.status.success(),
            "kubectl {} failed:\n{}{}\nplinth log tail:\n{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Writes `yaml` to `file` in the test's directory and `kubectl apply`s it.
    pub fn apply_yaml(&self, file: &str, yaml: &str) {
        let path = self.dir.path().join(file);
        std::fs::write(&path, yaml).unwrap();
        self.kubectl(&["apply", "-f", path.to_str().unwrap()]);
    }

    /// `kubectl get <args> -o json`; `None` when kubectl fails (e.g. not found).
    pub fn get(&self, args: &[&str]) -> Option<Value> {
        get_json(args, |a| self.kubectl_raw(a))
    }

    /// The bootstrapped bare repository.
    pub fn repo(&self) -> PathBuf {
        self.data.join("state-store.git")
    }
}

/// `kubectl get <args> -o json` through `kubectl`; `None` when it fails.
fn get_json(args: &[&str], kubectl: impl Fn(&[&str]) -> Output) -> Option<Value> {
    let mut a = vec!["get"];
    a.extend_from_slice(args);
    a.extend_from_slice(&["-o", "json"]);
    let out = kubectl(&a);
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).unwrap())
}

/// Waits until `f` returns true, failing with `what` after `secs` seconds.
pub async fn wait_until<F, Fut>(secs: u64, what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !f().await {
        assert!(
            Instant::now() < deadline,
            "timed out after {secs}s waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
}

/// Runs `git` with `args` and returns stdout ("" on failure).
pub fn git(args: &[&str]) -> String {
    let out = Command::new("git").args(args).output().expect("run git");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every file on `branch` of the bare repository.
pub fn repo_files(repo: &Path, branch: &str) -> Vec<String> {
    let r = repo.to_string_lossy();
    git(&["--git-dir", &r, "ls-tree", "-r", "--name-only", branch])
        .lines()
        .map(str::to_string)
        .collect()
}

/// A file's content on `branch` (None when absent).
pub fn repo_file(repo: &Path, branch: &str, path: &str) -> Option<String> {
    let r = repo.to_string_lossy();
    let out = Command::new("git")
        .args(["--git-dir", &r, "show", &format!("{branch}:{path}")])
        .output()
        .expect("run git");
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Number of commits on `branch`.
pub fn commit_count(repo: &Path, branch: &str) -> usize {
    let r = repo.to_string_lossy();
    git(&["--git-dir", &r, "rev-list", "--count", branch])
        .trim()
        .parse()
        .unwrap_or(0)
}

/// A dynamic API for `group/version kind` (plural given).
pub fn dynamic(
    client: &kube::Client,
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
    ns: Option<&str>,
) -> Api<DynamicObject> {
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural);
    match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    }
}

/// Creates an object given as JSON.
pub async fn create(api: &Api<DynamicObject>, v: &Value) -> DynamicObject {
    api.create(
        &PostParams::default(),
        &serde_json::from_value(v.clone()).unwrap(),
    )
    .await
    .unwrap_or_else(|e| panic!("creating {}: {e}", v["metadata"]["name"]))
}

/// The cluster-scoped Promise API (`platform.kratix.io/v1alpha1`).
pub fn promise_api(client: &kube::Client) -> Api<DynamicObject> {
    dynamic(
        client,
        "platform.kratix.io",
        "v1alpha1",
        "Promise",
        "promises",
        None,
    )
}

/// `examples/webapp/<file>` (the quickstart's Promise and request) as a document.
pub fn webapp_sample(file: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/webapp")
        .join(file);
    serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Creates the Promise `doc` and waits up to `secs` seconds for `name` to report
/// `status.status: Available`; panics naming the Promise when it does not.
pub async fn create_available(api: &Api<DynamicObject>, doc: &Value, name: &str, secs: u64) {
    create(api, doc).await;
    wait_until(secs, &format!("Promise {name} Available"), || async {
        api.get(name)
            .await
            .is_ok_and(|o| o.data["status"]["status"] == "Available")
    })
    .await;
}

/// The `type` condition of an object's status as (status, reason, message).
pub fn condition(obj: &DynamicObject, type_: &str) -> Option<(String, String, String)> {
    obj.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .map(|c| {
            (
                c["status"].as_str().unwrap_or("").into(),
                c["reason"].as_str().unwrap_or("").into(),
                c["message"].as_str().unwrap_or("").into(),
            )
        })
}

/// The "settled means silent" window of the scenario tests.
pub const SILENCE: Duration = Duration::from_secs(10);

/// How long the store's latest revision must stand still before the platform counts as
/// settled: longer than the Git writer's worst-case batch latency (20 batch windows, 10 s
/// at `plinth up`'s 500 ms), so a WorkPlacement waiting in an adaptive batch is not taken
/// for a write after settling.
const SETTLE_QUIET: Duration = Duration::from_secs(11);

/// The "settled means silent" check against a running platform. Waits until the global
/// resourceVersion (a list's `metadata.resourceVersion` is the store's latest revision)
/// has not moved for [`SETTLE_QUIET`] (at most 90 s), then watches it for `window` (10 s in the
/// scenario tests) and panics if anything was written, naming every object whose
/// resourceVersion moved. Every kind counts, Events included (a settled platform has
/// nothing to report); Leases are the one exception (a leader renews its Lease on a
/// timer by design).
pub async fn assert_settled_silent(client: &kube::Client, window: Duration) {
    let head = || async {
        let ns: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
        let list = ns
            .list_metadata(&kube::api::ListParams::default().limit(1))
            .await
            .expect("list namespaces");
        list.metadata
            .resource_version
            .and_then(|v| v.parse::<u64>().ok())
            .expect("numeric resourceVersion")
    };
    let started = Instant::now();
    let mut last = head().await;
    let mut quiet = Instant::now();
    while quiet.elapsed() < SETTLE_QUIET {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = head().await;
        if now != last {
            if started.elapsed() > Duration::from_secs(90) {
                panic!(
                    "the platform never settled: {}",
                    changed_since(client, last - 1).await
                );
            }
            last = now;
            quiet = Instant::now();
        }
    }
    tokio::time::sleep(window).await;
    let writes = changed_since(client, last).await;
    assert!(
        writes.is_empty(),
        "a settled platform wrote within {window:?}: {writes}"
    );
}

/// Objects of every listable kind (Leases excepted) whose resourceVersion is above
/// `after`, as `Kind ns/name@rv`; a write whose object is gone again is reported as an
/// unattributed move of the global resourceVersion.
pub async fn changed_since(client: &kube::Client, after: u64) -> String {
    use kube::discovery::{Discovery, verbs};
    let discovery = Discovery::new(client.clone())
        .run()
        .await
        .expect("discovery");
    let mut out = Vec::new();
    let mut lease_moved = false;
    for group in discovery.groups() {
        let leases = group.name() == "coordination.k8s.io";
        for (ar, caps) in group.recommended_resources() {
            if !caps.supports_operation(verbs::LIST) || ar.plural.contains('/') {
                continue;
            }
            let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
            let Ok(list) = api.list_metadata(&Default::default()).await else {
                continue;
            };
            for o in list.items {
                let rv = o
                    .metadata
                    .resource_version
                    .as_deref()
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0);
                if rv > after && leases {
                    lease_moved = true;
                } else if rv > after {
                    out.push(format!(
                        "{} {}/{}@{rv}",
                        ar.kind,
                        o.metadata.namespace.unwrap_or_default(),
                        o.metadata.name.unwrap_or_default()
                    ));
                }
            }
        }
    }
    let ns: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let head = ns
        .list_metadata(&kube::api::ListParams::default().limit(1))
        .await
        .ok()
        .and_then(|l| l.metadata.resource_version)
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(after);
    if out.is_empty() && head > after && !lease_moved {
        out.push(format!(
            "resourceVersion moved from {after} to {head} (objects since deleted)"
        ));
    }
    out.join("; ")
}

/// A Promise with only an API: `Gadget` (`gadgets.example.test/v1`, namespaced, `spec.size`).
pub const GADGET_PROMISE: &str = r#"
apiVersion: platform.kratix.io/v1alpha1
kind: Promise
metadata:
  name: gadget
spec:
  api:
    apiVersion: apiextensions.k8s.io/v1
    kind: CustomResourceDefinition
    metadata:
      name: gadgets.example.test
    spec:
      group: example.test
      names: {kind: Gadget, plural: gadgets, singular: gadget}
      scope: Namespaced
      versions:
      - name: v1
        served: true
        storage: true
        schema:
          openAPIV3Schema:
            type: object
            properties:
              spec:
                type: object
                properties:
                  size: {type: string}
"#;

/// One Event as `kubectl get events -o json` shows it.
#[derive(Debug, Clone)]
pub struct SeenEvent {
    pub component: String,
    pub reason: String,
    pub type_: String,
    pub kind: String,
    pub name: String,
    pub uid: String,
    pub message: String,
    pub count: i64,
}

/// Every Event in the platform, read with `kubectl get events -A -o json`.
pub fn kubectl_events(p: &Plinth) -> Vec<SeenEvent> {
    let out = p.kubectl(&["get", "events", "-A", "-o", "json"]);
    let list: Value = serde_json::from_str(&out).expect("events JSON");
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    list["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|e| SeenEvent {
            component: s(&e["source"]["component"]),
            reason: s(&e["reason"]),
            type_: s(&e["type"]),
            kind: s(&e["involvedObject"]["kind"]),
            name: s(&e["involvedObject"]["name"]),
            uid: s(&e["involvedObject"]["uid"]),
            message: s(&e["message"]),
            count: e["count"].as_i64().unwrap_or(0),
        })
        .collect()
}

/// Waits until every `(component, reason, object kind, object name)` has an Event, each
/// of the type Kratix gives that reason; then checks that no Event is a duplicate of
/// another (same object, component, reason and message: repeats are counted instead).
pub async fn assert_kratix_events(p: &Plinth, expected: &[(&str, &str, &str, &str)]) {
    use plinth_api::constants::events::KRATIX;
    let deadline = Instant::now() + Duration::from_secs(60);
    let events = loop {
        let events = kubectl_events(p);
        let missing: Vec<_> = expected
            .iter()
            .filter(|(c, r, k, n)| {
                !events
                    .iter()
                    .any(|e| e.component == *c && e.reason == *r && e.kind == *k && e.name == *n)
            })
            .collect();
        if missing.is_empty() {
            break events;
        }
        assert!(
            Instant::now() < deadline,
            "no Event {missing:?}; events:\n{}",
            p.kubectl(&["get", "events", "-A"])
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    for (c, r, _, _) in expected {
        let (_, _, warning) = KRATIX
            .iter()
            .find(|(kc, kr, _)| kc == c && kr == r)
            .unwrap_or_else(|| panic!("{c} {r} is not a reason Kratix emits"));
        let want = if *warning { "Warning" } else { "Normal" };
        for e in events
            .iter()
            .filter(|e| e.component == *c && e.reason == *r)
        {
            assert_eq!(e.type_, want, "{e:?}");
            assert!(e.count >= 1, "{e:?}");
        }
    }
    let mut seen = std::collections::HashSet::new();
    for e in &events {
        let key = (
            &e.uid,
            &e.kind,
            &e.name,
            &e.component,
            &e.reason,
            &e.message,
        );
        assert!(seen.insert(key), "duplicate Event (not aggregated): {e:?}");
    }
}

/// A `plinth worker NAME --platform <p> --data-dir <tmp>/worker-NAME <extra>` process,
/// killed on drop; started once it printed its kubeconfig.
pub struct Worker {
    child: Child,
    pub kubeconfig: PathBuf,
    cache: PathBuf,
    log: PathBuf,
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Worker {
    pub fn start(p: &Plinth, name: &str, extra: &[&str]) -> Worker {
        let dir = p.dir.path().join(format!("worker-{name}"));
        let out = p.dir.path().join(format!("worker-{name}.out"));
        let log = p.dir.path().join(format!("worker-{name}.log"));
        let child = Command::new(env!("CARGO_BIN_EXE_plinth"))
            .args(["worker", name, "--platform"])
            .arg(&p.kubeconfig)
            .arg("--data-dir")
            .arg(&dir)
            .args(extra)
            .env("RUST_BACKTRACE", "0")
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .expect("start plinth worker");
        let mut w = Worker {
            child,
            kubeconfig: dir.join("kubeconfig"),
            cache: p.dir.path().join(format!("kube-cache-{name}")),
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(Some(status)) = w.child.try_wait() {
                panic!("plinth worker exited with {status}: {}", w.log());
            }
            let stdout = std::fs::read_to_string(&out).unwrap_or_default();
            if stdout.contains("Press Ctrl-C") {
                assert!(
                    stdout.contains(&format!("worker kubeconfig: {}", w.kubeconfig.display())),
                    "{stdout}"
                );
                return w;
            }
            assert!(Instant::now() < deadline, "worker not ready: {}", w.log());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn kubectl_raw(&self, args: &[&str]) -> Output {
        Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(&self.cache)
            .args(args)
            .output()
            .expect("run kubectl")
    }

    pub fn get(&self, args: &[&str]) -> Option<Value> {
        get_json(args, |a| self.kubectl_raw(a))
    }
}

/// Test tools installed by `scripts/install-test-deps.sh` (`PLINTH_TEST_TOOLS`).
pub fn test_tools() -> PathBuf {
    std::env::var_os("PLINTH_TEST_TOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/test-tools"))
}

/// A moto S3 server on a free loopback port (any access key is accepted), killed on drop.
pub struct Moto {
    pub port: u16,
    child: Child,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts moto with `buckets` created; `None` (the caller skips) when moto is not installed.
pub async fn moto(buckets: &[&str]) -> Option<Moto> {
    let venv = test_tools().join("venv/bin");
    if !venv.join("moto_server").exists() {
        println!("SKIPPED: moto not installed; run scripts/install-test-deps.sh");
        return None;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(venv.join("moto_server"))
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("moto_server starts");
    let m = Moto { port, child };
    wait_until(30, "moto listening", || async {
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
    })
    .await;
    let script = "import boto3, sys\ns3 = boto3.client('s3', endpoint_url=sys.argv[1], region_name='us-east-1', aws_access_key_id='test', aws_secret_access_key='test')\nfor b in sys.argv[2:]:\n    s3.create_bucket(Bucket=b)\n";
    let out = Command::new(venv.join("python"))
        .args(["-c", script, &format!("http://127.0.0.1:{port}")])
        .args(buckets)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(m)
}

impl Moto {
    /// The keys (relative to the bucket) of every object in `bucket`.
    pub fn keys(&self, bucket: &str) -> Vec<String> {
        let script = "import boto3, sys\ns3 = boto3.client('s3', endpoint_url=sys.argv[1], region_name='us-east-1', aws_access_key_id='test', aws_secret_access_key='test')\nfor o in s3.list_objects_v2(Bucket=sys.argv[2]).get('Contents', []):\n    print(o['Key'])\n";
        let out = Command::new(test_tools().join("venv/bin/python"))
            .args([
                "-c",
                script,
                &format!("http://127.0.0.1:{}", self.port),
                bucket,
            ])
            .output()
            .expect("python runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect()
    }
}

/// A port free on loopback now (bound, read and released).
pub fn free_port() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().unwrap().port().to_string()
}

/// `plinth operator`'s flags serving its webhooks on loopback `port` and registering
/// them by that URL (its certificate names 127.0.0.1).
pub fn webhook_flags(port: &str) -> Vec<String> {
    vec![
        "--webhook-addr".into(),
        format!("127.0.0.1:{port}"),
        "--webhook-url".into(),
        format!("https://127.0.0.1:{port}"),
        "--webhook-host".into(),
        "127.0.0.1".into(),
    ]
}

/// `GET /metrics` over plain HTTP/1.0; returns the body.
pub fn scrape(addr: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect to the metrics listener");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read /metrics");
    let (head, body) = out.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(
        head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
        "{head}"
    );
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "{head}"
    );
    body.to_string()
}

/// The value of the sample `name{labels}` (labels in the order the metric declares them).
pub fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}
