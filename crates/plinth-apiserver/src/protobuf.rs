//! Decoding of `application/vnd.kubernetes.protobuf` request bodies for the built-in
//! kinds kubectl's imperative generators send that way (`kubectl create namespace`,
//! `configmap`, `secret`, `serviceaccount`, `role`, `rolebinding`, `clusterrole`,
//! `clusterrolebinding`). Responses are always JSON (kubectl accepts both).
//!
//! Wire format (Kubernetes `runtime/serializer/protobuf`): the 4-byte magic `k8s\0`,
//! then a `runtime.Unknown` message {1: TypeMeta{1: apiVersion, 2: kind}, 2: raw bytes}
//! whose `raw` is the object's protobuf, with field numbers from the API types'
//! `generated.proto`. Unknown fields are skipped.

use base64::Engine;
use serde_json::{Map, Value, json};

#[derive(Clone, Copy)]
enum Ty {
    Str,
    I64,
    Bool,
    Time,
    MapStr,
    MapBytes,
    RepStr,
    Msg(&'static [F]),
    RepMsg(&'static [F]),
}

type F = (u32, &'static str, Ty);

const OWNER_REF: &[F] = &[
    (1, "kind", Ty::Str),
    (3, "name", Ty::Str),
    (4, "uid", Ty::Str),
    (5, "apiVersion", Ty::Str),
    (6, "controller", Ty::Bool),
    (7, "blockOwnerDeletion", Ty::Bool),
];
const OBJECT_META: &[F] = &[
    (1, "name", Ty::Str),
    (2, "generateName", Ty::Str),
    (3, "namespace", Ty::Str),
    (5, "uid", Ty::Str),
    (6, "resourceVersion", Ty::Str),
    (7, "generation", Ty::I64),
    (8, "creationTimestamp", Ty::Time),
    (11, "labels", Ty::MapStr),
    (12, "annotations", Ty::MapStr),
    (13, "ownerReferences", Ty::RepMsg(OWNER_REF)),
    (14, "finalizers", Ty::RepStr),
];
const CONFIG_MAP: &[F] = &[
    (1, "metadata", Ty::Msg(OBJECT_META)),
    (2, "data", Ty::MapStr),
    (3, "binaryData", Ty::MapBytes),
    (4, "immutable", Ty::Bool),
];
const SECRET: &[F] = &[
    (1, "metadata", Ty::Msg(OBJECT_META)),
    (2, "data", Ty::MapBytes),
    (3, "type", Ty::Str),
    (4, "stringData", Ty::MapStr),
    (5, "immutable", Ty::Bool),
];
const NAMESPACE: &[F] = &[
    (1, "metadata", Ty::Msg(OBJECT_META)),
    (2, "spec", Ty::Msg(&[(1, "finalizers", Ty::RepStr)])),
];
const OBJECT_REF: &[F] = &[
    (1, "kind", Ty::Str),
    (2, "namespace", Ty::Str),
    (3, "name", Ty::Str),
    (4, "uid", Ty::Str),
    (5, "apiVersion", Ty::Str),
    (6, "resourceVersion", Ty::Str),
    (7, "fieldPath", Ty::Str),
];
const SERVICE_ACCOUNT: &[F] = &[
    (1, "metadata", Ty::Msg(OBJECT_META)),
    (2, "secrets", Ty::RepMsg(OBJECT_REF)),
    (3, "imagePullSecrets", Ty::RepMsg(&[(1, "name", Ty::Str)])),
    (4, "automountServiceAccountToken", Ty::Bool),
];
const POLICY_RULE: &[F] = &[
    (1, "verbs", Ty::RepStr),
    (2, "apiGroups", Ty::RepStr),
    (3, "resources", Ty::RepStr),
    (4, "resourceNames", Ty::RepStr),
    (5, "nonResourceURLs", Ty::RepStr),
];
const LABEL_SELECTOR: &[F] = &[
    (1, "matchLabels", Ty::MapStr),
    (
        2,
        "matchExpressions",
        Ty::RepMsg(&[
            (1, "key", Ty::Str),
            (2, "operator", Ty::Str),
            (3, "values", Ty::RepStr),
        ]),
    ),
];
const ROLE: &[F] = &[
    (1, "metadata", Ty::Msg(OBJECT_META)),
    (2, "rules", Ty::RepMsg(POLICY_RULE)),
];
const CLUSTER_ROLE: &[F] = &[
    (1, "metadata", Ty::Msg(OBJECT_META)),
    (2, "rules", Ty::RepMsg(POLICY_RULE)),
    (
        3,
        "aggregationRule",
        Ty::Msg(&[(1, "clusterRoleSelectors", Ty::RepMsg(LABEL_SELECTOR))]),
    ),
];
const BINDING: &[F] = &[
    (1, "metadata", Ty::Msg(OBJECT_META)),
    (
        2,
        "subjects",
        Ty::RepMsg(&[
            (1, "kind", Ty::Str),
            (2, "apiGroup", Ty::Str),
            (3, "name", Ty::Str),
            (4, "namespace", Ty::Str),
        ]),
    ),
    (
        3,
        "roleRef",
        Ty::Msg(&[
            (1, "apiGroup", Ty::Str),
            (2, "kind", Ty::Str),
            (3, "name", Ty::Str),
        ]),
    ),
];

/// authorization.k8s.io/v1 SelfSubjectAccessReview (what `kubectl auth can-i` sends).
const SELF_SUBJECT_ACCESS_REVIEW: &[F] = &[
    (1, "metadata", Ty::Msg(OBJECT_META)),
    (
        2,
        "spec",
        Ty::Msg(&[
            (
                1,
                "resourceAttributes",
                Ty::Msg(&[
                    (1, "namespace", Ty::Str),
                    (2, "verb", Ty::Str),
                    (3, "group", Ty::Str),
                    (4, "version", Ty::Str),
                    (5, "resource", Ty::Str),
                    (6, "subresource", Ty::Str),
                    (7, "name", Ty::Str),
                ]),
            ),
            (
                2,
                "nonResourceAttributes",
                Ty::Msg(&[(1, "path", Ty::Str), (2, "verb", Ty::Str)]),
            ),
        ]),
    ),
];

/// authentication.k8s.io/v1 TokenRequest (what `kubectl create token` sends).
const TOKEN_REQUEST: &[F] = &[
    (1, "metadata", Ty::Msg(OBJECT_META)),
    (
        2,
        "spec",
        Ty::Msg(&[
            (1, "audiences", Ty::RepStr),
            (
                3,
                "boundObjectRef",
                Ty::Msg(&[
                    (1, "kind", Ty::Str),
                    (2, "apiVersion", Ty::Str),
                    (3, "name", Ty::Str),
                    (4, "uid", Ty::Str),
                ]),
            ),
            (4, "expirationSeconds", Ty::I64),
        ]),
    ),
];

fn descriptor(api_version: &str, kind: &str) -> Option<&'static [F]> {
    Some(match (api_version, kind) {
        ("v1", "ConfigMap") => CONFIG_MAP,
        ("v1", "Secret") => SECRET,
        ("v1", "Namespace") => NAMESPACE,
        ("v1", "ServiceAccount") => SERVICE_ACCOUNT,
        ("rbac.authorization.k8s.io/v1", "Role") => ROLE,
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => CLUSTER_ROLE,
        ("rbac.authorization.k8s.io/v1", "RoleBinding" | "ClusterRoleBinding") => BINDING,
        ("authorization.k8s.io/v1", "SelfSubjectAccessReview") => SELF_SUBJECT_ACCESS_REVIEW,
        ("authentication.k8s.io/v1", "TokenRequest") => TOKEN_REQUEST,
        _ => return None,
    })
}

struct Reader<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, String> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self.b.get(self.i).ok_or("truncated varint")?;
            self.i += 1;
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("varint too long".into())
    }

    fn bytes(&mut self) -> Result<&'a [u8], String> {
        let n = self.varint()? as usize;
        let end = self
            .i
            .checked_add(n)
            .filter(|e| *e <= self.b.len())
            .ok_or("truncated field")?;
        let s = &self.b[self.i..end];
        self.i = end;
        Ok(s)
    }

    fn skip(&mut self, wire: u64) -> Result<(), String> {
        match wire {
            0 => {
                self.varint()?;
            }
            1 => self.i += 8,
            2 => {
                self.bytes()?;
            }
            5 => self.i += 4,
            w => return Err(format!("unsupported wire type {w}")),
        }
        if self.i > self.b.len() {
            return Err("truncated field".into());
        }
        Ok(())
    }

    /// Iterates (field number, wire type).
    fn next_key(&mut self) -> Result<Option<(u32, u64)>, String> {
        if self.i >= self.b.len() {
            return Ok(None);
        }
        let k = self.varint()?;
        Ok(Some(((k >> 3) as u32, k & 7)))
    }
}

fn utf8(b: &[u8]) -> Result<String, String> {
    String::from_utf8(b.to_vec()).map_err(|_| "invalid UTF-8 in string field".to_string())
}

fn map_entry(b: &[u8], bytes_value: bool) -> Result<(String, Value), String> {
    let mut r = Reader { b, i: 0 };
    let (mut k, mut v) = (String::new(), json!(""));
    while let Some((f, w)) = r.next_key()? {
        match (f, w) {
            (1, 2) => k = utf8(r.bytes()?)?,
            (2, 2) if bytes_value => {
                v = json!(base64::engine::general_purpose::STANDARD.encode(r.bytes()?))
            }
            (2, 2) => v = json!(utf8(r.bytes()?)?),
            _ => r.skip(w)?,
        }
    }
    Ok((k, v))
}

fn time(b: &[u8]) -> Result<Value, String> {
    let mut r = Reader { b, i: 0 };
    let mut secs = 0i64;
    while let Some((f, w)) = r.next_key()? {
        match (f, w) {
            (1, 0) => secs = r.varint()? as i64,
            _ => r.skip(w)?,
        }
    }
    Ok(jiff::Timestamp::from_second(secs)
        .map(|t| json!(t.to_string()))
        .unwrap_or(Value::Null))
}

fn message(b: &[u8], desc: &[F]) -> Result<Value, String> {
    let mut out = Map::new();
    let mut r = Reader { b, i: 0 };
    while let Some((num, wire)) = r.next_key()? {
        let Some((_, name, ty)) = desc.iter().find(|(n, _, _)| *n == num) else {
            r.skip(wire)?;
            continue;
        };
        let name = name.to_string();
        match (ty, wire) {
            (Ty::Str, 2) => {
                out.insert(name, json!(utf8(r.bytes()?)?));
            }
            (Ty::I64, 0) => {
                out.insert(name, json!(r.varint()? as i64));
            }
            (Ty::Bool, 0) => {
                out.insert(name, json!(r.varint()? != 0));
            }
            (Ty::Time, 2) => {
                out.insert(name, time(r.bytes()?)?);
            }
            (Ty::MapStr | Ty::MapBytes, 2) => {
                let (k, v) = map_entry(r.bytes()?, matches!(ty, Ty::MapBytes))?;
                let m = out.entry(name).or_insert_with(|| json!({}));
                m[k] = v;
            }
            (Ty::RepStr, 2) => {
                let s = utf8(r.bytes()?)?;
                let a = out.entry(name).or_insert_with(|| json!([]));
                a.as_array_mut().unwrap().push(json!(s));
            }
            (Ty::Msg(d), 2) => {
                out.insert(name, message(r.bytes()?, d)?);
            }
            (Ty::RepMsg(d), 2) => {
                let v = message(r.bytes()?, d)?;
                let a = out.entry(name).or_insert_with(|| json!([]));
                a.as_array_mut().unwrap().push(v);
            }
            (_, w) => return Err(format!("field {num} ({name}) has unexpected wire type {w}")),
        }
    }
    Ok(Value::Object(out))
}

/// Decodes a protobuf-encoded object into its JSON form. Errors name what is unsupported.
pub fn decode(body: &[u8]) -> Result<Value, String> {
    let rest = body
        .strip_prefix(b"k8s\0")
        .ok_or("missing the protobuf envelope prefix")?;
    let mut r = Reader { b: rest, i: 0 };
    let (mut av, mut kind, mut raw): (String, String, &[u8]) = (String::new(), String::new(), &[]);
    while let Some((f, w)) = r.next_key()? {
        match (f, w) {
            (1, 2) => {
                let mut tm = Reader {
                    b: r.bytes()?,
                    i: 0,
                };
                while let Some((f, w)) = tm.next_key()? {
                    match (f, w) {
                        (1, 2) => av = utf8(tm.bytes()?)?,
                        (2, 2) => kind = utf8(tm.bytes()?)?,
                        _ => tm.skip(w)?,
                    }
                }
            }
            (2, 2) => raw = r.bytes()?,
            _ => r.skip(w)?,
        }
    }
    let desc = descriptor(&av, &kind).ok_or_else(|| {
        format!("protobuf bodies are not supported for {av} {kind}; send application/json")
    })?;
    let mut obj = message(raw, desc)?;
    obj["apiVersion"] = json!(av);
    obj["kind"] = json!(kind);
    Ok(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(num: u32, data: &[u8]) -> Vec<u8> {
        let mut v = vec![((num << 3) | 2) as u8, data.len() as u8];
        v.extend_from_slice(data);
        v
    }

    #[test]
    fn decodes_a_configmap() {
        let meta = [
            field(1, b"foo"),
            field(11, &[field(1, b"a"), field(2, b"b")].concat()),
        ]
        .concat();
        let cm = [
            field(1, &meta),
            field(2, &[field(1, b"k"), field(2, b"v")].concat()),
        ]
        .concat();
        let tm = [field(1, b"v1"), field(2, b"ConfigMap")].concat();
        let body = [b"k8s\0".to_vec(), field(1, &tm), field(2, &cm)].concat();
        let v = decode(&body).unwrap();
        assert_eq!(
            v,
            json!({"metadata": {"name": "foo", "labels": {"a": "b"}}, "data": {"k": "v"}, "apiVersion": "v1", "kind": "ConfigMap"})
        );
    }

    #[test]
    fn rejects_unknown_kinds_and_garbage() {
        let tm = [field(1, b"apps/v1"), field(2, b"Deployment")].concat();
        let body = [b"k8s\0".to_vec(), field(1, &tm)].concat();
        assert!(decode(&body).unwrap_err().contains("Deployment"));
        assert!(decode(b"k8s\0\x0a\xff").is_err());
        assert!(decode(b"nope").is_err());
    }
}
