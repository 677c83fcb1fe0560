//! Secret values a pipeline writes are never displayed: the web view's "Files written"
//! and `plinth diff` show each key of a Secret's `data` and `stringData` with a marker
//! holding a short hash of its value (different values, different markers), never the
//! value. Also `plinth diff`'s exit status, as `kubectl diff`'s: 0 without changes, 1
//! with changes, 2 on an error.

use crate::support;
use crate::view;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use base64::Engine as _;
use support::Plinth;

/// A pipeline writing a ConfigMap and a Secret whose values carry `tag`.
fn script(dir: &Path, tag: &str) -> String {
    let path = dir.join(format!("secret-{tag}.sh"));
    let token = base64::engine::general_purpose::STANDARD.encode(format!("token-{tag}-plain"));
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\nset -eu\ncat > /kratix/output/secret.yaml <<EOF\n\
             apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds-$KRATIX_OBJECT_NAME\n  namespace: default\n\
             stringData:\n  password: password-{tag}-plain\ndata:\n  token: {token}\nEOF\n\
             cat > /kratix/output/configmap.yaml <<EOF\n\
             apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-$KRATIX_OBJECT_NAME\n  namespace: default\n\
             data:\n  visible: shown-{tag}\nEOF\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path.display().to_string()
}

fn token_b64(tag: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(format!("token-{tag}-plain"))
}

fn admin_token(p: &Plinth) -> String {
    let kc = std::fs::read_to_string(&p.kubeconfig).unwrap();
    kc.lines()
        .find_map(|l| l.trim().strip_prefix("token: "))
        .expect("token in the kubeconfig")
        .trim_matches('"')
        .to_string()
}

fn plinth(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_plinth"))
        .args(args)
        .env_remove("PLINTH_IMAGE_MAP")
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("run plinth")
}

fn shows(o: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn assert_no_plain_values(text: &str, tag: &str) {
    for plain in [
        format!("password-{tag}-plain"),
        format!("token-{tag}-plain"),
        token_b64(tag),
    ] {
        assert!(!text.contains(&plain), "{plain} shown:\n{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secret_values_are_redacted_in_the_web_view_and_in_plinth_diff() {
    // Outside /tmp: the pipeline sandbox gives each container a private /tmp.
    let scripts = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let v2_image = view::IMAGE.replace(":v1", ":v2");
    let map = scripts.path().join("images.yaml");
    std::fs::write(
        &map,
        format!(
            "images:\n  - image: \"{}\"\n    command: [\"{}\"]\n  - image: \"{v2_image}\"\n    command: [\"{}\"]\n",
            view::IMAGE,
            script(scripts.path(), "v1"),
            script(scripts.path(), "v2"),
        ),
    )
    .unwrap();
    let p = Plinth::up(&["--image-map", map.to_str().unwrap()]).await;
    view::install(&p).await;
    view::request_written(&p, "vault").await;

    // The web view's request page: keys and markers, no values; other files as written.
    let base = view::login_url(&p)
        .split("/ui/")
        .next()
        .unwrap()
        .to_string();
    let bearer = format!("Authorization: Bearer {}", admin_token(&p));
    let get = |url: &str| {
        let out = Command::new("curl")
            .args(["-k", "-s", "-f", "-H", &bearer, url])
            .output()
            .unwrap();
        let body = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "GET {url}: {body}");
        body
    };
    let page = get(&format!("{base}/ui/request/gadget/default/vault"));
    assert!(page.contains("Files written"), "{page}");
    // What the page shows of the files: inline, or behind the links it loads them from.
    let mut shown = page.clone();
    for link in page.split("/ui/file/").skip(1) {
        let end = link.find(['"', '\'', ' ', '<']).unwrap_or(link.len());
        let url = format!("{base}/ui/file/{}", link[..end].replace("&amp;", "&"));
        shown.push_str(&get(&url));
    }
    let shown = shown.replace("&lt;", "<");
    assert!(
        shown.contains("visible: shown-v1"),
        "the ConfigMap as written:\n{shown}"
    );
    assert!(shown.contains("password: <redacted sha256:"), "{shown}");
    assert!(shown.contains("token: <redacted sha256:"), "{shown}");
    assert_no_plain_values(&shown, "v1");

    // plinth diff: unchanged → 0; v2 → 1, the changed values as changed markers only.
    let dir = p.dir.path();
    let v1 = dir.join("promise.yaml");
    let v2 = dir.join("promise-v2.yaml");
    std::fs::write(&v2, view::promise().replace(view::IMAGE, &v2_image)).unwrap();
    let kc = p.kubeconfig.to_str().unwrap();
    let diff = |promise: &Path| {
        plinth(&[
            "diff",
            promise.to_str().unwrap(),
            "--kubeconfig",
            kc,
            "--image-map",
            map.to_str().unwrap(),
        ])
    };
    let same = diff(&v1);
    assert_eq!(same.status.code(), Some(0), "{}", shows(&same));
    let changed = diff(&v2);
    let text = shows(&changed);
    assert_eq!(changed.status.code(), Some(1), "{text}");
    assert!(text.contains("default/vault: outputs change"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.starts_with('+') && l.contains("visible: shown-v2")),
        "other files' values are shown: {text}"
    );
    let marker_line = |sign: char, key: &str| {
        text.lines()
            .find(|l| l.starts_with(sign) && l.contains(&format!("{key}: <redacted sha256:")))
            .unwrap_or_else(|| panic!("no {sign} line for {key}:\n{text}"))
            .trim_start_matches(sign)
            .to_string()
    };
    for key in ["password", "token"] {
        assert_ne!(marker_line('-', key), marker_line('+', key), "{text}");
    }
    assert_no_plain_values(&text, "v1");
    assert_no_plain_values(&text, "v2");
}

#[test]
fn plinth_diff_exits_2_on_an_error() {
    let out = plinth(&["diff", "/nonexistent/promise.yaml"]);
    assert_eq!(out.status.code(), Some(2), "{}", shows(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("/nonexistent/promise.yaml"),
        "{}",
        shows(&out)
    );
}
