//! Which answer of the API server a `kube::Error` is.

/// True if the error is the API's 409 Conflict (a stale resourceVersion).
pub fn is_conflict(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if s.is_conflict())
}

/// True if the error is the API's 404 Not Found.
pub fn is_not_found(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if s.is_not_found())
}

/// True if the error is the API's 409 AlreadyExists (a create of an existing name).
pub fn is_already_exists(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if s.is_already_exists())
}

/// True if the error is the API's 422 Invalid (admission refused the object).
pub fn is_invalid(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if s.is_invalid())
}

/// `Ok` for a success or a 404 (the object is already gone), as a deletion step wants.
///
/// # Errors
/// Any other API error, as the controllers' [`crate::Error`].
pub fn ignore_not_found<T>(r: Result<T, kube::Error>) -> Result<(), crate::Error> {
    match r {
        Ok(_) => Ok(()),
        Err(ref e) if is_not_found(e) => Ok(()),
        Err(e) => Err(e.into()),
    }
}
