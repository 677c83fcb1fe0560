//! Stopping a container's process tree as the kubelet stops a container: `SIGTERM`, up to
//! the grace period (`terminationGracePeriodSeconds`, default 30 s) for the processes to
//! exit, then `SIGKILL` for whatever is left. The tree is found through `/proc` (parent
//! pids), so processes in a sandbox's own session or pid namespace are reached too.

use std::collections::HashMap;
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

/// Sends `SIGTERM` to the container's processes. The sandbox's own `bwrap` processes are
/// skipped (they kill everything at once when they die); they exit when the container's
/// processes have. When the tree has no other process (a host process), `root` gets it.
pub fn terminate(root: u32) {
    let tree: Vec<u32> = descendants(root)
        .into_iter()
        .filter(|(_, comm)| comm != "bwrap")
        .map(|(p, _)| p)
        .collect();
    if tree.is_empty() {
        let _ = kill(Pid::from_raw(root as i32), Signal::SIGTERM);
    }
    for p in tree {
        let _ = kill(Pid::from_raw(p as i32), Signal::SIGTERM);
    }
}

/// Sends `SIGKILL` to `root`, its process group and every descendant.
pub fn kill_tree(root: u32) {
    let tree = descendants(root);
    let _ = killpg(Pid::from_raw(root as i32), Signal::SIGKILL);
    let _ = kill(Pid::from_raw(root as i32), Signal::SIGKILL);
    for (p, _) in tree {
        let _ = kill(Pid::from_raw(p as i32), Signal::SIGKILL);
    }
}
