//! From the files of a Destination's directory to ordered documents: YAML parsing that
//! names the file and line of a malformed document (the file's other documents still
//! count), the `.kratix/` exclusion, identity checks and the apply phases.

use serde_json::Value;
use sha2::Digest;

/// When a document is applied within a pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    /// Namespaces and CustomResourceDefinitions, wherever they are.
    Foundations,
    /// Documents under `dependencies/`.
    Dependencies,
    /// Everything else (`resources/`).
    Resources,
}

/// One object the store asks for.
#[derive(Clone, Debug, PartialEq)]
pub struct Document {
    /// `path/in/store.yaml#<n>` (n counts documents in the file from 0).
    pub source: String,
    /// The file the document came from (relative to the Destination directory).
    pub file: String,
    /// The object as written in the store (namespace filled in for namespaced kinds later).
    pub object: Value,
    /// `apiVersion`.
    pub api_version: String,
    /// `kind`.
    pub kind: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace` as written (None when absent).
    pub namespace: Option<String>,
    /// Apply phase.
    pub phase: Phase,
}

impl Document {
    /// SHA-256 of the document's canonical JSON (what the inventory records).
    pub fn hash(&self) -> String {
        hash_value(&self.object)
    }
}

/// SHA-256 (hex) of a value's JSON.
pub fn hash_value(v: &Value) -> String {
    hex::encode(sha2::Sha256::digest(v.to_string().as_bytes()))
}

/// A document that cannot be applied, with a message naming file, line and cause.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DocError {
    /// The file (relative to the Destination directory).
    pub file: String,
    /// What is wrong, e.g. `resources/a.yaml line 4: did not find expected key`.
    pub message: String,
}

/// The documents of a Destination's directory and the ones that could not be read.
#[derive(Debug, Default)]
pub struct Parsed {
    /// Readable documents in apply order: by phase, what others refer to first
    /// (ResourceBindings, ServiceAccounts, Secrets, ConfigMaps, RBAC), then by file and
    /// position.
    pub documents: Vec<Document>,
    /// Unreadable documents and files.
    pub errors: Vec<DocError>,
}

/// True for files the agent reads: YAML or JSON outside any `.kratix` directory.
pub fn is_document_file(rel: &str) -> bool {
    let hidden = rel.split('/').any(|seg| seg == ".kratix");
    let ext_ok = [".yaml", ".yml", ".json"].iter().any(|e| rel.ends_with(e));
    !hidden && ext_ok
}

/// Parses every document file; `files` are `(path relative to the Destination directory,
/// bytes)`.
pub fn parse(files: &[(String, Vec<u8>)]) -> Parsed {
    let mut out = Parsed::default();
    for (rel, bytes) in files.iter().filter(|(p, _)| is_document_file(p)) {
        let Ok(text) = std::str::from_utf8(bytes) else {
            out.errors.push(DocError {
                file: rel.clone(),
                message: format!("{rel}: not UTF-8 text"),
            });
            continue;
        };
        for (n, (line0, chunk)) in split_documents(text).into_iter().enumerate() {
            match parse_chunk(rel, n, line0, chunk) {
                Ok(Some(d)) => out.documents.push(d),
                Ok(None) => {}
                Err(e) => out.errors.push(DocError {
                    file: rel.clone(),
                    message: e.to_string(),
                }),
            }
        }
    }
    out.documents.sort_by_key(apply_order);
    out
}

/// Where a document goes in a pass: by phase; within a phase, what other objects refer
/// to before the rest ([`refers_first`]); then by file and position in it.
fn apply_order(d: &Document) -> (Phase, bool, String, usize) {
    let n = d
        .source
        .rsplit_once('#')
        .and_then(|(_, n)| n.parse().ok())
        .unwrap_or(0);
    (d.phase, !refers_first(d), d.file.clone(), n)
}

/// Kinds other objects of the same output refer to, applied before the rest of their
/// phase: a resource request's ResourceBinding before the request (so the platform runs
/// it at the bound version, not at the latest), the ServiceAccounts, Secrets,
/// ConfigMaps and RBAC a workload uses before the workload.
fn refers_first(d: &Document) -> bool {
    let group = d.api_version.rsplit_once('/').map_or("", |(g, _)| g);
    match group {
        "" => matches!(
            d.kind.as_str(),
            "ServiceAccount" | "Secret" | "ConfigMap" | "LimitRange" | "ResourceQuota"
        ),
        "rbac.authorization.k8s.io" => true,
        g if g == plinth_api::GROUP => d.kind == "ResourceBinding",
        _ => false,
    }
}

/// Why one document of a file cannot be applied; becomes a [`DocError`]'s message.
#[derive(Debug, thiserror::Error)]
enum ChunkError {
    /// The document is not YAML.
    #[error("{file} line {line}: malformed YAML (document {document}): {cause}")]
    MalformedYaml {
        file: String,
        line: usize,
        document: usize,
        cause: String,
    },
    /// The document is a scalar or a list.
    #[error("{at}: not a Kubernetes object (a YAML mapping is expected)")]
    NotAnObject { at: String },
    /// `apiVersion` and/or `kind` are missing.
    #[error("{at}: missing {fields}")]
    MissingTypeFields { at: String, fields: String },
    /// `metadata.name` is missing.
    #[error("{at}: {kind} has no metadata.name")]
    NoName { at: String, kind: String },
}

/// Splits a YAML stream at `---` lines; returns (first line number, text) per document.
fn split_documents(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = 0usize;
    let mut start_line = 1usize;
    let mut offset = 0usize;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let t = line.trim_end();
        if t == "---" || t.starts_with("--- ") {
            out.push((start_line, &text[start..offset]));
            start = offset + line.len();
            start_line = i + 2;
        }
        offset += line.len();
    }
    out.push((start_line, &text[start..]));
    out
}

fn parse_chunk(
    rel: &str,
    n: usize,
    line0: usize,
    chunk: &str,
) -> Result<Option<Document>, ChunkError> {
    if chunk.trim().is_empty()
        || chunk
            .lines()
            .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
    {
        return Ok(None);
    }
    let v: Value = serde_saphyr::from_str(chunk).map_err(|e| {
        let line = e
            .location()
            .map(|l| line0 + l.line() as usize - 1)
            .unwrap_or(line0);
        ChunkError::MalformedYaml {
            file: rel.to_string(),
            line,
            document: n + 1,
            cause: e.to_string(),
        }
    })?;
    if v.is_null() {
        return Ok(None);
    }
    let where_ = format!("{rel} line {line0} (document {})", n + 1);
    if !v.is_object() {
        return Err(ChunkError::NotAnObject { at: where_ });
    }
    let field = |p: &str| {
        v.pointer(p)
            .and_then(|x| x.as_str())
            .filter(|s| !s.is_empty())
    };
    let (Some(api_version), Some(kind)) = (field("/apiVersion"), field("/kind")) else {
        let missing: Vec<&str> = [("apiVersion", "/apiVersion"), ("kind", "/kind")]
            .into_iter()
            .filter(|(_, p)| field(p).is_none())
            .map(|(n, _)| n)
            .collect();
        return Err(ChunkError::MissingTypeFields {
            at: where_,
            fields: missing.join(" and "),
        });
    };
    let Some(name) = field("/metadata/name") else {
        return Err(ChunkError::NoName {
            at: where_,
            kind: kind.to_string(),
        });
    };
    let phase = if (kind == "Namespace" && api_version == "v1")
        || (kind == "CustomResourceDefinition" && api_version.starts_with("apiextensions.k8s.io/"))
    {
        Phase::Foundations
    } else if rel.starts_with("dependencies/") {
        Phase::Dependencies
    } else {
        Phase::Resources
    };
    Ok(Some(Document {
        source: format!("{rel}#{n}"),
        file: rel.to_string(),
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        name: name.to_string(),
        namespace: field("/metadata/namespace").map(String::from),
        object: v.clone(),
        phase,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_document_names_file_and_line_and_others_survive() {
        let text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: [unclosed\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n";
        let p = parse(&[("resources/x.yaml".into(), text.as_bytes().to_vec())]);
        assert_eq!(p.documents.len(), 2);
        assert_eq!(p.errors.len(), 1);
        assert!(
            p.errors[0]
                .message
                .starts_with("resources/x.yaml line 6: malformed YAML (document 2)"),
            "{}",
            p.errors[0].message
        );
    }

    #[test]
    fn phases_and_exclusions() {
        let ns = b"apiVersion: v1\nkind: Namespace\nmetadata: {name: team}\n".to_vec();
        let cm = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n".to_vec();
        let p = parse(&[
            ("resources/r.yaml".into(), cm.clone()),
            ("dependencies/d.yaml".into(), cm.clone()),
            ("resources/ns.yaml".into(), ns),
            (".kratix/index.yaml".into(), cm.clone()),
            ("resources/.kratix/x.yaml".into(), cm.clone()),
            ("resources/readme.txt".into(), b"hello".to_vec()),
        ]);
        let order: Vec<&str> = p.documents.iter().map(|d| d.source.as_str()).collect();
        assert_eq!(
            order,
            [
                "resources/ns.yaml#0",
                "dependencies/d.yaml#0",
                "resources/r.yaml#0"
            ]
        );
    }

    #[test]
    fn bindings_and_what_workloads_use_go_first_within_a_phase() {
        let out = "apiVersion: compound.test/v1\nkind: Db\nmetadata: {name: app-a-db, namespace: default}\n---\n\
apiVersion: platform.kratix.io/v1alpha1\nkind: ResourceBinding\nmetadata: {name: app-a-db, namespace: default}\n---\n\
apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n---\n\
apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: web}\n";
        let many: String = (0..12)
            .map(|i| format!("apiVersion: v1\nkind: Pod\nmetadata: {{name: p{i}}}\n---\n"))
            .collect();
        let p = parse(&[
            ("resources/a/out.yaml".into(), out.as_bytes().to_vec()),
            ("resources/b/many.yaml".into(), many.into_bytes()),
        ]);
        let order: Vec<String> = p
            .documents
            .iter()
            .map(|d| format!("{} {}", d.kind, d.name))
            .collect();
        let mut want = vec![
            "ResourceBinding app-a-db".to_string(),
            "ServiceAccount web".into(),
            "Db app-a-db".into(),
            "Deployment web".into(),
        ];
        want.extend((0..12).map(|i| format!("Pod p{i}")));
        assert_eq!(order, want);
    }

    #[test]
    fn missing_kind_is_named() {
        let p = parse(&[(
            "resources/a.yaml".into(),
            b"apiVersion: v1\nmetadata: {name: a}\n".to_vec(),
        )]);
        assert_eq!(
            p.errors[0].message,
            "resources/a.yaml line 1 (document 1): missing kind"
        );
    }
}
