//! Kind-specific create/update rules of the built-in kinds (what Kubernetes' registry
//! strategies do): the published defaults (`defaults`), container and volume names and
//! mount sub-paths of every Pod spec, Namespace phase and finalizers, Secret `stringData`,
//! Pod initial
//! status, Job selector and Pod template labels, Event timestamps and count, webhook
//! configurations (`webhook::configuration_causes`), Kratix's defaulting (before the schema)
//! and validation (after it, in [`validate`]), and
//! CustomResourceDefinition validation, status and registration.

use serde_json::{Value, json};

use crate::app::{App, meta, meta_str};
use crate::error::ApiError;
use crate::registry::{crd_infos, rkey};
use crate::resource::{Cause, ResourceInfo};
use crate::store::WriteOp;
use crate::timestamp::now;

fn is(info: &ResourceInfo, group: &str, plural: &str) -> bool {
    info.builtin && info.group == group && info.plural == plural
}

fn invalid(info: &ResourceInfo, obj: &Value, field: &str, reason: &str, msg: String) -> ApiError {
    ApiError::invalid(
        info,
        meta_str(obj, "name").unwrap_or_default(),
        vec![Cause {
            reason: reason.into(),
            message: msg,
            field: field.into(),
        }],
    )
}

/// Applies kind rules to a proposed object (`old` is None on create).
pub(crate) async fn prepare(
    app: &App,
    info: &ResourceInfo,
    obj: &mut Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    decode_as_typed(info, obj)?;
    crate::defaults::apply(info, obj);
    refuse(info, obj, pod_spec_causes(info, obj))?;
    refuse(info, obj, crate::rbac_validation::causes(info, obj, old))?;
    kind_rules(app, info, obj, old)
}

/// A built-in kind's object must decode as its Kubernetes type: a wrong field type is
/// refused as kube-apiserver's decoder would, naming the field.
fn decode_as_typed(info: &ResourceInfo, obj: &Value) -> Result<(), ApiError> {
    let Err(e) = crate::registry::decode_builtin(info, obj) else {
        return Ok(());
    };
    let msg = e.to_string();
    let field = msg.split(':').next().unwrap_or_default().to_string();
    Err(invalid(
        info,
        obj,
        &field,
        "FieldValueTypeInvalid",
        format!("Invalid value: {msg}"),
    ))
}

/// Container and volume name and mount sub-path problems of the object's Pod spec (a
/// Pod's own, or a workload's template), with fields under the spec's path.
fn pod_spec_causes(info: &ResourceInfo, obj: &Value) -> Vec<Cause> {
    let Some(ptr) = crate::defaults::pod_spec_pointer(info) else {
        return Vec::new();
    };
    let Some(pod) = obj.pointer(ptr) else {
        return Vec::new();
    };
    let field = ptr.trim_start_matches('/').replace('/', ".");
    let mut causes = crate::validation::container_name_causes(pod, &field);
    causes.extend(crate::validation::volume_name_causes(pod, &field));
    causes.extend(crate::validation::sub_path_causes(pod, &field));
    causes
}

/// Refuses the object with kube-apiserver's 422 when there is any cause.
fn refuse(info: &ResourceInfo, obj: &Value, causes: Vec<Cause>) -> Result<(), ApiError> {
    if causes.is_empty() {
        return Ok(());
    }
    Err(ApiError::invalid(
        info,
        meta_str(obj, "name").unwrap_or_default(),
        causes,
    ))
}

/// The rules of one kind: its defaults, status on create and its own validation.
fn kind_rules(
    app: &App,
    info: &ResourceInfo,
    obj: &mut Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    if is(info, "", "namespaces") {
        if obj.pointer("/spec/finalizers").is_none() {
            obj["spec"] = json!({"finalizers": ["kubernetes"]});
        }
        if old.is_none() {
            obj["status"] = json!({"phase": "Active"});
        }
        label_namespace_name(obj);
    } else if crate::webhook::is_configuration(info) {
        refuse(info, obj, crate::webhook::configuration_causes(info, obj))?;
    } else if is(info, "", "secrets") {
        secret_string_data(info, obj)?;
        refuse(info, obj, data_size_causes(obj, true))?;
    } else if is(info, "", "configmaps") {
        refuse(info, obj, data_size_causes(obj, false))?;
    } else if is(info, "", "pods") {
        if old.is_none() {
            obj["status"] = json!({"phase": "Pending"});
        }
    } else if is(info, "batch", "jobs") {
        if old.is_none() {
            default_job_selector(obj);
        }
    } else if crate::csr::is_csr(info) {
        if let Some(old) = old {
            crate::csr::keep_spec(obj, old);
        }
        refuse(info, obj, crate::csr::causes(obj))?;
    } else if crate::hpa::is_hpa(info) {
        if info.version == "v1" {
            crate::hpa::default_v1(obj);
        } else {
            crate::hpa::default_v2(obj);
        }
        refuse(info, obj, crate::hpa::causes(obj))?;
    } else if is(info, "", "events") || is(info, "events.k8s.io", "events") {
        event_timestamps(info, obj);
    } else if is(info, "apiextensions.k8s.io", "customresourcedefinitions") {
        prepare_crd(info, obj, old)?;
    } else if kratix_admitted(app, info) {
        // Where kube-apiserver calls Kratix's mutating webhook: before the CRD schema, so
        // the defaults are checked with the rest.
        crate::admission::default(&info.kind, obj);
    }
    Ok(())
}

/// Whether the embedded server admits `info`'s objects by Kratix's rules itself.
fn kratix_admitted(app: &App, info: &ResourceInfo) -> bool {
    info.group == plinth_api::GROUP && app.builtin_admission && crate::kratix::admits(info)
}

/// Kind rules checked after the CRD schema passed (`obj` is final but for what the
/// validating webhooks may still refuse): Kratix's validation.
pub(crate) async fn validate(
    app: &App,
    info: &ResourceInfo,
    obj: &Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    if kratix_admitted(app, info) {
        crate::kratix::validate(app, info, obj, old).await?;
    }
    Ok(())
}

/// The label kube-apiserver keeps on every Namespace: its own name, so selectors (a
/// webhook's `namespaceSelector`, a NetworkPolicy's) can pick a namespace by name.
const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Sets [`NAMESPACE_NAME_LABEL`] to the Namespace's name on every write, as
/// kube-apiserver's `NamespaceDefaultLabelName` does (a client cannot change it).
fn label_namespace_name(obj: &mut Value) {
    let name = meta_str(obj, "name").unwrap_or_default().to_string();
    if name.is_empty() {
        return;
    }
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let labels = meta.entry("labels").or_insert_with(|| json!({}));
    if !labels.is_object() {
        *labels = json!({});
    }
    labels[NAMESPACE_NAME_LABEL] = Value::String(name);
}

/// Kubernetes' Job defaulting on create: unless `spec.manualSelector` is true, the
/// selector is `batch.kubernetes.io/controller-uid=<uid>` and the Pod template gets the
/// labels `batch.kubernetes.io/controller-uid`, `controller-uid`,
/// `batch.kubernetes.io/job-name` and `job-name`, so a Job selects only its own Pods
/// (`kubectl logs job/NAME`, `kubectl get pods -l job-name=NAME`).
fn default_job_selector(obj: &mut Value) {
    if obj.pointer("/spec/manualSelector") == Some(&json!(true)) {
        return;
    }
    let uid = meta_str(obj, "uid").unwrap_or_default().to_string();
    let name = meta_str(obj, "name").unwrap_or_default().to_string();
    let Some(spec) = obj.get_mut("spec").and_then(|s| s.as_object_mut()) else {
        return;
    };
    if spec.get("selector").is_none_or(|s| s.is_null()) {
        spec.insert(
            "selector".into(),
            json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}),
        );
    }
    let template = spec.entry("template").or_insert_with(|| json!({}));
    if !template.is_object() {
        return;
    }
    let metadata = template
        .as_object_mut()
        .expect("object")
        .entry("metadata")
        .or_insert_with(|| json!({}));
    if !metadata.is_object() {
        return;
    }
    let labels = metadata
        .as_object_mut()
        .expect("object")
        .entry("labels")
        .or_insert_with(|| json!({}));
    if let Some(l) = labels.as_object_mut() {
        for (k, v) in [
            ("batch.kubernetes.io/controller-uid", &uid),
            ("controller-uid", &uid),
            ("batch.kubernetes.io/job-name", &name),
            ("job-name", &name),
        ] {
            l.insert(k.into(), json!(v));
        }
    } else {
        *labels = json!({
            "batch.kubernetes.io/controller-uid": uid,
            "controller-uid": uid,
            "batch.kubernetes.io/job-name": name,
            "job-name": name,
        });
    }
}

/// Fills an Event's first/last timestamps and count when a client sent only `eventTime`
/// (and `series`), as the events.k8s.io recorders do, so every Event sorts by
/// `.lastTimestamp` and shows its count (`kubectl get events`). Values a client set are
/// kept, except that a newer `series.lastObservedTime` or a higher `series.count` wins.
fn event_timestamps(info: &ResourceInfo, obj: &mut Value) {
    let core = info.group.is_empty();
    let (first_f, last_f, count_f) = if core {
        ("firstTimestamp", "lastTimestamp", "count")
    } else {
        (
            "deprecatedFirstTimestamp",
            "deprecatedLastTimestamp",
            "deprecatedCount",
        )
    };
    let seconds = |v: &Value| -> Option<String> {
        let s = v.as_str()?;
        let t: jiff::Timestamp = s.parse().ok()?;
        Some(
            jiff::Timestamp::from_second(t.as_second())
                .ok()?
                .to_string(),
        )
    };
    let event_time = obj.get("eventTime").and_then(seconds);
    let series_last = obj.pointer("/series/lastObservedTime").and_then(seconds);
    let series_count = obj.pointer("/series/count").and_then(|c| c.as_i64());
    let Some(m) = obj.as_object_mut() else {
        return;
    };
    let unset = |m: &serde_json::Map<String, Value>, f: &str| m.get(f).is_none_or(|v| v.is_null());
    let base = event_time.clone().unwrap_or_else(now);
    if unset(m, first_f) {
        m.insert(first_f.into(), json!(base));
    }
    let newer = |m: &serde_json::Map<String, Value>, t: &str| {
        m.get(last_f)
            .and_then(seconds)
            .is_none_or(|last| last.as_str() < t)
    };
    if let Some(t) = series_last.filter(|t| newer(m, t)) {
        m.insert(last_f.into(), json!(t));
    } else if unset(m, last_f) {
        let first = m.get(first_f).cloned().unwrap_or(json!(base));
        m.insert(last_f.into(), first);
    }
    let count = m.get(count_f).and_then(|c| c.as_i64()).unwrap_or(0);
    let count = count.max(series_count.unwrap_or(1)).max(1);
    m.insert(count_f.into(), json!(count));
}

/// The most a ConfigMap's or Secret's data may hold, as kube-apiserver allows: 1 MiB of
/// values (a Secret's decoded, a ConfigMap's `data` and `binaryData` together).
const MAX_DATA_BYTES: u64 = 1024 * 1024;

/// `data: Too long` when the object's values exceed [`MAX_DATA_BYTES`]. Base64 values (a
/// Secret's `data`, a ConfigMap's `binaryData`) count as the bytes they decode to.
fn data_size_causes(obj: &Value, secret: bool) -> Vec<Cause> {
    let decoded = |s: &str| {
        let padding = s.bytes().rev().take_while(|b| *b == b'=').count();
        (s.len() / 4 * 3).saturating_sub(padding) as u64
    };
    let sum = |field: &str, base64: bool| -> u64 {
        obj.get(field)
            .and_then(Value::as_object)
            .map(|m| {
                m.values()
                    .filter_map(Value::as_str)
                    .map(|v| if base64 { decoded(v) } else { v.len() as u64 })
                    .sum()
            })
            .unwrap_or(0)
    };
    let total = if secret {
        sum("data", true)
    } else {
        sum("data", false) + sum("binaryData", true)
    };
    if total > MAX_DATA_BYTES {
        vec![crate::schema::messages::too_long("data", MAX_DATA_BYTES)]
    } else {
        Vec::new()
    }
}

fn secret_string_data(info: &ResourceInfo, obj: &mut Value) -> Result<(), ApiError> {
    use base64::Engine;
    if obj.get("type").is_none_or(|t| t.is_null()) {
        obj["type"] = json!("Opaque");
    }
    if let Some(sd) = obj.as_object_mut().and_then(|m| m.remove("stringData")) {
        let Some(sd) = sd.as_object() else {
            return Err(invalid(
                info,
                obj,
                "stringData",
                "FieldValueTypeInvalid",
                "Invalid value: must be a map of strings".into(),
            ));
        };
        if !obj.get("data").is_some_and(|d| d.is_object()) {
            obj["data"] = json!({});
        }
        for (k, v) in sd {
            let Some(s) = v.as_str() else {
                return Err(invalid(
                    info,
                    obj,
                    &format!("stringData[{k}]"),
                    "FieldValueTypeInvalid",
                    "Invalid value: must be a string".into(),
                ));
            };
            obj["data"][k] = json!(base64::engine::general_purpose::STANDARD.encode(s));
        }
    }
    if let Some(d) = obj.get("data").and_then(|d| d.as_object()) {
        for (k, v) in d {
            let ok = v
                .as_str()
                .is_some_and(|s| base64::engine::general_purpose::STANDARD.decode(s).is_ok());
            if !ok {
                return Err(invalid(
                    info,
                    obj,
                    &format!("data[{k}]"),
                    "FieldValueInvalid",
                    "Invalid value: must be base64-encoded bytes".into(),
                ));
            }
        }
    }
    Ok(())
}

/// Admission of a CustomResourceDefinition: structural schema, reserved groups, name
/// `<plural>.<group>`, exactly one storage version, at least one served version,
/// immutable group and scope; then the status the server fills at once.
fn prepare_crd(info: &ResourceInfo, obj: &mut Value, old: Option<&Value>) -> Result<(), ApiError> {
    let name = meta_str(obj, "name").unwrap_or_default().to_string();
    crate::schema::check_crd(obj).map_err(|c| ApiError::invalid(info, &name, c))?;
    let reserved = crate::reserved::crd_causes(obj, "");
    if !reserved.is_empty() {
        return Err(ApiError::invalid(info, &name, reserved));
    }
    let infos = crd_infos(obj)
        .map_err(|e| invalid(info, obj, "spec", "FieldValueInvalid", e.to_string()))?;
    check_crd_name(info, obj, &name)?;
    let storage = crd_storage_version(info, obj)?;
    if infos.is_empty() {
        return Err(invalid(
            info,
            obj,
            "spec.versions",
            "FieldValueInvalid",
            "Invalid value: must have at least one served version".into(),
        ));
    }
    if let Some(old) = old {
        check_crd_immutable(info, old, obj)?;
    }
    obj["status"] = crd_status(obj, old, &storage);
    Ok(())
}

/// A CRD's name is `spec.names.plural + "." + spec.group` (422 otherwise).
fn check_crd_name(info: &ResourceInfo, obj: &Value, name: &str) -> Result<(), ApiError> {
    let field = |p: &str| obj.pointer(p).and_then(|g| g.as_str()).unwrap_or_default();
    let (group, plural) = (field("/spec/group"), field("/spec/names/plural"));
    if name != format!("{plural}.{group}") {
        return Err(invalid(
            info,
            obj,
            "metadata.name",
            "FieldValueInvalid",
            format!("Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    Ok(())
}

/// The one version marked `storage: true` (422 unless there is exactly one).
fn crd_storage_version(info: &ResourceInfo, obj: &Value) -> Result<String, ApiError> {
    let versions = obj
        .pointer("/spec/versions")
        .and_then(|v| v.as_array())
        .cloned()
        .unwrap_or_default();
    let storage: Vec<String> = versions
        .iter()
        .filter(|v| v.get("storage").and_then(|s| s.as_bool()) == Some(true))
        .filter_map(|v| v.get("name").and_then(|n| n.as_str()).map(String::from))
        .collect();
    if storage.len() != 1 {
        return Err(invalid(
            info,
            obj,
            "spec.versions",
            "FieldValueInvalid",
            format!(
                "Invalid value: must have exactly one version marked as storage version, found {}",
                storage.len()
            ),
        ));
    }
    Ok(storage[0].clone())
}

/// `spec.group` and `spec.scope` never change (422).
fn check_crd_immutable(info: &ResourceInfo, old: &Value, obj: &Value) -> Result<(), ApiError> {
    for f in ["group", "scope"] {
        let (a, b) = (
            old.pointer(&format!("/spec/{f}")),
            obj.pointer(&format!("/spec/{f}")),
        );
        if a != b {
            return Err(invalid(
                info,
                obj,
                &format!("spec.{f}"),
                "FieldValueInvalid",
                "Invalid value: field is immutable".into(),
            ));
        }
    }
    Ok(())
}

/// A CRD's status: names accepted and established at once (no asynchronous controller),
/// transition times kept from the old status, the storage version added to
/// `storedVersions`.
fn crd_status(obj: &Value, old: Option<&Value>, storage: &str) -> Value {
    let mut accepted = obj.pointer("/spec/names").cloned().unwrap_or(json!({}));
    let kind = accepted
        .get("kind")
        .and_then(|k| k.as_str())
        .unwrap_or_default()
        .to_string();
    if accepted.get("singular").is_none() {
        accepted["singular"] = json!(kind.to_lowercase());
    }
    if accepted.get("listKind").is_none() {
        accepted["listKind"] = json!(format!("{kind}List"));
    }
    let old_status = old
        .and_then(|o| o.get("status"))
        .cloned()
        .unwrap_or(json!({}));
    let ts = |t: &str| -> Value {
        old_status
            .get("conditions")
            .and_then(|c| c.as_array())
            .and_then(|a| a.iter().find(|c| c["type"] == t && c["status"] == "True"))
            .and_then(|c| c.get("lastTransitionTime").cloned())
            .unwrap_or_else(|| json!(now()))
    };
    let mut stored: Vec<String> = old_status
        .get("storedVersions")
        .and_then(|s| s.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    if !stored.iter().any(|s| s == storage) {
        stored.push(storage.to_string());
    }
    json!({
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": ts("NamesAccepted")},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": ts("Established")},
        ],
        "acceptedNames": accepted,
        "storedVersions": stored,
    })
}

/// Effects of a committed write (registration of CRDs).
pub(crate) async fn after_write(
    app: &App,
    info: &ResourceInfo,
    stored: &Value,
) -> Result<(), ApiError> {
    if is(info, "apiextensions.k8s.io", "customresourcedefinitions") {
        let name = meta_str(stored, "name").unwrap_or_default().to_string();
        let finalized = meta(stored)
            .get("deletionTimestamp")
            .is_some_and(|d| !d.is_null())
            && crate::app::finalizers(stored).is_empty();
        if finalized {
            remove_crd_resources(app, stored).await?;
            app.registry.unregister_crd(&name);
        } else {
            app.registry
                .register_crd(stored)
                .map_err(|e| ApiError::internal(format!("registering CRD {name}: {e}")))?;
        }
    }
    Ok(())
}

/// Deletes every custom resource of a CRD.
pub(crate) async fn remove_crd_resources(app: &App, crd: &Value) -> Result<(), ApiError> {
    let group = crd
        .pointer("/spec/group")
        .and_then(|g| g.as_str())
        .unwrap_or_default();
    let plural = crd
        .pointer("/spec/names/plural")
        .and_then(|g| g.as_str())
        .unwrap_or_default();
    if plural.is_empty() {
        return Ok(());
    }
    app.store
        .write(WriteOp::DeleteResource {
            rkey: rkey(group, plural),
        })
        .await?;
    Ok(())
}
