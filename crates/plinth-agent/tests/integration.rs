//! Integration tests of the destination agent, in one test binary: one link instead of one per file.
//! Each file beside this one is a module; nextest still runs every test in its own
//! process. The shared helpers are declared here once.

#![allow(dead_code)]

mod support;

mod field_ownership;
mod health_agent;
mod one_off_jobs;
mod quiet;
