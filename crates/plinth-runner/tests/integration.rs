//! Integration tests of the pipeline runner, in one test binary: one link instead of one per file.
//! Each file beside this one is a module; nextest still runs every test in its own
//! process. The shared helpers are declared here once.

#![allow(dead_code)]

mod common;

mod cronjobs;
mod engine;
mod executor;
mod in_process;
mod jobs;
mod kratix_job;
