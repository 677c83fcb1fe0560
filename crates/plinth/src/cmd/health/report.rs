//! The health report `plinth health` prints: per request its state, uptime over
//! 1 h / 24 h / 7 d / 30 d, time to first healthy, last recovery and a text timeline of
//! the last 24 h; per Promise the combined uptime. Read from the requests' status
//! through the Kubernetes API, so it works against `plinth up` and a real cluster.

use std::fmt::Write as _;

use jiff::Timestamp;
use kube::api::{Api, DynamicObject, ListParams};
use kube::{Client, ResourceExt};
use plinth_api::Promise;

use plinth_controllers::Error;
use plinth_controllers::health::history::{
    HealthHistory, WINDOWS, combined_uptime, timeline, uptime,
};

/// Width of the text timeline, in cells.
pub const TIMELINE_WIDTH: usize = 24;
/// Span of the text timeline: the last 24 hours, in seconds.
pub const TIMELINE_SECS: i64 = 86_400;

/// One request's health.
#[derive(Clone, Debug)]
pub struct RequestHealth {
    /// Promise name.
    pub promise: String,
    /// Request namespace.
    pub namespace: String,
    /// Request name.
    pub name: String,
    /// `status.healthStatus.state`, or `-` when there is none.
    pub state: String,
    /// `status.healthHistory`.
    pub history: HealthHistory,
}

/// Reads the health of the requests of `promise` (every Promise when `None`), limited
/// to `request` (`namespace`, `name`) when given.
///
/// # Errors
/// API errors; a named Promise that does not exist or has no API.
pub async fn collect(
    client: &Client,
    promise: Option<&str>,
    request: Option<(&str, &str)>,
) -> Result<Vec<RequestHealth>, Error> {
    // One Promise is read by name; all of them are listed once.
    let promises: Api<Promise> = Api::all(client.clone());
    let mut found: Vec<Promise> = match promise {
        Some(p) => {
            let one = promises.get_opt(p).await?;
            vec![one.ok_or_else(|| Error::NotFound(format!("Promise {p:?}")))?]
        }
        None => promises.list(&ListParams::default()).await?.items,
    };
    found.sort_by_key(|p| p.name_any());
    let mut out = Vec::new();
    for obj in found {
        let p = obj.name_any();
        let Some(ar) = plinth_controllers::support::resources::request_resource_of(&obj) else {
            if promise.is_some() {
                return Err(Error::NoApi(p.clone()));
            }
            continue;
        };
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
        let mut items = api.list(&ListParams::default()).await?.items;
        items.sort_by_key(|r| (r.namespace(), r.name_any()));
        for r in items {
            let (ns, name) = (r.namespace().unwrap_or_default(), r.name_any());
            if request.is_some_and(|(n, m)| n != ns || m != name) {
                continue;
            }
            let status = r.data.get("status").cloned().unwrap_or_default();
            out.push(RequestHealth {
                promise: p.clone(),
                namespace: ns,
                name,
                state: status
                    .pointer("/healthStatus/state")
                    .and_then(|v| v.as_str())
                    .unwrap_or("-")
                    .to_string(),
                history: HealthHistory::from_status(&status),
            });
        }
    }
    if let Some((ns, name)) = request
        && out.is_empty()
    {
        return Err(Error::NotFound(format!(
            "request {ns}/{name} of Promise {}",
            promise.unwrap_or("?")
        )));
    }
    Ok(out)
}

fn pct(v: Option<f64>) -> String {
    v.map(|p| format!("{p:.1}%")).unwrap_or_else(|| "-".into())
}

fn secs(v: Option<i64>) -> String {
    match v {
        None => "-".into(),
        Some(s) if s < 120 => format!("{s}s"),
        Some(s) if s < 7200 => format!("{}m", s / 60),
        Some(s) => format!("{}h", s / 3600),
    }
}

/// Renders the table (one row per request, then one per Promise) and, for a single
/// request, its transitions. Timeline cells: `#` healthy/ready, `~` degraded,
/// `?` unknown, `X` unhealthy, blank for no data; oldest on the left.
pub fn render(rows: &[RequestHealth], now: Timestamp, single: bool) -> String {
    let mut table: Vec<Vec<String>> = vec![
        [
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
        ]
        .iter()
        .map(|s| s.to_string())
        .chain(["TIMELINE (24H)".to_string()])
        .collect(),
    ];
    for r in rows {
        let mut row = vec![
            r.promise.clone(),
            r.namespace.clone(),
            r.name.clone(),
            r.state.clone(),
        ];
        row.extend(
            WINDOWS
                .iter()
                .map(|(_, w)| pct(uptime(&r.history, now, *w))),
        );
        row.push(secs(r.history.first_healthy_after_seconds));
        row.push(secs(r.history.last_recovery_seconds));
        row.push(format!(
            "|{}|",
            timeline(&r.history, now, TIMELINE_SECS, TIMELINE_WIDTH)
        ));
        table.push(row);
    }
    let mut promises: Vec<&str> = rows.iter().map(|r| r.promise.as_str()).collect();
    promises.dedup();
    if !single {
        for p in promises {
            let hs: Vec<&HealthHistory> = rows
                .iter()
                .filter(|r| r.promise == p)
                .map(|r| &r.history)
                .collect();
            let mut row = vec![
                p.to_string(),
                "*".into(),
                format!("({} requests)", hs.len()),
                "".into(),
            ];
            row.extend(
                WINDOWS
                    .iter()
                    .map(|(_, w)| pct(combined_uptime(hs.iter().copied(), now, *w))),
            );
            row.extend(["".into(), "".into(), "".into()]);
            table.push(row);
        }
    }
    let mut out = align(&table);
    if single && let Some(r) = rows.first() {
        out.push_str("\nTRANSITIONS\n");
        for t in &r.history.transitions {
            let _ = writeln!(out, "  {}  {:<9}  {}", t.time, t.state, t.source);
        }
    }
    out
}

/// One change of a request's overall health state, as `plinth health -o json|csv`
/// exports it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Change {
    /// When it changed (RFC 3339).
    pub time: String,
    /// Promise name.
    pub promise: String,
    /// Request namespace.
    pub namespace: String,
    /// Request name.
    pub name: String,
    /// The state before (empty for the first state recorded).
    pub from: String,
    /// The new state.
    pub to: String,
    /// The HealthRecord (`namespace/name`) that decided it; empty when the last record
    /// went.
    pub record: String,
}

/// The state changes of `rows` at or after `since`, oldest first (by time, then
/// request): each transition of `status.healthHistory` with the state it left.
pub fn changes(rows: &[RequestHealth], since: Timestamp) -> Vec<Change> {
    let mut out = Vec::new();
    for r in rows {
        let mut from = String::new();
        for t in &r.history.transitions {
            let at: Option<Timestamp> = t.time.parse().ok();
            if at.is_some_and(|at| at >= since) {
                out.push(Change {
                    time: t.time.clone(),
                    promise: r.promise.clone(),
                    namespace: r.namespace.clone(),
                    name: r.name.clone(),
                    from: from.clone(),
                    to: t.state.clone(),
                    record: t.source.clone(),
                });
            }
            from = t.state.clone();
        }
    }
    out.sort_by(|a, b| {
        let key = |c: &Change| c.time.parse::<Timestamp>().ok();
        key(a).cmp(&key(b))
    });
    out
}

/// `changes` as CSV (RFC 4180: a header line, fields with a comma, quote or line break
/// quoted).
pub fn changes_csv(changes: &[Change]) -> String {
    fn field(s: &str) -> String {
        if s.contains([',', '"', '\n', '\r']) {
            format!("\"{}\"", s.replace('"', "\"\""))
        } else {
            s.to_string()
        }
    }
    let mut out = String::from("time,promise,namespace,name,from,to,record\n");
    for c in changes {
        let cells = [
            &c.time,
            &c.promise,
            &c.namespace,
            &c.name,
            &c.from,
            &c.to,
            &c.record,
        ];
        let line: Vec<String> = cells.iter().map(|s| field(s)).collect();
        out.push_str(&line.join(","));
        out.push('\n');
    }
    out
}

fn align(table: &[Vec<String>]) -> String {
    let cols = table.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            table
                .iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in table {
        let line: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(i, s)| format!("{s:<w$}", w = widths[i]))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use plinth_controllers::health::history::Transition;

    fn row(name: &str, transitions: &[(&str, &str, &str)]) -> RequestHealth {
        RequestHealth {
            promise: "redis".into(),
            namespace: "default".into(),
            name: name.into(),
            state: "-".into(),
            history: HealthHistory {
                transitions: transitions
                    .iter()
                    .map(|(time, state, source)| Transition {
                        state: state.to_string(),
                        time: time.to_string(),
                        source: source.to_string(),
                    })
                    .collect(),
                ..Default::default()
            },
        }
    }

    #[test]
    fn changes_in_the_window_with_the_state_they_left() {
        let rows = [
            row(
                "a",
                &[
                    ("2026-01-01T00:00:00Z", "healthy", "default/check"),
                    ("2026-01-05T00:00:00Z", "unhealthy", "default/alert-x"),
                    ("2026-01-06T00:00:00Z", "healthy", "default/alert-x"),
                ],
            ),
            row("b", &[("2026-01-05T12:00:00Z", "degraded", "default/a,b")]),
        ];
        let since: Timestamp = "2026-01-02T00:00:00Z".parse().unwrap();
        let c = changes(&rows, since);
        let got: Vec<(&str, &str, &str, &str)> = c
            .iter()
            .map(|c| {
                (
                    c.name.as_str(),
                    c.from.as_str(),
                    c.to.as_str(),
                    c.time.as_str(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("a", "healthy", "unhealthy", "2026-01-05T00:00:00Z"),
                ("b", "", "degraded", "2026-01-05T12:00:00Z"),
                ("a", "unhealthy", "healthy", "2026-01-06T00:00:00Z"),
            ]
        );
        let csv = changes_csv(&c);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines[0], "time,promise,namespace,name,from,to,record");
        assert_eq!(
            lines[1],
            "2026-01-05T00:00:00Z,redis,default,a,healthy,unhealthy,default/alert-x"
        );
        assert_eq!(
            lines[2],
            "2026-01-05T12:00:00Z,redis,default,b,,degraded,\"default/a,b\""
        );
        assert_eq!(lines.len(), 4);
    }
}
