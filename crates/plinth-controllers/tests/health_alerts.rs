//! Alertmanager's webhook payload as HealthRecords: a firing alert makes its request
//! unhealthy and the resolved one healthy again, through the HealthRecord controller;
//! alerts without the request labels, or naming a request that does not exist, change
//! nothing; and a request's per-request health series goes with the request.

use crate::health_support;

use health_support::*;
use kube::ResourceExt;
use kube::api::{DeleteParams, ListParams};
use plinth_controllers::health::alerts::{self, ALERT_LABEL, FIELD_MANAGER, Payload};
use serde_json::json;

fn payload(status: &str, alerts: serde_json::Value) -> Payload {
    serde_json::from_value(json!({
        "version": "4",
        "groupKey": "{}:{alertname=\"RedisDown\"}",
        "truncatedAlerts": 0,
        "status": status,
        "receiver": "plinth",
        "groupLabels": {"alertname": "RedisDown"},
        "commonLabels": {},
        "commonAnnotations": {},
        "externalURL": "http://alertmanager.example.test",
        "alerts": alerts,
    }))
    .unwrap()
}

fn alert(status: &str, labels: serde_json::Value, ends_at: &str) -> serde_json::Value {
    json!({
        "status": status,
        "labels": labels,
        "annotations": {"summary": "Redis down", "description": "no PING answer"},
        "startsAt": "2026-01-01T00:00:00Z",
        "endsAt": ends_at,
        "generatorURL": "http://prometheus.example.test/graph",
        "fingerprint": "c0ffee",
    })
}

fn named(request: &str) -> serde_json::Value {
    json!({
        "alertname": "RedisDown",
        "severity": "critical",
        "kratix_promise": PROMISE,
        "kratix_resource": request,
        "namespace": "default",
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
async fn firing_then_resolved_moves_a_request_to_unhealthy_and_back() {
    let env = start().await;
    env.create_request("default", "a").await;
    let now = jiff::Timestamp::now();
    let metrics = env.ctx.metrics.clone();

    let firing = payload(
        "firing",
        json!([alert("firing", named("a"), "0001-01-01T00:00:00Z")]),
    );
    let s = alerts::receive(&env.client, &metrics, &firing, now).await;
    assert_eq!((s.received, s.applied, s.ignored), (1, 1, 0), "{s:?}");
    let st = env.wait_state("default", "a", "unhealthy").await;
    let record = s.results[0].record.clone().unwrap();
    let name = record.split_once('/').unwrap().1.to_string();
    assert!(name.starts_with("alert-redisdown-"), "{name}");
    let entry = &st["healthStatus"]["healthRecords"][0];
    assert_eq!(entry["details"]["summary"], "Redis down", "{st:#}");
    assert_eq!(entry["details"]["description"], "no PING answer");
    let rec = env.records("default").get(&name).await.unwrap();
    assert_eq!(rec.labels()[ALERT_LABEL], "alertmanager");
    assert_eq!(rec.spec.data.last_run, Some(1_767_225_600));
    assert!(
        rec.managed_fields()
            .iter()
            .any(|m| m.manager.as_deref() == Some(FIELD_MANAGER)),
        "{:?}",
        rec.managed_fields()
    );
    let text = metrics.encode();
    assert!(
        text.contains(&format!(
            r#"plinth_health_request_state{{promise="{PROMISE}",namespace="default",name="a",state="unhealthy"}} 1"#
        )),
        "{text}"
    );

    // The same payload again changes nothing.
    let again = alerts::receive(&env.client, &metrics, &firing, now).await;
    assert_eq!(again.results[0].result, "unchanged", "{again:?}");

    let resolved = payload(
        "resolved",
        json!([alert("resolved", named("a"), "2026-01-01T00:05:00Z")]),
    );
    let s = alerts::receive(&env.client, &metrics, &resolved, now).await;
    assert_eq!(s.applied, 1, "{s:?}");
    let st = env.wait_state("default", "a", "healthy").await;
    let changes = st["healthHistory"]["transitions"].as_array().unwrap();
    let states: Vec<&str> = changes
        .iter()
        .map(|t| t["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["unhealthy", "healthy"], "{st:#}");
    assert_eq!(changes[1]["source"], record);
    // An older firing delivery arriving late does not undo the resolution.
    let late = alerts::receive(&env.client, &metrics, &firing, now).await;
    assert_eq!(late.results[0].result, "stale", "{late:?}");

    // The request goes (its records with it, as the request controller deletes them):
    // so does its per-request series.
    env.requests("default")
        .delete("a", &DeleteParams::default())
        .await
        .unwrap();
    env.delete_record("default", &name).await;
    wait_for("the request's series removed", || async {
        !metrics.encode().contains(r#"name="a",state="#)
    })
    .await;
    assert!(metrics.health_request_state.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
async fn alerts_that_name_no_existing_request_change_nothing() {
    let env = start().await;
    env.create_request("default", "a").await;
    let metrics = env.ctx.metrics.clone();
    let mut wrong_promise = named("a");
    wrong_promise["kratix_promise"] = json!("no-such-promise");
    let p = payload(
        "firing",
        json!([
            alert(
                "firing",
                json!({"alertname": "NodeDown", "namespace": "default"}),
                ""
            ),
            alert("firing", named("missing"), ""),
            alert("firing", wrong_promise, ""),
        ]),
    );
    let s = alerts::receive(&env.client, &metrics, &p, jiff::Timestamp::now()).await;
    assert_eq!((s.received, s.applied, s.ignored), (3, 0, 3), "{s:?}");
    let results: Vec<&str> = s.results.iter().map(|r| r.result).collect();
    assert_eq!(
        results,
        ["noRequestLabels", "requestNotFound", "requestNotFound"]
    );
    assert_eq!(
        s.results[0].message.as_deref(),
        Some("no kratix_promise, kratix_resource label")
    );
    let records = env
        .records("default")
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(records.items.is_empty(), "{:?}", records.items);
    assert!(
        env.status("default", "a")
            .await
            .get("healthStatus")
            .is_none()
    );
    let text = metrics.encode();
    assert!(
        text.contains(r#"plinth_alertmanager_alerts_total{result="requestNotFound"} 2"#),
        "{text}"
    );
}
