//! `$(VAR)` expansion as Kubernetes performs it on `env[].value`, `command` and `args`
//! (Kubernetes API reference, Container.command: "Variable references $(VAR_NAME) are
//! expanded using the container's environment. If a variable cannot be resolved, the
//! reference in the input string will be unchanged. Double $$ are reduced to a single $,
//! which allows for escaping the $(VAR_NAME) syntax").

use std::collections::HashMap;

/// Expands `$(NAME)` references in `input` using `lookup`.
///
/// Rules (k8s.io/kubernetes `third_party/forked/golang/expansion`):
/// * `$$` becomes `$` (escape), so `$$(X)` yields the literal `$(X)`;
/// * `$(NAME)` becomes the value when `lookup(NAME)` is `Some`, else stays `$(NAME)`;
/// * an unterminated `$(` and a `$` before any other character are kept literally.
pub fn expand(input: &str, lookup: impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(input.len());
    let bytes = input.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'$' || i + 1 >= bytes.len() {
            // Push the whole UTF-8 character starting at i.
            let ch = input[i..].chars().next().expect("in bounds");
            out.push(ch);
            i += ch.len_utf8();
            continue;
        }
        match bytes[i + 1] {
            b'$' => {
                out.push('$');
                i += 2;
            }
            b'(' => match input[i + 2..].find(')') {
                Some(rel) => {
                    let name = &input[i + 2..i + 2 + rel];
                    match lookup(name) {
                        Some(v) if !name.is_empty() => out.push_str(&v),
                        _ => {
                            out.push_str("$(");
                            out.push_str(name);
                            out.push(')');
                        }
                    }
                    i += 2 + rel + 1;
                }
                None => {
                    out.push_str(&input[i..]);
                    i = bytes.len();
                }
            },
            _ => {
                out.push('$');
                i += 1;
            }
        }
    }
    out
}

/// [`expand`] against a map of already resolved variables.
pub fn expand_with(input: &str, vars: &HashMap<String, String>) -> String {
    expand(input, |k| vars.get(k).cloned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> HashMap<String, String> {
        [("A", "alpha"), ("B", "beta"), ("EMPTY", "")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn expands_defined_variables() {
        assert_eq!(expand_with("x-$(A)-$(B)", &vars()), "x-alpha-beta");
        assert_eq!(expand_with("$(EMPTY)z", &vars()), "z");
    }

    #[test]
    fn leaves_undefined_references() {
        assert_eq!(expand_with("$(NOPE) $(A)", &vars()), "$(NOPE) alpha");
        assert_eq!(expand_with("$()", &vars()), "$()");
    }

    #[test]
    fn dollar_dollar_escapes() {
        assert_eq!(expand_with("$$(A)", &vars()), "$(A)");
        assert_eq!(expand_with("$$$(A)", &vars()), "$alpha");
        assert_eq!(expand_with("cost $$5", &vars()), "cost $5");
    }

    #[test]
    fn literal_dollars_and_unterminated() {
        assert_eq!(expand_with("$A $", &vars()), "$A $");
        assert_eq!(expand_with("x$(A", &vars()), "x$(A");
        assert_eq!(expand_with("ünï$(A)cödé", &vars()), "ünïalphacödé");
        assert_eq!(expand_with("echo $HOME", &vars()), "echo $HOME");
    }
}
