//! `plinth pipeline-adapter`: the containers Plinth injects into every pipeline Job
//! (kratix-spec §4.3): `reader`, `work-creator`, `status-writer` (alias `update-status`).
//!
//! Paths default to the Kratix contract (`/kratix/...`, `/work-creator-files/...`) and can
//! be overridden with flags or `INPUT_DIR` / `OUTPUT_DIR` / `METADATA_DIR`, so the embedded
//! runner can run the adapter on a host where `/kratix` does not exist. The object comes
//! from the `KRATIX_OBJECT_*` environment; the client from `KUBECONFIG` or in-cluster config.

use anyhow::Context;
use clap::{Args, Subcommand};
use plinth_pipeline::WorkflowType;
use plinth_pipeline::contract::{self, env};
use plinth_pipeline::object::ObjectRef;
use plinth_pipeline::reader::{ReaderArgs, run_reader};
use plinth_pipeline::status_writer::{StatusWriterArgs, run_status_writer};
use plinth_pipeline::work_creator::{WorkCreatorArgs, WorkOutcome, run_work_creator};
use std::path::PathBuf;

/// Arguments of `plinth pipeline-adapter`.
#[derive(Args)]
pub struct PipelineAdapterArgs {
    /// The adapter role to run.
    #[command(subcommand)]
    pub role: AdapterRole,
}

/// The adapter roles.
#[derive(Subcommand)]
pub enum AdapterRole {
    /// Write the Promise or resource request to <input-dir>/object.yaml.
    Reader(ReaderCli),
    /// Turn the pipeline output into a Work (configure pipelines).
    WorkCreator(WorkCreatorCli),
    /// Merge status.yaml into the object's status and record suspend/retry requests.
    #[command(alias = "update-status")]
    StatusWriter(StatusWriterCli),
}

/// Flags of `reader`.
#[derive(Args)]
pub struct ReaderCli {
    /// Directory to write object.yaml into.
    #[arg(long, env = env::INPUT_DIR, default_value = contract::INPUT_DIR)]
    pub input_dir: PathBuf,
    /// Output directory to create if missing.
    #[arg(long, env = env::OUTPUT_DIR, default_value = contract::OUTPUT_DIR)]
    pub output_dir: PathBuf,
}

/// Flags of `work-creator` (kratix-spec §4.3).
#[derive(Args)]
pub struct WorkCreatorCli {
    /// Root holding input/ (pipeline output), metadata/ and kratix-system/promise-scheduling.
    #[arg(long, default_value = contract::WORK_CREATOR_ROOT)]
    pub input_directory: PathBuf,
    /// Promise name.
    #[arg(long)]
    pub promise_name: String,
    /// Pipeline name.
    #[arg(long)]
    pub pipeline_name: String,
    /// Namespace for the Work (empty = kratix-platform-system).
    #[arg(long, default_value = "")]
    pub namespace: String,
    /// `promise` or `resource`.
    #[arg(long)]
    pub workflow_type: WorkflowType,
    /// Resource request name (resource workflows).
    #[arg(long)]
    pub resource_name: Option<String>,
    /// Resource request namespace (only when the Promise sets pipelineNamespace).
    #[arg(long)]
    pub resource_namespace: Option<String>,
    /// Override of <input-directory>/input.
    #[arg(long, env = env::OUTPUT_DIR)]
    pub output_dir: Option<PathBuf>,
    /// Override of <input-directory>/metadata.
    #[arg(long, env = env::METADATA_DIR)]
    pub metadata_dir: Option<PathBuf>,
    /// Override of <input-directory>/kratix-system/promise-scheduling.
    #[arg(long)]
    pub promise_scheduling: Option<PathBuf>,
}

/// Flags of `status-writer` / `update-status`.
#[derive(Args)]
pub struct StatusWriterCli {
    /// Directory holding status.yaml and workflow-control.yaml.
    #[arg(long, env = env::METADATA_DIR, default_value = contract::WORK_CREATOR_METADATA_DIR)]
    pub metadata_dir: PathBuf,
    /// Re-read and re-merge this many times when the status write conflicts.
    #[arg(long, default_value_t = 10)]
    pub max_conflict_retries: u32,
}

fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v.eq_ignore_ascii_case("true"))
}

fn env_nonempty(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

async fn client() -> anyhow::Result<kube::Client> {
    kube::Client::try_default()
        .await
        .context("connecting to the Kubernetes API (KUBECONFIG or in-cluster configuration)")
}

/// Runs `plinth pipeline-adapter`.
pub async fn run(args: PipelineAdapterArgs) -> anyhow::Result<()> {
    match args.role {
        AdapterRole::Reader(r) => {
            let object = ObjectRef::from_env()?;
            let path = run_reader(
                client().await?,
                ReaderArgs {
                    input_dir: r.input_dir,
                    output_dir: Some(r.output_dir),
                    object,
                },
            )
            .await?;
            eprintln!("wrote {}", path.display());
        }
        AdapterRole::WorkCreator(w) => {
            let mut a = WorkCreatorArgs::from_input_directory(
                &w.input_directory,
                w.promise_name,
                w.pipeline_name,
                w.namespace,
                w.workflow_type,
            );
            if let Some(o) = w.output_dir {
                a.output_dir = o;
            }
            if let Some(m) = w.metadata_dir {
                a.metadata_dir = m;
            }
            if let Some(p) = w.promise_scheduling {
                a.promise_scheduling = Some(p);
            }
            a.resource_name = w.resource_name.filter(|s| !s.is_empty());
            a.resource_namespace = w.resource_namespace.filter(|s| !s.is_empty());
            a.dry_run = env_flag(env::DRY_RUN);
            a.trace_parent = env_nonempty(env::TRACE_PARENT);
            a.trace_state = env_nonempty(env::TRACE_STATE);
            match run_work_creator(client().await?, a).await? {
                WorkOutcome::Skipped => {
                    eprintln!("workflow suspended or retrying: no Work written")
                }
                WorkOutcome::Created { name } => eprintln!("created Work {name}"),
                WorkOutcome::Updated { name } => eprintln!("updated Work {name}"),
            }
        }
        AdapterRole::StatusWriter(s) => {
            let object = ObjectRef::from_env()?;
            let pipeline_name = env_nonempty(env::PIPELINE_NAME).with_context(|| {
                format!("environment variable {} is required", env::PIPELINE_NAME)
            })?;
            let workflow_type: WorkflowType = env_nonempty(env::WORKFLOW_TYPE)
                .with_context(|| {
                    format!("environment variable {} is required", env::WORKFLOW_TYPE)
                })?
                .parse()
                .map_err(|e: String| anyhow::anyhow!("{}: {e}", env::WORKFLOW_TYPE))?;
            run_status_writer(
                client().await?,
                StatusWriterArgs {
                    metadata_dir: s.metadata_dir,
                    object,
                    pipeline_name,
                    workflow_type,
                    is_last_pipeline: env_flag(env::IS_LAST_PIPELINE),
                    dry_run: env_flag(env::DRY_RUN),
                    max_conflict_retries: s.max_conflict_retries,
                },
            )
            .await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        role: AdapterRole,
    }

    #[test]
    fn kratix_work_creator_flags_parse() {
        let cli = Cli::try_parse_from([
            "pipeline-adapter",
            "work-creator",
            "--input-directory",
            "/work-creator-files",
            "--promise-name",
            "redis",
            "--pipeline-name",
            "instance-configure",
            "--namespace",
            "team-a",
            "--workflow-type",
            "resource",
            "--resource-name",
            "r1",
        ])
        .unwrap();
        let AdapterRole::WorkCreator(w) = cli.role else {
            panic!("work-creator expected")
        };
        assert_eq!(w.workflow_type, WorkflowType::Resource);
        assert_eq!(w.resource_name.as_deref(), Some("r1"));
        assert_eq!(w.input_directory, PathBuf::from("/work-creator-files"));
        assert!(w.resource_namespace.is_none());
        assert!(
            Cli::try_parse_from([
                "pipeline-adapter",
                "work-creator",
                "--promise-name",
                "p",
                "--pipeline-name",
                "x",
                "--workflow-type",
                "widget"
            ])
            .is_err()
        );
    }

    #[test]
    fn update_status_is_an_alias_and_dirs_can_be_overridden() {
        let cli = Cli::try_parse_from([
            "pipeline-adapter",
            "update-status",
            "--metadata-dir",
            "/tmp/meta",
        ])
        .unwrap();
        let AdapterRole::StatusWriter(s) = cli.role else {
            panic!("status-writer expected")
        };
        assert_eq!(s.metadata_dir, PathBuf::from("/tmp/meta"));
        let cli =
            Cli::try_parse_from(["pipeline-adapter", "reader", "--input-dir", "/tmp/in"]).unwrap();
        let AdapterRole::Reader(r) = cli.role else {
            panic!("reader expected")
        };
        assert_eq!(r.input_dir, PathBuf::from("/tmp/in"));
    }
}
