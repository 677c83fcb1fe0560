//! The crate's error type.

/// Why a state store operation failed. Messages name the store (URL or bucket, with any
/// credentials removed), the field at fault and the cause, so that they can go straight into a
/// `NotReady` condition or a `WriteSucceeded=False` message.
///
/// Cloneable because one failed Git batch reports the same error to every request in it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// A path in a write, read or list would leave the state store root (`..`, absolute path).
    /// Nothing of the request was written. (Kratix silently skipped such files.)
    #[error("path {path:?} is not allowed in a state store: {cause}")]
    PathEscapes {
        /// The offending path as given.
        path: String,
        /// Why it was refused.
        cause: String,
    },
    /// The configuration is unusable (bad URL, missing key, conflicting options).
    #[error("invalid state store configuration: {field}: {cause}")]
    InvalidConfig {
        /// The field at fault (e.g. `url`, `sshPrivateKey`, `work_dir`).
        field: String,
        /// What is wrong with it.
        cause: String,
    },
    /// The endpoint could not be reached (connection refused, DNS failure, timeout).
    #[error("cannot reach {target}: {cause}")]
    Unreachable {
        /// URL or endpoint, without credentials.
        target: String,
        /// The transport's message.
        cause: String,
    },
    /// The server refused the credentials.
    #[error("authentication to {target} failed: {cause}")]
    AuthFailed {
        /// URL or endpoint, without credentials.
        target: String,
        /// The transport's message.
        cause: String,
    },
    /// The credentials were accepted but may not write.
    #[error("permission denied writing to {target}: {cause}")]
    PermissionDenied {
        /// URL or bucket.
        target: String,
        /// The server's message.
        cause: String,
    },
    /// `passphrase` does not decrypt `sshPrivateKey` (detected locally before connecting).
    #[error(
        "wrong passphrase for sshPrivateKey: the Secret's `passphrase` does not decrypt the key"
    )]
    WrongPassphrase,
    /// `sshPrivateKey` is encrypted and no passphrase was given.
    #[error(
        "sshPrivateKey is passphrase-protected but no passphrase was given (add the Secret key `passphrase`)"
    )]
    PassphraseRequired,
    /// `privateKey` of a `githubApp` Secret is not a PEM RSA private key that can sign a JWT
    /// (checked locally, before any connection).
    #[error("privateKey is not a valid PEM RSA key: {cause}")]
    InvalidGithubAppKey {
        /// The PEM/RSA decoder's message (never the key itself).
        cause: String,
    },
    /// GitHub refused to issue an installation token for the App (wrong key or App ID:
    /// HTTP 401 with GitHub's message; unknown installation: HTTP 404), or answered without
    /// one.
    #[error("GitHub App authentication failed: {message}")]
    GithubAppAuthFailed {
        /// GitHub's `message` for a 401, else the URL, status and message.
        message: String,
    },
    /// `knownHosts` has no entry for the server's host and port.
    #[error("host key for {host} not in knownHosts")]
    UnknownHostKey {
        /// `host:port` as connected to.
        host: String,
    },
    /// `knownHosts` has entries for the host but none matches the presented key.
    #[error(
        "host key for {host} does not match knownHosts (server presented {key_type} key {fingerprint}); refusing to connect"
    )]
    HostKeyMismatch {
        /// `host:port` as connected to.
        host: String,
        /// The presented key's type.
        key_type: String,
        /// SHA256 fingerprint of the presented key (OpenSSH style).
        fingerprint: String,
    },
    /// `knownHosts` could not be used.
    #[error("knownHosts is unusable: {cause}")]
    InvalidKnownHosts {
        /// What is wrong.
        cause: String,
    },
    /// The server's TLS certificate was rejected.
    #[error("TLS certificate of {target} rejected: {cause}")]
    Tls {
        /// URL without credentials.
        target: String,
        /// The TLS library's message.
        cause: String,
    },
    /// The repository does not exist at the URL.
    #[error("repository {url} does not exist or is not exported: {cause}")]
    RepositoryMissing {
        /// URL without credentials.
        url: String,
        /// The server's message.
        cause: String,
    },
    /// The branch does not exist in the repository.
    #[error(
        "branch {branch:?} does not exist in {url}; create it (with at least one commit) first"
    )]
    BranchMissing {
        /// URL without credentials.
        url: String,
        /// The branch asked for.
        branch: String,
    },
    /// Pushing kept being rejected (someone else pushing constantly, or a server hook refusing).
    #[error("push to {url} branch {branch:?} rejected {attempts} times: {cause}")]
    PushRejected {
        /// URL without credentials.
        url: String,
        /// Branch.
        branch: String,
        /// How many attempts were made.
        attempts: u32,
        /// The last rejection message.
        cause: String,
    },
    /// The bucket does not exist.
    #[error("bucket {bucket:?} does not exist at {endpoint}")]
    BucketMissing {
        /// Bucket name.
        bucket: String,
        /// Endpoint as configured.
        endpoint: String,
    },
    /// Any other Git failure.
    #[error("git operation {op} on {url} failed: {cause}")]
    Git {
        /// What was being done (fetch, push, commit …).
        op: String,
        /// URL without credentials.
        url: String,
        /// libgit2's message.
        cause: String,
    },
    /// Any other object-storage failure.
    #[error("bucket operation {op} on {target} failed: {cause}")]
    Bucket {
        /// What was being done (put, list, delete …).
        op: String,
        /// Bucket/endpoint or local directory.
        target: String,
        /// The client's message.
        cause: String,
    },
    /// Local filesystem failure (work directory, local store).
    #[error("local I/O on {path} failed: {cause}")]
    Io {
        /// The path involved.
        path: String,
        /// The OS message.
        cause: String,
    },
    /// The writer's worker is gone (it panicked or the runtime is shutting down).
    #[error("the state store writer for {target} has stopped")]
    WriterStopped {
        /// URL/branch or bucket.
        target: String,
    },
}

/// Removes what changes between two identical failures from a transport's message:
/// object_store's retry summary ("Error after 3 retries in 526ms, max_retries:3,
/// retry_timeout:30s, source:…" becomes "…"), and any remaining elapsed durations
/// (" in 1.2s", " after 526ms"). A status message built from the result is the same for
/// the same situation, so an unchanged failure is not written again.
pub fn stable_message(msg: &str) -> String {
    static RETRY: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    static ELAPSED: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let retry = RETRY.get_or_init(|| {
        regex::Regex::new(
            r"(?i)error after \d+ retr(?:y|ies)(?: in [0-9.]+[a-zµ]+)?(?:, max_retries: ?\d+)?(?:, retry_timeout: ?[0-9.]+[a-zµ]+)?, source: ?",
        )
        .expect("valid regex")
    });
    let elapsed = ELAPSED.get_or_init(|| {
        regex::Regex::new(r"(?i) (?:in|after) [0-9]+(?:\.[0-9]+)?(?:ns|µs|us|ms|s|m|h)\b")
            .expect("valid regex")
    });
    let once = retry.replace_all(msg, "");
    elapsed.replace_all(&once, "").into_owned()
}

#[cfg(test)]
mod stable_message_tests {
    use super::stable_message;

    #[test]
    fn retry_timings_are_removed() {
        let a = "list: Generic S3 error: Error after 3 retries in 526ms, max_retries:3, retry_timeout:30s, source:error sending request for url (http://127.0.0.1:1/b): connection refused";
        let b = "list: Generic S3 error: Error after 3 retries in 1.204s, max_retries:3, retry_timeout:30s, source:error sending request for url (http://127.0.0.1:1/b): connection refused";
        assert_eq!(stable_message(a), stable_message(b));
        assert_eq!(
            stable_message(a),
            "list: Generic S3 error: error sending request for url (http://127.0.0.1:1/b): connection refused"
        );
        assert_eq!(stable_message("timed out in 10s"), "timed out");
        assert_eq!(stable_message("nothing volatile"), "nothing volatile");
    }
}

/// The HTTP status an error's text names where libgit2 or object_store put one
/// ("unexpected http status code: 404", "Server returned non-2xx status code: 501 Not
/// Implemented"). Digits elsewhere in the text (a port, a host name, a path) are not a
/// status; `lower` is the lower-cased text.
pub(crate) fn named_http_status(lower: &str) -> Option<u16> {
    let (_, rest) = lower.split_once("status code")?;
    let digits: String = rest
        .trim_start_matches([':', ' '])
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::named_http_status;

    #[test]
    fn a_status_is_read_only_where_one_is_named() {
        let named = [
            ("unexpected http status code: 404", Some(404)),
            (
                "server returned non-2xx status code: 501 not implemented: x",
                Some(501),
            ),
            ("request failed with status code 403", Some(403)),
            ("failed to resolve address for team-401.invalid", None),
            ("failed to connect to 127.0.0.1 port 41401", None),
            ("status code: none", None),
        ];
        for (text, want) in named {
            assert_eq!(named_http_status(text), want, "{text}");
        }
    }
}
