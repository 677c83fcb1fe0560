//! `plinth worker NAME --platform KUBECONFIG`: a second embedded cluster on the same
//! machine that is a Destination of the platform. It starts its own API server (own data
//! dir, kubeconfig and port) with the Job runner and no Kratix controllers, registers the
//! Destination NAME on the platform, and runs an agent that applies that Destination's
//! directory of the state store into itself.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, bail};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::json;

use crate::destination_agent::{StoreRef, spawn, store_config};
use crate::platform::{BOOTSTRAP_NAME, Platform, PlatformOptions};

/// Field manager of the Destination the worker registers.
pub const FIELD_MANAGER: &str = "plinth-worker";

/// Arguments of `plinth worker`.
#[derive(clap::Args, Clone, Debug)]
#[command(
    after_help = "The Destination is left on the platform when the worker stops \
(its files stay in the store and the platform keeps scheduling to it); remove it with \
`kubectl --kubeconfig <platform> delete destination NAME`."
)]
pub struct WorkerArgs {
    /// Name of the worker and of its Destination on the platform (and its directory in
    /// the state store).
    pub name: String,
    /// Kubeconfig of the platform (what `plinth up` writes, e.g.
    /// ~/.local/share/plinth/kubeconfig).
    #[arg(long, value_name = "KUBECONFIG")]
    pub platform: PathBuf,
    /// The worker's own data dir (database, CA, its kubeconfig at DIR/kubeconfig, pod
    /// logs) [default: <user data dir>/plinth-worker-NAME].
    #[arg(long, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// HTTPS address of the worker's API server; `127.0.0.1:0` picks a free port and the
    /// worker's kubeconfig holds the real one.
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// Label of the Destination, `KEY=VALUE`, repeatable [default: environment=NAME].
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = parse_label)]
    pub labels: Vec<(String, String)>,
    /// The state store the Destination writes to, `KIND/NAME`
    /// [default: GitStateStore/local, the one `plinth up` bootstraps].
    #[arg(long, value_name = "KIND/NAME")]
    pub state_store: Option<StoreRef>,
    /// Time between the agent's passes (it is also woken when the platform writes this
    /// Destination's WorkPlacements), in seconds.
    #[arg(long, default_value_t = 30)]
    pub interval_secs: u64,
    /// Image map for the worker's Job runner (images run as local commands).
    #[arg(long)]
    pub image_map: Option<PathBuf>,
    /// Serve `/metrics` (Prometheus text format, no authentication) on this plain HTTP
    /// address, e.g. `127.0.0.1:9091`. Off when not given.
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// The health agent (HealthDefinitions as CronJobs in the worker, records to a store).
    #[command(flatten)]
    pub health: crate::cmd::agent::HealthFlags,
}

fn parse_label(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: a label is KEY=VALUE"))?;
    if k.is_empty() {
        return Err(format!("{s:?}: the label key is empty"));
    }
    Ok((k.to_string(), v.to_string()))
}

/// A worker running in this process (what `plinth worker` and `plinth quickstart` start).
pub struct Worker {
    /// The worker's embedded cluster.
    pub platform: Platform,
    agent: tokio::task::JoinHandle<()>,
    health: Option<tokio::task::JoinHandle<()>>,
}

impl Worker {
    /// Starts the worker's cluster, registers its Destination on the platform of
    /// `platform_client` and starts its agent.
    ///
    /// # Errors
    /// The worker's cluster does not start, the Destination cannot be written, or the
    /// state store cannot be read from the platform.
    pub async fn start(
        args: &WorkerArgs,
        platform_client: kube::Client,
        data_dir: PathBuf,
    ) -> anyhow::Result<Worker> {
        let platform = Platform::start(PlatformOptions {
            listen: args.listen,
            controllers: false,
            image_map: args.image_map.clone(),
            git_batch_window: Duration::from_millis(500),
            ..PlatformOptions::private(data_dir.clone())
        })
        .await
        .with_context(|| format!("starting worker {} in {}", args.name, data_dir.display()))?;
        let store = args.state_store.clone().unwrap_or(StoreRef {
            kind: "GitStateStore".into(),
            name: BOOTSTRAP_NAME.into(),
        });
        register(&platform_client, args, &store).await?;
        let source = store_config(&platform_client, &store, &data_dir.join("agent")).await?;
        let agent = spawn(
            &args.name,
            source,
            &args.name,
            platform.server.client(),
            platform_client,
            Duration::from_secs(args.interval_secs.max(1)),
            platform.metrics.clone(),
        )
        .await?;
        let interval = Duration::from_secs(args.interval_secs.max(1));
        let health = args
            .health
            .config(&data_dir.join("health"), interval)?
            .map(|cfg| {
                let agent = plinth_agent::health::HealthAgent::new(cfg, platform.server.client());
                tokio::spawn(agent.run(std::future::pending()))
            });
        Ok(Worker {
            platform,
            agent,
            health,
        })
    }

    /// Stops the agent and the worker's cluster (the Destination stays on the platform).
    pub async fn shutdown(self) {
        self.agent.abort();
        if let Some(h) = self.health {
            h.abort();
        }
        self.platform.shutdown().await;
    }
}

/// Creates or updates the Destination NAME on the platform (server-side apply).
async fn register(
    platform: &kube::Client,
    args: &WorkerArgs,
    store: &StoreRef,
) -> anyhow::Result<()> {
    let labels: serde_json::Map<String, serde_json::Value> = if args.labels.is_empty() {
        [("environment".to_string(), json!(args.name))]
            .into_iter()
            .collect()
    } else {
        args.labels
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect()
    };
    let dest = json!({
        "apiVersion": format!("{}/{}", plinth_api::GROUP, plinth_api::VERSION),
        "kind": "Destination",
        "metadata": {"name": args.name, "labels": labels},
        "spec": {
            "path": args.name,
            "stateStoreRef": {"kind": store.kind, "name": store.name},
        },
    });
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(plinth_api::GROUP, plinth_api::VERSION, "Destination"),
        "destinations",
    );
    let api: Api<DynamicObject> = Api::all_with(platform.clone(), &ar);
    api.patch(
        &args.name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&dest),
    )
    .await
    .map_err(|e| match e {
        kube::Error::Api(s) => anyhow::anyhow!("{}", s.message),
        other => other.into(),
    })
    .with_context(|| format!("registering Destination {} on the platform", args.name))?;
    Ok(())
}

/// Runs `plinth worker` until Ctrl-C or SIGTERM.
pub async fn run(args: WorkerArgs) -> anyhow::Result<()> {
    if !args.platform.exists() {
        bail!(
            "--platform {}: no such kubeconfig (start the platform with `plinth up` first)",
            args.platform.display()
        );
    }
    let data_dir = args.data_dir.clone().unwrap_or_else(|| {
        crate::platform::default_data_dir().with_file_name(format!("plinth-worker-{}", args.name))
    });
    let platform_client = crate::cmd::operator::checked_client(Some(&args.platform)).await?;
    let worker = Worker::start(&args, platform_client, data_dir.clone()).await?;
    let addr = worker
        .platform
        .server
        .https_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    println!(
        "Worker {} is up: API server https://{addr}, data in {}",
        args.name,
        data_dir.display()
    );
    if let Some(kc) = worker.platform.server.kubeconfig_path() {
        // Printed unindented: scripts and tests read this line.
        println!("worker kubeconfig: {}", kc.display());
        println!("  kubectl --kubeconfig {} get deploy,svc -A", kc.display());
    }
    println!(
        "  registered Destination {} on the platform; its directory {}/ is applied here",
        args.name, args.name
    );
    let _metrics_task =
        crate::metrics_server::maybe_serve(args.metrics_addr, worker.platform.metrics.clone())
            .await?;
    println!("Press Ctrl-C to stop (the Destination stays on the platform).");
    crate::signal::shutdown_signal().await;
    println!("Stopping…");
    worker.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_parse_or_name_the_problem() {
        assert_eq!(
            parse_label("environment=dev").unwrap(),
            ("environment".into(), "dev".into())
        );
        assert!(parse_label("dev").unwrap_err().contains("KEY=VALUE"));
        assert!(parse_label("=dev").unwrap_err().contains("empty"));
    }
}
