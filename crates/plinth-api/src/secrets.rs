//! Recognising text that quotes a Secret, so what Plinth displays can keep its values
//! out: document displays hide unparsable text that names kind Secret, and a workflow
//! failure's log lines are not copied into a request's status when they quote one.
//!
//! ```
//! use plinth_api::secrets::{mentions_secret_kind, names_secret_kind};
//! assert!(names_secret_kind("apiVersion: v1\nkind: Secret\n"));
//! assert!(!names_secret_kind("kind: SecretStore\n"));
//! // A parser's error quoting the line with its number.
//! assert!(mentions_secret_kind("  2 | kind: Secret\n  3 | value: hunter2"));
//! assert!(!mentions_secret_kind("created SecretStore vault"));
//! ```

/// A line of `text` without white space and quotes.
fn squeezed(line: &str) -> String {
    line.chars()
        .filter(|c| !c.is_whitespace() && *c != '"' && *c != '\'')
        .collect()
}

/// Whether `text` has a line that is `kind: Secret` in YAML or JSON spelling (also as a
/// list item or inside a flow mapping).
pub fn names_secret_kind(text: &str) -> bool {
    text.lines().any(|l| {
        squeezed(l)
            .split([',', '{', '}'])
            .any(|part| part.trim_start_matches('-') == "kind:Secret")
    })
}

/// Whether `kind: Secret` appears anywhere in a line of `text` (followed by no further
/// letter, so `SecretStore` does not count): log lines quoting a document, with line
/// numbers or other prefixes before it.
pub fn mentions_secret_kind(text: &str) -> bool {
    text.lines().any(|l| {
        let l = squeezed(l);
        l.match_indices("kind:Secret").any(|(i, m)| {
            !l[i + m.len()..]
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphanumeric())
        })
    })
}
