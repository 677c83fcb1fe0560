//! Custom-resource admission against a structural schema: pruning, defaulting, nullable,
//! int-or-string, embedded resources, list types, keyword validation (jsonschema) and
//! `x-kubernetes-validations` CEL rules (kube-cel).
//!
//! Compiled validators are cached per (group, version, kind, schema) hash, so the schema
//! is compiled once and every later admission only walks the object.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock};

use jsonschema::error::{TypeKind, ValidationErrorKind};
use serde_json::{Map, Value};

use super::messages::{
    duplicate, invalid, not_supported, quote, render_value, required, too_long, too_many,
    type_invalid, type_name, with_reason,
};
use crate::resource::{Cause, ResourceInfo};

/// Admit a custom resource: mutate `obj` as the Kubernetes API server does for a CRD
/// version's structural schema, then validate it.
///
/// Order (as in the apiextensions API server): (1) prune fields the schema does not
/// declare, except under `x-kubernetes-preserve-unknown-fields`, never `apiVersion`/`kind`/
/// `metadata` at the root nor of an `x-kubernetes-embedded-resource`; (2) drop `null`s of
/// non-nullable fields and apply `default`s (in objects, array items and map values,
/// recursively into defaulted values); (3) validate: embedded resources need `apiVersion`
/// and `kind`, `x-kubernetes-list-type: set|map` uniqueness, OpenAPI keywords (`type`
/// incl. `nullable` and `x-kubernetes-int-or-string`, `enum`, `pattern`, lengths, ranges,
/// `required`, ...; `metadata.name`/`generateName` restrictions of the root schema);
/// (4) when those pass, `x-kubernetes-validations` CEL rules, with `oldSelf` bound from
/// `old` for transition rules (skipped on create, as Kubernetes does).
///
/// Does nothing for built-in kinds (`info.builtin`) or when `info.schema` is `None`.
///
/// # Errors
/// All failures as Kubernetes field [`Cause`]s, e.g. field `spec.replicas`, message
/// `Invalid value: "string": spec.replicas in body must be of type integer: "string"`.
pub fn admit(info: &ResourceInfo, obj: &mut Value, old: Option<&Value>) -> Result<(), Vec<Cause>> {
    let Some(schema) = info.schema.as_ref() else {
        return Ok(());
    };
    if info.builtin {
        return Ok(());
    }
    let compiled = compiled_for(info, schema)?;
    let mut discard = Vec::new();
    prune(obj, schema, "", Mode::Root, &mut discard);
    apply_defaults(obj, schema);

    let mut causes = Vec::new();
    check_extensions(obj, schema, "", &mut causes);
    for err in compiled.keywords.iter_errors(obj) {
        if let Some(c) = keyword_cause(&err, obj)
            && !causes.contains(&c)
        {
            causes.push(c);
        }
    }
    if causes.is_empty()
        && let Some(cel) = compiled.cel.as_ref()
    {
        let mut old_pruned = old.cloned();
        if let Some(o) = old_pruned.as_mut() {
            prune(o, schema, "", Mode::Root, &mut Vec::new());
            apply_defaults(o, schema);
        }
        if let Err(errors) = kube_cel::validate_compiled(cel, obj, old_pruned.as_ref()) {
            for e in errors.iter() {
                causes.push(cel_cause(e, obj));
            }
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(causes)
    }
}

/// Paths of the fields that pruning would drop from `obj` (without changing it), in
/// Kubernetes field-path form (`spec.foo`, `spec.items[0].bar`), in document order.
///
/// Used for `fieldValidation=Strict` (answer `400 BadRequest` with
/// [`super::strict_decoding_error`]) and `fieldValidation=Warn` (one `Warning` header per
/// path). Empty for built-in kinds and resources without a schema.
pub fn unknown_fields(info: &ResourceInfo, obj: &Value) -> Vec<String> {
    let Some(schema) = info.schema.as_ref() else {
        return Vec::new();
    };
    if info.builtin {
        return Vec::new();
    }
    let mut copy = obj.clone();
    let mut paths = Vec::new();
    prune(&mut copy, schema, "", Mode::Root, &mut paths);
    paths
}

// ---------------------------------------------------------------------------------------
// Compilation cache

struct Compiled {
    keywords: jsonschema::Validator,
    cel: Option<kube_cel::CompiledSchema>,
}

type Cache = Mutex<HashMap<u64, Arc<Compiled>>>;

/// Upper bound on cached schemas; the cache is cleared when exceeded (schemas change
/// rarely, so this only bounds memory after many CRD updates).
const CACHE_LIMIT: usize = 512;

fn cache() -> &'static Cache {
    static CACHE: OnceLock<Cache> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

fn compiled_for(info: &ResourceInfo, schema: &Value) -> Result<Arc<Compiled>, Vec<Cause>> {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    info.group.hash(&mut h);
    info.version.hash(&mut h);
    info.kind.hash(&mut h);
    hash_value(schema, &mut h);
    let key = h.finish();
    if let Some(c) = cache().lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Ok(c.clone());
    }
    let converted = to_json_schema(schema, true);
    let keywords = jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .should_validate_formats(true)
        .should_ignore_unknown_formats(true)
        .build(&converted)
        .map_err(|e| {
            vec![invalid(
                "",
                &Value::from(info.kind.clone()),
                &format!(
                    "the schema of {} cannot be compiled: {e}",
                    info.api_version()
                ),
            )]
        })?;
    let cel = has_cel_rules(schema).then(|| kube_cel::compile_schema(schema));
    let compiled = Arc::new(Compiled { keywords, cel });
    let mut guard = cache().lock().unwrap_or_else(|e| e.into_inner());
    if guard.len() >= CACHE_LIMIT {
        guard.clear();
    }
    guard.insert(key, compiled.clone());
    Ok(compiled)
}

fn hash_value<H: Hasher>(v: &Value, h: &mut H) {
    match v {
        Value::Null => 0u8.hash(h),
        Value::Bool(b) => (1u8, b).hash(h),
        Value::Number(n) => (2u8, n.to_string()).hash(h),
        Value::String(s) => (3u8, s).hash(h),
        Value::Array(a) => {
            (4u8, a.len()).hash(h);
            for x in a {
                hash_value(x, h);
            }
        }
        Value::Object(o) => {
            (5u8, o.len()).hash(h);
            for (k, x) in o {
                k.hash(h);
                hash_value(x, h);
            }
        }
    }
}

/// True when any node of the schema carries `x-kubernetes-validations`.
pub(crate) fn has_cel_rules(s: &Value) -> bool {
    match s {
        Value::Object(o) => {
            o.get("x-kubernetes-validations")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty())
                || o.values().any(has_cel_rules)
        }
        Value::Array(a) => a.iter().any(has_cel_rules),
        _ => false,
    }
}

// ---------------------------------------------------------------------------------------
// Pruning and defaulting

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Root,
    Embedded,
    Nested,
}

fn flag(s: &Value, key: &str) -> bool {
    s.get(key).and_then(Value::as_bool) == Some(true)
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn prune(v: &mut Value, s: &Value, path: &str, mode: Mode, dropped: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            let preserve = flag(s, "x-kubernetes-preserve-unknown-fields");
            let props = s.get("properties").and_then(Value::as_object);
            let additional = s.get("additionalProperties");
            let keys: Vec<String> = map.keys().cloned().collect();
            for k in keys {
                let special = matches!(mode, Mode::Root | Mode::Embedded)
                    && matches!(k.as_str(), "apiVersion" | "kind" | "metadata");
                let child_path = join(path, &k);
                if special && k == "metadata" {
                    if let Some(Value::Object(meta)) = map.get_mut(&k) {
                        prune_object_meta(meta, &child_path, dropped);
                    }
                    continue;
                }
                if let Some(ps) = props.and_then(|p| p.get(&k)) {
                    let child_mode = if flag(ps, "x-kubernetes-embedded-resource") {
                        Mode::Embedded
                    } else {
                        Mode::Nested
                    };
                    if let Some(child) = map.get_mut(&k) {
                        prune(child, ps, &child_path, child_mode, dropped);
                    }
                } else if special {
                    continue;
                } else if let Some(ap) = additional.filter(|a| a.is_object()) {
                    let child_mode = if flag(ap, "x-kubernetes-embedded-resource") {
                        Mode::Embedded
                    } else {
                        Mode::Nested
                    };
                    if let Some(child) = map.get_mut(&k) {
                        prune(child, ap, &child_path, child_mode, dropped);
                    }
                } else if preserve || additional.and_then(Value::as_bool) == Some(true) {
                    continue;
                } else {
                    map.remove(&k);
                    dropped.push(child_path);
                }
            }
        }
        Value::Array(items) => {
            if let Some(is) = s.get("items") {
                let child_mode = if flag(is, "x-kubernetes-embedded-resource") {
                    Mode::Embedded
                } else {
                    Mode::Nested
                };
                for (i, item) in items.iter_mut().enumerate() {
                    prune(item, is, &format!("{path}[{i}]"), child_mode, dropped);
                }
            }
        }
        _ => {}
    }
}

/// Fields of `metadata` (ObjectMeta) kept at the root and in embedded resources; others
/// are pruned, as the API server decodes metadata into ObjectMeta.
const OBJECT_META_FIELDS: [&str; 15] = [
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

fn prune_object_meta(meta: &mut Map<String, Value>, path: &str, dropped: &mut Vec<String>) {
    let unknown: Vec<String> = meta
        .keys()
        .filter(|k| !OBJECT_META_FIELDS.contains(&k.as_str()))
        .cloned()
        .collect();
    for k in unknown {
        meta.remove(&k);
        dropped.push(join(path, &k));
    }
}

fn nullable(s: &Value) -> bool {
    flag(s, "nullable")
}

/// Drop `null`s of non-nullable fields (replacing them by the field's default when one is
/// declared) and fill missing fields with their `default`, recursively.
fn apply_defaults(v: &mut Value, s: &Value) {
    match v {
        Value::Object(map) => {
            if let Some(props) = s.get("properties").and_then(Value::as_object) {
                for (k, ps) in props {
                    match map.get(k) {
                        None => {
                            if let Some(d) = ps.get("default") {
                                map.insert(k.clone(), d.clone());
                            }
                        }
                        Some(Value::Null) if !nullable(ps) => match ps.get("default") {
                            Some(d) => {
                                map.insert(k.clone(), d.clone());
                            }
                            None => {
                                map.remove(k);
                            }
                        },
                        _ => {}
                    }
                    if let Some(child) = map.get_mut(k) {
                        apply_defaults(child, ps);
                    }
                }
            } else if let Some(ap) = s.get("additionalProperties").filter(|a| a.is_object()) {
                let keys: Vec<String> = map.keys().cloned().collect();
                for k in keys {
                    if map.get(&k).is_some_and(Value::is_null) && !nullable(ap) {
                        match ap.get("default") {
                            Some(d) => {
                                map.insert(k.clone(), d.clone());
                            }
                            None => {
                                map.remove(&k);
                                continue;
                            }
                        }
                    }
                    if let Some(child) = map.get_mut(&k) {
                        apply_defaults(child, ap);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(is) = s.get("items") {
                for item in items.iter_mut() {
                    if item.is_null()
                        && !nullable(is)
                        && let Some(d) = is.get("default")
                    {
                        *item = d.clone();
                    }
                    apply_defaults(item, is);
                }
            }
        }
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------
// Extension checks: embedded resources and list types

fn check_extensions(v: &Value, s: &Value, path: &str, causes: &mut Vec<Cause>) {
    match v {
        Value::Object(map) => {
            if flag(s, "x-kubernetes-embedded-resource") {
                for key in ["apiVersion", "kind"] {
                    if map
                        .get(key)
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .is_empty()
                    {
                        causes.push(required(&join(path, key), "must not be empty"));
                    }
                }
            }
            if let Some(props) = s.get("properties").and_then(Value::as_object) {
                for (k, ps) in props {
                    if path.is_empty() && k == "metadata" {
                        continue;
                    }
                    if let Some(child) = map.get(k) {
                        check_extensions(child, ps, &join(path, k), causes);
                    }
                }
            } else if let Some(ap) = s.get("additionalProperties").filter(|a| a.is_object()) {
                for (k, child) in map {
                    check_extensions(child, ap, &join(path, k), causes);
                }
            }
        }
        Value::Array(items) => {
            match s.get("x-kubernetes-list-type").and_then(Value::as_str) {
                Some("set") => {
                    for (i, item) in items.iter().enumerate() {
                        if items[..i].contains(item) {
                            causes.push(duplicate(&format!("{path}[{i}]"), item));
                        }
                    }
                }
                Some("map") => {
                    let keys: Vec<&str> = s
                        .get("x-kubernetes-list-map-keys")
                        .and_then(Value::as_array)
                        .map(|a| a.iter().filter_map(Value::as_str).collect())
                        .unwrap_or_default();
                    let mut seen: Vec<Value> = Vec::new();
                    for (i, item) in items.iter().enumerate() {
                        let mut key = Map::new();
                        for k in &keys {
                            key.insert(
                                (*k).to_string(),
                                item.get(*k).cloned().unwrap_or(Value::Null),
                            );
                        }
                        let key = Value::Object(key);
                        if seen.contains(&key) {
                            causes.push(duplicate(&format!("{path}[{i}]"), &key));
                        } else {
                            seen.push(key);
                        }
                    }
                }
                _ => {}
            }
            if let Some(is) = s.get("items") {
                for (i, item) in items.iter().enumerate() {
                    check_extensions(item, is, &format!("{path}[{i}]"), causes);
                }
            }
        }
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------
// Conversion of a structural OpenAPI v3 schema into JSON Schema 2020-12

/// Formats validated the same way by Kubernetes and the jsonschema crate; other formats
/// (`int32`, `byte`, `duration` — a Go duration in Kubernetes —, ...) are not checked.
const CHECKED_FORMATS: [&str; 5] = ["date-time", "date", "ipv4", "ipv6", "uuid"];

fn to_json_schema(s: &Value, root: bool) -> Value {
    let Some(obj) = s.as_object() else {
        return Value::Bool(true);
    };
    let mut out = Map::new();
    for (k, v) in obj {
        match k.as_str() {
            "enum" | "pattern" | "minLength" | "maxLength" | "minimum" | "maximum"
            | "multipleOf" | "minItems" | "maxItems" | "uniqueItems" | "minProperties"
            | "maxProperties" | "required" => {
                out.insert(k.clone(), v.clone());
            }
            "type" if !flag(s, "x-kubernetes-int-or-string") => {
                out.insert(k.clone(), v.clone());
            }
            "format" if v.as_str().is_some_and(|f| CHECKED_FORMATS.contains(&f)) => {
                out.insert(k.clone(), v.clone());
            }
            "exclusiveMinimum" | "exclusiveMaximum" => {
                let bound = if k == "exclusiveMinimum" {
                    "minimum"
                } else {
                    "maximum"
                };
                match v {
                    Value::Bool(true) => {
                        if let Some(b) = obj.get(bound) {
                            out.insert(k.clone(), b.clone());
                        }
                    }
                    Value::Number(_) => {
                        out.insert(k.clone(), v.clone());
                    }
                    _ => {}
                }
            }
            "properties" => {
                if let Some(props) = v.as_object() {
                    let mut p = Map::new();
                    for (pk, ps) in props {
                        if root && pk == "metadata" {
                            p.insert(pk.clone(), root_metadata_schema(ps));
                        } else {
                            p.insert(pk.clone(), to_json_schema(ps, false));
                        }
                    }
                    out.insert(k.clone(), Value::Object(p));
                }
            }
            "items" | "not" => {
                out.insert(k.clone(), to_json_schema(v, false));
            }
            "additionalProperties" if v.is_object() => {
                out.insert(k.clone(), to_json_schema(v, false));
            }
            "allOf" | "anyOf" | "oneOf" => {
                if let Some(branches) = v.as_array() {
                    out.insert(
                        k.clone(),
                        Value::Array(branches.iter().map(|b| to_json_schema(b, false)).collect()),
                    );
                }
            }
            _ => {}
        }
    }
    // The exclusive bound replaces the inclusive one (OpenAPI 3.0 boolean form).
    for (ex, bound) in [
        ("exclusiveMinimum", "minimum"),
        ("exclusiveMaximum", "maximum"),
    ] {
        if obj.get(ex).and_then(Value::as_bool) == Some(true) {
            out.remove(bound);
        }
    }
    if flag(s, "x-kubernetes-int-or-string") {
        out.insert("type".into(), serde_json::json!(["integer", "string"]));
    }
    if nullable(s) {
        match out.get("type").cloned() {
            Some(Value::String(t)) => {
                out.insert("type".into(), serde_json::json!([t, "null"]));
            }
            Some(Value::Array(mut ts)) => {
                ts.push(Value::from("null"));
                out.insert("type".into(), Value::Array(ts));
            }
            _ => {}
        }
        if let Some(Value::Array(mut e)) = out.get("enum").cloned()
            && !e.contains(&Value::Null)
        {
            e.push(Value::Null);
            out.insert("enum".into(), Value::Array(e));
        }
    }
    Value::Object(out)
}

/// The root `metadata` schema may only restrict `name` and `generateName`.
fn root_metadata_schema(s: &Value) -> Value {
    let mut props = Map::new();
    for k in ["name", "generateName"] {
        if let Some(ps) = s.pointer(&format!("/properties/{k}")) {
            props.insert(k.to_string(), to_json_schema(ps, false));
        }
    }
    serde_json::json!({ "type": "object", "properties": props })
}

// ---------------------------------------------------------------------------------------
// Error mapping

/// Convert a JSON pointer into a Kubernetes field path by walking the instance, so array
/// indices render as `[i]` and object keys as `.key`.
fn field_path(pointer: &str, instance: &Value) -> String {
    let mut out = String::new();
    let mut cur = Some(instance);
    for raw in pointer.split('/').skip(1) {
        let seg = raw.replace("~1", "/").replace("~0", "~");
        match cur {
            Some(Value::Array(a)) => {
                out.push_str(&format!("[{seg}]"));
                cur = seg.parse::<usize>().ok().and_then(|i| a.get(i));
            }
            other => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(&seg);
                cur = other.and_then(|o| o.get(&seg));
            }
        }
    }
    out
}

/// The Kubernetes cause of one schema keyword error: the kinds with a cause of their own
/// (type, required, enum, too long, too many), else `Invalid value` with the rule the
/// value breaks ([`broken_rule`]).
fn keyword_cause(err: &jsonschema::ValidationError<'_>, root: &Value) -> Option<Cause> {
    let path = field_path(err.instance_path().as_str(), root);
    let value: &Value = err.instance();
    let shown = if path.is_empty() {
        "<root>"
    } else {
        path.as_str()
    };
    let cause = match err.kind() {
        ValidationErrorKind::Type { kind } => type_invalid(
            &path,
            value,
            &format!(
                "{shown} in body must be of type {}: {}",
                expected_types(kind),
                quote(type_name(value))
            ),
        ),
        ValidationErrorKind::Required { property } => {
            let prop = property.as_str().unwrap_or_default();
            required(&join(&path, prop), "")
        }
        ValidationErrorKind::Enum { options } => {
            // The compiled enum of a nullable field carries `null` (see the compilation
            // above); the value refused is not null, and kube-apiserver lists the
            // schema's own values.
            let mut opts = options.as_array().cloned().unwrap_or_default();
            opts.retain(|o| !o.is_null());
            not_supported(&path, value, &opts)
        }
        ValidationErrorKind::MaxLength { limit } => too_long(&path, *limit),
        ValidationErrorKind::MaxItems { limit } => {
            too_many(&path, value.as_array().map_or(0, Vec::len), *limit)
        }
        ValidationErrorKind::MaxProperties { limit } => {
            too_many(&path, value.as_object().map_or(0, Map::len), *limit)
        }
        other => invalid(
            &path,
            value,
            &format!("{shown} in body {}", broken_rule(other, value)),
        ),
    };
    Some(cause)
}

/// The types a `type` keyword names, as kube-apiserver lists them (without `null`, which
/// only nullable adds).
fn expected_types(kind: &TypeKind) -> String {
    match kind {
        TypeKind::Single(t) => t.to_string(),
        TypeKind::Multiple(set) => set
            .iter()
            .map(|t| t.to_string())
            .filter(|t| t != "null")
            .collect::<Vec<_>>()
            .join(","),
    }
}

/// What `value` should be, in kube-apiserver's words after `<field> in body `.
fn broken_rule(kind: &ValidationErrorKind, value: &Value) -> String {
    match kind {
        ValidationErrorKind::Constant { expected_value } => {
            format!("should be equal to {}", render_value(expected_value))
        }
        ValidationErrorKind::Pattern { pattern } => format!("should match '{pattern}'"),
        ValidationErrorKind::MinLength { limit } => {
            format!("should be at least {limit} chars long")
        }
        ValidationErrorKind::Minimum { limit } => {
            format!("should be greater than or equal to {limit}")
        }
        ValidationErrorKind::ExclusiveMinimum { limit } => {
            format!("should be greater than {limit}")
        }
        ValidationErrorKind::Maximum { limit } => {
            format!("should be less than or equal to {limit}")
        }
        ValidationErrorKind::ExclusiveMaximum { limit } => format!("should be less than {limit}"),
        ValidationErrorKind::MultipleOf { multiple_of } => {
            format!("should be a multiple of {multiple_of}")
        }
        ValidationErrorKind::MinItems { limit } => format!("should have at least {limit} items"),
        ValidationErrorKind::UniqueItems => "shouldn't contain duplicates".to_string(),
        ValidationErrorKind::MinProperties { limit } => {
            format!("should have at least {limit} properties")
        }
        ValidationErrorKind::Format { format } => {
            format!("must be of type {format}: {}", render_value(value))
        }
        ValidationErrorKind::OneOfNotValid { .. }
        | ValidationErrorKind::OneOfMultipleValid { .. } => {
            "must validate one and only one schema (oneOf)".to_string()
        }
        ValidationErrorKind::AnyOf { .. } => {
            "must validate at least one schema (anyOf)".to_string()
        }
        ValidationErrorKind::Not { .. } => "must not validate the schema (not)".to_string(),
        other => format!("is invalid ({})", other.keyword()),
    }
}

/// Resolve a Kubernetes field path (`spec.items[0].name`) in an object.
fn lookup<'a>(root: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = root;
    if path.is_empty() {
        return Some(cur);
    }
    for part in path.split('.') {
        let (name, rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !name.is_empty() {
            cur = cur.get(name)?;
        }
        for idx in rest.split('[').filter(|s| !s.is_empty()) {
            let idx = idx.trim_end_matches(']');
            cur = match idx.parse::<usize>() {
                Ok(i) => cur.get(i)?,
                Err(_) => cur.get(idx)?,
            };
        }
    }
    Some(cur)
}

fn cel_cause(e: &kube_cel::ValidationError, root: &Value) -> Cause {
    let path = e.field_path.clone();
    let reason = e
        .reason
        .clone()
        .unwrap_or_else(|| "FieldValueInvalid".into());
    match reason.as_str() {
        "FieldValueForbidden" => with_reason(&reason, &path, format!("Forbidden: {}", e.message)),
        "FieldValueRequired" => {
            with_reason(&reason, &path, format!("Required value: {}", e.message))
        }
        "FieldValueDuplicate" => {
            with_reason(&reason, &path, format!("Duplicate value: {}", e.message))
        }
        _ => {
            let ty = lookup(root, &path).map_or("object", type_name);
            with_reason(
                "FieldValueInvalid",
                &path,
                format!("Invalid value: {}: {}", quote(ty), e.message),
            )
        }
    }
}
