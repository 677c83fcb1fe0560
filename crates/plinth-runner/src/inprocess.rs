//! Plinth's own adapter containers, run as tasks of the runner's process.
//!
//! A pipeline Pod holds three containers of Plinth's own code (reader, work-writer,
//! status-writer) beside the user's; a health check holds two. Starting a sandbox and a
//! process for each costs more than the work they do, so when the runner is given an
//! [`AdapterProgram`] (as `plinth up` gives it), an adapter container runs inside the
//! runner's process instead, and looks the same from outside:
//! * **identity**: the program gets the Pod's ServiceAccount kubeconfig and nothing else,
//!   so it is allowed exactly what the pipeline's RBAC allows;
//! * **files**: container paths are taken under the container's root
//!   (`<pod dir>/root/<container>`), whose mount points link to the Pod's volumes, as for
//!   a host process ([`crate::backend::HostProcess`]);
//! * **logs**: the program writes to the container's log file, so `kubectl logs -c reader`
//!   reads what a process would have printed;
//! * **status**: the exit code, the deadline and a stop request end the container as they
//!   end a process; the Pod, the Job and their Events are written as for any container.
//!
//! The container runs in the sandbox after all (the backend [`InProcess`] wraps) when
//! running it in-process would see more than the sandbox would: when another container of
//! the Pod runs beside it, when its environment names a kubeconfig other than the Pod's,
//! when a volume holds a link to a file outside the Pod (an earlier container may leave
//! one; the sandbox resolves it in its own view of the host, the runner's process would
//! resolve it in the runner's), or when a volume holds a FIFO or a device (opening one
//! can block, and a blocked task would hold one of the runner's threads).
//!
//! ```
//! use plinth_runner::inprocess::{AdapterCall, AdapterProgram};
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
use tokio::process::Command;

use crate::backend::{BackendError, ContainerBackend, PreparedContainer};
use crate::logfile::RotatingLog;

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
    /// The container's file system: container path `/a/b` is `<root>/a/b`.
    pub root: PathBuf,
    /// The Pod's ServiceAccount kubeconfig (a host path).
    pub kubeconfig: PathBuf,
    /// The container's log.
    pub output: AdapterOutput,
}

impl AdapterCall {
    /// The host path of container path `path`: lexically under [`AdapterCall::root`]
    /// (`..` never climbs above it; a relative path is taken from `/`, the working
    /// directory adapters start in).
    pub fn host_path(&self, path: &Path) -> PathBuf {
        let mut out = self.root.clone();
        let mut depth = 0usize;
        for part in path.components() {
            match part {
                std::path::Component::Normal(p) => {
                    out.push(p);
                    depth += 1;
                }
                std::path::Component::ParentDir if depth > 0 => {
                    out.pop();
                    depth -= 1;
                }
                _ => {}
            }
        }
        out
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

/// The backend of an adapter container that runs in-process when it can, and in
/// `sandbox` when it cannot (see the module documentation).
pub struct InProcess {
    /// The program that runs adapter roles.
    pub program: Arc<dyn AdapterProgram>,
    /// The Pod's ServiceAccount kubeconfig.
    pub kubeconfig: PathBuf,
    /// The backend the container runs in when it cannot run in-process.
    pub sandbox: Box<dyn ContainerBackend>,
}

/// The most entries of a container's volumes looked at for links out of the Pod; a
/// container whose volumes hold more runs in the sandbox.
pub const MAX_SCANNED_ENTRIES: usize = 10_000;

impl InProcess {
    /// Why container `c` must run in the sandbox after all, if it must; `alone` says no
    /// other container of the Pod runs while it does.
    pub fn sandbox_reason(&self, c: &PreparedContainer, alone: bool) -> Option<String> {
        if !alone {
            return Some("it runs beside other containers of the Pod".into());
        }
        let kubeconfig = c.env.iter().rev().find(|(k, _)| k == "KUBECONFIG");
        if kubeconfig.is_none_or(|(_, v)| Path::new(v) != self.kubeconfig) {
            return Some("its KUBECONFIG is not the Pod's ServiceAccount kubeconfig".into());
        }
        let pod_dir = match c.pod_dir.canonicalize() {
            Ok(p) => p,
            Err(e) => return Some(format!("the Pod's directory cannot be resolved: {e}")),
        };
        let mut budget = MAX_SCANNED_ENTRIES;
        c.mounts
            .iter()
            .find_map(|m| link_out_of(&m.host_path, &pod_dir, &mut budget))
    }
}

/// The first entry under `path` (itself included) that resolves outside `pod_dir`, or
/// cannot be resolved, described; also when more than `budget` entries are left to look at.
fn link_out_of(path: &Path, pod_dir: &Path, budget: &mut usize) -> Option<String> {
    let mut stack = vec![path.to_path_buf()];
    while let Some(p) = stack.pop() {
        if *budget == 0 {
            return Some(format!(
                "its volumes hold more than {MAX_SCANNED_ENTRIES} files to check"
            ));
        }
        *budget -= 1;
        let meta = match std::fs::symlink_metadata(&p) {
            Ok(m) => m,
            Err(e) => return Some(format!("{} cannot be read: {e}", p.display())),
        };
        if meta.file_type().is_symlink() {
            match p.canonicalize() {
                Ok(target) if target.starts_with(pod_dir) => {}
                _ => {
                    return Some(format!(
                        "{} is a link to a file outside the Pod",
                        p.display()
                    ));
                }
            }
        } else if !meta.is_file() && !meta.is_dir() {
            // A FIFO or a device would block the runner's thread, not a process of its own.
            return Some(format!("{} is not a regular file", p.display()));
        } else if meta.is_dir() {
            let entries = match std::fs::read_dir(&p) {
                Ok(e) => e,
                Err(e) => return Some(format!("{} cannot be read: {e}", p.display())),
            };
            stack.extend(entries.flatten().map(|e| e.path()));
        }
    }
    None
}

impl ContainerBackend for InProcess {
    fn name(&self) -> &str {
        "plinth"
    }

    fn command(&self, c: &PreparedContainer) -> Result<Command, BackendError> {
        self.sandbox.command(c)
    }

    fn stop_command(&self, c: &PreparedContainer, grace: std::time::Duration) -> Option<Command> {
        self.sandbox.stop_command(c, grace)
    }

    fn in_process(&self) -> Option<&InProcess> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{EffectiveSecurity, HostProcess, Mount};

    fn call(root: &Path) -> AdapterCall {
        let dir = tempfile::tempdir().unwrap();
        let log = RotatingLog::create(&dir.path().join("c.log"), 1024, 2).unwrap();
        AdapterCall {
            args: vec![],
            env: vec![("A".into(), "1".into()), ("A".into(), "2".into())],
            root: root.to_path_buf(),
            kubeconfig: PathBuf::from("/k"),
            output: AdapterOutput::new(log),
        }
    }

    #[test]
    fn container_paths_stay_under_the_root() {
        let c = call(Path::new("/r"));
        assert_eq!(
            c.host_path(Path::new("/kratix/input")),
            PathBuf::from("/r/kratix/input")
        );
        assert_eq!(
            c.host_path(Path::new("/kratix/../../../etc/passwd")),
            PathBuf::from("/r/etc/passwd")
        );
        assert_eq!(c.host_path(Path::new("out/./x")), PathBuf::from("/r/out/x"));
        assert_eq!(c.var("A").as_deref(), Some("2"), "the last definition wins");
    }

    fn prepared(pod_dir: &Path, mounts: Vec<Mount>, kubeconfig: &str) -> PreparedContainer {
        PreparedContainer {
            namespace: "ns".into(),
            pod: "p".into(),
            name: "reader".into(),
            image: "plinth".into(),
            pull_policy: None,
            argv: vec![],
            engine_args: vec![],
            env: vec![("KUBECONFIG".into(), kubeconfig.into())],
            working_dir: None,
            mounts,
            host_binds: vec![],
            security: EffectiveSecurity::default(),
            pod_dir: pod_dir.to_path_buf(),
        }
    }

    #[test]
    fn runs_in_the_sandbox_when_it_would_see_more_than_the_sandbox() {
        let dir = tempfile::tempdir().unwrap();
        let pod_dir = dir.path().join("pod");
        let vol = pod_dir.join("volumes/out");
        std::fs::create_dir_all(vol.join("sub")).unwrap();
        std::fs::write(pod_dir.join("kubeconfig"), "{}").unwrap();
        let kc = pod_dir.join("kubeconfig");
        let b = InProcess {
            program: Arc::new(Nothing),
            kubeconfig: kc.clone(),
            sandbox: Box::new(HostProcess),
        };
        let mount = vec![Mount {
            host_path: vol.clone(),
            container_path: "/kratix/output".into(),
            read_only: false,
        }];
        let kc_s = kc.to_string_lossy().into_owned();
        let c = prepared(&pod_dir, mount.clone(), &kc_s);
        assert_eq!(b.sandbox_reason(&c, true), None);
        assert!(b.sandbox_reason(&c, false).unwrap().contains("beside"));
        let other = prepared(&pod_dir, mount.clone(), "/elsewhere");
        assert!(
            b.sandbox_reason(&other, true)
                .unwrap()
                .contains("KUBECONFIG")
        );
        // A link inside the Pod is fine; one out of it, or a dangling one, is not.
        std::os::unix::fs::symlink(pod_dir.join("kubeconfig"), vol.join("sub/in")).unwrap();
        assert_eq!(b.sandbox_reason(&c, true), None);
        std::os::unix::fs::symlink(dir.path(), vol.join("sub/out")).unwrap();
        let why = b.sandbox_reason(&c, true).unwrap();
        assert!(
            why.contains("sub/out") && why.contains("outside the Pod"),
            "{why}"
        );
        std::fs::remove_file(vol.join("sub/out")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("not-yet"), vol.join("dangling")).unwrap();
        assert!(b.sandbox_reason(&c, true).unwrap().contains("dangling"));
        std::fs::remove_file(vol.join("dangling")).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(vol.join("pipe"))
            .status()
            .unwrap();
        assert!(made.success());
        let why = b.sandbox_reason(&c, true).unwrap();
        assert!(
            why.contains("pipe") && why.contains("not a regular file"),
            "{why}"
        );
    }

    #[derive(Debug)]
    struct Nothing;

    impl AdapterProgram for Nothing {
        fn run(&self, _call: AdapterCall) -> BoxFuture<'static, i32> {
            Box::pin(async { 0 })
        }
    }
}
