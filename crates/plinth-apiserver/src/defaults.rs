//! Defaulting of built-in kinds on create and update, as kube-apiserver's registry applies
//! its published defaults (the `SetDefaults_*` functions of Kubernetes' API types) before
//! validation: what `kubectl get -o yaml`, `describe` and `apply` see on a real cluster.
//!
//! Covered: the workload controllers' spec defaults (Deployment strategy, history and
//! progress deadline; StatefulSet and DaemonSet update strategies; replicas;
//! ReplicationController selector and labels from its template), Service type, session
//! affinity and port protocol/targetPort, and in every Pod spec (Pods, PodTemplates and the
//! templates of the workload kinds) volumes without a source becoming `emptyDir: {}`,
//! `fieldRef.apiVersion: v1` and container port protocols. Pod defaults that change what
//! the embedded runner does (`imagePullPolicy`) are left to the runner's own rules.

use serde_json::{Map, Value, json};

use crate::resource::ResourceInfo;

/// Where a built-in kind keeps its Pod spec (a JSON pointer), if it has one.
pub(crate) fn pod_spec_pointer(info: &ResourceInfo) -> Option<&'static str> {
    if !info.builtin {
        return None;
    }
    match (info.group.as_str(), info.kind.as_str()) {
        ("", "Pod") => Some("/spec"),
        ("", "PodTemplate") => Some("/template/spec"),
        ("batch", "CronJob") => Some("/spec/jobTemplate/spec/template/spec"),
        ("apps", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet")
        | ("batch", "Job")
        | ("", "ReplicationController") => Some("/spec/template/spec"),
        _ => None,
    }
}

/// Applies the defaults of `info`'s kind to `obj` (a no-op for other kinds).
pub(crate) fn apply(info: &ResourceInfo, obj: &mut Value) {
    if !info.builtin {
        return;
    }
    let template = pod_spec_pointer(info).unwrap_or_default();
    match (info.group.as_str(), info.kind.as_str()) {
        ("apps", "Deployment") => deployment(obj),
        ("apps", "ReplicaSet") => {
            if let Some(s) = spec(obj) {
                set_absent(s, "replicas", json!(1));
            }
        }
        ("apps", "StatefulSet") => stateful_set(obj),
        ("apps", "DaemonSet") => daemon_set(obj),
        ("", "ReplicationController") => replication_controller(obj),
        ("", "Service") => service(obj),
        (crate::rbac::GROUP, "RoleBinding" | "ClusterRoleBinding") => role_binding(obj),
        _ => {}
    }
    if !template.is_empty()
        && let Some(pod) = obj.pointer_mut(template).and_then(Value::as_object_mut)
    {
        pod_spec(pod);
    }
}

/// Kubernetes' RBAC v1 defaults: a binding's `roleRef.apiGroup` and each subject's
/// `apiGroup` (`rbac.authorization.k8s.io` for User and Group, empty for a
/// ServiceAccount), so a hand-written binding without them is stored as `kubectl create`
/// would have written it.
fn role_binding(obj: &mut Value) {
    use crate::rbac::GROUP as RBAC;
    if let Some(r) = obj.get_mut("roleRef").and_then(Value::as_object_mut)
        && r.get("apiGroup")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .is_empty()
    {
        r.insert("apiGroup".into(), json!(RBAC));
    }
    for subject in obj
        .get_mut("subjects")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
    {
        if subject
            .get("apiGroup")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .is_empty()
        {
            let group = match subject.get("kind").and_then(Value::as_str) {
                Some("User" | "Group") => RBAC,
                _ => "",
            };
            subject.insert("apiGroup".into(), json!(group));
        }
    }
}

/// `spec` as an object (created when absent); `None` when it is not an object, which the
/// validation that follows reports.
fn spec(obj: &mut Value) -> Option<&mut Map<String, Value>> {
    let m = obj.as_object_mut()?;
    set_absent(m, "spec", json!({}));
    m.get_mut("spec").and_then(Value::as_object_mut)
}

fn set_absent(m: &mut Map<String, Value>, key: &str, v: Value) {
    if m.get(key).is_none_or(Value::is_null) {
        m.insert(key.to_string(), v);
    }
}

/// An object member (created when absent or null).
fn object<'a>(m: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Map<String, Value>> {
    set_absent(m, key, json!({}));
    m.get_mut(key).and_then(Value::as_object_mut)
}

fn deployment(obj: &mut Value) {
    let Some(s) = spec(obj) else { return };
    set_absent(s, "replicas", json!(1));
    set_absent(s, "revisionHistoryLimit", json!(10));
    set_absent(s, "progressDeadlineSeconds", json!(600));
    if let Some(strategy) = object(s, "strategy") {
        set_absent(strategy, "type", json!("RollingUpdate"));
        if strategy.get("type") == Some(&json!("RollingUpdate"))
            && let Some(ru) = object(strategy, "rollingUpdate")
        {
            set_absent(ru, "maxUnavailable", json!("25%"));
            set_absent(ru, "maxSurge", json!("25%"));
        }
    }
}

fn stateful_set(obj: &mut Value) {
    let Some(s) = spec(obj) else { return };
    set_absent(s, "replicas", json!(1));
    set_absent(s, "podManagementPolicy", json!("OrderedReady"));
    set_absent(s, "revisionHistoryLimit", json!(10));
    if let Some(strategy) = object(s, "updateStrategy") {
        set_absent(strategy, "type", json!("RollingUpdate"));
        if strategy.get("type") == Some(&json!("RollingUpdate"))
            && let Some(ru) = object(strategy, "rollingUpdate")
        {
            set_absent(ru, "partition", json!(0));
        }
    }
    if let Some(p) = object(s, "persistentVolumeClaimRetentionPolicy") {
        set_absent(p, "whenDeleted", json!("Retain"));
        set_absent(p, "whenScaled", json!("Retain"));
    }
}

fn daemon_set(obj: &mut Value) {
    let Some(s) = spec(obj) else { return };
    set_absent(s, "revisionHistoryLimit", json!(10));
    if let Some(strategy) = object(s, "updateStrategy") {
        set_absent(strategy, "type", json!("RollingUpdate"));
        if strategy.get("type") == Some(&json!("RollingUpdate"))
            && let Some(ru) = object(strategy, "rollingUpdate")
        {
            set_absent(ru, "maxUnavailable", json!(1));
            set_absent(ru, "maxSurge", json!(0));
        }
    }
}

/// A ReplicationController without a selector selects its template's labels, and one
/// without labels takes them too (so `kubectl expose rc` finds a selector).
fn replication_controller(obj: &mut Value) {
    let labels = obj
        .pointer("/spec/template/metadata/labels")
        .filter(|l| l.as_object().is_some_and(|m| !m.is_empty()))
        .cloned();
    let Some(s) = spec(obj) else { return };
    set_absent(s, "replicas", json!(1));
    let Some(labels) = labels else { return };
    if s.get("selector")
        .and_then(Value::as_object)
        .is_none_or(Map::is_empty)
    {
        s.insert("selector".into(), labels.clone());
    }
    if obj.get("metadata").is_none() {
        obj["metadata"] = json!({});
    }
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut)
        && meta
            .get("labels")
            .and_then(Value::as_object)
            .is_none_or(Map::is_empty)
    {
        meta.insert("labels".into(), labels);
    }
}

fn service(obj: &mut Value) {
    let Some(s) = spec(obj) else { return };
    set_absent(s, "type", json!("ClusterIP"));
    set_absent(s, "sessionAffinity", json!("None"));
    for p in s
        .get_mut("ports")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
    {
        set_absent(p, "protocol", json!("TCP"));
        if let Some(port) = p.get("port").cloned() {
            set_absent(p, "targetPort", port);
        }
    }
}

fn pod_spec(pod: &mut Map<String, Value>) {
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        for c in objects(pod.get_mut(list)) {
            for port in objects(c.get_mut("ports")) {
                set_absent(port, "protocol", json!("TCP"));
            }
            for env in objects(c.get_mut("env")) {
                if let Some(f) = env.pointer_mut_obj(&["valueFrom", "fieldRef"]) {
                    set_absent(f, "apiVersion", json!("v1"));
                }
            }
        }
    }
    for v in objects(pod.get_mut("volumes")) {
        // A volume with only a name is an emptyDir.
        if v.keys().all(|k| k == "name") {
            v.insert("emptyDir".into(), json!({}));
        }
        if let Some(d) = v.pointer_mut_obj(&["downwardAPI"]) {
            downward_items(d);
        }
        if let Some(p) = v.pointer_mut_obj(&["projected"]) {
            for src in objects(p.get_mut("sources")) {
                if let Some(d) = src.pointer_mut_obj(&["downwardAPI"]) {
                    downward_items(d);
                }
            }
        }
    }
}

fn downward_items(d: &mut Map<String, Value>) {
    for item in objects(d.get_mut("items")) {
        if let Some(f) = item.pointer_mut_obj(&["fieldRef"]) {
            set_absent(f, "apiVersion", json!("v1"));
        }
    }
}

/// The object elements of an array member.
fn objects(v: Option<&mut Value>) -> impl Iterator<Item = &mut Map<String, Value>> {
    v.and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(Value::as_object_mut)
}

trait PointerObj {
    fn pointer_mut_obj(&mut self, path: &[&str]) -> Option<&mut Map<String, Value>>;
}

impl PointerObj for Map<String, Value> {
    fn pointer_mut_obj(&mut self, path: &[&str]) -> Option<&mut Map<String, Value>> {
        let (first, rest) = path.split_first()?;
        let next = self.get_mut(*first)?.as_object_mut()?;
        if rest.is_empty() {
            Some(next)
        } else {
            next.pointer_mut_obj(rest)
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    fn defaulted(group: &str, kind: &str, mut obj: Value) -> Value {
        let info = crate::registry::builtins()
            .into_iter()
            .find(|i| i.group == group && i.kind == kind)
            .expect("a served kind");
        super::apply(&info, &mut obj);
        obj
    }

    #[test]
    fn deployments_get_kube_apiservers_defaults() {
        let d = defaulted(
            "apps",
            "Deployment",
            json!({"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}}),
        );
        assert_eq!(d["spec"]["replicas"], 1);
        assert_eq!(d["spec"]["revisionHistoryLimit"], 10);
        assert_eq!(d["spec"]["progressDeadlineSeconds"], 600);
        assert_eq!(
            d["spec"]["strategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
        );
        // What the client set stays; Recreate gets no rollingUpdate.
        let d = defaulted(
            "apps",
            "Deployment",
            json!({"spec": {"replicas": 0, "strategy": {"type": "Recreate"}}}),
        );
        assert_eq!(d["spec"]["replicas"], 0);
        assert_eq!(d["spec"]["strategy"], json!({"type": "Recreate"}));
    }

    #[test]
    fn pod_specs_get_empty_dirs_field_ref_versions_and_protocols() {
        let pod = json!({"spec": {
            "containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}],
                "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}],
            "volumes": [{"name": "scratch"}, {"name": "info", "downwardAPI": {"items": [{"path": "n", "fieldRef": {"fieldPath": "metadata.name"}}]}},
                        {"name": "cm", "configMap": {"name": "x"}}]}});
        let p = defaulted("", "Pod", pod.clone());
        assert_eq!(
            p["spec"]["volumes"][0],
            json!({"name": "scratch", "emptyDir": {}})
        );
        assert_eq!(
            p["spec"]["volumes"][1]["downwardAPI"]["items"][0]["fieldRef"]["apiVersion"],
            "v1"
        );
        assert_eq!(
            p["spec"]["volumes"][2],
            json!({"name": "cm", "configMap": {"name": "x"}})
        );
        let c = &p["spec"]["containers"][0];
        assert_eq!(c["env"][0]["valueFrom"]["fieldRef"]["apiVersion"], "v1");
        assert_eq!(c["ports"][0]["protocol"], "TCP");
        // The same in the Pod templates of the workload kinds.
        let cj = defaulted(
            "batch",
            "CronJob",
            json!({"spec": {"jobTemplate": {"spec": {"template": pod.clone()}}}}),
        );
        assert_eq!(
            cj.pointer("/spec/jobTemplate/spec/template/spec/volumes/0/emptyDir"),
            Some(&json!({}))
        );
        let rs = defaulted("apps", "ReplicaSet", json!({"spec": {"template": pod}}));
        assert_eq!(
            rs.pointer("/spec/template/spec/containers/0/ports/0/protocol"),
            Some(&json!("TCP"))
        );
        assert_eq!(rs["spec"]["replicas"], 1);
    }

    #[test]
    fn replication_controllers_select_their_template_labels() {
        let rc = defaulted(
            "",
            "ReplicationController",
            json!({"metadata": {"name": "r"}, "spec": {"template": {"metadata": {"labels": {"app": "redis"}}}}}),
        );
        assert_eq!(rc["spec"]["selector"], json!({"app": "redis"}));
        assert_eq!(rc["metadata"]["labels"], json!({"app": "redis"}));
        assert_eq!(rc["spec"]["replicas"], 1);
        let rc = defaulted(
            "",
            "ReplicationController",
            json!({"metadata": {"labels": {"own": "x"}}, "spec": {"selector": {"app": "a"}, "template": {"metadata": {"labels": {"app": "a", "v": "1"}}}}}),
        );
        assert_eq!(rc["spec"]["selector"], json!({"app": "a"}));
        assert_eq!(rc["metadata"]["labels"], json!({"own": "x"}));
    }

    #[test]
    fn services_and_sets_get_their_defaults() {
        let svc = defaulted(
            "",
            "Service",
            json!({"spec": {"ports": [{"port": 80}, {"port": 53, "protocol": "UDP", "targetPort": "dns"}]}}),
        );
        assert_eq!(svc["spec"]["type"], "ClusterIP");
        assert_eq!(svc["spec"]["sessionAffinity"], "None");
        assert_eq!(
            svc["spec"]["ports"],
            json!([{"port": 80, "protocol": "TCP", "targetPort": 80}, {"port": 53, "protocol": "UDP", "targetPort": "dns"}])
        );
        let sts = defaulted("apps", "StatefulSet", json!({"spec": {}}));
        assert_eq!(
            sts["spec"]["updateStrategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
        );
        assert_eq!(sts["spec"]["podManagementPolicy"], "OrderedReady");
        let ds = defaulted("apps", "DaemonSet", json!({"spec": {}}));
        assert_eq!(
            ds["spec"]["updateStrategy"]["rollingUpdate"],
            json!({"maxUnavailable": 1, "maxSurge": 0})
        );
        // Kinds without defaults here are left as they are; a spec that is not an object too.
        assert_eq!(
            defaulted("", "ConfigMap", json!({"data": {}})),
            json!({"data": {}})
        );
        assert_eq!(
            defaulted("apps", "Deployment", json!({"spec": "x"})),
            json!({"spec": "x"})
        );
    }
}
