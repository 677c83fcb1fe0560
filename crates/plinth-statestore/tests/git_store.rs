//! Git writer against real servers: a bare repository over `file://`, `git daemon`, and
//! OpenSSH with git-shell. Results are checked with the `git` CLI.

use crate::support;

use std::path::Path;
use std::time::Duration;

use plinth_statestore::git::init_bare;
use plinth_statestore::layout::{self, FilepathMode, PlacementSource};
use plinth_statestore::{
    GitAuth, GitConfig, StateStore, StoreConfig, StoreError, WriteOp, WriteRequest,
};
use support::*;

fn file_url(p: &Path) -> String {
    format!("file://{}", p.display())
}

async fn open(cfg: GitConfig) -> StateStore {
    StateStore::open(StoreConfig::Git(cfg))
        .await
        .expect("state store opens")
}

fn cfg(url: &str, work: &Path) -> GitConfig {
    let mut c = GitConfig::new(url, "main", work);
    c.batch_window = Duration::from_millis(50);
    c
}

fn put(name: &str, path: &str, content: &str) -> WriteRequest {
    WriteRequest {
        name: name.into(),
        ops: vec![WriteOp::Put {
            path: path.into(),
            content: content.as_bytes().to_vec(),
        }],
    }
}

#[tokio::test]
async fn file_store_ops_produce_expected_tree() {
    let tmp = tempfile::tempdir().unwrap();
    let bare = tmp.path().join("state.git");
    init_bare(&bare, "main").unwrap();
    let mut c = cfg(&file_url(&bare), &tmp.path().join("work"));
    c.path = "/platform//".into(); // normalised to "platform"
    c.author_email = "kratix@example.test".into();
    let store = open(c).await;
    store.validate().await.unwrap();

    // Canary files of a nested Destination, then a resource WorkPlacement's directory.
    let canary = layout::canary_files("/dev", FilepathMode::NestedByMetadata).unwrap();
    store
        .write(WriteRequest {
            name: layout::CANARY_WRITER_NAME.into(),
            ops: canary
                .iter()
                .map(|(p, c)| WriteOp::Put {
                    path: p.clone(),
                    content: c.clone(),
                })
                .collect(),
        })
        .await
        .unwrap();
    let dir = layout::nested_directory(
        "dev",
        &PlacementSource::Resource {
            namespace: "default".into(),
            promise: "redis".into(),
            resource: "r1".into(),
            pipeline: "configure".into(),
        },
        layout::DEFAULT_WORKLOAD_GROUP_ID,
    )
    .unwrap();
    let out = store
        .write(WriteRequest {
            name: "wp-r1".into(),
            ops: vec![WriteOp::ReplaceDir {
                dir: dir.clone(),
                files: vec![
                    ("redis.yaml".into(), b"kind: Redis\n".to_vec()),
                    ("nested/cm.yaml".into(), b"kind: ConfigMap\n".to_vec()),
                    ("stale.yaml".into(), b"old\n".to_vec()),
                ],
            }],
        })
        .await
        .unwrap();
    assert!(out.changed);
    // Replace the directory: stale.yaml must disappear, redis.yaml changes.
    let out2 = store
        .write(WriteRequest {
            name: "wp-r1".into(),
            ops: vec![WriteOp::ReplaceDir {
                dir: dir.clone(),
                files: vec![
                    ("redis.yaml".into(), b"kind: Redis\nspec: {}\n".to_vec()),
                    ("nested/cm.yaml".into(), b"kind: ConfigMap\n".to_vec()),
                ],
            }],
        })
        .await
        .unwrap();
    assert_ne!(out.version_id, out2.version_id);
    // none-mode style Put + Delete, and a DeleteDir.
    store
        .write(put("wp-n", "dev/extra/a.yaml", "a\n"))
        .await
        .unwrap();
    store
        .write(put("wp-n", "dev/extra/b.yaml", "b\n"))
        .await
        .unwrap();
    store
        .write(WriteRequest {
            name: "wp-n".into(),
            ops: vec![
                WriteOp::Delete {
                    path: "dev/extra/a.yaml".into(),
                },
                WriteOp::Delete {
                    path: "dev/never-existed.yaml".into(),
                },
            ],
        })
        .await
        .unwrap();
    store
        .write(put("wp-d", "dev/gone/x.yaml", "x\n"))
        .await
        .unwrap();
    let last = store
        .write(WriteRequest {
            name: "wp-d".into(),
            ops: vec![WriteOp::DeleteDir {
                dir: "dev/gone".into(),
            }],
        })
        .await
        .unwrap();

    let clone = cli_clone(tmp.path(), &file_url(&bare), "main");
    let files = tree_files(&clone);
    let expect: Vec<(&str, &[u8])> = vec![
        (
            "platform/dev/dependencies/kratix-canary-namespace.yaml",
            layout::CANARY_NAMESPACE_YAML.as_bytes(),
        ),
        ("platform/dev/extra/b.yaml", b"b\n"),
        (
            "platform/dev/resources/default/redis/r1/configure/5058f/nested/cm.yaml",
            b"kind: ConfigMap\n",
        ),
        (
            "platform/dev/resources/default/redis/r1/configure/5058f/redis.yaml",
            b"kind: Redis\nspec: {}\n",
        ),
        (
            "platform/dev/resources/kratix-canary-configmap.yaml",
            layout::CANARY_CONFIGMAP_YAML.as_bytes(),
        ),
    ];
    assert_eq!(
        files.keys().map(String::as_str).collect::<Vec<_>>(),
        expect.iter().map(|e| e.0).collect::<Vec<_>>()
    );
    for (p, c) in expect {
        assert_eq!(files[p], c, "{p}");
    }
    // versionID is the branch head; author is the configured gitAuthor.
    assert_eq!(git(&clone, &["rev-parse", "HEAD"]).trim(), last.version_id);
    assert_eq!(
        git(&clone, &["log", "-1", "--format=%an <%ae>|%cn|%s"]).trim(),
        "kratix <kratix@example.test>|kratix|Delete from: wp-d"
    );
    assert!(git(&clone, &["log", "--format=%s"]).contains("Update from: kratix-canary"));

    // read and list go through the store prefix.
    assert_eq!(
        store.read("dev/extra/b.yaml").await.unwrap().as_deref(),
        Some(&b"b\n"[..])
    );
    assert_eq!(store.read("dev/extra/a.yaml").await.unwrap(), None);
    assert_eq!(
        store.list("dev/resources").await.unwrap(),
        vec![
            "dev/resources/default/redis/r1/configure/5058f/nested/cm.yaml".to_string(),
            "dev/resources/default/redis/r1/configure/5058f/redis.yaml".to_string(),
            "dev/resources/kratix-canary-configmap.yaml".to_string(),
        ]
    );
    assert!(store.list("dev/nothing-here").await.unwrap().is_empty());
}

#[tokio::test]
async fn fifty_concurrent_writers_share_few_commits() {
    let tmp = tempfile::tempdir().unwrap();
    let bare = tmp.path().join("state.git");
    init_bare(&bare, "main").unwrap();
    let mut c = GitConfig::new(file_url(&bare), "main", tmp.path().join("work"));
    c.batch_window = Duration::from_millis(200);
    let store = open(c).await;
    let before = commit_count(&bare, "main");
    let mut tasks = Vec::new();
    for i in 0..50 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            store
                .write(WriteRequest {
                    name: format!("wp-{i:02}"),
                    ops: vec![WriteOp::ReplaceDir {
                        dir: format!("dest/resources/ns/p/r{i}/configure/5058f"),
                        files: vec![
                            (
                                format!("cm-{i}.yaml"),
                                format!("kind: ConfigMap # {i}\n").into_bytes(),
                            ),
                            (
                                "ns.yaml".into(),
                                format!("kind: Namespace # {i}\n").into_bytes(),
                            ),
                        ],
                    }],
                })
                .await
        }));
    }
    let mut versions = Vec::new();
    for t in tasks {
        let out = t.await.unwrap().expect("every write succeeds");
        assert!(out.changed);
        versions.push(out.version_id);
    }
    let commits = commit_count(&bare, "main") - before;
    println!("50 concurrent writes -> {commits} commits");
    assert!(
        (1..=10).contains(&commits),
        "{commits} commits for 50 writes"
    );
    let clone = cli_clone(tmp.path(), &file_url(&bare), "main");
    let files = tree_files(&clone);
    assert_eq!(files.len(), 100);
    for i in 0..50 {
        let d = format!("dest/resources/ns/p/r{i}/configure/5058f");
        assert_eq!(
            files[&format!("{d}/cm-{i}.yaml")],
            format!("kind: ConfigMap # {i}\n").into_bytes()
        );
        assert_eq!(
            files[&format!("{d}/ns.yaml")],
            format!("kind: Namespace # {i}\n").into_bytes()
        );
    }
    // Every versionID is a commit that contains that request's files.
    for (i, v) in versions.iter().enumerate() {
        git(
            &clone,
            &[
                "cat-file",
                "-e",
                &format!("{v}:dest/resources/ns/p/r{i}/configure/5058f/ns.yaml"),
            ],
        );
    }
    // A batch commit names its WorkPlacements.
    let subjects = git(&clone, &["log", "--format=%s", "-n", &commits.to_string()]);
    assert!(subjects.contains("Update from: wp-"), "{subjects}");
}

#[tokio::test]
async fn unchanged_content_makes_no_commit() {
    let tmp = tempfile::tempdir().unwrap();
    let bare = tmp.path().join("state.git");
    init_bare(&bare, "main").unwrap();
    let store = open(cfg(&file_url(&bare), &tmp.path().join("work"))).await;
    let req = WriteRequest {
        name: "wp-a".into(),
        ops: vec![WriteOp::ReplaceDir {
            dir: "d/dependencies/p/install/5058f".into(),
            files: vec![("a.yaml".into(), b"a: 1\n".to_vec())],
        }],
    };
    let first = store.write(req.clone()).await.unwrap();
    let n = commit_count(&bare, "main");
    let second = store.write(req).await.unwrap();
    assert!(first.changed);
    assert!(!second.changed);
    assert_eq!(first.version_id, second.version_id);
    assert_eq!(commit_count(&bare, "main"), n, "no new commit");
}

#[tokio::test]
async fn escaping_path_is_refused_and_nothing_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    let bare = tmp.path().join("state.git");
    let head = init_bare(&bare, "main").unwrap();
    let store = open(cfg(&file_url(&bare), &tmp.path().join("work"))).await;
    let err = store
        .write(WriteRequest {
            name: "wp-evil".into(),
            ops: vec![
                WriteOp::Put {
                    path: "dev/fine.yaml".into(),
                    content: b"ok".to_vec(),
                },
                WriteOp::ReplaceDir {
                    dir: "dev/resources".into(),
                    files: vec![("../../../outside.yaml".into(), b"x".to_vec())],
                },
            ],
        })
        .await
        .unwrap_err();
    match &err {
        StoreError::PathEscapes { path, .. } => assert_eq!(path, "../../../outside.yaml"),
        other => panic!("expected PathEscapes, got {other:?}"),
    }
    assert!(err.to_string().contains("../../../outside.yaml"), "{err}");
    assert!(matches!(
        store.write(put("wp-abs", "/etc/passwd", "x")).await,
        Err(StoreError::PathEscapes { .. })
    ));
    assert!(matches!(
        store.read("../x").await,
        Err(StoreError::PathEscapes { .. })
    ));
    assert_eq!(
        git(&bare, &["rev-parse", "main"]).trim(),
        head,
        "nothing written"
    );
}

fn git_cli(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// An empty bare repository (`git init --bare -b main`, no commits) and a repository
/// that has only another branch both come up; the first write starts the branch as a
/// root commit, and nothing is committed before it.
#[tokio::test]
async fn unborn_branch_is_started_by_the_first_write() {
    let tmp = tempfile::tempdir().unwrap();
    let empty = tmp.path().join("empty.git");
    std::fs::create_dir_all(&empty).unwrap();
    git_cli(&empty, &["init", "-q", "--bare", "-b", "main"]);
    let other = tmp.path().join("other.git");
    init_bare(&other, "trunk").unwrap();
    let trunk_tip = git_cli(&other, &["rev-parse", "trunk"]);

    for (bare, work) in [(&empty, "w-empty"), (&other, "w-other")] {
        let store = open(cfg(&file_url(bare), &tmp.path().join(work))).await;
        store
            .validate()
            .await
            .expect("validates without the branch");
        assert_eq!(store.read("a.yaml").await.unwrap(), None);
        assert!(store.list("").await.unwrap().is_empty());
        assert!(
            git_cli(bare, &["branch", "--list", "main"])
                .trim()
                .is_empty(),
            "nothing written before the first write"
        );
        let out = store.write(put("first", "a.yaml", "a: 1\n")).await.unwrap();
        assert!(out.changed);
        assert_eq!(git_cli(bare, &["show", "main:a.yaml"]), "a: 1\n");
        assert_eq!(git_cli(bare, &["rev-list", "--count", "main"]).trim(), "1");
        assert_eq!(git_cli(bare, &["rev-parse", "main"]).trim(), out.version_id);
        assert_eq!(store.read("a.yaml").await.unwrap().unwrap(), b"a: 1\n");
    }
    assert_eq!(
        git_cli(&other, &["rev-parse", "trunk"]),
        trunk_tip,
        "the other branch is untouched"
    );
}

#[tokio::test]
async fn missing_repository_is_named() {
    let tmp = tempfile::tempdir().unwrap();
    let c = GitConfig::new(
        file_url(&tmp.path().join("nope.git")),
        "main",
        tmp.path().join("w2"),
    );
    let err = StateStore::open(StoreConfig::Git(c)).await.unwrap_err();
    assert!(
        matches!(err, StoreError::RepositoryMissing { .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn unreachable_endpoint_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let port = free_port(); // nothing listens here
    let c = GitConfig::new(
        format!("git://127.0.0.1:{port}/state.git"),
        "main",
        tmp.path().join("w"),
    );
    let err = StateStore::open(StoreConfig::Git(c)).await.unwrap_err();
    assert!(matches!(err, StoreError::Unreachable { .. }), "{err:?}");
    assert!(
        err.to_string().contains(&format!("127.0.0.1:{port}")),
        "{err}"
    );
}

/// An address nothing answers at is `Unreachable` whatever digits it holds: the class comes
/// from what failed, never from a number that reads like an HTTP status.
#[tokio::test]
async fn an_address_that_reads_like_a_status_is_unreachable() {
    let tmp = tempfile::tempdir().unwrap();
    let mut tried = 0;
    for port in [41401u16, 40301, 40401, 24010, 34030, 54044] {
        // Only ports nothing listens on say anything; skip one that is in use.
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_err() {
            continue;
        }
        tried += 1;
        for scheme in ["http", "git"] {
            let url = format!("{scheme}://127.0.0.1:{port}/state.git");
            let mut c = GitConfig::new(url, "main", tmp.path().join(format!("w-{scheme}-{port}")));
            c.insecure_skip_tls_verify = true;
            let err = StateStore::open(StoreConfig::Git(c)).await.unwrap_err();
            assert!(
                matches!(err, StoreError::Unreachable { .. }),
                "{scheme} port {port}: {err:?}"
            );
        }
    }
    assert!(tried > 0, "every candidate port was in use");
    // A host name with such digits, which cannot resolve (`.invalid` never does).
    for host in ["team-401.invalid", "git-403.invalid", "404.invalid"] {
        let url = format!("http://{host}/state.git");
        let mut c = GitConfig::new(url, "main", tmp.path().join(host));
        c.insecure_skip_tls_verify = true;
        let err = StateStore::open(StoreConfig::Git(c)).await.unwrap_err();
        assert!(
            matches!(err, StoreError::Unreachable { .. }),
            "{host}: {err:?}"
        );
    }
}

/// A server that answers every HTTP request with `status` and no body.
fn http_answering(status: &'static str) -> u16 {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut c in l.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = c.read(&mut buf);
            let _ = write!(
                c,
                "HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
        }
    });
    port
}

/// An HTTP status libgit2 names is classed by that status.
#[tokio::test]
async fn http_statuses_are_classed_by_the_status() {
    let tmp = tempfile::tempdir().unwrap();
    type IsClass = fn(&StoreError) -> bool;
    let cases: [(&'static str, IsClass); 3] = [
        ("401 Unauthorized", |e| {
            matches!(e, StoreError::AuthFailed { .. })
        }),
        ("403 Forbidden", |e| {
            matches!(e, StoreError::PermissionDenied { .. })
        }),
        ("404 Not Found", |e| {
            matches!(e, StoreError::RepositoryMissing { .. })
        }),
    ];
    for (status, is_class) in cases {
        let port = http_answering(status);
        let url = format!("http://127.0.0.1:{port}/state.git");
        let mut c = GitConfig::new(url, "main", tmp.path().join(&status[..3]));
        c.insecure_skip_tls_verify = true;
        let err = StateStore::open(StoreConfig::Git(c)).await.unwrap_err();
        assert!(is_class(&err), "{status}: {err:?}");
    }
}

#[tokio::test]
async fn git_daemon_write_validate_and_read_only() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("srv");
    init_bare(&base.join("state.git"), "main").unwrap();
    let daemon = git_daemon(&base, true);
    let url = format!("git://127.0.0.1:{}/state.git", daemon.port);
    let store = open(cfg(&url, &tmp.path().join("w"))).await;
    store.validate().await.unwrap();
    let out = store.write(put("wp-g", "dev/a.yaml", "a\n")).await.unwrap();
    let clone = cli_clone(tmp.path(), &url, "main");
    assert_eq!(tree_files(&clone)["dev/a.yaml"], b"a\n");
    assert_eq!(git(&clone, &["rev-parse", "HEAD"]).trim(), out.version_id);
    // The writer's clone is shallow (depth 1) over the network, and pushes from it work.
    assert!(tmp.path().join("w/shallow").exists(), "shallow clone");
    drop(store);
    drop(daemon);

    // Same repository, daemon without receive-pack: reads work, validation says why not.
    let ro = git_daemon(&base, false);
    let url = format!("git://127.0.0.1:{}/state.git", ro.port);
    let store = open(cfg(&url, &tmp.path().join("w-ro"))).await;
    assert_eq!(
        store.read("dev/a.yaml").await.unwrap().as_deref(),
        Some(&b"a\n"[..])
    );
    let err = store.validate().await.unwrap_err();
    assert!(
        matches!(err, StoreError::PermissionDenied { .. }),
        "{err:?}"
    );
}

/// A pre-receive hook that, on its first run only, moves the branch with the git CLI while the
/// writer's push is in flight — exactly "someone else pushed in between".
fn install_racing_hook(bare: &Path) {
    let hook = bare.join("hooks/pre-receive");
    std::fs::create_dir_all(hook.parent().unwrap()).unwrap();
    let script = format!(
        r#"#!/bin/sh
cat >/dev/null
marker="{bare}/raced"
[ -e "$marker" ] && exit 0
touch "$marker"
unset GIT_QUARANTINE_PATH GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES
export GIT_DIR="{bare}" GIT_AUTHOR_NAME=other GIT_AUTHOR_EMAIL=o@example.test GIT_COMMITTER_NAME=other GIT_COMMITTER_EMAIL=o@example.test
old=$(git rev-parse refs/heads/main)
blob=$(printf 'theirs\n' | git hash-object -w --stdin)
tree=$( (git ls-tree "$old"; printf '100644 blob %s\tother-team.yaml\n' "$blob") | git mktree)
new=$(git commit-tree "$tree" -p "$old" -m "someone else")
git update-ref refs/heads/main "$new" "$old"
exit 0
"#,
        bare = bare.display()
    );
    std::fs::write(&hook, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[tokio::test]
async fn rejected_push_is_resynced_and_retried() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("srv");
    let bare = base.join("state.git");
    init_bare(&bare, "main").unwrap();
    let daemon = git_daemon(&base, true);
    let url = format!("git://127.0.0.1:{}/state.git", daemon.port);
    let store = open(cfg(&url, &tmp.path().join("w"))).await;
    store
        .write(put("wp-1", "dev/one.yaml", "1\n"))
        .await
        .unwrap();

    // Someone pushes with the git CLI between two of our writes: picked up by the pre-batch fetch.
    let theirs = cli_clone(tmp.path(), &url, "main");
    std::fs::write(theirs.join("cli.yaml"), "cli\n").unwrap();
    git(&theirs, &["add", "cli.yaml"]);
    git(&theirs, &["commit", "-q", "-m", "cli change"]);
    git(&theirs, &["push", "-q", "origin", "main"]);
    store
        .write(put("wp-2", "dev/two.yaml", "2\n"))
        .await
        .unwrap();

    // Someone pushes while our push is in flight: the push is rejected, the writer re-fetches,
    // re-applies and pushes again.
    install_racing_hook(&bare);
    let out = store
        .write(put("wp-3", "dev/three.yaml", "3\n"))
        .await
        .unwrap();
    assert!(bare.join("raced").exists(), "the racing hook ran");
    let clone = cli_clone(tmp.path(), &url, "main");
    let files = tree_files(&clone);
    for f in [
        "dev/one.yaml",
        "dev/two.yaml",
        "dev/three.yaml",
        "cli.yaml",
        "other-team.yaml",
    ] {
        assert!(files.contains_key(f), "{f} missing: {:?}", files.keys());
    }
    assert_eq!(git(&clone, &["rev-parse", "HEAD"]).trim(), out.version_id);
    let log = git(&clone, &["log", "--format=%s"]);
    assert!(
        log.starts_with("Update from: wp-3\nsomeone else\n"),
        "{log}"
    );
}

// ---------------------------------------------------------------------------------------------
// SSH

struct SshFixture {
    _tmp: tempfile::TempDir,
    server: SshGitServer,
    url: String,
    bare: std::path::PathBuf,
    key_pass: String,
    work: std::path::PathBuf,
}

fn ssh_fixture() -> Option<SshFixture> {
    let tmp = tempfile::tempdir().unwrap();
    let keys = tmp.path().join("keys");
    std::fs::create_dir_all(&keys).unwrap();
    let (key_pass, pub_pass) = keygen(&keys, "client_pass", "correct horse");
    let server = ssh_git_server(tmp.path(), &[pub_pass])?;
    let bare = tmp.path().join("repos/state.git");
    init_bare(&bare, "main").unwrap();
    hand_to_ssh_user(&bare, tmp.path());
    let url = format!(
        "ssh://{SSH_USER}@127.0.0.1:{}{}",
        server.server.port,
        bare.display()
    );
    let work = tmp.path().join("work");
    Some(SshFixture {
        _tmp: tmp,
        server,
        url,
        bare,
        key_pass,
        work,
    })
}

fn ssh_cfg(f: &SshFixture, passphrase: &str, known_hosts: &str, work: &str) -> GitConfig {
    let mut c = cfg(&f.url, &f.work.join(work));
    c.auth = GitAuth::Ssh {
        private_key: f.key_pass.clone(),
        passphrase: Some(passphrase.into()),
        known_hosts: known_hosts.into(),
    };
    c
}

#[tokio::test]
async fn ssh_with_passphrase_key_writes() {
    let Some(f) = ssh_fixture() else { return };
    let store = open(ssh_cfg(&f, "correct horse", &f.server.known_hosts, "ok")).await;
    store.validate().await.unwrap();
    let out = store
        .write(put("wp-ssh", "dev/ssh.yaml", "over ssh\n"))
        .await
        .unwrap();
    let clone = cli_clone(
        f.work.as_path().parent().unwrap(),
        &f.bare.display().to_string(),
        "main",
    );
    assert_eq!(tree_files(&clone)["dev/ssh.yaml"], b"over ssh\n");
    assert_eq!(git(&clone, &["rev-parse", "HEAD"]).trim(), out.version_id);

    // The same server through a hashed known_hosts file (`ssh-keygen -H`).
    let kh = f.work.parent().unwrap().join("known_hosts_hashed");
    std::fs::write(&kh, &f.server.known_hosts).unwrap();
    let st = std::process::Command::new("ssh-keygen")
        .args(["-q", "-H", "-f"])
        .arg(&kh)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let hashed = std::fs::read_to_string(&kh).unwrap();
    assert!(hashed.starts_with("|1|"), "{hashed}");
    let store = open(ssh_cfg(&f, "correct horse", &hashed, "hashed")).await;
    let out = store
        .write(put("wp-ssh2", "dev/ssh2.yaml", "hashed\n"))
        .await
        .unwrap();
    assert!(out.changed);
}

#[tokio::test]
async fn ssh_wrong_passphrase_is_named() {
    let Some(f) = ssh_fixture() else { return };
    let err = StateStore::open(StoreConfig::Git(ssh_cfg(
        &f,
        "wrong horse",
        &f.server.known_hosts,
        "bad-pass",
    )))
    .await
    .unwrap_err();
    assert_eq!(err, StoreError::WrongPassphrase);
    assert!(
        err.to_string()
            .contains("wrong passphrase for sshPrivateKey")
    );
    // A protected key without any passphrase gets its own error too.
    let mut c = ssh_cfg(&f, "", &f.server.known_hosts, "no-pass");
    if let GitAuth::Ssh { passphrase, .. } = &mut c.auth {
        *passphrase = None;
    }
    let err = StateStore::open(StoreConfig::Git(c)).await.unwrap_err();
    assert_eq!(err, StoreError::PassphraseRequired);
}

#[tokio::test]
async fn ssh_unknown_host_key_is_refused() {
    let Some(f) = ssh_fixture() else { return };
    // An entry for another port only.
    let other_port = f.server.known_hosts.replacen(
        &format!("]:{} ", f.server.server.port),
        &format!("]:{} ", f.server.server.port + 1),
        1,
    );
    let err = StateStore::open(StoreConfig::Git(ssh_cfg(
        &f,
        "correct horse",
        &other_port,
        "unknown",
    )))
    .await
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "host key for 127.0.0.1:{} not in knownHosts",
            f.server.server.port
        )
    );
    // The right host with a different key: a mismatch, not "unknown".
    let (_, other_pub) = keygen(&f.work.parent().unwrap().join("keys"), "impostor", "");
    let mut parts = other_pub.split_whitespace();
    let wrong_key = format!(
        "[127.0.0.1]:{} {} {}\n",
        f.server.server.port,
        parts.next().unwrap(),
        parts.next().unwrap()
    );
    let err = StateStore::open(StoreConfig::Git(ssh_cfg(
        &f,
        "correct horse",
        &wrong_key,
        "mismatch",
    )))
    .await
    .unwrap_err();
    assert!(matches!(err, StoreError::HostKeyMismatch { .. }), "{err:?}");
}

#[tokio::test]
async fn ssh_user_comes_from_url() {
    let Some(f) = ssh_fixture() else { return };
    // The server admits only SSH_USER (the writes above connect as it). A URL naming
    // `git` must therefore fail authentication with a clear error, not fall back silently.
    // (scp-like URLs carry no port, so their parsing is covered by the unit tests.)
    let mut c = ssh_cfg(&f, "correct horse", &f.server.known_hosts, "wrong-user");
    c.url = f.url.replace(&format!("{SSH_USER}@"), "git@");
    let err = StateStore::open(StoreConfig::Git(c)).await.unwrap_err();
    assert!(matches!(err, StoreError::AuthFailed { .. }), "{err:?}");
    assert!(err.to_string().contains("\"git\""), "{err}");
}

// ---------------------------------------------------------------------------------------------
// HTTPS with basic auth

fn https_cfg(url: &str, work: &Path, password: &str, insecure: bool) -> GitConfig {
    let mut c = cfg(url, work);
    c.auth = GitAuth::Basic {
        username: "alice".into(),
        password: password.into(),
    };
    c.insecure_skip_tls_verify = insecure;
    c
}

#[tokio::test]
async fn https_basic_auth_and_tls_verification() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(srv) = https_git_server(tmp.path()) else {
        return;
    };
    init_bare(&srv.repos.join("state.git"), "main").unwrap();
    let url = srv.url("state.git");

    // TLS verification is on by default: a self-signed certificate is refused.
    let err = StateStore::open(StoreConfig::Git(https_cfg(
        &url,
        &tmp.path().join("w1"),
        "secret",
        false,
    )))
    .await
    .unwrap_err();
    assert!(matches!(err, StoreError::Tls { .. }), "{err:?}");

    // Wrong password: authentication failed, and the password is not in the message.
    let err = StateStore::open(StoreConfig::Git(https_cfg(
        &url,
        &tmp.path().join("w2"),
        "wrong-pw",
        true,
    )))
    .await
    .unwrap_err();
    assert!(matches!(err, StoreError::AuthFailed { .. }), "{err:?}");
    assert!(!err.to_string().contains("wrong-pw"));

    // Marked insecure, with the right password: writes land.
    let store = open(https_cfg(&url, &tmp.path().join("w3"), "secret", true)).await;
    store.validate().await.unwrap();
    let out = store
        .write(put("wp-https", "dev/https.yaml", "over https\n"))
        .await
        .unwrap();
    let clone = cli_clone(
        tmp.path(),
        &srv.repos.join("state.git").display().to_string(),
        "main",
    );
    assert_eq!(tree_files(&clone)["dev/https.yaml"], b"over https\n");
    assert_eq!(git(&clone, &["rev-parse", "HEAD"]).trim(), out.version_id);
    assert!(srv.cert.exists());
}

#[tokio::test]
async fn stores_on_one_branch_share_a_worker() {
    let tmp = tempfile::tempdir().unwrap();
    let bare = tmp.path().join("state.git");
    init_bare(&bare, "main").unwrap();
    let mut a = GitConfig::new(file_url(&bare), "main", tmp.path().join("wa"));
    a.path = "store-a".into();
    a.batch_window = Duration::from_millis(300);
    let mut b = a.clone();
    b.path = "store-b".into();
    b.work_dir = tmp.path().join("wb");
    let (sa, sb) = (open(a).await, open(b).await);
    let before = commit_count(&bare, "main");
    let (ra, rb) = tokio::join!(
        sa.write(put("wp-a", "dev/a.yaml", "a\n")),
        sb.write(put("wp-b", "dev/b.yaml", "b\n")),
    );
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    assert_eq!(ra.version_id, rb.version_id, "one commit for both stores");
    assert_eq!(commit_count(&bare, "main"), before + 1);
    let clone = cli_clone(tmp.path(), &file_url(&bare), "main");
    let files = tree_files(&clone);
    assert_eq!(files["store-a/dev/a.yaml"], b"a\n");
    assert_eq!(files["store-b/dev/b.yaml"], b"b\n");
    assert_eq!(
        git(&clone, &["log", "-1", "--format=%s"]).trim(),
        "Update from: wp-a, wp-b"
    );
}

#[tokio::test]
async fn reader_snapshot_sees_one_directory_and_skips_unchanged_heads() {
    let tmp = tempfile::tempdir().unwrap();
    let bare = tmp.path().join("state.git");
    init_bare(&bare, "main").unwrap();
    let writer = open(cfg(&file_url(&bare), &tmp.path().join("w"))).await;
    writer
        .write(put("a", "dest/resources/a.yaml", "a: 1\n"))
        .await
        .unwrap();
    writer
        .write(put("b", "other/b.yaml", "b: 1\n"))
        .await
        .unwrap();
    let reader = open(cfg(&file_url(&bare), &tmp.path().join("r"))).await;
    let s1 = reader.snapshot("dest", None).await.unwrap();
    assert_eq!(
        s1.files.clone().unwrap(),
        vec![("dest/resources/a.yaml".to_string(), b"a: 1\n".to_vec())]
    );
    let same = reader.snapshot("dest", Some(&s1.version)).await.unwrap();
    assert_eq!(same.version, s1.version);
    assert!(same.files.is_none(), "unchanged head: nothing read");
    writer
        .write(put("a", "dest/resources/a.yaml", "a: 2\n"))
        .await
        .unwrap();
    let s2 = reader.snapshot("dest", Some(&s1.version)).await.unwrap();
    assert_ne!(s2.version, s1.version);
    assert_eq!(s2.files.unwrap()[0].1, b"a: 2\n".to_vec());
    // A repository that does not exist is refused when the store is opened.
    let missing = StateStore::open(StoreConfig::Git(cfg(
        &file_url(&tmp.path().join("nope.git")),
        &tmp.path().join("m"),
    )))
    .await;
    assert!(
        matches!(missing, Err(StoreError::RepositoryMissing { .. })),
        "{:?}",
        missing.err()
    );
    // An empty one reads as an empty directory.
    let empty = tmp.path().join("empty.git");
    init_bare(&empty, "main").unwrap();
    let unborn = open(cfg(&file_url(&empty), &tmp.path().join("e")))
        .await
        .snapshot("dest", None)
        .await
        .unwrap();
    assert_eq!(unborn.files, Some(vec![]), "{unborn:?}");
}

/// A write whose requester stopped waiting before its batch ran (a cancelled reconcile,
/// a platform shutting down) is not committed; the writes still awaited in the same
/// batch are.
#[tokio::test]
async fn a_write_nobody_awaits_any_more_is_not_made() {
    let tmp = tempfile::tempdir().unwrap();
    let bare = tmp.path().join("state.git");
    init_bare(&bare, "main").unwrap();
    let mut c = cfg(&file_url(&bare), &tmp.path().join("work"));
    c.batch_window = Duration::from_millis(500);
    let store = open(c).await;
    let abandoned = tokio::time::timeout(
        Duration::from_millis(50),
        store.write(put("gone", "gone.yaml", "a: 1\n")),
    )
    .await;
    assert!(
        abandoned.is_err(),
        "the write was still in its batch window"
    );
    let kept = store
        .write(put("kept", "kept.yaml", "b: 2\n"))
        .await
        .unwrap();
    assert!(kept.changed);
    let tree = git_cli(&bare, &["ls-tree", "-r", "--name-only", "main"]);
    assert!(tree.contains("kept.yaml"), "{tree}");
    assert!(!tree.contains("gone.yaml"), "{tree}");
}
