//! Where a container's paths lead: its mounts, and container paths taken lexically.
//!
//! The sandboxes, the in-process adapters and the Pod set-up all resolve container
//! paths the same way, so they share these two definitions.

use std::path::{Path, PathBuf};

/// A volume (or part of one) made visible at a path inside the container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Directory or file on the host.
    pub host_path: PathBuf,
    /// Absolute path inside the container.
    pub container_path: String,
    /// Mounted read-only.
    pub read_only: bool,
}

/// Container path `path` as a host path under `root`, taken lexically: `..` never climbs
/// above `root` (a mount path `/../../x` links `<root>/x`, not a host file).
pub fn under_root(root: &Path, path: &Path) -> PathBuf {
    let mut out = root.to_path_buf();
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
