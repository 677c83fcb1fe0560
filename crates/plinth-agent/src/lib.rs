//! The Destination-side agent: reads one Destination's directory of a state store (a Git
//! repository or an S3-compatible bucket, read-only) and applies its documents to a
//! Kubernetes API with server-side apply (field manager [`FIELD_MANAGER`]), recording what
//! it applied in an inventory object in the target and pruning what left the store.
//!
//! Order of a pass ([`Agent::sync_once`]): Namespaces and CustomResourceDefinitions first
//! (waiting for CRDs to be Established), then the documents under `dependencies/`, then
//! everything else (`resources/`); within each, ResourceBindings, ServiceAccounts,
//! Secrets, ConfigMaps and RBAC go before the rest, so a resource request's binding exists
//! when the request is created. `.kratix/` index files are skipped. A document whose kind
//! the target does not serve yet is reported and retried on the next pass, never dropped.
//!
//! Re-applying an unchanged store makes no write to the API: an object is skipped when the
//! inventory records the same document hash and the live object still holds every field of
//! the document.
//!
//! A Job is a one-off run: once created with a given `spec`, it is not created again when
//! it leaves the cluster (its `ttlSecondsAfterFinished`, or a hand delete), only when its
//! `spec` in the store changes; then the old Job is deleted and the new one created, since
//! a Job's template cannot be changed in place. Its status reads "already ran".
//!
//! The inventory ([`inventory`]) is a ConfigMap `plinth-agent-<name>` in the namespace
//! [`INVENTORY_NAMESPACE`]: `inventory.json` lists every applied object (apiVersion, kind,
//! namespace, name, document hash, source file) and `status.json` holds the last pass's
//! outcome and the readiness of each object ([`status::AgentStatus`]), which
//! `plinth agent status` prints.
//!
//! In-process use (what `plinth worker` and `plinth up` do):
//! ```no_run
//! # async fn demo(client: kube::Client) -> Result<(), plinth_agent::AgentError> {
//! use plinth_agent::*;
//! use plinth_statestore::{GitConfig, StoreConfig};
//! let source = StoreConfig::Git(GitConfig::new("file:///srv/state.git", "main", "/tmp/agent-clone"));
//! let mut agent = Agent::new(AgentConfig::new("worker-1", source, "worker-1"), client).await?;
//! let report = agent.sync_once().await;          // one pass
//! println!("{} applied, {} errors", report.applied, report.errors.len());
//! // or: agent.run(shutdown_future).await;       // loop every `interval`, backing off on errors
//! # Ok(()) }
//! ```

//!
//! With [`health::HealthAgent`] (`--health`), the agent also runs the cluster's
//! HealthDefinitions as CronJobs and writes the HealthRecords their checks produce to a
//! health store (see [`health`]).

#![deny(missing_docs)]

mod agent;
pub mod credentials;
pub mod documents;
pub mod health;
pub mod inventory;
mod jobs;
mod kube_apply;
pub mod object_ref;
mod observe;
pub mod readiness;
mod report;
pub mod status;

pub use agent::{Agent, AgentConfig, AgentError, RETRY_AFTER_ERRORS};
pub use object_ref::ObjectRef;
pub use report::SyncReport;
pub use status::AgentStatus;

/// Field manager of every server-side apply the agent sends.
pub const FIELD_MANAGER: &str = plinth_api::constants::field_managers::AGENT;
/// Namespace of the agent's inventory ConfigMaps.
pub const INVENTORY_NAMESPACE: &str = "plinth-agent";
/// Default interval between passes.
pub const DEFAULT_INTERVAL: std::time::Duration = std::time::Duration::from_secs(30);
