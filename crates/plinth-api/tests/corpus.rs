//! Compatibility: every `platform.kratix.io/v1alpha1` document of the shared corpus of real
//! Kratix YAML parses into the Plinth types and serialises back to the same JSON.

use plinth_api::*;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("PLINTH_CORPUS_DIR"))
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            yaml_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(p);
        }
    }
}

/// `null`-valued keys mean "absent" in Kubernetes (e.g. `creationTimestamp: null`).
fn strip_nulls(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|_, v| !v.is_null());
            m.values_mut().for_each(strip_nulls);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

fn round_trip<T: DeserializeOwned + Serialize>(doc: &Value, file: &Path) {
    let typed: T = serde_json::from_value(doc.clone())
        .unwrap_or_else(|e| panic!("{}: {} does not parse: {e}", file.display(), doc["kind"]));
    let mut back = serde_json::to_value(&typed).unwrap();
    let mut want = doc.clone();
    strip_nulls(&mut back);
    strip_nulls(&mut want);
    assert_eq!(
        back,
        want,
        "{}: {} lost or changed fields in a round-trip",
        file.display(),
        doc["kind"]
    );
}

#[test]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
fn every_kratix_document_round_trips() {
    let dir = corpus_dir();
    assert!(dir.is_dir(), "corpus not found at {}", dir.display());
    let mut files = Vec::new();
    yaml_files(&dir, &mut files);
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut pipelines = 0usize;
    let mut request_crds = 0usize;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let docs: Vec<Value> = match serde_saphyr::from_multiple(&text) {
            Ok(d) => d,
            Err(e) => {
                // Some third-party manifests in the corpus are not valid YAML; no Kratix
                // document may be among them.
                assert!(
                    !text.contains("platform.kratix.io/v1alpha1"),
                    "{}: {e}",
                    file.display()
                );
                continue;
            }
        };
        for doc in docs {
            if doc.get("apiVersion").and_then(Value::as_str) != Some(API_VERSION) {
                continue;
            }
            let kind = doc["kind"].as_str().unwrap_or_default().to_string();
            match kind.as_str() {
                "Promise" => {
                    round_trip::<Promise>(&doc, file);
                    let p: Promise = serde_json::from_value(doc.clone()).unwrap();
                    for t in [WorkflowType::Promise, WorkflowType::Resource] {
                        for a in [WorkflowAction::Configure, WorkflowAction::Delete] {
                            let parsed = p
                                .spec
                                .pipelines(t, a)
                                .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
                            pipelines += parsed.len();
                        }
                    }
                    p.api_crd()
                        .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
                    if let Some(api) = p.spec.api.as_ref().filter(|_| p.spec.has_api()) {
                        let crd = request_crd::build_request_crd(
                            p.metadata.name.as_deref().unwrap(),
                            api,
                        )
                        .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
                        request_crd::request_gvk(&crd).unwrap();
                        // The transformed CRD is a well-formed apiextensions/v1 object.
                        let typed: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition =
                            serde_json::from_value(crd.clone())
                                .unwrap_or_else(|e| panic!("{}: request CRD: {e}", file.display()));
                        assert!(
                            typed.spec.versions.iter().all(|v| v
                                .subresources
                                .as_ref()
                                .is_some_and(|s| s.status.is_some()))
                        );
                        for v in &typed.spec.versions {
                            for col in v.additional_printer_columns.iter().flatten() {
                                assert!(
                                    !col.json_path.is_empty(),
                                    "{}: printer column {} lost its jsonPath",
                                    file.display(),
                                    col.name
                                );
                            }
                        }
                        request_crds += 1;
                    }
                }
                "Destination" => round_trip::<Destination>(&doc, file),
                "GitStateStore" => round_trip::<GitStateStore>(&doc, file),
                "BucketStateStore" => round_trip::<BucketStateStore>(&doc, file),
                "Work" => round_trip::<Work>(&doc, file),
                "WorkPlacement" => round_trip::<WorkPlacement>(&doc, file),
                "PromiseRelease" => round_trip::<PromiseRelease>(&doc, file),
                "PromiseRevision" => round_trip::<PromiseRevision>(&doc, file),
                "ResourceBinding" => round_trip::<ResourceBinding>(&doc, file),
                "HealthRecord" => round_trip::<HealthRecord>(&doc, file),
                "DryRun" => round_trip::<DryRun>(&doc, file),
                // Pipelines are embedded objects; standalone ones are checked strictly.
                "Pipeline" => {
                    Pipeline::parse(&doc).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
                    pipelines += 1;
                }
                other => panic!("{}: unexpected Kratix kind {other}", file.display()),
            }
            *counts.entry(kind).or_default() += 1;
        }
    }
    println!(
        "corpus documents checked per kind: {counts:?}; pipelines parsed strictly: {pipelines}; \
         request CRDs built: {request_crds}"
    );
    for kind in [
        "Promise",
        "Destination",
        "PromiseRelease",
        "HealthRecord",
        "GitStateStore",
        "BucketStateStore",
    ] {
        assert!(
            counts.get(kind).copied().unwrap_or(0) > 0,
            "no {kind} documents found in the corpus"
        );
    }
    assert!(counts["Promise"] >= 30, "{counts:?}");
    assert!(pipelines > 0);
    assert!(request_crds >= 25, "{request_crds}");
}
