//! `plinth operator`'s admission webhooks against `plinth up --no-controllers
//! --no-builtin-admission` (an API server that, like kube-apiserver, checks Kratix kinds
//! by their CRD schemas only): with the operator beside it, its webhooks registered
//! through the API and called over TLS, the bad input embedded mode refuses is refused
//! with the same messages; defaulting comes back as the webhook's patch.

use crate::bad_promises;
use crate::support;

use std::time::{Duration, Instant};

use bad_promises::{BAD_PIPELINE, BAD_PIPELINE_CAUSES, STRING_COMMAND, STRING_COMMAND_CAUSE};
use support::Plinth;

fn kubectl_available() -> bool {
    std::process::Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn write(p: &Plinth, name: &str, content: &str) -> String {
    let path = p.dir.path().join(name);
    std::fs::write(&path, content).expect("write manifest");
    path.to_string_lossy().into_owned()
}

const DESTINATIONS: &str = r#"
apiVersion: platform.kratix.io/v1alpha1
kind: Destination
metadata:
  name: dev
spec:
  path: clusters/dev
  cleanup: all
  stateStoreRef: {kind: GitStateStore, name: default}
---
apiVersion: platform.kratix.io/v1alpha1
kind: Destination
metadata:
  name: dev-team
spec:
  path: clusters/dev/team
  stateStoreRef: {kind: GitStateStore, name: default}
"#;

#[tokio::test(flavor = "multi_thread")]
async fn the_operators_webhooks_refuse_what_embedded_mode_refuses() {
    if !kubectl_available() {
        println!("SKIPPED: kubectl not found");
        return;
    }
    let p = Plinth::up(&["--no-controllers", "--no-builtin-admission"]).await;
    let cmd = write(&p, "stringcmd.yaml", STRING_COMMAND);
    // Without the webhooks nothing refuses it: the server is a plain API server.
    let plain = p.kubectl_raw(&["apply", "--validate=false", "-f", &cmd]);
    assert!(
        plain.status.success(),
        "accepted without webhooks: {}",
        String::from_utf8_lossy(&plain.stderr)
    );
    p.kubectl(&["delete", "promise", "stringcmd", "--wait=false"]);

    let port = support::free_port();
    let flags = support::webhook_flags(&port);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut op = p.operator_with("webhooks", 15, &flags);

    // Once registered and serving, the webhook refuses with embedded mode's message
    // (kubectl words a 422 with causes as `The Promise "..." is invalid: <causes>`).
    let want = STRING_COMMAND_CAUSE;
    let deadline = Instant::now() + Duration::from_secs(60);
    let err = loop {
        let out = p.kubectl_raw(&["apply", "--validate=false", "--dry-run=server", "-f", &cmd]);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        if !out.status.success() {
            break err;
        }
        assert!(
            Instant::now() < deadline,
            "the webhook never refused: {err} {}",
            String::from_utf8_lossy(&out.stdout)
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert!(err.contains(want), "missing {want:?} in {err}");
    assert!(
        err.contains("The Promise \"stringcmd\" is invalid"),
        "{err}"
    );

    let bad = write(&p, "badpipe.yaml", BAD_PIPELINE);
    let out = p.kubectl_raw(&["apply", "--validate=false", "-f", &bad]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    for want in BAD_PIPELINE_CAUSES {
        assert!(err.contains(want), "missing {want:?} in {err}");
    }
    assert!(
        !p.kubectl_raw(&["get", "promise", "badpipe"])
            .status
            .success()
    );

    // Destinations: the mutating webhook adds the cleanup finalizer; the validating one
    // refuses an overlapping root, reading the other Destinations through the API.
    let dests = write(&p, "destinations.yaml", DESTINATIONS);
    let out = p.kubectl_raw(&["apply", "-f", &dests]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the overlap is refused");
    assert!(err.contains("overlaps Destination \"dev\""), "{err}");
    let finalizers = p.kubectl(&[
        "get",
        "destination",
        "dev",
        "-o",
        "jsonpath={.metadata.finalizers}",
    ]);
    assert!(
        finalizers.contains("kratix.io/destination-cleanup"),
        "{finalizers}"
    );

    // A replica started with the webhooks off, while the configurations are registered,
    // says what that means for Kratix writes.
    let mut off = p.operator_with("no-webhooks", 15, &["--webhook-addr", "off"]);
    let log_path = p.dir.path().join("operator-no-webhooks.log");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let log = std::fs::read_to_string(&log_path).unwrap_or_default();
        if log.contains("--webhook-addr off, but ValidatingWebhookConfiguration")
            && log.contains("--webhook-addr off, but MutatingWebhookConfiguration")
        {
            assert!(log.contains("failurePolicy: Fail"), "{log}");
            break;
        }
        assert!(Instant::now() < deadline, "no warning: {log}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let _ = off.kill();
    let _ = off.wait();
    let _ = op.kill();
    let _ = op.wait();
}
