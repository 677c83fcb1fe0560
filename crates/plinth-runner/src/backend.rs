//! Container backends: how one prepared container becomes a host process.
//!
//! Every backend produces a [`tokio::process::Command`]; the executor ([`crate::pod`])
//! spawns it with stdout and stderr going to the container's log file, enforces deadlines
//! and records the exit status. Backends:
//! * [`BwrapSandbox`] — bubblewrap over a read-only view of the host;
//! * [`HostProcess`] — no isolation (`SandboxMode::None`);
//! * [`EngineBackend`] — podman or docker running the real image.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use k8s_openapi::api::core::v1::Container;
use tokio::process::Command;

use crate::config::{EngineMode, RunnerConfig, SandboxMode, find_on_path};
use crate::image::{ImageMap, image_matches, map_path_hint};
use crate::mount::{Mount, under_root};

/// Where the in-cluster ServiceAccount files appear inside containers.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// Effective security settings of a container (container > pod > runner default).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EffectiveSecurity {
    /// `runAsUser`.
    pub run_as_user: Option<i64>,
    /// `runAsGroup`.
    pub run_as_group: Option<i64>,
    /// `runAsNonRoot`; with no `runAsUser` the sandbox runs as uid 65534.
    pub run_as_non_root: bool,
    /// `readOnlyRootFilesystem`.
    pub read_only_root: bool,
    /// `capabilities.drop` contains `ALL`.
    pub drop_all_capabilities: bool,
    /// `allowPrivilegeEscalation: false`.
    pub no_new_privileges: bool,
}

impl EffectiveSecurity {
    /// The uid a sandboxed or engine process runs as.
    pub fn uid(&self) -> Option<i64> {
        self.run_as_user.or(if self.run_as_non_root {
            Some(65534)
        } else {
            None
        })
    }
}

/// Everything needed to start one container, fully resolved (env expanded, volumes on disk).
#[derive(Debug, Clone)]
pub struct PreparedContainer {
    /// Pod namespace.
    pub namespace: String,
    /// Pod name.
    pub pod: String,
    /// Container name.
    pub name: String,
    /// The container's image (for engines and messages).
    pub image: String,
    /// `imagePullPolicy`.
    pub pull_policy: Option<String>,
    /// Program and arguments (for engines: the entrypoint override, may be empty).
    pub argv: Vec<String>,
    /// Engine only: arguments after the image.
    pub engine_args: Vec<String>,
    /// Complete environment of the process.
    pub env: Vec<(String, String)>,
    /// Working directory inside the container.
    pub working_dir: Option<String>,
    /// Volume mounts (including the ServiceAccount directory).
    pub mounts: Vec<Mount>,
    /// Host paths made visible read-only at the same path (executables, the kubeconfig).
    pub host_binds: Vec<PathBuf>,
    /// Security settings.
    pub security: EffectiveSecurity,
    /// The Pod's private directory (`<data_dir>/pods/<ns>/<pod>`).
    pub pod_dir: PathBuf,
}

/// Why a backend cannot run a container, or the sandbox the configuration asks for is
/// missing. The message goes into the container's status (or the runner's configuration
/// error).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    /// The container has neither a command nor an image entrypoint to run.
    #[error("no command to run")]
    NoCommand,
    /// The host process's mount symlinks could not be created.
    #[error("cannot prepare mounts under {pod_dir}: {cause}")]
    PrepareMounts {
        /// The Pod's directory.
        pod_dir: String,
        /// The OS message.
        cause: String,
    },
    /// `SandboxMode::Bwrap` is configured but bubblewrap is not installed.
    #[error("SandboxMode::Bwrap is configured but `bwrap` is not on PATH (install bubblewrap)")]
    BwrapMissing,
}

/// Turns a prepared container into a command to spawn.
pub trait ContainerBackend: Send + Sync + std::any::Any {
    /// Short name for messages (`bwrap`, `host`, `podman`).
    fn name(&self) -> &str;
    /// The command to spawn.
    ///
    /// # Errors
    /// A [`BackendError`] for the container status.
    fn command(&self, c: &PreparedContainer) -> Result<Command, BackendError>;
    /// A command that asks the backend to stop the container within `grace` (engines,
    /// whose containers are not children of the spawned process); `None` when signalling
    /// the spawned process tree is enough.
    fn stop_command(&self, _c: &PreparedContainer, _grace: std::time::Duration) -> Option<Command> {
        None
    }
}

fn base_command(program: impl AsRef<std::ffi::OsStr>, c: &PreparedContainer) -> Command {
    let mut cmd = Command::new(program);
    cmd.env_clear();
    cmd.envs(c.env.iter().map(|(k, v)| (k, v)));
    cmd
}

/// bubblewrap sandbox: a tmpfs root with the host's top-level directories bound
/// read-only (except /proc, /dev, /sys, /tmp, /run, which are private), the runner's data
/// directory hidden, volumes bound at their container paths, all namespaces unshared
/// (network shared unless disabled), `--die-with-parent`.
#[derive(Debug, Clone)]
pub struct BwrapSandbox {
    /// The `bwrap` executable.
    pub bwrap: PathBuf,
    /// Share the host network namespace.
    pub network: bool,
    /// Host directories hidden behind an empty tmpfs (the runner's data directory).
    pub hidden: Vec<PathBuf>,
}

/// Top-level host entries to reproduce in the sandbox root: (name, symlink target).
fn host_root_entries() -> &'static [(String, Option<PathBuf>)] {
    static ENTRIES: OnceLock<Vec<(String, Option<PathBuf>)>> = OnceLock::new();
    ENTRIES.get_or_init(|| root_entries_of(Path::new("/")))
}

/// Host root entries never shown to a container: the private ones (/proc, /dev, /sys,
/// /tmp, /run) and the top of the pipeline contract (`/kratix`), which the Pod's volumes
/// provide. A `/kratix` left on the host would otherwise shadow a container's own, and
/// a pipeline would see the host's files in `/kratix` instead of a fresh, writable root.
fn hidden_root_entry(name: &str) -> bool {
    let contract_top = plinth_api::pipeline_pod::MOUNT_PATHS
        .iter()
        .filter_map(|p| p.trim_start_matches('/').split('/').next())
        .any(|top| top == name);
    contract_top || matches!(name, "proc" | "dev" | "sys" | "tmp" | "run" | "lost+found")
}

fn root_entries_of(root: &Path) -> Vec<(String, Option<PathBuf>)> {
    let mut v = Vec::new();
    if let Ok(rd) = std::fs::read_dir(root) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if hidden_root_entry(&name) {
                continue;
            }
            let p = e.path();
            match std::fs::symlink_metadata(&p) {
                Ok(m) if m.file_type().is_symlink() => v.push((name, std::fs::read_link(&p).ok())),
                Ok(m) if m.is_dir() => v.push((name, None)),
                _ => {}
            }
        }
    }
    v.sort();
    v
}

/// `/var/run` is usually a symlink to `/run`; bwrap cannot create mount points through an
/// absolute symlink, so the ServiceAccount directory is bound at the resolved path.
fn resolve_container_path(path: &str) -> String {
    if let Some(rest) = path.strip_prefix("/var/run/")
        && std::fs::read_link("/var/run")
            .map(|t| t == Path::new("/run") || t == Path::new("../run"))
            .unwrap_or(false)
    {
        return format!("/run/{rest}");
    }
    path.to_string()
}

/// Host directories (deepest existing ancestors of missing mount points, inside the
/// read-only host view) that must be rebuilt as tmpfs, shallowest first.
fn writable_parents(mounts: &[Mount], hidden: &[PathBuf]) -> Vec<PathBuf> {
    let private = |p: &Path| {
        ["/tmp", "/run", "/dev", "/proc", "/sys"]
            .iter()
            .any(|d| p.starts_with(d))
            || hidden.iter().any(|h| p.starts_with(h))
    };
    let mut out: Vec<PathBuf> = Vec::new();
    for m in mounts {
        let dest = PathBuf::from(resolve_container_path(&m.container_path));
        if dest.exists() || private(&dest) {
            continue;
        }
        let mut anc = dest.parent();
        while let Some(a) = anc {
            if a.exists() {
                break;
            }
            anc = a.parent();
        }
        if let Some(a) = anc
            && a != Path::new("/")
            && a.is_dir()
            && !private(a)
            && !out.iter().any(|o| o == a)
        {
            out.push(a.to_path_buf());
        }
    }
    out.sort_by_key(|p| p.components().count());
    out
}

impl BwrapSandbox {
    /// The bwrap arguments (everything before `--` and the program).
    pub fn args(&self, c: &PreparedContainer) -> Vec<OsString> {
        let mut a: Vec<OsString> = Vec::new();
        let mut push = |parts: &[&dyn AsRef<std::ffi::OsStr>]| {
            for p in parts {
                a.push(p.as_ref().to_os_string());
            }
        };
        push(&[&"--unshare-all"]);
        if self.network {
            push(&[&"--share-net"]);
        }
        push(&[
            &"--die-with-parent",
            &"--new-session",
            &"--hostname",
            &c.pod.as_str(),
        ]);
        push(&[&"--tmpfs", &"/"]);
        for (name, target) in host_root_entries() {
            let dest = format!("/{name}");
            match target {
                Some(t) => push(&[&"--symlink", &t.as_os_str(), &dest.as_str()]),
                None => push(&[&"--ro-bind", &dest.as_str(), &dest.as_str()]),
            }
        }
        push(&[&"--dev", &"/dev", &"--proc", &"/proc", &"--tmpfs", &"/run"]);
        if c.security.read_only_root {
            push(&[&"--dir", &"/tmp"]);
        } else {
            push(&[&"--tmpfs", &"/tmp"]);
        }
        for h in &self.hidden {
            if h.is_dir() && !h.starts_with("/tmp") {
                push(&[&"--tmpfs", &h.as_os_str()]);
            }
        }
        for b in &c.host_binds {
            if b.exists() {
                push(&[&"--ro-bind", &b.as_os_str(), &b.as_os_str()]);
            }
        }
        for arg in shadow_dir_args(&c.mounts, &self.hidden) {
            push(&[&arg]);
        }
        for m in &c.mounts {
            let flag = if m.read_only { "--ro-bind" } else { "--bind" };
            let dest = resolve_container_path(&m.container_path);
            push(&[&flag, &m.host_path.as_os_str(), &dest.as_str()]);
        }
        if let Some(uid) = c.security.uid() {
            let uid = uid.to_string();
            let gid = c
                .security
                .run_as_group
                .unwrap_or(c.security.uid().unwrap_or(0))
                .to_string();
            push(&[&"--uid", &uid.as_str(), &"--gid", &gid.as_str()]);
        }
        if c.security.drop_all_capabilities {
            push(&[&"--cap-drop", &"ALL"]);
        }
        if let Some(wd) = &c.working_dir {
            push(&[&"--chdir", &wd.as_str()]);
        }
        if c.security.read_only_root {
            push(&[&"--remount-ro", &"/"]);
        }
        a
    }
}

/// A mount point that does not exist under a read-only host directory (e.g.
/// `/etc/cfg`) cannot be created there: that directory becomes a tmpfs holding
/// read-only binds (or symlinks) of its host entries, in which the mount point can be
/// made. The bwrap arguments that do so.
fn shadow_dir_args(mounts: &[Mount], hidden: &[PathBuf]) -> Vec<OsString> {
    let mut a: Vec<OsString> = Vec::new();
    for dir in writable_parents(mounts, hidden) {
        a.extend(["--tmpfs".into(), dir.clone().into_os_string()]);
        let mut children: Vec<_> = std::fs::read_dir(&dir)
            .map(|rd| rd.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        children.sort();
        for child in children {
            match std::fs::read_link(&child) {
                Ok(target) => a.extend(["--symlink".into(), target.into_os_string()]),
                Err(_) => a.extend(["--ro-bind-try".into(), child.clone().into_os_string()]),
            }
            a.push(child.into_os_string());
        }
    }
    a
}

impl ContainerBackend for BwrapSandbox {
    fn name(&self) -> &str {
        "bwrap"
    }

    fn command(&self, c: &PreparedContainer) -> Result<Command, BackendError> {
        if c.argv.is_empty() {
            return Err(BackendError::NoCommand);
        }
        let mut cmd = base_command(&self.bwrap, c);
        cmd.args(self.args(c));
        cmd.arg("--");
        cmd.args(&c.argv);
        Ok(cmd)
    }
}

/// No isolation: the process runs on the host. Volume mounts are symlinks under
/// `<pod_dir>/root/<container>` (exported as `PLINTH_CONTAINER_ROOT`); the working
/// directory is taken under that root when it exists there.
#[derive(Debug, Clone, Default)]
pub struct HostProcess;

impl HostProcess {
    /// Creates the symlink tree for `c`'s mounts and returns its root.
    pub fn build_root(c: &PreparedContainer) -> std::io::Result<PathBuf> {
        let root = c.pod_dir.join("root").join(&c.name);
        if root.exists() {
            std::fs::remove_dir_all(&root)?;
        }
        std::fs::create_dir_all(&root)?;
        for m in &c.mounts {
            let link = under_root(&root, Path::new(&m.container_path));
            if let Some(parent) = link.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::os::unix::fs::symlink(&m.host_path, &link)?;
        }
        Ok(root)
    }
}

/// Why a mount of `c` must not be bound, if one must not: its source was a directory or
/// file of its volume when the Pod was prepared, and an earlier container has since made
/// a link of it (or of a directory on its way) to somewhere outside that volume. Binding
/// resolves links on the host, so the link would give the container what it points at.
pub fn mount_source_link(c: &PreparedContainer) -> Option<String> {
    for m in &c.mounts {
        let Ok(rel) = m.host_path.strip_prefix(&c.pod_dir) else {
            continue;
        };
        // `volumes/<name>` (or `serviceaccount`): the directory the source must stay in.
        let depth = match rel.components().next() {
            Some(std::path::Component::Normal(first)) if first == "volumes" => 2,
            _ => 1,
        };
        let volume: PathBuf = c
            .pod_dir
            .join(rel.components().take(depth).collect::<PathBuf>());
        let (Ok(inside), Ok(source)) = (volume.canonicalize(), m.host_path.canonicalize()) else {
            continue;
        };
        if !source.starts_with(&inside) {
            return Some(format!(
                "the source of mount {} leaves its volume through a symbolic link",
                m.container_path
            ));
        }
    }
    None
}

impl ContainerBackend for HostProcess {
    fn name(&self) -> &str {
        "host"
    }

    fn command(&self, c: &PreparedContainer) -> Result<Command, BackendError> {
        let Some(program) = c.argv.first() else {
            return Err(BackendError::NoCommand);
        };
        let root = Self::build_root(c).map_err(|e| BackendError::PrepareMounts {
            pod_dir: c.pod_dir.display().to_string(),
            cause: e.to_string(),
        })?;
        let mut cmd = base_command(program, c);
        cmd.args(&c.argv[1..]);
        cmd.env("PLINTH_CONTAINER_ROOT", &root);
        let wd = c
            .working_dir
            .as_ref()
            .map(|w| root.join(w.trim_start_matches('/')))
            .filter(|p| p.is_dir())
            .unwrap_or(root);
        cmd.current_dir(wd);
        Ok(cmd)
    }
}

/// podman or docker running the container's real image, with `--network host` (so the
/// loopback API server is reachable) or `--network none` when the network is off.
#[derive(Debug, Clone)]
pub struct EngineBackend {
    /// The engine executable.
    pub exe: PathBuf,
    /// `containers.conf` to use (`CONTAINERS_CONF`), for podman.
    pub containers_conf: Option<PathBuf>,
    /// Host network (else none).
    pub network: bool,
}

impl EngineBackend {
    /// Engine arguments from `run` to the end.
    pub fn args(&self, c: &PreparedContainer) -> Vec<String> {
        let mut a = vec!["run".to_string(), "--rm".into()];
        a.push(format!(
            "--name=plinth-{}-{}-{}",
            c.namespace, c.pod, c.name
        ));
        let pull = match c.pull_policy.as_deref() {
            Some("Never") => "never",
            Some("Always") => "always",
            _ => "missing",
        };
        a.push(format!("--pull={pull}"));
        a.push(format!(
            "--network={}",
            if self.network { "host" } else { "none" }
        ));
        for m in &c.mounts {
            a.push("-v".into());
            let ro = if m.read_only { ":ro" } else { "" };
            a.push(format!(
                "{}:{}{}",
                m.host_path.display(),
                m.container_path,
                ro
            ));
        }
        for b in &c.host_binds {
            a.push("-v".into());
            a.push(format!("{}:{}:ro", b.display(), b.display()));
        }
        for (k, _) in &c.env {
            // Values come from the engine's environment, not the command line (secrets).
            a.push("-e".into());
            a.push(k.clone());
        }
        if let Some(wd) = &c.working_dir {
            a.push(format!("--workdir={wd}"));
        }
        if let Some(uid) = c.security.uid() {
            match c.security.run_as_group {
                Some(g) => a.push(format!("--user={uid}:{g}")),
                None => a.push(format!("--user={uid}")),
            }
        }
        if c.security.read_only_root {
            a.push("--read-only".into());
        }
        if c.security.drop_all_capabilities {
            a.push("--cap-drop=ALL".into());
        }
        if c.security.no_new_privileges {
            a.push("--security-opt=no-new-privileges".into());
        }
        if !c.argv.is_empty() {
            a.push(format!(
                "--entrypoint={}",
                serde_json::to_string(&c.argv).expect("strings serialise")
            ));
        }
        a.push(c.image.clone());
        a.extend(c.engine_args.iter().cloned());
        a
    }
}

impl ContainerBackend for EngineBackend {
    fn name(&self) -> &str {
        "engine"
    }

    fn command(&self, c: &PreparedContainer) -> Result<Command, BackendError> {
        let mut cmd = base_command(&self.exe, c);
        // The engine itself needs a PATH to find conmon/runc.
        cmd.env("PATH", std::env::var_os("PATH").unwrap_or_default());
        if let Some(conf) = &self.containers_conf {
            cmd.env("CONTAINERS_CONF", conf);
        }
        cmd.args(self.args(c));
        Ok(cmd)
    }

    fn stop_command(&self, c: &PreparedContainer, grace: std::time::Duration) -> Option<Command> {
        let mut cmd = Command::new(&self.exe);
        cmd.env("PATH", std::env::var_os("PATH").unwrap_or_default());
        if let Some(conf) = &self.containers_conf {
            cmd.env("CONTAINERS_CONF", conf);
        }
        cmd.args([
            "stop".to_string(),
            format!("--time={}", grace.as_secs()),
            format!("plinth-{}-{}-{}", c.namespace, c.pod, c.name),
        ]);
        Some(cmd)
    }
}

/// The `containers.conf` for Debian's podman on these hosts: runc,
/// cgroupfs, file event logger, ulimits within the hard limits.
pub fn write_containers_conf(data_dir: &Path) -> std::io::Result<PathBuf> {
    let path = data_dir.join("containers.conf");
    let nofile = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map(|(_, hard)| hard.min(1 << 20))
        .unwrap_or(1024);
    let pid_max: u64 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(32768);
    let nproc = pid_max.min(32768);
    let text = format!(
        "[containers]\ndefault_ulimits = [\"nofile={nofile}:{nofile}\", \"nproc={nproc}:{nproc}\"]\n\
         [engine]\nruntime = \"runc\"\ncgroup_manager = \"cgroupfs\"\nevents_logger = \"file\"\n"
    );
    std::fs::create_dir_all(data_dir)?;
    std::fs::write(&path, text)?;
    Ok(path)
}

/// The `plinth` subcommand that runs an adapter role: an adapter container's program is
/// `plinth pipeline-adapter <role> <flags>`.
pub const ADAPTER_SUBCOMMAND: &str = "pipeline-adapter";

/// What kind of local program stands in for the image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocalKind {
    /// Plinth's pipeline adapter (`plinth pipeline-adapter ...`).
    Adapter,
    /// An image-map entry (index into the map).
    Mapped(usize),
    /// A stock userland image: the container's own command over the host userland.
    Stock,
}

/// How a container will run, decided from its image (see the crate documentation for the
/// order: image map, adapter, stock images, container engine).
#[derive(Debug, Clone, PartialEq)]
pub enum ContainerPlan {
    /// A local program, in the sandbox when `sandboxed`.
    Local {
        /// Why this program.
        kind: LocalKind,
        /// Program and arguments before `$(VAR)` expansion.
        argv: Vec<String>,
        /// Image-level environment (from the map entry), overridden by the container's.
        image_env: Vec<(String, String)>,
        /// Image-level working directory.
        image_working_dir: Option<String>,
        /// Whether to use the sandbox (an image-map entry can opt out).
        sandboxed: bool,
    },
    /// The container engine runs the real image.
    Engine {
        /// The engine executable.
        exe: PathBuf,
    },
    /// Nothing can run this image; the message goes into the container status
    /// (`reason: ImageUnavailable`).
    Unavailable {
        /// Explanation naming the image and the remedies.
        message: String,
    },
}

/// Decides how `container` runs (pure; `engine` is the detected engine, if any).
pub fn plan_container(
    config: &RunnerConfig,
    map: &ImageMap,
    container: &Container,
    engine: Option<&Path>,
) -> ContainerPlan {
    let image = container.image.clone().unwrap_or_default();
    let command = container.command.clone().unwrap_or_default();
    let args = container.args.clone().unwrap_or_default();
    if let Some(plan) = mapped_plan(map, &image, &command, &args) {
        return plan;
    }
    let is_adapter_cmd = command
        .first()
        .map(|c| c == plinth_api::pipeline_pod::ADAPTER_ENTRYPOINT)
        .unwrap_or(false);
    if is_adapter_cmd || (image_matches(&config.adapter_image, &image) && command.is_empty()) {
        let rest = if is_adapter_cmd {
            &command[1..]
        } else {
            &[][..]
        };
        let mut argv = vec![
            config.plinth_exe.to_string_lossy().into_owned(),
            ADAPTER_SUBCOMMAND.to_string(),
        ];
        argv.extend(rest.iter().cloned());
        argv.extend(args.iter().cloned());
        return ContainerPlan::Local {
            kind: LocalKind::Adapter,
            argv,
            image_env: Vec::new(),
            image_working_dir: None,
            sandboxed: true,
        };
    }
    if image_matches(&config.adapter_image, &image)
        || config.stock_images.iter().any(|p| image_matches(p, &image))
    {
        return ContainerPlan::Local {
            kind: LocalKind::Stock,
            argv: stock_argv(&command, &args),
            image_env: Vec::new(),
            image_working_dir: None,
            sandboxed: true,
        };
    }
    if let Some(exe) = engine {
        return ContainerPlan::Engine {
            exe: exe.to_path_buf(),
        };
    }
    ContainerPlan::Unavailable {
        message: format!(
            "image {image:?} cannot be run: no container engine (podman/docker) found and no image-map entry matches; \
             add one to {} or install podman",
            map_path_hint(config.image_map.as_ref())
        ),
    }
}

/// The plan for an image the image map covers: its program (unless the container names
/// its own command) with the map's arguments, then the container's, environment and
/// working directory.
fn mapped_plan(
    map: &ImageMap,
    image: &str,
    command: &[String],
    args: &[String],
) -> Option<ContainerPlan> {
    let (i, e) = map
        .images
        .iter()
        .enumerate()
        .find(|(_, e)| image_matches(&e.image, image))?;
    let argv = if e.command.is_empty() || !command.is_empty() {
        stock_argv(command, args)
    } else {
        e.command
            .iter()
            .chain(e.args.iter())
            .chain(args.iter())
            .cloned()
            .collect()
    };
    Some(ContainerPlan::Local {
        kind: LocalKind::Mapped(i),
        argv,
        image_env: e.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        image_working_dir: e.working_dir.clone(),
        sandboxed: e.sandbox,
    })
}

/// A stock image's argv: the command and args, the args alone, or `sh`.
fn stock_argv(command: &[String], args: &[String]) -> Vec<String> {
    match (command.is_empty(), args.is_empty()) {
        (false, _) => command.iter().chain(args.iter()).cloned().collect(),
        (true, false) => args.to_vec(),
        (true, true) => vec!["sh".to_string()],
    }
}

/// The container engine to use under `mode`, if any.
pub fn detect_engine(mode: &EngineMode) -> Option<PathBuf> {
    match mode {
        EngineMode::Disabled => None,
        EngineMode::Path(p) => Some(p.clone()),
        EngineMode::Auto => find_on_path("podman").or_else(|| find_on_path("docker")),
    }
}

/// The sandbox to use under `mode`: `Ok(Some(bwrap))`, `Ok(None)` for host processes.
///
/// # Errors
/// [`BackendError::BwrapMissing`] when bwrap is required but missing.
pub fn detect_sandbox(mode: SandboxMode) -> Result<Option<PathBuf>, BackendError> {
    match mode {
        SandboxMode::None => Ok(None),
        SandboxMode::Auto => Ok(find_on_path("bwrap")),
        SandboxMode::Bwrap => find_on_path("bwrap")
            .map(Some)
            .ok_or(BackendError::BwrapMissing),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hosts_kratix_directory_is_not_shown_to_containers() {
        let root = tempfile::tempdir().unwrap();
        for d in ["kratix/input", "usr", "etc", "proc", "tmp"] {
            std::fs::create_dir_all(root.path().join(d)).unwrap();
        }
        std::os::unix::fs::symlink("usr/bin", root.path().join("bin")).unwrap();
        std::fs::write(root.path().join("file"), "").unwrap();
        let names: Vec<_> = root_entries_of(root.path())
            .into_iter()
            .map(|(n, target)| (n, target.map(|t| t.display().to_string())))
            .collect();
        assert_eq!(
            names,
            [
                ("bin".to_string(), Some("usr/bin".to_string())),
                ("etc".to_string(), None),
                ("usr".to_string(), None)
            ]
        );
    }

    fn container(image: &str, command: &[&str], args: &[&str]) -> Container {
        Container {
            name: "c".into(),
            image: Some(image.into()),
            command: (!command.is_empty()).then(|| command.iter().map(|s| s.to_string()).collect()),
            args: (!args.is_empty()).then(|| args.iter().map(|s| s.to_string()).collect()),
            ..Default::default()
        }
    }

    fn config() -> RunnerConfig {
        let mut c = RunnerConfig::new("/data", "127.0.0.1", 6443, "");
        c.plinth_exe = "/usr/local/bin/plinth".into();
        c
    }

    #[test]
    fn adapter_image_and_entrypoint() {
        let c = config();
        let m = ImageMap::default();
        let p = plan_container(
            &c,
            &m,
            &container(crate::DEFAULT_ADAPTER_IMAGE, &[], &["work-creator", "--x"]),
            None,
        );
        let ContainerPlan::Local { kind, argv, .. } = p else {
            panic!("{p:?}")
        };
        assert_eq!(kind, LocalKind::Adapter);
        assert_eq!(
            argv,
            [
                "/usr/local/bin/plinth",
                "pipeline-adapter",
                "work-creator",
                "--x"
            ]
        );
        let p = plan_container(
            &c,
            &m,
            &container(
                "ghcr.io/syntasso/kratix-platform-pipeline-adapter:v0.1",
                &["/bin/pipeline-adapter"],
                &["reader"],
            ),
            None,
        );
        let ContainerPlan::Local { argv, .. } = p else {
            panic!("{p:?}")
        };
        assert_eq!(
            argv,
            ["/usr/local/bin/plinth", "pipeline-adapter", "reader"]
        );
    }

    #[test]
    fn stock_images_run_their_command() {
        let c = config();
        let m = ImageMap::default();
        let p = plan_container(
            &c,
            &m,
            &container("busybox:1.36", &["sh", "-c"], &["echo hi"]),
            None,
        );
        let ContainerPlan::Local {
            kind,
            argv,
            sandboxed,
            ..
        } = p
        else {
            panic!("{p:?}")
        };
        assert_eq!(kind, LocalKind::Stock);
        assert!(sandboxed);
        assert_eq!(argv, ["sh", "-c", "echo hi"]);
        let p = plan_container(&c, &m, &container("alpine", &[], &[]), None);
        let ContainerPlan::Local { argv, .. } = p else {
            panic!("{p:?}")
        };
        assert_eq!(argv, ["sh"]);
    }

    #[test]
    fn image_map_wins_and_container_command_replaces_entrypoint() {
        let c = config();
        let m = ImageMap::parse("images:\n  - image: \"ghcr.io/x/*\"\n    command: [/opt/run]\n    args: [a]\n    env: {K: v}\n    sandbox: false\n").unwrap();
        let p = plan_container(&c, &m, &container("ghcr.io/x/y:v1", &[], &["b"]), None);
        let ContainerPlan::Local {
            kind,
            argv,
            image_env,
            sandboxed,
            ..
        } = p
        else {
            panic!("{p:?}")
        };
        assert_eq!(kind, LocalKind::Mapped(0));
        assert_eq!(argv, ["/opt/run", "a", "b"]);
        assert_eq!(image_env, [("K".to_string(), "v".to_string())]);
        assert!(!sandboxed);
        let p = plan_container(
            &c,
            &m,
            &container("ghcr.io/x/y:v1", &["sh", "-c"], &["true"]),
            None,
        );
        let ContainerPlan::Local { argv, .. } = p else {
            panic!("{p:?}")
        };
        assert_eq!(argv, ["sh", "-c", "true"]);
    }

    #[test]
    fn engine_or_clear_failure() {
        let mut c = config();
        let m = ImageMap::default();
        let ctr = container("ghcr.io/x/y:v1", &[], &[]);
        let p = plan_container(&c, &m, &ctr, Some(Path::new("/usr/bin/podman")));
        assert_eq!(
            p,
            ContainerPlan::Engine {
                exe: "/usr/bin/podman".into()
            }
        );
        c.image_map = Some("/etc/plinth/images.yaml".into());
        let ContainerPlan::Unavailable { message } = plan_container(&c, &m, &ctr, None) else {
            panic!()
        };
        assert_eq!(
            message,
            "image \"ghcr.io/x/y:v1\" cannot be run: no container engine (podman/docker) found and no image-map entry \
             matches; add one to /etc/plinth/images.yaml or install podman"
        );
    }

    fn prepared() -> PreparedContainer {
        PreparedContainer {
            namespace: "ns".into(),
            pod: "p".into(),
            name: "c".into(),
            image: "ghcr.io/x/y:v1".into(),
            pull_policy: Some("IfNotPresent".into()),
            argv: vec!["/bin/run".into(), "a".into()],
            engine_args: vec!["b".into()],
            env: vec![("A".into(), "secret".into())],
            working_dir: Some("/kratix".into()),
            mounts: vec![Mount {
                host_path: "/d/in".into(),
                container_path: "/kratix/input".into(),
                read_only: true,
            }],
            host_binds: vec![],
            security: EffectiveSecurity {
                run_as_user: Some(1000),
                read_only_root: true,
                drop_all_capabilities: true,
                no_new_privileges: true,
                ..Default::default()
            },
            pod_dir: "/d".into(),
        }
    }

    #[test]
    fn engine_arguments() {
        let e = EngineBackend {
            exe: "podman".into(),
            containers_conf: None,
            network: true,
        };
        let a = e.args(&prepared());
        let joined = a.join(" ");
        assert!(joined.contains("--pull=missing"), "{joined}");
        assert!(joined.contains("--network=host"));
        assert!(joined.contains("-v /d/in:/kratix/input:ro"));
        assert!(
            joined.contains("-e A "),
            "env values stay off the command line: {joined}"
        );
        assert!(!joined.contains("secret"));
        assert!(joined.contains("--user=1000"));
        assert!(joined.contains("--read-only"));
        assert!(joined.contains("--cap-drop=ALL"));
        assert!(joined.contains("--entrypoint=[\"/bin/run\",\"a\"]"));
        assert!(joined.ends_with("ghcr.io/x/y:v1 b"));
        let mut p = prepared();
        p.pull_policy = Some("Never".into());
        assert!(e.args(&p).contains(&"--pull=never".to_string()));
    }

    #[test]
    fn bwrap_arguments() {
        let b = BwrapSandbox {
            bwrap: "bwrap".into(),
            network: false,
            hidden: vec![],
        };
        let a: Vec<String> = b
            .args(&prepared())
            .into_iter()
            .map(|s| s.into_string().unwrap())
            .collect();
        let joined = a.join(" ");
        assert!(
            joined.starts_with("--unshare-all --die-with-parent"),
            "{joined}"
        );
        assert!(!joined.contains("--share-net"));
        assert!(joined.contains("--ro-bind /d/in /kratix/input"));
        assert!(joined.contains("--uid 1000 --gid 1000"));
        assert!(joined.contains("--chdir /kratix"));
        assert!(joined.ends_with("--remount-ro /"));
    }
}
