//! Benchmark: 1,000 WorkPlacement writes of 2 files each into one `file://` Git state store.
//!
//! * `plinth` — this crate's batched writer: 1,000 concurrent `write` calls (a Promise update
//!   fanning out to its resource requests), default batch window.
//! * `cli` — the Kratix way: one working copy, one write at a time under a
//!   mutex; per WorkPlacement `fetch` (at most every 5 s), `reset --hard`, `clean -ffdx`,
//!   `rm -r` of the directory, write, `add`, `commit`, `push` with the git CLI.
//!
//! Prints time to converge, commits made and peak RSS. Each mode runs in its own process so
//! the peak-RSS figures do not mix.
//!
//! `cargo run --release -p plinth-statestore --example bench_git [-- --writes N]`

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use plinth_statestore::git::init_bare;
use plinth_statestore::{GitConfig, StateStore, StoreConfig, WriteOp, WriteRequest};

fn vm_hwm_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn git(cwd: &Path, args: &[&str]) -> String {
    git_measured(cwd, args, None)
}

/// Runs git; with `rss_out`, under `/usr/bin/time -f %M` so that the git process's own peak
/// RSS (KiB) is recorded (getrusage on children would count the forked parent's pages).
fn git_measured(cwd: &Path, args: &[&str], rss_out: Option<&mut u64>) -> String {
    let tmp_rss = std::env::temp_dir().join(format!("bench-git-rss-{}", std::process::id()));
    let mut cmd = match rss_out {
        Some(_) => {
            let mut c = Command::new("/usr/bin/time");
            c.arg("-f").arg("%M").arg("-o").arg(&tmp_rss).arg("git");
            c
        }
        None => Command::new("git"),
    };
    let measuring = rss_out.is_some();
    let out = cmd
        .args(args)
        .current_dir(cwd)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    if measuring && let Some(r) = rss_out {
        let kib: u64 = std::fs::read_to_string(&tmp_rss)
            .ok()
            .and_then(|t| t.trim().lines().last().and_then(|l| l.trim().parse().ok()))
            .unwrap_or(0);
        *r = (*r).max(kib);
    }
    String::from_utf8(out.stdout).unwrap()
}

fn files_for(i: usize) -> Vec<(String, Vec<u8>)> {
    vec![
        (
            "configmap.yaml".into(),
            format!("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{i}\n  namespace: default\ndata:\n  index: \"{i}\"\n").into_bytes(),
        ),
        (
            "namespace.yaml".into(),
            format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-{i}\n").into_bytes(),
        ),
    ]
}

fn dir_for(i: usize) -> String {
    format!("worker-1/resources/default/widget/request-{i}/instance-configure/5058f")
}

fn commits(bare: &Path) -> usize {
    git(bare, &["rev-list", "--count", "main"])
        .trim()
        .parse()
        .unwrap()
}

fn verify(bare: &Path, n: usize) {
    let listing = git(bare, &["ls-tree", "-r", "--name-only", "main"]);
    let count = listing.lines().count();
    assert_eq!(count, 2 * n, "expected {} files, found {count}", 2 * n);
}

fn run_plinth(n: usize) {
    let tmp = tempfile::tempdir().unwrap();
    let bare = tmp.path().join("state.git");
    init_bare(&bare, "main").unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let elapsed = rt.block_on(async {
        let cfg = GitConfig::new(
            format!("file://{}", bare.display()),
            "main",
            tmp.path().join("work"),
        );
        let window = cfg.batch_window;
        let store = StateStore::open(StoreConfig::Git(cfg)).await.unwrap();
        let start = Instant::now();
        let mut tasks = Vec::with_capacity(n);
        for i in 0..n {
            let store = store.clone();
            tasks.push(tokio::spawn(async move {
                store
                    .write(WriteRequest {
                        name: format!("widget-request-{i}-instance-configure"),
                        ops: vec![WriteOp::ReplaceDir {
                            dir: dir_for(i),
                            files: files_for(i),
                        }],
                    })
                    .await
            }));
        }
        for t in tasks {
            t.await.unwrap().unwrap();
        }
        let e = start.elapsed();
        eprintln!("(plinth batch window {window:?})");
        e
    });
    verify(&bare, n);
    println!(
        "plinth  writes={n} converge_ms={} commits={} peak_rss_kib={} (writer process VmHWM)",
        elapsed.as_millis(),
        commits(&bare) - 1,
        vm_hwm_kib()
    );
}

fn run_cli(n: usize) {
    let tmp = tempfile::tempdir().unwrap();
    let bare = tmp.path().join("state.git");
    init_bare(&bare, "main").unwrap();
    let work = tmp.path().join("work");
    let url = format!("file://{}", bare.display());
    let start = Instant::now();
    git(
        tmp.path(),
        &[
            "clone",
            "-q",
            "--depth=1",
            "--single-branch",
            "--no-tags",
            "--branch",
            "main",
            &url,
            work.to_str().unwrap(),
        ],
    );
    let mut last_fetch = Instant::now();
    let mut processes = 1;
    for i in 0..n {
        processes += cli_write(&work, i, &mut last_fetch, None);
    }
    let elapsed = start.elapsed();
    verify(&bare, n);
    let made = commits(&bare) - 1;
    // Peak RSS of the git processes, sampled over 20 further writes (not timed).
    let mut rss = 0;
    for i in n..n + 20 {
        cli_write(&work, i, &mut last_fetch, Some(&mut rss));
    }
    println!(
        "git-cli writes={n} converge_ms={} commits={made} peak_rss_kib={rss} (largest single git process; {processes} git processes)",
        elapsed.as_millis(),
    );
}

/// One WorkPlacement write the way Kratix does it; returns the number of git processes run.
fn cli_write(work: &Path, i: usize, last_fetch: &mut Instant, mut rss: Option<&mut u64>) -> usize {
    let mut processes = 0;
    let mut run = |args: &[&str]| {
        processes += 1;
        git_measured(work, args, rss.as_deref_mut())
    };
    // Kratix's Reset(): fetch at most every git.minimumFetchInterval (5 s), then reset+clean.
    if last_fetch.elapsed() >= Duration::from_secs(5) {
        run(&[
            "fetch",
            "-q",
            "origin",
            "main",
            "--depth",
            "1",
            "--no-tags",
            "--force",
            "--prune",
        ]);
        *last_fetch = Instant::now();
    }
    run(&["reset", "-q", "--hard", "origin/main"]);
    run(&["clean", "-q", "-ffdx"]);
    let dir = dir_for(i);
    let abs = work.join(&dir);
    if abs.exists() {
        run(&["rm", "-q", "-r", "--", &dir]);
    }
    std::fs::create_dir_all(&abs).unwrap();
    for (name, content) in files_for(i) {
        std::fs::write(abs.join(name), content).unwrap();
    }
    run(&["add", "--", &dir]);
    let msg = format!("Update from: widget-request-{i}-instance-configure");
    run(&[
        "-c",
        "user.name=kratix",
        "-c",
        "user.email=",
        "commit",
        "-q",
        "-m",
        &msg,
        "--author=kratix <>",
    ]);
    run(&["push", "-q", "origin", "main"]);
    processes
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n = args
        .iter()
        .position(|a| a == "--writes")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000usize);
    match args
        .iter()
        .position(|a| a == "--mode")
        .and_then(|i| args.get(i + 1))
    {
        Some(m) if m == "plinth" => run_plinth(n),
        Some(m) if m == "cli" => run_cli(n),
        _ => {
            // Each mode in its own process, so peak RSS is per mode.
            let me = std::env::current_exe().unwrap();
            for mode in ["plinth", "cli"] {
                let st = Command::new(&me)
                    .args(["--mode", mode, "--writes", &n.to_string()])
                    .status()
                    .unwrap();
                assert!(st.success(), "{mode} run failed");
            }
        }
    }
}
