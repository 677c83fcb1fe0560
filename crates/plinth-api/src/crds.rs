//! CRD manifests of the Kratix kinds, generated from the types in [`crate::kinds`].

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use serde_json::{Value, json};

/// The CustomResourceDefinitions of every `platform.kratix.io/v1alpha1` kind Plinth serves,
/// generated from the Rust types: Promise, Destination, GitStateStore, BucketStateStore,
/// Work, WorkPlacement, PromiseRelease, PromiseRevision, ResourceBinding, HealthRecord,
/// HealthDefinition, DryRun (preview), and Plinth's HealthSource (`platform.syntasso.io/v1alpha1`).
///
/// Scopes, short names, printer columns, the `kratix` category and status subresources are
/// as Kratix defines them (HealthRecord has no status subresource).
pub fn all_crds() -> Vec<CustomResourceDefinition> {
    [
        crate::Promise::crd(),
        crate::Destination::crd(),
        crate::GitStateStore::crd(),
        crate::BucketStateStore::crd(),
        crate::Work::crd(),
        crate::WorkPlacement::crd(),
        crate::PromiseRelease::crd(),
        crate::PromiseRevision::crd(),
        crate::ResourceBinding::crd(),
        crate::HealthRecord::crd(),
        crate::HealthDefinition::crd(),
        crate::DryRun::crd(),
        crate::HealthSource::crd(),
    ]
    .into_iter()
    .map(user_facing_descriptions)
    .map(strict_schemas)
    .collect()
}

/// Makes the published schemas as strict, and as lenient, as Kratix's generated CRDs:
///
/// * the `extra` maps that keep unmodelled fields in Rust round trips are not part of the
///   schema, so an unknown field (`spec.destinationSelector`) is pruned, reported by
///   `kubectl` as `unknown field` (a warning, or an error with `--validate=strict`), and
///   never reaches a controller; unknown fields are kept only where Kratix keeps them
///   (`spec.api`, pipelines, static dependencies, embedded objects) and in `status`,
///   which only controllers write;
/// * the top-level `spec` is optional, as Kratix declares it: a Promise with no `spec` is
///   a valid marker Promise.
fn strict_schemas(crd: CustomResourceDefinition) -> CustomResourceDefinition {
    fn closed(v: &mut Value) {
        match v {
            Value::Object(m) => {
                // The `extra` catch-all shows up as `additionalProperties: true` or
                // `x-kubernetes-preserve-unknown-fields` next to typed properties.
                if m.contains_key("properties") {
                    if m.get("additionalProperties") == Some(&json!(true)) {
                        m.remove("additionalProperties");
                    }
                    m.remove("x-kubernetes-preserve-unknown-fields");
                }
                m.values_mut().for_each(closed);
            }
            Value::Array(a) => a.iter_mut().for_each(closed),
            _ => {}
        }
    }
    let mut v = serde_json::to_value(&crd).expect("a CRD serialises");
    for version in v
        .pointer_mut("/spec/versions")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        let Some(root) = version.pointer_mut("/schema/openAPIV3Schema") else {
            continue;
        };
        // Status is written by controllers, not users: it keeps what it had, so a status
        // field a schema does not list is never pruned from under its writer.
        for (name, prop) in root
            .get_mut("properties")
            .and_then(Value::as_object_mut)
            .into_iter()
            .flatten()
        {
            if name != "status" {
                closed(prop);
            }
        }
        if let Some(m) = root.as_object_mut()
            && m.get("additionalProperties") == Some(&json!(true))
        {
            m.remove("additionalProperties");
        }
        // Kratix's controllers read a missing spec as an empty one and write it back as
        // `spec: {}`; defaulting it gives every reader the same object at once.
        if let Some(spec) = root
            .pointer_mut("/properties/spec")
            .and_then(Value::as_object_mut)
        {
            spec.entry("default").or_insert_with(|| json!({}));
        }
        if let Some(Value::Array(required)) = root.get_mut("required") {
            required.retain(|r| r != "spec");
            if required.is_empty() {
                root.as_object_mut().map(|m| m.remove("required"));
            }
        }
    }
    serde_json::from_value(v).unwrap_or(crd)
}

/// The schema descriptions come from the types' doc comments; should one carry a
/// section-number citation, `kubectl explain` readers have no use for it, so citations
/// are dropped from the published CRDs.
fn user_facing_descriptions(crd: CustomResourceDefinition) -> CustomResourceDefinition {
    fn clean(v: &mut Value) {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(d)) = m.get_mut("description") {
                    *d = strip_citations(d);
                }
                m.values_mut().for_each(clean);
            }
            Value::Array(a) => a.iter_mut().for_each(clean),
            _ => {}
        }
    }
    let mut v = serde_json::to_value(&crd).expect("a CRD serialises");
    clean(&mut v);
    serde_json::from_value(v).unwrap_or(crd)
}

/// Removes section-number citations (a section sign and number, optionally after
/// `kratix-spec` and in parentheses).
fn strip_citations(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    loop {
        let hit = ["kratix-spec §", "(§"]
            .iter()
            .filter_map(|p| rest.find(p))
            .min();
        let Some(i) = hit else { break };
        let (before, after) = rest.split_at(i);
        let end = after.find([')', ';', ',', '\n']).unwrap_or(after.len());
        out.push_str(before.strip_suffix('(').unwrap_or(before).trim_end());
        rest = &after[end..];
        if let Some(r) = rest.strip_prefix(')') {
            rest = r;
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_descriptions_have_no_reference_citations() {
        for crd in all_crds() {
            let text = serde_json::to_string(&crd).unwrap();
            assert!(
                !text.contains("kratix-spec") && !text.contains('§'),
                "{:?}",
                crd.metadata.name
            );
        }
        assert_eq!(
            strip_citations("A Promise (kratix-spec §1.1). More."),
            "A Promise. More."
        );
        assert_eq!(strip_citations("Required first (§2.3)."), "Required first.");
    }

    #[test]
    fn generated_crds_have_the_kratix_shape() {
        let crds = all_crds();
        assert_eq!(crds.len(), 13);

        for crd in crds.iter().filter(|c| c.spec.names.kind != "HealthSource") {
            assert_eq!(crd.spec.group, "platform.kratix.io");
            assert_eq!(
                crd.spec.names.categories.as_deref(),
                Some(&["kratix".to_string()][..])
            );
        }
        let by = |name: &str| {
            crds.iter()
                .find(|c| c.metadata.name.as_deref() == Some(name))
                .unwrap()
        };
        assert_eq!(by("promises.platform.kratix.io").spec.scope, "Cluster");
        assert_eq!(by("works.platform.kratix.io").spec.scope, "Namespaced");
        let dest = by("destinations.platform.kratix.io");
        assert_eq!(
            dest.spec.names.short_names.as_deref(),
            Some(&["dest".to_string(), "dests".to_string()][..])
        );
        let wp = by("workplacements.platform.kratix.io");
        assert_eq!(
            wp.spec.names.short_names.as_deref(),
            Some(&["wp".to_string(), "wps".to_string()][..])
        );
        assert_eq!(
            by("healthdefinitions.platform.kratix.io").spec.scope,
            "Namespaced"
        );
        let hr = by("healthrecords.platform.kratix.io");
        assert!(
            hr.spec.versions[0]
                .subresources
                .as_ref()
                .is_none_or(|s| s.status.is_none())
        );
        let hr_schema = serde_json::to_value(&hr.spec.versions[0].schema).unwrap();
        assert!(
            hr_schema
                .pointer("/openAPIV3Schema/properties/data/properties/state")
                .is_some(),
            "{hr_schema}"
        );
        let p = by("promises.platform.kratix.io");
        assert!(
            p.spec.versions[0]
                .subresources
                .as_ref()
                .unwrap()
                .status
                .is_some()
        );
        let cols: Vec<_> = p.spec.versions[0]
            .additional_printer_columns
            .as_ref()
            .unwrap()
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(
            cols,
            ["Status", "Kind", "API Version", "Version", "Message"]
        );
        let schema = serde_json::to_value(&p.spec.versions[0].schema).unwrap();
        let api = schema
            .pointer("/openAPIV3Schema/properties/spec/properties/api")
            .unwrap();
        assert_eq!(api["x-kubernetes-embedded-resource"], true);
        assert_eq!(api["x-kubernetes-preserve-unknown-fields"], true);
        let d = serde_json::to_value(&dest.spec.versions[0].schema).unwrap();
        assert_eq!(
            d.pointer("/openAPIV3Schema/properties/spec/properties/filepath/default/mode")
                .unwrap(),
            "nestedByMetadata"
        );
        let rb = by("resourcebindings.platform.kratix.io");
        assert_eq!(
            rb.spec.versions[0].selectable_fields.as_ref().unwrap()[0].json_path,
            ".spec.version"
        );
    }
}
