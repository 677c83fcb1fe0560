//! The whole platform in one process: the embedded API server, the controllers and the
//! Job runner, plus the bootstrap of a local Git state store and a Destination.
//! Used by `plinth up` and `plinth quickstart`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail};
use kube::api::{Api, DynamicObject, PostParams};
use plinth_apiserver::{ApiServer, ServerConfig};
use plinth_controllers::{Context, ControllerConfig};
use serde_json::json;
use tokio::task::JoinHandle;

/// Name of the bootstrapped GitStateStore and Destination.
pub const BOOTSTRAP_NAME: &str = "local";

/// Name, label value (`environment: platform`) and directory of the bootstrapped
/// Destination that stands for the platform itself: what Works land there is applied back
/// into the platform by an in-process agent (compound Promises).
pub const PLATFORM_DESTINATION: &str = "platform";

/// How often the platform's own agent looks at the store besides being woken by the
/// `platform` Destination's WorkPlacements.
pub const PLATFORM_AGENT_INTERVAL: Duration = Duration::from_secs(30);

/// How to start the platform.
#[derive(Clone, Debug)]
pub struct PlatformOptions {
    /// Where the database, the CA, the kubeconfig, logs and the local state store live.
    pub data_dir: PathBuf,
    /// HTTPS address for kubectl and pipelines (`127.0.0.1:0` picks a free port).
    pub listen: SocketAddr,
    /// Create a local Git state store and a Destination on first start.
    pub bootstrap: bool,
    /// Run the controllers in this process (off when `plinth operator` runs them).
    pub controllers: bool,
    /// Run the embedded Job runner.
    pub runner: bool,
    /// Image map file for the runner (images run as local commands).
    pub image_map: Option<PathBuf>,
    /// How long the Git writer waits to batch writes into one commit.
    pub git_batch_window: Duration,
    /// Container log size cap in bytes before rotation.
    pub container_log_max_size: u64,
    /// Container log files kept, the current one included.
    pub container_log_max_files: usize,
    /// Pipeline Jobs the runner runs at the same time.
    pub max_parallel_jobs: usize,
    /// Run Plinth's own adapter containers (reader, work-writer, status-writer) inside
    /// the runner's process rather than a sandbox each (`plinth_runner::inprocess`).
    pub adapters_in_process: bool,
    /// kube-apiserver's `--authorization-mode=RBAC,AlwaysAllow` (see
    /// `plinth_apiserver::ServerConfig::always_allow`); false: RBAC alone.
    pub always_allow: bool,
    /// Admit Kratix kinds in-process (`plinth_apiserver::ServerConfig::builtin_admission`);
    /// false leaves it to admission webhooks, as on a cluster.
    pub builtin_admission: bool,
}

impl PlatformOptions {
    /// A private platform in `data_dir`: a free port on 127.0.0.1, controllers and the
    /// runner in this process (adapter containers in-process), no bootstrap, RBAC alone,
    /// built-in admission, a 100 ms Git batch window and the runner's default limits. Change fields with struct update
    /// syntax.
    pub fn private(data_dir: PathBuf) -> PlatformOptions {
        PlatformOptions {
            data_dir,
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            bootstrap: false,
            controllers: true,
            runner: true,
            image_map: None,
            git_batch_window: Duration::from_millis(100),
            container_log_max_size: plinth_runner::logfile::DEFAULT_MAX_SIZE,
            container_log_max_files: plinth_runner::logfile::DEFAULT_MAX_FILES,
            max_parallel_jobs: plinth_runner::config::DEFAULT_MAX_PARALLEL_JOBS,
            adapters_in_process: true,
            always_allow: false,
            builtin_admission: true,
        }
    }
}

/// A running platform. Dropping it without [`Platform::shutdown`] aborts the tasks.
pub struct Platform {
    pub server: ApiServer,
    /// Held for the platform's lifetime: one process per data dir.
    _lock: std::fs::File,
    tasks: Vec<JoinHandle<()>>,
    /// The bootstrapped bare repository, when bootstrapping was asked for.
    pub state_store_repo: Option<PathBuf>,
    /// The read-only Git endpoint (`/git/<GitStateStore>` on the HTTPS listener).
    pub git: std::sync::Arc<crate::gitserve::GitServe>,
    /// The read-only web view (`/ui/` on the HTTPS listener).
    pub web: std::sync::Arc<crate::web::Web>,
    /// The platform's one set of metrics (API server and controllers), for `/metrics`.
    pub metrics: std::sync::Arc<plinth_api::metrics::Metrics>,
}

impl Platform {
    /// Starts the API server, then the controllers and runner on its in-process client,
    /// then bootstraps the local state store and Destination (once per data dir).
    pub async fn start(opts: PlatformOptions) -> anyhow::Result<Platform> {
        Self::start_with_tls_names(opts, &[]).await
    }

    /// [`Platform::start`], with extra names (DNS names or IP addresses) on the HTTPS
    /// certificate, for clients that reach this machine by another address (a GitOps
    /// agent in a kind cluster pulling the state store).
    ///
    /// A start that fails on a new data directory (absent or empty) leaves nothing behind,
    /// so a half-initialised directory never passes for a platform's. One that held
    /// anything before is left as the failed start left it: another program's files may
    /// be in it, and removing only what this run created could race with them.
    pub async fn start_with_tls_names(
        opts: PlatformOptions,
        tls_names: &[String],
    ) -> anyhow::Result<Platform> {
        let before = DataDirBefore::read(&opts.data_dir);
        let lock = prepare(&opts).inspect_err(|_| {
            if matches!(before, DataDirBefore::Absent) {
                // Only an empty directory: another process may have created it meanwhile.
                let _ = std::fs::remove_dir(&opts.data_dir);
            }
        })?;
        // Clean up only under the lock, so no other Plinth's files are ever touched; the
        // duplicate shares the lock and outlives the platform's copy on failure.
        let held = lock.try_clone().context("duplicating the data dir lock")?;
        let started = Self::start_locked(&opts, tls_names, lock).await;
        if started.is_err() {
            before.remove_what_came_since(&opts.data_dir);
        }
        drop(held);
        started
    }

    async fn start_locked(
        opts: &PlatformOptions,
        tls_names: &[String],
        lock: std::fs::File,
    ) -> anyhow::Result<Platform> {
        let opts = opts.clone();
        let git = crate::gitserve::GitServe::new(&opts.data_dir)?;
        let mut config = ServerConfig::new(&opts.data_dir);
        config.listen = Some(opts.listen);
        config.tls_extra_names = tls_names.to_vec();
        config.always_allow = opts.always_allow;
        config.builtin_admission = opts.builtin_admission;
        config.ready_on_start = false;
        let web = crate::web::Web::new(&opts.data_dir);
        let metrics = std::sync::Arc::new(plinth_api::metrics::Metrics::new());
        config.metrics = Some(metrics.clone());
        config.extra_routes = Some(plinth_apiserver::ExtraRoutes(
            crate::gitserve::router(git.clone()).merge(crate::web::router(web.clone())),
        ));
        let server = ApiServer::start(config)
            .await
            .with_context(|| format!("starting the API server in {}", opts.data_dir.display()))?;
        let client = server.client();
        git.set_client(client.clone());
        web.set_client(client.clone(), server.admin_token());
        register_kratix_crds(&client).await?;
        server.mark_ready();
        let mut tasks = Vec::new();

        if opts.controllers {
            let defaults = ControllerConfig {
                data_dir: opts.data_dir.join("controllers"),
                git_batch_window: opts.git_batch_window,
                ..ControllerConfig::default()
            };
            let ctx = Context::with_metrics(client.clone(), defaults.clone(), metrics.clone());
            tasks.push(tokio::spawn(plinth_controllers::run_all(ctx, defaults)));
        }
        if opts.runner {
            tasks.extend(start_runner(&server, &client, &opts)?);
        }
        // The CronJob controller is the control plane's, as in Kubernetes: it starts Jobs
        // (health checks, user CronJobs) whether this process runs them (`--no-runner`:
        // they stay pending, as on a cluster without kubelets).
        if opts.runner || opts.controllers {
            tasks.push(tokio::spawn(plinth_runner::cronjob::run_cronjobs(
                client.clone(),
                std::sync::Arc::new(jiff::Timestamp::now),
                std::time::Duration::from_secs(1),
            )));
        }
        let state_store_repo = if opts.bootstrap {
            Some(bootstrap(&server, &opts.data_dir).await?)
        } else {
            None
        };
        if opts.bootstrap && opts.controllers {
            tasks.push(start_platform_agent(&client, &opts.data_dir, metrics.clone()).await?);
        }
        Ok(Platform {
            server,
            _lock: lock,
            tasks,
            state_store_repo,
            git,
            web,
            metrics,
        })
    }

    /// Stops the controllers and the runner, then the API server.
    pub async fn shutdown(self) {
        for t in &self.tasks {
            t.abort();
        }
        self.server.shutdown().await;
    }
}

/// Takes an exclusive lock on `<data_dir>/plinth.lock` (released when the process ends),
/// so a second `plinth up` on the same data dir fails instead of sharing its database.
fn lock_data_dir(data_dir: &Path) -> anyhow::Result<std::fs::File> {
    use std::io::{Read, Seek, Write};
    let path = data_dir.join("plinth.lock");
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    if file.try_lock().is_err() {
        let mut holder = String::new();
        let _ = file.read_to_string(&mut holder);
        bail!(
            "data dir {} is in use by another Plinth process (pid {}); stop it or choose another --data-dir",
            data_dir.display(),
            holder.trim().if_empty("unknown")
        );
    }
    file.set_len(0)?;
    file.rewind()?;
    write!(file, "{}", std::process::id())?;
    Ok(file)
}

trait IfEmpty {
    fn if_empty<'a>(&'a self, default: &'a str) -> &'a str;
}

impl IfEmpty for str {
    fn if_empty<'a>(&'a self, default: &'a str) -> &'a str {
        if self.is_empty() { default } else { self }
    }
}

/// What a data directory was before a start, so that a failed start on a new one can
/// remove what it created.
#[derive(Debug, PartialEq)]
enum DataDirBefore {
    /// The directory did not exist.
    Absent,
    /// It existed and was empty.
    Empty,
    /// It held something, or could not be read: nothing is removed.
    Used,
}

impl DataDirBefore {
    fn read(dir: &Path) -> DataDirBefore {
        match std::fs::read_dir(dir) {
            Ok(mut rd) => match rd.next() {
                None => DataDirBefore::Empty,
                Some(_) => DataDirBefore::Used,
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => DataDirBefore::Absent,
            Err(_) => DataDirBefore::Used,
        }
    }

    /// Best effort: a failure to remove is logged, the start's own error is what counts.
    fn remove_what_came_since(&self, dir: &Path) {
        let remove = |p: &Path| {
            let r = if p.is_dir() {
                std::fs::remove_dir_all(p)
            } else {
                std::fs::remove_file(p)
            };
            if let Err(e) = r {
                tracing::warn!(path = %p.display(), error = %e, "removing what a failed start created");
            }
        };
        match self {
            DataDirBefore::Absent if dir.exists() => remove(dir),
            DataDirBefore::Empty => {
                for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                    remove(&e.path());
                }
            }
            _ => {}
        }
    }
}

/// Checks the listen address, the data directory and the runner's image map before
/// anything is written, and takes the data directory's lock (one `plinth up` per
/// directory).
fn prepare(opts: &PlatformOptions) -> anyhow::Result<std::fs::File> {
    // A busy port is the most common failed start: find it before creating any file. (The
    // server binds again later; a port taken in between is handled by the clean-up.)
    std::net::TcpListener::bind(opts.listen)
        .with_context(|| format!("cannot listen on {} (--listen)", opts.listen))?;
    // A bad image map would stop the runner and leave every pipeline pending: refuse
    // to start instead.
    if let (true, Some(map)) = (opts.runner, &opts.image_map) {
        plinth_runner::image::ImageMap::load(map)
            .with_context(|| format!("--image-map {}", map.display()))?;
    }
    if opts.data_dir.exists() && !opts.data_dir.is_dir() {
        bail!(
            "data dir {} exists and is not a directory",
            opts.data_dir.display()
        );
    }
    // The data dir holds the admin kubeconfig, the CA key and every Secret: a new one is
    // for its owner alone. One that exists keeps the permissions its owner gave it.
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&opts.data_dir)
            .with_context(|| format!("creating data dir {}", opts.data_dir.display()))?;
    }
    lock_data_dir(&opts.data_dir)
}

/// Starts the Job runner (over the HTTPS listener, trusting the cluster CA).
fn start_runner(
    server: &ApiServer,
    client: &kube::Client,
    opts: &PlatformOptions,
) -> anyhow::Result<Vec<JoinHandle<()>>> {
    let mut tasks = Vec::new();
    let addr = server
        .https_addr()
        .context("the runner needs the HTTPS listener")?;
    let ca_path = server
        .ca_cert_path()
        .context("the runner needs the cluster CA")?;
    let ca_pem = std::fs::read_to_string(&ca_path)
        .with_context(|| format!("reading the cluster CA {}", ca_path.display()))?;
    if plinth_runner::config::find_on_path("bwrap").is_none() {
        tracing::warn!(
            "bubblewrap (bwrap) is not installed: pipeline containers will run on the host, \
             where /kratix/input, /kratix/output and /kratix/metadata do not exist; install bubblewrap"
        );
    }
    let mut rc = plinth_runner::RunnerConfig::new(
        opts.data_dir.clone(),
        addr.ip().to_string(),
        addr.port(),
        ca_pem,
    );
    rc.image_map = opts.image_map.clone();
    rc.container_log_max_size = opts.container_log_max_size;
    rc.container_log_max_files = opts.container_log_max_files;
    rc.max_parallel_jobs = opts.max_parallel_jobs;
    if opts.adapters_in_process {
        rc.adapter_program = Some(std::sync::Arc::new(
            crate::cmd::pipeline_adapter::in_process::InProcessAdapter,
        ));
    }
    let runner_client = client.clone();
    tasks.push(tokio::spawn(async move {
        if let Err(e) = plinth_runner::run(runner_client, rc).await {
            tracing::error!(error = %e, "the Job runner stopped");
        }
    }));
    Ok(tasks)
}

/// Creates or updates the Kratix CRDs (generated from `plinth-api`'s types) so every
/// `platform.kratix.io` kind is served before the controllers start.
async fn register_kratix_crds(client: &kube::Client) -> anyhow::Result<()> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in plinth_api::crds::all_crds() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        match crds.get_opt(&name).await? {
            None => {
                crds.create(&PostParams::default(), &crd)
                    .await
                    .with_context(|| format!("registering CRD {name}"))?;
            }
            Some(existing) if existing.spec != crd.spec => {
                let mut updated = crd.clone();
                updated.metadata.resource_version = existing.metadata.resource_version.clone();
                crds.replace(&name, &PostParams::default(), &updated)
                    .await
                    .with_context(|| format!("updating CRD {name}"))?;
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// Starts the agent of the Destination `platform`: it applies `platform/` of the local
/// store into this platform, so resource requests a compound Promise's pipeline outputs
/// are created here and run.
async fn start_platform_agent(
    client: &kube::Client,
    data_dir: &Path,
    metrics: std::sync::Arc<plinth_api::metrics::Metrics>,
) -> anyhow::Result<JoinHandle<()>> {
    let store = crate::destination_agent::StoreRef {
        kind: "GitStateStore".into(),
        name: BOOTSTRAP_NAME.into(),
    };
    let source =
        crate::destination_agent::store_config(client, &store, &data_dir.join("agent")).await?;
    crate::destination_agent::spawn_into_platform(
        PLATFORM_DESTINATION,
        source,
        PLATFORM_DESTINATION,
        client.clone(),
        PLATFORM_AGENT_INTERVAL,
        metrics,
    )
    .await
}

/// Creates (once) a bare Git repository in the data dir, a `GitStateStore` pointing at it
/// over `file://`, a `Destination` `local` on that store labelled `environment: dev` (the
/// selector most marketplace Promises use), and a `Destination` `platform` labelled
/// `environment: platform` (Kratix's convention for compound Promises) with
/// `strictMatchLabels: true`, so only Works that select `environment: platform` land there —
/// a Promise without selectors keeps scheduling to `local` only. Existing objects are left
/// as they are.
async fn bootstrap(server: &ApiServer, data_dir: &Path) -> anyhow::Result<PathBuf> {
    let repo = data_dir.join(crate::gitserve::LOCAL_STORE_REPO);
    if !repo.exists() {
        plinth_statestore::git::init_bare(&repo, "main")
            .with_context(|| format!("creating the local state store {}", repo.display()))?;
    }
    let client = server.client();
    let store = json!({
        "apiVersion": "platform.kratix.io/v1alpha1",
        "kind": "GitStateStore",
        "metadata": {"name": BOOTSTRAP_NAME},
        "spec": {"url": format!("file://{}", repo.display()), "branch": "main", "authMethod": "basicAuth"},
    });
    let destination = json!({
        "apiVersion": "platform.kratix.io/v1alpha1",
        "kind": "Destination",
        "metadata": {"name": BOOTSTRAP_NAME, "labels": {"environment": "dev"}},
        "spec": {"path": BOOTSTRAP_NAME, "stateStoreRef": {"kind": "GitStateStore", "name": BOOTSTRAP_NAME}},
    });
    let platform = json!({
        "apiVersion": "platform.kratix.io/v1alpha1",
        "kind": "Destination",
        "metadata": {"name": PLATFORM_DESTINATION, "labels": {"environment": PLATFORM_DESTINATION}},
        "spec": {
            "path": PLATFORM_DESTINATION,
            "strictMatchLabels": true,
            "stateStoreRef": {"kind": "GitStateStore", "name": BOOTSTRAP_NAME},
        },
    });
    for (obj, plural) in [
        (store, "gitstatestores"),
        (destination, "destinations"),
        (platform, "destinations"),
    ] {
        let kind = obj["kind"].as_str().unwrap_or_default().to_string();
        let gvk = kube::api::GroupVersionKind::gvk("platform.kratix.io", "v1alpha1", &kind);
        let ar = kube::api::ApiResource::from_gvk_with_plural(&gvk, plural);
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
        let desired: DynamicObject = serde_json::from_value(obj)?;
        match api.create(&PostParams::default(), &desired).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => bail!(
                "bootstrapping {kind} {}: {e}",
                desired.metadata.name.clone().unwrap_or_default()
            ),
        }
    }
    Ok(repo)
}

/// The default data directory: `<user data dir>/plinth` (e.g. `~/.local/share/plinth`).
pub fn default_data_dir() -> PathBuf {
    dirs::data_dir()
        .unwrap_or_else(std::env::temp_dir)
        .join("plinth")
}

#[cfg(test)]
mod tests {
    use super::{DataDirBefore, PlatformOptions, prepare};
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_new_data_dir_is_for_its_owner_alone_and_an_existing_one_keeps_its_mode() {
        let tmp = tempfile::tempdir().unwrap();
        let new = tmp.path().join("a/b/data");
        let lock = prepare(&PlatformOptions::private(new.clone())).unwrap();
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&new), 0o700, "{}", new.display());
        drop(lock);

        let existing = tmp.path().join("shared");
        std::fs::create_dir(&existing).unwrap();
        std::fs::set_permissions(&existing, std::fs::Permissions::from_mode(0o750)).unwrap();
        let _lock = prepare(&PlatformOptions::private(existing.clone())).unwrap();
        assert_eq!(mode(&existing), 0o750);
    }

    fn fill(dir: &std::path::Path) {
        std::fs::create_dir_all(dir.join("tls")).unwrap();
        std::fs::write(dir.join("tls/ca.crt"), "x").unwrap();
        std::fs::write(dir.join("git-read-token"), "x").unwrap();
    }

    #[test]
    fn a_failed_start_removes_only_a_new_data_dirs_content() {
        let tmp = tempfile::tempdir().unwrap();
        let absent = tmp.path().join("absent");
        let before = DataDirBefore::read(&absent);
        assert_eq!(before, DataDirBefore::Absent);
        fill(&absent);
        before.remove_what_came_since(&absent);
        assert!(!absent.exists());

        let empty = tmp.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        let before = DataDirBefore::read(&empty);
        assert_eq!(before, DataDirBefore::Empty);
        fill(&empty);
        before.remove_what_came_since(&empty);
        assert!(empty.is_dir() && std::fs::read_dir(&empty).unwrap().next().is_none());

        let used = tmp.path().join("used");
        std::fs::create_dir(&used).unwrap();
        std::fs::write(used.join("notes.txt"), "mine").unwrap();
        let before = DataDirBefore::read(&used);
        assert_eq!(before, DataDirBefore::Used);
        fill(&used);
        before.remove_what_came_since(&used);
        assert!(used.join("notes.txt").is_file() && used.join("tls/ca.crt").is_file());
    }
}
