//! End-to-end tests of the `plinth` binary, in one test binary: one link instead of one per file.
//! Each file beside this one is a module; nextest still runs every test in its own
//! process. The shared helpers are declared here once.

#![allow(dead_code)]

#[path = "support/bad_promises.rs"]
mod bad_promises;
mod support;
#[path = "support/view.rs"]
mod view;

mod agent;
mod authoring;
mod cli_errors;
mod compound;
mod compound_versions;
mod connection_flood;
mod container_image;
mod data_dir_bounded;
mod dry_run;
mod durability;
mod e2e_core;
mod e2e_many_requests;
mod e2e_redis;
mod fresh_start;
mod gitops;
mod health_cli;
mod health_destination;
mod kill_under_load;
mod kubectl;
mod kubectl_admission;
mod kubectl_create;
mod kubectl_workloads;
mod marketplace;
mod observability;
mod operator;
mod operator_failover;
mod operator_webhooks;
mod quickstart;
mod secret_redaction;
mod startup_errors;
mod status_cli;
mod system_kratix_config;
mod system_rbac;
mod system_reconcile_after_failure;
mod system_workflow_control;
mod takeover;
mod upgrades;
mod user_rbac;
mod web_view;
mod worker;
mod workflows;
