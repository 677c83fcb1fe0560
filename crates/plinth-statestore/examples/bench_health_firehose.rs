//! The health firehose: 50 resources checked every minute for 7 days (504,000 check runs),
//! written to a Git repository (a) naively, one commit per run, and (b) through Plinth's
//! health writer with its defaults (no-op suppression, 10 s flush window, 1 h heartbeat).
//!
//! Time is simulated: each check finishes 1–8 s after the minute (fixed per resource),
//! and the writer's ledger is driven with those times. Every commit is a real commit in a
//! real repository, made with `git fast-import` (one commit per run for (a), one commit per
//! flushed batch for (b), as the Git worker commits a batch's requests together); the
//! repository size is `git count-objects` after the import, before and after `git gc`.
//!
//! Two flapping models, each on 1% of runs: `flip` (the run's state differs from the
//! previous run's and stays so) and `blip` (the run reports unhealthy, the next run is
//! healthy again: two changes per blip), plus `quiet` (no change at all: what remains is
//! the first write and the hourly heartbeat).
//!
//! `cargo run --release -p plinth-statestore --example bench_health_firehose`
//! (`-- --days N`, `-- --resources N`, `-- --skip-naive`, `-- --no-gc`).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use plinth_api::HealthState;
use plinth_statestore::health::{HealthLedger, HealthReport, HealthWriterConfig, RecordKey};

/// A small deterministic generator (SplitMix64), so every run simulates the same week.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 10_000 < percent * 100
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Model {
    Flip,
    Blip,
    Quiet,
}

struct Args {
    days: i64,
    resources: usize,
    skip_naive: bool,
    gc: bool,
}

fn args() -> Args {
    let mut a = Args {
        days: 7,
        resources: 50,
        skip_naive: false,
        gc: true,
    };
    let v: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < v.len() {
        match v[i].as_str() {
            "--days" => {
                a.days = v[i + 1].parse().expect("--days N");
                i += 1;
            }
            "--resources" => {
                a.resources = v[i + 1].parse().expect("--resources N");
                i += 1;
            }
            "--skip-naive" => a.skip_naive = true,
            "--no-gc" => a.gc = false,
            other => panic!("unknown argument {other}"),
        }
        i += 1;
    }
    a
}

fn key(i: usize) -> RecordKey {
    RecordKey {
        namespace: "default".into(),
        promise: "redis".into(),
        request: format!("cache-{i:03}"),
        definition_namespace: "default".into(),
        definition: "liveness".into(),
    }
}

/// One check run: (seconds since start, resource, state).
type Run = (i64, usize, HealthState);

/// The week of runs in time order.
fn runs(a: &Args, model: Model) -> Vec<Run> {
    let mut rng = Rng(42);
    let offsets: Vec<i64> = (0..a.resources)
        .map(|_| 1 + (rng.next() % 8) as i64)
        .collect();
    let mut order: Vec<usize> = (0..a.resources).collect();
    order.sort_by_key(|&r| offsets[r]);
    let mut state = vec![HealthState::Healthy; a.resources];
    let mut out = Vec::with_capacity(a.days as usize * 1440 * a.resources);
    for minute in 0..a.days * 1440 {
        for &r in &order {
            let s = match model {
                Model::Flip => {
                    if rng.chance(1) {
                        state[r] = if state[r] == HealthState::Healthy {
                            HealthState::Unhealthy
                        } else {
                            HealthState::Healthy
                        };
                    }
                    state[r]
                }
                Model::Quiet => HealthState::Healthy,
                Model::Blip => {
                    if rng.chance(1) {
                        HealthState::Unhealthy
                    } else {
                        HealthState::Healthy
                    }
                }
            };
            out.push((minute * 60 + offsets[r], r, s));
        }
    }
    out
}

/// A commit for fast-import: (unix seconds, message, files put / deleted).
struct Commit {
    at: i64,
    message: String,
    files: Vec<(String, Vec<u8>)>,
}

/// Imports the commits into a new repository; returns (commits, bytes before gc, after gc).
fn import(dir: &Path, commits: impl Iterator<Item = Commit>, gc: bool) -> (u64, u64, Option<u64>) {
    let _ = std::fs::remove_dir_all(dir);
    let git = |args: &[&str]| {
        let s = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .stdout(Stdio::null())
            .status()
            .expect("git runs");
        assert!(s.success(), "git {args:?}");
    };
    std::fs::create_dir_all(dir).unwrap();
    git(&["init", "-q", "--bare"]);
    let mut child = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["fast-import", "--quiet", "--done"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("git fast-import runs");
    let mut n = 0u64;
    {
        let mut w = std::io::BufWriter::new(child.stdin.take().unwrap());
        for c in commits {
            n += 1;
            writeln!(w, "commit refs/heads/main").unwrap();
            writeln!(w, "committer Plinth <plinth@localhost> {} +0000", c.at).unwrap();
            writeln!(w, "data {}\n{}", c.message.len(), c.message).unwrap();
            // Successive commits on one branch in one stream chain on their own.
            for (path, content) in &c.files {
                writeln!(w, "M 100644 inline {path}\ndata {}", content.len()).unwrap();
                w.write_all(content).unwrap();
                writeln!(w).unwrap();
            }
            writeln!(w).unwrap();
        }
        writeln!(w, "done").unwrap();
    }
    assert!(child.wait().unwrap().success(), "fast-import failed");
    let size = || dir_size(dir);
    let before = size();
    let after = gc.then(|| {
        git(&["gc", "-q", "--prune=now"]);
        size()
    });
    (n, before, after)
}

fn dir_size(p: &Path) -> u64 {
    let mut total = 0;
    for e in std::fs::read_dir(p).unwrap().flatten() {
        let m = e.metadata().unwrap();
        total += if m.is_dir() {
            dir_size(&e.path())
        } else {
            m.len()
        };
    }
    total
}

fn report_of(run: &Run, start: i64) -> HealthReport {
    HealthReport {
        key: key(run.1),
        state: run.2,
        details: None,
        run_at: Timestamp::from_second(start + run.0).unwrap(),
        schedule: None,
    }
}

fn naive(runs: &[Run], start: i64) -> impl Iterator<Item = Commit> + '_ {
    runs.iter().map(move |r| {
        let rep = report_of(r, start);
        Commit {
            at: start + r.0,
            message: format!("Update from: health {}", rep.key),
            files: vec![(
                format!("health/{}", rep.key.path()),
                rep.document(Duration::ZERO).into(),
            )],
        }
    })
}

/// Drives the ledger with the simulated clock; one commit per flushed batch.
fn plinth(runs: &[Run], start: i64) -> (Vec<Commit>, u64) {
    let ts = |s: i64| Timestamp::from_second(start + s).unwrap();
    let mut ledger = HealthLedger::new(HealthWriterConfig::default());
    let mut commits = Vec::new();
    let flush = |ledger: &mut HealthLedger, until: i64, commits: &mut Vec<Commit>| {
        while let Some(at) = ledger.due_at().filter(|at| at.as_second() <= start + until) {
            let batch = ledger.take_due(at).expect("due");
            ledger.succeeded();
            let names: Vec<String> = batch.entries.iter().map(|e| e.key.to_string()).collect();
            let head = names.iter().take(3).cloned().collect::<Vec<_>>().join(", ");
            let more = names.len().saturating_sub(3);
            let mut message = format!("Update from: health {head}");
            if more > 0 {
                message.push_str(&format!(" (+{more} more)\n\n{}", names.join("\n")));
            }
            let files = batch
                .entries
                .iter()
                .map(|e| {
                    let r = e.report.as_ref().expect("no deletes in this benchmark");
                    (
                        format!("health/{}", e.key.path()),
                        r.document(Duration::ZERO).into(),
                    )
                })
                .collect();
            commits.push(Commit {
                at: at.as_second(),
                message,
                files,
            });
        }
    };
    let mut suppressed = 0u64;
    for r in runs {
        flush(&mut ledger, r.0, &mut commits);
        if ledger.report(report_of(r, start), ts(r.0))
            == plinth_statestore::health::Disposition::Suppressed
        {
            suppressed += 1;
        }
    }
    flush(&mut ledger, i64::MAX / 4, &mut commits);
    (commits, suppressed)
}

fn mib(b: u64) -> String {
    format!("{:.2} MiB", b as f64 / (1024.0 * 1024.0))
}

fn main() {
    let a = args();
    let start = 1_800_000_000;
    let tmp = std::env::temp_dir().join(format!("plinth-firehose-{}", std::process::id()));
    println!(
        "firehose: {} resources x 1 check/min x {} days = {} runs; flapping on 1% of runs",
        a.resources,
        a.days,
        a.days * 1440 * a.resources as i64
    );
    for model in [Model::Flip, Model::Blip, Model::Quiet] {
        let name = match model {
            Model::Flip => "flip (state changes on 1% of runs)",
            Model::Blip => "blip (1% of runs unhealthy, next run healthy)",
            Model::Quiet => "quiet (nothing changes; only heartbeats)",
        };
        let runs = runs(&a, model);
        let changes = runs
            .iter()
            .scan(vec![HealthState::Healthy; a.resources], |s, r| {
                let c = s[r.1] != r.2;
                s[r.1] = r.2;
                Some(c)
            })
            .filter(|c| *c)
            .count();
        println!("\nmodel: {name}; {changes} state changes");
        let t = Instant::now();
        let (commits, suppressed) = plinth(&runs, start);
        let sim = t.elapsed();
        let t = Instant::now();
        let (n_b, before_b, after_b) = import(&tmp.join("plinth"), commits.into_iter(), a.gc);
        println!(
            "  (b) plinth writer: {n_b} commits, {suppressed} runs suppressed, repo {} ({} after gc); ledger {:.2?}, git import {:.2?}",
            mib(before_b),
            after_b.map(mib).unwrap_or("-".into()),
            sim,
            t.elapsed()
        );
        if a.skip_naive || model != Model::Flip {
            continue;
        }
        let t = Instant::now();
        let (n_a, before_a, after_a) = import(&tmp.join("naive"), naive(&runs, start), a.gc);
        println!(
            "  (a) naive writer:  {n_a} commits, repo {} ({} after gc); git import {:.2?}",
            mib(before_a),
            after_a.map(mib).unwrap_or("-".into()),
            t.elapsed()
        );
        println!("  (b)/(a) commits: {:.3}%", 100.0 * n_b as f64 / n_a as f64);
    }
    let _ = std::fs::remove_dir_all(&tmp);
}
