//! One column of a server-side table (`Accept: application/json;as=Table`): its
//! definition and where its cells come from, with the cell texts the columns of many
//! kinds share (ages, counts, container lists) as kube-apiserver prints them.

use jiff::Timestamp;
use serde_json::Value;

use super::jsonpath;

/// One rendered column: its definition and how to compute its cell.
pub(super) struct Column {
    pub(super) name: String,
    pub(super) type_: String,
    pub(super) format: String,
    pub(super) description: String,
    pub(super) priority: i32,
    pub(super) source: Source,
}

/// Where a column's cell comes from.
pub(super) enum Source {
    Name,
    Path(Vec<jsonpath::Step>),
    Builtin(fn(&Value, Timestamp) -> Value),
}

pub(super) const NAME_DESC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";

pub(super) const AGE_DESC: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

pub(super) fn name_column(priority: i32) -> Column {
    Column {
        name: "Name".into(),
        type_: "string".into(),
        format: "name".into(),
        description: NAME_DESC.into(),
        priority,
        source: Source::Name,
    }
}

pub(super) fn builtin(
    name: &str,
    type_: &str,
    priority: i32,
    f: fn(&Value, Timestamp) -> Value,
) -> Column {
    Column {
        name: name.into(),
        type_: type_.into(),
        format: String::new(),
        description: match name {
            "Age" => AGE_DESC.to_string(),
            _ => format!("{name} of the object."),
        },
        priority,
        source: Source::Builtin(f),
    }
}

pub(super) fn age_column() -> Column {
    builtin("Age", "string", 0, |o, now| {
        Value::String(age_of(o.pointer("/metadata/creationTimestamp"), now))
    })
}

/// Kubernetes `duration.HumanDuration`: `45s`, `5m30s`, `3h10m`, `2d3h`, `1y20d`.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = minutes / 60;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// Age of an RFC 3339 timestamp value, `<unknown>` when absent or unparsable.
pub(super) fn age_of(ts: Option<&Value>, now: Timestamp) -> String {
    match ts
        .and_then(Value::as_str)
        .and_then(|s| s.parse::<Timestamp>().ok())
    {
        Some(t) => human_duration(now.duration_since(t).as_secs()),
        None => "<unknown>".into(),
    }
}

pub(super) fn count(o: &Value, ptr: &str) -> usize {
    match o.pointer(ptr) {
        Some(Value::Object(m)) => m.len(),
        Some(Value::Array(a)) => a.len(),
        _ => 0,
    }
}

pub(super) fn join_containers(o: &Value, field: &str) -> Value {
    containers_field(o, "/spec/template/spec/containers", field)
}

/// `field` (name, image) of every container in the list at pointer `containers`,
/// comma-separated, as kube-apiserver's CONTAINERS and IMAGES columns print them.
pub(super) fn containers_field(o: &Value, containers: &str, field: &str) -> Value {
    let names: Vec<&str> = o
        .pointer(containers)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|c| c.get(field).and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    Value::String(names.join(","))
}
