//! The agent's inventory in the target cluster: a ConfigMap `plinth-agent-<name>` in the
//! namespace [`crate::INVENTORY_NAMESPACE`] holding `inventory.json` (what the agent
//! applied, so it prunes only its own objects) and `status.json` (the last pass).
//!
//! A ConfigMap (rather than a custom resource) needs no CRD in the target and is readable
//! with plain kubectl: `kubectl -n plinth-agent get cm plinth-agent-<name> -o yaml`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde::{Deserialize, Serialize};

use crate::object_ref::ObjectRef;

use crate::status::AgentStatus;
use crate::{FIELD_MANAGER, INVENTORY_NAMESPACE};

/// Why the inventory could not be read or written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InventoryError {
    /// The API refused or failed to answer a read of the ConfigMap.
    #[error("reading the inventory: {cause}")]
    Read {
        /// The API's message.
        cause: String,
    },
    /// `inventory.json` of the ConfigMap is not the agent's format.
    #[error("ConfigMap {namespace}/{name}: inventory.json: {cause}")]
    Malformed {
        /// The ConfigMap's namespace.
        namespace: String,
        /// The ConfigMap's name.
        name: String,
        /// The JSON decoder's message.
        cause: String,
    },
    /// The inventory namespace could not be read.
    #[error("reading namespace {namespace}: {cause}")]
    ReadNamespace {
        /// The namespace.
        namespace: String,
        /// The API's message.
        cause: String,
    },
    /// The inventory namespace could not be created.
    #[error("creating namespace {namespace}: {cause}")]
    CreateNamespace {
        /// The namespace.
        namespace: String,
        /// The API's message.
        cause: String,
    },
    /// The ConfigMap could not be applied.
    #[error("writing the inventory: {cause}")]
    Write {
        /// The API's message.
        cause: String,
    },
}

/// One applied object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// The object.
    #[serde(flatten)]
    pub object: ObjectRef,
    /// SHA-256 of the document last applied.
    pub hash: String,
    /// `metadata.generation` right after the last apply (None when the kind has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    /// Source file and document index (`resources/a.yaml#0`).
    pub source: String,
    /// For a Job: SHA-256 of the `spec` it was created with. A Job is a one-off run, so
    /// one that has gone from the cluster (TTL after finishing, or deleted by hand) is not
    /// created again until its `spec` in the store changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_spec_hash: Option<String>,
}

/// Everything the agent applied and still owns.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Inventory {
    /// By identity.
    pub entries: BTreeMap<ObjectRef, Entry>,
}

/// Name of the inventory ConfigMap of an agent.
pub fn configmap_name(agent: &str) -> String {
    format!("plinth-agent-{agent}")
}

/// The stored inventory and last status of an agent (empty when none was saved yet).
///
/// # Errors
/// [`InventoryError::Read`] for API errors other than 404, [`InventoryError::Malformed`]
/// for an `inventory.json` that is not the agent's format.
pub async fn load(
    client: &kube::Client,
    agent: &str,
) -> Result<(Inventory, Option<AgentStatus>), InventoryError> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), INVENTORY_NAMESPACE);
    let cm = match api.get_opt(&configmap_name(agent)).await {
        Ok(Some(cm)) => cm,
        Ok(None) => return Ok((Inventory::default(), None)),
        Err(e) => {
            return Err(InventoryError::Read {
                cause: e.to_string(),
            });
        }
    };
    let data = cm.data.unwrap_or_default();
    let entries: Vec<Entry> = match data.get("inventory.json") {
        Some(s) => serde_json::from_str(s).map_err(|e| InventoryError::Malformed {
            namespace: INVENTORY_NAMESPACE.to_string(),
            name: configmap_name(agent),
            cause: e.to_string(),
        })?,
        None => Vec::new(),
    };
    let status = data
        .get("status.json")
        .and_then(|s| serde_json::from_str(s).ok());
    Ok((
        Inventory {
            entries: entries.into_iter().map(|e| (e.object.clone(), e)).collect(),
        },
        status,
    ))
}

/// Writes the inventory and status (server-side apply; creates the namespace if needed).
///
/// # Errors
/// [`InventoryError::ReadNamespace`], [`InventoryError::CreateNamespace`] or
/// [`InventoryError::Write`] with the API's message.
pub async fn save(
    client: &kube::Client,
    agent: &str,
    inv: &Inventory,
    status: &AgentStatus,
) -> Result<(), InventoryError> {
    let ns_api: Api<Namespace> = Api::all(client.clone());
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    if ns_api
        .get_opt(INVENTORY_NAMESPACE)
        .await
        .map_err(|e| InventoryError::ReadNamespace {
            namespace: INVENTORY_NAMESPACE.to_string(),
            cause: e.to_string(),
        })?
        .is_none()
    {
        let ns = serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": INVENTORY_NAMESPACE}});
        ns_api
            .patch(INVENTORY_NAMESPACE, &pp, &Patch::Apply(&ns))
            .await
            .map_err(|e| InventoryError::CreateNamespace {
                namespace: INVENTORY_NAMESPACE.to_string(),
                cause: e.to_string(),
            })?;
    }
    let entries: Vec<&Entry> = inv.entries.values().collect();
    let cm = serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": configmap_name(agent), "namespace": INVENTORY_NAMESPACE,
            "labels": {(plinth_api::constants::labels::MANAGED_BY): FIELD_MANAGER}},
        "data": {
            "inventory.json": serde_json::to_string_pretty(&entries).unwrap_or_default(),
            "status.json": serde_json::to_string_pretty(status).unwrap_or_default(),
        }
    });
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), INVENTORY_NAMESPACE);
    api.patch(&configmap_name(agent), &pp, &Patch::Apply(&cm))
        .await
        .map_err(|e| InventoryError::Write {
            cause: e.to_string(),
        })?;
    Ok(())
}
