//! Stopping a container's process tree as the kubelet stops a container: `SIGTERM`, up to
//! the grace period (`terminationGracePeriodSeconds`, default 30 s) for the processes to
//! exit, then `SIGKILL` for whatever is left. The tree is found through `/proc` (parent
//! pids), so processes in a sandbox's own session or pid namespace are reached too.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

/// The grace period Kubernetes uses when a Pod does not set one.
pub const DEFAULT_GRACE_PERIOD: Duration = Duration::from_secs(30);

fn stat_fields(pid: u32) -> Option<(String, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid ...`; comm may contain spaces and parentheses.
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat[open + 1..close].to_string();
    let ppid = stat[close + 2..].split_whitespace().nth(1)?.parse().ok()?;
    Some((comm, ppid))
}

/// Every live descendant of `root` (not `root` itself), with its command name.
pub fn descendants(root: u32) -> Vec<(u32, String)> {
    let mut children: HashMap<u32, Vec<(u32, String)>> = HashMap::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if let Some((comm, ppid)) = stat_fields(pid) {
                children.entry(ppid).or_default().push((pid, comm));
            }
        }
    }
    let mut out = Vec::new();
    let mut todo = vec![root];
    while let Some(p) = todo.pop() {
        for (c, comm) in children.remove(&p).unwrap_or_default() {
            todo.push(c);
            out.push((c, comm));
        }
    }
    out
}

/// Whether `pid` still exists (a zombie counts as gone).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !s
            .rfind(')')
            .is_some_and(|i| s[i + 1..].trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Sends `SIGTERM` to the container's processes that `signalled` does not hold yet, and
/// adds them to it. Call it again while waiting: a sandbox that is still starting has no
/// container process yet, and the one it starts next must get the signal too.
///
/// The sandbox's own `bwrap` processes are never sent `SIGTERM`: they exit when the
/// container's processes have, and an outer `bwrap` that dies first would leave the
/// sandbox running without a parent. `root` itself gets it when it is not `bwrap` (a
/// process on the host, or an engine's client that forwards signals).
pub fn terminate(root: u32, signalled: &mut HashSet<u32>) {
    let mut targets: Vec<u32> = descendants(root)
        .into_iter()
        .filter(|(_, comm)| comm != "bwrap")
        .map(|(p, _)| p)
        .collect();
    if stat_fields(root).is_some_and(|(comm, _)| comm != "bwrap") {
        targets.push(root);
    }
    for p in targets {
        if signalled.insert(p) {
            let _ = kill(Pid::from_raw(p as i32), Signal::SIGTERM);
        }
    }
}

/// Sends `SIGKILL` to every descendant of `root`, then to `root` and its process group.
/// Descendants go first: a sandbox's inner `bwrap` is the init of its pid namespace, and
/// killing it takes every process in the sandbox with it, whether or not the outer one
/// is still there to be its parent.
pub fn kill_tree(root: u32) {
    for (p, _) in descendants(root) {
        let _ = kill(Pid::from_raw(p as i32), Signal::SIGKILL);
    }
    let _ = killpg(Pid::from_raw(root as i32), Signal::SIGKILL);
    let _ = kill(Pid::from_raw(root as i32), Signal::SIGKILL);
}
