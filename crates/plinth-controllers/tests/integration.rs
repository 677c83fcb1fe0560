//! Integration tests of the controllers, in one test binary: one link instead of one per file.
//! Each file beside this one is a module; nextest still runs every test in its own
//! process. The shared helpers are declared here once.

#![allow(dead_code)]

mod health_support;
mod placement_support;
#[path = "../../plinth-statestore/tests/support/mod.rs"]
mod statestore_support;

mod compound_requirements;
mod credential_rotation;
mod destinations;
mod fanout;
mod health;
mod health_agent_outage;
mod health_alerts;
mod health_freshness;
mod health_source_records;
mod health_streams;
mod kratix_config;
mod metrics_pruning;
mod promise_lifecycle;
mod promise_release;
mod replace_after_store_loss;
mod resource_bindings;
mod scheduling;
mod status_writes;
