//! `plinth`: a Kratix-compatible platform framework in one binary.
//!
//! Each subcommand lives in its own module under `cmd/`; this file only parses
//! the command line, sets up logging and the TLS provider, and dispatches.

mod alertmanager;
mod authoring;
mod cmd;
mod destination_agent;
mod gitserve;
mod leader;
mod logging;
mod metrics_server;
mod platform;
mod progress;
mod redact;
mod signal;
mod status;
mod web;
mod webhook;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// mimalloc instead of glibc's malloc. A platform under load allocates and frees many
/// short-lived JSON values on every thread; glibc spent about a quarter of `plinth up`'s
/// CPU in malloc and free (`perf`, 1,000 requests) and kept freed memory mapped per
/// thread arena. Numbers in BENCHMARKS.md.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Plinth runs Kratix Promises without a cluster: an embedded Kubernetes-compatible
/// API server, the Kratix controllers, a local Job runner and Git/bucket state-store
/// writers, all in one process. Point `kubectl` at the kubeconfig it writes.
#[derive(Parser)]
#[command(name = "plinth", version, about, long_about = None, propagate_version = true)]
struct Cli {
    /// Log filter in `tracing` syntax (e.g. `info`, `plinth=debug,kube=warn`); `RUST_LOG`
    /// is read when neither this nor `PLINTH_LOG` is set
    /// [default: `warn` for quickstart, health, status, render, test and diff (kube's per-request error lines off: the command reports the error); `info` otherwise].
    #[arg(long, global = true, env = "PLINTH_LOG")]
    log: Option<String>,

    /// Log line format on standard error: `text` (human-readable) or `json` (one object
    /// per line with Kratix's keys: `controller`, `name`, `namespace`, `promise`,
    /// `resourceRequest`).
    #[arg(long, global = true, value_enum, default_value_t = logging::LogFormat::Text, env = "PLINTH_LOG_FORMAT")]
    log_format: logging::LogFormat,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the whole platform on this machine (API server, controllers, Job runner).
    #[command(long_about = cmd::up::LONG_ABOUT, after_help = cmd::up::EXAMPLES)]
    Up(cmd::up::UpArgs),
    /// Run a Promise end to end in a temporary platform and show what it wrote.
    Quickstart(cmd::quickstart::QuickstartArgs),
    /// Run the controllers against an existing Kubernetes cluster.
    Operator(cmd::operator::OperatorArgs),
    /// Show the health of resource requests: state, uptime, time to healthy, timeline.
    Health(cmd::health::HealthArgs),
    /// Show each Promise's requests as a tree: workflow Jobs, Works, WorkPlacements
    /// (Destination, files, commit) and health; `--watch` follows changes.
    Status(cmd::status::StatusArgs),
    /// Print the manifests a real cluster needs (CRDs, RBAC, the operator Deployment).
    Manifests(cmd::manifests::ManifestsArgs),
    /// The containers Plinth injects into every pipeline Job (reader, work-writer, status-writer).
    #[command(name = "pipeline-adapter")]
    PipelineAdapter(cmd::pipeline_adapter::PipelineAdapterArgs),
    /// Apply one Destination's directory of a state store to a cluster (server-side apply,
    /// inventory, prune); `plinth agent status` shows the last pass.
    Agent(cmd::agent::AgentArgs),
    /// Run a worker cluster on this machine: a second embedded API server that registers
    /// itself as a Destination of the platform and applies that Destination's directory.
    Worker(cmd::worker::WorkerArgs),
    /// Run a resource request's (or a Promise's) configure workflow locally and show what it
    /// produced: output files per Destination, selectors, status; logs on failure.
    Render(cmd::render::RenderArgs),
    /// Create a new Promise directory (kratix-cli's layout).
    Init(cmd::init::InitArgs),
    /// Update a Promise's API or dependencies.
    Update(cmd::update::UpdateArgs),
    /// Add a container (a workflow step) to a Promise.
    Add(cmd::add::AddArgs),
    /// Assemble promise.yaml from a split Promise directory.
    Build(cmd::build::BuildArgs),
    /// Run a Promise's test cases (tests/*/) and compare with their expectations.
    Test(cmd::test::TestArgs),
    /// Preview a Promise update on a running platform: which requests would re-run and how
    /// their outputs would change.
    Diff(cmd::diff::DiffArgs),
}

/// Runs the command; an error is printed as its chain of causes (never a backtrace,
/// whatever `RUST_BACKTRACE` says) and the process exits with status 1, or 2 for
/// `plinth diff`, whose 1 means "there are differences" (as for `kubectl diff`).
fn main() -> ExitCode {
    let cli = parse_args();
    let error_code = if matches!(cli.command, Command::Diff(_)) {
        ExitCode::from(2)
    } else {
        ExitCode::FAILURE
    };
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{}", error_chain(&e));
            error_code
        }
    }
}

/// `error: <outermost>` followed by one `  caused by: <cause>` line per underlying error.
/// A Kubernetes API error reads as the server's message and field causes
/// ([`plinth_api::kube_error`]), never as the `Status` struct kube's `Display` appends;
/// the `Status` that follows it in the chain says nothing more and is left out.
fn error_chain(e: &anyhow::Error) -> String {
    let mut lines = Vec::new();
    let mut after_api_error = false;
    for cause in e.chain() {
        if std::mem::take(&mut after_api_error) {
            continue;
        }
        lines.push(match cause.downcast_ref::<kube::Error>() {
            Some(k) => {
                after_api_error = matches!(k, kube::Error::Api(_));
                plinth_api::kube_error::describe(k)
            }
            None => cause.to_string(),
        });
    }
    // Contexts often repeat their cause's text; a line its predecessor ends with is noise.
    lines.dedup_by(|next, prev| prev.ends_with(next.as_str()));
    let mut out = format!("error: {}", lines[0]);
    for line in &lines[1..] {
        out.push_str(&format!("\n  caused by: {line}"));
    }
    out
}

/// Parses the command line, with two adjustments:
/// - run as `pipeline-adapter` (the entrypoint `/bin/pipeline-adapter` of the image,
///   which Kratix-style Jobs call), the binary acts as `plinth pipeline-adapter`;
/// - `plinth help --help` (which clap's built-in `help` subcommand rejects) shows the
///   top-level help, as `plinth help` does.
fn parse_args() -> Cli {
    let mut args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let invoked_as = args
        .first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .map(|n| n.to_os_string());
    if invoked_as.as_deref() == Some(std::ffi::OsStr::new("pipeline-adapter")) {
        args[0] = "plinth".into();
        args.insert(1, "pipeline-adapter".into());
    }
    let help_of_help =
        args.len() == 3 && args[1] == "help" && (args[2] == "--help" || args[2] == "-h");
    if help_of_help {
        return Cli::parse_from([args[0].clone(), "--help".into()]);
    }
    Cli::parse_from(args)
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    // Commands whose output is piped (`plinth manifests all | head`) end quietly when the
    // reader goes away, like other Unix tools; the long-running ones keep Rust's default.
    if matches!(
        cli.command,
        Command::Quickstart(_)
            | Command::Manifests(_)
            | Command::Health(_)
            | Command::Status(_)
            | Command::Render(_)
            | Command::Build(_)
    ) {
        // SAFETY: resetting a signal disposition to its default before any thread starts.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    // quickstart prints its own progress; controller logs would drown it. kube's client
    // logs each failed request at ERROR; these commands report a failure themselves, once.
    let default_log = if matches!(
        cli.command,
        Command::Quickstart(_)
            | Command::Health(_)
            | Command::Status(_)
            | Command::Render(_)
            | Command::Test(_)
            | Command::Diff(_)
    ) {
        "warn,kube_client::client::builder=off"
    } else {
        "info"
    };
    let filter = cli
        .log
        .clone()
        .or_else(|| std::env::var("RUST_LOG").ok().filter(|f| !f.is_empty()))
        .unwrap_or_else(|| default_log.to_string());
    logging::init(&filter, cli.log_format);
    // kube (ring) and object_store (aws-lc-rs) both link rustls providers; choose one
    // process-wide so no TLS handshake panics for want of a default.
    let _ = rustls::crypto::ring::default_provider().install_default();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let done = match cli.command {
            Command::Up(args) => cmd::up::run(args).await,
            Command::Quickstart(args) => cmd::quickstart::run(args).await,
            Command::Operator(args) => cmd::operator::run(args).await,
            Command::Manifests(args) => cmd::manifests::run(args).await,
            Command::Health(args) => cmd::health::run(args).await,
            Command::Status(args) => cmd::status::run(args).await,
            Command::PipelineAdapter(args) => cmd::pipeline_adapter::run(args).await,
            Command::Agent(args) => cmd::agent::run(args).await,
            Command::Worker(args) => cmd::worker::run(args).await,
            Command::Render(args) => cmd::render::run(args).await,
            Command::Init(args) => cmd::init::run(args),
            Command::Update(args) => cmd::update::run(args),
            Command::Add(args) => cmd::add::run(args),
            Command::Build(args) => cmd::build::run(args),
            Command::Test(args) => cmd::test::run(args).await,
            Command::Diff(args) => return cmd::diff::run(args).await,
        };
        done.map(|()| ExitCode::SUCCESS)
    })
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_well_formed() {
        super::Cli::command().debug_assert();
    }

    /// Every flag naming a container image, in every subcommand, refuses a value that is
    /// not an image reference, naming the flag (a Pod that never pulls is found late).
    #[test]
    fn every_image_flag_checks_its_value() {
        fn walk(cmd: &clap::Command, path: &mut Vec<String>, found: &mut Vec<String>) {
            for arg in cmd.get_arguments() {
                let Some(long) = arg.get_long() else { continue };
                if !long.ends_with("image") {
                    continue;
                }
                let mut argv = vec!["plinth".to_string()];
                argv.extend(path.iter().cloned());
                argv.extend([format!("--{long}"), "Example.org/Not An Image".into()]);
                let err = match super::Cli::command().try_get_matches_from(&argv) {
                    Ok(_) => panic!("{argv:?} was accepted"),
                    Err(e) => e,
                };
                assert_eq!(
                    err.kind(),
                    clap::error::ErrorKind::ValueValidation,
                    "{argv:?}: {err}"
                );
                assert!(err.to_string().contains(&format!("--{long}")), "{err}");
                found.push(argv[1..].join(" "));
            }
            for sub in cmd.get_subcommands() {
                path.push(sub.get_name().to_string());
                walk(sub, path, found);
                path.pop();
            }
        }
        let mut found = Vec::new();
        walk(&super::Cli::command(), &mut Vec::new(), &mut found);
        // The walk is not vacuous: the known image flags are among those it checked.
        for want in [
            "manifests operator --image",
            "operator --adapter-image",
            "agent --health-adapter-image",
            "add container --image",
        ] {
            assert!(
                found.iter().any(|f| f.starts_with(want)),
                "{want}: {found:?}"
            );
        }
    }
}
