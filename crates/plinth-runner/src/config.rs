//! Runner configuration.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::SecurityContext;

/// The image name of Plinth's pipeline adapter unless configured otherwise.
use plinth_api::constants::DEFAULT_ADAPTER_IMAGE;

/// Images whose containers run their `command`/`args` in the sandbox over the host's
/// userland (a stock shell and coreutils are all these images are used for in pipelines).
/// Entries are matched like image-map entries (see [`crate::image::image_matches`]): an
/// entry without a tag matches every tag; globs (`*`, `?`) are allowed.
pub const DEFAULT_STOCK_IMAGES: &[&str] = &[
    "busybox",
    "alpine",
    "bash",
    "debian",
    "ubuntu",
    "bitnami/kubectl",
    "ghcr.io/syntasso/kratix-pipeline-utility",
];

/// How containers are isolated from the host (see the crate documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SandboxMode {
    /// Use bubblewrap when `bwrap` is on `PATH`, else run on the host ([`SandboxMode::None`]).
    #[default]
    Auto,
    /// Always use bubblewrap; a missing `bwrap` fails the container.
    Bwrap,
    /// Run container processes directly on the host. Volume mounts then exist only as
    /// symlinks under `$PLINTH_CONTAINER_ROOT`; the ServiceAccount identity is given
    /// through `KUBECONFIG`.
    None,
}

/// Which container engine runs images that are neither mapped nor stock.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum EngineMode {
    /// Use `podman`, else `docker`, from `PATH`; none found means no engine.
    #[default]
    Auto,
    /// Use this executable (podman- or docker-compatible command line).
    Path(PathBuf),
    /// Never use a container engine.
    Disabled,
}

/// Configuration of the embedded-mode Job runner.
#[derive(Debug, Clone)]
pub struct RunnerConfig {
    /// Root of the runner's files: `pods/<ns>/<pod>/...` (volumes, service account files,
    /// kubeconfig; removed when the Pod finishes) and `pod-logs/<ns>/<pod>/<container>.log`
    /// (kept; the API server serves `kubectl logs` from there).
    pub data_dir: PathBuf,
    /// Host name or IP of the API server's HTTPS endpoint, as seen from pipelines
    /// (`KUBERNETES_SERVICE_HOST`).
    pub api_host: String,
    /// Port of the API server's HTTPS endpoint (`KUBERNETES_SERVICE_PORT`).
    pub api_port: u16,
    /// PEM of the CA that signed the API server's certificate (`ca.crt`).
    pub ca_pem: String,
    /// The `plinth` executable that runs the pipeline adapter (`plinth pipeline-adapter`).
    pub plinth_exe: PathBuf,
    /// Image name that stands for Plinth's pipeline adapter.
    pub adapter_image: String,
    /// Optional YAML file mapping images to local commands (see [`crate::image::ImageMap`]).
    pub image_map: Option<PathBuf>,
    /// How many Jobs run a Pod at the same time (at least 1). Standalone Pods (no
    /// controlling Job) are not counted.
    pub max_parallel_jobs: usize,
    /// Isolation of container processes.
    pub sandbox: SandboxMode,
    /// Whether sandboxed containers share the host network (needed to reach a loopback
    /// API server). `false` gives them only a private loopback.
    pub network: bool,
    /// Stock userland images run in the sandbox (see [`DEFAULT_STOCK_IMAGES`]).
    pub stock_images: Vec<String>,
    /// Security context applied under every container's own (container > pod > this),
    /// including Plinth's adapter containers.
    pub default_security_context: Option<SecurityContext>,
    /// Container engine selection.
    pub engine: EngineMode,
    /// Delay before the first retry of a failed Pod; doubled per further failure, capped by
    /// `max_retry_backoff` (Kubernetes Job controller: 10 s doubling up to 6 min).
    pub retry_backoff: Duration,
    /// Upper bound of the retry delay.
    pub max_retry_backoff: Duration,
    /// Lifetime requested for ServiceAccount tokens, in seconds (TokenRequest
    /// `spec.expirationSeconds`).
    pub token_expiration_seconds: i64,
    /// `spec.nodeName` written on the Pods the runner creates.
    pub node_name: String,
    /// Keep `pods/<ns>/<pod>` (volumes, tokens) after the Pod finished, for debugging.
    pub keep_pod_dirs: bool,
    /// Host directories the sandbox shows as empty (besides `data_dir`, which is always
    /// hidden: it holds the API server's database, keys and every Pod's tokens). Default
    /// `/root` and `/home`, where credentials such as `~/.kube/config` live.
    pub sandbox_hidden_paths: Vec<PathBuf>,
    /// Size cap of one container log file in bytes before it is rotated (kubelet
    /// `containerLogMaxSize`, default 10 MiB).
    pub container_log_max_size: u64,
    /// Log files kept per container, the current one included, at least 2 (kubelet
    /// `containerLogMaxFiles`, default 5).
    pub container_log_max_files: usize,
    /// The least time between two status writes of a running Pod: a Pod's first change
    /// and its last status are
    /// written at once, changes in between gather into one write per window. Zero
    /// writes every change.
    pub status_window: Duration,
    /// Runs Plinth's adapter containers inside the runner's process instead of a sandbox
    /// each ([`crate::inprocess`], [`crate::adapter`]); `None` runs them like any other container.
    pub adapter_program: Option<std::sync::Arc<dyn crate::adapter::AdapterProgram>>,
}

/// Jobs that run a Pod at the same time by default. A pipeline Pod spends most of its
/// life waiting on the API (status writes, Events) rather than on a core, so this is
/// above the core count of a laptop.
pub const DEFAULT_MAX_PARALLEL_JOBS: usize = 4;

/// The least time between two status writes of a running Pod, by default: half the
/// kubelet's once-a-second look at its containers, so a state that lasts a second is
/// always written, while the quick steps of a pipeline Pod go in one write.
pub const DEFAULT_STATUS_WINDOW: Duration = Duration::from_millis(500);

impl RunnerConfig {
    /// A configuration with Plinth's defaults: the current executable as `plinth_exe`,
    /// [`DEFAULT_ADAPTER_IMAGE`], no image map, [`DEFAULT_MAX_PARALLEL_JOBS`] parallel Jobs, [`SandboxMode::Auto`],
    /// network shared, [`DEFAULT_STOCK_IMAGES`], engine auto-detected, retry backoff
    /// 10 s doubling to 360 s, tokens of one hour, node name `plinth`, container logs of
    /// 10 MiB × 5 files, Pod status changes written at most once per
    /// [`DEFAULT_STATUS_WINDOW`], adapter containers run like any other (no
    /// [`RunnerConfig::adapter_program`]).
    pub fn new(
        data_dir: impl Into<PathBuf>,
        api_host: impl Into<String>,
        api_port: u16,
        ca_pem: impl Into<String>,
    ) -> Self {
        RunnerConfig {
            data_dir: data_dir.into(),
            api_host: api_host.into(),
            api_port,
            ca_pem: ca_pem.into(),
            plinth_exe: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("plinth")),
            adapter_image: DEFAULT_ADAPTER_IMAGE.to_string(),
            image_map: None,
            max_parallel_jobs: DEFAULT_MAX_PARALLEL_JOBS,
            sandbox: SandboxMode::Auto,
            network: true,
            stock_images: DEFAULT_STOCK_IMAGES.iter().map(|s| s.to_string()).collect(),
            default_security_context: None,
            engine: EngineMode::Auto,
            retry_backoff: Duration::from_secs(10),
            max_retry_backoff: Duration::from_secs(360),
            token_expiration_seconds: 3600,
            node_name: "plinth".to_string(),
            keep_pod_dirs: false,
            sandbox_hidden_paths: vec![PathBuf::from("/root"), PathBuf::from("/home")],
            container_log_max_size: crate::logfile::DEFAULT_MAX_SIZE,
            container_log_max_files: crate::logfile::DEFAULT_MAX_FILES,
            status_window: DEFAULT_STATUS_WINDOW,
            adapter_program: None,
        }
    }

    /// `<data_dir>/pods/<namespace>/<pod>`: the Pod's private files.
    pub fn pod_dir(&self, namespace: &str, pod: &str) -> PathBuf {
        self.data_dir.join("pods").join(namespace).join(pod)
    }

    /// `<data_dir>/pods/<namespace>/<pod>/volumes/<volume>`: where a volume's files live.
    pub fn volume_dir(&self, namespace: &str, pod: &str, volume: &str) -> PathBuf {
        self.pod_dir(namespace, pod).join("volumes").join(volume)
    }

    /// `<data_dir>/pod-logs/<namespace>/<pod>/<container>.log`: a container's stdout and
    /// stderr (the contract with the API server's `pods/log` endpoint).
    pub fn log_path(&self, namespace: &str, pod: &str, container: &str) -> PathBuf {
        plinth_api::paths::pod_log_path(&self.data_dir, namespace, pod, container)
    }

    /// `https://<api_host>:<api_port>` (IPv6 hosts bracketed).
    pub fn api_url(&self) -> String {
        if self.api_host.contains(':') && !self.api_host.starts_with('[') {
            format!("https://[{}]:{}", self.api_host, self.api_port)
        } else {
            format!("https://{}:{}", self.api_host, self.api_port)
        }
    }
}

/// Finds an executable on `PATH`.
pub fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| is_executable(p))
}

/// Whether `p` is a regular file with an execute bit.
pub fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_of_pod_files_and_logs() {
        let c = RunnerConfig::new("/d", "127.0.0.1", 6443, "");
        assert_eq!(c.pod_dir("ns", "p"), PathBuf::from("/d/pods/ns/p"));
        assert_eq!(
            c.volume_dir("ns", "p", "shared-input"),
            PathBuf::from("/d/pods/ns/p/volumes/shared-input")
        );
        assert_eq!(
            c.log_path("ns", "p", "reader"),
            PathBuf::from("/d/pod-logs/ns/p/reader.log")
        );
        assert_eq!(c.api_url(), "https://127.0.0.1:6443");
        let v6 = RunnerConfig::new("/d", "::1", 6443, "");
        assert_eq!(v6.api_url(), "https://[::1]:6443");
    }
}
