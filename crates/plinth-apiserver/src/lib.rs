//! Plinth's embedded Kubernetes-compatible API server.
//!
//! Storage is SQLite (current objects plus an append-only revision log whose row id is
//! the global `resourceVersion`, as k3s's kine does); the HTTP surface is one axum
//! `Router` that in-process controllers use through `kube::Client::new(router, ns)`
//! and that kubectl reaches over HTTPS on loopback.

pub mod resource;
