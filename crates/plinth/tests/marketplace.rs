//! Every marketplace Promise in the corpus applies with the real `kubectl` (default
//! client-side validation), its API CRD becomes Established, its example request is
//! accepted, and a request that violates the schema is rejected naming the field.

use crate::support;

use std::path::PathBuf;

use serde_json::Value;
use support::*;

fn marketplace_promises() -> Vec<PathBuf> {
    let root = corpus("kratix-marketplace");
    let mut out = Vec::new();
    let mut stack = vec![root];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "yaml") {
                let text = std::fs::read_to_string(&path).unwrap();
                if text.lines().any(|l| l == "kind: Promise")
                    && !path.to_string_lossy().contains("/internal/")
                {
                    out.push(path);
                }
            }
        }
    }
    out.sort();
    out
}

/// A copy of `request` whose first string field under `spec` holds an object instead.
fn violating(request: &Value, schema: &Value) -> Option<(Value, String)> {
    let props = schema.pointer("/properties/spec/properties")?.as_object()?;
    let (field, _) = props.iter().find(|(_, p)| p["type"] == "string")?;
    let mut bad = request.clone();
    bad["metadata"]["name"] = "schema-violation".into();
    bad["spec"][field] = serde_json::json!({"not": "a string"});
    Some((bad, format!("spec.{field}")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
async fn every_marketplace_promise_installs_with_kubectl() {
    let promises = marketplace_promises();
    assert!(
        promises.len() >= 20,
        "the corpus holds the marketplace Promises: {promises:?}"
    );
    // Two pairs of marketplace Promises share a name (`app`, `sql`) and cannot live in
    // one platform, as on Kratix: the second of each goes to a second platform.
    let name_of = |f: &PathBuf| -> String {
        let docs: Vec<Value> =
            serde_saphyr::from_multiple(&std::fs::read_to_string(f).unwrap()).unwrap();
        docs.iter().find(|d| d["kind"] == "Promise").unwrap()["metadata"]["name"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let mut seen = std::collections::BTreeSet::new();
    let (first, second): (Vec<PathBuf>, Vec<PathBuf>) = promises
        .iter()
        .cloned()
        .partition(|f| seen.insert(name_of(f)));
    assert!(!second.is_empty() && second.len() < 4, "{second:?}");
    let mut requests_checked = 0;
    let mut violations_checked = 0;
    for batch in [&second, &first] {
        // Pipelines are not what this test is about: no runner.
        let p = Plinth::up(&["--no-runner"]).await;
        install_batch(&p, batch, &mut requests_checked, &mut violations_checked).await;
        if std::ptr::eq(batch, &first) {
            check_redis_and_columns(&p);
        }
    }
    assert!(
        requests_checked >= 10,
        "example requests applied: {requests_checked}"
    );
    assert!(
        violations_checked >= 5,
        "violations rejected: {violations_checked}"
    );
}

async fn install_batch(
    p: &Plinth,
    promises: &[PathBuf],
    requests_checked: &mut usize,
    violations_checked: &mut usize,
) {
    for file in promises {
        let path = file.to_string_lossy().to_string();
        let out = p.kubectl(&["apply", "-f", &path]);
        assert!(
            out.contains("created") || out.contains("configured"),
            "{path}: {out}"
        );
        let docs: Vec<Value> =
            serde_saphyr::from_multiple(&std::fs::read_to_string(file).unwrap()).unwrap();
        let promise = docs.into_iter().find(|d| d["kind"] == "Promise").unwrap();
        let api = &promise["spec"]["api"];
        let Some(crd) = api["metadata"]["name"].as_str() else {
            continue;
        };
        p.kubectl(&[
            "wait",
            "--for=condition=Established",
            &format!("crd/{crd}"),
            "--timeout=60s",
        ]);

        let dir = file.parent().unwrap();
        let request_file = dir.join("resource-request.yaml");
        if !request_file.exists() {
            continue;
        }
        let request: Value =
            serde_saphyr::from_multiple::<Value>(&std::fs::read_to_string(&request_file).unwrap())
                .unwrap()
                .into_iter()
                .find(|d| !d.is_null())
                .unwrap();
        if request["kind"] != api["spec"]["names"]["kind"] {
            continue;
        }
        // Wait until kubectl's discovery sees the new kind, then apply the example request.
        let plural = api["spec"]["names"]["plural"].as_str().unwrap().to_string();
        let group = api["spec"]["group"].as_str().unwrap().to_string();
        wait_until(30, &format!("{plural}.{group} served"), || async {
            p.kubectl_raw(&["get", &format!("{plural}.{group}"), "-A"])
                .status
                .success()
        })
        .await;
        let ns = request["metadata"]["namespace"]
            .as_str()
            .unwrap_or("default")
            .to_string();
        let _ = p.kubectl_raw(&["create", "namespace", &ns]);
        // sql/aws, sql/azure and sql/gcp share one API and one example request.
        let out = p.kubectl(&["apply", "-f", &request_file.to_string_lossy()]);
        assert!(
            out.contains("created") || out.contains("unchanged"),
            "{}: {out}",
            request_file.display()
        );
        *requests_checked += 1;

        let versions = api["spec"]["versions"].as_array().unwrap();
        let storage = versions
            .iter()
            .find(|v| v["storage"] == true)
            .unwrap_or(&versions[0]);
        if let Some((bad, field)) = violating(&request, &storage["schema"]["openAPIV3Schema"]) {
            let bad_file = p.dir.path().join(format!("bad-{plural}.yaml"));
            std::fs::write(&bad_file, serde_json::to_string(&bad).unwrap()).unwrap();
            let out = p.kubectl_raw(&["apply", "-f", &bad_file.to_string_lossy()]);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                !out.status.success(),
                "{}: the violating request was accepted",
                file.display()
            );
            // Strict field validation may answer first (the object's keys are unknown
            // fields under a string); either way the error names the field.
            assert!(stderr.contains(&field), "{}: {stderr}", file.display());
            *violations_checked += 1;
        }
    }
}

fn check_redis_and_columns(p: &Plinth) {
    // redis: a value failing the schema's pattern is rejected with the field named.
    let redis = p.dir.path().join("redis-medium.yaml");
    std::fs::write(&redis, "apiVersion: marketplace.kratix.io/v1alpha1\nkind: redis\nmetadata:\n  name: medium\n  namespace: default\nspec:\n  size: medium\n").unwrap();
    let out = p.kubectl_raw(&["apply", "-f", &redis.to_string_lossy()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("spec.size"),
        "{stderr}"
    );

    // The Promises are listed with Kratix's printer columns.
    let table = p.kubectl(&["get", "promises"]);
    let header = table.lines().next().unwrap();
    for col in [
        "NAME",
        "STATUS",
        "KIND",
        "API VERSION",
        "VERSION",
        "MESSAGE",
    ] {
        assert!(header.contains(col), "{header}");
    }
}
