//! Every CLI error is one readable message naming the object, the field and the cause:
//! an API error reads as the server's message, never as the client's `Status` struct,
//! and nothing else (a log line from stopping the private platform) follows it.

use crate::support;

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

/// `--replicas 0` is refused before anything is printed: a Deployment without replicas
/// runs no controllers and serves no webhooks, while the printed webhook configurations
/// (`failurePolicy: Fail`) would refuse every Kratix write. The error says why and how to
/// stop the operator instead.
#[test]
fn manifests_with_zero_operator_replicas_are_refused_with_the_reason() {
    for what in ["operator", "all"] {
        let out = Command::new(env!("CARGO_BIN_EXE_plinth"))
            .args(["manifests", what, "--replicas", "0"])
            .env("RUST_BACKTRACE", "0")
            .output()
            .expect("run plinth");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "manifests {what}: {stderr}");
        assert!(out.stdout.is_empty(), "manifests {what} printed documents");
        for want in [
            "error: invalid value '0' for '--replicas <REPLICAS>'",
            "failurePolicy: Fail",
            "refuse every create and update of a Kratix object",
            "at least 1 replica",
            "scale deployment plinth-operator --replicas 0",
            "kratix-platform-validating-webhook-configuration",
            "kratix-platform-mutating-webhook-configuration",
        ] {
            assert!(stderr.contains(want), "missing {want:?} in {stderr}");
        }
    }
    let one = Command::new(env!("CARGO_BIN_EXE_plinth"))
        .args(["manifests", "operator", "--replicas", "1"])
        .output()
        .expect("run plinth");
    assert!(
        one.status.success(),
        "{}",
        String::from_utf8_lossy(&one.stderr)
    );
}

/// Every command that talks to a cluster it is pointed at (`status`, `health`, `diff`,
/// `operator`) says which API server did not answer and where its address came from,
/// before anything else, in one error.
#[test]
fn an_unreachable_api_server_is_named_with_its_kubeconfig() {
    let dir = tempfile::tempdir().unwrap();
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: \"https://127.0.0.1:{port}\", insecure-skip-tls-verify: true}}}}]\n\
users: [{{name: u, user: {{token: t}}}}]\ncontexts: [{{name: x, context: {{cluster: c, user: u}}}}]\ncurrent-context: x\n"
        ),
    )
    .unwrap();
    std::fs::write(dir.path().join("promise.yaml"), support::GADGET_PROMISE).unwrap();
    let kc = kubeconfig.to_str().unwrap();
    for args in [
        vec!["status", "--kubeconfig", kc],
        vec!["health", "--kubeconfig", kc],
        vec!["diff", "promise.yaml", "--kubeconfig", kc],
        vec!["operator", "--kubeconfig", kc, "--webhook-addr", "off"],
        vec![
            "worker",
            "w1",
            "--platform",
            kc,
            "--data-dir",
            "worker-data",
        ],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_plinth"))
            .args(&args)
            .current_dir(dir.path())
            .env("RUST_BACKTRACE", "0")
            .output()
            .expect("run plinth");
        let stderr = String::from_utf8_lossy(&out.stderr);
        // `diff` exits 2 on an error, as `kubectl diff` does (1 means differences).
        let code = if args[0] == "diff" { 2 } else { 1 };
        assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
        if args[0] != "operator" && args[0] != "worker" {
            // The one error only (the operator and the worker log as services do).
            assert!(!stderr.contains("ERROR"), "{args:?}: {stderr}");
        }
        let want = format!(
            "error: the Kubernetes API server at https://127.0.0.1:{port}/ cannot be reached with kubeconfig {kc}\n"
        );
        assert!(stderr.contains(&want), "{args:?}: {stderr}");
        assert!(stderr.contains("Connection refused"), "{args:?}: {stderr}");
    }
}
