//! `plinth operator`: the controllers against an existing Kubernetes API (a real
//! cluster, or a `plinth up --no-controllers`), with leader election on a Lease so that
//! only one replica reconciles at a time.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use kube::{Client, Config};
use plinth_controllers::{Context, ControllerConfig};

use crate::leader::{Elector, LeaseConfig};

/// Arguments of `plinth operator`.
#[derive(clap::Args)]
pub struct OperatorArgs {
    /// Kubeconfig to use; without it, `KUBECONFIG`, `~/.kube/config` or the in-cluster
    /// ServiceAccount configuration are tried in that order.
    #[arg(long, env = "PLINTH_KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// Namespace of the leader-election Lease.
    #[arg(long, default_value = "kratix-platform-system")]
    lease_namespace: String,
    /// Name of the leader-election Lease.
    #[arg(long, default_value = "plinth-operator")]
    lease_name: String,
    /// This replica's identity in the Lease (default: the Pod name from `POD_NAME`, else
    /// hostname and process id).
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    /// Seconds a leader holds the Lease without renewing it before another may take over.
    /// The leader renews every fifth of it and steps down when it could not renew for two
    /// thirds of it, before the Lease can expire for the others.
    #[arg(long, default_value_t = 15)]
    lease_duration: u64,
    /// Where the controllers keep local state (state store working copies).
    #[arg(long, default_value = "/tmp/plinth-operator")]
    data_dir: PathBuf,
    /// Image of the pipeline adapter in the Jobs the controllers create (an image holding
    /// the `plinth` binary; `plinth manifests operator --image` passes its own).
    #[arg(long, default_value = plinth_api::constants::DEFAULT_ADAPTER_IMAGE, value_parser = super::image::parse_image)]
    adapter_image: String,
    /// Serve `/metrics` (Prometheus text format, no authentication) on this plain HTTP
    /// address, e.g. `0.0.0.0:8080`; served from the start, leader or not. Off when not given.
    #[arg(long, value_name = "ADDR")]
    metrics_addr: Option<std::net::SocketAddr>,
    /// Admission webhooks (served by every replica; their CA Secret lives in the
    /// Lease's namespace).
    #[command(flatten)]
    webhooks: crate::webhook::WebhookArgs,
}

/// Runs `plinth operator` until Ctrl-C/SIGTERM (then it stops the controllers and
/// releases the Lease so a follower takes over at once) or until leadership is lost (then
/// it exits non-zero so that the Deployment restarts it as a follower).
pub async fn run(args: OperatorArgs) -> anyhow::Result<()> {
    let client = checked_client(args.kubeconfig.as_deref()).await?;
    let metrics = std::sync::Arc::new(plinth_api::metrics::Metrics::new());
    let _metrics_task =
        crate::metrics_server::maybe_serve(args.metrics_addr, metrics.clone()).await?;
    let _webhooks =
        crate::webhook::start(client.clone(), &args.lease_namespace, &args.webhooks).await?;
    let identity = args.identity.clone().unwrap_or_else(default_identity);
    let terms = LeaseConfig::new(
        &args.lease_namespace,
        &args.lease_name,
        &identity,
        Duration::from_secs(args.lease_duration),
    );
    tracing::info!(lease = %format!("{}/{}", args.lease_namespace, args.lease_name), %identity,
        lease_duration_s = terms.lease_duration.as_secs_f64(), renew_deadline_s = terms.renew_deadline.as_secs_f64(),
        "waiting to become leader");
    let mut elector = Elector::new(client.clone(), terms);
    let shutdown = crate::signal::shutdown_signal();
    tokio::pin!(shutdown);
    tokio::select! {
        _ = &mut shutdown => return Ok(()),
        acquired = elector.acquire() => acquired?,
    }
    tracing::info!(%identity, "became leader; starting controllers");
    let defaults = ControllerConfig {
        data_dir: args.data_dir.clone(),
        adapter_image: args.adapter_image.clone(),
        ..ControllerConfig::default()
    };
    let ctx = Context::with_metrics(client.clone(), defaults.clone(), metrics);
    let controllers = tokio::spawn(plinth_controllers::run_all(ctx, defaults));
    let ended = tokio::select! {
        _ = &mut shutdown => None,
        lost = elector.hold() => Some(lost),
    };
    controllers.abort();
    let _ = controllers.await;
    match ended {
        Some(lost) => Err(anyhow::Error::new(lost).context("leadership ended")),
        None => {
            elector
                .release()
                .await
                .context("releasing the leader Lease")?;
            tracing::info!(%identity, "released the leader Lease");
            Ok(())
        }
    }
}

/// The Pod name when running in a Pod (`POD_NAME` from the downward API is read by clap),
/// else the hostname and process id.
fn default_identity() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "plinth".into());
    format!("{host}-{}", std::process::id())
}

/// A client from a kubeconfig file, or the inferred configuration.
pub(crate) async fn client(kubeconfig: Option<&std::path::Path>) -> anyhow::Result<Client> {
    let (config, _) = config(kubeconfig).await?;
    Client::try_from(config).context("building the Kubernetes client")
}

/// The configuration [`client`] uses, and where it came from (for errors).
async fn config(kubeconfig: Option<&std::path::Path>) -> anyhow::Result<(Config, String)> {
    Ok(match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            let config = Config::from_custom_kubeconfig(kc, &Default::default())
                .await
                .with_context(|| format!("using kubeconfig {}", path.display()))?;
            (config, format!("kubeconfig {}", path.display()))
        }
        None => (
            Config::infer().await.context(
                "no kubeconfig given and none found (KUBECONFIG, ~/.kube/config, in-cluster)",
            )?,
            "the inferred configuration (KUBECONFIG, ~/.kube/config, in-cluster)".to_string(),
        ),
    })
}

/// A client on `config` that has answered once (`GET /version`), so that an API server
/// that cannot be reached, or refuses the credentials, is reported naming its URL and
/// where the configuration came from (`source`), not as a bare connection error from
/// the command's first call.
///
/// # Errors
/// The client cannot be built, or the server did not answer (the cause kept).
async fn answering(config: Config, source: &str) -> anyhow::Result<Client> {
    let url = config.cluster_url.to_string();
    let client = Client::try_from(config).context("building the Kubernetes client")?;
    client.apiserver_version().await.map_err(|e| {
        let doing = match &e {
            kube::Error::Api(s) if s.code == 401 || s.code == 403 => {
                "is refusing the credentials of"
            }
            kube::Error::Api(_) => "answered with an error to",
            _ => "cannot be reached with",
        };
        anyhow::Error::new(e).context(format!(
            "the Kubernetes API server at {url} {doing} {source}"
        ))
    })?;
    Ok(client)
}

/// [`client`], checked to answer before anything starts (`plinth operator`, and `plinth
/// worker` for its platform).
pub(crate) async fn checked_client(kubeconfig: Option<&std::path::Path>) -> anyhow::Result<Client> {
    let (config, source) = config(kubeconfig).await?;
    answering(config, &source).await
}

/// A client for the commands that read a platform (`status`, `health`, `diff`): the
/// kubeconfig given, else the usual places in kubectl's order (KUBECONFIG, then
/// ~/.kube/config, then in-cluster), else the kubeconfig a local `plinth up` writes in
/// its data dir (`PLINTH_DATA_DIR` or the default one), so that these commands need no
/// flag beside `plinth up`. A place that exists but cannot be used is an error, not a
/// reason to try the next one: a KUBECONFIG naming a missing file says so. The server is
/// asked once before the command runs ([`answering`]).
///
/// # Errors
/// A kubeconfig that cannot be read or used (naming it); none found anywhere (the error
/// names every place looked at); a server that does not answer (naming its URL).
pub(crate) async fn platform_client(
    kubeconfig: Option<&std::path::Path>,
) -> anyhow::Result<Client> {
    let (config, source) = platform_config(kubeconfig).await?;
    answering(config, &source).await
}

/// The configuration [`platform_client`] uses, and where it came from.
async fn platform_config(kubeconfig: Option<&std::path::Path>) -> anyhow::Result<(Config, String)> {
    if kubeconfig.is_some() {
        return config(kubeconfig).await;
    }
    if let Some(list) = std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
        let what = format!("KUBECONFIG={}", list.to_string_lossy());
        if let Some(missing) = std::env::split_paths(&list).find(|p| !p.exists()) {
            anyhow::bail!("{what}: {} does not exist", missing.display());
        }
        let kc = kube::config::Kubeconfig::from_env()
            .with_context(|| format!("reading {what}"))?
            .with_context(|| format!("{what} names no kubeconfig"))?;
        let config = Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .with_context(|| format!("using {what}"))?;
        return Ok((config, what));
    }
    let home_config = std::env::var_os("HOME")
        .map(|h| std::path::PathBuf::from(h).join(".kube/config"))
        .filter(|p| p.exists());
    if let Some(path) = home_config {
        return config(Some(&path)).await;
    }
    if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() {
        let config = Config::incluster().context("using the in-cluster configuration")?;
        return Ok((config, "the in-cluster configuration".to_string()));
    }
    let data_dir = std::env::var_os("PLINTH_DATA_DIR")
        .filter(|d| !d.is_empty())
        .map(std::path::PathBuf::from)
        .unwrap_or_else(crate::platform::default_data_dir);
    let local = data_dir.join("kubeconfig");
    if local.is_file() {
        return config(Some(&local)).await;
    }
    anyhow::bail!(
        "no kubeconfig given and none found: KUBECONFIG is not set, there is no \
         ~/.kube/config, this is not a Kubernetes Pod (KUBERNETES_SERVICE_HOST is not set), \
         and there is no {} (start the platform with `plinth up`, or pass --kubeconfig)",
        local.display()
    )
}
