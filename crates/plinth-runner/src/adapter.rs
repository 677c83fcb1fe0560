//! The interface of Plinth's adapter roles run inside the runner's process: what the
//! runner hands an [`AdapterProgram`] for one container ([`AdapterCall`]) and where its
//! output goes ([`AdapterOutput`]). When and how the runner uses it is
//! [`crate::inprocess`].
//!
//! ```
//! use plinth_runner::adapter::{AdapterCall, AdapterProgram};
//! use futures::future::BoxFuture;
//! use std::io::Write;
//!
//! /// Writes its arguments to the container's log and succeeds.
//! #[derive(Debug)]
//! struct Echo;
//!
//! impl AdapterProgram for Echo {
//!     fn run(&self, mut call: AdapterCall) -> BoxFuture<'static, i32> {
//!         Box::pin(async move {
//!             let _ = writeln!(call.output, "{}", call.args.join(" "));
//!             0
//!         })
//!     }
//! }
//! ```

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;

use crate::logfile::RotatingLog;
use crate::mount::{Mount, under_root};

/// Runs adapter roles inside the runner's process.
pub trait AdapterProgram: Send + Sync + std::fmt::Debug {
    /// Runs one adapter container to its end and returns its exit code (0 for success).
    /// Whatever it prints goes to `call.output`.
    fn run(&self, call: AdapterCall) -> BoxFuture<'static, i32>;
}

/// One adapter container, as an in-process program sees it.
pub struct AdapterCall {
    /// The role and its flags: the container's arguments after the adapter's entrypoint,
    /// with `$(VAR)` expanded.
    pub args: Vec<String>,
    /// The container's whole environment (what a process would have been given).
    pub env: Vec<(String, String)>,
    /// Where the container's own files are (what no mount holds): container path `/a/b`
    /// outside every mount is `<root>/a/b`. Created only when the program writes there.
    pub root: PathBuf,
    /// The container's working directory (`/` when it names none).
    pub working_dir: String,
    /// The container's mounts (to show paths as the container sees them, and to refuse
    /// writes where the sandbox would).
    pub mounts: Vec<Mount>,
    /// The container's root file system is read-only (`readOnlyRootFilesystem`).
    pub read_only_root: bool,
    /// The Pod's ServiceAccount kubeconfig (YAML).
    pub kubeconfig: String,
    /// The container's log.
    pub output: AdapterOutput,
}

impl AdapterCall {
    /// The host path of container path `path`, resolved through the mount table as the
    /// sandbox would: in the deepest mount that holds it, else under
    /// [`AdapterCall::root`]. The path is taken lexically (`..` never climbs above `/`), a
    /// relative one from the working directory.
    pub fn host_path(&self, path: &Path) -> PathBuf {
        let at = self.container_path(path);
        match self.mount_of(&at) {
            Some((m, rest)) if rest.as_os_str().is_empty() => m.host_path.clone(),
            Some((m, rest)) => m.host_path.join(rest),
            None => under_root(&self.root, &at),
        }
    }

    /// `path` as an absolute, normalised container path.
    fn container_path(&self, path: &Path) -> PathBuf {
        under_root(Path::new("/"), &Path::new(&self.working_dir).join(path))
    }

    /// The deepest mount holding container path `at` (absolute, normalised), with the
    /// rest of the path inside it.
    fn mount_of<'a>(&self, at: &'a Path) -> Option<(&Mount, &'a Path)> {
        self.mounts
            .iter()
            .filter_map(|m| {
                let point = under_root(Path::new("/"), Path::new(&m.container_path));
                let rest = at.strip_prefix(&point).ok()?;
                Some((m, rest, point.components().count()))
            })
            .max_by_key(|(_, _, depth)| *depth)
            .map(|(m, rest, _)| (m, rest))
    }

    /// Whether the container may not write at container path `path`, as a sandbox would
    /// refuse it: the path lies in a read-only mount, or in no mount of a read-only root.
    ///
    /// ```
    /// # use plinth_runner::adapter::AdapterCall;
    /// # fn check(call: &AdapterCall) {
    /// if call.is_read_only(std::path::Path::new("/kratix/output")) {
    ///     // the role would fail with "Read-only file system"
    /// }
    /// # }
    /// ```
    pub fn is_read_only(&self, path: &Path) -> bool {
        let at = self.container_path(path);
        match self.mount_of(&at) {
            Some((m, _)) => m.read_only,
            None => self.read_only_root,
        }
    }

    /// The value of environment variable `name`, as the container sees it.
    pub fn var(&self, name: &str) -> Option<String> {
        self.env
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    }
}

/// Where an in-process adapter's output goes: the container's capped, rotating log.
#[derive(Clone)]
pub struct AdapterOutput(Arc<Mutex<RotatingLog>>);

impl AdapterOutput {
    /// Output into `log`.
    pub fn new(log: RotatingLog) -> Self {
        AdapterOutput(Arc::new(Mutex::new(log)))
    }
}

impl Write for AdapterOutput {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut log = self.0.lock().unwrap_or_else(|p| p.into_inner());
        log.write_all(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
