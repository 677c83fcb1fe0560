//! Errors: the crate's `Error` (start-up, storage, TLS) and `ApiError`, an HTTP answer
//! rendered as a Kubernetes `Status` object (API convention: `kind: Status`,
//! `status: Failure`, `reason`, `code`, `details{name, group, kind, causes}`).

use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::resource::{Cause, ResourceInfo};
use crate::store::StoreError;

/// Errors of the API server's own operations (start-up, storage, TLS, tokens).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Filesystem access in the data directory failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: std::path::PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The SQLite store failed.
    #[error("storage: {0}")]
    Store(#[from] StoreError),
    /// Generating or loading TLS material failed.
    #[error("tls: {0}")]
    Tls(String),
    /// Binding the HTTPS listener failed.
    #[error("listening on {addr}: {source}")]
    Listen {
        /// The address.
        addr: std::net::SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A stored object could not be used (e.g. a stored CRD that no longer parses).
    #[error("{0}")]
    Invalid(String),
}

impl Error {
    pub(crate) fn io(path: impl Into<std::path::PathBuf>, source: std::io::Error) -> Error {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

/// An API error answered as a Kubernetes `Status`.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// `StatusReason`, e.g. `NotFound`, `AlreadyExists`, `Conflict`, `Invalid`, `BadRequest`.
    pub reason: &'static str,
    /// Human message.
    pub message: String,
    /// `details` (name, group, kind, causes), if any.
    pub details: Option<Value>,
}

impl ApiError {
    /// An error with no details.
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "BadRequest", message)
    }

    /// 404 NotFound for `<plural>.<group> "<name>"`.
    pub fn not_found(group: &str, plural: &str, name: &str) -> ApiError {
        let gr = if group.is_empty() {
            plural.to_string()
        } else {
            format!("{plural}.{group}")
        };
        ApiError {
            code: 404,
            reason: "NotFound",
            message: format!("{gr} \"{name}\" not found"),
            details: Some(json!({"name": name, "group": group, "kind": plural})),
        }
    }

    /// 409 AlreadyExists.
    pub fn already_exists(info: &ResourceInfo, name: &str) -> ApiError {
        ApiError {
            code: 409,
            reason: "AlreadyExists",
            message: format!("{} \"{name}\" already exists", group_resource(info)),
            details: Some(json!({"name": name, "group": info.group, "kind": info.plural})),
        }
    }

    /// 409 Conflict on a stale resourceVersion.
    pub fn conflict(info: &ResourceInfo, name: &str, why: &str) -> ApiError {
        ApiError {
            code: 409,
            reason: "Conflict",
            message: format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                group_resource(info)
            ),
            details: Some(json!({"name": name, "group": info.group, "kind": info.plural})),
        }
    }

    /// 422 Invalid with field causes.
    pub fn invalid(info: &ResourceInfo, name: &str, causes: Vec<Cause>) -> ApiError {
        ApiError {
            code: 422,
            reason: "Invalid",
            message: crate::admission::invalid_message(&info.group, &info.kind, name, &causes),
            details: Some(json!({
                "name": name, "group": info.group, "kind": info.kind,
                "causes": causes.iter().map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field})).collect::<Vec<_>>(),
            })),
        }
    }

    /// 500 InternalError.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(500, "InternalError", message)
    }

    /// The `Status` object.
    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s
    }
}

/// `plural` or `plural.group`, as Kubernetes names a resource in messages.
pub fn group_resource(info: &ResourceInfo) -> String {
    if info.group.is_empty() {
        info.plural.clone()
    } else {
        format!("{}.{}", info.plural, info.group)
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        ApiError::internal(e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let code = http::StatusCode::from_u16(self.code)
            .unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
        let body = serde_json::to_vec(&self.to_status()).unwrap_or_default();
        (
            code,
            [(http::header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response()
    }
}
