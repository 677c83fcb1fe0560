//! Black-box tests: the real `kubectl` against `plinth up`.
//!
//! Each test starts `plinth up` on a free loopback port with a temporary data dir, waits
//! for the kubeconfig and `/readyz`, and drives kubectl exactly as a user would — with
//! kubectl's default `--validate=strict` (server-side field validation, advertised by the
//! server's OpenAPI v3 documents).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.test.plinth.dev
spec:
  group: test.plinth.dev
  names:
    kind: Widget
    listKind: WidgetList
    plural: widgets
    singular: widget
    shortNames: [wd, wdg]
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
    additionalPrinterColumns:
    - name: Size
      type: string
      jsonPath: .spec.size
    - name: Replicas
      type: integer
      jsonPath: .spec.replicas
    - name: Ready
      type: string
      jsonPath: .status.conditions[?(@.type=="Ready")].status
    - name: Age
      type: date
      jsonPath: .metadata.creationTimestamp
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            description: WidgetSpec is what the user asks for.
            required: [size]
            properties:
              size:
                type: string
                description: Size of the widget, small or large.
                enum: [small, large]
              replicas:
                type: integer
                default: 1
                minimum: 0
                maximum: 10
              color:
                type: string
                pattern: '^[a-z]+$'
          status:
            type: object
            x-kubernetes-preserve-unknown-fields: true
"#;

const WIDGET: &str = r#"
apiVersion: test.plinth.dev/v1
kind: Widget
metadata:
  name: w1
  namespace: default
  labels:
    team: a
spec:
  size: small
  color: red
"#;

/// The same Widget with `color` removed and `size` changed: a three-way merge must
/// remove the field and change the value.
const WIDGET_CHANGED: &str = r#"
apiVersion: test.plinth.dev/v1
kind: Widget
metadata:
  name: w1
  namespace: default
  labels:
    team: a
spec:
  size: large
  replicas: 2
"#;

fn find_kubectl() -> Option<PathBuf> {
    let candidates = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join("kubectl"))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    std::iter::once(PathBuf::from("/usr/bin/kubectl"))
        .chain(candidates)
        .find(|p| p.is_file())
}

/// A running `plinth up`, killed on drop.
struct Plinth {
    child: Child,
    kubectl: PathBuf,
    kubeconfig: PathBuf,
    cache: PathBuf,
    dir: tempfile::TempDir,
}

impl Drop for Plinth {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Plinth {
    fn start(kubectl: PathBuf) -> Plinth {
        let dir = tempfile::tempdir().expect("temp dir");
        let data = dir.path().join("data");
        let log = std::fs::File::create(dir.path().join("plinth.log")).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_plinth"))
            .args(["up", "--listen", "127.0.0.1:0"])
            .arg("--data-dir")
            .arg(&data)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start plinth up");
        let mut p = Plinth {
            child,
            kubectl,
            kubeconfig: data.join("kubeconfig"),
            cache: dir.path().join("kube-cache"),
            dir,
        };
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            if let Ok(Some(status)) = p.child.try_wait() {
                panic!("plinth up exited with {status}: {}", p.log());
            }
            if p.kubeconfig.exists() {
                let out = p.kubectl_raw(&["get", "--raw", "/readyz"]);
                if out.status.success() {
                    return p;
                }
            }
            assert!(
                Instant::now() < deadline,
                "plinth up not ready after 90s: {}",
                p.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("plinth.log")).unwrap_or_default()
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.kubectl);
        c.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(&self.cache)
            .args(args);
        c
    }

    fn kubectl_raw(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run kubectl")
    }

    /// Run kubectl and require success; returns stdout.
    fn kubectl(&self, args: &[&str]) -> String {
        let out = self.kubectl_raw(args);
        assert!(
            out.status.success(),
            "kubectl {} failed:\nstdout: {}\nstderr: {}\nserver log tail: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            tail(&self.log(), 2000)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Run kubectl expecting failure; returns stderr.
    fn kubectl_fails(&self, args: &[&str]) -> String {
        let out = self.kubectl_raw(args);
        assert!(
            !out.status.success(),
            "kubectl {} unexpectedly succeeded: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    fn write(&self, name: &str, content: &str) -> String {
        let p = self.dir.path().join(name);
        std::fs::write(&p, content).expect("write manifest");
        p.to_string_lossy().into_owned()
    }

    /// Apply the Widget CRD and wait until kubectl can resolve `widgets`.
    fn install_crd(&self) {
        let crd = self.write("crd.yaml", CRD);
        let out = self.kubectl(&["apply", "-f", &crd]);
        assert!(
            out.contains(
                "customresourcedefinition.apiextensions.k8s.io/widgets.test.plinth.dev created"
            ),
            "{out}"
        );
        wait_for(
            || self.kubectl_raw(&["get", "widgets", "-A"]).status.success(),
            "widgets to be served",
        );
    }
}

fn tail(s: &str, n: usize) -> &str {
    let start = s.len().saturating_sub(n);
    let start = (start..s.len())
        .find(|i| s.is_char_boundary(*i))
        .unwrap_or(s.len());
    &s[start..]
}

fn wait_for(mut f: impl FnMut() -> bool, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

macro_rules! plinth_or_skip {
    () => {
        match find_kubectl() {
            Some(k) => Plinth::start(k),
            None => {
                println!("SKIPPED: kubectl not found");
                return;
            }
        }
    };
}

fn json(s: &str) -> serde_json::Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
}

#[test]
fn kubectl_apply_get_watch_reapply_delete_custom_resources() {
    let p = plinth_or_skip!();
    p.install_crd();

    // api-resources lists the CRD with its short names.
    let out = p.kubectl(&["api-resources", "--api-group=test.plinth.dev"]);
    let line = out
        .lines()
        .find(|l| l.starts_with("widgets"))
        .unwrap_or_else(|| panic!("widgets missing from api-resources:\n{out}"));
    let cols: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(
        cols,
        ["widgets", "wd,wdg", "test.plinth.dev/v1", "true", "Widget"],
        "{out}"
    );

    // apply with kubectl's default validation (server-side, strict).
    let w = p.write("widget.yaml", WIDGET);
    let out = p.kubectl(&["apply", "-f", &w]);
    assert!(out.contains("widget.test.plinth.dev/w1 created"), "{out}");

    // get shows the printer columns; the default was applied by admission.
    let out = p.kubectl(&["get", "widgets", "-n", "default"]);
    let mut lines = out.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "SIZE", "REPLICAS", "READY", "AGE"],
        "{out}"
    );
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    // READY has no value yet: the cell is null and kubectl prints it blank.
    assert_eq!(row.len(), 4, "{out}");
    assert_eq!(&row[..3], ["w1", "small", "1"], "{out}");
    assert!(row[3].ends_with('s'), "age column: {out}");
    let out = p.kubectl(&["get", "wd", "w1", "-n", "default", "-o", "json"]);
    let obj = json(&out);
    assert_eq!(obj["spec"]["replicas"], 1);
    assert_eq!(obj["spec"]["color"], "red");

    // get -w sees a change made by someone else.
    let mut watch = p
        .command(&["get", "widgets", "-n", "default", "-w", "--no-headers"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start kubectl get -w");
    let stdout = watch.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let first = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("initial watch line");
    assert!(first.starts_with("w1"), "{first}");
    p.kubectl(&[
        "patch",
        "widget",
        "w1",
        "-n",
        "default",
        "--type=merge",
        "-p",
        r#"{"spec":{"replicas":7}}"#,
    ]);
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                let cells: Vec<String> = line.split_whitespace().map(String::from).collect();
                seen.push(line);
                if cells.len() >= 3 && cells[0] == "w1" && cells[2] == "7" {
                    break;
                }
            }
            Err(_) => panic!("watch never showed replicas 7; saw {seen:?}"),
        }
    }
    let _ = watch.kill();
    let _ = watch.wait();

    // Re-apply a changed file: the three-way merge changes size and removes color.
    let changed = p.write("widget.yaml", WIDGET_CHANGED);
    let out = p.kubectl(&["apply", "-f", &changed]);
    assert!(
        out.contains("widget.test.plinth.dev/w1 configured"),
        "{out}"
    );
    let obj = json(&p.kubectl(&["get", "widget", "w1", "-n", "default", "-o", "json"]));
    assert_eq!(obj["spec"]["size"], "large", "{obj}");
    assert_eq!(obj["spec"]["replicas"], 2, "{obj}");
    assert!(
        obj["spec"].get("color").is_none(),
        "color must be removed: {obj}"
    );
    assert_eq!(obj["metadata"]["labels"]["team"], "a");
    let out = p.kubectl(&["apply", "-f", &changed]);
    assert!(out.contains("widget.test.plinth.dev/w1 unchanged"), "{out}");

    // Re-applying the CRD with another printer column changes what `get` prints.
    let crd2 = p.write(
        "crd.yaml",
        &CRD.replace(
            "    - name: Age\n",
            "    - name: Color\n      type: string\n      priority: 1\n      jsonPath: .spec.color\n    - name: Age\n",
        ),
    );
    let out = p.kubectl(&["apply", "-f", &crd2]);
    assert!(out.contains("widgets.test.plinth.dev configured"), "{out}");
    wait_for(
        || {
            let out = p.kubectl(&["get", "widgets", "-n", "default", "-o", "wide"]);
            out.lines().next().is_some_and(|h| h.contains("COLOR"))
        },
        "the new printer column",
    );
    let out = p.kubectl(&["get", "widgets", "-n", "default"]);
    assert!(
        !out.contains("COLOR"),
        "priority 1 columns only with -o wide: {out}"
    );

    // delete.
    let out = p.kubectl(&["delete", "widget", "w1", "-n", "default"]);
    assert!(
        out.contains("widget.test.plinth.dev \"w1\" deleted"),
        "{out}"
    );
    let err = p.kubectl_fails(&["get", "widget", "w1", "-n", "default"]);
    assert!(
        err.contains("NotFound") || err.contains("not found"),
        "{err}"
    );
}

#[test]
fn kubectl_apply_rejects_schema_violations_with_field_causes() {
    let p = plinth_or_skip!();
    p.install_crd();

    let bad = p.write("bad-size.yaml", &WIDGET.replace("size: small", "size: xl"));
    let err = p.kubectl_fails(&["apply", "-f", &bad]);
    assert!(
        err.contains(r#"spec.size: Unsupported value: "xl": supported values: "small", "large""#),
        "{err}"
    );

    let bad = p.write(
        "bad-replicas.yaml",
        &WIDGET.replace("color: red", "replicas: many"),
    );
    let err = p.kubectl_fails(&["apply", "-f", &bad]);
    assert!(
        err.contains(r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#),
        "{err}"
    );

    let bad = p.write(
        "bad-color.yaml",
        &WIDGET.replace("color: red", "color: Red1"),
    );
    let err = p.kubectl_fails(&["apply", "-f", &bad]);
    assert!(
        err.contains(
            r#"spec.color: Invalid value: "Red1": spec.color in body should match '^[a-z]+$'"#
        ),
        "{err}"
    );

    let bad = p.write(
        "missing.yaml",
        &WIDGET.replace("size: small", "replicas: 2"),
    );
    let err = p.kubectl_fails(&["apply", "-f", &bad]);
    assert!(err.contains("spec.size: Required value"), "{err}");
    assert!(err.contains(r#"The Widget "w1" is invalid"#), "{err}");

    // Nothing was stored.
    let err = p.kubectl_fails(&["get", "widget", "w1", "-n", "default"]);
    assert!(err.contains("not found"), "{err}");

    // A kind nobody installed is named as such (kubectl reads /openapi/v2 for a group
    // that /openapi/v3 does not list, then asks discovery).
    let unknown = p.write(
        "unknown-kind.yaml",
        "apiVersion: nowhere.plinth.dev/v1\nkind: Gizmo\nmetadata: {name: g1, namespace: default}\nspec: {}\n",
    );
    let err = p.kubectl_fails(&["apply", "-f", &unknown]);
    assert!(
        err.contains(r#"no matches for kind "Gizmo" in version "nowhere.plinth.dev/v1""#),
        "{err}"
    );

    // A CRD that is not structural is rejected with the field path.
    let bad_crd = p.write(
        "bad-crd.yaml",
        &CRD.replace(
            "            type: object\n            description: WidgetSpec",
            "            description: WidgetSpec",
        )
        .replace("widgets", "gadgets")
        .replace("Widget", "Gadget")
        .replace("widget\n", "gadget\n")
        .replace("shortNames: [wd, wdg]", "shortNames: [gd]"),
    );
    let err = p.kubectl_fails(&["apply", "-f", &bad_crd]);
    assert!(
        err.contains(
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value"
        ),
        "{err}"
    );
}

#[test]
fn kubectl_explain_reads_the_crd_schema() {
    let p = plinth_or_skip!();
    p.install_crd();
    let out = p.kubectl(&["explain", "widgets.spec"]);
    assert!(
        out.contains("KIND:       Widget") || out.contains("KIND:     Widget"),
        "{out}"
    );
    assert!(
        out.contains("WidgetSpec is what the user asks for."),
        "{out}"
    );
    assert!(out.contains("size"), "{out}");
    assert!(out.contains("Size of the widget, small or large."), "{out}");
    let out = p.kubectl(&["explain", "widget.spec.replicas"]);
    assert!(
        out.contains("FIELD: replicas <integer>") || out.contains("replicas"),
        "{out}"
    );
    let out = p.kubectl(&["explain", "configmaps.data"]);
    assert!(out.contains("map[string]string"), "{out}");
}

#[test]
fn kubectl_strict_field_validation_rejects_unknown_fields() {
    let p = plinth_or_skip!();
    p.install_crd();
    let w = p.write("unknown.yaml", &WIDGET.replace("color: red", "colour: red"));
    let err = p.kubectl_fails(&["apply", "-f", &w]);
    assert!(err.contains(r#"unknown field "spec.colour""#), "{err}");

    // --validate=false (fieldValidation=Ignore) prunes the field silently.
    let out = p.kubectl(&["apply", "--validate=false", "-f", &w]);
    assert!(out.contains("created"), "{out}");
    let obj = json(&p.kubectl(&["get", "widget", "w1", "-n", "default", "-o", "json"]));
    assert!(obj["spec"].get("colour").is_none(), "{obj}");

    // Path helper sanity: the data dir is private to this test.
    assert!(Path::new(&p.kubeconfig).exists());
}

#[test]
fn kubectl_applies_a_marketplace_promise_and_built_in_kinds() {
    let p = plinth_or_skip!();

    // A real Kratix Promise (which embeds a CRD) applies with default validation.
    let promise = concat!(
        env!("PLINTH_CORPUS_DIR"),
        "/kratix-marketplace/redis/promise.yaml"
    );
    if std::path::Path::new(promise).exists() {
        let out = p.kubectl(&["apply", "-f", promise]);
        assert!(
            out.contains("promise.platform.kratix.io/redis created"),
            "{out}"
        );
        let out = p.kubectl(&["get", "promises"]);
        assert!(out.lines().next().unwrap().starts_with("NAME"), "{out}");
        assert!(out.lines().any(|l| l.starts_with("redis ")), "{out}");
        let out = p.kubectl(&["explain", "promises.spec.api"]);
        assert!(out.contains("KIND:       Promise"), "{out}");
    } else {
        println!("SKIPPED (marketplace part): the Kratix corpus is absent at {promise}");
    }

    // Built-in kinds: strategic-merge three-way apply removes a dropped key.
    let cm = p.write(
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c1\n  namespace: default\ndata:\n  a: \"1\"\n  b: \"2\"\n",
    );
    let out = p.kubectl(&["apply", "-f", &cm]);
    assert!(out.contains("configmap/c1 created"), "{out}");
    let out = p.kubectl(&["get", "configmap", "c1", "-n", "default"]);
    let row: Vec<&str> = out.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(&row[..2], ["c1", "2"], "{out}");
    let cm = p.write(
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c1\n  namespace: default\ndata:\n  a: \"3\"\n",
    );
    let out = p.kubectl(&["apply", "-f", &cm]);
    assert!(out.contains("configmap/c1 configured"), "{out}");
    let obj = json(&p.kubectl(&["get", "configmap", "c1", "-n", "default", "-o", "json"]));
    assert_eq!(obj["data"], serde_json::json!({"a": "3"}), "{obj}");

    // Namespaces print their phase.
    let out = p.kubectl(&["get", "namespace", "default"]);
    let row: Vec<&str> = out.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(&row[..2], ["default", "Active"], "{out}");
}

#[test]
fn kubectl_server_side_apply_conflicts_and_force() {
    let p = plinth_or_skip!();
    let v1 = p.write(
        "ssa.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: default\nspec:\n  replicas: 1\n  selector:\n    matchLabels: {app: web}\n  template:\n    metadata:\n      labels: {app: web}\n    spec:\n      containers:\n      - name: web\n        image: nginx:1\n",
    );
    let out = p.kubectl(&["apply", "--server-side", "-f", &v1]);
    assert!(
        out.contains("deployment.apps/web serverside-applied"),
        "{out}"
    );
    let got = json(&p.kubectl(&[
        "get",
        "deploy",
        "web",
        "-o",
        "json",
        "--show-managed-fields",
    ]));
    let mf = got["metadata"]["managedFields"].as_array().unwrap();
    assert_eq!(mf[0]["manager"], "kubectl");
    assert_eq!(mf[0]["operation"], "Apply");
    assert!(
        mf[0]["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"web\"}"]
            ["f:image"]
            .is_object(),
        "{mf:?}"
    );
    // Another manager changes the image with a plain patch and now owns it.
    p.kubectl(&[
        "patch",
        "deploy",
        "web",
        "--field-manager",
        "ops",
        "--type",
        "strategic",
        "-p",
        r#"{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:2"}]}}}}"#,
    ]);
    let v2 = p.write(
        "ssa2.yaml",
        &std::fs::read_to_string(&v1)
            .unwrap()
            .replace("replicas: 1", "replicas: 3")
            .replace("nginx:1", "nginx:3"),
    );
    let err = p.kubectl_fails(&["apply", "--server-side", "-f", &v2]);
    assert!(err.contains("conflict with \"ops\""), "{err}");
    assert!(
        err.contains(".spec.template.spec.containers[name=\"web\"].image"),
        "{err}"
    );
    let out = p.kubectl(&["apply", "--server-side", "--force-conflicts", "-f", &v2]);
    assert!(out.contains("serverside-applied"), "{out}");
    let got = json(&p.kubectl(&["get", "deploy", "web", "-o", "json"]));
    assert_eq!(got["spec"]["replicas"], 3);
    assert_eq!(
        got["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:3"
    );
    // What a real cluster rejects is rejected.
    let bad = p.write(
        "bad.yaml",
        &std::fs::read_to_string(&v1)
            .unwrap()
            .replace("replicas: 1", "replicas: many"),
    );
    let err = p.kubectl_fails(&["apply", "--server-side", "-f", &bad]);
    assert!(err.contains("invalid type: string \"many\""), "{err}");
}
