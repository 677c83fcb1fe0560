//! The runner's error type.

use std::path::PathBuf;

/// Errors of the Job runner. Messages name the object, the field and the cause.
///
/// Failures of a container (non-zero exit, missing image, bad env reference) are not
/// errors: they become Pod and Job status (Kubernetes convention). These variants are
/// for the runner's own infrastructure: the data directory, the API, the configuration.
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// A file system operation on the runner's data directory failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done ("create directory", "write file", ...).
        action: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A request to the Kubernetes API failed.
    #[error("{context}: {source}")]
    Kube {
        /// What was requested, naming the object.
        context: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// The image map file (`RunnerConfig.image_map`) could not be read or parsed.
    #[error("image map {path}: {message}")]
    ImageMap {
        /// The image map file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// A Pod or Job spec asks for something the runner cannot do.
    #[error("{object}: field {field}: {message}")]
    InvalidSpec {
        /// `<kind> <namespace>/<name>` of the object.
        object: String,
        /// The JSON path of the offending field.
        field: String,
        /// The cause.
        message: String,
    },
    /// The runner configuration is unusable (for example `SandboxMode::Bwrap` without `bwrap`).
    #[error("runner configuration: {0}")]
    Config(String),
}

impl RunnerError {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        RunnerError::Io {
            action,
            path: path.into(),
            source,
        }
    }

    pub(crate) fn kube(context: impl Into<String>, source: kube::Error) -> Self {
        RunnerError::Kube {
            context: context.into(),
            source,
        }
    }
}

/// True if the API answered 404 Not Found (the object is gone).
pub(crate) fn not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.is_not_found())
}
