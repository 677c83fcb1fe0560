//! ClusterRoles for the users of a Promise's API. Every Promise that installs an API
//! gets two ClusterRoles on its resource-request resource, labelled so that Kubernetes'
//! default roles aggregate them: `<promise>-promise-view` (read) into `view` (and through
//! it `edit` and `admin`), and `<promise>-promise-edit` (read and write) into `edit` (and through it
//! `admin`). A team bound to `edit` in its namespace can then request any Promise's
//! resources there with no RBAC written per API group. Both carry the
//! `kratix.io/promise-name` label, so the Promise's deletion removes them with its other
//! ClusterRoles.

use kube::Client;
use plinth_api::constants::{labels, rbac};
use serde_json::{Value, json};

use crate::Error;

const READ: [&str; 3] = ["get", "list", "watch"];
const WRITE: [&str; 8] = [
    "get",
    "list",
    "watch",
    "create",
    "delete",
    "deletecollection",
    "patch",
    "update",
];

/// The two user ClusterRoles of `promise`'s API (`group`, `plural`), as JSON objects.
pub fn user_cluster_roles(promise: &str, group: &str, plural: &str) -> [Value; 2] {
    let role = |access: &str, aggregate_to: &str, verbs: &[&str]| {
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {
                "name": format!("{promise}-promise-{access}"),
                "labels": {labels::PROMISE_NAME: promise, aggregate_to: "true"},
            },
            "rules": [{
                "apiGroups": [group],
                "resources": [plural, format!("{plural}/status")],
                "verbs": verbs,
            }],
        })
    };
    [
        role("view", rbac::AGGREGATE_TO_VIEW, &READ),
        role("edit", rbac::AGGREGATE_TO_EDIT, &WRITE),
    ]
}

/// Creates or updates the user ClusterRoles of `promise`'s API.
pub async fn ensure(
    client: &Client,
    promise: &str,
    group: &str,
    plural: &str,
) -> Result<(), Error> {
    for role in user_cluster_roles(promise, group, plural) {
        crate::apply::create_or_update(client, &role).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_aggregate_into_view_and_edit() {
        let [view, edit] = user_cluster_roles("redis", "marketplace.kratix.io", "redis");
        assert_eq!(view["metadata"]["labels"][rbac::AGGREGATE_TO_VIEW], "true");
        assert_eq!(view["rules"][0]["verbs"], json!(["get", "list", "watch"]));
        assert_eq!(edit["metadata"]["labels"][rbac::AGGREGATE_TO_EDIT], "true");
        assert_eq!(
            edit["rules"][0]["resources"],
            json!(["redis", "redis/status"])
        );
        assert_eq!(edit["metadata"]["labels"][labels::PROMISE_NAME], "redis");
    }
}
