//! `autoscaling` HorizontalPodAutoscalers: one stored resource served as `autoscaling/v2`
//! (the storage version; discovery prefers v1, as kube-apiserver does) and `autoscaling/v1`, converted as Kubernetes'
//! `pkg/apis/autoscaling/v1` conversion does: v1's `targetCPUUtilizationPercentage` and
//! `currentCPUUtilizationPercentage` are v2's CPU `Resource` metric of type `Utilization`;
//! what v1 has no field for (other metrics, `behavior`, current metrics, conditions) rides
//! in the `autoscaling.alpha.kubernetes.io/*` annotations (here in v2's shape), so a
//! round trip through v1 loses nothing. Also v2's defaults and kube's checks of the
//! replica bounds.

use serde_json::{Map, Value, json};

use crate::registry::rkey;
use crate::resource::Cause;
use crate::resource::ResourceInfo;

const METRICS: &str = "autoscaling.alpha.kubernetes.io/metrics";
const BEHAVIOR: &str = "autoscaling.alpha.kubernetes.io/behavior";
const CURRENT_METRICS: &str = "autoscaling.alpha.kubernetes.io/current-metrics";
const CONDITIONS: &str = "autoscaling.alpha.kubernetes.io/conditions";

/// The CPU utilization target Kubernetes defaults a v2 HorizontalPodAutoscaler without
/// metrics to.
pub(crate) const DEFAULT_CPU_UTILIZATION: i64 = 80;

/// Whether `info` is a HorizontalPodAutoscaler resource (either version).
pub(crate) fn is_hpa(info: &ResourceInfo) -> bool {
    info.builtin
        && rkey(&info.group, &info.plural) == rkey("autoscaling", "horizontalpodautoscalers")
}

fn is_cpu_utilization(m: &Value, target: &str) -> bool {
    m.get("type").and_then(Value::as_str) == Some("Resource")
        && m.pointer("/resource/name").and_then(Value::as_str) == Some("cpu")
        && m.pointer(&format!("/resource/{target}/type"))
            .and_then(Value::as_str)
            .is_none_or(|t| t == "Utilization")
        && m.pointer(&format!("/resource/{target}/averageUtilization"))
            .is_some()
}

fn annotations(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj["metadata"].is_object() {
        obj["metadata"] = json!({});
    }
    if !obj["metadata"]["annotations"].is_object() {
        obj["metadata"]["annotations"] = json!({});
    }
    obj["metadata"]["annotations"]
        .as_object_mut()
        .expect("an object")
}

fn take_annotation(obj: &mut Value, key: &str) -> Option<Value> {
    let a = obj.pointer_mut("/metadata/annotations")?.as_object_mut()?;
    let v = a.remove(key)?;
    if a.is_empty() {
        obj["metadata"].as_object_mut()?.remove("annotations");
    }
    serde_json::from_str(v.as_str()?).ok()
}

fn put_annotation(obj: &mut Value, key: &str, v: &Value) {
    annotations(obj).insert(key.into(), json!(v.to_string()));
}

/// Converts a stored (v2) object to `autoscaling/v1` in place.
pub(crate) fn to_v1(obj: &mut Value) {
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
        let metrics = spec.remove("metrics");
        let behavior = spec.remove("behavior");
        let mut others = Vec::new();
        for m in metrics
            .iter()
            .flat_map(|m| m.as_array().into_iter().flatten())
        {
            if is_cpu_utilization(m, "target")
                && !spec.contains_key("targetCPUUtilizationPercentage")
            {
                spec.insert(
                    "targetCPUUtilizationPercentage".into(),
                    m.pointer("/resource/target/averageUtilization")
                        .cloned()
                        .unwrap_or(Value::Null),
                );
            } else {
                others.push(m.clone());
            }
        }
        if !others.is_empty() {
            put_annotation(obj, METRICS, &Value::Array(others));
        }
        if let Some(b) = behavior.filter(|b| !b.is_null()) {
            put_annotation(obj, BEHAVIOR, &b);
        }
    }
    if let Some(status) = obj.get_mut("status").and_then(Value::as_object_mut) {
        let current = status.remove("currentMetrics");
        let conditions = status.remove("conditions");
        let mut others = Vec::new();
        for m in current
            .iter()
            .flat_map(|m| m.as_array().into_iter().flatten())
        {
            if is_cpu_utilization(m, "current")
                && !status.contains_key("currentCPUUtilizationPercentage")
            {
                status.insert(
                    "currentCPUUtilizationPercentage".into(),
                    m.pointer("/resource/current/averageUtilization")
                        .cloned()
                        .unwrap_or(Value::Null),
                );
            } else {
                others.push(m.clone());
            }
        }
        if !others.is_empty() {
            put_annotation(obj, CURRENT_METRICS, &Value::Array(others));
        }
        if let Some(c) = conditions.filter(|c| c.as_array().is_some_and(|a| !a.is_empty())) {
            put_annotation(obj, CONDITIONS, &c);
        }
    }
}

/// Converts an `autoscaling/v1` object to the stored v2 form in place, with v2's default
/// metric (CPU at 80% utilization) when it names none.
pub(crate) fn to_v2(obj: &mut Value) {
    let metrics = take_annotation(obj, METRICS);
    let behavior = take_annotation(obj, BEHAVIOR);
    let current = take_annotation(obj, CURRENT_METRICS);
    let conditions = take_annotation(obj, CONDITIONS);
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
        let mut list: Vec<Value> = Vec::new();
        if let Some(t) = spec
            .remove("targetCPUUtilizationPercentage")
            .filter(|t| !t.is_null())
        {
            list.push(cpu_metric("target", t));
        }
        list.extend(
            metrics
                .and_then(|m| m.as_array().cloned())
                .unwrap_or_default(),
        );
        if !list.is_empty() {
            spec.insert("metrics".into(), Value::Array(list));
        }
        if let Some(b) = behavior {
            spec.insert("behavior".into(), b);
        }
    }
    if let Some(status) = obj.get_mut("status").and_then(Value::as_object_mut) {
        let mut list: Vec<Value> = Vec::new();
        if let Some(c) = status
            .remove("currentCPUUtilizationPercentage")
            .filter(|c| !c.is_null())
        {
            list.push(cpu_metric("current", c));
        }
        list.extend(
            current
                .and_then(|m| m.as_array().cloned())
                .unwrap_or_default(),
        );
        if !list.is_empty() {
            status.insert("currentMetrics".into(), Value::Array(list));
        }
        if let Some(c) = conditions {
            status.insert("conditions".into(), c);
        }
    }
    default_v2(obj);
}

fn cpu_metric(which: &str, utilization: Value) -> Value {
    let mut value = json!({"averageUtilization": utilization});
    if which == "target" {
        value["type"] = json!("Utilization");
    }
    json!({"type": "Resource", "resource": {"name": "cpu", which: value}})
}

/// Kubernetes' v2 defaults: `minReplicas` 1, and CPU at 80% utilization when no metric
/// is named.
pub(crate) fn default_v2(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if spec.get("minReplicas").is_none_or(Value::is_null) {
        spec.insert("minReplicas".into(), json!(1));
    }
    if spec
        .get("metrics")
        .is_none_or(|m| m.as_array().is_none_or(|a| a.is_empty()))
    {
        spec.insert(
            "metrics".into(),
            json!([cpu_metric("target", json!(DEFAULT_CPU_UTILIZATION))]),
        );
    }
}

/// Kubernetes' v1 defaults: `minReplicas` 1.
pub(crate) fn default_v1(obj: &mut Value) {
    if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut)
        && spec.get("minReplicas").is_none_or(Value::is_null)
    {
        spec.insert("minReplicas".into(), json!(1));
    }
}

/// Converts `obj` (of whichever version its `apiVersion` names) to `info`'s version.
pub(crate) fn convert(info: &ResourceInfo, obj: &mut Value) {
    let from = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    match (from, info.version.as_str()) {
        ("autoscaling/v2", "v1") => to_v1(obj),
        ("autoscaling/v1", "v2") => to_v2(obj),
        _ => {}
    }
}

/// kube-apiserver's checks of the replica bounds and the target (`spec.minReplicas` at
/// least 1, `spec.maxReplicas` at least `minReplicas`, `scaleTargetRef` naming a kind and
/// a name; v1's `targetCPUUtilizationPercentage` at least 1).
pub(crate) fn causes(obj: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    let invalid = |field: &str, v: &Value, why: &str| Cause {
        reason: "FieldValueInvalid".into(),
        message: format!("Invalid value: {v}: {why}"),
        field: field.into(),
    };
    let required = |field: &str| Cause {
        reason: "FieldValueRequired".into(),
        message: "Required value".into(),
        field: field.into(),
    };
    let spec = obj.get("spec").cloned().unwrap_or(json!({}));
    let min = spec.get("minReplicas").and_then(Value::as_i64);
    let max = spec.get("maxReplicas").and_then(Value::as_i64).unwrap_or(0);
    if let Some(m) = min
        && m < 1
    {
        out.push(invalid(
            "spec.minReplicas",
            &json!(m),
            "must be greater than or equal to 1",
        ));
    }
    if max < 1 {
        out.push(invalid(
            "spec.maxReplicas",
            &json!(max),
            "must be greater than 0",
        ));
    } else if let Some(m) = min
        && max < m
    {
        out.push(invalid(
            "spec.maxReplicas",
            &json!(max),
            "must be greater than or equal to `minReplicas`",
        ));
    }
    for f in ["kind", "name"] {
        if spec
            .pointer(&format!("/scaleTargetRef/{f}"))
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            out.push(required(&format!("spec.scaleTargetRef.{f}")));
        }
    }
    if let Some(t) = spec
        .get("targetCPUUtilizationPercentage")
        .and_then(Value::as_i64)
        && t < 1
    {
        out.push(invalid(
            "spec.targetCPUUtilizationPercentage",
            &json!(t),
            "must be greater than or equal to 1",
        ));
    }
    out
}

/// The `Targets` cell as kube-apiserver prints it: `<resource>: <current>/<target>` per
/// metric (`<unknown>` before the controller measured it), at most four.
pub(crate) fn targets(obj: &Value) -> String {
    let mut v2 = obj.clone();
    if obj.get("apiVersion").and_then(Value::as_str) == Some("autoscaling/v1") {
        to_v2(&mut v2);
    }
    let metrics = v2
        .pointer("/spec/metrics")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if metrics.is_empty() {
        return "<none>".into();
    }
    let current = v2
        .pointer("/status/currentMetrics")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut parts = Vec::new();
    for (i, m) in metrics.iter().enumerate() {
        let cur = current.get(i);
        let kind = m.get("type").and_then(Value::as_str).unwrap_or("");
        let key = match kind {
            "Resource" => "resource",
            "ContainerResource" => "containerResource",
            "Pods" => "pods",
            "Object" => "object",
            "External" => "external",
            _ => "",
        };
        let target = m
            .pointer(&format!("/{key}/target"))
            .cloned()
            .unwrap_or(json!({}));
        let current = cur
            .and_then(|c| c.pointer(&format!("/{key}/current")))
            .cloned();
        let (t, c) = if let Some(u) = target.get("averageUtilization") {
            (
                format!("{u}%"),
                current
                    .as_ref()
                    .and_then(|c| c.get("averageUtilization"))
                    .map_or("<unknown>".to_string(), |c| format!("{c}%")),
            )
        } else {
            let field = if target.get("averageValue").is_some() {
                "averageValue"
            } else {
                "value"
            };
            let show =
                |v: Option<&Value>| v.map(|v| v.as_str().map_or(v.to_string(), str::to_string));
            (
                show(target.get(field)).unwrap_or_else(|| "<unknown>".into()),
                show(current.as_ref().and_then(|c| c.get(field)))
                    .unwrap_or_else(|| "<unknown>".into()),
            )
        };
        let label = match kind {
            "Resource" | "ContainerResource" => {
                format!(
                    "{}: ",
                    m.pointer(&format!("/{key}/name"))
                        .and_then(Value::as_str)
                        .unwrap_or("")
                )
            }
            _ => String::new(),
        };
        parts.push(format!("{label}{c}/{t}"));
    }
    let shown = parts.len().min(4);
    let mut out = parts[..shown].join(", ");
    if parts.len() > 4 {
        out.push_str(&format!(" + {} more...", parts.len() - 4));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn v1_and_v2_convert_both_ways_without_loss() {
        let mut v1 = json!({
            "apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "h"},
            "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "d"}, "maxReplicas": 3, "targetCPUUtilizationPercentage": 70},
            "status": {"currentReplicas": 1, "desiredReplicas": 1, "currentCPUUtilizationPercentage": 40}
        });
        to_v2(&mut v1);
        assert_eq!(
            v1["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
            70
        );
        assert_eq!(v1["spec"]["minReplicas"], 1);
        assert_eq!(
            v1["status"]["currentMetrics"][0]["resource"]["current"]["averageUtilization"],
            40
        );
        assert!(v1["spec"].get("targetCPUUtilizationPercentage").is_none());
        // v2 with a second metric and behavior: v1 keeps them in annotations.
        let mut v2 = v1.clone();
        v2["spec"]["metrics"].as_array_mut().unwrap().push(json!({"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {"type": "AverageValue", "averageValue": "10"}}}));
        v2["spec"]["behavior"] = json!({"scaleDown": {"stabilizationWindowSeconds": 60}});
        v2["apiVersion"] = json!("autoscaling/v2");
        let before = v2.clone();
        to_v1(&mut v2);
        assert_eq!(v2["spec"]["targetCPUUtilizationPercentage"], 70);
        assert_eq!(v2["status"]["currentCPUUtilizationPercentage"], 40);
        assert!(
            v2["metadata"]["annotations"][METRICS]
                .as_str()
                .unwrap()
                .contains("qps")
        );
        v2["apiVersion"] = json!("autoscaling/v1");
        to_v2(&mut v2);
        v2["apiVersion"] = json!("autoscaling/v2");
        assert_eq!(v2, before);
    }

    #[test]
    fn v2_defaults_to_cpu_at_80_percent() {
        let mut o = json!({"spec": {"maxReplicas": 2, "scaleTargetRef": {"kind": "ReplicationController", "name": "f"}}});
        default_v2(&mut o);
        assert_eq!(
            o["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
            80
        );
        assert_eq!(targets(&o), "cpu: <unknown>/80%");
    }

    #[test]
    fn replica_bounds_are_checked() {
        let c = causes(
            &json!({"spec": {"minReplicas": 3, "maxReplicas": 2, "scaleTargetRef": {"kind": "Deployment"}}}),
        );
        let fields: Vec<&str> = c.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["spec.maxReplicas", "spec.scaleTargetRef.name"]);
        assert!(
            c[0].message
                .ends_with("must be greater than or equal to `minReplicas`")
        );
    }
}
