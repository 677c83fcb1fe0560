//! Table columns of the built-in workload, networking, policy and storage kinds, as
//! kube-apiserver prints them (Kubernetes `pkg/printers/internalversion`): the same column
//! names, types, `-o wide` priorities and cell texts (`<none>`, `<pending>`, `<unset>`).

use jiff::Timestamp;
use serde_json::Value;

use super::column::{Column, age_column, age_of, builtin, containers_field, join_containers};

/// Appends the columns after `Name` for `(group, kind)`; false when the kind has none here.
pub(super) fn columns(group: &str, kind: &str, cols: &mut Vec<Column>) -> bool {
    let add: fn(&mut Vec<Column>) = match (group, kind) {
        ("apps", "Deployment") => deployment_columns,
        ("apps", "ReplicaSet") | ("", "ReplicationController") => replica_set_columns,
        ("apps", "StatefulSet") => stateful_set_columns,
        ("apps", "DaemonSet") => daemon_set_columns,
        ("batch", "CronJob") => cron_job_columns,
        ("", "Service") => service_columns,
        ("", "Node") => node_columns,
        ("", "Endpoints") => endpoints_columns,
        ("networking.k8s.io", "Ingress") => ingress_columns,
        ("policy", "PodDisruptionBudget") => pod_disruption_budget_columns,
        ("autoscaling", "HorizontalPodAutoscaler") => horizontal_pod_autoscaler_columns,
        ("scheduling.k8s.io", "PriorityClass") => priority_class_columns,
        ("", "ResourceQuota") => resource_quota_columns,
        ("storage.k8s.io", "StorageClass") => storage_class_columns,
        _ => return false,
    };
    add(cols);
    true
}

/// The columns of Deployment after `Name`, as kube-apiserver prints them.
fn deployment_columns(cols: &mut Vec<Column>) {
    cols.push(builtin("Ready", "string", 0, |o, _| {
        ratio(o, "/status/readyReplicas", "/spec/replicas")
    }));
    cols.push(builtin("Up-to-date", "integer", 0, |o, _| {
        int(o, "/status/updatedReplicas")
    }));
    cols.push(builtin("Available", "integer", 0, |o, _| {
        int(o, "/status/availableReplicas")
    }));
    cols.push(age_column());
    push_wide_template(cols, true);
}

/// The columns of ReplicaSet and ReplicationController after `Name`, as kube-apiserver prints them.
fn replica_set_columns(cols: &mut Vec<Column>) {
    cols.push(builtin("Desired", "integer", 0, |o, _| {
        int(o, "/spec/replicas")
    }));
    cols.push(builtin("Current", "integer", 0, |o, _| {
        int(o, "/status/replicas")
    }));
    cols.push(builtin("Ready", "integer", 0, |o, _| {
        int(o, "/status/readyReplicas")
    }));
    cols.push(age_column());
    push_wide_template(cols, true);
}

/// The columns of StatefulSet after `Name`, as kube-apiserver prints them.
fn stateful_set_columns(cols: &mut Vec<Column>) {
    cols.push(builtin("Ready", "string", 0, |o, _| {
        ratio(o, "/status/readyReplicas", "/spec/replicas")
    }));
    cols.push(age_column());
    push_wide_template(cols, false);
}

/// The columns of DaemonSet after `Name`, as kube-apiserver prints them.
fn daemon_set_columns(cols: &mut Vec<Column>) {
    cols.push(builtin("Desired", "integer", 0, |o, _| {
        int(o, "/status/desiredNumberScheduled")
    }));
    cols.push(builtin("Current", "integer", 0, |o, _| {
        int(o, "/status/currentNumberScheduled")
    }));
    cols.push(builtin("Ready", "integer", 0, |o, _| {
        int(o, "/status/numberReady")
    }));
    cols.push(builtin("Up-to-date", "integer", 0, |o, _| {
        int(o, "/status/updatedNumberScheduled")
    }));
    cols.push(builtin("Available", "integer", 0, |o, _| {
        int(o, "/status/numberAvailable")
    }));
    cols.push(builtin("Node Selector", "string", 0, |o, _| {
        labels(o.pointer("/spec/template/spec/nodeSelector"))
    }));
    cols.push(age_column());
    push_wide_template(cols, true);
}

/// The columns of CronJob after `Name`, as kube-apiserver prints them.
fn cron_job_columns(cols: &mut Vec<Column>) {
    cols.push(builtin("Schedule", "string", 0, |o, _| {
        text_or(o, "/spec/schedule", "")
    }));
    cols.push(builtin("Timezone", "string", 0, |o, _| {
        text_or(o, "/spec/timeZone", "<none>")
    }));
    cols.push(builtin("Suspend", "boolean", 0, |o, _| {
        match o.pointer("/spec/suspend").and_then(Value::as_bool) {
            Some(true) => "True".into(),
            Some(false) => "False".into(),
            None => "<unset>".into(),
        }
    }));
    cols.push(builtin("Active", "integer", 0, |o, _| {
        Value::from(super::column::count(o, "/status/active"))
    }));
    cols.push(builtin("Last Schedule", "string", 0, |o, now| {
        since_or_none(o.pointer("/status/lastScheduleTime"), now)
    }));
    cols.push(age_column());
    cols.push(builtin("Containers", "string", 1, |o, _| {
        job_template_containers(o, "name")
    }));
    cols.push(builtin("Images", "string", 1, |o, _| {
        job_template_containers(o, "image")
    }));
    cols.push(builtin("Selector", "string", 1, |o, _| {
        selector(o.pointer("/spec/jobTemplate/spec/selector"))
    }));
}

/// The columns of Service after `Name`, as kube-apiserver prints them.
fn service_columns(cols: &mut Vec<Column>) {
    cols.push(builtin("Type", "string", 0, |o, _| {
        text_or(o, "/spec/type", "ClusterIP")
    }));
    cols.push(builtin("Cluster-IP", "string", 0, |o, _| {
        text_or(o, "/spec/clusterIP", "<none>")
    }));
    cols.push(builtin("External-IP", "string", 0, |o, _| {
        service_external_ip(o)
    }));
    cols.push(builtin("Port(s)", "string", 0, |o, _| service_ports(o)));
    cols.push(age_column());
    cols.push(builtin("Selector", "string", 1, |o, _| {
        labels(o.pointer("/spec/selector"))
    }));
}

/// The columns of Endpoints after `Name`, as kube-apiserver prints them.
fn endpoints_columns(cols: &mut Vec<Column>) {
    cols.push(builtin("Endpoints", "string", 0, |o, _| endpoints(o)));
    cols.push(age_column());
}

/// The columns of Ingress after `Name`, as kube-apiserver prints them.
fn ingress_columns(cols: &mut Vec<Column>) {
    cols.push(builtin("Class", "string", 0, |o, _| {
        text_or(o, "/spec/ingressClassName", "<none>")
    }));
    cols.push(builtin("Hosts", "string", 0, |o, _| ingress_hosts(o)));
    cols.push(builtin("Address", "string", 0, |o, _| {
        Value::String(load_balancer(o).join(","))
    }));
    cols.push(builtin("Ports", "string", 0, |o, _| {
        let tls = super::column::count(o, "/spec/tls") > 0;
        Value::from(if tls { "80, 443" } else { "80" })
    }));
    cols.push(age_column());
}

/// The columns of PodDisruptionBudget after `Name`, as kube-apiserver prints them.
fn pod_disruption_budget_columns(cols: &mut Vec<Column>) {
    cols.push(builtin("Min Available", "string", 0, |o, _| {
        int_or_string_or_na(o.pointer("/spec/minAvailable"))
    }));
    cols.push(builtin("Max Unavailable", "string", 0, |o, _| {
        int_or_string_or_na(o.pointer("/spec/maxUnavailable"))
    }));
    cols.push(builtin("Allowed Disruptions", "integer", 0, |o, _| {
        int(o, "/status/disruptionsAllowed")
    }));
    cols.push(age_column());
}

/// The columns of Node after `Name`, as kube-apiserver prints them (`printNode`).
fn node_columns(cols: &mut Vec<Column>) {
    cols.push(builtin("Status", "string", 0, |o, _| {
        let ready = o
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"))
            .and_then(|c| c["status"].as_str());
        let mut s = match ready {
            Some("True") => "Ready".to_string(),
            Some("False") => "NotReady".to_string(),
            _ => "Unknown".to_string(),
        };
        if o.pointer("/spec/unschedulable") == Some(&Value::Bool(true)) {
            s.push_str(",SchedulingDisabled");
        }
        Value::from(s)
    }));
    cols.push(builtin("Roles", "string", 0, |o, _| {
        let mut roles: Vec<String> = o
            .pointer("/metadata/labels")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| {
                if let Some(r) = k.strip_prefix("node-role.kubernetes.io/") {
                    (!r.is_empty()).then(|| r.to_string())
                } else if k == "kubernetes.io/role" {
                    v.as_str().filter(|r| !r.is_empty()).map(String::from)
                } else {
                    None
                }
            })
            .collect();
        roles.sort();
        roles.dedup();
        Value::from(if roles.is_empty() {
            "<none>".to_string()
        } else {
            roles.join(",")
        })
    }));
    cols.push(age_column());
    cols.push(builtin("Version", "string", 0, |o, _| {
        text_or(o, "/status/nodeInfo/kubeletVersion", "")
    }));
    cols.push(builtin("Internal-IP", "string", 1, |o, _| {
        o.pointer("/status/addresses")
            .and_then(Value::as_array)
            .and_then(|a| a.iter().find(|x| x["type"] == "InternalIP"))
            .and_then(|x| x["address"].as_str())
            .map_or(Value::from("<none>"), Value::from)
    }));
    cols.push(builtin("External-IP", "string", 1, |o, _| {
        o.pointer("/status/addresses")
            .and_then(Value::as_array)
            .and_then(|a| a.iter().find(|x| x["type"] == "ExternalIP"))
            .and_then(|x| x["address"].as_str())
            .map_or(Value::from("<none>"), Value::from)
    }));
    cols.push(builtin("OS-Image", "string", 1, |o, _| {
        text_or(o, "/status/nodeInfo/osImage", "<unknown>")
    }));
    cols.push(builtin("Kernel-Version", "string", 1, |o, _| {
        text_or(o, "/status/nodeInfo/kernelVersion", "<unknown>")
    }));
    cols.push(builtin("Container-Runtime", "string", 1, |o, _| {
        text_or(o, "/status/nodeInfo/containerRuntimeVersion", "<unknown>")
    }));
}

/// The columns of HorizontalPodAutoscaler after `Name`, as kube-apiserver prints them
/// (either version: v1 objects are read as v2).
fn horizontal_pod_autoscaler_columns(cols: &mut Vec<Column>) {
    cols.push(builtin("Reference", "string", 0, |o, _| {
        let kind = o
            .pointer("/spec/scaleTargetRef/kind")
            .and_then(Value::as_str);
        let name = o
            .pointer("/spec/scaleTargetRef/name")
            .and_then(Value::as_str);
        Value::from(format!("{}/{}", kind.unwrap_or(""), name.unwrap_or("")))
    }));
    cols.push(builtin("Targets", "string", 0, |o, _| {
        Value::from(crate::hpa::targets(o))
    }));
    cols.push(builtin("MinPods", "string", 0, |o, _| {
        o.pointer("/spec/minReplicas")
            .and_then(Value::as_i64)
            .map_or(Value::from("<unset>"), |m| Value::from(m.to_string()))
    }));
    cols.push(builtin("MaxPods", "integer", 0, |o, _| {
        int(o, "/spec/maxReplicas")
    }));
    cols.push(builtin("Replicas", "integer", 0, |o, _| {
        int(o, "/status/currentReplicas")
    }));
    cols.push(age_column());
}

/// The columns of PriorityClass after `Name`, as kube-apiserver prints them.
fn priority_class_columns(cols: &mut Vec<Column>) {
    cols.push(builtin("Value", "integer", 0, |o, _| int(o, "/value")));
    cols.push(builtin("Global-Default", "boolean", 0, |o, _| {
        Value::Bool(
            o.get("globalDefault")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        )
    }));
    cols.push(age_column());
    cols.push(builtin("PreemptionPolicy", "string", 0, |o, _| {
        text_or(o, "/preemptionPolicy", "PreemptLowerPriority")
    }));
}

/// The columns of ResourceQuota after `Name`, as kube-apiserver prints them.
fn resource_quota_columns(cols: &mut Vec<Column>) {
    cols.push(age_column());
    cols.push(builtin("Request", "string", 0, |o, _| quota(o, false)));
    cols.push(builtin("Limit", "string", 0, |o, _| quota(o, true)));
}

/// The columns of StorageClass after `Name`, as kube-apiserver prints them.
fn storage_class_columns(cols: &mut Vec<Column>) {
    cols[0].source = super::column::Source::Builtin(|o, _| {
        let name = o
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let default = o
            .pointer("/metadata/annotations/storageclass.kubernetes.io~1is-default-class")
            .and_then(Value::as_str)
            == Some("true");
        Value::String(if default {
            format!("{name} (default)")
        } else {
            name.into()
        })
    });
    cols.push(builtin("Provisioner", "string", 0, |o, _| {
        text_or(o, "/provisioner", "")
    }));
    cols.push(builtin("ReclaimPolicy", "string", 0, |o, _| {
        text_or(o, "/reclaimPolicy", "Delete")
    }));
    cols.push(builtin("VolumeBindingMode", "string", 0, |o, _| {
        text_or(o, "/volumeBindingMode", "Immediate")
    }));
    cols.push(builtin("AllowVolumeExpansion", "string", 0, |o, _| {
        Value::String(
            o.get("allowVolumeExpansion")
                .and_then(Value::as_bool)
                .unwrap_or(false)
                .to_string(),
        )
    }));
    cols.push(age_column());
}

/// `-o wide` columns of a kind with a Pod template: Containers, Images and (for most
/// kinds) Selector.
fn push_wide_template(cols: &mut Vec<Column>, with_selector: bool) {
    cols.push(builtin("Containers", "string", 1, |o, _| {
        join_containers(o, "name")
    }));
    cols.push(builtin("Images", "string", 1, |o, _| {
        join_containers(o, "image")
    }));
    if with_selector {
        cols.push(builtin("Selector", "string", 1, |o, _| {
            let s = o.pointer("/spec/selector");
            // ReplicationControllers select with a plain map, the others with a LabelSelector.
            match s {
                Some(Value::Object(m))
                    if !m.contains_key("matchLabels") && !m.contains_key("matchExpressions") =>
                {
                    labels(s)
                }
                _ => selector(s),
            }
        }));
    }
}

/// An integer at `ptr`, 0 when absent (kube prints the Go zero value).
fn int(o: &Value, ptr: &str) -> Value {
    Value::from(o.pointer(ptr).and_then(Value::as_i64).unwrap_or(0))
}

/// `ready/desired`, e.g. `1/3`.
fn ratio(o: &Value, ready: &str, desired: &str) -> Value {
    let r = o.pointer(ready).and_then(Value::as_i64).unwrap_or(0);
    let d = o.pointer(desired).and_then(Value::as_i64).unwrap_or(0);
    Value::String(format!("{r}/{d}"))
}

fn text_or(o: &Value, ptr: &str, default: &str) -> Value {
    Value::String(
        o.pointer(ptr)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .unwrap_or(default)
            .to_string(),
    )
}

fn since_or_none(ts: Option<&Value>, now: Timestamp) -> Value {
    match ts {
        Some(v) if v.is_string() => Value::String(age_of(Some(v), now)),
        _ => Value::from("<none>"),
    }
}

/// A label map as `k=v,k2=v2` (keys sorted), `<none>` when empty.
fn labels(m: Option<&Value>) -> Value {
    let pairs: Vec<String> = m
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    Value::String(if pairs.is_empty() {
        "<none>".into()
    } else {
        pairs.join(",")
    })
}

/// A LabelSelector in kubectl's form: `k=v,k2 in (a,b),!k3`; `<none>` when empty.
fn selector(s: Option<&Value>) -> Value {
    let mut parts = Vec::new();
    if let Some(m) = s
        .and_then(|s| s.get("matchLabels"))
        .and_then(Value::as_object)
    {
        parts.extend(
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or(""))),
        );
    }
    for e in s
        .and_then(|s| s.get("matchExpressions"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = e.get("key").and_then(Value::as_str).unwrap_or("");
        let values: Vec<&str> = e
            .get("values")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        parts.push(
            match e.get("operator").and_then(Value::as_str).unwrap_or("") {
                "In" => format!("{key} in ({})", values.join(",")),
                "NotIn" => format!("{key} notin ({})", values.join(",")),
                "Exists" => key.to_string(),
                "DoesNotExist" => format!("!{key}"),
                op => format!("{key} {op} ({})", values.join(",")),
            },
        );
    }
    Value::String(if parts.is_empty() {
        "<none>".into()
    } else {
        parts.join(",")
    })
}

fn job_template_containers(o: &Value, field: &str) -> Value {
    containers_field(o, "/spec/jobTemplate/spec/template/spec/containers", field)
}

/// IPs and hostnames of `status.loadBalancer.ingress`.
fn load_balancer(o: &Value) -> Vec<String> {
    o.pointer("/status/loadBalancer/ingress")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|i| {
                    i.get("ip")
                        .or_else(|| i.get("hostname"))
                        .and_then(Value::as_str)
                        .map(str::to_string)
                })
                .collect()
        })
        .unwrap_or_default()
}

fn service_external_ip(o: &Value) -> Value {
    let external: Vec<String> = o
        .pointer("/spec/externalIPs")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let ty = o
        .pointer("/spec/type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP");
    let s = match ty {
        "ExternalName" => return text_or(o, "/spec/externalName", "<none>"),
        "LoadBalancer" => {
            let mut all = load_balancer(o);
            all.extend(external);
            if all.is_empty() {
                return Value::from("<pending>");
            }
            all.join(",")
        }
        _ => external.join(","),
    };
    Value::String(if s.is_empty() { "<none>".into() } else { s })
}

/// `port[:nodePort]/protocol`, comma-separated; `<none>` without ports.
fn service_ports(o: &Value) -> Value {
    let ports: Vec<String> = o
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|p| {
                    let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
                    let proto = p.get("protocol").and_then(Value::as_str).unwrap_or("TCP");
                    match p
                        .get("nodePort")
                        .and_then(Value::as_i64)
                        .filter(|n| *n != 0)
                    {
                        Some(n) => format!("{port}:{n}/{proto}"),
                        None => format!("{port}/{proto}"),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    Value::String(if ports.is_empty() {
        "<none>".into()
    } else {
        ports.join(",")
    })
}

/// `ip:port` of every ready address and port, comma-separated (at most three, then
/// ` + N more...`, as kubectl prints it); `<none>` when empty.
fn endpoints(o: &Value) -> Value {
    let mut all = Vec::new();
    for s in o
        .get("subsets")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let ports: Vec<i64> = s
            .get("ports")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|p| p.get("port").and_then(Value::as_i64))
                    .collect()
            })
            .unwrap_or_default();
        for a in s
            .get("addresses")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let ip = a.get("ip").and_then(Value::as_str).unwrap_or("");
            if ports.is_empty() {
                all.push(ip.to_string());
            }
            all.extend(ports.iter().map(|p| format!("{ip}:{p}")));
        }
    }
    Value::String(match all.len() {
        0 => "<none>".into(),
        n if n > 3 => format!("{} + {} more...", all[..3].join(","), n - 3),
        _ => all.join(","),
    })
}

fn ingress_hosts(o: &Value) -> Value {
    let hosts: Vec<&str> = o
        .pointer("/spec/rules")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|r| r.get("host").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    Value::String(if hosts.is_empty() {
        "*".into()
    } else {
        hosts.join(",")
    })
}

fn int_or_string_or_na(v: Option<&Value>) -> Value {
    Value::String(match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => "N/A".into(),
    })
}

/// `resource: used/hard` for the requests (or, with `limits`, the `limits.*`) of a
/// ResourceQuota, sorted by resource, comma-separated. From `status` as kube prints it:
/// empty until a quota controller has counted.
fn quota(o: &Value, limits: bool) -> Value {
    let hard = o.pointer("/status/hard").and_then(Value::as_object);
    let used = o.pointer("/status/used");
    let mut parts: Vec<String> = hard
        .map(|h| {
            h.iter()
                .filter(|(k, _)| k.starts_with("limits.") == limits)
                .map(|(k, v)| {
                    let u = used
                        .and_then(|u| u.get(k))
                        .and_then(Value::as_str)
                        .unwrap_or("0");
                    format!("{k}: {u}/{}", v.as_str().unwrap_or(""))
                })
                .collect()
        })
        .unwrap_or_default();
    parts.sort();
    Value::String(parts.join(", "))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::resource::ResourceInfo;

    fn table(
        group: &str,
        kind: &str,
        obj: serde_json::Value,
    ) -> (Vec<String>, Vec<i64>, Vec<serde_json::Value>) {
        let info = ResourceInfo {
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
            builtin: true,
            schema: None,
            printer_columns: vec![],
            storage: true,
        };
        let t = super::super::render(&info, &[obj], json!({}), "None");
        let defs = t["columnDefinitions"].as_array().unwrap();
        let names = defs
            .iter()
            .map(|d| d["name"].as_str().unwrap().to_string())
            .collect();
        let prio = defs
            .iter()
            .map(|d| d["priority"].as_i64().unwrap())
            .collect();
        (
            names,
            prio,
            t["rows"][0]["cells"].as_array().unwrap().clone(),
        )
    }

    fn meta(name: &str) -> serde_json::Value {
        let t = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(120);
        json!({"name": name, "creationTimestamp": t.to_string()})
    }

    #[test]
    fn deployment_columns_are_kube_apiservers() {
        let d = json!({"metadata": meta("web"), "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
            "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1"}, {"name": "side", "image": "busybox"}]}}},
            "status": {"readyReplicas": 1, "updatedReplicas": 2}});
        let (names, prio, cells) = table("apps", "Deployment", d);
        assert_eq!(
            names,
            [
                "Name",
                "Ready",
                "Up-to-date",
                "Available",
                "Age",
                "Containers",
                "Images",
                "Selector"
            ]
        );
        assert_eq!(prio, [0, 0, 0, 0, 0, 1, 1, 1]);
        assert_eq!(
            json!(cells),
            json!([
                "web",
                "1/3",
                2,
                0,
                "2m",
                "nginx,side",
                "nginx:1,busybox",
                "app=web"
            ])
        );
    }

    #[test]
    fn cronjob_columns_are_kube_apiservers() {
        let cj = json!({"metadata": meta("pi"), "spec": {"schedule": "*/5 * * * *",
            "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "pi", "image": "perl"}]}}}}}});
        let (names, _, cells) = table("batch", "CronJob", cj);
        assert_eq!(
            names,
            [
                "Name",
                "Schedule",
                "Timezone",
                "Suspend",
                "Active",
                "Last Schedule",
                "Age",
                "Containers",
                "Images",
                "Selector"
            ]
        );
        assert_eq!(
            json!(cells),
            json!([
                "pi",
                "*/5 * * * *",
                "<none>",
                "<unset>",
                0,
                "<none>",
                "2m",
                "pi",
                "perl",
                "<none>"
            ])
        );
        let cj = json!({"metadata": meta("pi"), "spec": {"schedule": "@daily", "timeZone": "Etc/UTC", "suspend": false},
            "status": {"active": [{"name": "pi-1"}], "lastScheduleTime": jiff::Timestamp::now().to_string()}});
        let (_, _, cells) = table("batch", "CronJob", cj);
        assert_eq!(
            cells[2..6],
            [json!("Etc/UTC"), json!("False"), json!(1), json!("0s")]
        );
    }

    #[test]
    fn service_columns_are_kube_apiservers() {
        let svc = json!({"metadata": meta("db"), "spec": {"type": "NodePort", "clusterIP": "10.0.0.7",
            "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}], "selector": {"app": "db"}}});
        let (names, _, cells) = table("", "Service", svc);
        assert_eq!(
            names,
            [
                "Name",
                "Type",
                "Cluster-IP",
                "External-IP",
                "Port(s)",
                "Age",
                "Selector"
            ]
        );
        assert_eq!(
            json!(cells),
            json!([
                "db",
                "NodePort",
                "10.0.0.7",
                "<none>",
                "80:30080/TCP,53/UDP",
                "2m",
                "app=db"
            ])
        );
        let lb = json!({"metadata": meta("lb"), "spec": {"type": "LoadBalancer", "clusterIP": "10.0.0.8", "ports": [{"port": 443}]}});
        assert_eq!(table("", "Service", lb).2[3], json!("<pending>"));
        let ext = json!({"metadata": meta("x"), "spec": {"type": "ExternalName", "externalName": "db.example.com"}});
        let (_, _, cells) = table("", "Service", ext);
        assert_eq!(
            cells[2..5],
            [json!("<none>"), json!("db.example.com"), json!("<none>")]
        );
    }

    #[test]
    fn other_kinds_print_their_columns() {
        let (names, _, cells) = table(
            "policy",
            "PodDisruptionBudget",
            json!({"metadata": meta("p"), "spec": {"minAvailable": 2}}),
        );
        assert_eq!(
            names,
            [
                "Name",
                "Min Available",
                "Max Unavailable",
                "Allowed Disruptions",
                "Age"
            ]
        );
        assert_eq!(json!(cells), json!(["p", "2", "N/A", 0, "2m"]));

        let ing = json!({"metadata": meta("i"), "spec": {"rules": [{"host": "a.example.com"}, {"host": "b.example.com"}], "tls": [{}]}});
        let (names, _, cells) = table("networking.k8s.io", "Ingress", ing);
        assert_eq!(names, ["Name", "Class", "Hosts", "Address", "Ports", "Age"]);
        assert_eq!(
            json!(cells),
            json!([
                "i",
                "<none>",
                "a.example.com,b.example.com",
                "",
                "80, 443",
                "2m"
            ])
        );

        let (_, _, cells) = table(
            "apps",
            "ReplicaSet",
            json!({"metadata": meta("r"), "spec": {"replicas": 2,
            "selector": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]}]}}}),
        );
        assert_eq!(
            json!(cells),
            json!(["r", 2, 0, 0, "2m", "", "", "tier in (a,b)"])
        );
        let (_, _, cells) = table(
            "",
            "ReplicationController",
            json!({"metadata": meta("rc"), "spec": {"replicas": 1, "selector": {"app": "x"}}}),
        );
        assert_eq!(cells[7], json!("app=x"));

        let (names, _, cells) = table(
            "scheduling.k8s.io",
            "PriorityClass",
            json!({"metadata": meta("low"), "value": 0}),
        );
        assert_eq!(
            names,
            ["Name", "Value", "Global-Default", "Age", "PreemptionPolicy"]
        );
        assert_eq!(
            json!(cells),
            json!(["low", 0, false, "2m", "PreemptLowerPriority"])
        );

        let q = json!({"metadata": meta("q"), "spec": {"hard": {"pods": "3"}},
            "status": {"hard": {"pods": "3", "limits.cpu": "2"}, "used": {"pods": "1"}}});
        let (names, _, cells) = table("", "ResourceQuota", q);
        assert_eq!(names, ["Name", "Age", "Request", "Limit"]);
        assert_eq!(
            json!(cells),
            json!(["q", "2m", "pods: 1/3", "limits.cpu: 0/2"])
        );

        let sc = json!({"metadata": {"name": "fast", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
            "creationTimestamp": jiff::Timestamp::now().to_string()}, "provisioner": "x.csi"});
        let (_, _, cells) = table("storage.k8s.io", "StorageClass", sc);
        assert_eq!(
            json!(cells),
            json!([
                "fast (default)",
                "x.csi",
                "Delete",
                "Immediate",
                "false",
                "0s"
            ])
        );

        let (_, _, cells) = table(
            "",
            "Endpoints",
            json!({"metadata": meta("e"), "subsets": [{"addresses": [{"ip": "10.1.0.1"}, {"ip": "10.1.0.2"}], "ports": [{"port": 80}, {"port": 443}]}]}),
        );
        assert_eq!(
            cells[1],
            json!("10.1.0.1:80,10.1.0.1:443,10.1.0.2:80 + 1 more...")
        );

        let ds = json!({"metadata": meta("d"), "spec": {"template": {"spec": {"nodeSelector": {"os": "linux"}}}}, "status": {"desiredNumberScheduled": 2}});
        let (names, _, cells) = table("apps", "DaemonSet", ds);
        assert_eq!(
            names[..8],
            [
                "Name",
                "Desired",
                "Current",
                "Ready",
                "Up-to-date",
                "Available",
                "Node Selector",
                "Age"
            ]
        );
        assert_eq!(
            cells[..8],
            [
                json!("d"),
                json!(2),
                json!(0),
                json!(0),
                json!(0),
                json!(0),
                json!("os=linux"),
                json!("2m")
            ]
        );
    }
}
