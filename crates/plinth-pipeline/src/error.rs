//! Error type of `plinth-pipeline`.

use std::path::PathBuf;

/// Errors of the pipeline adapter roles. Messages name the file, field or object and the
/// cause, because they end up in pipeline container logs that users read.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// A file or directory could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The path concerned.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A YAML file the pipeline wrote is not valid YAML.
    #[error("{path}: invalid YAML{}: {message}", location.map(|(l, c)| format!(" at line {l} column {c}")).unwrap_or_default())]
    InvalidYaml {
        /// The file (relative to the pipeline output or metadata directory where possible).
        path: PathBuf,
        /// 1-based line and column, when the parser reports them.
        location: Option<(u64, u64)>,
        /// The parser's message.
        message: String,
    },
    /// A metadata file (`destination-selectors.yaml`, `workflow-control.yaml`,
    /// `status.yaml`, promise-scheduling) breaks the contract.
    #[error("{file}: {reason}")]
    InvalidMetadata {
        /// File name.
        file: String,
        /// What is wrong.
        reason: String,
    },
    /// An output path leaves the output directory (`..`, absolute, or a symlink pointing
    /// outside) or is not a regular file.
    #[error("refusing output path {path}: {reason}")]
    UnsafePath {
        /// The offending path.
        path: PathBuf,
        /// Why it is refused.
        reason: String,
    },
    /// A directory named in destination-selectors.yaml does not exist in the output.
    #[error(
        "destination-selectors.yaml: directory {directory:?} does not exist in the pipeline output ({output})"
    )]
    MissingDirectory {
        /// The directory from destination-selectors.yaml.
        directory: String,
        /// The output directory searched.
        output: PathBuf,
    },
    /// A pipeline tried to write a status key Kratix owns.
    #[error("status.yaml: {0}")]
    ForbiddenStatus(String),
    /// A required environment variable or argument is missing or malformed.
    #[error("{0}")]
    Config(String),
    /// The Kubernetes API returned an error.
    #[error("{action}: {source}")]
    Kube {
        /// What was being done, naming the object.
        action: String,
        /// The client error.
        #[source]
        source: Box<kube::Error>,
    },
    /// More than one Work matches the labels of this pipeline.
    #[error("{0}")]
    Ambiguous(String),
    /// The status write kept conflicting.
    #[error("{0}")]
    Conflict(String),
    /// The Work would exceed the API server's object size limit.
    #[error(
        "the Work for this pipeline would be {size} bytes after compression, over the limit of {limit} bytes; largest files: {largest}"
    )]
    WorkTooLarge {
        /// Serialised size of the Work spec in bytes.
        size: usize,
        /// The limit in bytes.
        limit: usize,
        /// The largest workloads (`path (compressed bytes)`), largest first.
        largest: String,
    },
    /// JSON (de)serialisation failed.
    #[error("{context}: {source}")]
    Json {
        /// What was being converted.
        context: String,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },
}

impl From<plinth_api::contract::MissingVariable> for PipelineError {
    fn from(e: plinth_api::contract::MissingVariable) -> Self {
        PipelineError::Config(e.to_string())
    }
}

impl PipelineError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        PipelineError::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn kube(action: impl Into<String>, source: kube::Error) -> Self {
        PipelineError::Kube {
            action: action.into(),
            source: Box::new(source),
        }
    }

    pub(crate) fn metadata(file: &str, reason: impl Into<String>) -> Self {
        PipelineError::InvalidMetadata {
            file: file.to_string(),
            reason: reason.into(),
        }
    }
}
