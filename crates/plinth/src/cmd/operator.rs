//! `plinth operator`: the controllers against an existing Kubernetes API (a real
//! cluster, or a `plinth up --no-controllers`), with leader election on a Lease so that
//! only one replica reconciles at a time.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, bail};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, PostParams};
use kube::{Client, Config};
use plinth_controllers::{Context, ControllerConfig};
use serde_json::json;

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
    /// This replica's identity in the Lease (default: hostname and process id).
    #[arg(long)]
    identity: Option<String>,
    /// Seconds a leader holds the Lease without renewing it before another may take over.
    #[arg(long, default_value_t = 15)]
    lease_duration: u64,
    /// Where the controllers keep local state (state store working copies).
    #[arg(long, default_value = "/tmp/plinth-operator")]
    data_dir: PathBuf,
    /// Image of the pipeline adapter in the Jobs the controllers create (an image holding
    /// the `plinth` binary; `plinth manifests operator --image` passes its own).
    #[arg(long, default_value = plinth_controllers::context::DEFAULT_ADAPTER_IMAGE)]
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

/// Runs `plinth operator` until Ctrl-C/SIGTERM or until leadership is lost (then it
/// exits non-zero so that the Deployment restarts it as a follower).
pub async fn run(args: OperatorArgs) -> anyhow::Result<()> {
    let client = client(args.kubeconfig.as_deref()).await?;
    let metrics = std::sync::Arc::new(plinth_api::metrics::Metrics::new());
    let _metrics_task =
        crate::metrics_server::maybe_serve(args.metrics_addr, metrics.clone()).await?;
    let _webhooks =
        crate::webhook::start(client.clone(), &args.lease_namespace, &args.webhooks).await?;
    let identity = args.identity.clone().unwrap_or_else(|| {
        let host = std::fs::read_to_string("/etc/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "plinth".into());
        format!("{host}-{}", std::process::id())
    });
    let leases: Api<Lease> = Api::namespaced(client.clone(), &args.lease_namespace);
    let duration = Duration::from_secs(args.lease_duration.max(2));
    tracing::info!(lease = %format!("{}/{}", args.lease_namespace, args.lease_name), %identity, "waiting to become leader");
    let shutdown = crate::signal::shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => return Ok(()),
            acquired = try_acquire(&leases, &args.lease_name, &identity, duration) => {
                if acquired? { break; }
            }
        }
        tokio::select! {
            _ = &mut shutdown => return Ok(()),
            _ = tokio::time::sleep(duration / 3) => {}
        }
    }
    tracing::info!(%identity, "became leader; starting controllers");
    let defaults = ControllerConfig {
        data_dir: args.data_dir.clone(),
        adapter_image: args.adapter_image.clone(),
        ..ControllerConfig::default()
    };
    let ctx = Context::with_metrics(client.clone(), defaults.clone(), metrics);
    let controllers = tokio::spawn(plinth_controllers::run_all(ctx, defaults));
    let result = loop {
        tokio::select! {
            _ = &mut shutdown => break Ok(()),
            _ = tokio::time::sleep(duration / 3) => {
                match try_acquire(&leases, &args.lease_name, &identity, duration).await {
                    Ok(true) => {}
                    Ok(false) => break Err(anyhow::anyhow!("lost the leader Lease to another replica")),
                    Err(e) => break Err(e.context("renewing the leader Lease")),
                }
            }
        }
    };
    controllers.abort();
    result
}

/// A client from a kubeconfig file, or the inferred configuration.
pub(crate) async fn client(kubeconfig: Option<&std::path::Path>) -> anyhow::Result<Client> {
    let config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            Config::from_custom_kubeconfig(kc, &Default::default())
                .await
                .with_context(|| format!("using kubeconfig {}", path.display()))?
        }
        None => Config::infer().await.context(
            "no kubeconfig given and none found (KUBECONFIG, ~/.kube/config, in-cluster)",
        )?,
    };
    Client::try_from(config).context("building the Kubernetes client")
}

/// A client for the commands that read a platform (`status`, `health`, `diff`): the
/// kubeconfig given, else the usual places in kubectl's order (KUBECONFIG, then
/// ~/.kube/config, then in-cluster), else the kubeconfig a local `plinth up` writes in
/// its data dir (`PLINTH_DATA_DIR` or the default one), so that these commands need no
/// flag beside `plinth up`. A place that exists but cannot be used is an error, not a
/// reason to try the next one: a KUBECONFIG naming a missing file says so.
///
/// # Errors
/// A kubeconfig that cannot be read or used (naming it); none found anywhere (the error
/// names every place looked at).
pub(crate) async fn platform_client(
    kubeconfig: Option<&std::path::Path>,
) -> anyhow::Result<Client> {
    if kubeconfig.is_some() {
        return client(kubeconfig).await;
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
        return Client::try_from(config).context("building the Kubernetes client");
    }
    let home_config = std::env::var_os("HOME")
        .map(|h| std::path::PathBuf::from(h).join(".kube/config"))
        .filter(|p| p.exists());
    if let Some(path) = home_config {
        return client(Some(&path)).await;
    }
    if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() {
        let config = Config::incluster().context("using the in-cluster configuration")?;
        return Client::try_from(config).context("building the Kubernetes client");
    }
    let data_dir = std::env::var_os("PLINTH_DATA_DIR")
        .filter(|d| !d.is_empty())
        .map(std::path::PathBuf::from)
        .unwrap_or_else(crate::platform::default_data_dir);
    let local = data_dir.join("kubeconfig");
    if local.is_file() {
        return client(Some(&local)).await;
    }
    anyhow::bail!(
        "no kubeconfig given and none found: KUBECONFIG is not set, there is no \
         ~/.kube/config, this is not a Kubernetes Pod (KUBERNETES_SERVICE_HOST is not set), \
         and there is no {} (start the platform with `plinth up`, or pass --kubeconfig)",
        local.display()
    )
}

/// Takes or renews the Lease. Returns false while another holder's Lease is still valid.
/// Writes carry the Lease's resourceVersion, so two replicas can never both win.
async fn try_acquire(
    leases: &Api<Lease>,
    name: &str,
    identity: &str,
    duration: Duration,
) -> anyhow::Result<bool> {
    let now = jiff::Timestamp::now();
    let spec = json!({
        "holderIdentity": identity,
        "leaseDurationSeconds": duration.as_secs(),
        "renewTime": MicroTime(now),
    });
    let Some(mut lease) = leases.get_opt(name).await? else {
        let mut body = json!({"metadata": {"name": name}, "spec": spec});
        body["spec"]["acquireTime"] = json!(MicroTime(now));
        return match leases
            .create(&PostParams::default(), &serde_json::from_value(body)?)
            .await
        {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(e) => Err(e.into()),
        };
    };
    let current = lease.spec.clone().unwrap_or_default();
    let holder = current.holder_identity.clone().unwrap_or_default();
    let expired = match (&current.renew_time, current.lease_duration_seconds) {
        (Some(t), Some(d)) => t.0.as_second() + i64::from(d) < now.as_second(),
        _ => true,
    };
    if holder != identity && !expired {
        return Ok(false);
    }
    let mut new_spec: k8s_openapi::api::coordination::v1::LeaseSpec = serde_json::from_value(spec)?;
    if holder != identity {
        new_spec.acquire_time = Some(MicroTime(now));
        new_spec.lease_transitions = Some(current.lease_transitions.unwrap_or(0) + 1);
    } else {
        new_spec.acquire_time = current.acquire_time.clone();
        new_spec.lease_transitions = current.lease_transitions;
    }
    lease.spec = Some(new_spec);
    match leases.replace(name, &PostParams::default(), &lease).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
        Err(e) => bail!(
            "updating Lease {name}: {}",
            plinth_api::kube_error::describe(&e)
        ),
    }
}
