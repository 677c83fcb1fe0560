//! `plinth init promise`: a new Promise directory in kratix-cli's layout, with one
//! example test case.

use std::path::Path;

use anyhow::bail;
use serde_json::{Value, json};

use super::layout::{self, API_FILE, DEPENDENCIES_FILE, EXAMPLE_FILE, PROMISE_FILE, TESTS_DIR};
use super::yaml;

/// What `init promise` is asked to create.
#[derive(Clone, Debug)]
pub struct PromiseInit {
    /// Promise name (`metadata.name`).
    pub name: String,
    /// API group of the request kind.
    pub group: String,
    /// Request kind.
    pub kind: String,
    /// API version (default `v1alpha1`).
    pub version: String,
    /// Plural (default: the kind in lower case plus `s`).
    pub plural: String,
    /// Split layout (`api.yaml`, `dependencies.yaml`, workflow files).
    pub split: bool,
}

impl PromiseInit {
    /// Fills the defaults kratix-cli uses and checks the names.
    ///
    /// # Errors
    /// A name that is not a DNS-1123 label (Promise name, plural) or subdomain (group),
    /// or a kind that does not start with a letter.
    pub fn new(
        name: &str,
        group: &str,
        kind: &str,
        version: Option<&str>,
        plural: Option<&str>,
        split: bool,
    ) -> anyhow::Result<PromiseInit> {
        let plural = plural
            .map(str::to_string)
            .unwrap_or_else(|| format!("{}s", kind.to_lowercase()));
        check_label("Promise name", name)?;
        check_label("--plural", &plural)?;
        if group.is_empty() || !group.split('.').all(|p| check_label("", p).is_ok()) {
            bail!("--group {group:?} must be a DNS subdomain such as example.org");
        }
        if !kind.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            || !kind.chars().all(|c| c.is_ascii_alphanumeric())
        {
            bail!("--kind {kind:?} must start with a letter and hold only letters and digits");
        }
        let version = version.unwrap_or("v1alpha1").to_string();
        check_label("--version", &version)?;
        Ok(PromiseInit {
            name: name.into(),
            group: group.into(),
            kind: kind.into(),
            version,
            plural,
            split,
        })
    }

    /// The request CRD (`spec.api`) with an empty `spec` schema.
    pub fn crd(&self) -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{}.{}", self.plural, self.group)},
            "spec": {
                "group": self.group,
                "names": {
                    "kind": self.kind,
                    "plural": self.plural,
                    "singular": self.kind.to_lowercase(),
                },
                "scope": "Namespaced",
                "versions": [{
                    "name": self.version,
                    "schema": {"openAPIV3Schema": {
                        "type": "object",
                        "properties": {"spec": {"type": "object", "default": {}, "properties": {}}},
                    }},
                    "served": true,
                    "storage": true,
                }],
            },
        })
    }

    /// The whole Promise of the flat layout.
    pub fn promise(&self) -> Value {
        json!({
            "apiVersion": "platform.kratix.io/v1alpha1",
            "kind": "Promise",
            "metadata": {
                "name": self.name,
                "labels": {layout::VERSION_LABEL: "v0.0.1"},
            },
            "spec": {
                "api": self.crd(),
                "workflows": {
                    "promise": {"configure": []},
                    "resource": {"configure": []},
                },
            },
        })
    }

    /// The example request.
    pub fn example(&self) -> Value {
        json!({
            "apiVersion": format!("{}/{}", self.group, self.version),
            "kind": self.kind,
            "metadata": {"name": format!("example-{}", self.name), "namespace": "default"},
            "spec": {},
        })
    }
}

fn check_label(what: &str, s: &str) -> anyhow::Result<()> {
    let ok = !s.is_empty()
        && s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !s.starts_with('-')
        && !s.ends_with('-');
    if !ok {
        bail!(
            "{what} {s:?} must be a DNS-1123 label: lower-case letters, digits and '-', at most 63 characters"
        );
    }
    Ok(())
}

/// Writes the new Promise directory into `dir`; returns the files written (relative).
///
/// # Errors
/// A file it would write already exists (nothing is overwritten), or a write fails.
pub fn init_promise(dir: &Path, p: &PromiseInit) -> anyhow::Result<Vec<String>> {
    let mut files: Vec<(String, String)> = vec![
        (EXAMPLE_FILE.into(), yaml::to_yaml(&p.example())),
        ("README.md".into(), readme(p)),
        (
            format!("{TESTS_DIR}/example/request.yaml"),
            yaml::to_yaml(&p.example()),
        ),
    ];
    if p.split {
        files.push((API_FILE.into(), yaml::to_yaml(&p.crd())));
        files.push((DEPENDENCIES_FILE.into(), String::new()));
    } else {
        files.push((PROMISE_FILE.into(), yaml::to_yaml(&p.promise())));
    }
    for (rel, _) in &files {
        if dir.join(rel).exists() {
            bail!(
                "{} already exists; plinth init promise does not overwrite files",
                dir.join(rel).display()
            );
        }
    }
    for (rel, text) in &files {
        yaml::write_text(&dir.join(rel), text)?;
    }
    Ok(files.into_iter().map(|(r, _)| r).collect())
}

fn readme(p: &PromiseInit) -> String {
    let split = if p.split { " --split" } else { "" };
    format!(
        r#"# {name} Promise

Generated with:

```bash
plinth init promise {name} --group {group} --kind {kind}{split}
```

## API

```bash
plinth update api --property size:string        # add a property to spec
plinth update api --property size-               # remove it
```

## Workflows

```bash
plinth add container resource/configure/instance --image example.org/{name}-configure:v0.1.0
```

This creates `workflows/resource/configure/instance/<container>/` with a runnable
script in `scripts/`, a `Dockerfile`, `resources/` for files the image ships (a
`.gitkeep` keeps it in Git, so the Dockerfile's `ADD resources` works from a clone), and
an entry in `images.yaml` so that Plinth's runner runs the script in place of the image
until the image is built and pushed.

## Build, test, render

```bash
plinth build promise {name} --output promise.yaml   # split layout only
plinth test --update                               # record the expected outputs of tests/*
plinth test                                        # compare with them
plinth render promise.yaml example-resource.yaml   # see what a request produces
```
"#,
        name = p.name,
        group = p.group,
        kind = p.kind,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_kratix_cli() {
        let p = PromiseInit::new("db", "example.org", "Database", None, None, false).unwrap();
        assert_eq!(p.plural, "databases");
        assert_eq!(p.version, "v1alpha1");
        assert_eq!(p.crd()["metadata"]["name"], "databases.example.org");
        assert_eq!(p.example()["apiVersion"], "example.org/v1alpha1");
    }

    #[test]
    fn bad_names_are_refused_naming_the_flag() {
        let e = PromiseInit::new("Db", "example.org", "Database", None, None, false).unwrap_err();
        assert!(e.to_string().contains("Promise name"), "{e}");
        let e = PromiseInit::new("db", "example..org", "Database", None, None, false).unwrap_err();
        assert!(e.to_string().contains("--group"), "{e}");
        let e = PromiseInit::new("db", "example.org", "9x", None, None, false).unwrap_err();
        assert!(e.to_string().contains("--kind"), "{e}");
    }
}
