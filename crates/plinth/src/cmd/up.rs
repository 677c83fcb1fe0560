//! `plinth up`: the whole platform in the foreground — the embedded API server, the
//! controllers and the Job runner — until Ctrl-C or SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::platform::{
    BOOTSTRAP_NAME, PLATFORM_DESTINATION, Platform, PlatformOptions, default_data_dir,
};

/// `plinth up --help`'s description (on the subcommand, whose doc comment gives the short one).
pub const LONG_ABOUT: &str = "Runs the whole platform on this machine, in the foreground until \
Ctrl-C: an embedded Kubernetes-compatible API server, the Kratix controllers, the pipeline Job \
runner and the state store writers. A fresh data dir gets a local Git state store and the \
Destinations `local` and `platform`. Once the API serves, the kubeconfig for kubectl is written \
to <data dir>/kubeconfig (by default ~/.local/share/plinth/kubeconfig) and its path is printed; \
`plinth status`, `plinth health` and `plinth diff` find it there on their own.";

/// `plinth up --help`'s examples.
pub const EXAMPLES: &str = "Examples:\n  plinth up\n  \
export KUBECONFIG=~/.local/share/plinth/kubeconfig; kubectl apply -f promise.yaml\n  \
plinth up --data-dir ./platform --listen 127.0.0.1:0    # a second platform on a free port\n  \
plinth up --no-controllers    # the API only; run `plinth operator` against it";

/// Arguments of `plinth up`.
#[derive(clap::Args)]
pub struct UpArgs {
    /// Where the database, CA, kubeconfig, pod logs and the local state store live
    /// [default: <user data dir>/plinth, e.g. ~/.local/share/plinth].
    #[arg(long, env = "PLINTH_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// HTTPS address for kubectl and pipelines; `127.0.0.1:0` picks a free port and the
    /// kubeconfig holds the real one.
    #[arg(long, default_value = "127.0.0.1:6443")]
    pub listen: SocketAddr,
    /// Do not create the local Git state store and the Destinations `local` and `platform`
    /// (the platform itself, applied back by an in-process agent) in a fresh data dir.
    #[arg(long)]
    pub no_bootstrap: bool,
    /// Serve the API only; run the controllers elsewhere (`plinth operator`).
    #[arg(long)]
    pub no_controllers: bool,
    /// Do not admit Kratix kinds in-process: only their CRD schemas are checked, as a
    /// plain kube-apiserver does, and admission webhooks registered through the API
    /// (`plinth operator`'s) do the refusing. For testing cluster mode with
    /// `--no-controllers`.
    #[arg(long)]
    pub no_builtin_admission: bool,
    /// Do not run pipeline Jobs in this process.
    #[arg(long)]
    pub no_runner: bool,
    /// Image map: a YAML file mapping images to local commands for pipelines whose
    /// images cannot be pulled.
    #[arg(long)]
    pub image_map: Option<PathBuf>,
    /// Milliseconds of quiet the Git writer waits for before committing the writes it has
    /// queued; the quiet gap grows when writes trickle in, and no write waits more than
    /// twenty times this.
    #[arg(long, default_value_t = 500)]
    pub git_batch_window_ms: u64,
    /// Extra name (DNS name or IP address) on the HTTPS certificate, besides localhost and
    /// 127.0.0.1, e.g. the address a kind cluster's Flux or Argo CD reaches this machine
    /// by (with `--listen 0.0.0.0:6443`). Repeatable; the certificate is issued again by
    /// the same CA when the names change.
    #[arg(long = "tls-san", value_name = "NAME")]
    pub tls_sans: Vec<String>,
    /// Size in bytes at which a container's log file is rotated (the kubelet's
    /// containerLogMaxSize).
    #[arg(long, default_value_t = plinth_runner::logfile::DEFAULT_MAX_SIZE)]
    pub container_log_max_size: u64,
    /// Log files kept per container, the current one included, at least 2 (the kubelet's
    /// containerLogMaxFiles).
    #[arg(long, default_value_t = plinth_runner::logfile::DEFAULT_MAX_FILES as u16, value_parser = clap::value_parser!(u16).range(2..))]
    pub container_log_max_files: u16,

    /// Pipeline Jobs the embedded runner runs at the same time (each runs one Pod; the
    /// rest wait in creation order). Standalone Pods (`kubectl run`) are not counted.
    #[arg(long, default_value_t = plinth_runner::config::DEFAULT_MAX_PARALLEL_JOBS, value_parser = parse_parallel_jobs)]
    pub max_parallel_jobs: usize,

    /// Run Plinth's own adapter containers (reader, work-writer, status-writer,
    /// health-state-creator) in a sandbox each, as the user's containers run, instead of
    /// inside this process. Their identity, files, logs and status are the same either
    /// way; in-process they cost no sandbox.
    #[arg(long)]
    pub sandbox_adapters: bool,

    /// Serve `/metrics` (Prometheus text format, no authentication) on this plain HTTP
    /// address, e.g. `127.0.0.1:9090`. Off when not given.
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<SocketAddr>,

    /// Receive Alertmanager's webhook (`POST /alerts`, plain HTTP, bearer token) on this
    /// address, e.g. `127.0.0.1:9093`: alerts labelled `kratix_promise`, `kratix_resource`
    /// and `namespace` become HealthRecords of that request. Off when not given.
    #[arg(long, value_name = "HOST:PORT")]
    pub alertmanager_addr: Option<SocketAddr>,

    /// File holding the bearer token the Alertmanager receiver checks [default: created
    /// as <data dir>/alertmanager-token].
    #[arg(long, value_name = "PATH", requires = "alertmanager_addr")]
    pub alertmanager_token_file: Option<PathBuf>,

    /// Authorizers, as kube-apiserver's flag of the same name: `RBAC` (the default), or
    /// `RBAC,AlwaysAllow`, which allows whatever RBAC does not (the environment Kubernetes'
    /// own kubectl tests run in; never for a platform others share).
    #[arg(long, default_value = "RBAC", value_parser = ["RBAC", "RBAC,AlwaysAllow"])]
    pub authorization_mode: String,
}

/// `--max-parallel-jobs`: a whole number of at least 1.
fn parse_parallel_jobs(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("{s:?} is not a whole number of at least 1")),
    }
}

/// Starts the Alertmanager receiver when `--alertmanager-addr` is set, printing where it
/// listens and where its token is (a line scripts can read).
async fn serve_alertmanager(
    args: &UpArgs,
    data_dir: &std::path::Path,
    platform: &Platform,
) -> anyhow::Result<Option<tokio::task::JoinHandle<()>>> {
    let Some(addr) = args.alertmanager_addr else {
        return Ok(None);
    };
    let rx = crate::alertmanager::Receiver::new(
        data_dir,
        args.alertmanager_token_file.as_deref(),
        platform.metrics.clone(),
    )?;
    rx.set_client(platform.server.client());
    let path = rx.token_path().to_path_buf();
    let (local, task) = crate::alertmanager::serve(addr, rx).await?;
    // Printed unindented: scripts and tests read this line.
    println!(
        "alertmanager: http://{local}{} (bearer token in {})",
        crate::alertmanager::ROUTE,
        path.display()
    );
    Ok(Some(task))
}

/// Runs `plinth up`.
pub async fn run(args: UpArgs) -> anyhow::Result<()> {
    let data_dir = args.data_dir.clone().unwrap_or_else(default_data_dir);
    let platform = Platform::start_with_tls_names(
        PlatformOptions {
            data_dir: data_dir.clone(),
            listen: args.listen,
            bootstrap: !args.no_bootstrap,
            controllers: !args.no_controllers,
            runner: !args.no_runner,
            image_map: args.image_map.clone(),
            git_batch_window: Duration::from_millis(args.git_batch_window_ms),
            container_log_max_size: args.container_log_max_size,
            container_log_max_files: usize::from(args.container_log_max_files),
            max_parallel_jobs: args.max_parallel_jobs,
            adapters_in_process: !args.sandbox_adapters,
            always_allow: args.authorization_mode == "RBAC,AlwaysAllow",
            builtin_admission: !args.no_builtin_admission,
        },
        &args.tls_sans,
    )
    .await?;
    let addr = platform
        .server
        .https_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    println!(
        "Plinth is up: API server https://{addr}, data in {}",
        data_dir.display()
    );
    if let Some(kc) = platform.server.kubeconfig_path() {
        // Printed unindented: scripts and tests read this line.
        println!("export KUBECONFIG={}", kc.display());
        println!("  kubectl get promises,destinations,gitstatestores");
    }
    if let Some(repo) = &platform.state_store_repo {
        println!(
            "  state store: GitStateStore/{BOOTSTRAP_NAME} -> file://{} (Destination {BOOTSTRAP_NAME}, label environment=dev)",
            repo.display()
        );
        if !args.no_controllers {
            println!(
                "  Destination {PLATFORM_DESTINATION} (label environment={PLATFORM_DESTINATION}, strictMatchLabels): applied back into this platform, for compound Promises"
            );
        }
    }
    // Printed unindented: scripts and tests read these lines.
    println!(
        "git (read-only): https://{addr}{}/<GitStateStore>  (e.g. {BOOTSTRAP_NAME})",
        crate::gitserve::ROUTE_PREFIX
    );
    println!(
        "git read token: {} (also in {}; any user name, or a bearer token)",
        platform.git.token(),
        platform.git.token_path().display()
    );
    // Printed unindented: scripts and tests read this line.
    println!(
        "web view: https://{addr}{}/login?token={}  (one-time login link; or send the API's bearer token)",
        crate::web::ROUTE_PREFIX,
        platform.web.new_login_token()
    );
    let _metrics =
        crate::metrics_server::maybe_serve(args.metrics_addr, platform.metrics.clone()).await?;
    let _alerts = serve_alertmanager(&args, &data_dir, &platform).await?;
    if args.no_controllers {
        println!("  controllers: off (run `plinth operator --kubeconfig <kubeconfig>`)");
    }
    println!("Press Ctrl-C to stop.");
    crate::signal::shutdown_signal().await;
    println!("Stopping…");
    platform.shutdown().await;
    Ok(())
}
