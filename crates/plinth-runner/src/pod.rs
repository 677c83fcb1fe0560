//! Pod execution: volumes, ServiceAccount identity, environment, then init containers in
//! order (stopping at the first failure) and the containers in parallel, with status
//! snapshots after every change (Kubernetes Pod lifecycle: phase `Pending` while init
//! containers run, `Running` once containers started, then `Succeeded`/`Failed`).

use std::collections::{BTreeMap, HashMap};
use std::path::{Component, Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    ConfigMap, Container, ContainerState, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, ContainerStatus, DownwardAPIVolumeFile, EnvFromSource, EnvVar,
    EnvVarSource, KeyToPath, ObjectFieldSelector, Pod, PodCondition, PodSpec, PodStatus, Secret,
    Volume, VolumeProjection,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::access::ClusterAccess;
use crate::adapter::{AdapterCall, AdapterOutput};
use crate::backend::{
    BackendError, BwrapSandbox, ContainerBackend, ContainerPlan, EffectiveSecurity, EngineBackend,
    HostProcess, PreparedContainer, SERVICE_ACCOUNT_DIR, detect_engine, detect_sandbox,
    plan_container, write_containers_conf,
};
use crate::config::RunnerConfig;
use crate::error::RunnerError;
use crate::expand::expand_with;
use crate::image::ImageMap;
use crate::inprocess::{Company, InProcess};
use crate::mount::Mount;

/// Options of one Pod run.
#[derive(Debug, Default)]
pub struct RunOptions {
    /// When reached, running containers are killed and the Pod fails with reason
    /// `DeadlineExceeded` (the Job's or Pod's `activeDeadlineSeconds`).
    pub deadline: Option<Instant>,
    /// Receives a snapshot of the Pod status after every change.
    pub status: Option<watch::Sender<PodStatus>>,
    /// Set to `Some(grace period)` to stop the Pod (it was deleted): running containers
    /// get `SIGTERM`, then `SIGKILL` after the grace period; no further container starts.
    pub stop: Option<watch::Receiver<Option<Duration>>>,
}

fn now() -> Time {
    Time(jiff::Timestamp::now())
}

/// Pod status bookkeeping that publishes snapshots.
struct Tracker {
    status: PodStatus,
    tx: Option<watch::Sender<PodStatus>>,
}

impl Tracker {
    fn new(spec: &PodSpec, tx: Option<watch::Sender<PodStatus>>) -> Tracker {
        let waiting = |c: &Container, reason: &str| ContainerStatus {
            name: c.name.clone(),
            image: c.image.clone().unwrap_or_default(),
            state: Some(ContainerState {
                waiting: Some(ContainerStateWaiting {
                    reason: Some(reason.to_string()),
                    message: None,
                }),
                ..Default::default()
            }),
            started: Some(false),
            ..Default::default()
        };
        let init: Vec<ContainerStatus> = spec
            .init_containers
            .iter()
            .flatten()
            .map(|c| waiting(c, "PodInitializing"))
            .collect();
        let has_init = !init.is_empty();
        let containers = spec
            .containers
            .iter()
            .map(|c| {
                waiting(
                    c,
                    if has_init {
                        "PodInitializing"
                    } else {
                        "ContainerCreating"
                    },
                )
            })
            .collect();
        let t = now();
        Tracker {
            status: PodStatus {
                phase: Some("Pending".into()),
                start_time: Some(t.clone()),
                host_ip: Some("127.0.0.1".into()),
                pod_ip: Some("127.0.0.1".into()),
                conditions: Some(vec![condition("PodScheduled", true, &t)]),
                init_container_statuses: has_init.then_some(init),
                container_statuses: Some(containers),
                ..Default::default()
            },
            tx,
        }
    }

    fn publish(&self) {
        if let Some(tx) = &self.tx {
            tx.send_replace(self.status.clone());
        }
    }

    fn entry(&mut self, init: bool, name: &str) -> Option<&mut ContainerStatus> {
        let list = if init {
            self.status.init_container_statuses.as_mut()
        } else {
            self.status.container_statuses.as_mut()
        };
        list.and_then(|l| l.iter_mut().find(|c| c.name == name))
    }

    fn set_state(&mut self, init: bool, name: &str, state: ContainerState) {
        if let Some(c) = self.entry(init, name) {
            c.started = Some(state.running.is_some());
            c.ready = state.running.is_some();
            c.state = Some(state);
        }
        self.publish();
    }

    /// Records which backend runs a container (`containerID`) and what stands in for its
    /// image (`imageID`), so `kubectl describe pod` shows it.
    fn set_ids(&mut self, init: bool, name: &str, id: String, image_id: String) {
        if let Some(c) = self.entry(init, name) {
            c.container_id = Some(id);
            c.image_id = image_id;
        }
    }

    /// A container's end: its terminated state, and where it ran when that was not
    /// where it was prepared to run.
    fn record_exit(&mut self, init: bool, name: &str, exit: &Exit) {
        self.set_state(init, name, exit.state());
        if let (Some(id), Some(c)) = (&exit.container_id, self.entry(init, name)) {
            c.container_id = Some(id.clone());
        }
    }

    fn set_condition(&mut self, type_: &str, value: bool) {
        let t = now();
        let conds = self.status.conditions.get_or_insert_with(Vec::new);
        conds.retain(|c| c.type_ != type_);
        conds.push(condition(type_, value, &t));
    }

    fn finish(&mut self, phase: &str, reason: Option<&str>, message: Option<String>) -> PodStatus {
        self.status.phase = Some(phase.to_string());
        self.status.reason = reason.map(str::to_string);
        self.status.message = message;
        self.set_condition("Ready", false);
        self.set_condition("ContainersReady", false);
        self.publish();
        self.status.clone()
    }
}

fn condition(type_: &str, value: bool, t: &Time) -> PodCondition {
    PodCondition {
        type_: type_.to_string(),
        status: if value { "True" } else { "False" }.to_string(),
        last_transition_time: Some(t.clone()),
        ..Default::default()
    }
}

fn waiting_state(reason: &str, message: String) -> ContainerState {
    ContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: Some(reason.to_string()),
            message: Some(message),
        }),
        ..Default::default()
    }
}

/// How one container ended.
#[derive(Debug, Clone)]
struct Exit {
    code: i32,
    signal: Option<i32>,
    reason: String,
    message: Option<String>,
    started: Time,
    finished: Time,
    /// The `containerID` when it is not the one set at preparation (an adapter that ran
    /// in the sandbox after all).
    container_id: Option<String>,
}

impl Exit {
    /// A container that started at `started` and ended now.
    fn ended(started: Time, code: i32, reason: &str, message: Option<String>) -> Exit {
        Exit {
            code,
            signal: None,
            reason: reason.to_string(),
            message,
            started,
            finished: now(),
            container_id: None,
        }
    }

    /// A container that could not start (exit code 128, as the kubelet reports it).
    fn start_error(started: Time, message: String) -> Exit {
        Exit::ended(started, 128, "StartError", Some(message))
    }

    /// A container killed at the active deadline.
    fn deadline_exceeded(started: Time) -> Exit {
        Exit {
            signal: Some(9),
            ..Exit::ended(
                started,
                137,
                "DeadlineExceeded",
                Some("killed: the active deadline was exceeded".into()),
            )
        }
    }

    /// A container stopped because its Pod was deleted.
    fn stopped(started: Time, code: i32) -> Exit {
        Exit::ended(
            started,
            code,
            "Error",
            Some("stopped: the Pod was deleted".into()),
        )
    }

    fn state(&self) -> ContainerState {
        ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: self.code,
                signal: self.signal,
                reason: Some(self.reason.clone()),
                message: self.message.clone(),
                started_at: Some(self.started.clone()),
                finished_at: Some(self.finished.clone()),
                container_id: None,
            }),
            ..Default::default()
        }
    }
}

/// A failure before a container could start: (waiting reason, message).
type SetupFailure = (String, String);

fn setup_failure(reason: &str, message: impl Into<String>) -> SetupFailure {
    (reason.to_string(), message.into())
}

/// Why a Pod's files, mounts or process could not be set up. The message goes into a
/// container's waiting or terminated state (`CreateContainerConfigError`, `FailedMount`,
/// `StartError`, ...), so it names the container, field or file and the cause.
#[derive(Debug, thiserror::Error)]
pub enum PodError {
    /// A volume item's or `subPath`'s path is absolute or empty.
    #[error("path {path:?} must be relative and non-empty")]
    NotRelative {
        /// The path as given.
        path: String,
    },
    /// A volume item's or `subPath`'s path leaves its directory.
    #[error("path {path:?} must not contain '..'")]
    EscapingPath {
        /// The path as given.
        path: String,
    },
    /// A directory could not be created.
    #[error("create {path}: {cause}")]
    CreateDir {
        /// The directory.
        path: String,
        /// The OS message.
        cause: String,
    },
    /// A file could not be written.
    #[error("write {path}: {cause}")]
    WriteFile {
        /// The file.
        path: String,
        /// The OS message.
        cause: String,
    },
    /// A file's mode could not be set.
    #[error("chmod {path}: {cause}")]
    Chmod {
        /// The file.
        path: String,
        /// The OS message.
        cause: String,
    },
    /// An `items` entry of a ConfigMap or Secret volume could not be written.
    #[error("{volume}: item {key}: {cause}")]
    Item {
        /// The volume or projection, as named in messages.
        volume: String,
        /// The item's key.
        key: String,
        /// What went wrong.
        cause: Box<PodError>,
    },
    /// A key of a ConfigMap or Secret volume could not be written.
    #[error("{volume}: key {key}: {cause}")]
    Key {
        /// The volume or projection, as named in messages.
        volume: String,
        /// The key.
        key: String,
        /// What went wrong.
        cause: Box<PodError>,
    },
    /// A key named in `items` is not in the ConfigMap or Secret.
    #[error("{volume}: key {key:?} not found")]
    KeyNotFound {
        /// The volume or projection, as named in messages.
        volume: String,
        /// The key.
        key: String,
    },
    /// A downward-API `fieldRef` the runner does not know.
    #[error("fieldRef {path:?} is not supported")]
    UnsupportedFieldRef {
        /// The `fieldPath`.
        path: String,
    },
    /// A `volumeMounts` entry names a volume that `spec.volumes` does not define.
    #[error(
        "container {container}: volumeMounts[{index}]: volume {volume:?} is not defined in spec.volumes"
    )]
    UndefinedVolume {
        /// The container.
        container: String,
        /// The mount's index.
        index: usize,
        /// The volume named.
        volume: String,
    },
    /// A `volumeMounts` entry's `mountPath` is relative.
    #[error(
        "container {container}: volumeMounts[{index}].mountPath {mount_path:?} must be absolute"
    )]
    RelativeMountPath {
        /// The container.
        container: String,
        /// The mount's index.
        index: usize,
        /// The path as given.
        mount_path: String,
    },
    /// A `volumeMounts` entry's `subPath` is not a safe relative path.
    #[error("container {container}: volumeMounts[{index}].subPath: {cause}")]
    SubPath {
        /// The container.
        container: String,
        /// The mount's index.
        index: usize,
        /// What is wrong with it.
        cause: Box<PodError>,
    },
    /// A `subPath` directory could not be created.
    #[error("create subPath {path}: {cause}")]
    CreateSubPath {
        /// The directory.
        path: String,
        /// The OS message.
        cause: String,
    },
    /// The backend cannot build the container's command.
    #[error("{backend}: {cause}")]
    Backend {
        /// The backend's name.
        backend: String,
        /// What is wrong.
        cause: BackendError,
    },
    /// The container's log file could not be created.
    #[error("cannot create log file {path}: {cause}")]
    LogFile {
        /// The log file.
        path: String,
        /// The OS message.
        cause: String,
    },
    /// The pipe for the container's output could not be created.
    #[error("cannot create a pipe for the log: {cause}")]
    LogPipe {
        /// The OS message.
        cause: String,
    },
    /// The container's process could not be started.
    #[error("{backend}: cannot start {program:?} for container {container:?}: {cause}")]
    Start {
        /// The backend's name.
        backend: String,
        /// The program spawned.
        program: String,
        /// The container.
        container: String,
        /// The OS message.
        cause: String,
    },
}

/// Validates a relative file path of a volume item (no absolute paths, no `..`).
///
/// # Errors
/// [`PodError::NotRelative`] for an empty or absolute path, [`PodError::EscapingPath`]
/// for one with `..`.
pub fn safe_relative(path: &str) -> Result<PathBuf, PodError> {
    let p = Path::new(path);
    if path.is_empty() || p.is_absolute() {
        return Err(PodError::NotRelative {
            path: path.to_string(),
        });
    }
    if p.components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(PodError::EscapingPath {
            path: path.to_string(),
        });
    }
    Ok(p.to_path_buf())
}

fn write_file(dir: &Path, rel: &str, data: &[u8], mode: u32) -> Result<(), PodError> {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(safe_relative(rel)?);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| PodError::CreateDir {
            path: parent.display().to_string(),
            cause: e.to_string(),
        })?;
    }
    std::fs::write(&path, data).map_err(|e| PodError::WriteFile {
        path: path.display().to_string(),
        cause: e.to_string(),
    })?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode & 0o777)).map_err(|e| {
        PodError::Chmod {
            path: path.display().to_string(),
            cause: e.to_string(),
        }
    })
}

/// The value of an env var's `configMapKeyRef` / `secretKeyRef` (Kubernetes semantics):
/// `Ok(None)` when the reference is optional and the object or key is absent, a
/// `CreateContainerConfigError` naming the object and key otherwise.
fn key_ref_value(
    field: &str,
    kind: &str,
    ns: &str,
    name: &str,
    key: &str,
    optional: Option<bool>,
    entries: Option<BTreeMap<String, Vec<u8>>>,
) -> Result<Option<String>, SetupFailure> {
    let optional = optional.unwrap_or(false);
    let Some(mut entries) = entries else {
        if optional {
            return Ok(None);
        }
        return Err(setup_failure(
            "CreateContainerConfigError",
            format!("{field}: {} {name:?} not found", kind.to_ascii_lowercase()),
        ));
    };
    match entries.remove(key) {
        Some(v) => Ok(Some(String::from_utf8_lossy(&v).into_owned())),
        None if optional => Ok(None),
        None => Err(setup_failure(
            "CreateContainerConfigError",
            format!("{field}: couldn't find key {key} in {kind} {ns}/{name}"),
        )),
    }
}

/// Keys of a ConfigMap or Secret as bytes.
fn config_map_entries(cm: &ConfigMap) -> BTreeMap<String, Vec<u8>> {
    let mut m: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for (k, v) in cm.data.iter().flatten() {
        m.insert(k.clone(), v.clone().into_bytes());
    }
    for (k, v) in cm.binary_data.iter().flatten() {
        m.insert(k.clone(), v.0.clone());
    }
    m
}

fn secret_entries(s: &Secret) -> BTreeMap<String, Vec<u8>> {
    let mut m: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for (k, v) in s.data.iter().flatten() {
        m.insert(k.clone(), v.0.clone());
    }
    for (k, v) in s.string_data.iter().flatten() {
        m.insert(k.clone(), v.clone().into_bytes());
    }
    m
}

/// Writes `entries` into `dir`, as files named after the keys, or per `items` (key → path,
/// mode). A missing key named in `items` is an error unless `optional`.
fn materialise(
    dir: &Path,
    what: &str,
    entries: &BTreeMap<String, Vec<u8>>,
    items: Option<&Vec<KeyToPath>>,
    default_mode: u32,
    optional: bool,
) -> Result<(), PodError> {
    match items {
        Some(items) => {
            for it in items {
                match entries.get(&it.key) {
                    Some(data) => write_file(
                        dir,
                        &it.path,
                        data,
                        it.mode.map(|m| m as u32).unwrap_or(default_mode),
                    )
                    .map_err(|e| PodError::Item {
                        volume: what.to_string(),
                        key: it.key.clone(),
                        cause: Box::new(e),
                    })?,
                    None if optional => {}
                    None => {
                        return Err(PodError::KeyNotFound {
                            volume: what.to_string(),
                            key: it.key.clone(),
                        });
                    }
                }
            }
        }
        None => {
            for (k, data) in entries {
                write_file(dir, k, data, default_mode).map_err(|e| PodError::Key {
                    volume: what.to_string(),
                    key: k.clone(),
                    cause: Box::new(e),
                })?;
            }
        }
    }
    Ok(())
}

/// Caches ConfigMaps and Secrets for one Pod run.
struct Objects<'a, A: ClusterAccess> {
    access: &'a A,
    ns: String,
    config_maps: HashMap<String, Option<ConfigMap>>,
    secrets: HashMap<String, Option<Secret>>,
}

impl<'a, A: ClusterAccess> Objects<'a, A> {
    async fn config_map(&mut self, name: &str) -> Result<Option<&ConfigMap>, SetupFailure> {
        let (access, ns) = (self.access, &self.ns);
        read_once(&mut self.config_maps, name, access.config_map(ns, name)).await
    }

    async fn secret(&mut self, name: &str) -> Result<Option<&Secret>, SetupFailure> {
        let (access, ns) = (self.access, &self.ns);
        read_once(&mut self.secrets, name, access.secret(ns, name)).await
    }
}

/// `name` from `seen`, read with `read` the first time it is asked for (a missing object
/// is remembered as missing too); a failed read is the container's config error.
async fn read_once<'m, T, E: std::fmt::Display>(
    seen: &'m mut HashMap<String, Option<T>>,
    name: &str,
    read: impl Future<Output = Result<Option<T>, E>>,
) -> Result<Option<&'m T>, SetupFailure> {
    if !seen.contains_key(name) {
        let found = read
            .await
            .map_err(|e| setup_failure("CreateContainerConfigError", e.to_string()))?;
        seen.insert(name.to_string(), found);
    }
    Ok(seen[name].as_ref())
}

/// The value of a downward-API `fieldRef` (`metadata.name`, `metadata.namespace`,
/// `metadata.uid`, `metadata.labels['k']`, `metadata.annotations['k']`,
/// `spec.serviceAccountName`, `spec.nodeName`, `status.podIP`, `status.hostIP`).
///
/// # Errors
/// [`PodError::UnsupportedFieldRef`] for any other field path.
pub fn field_value(pod: &Pod, sel: &ObjectFieldSelector) -> Result<String, PodError> {
    let path = sel.field_path.as_str();
    let quoted = |prefix: &str| -> Option<String> {
        let rest = path
            .strip_prefix(prefix)?
            .strip_prefix('[')?
            .strip_suffix(']')?;
        Some(rest.trim_matches(|c| c == '\'' || c == '"').to_string())
    };
    let md = &pod.metadata;
    let spec = pod.spec.as_ref();
    Ok(match path {
        "metadata.name" => md.name.clone().unwrap_or_default(),
        "metadata.namespace" => md.namespace.clone().unwrap_or_default(),
        "metadata.uid" => md.uid.clone().unwrap_or_default(),
        "spec.serviceAccountName" => spec
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_else(|| "default".into()),
        "spec.nodeName" => spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        "status.podIP" | "status.hostIP" => "127.0.0.1".to_string(),
        _ => {
            if let Some(k) = quoted("metadata.labels") {
                md.labels
                    .as_ref()
                    .and_then(|l| l.get(&k).cloned())
                    .unwrap_or_default()
            } else if let Some(k) = quoted("metadata.annotations") {
                md.annotations
                    .as_ref()
                    .and_then(|l| l.get(&k).cloned())
                    .unwrap_or_default()
            } else {
                return Err(PodError::UnsupportedFieldRef {
                    path: path.to_string(),
                });
            }
        }
    })
}

/// An ordered environment where a later definition replaces an earlier one in place.
#[derive(Default, Debug)]
struct EnvList {
    vars: Vec<(String, String)>,
    index: HashMap<String, usize>,
}

impl EnvList {
    fn set(&mut self, k: String, v: String) {
        match self.index.get(&k) {
            Some(&i) => self.vars[i].1 = v,
            None => {
                self.index.insert(k.clone(), self.vars.len());
                self.vars.push((k, v));
            }
        }
    }

    fn map(&self) -> HashMap<String, String> {
        self.vars.iter().cloned().collect()
    }
}

fn valid_env_name(k: &str) -> bool {
    !k.is_empty() && !k.contains('=') && !k.contains('\0')
}

/// Resolves a container's environment: `base` (service and image variables), then
/// `envFrom` in order, then `env` with `$(VAR)` expansion against what is defined so far.
async fn resolve_env<A: ClusterAccess>(
    objects: &mut Objects<'_, A>,
    pod: &Pod,
    c: &Container,
    base: Vec<(String, String)>,
) -> Result<EnvList, SetupFailure> {
    let mut env = EnvList::default();
    for (k, v) in base {
        env.set(k, v);
    }
    for (i, from) in c.env_from.iter().flatten().enumerate() {
        let prefix = from.prefix.clone().unwrap_or_default();
        for (k, v) in env_from_entries(objects, c, i, from).await? {
            let key = format!("{prefix}{k}");
            if valid_env_name(&key) {
                env.set(key, String::from_utf8_lossy(&v).into_owned());
            }
        }
    }
    for (i, var) in c.env.iter().flatten().enumerate() {
        let value = match &var.value_from {
            Some(src) => match env_source_value(objects, pod, c, i, var, src).await? {
                Some(v) => v,
                None => continue,
            },
            None => expand_with(var.value.as_deref().unwrap_or(""), &env.map()),
        };
        env.set(var.name.clone(), value);
    }
    Ok(env)
}

/// The entries of `envFrom[i]`'s ConfigMap or Secret (none when it is optional and
/// missing); a missing required one is a `CreateContainerConfigError`.
async fn env_from_entries<A: ClusterAccess>(
    objects: &mut Objects<'_, A>,
    c: &Container,
    i: usize,
    from: &EnvFromSource,
) -> Result<BTreeMap<String, Vec<u8>>, SetupFailure> {
    let cname = &c.name;
    let missing = |what: String| {
        setup_failure(
            "CreateContainerConfigError",
            format!("container {cname}: envFrom[{i}].{what}"),
        )
    };
    if let Some(r) = &from.config_map_ref {
        match objects.config_map(&r.name).await? {
            Some(cm) => Ok(config_map_entries(cm)),
            None if r.optional.unwrap_or(false) => Ok(BTreeMap::new()),
            None => Err(missing(format!(
                "configMapRef: configmap {:?} not found",
                r.name
            ))),
        }
    } else if let Some(r) = &from.secret_ref {
        match objects.secret(&r.name).await? {
            Some(s) => Ok(secret_entries(s)),
            None if r.optional.unwrap_or(false) => Ok(BTreeMap::new()),
            None => Err(missing(format!("secretRef: secret {:?} not found", r.name))),
        }
    } else {
        Ok(BTreeMap::new())
    }
}

/// The value of `env[i]` from its `valueFrom` (a ConfigMap or Secret key, a Pod field or
/// a resource limit); `None` when an optional key is missing (the variable is unset).
async fn env_source_value<A: ClusterAccess>(
    objects: &mut Objects<'_, A>,
    pod: &Pod,
    c: &Container,
    i: usize,
    var: &EnvVar,
    src: &EnvVarSource,
) -> Result<Option<String>, SetupFailure> {
    let field = format!("container {}: env[{i}] ({})", c.name, var.name);
    if let Some(r) = &src.config_map_key_ref {
        let entries = objects.config_map(&r.name).await?.map(config_map_entries);
        let ns = &objects.ns;
        key_ref_value(
            &field,
            "ConfigMap",
            ns,
            &r.name,
            &r.key,
            r.optional,
            entries,
        )
    } else if let Some(r) = &src.secret_key_ref {
        let entries = objects.secret(&r.name).await?.map(secret_entries);
        let ns = &objects.ns;
        key_ref_value(&field, "Secret", ns, &r.name, &r.key, r.optional, entries)
    } else if let Some(f) = &src.field_ref {
        field_value(pod, f)
            .map(Some)
            .map_err(|e| setup_failure("CreateContainerConfigError", format!("{field}: {e}")))
    } else if let Some(r) = &src.resource_field_ref {
        Ok(Some(resource_value(c, &r.resource)))
    } else {
        Ok(Some(String::new()))
    }
}

/// `resourceFieldRef` without divisor: the container's limit (or request) as written.
fn resource_value(c: &Container, resource: &str) -> String {
    let (kind, name) = resource.split_once('.').unwrap_or(("limits", resource));
    let res = c.resources.as_ref();
    let q = match kind {
        "requests" => res
            .and_then(|r| r.requests.as_ref())
            .and_then(|m| m.get(name)),
        _ => res
            .and_then(|r| r.limits.as_ref())
            .and_then(|m| m.get(name))
            .or_else(|| {
                res.and_then(|r| r.requests.as_ref())
                    .and_then(|m| m.get(name))
            }),
    };
    q.map(|q| q.0.clone()).unwrap_or_else(|| "0".into())
}

/// The security a container runs with: the runner's default, then the Pod's, then the
/// container's own, each field as the last that sets it says (as the kubelet merges them).
fn effective_security(config: &RunnerConfig, spec: &PodSpec, c: &Container) -> EffectiveSecurity {
    let mut s = EffectiveSecurity::default();
    if let Some(d) = &config.default_security_context {
        s.apply_container(d);
    }
    if let Some(p) = &spec.security_context {
        s.apply_identity(p.run_as_user, p.run_as_group, p.run_as_non_root);
    }
    if let Some(sc) = &c.security_context {
        s.apply_container(sc);
    }
    s
}

impl EffectiveSecurity {
    /// The fields a Pod's and a container's security context share.
    fn apply_identity(&mut self, user: Option<i64>, group: Option<i64>, non_root: Option<bool>) {
        if user.is_some() {
            self.run_as_user = user;
        }
        if group.is_some() {
            self.run_as_group = group;
        }
        if let Some(v) = non_root {
            self.run_as_non_root = v;
        }
    }

    fn apply_container(&mut self, sc: &k8s_openapi::api::core::v1::SecurityContext) {
        self.apply_identity(sc.run_as_user, sc.run_as_group, sc.run_as_non_root);
        if let Some(v) = sc.read_only_root_filesystem {
            self.read_only_root = v;
        }
        if let Some(v) = sc.allow_privilege_escalation {
            self.no_new_privileges = !v;
        }
        if let Some(caps) = &sc.capabilities
            && let Some(drop) = &caps.drop
        {
            self.drop_all_capabilities = drop.iter().any(|d| d.eq_ignore_ascii_case("ALL"));
        }
    }
}

/// Files of the in-cluster configuration for one Pod.
struct Identity {
    sa_dir: PathBuf,
    kubeconfig: PathBuf,
    /// What `kubeconfig` holds, for adapters run in-process.
    kubeconfig_yaml: String,
}

fn kubeconfig_yaml(config: &RunnerConfig, ns: &str, sa: &str, token: &str) -> String {
    use base64::Engine;
    let ca = base64::engine::general_purpose::STANDARD.encode(config.ca_pem.as_bytes());
    let doc = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "plinth", "cluster": {"server": config.api_url(), "certificate-authority-data": ca}}],
        "users": [{"name": format!("system:serviceaccount:{ns}:{sa}"), "user": {"token": token}}],
        "contexts": [{"name": "plinth", "context": {"cluster": "plinth", "user": format!("system:serviceaccount:{ns}:{sa}"), "namespace": ns}}],
        "current-context": "plinth",
    });
    // JSON is valid YAML; kubectl and kube-rs read it as a kubeconfig.
    serde_json::to_string_pretty(&doc).expect("json serialises")
}

async fn prepare_identity<A: ClusterAccess>(
    access: &A,
    config: &RunnerConfig,
    pod: &Pod,
    ns: &str,
    pod_dir: &Path,
) -> Result<Option<Identity>, SetupFailure> {
    let spec = pod.spec.as_ref().expect("checked");
    if spec.automount_service_account_token == Some(false) {
        return Ok(None);
    }
    let sa = spec
        .service_account_name
        .clone()
        .or_else(|| spec.service_account.clone())
        .unwrap_or_else(|| "default".into());
    let token = access
        .service_account_token(ns, &sa, pod, vec![], config.token_expiration_seconds)
        .await
        .map_err(|e| setup_failure("ServiceAccountTokenError", e.to_string()))?;
    let sa_dir = pod_dir.join("serviceaccount");
    let fail = |e: PodError| setup_failure("ServiceAccountTokenError", e.to_string());
    std::fs::create_dir_all(&sa_dir).map_err(|e| {
        fail(PodError::CreateDir {
            path: sa_dir.display().to_string(),
            cause: e.to_string(),
        })
    })?;
    write_file(&sa_dir, "token", token.as_bytes(), 0o644).map_err(fail)?;
    write_file(&sa_dir, "ca.crt", config.ca_pem.as_bytes(), 0o644).map_err(fail)?;
    write_file(&sa_dir, "namespace", ns.as_bytes(), 0o644).map_err(fail)?;
    let kubeconfig = kubeconfig_yaml(config, ns, &sa, &token);
    write_file(pod_dir, "kubeconfig", kubeconfig.as_bytes(), 0o644).map_err(fail)?;
    Ok(Some(Identity {
        sa_dir,
        kubeconfig: pod_dir.join("kubeconfig"),
        kubeconfig_yaml: kubeconfig,
    }))
}

/// Materialises the Pod's volumes under `<pod_dir>/volumes/<name>`; returns name →
/// (host directory, always read-only).
async fn prepare_volumes<A: ClusterAccess>(
    objects: &mut Objects<'_, A>,
    config: &RunnerConfig,
    pod: &Pod,
    ns: &str,
    pod_name: &str,
) -> Result<HashMap<String, (PathBuf, bool)>, SetupFailure> {
    let spec = pod.spec.as_ref().expect("checked");
    let mut out = HashMap::new();
    for v in spec.volumes.iter().flatten() {
        let what = format!("volume {:?}", v.name);
        // The name is a directory under the Pod's: only a DNS-1123 label, as the API
        // server admits, can never point elsewhere.
        if !plinth_api::names::is_dns1123_label(&v.name, 63) {
            return Err(mount_failure(format!(
                "{what}: a volume name must be a lowercase RFC 1123 label"
            )));
        }
        let dir = config.volume_dir(ns, pod_name, &v.name);
        std::fs::create_dir_all(&dir).map_err(|e| {
            setup_failure(
                "FailedMount",
                format!("{what}: create {}: {e}", dir.display()),
            )
        })?;
        let read_only = fill_volume(objects, pod, ns, v, &dir, &what).await?;
        out.insert(v.name.clone(), (dir, read_only));
    }
    Ok(out)
}

/// A `FailedMount` setup failure.
fn mount_failure(message: String) -> SetupFailure {
    setup_failure("FailedMount", message)
}

/// Fills the directory of volume `v`; returns whether it is read-only (everything but
/// `emptyDir`). Errors are `FailedMount` failures naming the volume (`what`).
async fn fill_volume<A: ClusterAccess>(
    objects: &mut Objects<'_, A>,
    pod: &Pod,
    ns: &str,
    v: &Volume,
    dir: &Path,
    what: &str,
) -> Result<bool, SetupFailure> {
    use std::os::unix::fs::PermissionsExt;
    if v.empty_dir.is_some() {
        // Kubernetes creates emptyDir world-writable so any container user can write.
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777))
            .map_err(|e| mount_failure(format!("{what}: chmod: {e}")))?;
        return Ok(false);
    }
    let object_source = if let Some(src) = &v.config_map {
        let source = Source::ConfigMap(&src.name);
        Some((source, &src.items, src.default_mode, src.optional))
    } else if let Some(src) = &v.secret {
        let source = Source::Secret(src.secret_name.as_deref().unwrap_or_default());
        Some((source, &src.items, src.default_mode, src.optional))
    } else {
        None
    };
    if let Some((source, items, mode, optional)) = object_source {
        let mode = mode.unwrap_or(0o644) as u32;
        let optional = optional.unwrap_or(false);
        fill_from(objects, dir, what, source, items.as_ref(), mode, optional).await?;
    } else if let Some(src) = &v.downward_api {
        let mode = src.default_mode.unwrap_or(0o644) as u32;
        let items = src.items.as_deref().unwrap_or_default();
        write_downward(pod, dir, what, items, mode)?;
    } else if let Some(src) = &v.projected {
        let mode = src.default_mode.unwrap_or(0o644) as u32;
        for (i, p) in src.sources.iter().flatten().enumerate() {
            let what = format!("{what}: sources[{i}]");
            fill_projection(objects, pod, ns, p, dir, &what, mode).await?;
        }
    } else {
        return Err(mount_failure(format!(
            "{what}: volume type is not supported by the embedded runner (supported: emptyDir, configMap, secret, \
             projected, downwardAPI)"
        )));
    }
    Ok(true)
}

/// Where a volume's files come from.
#[derive(Clone, Copy)]
enum Source<'a> {
    /// The ConfigMap of this name.
    ConfigMap(&'a str),
    /// The Secret of this name.
    Secret(&'a str),
}

/// Writes a ConfigMap's or Secret's entries (or the listed `items`) into `dir`; a
/// missing object is an error unless `optional`.
async fn fill_from<A: ClusterAccess>(
    objects: &mut Objects<'_, A>,
    dir: &Path,
    what: &str,
    source: Source<'_>,
    items: Option<&Vec<KeyToPath>>,
    mode: u32,
    optional: bool,
) -> Result<(), SetupFailure> {
    let (entries, missing) = match source {
        Source::ConfigMap(name) => (
            objects.config_map(name).await?.map(config_map_entries),
            format!("{what}: configmap {name:?} not found"),
        ),
        Source::Secret(name) => (
            objects.secret(name).await?.map(secret_entries),
            format!("{what}: secret {name:?} not found"),
        ),
    };
    match entries {
        Some(entries) => materialise(dir, what, &entries, items, mode, optional)
            .map_err(|e| mount_failure(e.to_string())),
        None if optional => Ok(()),
        None => Err(mount_failure(missing)),
    }
}

/// Writes downward API files (`fieldRef` values; empty without one).
fn write_downward(
    pod: &Pod,
    dir: &Path,
    what: &str,
    items: &[DownwardAPIVolumeFile],
    mode: u32,
) -> Result<(), SetupFailure> {
    for f in items {
        let value = match &f.field_ref {
            Some(sel) => {
                field_value(pod, sel).map_err(|e| mount_failure(format!("{what}: {e}")))?
            }
            None => String::new(),
        };
        write_file(
            dir,
            &f.path,
            value.as_bytes(),
            f.mode.map(|m| m as u32).unwrap_or(mode),
        )
        .map_err(|e| mount_failure(format!("{what}: {e}")))?;
    }
    Ok(())
}

/// Writes one projected source: a ConfigMap, a Secret, a ServiceAccount token (from
/// TokenRequest, for the Pod's ServiceAccount) or downward API files.
async fn fill_projection<A: ClusterAccess>(
    objects: &mut Objects<'_, A>,
    pod: &Pod,
    ns: &str,
    p: &VolumeProjection,
    dir: &Path,
    what: &str,
    mode: u32,
) -> Result<(), SetupFailure> {
    if let Some(cm) = &p.config_map {
        let optional = cm.optional.unwrap_or(false);
        let source = Source::ConfigMap(&cm.name);
        fill_from(
            objects,
            dir,
            what,
            source,
            cm.items.as_ref(),
            mode,
            optional,
        )
        .await
    } else if let Some(s) = &p.secret {
        let optional = s.optional.unwrap_or(false);
        let source = Source::Secret(&s.name);
        fill_from(objects, dir, what, source, s.items.as_ref(), mode, optional).await
    } else if let Some(t) = &p.service_account_token {
        let spec = pod.spec.as_ref().expect("checked");
        let sa = spec
            .service_account_name
            .clone()
            .unwrap_or_else(|| "default".into());
        let audiences = t.audience.clone().into_iter().collect();
        let expiry = t.expiration_seconds.unwrap_or(3600);
        let token = objects
            .access
            .service_account_token(ns, &sa, pod, audiences, expiry)
            .await
            .map_err(|e| mount_failure(format!("{what}: {e}")))?;
        write_file(dir, &t.path, token.as_bytes(), mode)
            .map_err(|e| mount_failure(format!("{what}: {e}")))
    } else if let Some(d) = &p.downward_api {
        write_downward(pod, dir, what, d.items.as_deref().unwrap_or_default(), mode)
    } else {
        Err(mount_failure(format!(
            "{what}: projection type is not supported by the embedded runner"
        )))
    }
}

/// Resolves `volumeMounts` (with `subPath`/`subPathExpr` and `readOnly`) to host mounts.
///
/// # Errors
/// A [`PodError`] naming the container and `volumeMounts[i]`: an undefined volume, a
/// relative `mountPath`, an unsafe `subPath`, or a `subPath` directory that cannot be
/// created.
pub fn resolve_mounts(
    c: &Container,
    volumes: &HashMap<String, (PathBuf, bool)>,
    env: &HashMap<String, String>,
) -> Result<Vec<Mount>, PodError> {
    let mut mounts = Vec::new();
    for (i, m) in c.volume_mounts.iter().flatten().enumerate() {
        let Some((dir, forced_ro)) = volumes.get(&m.name) else {
            return Err(PodError::UndefinedVolume {
                container: c.name.clone(),
                index: i,
                volume: m.name.clone(),
            });
        };
        if !m.mount_path.starts_with('/') {
            return Err(PodError::RelativeMountPath {
                container: c.name.clone(),
                index: i,
                mount_path: m.mount_path.clone(),
            });
        }
        let sub = match (&m.sub_path, &m.sub_path_expr) {
            (Some(s), _) if !s.is_empty() => Some(s.clone()),
            (_, Some(e)) if !e.is_empty() => Some(expand_with(e, env)),
            _ => None,
        };
        let host_path = match sub {
            Some(s) => {
                let rel = safe_relative(&s).map_err(|e| PodError::SubPath {
                    container: c.name.clone(),
                    index: i,
                    cause: Box::new(e),
                })?;
                let p = dir.join(rel);
                if !p.exists() {
                    std::fs::create_dir_all(&p).map_err(|e| PodError::CreateSubPath {
                        path: p.display().to_string(),
                        cause: e.to_string(),
                    })?;
                }
                p
            }
            None => dir.clone(),
        };
        mounts.push(Mount {
            host_path,
            container_path: m.mount_path.clone(),
            read_only: *forced_ro || m.read_only.unwrap_or(false),
        });
    }
    Ok(mounts)
}

/// The runtime pieces chosen once per Pod run.
struct Runtimes {
    sandbox: Result<Option<BwrapSandbox>, BackendError>,
    engine: Option<PathBuf>,
    containers_conf: Option<PathBuf>,
    map: ImageMap,
}

impl Runtimes {
    fn detect(config: &RunnerConfig) -> Result<Runtimes, RunnerError> {
        let map = match &config.image_map {
            Some(p) => ImageMap::load(p)?,
            None => ImageMap::default(),
        };
        let sandbox = detect_sandbox(config.sandbox).map(|b| {
            b.map(|bwrap| BwrapSandbox {
                bwrap,
                network: config.network,
                hidden: std::iter::once(config.data_dir.clone())
                    .chain(config.sandbox_hidden_paths.iter().cloned())
                    .collect(),
            })
        });
        let engine = detect_engine(&config.engine);
        let containers_conf = match &engine {
            Some(e) if e.file_name().map(|n| n == "podman").unwrap_or(false) => {
                Some(write_containers_conf(&config.data_dir).map_err(|e| {
                    RunnerError::io("write containers.conf in", config.data_dir.clone(), e)
                })?)
            }
            _ => None,
        };
        Ok(Runtimes {
            sandbox,
            engine,
            containers_conf,
            map,
        })
    }
}

/// Runs `pod` once to completion on this machine and returns its final status.
///
/// Container failures (non-zero exit, image that cannot run, missing ConfigMap key,
/// deadline) are reported in the returned status (`phase: Failed` with container states
/// and a pod `reason`/`message`), not as `Err`. `Err` means the runner itself could not
/// work: the Pod has no name or spec, the data directory is not writable, the image map
/// is invalid.
///
/// Logs go to [`RunnerConfig::log_path`]; the Pod's volumes and tokens live under
/// [`RunnerConfig::pod_dir`] and are removed afterwards unless `keep_pod_dirs`.
pub async fn run_pod_once<A: ClusterAccess>(
    access: &A,
    config: &RunnerConfig,
    pod: &Pod,
    opts: RunOptions,
) -> Result<PodStatus, RunnerError> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let ns = pod
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let invalid = |field: &str, message: &str| RunnerError::InvalidSpec {
        object: format!("Pod {ns}/{name}"),
        field: field.into(),
        message: message.into(),
    };
    if name.is_empty() {
        return Err(invalid("metadata.name", "must be set"));
    }
    let Some(spec) = pod.spec.as_ref() else {
        return Err(invalid("spec", "must be set"));
    };
    let runtimes = Runtimes::detect(config)?;
    let pod_dir = config.pod_dir(&ns, &name);
    let company = if pod_dir.exists() {
        Company::EarlierRun
    } else {
        Company::Alone
    };
    let log_dir = config
        .log_path(&ns, &name, "x")
        .parent()
        .expect("has parent")
        .to_path_buf();
    for d in [&pod_dir, &log_dir] {
        std::fs::create_dir_all(d)
            .map_err(|e| RunnerError::io("create directory", d.clone(), e))?;
    }
    let mut tracker = Tracker::new(spec, opts.status);
    tracker.publish();
    let result = run_pod_inner(
        access,
        config,
        pod,
        spec,
        &ns,
        &name,
        &pod_dir,
        &runtimes,
        &mut tracker,
        company,
        opts.deadline,
        opts.stop,
    )
    .await;
    if !config.keep_pod_dirs {
        let _ = std::fs::remove_dir_all(&pod_dir);
    }
    result
}

#[allow(clippy::too_many_arguments)]
async fn run_pod_inner<A: ClusterAccess>(
    access: &A,
    config: &RunnerConfig,
    pod: &Pod,
    spec: &PodSpec,
    ns: &str,
    name: &str,
    pod_dir: &Path,
    runtimes: &Runtimes,
    tracker: &mut Tracker,
    company: Company,
    deadline: Option<Instant>,
    stop: Option<watch::Receiver<Option<Duration>>>,
) -> Result<PodStatus, RunnerError> {
    let mut objects = Objects {
        access,
        ns: ns.to_string(),
        config_maps: HashMap::new(),
        secrets: HashMap::new(),
    };
    let setup = Setup {
        config,
        name,
        pod,
        spec,
        pod_dir,
        runtimes,
    };
    let prepared = match prepare_all(&mut objects, &setup, tracker).await {
        Ok(p) => p,
        Err(status) => return Ok(status),
    };
    let run = Attempt {
        config,
        ns,
        name,
        company,
        deadline,
        stop,
    };
    let (inits, mains): (Vec<_>, Vec<_>) = prepared.into_iter().partition(|(init, _, _)| *init);
    if let Some(status) = run_inits(&run, &inits, tracker).await {
        return Ok(status);
    }
    Ok(run_mains(&run, &mains, tracker).await)
}

/// What preparing a Pod's containers needs besides the objects it reads.
struct Setup<'a> {
    config: &'a RunnerConfig,
    /// The Pod's name.
    name: &'a str,
    pod: &'a Pod,
    spec: &'a PodSpec,
    pod_dir: &'a Path,
    runtimes: &'a Runtimes,
}

/// A prepared container: whether it is an init container, what runs, and where.
type Prepared = (bool, PreparedContainer, Box<dyn ContainerBackend>);

/// Prepares the volumes, the identity and every container before starting any, so
/// configuration errors fail fast; a failure finishes the Pod (the `Err` status) with
/// the containers waiting with its reason.
async fn prepare_all<A: ClusterAccess>(
    objects: &mut Objects<'_, A>,
    s: &Setup<'_>,
    tracker: &mut Tracker,
) -> Result<Vec<Prepared>, PodStatus> {
    let all: Vec<(bool, &Container)> = s
        .spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| (true, c))
        .chain(s.spec.containers.iter().map(|c| (false, c)))
        .collect();
    // Failures before any container starts mark every container waiting with the reason.
    let fail_all = |tracker: &mut Tracker, (reason, message): SetupFailure| {
        for (init, c) in &all {
            tracker.set_state(*init, &c.name, waiting_state(&reason, message.clone()));
        }
        tracker.finish("Failed", Some(&reason), Some(message))
    };
    let ns = objects.ns.clone();
    let volumes = match prepare_volumes(objects, s.config, s.pod, &ns, s.name).await {
        Ok(v) => v,
        Err(f) => return Err(fail_all(tracker, f)),
    };
    let identity = match prepare_identity(objects.access, s.config, s.pod, &ns, s.pod_dir).await {
        Ok(i) => i,
        Err(f) => return Err(fail_all(tracker, f)),
    };
    let mut prepared = Vec::new();
    for (init, c) in &all {
        match prepare_container(
            objects,
            s.config,
            s.pod,
            s.spec,
            c,
            &volumes,
            identity.as_ref(),
            s.runtimes,
            s.pod_dir,
        )
        .await
        {
            Ok((p, b, (id, image_id))) => {
                tracker.set_ids(*init, &p.name, id, image_id);
                prepared.push((*init, p, b));
            }
            Err((reason, message)) => {
                tracker.set_state(*init, &c.name, waiting_state(&reason, message.clone()));
                return Err(tracker.finish("Failed", Some(&reason), Some(message)));
            }
        }
    }
    Ok(prepared)
}

/// One run of a Pod's containers: where their logs go, the deadline and the stop signal.
struct Attempt<'a> {
    config: &'a RunnerConfig,
    ns: &'a str,
    name: &'a str,
    /// What else may write the Pod's volumes, besides the containers this run starts.
    company: Company,
    deadline: Option<Instant>,
    stop: Option<watch::Receiver<Option<Duration>>>,
}

impl Attempt<'_> {
    fn io(&self, container: &str) -> ProcessIo {
        ProcessIo::new(
            self.config,
            self.config.log_path(self.ns, self.name, container),
            self.deadline,
            self.stop.clone(),
        )
    }

    fn stopped(&self) -> bool {
        self.stop.as_ref().is_some_and(|s| s.borrow().is_some())
    }
}

fn deadline_msg() -> String {
    "Pod was active on the node longer than the specified deadline".to_string()
}

/// Runs the init containers in order; the Pod's final status if one failed, hit the
/// deadline, or the Pod was stopped. Otherwise marks the Pod Initialized and Running.
async fn run_inits(
    run: &Attempt<'_>,
    inits: &[Prepared],
    tracker: &mut Tracker,
) -> Option<PodStatus> {
    let terminated = |tracker: &mut Tracker| {
        Some(tracker.finish("Failed", Some("Terminated"), Some(stopped_msg())))
    };
    for (_, p, backend) in inits {
        if run.stopped() {
            return terminated(tracker);
        }
        tracker.set_state(true, &p.name, running_state());
        let exit = run_container(backend.as_ref(), p, run.io(&p.name), run.company).await;
        tracker.record_exit(true, &p.name, &exit);
        if run.stopped() {
            return terminated(tracker);
        }
        if exit.reason == "DeadlineExceeded" {
            return Some(tracker.finish("Failed", Some("DeadlineExceeded"), Some(deadline_msg())));
        }
        if exit.code != 0 {
            let msg = format!(
                "init container {:?} failed with exit code {}",
                p.name, exit.code
            );
            let message = exit.message.clone().unwrap_or(msg);
            return Some(tracker.finish("Failed", None, Some(message)));
        }
    }
    if run.stopped() {
        return terminated(tracker);
    }
    tracker.set_condition("Initialized", true);
    tracker.status.phase = Some("Running".into());
    None
}

/// Runs the main containers together; the Pod succeeds when all exit 0.
async fn run_mains(run: &Attempt<'_>, mains: &[Prepared], tracker: &mut Tracker) -> PodStatus {
    for (_, p, _) in mains {
        tracker.set_state(false, &p.name, running_state());
    }
    // No readiness probes run here, so a Pod whose containers all run is Ready (what the
    // kubelet reports for such a Pod, and what `kubectl wait --for=condition=Ready` needs).
    tracker.set_condition("ContainersReady", true);
    tracker.set_condition("Ready", true);
    tracker.publish();
    let company = match mains.len() {
        1 => run.company,
        _ => Company::OtherContainers,
    };
    let runs = mains.iter().map(|(_, p, backend)| {
        let io = run.io(&p.name);
        async move {
            let exit = run_container(backend.as_ref(), p, io, company).await;
            (p.name.clone(), exit)
        }
    });
    let exits = futures::future::join_all(runs).await;
    let mut ok = true;
    let mut deadline_hit = false;
    let mut message = None;
    for (cname, exit) in &exits {
        tracker.record_exit(false, cname, exit);
        deadline_hit |= exit.reason == "DeadlineExceeded";
        if exit.code != 0 {
            ok = false;
            message.get_or_insert_with(|| {
                exit.message.clone().unwrap_or_else(|| {
                    format!("container {cname:?} failed with exit code {}", exit.code)
                })
            });
        }
    }
    if deadline_hit {
        tracker.finish("Failed", Some("DeadlineExceeded"), Some(deadline_msg()))
    } else if ok {
        tracker.finish("Succeeded", None, None)
    } else {
        tracker.finish("Failed", None, message)
    }
}

fn stopped_msg() -> String {
    "the Pod was deleted; its containers were stopped".to_string()
}

fn running_state() -> ContainerState {
    ContainerState {
        running: Some(ContainerStateRunning {
            started_at: Some(now()),
        }),
        ..Default::default()
    }
}

#[allow(clippy::too_many_arguments)]
async fn prepare_container<A: ClusterAccess>(
    objects: &mut Objects<'_, A>,
    config: &RunnerConfig,
    pod: &Pod,
    spec: &PodSpec,
    c: &Container,
    volumes: &HashMap<String, (PathBuf, bool)>,
    identity: Option<&Identity>,
    runtimes: &Runtimes,
    pod_dir: &Path,
) -> Result<
    (
        PreparedContainer,
        Box<dyn ContainerBackend>,
        (String, String),
    ),
    SetupFailure,
> {
    let ns = objects.ns.clone();
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let plan = plan_container(config, &runtimes.map, c, runtimes.engine.as_deref());
    let (local, image_env, image_wd, sandboxed) = plan_facts(&plan, c, config, runtimes).await?;
    let mut base = base_env(config, &pod_name, local, identity);
    base.extend(image_env);
    let env = resolve_env(objects, pod, c, base).await?;
    let env_map = env.map();
    let mut mounts = resolve_mounts(c, volumes, &env_map)
        .map_err(|e| setup_failure("CreateContainerConfigError", e.to_string()))?;
    let mut host_binds = Vec::new();
    if let Some(id) = identity {
        if !mounts
            .iter()
            .any(|m| m.container_path == SERVICE_ACCOUNT_DIR)
        {
            mounts.push(Mount {
                host_path: id.sa_dir.clone(),
                container_path: SERVICE_ACCOUNT_DIR.to_string(),
                read_only: true,
            });
        }
        host_binds.push(id.kubeconfig.clone());
    }
    let (argv, engine_args) = container_argv(&plan, c, &env_map, &mut host_binds);
    let prepared = PreparedContainer {
        namespace: ns,
        pod: pod_name,
        name: c.name.clone(),
        image: c.image.clone().unwrap_or_default(),
        pull_policy: c.image_pull_policy.clone(),
        argv,
        engine_args,
        env: env.vars,
        working_dir: c.working_dir.clone().filter(|w| !w.is_empty()).or(image_wd),
        mounts,
        host_binds,
        security: effective_security(config, spec, c),
        pod_dir: pod_dir.to_path_buf(),
    };
    let stands_in = stand_in(&plan, &runtimes.map, &prepared.image);
    let is_adapter = matches!(
        plan,
        ContainerPlan::Local {
            kind: crate::backend::LocalKind::Adapter,
            ..
        }
    );
    let backend = choose_backend(plan, config, runtimes, sandboxed)?;
    let id = container_id(backend.as_ref(), runtimes, &prepared);
    let (backend, id) = match (is_adapter, &config.adapter_program, identity) {
        (true, Some(program), Some(identity)) => {
            let in_process = InProcess {
                program: program.clone(),
                kubeconfig_path: identity.kubeconfig.clone(),
                kubeconfig: identity.kubeconfig_yaml.clone(),
                sandbox: backend,
                sandbox_id: id,
            };
            let id = container_id(&in_process, runtimes, &prepared);
            (Box::new(in_process) as Box<dyn ContainerBackend>, id)
        }
        _ => (backend, id),
    };
    Ok((prepared, backend, (id, stands_in)))
}

/// What a plan means for preparing the container: whether it runs locally, the image's
/// environment and working directory, and whether it is sandboxed. An engine's image is
/// pulled here; an unavailable image is an `ErrImagePull` setup failure.
async fn plan_facts(
    plan: &ContainerPlan,
    c: &Container,
    config: &RunnerConfig,
    runtimes: &Runtimes,
) -> Result<(bool, Vec<(String, String)>, Option<String>, bool), SetupFailure> {
    Ok(match plan {
        ContainerPlan::Unavailable { message } => {
            return Err(setup_failure(REASON_ERR_IMAGE_PULL, message.clone()));
        }
        ContainerPlan::Local {
            image_env,
            image_working_dir,
            sandboxed,
            ..
        } => (
            true,
            image_env.clone(),
            image_working_dir.clone(),
            *sandboxed,
        ),
        ContainerPlan::Engine { exe } => {
            ensure_image(exe, runtimes.containers_conf.as_deref(), c, config).await?;
            (false, vec![], None, false)
        }
    })
}

/// The variables every container gets before its own: the API server's address, its
/// hostname, a PATH and HOME for local processes, and the ServiceAccount's kubeconfig.
fn base_env(
    config: &RunnerConfig,
    pod_name: &str,
    local: bool,
    identity: Option<&Identity>,
) -> Vec<(String, String)> {
    let port = config.api_port.to_string();
    let mut base = vec![
        (
            "KUBERNETES_SERVICE_HOST".to_string(),
            config.api_host.clone(),
        ),
        ("KUBERNETES_SERVICE_PORT".to_string(), port.clone()),
        ("KUBERNETES_SERVICE_PORT_HTTPS".to_string(), port.clone()),
        (
            "KUBERNETES_PORT".to_string(),
            format!("tcp://{}:{port}", config.api_host),
        ),
        ("HOSTNAME".to_string(), pod_name.to_string()),
    ];
    if local {
        base.push((
            "PATH".into(),
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
        ));
        base.push(("HOME".into(), "/tmp".into()));
    }
    if let Some(id) = identity {
        base.push((
            "KUBECONFIG".into(),
            id.kubeconfig.to_string_lossy().into_owned(),
        ));
    }
    base
}

/// The program and arguments with `$(VAR)` expanded: a local plan's argv (a mapped
/// program found on the container's PATH, its directory bound into the sandbox via
/// `host_binds`), or an engine's command and args.
fn container_argv(
    plan: &ContainerPlan,
    c: &Container,
    env_map: &HashMap<String, String>,
    host_binds: &mut Vec<PathBuf>,
) -> (Vec<String>, Vec<String>) {
    let expand_all = |v: &[String]| {
        v.iter()
            .map(|a| expand_with(a, env_map))
            .collect::<Vec<_>>()
    };
    match plan {
        ContainerPlan::Local { argv, kind, .. } => {
            let mut argv = expand_all(argv);
            // A mapped image's program named without a path (`promise-configure.sh`) is
            // looked up on the container's PATH here, on the host, so it can be bound
            // into the sandbox below even from a private directory such as /tmp.
            if matches!(kind, crate::backend::LocalKind::Mapped(_))
                && let Some(first) = argv.first().filter(|a| !a.contains('/')).cloned()
                && let Some(found) = env_map.get("PATH").and_then(|path| {
                    path.split(':')
                        .filter(|d| !d.is_empty())
                        .map(|d| Path::new(d).join(&first))
                        .find(|p| p.is_file())
                })
            {
                argv[0] = found.to_string_lossy().into_owned();
            }
            // Make the program visible inside the sandbox even when it lives under a
            // hidden or private directory (e.g. /tmp).
            if matches!(
                kind,
                crate::backend::LocalKind::Adapter | crate::backend::LocalKind::Mapped(_)
            ) && let Some(parent) = argv
                .first()
                .map(Path::new)
                .filter(|p| p.is_absolute())
                .and_then(Path::parent)
                && parent != Path::new("/")
            {
                host_binds.push(parent.to_path_buf());
            }
            (argv, vec![])
        }
        _ => (
            expand_all(c.command.as_deref().unwrap_or(&[])),
            expand_all(c.args.as_deref().unwrap_or(&[])),
        ),
    }
}

/// The backend that runs the container: the engine, the host, or the sandbox (a
/// sandbox that cannot start is a `SandboxUnavailable` setup failure).
fn choose_backend(
    plan: ContainerPlan,
    config: &RunnerConfig,
    runtimes: &Runtimes,
    sandboxed: bool,
) -> Result<Box<dyn ContainerBackend>, SetupFailure> {
    Ok(match plan {
        ContainerPlan::Engine { exe } => Box::new(EngineBackend {
            exe,
            containers_conf: runtimes.containers_conf.clone(),
            network: config.network,
        }),
        _ if !sandboxed => Box::new(HostProcess),
        _ => match &runtimes.sandbox {
            Ok(Some(b)) => Box::new(b.clone()),
            Ok(None) => Box::new(HostProcess),
            Err(e) => return Err(setup_failure("SandboxUnavailable", e.to_string())),
        },
    })
}

/// The container id `<scheme>://<namespace>/<pod>/<container>` reported in its status.
fn container_id(
    backend: &dyn ContainerBackend,
    runtimes: &Runtimes,
    prepared: &PreparedContainer,
) -> String {
    let scheme = match backend.name() {
        "bwrap" => "sandbox".to_string(),
        "engine" => runtimes
            .engine
            .as_ref()
            .and_then(|e| e.file_name())
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "engine".into()),
        other => other.to_string(),
    };
    format!(
        "{scheme}://{}/{}/{}",
        prepared.namespace, prepared.pod, prepared.name
    )
}

/// Where a container's output goes and how it may be stopped.
#[derive(Clone)]
struct ProcessIo {
    log: PathBuf,
    log_max_size: u64,
    log_max_files: usize,
    deadline: Option<Instant>,
    stop: Option<watch::Receiver<Option<Duration>>>,
}

impl ProcessIo {
    fn new(
        config: &RunnerConfig,
        log: PathBuf,
        deadline: Option<Instant>,
        stop: Option<watch::Receiver<Option<Duration>>>,
    ) -> Self {
        ProcessIo {
            log,
            log_max_size: config.container_log_max_size,
            log_max_files: config.container_log_max_files,
            deadline,
            stop,
        }
    }

    /// Resolves at the deadline (never when there is none).
    async fn deadline_reached(&self) {
        match self.deadline {
            Some(d) => tokio::time::sleep_until(d).await,
            None => std::future::pending().await,
        }
    }
}

/// Resolves when `stop` asks to stop, with the grace period (never when `stop` is None).
async fn stop_requested(stop: Option<watch::Receiver<Option<Duration>>>) -> Duration {
    let Some(mut rx) = stop else {
        return std::future::pending().await;
    };
    loop {
        if let Some(grace) = *rx.borrow_and_update() {
            return grace;
        }
        if rx.changed().await.is_err() {
            return std::future::pending().await;
        }
    }
}

/// Waiting reason of a container whose image cannot be pulled or run (Kubernetes).
pub const REASON_ERR_IMAGE_PULL: &str = "ErrImagePull";
/// Waiting reason of a container whose image is absent under `imagePullPolicy: Never`.
pub const REASON_ERR_IMAGE_NEVER_PULL: &str = "ErrImageNeverPull";

/// What stands in for a container's image, for `imageID`: `image-map:<entry>=<command>`,
/// `plinth:pipeline-adapter`, `host-userland:<image>` or `<engine>:<image>`.
fn stand_in(plan: &ContainerPlan, map: &ImageMap, image: &str) -> String {
    use crate::backend::LocalKind;
    match plan {
        ContainerPlan::Local {
            kind: LocalKind::Mapped(i),
            argv,
            ..
        } => format!(
            "image-map:{}={}",
            map.images
                .get(*i)
                .map(|e| e.image.as_str())
                .unwrap_or(image),
            argv.first().map(String::as_str).unwrap_or("")
        ),
        ContainerPlan::Local {
            kind: LocalKind::Adapter,
            ..
        } => "plinth:pipeline-adapter".into(),
        ContainerPlan::Local { .. } => format!("host-userland:{image}"),
        ContainerPlan::Engine { exe } => format!(
            "{}:{image}",
            exe.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        ),
        ContainerPlan::Unavailable { .. } => String::new(),
    }
}

/// Makes sure the engine has the container's image under its `imagePullPolicy`
/// (`Never`: present; `Always`: pulled; otherwise pulled when absent). A failure is an
/// `ErrImagePull`/`ErrImageNeverPull` naming the image, the engine's error and the
/// remedies (an image-map entry, or making the image available to the engine).
async fn ensure_image(
    exe: &Path,
    containers_conf: Option<&Path>,
    c: &Container,
    config: &RunnerConfig,
) -> Result<(), SetupFailure> {
    let image = c.image.clone().unwrap_or_default();
    let engine = exe
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let run = |args: Vec<String>| {
        let mut cmd = tokio::process::Command::new(exe);
        cmd.args(args).stdin(Stdio::null()).kill_on_drop(true);
        if let Some(conf) = containers_conf {
            cmd.env("CONTAINERS_CONF", conf);
        }
        cmd
    };
    let policy = c.image_pull_policy.as_deref().unwrap_or("IfNotPresent");
    let present = || async {
        run(vec!["image".into(), "exists".into(), image.clone()])
            .output()
            .await
            .is_ok_and(|o| o.status.success())
    };
    let hint = format!(
        "map the image to a local command in {}, or make it available to {engine}",
        crate::image::map_path_hint(config.image_map.as_ref())
    );
    if policy == "Never" {
        if present().await {
            return Ok(());
        }
        return Err(setup_failure(
            REASON_ERR_IMAGE_NEVER_PULL,
            format!("Container image {image:?} is not present with pull policy of Never; {hint}"),
        ));
    }
    if policy != "Always" && present().await {
        return Ok(());
    }
    let out = run(vec!["pull".into(), "--quiet".into(), image.clone()])
        .output()
        .await;
    match out {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            let last = err
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("")
                .trim();
            Err(setup_failure(
                REASON_ERR_IMAGE_PULL,
                format!("Failed to pull image {image:?} with {engine}: {last}; {hint}"),
            ))
        }
        Err(e) => Err(setup_failure(
            REASON_ERR_IMAGE_PULL,
            format!("Failed to pull image {image:?}: cannot run {engine}: {e}; {hint}"),
        )),
    }
}

/// Runs one container: an adapter in-process when it may ([`crate::inprocess`]), else
/// its process. `company` says what else may write the Pod's volumes meanwhile. A mount
/// whose source an earlier container turned into a link out of its volume is refused.
async fn run_container(
    backend: &dyn ContainerBackend,
    p: &PreparedContainer,
    io: ProcessIo,
    company: Company,
) -> Exit {
    if let Some(why) = crate::backend::mount_source_link(p) {
        return Exit::start_error(now(), why);
    }
    let any: &dyn std::any::Any = backend;
    let Some(inproc) = any.downcast_ref::<InProcess>() else {
        return run_process(backend, p, io).await;
    };
    match inproc.sandbox_reason(p, company) {
        None => run_in_process(inproc, p, io).await,
        Some(why) => {
            tracing::info!(pod = %format!("{}/{}", p.namespace, p.pod), container = %p.name,
                "adapter container runs in the sandbox: {why}");
            let mut exit = run_process(inproc.sandbox.as_ref(), p, io).await;
            exit.container_id = Some(inproc.sandbox_id.clone());
            exit
        }
    }
}

/// Runs an adapter container as a task of this process, with its output in its log; the
/// deadline or a stop request ends the task as they end a process.
async fn run_in_process(inproc: &InProcess, p: &PreparedContainer, io: ProcessIo) -> Exit {
    let started = now();
    // Paths resolve through the mount table (`AdapterCall::host_path`): no link tree is
    // built, which spares the file system a dozen inodes per container.
    let root = p.pod_dir.join("root").join(&p.name);
    let log = match crate::logfile::RotatingLog::create(&io.log, io.log_max_size, io.log_max_files)
    {
        Ok(l) => l,
        Err(e) => {
            let cause = PodError::LogFile {
                path: io.log.display().to_string(),
                cause: e.to_string(),
            };
            return Exit::start_error(started, cause.to_string());
        }
    };
    let args = p
        .argv
        .iter()
        .skip_while(|a| a.as_str() != crate::backend::ADAPTER_SUBCOMMAND)
        .skip(1)
        .cloned()
        .collect();
    let call = AdapterCall {
        args,
        env: p.env.clone(),
        root,
        working_dir: p.working_dir.clone().unwrap_or_else(|| "/".into()),
        mounts: p.mounts.clone(),
        read_only_root: p.security.read_only_root,
        kubeconfig: inproc.kubeconfig.clone(),
        output: AdapterOutput::new(log),
    };
    let _turn = IN_PROCESS_TURNS.acquire().await;
    let mut task = tokio::spawn(inproc.program.run(call));
    tokio::select! {
        res = &mut task => match res {
            Ok(0) => Exit::ended(started, 0, "Completed", None),
            Ok(code) => Exit::ended(started, code, "Error", None),
            // A panicking process exits 101.
            Err(e) => Exit::ended(started, 101, "Error", Some(format!("the adapter {:?} stopped: {e}", p.name))),
        },
        _ = io.deadline_reached() => {
            stop_task(task).await;
            Exit::deadline_exceeded(started)
        }
        _ = stop_requested(io.stop.clone()) => {
            stop_task(task).await;
            Exit::stopped(started, 143)
        }
    }
}

/// Turns for adapters in-process ([`crate::inprocess::MAX_AT_ONCE`]).
static IN_PROCESS_TURNS: tokio::sync::Semaphore =
    tokio::sync::Semaphore::const_new(crate::inprocess::MAX_AT_ONCE);

/// Aborts an in-process adapter and waits until it has ended, so nothing it does
/// outlives its container (an abort takes effect at the task's next await).
async fn stop_task(task: tokio::task::JoinHandle<i32>) {
    task.abort();
    let _ = task.await;
}

/// Spawns the container's process with output to a capped, rotating log, waits for it,
/// the deadline or a stop request (the Pod was deleted: TERM, grace period, KILL).
async fn run_process(backend: &dyn ContainerBackend, p: &PreparedContainer, io: ProcessIo) -> Exit {
    let started = now();
    let (mut child, copier) = match spawn_logged(backend, p, &io) {
        Ok(spawned) => spawned,
        Err(e) => return Exit::start_error(started, e.to_string()),
    };
    let pid = child.id();
    let exit = tokio::select! {
        res = child.wait() => match res {
            Ok(status) => {
                use std::os::unix::process::ExitStatusExt;
                let (code, signal) = match (status.code(), status.signal()) {
                    (Some(c), _) => (c, None),
                    (None, Some(s)) => (128 + s, Some(s)),
                    _ => (1, None),
                };
                let reason = if code == 0 { "Completed" } else { "Error" };
                Exit { signal, ..Exit::ended(started, code, reason, None) }
            }
            Err(e) => Exit::ended(started, 128, "Error", Some(format!("waiting for container {:?}: {e}", p.name))),
        },
        _ = io.deadline_reached() => {
            // An engine's container is not a child of the spawned client: it is stopped
            // through the engine, with no grace period.
            ask_backend_to_stop(backend, p, Duration::ZERO).await;
            if let Some(pid) = pid {
                crate::procs::kill_tree(pid);
            }
            let _ = child.kill().await;
            Exit::deadline_exceeded(started)
        }
        grace = stop_requested(io.stop.clone()) => {
            let code = stop_process(backend, p, &mut child, pid, grace).await;
            Exit::stopped(started, code)
        }
    };
    // Output written by the process before it ended is in the log before its status says
    // so; a background process still holding the pipe does not hold the container up.
    let _ = tokio::time::timeout(Duration::from_secs(2), copier).await;
    exit
}

/// Starts the container's process with stdout and stderr piped into its rotating log
/// (copied by a blocking task, returned with the child). Errors with the
/// `StartError` message.
fn spawn_logged(
    backend: &dyn ContainerBackend,
    p: &PreparedContainer,
    io: &ProcessIo,
) -> Result<
    (
        tokio::process::Child,
        tokio::task::JoinHandle<std::io::Result<()>>,
    ),
    PodError,
> {
    let log = io.log.as_path();
    let mut cmd = match backend.command(p) {
        Ok(c) => c,
        Err(cause) => {
            return Err(PodError::Backend {
                backend: backend.name().to_string(),
                cause,
            });
        }
    };
    let mut sink = match crate::logfile::RotatingLog::create(log, io.log_max_size, io.log_max_files)
    {
        Ok(f) => f,
        Err(e) => {
            return Err(PodError::LogFile {
                path: log.display().to_string(),
                cause: e.to_string(),
            });
        }
    };
    let pipe_error = |e: std::io::Error| PodError::LogPipe {
        cause: e.to_string(),
    };
    let (reader, writer) = std::io::pipe().map_err(pipe_error)?;
    let err_writer = writer.try_clone().map_err(pipe_error)?;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::from(writer))
        .stderr(Stdio::from(err_writer))
        .kill_on_drop(true)
        .process_group(0);
    let spawned = cmd.spawn();
    // The parent's ends of the pipe's write side are dropped with `cmd`.
    drop(cmd);
    let child = match spawned {
        Ok(c) => c,
        Err(e) => {
            return Err(PodError::Start {
                backend: backend.name().to_string(),
                program: p.argv.first().cloned().unwrap_or_default(),
                container: p.name.clone(),
                cause: e.to_string(),
            });
        }
    };
    let copier = tokio::task::spawn_blocking(move || sink.copy_from(reader));
    Ok((child, copier))
}

/// How often a stopping container's process tree is looked at again for processes that
/// have not had `SIGTERM` yet (a sandbox that was still starting).
const TERMINATE_RECHECK: Duration = Duration::from_millis(100);

/// Sends `SIGTERM` to the container's processes, again to any that appear, until the
/// child exits (its status) or `grace` is over (`None`).
async fn terminate_within(
    child: &mut tokio::process::Child,
    pid: Option<u32>,
    grace: Duration,
) -> Option<std::process::ExitStatus> {
    let deadline = tokio::time::Instant::now() + grace;
    let mut signalled = std::collections::HashSet::new();
    loop {
        if let Some(pid) = pid {
            crate::procs::terminate(pid, &mut signalled);
        }
        let now = tokio::time::Instant::now();
        if now >= deadline {
            return None;
        }
        let wait = TERMINATE_RECHECK.min(deadline - now);
        match tokio::time::timeout(wait, child.wait()).await {
            Ok(Ok(s)) => return Some(s),
            Ok(Err(_)) => return None,
            Err(_) => {}
        }
    }
}

/// Stops a running container as the kubelet does; returns its exit code.
async fn stop_process(
    backend: &dyn ContainerBackend,
    p: &PreparedContainer,
    child: &mut tokio::process::Child,
    pid: Option<u32>,
    grace: Duration,
) -> i32 {
    ask_backend_to_stop(backend, p, grace).await;
    let status = terminate_within(child, pid, grace).await;
    if let Some(pid) = pid {
        // Whatever is left of the tree, and the process group, now.
        crate::procs::kill_tree(pid);
    }
    let status = match status {
        Some(s) => Some(s),
        None => {
            let _ = child.kill().await;
            child.wait().await.ok()
        }
    };
    use std::os::unix::process::ExitStatusExt;
    match status.map(|s| (s.code(), s.signal())) {
        Some((Some(c), _)) => c,
        Some((None, Some(sig))) => 128 + sig,
        _ => 137,
    }
}

/// Runs the backend's stop command, if it has one (an engine), and waits for it.
async fn ask_backend_to_stop(
    backend: &dyn ContainerBackend,
    p: &PreparedContainer,
    grace: Duration,
) {
    if let Some(mut stop) = backend.stop_command(p, grace) {
        let _ = stop
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::VolumeMount;

    #[test]
    fn relative_paths_are_checked() {
        assert!(safe_relative("a/b").is_ok());
        assert!(safe_relative("../x").is_err());
        assert!(safe_relative("a/../../x").is_err());
        assert!(safe_relative("/etc/passwd").is_err());
        assert!(safe_relative("").is_err());
    }

    #[test]
    fn field_refs() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "n", "labels": {"a": "1"}, "annotations": {"kratix.io/trace-parent": "tp"}},
            "spec": {"containers": [], "serviceAccountName": "sa"}
        }))
        .unwrap();
        let f = |p: &str| {
            field_value(
                &pod,
                &ObjectFieldSelector {
                    field_path: p.into(),
                    api_version: None,
                },
            )
        };
        assert_eq!(f("metadata.name").unwrap(), "p");
        assert_eq!(f("metadata.namespace").unwrap(), "n");
        assert_eq!(f("metadata.labels['a']").unwrap(), "1");
        assert_eq!(
            f("metadata.annotations['kratix.io/trace-parent']").unwrap(),
            "tp"
        );
        assert_eq!(f("metadata.annotations['missing']").unwrap(), "");
        assert_eq!(f("spec.serviceAccountName").unwrap(), "sa");
        assert!(f("spec.bogus").is_err());
    }

    #[test]
    fn mounts_with_sub_path_and_read_only() {
        let dir = tempfile::tempdir().unwrap();
        let vols: HashMap<String, (PathBuf, bool)> = [
            ("out".to_string(), (dir.path().join("out"), false)),
            ("cm".to_string(), (dir.path().join("cm"), true)),
        ]
        .into_iter()
        .collect();
        let c = Container {
            name: "c".into(),
            volume_mounts: Some(vec![
                VolumeMount {
                    name: "out".into(),
                    mount_path: "/kratix/output".into(),
                    ..Default::default()
                },
                VolumeMount {
                    name: "out".into(),
                    mount_path: "/sub".into(),
                    sub_path: Some("a/b".into()),
                    read_only: Some(true),
                    ..Default::default()
                },
                VolumeMount {
                    name: "cm".into(),
                    mount_path: "/cfg".into(),
                    ..Default::default()
                },
            ]),
            ..Default::default()
        };
        let m = resolve_mounts(&c, &vols, &HashMap::new()).unwrap();
        assert_eq!(m[0].host_path, dir.path().join("out"));
        assert!(!m[0].read_only);
        assert_eq!(m[1].host_path, dir.path().join("out/a/b"));
        assert!(m[1].read_only);
        assert!(dir.path().join("out/a/b").is_dir());
        assert!(m[2].read_only, "configMap volumes are always read-only");

        let bad = Container {
            name: "c".into(),
            volume_mounts: Some(vec![VolumeMount {
                name: "nope".into(),
                mount_path: "/x".into(),
                ..Default::default()
            }]),
            ..Default::default()
        };
        let e = resolve_mounts(&bad, &vols, &HashMap::new()).unwrap_err();
        assert!(
            e.to_string().contains("volume \"nope\" is not defined"),
            "{e}"
        );
    }

    #[test]
    fn items_honoured_when_materialising() {
        let dir = tempfile::tempdir().unwrap();
        let entries: BTreeMap<String, Vec<u8>> = [
            ("a".to_string(), b"1".to_vec()),
            ("b".to_string(), b"2".to_vec()),
        ]
        .into_iter()
        .collect();
        let items = vec![KeyToPath {
            key: "a".into(),
            path: "sub/file-a".into(),
            mode: Some(0o600),
        }];
        materialise(dir.path(), "v", &entries, Some(&items), 0o644, false).unwrap();
        assert_eq!(std::fs::read(dir.path().join("sub/file-a")).unwrap(), b"1");
        assert!(!dir.path().join("b").exists());
        let missing = vec![KeyToPath {
            key: "zz".into(),
            path: "z".into(),
            mode: None,
        }];
        assert!(materialise(dir.path(), "v", &entries, Some(&missing), 0o644, false).is_err());
        assert!(materialise(dir.path(), "v", &entries, Some(&missing), 0o644, true).is_ok());
        let escape = vec![KeyToPath {
            key: "a".into(),
            path: "../escape".into(),
            mode: None,
        }];
        assert!(materialise(dir.path(), "v", &entries, Some(&escape), 0o644, false).is_err());
    }

    /// A stop that comes while the sandbox is still starting (only `bwrap` processes
    /// yet) neither kills the outer `bwrap` (which would orphan the inner one and the
    /// container it then starts) nor misses the container process that appears next.
    #[tokio::test]
    async fn a_stop_while_the_sandbox_starts_reaches_the_container() {
        let dir = tempfile::tempdir().unwrap();
        // A stand-in sandbox: an outer and an inner process named `bwrap` (a shell under
        // that name), the inner one in its own session as bubblewrap's is, turning into
        // the container's process after a moment.
        let fake = dir.path().join("bwrap");
        std::os::unix::fs::symlink("/bin/sh", &fake).unwrap();
        let secs = format!("{}", 100_000 + std::process::id());
        // Only shell builtins before the exec: no other process shows up meanwhile.
        let inner = format!("i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done; exec sleep {secs}");
        let outer = format!("setsid {} -c '{inner}' & wait", fake.display());
        let mut child = tokio::process::Command::new(&fake)
            .args(["-c", &outer])
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let pid = child.id();
        // Stop while only the two `bwrap` processes exist.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while pid
            .map(crate::procs::descendants)
            .unwrap_or_default()
            .is_empty()
        {
            assert!(
                std::time::Instant::now() < deadline,
                "the inner process never started"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let status = terminate_within(&mut child, pid, Duration::from_secs(5)).await;
        let container_left = || {
            std::fs::read_dir("/proc")
                .unwrap()
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                .filter(|p| crate::procs::alive(*p))
                .any(|p| {
                    std::fs::read(format!("/proc/{p}/cmdline"))
                        .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&secs))
                })
        };
        let left = container_left();
        if left {
            // Do not leave it behind whatever the outcome.
            let _ = std::process::Command::new("pkill")
                .args(["-f", &secs])
                .status();
        }
        assert!(
            status.is_some(),
            "the sandbox did not exit within the grace period"
        );
        assert!(!left, "the container process outlived its stopped sandbox");
    }
}
