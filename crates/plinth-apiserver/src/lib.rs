//! Plinth's embedded Kubernetes-compatible API server.
//!
//! Storage is SQLite (current objects plus an append-only revision log whose row id is
//! the global `resourceVersion`, as k3s's kine does); the HTTP surface is one axum
//! `Router` that in-process controllers use through `kube::Client::new(router, ns)`
//! and that kubectl reaches over HTTPS on loopback.
#![deny(missing_docs)]

pub mod openapi;
pub mod rbac;
pub mod resource;
pub mod schema;
pub mod table;

pub mod admission;
mod app;
pub mod auth;
mod authz;
mod csr;
mod default_rbac;
mod defaults;
mod discovery;
pub mod error;
mod escalation;
pub mod expiry;
mod gc;
mod hpa;
mod kinds;
mod kratix;
pub mod listener;
mod logs;
mod meta_decode;
pub mod metrics;
pub mod patch;
mod protobuf;
mod rbac_validation;
pub mod registry;
mod reserved;
mod router;
pub mod selector;
mod server;
mod snapshot;
mod ssa;
pub mod store;
#[cfg(feature = "testing")]
pub mod testing;
mod timestamp;
pub mod tls;
pub mod tokens;
pub mod usage;
pub mod validation;
mod verbs;
mod watch;
mod webhook;

pub use app::{is_dns1123_label, is_dns1123_subdomain};
pub use auth::Identity;
pub use error::{ApiError, Error};
pub use server::{ApiServer, ExtraRoutes, STANDARD_NAMESPACES, ServerConfig};
