//! GitOps agents users already run, against a real `plinth up`: the state store served
//! read-only over git's smart HTTP protocol (tested with the `git` CLI and curl), and
//! `plinth manifests flux|argocd DESTINATION` naming a URL, token, CA and paths that work.

use crate::support;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::{Value, json};
use support::*;

/// `https://host:port` of the platform, from its kubeconfig.
fn server(p: &Plinth) -> String {
    let kc = std::fs::read_to_string(&p.kubeconfig).unwrap();
    kc.lines()
        .find_map(|l| l.trim().strip_prefix("server: "))
        .expect("server in kubeconfig")
        .to_string()
}

fn token(p: &Plinth) -> String {
    std::fs::read_to_string(p.data.join("git-read-token"))
        .expect("read token next to the kubeconfig")
        .trim()
        .to_string()
}

/// Runs the git CLI as an agent would: no prompts, no user config, the platform's CA.
fn git_https(p: &Plinth, ca: &Path, args: &[&str]) -> Output {
    let home = p.dir.path().join("git-home");
    std::fs::create_dir_all(&home).unwrap();
    Command::new("git")
        .args(args)
        .env("HOME", &home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_SSL_CAINFO", ca)
        .env_remove("GIT_ASKPASS")
        .env_remove("SSH_ASKPASS")
        .output()
        .expect("run git")
}

fn ok(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// HTTP status of a GET with curl (the platform's CA; extra curl arguments).
fn curl_status(ca: &Path, url: &str, extra: &[&str]) -> String {
    let out = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-w", "%{http_code}", "--cacert"])
        .arg(ca)
        .args(extra)
        .arg(url)
        .output()
        .expect("run curl");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn with_credentials(url: &str, user: &str, password: &str) -> String {
    url.replacen("https://", &format!("https://{user}:{password}@"), 1)
}

fn rev(repo: &Path, what: &str) -> String {
    git(&["--git-dir", &repo.to_string_lossy(), "rev-parse", what])
        .trim()
        .to_string()
}

/// Commits `file` to `branch` of the bare repository through a scratch clone (retried if
/// the platform's writer pushed in between).
fn commit_to_bare(bare: &Path, scratch: &Path, file: &str) {
    let b = bare.to_string_lossy();
    let s = scratch.to_string_lossy();
    for _ in 0..5 {
        let _ = std::fs::remove_dir_all(scratch);
        assert!(
            Command::new("git")
                .args(["clone", "-q", "--branch", "main", &b, &s])
                .status()
                .unwrap()
                .success()
        );
        std::fs::write(
            scratch.join(file),
            "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: extra\n",
        )
        .unwrap();
        let git_in = |args: &[&str]| {
            Command::new("git")
                .arg("-C")
                .arg(scratch)
                .args(["-c", "user.name=t", "-c", "user.email=t@e"])
                .args(args)
                .status()
                .unwrap()
                .success()
        };
        assert!(git_in(&["add", file]));
        assert!(git_in(&["commit", "-q", "-m", "another writer"]));
        if git_in(&["push", "-q", "origin", "HEAD:main"]) {
            return;
        }
    }
    panic!("could not commit to {b}");
}

#[tokio::test(flavor = "multi_thread")]
async fn state_store_is_served_read_only_over_https_with_the_read_token() {
    let p = Plinth::up(&[]).await;
    let repo = p.repo();
    wait_until(60, "the canary commit", || async {
        repo_files(&repo, "main")
            .contains(&"local/dependencies/kratix-canary-namespace.yaml".to_string())
    })
    .await;
    let ca = p.data.join("tls").join("ca.crt");
    let url = format!("{}/git/local", server(&p));
    let token = token(&p);
    let authed = with_credentials(&url, "flux", &token);
    assert!(
        std::fs::read_to_string(p.dir.path().join("plinth.out"))
            .unwrap()
            .contains(&token),
        "the read token is printed at start"
    );

    // Clone with the token as the basic-auth password.
    let clone = p.dir.path().join("clone");
    ok(
        &git_https(&p, &ca, &["clone", "-q", &authed, &clone.to_string_lossy()]),
        "git clone",
    );
    assert!(
        clone
            .join("local/dependencies/kratix-canary-namespace.yaml")
            .exists()
    );

    // Fetch after another commit.
    commit_to_bare(&repo, &p.dir.path().join("scratch"), "extra.yaml");
    let head = rev(&repo, "main");
    let c = clone.to_string_lossy().into_owned();
    ok(&git_https(&p, &ca, &["-C", &c, "fetch", "-q"]), "git fetch");
    let fetched = git(&["-C", &c, "rev-parse", "origin/main"]);
    assert_eq!(fetched.trim(), head, "fetch brings the new commit");

    // A bad or missing token is refused with 401 and a basic-auth challenge.
    let refs = format!("{url}/info/refs?service=git-upload-pack");
    assert_eq!(curl_status(&ca, &refs, &[]), "401");
    assert_eq!(curl_status(&ca, &refs, &["-u", "flux:wrong"]), "401");
    assert_eq!(
        curl_status(&ca, &refs, &["-H", "Authorization: Bearer wrong"]),
        "401"
    );
    assert_eq!(
        curl_status(&ca, &refs, &["-u", &format!("x:{token}")]),
        "200"
    );
    assert_eq!(
        curl_status(
            &ca,
            &refs,
            &["-H", &format!("Authorization: Bearer {token}")]
        ),
        "200"
    );
    let bad = git_https(
        &p,
        &ca,
        &["ls-remote", &with_credentials(&url, "flux", "wrong")],
    );
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("Authentication failed"), "{err}");
    // The token is no API credential.
    let api = format!("{}/api/v1/namespaces", server(&p));
    assert_eq!(
        curl_status(
            &ca,
            &api,
            &["-H", &format!("Authorization: Bearer {token}")]
        ),
        "401"
    );

    // Pushing is refused and changes nothing.
    std::fs::write(clone.join("pushed.yaml"), "x: 1\n").unwrap();
    ok(
        &git_https(
            &p,
            &ca,
            &[
                "-C",
                &c,
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@e",
                "add",
                "pushed.yaml",
            ],
        ),
        "git add",
    );
    ok(
        &git_https(
            &p,
            &ca,
            &[
                "-C",
                &c,
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@e",
                "commit",
                "-q",
                "-m",
                "push attempt",
            ],
        ),
        "git commit",
    );
    let before = rev(&repo, "main");
    let push = git_https(&p, &ca, &["-C", &c, "push", "origin", "HEAD:main"]);
    assert!(!push.status.success(), "push must be refused");
    let err = String::from_utf8_lossy(&push.stderr);
    assert!(err.contains("403"), "{err}");
    assert_eq!(rev(&repo, "main"), before);
    assert_eq!(
        curl_status(
            &ca,
            &format!("{url}/info/refs?service=git-receive-pack"),
            &["-u", &format!("x:{token}")]
        ),
        "403"
    );

    // Only the local state store Plinth created is served: not a repository outside the
    // data dir, nor another one inside it, nor the controllers' working copy of a store
    // (which mirrors whatever the store names, possibly a private remote).
    let outside = tempfile::tempdir().unwrap();
    let outside_repo = outside.path().join("other.git");
    git(&["init", "-q", "--bare", &outside_repo.to_string_lossy()]);
    let inside_repo = p.data.join("extra.git");
    git(&["init", "-q", "--bare", &inside_repo.to_string_lossy()]);
    let cache = p
        .data
        .join("controllers")
        .join("statestores")
        .join("GitStateStore-local");
    assert!(
        cache.join("HEAD").exists(),
        "the controllers keep a working copy of the store at {}",
        cache.display()
    );
    let client = p.client().await;
    let stores = dynamic(
        &client,
        "platform.kratix.io",
        "v1alpha1",
        "GitStateStore",
        "gitstatestores",
        None,
    );
    create(
        &stores,
        &json!({"apiVersion": "platform.kratix.io/v1alpha1", "kind": "GitStateStore",
                "metadata": {"name": "outside"},
                "spec": {"url": format!("file://{}", outside_repo.display()), "branch": "main"}}),
    )
    .await;
    for (name, repo) in [("inside", &inside_repo), ("cache", &cache)] {
        create(
            &stores,
            &json!({"apiVersion": "platform.kratix.io/v1alpha1", "kind": "GitStateStore",
                    "metadata": {"name": name},
                    "spec": {"url": format!("file://{}", repo.display()), "branch": "main"}}),
        )
        .await;
    }
    // `plinth manifests` refuses to point an agent at a repository that is not served.
    let dests = destinations(&client);
    create(
        &dests,
        &json!({"apiVersion": "platform.kratix.io/v1alpha1", "kind": "Destination",
                "metadata": {"name": "on-cache"},
                "spec": {"path": "on-cache", "stateStoreRef": {"kind": "GitStateStore", "name": "cache"}}}),
    )
    .await;
    let refused = manifests(&p, &["flux", "on-cache"]);
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("GitStateStore cache") && err.contains("does not serve"),
        "{err}"
    );
    let auth = format!("x:{token}");
    for store in ["outside", "inside", "cache", "missing"] {
        assert_eq!(
            curl_status(
                &ca,
                &format!(
                    "{}/git/{store}/info/refs?service=git-upload-pack",
                    server(&p)
                ),
                &["-u", &auth]
            ),
            "404",
            "{store}"
        );
    }
}

fn destinations(client: &kube::Client) -> kube::Api<kube::api::DynamicObject> {
    dynamic(
        client,
        "platform.kratix.io",
        "v1alpha1",
        "Destination",
        "destinations",
        None,
    )
}

/// Runs `plinth manifests <args> --kubeconfig <platform>`.
fn manifests(p: &Plinth, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_plinth"))
        .arg("manifests")
        .args(args)
        .arg("--kubeconfig")
        .arg(&p.kubeconfig)
        .output()
        .expect("run plinth manifests")
}

fn docs(out: &Output) -> Vec<Value> {
    let text = ok(out, "plinth manifests");
    serde_saphyr::from_multiple::<Value>(&text).expect("the output parses as YAML")
}

fn of_kind<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter().filter(|d| d["kind"] == kind).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn flux_and_argocd_manifests_sync_a_destination_directory() {
    let p = Plinth::up(&[]).await;
    let client = p.client().await;
    let dests = destinations(&client);
    for (name, path, mode) in [
        ("worker-eu", "clusters/eu/worker-1", "nestedByMetadata"),
        ("flat", "flat", "none"),
    ] {
        create(
            &dests,
            &json!({"apiVersion": "platform.kratix.io/v1alpha1", "kind": "Destination",
                    "metadata": {"name": name, "labels": {"environment": name}},
                    "spec": {"path": path, "filepath": {"mode": mode},
                             "stateStoreRef": {"kind": "GitStateStore", "name": "local"}}}),
        )
        .await;
    }
    let repo = p.repo();
    wait_until(60, "the canary files of both Destinations", || async {
        let files = repo_files(&repo, "main");
        files.contains(&"clusters/eu/worker-1/resources/kratix-canary-configmap.yaml".to_string())
            && files.contains(&"flat/kratix-canary-configmap.yaml".to_string())
    })
    .await;
    let token = token(&p);
    let ca_pem = std::fs::read_to_string(p.data.join("tls").join("ca.crt")).unwrap();
    let url = format!("{}/git/local", server(&p));

    // Flux, nested layout: dependencies first, resources dependsOn them.
    let flux = docs(&manifests(&p, &["flux", "worker-eu"]));
    let repo_obj = of_kind(&flux, "GitRepository")[0];
    assert_eq!(repo_obj["spec"]["url"], url.as_str());
    assert_eq!(repo_obj["spec"]["ref"]["branch"], "main");
    assert_eq!(repo_obj["metadata"]["namespace"], "flux-system");
    let ks = of_kind(&flux, "Kustomization");
    assert_eq!(ks.len(), 2);
    assert_eq!(ks[0]["spec"]["path"], "./clusters/eu/worker-1/dependencies");
    assert_eq!(ks[1]["spec"]["path"], "./clusters/eu/worker-1/resources");
    assert_eq!(
        ks[1]["spec"]["dependsOn"],
        json!([{"name": ks[0]["metadata"]["name"]}])
    );
    let secret = of_kind(&flux, "Secret")[0];
    assert_eq!(
        repo_obj["spec"]["secretRef"]["name"],
        secret["metadata"]["name"]
    );
    assert_eq!(secret["stringData"]["password"], token.as_str());
    assert_eq!(secret["stringData"]["ca.crt"], ca_pem.as_str());

    // The URL, credentials and CA it names clone the Destination's directory.
    let ca_file = p.dir.path().join("from-secret-ca.crt");
    std::fs::write(&ca_file, secret["stringData"]["ca.crt"].as_str().unwrap()).unwrap();
    let clone = p.dir.path().join("flux-clone");
    let authed = with_credentials(
        repo_obj["spec"]["url"].as_str().unwrap(),
        secret["stringData"]["username"].as_str().unwrap(),
        secret["stringData"]["password"].as_str().unwrap(),
    );
    ok(
        &git_https(
            &p,
            &ca_file,
            &["clone", "-q", &authed, &clone.to_string_lossy()],
        ),
        "git clone of the URL in the GitRepository",
    );
    for part in [
        "dependencies/kratix-canary-namespace.yaml",
        "resources/kratix-canary-configmap.yaml",
    ] {
        assert!(
            clone.join("clusters/eu/worker-1").join(part).exists(),
            "{part}"
        );
    }

    // Flux, `none` layout: one Kustomization on the directory, `.kratix/` ignored.
    let flat = docs(&manifests(&p, &["flux", "flat", "--namespace", "gitops"]));
    let ks = of_kind(&flat, "Kustomization");
    assert_eq!(ks.len(), 1);
    assert_eq!(ks[0]["spec"]["path"], "./flat");
    assert_eq!(ks[0]["metadata"]["namespace"], "gitops");
    let ignore = of_kind(&flat, "GitRepository")[0]["spec"]["ignore"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(ignore.contains("/flat/.kratix/"), "{ignore}");

    // Argo CD: repository Secret, CA by host, an Application per directory.
    let argo = docs(&manifests(&p, &["argocd", "worker-eu"]));
    let secret = of_kind(&argo, "Secret")[0];
    assert_eq!(
        secret["metadata"]["labels"]["argocd.argoproj.io/secret-type"],
        "repository"
    );
    assert_eq!(secret["stringData"]["url"], url.as_str());
    assert_eq!(secret["stringData"]["password"], token.as_str());
    assert_eq!(
        of_kind(&argo, "ConfigMap")[0]["data"]["127.0.0.1"],
        ca_pem.as_str()
    );
    let apps = of_kind(&argo, "Application");
    let paths: Vec<_> = apps
        .iter()
        .map(|a| a["spec"]["source"]["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        [
            "clusters/eu/worker-1/dependencies",
            "clusters/eu/worker-1/resources"
        ]
    );
    assert!(
        apps.iter()
            .all(|a| a["spec"]["source"]["repoURL"] == url.as_str()
                && a["spec"]["source"]["targetRevision"] == "main")
    );
    let argo_flat = docs(&manifests(&p, &["argocd", "flat"]));
    let apps = of_kind(&argo_flat, "Application");
    assert_eq!(apps.len(), 1);
    assert_eq!(apps[0]["spec"]["source"]["path"], "flat");
    assert_eq!(
        apps[0]["spec"]["source"]["directory"]["exclude"],
        ".kratix/*"
    );

    // An unknown Destination is a clear error.
    let missing = manifests(&p, &["flux", "nope"]);
    assert!(!missing.status.success());
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(err.contains("Destination nope not found"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_agent_reaches_the_platform_by_an_extra_certificate_name() {
    let p = Plinth::up(&["--tls-san", "plinth.test"]).await;
    let repo = p.repo();
    wait_until(60, "the canary commit", || async {
        repo_files(&repo, "main")
            .contains(&"local/dependencies/kratix-canary-namespace.yaml".to_string())
    })
    .await;
    let port = server(&p).rsplit(':').next().unwrap().to_string();
    let flux = docs(&manifests(
        &p,
        &[
            "flux",
            "local",
            "--git-host",
            &format!("plinth.test:{port}"),
        ],
    ));
    let url = of_kind(&flux, "GitRepository")[0]["spec"]["url"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(url, format!("https://plinth.test:{port}/git/local"));
    let ca = p.data.join("tls").join("ca.crt");
    let clone_as = |p: &Plinth, host: &str, dir: &str| {
        let url = format!("https://{host}:{port}/git/local");
        git_https(
            p,
            &ca,
            &[
                "-c",
                &format!("http.curloptResolve={host}:{port}:127.0.0.1"),
                "clone",
                "-q",
                &with_credentials(&url, "flux", &token(p)),
                &p.dir.path().join(dir).to_string_lossy(),
            ],
        )
    };
    ok(
        &clone_as(&p, "plinth.test", "by-name"),
        "clone by the extra name",
    );
    let other = clone_as(&p, "other.test", "by-other-name");
    assert!(
        !other.status.success(),
        "a name not on the certificate fails TLS"
    );

    // A restart with other names issues the serving certificate again from the same CA.
    let ca_before = std::fs::read(&ca).unwrap();
    let dir = p.kill();
    let p = Plinth::up_in(dir, &["--tls-san", "other.test"]).await;
    assert_eq!(std::fs::read(&ca).unwrap(), ca_before, "the CA is kept");
    let port2 = server(&p).rsplit(':').next().unwrap().to_string();
    let url = format!("https://other.test:{port2}/git/local");
    let out = git_https(
        &p,
        &ca,
        &[
            "-c",
            &format!("http.curloptResolve=other.test:{port2}:127.0.0.1"),
            "ls-remote",
            &with_credentials(&url, "flux", &token(&p)),
        ],
    );
    ok(&out, "ls-remote by the new name after a restart");
}
