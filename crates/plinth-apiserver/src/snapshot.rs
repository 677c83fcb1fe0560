//! Lists as of an earlier resourceVersion, and the list options that ask for them.
//!
//! Kubernetes pages a list (`limit` + `continue`) over one consistent snapshot: every page
//! shows the objects as they were at the first page's resourceVersion, and
//! `resourceVersionMatch=Exact` lists at a given resourceVersion. The store keeps the
//! current objects plus a revision log of every change since the compaction point, so the
//! state at revision R is: the current object when it has not changed since R, else the
//! last logged version at or before R (absent when that was a deletion, or when the first
//! change after R created it). When that cannot be told (the revision log was compacted
//! past R, or past the last change before R of an object changed since), the list answers
//! 410 `Expired`, as Kubernetes does once etcd compacted the revision.

use std::collections::{BTreeMap, HashMap};

use axum::response::{IntoResponse, Response};
use rusqlite::params;
use serde_json::json;

use crate::error::ApiError;
use crate::store::{EventType, ListRange, RawListResult, Store, StoreError};

/// Why a list at an earlier revision cannot be served.
#[derive(Debug)]
pub enum SnapshotError {
    /// The revision log no longer reaches back to the asked revision.
    Expired,
    /// The store failed.
    Store(StoreError),
}

impl From<StoreError> for SnapshotError {
    fn from(e: StoreError) -> Self {
        SnapshotError::Store(e)
    }
}

impl From<rusqlite::Error> for SnapshotError {
    fn from(e: rusqlite::Error) -> Self {
        SnapshotError::Store(e.into())
    }
}

/// The state of one changed object at the snapshot revision.
enum AtRev {
    Present(String),
    Absent,
}

/// Lists the objects in `range` as they were at revision `at`, ordered by (namespace,
/// name), that pass `filter`. The label index holds only current objects, so
/// `range.required` is left to `filter` here.
///
/// # Errors
/// [`SnapshotError::Expired`] when the revision log does not reach back to `at` for some
/// object in range; [`SnapshotError::Store`] when SQLite fails.
pub async fn list_at(
    store: &Store,
    range: ListRange,
    at: u64,
    filter: Box<dyn Fn(&str) -> bool + Send>,
) -> Result<RawListResult, SnapshotError> {
    let compacted = store.compacted().await?;
    if at < compacted {
        return Err(SnapshotError::Expired);
    }
    store
        .read(move |c| {
            let tx = c.transaction()?;
            let r = read_at(&tx, range, at, &*filter);
            drop(tx);
            Ok(r)
        })
        .await?
}

fn in_range(ns: Option<&str>, after: &(String, String), key: &(String, String)) -> bool {
    ns.is_none_or(|n| key.0 == n) && key > after
}

/// The objects of `rkey` changed after `at`, with their state at `at`.
fn changed_since(
    tx: &rusqlite::Transaction,
    rkey: &str,
    at: u64,
) -> Result<BTreeMap<(String, String), AtRev>, SnapshotError> {
    // First change after `at` per object.
    let mut first_after: HashMap<(String, String), EventType> = HashMap::new();
    let mut stmt =
        tx.prepare_cached("SELECT ns, name, type FROM events WHERE rkey=?1 AND id>?2 ORDER BY id")?;
    let mut rows = stmt.query(params![rkey, at as i64])?;
    while let Some(row) = rows.next()? {
        first_after
            .entry((row.get(0)?, row.get(1)?))
            .or_insert(EventType::from_code(row.get(2)?));
    }
    let mut out = BTreeMap::new();
    if first_after.is_empty() {
        return Ok(out);
    }
    // Last logged change at or before `at` of those objects.
    let mut stmt = tx.prepare_cached(
        "SELECT ns, name, type, data FROM events WHERE rkey=?1 AND id<=?2 ORDER BY id",
    )?;
    let mut rows = stmt.query(params![rkey, at as i64])?;
    while let Some(row) = rows.next()? {
        let key: (String, String) = (row.get(0)?, row.get(1)?);
        if !first_after.contains_key(&key) {
            continue;
        }
        let state = match EventType::from_code(row.get(2)?) {
            EventType::Deleted => AtRev::Absent,
            _ => AtRev::Present(row.get(3)?),
        };
        out.insert(key, state);
    }
    for (key, first) in first_after {
        if out.contains_key(&key) {
            continue;
        }
        // Nothing logged up to `at`: created after it, or its earlier history is gone.
        if first == EventType::Added {
            out.insert(key, AtRev::Absent);
        } else {
            return Err(SnapshotError::Expired);
        }
    }
    Ok(out)
}

/// An object's (namespace, name) and stored JSON.
type KeyedRow = ((String, String), String);

fn read_at(
    tx: &rusqlite::Transaction,
    range: ListRange,
    at: u64,
    filter: &dyn Fn(&str) -> bool,
) -> Result<RawListResult, SnapshotError> {
    let ListRange {
        rkey,
        ns,
        after,
        limit,
        ..
    } = range;
    let (rkey, ns) = (rkey.as_str(), ns.as_deref());
    let after = after.unwrap_or_default();
    let mut changed = changed_since(tx, rkey, at)?;
    changed.retain(|k, _| in_range(ns, &after, k));
    // Current objects not changed since `at`, in key order.
    let mut stmt = tx.prepare_cached(
        "SELECT ns, name, data FROM objects WHERE rkey=?1 AND rv<=?2 AND (ns>?3 OR (ns=?3 AND name>?4)) ORDER BY ns, name",
    )?;
    let mut rows = stmt.query(params![rkey, at as i64, after.0, after.1])?;
    let mut changed = changed.into_iter().peekable();
    let mut items = Vec::new();
    let mut last: Option<(String, String)> = None;
    let mut more_after = None;
    let mut row_next = || -> Result<Option<KeyedRow>, rusqlite::Error> {
        loop {
            let Some(row) = rows.next()? else {
                return Ok(None);
            };
            let key: (String, String) = (row.get(0)?, row.get(1)?);
            if ns.is_none_or(|n| key.0 == n) {
                return Ok(Some((key, row.get(2)?)));
            }
        }
    };
    let mut current = row_next()?;
    loop {
        // Merge the two ordered streams; the changed objects' states win.
        let take_changed = match (&current, changed.peek()) {
            (None, None) => break,
            (Some(_), None) => false,
            (None, Some(_)) => true,
            (Some((ck, _)), Some((k, _))) => k <= ck,
        };
        let (key, data) = if take_changed {
            let (k, state) = changed.next().expect("peeked");
            if current.as_ref().is_some_and(|(ck, _)| *ck == k) {
                current = row_next()?;
            }
            match state {
                AtRev::Present(d) => (k, d),
                AtRev::Absent => continue,
            }
        } else {
            let c = current.take().expect("checked");
            current = row_next()?;
            c
        };
        if !filter(&data) {
            continue;
        }
        if limit > 0 && items.len() == limit {
            more_after = last.take();
            break;
        }
        last = Some(key);
        items.push(data);
    }
    Ok(RawListResult {
        items,
        rv: at,
        more_after,
    })
}

/// A list's `resourceVersion` / `resourceVersionMatch` / `continue` options, validated as
/// Kubernetes validates `ListOptions`.
#[derive(Debug, PartialEq, Eq)]
pub enum ListAt {
    /// The current state (no resourceVersion, `0`, or NotOlderThan an older one).
    Latest,
    /// Exactly this revision (`resourceVersionMatch=Exact`, or a continue token's).
    Exact(u64),
    /// The current state, but no older than this revision.
    NotOlderThan(u64),
}

/// The 422 `Invalid` Status Kubernetes answers for a forbidden combination of list or
/// watch options: `field` names the option, `msg` says why.
pub(crate) fn forbidden_list_option(field: &str, msg: &str) -> ApiError {
    let mut e = ApiError::new(
        422,
        "Invalid",
        format!("ListOptions.meta.k8s.io \"\" is invalid: {field}: Forbidden: {msg}"),
    );
    e.details = Some(json!({"group": "meta.k8s.io", "kind": "ListOptions",
        "causes": [{"reason": "FieldValueForbidden", "message": format!("Forbidden: {msg}"), "field": field}]}));
    e
}

/// Reads the list options. `token_rv` is the revision of a `continue` token, if given
/// (0 for a token that continues over the current state).
///
/// # Errors
/// 422 Invalid (kind `ListOptions`) for the combinations Kubernetes forbids; 400 for a
/// resourceVersion that is not a number.
pub fn parse_list_options(
    resource_version: Option<&str>,
    rv_match: Option<&str>,
    continue_rv: Option<u64>,
) -> Result<ListAt, ApiError> {
    let rv = resource_version.filter(|s| !s.is_empty());
    let rv_match = rv_match.filter(|s| !s.is_empty());
    let invalid = forbidden_list_option;
    if let Some(token) = continue_rv {
        if rv.is_some_and(|v| v != "0") {
            return Err(invalid(
                "resourceVersion",
                "specifying resource version is not allowed when using continue",
            ));
        }
        if rv_match.is_some() {
            return Err(invalid(
                "resourceVersionMatch",
                "resourceVersionMatch is forbidden when continue is provided",
            ));
        }
        return Ok(if token == 0 {
            ListAt::Latest
        } else {
            ListAt::Exact(token)
        });
    }
    let parsed = match rv {
        None => None,
        Some(v) => Some(crate::store::parse_revision(v).ok_or_else(|| {
            ApiError::bad_request(format!(
                "invalid resourceVersion {v:?}: {}",
                crate::store::INVALID_REVISION
            ))
        })?),
    };
    match (rv_match, parsed) {
        (None, None) | (None, Some(0)) => Ok(ListAt::Latest),
        (None, Some(r)) => Ok(ListAt::NotOlderThan(r)),
        (Some(m), None) if m == "Exact" || m == "NotOlderThan" => Err(invalid(
            "resourceVersionMatch",
            "resourceVersionMatch is forbidden unless resourceVersion is provided",
        )),
        (Some("Exact"), Some(0)) => Err(invalid(
            "resourceVersionMatch",
            "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
        )),
        (Some("Exact"), Some(r)) => Ok(ListAt::Exact(r)),
        (Some("NotOlderThan"), Some(0)) => Ok(ListAt::Latest),
        (Some("NotOlderThan"), Some(r)) => Ok(ListAt::NotOlderThan(r)),
        (Some(other), _) => {
            let mut e = ApiError::new(
                422,
                "Invalid",
                format!(
                    "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Unsupported value: \"{other}\": supported values: \"Exact\", \"NotOlderThan\", \"\""
                ),
            );
            e.details = Some(json!({"group": "meta.k8s.io", "kind": "ListOptions",
                "causes": [{"reason": "FieldValueNotSupported", "message": format!("Unsupported value: \"{other}\": supported values: \"Exact\", \"NotOlderThan\", \"\""), "field": "resourceVersionMatch"}]}));
            Err(e)
        }
    }
}

/// The 410 Expired answer to a `continue` token whose revision was compacted away, with a
/// fresh token that continues from the same place over the current state (as Kubernetes
/// gives, so a client may choose an inconsistent remainder).
pub fn continue_expired(fresh_continue: String) -> Response {
    let e = ApiError::new(
        410,
        "Expired",
        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
    );
    let mut status = e.to_status();
    status["metadata"] = json!({"continue": fresh_continue});
    (
        axum::http::StatusCode::GONE,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        status.to_string(),
    )
        .into_response()
}

/// The 410 Expired answer to `resourceVersionMatch=Exact` at a compacted revision.
pub fn exact_expired() -> ApiError {
    ApiError::new(
        410,
        "Expired",
        "The resourceVersion for the provided list is too old.",
    )
}

/// The 504 answer to a list at a revision the store has not reached.
pub fn too_large(asked: u64, head: u64) -> ApiError {
    let mut e = ApiError::new(
        504,
        "Timeout",
        format!("Too large resource version: {asked}, current: {head}"),
    );
    e.details = Some(
        json!({"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}], "retryAfterSeconds": 1}),
    );
    e
}

/// What a list read: the objects, or a ready 410 answer for an expired continue token.
pub enum Listed {
    /// The page.
    Items(RawListResult),
    /// The 410 Expired response (with a fresh continue token).
    Expired(Response),
}

/// How long a list waits for the store to reach a resourceVersion it was asked not to be
/// older than, before answering 504 (Kubernetes waits 3 s too).
const WAIT_FOR_RV: std::time::Duration = std::time::Duration::from_secs(3);

/// Waits until the store's head reaches `rv`, for at most [`WAIT_FOR_RV`].
async fn wait_for(store: &Store, rv: u64) -> Result<(), ApiError> {
    let deadline = tokio::time::Instant::now() + WAIT_FOR_RV;
    while store.head() < rv {
        if tokio::time::Instant::now() >= deadline {
            return Err(too_large(rv, store.head()));
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    Ok(())
}

/// The list step of a list request: reads `range` at the revision the options ask for
/// (see [`parse_list_options`]); `fresh_token(ns, name)` makes a continue token over the
/// current state from the given position, for the 410 answer to an expired token.
/// `range.required`: labels the selector requires by equality; a list of the current
/// state reads only the objects that carry the rarest of them (the label index).
///
/// # Errors
/// The option errors of [`parse_list_options`], 410 for `Exact` at a compacted revision,
/// 504 for a revision the store does not reach within 3 s, 500 when storage fails.
pub async fn list_objects(
    store: &Store,
    resource_version: Option<&str>,
    rv_match: Option<&str>,
    token_rv: Option<u64>,
    range: ListRange,
    filter: Box<dyn Fn(&str) -> bool + Send>,
    fresh_token: impl FnOnce(&str, &str) -> String,
) -> Result<Listed, ApiError> {
    let at = match parse_list_options(resource_version, rv_match, token_rv)? {
        ListAt::Latest => None,
        ListAt::NotOlderThan(r) => {
            wait_for(store, r).await?;
            None
        }
        ListAt::Exact(r) => {
            wait_for(store, r).await?;
            Some(r)
        }
    };
    let Some(at) = at else {
        return Ok(Listed::Items(store.list_raw(range, filter).await?));
    };
    let after = range.after.clone();
    match list_at(store, range, at, filter).await {
        Ok(r) => Ok(Listed::Items(r)),
        Err(SnapshotError::Store(e)) => Err(e.into()),
        Err(SnapshotError::Expired) if token_rv.is_some() => {
            let (ans, aname) = after.unwrap_or_default();
            Ok(Listed::Expired(continue_expired(fresh_token(&ans, &aname))))
        }
        Err(SnapshotError::Expired) => Err(exact_expired()),
    }
}
