//! Decoding of `application/vnd.kubernetes.protobuf` request bodies for every built-in
//! kind the server serves (kubectl's typed clients send them that way: every `kubectl
//! create <kind>`, `kubectl run`, `expose`, `auth can-i|whoami`). CustomResourceDefinitions
//! are the exception: kubectl only sends them as JSON, and their schema type has JSON forms
//! (bool-or-schema, raw JSON) that the tables below do not describe. Responses are always
//! JSON (kubectl accepts both).
//!
//! The message tables in `descriptors.rs` are generated from the `k8s-pb` crate (field
//! numbers and types of Kubernetes' `generated.proto`) and `k8s-openapi` (JSON names) by
//! `scripts/gen-protobuf-descriptors.py`.
//!
//! Wire format (Kubernetes `runtime/serializer/protobuf`): the 4-byte magic `k8s\0`,
//! then a `runtime.Unknown` message {1: TypeMeta{1: apiVersion, 2: kind}, 2: raw bytes}
//! whose `raw` is the object's protobuf, with field numbers from the API types'
//! `generated.proto`. Unknown fields are skipped.

use base64::Engine;
use serde_json::{Map, Value, json};

mod descriptors;
mod field;

use field::{F, Ty};

/// Fields whose zero value differs from leaving them out (Go pointers whose default is
/// not zero; the protobuf tables cannot tell a pointer from a value). Every other zero
/// scalar that is not required is dropped: Go's protobuf encoder writes the zero values of
/// non-pointer fields, which their JSON form omits.
const KEEP_ZERO: &[&str] = &[
    "replicas",
    "minReplicas",
    "revisionHistoryLimit",
    "progressDeadlineSeconds",
    "successfulJobsHistoryLimit",
    "failedJobsHistoryLimit",
    "startingDeadlineSeconds",
    "hostUsers",
    "allocateLoadBalancerNodePorts",
    "minDomains",
    "automountServiceAccountToken",
    "allowPrivilegeEscalation",
    "enableServiceLinks",
    "backoffLimit",
    "backoffLimitPerIndex",
    "parallelism",
    "completions",
    "runAsUser",
    "runAsGroup",
    "fsGroup",
    "ttlSecondsAfterFinished",
    "terminationGracePeriodSeconds",
    "activeDeadlineSeconds",
    "expirationSeconds",
    "defaultMode",
    "mode",
];

fn descriptor(api_version: &str, kind: &str) -> Option<&'static [F]> {
    descriptors::ROOTS
        .iter()
        .find(|(av, k, _)| *av == api_version && *k == kind)
        .map(|(_, _, d)| *d)
}

/// Why a protobuf request body cannot be decoded. A kind without a message table is
/// [`ProtobufError::UnsupportedKind`] (answered 415); the rest are malformed bodies.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProtobufError {
    /// The body does not start with `k8s\0`.
    #[error("missing the protobuf envelope prefix")]
    MissingEnvelope,
    /// No message table for the kind: only JSON is accepted for it.
    #[error("protobuf bodies are not supported for {api_version} {kind}; send application/json")]
    UnsupportedKind {
        /// The envelope's `apiVersion`.
        api_version: String,
        /// The envelope's `kind`.
        kind: String,
    },
    /// The body ends inside a varint.
    #[error("truncated varint")]
    TruncatedVarint,
    /// A varint has more than ten bytes.
    #[error("varint too long")]
    VarintTooLong,
    /// The body ends inside a field.
    #[error("truncated field")]
    TruncatedField,
    /// The body ends inside a double.
    #[error("truncated double")]
    TruncatedDouble,
    /// A field's wire type is not one protobuf defines (groups included).
    #[error("unsupported wire type {wire}")]
    UnsupportedWireType {
        /// The wire type.
        wire: u64,
    },
    /// A known field has a wire type that does not fit its type.
    #[error("field {field} has unexpected wire type {wire}")]
    UnexpectedWireType {
        /// The field's JSON name.
        field: String,
        /// The wire type found.
        wire: u64,
    },
    /// A string field is not UTF-8.
    #[error("invalid UTF-8 in string field")]
    InvalidUtf8,
    /// A Time message is out of range.
    #[error("invalid time: {cause}")]
    InvalidTime {
        /// The time library's message.
        cause: String,
    },
    /// A `RawExtension` does not hold JSON.
    #[error("embedded object is not JSON: {cause}")]
    EmbeddedNotJson {
        /// The JSON parser's message.
        cause: String,
    },
}

struct Reader<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, ProtobufError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self.b.get(self.i).ok_or(ProtobufError::TruncatedVarint)?;
            self.i += 1;
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(ProtobufError::VarintTooLong)
    }

    fn bytes(&mut self) -> Result<&'a [u8], ProtobufError> {
        let n = self.varint()? as usize;
        let end = self
            .i
            .checked_add(n)
            .filter(|e| *e <= self.b.len())
            .ok_or(ProtobufError::TruncatedField)?;
        let s = &self.b[self.i..end];
        self.i = end;
        Ok(s)
    }

    fn skip(&mut self, wire: u64) -> Result<(), ProtobufError> {
        match wire {
            0 => {
                self.varint()?;
            }
            1 => self.i += 8,
            2 => {
                self.bytes()?;
            }
            5 => self.i += 4,
            w => return Err(ProtobufError::UnsupportedWireType { wire: w }),
        }
        if self.i > self.b.len() {
            return Err(ProtobufError::TruncatedField);
        }
        Ok(())
    }

    /// Iterates (field number, wire type).
    fn next_key(&mut self) -> Result<Option<(u32, u64)>, ProtobufError> {
        if self.i >= self.b.len() {
            return Ok(None);
        }
        let k = self.varint()?;
        Ok(Some(((k >> 3) as u32, k & 7)))
    }
}

fn utf8(b: &[u8]) -> Result<String, ProtobufError> {
    String::from_utf8(b.to_vec()).map_err(|_| ProtobufError::InvalidUtf8)
}

fn sub(b: &[u8]) -> Reader<'_> {
    Reader { b, i: 0 }
}

/// Seconds and nanos of a Time message; `None` for Go's zero time.
fn time(b: &[u8]) -> Result<Option<Value>, ProtobufError> {
    let mut r = sub(b);
    let (mut secs, mut nanos) = (0i64, 0i64);
    while let Some((f, w)) = r.next_key()? {
        match (f, w) {
            (1, 0) => secs = r.varint()? as i64,
            (2, 0) => nanos = r.varint()? as i64,
            _ => r.skip(w)?,
        }
    }
    // Go's zero time.Time (year 1) and the Unix epoch with nothing set both mean unset.
    if secs == -62_135_596_800 || (secs == 0 && nanos == 0) {
        return Ok(None);
    }
    let t = jiff::Timestamp::new(secs, nanos as i32).map_err(|e| ProtobufError::InvalidTime {
        cause: e.to_string(),
    })?;
    Ok(Some(json!(t.to_string())))
}

fn first_string(b: &[u8]) -> Result<String, ProtobufError> {
    let mut r = sub(b);
    let mut s = String::new();
    while let Some((f, w)) = r.next_key()? {
        match (f, w) {
            (1, 2) => s = utf8(r.bytes()?)?,
            _ => r.skip(w)?,
        }
    }
    Ok(s)
}

fn int_or_string(b: &[u8]) -> Result<Value, ProtobufError> {
    let mut r = sub(b);
    let (mut ty, mut int, mut s) = (0u64, 0i64, String::new());
    while let Some((f, w)) = r.next_key()? {
        match (f, w) {
            (1, 0) => ty = r.varint()?,
            (2, 0) => int = r.varint()? as i64,
            (3, 2) => s = utf8(r.bytes()?)?,
            _ => r.skip(w)?,
        }
    }
    Ok(if ty == 1 { json!(s) } else { json!(int) })
}

fn raw(b: &[u8]) -> Result<Value, ProtobufError> {
    let mut r = sub(b);
    let mut out = Value::Null;
    while let Some((f, w)) = r.next_key()? {
        match (f, w) {
            (1, 2) => {
                let bytes = r.bytes()?;
                out =
                    serde_json::from_slice(bytes).map_err(|e| ProtobufError::EmbeddedNotJson {
                        cause: e.to_string(),
                    })?;
            }
            _ => r.skip(w)?,
        }
    }
    Ok(out)
}

fn duration(b: &[u8]) -> Result<Value, ProtobufError> {
    let mut r = sub(b);
    let mut nanos = 0i64;
    while let Some((f, w)) = r.next_key()? {
        match (f, w) {
            (1, 0) => nanos = r.varint()? as i64,
            _ => r.skip(w)?,
        }
    }
    let d = std::time::Duration::from_nanos(nanos.max(0) as u64);
    Ok(json!(format!("{}s", d.as_secs_f64())))
}

/// One value of type `ty` with wire type `wire`; `None` means "leave the field out".
fn value(
    r: &mut Reader<'_>,
    ty: Ty,
    wire: u64,
    name: &str,
    required: bool,
) -> Result<Option<Value>, ProtobufError> {
    let keep_zero = required || KEEP_ZERO.contains(&name);
    Ok(match (ty, wire) {
        (Ty::Str, 2) => Some(json!(utf8(r.bytes()?)?)).filter(|v| v != ""),
        (Ty::Int, 0) => Some(json!(r.varint()? as i64)).filter(|v| keep_zero || v != 0),
        (Ty::Bool, 0) => Some(json!(r.varint()? != 0)).filter(|v| keep_zero || v != false),
        (Ty::F64, 1) => {
            let end = r.i + 8;
            let b: [u8; 8] =
                r.b.get(r.i..end)
                    .ok_or(ProtobufError::TruncatedDouble)?
                    .try_into()
                    .unwrap();
            r.i = end;
            Some(json!(f64::from_le_bytes(b))).filter(|v| keep_zero || v != 0.0)
        }
        (Ty::Bytes, 2) => Some(json!(
            base64::engine::general_purpose::STANDARD.encode(r.bytes()?)
        )),
        (Ty::Time, 2) => time(r.bytes()?)?,
        (Ty::Duration, 2) => Some(duration(r.bytes()?)?),
        (Ty::Raw, 2) => Some(raw(r.bytes()?)?).filter(|v| !v.is_null()),
        (Ty::Quantity, 2) => Some(json!(first_string(r.bytes()?)?)),
        (Ty::IntOrString, 2) => Some(int_or_string(r.bytes()?)?),
        (Ty::Msg(d), 2) => Some(message(r.bytes()?, d)?),
        (_, w) => {
            return Err(ProtobufError::UnexpectedWireType {
                field: name.to_string(),
                wire: w,
            });
        }
    })
}

fn map_entry(b: &[u8], ty: Ty, name: &str) -> Result<(String, Value), ProtobufError> {
    let mut r = sub(b);
    let (mut k, mut v) = (String::new(), json!(""));
    while let Some((f, w)) = r.next_key()? {
        match (f, w) {
            (1, 2) => k = utf8(r.bytes()?)?,
            // An empty string is a value in a map, not an absent field.
            (2, 2) if matches!(ty, Ty::Str) => v = json!(utf8(r.bytes()?)?),
            (2, _) => v = value(&mut r, ty, w, name, false)?.unwrap_or(json!("")),
            _ => r.skip(w)?,
        }
    }
    Ok((k, v))
}

fn message(b: &[u8], desc: &[F]) -> Result<Value, ProtobufError> {
    let mut out = Map::new();
    let mut r = sub(b);
    while let Some((num, wire)) = r.next_key()? {
        let Some((_, name, ty, required)) = desc.iter().find(|(n, _, _, _)| *n == num) else {
            r.skip(wire)?;
            continue;
        };
        match ty {
            Ty::Rep(inner) => {
                let v = match (inner, wire) {
                    (Ty::Str, 2) => Some(json!(utf8(r.bytes()?)?)),
                    (Ty::Int, 0) => Some(json!(r.varint()? as i64)),
                    _ => value(&mut r, **inner, wire, name, false)?,
                };
                if let Some(v) = v {
                    let a = out.entry(name.to_string()).or_insert_with(|| json!([]));
                    if let Some(a) = a.as_array_mut() {
                        a.push(v);
                    }
                }
            }
            Ty::Map(inner) => {
                if wire != 2 {
                    return Err(ProtobufError::UnexpectedWireType {
                        field: name.to_string(),
                        wire,
                    });
                }
                let (k, v) = map_entry(r.bytes()?, **inner, name)?;
                let m = out.entry(name.to_string()).or_insert_with(|| json!({}));
                m[k] = v;
            }
            _ => {
                if let Some(v) = value(&mut r, *ty, wire, name, *required)? {
                    out.insert(name.to_string(), v);
                }
            }
        }
    }
    Ok(Value::Object(out))
}

/// Decodes a protobuf-encoded object into its JSON form.
///
/// # Errors
/// [`ProtobufError::UnsupportedKind`] for a kind without a message table, another
/// [`ProtobufError`] for a malformed body.
pub fn decode(body: &[u8]) -> Result<Value, ProtobufError> {
    let rest = body
        .strip_prefix(b"k8s\0")
        .ok_or(ProtobufError::MissingEnvelope)?;
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
    let desc = descriptor(&av, &kind).ok_or_else(|| ProtobufError::UnsupportedKind {
        api_version: av.clone(),
        kind: kind.clone(),
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
        let tm = [field(1, b"example.com/v1"), field(2, b"Widget")].concat();
        let body = [b"k8s\0".to_vec(), field(1, &tm)].concat();
        assert!(
            decode(&body)
                .unwrap_err()
                .to_string()
                .contains("example.com/v1 Widget")
        );
        assert!(decode(b"k8s\0\x0a\xff").is_err());
        assert!(decode(b"nope").is_err());
    }

    fn varint_field(num: u32, v: u8) -> Vec<u8> {
        vec![(num << 3) as u8, v]
    }

    #[test]
    fn every_served_built_in_kind_has_a_message_table() {
        // CustomResourceDefinitions are the one exception (see the module docs).
        let missing: Vec<String> = crate::registry::builtins()
            .iter()
            .filter(|i| i.kind != "CustomResourceDefinition")
            .filter(|i| descriptor(&i.api_version(), &i.kind).is_none())
            .map(|i| format!("{} {}", i.api_version(), i.kind))
            .collect();
        assert!(missing.is_empty(), "no protobuf table for {missing:?}");
    }

    #[test]
    fn zero_is_kept_for_required_and_pointer_fields_only() {
        // PriorityClass{value: 0 (required), globalDefault: false (optional)}.
        let pc = [
            field(1, &field(1, b"low")),
            varint_field(2, 0),
            varint_field(3, 0),
        ]
        .concat();
        let tm = [
            field(1, b"scheduling.k8s.io/v1"),
            field(2, b"PriorityClass"),
        ]
        .concat();
        let body = [b"k8s\0".to_vec(), field(1, &tm), field(2, &pc)].concat();
        let v = decode(&body).unwrap();
        assert_eq!(v["value"], json!(0));
        assert!(v.get("globalDefault").is_none(), "{v}");

        // Deployment spec{replicas: 0 (a pointer), minReadySeconds: 0 (a value)}.
        let spec = [varint_field(1, 0), varint_field(5, 0)].concat();
        let d = [field(1, &field(1, b"web")), field(2, &spec)].concat();
        let tm = [field(1, b"apps/v1"), field(2, b"Deployment")].concat();
        let body = [b"k8s\0".to_vec(), field(1, &tm), field(2, &d)].concat();
        let v = decode(&body).unwrap();
        assert_eq!(v["spec"], json!({"replicas": 0}), "{v}");
    }
}
