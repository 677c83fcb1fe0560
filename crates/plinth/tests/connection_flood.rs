//! `plinth up` with a small open-file limit (`prlimit --nofile=300`) under a flood of idle
//! TCP connections on loopback: with 400 (more than the limit allows) the API keeps
//! answering, the process keeps running and its log stays small; with the limit lowered
//! to just above what the process has open, accepting fails with EMFILE and the accept
//! loop backs off and logs rarely instead of spinning.

use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn server_addr(kubeconfig: &Path) -> Option<String> {
    let kc = std::fs::read_to_string(kubeconfig).ok()?;
    kc.lines()
        .find_map(|l| l.trim().strip_prefix("server: https://"))
        .map(str::to_string)
}

/// `/readyz` with curl (the platform's CA), its HTTP status or curl's failure.
fn readyz(addr: &str, ca: &Path, max_secs: u64) -> String {
    let out = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time"])
        .arg(max_secs.to_string())
        .arg("--cacert")
        .arg(ca)
        .arg(format!("https://{addr}/readyz"))
        .output()
        .expect("run curl");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `plinth up` under `prlimit --nofile=300`, once `/readyz` answers: the process, its
/// HTTPS address, the CA file and the log file.
fn start_limited(dir: &Path) -> (Killed, String, std::path::PathBuf, std::path::PathBuf) {
    let data = dir.join("data");
    let log_path = dir.join("plinth.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let child = Command::new("prlimit")
        .arg("--nofile=300:300")
        .arg(env!("CARGO_BIN_EXE_plinth"))
        .args(["up", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data)
        .env("RUST_BACKTRACE", "0")
        .stdout(std::fs::File::create(dir.join("plinth.out")).unwrap())
        .stderr(log)
        .spawn()
        .expect("start prlimit plinth up");
    let mut plinth = Killed(child);
    let ca = data.join("tls").join("ca.crt");
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Ok(Some(status)) = plinth.0.try_wait() {
            panic!(
                "plinth exited with {status}: {}",
                std::fs::read_to_string(&log_path).unwrap_or_default()
            );
        }
        // `plinth up` prints this once its start-up (bootstrap included) is done.
        let started = std::fs::read_to_string(dir.join("plinth.out"))
            .unwrap_or_default()
            .contains("Press Ctrl-C to stop.");
        if let Some(addr) = server_addr(&data.join("kubeconfig"))
            && started
            && readyz(&addr, &ca, 5) == "200"
        {
            return (plinth, addr, ca, log_path);
        }
        assert!(Instant::now() < deadline, "plinth not ready in 120 s");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn tail(text: &str) -> &str {
    let mut at = text.len().saturating_sub(3000);
    while !text.is_char_boundary(at) {
        at += 1;
    }
    &text[at..]
}

#[test]
fn out_of_file_descriptors_the_accept_loop_backs_off_and_logs_rarely() {
    let dir = tempfile::tempdir().unwrap();
    let (plinth, addr, ca, log_path) = start_limited(dir.path());
    // Leave the process only a few descriptors more than it has open, below its
    // connection cap (150), so accepting fails with EMFILE.
    let pid = plinth.0.id();
    let open = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count();
    let limit = open + 8;
    let status = Command::new("prlimit")
        .arg(format!("--pid={pid}"))
        .arg(format!("--nofile={limit}:{limit}"))
        .status()
        .unwrap();
    assert!(status.success(), "prlimit --pid");
    let log_before = std::fs::metadata(&log_path).unwrap().len();
    let flood_started = Instant::now();
    let idle: Vec<TcpStream> = (0..40)
        .map(|i| {
            TcpStream::connect(&addr).unwrap_or_else(|e| {
                panic!(
                    "connection {i}: {e}:\n{}",
                    tail(&std::fs::read_to_string(&log_path).unwrap_or_default())
                )
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(5));
    let text = std::fs::read_to_string(&log_path).unwrap_or_default();
    let new = &text[usize::try_from(log_before).unwrap()..];
    let secs = flood_started.elapsed().as_secs() + 1;
    let accept_lines = new
        .lines()
        .filter(|l| l.contains("accepting a connection failed"))
        .count() as u64;
    // One accept-error line per 10 s at most, and the whole log (the store writer also
    // meets EMFILE) a few hundred bytes a second, where an unbounded loop writes MiBs.
    assert!(
        accept_lines <= secs / 10 + 1 && (new.len() as u64) < 1024 * secs,
        "{accept_lines} accept-error lines, {} bytes of log in {secs} s:\n{}",
        new.len(),
        tail(new)
    );
    assert!(
        accept_lines >= 1,
        "the descriptor limit was not reached (no accept error logged):\n{}",
        tail(&text)
    );
    drop(idle);
    // With the connections gone the API answers again.
    let deadline = Instant::now() + Duration::from_secs(60);
    while readyz(&addr, &ca, 10) != "200" {
        assert!(
            Instant::now() < deadline,
            "/readyz after the flood:\n{}",
            tail(&std::fs::read_to_string(&log_path).unwrap_or_default())
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn idle_connections_beyond_the_file_limit_neither_stop_the_api_nor_fill_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let (mut plinth, addr, ca, log_path) = start_limited(dir.path());
    let log_before = std::fs::metadata(&log_path).unwrap().len();
    let flood_started = Instant::now();
    let idle: Vec<TcpStream> = (0..400)
        .map(|_| TcpStream::connect(&addr).expect("loopback connect"))
        .collect();
    // Long enough for an unbounded accept loop to write megabytes.
    std::thread::sleep(Duration::from_secs(3));
    // A real client gets an answer while every idle connection is still held: the
    // silent ones ahead of it are closed after the handshake timeout (10 s), at most
    // half the file limit at a time.
    let status = readyz(&addr, &ca, 90);
    assert_eq!(status, "200", "/readyz during the flood");
    let waited = flood_started.elapsed();
    assert!(
        plinth.0.try_wait().unwrap().is_none(),
        "plinth exited during the flood"
    );
    let grown = std::fs::metadata(&log_path).unwrap().len() - log_before;
    let text = std::fs::read_to_string(&log_path).unwrap_or_default();
    assert!(
        grown < 32 * 1024,
        "the log grew by {grown} bytes in {waited:?} of flood:\n{}",
        tail(&text)
    );
    drop(idle);
    assert_eq!(readyz(&addr, &ca, 30), "200", "/readyz after the flood");
}
