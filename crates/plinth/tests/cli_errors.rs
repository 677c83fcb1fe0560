//! Every CLI error is one readable message naming the object, the field and the cause:
//! an API error reads as the server's message, never as the client's `Status` struct,
//! and nothing else (a log line from stopping the private platform) follows it.

use std::process::Command;

const PROMISE: &str = r#"
apiVersion: platform.kratix.io/v1alpha1
kind: Promise
metadata:
  name: gadget
spec:
  api:
    apiVersion: apiextensions.k8s.io/v1
    kind: CustomResourceDefinition
    metadata:
      name: gadgets.example.test
    spec:
      group: example.test
      names: {kind: Gadget, plural: gadgets, singular: gadget}
      scope: Namespaced
      versions:
      - name: v1
        served: true
        storage: true
        schema:
          openAPIV3Schema:
            type: object
            properties:
              spec:
                type: object
                properties:
                  size: {type: integer}
"#;

const REQUEST: &str = "apiVersion: example.test/v1\nkind: Gadget\nmetadata:\n  name: mine\nspec:\n  size: large\n";

#[test]
fn render_of_an_invalid_request_names_the_object_and_field_once() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("promise.yaml"), PROMISE).unwrap();
    std::fs::write(dir.path().join("request.yaml"), REQUEST).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_plinth"))
        .args(["render", "promise.yaml", "request.yaml"])
        .current_dir(dir.path())
        .env_remove("PLINTH_IMAGE_MAP")
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("run plinth");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let error = &stderr[stderr.find("error:").unwrap_or_else(|| panic!("no error line: {stderr}"))..];
    assert_eq!(
        error.trim_end(),
        "error: applying the request Gadget default/mine\n  caused by: Gadget.example.test \"mine\" is invalid: \
spec.size: Invalid value: \"string\": spec.size in body must be of type integer: \"string\" (Invalid, HTTP 422)"
    );
    for noise in ["Status {", "WARN", "ERROR"] {
        assert!(!stderr.contains(noise), "{noise:?} in {stderr}");
    }
}
