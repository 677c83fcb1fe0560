//! `GET /api/v1/namespaces/{ns}/pods/{name}/log?container=&tailLines=&follow=`:
//! served from `<data_dir>/pod-logs/<ns>/<pod>/<container>.log`, which the embedded Job
//! runner writes. With `follow=true` the stream continues until the container has
//! terminated (its `containerStatuses[].state.terminated` is set or the Pod phase is
//! `Succeeded`/`Failed`) or the Pod is gone.

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
    let tail_lines: Option<usize> = q.get("tailLines").and_then(|t| t.parse().ok());
    let first = match tail_lines {
        Some(n) => tail(&data, n).to_vec(),
        None => data.clone(),
    };
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
    tokio::spawn(async move {
        if !first.is_empty() && tx.send(Ok(Bytes::from(first))).await.is_err() {
            return;
        }
        let mut offset = data.len();
        loop {
            let pod = get_object(&app2, &info, Some(&ns), &pod_name).await.ok();
            let done = pod.as_ref().is_none_or(|p| terminated(p, &container));
            let now = tokio::fs::read(&path).await.unwrap_or_default();
            if now.len() > offset {
                if tx
                    .send(Ok(Bytes::from(now[offset..].to_vec())))
                    .await
                    .is_err()
                {
                    return;
                }
                offset = now.len();
            }
            if done {
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

    #[test]
    fn tails() {
        assert_eq!(tail(b"a\nb\nc\n", 2), b"b\nc\n");
        assert_eq!(tail(b"a\nb\nc", 1), b"c");
        assert_eq!(tail(b"a\n", 5), b"a\n");
    }
}
