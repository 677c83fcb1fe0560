//! list (get of one object is [`crate::app::get_object`]).

use axum::response::{IntoResponse, Response};
use http::{StatusCode, header};
use serde_json::{Value, json};

use crate::app::{App, Filter, Query, Render, respond_objects, storage_info, storage_rkey};
use crate::error::ApiError;
use crate::resource::ResourceInfo;
use crate::store::ListRange;

/// LIST: the objects the selectors match, one page (`limit`, `continue`) at a time,
/// rendered as the client asked.
pub(crate) async fn list(
    app: &App,
    info: &ResourceInfo,
    ns: Option<String>,
    q: &Query,
    render: &Render,
) -> Result<Response, ApiError> {
    let filter = Filter::for_resource(info, q)?;
    // A list answers within any timeout a client can give; the value is still checked,
    // as kube-apiserver checks it for a list too.
    crate::app::query_int_min(q, "timeoutSeconds", 0)?;
    // As kube-apiserver, a limit of zero or below lists everything.
    let limit = crate::app::query_int(q, "limit")?
        .and_then(|l| usize::try_from(l).ok())
        .unwrap_or(0);
    let (after, token_rv) = match q.get("continue").filter(|s| !s.is_empty()) {
        Some(c) => {
            let (rv, ns, name) = decode_continue(c)?;
            (Some((ns, name)), Some(rv))
        }
        None => (None, None),
    };
    // Labels required by equality narrow the list through the store's label index.
    let required =
        crate::selector::required_labels(q.get("labelSelector").map(String::as_str).unwrap_or(""));
    // Label-only selectors need just the metadata; field selectors need the object.
    let filter_fn: Box<dyn Fn(&str) -> bool + Send> = if filter.is_empty() {
        Box::new(|_| true)
    } else if filter.field.is_empty() {
        let needles = crate::selector::label_needles(&required);
        Box::new(move |s: &str| {
            needles.iter().all(|n| s.contains(n.as_str()))
                && serde_json::from_str::<MetaOnly>(s).is_ok_and(|m| {
                    filter.matches(&json!({"metadata": {"labels": m.metadata.labels}}))
                })
        })
    } else {
        Box::new(move |s: &str| serde_json::from_str::<Value>(s).is_ok_and(|v| filter.matches(&v)))
    };
    let res = match crate::snapshot::list_objects(
        &app.store,
        q.get("resourceVersion").map(String::as_str),
        q.get("resourceVersionMatch").map(String::as_str),
        token_rv,
        ListRange::all(storage_rkey(info))
            .in_namespace(ns)
            .page(after, limit)
            .labelled(required),
        filter_fn,
        |ns, name| encode_continue(0, ns, name),
    )
    .await?
    {
        crate::snapshot::Listed::Items(res) => res,
        crate::snapshot::Listed::Expired(response) => return Ok(response),
    };
    let rv = res.rv;
    let mut lm = json!({"resourceVersion": rv.to_string()});
    if let Some((ns, name)) = res.more_after {
        lm["continue"] = json!(encode_continue(rv, &ns, &name));
    }
    // Fast path: stored objects already carry this version's apiVersion; splice the
    // stored JSON into the list without parsing it.
    let storage = storage_info(app, info);
    let needle = format!("\"apiVersion\":\"{}\"", info.api_version());
    if *render == Render::Plain
        && storage.api_version() == info.api_version()
        && storage.kind == info.kind
        && res.items.iter().all(|s| s.contains(&needle))
    {
        return Ok(spliced_list(info, lm, &res.items));
    }
    let items = res
        .items
        .iter()
        .map(|s| serde_json::from_str::<Value>(s))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ApiError::internal(format!("corrupt stored object: {e}")))?;
    Ok(respond_objects(
        info,
        render,
        items,
        Some(lm),
        StatusCode::OK,
    ))
}

/// A List response written from stored JSON strings without parsing them.
fn spliced_list(info: &ResourceInfo, lm: Value, items: &[String]) -> Response {
    let head = serde_json::to_string(
        &json!({"apiVersion": info.api_version(), "kind": info.list_kind, "metadata": lm}),
    )
    .unwrap_or_default();
    let total: usize = items.iter().map(|s| s.len() + 1).sum();
    let mut body = String::with_capacity(head.len() + total + 16);
    body.push_str(&head[..head.len() - 1]);
    body.push_str(",\"items\":[");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            body.push(',');
        }
        body.push_str(item);
    }
    body.push_str("]}");
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

#[derive(serde::Deserialize)]
struct MetaOnly {
    #[serde(default)]
    metadata: MetaLabels,
}

#[derive(serde::Deserialize, Default)]
struct MetaLabels {
    #[serde(default)]
    labels: Option<serde_json::Map<String, Value>>,
}

fn encode_continue(rv: u64, ns: &str, name: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(json!({"rv": rv, "ns": ns, "name": name}).to_string())
}

fn decode_continue(c: &str) -> Result<(u64, String, String), ApiError> {
    use base64::Engine;
    let bad = || ApiError::bad_request(format!("invalid continue token {c:?}"));
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(c)
        .map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    Ok((
        v["rv"].as_u64().ok_or_else(bad)?,
        v["ns"].as_str().ok_or_else(bad)?.to_string(),
        v["name"].as_str().ok_or_else(bad)?.to_string(),
    ))
}

// ---------------------------------------------------------------- create

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_round_trip() {
        let c = encode_continue(7, "ns", "n");
        assert_eq!(decode_continue(&c).unwrap(), (7, "ns".into(), "n".into()));
        assert!(decode_continue("!!").is_err());
    }
}
