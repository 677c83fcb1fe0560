//! Integration tests of the state stores, in one test binary: one link instead of one per file.
//! Each file beside this one is a module; nextest still runs every test in its own
//! process. The shared helpers are declared here once.

#![allow(dead_code)]

mod support;

mod bucket_store;
mod git_store;
mod git_timeouts;
mod github_app;
mod health_writer;
