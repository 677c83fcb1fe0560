//! What a pass achieved, as stored in the inventory ConfigMap (`status.json`) and printed
//! by `plinth agent status`. Messages hold no timings or counters, so identical situations
//! give identical statuses and a settled agent writes nothing.

use serde::{Deserialize, Serialize};

use crate::object_ref::ObjectRef;
use crate::readiness::Readiness;

/// The outcome of the last pass.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentStatus {
    /// The store and directory read, e.g. `file:///srv/state.git (branch main) path worker-1`.
    pub source: String,
    /// Store version applied last (Git commit, bucket listing hash).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Why the store could not be read (what is applied stays as it is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_error: Option<String>,
    /// Documents that could not be applied (file, line, object and cause).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
    /// Things done on the user's behalf (e.g. a namespaced object applied into `default`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Readiness of every object in the inventory.
    #[serde(default)]
    pub objects: Vec<ObjectStatus>,
}

/// Readiness of one applied object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectStatus {
    /// The object.
    #[serde(flatten)]
    pub object: ObjectRef,
    /// kstatus-style readiness.
    pub readiness: Readiness,
    /// Why, e.g. `Available: 2/3 replicas` or `no controller in embedded mode`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

impl AgentStatus {
    /// A human summary, one line per object and problem (what `plinth agent status` prints).
    pub fn render(&self) -> String {
        let mut out = format!("source: {}\n", self.source);
        if let Some(v) = &self.version {
            out.push_str(&format!("version: {v}\n"));
        }
        if let Some(e) = &self.store_error {
            out.push_str(&format!("store error: {e}\n"));
        }
        for e in &self.errors {
            out.push_str(&format!("error: {e}\n"));
        }
        for w in &self.warnings {
            out.push_str(&format!("warning: {w}\n"));
        }
        out.push_str(&format!(
            "{:<12} {:<40} {}\n",
            "READINESS", "OBJECT", "MESSAGE"
        ));
        for o in &self.objects {
            out.push_str(&format!(
                "{:<12} {:<40} {}\n",
                o.readiness.as_str(),
                o.object.display(),
                o.message
            ));
        }
        out
    }
}
