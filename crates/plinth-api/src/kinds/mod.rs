//! The `platform.kratix.io/v1alpha1` kinds.
//!
//! Conventions shared by every type here: camelCase field names, optional fields skipped
//! when absent, and an `extra` map catching fields Plinth does not model so that a Kratix
//! document parses and serialises back without losing anything.

mod binding;
mod common;
mod destination;
mod dryrun;
mod health;
mod healthdefinition;
mod healthsource;
mod promise;
mod release;
mod revision;
mod statestore;
mod work;

pub use binding::*;
pub use common::*;
pub use destination::*;
pub use dryrun::*;
pub use health::*;
pub use healthdefinition::*;
pub use healthsource::*;
pub use promise::*;
pub use release::*;
pub use revision::*;
pub use statestore::*;
pub use work::*;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{WorkflowAction, WorkflowType};
    use serde_json::json;

    #[test]
    fn destination_defaults_and_enum_spellings() {
        let d: Destination = serde_json::from_value(json!({
            "apiVersion": "platform.kratix.io/v1alpha1", "kind": "Destination",
            "metadata": {"name": "worker-1", "labels": {"env": "dev"}},
            "spec": {"path": "worker-1", "stateStoreRef": {"kind": "BucketStateStore", "name": "s3"}}
        }))
        .unwrap();
        assert_eq!(d.spec.filepath_mode(), FilepathMode::NestedByMetadata);
        assert_eq!(d.spec.cleanup_policy(), DestinationCleanup::None);
        assert!(d.spec.init_workloads_enabled());
        assert!(!d.spec.strict_match_labels());
        assert_eq!(d.spec.aggregated_filename(), "aggregated.yaml");
        assert_eq!(d.spec.state_store_ref.kind.as_str(), "BucketStateStore");
        assert_eq!(
            serde_json::to_value(FilepathMode::AggregatedYaml).unwrap(),
            "aggregatedYAML"
        );
        assert_eq!(serde_json::to_value(FilepathMode::None).unwrap(), "none");
        assert_eq!(serde_json::to_value(BucketAuthMethod::Iam).unwrap(), "IAM");
        assert_eq!(
            serde_json::to_value(GitAuthMethod::GithubApp).unwrap(),
            "githubApp"
        );
        let bad = serde_json::from_value::<Destination>(json!({
            "apiVersion": "platform.kratix.io/v1alpha1", "kind": "Destination", "metadata": {"name": "x"},
            "spec": {"path": "x", "stateStoreRef": {"kind": "Nope", "name": "s"}}
        }));
        assert!(bad.is_err());
    }

    #[test]
    fn promise_helpers() {
        let p: Promise = serde_json::from_value(json!({
            "apiVersion": "platform.kratix.io/v1alpha1", "kind": "Promise",
            "metadata": {"name": "redis", "labels": {"kratix.io/promise-version": "v1.2.0"}},
            "spec": {
                "api": {},
                "destinationSelectors": [{"matchLabels": {"env": "dev"}}, {"matchLabels": {"env": "prod", "zone": "a"}}],
                "workflows": {
                    "config": {"pipelineNamespace": "pipelines"},
                    "resource": {"configure": [{"apiVersion": "platform.kratix.io/v1alpha1", "kind": "Pipeline",
                        "metadata": {"name": "instance"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}]}
                }
            }
        }))
        .unwrap();
        assert!(!p.spec.has_api());
        assert!(p.api_crd().unwrap().is_none());
        assert_eq!(p.version_label(), Some("v1.2.0"));
        let sel = p.spec.squashed_destination_selectors();
        assert_eq!(sel["env"], "dev");
        assert_eq!(sel["zone"], "a");
        assert_eq!(p.spec.pipeline_namespace(), Some("pipelines"));
        let pipes = p
            .spec
            .pipelines(WorkflowType::Resource, WorkflowAction::Configure)
            .unwrap();
        assert_eq!(pipes[0].name(), "instance");
        assert!(
            p.spec
                .pipelines(WorkflowType::Promise, WorkflowAction::Delete)
                .unwrap()
                .is_empty()
        );
        let mut broken = p.clone();
        broken
            .spec
            .workflows
            .as_mut()
            .unwrap()
            .resource
            .as_mut()
            .unwrap()
            .configure
            .as_mut()
            .unwrap()[0]["kind"] = json!("Job");
        let e = broken
            .spec
            .pipelines(WorkflowType::Resource, WorkflowAction::Configure)
            .unwrap_err();
        assert!(
            e.to_string()
                .contains("spec.workflows.resource.configure[0]"),
            "{e}"
        );
    }

    #[test]
    fn unknown_fields_survive_a_round_trip() {
        let v = json!({
            "apiVersion": "platform.kratix.io/v1alpha1", "kind": "Work",
            "metadata": {"name": "w", "namespace": "default"},
            "spec": {"promiseName": "p", "futureField": {"x": 1},
                     "workloadGroups": [{"id": "i", "directory": ".", "extraGroupField": true,
                                         "workloads": [{"filepath": "a", "content": "b"}]}]},
            "status": {"workPlacements": 1, "someNewCounter": 2}
        });
        let w: Work = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(serde_json::to_value(&w).unwrap(), v);
    }
}
