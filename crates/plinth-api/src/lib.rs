//! Kratix-compatible API types for Plinth (`platform.kratix.io/v1alpha1`).
//!
//! * [`kinds`]: every Kratix kind as a Rust type with `kube::CustomResource` derives
//!   (Promise, Destination, GitStateStore, BucketStateStore, Work, WorkPlacement,
//!   PromiseRelease, PromiseRevision, ResourceBinding, HealthRecord, DryRun), plus the embedded
//!   [`Pipeline`] object.
//! * [`constants`]: labels, annotations, finalizers, condition types and reasons.
//! * [`names`]: deterministic, DNS-1123-safe generated names.
//! * [`hash`]: md5 helpers used for change detection and workload group ids.
//! * [`crds`]: the CRD manifests generated from the types, and the resource-request CRD
//!   transformation a Promise's `spec.api` goes through.
//!
//! Every type round-trips Kratix YAML losslessly: fields Plinth does not model are kept
//! in `extra` maps (`#[serde(flatten)]`). The generated CRDs do not publish those maps:
//! like Kratix's, they type every field and keep unknown fields only where Kratix does.
#![deny(missing_docs)]
// kube-derive `printcolumn(...)` entries repeat `type_ = "string"`, which this lint misreads
// as a duplicated attribute.
#![allow(clippy::duplicated_attributes)]

pub mod constants;
pub mod contract;
pub mod crds;
pub mod decode;
pub mod duration;
mod error;
pub mod events;
pub mod hash;
pub mod kinds;
pub mod kube_error;
pub mod metrics;
pub mod names;
pub mod paths;
pub mod pipeline;
pub mod pipeline_pod;
pub mod request_crd;
pub mod schedule;
mod schema;
pub mod secrets;
pub mod security;
pub mod work_content;

pub use error::{ApiError, cause_chain};
pub use kinds::*;
pub use pipeline::{Pipeline, WorkflowAction, WorkflowType};

/// The API group of every Kratix kind.
pub const GROUP: &str = "platform.kratix.io";
/// The API version of every Kratix kind.
pub const VERSION: &str = "v1alpha1";
/// `apiVersion` string of every Kratix kind: `platform.kratix.io/v1alpha1`.
pub const API_VERSION: &str = "platform.kratix.io/v1alpha1";
