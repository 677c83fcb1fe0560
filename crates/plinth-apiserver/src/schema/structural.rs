//! apiextensions.k8s.io/v1 CustomResourceDefinition validation (create/update time).
//!
//! Mirrors the checks of the Kubernetes API server's CRD strategy: names, scope, versions,
//! structural schemas, printer columns and compilable CEL rules. Field paths and messages
//! use the Kubernetes wording, e.g.
//! `spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value: must not
//! be empty for specified object fields`.

use std::collections::HashSet;

use regex::Regex;
use serde_json::Value;

use super::messages::{duplicate, forbidden, invalid, not_supported, required};
use crate::resource::Cause;
use crate::table::jsonpath;

/// Validate an apiextensions.k8s.io/v1 CustomResourceDefinition as the API server does on
/// create and update.
///
/// `crd` is the whole object (`apiVersion`, `kind`, `metadata`, `spec`). Defaults that the
/// API server applies before validating are honoured: an empty `spec.names.singular`
/// means the lower-cased kind, an empty `listKind` means `<kind>List`.
///
/// Checks: `metadata.name == <plural>.<group>`; group is a DNS subdomain with a dot;
/// plural/singular/short names are DNS-1035 labels, kind/listKind too after lower-casing
/// and differ from each other; `scope` is `Namespaced` or `Cluster`; at least one version,
/// unique version names, `served`/`storage` booleans, exactly one storage version; every
/// version has a structural `schema.openAPIV3Schema` (every node typed unless
/// `x-kubernetes-int-or-string` / `x-kubernetes-preserve-unknown-fields`, object root, no
/// `properties` together with `additionalProperties`, root `metadata` may only restrict
/// `name`/`generateName`, forbidden keywords, valid `x-kubernetes-list-type`); printer
/// columns have a name, a supported type and format and a parseable JSONPath; every
/// `x-kubernetes-validations` rule compiles.
///
/// # Errors
/// Every violation as a [`Cause`] with a Kubernetes field path.
pub fn check_crd(crd: &Value) -> Result<(), Vec<Cause>> {
    let Some(spec) = crd.get("spec").filter(|s| s.is_object()) else {
        return Err(vec![required("spec", "")]);
    };
    let mut errs = Vec::new();
    let group = spec.get("group").and_then(Value::as_str).unwrap_or("");
    let names = spec.get("names").unwrap_or(&Value::Null);
    let plural = names.get("plural").and_then(Value::as_str).unwrap_or("");
    let kind = names.get("kind").and_then(Value::as_str).unwrap_or("");
    check_object_name(crd, plural, group, &mut errs);
    check_group(group, &mut errs);
    check_names(
        names,
        plural,
        &defaulted_name(names, "singular", || kind.to_lowercase()),
        kind,
        &defaulted_name(names, "listKind", || {
            if kind.is_empty() {
                String::new()
            } else {
                format!("{kind}List")
            }
        }),
        &mut errs,
    );
    check_scope(spec, &mut errs);
    if let Some(p) = spec.get("preserveUnknownFields")
        && p.as_bool() == Some(true)
    {
        errs.push(invalid(
            "spec.preserveUnknownFields",
            p,
            "cannot set to true, set x-kubernetes-preserve-unknown-fields to true in spec.versions[*].schema instead",
        ));
    }
    if let Some(conv) = spec.get("conversion").filter(|c| !c.is_null()) {
        check_conversion(conv, &mut errs);
    }
    match spec.get("versions").and_then(Value::as_array) {
        Some(vs) if !vs.is_empty() => check_versions(vs, &mut errs),
        _ => errs.push(required("spec.versions", "must have at least one version")),
    }
    if errs.is_empty() { Ok(()) } else { Err(errs) }
}

/// `spec.names.<key>` when set and not empty, else the default Kubernetes gives it.
fn defaulted_name(names: &Value, key: &str, default: impl FnOnce() -> String) -> String {
    names
        .get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map_or_else(default, str::to_string)
}

/// A CRD's name must be `<plural>.<group>`.
fn check_object_name(crd: &Value, plural: &str, group: &str, errs: &mut Vec<Cause>) {
    let name = crd
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if name.is_empty() {
        errs.push(required(
            "metadata.name",
            "name or generateName is required",
        ));
    } else if name != format!("{plural}.{group}") {
        errs.push(invalid(
            "metadata.name",
            &Value::String(name.to_string()),
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }
}

/// The group: a DNS-1123 subdomain with at least one dot.
fn check_group(group: &str, errs: &mut Vec<Cause>) {
    if group.is_empty() {
        errs.push(required("spec.group", ""));
    } else if !is_dns1123_subdomain(group) {
        errs.push(invalid(
            "spec.group",
            &Value::String(group.into()),
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
        ));
    } else if !group.contains('.') {
        errs.push(invalid(
            "spec.group",
            &Value::String(group.into()),
            "should be a domain with at least one dot",
        ));
    }
}

fn check_scope(spec: &Value, errs: &mut Vec<Cause>) {
    match spec.get("scope").and_then(Value::as_str) {
        Some("Namespaced") | Some("Cluster") => {}
        Some(other) => errs.push(not_supported(
            "spec.scope",
            &Value::String(other.into()),
            &[Value::from("Cluster"), Value::from("Namespaced")],
        )),
        None => errs.push(required("spec.scope", "")),
    }
}

fn check_names(
    names: &Value,
    plural: &str,
    singular: &str,
    kind: &str,
    list_kind: &str,
    errs: &mut Vec<Cause>,
) {
    if !names.is_object() {
        errs.push(required("spec.names", ""));
        return;
    }
    let label_msg = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";
    if plural.is_empty() {
        errs.push(required("spec.names.plural", ""));
    } else if !is_dns1035_label(plural) {
        errs.push(invalid(
            "spec.names.plural",
            &Value::from(plural),
            label_msg,
        ));
    }
    if !singular.is_empty() && !is_dns1035_label(singular) {
        errs.push(invalid(
            "spec.names.singular",
            &Value::from(singular),
            label_msg,
        ));
    }
    let mixed = "may have mixed case, but should otherwise match: [a-z]([-a-z0-9]*[a-z0-9])?";
    if kind.is_empty() {
        errs.push(required("spec.names.kind", ""));
    } else if !is_dns1035_label(&kind.to_lowercase()) {
        errs.push(invalid("spec.names.kind", &Value::from(kind), mixed));
    }
    if !list_kind.is_empty() && !is_dns1035_label(&list_kind.to_lowercase()) {
        errs.push(invalid(
            "spec.names.listKind",
            &Value::from(list_kind),
            mixed,
        ));
    }
    if !kind.is_empty() && kind == list_kind {
        errs.push(invalid(
            "spec.names.listKind",
            &Value::from(list_kind),
            "kind and listKind may not be the same",
        ));
    }
    if let Some(shorts) = names.get("shortNames").and_then(Value::as_array) {
        let mut seen = HashSet::new();
        for (i, s) in shorts.iter().enumerate() {
            let f = format!("spec.names.shortNames[{i}]");
            match s.as_str() {
                Some(sn) if is_dns1035_label(sn) => {
                    if !seen.insert(sn) {
                        errs.push(duplicate(&f, s));
                    }
                }
                _ => errs.push(invalid(&f, s, label_msg)),
            }
        }
    }
    if let Some(cats) = names.get("categories").and_then(Value::as_array) {
        for (i, c) in cats.iter().enumerate() {
            if !c.as_str().is_some_and(is_dns1035_label) {
                errs.push(invalid(
                    &format!("spec.names.categories[{i}]"),
                    c,
                    label_msg,
                ));
            }
        }
    }
}

fn check_versions(vs: &[Value], errs: &mut Vec<Cause>) {
    let mut storage = 0;
    let mut seen = HashSet::new();
    for (i, v) in vs.iter().enumerate() {
        let base = format!("spec.versions[{i}]");
        let vname = v.get("name").and_then(Value::as_str).unwrap_or("");
        if vname.is_empty() {
            errs.push(required(&format!("{base}.name"), ""));
        } else if !is_dns1035_label(vname) {
            errs.push(invalid(
                &format!("{base}.name"),
                &Value::from(vname),
                "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character",
            ));
        } else if !seen.insert(vname.to_string()) {
            errs.push(duplicate(&format!("{base}.name"), &Value::from(vname)));
        }
        for flag in ["served", "storage"] {
            match v.get(flag) {
                Some(Value::Bool(_)) | None => {}
                Some(other) => errs.push(super::messages::type_invalid(
                    &format!("{base}.{flag}"),
                    other,
                    &format!("{base}.{flag} in body must be of type boolean"),
                )),
            }
        }
        if v.get("storage").and_then(Value::as_bool) == Some(true) {
            storage += 1;
        }
        match v.pointer("/schema/openAPIV3Schema") {
            Some(s) if s.is_object() => {
                let path = format!("{base}.schema.openAPIV3Schema");
                check_root_schema(s, &path, errs);
                check_cel_rules(s, &path, errs);
            }
            _ => errs.push(required(
                &format!("{base}.schema.openAPIV3Schema"),
                "schemas are required",
            )),
        }
        if let Some(scale) = v.pointer("/subresources/scale").filter(|s| !s.is_null()) {
            check_scale(scale, &format!("{base}.subresources.scale"), errs);
        }
        if let Some(cols) = v.get("additionalPrinterColumns").and_then(Value::as_array) {
            check_printer_columns(cols, &format!("{base}.additionalPrinterColumns"), errs);
        }
    }
    if storage != 1 {
        errs.push(invalid(
            "spec.versions",
            &Value::Array(vs.to_vec()),
            "must have exactly one version marked as storage version",
        ));
    }
}

/// `spec.conversion`: strategy `None` or `Webhook`; a webhook needs a client config and
/// `conversionReviewVersions`.
fn check_conversion(conv: &Value, errs: &mut Vec<Cause>) {
    match conv.get("strategy").and_then(Value::as_str) {
        None | Some("None") => {
            if conv.get("webhook").is_some_and(|w| !w.is_null()) {
                errs.push(forbidden(
                    "spec.conversion.webhook",
                    "should not be set when strategy is not set to Webhook",
                ));
            }
        }
        Some("Webhook") => {
            if conv
                .pointer("/webhook/clientConfig")
                .is_none_or(Value::is_null)
            {
                errs.push(required(
                    "spec.conversion.webhook.clientConfig",
                    "required when strategy is set to Webhook",
                ));
            }
            if conv
                .pointer("/webhook/conversionReviewVersions")
                .and_then(Value::as_array)
                .is_none_or(Vec::is_empty)
            {
                errs.push(required(
                    "spec.conversion.webhook.conversionReviewVersions",
                    "must include at least one of v1, v1beta1",
                ));
            }
        }
        Some(other) => errs.push(not_supported(
            "spec.conversion.strategy",
            &Value::from(other),
            &[Value::from("None"), Value::from("Webhook")],
        )),
    }
}

/// `subresources.scale`: replicas paths are simple JSON paths under `.spec` / `.status`.
fn check_scale(scale: &Value, base: &str, errs: &mut Vec<Cause>) {
    for (key, under, mandatory) in [
        ("specReplicasPath", ".spec.", true),
        ("statusReplicasPath", ".status.", true),
        ("labelSelectorPath", ".status.", false),
    ] {
        let f = format!("{base}.{key}");
        match scale.get(key).and_then(Value::as_str) {
            None | Some("") => {
                if mandatory {
                    errs.push(required(&f, ""));
                }
            }
            Some(p) => {
                let simple = jsonpath::parse(p)
                    .is_ok_and(|steps| steps.iter().all(|s| matches!(s, jsonpath::Step::Field(_))));
                let allowed_root =
                    p.starts_with(under) || (key == "labelSelectorPath" && p.starts_with(".spec."));
                if !simple || !allowed_root {
                    errs.push(invalid(
                        &f,
                        &Value::from(p),
                        &format!(
                            "should be a json path under {}",
                            under.trim_end_matches('.')
                        ),
                    ));
                }
            }
        }
    }
}

fn check_printer_columns(cols: &[Value], base: &str, errs: &mut Vec<Cause>) {
    const TYPES: [&str; 5] = ["boolean", "date", "integer", "number", "string"];
    const FORMATS: [&str; 8] = [
        "byte",
        "date",
        "date-time",
        "double",
        "float",
        "int32",
        "int64",
        "password",
    ];
    for (i, c) in cols.iter().enumerate() {
        let f = format!("{base}[{i}]");
        if c.get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
        {
            errs.push(required(&format!("{f}.name"), ""));
        }
        match c.get("type").and_then(Value::as_str) {
            None | Some("") => errs.push(required(&format!("{f}.type"), "")),
            Some(t) if !TYPES.contains(&t) => errs.push(not_supported(
                &format!("{f}.type"),
                &Value::from(t),
                &TYPES.map(Value::from),
            )),
            _ => {}
        }
        if let Some(fmt) = c.get("format").and_then(Value::as_str)
            && !fmt.is_empty()
            && !FORMATS.contains(&fmt)
        {
            errs.push(not_supported(
                &format!("{f}.format"),
                &Value::from(fmt),
                &FORMATS.map(Value::from),
            ));
        }
        match c.get("jsonPath").and_then(Value::as_str) {
            None | Some("") => errs.push(required(&format!("{f}.jsonPath"), "")),
            Some(p) => {
                if let Err(e) = jsonpath::parse(p) {
                    errs.push(invalid(
                        &format!("{f}.jsonPath"),
                        &Value::from(p),
                        &format!("must be a simple json path starting with . ({e})"),
                    ));
                }
            }
        }
        if let Some(pr) = c.get("priority")
            && !pr.is_i64()
        {
            errs.push(super::messages::type_invalid(
                &format!("{f}.priority"),
                pr,
                &format!("{f}.priority in body must be of type integer"),
            ));
        }
    }
}

fn check_root_schema(s: &Value, path: &str, errs: &mut Vec<Cause>) {
    match s.get("type").and_then(Value::as_str) {
        Some("object") => {}
        Some(t) => errs.push(invalid(
            &format!("{path}.type"),
            &Value::from(t),
            "must be object at the root",
        )),
        None => {
            if !preserves(s) {
                errs.push(required(
                    &format!("{path}.type"),
                    "must not be empty at the root",
                ))
            }
        }
    }
    if let Some(meta) = s.pointer("/properties/metadata") {
        check_root_metadata(meta, &format!("{path}.properties[metadata]"), errs);
    }
    check_node(s, path, true, errs);
}

/// Root `metadata` may only be `type: object` with restrictions on `name`/`generateName`.
fn check_root_metadata(meta: &Value, path: &str, errs: &mut Vec<Cause>) {
    let Some(obj) = meta.as_object() else {
        return;
    };
    for (k, v) in obj {
        match k.as_str() {
            "type" => {
                if v.as_str() != Some("object") {
                    errs.push(invalid(&format!("{path}.type"), v, "must be object"));
                }
            }
            "properties" => {
                if let Some(props) = v.as_object() {
                    for pk in props.keys() {
                        if pk != "name" && pk != "generateName" {
                            errs.push(forbidden(
                                &format!("{path}.properties[{pk}]"),
                                "must not be specified at the root metadata other than name and generateName",
                            ));
                        }
                    }
                }
            }
            "description" | "x-kubernetes-validations" => {}
            other => errs.push(forbidden(
                &format!("{path}.{other}"),
                "must not be specified at the root metadata other than type and properties for name and generateName",
            )),
        }
    }
}

fn preserves(s: &Value) -> bool {
    s.get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        == Some(true)
}

fn int_or_string(s: &Value) -> bool {
    s.get("x-kubernetes-int-or-string").and_then(Value::as_bool) == Some(true)
}

/// Structural rules for one node and (recursively) its children.
fn check_node(s: &Value, path: &str, typed_required: bool, errs: &mut Vec<Cause>) {
    let Some(obj) = s.as_object() else {
        errs.push(invalid(path, s, "must be an object"));
        return;
    };
    check_keywords(obj, path, errs);
    check_type(s, path, typed_required, errs);
    check_embedded_resource(s, path, errs);
    check_children(s, path, errs);
    check_list_type(obj, path, errs);
    check_junctors(s, path, errs);
}

/// Keywords a structural schema may not use, and extension values it may not give.
fn check_keywords(obj: &serde_json::Map<String, Value>, path: &str, errs: &mut Vec<Cause>) {
    for forbidden_key in [
        "$ref",
        "$schema",
        "id",
        "definitions",
        "dependencies",
        "additionalItems",
        "patternProperties",
    ] {
        if obj.contains_key(forbidden_key) {
            errs.push(forbidden(
                &format!("{path}.{forbidden_key}"),
                &format!("{forbidden_key} is not supported"),
            ));
        }
    }
    if obj.get("uniqueItems").and_then(Value::as_bool) == Some(true) {
        errs.push(forbidden(
            &format!("{path}.uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
    if let Some(p) = obj.get("x-kubernetes-preserve-unknown-fields")
        && p.as_bool() != Some(true)
    {
        errs.push(invalid(
            &format!("{path}.x-kubernetes-preserve-unknown-fields"),
            p,
            "must be true or undefined",
        ));
    }
}

/// `type` is one of the six JSON types, empty for an int-or-string, and required on a
/// specified field unless the node preserves unknown fields.
fn check_type(s: &Value, path: &str, typed_required: bool, errs: &mut Vec<Cause>) {
    let ty = s.get("type").and_then(Value::as_str);
    if let Some(t) = s.get("type") {
        const TYPES: [&str; 6] = ["array", "boolean", "integer", "number", "object", "string"];
        match t.as_str() {
            Some(ts) if TYPES.contains(&ts) => {}
            _ => errs.push(not_supported(
                &format!("{path}.type"),
                t,
                &TYPES.map(Value::from),
            )),
        }
    }
    if int_or_string(s) {
        if ty.is_some() {
            errs.push(invalid(
                &format!("{path}.type"),
                &Value::from(ty.unwrap_or_default()),
                "must be empty if x-kubernetes-int-or-string is true",
            ));
        }
    } else if ty.is_none() && typed_required && !preserves(s) {
        errs.push(required(
            &format!("{path}.type"),
            "must not be empty for specified object fields",
        ));
    }
}

/// An embedded resource is an object with properties, or one that preserves unknown fields.
fn check_embedded_resource(s: &Value, path: &str, errs: &mut Vec<Cause>) {
    if s.get("x-kubernetes-embedded-resource")
        .and_then(Value::as_bool)
        != Some(true)
    {
        return;
    }
    let ty = s.get("type").and_then(Value::as_str);
    if ty != Some("object") {
        errs.push(invalid(
            &format!("{path}.type"),
            &Value::from(ty.unwrap_or_default()),
            "must be object if x-kubernetes-embedded-resource is true",
        ));
    }
    if s.get("properties").is_none() && !preserves(s) {
        errs.push(required(
            &format!("{path}.properties"),
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
}

/// The nested schemas (`additionalProperties`, `properties`, `items`), checked in turn.
fn check_children(s: &Value, path: &str, errs: &mut Vec<Cause>) {
    let ty = s.get("type").and_then(Value::as_str);
    let has_props = s.get("properties").is_some_and(|p| p.is_object());
    match s.get("additionalProperties") {
        Some(Value::Bool(false)) => errs.push(forbidden(
            &format!("{path}.additionalProperties"),
            "must not be false",
        )),
        Some(ap) if has_props && !ap.is_null() => errs.push(forbidden(
            &format!("{path}.additionalProperties"),
            "additionalProperties and properties are mutual exclusive",
        )),
        Some(ap) if ap.is_object() => {
            check_node(ap, &format!("{path}.additionalProperties"), true, errs)
        }
        _ => {}
    }
    if let Some(props) = s.get("properties").and_then(Value::as_object) {
        if ty.is_some() && ty != Some("object") {
            errs.push(invalid(
                &format!("{path}.type"),
                &Value::from(ty.unwrap_or_default()),
                "must be object if properties are specified",
            ));
        }
        for (k, child) in props {
            check_node(child, &format!("{path}.properties[{k}]"), true, errs);
        }
    }
    match s.get("items") {
        Some(items) if items.is_object() => check_node(items, &format!("{path}.items"), true, errs),
        Some(items) if items.is_array() => errs.push(forbidden(
            &format!("{path}.items"),
            "items must be a schema object and not an array",
        )),
        _ => {
            if ty == Some("array") {
                errs.push(required(&format!("{path}.items"), "must be specified"));
            }
        }
    }
}

/// `allOf`/`anyOf`/`oneOf`/`not` branches hold value validations only.
fn check_junctors(s: &Value, path: &str, errs: &mut Vec<Cause>) {
    for junctor in ["allOf", "anyOf", "oneOf"] {
        if let Some(branches) = s.get(junctor).and_then(Value::as_array) {
            for (i, b) in branches.iter().enumerate() {
                check_value_validation(
                    b,
                    &format!("{path}.{junctor}[{i}]"),
                    int_or_string(s),
                    errs,
                );
            }
        }
    }
    if let Some(n) = s.get("not") {
        check_value_validation(n, &format!("{path}.not"), false, errs);
    }
}

/// Inside `allOf`/`anyOf`/`oneOf`/`not` only value validations are allowed (no `type`
/// except the `integer`/`string` branches of an int-or-string, no `default`, `nullable`,
/// or structural extensions).
fn check_value_validation(s: &Value, path: &str, in_int_or_string: bool, errs: &mut Vec<Cause>) {
    let Some(obj) = s.as_object() else {
        return;
    };
    if let Some(t) = obj.get("type") {
        let allowed = in_int_or_string && matches!(t.as_str(), Some("integer") | Some("string"));
        if !allowed {
            errs.push(forbidden(
                &format!("{path}.type"),
                "must be empty to be structural",
            ));
        }
    }
    for key in [
        "default",
        "nullable",
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-embedded-resource",
        "x-kubernetes-int-or-string",
    ] {
        if obj.contains_key(key) {
            errs.push(forbidden(
                &format!("{path}.{key}"),
                "must be undefined to be structural",
            ));
        }
    }
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        for (k, child) in props {
            check_value_validation(child, &format!("{path}.properties[{k}]"), false, errs);
        }
    }
    if let Some(items) = obj.get("items") {
        check_value_validation(items, &format!("{path}.items"), false, errs);
    }
}

fn check_list_type(obj: &serde_json::Map<String, Value>, path: &str, errs: &mut Vec<Cause>) {
    let Some(lt) = obj.get("x-kubernetes-list-type") else {
        if obj.contains_key("x-kubernetes-list-map-keys") {
            errs.push(forbidden(
                &format!("{path}.x-kubernetes-list-map-keys"),
                "must only be used if x-kubernetes-list-type is \"map\"",
            ));
        }
        return;
    };
    let f = format!("{path}.x-kubernetes-list-type");
    if obj.get("type").and_then(Value::as_str) != Some("array") {
        errs.push(invalid(&f, lt, "must only be used on type=array"));
        return;
    }
    match lt.as_str() {
        Some("atomic") => {}
        Some("set") => {
            let item_ty = obj
                .get("items")
                .and_then(|i| i.get("type"))
                .and_then(Value::as_str);
            if item_ty == Some("object") || item_ty == Some("array") {
                errs.push(invalid(
                    &f,
                    lt,
                    "must only be used on arrays of scalars (or objects with x-kubernetes-map-type: atomic)",
                ));
            }
        }
        Some("map") => {
            let items = obj.get("items");
            if items.and_then(|i| i.get("type")).and_then(Value::as_str) != Some("object") {
                errs.push(invalid(&f, lt, "must only be used on arrays of objects"));
            }
            match obj
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
            {
                Some(keys) if !keys.is_empty() => {
                    let required_keys: Vec<&str> = items
                        .and_then(|i| i.get("required"))
                        .and_then(Value::as_array)
                        .map(|r| r.iter().filter_map(Value::as_str).collect())
                        .unwrap_or_default();
                    for (i, k) in keys.iter().enumerate() {
                        let ks = k.as_str().unwrap_or("");
                        let prop = items.and_then(|it| it.pointer(&format!("/properties/{ks}")));
                        let kf = format!("{path}.x-kubernetes-list-map-keys[{i}]");
                        match prop {
                            None => errs.push(invalid(
                                &kf,
                                k,
                                "entries must all be names of item properties",
                            )),
                            Some(p) => {
                                if !required_keys.contains(&ks) && p.get("default").is_none() {
                                    errs.push(required(
                                        &format!("{path}.items.required"),
                                        &format!(
                                            "all map keys must be required or have a default value; {} is neither",
                                            super::messages::quote(ks)
                                        ),
                                    ));
                                }
                            }
                        }
                    }
                }
                _ => errs.push(required(
                    &format!("{path}.x-kubernetes-list-map-keys"),
                    "must not be empty if x-kubernetes-list-type is map",
                )),
            }
        }
        _ => errs.push(not_supported(
            &f,
            lt,
            &[
                Value::from("atomic"),
                Value::from("set"),
                Value::from("map"),
            ],
        )),
    }
}

/// Every `x-kubernetes-validations` rule must compile (CEL syntax and message expressions).
fn check_cel_rules(s: &Value, path: &str, errs: &mut Vec<Cause>) {
    if !super::admission::has_cel_rules(s) {
        return;
    }
    let compiled = kube_cel::compile_schema(s);
    collect_cel_errors(&compiled, s, path, errs);
}

fn collect_cel_errors(c: &kube_cel::CompiledSchema, s: &Value, path: &str, errs: &mut Vec<Cause>) {
    for (i, r) in c.validations.iter().enumerate() {
        if let Err(e) = r {
            let rule = s
                .pointer(&format!("/x-kubernetes-validations/{i}/rule"))
                .cloned()
                .unwrap_or(Value::Null);
            errs.push(invalid(
                &format!("{path}.x-kubernetes-validations[{i}].rule"),
                &rule,
                &format!("compilation failed: {e}"),
            ));
        }
    }
    for (k, child) in &c.properties {
        if let Some(cs) = s.pointer(&format!("/properties/{}", escape_pointer(k))) {
            collect_cel_errors(child, cs, &format!("{path}.properties[{k}]"), errs);
        }
    }
    if let (Some(ci), Some(si)) = (&c.items, s.get("items")) {
        collect_cel_errors(ci, si, &format!("{path}.items"), errs);
    }
    if let (Some(ca), Some(sa)) = (&c.additional_properties, s.get("additionalProperties")) {
        collect_cel_errors(ca, sa, &format!("{path}.additionalProperties"), errs);
    }
}

fn escape_pointer(k: &str) -> String {
    k.replace('~', "~0").replace('/', "~1")
}

fn is_dns1035_label(s: &str) -> bool {
    static RE: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    let re = RE.get_or_init(|| Regex::new(r"^[a-z]([-a-z0-9]*[a-z0-9])?$").expect("valid regex"));
    s.len() <= 63 && re.is_match(s)
}

fn is_dns1123_subdomain(s: &str) -> bool {
    static RE: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
            .expect("valid regex")
    });
    s.len() <= 253 && re.is_match(s)
}
