//! Integration tests of the embedded API server, in one test binary: one link instead of one per file.
//! Each file beside this one is a module; nextest still runs every test in its own
//! process. The shared helpers are declared here once.

#![allow(dead_code)]

mod access_reviews;
mod admission_webhooks;
mod autoscaling;
mod connection_flood;
mod crud;
mod data_bounded;
mod https;
mod kube_fidelity;
mod lifecycle;
mod list_snapshot;
mod metrics_cardinality;
mod query_params;
mod rbac_escalation;
mod scale_subresource;
mod server_side_apply;
mod subresource_tables;
mod watch_catch_up;
mod watch_list;
mod workloads;
