//! Build script of the crates whose tests read the Kratix corpus (real Kratix YAML kept
//! outside the repository).
//!
//! The corpus is found at `$PLINTH_CORPUS` (relative to the checkout's root), or else at `../shared/corpus` beside the
//! checkout. Its absolute path reaches the tests as the compile-time variable
//! `PLINTH_CORPUS_DIR`; when it is absent the `corpus_absent` cfg is set, and the tests
//! that need it are marked ignored (`#[cfg_attr(corpus_absent, ignore = "...")]`), so
//! the test runner reports them as skipped instead of failing or passing vacuously.

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo::rustc-check-cfg=cfg(corpus_absent)");
    println!("cargo::rerun-if-env-changed=PLINTH_CORPUS");
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    // Crates live at <checkout>/crates/<name>; a relative PLINTH_CORPUS is taken from the
    // checkout's root, as scripts/test.sh reads it.
    let checkout = manifest.join("../..");
    let dir = match std::env::var_os("PLINTH_CORPUS") {
        Some(d) if !d.is_empty() => checkout.join(d),
        _ => checkout.join("../shared/corpus"),
    };
    let dir = dir.canonicalize().unwrap_or(dir);
    println!("cargo::rustc-env=PLINTH_CORPUS_DIR={}", dir.display());
    // Watching a path that does not exist would rebuild on every run; watch the nearest
    // existing ancestor instead, whose modification time changes when the corpus appears.
    println!(
        "cargo::rerun-if-changed={}",
        nearest_existing(&dir).display()
    );
    if !dir.is_dir() {
        println!("cargo::rustc-cfg=corpus_absent");
    }
}

fn nearest_existing(path: &Path) -> &Path {
    path.ancestors().find(|p| p.exists()).unwrap_or(path)
}
