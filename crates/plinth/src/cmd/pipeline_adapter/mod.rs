//! `plinth pipeline-adapter`: the containers Plinth injects into every pipeline Job:
//! `reader`, `work-creator`, `status-writer` (alias `update-status`), and into every
//! health check at a Destination: `reader --input-env`, `health-state-creator`.
//!
//! Paths default to the Kratix contract (`/kratix/...`, `/work-creator-files/...`) and can
//! be overridden with flags or `INPUT_DIR` / `OUTPUT_DIR` / `METADATA_DIR`, so the embedded
//! runner can run the adapter on a host where `/kratix` does not exist. The object comes
//! from the `KRATIX_OBJECT_*` environment; the client from `KUBECONFIG` or in-cluster config.

use anyhow::Context;
use clap::{Args, Subcommand};
use plinth_pipeline::WorkflowType;
use plinth_pipeline::contract::ObjectRef;
use plinth_pipeline::contract::{self, env};
use plinth_pipeline::reader::{ReaderArgs, run_reader};
use plinth_pipeline::status_writer::{StatusWriterArgs, run_status_writer};
use plinth_pipeline::work_creator::{InputLayout, WorkCreatorArgs, WorkOutcome, run_work_creator};
use std::path::{Path, PathBuf};

pub mod in_process;

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
    /// Turn <output-dir>/health-status.yaml into a HealthRecord (health checks).
    HealthStateCreator(HealthStateCreatorCli),
}

/// A place an adapter role writes, as a container path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Written {
    /// A directory the role creates when it is missing.
    Dir(PathBuf),
    /// A file the role writes.
    File(PathBuf),
}

impl AdapterRole {
    /// What the role writes to files, in the order it writes (only the reader writes
    /// files; the others write through the API).
    pub fn writes(&self) -> Vec<Written> {
        match self {
            AdapterRole::Reader(r) => vec![
                Written::Dir(r.input_dir.clone()),
                Written::Dir(r.output_dir.clone()),
                Written::File(r.input_dir.join(contract::OBJECT_FILE)),
            ],
            _ => Vec::new(),
        }
    }

    /// Every path flag through `f`: container paths become host paths when the runner
    /// runs the role in its own process.
    pub fn map_paths(&mut self, f: impl Fn(&Path) -> PathBuf) {
        match self {
            AdapterRole::Reader(r) => {
                r.input_dir = f(&r.input_dir);
                r.output_dir = f(&r.output_dir);
            }
            AdapterRole::WorkCreator(w) => {
                // Each directory is mapped on its own: they are mounts of their own, not
                // directories of the input directory.
                let layout = InputLayout::under(&w.input_directory);
                w.output_dir.get_or_insert(layout.output_dir);
                w.metadata_dir.get_or_insert(layout.metadata_dir);
                w.promise_scheduling
                    .get_or_insert(layout.promise_scheduling);
                w.input_directory = f(&w.input_directory);
                let overrides = [
                    &mut w.output_dir,
                    &mut w.metadata_dir,
                    &mut w.promise_scheduling,
                ];
                for p in overrides.into_iter().flatten() {
                    let mapped = f(p);
                    *p = mapped;
                }
            }
            AdapterRole::StatusWriter(s) => s.metadata_dir = f(&s.metadata_dir),
            AdapterRole::HealthStateCreator(h) => h.output_dir = f(&h.output_dir),
        }
    }
}

/// Flags of `health-state-creator`; each also comes from the environment variable named,
/// which the health agent sets on the check's Pod.
#[derive(Args)]
pub struct HealthStateCreatorCli {
    /// Directory holding health-status.yaml.
    #[arg(long, env = env::OUTPUT_DIR, default_value = contract::OUTPUT_DIR)]
    pub output_dir: PathBuf,
    /// The HealthDefinition's name.
    #[arg(long, env = plinth_api::constants::health::DEFINITION_NAME_ENV)]
    pub definition: String,
    /// The HealthDefinition's namespace (the record is written there).
    #[arg(long, env = plinth_api::constants::health::DEFINITION_NAMESPACE_ENV)]
    pub definition_namespace: String,
    /// The checked request's Promise (`promiseRef.name`).
    #[arg(long, env = env::PROMISE_NAME)]
    pub promise: String,
    /// The checked request's name (`resourceRef.name`).
    #[arg(long, env = env::OBJECT_NAME)]
    pub resource_name: String,
    /// The checked request's namespace (`resourceRef.namespace`).
    #[arg(long, env = env::OBJECT_NAMESPACE)]
    pub resource_namespace: String,
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
    /// Write the value of this environment variable as object.yaml instead of reading the
    /// object through the API (a health check's input: `KRATIX_HEALTH_INPUT`).
    #[arg(long, value_name = "VAR")]
    pub input_env: Option<String>,
}

/// Flags of `work-creator`.
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
    /// Refuse Works whose serialised spec exceeds this many bytes (etcd's limit by default).
    #[arg(long, default_value_t = plinth_pipeline::work_creator::DEFAULT_MAX_WORK_BYTES)]
    pub max_work_bytes: usize,
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

/// Environment lookup (the process environment, a container's environment when the
/// runner runs the role in its own process, a map in tests).
pub type EnvLookup<'a> = &'a (dyn Fn(&str) -> Option<String> + Sync);

/// Where a role prints what it did (stderr of the process, or the container's log).
pub type Output<'a> = &'a mut (dyn std::io::Write + Send);

/// One line of what the role did, in one write; a log that cannot be written loses the
/// line, not the run.
fn say(out: Output<'_>, line: std::fmt::Arguments<'_>) {
    let _ = out.write_all(format!("{line}\n").as_bytes());
}

fn env_flag(env: EnvLookup, name: &str) -> bool {
    env(name).is_some_and(|v| v.eq_ignore_ascii_case("true"))
}

fn env_nonempty(env: EnvLookup, name: &str) -> Option<String> {
    env(name).filter(|v| !v.is_empty())
}

/// Runs `plinth pipeline-adapter` with a client from `KUBECONFIG` or the in-cluster
/// configuration and the process environment.
pub async fn run(args: PipelineAdapterArgs) -> anyhow::Result<()> {
    let client = kube::Client::try_default()
        .await
        .context("connecting to the Kubernetes API (KUBECONFIG or in-cluster configuration)")?;
    let process_env = |k: &str| std::env::var(k).ok();
    run_role(args.role, client, &process_env, &mut std::io::stderr()).await
}

/// Runs one adapter role with `client`, reading `KRATIX_*`, `IS_LAST_PIPELINE` and trace
/// variables through `env`.
/// What the role did goes to `out`.
pub async fn run_role(
    role: AdapterRole,
    client: kube::Client,
    env: EnvLookup<'_>,
    out: Output<'_>,
) -> anyhow::Result<()> {
    match role {
        AdapterRole::Reader(r) => reader(r, client, env, out).await,
        AdapterRole::WorkCreator(w) => work_creator(w, client, env, out).await,
        AdapterRole::StatusWriter(s) => status_writer(s, client, env).await,
        AdapterRole::HealthStateCreator(h) => health_state_creator(h, client, out).await,
    }
}

/// The reader: the object from the environment variable `--input-env` names, else the
/// Promise or request the `KRATIX_*` variables name, written to the input directory.
async fn reader(
    r: ReaderCli,
    client: kube::Client,
    env: EnvLookup<'_>,
    out: Output<'_>,
) -> anyhow::Result<()> {
    if let Some(var) = r.input_env {
        let text = env(&var).unwrap_or_default();
        let path = plinth_pipeline::reader::write_input(&r.input_dir, &r.output_dir, &text)
            .with_context(|| format!("writing the input from environment variable {var}"))?;
        say(out, format_args!("wrote {}", path.display()));
        return Ok(());
    }
    let object = ObjectRef::from_env_with(env)?;
    let path = run_reader(
        client,
        ReaderArgs {
            input_dir: r.input_dir,
            output_dir: Some(r.output_dir),
            object,
            dry_run: env_flag(env, env::DRY_RUN),
        },
    )
    .await?;
    say(out, format_args!("wrote {}", path.display()));
    Ok(())
}

/// The work-creator: the pipeline's output as the object's Work.
async fn work_creator(
    w: WorkCreatorCli,
    client: kube::Client,
    env: EnvLookup<'_>,
    out: Output<'_>,
) -> anyhow::Result<()> {
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
    a.dry_run = env_flag(env, env::DRY_RUN);
    a.trace_parent = env_nonempty(env, env::TRACE_PARENT);
    a.trace_state = env_nonempty(env, env::TRACE_STATE);
    a.max_work_bytes = w.max_work_bytes;
    match run_work_creator(client, a).await? {
        WorkOutcome::Skipped => say(
            out,
            format_args!("workflow suspended or retrying: no Work written"),
        ),
        WorkOutcome::Created { name } => say(out, format_args!("created Work {name}")),
        WorkOutcome::Updated { name } => say(out, format_args!("updated Work {name}")),
    }
    Ok(())
}

/// The status-writer: `status.yaml` merged into the object's status, with the
/// pipeline the `KRATIX_*` variables name.
async fn status_writer(
    s: StatusWriterCli,
    client: kube::Client,
    env: EnvLookup<'_>,
) -> anyhow::Result<()> {
    let object = ObjectRef::from_env_with(env)?;
    let pipeline_name = env_nonempty(env, env::PIPELINE_NAME)
        .with_context(|| format!("environment variable {} is required", env::PIPELINE_NAME))?;
    let workflow_type: WorkflowType = env_nonempty(env, env::WORKFLOW_TYPE)
        .with_context(|| format!("environment variable {} is required", env::WORKFLOW_TYPE))?
        .parse()
        .map_err(|e: String| anyhow::anyhow!("{}: {e}", env::WORKFLOW_TYPE))?;
    run_status_writer(
        client,
        StatusWriterArgs {
            metadata_dir: s.metadata_dir,
            object,
            pipeline_name,
            workflow_type,
            is_last_pipeline: env_flag(env, env::IS_LAST_PIPELINE),
            dry_run: env_flag(env, env::DRY_RUN),
            max_conflict_retries: s.max_conflict_retries,
        },
    )
    .await?;
    Ok(())
}

/// The health-state-creator: `health-status.yaml` as the check's HealthRecord.
async fn health_state_creator(
    h: HealthStateCreatorCli,
    client: kube::Client,
    out: Output<'_>,
) -> anyhow::Result<()> {
    use plinth_pipeline::health_state_creator::*;
    let name = run_health_state_creator(
        client,
        HealthStateCreatorArgs {
            output_dir: h.output_dir,
            target: HealthTarget {
                definition: h.definition,
                definition_namespace: h.definition_namespace,
                promise: h.promise,
                request: h.resource_name,
                request_namespace: h.resource_namespace,
            },
        },
    )
    .await?;
    say(out, format_args!("applied HealthRecord {name}"));
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

    #[test]
    fn health_roles_parse_and_name_what_is_missing() {
        let cli = Cli::try_parse_from([
            "pipeline-adapter",
            "health-state-creator",
            "--output-dir",
            "/tmp/out",
            "--definition",
            "web-health",
            "--definition-namespace",
            "apps",
            "--promise",
            "web",
            "--resource-name",
            "one",
            "--resource-namespace",
            "default",
        ])
        .unwrap();
        let AdapterRole::HealthStateCreator(h) = cli.role else {
            panic!("health-state-creator expected")
        };
        assert_eq!(h.output_dir, PathBuf::from("/tmp/out"));
        assert_eq!(
            (h.definition.as_str(), h.definition_namespace.as_str()),
            ("web-health", "apps")
        );
        let e = Cli::try_parse_from([
            "pipeline-adapter",
            "health-state-creator",
            "--promise",
            "web",
        ])
        .err()
        .unwrap()
        .to_string();
        assert!(e.contains("--definition"), "{e}");
        let cli =
            Cli::try_parse_from(["a", "reader", "--input-env", "KRATIX_HEALTH_INPUT"]).unwrap();
        let AdapterRole::Reader(r) = cli.role else {
            panic!("reader expected")
        };
        assert_eq!(r.input_env.as_deref(), Some("KRATIX_HEALTH_INPUT"));
    }

    /// The three roles, wired exactly as a pipeline Job runs them, against the embedded
    /// API server: reader → (user container) → work-creator → status-writer.
    #[tokio::test]
    async fn roles_run_end_to_end_against_the_embedded_api_server() {
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
        use kube::Api;
        use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
        use serde_json::json;
        use std::collections::HashMap;

        let ts = plinth_apiserver::testing::TestServer::start()
            .await
            .unwrap();
        let client = ts.client();
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        for crd in plinth_api::crds::all_crds() {
            crds.create(&PostParams::default(), &crd).await.unwrap();
        }
        let api = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "apps.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"kind": "App", "plural": "apps", "singular": "app"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}
        });
        let crd: CustomResourceDefinition = serde_json::from_value(
            plinth_api::request_crd::build_request_crd("app", &api).unwrap(),
        )
        .unwrap();
        crds.create(&PostParams::default(), &crd).await.unwrap();
        let gvk =
            plinth_api::request_crd::request_gvk(&serde_json::to_value(&crd).unwrap()).unwrap();
        let ar = kube::api::ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk(&gvk.group, &gvk.version, &gvk.kind),
            &gvk.plural,
        );
        let apps: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &ar);
        let app: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "example.com/v1", "kind": "App",
            "metadata": {"name": "shop", "namespace": "default"}, "spec": {"replicas": 2}
        }))
        .unwrap();
        apps.create(&PostParams::default(), &app).await.unwrap();
        apps.patch_status(
            "shop",
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"message": "Pending"}})),
        )
        .await
        .unwrap();

        let env: HashMap<&str, &str> = HashMap::from([
            ("KRATIX_WORKFLOW_ACTION", "configure"),
            ("KRATIX_WORKFLOW_TYPE", "resource"),
            ("KRATIX_PROMISE_NAME", "app"),
            ("KRATIX_PIPELINE_NAME", "instance-configure"),
            ("KRATIX_OBJECT_KIND", "App"),
            ("KRATIX_OBJECT_GROUP", "example.com"),
            ("KRATIX_OBJECT_VERSION", "v1"),
            ("KRATIX_OBJECT_NAME", "shop"),
            ("KRATIX_OBJECT_NAMESPACE", "default"),
            ("KRATIX_CRD_PLURAL", "apps"),
            ("KRATIX_CLUSTER_SCOPED", "false"),
            ("IS_LAST_PIPELINE", "true"),
        ]);
        let lookup = |k: &str| env.get(k).map(|v| v.to_string());
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let p = |s: &str| root.join(s).to_string_lossy().into_owned();

        let reader = Cli::try_parse_from([
            "a",
            "reader",
            "--input-dir",
            &p("in"),
            "--output-dir",
            &p("wc/input"),
        ])
        .unwrap();
        run_role(reader.role, client.clone(), &lookup, &mut std::io::sink())
            .await
            .unwrap();
        let object: serde_json::Value =
            serde_saphyr::from_str(&std::fs::read_to_string(root.join("in/object.yaml")).unwrap())
                .unwrap();
        assert_eq!(object["spec"]["replicas"], 2);

        // What a user container would do with the contract.
        std::fs::write(root.join("wc/input/deployment.yaml"), "replicas: 2\n").unwrap();
        std::fs::create_dir_all(root.join("wc/metadata")).unwrap();
        std::fs::write(
            root.join("wc/metadata/status.yaml"),
            "url: https://shop.example.test\n",
        )
        .unwrap();

        let wc = Cli::try_parse_from([
            "a",
            "work-creator",
            "--input-directory",
            &p("wc"),
            "--promise-name",
            "app",
            "--pipeline-name",
            "instance-configure",
            "--namespace",
            "default",
            "--workflow-type",
            "resource",
            "--resource-name",
            "shop",
        ])
        .unwrap();
        run_role(wc.role, client.clone(), &lookup, &mut std::io::sink())
            .await
            .unwrap();
        let works: Api<plinth_api::Work> = Api::namespaced(client.clone(), "default");
        let list = works.list(&Default::default()).await.unwrap();
        assert_eq!(list.items.len(), 1);
        assert_eq!(
            list.items[0].spec.workload_groups.as_ref().unwrap()[0]
                .workloads
                .as_ref()
                .unwrap()[0]
                .filepath,
            "deployment.yaml"
        );

        let sw = Cli::try_parse_from(["a", "update-status", "--metadata-dir", &p("wc/metadata")])
            .unwrap();
        run_role(sw.role, client.clone(), &lookup, &mut std::io::sink())
            .await
            .unwrap();
        let shop = apps.get("shop").await.unwrap();
        assert_eq!(shop.data["status"]["url"], "https://shop.example.test");
        assert_eq!(shop.data["status"]["message"], "Resource requested");

        // Missing object environment is a clear error.
        let no_env = |_: &str| None;
        let sw = Cli::try_parse_from(["a", "status-writer", "--metadata-dir", &p("wc/metadata")])
            .unwrap();
        let e = run_role(sw.role, client, &no_env, &mut std::io::sink())
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains("KRATIX_OBJECT_VERSION"), "{e}");
    }
}
