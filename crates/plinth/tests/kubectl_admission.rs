//! The real `kubectl` against `plinth up`: what the API server refuses at admission, and
//! with which message — unknown fields in Kratix kinds, pipeline containers checked as a
//! Pod's, marker Promises, CRDs that would replace served APIs, object metadata, patches
//! that touch an object's identity.

use crate::bad_promises;
use crate::support;

use bad_promises::{BAD_PIPELINE, BAD_PIPELINE_CAUSES, STRING_COMMAND, STRING_COMMAND_CAUSE};
use support::Plinth;

fn kubectl_available() -> bool {
    std::process::Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_ok_and(|o| o.status.success())
}

macro_rules! plinth_or_skip {
    () => {{
        if !kubectl_available() {
            println!("SKIPPED: kubectl not found");
            return;
        }
        Plinth::up(&["--no-controllers"]).await
    }};
}

fn write(p: &Plinth, name: &str, content: &str) -> String {
    let path = p.dir.path().join(name);
    std::fs::write(&path, content).expect("write manifest");
    path.to_string_lossy().into_owned()
}

/// Runs kubectl expecting failure; returns stderr.
fn kubectl_fails(p: &Plinth, args: &[&str]) -> String {
    let out = p.kubectl_raw(args);
    assert!(
        !out.status.success(),
        "kubectl {} unexpectedly succeeded: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

const PROMISE_WITH_TYPO: &str = r#"
apiVersion: platform.kratix.io/v1alpha1
kind: Promise
metadata:
  name: typo
spec:
  destinationSelector:
  - matchLabels:
      environment: prod
  dependencies:
  - apiVersion: v1
    kind: Namespace
    metadata:
      name: typo-deps
  workflows:
    resource:
      confgure: []
"#;

/// A Promise with misspelt fields: `--validate=strict` (kubectl's default) refuses it
/// naming every unknown field; the default warn mode stores it without them and prints
/// the same names as warnings, exactly as a cluster running Kratix's CRDs does.
#[tokio::test(flavor = "multi_thread")]
async fn unknown_fields_in_a_promise_are_refused_or_warned_about() {
    let p = plinth_or_skip!();
    let f = write(&p, "typo.yaml", PROMISE_WITH_TYPO);
    let err = kubectl_fails(&p, &["apply", "-f", &f]);
    assert!(
        err.contains(r#"unknown field "spec.destinationSelector""#),
        "{err}"
    );
    assert!(
        err.contains(r#"unknown field "spec.workflows.resource.confgure""#),
        "{err}"
    );

    let out = p.kubectl_raw(&["apply", "--validate=warn", "-f", &f]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(r#"unknown field "spec.destinationSelector""#),
        "{stderr}"
    );
    let stored: serde_json::Value =
        serde_json::from_str(&p.kubectl(&["get", "promise", "typo", "-o", "json"])).unwrap();
    assert!(
        stored["spec"].get("destinationSelector").is_none(),
        "{stored}"
    );
    assert_eq!(
        stored["spec"]["dependencies"][0]["metadata"]["name"],
        "typo-deps"
    );
}

/// A Promise with no spec at all is a valid marker Promise (Kratix's CRD leaves `spec`
/// optional).
#[tokio::test(flavor = "multi_thread")]
async fn a_promise_without_spec_is_accepted() {
    let p = plinth_or_skip!();
    let f = write(
        &p,
        "marker.yaml",
        "apiVersion: platform.kratix.io/v1alpha1\nkind: Promise\nmetadata:\n  name: marker\n",
    );
    let out = p.kubectl(&["apply", "-f", &f]);
    assert!(
        out.contains("promise.platform.kratix.io/marker created"),
        "{out}"
    );
    let out = p.kubectl(&[
        "get",
        "promise",
        "marker",
        "-o",
        "jsonpath={.metadata.name}",
    ]);
    assert_eq!(out, "marker");
}

/// Pipeline containers are checked as Kubernetes checks a Pod's containers; the 422
/// names every field.
#[tokio::test(flavor = "multi_thread")]
async fn pipeline_containers_are_validated_like_pod_containers() {
    let p = plinth_or_skip!();
    let f = write(&p, "badpipe.yaml", BAD_PIPELINE);
    let err = kubectl_fails(&p, &["apply", "--validate=false", "-f", &f]);
    for want in BAD_PIPELINE_CAUSES {
        assert!(err.contains(want), "missing {want:?} in {err}");
    }
    let out = p.kubectl_raw(&["get", "promise", "badpipe"]);
    assert!(!out.status.success(), "nothing stored");
}

/// A pipeline is decoded at admission exactly as the workflow engine reads it, so a
/// value of the wrong type is refused with its path instead of failing every request.
#[tokio::test(flavor = "multi_thread")]
async fn a_pipeline_field_of_the_wrong_type_is_refused_with_its_path() {
    let p = plinth_or_skip!();
    let f = write(&p, "stringcmd.yaml", STRING_COMMAND);
    let err = kubectl_fails(&p, &["apply", "--validate=false", "-f", &f]);
    let want = STRING_COMMAND_CAUSE;
    assert!(err.contains(want), "missing {want:?} in {err}");
    let out = p.kubectl_raw(&["get", "promise", "stringcmd"]);
    assert!(!out.status.success(), "nothing stored");
}

const INTRUDER: &str = r#"
apiVersion: platform.kratix.io/v1alpha1
kind: Promise
metadata:
  name: intruder
spec:
  api:
    apiVersion: apiextensions.k8s.io/v1
    kind: CustomResourceDefinition
    metadata:
      name: GROUP_PLURAL
    spec:
      group: GROUP
      names: {kind: Intruder, plural: PLURAL, singular: intruder}
      scope: Namespaced
      versions:
      - name: v1alpha1
        served: true
        storage: true
        schema:
          openAPIV3Schema:
            type: object
            x-kubernetes-preserve-unknown-fields: true
"#;

const RAW_CRD: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: GROUP_PLURAL
spec:
  group: GROUP
  names: {kind: Intruder, plural: PLURAL, singular: intruder}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
"#;

fn fill(template: &str, group: &str, plural: &str) -> String {
    template
        .replace("GROUP_PLURAL", &format!("{plural}.{group}"))
        .replace("GROUP", group)
        .replace("PLURAL", plural)
}

/// Neither a Promise's API nor a CRD applied directly can replace a built-in or a Kratix
/// kind, or use a reserved group; the real APIs keep answering.
#[tokio::test(flavor = "multi_thread")]
async fn crds_cannot_take_over_served_or_reserved_apis() {
    let p = plinth_or_skip!();
    for (group, plural, why) in [
        (
            "platform.kratix.io",
            "promises",
            "reserved for the Kratix kinds",
        ),
        (
            "rbac.authorization.k8s.io",
            "roles",
            "served by the API server itself",
        ),
        ("example.k8s.io", "widgets", "reserved for Kubernetes"),
        (
            "platform.syntasso.io",
            "widgets",
            "reserved for the Kratix kinds",
        ),
    ] {
        let f = write(&p, "intruder.yaml", &fill(INTRUDER, group, plural));
        let err = kubectl_fails(&p, &["apply", "-f", &f]);
        assert!(
            err.contains("spec.api.spec.group") && err.contains(why),
            "Promise API {plural}.{group}: {err}"
        );
        let f = write(&p, "crd.yaml", &fill(RAW_CRD, group, plural));
        let err = kubectl_fails(&p, &["apply", "-f", &f]);
        assert!(
            err.contains("spec.group") && err.contains(why),
            "CRD {plural}.{group}: {err}"
        );
    }
    p.kubectl(&["get", "--raw", "/apis/platform.kratix.io/v1alpha1/promises"]);
    p.kubectl(&["get", "--raw", "/apis/rbac.authorization.k8s.io/v1/roles"]);
    // A Kratix-style group of the user's own is fine.
    let f = write(
        &p,
        "ok.yaml",
        &fill(RAW_CRD, "marketplace.kratix.io", "widgets"),
    );
    p.kubectl(&["apply", "-f", &f]);
}

/// Object metadata is validated by the server for every kind (kubectl's client-side
/// checks are bypassed with `--raw` here, as any other client would).
#[tokio::test(flavor = "multi_thread")]
async fn object_metadata_is_validated_on_the_server() {
    let p = plinth_or_skip!();
    let cases = [
        (
            r#"{"labels": {"team": "a b"}}"#,
            "metadata.labels: Invalid value: \"a b\"",
        ),
        (
            r#"{"labels": {"a b/c d": "x"}}"#,
            "metadata.labels: Invalid value: \"a b/c d\"",
        ),
        (
            r#"{"annotations": {"bad key!": "x"}}"#,
            "metadata.annotations: Invalid value: \"bad key!\"",
        ),
        (
            r#"{"finalizers": ["not valid"]}"#,
            "metadata.finalizers: Invalid value: \"not valid\"",
        ),
    ];
    for (i, (extra, want)) in cases.iter().enumerate() {
        let mut meta: serde_json::Value = serde_json::from_str(extra).unwrap();
        meta["name"] = serde_json::json!(format!("cm{i}"));
        let body = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta});
        let f = write(&p, "cm.json", &body.to_string());
        let err = kubectl_fails(
            &p,
            &[
                "create",
                "--raw",
                "/api/v1/namespaces/default/configmaps",
                "-f",
                &f,
            ],
        );
        assert!(err.contains(want), "{extra}: {err}");
    }
    let big = "x".repeat(256 * 1024);
    let body = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "big", "annotations": {"a": big}}});
    let f = write(&p, "big.json", &body.to_string());
    let err = kubectl_fails(
        &p,
        &[
            "create",
            "--raw",
            "/api/v1/namespaces/default/configmaps",
            "-f",
            &f,
        ],
    );
    assert!(
        err.contains("metadata.annotations: Too long: must have at most 262144 bytes"),
        "{err}"
    );
    let body = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"generateName": "Bad_"}});
    let f = write(&p, "gen.json", &body.to_string());
    let err = kubectl_fails(
        &p,
        &[
            "create",
            "--raw",
            "/api/v1/namespaces/default/configmaps",
            "-f",
            &f,
        ],
    );
    assert!(
        err.contains("metadata.generateName: Invalid value: \"Bad_\""),
        "{err}"
    );
    // Updates and patches are checked too, for custom resources as well.
    p.kubectl(&["create", "configmap", "ok"]);
    let err = kubectl_fails(
        &p,
        &[
            "patch",
            "configmap",
            "ok",
            "--type=merge",
            "-p",
            r#"{"metadata":{"labels":{"x":"a b"}}}"#,
        ],
    );
    assert!(
        err.contains("metadata.labels: Invalid value: \"a b\""),
        "{err}"
    );
    let f = write(
        &p,
        "marker.yaml",
        "apiVersion: platform.kratix.io/v1alpha1\nkind: Promise\nmetadata:\n  name: marker\n",
    );
    p.kubectl(&["apply", "-f", &f]);
    let err = kubectl_fails(
        &p,
        &[
            "patch",
            "promise",
            "marker",
            "--type=json",
            "-p",
            r#"[{"op":"add","path":"/metadata/finalizers","value":["a b"]}]"#,
        ],
    );
    assert!(
        err.contains("metadata.finalizers: Invalid value: \"a b\""),
        "{err}"
    );
}

/// A JSON patch that removes `/metadata`, or changes an object's name, is refused; a
/// patch that replaces metadata without naming finalizers keeps them.
#[tokio::test(flavor = "multi_thread")]
async fn patches_cannot_drop_metadata_or_change_identity() {
    let p = plinth_or_skip!();
    p.kubectl(&["create", "configmap", "keep"]);
    p.kubectl(&["label", "configmap", "keep", "team=a"]);
    p.kubectl(&[
        "patch",
        "configmap",
        "keep",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":["example.com/hold"]}}"#,
    ]);
    let err = kubectl_fails(
        &p,
        &[
            "patch",
            "configmap",
            "keep",
            "--type=json",
            "-p",
            r#"[{"op":"remove","path":"/metadata"}]"#,
        ],
    );
    assert!(err.contains("cannot remove an object's metadata"), "{err}");
    let err = kubectl_fails(
        &p,
        &[
            "patch",
            "configmap",
            "keep",
            "--type=json",
            "-p",
            r#"[{"op":"replace","path":"/metadata/name","value":"other"}]"#,
        ],
    );
    assert!(err.contains("cannot change the name"), "{err}");
    let err = kubectl_fails(
        &p,
        &[
            "patch",
            "configmap",
            "keep",
            "--type=merge",
            "-p",
            r#"{"metadata":{"namespace":"kube-system"}}"#,
        ],
    );
    assert!(err.contains("cannot change the namespace"), "{err}");
    p.kubectl(&[
        "patch",
        "configmap",
        "keep",
        "--type=json",
        "-p",
        r#"[{"op":"replace","path":"/metadata","value":{"name":"keep","namespace":"default","labels":{"team":"b"}}}]"#,
    ]);
    let cm: serde_json::Value =
        serde_json::from_str(&p.kubectl(&["get", "configmap", "keep", "-o", "json"])).unwrap();
    assert_eq!(cm["metadata"]["labels"]["team"], "b");
    assert_eq!(cm["metadata"]["finalizers"][0], "example.com/hold", "{cm}");
    // Naming the finalizers removes them.
    p.kubectl(&[
        "patch",
        "configmap",
        "keep",
        "--type=json",
        "-p",
        r#"[{"op":"remove","path":"/metadata/finalizers"}]"#,
    ]);
    let cm: serde_json::Value =
        serde_json::from_str(&p.kubectl(&["get", "configmap", "keep", "-o", "json"])).unwrap();
    assert!(cm["metadata"].get("finalizers").is_none(), "{cm}");
}

const DESTINATION_BAD_VALUES: &str = r#"
apiVersion: platform.kratix.io/v1alpha1
kind: Destination
metadata: {name: bad-values}
spec:
  path: bad-values
  cleanup: bogus
  strictMatchLabels: "yes"
  filepath: {mode: weird}
  stateStoreRef: {kind: GitStateStore, name: default}
"#;

/// A value a Kratix CRD's schema refuses is reported in the schema's words, every field
/// at once, as a cluster running Kratix's CRDs reports it (the schema is checked before
/// Kratix's validation runs, as kube-apiserver calls validating webhooks after it).
#[tokio::test(flavor = "multi_thread")]
async fn a_value_a_kratix_schema_refuses_is_reported_in_the_schemas_words() {
    let p = plinth_or_skip!();
    let f = write(&p, "bad-values.yaml", DESTINATION_BAD_VALUES);
    let err = kubectl_fails(&p, &["apply", "-f", &f]);
    for want in [
        r#"spec.cleanup: Unsupported value: "bogus": supported values: "none", "all""#,
        r#"spec.filepath.mode: Unsupported value: "weird": supported values: "nestedByMetadata", "aggregatedYAML", "none""#,
        r#"spec.strictMatchLabels: Invalid value: "string": spec.strictMatchLabels in body must be of type boolean: "string""#,
    ] {
        assert!(err.contains(want), "missing {want:?} in {err}");
    }
    assert!(!err.contains("\"null\""), "{err}");
    assert!(
        !p.kubectl_raw(&["get", "destination", "bad-values"])
            .status
            .success(),
        "nothing stored"
    );
}
