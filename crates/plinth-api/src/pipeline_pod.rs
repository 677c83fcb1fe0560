//! The parts of a pipeline Pod that a workflow Job and a health check's CronJob share:
//! the `/kratix` mounts and variables in every user container, the shared volumes, the
//! pipeline-adapter containers, and what a pipeline's spec carries onto its Pod. Also
//! what admission checks user containers against, so they are checked as the Pod will be.
//!
//! ```
//! use plinth_api::pipeline_pod::{self, Adapter};
//! use serde_json::json;
//!
//! let env = vec![json!({"name": "KRATIX_PROMISE_NAME", "value": "redis"})];
//! let user = pipeline_pod::user_container(&json!({"name": "make", "image": "busybox"}), &env);
//! assert_eq!(user["volumeMounts"][0]["mountPath"], "/kratix/input");
//! assert_eq!(user["env"][0]["name"], "KRATIX_PROMISE_NAME");
//!
//! let adapter = Adapter {
//!     image: "ghcr.io/example/adapter:1",
//!     pull_policy: "IfNotPresent",
//!     security_context: json!({"runAsNonRoot": true}),
//!     resources: None,
//! };
//! let reader = adapter.container("reader", ["reader"], pipeline_pod::reader_mounts(), env);
//! assert_eq!(reader["command"][0], "/bin/pipeline-adapter");
//! assert!(reader.get("resources").is_none());
//! ```

use serde_json::{Value, json};

use crate::contract;

/// Containers of the pipeline adapter (reader, work writer, status writer).
pub const ADAPTER_CONTAINERS: [&str; 3] = ["reader", "work-writer", "status-writer"];
/// The pipeline adapter's entrypoint inside its image.
pub const ADAPTER_ENTRYPOINT: &str = "/bin/pipeline-adapter";
/// Volume behind [`contract::INPUT_DIR`].
pub const INPUT_VOLUME: &str = "shared-input";
/// Volume behind [`contract::OUTPUT_DIR`].
pub const OUTPUT_VOLUME: &str = "shared-output";
/// Volume behind [`contract::METADATA_DIR`].
pub const METADATA_VOLUME: &str = "shared-metadata";
/// Volumes Kratix adds to every pipeline Pod.
pub const VOLUMES: [&str; 3] = [INPUT_VOLUME, OUTPUT_VOLUME, METADATA_VOLUME];
/// Volume holding the Promise's scheduling ConfigMap (configure pipelines only).
pub const SCHEDULING_VOLUME: &str = "promise-scheduling";
/// Mount paths of the `/kratix` contract in every user container.
pub const MOUNT_PATHS: [&str; 3] = [
    contract::INPUT_DIR,
    contract::OUTPUT_DIR,
    contract::METADATA_DIR,
];
/// Fields of a pipeline's spec that are copied onto its Pod as written.
pub const POD_FIELDS: [&str; 3] = ["nodeSelector", "tolerations", "imagePullSecrets"];

/// A volume mount.
pub fn mount(volume: &str, path: &str) -> Value {
    json!({"name": volume, "mountPath": path})
}

/// The shared `emptyDir` volumes, in Kratix's order.
pub fn shared_volumes() -> Vec<Value> {
    VOLUMES
        .iter()
        .map(|v| json!({"name": v, "emptyDir": {}}))
        .collect()
}

/// The reader's mounts: it writes `object.yaml` into the input and may seed the output.
pub fn reader_mounts() -> Value {
    json!([
        mount(INPUT_VOLUME, contract::INPUT_DIR),
        mount(OUTPUT_VOLUME, contract::OUTPUT_DIR),
    ])
}

/// `c` as a pipeline container: the `/kratix` mounts (input read-only) and the `env`
/// variables first, then its own. Nothing else of it changes.
pub fn user_container(c: &Value, env: &[Value]) -> Value {
    let mut c = c.clone();
    let mut mounts = vec![
        json!({"name": INPUT_VOLUME, "mountPath": contract::INPUT_DIR, "readOnly": true}),
        mount(OUTPUT_VOLUME, contract::OUTPUT_DIR),
        mount(METADATA_VOLUME, contract::METADATA_DIR),
    ];
    mounts.extend(c["volumeMounts"].as_array().cloned().unwrap_or_default());
    c["volumeMounts"] = Value::Array(mounts);
    let mut all_env = env.to_vec();
    all_env.extend(c["env"].as_array().cloned().unwrap_or_default());
    c["env"] = Value::Array(all_env);
    c
}

/// Copies [`POD_FIELDS`] that the pipeline's `spec` sets onto `pod`.
pub fn copy_pod_fields(spec: &Value, pod: &mut Value) {
    for key in POD_FIELDS {
        if let Some(v) = spec.get(key).filter(|v| !v.is_null()) {
            pod[key] = v.clone();
        }
    }
}

/// How the pipeline-adapter containers of a Pod are built.
#[derive(Clone, Debug)]
pub struct Adapter<'a> {
    /// The adapter image.
    pub image: &'a str,
    /// Its `imagePullPolicy`.
    pub pull_policy: &'a str,
    /// Its `securityContext`.
    pub security_context: Value,
    /// Its `resources`, if any are set.
    pub resources: Option<Value>,
}

impl Adapter<'_> {
    /// The adapter container `name` running `args`, with `mounts` and `env`.
    pub fn container<S: Into<String>>(
        &self,
        name: &str,
        args: impl IntoIterator<Item = S>,
        mounts: Value,
        env: Vec<Value>,
    ) -> Value {
        let args: Vec<String> = args.into_iter().map(Into::into).collect();
        let mut c = json!({
            "name": name,
            "image": self.image,
            "command": [ADAPTER_ENTRYPOINT],
            "args": args,
            "env": env,
            "volumeMounts": mounts,
            "imagePullPolicy": self.pull_policy,
            "securityContext": self.security_context,
        });
        if let Some(r) = &self.resources {
            c["resources"] = r.clone();
        }
        c
    }
}
