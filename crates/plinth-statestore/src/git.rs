//! The Git writer (`GitStateStore`).
//!
//! One worker thread per (repository URL, branch, credentials) owns a disposable local clone in
//! the caller's work directory and a queue of requests. For each batch it:
//!
//! 1. fetches the branch (`+refs/heads/<b>:refs/remotes/origin/<b>`, pruning, depth 1 except
//!    over `file://`) — the equivalent of
//!    Kratix's fetch + `reset --hard` + `clean -ffdx`: the clone is bare and every batch starts
//!    from the freshly fetched tip, so no local state survives between batches;
//! 2. applies every request queued within the batch window to an in-memory index built from
//!    that tip. The window adapts to how writes arrive ([`crate::batching`]): a lone write
//!    waits one window (default 200 ms), a burst closes one window after its last write, a
//!    trickle of writes keeps filling the batch up to a bounded worst-case latency
//!    ([`crate::batching::MAX_LATENCY_FACTOR`] windows), and a batch holds at most
//!    `max_batch` requests. Writes that trickle in from many pipelines finishing one after
//!    another thus share a commit;
//! 3. makes **no commit** when the resulting tree equals the tip's tree (every request gets the
//!    tip as its versionID), else one commit "Update from: wp-a, wp-b (+N more)" authored by
//!    `gitAuthor` (default `kratix`);
//! 4. pushes (non-force); a rejected push (someone else pushed) re-fetches, re-applies the batch
//!    and retries, up to `max_push_attempts`.
//!
//! Each request gets its own result back. Transports: `file://` (and plain paths), `git://`,
//! `https://` (basic auth / token; TLS verification on unless `insecure_skip_tls_verify`),
//! `http://` (only with `insecure_skip_tls_verify`), SSH (`ssh://user@host:port/path` and
//! scp-like `user@host:path`) with `knownHosts` checking and passphrase-protected keys.
//! GitHub App credentials (`authMethod: githubApp`) are exchanged for an installation token
//! on the worker thread, cached and refreshed before expiry (see [`crate::github_app`]).
//! libgit2 is blocking, so it only ever runs on the worker threads.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Condvar, LazyLock, Mutex, Once, Weak};
use std::time::{Duration, Instant};

use git2::{
    AutotagOption, CertificateCheckStatus, Cred, CredentialType, Direction, ErrorClass, ErrorCode,
    FetchOptions, FetchPrune, Index, IndexEntry, IndexTime, Oid, PushOptions, RemoteCallbacks,
    Repository, RepositoryInitOptions,
};
use sha2::Digest;
use tokio::sync::oneshot;

use crate::github_app::{AppTokenSource, GITHUB_APP_USERNAME};
use crate::ssh::{self, KnownHostsDb, PreparedKey, SshTarget};
use crate::{
    ResolvedOp, StoreError, WriteOp, WriteOutcome, WriteRequest, layout, resolve_dir, resolve_file,
    resolve_ops,
};

/// Default author name for commits (`gitAuthor` default `{name: kratix}`).
pub const DEFAULT_AUTHOR_NAME: &str = "kratix";
/// Default batch window.
pub const DEFAULT_BATCH_WINDOW: Duration = Duration::from_millis(200);
/// Default maximum number of requests in one commit.
pub const DEFAULT_MAX_BATCH: usize = 500;
/// Default number of push attempts before a batch fails with [`StoreError::PushRejected`].
pub const DEFAULT_MAX_PUSH_ATTEMPTS: u32 = 5;

/// Credentials for a Git state store, from the store's Secret.
#[derive(Clone, PartialEq, Eq)]
pub enum GitAuth {
    /// No credentials (`file://`, `git://`, public HTTP).
    None,
    /// `authMethod: basicAuth`: Secret keys `username`, `password` (a token works as password).
    Basic {
        /// User name.
        username: String,
        /// Password or token. Never logged.
        password: String,
    },
    /// `authMethod: ssh`: Secret keys `sshPrivateKey`, `knownHosts` and, Plinth's addition,
    /// `passphrase`. The key and passphrase stay in memory only.
    Ssh {
        /// PEM / OpenSSH private key text.
        private_key: String,
        /// Passphrase for an encrypted key.
        passphrase: Option<String>,
        /// OpenSSH `known_hosts` text; the server's host key must match an entry.
        known_hosts: String,
    },
    /// `authMethod: githubApp`: Secret keys `appID`, `installationID`, `privateKey` and,
    /// Plinth's addition, `apiURL`. An RS256 JWT signed with the key is
    /// exchanged at `POST {api_url}/app/installations/{installation_id}/access_tokens` for an
    /// installation token, used as basic auth `x-access-token:<token>` over HTTPS; the token is
    /// cached and replaced when less than 5 minutes of it are left. The key and tokens stay in
    /// memory only and are never logged.
    GithubApp {
        /// The App's ID (JWT `iss`).
        app_id: String,
        /// The installation's numeric ID.
        installation_id: String,
        /// The App's RSA private key, PEM (`BEGIN RSA PRIVATE KEY` or `BEGIN PRIVATE KEY`).
        private_key_pem: String,
        /// API base, e.g. [`crate::github_app::DEFAULT_GITHUB_API_URL`] or a GitHub Enterprise
        /// Server's `https://<host>/api/v3`. Empty means the default. `http://` is accepted
        /// only when the store is marked insecure.
        api_url: String,
    },
}

impl std::fmt::Debug for GitAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Secrets are never printed.
        match self {
            GitAuth::None => write!(f, "None"),
            GitAuth::Basic { username, .. } => write!(f, "Basic {{ username: {username:?}, .. }}"),
            GitAuth::Ssh { passphrase, .. } => {
                write!(f, "Ssh {{ passphrase: {}, .. }}", passphrase.is_some())
            }
            GitAuth::GithubApp {
                app_id,
                installation_id,
                api_url,
                ..
            } => write!(
                f,
                "GithubApp {{ app_id: {app_id:?}, installation_id: {installation_id:?}, api_url: {api_url:?}, .. }}"
            ),
        }
    }
}

/// How to reach and write a Git state store.
#[derive(Clone, Debug)]
pub struct GitConfig {
    /// Repository URL: `file:///srv/repo.git` (or a plain path), `git://host:port/repo.git`,
    /// `https://host/org/repo.git`, `ssh://user@host:port/path`, `user@host:path`.
    pub url: String,
    /// Branch to write (`spec.branch`, default `main`). Must exist.
    pub branch: String,
    /// Store prefix (`spec.path`); every written path is placed under it.
    pub path: String,
    /// Credentials.
    pub auth: GitAuth,
    /// Commit author and committer name (`spec.gitAuthor.name`, default `kratix`).
    pub author_name: String,
    /// Commit author and committer email (`spec.gitAuthor.email`, may be empty).
    pub author_email: String,
    /// Accept any TLS certificate (HTTPS) and allow plain `http://`, for the repository and,
    /// with [`GitAuth::GithubApp`], for the GitHub API. Off by default — Kratix hard-codes it
    /// on; Plinth verifies unless told otherwise.
    pub insecure_skip_tls_verify: bool,
    /// Directory for the local clone. Created if missing; must be empty, missing, or a clone
    /// this writer made before. Wiped and re-cloned when it holds a clone of another URL.
    pub work_dir: PathBuf,
    /// How long the worker waits for more writes to put in the same commit: the least quiet
    /// gap that closes a batch, which grows with the interval between recent writes, up to
    /// [`crate::batching::MAX_LATENCY_FACTOR`] windows after the first write (see
    /// [`crate::batching`]). Zero batches only what is already queued.
    pub batch_window: Duration,
    /// Maximum number of requests in one commit.
    pub max_batch: usize,
    /// Push attempts per batch before giving up (each after a re-fetch).
    pub max_push_attempts: u32,
    /// Use a worker of its own instead of the one shared by every store on this repository
    /// and branch. Readers (the destination agent) set it, so that holding their store
    /// never keeps a writer's worker, and its work dir, alive after the writer moved on.
    pub exclusive_worker: bool,
}

impl GitConfig {
    /// A configuration with defaults: no auth, prefix `""`, author `kratix`, TLS verified,
    /// 200 ms batch window, 500 requests per batch, 5 push attempts.
    pub fn new(
        url: impl Into<String>,
        branch: impl Into<String>,
        work_dir: impl Into<PathBuf>,
    ) -> Self {
        GitConfig {
            url: url.into(),
            branch: branch.into(),
            path: String::new(),
            auth: GitAuth::None,
            author_name: DEFAULT_AUTHOR_NAME.to_string(),
            author_email: String::new(),
            insecure_skip_tls_verify: false,
            work_dir: work_dir.into(),
            batch_window: DEFAULT_BATCH_WINDOW,
            max_batch: DEFAULT_MAX_BATCH,
            max_push_attempts: DEFAULT_MAX_PUSH_ATTEMPTS,
            exclusive_worker: false,
        }
    }
}

/// Creates a bare repository at `path` (parents included) with one empty commit on `branch`,
/// unless the branch already exists. Returns the branch's commit SHA. This is the embedded
/// mode's default state store and a test helper.
///
/// # Errors
/// [`StoreError::Git`] / [`StoreError::Io`] with libgit2's message.
pub fn init_bare(path: &Path, branch: &str) -> Result<String, StoreError> {
    let git_err = |e: git2::Error| StoreError::Git {
        op: "init".into(),
        url: path.display().to_string(),
        cause: e.message().to_string(),
    };
    let repo = if path.join("HEAD").exists() {
        Repository::open_bare(path).map_err(git_err)?
    } else {
        std::fs::create_dir_all(path).map_err(|e| StoreError::Io {
            path: path.display().to_string(),
            cause: e.to_string(),
        })?;
        let mut opts = RepositoryInitOptions::new();
        opts.bare(true).mkpath(true).initial_head(branch);
        Repository::init_opts(path, &opts).map_err(git_err)?
    };
    let refname = format!("refs/heads/{branch}");
    if let Ok(r) = repo.find_reference(&refname)
        && let Some(t) = r.target()
    {
        return Ok(t.to_string());
    }
    let tree_id = repo
        .treebuilder(None)
        .and_then(|b| b.write())
        .map_err(git_err)?;
    let id = write_commit(
        &repo,
        tree_id,
        None,
        DEFAULT_AUTHOR_NAME,
        "",
        "Initialise state store",
    )
    .map_err(git_err)?;
    repo.reference(&refname, id, false, "init")
        .map_err(git_err)?;
    Ok(id.to_string())
}

/// Writes a commit object directly, so that an empty author email (Kratix's default
/// `gitAuthor` is `{name: kratix}`) is kept as `kratix <>` like the git CLI
/// writes it; libgit2's signature type refuses empty emails.
fn write_commit(
    repo: &Repository,
    tree: Oid,
    parent: Option<Oid>,
    name: &str,
    email: &str,
    message: &str,
) -> Result<Oid, git2::Error> {
    let clean = |s: &str| s.replace(['<', '>', '\n', '\r', '\0'], "");
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let ident = format!("{} <{}> {secs} +0000", clean(name), clean(email));
    let mut raw = format!("tree {tree}\n");
    if let Some(p) = parent {
        raw.push_str(&format!("parent {p}\n"));
    }
    raw.push_str(&format!("author {ident}\ncommitter {ident}\n\n{message}"));
    if !raw.ends_with('\n') {
        raw.push('\n');
    }
    repo.odb()?.write(git2::ObjectType::Commit, raw.as_bytes())
}

/// Removes credentials from a URL for messages (`https://user:pw@host` → `https://host`).
pub fn redact_url(url: &str) -> String {
    if let Some((scheme, rest)) = url.split_once("://") {
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        if let Some((userinfo, host)) = authority.rsplit_once('@')
            && (scheme.starts_with("http") || userinfo.contains(':'))
        {
            return format!("{scheme}://{host}{path}");
        }
    }
    url.to_string()
}

// ---------------------------------------------------------------------------------------------
// Handle and registry

type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

struct PendingWrite {
    name: String,
    updates: bool,
    ops: Vec<ResolvedOp>,
    reply: Reply<WriteOutcome>,
}

enum Cmd {
    Write(Box<PendingWrite>),
    Sync(Reply<()>),
    Read(String, Reply<Option<Vec<u8>>>),
    List(String, Reply<Vec<String>>),
    Validate(Reply<()>),
    Snapshot(String, Option<String>, Reply<Option<GitSnapshot>>),
    ReadBlob(String, Reply<Option<Vec<u8>>>),
}

/// The files under a directory at the fetched branch tip: `(path relative to the store
/// prefix, blob id)`, sorted, and the tip commit.
pub(crate) struct GitSnapshot {
    pub(crate) tip: String,
    pub(crate) files: Vec<(String, String)>,
}

struct WorkerShared {
    tx: mpsc::Sender<Cmd>,
    target: String,
    /// Cleared when the worker thread ends (normally or by panic), so that a dead worker is
    /// never handed to a new `open`.
    alive: Arc<AtomicBool>,
}

impl WorkerShared {
    fn live(self: Arc<Self>) -> Option<Arc<Self>> {
        self.alive.load(Ordering::SeqCst).then_some(self)
    }
}

/// Clears the worker's liveness flag when the worker thread ends, even by panic.
struct AliveGuard(Arc<AtomicBool>);

impl Drop for AliveGuard {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct WorkerKey {
    url: String,
    branch: String,
    auth: String,
    /// The work dir of a store with [`GitConfig::exclusive_worker`]; `None` when shared.
    exclusive: Option<PathBuf>,
}

static WORKERS: LazyLock<Mutex<HashMap<WorkerKey, Weak<WorkerShared>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));
static WORK_DIRS: LazyLock<(Mutex<HashSet<PathBuf>>, Condvar)> =
    LazyLock::new(|| (Mutex::new(HashSet::new()), Condvar::new()));

/// An open Git state store: a prefix plus a shared worker.
pub(crate) struct GitHandle {
    shared: Arc<WorkerShared>,
    prefix: String,
}

/// A digest of the credentials, so that stores sharing a repository and branch share a
/// worker only when they authenticate alike (it keys the in-memory worker map).
fn auth_fingerprint(auth: &GitAuth, insecure: bool) -> String {
    let (kind, parts): (&str, Vec<&str>) = match auth {
        GitAuth::None => ("none", vec![]),
        GitAuth::Basic { username, password } => ("basic", vec![username, password]),
        GitAuth::Ssh {
            private_key,
            passphrase,
            known_hosts,
        } => (
            "ssh",
            vec![
                private_key,
                passphrase.as_deref().unwrap_or(""),
                known_hosts,
            ],
        ),
        GitAuth::GithubApp {
            app_id,
            installation_id,
            private_key_pem,
            api_url,
        } => (
            "githubapp",
            vec![app_id, installation_id, private_key_pem, api_url],
        ),
    };
    let mut h = sha2::Sha256::new();
    for part in std::iter::once(kind).chain(parts) {
        h.update(part.as_bytes());
        h.update(b"\0");
    }
    h.update([insecure as u8]);
    hex::encode(h.finalize())
}

impl GitHandle {
    pub(crate) async fn open(cfg: GitConfig) -> Result<Arc<GitHandle>, StoreError> {
        let prefix = layout::normalize_path(&cfg.path).map_err(|e| StoreError::InvalidConfig {
            field: "path".into(),
            cause: e.to_string(),
        })?;
        if cfg.branch.is_empty()
            || !git2::Reference::is_valid_name(&format!("refs/heads/{}", cfg.branch))
        {
            return Err(StoreError::InvalidConfig {
                field: "branch".into(),
                cause: format!("{:?} is not a valid branch name", cfg.branch),
            });
        }
        let key = WorkerKey {
            url: cfg.url.clone(),
            branch: cfg.branch.clone(),
            auth: auth_fingerprint(&cfg.auth, cfg.insecure_skip_tls_verify),
            exclusive: cfg.exclusive_worker.then(|| cfg.work_dir.clone()),
        };
        let existing = {
            let map = WORKERS.lock().expect("registry lock");
            map.get(&key)
                .and_then(Weak::upgrade)
                .and_then(WorkerShared::live)
        };
        let shared = match existing {
            Some(s) => s,
            None => {
                // Check everything that can be checked without a network first.
                let worker = Worker::new(&cfg)?;
                let target = format!("{} (branch {})", worker.redacted, cfg.branch);
                let (tx, rx) = mpsc::channel();
                let alive = Arc::new(AtomicBool::new(true));
                let shared = Arc::new(WorkerShared {
                    tx,
                    target: target.clone(),
                    alive: alive.clone(),
                });
                let mut map = WORKERS.lock().expect("registry lock");
                // Another task may have raced us; prefer the one already registered.
                if let Some(s) = map
                    .get(&key)
                    .and_then(Weak::upgrade)
                    .and_then(WorkerShared::live)
                {
                    s
                } else {
                    std::thread::Builder::new()
                        .name("plinth-git-writer".into())
                        .spawn(move || {
                            let _guard = AliveGuard(alive);
                            worker.run(rx)
                        })
                        .map_err(|e| StoreError::Io {
                            path: cfg.work_dir.display().to_string(),
                            cause: format!("cannot start writer thread: {e}"),
                        })?;
                    map.retain(|_, w| w.strong_count() > 0);
                    map.insert(key, Arc::downgrade(&shared));
                    shared
                }
            }
        };
        let handle = Arc::new(GitHandle { shared, prefix });
        handle.call(Cmd::Sync).await?;
        Ok(handle)
    }

    pub(crate) fn describe(&self) -> &str {
        &self.shared.target
    }

    async fn call<T>(&self, make: impl FnOnce(Reply<T>) -> Cmd) -> Result<T, StoreError> {
        let (tx, rx) = oneshot::channel();
        let stopped = || StoreError::WriterStopped {
            target: self.shared.target.clone(),
        };
        self.shared.tx.send(make(tx)).map_err(|_| stopped())?;
        rx.await.map_err(|_| stopped())?
    }

    pub(crate) async fn validate(&self) -> Result<(), StoreError> {
        self.call(Cmd::Validate).await
    }

    pub(crate) async fn write(&self, req: WriteRequest) -> Result<WriteOutcome, StoreError> {
        let ops = resolve_ops(&self.prefix, &req.ops)?;
        let updates = req.ops.iter().any(|o| o.writes_content());
        let name = req.name;
        self.call(move |reply| {
            Cmd::Write(Box::new(PendingWrite {
                name,
                updates,
                ops,
                reply,
            }))
        })
        .await
    }

    pub(crate) async fn read(&self, path: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let full = resolve_file(&self.prefix, path)?;
        self.call(|r| Cmd::Read(full, r)).await
    }

    /// The branch tip and, when it is not `since`, every file under `dir` (relative to
    /// the prefix) with its blob id; `None` when the tip is still `since`.
    pub(crate) async fn snapshot_ids(
        &self,
        dir: &str,
        since: Option<&str>,
    ) -> Result<Option<GitSnapshot>, StoreError> {
        let full = resolve_dir(&self.prefix, dir)?;
        let since = since.map(str::to_string);
        let snap = self.call(|r| Cmd::Snapshot(full, since, r)).await?;
        Ok(snap.map(|mut s| {
            for f in &mut s.files {
                f.0 = crate::strip_prefix(&self.prefix, &f.0);
            }
            s
        }))
    }

    /// Reads a blob by id from the local copy (no fetch); `None` when it is not there.
    pub(crate) async fn read_blob(&self, id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let id = id.to_string();
        self.call(|r| Cmd::ReadBlob(id, r)).await
    }

    /// [`GitHandle::snapshot_ids`] with each file's content read.
    pub(crate) async fn snapshot(
        &self,
        dir: &str,
        since: Option<&str>,
    ) -> Result<crate::Snapshot, StoreError> {
        let Some(snap) = self.snapshot_ids(dir, since).await? else {
            return Ok(crate::Snapshot {
                version: since.unwrap_or_default().to_string(),
                files: None,
            });
        };
        let mut files = Vec::with_capacity(snap.files.len());
        for (path, id) in snap.files {
            if let Some(bytes) = self.read_blob(&id).await? {
                files.push((path, bytes));
            }
        }
        Ok(crate::Snapshot {
            version: snap.tip,
            files: Some(files),
        })
    }

    pub(crate) async fn list(&self, dir: &str) -> Result<Vec<String>, StoreError> {
        let full = resolve_dir(&self.prefix, dir)?;
        let paths = self.call(|r| Cmd::List(full, r)).await?;
        Ok(paths
            .into_iter()
            .map(|p| crate::strip_prefix(&self.prefix, &p))
            .collect())
    }
}

// ---------------------------------------------------------------------------------------------
// Worker

enum PreparedAuth {
    None,
    Basic {
        username: String,
        password: String,
    },
    Ssh {
        target: SshTarget,
        key: PreparedKey,
        known_hosts: KnownHostsDb,
    },
    GithubApp(Box<AppTokenSource>),
}

struct Worker {
    url: String,
    redacted: String,
    branch: String,
    auth: PreparedAuth,
    insecure: bool,
    author_name: String,
    author_email: String,
    work_dir: PathBuf,
    window: Duration,
    max_batch: usize,
    max_attempts: u32,
    repo: Option<Repository>,
    holds_dir: bool,
}

impl Drop for Worker {
    fn drop(&mut self) {
        // Also runs when the worker thread unwinds from a panic.
        self.release_dir();
    }
}

enum PushResult {
    Pushed,
    Rejected(String),
}

enum BatchResult {
    Done(Vec<WriteOutcome>),
    Rejected(String),
}

fn global_git_setup() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: libgit2 global options are set once, before this crate runs any git2
        // operation on another thread. Bounded network timeouts keep a dead server from
        // blocking a worker forever; ignoring user/system git config keeps the writer
        // independent of the machine (Kratix runs git with HOME=/dev/null).
        unsafe {
            let (connect, overall) = crate::network_timeouts();
            let ms = |d: Duration| i32::try_from(d.as_millis()).unwrap_or(i32::MAX);
            let _ = git2::opts::set_server_connect_timeout_in_milliseconds(ms(connect));
            let _ = git2::opts::set_server_timeout_in_milliseconds(ms(overall));
            for level in [
                git2::ConfigLevel::System,
                git2::ConfigLevel::XDG,
                git2::ConfigLevel::Global,
                git2::ConfigLevel::ProgramData,
            ] {
                let _ = git2::opts::set_search_path(level, "");
            }
        }
    });
}

fn key_type_of(blob: &[u8]) -> String {
    if blob.len() >= 4 {
        let n = u32::from_be_bytes([blob[0], blob[1], blob[2], blob[3]]) as usize;
        if blob.len() >= 4 + n {
            return String::from_utf8_lossy(&blob[4..4 + n]).into_owned();
        }
    }
    "unknown".to_string()
}

// What libgit2 and the servers behind it say, lower-cased, by class of failure; checked
// in the order `Worker::classify` lists them.

/// The server refused the credentials.
const AUTH_REFUSED: &[&str] = &[
    "authentication",
    "permission denied (publickey",
    "too many redirects or authentication replays",
    "username/publickey combination invalid",
];

/// The branch is not on the remote.
const REF_MISSING: &[&str] = &[
    "couldn't find remote ref",
    "remote ref does not exist",
    "not our ref",
];

/// The server could not be reached.
const UNREACHABLE: &[&str] = &[
    "failed to connect",
    "connection refused",
    "could not resolve",
    "failed to resolve",
    "timed out",
    "timeout",
    "no route to host",
    "network is unreachable",
    "failed to start ssh session",
    "connection reset",
];

/// The credentials are good but may not do this.
const DENIED: &[&str] = &[
    "access denied",
    "permission denied",
    "read-only",
    "service not enabled",
];

/// There is no repository at the URL.
const REPOSITORY_MISSING: &[&str] = &[
    "could not find repository",
    "not a git repository",
    "does not appear to be a git repository",
    "repository not found",
    "not exported",
    "does not exist",
];

/// Which credentials libgit2 was already given in one operation: asked again, the server
/// refused them.
#[derive(Default)]
struct Asked {
    key: bool,
    pass: bool,
}

impl PreparedAuth {
    /// The answer to libgit2's ask for credentials (`allowed`: what the server accepts), or
    /// why there is none to give (the server refused them, or accepts nothing we have).
    fn credential(
        &self,
        allowed: CredentialType,
        asked: &mut Asked,
    ) -> Result<Result<Cred, git2::Error>, String> {
        match self {
            PreparedAuth::Ssh { target: t, key, .. } => {
                if allowed.contains(CredentialType::USERNAME) {
                    return Ok(Cred::username(&t.user));
                }
                if allowed.contains(CredentialType::SSH_MEMORY)
                    || allowed.contains(CredentialType::SSH_KEY)
                {
                    if asked.key {
                        return Err(format!(
                            "the server rejected sshPrivateKey for user {:?}",
                            t.user
                        ));
                    }
                    asked.key = true;
                    return Ok(Cred::ssh_key_from_memory(
                        &t.user,
                        key.public_openssh.as_deref(),
                        &key.private_pem,
                        key.passphrase.as_deref(),
                    ));
                }
                Err(format!(
                    "the server offers no public-key authentication ({allowed:?})"
                ))
            }
            PreparedAuth::Basic { username, password } => {
                if allowed.contains(CredentialType::USER_PASS_PLAINTEXT) {
                    if asked.pass {
                        return Err(format!(
                            "the server rejected username {username:?} and password"
                        ));
                    }
                    asked.pass = true;
                    return Ok(Cred::userpass_plaintext(username, password));
                }
                Err(format!(
                    "the server does not accept username/password ({allowed:?})"
                ))
            }
            PreparedAuth::GithubApp(app) => {
                if allowed.contains(CredentialType::USER_PASS_PLAINTEXT)
                    && let Some(token) = app.current()
                {
                    if asked.pass {
                        return Err("the server rejected the GitHub App installation token".into());
                    }
                    asked.pass = true;
                    return Ok(Cred::userpass_plaintext(GITHUB_APP_USERNAME, token));
                }
                Err(format!(
                    "the server does not accept an installation token ({allowed:?})"
                ))
            }
            PreparedAuth::None => {
                Err("the server asked for credentials but the state store has none".into())
            }
        }
    }
}

/// Checks the host key an SSH server presented against the store's knownHosts.
fn check_host_key(
    known_hosts: &KnownHostsDb,
    target: &SshTarget,
    hk: &git2::cert::CertHostkey<'_>,
) -> Result<(), StoreError> {
    let Some(raw) = hk.hostkey() else {
        return Err(StoreError::InvalidKnownHosts {
            cause: "the SSH library did not expose the server's host key".into(),
        });
    };
    known_hosts.check(target, raw, &key_type_of(raw))
}

/// The store's URL, trimmed: not empty, and not plain `http://` unless the store is
/// marked insecure (credentials would travel unencrypted).
fn checked_url(cfg: &GitConfig) -> Result<String, StoreError> {
    let url = cfg.url.trim().to_string();
    if url.is_empty() {
        return Err(StoreError::InvalidConfig {
            field: "url".into(),
            cause: "empty".into(),
        });
    }
    if url.starts_with("http://") && !cfg.insecure_skip_tls_verify {
        return Err(StoreError::InvalidConfig {
            field: "url".into(),
            cause: format!(
                "{}: plain http:// sends credentials unencrypted; use https:// or mark the store insecure",
                redact_url(&url)
            ),
        });
    }
    Ok(url)
}

/// The store's credentials made ready for use, checked against the kind of URL they go with.
fn prepared_auth(cfg: &GitConfig, url: &str, is_ssh: bool) -> Result<PreparedAuth, StoreError> {
    Ok(match &cfg.auth {
        GitAuth::None => PreparedAuth::None,
        GitAuth::Basic { username, password } => {
            if is_ssh {
                return Err(StoreError::InvalidConfig {
                    field: "url".into(),
                    cause: "basicAuth needs an https:// URL, not an SSH URL".into(),
                });
            }
            PreparedAuth::Basic {
                username: username.clone(),
                password: password.clone(),
            }
        }
        GitAuth::Ssh {
            private_key,
            passphrase,
            known_hosts,
        } => {
            if !is_ssh {
                return Err(StoreError::InvalidConfig {
                    field: "url".into(),
                    cause: format!(
                        "{}: ssh auth needs an SSH URL (ssh://user@host[:port]/path or user@host:path)",
                        redact_url(url)
                    ),
                });
            }
            PreparedAuth::Ssh {
                target: ssh::parse_ssh_url(url)?,
                key: ssh::prepare_key(private_key, passphrase.as_deref())?,
                known_hosts: KnownHostsDb::parse(known_hosts)?,
            }
        }
        GitAuth::GithubApp {
            app_id,
            installation_id,
            private_key_pem,
            api_url,
        } => {
            if !(url.starts_with("https://") || url.starts_with("http://")) {
                return Err(StoreError::InvalidConfig {
                    field: "url".into(),
                    cause: format!("{}: githubApp auth needs an https:// URL", redact_url(url)),
                });
            }
            PreparedAuth::GithubApp(Box::new(AppTokenSource::new(
                app_id,
                installation_id,
                private_key_pem,
                api_url,
                cfg.insecure_skip_tls_verify,
            )?))
        }
    })
}

impl Worker {
    fn new(cfg: &GitConfig) -> Result<Worker, StoreError> {
        global_git_setup();
        let url = checked_url(cfg)?;
        let is_ssh = ssh::is_ssh_url(&url);
        let auth = prepared_auth(cfg, &url, is_ssh)?;
        if is_ssh && !matches!(auth, PreparedAuth::Ssh { .. }) {
            return Err(StoreError::InvalidConfig {
                field: "authMethod".into(),
                cause: "an SSH URL needs ssh auth (sshPrivateKey and knownHosts)".into(),
            });
        }
        let author_name = if cfg.author_name.is_empty() {
            DEFAULT_AUTHOR_NAME.to_string()
        } else {
            cfg.author_name.clone()
        };
        Ok(Worker {
            redacted: redact_url(&url),
            url,
            branch: cfg.branch.clone(),
            auth,
            insecure: cfg.insecure_skip_tls_verify,
            author_name,
            author_email: cfg.author_email.clone(),
            work_dir: cfg.work_dir.clone(),
            window: cfg.batch_window,
            max_batch: cfg.max_batch.max(1),
            max_attempts: cfg.max_push_attempts.max(1),
            repo: None,
            holds_dir: false,
        })
    }

    fn run(mut self, rx: mpsc::Receiver<Cmd>) {
        let mut deferred: Vec<Cmd> = Vec::new();
        let mut batcher = crate::batching::Batcher::new(self.window);
        loop {
            let cmd = if deferred.is_empty() {
                match rx.recv() {
                    Ok(c) => c,
                    Err(_) => break,
                }
            } else {
                deferred.remove(0)
            };
            match cmd {
                Cmd::Write(first) => {
                    let mut batch = vec![*first];
                    let mut open = batcher.open(Instant::now());
                    // Take whatever is already queued, then wait until the queue has been
                    // quiet for the adaptive gap (or the latency bound is reached).
                    while batch.len() < self.max_batch {
                        let now = Instant::now();
                        let deadline = batcher.deadline(&open);
                        let next = if now >= deadline {
                            rx.try_recv().map_err(|e| match e {
                                mpsc::TryRecvError::Empty => RecvTimeoutError::Timeout,
                                mpsc::TryRecvError::Disconnected => RecvTimeoutError::Disconnected,
                            })
                        } else {
                            rx.recv_timeout(deadline - now)
                        };
                        match next {
                            Ok(Cmd::Write(w)) => {
                                batch.push(*w);
                                batcher.arrived(&mut open, Instant::now());
                            }
                            Ok(other) => deferred.push(other),
                            Err(_) => break,
                        }
                    }
                    self.process_batch(batch);
                }
                Cmd::Sync(reply) => {
                    // A missing branch is not an error: the first write starts it.
                    let r = self.fetch().map(|_| ());
                    let _ = reply.send(r);
                }
                Cmd::Read(path, reply) => {
                    let _ = reply.send(self.read(&path));
                }
                Cmd::List(dir, reply) => {
                    let _ = reply.send(self.list(&dir));
                }
                Cmd::Validate(reply) => {
                    let _ = reply.send(self.validate());
                }
                Cmd::Snapshot(dir, since, reply) => {
                    let _ = reply.send(self.snapshot(&dir, since.as_deref()));
                }
                Cmd::ReadBlob(id, reply) => {
                    let _ = reply.send(self.read_blob(&id));
                }
            }
        }
        self.release_dir();
    }

    fn is_local(&self) -> bool {
        self.url.starts_with("file://") || self.url.starts_with('/') || self.url.starts_with('.')
    }

    fn branch_missing(&self) -> StoreError {
        StoreError::BranchMissing {
            url: self.redacted.clone(),
            branch: self.branch.clone(),
        }
    }

    fn tracking_ref(&self) -> String {
        format!("refs/remotes/origin/{}", self.branch)
    }

    fn git_err(&self, op: &str, e: git2::Error) -> StoreError {
        StoreError::Git {
            op: op.into(),
            url: self.redacted.clone(),
            cause: e.message().to_string(),
        }
    }

    fn release_dir(&mut self) {
        self.repo = None;
        if self.holds_dir {
            let (set, cv) = &*WORK_DIRS;
            set.lock().expect("work dir lock").remove(&self.work_dir);
            cv.notify_all();
            self.holds_dir = false;
        }
    }

    fn claim_dir(&mut self) -> Result<(), StoreError> {
        if self.holds_dir {
            return Ok(());
        }
        let (set, cv) = &*WORK_DIRS;
        let mut guard = set.lock().expect("work dir lock");
        let deadline = Instant::now() + Duration::from_secs(30);
        // A previous writer for this directory may still be shutting down.
        while guard.contains(&self.work_dir) {
            let now = Instant::now();
            if now >= deadline {
                return Err(StoreError::InvalidConfig {
                    field: "work_dir".into(),
                    cause: format!(
                        "{} is used by another state store writer",
                        self.work_dir.display()
                    ),
                });
            }
            guard = cv
                .wait_timeout(guard, deadline - now)
                .expect("work dir lock")
                .0;
        }
        guard.insert(self.work_dir.clone());
        self.holds_dir = true;
        Ok(())
    }

    /// Opens the clone in the work dir, creating (or re-creating) it when needed.
    fn repo(&mut self) -> Result<&Repository, StoreError> {
        if self.repo.is_none() {
            self.claim_dir()?;
            let io = |e: std::io::Error| StoreError::Io {
                path: self.work_dir.display().to_string(),
                cause: e.to_string(),
            };
            let dir = &self.work_dir;
            let mut reuse = None;
            if dir.exists() {
                if let Ok(r) = Repository::open_bare(dir) {
                    let ours = r
                        .config()
                        .and_then(|c| c.get_string("plinth.statestoreurl"))
                        .ok();
                    match ours {
                        Some(u) if u == self.url => reuse = Some(r),
                        Some(_) => {
                            drop(r);
                            std::fs::remove_dir_all(dir).map_err(io)?;
                        }
                        None => {
                            return Err(StoreError::InvalidConfig {
                                field: "work_dir".into(),
                                cause: format!(
                                    "{} holds a repository this writer did not create",
                                    dir.display()
                                ),
                            });
                        }
                    }
                } else if std::fs::read_dir(dir).map_err(io)?.next().is_some() {
                    return Err(StoreError::InvalidConfig {
                        field: "work_dir".into(),
                        cause: format!("{} exists and is not empty", dir.display()),
                    });
                }
            }
            let repo = match reuse {
                Some(r) => r,
                None => {
                    std::fs::create_dir_all(dir).map_err(io)?;
                    let r = Repository::init_bare(dir).map_err(|e| self.git_err("init", e))?;
                    r.config()
                        .and_then(|mut c| {
                            c.set_str("plinth.statestoreurl", &self.url)?;
                            c.set_bool("gc.autoDetach", false)?;
                            c.set_str("core.logAllRefUpdates", "false")
                        })
                        .map_err(|e| self.git_err("init", e))?;
                    r
                }
            };
            self.repo = Some(repo);
        }
        Ok(self.repo.as_ref().expect("repo just set"))
    }

    /// Remote callbacks with credentials, host-key / certificate checks and a slot recording
    /// the precise reason when a callback refuses something.
    fn callbacks<'a>(&'a self, failure: Rc<RefCell<Option<StoreError>>>) -> RemoteCallbacks<'a> {
        let mut cb = RemoteCallbacks::new();
        let mut asked = Asked::default();
        let f_cred = failure.clone();
        let target = self.redacted.clone();
        let auth = &self.auth;
        cb.credentials(move |_url, _user_from_url, allowed| {
            match auth.credential(allowed, &mut asked) {
                Ok(cred) => cred,
                Err(cause) => {
                    *f_cred.borrow_mut() = Some(StoreError::AuthFailed {
                        target: target.clone(),
                        cause: cause.clone(),
                    });
                    Err(git2::Error::from_str(&cause))
                }
            }
        });
        let f_cert = failure;
        let insecure = self.insecure;
        cb.certificate_check(move |cert, _host| {
            let Some(hk) = cert.as_hostkey() else {
                return Ok(if insecure {
                    CertificateCheckStatus::CertificateOk
                } else {
                    CertificateCheckStatus::CertificatePassthrough
                });
            };
            let PreparedAuth::Ssh {
                target,
                known_hosts,
                ..
            } = auth
            else {
                return Err(git2::Error::from_str(
                    "SSH host key presented without knownHosts",
                ));
            };
            match check_host_key(known_hosts, target, hk) {
                Ok(()) => Ok(CertificateCheckStatus::CertificateOk),
                Err(e) => {
                    let msg = e.to_string();
                    *f_cert.borrow_mut() = Some(e);
                    Err(git2::Error::from_str(&msg))
                }
            }
        });
        cb
    }

    /// Maps a libgit2 error to a specific [`StoreError`].
    fn classify(
        &self,
        op: &str,
        e: git2::Error,
        failure: &RefCell<Option<StoreError>>,
    ) -> StoreError {
        if let Some(f) = failure.borrow_mut().take() {
            return f;
        }
        let msg = e.message().to_string();
        let l = msg.to_lowercase();
        let target = self.redacted.clone();
        let has = |s: &[&str]| s.iter().any(|p| l.contains(p));
        // A status is read only where libgit2 names one: digits elsewhere in the text
        // (a port, a host name, a path) say nothing about the class.
        let status = crate::error::named_http_status(&l);
        if e.code() == ErrorCode::Certificate
            || e.class() == ErrorClass::Ssl
            || has(&["certificate", "ssl"])
        {
            return StoreError::Tls { target, cause: msg };
        }
        if matches!(&self.auth, PreparedAuth::Ssh { key, .. } if key.passphrase.is_some())
            && has(&[
                "unable to extract public key from private key",
                "wrong passphrase",
            ])
        {
            // libssh2's text for an undecryptable PEM key (OpenSSH-format keys are checked
            // before connecting).
            return StoreError::WrongPassphrase;
        }
        if e.code() == ErrorCode::Auth || has(AUTH_REFUSED) || status == Some(401) {
            return StoreError::AuthFailed { target, cause: msg };
        }
        if has(REF_MISSING) {
            return self.branch_missing();
        }
        if has(&["failed to resolve path"]) {
            return StoreError::RepositoryMissing {
                url: target,
                cause: msg,
            };
        }
        if has(UNREACHABLE) {
            return StoreError::Unreachable { target, cause: msg };
        }
        if status == Some(403) || has(DENIED) {
            if op == "fetch" && has(&["not exported"]) {
                return StoreError::RepositoryMissing {
                    url: target,
                    cause: msg,
                };
            }
            return StoreError::PermissionDenied { target, cause: msg };
        }
        if e.code() == ErrorCode::NotFound || has(REPOSITORY_MISSING) || status == Some(404) {
            return StoreError::RepositoryMissing {
                url: target,
                cause: msg,
            };
        }
        StoreError::Git {
            op: op.into(),
            url: target,
            cause: msg,
        }
    }

    /// Makes sure short-lived credentials (a GitHub App installation token) have enough life
    /// left for the operations that follow; fetches a new token when needed.
    fn refresh_credentials(&mut self) -> Result<(), StoreError> {
        if let PreparedAuth::GithubApp(app) = &mut self.auth {
            app.token()?;
        }
        Ok(())
    }

    /// After the server refused a GitHub App token, forgets it so that the next operation
    /// asks GitHub for a new one (the installation may have been re-created or the token
    /// revoked).
    fn forget_refused_credentials(&mut self, err: &StoreError) {
        if let (PreparedAuth::GithubApp(app), StoreError::AuthFailed { .. }) = (&mut self.auth, err)
        {
            app.invalidate();
        }
    }

    /// Fetches the branch; returns the remote tip (None when the branch does not exist).
    fn fetch(&mut self) -> Result<Option<Oid>, StoreError> {
        self.refresh_credentials()?;
        self.repo()?;
        let repo = self.repo.as_ref().expect("repo opened");
        let failure = Rc::new(RefCell::new(None));
        let refspec = format!("+refs/heads/{b}:refs/remotes/origin/{b}", b = self.branch);
        let result = (|| {
            let mut remote = repo.remote_anonymous(&self.url)?;
            let mut fo = FetchOptions::new();
            fo.remote_callbacks(self.callbacks(failure.clone()))
                .download_tags(AutotagOption::None)
                .prune(FetchPrune::On);
            // Shallow like Kratix's `--depth 1` over the network; libgit2's local transport
            // cannot fetch shallow (and copying local objects is cheap).
            if !self.is_local() {
                fo.depth(1);
            }
            remote.fetch(&[&refspec], Some(&mut fo), None)
        })();
        if let Err(e) = result {
            let err = self.classify("fetch", e, &failure);
            if matches!(err, StoreError::BranchMissing { .. }) {
                // The branch is gone on the remote: forget our copy of it.
                if let Ok(mut r) = repo.find_reference(&self.tracking_ref()) {
                    let _ = r.delete();
                }
                return Ok(None);
            }
            self.forget_refused_credentials(&err);
            return Err(err);
        }
        Ok(repo
            .find_reference(&self.tracking_ref())
            .ok()
            .and_then(|r| r.target()))
    }

    fn push(&self, commit: Oid) -> Result<PushResult, StoreError> {
        let repo = self.repo.as_ref().expect("repo opened");
        let local = "refs/heads/plinth-push";
        repo.reference(local, commit, true, "batch")
            .map_err(|e| self.git_err("push", e))?;
        let failure = Rc::new(RefCell::new(None));
        let rejected: Rc<RefCell<Option<String>>> = Rc::new(RefCell::new(None));
        let result = (|| {
            let mut remote = repo.remote_anonymous(&self.url)?;
            let mut cb = self.callbacks(failure.clone());
            let rej = rejected.clone();
            cb.push_update_reference(move |_refname, status| {
                if let Some(s) = status {
                    *rej.borrow_mut() = Some(s.to_string());
                }
                Ok(())
            });
            let mut po = PushOptions::new();
            po.remote_callbacks(cb);
            remote.push(
                &[&format!("{local}:refs/heads/{}", self.branch)],
                Some(&mut po),
            )
        })();
        match result {
            Ok(()) => match rejected.borrow_mut().take() {
                Some(r) => Ok(PushResult::Rejected(r)),
                None => Ok(PushResult::Pushed),
            },
            Err(e) => {
                let l = e.message().to_lowercase();
                if e.code() == ErrorCode::NotFastForward
                    || l.contains("non-fast-forward")
                    || l.contains("fetch first")
                    || l.contains("not present locally")
                    || l.contains("failed to update ref")
                    || l.contains("cannot lock ref")
                {
                    return Ok(PushResult::Rejected(e.message().to_string()));
                }
                Err(self.classify("push", e, &failure))
            }
        }
    }

    fn process_batch(&mut self, mut batch: Vec<PendingWrite>) {
        // A write whose requester has gone (its reconcile was cancelled, the platform is
        // stopping) is not made: the requester will ask again if it still wants it, and a
        // stopping platform may already be removing the checkout under this worker.
        batch.retain(|w| !w.reply.is_closed());
        if batch.is_empty() {
            return;
        }
        let mut attempt = 0;
        let result = loop {
            attempt += 1;
            match self.try_batch(&batch) {
                Ok(BatchResult::Done(outcomes)) => break Ok(outcomes),
                Ok(BatchResult::Rejected(cause)) => {
                    tracing::debug!(url = %self.redacted, branch = %self.branch, attempt, %cause, "push rejected; re-syncing");
                    if attempt >= self.max_attempts {
                        break Err(StoreError::PushRejected {
                            url: self.redacted.clone(),
                            branch: self.branch.clone(),
                            attempts: attempt,
                            cause,
                        });
                    }
                }
                Err(e) => break Err(e),
            }
        };
        match result {
            Ok(outcomes) => {
                for (w, o) in batch.into_iter().zip(outcomes) {
                    let _ = w.reply.send(Ok(o));
                }
            }
            Err(e) if batch.iter().all(|w| w.reply.is_closed()) => {
                tracing::debug!(url = %self.redacted, branch = %self.branch, error = %e, "state store batch failed after its requesters left");
            }
            Err(e) => {
                tracing::warn!(url = %self.redacted, branch = %self.branch, error = %e, requests = batch.len(), "state store batch failed");
                for w in batch {
                    let _ = w.reply.send(Err(e.clone()));
                }
            }
        }
    }

    fn try_batch(&mut self, batch: &[PendingWrite]) -> Result<BatchResult, StoreError> {
        // A missing branch (an empty repository, or one without this branch) is started
        // by this write: a root commit, pushed as the branch's first.
        let base = self.fetch()?;
        let repo = self.repo.as_ref().expect("repo opened");
        let url = self.redacted.clone();
        let ge = |op: &'static str| {
            let url = url.clone();
            move |e: git2::Error| StoreError::Git {
                op: op.into(),
                url,
                cause: e.message().to_string(),
            }
        };
        let mut index = Index::new().map_err(ge("index"))?;
        let base_tree = match base {
            Some(base) => {
                let tree = repo
                    .find_commit(base)
                    .and_then(|c| c.tree())
                    .map_err(ge("read"))?;
                index.read_tree(&tree).map_err(ge("index"))?;
                Some(tree.id())
            }
            None => None,
        };
        let mut changed = Vec::with_capacity(batch.len());
        for w in batch {
            changed.push(apply_ops(repo, &mut index, &w.ops).map_err(ge("write"))?);
        }
        let tree_id = index.write_tree_to(repo).map_err(ge("write-tree"))?;
        let unchanged = match base_tree {
            Some(t) => t == tree_id,
            // Nothing to write on an unborn branch: no empty first commit.
            None => changed.iter().all(|c| !c),
        };
        if unchanged {
            let v = base.map(|b| b.to_string()).unwrap_or_default();
            return Ok(BatchResult::Done(
                batch
                    .iter()
                    .map(|_| WriteOutcome {
                        version_id: v.clone(),
                        changed: false,
                    })
                    .collect(),
            ));
        }
        let message = commit_message(batch);
        let commit = write_commit(
            repo,
            tree_id,
            base,
            &self.author_name,
            &self.author_email,
            &message,
        )
        .map_err(ge("commit"))?;
        match self.push(commit)? {
            PushResult::Rejected(cause) => Ok(BatchResult::Rejected(cause)),
            PushResult::Pushed => {
                let repo = self.repo.as_ref().expect("repo opened");
                let _ = repo.reference(&self.tracking_ref(), commit, true, "pushed");
                tracing::debug!(url = %self.redacted, branch = %self.branch, commit = %commit, requests = batch.len(), "state store commit pushed");
                let v = commit.to_string();
                Ok(BatchResult::Done(
                    changed
                        .into_iter()
                        .map(|c| WriteOutcome {
                            version_id: v.clone(),
                            changed: c,
                        })
                        .collect(),
                ))
            }
        }
    }

    /// Fetches and returns the id of the branch tip's tree (None: the branch does not
    /// exist yet, so it holds no files).
    fn tip_tree(&mut self) -> Result<Option<Oid>, StoreError> {
        let Some(tip) = self.fetch()? else {
            return Ok(None);
        };
        let repo = self.repo.as_ref().expect("repo opened");
        repo.find_commit(tip)
            .and_then(|c| c.tree())
            .map(|t| Some(t.id()))
            .map_err(|e| self.git_err("read", e))
    }

    fn read(&mut self, path: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let redacted = self.redacted.clone();
        let Some(tree_id) = self.tip_tree()? else {
            return Ok(None);
        };
        let repo = self.repo.as_ref().expect("repo opened");
        let tree = repo
            .find_tree(tree_id)
            .map_err(|e| self.git_err("read", e))?;
        let entry = match tree.get_path(Path::new(path)) {
            Ok(e) => e,
            Err(e) if e.code() == ErrorCode::NotFound => return Ok(None),
            Err(e) => {
                return Err(StoreError::Git {
                    op: "read".into(),
                    url: redacted,
                    cause: e.message().to_string(),
                });
            }
        };
        if entry.kind() != Some(git2::ObjectType::Blob) {
            return Ok(None);
        }
        let blob = repo.find_blob(entry.id()).map_err(|e| StoreError::Git {
            op: "read".into(),
            url: redacted,
            cause: e.message().to_string(),
        })?;
        Ok(Some(blob.content().to_vec()))
    }

    fn list(&mut self, dir: &str) -> Result<Vec<String>, StoreError> {
        let redacted = self.redacted.clone();
        let Some(tree_id) = self.tip_tree()? else {
            return Ok(Vec::new());
        };
        let repo = self.repo.as_ref().expect("repo opened");
        let tree = repo
            .find_tree(tree_id)
            .map_err(|e| self.git_err("list", e))?;
        let sub = if dir.is_empty() {
            tree
        } else {
            match tree.get_path(Path::new(dir)) {
                Ok(e) if e.kind() == Some(git2::ObjectType::Tree) => {
                    repo.find_tree(e.id()).map_err(|e| StoreError::Git {
                        op: "list".into(),
                        url: redacted.clone(),
                        cause: e.message().to_string(),
                    })?
                }
                _ => return Ok(Vec::new()),
            }
        };
        let mut out = Vec::new();
        sub.walk(git2::TreeWalkMode::PreOrder, |root, entry| {
            if entry.kind() == Some(git2::ObjectType::Blob)
                && let Ok(name) = entry.name()
            {
                let rel = format!("{root}{name}");
                out.push(if dir.is_empty() {
                    rel
                } else {
                    format!("{dir}/{rel}")
                });
            }
            git2::TreeWalkResult::Ok
        })
        .map_err(|e| StoreError::Git {
            op: "list".into(),
            url: redacted,
            cause: e.message().to_string(),
        })?;
        out.sort();
        Ok(out)
    }

    /// The branch tip as the remote advertises it (`git ls-remote`): one round trip, no
    /// objects transferred.
    fn remote_tip(&mut self) -> Result<Option<Oid>, StoreError> {
        self.refresh_credentials()?;
        self.repo()?;
        let repo = self.repo.as_ref().expect("repo opened");
        let failure = Rc::new(RefCell::new(None));
        let want = format!("refs/heads/{}", self.branch);
        let tip: Result<Option<Oid>, git2::Error> = (|| {
            let mut remote = repo.remote_anonymous(&self.url)?;
            let cb = self.callbacks(failure.clone());
            let conn = remote.connect_auth(Direction::Fetch, Some(cb), None)?;
            Ok(conn
                .list()?
                .iter()
                .find(|h| h.name() == want)
                .map(|h| h.oid()))
        })();
        tip.map_err(|e| {
            let err = self.classify("ls-remote", e, &failure);
            self.forget_refused_credentials(&err);
            err
        })
    }

    /// Reader side: `None` when the advertised branch tip is still `since` (nothing is
    /// fetched then), else the fetched tip and every file under `dir` at it (full paths)
    /// with its blob id.
    fn snapshot(
        &mut self,
        dir: &str,
        since: Option<&str>,
    ) -> Result<Option<GitSnapshot>, StoreError> {
        let advertised = self.remote_tip()?.ok_or_else(|| self.branch_missing())?;
        if since == Some(advertised.to_string().as_str()) {
            return Ok(None);
        }
        let tip = self.fetch()?.ok_or_else(|| self.branch_missing())?;
        let redacted = self.redacted.clone();
        let gerr = |e: git2::Error| StoreError::Git {
            op: "read".into(),
            url: redacted.clone(),
            cause: e.message().to_string(),
        };
        let repo = self.repo.as_ref().expect("repo opened");
        let tree = repo.find_commit(tip).and_then(|c| c.tree()).map_err(gerr)?;
        let sub = if dir.is_empty() {
            Some(tree)
        } else {
            match tree.get_path(Path::new(dir)) {
                Ok(e) if e.kind() == Some(git2::ObjectType::Tree) => {
                    Some(repo.find_tree(e.id()).map_err(gerr)?)
                }
                _ => None,
            }
        };
        let mut files = Vec::new();
        if let Some(sub) = sub {
            sub.walk(git2::TreeWalkMode::PreOrder, |root, entry| {
                if entry.kind() == Some(git2::ObjectType::Blob)
                    && let Ok(name) = entry.name()
                {
                    let rel = format!("{root}{name}");
                    let path = if dir.is_empty() {
                        rel
                    } else {
                        format!("{dir}/{rel}")
                    };
                    files.push((path, entry.id().to_string()));
                }
                git2::TreeWalkResult::Ok
            })
            .map_err(gerr)?;
        }
        files.sort();
        Ok(Some(GitSnapshot {
            tip: tip.to_string(),
            files,
        }))
    }

    fn read_blob(&mut self, id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        self.repo()?;
        let repo = self.repo.as_ref().expect("repo opened");
        let Ok(oid) = Oid::from_str(id) else {
            return Ok(None);
        };
        Ok(repo.find_blob(oid).ok().map(|b| b.content().to_vec()))
    }

    fn validate(&mut self) -> Result<(), StoreError> {
        self.refresh_credentials()?;
        self.repo()?;
        let repo = self.repo.as_ref().expect("repo opened");
        let failure = Rc::new(RefCell::new(None));
        let heads: Result<Vec<String>, git2::Error> = (|| {
            let mut remote = repo.remote_anonymous(&self.url)?;
            let cb = self.callbacks(failure.clone());
            let conn = remote.connect_auth(Direction::Push, Some(cb), None)?;
            let heads = conn.list()?.iter().map(|h| h.name().to_string()).collect();
            Ok(heads)
        })();
        let heads = match heads {
            Ok(h) => h,
            Err(e) => {
                let err = self.classify("push", e, &failure);
                self.forget_refused_credentials(&err);
                return Err(err);
            }
        };
        // A missing branch is fine: the first write starts it.
        let want = format!("refs/heads/{}", self.branch);
        if !heads.contains(&want) {
            tracing::debug!(url = %self.redacted, branch = %self.branch, "branch does not exist yet; the first write creates it");
        }
        Ok(())
    }
}

fn commit_message(batch: &[PendingWrite]) -> String {
    let verb = if batch.iter().any(|w| w.updates) {
        "Update"
    } else {
        "Delete"
    };
    let mut seen = HashSet::new();
    let names: Vec<&str> = batch
        .iter()
        .map(|w| w.name.as_str())
        .filter(|n| seen.insert(*n))
        .collect();
    const SHOWN: usize = 3;
    if names.len() <= SHOWN {
        return format!("{verb} from: {}", names.join(", "));
    }
    let mut msg = format!(
        "{verb} from: {} (+{} more)\n\n",
        names[..SHOWN].join(", "),
        names.len() - SHOWN
    );
    for n in &names {
        msg.push_str(n);
        msg.push('\n');
    }
    msg
}

fn entry_for(path: &str, id: Oid, size: usize) -> IndexEntry {
    IndexEntry {
        ctime: IndexTime::new(0, 0),
        mtime: IndexTime::new(0, 0),
        dev: 0,
        ino: 0,
        mode: 0o100644,
        uid: 0,
        gid: 0,
        file_size: size as u32,
        id,
        flags: 0,
        flags_extended: 0,
        path: path.as_bytes().to_vec(),
    }
}

/// Entries under `dir` (`""` = everything): path → blob id.
fn entries_under(index: &Index, dir: &str) -> BTreeMap<String, Oid> {
    let prefix = format!("{dir}/");
    index
        .iter()
        .filter_map(|e| {
            let p = String::from_utf8(e.path).ok()?;
            (dir.is_empty() || p.starts_with(&prefix)).then_some((p, e.id))
        })
        .collect()
}

/// Makes room for a file at `path`: removes a file standing where a parent directory must be,
/// and a directory standing where the file must be.
fn clear_conflicts(index: &mut Index, path: &str) -> Result<(), git2::Error> {
    let mut parent = String::new();
    for seg in path
        .split('/')
        .collect::<Vec<_>>()
        .split_last()
        .map(|x| x.1)
        .unwrap_or(&[])
    {
        if !parent.is_empty() {
            parent.push('/');
        }
        parent.push_str(seg);
        if index.get_path(Path::new(&parent), 0).is_some() {
            index.remove(Path::new(&parent), 0)?;
        }
    }
    index.remove_dir(Path::new(path), 0)?;
    Ok(())
}

fn put(
    repo: &Repository,
    index: &mut Index,
    path: &str,
    content: &[u8],
) -> Result<bool, git2::Error> {
    let id = repo.blob(content)?;
    if let Some(e) = index.get_path(Path::new(path), 0)
        && e.id == id
        && e.mode == 0o100644
    {
        return Ok(false);
    }
    clear_conflicts(index, path)?;
    index.add(&entry_for(path, id, content.len()))?;
    Ok(true)
}

/// Applies one request's ops to the index; returns whether anything changed.
fn apply_ops(
    repo: &Repository,
    index: &mut Index,
    ops: &[ResolvedOp],
) -> Result<bool, git2::Error> {
    let mut changed = false;
    for ResolvedOp(op) in ops {
        match op {
            WriteOp::Put { path, content } => changed |= put(repo, index, path, content)?,
            WriteOp::Delete { path } => {
                if index.get_path(Path::new(path), 0).is_some() {
                    index.remove(Path::new(path), 0)?;
                    changed = true;
                }
            }
            WriteOp::DeleteDir { dir } => {
                let existing = entries_under(index, dir);
                if !existing.is_empty() {
                    for p in existing.keys() {
                        index.remove(Path::new(p), 0)?;
                    }
                    changed = true;
                }
            }
            WriteOp::ReplaceDir { dir, files } => {
                let existing = entries_under(index, dir);
                let mut wanted = BTreeMap::new();
                for (p, content) in files {
                    wanted.insert(p.clone(), (repo.blob(content)?, content.len()));
                }
                let same = existing.len() == wanted.len()
                    && wanted
                        .iter()
                        .all(|(p, (id, _))| existing.get(p) == Some(id));
                if same {
                    continue;
                }
                for p in existing.keys() {
                    index.remove(Path::new(p), 0)?;
                }
                for (p, (id, size)) in wanted {
                    clear_conflicts(index, &p)?;
                    index.add(&entry_for(&p, id, size))?;
                }
                changed = true;
            }
        }
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redaction() {
        assert_eq!(
            redact_url("https://bot:s3cret@git.example.test/org/state.git"),
            "https://git.example.test/org/state.git"
        );
        assert_eq!(
            redact_url("ssh://deploy@host:2222/x.git"),
            "ssh://deploy@host:2222/x.git"
        );
        assert_eq!(redact_url("file:///srv/x.git"), "file:///srv/x.git");
    }

    #[test]
    fn messages() {
        let mk = |n: &str, updates: bool| PendingWrite {
            name: n.into(),
            updates,
            ops: vec![],
            reply: oneshot::channel().0,
        };
        assert_eq!(commit_message(&[mk("wp-a", true)]), "Update from: wp-a");
        assert_eq!(commit_message(&[mk("wp-a", false)]), "Delete from: wp-a");
        let many: Vec<_> = ["a", "b", "a", "c", "d", "e"]
            .iter()
            .map(|n| mk(n, true))
            .collect();
        let m = commit_message(&many);
        assert!(
            m.starts_with("Update from: a, b, c (+2 more)\n\na\nb\nc\nd\ne\n"),
            "{m}"
        );
    }

    #[test]
    fn auth_debug_hides_secrets() {
        let a = GitAuth::Ssh {
            private_key: "KEYDATA".into(),
            passphrase: Some("hunter2".into()),
            known_hosts: "x".into(),
        };
        let s = format!("{a:?}");
        assert!(!s.contains("KEYDATA") && !s.contains("hunter2"), "{s}");
        let b = GitAuth::Basic {
            username: "u".into(),
            password: "pw-secret".into(),
        };
        assert!(!format!("{b:?}").contains("pw-secret"));
    }

    #[test]
    fn index_ops() {
        let resolved = |ops: &[WriteOp]| ops.iter().cloned().map(ResolvedOp).collect::<Vec<_>>();
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init_bare(dir.path()).unwrap();
        let mut index = Index::new().unwrap();
        let ops = vec![
            WriteOp::ReplaceDir {
                dir: "d/x".into(),
                files: vec![
                    ("d/x/a".into(), b"1".to_vec()),
                    ("d/x/b/c".into(), b"2".to_vec()),
                ],
            },
            WriteOp::Put {
                path: "top".into(),
                content: b"t".to_vec(),
            },
        ];
        assert!(apply_ops(&repo, &mut index, &resolved(&ops)).unwrap());
        assert!(
            !apply_ops(&repo, &mut index, &resolved(&ops)).unwrap(),
            "idempotent"
        );
        let replace = vec![WriteOp::ReplaceDir {
            dir: "d/x".into(),
            files: vec![("d/x/a".into(), b"1".to_vec())],
        }];
        assert!(apply_ops(&repo, &mut index, &resolved(&replace)).unwrap());
        assert_eq!(
            entries_under(&index, "d")
                .keys()
                .cloned()
                .collect::<Vec<_>>(),
            ["d/x/a"]
        );
        // A file where a directory must go, and vice versa.
        let conflict = vec![WriteOp::Put {
            path: "top/inner".into(),
            content: b"i".to_vec(),
        }];
        assert!(apply_ops(&repo, &mut index, &resolved(&conflict)).unwrap());
        assert!(index.get_path(Path::new("top"), 0).is_none());
        let back = vec![WriteOp::Put {
            path: "top".into(),
            content: b"t".to_vec(),
        }];
        assert!(apply_ops(&repo, &mut index, &resolved(&back)).unwrap());
        assert!(index.get_path(Path::new("top/inner"), 0).is_none());
        index.write_tree_to(&repo).unwrap();
        let del = vec![
            WriteOp::DeleteDir { dir: "d".into() },
            WriteOp::Delete {
                path: "nope".into(),
            },
        ];
        assert!(apply_ops(&repo, &mut index, &resolved(&del)).unwrap());
        assert!(!apply_ops(&repo, &mut index, &resolved(&del)).unwrap());
    }
}
