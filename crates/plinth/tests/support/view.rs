//! A Promise whose resource workflow writes one ConfigMap, run through an image map onto
//! a local script, for the tests of what `plinth status` and the web view show.

#![allow(dead_code)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use super::support::{GADGET_PROMISE, Plinth, wait_until};

/// The pipeline image the Promise names (mapped onto [`CONFIGURE`]).
pub const IMAGE: &str = "example.test/gadget-configure:v1";

/// The pipeline: one ConfigMap named after the request, and a line in the log.
const CONFIGURE: &str = r#"#!/bin/sh
set -eu
cat > /kratix/output/configmap.yaml <<EOF
apiVersion: v1
kind: ConfigMap
metadata:
  name: gadget-$KRATIX_OBJECT_NAME
  namespace: default
data:
  size: small
EOF
echo "gadget pipeline wrote gadget-$KRATIX_OBJECT_NAME"
"#;

/// The Gadget Promise with a resource configure pipeline `configure` running [`IMAGE`].
pub fn promise() -> String {
    format!(
        "{GADGET_PROMISE}  workflows:
    resource:
      configure:
      - apiVersion: platform.kratix.io/v1alpha1
        kind: Pipeline
        metadata: {{name: configure}}
        spec:
          containers:
          - name: make
            image: {IMAGE}
"
    )
}

/// Writes the script and an image map for it under `dir`; returns the map's path.
pub fn image_map(dir: &Path) -> PathBuf {
    let script = dir.join("gadget-configure.sh");
    std::fs::write(&script, CONFIGURE).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let map = dir.join("images.yaml");
    std::fs::write(
        &map,
        format!(
            "images:\n  - image: \"{IMAGE}\"\n    command: [\"{}\"]\n",
            script.display()
        ),
    )
    .unwrap();
    map
}

/// A Gadget request manifest.
pub fn request(name: &str) -> String {
    format!(
        "apiVersion: example.test/v1\nkind: Gadget\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  size: small\n"
    )
}

/// kubectl apply of a YAML text.
pub fn apply(p: &Plinth, file: &str, yaml: &str) {
    let path = p.dir.path().join(file);
    std::fs::write(&path, yaml).unwrap();
    p.kubectl(&["apply", "-f", path.to_str().unwrap()]);
}

/// Installs the Promise and waits for its API.
pub async fn install(p: &Plinth) {
    apply(p, "promise.yaml", &promise());
    wait_until(90, "the Gadget API", || async {
        p.kubectl_raw(&["get", "gadgets", "-A"]).status.success()
    })
    .await;
}

/// Creates a request and waits until a WorkPlacement of its Work has a version
/// (returned: the commit that holds its files).
pub async fn request_written(p: &Plinth, name: &str) -> String {
    apply(p, &format!("{name}.yaml"), &request(name));
    let version = std::sync::Mutex::new(String::new());
    wait_until(120, &format!("{name}'s WorkPlacement written"), || {
        let out = p.kubectl_raw(&[
            "get",
            "workplacements",
            "-A",
            "-o",
            "jsonpath={range .items[*]}{.spec.resourceName} {.status.versionID}{\"\\n\"}{end}",
        ]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let found = text
            .lines()
            .filter_map(|l| l.split_once(' '))
            .find(|(r, v)| *r == name && !v.trim().is_empty())
            .map(|(_, v)| v.trim().to_string());
        let done = found.is_some();
        if let Some(v) = found {
            *version.lock().unwrap() = v;
        }
        async move { done }
    })
    .await;
    version.into_inner().unwrap()
}

/// The web view's login link `plinth up` printed.
pub fn login_url(p: &Plinth) -> String {
    let out = std::fs::read_to_string(p.dir.path().join("plinth.out")).unwrap();
    out.lines()
        .find_map(|l| l.strip_prefix("web view: "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no web view line in:\n{out}"))
        .to_string()
}
