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

/// A `KRATIX_*` variable a pipeline container needs was not set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("environment variable {0} is required")]
pub struct MissingVariable(pub &'static str);

/// The object a pipeline runs for, as the `KRATIX_OBJECT_*`, `KRATIX_CRD_PLURAL` and
/// `KRATIX_CLUSTER_SCOPED` variables name it: the controllers write these variables from
/// it, and the adapter roles read it back from them.
///
/// ```
/// use plinth_api::contract::ObjectRef;
///
/// let redis = ObjectRef {
///     group: "marketplace.kratix.io".into(),
///     version: "v1alpha1".into(),
///     kind: "redis".into(),
///     plural: "redises".into(),
///     name: "cache".into(),
///     namespace: Some("team-a".into()),
/// };
/// let vars: std::collections::HashMap<_, _> = redis.variables().into_iter().collect();
/// let read = ObjectRef::from_env_with(|k| vars.get(k).cloned()).unwrap();
/// assert_eq!(read, redis);
/// assert_eq!(read.api_version(), "marketplace.kratix.io/v1alpha1");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectRef {
    /// API group (`platform.kratix.io` for Promises).
    pub group: String,
    /// Served version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Plural resource name.
    pub plural: String,
    /// Object name.
    pub name: String,
    /// Namespace (`None` for cluster-scoped objects: Promises).
    pub namespace: Option<String>,
}

impl ObjectRef {
    /// Reads the object's variables through `get` (e.g. `|k| std::env::var(k).ok()`).
    /// The namespace defaults to `default` when empty and the object is not
    /// cluster-scoped.
    ///
    /// # Errors
    /// [`MissingVariable`] names the first required variable that is unset or empty.
    pub fn from_env_with(
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<ObjectRef, MissingVariable> {
        let req = |k: &'static str| get(k).filter(|v| !v.is_empty()).ok_or(MissingVariable(k));
        let version = req(env::OBJECT_VERSION)?;
        let kind = req(env::OBJECT_KIND)?;
        let plural = req(env::CRD_PLURAL)?;
        let name = req(env::OBJECT_NAME)?;
        let group = get(env::OBJECT_GROUP).unwrap_or_default();
        let cluster_scoped =
            get(env::CLUSTER_SCOPED).is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let namespace = (!cluster_scoped).then(|| {
            get(env::OBJECT_NAMESPACE)
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "default".to_string())
        });
        Ok(ObjectRef {
            group,
            version,
            kind,
            plural,
            name,
            namespace,
        })
    }

    /// The variables that name the object, in Kratix's order.
    pub fn variables(&self) -> [(&'static str, String); 7] {
        [
            (env::OBJECT_KIND, self.kind.clone()),
            (env::OBJECT_GROUP, self.group.clone()),
            (env::OBJECT_VERSION, self.version.clone()),
            (env::OBJECT_NAME, self.name.clone()),
            (
                env::OBJECT_NAMESPACE,
                self.namespace.clone().unwrap_or_default(),
            ),
            (env::CRD_PLURAL, self.plural.clone()),
            (env::CLUSTER_SCOPED, self.namespace.is_none().to_string()),
        ]
    }

    /// `group/version` (`version` alone for the core group).
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The dynamic API resource.
    pub fn api_resource(&self) -> kube::api::ApiResource {
        let gvk = kube::api::GroupVersionKind::gvk(&self.group, &self.version, &self.kind);
        kube::api::ApiResource::from_gvk_with_plural(&gvk, &self.plural)
    }

    /// A dynamic `Api` for the object's resource and namespace.
    pub fn api(&self, client: kube::Client) -> kube::Api<kube::api::DynamicObject> {
        let ar = self.api_resource();
        match &self.namespace {
            Some(ns) => kube::Api::namespaced_with(client, ns, &ar),
            None => kube::Api::all_with(client, &ar),
        }
    }

    /// `kind namespace/name` for messages.
    pub fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn from_env_defaults_and_errors() {
        let mut m: HashMap<&'static str, &'static str> = HashMap::from([
            ("KRATIX_OBJECT_GROUP", "marketplace.kratix.io"),
            ("KRATIX_OBJECT_VERSION", "v1"),
            ("KRATIX_OBJECT_KIND", "redis"),
            ("KRATIX_CRD_PLURAL", "redises"),
            ("KRATIX_OBJECT_NAME", "r1"),
            ("KRATIX_OBJECT_NAMESPACE", ""),
            ("KRATIX_CLUSTER_SCOPED", "false"),
        ]);
        fn get(m: &HashMap<&'static str, &'static str>) -> impl Fn(&str) -> Option<String> + use<> {
            let m = m.clone();
            move |k: &str| m.get(k).map(|v| v.to_string())
        }
        let r = ObjectRef::from_env_with(get(&m)).unwrap();
        assert_eq!(r.namespace.as_deref(), Some("default"));
        assert_eq!(r.api_resource().plural, "redises");
        m.insert("KRATIX_CLUSTER_SCOPED", "true");
        assert_eq!(ObjectRef::from_env_with(get(&m)).unwrap().namespace, None);
        m.remove("KRATIX_CRD_PLURAL");
        let e = ObjectRef::from_env_with(get(&m)).unwrap_err().to_string();
        assert!(e.contains("KRATIX_CRD_PLURAL"), "{e}");
    }
}
