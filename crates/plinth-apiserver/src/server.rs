//! [`ApiServer`]: opens the store, registers built-in kinds and stored CRDs, creates the
//! standard namespaces, runs compaction/maintenance and the garbage collector, serves
//! the in-process router and (optionally) HTTPS on loopback, and writes a kubeconfig.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::task::JoinHandle;

use crate::app::App;
use crate::auth;
use crate::error::Error;
use crate::registry::{Registry, rkey};
use crate::store::{Event, EventSink, Hub, Store};
use crate::tokens::{self, Tokens};
use crate::verbs;

/// Namespaces created at start-up.
pub const STANDARD_NAMESPACES: [&str; 4] = [
    "default",
    "kube-system",
    "kube-public",
    plinth_api::constants::SYSTEM_NAMESPACE,
];

/// Server configuration. Only `data_dir` and `listen` matter for most callers; the rest
/// are tuning knobs with Kubernetes-like defaults.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Directory for the database (`plinth.db`), TLS material (`tls/`), tokens
    /// (`auth/`), the kubeconfig and pod logs (`pod-logs/`).
    pub data_dir: PathBuf,
    /// HTTPS listen address (loopback); `None` serves in-process only. Port 0 picks a
    /// free port (see [`ApiServer::https_addr`]).
    pub listen: Option<SocketAddr>,
    /// How often old revisions are compacted. Default 5 minutes (as kube-apiserver).
    pub compaction_interval: Duration,
    /// Revisions always kept in the log, whatever the interval. Default 1000.
    pub compaction_min_retained: u64,
    /// How often the WAL is checkpointed and free pages are vacuumed. Default 60 s.
    pub maintenance_interval: Duration,
    /// How long an Event is kept after its `lastTimestamp` (kube-apiserver's
    /// `--event-ttl`). Default 1 hour. Expired Events are removed once a minute (or once
    /// per TTL when it is shorter).
    pub event_ttl: Duration,
    /// Interval between BOOKMARK events on watches that allow them. Default 60 s.
    pub bookmark_interval: Duration,
    /// Per-resource watch broadcast (events). A watcher further behind resumes from the
    /// revision log (a filtered one is cut off and re-lists). The buffer keeps its last
    /// events alive, objects included, so it is what bounds the server's memory under a
    /// burst of writes. Default 512.
    pub watch_buffer: usize,
    /// Maximum request body in bytes; larger bodies get 413. Default 3 MiB.
    pub max_body_bytes: usize,
    /// Poll interval of `pods/log?follow=true`. Default 250 ms.
    pub log_poll_interval: Duration,
    /// Extra routes served on the HTTPS listener *outside* the API's authentication and
    /// RBAC (they authenticate requests themselves), e.g. the read-only Git endpoint of
    /// `plinth up`. Their paths must not overlap the Kubernetes API's. Default none.
    pub extra_routes: Option<ExtraRoutes>,
    /// Connection limits and timeouts of the HTTPS listener (connection cap, TLS
    /// handshake, header-read and idle timeouts, HTTP/2 keep-alive, accept backoff); see
    /// [`crate::listener::ListenerLimits`] for each default.
    pub listener: crate::listener::ListenerLimits,
    /// Extra names (DNS names or IP addresses) on the serving certificate, e.g. the
    /// address a kind cluster reaches this machine by. Default none.
    pub tls_extra_names: Vec<String>,
    /// Where request, watch and database metrics are recorded (the process's one set,
    /// shared with the controllers). Default: a set of the server's own.
    pub metrics: Option<Arc<plinth_api::metrics::Metrics>>,
    /// kube-apiserver's `--authorization-mode=RBAC,AlwaysAllow`: what RBAC does not allow
    /// is allowed all the same (upstream's kubectl test environment). Default false: RBAC
    /// alone decides.
    pub always_allow: bool,
    /// Whether Kratix kinds are admitted in-process by `crate::admission` (defaulting
    /// and validation of Promises, Destinations, stores...). `false` makes the server a
    /// plain kube-apiserver for them (CRD schemas only), so that admission webhooks
    /// (`plinth operator`'s) do the refusing, as on a cluster. Default `true`.
    pub builtin_admission: bool,
    /// Whether `/readyz` answers 200 as soon as the server listens. A caller that must
    /// finish its own start-up first (`plinth up` registers the Kratix CRDs) sets `false`
    /// and calls [`ApiServer::mark_ready`]; until then `/readyz` answers 503, so scripts
    /// that wait for readiness never meet a half-registered API. Default `true`.
    pub ready_on_start: bool,
}

/// Routes that [`ServerConfig::extra_routes`] adds to the HTTPS listener.
#[derive(Clone)]
pub struct ExtraRoutes(pub axum::Router);

impl std::fmt::Debug for ExtraRoutes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ExtraRoutes(..)")
    }
}

impl ServerConfig {
    /// Defaults with the given data directory and no network listener.
    pub fn new(data_dir: impl Into<PathBuf>) -> ServerConfig {
        ServerConfig {
            data_dir: data_dir.into(),
            ..ServerConfig::default()
        }
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            data_dir: PathBuf::from("plinth-data"),
            listen: None,
            compaction_interval: Duration::from_secs(300),
            compaction_min_retained: 1000,
            maintenance_interval: Duration::from_secs(60),
            event_ttl: Duration::from_secs(3600),
            bookmark_interval: Duration::from_secs(60),
            watch_buffer: 512,
            max_body_bytes: 3 * 1024 * 1024,
            log_poll_interval: Duration::from_millis(250),
            ready_on_start: true,
            extra_routes: None,
            listener: crate::listener::ListenerLimits::default(),
            tls_extra_names: Vec::new(),
            metrics: None,
            always_allow: false,
            builtin_admission: true,
        }
    }
}

/// Where the store's event sink hands committed changes that background work follows.
struct Followers {
    /// Changes the owner-reference garbage collector handles.
    gc: tokio::sync::mpsc::UnboundedSender<Event>,
    /// One signal per batch that changed a ClusterRole (aggregation).
    roles: tokio::sync::mpsc::UnboundedSender<()>,
}

/// The receiving ends of [`Followers`], for [`spawn_maintenance`].
struct FollowerQueues {
    gc: tokio::sync::mpsc::UnboundedReceiver<Event>,
    roles: tokio::sync::mpsc::UnboundedReceiver<()>,
}

/// A running API server.
pub struct ApiServer {
    app: Arc<App>,
    router: axum::Router,
    https_addr: Option<SocketAddr>,
    kubeconfig: Option<PathBuf>,
    tasks: Vec<JoinHandle<()>>,
    metrics: Arc<plinth_api::metrics::Metrics>,
}

/// Opens the SQLite store at `path`; every stored change is published to the watch
/// `hub`, the ones the garbage collector cares about are sent to [`Followers::gc`], a
/// batch with a ClusterRole change signals [`Followers::roles`]; changes of webhook
/// configurations invalidate `webhooks`' cache.
async fn open_store(
    path: &Path,
    hub: Arc<Hub>,
    followers: Followers,
    webhooks: Arc<crate::webhook::Webhooks>,
) -> Result<Store, Error> {
    let sink: EventSink = Arc::new(move |evs: &[Event]| {
        webhooks.observe(evs);
        hub.publish(evs);
        for e in evs {
            if crate::gc::interesting(e) {
                let _ = followers.gc.send(e.clone());
            }
        }
        if evs.iter().any(crate::default_rbac::is_cluster_role_change) {
            let _ = followers.roles.send(());
        }
    });
    let p = path.to_path_buf();
    let store = tokio::task::spawn_blocking(move || Store::open(&p, sink))
        .await
        .map_err(|e| Error::Invalid(format!("opening the store: {e}")))??;
    Ok(store)
}

/// The built-in kinds plus every stored CRD (one that cannot be served is logged and
/// skipped).
async fn registry_with_stored_crds(store: &Store) -> Result<Registry, Error> {
    let registry = Registry::with_builtins();
    for crd in store
        .all_of(rkey("apiextensions.k8s.io", "customresourcedefinitions"))
        .await?
    {
        if let Err(e) = registry.register_crd(&crd) {
            tracing::warn!(
                "stored CRD {:?} not served: {e}",
                crd.pointer("/metadata/name")
            );
        }
    }
    Ok(registry)
}

/// Creates the standard namespaces, and gives namespaces from earlier runs what newer
/// versions add to every namespace.
async fn ensure_namespaces(app: &Arc<App>, store: &Store) -> Result<(), Error> {
    let ns_info = app
        .registry
        .lookup("", "v1", "namespaces")
        .expect("namespaces are built in");
    for ns in STANDARD_NAMESPACES {
        let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        match verbs::create(
            app,
            &ns_info,
            None,
            obj,
            false,
            &crate::ssa::Owner::Internal,
        )
        .await
        {
            Ok(_) => {}
            Err(e) if e.code == 409 => {}
            Err(e) => {
                return Err(Error::Invalid(format!(
                    "creating namespace {ns}: {}",
                    e.message
                )));
            }
        }
    }
    for ns in store.all_of(rkey("", "namespaces")).await? {
        if let Some(name) = ns.pointer("/metadata/name").and_then(|n| n.as_str()) {
            verbs::namespace_defaults(app, name)
                .await
                .map_err(|e| Error::Invalid(format!("namespace {name}: {}", e.message)))?;
        }
    }
    Ok(())
}

/// The `kubernetes` Service in `default` that every kube-apiserver keeps for itself
/// (clients and upstream tests look for it): `https` on port 443, the API server's port as
/// target. Created once; later starts leave it as it is. Plinth allocates no Service IPs,
/// so its clusterIP is the first address of kube's default service range.
async fn ensure_kubernetes_service(
    app: &Arc<App>,
    port: Option<u16>,
) -> Result<(), crate::error::ApiError> {
    let info = app
        .registry
        .lookup("", "v1", "services")
        .expect("services are built in");
    let target = port.filter(|p| *p != 0).unwrap_or(6443);
    let obj = json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "kubernetes", "namespace": "default",
            "labels": {"component": "apiserver", "provider": "kubernetes"}},
        "spec": {"type": "ClusterIP", "clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.1"],
            "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": target}]}
    });
    match verbs::create(
        app,
        &info,
        Some("default"),
        obj,
        false,
        &crate::ssa::Owner::Internal,
    )
    .await
    {
        Err(e) if e.code != 409 => Err(e),
        _ => Ok(()),
    }
}

/// Serves `base` (with network authentication, plus the extra routes) over HTTPS on
/// `addr` and writes `<data_dir>/kubeconfig`. Returns the bound address, the
/// kubeconfig's path and the serving task.
async fn serve_https(
    app: &Arc<App>,
    config: &ServerConfig,
    addr: SocketAddr,
    files: &crate::tls::TlsFiles,
    base: axum::Router,
) -> Result<(SocketAddr, PathBuf, tokio::task::JoinHandle<()>), Error> {
    let tls = crate::tls::server_config(files)?;
    let listener = crate::listener::bind(addr, config.listener.backlog)
        .map_err(|source| Error::Listen { addr, source })?;
    let local = listener
        .local_addr()
        .map_err(|source| Error::Listen { addr, source })?;
    let _ = app.https_addr.set(local);
    let mut net = base.layer(axum::middleware::from_fn_with_state(
        app.clone(),
        auth::network_auth,
    ));
    if let Some(ExtraRoutes(extra)) = &config.extra_routes {
        net = extra.clone().merge(net);
    }
    let task =
        serve_on_own_runtime(listener, tls, net, config.listener.clone()).map_err(|source| {
            Error::Listen {
                addr: local,
                source,
            }
        })?;
    let path = app.data_dir.join("kubeconfig");
    write_kubeconfig(&path, local, &files.ca_pem, app.tokens.admin_token())?;
    Ok((local, path, task))
}

impl ApiServer {
    /// Starts the server: opens the store in `config.data_dir`, registers built-ins and
    /// stored CRDs, creates the namespaces `default`, `kube-system`, `kube-public` and
    /// `kratix-platform-system`, serves HTTPS when `config.listen` is set, and then writes
    /// `<data_dir>/kubeconfig` (admin token, CA, real address).
    ///
    /// Errors: the data directory cannot be created, the database cannot be opened, the
    /// TLS material cannot be generated, or the address cannot be bound.
    pub async fn start(config: ServerConfig) -> Result<ApiServer, Error> {
        let dir = config.data_dir.clone();
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        let pod_logs = dir.join(plinth_api::paths::POD_LOG_DIR);
        std::fs::create_dir_all(&pod_logs).map_err(|e| Error::io(pod_logs.clone(), e))?;
        let tokens = Tokens::load(&dir.join("auth"))?;
        let hub = Arc::new(Hub::new(config.watch_buffer));
        let (gc_tx, gc_rx) = tokio::sync::mpsc::unbounded_channel::<Event>();
        let (roles_tx, roles_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
        let followers = Followers {
            gc: gc_tx,
            roles: roles_tx,
        };
        let queues = FollowerQueues {
            gc: gc_rx,
            roles: roles_rx,
        };
        let store_path = dir.join("plinth.db");
        let webhooks = Arc::new(crate::webhook::Webhooks::default());
        let store = open_store(&store_path, hub.clone(), followers, webhooks.clone()).await?;
        let tls_files = match config.listen {
            Some(_) => Some(crate::tls::load_or_create_with_names(
                &dir.join("tls"),
                &config.tls_extra_names,
            )?),
            None => None,
        };
        let registry = registry_with_stored_crds(&store).await?;
        let app = Arc::new(App {
            store: store.clone(),
            hub,
            registry,
            data_dir: dir.clone(),
            bookmark_interval: config.bookmark_interval,
            log_poll_interval: config.log_poll_interval,
            max_body_bytes: config.max_body_bytes,
            tokens,
            https_addr: std::sync::OnceLock::new(),
            ca_pem: tls_files.as_ref().map(|f| f.ca_pem.clone()),
            ready: std::sync::atomic::AtomicBool::new(config.ready_on_start),
            webhooks,
            builtin_admission: config.builtin_admission,
            always_allow: config.always_allow,
        });
        let metrics = config.metrics.clone().unwrap_or_default();
        let mut tasks = spawn_maintenance(&config, &app, &store, &store_path, queues, &metrics);
        ensure_namespaces(&app, &store).await?;
        ensure_kubernetes_service(&app, config.listen.map(|a| a.port()))
            .await
            .map_err(|e| Error::Invalid(format!("service default/kubernetes: {}", e.message)))?;
        crate::default_rbac::ensure(&app)
            .await
            .map_err(|e| Error::Invalid(format!("default ClusterRoles: {}", e.message)))?;

        // RBAC runs after authentication (inner layer): both routers enforce it.
        let (authorizer, authz_task) = crate::authz::Authorizer::start(app.clone());
        tasks.push(authz_task);
        let base = crate::router::routes(app.clone())
            .layer(axum::middleware::from_fn_with_state(
                authorizer,
                crate::authz::authorize_request,
            ))
            .layer(axum::middleware::from_fn_with_state(
                crate::metrics::Observer {
                    metrics: metrics.clone(),
                    app: app.clone(),
                },
                crate::metrics::observe_request,
            ));
        let router = base.clone().layer(axum::middleware::from_fn_with_state(
            app.clone(),
            auth::in_process_auth,
        ));
        let (https_addr, kubeconfig) = match config.listen {
            Some(addr) => {
                let files = tls_files.as_ref().expect("loaded above when listening");
                let (local, path, task) = serve_https(&app, &config, addr, files, base).await?;
                tasks.push(task);
                (Some(local), Some(path))
            }
            None => (None, None),
        };
        Ok(ApiServer {
            app,
            router,
            https_addr,
            kubeconfig,
            tasks,
            metrics,
        })
    }

    /// The metrics this server records into ([`ServerConfig::metrics`]).
    pub fn metrics(&self) -> Arc<plinth_api::metrics::Metrics> {
        self.metrics.clone()
    }

    /// The in-process router: requests without an `Authorization` header act as the admin.
    pub fn router(&self) -> axum::Router {
        self.router.clone()
    }

    /// A `kube::Client` on the in-process router (default namespace `default`).
    pub fn client(&self) -> kube::Client {
        kube::Client::new(self.router(), "default")
    }

    /// The bound HTTPS address, when serving over the network.
    pub fn https_addr(&self) -> Option<SocketAddr> {
        self.https_addr
    }

    /// `<data_dir>/kubeconfig`, when serving over the network.
    pub fn kubeconfig_path(&self) -> Option<PathBuf> {
        self.kubeconfig.clone()
    }

    /// The CA certificate (PEM file) clients should trust, when serving over the network.
    pub fn ca_cert_path(&self) -> Option<PathBuf> {
        self.https_addr
            .map(|_| self.app.data_dir.join("tls").join("ca.crt"))
    }

    /// Makes `/readyz` answer 200 (for servers started with
    /// [`ServerConfig::ready_on_start`] `false`).
    pub fn mark_ready(&self) {
        self.app
            .ready
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// The admin bearer token (also in the kubeconfig).
    pub fn admin_token(&self) -> String {
        self.app.tokens.admin_token().to_string()
    }

    /// The data directory.
    pub fn data_dir(&self) -> PathBuf {
        self.app.data_dir.clone()
    }

    /// Latest committed resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.app.store.head()
    }

    /// Every change stored after resourceVersion `after`, in order, as
    /// `(resourceVersion, "ADDED" | "MODIFIED" | "DELETED", "group/plural", namespace, name)`.
    ///
    /// # Errors
    /// The storage could not be read.
    pub async fn changes_since(
        &self,
        after: u64,
    ) -> Result<Vec<(u64, &'static str, String, String, String)>, Error> {
        let changes = self.app.store.changes_since(after).await?;
        Ok(changes
            .into_iter()
            .map(|(rv, t, k)| (rv, t.as_str(), k.rkey, k.ns, k.name))
            .collect())
    }

    /// Compacts the revision log now, keeping the last `retain` revisions; returns the
    /// new compaction point (watches from at or below it get 410 Expired).
    pub async fn compact(&self, retain: u64) -> Result<u64, Error> {
        let head = self.app.store.head();
        Ok(self.app.store.compact(head.saturating_sub(retain)).await?)
    }

    /// Size in bytes of the database file plus its WAL.
    pub fn data_file_size(&self) -> u64 {
        let p = self.app.store.path().to_path_buf();
        let wal = PathBuf::from(format!("{}-wal", p.display()));
        [p, wal]
            .iter()
            .filter_map(|f| std::fs::metadata(f).ok())
            .map(|m| m.len())
            .sum()
    }

    /// Deletes the Events last seen before `now - ttl` now (what the server does once a
    /// minute with [`ServerConfig::event_ttl`]); returns how many.
    pub async fn expire_events(&self, ttl: Duration, now: jiff::Timestamp) -> Result<usize, Error> {
        Ok(crate::expiry::expire_events(&self.app.store, ttl, now).await?)
    }

    /// Runs a WAL checkpoint and incremental vacuum now.
    pub async fn maintain(&self) -> Result<(), Error> {
        Ok(self.app.store.maintain().await?)
    }

    /// Stops the background tasks and the network listener. In-flight writes that were
    /// acknowledged are durable already.
    pub async fn shutdown(mut self) {
        for t in self.tasks.drain(..) {
            t.abort();
            let _ = t.await;
        }
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Step of [`ApiServer::start`]: the background work of the store (database size,
/// unserved resources' series, owner-reference GC, ClusterRole aggregation, compaction,
/// maintenance, Event expiry), each a task that ends with the server.
fn spawn_maintenance(
    config: &ServerConfig,
    app: &Arc<App>,
    store: &Store,
    store_path: &std::path::Path,
    queues: FollowerQueues,
    metrics: &Arc<plinth_api::metrics::Metrics>,
) -> Vec<tokio::task::JoinHandle<()>> {
    vec![
        tokio::spawn(crate::metrics::track_sqlite_size(
            metrics.clone(),
            store_path.to_path_buf(),
            Duration::from_secs(15),
        )),
        tokio::spawn(crate::metrics::prune_unserved_loop(
            metrics.clone(),
            Arc::downgrade(app),
            Duration::from_secs(60),
        )),
        tokio::spawn(crate::gc::run(Arc::downgrade(app), queues.gc)),
        tokio::spawn(crate::default_rbac::aggregation_loop(
            Arc::downgrade(app),
            queues.roles,
        )),
        tokio::spawn(compaction_loop(
            store.clone(),
            config.compaction_interval,
            config.compaction_min_retained,
        )),
        tokio::spawn(maintenance_loop(store.clone(), config.maintenance_interval)),
        tokio::spawn(crate::expiry::expiry_loop(
            store.clone(),
            config.event_ttl,
            config
                .event_ttl
                .clamp(Duration::from_secs(1), Duration::from_secs(60)),
        )),
    ]
}

async fn compaction_loop(store: Store, every: Duration, min_retained: u64) {
    // Each tick compacts up to the head seen at the previous tick, so at least one
    // interval of history (and at least `min_retained` revisions) stays watchable.
    let mut prev = store.head();
    let mut t = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    loop {
        t.tick().await;
        let head = store.head();
        let target = prev.min(head.saturating_sub(min_retained));
        if let Err(e) = store.compact(target).await {
            tracing::warn!("compaction to {target} failed (retried next interval): {e}");
        }
        prev = head;
    }
}

async fn maintenance_loop(store: Store, every: Duration) {
    let mut t = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    loop {
        t.tick().await;
        if let Err(e) = store.maintain().await {
            tracing::warn!("checkpoint/vacuum failed (retried next interval): {e}");
        }
    }
}

/// Worker threads of the runtime that serves HTTPS (at most this many, and no more than
/// the machine has cores).
const HTTPS_WORKERS: usize = 2;

/// Serves HTTPS on a runtime of its own, so kubectl, pipelines and remote watchers are
/// answered while the controllers keep the caller's runtime busy: both share the store,
/// not a scheduler queue. The returned task (on the caller's runtime) stands for the
/// server: aborting or dropping it stops the listener and every connection.
///
/// # Errors
/// The runtime or its thread cannot be created, or the listener cannot be moved to it.
fn serve_on_own_runtime(
    listener: tokio::net::TcpListener,
    tls: Arc<rustls::ServerConfig>,
    router: axum::Router,
    limits: crate::listener::ListenerLimits,
) -> std::io::Result<JoinHandle<()>> {
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(HTTPS_WORKERS);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name("plinth-https")
        .enable_all()
        .build()?;
    // A socket belongs to the runtime that registered it: hand it over as a std socket.
    let listener = listener.into_std()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    std::thread::Builder::new()
        .name("plinth-https-main".into())
        .spawn(move || {
            runtime.spawn(async move {
                match tokio::net::TcpListener::from_std(listener) {
                    Ok(l) => crate::listener::serve(l, Some(tls), router, limits, "HTTPS").await,
                    Err(e) => tracing::error!("HTTPS listener: {e}"),
                }
            });
            // Dropping the runtime when the stand-in task ends closes every connection.
            let _ = runtime.block_on(stopped);
        })?;
    Ok(tokio::spawn(async move {
        let _stop = stop;
        std::future::pending::<()>().await
    }))
}

fn write_kubeconfig(
    path: &std::path::Path,
    addr: SocketAddr,
    ca_pem: &str,
    token: &str,
) -> Result<(), Error> {
    use base64::Engine;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: plinth\n  cluster:\n    server: https://{addr}\n    certificate-authority-data: {ca}\nusers:\n- name: plinth-admin\n  user:\n    token: {token}\ncontexts:\n- name: plinth\n  context:\n    cluster: plinth\n    user: plinth-admin\n    namespace: default\ncurrent-context: plinth\n"
    );
    tokens::write_private(path, text.as_bytes())
}
