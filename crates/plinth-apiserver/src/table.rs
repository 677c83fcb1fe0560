//! Server-side `meta.k8s.io/v1` `Table` rendering — what `kubectl get` asks for with
//! `Accept: application/json;as=Table;v=v1;g=meta.k8s.io`.
//!
//! Custom resources get `Name` followed by their CRD `additionalPrinterColumns` (JSONPath
//! evaluated here), or `Name`, `Age` when the CRD defines no columns — as the
//! apiextensions API server does. Built-in kinds get the columns a real cluster prints
//! (Kubernetes `pkg/printers/internalversion`).

mod column;
pub mod jsonpath;
mod workloads;

use jiff::Timestamp;
use serde_json::{Map, Value, json};

use crate::resource::{PrinterColumn, ResourceInfo};
pub use column::human_duration;
use column::{
    AGE_DESC, Column, Source, age_column, age_of, builtin, count, join_containers, name_column,
};

/// Render objects of one resource as a `meta.k8s.io/v1` `Table`.
///
/// * `objects` — the objects (full JSON, as stored).
/// * `list_meta` — the table's `metadata` (`resourceVersion`, `continue`,
///   `remainingItemCount`); pass `{}` for a single object or a watch event.
/// * `include_object` — the `includeObject` query parameter: `None` (rows without
///   `object`), `Object` (the full object) or anything else, including the empty string
///   (the Kubernetes default, `Metadata`): a `meta.k8s.io/v1` `PartialObjectMetadata`.
///
/// Columns: `Name` (`format: name`) first, then the CRD's printer columns (`date` columns
/// render as ages like `5m`, `2d3h`; cells whose path finds nothing are `null`), or the
/// built-in columns of the kind. Columns with `priority > 0` are only shown by
/// `kubectl get -o wide`.
pub fn render(
    info: &ResourceInfo,
    objects: &[Value],
    list_meta: Value,
    include_object: &str,
) -> Value {
    table_of(&columns_for(info), objects, list_meta, include_object)
}

/// Render a `scale` subresource read or write (an `autoscaling/v1` Scale) as a `Table`, as
/// kube-apiserver does: a Scale has columns of its own whatever its parent's kind.
/// Built-in kinds get `Name`, `Desired`, `Available`, `Age` (the Scale printer of
/// `pkg/printers/internalversion`); custom resources get the apiextensions scale columns,
/// `Name`, `Desired` and `Available` when the CRD names their paths, and `Age` as a date.
/// The cells read the Scale itself (`spec.replicas`, `status.replicas`), not the parent.
pub fn render_scale(
    info: &ResourceInfo,
    paths: &crate::registry::ScalePaths,
    scale: &Value,
    include_object: &str,
) -> Value {
    table_of(
        &scale_columns(info, paths),
        std::slice::from_ref(scale),
        json!({}),
        include_object,
    )
}

fn table_of(
    columns: &[Column],
    objects: &[Value],
    list_meta: Value,
    include_object: &str,
) -> Value {
    let now = Timestamp::now();
    let rows: Vec<Value> = objects
        .iter()
        .map(|obj| {
            let cells: Vec<Value> = columns.iter().map(|c| cell(c, obj, now)).collect();
            let mut row = Map::new();
            row.insert("cells".into(), Value::Array(cells));
            match include_object {
                "None" => {}
                "Object" => {
                    row.insert("object".into(), obj.clone());
                }
                _ => {
                    row.insert(
                        "object".into(),
                        json!({
                            "kind": "PartialObjectMetadata",
                            "apiVersion": "meta.k8s.io/v1",
                            "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
                        }),
                    );
                }
            }
            Value::Object(row)
        })
        .collect();
    let defs: Vec<Value> = columns
        .iter()
        .map(|c| {
            json!({
                "name": c.name,
                "type": c.type_,
                "format": c.format,
                "description": c.description,
                "priority": c.priority,
            })
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": if list_meta.is_object() { list_meta } else { json!({}) },
        "columnDefinitions": defs,
        "rows": rows,
    })
}

const SCALE_DESIRED_DESC: &str =
    "replicas is the desired number of instances for the scaled object.";
const SCALE_AVAILABLE_DESC: &str =
    "replicas is the actual number of observed instances of the scaled object.";

fn created_at_column() -> Column {
    builtin("Created At", "date", 0, |o, _| {
        o.pointer("/metadata/creationTimestamp")
            .cloned()
            .unwrap_or(Value::Null)
    })
}

fn printer_column(pc: &PrinterColumn) -> Column {
    // Paths are validated when the CRD is admitted; an unparsable one yields empty cells.
    let steps = jsonpath::parse(&pc.json_path).unwrap_or_default();
    Column {
        name: pc.name.clone(),
        type_: pc.type_.clone(),
        format: pc.format.clone().unwrap_or_default(),
        description: pc.description.clone().unwrap_or_default(),
        priority: pc.priority,
        source: if steps.is_empty() {
            Source::Builtin(|_, _| Value::Null)
        } else {
            Source::Path(steps)
        },
    }
}

fn columns_for(info: &ResourceInfo) -> Vec<Column> {
    if !info.builtin {
        return custom_columns(info);
    }
    let mut cols = Vec::new();
    if info.kind == "Event" && matches!(info.group.as_str(), "" | "events.k8s.io") {
        event_columns(&mut cols);
        return cols;
    }
    cols.push(name_column(0));
    kind_columns(info.group.as_str(), info.kind.as_str(), &mut cols);
    cols
}

/// A custom resource's columns: `Name`, then its CRD's printer columns or `Age`.
fn custom_columns(info: &ResourceInfo) -> Vec<Column> {
    let mut cols = vec![name_column(0)];
    if info.printer_columns.is_empty() {
        let mut age = printer_column(&PrinterColumn {
            name: "Age".into(),
            type_: "date".into(),
            format: None,
            description: Some(AGE_DESC.into()),
            priority: 0,
            json_path: ".metadata.creationTimestamp".into(),
        });
        age.description = AGE_DESC.into();
        cols.push(age);
    } else {
        cols.extend(info.printer_columns.iter().map(printer_column));
    }
    cols
}

/// The columns of a Scale (see [`render_scale`]).
fn scale_columns(info: &ResourceInfo, paths: &crate::registry::ScalePaths) -> Vec<Column> {
    if info.builtin {
        let mut name = name_column(0);
        // The built-in Scale printer leaves the name column without `format: name`.
        name.format = String::new();
        let mut desired = builtin("Desired", "integer", 0, |o, _| int_at(o, "/spec/replicas"));
        desired.description = SCALE_DESIRED_DESC.into();
        let mut available = builtin("Available", "integer", 0, |o, _| {
            int_at(o, "/status/replicas")
        });
        available.description = SCALE_AVAILABLE_DESC.into();
        return vec![name, desired, available, age_column()];
    }
    let column = |name: &str, ty: &str, desc: &str, path: &str| {
        printer_column(&PrinterColumn {
            name: name.into(),
            type_: ty.into(),
            format: None,
            description: Some(desc.into()),
            priority: 0,
            json_path: path.into(),
        })
    };
    let mut cols = vec![name_column(0)];
    if !paths.spec_replicas.is_empty() {
        cols.push(column(
            "Desired",
            "integer",
            "Number of desired replicas",
            ".spec.replicas",
        ));
    }
    if !paths.status_replicas.is_empty() {
        cols.push(column(
            "Available",
            "integer",
            "Number of actual replicas",
            ".status.replicas",
        ));
    }
    cols.push(column(
        "Age",
        "date",
        AGE_DESC,
        ".metadata.creationTimestamp",
    ));
    cols
}

fn int_at(o: &Value, pointer: &str) -> Value {
    Value::from(o.pointer(pointer).and_then(Value::as_i64).unwrap_or(0))
}

/// An Event's columns, as kube-apiserver prints them (no `Name` first).
fn event_columns(cols: &mut Vec<Column>) {
    cols.push(builtin("Last Seen", "string", 0, event_last_seen));
    cols.push(builtin("Type", "string", 0, |o, _| str_at(o, "/type")));
    cols.push(builtin("Reason", "string", 0, |o, _| str_at(o, "/reason")));
    cols.push(builtin("Object", "string", 0, event_object));
    cols.push(builtin("Subobject", "string", 1, |o, _| {
        str_or_empty(o, "/involvedObject/fieldPath")
    }));
    cols.push(builtin("Source", "string", 1, event_source));
    cols.push(builtin("Message", "string", 0, |o, _| {
        let m = o
            .get("message")
            .or_else(|| o.get("note"))
            .and_then(Value::as_str)
            .unwrap_or("");
        Value::String(m.trim().to_string())
    }));
    cols.push(builtin("First Seen", "string", 1, |o, now| {
        Value::String(age_of(
            o.get("firstTimestamp")
                .filter(|v| !v.is_null())
                .or_else(|| o.get("eventTime")),
            now,
        ))
    }));
    cols.push(builtin("Count", "string", 1, |o, _| {
        let n = o
            .get("count")
            .or_else(|| o.pointer("/series/count"))
            .and_then(Value::as_i64)
            .unwrap_or(1);
        Value::String(n.to_string())
    }));
    cols.push(name_column(1));
}

/// The columns after `Name` of a built-in kind.
fn kind_columns(group: &str, kind: &str, cols: &mut Vec<Column>) {
    match (group, kind) {
        ("", "Namespace") => {
            cols.push(builtin("Status", "string", 0, |o, _| {
                str_or_empty(o, "/status/phase")
            }));
            cols.push(age_column());
        }
        ("", "ConfigMap") => {
            cols.push(builtin("Data", "integer", 0, |o, _| {
                Value::from(count(o, "/data") + count(o, "/binaryData"))
            }));
            cols.push(age_column());
        }
        ("", "Secret") => {
            cols.push(builtin("Type", "string", 0, |o, _| {
                str_or_empty(o, "/type")
            }));
            cols.push(builtin("Data", "integer", 0, |o, _| {
                Value::from(count(o, "/data"))
            }));
            cols.push(age_column());
        }
        ("", "ServiceAccount") => {
            cols.push(builtin("Secrets", "integer", 0, |o, _| {
                Value::from(count(o, "/secrets"))
            }));
            cols.push(age_column());
        }
        ("", "Pod") => {
            cols.push(builtin("Ready", "string", 0, pod_ready));
            cols.push(builtin("Status", "string", 0, pod_status));
            cols.push(builtin("Restarts", "string", 0, pod_restarts));
            cols.push(age_column());
            cols.push(builtin("IP", "string", 1, |o, _| {
                o.pointer("/status/podIP")
                    .cloned()
                    .unwrap_or(Value::from("<none>"))
            }));
            cols.push(builtin("Node", "string", 1, |o, _| {
                o.pointer("/spec/nodeName")
                    .cloned()
                    .unwrap_or(Value::from("<none>"))
            }));
        }
        ("batch", "Job") => {
            cols.push(builtin("Status", "string", 0, job_status));
            cols.push(builtin("Completions", "string", 0, job_completions));
            cols.push(builtin("Duration", "string", 0, job_duration));
            cols.push(age_column());
            cols.push(builtin("Containers", "string", 1, |o, _| {
                join_containers(o, "name")
            }));
            cols.push(builtin("Images", "string", 1, |o, _| {
                join_containers(o, "image")
            }));
        }
        ("rbac.authorization.k8s.io", "Role") | ("rbac.authorization.k8s.io", "ClusterRole") => {
            cols.push(created_at_column());
        }
        ("rbac.authorization.k8s.io", "RoleBinding")
        | ("rbac.authorization.k8s.io", "ClusterRoleBinding") => {
            cols.push(builtin("Role", "string", 0, |o, _| {
                let kind = o
                    .pointer("/roleRef/kind")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let name = o
                    .pointer("/roleRef/name")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                Value::String(format!("{kind}/{name}"))
            }));
            cols.push(age_column());
            cols.push(builtin("Users", "string", 1, |o, _| subjects(o, "User")));
            cols.push(builtin("Groups", "string", 1, |o, _| subjects(o, "Group")));
            cols.push(builtin("ServiceAccounts", "string", 1, |o, _| {
                subjects(o, "ServiceAccount")
            }));
        }
        ("coordination.k8s.io", "Lease") => {
            cols.push(builtin("Holder", "string", 0, |o, _| {
                str_or_empty(o, "/spec/holderIdentity")
            }));
            cols.push(age_column());
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            cols.push(created_at_column());
        }
        (group, kind) => {
            if !workloads::columns(group, kind, cols) {
                cols.push(age_column());
            }
        }
    }
}

fn cell(c: &Column, obj: &Value, now: Timestamp) -> Value {
    match &c.source {
        Source::Name => obj
            .pointer("/metadata/name")
            .cloned()
            .unwrap_or(Value::from("")),
        Source::Builtin(f) => f(obj, now),
        Source::Path(steps) => {
            let found = jsonpath::eval(steps, obj);
            let Some(v) = found.first() else {
                return Value::Null;
            };
            typed_cell(&c.type_, v, now)
        }
    }
}

/// Cell value for a CRD printer column of the given type (apiextensions tableconvertor).
fn typed_cell(ty: &str, v: &Value, now: Timestamp) -> Value {
    match ty {
        "date" => match v.as_str() {
            Some(s) => match s.parse::<Timestamp>() {
                Ok(t) => Value::String(human_duration(now.duration_since(t).as_secs())),
                Err(_) => Value::from("<invalid>"),
            },
            None => Value::Null,
        },
        "integer" => match v {
            Value::Number(n) => n
                .as_i64()
                .map(Value::from)
                .or_else(|| n.as_f64().map(|f| Value::from(f as i64)))
                .unwrap_or(Value::Null),
            _ => Value::Null,
        },
        "number" => match v {
            Value::Number(_) => v.clone(),
            _ => Value::Null,
        },
        "boolean" => match v {
            Value::Bool(_) => v.clone(),
            _ => Value::Null,
        },
        _ => match v {
            Value::String(s) => Value::String(s.clone()),
            Value::Null => Value::Null,
            other => Value::String(other.to_string()),
        },
    }
}

fn str_at(o: &Value, ptr: &str) -> Value {
    o.pointer(ptr).cloned().unwrap_or(Value::Null)
}

fn str_or_empty(o: &Value, ptr: &str) -> Value {
    Value::String(
        o.pointer(ptr)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
    )
}

fn subjects(o: &Value, kind: &str) -> Value {
    let names: Vec<String> = o
        .get("subjects")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter(|s| s.get("kind").and_then(Value::as_str) == Some(kind))
                .map(|s| {
                    let n = s.get("name").and_then(Value::as_str).unwrap_or("");
                    match (kind, s.get("namespace").and_then(Value::as_str)) {
                        ("ServiceAccount", Some(ns)) => format!("{ns}/{n}"),
                        _ => n.to_string(),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    Value::String(names.join(", "))
}

fn event_last_seen(o: &Value, now: Timestamp) -> Value {
    let ts = [
        "/series/lastObservedTime",
        "/lastTimestamp",
        "/eventTime",
        "/deprecatedLastTimestamp",
    ]
    .iter()
    .filter_map(|p| o.pointer(p))
    .find(|v| v.as_str().is_some_and(|s| !s.is_empty()));
    let ts = ts.or_else(|| o.pointer("/metadata/creationTimestamp"));
    Value::String(age_of(ts, now))
}

fn event_object(o: &Value, _: Timestamp) -> Value {
    let r = o.get("involvedObject").or_else(|| o.get("regarding"));
    let kind = r
        .and_then(|r| r.get("kind"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_lowercase();
    let name = r
        .and_then(|r| r.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("");
    Value::String(format!("{kind}/{name}"))
}

fn event_source(o: &Value, _: Timestamp) -> Value {
    let comp = o
        .pointer("/source/component")
        .or_else(|| o.get("reportingController"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let host = o.pointer("/source/host").and_then(Value::as_str);
    Value::String(match host {
        Some(h) if !h.is_empty() => format!("{comp}, {h}"),
        _ => comp.to_string(),
    })
}

fn pod_ready(o: &Value, _: Timestamp) -> Value {
    let total = count(o, "/spec/containers");
    let ready = o
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter(|c| c.get("ready").and_then(Value::as_bool) == Some(true))
                .count()
        })
        .unwrap_or(0);
    Value::String(format!("{ready}/{total}"))
}

/// The Pod `STATUS` column, following kubectl's printer: the reason of a waiting or
/// terminated container wins over the phase; init containers show `Init:<reason>` or
/// `Init:<done>/<total>`; a deleting pod shows `Terminating`.
fn pod_status(o: &Value, _: Timestamp) -> Value {
    let mut reason = o
        .pointer("/status/reason")
        .or_else(|| o.pointer("/status/phase"))
        .and_then(Value::as_str)
        .unwrap_or("Pending")
        .to_string();
    let inits = o
        .pointer("/status/initContainerStatuses")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let total_init = count(o, "/spec/initContainers");
    let mut initializing = false;
    for (i, c) in inits.iter().enumerate() {
        if let Some(t) = c.pointer("/state/terminated") {
            if t.get("exitCode").and_then(Value::as_i64) == Some(0) {
                continue;
            }
            reason = match t.get("reason").and_then(Value::as_str) {
                Some(r) if !r.is_empty() => format!("Init:{r}"),
                _ => match t.get("signal").and_then(Value::as_i64) {
                    Some(s) if s != 0 => format!("Init:Signal:{s}"),
                    _ => format!(
                        "Init:ExitCode:{}",
                        t.get("exitCode").and_then(Value::as_i64).unwrap_or(0)
                    ),
                },
            };
            initializing = true;
        } else if let Some(r) = c
            .pointer("/state/waiting/reason")
            .and_then(Value::as_str)
            .filter(|r| !r.is_empty() && *r != "PodInitializing")
        {
            reason = format!("Init:{r}");
            initializing = true;
        } else {
            reason = format!("Init:{i}/{total_init}");
            initializing = true;
        }
        break;
    }
    if !initializing {
        let statuses = o
            .pointer("/status/containerStatuses")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut has_running = false;
        for c in statuses.iter().rev() {
            if let Some(r) = c.pointer("/state/waiting/reason").and_then(Value::as_str) {
                if !r.is_empty() {
                    reason = r.to_string();
                }
            } else if let Some(t) = c.pointer("/state/terminated") {
                reason = match t.get("reason").and_then(Value::as_str) {
                    Some(r) if !r.is_empty() => r.to_string(),
                    _ => match t.get("signal").and_then(Value::as_i64) {
                        Some(s) if s != 0 => format!("Signal:{s}"),
                        _ => format!(
                            "ExitCode:{}",
                            t.get("exitCode").and_then(Value::as_i64).unwrap_or(0)
                        ),
                    },
                };
            } else if c.pointer("/state/running").is_some()
                && c.get("ready").and_then(Value::as_bool) == Some(true)
            {
                has_running = true;
            }
        }
        if reason == "Completed" && has_running {
            reason = "Running".into();
        }
    }
    if o.pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
    {
        reason = "Terminating".into();
    }
    Value::String(reason)
}

fn pod_restarts(o: &Value, now: Timestamp) -> Value {
    let statuses = o
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut restarts = 0;
    let mut last: Option<Timestamp> = None;
    for c in &statuses {
        restarts += c.get("restartCount").and_then(Value::as_i64).unwrap_or(0);
        if let Some(t) = c
            .pointer("/lastState/terminated/finishedAt")
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<Timestamp>().ok())
            && last.is_none_or(|l| t > l)
        {
            last = Some(t);
        }
    }
    Value::String(match last {
        Some(t) if restarts > 0 => format!(
            "{restarts} ({} ago)",
            human_duration(now.duration_since(t).as_secs())
        ),
        _ => restarts.to_string(),
    })
}

fn condition_true(o: &Value, ty: &str) -> bool {
    o.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some(ty)
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        })
}

fn job_status(o: &Value, _: Timestamp) -> Value {
    let s = if condition_true(o, "Complete") {
        "Complete"
    } else if condition_true(o, "Failed") {
        "Failed"
    } else if o
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
    {
        "Terminating"
    } else if condition_true(o, "SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else if condition_true(o, "FailureTarget") {
        "FailureTarget"
    } else if condition_true(o, "Suspended") {
        "Suspended"
    } else {
        "Running"
    };
    Value::from(s)
}

fn job_completions(o: &Value, _: Timestamp) -> Value {
    let succeeded = o
        .pointer("/status/succeeded")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let completions = o.pointer("/spec/completions").and_then(Value::as_i64);
    let parallelism = o.pointer("/spec/parallelism").and_then(Value::as_i64);
    Value::String(match completions {
        Some(c) => format!("{succeeded}/{c}"),
        None => match parallelism {
            Some(p) if p > 1 => format!("{succeeded}/1 of {p}"),
            _ => format!("{succeeded}/1"),
        },
    })
}

fn job_duration(o: &Value, now: Timestamp) -> Value {
    let ts = |p: &str| {
        o.pointer(p)
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<Timestamp>().ok())
    };
    let Some(start) = ts("/status/startTime") else {
        return Value::from("");
    };
    let end = ts("/status/completionTime").unwrap_or(now);
    Value::String(human_duration(end.duration_since(start).as_secs()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(group: &str, kind: &str, builtin: bool, cols: Vec<PrinterColumn>) -> ResourceInfo {
        ResourceInfo {
            group: group.into(),
            version: "v1".into(),
            kind: kind.into(),
            list_kind: format!("{kind}List"),
            plural: format!("{}s", kind.to_lowercase()),
            singular: kind.to_lowercase(),
            namespaced: true,
            short_names: vec![],
            categories: vec![],
            verbs: vec![],
            status_subresource: false,
            builtin,
            schema: None,
            printer_columns: cols,
            storage: true,
        }
    }

    fn ago(secs: i64) -> String {
        let t = Timestamp::now() - jiff::SignedDuration::from_secs(secs);
        t.to_string()
    }

    fn col(name: &str, ty: &str, path: &str) -> PrinterColumn {
        PrinterColumn {
            name: name.into(),
            type_: ty.into(),
            format: None,
            description: None,
            priority: 0,
            json_path: path.into(),
        }
    }

    #[test]
    fn human_durations_match_kubectl() {
        let cases = [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (59, "59s"),
            (119, "119s"),
            (120, "2m"),
            (330, "5m30s"),
            (600, "10m"),
            (179 * 60, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 10 * 60, "3h10m"),
            (8 * 3600, "8h"),
            (47 * 3600, "47h"),
            (2 * 86400, "2d"),
            (2 * 86400 + 3 * 3600, "2d3h"),
            (30 * 86400, "30d"),
            (2 * 365 * 86400, "2y"),
            (2 * 365 * 86400 + 20 * 86400, "2y20d"),
            (9 * 365 * 86400, "9y"),
        ];
        for (s, want) in cases {
            assert_eq!(human_duration(s), want, "{s}s");
        }
    }

    #[test]
    fn crd_printer_columns_and_objects() {
        let i = info(
            "marketplace.kratix.io",
            "redis",
            false,
            vec![
                col("Message", "string", ".status.message"),
                col(
                    "Status",
                    "string",
                    r#".status.conditions[?(@.type=="Reconciled")].message"#,
                ),
                col("Replicas", "integer", ".spec.replicas"),
                col("Created", "date", ".metadata.creationTimestamp"),
            ],
        );
        let obj = json!({
            "apiVersion": "marketplace.kratix.io/v1alpha1", "kind": "redis",
            "metadata": {"name": "example", "namespace": "default", "creationTimestamp": ago(330)},
            "spec": {"replicas": 3.0},
            "status": {"message": "Resource requested", "conditions": [
                {"type": "Reconciled", "status": "True", "message": "Reconciled"}]}
        });
        let t = render(
            &i,
            std::slice::from_ref(&obj),
            json!({"resourceVersion": "7"}),
            "Metadata",
        );
        assert_eq!(t["kind"], "Table");
        assert_eq!(t["metadata"]["resourceVersion"], "7");
        let names: Vec<&str> = t["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["Name", "Message", "Status", "Replicas", "Created"]);
        assert_eq!(t["columnDefinitions"][0]["format"], "name");
        let cells = &t["rows"][0]["cells"];
        assert_eq!(cells[0], "example");
        assert_eq!(cells[1], "Resource requested");
        assert_eq!(cells[2], "Reconciled");
        assert_eq!(cells[3], 3);
        assert_eq!(cells[4], "5m30s");
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(t["rows"][0]["object"]["metadata"]["name"], "example");

        let full = render(&i, std::slice::from_ref(&obj), json!({}), "Object");
        assert_eq!(full["rows"][0]["object"], obj);
        let none = render(&i, &[obj], json!({}), "None");
        assert!(none["rows"][0].get("object").is_none());
    }

    #[test]
    fn crd_without_columns_gets_age_and_missing_paths_are_null() {
        let i = info("example.com", "Widget", false, vec![]);
        let obj =
            json!({"metadata": {"name": "w", "creationTimestamp": ago(2 * 86400 + 3 * 3600 + 5)}});
        let t = render(&i, std::slice::from_ref(&obj), json!({}), "None");
        assert_eq!(t["columnDefinitions"][1]["name"], "Age");
        assert_eq!(t["rows"][0]["cells"], json!(["w", "2d3h"]));

        let i = info(
            "example.com",
            "Widget",
            false,
            vec![col("Ready", "string", ".status.ready")],
        );
        let t = render(&i, &[obj], json!({}), "None");
        assert_eq!(t["rows"][0]["cells"], json!(["w", null]));
    }

    #[test]
    fn builtin_columns() {
        let cm = json!({"metadata": {"name": "c", "creationTimestamp": ago(90)}, "data": {"a": "1", "b": "2"}, "binaryData": {"c": ""}});
        let t = render(
            &info("", "ConfigMap", true, vec![]),
            &[cm],
            json!({}),
            "None",
        );
        assert_eq!(t["rows"][0]["cells"], json!(["c", 3, "90s"]));

        let secret = json!({"metadata": {"name": "s", "creationTimestamp": ago(60)}, "type": "Opaque", "data": {"k": "dg=="}});
        let t = render(
            &info("", "Secret", true, vec![]),
            &[secret],
            json!({}),
            "None",
        );
        assert_eq!(t["rows"][0]["cells"], json!(["s", "Opaque", 1, "60s"]));

        let ns = json!({"metadata": {"name": "default", "creationTimestamp": ago(10)}, "status": {"phase": "Active"}});
        let t = render(
            &info("", "Namespace", true, vec![]),
            &[ns],
            json!({}),
            "None",
        );
        assert_eq!(t["rows"][0]["cells"], json!(["default", "Active", "10s"]));

        let sa = json!({"metadata": {"name": "default", "creationTimestamp": ago(10)}});
        let t = render(
            &info("", "ServiceAccount", true, vec![]),
            &[sa],
            json!({}),
            "None",
        );
        assert_eq!(t["rows"][0]["cells"], json!(["default", 0, "10s"]));

        let pod = json!({
            "metadata": {"name": "p", "creationTimestamp": ago(600)},
            "spec": {"containers": [{"name": "a"}, {"name": "b"}]},
            "status": {"phase": "Running", "containerStatuses": [
                {"name": "a", "ready": true, "restartCount": 2, "state": {"running": {}},
                 "lastState": {"terminated": {"finishedAt": ago(300)}}},
                {"name": "b", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
            ]}
        });
        let t = render(&info("", "Pod", true, vec![]), &[pod], json!({}), "None");
        let cells = &t["rows"][0]["cells"];
        assert_eq!(cells[1], "1/2");
        assert_eq!(cells[2], "CrashLoopBackOff");
        assert_eq!(cells[3], "2 (5m ago)");
        assert_eq!(cells[4], "10m");

        let init_pod = json!({
            "metadata": {"name": "p"},
            "spec": {"initContainers": [{"name": "i1"}, {"name": "i2"}], "containers": [{"name": "a"}]},
            "status": {"phase": "Pending", "initContainerStatuses": [
                {"name": "i1", "state": {"terminated": {"exitCode": 0}}},
                {"name": "i2", "state": {"running": {}}}
            ]}
        });
        let t = render(
            &info("", "Pod", true, vec![]),
            &[init_pod],
            json!({}),
            "None",
        );
        assert_eq!(t["rows"][0]["cells"][2], "Init:1/2");
        assert_eq!(t["rows"][0]["cells"][3], "0");

        let job = json!({
            "metadata": {"name": "j", "creationTimestamp": ago(100)},
            "spec": {"completions": 1, "template": {"spec": {"containers": [{"name": "x", "image": "busybox"}]}}},
            "status": {"succeeded": 1, "startTime": ago(100), "completionTime": ago(40),
                       "conditions": [{"type": "Complete", "status": "True"}]}
        });
        let t = render(
            &info("batch", "Job", true, vec![]),
            &[job],
            json!({}),
            "None",
        );
        let cells = &t["rows"][0]["cells"];
        assert_eq!(cells[1], "Complete");
        assert_eq!(cells[2], "1/1");
        assert_eq!(cells[3], "60s");
        assert_eq!(cells[5], "x");
        assert_eq!(cells[6], "busybox");

        let rb = json!({"metadata": {"name": "rb", "creationTimestamp": ago(5)},
            "roleRef": {"kind": "ClusterRole", "name": "edit"},
            "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}, {"kind": "User", "name": "alice"}]});
        let t = render(
            &info("rbac.authorization.k8s.io", "RoleBinding", true, vec![]),
            &[rb],
            json!({}),
            "None",
        );
        assert_eq!(
            t["rows"][0]["cells"],
            json!(["rb", "ClusterRole/edit", "5s", "alice", "", "ns/sa"])
        );

        let lease = json!({"metadata": {"name": "l", "creationTimestamp": ago(5)}, "spec": {"holderIdentity": "plinth-1"}});
        let t = render(
            &info("coordination.k8s.io", "Lease", true, vec![]),
            &[lease],
            json!({}),
            "None",
        );
        assert_eq!(t["rows"][0]["cells"], json!(["l", "plinth-1", "5s"]));

        let role = json!({"metadata": {"name": "r", "creationTimestamp": "2024-01-02T03:04:05Z"}});
        let t = render(
            &info("rbac.authorization.k8s.io", "ClusterRole", true, vec![]),
            &[role],
            json!({}),
            "None",
        );
        assert_eq!(t["rows"][0]["cells"], json!(["r", "2024-01-02T03:04:05Z"]));
        assert_eq!(t["columnDefinitions"][1]["type"], "date");

        let ev = json!({"metadata": {"name": "e1", "creationTimestamp": ago(30)}, "type": "Warning", "reason": "Failed",
            "involvedObject": {"kind": "Pod", "name": "p"}, "message": "boom\n", "lastTimestamp": ago(30), "count": 3});
        let t = render(&info("", "Event", true, vec![]), &[ev], json!({}), "None");
        let names: Vec<&str> = t["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            &names[..5],
            ["Last Seen", "Type", "Reason", "Object", "Subobject"]
        );
        let cells = &t["rows"][0]["cells"];
        assert_eq!(cells[0], "30s");
        assert_eq!(cells[3], "pod/p");
        assert_eq!(cells[6], "boom");
        assert_eq!(cells[8], "3");
        assert_eq!(cells[9], "e1");
    }
}
