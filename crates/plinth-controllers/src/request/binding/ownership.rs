//! Who a ResourceBinding belongs to: the platform (created for a request that had none,
//! annotated [`annotations::AUTO_CREATED_BINDING`]) or someone else (a user, a compound
//! Promise's output applied by the Destination agent), and whether the version an
//! applied binding declares was changed by another manager. Pure functions of the
//! bindings as read.

use kube::ResourceExt;
use plinth_api::ResourceBinding;
use plinth_api::constants::{annotations, field_managers};

/// The bindings carrying one request's labels, sorted out.
#[derive(Debug)]
pub enum Found {
    /// None: the platform creates one.
    None,
    /// Exactly one: it is the request's.
    One(ResourceBinding),
    /// One binding not made by the platform and the platform's own ones, made before it
    /// arrived: `keep` is the request's, `replaced` are deleted.
    Adopt {
        /// The binding a user or an output made.
        keep: ResourceBinding,
        /// The platform's bindings it replaces.
        replaced: Vec<ResourceBinding>,
    },
    /// More than one binding not made by the platform (or several of the platform's and
    /// none other): an error naming them, which stays until one goes.
    Conflict(Vec<String>),
}

/// Whether the platform created `binding` for a request that had none.
pub fn is_auto_created(binding: &ResourceBinding) -> bool {
    binding
        .annotations()
        .get(annotations::AUTO_CREATED_BINDING)
        .is_some_and(|v| v == "true")
}

/// Sorts the bindings of one request: one is the request's; one made by a user or an
/// output beside the platform's own replaces them; two made by others conflict.
pub fn choose(mut found: Vec<ResourceBinding>) -> Found {
    found.sort_by_key(|b| b.name_any());
    if found.len() <= 1 {
        return found.pop().map_or(Found::None, Found::One);
    }
    let (auto, others): (Vec<_>, Vec<_>) = found.iter().cloned().partition(is_auto_created);
    match <[ResourceBinding; 1]>::try_from(others) {
        Ok([keep]) => Found::Adopt {
            keep,
            replaced: auto,
        },
        Err(_) => Found::Conflict(found.iter().map(|b| b.name_any()).collect()),
    }
}

/// The manager that took `spec.version` from the Destination agent, when the agent
/// applies this binding: its `Apply` entry exists (so it declares the binding, and with
/// it the required `spec.version`) but no longer owns `spec.version`, which another
/// manager (`kubectl patch`, a rollout) changed. The agent takes the field back on its
/// next pass; until then the version is not the output's. `None` when the agent does not
/// apply the binding or still owns the field (a change the output itself made).
pub fn version_taken_from_agent(binding: &ResourceBinding) -> Option<String> {
    let entries = binding
        .metadata
        .managed_fields
        .as_deref()
        .unwrap_or_default();
    let owns_version = |e: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry| {
        e.fields_v1
            .as_ref()
            .and_then(|f| f.0.pointer("/f:spec/f:version"))
            .is_some()
    };
    let agent = entries.iter().find(|e| {
        e.manager.as_deref() == Some(field_managers::AGENT)
            && e.operation.as_deref() == Some("Apply")
            && e.subresource.is_none()
    })?;
    if owns_version(agent) {
        return None;
    }
    Some(
        entries
            .iter()
            .find(|e| e.subresource.is_none() && owns_version(e))
            .and_then(|e| e.manager.clone())
            .unwrap_or_else(|| "another field manager".to_string()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn binding(name: &str, auto: bool) -> ResourceBinding {
        let mut meta = json!({"name": name, "namespace": "default"});
        if auto {
            meta["annotations"] = json!({annotations::AUTO_CREATED_BINDING: "true"});
        }
        serde_json::from_value(json!({
            "apiVersion": "platform.kratix.io/v1alpha1", "kind": "ResourceBinding",
            "metadata": meta,
            "spec": {"version": "v1", "promiseRef": {"name": "p"}, "resourceRef": {"name": "r"}},
        }))
        .unwrap()
    }

    /// What `choose` decided, by the names of the bindings it kept and replaced.
    fn decided(found: Found) -> (Vec<String>, Vec<String>) {
        match found {
            Found::None => (vec![], vec![]),
            Found::One(b) => (vec![b.name_any()], vec![]),
            Found::Adopt { keep, replaced } => (
                vec![keep.name_any()],
                replaced.iter().map(ResourceExt::name_any).collect(),
            ),
            Found::Conflict(names) => (vec!["conflict".into()], names),
        }
    }

    #[test]
    fn a_late_binding_replaces_the_platforms_and_two_others_conflict() {
        assert_eq!(decided(choose(vec![])), (vec![], vec![]));
        assert_eq!(
            decided(choose(vec![binding("auto", true)])),
            (vec!["auto".into()], vec![])
        );
        assert_eq!(
            decided(choose(vec![binding("auto", true), binding("mine", false)])),
            (vec!["mine".into()], vec!["auto".into()])
        );
        assert!(matches!(
            choose(vec![binding("mine", false), binding("yours", false)]),
            Found::Conflict(n) if n == ["mine", "yours"]
        ));
        assert!(
            matches!(
                choose(vec![
                    binding("yours", false),
                    binding("auto", true),
                    binding("mine", false)
                ]),
                Found::Conflict(n) if n == ["auto", "mine", "yours"]
            ),
            "never a user's binding deleted for another's"
        );
        assert!(matches!(
            choose(vec![binding("a1", true), binding("a2", true)]),
            Found::Conflict(n) if n == ["a1", "a2"]
        ));
    }

    fn managed(entries: serde_json::Value) -> ResourceBinding {
        let mut b = binding("app-a-db", false);
        b.metadata.managed_fields = Some(serde_json::from_value(entries).unwrap());
        b
    }

    #[test]
    fn a_version_another_manager_took_from_the_agent_is_named() {
        let agent_with = |fields: serde_json::Value| json!({"manager": field_managers::AGENT, "operation": "Apply", "apiVersion": "platform.kratix.io/v1alpha1", "fieldsType": "FieldsV1", "fieldsV1": fields});
        let labels = json!({"f:metadata": {"f:labels": {"f:kratix.io/promise-name": {}}}});
        let with_version = json!({"f:metadata": {"f:labels": {"f:kratix.io/promise-name": {}}}, "f:spec": {"f:version": {}}});
        let patch = json!({"manager": "kubectl-patch", "operation": "Update", "apiVersion": "platform.kratix.io/v1alpha1", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:version": {}}}});
        let status = json!({"manager": "plinth", "operation": "Update", "subresource": "status", "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}});
        // Applied and still owned by the agent: the output's own version.
        assert_eq!(
            version_taken_from_agent(&managed(json!([
                agent_with(with_version.clone()),
                status.clone()
            ]))),
            None
        );
        // Patched by hand: the patcher is named.
        assert_eq!(
            version_taken_from_agent(&managed(json!([
                agent_with(labels.clone()),
                patch.clone(),
                status
            ])))
            .as_deref(),
            Some("kubectl-patch")
        );
        // Not applied by the agent (a user's binding): any change is the user's.
        assert_eq!(version_taken_from_agent(&managed(json!([patch]))), None);
        assert_eq!(version_taken_from_agent(&binding("x", false)), None);
    }
}
