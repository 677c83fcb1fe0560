//! `plinth update api`: the Promise API's group, version, kind, plural and `spec`
//! properties, edited in `api.yaml` (split) or `promise.yaml`'s `spec.api` (flat), as
//! kratix-cli does.

use std::path::Path;

use anyhow::{Context as _, bail};
use serde_json::{Map, Value, json};

use super::layout::{self, API_FILE, EXAMPLE_FILE, PROMISE_FILE};
use super::yaml;

/// Property types kratix-cli accepts.
pub const PROPERTY_TYPES: [&str; 5] = ["string", "number", "integer", "object", "boolean"];

/// What to change.
#[derive(Clone, Debug, Default)]
pub struct ApiUpdate {
    /// New API group.
    pub group: Option<String>,
    /// New kind.
    pub kind: Option<String>,
    /// New version name.
    pub version: Option<String>,
    /// New plural.
    pub plural: Option<String>,
    /// `name:type` to add (dots nest into objects), `name-` to remove.
    pub properties: Vec<String>,
}

/// Applies `update` to the Promise in `dir`; returns the file changed.
///
/// # Errors
/// No Promise in `dir`, a malformed `--property`, or an unknown type; nothing is written
/// then.
pub fn update_api(dir: &Path, update: &ApiUpdate) -> anyhow::Result<String> {
    let split = layout::is_split(dir);
    let (file, mut doc) = if split {
        (API_FILE, yaml::read_one(&dir.join(API_FILE))?)
    } else {
        (PROMISE_FILE, layout::read_flat(dir)?)
    };
    let crd = if split {
        &mut doc
    } else {
        &mut doc["spec"]["api"]
    };
    if !crd.is_object() {
        bail!("{file} has no API (spec.api) to update");
    }
    let gvk_changed = update_gvk(crd, update);
    apply_properties(crd, &update.properties).with_context(|| format!("updating {file}"))?;
    let crd = crd.clone();
    yaml::write(&dir.join(file), &doc)?;
    if gvk_changed {
        update_example(dir, &crd)?;
    }
    Ok(file.to_string())
}

fn update_gvk(crd: &mut Value, u: &ApiUpdate) -> bool {
    let spec = &mut crd["spec"];
    if let Some(k) = &u.kind {
        spec["names"]["kind"] = json!(k);
        spec["names"]["singular"] = json!(k.to_lowercase());
    }
    if let Some(v) = &u.version {
        spec["versions"][0]["name"] = json!(v);
    }
    if let Some(g) = &u.group {
        spec["group"] = json!(g);
    }
    if let Some(p) = &u.plural {
        spec["names"]["plural"] = json!(p);
    }
    let changed =
        u.kind.is_some() || u.version.is_some() || u.group.is_some() || u.plural.is_some();
    if changed {
        let name = format!(
            "{}.{}",
            spec["names"]["plural"].as_str().unwrap_or_default(),
            spec["group"].as_str().unwrap_or_default()
        );
        crd["metadata"]["name"] = json!(name);
    }
    changed
}

/// Adds and removes `spec` properties of the first version's schema.
fn apply_properties(crd: &mut Value, props: &[String]) -> anyhow::Result<()> {
    let spec_schema =
        &mut crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
    if !spec_schema["properties"].is_object() {
        spec_schema["type"] = json!("object");
        spec_schema["properties"] = json!({});
    }
    for prop in props {
        if let Some(path) = prop.strip_suffix('-').filter(|_| !prop.contains(':')) {
            remove(spec_schema, path);
            continue;
        }
        let Some((path, ty)) = prop.split_once(':') else {
            bail!("invalid --property {prop:?}: use NAME:TYPE to add or NAME- to remove");
        };
        if !PROPERTY_TYPES.contains(&ty) {
            bail!(
                "unsupported property type {ty:?} in --property {prop:?} (use one of {})",
                PROPERTY_TYPES.join(", ")
            );
        }
        add(spec_schema, path, ty)?;
    }
    Ok(())
}

fn add(schema: &mut Value, path: &str, ty: &str) -> anyhow::Result<()> {
    let names: Vec<&str> = path.split('.').collect();
    if names.iter().any(|n| n.is_empty()) {
        bail!("invalid property name {path:?}");
    }
    let mut cur = schema;
    for n in &names[..names.len() - 1] {
        let props = cur["properties"].as_object_mut().expect("an object schema");
        let entry = props
            .entry(n.to_string())
            .or_insert_with(|| json!({"type": "object", "properties": {}}));
        if entry["type"] != "object" {
            bail!("nested field {n} is not an object");
        }
        if !entry["properties"].is_object() {
            entry["properties"] = Value::Object(Map::new());
        }
        cur = entry;
    }
    cur["properties"][names[names.len() - 1]] = json!({"type": ty});
    Ok(())
}

fn remove(schema: &mut Value, path: &str) {
    let names: Vec<&str> = path.split('.').collect();
    let mut cur = schema;
    for n in &names[..names.len() - 1] {
        if !cur["properties"][*n]["properties"].is_object() {
            return;
        }
        cur = &mut cur["properties"][*n];
    }
    if let Some(m) = cur["properties"].as_object_mut() {
        m.remove(names[names.len() - 1]);
    }
}

/// Points the example request (and the test cases' requests) at the new group/version/kind.
fn update_example(dir: &Path, crd: &Value) -> anyhow::Result<()> {
    let api_version = format!(
        "{}/{}",
        crd["spec"]["group"].as_str().unwrap_or_default(),
        crd["spec"]["versions"][0]["name"]
            .as_str()
            .unwrap_or_default()
    );
    let mut files = vec![dir.join(EXAMPLE_FILE)];
    if let Ok(cases) = std::fs::read_dir(dir.join(layout::TESTS_DIR)) {
        files.extend(cases.flatten().map(|c| c.path().join("request.yaml")));
    }
    for f in files.into_iter().filter(|f| f.is_file()) {
        let mut rr = yaml::read_one(&f)?;
        rr["apiVersion"] = json!(api_version);
        rr["kind"] = crd["spec"]["names"]["kind"].clone();
        yaml::write(&f, &rr)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd() -> Value {
        super::super::scaffold::PromiseInit::new("db", "example.org", "Database", None, None, false)
            .unwrap()
            .crd()
    }

    fn spec_props(crd: &Value) -> &Value {
        &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    }

    #[test]
    fn add_nested_and_remove() {
        let mut c = crd();
        apply_properties(
            &mut c,
            &["size:string".into(), "service.port:integer".into()],
        )
        .unwrap();
        assert_eq!(spec_props(&c)["size"], json!({"type": "string"}));
        assert_eq!(
            spec_props(&c)["service"]["properties"]["port"]["type"],
            "integer"
        );
        apply_properties(&mut c, &["size-".into(), "service.port-".into()]).unwrap();
        assert!(spec_props(&c).get("size").is_none());
        assert_eq!(spec_props(&c)["service"]["properties"], json!({}));
    }

    #[test]
    fn bad_properties_are_refused() {
        let mut c = crd();
        let e = apply_properties(&mut c, &["size:str".into()]).unwrap_err();
        assert!(e.to_string().contains("unsupported property type"), "{e}");
        let e = apply_properties(&mut c, &["size".into()]).unwrap_err();
        assert!(e.to_string().contains("NAME:TYPE"), "{e}");
        apply_properties(&mut c, &["size:string".into()]).unwrap();
        let e = apply_properties(&mut c, &["size.x:string".into()]).unwrap_err();
        assert!(e.to_string().contains("not an object"), "{e}");
    }
}
