//! The reconciliation labels the controllers read and write (reference §3.5, §11.1).

pub const MANUAL_RECONCILIATION: &str = "kratix.io/manual-reconciliation";
pub const RUN_FROM_START: &str = "internal.workflows.kratix.io/run-from-start";
pub const WORKFLOW_SUSPENDED: &str = "kratix.io/workflow-suspended";
pub const PAUSED: &str = "kratix.io/paused";
pub const RECONCILE_RESOURCES: &str = "kratix.io/reconcile-resources";
pub const PROMISE_VERSION: &str = "kratix.io/promise-version";
pub const PROMISE_NAME: &str = "kratix.io/promise-name";
pub const RESOURCE_NAME: &str = "kratix.io/resource-name";
pub const WORK_TYPE: &str = "kratix.io/work-type";
pub const LATEST_REVISION: &str = "kratix.io/latest-revision";
