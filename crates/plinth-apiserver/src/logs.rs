//! `GET /api/v1/namespaces/{ns}/pods/{name}/log?container=&tailLines=&follow=`:
//! served from `<data_dir>/pod-logs/<ns>/<pod>/<container>.log`, which the embedded Job
//! runner writes. With `follow=true` the stream continues until the container has
//! terminated (its `containerStatuses[].state.terminated` is set or the Pod phase is
//! `Succeeded`/`Failed`) or the Pod is gone. `limitBytes` ends the answer (or the stream)
//! after that many bytes. Numeric options are checked as kube-apiserver checks
//! PodLogOptions: `tailLines` ≥ 0, `limitBytes` ≥ 1, `sinceSeconds` ≥ 1, each a 64-bit
//! integer, else 400 naming the option. `sinceSeconds` is accepted but selects nothing:
//! the log files carry no per-line timestamps, so every line is returned.

use std::path::PathBuf;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use serde_json::Value;

use crate::app::{App, Query, get_object};
use crate::error::ApiError;

fn containers(pod: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for k in ["initContainers", "containers"] {
        if let Some(a) = pod
            .pointer(&format!("/spec/{k}"))
            .and_then(|c| c.as_array())
        {
            out.extend(
                a.iter()
                    .filter_map(|c| c["name"].as_str().map(String::from)),
            );
        }
    }
    out
}

fn terminated(pod: &Value, container: &str) -> bool {
    let phase = pod
        .pointer("/status/phase")
        .and_then(|p| p.as_str())
        .unwrap_or("");
    if phase == "Succeeded" || phase == "Failed" {
        return true;
    }
    ["initContainerStatuses", "containerStatuses"]
        .iter()
        .any(|k| {
            pod.pointer(&format!("/status/{k}"))
                .and_then(|s| s.as_array())
                .is_some_and(|a| {
                    a.iter().any(|s| {
                        s["name"] == container
                            && s.pointer("/state/terminated").is_some_and(|t| !t.is_null())
                    })
                })
        })
}

/// The numeric PodLogOptions of a request.
#[derive(Debug, PartialEq, Eq)]
struct LogOptions {
    tail_lines: Option<usize>,
    limit_bytes: Option<usize>,
}

impl LogOptions {
    fn parse(q: &Query) -> Result<LogOptions, ApiError> {
        use crate::app::query_int_min;
        let size = |v: i64| usize::try_from(v).unwrap_or(usize::MAX);
        query_int_min(q, "sinceSeconds", 1)?;
        Ok(LogOptions {
            tail_lines: query_int_min(q, "tailLines", 0)?.map(size),
            limit_bytes: query_int_min(q, "limitBytes", 1)?.map(size),
        })
    }
}

/// What is left of `limit` after `sent` bytes, applied to `chunk`.
fn within_limit(chunk: &[u8], sent: usize, limit: Option<usize>) -> &[u8] {
    match limit {
        Some(l) => &chunk[..chunk.len().min(l.saturating_sub(sent))],
        None => chunk,
    }
}

fn tail(data: &[u8], lines: usize) -> &[u8] {
    if lines == 0 {
        return &data[data.len()..];
    }
    let mut count = 0;
    let body = data.strip_suffix(b"\n").unwrap_or(data);
    for (i, b) in body.iter().enumerate().rev() {
        if *b == b'\n' {
            count += 1;
            if count == lines {
                return &data[i + 1..];
            }
        }
    }
    data
}

/// Serves a container log.
pub(crate) async fn serve(
    app: &std::sync::Arc<App>,
    ns: String,
    pod_name: String,
    q: &Query,
) -> Result<Response, ApiError> {
    let opts = LogOptions::parse(q)?;
    let info = app
        .registry
        .lookup("", "v1", "pods")
        .ok_or_else(|| ApiError::internal("pods not registered"))?;
    let pod = get_object(app, &info, Some(&ns), &pod_name).await?;
    let names = containers(&pod);
    let container = match q.get("container").filter(|c| !c.is_empty()) {
        Some(c) if names.contains(c) => c.clone(),
        Some(c) => {
            return Err(ApiError::bad_request(format!(
                "container {c} is not valid for pod {pod_name}"
            )));
        }
        None if names.len() == 1 => names[0].clone(),
        None => {
            return Err(ApiError::bad_request(format!(
                "a container name must be specified for pod {pod_name}, choose one of: [{}]",
                names.join(" ")
            )));
        }
    };
    let path: PathBuf = plinth_api::paths::pod_log_path(&app.data_dir, &ns, &pod_name, &container);
    let data = tokio::fs::read(&path).await.unwrap_or_default();
    let first = match opts.tail_lines {
        Some(n) => tail(&data, n),
        None => &data[..],
    };
    let first = within_limit(first, 0, opts.limit_bytes).to_vec();
    let follow = q.get("follow").is_some_and(|f| f == "true" || f == "1");
    if !follow {
        return Ok(Response::builder()
            .status(200)
            .header(http::header::CONTENT_TYPE, "text/plain")
            .body(Body::from(first))
            .unwrap());
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(16);
    let app2 = app.clone();
    let poll = app.log_poll_interval;
    let limit = opts.limit_bytes;
    tokio::spawn(async move {
        let mut sent = first.len();
        if !first.is_empty() && tx.send(Ok(Bytes::from(first))).await.is_err() {
            return;
        }
        let mut offset = data.len();
        loop {
            let pod = get_object(&app2, &info, Some(&ns), &pod_name).await.ok();
            let done = pod.as_ref().is_none_or(|p| terminated(p, &container));
            let now = tokio::fs::read(&path).await.unwrap_or_default();
            if now.len() > offset {
                let chunk = within_limit(&now[offset..], sent, limit);
                sent += chunk.len();
                if tx.send(Ok(Bytes::copy_from_slice(chunk))).await.is_err() {
                    return;
                }
                offset = now.len();
            }
            if done || limit.is_some_and(|l| sent >= l) {
                return;
            }
            tokio::select! {
                _ = tokio::time::sleep(poll) => {}
                _ = tx.closed() => return,
            }
        }
    });
    Ok(Response::builder()
        .status(200)
        .header(http::header::CONTENT_TYPE, "text/plain")
        .body(Body::from_stream(
            tokio_stream::wrappers::ReceiverStream::new(rx),
        ))
        .unwrap())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(pairs: &[(&str, &str)]) -> Query {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn numeric_log_options_are_checked() {
        assert_eq!(
            LogOptions::parse(&query(&[("tailLines", "3"), ("limitBytes", "10")])).unwrap(),
            LogOptions {
                tail_lines: Some(3),
                limit_bytes: Some(10)
            }
        );
        for (name, value) in [
            ("tailLines", "x"),
            ("tailLines", "-1"),
            ("limitBytes", "0"),
            ("limitBytes", "1.5"),
            ("sinceSeconds", "0"),
            ("sinceSeconds", "99999999999999999999"),
        ] {
            let e = LogOptions::parse(&query(&[(name, value)])).unwrap_err();
            assert_eq!(e.code, 400, "{name}={value}");
            assert!(
                e.message.contains(name) && e.message.contains(value),
                "{name}={value}: {}",
                e.message
            );
        }
    }

    #[test]
    fn limit_bytes_cuts_across_chunks() {
        assert_eq!(within_limit(b"abcdef", 0, Some(4)), b"abcd");
        assert_eq!(within_limit(b"abcdef", 3, Some(4)), b"a");
        assert_eq!(within_limit(b"abcdef", 4, Some(4)), b"");
        assert_eq!(within_limit(b"abcdef", 9, None), b"abcdef");
    }

    #[test]
    fn tails() {
        assert_eq!(tail(b"a\nb\nc\n", 2), b"b\nc\n");
        assert_eq!(tail(b"a\nb\nc", 1), b"c");
        assert_eq!(tail(b"a\n", 5), b"a\n");
    }
}
