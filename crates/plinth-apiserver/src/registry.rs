//! The served resources: built-in kinds plus every served version of every CRD.
//! CRD changes take effect at once (the registry is swapped under a lock, and a
//! generation counter lets discovery clients notice).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use serde_json::Value;

use crate::resource::{PrinterColumn, ResourceInfo};

/// Verbs every stored resource serves.
pub const ALL_VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// Storage key of a resource: `group/plural` (`/plural` for the core group). All versions
/// of one CRD share it.
pub fn rkey(group: &str, plural: &str) -> String {
    format!("{group}/{plural}")
}

#[derive(Default)]
struct Inner {
    by_gvr: HashMap<(String, String, String), Arc<ResourceInfo>>,
    /// CRD name → the (group, version, plural) entries it registered.
    crds: HashMap<String, Vec<(String, String, String)>>,
    /// Subresources served per (group, plural) besides `status`.
    generation: u64,
}

/// Thread-safe registry of served resources.
#[derive(Default)]
pub struct Registry {
    inner: RwLock<Inner>,
}

impl Registry {
    /// A registry holding the built-in kinds.
    pub fn with_builtins() -> Registry {
        let r = Registry::default();
        {
            let mut inner = r.inner.write().unwrap();
            for info in builtins() {
                inner.by_gvr.insert(
                    (
                        info.group.clone(),
                        info.version.clone(),
                        info.plural.clone(),
                    ),
                    Arc::new(info),
                );
            }
        }
        r
    }

    /// Finds a resource by group, version and plural.
    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceInfo>> {
        self.inner
            .read()
            .unwrap()
            .by_gvr
            .get(&(group.to_string(), version.to_string(), plural.to_string()))
            .cloned()
    }

    /// Finds the resource serving `apiVersion` + `kind`.
    pub fn lookup_kind(&self, api_version: &str, kind: &str) -> Option<Arc<ResourceInfo>> {
        let (g, v) = split_api_version(api_version);
        self.inner
            .read()
            .unwrap()
            .by_gvr
            .values()
            .find(|i| i.group == g && i.version == v && i.kind == kind)
            .cloned()
    }

    /// The storage version's entry of a resource (group + plural).
    pub fn storage_of(&self, group: &str, plural: &str) -> Option<Arc<ResourceInfo>> {
        self.inner
            .read()
            .unwrap()
            .by_gvr
            .values()
            .find(|i| i.group == group && i.plural == plural && i.storage)
            .cloned()
    }

    /// Every served resource, sorted by group, version, plural.
    pub fn all(&self) -> Vec<ResourceInfo> {
        let inner = self.inner.read().unwrap();
        let mut v: Vec<ResourceInfo> = inner.by_gvr.values().map(|i| (**i).clone()).collect();
        v.sort_by(|a, b| (&a.group, &a.version, &a.plural).cmp(&(&b.group, &b.version, &b.plural)));
        v
    }

    /// Groups (non-core) and their versions, preferred (storage, else first) first.
    pub fn groups(&self) -> BTreeMap<String, Vec<String>> {
        let all = self.all();
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for i in all.iter().filter(|i| !i.group.is_empty()) {
            let vs = out.entry(i.group.clone()).or_default();
            if !vs.contains(&i.version) {
                vs.push(i.version.clone());
            }
        }
        for vs in out.values_mut() {
            vs.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
        }
        out
    }

    /// Bumped on every CRD change.
    pub fn generation(&self) -> u64 {
        self.inner.read().unwrap().generation
    }

    /// Registers (or re-registers) every served version of a CRD object.
    pub fn register_crd(&self, crd: &Value) -> Result<(), String> {
        let infos = crd_infos(crd)?;
        let name = crd
            .pointer("/metadata/name")
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string();
        let mut inner = self.inner.write().unwrap();
        // A CRD never replaces a built-in (a CRD stored before this rule existed is
        // skipped rather than served).
        if let Some(b) = inner.by_gvr.values().find(|b| {
            b.builtin
                && infos
                    .iter()
                    .any(|i| i.group == b.group && i.plural == b.plural)
        }) {
            return Err(format!(
                "{}.{} is served by the API server itself (kind {}); a CustomResourceDefinition cannot replace it",
                b.plural, b.group, b.kind
            ));
        }
        if let Some(old) = inner.crds.remove(&name) {
            for k in old {
                inner.by_gvr.remove(&k);
            }
        }
        let mut keys = Vec::new();
        for info in infos {
            let k = (
                info.group.clone(),
                info.version.clone(),
                info.plural.clone(),
            );
            keys.push(k.clone());
            inner.by_gvr.insert(k, Arc::new(info));
        }
        inner.crds.insert(name, keys);
        inner.generation += 1;
        Ok(())
    }

    /// Removes a CRD's resources.
    pub fn unregister_crd(&self, name: &str) {
        let mut inner = self.inner.write().unwrap();
        if let Some(old) = inner.crds.remove(name) {
            for k in old {
                inner.by_gvr.remove(&k);
            }
        }
        inner.generation += 1;
    }
}

/// Splits `group/version` (or `v1`) into (group, version).
pub fn split_api_version(av: &str) -> (&str, &str) {
    match av.rsplit_once('/') {
        Some((g, v)) => (g, v),
        None => ("", av),
    }
}

/// Kubernetes version priority (v1 > v1beta2 > v1beta1 > v1alpha1 > other).
fn version_priority(v: &str) -> (u8, u32, u32) {
    let re = |s: &str| -> Option<(u8, u32, u32)> {
        let s = s.strip_prefix('v')?;
        let digits: String = s.chars().take_while(|c| c.is_ascii_digit()).collect();
        let major: u32 = digits.parse().ok()?;
        let rest = &s[digits.len()..];
        if rest.is_empty() {
            return Some((3, major, 0));
        }
        for (pre, rank) in [("beta", 2u8), ("alpha", 1u8)] {
            if let Some(n) = rest.strip_prefix(pre) {
                let minor: u32 = n.parse().ok()?;
                return Some((rank, major, minor));
            }
        }
        None
    };
    re(v).unwrap_or((0, 0, 0))
}

/// The ResourceInfos a CRD serves (one per served version).
pub fn crd_infos(crd: &Value) -> Result<Vec<ResourceInfo>, String> {
    let spec = crd.get("spec").ok_or("spec is required")?;
    let group = spec
        .get("group")
        .and_then(|v| v.as_str())
        .ok_or("spec.group is required")?;
    let names = spec.get("names").ok_or("spec.names is required")?;
    let s = |k: &str| names.get(k).and_then(|v| v.as_str()).map(String::from);
    let plural = s("plural").ok_or("spec.names.plural is required")?;
    let kind = s("kind").ok_or("spec.names.kind is required")?;
    let singular = s("singular").unwrap_or_else(|| kind.to_lowercase());
    let list_kind = s("listKind").unwrap_or_else(|| format!("{kind}List"));
    let strs = |k: &str| -> Vec<String> {
        names
            .get(k)
            .and_then(|v| v.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let namespaced = spec.get("scope").and_then(|v| v.as_str()) != Some("Cluster");
    let versions = spec
        .get("versions")
        .and_then(|v| v.as_array())
        .ok_or("spec.versions is required")?;
    let mut out = Vec::new();
    for v in versions {
        if v.get("served").and_then(|x| x.as_bool()) != Some(true) {
            continue;
        }
        let version = v
            .get("name")
            .and_then(|x| x.as_str())
            .ok_or("spec.versions[].name is required")?;
        let printer_columns: Vec<PrinterColumn> = v
            .get("additionalPrinterColumns")
            .cloned()
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| format!("spec.versions[{version}].additionalPrinterColumns: {e}"))?
            .unwrap_or_default();
        out.push(ResourceInfo {
            group: group.to_string(),
            version: version.to_string(),
            kind: kind.clone(),
            list_kind: list_kind.clone(),
            plural: plural.clone(),
            singular: singular.clone(),
            namespaced,
            short_names: strs("shortNames"),
            categories: strs("categories"),
            verbs: ALL_VERBS.iter().map(|s| s.to_string()).collect(),
            status_subresource: v.pointer("/subresources/status").is_some(),
            builtin: false,
            schema: v.pointer("/schema/openAPIV3Schema").cloned(),
            printer_columns,
            storage: v.get("storage").and_then(|x| x.as_bool()) == Some(true),
        });
    }
    Ok(out)
}

fn schema_of<T: schemars::JsonSchema>() -> Option<Value> {
    let mut settings = schemars::generate::SchemaSettings::openapi3();
    settings.inline_subschemas = true;
    let schema = settings.into_generator().into_root_schema_for::<T>();
    serde_json::to_value(schema).ok()
}

#[allow(clippy::too_many_arguments)]
fn builtin(
    group: &str,
    kind: &str,
    plural: &str,
    namespaced: bool,
    short: &[&str],
    categories: &[&str],
    status: bool,
    schema: Option<Value>,
) -> ResourceInfo {
    ResourceInfo {
        group: group.to_string(),
        version: "v1".to_string(),
        kind: kind.to_string(),
        list_kind: format!("{kind}List"),
        plural: plural.to_string(),
        singular: kind.to_lowercase(),
        namespaced,
        short_names: short.iter().map(|s| s.to_string()).collect(),
        categories: categories.iter().map(|s| s.to_string()).collect(),
        verbs: ALL_VERBS.iter().map(|s| s.to_string()).collect(),
        status_subresource: status,
        builtin: true,
        schema,
        printer_columns: Vec::new(),
        storage: true,
    }
}

/// The built-in kinds (all at version v1).
pub fn builtins() -> Vec<ResourceInfo> {
    use k8s_openapi::api::{batch, coordination, core, events, rbac};
    vec![
        builtin(
            "",
            "Namespace",
            "namespaces",
            false,
            &["ns"],
            &[],
            true,
            schema_of::<core::v1::Namespace>(),
        ),
        builtin(
            "",
            "ConfigMap",
            "configmaps",
            true,
            &["cm"],
            &[],
            false,
            schema_of::<core::v1::ConfigMap>(),
        ),
        builtin(
            "",
            "Secret",
            "secrets",
            true,
            &[],
            &[],
            false,
            schema_of::<core::v1::Secret>(),
        ),
        builtin(
            "",
            "ServiceAccount",
            "serviceaccounts",
            true,
            &["sa"],
            &[],
            false,
            schema_of::<core::v1::ServiceAccount>(),
        ),
        builtin(
            "",
            "Event",
            "events",
            true,
            &["ev"],
            &[],
            false,
            schema_of::<core::v1::Event>(),
        ),
        builtin(
            "",
            "Pod",
            "pods",
            true,
            &["po"],
            &["all"],
            true,
            schema_of::<core::v1::Pod>(),
        ),
        builtin(
            "events.k8s.io",
            "Event",
            "events",
            true,
            &["ev"],
            &[],
            false,
            schema_of::<events::v1::Event>(),
        ),
        builtin(
            "batch",
            "Job",
            "jobs",
            true,
            &[],
            &["all"],
            true,
            schema_of::<batch::v1::Job>(),
        ),
        builtin(
            "rbac.authorization.k8s.io",
            "Role",
            "roles",
            true,
            &[],
            &[],
            false,
            schema_of::<rbac::v1::Role>(),
        ),
        builtin(
            "rbac.authorization.k8s.io",
            "ClusterRole",
            "clusterroles",
            false,
            &[],
            &[],
            false,
            schema_of::<rbac::v1::ClusterRole>(),
        ),
        builtin(
            "rbac.authorization.k8s.io",
            "RoleBinding",
            "rolebindings",
            true,
            &[],
            &[],
            false,
            schema_of::<rbac::v1::RoleBinding>(),
        ),
        builtin(
            "rbac.authorization.k8s.io",
            "ClusterRoleBinding",
            "clusterrolebindings",
            false,
            &[],
            &[],
            false,
            schema_of::<rbac::v1::ClusterRoleBinding>(),
        ),
        builtin(
            "coordination.k8s.io",
            "Lease",
            "leases",
            true,
            &[],
            &[],
            false,
            schema_of::<coordination::v1::Lease>(),
        ),
        builtin(
            "apiextensions.k8s.io",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            false,
            &["crd", "crds"],
            &[],
            true,
            None,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_order() {
        let mut v = vec!["v1alpha1", "v1", "v2beta1", "v1beta1"];
        v.sort_by_key(|x| std::cmp::Reverse(version_priority(x)));
        assert_eq!(v, vec!["v1", "v2beta1", "v1beta1", "v1alpha1"]);
    }

    #[test]
    fn builtins_have_schemas() {
        let b = builtins();
        let cm = b.iter().find(|i| i.plural == "configmaps").unwrap();
        assert!(
            cm.schema
                .as_ref()
                .unwrap()
                .pointer("/properties/data")
                .is_some()
        );
    }
}
