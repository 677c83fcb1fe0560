//! The static-dependency Work: `spec.dependencies` bundled into one Work in the system
//! namespace, scheduled by the Promise's `destinationSelectors`.

use kube::api::{Api, DeleteParams};
use serde_json::json;

use plinth_api::constants::SYSTEM_NAMESPACE;

use super::observed::Observed;
use crate::Error;
use crate::context::Context;
use crate::support::api_errors::ignore_not_found;
use plinth_api::Work;
use plinth_api::constants::{labels, work_type};

/// Creates or updates the Work while `spec.dependencies` is non-empty, deletes it when
/// it becomes empty. Errors with [`Error::InvalidPromise`] naming the dependency that
/// does not serialize.
pub(super) async fn reconcile(ctx: &Context, p: &Observed) -> Result<(), Error> {
    let works: Api<Work> = Api::namespaced(ctx.client.clone(), SYSTEM_NAMESPACE);
    let name = &p.name;
    let work_name = plinth_api::names::static_dependency_work_name(name);
    let deps = p.spec.dependencies.as_deref().unwrap_or_default();
    if deps.is_empty() {
        return ignore_not_found(works.delete(&work_name, &DeleteParams::background()).await);
    }
    let yaml = dependencies_yaml(p, deps)?;
    let selectors = p.spec.squashed_destination_selectors();
    let mut group = json!({
        "id": plinth_api::hash::md5_hex("."),
        "directory": ".",
        "workloads": [{"filepath": format!("static/{name}-dependencies.yaml"), "content": plinth_api::work_content::encode(yaml.as_bytes())}],
    });
    if !selectors.is_empty() {
        group["destinationSelectors"] = json!([{"matchLabels": selectors, "source": "promise"}]);
    }
    let work = json!({
        "apiVersion": "platform.kratix.io/v1alpha1",
        "kind": "Work",
        "metadata": {
            "name": work_name,
            "namespace": SYSTEM_NAMESPACE,
            "labels": {labels::PROMISE_NAME: name, labels::WORK_TYPE: work_type::STATIC_DEPENDENCY},
        },
        "spec": {"promiseName": name, "workloadGroups": [group]},
    });
    crate::apply::create_or_update(&ctx.client, &work).await
}

/// The dependencies as one multi-document YAML file.
fn dependencies_yaml(p: &Observed, deps: &[serde_json::Value]) -> Result<String, Error> {
    let mut yaml = String::new();
    for (i, d) in deps.iter().enumerate() {
        if i > 0 {
            yaml.push_str("---\n");
        }
        yaml.push_str(
            &serde_saphyr::to_string(d).map_err(|e| Error::InvalidPromise {
                promise: p.name.clone(),
                message: format!("spec.dependencies[{i}]: {e}"),
            })?,
        );
    }
    Ok(yaml)
}
