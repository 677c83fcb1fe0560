//! Which resources a CustomResourceDefinition may define. A CRD never replaces what the
//! server already serves: a built-in kind, or a Kratix kind Plinth registers from its own
//! types. Groups are reserved as Kubernetes reserves them (`k8s.io`, `kubernetes.io` and
//! their subdomains) and Kratix's, Syntasso's and Plinth's groups are reserved to the CRDs
//! Plinth generates. Checked when a CRD is written, when a Promise names one in
//! `spec.api`, and when stored CRDs are registered at start-up (so an intruder stored by
//! an earlier version cannot take over after a restart).

use serde_json::Value;

use crate::registry::builtins;
use crate::resource::Cause;

/// (group, plural, kind) of every built-in resource.
fn served_builtins() -> &'static [(String, String, String)] {
    static BUILTINS: std::sync::OnceLock<Vec<(String, String, String)>> =
        std::sync::OnceLock::new();
    BUILTINS.get_or_init(|| {
        builtins()
            .into_iter()
            .map(|b| (b.group, b.plural, b.kind))
            .collect()
    })
}

fn reserved_by_kubernetes(group: &str) -> bool {
    ["k8s.io", "kubernetes.io"]
        .iter()
        .any(|r| group == *r || group.ends_with(&format!(".{r}")))
}

fn reserved_by_plinth(group: &str) -> bool {
    plinth_api::constants::RESERVED_API_GROUPS.contains(&group)
}

/// One of Plinth's own CRDs, unchanged: the only CRDs allowed in a Plinth-reserved group.
/// Fields the server defaults (`conversion`, `preserveUnknownFields`) are not compared.
fn is_plinth_crd(crd: &Value) -> bool {
    let essential = |c: &Value| {
        let mut spec = c.get("spec").cloned().unwrap_or_default();
        if let Some(m) = spec.as_object_mut() {
            m.remove("conversion");
            m.remove("preserveUnknownFields");
        }
        (c.pointer("/metadata/name").cloned(), spec)
    };
    let mine = essential(crd);
    plinth_api::crds::all_crds()
        .into_iter()
        .any(|own| essential(&serde_json::to_value(own).unwrap_or_default()) == mine)
}

/// Why `crd` may not be served, if it may not: `field` prefixes the cause's field path
/// (`""` for a CRD object, `"spec.api."` for a Promise's API).
pub fn crd_causes(crd: &Value, field: &str) -> Vec<Cause> {
    let group = crd
        .pointer("/spec/group")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let plural = crd
        .pointer("/spec/names/plural")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let forbidden = |msg: String| Cause {
        reason: "FieldValueForbidden".into(),
        message: format!("Forbidden: {msg}"),
        field: format!("{field}spec.group"),
    };
    if let Some(b) = served_builtins()
        .iter()
        .find(|b| b.0 == group && b.1 == plural)
    {
        let gr = if group.is_empty() {
            plural.to_string()
        } else {
            format!("{plural}.{group}")
        };
        return vec![forbidden(format!(
            "{gr} is served by the API server itself (kind {}); a CustomResourceDefinition cannot replace it",
            b.2
        ))];
    }
    if reserved_by_kubernetes(group) {
        return vec![forbidden(format!(
            "group {group:?} is reserved for Kubernetes' own APIs (k8s.io and kubernetes.io and their subdomains); choose a group in a domain you own"
        ))];
    }
    if reserved_by_plinth(group) && !is_plinth_crd(crd) {
        return vec![forbidden(format!(
            "group {group:?} is reserved for the Kratix kinds Plinth serves itself; choose a group in a domain you own (for example {plural}.example.com)"
        ))];
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd(group: &str, plural: &str) -> Value {
        json!({"metadata": {"name": format!("{plural}.{group}")},
               "spec": {"group": group, "names": {"plural": plural, "kind": "X"}}})
    }

    #[test]
    fn builtins_and_reserved_groups_are_refused() {
        let c = crd_causes(&crd("rbac.authorization.k8s.io", "roles"), "");
        assert!(
            c[0].message.contains("served by the API server itself"),
            "{c:?}"
        );
        let c = crd_causes(&crd("example.k8s.io", "widgets"), "spec.api.");
        assert_eq!(c[0].field, "spec.api.spec.group");
        assert!(c[0].message.contains("reserved for Kubernetes"));
        assert!(crd_causes(&crd("k8s.io.example.com", "widgets"), "").is_empty());
        let c = crd_causes(&crd("platform.kratix.io", "promises"), "");
        assert!(
            c[0].message.contains("reserved for the Kratix kinds"),
            "{c:?}"
        );
        assert!(crd_causes(&crd("marketplace.kratix.io", "redis"), "").is_empty());
        for own in plinth_api::crds::all_crds() {
            assert!(crd_causes(&serde_json::to_value(own).unwrap(), "").is_empty());
        }
    }
}
