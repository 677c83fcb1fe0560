//! Every CLI error is one readable message naming the object, the field and the cause:
//! an API error reads as the server's message, never as the client's `Status` struct,
//! and nothing else (a log line from stopping the private platform) follows it.

mod support;

use std::process::Command;

const REQUEST: &str =
    "apiVersion: example.test/v1\nkind: Gadget\nmetadata:\n  name: mine\nspec:\n  size: 5\n";

#[test]
fn render_of_an_invalid_request_names_the_object_and_field_once() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("promise.yaml"), support::GADGET_PROMISE).unwrap();
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
    let error = &stderr[stderr
        .find("error:")
        .unwrap_or_else(|| panic!("no error line: {stderr}"))..];
    assert_eq!(
        error.trim_end(),
        "error: applying the request Gadget default/mine\n  caused by: Gadget.example.test \"mine\" is invalid: \
spec.size: Invalid value: \"integer\": spec.size in body must be of type string: \"integer\" (Invalid, HTTP 422)"
    );
    for noise in ["Status {", "WARN", "ERROR"] {
        assert!(!stderr.contains(noise), "{noise:?} in {stderr}");
    }
}
