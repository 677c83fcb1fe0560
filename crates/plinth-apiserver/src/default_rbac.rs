//! Kubernetes' default user-facing RBAC and ClusterRole aggregation.
//!
//! * At start-up the server creates the ClusterRoles `cluster-admin`, `admin`, `edit`,
//!   `view`, the `system:aggregate-to-*` roles that give the built-in kinds to them and
//!   the bootstrap `system:` roles that name no controller (discovery, self reviews,
//!   health, certificate approval), and
//!   the `cluster-admin` ClusterRoleBinding of `system:masters`, as kube-apiserver's RBAC
//!   bootstrap does. Roles annotated `rbac.authorization.kubernetes.io/autoupdate: "true"`
//!   are brought back to their default content at each start.
//! * Aggregation (Kubernetes' clusterrole-aggregation controller): the stored `rules` of a
//!   ClusterRole with an `aggregationRule` are the union, in name order, of the rules of
//!   the ClusterRoles its selectors match; recomputed by [`aggregation_loop`] after every
//!   committed ClusterRole change, as Kubernetes' controller does it: asynchronously, and
//!   again after its own writes until nothing changes (`edit` is itself aggregated into
//!   `admin`).

use std::collections::BTreeMap;
use std::sync::Weak;

use tokio::sync::mpsc;

use plinth_api::constants::rbac;
use serde_json::{Value, json};

use crate::app::{App, meta_str};
use crate::error::ApiError;

use crate::rbac::GROUP as RBAC_GROUP;
const READ: [&str; 3] = ["get", "list", "watch"];
const WRITE: [&str; 5] = ["create", "delete", "deletecollection", "patch", "update"];

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> Value {
    json!({"apiGroups": groups, "resources": resources, "verbs": verbs})
}

fn cluster_role(name: &str, labels: &[&str], body: Value) -> Value {
    let mut l: BTreeMap<&str, &str> = labels.iter().map(|k| (*k, "true")).collect();
    l.insert(rbac::BOOTSTRAPPING, "rbac-defaults");
    let mut role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name, "labels": l, "annotations": {rbac::AUTOUPDATE: "true"}},
    });
    for (k, v) in body.as_object().into_iter().flatten() {
        role[k] = v.clone();
    }
    role
}

fn aggregated(name: &str, labels: &[&str], selector_label: &str) -> Value {
    cluster_role(
        name,
        labels,
        json!({"aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {selector_label: "true"}}]}, "rules": []}),
    )
}

/// The default ClusterRoles (Kubernetes' bootstrap policy, for the kinds this server
/// serves).
pub(crate) fn default_cluster_roles() -> Vec<Value> {
    let mut roles = vec![
        cluster_role(
            rbac::CLUSTER_ADMIN,
            &[],
            json!({"rules": [
                rule(&["*"], &["*"], &["*"]),
                {"nonResourceURLs": ["*"], "verbs": ["*"]},
            ]}),
        ),
        aggregated(rbac::ADMIN, &[], rbac::AGGREGATE_TO_ADMIN),
        aggregated(
            rbac::EDIT,
            &[rbac::AGGREGATE_TO_ADMIN],
            rbac::AGGREGATE_TO_EDIT,
        ),
        aggregated(
            rbac::VIEW,
            &[rbac::AGGREGATE_TO_EDIT],
            rbac::AGGREGATE_TO_VIEW,
        ),
        cluster_role(
            "system:aggregate-to-view",
            &[rbac::AGGREGATE_TO_VIEW],
            json!({"rules": [
                rule(&[""], &["configmaps", "pods", "serviceaccounts"], &READ),
                rule(&[""], &["events", "namespaces/status", "pods/log", "pods/status"], &READ),
                rule(&[""], &["namespaces"], &READ),
                rule(&["batch"], &["jobs", "jobs/status"], &READ),
                rule(&["events.k8s.io"], &["events"], &READ),
            ]}),
        ),
        cluster_role(
            "system:aggregate-to-edit",
            &[rbac::AGGREGATE_TO_EDIT],
            json!({"rules": [
                rule(&[""], &["pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "secrets"], &READ),
                rule(&[""], &["serviceaccounts"], &["impersonate"]),
                rule(&[""], &["pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy"], &WRITE),
                rule(&[""], &["pods/eviction"], &["create"]),
                rule(&[""], &["configmaps", "events", "secrets", "serviceaccounts"], &WRITE),
                rule(&[""], &["serviceaccounts/token"], &["create"]),
                rule(&["batch"], &["jobs"], &WRITE),
            ]}),
        ),
        cluster_role(
            "system:aggregate-to-admin",
            &[rbac::AGGREGATE_TO_ADMIN],
            json!({"rules": [
                rule(&["authorization.k8s.io"], &["localsubjectaccessreviews"], &["create"]),
                rule(&[RBAC_GROUP], &["rolebindings", "roles"], &["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]),
            ]}),
        ),
    ];
    roles.extend(system_roles());
    roles.extend(certificate_roles());
    roles
}

/// Kubernetes' bootstrap `system:` ClusterRoles that name no controller and no signer:
/// the discovery, self-review and health roles a cluster always has. Only the
/// roles: which subjects hold them is left to the bindings a user creates (this server
/// authorizes discovery and self reviews by itself).
fn system_roles() -> Vec<Value> {
    let urls = |urls: &[&str]| json!({"rules": [{"nonResourceURLs": urls, "verbs": ["get"]}]});
    vec![
        cluster_role(
            "system:discovery",
            &[],
            urls(&[
                "/api",
                "/api/*",
                "/apis",
                "/apis/*",
                "/healthz",
                "/livez",
                "/openapi",
                "/openapi/*",
                "/readyz",
                "/version",
                "/version/",
            ]),
        ),
        cluster_role(
            "system:public-info-viewer",
            &[],
            urls(&["/healthz", "/livez", "/readyz", "/version", "/version/"]),
        ),
        cluster_role(
            "system:monitoring",
            &[],
            urls(&[
                "/healthz",
                "/healthz/*",
                "/livez",
                "/livez/*",
                "/metrics",
                "/metrics/slis",
                "/readyz",
                "/readyz/*",
            ]),
        ),
        cluster_role(
            "system:service-account-issuer-discovery",
            &[],
            urls(&[
                "/.well-known/openid-configuration",
                "/.well-known/openid-configuration/",
                "/openid/v1/jwks",
                "/openid/v1/jwks/",
            ]),
        ),
        cluster_role(
            "system:basic-user",
            &[],
            json!({"rules": [
                rule(&["authorization.k8s.io"], &["selfsubjectaccessreviews", "selfsubjectrulesreviews"], &["create"]),
                rule(&["authentication.k8s.io"], &["selfsubjectreviews"], &["create"]),
            ]}),
        ),
        cluster_role(
            "system:auth-delegator",
            &[],
            json!({"rules": [
                rule(&["authentication.k8s.io"], &["tokenreviews"], &["create"]),
                rule(&["authorization.k8s.io"], &["subjectaccessreviews"], &["create"]),
            ]}),
        ),
    ]
}

/// The bootstrap roles of the certificates API: who may request node certificates and
/// approve requests for each of Kubernetes' signers.
fn certificate_roles() -> Vec<Value> {
    let approve = |signer: &str| {
        json!({"rules": [{"apiGroups": ["certificates.k8s.io"], "resources": ["signers"],
                          "resourceNames": [signer], "verbs": ["approve"]}]})
    };
    let create = |resource: &str| json!({"rules": [rule(&["certificates.k8s.io"], &[resource], &["create"])]});
    vec![
        cluster_role(
            "system:node-bootstrapper",
            &[],
            json!({"rules": [rule(&["certificates.k8s.io"], &["certificatesigningrequests"], &["create", "get", "list", "watch"])]}),
        ),
        cluster_role(
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
            &[],
            create("certificatesigningrequests/nodeclient"),
        ),
        cluster_role(
            "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
            &[],
            create("certificatesigningrequests/selfnodeclient"),
        ),
        cluster_role(
            "system:certificates.k8s.io:kube-apiserver-client-approver",
            &[],
            approve("kubernetes.io/kube-apiserver-client"),
        ),
        cluster_role(
            "system:certificates.k8s.io:kube-apiserver-client-kubelet-approver",
            &[],
            approve("kubernetes.io/kube-apiserver-client-kubelet"),
        ),
        cluster_role(
            "system:certificates.k8s.io:kubelet-serving-approver",
            &[],
            approve("kubernetes.io/kubelet-serving"),
        ),
        cluster_role(
            "system:certificates.k8s.io:legacy-unknown-approver",
            &[],
            approve("kubernetes.io/legacy-unknown"),
        ),
    ]
}

/// Creates the default ClusterRoles and the `cluster-admin` binding of `system:masters`
/// when missing, restores auto-updated ones, then aggregates.
pub(crate) async fn ensure(app: &App) -> Result<(), ApiError> {
    let roles = app
        .registry
        .lookup(RBAC_GROUP, "v1", "clusterroles")
        .ok_or_else(|| ApiError::internal("clusterroles are not served"))?;
    let bindings = app
        .registry
        .lookup(RBAC_GROUP, "v1", "clusterrolebindings")
        .ok_or_else(|| ApiError::internal("clusterrolebindings are not served"))?;
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": rbac::CLUSTER_ADMIN, "labels": {rbac::BOOTSTRAPPING: "rbac-defaults"},
                     "annotations": {rbac::AUTOUPDATE: "true"}},
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": rbac::CLUSTER_ADMIN},
        "subjects": [{"apiGroup": RBAC_GROUP, "kind": "Group", "name": crate::rbac::MASTERS_GROUP}],
    });
    let wanted = default_cluster_roles()
        .into_iter()
        .map(|r| (roles.clone(), r))
        .chain(std::iter::once((bindings, binding)));
    for (info, obj) in wanted {
        let name = meta_str(&obj, "name").unwrap_or_default().to_string();
        match crate::verbs::create(
            app,
            &info,
            None,
            obj.clone(),
            false,
            &crate::ssa::Owner::Internal,
        )
        .await
        {
            Ok(_) => continue,
            Err(e) if e.code == 409 => {}
            Err(e) => return Err(e),
        }
        crate::verbs::modify(app, &info, None, &name, |old| {
            let auto = old
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(rbac::AUTOUPDATE))
                .and_then(Value::as_str)
                == Some("true");
            let mut new = old.clone();
            if auto {
                for k in ["rules", "aggregationRule", "roleRef", "subjects"] {
                    // Aggregated rules are the aggregation's to write.
                    if k == "rules" && obj.get("aggregationRule").is_some() {
                        continue;
                    }
                    match obj.get(k) {
                        Some(v) => new[k] = v.clone(),
                        None => {
                            new.as_object_mut().map(|m| m.remove(k));
                        }
                    }
                }
            }
            Ok(new)
        })
        .await?;
    }
    aggregate(app).await
}

fn matches(selector: &Value, labels: &serde_json::Map<String, Value>) -> bool {
    let labels_ok = selector["matchLabels"]
        .as_object()
        .into_iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let exprs_ok = selector["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|e| {
            let key = e["key"].as_str().unwrap_or_default();
            let values: Vec<&Value> = e["values"].as_array().into_iter().flatten().collect();
            match e["operator"].as_str().unwrap_or_default() {
                "In" => labels.get(key).is_some_and(|v| values.contains(&v)),
                "NotIn" => labels.get(key).is_none_or(|v| !values.contains(&v)),
                "Exists" => labels.contains_key(key),
                "DoesNotExist" => !labels.contains_key(key),
                _ => false,
            }
        });
    labels_ok && exprs_ok
}

/// The aggregated rules of ClusterRoles with an `aggregationRule`, computed to a fixed
/// point over `roles` (name → object).
pub(crate) struct Aggregated {
    /// The rules of every aggregated role that settled.
    pub rules: BTreeMap<String, Value>,
    /// The aggregated roles whose rules never settle: a ring of roles aggregating each
    /// other (each takes the next one's rules, round and round) and the roles that
    /// aggregate one of them. Writing them would change them again on every pass.
    pub unsettled: Vec<String>,
}

/// The aggregated rules of every ClusterRole with an `aggregationRule`, computed to a
/// fixed point over `roles` (name → object); see [`Aggregated`].
pub(crate) fn aggregated_rules(roles: &BTreeMap<String, Value>) -> Aggregated {
    let mut rules: BTreeMap<String, Value> = roles
        .iter()
        .map(|(n, r)| (n.clone(), r.get("rules").cloned().unwrap_or(json!([]))))
        .collect();
    let empty = serde_json::Map::new();
    // A fixed point is reached within one round per role; what still changes after
    // that never settles.
    let mut changed_last: Vec<String> = Vec::new();
    for _ in 0..=roles.len() {
        changed_last.clear();
        for (name, role) in roles {
            let Some(selectors) = role
                .pointer("/aggregationRule/clusterRoleSelectors")
                .and_then(Value::as_array)
            else {
                continue;
            };
            let mut union: Vec<Value> = Vec::new();
            for (other, o) in roles.iter().filter(|(n, _)| *n != name) {
                let labels = o
                    .pointer("/metadata/labels")
                    .and_then(Value::as_object)
                    .unwrap_or(&empty);
                if selectors.iter().any(|s| matches(s, labels)) {
                    for r in rules[other].as_array().into_iter().flatten() {
                        if !union.contains(r) {
                            union.push(r.clone());
                        }
                    }
                }
            }
            let union = Value::Array(union);
            if rules[name] != union {
                rules.insert(name.clone(), union);
                changed_last.push(name.clone());
            }
        }
        if changed_last.is_empty() {
            break;
        }
    }
    Aggregated {
        rules: rules
            .into_iter()
            .filter(|(n, _)| roles[n].get("aggregationRule").is_some() && !changed_last.contains(n))
            .collect(),
        unsettled: changed_last,
    }
}

/// Whether a committed change is one of a ClusterRole (aggregation follows it).
pub(crate) fn is_cluster_role_change(e: &crate::store::Event) -> bool {
    e.key.rkey == crate::registry::rkey(RBAC_GROUP, "clusterroles")
}

/// Runs [`aggregate`] after ClusterRole changes (`changes` carries one signal per
/// committed batch that had any), until the server goes. Signals that arrived while a
/// pass ran are folded into the next pass.
pub(crate) async fn aggregation_loop(app: Weak<App>, mut changes: mpsc::UnboundedReceiver<()>) {
    while changes.recv().await.is_some() {
        while changes.try_recv().is_ok() {}
        let Some(app) = app.upgrade() else { return };
        if let Err(e) = aggregate(&app).await {
            tracing::warn!("ClusterRole aggregation: {}", e.message);
        }
    }
}

/// Writes the aggregated rules of every aggregated ClusterRole whose stored rules differ.
pub(crate) async fn aggregate(app: &App) -> Result<(), ApiError> {
    let Some(info) = app.registry.lookup(RBAC_GROUP, "v1", "clusterroles") else {
        return Ok(());
    };
    let stored = app
        .store
        .all_of(crate::registry::rkey(RBAC_GROUP, "clusterroles"))
        .await?;
    let roles: BTreeMap<String, Value> = stored
        .into_iter()
        .filter(|r| r.pointer("/metadata/deletionTimestamp").is_none())
        .filter_map(|r| Some((meta_str(&r, "name")?.to_string(), r)))
        .collect();
    let aggregated = aggregated_rules(&roles);
    if !aggregated.unsettled.is_empty() {
        tracing::warn!(
            "ClusterRoles {} aggregate each other in a ring, so their rules never settle; they are left as stored until the ring is broken",
            aggregated.unsettled.join(", ")
        );
    }
    for (name, want) in aggregated.rules {
        if roles[&name].get("rules") == Some(&want) {
            continue;
        }
        let result = crate::verbs::modify(app, &info, None, &name, |old| {
            let mut new = old.clone();
            new["rules"] = want.clone();
            Ok(new)
        })
        .await;
        match result {
            Ok(_) => {}
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ring_of_roles_aggregating_each_other_is_left_unsettled() {
        let role = |name: &str, next: &str, resource: &str| {
            json!({"metadata": {"name": name, "labels": {"ring": name}},
                   "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"ring": next}}]},
                   "rules": [rule(&[""], &[resource], &READ)]})
        };
        let mut roles: BTreeMap<String, Value> = BTreeMap::new();
        roles.insert("a".into(), role("a", "b", "pods"));
        roles.insert("b".into(), role("b", "c", "services"));
        roles.insert("c".into(), role("c", "a", "secrets"));
        // Outside the ring: a role aggregating one of it, and one that settles.
        roles.insert(
            "watcher".into(),
            json!({"metadata": {"name": "watcher"},
                   "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"ring": "a"}}]}}),
        );
        roles.insert(
            "calm".into(),
            json!({"metadata": {"name": "calm"},
                   "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"calm": "yes"}}]}}),
        );
        let agg = aggregated_rules(&roles);
        let mut unsettled = agg.unsettled.clone();
        unsettled.sort();
        assert_eq!(unsettled, ["a", "b", "c", "watcher"]);
        assert_eq!(agg.rules.keys().collect::<Vec<_>>(), ["calm"]);
        assert_eq!(agg.rules["calm"], json!([]));
        // A pair aggregating each other settles (each ends with the other's first rules).
        roles.retain(|n, _| n == "a" || n == "b");
        roles.insert("b".into(), role("b", "a", "services"));
        assert!(aggregated_rules(&roles).unsettled.is_empty());
    }

    #[test]
    fn aggregation_reaches_a_fixed_point_through_edit_into_admin() {
        let mut roles: BTreeMap<String, Value> = default_cluster_roles()
            .into_iter()
            .map(|r| (meta_str(&r, "name").unwrap().to_string(), r))
            .collect();
        roles.insert(
            "redis-promise-view".into(),
            json!({"metadata": {"name": "redis-promise-view", "labels": {rbac::AGGREGATE_TO_VIEW: "true"}},
                   "rules": [rule(&["marketplace.kratix.io"], &["redis"], &READ)]}),
        );
        let agg = aggregated_rules(&roles);
        assert!(agg.unsettled.is_empty());
        let agg = agg.rules;
        let has = |role: &str, group: &str| {
            agg[role]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["apiGroups"][0] == group)
        };
        for role in [rbac::VIEW, rbac::EDIT, rbac::ADMIN] {
            assert!(
                has(role, "marketplace.kratix.io"),
                "{role}: {:?}",
                agg[role]
            );
            assert!(has(role, "batch"), "{role}");
        }
        assert!(has(rbac::ADMIN, RBAC_GROUP));
        assert!(!has(rbac::EDIT, RBAC_GROUP), "roles only for admin");
        assert!(!agg.contains_key(rbac::CLUSTER_ADMIN));
    }
}
