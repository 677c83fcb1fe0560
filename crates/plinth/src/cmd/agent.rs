//! `plinth agent`: the Destination-side reconciler (parse flags, build the store
//! configuration and the client, run `plinth_agent::Agent`), and `plinth agent status`.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{ArgAction, Args, Subcommand};
use plinth_agent::credentials::Credentials;
use plinth_agent::{Agent, AgentConfig};
use plinth_statestore::{BucketConfig, GitConfig, StoreConfig};

/// Apply one Destination's directory of a state store to a cluster, continuously.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct AgentArgs {
    #[command(subcommand)]
    command: Option<AgentCommand>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand, Debug)]
enum AgentCommand {
    /// Print the last pass of an agent (from its inventory in the target).
    Status(StatusArgs),
}

#[derive(Args, Debug)]
struct StatusArgs {
    /// Kubeconfig of the target cluster [default: KUBECONFIG, ~/.kube/config, in-cluster].
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// The agent's name.
    #[arg(long)]
    name: String,
}

#[derive(Args, Debug)]
struct RunArgs {
    /// The agent's name (normally the Destination's); names its inventory.
    #[arg(long)]
    name: Option<String>,
    /// Kubeconfig of the target cluster [default: KUBECONFIG, ~/.kube/config, in-cluster].
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Git repository URL of the state store.
    #[arg(long, conflicts_with = "bucket")]
    git_url: Option<String>,
    /// Git branch.
    #[arg(long, default_value = "main")]
    branch: String,
    /// S3-compatible bucket of the state store.
    #[arg(long)]
    bucket: Option<String>,
    /// Bucket endpoint (`host:port` or a URL).
    #[arg(long, requires = "bucket")]
    endpoint: Option<String>,
    /// Bucket signing region.
    #[arg(long)]
    region: Option<String>,
    /// Plain HTTP to the bucket / allow http:// Git and skip TLS verification.
    #[arg(long)]
    insecure: bool,
    /// The store's own path prefix (`spec.path` of the state store).
    #[arg(long, default_value = "")]
    store_path: String,
    /// The Destination's directory inside the store (e.g. the Destination's name).
    #[arg(long, default_value = "")]
    path: String,
    /// Credentials file: a Secret manifest or a flat map with the state-store Secret keys
    /// (username/password, sshPrivateKey/knownHosts, accessKeyID/secretAccessKey, ...).
    /// Without it, PLINTH_AGENT_<KEY> environment variables are used.
    #[arg(long)]
    credentials_file: Option<PathBuf>,
    /// Secret holding the credentials in the target cluster, as NAMESPACE/NAME.
    #[arg(long, conflicts_with = "credentials_file")]
    credentials_secret: Option<String>,
    /// Directory for the Git clone [default: a temporary directory].
    #[arg(long)]
    work_dir: Option<PathBuf>,
    /// Time between passes (e.g. 30s, 2m, 500ms).
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    interval: Duration,
    /// Run one pass and exit (non-zero when the pass had errors).
    #[arg(long)]
    once: bool,
    /// Delete objects the agent applied that left the store (`--prune=false` to keep them).
    #[arg(long, default_value_t = true, action = ArgAction::Set)]
    prune: bool,
    /// Take ownership of fields another field manager owns.
    #[arg(long)]
    force_conflicts: bool,
    /// Serve `/metrics` (Prometheus text format, no authentication) on this plain HTTP
    /// address, e.g. `0.0.0.0:8080`. Off when not given.
    #[arg(long, value_name = "ADDR")]
    metrics_addr: Option<std::net::SocketAddr>,
    #[command(flatten)]
    health: HealthFlags,
}

/// Flags of the health agent (`plinth agent` and `plinth worker`).
#[derive(Args, Clone, Debug)]
pub struct HealthFlags {
    /// Also run the cluster's HealthDefinitions as CronJobs and write the HealthRecords
    /// their checks produce to the store the health ConfigMap names.
    #[arg(long)]
    pub health: bool,
    /// The health store's ConfigMap (SKE's health-state-store-config keys) in the target
    /// cluster, as NAMESPACE/NAME; its secretName is read from the same namespace.
    #[arg(
        long,
        value_name = "NAMESPACE/NAME",
        default_value = "plinth-agent/health-state-store-config"
    )]
    pub health_config: String,
    /// Health changes arriving within this time share one commit (e.g. 10s, 500ms).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub health_flush_window: Duration,
    /// How often an unchanged record's lastRun is rewritten: `auto` (every run for a
    /// bucket, hourly for Git, where each write is a commit), a duration, or 0 (never: the
    /// platform then never marks the records stale). The platform marks a record stale
    /// after three missed refreshes.
    #[arg(long, default_value = "auto", value_parser = parse_heartbeat)]
    pub health_heartbeat: plinth_agent::health::Heartbeat,
    /// Image of the containers the health agent injects into each check (reader,
    /// health-state-creator).
    #[arg(long, default_value = plinth_api::constants::DEFAULT_ADAPTER_IMAGE, value_parser = super::image::parse_image)]
    pub health_adapter_image: String,
}

impl Default for HealthFlags {
    /// Off, with the flags' defaults.
    fn default() -> Self {
        HealthFlags {
            health: false,
            health_config: format!(
                "{}/{}",
                plinth_agent::INVENTORY_NAMESPACE,
                plinth_api::constants::health::STORE_CONFIGMAP
            ),
            health_flush_window: plinth_statestore::health::DEFAULT_FLUSH_WINDOW,
            health_heartbeat: plinth_agent::health::Heartbeat::Auto,
            health_adapter_image: plinth_api::constants::DEFAULT_ADAPTER_IMAGE.into(),
        }
    }
}

impl HealthFlags {
    /// The health agent's configuration, `None` without `--health`.
    ///
    /// # Errors
    /// `--health-config` is not NAMESPACE/NAME.
    pub fn config(
        &self,
        work_dir: &std::path::Path,
        interval: Duration,
    ) -> anyhow::Result<Option<plinth_agent::health::HealthAgentConfig>> {
        if !self.health {
            return Ok(None);
        }
        let (ns, name) = self
            .health_config
            .split_once('/')
            .filter(|(n, m)| !n.is_empty() && !m.is_empty())
            .context("--health-config must be NAMESPACE/NAME")?;
        let mut cfg = plinth_agent::health::HealthAgentConfig::new(work_dir);
        cfg.config_map = (ns.to_string(), name.to_string());
        cfg.writer.flush_window = self.health_flush_window;
        cfg.heartbeat = self.health_heartbeat;
        cfg.check.adapter_image = self.health_adapter_image.clone();
        cfg.interval = interval;
        Ok(Some(cfg))
    }
}

/// `auto` or a duration (see [`parse_duration`]).
fn parse_heartbeat(s: &str) -> Result<plinth_agent::health::Heartbeat, String> {
    use plinth_agent::health::Heartbeat;
    match s {
        "auto" => Ok(Heartbeat::Auto),
        _ => parse_duration(s).map(Heartbeat::Every),
    }
}

/// `30s`, `2m`, `500ms`, `1h`, or plain seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let (num, unit) = s
        .find(|c: char| !c.is_ascii_digit())
        .map(|i| s.split_at(i))
        .unwrap_or((s, "s"));
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a duration like 30s"))?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n * 60)),
        "h" => Ok(Duration::from_secs(n * 3600)),
        _ => Err(format!("{s:?}: unit must be ms, s, m or h")),
    }
}

/// Runs `plinth agent`.
pub async fn run(args: AgentArgs) -> anyhow::Result<()> {
    match args.command {
        Some(AgentCommand::Status(s)) => status(s).await,
        None => run_agent(args.run).await,
    }
}

async fn status(args: StatusArgs) -> anyhow::Result<()> {
    let client = crate::cmd::operator::client(args.kubeconfig.as_deref()).await?;
    let (_, status) = plinth_agent::inventory::load(&client, &args.name)
        .await
        .map_err(anyhow::Error::msg)?;
    match status {
        Some(s) => {
            print!("{}", s.render());
            Ok(())
        }
        None => bail!(
            "no agent named {:?} has reported to this cluster",
            args.name
        ),
    }
}

async fn run_agent(args: RunArgs) -> anyhow::Result<()> {
    let name = args.name.clone().context("--name is required")?;
    // Checked before anything starts.
    args.health
        .config(std::path::Path::new("."), args.interval)?;
    let client = crate::cmd::operator::client(args.kubeconfig.as_deref()).await?;
    let creds = credentials(&args, &client).await?;
    let mut _tmp = None;
    let source = match (&args.git_url, &args.bucket) {
        (Some(url), None) => {
            let work_dir = match &args.work_dir {
                Some(d) => d.clone(),
                None => {
                    let t = tempfile::tempdir().context("creating a clone directory")?;
                    let p = t.path().join("clone");
                    _tmp = Some(t);
                    p
                }
            };
            let mut g = GitConfig::new(url.clone(), args.branch.clone(), work_dir);
            g.path = args.store_path.clone();
            g.insecure_skip_tls_verify = args.insecure;
            g.auth = creds.git_auth().map_err(anyhow::Error::msg)?;
            StoreConfig::Git(g)
        }
        (None, Some(bucket)) => {
            let endpoint = args
                .endpoint
                .clone()
                .context("--endpoint is required with --bucket")?;
            let mut b = BucketConfig::s3(
                endpoint,
                bucket.clone(),
                creds.bucket_auth().map_err(anyhow::Error::msg)?,
            );
            b.path = args.store_path.clone();
            b.insecure = args.insecure;
            b.region = args.region.clone();
            StoreConfig::Bucket(b)
        }
        _ => bail!("give the state store: --git-url URL or --bucket NAME --endpoint HOST"),
    };
    let mut cfg = AgentConfig::new(name.clone(), source, args.path.clone());
    cfg.prune = args.prune;
    cfg.force_conflicts = args.force_conflicts;
    cfg.interval = args.interval;
    let metrics = std::sync::Arc::new(plinth_api::metrics::Metrics::new());
    cfg.metrics = Some(metrics.clone());
    let _metrics_task = crate::metrics_server::maybe_serve(args.metrics_addr, metrics).await?;
    let health_dir = match &args.work_dir {
        Some(d) => d.join("health"),
        None => std::env::temp_dir().join(format!("plinth-agent-health-{name}")),
    };
    let health = args
        .health
        .config(&health_dir, args.interval)?
        .map(|c| plinth_agent::health::HealthAgent::new(c, client.clone()));
    let mut agent = Agent::new(cfg, client).await?;
    if let Some(mut health) = health {
        if args.once {
            let report = health.sync_once().await;
            health.flush().await;
            for e in &report.errors {
                eprintln!("health: {e}");
            }
        } else {
            tokio::spawn(health.run(crate::signal::shutdown_signal()));
        }
    }
    if args.once {
        let report = agent.sync_once().await;
        tracing::info!(
            applied = report.applied,
            unchanged = report.unchanged,
            pruned = report.pruned,
            api_writes = report.api_writes,
            "pass done"
        );
        print!("{}", agent.status().render());
        if !report.errors.is_empty() {
            bail!("{} error(s) in this pass", report.errors.len());
        }
        return Ok(());
    }
    agent.run(crate::signal::shutdown_signal()).await;
    Ok(())
}

/// Credentials from the file, the Secret, or the environment (in that order).
async fn credentials(args: &RunArgs, client: &kube::Client) -> anyhow::Result<Credentials> {
    if let Some(path) = &args.credentials_file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading credentials file {}", path.display()))?;
        return Credentials::from_text(&text)
            .map_err(|e| anyhow::anyhow!("credentials file {}: {e}", path.display()));
    }
    if let Some(s) = &args.credentials_secret {
        let (ns, name) = s
            .split_once('/')
            .context("--credentials-secret must be NAMESPACE/NAME")?;
        let api: kube::Api<k8s_openapi::api::core::v1::Secret> =
            kube::Api::namespaced(client.clone(), ns);
        let secret = api
            .get(name)
            .await
            .with_context(|| format!("reading Secret {ns}/{name}"))?;
        let v = serde_json::to_value(&secret)?;
        return Credentials::from_secret_json(&v)
            .map_err(|e| anyhow::anyhow!("Secret {ns}/{name}: {e}"));
    }
    Ok(Credentials::from_env())
}
