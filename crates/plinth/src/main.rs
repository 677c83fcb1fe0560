//! `plinth`: a Kratix-compatible platform framework in one binary.
//!
//! Each subcommand lives in its own module under `cmd/`; this file only parses
//! the command line, sets up logging and the TLS provider, and dispatches.

mod cmd;
mod platform;
mod signal;

use clap::{Parser, Subcommand};

/// Plinth runs Kratix Promises without a cluster: an embedded Kubernetes-compatible
/// API server, the Kratix controllers, a local Job runner and Git/bucket state-store
/// writers, all in one process. Point `kubectl` at the kubeconfig it writes.
#[derive(Parser)]
#[command(name = "plinth", version, about, long_about = None, propagate_version = true)]
struct Cli {
    /// Log filter in `tracing` syntax (e.g. `info`, `plinth=debug,kube=warn`)
    /// [default: `warn` for quickstart, `info` otherwise].
    #[arg(long, global = true, env = "PLINTH_LOG")]
    log: Option<String>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the whole platform on this machine (API server, controllers, Job runner).
    Up(cmd::up::UpArgs),
    /// Run a Promise end to end in a temporary platform and show what it wrote.
    Quickstart(cmd::quickstart::QuickstartArgs),
    /// Run the controllers against an existing Kubernetes cluster.
    Operator(cmd::operator::OperatorArgs),
    /// Print the manifests a real cluster needs (CRDs, RBAC, the operator Deployment).
    Manifests(cmd::manifests::ManifestsArgs),
    /// The containers Plinth injects into every pipeline Job (reader, work-creator, status-writer).
    #[command(name = "pipeline-adapter")]
    PipelineAdapter(cmd::pipeline_adapter::PipelineAdapterArgs),
    /// Apply one Destination's directory of a state store to a cluster (server-side apply,
    /// inventory, prune); `plinth agent status` shows the last pass.
    Agent(cmd::agent::AgentArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // Commands whose output is piped (`plinth manifests all | head`) end quietly when the
    // reader goes away, like other Unix tools; the long-running ones keep Rust's default.
    if matches!(cli.command, Command::Quickstart(_) | Command::Manifests(_)) {
        // SAFETY: resetting a signal disposition to its default before any thread starts.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    // quickstart prints its own progress; controller logs would drown it.
    let default_log = if matches!(cli.command, Command::Quickstart(_)) {
        "warn"
    } else {
        "info"
    };
    init_logging(cli.log.as_deref().unwrap_or(default_log));
    // kube (ring) and object_store (aws-lc-rs) both link rustls providers; choose one
    // process-wide so no TLS handshake panics for want of a default.
    let _ = rustls::crypto::ring::default_provider().install_default();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        match cli.command {
            Command::Up(args) => cmd::up::run(args).await,
            Command::Quickstart(args) => cmd::quickstart::run(args).await,
            Command::Operator(args) => cmd::operator::run(args).await,
            Command::Manifests(args) => cmd::manifests::run(args).await,
            Command::PipelineAdapter(args) => cmd::pipeline_adapter::run(args).await,
            Command::Agent(args) => cmd::agent::run(args).await,
        }
    })
}

fn init_logging(filter: &str) {
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .init();
}
