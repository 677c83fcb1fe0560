//! OpenAPI v3 publishing: `/openapi/v3` (index) and `/openapi/v3/<api|apis/g>/<v>`
//! (one OpenAPI 3.0 document per group/version), shaped like the Kubernetes API server's.
//!
//! What clients need from these documents:
//! * kubectl's `--validate=strict` (the default) asks `QueryParamVerifierV3` whether the
//!   PATCH operation of the object's GVK (found by the operation's
//!   `x-kubernetes-group-version-kind` extension) declares the `fieldValidation` query
//!   parameter; if so kubectl sends `fieldValidation=Strict` and leaves validation to the
//!   server (no `/openapi/v2` needed). A group/version document without a PATCH operation
//!   for the kind makes kubectl fail, so every resource gets full paths here.
//! * `kubectl explain` finds the schema whose `x-kubernetes-group-version-kind` lists the
//!   GVK in `components.schemas` and follows `#/components/schemas/...` references.
//!
//! Schema names follow Kubernetes: built-ins by their Go package
//! (`io.k8s.api.core.v1.ConfigMap`, from k8s-openapi's schemars schemas), custom resources
//! as `<reversed group>.<version>.<Kind>` (`io.kratix.platform.v1alpha1.Promise`).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::resource::ResourceInfo;

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";
const WATCH_EVENT: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent";

/// The media subtype kubectl asks for an OpenAPI v2 document in protobuf with (gnostic's
/// `openapi.v2.Document`); the `@` is not valid in a Content-Type, so the answer is
/// labelled [`V2_PROTOBUF_CONTENT_TYPE`], as the Kubernetes API server does.
pub(crate) const V2_PROTOBUF_ACCEPT: &str = "com.github.proto-openapi.spec.v2@v1.0+protobuf";
/// The media type an OpenAPI v2 protobuf answer is labelled with.
pub(crate) const V2_PROTOBUF_CONTENT_TYPE: &str =
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

const V2_TITLE: &str = "Kubernetes";
const V2_VERSION: &str = "v1.33.0+plinth";

/// `/openapi/v2` as JSON: the Swagger 2.0 form of every group-version's `/openapi/v3`
/// document (the same definitions, with their descriptions, and the same paths and
/// parameters), as kube-apiserver publishes both from one set of types.
pub(crate) fn v2_json(resources: &[ResourceInfo]) -> Value {
    let mut definitions = Map::new();
    let mut paths = Map::new();
    for (group, version) in by_group_version(resources).into_keys() {
        let Some(doc) = v3_group_version(resources, &group, &version) else {
            continue;
        };
        if let Some(schemas) = doc
            .pointer("/components/schemas")
            .and_then(Value::as_object)
        {
            for (name, s) in schemas {
                definitions
                    .entry(name.clone())
                    .or_insert_with(|| v2_schema(s.clone()));
            }
        }
        if let Some(p) = doc.get("paths").and_then(Value::as_object) {
            for (path, item) in p {
                paths.insert(path.clone(), v2_path_item(item));
            }
        }
    }
    json!({
        "swagger": "2.0",
        "info": {"title": V2_TITLE, "version": V2_VERSION},
        "paths": paths,
        "definitions": definitions,
    })
}

/// An OpenAPI v3 schema as Swagger 2.0 reads it: references into `#/definitions/`, a lone
/// `allOf` reference inlined, no `nullable`.
fn v2_schema(mut s: Value) -> Value {
    match &mut s {
        Value::Object(m) => {
            m.remove("nullable");
            if let Some(Value::Array(all)) = m.get("allOf")
                && all.len() == 1
                && let Some(Value::Object(only)) = all.first().cloned()
            {
                m.remove("allOf");
                for (k, v) in only {
                    m.entry(k).or_insert(v);
                }
            }
            if let Some(Value::String(r)) = m.get_mut("$ref")
                && let Some(name) = r.strip_prefix("#/components/schemas/")
            {
                *r = format!("#/definitions/{name}");
            }
            for v in m.values_mut() {
                let taken = std::mem::take(v);
                *v = v2_schema(taken);
            }
        }
        Value::Array(a) => {
            for v in a.iter_mut() {
                let taken = std::mem::take(v);
                *v = v2_schema(taken);
            }
        }
        _ => {}
    }
    s
}

/// A v3 parameter as a Swagger 2.0 one: the schema's type (and its other keywords) on
/// the parameter itself.
fn v2_parameter(p: &Value) -> Value {
    let mut out = p.clone();
    if let Some(m) = out.as_object_mut()
        && let Some(Value::Object(schema)) = m.remove("schema")
    {
        for (k, v) in schema {
            m.entry(k).or_insert(v);
        }
    }
    out
}

/// A v3 path item as a Swagger 2.0 one: parameters inline, the request body a `body`
/// parameter, responses with their schema and the media types as `consumes`/`produces`.
fn v2_path_item(item: &Value) -> Value {
    let Some(m) = item.as_object() else {
        return item.clone();
    };
    let mut out = Map::new();
    for (k, v) in m {
        match k.as_str() {
            "parameters" => {
                let ps: Vec<Value> = v
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(v2_parameter)
                    .collect();
                out.insert(k.clone(), Value::Array(ps));
            }
            "get" | "put" | "post" | "delete" | "patch" | "head" | "options" => {
                out.insert(k.clone(), v2_operation(v));
            }
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    Value::Object(out)
}

fn v2_operation(op: &Value) -> Value {
    let Some(m) = op.as_object() else {
        return op.clone();
    };
    let mut out = Map::new();
    let mut params: Vec<Value> = m
        .get("parameters")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(v2_parameter)
        .collect();
    let mut produces: Vec<String> = Vec::new();
    for (k, v) in m {
        match k.as_str() {
            "parameters" => {}
            "requestBody" => {
                let content = v.get("content").and_then(Value::as_object);
                let schema = content
                    .and_then(|c| c.values().next())
                    .and_then(|c| c.get("schema"))
                    .cloned()
                    .unwrap_or(json!({}));
                params.insert(
                    0,
                    json!({"name": "body", "in": "body", "required": v.get("required").cloned().unwrap_or(json!(true)),
                           "schema": v2_schema(schema)}),
                );
                if let Some(c) = content {
                    out.insert("consumes".into(), json!(c.keys().collect::<Vec<_>>()));
                }
            }
            "responses" => {
                let mut rs = Map::new();
                for (code, r) in v.as_object().into_iter().flatten() {
                    let mut one =
                        json!({"description": r.get("description").cloned().unwrap_or(json!(""))});
                    if let Some(c) = r.get("content").and_then(Value::as_object) {
                        for mt in c.keys() {
                            if !produces.contains(mt) {
                                produces.push(mt.clone());
                            }
                        }
                        if let Some(s) = c.values().next().and_then(|c| c.get("schema")) {
                            one["schema"] = v2_schema(s.clone());
                        }
                    }
                    rs.insert(code.clone(), one);
                }
                out.insert(k.clone(), Value::Object(rs));
            }
            _ => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    if !params.is_empty() {
        out.insert("parameters".into(), Value::Array(params));
    }
    if !produces.is_empty() {
        out.insert("produces".into(), json!(produces));
    }
    out.insert("schemes".into(), json!(["https"]));
    Value::Object(out)
}

/// The same document as a protobuf `openapi.v2.Document`: `swagger` (field 1),
/// `info` (field 2: `title` 1, `version` 2) and an empty `paths` (field 8).
pub(crate) fn v2_empty_protobuf() -> Vec<u8> {
    /// A length-delimited field (wire type 2); every length here is under 128 bytes,
    /// so it is a single varint byte.
    fn field(number: u8, bytes: &[u8]) -> Vec<u8> {
        let len = u8::try_from(bytes.len()).expect("short field");
        assert!(len < 0x80, "short field");
        let mut out = vec![(number << 3) | 2, len];
        out.extend_from_slice(bytes);
        out
    }
    let info = [
        field(1, V2_TITLE.as_bytes()),
        field(2, V2_VERSION.as_bytes()),
    ]
    .concat();
    [field(1, b"2.0"), field(2, &info), field(8, &[])].concat()
}

/// Bumped whenever the document layout changes, so clients' hash-keyed caches refresh.
const LAYOUT_VERSION: &str = "plinth-openapi-v3-2";

/// The `/openapi/v3` index: `{"paths": {"api/v1": {"serverRelativeURL":
/// "/openapi/v3/api/v1?hash=<HEX>"}, "apis/<group>/<version>": {...}}}`.
///
/// The hash (SHA-256, upper-case hex, as Kubernetes) covers everything the document of
/// that group/version is generated from, so it changes exactly when the document does —
/// kubectl caches documents by this URL.
pub fn v3_index(resources: &[ResourceInfo]) -> Value {
    let mut paths = Map::new();
    for ((group, version), infos) in by_group_version(resources) {
        let key = gv_path(&group, &version);
        let hash = gv_hash(&infos);
        paths.insert(
            key.clone(),
            json!({ "serverRelativeURL": format!("/openapi/v3/{key}?hash={hash}") }),
        );
    }
    json!({ "paths": paths })
}

/// The OpenAPI 3.0 document of one group/version (`group` empty for the core group), or
/// `None` when no resource is served there.
///
/// Contains `paths` for every resource (list/create/deletecollection on the collection,
/// get/replace/patch/delete on objects, `/status` when the resource has that subresource;
/// create, replace and patch declare `dryRun`, `fieldManager` and `fieldValidation`) and
/// `components.schemas` with each kind (`x-kubernetes-group-version-kind` set), its list
/// kind, and the meta.k8s.io types they reference (ObjectMeta, ListMeta, Status,
/// DeleteOptions, Patch, WatchEvent).
pub fn v3_group_version(resources: &[ResourceInfo], group: &str, version: &str) -> Option<Value> {
    let mut infos: Vec<&ResourceInfo> = resources
        .iter()
        .filter(|r| r.group == group && r.version == version)
        .collect();
    if infos.is_empty() {
        return None;
    }
    infos.sort_by(|a, b| a.plural.cmp(&b.plural));
    let key = gv_hash(&infos);
    if let Some(doc) = doc_cache()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&key)
    {
        return Some((**doc).clone());
    }
    let doc = generate(&infos);
    let mut cache = doc_cache().lock().unwrap_or_else(|e| e.into_inner());
    if cache.len() >= 256 {
        cache.clear();
    }
    cache.insert(key, Arc::new(doc.clone()));
    Some(doc)
}

fn generate(infos: &[&ResourceInfo]) -> Value {
    let mut generator: SchemaGenerator = SchemaSettings::openapi3().into_generator();
    generator.subschema_for::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>();
    generator.subschema_for::<k8s_openapi::apimachinery::pkg::apis::meta::v1::ListMeta>();
    generator.subschema_for::<k8s_openapi::apimachinery::pkg::apis::meta::v1::Status>();
    generator.subschema_for::<k8s_openapi::apimachinery::pkg::apis::meta::v1::DeleteOptions>();

    let mut schemas = Map::new();
    let mut paths = Map::new();
    for info in infos {
        let name = match builtin_schema_name(&mut generator, info) {
            Some(n) => n,
            None => {
                let n = custom_schema_name(info);
                schemas.insert(n.clone(), custom_schema(info));
                n
            }
        };
        let list_name = format!("{name}List");
        schemas.insert(list_name.clone(), list_schema(info, &name));
        add_paths(&mut paths, info, &name, &list_name);
    }
    let mut defs = generator.take_definitions(true);
    add_patch_metadata(&mut defs);
    // k8s-openapi's schemas carry no GVK; add it to the kinds served here.
    for info in infos {
        if let Some(name) = builtin_name_for(info)
            && let Some(Value::Object(s)) = defs.get_mut(&name)
        {
            s.insert(
                "x-kubernetes-group-version-kind".into(),
                gvk_list(info, &info.kind),
            );
        }
    }
    for (k, v) in defs {
        schemas.entry(k).or_insert(v);
    }
    schemas.insert(
        PATCH.into(),
        json!({"type": "object", "description": "Patch is provided to give a concrete name and type to the Kubernetes PATCH request body."}),
    );
    schemas.insert(
        WATCH_EVENT.into(),
        json!({
            "type": "object", "required": ["type", "object"],
            "description": "Event represents a single event to a watched resource.",
            "properties": {
                "object": {"type": "object", "description": "Object is the object being watched: the full object for ADDED, MODIFIED, DELETED and BOOKMARK, a Status for ERROR."},
                "type": {"type": "string", "default": ""}
            }
        }),
    );
    let mut doc = json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"BearerToken": {"type": "apiKey", "description": "Bearer Token authentication", "name": "authorization", "in": "header"}}
        },
        "security": [{"BearerToken": []}]
    });
    rewrite_refs(&mut doc);
    doc
}

/// The strategic-merge-patch tags of the built-in types (`patchStrategy`, `patchMergeKey`
/// in Kubernetes' Go types), which kube-apiserver publishes as `x-kubernetes-patch-strategy`
/// and `x-kubernetes-patch-merge-key`: kubectl reads them from the OpenAPI document to build
/// `kubectl apply`'s patch (merging lists by key, `$retainKeys` for a Deployment's strategy
/// and a Pod's volumes). k8s-openapi's schemas do not carry them. The same merge keys are
/// what the server merges by (`patch::list_strategy`).
const PATCH_TAGS: &[(&[&str], &str, &str, Option<&str>)] = &[
    (
        &[
            "io.k8s.api.core.v1.Container",
            "io.k8s.api.core.v1.EphemeralContainer",
        ],
        "ports",
        "merge",
        Some("containerPort"),
    ),
    (
        &[
            "io.k8s.api.core.v1.Container",
            "io.k8s.api.core.v1.EphemeralContainer",
        ],
        "env",
        "merge",
        Some("name"),
    ),
    (
        &[
            "io.k8s.api.core.v1.Container",
            "io.k8s.api.core.v1.EphemeralContainer",
        ],
        "volumeMounts",
        "merge",
        Some("mountPath"),
    ),
    (
        &[
            "io.k8s.api.core.v1.Container",
            "io.k8s.api.core.v1.EphemeralContainer",
        ],
        "volumeDevices",
        "merge",
        Some("devicePath"),
    ),
    (
        &["io.k8s.api.core.v1.PodSpec"],
        "volumes",
        "merge,retainKeys",
        Some("name"),
    ),
    (
        &["io.k8s.api.core.v1.PodSpec"],
        "containers",
        "merge",
        Some("name"),
    ),
    (
        &["io.k8s.api.core.v1.PodSpec"],
        "initContainers",
        "merge",
        Some("name"),
    ),
    (
        &["io.k8s.api.core.v1.PodSpec"],
        "ephemeralContainers",
        "merge",
        Some("name"),
    ),
    (
        &["io.k8s.api.core.v1.PodSpec"],
        "imagePullSecrets",
        "merge",
        Some("name"),
    ),
    (
        &["io.k8s.api.core.v1.PodSpec"],
        "hostAliases",
        "merge",
        Some("ip"),
    ),
    (
        &["io.k8s.api.core.v1.PodSpec"],
        "resourceClaims",
        "merge,retainKeys",
        Some("name"),
    ),
    (
        &["io.k8s.api.core.v1.PodSpec"],
        "schedulingGates",
        "merge",
        Some("name"),
    ),
    (
        &["io.k8s.api.core.v1.ServiceSpec"],
        "ports",
        "merge",
        Some("port"),
    ),
    (
        &["io.k8s.api.core.v1.ServiceAccount"],
        "secrets",
        "merge",
        Some("name"),
    ),
    (
        &["io.k8s.api.apps.v1.DeploymentSpec"],
        "strategy",
        "retainKeys",
        None,
    ),
    (
        &["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"],
        "finalizers",
        "merge",
        None,
    ),
    (
        &["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"],
        "ownerReferences",
        "merge",
        Some("uid"),
    ),
];

fn add_patch_metadata(defs: &mut Map<String, Value>) {
    for (names, property, strategy, key) in PATCH_TAGS {
        for name in *names {
            let Some(p) = defs
                .get_mut(*name)
                .and_then(|s| s.pointer_mut(&format!("/properties/{property}")))
                .and_then(Value::as_object_mut)
            else {
                continue;
            };
            p.insert("x-kubernetes-patch-strategy".into(), json!(strategy));
            if let Some(key) = key {
                p.insert("x-kubernetes-patch-merge-key".into(), json!(key));
            }
        }
    }
    // Every status's conditions merge by type (PodStatus, DeploymentStatus, ...).
    for (name, schema) in defs.iter_mut() {
        if name.ends_with("Status")
            && let Some(p) = schema
                .pointer_mut("/properties/conditions")
                .and_then(Value::as_object_mut)
            && p.get("type") == Some(&json!("array"))
        {
            p.insert("x-kubernetes-patch-strategy".into(), json!("merge"));
            p.insert("x-kubernetes-patch-merge-key".into(), json!("type"));
        }
    }
}

/// SHA-256 (upper-case hex) over everything a group/version document is generated from.
fn gv_hash(infos: &[&ResourceInfo]) -> String {
    let mut h = Sha256::new();
    h.update(LAYOUT_VERSION.as_bytes());
    for i in infos {
        h.update(serde_json::to_vec(i).unwrap_or_default());
    }
    hex::encode_upper(h.finalize())
}

type DocCache = Mutex<HashMap<String, Arc<Value>>>;

/// Generated documents by [`gv_hash`]: documents are regenerated only when a resource of
/// the group/version changes (built-in schemas are large; kubectl asks on every apply).
fn doc_cache() -> &'static DocCache {
    static CACHE: OnceLock<DocCache> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

fn by_group_version(resources: &[ResourceInfo]) -> BTreeMap<(String, String), Vec<&ResourceInfo>> {
    let mut m: BTreeMap<(String, String), Vec<&ResourceInfo>> = BTreeMap::new();
    for r in resources {
        m.entry((r.group.clone(), r.version.clone()))
            .or_default()
            .push(r);
    }
    for v in m.values_mut() {
        v.sort_by(|a, b| a.plural.cmp(&b.plural));
    }
    m
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `<reversed group>.<version>.<Kind>`, e.g. `io.kratix.platform.v1alpha1.Promise`.
fn custom_schema_name(info: &ResourceInfo) -> String {
    let reversed: Vec<&str> = info.group.split('.').rev().collect();
    format!("{}.{}.{}", reversed.join("."), info.version, info.kind)
}

fn gvk_list(info: &ResourceInfo, kind: &str) -> Value {
    json!([{ "group": info.group, "kind": kind, "version": info.version }])
}

macro_rules! builtin_kinds {
    ($info:expr, $generator:expr, { $( ($group:literal, $version:literal, $kind:literal) => $ty:ty ),* $(,)? }) => {
        match ($info.group.as_str(), $info.version.as_str(), $info.kind.as_str()) {
            $( ($group, $version, $kind) => {
                if let Some(g) = $generator {
                    g.subschema_for::<$ty>();
                }
                Some(<$ty as schemars::JsonSchema>::schema_name().into_owned())
            } )*
            _ => None,
        }
    };
}

fn builtin_lookup(info: &ResourceInfo, generator: Option<&mut SchemaGenerator>) -> Option<String> {
    use k8s_openapi::api::*;
    if !info.builtin {
        return None;
    }
    builtin_kinds!(info, generator, {
        ("", "v1", "Namespace") => core::v1::Namespace,
        ("", "v1", "ConfigMap") => core::v1::ConfigMap,
        ("", "v1", "Secret") => core::v1::Secret,
        ("", "v1", "ServiceAccount") => core::v1::ServiceAccount,
        ("", "v1", "Event") => core::v1::Event,
        ("", "v1", "Pod") => core::v1::Pod,
        ("", "v1", "Service") => core::v1::Service,
        ("", "v1", "Endpoints") => core::v1::Endpoints,
        ("", "v1", "Node") => core::v1::Node,
        ("", "v1", "PersistentVolumeClaim") => core::v1::PersistentVolumeClaim,
        ("", "v1", "PersistentVolume") => core::v1::PersistentVolume,
        ("", "v1", "LimitRange") => core::v1::LimitRange,
        ("", "v1", "ResourceQuota") => core::v1::ResourceQuota,
        ("", "v1", "PodTemplate") => core::v1::PodTemplate,
        ("", "v1", "ReplicationController") => core::v1::ReplicationController,
        ("apps", "v1", "ControllerRevision") => apps::v1::ControllerRevision,
        ("autoscaling", "v2", "HorizontalPodAutoscaler") => autoscaling::v2::HorizontalPodAutoscaler,
        ("autoscaling", "v1", "HorizontalPodAutoscaler") => autoscaling::v1::HorizontalPodAutoscaler,
        ("authorization.k8s.io", "v1", "SubjectAccessReview") => authorization::v1::SubjectAccessReview,
        ("certificates.k8s.io", "v1", "CertificateSigningRequest") => certificates::v1::CertificateSigningRequest,
        ("authorization.k8s.io", "v1", "LocalSubjectAccessReview") => authorization::v1::LocalSubjectAccessReview,
        ("authorization.k8s.io", "v1", "SelfSubjectAccessReview") => authorization::v1::SelfSubjectAccessReview,
        ("policy", "v1", "PodDisruptionBudget") => policy::v1::PodDisruptionBudget,
        ("networking.k8s.io", "v1", "Ingress") => networking::v1::Ingress,
        ("networking.k8s.io", "v1", "IngressClass") => networking::v1::IngressClass,
        ("networking.k8s.io", "v1", "NetworkPolicy") => networking::v1::NetworkPolicy,
        ("discovery.k8s.io", "v1", "EndpointSlice") => discovery::v1::EndpointSlice,
        ("storage.k8s.io", "v1", "StorageClass") => storage::v1::StorageClass,
        ("storage.k8s.io", "v1", "CSIDriver") => storage::v1::CSIDriver,
        ("storage.k8s.io", "v1", "VolumeAttachment") => storage::v1::VolumeAttachment,
        ("scheduling.k8s.io", "v1", "PriorityClass") => scheduling::v1::PriorityClass,
        ("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration") => admissionregistration::v1::ValidatingWebhookConfiguration,
        ("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration") => admissionregistration::v1::MutatingWebhookConfiguration,
        ("events.k8s.io", "v1", "Event") => events::v1::Event,
        ("batch", "v1", "Job") => batch::v1::Job,
        ("batch", "v1", "CronJob") => batch::v1::CronJob,
        ("apps", "v1", "Deployment") => apps::v1::Deployment,
        ("apps", "v1", "StatefulSet") => apps::v1::StatefulSet,
        ("apps", "v1", "DaemonSet") => apps::v1::DaemonSet,
        ("apps", "v1", "ReplicaSet") => apps::v1::ReplicaSet,
        ("rbac.authorization.k8s.io", "v1", "Role") => rbac::v1::Role,
        ("rbac.authorization.k8s.io", "v1", "ClusterRole") => rbac::v1::ClusterRole,
        ("rbac.authorization.k8s.io", "v1", "RoleBinding") => rbac::v1::RoleBinding,
        ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding") => rbac::v1::ClusterRoleBinding,
        ("coordination.k8s.io", "v1", "Lease") => coordination::v1::Lease,
        ("apiextensions.k8s.io", "v1", "CustomResourceDefinition") =>
            k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    })
}

fn builtin_name_for(info: &ResourceInfo) -> Option<String> {
    builtin_lookup(info, None)
}

fn builtin_schema_name(generator: &mut SchemaGenerator, info: &ResourceInfo) -> Option<String> {
    builtin_lookup(info, Some(generator))
}

const API_VERSION_DESC: &str = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const KIND_DESC: &str = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
const METADATA_DESC: &str = "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// A custom resource's published schema: its structural schema with `apiVersion`/`kind`
/// described, `metadata` referencing ObjectMeta, and the GVK extension. Built-in kinds
/// the table above does not know (no k8s-openapi type) fall back to their stored schema.
fn custom_schema(info: &ResourceInfo) -> Value {
    let mut s = match info.schema.clone() {
        Some(Value::Object(m)) => m,
        _ => {
            let mut m = Map::new();
            m.insert(
                "x-kubernetes-preserve-unknown-fields".into(),
                Value::Bool(true),
            );
            m
        }
    };
    s.insert("type".into(), Value::from("object"));
    let props = s
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(p) = props {
        p.insert(
            "apiVersion".into(),
            json!({"type": "string", "description": API_VERSION_DESC}),
        );
        p.insert(
            "kind".into(),
            json!({"type": "string", "description": KIND_DESC}),
        );
        p.insert(
            "metadata".into(),
            json!({"allOf": [{"$ref": format!("#/components/schemas/{OBJECT_META}")}], "default": {}, "description": METADATA_DESC}),
        );
    }
    s.insert(
        "x-kubernetes-group-version-kind".into(),
        gvk_list(info, &info.kind),
    );
    Value::Object(s)
}

fn list_schema(info: &ResourceInfo, item: &str) -> Value {
    json!({
        "type": "object",
        "required": ["items"],
        "description": format!("{} is a list of {}", info.list_kind, info.kind),
        "properties": {
            "apiVersion": {"type": "string", "description": API_VERSION_DESC},
            "items": {
                "type": "array",
                "description": format!("List of {}. More info: https://git.k8s.io/community/contributors/devel/api-conventions.md", info.plural),
                "items": {"$ref": format!("#/components/schemas/{item}")}
            },
            "kind": {"type": "string", "description": KIND_DESC},
            "metadata": {"allOf": [{"$ref": format!("#/components/schemas/{LIST_META}")}], "default": {},
                         "description": "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"}
        },
        "x-kubernetes-group-version-kind": gvk_list(info, &info.list_kind)
    })
}

fn reference(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

fn query_param(name: &str, description: &str, ty: &str) -> Value {
    json!({"name": name, "in": "query", "description": description, "schema": {"type": ty, "uniqueItems": true}})
}

fn path_param(name: &str, description: &str) -> Value {
    json!({"name": name, "in": "path", "description": description, "required": true, "schema": {"type": "string", "uniqueItems": true}})
}

const FIELD_VALIDATION_DESC: &str = "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore: This will ignore any unknown fields that are silently dropped from the object, and will ignore all but the last duplicate field that the decoder encounters. This is the default behavior prior to v1.23. - Warn: This will send a warning via the standard warning response header for each unknown field that is dropped from the object, and for each duplicate field that is encountered. The request will still succeed if there are no other errors, and will only persist the last of any duplicate fields. This is the default in v1.23+ - Strict: This will fail the request with a BadRequest error if any unknown fields would be dropped from the object, or if any duplicate fields are present. The error returned from the server will contain all unknown and duplicate fields encountered.";

fn write_params(with_force: bool) -> Vec<Value> {
    let mut p = vec![
        query_param(
            "dryRun",
            "When present, indicates that modifications should not be persisted. An invalid or unrecognized dryRun directive will result in an error response and no further processing of the request. Valid values are: - All: all dry run stages will be processed",
            "string",
        ),
        query_param(
            "fieldManager",
            "fieldManager is a name associated with the actor or entity that is making these changes. The value must be less than or 128 characters long, and only contain printable characters, as defined by https://golang.org/pkg/unicode/#IsPrint.",
            "string",
        ),
        query_param("fieldValidation", FIELD_VALIDATION_DESC, "string"),
    ];
    if with_force {
        p.push(query_param("force", "Force is going to \"force\" Apply requests. It means user will re-acquire conflicting fields owned by other people. Force flag must be unset for non-apply patch requests.", "boolean"));
    }
    p
}

fn list_params() -> Vec<Value> {
    vec![
        query_param(
            "allowWatchBookmarks",
            "allowWatchBookmarks requests watch events with type \"BOOKMARK\".",
            "boolean",
        ),
        query_param(
            "continue",
            "The continue option should be set when retrieving more results from the server.",
            "string",
        ),
        query_param(
            "fieldSelector",
            "A selector to restrict the list of returned objects by their fields. Defaults to everything.",
            "string",
        ),
        query_param(
            "labelSelector",
            "A selector to restrict the list of returned objects by their labels. Defaults to everything.",
            "string",
        ),
        query_param(
            "limit",
            "limit is a maximum number of responses to return for a list call.",
            "integer",
        ),
        query_param(
            "resourceVersion",
            "resourceVersion sets a constraint on what resource versions a request may be served from.",
            "string",
        ),
        query_param(
            "resourceVersionMatch",
            "resourceVersionMatch determines how resourceVersion is applied to list calls.",
            "string",
        ),
        query_param(
            "sendInitialEvents",
            "`sendInitialEvents=true` may be set together with `watch=true`.",
            "boolean",
        ),
        query_param(
            "timeoutSeconds",
            "Timeout for the list/watch call.",
            "integer",
        ),
        query_param(
            "watch",
            "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications.",
            "boolean",
        ),
    ]
}

fn json_content(schema: Value) -> Value {
    json!({
        "application/json": {"schema": schema.clone()},
        "application/yaml": {"schema": schema.clone()},
        "application/vnd.kubernetes.protobuf": {"schema": schema}
    })
}

fn ok_response(schema: Value) -> Value {
    json!({"description": "OK", "content": json_content(schema)})
}

fn camel(s: &str) -> String {
    s.split(['.', '-'])
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut c = p.chars();
            match c.next() {
                Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
                None => String::new(),
            }
        })
        .collect()
}

struct Op<'a> {
    info: &'a ResourceInfo,
    tag: String,
    id_base: String,
}

impl Op<'_> {
    fn operation(&self, action: &str, verb: &str, suffix: &str, body: Value) -> Value {
        let mut op = match body {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        op.insert("tags".into(), json!([self.tag]));
        op.insert(
            "operationId".into(),
            Value::from(format!("{verb}{}{suffix}", self.id_base)),
        );
        op.insert("x-kubernetes-action".into(), Value::from(action));
        op.insert(
            "x-kubernetes-group-version-kind".into(),
            json!({"group": self.info.group, "version": self.info.version, "kind": self.info.kind}),
        );
        op.entry("responses")
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .map(|r| r.insert("401".into(), json!({"description": "Unauthorized"})));
        Value::Object(op)
    }
}

/// Patch media types of a resource. Strategic merge patch only for built-in kinds:
/// kubectl's client-side apply picks strategic merge exactly when the PATCH operation
/// lists `application/strategic-merge-patch+json`, and custom resources must get a JSON
/// merge patch (as on Kubernetes, whose CRD documents omit it).
fn patch_content(info: &ResourceInfo) -> Value {
    let mut m = Map::new();
    m.insert(
        "application/json-patch+json".into(),
        json!({"schema": reference(PATCH)}),
    );
    m.insert(
        "application/merge-patch+json".into(),
        json!({"schema": reference(PATCH)}),
    );
    if info.builtin {
        m.insert(
            "application/strategic-merge-patch+json".into(),
            json!({"schema": reference(PATCH)}),
        );
    }
    m.insert(
        "application/apply-patch+yaml".into(),
        json!({"schema": reference(PATCH)}),
    );
    Value::Object(m)
}

/// The paths of one resource, as the Kubernetes API server publishes them: the
/// collection, the object (and its status), and for namespaced kinds the list across
/// all namespaces.
fn add_paths(paths: &mut Map<String, Value>, info: &ResourceInfo, item: &str, list: &str) {
    let r = ResourcePaths::new(info, item, list);
    paths.insert(r.collection.clone(), r.collection_path());
    let mut object_paths = vec![(format!("{}/{{name}}", r.collection), "")];
    if info.status_subresource {
        object_paths.push((format!("{}/{{name}}/status", r.collection), "Status"));
    }
    for (path, suffix) in object_paths {
        paths.insert(path, r.object_path(suffix));
    }
    if info.namespaced {
        paths.insert(r.all_namespaces.clone(), r.all_namespaces_path());
    }
}

/// What every path of one resource shares.
struct ResourcePaths<'a> {
    info: &'a ResourceInfo,
    op: Op<'a>,
    /// `.../namespaces/{namespace}/<plural>` or `.../<plural>`.
    collection: String,
    /// `.../<plural>` (the list across namespaces of a namespaced kind).
    all_namespaces: String,
    item_ref: Value,
    list_ref: Value,
    /// The `namespace` path parameter of a namespaced kind.
    scope_params: Vec<Value>,
    pretty: Value,
}

impl<'a> ResourcePaths<'a> {
    fn new(info: &'a ResourceInfo, item: &str, list: &str) -> Self {
        let prefix = if info.group.is_empty() {
            format!("/api/{}", info.version)
        } else {
            format!("/apis/{}/{}", info.group, info.version)
        };
        let tag = if info.group.is_empty() {
            format!("core_{}", info.version)
        } else {
            format!(
                "{}_{}",
                info.group.split('.').next().unwrap_or(&info.group),
                info.version
            )
        };
        let ns_word = if info.namespaced { "Namespaced" } else { "" };
        let op = Op {
            info,
            tag,
            id_base: format!(
                "{}{}{ns_word}{}",
                camel(&info.group),
                camel(&info.version),
                camel(&info.kind)
            ),
        };
        let all_namespaces = format!("{prefix}/{}", info.plural);
        let collection = if info.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}", info.plural)
        } else {
            all_namespaces.clone()
        };
        let mut scope_params = vec![];
        if info.namespaced {
            scope_params.push(path_param(
                "namespace",
                "object name and auth scope, such as for teams and projects",
            ));
        }
        let pretty = query_param(
            "pretty",
            "If 'true', then the output is pretty printed. Defaults to 'false' unless the user-agent indicates a browser or command-line HTTP tool (curl and wget).",
            "string",
        );
        ResourcePaths {
            info,
            op,
            collection,
            all_namespaces,
            item_ref: reference(item),
            list_ref: reference(list),
            scope_params,
            pretty,
        }
    }

    fn body(schema: Value) -> Value {
        json!({"content": {"*/*": {"schema": schema}}, "required": true})
    }

    /// The collection: list, create, deletecollection.
    fn collection_path(&self) -> Value {
        let (info, op, item_ref) = (self.info, &self.op, &self.item_ref);
        let mut coll = Map::new();
        coll.insert(
            "get".into(),
            op.operation(
                "list",
                "list",
                "",
                json!({"description": format!("list or watch objects of kind {}", info.kind),
                       "parameters": list_params(),
                       "responses": {"200": ok_response(self.list_ref.clone())}}),
            ),
        );
        coll.insert(
            "post".into(),
            op.operation(
                "post",
                "create",
                "",
                json!({"description": format!("create a {}", info.kind),
                       "parameters": write_params(false),
                       "requestBody": Self::body(item_ref.clone()),
                       "responses": {"200": ok_response(item_ref.clone()), "201": {"description": "Created", "content": json_content(item_ref.clone())},
                                     "202": {"description": "Accepted", "content": json_content(item_ref.clone())}}}),
            ),
        );
        coll.insert(
            "delete".into(),
            op.operation(
                "deletecollection",
                "deleteCollection",
                "",
                json!({"description": format!("delete collection of {}", info.kind),
                       "parameters": list_params(),
                       "requestBody": {"content": {"*/*": {"schema": reference(DELETE_OPTIONS)}}},
                       "responses": {"200": ok_response(reference(STATUS))}}),
            ),
        );
        let mut pp = self.scope_params.clone();
        pp.push(self.pretty.clone());
        coll.insert("parameters".into(), Value::Array(pp));
        Value::Object(coll)
    }

    /// The object (`suffix` "") or its status (`suffix` "Status"): read, replace, patch,
    /// and delete for the object itself.
    fn object_path(&self, suffix: &str) -> Value {
        let (info, op, item_ref) = (self.info, &self.op, &self.item_ref);
        let what = if suffix.is_empty() {
            format!("the specified {}", info.kind)
        } else {
            format!("status of the specified {}", info.kind)
        };
        let mut obj = Map::new();
        obj.insert(
            "get".into(),
            op.operation(
                "get",
                "read",
                suffix,
                json!({"description": format!("read {what}"), "responses": {"200": ok_response(item_ref.clone())}}),
            ),
        );
        obj.insert(
            "put".into(),
            op.operation(
                "put",
                "replace",
                suffix,
                json!({"description": format!("replace {what}"),
                       "parameters": write_params(false),
                       "requestBody": Self::body(item_ref.clone()),
                       "responses": {"200": ok_response(item_ref.clone()), "201": {"description": "Created", "content": json_content(item_ref.clone())}}}),
            ),
        );
        obj.insert(
            "patch".into(),
            op.operation(
                "patch",
                "patch",
                suffix,
                json!({"description": format!("partially update {what}"),
                       "parameters": write_params(true),
                       "requestBody": {"content": patch_content(info), "required": true},
                       "responses": {"200": ok_response(item_ref.clone()), "201": {"description": "Created", "content": json_content(item_ref.clone())}}}),
            ),
        );
        if suffix.is_empty() {
            obj.insert(
                "delete".into(),
                op.operation(
                    "delete",
                    "delete",
                    suffix,
                    json!({"description": format!("delete {what}"),
                           "parameters": [
                               query_param("dryRun", "When present, indicates that modifications should not be persisted.", "string"),
                               query_param("gracePeriodSeconds", "The duration in seconds before the object should be deleted.", "integer"),
                               query_param("propagationPolicy", "Whether and how garbage collection will be performed: 'Orphan', 'Background' or 'Foreground'.", "string")
                           ],
                           "requestBody": {"content": {"*/*": {"schema": reference(DELETE_OPTIONS)}}},
                           "responses": {"200": ok_response(reference(STATUS)), "202": {"description": "Accepted", "content": json_content(reference(STATUS))}}}),
                ),
            );
        }
        let mut pp = vec![path_param("name", &format!("name of the {}", info.kind))];
        pp.extend(self.scope_params.clone());
        pp.push(self.pretty.clone());
        obj.insert("parameters".into(), Value::Array(pp));
        Value::Object(obj)
    }

    /// A namespaced kind listed across all namespaces.
    fn all_namespaces_path(&self) -> Value {
        let mut m = Map::new();
        m.insert(
            "get".into(),
            self.op.operation(
                "list",
                "list",
                "ForAllNamespaces",
                json!({"description": format!("list or watch objects of kind {}", self.info.kind),
                       "responses": {"200": ok_response(self.list_ref.clone())}}),
            ),
        );
        let mut pp = list_params();
        pp.push(self.pretty.clone());
        m.insert("parameters".into(), Value::Array(pp));
        Value::Object(m)
    }
}

/// Point every `$ref` at `#/components/schemas/...` (schemars may emit `#/$defs/...` or
/// `#/definitions/...` for nested definitions).
fn rewrite_refs(v: &mut Value) {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(r)) = m.get_mut("$ref") {
                for prefix in ["#/$defs/", "#/definitions/"] {
                    if let Some(rest) = r.strip_prefix(prefix) {
                        *r = format!("#/components/schemas/{rest}");
                    }
                }
            }
            for child in m.values_mut() {
                rewrite_refs(child);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(rewrite_refs),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn builtin(group: &str, kind: &str, plural: &str, namespaced: bool) -> ResourceInfo {
        ResourceInfo {
            group: group.into(),
            version: "v1".into(),
            kind: kind.into(),
            list_kind: format!("{kind}List"),
            plural: plural.into(),
            singular: kind.to_lowercase(),
            namespaced,
            short_names: vec![],
            categories: vec![],
            verbs: vec![],
            status_subresource: kind == "Pod",
            builtin: true,
            schema: None,
            printer_columns: vec![],
            storage: true,
        }
    }

    fn promise() -> ResourceInfo {
        ResourceInfo {
            group: "platform.kratix.io".into(),
            version: "v1alpha1".into(),
            kind: "Promise".into(),
            list_kind: "PromiseList".into(),
            plural: "promises".into(),
            singular: "promise".into(),
            namespaced: false,
            short_names: vec![],
            categories: vec!["kratix".into()],
            verbs: vec![],
            status_subresource: true,
            builtin: false,
            schema: Some(json!({"type": "object", "properties": {
                "spec": {"type": "object", "description": "PromiseSpec defines the desired state of Promise",
                         "properties": {"api": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
                "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}})),
            printer_columns: vec![],
            storage: true,
        }
    }

    fn all() -> Vec<ResourceInfo> {
        vec![
            builtin("", "ConfigMap", "configmaps", true),
            builtin("", "Namespace", "namespaces", false),
            builtin("", "Pod", "pods", true),
            builtin("batch", "Job", "jobs", true),
            promise(),
        ]
    }

    /// What kubectl's QueryParamVerifierV3 checks: some path's PATCH operation carries the
    /// GVK and a `fieldValidation` query parameter.
    fn supports_field_validation(doc: &Value, group: &str, version: &str, kind: &str) -> bool {
        doc["paths"].as_object().unwrap().values().any(|p| {
            let op = &p["patch"];
            op["x-kubernetes-group-version-kind"]
                == json!({"group": group, "version": version, "kind": kind})
                && op["parameters"].as_array().is_some_and(|ps| {
                    ps.iter()
                        .any(|q| q["name"] == "fieldValidation" && q["in"] == "query")
                })
        })
    }

    fn resolve<'a>(doc: &'a Value, r: &str) -> &'a Value {
        let name = r
            .strip_prefix("#/components/schemas/")
            .expect("components ref");
        doc["components"]["schemas"]
            .get(name)
            .unwrap_or_else(|| panic!("dangling ref {r}"))
    }

    fn all_refs(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(r)) = m.get("$ref") {
                    out.push(r.clone());
                }
                m.values().for_each(|c| all_refs(c, out));
            }
            Value::Array(a) => a.iter().for_each(|c| all_refs(c, out)),
            _ => {}
        }
    }

    #[test]
    fn index_lists_every_group_version_with_stable_hashes() {
        let idx = v3_index(&all());
        let paths = idx["paths"].as_object().unwrap();
        let keys: Vec<&String> = paths.keys().collect();
        assert_eq!(
            keys,
            [
                "api/v1",
                "apis/batch/v1",
                "apis/platform.kratix.io/v1alpha1"
            ]
        );
        let url = paths["apis/platform.kratix.io/v1alpha1"]["serverRelativeURL"]
            .as_str()
            .unwrap();
        assert!(url.starts_with("/openapi/v3/apis/platform.kratix.io/v1alpha1?hash="));
        assert_eq!(v3_index(&all()), idx, "deterministic");
        let mut changed = all();
        changed[4].schema = Some(json!({"type": "object"}));
        let idx2 = v3_index(&changed);
        assert_ne!(
            idx2["paths"]["apis/platform.kratix.io/v1alpha1"],
            idx["paths"]["apis/platform.kratix.io/v1alpha1"]
        );
        assert_eq!(idx2["paths"]["api/v1"], idx["paths"]["api/v1"]);
    }

    #[test]
    fn documents_declare_field_validation_for_every_kind() {
        let res = all();
        let core = v3_group_version(&res, "", "v1").unwrap();
        assert_eq!(core["openapi"], "3.0.0");
        for kind in ["ConfigMap", "Namespace", "Pod"] {
            assert!(supports_field_validation(&core, "", "v1", kind), "{kind}");
        }
        let batch = v3_group_version(&res, "batch", "v1").unwrap();
        assert!(supports_field_validation(&batch, "batch", "v1", "Job"));
        let kratix = v3_group_version(&res, "platform.kratix.io", "v1alpha1").unwrap();
        assert!(supports_field_validation(
            &kratix,
            "platform.kratix.io",
            "v1alpha1",
            "Promise"
        ));
        assert!(v3_group_version(&res, "apps", "v1").is_none());

        assert!(
            core["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["patch"].is_object()
        );
        assert!(core["paths"]["/api/v1/namespaces/{name}"]["put"].is_object());
        assert!(
            core["paths"]["/api/v1/namespaces/{namespace}/pods/{name}/status"]["patch"].is_object()
        );
        assert!(
            kratix["paths"]["/apis/platform.kratix.io/v1alpha1/promises/{name}/status"]["get"]
                .is_object()
        );
        assert!(kratix["paths"]["/apis/platform.kratix.io/v1alpha1/promises"]["post"].is_object());

        // kubectl apply uses strategic merge patch only where the PATCH operation offers it.
        let smp = "application/strategic-merge-patch+json";
        let cm_patch = &core["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["patch"];
        assert!(cm_patch["requestBody"]["content"][smp].is_object());
        let p_patch =
            &kratix["paths"]["/apis/platform.kratix.io/v1alpha1/promises/{name}"]["patch"];
        assert!(p_patch["requestBody"]["content"].get(smp).is_none());
        assert!(p_patch["requestBody"]["content"]["application/merge-patch+json"].is_object());
    }

    #[test]
    fn built_in_schemas_carry_kubernetes_patch_tags() {
        let res = crate::registry::builtins();
        let apps = v3_group_version(&res, "apps", "v1").unwrap();
        let schema = |n: &str| apps["components"]["schemas"][n].clone();
        let volumes = &schema("io.k8s.api.core.v1.PodSpec")["properties"]["volumes"];
        assert_eq!(volumes["x-kubernetes-patch-strategy"], "merge,retainKeys");
        assert_eq!(volumes["x-kubernetes-patch-merge-key"], "name");
        let strategy = &schema("io.k8s.api.apps.v1.DeploymentSpec")["properties"]["strategy"];
        assert_eq!(strategy["x-kubernetes-patch-strategy"], "retainKeys");
        let ports = &schema("io.k8s.api.core.v1.Container")["properties"]["ports"];
        assert_eq!(ports["x-kubernetes-patch-merge-key"], "containerPort");
        let conditions = &schema("io.k8s.api.apps.v1.DeploymentStatus")["properties"]["conditions"];
        assert_eq!(conditions["x-kubernetes-patch-merge-key"], "type");
        let core = v3_group_version(&res, "", "v1").unwrap();
        let ports =
            &core["components"]["schemas"]["io.k8s.api.core.v1.ServiceSpec"]["properties"]["ports"];
        assert_eq!(ports["x-kubernetes-patch-merge-key"], "port");
    }

    #[test]
    fn schemas_are_named_like_kubernetes_and_refs_resolve() {
        let res = all();
        for (g, v) in [
            ("", "v1"),
            ("batch", "v1"),
            ("platform.kratix.io", "v1alpha1"),
        ] {
            let doc = v3_group_version(&res, g, v).unwrap();
            let mut refs = Vec::new();
            all_refs(&doc, &mut refs);
            assert!(!refs.is_empty());
            for r in &refs {
                resolve(&doc, r);
            }
        }
        let core = v3_group_version(&res, "", "v1").unwrap();
        let schemas = &core["components"]["schemas"];
        let cm = &schemas["io.k8s.api.core.v1.ConfigMap"];
        assert_eq!(
            cm["x-kubernetes-group-version-kind"],
            json!([{"group": "", "kind": "ConfigMap", "version": "v1"}])
        );
        assert!(cm["properties"]["data"].is_object());
        assert!(schemas[OBJECT_META]["properties"]["name"].is_object());
        assert_eq!(
            schemas["io.k8s.api.core.v1.ConfigMapList"]["x-kubernetes-group-version-kind"][0]["kind"],
            "ConfigMapList"
        );

        let kratix = v3_group_version(&res, "platform.kratix.io", "v1alpha1").unwrap();
        let p = &kratix["components"]["schemas"]["io.kratix.platform.v1alpha1.Promise"];
        assert_eq!(
            p["x-kubernetes-group-version-kind"],
            json!([{"group": "platform.kratix.io", "kind": "Promise", "version": "v1alpha1"}])
        );
        assert_eq!(
            p["properties"]["metadata"]["allOf"][0]["$ref"],
            format!("#/components/schemas/{OBJECT_META}")
        );
        assert_eq!(
            p["properties"]["spec"]["description"],
            "PromiseSpec defines the desired state of Promise"
        );
        assert!(
            kratix["components"]["schemas"]["io.kratix.platform.v1alpha1.PromiseList"].is_object()
        );
    }
}
