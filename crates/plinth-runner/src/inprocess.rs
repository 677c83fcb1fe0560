//! Plinth's own adapter containers, run as tasks of the runner's process.
//!
//! A pipeline Pod holds three containers of Plinth's own code (reader, work-writer,
//! status-writer) beside the user's; a health check holds two. Starting a sandbox and a
//! process for each costs more than the work they do, so when the runner is given an
//! [`AdapterProgram`] (as `plinth up` gives it), an adapter container runs inside the
//! runner's process instead, and looks the same from outside:
//! * **identity**: the program gets the Pod's ServiceAccount kubeconfig (as the runner
//!   wrote it, from memory, never re-read from a file a container could reach), so it is
//!   allowed exactly what the pipeline's RBAC allows;
//! * **files**: container paths resolve through the container's mounts to the Pod's
//!   volumes, as in the sandbox, and what no mount holds lies under the container's root
//!   (`<pod dir>/root/<container>`); relative paths start from its working directory;
//!   a write the sandbox would refuse (a read-only mount, a read-only root) the program
//!   refuses too ([`is_read_only`](crate::adapter::AdapterCall::is_read_only));
//! * **logs**: the program writes to the container's log file, so `kubectl logs -c reader`
//!   reads what a process would have printed;
//! * **status**: the exit code, the deadline and a stop request end the container as they
//!   end a process; the Pod, the Job and their Events are written as for any container.
//!
//! The runner's process sees the whole host, the sandbox only its own view of it, so the
//! container runs in the sandbox after all (the backend [`InProcess`] wraps) whenever a
//! path could lead the program anywhere but the Pod's volumes, or its files could hold up
//! the runner: when another container of the Pod runs beside it; when its environment
//! names a kubeconfig other than the Pod's; when its mount points nest or one is `/`;
//! when any volume of the Pod holds a symbolic link (an earlier container may leave one,
//! and only the sandbox resolves it in a view without the runner's files), a FIFO or a
//! device (opening one can block a thread of the runner); or when the volumes hold more
//! than [`MAX_VOLUME_BYTES`] (the roles read their files whole).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::process::Command;

use crate::adapter::AdapterProgram;
use crate::backend::{BackendError, ContainerBackend, PreparedContainer};
use crate::mount::under_root;

/// The backend of an adapter container that runs in-process when it can, and in
/// `sandbox` when it cannot (see the module documentation).
pub struct InProcess {
    /// The program that runs adapter roles.
    pub program: Arc<dyn AdapterProgram>,
    /// Where the Pod's ServiceAccount kubeconfig is, for containers (`KUBECONFIG`).
    pub kubeconfig_path: PathBuf,
    /// The Pod's ServiceAccount kubeconfig, as the runner wrote it.
    pub kubeconfig: String,
    /// The backend the container runs in when it cannot run in-process.
    pub sandbox: Box<dyn ContainerBackend>,
    /// The `containerID` of the container when it runs in `sandbox`.
    pub sandbox_id: String,
}

/// The most entries of a Pod's volumes looked at; a Pod whose volumes hold more runs its
/// adapters in the sandbox.
pub const MAX_SCANNED_ENTRIES: usize = 10_000;

/// The most bytes a Pod's volumes may hold for its adapters to run in-process: ten times
/// the largest Work etcd stores, far above what a pipeline writes, and a bound on what a
/// role reading its files whole can take from the runner's memory.
pub const MAX_VOLUME_BYTES: u64 = 16 * 1024 * 1024;

/// What else may write a Pod's volumes while one of its containers runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Company {
    /// Nothing: init containers run one at a time, and a lone container has the Pod.
    Alone,
    /// The Pod's other containers, running beside this one.
    OtherContainers,
    /// An earlier run of a Pod of the same name, whose directory this run found in place
    /// (its containers may still be stopping).
    EarlierRun,
}

/// How many adapters run in-process at once; more wait for a turn. Standalone Pods are
/// not bounded by the runner's parallel-Job limit, so this bounds what adapters take from
/// the runner's memory and threads.
pub const MAX_AT_ONCE: usize = 4;

impl InProcess {
    /// Why container `c` must run in the sandbox after all, if it must.
    pub fn sandbox_reason(&self, c: &PreparedContainer, company: Company) -> Option<String> {
        match company {
            Company::Alone => {}
            Company::OtherContainers => {
                return Some("it runs beside other containers of the Pod".into());
            }
            Company::EarlierRun => {
                return Some(
                    "an earlier run of a Pod of the same name left its directory in place".into(),
                );
            }
        }
        let kubeconfig = c.env.iter().rev().find(|(k, _)| k == "KUBECONFIG");
        if kubeconfig.is_none_or(|(_, v)| Path::new(v) != self.kubeconfig_path) {
            return Some("its KUBECONFIG is not the Pod's ServiceAccount kubeconfig".into());
        }
        if let Some(why) = nested_mount(c) {
            return Some(why);
        }
        let volumes = c.pod_dir.join("volumes");
        let identity = c.pod_dir.join("serviceaccount");
        if let Some(m) = c
            .mounts
            .iter()
            .find(|m| !m.host_path.starts_with(&volumes) && m.host_path != identity)
        {
            return Some(format!(
                "{} is mounted from outside the Pod's volumes",
                m.container_path
            ));
        }
        if !volumes.exists() {
            return None;
        }
        let mut scan = Scan::default();
        scan.walk(&volumes)
    }
}

/// A mount point that is `/` or lies inside another's, described.
fn nested_mount(c: &PreparedContainer) -> Option<String> {
    let points: Vec<PathBuf> = c
        .mounts
        .iter()
        .map(|m| under_root(Path::new("/"), Path::new(&m.container_path)))
        .collect();
    for (i, a) in points.iter().enumerate() {
        if a == Path::new("/") {
            return Some("a volume is mounted at /".into());
        }
        if let Some(b) = points
            .iter()
            .enumerate()
            .find(|(j, b)| *j != i && b.starts_with(a))
        {
            return Some(format!(
                "mount point {} lies inside mount point {}",
                b.1.display(),
                a.display()
            ));
        }
    }
    None
}

/// What a walk of a Pod's volumes has counted so far.
#[derive(Default)]
struct Scan {
    entries: usize,
    bytes: u64,
}

impl Scan {
    /// The first thing under `root` that keeps an adapter out of the runner's process,
    /// described (see the module documentation).
    fn walk(&mut self, root: &Path) -> Option<String> {
        let mut stack = vec![root.to_path_buf()];
        while let Some(p) = stack.pop() {
            self.entries += 1;
            if self.entries > MAX_SCANNED_ENTRIES {
                return Some(format!(
                    "the Pod's volumes hold more than {MAX_SCANNED_ENTRIES} files"
                ));
            }
            let meta = match std::fs::symlink_metadata(&p) {
                Ok(m) => m,
                Err(e) => return Some(format!("{} cannot be read: {e}", p.display())),
            };
            let kind = meta.file_type();
            if kind.is_symlink() {
                return Some(format!("{} is a symbolic link", p.display()));
            }
            if kind.is_dir() {
                let entries = match std::fs::read_dir(&p) {
                    Ok(entries) => entries,
                    Err(e) => return Some(format!("{} cannot be read: {e}", p.display())),
                };
                // Counted while listed: a directory of a million names is not held.
                for entry in entries.flatten() {
                    if self.entries + stack.len() > MAX_SCANNED_ENTRIES {
                        return Some(format!(
                            "the Pod's volumes hold more than {MAX_SCANNED_ENTRIES} files"
                        ));
                    }
                    stack.push(entry.path());
                }
            } else if kind.is_file() {
                self.bytes += meta.len();
                if self.bytes > MAX_VOLUME_BYTES {
                    return Some(format!(
                        "the Pod's volumes hold more than {MAX_VOLUME_BYTES} bytes"
                    ));
                }
            } else {
                return Some(format!("{} is not a regular file", p.display()));
            }
        }
        None
    }
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter::{AdapterCall, AdapterOutput};
    use crate::backend::{EffectiveSecurity, HostProcess};
    use crate::logfile::RotatingLog;
    use crate::mount::Mount;
    use futures::future::BoxFuture;

    fn call(root: &Path, working_dir: &str) -> AdapterCall {
        let dir = tempfile::tempdir().unwrap();
        let log = RotatingLog::create(&dir.path().join("c.log"), 1024, 2).unwrap();
        AdapterCall {
            args: vec![],
            env: vec![("A".into(), "1".into()), ("A".into(), "2".into())],
            root: root.to_path_buf(),
            working_dir: working_dir.into(),
            mounts: vec![],
            read_only_root: false,
            kubeconfig: String::new(),
            output: AdapterOutput::new(log),
        }
    }

    #[test]
    fn writes_are_refused_where_the_sandbox_would_refuse_them() {
        let mount = |at: &str, read_only| Mount {
            host_path: PathBuf::from("/h").join(at.trim_start_matches('/')),
            container_path: at.into(),
            read_only,
        };
        let mut c = call(Path::new("/r"), "/kratix");
        c.mounts = vec![
            mount("/kratix/output", true),
            mount("/kratix/output/rw", false),
        ];
        assert!(c.is_read_only(Path::new("/kratix/output")));
        assert!(
            c.is_read_only(Path::new("output/x")),
            "relative to the working directory"
        );
        assert!(c.is_read_only(Path::new("/kratix/input/../output")));
        assert!(
            !c.is_read_only(Path::new("/kratix/output/rw/x")),
            "the deeper mount decides"
        );
        assert!(
            !c.is_read_only(Path::new("/kratix/outputs")),
            "a sibling is not inside"
        );
        assert!(!c.is_read_only(Path::new("/tmp")), "a writable root");
        c.read_only_root = true;
        assert!(c.is_read_only(Path::new("/tmp")));
        assert!(!c.is_read_only(Path::new("/kratix/output/rw")));
    }

    #[test]
    fn container_paths_resolve_through_the_mounts() {
        let mount = |at: &str, host: &str| Mount {
            host_path: PathBuf::from(host),
            container_path: at.into(),
            read_only: false,
        };
        let mut c = call(Path::new("/r"), "/kratix");
        c.mounts = vec![
            mount("/kratix/input", "/v/in"),
            mount("/kratix/input/deep/", "/v/deep"),
            mount("/etc/obj.yaml", "/v/cm/obj.yaml"),
        ];
        let host = |p: &str| c.host_path(Path::new(p));
        assert_eq!(host("/kratix/input"), PathBuf::from("/v/in"));
        assert_eq!(
            host("input/object.yaml"),
            PathBuf::from("/v/in/object.yaml")
        );
        assert_eq!(host("/kratix/input/deep/x"), PathBuf::from("/v/deep/x"));
        assert_eq!(host("/etc/obj.yaml"), PathBuf::from("/v/cm/obj.yaml"));
        assert_eq!(host("/kratix/inputs"), PathBuf::from("/r/kratix/inputs"));
        assert_eq!(
            host("/kratix/input/../../../etc/passwd"),
            PathBuf::from("/r/etc/passwd"),
            "`..` leaves the mount lexically and never climbs above the root"
        );
    }

    #[test]
    fn container_paths_stay_under_the_root() {
        let c = call(Path::new("/r"), "/");
        assert_eq!(
            c.host_path(Path::new("/kratix/input")),
            PathBuf::from("/r/kratix/input")
        );
        assert_eq!(
            c.host_path(Path::new("/kratix/../../../etc/passwd")),
            PathBuf::from("/r/etc/passwd")
        );
        assert_eq!(c.host_path(Path::new("out/./x")), PathBuf::from("/r/out/x"));
        let in_kratix = call(Path::new("/r"), "/kratix");
        assert_eq!(
            in_kratix.host_path(Path::new("input")),
            PathBuf::from("/r/kratix/input"),
            "a relative path is taken from the working directory"
        );
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

    fn mount(host: &Path, at: &str) -> Mount {
        Mount {
            host_path: host.to_path_buf(),
            container_path: at.into(),
            read_only: false,
        }
    }

    #[test]
    fn runs_in_the_sandbox_when_a_path_could_lead_out_of_the_pods_volumes() {
        let dir = tempfile::tempdir().unwrap();
        let pod_dir = dir.path().join("pod");
        let vol = pod_dir.join("volumes/out");
        let other = pod_dir.join("volumes/other");
        std::fs::create_dir_all(vol.join("sub")).unwrap();
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(vol.join("sub/file.yaml"), "a: 1\n").unwrap();
        let kc = pod_dir.join("kubeconfig");
        let b = InProcess {
            program: Arc::new(Nothing),
            kubeconfig_path: kc.clone(),
            kubeconfig: String::new(),
            sandbox: Box::new(HostProcess),
            sandbox_id: "host://ns/p/reader".into(),
        };
        let mounts = vec![mount(&vol, "/kratix/output")];
        let kc_s = kc.to_string_lossy().into_owned();
        let c = prepared(&pod_dir, mounts.clone(), &kc_s);
        assert_eq!(b.sandbox_reason(&c, Company::Alone), None);
        let beside = b.sandbox_reason(&c, Company::OtherContainers).unwrap();
        assert!(beside.contains("beside"), "{beside}");
        let earlier = b.sandbox_reason(&c, Company::EarlierRun).unwrap();
        assert!(earlier.contains("earlier run"), "{earlier}");
        let elsewhere = prepared(&pod_dir, mounts.clone(), "/elsewhere");
        let why = b.sandbox_reason(&elsewhere, Company::Alone).unwrap();
        assert!(why.contains("KUBECONFIG"), "{why}");
        let outside = prepared(&pod_dir, vec![mount(dir.path(), "/x")], &kc_s);
        let why = b.sandbox_reason(&outside, Company::Alone).unwrap();
        assert!(why.contains("outside the Pod's volumes"), "{why}");
        for points in [vec!["/a", "/a/b"], vec!["/x/../"]] {
            let ms = points.iter().map(|at| mount(&vol, at)).collect();
            let why = b
                .sandbox_reason(&prepared(&pod_dir, ms, &kc_s), Company::Alone)
                .unwrap();
            assert!(why.contains("mount"), "{points:?}: {why}");
        }
        // Any link, even one into the Pod and in a volume this container does not mount
        // (it could be reached through a second link), and any FIFO.
        let link = other.join("to-kubeconfig");
        std::os::unix::fs::symlink("../../kubeconfig", &link).unwrap();
        let why = b.sandbox_reason(&c, Company::Alone).unwrap();
        assert!(
            why.contains("to-kubeconfig") && why.contains("symbolic link"),
            "{why}"
        );
        std::fs::remove_file(&link).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(vol.join("sub/pipe"))
            .status()
            .unwrap();
        assert!(made.success());
        let why = b.sandbox_reason(&c, Company::Alone).unwrap();
        assert!(
            why.contains("pipe") && why.contains("not a regular file"),
            "{why}"
        );
        std::fs::remove_file(vol.join("sub/pipe")).unwrap();
        // Large files (sparse, so nothing is written) count by their length.
        let big = std::fs::File::create(other.join("big")).unwrap();
        big.set_len(MAX_VOLUME_BYTES + 1).unwrap();
        let why = b.sandbox_reason(&c, Company::Alone).unwrap();
        assert!(why.contains("bytes"), "{why}");
    }

    #[derive(Debug)]
    struct Nothing;

    impl AdapterProgram for Nothing {
        fn run(&self, _call: AdapterCall) -> BoxFuture<'static, i32> {
            Box::pin(async { 0 })
        }
    }
}
