//! What the agent's tests share: a Git state store (a bare repository over `file://`)
//! and a working copy that commits and pushes to it, as a platform's writer would.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use plinth_statestore::{GitConfig, StoreConfig};

/// Runs `git` in `dir`, with an identity, and fails the test on an error.
pub fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .current_dir(dir)
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A bare repository on branch `main` with a working copy pushing to it; removed with
/// the value.
pub struct StoreRepo {
    root: tempfile::TempDir,
    bare: PathBuf,
    work: PathBuf,
}

impl StoreRepo {
    /// An empty store.
    pub fn new() -> StoreRepo {
        let root = tempfile::tempdir().unwrap();
        let bare = root.path().join("state.git");
        let work = root.path().join("work");
        std::fs::create_dir_all(&work).unwrap();
        git(
            root.path(),
            &["init", "-q", "--bare", "-b", "main", bare.to_str().unwrap()],
        );
        git(&work, &["init", "-q", "-b", "main"]);
        git(&work, &["remote", "add", "origin", bare.to_str().unwrap()]);
        StoreRepo { root, bare, work }
    }

    /// Writes `content` at `rel` (relative to the store's root), commits and pushes.
    pub fn commit(&self, rel: &str, content: &str) {
        let p = self.work.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
        git(&self.work, &["add", "-A"]);
        git(&self.work, &["commit", "-q", "-m", rel]);
        git(&self.work, &["push", "-q", "origin", "main"]);
    }

    /// How an agent reads the store (its clone beside the repository).
    pub fn source(&self) -> StoreConfig {
        StoreConfig::Git(GitConfig::new(
            format!("file://{}", self.bare.display()),
            "main",
            self.root.path().join("clone"),
        ))
    }
}
