//! Promise authoring as a user runs it: `plinth init promise`, `update api`,
//! `add container`, `build promise`, `test` and `render` in a temporary directory with
//! the binary, checking exit codes and output; the generated Promise applied on a real
//! `plinth up` with kubectl; and `plinth test` on marketplace Promises whose pipeline
//! images are mapped to scripts.

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use support::*;

/// A directory outside /tmp: the pipeline sandbox gives every container a private /tmp,
/// so scripts kept there would not be found.
fn workdir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir")
}

/// Runs the binary in `dir`.
fn plinth(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_plinth"))
        .args(args)
        .current_dir(dir)
        .env_remove("PLINTH_IMAGE_MAP")
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("run plinth")
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Runs the binary and requires success; returns stdout.
fn ok(dir: &Path, args: &[&str]) -> String {
    let o = plinth(dir, args);
    assert!(
        o.status.success(),
        "plinth {}: {}",
        args.join(" "),
        text(&o)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Runs the binary and requires failure; returns stdout and stderr.
fn fails(dir: &Path, args: &[&str]) -> String {
    let o = plinth(dir, args);
    assert_eq!(
        o.status.code(),
        Some(1),
        "plinth {} should fail: {}",
        args.join(" "),
        text(&o)
    );
    text(&o)
}

#[test]
fn init_add_build_test_render_in_one_scripted_run() {
    let tmp = workdir();
    let dir = tmp.path();
    let out = ok(
        dir,
        &[
            "init",
            "promise",
            "app",
            "--group",
            "example.org",
            "--kind",
            "App",
            "--split",
        ],
    );
    assert!(out.contains("app promise bootstrapped"), "{out}");
    for f in [
        "api.yaml",
        "dependencies.yaml",
        "example-resource.yaml",
        "README.md",
    ] {
        assert!(dir.join(f).is_file(), "{f} created");
    }
    assert!(dir.join("tests/example/request.yaml").is_file());
    // init never overwrites.
    let again = fails(
        dir,
        &[
            "init",
            "promise",
            "app",
            "--group",
            "example.org",
            "--kind",
            "App",
            "--split",
        ],
    );
    assert!(again.contains("already exists"), "{again}");

    ok(dir, &["update", "api", "--property", "size:string"]);
    let out = ok(
        dir,
        &[
            "add",
            "container",
            "resource/configure/instance",
            "--image",
            "example.org/app-configure:v0.1.0",
        ],
    );
    let step = dir.join("workflows/resource/configure/instance/example-org-app-configure");
    assert!(out.contains("scripts/pipeline.sh"), "{out}");
    assert!(step.join("scripts/pipeline.sh").is_file() && step.join("Dockerfile").is_file());
    assert!(
        std::fs::read_to_string(dir.join("images.yaml"))
            .unwrap()
            .contains("example.org/app-configure:v0.1.0")
    );
    ok(
        dir,
        &["build", "promise", "app", "--output", "promise.yaml"],
    );
    let built = std::fs::read_to_string(dir.join("promise.yaml")).unwrap();
    assert!(built.contains("name: example-org-app-configure"), "{built}");
    assert!(built.contains("size:"), "{built}");

    // No expectations yet: the case fails and says how to record them.
    let first = fails(dir, &["test"]);
    assert!(first.contains("plinth test --update"), "{first}");
    assert!(first.contains("0 passed, 1 failed"), "{first}");
    let out = ok(dir, &["test", "--update"]);
    assert!(out.contains("UPDATED example"), "{out}");
    let expected_cm = dir.join(
        "tests/example/expected/outputs/local/local/resources/default/app/example-app/instance/5058f/configmap.yaml",
    );
    let cm = std::fs::read_to_string(&expected_cm).expect("the ConfigMap is recorded");
    assert!(cm.contains("requestedBy: example-app"), "{cm}");
    let status = std::fs::read_to_string(dir.join("tests/example/expected/status.yaml")).unwrap();
    assert!(
        status.contains("message: example-app configured"),
        "{status}"
    );
    let out = ok(dir, &["test"]);
    assert!(out.contains("1 passed, 0 failed"), "{out}");

    // Extra objects are applied before the request: a ConfigMap in its own namespace is
    // fine; a kind the platform does not serve fails the case, named.
    let objects = dir.join("tests/example/objects.yaml");
    std::fs::write(
        &objects,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: team\ndata:\n  tier: gold\n",
    )
    .unwrap();
    let out = ok(dir, &["test"]);
    assert!(out.contains("1 passed, 0 failed"), "{out}");
    std::fs::write(
        &objects,
        "apiVersion: example.org/v9\nkind: Widget\nmetadata:\n  name: w\n",
    )
    .unwrap();
    let out = fails(dir, &["test"]);
    assert!(
        out.contains("Widget w") && out.contains("is not served"),
        "{out}"
    );
    std::fs::remove_file(&objects).unwrap();

    let out = ok(dir, &["render", "promise.yaml", "example-resource.yaml"]);
    assert!(
        out.contains(
            "--- local: local/resources/default/app/example-app/instance/5058f/configmap.yaml"
        ),
        "{out}"
    );
    assert!(out.contains("message: example-app configured"), "{out}");

    // A changed step: the test shows a unified diff and fails.
    let script = step.join("scripts/pipeline.sh");
    let s = std::fs::read_to_string(&script).unwrap();
    std::fs::write(&script, s.replace("requestedBy", "owner")).unwrap();
    let diff = fails(dir, &["test"]);
    assert!(diff.contains("-  requestedBy: example-app"), "{diff}");
    assert!(diff.contains("+  owner: example-app"), "{diff}");
    assert!(diff.contains("0 passed, 1 failed"), "{diff}");

    // A failing step: render exits non-zero naming the step, with its log.
    std::fs::write(
        &script,
        "#!/bin/sh\necho 'cannot reach the database' >&2\nexit 4\n",
    )
    .unwrap();
    let failed = fails(dir, &["render", "promise.yaml", "example-resource.yaml"]);
    assert!(
        failed.contains("pipeline instance failed at step example-org-app-configure"),
        "{failed}"
    );
    assert!(failed.contains("exited with code 4"), "{failed}");
    assert!(failed.contains("cannot reach the database"), "{failed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_promises_apply_on_plinth_up_as_they_are() {
    let tmp = workdir();
    let flat = tmp.path().join("flat");
    let split = tmp.path().join("split");
    std::fs::create_dir_all(&flat).unwrap();
    std::fs::create_dir_all(&split).unwrap();
    ok(
        &flat,
        &[
            "init",
            "promise",
            "app",
            "--group",
            "example.org",
            "--kind",
            "App",
        ],
    );
    ok(
        &split,
        &[
            "init",
            "promise",
            "db",
            "--group",
            "data.example.org",
            "--kind",
            "Database",
            "--version",
            "v1",
            "--plural",
            "dbs",
            "--split",
        ],
    );
    for d in [&flat, &split] {
        ok(
            d,
            &[
                "update",
                "api",
                "--property",
                "size:string",
                "--property",
                "service.port:integer",
            ],
        );
        ok(d, &["update", "api", "--property", "service.port-"]);
        ok(
            d,
            &[
                "add",
                "container",
                "resource/configure/instance",
                "--image",
                "example.org/step:v1",
            ],
        );
        ok(
            d,
            &[
                "add",
                "container",
                "promise/configure/deps",
                "--image",
                "example.org/deps:v1",
                "--language",
                "python",
            ],
        );
    }
    let deps = tmp.path().join("deps");
    std::fs::create_dir_all(deps.join("nested")).unwrap();
    std::fs::write(
        deps.join("ns.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: shared\ndata:\n  a: b\n",
    )
    .unwrap();
    std::fs::write(
        deps.join("nested/sa.yaml"),
        "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: runner\n  namespace: team\n",
    )
    .unwrap();
    let out = ok(&split, &["update", "dependencies", deps.to_str().unwrap()]);
    assert!(out.contains("dependencies.yaml (2 objects)"), "{out}");
    // The flat Promise ships the same files from a Promise configure step instead.
    let out = ok(
        &flat,
        &[
            "update",
            "dependencies",
            deps.to_str().unwrap(),
            "--image",
            "example.org/app-deps:v1",
        ],
    );
    assert!(
        out.contains("workflows/promise/configure/dependencies/configure-deps"),
        "{out}"
    );
    assert!(
        !std::fs::read_to_string(flat.join("promise.yaml"))
            .unwrap()
            .contains("dependencies:")
    );
    ok(
        &split,
        &["build", "promise", "db", "--output", "promise.yaml"],
    );
    let built = std::fs::read_to_string(split.join("promise.yaml")).unwrap();
    assert!(
        built.contains("namespace: default") && built.contains("namespace: team"),
        "{built}"
    );

    // Both steps of both Promises run as scripts through one image map.
    let map = tmp.path().join("images.yaml");
    let mut entries = String::from("images:\n");
    for d in [&flat, &split] {
        let m = std::fs::read_to_string(d.join("images.yaml")).unwrap();
        for (image, script) in [
            (
                "example.org/step:v1",
                "resource/configure/instance/example-org-step/scripts/pipeline.sh",
            ),
            (
                "example.org/deps:v1",
                "promise/configure/deps/example-org-deps/scripts/pipeline.py",
            ),
        ] {
            assert!(m.contains(image), "{m}");
            if d == &flat {
                entries.push_str(&format!(
                    "  - image: \"{image}\"\n    command: [\"{}\"]\n",
                    d.join("workflows").join(script).display()
                ));
            }
        }
    }
    entries.push_str(&format!(
        "  - image: \"example.org/app-deps:v1\"\n    command: [\"{}\"]\n",
        flat.join("workflows/promise/configure/dependencies/configure-deps/scripts/pipeline.sh")
            .display()
    ));
    std::fs::write(&map, entries).unwrap();

    let p = Plinth::up(&["--image-map", map.to_str().unwrap()]).await;
    for (d, name, rr_kind, rr_name) in [
        (&flat, "app", "apps.example.org", "example-app"),
        (&split, "db", "dbs.data.example.org", "example-db"),
    ] {
        let applied = p.kubectl(&["apply", "-f", d.join("promise.yaml").to_str().unwrap()]);
        assert!(applied.contains("created"), "{applied}");
        p.kubectl(&[
            "wait",
            "--for=jsonpath={.status.status}=Available",
            &format!("promise/{name}"),
            "--timeout=90s",
        ]);
        let mut rr = std::fs::read_to_string(d.join("example-resource.yaml")).unwrap();
        rr = rr.replace("spec: {}", "spec:\n  size: small");
        std::fs::write(d.join("request.yaml"), rr).unwrap();
        p.kubectl(&["apply", "-f", d.join("request.yaml").to_str().unwrap()]);
        p.kubectl(&[
            "wait",
            "--for=condition=ConfigureWorkflowCompleted",
            &format!("{rr_kind}/{rr_name}"),
            "--timeout=90s",
        ]);
        let path =
            format!("local/resources/default/{name}/{rr_name}/instance/5058f/configmap.yaml");
        let repo = p.repo();
        wait_until(60, &path, || async {
            repo_file(&repo, "main", &path).is_some()
        })
        .await;
    }
    // The split Promise's static dependencies reach the Destination.
    let repo = p.repo();
    // The steps' resources/.gitkeep placeholders are never shipped.
    let shipped = repo_files(&repo, "main");
    assert!(
        !shipped.iter().any(|f| f.ends_with(".gitkeep")),
        "{shipped:?}"
    );
    let deps_file = "local/dependencies/db/5058f/static/db-dependencies.yaml";
    wait_until(60, deps_file, || async {
        repo_file(&repo, "main", deps_file).is_some()
    })
    .await;
    assert!(
        repo_file(&repo, "main", deps_file)
            .unwrap()
            .contains("name: shared")
    );
}

fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// A Promise directory for a marketplace Promise: its request as a test case, and an
/// image map sending its pipeline image to `body`.
fn marketplace_case(root: &Path, promise: &str, image: &str, body: &str) -> PathBuf {
    let dir = root.join(promise);
    std::fs::create_dir_all(dir.join("tests/example")).unwrap();
    let s = script(&dir, "pipeline.sh", body);
    std::fs::write(
        dir.join("images.yaml"),
        format!(
            "images:\n  - image: \"{image}\"\n    command: [\"{}\"]\n",
            s.display()
        ),
    )
    .unwrap();
    let mut rr = std::fs::read_to_string(corpus(&format!(
        "kratix-marketplace/{promise}/resource-request.yaml"
    )))
    .unwrap();
    if !rr.contains("namespace:") {
        rr = rr.replace(
            "  name: example\n",
            "  name: example\n  namespace: default\n",
        );
    }
    std::fs::write(dir.join("tests/example/request.yaml"), rr).unwrap();
    dir
}

#[test]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
fn marketplace_promises_are_tested_with_image_mapped_pipelines() {
    let tmp = workdir();
    let root = tmp.path();
    let market = corpus("kratix-marketplace").canonicalize().unwrap();

    // redis: the operator's manifests on the promise workflow, a RedisFailover per request.
    let redis_res = market.join("redis/internal/configure-pipeline/resources");
    let redis = marketplace_case(
        root,
        "redis",
        "ghcr.io/syntasso/kratix-marketplace/redis-configure-pipeline:*",
        &format!(
            r#"#!/bin/sh
set -eu
res="{}"
if [ "$KRATIX_WORKFLOW_TYPE" = promise ]; then cp "$res"/dependencies/* /kratix/output/; exit 0; fi
size=$(sed -n 's/^ *size: *//p' /kratix/input/object.yaml | head -n1 | tr -d "\"'")
replicas=1
[ "$size" = large ] && replicas=3
sed -e "s/NAME_PLACEHOLDER/$KRATIX_OBJECT_NAME/" -e "s/replicas: 3/replicas: $replicas/" "$res/redis-instance.yaml" > /kratix/output/redis-instance.yaml
"#,
            redis_res.display()
        ),
    );

    // namespace: a Namespace named by the request; a case with an existing status.
    let ns_res = market.join("namespace/internal/configure-pipeline/resources");
    let namespace = marketplace_case(
        root,
        "namespace",
        "ghcr.io/syntasso/kratix-marketplace/namespace-configure-pipeline:v0.1.0",
        &format!(
            r#"#!/bin/sh
set -eu
name=$(sed -n 's/^ *namespaceName: *//p' /kratix/input/object.yaml | head -n1)
sed "s/TBDNAMESPACE/$name/" "{}/namespace.yaml" > /kratix/output/namespace.yaml
echo "namespace: $name" > /kratix/metadata/status.yaml
"#,
            ns_res.display()
        ),
    );
    std::fs::write(
        namespace.join("tests/example/status.yaml"),
        "owner: team-a\n",
    )
    .unwrap();

    // vault: its manifests for the request, scheduled by the pipeline to the Destination
    // labelled with the request's env; a case with two Destinations.
    let v_res = market.join("vault/internal/configure-pipeline/resources");
    let vault = marketplace_case(
        root,
        "vault",
        "ghcr.io/syntasso/kratix-marketplace/vault-configure-pipeline:v0.1.0",
        &format!(
            r#"#!/bin/sh
set -eu
res="{}"
env=$(sed -n 's/^ *env: *//p' /kratix/input/object.yaml | head -n1)
cp "$res/vault.yaml" "$res/unseal.yaml" /kratix/output/
printf -- '- matchLabels:\n    environment: %s\n' "$env" > /kratix/metadata/destination-selectors.yaml
"#,
            v_res.display()
        ),
    );
    std::fs::write(
        vault.join("tests/example/destinations.yaml"),
        "apiVersion: platform.kratix.io/v1alpha1\nkind: Destination\nmetadata:\n  name: dev-cluster\n  labels: {environment: dev}\nspec:\n  path: dev-cluster\n---\n\
         apiVersion: platform.kratix.io/v1alpha1\nkind: Destination\nmetadata:\n  name: prod-cluster\n  labels: {environment: prod}\nspec:\n  path: prod-cluster\n",
    )
    .unwrap();

    for (dir, name) in [
        (&redis, "redis"),
        (&namespace, "namespace"),
        (&vault, "vault"),
    ] {
        let promise = market.join(name).join("promise.yaml");
        let promise = promise.to_str().unwrap();
        let out = ok(dir, &["test", "--promise", promise, "--update"]);
        assert!(out.contains("1 updated, 0 failed"), "{name}: {out}");
        let out = ok(dir, &["test", "--promise", promise]);
        assert!(out.contains("1 passed, 0 failed"), "{name}: {out}");
    }
    let expected = |dir: &Path, rel: &str| {
        std::fs::read_to_string(dir.join("tests/example/expected").join(rel))
            .unwrap_or_else(|e| panic!("{}: {rel}: {e}", dir.display()))
    };
    let rf = expected(
        &redis,
        "outputs/local/local/resources/default/redis/example/instance-configure/5058f/redis-instance.yaml",
    );
    assert!(
        rf.contains("name: example") && rf.contains("kind: RedisFailover"),
        "{rf}"
    );
    let ns = expected(
        &namespace,
        "outputs/local/local/resources/default/namespace/example/instance-configure/5058f/namespace.yaml",
    );
    assert!(ns.contains("name: promised-namespace"), "{ns}");
    let status = expected(&namespace, "status.yaml");
    assert!(status.contains("namespace: promised-namespace"), "{status}");
    assert!(
        status.contains("owner: team-a"),
        "the existing status is kept: {status}"
    );
    let sel = expected(&vault, "selectors.yaml");
    assert!(
        sel.contains("environment: dev") && sel.contains("- dev-cluster"),
        "{sel}"
    );
    assert!(!sel.contains("prod-cluster"), "{sel}");
    let vf = expected(
        &vault,
        "outputs/dev-cluster/dev-cluster/resources/default/vault/example/instance-configure/5058f/vault.yaml",
    );
    assert_eq!(
        vf,
        std::fs::read_to_string(v_res.join("vault.yaml")).unwrap(),
        "written as the pipeline wrote it"
    );

    // render: the Promise's own workflow, one named pipeline, an unknown one.
    let redis_promise = market.join("redis/promise.yaml");
    let redis_promise = redis_promise.to_str().unwrap();
    let out = ok(
        &redis,
        &[
            "render",
            redis_promise,
            "--promise-workflow",
            "--image-map",
            "images.yaml",
        ],
    );
    assert!(
        out.contains("--- local: local/dependencies/redis/promise-configure/5058f/databases.spotahome.com_redisfailovers.yaml"),
        "{out}"
    );
    let out = ok(
        &redis,
        &[
            "render",
            redis_promise,
            "tests/example/request.yaml",
            "--pipeline",
            "instance-configure",
            "--image-map",
            "images.yaml",
        ],
    );
    assert!(
        out.contains("instance-configure/5058f/redis-instance.yaml"),
        "{out}"
    );
    let out = fails(
        &redis,
        &[
            "render",
            redis_promise,
            "tests/example/request.yaml",
            "--pipeline",
            "nope",
            "--image-map",
            "images.yaml",
        ],
    );
    assert!(
        out.contains("--pipeline nope") && out.contains("(it has: instance-configure)"),
        "{out}"
    );

    // An expectation that no longer holds: a unified diff, a non-zero exit.
    let f = vault.join("tests/example/expected/selectors.yaml");
    let s = std::fs::read_to_string(&f).unwrap();
    std::fs::write(&f, s.replace("environment: dev", "environment: prod")).unwrap();
    let promise = market.join("vault/promise.yaml");
    let out = fails(&vault, &["test", "--promise", promise.to_str().unwrap()]);
    assert!(
        out.contains("-    environment: prod") && out.contains("+    environment: dev"),
        "{out}"
    );
    assert!(out.contains("0 passed, 1 failed"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diff_previews_a_promise_update_without_applying_it() {
    let tmp = workdir();
    let dir = tmp.path();
    ok(
        dir,
        &[
            "init",
            "promise",
            "app",
            "--group",
            "example.org",
            "--kind",
            "App",
        ],
    );
    ok(
        dir,
        &[
            "add",
            "container",
            "resource/configure/instance",
            "--image",
            "example.org/step:v1",
        ],
    );
    let v1 = dir.join("workflows/resource/configure/instance/example-org-step/scripts/pipeline.sh");
    let v2 = script(
        dir,
        "step-v2.sh",
        &std::fs::read_to_string(&v1)
            .unwrap()
            .replace("requestedBy", "owner"),
    );
    // One image map for the platform and for the preview: v2 of the step is the new script.
    let map = dir.join("images.yaml");
    std::fs::write(
        &map,
        format!(
            "images:\n  - image: \"example.org/step:v1\"\n    command: [\"{}\"]\n  - image: \"example.org/step:v2\"\n    command: [\"{}\"]\n",
            v1.display(),
            v2.display()
        ),
    )
    .unwrap();
    let p = Plinth::up(&["--image-map", map.to_str().unwrap()]).await;
    p.kubectl(&["apply", "-f", dir.join("promise.yaml").to_str().unwrap()]);
    p.kubectl(&[
        "wait",
        "--for=jsonpath={.status.status}=Available",
        "promise/app",
        "--timeout=90s",
    ]);
    p.kubectl(&[
        "apply",
        "-f",
        dir.join("example-resource.yaml").to_str().unwrap(),
    ]);
    p.kubectl(&[
        "wait",
        "--for=condition=ConfigureWorkflowCompleted",
        "apps.example.org/example-app",
        "--timeout=90s",
    ]);
    let kubeconfig = p.kubeconfig.to_str().unwrap().to_string();
    let args = |promise: &str| -> Vec<String> {
        [
            "diff",
            promise,
            "--kubeconfig",
            &kubeconfig,
            "--image-map",
            map.to_str().unwrap(),
        ]
        .map(String::from)
        .to_vec()
    };
    let run = |a: Vec<String>| ok(dir, &a.iter().map(String::as_str).collect::<Vec<_>>());

    let same = run(args("promise.yaml"));
    assert!(
        same.contains("Promise app is unchanged: no request re-runs."),
        "{same}"
    );

    let updated = std::fs::read_to_string(dir.join("promise.yaml"))
        .unwrap()
        .replace("example.org/step:v1", "example.org/step:v2");
    std::fs::write(dir.join("promise-v2.yaml"), updated).unwrap();
    // Changes: exit status 1, as kubectl diff.
    let a = args("promise-v2.yaml");
    let out = fails(dir, &a.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        out.contains("-        - image: example.org/step:v1"),
        "{out}"
    );
    assert!(out.contains("1 request(s) would re-run"), "{out}");
    assert!(out.contains("default/example-app: outputs change"), "{out}");
    assert!(
        out.contains("-  requestedBy: example-app") && out.contains("+  owner: example-app"),
        "{out}"
    );

    // Nothing was applied: the platform still runs v1.
    let image = p.kubectl(&[
        "get",
        "promise",
        "app",
        "-o",
        "jsonpath={.spec.workflows.resource.configure[0].spec.containers[0].image}",
    ]);
    assert_eq!(image, "example.org/step:v1");

    // A Promise the platform would refuse is an error (exit 2) naming the field, whether
    // it is installed or not, never a preview of installing it.
    let mut invalid: serde_json::Value =
        serde_saphyr::from_str(&std::fs::read_to_string(dir.join("promise.yaml")).unwrap())
            .unwrap();
    invalid["spec"]["workflows"]["resource"]["configure"][0]["spec"]["containers"][0]["command"] =
        "echo hi".into();
    for name in ["app", "not-installed"] {
        let mut promise = invalid.clone();
        promise["metadata"]["name"] = name.into();
        let file = format!("invalid-{name}.yaml");
        std::fs::write(dir.join(&file), promise.to_string()).unwrap();
        let a = args(&file);
        let o = plinth(dir, &a.iter().map(String::as_str).collect::<Vec<_>>());
        let out = text(&o);
        assert_eq!(o.status.code(), Some(2), "{name}: {out}");
        assert!(
            out.contains("spec.containers[0].command") && !out.contains("installs it"),
            "{name}: {out}"
        );
    }
}
