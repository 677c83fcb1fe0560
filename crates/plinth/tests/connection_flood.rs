//! `plinth up` with a small open-file limit (`prlimit --nofile=300`) under a flood of idle
//! TCP connections on loopback (400, more than the limit allows): the API keeps
//! answering, the process keeps running, and its log stays small.

use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
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

#[test]
fn idle_connections_beyond_the_file_limit_neither_stop_the_api_nor_fill_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let log_path = dir.path().join("plinth.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let child = Command::new("prlimit")
        .arg("--nofile=300:300")
        .arg(env!("CARGO_BIN_EXE_plinth"))
        .args(["up", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data)
        .env("RUST_BACKTRACE", "0")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start prlimit plinth up");
    let mut plinth = Killed(child);
    let ca = data.join("tls").join("ca.crt");
    let deadline = Instant::now() + Duration::from_secs(120);
    let addr = loop {
        if let Ok(Some(status)) = plinth.0.try_wait() {
            panic!(
                "plinth exited with {status}: {}",
                std::fs::read_to_string(&log_path).unwrap_or_default()
            );
        }
        if let Some(addr) = server_addr(&data.join("kubeconfig"))
            && readyz(&addr, &ca, 5) == "200"
        {
            break addr;
        }
        assert!(Instant::now() < deadline, "plinth not ready in 120 s");
        std::thread::sleep(Duration::from_millis(200));
    };

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
        &text[text.len().saturating_sub(3000)..]
    );
    drop(idle);
    assert_eq!(readyz(&addr, &ca, 30), "200", "/readyz after the flood");
}
