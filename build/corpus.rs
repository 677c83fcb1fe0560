//! Build script of the crates whose tests read the Kratix corpus (real Kratix YAML kept
//! outside the repository).
//!
//! The corpus is found at `$PLINTH_CORPUS` (relative to the checkout's root), or else at `../shared/corpus` beside the
//! checkout. Its absolute path reaches the tests as the compile-time variable
//! `PLINTH_CORPUS_DIR`; when it is absent the `corpus_absent` cfg is set, and the tests
//! that need it are marked ignored (`#[cfg_attr(corpus_absent, ignore = "...")]`), so
//! the test runner reports them as skipped instead of failing or passing vacuously.

use std::path::PathBuf;

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
    if dir.is_dir() {
        println!("cargo::rerun-if-changed={}", dir.display());
    } else {
        // Cargo walks a watched directory recursively, so watching an ancestor of a
        // missing corpus could mean walking the whole filesystem (or the checkout and its
        // target directory) on every build. Watch only this script; setting or changing
        // PLINTH_CORPUS is what makes a corpus appear.
        println!("cargo::rerun-if-changed=../../build/corpus.rs");
        println!("cargo::rustc-cfg=corpus_absent");
    }
}
