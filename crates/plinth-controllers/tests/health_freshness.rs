//! Freshness of health (Kratix bug log B59): a record whose writer stamped its schedule
//! and heartbeat turns its request `unknown` once three scheduled writes are overdue,
//! with a reason naming the record and when it was last heard from, one Warning, and no
//! further writes while it stays so; a fresh record brings it back. A `@daily` check is
//! not stale after minutes, and a record without the stamps never goes stale.

use crate::health_support;

use std::time::Duration;

use health_support::*;
use plinth_api::constants::health as names;
use plinth_controllers::health::Clock;
use serde_json::{Value, json};

/// A record as Plinth's health writer writes it: with the definition's schedule and the
/// writer's heartbeat (1 s: every run refreshes `lastRun`).
fn scheduled(name: &str, request: &str, state: &str, last_run: i64, schedule: &str) -> Value {
    let mut r = record(name, "default", request, state, last_run);
    r["metadata"]["annotations"] = json!({
        names::SCHEDULE_ANNOTATION: schedule,
        names::REFRESH_ANNOTATION: "1",
    });
    r
}

async fn stale_warnings(env: &Env, request: &str) -> usize {
    env.events("Healthchecktest", request, names::RECORD_EVENT_REASON)
        .await
        .iter()
        .filter(|(t, note)| t == "Warning" && note.contains("is stale"))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    corpus_absent,
    ignore = "needs the Kratix corpus: set PLINTH_CORPUS or put it at ../shared/corpus"
)]
async fn an_overdue_record_turns_its_request_unknown_until_a_fresh_one_arrives() {
    let env = start().await;
    for r in ["app-a", "nightly", "by-hand"] {
        env.create_request("default", r).await;
    }
    // The clock stands at 2026-01-01T00:00:00Z; each check last ran 5 s ago.
    let t0 = env.clock.now().as_second();
    env.apply_record(scheduled(
        "app-a-check",
        "app-a",
        "healthy",
        t0 + 5,
        "* * * * *",
    ))
    .await;
    env.apply_record(scheduled(
        "nightly-check",
        "nightly",
        "healthy",
        t0 + 5,
        "@daily",
    ))
    .await;
    env.apply_record(record(
        "by-hand-check",
        "default",
        "by-hand",
        "healthy",
        t0 + 5,
    ))
    .await;
    for r in ["app-a", "nightly", "by-hand"] {
        env.wait_state("default", r, "healthy").await;
    }

    // Runs due at 00:01, 00:02 and 00:03, then the slack: still healthy at 00:03:20.
    env.clock.advance(200);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let st = env.status("default", "app-a").await;
    assert_eq!(st["healthStatus"]["state"], "healthy", "{st:#}");

    // Past 00:03:35 the third run is overdue.
    env.clock.advance(20);
    let st = env.wait_state("default", "app-a", "unknown").await;
    let entry = &st["healthStatus"]["healthRecords"][0];
    assert_eq!(entry["reason"], names::STALE_REASON, "{st:#}");
    assert_eq!(entry["lastRun"], t0 + 5, "the last run is kept");
    let message = entry["message"].as_str().unwrap();
    assert!(
        message.contains("last heard from at 2026-01-01T00:00:05Z"),
        "{message}"
    );
    assert!(message.contains("3 scheduled writes"), "{message}");
    wait_for("one Warning naming the stale record", || async {
        env.events("Healthchecktest", "app-a", names::RECORD_EVENT_REASON)
            .await
            .iter()
            .any(|(t, note)| {
                t == "Warning"
                    && note.contains("unknown")
                    && note.contains("HealthRecord default/app-a-check is stale")
            })
    })
    .await;

    // Stale and settled: rechecks write nothing and say nothing again.
    let rv = |o: kube::api::DynamicObject| o.metadata.resource_version.unwrap();
    let before = rv(env.requests("default").get("app-a").await.unwrap());
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        before,
        rv(env.requests("default").get("app-a").await.unwrap()),
        "no write while the record stays stale"
    );
    assert_eq!(stale_warnings(&env, "app-a").await, 1);

    // Minutes mean nothing to a daily check, and a record without the writer's stamps
    // never goes stale.
    for r in ["nightly", "by-hand"] {
        let st = env.status("default", r).await;
        assert_eq!(st["healthStatus"]["state"], "healthy", "{r}: {st:#}");
    }

    // The agent comes back: a fresh record, healthy again, with a Normal Event.
    let now = env.clock.now().as_second();
    env.apply_record(scheduled(
        "app-a-check",
        "app-a",
        "healthy",
        now,
        "* * * * *",
    ))
    .await;
    let st = env.wait_state("default", "app-a", "healthy").await;
    assert!(
        st["healthStatus"]["healthRecords"][0]
            .get("reason")
            .is_none(),
        "{st:#}"
    );
    wait_for("a second Normal Event, on recovery", || async {
        let events: kube::Api<k8s_openapi::api::core::v1::Event> =
            kube::Api::namespaced(env.client.clone(), "default");
        events
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .iter()
            .any(|e| {
                e.involved_object.name.as_deref() == Some("app-a")
                    && e.type_.as_deref() == Some("Normal")
                    && e.message.as_deref() == Some("Health state is healthy")
                    && e.count.unwrap_or(1) + e.series.as_ref().map_or(0, |s| s.count.unwrap_or(0))
                        >= 2
            })
    })
    .await;

    // Heartbeats keep the record fresh without rewriting the request's status.
    let before = rv(env.requests("default").get("app-a").await.unwrap());
    for minute in 1..=3 {
        env.clock.advance(60);
        env.apply_record(scheduled(
            "app-a-check",
            "app-a",
            "healthy",
            now + minute * 60,
            "* * * * *",
        ))
        .await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = env.requests("default").get("app-a").await.unwrap();
    assert_eq!(
        before,
        rv(after.clone()),
        "a heartbeat alone writes no status"
    );
    assert_eq!(
        after.data["status"]["healthStatus"]["state"], "healthy",
        "fresh through its heartbeats: {:#}",
        after.data["status"]
    );

    // Three days on, the daily check has missed three runs too.
    env.clock.advance(3 * 86_400);
    env.wait_state("default", "nightly", "unknown").await;
    let st = env.status("default", "by-hand").await;
    assert_eq!(st["healthStatus"]["state"], "healthy", "{st:#}");
}
