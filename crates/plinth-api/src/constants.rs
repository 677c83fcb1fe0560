//! Names Kratix gives to labels, annotations, finalizers, conditions and fixed objects.

/// Namespace of Kratix's own objects (promise workflows, static-dependency Works).
pub const SYSTEM_NAMESPACE: &str = "kratix-platform-system";
/// Controller ServiceAccount name (in [`SYSTEM_NAMESPACE`]) that dynamic RBAC binds to.
pub const CONTROLLER_SERVICE_ACCOUNT: &str = "kratix-platform-controller-manager";
/// Namespace on Destinations that canary files create.
pub const WORKER_SYSTEM_NAMESPACE: &str = "kratix-worker-system";
/// Name of the canary ConfigMap.
pub const CANARY_CONFIGMAP_NAME: &str = "kratix-info";
/// `data.canary` value of the canary ConfigMap.
pub const CANARY_CONTENT: &str =
    "this confirms your infrastructure is reading from Kratix state stores";
/// Commit name of canary writes.
pub const CANARY_WORKLOAD_NAME: &str = "kratix-canary";
/// Canary file for the dependencies directory (nestedByMetadata).
pub const CANARY_NAMESPACE_FILE: &str = "kratix-canary-namespace.yaml";
/// Canary file for the resources directory (nestedByMetadata).
pub const CANARY_CONFIGMAP_FILE: &str = "kratix-canary-configmap.yaml";
/// Workload group id of the default group: md5(".").
pub const DEFAULT_WORKLOAD_GROUP_ID: &str = "5058f1af8388633f609cadb75a75dc9d";
/// Directory of the default workload group.
pub const DEFAULT_WORKLOAD_GROUP_DIRECTORY: &str = ".";
/// PromiseRevision version when the Promise has no version label.
pub const VERSION_NOT_SET: &str = "not-set";
/// ResourceBinding version meaning "follow the latest revision".
pub const VERSION_LATEST: &str = "latest";
/// Maximum length of a pipeline ID `<promise>-<type>-<action>-<pipeline>` (webhook rule).
pub const MAX_PIPELINE_ID_LEN: usize = 60;
/// Default workflow re-run and WorkPlacement rewrite interval (10 h), in seconds.
pub const DEFAULT_RECONCILIATION_INTERVAL_SECS: u64 = 10 * 60 * 60;
/// Minimum user-supplied reconciliation interval (1 min), in seconds.
pub const MIN_RECONCILIATION_INTERVAL_SECS: u64 = 60;

/// API groups no CustomResourceDefinition may use besides the ones Plinth generates
/// itself: Kratix's group, Syntasso's group for Kratix Enterprise kinds, and Plinth's own
/// group. (Kubernetes' own `*.k8s.io` / `*.kubernetes.io` groups are reserved as well.)
pub const RESERVED_API_GROUPS: [&str; 3] = [crate::GROUP, crate::HEALTH_SOURCE_GROUP, "plinth.dev"];

/// Kubernetes' default user-facing ClusterRoles and the labels that aggregate other
/// ClusterRoles into them (the clusterrole-aggregation controller).
pub mod rbac {
    /// Every right, everywhere.
    pub const CLUSTER_ADMIN: &str = "cluster-admin";
    /// Namespace administrator: `edit` plus Roles and RoleBindings.
    pub const ADMIN: &str = "admin";
    /// Read/write on most namespaced objects.
    pub const EDIT: &str = "edit";
    /// Read-only on most namespaced objects (no Secrets).
    pub const VIEW: &str = "view";
    /// Label that aggregates a ClusterRole's rules into `admin`.
    pub const AGGREGATE_TO_ADMIN: &str = "rbac.authorization.k8s.io/aggregate-to-admin";
    /// Label that aggregates a ClusterRole's rules into `edit`.
    pub const AGGREGATE_TO_EDIT: &str = "rbac.authorization.k8s.io/aggregate-to-edit";
    /// Label that aggregates a ClusterRole's rules into `view`.
    pub const AGGREGATE_TO_VIEW: &str = "rbac.authorization.k8s.io/aggregate-to-view";
    /// Label Kubernetes puts on its bootstrap RBAC objects (value `rbac-defaults`).
    pub const BOOTSTRAPPING: &str = "kubernetes.io/bootstrapping";
    /// Annotation telling the API server to keep a bootstrap object up to date.
    pub const AUTOUPDATE: &str = "rbac.authorization.kubernetes.io/autoupdate";
}

/// Label keys.
pub mod labels {
    /// Promise version → revision, `status.version`.
    pub const PROMISE_VERSION: &str = "kratix.io/promise-version";
    /// Ownership/selection by Promise.
    pub const PROMISE_NAME: &str = "kratix.io/promise-name";
    /// Owning resource request.
    pub const RESOURCE_NAME: &str = "kratix.io/resource-name";
    /// Resource request namespace (only with pipelineNamespace).
    pub const RESOURCE_NAMESPACE: &str = "kratix.io/resource-namespace";
    /// Pipeline name.
    pub const PIPELINE_NAME: &str = "kratix.io/pipeline-name";
    /// Pipeline namespace (user RBAC).
    pub const PIPELINE_NAMESPACE: &str = "kratix.io/pipeline-namespace";
    /// `promise` | `resource`.
    pub const WORKFLOW_TYPE: &str = "kratix.io/workflow-type";
    /// `configure` | `delete`.
    pub const WORKFLOW_ACTION: &str = "kratix.io/workflow-action";
    /// Work type: `promise`, `resource`, `static-dependency`.
    pub const WORK_TYPE: &str = "kratix.io/work-type";
    /// Legacy, selectors only.
    pub const WORK_ACTION: &str = "kratix.io/work-action";
    /// Spec hash of a Job.
    pub const HASH: &str = "kratix.io/hash";
    /// Compared in job matching, never set.
    pub const PIPELINE_HASH: &str = "kratix.io/pipeline-hash";
    /// `app.kubernetes.io/managed-by` key.
    pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
    /// `app.kubernetes.io/managed-by` value on Jobs and pods.
    pub const MANAGED_BY_VALUE: &str = "Kratix";
    /// Parent Work of a WorkPlacement.
    pub const WORK: &str = "kratix.io/work";
    /// Workload group id of a WorkPlacement.
    pub const WORKLOAD_GROUP_ID: &str = "kratix.io/workload-group-id";
    /// Destination of a WorkPlacement.
    pub const TARGET_DESTINATION_NAME: &str = "kratix.io/targetDestinationName";
    /// `"true"` when a WorkPlacement's Destination no longer matches.
    pub const MISPLACED: &str = "kratix.io/misplaced";
    /// Plinth's: `"true"` on a resource request or Promise moves its misplaced Works
    /// (placed before the destination selectors changed) to Destinations that match now;
    /// removed once the move has started. On a WorkPlacement it moves that placement
    /// (e.g. off a Destination whose state store broke): the placement is removed and
    /// its group placed again on a Ready matching Destination.
    pub const RESCHEDULE: &str = "plinth.dev/reschedule";
    /// `"true"` on the current PromiseRevision.
    pub const LATEST_REVISION: &str = "kratix.io/latest-revision";
    /// PromiseRelease that installed a Promise.
    pub const PROMISE_RELEASE_NAME: &str = "kratix.io/promise-release-name";
    /// `"true"`: re-run the workflow from the start.
    pub const MANUAL_RECONCILIATION: &str = "kratix.io/manual-reconciliation";
    /// `"true"` on a Promise: re-run all its resource requests.
    pub const RECONCILE_RESOURCES: &str = "kratix.io/reconcile-resources";
    /// `"true"`: skip all reconciliation.
    pub const PAUSED: &str = "kratix.io/paused";
    /// `"true"`: set by the status-writer when a pipeline suspends or retries.
    pub const WORKFLOW_SUSPENDED: &str = "kratix.io/workflow-suspended";
    /// Internal: next configure run starts at pipeline 0.
    pub const RUN_FROM_START: &str = "internal.workflows.kratix.io/run-from-start";
    /// Dry-run plumbing.
    pub const DRY_RUN: &str = "kratix.io/dry-run";
    /// Dry-run plumbing.
    pub const DRY_RUN_SUMMARY: &str = "kratix.io/dry-run-summary";
    /// Dry-run plumbing.
    pub const DRY_RUN_OWNER: &str = "kratix.io/dry-run-owner";
    /// Dry-run plumbing.
    pub const DRY_RUN_PARENT: &str = "kratix.io/dry-run-parent";
    /// Compound Promise traceability.
    pub const PARENT_PROMISE_NAME: &str = "kratix.io/parent-promise-name";
    /// Compound Promise traceability.
    pub const PARENT_RESOURCE_NAME: &str = "kratix.io/parent-resource-name";
    /// Compound Promise traceability.
    pub const PARENT_RESOURCE_NAMESPACE: &str = "kratix.io/parent-resource-namespace";
    /// `app.kubernetes.io/part-of` key (Secrets with `selectiveCache`).
    pub const PART_OF: &str = "app.kubernetes.io/part-of";
    /// Value `true` of boolean labels.
    pub const TRUE: &str = "true";
}

/// Work types (`kratix.io/work-type` values).
pub mod work_type {
    /// Work from a promise configure pipeline.
    pub const PROMISE: &str = "promise";
    /// Work from a resource configure pipeline.
    pub const RESOURCE: &str = "resource";
    /// Work from `Promise.spec.dependencies`.
    pub const STATIC_DEPENDENCY: &str = "static-dependency";
}

/// `source` values of workload-group destination selectors.
pub mod selector_source {
    /// From the Promise's `destinationSelectors`.
    pub const PROMISE: &str = "promise";
    /// From a promise workflow's destination-selectors.yaml.
    pub const PROMISE_WORKFLOW: &str = "promise-workflow";
    /// From a resource workflow's destination-selectors.yaml.
    pub const RESOURCE_WORKFLOW: &str = "resource-workflow";
}

/// Annotation keys.
pub mod annotations {
    /// Per-Promise/PromiseRevision reconciliation interval.
    pub const RECONCILIATION_INTERVAL: &str = "kratix.io/reconciliation-interval";
    /// Skip resource-request cleanup when a PromiseRevision is deleted.
    pub const SKIP_RESOURCE_REQUEST_CLEANUP_ON_DELETE: &str =
        "kratix.io/skip-resource-request-cleanup-on-delete";
    /// Static-dependency Work update time.
    pub const LAST_UPDATED_AT: &str = "kratix.io/last-updated-at";
    /// Job → object namespace.
    pub const JOB_RESOURCE_NAMESPACE: &str = "kratix.io/job-resource-namespace";
    /// Job → object name.
    pub const JOB_RESOURCE_NAME: &str = "kratix.io/job-resource-name";
    /// Job → object kind.
    pub const JOB_RESOURCE_KIND: &str = "kratix.io/job-resource-kind";
    /// Job → object apiVersion.
    pub const JOB_RESOURCE_API_VERSION: &str = "kratix.io/job-resource-api-version";
    /// Trace context.
    pub const TRACE_PARENT: &str = "kratix.io/trace-parent";
    /// Trace context.
    pub const TRACE_STATE: &str = "kratix.io/trace-state";
    /// Trace context.
    pub const TRACE_TIMESTAMP: &str = "kratix.io/trace-timestamp";
    /// Trace context.
    pub const TRACE_GENERATION: &str = "kratix.io/trace-generation";
    /// Ephemeral dry-run RR.
    pub const DRY_RUN_RESOURCE_NAME: &str = "kratix.io/dry-run-resource-name";
    /// Ephemeral dry-run RR.
    pub const DRY_RUN_RESOURCE_NAMESPACE: &str = "kratix.io/dry-run-resource-namespace";
    /// Plinth's, `"true"` on a ResourceBinding the platform created for a request that had
    /// none: a binding with the request's labels that arrives later (from a compound
    /// Promise's output or a user) replaces it, and the platform deletes this one. A
    /// binding without it is never deleted for another.
    pub const AUTO_CREATED_BINDING: &str = "plinth.dev/auto-created";
}

/// Field managers of Plinth's writers that other components recognise.
pub mod field_managers {
    /// The Destination agent's server-side applies: an object whose managed fields hold
    /// an `Apply` entry of this manager is declared by a Destination's output, and the
    /// agent takes back a declared field another manager changes.
    pub const AGENT: &str = "plinth-agent";
}

/// Finalizers.
pub mod finalizers {
    /// Promise / PromiseRevision: delete resource requests.
    pub const RESOURCE_REQUEST_CLEANUP: &str = "kratix.io/resource-request-cleanup";
    /// Promise: dynamic controller RBAC etc.
    pub const DYNAMIC_CONTROLLER_DEPENDANT_RESOURCES_CLEANUP: &str =
        "kratix.io/dynamic-controller-dependant-resources-cleanup";
    /// Promise: delete the API CRD.
    pub const API_CRD_CLEANUP: &str = "kratix.io/api-crd-cleanup";
    /// Promise: delete static-dependency Works.
    pub const DEPENDENCIES_CLEANUP: &str = "kratix.io/dependencies-cleanup";
    /// Promise / RR: delete workflow Jobs and objects.
    pub const WORKFLOWS_CLEANUP: &str = "kratix.io/workflows-cleanup";
    /// Promise / RR: run the delete workflow.
    pub const DELETE_WORKFLOWS: &str = "kratix.io/delete-workflows";
    /// Promise: delete revisions.
    pub const REVISION_CLEANUP: &str = "kratix.io/revision-cleanup";
    /// RR / Work: delete Works / WorkPlacements.
    pub const WORK_CLEANUP: &str = "kratix.io/work-cleanup";
    /// RR: delete the ResourceBinding.
    pub const RESOURCE_BINDING_CLEANUP: &str = "kratix.io/resource-binding-cleanup";
    /// WorkPlacement: remove files from the state store.
    pub const WORKPLACEMENT_REPO_CLEANUP: &str = "finalizers.workplacement.kratix.io/repo-cleanup";
    /// WorkPlacement (mode none): remove `.kratix` index files.
    pub const WORKPLACEMENT_KRATIX_DOT_FILES_CLEANUP: &str =
        "finalizers.workplacement.kratix.io/kratix-dot-files-cleanup";
    /// Destination with `cleanup: all`.
    pub const DESTINATION_CLEANUP: &str = "kratix.io/destination-cleanup";
    /// PromiseRelease: delete installed Promises.
    pub const PROMISE_CLEANUP: &str = "kratix.io/promise-cleanup";
    /// HealthRecord.
    pub const HEALTH_RECORD_CLEANUP: &str = "kratix.io/health-record-cleanup";
}

/// Values of a Promise's `status.status`.
pub mod promise_status {
    /// The Promise can fulfil resource requests.
    pub const AVAILABLE: &str = "Available";
    /// The Promise cannot fulfil resource requests (yet, or any more).
    pub const UNAVAILABLE: &str = "Unavailable";

    /// Whether a Promise's `status`, as JSON, says it is available.
    ///
    /// ```
    /// use plinth_api::constants::promise_status;
    /// assert!(promise_status::is_available(&serde_json::json!({"status": "Available"})));
    /// assert!(!promise_status::is_available(&serde_json::json!({"status": "Unavailable"})));
    /// assert!(!promise_status::is_available(&serde_json::Value::Null));
    /// ```
    pub fn is_available(status: &serde_json::Value) -> bool {
        status["status"] == AVAILABLE
    }
}

/// Condition types.
pub mod condition_types {
    /// Promise availability.
    pub const AVAILABLE: &str = "Available";
    /// Promise requirements.
    pub const REQUIREMENTS_FULFILLED: &str = "RequirementsFulfilled";
    /// Configure workflow state.
    pub const CONFIGURE_WORKFLOW_COMPLETED: &str = "ConfigureWorkflowCompleted";
    /// Works state.
    pub const WORKS_SUCCEEDED: &str = "WorksSucceeded";
    /// Overall state.
    pub const RECONCILED: &str = "Reconciled";
    /// Delete workflow state.
    pub const DELETE_WORKFLOW_COMPLETED: &str = "DeleteWorkflowCompleted";
    /// RR: Promise requirements met.
    pub const PROMISE_AVAILABLE: &str = "PromiseAvailable";
    /// Work / WorkPlacement / Destination / state store readiness.
    pub const READY: &str = "Ready";
    /// Work / WorkPlacement scheduling.
    pub const SCHEDULE_SUCCEEDED: &str = "ScheduleSucceeded";
    /// WorkPlacement write.
    pub const WRITE_SUCCEEDED: &str = "WriteSucceeded";
    /// PromiseRelease.
    pub const INSTALLED: &str = "Installed";
    /// ResourceBinding.
    pub const UPGRADE_SUCCEEDED: &str = "UpgradeSucceeded";
    /// DryRun.
    pub const COMPLETED: &str = "Completed";
    /// Plinth's: False while the object's last reconcile failed (the error is the
    /// message); True after it recovered; absent on an object that never failed.
    pub const RECONCILE_SUCCEEDED: &str = "ReconcileSucceeded";
}

/// Condition reasons.
pub mod reasons {
    /// Promise Available=True.
    pub const PROMISE_AVAILABLE: &str = "PromiseAvailable";
    /// Promise Available=False.
    pub const PROMISE_UNAVAILABLE: &str = "PromiseUnavailable";
    /// Paused label present.
    pub const PAUSED_RECONCILIATION: &str = "PausedReconciliation";
    /// A pipeline suspended itself.
    pub const WORKFLOW_SUSPENDED: &str = "WorkflowSuspended";
    /// ConfigureWorkflowCompleted=False while running.
    pub const PIPELINES_IN_PROGRESS: &str = "PipelinesInProgress";
    /// ConfigureWorkflowCompleted=False after a failure; Reconciled=False.
    pub const CONFIGURE_WORKFLOW_FAILED: &str = "ConfigureWorkflowFailed";
    /// ConfigureWorkflowCompleted=True (status-writer of the last pipeline).
    pub const PIPELINES_EXECUTED_SUCCESSFULLY: &str = "PipelinesExecutedSuccessfully";
    /// WorksSucceeded=True.
    pub const WORKS_SUCCEEDED: &str = "WorksSucceeded";
    /// WorksSucceeded=Unknown / Reconciled=Unknown.
    pub const WORKS_PENDING: &str = "WorksPending";
    /// WorksSucceeded=False / Reconciled=False.
    pub const WORKS_FAILING: &str = "WorksFailing";
    /// WorksSucceeded=False (misplaced).
    pub const WORKS_MISPLACED: &str = "WorksMisplaced";
    /// Reconciled=Unknown while a workflow runs.
    pub const WORKFLOW_PENDING: &str = "WorkflowPending";
    /// Reconciled=True.
    pub const RECONCILED: &str = "Reconciled";
    /// Reconciled=True for dry runs.
    pub const DRY_RUN_SUCCEEDED: &str = "DryRunSucceeded";
    /// Reconciled=Unknown: requirements not fulfilled.
    pub const REQUIREMENTS_NOT_FULFILLED: &str = "RequirementsNotFulfilled";
    /// Reconciled=Unknown after unpausing.
    pub const UNPAUSED: &str = "Unpaused";
    /// DeleteWorkflowCompleted=False.
    pub const DELETE_WORKFLOW_FAILED: &str = "DeleteWorkflowFailed";
    /// DeleteWorkflowCompleted=False while suspended.
    pub const DELETE_WORKFLOW_SUSPENDED: &str = "DeleteWorkflowSuspended";
    /// RR PromiseAvailable=False.
    pub const PROMISE_REQUIREMENTS_NOT_INSTALLED: &str = "PromiseRequirementsNotInstalled";
    /// Work: WorkPlacement writes failing.
    pub const WORKPLACEMENTS_FAILING: &str = "WorkplacementsFailing";
    /// WorkPlacement / Work misplaced.
    pub const DESTINATION_SELECTOR_MISMATCH: &str = "DestinationSelectorMismatch";
    /// WorkPlacement Ready=False.
    pub const MISPLACED: &str = "Misplaced";
    /// WorkPlacement ScheduleSucceeded=True.
    pub const SCHEDULED_TO_DESTINATION: &str = "ScheduledToDestination";
    /// Work unscheduled groups.
    pub const UNSCHEDULED_WORKLOADS: &str = "UnscheduledWorkloads";
    /// Work fully scheduled.
    pub const ALL_WORKPLACEMENTS_SCHEDULED: &str = "AllWorkplacementsScheduled";
    /// Work scheduling error.
    pub const FAILED_TO_SCHEDULE_WORKLOADS: &str = "FailedToScheduleWorkloads";
    /// WorkPlacement WriteSucceeded=True.
    pub const WORKLOADS_WRITTEN_TO_STATE_STORE: &str = "WorkloadsWrittenToStateStore";
    /// WorkPlacement Ready=True.
    pub const WORKLOADS_WRITTEN_TO_TARGET_DESTINATION: &str = "WorkloadsWrittenToTargetDestination";
    /// WorkPlacement write failure.
    pub const WORKLOADS_FAILED_WRITE: &str = "WorkloadsFailedWrite";
    /// State store Secret missing.
    pub const SECRET_NOT_FOUND: &str = "SecretNotFound";
    /// State store other error.
    pub const STATE_STORE_ERROR: &str = "StateStoreError";
    /// State store writer init failure.
    pub const ERROR_INITIALISING_WRITER: &str = "ErrorInitialisingWriter";
    /// State store permission check failure.
    pub const ERROR_VALIDATING_PERMISSIONS: &str = "ErrorValidatingPermissions";
    /// State store Ready=True.
    pub const STATE_STORE_READY: &str = "StateStoreReady";
    /// ReconcileSucceeded=False, and its Warning Event (Plinth's).
    pub const RECONCILE_FAILED: &str = "ReconcileFailed";
    /// Destination without a Ready condition yet.
    pub const DESTINATION_NOT_READY: &str = "DestinationNotReady";
    /// Destination's store missing.
    pub const STATE_STORE_NOT_FOUND: &str = "StateStoreNotFound";
    /// Destination's store not ready.
    pub const STATE_STORE_NOT_READY: &str = "StateStoreNotReady";
    /// Destination Ready=True with `initWorkloads.enabled: false`.
    pub const DESTINATION_READY: &str = "DestinationReady";
    /// Destination canary write failed.
    pub const STATE_STORE_WRITE_FAILED: &str = "StateStoreWriteFailed";
    /// Destination Ready=True after canary write.
    pub const TEST_DOCUMENTS_WRITTEN: &str = "TestDocumentsWritten";
    /// PromiseRelease installed.
    pub const INSTALLED_SUCCESSFULLY: &str = "InstalledSuccessfully";
    /// PromiseRelease fetch failure.
    pub const FAILED_TO_FETCH_PROMISE: &str = "FailedToFetchPromise";
    /// PromiseRelease: fetched Promise has no version label.
    pub const VERSION_LABEL_NOT_FOUND: &str = "VersionLabelNotFound";
    /// PromiseRelease: version mismatch.
    pub const VERSION_NOT_MATCHING: &str = "VersionNotMatching";
    /// PromiseRelease: apply failure.
    pub const FAILED_TO_CREATE_OR_UPDATE_PROMISE: &str = "FailedToCreateOrUpdatePromise";
    /// ResourceBinding upgrade running.
    pub const UPGRADE_IN_PROGRESS: &str = "UpgradeInProgress";
    /// ResourceBinding upgrade done.
    pub const UPGRADE_COMPLETE: &str = "UpgradeComplete";
    /// ResourceBinding upgrade failed.
    pub const UPGRADE_FAILED: &str = "UpgradeFailed";
    /// Promise Available=False: the API CRD serves no version.
    pub const NO_SERVED_VERSION: &str = "NoServedVersion";
    /// Promise RequirementsFulfilled=True.
    pub const REQUIREMENTS_INSTALLED: &str = "RequirementsInstalled";
    /// Work Ready=False while it is being deleted.
    pub const DELETING: &str = "Deleting";
    /// WorkPlacement WriteSucceeded=False: removing its files from the state store failed.
    pub const FAILED_DELETE_FILES_FROM_REPOSITORY: &str = "FailedDeleteFilesFromRepository";
}

/// Fixed condition/status messages.
pub mod messages {
    /// `status.message` while a pipeline runs.
    pub const PENDING: &str = "Pending";
    /// `status.message` of an RR after the last pipeline completes (if still Pending).
    pub const RESOURCE_REQUESTED: &str = "Resource requested";
    /// `status.message` of a Promise after the last pipeline completes (if still Pending).
    pub const PROMISE_CONFIGURED: &str = "Promise configured";
    /// `status.message` after a dry run.
    pub const DRY_RUN_EXECUTED: &str = "Dry run executed";
    /// ConfigureWorkflowCompleted=True message.
    pub const PIPELINES_COMPLETED: &str = "Pipelines completed";
    /// ConfigureWorkflowCompleted=False/PipelinesInProgress message.
    pub const PIPELINES_IN_PROGRESS: &str = "Pipelines are still in progress";
    /// Prefix of ConfigureWorkflowCompleted=False/ConfigureWorkflowFailed (+ pipeline name).
    pub const CONFIGURE_PIPELINE_FAILED_PREFIX: &str = "A Configure Pipeline has failed: ";
    /// Promise Available=True message.
    pub const READY_TO_FULFIL: &str = "Ready to fulfil resource requests";
    /// Promise Available=False message.
    pub const CANNOT_FULFIL: &str = "Cannot fulfil resource requests";
    /// Reconciled message values.
    pub const RECONCILED: &str = "Reconciled";
    /// Reconciled=False message.
    pub const FAILING: &str = "Failing";
    /// Paused.
    pub const PAUSED: &str = "Paused";
    /// Suspended.
    pub const SUSPENDED: &str = "Suspended";
    /// Work Ready=True message.
    pub const READY: &str = "Ready";
    /// Misplaced.
    pub const MISPLACED: &str = "Misplaced";
    /// Delete pipeline failed.
    pub const DELETE_PIPELINE_FAILED: &str = "The Delete Pipeline has failed";
    /// Delete workflow suspended.
    pub const DELETE_WORKFLOW_SUSPENDED: &str = "The delete workflow is suspended";
    /// State store Ready=True.
    pub const STATE_STORE_READY: &str = "State store is ready";
    /// Destination without Ready condition.
    pub const DESTINATION_NOT_READY: &str = "Destination is not ready";
    /// Destination Ready=True (initWorkloads disabled).
    pub const DESTINATION_READY: &str = "Destination is ready";
    /// Destination Ready=True after canary write.
    pub const TEST_DOCUMENTS_WRITTEN: &str = "Test documents written to State Store";
    /// WorkPlacement WriteSucceeded=True.
    pub const WORKLOADS_WRITTEN: &str = "Workloads written to State Store";
    /// WorkPlacement ScheduleSucceeded=True.
    pub const SCHEDULED_TO_CORRECT_DESTINATION: &str = "Scheduled to correct Destination";
    /// WorkPlacement misplaced.
    pub const TARGET_NO_LONGER_MATCHES: &str =
        "Target destination no longer matches destinationSelectors";
    /// Work fully scheduled.
    pub const ALL_WORKPLACEMENTS_SCHEDULED: &str = "All workplacements scheduled successfully";
    /// PromiseRelease installed.
    pub const INSTALLED_SUCCESSFULLY: &str = "Installed successfully";
    /// Promise RequirementsFulfilled=True message.
    pub const REQUIREMENTS_FULFILLED: &str = "Requirements fulfilled";
    /// Resource request PromiseAvailable=True message.
    pub const PROMISE_REQUIREMENTS_MET: &str = "Promise Requirements are met";
    /// Resource request PromiseAvailable=False message.
    pub const PROMISE_REQUIREMENTS_NOT_INSTALLED: &str = "Promise Requirements are not installed";
}

/// `status.requiredPromises[].state` strings.
pub mod requirement_state {
    /// Installed at the right version and Available.
    pub const INSTALLED: &str = "Requirement installed";
    /// Not installed.
    pub const NOT_INSTALLED: &str = "Requirement not installed";
    /// Installed at another version.
    pub const NOT_INSTALLED_AT_VERSION: &str = "Requirement not installed at the specified version";
    /// Installed but not Available.
    pub const NOT_AVAILABLE: &str = "Requirement not available";
    /// Unknown.
    pub const UNKNOWN: &str = "Requirement state unknown";
}

/// The image of Plinth's pipeline adapter (reader, work-creator, status-writer) in the
/// Jobs Plinth builds: the image holding the `plinth` binary. The embedded runner
/// recognises it and runs the current `plinth` executable instead of pulling it.
pub const DEFAULT_ADAPTER_IMAGE: &str = "ghcr.io/plinth-dev/plinth:latest";

/// Names used by HealthRecords, the HealthSource and the health history.
pub mod health {
    /// Label on a HealthRecord applied by a HealthSource: the source's name.
    pub const SOURCE_LABEL: &str = "platform.syntasso.io/health-source";
    /// Label on a HealthRecord: a hash (32 hex digits) of the Promise, namespace and name
    /// of the request it references, set by the HealthRecord controller and the
    /// HealthSource so a request's records are listed by label, not by scanning all.
    pub const REQUEST_LABEL: &str = "platform.syntasso.io/health-request";
    /// Annotation on a HealthRecord applied by a HealthSource: the object key it came from.
    pub const SOURCE_KEY_ANNOTATION: &str = "platform.syntasso.io/health-source-key";
    /// Annotation on a HealthSource: setting it to a new value polls at once.
    pub const POLL_NOW_ANNOTATION: &str = "platform.syntasso.io/poll-now";
    /// Event reason on a resource request when its overall health changes (Kratix's).
    pub const RECORD_EVENT_REASON: &str = "HealthRecord";
    /// Reporting component of the HealthRecord controller (Kratix's).
    pub const RECORD_COMPONENT: &str = "HealthRecordController";
    /// Reporting component of the HealthSource controller.
    pub const SOURCE_COMPONENT: &str = "HealthSourceController";
    /// Event reason on a HealthSource for a skipped record.
    pub const REJECTED_REASON: &str = "HealthRecordRejected";
    /// Event reason on a HealthSource for a record another manager owns.
    pub const CONFLICT_REASON: &str = "HealthRecordConflict";
    /// `Ready=True` reason of a HealthSource after a successful poll.
    pub const POLLED: &str = "Polled";
    /// `Ready=True` reason of a stream HealthSource (Redis, NATS) whose consumer runs.
    pub const CONSUMING: &str = "Consuming";
    /// `Ready=False` reason: the spec cannot be used.
    pub const INVALID_SPEC: &str = "InvalidSpec";
    /// `Ready=False` reason: the credentials Secret is missing.
    pub const SECRET_NOT_FOUND: &str = "SecretNotFound";
    /// `Ready=False` reason: the store could not be read.
    pub const STORE_ERROR: &str = "StoreError";
    /// `apiVersion` a HealthRecord document must carry.
    pub const RECORD_API_VERSION: &str = "platform.kratix.io/v1alpha1";
    /// `kind` a HealthRecord document must carry.
    pub const RECORD_KIND: &str = "HealthRecord";
    /// Label on a HealthRecord written at a Destination by `health-state-creator`, and on
    /// the CronJob, ServiceAccount and RBAC the health agent creates for a
    /// HealthDefinition: the HealthDefinition's name (in the object's namespace, or in
    /// [`DEFINITION_NAMESPACE_LABEL`] for cluster-scoped objects).
    pub const DEFINITION_LABEL: &str = "platform.syntasso.io/health-definition";
    /// Label on the health agent's objects: the HealthDefinition's namespace.
    pub const DEFINITION_NAMESPACE_LABEL: &str = "platform.syntasso.io/health-definition-namespace";
    /// `app.kubernetes.io/managed-by` value of the health agent's objects.
    pub const AGENT_MANAGER: &str = "plinth-health-agent";
    /// Field manager of the health agent's server-side applies.
    pub const AGENT_FIELD_MANAGER: &str = "plinth-health-agent";
    /// Field manager of `health-state-creator`'s HealthRecord applies.
    pub const STATE_CREATOR_FIELD_MANAGER: &str = "health-state-creator";
    /// Name of the ConfigMap configuring the health agent's store (SKE's), with keys
    /// `stateStoreKind` (`GitStateStore`/`BucketStateStore`/`Redis`/`NATS`), `url`, `branch`,
    /// `secretName`, `endpoint`, `bucketName`, `authMethod`, `path`, `insecure`, `address`,
    /// `servers`, `stream`, `subject`.
    pub const STORE_CONFIGMAP: &str = "health-state-store-config";
    /// File a health check writes: `state` (a HealthRecord state) and optional `details`.
    pub const STATUS_FILE: &str = "health-status.yaml";
    /// Environment variable of a health check's `reader`: the HealthDefinition's
    /// `spec.input`, written as `/kratix/input/object.yaml`.
    pub const INPUT_ENV: &str = "KRATIX_HEALTH_INPUT";
    /// Environment variable of a health check Pod: the HealthDefinition's name.
    pub const DEFINITION_NAME_ENV: &str = "KRATIX_HEALTH_DEFINITION_NAME";
    /// Environment variable of a health check Pod: the HealthDefinition's namespace.
    pub const DEFINITION_NAMESPACE_ENV: &str = "KRATIX_HEALTH_DEFINITION_NAMESPACE";
    /// Annotation on a HealthRecord the health agent writes: its HealthDefinition's
    /// `spec.schedule`, from which the platform knows when the next record is due.
    pub const SCHEDULE_ANNOTATION: &str = "plinth.dev/health-schedule";
    /// Annotation on a HealthRecord the health agent writes: the longest the writer lets
    /// an unchanged record's `lastRun` go unrefreshed, in seconds (`0`: never refreshed,
    /// so the record's age says nothing and it never goes stale).
    pub const REFRESH_ANNOTATION: &str = "plinth.dev/health-refresh-seconds";
    /// `healthRecords[].reason` of a record that is overdue (its state shows `unknown`).
    pub const STALE_REASON: &str = "RecordStale";
}

/// Event reasons, by the component that reports them (`source.component` /
/// `reportingComponent`), as Kratix emits them; the type (Normal or Warning) of each is in
/// [`events::KRATIX`].
pub mod events {
    /// Reporting component of Promise Events.
    pub const PROMISE_CONTROLLER: &str = "PromiseController";
    /// Reporting component of resource-request Events.
    pub const RESOURCE_REQUEST_CONTROLLER: &str = "ResourceRequestController";
    /// Reporting component of scheduling Events.
    pub const SCHEDULER: &str = "Scheduler";
    /// Reporting component of Work Events.
    pub const WORK_CONTROLLER: &str = "WorkController";
    /// Reporting component of WorkPlacement Events.
    pub const WORKPLACEMENT_CONTROLLER: &str = "WorkPlacementController";
    /// Reporting component of Destination Events.
    pub const DESTINATION_CONTROLLER: &str = "DestinationController";
    /// Reporting component of GitStateStore Events.
    pub const GIT_STATE_STORE_CONTROLLER: &str = "GitStateStoreController";
    /// Reporting component of BucketStateStore Events.
    pub const BUCKET_STATE_STORE_CONTROLLER: &str = "BucketStateStoreController";
    /// Reporting component of PromiseRelease Events.
    pub const PROMISE_RELEASE_CONTROLLER: &str = "PromiseReleaseController";
    /// Reporting component of health Events on resource requests.
    pub const HEALTH_RECORD_CONTROLLER: &str = super::health::RECORD_COMPONENT;

    /// A PromiseRevision was created for the Promise's version.
    pub const REVISION_CREATED: &str = "RevisionCreated";
    /// The Promise can fulfil resource requests.
    pub const AVAILABLE: &str = "Available";
    /// The Promise stopped being available (requirements changed).
    pub const UNAVAILABLE: &str = "Unavailable";
    /// Every required Promise is installed.
    pub const REQUIREMENTS_FULFILLED: &str = "RequirementsFulfilled";
    /// A required Promise does not exist.
    pub const REQUIREMENTS_NOT_INSTALLED: &str = "RequirementsNotInstalled";
    /// A required Promise exists but is not available at the required version.
    pub const REQUIREMENTS_NOT_AVAILABLE: &str = "RequirementsNotAvailable";
    /// The object is labelled `kratix.io/paused: "true"`.
    pub const PAUSED_RECONCILIATION: &str = "PausedReconciliation";
    /// A pipeline suspended the workflow (`workflow-control.yaml`).
    pub const WORKFLOW_SUSPENDED: &str = "WorkflowSuspended";
    /// A pipeline Job was created.
    pub const PIPELINE_STARTED: &str = "PipelineStarted";
    /// A running pipeline was suspended for a manual reconciliation.
    pub const PIPELINE_SUSPENDED: &str = "PipelineSuspended";
    /// A configure pipeline failed.
    pub const CONFIGURE_WORKFLOW_FAILED: &str = "ConfigureWorkflowFailed";
    /// The delete pipeline failed (Kratix's reason has a space).
    pub const FAILED_PIPELINE: &str = "Failed Pipeline";
    /// Every Work of the object is Ready.
    pub const WORKS_SUCCEEDED: &str = "WorksSucceeded";
    /// A Work of the object is failing.
    pub const WORKS_FAILING: &str = "WorksFailing";
    /// A Work of the object is on a Destination that no longer matches.
    pub const WORKS_MISPLACED: &str = "WorksMisplaced";
    /// The object's workflow and Works all succeeded.
    pub const RECONCILE_SUCCEEDED: &str = "ReconcileSucceeded";
    /// Every resource request of the Promise is being reconciled again.
    pub const RECONCILING_RESOURCES: &str = "ReconcilingResources";
    /// The configure workflow completed.
    pub const CONFIGURE_WORKFLOW_COMPLETED: &str = "ConfigureWorkflowCompleted";
    /// A resource request's reconcile started with a PromiseRevision.
    pub const RECONCILE_STARTED: &str = "ReconcileStarted";
    /// A ResourceBinding was created for a resource request.
    pub const BINDING_CREATED: &str = "BindingCreated";
    /// A resource request's ResourceBinding version changed.
    pub const RESOURCE_BINDING_VERSION_UPDATED: &str = "ResourceBindingVersionUpdated";
    /// The PromiseRevision of a resource request could not be found.
    pub const FAILED_PROMISE_REVISION_LOOKUP: &str = "FailedPromiseRevisionLookup";
    /// No Destination matches a workload group.
    pub const NO_MATCHING_DESTINATION: &str = "NoMatchingDestination";
    /// A WorkPlacement was created or updated.
    pub const WORKPLACEMENT_RECONCILED: &str = "WorkplacementReconciled";
    /// Every workload group of a Work is placed.
    pub const ALL_WORKPLACEMENTS_SCHEDULED: &str = "AllWorkplacementsScheduled";
    /// A placement's Destination no longer matches its selectors.
    pub const DESTINATION_SELECTOR_MISMATCH: &str = "DestinationSelectorMismatch";
    /// A resource Work waits for a matching Destination.
    pub const WAITING_DESTINATION: &str = "WaitingDestination";
    /// A WorkPlacement of the Work failed to write.
    pub const WORKPLACEMENTS_FAILING: &str = "WorkplacementsFailing";
    /// A WorkPlacement could not be deleted.
    pub const FAILED_DELETE: &str = "FailedDelete";
    /// The workloads were written to the state store.
    pub const WORKLOADS_WRITTEN_TO_STATE_STORE: &str = "WorkloadsWrittenToStateStore";
    /// Writing to the state store failed.
    pub const FAILED_WRITE_TO_DESTINATION: &str = "FailedWriteToDestination";
    /// The `.kratix` state file could not be read.
    pub const FAILED_READ_KRATIX_STATE_FILE: &str = "FailedReadKratixStateFile";
    /// The `.kratix` state file could not be parsed.
    pub const FAILED_UNMARSHAL_KRATIX_STATE_FILE: &str = "FailedUnmarshalKratixStateFile";
    /// The WorkPlacements of a Destination could not be listed.
    pub const FAILED_GET_ALL_WORKPLACEMENTS_FOR_DESTINATION: &str =
        "FailedGetAllWorkplacementsForDestination";
    /// The aggregated YAML file could not be generated.
    pub const FAILED_GENERATE_AGGREGATED_WORKLOAD_YAML: &str =
        "FailedGenerateAggregatedWorkloadYAML";
    /// Files could not be deleted from the state store.
    pub const FAILED_DELETE_FILES_FROM_REPOSITORY: &str = "FailedDeleteFilesFromRepository";
    /// The Destination's test documents were written.
    pub const DESTINATION_READY: &str = "DestinationReady";
    /// The Destination's state store is missing, not ready or not writable.
    pub const DESTINATION_NOT_READY: &str = "DestinationNotReady";
    /// A state store is ready.
    pub const READY: &str = "Ready";
    /// A state store is not ready.
    pub const NOT_READY: &str = "NotReady";
    /// A PromiseRelease's Promise could not be created or updated.
    pub const FAILED: &str = "Failed";
    /// A PromiseRelease's Promise was refused by admission.
    pub const INVALID_PROMISE: &str = "Invalid Promise";
    /// A resource request's health state changed.
    pub const HEALTH_RECORD: &str = super::health::RECORD_EVENT_REASON;

    /// Plinth's Warning: a reconcile of the object failed; the note is the error.
    pub const RECONCILE_FAILED: &str = super::reasons::RECONCILE_FAILED;

    /// Plinth's Normal: the misplaced WorkPlacements of a request or Promise labelled
    /// `plinth.dev/reschedule` were removed so their Works are placed again.
    pub const WORKS_RESCHEDULED: &str = "WorksRescheduled";
    /// Plinth's Normal, by the destination agent on an object it applied: another field
    /// manager had changed fields the output declares, and the agent took them back; the
    /// note names the manager and the fields.
    pub const DRIFT_CORRECTED: &str = "DriftCorrected";
    /// Plinth's Warning, by the destination agent on an object a resource request's output
    /// declares (its file is under that request's directory): another field manager had
    /// changed fields the output declares and the agent took them back; the note names the
    /// request that owns the object (a compound request on the platform), the manager and
    /// the fields.
    pub const OWNED_BY_REQUEST: &str = "OwnedByRequest";
    /// Plinth's Normal, by the resource request controller on a request: a ResourceBinding
    /// with its labels arrived after the one the platform created (annotated
    /// `plinth.dev/auto-created`), and the platform's was deleted; the note names both.
    pub const BINDING_ADOPTED: &str = "BindingAdopted";
    /// Plinth's Warning, by the resource request controller on a ResourceBinding the
    /// destination agent applies: another manager changed its `spec.version`, which the
    /// output declares; the request keeps its version until the agent takes the field back
    /// (or the output itself changes it).
    pub const BINDING_VERSION_HELD: &str = "BindingVersionHeld";

    /// Plinth's reporting component of Events about DryRuns.
    pub const DRY_RUN_CONTROLLER: &str = "DryRunController";
    /// Plinth's reporting component of Events about the `kratix` ConfigMap.
    pub const CONFIG_WATCHER: &str = "KratixConfigWatcher";
    /// Plinth's Warning on the `kratix` ConfigMap: a key's value is unusable; the note
    /// names the key, the value given and the value kept.
    pub const INVALID_CONFIG_VALUE: &str = "InvalidConfigValue";
    /// Plinth's Warning on the `kratix` ConfigMap: the document was not applied at all.
    pub const INVALID_CONFIG: &str = "InvalidConfig";

    /// Whether an Event is `Warning` (true) or `Normal`.
    pub type Warning = bool;

    /// Every `(component, reason, warning)` Kratix emits. `HealthRecord` is Normal for
    /// healthy or ready states and Warning otherwise; it is listed as Normal.
    pub const KRATIX: &[(&str, &str, Warning)] = &[
        (PROMISE_CONTROLLER, REVISION_CREATED, false),
        (PROMISE_CONTROLLER, AVAILABLE, false),
        (PROMISE_CONTROLLER, UNAVAILABLE, true),
        (PROMISE_CONTROLLER, REQUIREMENTS_FULFILLED, false),
        (PROMISE_CONTROLLER, REQUIREMENTS_NOT_INSTALLED, false),
        (PROMISE_CONTROLLER, REQUIREMENTS_NOT_AVAILABLE, false),
        (PROMISE_CONTROLLER, PAUSED_RECONCILIATION, true),
        (PROMISE_CONTROLLER, WORKFLOW_SUSPENDED, true),
        (PROMISE_CONTROLLER, PIPELINE_STARTED, false),
        (PROMISE_CONTROLLER, PIPELINE_SUSPENDED, false),
        (PROMISE_CONTROLLER, CONFIGURE_WORKFLOW_FAILED, true),
        (PROMISE_CONTROLLER, FAILED_PIPELINE, true),
        (PROMISE_CONTROLLER, WORKS_SUCCEEDED, false),
        (PROMISE_CONTROLLER, WORKS_FAILING, true),
        (PROMISE_CONTROLLER, WORKS_MISPLACED, true),
        (PROMISE_CONTROLLER, RECONCILE_SUCCEEDED, false),
        (PROMISE_CONTROLLER, RECONCILING_RESOURCES, false),
        (PROMISE_CONTROLLER, CONFIGURE_WORKFLOW_COMPLETED, false),
        (RESOURCE_REQUEST_CONTROLLER, RECONCILE_STARTED, false),
        (RESOURCE_REQUEST_CONTROLLER, BINDING_CREATED, false),
        (RESOURCE_REQUEST_CONTROLLER, PIPELINE_STARTED, false),
        (RESOURCE_REQUEST_CONTROLLER, PIPELINE_SUSPENDED, false),
        (RESOURCE_REQUEST_CONTROLLER, CONFIGURE_WORKFLOW_FAILED, true),
        (RESOURCE_REQUEST_CONTROLLER, WORKS_SUCCEEDED, false),
        (RESOURCE_REQUEST_CONTROLLER, WORKS_FAILING, true),
        (RESOURCE_REQUEST_CONTROLLER, WORKS_MISPLACED, true),
        (RESOURCE_REQUEST_CONTROLLER, RECONCILE_SUCCEEDED, false),
        (
            RESOURCE_REQUEST_CONTROLLER,
            RESOURCE_BINDING_VERSION_UPDATED,
            false,
        ),
        (RESOURCE_REQUEST_CONTROLLER, PAUSED_RECONCILIATION, true),
        (RESOURCE_REQUEST_CONTROLLER, WORKFLOW_SUSPENDED, true),
        (RESOURCE_REQUEST_CONTROLLER, FAILED_PIPELINE, true),
        (
            RESOURCE_REQUEST_CONTROLLER,
            FAILED_PROMISE_REVISION_LOOKUP,
            true,
        ),
        (SCHEDULER, NO_MATCHING_DESTINATION, false),
        (SCHEDULER, WORKPLACEMENT_RECONCILED, false),
        (SCHEDULER, ALL_WORKPLACEMENTS_SCHEDULED, false),
        (SCHEDULER, DESTINATION_SELECTOR_MISMATCH, true),
        (WORK_CONTROLLER, WAITING_DESTINATION, false),
        (WORK_CONTROLLER, WORKPLACEMENTS_FAILING, true),
        (WORK_CONTROLLER, FAILED_DELETE, true),
        (
            WORKPLACEMENT_CONTROLLER,
            WORKLOADS_WRITTEN_TO_STATE_STORE,
            false,
        ),
        (WORKPLACEMENT_CONTROLLER, FAILED_WRITE_TO_DESTINATION, true),
        (
            WORKPLACEMENT_CONTROLLER,
            FAILED_READ_KRATIX_STATE_FILE,
            true,
        ),
        (
            WORKPLACEMENT_CONTROLLER,
            FAILED_UNMARSHAL_KRATIX_STATE_FILE,
            true,
        ),
        (
            WORKPLACEMENT_CONTROLLER,
            FAILED_GET_ALL_WORKPLACEMENTS_FOR_DESTINATION,
            true,
        ),
        (
            WORKPLACEMENT_CONTROLLER,
            FAILED_GENERATE_AGGREGATED_WORKLOAD_YAML,
            true,
        ),
        (
            WORKPLACEMENT_CONTROLLER,
            FAILED_DELETE_FILES_FROM_REPOSITORY,
            true,
        ),
        (DESTINATION_CONTROLLER, DESTINATION_READY, false),
        (DESTINATION_CONTROLLER, DESTINATION_NOT_READY, true),
        (GIT_STATE_STORE_CONTROLLER, READY, false),
        (GIT_STATE_STORE_CONTROLLER, NOT_READY, true),
        (BUCKET_STATE_STORE_CONTROLLER, READY, false),
        (BUCKET_STATE_STORE_CONTROLLER, NOT_READY, true),
        (PROMISE_RELEASE_CONTROLLER, FAILED, true),
        (PROMISE_RELEASE_CONTROLLER, INVALID_PROMISE, true),
        (HEALTH_RECORD_CONTROLLER, HEALTH_RECORD, false),
    ];
}

/// `Completed` reasons of a DryRun (Plinth's: Kratix writes a summary Work instead of
/// listing outputs).
pub mod dry_run_reasons {
    /// The `featureFlags.dryRun` setting is off.
    pub const DISABLED: &str = "DryRunDisabled";
    /// The Promise does not exist or serves no API.
    pub const PROMISE_NOT_AVAILABLE: &str = "PromiseNotAvailable";
    /// The workflow is running.
    pub const RUNNING: &str = "PipelineRunning";
    /// A pipeline failed (Kratix's reason).
    pub const PIPELINE_FAILED: &str = "PipelineFailed";
    /// Every pipeline ran; the outputs are listed.
    pub const OUTPUTS_LISTED: &str = "OutputsListed";
}
