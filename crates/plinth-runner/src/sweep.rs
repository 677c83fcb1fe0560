//! Leftover Pod files: a Pod's log directory (`<data_dir>/pod-logs/<ns>/<pod>/`) goes
//! when the Pod is deleted (the Pod watch in [`crate::pods`]) and its private directory
//! (`<data_dir>/pods/<ns>/<pod>/`) when its run ends. A Pod deleted while this process
//! was not running (a crash, a `kill -9`, the API served by another process) leaves
//! them behind; [`sweep`] removes them after each full list of Pods, so the data
//! directory holds files only for Pods that exist.

use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, SystemTime};

use crate::config::RunnerConfig;

/// Directories touched within this long are kept even without a listed Pod: a Pod created
/// after the list was read may have started writing already.
pub const GRACE: Duration = Duration::from_secs(60);

/// Removes the log and private directories of Pods not in `live` (`(namespace, name)`
/// pairs from a full list), except those modified after `now - GRACE`, and namespace
/// directories left empty. Returns how many Pod directories were removed. Errors
/// reading or removing a directory are skipped (the next sweep tries again).
pub fn sweep(config: &RunnerConfig, live: &HashSet<(String, String)>, now: SystemTime) -> usize {
    let logs = config
        .log_path("ns", "pod", "c")
        .parent()
        .and_then(Path::parent)
        .and_then(Path::parent)
        .map(Path::to_path_buf);
    let private = config
        .pod_dir("ns", "pod")
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf);
    let cutoff = now.checked_sub(GRACE).unwrap_or(SystemTime::UNIX_EPOCH);
    [logs, private]
        .into_iter()
        .flatten()
        .map(|root| sweep_root(&root, live, cutoff))
        .sum()
}

fn sweep_root(root: &Path, live: &HashSet<(String, String)>, cutoff: SystemTime) -> usize {
    let mut removed = 0;
    let Ok(namespaces) = std::fs::read_dir(root) else {
        return 0;
    };
    for ns in namespaces.flatten() {
        let ns_name = ns.file_name().to_string_lossy().into_owned();
        let Ok(pods) = std::fs::read_dir(ns.path()) else {
            continue;
        };
        for pod in pods.flatten() {
            let key = (
                ns_name.clone(),
                pod.file_name().to_string_lossy().into_owned(),
            );
            let recent = pod
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t > cutoff);
            if live.contains(&key) || recent {
                continue;
            }
            if std::fs::remove_dir_all(pod.path()).is_ok() {
                removed += 1;
            }
        }
        // Only succeeds when empty.
        let _ = std::fs::remove_dir(ns.path());
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_directories_of_listed_or_recent_pods_stay() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = RunnerConfig::new(dir.path(), "127.0.0.1", 6443, "");
        for (ns, pod) in [("a", "live"), ("a", "gone"), ("b", "gone")] {
            let log = cfg.log_path(ns, pod, "c");
            std::fs::create_dir_all(log.parent().unwrap()).unwrap();
            std::fs::write(&log, "x").unwrap();
            std::fs::create_dir_all(cfg.pod_dir(ns, pod)).unwrap();
        }
        let live: HashSet<(String, String)> = [("a".to_string(), "live".to_string())].into();
        // Everything was just written: within the grace period nothing goes.
        assert_eq!(sweep(&cfg, &live, SystemTime::now()), 0);
        let later = SystemTime::now() + GRACE + Duration::from_secs(1);
        assert_eq!(sweep(&cfg, &live, later), 4);
        assert!(cfg.log_path("a", "live", "c").exists());
        assert!(cfg.pod_dir("a", "live").exists());
        assert!(!cfg.log_path("a", "gone", "c").exists());
        assert!(!cfg.pod_dir("a", "gone").exists());
        // Namespace `b` had no Pod left: its directories are gone too.
        assert!(!cfg.log_path("b", "gone", "c").parent().unwrap().exists());
        assert!(!cfg.pod_dir("b", "gone").parent().unwrap().exists());
        assert_eq!(sweep(&cfg, &live, later), 0);
    }
}
