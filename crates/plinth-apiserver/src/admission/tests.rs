//! Unit tests of the admission rules.

use super::*;
use serde_json::json;

/// The rules with the given stored Destinations and no state store path.
fn check(kind: &str, obj: &Value, old: Option<&Value>, others: &[Value]) -> Result<(), Vec<Cause>> {
    let facts = Facts {
        destinations: others.to_vec(),
        store_path: None,
    };
    let causes = validate(kind, obj, old, &facts);
    if causes.is_empty() {
        Ok(())
    } else {
        Err(causes)
    }
}

fn promise(pipelines: Value) -> Value {
    json!({"apiVersion": "platform.kratix.io/v1alpha1", "kind": "Promise", "metadata": {"name": "redis"},
           "spec": {"workflows": {"resource": {"configure": pipelines}}}})
}

fn pipe(name: &str) -> Value {
    json!({"apiVersion": "platform.kratix.io/v1alpha1", "kind": "Pipeline", "metadata": {"name": name}, "spec": {"containers": [{"name": "a", "image": "busybox"}]}})
}

#[test]
fn pipelines_and_spec_are_decoded_as_the_controllers_read_them() {
    let mut p = pipe("a");
    p["spec"]["containers"][0]["command"] = json!("echo hi");
    let err = check("Promise", &promise(json!([p])), None, &[]).unwrap_err();
    assert_eq!(err.len(), 1, "{err:?}");
    assert_eq!(
        err[0].field,
        "spec.workflows.resource.configure[0].spec.containers[0].command"
    );
    assert!(err[0].message.contains("expected a sequence"), "{err:?}");
    let mut obj = promise(json!([pipe("a")]));
    obj["spec"]["destinationSelectors"] = json!([{"matchLabels": "env=dev"}]);
    let err = check("Promise", &obj, None, &[]).unwrap_err();
    assert_eq!(
        err[0].field, "spec.destinationSelectors[0].matchLabels",
        "{err:?}"
    );
}

#[test]
fn a_value_of_the_wrong_type_is_named_as_such_not_as_missing() {
    let at = "spec.workflows.resource.configure[0].spec.containers";
    for (field, value, expected) in [
        ("image", json!(["busybox"]), "expected a string"),
        ("image", json!(5), "expected a string"),
        ("name", json!(5), "expected a string"),
        (
            "resources",
            json!(5),
            "expected a mapping (ResourceRequirements)",
        ),
    ] {
        let mut p = pipe("a");
        p["spec"]["containers"][0][field] = value.clone();
        let err = check("Promise", &promise(json!([p])), None, &[]).unwrap_err();
        assert_eq!(err.len(), 1, "{field}={value}: {err:?}");
        assert_eq!(err[0].field, format!("{at}[0].{field}"), "{err:?}");
        assert!(
            err[0].message.contains(expected),
            "{field}={value}: {err:?}"
        );
        assert!(!err[0].message.contains("Required"), "{err:?}");
    }
    let mut p = pipe("a");
    p["spec"]["containers"] = json!("x");
    let err = check("Promise", &promise(json!([p])), None, &[]).unwrap_err();
    assert_eq!(
        err.len(),
        1,
        "not also 'needs at least one container': {err:?}"
    );
    assert_eq!(err[0].field, at);
}

#[test]
fn duplicate_and_long_pipeline_names_are_rejected() {
    let err = check(
        "Promise",
        &promise(json!([pipe("a"), pipe("a")])),
        None,
        &[],
    )
    .unwrap_err();
    assert_eq!(err[0].reason, "FieldValueDuplicate");
    assert_eq!(
        err[0].field,
        "spec.workflows.resource.configure[1].metadata.name"
    );
    let long = "x".repeat(50);
    let err = check("Promise", &promise(json!([pipe(&long)])), None, &[]).unwrap_err();
    assert_eq!(err[0].reason, "FieldValueTooLong");
    assert!(
        check(
            "Promise",
            &promise(json!([pipe("a"), pipe("b")])),
            None,
            &[]
        )
        .is_ok()
    );
}

#[test]
fn short_intervals_are_rejected() {
    let mut p = promise(json!([]));
    p["spec"]["workflows"]["config"] = json!({"reconciliationInterval": "30s"});
    let err = check("Promise", &p, None, &[]).unwrap_err();
    assert_eq!(err[0].field, "spec.workflows.config.reconciliationInterval");
    p["spec"]["workflows"]["config"] = json!({"reconciliationInterval": "2m"});
    assert!(check("Promise", &p, None, &[]).is_ok());
}

#[test]
fn api_names_are_immutable_and_cluster_scope_rejected() {
    let api = |kind: &str, scope: &str| {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.test"},
        "spec": {"group": "example.test", "scope": scope, "names": {"kind": kind, "plural": "widgets", "singular": "widget"},
                 "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}}}]}})
    };
    let mut old = promise(json!([]));
    old["spec"]["api"] = api("Widget", "Namespaced");
    assert!(check("Promise", &old, None, &[]).is_ok());
    let mut new = old.clone();
    new["spec"]["api"] = api("Gadget", "Namespaced");
    let err = check("Promise", &new, Some(&old), &[]).unwrap_err();
    assert!(
        err.iter()
            .any(|c| c.field == "spec.api.spec.names" && c.reason == "FieldValueForbidden")
    );
    let mut cluster = promise(json!([]));
    cluster["spec"]["api"] = api("Widget", "Cluster");
    let err = check("Promise", &cluster, None, &[]).unwrap_err();
    assert!(err.iter().any(|c| c.field == "spec.api.spec.scope"));
    let mut removed = old.clone();
    removed["spec"].as_object_mut().unwrap().remove("api");
    assert!(check("Promise", &removed, Some(&old), &[]).is_err());
}

#[test]
fn destinations_need_path_and_store_and_disjoint_roots() {
    let dest = |name: &str, path: &str| json!({"metadata": {"name": name}, "spec": {"path": path, "stateStoreRef": {"kind": "GitStateStore", "name": "s"}}});
    let err = check(
        "Destination",
        &json!({"metadata": {"name": "d"}, "spec": {}}),
        None,
        &[],
    )
    .unwrap_err();
    assert_eq!(
        err.iter().map(|c| c.field.as_str()).collect::<Vec<_>>(),
        ["spec.path", "spec.stateStoreRef"]
    );
    let others = vec![dest("a", "clusters/dev")];
    assert!(
        check(
            "Destination",
            &dest("b", "clusters/dev/team"),
            None,
            &others
        )
        .is_err()
    );
    assert!(check("Destination", &dest("b", "/clusters//dev/"), None, &others).is_err());
    assert!(check("Destination", &dest("b", "."), None, &others).is_err());
    assert!(check("Destination", &dest("b", "clusters/devtest"), None, &others).is_ok());
    let mut bucket = dest("b", "clusters/dev");
    bucket["spec"]["stateStoreRef"]["kind"] = json!("BucketStateStore");
    assert!(
        check("Destination", &bucket, None, &others).is_ok(),
        "another store"
    );
    assert!(
        check("Destination", &dest("a", "clusters/dev"), None, &others).is_ok(),
        "an update of itself"
    );
    assert!(check("Destination", &dest("b", "../x"), None, &others).is_err());
}

#[test]
fn a_destination_has_the_cleanup_finalizer_exactly_when_cleanup_is_all() {
    let fin = plinth_api::constants::finalizers::DESTINATION_CLEANUP;
    let mut d = json!({"metadata": {"name": "a"}, "spec": {"cleanup": "all"}});
    default("Destination", &mut d);
    assert_eq!(d["metadata"]["finalizers"], json!([fin]));
    default("Destination", &mut d);
    assert_eq!(d["metadata"]["finalizers"], json!([fin]), "added once");
    d["metadata"]["finalizers"] = json!(["other", fin]);
    d["spec"]["cleanup"] = json!("none");
    default("Destination", &mut d);
    assert_eq!(d["metadata"]["finalizers"], json!(["other"]));
    d["metadata"]["finalizers"] = json!([fin]);
    d["spec"] = json!({});
    default("Destination", &mut d);
    assert!(d["metadata"].get("finalizers").is_none(), "{d}");
    // Being deleted: left for the controller to release.
    let mut gone = json!({"metadata": {"name": "a", "deletionTimestamp": "2026-01-01T00:00:00Z",
        "finalizers": [fin]}, "spec": {"cleanup": "none"}});
    default("Destination", &mut gone);
    assert_eq!(gone["metadata"]["finalizers"], json!([fin]));
    let mut store = json!({"metadata": {"name": "s"}, "spec": {"cleanup": "all"}});
    default("GitStateStore", &mut store);
    assert!(store["metadata"].get("finalizers").is_none());
}

#[test]
fn access_key_bucket_stores_need_a_secret() {
    let err = check(
        "BucketStateStore",
        &json!({"spec": {"bucketName": "b", "endpoint": "e"}}),
        None,
        &[],
    )
    .unwrap_err();
    assert_eq!(err.len(), 2);
    assert!(
        check(
            "BucketStateStore",
            &json!({"spec": {"authMethod": "IAM", "bucketName": "b", "endpoint": "e"}}),
            None,
            &[]
        )
        .is_ok()
    );
}

#[test]
fn webhook_paths_are_kubebuilder_style() {
    let promise = AdmittedKind::find(plinth_api::GROUP, "Promise").unwrap();
    assert_eq!(
        promise.validate_path(),
        "/validate-platform-kratix-io-v1alpha1-promise"
    );
    let dest = AdmittedKind::find(plinth_api::GROUP, "Destination").unwrap();
    assert_eq!(
        dest.mutate_path(),
        "/mutate-platform-kratix-io-v1alpha1-destination"
    );
    let hs = AdmittedKind::find(plinth_api::HEALTH_SOURCE_GROUP, "HealthSource").unwrap();
    assert_eq!(
        hs.validate_path(),
        "/validate-platform-syntasso-io-v1alpha1-healthsource"
    );
    assert!(AdmittedKind::find(plinth_api::GROUP, "Work").is_none());
}

#[test]
fn stores_need_a_url_and_a_path_inside_them() {
    for (spec, field) in [
        (json!({"branch": "main"}), "spec.url"),
        (
            json!({"url": "file:///r.git", "path": "../up"}),
            "spec.path",
        ),
        (
            json!({"url": "file:///r.git", "authMethod": "password"}),
            "spec.authMethod",
        ),
    ] {
        let err = check("GitStateStore", &json!({ "spec": spec }), None, &[]).unwrap_err();
        assert_eq!(err[0].field, field, "{spec}: {err:?}");
    }
    let good = json!({"spec": {"url": "file:///r.git", "path": "a/b"}});
    assert!(check("GitStateStore", &good, None, &[]).is_ok());
}

#[test]
fn revisions_and_bindings_keep_what_they_name() {
    let rev =
        json!({"spec": {"promiseRef": {"name": "redis"}, "version": "v1", "promiseSpec": {}}});
    assert!(check("PromiseRevision", &rev, None, &[]).is_ok());
    let mut changed = rev.clone();
    changed["spec"]["version"] = json!("v2");
    let err = check("PromiseRevision", &changed, Some(&rev), &[]).unwrap_err();
    assert_eq!(err[0].field, "spec.version");
    assert_eq!(err[0].reason, "FieldValueForbidden");
    let mut respec = rev.clone();
    respec["spec"]["promiseSpec"] = json!({"api": {}});
    assert!(
        check("PromiseRevision", &respec, Some(&rev), &[]).is_ok(),
        "promiseSpec may change"
    );

    let binding = json!({"spec": {"version": "v1", "promiseRef": {"name": "redis"},
        "resourceRef": {"name": "r", "namespace": "default"}}});
    assert!(check("ResourceBinding", &binding, None, &[]).is_ok());
    let mut moved = binding.clone();
    moved["spec"]["version"] = json!("v2");
    assert!(
        check("ResourceBinding", &moved, Some(&binding), &[]).is_ok(),
        "the version moves"
    );
    moved["spec"]["resourceRef"]["name"] = json!("other");
    let err = check("ResourceBinding", &moved, Some(&binding), &[]).unwrap_err();
    assert_eq!(err[0].field, "spec.resourceRef.name");
    let err = check(
        "ResourceBinding",
        &json!({"spec": {"version": "v1"}}),
        None,
        &[],
    )
    .unwrap_err();
    let fields: Vec<_> = err.iter().map(|c| c.field.as_str()).collect();
    assert_eq!(fields, ["spec.promiseRef.name", "spec.resourceRef.name"]);
}

#[test]
fn health_sources_read_one_backend_no_faster_than_the_floor() {
    let git = json!({"url": "file:///h.git"});
    let ok = json!({"spec": {"git": git, "pollInterval": "30s"}});
    assert!(check("HealthSource", &ok, None, &[]).is_ok());
    let err = check(
        "HealthSource",
        &json!({"spec": {"git": git, "pollInterval": "5s"}}),
        None,
        &[],
    )
    .unwrap_err();
    assert_eq!(err[0].field, "spec.pollInterval");
    assert!(err[0].message.contains("at least 10s"), "{err:?}");
    let err = check(
        "HealthSource",
        &json!({"spec": {"git": git, "redis": {"address": "a", "stream": "s"}}}),
        None,
        &[],
    )
    .unwrap_err();
    assert!(err[0].message.contains("git, redis are set"), "{err:?}");
    let err = check(
        "HealthSource",
        &json!({"spec": {"git": git, "path": "../x"}}),
        None,
        &[],
    )
    .unwrap_err();
    assert_eq!(err[0].field, "spec.path");
}

#[test]
fn health_definitions_need_their_refs_and_a_schedule_a_cronjob_runs() {
    let def = |schedule: &str| {
        json!({"spec": {"promiseRef": {"name": "redis"}, "resourceRef": {"name": "r", "namespace": "default"},
        "schedule": schedule, "workflow": {}}})
    };
    assert!(check("HealthDefinition", &def("*/5 * * * *"), None, &[]).is_ok());
    let err = check("HealthDefinition", &def("* * *"), None, &[]).unwrap_err();
    assert_eq!(err[0].field, "spec.schedule");
    let err = check(
        "HealthDefinition",
        &json!({"spec": {"schedule": "@hourly"}}),
        None,
        &[],
    )
    .unwrap_err();
    assert_eq!(err.len(), 2, "{err:?}");
}

#[test]
fn destination_specs_are_decoded_as_the_controller_reads_them() {
    let d = json!({"metadata": {"name": "d"}, "spec": {"path": "p", "stateStoreRef": {"kind": "GitStateStore", "name": "s"},
        "strictMatchLabels": "yes"}});
    let err = check("Destination", &d, None, &[]).unwrap_err();
    assert_eq!(err[0].field, "spec.strictMatchLabels", "{err:?}");
}

/// A lookup over fixed answers.
struct Fixed(Vec<Value>, Option<String>);

impl Lookup for Fixed {
    async fn destinations(&self) -> Result<Vec<Value>, LookupError> {
        Ok(self.0.clone())
    }
    async fn store_path(&self, _: &str, _: &str) -> Result<Option<String>, LookupError> {
        Ok(self.1.clone())
    }
}

#[tokio::test]
async fn review_defaults_then_validates_with_a_patch() {
    let fin = plinth_api::constants::finalizers::DESTINATION_CLEANUP;
    let d = json!({"metadata": {"name": "b"}, "spec": {"path": "dev", "cleanup": "all",
        "stateStoreRef": {"kind": "GitStateStore", "name": "s"}}});
    let decision = review(
        "Destination",
        Operation::Create,
        &d,
        None,
        &Fixed(vec![], None),
    )
    .await
    .unwrap();
    assert!(decision.allowed(), "{:?}", decision.causes);
    assert_eq!(decision.object["metadata"]["finalizers"], json!([fin]));
    let mut patched = d.clone();
    json_patch::patch(&mut patched, &decision.patch).unwrap();
    assert_eq!(patched, decision.object);
    // The store's path joins the roots: "team" under a store at "clusters" overlaps
    // another Destination's "." only when both are on that store.
    let other = json!({"metadata": {"name": "a"}, "spec": {"path": ".",
        "stateStoreRef": {"kind": "GitStateStore", "name": "s"}}});
    let decision = review(
        "Destination",
        Operation::Create,
        &d,
        None,
        &Fixed(vec![other], Some("clusters".into())),
    )
    .await
    .unwrap();
    assert_eq!(decision.causes[0].field, "spec.path");
    assert!(
        decision.causes[0].message.contains("clusters/dev"),
        "{:?}",
        decision.causes
    );
    let gone = review(
        "Destination",
        Operation::Delete,
        &d,
        None,
        &Fixed(vec![], None),
    )
    .await
    .unwrap();
    assert!(gone.allowed() && gone.patch.0.is_empty());
}

#[test]
fn an_object_being_deleted_can_release_its_finalizers_whatever_its_spec() {
    let bad = json!({"metadata": {"name": "typo"}, "spec": {"workflows": {"resource": {"configure": [
        {"apiVersion": "platform.kratix.io/v1alpha1", "kind": "Pipeline",
         "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "imag": "x"}]}}]}}}});
    assert!(check("Promise", &bad, None, &[]).is_err());
    let mut deleting = bad.clone();
    deleting["metadata"]["deletionTimestamp"] = json!("2026-12-03T20:00:00Z");
    let mut released = deleting.clone();
    released["metadata"]["finalizers"] = json!([]);
    assert!(check("Promise", &released, Some(&deleting), &[]).is_ok());
}
