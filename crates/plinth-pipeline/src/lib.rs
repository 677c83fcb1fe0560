//! The `/kratix` pipeline contract and the pipeline adapter roles
//! (reader, work-creator, status-writer).
//!
//! Every pipeline Job runs three adapter containers around the user's containers:
//!
//! * [`reader`]: writes the Promise or resource request to `/kratix/input/object.yaml`;
//! * [`work_creator`]: turns `/kratix/output` (plus destination selectors) into a Work;
//! * [`health_state_creator`] (health checks at a Destination): turns
//!   `/kratix/output/health-status.yaml` into a HealthRecord;
//! * [`status_writer`]: merges `/kratix/metadata/status.yaml` into the object's status and
//!   handles suspend/retry requests (`workflow-control.yaml`).
//!
//! [`contract`] (defined in `plinth-api`, where the controllers and the agent build Pods
//! from it) holds the paths, file names and environment variable names; [`sdk`] is a
//! small library for pipeline authors writing their containers in Rust. The pure parts
//! ([`work_creator::build_workload_groups`], [`status_writer::merge_status`]) do no I/O
//! beyond reading the given directories; the `run_*` functions talk to the control plane
//! only through a `kube::Client`.
#![deny(missing_docs)]

pub mod control;
mod error;
pub mod health_state_creator;
pub mod object;
pub mod reader;
pub mod sdk;
pub mod selectors;
pub mod status_writer;
pub mod work_creator;
mod yaml;

pub use error::PipelineError;
pub use plinth_api::WorkflowType;
pub use plinth_api::contract;
