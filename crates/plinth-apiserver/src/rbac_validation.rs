//! Validation of RBAC objects (Kubernetes `pkg/apis/rbac/validation`): what kube-apiserver
//! answers 422 for in Roles, ClusterRoles and their bindings.
//!
//! * Every rule has verbs. A rule is either for resources (then it names API groups and
//!   resources) or for non-resource URLs (then it names nothing else, and only in a
//!   ClusterRole).
//! * A ClusterRole's `aggregationRule` has at least one selector, each a valid
//!   LabelSelector.
//! * A binding's `roleRef` names a role of the RBAC group (`Role` or `ClusterRole` for a
//!   RoleBinding, `ClusterRole` for a ClusterRoleBinding) and never changes; each subject
//!   has a name and a known kind, a ServiceAccount its namespace when the binding has
//!   none.

use serde_json::{Value, json};

use crate::resource::{Cause, ResourceInfo};
use crate::validation::{
    dns1123_subdomain_errors, invalid, label_selector_causes, not_supported, required, str_items,
};

use crate::rbac::GROUP as RBAC_GROUP;

/// The causes of a 422 for an RBAC object (`old` on update); empty when valid or not an
/// RBAC object.
pub(crate) fn causes(info: &ResourceInfo, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    if !info.builtin || info.group != RBAC_GROUP {
        return Vec::new();
    }
    match info.plural.as_str() {
        "roles" => rule_causes(obj, true),
        "clusterroles" => {
            let mut out = rule_causes(obj, false);
            out.extend(aggregation_causes(obj));
            out
        }
        "rolebindings" => binding_causes(obj, old, &["Role", "ClusterRole"], true),
        "clusterrolebindings" => binding_causes(obj, old, &["ClusterRole"], false),
        _ => Vec::new(),
    }
}

fn rule_causes(obj: &Value, namespaced: bool) -> Vec<Cause> {
    let mut out = Vec::new();
    let rules = obj.get("rules").and_then(Value::as_array);
    for (i, rule) in rules.into_iter().flatten().enumerate() {
        let f = |name: &str| format!("rules[{i}].{name}");
        if str_items(&rule["verbs"]).is_empty() {
            out.push(required(
                &f("verbs"),
                "verbs must contain at least one value",
            ));
        }
        let urls = str_items(&rule["nonResourceURLs"]);
        if !urls.is_empty() {
            let shown = format!("[{}]", urls.join(" "));
            if namespaced {
                out.push(invalid(
                    &f("nonResourceURLs"),
                    &shown,
                    "namespaced rules cannot apply to non-resource URLs",
                ));
            }
            let resource_fields = ["apiGroups", "resources", "resourceNames"];
            if resource_fields
                .iter()
                .any(|k| !str_items(&rule[k]).is_empty())
            {
                out.push(invalid(
                    &f("nonResourceURLs"),
                    &shown,
                    "rules cannot apply to both regular resources and non-resource URLs",
                ));
            }
            continue;
        }
        // An empty string is the core group: only an absent or empty list is missing.
        if rule["apiGroups"].as_array().is_none_or(Vec::is_empty) {
            out.push(required(
                &f("apiGroups"),
                "resource rules must supply at least one api group",
            ));
        }
        if str_items(&rule["resources"]).is_empty() {
            out.push(required(
                &f("resources"),
                "resource rules must supply at least one resource",
            ));
        }
    }
    out
}

fn aggregation_causes(obj: &Value) -> Vec<Cause> {
    let Some(rule) = obj.get("aggregationRule").filter(|r| !r.is_null()) else {
        return Vec::new();
    };
    let field = "aggregationRule.clusterRoleSelectors";
    let selectors = rule
        .get("clusterRoleSelectors")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if selectors.is_empty() {
        return vec![required(
            field,
            "at least one clusterRoleSelector required if aggregationRule is non-nil",
        )];
    }
    selectors
        .iter()
        .enumerate()
        .flat_map(|(i, s)| label_selector_causes(s, &format!("{field}[{i}]")))
        .collect()
}

fn binding_causes(
    obj: &Value,
    old: Option<&Value>,
    role_kinds: &[&str],
    namespaced: bool,
) -> Vec<Cause> {
    let mut out = Vec::new();
    let role_ref = &obj["roleRef"];
    if let Some(old) = old
        && old["roleRef"] != *role_ref
    {
        out.push(Cause {
            reason: "FieldValueInvalid".into(),
            message: format!(
                "Invalid value: {}: cannot change roleRef",
                json!(old["roleRef"])
            ),
            field: "roleRef".into(),
        });
        return out;
    }
    let group = role_ref["apiGroup"].as_str().unwrap_or_default();
    if group != RBAC_GROUP {
        out.push(not_supported("roleRef.apiGroup", group, &[RBAC_GROUP]));
    }
    let kind = role_ref["kind"].as_str().unwrap_or_default();
    if !role_kinds.contains(&kind) {
        out.push(not_supported("roleRef.kind", kind, role_kinds));
    }
    let name = role_ref["name"].as_str().unwrap_or_default();
    if name.is_empty() {
        out.push(required("roleRef.name", ""));
    } else if let Some(msg) = path_segment_error(name) {
        out.push(invalid("roleRef.name", name, &msg));
    }
    let subjects = obj.get("subjects").and_then(Value::as_array);
    for (i, s) in subjects.into_iter().flatten().enumerate() {
        out.extend(subject_causes(s, &format!("subjects[{i}]"), namespaced));
    }
    out
}

fn subject_causes(s: &Value, f: &str, namespaced: bool) -> Vec<Cause> {
    let mut out = Vec::new();
    let field = |name: &str| format!("{f}.{name}");
    let name = s["name"].as_str().unwrap_or_default();
    if name.is_empty() {
        out.push(required(&field("name"), ""));
    }
    let group = s["apiGroup"].as_str().unwrap_or_default();
    match s["kind"].as_str().unwrap_or_default() {
        "ServiceAccount" => {
            if !name.is_empty() {
                for msg in dns1123_subdomain_errors(name) {
                    out.push(invalid(&field("name"), name, &msg));
                }
            }
            if !group.is_empty() {
                out.push(not_supported(&field("apiGroup"), group, &[""]));
            }
            if !namespaced && s["namespace"].as_str().unwrap_or_default().is_empty() {
                out.push(required(&field("namespace"), ""));
            }
        }
        "User" | "Group" if group != RBAC_GROUP => {
            out.push(not_supported(&field("apiGroup"), group, &[RBAC_GROUP]));
        }
        "User" | "Group" => {}
        other => out.push(not_supported(
            &field("kind"),
            other,
            &["ServiceAccount", "User", "Group"],
        )),
    }
    out
}

/// Kubernetes' path-segment name rule for RBAC names: not `.` or `..`, no `/` or `%`.
fn path_segment_error(name: &str) -> Option<String> {
    if name == "." || name == ".." {
        return Some(format!("may not be '{name}'"));
    }
    ["/", "%"]
        .iter()
        .find(|c| name.contains(*c))
        .map(|c| format!("may not contain '{c}'"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(plural: &str, kind: &str) -> ResourceInfo {
        crate::registry::builtins()
            .into_iter()
            .find(|i| i.group == RBAC_GROUP && i.plural == plural)
            .unwrap_or_else(|| panic!("{plural} ({kind}) is served"))
    }

    fn fields(c: &[Cause]) -> Vec<(&str, &str)> {
        c.iter()
            .map(|c| (c.field.as_str(), c.reason.as_str()))
            .collect()
    }

    #[test]
    fn aggregation_rules_are_label_selectors() {
        let cr = info("clusterroles", "ClusterRole");
        let empty = json!({"aggregationRule": {"clusterRoleSelectors": []}});
        assert_eq!(
            fields(&causes(&cr, &empty, None)),
            [("aggregationRule.clusterRoleSelectors", "FieldValueRequired")]
        );
        let bad = json!({"aggregationRule": {"clusterRoleSelectors": [
            {"matchExpressions": [
                {"key": "a", "operator": "Near"},
                {"key": "b", "operator": "In"},
                {"key": "c", "operator": "Exists", "values": ["x"]},
                {"key": "bad key", "operator": "DoesNotExist"}]},
            {"matchLabels": {"ok": "yes"}}]}});
        let p = "aggregationRule.clusterRoleSelectors[0].matchExpressions";
        assert_eq!(
            fields(&causes(&cr, &bad, None)),
            [
                (format!("{p}[0].operator").as_str(), "FieldValueInvalid"),
                (format!("{p}[1].values").as_str(), "FieldValueRequired"),
                (format!("{p}[2].values").as_str(), "FieldValueForbidden"),
                (format!("{p}[3].key").as_str(), "FieldValueInvalid"),
            ]
        );
        let good = json!({"aggregationRule": {"clusterRoleSelectors": [
            {"matchLabels": {"rbac.example.com/aggregate-to-view": "true"}},
            {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["x"]}]}]}});
        assert!(causes(&cr, &good, None).is_empty());
    }

    #[test]
    fn rules_need_verbs_and_a_target() {
        let role = info("roles", "Role");
        let obj = json!({"rules": [
            {"apiGroups": [""], "resources": ["pods"]},
            {"verbs": ["get"], "resources": ["pods"]},
            {"verbs": ["get"], "nonResourceURLs": ["/healthz"]},
            {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]});
        assert_eq!(
            fields(&causes(&role, &obj, None)),
            [
                ("rules[0].verbs", "FieldValueRequired"),
                ("rules[1].apiGroups", "FieldValueRequired"),
                ("rules[2].nonResourceURLs", "FieldValueInvalid"),
            ]
        );
        let cr = info("clusterroles", "ClusterRole");
        let mixed = json!({"rules": [
            {"verbs": ["get"], "nonResourceURLs": ["/metrics"]},
            {"verbs": ["get"], "nonResourceURLs": ["/x"], "resources": ["pods"]}]});
        assert_eq!(
            fields(&causes(&cr, &mixed, None)),
            [("rules[1].nonResourceURLs", "FieldValueInvalid")]
        );
    }

    #[test]
    fn bindings_name_a_role_and_known_subjects() {
        let crb = info("clusterrolebindings", "ClusterRoleBinding");
        let obj = json!({
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": "view"},
            "subjects": [
                {"kind": "ServiceAccount", "name": "sa", "apiGroup": ""},
                {"kind": "User", "name": "alice", "apiGroup": ""},
                {"kind": "Robot", "name": "r2"},
                {"kind": "Group", "apiGroup": RBAC_GROUP}]});
        assert_eq!(
            fields(&causes(&crb, &obj, None)),
            [
                ("roleRef.kind", "FieldValueNotSupported"),
                ("subjects[0].namespace", "FieldValueRequired"),
                ("subjects[1].apiGroup", "FieldValueNotSupported"),
                ("subjects[2].kind", "FieldValueNotSupported"),
                ("subjects[3].name", "FieldValueRequired"),
            ]
        );
        let rb = info("rolebindings", "RoleBinding");
        let old =
            json!({"roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": "view"}});
        let new =
            json!({"roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": "edit"}});
        assert!(causes(&rb, &old, None).is_empty());
        let changed = causes(&rb, &new, Some(&old));
        assert_eq!(fields(&changed), [("roleRef", "FieldValueInvalid")]);
        assert!(
            changed[0].message.ends_with("cannot change roleRef"),
            "{}",
            changed[0].message
        );
    }
}
