//! `plinth agent` on real processes: `plinth up` as the target API, a bare Git repository
//! (file://) as the state store, the `git` CLI making commits, and kubectl checking.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use support::{Plinth, wait_until};

/// A bare repository plus a work tree that commits and pushes with the git CLI.
struct Store {
    bare: PathBuf,
    work: PathBuf,
}

fn run_git(dir: &Path, args: &[&str]) {
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

impl Store {
    fn new(root: &Path) -> Store {
        let bare = root.join("state.git");
        let work = root.join("work");
        std::fs::create_dir_all(&work).unwrap();
        run_git(
            root,
            &["init", "-q", "--bare", "-b", "main", bare.to_str().unwrap()],
        );
        run_git(&work, &["init", "-q", "-b", "main"]);
        run_git(&work, &["remote", "add", "origin", bare.to_str().unwrap()]);
        Store { bare, work }
    }

    fn url(&self) -> String {
        format!("file://{}", self.bare.display())
    }

    fn put(&self, rel: &str, content: &str) {
        let p = self.work.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }

    fn rm(&self, rel: &str) {
        std::fs::remove_file(self.work.join(rel)).unwrap();
    }

    fn commit(&self, msg: &str) {
        run_git(&self.work, &["add", "-A"]);
        run_git(&self.work, &["commit", "-q", "--allow-empty", "-m", msg]);
        run_git(&self.work, &["push", "-q", "origin", "main"]);
    }
}

fn agent_cmd(p: &Plinth, store: &Store, name: &str, extra: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_plinth"));
    c.args(["agent", "--name", name, "--kubeconfig"])
        .arg(&p.kubeconfig)
        .args(["--git-url", &store.url(), "--path", "worker-1"])
        .arg("--work-dir")
        .arg(p.dir.path().join(format!("agent-{name}")))
        .args(extra)
        .env("PLINTH_LOG", "info")
        .env("RUST_BACKTRACE", "0");
    c
}

fn once(p: &Plinth, store: &Store, extra: &[&str]) -> Output {
    let mut args = vec!["--once"];
    args.extend_from_slice(extra);
    agent_cmd(p, store, "w1", &args)
        .output()
        .expect("run plinth agent")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn get_json(p: &Plinth, args: &[&str]) -> Option<serde_json::Value> {
    let mut a = vec!["get"];
    a.extend_from_slice(args);
    a.extend_from_slice(&["-o", "json"]);
    let out = p.kubectl_raw(&a);
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).unwrap())
}

const NS: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: app\n";
const DEPLOY: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: app\nspec:\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n      - name: web\n        image: nginx:1\n";

fn cm(name: &str, value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: app\ndata:\n  k: {value}\n"
    )
}

#[tokio::test]
async fn agent_applies_updates_prunes_and_leaves_hand_made_objects_alone() {
    let p = Plinth::up(&[]).await;
    let store = Store::new(p.dir.path());
    store.put("worker-1/dependencies/ns.yaml", NS);
    store.put("worker-1/resources/app/cm.yaml", &cm("a", "one"));
    store.put("worker-1/resources/app/deploy.yaml", DEPLOY);
    store.put("worker-1/.kratix/index.yaml", &cm("index", "no"));
    store.put("other-destination/resources/x.yaml", &cm("elsewhere", "no"));
    store.commit("first");

    let out = once(&p, &store, &[]);
    assert!(out.status.success(), "{}", text(&out));
    let a = get_json(&p, &["cm", "a", "-n", "app"]).expect("cm a applied");
    assert_eq!(a["data"]["k"], "one");
    assert!(get_json(&p, &["deploy", "web", "-n", "app"]).is_some());
    assert!(
        get_json(&p, &["cm", "index", "-n", "app"]).is_none(),
        ".kratix/ is not applied"
    );
    assert!(get_json(&p, &["cm", "elsewhere", "-n", "app"]).is_none());
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        stdout.contains("Unknown") && stdout.contains("no controller in embedded mode"),
        "{stdout}"
    );
    p.kubectl(&[
        "create",
        "configmap",
        "hand",
        "-n",
        "app",
        "--from-literal=k=mine",
    ]);

    // A full re-apply with nothing changed writes nothing.
    let rv_before = a["metadata"]["resourceVersion"].clone();
    let out = once(&p, &store, &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("api_writes=0"), "{}", text(&out));
    let a = get_json(&p, &["cm", "a", "-n", "app"]).unwrap();
    assert_eq!(a["metadata"]["resourceVersion"], rv_before);

    // Update one file, delete another: updated and pruned; the hand-made object survives.
    store.put("worker-1/resources/app/cm.yaml", &cm("a", "two"));
    store.rm("worker-1/resources/app/deploy.yaml");
    store.commit("second");
    let out = once(&p, &store, &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        get_json(&p, &["cm", "a", "-n", "app"]).unwrap()["data"]["k"],
        "two"
    );
    assert!(
        get_json(&p, &["deploy", "web", "-n", "app"]).is_none(),
        "pruned"
    );
    assert_eq!(
        get_json(&p, &["cm", "hand", "-n", "app"]).unwrap()["data"]["k"],
        "mine"
    );

    // --prune=false keeps what left the store.
    store.rm("worker-1/resources/app/cm.yaml");
    store.commit("third");
    let out = once(&p, &store, &["--prune=false"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(get_json(&p, &["cm", "a", "-n", "app"]).is_some());
    let out = once(&p, &store, &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(get_json(&p, &["cm", "a", "-n", "app"]).is_none());
    assert!(
        get_json(&p, &["ns", "app"]).is_some(),
        "namespaces are never pruned"
    );
}

#[tokio::test]
async fn agent_reports_bad_input_and_applies_the_rest() {
    let p = Plinth::up(&[]).await;
    let store = Store::new(p.dir.path());
    store.put("worker-1/dependencies/ns.yaml", NS);
    store.put(
        "worker-1/resources/broken.yaml",
        &format!(
            "{}---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: [oops\n",
            cm("good1", "x")
        ),
    );
    store.put(
        "worker-1/resources/nokind.yaml",
        "apiVersion: v1\nmetadata:\n  name: nokind\n",
    );
    store.put(
        "worker-1/resources/nons.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: nons\ndata: {k: v}\n",
    );
    store.put(
        "worker-1/resources/unknown.yaml",
        "apiVersion: example.com/v1\nkind: Gadget\nmetadata:\n  name: g\n  namespace: app\n",
    );
    store.put("worker-1/resources/hand.yaml", &cm("hand", "store"));
    store.commit("bad input");
    p.kubectl(&["create", "namespace", "app"]);
    p.kubectl(&[
        "create",
        "configmap",
        "hand",
        "-n",
        "app",
        "--from-literal=k=mine",
    ]);

    let out = once(&p, &store, &[]);
    let all = text(&out);
    assert!(!out.status.success(), "errors make --once fail: {all}");
    assert!(
        all.contains("resources/broken.yaml line 11: malformed YAML")
            || all.contains("resources/broken.yaml line 12: malformed YAML"),
        "{all}"
    );
    assert!(
        all.contains("resources/nokind.yaml line 1 (document 1): missing kind"),
        "{all}"
    );
    assert!(
        all.contains(
            "ConfigMap nons has no metadata.namespace; applied into \"default\" as kubectl would"
        ),
        "{all}"
    );
    assert!(
        all.contains("kind Gadget (example.com/v1) is not served by the target API; retrying"),
        "{all}"
    );
    assert!(all.contains("conflict with \"kubectl-create\""), "{all}");
    assert!(all.contains("--force-conflicts"), "{all}");
    assert!(
        get_json(&p, &["cm", "good1", "-n", "app"]).is_some(),
        "the file's good document applies"
    );
    assert!(get_json(&p, &["cm", "nons", "-n", "default"]).is_some());
    assert_eq!(
        get_json(&p, &["cm", "hand", "-n", "app"]).unwrap()["data"]["k"],
        "mine"
    );

    // The same errors are in the status the agent stored.
    let st = Command::new(env!("CARGO_BIN_EXE_plinth"))
        .args(["agent", "status", "--name", "w1", "--kubeconfig"])
        .arg(&p.kubeconfig)
        .output()
        .unwrap();
    let st = text(&st);
    assert!(
        st.contains("malformed YAML") && st.contains("Gadget"),
        "{st}"
    );

    // The Gadget kind appears: the retried document lands, never dropped.
    let crd = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: gadgets.example.com\nspec:\n  group: example.com\n  scope: Namespaced\n  names: {plural: gadgets, singular: gadget, kind: Gadget, listKind: GadgetList}\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}\n";
    store.put("worker-1/dependencies/crd.yaml", crd);
    store.commit("crd");
    let out = once(&p, &store, &["--force-conflicts"]);
    let all = text(&out);
    assert!(
        !all.contains("Gadget (example.com/v1) is not served"),
        "{all}"
    );
    assert!(
        get_json(&p, &["gadgets.example.com", "g", "-n", "app"]).is_some(),
        "{all}"
    );
    assert_eq!(
        get_json(&p, &["cm", "hand", "-n", "app"]).unwrap()["data"]["k"],
        "store",
        "forced"
    );
}

#[tokio::test]
async fn agent_loop_follows_commits_and_survives_an_unreachable_store() {
    let p = Plinth::up(&[]).await;
    let store = Store::new(p.dir.path());
    store.put("worker-1/dependencies/ns.yaml", NS);
    store.put("worker-1/resources/cm.yaml", &cm("a", "one"));
    store.commit("first");
    let log = std::fs::File::create(p.dir.path().join("agent.log")).unwrap();
    let mut child: Child = agent_cmd(&p, &store, "w1", &["--interval", "300ms"])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    wait_until(30, "cm a", || async {
        get_json(&p, &["cm", "a", "-n", "app"]).is_some()
    })
    .await;
    store.put("worker-1/resources/cm.yaml", &cm("a", "two"));
    store.commit("second");
    wait_until(30, "cm a updated", || async {
        get_json(&p, &["cm", "a", "-n", "app"]).is_some_and(|c| c["data"]["k"] == "two")
    })
    .await;
    // The store disappears: the agent backs off and keeps what is applied.
    let moved = p.dir.path().join("moved.git");
    std::fs::rename(&store.bare, &moved).unwrap();
    let agent_log = p.dir.path().join("agent.log");
    wait_until(30, "the store error in the log", || async {
        std::fs::read_to_string(&agent_log)
            .unwrap_or_default()
            .contains("state store unreadable; keeping what is applied")
    })
    .await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(
        get_json(&p, &["cm", "a", "-n", "app"]).unwrap()["data"]["k"],
        "two"
    );
    let _ = child.kill();
    let _ = child.wait();
}
