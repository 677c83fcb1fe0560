//! RBAC escalation prevention, as kube-apiserver's RBAC storage does it: nobody grants
//! through a Role, ClusterRole or binding what they do not hold themselves.
//!
//! * A Role or ClusterRole is written only if its writer holds every rule in it (in the
//!   Role's namespace; cluster-wide for a ClusterRole), or may `escalate` roles there.
//! * A ClusterRole's `aggregationRule` gathers rules from any labelled role, so setting or
//!   changing one needs everything (`*` on `*`), or `escalate`.
//! * A RoleBinding or ClusterRoleBinding is written only if its writer holds every rule
//!   of the role it names (in the binding's namespace; cluster-wide for a
//!   ClusterRoleBinding), or may `bind` that role.
//!
//! Members of `system:masters` (the administrator and Plinth's own controllers), writes
//! the server makes itself, writes that only touch what garbage collection reads
//! (owner references, finalizers), and `--authorization-mode=RBAC,AlwaysAllow` are not
//! checked, as in Kubernetes. A refusal is `403 Forbidden` naming the rules not held:
//!
//! ```text
//! clusterroles.rbac.authorization.k8s.io "everything" is forbidden: user "system:serviceaccount:team-a:deployer" (groups=["system:serviceaccounts" "system:serviceaccounts:team-a" "system:authenticated"]) is attempting to grant RBAC permissions not currently held:
//! {APIGroups:["*"], Resources:["*"], Verbs:["*"]}
//! ```

use k8s_openapi::api::rbac::v1::{ClusterRole, PolicyRule, Role, RoleRef};
use serde_json::Value;

use crate::app::App;
use crate::auth::Identity;
use crate::error::{ApiError, group_resource};
use crate::rbac::{
    GROUP as RBAC_GROUP, MASTERS_GROUP as MASTERS, RbacSnapshot, RequestAttributes,
    authenticated_rules, authorize, compact_string, full_authority, uncovered,
};
use crate::resource::ResourceInfo;
use crate::webhook::Attributes;

/// What an RBAC write grants, read from the object written.
enum Grant {
    /// A Role's or ClusterRole's rules; `aggregates` when it sets or changes an
    /// `aggregationRule`.
    Rules {
        rules: Vec<PolicyRule>,
        aggregates: bool,
    },
    /// A binding's role.
    Binding(RoleRef),
}

/// Refuses (403) an RBAC write by `admission`'s user that grants more than the user holds.
/// Not an RBAC object, or a write that is never checked (see the module docs): `Ok`.
///
/// # Errors
/// 403 naming the rules the writer does not hold; 404 when a binding names a role that
/// does not exist; 422 when the object does not decode as its kind; 500 when the RBAC
/// objects cannot be read.
pub(crate) async fn check(
    app: &App,
    admission: &Attributes<'_>,
    obj: &Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    let info = admission.info;
    if !is_rbac(info) || app.always_allow {
        return Ok(());
    }
    let user = admission.user();
    if user.groups.iter().any(|g| g == MASTERS) || old.is_some_and(|o| only_gc_fields(o, obj)) {
        return Ok(());
    }
    let name = admission.name;
    let namespace = admission.namespace;
    let grant = grant_of(info, name, obj, old)?;
    let snapshot = crate::authz::stored_snapshot(&app.store).await?;
    let (verb, resource, role_name) = match &grant {
        Grant::Rules { .. } => ("escalate", info.plural.as_str(), name),
        Grant::Binding(r) if r.kind == "Role" => ("bind", "roles", r.name.as_str()),
        Grant::Binding(r) => ("bind", "clusterroles", r.name.as_str()),
    };
    if may(&snapshot, &user, verb, resource, namespace, role_name) {
        return Ok(());
    }
    let mut held = snapshot.rules_for(&user.user, &user.groups, namespace);
    held.extend(authenticated_rules());
    match grant {
        Grant::Rules { rules, aggregates } => {
            refuse_unheld(info, name, &user, &held, &rules)?;
            if aggregates && !uncovered(&held, &full_authority()).is_empty() {
                return Err(forbidden(
                    info,
                    name,
                    "must have cluster-admin privileges to use the aggregationRule".into(),
                ));
            }
            Ok(())
        }
        Grant::Binding(role_ref) => {
            let Some(rules) = snapshot.role_ref_rules(&role_ref.kind, &role_ref.name, namespace)
            else {
                let plural = if role_ref.kind == "Role" {
                    "roles"
                } else {
                    "clusterroles"
                };
                return Err(ApiError::not_found(RBAC_GROUP, plural, &role_ref.name));
            };
            refuse_unheld(info, name, &user, &held, rules)
        }
    }
}

fn is_rbac(info: &ResourceInfo) -> bool {
    info.builtin
        && info.group == RBAC_GROUP
        && matches!(
            info.plural.as_str(),
            "roles" | "clusterroles" | "rolebindings" | "clusterrolebindings"
        )
}

/// What the object grants; for a ClusterRole whether its `aggregationRule` is new.
fn grant_of(
    info: &ResourceInfo,
    name: &str,
    obj: &Value,
    old: Option<&Value>,
) -> Result<Grant, ApiError> {
    let undecodable = |e: serde_json::Error| {
        ApiError::invalid(
            info,
            name,
            vec![crate::validation::invalid("", "", &e.to_string())],
        )
    };
    match info.plural.as_str() {
        "roles" => {
            let role: Role = serde_json::from_value(obj.clone()).map_err(undecodable)?;
            Ok(Grant::Rules {
                rules: role.rules.unwrap_or_default(),
                aggregates: false,
            })
        }
        "clusterroles" => {
            let role: ClusterRole = serde_json::from_value(obj.clone()).map_err(undecodable)?;
            let before = old.map(|o| o.get("aggregationRule"));
            let aggregates = role.aggregation_rule.is_some()
                && before.is_none_or(|b| b != obj.get("aggregationRule"));
            Ok(Grant::Rules {
                rules: role.rules.unwrap_or_default(),
                aggregates,
            })
        }
        _ => {
            let role_ref: RoleRef =
                serde_json::from_value(obj["roleRef"].clone()).map_err(undecodable)?;
            Ok(Grant::Binding(role_ref))
        }
    }
}

/// Whether `user` may `verb` the role `role` (the escalate and bind verbs).
fn may(
    snapshot: &RbacSnapshot,
    user: &Identity,
    verb: &str,
    resource: &str,
    namespace: &str,
    role: &str,
) -> bool {
    let attrs = RequestAttributes {
        user: user.user.clone(),
        groups: user.groups.clone(),
        verb: verb.into(),
        resource_request: true,
        namespace: namespace.into(),
        api_group: RBAC_GROUP.into(),
        resource: resource.into(),
        name: role.into(),
        ..Default::default()
    };
    authorize(&attrs, snapshot).allowed()
}

/// 403 listing the rules of `wanted` that `held` does not cover.
fn refuse_unheld(
    info: &ResourceInfo,
    name: &str,
    user: &Identity,
    held: &[PolicyRule],
    wanted: &[PolicyRule],
) -> Result<(), ApiError> {
    let missing = uncovered(held, wanted);
    if missing.is_empty() {
        return Ok(());
    }
    let groups: Vec<String> = user.groups.iter().map(|g| format!("{g:?}")).collect();
    let lines: Vec<String> = missing.iter().map(compact_string).collect();
    Err(forbidden(
        info,
        name,
        format!(
            "user {:?} (groups=[{}]) is attempting to grant RBAC permissions not currently held:\n{}",
            user.user,
            groups.join(" "),
            lines.join("\n")
        ),
    ))
}

fn forbidden(info: &ResourceInfo, name: &str, why: String) -> ApiError {
    let mut e = ApiError::new(
        403,
        "Forbidden",
        format!("{} {name:?} is forbidden: {why}", group_resource(info)),
    );
    e.details = Some(serde_json::json!({"name": name, "group": info.group, "kind": info.plural}));
    e
}

/// Whether `new` differs from `old` only in what garbage collection reads and writes
/// (owner references, finalizers) and in what the server keeps itself.
fn only_gc_fields(old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            for f in [
                "ownerReferences",
                "finalizers",
                "managedFields",
                "resourceVersion",
                "generation",
            ] {
                m.remove(f);
            }
        }
        v
    };
    strip(old) == strip(new)
}
