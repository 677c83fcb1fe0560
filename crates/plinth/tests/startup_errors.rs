//! Start-up errors as a user sees them: the error and its causes on stderr, exit status 1,
//! and never a backtrace, even with `RUST_BACKTRACE=1` (a locked data directory, a bad
//! image map, a port already in use). Also `plinth help --help`, which must not fail.

use std::net::TcpListener;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn plinth(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_plinth"))
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .env("RUST_LIB_BACKTRACE", "1")
        .output()
        .expect("run plinth")
}

/// Asserts a clean start-up failure whose message contains `needle`.
fn assert_clean_failure(out: &Output, needle: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "exit status; stderr:\n{stderr}");
    assert!(stderr.contains("error: "), "{stderr}");
    assert!(stderr.contains(needle), "expected {needle:?} in:\n{stderr}");
    for trace in ["backtrace", "Backtrace", "panicked", "std::rt::lang_start"] {
        assert!(!stderr.contains(trace), "{trace:?} printed:\n{stderr}");
    }
}

#[test]
fn a_locked_data_dir_fails_without_a_backtrace() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();
    let mut first = Command::new(env!("CARGO_BIN_EXE_plinth"))
        .args(["up", "--data-dir", data, "--listen", "127.0.0.1:0"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !dir.path().join("kubeconfig").exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = plinth(&["up", "--data-dir", data, "--listen", "127.0.0.1:0"]);
    first.kill().ok();
    first.wait().ok();
    assert_clean_failure(&out, "in use by another Plinth process");
}

#[test]
fn a_bad_image_map_fails_without_a_backtrace() {
    let dir = tempfile::tempdir().unwrap();
    let map = dir.path().join("images.yaml");
    std::fs::write(&map, "images: [this is: not: valid\n").unwrap();
    let data = dir.path().join("data");
    let out = plinth(&[
        "up",
        "--data-dir",
        data.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--image-map",
        map.to_str().unwrap(),
    ]);
    assert_clean_failure(&out, "images.yaml");
}

#[test]
fn a_port_in_use_fails_without_a_backtrace_or_a_half_made_data_dir() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    // A data dir that does not exist yet is not created.
    let fresh = dir.path().join("fresh");
    let out = plinth(&[
        "up",
        "--data-dir",
        fresh.to_str().unwrap(),
        "--listen",
        &addr,
    ]);
    assert_clean_failure(&out, &addr);
    assert!(
        !fresh.exists(),
        "a failed start created {}",
        fresh.display()
    );
    // An existing directory is left with what it had.
    let kept = dir.path().join("kept");
    std::fs::create_dir(&kept).unwrap();
    std::fs::write(kept.join("notes.txt"), "mine").unwrap();
    let out = plinth(&[
        "up",
        "--data-dir",
        kept.to_str().unwrap(),
        "--listen",
        &addr,
    ]);
    assert_clean_failure(&out, &addr);
    let left: Vec<_> = std::fs::read_dir(&kept)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(left, ["notes.txt"]);
}

#[test]
fn help_of_help_succeeds() {
    let out = plinth(&["help", "--help"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("Usage: plinth"), "{stdout}");
}

#[test]
fn up_help_says_where_the_kubeconfig_goes() {
    let out = plinth(&["up", "--help"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("<data dir>/kubeconfig")
            && stdout.contains("~/.local/share/plinth/kubeconfig")
            && stdout.contains("Examples:"),
        "{stdout}"
    );
    // `-h` is the short form: the examples stay, the long description does not.
    let short = plinth(&["up", "-h"]);
    let short = String::from_utf8_lossy(&short.stdout);
    assert!(
        short.contains("Examples:") && !short.contains("<data dir>/kubeconfig"),
        "{short}"
    );
}
