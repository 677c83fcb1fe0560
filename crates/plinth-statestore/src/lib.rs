//! State store writers for Plinth.
//!
//! This crate is the library the WorkPlacement, Destination and state-store controllers call to
//! put documents into a Kratix state store. It knows nothing about
//! Kubernetes: callers translate `GitStateStore` / `BucketStateStore` objects and their Secrets
//! into a [`StoreConfig`] and WorkPlacements into [`WriteRequest`]s (the [`layout`] module gives
//! every path and canary document Kratix uses).
//!
//! * [`layout`] — the Kratix directory layout, byte for byte, and path safety.
//! * [`git`] — the Git writer: one worker per (repository, branch), batching writes that arrive
//!   close together into one commit, retrying rejected pushes after a re-sync.
//! * [`reader`] — readers (list with change detection, get) for every backend, used by the
//!   platform's HealthSource.
//! * [`bucket`] — the bucket writer (S3-compatible, Azure Blob, GCS, local directory) on
//!   `object_store`, writing only changed objects.
//!
//! ```no_run
//! # async fn demo() -> Result<(), plinth_statestore::StoreError> {
//! use plinth_statestore::*;
//! let store = StateStore::open(StoreConfig::Git(GitConfig::new(
//!     "file:///srv/state.git", "main", "/var/lib/plinth/clones/state"))).await?;
//! store.validate().await?;
//! let out = store.write(WriteRequest {
//!     name: "wp-a".into(),
//!     ops: vec![WriteOp::ReplaceDir {
//!         dir: "dev/resources/default/redis/r1/configure/5058f".into(),
//!         files: vec![("redis.yaml".into(), b"kind: Redis\n".to_vec())],
//!     }],
//! }).await?;
//! println!("versionID {}", out.version_id);
//! # Ok(()) }
//! ```

#![deny(missing_docs)]

pub mod batching;
pub mod bucket;
mod error;
pub mod git;
pub mod github_app;
pub mod health;
pub mod layout;
pub mod reader;
mod ssh;
pub mod stream;

use std::sync::Arc;

/// Connect timeout and per-call overall timeout of every network call a state store
/// makes, in milliseconds (Git: libgit2's connect timeout and its timeout for each read
/// or write on the socket; buckets: the HTTP client's connect and request timeouts).
static NETWORK_TIMEOUTS_MS: (std::sync::atomic::AtomicU64, std::sync::atomic::AtomicU64) = (
    std::sync::atomic::AtomicU64::new(10_000),
    std::sync::atomic::AtomicU64::new(60_000),
);

/// Sets the connect timeout and the overall timeout of every network call state stores
/// make: Git fetches and pushes (connect, then each read or write on the connection, so a
/// server that accepts and never answers frees the writer after `overall`) and bucket
/// requests (connect, then the whole request). Defaults: 10 s and 60 s.
///
/// Call it before the first store is opened: libgit2 reads its copy once, when the first
/// Git store is opened; bucket stores opened later use the new values.
pub fn set_network_timeouts(connect: std::time::Duration, overall: std::time::Duration) {
    use std::sync::atomic::Ordering;
    NETWORK_TIMEOUTS_MS
        .0
        .store(connect.as_millis().max(1) as u64, Ordering::SeqCst);
    NETWORK_TIMEOUTS_MS
        .1
        .store(overall.as_millis().max(1) as u64, Ordering::SeqCst);
}

/// The `(connect, overall)` network timeouts (see [`set_network_timeouts`]).
pub fn network_timeouts() -> (std::time::Duration, std::time::Duration) {
    use std::sync::atomic::Ordering;
    (
        std::time::Duration::from_millis(NETWORK_TIMEOUTS_MS.0.load(Ordering::SeqCst)),
        std::time::Duration::from_millis(NETWORK_TIMEOUTS_MS.1.load(Ordering::SeqCst)),
    )
}

/// Makes ring rustls' process-wide crypto provider, unless one is installed already.
///
/// Every HTTPS client in Plinth (bucket stores, GitHub App tokens, webhook calls,
/// PromiseRelease fetches) is built on the provider installed for the process, and fails
/// to build without one; ring is the only provider compiled in. Cheap and idempotent:
/// called where each client is built.
///
/// ```
/// plinth_statestore::install_tls_provider();
/// assert!(rustls::crypto::CryptoProvider::get_default().is_some());
/// ```
pub fn install_tls_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Another thread may install one first; either is ring.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

pub use bucket::{BucketAuth, BucketConfig, BucketProvider, LocalDirConfig};
pub use error::{StoreError, stable_message};
pub use git::{GitAuth, GitConfig, redact_url};
pub use layout::PathError;
pub use reader::{GitReader, ListedObject, Listing, ObjectReader, RecordReader, open_reader};
pub use stream::{
    NatsConfig, RedisConfig, StreamConfig, StreamConsumer, StreamMessage, StreamSink,
};

/// Which state store to open and how to reach it.
///
/// Built by the state-store controller from a `GitStateStore` / `BucketStateStore` and its
/// Secret.
#[derive(Clone, Debug)]
pub enum StoreConfig {
    /// A Git repository (`GitStateStore`).
    Git(GitConfig),
    /// An object-storage bucket (`BucketStateStore`; S3-compatible, Azure Blob or GCS).
    Bucket(BucketConfig),
    /// A directory on the local filesystem, laid out like a bucket (embedded mode).
    LocalDir(LocalDirConfig),
}

/// One change inside a [`WriteRequest`]. Every path is relative to the state store's `path`
/// prefix (the writer adds it) and is checked with [`layout::safe_join`] before
/// anything is written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteOp {
    /// Replace directory `dir` entirely: afterwards it holds exactly `files` (paths relative to
    /// `dir`). This is `nestedByMetadata`'s write (`git rm -r`;
    /// buckets list the directory and delete what is not rewritten).
    ReplaceDir {
        /// Directory, relative to the store prefix.
        dir: String,
        /// `(path inside dir, content)`.
        files: Vec<(String, Vec<u8>)>,
    },
    /// Create or overwrite one file.
    Put {
        /// File path, relative to the store prefix.
        path: String,
        /// The bytes to store.
        content: Vec<u8>,
    },
    /// Delete one file; a missing file is not an error.
    Delete {
        /// File path, relative to the store prefix.
        path: String,
    },
    /// Delete every file under a directory; a missing directory is not an error.
    DeleteDir {
        /// Directory, relative to the store prefix.
        dir: String,
    },
}

impl WriteOp {
    fn writes_content(&self) -> bool {
        match self {
            WriteOp::ReplaceDir { files, .. } => !files.is_empty(),
            WriteOp::Put { .. } => true,
            WriteOp::Delete { .. } | WriteOp::DeleteDir { .. } => false,
        }
    }
}

/// A set of changes made on behalf of one writer (a WorkPlacement, or `kratix-canary` for a
/// Destination's canary files). All of its ops land together or not at all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteRequest {
    /// Who the write is for; named in the Git commit message (`Update from: <name>`).
    pub name: String,
    /// The changes, applied in order.
    pub ops: Vec<WriteOp>,
}

/// Result of a successful write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WriteOutcome {
    /// Git: the commit SHA now at the head of the branch that contains this request's changes
    /// (the existing HEAD when nothing changed). Buckets: a SHA-256 over the keys and ETags this
    /// request covered (stable when the content is unchanged). Stored in WorkPlacement
    /// `status.versionID`.
    pub version_id: String,
    /// Whether this request changed anything in the store.
    pub changed: bool,
}

/// A [`WriteOp`] whose paths are repository/bucket-absolute: the store prefix applied and
/// each path checked. The writers take only these, made by [`resolve_ops`].
#[derive(Clone, Debug)]
pub(crate) struct ResolvedOp(pub(crate) WriteOp);

/// Applies the store prefix to every path of a request and checks each with
/// [`layout::safe_join`]; the first bad path fails the whole request.
pub(crate) fn resolve_ops(prefix: &str, ops: &[WriteOp]) -> Result<Vec<ResolvedOp>, StoreError> {
    let mut out = Vec::with_capacity(ops.len());
    for op in ops {
        out.push(ResolvedOp(match op {
            WriteOp::ReplaceDir { dir, files } => {
                let d = resolve_dir(prefix, dir)?;
                let mut fs = Vec::with_capacity(files.len());
                for (rel, content) in files {
                    let full = resolve_file(&d, rel)?;
                    fs.push((full, content.clone()));
                }
                WriteOp::ReplaceDir { dir: d, files: fs }
            }
            WriteOp::Put { path, content } => WriteOp::Put {
                path: resolve_file(prefix, path)?,
                content: content.clone(),
            },
            WriteOp::Delete { path } => WriteOp::Delete {
                path: resolve_file(prefix, path)?,
            },
            WriteOp::DeleteDir { dir } => WriteOp::DeleteDir {
                dir: resolve_dir(prefix, dir)?,
            },
        }));
    }
    Ok(out)
}

/// The file `path` under the store prefix, checked as [`resolve_ops`] checks a file.
pub(crate) fn resolve_file(prefix: &str, path: &str) -> Result<String, StoreError> {
    layout::safe_join_file(prefix, path).map_err(|e| path_escapes(path, e))
}

/// The directory `dir` under the store prefix, checked as [`resolve_ops`] checks one.
pub(crate) fn resolve_dir(prefix: &str, dir: &str) -> Result<String, StoreError> {
    layout::safe_join(prefix, dir).map_err(|e| path_escapes(dir, e))
}

fn path_escapes(path: &str, e: PathError) -> StoreError {
    StoreError::PathEscapes {
        path: path.to_string(),
        cause: e.to_string(),
    }
}

#[derive(Clone)]
enum Backend {
    Git(Arc<git::GitHandle>),
    Bucket(Arc<bucket::BucketWriter>),
}

/// An open state store: cheap to clone, safe to share between controllers and tasks.
///
/// Git stores share one worker per (repository, branch, credentials); writes from every clone
/// of this handle (and every other store on the same branch) are batched together. Dropping the
/// last handle stops the worker.
#[derive(Clone)]
pub struct StateStore {
    backend: Backend,
}

impl std::fmt::Debug for StateStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.backend {
            Backend::Git(g) => write!(f, "StateStore(git {})", g.describe()),
            Backend::Bucket(b) => write!(f, "StateStore(bucket {})", b.describe()),
        }
    }
}

impl StateStore {
    /// Opens a state store: for Git, checks the credentials locally (key decryption, knownHosts),
    /// starts or joins the branch's worker and fetches the branch into the work directory; for
    /// buckets, builds the client and checks that the bucket exists (Kratix's
    /// `InitRepository`).
    ///
    /// # Errors
    /// [`StoreError::InvalidConfig`], [`StoreError::WrongPassphrase`],
    /// [`StoreError::PassphraseRequired`], [`StoreError::InvalidKnownHosts`],
    /// [`StoreError::Unreachable`], [`StoreError::AuthFailed`], [`StoreError::UnknownHostKey`],
    /// [`StoreError::BranchMissing`], [`StoreError::RepositoryMissing`],
    /// [`StoreError::BucketMissing`], [`StoreError::InvalidGithubAppKey`],
    /// [`StoreError::GithubAppAuthFailed`], and others with the cause.
    pub async fn open(cfg: StoreConfig) -> Result<StateStore, StoreError> {
        let backend = match cfg {
            StoreConfig::Git(g) => Backend::Git(git::GitHandle::open(g).await?),
            StoreConfig::Bucket(b) => {
                Backend::Bucket(Arc::new(bucket::BucketWriter::open(b).await?))
            }
            StoreConfig::LocalDir(l) => {
                Backend::Bucket(Arc::new(bucket::BucketWriter::open_local(l).await?))
            }
        };
        Ok(StateStore { backend })
    }

    /// Checks that the credentials may write (`ValidatePermissions`):
    /// Git opens a push connection and checks the branch is advertised; buckets initiate and
    /// abort a multipart upload of `<path>/.kratix-write-permission-check`.
    ///
    /// # Errors
    /// [`StoreError::PermissionDenied`], [`StoreError::AuthFailed`], [`StoreError::BranchMissing`],
    /// [`StoreError::BucketMissing`], [`StoreError::Unreachable`], …
    pub async fn validate(&self) -> Result<(), StoreError> {
        match &self.backend {
            Backend::Git(g) => g.validate().await,
            Backend::Bucket(b) => b.validate().await,
        }
    }

    /// Writes one request. For Git the request is queued on the branch's worker and may share a
    /// commit with other requests that arrived within the batch window; the result is this
    /// request's own. Paths are validated first: a bad path fails with
    /// [`StoreError::PathEscapes`] and nothing of this request is written.
    ///
    /// # Errors
    /// [`StoreError::PathEscapes`] and any transport/permission error of the store.
    pub async fn write(&self, req: WriteRequest) -> Result<WriteOutcome, StoreError> {
        match &self.backend {
            Backend::Git(g) => g.write(req).await,
            Backend::Bucket(b) => b.write(req).await,
        }
    }

    /// Reads one file (path relative to the store prefix), e.g. a `none`-mode `.kratix` state
    /// file. Git reads the freshly fetched branch tip. `Ok(None)` when the file does not exist.
    ///
    /// # Errors
    /// [`StoreError::PathEscapes`], transport errors.
    pub async fn read(&self, path: &str) -> Result<Option<Vec<u8>>, StoreError> {
        match &self.backend {
            Backend::Git(g) => g.read(path).await,
            Backend::Bucket(b) => b.read(path).await,
        }
    }

    /// Reads a whole directory for a destination-side reader, detecting change cheaply: Git
    /// asks the remote for the branch head (`ls-remote`) and fetches only when it moved;
    /// buckets list the directory and compare keys and ETags. With `since` equal to the
    /// current version nothing else is transferred and `files` is `None`.
    ///
    /// # Errors
    /// [`StoreError::PathEscapes`], [`StoreError::BranchMissing`], [`StoreError::AuthFailed`],
    /// [`StoreError::Unreachable`], [`StoreError::BucketMissing`], transport errors.
    pub async fn snapshot(&self, dir: &str, since: Option<&str>) -> Result<Snapshot, StoreError> {
        match &self.backend {
            Backend::Git(g) => g.snapshot(dir, since).await,
            Backend::Bucket(b) => b.snapshot(dir, since).await,
        }
    }

    /// Lists every file under `dir` (recursively), as paths relative to the store prefix, sorted.
    /// A missing directory gives an empty list.
    ///
    /// # Errors
    /// [`StoreError::PathEscapes`], transport errors.
    pub async fn list(&self, dir: &str) -> Result<Vec<String>, StoreError> {
        match &self.backend {
            Backend::Git(g) => g.list(dir).await,
            Backend::Bucket(b) => b.list(dir).await,
        }
    }
}

/// What a reader sees of one directory of a store ([`StateStore::snapshot`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// Git: the branch tip's commit SHA. Buckets: a SHA-256 over the keys, ETags and sizes
    /// under the directory. Equal versions mean equal content.
    pub version: String,
    /// Every file under the directory as `(path relative to the store prefix, bytes)`,
    /// sorted by path; `None` when the version equals the one the caller already has.
    pub files: Option<Vec<(String, Vec<u8>)>>,
}

/// Strips a store prefix from a full path (the inverse of the writer's prefixing).
pub(crate) fn strip_prefix(prefix: &str, full: &str) -> String {
    if prefix.is_empty() {
        return full.to_string();
    }
    full.strip_prefix(prefix)
        .and_then(|r| r.strip_prefix('/'))
        .unwrap_or(full)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_prefixes_and_refuses_escapes() {
        let ops = vec![
            WriteOp::ReplaceDir {
                dir: "dev/resources/x/".into(),
                files: vec![("a/b.yaml".into(), b"x".to_vec())],
            },
            WriteOp::Put {
                path: "dev//c.yaml".into(),
                content: vec![],
            },
        ];
        let r = resolve_ops("/platform/", &ops).unwrap();
        assert!(matches!(
            resolve_ops(
                "p",
                &[WriteOp::Delete {
                    path: "/abs".into()
                }]
            ),
            Err(StoreError::PathEscapes { .. })
        ));
        match &r[0].0 {
            WriteOp::ReplaceDir { dir, files } => {
                assert_eq!(dir, "platform/dev/resources/x");
                assert_eq!(files[0].0, "platform/dev/resources/x/a/b.yaml");
            }
            other => panic!("{other:?}"),
        }
        let bad = vec![WriteOp::ReplaceDir {
            dir: "dev".into(),
            files: vec![("../../etc/x".into(), vec![])],
        }];
        match resolve_ops("p", &bad) {
            Err(StoreError::PathEscapes { path, .. }) => assert_eq!(path, "../../etc/x"),
            other => panic!("{other:?}"),
        }
        assert_eq!(strip_prefix("platform", "platform/a/b"), "a/b");
        assert_eq!(strip_prefix("", "a/b"), "a/b");
    }
}
