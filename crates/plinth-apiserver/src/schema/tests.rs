use serde_json::{Value, json};

use super::*;
use crate::resource::{Cause, PrinterColumn, ResourceInfo};

const MARKETPLACE: &str = concat!(env!("PLINTH_CORPUS_DIR"), "/kratix-marketplace");

/// Build the served-resource description of a CRD's storage version (test helper).
pub(crate) fn info_from_crd(crd: &Value) -> ResourceInfo {
    let spec = &crd["spec"];
    let versions = spec["versions"].as_array().expect("versions");
    let v = versions
        .iter()
        .find(|v| v["storage"] == json!(true))
        .unwrap_or(&versions[0]);
    let kind = spec["names"]["kind"].as_str().unwrap().to_string();
    ResourceInfo {
        group: spec["group"].as_str().unwrap().into(),
        version: v["name"].as_str().unwrap().into(),
        list_kind: format!("{kind}List"),
        plural: spec["names"]["plural"].as_str().unwrap().into(),
        singular: kind.to_lowercase(),
        kind,
        namespaced: spec["scope"] == "Namespaced",
        short_names: vec![],
        categories: vec![],
        verbs: vec![],
        status_subresource: true,
        builtin: false,
        schema: v.pointer("/schema/openAPIV3Schema").cloned(),
        printer_columns: serde_json::from_value::<Vec<PrinterColumn>>(
            v.get("additionalPrinterColumns")
                .cloned()
                .unwrap_or(json!([])),
        )
        .unwrap(),
        storage: true,
    }
}

fn info_for(schema: Value) -> ResourceInfo {
    info_from_crd(&json!({
        "spec": {"group": "test.plinth.dev", "scope": "Namespaced",
                 "names": {"kind": "Widget", "plural": "widgets"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": schema}}]}
    }))
}

fn crd_with(schema: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.test.plinth.dev"},
        "spec": {"group": "test.plinth.dev", "scope": "Namespaced",
                 "names": {"kind": "Widget", "plural": "widgets", "listKind": "WidgetList", "singular": "widget"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": schema}}]}
    })
}

fn obj(spec: Value) -> Value {
    json!({"apiVersion": "test.plinth.dev/v1", "kind": "Widget",
           "metadata": {"name": "w", "namespace": "default"}, "spec": spec})
}

fn messages(causes: &[Cause]) -> Vec<String> {
    causes
        .iter()
        .map(|c| format!("{}: {}", c.field, c.message))
        .collect()
}

fn load_yaml(path: &str) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_saphyr::from_str::<Value>(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// (promise dir, CRD) for every marketplace Promise that defines an API.
fn marketplace_crds() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let mut dirs: Vec<_> = std::fs::read_dir(MARKETPLACE)
        .expect("corpus present")
        .flatten()
        .map(|e| e.path())
        .collect();
    dirs.sort();
    for dir in dirs {
        let p = dir.join("promise.yaml");
        if !p.exists() {
            continue;
        }
        let promise = load_yaml(p.to_str().unwrap());
        if let Some(api) = promise.pointer("/spec/api").filter(|a| !a.is_null()) {
            out.push((
                dir.file_name().unwrap().to_string_lossy().into_owned(),
                api.clone(),
            ));
        }
    }
    out
}

#[test]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
fn every_marketplace_promise_api_passes_check_crd() {
    let crds = marketplace_crds();
    assert!(crds.len() >= 10, "found {} Promise APIs", crds.len());
    for (name, crd) in &crds {
        if let Err(causes) = check_crd(crd) {
            panic!("{name}: {:?}", messages(&causes));
        }
    }
}

#[test]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
fn every_marketplace_resource_request_is_admitted() {
    let mut checked = 0;
    for (name, crd) in marketplace_crds() {
        let rr = format!("{MARKETPLACE}/{name}/resource-request.yaml");
        if !std::path::Path::new(&rr).exists() {
            continue;
        }
        let info = info_from_crd(&crd);
        let mut request = load_yaml(&rr);
        let before = request.clone();
        if let Err(causes) = admit(&info, &mut request, None) {
            panic!("{name}: {:?}", messages(&causes));
        }
        assert_eq!(
            request["metadata"], before["metadata"],
            "{name}: metadata kept"
        );
        assert_eq!(request["kind"], before["kind"]);
        checked += 1;
    }
    assert!(checked >= 8, "checked {checked} requests");
}

#[test]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
fn marketplace_requests_with_wrong_values_fail_with_field_causes() {
    let crds = marketplace_crds();
    let redis = &crds.iter().find(|(n, _)| n == "redis").unwrap().1;
    let info = info_from_crd(redis);
    let mut bad = load_yaml(&format!("{MARKETPLACE}/redis/resource-request.yaml"));
    bad["spec"]["size"] = json!(5);
    let causes = admit(&info, &mut bad, None).unwrap_err();
    assert_eq!(
        messages(&causes),
        [
            r#"spec.size: Invalid value: "integer": spec.size in body must be of type string: "integer""#
        ]
    );
    assert_eq!(causes[0].reason, "FieldValueTypeInvalid");

    let mut bad = load_yaml(&format!("{MARKETPLACE}/redis/resource-request.yaml"));
    bad["spec"]["size"] = json!("xl");
    let causes = admit(&info, &mut bad, None).unwrap_err();
    assert_eq!(
        messages(&causes),
        [r#"spec.size: Invalid value: "xl": spec.size in body should match '^(small|large)$'"#]
    );

    let runtime = &crds.iter().find(|(n, _)| n == "runtime").unwrap().1;
    let info = info_from_crd(runtime);
    let mut bad = load_yaml(&format!("{MARKETPLACE}/runtime/resource-request.yaml"));
    bad["spec"]["lifecycle"] = json!("qa");
    let causes = admit(&info, &mut bad, None).unwrap_err();
    assert_eq!(
        messages(&causes),
        [
            r#"spec.lifecycle: Unsupported value: "qa": supported values: "prod", "dev", "staging", "testing""#
        ]
    );
    assert_eq!(causes[0].reason, "FieldValueNotSupported");
}

#[test]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
fn defaults_from_marketplace_schema_are_applied() {
    let crds = marketplace_crds();
    let redis = &crds.iter().find(|(n, _)| n == "redis").unwrap().1;
    let mut r = json!({"apiVersion": "marketplace.kratix.io/v1alpha1", "kind": "redis",
                       "metadata": {"name": "x"}, "spec": {}});
    admit(&info_from_crd(redis), &mut r, None).unwrap();
    assert_eq!(r["spec"]["size"], "small");
}

fn widget_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10}}},
            "spec": {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string"},
                    "replicas": {"type": "integer", "default": 1, "minimum": 0, "maximum": 10},
                    "size": {"type": "string", "enum": ["small", "large"]},
                    "port": {"x-kubernetes-int-or-string": true},
                    "note": {"type": "string", "nullable": true},
                    "mode": {"type": "string", "default": "fast"},
                    "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "labels": {"type": "object", "additionalProperties": {
                        "type": "object", "properties": {"value": {"type": "string"}, "weight": {"type": "integer", "default": 5}}}},
                    "items": {"type": "array", "items": {"type": "object", "properties": {
                        "name": {"type": "string"}, "enabled": {"type": "boolean", "default": true}}}},
                    "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                    "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                              "items": {"type": "object", "required": ["name"], "properties": {
                                  "name": {"type": "string"}, "port": {"type": "integer"}}}},
                    "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                                 "x-kubernetes-preserve-unknown-fields": true},
                    "config": {"type": "object", "default": {}, "properties": {
                        "level": {"type": "string", "default": "info"}}}
                }
            },
            "status": {"type": "object", "properties": {"phase": {"type": "string"}}}
        }
    })
}

#[test]
fn widget_schema_is_a_valid_crd() {
    check_crd(&crd_with(widget_schema())).unwrap();
}

#[test]
fn pruning_drops_unknown_fields_but_keeps_root_and_preserved_ones() {
    let info = info_for(widget_schema());
    let mut o = obj(json!({
        "name": "a", "foo": 1,
        "extra": {"anything": {"goes": true}},
        "items": [{"name": "i", "bogus": 2}],
        "labels": {"k": {"value": "v", "nope": 1}}
    }));
    o["status"] = json!({"phase": "Ready", "other": "x"});
    o["topLevel"] = json!("gone");
    let unknown = unknown_fields(&info, &o);
    assert_eq!(
        unknown,
        [
            "spec.foo",
            "spec.items[0].bogus",
            "spec.labels.k.nope",
            "status.other",
            "topLevel"
        ]
    );
    assert_eq!(
        strict_decoding_error(&unknown[..1]),
        r#"strict decoding error: unknown field "spec.foo""#
    );
    admit(&info, &mut o, None).unwrap();
    assert!(o["spec"].get("foo").is_none());
    assert!(o.get("topLevel").is_none());
    assert!(o["status"].get("other").is_none());
    assert_eq!(o["spec"]["extra"], json!({"anything": {"goes": true}}));
    assert_eq!(o["spec"]["items"][0], json!({"name": "i", "enabled": true}));
    assert_eq!(o["apiVersion"], "test.plinth.dev/v1");
    assert_eq!(
        o["metadata"]["namespace"], "default",
        "root metadata is never pruned"
    );
}

#[test]
fn defaults_apply_in_objects_arrays_maps_and_nested_defaults() {
    let info = info_for(widget_schema());
    let mut o = obj(json!({
        "name": "a",
        "items": [{"name": "x"}, {"name": "y", "enabled": false}],
        "labels": {"a": {"value": "1"}, "b": {"weight": 9}},
        "mode": null,
        "note": null
    }));
    admit(&info, &mut o, None).unwrap();
    let s = &o["spec"];
    assert_eq!(s["replicas"], 1);
    assert_eq!(
        s["mode"], "fast",
        "null of a non-nullable field is replaced by its default"
    );
    assert_eq!(s["note"], Value::Null, "nullable keeps null");
    assert_eq!(s["items"][0]["enabled"], true);
    assert_eq!(s["items"][1]["enabled"], false);
    assert_eq!(s["labels"]["a"]["weight"], 5);
    assert_eq!(s["labels"]["b"]["weight"], 9);
    assert_eq!(
        s["config"],
        json!({"level": "info"}),
        "defaults inside a defaulted object"
    );
}

#[test]
fn non_nullable_null_without_default_is_dropped() {
    let info = info_for(widget_schema());
    let mut o = obj(json!({"name": "a", "size": null}));
    admit(&info, &mut o, None).unwrap();
    assert!(o["spec"].get("size").is_none());
}

/// A nullable field with an enum (what schemars makes of an optional Rust enum, such as a
/// Destination's `spec.cleanup`) takes `null` and lists only its own values when refusing
/// another, as kube-apiserver does.
#[test]
fn a_nullable_enum_takes_null_and_lists_only_its_values() {
    let info = info_for(
        json!({"type": "object", "properties": {"spec": {"type": "object",
        "properties": {"cleanup": {"type": "string", "enum": ["none", "all"], "nullable": true}}}}}),
    );
    let mut o = obj(json!({"cleanup": null}));
    admit(&info, &mut o, None).unwrap();
    let mut o = obj(json!({"cleanup": "bogus"}));
    let causes = admit(&info, &mut o, None).unwrap_err();
    assert_eq!(
        messages(&causes),
        [r#"spec.cleanup: Unsupported value: "bogus": supported values: "none", "all""#]
    );
}

#[test]
fn keyword_errors_use_kubernetes_messages() {
    let info = info_for(widget_schema());
    let mut o = obj(json!({"replicas": "three", "size": "xl"}));
    let causes = admit(&info, &mut o, None).unwrap_err();
    let msgs = messages(&causes);
    assert!(
        msgs.contains(&"spec.name: Required value".to_string()),
        "{msgs:?}"
    );
    assert!(msgs.contains(&r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#.to_string()), "{msgs:?}");
    assert!(
        msgs.contains(
            &r#"spec.size: Unsupported value: "xl": supported values: "small", "large""#
                .to_string()
        ),
        "{msgs:?}"
    );
    let reasons: Vec<&str> = causes.iter().map(|c| c.reason.as_str()).collect();
    assert!(reasons.contains(&"FieldValueRequired"));

    let mut o = obj(json!({"name": "a", "replicas": 11}));
    let causes = admit(&info, &mut o, None).unwrap_err();
    assert_eq!(
        messages(&causes),
        [
            "spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10"
        ]
    );

    let mut o = obj(json!({"name": "a"}));
    o["metadata"]["name"] = json!("much-too-long-name");
    let causes = admit(&info, &mut o, None).unwrap_err();
    assert_eq!(
        messages(&causes),
        ["metadata.name: Too long: may not be more than 10 bytes"]
    );
    assert_eq!(causes[0].reason, "FieldValueTooLong");
    assert_eq!(
        format_invalid("Widget.test.plinth.dev", "much-too-long-name", &causes),
        r#"Widget.test.plinth.dev "much-too-long-name" is invalid: metadata.name: Too long: may not be more than 10 bytes"#
    );
}

#[test]
fn int_or_string() {
    let info = info_for(widget_schema());
    for ok in [json!(80), json!("http")] {
        let mut o = obj(json!({"name": "a", "port": ok}));
        admit(&info, &mut o, None).unwrap();
    }
    let mut o = obj(json!({"name": "a", "port": true}));
    let causes = admit(&info, &mut o, None).unwrap_err();
    assert_eq!(
        messages(&causes),
        [
            r#"spec.port: Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean""#
        ]
    );
}

#[test]
fn embedded_resources_keep_type_meta_and_require_it() {
    let info = info_for(widget_schema());
    let mut o = obj(json!({"name": "a", "template": {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"k": "v"}}}));
    admit(&info, &mut o, None).unwrap();
    assert_eq!(o["spec"]["template"]["metadata"]["name"], "cm");

    // Without preserve-unknown-fields, only the declared fields and the type meta survive.
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                     "properties": {"data": {"type": "object", "additionalProperties": {"type": "string"}}}}}}}});
    let info = info_for(schema);
    let mut o = obj(json!({"template": {"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cm"}, "data": {"k": "v"}, "junk": 1}}));
    assert_eq!(unknown_fields(&info, &o), ["spec.template.junk"]);
    admit(&info, &mut o, None).unwrap();
    assert_eq!(
        o["spec"]["template"],
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"k": "v"}})
    );
    let mut o = obj(json!({"template": {"data": {}}}));
    let causes = admit(&info, &mut o, None).unwrap_err();
    assert_eq!(
        messages(&causes),
        [
            "spec.template.apiVersion: Required value: must not be empty",
            "spec.template.kind: Required value: must not be empty"
        ]
    );
}

#[test]
fn list_type_set_and_map_uniqueness() {
    let info = info_for(widget_schema());
    let mut o = obj(json!({"name": "a", "tags": ["x", "y", "x"]}));
    let causes = admit(&info, &mut o, None).unwrap_err();
    assert_eq!(messages(&causes), [r#"spec.tags[2]: Duplicate value: "x""#]);
    assert_eq!(causes[0].reason, "FieldValueDuplicate");

    let mut o = obj(
        json!({"name": "a", "ports": [{"name": "http", "port": 80}, {"name": "http", "port": 81}]}),
    );
    let causes = admit(&info, &mut o, None).unwrap_err();
    assert_eq!(
        messages(&causes),
        [r#"spec.ports[1]: Duplicate value: {"name":"http"}"#]
    );

    let mut o =
        obj(json!({"name": "a", "tags": ["x", "y"], "ports": [{"name": "a"}, {"name": "b"}]}));
    admit(&info, &mut o, None).unwrap();
}

fn cel_schema() -> Value {
    json!({"type": "object", "properties": {"spec": {
    "type": "object",
    "x-kubernetes-validations": [
        {"rule": "self.replicas <= self.maxReplicas", "message": "replicas must not exceed maxReplicas"}
    ],
    "properties": {
        "replicas": {"type": "integer"},
        "maxReplicas": {"type": "integer"},
        "cluster": {"type": "string",
                    "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "cluster is immutable"}]},
        "owner": {"type": "string",
                  "x-kubernetes-validations": [{"rule": "self.startsWith('team-')", "reason": "FieldValueForbidden",
                                                "messageExpression": "'owner ' + self + ' is not a team'"}]}
    }}}})
}

#[test]
fn cel_rules_and_transition_rules() {
    check_crd(&crd_with(cel_schema())).unwrap();
    let info = info_for(cel_schema());
    let mut o = obj(json!({"replicas": 5, "maxReplicas": 3}));
    let causes = admit(&info, &mut o, None).unwrap_err();
    assert_eq!(
        messages(&causes),
        [r#"spec: Invalid value: "object": replicas must not exceed maxReplicas"#]
    );

    // Transition rule: skipped on create, enforced on update.
    let mut created = obj(json!({"replicas": 1, "maxReplicas": 3, "cluster": "a"}));
    admit(&info, &mut created, None).unwrap();
    let mut updated = obj(json!({"replicas": 1, "maxReplicas": 3, "cluster": "b"}));
    let causes = admit(&info, &mut updated, Some(&created)).unwrap_err();
    assert_eq!(
        messages(&causes),
        [r#"spec.cluster: Invalid value: "string": cluster is immutable"#]
    );
    let mut same = obj(json!({"replicas": 2, "maxReplicas": 3, "cluster": "a"}));
    admit(&info, &mut same, Some(&created)).unwrap();

    let mut o = obj(json!({"replicas": 1, "maxReplicas": 3, "owner": "bob"}));
    let causes = admit(&info, &mut o, None).unwrap_err();
    assert_eq!(
        messages(&causes),
        ["spec.owner: Forbidden: owner bob is not a team"]
    );
    assert_eq!(causes[0].reason, "FieldValueForbidden");
}

#[test]
fn compiled_validators_are_cached_and_reused() {
    let info = info_for(widget_schema());
    for i in 0..50 {
        let mut o = obj(json!({"name": format!("n{i}"), "replicas": i % 10}));
        admit(&info, &mut o, None).unwrap();
    }
}

fn field_errors(crd: &Value) -> Vec<String> {
    messages(&check_crd(crd).unwrap_err())
}

#[test]
fn check_crd_rejects_bad_names_scope_and_versions() {
    let mut crd = crd_with(widget_schema());
    crd["metadata"]["name"] = json!("widget.test.plinth.dev");
    assert_eq!(
        field_errors(&crd),
        [
            r#"metadata.name: Invalid value: "widget.test.plinth.dev": must be spec.names.plural+"."+spec.group"#
        ]
    );

    let mut crd = crd_with(widget_schema());
    crd["spec"]["scope"] = json!("Global");
    assert_eq!(
        field_errors(&crd),
        [r#"spec.scope: Unsupported value: "Global": supported values: "Cluster", "Namespaced""#]
    );

    let mut crd = crd_with(widget_schema());
    crd["spec"]["names"]["listKind"] = json!("Widget");
    assert!(field_errors(&crd)[0].contains("kind and listKind may not be the same"));

    let mut crd = crd_with(widget_schema());
    crd["spec"]["names"]["plural"] = json!("Widgets");
    crd["metadata"]["name"] = json!("Widgets.test.plinth.dev");
    assert!(field_errors(&crd)[0].starts_with("spec.names.plural: Invalid value"));

    let mut crd = crd_with(widget_schema());
    let v = crd["spec"]["versions"][0].clone();
    let mut v2 = v.clone();
    v2["name"] = json!("v2");
    crd["spec"]["versions"] = json!([v, v2]);
    let errs = field_errors(&crd);
    assert_eq!(errs.len(), 1);
    assert!(errs[0].starts_with("spec.versions: Invalid value"));
    assert!(errs[0].ends_with("must have exactly one version marked as storage version"));

    let mut crd = crd_with(widget_schema());
    crd["spec"]["versions"] = json!([]);
    assert_eq!(
        field_errors(&crd)[0],
        "spec.versions: Required value: must have at least one version"
    );

    let mut crd = crd_with(widget_schema());
    crd["spec"]["versions"][0]
        .as_object_mut()
        .unwrap()
        .remove("schema");
    assert_eq!(
        field_errors(&crd),
        ["spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required"]
    );

    let mut crd = crd_with(widget_schema());
    crd["spec"]["group"] = json!("nodots");
    crd["metadata"]["name"] = json!("widgets.nodots");
    assert_eq!(
        field_errors(&crd),
        [r#"spec.group: Invalid value: "nodots": should be a domain with at least one dot"#]
    );
}

#[test]
fn check_crd_enforces_structural_schemas() {
    let crd = crd_with(
        json!({"type": "object", "properties": {"spec": {"properties": {"a": {"type": "string"}}}}}),
    );
    assert_eq!(
        field_errors(&crd),
        [
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields"
        ]
    );

    let crd = crd_with(
        json!({"type": "object", "properties": {"spec": {"type": "object",
        "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}}}}),
    );
    assert_eq!(
        field_errors(&crd),
        [
            "spec.versions[0].schema.openAPIV3Schema.properties[spec].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive"
        ]
    );

    let crd = crd_with(
        json!({"type": "object", "properties": {"metadata": {"type": "object",
        "properties": {"name": {"type": "string"}, "labels": {"type": "object"}}}}}),
    );
    assert_eq!(
        field_errors(&crd),
        [
            "spec.versions[0].schema.openAPIV3Schema.properties[metadata].properties[labels]: Forbidden: must not be specified at the root metadata other than name and generateName"
        ]
    );

    let crd = crd_with(json!({"type": "string"}));
    assert_eq!(
        field_errors(&crd),
        [
            r#"spec.versions[0].schema.openAPIV3Schema.type: Invalid value: "string": must be object at the root"#
        ]
    );

    let crd = crd_with(
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "port": {"type": "string", "x-kubernetes-int-or-string": true},
        "list": {"type": "array"},
        "free": {"x-kubernetes-preserve-unknown-fields": true},
        "tags": {"type": "array", "x-kubernetes-list-type": "bag", "items": {"type": "string"}}}}}}),
    );
    let errs = field_errors(&crd);
    let p = "spec.versions[0].schema.openAPIV3Schema.properties[spec]";
    assert_eq!(
        errs,
        [
            format!(
                r#"{p}.properties[port].type: Invalid value: "string": must be empty if x-kubernetes-int-or-string is true"#
            ),
            format!("{p}.properties[list].items: Required value: must be specified"),
            format!(
                r#"{p}.properties[tags].x-kubernetes-list-type: Unsupported value: "bag": supported values: "atomic", "set", "map""#
            ),
        ]
    );
}

#[test]
fn check_crd_checks_printer_columns_and_cel() {
    let mut crd = crd_with(widget_schema());
    crd["spec"]["versions"][0]["additionalPrinterColumns"] = json!([
        {"name": "Ready", "type": "text", "jsonPath": ".status.ready"},
        {"name": "Phase", "type": "string", "jsonPath": "status.phase"},
        {"name": "Ok", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"}
    ]);
    let errs = field_errors(&crd);
    assert_eq!(errs.len(), 2, "{errs:?}");
    assert_eq!(
        errs[0],
        r#"spec.versions[0].additionalPrinterColumns[0].type: Unsupported value: "text": supported values: "boolean", "date", "integer", "number", "string""#
    );
    assert!(errs[1].starts_with(r#"spec.versions[0].additionalPrinterColumns[1].jsonPath: Invalid value: "status.phase": must be a simple json path"#));

    let crd = crd_with(
        json!({"type": "object", "properties": {"spec": {"type": "object",
        "x-kubernetes-validations": [{"rule": "self.a >"}],
        "properties": {"a": {"type": "integer"}}}}}),
    );
    let errs = field_errors(&crd);
    assert_eq!(errs.len(), 1);
    assert!(
        errs[0].starts_with(r#"spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: "self.a >": compilation failed"#),
        "{errs:?}"
    );
}

#[test]
fn field_validation_directives() {
    let info = info_for(widget_schema());
    let o = obj(json!({"name": "a", "foo": 1, "bar": {"x": 1}}));
    assert_eq!(field_validation(&info, &o, Some("Ignore")), Ok(vec![]));
    assert_eq!(
        field_validation(&info, &o, Some("Warn")),
        Ok(vec![
            r#"unknown field "spec.foo""#.to_string(),
            r#"unknown field "spec.bar""#.to_string()
        ])
    );
    assert_eq!(field_validation(&info, &o, None).unwrap().len(), 2);
    assert_eq!(
        field_validation(&info, &o, Some("Strict"))
            .unwrap_err()
            .to_string(),
        r#"strict decoding error: unknown field "spec.foo", unknown field "spec.bar""#
    );
    let clean = obj(json!({"name": "a"}));
    assert_eq!(field_validation(&info, &clean, Some("Strict")), Ok(vec![]));
    assert!(field_validation(&info, &clean, Some("Loose")).is_err());
}

#[test]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
fn plinth_kratix_crds_pass_check_crd_and_admit_marketplace_promises() {
    let crds: Vec<Value> = plinth_api::crds::all_crds()
        .into_iter()
        .map(|c| serde_json::to_value(c).unwrap())
        .collect();
    assert!(!crds.is_empty());
    for crd in &crds {
        if let Err(causes) = check_crd(crd) {
            panic!("{}: {:?}", crd["metadata"]["name"], messages(&causes));
        }
    }
    let promise_crd = crds
        .iter()
        .find(|c| c["spec"]["names"]["kind"] == "Promise")
        .expect("Promise CRD");
    let info = info_from_crd(promise_crd);
    let mut admitted = 0;
    let mut dirs: Vec<_> = std::fs::read_dir(MARKETPLACE)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    dirs.sort();
    for dir in dirs {
        let p = dir.join("promise.yaml");
        if !p.exists() {
            continue;
        }
        let mut promise = load_yaml(p.to_str().unwrap());
        let before = promise.clone();
        if let Err(causes) = admit(&info, &mut promise, None) {
            panic!("{}: {:?}", p.display(), messages(&causes));
        }
        assert_eq!(
            promise["spec"]["api"],
            before["spec"]["api"],
            "{}: spec.api kept whole",
            p.display()
        );
        admitted += 1;
    }
    assert!(admitted >= 15, "admitted {admitted}");
}

#[test]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
fn generated_request_crds_pass_check_crd_and_admit_requests_with_status() {
    for (name, api) in marketplace_crds() {
        let crd = plinth_api::request_crd::build_request_crd(&name, &api)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        if let Err(causes) = check_crd(&crd) {
            panic!("{name}: {:?}", messages(&causes));
        }
        let rr = format!("{MARKETPLACE}/{name}/resource-request.yaml");
        if !std::path::Path::new(&rr).exists() {
            continue;
        }
        let info = info_from_crd(&crd);
        let mut request = load_yaml(&rr);
        request["status"] = json!({
            "message": "Resource requested",
            "observedGeneration": 1,
            "conditions": [{"type": "Reconciled", "status": "True", "reason": "Reconciled",
                            "message": "Reconciled", "lastTransitionTime": "2024-01-01T00:00:00Z"}],
            "custom": {"anything": true}
        });
        if let Err(causes) = admit(&info, &mut request, None) {
            panic!("{name}: {:?}", messages(&causes));
        }
        assert_eq!(
            request["status"]["custom"],
            json!({"anything": true}),
            "{name}: status preserves unknown fields"
        );
        assert_eq!(request["status"]["conditions"][0]["type"], "Reconciled");
    }
}

/// A HealthRecord with a state outside the enum is rejected at
/// admission, naming the field and the allowed values.
#[test]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
fn health_record_state_outside_enum_is_rejected() {
    let crd = plinth_api::crds::all_crds()
        .into_iter()
        .map(|c| serde_json::to_value(c).unwrap())
        .find(|c| c["spec"]["names"]["kind"] == "HealthRecord")
        .expect("HealthRecord CRD");
    let info = info_from_crd(&crd);
    let dir = concat!(
        env!("PLINTH_CORPUS_DIR"),
        "/kratix-system-tests/healthchecks"
    );
    for f in ["healthy-health-record.yaml", "unhealthy-health-record.yaml"] {
        let mut hr = load_yaml(&format!("{dir}/{f}"));
        if let Err(causes) = admit(&info, &mut hr, None) {
            panic!("{f}: {:?}", messages(&causes));
        }
    }
    let mut hr = load_yaml(&format!("{dir}/healthy-health-record.yaml"));
    hr["data"]["state"] = json!("broken");
    let causes = admit(&info, &mut hr, None).unwrap_err();
    assert_eq!(causes.len(), 1, "{:?}", messages(&causes));
    assert_eq!(causes[0].field, "data.state");
    assert_eq!(causes[0].reason, "FieldValueNotSupported");
    assert!(
        causes[0]
            .message
            .starts_with(r#"Unsupported value: "broken": supported values: "#)
            && causes[0].message.contains(r#""healthy""#),
        "{:?}",
        causes[0]
    );
}

#[test]
fn check_crd_checks_conversion_and_scale() {
    let mut crd = crd_with(widget_schema());
    crd["spec"]["conversion"] = json!({"strategy": "Webhook"});
    crd["spec"]["versions"][0]["subresources"] = json!({"scale": {
        "specReplicasPath": ".status.replicas", "statusReplicasPath": ".status.replicas"}});
    assert_eq!(
        field_errors(&crd),
        [
            "spec.conversion.webhook.clientConfig: Required value: required when strategy is set to Webhook",
            "spec.conversion.webhook.conversionReviewVersions: Required value: must include at least one of v1, v1beta1",
            r#"spec.versions[0].subresources.scale.specReplicasPath: Invalid value: ".status.replicas": should be a json path under .spec"#,
        ]
    );
    let mut crd = crd_with(widget_schema());
    crd["spec"]["conversion"] = json!({"strategy": "None"});
    crd["spec"]["versions"][0]["subresources"] = json!({"status": {}, "scale": {
        "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
        "labelSelectorPath": ".status.selector"}});
    check_crd(&crd).unwrap();
}

#[test]
fn unknown_object_meta_fields_are_pruned_at_root_and_in_embedded_resources() {
    let info = info_for(widget_schema());
    let mut o = obj(
        json!({"name": "a", "template": {"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cm", "labels": {"a": "b"}, "colour": "x"}}}),
    );
    o["metadata"]["bogus"] = json!(1);
    o["metadata"]["labels"] = json!({"team": "a"});
    assert_eq!(
        unknown_fields(&info, &o),
        ["metadata.bogus", "spec.template.metadata.colour"]
    );
    admit(&info, &mut o, None).unwrap();
    assert_eq!(
        o["metadata"],
        json!({"name": "w", "namespace": "default", "labels": {"team": "a"}})
    );
    assert_eq!(
        o["spec"]["template"]["metadata"],
        json!({"name": "cm", "labels": {"a": "b"}})
    );
}

fn kratix_info(kind: &str) -> ResourceInfo {
    let crd = plinth_api::crds::all_crds()
        .into_iter()
        .map(|c| serde_json::to_value(c).unwrap())
        .find(|c| c["spec"]["names"]["kind"] == kind)
        .expect("Kratix CRD");
    info_from_crd(&crd)
}

/// Typos in a Promise are unknown fields (reported under fieldValidation, pruned), as
/// with Kratix's generated CRD; embedded objects keep their fields.
#[test]
fn kratix_schemas_know_their_fields() {
    let info = kratix_info("Promise");
    let mut p = json!({
        "apiVersion": "platform.kratix.io/v1alpha1", "kind": "Promise",
        "metadata": {"name": "p"},
        "spec": {
            "destinationSelector": [{"matchLabels": {"a": "b"}}],
            "destinationSelectors": [{"matchLabels": {"a": "b"}, "matchLabel": {}}],
            "requiredPromises": [{"name": "x", "versoin": "v1"}],
            "dependencies": [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}, "anything": 1}],
            "workflows": {
                "config": {"pipelineNamespace": "ns", "reconcileInterval": "1h"},
                "resource": {"confgure": [], "configure": [{"apiVersion": "platform.kratix.io/v1alpha1", "kind": "Pipeline", "metadata": {"name": "a"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}]}
            },
            "api": {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "a.b"}, "spec": {"anything": true}}
        }
    });
    assert_eq!(
        unknown_fields(&info, &p),
        [
            "spec.destinationSelector",
            "spec.destinationSelectors[0].matchLabel",
            "spec.requiredPromises[0].versoin",
            "spec.workflows.config.reconcileInterval",
            "spec.workflows.resource.confgure",
        ]
    );
    admit(&info, &mut p, None).unwrap();
    assert!(p["spec"].get("destinationSelector").is_none());
    assert_eq!(p["spec"]["dependencies"][0]["anything"], 1);
    assert_eq!(p["spec"]["api"]["spec"]["anything"], true);
    for kind in [
        "Destination",
        "GitStateStore",
        "BucketStateStore",
        "Work",
        "WorkPlacement",
        "PromiseRelease",
    ] {
        let info = kratix_info(kind);
        let o = json!({"apiVersion": "platform.kratix.io/v1alpha1", "kind": kind,
                       "metadata": {"name": "x", "namespace": "default"}, "spec": {"typo": 1}});
        assert_eq!(unknown_fields(&info, &o), ["spec.typo"], "{kind}");
    }
}

/// A Promise without `spec` is a marker Promise: accepted, with `spec: {}` defaulted.
#[test]
fn a_promise_without_spec_is_admitted() {
    let info = kratix_info("Promise");
    let mut p = json!({"apiVersion": "platform.kratix.io/v1alpha1", "kind": "Promise",
                       "metadata": {"name": "marker"}});
    if let Err(c) = admit(&info, &mut p, None) {
        panic!("{:?}", messages(&c));
    }
    assert_eq!(p["spec"], json!({}));
}
