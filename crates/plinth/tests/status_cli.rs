//! `plinth status` as a user runs it against `plinth up`: a Promise with a resource
//! workflow and a request, then the tree (Job phase, Work, WorkPlacement to the Destination
//! `local` with its file count and commit), the same tree as JSON and YAML, `--watch`
//! following a new request, and clear errors.

use crate::support;
use crate::view;

use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{Plinth, git};

fn status(p: &Plinth, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_plinth"))
        .arg("status")
        .args(args)
        .arg("--kubeconfig")
        .arg(&p.kubeconfig)
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("run plinth status")
}

fn ok(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "plinth status failed\nstdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plinth_status_shows_the_path_of_a_request() {
    let scripts = tempfile::tempdir().unwrap();
    let map = view::image_map(scripts.path());
    let p = Plinth::up(&["--image-map", map.to_str().unwrap()]).await;
    view::install(&p).await;
    let version = view::request_written(&p, "mine").await;
    // The version is a commit of the state store's history.
    let history = git(&[
        "-C",
        p.repo().to_str().unwrap(),
        "log",
        "--format=%H",
        "main",
    ]);
    assert!(
        history.lines().any(|c| c == version),
        "{version} not in:\n{history}"
    );

    // The tree, as text (no colours: stdout is not a terminal).
    let tree = ok(&status(&p, &["gadget", "default/mine"]));
    assert!(!tree.contains('\x1b'), "colours off a terminal:\n{tree}");
    let lines: Vec<&str> = tree.lines().collect();
    assert!(lines[0].starts_with("Promise gadget  Available"), "{tree}");
    let line = |prefix: &str| {
        lines
            .iter()
            .find(|l| {
                l.trim_start_matches(['│', '├', '└', '─', ' '])
                    .starts_with(prefix)
            })
            .unwrap_or_else(|| panic!("no {prefix:?} line in:\n{tree}"))
            .to_string()
    };
    assert!(
        line("Request default/mine").contains("ConfigureWorkflowCompleted=True"),
        "{tree}"
    );
    let job = line("Job ");
    assert!(
        job.contains("pipeline configure") && job.contains("Succeeded"),
        "{tree}"
    );
    let placement = line("WorkPlacement ");
    assert!(
        placement.contains("→ Destination local  1 file  commit ")
            && placement.contains(&version[..12])
            && placement.contains("Ready=True"),
        "{tree}"
    );
    // Nesting: Job and Work under the request, the WorkPlacement under the Work.
    let depth = |l: &str| l.chars().take_while(|c| !c.is_alphabetic()).count();
    assert!(depth(&line("Work ")) < depth(&placement), "{tree}");
    assert!(depth(&line("Request ")) < depth(&job), "{tree}");

    // On a terminal (a pseudo-terminal from `script`), states are coloured; NO_COLOR turns
    // colours off.
    let on_tty = |no_color: bool| {
        let cmd = format!(
            "{} status gadget default/mine --kubeconfig {}",
            env!("CARGO_BIN_EXE_plinth"),
            p.kubeconfig.display()
        );
        let mut c = Command::new("script");
        c.args(["-qec", &cmd, "/dev/null"]);
        if no_color {
            c.env("NO_COLOR", "1");
        }
        ok(&c.output().expect("run script"))
    };
    let coloured = on_tty(false);
    assert!(
        coloured.contains("\x1b[32mSucceeded\x1b[0m"),
        "{coloured:?}"
    );
    assert!(!on_tty(true).contains('\x1b'), "NO_COLOR");

    // The same tree as data.
    let json: Value = serde_json::from_str(&ok(&status(&p, &["-o", "json"]))).unwrap();
    let gadget = json
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "gadget")
        .expect("gadget in the JSON");
    let req = &gadget["requests"][0];
    assert_eq!(
        (req["namespace"].as_str(), req["name"].as_str()),
        (Some("default"), Some("mine"))
    );
    assert_eq!(req["jobs"][0]["phase"], "Succeeded");
    assert!(
        req["jobs"][0]["duration_seconds"].as_i64().is_some(),
        "{req}"
    );
    let pl = &req["works"][0]["placements"][0];
    assert_eq!(pl["destination"], "local");
    assert_eq!(pl["files"], 1);
    assert_eq!(pl["version"], version.as_str());
    let yaml: Value = serde_saphyr::from_str(&ok(&status(&p, &["-o", "yaml"]))).unwrap();
    assert_eq!(yaml, json, "YAML and JSON give the same tree");

    // With no --kubeconfig and none elsewhere (no KUBECONFIG, no ~/.kube/config, not in a
    // cluster), the kubeconfig `plinth up` wrote in its data dir is used; without one,
    // the error names every place looked at.
    let home = tempfile::tempdir().unwrap();
    let bare = |data_dir: &std::path::Path| {
        Command::new(env!("CARGO_BIN_EXE_plinth"))
            .args(["status", "gadget", "default/mine"])
            .env_remove("KUBECONFIG")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env("HOME", home.path())
            .env("PLINTH_DATA_DIR", data_dir)
            .env("RUST_BACKTRACE", "0")
            .output()
            .expect("run plinth status")
    };
    let found = ok(&bare(&p.data));
    assert!(
        found.starts_with("Promise gadget  Available") && found.contains("Request default/mine"),
        "the tree from the data dir's kubeconfig:\n{found}"
    );
    let empty = tempfile::tempdir().unwrap();
    let out = bare(empty.path());
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no kubeconfig given and none found")
            && err.contains(&empty.path().join("kubeconfig").display().to_string())
            && err.contains("plinth up"),
        "{err}"
    );

    // A KUBECONFIG naming a missing file is the user's choice gone wrong: said so, with
    // no fallback to the data dir's kubeconfig.
    let out = Command::new(env!("CARGO_BIN_EXE_plinth"))
        .args(["status", "gadget", "default/mine"])
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env("PLINTH_DATA_DIR", &p.data)
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("run plinth status");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("KUBECONFIG=/nonexistent/kubeconfig: /nonexistent/kubeconfig does not exist"),
        "{err}"
    );

    // Errors name what is missing.
    let out = status(&p, &["nope"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("Promise \"nope\" not found"));
    let out = status(&p, &["gadget", "default/ghost"]);
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("request default/ghost of Promise \"gadget\" not found")
    );
    let out = status(&p, &["gadget", "ghost"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected NAMESPACE/NAME"));

    // --watch prints the tree again when a request appears.
    let mut child = Command::new(env!("CARGO_BIN_EXE_plinth"))
        .args(["status", "gadget", "--watch", "--kubeconfig"])
        .arg(&p.kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let wait_for = |what: &str, secs: u64| {
        let deadline = Instant::now() + Duration::from_secs(secs);
        let mut seen = String::new();
        while Instant::now() < deadline {
            if let Ok(l) = rx.recv_timeout(Duration::from_millis(200)) {
                seen.push_str(&l);
                seen.push('\n');
                if l.contains(what) {
                    return seen;
                }
            }
        }
        panic!("--watch never printed {what:?}; printed:\n{seen}");
    };
    wait_for("Request default/mine", 30);
    view::apply(&p, "second.yaml", &view::request("second"));
    let redrawn = wait_for("Request default/second", 60);
    assert!(
        redrawn.contains("---"),
        "a redraw off a terminal starts with ---:\n{redrawn}"
    );
    let _ = child.kill();
    let _ = child.wait();
}
