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

/// Where a resource keeps what its `scale` subresource (`autoscaling/v1` Scale) reads and
/// writes: JSON paths in the `.a.b` form of a CRD's `subresources.scale`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScalePaths {
    /// The desired replica count, e.g. `.spec.replicas` (written by the subresource).
    pub spec_replicas: String,
    /// The observed replica count, e.g. `.status.replicas`.
    pub status_replicas: String,
    /// Where the Pods' label selector is: for built-in kinds a LabelSelector (or, for
    /// ReplicationControllers, a map) at `.spec.selector`; for CRDs the
    /// `labelSelectorPath`, a string in label-selector syntax. None: no selector.
    pub label_selector: Option<String>,
}

/// The built-in kinds with a `scale` subresource, as Kubernetes serves them.
const BUILTIN_SCALE: [(&str, &str); 4] = [
    ("apps", "deployments"),
    ("apps", "replicasets"),
    ("apps", "statefulsets"),
    ("", "replicationcontrollers"),
];

type Gvr = (String, String, String);

#[derive(Default)]
struct Inner {
    by_gvr: HashMap<(String, String, String), Arc<ResourceInfo>>,
    /// The resources with a `scale` subresource.
    scale: HashMap<Gvr, ScalePaths>,
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
                if BUILTIN_SCALE.contains(&(info.group.as_str(), info.plural.as_str())) {
                    inner.scale.insert(
                        (
                            info.group.clone(),
                            info.version.clone(),
                            info.plural.clone(),
                        ),
                        ScalePaths {
                            spec_replicas: ".spec.replicas".into(),
                            status_replicas: ".status.replicas".into(),
                            label_selector: Some(".spec.selector".into()),
                        },
                    );
                }
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
        for (group, vs) in out.iter_mut() {
            vs.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
            // kube-apiserver's scheme still prefers autoscaling/v1 (v2 is only the
            // storage version), so clients that do not name a version get v1.
            if group == "autoscaling"
                && let Some(i) = vs.iter().position(|v| v == "v1")
            {
                let v1 = vs.remove(i);
                vs.insert(0, v1);
            }
        }
        out
    }

    /// The `scale` subresource of a resource, if it has one.
    pub fn scale_of(&self, group: &str, version: &str, plural: &str) -> Option<ScalePaths> {
        self.inner
            .read()
            .unwrap()
            .scale
            .get(&(group.to_string(), version.to_string(), plural.to_string()))
            .cloned()
    }

    /// Bumped on every CRD change.
    pub fn generation(&self) -> u64 {
        self.inner.read().unwrap().generation
    }

    /// Registers (or re-registers) every served version of a CRD object.
    ///
    /// # Errors
    /// As [`crd_infos`], and [`RegistryError::ReplacesBuiltin`] when the CRD names a
    /// built-in resource.
    pub fn register_crd(&self, crd: &Value) -> Result<(), RegistryError> {
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
            return Err(RegistryError::ReplacesBuiltin {
                plural: b.plural.clone(),
                group: b.group.clone(),
                kind: b.kind.clone(),
            });
        }
        if let Some(old) = inner.crds.remove(&name) {
            for k in old {
                inner.by_gvr.remove(&k);
                inner.scale.remove(&k);
            }
        }
        for (k, paths) in crd_scale(crd) {
            inner.scale.insert(k, paths);
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
                inner.scale.remove(&k);
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

/// The `subresources.scale` of each served version of a CRD.
fn crd_scale(crd: &Value) -> Vec<(Gvr, ScalePaths)> {
    let spec = &crd["spec"];
    let (Some(group), Some(plural)) = (spec["group"].as_str(), spec["names"]["plural"].as_str())
    else {
        return Vec::new();
    };
    let versions = spec["versions"].as_array().cloned().unwrap_or_default();
    versions
        .iter()
        .filter(|v| v["served"].as_bool() == Some(true))
        .filter_map(|v| {
            let sc = v.pointer("/subresources/scale")?;
            let path = |k: &str| sc[k].as_str().map(String::from);
            Some((
                (
                    group.to_string(),
                    v["name"].as_str()?.to_string(),
                    plural.to_string(),
                ),
                ScalePaths {
                    spec_replicas: path("specReplicasPath")?,
                    status_replicas: path("statusReplicasPath")?,
                    label_selector: path("labelSelectorPath"),
                },
            ))
        })
        .collect()
}

/// Why a CRD cannot be served, or a built-in object does not decode as its type.
/// Messages name the field and the cause.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// A field every CRD needs is missing.
    #[error("{field} is required")]
    Required {
        /// The field's path (`spec.names.plural`).
        field: &'static str,
    },
    /// A version's `additionalPrinterColumns` do not decode.
    #[error("spec.versions[{version}].additionalPrinterColumns: {cause}")]
    PrinterColumns {
        /// The version's name.
        version: String,
        /// The decoder's message.
        cause: String,
    },
    /// The CRD names a resource the server serves itself.
    #[error(
        "{plural}.{group} is served by the API server itself (kind {kind}); a CustomResourceDefinition cannot replace it"
    )]
    ReplacesBuiltin {
        /// The resource's plural.
        plural: String,
        /// The resource's group.
        group: String,
        /// The built-in kind.
        kind: String,
    },
    /// A built-in object is not a JSON object.
    #[error("must be an object")]
    NotAnObject,
    /// A top-level field of a built-in object does not decode as its type.
    #[error("{field}: {cause}")]
    Field {
        /// The top-level field.
        field: String,
        /// serde's message.
        cause: String,
    },
    /// A built-in object does not decode, though each field does alone.
    #[error("{cause}")]
    Decode {
        /// serde's message.
        cause: String,
    },
}

/// The ResourceInfos a CRD serves (one per served version).
///
/// # Errors
/// [`RegistryError::Required`] for a missing field, [`RegistryError::PrinterColumns`]
/// for printer columns that do not decode.
pub fn crd_infos(crd: &Value) -> Result<Vec<ResourceInfo>, RegistryError> {
    let spec = crd
        .get("spec")
        .ok_or(RegistryError::Required { field: "spec" })?;
    let group = spec
        .get("group")
        .and_then(|v| v.as_str())
        .ok_or(RegistryError::Required {
            field: "spec.group",
        })?;
    let names = spec.get("names").ok_or(RegistryError::Required {
        field: "spec.names",
    })?;
    let s = |k: &str| names.get(k).and_then(|v| v.as_str()).map(String::from);
    let plural = s("plural").ok_or(RegistryError::Required {
        field: "spec.names.plural",
    })?;
    let kind = s("kind").ok_or(RegistryError::Required {
        field: "spec.names.kind",
    })?;
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
    let versions =
        spec.get("versions")
            .and_then(|v| v.as_array())
            .ok_or(RegistryError::Required {
                field: "spec.versions",
            })?;
    let mut out = Vec::new();
    for v in versions {
        if v.get("served").and_then(|x| x.as_bool()) != Some(true) {
            continue;
        }
        let version = v
            .get("name")
            .and_then(|x| x.as_str())
            .ok_or(RegistryError::Required {
                field: "spec.versions[].name",
            })?;
        let printer_columns: Vec<PrinterColumn> = v
            .get("additionalPrinterColumns")
            .cloned()
            .map(serde_json::from_value)
            .transpose()
            .map_err(|e| RegistryError::PrinterColumns {
                version: version.to_string(),
                cause: e.to_string(),
            })?
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

/// One built-in kind: group, version, kind, plural, namespaced, short names,
/// categories, status subresource, schema.
type Builtin = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    bool,
    &'static [&'static str],
    &'static [&'static str],
    bool,
    Option<Value>,
);

fn builtin(b: Builtin) -> ResourceInfo {
    let (group, version, kind, plural, namespaced, short, categories, status, schema) = b;
    ResourceInfo {
        group: group.to_string(),
        version: version.to_string(),
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

/// The built-in kinds of Kubernetes 1.33 that the server stores: the control plane's own
/// kinds and every kind a workload can contain, each validated against its published
/// schema (k8s-openapi). Kinds that Kubernetes runs controllers for (Deployments,
/// Services, ...) are stored and validated only; nothing acts on them in embedded mode.
pub fn builtins() -> Vec<ResourceInfo> {
    use k8s_openapi::api::{
        admissionregistration as adm, apps, authorization, autoscaling, batch, certificates,
        coordination, core, discovery, events, networking, policy, rbac, scheduling, storage,
    };
    const ALL: &[&str] = &["all"];
    const NONE: &[&str] = &[];
    let rbac_g = "rbac.authorization.k8s.io";
    let table: Vec<Builtin> = vec![
        (
            "",
            "v1",
            "Namespace",
            "namespaces",
            false,
            &["ns"],
            NONE,
            true,
            schema_of::<core::v1::Namespace>(),
        ),
        (
            "",
            "v1",
            "ConfigMap",
            "configmaps",
            true,
            &["cm"],
            NONE,
            false,
            schema_of::<core::v1::ConfigMap>(),
        ),
        (
            "",
            "v1",
            "Secret",
            "secrets",
            true,
            NONE,
            NONE,
            false,
            schema_of::<core::v1::Secret>(),
        ),
        (
            "",
            "v1",
            "ServiceAccount",
            "serviceaccounts",
            true,
            &["sa"],
            NONE,
            false,
            schema_of::<core::v1::ServiceAccount>(),
        ),
        (
            "",
            "v1",
            "Event",
            "events",
            true,
            &["ev"],
            NONE,
            false,
            schema_of::<core::v1::Event>(),
        ),
        (
            "",
            "v1",
            "Pod",
            "pods",
            true,
            &["po"],
            ALL,
            true,
            schema_of::<core::v1::Pod>(),
        ),
        (
            "",
            "v1",
            "Service",
            "services",
            true,
            &["svc"],
            ALL,
            true,
            schema_of::<core::v1::Service>(),
        ),
        (
            "",
            "v1",
            "Endpoints",
            "endpoints",
            true,
            &["ep"],
            NONE,
            false,
            schema_of::<core::v1::Endpoints>(),
        ),
        (
            "",
            "v1",
            "PersistentVolumeClaim",
            "persistentvolumeclaims",
            true,
            &["pvc"],
            NONE,
            true,
            schema_of::<core::v1::PersistentVolumeClaim>(),
        ),
        (
            "",
            "v1",
            "Node",
            "nodes",
            false,
            &["no"],
            NONE,
            true,
            schema_of::<core::v1::Node>(),
        ),
        (
            "",
            "v1",
            "PersistentVolume",
            "persistentvolumes",
            false,
            &["pv"],
            NONE,
            true,
            schema_of::<core::v1::PersistentVolume>(),
        ),
        (
            "",
            "v1",
            "LimitRange",
            "limitranges",
            true,
            &["limits"],
            NONE,
            false,
            schema_of::<core::v1::LimitRange>(),
        ),
        (
            "",
            "v1",
            "ResourceQuota",
            "resourcequotas",
            true,
            &["quota"],
            NONE,
            true,
            schema_of::<core::v1::ResourceQuota>(),
        ),
        (
            "",
            "v1",
            "PodTemplate",
            "podtemplates",
            true,
            NONE,
            NONE,
            false,
            schema_of::<core::v1::PodTemplate>(),
        ),
        (
            "",
            "v1",
            "ReplicationController",
            "replicationcontrollers",
            true,
            &["rc"],
            ALL,
            true,
            schema_of::<core::v1::ReplicationController>(),
        ),
        (
            "events.k8s.io",
            "v1",
            "Event",
            "events",
            true,
            &["ev"],
            NONE,
            false,
            schema_of::<events::v1::Event>(),
        ),
        (
            "apps",
            "v1",
            "Deployment",
            "deployments",
            true,
            &["deploy"],
            ALL,
            true,
            schema_of::<apps::v1::Deployment>(),
        ),
        (
            "apps",
            "v1",
            "StatefulSet",
            "statefulsets",
            true,
            &["sts"],
            ALL,
            true,
            schema_of::<apps::v1::StatefulSet>(),
        ),
        (
            "apps",
            "v1",
            "DaemonSet",
            "daemonsets",
            true,
            &["ds"],
            ALL,
            true,
            schema_of::<apps::v1::DaemonSet>(),
        ),
        (
            "apps",
            "v1",
            "ReplicaSet",
            "replicasets",
            true,
            &["rs"],
            ALL,
            true,
            schema_of::<apps::v1::ReplicaSet>(),
        ),
        (
            "apps",
            "v1",
            "ControllerRevision",
            "controllerrevisions",
            true,
            NONE,
            NONE,
            false,
            schema_of::<apps::v1::ControllerRevision>(),
        ),
        (
            "batch",
            "v1",
            "Job",
            "jobs",
            true,
            NONE,
            ALL,
            true,
            schema_of::<batch::v1::Job>(),
        ),
        (
            "batch",
            "v1",
            "CronJob",
            "cronjobs",
            true,
            &["cj"],
            ALL,
            true,
            schema_of::<batch::v1::CronJob>(),
        ),
        (
            "autoscaling",
            "v2",
            "HorizontalPodAutoscaler",
            "horizontalpodautoscalers",
            true,
            &["hpa"],
            ALL,
            true,
            schema_of::<autoscaling::v2::HorizontalPodAutoscaler>(),
        ),
        (
            "certificates.k8s.io",
            "v1",
            "CertificateSigningRequest",
            "certificatesigningrequests",
            false,
            &["csr"],
            NONE,
            true,
            schema_of::<certificates::v1::CertificateSigningRequest>(),
        ),
        (
            "authorization.k8s.io",
            "v1",
            "SubjectAccessReview",
            "subjectaccessreviews",
            false,
            NONE,
            NONE,
            false,
            schema_of::<authorization::v1::SubjectAccessReview>(),
        ),
        (
            "authorization.k8s.io",
            "v1",
            "LocalSubjectAccessReview",
            "localsubjectaccessreviews",
            true,
            NONE,
            NONE,
            false,
            schema_of::<authorization::v1::LocalSubjectAccessReview>(),
        ),
        (
            "authorization.k8s.io",
            "v1",
            "SelfSubjectAccessReview",
            "selfsubjectaccessreviews",
            false,
            NONE,
            NONE,
            false,
            schema_of::<authorization::v1::SelfSubjectAccessReview>(),
        ),
        (
            "autoscaling",
            "v1",
            "HorizontalPodAutoscaler",
            "horizontalpodautoscalers",
            true,
            &["hpa"],
            ALL,
            true,
            schema_of::<autoscaling::v1::HorizontalPodAutoscaler>(),
        ),
        (
            "policy",
            "v1",
            "PodDisruptionBudget",
            "poddisruptionbudgets",
            true,
            &["pdb"],
            NONE,
            true,
            schema_of::<policy::v1::PodDisruptionBudget>(),
        ),
        (
            "networking.k8s.io",
            "v1",
            "Ingress",
            "ingresses",
            true,
            &["ing"],
            NONE,
            true,
            schema_of::<networking::v1::Ingress>(),
        ),
        (
            "networking.k8s.io",
            "v1",
            "IngressClass",
            "ingressclasses",
            false,
            NONE,
            NONE,
            false,
            schema_of::<networking::v1::IngressClass>(),
        ),
        (
            "networking.k8s.io",
            "v1",
            "NetworkPolicy",
            "networkpolicies",
            true,
            &["netpol"],
            NONE,
            false,
            schema_of::<networking::v1::NetworkPolicy>(),
        ),
        (
            "discovery.k8s.io",
            "v1",
            "EndpointSlice",
            "endpointslices",
            true,
            NONE,
            NONE,
            false,
            schema_of::<discovery::v1::EndpointSlice>(),
        ),
        (
            "storage.k8s.io",
            "v1",
            "StorageClass",
            "storageclasses",
            false,
            &["sc"],
            NONE,
            false,
            schema_of::<storage::v1::StorageClass>(),
        ),
        (
            "storage.k8s.io",
            "v1",
            "CSIDriver",
            "csidrivers",
            false,
            NONE,
            NONE,
            false,
            schema_of::<storage::v1::CSIDriver>(),
        ),
        (
            "storage.k8s.io",
            "v1",
            "VolumeAttachment",
            "volumeattachments",
            false,
            NONE,
            NONE,
            true,
            schema_of::<storage::v1::VolumeAttachment>(),
        ),
        (
            "scheduling.k8s.io",
            "v1",
            "PriorityClass",
            "priorityclasses",
            false,
            &["pc"],
            NONE,
            false,
            schema_of::<scheduling::v1::PriorityClass>(),
        ),
        (
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
            false,
            NONE,
            NONE,
            false,
            schema_of::<adm::v1::ValidatingWebhookConfiguration>(),
        ),
        (
            "admissionregistration.k8s.io",
            "v1",
            "MutatingWebhookConfiguration",
            "mutatingwebhookconfigurations",
            false,
            NONE,
            NONE,
            false,
            schema_of::<adm::v1::MutatingWebhookConfiguration>(),
        ),
        (
            rbac_g,
            "v1",
            "Role",
            "roles",
            true,
            NONE,
            NONE,
            false,
            schema_of::<rbac::v1::Role>(),
        ),
        (
            rbac_g,
            "v1",
            "ClusterRole",
            "clusterroles",
            false,
            NONE,
            NONE,
            false,
            schema_of::<rbac::v1::ClusterRole>(),
        ),
        (
            rbac_g,
            "v1",
            "RoleBinding",
            "rolebindings",
            true,
            NONE,
            NONE,
            false,
            schema_of::<rbac::v1::RoleBinding>(),
        ),
        (
            rbac_g,
            "v1",
            "ClusterRoleBinding",
            "clusterrolebindings",
            false,
            NONE,
            NONE,
            false,
            schema_of::<rbac::v1::ClusterRoleBinding>(),
        ),
        (
            "coordination.k8s.io",
            "v1",
            "Lease",
            "leases",
            true,
            NONE,
            NONE,
            false,
            schema_of::<coordination::v1::Lease>(),
        ),
        (
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            false,
            &["crd", "crds"],
            NONE,
            true,
            None,
        ),
    ];
    table
        .into_iter()
        .map(builtin)
        .map(|mut i| {
            // autoscaling/v1 HorizontalPodAutoscalers are stored as v2 (`crate::hpa`).
            i.storage = !(i.group == "autoscaling" && i.version == "v1");
            // Access reviews are answered, never stored (`crate::authz`).
            if i.group == "authorization.k8s.io" {
                i.verbs = vec!["create".into()];
            }
            i
        })
        .collect()
}

macro_rules! decode_as {
    ($info:expr, $obj:expr, { $( ($group:literal, $kind:literal) => $ty:ty ),* $(,)? }) => {
        match ($info.group.as_str(), $info.kind.as_str()) {
            $( ($group, $kind) => first_error::<$ty>($obj), )*
            _ => Ok(()),
        }
    };
}

/// Decodes `obj` into `T` one top-level field at a time, so the error names the field.
fn first_error<T: serde::de::DeserializeOwned>(obj: &Value) -> Result<(), RegistryError> {
    if serde_json::from_value::<T>(obj.clone()).is_ok() {
        return Ok(());
    }
    let Some(m) = obj.as_object() else {
        return Err(RegistryError::NotAnObject);
    };
    let base: serde_json::Map<String, Value> = m
        .iter()
        .filter(|(k, _)| matches!(k.as_str(), "apiVersion" | "kind" | "metadata"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (k, v) in m {
        let mut one = base.clone();
        one.insert(k.clone(), v.clone());
        if let Err(e) = serde_json::from_value::<T>(Value::Object(one)) {
            return Err(RegistryError::Field {
                field: k.clone(),
                cause: e.to_string(),
            });
        }
    }
    serde_json::from_value::<T>(obj.clone())
        .map(|_| ())
        .map_err(|e| RegistryError::Decode {
            cause: e.to_string(),
        })
}

/// Checks that a built-in object decodes as its Kubernetes type (what a real API server's
/// decoder rejects: wrong types, missing required fields). Errors name the top-level
/// field and serde's cause, e.g. `spec: invalid type: string "three", expected i32`.
pub(crate) fn decode_builtin(info: &ResourceInfo, obj: &Value) -> Result<(), RegistryError> {
    use k8s_openapi::api::{
        apps, autoscaling, batch, core, discovery, networking, policy, scheduling, storage,
    };
    if !info.builtin {
        return Ok(());
    }
    if info.group == "autoscaling" && info.version == "v1" {
        return first_error::<autoscaling::v1::HorizontalPodAutoscaler>(obj);
    }
    decode_as!(info, obj, {
        ("", "Service") => core::v1::Service,
        ("", "PersistentVolumeClaim") => core::v1::PersistentVolumeClaim,
        ("", "PersistentVolume") => core::v1::PersistentVolume,
        ("", "Node") => core::v1::Node,
        ("", "LimitRange") => core::v1::LimitRange,
        ("", "ResourceQuota") => core::v1::ResourceQuota,
        ("", "ReplicationController") => core::v1::ReplicationController,
        ("", "ConfigMap") => core::v1::ConfigMap,
        ("", "ServiceAccount") => core::v1::ServiceAccount,
        ("apps", "Deployment") => apps::v1::Deployment,
        ("apps", "StatefulSet") => apps::v1::StatefulSet,
        ("apps", "DaemonSet") => apps::v1::DaemonSet,
        ("apps", "ReplicaSet") => apps::v1::ReplicaSet,
        ("batch", "CronJob") => batch::v1::CronJob,
        ("autoscaling", "HorizontalPodAutoscaler") => autoscaling::v2::HorizontalPodAutoscaler,
        ("policy", "PodDisruptionBudget") => policy::v1::PodDisruptionBudget,
        ("networking.k8s.io", "Ingress") => networking::v1::Ingress,
        ("networking.k8s.io", "IngressClass") => networking::v1::IngressClass,
        ("networking.k8s.io", "NetworkPolicy") => networking::v1::NetworkPolicy,
        ("discovery.k8s.io", "EndpointSlice") => discovery::v1::EndpointSlice,
        ("storage.k8s.io", "StorageClass") => storage::v1::StorageClass,
        ("scheduling.k8s.io", "PriorityClass") => scheduling::v1::PriorityClass,
    })
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
