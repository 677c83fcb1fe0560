//! SQLite storage: current objects plus an append-only revision log whose
//! `INTEGER PRIMARY KEY` is the global `resourceVersion` (the layout k3s's kine uses).
//!
//! * One dedicated writer thread owns the only writing connection. It drains its queue,
//!   applies every queued operation inside one transaction (each in its own savepoint so a
//!   failed operation does not spoil the others), commits once (one fsync with
//!   `synchronous=FULL` in WAL mode) and only then publishes the events to watchers and
//!   the other caches that follow the store, then acknowledges the callers (group commit).
//! * Readers use their own connections from a small pool (WAL gives them snapshot isolation).
//! * Compaction deletes revisions at or below a target, except each live object's latest
//!   one there (so lists at a revision above the target can be rebuilt); watches that
//!   start below it get a 410 `Expired`. Compaction is followed by `PRAGMA incremental_vacuum` and a WAL
//!   checkpoint so the data file stays bounded. Both run on the writer thread in steps of
//!   2,000 revisions or pages, and the writes queued meanwhile are committed between two
//!   steps: at 10,000 requests a compaction done in one go held every write for up to 45 s.
//! * `resourceVersion`s come from `sqlite_sequence` (AUTOINCREMENT), so they never go
//!   backwards, across restarts and after compaction.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::Value;
use tokio::sync::{broadcast, oneshot};

/// Storage errors.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The object does not exist.
    #[error("not found")]
    NotFound,
    /// An object with that key exists already (create).
    #[error("already exists")]
    AlreadyExists,
    /// The stored object's resourceVersion differs from the expected one.
    #[error("conflict: stored resourceVersion is {current}")]
    Conflict {
        /// The stored object's resourceVersion.
        current: u64,
    },
    /// The uid precondition failed.
    #[error("uid precondition failed: stored uid is {current}")]
    UidMismatch {
        /// The stored object's uid.
        current: String,
    },
    /// SQLite failed.
    #[error("storage: {0}")]
    Db(String),
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        StoreError::Db(e.to_string())
    }
}

/// A resourceVersion a client sent, as the store's revision: a non-negative integer the
/// revision log can hold (its ids are SQLite integers, so at most `i64::MAX`). `None` for
/// anything else; callers answer 400 with [`INVALID_REVISION`].
pub fn parse_revision(s: &str) -> Option<u64> {
    s.parse::<u64>().ok().filter(|v| i64::try_from(*v).is_ok())
}

/// Why [`parse_revision`] refused a value, for the 400 answer.
pub const INVALID_REVISION: &str =
    "must be a non-negative integer no larger than 9223372036854775807";

/// Identifies one stored object: resource key (`group/plural`, `/plural` for core),
/// namespace (empty for cluster-scoped) and name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjKey {
    /// `group/plural`.
    pub rkey: String,
    /// Namespace or empty.
    pub ns: String,
    /// Name.
    pub name: String,
}

/// Watch event type, as in the Kubernetes watch protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// The object was created.
    Added,
    /// The object was changed.
    Modified,
    /// The object was removed; the event carries its last state.
    Deleted,
}

impl EventType {
    /// Wire name (`ADDED`, `MODIFIED`, `DELETED`).
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
    fn code(self) -> i64 {
        match self {
            EventType::Added => 0,
            EventType::Modified => 1,
            EventType::Deleted => 2,
        }
    }
    pub(crate) fn from_code(c: i64) -> Self {
        match c {
            0 => EventType::Added,
            1 => EventType::Modified,
            _ => EventType::Deleted,
        }
    }
}

/// One committed change. `rv` is its resourceVersion (the revision-log row id).
#[derive(Clone, Debug)]
pub struct Event {
    /// Global resourceVersion of this change.
    pub rv: u64,
    /// What happened.
    pub kind: EventType,
    /// Which object.
    pub key: ObjKey,
    /// The object after the change (for `Deleted`, its last state), with
    /// `metadata.resourceVersion` set to `rv`.
    pub object: Arc<Value>,
    /// The watch-protocol line for this event in its stored form, serialized once and
    /// shared by every watcher that wants exactly that form.
    pub line: std::sync::OnceLock<bytes::Bytes>,
    /// For live `Modified` events, the object before the change (lets filtered watches
    /// turn an object entering or leaving their selector into ADDED / DELETED).
    pub prev: Option<Arc<Value>>,
}

/// A write request. Every write appends one revision per changed object.
#[derive(Debug)]
pub enum WriteOp {
    /// Insert a new object; fails with `AlreadyExists`.
    Create {
        /// Key.
        key: ObjKey,
        /// Object (its resourceVersion is overwritten).
        obj: Value,
    },
    /// Replace an object whose stored resourceVersion equals `expected_rv`
    /// (`Conflict` otherwise). If the new object carries `metadata.deletionTimestamp`
    /// and no finalizers, the object is removed instead (finalization complete).
    Update {
        /// Key.
        key: ObjKey,
        /// New object.
        obj: Value,
        /// Precondition.
        expected_rv: u64,
    },
    /// Remove an object, optionally checking its resourceVersion and uid.
    Delete {
        /// Key.
        key: ObjKey,
        /// resourceVersion precondition.
        expected_rv: Option<u64>,
        /// uid precondition.
        expected_uid: Option<String>,
    },
    /// Remove every object of one resource (used when a CRD is deleted).
    DeleteResource {
        /// Resource key.
        rkey: String,
    },
}

/// Result of a successful write.
#[derive(Debug, Clone)]
pub enum WriteOutcome {
    /// The object as stored (with its new resourceVersion).
    Stored(Value),
    /// The object was removed; its last state (with the deletion's resourceVersion).
    Deleted(Value),
    /// Number of objects removed by `DeleteResource`.
    Removed(usize),
}

enum Cmd {
    Write(WriteOp, oneshot::Sender<Result<WriteOutcome, StoreError>>),
    Compact(u64, oneshot::Sender<Result<u64, StoreError>>),
    Maintain(oneshot::Sender<Result<(), StoreError>>),
}

/// Sink the writer calls with every committed batch of events, in resourceVersion order.
pub type EventSink = Arc<dyn Fn(&[Event]) + Send + Sync>;

/// Which stored objects one list reads: a resource, optionally one namespace, the page
/// after a key, and labels every listed object carries.
///
/// ```
/// use plinth_apiserver::store::ListRange;
///
/// // The second page of 500 ConfigMaps in `default` labelled `app=web`.
/// let page = ListRange::all("/configmaps")
///     .in_namespace(Some("default".into()))
///     .page(Some(("default".into(), "cm-499".into())), 500)
///     .labelled(vec![("app".into(), "web".into())]);
/// assert_eq!(page.limit, 500);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListRange {
    /// The resource's storage key (`/configmaps`, `/apps/deployments`).
    pub rkey: String,
    /// Only this namespace; `None` lists all namespaces.
    pub ns: Option<String>,
    /// Start after this (namespace, name); `None` starts at the beginning.
    pub after: Option<(String, String)>,
    /// At most this many objects; 0 lists them all.
    pub limit: usize,
    /// Labels (key, value) every listed object carries: only the objects carrying the
    /// rarest of them are read, through the label index. Empty reads every object.
    pub required: Vec<(String, String)>,
}

impl ListRange {
    /// Every object of the resource `rkey`, in all namespaces.
    pub fn all(rkey: impl Into<String>) -> Self {
        Self {
            rkey: rkey.into(),
            ..Self::default()
        }
    }

    /// Only the objects in `ns` (`None`: all namespaces).
    #[must_use]
    pub fn in_namespace(mut self, ns: Option<String>) -> Self {
        self.ns = ns;
        self
    }

    /// At most `limit` objects (0: all) after the key `after`.
    #[must_use]
    pub fn page(mut self, after: Option<(String, String)>, limit: usize) -> Self {
        self.after = after;
        self.limit = limit;
        self
    }

    /// Only objects carrying every label in `required`.
    #[must_use]
    pub fn labelled(mut self, required: Vec<(String, String)>) -> Self {
        self.required = required;
        self
    }
}

/// Result of a list: what it returns for each matching object, the snapshot's
/// resourceVersion, and where to continue.
#[derive(Debug)]
pub struct Listed<T> {
    /// Matching objects, ordered by (namespace, name).
    pub items: Vec<T>,
    /// resourceVersion of the snapshot the list was read at.
    pub rv: u64,
    /// Key of the last returned object when more objects match (for `continue`).
    pub more_after: Option<(String, String)>,
}

/// Result of [`Store::list`]: parsed objects.
pub type ListResult = Listed<Value>;

/// Result of [`Store::list_raw`]: stored JSON text.
pub type RawListResult = Listed<String>;

/// The storage handle; cheap to clone.
#[derive(Clone)]
pub struct Store {
    tx: std::sync::mpsc::Sender<Cmd>,
    readers: Arc<Mutex<Vec<Connection>>>,
    /// One permit per reader connection: reads beyond [`READERS`] wait for one instead of
    /// opening more connections (each has its own page cache) on more blocking threads.
    read_permits: Arc<tokio::sync::Semaphore>,
    path: PathBuf,
    /// Latest committed resourceVersion (kept by the writer).
    head: Arc<std::sync::atomic::AtomicU64>,
}

/// Reader connections (and concurrent reads) at most. Reads are short under WAL; a burst
/// of list calls waits here rather than growing memory with a connection each.
const READERS: usize = 8;

fn open_conn(path: &Path) -> Result<Connection, StoreError> {
    let conn = Connection::open(path)?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    // Room for every statement the store runs, so none is prepared again per call
    // (rusqlite keeps 16 by default, fewer than the list and write statements together).
    conn.set_prepared_statement_cache_capacity(128);
    Ok(conn)
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS objects (
  id INTEGER PRIMARY KEY,
  rkey TEXT NOT NULL, ns TEXT NOT NULL, name TEXT NOT NULL,
  rv INTEGER NOT NULL, uid TEXT NOT NULL, data TEXT NOT NULL,
  UNIQUE (rkey, ns, name));
CREATE INDEX IF NOT EXISTS objects_ns ON objects(ns);
CREATE INDEX IF NOT EXISTS objects_uid ON objects(uid);
CREATE TABLE IF NOT EXISTS events (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  rkey TEXT NOT NULL, ns TEXT NOT NULL, name TEXT NOT NULL,
  type INTEGER NOT NULL, data TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS events_rkey ON events(rkey, id);
CREATE TABLE IF NOT EXISTS owner_refs (
  owner_uid TEXT NOT NULL, rkey TEXT NOT NULL, ns TEXT NOT NULL, name TEXT NOT NULL,
  PRIMARY KEY (owner_uid, rkey, ns, name)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS labels (
  rkey TEXT NOT NULL, k TEXT NOT NULL, v TEXT NOT NULL, ns TEXT NOT NULL, name TEXT NOT NULL,
  PRIMARY KEY (rkey, k, v, ns, name)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS labels_obj ON labels(rkey, ns, name);
";

impl Store {
    /// Opens (creating if needed) the database at `path` and starts the writer thread.
    /// `sink` receives every committed batch of events after it is durable.
    pub fn open(path: &Path, sink: EventSink) -> Result<Store, StoreError> {
        let conn = Connection::open(path)?;
        // auto_vacuum must be chosen before the first table exists.
        conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
        drop(conn);
        let mut conn = open_conn(path)?;
        conn.execute_batch(SCHEMA)?;
        index_labels_of_older_database(&mut conn)?;
        let head = read_head(&conn)?;
        let head = Arc::new(std::sync::atomic::AtomicU64::new(head));
        let (tx, rx) = std::sync::mpsc::channel::<Cmd>();
        let head2 = head.clone();
        std::thread::Builder::new()
            .name("plinth-store-writer".into())
            .spawn(move || writer_loop(conn, rx, sink, head2))
            .map_err(|e| StoreError::Db(format!("spawning the writer thread: {e}")))?;
        Ok(Store {
            tx,
            readers: Arc::new(Mutex::new(Vec::new())),
            read_permits: Arc::new(tokio::sync::Semaphore::new(READERS)),
            path: path.to_path_buf(),
            head,
        })
    }

    /// Latest committed resourceVersion.
    pub fn head(&self) -> u64 {
        self.head.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Path of the database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Queues a write and waits until it is durable.
    pub async fn write(&self, op: WriteOp) -> Result<WriteOutcome, StoreError> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(Cmd::Write(op, tx))
            .map_err(|_| StoreError::Db("the writer thread has stopped".into()))?;
        rx.await
            .map_err(|_| StoreError::Db("the writer thread has stopped".into()))?
    }

    /// Deletes revisions at or below `target` (bounded by the head). Returns the new
    /// compaction point.
    pub async fn compact(&self, target: u64) -> Result<u64, StoreError> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(Cmd::Compact(target, tx))
            .map_err(|_| StoreError::Db("the writer thread has stopped".into()))?;
        rx.await
            .map_err(|_| StoreError::Db("the writer thread has stopped".into()))?
    }

    /// Incremental vacuum plus WAL checkpoint (TRUNCATE).
    pub async fn maintain(&self) -> Result<(), StoreError> {
        let (tx, rx) = oneshot::channel();
        self.tx
            .send(Cmd::Maintain(tx))
            .map_err(|_| StoreError::Db("the writer thread has stopped".into()))?;
        rx.await
            .map_err(|_| StoreError::Db("the writer thread has stopped".into()))?
    }

    /// Runs `f` on a pooled reader connection on a blocking thread.
    pub async fn read<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let pool = self.readers.clone();
        let path = self.path.clone();
        let permit = self
            .read_permits
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| StoreError::Db("the store is closed".into()))?;
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let conn = pool.lock().unwrap().pop();
            let mut conn = match conn {
                Some(c) => c,
                None => open_conn(&path)?,
            };
            let r = f(&mut conn);
            let mut p = pool.lock().unwrap();
            if p.len() < READERS {
                p.push(conn);
            }
            r
        })
        .await
        .map_err(|e| StoreError::Db(format!("reader task failed: {e}")))?
    }

    /// Reads one object.
    pub async fn get(&self, key: ObjKey) -> Result<Option<Value>, StoreError> {
        self.read(move |c| {
            let s: Option<String> = c
                .query_row(
                    "SELECT data FROM objects WHERE rkey=?1 AND ns=?2 AND name=?3",
                    params![key.rkey, key.ns, key.name],
                    |r| r.get(0),
                )
                .optional()?;
            s.map(|s| parse(&s)).transpose()
        })
        .await
    }

    /// Lists the objects in `range` that pass `filter`, ordered by (namespace, name). The
    /// snapshot's resourceVersion is returned with them.
    ///
    /// # Errors
    /// The storage could not be read, or a stored object is not valid JSON.
    pub async fn list(
        &self,
        range: ListRange,
        filter: Box<dyn Fn(&Value) -> bool + Send>,
    ) -> Result<ListResult, StoreError> {
        // Each row is parsed once, and only the matching ones are kept.
        let scan = move |data: &str| parse(data).map(|v| filter(&v).then_some(v));
        self.scan(range, scan).await
    }

    /// Like [`Store::list`], returning the stored JSON text unparsed (the fast path for
    /// large lists); `filter` sees the JSON text. With labels in `range.required`, only
    /// objects carrying the rarest of them are read; `filter` still decides.
    ///
    /// # Errors
    /// The storage could not be read.
    pub async fn list_raw(
        &self,
        range: ListRange,
        filter: Box<dyn Fn(&str) -> bool + Send>,
    ) -> Result<RawListResult, StoreError> {
        let scan = move |data: &str| Ok(filter(data).then(|| data.to_string()));
        self.scan(range, scan).await
    }

    /// The scan behind every list, in one read transaction: each stored object's JSON
    /// text (borrowed from SQLite, so rows `keep` declines are never copied) goes to
    /// `keep`, which returns what to list for it, or `None` to skip it. Stops after
    /// `limit` kept rows (0 = no limit); `more_after` is then the key of the last one.
    ///
    /// # Errors
    /// The storage could not be read, or `keep` failed.
    pub async fn scan<T, F>(&self, range: ListRange, mut keep: F) -> Result<Listed<T>, StoreError>
    where
        T: Send + 'static,
        F: FnMut(&str) -> Result<Option<T>, StoreError> + Send + 'static,
    {
        let ListRange {
            rkey,
            ns,
            after,
            limit,
            required,
        } = range;
        self.read(move |c| {
            let tx = c.transaction()?;
            let rv = read_head(&tx)?;
            let (ans, aname) = after.unwrap_or_default();
            let label = rarest_label(&tx, &rkey, ns.as_deref(), required)?;
            let mut items = Vec::new();
            let mut more_after = None;
            {
                let labelled = label.is_some();
                let mut stmt = tx.prepare_cached(list_query(ns.is_some(), labelled))?;
                let (k, v) = label.unwrap_or_default();
                // Namespaced: from name `aname` in `ns`; all namespaces: after (`ans`, `aname`).
                let from_ns = ns.as_deref().unwrap_or(&ans);
                let mut rows = if labelled {
                    stmt.query(params![rkey, from_ns, aname, k, v])?
                } else {
                    stmt.query(params![rkey, from_ns, aname])?
                };
                let mut last: Option<(String, String)> = None;
                while let Some(row) = rows.next()? {
                    let data = row
                        .get_ref(2)?
                        .as_str()
                        .map_err(|e| StoreError::Db(format!("stored object is not text: {e}")))?;
                    let Some(item) = keep(data)? else {
                        continue;
                    };
                    if limit > 0 && items.len() == limit {
                        more_after = last.take();
                        break;
                    }
                    last = Some((row.get(0)?, row.get(1)?));
                    items.push(item);
                }
            }
            tx.commit()?;
            Ok(Listed {
                items,
                rv,
                more_after,
            })
        })
        .await
    }

    /// The compaction point: revisions at or below it are gone.
    pub async fn compacted(&self) -> Result<u64, StoreError> {
        self.read(|c| read_compacted(c)).await
    }

    /// The first `limit` events of resource `rkey` with resourceVersion in `(after, upto]`,
    /// in order, and the compaction point at the time of the read. If `after` is below the
    /// compaction point the caller must answer 410 Expired. Each event is parsed, so a
    /// caller replaying a long stretch of the log reads it a page at a time: a minute of
    /// Pod changes at once is hundreds of megabytes of parsed objects.
    pub async fn events_since(
        &self,
        rkey: String,
        after: u64,
        upto: u64,
        limit: usize,
    ) -> Result<(Vec<Event>, u64), StoreError> {
        self.read(move |c| {
            let tx = c.transaction()?;
            let compacted = read_compacted(&tx)?;
            let mut out = Vec::new();
            if after >= compacted {
                let mut stmt = tx.prepare_cached(
                    "SELECT id, ns, name, type, data FROM events WHERE rkey=?1 AND id>?2 AND id<=?3 ORDER BY id LIMIT ?4",
                )?;
                let limit = i64::try_from(limit).unwrap_or(i64::MAX);
                let mut rows = stmt.query(params![rkey, after as i64, upto as i64, limit])?;
                while let Some(row) = rows.next()? {
                    let id: i64 = row.get(0)?;
                    let data: String = row.get(4)?;
                    out.push(Event {
                        rv: id as u64,
                        kind: EventType::from_code(row.get(3)?),
                        key: ObjKey {
                            rkey: rkey.clone(),
                            ns: row.get(1)?,
                            name: row.get(2)?,
                        },
                        object: Arc::new(parse(&data)?),
                        line: std::sync::OnceLock::new(),
                        prev: None,
                    });
                }
            }
            drop(tx);
            Ok((out, compacted))
        })
        .await
    }

    /// Every change of any resource with resourceVersion above `after`, in order:
    /// `(resourceVersion, type, key)`. Changes at or below the compaction point are gone
    /// and not reported. Used to tell what a supposedly quiet platform wrote.
    pub async fn changes_since(
        &self,
        after: u64,
    ) -> Result<Vec<(u64, EventType, ObjKey)>, StoreError> {
        self.read(move |c| {
            // The revisions compaction keeps (each live object's latest) are not changes
            // made after `after`.
            let after = after.max(read_compacted(c)?);
            let mut stmt = c.prepare_cached(
                "SELECT id, rkey, ns, name, type FROM events WHERE id>?1 ORDER BY id",
            )?;
            let mut rows = stmt.query(params![after as i64])?;
            let mut out = Vec::new();
            while let Some(row) = rows.next()? {
                let id: i64 = row.get(0)?;
                out.push((
                    id as u64,
                    EventType::from_code(row.get(4)?),
                    ObjKey {
                        rkey: row.get(1)?,
                        ns: row.get(2)?,
                        name: row.get(3)?,
                    },
                ));
            }
            Ok(out)
        })
        .await
    }

    /// Keys of objects that name `owner_uid` in their `metadata.ownerReferences`.
    pub async fn dependents(&self, owner_uid: String) -> Result<Vec<ObjKey>, StoreError> {
        self.keys_where(
            "SELECT rkey, ns, name FROM owner_refs WHERE owner_uid=?1",
            owner_uid,
        )
        .await
    }

    /// Keys of every object in namespace `ns`.
    pub async fn keys_in_namespace(&self, ns: String) -> Result<Vec<ObjKey>, StoreError> {
        self.keys_where("SELECT rkey, ns, name FROM objects WHERE ns=?1", ns)
            .await
    }

    /// The keys a query of `(rkey, ns, name)` rows with one parameter returns.
    async fn keys_where(
        &self,
        sql: &'static str,
        param: String,
    ) -> Result<Vec<ObjKey>, StoreError> {
        self.read(move |c| {
            let mut stmt = c.prepare_cached(sql)?;
            let rows = stmt.query_map(params![param], |r| {
                Ok(ObjKey {
                    rkey: r.get(0)?,
                    ns: r.get(1)?,
                    name: r.get(2)?,
                })
            })?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }

    /// Whether any object with this uid exists (used by the garbage collector).
    pub async fn uid_exists(&self, uid: String) -> Result<bool, StoreError> {
        self.read(move |c| {
            let n: i64 = c.query_row(
                "SELECT count(*) FROM objects WHERE uid=?1",
                params![uid],
                |r| r.get(0),
            )?;
            Ok(n > 0)
        })
        .await
    }

    /// The object with this uid, if it exists.
    pub async fn find_by_uid(&self, uid: String) -> Result<Option<(ObjKey, Value)>, StoreError> {
        self.read(move |c| {
            let r: Option<(String, String, String, String)> = c
                .query_row(
                    "SELECT rkey, ns, name, data FROM objects WHERE uid=?1",
                    params![uid],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
                )
                .optional()?;
            r.map(|(rkey, ns, name, data)| Ok((ObjKey { rkey, ns, name }, parse(&data)?)))
                .transpose()
        })
        .await
    }

    /// Every stored object of one resource (all namespaces).
    pub async fn all_of(&self, rkey: String) -> Result<Vec<Value>, StoreError> {
        Ok(self
            .list(ListRange::all(rkey), Box::new(|_| true))
            .await?
            .items)
    }
}

fn parse(s: &str) -> Result<Value, StoreError> {
    serde_json::from_str(s).map_err(|e| StoreError::Db(format!("corrupt stored object: {e}")))
}

fn read_head(c: &Connection) -> Result<u64, StoreError> {
    let v: Option<i64> = c
        .query_row(
            "SELECT seq FROM sqlite_sequence WHERE name='events'",
            [],
            |r| r.get(0),
        )
        .optional()?;
    Ok(v.unwrap_or(0) as u64)
}

fn read_compacted(c: &Connection) -> Result<u64, StoreError> {
    let v: Option<i64> = c
        .query_row("SELECT v FROM meta WHERE k='compacted'", [], |r| r.get(0))
        .optional()?;
    Ok(v.unwrap_or(0) as u64)
}

fn obj_rv(v: &Value) -> u64 {
    v.pointer("/metadata/resourceVersion")
        .and_then(|x| x.as_str())
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

fn set_rv(v: &mut Value, rv: u64) {
    if let Some(m) = v.get_mut("metadata").and_then(|m| m.as_object_mut()) {
        m.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

fn owner_uids(v: &Value) -> Vec<String> {
    v.pointer("/metadata/ownerReferences")
        .and_then(|x| x.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|r| r.get("uid").and_then(|u| u.as_str()).map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// The list query: objects of `?1` in namespace `?2` (or from namespace `?2` on, all
/// namespaces) after name `?3`, in (namespace, name) order; with `labelled`, only those
/// carrying label `?4`=`?5`, found through the label index.
fn list_query(namespaced: bool, labelled: bool) -> &'static str {
    match (namespaced, labelled) {
        (true, false) => {
            "SELECT ns, name, data FROM objects WHERE rkey=?1 AND ns=?2 AND name>?3 ORDER BY name"
        }
        (false, false) => {
            "SELECT ns, name, data FROM objects WHERE rkey=?1 AND (ns>?2 OR (ns=?2 AND name>?3)) ORDER BY ns, name"
        }
        (true, true) => {
            "SELECT o.ns, o.name, o.data FROM labels l JOIN objects o ON o.rkey=l.rkey AND o.ns=l.ns AND o.name=l.name \
             WHERE l.rkey=?1 AND l.k=?4 AND l.v=?5 AND l.ns=?2 AND l.name>?3 ORDER BY l.name"
        }
        (false, true) => {
            "SELECT o.ns, o.name, o.data FROM labels l JOIN objects o ON o.rkey=l.rkey AND o.ns=l.ns AND o.name=l.name \
             WHERE l.rkey=?1 AND l.k=?4 AND l.v=?5 AND (l.ns>?2 OR (l.ns=?2 AND l.name>?3)) ORDER BY l.ns, l.name"
        }
    }
}

/// Of the labels a selector requires, the one the fewest objects of `rkey` (in `ns`)
/// carry, by the label index; `None` when nothing is required.
///
/// Counts are capped, and the cap grows only while every label reaches it: a label that
/// every object carries (the Promise name on each request's Job) costs at most the cap,
/// not a scan of all of them, on every list.
fn rarest_label(
    c: &Connection,
    rkey: &str,
    ns: Option<&str>,
    required: Vec<(String, String)>,
) -> Result<Option<(String, String)>, StoreError> {
    if required.len() < 2 {
        return Ok(required.into_iter().next());
    }
    let mut cap: i64 = 64;
    loop {
        let mut best: Option<(i64, usize)> = None;
        for (i, (k, v)) in required.iter().enumerate() {
            let n = capped_label_count(c, rkey, ns, k, v, cap)?;
            if best.is_none_or(|(b, _)| n < b) {
                best = Some((n, i));
            }
        }
        match best {
            Some((n, i)) if n < cap || cap >= i64::MAX / 16 => {
                return Ok(required.into_iter().nth(i));
            }
            _ => cap *= 16,
        }
    }
}

/// How many objects of `rkey` (in `ns`) carry label `k=v`, counting no further than `cap`.
fn capped_label_count(
    c: &Connection,
    rkey: &str,
    ns: Option<&str>,
    k: &str,
    v: &str,
    cap: i64,
) -> Result<i64, StoreError> {
    Ok(match ns {
        Some(ns) => c
            .prepare_cached(
                "SELECT count(*) FROM (SELECT 1 FROM labels
                 WHERE rkey=?1 AND k=?2 AND v=?3 AND ns=?4 LIMIT ?5)",
            )?
            .query_row(params![rkey, k, v, ns, cap], |r| r.get(0))?,
        None => c
            .prepare_cached(
                "SELECT count(*) FROM (SELECT 1 FROM labels WHERE rkey=?1 AND k=?2 AND v=?3 LIMIT ?4)",
            )?
            .query_row(params![rkey, k, v, cap], |r| r.get(0))?,
    })
}

/// `metadata.labels` as (key, value) pairs; non-string values are not labels.
fn labels_of(v: &Value) -> std::collections::BTreeMap<String, String> {
    v.pointer("/metadata/labels")
        .and_then(|l| l.as_object())
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_string())))
                .collect()
        })
        .unwrap_or_default()
}

fn insert_label(c: &Connection, key: &ObjKey, k: &str, v: &str) -> Result<(), StoreError> {
    c.prepare_cached(
        "INSERT OR IGNORE INTO labels (rkey, k, v, ns, name) VALUES (?1,?2,?3,?4,?5)",
    )?
    .execute(params![key.rkey, k, v, key.ns, key.name])?;
    Ok(())
}

/// A database written before the label index existed gets it filled once, from the
/// stored objects, before anything is served.
fn index_labels_of_older_database(conn: &mut Connection) -> Result<(), StoreError> {
    let done: Option<i64> = conn
        .query_row("SELECT v FROM meta WHERE k='labels_indexed'", [], |r| {
            r.get(0)
        })
        .optional()?;
    if done.is_some() {
        return Ok(());
    }
    let tx = conn.transaction()?;
    {
        let mut stmt = tx.prepare("SELECT rkey, ns, name, data FROM objects")?;
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            let key = ObjKey {
                rkey: row.get(0)?,
                ns: row.get(1)?,
                name: row.get(2)?,
            };
            let data: String = row.get(3)?;
            for (k, v) in labels_of(&parse(&data)?) {
                insert_label(&tx, &key, &k, &v)?;
            }
        }
    }
    tx.execute("INSERT INTO meta (k, v) VALUES ('labels_indexed', 1)", [])?;
    tx.commit()?;
    Ok(())
}

fn uid_of(v: &Value) -> String {
    v.pointer("/metadata/uid")
        .and_then(|x| x.as_str())
        .unwrap_or("")
        .to_string()
}

struct Applier<'a> {
    tx: &'a rusqlite::Transaction<'a>,
    next_rv: u64,
    events: Vec<Event>,
}

impl Applier<'_> {
    fn append(
        &mut self,
        kind: EventType,
        key: &ObjKey,
        obj: &mut Value,
    ) -> Result<u64, StoreError> {
        let rv = self.next_rv + 1;
        set_rv(obj, rv);
        let data = serde_json::to_string(obj).map_err(|e| StoreError::Db(e.to_string()))?;
        self.tx
            .prepare_cached(
                "INSERT INTO events (id, rkey, ns, name, type, data) VALUES (?1,?2,?3,?4,?5,?6)",
            )?
            .execute(params![
                rv as i64,
                key.rkey,
                key.ns,
                key.name,
                kind.code(),
                data
            ])?;
        if kind != EventType::Deleted {
            self.tx
                .prepare_cached(
                    "INSERT INTO objects (rkey, ns, name, rv, uid, data) VALUES (?1,?2,?3,?4,?5,?6)
                     ON CONFLICT(rkey, ns, name) DO UPDATE SET rv=excluded.rv, uid=excluded.uid, data=excluded.data",
                )?
                .execute(params![key.rkey, key.ns, key.name, rv as i64, uid_of(obj), data])?;
        } else {
            self.tx
                .prepare_cached("DELETE FROM objects WHERE rkey=?1 AND ns=?2 AND name=?3")?
                .execute(params![key.rkey, key.ns, key.name])?;
        }
        self.next_rv = rv;
        self.events.push(Event {
            rv,
            kind,
            key: key.clone(),
            object: Arc::new(obj.clone()),
            line: std::sync::OnceLock::new(),
            prev: None,
        });
        Ok(rv)
    }

    /// Keeps the owner-reference and label indexes of `key` in step with a write that
    /// changes the object from `old` to `new` (`None`: absent).
    fn set_indexes(
        &mut self,
        key: &ObjKey,
        old: Option<&Value>,
        new: Option<&Value>,
    ) -> Result<(), StoreError> {
        self.set_owners(key, old, new)?;
        self.set_labels(key, old, new)
    }

    fn set_labels(
        &mut self,
        key: &ObjKey,
        old: Option<&Value>,
        new: Option<&Value>,
    ) -> Result<(), StoreError> {
        let old_l = old.map(labels_of).unwrap_or_default();
        let new_l = new.map(labels_of).unwrap_or_default();
        if old_l == new_l {
            return Ok(());
        }
        for (k, v) in old_l.iter().filter(|(k, v)| new_l.get(*k) != Some(*v)) {
            self.tx
                .prepare_cached(
                    "DELETE FROM labels WHERE rkey=?1 AND k=?2 AND v=?3 AND ns=?4 AND name=?5",
                )?
                .execute(params![key.rkey, k, v, key.ns, key.name])?;
        }
        for (k, v) in new_l.iter().filter(|(k, v)| old_l.get(*k) != Some(*v)) {
            insert_label(self.tx, key, k, v)?;
        }
        Ok(())
    }

    fn set_owners(
        &mut self,
        key: &ObjKey,
        old: Option<&Value>,
        new: Option<&Value>,
    ) -> Result<(), StoreError> {
        let old_o = old.map(owner_uids).unwrap_or_default();
        let new_o = new.map(owner_uids).unwrap_or_default();
        if old_o == new_o {
            return Ok(());
        }
        for u in &old_o {
            self.tx
                .prepare_cached(
                    "DELETE FROM owner_refs WHERE owner_uid=?1 AND rkey=?2 AND ns=?3 AND name=?4",
                )?
                .execute(params![u, key.rkey, key.ns, key.name])?;
        }
        for u in &new_o {
            self.tx
                .prepare_cached("INSERT OR IGNORE INTO owner_refs (owner_uid, rkey, ns, name) VALUES (?1,?2,?3,?4)")?
                .execute(params![u, key.rkey, key.ns, key.name])?;
        }
        Ok(())
    }

    fn current(&self, key: &ObjKey) -> Result<Option<Value>, StoreError> {
        let s: Option<String> = self
            .tx
            .prepare_cached("SELECT data FROM objects WHERE rkey=?1 AND ns=?2 AND name=?3")?
            .query_row(params![key.rkey, key.ns, key.name], |r| r.get(0))
            .optional()?;
        s.map(|s| parse(&s)).transpose()
    }

    fn apply(&mut self, op: WriteOp) -> Result<WriteOutcome, StoreError> {
        match op {
            WriteOp::Create { key, mut obj } => {
                if self.current(&key)?.is_some() {
                    return Err(StoreError::AlreadyExists);
                }
                self.append(EventType::Added, &key, &mut obj)?;
                self.set_indexes(&key, None, Some(&obj))?;
                Ok(WriteOutcome::Stored(obj))
            }
            WriteOp::Update {
                key,
                mut obj,
                expected_rv,
            } => {
                let cur = self.current(&key)?.ok_or(StoreError::NotFound)?;
                let cur_rv = obj_rv(&cur);
                if cur_rv != expected_rv {
                    return Err(StoreError::Conflict { current: cur_rv });
                }
                // Namespaces finish through the namespace cleanup (spec.finalizers), not here.
                let finalized = key.rkey != "/namespaces"
                    && obj
                        .pointer("/metadata/deletionTimestamp")
                        .is_some_and(|v| !v.is_null())
                    && obj
                        .pointer("/metadata/finalizers")
                        .and_then(|f| f.as_array())
                        .is_none_or(|a| a.is_empty());
                if finalized {
                    self.append(EventType::Deleted, &key, &mut obj)?;
                    self.set_indexes(&key, Some(&cur), None)?;
                    Ok(WriteOutcome::Deleted(obj))
                } else {
                    self.append(EventType::Modified, &key, &mut obj)?;
                    if let Some(e) = self.events.last_mut() {
                        e.prev = Some(Arc::new(cur.clone()));
                    }
                    self.set_indexes(&key, Some(&cur), Some(&obj))?;
                    Ok(WriteOutcome::Stored(obj))
                }
            }
            WriteOp::Delete {
                key,
                expected_rv,
                expected_uid,
            } => {
                let mut cur = self.current(&key)?.ok_or(StoreError::NotFound)?;
                if let Some(rv) = expected_rv {
                    let cur_rv = obj_rv(&cur);
                    if cur_rv != rv {
                        return Err(StoreError::Conflict { current: cur_rv });
                    }
                }
                if let Some(uid) = expected_uid {
                    let cu = uid_of(&cur);
                    if cu != uid {
                        return Err(StoreError::UidMismatch { current: cu });
                    }
                }
                let before = cur.clone();
                self.append(EventType::Deleted, &key, &mut cur)?;
                self.set_indexes(&key, Some(&before), None)?;
                Ok(WriteOutcome::Deleted(cur))
            }
            WriteOp::DeleteResource { rkey } => {
                let rows: Vec<(String, String, String)> = {
                    let mut stmt = self
                        .tx
                        .prepare_cached("SELECT ns, name, data FROM objects WHERE rkey=?1")?;
                    stmt.query_map(params![rkey], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                        .collect::<Result<Vec<_>, _>>()?
                };
                let n = rows.len();
                for (ns, name, data) in rows {
                    let key = ObjKey {
                        rkey: rkey.clone(),
                        ns,
                        name,
                    };
                    let mut obj = parse(&data)?;
                    let before = obj.clone();
                    self.append(EventType::Deleted, &key, &mut obj)?;
                    self.set_indexes(&key, Some(&before), None)?;
                }
                Ok(WriteOutcome::Removed(n))
            }
        }
    }
}

type Reply = oneshot::Sender<Result<WriteOutcome, StoreError>>;

fn writer_loop(
    mut conn: Connection,
    rx: std::sync::mpsc::Receiver<Cmd>,
    sink: EventSink,
    head: Arc<std::sync::atomic::AtomicU64>,
) {
    let mut queued: VecDeque<Cmd> = VecDeque::new();
    loop {
        let first = match queued.pop_front() {
            Some(c) => c,
            None => match rx.recv() {
                Ok(c) => c,
                Err(_) => return,
            },
        };
        // Compaction and maintenance run in steps; between two steps the writes that
        // arrived meanwhile are committed, so a long compaction never stalls the API.
        match first {
            Cmd::Compact(target, reply) => {
                let mut serve = |conn: &mut Connection| {
                    if let Some(batch) = next_batch(&rx, &mut queued) {
                        run_batch(conn, batch, &sink, &head);
                    }
                };
                let _ = reply.send(compact(&mut conn, target, &mut serve));
            }
            Cmd::Maintain(reply) => {
                let mut serve = |conn: &mut Connection| {
                    if let Some(batch) = next_batch(&rx, &mut queued) {
                        run_batch(conn, batch, &sink, &head);
                    }
                };
                let _ = reply.send(maintain(&mut conn, &mut serve));
            }
            Cmd::Write(op, reply) => {
                let mut batch = vec![(op, reply)];
                if let Some(more) = next_batch(&rx, &mut queued) {
                    batch.extend(more);
                }
                run_batch(&mut conn, batch, &sink, &head);
            }
        }
    }
}

/// The writes waiting in the channel, up to a batch; any other command met on the way
/// is queued for later, in order.
fn next_batch(
    rx: &std::sync::mpsc::Receiver<Cmd>,
    queued: &mut VecDeque<Cmd>,
) -> Option<Vec<(WriteOp, Reply)>> {
    const MAX_BATCH: usize = 1024;
    let mut batch: Vec<(WriteOp, Reply)> = Vec::new();
    while batch.len() < MAX_BATCH {
        match rx.try_recv() {
            Ok(Cmd::Write(op, reply)) => batch.push((op, reply)),
            Ok(other) => queued.push_back(other),
            Err(_) => break,
        }
    }
    (!batch.is_empty()).then_some(batch)
}

fn run_batch(
    conn: &mut Connection,
    batch: Vec<(WriteOp, Reply)>,
    sink: &EventSink,
    head: &std::sync::atomic::AtomicU64,
) {
    let start_rv = match read_head(conn) {
        Ok(v) => v,
        Err(e) => {
            for (_, r) in batch {
                let _ = r.send(Err(StoreError::Db(e.to_string())));
            }
            return;
        }
    };
    let tx = match conn.transaction() {
        Ok(t) => t,
        Err(e) => {
            for (_, r) in batch {
                let _ = r.send(Err(StoreError::Db(e.to_string())));
            }
            return;
        }
    };
    let mut results = Vec::with_capacity(batch.len());
    let mut replies = Vec::with_capacity(batch.len());
    let mut all_events = Vec::new();
    let mut next_rv = start_rv;
    for (op, reply) in batch {
        replies.push(reply);
        let r = (|| -> Result<(WriteOutcome, Vec<Event>, u64), StoreError> {
            tx.prepare_cached("SAVEPOINT op")?.execute([])?;
            let mut ap = Applier {
                tx: &tx,
                next_rv,
                events: Vec::new(),
            };
            match ap.apply(op) {
                Ok(out) => {
                    tx.prepare_cached("RELEASE op")?.execute([])?;
                    Ok((out, ap.events, ap.next_rv))
                }
                Err(e) => {
                    tx.execute_batch("ROLLBACK TO op; RELEASE op")?;
                    Err(e)
                }
            }
        })();
        match r {
            Ok((out, evs, nrv)) => {
                next_rv = nrv;
                all_events.extend(evs);
                results.push(Ok(out));
            }
            Err(e) => results.push(Err(e)),
        }
    }
    if let Err(e) = tx.commit() {
        for r in replies {
            let _ = r.send(Err(StoreError::Db(format!("commit failed: {e}"))));
        }
        return;
    }
    head.store(next_rv, std::sync::atomic::Ordering::SeqCst);
    // Events first: a caller that sees its write acknowledged finds every cache that
    // follows the sink (watch hub, webhook configurations, garbage collector) past it.
    if !all_events.is_empty() {
        sink(&all_events);
    }
    for (r, res) in replies.into_iter().zip(results) {
        let _ = r.send(res);
    }
}

/// Revisions deleted per compaction step, and free pages returned per vacuum step: each
/// step is one short transaction, and writes are served between steps.
const COMPACTION_STEP: usize = 2_000;

fn compact(
    conn: &mut Connection,
    target: u64,
    between: &mut dyn FnMut(&mut Connection),
) -> Result<u64, StoreError> {
    let head = read_head(conn)?;
    let cur = read_compacted(conn)?;
    let target = target.min(head);
    if target <= cur {
        return Ok(cur);
    }
    // Each object keeps its latest revision at or below the target (as etcd's compaction
    // keeps each key's latest version), so a list at any revision above the compaction
    // point can still tell how an object changed since looked then; an object whose
    // latest revision there is its deletion keeps nothing. What goes is listed once, into
    // temporary tables, then deleted in steps.
    conn.execute_batch(
        "CREATE TEMP TABLE IF NOT EXISTS compaction_keep (id INTEGER PRIMARY KEY);
         CREATE TEMP TABLE IF NOT EXISTS compaction_drop (id INTEGER PRIMARY KEY);
         DELETE FROM compaction_keep; DELETE FROM compaction_drop;",
    )?;
    conn.execute(
        "INSERT INTO compaction_keep (id)
         SELECT max(id) FROM events WHERE id<=?1 GROUP BY rkey, ns, name",
        params![target as i64],
    )?;
    conn.execute(
        "DELETE FROM compaction_keep WHERE id IN (SELECT id FROM events WHERE id<=?1 AND type=?2)",
        params![target as i64, EventType::Deleted.code()],
    )?;
    conn.execute(
        "INSERT INTO compaction_drop (id)
         SELECT id FROM events WHERE id<=?1 AND id NOT IN (SELECT id FROM compaction_keep)",
        params![target as i64],
    )?;
    // Step by step in revision order; the compaction point advances with each step, so
    // a watch from a revision already compacted gets its 410 at once.
    let mut after: i64 = 0;
    loop {
        let tx = conn.transaction()?;
        let last: Option<i64> = tx.query_row(
            "SELECT max(id) FROM (SELECT id FROM compaction_drop WHERE id>?1 ORDER BY id LIMIT ?2)",
            params![after, COMPACTION_STEP as i64],
            |r| r.get(0),
        )?;
        let point = match last {
            Some(last) => {
                tx.execute(
                    "DELETE FROM events WHERE id IN
                     (SELECT id FROM compaction_drop WHERE id>?1 AND id<=?2)",
                    params![after, last],
                )?;
                (last as u64).max(cur)
            }
            None => target,
        };
        tx.execute(
            "INSERT INTO meta (k, v) VALUES ('compacted', ?1) ON CONFLICT(k) DO UPDATE SET v=excluded.v",
            params![point as i64],
        )?;
        tx.commit()?;
        match last {
            Some(last) => after = last,
            None => break,
        }
        between(conn);
    }
    conn.execute_batch("DELETE FROM compaction_keep; DELETE FROM compaction_drop;")?;
    maintain(conn, between)?;
    Ok(target)
}

fn maintain(
    conn: &mut Connection,
    between: &mut dyn FnMut(&mut Connection),
) -> Result<(), StoreError> {
    // Free pages go back to the file system a step at a time, while each step frees some.
    let mut before = i64::MAX;
    loop {
        let free: i64 = conn.query_row("PRAGMA freelist_count", [], |r| r.get(0))?;
        if free == 0 || free >= before {
            break;
        }
        before = free;
        // The pragma frees one page per row stepped: run it to the end.
        let mut vacuum = conn.prepare(&format!("PRAGMA incremental_vacuum({COMPACTION_STEP})"))?;
        let mut steps = vacuum.raw_query();
        while steps.next()?.is_some() {}
        drop(steps);
        drop(vacuum);
        between(conn);
    }
    // A checkpoint that cannot finish (busy readers) is retried on the next tick.
    let _: (i64, i64, i64) = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?))
    })?;
    Ok(())
}

/// Bounded per-resource broadcast of committed events (watch fan-out).
/// A receiver that falls behind by more than the capacity sees `Lagged`; the watch
/// handler then resumes it from the revision log.
pub struct Hub {
    capacity: usize,
    chans: Mutex<HashMap<String, broadcast::Sender<Arc<Event>>>>,
    published: std::sync::atomic::AtomicU64,
}

impl Hub {
    /// A hub whose per-resource channels hold `capacity` events.
    pub fn new(capacity: usize) -> Hub {
        Hub {
            capacity,
            chans: Mutex::new(HashMap::new()),
            published: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The resourceVersion of the last published event: every event up to it has been
    /// handed to the subscribers' queues.
    pub fn published(&self) -> u64 {
        self.published.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Subscribes to resource `rkey`.
    pub fn subscribe(&self, rkey: &str) -> broadcast::Receiver<Arc<Event>> {
        let mut m = self.chans.lock().unwrap();
        m.entry(rkey.to_string())
            .or_insert_with(|| broadcast::channel(self.capacity).0)
            .subscribe()
    }

    /// Publishes committed events in order.
    pub fn publish(&self, events: &[Event]) {
        let m = self.chans.lock().unwrap();
        for e in events {
            if let Some(tx) = m.get(&e.key.rkey) {
                let _ = tx.send(Arc::new(e.clone()));
            }
        }
        if let Some(last) = events.last() {
            self.published
                .store(last.rv, std::sync::atomic::Ordering::SeqCst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(n: &str) -> ObjKey {
        ObjKey {
            rkey: "/configmaps".into(),
            ns: "default".into(),
            name: n.into(),
        }
    }

    /// Names listed in `default` for the required labels, `limit` per page (0: one page).
    async fn names(store: &Store, required: &[(&str, &str)], limit: usize) -> Vec<String> {
        let required: Vec<(String, String)> = required
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut out = Vec::new();
        let mut after = None;
        loop {
            let page = store
                .list_raw(
                    ListRange::all("/configmaps")
                        .in_namespace(Some("default".into()))
                        .page(after, limit)
                        .labelled(required.clone()),
                    Box::new(|_| true),
                )
                .await
                .unwrap();
            for s in &page.items {
                out.push(
                    parse(s).unwrap()["metadata"]["name"]
                        .as_str()
                        .unwrap()
                        .to_string(),
                );
            }
            match page.more_after {
                Some(next) => after = Some(next),
                None => return out,
            }
        }
    }

    fn labelled(name: &str, labels: Value) -> Value {
        json!({"metadata": {"name": name, "uid": name, "labels": labels}})
    }

    #[tokio::test]
    async fn the_rarest_label_is_found_past_the_first_count_cap() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        let store = Store::open(&path, Arc::new(|_: &[Event]| {})).unwrap();
        // `all` on 300 objects, `most` on the first 200, `few` on 3: past the first cap
        // (64) both common labels tie, so only a grown cap tells `most` from `all`.
        for i in 0..300 {
            let mut labels = json!({"all": "x"});
            if i < 200 {
                labels["most"] = json!("y");
            }
            if i < 3 {
                labels["few"] = json!("z");
            }
            let name = format!("cm-{i}");
            let obj = labelled(&name, labels);
            store
                .write(WriteOp::Create {
                    key: key(&name),
                    obj,
                })
                .await
                .unwrap();
        }
        let conn = open_conn(&path).unwrap();
        let rarest = |required: &[(&str, &str)]| {
            let required = required
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            rarest_label(&conn, "/configmaps", Some("default"), required)
                .unwrap()
                .map(|(k, _)| k)
        };
        assert_eq!(
            rarest(&[("all", "x"), ("few", "z"), ("most", "y")]).as_deref(),
            Some("few")
        );
        assert_eq!(
            rarest(&[("all", "x"), ("most", "y")]).as_deref(),
            Some("most")
        );
        assert_eq!(
            rarest(&[("most", "y"), ("all", "x")]).as_deref(),
            Some("most")
        );
        assert_eq!(
            rarest(&[("all", "x"), ("none", "n")]).as_deref(),
            Some("none")
        );
        assert_eq!(rarest(&[]), None);
        assert_eq!(
            names(&store, &[("all", "x"), ("few", "z")], 0).await,
            ["cm-0", "cm-1", "cm-2"]
        );
    }

    #[tokio::test]
    async fn lists_by_label_read_the_label_index_through_writes_pages_and_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        let store = Store::open(&path, Arc::new(|_: &[Event]| {})).unwrap();
        for i in 0..7 {
            let team = if i % 2 == 0 { "a" } else { "b" };
            let obj = labelled(&format!("cm-{i}"), json!({"team": team, "app": "web"}));
            store
                .write(WriteOp::Create {
                    key: key(&format!("cm-{i}")),
                    obj,
                })
                .await
                .unwrap();
        }
        let team_a = ["cm-0", "cm-2", "cm-4", "cm-6"];
        assert_eq!(names(&store, &[("team", "a")], 0).await, team_a);
        // The rarer label narrows; pages of 3 continue where the last one ended.
        assert_eq!(
            names(&store, &[("app", "web"), ("team", "a")], 3).await,
            team_a
        );
        assert!(names(&store, &[("team", "c")], 0).await.is_empty());

        // A label that changes or goes away leaves the index with it.
        let cur = store.get(key("cm-0")).await.unwrap().unwrap();
        let mut obj = labelled("cm-0", json!({"team": "b", "app": "web"}));
        obj["metadata"]["resourceVersion"] = cur["metadata"]["resourceVersion"].clone();
        store
            .write(WriteOp::Update {
                key: key("cm-0"),
                obj,
                expected_rv: obj_rv(&cur),
            })
            .await
            .unwrap();
        let cur = store.get(key("cm-2")).await.unwrap().unwrap();
        store
            .write(WriteOp::Delete {
                key: key("cm-2"),
                expected_rv: Some(obj_rv(&cur)),
                expected_uid: None,
            })
            .await
            .unwrap();
        assert_eq!(names(&store, &[("team", "a")], 0).await, ["cm-4", "cm-6"]);
        assert_eq!(
            names(&store, &[("team", "b")], 2).await,
            ["cm-0", "cm-1", "cm-3", "cm-5"]
        );
        drop(store);

        // A database from before the index: it is filled from the objects on open.
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("DELETE FROM labels; DELETE FROM meta WHERE k='labels_indexed';")
            .unwrap();
        drop(conn);
        let store = Store::open(&path, Arc::new(|_: &[Event]| {})).unwrap();
        assert_eq!(names(&store, &[("team", "a")], 0).await, ["cm-4", "cm-6"]);
        assert_eq!(names(&store, &[("app", "web")], 0).await.len(), 6);
    }

    #[test]
    fn compaction_deletes_in_steps_and_serves_writes_between_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        drop(Store::open(&path, Arc::new(|_: &[Event]| {})).unwrap());
        // One object written 3 steps and a bit over: every revision but its last goes.
        let revisions = 3 * COMPACTION_STEP as i64 + 5;
        let mut conn = open_conn(&path).unwrap();
        {
            let tx = conn.transaction().unwrap();
            for id in 1..=revisions {
                let kind = if id == 1 {
                    EventType::Added
                } else {
                    EventType::Modified
                };
                tx.execute(
                    "INSERT INTO events (id, rkey, ns, name, type, data) VALUES (?1,'/configmaps','default','a',?2,'{}')",
                    params![id, kind.code()],
                )
                .unwrap();
            }
            tx.commit().unwrap();
        }
        let mut steps = Vec::new();
        let target = compact(&mut conn, revisions as u64, &mut |c| {
            steps.push(read_compacted(c).unwrap());
        })
        .unwrap();
        assert_eq!(target, revisions as u64);
        // Writes are served after each step but the last, and the compaction point moves
        // forward with each step.
        assert!(steps.len() >= 3, "{steps:?}");
        assert!(steps.windows(2).all(|w| w[0] < w[1]), "{steps:?}");
        assert_eq!(steps[0], COMPACTION_STEP as u64, "{steps:?}");
        let left: Vec<i64> = conn
            .prepare("SELECT id FROM events")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(left, [revisions]);
        assert_eq!(read_compacted(&conn).unwrap(), revisions as u64);
    }

    #[tokio::test]
    async fn revisions_are_monotonic_across_reopen_and_compaction() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db.sqlite");
        let store = Store::open(&path, Arc::new(|_: &[Event]| {})).unwrap();
        let obj = json!({"metadata": {"name": "a", "uid": "u1"}});
        let WriteOutcome::Stored(a) = store
            .write(WriteOp::Create {
                key: key("a"),
                obj: obj.clone(),
            })
            .await
            .unwrap()
        else {
            panic!()
        };
        assert_eq!(obj_rv(&a), 1);
        let err = store
            .write(WriteOp::Create {
                key: key("a"),
                obj: obj.clone(),
            })
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::AlreadyExists));
        let err = store
            .write(WriteOp::Update {
                key: key("a"),
                obj: obj.clone(),
                expected_rv: 7,
            })
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::Conflict { current: 1 }));
        store
            .write(WriteOp::Delete {
                key: key("a"),
                expected_rv: None,
                expected_uid: None,
            })
            .await
            .unwrap();
        assert_eq!(store.compact(2).await.unwrap(), 2);
        let (evs, compacted) = store
            .events_since("/configmaps".into(), 0, 10, 100)
            .await
            .unwrap();
        assert!(evs.is_empty());
        assert_eq!(compacted, 2);
        drop(store);
        let store = Store::open(&path, Arc::new(|_: &[Event]| {})).unwrap();
        let WriteOutcome::Stored(b) = store
            .write(WriteOp::Create {
                key: key("b"),
                obj: json!({"metadata": {"name": "b"}}),
            })
            .await
            .unwrap()
        else {
            panic!()
        };
        assert_eq!(obj_rv(&b), 3);
        let l = store
            .list(ListRange::all("/configmaps"), Box::new(|_| true))
            .await
            .unwrap();
        assert_eq!(l.items.len(), 1);
        assert_eq!(l.rv, 3);
    }
}
