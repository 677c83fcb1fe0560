//! The Kratix state-store layout, byte for byte.
//!
//! Every function here is pure: it turns Destination and WorkPlacement facts into paths
//! (relative to the state store's `path` prefix, which the writer adds) and file contents.
//! The behaviour follows the Kratix reference:
//!
//! * where a WorkPlacement's workloads go for each `filepath.mode`;
//! * what a WorkPlacement deletion removes;
//! * canary files (paths and exact bytes);
//! * the directory layout summary.
//!
//! # Path rules
//!
//! Paths are `/`-separated and relative. [`normalize_path`] strips leading and trailing `/`,
//! collapses repeated `/`, drops `.` segments (so `.` and `/` both mean the root, spelled `""`)
//! and rejects `..` (in Kratix a leading `/` used to turn files into directories).
//! [`safe_join`] is the one rule used for every path a writer touches, Git path or bucket key:
//! the relative part must not be absolute and must not climb out of the root.

use md5::{Digest, Md5};

/// Destination `spec.filepath.mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FilepathMode {
    /// `nestedByMetadata` (the default): one directory per WorkPlacement.
    NestedByMetadata,
    /// `aggregatedYAML`: one file holding every WorkPlacement's documents.
    AggregatedYaml,
    /// `none`: files written as the pipeline named them, tracked by a `.kratix` state file.
    None,
}

impl FilepathMode {
    /// Parses the Kratix spelling (`nestedByMetadata`, `aggregatedYAML`, `none`); an empty
    /// string is the CRD default `nestedByMetadata`.
    ///
    /// # Errors
    /// [`PathError::UnknownMode`] naming the value.
    pub fn parse(s: &str) -> Result<Self, PathError> {
        match s {
            "" | "nestedByMetadata" => Ok(Self::NestedByMetadata),
            "aggregatedYAML" => Ok(Self::AggregatedYaml),
            "none" => Ok(Self::None),
            other => Err(PathError::UnknownMode {
                mode: other.to_string(),
            }),
        }
    }

    /// The Kratix spelling of the mode.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NestedByMetadata => "nestedByMetadata",
            Self::AggregatedYaml => "aggregatedYAML",
            Self::None => "none",
        }
    }
}

/// A path that cannot be used in a state store.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// The path contains a `..` segment (it could leave its directory).
    #[error("path {path:?} contains a '..' segment; state store paths may not leave their root")]
    ParentSegment {
        /// The path as given.
        path: String,
    },
    /// A relative path was expected but the path starts with `/`.
    #[error("path {path:?} is absolute; a path relative to the state store root is required")]
    Absolute {
        /// The path as given.
        path: String,
    },
    /// The path contains a NUL byte or a backslash, which are not portable across Git and buckets.
    #[error("path {path:?} contains a NUL byte or a backslash")]
    InvalidCharacter {
        /// The path as given.
        path: String,
    },
    /// A single path segment (Promise, pipeline, namespace, resource or group name) was empty
    /// or contained `/`, `.` or `..` alone.
    #[error("{what} {value:?} is not a valid single path segment")]
    InvalidSegment {
        /// Which input it was (e.g. "promise name").
        what: &'static str,
        /// The value given.
        value: String,
    },
    /// The path names the root itself where a file was expected.
    #[error("path {path:?} names the state store root, not a file")]
    EmptyFile {
        /// The path as given.
        path: String,
    },
    /// Unknown `filepath.mode`.
    #[error("unknown filepath.mode {mode:?}; expected nestedByMetadata, aggregatedYAML or none")]
    UnknownMode {
        /// The value given.
        mode: String,
    },
    /// A `.kratix` state file could not be parsed.
    #[error("state file is not a YAML mapping with a `files` list: {cause}")]
    StateFile {
        /// The parser's message.
        cause: String,
    },
}

/// Normalises a store-relative path: leading, trailing and repeated `/` are dropped, `.`
/// segments are dropped, so `""`, `.`, `/` and `//` all give `""` (the root).
///
/// Equivalent spellings give identical trees, and `.` or `/` is the state store root.
///
/// # Errors
/// [`PathError::ParentSegment`] for any `..` segment, [`PathError::InvalidCharacter`] for NUL
/// or `\`.
pub fn normalize_path(path: &str) -> Result<String, PathError> {
    plinth_api::paths::normalize(path).map_err(|problem| match problem {
        PathProblem::ParentSegment => PathError::ParentSegment {
            path: path.to_string(),
        },
        PathProblem::InvalidCharacter => PathError::InvalidCharacter {
            path: path.to_string(),
        },
    })
}

/// Joins a relative path under a root, refusing anything that could escape it.
///
/// `root` is normalised with [`normalize_path`] (a leading `/` is allowed there: it is the
/// store root spelled absolutely). `rel` must be relative: an absolute `rel` (leading `/`)
/// is refused, as is any `..` segment in either part. The result is normalised (`a//b/` →
/// `a/b`). The same rule applies to Git paths and bucket keys; Kratix silently skipped such
/// files, Plinth refuses them and names the path.
///
/// # Errors
/// [`PathError::Absolute`], [`PathError::ParentSegment`], [`PathError::InvalidCharacter`].
pub fn safe_join(root: &str, rel: &str) -> Result<String, PathError> {
    if rel.starts_with('/') {
        return Err(PathError::Absolute {
            path: rel.to_string(),
        });
    }
    let root = normalize_path(root)?;
    let rel = normalize_path(rel)?;
    Ok(join_normalized(&root, &rel))
}

/// [`safe_join`] for a path that must name a file (not the root itself).
///
/// # Errors
/// As [`safe_join`], plus [`PathError::EmptyFile`] when the result is the root.
pub fn safe_join_file(root: &str, rel: &str) -> Result<String, PathError> {
    let p = safe_join(root, rel)?;
    if p.is_empty() || normalize_path(rel)?.is_empty() {
        return Err(PathError::EmptyFile {
            path: rel.to_string(),
        });
    }
    Ok(p)
}

use plinth_api::paths::{PathProblem, join as join_normalized};

/// The effective root of a Destination inside the repository or bucket:
/// `<statestore.spec.path>/<destination.spec.path>`, normalised.
///
/// # Errors
/// As [`normalize_path`].
pub fn effective_root(store_path: &str, destination_path: &str) -> Result<String, PathError> {
    let s = normalize_path(store_path)?;
    let d = normalize_path(destination_path)?;
    Ok(join_normalized(&s, &d))
}

/// md5 hex of a workload group's directory — the workload group ID Kratix stores on a Work.
/// The default group's directory is `.`, giving `5058f1af…`.
pub fn workload_group_id(directory: &str) -> String {
    hex::encode(Md5::digest(directory.as_bytes()))
}

/// The ID of the default workload group (`md5(".")`), whose short form is `5058f`.
pub const DEFAULT_WORKLOAD_GROUP_ID: &str = "5058f1af8388633f609cadb75a75dc9d";

/// The `<id5>` directory segment: the first five characters of a workload group ID.
/// Shorter IDs are used whole.
pub fn short_id(workload_group_id: &str) -> &str {
    match workload_group_id.char_indices().nth(5) {
        Some((i, _)) => &workload_group_id[..i],
        None => workload_group_id,
    }
}

fn segment<'a>(what: &'static str, value: &'a str) -> Result<&'a str, PathError> {
    if value.is_empty()
        || value == "."
        || value == ".."
        || value.contains('/')
        || value.contains('\\')
        || value.contains('\0')
    {
        return Err(PathError::InvalidSegment {
            what,
            value: value.to_string(),
        });
    }
    Ok(value)
}

/// What a WorkPlacement was produced by: a Promise workflow (dependencies) or a resource
/// request's workflow. Determines its `nestedByMetadata` directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlacementSource {
    /// A Promise workflow's output, or the Promise's static dependencies (pipeline `""`).
    Dependency {
        /// Promise name.
        promise: String,
        /// Pipeline name; empty for static dependencies (`spec.dependencies`), whose segment
        /// Kratix omits.
        pipeline: String,
    },
    /// A resource request's workflow output.
    Resource {
        /// The WorkPlacement's namespace (= pipeline namespace; may differ from the resource
        /// request's namespace when `pipelineNamespace` is set).
        namespace: String,
        /// Promise name.
        promise: String,
        /// Resource request name.
        resource: String,
        /// Pipeline name.
        pipeline: String,
    },
}

/// The directory a `nestedByMetadata` WorkPlacement owns and replaces entirely:
/// * dependency: `<dest.path>/dependencies/<promise>/<pipeline>/<id5>`
/// * static dependency (empty pipeline): `<dest.path>/dependencies/<promise>/<id5>`
///   (`…/5058f` for the default group)
/// * resource: `<dest.path>/resources/<ns>/<promise>/<rr>/<pipeline>/<id5>`
///
/// Returned without a trailing `/`, relative to the state store prefix.
///
/// # Errors
/// [`PathError`] when the Destination path is invalid or a name is not a single segment.
pub fn nested_directory(
    destination_path: &str,
    source: &PlacementSource,
    workload_group_id: &str,
) -> Result<String, PathError> {
    let id5 = segment("workload group id", short_id(workload_group_id))?;
    let rel = match source {
        PlacementSource::Dependency { promise, pipeline } => {
            let promise = segment("promise name", promise)?;
            if pipeline.is_empty() {
                format!("dependencies/{promise}/{id5}")
            } else {
                let pipeline = segment("pipeline name", pipeline)?;
                format!("dependencies/{promise}/{pipeline}/{id5}")
            }
        }
        PlacementSource::Resource {
            namespace,
            promise,
            resource,
            pipeline,
        } => format!(
            "resources/{}/{}/{}/{}/{id5}",
            segment("namespace", namespace)?,
            segment("promise name", promise)?,
            segment("resource name", resource)?,
            segment("pipeline name", pipeline)?,
        ),
    };
    safe_join(destination_path, &rel)
}

/// The resource request whose `nestedByMetadata` directory holds `rel`, a file path
/// relative to the Destination's directory: `resources/<ns>/<promise>/<rr>/<pipeline>/<id5>/<file…>`
/// gives [`PlacementSource::Resource`] (the inverse of [`nested_directory`]). `None` for
/// any other path (dependencies, canaries, files of the `none` and aggregated modes).
pub fn resource_of_file(rel: &str) -> Option<PlacementSource> {
    let segs: Vec<&str> = rel.trim_start_matches('/').split('/').collect();
    match segs.as_slice() {
        [
            "resources",
            namespace,
            promise,
            resource,
            pipeline,
            _id5,
            _file,
            ..,
        ] if [namespace, promise, resource, pipeline]
            .iter()
            .all(|s| !s.is_empty()) =>
        {
            Some(PlacementSource::Resource {
                namespace: namespace.to_string(),
                promise: promise.to_string(),
                resource: resource.to_string(),
                pipeline: pipeline.to_string(),
            })
        }
        _ => None,
    }
}

/// The path of a static-dependency file: `<dest.path>/dependencies/<promise>/5058f/static/<promise>-dependencies.yaml`.
/// The static-dependency Work's single workload is named
/// `static/<promise>-dependencies.yaml` inside the default group's directory.
///
/// # Errors
/// As [`nested_directory`].
pub fn static_dependency_file(destination_path: &str, promise: &str) -> Result<String, PathError> {
    let dir = nested_directory(
        destination_path,
        &PlacementSource::Dependency {
            promise: promise.to_string(),
            pipeline: String::new(),
        },
        DEFAULT_WORKLOAD_GROUP_ID,
    )?;
    Ok(format!("{dir}/static/{promise}-dependencies.yaml"))
}

/// Where a workload goes in `none` mode: `<dest.path>/<filepath>`.
///
/// # Errors
/// As [`safe_join_file`].
pub fn none_file_path(destination_path: &str, filepath: &str) -> Result<String, PathError> {
    safe_join_file(destination_path, filepath)
}

/// The `none`-mode state file of a WorkPlacement: `<dest.path>/.kratix/<wp namespace>-<wp name>.yaml`.
///
/// # Errors
/// As [`safe_join`]; namespace and name must be single segments.
pub fn none_state_file_path(
    destination_path: &str,
    wp_namespace: &str,
    wp_name: &str,
) -> Result<String, PathError> {
    let ns = segment("WorkPlacement namespace", wp_namespace)?;
    let name = segment("WorkPlacement name", wp_name)?;
    safe_join(destination_path, &format!(".kratix/{ns}-{name}.yaml"))
}

/// Bytes of a `none`-mode state file listing the files a WorkPlacement wrote (paths relative
/// to the store prefix, i.e. `<dest.path>/<filepath>`). Shape as Kratix writes it with
/// `sigs.k8s.io/yaml`: `files:\n- a\n- b\n`, or `files: []\n` when empty.
pub fn none_state_file_content(files: &[String]) -> Vec<u8> {
    if files.is_empty() {
        return b"files: []\n".to_vec();
    }
    let mut out = String::from("files:\n");
    for f in files {
        out.push_str("- ");
        out.push_str(&yaml_scalar(f));
        out.push('\n');
    }
    out.into_bytes()
}

/// Parses a `none`-mode state file (`files: [...]`), returning the listed paths.
///
/// # Errors
/// [`PathError::StateFile`] when the YAML is not a mapping with a `files` string list.
pub fn parse_none_state_file(bytes: &[u8]) -> Result<Vec<String>, PathError> {
    #[derive(serde::Deserialize)]
    struct StateFile {
        #[serde(default)]
        files: Option<Vec<String>>,
    }
    let text = std::str::from_utf8(bytes).map_err(|e| PathError::StateFile {
        cause: e.to_string(),
    })?;
    if text.trim().is_empty() {
        return Ok(Vec::new());
    }
    let parsed: StateFile = serde_saphyr::from_str(text).map_err(|e| PathError::StateFile {
        cause: e.to_string(),
    })?;
    Ok(parsed.files.unwrap_or_default())
}

/// The ops of a `none`-mode WorkPlacement write: every workload at
/// `<dest.path>/<filepath>`, the state file `<dest.path>/.kratix/<ns>-<name>.yaml` listing
/// them, and a delete for each file the previous state file listed that is no longer written
/// (so only files this WorkPlacement wrote are ever deleted). `workloads` is
/// `(filepath, content)`; `previous_state` is the current state file, if any.
///
/// # Errors
/// [`PathError`] for an unsafe workload path, destination path or name, or a state file that
/// does not parse or lists an unsafe path.
pub fn none_mode_write_ops(
    destination_path: &str,
    wp_namespace: &str,
    wp_name: &str,
    workloads: &[(String, Vec<u8>)],
    previous_state: Option<&[u8]>,
) -> Result<Vec<crate::WriteOp>, PathError> {
    let mut ops = Vec::with_capacity(workloads.len() + 2);
    let mut written = Vec::with_capacity(workloads.len());
    for (filepath, content) in workloads {
        let path = none_file_path(destination_path, filepath)?;
        written.push(path.clone());
        ops.push(crate::WriteOp::Put {
            path,
            content: content.clone(),
        });
    }
    if let Some(prev) = previous_state {
        for old in parse_none_state_file(prev)? {
            let old = safe_join_file("", &old)?;
            if !written.contains(&old) {
                ops.push(crate::WriteOp::Delete { path: old });
            }
        }
    }
    ops.push(crate::WriteOp::Put {
        path: none_state_file_path(destination_path, wp_namespace, wp_name)?,
        content: none_state_file_content(&written),
    });
    Ok(ops)
}

/// The ops of a `none`-mode WorkPlacement deletion: delete every file the
/// state file lists, then the state file itself.
///
/// # Errors
/// As [`none_mode_write_ops`].
pub fn none_mode_delete_ops(
    destination_path: &str,
    wp_namespace: &str,
    wp_name: &str,
    state: &[u8],
) -> Result<Vec<crate::WriteOp>, PathError> {
    let mut ops = Vec::new();
    for f in parse_none_state_file(state)? {
        ops.push(crate::WriteOp::Delete {
            path: safe_join_file("", &f)?,
        });
    }
    ops.push(crate::WriteOp::Delete {
        path: none_state_file_path(destination_path, wp_namespace, wp_name)?,
    });
    Ok(ops)
}

/// A plain YAML scalar when safe, else a double-quoted (JSON-compatible) one.
fn yaml_scalar(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '/' | '_' | '-'))
        && !s.starts_with('-')
        && !matches!(
            s.to_ascii_lowercase().as_str(),
            "true" | "false" | "null" | "yes" | "no" | "on" | "off" | "~"
        )
        && s.parse::<f64>().is_err();
    if plain {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The default `filepath.filename` for `aggregatedYAML`.
pub const DEFAULT_AGGREGATED_FILENAME: &str = "aggregated.yaml";

/// Where an `aggregatedYAML` Destination's single file lives: `<dest.path>/<filename>`, with
/// an empty filename meaning `aggregated.yaml`.
///
/// # Errors
/// As [`safe_join_file`].
pub fn aggregated_file_path(destination_path: &str, filename: &str) -> Result<String, PathError> {
    let name = if filename.is_empty() {
        DEFAULT_AGGREGATED_FILENAME
    } else {
        filename
    };
    safe_join_file(destination_path, name)
}

/// The content of an `aggregatedYAML` file: the documents of every WorkPlacement, WorkPlacements
/// sorted by name, each WorkPlacement's workloads in their given order, all joined with
/// `"\n---\n"`. `placements` is `(WorkPlacement name, workload contents)`.
/// Returns `None` when there is nothing to aggregate (the file should then be deleted).
pub fn aggregate_documents(placements: &[(String, Vec<Vec<u8>>)]) -> Option<Vec<u8>> {
    let mut sorted: Vec<&(String, Vec<Vec<u8>>)> = placements.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let docs: Vec<&[u8]> = sorted
        .iter()
        .flat_map(|(_, docs)| docs.iter().map(Vec::as_slice))
        .collect();
    if docs.is_empty() {
        return None;
    }
    Some(docs.join(&b"\n---\n"[..]))
}

/// Name used in commit messages for canary writes.
pub const CANARY_WRITER_NAME: &str = "kratix-canary";

/// File name of the canary Namespace document.
pub const CANARY_NAMESPACE_FILE: &str = "kratix-canary-namespace.yaml";
/// File name of the canary ConfigMap document.
pub const CANARY_CONFIGMAP_FILE: &str = "kratix-canary-configmap.yaml";

/// The canary Namespace document exactly as Kratix writes it (116 bytes; `sigs.k8s.io/yaml`
/// marshalling of a `v1.Namespace` named `kratix-worker-system`).
pub const CANARY_NAMESPACE_YAML: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  creationTimestamp: null\n  name: kratix-worker-system\nspec: {}\nstatus: {}\n";

/// The canary ConfigMap document exactly as Kratix writes it (207 bytes; ConfigMap
/// `kratix-worker-system/kratix-info` with `data.canary` "this confirms your infrastructure is
/// reading from Kratix state stores").
pub const CANARY_CONFIGMAP_YAML: &str = "apiVersion: v1\ndata:\n  canary: this confirms your infrastructure is reading from Kratix state stores\nkind: ConfigMap\nmetadata:\n  creationTimestamp: null\n  name: kratix-info\n  namespace: kratix-worker-system\n";

/// The canary files of a Destination: `(path relative to the store prefix, content)`.
///
/// * `nestedByMetadata`: `<dest.path>/dependencies/kratix-canary-namespace.yaml` and
///   `<dest.path>/resources/kratix-canary-configmap.yaml`
/// * `none` / `aggregatedYAML`: both at `<dest.path>/`
///
/// The canary files Kratix writes, byte for byte.
///
/// # Errors
/// As [`safe_join`].
pub fn canary_files(
    destination_path: &str,
    mode: FilepathMode,
) -> Result<Vec<(String, Vec<u8>)>, PathError> {
    let (ns_rel, cm_rel) = match mode {
        FilepathMode::NestedByMetadata => (
            format!("dependencies/{CANARY_NAMESPACE_FILE}"),
            format!("resources/{CANARY_CONFIGMAP_FILE}"),
        ),
        FilepathMode::None | FilepathMode::AggregatedYaml => (
            CANARY_NAMESPACE_FILE.to_string(),
            CANARY_CONFIGMAP_FILE.to_string(),
        ),
    };
    Ok(vec![
        (
            safe_join(destination_path, &ns_rel)?,
            CANARY_NAMESPACE_YAML.as_bytes().to_vec(),
        ),
        (
            safe_join(destination_path, &cm_rel)?,
            CANARY_CONFIGMAP_YAML.as_bytes().to_vec(),
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalisation_b15() {
        for (input, want) in [
            ("", ""),
            (".", ""),
            ("/", ""),
            ("//", ""),
            ("/dev", "dev"),
            ("platform/", "platform"),
            ("//platform//", "platform"),
            ("a//b/./c/", "a/b/c"),
        ] {
            assert_eq!(normalize_path(input).unwrap(), want, "input {input:?}");
        }
        assert!(matches!(
            normalize_path("a/../b"),
            Err(PathError::ParentSegment { .. })
        ));
        // Equivalent spellings of store path + destination path give one root.
        let roots: Vec<String> = [("/", "/dev"), ("", "dev"), ("//", "dev/"), (".", "./dev")]
            .iter()
            .map(|(s, d)| effective_root(s, d).unwrap())
            .collect();
        assert!(roots.iter().all(|r| r == "dev"), "{roots:?}");
        assert_eq!(
            safe_join(&effective_root("/", "/dev").unwrap(), "namespace.yaml").unwrap(),
            "dev/namespace.yaml"
        );
    }

    #[test]
    fn safe_join_refuses_escapes() {
        assert_eq!(safe_join("dest", "a/b.yaml").unwrap(), "dest/a/b.yaml");
        assert_eq!(safe_join("/", "a.yaml").unwrap(), "a.yaml");
        assert_eq!(safe_join("", "./x//y").unwrap(), "x/y");
        let e = safe_join("dest", "../other/x.yaml").unwrap_err();
        assert_eq!(
            e,
            PathError::ParentSegment {
                path: "../other/x.yaml".into()
            }
        );
        assert!(e.to_string().contains("../other/x.yaml"));
        assert!(matches!(
            safe_join("dest", "/etc/passwd"),
            Err(PathError::Absolute { .. })
        ));
        assert!(matches!(
            safe_join("dest", "a/..//../b"),
            Err(PathError::ParentSegment { .. })
        ));
        assert!(matches!(
            safe_join("../dest", "a"),
            Err(PathError::ParentSegment { .. })
        ));
        assert!(matches!(
            safe_join("dest", "a\\..\\b"),
            Err(PathError::InvalidCharacter { .. })
        ));
        assert!(matches!(
            safe_join_file("dest", "./"),
            Err(PathError::EmptyFile { .. })
        ));
        // `..` inside a name is fine, only a whole segment is a parent reference.
        assert_eq!(safe_join("d", "a..b/..c").unwrap(), "d/a..b/..c");
    }

    #[test]
    fn the_request_of_a_file_is_read_back_from_its_directory() {
        let src = PlacementSource::Resource {
            namespace: "default".into(),
            promise: "app".into(),
            resource: "app-a".into(),
            pipeline: "compose".into(),
        };
        let dir = nested_directory("/", &src, DEFAULT_WORKLOAD_GROUP_ID).unwrap();
        assert_eq!(
            resource_of_file(&format!("{dir}/db.yaml")),
            Some(src.clone())
        );
        assert_eq!(resource_of_file(&format!("{dir}/sub/db.yaml")), Some(src));
        assert_eq!(resource_of_file(&dir), None, "a directory, not a file");
        assert_eq!(
            resource_of_file("resources/kratix-canary-configmap.yaml"),
            None
        );
        assert_eq!(
            resource_of_file("dependencies/app/compose/5058f/ns.yaml"),
            None
        );
    }

    #[test]
    fn nested_directories_b20() {
        let dep = PlacementSource::Dependency {
            promise: "redis".into(),
            pipeline: "install".into(),
        };
        let gid = workload_group_id(".");
        assert_eq!(gid, DEFAULT_WORKLOAD_GROUP_ID);
        assert_eq!(short_id(&gid), "5058f");
        assert_eq!(
            nested_directory("worker-1", &dep, &gid).unwrap(),
            "worker-1/dependencies/redis/install/5058f"
        );
        assert_eq!(
            nested_directory("/", &dep, &gid).unwrap(),
            "dependencies/redis/install/5058f"
        );
        let p1 = PlacementSource::Resource {
            namespace: "team-a".into(),
            promise: "widget".into(),
            resource: "r1".into(),
            pipeline: "p1".into(),
        };
        let res = |resource: &str, pipeline: &str| PlacementSource::Resource {
            namespace: "team-a".into(),
            promise: "widget".into(),
            resource: resource.into(),
            pipeline: pipeline.into(),
        };
        let p2 = res("r1", "p2");
        let d1 = nested_directory("dev", &p1, &gid).unwrap();
        let d2 = nested_directory("dev", &p2, &gid).unwrap();
        assert_eq!(d1, "dev/resources/team-a/widget/r1/p1/5058f");
        assert_ne!(d1, d2);
        let other_group = workload_group_id("eu");
        assert_ne!(
            nested_directory("dev", &p1, &other_group).unwrap(),
            d1,
            "separate workload groups get separate directories"
        );
        assert_eq!(
            static_dependency_file("dev", "redis").unwrap(),
            "dev/dependencies/redis/5058f/static/redis-dependencies.yaml"
        );
        let bad = res("..", "p1");
        assert!(matches!(
            nested_directory("dev", &bad, &gid),
            Err(PathError::InvalidSegment {
                what: "resource name",
                ..
            })
        ));
    }

    #[test]
    fn none_mode_files() {
        assert_eq!(
            none_state_file_path("worker-2", "default", "wp-1").unwrap(),
            "worker-2/.kratix/default-wp-1.yaml"
        );
        assert_eq!(
            none_file_path("/worker-2/", "ns/a.yaml").unwrap(),
            "worker-2/ns/a.yaml"
        );
        let files = vec![
            "worker-2/a.yaml".to_string(),
            "worker-2/weird: name.yaml".to_string(),
        ];
        let bytes = none_state_file_content(&files);
        assert_eq!(
            String::from_utf8(bytes.clone()).unwrap(),
            "files:\n- worker-2/a.yaml\n- \"worker-2/weird: name.yaml\"\n"
        );
        assert_eq!(parse_none_state_file(&bytes).unwrap(), files);
        assert_eq!(none_state_file_content(&[]), b"files: []\n");
        assert!(parse_none_state_file(b"files: []\n").unwrap().is_empty());
        assert!(parse_none_state_file(b"files: [a").is_err());
    }

    #[test]
    fn none_mode_plans() {
        use crate::WriteOp;
        let first = none_mode_write_ops(
            "w2",
            "default",
            "wp",
            &[
                ("a.yaml".into(), b"a".to_vec()),
                ("b.yaml".into(), b"b".to_vec()),
            ],
            None,
        )
        .unwrap();
        assert_eq!(first.len(), 3);
        let WriteOp::Put { path, content } = &first[2] else {
            panic!("{first:?}")
        };
        assert_eq!(path, "w2/.kratix/default-wp.yaml");
        let second = none_mode_write_ops(
            "w2",
            "default",
            "wp",
            &[("b.yaml".into(), b"b2".to_vec())],
            Some(content),
        )
        .unwrap();
        assert_eq!(
            second,
            vec![
                WriteOp::Put {
                    path: "w2/b.yaml".into(),
                    content: b"b2".to_vec()
                },
                WriteOp::Delete {
                    path: "w2/a.yaml".into()
                },
                WriteOp::Put {
                    path: "w2/.kratix/default-wp.yaml".into(),
                    content: b"files:\n- w2/b.yaml\n".to_vec()
                },
            ]
        );
        let del = none_mode_delete_ops("w2", "default", "wp", b"files:\n- w2/b.yaml\n").unwrap();
        assert_eq!(
            del,
            vec![
                WriteOp::Delete {
                    path: "w2/b.yaml".into()
                },
                WriteOp::Delete {
                    path: "w2/.kratix/default-wp.yaml".into()
                },
            ]
        );
        // A tampered state file cannot make the writer delete outside the store.
        assert!(none_mode_delete_ops("w2", "default", "wp", b"files:\n- ../../x\n").is_err());
    }

    #[test]
    fn aggregated() {
        assert_eq!(
            aggregated_file_path("agg", "").unwrap(),
            "agg/aggregated.yaml"
        );
        assert_eq!(
            aggregated_file_path("agg", "catalog.yaml").unwrap(),
            "agg/catalog.yaml"
        );
        let out = aggregate_documents(&[
            ("wp-b".into(), vec![b"kind: B".to_vec()]),
            (
                "wp-a".into(),
                vec![b"kind: A1".to_vec(), b"kind: A2".to_vec()],
            ),
        ])
        .unwrap();
        assert_eq!(out, b"kind: A1\n---\nkind: A2\n---\nkind: B");
        assert_eq!(aggregate_documents(&[]), None);
    }

    #[test]
    fn canaries_b22() {
        assert_eq!(CANARY_NAMESPACE_YAML.len(), 116);
        assert_eq!(CANARY_CONFIGMAP_YAML.len(), 207);
        let nested = canary_files("worker-1", FilepathMode::NestedByMetadata).unwrap();
        assert_eq!(
            nested.iter().map(|f| f.0.as_str()).collect::<Vec<_>>(),
            [
                "worker-1/dependencies/kratix-canary-namespace.yaml",
                "worker-1/resources/kratix-canary-configmap.yaml"
            ]
        );
        let flat = canary_files("worker-2", FilepathMode::None).unwrap();
        assert_eq!(
            flat.iter().map(|f| f.0.as_str()).collect::<Vec<_>>(),
            [
                "worker-2/kratix-canary-namespace.yaml",
                "worker-2/kratix-canary-configmap.yaml"
            ]
        );
        assert_eq!(
            canary_files(".", FilepathMode::AggregatedYaml).unwrap()[0].0,
            "kratix-canary-namespace.yaml"
        );
        assert_eq!(
            FilepathMode::parse("").unwrap(),
            FilepathMode::NestedByMetadata
        );
        assert_eq!(
            FilepathMode::parse("aggregatedYAML").unwrap().as_str(),
            "aggregatedYAML"
        );
        assert!(FilepathMode::parse("flat").is_err());
    }
}
