//! State-store path rules shared by admission (the API server), the writers and the
//! controllers: normalisation and root overlap.

/// Why a path cannot be normalised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathProblem {
    /// A `..` segment: the path could leave its directory.
    ParentSegment,
    /// A NUL byte or a backslash, which are not portable across Git and buckets.
    InvalidCharacter,
}

/// Normalises a store-relative path: leading, trailing and repeated `/` and `.` segments
/// are dropped, so `""`, `.`, `/` and `//` all give `""` (the root) and `/a//b/` gives
/// `a/b`.
///
/// # Errors
/// [`PathProblem::ParentSegment`] for any `..` segment, [`PathProblem::InvalidCharacter`]
/// for NUL or `\`.
pub fn normalize(path: &str) -> Result<String, PathProblem> {
    if path.contains('\0') || path.contains('\\') {
        return Err(PathProblem::InvalidCharacter);
    }
    let mut out: Vec<&str> = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => return Err(PathProblem::ParentSegment),
            s => out.push(s),
        }
    }
    Ok(out.join("/"))
}

/// True when two roots overlap: equal, or one is an ancestor directory of the other (`a`
/// and `a/b`; the root overlaps everything). `ab` and `a` do not overlap. Paths that
/// cannot be normalised overlap everything, so a bad path is never silently accepted.
pub fn overlapping_roots(a: &str, b: &str) -> bool {
    let (Ok(a), Ok(b)) = (normalize(a), normalize(b)) else {
        return true;
    };
    if a.is_empty() || b.is_empty() || a == b {
        return true;
    }
    let (short, long) = if a.len() < b.len() {
        (&a, &b)
    } else {
        (&b, &a)
    };
    long.starts_with(short.as_str()) && long.as_bytes()[short.len()] == b'/'
}

/// Joins two normalised paths (either may be the empty root).
pub fn join(a: &str, b: &str) -> String {
    match (a.is_empty(), b.is_empty()) {
        (true, _) => b.to_string(),
        (_, true) => a.to_string(),
        _ => format!("{a}/{b}"),
    }
}

/// Directory of a data dir that holds pod logs.
pub const POD_LOG_DIR: &str = "pod-logs";

/// `<data_dir>/pod-logs/<namespace>/<pod>/<container>.log`: where a container's stdout
/// and stderr go. The embedded runner writes these files and the embedded API server
/// serves them as `pods/{name}/log` (Kubernetes has no API to write logs), so both
/// build the path here.
pub fn pod_log_path(
    data_dir: &std::path::Path,
    namespace: &str,
    pod: &str,
    container: &str,
) -> std::path::PathBuf {
    data_dir
        .join(POD_LOG_DIR)
        .join(namespace)
        .join(pod)
        .join(format!("{container}.log"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalisation_and_overlap() {
        assert_eq!(normalize("/a//b/./").unwrap(), "a/b");
        assert_eq!(normalize(".").unwrap(), "");
        assert_eq!(normalize("a/../b"), Err(PathProblem::ParentSegment));
        assert_eq!(normalize("a\\b"), Err(PathProblem::InvalidCharacter));
        assert!(overlapping_roots("worker-1", "/worker-1/"));
        assert!(overlapping_roots("worker-1", "worker-1/sub"));
        assert!(overlapping_roots(".", "anything"));
        assert!(!overlapping_roots("worker-1", "worker-10"));
        assert!(overlapping_roots("../x", "y"));
        assert!(overlapping_roots("a", "a"));
        assert!(overlapping_roots("/a/b/", "a"));
        assert!(overlapping_roots("/", ""));
        assert!(!overlapping_roots("a/b", "a/c"));
        assert!(!overlapping_roots("dev", "prod"));
        assert!(overlapping_roots("..", "x"));
        assert_eq!(join("", "a"), "a");
        assert_eq!(join("a", "b"), "a/b");
    }
}
