//! The web view of `plinth up` in a real browser (headless Chromium, Debian package
//! `chromium`): the one-time login link gives a session, the rendered DOM shows the
//! request created moments before, the map shows its WorkPlacement and commit, and a
//! screenshot is saved as a test artefact (`target/tmp/web-view*.png`). Without the
//! bearer token or a session the view answers 401; the login link works once; the
//! events stream reports a change when a request appears.

use crate::support;
use crate::view;

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::Plinth;

/// The Chromium binary: `PLINTH_CHROMIUM`, else `chromium`/`chromium-browser`/`google-chrome`
/// on PATH. None when there is none.
fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("PLINTH_CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .flat_map(|n| std::env::split_paths(&path).map(move |d| d.join(n)))
        .find(|p| p.is_file())
}

/// Runs headless Chromium with a profile in `profile` (cookies persist between runs).
fn browse(chrome: &Path, profile: &Path, args: &[&str], url: &str) -> String {
    let out = Command::new(chrome)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--ignore-certificate-errors",
            "--no-first-run",
            "--window-size=1400,900",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .output()
        .expect("run chromium");
    assert!(
        out.status.success(),
        "chromium failed on {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `curl -k` with extra arguments; returns (HTTP status, body).
fn curl(args: &[&str], url: &str) -> (u16, String) {
    let out = Command::new("curl")
        .args(["-k", "-s", "-w", "\n%{http_code}"])
        .args(args)
        .arg(url)
        .output()
        .expect("run curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

fn admin_token(p: &Plinth) -> String {
    let kc = std::fs::read_to_string(&p.kubeconfig).unwrap();
    kc.lines()
        .find_map(|l| l.trim().strip_prefix("token: "))
        .expect("token in the kubeconfig")
        .trim_matches('"')
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_view_in_headless_chromium_shows_a_new_request() {
    let Some(chrome) = chromium() else {
        let msg = "chromium not found (install the Debian package `chromium`, \
                   scripts/install-test-deps.sh, or set PLINTH_CHROMIUM)";
        if std::env::var_os("CI").is_some() {
            panic!("{msg}");
        }
        eprintln!("SKIPPED web_view_in_headless_chromium_shows_a_new_request: {msg}");
        return;
    };
    let scripts = tempfile::tempdir().unwrap();
    let map = view::image_map(scripts.path());
    let p = Plinth::up(&["--image-map", map.to_str().unwrap()]).await;
    let login = view::login_url(&p);
    let base = login.split("/ui/").next().unwrap().to_string();
    view::install(&p).await;
    let version = view::request_written(&p, "from-the-browser").await;

    // Without a session or the token: 401, and nothing of the platform shown.
    let (code, body) = curl(&[], &format!("{base}/ui/"));
    assert_eq!(code, 401, "{body}");
    assert!(!body.contains("from-the-browser"));
    // The API's bearer token is accepted.
    let bearer = format!("Authorization: Bearer {}", admin_token(&p));
    let (code, body) = curl(&["-H", &bearer], &format!("{base}/ui/"));
    assert_eq!(code, 200, "{body}");
    assert!(
        body.contains("data-request=\"default/from-the-browser\""),
        "{body}"
    );

    // The browser opens the login link: the DOM shows the request created moments before.
    let profile = tempfile::tempdir().unwrap();
    let dom = browse(&chrome, profile.path(), &["--dump-dom"], &login);
    assert!(
        dom.contains("data-request=\"default/from-the-browser\""),
        "request missing from the rendered DOM:\n{dom}"
    );
    assert!(dom.contains("data-promise=\"gadget\""), "{dom}");

    // The link works once.
    let (code, _) = curl(&[], &login);
    assert_eq!(code, 401, "a used login link must not log in again");

    // The session cookie (kept in the profile) opens the map and the request page.
    let map_url = format!("{base}/ui/promise/gadget");
    let dom = browse(&chrome, profile.path(), &["--dump-dom"], &map_url);
    assert!(
        dom.contains("WorkPlacement"),
        "map without the WorkPlacement:\n{dom}"
    );
    assert!(
        dom.contains(&format!("commit {}", &version[..12])),
        "map without the commit:\n{dom}"
    );
    assert!(
        dom.contains("ConfigMap default/gadget-from-the-browser"),
        "map without the object:\n{dom}"
    );
    let req_url = format!("{base}/ui/request/gadget/default/from-the-browser");
    let dom = browse(&chrome, profile.path(), &["--dump-dom"], &req_url);
    assert!(dom.contains("class=\"health-chart\""), "{dom}");
    assert!(
        dom.contains("gadget-from-the-browser"),
        "files and logs:\n{dom}"
    );
    assert!(
        dom.contains("gadget pipeline wrote gadget-from-the-browser"),
        "pipeline log missing:\n{dom}"
    );
    assert!(dom.contains("at commit"), "{dom}");
    // A file's content is not in the page; it is loaded from its address when opened,
    // and only files of the request's own directory are served there.
    let src = dom
        .split("data-src=\"")
        .nth(1)
        .and_then(|t| t.split('"').next())
        .unwrap_or_else(|| panic!("no file entry:\n{dom}"))
        .replace("&amp;", "&");
    let (code, body) = curl(&["-H", &bearer], &format!("{base}{src}"));
    assert_eq!(code, 200, "{src}: {body}");
    assert!(body.contains("kind:"), "{src}: {body}");
    let (path_start, _) = src.split_once("path=").unwrap();
    let outside = format!("{path_start}path=local%2Fdependencies%2Fkratix-canary-configmap.yaml");
    let (code, body) = curl(&["-H", &bearer], &format!("{base}{outside}"));
    assert_eq!(code, 404, "{outside}: {body}");
    for bad in [
        "%00%2Fsecret.yaml",
        "%5Csecret.yaml",
        "..%2F..%2Fsecret.yaml",
    ] {
        // Appended to the path parameter, inside the request's directory.
        let url = format!("{base}{}", src.replacen("&at=", &format!("{bad}&at="), 1));
        let (code, body) = curl(&["-H", &bearer], &url);
        assert_eq!(code, 404, "{url}: {body}");
    }

    // Screenshots as test artefacts.
    let artefacts = Path::new(env!("CARGO_TARGET_TMPDIR"));
    for (file, url) in [
        ("web-view.png", format!("{base}/ui/")),
        ("web-view-map.png", map_url.clone()),
    ] {
        let shot = artefacts.join(file);
        let _ = std::fs::remove_file(&shot);
        browse(
            &chrome,
            profile.path(),
            &[&format!("--screenshot={}", shot.display())],
            &url,
        );
        let png = std::fs::read(&shot).unwrap_or_default();
        assert!(
            png.starts_with(b"\x89PNG") && png.len() > 10_000,
            "no screenshot at {}",
            shot.display()
        );
        eprintln!("screenshot: {}", shot.display());
    }

    // Live updates: the events stream reports a change when a request appears.
    let mut events = Command::new("curl")
        .args(["-k", "-s", "-N", "-H", &bearer])
        .arg(format!("{base}/ui/events"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = events.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        let mut buf = [0u8; 512];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0
                || tx
                    .send(String::from_utf8_lossy(&buf[..n]).into_owned())
                    .is_err()
            {
                break;
            }
        }
    });
    // Give the stream time to finish its first listing, then change something.
    std::thread::sleep(Duration::from_secs(2));
    while rx.try_recv().is_ok() {}
    view::apply(&p, "live.yaml", &view::request("live"));
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = String::new();
    while Instant::now() < deadline && !seen.contains("data: change") {
        if let Ok(s) = rx.recv_timeout(Duration::from_millis(200)) {
            seen.push_str(&s);
        }
    }
    let _ = events.kill();
    let _ = events.wait();
    assert!(seen.contains("data: change"), "no change event: {seen:?}");
}
