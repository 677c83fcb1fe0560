//! Shared set-up for the health tests: an embedded API server with the Kratix CRDs, the
//! corpus `healthchecktest` Promise and its request CRD (no Promise controller: the health
//! controllers find the request API from the Promise's `spec.api`), and the health
//! controllers on a manual clock.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Event, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use kube::{Client, ResourceExt};
use plinth_api::constants::health as names;
use plinth_api::{HealthRecord, HealthSource};
use plinth_apiserver::testing::TestServer;
use plinth_controllers::health::ManualClock;
use plinth_controllers::{Context, ControllerConfig};
use serde_json::{Value, json};

pub const PROMISE: &str = "healthchecktest";
pub const CONVERGE: Duration = Duration::from_secs(60);

pub struct Env {
    pub server: TestServer,
    pub client: Client,
    pub ctx: Arc<Context>,
    pub clock: Arc<ManualClock>,
    pub dir: tempfile::TempDir,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Env {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

pub fn corpus(rel: &str) -> Value {
    let path = Path::new(env!("PLINTH_CORPUS_DIR")).join(rel);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("corpus file {}: {e}", path.display()));
    serde_saphyr::from_str(&text).expect("corpus YAML")
}

pub fn request_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("test.kratix.io", "v1alpha1", "Healthchecktest"),
        "healthchecktest",
    )
}

/// Starts the server, installs the Promise (and a second one, `other`, with the same
/// request names) and starts the health controllers on a manual clock.
pub async fn start() -> Env {
    let server = TestServer::start().await.expect("API server starts");
    let client = server.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let promise = corpus("kratix-system-tests/healthchecks/promise.yaml");
    let mut other = promise.clone();
    other["metadata"]["name"] = json!("other");
    other["spec"]["api"]["metadata"]["name"] = json!("others.test.kratix.io");
    other["spec"]["api"]["spec"]["names"] =
        json!({"kind": "Other", "plural": "others", "singular": "other"});
    let mut all: Vec<Value> = plinth_api::crds::all_crds()
        .into_iter()
        .map(|c| serde_json::to_value(c).unwrap())
        .collect();
    for p in [&promise, &other] {
        all.push(
            plinth_api::request_crd::build_request_crd(
                p["metadata"]["name"].as_str().unwrap(),
                &p["spec"]["api"],
            )
            .unwrap(),
        );
    }
    for crd in all {
        crds.create(
            &PostParams::default(),
            &serde_json::from_value(crd).unwrap(),
        )
        .await
        .expect("CRD registers");
    }
    let requests: Api<DynamicObject> = Api::all_with(client.clone(), &request_resource());
    wait_for("kinds served", || async {
        requests.list(&Default::default()).await.is_ok()
            && Api::<HealthSource>::all(client.clone())
                .list(&Default::default())
                .await
                .is_ok()
            && Api::<HealthRecord>::all(client.clone())
                .list(&Default::default())
                .await
                .is_ok()
    })
    .await;
    let ns: Api<Namespace> = Api::all(client.clone());
    for n in ["default", "team-a"] {
        let _ = ns
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": n}})).unwrap(),
            )
            .await;
    }
    let promises: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &plinth_controllers::support::resources::promise_resource(),
    );
    for p in [promise, other] {
        promises
            .create(&PostParams::default(), &serde_json::from_value(p).unwrap())
            .await
            .expect("Promise created");
    }
    let dir = tempfile::tempdir().unwrap();
    let config = ControllerConfig {
        requeue_short: Duration::from_millis(200),
        requeue_default: Duration::from_millis(500),
        // The manual clock does not wake timers: freshness is judged again this often.
        health_recheck_max: Duration::from_millis(300),
        data_dir: dir.path().join("data"),
        ..ControllerConfig::default()
    };
    let ctx = Context::new(client.clone(), config);
    let clock = Arc::new(ManualClock::new("2026-01-01T00:00:00Z".parse().unwrap()));
    let tasks = vec![tokio::spawn(plinth_controllers::health::run(
        ctx.clone(),
        clock.clone(),
    ))];
    Env {
        server,
        client,
        ctx,
        clock,
        dir,
        tasks,
    }
}

impl Env {
    pub fn requests(&self, ns: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), ns, &request_resource())
    }

    pub async fn create_request(&self, ns: &str, name: &str) -> DynamicObject {
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "test.kratix.io/v1alpha1",
            "kind": "Healthchecktest",
            "metadata": {"name": name, "namespace": ns},
            "spec": {},
        }))
        .unwrap();
        self.requests(ns)
            .create(&PostParams::default(), &obj)
            .await
            .expect("request created")
    }

    pub async fn status(&self, ns: &str, name: &str) -> Value {
        self.requests(ns)
            .get(name)
            .await
            .unwrap()
            .data
            .get("status")
            .cloned()
            .unwrap_or(Value::Null)
    }

    /// Waits until the request's overall health state is `state`.
    pub async fn wait_state(&self, ns: &str, name: &str, state: &str) -> Value {
        let mut last = Value::Null;
        let deadline = std::time::Instant::now() + CONVERGE;
        while std::time::Instant::now() < deadline {
            last = self.status(ns, name).await;
            if last.pointer("/healthStatus/state") == Some(&json!(state)) {
                return last;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{ns}/{name} never reached health {state}; status {last:#}");
    }

    pub fn records(&self, ns: &str) -> Api<HealthRecord> {
        Api::namespaced(self.client.clone(), ns)
    }

    pub async fn apply_record(&self, doc: Value) -> HealthRecord {
        let rec: HealthRecord = serde_json::from_value(doc).unwrap();
        let api = self.records(&rec.namespace().unwrap());
        match api.get_opt(&rec.name_any()).await.unwrap() {
            None => api.create(&PostParams::default(), &rec).await.unwrap(),
            Some(cur) => {
                let body = json!({"data": rec.spec.data});
                let _ = cur;
                api.patch(
                    &rec.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&body),
                )
                .await
                .unwrap()
            }
        }
    }

    pub async fn delete_record(&self, ns: &str, name: &str) {
        self.records(ns)
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
    }

    /// Events about `(kind, name)` with `reason`, as `(type, note)`.
    pub async fn events(&self, kind: &str, name: &str, reason: &str) -> Vec<(String, String)> {
        let api: Api<Event> = Api::all(self.client.clone());
        api.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| {
                e.involved_object.kind.as_deref() == Some(kind)
                    && e.involved_object.name.as_deref() == Some(name)
                    && e.reason.as_deref() == Some(reason)
            })
            .map(|e| (e.type_.unwrap_or_default(), e.message.unwrap_or_default()))
            .collect()
    }

    pub async fn source(&self, name: &str) -> HealthSource {
        Api::<HealthSource>::all(self.client.clone())
            .get(name)
            .await
            .unwrap()
    }

    pub async fn create_source(&self, doc: Value) {
        let hs: HealthSource = serde_json::from_value(doc).unwrap();
        Api::<HealthSource>::all(self.client.clone())
            .create(&PostParams::default(), &hs)
            .await
            .expect("HealthSource accepted");
    }

    /// Sets the manual trigger to `value` and waits until the source handled it.
    pub async fn poll_now(&self, source: &str, value: &str) -> HealthSource {
        let api = Api::<HealthSource>::all(self.client.clone());
        let body = json!({"metadata": {"annotations": {
            plinth_api::constants::health::POLL_NOW_ANNOTATION: value}}});
        api.patch(source, &PatchParams::default(), &Patch::Merge(&body))
            .await
            .unwrap();
        let deadline = std::time::Instant::now() + CONVERGE;
        loop {
            let hs = api.get(source).await.unwrap();
            if hs
                .status
                .as_ref()
                .and_then(|s| s.last_handled_trigger.as_deref())
                == Some(value)
            {
                return hs;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "trigger {value} of {source} never handled: {:?}",
                hs.status
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn secret(&self, name: &str, data: Value) {
        let api: Api<k8s_openapi::api::core::v1::Secret> =
            Api::namespaced(self.client.clone(), "default");
        api.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": name}, "stringData": data}))
                .unwrap(),
        )
        .await
        .unwrap();
    }
}

/// A HealthRecord document.
pub fn record(name: &str, ns: &str, request: &str, state: &str, last_run: i64) -> Value {
    json!({
        "apiVersion": "platform.kratix.io/v1alpha1",
        "kind": "HealthRecord",
        "metadata": {"name": name, "namespace": ns},
        "data": {
            "promiseRef": {"name": PROMISE},
            "resourceRef": {"name": request, "namespace": ns},
            "state": state,
            "lastRun": last_run,
            "details": {"check": name},
        },
    })
}

pub fn yaml(v: &Value) -> Vec<u8> {
    serde_saphyr::to_string(v).unwrap().into_bytes()
}

pub async fn wait_for<F, Fut>(what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = std::time::Instant::now() + CONVERGE;
    while !f().await {
        if std::time::Instant::now() > deadline {
            panic!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub fn tools() -> PathBuf {
    std::env::var_os("PLINTH_TEST_TOOLS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/test-tools"))
}

/// moto with IAM enforcement: an `admin` key that may write and a `reader` key that may
/// only list and get. Killed on drop.
pub struct Moto {
    pub port: u16,
    pub admin: (String, String),
    pub reader: (String, String),
    child: std::process::Child,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const MOTO_IAM: &str = r#"
import boto3, json, sys
iam = boto3.client("iam", endpoint_url=sys.argv[1], region_name="us-east-1",
                   aws_access_key_id="x", aws_secret_access_key="x")
def user(name, actions):
    iam.create_user(UserName=name)
    iam.put_user_policy(UserName=name, PolicyName="p", PolicyDocument=json.dumps(
        {"Version": "2012-10-17",
         "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}]}))
    k = iam.create_access_key(UserName=name)["AccessKey"]
    return [k["AccessKeyId"], k["SecretAccessKey"]]
# moto 5.2 checks ListObjectsV2 against an action of that name; AWS (and older moto)
# against s3:ListBucket. The reader gets both, and still no write.
keys = {"admin": user("admin", ["s3:*"]),
        "reader": user("reader", ["s3:GetObject", "s3:ListBucket", "s3:ListObjectsV2"])}
s3 = boto3.client("s3", endpoint_url=sys.argv[1], region_name="us-east-1",
                  aws_access_key_id=keys["admin"][0], aws_secret_access_key=keys["admin"][1])
for b in sys.argv[2:]:
    s3.create_bucket(Bucket=b)
print(json.dumps(keys))
"#;

/// Starts moto enforcing IAM after the six set-up calls that create the two users.
pub async fn moto(buckets: &[&str]) -> Option<Moto> {
    let venv = tools().join("venv/bin");
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
        .env("INITIAL_NO_AUTH_ACTION_COUNT", "6")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("moto_server starts");
    wait_for("moto listening", || async {
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
    })
    .await;
    let out = Command::new(venv.join("python"))
        .args(["-c", MOTO_IAM, &format!("http://127.0.0.1:{port}")])
        .args(buckets)
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let keys: Value = serde_json::from_slice(&out.stdout).unwrap();
    let pair = |k: &str| {
        (
            keys[k][0].as_str().unwrap().to_string(),
            keys[k][1].as_str().unwrap().to_string(),
        )
    };
    Some(Moto {
        port,
        admin: pair("admin"),
        reader: pair("reader"),
        child,
    })
}

impl Moto {
    /// A bucket writer with the given key (creating the bucket first with the admin key).
    pub async fn store(
        &self,
        bucket: &str,
        key: &(String, String),
    ) -> Result<plinth_statestore::StateStore, plinth_statestore::StoreError> {
        use plinth_statestore::{BucketAuth, BucketConfig, StateStore, StoreConfig};
        let mut cfg = BucketConfig::s3(
            format!("127.0.0.1:{}", self.port),
            bucket,
            BucketAuth::AccessKey {
                id: key.0.clone(),
                secret: key.1.clone(),
            },
        );
        cfg.insecure = true;
        StateStore::open(StoreConfig::Bucket(cfg)).await
    }
}

/// Runs git in `dir`.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.test")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.test")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Azurite's well-known development account.
pub const AZURITE_ACCOUNT: &str = "devstoreaccount1";
/// Azurite's well-known development account key.
pub const AZURITE_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// Azurite's blob service on a free port, killed on drop.
pub struct Azurite {
    pub port: u16,
    child: std::process::Child,
    _dir: tempfile::TempDir,
}

impl Drop for Azurite {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Creates the container and prints a read+list account SAS (Python standard library:
/// the SAS is an HMAC over the documented string-to-sign).
const AZURE_SETUP: &str = r#"
import base64, hashlib, hmac, sys, urllib.request
endpoint, account, key, container = sys.argv[1:5]
def sas(perms):
    sv, se = "2019-12-12", "2035-01-01T00:00:00Z"
    to_sign = "\n".join([account, perms, "b", "sco", "", se, "", "", sv, ""])
    sig = base64.b64encode(hmac.new(base64.b64decode(key), to_sign.encode(), hashlib.sha256).digest()).decode()
    return "sv=%s&ss=b&srt=sco&sp=%s&se=%s&sig=%s" % (sv, perms, se, urllib.parse.quote(sig, safe=""))
import urllib.parse
req = urllib.request.Request("%s/%s?restype=container&%s" % (endpoint, container, sas("rwdlac")), method="PUT")
urllib.request.urlopen(req).read()
print(sas("rl"))
"#;

pub async fn azurite(container: &str) -> Option<(Azurite, String)> {
    let Ok(bin) = which("azurite-blob") else {
        println!("SKIPPED: azurite-blob not installed; run scripts/install-test-deps.sh");
        return None;
    };
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(bin)
        .args([
            "--blobHost",
            "127.0.0.1",
            "--blobPort",
            &port.to_string(),
            "--location",
            dir.path().to_str().unwrap(),
            "--silent",
            "--skipApiVersionCheck",
            "--loose",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("azurite starts");
    wait_for("azurite listening", || async {
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
    })
    .await;
    let a = Azurite {
        port,
        child,
        _dir: dir,
    };
    let out = Command::new("python3")
        .args([
            "-c",
            AZURE_SETUP,
            &a.endpoint(),
            AZURITE_ACCOUNT,
            AZURITE_KEY,
            container,
        ])
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some((a, String::from_utf8(out.stdout).unwrap().trim().to_string()))
}

fn which(name: &str) -> Result<PathBuf, ()> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(name))
        .find(|p| p.exists())
        .ok_or(())
}

impl Azurite {
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}/{AZURITE_ACCOUNT}", self.port)
    }

    /// A writer with the account key, or a reader-side store with the SAS.
    pub async fn store(
        &self,
        container: &str,
        auth: plinth_statestore::BucketAuth,
    ) -> Result<plinth_statestore::StateStore, plinth_statestore::StoreError> {
        use plinth_statestore::{BucketConfig, BucketProvider, StateStore, StoreConfig};
        let mut cfg = BucketConfig::s3(self.endpoint(), container, auth);
        cfg.provider = BucketProvider::Azure;
        cfg.insecure = true;
        StateStore::open(StoreConfig::Bucket(cfg)).await
    }
}

/// A server the stream tests need is missing: SKIPPED outside CI, a failure in CI (where
/// scripts/install-test-deps.sh installs it).
fn missing(what: &str) {
    let msg = format!("{what} not installed; run scripts/install-test-deps.sh");
    if std::env::var_os("CI").is_some() {
        panic!("{msg}");
    }
    println!("SKIPPED: {msg}");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A server process on a free port in a temporary directory, killed on drop.
pub struct Peer {
    pub port: u16,
    child: std::process::Child,
    _dir: tempfile::TempDir,
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn peer(bin: &str, args: impl Fn(u16, &Path) -> Vec<String>) -> Option<Peer> {
    let Ok(path) = which(bin).or_else(|_| {
        let sbin = Path::new("/usr/sbin").join(bin);
        sbin.exists().then_some(sbin).ok_or(())
    }) else {
        missing(bin);
        return None;
    };
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let child = Command::new(path)
        .args(args(port, dir.path()))
        .current_dir(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{bin} starts: {e}"));
    wait_for(&format!("{bin} listening"), || async {
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
    })
    .await;
    Some(Peer {
        port,
        child,
        _dir: dir,
    })
}

/// `redis-server` without persistence; `None` (SKIPPED) when it is not installed.
pub async fn redis_server() -> Option<Peer> {
    peer("redis-server", |port, dir| {
        [
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--dir",
            dir.to_str().unwrap(),
            "--save",
            "",
            "--appendonly",
            "no",
        ]
        .map(String::from)
        .to_vec()
    })
    .await
}

/// `nats-server -js` with its store in a temporary directory; `None` (SKIPPED) when it is
/// not installed.
pub async fn nats_server() -> Option<Peer> {
    let p = peer("nats-server", |port, dir| {
        [
            "-js",
            "-a",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-sd",
            dir.to_str().unwrap(),
        ]
        .map(String::from)
        .to_vec()
    })
    .await?;
    // JetStream answers a moment after the port opens.
    tokio::time::sleep(Duration::from_millis(300)).await;
    Some(p)
}

impl Peer {
    pub fn redis_url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn nats_url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }
}

impl Env {
    /// A second platform controller (HealthRecord and HealthSource controllers on their own
    /// Context) against the same API server, as a second replica would run.
    pub fn start_replica(&mut self) {
        let config = ControllerConfig {
            requeue_short: Duration::from_millis(200),
            requeue_default: Duration::from_millis(500),
            health_recheck_max: Duration::from_millis(300),
            data_dir: self.dir.path().join("data-2"),
            ..ControllerConfig::default()
        };
        let ctx = Context::new(self.client.clone(), config);
        self.tasks
            .push(tokio::spawn(plinth_controllers::health::run(
                ctx,
                self.clock.clone(),
            )));
    }
}

/// A HealthSource `stream-1` on the Redis stream `health` of `r`.
pub async fn redis_source(env: &Env, r: &Peer) {
    env.create_source(json!({
        "apiVersion": "platform.syntasso.io/v1alpha1",
        "kind": "HealthSource",
        "metadata": {"name": "stream-1"},
        "spec": {"redis": {"address": r.redis_url(), "stream": "health"}},
    }))
    .await;
}

/// A HealthSource `stream-1` on the NATS JetStream subject `health.records` (stream
/// `HEALTH`) of `n`.
pub async fn nats_source(env: &Env, n: &Peer) {
    env.create_source(json!({
        "apiVersion": "platform.syntasso.io/v1alpha1",
        "kind": "HealthSource",
        "metadata": {"name": "stream-1"},
        "spec": {"nats": {"servers": [n.nats_url()], "stream": "HEALTH",
                          "subject": "health.records"}},
    }))
    .await;
}

/// Waits until the stream source `source` reports it is consuming.
pub async fn wait_ready(env: &Env, source: &str) {
    wait_for("the source consuming", || async {
        env.source(source).await.status.is_some_and(|st| {
            st.conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "Ready" && c.status == "True" && c.reason == names::CONSUMING)
        })
    })
    .await;
}
