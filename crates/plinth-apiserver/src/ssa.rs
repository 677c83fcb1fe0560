//! Field ownership (`metadata.managedFields`) and server-side apply
//! (`application/apply-patch+yaml`), following Kubernetes' structured-merge semantics.
//!
//! A field set is kept as a set of paths; a path is a list of fieldsV1 elements:
//! `f:<name>` (a map key), `k:<json>` (an item of an associative list, by its keys),
//! `v:<json>` (an item of a set list) and `.` markers for an item itself. The JSON form of
//! a set is the `fieldsV1` tree Kubernetes stores (`{"f:spec":{"f:replicas":{}}}`).
//!
//! Lists follow the resource's schema: `x-kubernetes-list-type: map` (keys from
//! `x-kubernetes-list-map-keys`) and `set` for custom resources; for built-in kinds the
//! merge keys of the Kubernetes types (the same table strategic merge patch uses);
//! everything else is atomic (owned and replaced as a whole).
//!
//! Rules, as in Kubernetes:
//! * apply: the applier's previous Apply set is replaced by the fields of the applied
//!   configuration; fields it stops applying are removed unless another manager owns
//!   them; a field owned by another manager whose value the apply would change is a
//!   conflict (409 naming manager and fields) unless `force=true`, which moves ownership;
//! * create/update/patch: the writer's Update entry gains every field whose value it
//!   changed, and other managers lose those fields; removed fields leave every entry;
//! * an object written before it had managedFields is owned by `before-first-apply`.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use crate::error::ApiError;
use crate::patch::{ListStrategy, list_strategy};
use crate::resource::ResourceInfo;

/// One path element in fieldsV1 notation (`f:name`, `k:{...}`, `v:...`, `.`).
type Path = Vec<String>;
/// A set of owned fields.
type FieldSet = BTreeSet<Path>;

/// Manager that owns an object's fields when it had none recorded.
pub const BEFORE_FIRST_APPLY: &str = "before-first-apply";

/// Manager of objects the server creates itself (standard namespaces, defaults).
pub const SERVER_MANAGER: &str = "plinth-apiserver";

/// Who writes: the manager and the operation Kubernetes records in `managedFields`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owner {
    /// A create, update or non-apply patch by this manager.
    Update(String),
    /// A server-side apply: the managedFields were computed by [`apply`].
    Apply,
    /// A server-internal write (garbage collection, finalization): ownership unchanged.
    Internal,
}

/// How the list at a path merges.
enum ListType {
    Atomic,
    Set,
    Map(Vec<String>),
}

/// Walks an object alongside its schema to decide list types.
struct Walker<'a> {
    info: &'a ResourceInfo,
}

impl Walker<'_> {
    fn list_type(&self, schema: Option<&Value>, dotted: &str, field: &str) -> ListType {
        if let Some(s) = schema {
            match s.get("x-kubernetes-list-type").and_then(|t| t.as_str()) {
                Some("set") => return ListType::Set,
                Some("map") => {
                    let keys = s
                        .get("x-kubernetes-list-map-keys")
                        .and_then(|k| k.as_array())
                        .map(|a| {
                            a.iter()
                                .filter_map(|k| k.as_str().map(String::from))
                                .collect()
                        })
                        .unwrap_or_default();
                    return ListType::Map(keys);
                }
                Some(_) => return ListType::Atomic,
                None => {}
            }
        }
        if !self.info.builtin && !dotted.starts_with(".metadata") {
            return ListType::Atomic;
        }
        let parent = dotted.strip_suffix(&format!(".{field}")).unwrap_or(dotted);
        match list_strategy(parent, field) {
            ListStrategy::MergeKey(k) => ListType::Map(vec![k.to_string()]),
            ListStrategy::MergePrimitive => ListType::Set,
            ListStrategy::Replace => ListType::Atomic,
        }
    }

    /// Collects the leaf paths (and item markers) of `v` into `out`.
    fn collect(
        &self,
        v: &Value,
        schema: Option<&Value>,
        dotted: &str,
        prefix: &mut Path,
        out: &mut FieldSet,
    ) {
        match v {
            Value::Object(m) if !m.is_empty() => {
                for (k, child) in m {
                    let cs = child_schema(schema, k);
                    prefix.push(format!("f:{k}"));
                    let d = format!("{dotted}.{k}");
                    if let Value::Array(items) = child {
                        self.collect_list(items, cs, &d, k, prefix, out);
                    } else {
                        self.collect(child, cs, &d, prefix, out);
                    }
                    prefix.pop();
                }
            }
            _ => {
                out.insert(prefix.clone());
            }
        }
    }

    fn collect_list(
        &self,
        items: &[Value],
        schema: Option<&Value>,
        dotted: &str,
        field: &str,
        prefix: &mut Path,
        out: &mut FieldSet,
    ) {
        let item_schema = schema.and_then(|s| s.get("items"));
        match self.list_type(schema, dotted, field) {
            ListType::Set if !items.is_empty() => {
                for i in items {
                    prefix.push(format!("v:{i}"));
                    out.insert(prefix.clone());
                    prefix.pop();
                }
            }
            ListType::Map(keys)
                if !items.is_empty() && items.iter().all(|i| key_of(i, &keys).is_some()) =>
            {
                for i in items {
                    prefix.push(format!("k:{}", key_of(i, &keys).unwrap_or_default()));
                    prefix.push(".".into());
                    out.insert(prefix.clone());
                    prefix.pop();
                    self.collect(i, item_schema, &format!("{dotted}[]"), prefix, out);
                    prefix.pop();
                }
            }
            _ => {
                out.insert(prefix.clone());
            }
        }
    }

    /// The tracked fields of an object: everything but identity, server-set metadata and
    /// (for resources with a status subresource) status.
    fn fields(&self, obj: &Value) -> FieldSet {
        let mut out = FieldSet::new();
        let schema = self.info.schema.as_ref();
        let Some(m) = obj.as_object() else {
            return out;
        };
        for (k, v) in m {
            match k.as_str() {
                "apiVersion" | "kind" => continue,
                "status" if self.info.status_subresource => continue,
                "metadata" => {
                    let Some(meta) = v.as_object() else { continue };
                    for mk in ["labels", "annotations", "finalizers", "ownerReferences"] {
                        let Some(mv) = meta.get(mk) else { continue };
                        let mut prefix = vec!["f:metadata".to_string(), format!("f:{mk}")];
                        let d = format!(".metadata.{mk}");
                        match mv {
                            Value::Array(items) => {
                                self.collect_list(items, None, &d, mk, &mut prefix, &mut out)
                            }
                            _ => self.collect(mv, None, &d, &mut prefix, &mut out),
                        }
                    }
                }
                _ => {
                    let mut prefix = vec![format!("f:{k}")];
                    let cs = child_schema(schema, k);
                    let d = format!(".{k}");
                    match v {
                        Value::Array(items) => {
                            self.collect_list(items, cs, &d, k, &mut prefix, &mut out)
                        }
                        _ => self.collect(v, cs, &d, &mut prefix, &mut out),
                    }
                }
            }
        }
        out
    }

    /// Merges an applied configuration into `live` (maps field by field, associative
    /// lists item by item, sets as unions, everything else replaced).
    fn merge(&self, live: &mut Value, applied: &Value, schema: Option<&Value>, dotted: &str) {
        if !(live.is_object() && applied.is_object()) {
            *live = applied.clone();
            return;
        }
        let (Some(lm), Some(am)) = (live.as_object_mut(), applied.as_object()) else {
            return;
        };
        for (k, av) in am {
            let cs = child_schema(schema, k);
            let d = format!("{dotted}.{k}");
            let same_shape =
                |l: &Value| (l.is_object() && av.is_object()) || (l.is_array() && av.is_array());
            if !lm.get(k).is_some_and(same_shape) {
                lm.insert(k.clone(), av.clone());
                continue;
            }
            let Some(lv) = lm.get_mut(k) else { continue };
            match (lv, av) {
                (Value::Array(litems), Value::Array(aitems)) => {
                    let lt = self.list_type(cs, &d, k);
                    let item_schema = cs.and_then(|s| s.get("items"));
                    merge_list(self, litems, aitems, lt, item_schema, &d);
                }
                (lv, _) => self.merge(lv, av, cs, &d),
            }
        }
    }
}

fn merge_list(
    w: &Walker,
    live: &mut Vec<Value>,
    applied: &[Value],
    lt: ListType,
    item_schema: Option<&Value>,
    dotted: &str,
) {
    match lt {
        ListType::Set => {
            for a in applied {
                if !live.contains(a) {
                    live.push(a.clone());
                }
            }
        }
        ListType::Map(keys) if applied.iter().all(|i| key_of(i, &keys).is_some()) => {
            for a in applied {
                let k = key_of(a, &keys);
                match live.iter_mut().find(|l| key_of(l, &keys) == k) {
                    Some(l) => w.merge(l, a, item_schema, &format!("{dotted}[]")),
                    None => live.push(a.clone()),
                }
            }
        }
        _ => *live = applied.to_vec(),
    }
}

fn child_schema<'a>(schema: Option<&'a Value>, key: &str) -> Option<&'a Value> {
    let s = schema?;
    s.get("properties")
        .and_then(|p| p.get(key))
        .or_else(|| s.get("additionalProperties").filter(|a| a.is_object()))
}

/// The `k:` key of an associative-list item: a JSON object of its key fields.
fn key_of(item: &Value, keys: &[String]) -> Option<String> {
    let m = item.as_object()?;
    let mut k = Map::new();
    for key in keys {
        k.insert(key.clone(), m.get(key)?.clone());
    }
    Some(Value::Object(k).to_string())
}

/// The value at a path of an object (`None` when absent); item markers address the item.
fn value_at<'a>(obj: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut cur = obj;
    for el in path {
        if el == "." {
            continue;
        }
        cur = step(cur, el)?;
    }
    Some(cur)
}

fn step<'a>(cur: &'a Value, el: &str) -> Option<&'a Value> {
    if let Some(f) = el.strip_prefix("f:") {
        return cur.get(f);
    }
    let items = cur.as_array()?;
    if let Some(k) = el.strip_prefix("k:") {
        let want: Map<String, Value> = serde_json::from_str(k).ok()?;
        return items
            .iter()
            .find(|i| want.iter().all(|(wk, wv)| i.get(wk) == Some(wv)));
    }
    if let Some(v) = el.strip_prefix("v:") {
        let want: Value = serde_json::from_str(v).ok()?;
        return items.iter().find(|i| **i == want);
    }
    None
}

/// Removes the field at `path` from `obj` (an item marker removes the whole item).
fn remove_at(obj: &mut Value, path: &[String]) {
    let path: Vec<&String> = path.iter().filter(|e| *e != ".").collect();
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = obj;
    for el in parents {
        let next = if let Some(f) = el.strip_prefix("f:") {
            cur.get_mut(f)
        } else {
            let Some(found) = step(cur, el).cloned() else {
                return;
            };
            cur.as_array_mut()
                .and_then(|a| a.iter_mut().find(|i| **i == found))
        };
        match next {
            Some(n) => cur = n,
            None => return,
        }
    }
    if let Some(f) = last.strip_prefix("f:") {
        if let Some(m) = cur.as_object_mut() {
            m.remove(f);
        }
    } else if let Some(found) = step(cur, last).cloned()
        && let Some(a) = cur.as_array_mut()
    {
        a.retain(|i| *i != found);
    }
}

/// Kubernetes' display form of a path: `.spec.containers[name="a"].image`.
fn display(path: &[String]) -> String {
    let mut s = String::new();
    for el in path {
        if let Some(f) = el.strip_prefix("f:") {
            s.push('.');
            s.push_str(f);
        } else if let Some(k) = el.strip_prefix("k:") {
            let m: Map<String, Value> = serde_json::from_str(k).unwrap_or_default();
            let parts: Vec<String> = m.iter().map(|(k, v)| format!("{k}={v}")).collect();
            s.push_str(&format!("[{}]", parts.join(",")));
        } else if let Some(v) = el.strip_prefix("v:") {
            s.push_str(&format!("[={v}]"));
        }
    }
    s
}

/// The fieldsV1 tree of a set.
fn to_tree(set: &FieldSet) -> Value {
    let mut root = Map::new();
    for p in set {
        let mut cur = &mut root;
        for el in p {
            cur = cur
                .entry(el.clone())
                .or_insert_with(|| json!({}))
                .as_object_mut()
                .expect("fieldsV1 nodes are objects");
        }
    }
    Value::Object(root)
}

/// The set of a fieldsV1 tree (leaves and `.` markers are members).
fn from_tree(tree: &Value) -> FieldSet {
    fn walk(v: &Value, prefix: &mut Path, out: &mut FieldSet) {
        match v.as_object() {
            Some(m) if !m.is_empty() => {
                for (k, c) in m {
                    prefix.push(k.clone());
                    walk(c, prefix, out);
                    prefix.pop();
                }
            }
            _ => {
                if !prefix.is_empty() {
                    out.insert(prefix.clone());
                }
            }
        }
    }
    let mut out = FieldSet::new();
    walk(tree, &mut Vec::new(), &mut out);
    out
}

/// One `managedFields` entry.
#[derive(Clone, Debug)]
struct Entry {
    manager: String,
    operation: String,
    api_version: String,
    time: Option<Value>,
    subresource: Option<String>,
    fields: FieldSet,
    changed: bool,
}

impl Entry {
    fn is(&self, manager: &str, operation: &str) -> bool {
        self.manager == manager && self.operation == operation && self.subresource.is_none()
    }

    fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("manager".into(), json!(self.manager));
        m.insert("operation".into(), json!(self.operation));
        m.insert("apiVersion".into(), json!(self.api_version));
        let time = match (&self.time, self.changed) {
            (Some(t), false) => t.clone(),
            _ => json!(crate::timestamp::now()),
        };
        m.insert("time".into(), time);
        m.insert("fieldsType".into(), json!("FieldsV1"));
        m.insert("fieldsV1".into(), to_tree(&self.fields));
        if let Some(s) = &self.subresource {
            m.insert("subresource".into(), json!(s));
        }
        Value::Object(m)
    }
}

/// The managedFields entries of a stored object; for an apply, an existing object
/// without any is owned entirely by [`BEFORE_FIRST_APPLY`].
fn entries(w: &Walker, obj: Option<&Value>, for_apply: bool) -> Vec<Entry> {
    let Some(obj) = obj else { return Vec::new() };
    let mf = obj
        .pointer("/metadata/managedFields")
        .and_then(|m| m.as_array());
    match mf {
        Some(list) if !list.is_empty() => list
            .iter()
            .map(|e| Entry {
                manager: e["manager"].as_str().unwrap_or_default().to_string(),
                operation: e["operation"].as_str().unwrap_or("Update").to_string(),
                api_version: e["apiVersion"].as_str().unwrap_or_default().to_string(),
                time: e.get("time").cloned(),
                subresource: e
                    .get("subresource")
                    .and_then(|s| s.as_str())
                    .map(String::from),
                fields: from_tree(e.get("fieldsV1").unwrap_or(&Value::Null)),
                changed: false,
            })
            .collect(),
        _ if !for_apply => Vec::new(),
        _ => {
            let fields = w.fields(obj);
            if fields.is_empty() {
                return Vec::new();
            }
            vec![Entry {
                manager: BEFORE_FIRST_APPLY.into(),
                operation: "Update".into(),
                api_version: obj["apiVersion"].as_str().unwrap_or_default().to_string(),
                time: None,
                subresource: None,
                fields,
                changed: true,
            }]
        }
    }
}

fn entries_json(list: Vec<Entry>) -> Value {
    Value::Array(
        list.into_iter()
            .filter(|e| !e.fields.is_empty())
            .map(|e| e.to_json())
            .collect(),
    )
}

/// Records the ownership of a non-apply write: `new` gets its `metadata.managedFields`
/// from `old`'s, with `owner` taking the fields it changed. `old` is None on create.
pub fn record_update(info: &ResourceInfo, old: Option<&Value>, new: &mut Value, owner: &Owner) {
    let w = Walker { info };
    let manager = match owner {
        Owner::Update(m) => m.clone(),
        Owner::Apply => return,
        Owner::Internal if old.is_none() => SERVER_MANAGER.to_string(),
        Owner::Internal => {
            let keep = old
                .and_then(|o| o.pointer("/metadata/managedFields"))
                .cloned();
            set_managed(new, keep);
            return;
        }
    };
    // A write that changes no tracked field (a status write, a resourceVersion-only
    // change) leaves the ownership as it was. Most writes under load are such status
    // writes, and building the field sets of a Pod or Job costs thousands of allocations.
    if let Some(o) = old
        && o.pointer("/metadata/managedFields")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty())
        && tracked_equal(info, o, new)
    {
        let keep = o.pointer("/metadata/managedFields").cloned();
        set_managed(new, keep);
        return;
    }
    let old_set = old.map(|o| w.fields(o)).unwrap_or_default();
    let new_set = w.fields(new);
    let changed: FieldSet = new_set
        .iter()
        .filter(|p| {
            !old_set.contains(*p)
                || (p.last().is_some_and(|l| l != ".")
                    && old.and_then(|o| value_at(o, p)) != value_at(new, p))
        })
        .cloned()
        .collect();
    let mut list = entries(&w, old, false);
    let mut found = false;
    for e in &mut list {
        let before = e.fields.len();
        e.fields.retain(|p| new_set.contains(p));
        let mine = e.is(&manager, "Update");
        if mine {
            found = true;
            let n = e.fields.len();
            e.fields.extend(changed.iter().cloned());
            e.changed |= e.fields.len() != n;
            e.api_version = info.api_version();
        } else if e.subresource.is_none() {
            e.fields.retain(|p| !changed.contains(p));
        }
        e.changed |= e.fields.len() != before && mine;
    }
    if !found && !changed.is_empty() {
        list.push(Entry {
            manager,
            operation: "Update".into(),
            api_version: info.api_version(),
            time: None,
            subresource: None,
            fields: changed,
            changed: true,
        });
    }
    set_managed(new, Some(entries_json(list)));
}

/// Whether `a` and `b` hold the same values in every field ownership tracks (see
/// `Walker::fields`): all top-level fields but `apiVersion`, `kind` and a status
/// served by its own subresource, and the metadata labels, annotations, finalizers
/// and owner references. Equal tracked values give equal field sets with no changed
/// value, so the field sets need not be built.
fn tracked_equal(info: &ResourceInfo, a: &Value, b: &Value) -> bool {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a == b;
    };
    let tracked = |k: &str| {
        !matches!(k, "apiVersion" | "kind" | "metadata")
            && (k != "status" || !info.status_subresource)
    };
    let count = |m: &Map<String, Value>| m.keys().filter(|k| tracked(k)).count();
    count(a) == count(b)
        && a.iter()
            .filter(|(k, _)| tracked(k))
            .all(|(k, v)| b.get(k) == Some(v))
        && ["labels", "annotations", "finalizers", "ownerReferences"]
            .iter()
            .all(|f| {
                a.get("metadata").and_then(|m| m.get(*f))
                    == b.get("metadata").and_then(|m| m.get(*f))
            })
}

fn set_managed(obj: &mut Value, mf: Option<Value>) {
    let Some(m) = obj.get_mut("metadata").and_then(|m| m.as_object_mut()) else {
        return;
    };
    match mf {
        Some(v) if v.as_array().is_some_and(|a| !a.is_empty()) => {
            m.insert("managedFields".into(), v);
        }
        _ => {
            m.remove("managedFields");
        }
    }
}

/// One conflict: another manager owns a field whose value the apply would change.
struct Conflict {
    manager: String,
    operation: String,
    api_version: String,
    path: Path,
}

impl Conflict {
    /// Kubernetes' manager wording: `"kubectl-create" using v1` for updaters.
    fn who(&self) -> String {
        if self.operation == "Update" {
            format!("{:?} using {}", self.manager, self.api_version)
        } else {
            format!("{:?}", self.manager)
        }
    }
}

fn conflict_error(info: &ResourceInfo, name: &str, conflicts: &[Conflict]) -> ApiError {
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|c| json!({"reason": "FieldManagerConflict", "message": format!("conflict with {}", c.who()), "field": display(&c.path)}))
        .collect();
    let message = if conflicts.len() == 1 {
        let c = &conflicts[0];
        format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            c.who(),
            display(&c.path)
        )
    } else {
        let mut by: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for c in conflicts {
            by.entry(c.who()).or_default().push(display(&c.path));
        }
        let parts: Vec<String> = by
            .iter()
            .map(|(who, paths)| format!("conflicts with {who}:\n- {}", paths.join("\n- ")))
            .collect();
        format!(
            "Apply failed with {} conflicts: {}",
            conflicts.len(),
            parts.join("\n")
        )
    };
    ApiError {
        code: 409,
        reason: "Conflict",
        message,
        details: Some(
            json!({"name": name, "group": info.group, "kind": info.plural, "causes": causes}),
        ),
    }
}

/// kube-apiserver's way from client-side to server-side apply: an apply by a `kubectl…`
/// manager whose conflicts are all fields of the object's last-applied annotation that still
/// hold the annotated value takes those fields over (`kubectl apply --server-side` after
/// `kubectl apply`; kubectl then moves the rest of the client-side ownership itself). A field
/// changed since by anyone else still conflicts.
fn allowed_by_last_applied(
    w: &Walker,
    manager: &str,
    live: &Value,
    conflicts: &[Conflict],
) -> bool {
    if !manager.starts_with("kubectl") {
        return false;
    }
    let Some(last) = live
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(LAST_APPLIED))
        .and_then(Value::as_str)
        .and_then(|s| serde_json::from_str::<Value>(s).ok())
    else {
        return false;
    };
    let annotated = w.fields(&last);
    conflicts
        .iter()
        .all(|c| annotated.contains(&c.path) && value_at(&last, &c.path) == value_at(live, &c.path))
}

const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// kube-apiserver keeps a client-side apply annotation current on `kubectl apply
/// --server-side` (manager `kubectl`): an object that has one gets the applied
/// configuration (without the annotation itself), so a later client-side apply or
/// `kubectl apply view-last-applied` sees what was applied last.
fn update_last_applied(manager: &str, object: &mut Value, cfg: &Value) {
    if manager != "kubectl" {
        return;
    }
    let Some(annotations) = object
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
        .filter(|a| a.contains_key(LAST_APPLIED))
    else {
        return;
    };
    let mut applied = cfg.clone();
    if let Some(a) = applied
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        a.remove(LAST_APPLIED);
    }
    annotations.insert(LAST_APPLIED.into(), json!(applied.to_string()));
}

/// The outcome of merging an applied configuration.
pub struct Applied {
    /// The proposed object, with its new `metadata.managedFields`.
    pub object: Value,
}

/// Server-side apply of `config` by `manager` onto `live` (None when the object does not
/// exist yet). Errors: 409 Conflict naming the other managers and fields unless `force`.
pub fn apply(
    info: &ResourceInfo,
    live: Option<&Value>,
    config: &Value,
    manager: &str,
    force: bool,
) -> Result<Applied, ApiError> {
    let w = Walker { info };
    let name = config
        .pointer("/metadata/name")
        .and_then(|n| n.as_str())
        .unwrap_or_default();
    let mut cfg = config.clone();
    if let Some(m) = cfg.get_mut("metadata").and_then(|m| m.as_object_mut()) {
        m.remove("managedFields");
        m.remove("resourceVersion");
    }
    let applied_set = w.fields(&cfg);
    let mut list = entries(&w, live, true);
    let base = live.cloned().unwrap_or_else(|| json!({}));
    // Conflicts: another manager owns a field the apply would set to a different value.
    let mut conflicts = Vec::new();
    for e in list.iter().filter(|e| !e.is(manager, "Apply")) {
        if e.subresource.is_some() {
            continue;
        }
        for p in e.fields.intersection(&applied_set) {
            if p.last().is_some_and(|l| l == ".") {
                continue;
            }
            if value_at(&base, p) != value_at(&cfg, p) {
                conflicts.push(Conflict {
                    manager: e.manager.clone(),
                    operation: e.operation.clone(),
                    api_version: e.api_version.clone(),
                    path: p.clone(),
                });
            }
        }
    }
    let upgrade = !conflicts.is_empty() && allowed_by_last_applied(&w, manager, &base, &conflicts);
    if !conflicts.is_empty() && !force && !upgrade {
        return Err(conflict_error(info, name, &conflicts));
    }
    let taken: FieldSet = conflicts.into_iter().map(|c| c.path).collect();
    let previous: FieldSet = list
        .iter()
        .find(|e| e.is(manager, "Apply"))
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    let mut object = base;
    // Fields this manager applied before and no longer applies, owned by nobody else.
    let others: FieldSet = list
        .iter()
        .filter(|e| !e.is(manager, "Apply"))
        .flat_map(|e| e.fields.iter().cloned())
        .collect();
    let mut dropped: Vec<&Path> = previous
        .iter()
        .filter(|p| !applied_set.contains(*p) && !others.contains(*p))
        .collect();
    dropped.sort_by_key(|p| std::cmp::Reverse(p.len()));
    for p in dropped {
        remove_at(&mut object, p);
    }
    w.merge(&mut object, &cfg, info.schema.as_ref(), "");
    update_last_applied(manager, &mut object, &cfg);
    for e in list.iter_mut().filter(|e| !e.is(manager, "Apply")) {
        let n = e.fields.len();
        e.fields.retain(|p| !taken.contains(p));
        e.changed |= n != e.fields.len();
    }
    match list.iter().position(|e| e.is(manager, "Apply")) {
        Some(i) => {
            let e = &mut list[i];
            e.changed |= e.fields != applied_set || e.api_version != info.api_version();
            e.fields = applied_set;
            e.api_version = info.api_version();
        }
        None => list.push(Entry {
            manager: manager.to_string(),
            operation: "Apply".into(),
            api_version: info.api_version(),
            time: None,
            subresource: None,
            fields: applied_set,
            changed: true,
        }),
    }
    set_managed(&mut object, Some(entries_json(list)));
    Ok(Applied { object })
}

/// The manager of a non-apply write: `fieldManager` if given, else the User-Agent's
/// product name (as Kubernetes derives it).
pub fn default_manager(field_manager: Option<&str>, user_agent: Option<&str>) -> String {
    if let Some(m) = field_manager.filter(|m| !m.is_empty()) {
        return m.to_string();
    }
    user_agent
        .and_then(|ua| ua.split('/').next())
        .filter(|s| !s.is_empty())
        .unwrap_or("unknown")
        .chars()
        .take(128)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cm_info() -> ResourceInfo {
        crate::registry::builtins()
            .into_iter()
            .find(|i| i.plural == "configmaps")
            .unwrap()
    }

    fn deploy_like() -> ResourceInfo {
        crate::registry::builtins()
            .into_iter()
            .find(|i| i.plural == "pods")
            .unwrap()
    }

    #[test]
    fn fields_v1_tree_of_containers() {
        let info = deploy_like();
        let w = Walker { info: &info };
        let obj = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "1"}},
            "spec": {"containers": [{"name": "c", "image": "i", "args": ["x"]}]}});
        let tree = to_tree(&w.fields(&obj));
        assert_eq!(
            tree,
            json!({"f:metadata": {"f:labels": {"f:a": {}}}, "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:args": {}, "f:image": {}, "f:name": {}}}}})
        );
        assert_eq!(from_tree(&tree), w.fields(&obj));
    }

    #[test]
    fn apply_conflicts_with_updater_and_force_takes_ownership() {
        let info = cm_info();
        let mut live = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "1", "o": "x"}});
        record_update(
            &info,
            None,
            &mut live,
            &Owner::Update("kubectl-create".into()),
        );
        let cfg = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "2"}});
        let e = apply(&info, Some(&live), &cfg, "me", false).err().unwrap();
        assert_eq!(e.code, 409);
        assert_eq!(
            e.message,
            "Apply failed with 1 conflict: conflict with \"kubectl-create\" using v1: .data.k"
        );
        let out = apply(&info, Some(&live), &cfg, "me", true).unwrap().object;
        assert_eq!(out["data"], json!({"k": "2", "o": "x"}));
        let mf = out["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(mf[0]["fieldsV1"], json!({"f:data": {"f:o": {}}}));
        assert_eq!(mf[1]["manager"], "me");
        assert_eq!(mf[1]["fieldsV1"], json!({"f:data": {"f:k": {}}}));
        // Same value: shared ownership, no conflict.
        let same = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"o": "x"}});
        assert!(apply(&info, Some(&live), &same, "me", false).is_ok());
    }

    #[test]
    fn kubectl_server_side_apply_takes_over_what_client_side_apply_last_applied() {
        let info = cm_info();
        let last = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"k":"1","o":"x"}}"#;
        let mut live = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "annotations": {"kubectl.kubernetes.io/last-applied-configuration": last}},
            "data": {"k": "1", "o": "x"}});
        record_update(
            &info,
            None,
            &mut live,
            &Owner::Update("kubectl-client-side-apply".into()),
        );
        let cfg = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "2"}});
        let out = apply(&info, Some(&live), &cfg, "kubectl", false)
            .unwrap()
            .object;
        assert_eq!(out["data"], json!({"k": "2", "o": "x"}));
        let mf = out["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(mf.last().unwrap()["manager"], "kubectl");
        assert_eq!(
            mf.last().unwrap()["fieldsV1"],
            json!({"f:data": {"f:k": {}}})
        );
        // Other managers than kubectl's, and fields changed since the annotation, conflict.
        assert_eq!(
            apply(&info, Some(&live), &cfg, "helm", false)
                .err()
                .unwrap()
                .code,
            409
        );
        let mut edited = live.clone();
        edited["data"]["k"] = json!("edited");
        record_update(
            &info,
            Some(&live),
            &mut edited,
            &Owner::Update("kubectl-client-side-apply".into()),
        );
        assert_eq!(
            apply(&info, Some(&edited), &cfg, "kubectl", false)
                .err()
                .unwrap()
                .code,
            409
        );
    }

    #[test]
    fn apply_removes_fields_no_longer_applied_and_is_idempotent() {
        let info = cm_info();
        let cfg1 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": {"a": "1"}}, "data": {"k": "1", "gone": "x"}});
        let live = apply(&info, None, &cfg1, "me", false).unwrap().object;
        let again = apply(&info, Some(&live), &cfg1, "me", false)
            .unwrap()
            .object;
        assert_eq!(
            again, live,
            "re-applying the same configuration changes nothing"
        );
        let cfg2 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "1"}});
        let out = apply(&info, Some(&live), &cfg2, "me", false)
            .unwrap()
            .object;
        assert_eq!(out["data"], json!({"k": "1"}));
        assert!(
            out["metadata"]
                .get("labels")
                .is_none_or(|l| l == &json!({}))
        );
    }

    #[test]
    fn writes_that_change_no_tracked_field_keep_the_ownership() {
        let info = deploy_like();
        assert!(info.status_subresource);
        let mut live = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {"a": "1"}, "resourceVersion": "1"},
            "spec": {"containers": [{"name": "c", "image": "i"}]}});
        record_update(&info, None, &mut live, &Owner::Update("creator".into()));
        let created = live["metadata"]["managedFields"].clone();
        assert_eq!(created[0]["manager"], "creator");

        // A status write (and a new resourceVersion) leaves managedFields as they were.
        let mut status = live.clone();
        status["status"] = json!({"phase": "Running"});
        status["metadata"]["resourceVersion"] = json!("2");
        record_update(
            &info,
            Some(&live),
            &mut status,
            &Owner::Update("kubelet".into()),
        );
        assert_eq!(status["metadata"]["managedFields"], created);

        // A label change is recorded for its writer, and taken from the creator.
        let mut relabel = status.clone();
        relabel["metadata"]["labels"]["a"] = json!("2");
        record_update(
            &info,
            Some(&status),
            &mut relabel,
            &Owner::Update("labeller".into()),
        );
        let mf = relabel["metadata"]["managedFields"].as_array().unwrap();
        assert_eq!(mf.len(), 2, "{mf:?}");
        assert_eq!(mf[1]["manager"], "labeller");
        assert_eq!(
            mf[1]["fieldsV1"],
            json!({"f:metadata": {"f:labels": {"f:a": {}}}})
        );
        assert!(
            mf[0]["fieldsV1"]["f:metadata"]
                .get("f:labels")
                .is_none_or(|l| l.get("f:a").is_none())
        );
    }

    #[test]
    fn object_without_managed_fields_belongs_to_before_first_apply() {
        let info = cm_info();
        let live = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "1"}});
        let cfg = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "2"}});
        let e = apply(&info, Some(&live), &cfg, "me", false).err().unwrap();
        assert!(e.message.contains(BEFORE_FIRST_APPLY), "{}", e.message);
    }
}
