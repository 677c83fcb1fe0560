//! What the database holds and what was written to it, per resource: the measurements
//! behind the scale benchmark's "bytes per request" and "API writes per request".

use std::collections::{BTreeMap, BTreeSet, HashMap};

use rusqlite::params;
use serde_json::Value;

use crate::store::{EventType, Store, StoreError};

/// Live objects of one resource (`group/plural`): how many and their stored JSON bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceUsage {
    /// `group/plural` (`/plural` for the core group).
    pub rkey: String,
    /// Stored objects.
    pub objects: u64,
    /// Sum of their stored JSON text, in bytes.
    pub bytes: u64,
}

/// A kind of write found in the revision log and how often it happened.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct WriteKind {
    /// `group/plural`.
    pub rkey: String,
    /// `ADDED`, `DELETED`, or `MODIFIED <fields>` where fields are the changed paths two
    /// levels deep (`status.conditions`, `metadata.finalizers`, `spec`), comma-separated;
    /// `MODIFIED ?` when the previous revision was compacted away.
    pub change: String,
    /// Revisions of this kind.
    pub count: u64,
}

/// Paths (two levels, dotted) where `a` and `b` differ, ignoring the fields every write
/// changes (`metadata.resourceVersion`, `metadata.managedFields`).
fn changed_paths(a: &Value, b: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let empty = serde_json::Map::new();
    let (ao, bo) = (
        a.as_object().unwrap_or(&empty),
        b.as_object().unwrap_or(&empty),
    );
    for k in ao.keys().chain(bo.keys()) {
        let (x, y) = (ao.get(k), bo.get(k));
        if x == y {
            continue;
        }
        match (x.and_then(Value::as_object), y.and_then(Value::as_object)) {
            (Some(xm), Some(ym)) if k == "metadata" || k == "status" => {
                for k2 in xm.keys().chain(ym.keys()) {
                    if matches!(k2.as_str(), "resourceVersion" | "managedFields") {
                        continue;
                    }
                    if xm.get(k2) != ym.get(k2) {
                        out.insert(format!("{k}.{k2}"));
                    }
                }
            }
            _ => {
                out.insert(k.clone());
            }
        }
    }
    out
}

impl Store {
    /// Live objects per resource, largest first.
    ///
    /// # Errors
    /// The storage could not be read.
    pub async fn live_usage(&self) -> Result<Vec<ResourceUsage>, StoreError> {
        self.read(|c| {
            let mut stmt = c.prepare(
                "SELECT rkey, COUNT(*), SUM(LENGTH(data)) FROM objects GROUP BY rkey ORDER BY 3 DESC",
            )?;
            let rows = stmt.query_map([], |r| {
                Ok(ResourceUsage {
                    rkey: r.get(0)?,
                    objects: r.get::<_, i64>(1)? as u64,
                    bytes: r.get::<_, i64>(2)? as u64,
                })
            })?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }

    /// Every revision after `after` still in the log, classified by resource and what it
    /// changed against the object's previous revision, most frequent first.
    ///
    /// # Errors
    /// The storage could not be read, or a stored object is not JSON.
    pub async fn write_profile(&self, after: u64) -> Result<Vec<WriteKind>, StoreError> {
        self.read(move |c| {
            // Revisions at or below the compaction point are only the ones compaction
            // keeps (each live object's latest), not writes made after `after`.
            let compacted: i64 = c.query_row(
                "SELECT coalesce((SELECT v FROM meta WHERE k='compacted'), 0)",
                [],
                |r| r.get(0),
            )?;
            let after = (after as i64).max(compacted);
            let mut stmt =
                c.prepare("SELECT rkey, ns, name, type, data FROM events WHERE id>?1 ORDER BY id")?;
            let mut rows = stmt.query(params![after])?;
            let mut last: HashMap<(String, String, String), Value> = HashMap::new();
            let mut counts: BTreeMap<(String, String), u64> = BTreeMap::new();
            while let Some(row) = rows.next()? {
                let key: (String, String, String) = (row.get(0)?, row.get(1)?, row.get(2)?);
                let kind = EventType::from_code(row.get(3)?);
                let data: String = row.get(4)?;
                let obj: Value = serde_json::from_str(&data)
                    .map_err(|e| StoreError::Db(format!("corrupt revision: {e}")))?;
                let change = match kind {
                    EventType::Added => "ADDED".to_string(),
                    EventType::Deleted => "DELETED".to_string(),
                    EventType::Modified => match last.get(&key) {
                        Some(prev) => {
                            let paths: Vec<String> =
                                changed_paths(prev, &obj).into_iter().collect();
                            format!("MODIFIED {}", paths.join(","))
                        }
                        None => "MODIFIED ?".to_string(),
                    },
                };
                *counts.entry((key.0.clone(), change)).or_default() += 1;
                if kind == EventType::Deleted {
                    last.remove(&key);
                } else {
                    last.insert(key, obj);
                }
            }
            let mut out: Vec<WriteKind> = counts
                .into_iter()
                .map(|((rkey, change), count)| WriteKind {
                    rkey,
                    change,
                    count,
                })
                .collect();
            out.sort_by(|a, b| b.count.cmp(&a.count).then(a.cmp(b)));
            Ok(out)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{ObjKey, WriteOp};
    use serde_json::json;
    use std::sync::Arc;

    #[tokio::test]
    async fn writes_are_classified_by_what_they_changed() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db"), Arc::new(|_| {})).unwrap();
        let key = ObjKey {
            rkey: "/configmaps".into(),
            ns: "default".into(),
            name: "a".into(),
        };
        let mut obj = json!({"metadata": {"name": "a"}, "data": {"x": "1"}});
        let stored = store
            .write(WriteOp::Create {
                key: key.clone(),
                obj: obj.clone(),
            })
            .await
            .unwrap();
        let mut rv = match stored {
            crate::store::WriteOutcome::Stored(v) => v["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap(),
            _ => unreachable!(),
        };
        for labels in [json!({"l": "1"}), json!({"l": "2"})] {
            obj["metadata"]["labels"] = labels;
            match store
                .write(WriteOp::Update {
                    key: key.clone(),
                    obj: obj.clone(),
                    expected_rv: rv,
                })
                .await
                .unwrap()
            {
                crate::store::WriteOutcome::Stored(v) => {
                    rv = v["metadata"]["resourceVersion"]
                        .as_str()
                        .unwrap()
                        .parse()
                        .unwrap()
                }
                _ => unreachable!(),
            }
        }
        let profile = store.write_profile(0).await.unwrap();
        assert_eq!(
            profile,
            [
                WriteKind {
                    rkey: "/configmaps".into(),
                    change: "MODIFIED metadata.labels".into(),
                    count: 2
                },
                WriteKind {
                    rkey: "/configmaps".into(),
                    change: "ADDED".into(),
                    count: 1
                },
            ]
        );
        let usage = store.live_usage().await.unwrap();
        assert_eq!(usage.len(), 1);
        assert_eq!(usage[0].objects, 1);
        assert!(usage[0].bytes > 20);
    }
}
