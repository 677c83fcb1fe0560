//! A fresh `plinth up` is quiet: the bootstrapped Destination goes Ready without a
//! `DestinationNotReady` warning from the moments before its state store's writer exists,
//! and the log prints no `Some(..)` debug wrappers around field values.

use crate::support;

use support::*;

#[tokio::test]
async fn a_fresh_start_emits_no_destination_warning() {
    let p = Plinth::up(&[]).await;
    wait_until(60, "Destination local Ready", || async {
        p.kubectl_raw(&[
            "get",
            "destination",
            "local",
            "-o",
            "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}",
        ])
        .stdout
            == b"True"
    })
    .await;
    let events = p.kubectl(&["get", "events", "-A", "-o", "wide"]);
    assert!(
        !events.contains("DestinationNotReady"),
        "warning on a fresh start:\n{events}"
    );
    assert!(events.contains("DestinationReady"), "{events}");
    let log = p.log();
    assert!(
        !log.contains("Some(\""),
        "debug-formatted fields in the log:\n{log}"
    );
}
