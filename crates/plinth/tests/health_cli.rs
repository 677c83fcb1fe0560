//! `plinth health` as a user runs it against `plinth up`: a Promise and a request,
//! HealthRecords applied with kubectl, then the table for every Promise, for one Promise
//! and for one request (with its transitions), and clear errors for bad arguments.

use crate::support;

use std::process::{Command, Output};

use support::{GADGET_PROMISE, Plinth, wait_until};

const REQUEST: &str = r#"
apiVersion: example.test/v1
kind: Gadget
metadata:
  name: mine
  namespace: default
spec:
  size: small
"#;

/// A HealthRecord for `default/mine` of the Promise `gadget`.
fn record(name: &str, state: &str, last_run: i64) -> String {
    format!(
        r#"
apiVersion: platform.kratix.io/v1alpha1
kind: HealthRecord
metadata:
  name: {name}
  namespace: default
data:
  promiseRef: {{name: gadget}}
  resourceRef: {{name: mine, namespace: default}}
  state: {state}
  lastRun: {last_run}
  details: {{check: {name}}}
"#
    )
}

fn health(p: &Plinth, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_plinth"))
        .arg("health")
        .args(args)
        .arg("--kubeconfig")
        .arg(&p.kubeconfig)
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("run plinth health")
}

fn ok(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "plinth health failed\nstdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn failed(out: &Output) -> String {
    assert!(
        !out.status.success(),
        "plinth health should fail: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

async fn wait_state(p: &Plinth, state: &str) {
    wait_until(60, &format!("healthStatus.state {state}"), || async {
        let out = p.kubectl_raw(&[
            "get",
            "gadget",
            "mine",
            "-n",
            "default",
            "-o",
            "jsonpath={.status.healthStatus.state}",
        ]);
        String::from_utf8_lossy(&out.stdout) == state
    })
    .await;
}

/// The cells of the row whose first three columns are `promise`, `ns`, `name`.
fn row<'a>(table: &'a str, promise: &str, ns: &str, name: &str) -> Vec<&'a str> {
    table
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|c| c.len() >= 3 && c[0] == promise && c[1] == ns && c[2] == name)
        .unwrap_or_else(|| panic!("no row {promise} {ns} {name} in:\n{table}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plinth_health_prints_state_uptime_timeline_and_transitions() {
    let p = Plinth::up(&[]).await;
    p.apply_yaml("promise.yaml", GADGET_PROMISE);
    wait_until(60, "the Gadget API", || async {
        p.kubectl_raw(&["get", "gadgets", "-A"]).status.success()
    })
    .await;
    p.apply_yaml("request.yaml", REQUEST);

    // A request without records: listed, no state yet.
    let table = ok(&health(&p, &[]));
    let cells = row(&table, "gadget", "default", "mine");
    assert_eq!(cells[3], "-", "no state before any record:\n{table}");

    // One check unhealthy, then a second one healthy: the worst decides; then both
    // healthy (a recovery). History times have one-second precision: keep each state
    // for seconds.
    p.apply_yaml("latency.yaml", &record("latency", "unhealthy", 100));
    wait_state(&p, "unhealthy").await;
    p.apply_yaml("disk.yaml", &record("disk", "healthy", 100));
    wait_until(60, "both records in healthStatus", || async {
        let out = p.kubectl_raw(&[
            "get",
            "gadget",
            "mine",
            "-n",
            "default",
            "-o",
            "jsonpath={.status.healthStatus.healthRecords[*].state}",
        ]);
        String::from_utf8_lossy(&out.stdout).split(' ').count() == 2
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    p.apply_yaml("latency.yaml", &record("latency", "healthy", 200));
    wait_state(&p, "healthy").await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;

    // Every Promise.
    let table = ok(&health(&p, &[]));
    let header = table.lines().next().unwrap();
    for col in [
        "PROMISE",
        "NAMESPACE",
        "REQUEST",
        "STATE",
        "UP 1H",
        "UP 24H",
        "UP 7D",
        "UP 30D",
        "FIRST HEALTHY",
        "LAST RECOVERY",
        "TIMELINE (24H)",
    ] {
        assert!(header.contains(col), "column {col:?} missing: {header}");
    }
    let cells = row(&table, "gadget", "default", "mine");
    assert_eq!(cells[3], "healthy", "{table}");
    // Uptime over 1 h: part of the time unhealthy, so above 0 % and below 100 %.
    let up_1h: f64 = cells[4].trim_end_matches('%').parse().unwrap();
    assert!(up_1h > 0.0 && up_1h < 100.0, "uptime 1h {up_1h}:\n{table}");
    // First healthy after creation and a recovery, in seconds (the test takes well
    // under two minutes).
    let secs = |c: &str| -> u64 {
        c.strip_suffix('s')
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{c:?} is not seconds:\n{table}"))
    };
    assert!(
        secs(cells[8]) >= 2,
        "first healthy after the unhealthy spell:\n{table}"
    );
    let recovery = secs(cells[9]);
    assert!(
        (2..60).contains(&recovery),
        "last recovery {recovery}s:\n{table}"
    );
    // The timeline's newest cell (on the right) holds the worst state of the last hour.
    let timeline = table
        .lines()
        .find(|l| l.starts_with("gadget") && l.contains("mine"))
        .and_then(|l| l.split_once('|'))
        .map(|(_, t)| t.trim_end_matches('|').to_string())
        .unwrap();
    assert_eq!(timeline.chars().count(), 24, "{table}");
    assert!(
        timeline.ends_with('X'),
        "unhealthy within the last hour: {timeline:?}"
    );
    assert!(
        timeline[..23].chars().all(|c| c == ' '),
        "no data before the request existed: {timeline:?}"
    );
    let promise_row = row(&table, "gadget", "*", "(1");
    assert_eq!(
        promise_row[4], cells[4],
        "Promise uptime 1h = the one request's"
    );

    // The state changes as JSON and CSV, with the state left and the deciding record.
    let json: serde_json::Value =
        serde_json::from_str(&ok(&health(&p, &["gadget", "-o", "json", "--since", "1h"]))).unwrap();
    let changes: Vec<(&str, &str, &str)> = json
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            assert_eq!(
                (c["promise"].as_str(), c["name"].as_str()),
                (Some("gadget"), Some("mine"))
            );
            (
                c["from"].as_str().unwrap(),
                c["to"].as_str().unwrap(),
                c["record"].as_str().unwrap(),
            )
        })
        .collect();
    let states: Vec<(&str, &str)> = changes.iter().map(|c| (c.0, c.1)).collect();
    assert_eq!(
        states,
        [("", "unhealthy"), ("unhealthy", "healthy")],
        "{json:#}"
    );
    assert_eq!(changes[0].2, "default/latency", "{json:#}");
    assert!(
        ["default/latency", "default/disk"].contains(&changes[1].2),
        "{json:#}"
    );
    let csv = ok(&health(&p, &["-o", "csv"]));
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(
        lines[0], "time,promise,namespace,name,from,to,record",
        "{csv}"
    );
    assert!(
        lines[2].contains(",gadget,default,mine,unhealthy,healthy,default/"),
        "{csv}"
    );
    // A window that ends before the changes holds none; a bad window is refused.
    assert_eq!(
        ok(&health(&p, &["-o", "csv", "--since", "0s"]))
            .lines()
            .count(),
        1
    );
    let err = failed(&health(&p, &["-o", "csv", "--since", "a week"]));
    assert!(err.contains("expected a number and a unit"), "{err}");

    // One Promise: the same row; an unknown Promise is a clear error.
    let table = ok(&health(&p, &["gadget"]));
    assert_eq!(row(&table, "gadget", "default", "mine")[3], "healthy");
    let err = failed(&health(&p, &["nosuch"]));
    assert!(err.contains("Promise \"nosuch\" not found"), "{err}");

    // One request: its row and the transitions, oldest first, with the deciding record.
    let single = ok(&health(&p, &["gadget", "default/mine"]));
    assert_eq!(row(&single, "gadget", "default", "mine")[3], "healthy");
    assert!(
        !single.contains("(1 requests)"),
        "no Promise row for one request:\n{single}"
    );
    let transitions: Vec<Vec<&str>> = single
        .split_once("TRANSITIONS\n")
        .unwrap_or_else(|| panic!("no transitions:\n{single}"))
        .1
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(transitions.len(), 2, "{single}");
    assert_eq!(
        transitions[0][1..],
        ["unhealthy", "default/latency"],
        "{single}"
    );
    assert_eq!(transitions[1][1..], ["healthy", "default/disk"], "{single}");
    assert!(
        transitions[0][0] <= transitions[1][0] && transitions[0][0].ends_with('Z'),
        "RFC 3339 times, oldest first:\n{single}"
    );

    // Bad arguments: a clear message and a non-zero exit.
    let err = failed(&health(&p, &["gadget", "mine"]));
    assert!(
        err.contains("request \"mine\": expected NAMESPACE/NAME"),
        "{err}"
    );
    let err = failed(&health(&p, &["gadget", "default/other"]));
    assert!(
        err.contains("request default/other of Promise gadget not found"),
        "{err}"
    );

    // Every record carries its request's label (how a request's records are found);
    // two records of one request share it, one of another request differs.
    p.apply_yaml(
        "stray.yaml",
        &record("stray", "healthy", 100).replace("name: mine", "name: other"),
    );
    let labels = |name: &str| {
        p.kubectl(&[
            "get",
            "healthrecord",
            name,
            "-n",
            "default",
            "-o",
            r"jsonpath={.metadata.labels.platform\.syntasso\.io/health-request}",
        ])
    };
    wait_until(60, "stray labelled", || async {
        !labels("stray").is_empty()
    })
    .await;
    let (disk, latency, stray) = (labels("disk"), labels("latency"), labels("stray"));
    assert_eq!(disk.len(), 32, "{disk:?}");
    assert_eq!(disk, latency);
    assert_ne!(disk, stray);
    // The labels written once, the platform is silent.
    support::assert_settled_silent(&p.client().await, support::SILENCE).await;

    // Deleting the request deletes its records, and only its records.
    p.kubectl(&["delete", "gadget", "mine", "-n", "default", "--wait=false"]);
    wait_until(60, "the request's records deleted", || async {
        let out = p.kubectl(&["get", "healthrecords", "-n", "default", "-o", "name"]);
        !out.contains("/disk") && !out.contains("/latency")
    })
    .await;
    let left = p.kubectl(&["get", "healthrecords", "-n", "default", "-o", "name"]);
    assert!(
        left.contains("/stray"),
        "another request's record stays: {left}"
    );
}

/// POSTs `body` to the Alertmanager receiver at `addr` (`host:port`); the status code and
/// the response body.
fn post_alerts(addr: &str, token: &str, body: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect to the receiver");
    write!(
        s,
        "POST /alerts HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let code = out
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = out.split_once("\r\n\r\n").map(|b| b.1).unwrap_or_default();
    (code, body.to_string())
}

fn alert_payload(status: &str, ends_at: &str) -> String {
    serde_json::json!({
        "version": "4",
        "status": status,
        "receiver": "plinth",
        "alerts": [{
            "status": status,
            "labels": {"alertname": "GadgetDown", "kratix_promise": "gadget",
                       "kratix_resource": "mine", "namespace": "default"},
            "annotations": {"summary": "gadget mine is down"},
            "startsAt": "2026-01-01T00:00:00Z",
            "endsAt": ends_at,
            "fingerprint": "f00d",
        }],
    })
    .to_string()
}

/// `plinth up --alertmanager-addr`: the printed line names the address and the token file;
/// a firing alert makes the request unhealthy, the resolved one healthy again; a wrong
/// token is 401.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alertmanager_alerts_set_a_requests_health() {
    let p = Plinth::up(&["--alertmanager-addr", "127.0.0.1:0"]).await;
    let out = std::fs::read_to_string(p.dir.path().join("plinth.out")).unwrap();
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("alertmanager: http://"))
        .unwrap_or_else(|| panic!("no alertmanager line in:\n{out}"));
    let (addr, rest) = line.split_once("/alerts (bearer token in ").unwrap();
    let token_file = rest.trim_end_matches(')');
    assert_eq!(
        std::path::Path::new(token_file),
        p.data.join("alertmanager-token")
    );
    let token = std::fs::read_to_string(token_file).unwrap();
    p.apply_yaml("promise.yaml", GADGET_PROMISE);
    wait_until(60, "the Gadget API", || async {
        p.kubectl_raw(&["get", "gadgets", "-A"]).status.success()
    })
    .await;
    p.apply_yaml("request.yaml", REQUEST);

    let (code, _) = post_alerts(addr, "wrong", &alert_payload("firing", ""));
    assert_eq!(code, 401);
    let (code, body) = post_alerts(addr, &token, &alert_payload("firing", ""));
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("\"applied\":1"), "{body}");
    wait_state(&p, "unhealthy").await;
    let (code, body) = post_alerts(
        addr,
        &token,
        &alert_payload("resolved", "2026-01-01T00:05:00Z"),
    );
    assert_eq!(code, 200, "{body}");
    wait_state(&p, "healthy").await;
}
