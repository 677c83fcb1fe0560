//! The `--image` flags' values: container image references in the grammar registries and
//! container runtimes accept (`[registry[:port]/]path[:tag][@algorithm:hex]`, path
//! components in lower case), checked when the command starts, so a typo is an error
//! naming the flag rather than a Pod that never pulls.
//!
//! ```text
//! ghcr.io/plinth-dev/plinth:latest        accepted
//! localhost:5000/team/app@sha256:0123…    accepted
//! Ghcr.io/Plinth Dev                      refused: a space, upper case in the path
//! ```

/// Why a value is not an image reference.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ImageRefError {
    /// Empty, or whitespace or control characters in it.
    #[error("an image reference has no spaces or control characters and is not empty")]
    Blank,
    /// The registry host or port is malformed.
    #[error("registry {0:?} is not a host name with an optional :port")]
    Registry(String),
    /// A path component breaks the grammar.
    #[error(
        "path component {0:?}: lower-case letters and digits, separated by '.', '_', '__' or dashes"
    )]
    Component(String),
    /// The tag breaks the grammar.
    #[error("tag {0:?}: up to 128 letters, digits, '_', '.' and '-', not starting with '.' or '-'")]
    Tag(String),
    /// The digest is not `algorithm:hex`.
    #[error("digest {0:?}: expected algorithm:hex, e.g. sha256: and 64 hex digits")]
    Digest(String),
    /// Longer than registries accept.
    #[error("the name is {0} characters long; at most 255")]
    TooLong(usize),
}

/// `value` if it is an image reference (a clap `value_parser` for every image flag).
///
/// # Errors
/// An [`ImageRefError`] naming the part that breaks the grammar.
pub fn parse_image(value: &str) -> Result<String, ImageRefError> {
    if value.is_empty() || value.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(ImageRefError::Blank);
    }
    let (name_tag, digest) = match value.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (value, None),
    };
    if let Some(d) = digest {
        check_digest(d)?;
    }
    // A tag is after the last ':' that follows the last '/' (a ':' before it is a port).
    let last_slash = name_tag.rfind('/').map_or(0, |i| i + 1);
    let (name, tag) = match name_tag[last_slash..].rfind(':') {
        Some(i) => (
            &name_tag[..last_slash + i],
            Some(&name_tag[last_slash + i + 1..]),
        ),
        None => (name_tag, None),
    };
    if let Some(t) = tag {
        check_tag(t)?;
    }
    if name.len() > 255 {
        return Err(ImageRefError::TooLong(name.len()));
    }
    let mut parts: Vec<&str> = name.split('/').collect();
    if parts.len() > 1 && is_registry_like(parts[0]) {
        check_registry(parts.remove(0))?;
    }
    for p in parts {
        check_component(p)?;
    }
    Ok(value.to_string())
}

/// A first component naming a registry: with a '.' or a port, or `localhost`.
fn is_registry_like(first: &str) -> bool {
    first.contains('.') || first.contains(':') || first == "localhost"
}

fn check_registry(r: &str) -> Result<(), ImageRefError> {
    let bad = || ImageRefError::Registry(r.to_string());
    let (host, port) = match r.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || r.starts_with('[') => (h, Some(p)),
        _ => (r, None),
    };
    if let Some(p) = port
        && (p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(bad());
    }
    if host.starts_with('[') && host.ends_with(']') {
        return host[1..host.len() - 1]
            .parse::<std::net::Ipv6Addr>()
            .map(drop)
            .map_err(|_| bad());
    }
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if host.split('.').all(label_ok) {
        Ok(())
    } else {
        Err(bad())
    }
}

fn check_component(c: &str) -> Result<(), ImageRefError> {
    let bad = || ImageRefError::Component(c.to_string());
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = c.as_bytes();
    if bytes.is_empty() || !alnum(bytes[0]) || !alnum(bytes[bytes.len() - 1]) {
        return Err(bad());
    }
    let mut i = 0;
    while i < bytes.len() {
        if alnum(bytes[i]) {
            i += 1;
            continue;
        }
        // A separator: '.', '_', '__' or one or more '-', between alphanumerics.
        let start = i;
        match bytes[i] {
            b'.' => i += 1,
            b'_' => {
                i += if bytes.get(i + 1) == Some(&b'_') {
                    2
                } else {
                    1
                }
            }
            b'-' => {
                while bytes.get(i) == Some(&b'-') {
                    i += 1;
                }
            }
            _ => return Err(bad()),
        }
        if i == start || !bytes.get(i).copied().is_some_and(alnum) {
            return Err(bad());
        }
    }
    Ok(())
}

fn check_tag(t: &str) -> Result<(), ImageRefError> {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let ok = !t.is_empty()
        && t.len() <= 128
        && word(t.as_bytes()[0])
        && t.bytes().all(|b| word(b) || b == b'.' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(ImageRefError::Tag(t.to_string()))
    }
}

fn check_digest(d: &str) -> Result<(), ImageRefError> {
    let bad = || ImageRefError::Digest(d.to_string());
    let (algorithm, hex) = d.split_once(':').ok_or_else(bad)?;
    let algorithm_ok = !algorithm.is_empty()
        && algorithm.split(['+', '.', '_', '-']).all(|p| {
            !p.is_empty()
                && p.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        });
    if algorithm_ok && hex.len() >= 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(())
    } else {
        Err(bad())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_registries_and_runtimes_accept_are_accepted() {
        let digest = format!("sha256:{}", "0123456789abcdef".repeat(4));
        for ok in [
            "busybox",
            "library/busybox:1.36",
            "ghcr.io/plinth-dev/plinth:latest",
            "ghcr.io/syntasso/kratix-marketplace/redis-configure-pipeline:v0.1.0",
            "localhost/app",
            "localhost:5000/team/app:v1.2.3-rc.1",
            "registry.example.org:443/a/b__c/d-e--f.g:tag_1",
            "[::1]:5000/app:dev",
            &format!("example.org/app@{digest}"),
            &format!("example.org/app:v1@{digest}"),
        ] {
            assert_eq!(parse_image(ok).as_deref(), Ok(ok), "{ok}");
        }
    }

    #[test]
    fn malformed_references_name_the_part_that_is_wrong() {
        let cases: [(&str, ImageRefError); 10] = [
            ("", ImageRefError::Blank),
            ("Bad Image!!", ImageRefError::Blank),
            (
                "ghcr.io/Plinth/app",
                ImageRefError::Component("Plinth".into()),
            ),
            ("app!", ImageRefError::Component("app!".into())),
            ("a//b", ImageRefError::Component(String::new())),
            ("team/-app", ImageRefError::Component("-app".into())),
            ("app:", ImageRefError::Tag(String::new())),
            ("app:-x", ImageRefError::Tag("-x".into())),
            (
                "example.org:port/app",
                ImageRefError::Registry("example.org:port".into()),
            ),
            ("app@sha256:xyz", ImageRefError::Digest("sha256:xyz".into())),
        ];
        for (value, want) in cases {
            assert_eq!(parse_image(value), Err(want), "{value:?}");
        }
        let long = format!("example.org/{}", "a".repeat(250));
        assert_eq!(parse_image(&long), Err(ImageRefError::TooLong(262)));
    }
}
