//! Image names: normalisation, matching, and the image map file.
//!
//! The image map is how Promise pipelines whose images cannot be pulled run in embedded
//! mode: an image (exact name, a name without tag, or a glob) maps to a local command
//! that runs in place of the image's entrypoint. File format (YAML):
//!
//! ```yaml
//! images:
//!   - image: "ghcr.io/syntasso/kratix-marketplace/redis-configure-pipeline:*"
//!     command: ["./redis/configure.sh"]   # relative paths: relative to this file
//!     args: ["--flag"]                    # optional, before the container's args
//!     workingDir: /kratix                 # optional, like the image's WORKDIR
//!     env: {LOG_LEVEL: debug}             # optional, like the image's ENV
//!     sandbox: true                       # optional (default true): run in the sandbox
//! ```
//!
//! An entry without `command` runs the container's own `command`/`args` over the host
//! userland (like a stock image). With `command`, the entry is the image's entrypoint:
//! the container runs `command + args + container.args`, unless the container sets its
//! own `command`, which replaces the entrypoint as in Kubernetes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::RunnerError;

/// An image reference split into a normalised repository and a tag or digest.
///
/// Docker Hub names are shortened the way `docker` displays them: `docker.io/library/busybox`
/// and `index.docker.io/library/busybox` are `busybox`; `docker.io/bitnami/kubectl` is
/// `bitnami/kubectl`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRef {
    /// Repository without registry prefix for Docker Hub, e.g. `busybox`, `ghcr.io/x/y`.
    pub repository: String,
    /// The tag, if any (without `:`).
    pub tag: Option<String>,
    /// The digest, if any (`sha256:...`).
    pub digest: Option<String>,
}

impl ImageRef {
    /// Parses an image reference (`[registry/]path[:tag][@digest]`).
    pub fn parse(image: &str) -> ImageRef {
        let (rest, digest) = match image.split_once('@') {
            Some((r, d)) => (r, Some(d.to_string())),
            None => (image, None),
        };
        let last_slash = rest.rfind('/').map(|i| i + 1).unwrap_or(0);
        let (repo, tag) = match rest[last_slash..].rfind(':') {
            Some(i) => (
                &rest[..last_slash + i],
                Some(rest[last_slash + i + 1..].to_string()),
            ),
            None => (rest, None),
        };
        let mut repo = repo.to_string();
        for prefix in ["docker.io/", "index.docker.io/", "registry-1.docker.io/"] {
            if let Some(r) = repo.strip_prefix(prefix) {
                repo = r.to_string();
                break;
            }
        }
        if let Some(r) = repo.strip_prefix("library/") {
            repo = r.to_string();
        }
        ImageRef {
            repository: repo,
            tag,
            digest,
        }
    }

    /// `repository:tag` with the tag defaulting to `latest` (digest ignored).
    pub fn with_tag(&self) -> String {
        format!(
            "{}:{}",
            self.repository,
            self.tag.as_deref().unwrap_or("latest")
        )
    }
}

/// Glob match where `*` matches any run of characters (including `/`) and `?` one character.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

/// Whether `pattern` (an image-map or stock-image entry) selects `image`.
///
/// * a pattern with `*` or `?` is a glob, tried against the image as written and against
///   its normalised `repository:tag` form (so `busybox:*` matches `busybox`);
/// * a pattern without a tag matches every tag and digest of that repository;
/// * a pattern with a tag matches that tag only (`latest` when the image has none).
pub fn image_matches(pattern: &str, image: &str) -> bool {
    if pattern == image {
        return true;
    }
    let img = ImageRef::parse(image);
    if pattern.contains(['*', '?']) {
        return glob_match(pattern, image) || glob_match(pattern, &img.with_tag());
    }
    let pat = ImageRef::parse(pattern);
    if pat.repository != img.repository {
        return false;
    }
    match (&pat.tag, &pat.digest) {
        (None, None) => true,
        (Some(_), _) => pat.with_tag() == img.with_tag(),
        (None, Some(d)) => img.digest.as_deref() == Some(d.as_str()),
    }
}

/// One entry of the image map.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImageMapEntry {
    /// Image name, name without tag, or glob.
    pub image: String,
    /// Local command replacing the image's entrypoint (absolute, on `PATH`, or relative to
    /// the map file).
    #[serde(default)]
    pub command: Vec<String>,
    /// Arguments after `command`, before the container's `args`.
    #[serde(default)]
    pub args: Vec<String>,
    /// Default working directory (the container's `workingDir` wins).
    #[serde(default)]
    pub working_dir: Option<String>,
    /// Default environment (the container's `env`/`envFrom` win).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Run inside the sandbox (default true).
    #[serde(default = "default_true")]
    pub sandbox: bool,
}

fn default_true() -> bool {
    true
}

/// The parsed image map file.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ImageMap {
    /// Entries, first match wins.
    #[serde(default)]
    pub images: Vec<ImageMapEntry>,
}

/// What is wrong with an image map's text or with one entry's command. The file is
/// named by [`RunnerError::ImageMap`], which carries this message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ImageMapError {
    /// The text is not YAML of the image map's shape.
    #[error("{cause}")]
    Yaml {
        /// The parser's message (names the line and field).
        cause: String,
    },
    /// An entry's `image` is empty.
    #[error("images[{index}].image: must not be empty")]
    EmptyImage {
        /// The entry's index.
        index: usize,
    },
    /// A command path does not exist.
    #[error("{command:?} does not exist")]
    CommandMissing {
        /// The command as written.
        command: String,
    },
    /// A command path is not a regular file.
    #[error("{command:?} is not a file")]
    CommandNotAFile {
        /// The command as written.
        command: String,
    },
    /// A command path is not executable.
    #[error("{command:?} is not executable")]
    CommandNotExecutable {
        /// The command as written.
        command: String,
    },
    /// A bare command name is on neither the runner's nor the container `PATH`.
    #[error("{command:?} is not an executable on PATH")]
    CommandNotOnPath {
        /// The command as written.
        command: String,
    },
}

impl ImageMap {
    /// Reads and validates an image map file; relative `command[0]` paths containing `/`
    /// are made absolute against the file's directory.
    pub fn load(path: &Path) -> Result<ImageMap, RunnerError> {
        let text = std::fs::read_to_string(path).map_err(|e| RunnerError::ImageMap {
            path: path.to_path_buf(),
            message: format!("cannot read: {e}"),
        })?;
        let mut map = Self::parse(&text).map_err(|e| RunnerError::ImageMap {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        for e in &mut map.images {
            if let Some(first) = e.command.first_mut()
                && first.contains('/')
                && !first.starts_with('/')
            {
                *first = base.join(&*first).to_string_lossy().into_owned();
            }
        }
        for (i, e) in map.images.iter().enumerate() {
            if let Some(first) = e.command.first() {
                check_command(first).map_err(|cause| RunnerError::ImageMap {
                    path: path.to_path_buf(),
                    message: format!("images[{i}] (image {:?}): command {cause}", e.image),
                })?;
            }
        }
        Ok(map)
    }

    /// Parses image map YAML.
    ///
    /// # Errors
    /// [`ImageMapError::Yaml`] or [`ImageMapError::EmptyImage`], naming the entry and
    /// field.
    pub fn parse(text: &str) -> Result<ImageMap, ImageMapError> {
        if text.trim().is_empty() {
            return Ok(ImageMap::default());
        }
        let map: ImageMap = serde_saphyr::from_str(text).map_err(|e| ImageMapError::Yaml {
            cause: e.to_string(),
        })?;
        for (i, e) in map.images.iter().enumerate() {
            if e.image.trim().is_empty() {
                return Err(ImageMapError::EmptyImage { index: i });
            }
        }
        Ok(map)
    }

    /// The first entry matching `image`.
    pub fn find(&self, image: &str) -> Option<&ImageMapEntry> {
        self.images.iter().find(|e| image_matches(&e.image, image))
    }
}

/// Checks that an image map command exists and is executable: a path as given, a bare
/// name on the runner's `PATH` or the standard container `PATH`.
fn check_command(command: &str) -> Result<(), ImageMapError> {
    use crate::config::is_executable;
    let command_ = || command.to_string();
    if command.contains('/') {
        let p = Path::new(command);
        return match std::fs::metadata(p) {
            Err(_) => Err(ImageMapError::CommandMissing {
                command: command_(),
            }),
            Ok(m) if !m.is_file() => Err(ImageMapError::CommandNotAFile {
                command: command_(),
            }),
            Ok(_) if !is_executable(p) => Err(ImageMapError::CommandNotExecutable {
                command: command_(),
            }),
            Ok(_) => Ok(()),
        };
    }
    let host = std::env::var("PATH").unwrap_or_default();
    let found = host
        .split(':')
        .chain("/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".split(':'))
        .filter(|d| !d.is_empty())
        .any(|d| is_executable(&Path::new(d).join(command)));
    if found {
        Ok(())
    } else {
        Err(ImageMapError::CommandNotOnPath {
            command: command_(),
        })
    }
}

/// A path for error messages and tests: the configured map file or a hint.
pub(crate) fn map_path_hint(path: Option<&PathBuf>) -> String {
    match path {
        Some(p) => p.display().to_string(),
        None => "an image map (`plinth up --image-map FILE`)".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_references() {
        let r = ImageRef::parse("docker.io/library/busybox:1.36");
        assert_eq!(r.repository, "busybox");
        assert_eq!(r.tag.as_deref(), Some("1.36"));
        let r = ImageRef::parse("localhost:5000/x/y");
        assert_eq!(r.repository, "localhost:5000/x/y");
        assert_eq!(r.tag, None);
        let r = ImageRef::parse("ghcr.io/a/b:v1@sha256:abc");
        assert_eq!(r.repository, "ghcr.io/a/b");
        assert_eq!(r.tag.as_deref(), Some("v1"));
        assert_eq!(r.digest.as_deref(), Some("sha256:abc"));
        assert_eq!(
            ImageRef::parse("bitnami/kubectl").with_tag(),
            "bitnami/kubectl:latest"
        );
    }

    #[test]
    fn globs() {
        assert!(glob_match("a*c", "abbbc"));
        assert!(glob_match("*", ""));
        assert!(glob_match("a?c", "abc"));
        assert!(!glob_match("a?c", "ac"));
        assert!(glob_match("ghcr.io/*/x:*", "ghcr.io/org/team/x:v1"));
        assert!(!glob_match("ghcr.io/*/x:*", "ghcr.io/org/y:v1"));
    }

    #[test]
    fn matching_rules() {
        assert!(image_matches("busybox", "busybox"));
        assert!(image_matches("busybox", "busybox:1.36"));
        assert!(image_matches("busybox", "docker.io/library/busybox:latest"));
        assert!(image_matches("busybox:latest", "busybox"));
        assert!(!image_matches("busybox:1.35", "busybox:1.36"));
        assert!(!image_matches("busybox", "busyboxx"));
        assert!(!image_matches("busybox", "ghcr.io/busybox"));
        assert!(image_matches(
            "bitnami/kubectl",
            "docker.io/bitnami/kubectl:1.30"
        ));
        assert!(image_matches(
            "ghcr.io/syntasso/kratix-marketplace/redis-configure-pipeline:*",
            "ghcr.io/syntasso/kratix-marketplace/redis-configure-pipeline:v0.1.0"
        ));
        assert!(!image_matches(
            "ghcr.io/syntasso/kratix-marketplace/redis-configure-pipeline:*",
            "ghcr.io/syntasso/kratix-marketplace/postgres-configure-pipeline:v0.1.0"
        ));
        assert!(image_matches("busybox:*", "busybox"));
        assert!(image_matches("x@sha256:1", "x:v@sha256:1"));
    }

    #[test]
    fn image_map_file() {
        let dir = tempfile::tempdir().unwrap();
        // Commands are checked when the map loads: the relative one must exist.
        std::fs::create_dir(dir.path().join("bin")).unwrap();
        let script = dir.path().join("bin/run.sh");
        std::fs::write(&script, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let p = dir.path().join("map.yaml");
        std::fs::write(
            &p,
            "images:\n  - image: \"ghcr.io/x/*\"\n    command: [\"bin/run.sh\", \"a\"]\n    env: {K: v}\n  - image: alpine\n",
        )
        .unwrap();
        let m = ImageMap::load(&p).unwrap();
        let e = m.find("ghcr.io/x/y:v1").unwrap();
        assert_eq!(
            e.command[0],
            dir.path().join("bin/run.sh").to_string_lossy()
        );
        assert_eq!(e.env["K"], "v");
        assert!(e.sandbox);
        assert!(m.find("alpine:3").unwrap().command.is_empty());
        assert!(m.find("debian").is_none());

        std::fs::write(&p, "images:\n  - image: x\n    comand: [y]\n").unwrap();
        let err = ImageMap::load(&p).unwrap_err().to_string();
        assert!(err.contains("comand"), "{err}");
        assert!(err.contains("map.yaml"), "{err}");
    }
}
