//! The work-creator role: pipeline output → Work.

use crate::control::WorkflowControl;
use crate::selectors::{read_destination_selectors, read_promise_scheduling, squash};
use crate::{PipelineError, WorkflowType, yaml};
use base64::Engine as _;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use plinth_api::constants::{self, annotations, labels, selector_source, work_type};
use plinth_api::contract::{
    PROMISE_SCHEDULING_FILE, WORK_CREATOR_INPUT_SUBDIR, WORK_CREATOR_KRATIX_SYSTEM_SUBDIR,
    WORK_CREATOR_METADATA_SUBDIR,
};
use plinth_api::{Work, WorkSpec, Workload, WorkloadGroup, WorkloadGroupScheduling, hash, names};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::io::Write as _;
use std::path::{Component, Path, PathBuf};

/// Compresses file bytes as Kratix stores them in Works: gzip, then standard base64.
pub fn encode_content(bytes: &[u8]) -> Result<String, std::io::Error> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(bytes)?;
    Ok(base64::engine::general_purpose::STANDARD.encode(enc.finish()?))
}

/// Reverses [`encode_content`]. Errors on invalid base64 or gzip.
pub fn decode_content(content: &str) -> Result<Vec<u8>, std::io::Error> {
    use std::io::Read as _;
    let gz = base64::engine::general_purpose::STANDARD
        .decode(content.trim())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(&gz[..]).read_to_end(&mut out)?;
    Ok(out)
}

/// A regular file found in the output directory.
struct OutputFile {
    /// Path relative to the output root, `/`-separated.
    rel: String,
    /// Where to read it (symlinks resolved).
    real: PathBuf,
}

fn unsafe_path(path: &Path, reason: impl Into<String>) -> PipelineError {
    PipelineError::UnsafePath {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// Walks `dir` (lexical order), refusing anything that resolves outside `root`.
fn collect_files(
    root: &Path,
    dir: &Path,
    rel: &str,
    out: &mut Vec<OutputFile>,
    visited: &mut HashSet<PathBuf>,
) -> Result<(), PipelineError> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| PipelineError::io(dir, e))?
        .collect::<Result<_, _>>()
        .map_err(|e| PipelineError::io(dir, e))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let name = entry
            .file_name()
            .into_string()
            .map_err(|n| unsafe_path(&path, format!("file name {n:?} is not UTF-8")))?;
        let child_rel = if rel.is_empty() {
            name.clone()
        } else {
            format!("{rel}/{name}")
        };
        let ft = entry.file_type().map_err(|e| PipelineError::io(&path, e))?;
        let (real, ft) = if ft.is_symlink() {
            let target = std::fs::canonicalize(&path)
                .map_err(|e| unsafe_path(&path, format!("symlink cannot be resolved: {e}")))?;
            if !target.starts_with(root) {
                return Err(unsafe_path(
                    &path,
                    format!(
                        "symlink points outside the output directory (to {})",
                        target.display()
                    ),
                ));
            }
            let meta = std::fs::metadata(&target).map_err(|e| PipelineError::io(&target, e))?;
            (target, meta.file_type())
        } else {
            (path.clone(), ft)
        };
        if ft.is_dir() {
            let canon = std::fs::canonicalize(&real).map_err(|e| PipelineError::io(&real, e))?;
            if !visited.insert(canon) {
                return Err(unsafe_path(&path, "directory symlink loop"));
            }
            collect_files(root, &real, &child_rel, out, visited)?;
        } else if ft.is_file() {
            out.push(OutputFile {
                rel: child_rel,
                real,
            });
        } else {
            return Err(unsafe_path(&path, "not a regular file or directory"));
        }
    }
    Ok(())
}

fn is_yaml(rel: &str) -> bool {
    let lower = rel.to_ascii_lowercase();
    lower.ends_with(".yaml") || lower.ends_with(".yml")
}

fn to_workload(output_dir: &Path, f: &OutputFile) -> Result<Workload, PipelineError> {
    let bytes = std::fs::read(&f.real).map_err(|e| PipelineError::io(&f.real, e))?;
    if is_yaml(&f.rel) {
        let text = std::str::from_utf8(&bytes).map_err(|e| PipelineError::InvalidYaml {
            path: output_dir.join(&f.rel),
            location: None,
            message: format!("not UTF-8: {e}"),
        })?;
        yaml::validate(&output_dir.join(&f.rel), text)?;
    }
    let content = encode_content(&bytes).map_err(|e| PipelineError::io(&f.real, e))?;
    Ok(Workload {
        filepath: f.rel.clone(),
        content,
        ..Default::default()
    })
}

fn scheduling(labels: BTreeMap<String, String>, source: &str) -> WorkloadGroupScheduling {
    WorkloadGroupScheduling {
        match_labels: Some(labels),
        source: Some(source.to_string()),
        ..Default::default()
    }
}

/// Builds the workload groups of a Work from a pipeline's output:
///
/// 1. `workflow-control.yaml` asking to suspend or retry → no groups (`Ok(vec![])`; the
///    caller must not write a Work — see [`run_work_creator`]).
/// 2. Each `destination-selectors.yaml` entry with a top-level `directory` D becomes a group
///    `{directory: D, id: md5(D), workloads: files under D, destinationSelectors:
///    [{matchLabels, source: <type>-workflow}]}`, in file order. Promise selectors are not
///    applied to these groups. A D that is not a directory in the output is an error
///    ([`PipelineError::MissingDirectory`]); a D without files gives no group.
/// 3. The files outside those directories form the default group (`directory: "."`,
///    id md5(".")), with selectors in order: the root entry of destination-selectors.yaml
///    (source `<type>-workflow`), squashed `promise-workflow` entries and squashed `promise`
///    entries of the promise-scheduling file. No default group when there are no such files.
///
/// Workload `filepath`s are relative to the output root; contents are gzip + base64.
/// Files are visited in lexical order, so the result is deterministic.
///
/// Errors: output paths that resolve outside `output_dir` (symlinks, `..`) or are not
/// regular files ([`PipelineError::UnsafePath`]); `.yaml`/`.yml` files that are not valid
/// YAML streams ([`PipelineError::InvalidYaml`] with file, line and column); invalid
/// selector or scheduling files ([`PipelineError::InvalidMetadata`]).
pub fn build_workload_groups(
    output_dir: &Path,
    metadata_dir: &Path,
    promise_scheduling: Option<&Path>,
    workflow_type: WorkflowType,
) -> Result<Vec<WorkloadGroup>, PipelineError> {
    if WorkflowControl::read(metadata_dir)?
        .request()?
        .is_suspended()
    {
        return Ok(Vec::new());
    }
    let selectors = read_destination_selectors(metadata_dir)?;
    let promise_entries = read_promise_scheduling(promise_scheduling)?;
    if !output_dir.is_dir() {
        return Err(PipelineError::io(
            output_dir,
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "pipeline output directory does not exist",
            ),
        ));
    }
    let root = std::fs::canonicalize(output_dir).map_err(|e| PipelineError::io(output_dir, e))?;
    let mut files = Vec::new();
    let mut visited = HashSet::from([root.clone()]);
    collect_files(&root, &root, "", &mut files, &mut visited)?;

    let source = workflow_type.selector_source();
    let mut groups = Vec::new();
    let mut scheduled: BTreeSet<&str> = BTreeSet::new();
    for sel in selectors.iter().filter(|s| !s.is_root()) {
        let dir_path = root.join(&sel.directory);
        let is_dir =
            std::fs::canonicalize(&dir_path).is_ok_and(|p| p.starts_with(&root) && p.is_dir());
        if !is_dir {
            return Err(PipelineError::MissingDirectory {
                directory: sel.directory.clone(),
                output: output_dir.to_path_buf(),
            });
        }
        scheduled.insert(sel.directory.as_str());
        let prefix = format!("{}/", sel.directory);
        let workloads = files
            .iter()
            .filter(|f| f.rel.starts_with(&prefix))
            .map(|f| to_workload(output_dir, f))
            .collect::<Result<Vec<_>, _>>()?;
        if workloads.is_empty() {
            tracing::warn!(directory = %sel.directory, "scheduled directory has no files; no workload group for it");
            continue;
        }
        groups.push(WorkloadGroup {
            id: hash::workload_group_id(&sel.directory),
            directory: sel.directory.clone(),
            workloads: Some(workloads),
            destination_selectors: Some(vec![scheduling(sel.match_labels.clone(), source)]),
            ..Default::default()
        });
    }

    let remaining = files
        .iter()
        .filter(|f| {
            let top = f.rel.split('/').next().unwrap_or_default();
            !(f.rel.contains('/') && scheduled.contains(top))
        })
        .map(|f| to_workload(output_dir, f))
        .collect::<Result<Vec<_>, _>>()?;
    if !remaining.is_empty() {
        let mut sels = Vec::new();
        if let Some(root_sel) = selectors.iter().find(|s| s.is_root()) {
            sels.push(scheduling(root_sel.match_labels.clone(), source));
        }
        if let Some(l) = squash(&promise_entries, selector_source::PROMISE_WORKFLOW) {
            sels.push(scheduling(l, selector_source::PROMISE_WORKFLOW));
        }
        if let Some(l) = squash(&promise_entries, selector_source::PROMISE) {
            sels.push(scheduling(l, selector_source::PROMISE));
        }
        groups.push(WorkloadGroup {
            id: constants::DEFAULT_WORKLOAD_GROUP_ID.to_string(),
            directory: constants::DEFAULT_WORKLOAD_GROUP_DIRECTORY.to_string(),
            workloads: Some(remaining),
            destination_selectors: (!sels.is_empty()).then_some(sels),
            ..Default::default()
        });
    }
    Ok(groups)
}

/// Default limit on the serialised Work spec: 1.5 MiB, etcd's default request size limit.
/// Kubernetes rejects larger objects with an opaque error.
pub const DEFAULT_MAX_WORK_BYTES: usize = 1536 * 1024;

/// Checks the serialised size of `spec` against `limit` bytes, naming the largest files
/// when it is over ([`PipelineError::WorkTooLarge`]).
pub fn check_work_size(spec: &WorkSpec, limit: usize) -> Result<usize, PipelineError> {
    let size = serde_json::to_vec(spec)
        .map_err(|e| PipelineError::Json {
            context: "serialising the Work spec".into(),
            source: e,
        })?
        .len();
    if size <= limit {
        return Ok(size);
    }
    let mut files: Vec<(&str, usize)> = spec
        .workload_groups
        .iter()
        .flatten()
        .flat_map(|g| g.workloads.iter().flatten())
        .map(|w| (w.filepath.as_str(), w.content.len()))
        .collect();
    files.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let largest = files
        .iter()
        .take(3)
        .map(|(p, n)| format!("{p} ({n} bytes)"))
        .collect::<Vec<_>>()
        .join(", ");
    Err(PipelineError::WorkTooLarge {
        size,
        limit,
        largest,
    })
}

/// Inputs of [`run_work_creator`] (the flags of `pipeline-adapter work-creator`).
#[derive(Clone, Debug)]
pub struct WorkCreatorArgs {
    /// Pipeline output (`/work-creator-files/input`).
    pub output_dir: PathBuf,
    /// Metadata directory (`/work-creator-files/metadata`).
    pub metadata_dir: PathBuf,
    /// Promise scheduling file (`/work-creator-files/kratix-system/promise-scheduling`).
    pub promise_scheduling: Option<PathBuf>,
    /// Promise name.
    pub promise_name: String,
    /// Pipeline name.
    pub pipeline_name: String,
    /// Namespace for the Work (empty = `kratix-platform-system`).
    pub namespace: String,
    /// Promise or resource workflow.
    pub workflow_type: WorkflowType,
    /// Resource request name (resource workflows).
    pub resource_name: Option<String>,
    /// Resource request namespace, only when the Promise sets `pipelineNamespace`.
    pub resource_namespace: Option<String>,
    /// Dry run: label the Work `kratix.io/dry-run: "true"`.
    pub dry_run: bool,
    /// `KRATIX_TRACE_PARENT`.
    pub trace_parent: Option<String>,
    /// `KRATIX_TRACE_STATE`.
    pub trace_state: Option<String>,
    /// Limit on the serialised Work spec in bytes ([`DEFAULT_MAX_WORK_BYTES`]).
    pub max_work_bytes: usize,
}

/// Where the work-creator finds its inputs under its input directory, as Kratix mounts
/// them (`input/`, `metadata/`, `kratix-system/promise-scheduling`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputLayout {
    /// The pipeline's output (`/kratix/output` of the other containers).
    pub output_dir: PathBuf,
    /// The pipeline's metadata directory.
    pub metadata_dir: PathBuf,
    /// The Promise's scheduling, written by the platform.
    pub promise_scheduling: PathBuf,
}

impl InputLayout {
    /// The layout under `input_directory`.
    pub fn under(input_directory: &Path) -> InputLayout {
        InputLayout {
            output_dir: input_directory.join(WORK_CREATOR_INPUT_SUBDIR),
            metadata_dir: input_directory.join(WORK_CREATOR_METADATA_SUBDIR),
            promise_scheduling: input_directory
                .join(WORK_CREATOR_KRATIX_SYSTEM_SUBDIR)
                .join(PROMISE_SCHEDULING_FILE),
        }
    }
}

impl WorkCreatorArgs {
    /// Arguments with the directories laid out under `input_directory` as Kratix mounts them
    /// ([`InputLayout`]).
    pub fn from_input_directory(
        input_directory: &Path,
        promise_name: impl Into<String>,
        pipeline_name: impl Into<String>,
        namespace: impl Into<String>,
        workflow_type: WorkflowType,
    ) -> WorkCreatorArgs {
        let layout = InputLayout::under(input_directory);
        WorkCreatorArgs {
            output_dir: layout.output_dir,
            metadata_dir: layout.metadata_dir,
            promise_scheduling: Some(layout.promise_scheduling),
            promise_name: promise_name.into(),
            pipeline_name: pipeline_name.into(),
            namespace: namespace.into(),
            workflow_type,
            resource_name: None,
            resource_namespace: None,
            dry_run: false,
            trace_parent: None,
            trace_state: None,
            max_work_bytes: DEFAULT_MAX_WORK_BYTES,
        }
    }

    /// The Work's namespace.
    pub fn work_namespace(&self) -> &str {
        if self.namespace.is_empty() {
            constants::SYSTEM_NAMESPACE
        } else {
            &self.namespace
        }
    }

    /// The labels that identify this pipeline's Work.
    pub fn work_labels(&self) -> BTreeMap<String, String> {
        let mut l = BTreeMap::new();
        l.insert(labels::PROMISE_NAME.to_string(), self.promise_name.clone());
        let wt = match self.workflow_type {
            WorkflowType::Promise => work_type::PROMISE,
            WorkflowType::Resource => work_type::RESOURCE,
        };
        l.insert(labels::WORK_TYPE.to_string(), wt.to_string());
        l.insert(
            labels::PIPELINE_NAME.to_string(),
            self.pipeline_name.clone(),
        );
        if self.workflow_type == WorkflowType::Resource {
            if let Some(rr) = &self.resource_name {
                l.insert(
                    labels::RESOURCE_NAME.to_string(),
                    names::resource_name_label_value(rr),
                );
            }
            if let Some(ns) = self.resource_namespace.as_ref().filter(|s| !s.is_empty()) {
                l.insert(labels::RESOURCE_NAMESPACE.to_string(), ns.clone());
            }
        }
        if self.dry_run {
            l.insert(labels::DRY_RUN.to_string(), labels::TRUE.to_string());
        }
        l
    }

    /// The deterministic Work name ([`names::work_name`]).
    pub fn work_name(&self) -> String {
        let rr = match self.workflow_type {
            WorkflowType::Resource => self.resource_name.as_deref(),
            WorkflowType::Promise => None,
        };
        let rr_ns = rr.and(self.resource_namespace.as_deref().filter(|s| !s.is_empty()));
        names::work_name(&self.promise_name, rr, rr_ns, &self.pipeline_name)
    }

    fn work_annotations(&self) -> Option<BTreeMap<String, String>> {
        let mut a = BTreeMap::new();
        for (k, v) in [
            (annotations::TRACE_PARENT, &self.trace_parent),
            (annotations::TRACE_STATE, &self.trace_state),
        ] {
            if let Some(v) = v.as_ref().filter(|s| !s.is_empty()) {
                a.insert(k.to_string(), v.clone());
            }
        }
        (!a.is_empty()).then_some(a)
    }
}

/// What [`run_work_creator`] did.
#[derive(Clone, Debug, PartialEq)]
pub enum WorkOutcome {
    /// The pipeline asked to suspend or retry; no Work was touched.
    Skipped,
    /// A new Work was created.
    Created {
        /// Its name.
        name: String,
    },
    /// An existing Work was updated in place.
    Updated {
        /// Its name.
        name: String,
    },
}

/// Runs the work-creator: builds the workload groups ([`build_workload_groups`]) and
/// creates or updates this pipeline's Work.
///
/// An existing Work is found by its labels first (so Works created by Kratix, with random
/// names, keep being updated); more than one match is an error. Otherwise a Work with the
/// deterministic name [`names::work_name`] is created (or updated, if it exists).
/// `spec.lastExecutionTimestamp` is set to now on every run. A Work over
/// `args.max_work_bytes` is refused with [`PipelineError::WorkTooLarge`] before any API call.
pub async fn run_work_creator(
    client: Client,
    args: WorkCreatorArgs,
) -> Result<WorkOutcome, PipelineError> {
    if WorkflowControl::read(&args.metadata_dir)?
        .request()?
        .is_suspended()
    {
        tracing::info!("workflow-control.yaml asks to suspend or retry; no Work written");
        return Ok(WorkOutcome::Skipped);
    }
    let groups = build_workload_groups(
        &args.output_dir,
        &args.metadata_dir,
        args.promise_scheduling.as_deref(),
        args.workflow_type,
    )?;
    let ns = args.work_namespace().to_string();
    let labels = args.work_labels();
    let spec = WorkSpec {
        last_execution_timestamp: Some(now_rfc3339()),
        workload_groups: Some(groups),
        promise_name: Some(args.promise_name.clone()),
        resource_name: match args.workflow_type {
            WorkflowType::Resource => args.resource_name.clone(),
            WorkflowType::Promise => None,
        },
        ..Default::default()
    };
    check_work_size(&spec, args.max_work_bytes)?;
    let api: Api<Work> = Api::namespaced(client, &ns);
    let selector = labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",");
    let existing = api
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| {
            PipelineError::kube(format!("listing Works in {ns} with labels {selector}"), e)
        })?;
    let patch = |name: String| {
        let api = api.clone();
        let ns = ns.clone();
        // Merge patch: `null` would delete, so annotations are only sent when there are some.
        let mut metadata = serde_json::json!({"labels": labels});
        if let Some(a) = args.work_annotations() {
            metadata["annotations"] = serde_json::json!(a);
        }
        let body = serde_json::json!({"metadata": metadata, "spec": spec});
        async move {
            api.patch(&name, &PatchParams::default(), &Patch::Merge(&body))
                .await
                .map_err(|e| PipelineError::kube(format!("updating Work {ns}/{name}"), e))?;
            Ok::<_, PipelineError>(WorkOutcome::Updated { name })
        }
    };
    match existing.items.len() {
        0 => {}
        1 => {
            let name = existing.items[0].metadata.name.clone().unwrap_or_default();
            return patch(name).await;
        }
        _ => {
            let found: Vec<_> = existing
                .items
                .iter()
                .filter_map(|w| w.metadata.name.clone())
                .collect();
            return Err(PipelineError::Ambiguous(format!(
                "more than one Work in {ns} matches labels {selector}: {found:?}"
            )));
        }
    }
    let name = args.work_name();
    let work = Work {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(ns.clone()),
            labels: Some(labels.clone()),
            annotations: args.work_annotations(),
            ..Default::default()
        },
        spec: spec.clone(),
        status: None,
    };
    match api.create(&PostParams::default(), &work).await {
        Ok(_) => Ok(WorkOutcome::Created { name }),
        Err(kube::Error::Api(s)) if s.code == 409 => patch(name).await,
        Err(e) => Err(PipelineError::kube(format!("creating Work {ns}/{name}"), e)),
    }
}

/// Now as RFC 3339 UTC with second precision (`2026-01-02T03:04:05Z`).
pub(crate) fn now_rfc3339() -> String {
    let now = k8s_openapi::jiff::Timestamp::now();
    now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Rejects a workload filepath that is absolute or contains `..` (used by consumers that
/// write workloads to disk).
pub fn check_workload_filepath(filepath: &str) -> Result<(), PipelineError> {
    let p = Path::new(filepath);
    if filepath.is_empty()
        || p.is_absolute()
        || p.components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(unsafe_path(
            p,
            "workload filepaths must be relative and must not contain `..`",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    struct Fixture {
        _dir: tempfile::TempDir,
        out: PathBuf,
        meta: PathBuf,
        sched: PathBuf,
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("input");
        let meta = dir.path().join("metadata");
        let sched = dir.path().join("kratix-system").join("promise-scheduling");
        fs::create_dir_all(&out).unwrap();
        fs::create_dir_all(&meta).unwrap();
        fs::create_dir_all(sched.parent().unwrap()).unwrap();
        Fixture {
            _dir: dir,
            out,
            meta,
            sched,
        }
    }

    fn write(p: &Path, text: &str) {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }

    fn paths(g: &WorkloadGroup) -> Vec<&str> {
        g.workloads
            .iter()
            .flatten()
            .map(|w| w.filepath.as_str())
            .collect()
    }

    fn build(f: &Fixture) -> Result<Vec<WorkloadGroup>, PipelineError> {
        build_workload_groups(&f.out, &f.meta, Some(&f.sched), WorkflowType::Resource)
    }

    #[test]
    fn directory_groups_and_default_group() {
        let f = fixture();
        write(&f.out.join("root.yaml"), "a: 1\n");
        write(&f.out.join("other/nested.yaml"), "b: 2\n---\nc: 3\n");
        write(&f.out.join("dev/x.yaml"), "kind: X\n");
        write(&f.out.join("dev/sub/y.txt"), "plain text");
        write(
            &f.meta.join("destination-selectors.yaml"),
            "- directory: dev\n  matchLabels: {env: dev}\n- matchLabels: {tier: root}\n",
        );
        write(
            &f.sched,
            "- matchLabels: {region: eu}\n  source: promise\n- matchLabels: {region: us, zone: a}\n  source: promise\n",
        );
        let groups = build(&f).unwrap();
        assert_eq!(groups.len(), 2);
        let dev = &groups[0];
        assert_eq!(dev.directory, "dev");
        assert_eq!(dev.id, hash::md5_hex("dev"));
        assert_eq!(paths(dev), ["dev/sub/y.txt", "dev/x.yaml"]);
        let dev_sel = dev.destination_selectors.as_ref().unwrap();
        assert_eq!(
            dev_sel.len(),
            1,
            "promise selectors are not applied to directory groups"
        );
        assert_eq!(dev_sel[0].source.as_deref(), Some("resource-workflow"));
        let def = &groups[1];
        assert_eq!(def.directory, ".");
        assert_eq!(def.id, constants::DEFAULT_WORKLOAD_GROUP_ID);
        assert_eq!(paths(def), ["other/nested.yaml", "root.yaml"]);
        let sel = def.destination_selectors.as_ref().unwrap();
        assert_eq!(sel[0].source.as_deref(), Some("resource-workflow"));
        assert_eq!(sel[0].match_labels.as_ref().unwrap()["tier"], "root");
        assert_eq!(sel[1].source.as_deref(), Some("promise"));
        let promise_labels = sel[1].match_labels.as_ref().unwrap();
        assert_eq!(
            promise_labels["region"], "eu",
            "first promise selector wins"
        );
        assert_eq!(promise_labels["zone"], "a");
        // Content is gzip + base64 of the file bytes.
        assert_eq!(
            decode_content(&dev.workloads.as_ref().unwrap()[0].content).unwrap(),
            b"plain text"
        );
    }

    #[test]
    fn promise_workflow_sources_and_no_default_group_without_files() {
        let f = fixture();
        write(&f.out.join("dev/x.yaml"), "a: 1\n");
        write(
            &f.meta.join("destination-selectors.yaml"),
            "- directory: dev\n  matchLabels: {env: dev}\n",
        );
        let groups = build_workload_groups(&f.out, &f.meta, None, WorkflowType::Promise).unwrap();
        assert_eq!(groups.len(), 1);
        assert_eq!(
            groups[0].destination_selectors.as_ref().unwrap()[0]
                .source
                .as_deref(),
            Some("promise-workflow")
        );
        let empty = fixture();
        assert!(build(&empty).unwrap().is_empty(), "no output, no groups");
    }

    #[test]
    fn missing_directory_is_an_error_naming_it() {
        let f = fixture();
        write(&f.out.join("a.yaml"), "a: 1\n");
        write(
            &f.meta.join("destination-selectors.yaml"),
            "- directory: prod\n  matchLabels: {env: prod}\n",
        );
        let e = build(&f).unwrap_err();
        assert!(
            matches!(&e, PipelineError::MissingDirectory { directory, .. } if directory == "prod"),
            "{e}"
        );
        assert!(e.to_string().contains("\"prod\""));
    }

    #[test]
    fn escaping_paths_are_refused() {
        let f = fixture();
        let outside = f._dir.path().join("secret.yaml");
        write(&outside, "password: x\n");
        std::os::unix::fs::symlink(&outside, f.out.join("link.yaml")).unwrap();
        let e = build(&f).unwrap_err();
        assert!(matches!(e, PipelineError::UnsafePath { .. }), "{e}");
        assert!(
            e.to_string().contains("link.yaml") && e.to_string().contains("outside"),
            "{e}"
        );

        let f = fixture();
        std::os::unix::fs::symlink("../../", f.out.join("up")).unwrap();
        let e = build(&f).unwrap_err().to_string();
        assert!(e.contains("up") && e.contains("outside"), "{e}");

        // A `..` directory in destination-selectors.yaml is refused too.
        let f = fixture();
        write(&f.out.join("a.yaml"), "a: 1\n");
        write(
            &f.meta.join("destination-selectors.yaml"),
            "- directory: ../x\n  matchLabels: {a: b}\n",
        );
        assert!(
            build(&f)
                .unwrap_err()
                .to_string()
                .contains("leaves the output directory")
        );

        // Symlinks that stay inside are followed.
        let f = fixture();
        write(&f.out.join("real/a.yaml"), "a: 1\n");
        std::os::unix::fs::symlink("real/a.yaml", f.out.join("alias.yaml")).unwrap();
        let groups = build(&f).unwrap();
        assert_eq!(paths(&groups[0]), ["alias.yaml", "real/a.yaml"]);

        assert!(check_workload_filepath("a/../../b").is_err());
        assert!(check_workload_filepath("/etc/passwd").is_err());
        assert!(check_workload_filepath("dev/a.yaml").is_ok());
    }

    #[test]
    fn malformed_yaml_names_file_and_line() {
        let f = fixture();
        write(&f.out.join("good.yaml"), "a: 1\n---\nb: 2\n");
        write(
            &f.out.join("dir/bad.yaml"),
            "ok: 1\nlist:\n  - a\n bad: [unclosed\n",
        );
        let e = build(&f).unwrap_err();
        let msg = e.to_string();
        match &e {
            PipelineError::InvalidYaml { path, location, .. } => {
                assert!(path.ends_with("dir/bad.yaml"), "{msg}");
                let (line, _) = location.expect("a location");
                assert!((3..=5).contains(&line), "{msg}");
            }
            other => panic!("unexpected {other}"),
        }
        assert!(msg.contains("bad.yaml") && msg.contains("line"), "{msg}");
        // Non-YAML files are not parsed.
        let f = fixture();
        write(&f.out.join("script.sh"), "if [ :\n");
        assert_eq!(build(&f).unwrap().len(), 1);
    }

    #[test]
    fn suspend_or_retry_gives_no_groups() {
        for control in ["suspend: true\n", "retryAfter: 5m\nmessage: later\n"] {
            let f = fixture();
            write(&f.out.join("a.yaml"), "a: 1\n");
            write(&f.meta.join("workflow-control.yaml"), control);
            assert!(build(&f).unwrap().is_empty(), "{control}");
        }
        let f = fixture();
        write(&f.out.join("a.yaml"), "a: 1\n");
        write(&f.meta.join("workflow-control.yaml"), "suspend: false\n");
        assert_eq!(build(&f).unwrap().len(), 1);
    }

    #[test]
    fn selector_file_errors_are_reported() {
        let f = fixture();
        write(&f.out.join("dev/a.yaml"), "a: 1\n");
        write(
            &f.meta.join("destination-selectors.yaml"),
            "- directory: dev/nested\n  matchLabels: {a: b}\n",
        );
        assert!(build(&f).unwrap_err().to_string().contains("nested"));
        write(
            &f.meta.join("destination-selectors.yaml"),
            "- directory: dev\n",
        );
        assert!(
            build(&f)
                .unwrap_err()
                .to_string()
                .contains("at least one label")
        );
    }

    #[test]
    fn work_identity() {
        let mut a = WorkCreatorArgs::from_input_directory(
            Path::new("/w"),
            "redis",
            "instance-configure",
            "",
            WorkflowType::Resource,
        );
        a.resource_name = Some("team.alpha.orders.primary-db".into());
        assert_eq!(a.output_dir, Path::new("/w/input"));
        assert_eq!(
            a.promise_scheduling.as_deref(),
            Some(Path::new("/w/kratix-system/promise-scheduling"))
        );
        assert_eq!(a.work_namespace(), "kratix-platform-system");
        let l = a.work_labels();
        assert_eq!(l["kratix.io/work-type"], "resource");
        assert_eq!(l["kratix.io/resource-name"], "team.alpha.orders.primary-db");
        assert!(!l.contains_key("kratix.io/resource-namespace"));
        assert!(names::is_dns1123_label(&a.work_name(), 63));
        assert_eq!(a.work_name(), a.work_name());
        let p = WorkCreatorArgs::from_input_directory(
            Path::new("/w"),
            "redis",
            "promise-configure",
            "ns",
            WorkflowType::Promise,
        );
        assert_eq!(p.work_labels()["kratix.io/work-type"], "promise");
        assert!(!p.work_labels().contains_key("kratix.io/resource-name"));
    }
}

#[cfg(test)]
mod large_output_tests {
    use super::*;

    /// A 2 MiB CRD plus 20 small files become one compact Work payload.
    #[test]
    fn large_outputs_are_compressed() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        std::fs::create_dir_all(&out).unwrap();
        let mut big = String::from(
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nspec:\n  versions:\n",
        );
        let mut i = 0;
        while big.len() < 2 * 1024 * 1024 {
            big.push_str(&format!(
                "  - name: v{i}\n    description: \"field number {i} of a generated schema\"\n"
            ));
            i += 1;
        }
        std::fs::write(out.join("crd.yaml"), &big).unwrap();
        for n in 0..20 {
            std::fs::write(out.join(format!("small-{n:02}.yaml")), format!("n: {n}\n")).unwrap();
        }
        let groups =
            build_workload_groups(&out, &dir.path().join("meta"), None, WorkflowType::Resource)
                .unwrap();
        let workloads = groups[0].workloads.as_ref().unwrap();
        assert_eq!(workloads.len(), 21);
        let crd = workloads.iter().find(|w| w.filepath == "crd.yaml").unwrap();
        assert!(
            crd.content.len() < big.len() / 4,
            "compressed {} of {}",
            crd.content.len(),
            big.len()
        );
        assert_eq!(decode_content(&crd.content).unwrap(), big.as_bytes());
        let spec = WorkSpec {
            workload_groups: Some(groups),
            ..Default::default()
        };
        let size = check_work_size(&spec, DEFAULT_MAX_WORK_BYTES).unwrap();
        let e = check_work_size(&spec, size - 1).unwrap_err().to_string();
        assert!(
            e.contains("crd.yaml") && e.contains(&size.to_string()),
            "{e}"
        );
    }
}
