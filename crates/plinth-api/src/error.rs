//! Error type of `plinth-api`.

/// Errors from parsing or transforming Kratix objects.
///
/// Every message names the object or field concerned and the cause.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// A pipeline entry in `spec.workflows` is not a `platform.kratix.io/v1alpha1` `Pipeline`
    /// or carries fields Kratix does not know ("unsupported pipeline").
    #[error("unsupported pipeline at {location}: {reason}")]
    UnsupportedPipeline {
        /// Where the entry sits, e.g. `spec.workflows.resource.configure[0]`.
        location: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A Promise's `spec.api` (or another CRD document) is not a usable CustomResourceDefinition.
    #[error("invalid API CRD: field {field}: {reason}")]
    InvalidApi {
        /// JSON path of the offending field, e.g. `spec.api.spec.versions`.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A value failed to (de)serialise as the expected type.
    #[error("{context}: {source}")]
    Json {
        /// What was being converted.
        context: String,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },
}

/// An error and its sources as one line, `a: b: c`, each source said once (an HTTP
/// client's own message leaves out the transport's reason, e.g. "connection refused").
///
/// ```
/// let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
/// let outer = std::io::Error::other(io);
/// assert_eq!(plinth_api::cause_chain(&outer), "connection refused");
/// ```
pub fn cause_chain(e: &dyn std::error::Error) -> String {
    let mut parts = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = s.source();
    }
    parts.join(": ")
}
