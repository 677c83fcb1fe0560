//! Kubernetes RBAC authorization (rbac.authorization.k8s.io/v1) as pure functions.
//!
//! [`authorize`] decides one request from a snapshot of the Roles, ClusterRoles,
//! RoleBindings and ClusterRoleBindings, with the semantics of the Kubernetes RBAC
//! authorizer (`plugin/pkg/auth/authorizer/rbac`):
//!
//! * a ClusterRoleBinding grants its ClusterRole everywhere (all namespaces, cluster-scoped
//!   resources, non-resource URLs);
//! * a RoleBinding grants its Role — or a ClusterRole it references — only inside the
//!   binding's namespace, and never non-resource URLs;
//! * rules match on `apiGroups`, `resources` (`*`, `pods/log`, `pods/*`, `*/scale`),
//!   `resourceNames` (only requests that name an object), `verbs` (`*`) and
//!   `nonResourceURLs` (exact, or a prefix ending in `*`);
//! * subjects match by user name, group, or ServiceAccount (user
//!   `system:serviceaccount:<ns>:<name>`); members of `system:masters` are allowed
//!   everything, as the Kubernetes API server's privileged-group authorizer does.
//!
//! Aggregated ClusterRoles (`aggregationRule`) are used with the rules they hold; filling
//! them from matching ClusterRoles is the job of whoever maintains the snapshot.

use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, Subject,
};

/// The RBAC API group.
pub const GROUP: &str = "rbac.authorization.k8s.io";
/// The group whose members are allowed everything, unchecked (Kubernetes'
/// privileged-group authorizer); the administrator and Plinth's controllers are in it.
pub const MASTERS_GROUP: &str = "system:masters";

/// The request being authorized (Kubernetes `authorizer.Attributes`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RequestAttributes {
    /// Authenticated user name, e.g. `system:serviceaccount:default:builder` or `admin`.
    pub user: String,
    /// The user's groups (for service accounts: `system:serviceaccounts`,
    /// `system:serviceaccounts:<ns>`, `system:authenticated`; see [`service_account_user`]).
    pub groups: Vec<String>,
    /// API verb: `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`,
    /// `deletecollection` (or for non-resource requests the lower-cased HTTP method).
    pub verb: String,
    /// True for requests to `/api/...` and `/apis/...` resources; false for non-resource
    /// URLs such as `/healthz` or `/version`.
    pub resource_request: bool,
    /// Namespace of the request; empty for cluster-scoped resources and for requests
    /// across all namespaces.
    pub namespace: String,
    /// API group; empty for the core group.
    pub api_group: String,
    /// Plural resource name, e.g. `configmaps`.
    pub resource: String,
    /// Subresource, e.g. `status`, `log`, `token`; empty for the main resource.
    pub subresource: String,
    /// Object name; empty for `list`, `watch` of a collection, `create` without a name.
    pub name: String,
    /// Request path for non-resource requests, e.g. `/healthz`.
    pub path: String,
}

/// The RBAC objects the decision is made from.
#[derive(Clone, Debug, Default)]
pub struct RbacSnapshot {
    /// All Roles (each carries its namespace in `metadata.namespace`).
    pub roles: Vec<Role>,
    /// All ClusterRoles.
    pub cluster_roles: Vec<ClusterRole>,
    /// All RoleBindings (namespaced).
    pub role_bindings: Vec<RoleBinding>,
    /// All ClusterRoleBindings.
    pub cluster_role_bindings: Vec<ClusterRoleBinding>,
}

/// Outcome of [`authorize`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Allowed; carries what allowed it, e.g.
    /// `RBAC: allowed by RoleBinding "edit/team-a" of ClusterRole "edit" to User "alice"`.
    Allow(String),
    /// Denied; carries the `Status.message` of the 403 answer (see [`forbidden_message`]).
    Deny(String),
}

impl Decision {
    /// True for [`Decision::Allow`].
    pub fn allowed(&self) -> bool {
        matches!(self, Decision::Allow(_))
    }
}

/// The user name and groups the Kubernetes API server gives a ServiceAccount token's
/// bearer: `system:serviceaccount:<ns>:<name>` in groups `system:serviceaccounts`,
/// `system:serviceaccounts:<ns>` and `system:authenticated`.
pub fn service_account_user(namespace: &str, name: &str) -> (String, Vec<String>) {
    (
        format!("system:serviceaccount:{namespace}:{name}"),
        vec![
            "system:serviceaccounts".to_string(),
            format!("system:serviceaccounts:{namespace}"),
            "system:authenticated".to_string(),
        ],
    )
}

/// Decide whether `attrs` is allowed by the RBAC objects in `roles`.
///
/// Returns [`Decision::Allow`] naming the binding and role that granted the request, or
/// [`Decision::Deny`] with the Kubernetes 403 message (the server answers
/// `403 Forbidden`, `reason: Forbidden`, `details: {name, group, kind: <resource>}`).
pub fn authorize(attrs: &RequestAttributes, roles: &RbacSnapshot) -> Decision {
    if attrs.groups.iter().any(|g| g == MASTERS_GROUP) {
        return Decision::Allow("allowed by group \"system:masters\"".into());
    }
    for crb in &roles.cluster_role_bindings {
        let Some(subject) = matching_subject(crb.subjects.as_deref(), attrs, None) else {
            continue;
        };
        if crb.role_ref.kind != "ClusterRole" {
            continue;
        }
        let Some(cr) = find_cluster_role(roles, &crb.role_ref.name) else {
            continue;
        };
        if rules_allow(cr.rules.as_deref(), attrs) {
            return Decision::Allow(format!(
                "RBAC: allowed by ClusterRoleBinding {:?} of ClusterRole {:?} to {} {:?}",
                crb.metadata.name.as_deref().unwrap_or(""),
                crb.role_ref.name,
                subject.kind,
                subject.name
            ));
        }
    }
    if attrs.resource_request && !attrs.namespace.is_empty() {
        for rb in &roles.role_bindings {
            let ns = rb.metadata.namespace.as_deref().unwrap_or("");
            if ns != attrs.namespace {
                continue;
            }
            let Some(subject) = matching_subject(rb.subjects.as_deref(), attrs, Some(ns)) else {
                continue;
            };
            let rules = match rb.role_ref.kind.as_str() {
                "Role" => find_role(roles, ns, &rb.role_ref.name).and_then(|r| r.rules.as_deref()),
                "ClusterRole" => {
                    find_cluster_role(roles, &rb.role_ref.name).and_then(|r| r.rules.as_deref())
                }
                _ => None,
            };
            if rules.is_some() && rules_allow(rules, attrs) {
                return Decision::Allow(format!(
                    "RBAC: allowed by RoleBinding \"{}/{}\" of {} {:?} to {} {:?}",
                    ns,
                    rb.metadata.name.as_deref().unwrap_or(""),
                    rb.role_ref.kind,
                    rb.role_ref.name,
                    subject.kind,
                    subject.name
                ));
            }
        }
    }
    Decision::Deny(forbidden_message(attrs))
}

/// Build the attributes of an HTTP request the way the Kubernetes API server's
/// `RequestInfoFactory` does, so the caller only adds the authenticated identity.
///
/// * `method` — HTTP method; `path` — URL path without query; `query` — the raw query
///   string (`watch=true` and `watch=1` turn `get`/`list` into `watch`).
/// * Resource paths: `/api/v1/...` and `/apis/<group>/<version>/...`, with
///   `namespaces/<ns>/<resource>[/<name>[/<subresource>]]` or
///   `<resource>[/<name>[/<subresource>]]`; `/api/v1/namespaces/<name>` is the
///   `namespaces` resource itself (namespace = name, as Kubernetes sets it), and
///   `/apis/<g>/<v>/watch/...` is the legacy watch form.
/// * Verbs: GET → `get` with a name, `list` without, `watch` with `watch=true`;
///   POST → `create`; PUT → `update`; PATCH → `patch`; DELETE → `delete` with a name,
///   `deletecollection` without. Anything else (`/version`, `/healthz`, `/openapi/v3`,
///   discovery such as `/apis/<g>/<v>`) is a non-resource request with the lower-cased
///   method as verb.
pub fn request_attributes(
    method: &str,
    path: &str,
    query: &str,
    user: &str,
    groups: &[String],
) -> RequestAttributes {
    let mut a = RequestAttributes {
        user: user.to_string(),
        groups: groups.to_vec(),
        verb: method.to_ascii_lowercase(),
        path: path.to_string(),
        ..Default::default()
    };
    let parts: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|p| !p.is_empty())
        .collect();
    let rest: &[&str] = match parts.as_slice() {
        ["api", _version, rest @ ..] if !rest.is_empty() => rest,
        ["apis", group, _version, rest @ ..] if !rest.is_empty() => {
            a.api_group = (*group).to_string();
            rest
        }
        _ => return a,
    };
    let mut rest = rest.to_vec();
    let mut watch = query
        .split('&')
        .any(|kv| kv == "watch=true" || kv == "watch=1" || kv == "watch");
    if rest.first() == Some(&"watch") {
        watch = true;
        rest.remove(0);
    }
    if rest.len() >= 2 && rest[0] == "namespaces" {
        if rest.len() == 2 {
            // `/api/v1/namespaces/<name>`: the Namespace object itself.
            a.namespace = rest[1].to_string();
            rest = vec!["namespaces", rest[1]];
        } else {
            a.namespace = rest[1].to_string();
            rest = rest[2..].to_vec();
        }
    }
    if rest.is_empty() {
        return a;
    }
    a.resource_request = true;
    a.resource = rest[0].to_string();
    if let Some(n) = rest.get(1) {
        a.name = (*n).to_string();
    }
    if let Some(sub) = rest.get(2) {
        a.subresource = (*sub).to_string();
    }
    a.verb = match method.to_ascii_uppercase().as_str() {
        "GET" | "HEAD" if watch => "watch",
        "GET" | "HEAD" if a.name.is_empty() => "list",
        "GET" | "HEAD" => "get",
        "POST" => "create",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" if a.name.is_empty() => "deletecollection",
        "DELETE" => "delete",
        other => {
            return RequestAttributes {
                verb: other.to_ascii_lowercase(),
                ..a
            };
        }
    }
    .to_string();
    a
}

impl RbacSnapshot {
    /// Build a snapshot from stored JSON objects (as listed from the API), then fill
    /// aggregated ClusterRoles ([`RbacSnapshot::aggregate`]).
    ///
    /// # Errors
    /// The first object that does not decode as its RBAC type.
    pub fn from_values(
        roles: &[serde_json::Value],
        cluster_roles: &[serde_json::Value],
        role_bindings: &[serde_json::Value],
        cluster_role_bindings: &[serde_json::Value],
    ) -> Result<Self, serde_json::Error> {
        fn decode<T: serde::de::DeserializeOwned>(
            v: &[serde_json::Value],
        ) -> Result<Vec<T>, serde_json::Error> {
            v.iter()
                .map(|x| serde_json::from_value(x.clone()))
                .collect()
        }
        let mut s = RbacSnapshot {
            roles: decode(roles)?,
            cluster_roles: decode(cluster_roles)?,
            role_bindings: decode(role_bindings)?,
            cluster_role_bindings: decode(cluster_role_bindings)?,
        };
        s.aggregate();
        Ok(s)
    }

    /// Fill every ClusterRole that has an `aggregationRule` with the rules of the
    /// ClusterRoles whose labels match any of its `clusterRoleSelectors` (what the
    /// Kubernetes clusterrole-aggregation controller does), in name order.
    pub fn aggregate(&mut self) {
        let snapshot = self.cluster_roles.clone();
        for cr in self.cluster_roles.iter_mut() {
            let Some(selectors) = cr
                .aggregation_rule
                .as_ref()
                .and_then(|a| a.cluster_role_selectors.as_ref())
            else {
                continue;
            };
            let mut sources: Vec<&ClusterRole> = snapshot
                .iter()
                .filter(|o| o.metadata.name != cr.metadata.name)
                .filter(|o| selectors.iter().any(|sel| selector_matches(sel, o)))
                .collect();
            sources.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
            let mut rules: Vec<PolicyRule> = Vec::new();
            for src in sources {
                for r in src.rules.iter().flatten() {
                    if !rules.contains(r) {
                        rules.push(r.clone());
                    }
                }
            }
            cr.rules = Some(rules);
        }
    }
}

fn selector_matches(
    sel: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
    cr: &ClusterRole,
) -> bool {
    let empty = std::collections::BTreeMap::new();
    let labels = cr.metadata.labels.as_ref().unwrap_or(&empty);
    let labels_ok = sel
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let exprs_ok = sel.match_expressions.iter().flatten().all(|e| {
        let values = e.values.as_deref().unwrap_or_default();
        match e.operator.as_str() {
            "In" => labels.get(&e.key).is_some_and(|v| values.contains(v)),
            "NotIn" => labels.get(&e.key).is_none_or(|v| !values.contains(v)),
            "Exists" => labels.contains_key(&e.key),
            "DoesNotExist" => !labels.contains_key(&e.key),
            _ => false,
        }
    });
    labels_ok && exprs_ok
}

/// The `Status.message` of Kubernetes' 403 answer, e.g.
/// `configmaps "cfg" is forbidden: User "system:serviceaccount:ns:sa" cannot get resource
/// "configmaps" in API group "" in the namespace "ns"`; for collections without a name
/// `pods is forbidden: ...`; for cluster-scoped requests `... at the cluster scope`; for
/// non-resource URLs `forbidden: User "bob" cannot get path "/metrics"`.
pub fn forbidden_message(attrs: &RequestAttributes) -> String {
    if !attrs.resource_request {
        return format!(
            "forbidden: User {:?} cannot {} path {:?}",
            attrs.user, attrs.verb, attrs.path
        );
    }
    let qualified = if attrs.api_group.is_empty() {
        attrs.resource.clone()
    } else {
        format!("{}.{}", attrs.resource, attrs.api_group)
    };
    let subject = if attrs.name.is_empty() {
        qualified
    } else {
        format!("{qualified} {:?}", attrs.name)
    };
    let resource = if attrs.subresource.is_empty() {
        attrs.resource.clone()
    } else {
        format!("{}/{}", attrs.resource, attrs.subresource)
    };
    let scope = if attrs.namespace.is_empty() {
        "at the cluster scope".to_string()
    } else {
        format!("in the namespace {:?}", attrs.namespace)
    };
    format!(
        "{subject} is forbidden: User {:?} cannot {} resource {:?} in API group {:?} {scope}",
        attrs.user, attrs.verb, resource, attrs.api_group
    )
}

fn find_role<'a>(s: &'a RbacSnapshot, ns: &str, name: &str) -> Option<&'a Role> {
    s.roles.iter().find(|r| {
        r.metadata.namespace.as_deref() == Some(ns) && r.metadata.name.as_deref() == Some(name)
    })
}

fn find_cluster_role<'a>(s: &'a RbacSnapshot, name: &str) -> Option<&'a ClusterRole> {
    s.cluster_roles
        .iter()
        .find(|r| r.metadata.name.as_deref() == Some(name))
}

/// First subject of a binding that denotes the requesting user. `binding_ns` is the
/// namespace of a RoleBinding (a ServiceAccount subject without namespace defaults to it).
fn matching_subject<'a>(
    subjects: Option<&'a [Subject]>,
    attrs: &RequestAttributes,
    binding_ns: Option<&str>,
) -> Option<&'a Subject> {
    subjects?.iter().find(|s| match s.kind.as_str() {
        "User" => s.name == attrs.user,
        "Group" => attrs.groups.contains(&s.name),
        "ServiceAccount" => {
            let ns = s
                .namespace
                .as_deref()
                .filter(|n| !n.is_empty())
                .or(binding_ns)
                .unwrap_or("");
            !ns.is_empty() && attrs.user == format!("system:serviceaccount:{ns}:{}", s.name)
        }
        _ => false,
    })
}

fn rules_allow(rules: Option<&[PolicyRule]>, attrs: &RequestAttributes) -> bool {
    rules
        .unwrap_or_default()
        .iter()
        .any(|r| rule_allows(r, attrs))
}

fn has(list: &[String], v: &str) -> bool {
    list.iter().any(|x| x == "*" || x == v)
}

/// One PolicyRule against one request (Kubernetes `RuleAllows`).
pub fn rule_allows(rule: &PolicyRule, attrs: &RequestAttributes) -> bool {
    if !has(&rule.verbs, &attrs.verb) {
        return false;
    }
    if !attrs.resource_request {
        return rule.non_resource_urls.as_deref().is_some_and(|urls| {
            urls.iter().any(|u| {
                u == "*"
                    || *u == attrs.path
                    || u.strip_suffix('*')
                        .is_some_and(|p| attrs.path.starts_with(p))
            })
        });
    }
    let groups = rule.api_groups.as_deref().unwrap_or_default();
    if !has(groups, &attrs.api_group) {
        return false;
    }
    let resources = rule.resources.as_deref().unwrap_or_default();
    let combined = if attrs.subresource.is_empty() {
        attrs.resource.clone()
    } else {
        format!("{}/{}", attrs.resource, attrs.subresource)
    };
    let resource_ok = resources.iter().any(|r| {
        if r == "*" || *r == combined {
            return true;
        }
        if attrs.subresource.is_empty() {
            return false;
        }
        // `pods/*` covers every subresource of pods, `*/scale` the scale of everything.
        *r == format!("{}/*", attrs.resource) || *r == format!("*/{}", attrs.subresource)
    });
    if !resource_ok {
        return false;
    }
    match rule.resource_names.as_deref() {
        None | Some([]) => true,
        Some(names) => !attrs.name.is_empty() && names.contains(&attrs.name),
    }
}

// ---------------------------------------------------------------- escalation

/// The rules every authenticated identity holds through Kubernetes' bootstrap bindings
/// of `system:authenticated`: discovery, OpenAPI, version and health paths
/// (`system:discovery`, `system:public-info-viewer`) and creating self-reviews
/// (`system:basic-user`).
pub fn authenticated_rules() -> Vec<PolicyRule> {
    let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    vec![
        PolicyRule {
            verbs: strings(&["get"]),
            non_resource_urls: Some(strings(&[
                "/api",
                "/api/*",
                "/apis",
                "/apis/*",
                "/openapi",
                "/openapi/*",
                "/version",
                "/version/",
                "/healthz",
                "/livez",
                "/readyz",
            ])),
            ..Default::default()
        },
        PolicyRule {
            verbs: strings(&["create"]),
            api_groups: Some(strings(&["authorization.k8s.io"])),
            resources: Some(strings(&[
                "selfsubjectaccessreviews",
                "selfsubjectrulesreviews",
            ])),
            ..Default::default()
        },
        PolicyRule {
            verbs: strings(&["create"]),
            api_groups: Some(strings(&["authentication.k8s.io"])),
            resources: Some(strings(&["selfsubjectreviews"])),
            ..Default::default()
        },
    ]
}

/// Everything: `*` on every resource of every group and on every non-resource URL (what
/// Kubernetes asks of whoever sets a ClusterRole's `aggregationRule`).
pub fn full_authority() -> Vec<PolicyRule> {
    let all = || Some(vec!["*".to_string()]);
    vec![
        PolicyRule {
            verbs: vec!["*".into()],
            api_groups: all(),
            resources: all(),
            ..Default::default()
        },
        PolicyRule {
            verbs: vec!["*".into()],
            non_resource_urls: all(),
            ..Default::default()
        },
    ]
}

impl RbacSnapshot {
    /// The rules `user` (in `groups`) holds in `namespace`, as Kubernetes' rule resolver
    /// gathers them: every ClusterRoleBinding's role, and when `namespace` is not empty
    /// the RoleBindings of that namespace. The stored objects only; see
    /// [`authenticated_rules`] for what every authenticated user holds besides.
    pub fn rules_for(&self, user: &str, groups: &[String], namespace: &str) -> Vec<PolicyRule> {
        let attrs = RequestAttributes {
            user: user.to_string(),
            groups: groups.to_vec(),
            ..Default::default()
        };
        let mut out: Vec<PolicyRule> = Vec::new();
        for crb in &self.cluster_role_bindings {
            if crb.role_ref.kind == "ClusterRole"
                && matching_subject(crb.subjects.as_deref(), &attrs, None).is_some()
                && let Some(cr) = find_cluster_role(self, &crb.role_ref.name)
            {
                out.extend(cr.rules.iter().flatten().cloned());
            }
        }
        if namespace.is_empty() {
            return out;
        }
        for rb in &self.role_bindings {
            let ns = rb.metadata.namespace.as_deref().unwrap_or("");
            if ns == namespace
                && matching_subject(rb.subjects.as_deref(), &attrs, Some(ns)).is_some()
            {
                out.extend(
                    self.role_ref_rules(&rb.role_ref.kind, &rb.role_ref.name, ns)
                        .into_iter()
                        .flatten()
                        .cloned(),
                );
            }
        }
        out
    }

    /// The rules of the role a binding refers to (`Role` in `namespace`, or `ClusterRole`);
    /// `None` when no such role is stored.
    pub fn role_ref_rules(&self, kind: &str, name: &str, namespace: &str) -> Option<&[PolicyRule]> {
        match kind {
            "Role" => {
                find_role(self, namespace, name).map(|r| r.rules.as_deref().unwrap_or_default())
            }
            "ClusterRole" => {
                find_cluster_role(self, name).map(|r| r.rules.as_deref().unwrap_or_default())
            }
            _ => None,
        }
    }
}

/// What of `wanted` the rules in `held` do not cover (Kubernetes' `validation.Covers`):
/// each wanted rule is broken into one verb on one group, resource and name (or one
/// non-resource URL), and every piece must be allowed by some held rule. The pieces left
/// are merged back by verb, as Kubernetes reports them, and returned in
/// [`compact_string`] order.
///
/// ```
/// use k8s_openapi::api::rbac::v1::PolicyRule;
/// use plinth_apiserver::rbac::{compact_string, uncovered};
///
/// let rule = |verbs: &[&str], resources: &[&str]| PolicyRule {
///     verbs: verbs.iter().map(|v| v.to_string()).collect(),
///     api_groups: Some(vec!["".into()]),
///     resources: Some(resources.iter().map(|r| r.to_string()).collect()),
///     ..Default::default()
/// };
/// let held = [rule(&["get", "list"], &["configmaps"])];
/// assert!(uncovered(&held, &[rule(&["get"], &["configmaps"])]).is_empty());
/// let missing = uncovered(&held, &[rule(&["get", "delete"], &["configmaps", "secrets"])]);
/// let text: Vec<String> = missing.iter().map(compact_string).collect();
/// assert_eq!(
///     text,
///     [
///         r#"{APIGroups:[""], Resources:["configmaps"], Verbs:["delete"]}"#,
///         r#"{APIGroups:[""], Resources:["secrets"], Verbs:["get" "delete"]}"#,
///     ]
/// );
/// ```
pub fn uncovered(held: &[PolicyRule], wanted: &[PolicyRule]) -> Vec<PolicyRule> {
    let mut missing: Vec<PolicyRule> = Vec::new();
    for piece in wanted.iter().flat_map(break_down) {
        if held.iter().any(|h| rule_covers(h, &piece)) {
            continue;
        }
        let same_target = missing.iter().position(|m| {
            m.non_resource_urls.is_none()
                && piece.non_resource_urls.is_none()
                && m.api_groups == piece.api_groups
                && m.resources == piece.resources
                && m.resource_names == piece.resource_names
        });
        match same_target {
            Some(i) if !missing[i].verbs.contains(&piece.verbs[0]) => {
                missing[i].verbs.push(piece.verbs[0].clone());
            }
            Some(_) => {}
            None if !missing.contains(&piece) => missing.push(piece),
            None => {}
        }
    }
    missing.sort_by_key(compact_string);
    missing
}

/// One rule broken into pieces of one verb each on one group, resource and name (or one
/// non-resource URL).
fn break_down(rule: &PolicyRule) -> Vec<PolicyRule> {
    let mut out = Vec::new();
    let one = |s: &String| Some(vec![s.clone()]);
    for verb in &rule.verbs {
        for group in rule.api_groups.iter().flatten() {
            for resource in rule.resources.iter().flatten() {
                let piece = |names| PolicyRule {
                    verbs: vec![verb.clone()],
                    api_groups: one(group),
                    resources: one(resource),
                    resource_names: names,
                    non_resource_urls: None,
                };
                match rule.resource_names.as_deref() {
                    None | Some([]) => out.push(piece(None)),
                    Some(names) => out.extend(names.iter().map(|n| piece(one(n)))),
                }
            }
        }
        for url in rule.non_resource_urls.iter().flatten() {
            out.push(PolicyRule {
                verbs: vec![verb.clone()],
                non_resource_urls: one(url),
                ..Default::default()
            });
        }
    }
    out
}

/// Whether `owner` allows the whole of `piece` (one verb; one group, resource and name,
/// or one URL), wildcards in `piece` included: a `*` is covered only by a `*`.
fn rule_covers(owner: &PolicyRule, piece: &PolicyRule) -> bool {
    if !has(&owner.verbs, &piece.verbs[0]) {
        return false;
    }
    if let Some([url]) = piece.non_resource_urls.as_deref() {
        return owner.non_resource_urls.iter().flatten().any(|o| {
            o == "*" || o == url || o.strip_suffix('*').is_some_and(|p| url.starts_with(p))
        });
    }
    let (Some([group]), Some([resource])) =
        (piece.api_groups.as_deref(), piece.resources.as_deref())
    else {
        return false;
    };
    if !has(owner.api_groups.as_deref().unwrap_or_default(), group) {
        return false;
    }
    let owned = owner.resources.as_deref().unwrap_or_default();
    let resource_ok = has(owned, resource)
        || resource.split_once('/').is_some_and(|(res, sub)| {
            owned
                .iter()
                .any(|o| *o == format!("{res}/*") || *o == format!("*/{sub}"))
        });
    if !resource_ok {
        return false;
    }
    match owner.resource_names.as_deref() {
        None | Some([]) => true,
        Some(names) => piece
            .resource_names
            .as_deref()
            .is_some_and(|p| p.iter().all(|n| names.contains(n))),
    }
}

/// A rule as Kubernetes writes it in an escalation refusal, e.g.
/// `{APIGroups:["apps"], Resources:["deployments"], Verbs:["get" "list"]}`.
pub fn compact_string(rule: &PolicyRule) -> String {
    let list = |v: &[String]| {
        let quoted: Vec<String> = v.iter().map(|s| format!("{s:?}")).collect();
        format!("[{}]", quoted.join(" "))
    };
    let mut parts = Vec::new();
    let mut field = |name: &str, v: Option<&[String]>| {
        if let Some(v) = v.filter(|v| !v.is_empty()) {
            parts.push(format!("{name}:{}", list(v)));
        }
    };
    field("APIGroups", rule.api_groups.as_deref());
    field("Resources", rule.resources.as_deref());
    field("NonResourceURLs", rule.non_resource_urls.as_deref());
    field("ResourceNames", rule.resource_names.as_deref());
    field("Verbs", Some(&rule.verbs));
    format!("{{{}}}", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::rbac::v1::RoleRef;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> PolicyRule {
        PolicyRule {
            api_groups: Some(groups.iter().map(|s| s.to_string()).collect()),
            resources: Some(resources.iter().map(|s| s.to_string()).collect()),
            verbs: verbs.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    fn meta(ns: Option<&str>, name: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            namespace: ns.map(Into::into),
            ..Default::default()
        }
    }

    fn subject(kind: &str, name: &str, ns: Option<&str>) -> Subject {
        Subject {
            kind: kind.into(),
            name: name.into(),
            namespace: ns.map(Into::into),
            api_group: None,
        }
    }

    fn role_ref(kind: &str, name: &str) -> RoleRef {
        RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: kind.into(),
            name: name.into(),
        }
    }

    fn snapshot() -> RbacSnapshot {
        let mut named_rule = rule(&[""], &["configmaps"], &["get", "update"]);
        named_rule.resource_names = Some(vec!["settings".into()]);
        RbacSnapshot {
            roles: vec![Role {
                metadata: meta(Some("team-a"), "cm-reader"),
                rules: Some(vec![
                    rule(&[""], &["configmaps"], &["get", "list", "watch"]),
                    named_rule,
                ]),
            }],
            cluster_roles: vec![
                ClusterRole {
                    metadata: meta(None, "kratix-editor"),
                    rules: Some(vec![
                        rule(
                            &["platform.kratix.io"],
                            &["promises", "works/status"],
                            &["*"],
                        ),
                        rule(&["batch"], &["jobs", "pods/*"], &["get"]),
                        rule(&["apps"], &["*/scale"], &["update"]),
                    ]),
                    aggregation_rule: None,
                },
                ClusterRole {
                    metadata: meta(None, "metrics"),
                    rules: Some(vec![PolicyRule {
                        verbs: vec!["get".into()],
                        non_resource_urls: Some(vec!["/metrics".into(), "/healthz/*".into()]),
                        ..Default::default()
                    }]),
                    aggregation_rule: None,
                },
                ClusterRole {
                    metadata: meta(None, "view-all"),
                    rules: Some(vec![rule(&["*"], &["*"], &["get", "list", "watch"])]),
                    aggregation_rule: None,
                },
            ],
            role_bindings: vec![
                RoleBinding {
                    metadata: meta(Some("team-a"), "read-cm"),
                    role_ref: role_ref("Role", "cm-reader"),
                    subjects: Some(vec![subject("ServiceAccount", "builder", Some("team-a"))]),
                },
                RoleBinding {
                    metadata: meta(Some("team-a"), "editors"),
                    role_ref: role_ref("ClusterRole", "kratix-editor"),
                    subjects: Some(vec![subject(
                        "Group",
                        "system:serviceaccounts:team-a",
                        None,
                    )]),
                },
                RoleBinding {
                    metadata: meta(Some("team-b"), "sa-default-ns"),
                    role_ref: role_ref("ClusterRole", "view-all"),
                    subjects: Some(vec![subject("ServiceAccount", "reader", None)]),
                },
            ],
            cluster_role_bindings: vec![
                ClusterRoleBinding {
                    metadata: meta(None, "alice-edits"),
                    role_ref: role_ref("ClusterRole", "kratix-editor"),
                    subjects: Some(vec![subject("User", "alice", None)]),
                },
                ClusterRoleBinding {
                    metadata: meta(None, "everyone-metrics"),
                    role_ref: role_ref("ClusterRole", "metrics"),
                    subjects: Some(vec![subject("Group", "system:authenticated", None)]),
                },
            ],
        }
    }

    fn sa(ns: &str, name: &str) -> RequestAttributes {
        let (user, groups) = service_account_user(ns, name);
        RequestAttributes {
            user,
            groups,
            resource_request: true,
            ..Default::default()
        }
    }

    fn req(
        base: &RequestAttributes,
        verb: &str,
        ns: &str,
        group: &str,
        resource: &str,
        sub: &str,
        name: &str,
    ) -> RequestAttributes {
        RequestAttributes {
            verb: verb.into(),
            namespace: ns.into(),
            api_group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            name: name.into(),
            ..base.clone()
        }
    }

    #[test]
    fn rbac_matrix() {
        let s = snapshot();
        let builder = sa("team-a", "builder");
        let other_sa = sa("team-b", "builder");
        let alice = RequestAttributes {
            user: "alice".into(),
            groups: vec!["system:authenticated".into()],
            resource_request: true,
            ..Default::default()
        };
        let reader_b = sa("team-b", "reader");
        let cases: Vec<(RequestAttributes, bool)> = vec![
            // Role via RoleBinding to a ServiceAccount, only in its namespace.
            (
                req(&builder, "get", "team-a", "", "configmaps", "", "x"),
                true,
            ),
            (
                req(&builder, "list", "team-a", "", "configmaps", "", ""),
                true,
            ),
            (
                req(&builder, "delete", "team-a", "", "configmaps", "", "x"),
                false,
            ),
            (
                req(&builder, "get", "team-b", "", "configmaps", "", "x"),
                false,
            ),
            (
                req(&other_sa, "get", "team-a", "", "configmaps", "", "x"),
                false,
            ),
            // resourceNames restrict to named requests.
            (
                req(
                    &builder,
                    "update",
                    "team-a",
                    "",
                    "configmaps",
                    "",
                    "settings",
                ),
                true,
            ),
            (
                req(&builder, "update", "team-a", "", "configmaps", "", "other"),
                false,
            ),
            // ClusterRole through a RoleBinding to the namespace's SA group.
            (
                req(
                    &builder,
                    "create",
                    "team-a",
                    "platform.kratix.io",
                    "promises",
                    "",
                    "",
                ),
                true,
            ),
            (
                req(
                    &builder,
                    "create",
                    "team-b",
                    "platform.kratix.io",
                    "promises",
                    "",
                    "",
                ),
                false,
            ),
            (
                req(
                    &builder,
                    "create",
                    "",
                    "platform.kratix.io",
                    "promises",
                    "",
                    "",
                ),
                false,
            ),
            // Subresources: explicit, pods/*, */scale; the main resource is not a subresource.
            (
                req(
                    &builder,
                    "patch",
                    "team-a",
                    "platform.kratix.io",
                    "works",
                    "status",
                    "w",
                ),
                true,
            ),
            (
                req(
                    &builder,
                    "patch",
                    "team-a",
                    "platform.kratix.io",
                    "works",
                    "",
                    "w",
                ),
                false,
            ),
            (
                req(&builder, "get", "team-a", "batch", "pods", "log", "p"),
                true,
            ),
            (
                req(&builder, "get", "team-a", "batch", "pods", "", "p"),
                false,
            ),
            (
                req(
                    &builder,
                    "update",
                    "team-a",
                    "apps",
                    "deployments",
                    "scale",
                    "d",
                ),
                true,
            ),
            // ClusterRoleBinding applies everywhere, including cluster scope.
            (
                req(
                    &alice,
                    "delete",
                    "",
                    "platform.kratix.io",
                    "promises",
                    "",
                    "redis",
                ),
                true,
            ),
            (
                req(
                    &alice,
                    "delete",
                    "team-z",
                    "platform.kratix.io",
                    "promises",
                    "",
                    "p",
                ),
                true,
            ),
            (req(&alice, "get", "", "", "secrets", "", "s"), false),
            // ServiceAccount subject without namespace defaults to the RoleBinding's.
            (
                req(&reader_b, "list", "team-b", "apps", "deployments", "", ""),
                true,
            ),
            (
                req(&reader_b, "watch", "team-b", "", "secrets", "", ""),
                true,
            ),
            (
                req(&reader_b, "create", "team-b", "", "secrets", "", ""),
                false,
            ),
            (
                req(&reader_b, "list", "team-a", "", "secrets", "", ""),
                false,
            ),
        ];
        for (i, (a, want)) in cases.iter().enumerate() {
            let d = authorize(a, &s);
            assert_eq!(d.allowed(), *want, "case {i}: {a:?} -> {d:?}");
        }
    }

    #[test]
    fn non_resource_urls_and_masters() {
        let s = snapshot();
        let bob = RequestAttributes {
            user: "bob".into(),
            groups: vec!["system:authenticated".into()],
            verb: "get".into(),
            path: "/metrics".into(),
            ..Default::default()
        };
        assert!(authorize(&bob, &s).allowed());
        let healthz = RequestAttributes {
            path: "/healthz/ping".into(),
            ..bob.clone()
        };
        assert!(authorize(&healthz, &s).allowed());
        let post = RequestAttributes {
            verb: "post".into(),
            ..bob.clone()
        };
        assert_eq!(
            authorize(&post, &s),
            Decision::Deny(r#"forbidden: User "bob" cannot post path "/metrics""#.into())
        );
        let anon = RequestAttributes {
            user: "system:anonymous".into(),
            groups: vec!["system:unauthenticated".into()],
            ..bob
        };
        assert!(!authorize(&anon, &s).allowed());
        let admin = RequestAttributes {
            user: "admin".into(),
            groups: vec!["system:masters".into()],
            verb: "delete".into(),
            resource_request: true,
            resource: "namespaces".into(),
            name: "x".into(),
            ..Default::default()
        };
        assert!(authorize(&admin, &RbacSnapshot::default()).allowed());
    }

    #[test]
    fn forbidden_messages_match_kubernetes() {
        let s = snapshot();
        let a = req(&sa("ns", "sa"), "get", "ns", "", "configmaps", "", "cfg");
        assert_eq!(
            authorize(&a, &s),
            Decision::Deny(
                r#"configmaps "cfg" is forbidden: User "system:serviceaccount:ns:sa" cannot get resource "configmaps" in API group "" in the namespace "ns""#.into()
            )
        );
        let a = req(
            &sa("ns", "sa"),
            "list",
            "",
            "platform.kratix.io",
            "promises",
            "",
            "",
        );
        assert_eq!(
            forbidden_message(&a),
            r#"promises.platform.kratix.io is forbidden: User "system:serviceaccount:ns:sa" cannot list resource "promises" in API group "platform.kratix.io" at the cluster scope"#
        );
        let a = req(
            &sa("ns", "sa"),
            "create",
            "ns",
            "",
            "serviceaccounts",
            "token",
            "sa",
        );
        assert_eq!(
            forbidden_message(&a),
            r#"serviceaccounts "sa" is forbidden: User "system:serviceaccount:ns:sa" cannot create resource "serviceaccounts/token" in API group "" in the namespace "ns""#
        );
    }

    #[test]
    fn allow_names_the_grant() {
        let s = snapshot();
        let a = req(
            &sa("team-a", "builder"),
            "get",
            "team-a",
            "",
            "configmaps",
            "",
            "x",
        );
        assert_eq!(
            authorize(&a, &s),
            Decision::Allow(
                r#"RBAC: allowed by RoleBinding "team-a/read-cm" of Role "cm-reader" to ServiceAccount "builder""#.into()
            )
        );
    }

    /// Pipeline Roles must name the CRD plural (and
    /// `<plural>/status`); a Role naming the kind grants nothing.
    #[test]
    fn pipeline_roles_must_use_the_crd_plural() {
        let (user, groups) = service_account_user("team-a", "people-pipeline");
        let binding = |role: &str| RoleBinding {
            metadata: meta(Some("team-a"), role),
            role_ref: role_ref("Role", role),
            subjects: Some(vec![subject(
                "ServiceAccount",
                "people-pipeline",
                Some("team-a"),
            )]),
        };
        let plural_role = Role {
            metadata: meta(Some("team-a"), "plural"),
            rules: Some(vec![
                rule(&["example.test"], &["people"], &["get", "list", "watch"]),
                rule(
                    &["example.test"],
                    &["people/status"],
                    &["get", "update", "patch"],
                ),
            ]),
        };
        let kind_role = Role {
            metadata: meta(Some("team-a"), "kind"),
            rules: Some(vec![rule(&["example.test"], &["Person", "person"], &["*"])]),
        };
        let base = RequestAttributes {
            user,
            groups,
            resource_request: true,
            ..Default::default()
        };
        let get = req(
            &base,
            "get",
            "team-a",
            "example.test",
            "people",
            "",
            "alice",
        );
        let patch_status = req(
            &base,
            "patch",
            "team-a",
            "example.test",
            "people",
            "status",
            "alice",
        );
        let patch_spec = req(
            &base,
            "patch",
            "team-a",
            "example.test",
            "people",
            "",
            "alice",
        );

        let by_kind = RbacSnapshot {
            roles: vec![kind_role],
            role_bindings: vec![binding("kind")],
            ..Default::default()
        };
        assert_eq!(
            authorize(&get, &by_kind),
            Decision::Deny(
                r#"people.example.test "alice" is forbidden: User "system:serviceaccount:team-a:people-pipeline" cannot get resource "people" in API group "example.test" in the namespace "team-a""#.into()
            )
        );
        let by_plural = RbacSnapshot {
            roles: vec![plural_role],
            role_bindings: vec![binding("plural")],
            ..Default::default()
        };
        assert!(authorize(&get, &by_plural).allowed());
        assert!(authorize(&patch_status, &by_plural).allowed());
        assert!(
            !authorize(&patch_spec, &by_plural).allowed(),
            "least privilege: spec is not writable"
        );
        let other_ns = req(
            &base,
            "get",
            "team-b",
            "example.test",
            "people",
            "",
            "alice",
        );
        assert!(!authorize(&other_ns, &by_plural).allowed());
    }

    #[test]
    fn request_attributes_follow_kubernetes_request_info() {
        let g = vec!["system:authenticated".to_string()];
        let ra = |m: &str, p: &str, q: &str| request_attributes(m, p, q, "u", &g);
        let a = ra("GET", "/api/v1/namespaces/ns/configmaps/cfg", "");
        assert_eq!(
            (
                a.resource_request,
                a.verb.as_str(),
                a.namespace.as_str(),
                a.api_group.as_str(),
                a.resource.as_str(),
                a.name.as_str()
            ),
            (true, "get", "ns", "", "configmaps", "cfg")
        );
        assert_eq!(
            ra("GET", "/api/v1/namespaces/ns/configmaps", "").verb,
            "list"
        );
        assert_eq!(
            ra(
                "GET",
                "/api/v1/namespaces/ns/configmaps",
                "limit=5&watch=true"
            )
            .verb,
            "watch"
        );
        assert_eq!(ra("GET", "/api/v1/configmaps", "").namespace, "");
        let a = ra("POST", "/api/v1/namespaces/ns/serviceaccounts/sa/token", "");
        assert_eq!(
            (
                a.verb.as_str(),
                a.resource.as_str(),
                a.name.as_str(),
                a.subresource.as_str()
            ),
            ("create", "serviceaccounts", "sa", "token")
        );
        let a = ra(
            "PATCH",
            "/apis/platform.kratix.io/v1alpha1/promises/redis/status",
            "",
        );
        assert_eq!(
            (
                a.verb.as_str(),
                a.api_group.as_str(),
                a.namespace.as_str(),
                a.subresource.as_str()
            ),
            ("patch", "platform.kratix.io", "", "status")
        );
        let a = ra("DELETE", "/apis/batch/v1/namespaces/ns/jobs", "");
        assert_eq!(a.verb, "deletecollection");
        assert_eq!(
            ra("DELETE", "/apis/batch/v1/namespaces/ns/jobs/j", "").verb,
            "delete"
        );
        assert_eq!(
            ra("PUT", "/apis/batch/v1/namespaces/ns/jobs/j", "").verb,
            "update"
        );
        let a = ra("GET", "/api/v1/namespaces/team-a", "");
        assert_eq!(
            (
                a.resource.as_str(),
                a.name.as_str(),
                a.namespace.as_str(),
                a.verb.as_str()
            ),
            ("namespaces", "team-a", "team-a", "get")
        );
        let a = ra("GET", "/apis/batch/v1/watch/namespaces/ns/jobs", "");
        assert_eq!(
            (a.verb.as_str(), a.resource.as_str(), a.namespace.as_str()),
            ("watch", "jobs", "ns")
        );
        for p in [
            "/version",
            "/healthz",
            "/openapi/v3",
            "/apis/batch/v1",
            "/api/v1",
            "/apis",
        ] {
            let a = ra("GET", p, "");
            assert!(!a.resource_request, "{p}");
            assert_eq!((a.verb.as_str(), a.path.as_str()), ("get", p));
        }
    }

    #[test]
    fn aggregated_cluster_roles_and_snapshot_from_json() {
        let s = RbacSnapshot::from_values(
            &[],
            &[
                serde_json::json!({"metadata": {"name": "kratix-view"}, "aggregationRule": {"clusterRoleSelectors": [
                    {"matchLabels": {"kratix.io/aggregate-to-view": "true"}},
                    {"matchExpressions": [{"key": "extra-view", "operator": "Exists"}]}]}}),
                serde_json::json!({"metadata": {"name": "promises-view", "labels": {"kratix.io/aggregate-to-view": "true"}},
                    "rules": [{"apiGroups": ["platform.kratix.io"], "resources": ["promises"], "verbs": ["get", "list"]}]}),
                serde_json::json!({"metadata": {"name": "works-view", "labels": {"extra-view": "x"}},
                    "rules": [{"apiGroups": ["platform.kratix.io"], "resources": ["works"], "verbs": ["get"]}]}),
                serde_json::json!({"metadata": {"name": "unrelated", "labels": {"kratix.io/aggregate-to-view": "false"}},
                    "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]}),
            ],
            &[],
            &[serde_json::json!({"metadata": {"name": "carol-view"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "kratix-view"},
                "subjects": [{"kind": "User", "name": "carol"}]})],
        )
        .unwrap();
        let carol = RequestAttributes {
            user: "carol".into(),
            resource_request: true,
            ..Default::default()
        };
        assert!(
            authorize(
                &req(&carol, "list", "", "platform.kratix.io", "promises", "", ""),
                &s
            )
            .allowed()
        );
        assert!(
            authorize(
                &req(&carol, "get", "", "platform.kratix.io", "works", "", "w"),
                &s
            )
            .allowed()
        );
        assert!(!authorize(&req(&carol, "get", "ns", "", "secrets", "", "s"), &s).allowed());
        assert!(
            RbacSnapshot::from_values(&[serde_json::json!({"rules": "nope"})], &[], &[], &[])
                .is_err()
        );
    }
}
