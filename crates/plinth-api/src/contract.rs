//! The files-and-environment contract between Kratix and pipeline containers.

/// Directory holding `object.yaml` (read-only in user containers).
pub const INPUT_DIR: &str = "/kratix/input";
/// Directory whose files become workloads.
pub const OUTPUT_DIR: &str = "/kratix/output";
/// Directory for `status.yaml`, `destination-selectors.yaml`, `workflow-control.yaml`.
pub const METADATA_DIR: &str = "/kratix/metadata";
/// Root of the work-creator's view (`--input-directory`).
pub const WORK_CREATOR_ROOT: &str = "/work-creator-files";
/// The pipeline output as the work-creator sees it.
pub const WORK_CREATOR_INPUT_DIR: &str = "/work-creator-files/input";
/// The metadata directory as the work-creator and status-writer see it.
pub const WORK_CREATOR_METADATA_DIR: &str = "/work-creator-files/metadata";
/// The promise-scheduling ConfigMap mount.
pub const WORK_CREATOR_KRATIX_SYSTEM_DIR: &str = "/work-creator-files/kratix-system";
/// The promise-scheduling file (`{matchLabels, source: promise}` list).
pub const PROMISE_SCHEDULING_PATH: &str = "/work-creator-files/kratix-system/promise-scheduling";

/// Sub-directory of the work-creator root holding the pipeline output.
pub const WORK_CREATOR_INPUT_SUBDIR: &str = "input";
/// Sub-directory of the work-creator root holding metadata.
pub const WORK_CREATOR_METADATA_SUBDIR: &str = "metadata";
/// Sub-directory of the work-creator root holding the scheduling ConfigMap.
pub const WORK_CREATOR_KRATIX_SYSTEM_SUBDIR: &str = "kratix-system";

/// The input object file name.
pub const OBJECT_FILE: &str = "object.yaml";
/// Status to merge into the object.
pub const STATUS_FILE: &str = "status.yaml";
/// Workload-group scheduling.
pub const DESTINATION_SELECTORS_FILE: &str = "destination-selectors.yaml";
/// Suspend/retry requests.
pub const WORKFLOW_CONTROL_FILE: &str = "workflow-control.yaml";
/// Promise scheduling file name inside the kratix-system mount.
pub const PROMISE_SCHEDULING_FILE: &str = "promise-scheduling";
/// Key of the scheduling ConfigMap.
pub const PROMISE_SCHEDULING_CONFIGMAP_KEY: &str = "destinationSelectors";

/// Kratix environment variables injected into every pipeline container.
pub mod env {
    /// `configure` / `delete`.
    pub const WORKFLOW_ACTION: &str = "KRATIX_WORKFLOW_ACTION";
    /// `promise` / `resource`.
    pub const WORKFLOW_TYPE: &str = "KRATIX_WORKFLOW_TYPE";
    /// Promise name.
    pub const PROMISE_NAME: &str = "KRATIX_PROMISE_NAME";
    /// Pipeline name.
    pub const PIPELINE_NAME: &str = "KRATIX_PIPELINE_NAME";
    /// Kind of the object (`Promise` or the request kind).
    pub const OBJECT_KIND: &str = "KRATIX_OBJECT_KIND";
    /// API group of the object.
    pub const OBJECT_GROUP: &str = "KRATIX_OBJECT_GROUP";
    /// API version of the object.
    pub const OBJECT_VERSION: &str = "KRATIX_OBJECT_VERSION";
    /// Name of the object.
    pub const OBJECT_NAME: &str = "KRATIX_OBJECT_NAME";
    /// Namespace of the object ("" for Promises).
    pub const OBJECT_NAMESPACE: &str = "KRATIX_OBJECT_NAMESPACE";
    /// Plural resource name of the object.
    pub const CRD_PLURAL: &str = "KRATIX_CRD_PLURAL";
    /// `true` for cluster-scoped objects (Promises).
    pub const CLUSTER_SCOPED: &str = "KRATIX_CLUSTER_SCOPED";
    /// `true` for dry runs.
    pub const DRY_RUN: &str = "KRATIX_DRY_RUN";
    /// `true` in the status-writer of the last pipeline of a workflow.
    pub const IS_LAST_PIPELINE: &str = "IS_LAST_PIPELINE";
    /// Overrides [`super::INPUT_DIR`].
    pub const INPUT_DIR: &str = "INPUT_DIR";
    /// Overrides [`super::OUTPUT_DIR`].
    pub const OUTPUT_DIR: &str = "OUTPUT_DIR";
    /// Overrides [`super::METADATA_DIR`] (Plinth extension).
    pub const METADATA_DIR: &str = "METADATA_DIR";
    /// Log prefix.
    pub const LOGGER_PREFIX: &str = "KRATIX_LOGGER_PREFIX";
    /// Trace context from the pod annotations.
    pub const TRACE_PARENT: &str = "KRATIX_TRACE_PARENT";
    /// Trace context from the pod annotations.
    pub const TRACE_STATE: &str = "KRATIX_TRACE_STATE";
}
