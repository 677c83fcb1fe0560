//! `certificates.k8s.io/v1` CertificateSigningRequests as kube-apiserver keeps them: the
//! requester's user name, uid, groups and extra attributes written into the spec at
//! create (whatever the client sent: `pkg/registry/certificates/certificates/strategy.go`),
//! the spec immutable afterwards, and the checks of `pkg/apis/certificates/validation`
//! on `spec.request`, `spec.signerName`, `spec.usages` and `spec.expirationSeconds`.
//! Nothing signs or approves them here (that is the controller-manager's work).

use base64::Engine as _;
use serde_json::{Value, json};

use crate::auth::Identity;
use crate::resource::{Cause, ResourceInfo};

/// Whether `info` is the CertificateSigningRequest resource.
pub(crate) fn is_csr(info: &ResourceInfo) -> bool {
    info.builtin
        && info.group == "certificates.k8s.io"
        && info.plural == "certificatesigningrequests"
}

/// The key usages kube-apiserver accepts (`certificates.KeyUsage`).
const USAGES: &[&str] = &[
    "signing",
    "digital signature",
    "content commitment",
    "key encipherment",
    "key agreement",
    "data encipherment",
    "cert sign",
    "crl sign",
    "encipher only",
    "decipher only",
    "any",
    "server auth",
    "client auth",
    "code signing",
    "email protection",
    "s/mime",
    "ipsec end system",
    "ipsec tunnel",
    "ipsec user",
    "timestamping",
    "ocsp signing",
    "microsoft sgc",
    "netscape sgc",
];

/// Writes the requester into a new request's spec (`username`, `uid`, `groups`, `extra`),
/// replacing what the client sent, and drops any status (a request is never created
/// approved).
pub(crate) fn set_requester(obj: &mut Value, id: &Identity) {
    if !obj["spec"].is_object() {
        obj["spec"] = json!({});
    }
    let spec = obj["spec"].as_object_mut().expect("an object");
    spec.insert("username".into(), json!(id.user));
    for (k, v) in [
        ("uid", (!id.uid.is_empty()).then(|| json!(id.uid))),
        ("groups", (!id.groups.is_empty()).then(|| json!(id.groups))),
        ("extra", (!id.extra.is_empty()).then(|| json!(id.extra))),
    ] {
        match v {
            Some(v) => spec.insert(k.into(), v),
            None => spec.remove(k),
        };
    }
    if let Some(m) = obj.as_object_mut() {
        m.remove("status");
    }
}

/// On update the spec is the stored one (kube's strategy copies it back).
pub(crate) fn keep_spec(obj: &mut Value, old: &Value) {
    if let Some(spec) = old.get("spec") {
        obj["spec"] = spec.clone();
    }
}

fn invalid(field: &str, value: String, why: &str) -> Cause {
    Cause {
        reason: "FieldValueInvalid".into(),
        message: format!("Invalid value: {value}: {why}"),
        field: field.into(),
    }
}

/// Go's `%#v` of a byte slice, as kube-apiserver quotes `spec.request` in its errors.
fn go_bytes(b: &[u8]) -> String {
    let items: Vec<String> = b.iter().map(|x| format!("0x{x:x}")).collect();
    format!("[]byte{{{}}}", items.join(", "))
}

/// kube-apiserver's checks of a CertificateSigningRequest's spec.
pub(crate) fn causes(obj: &Value) -> Vec<Cause> {
    let mut out = Vec::new();
    let spec = obj.get("spec").cloned().unwrap_or(json!({}));
    match spec.get("request").and_then(Value::as_str) {
        None | Some("") => out.push(Cause {
            reason: "FieldValueRequired".into(),
            message: "Required value".into(),
            field: "spec.request".into(),
        }),
        Some(b64) => {
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(b64)
                .unwrap_or_default();
            if let Err(why) = check_pem_request(&bytes) {
                out.push(invalid("spec.request", go_bytes(&bytes), why));
            }
        }
    }
    match spec.get("signerName").and_then(Value::as_str) {
        None | Some("") => out.push(Cause {
            reason: "FieldValueRequired".into(),
            message: "Required value".into(),
            field: "spec.signerName".into(),
        }),
        Some(name) => {
            if let Some(why) = signer_name_error(name) {
                out.push(invalid("spec.signerName", format!("{name:?}"), why));
            }
        }
    }
    let usages = spec
        .get("usages")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if usages.is_empty() {
        out.push(Cause {
            reason: "FieldValueRequired".into(),
            message: "Required value".into(),
            field: "spec.usages".into(),
        });
    }
    let mut seen = std::collections::BTreeSet::new();
    for (i, u) in usages.iter().enumerate() {
        let u = u.as_str().unwrap_or_default();
        if !USAGES.contains(&u) {
            let supported: Vec<String> = USAGES.iter().map(|s| format!("{s:?}")).collect();
            out.push(Cause {
                reason: "FieldValueNotSupported".into(),
                message: format!(
                    "Unsupported value: {u:?}: supported values: {}",
                    supported.join(", ")
                ),
                field: format!("spec.usages[{i}]"),
            });
        } else if !seen.insert(u) {
            out.push(Cause {
                reason: "FieldValueDuplicate".into(),
                message: format!("Duplicate value: {u:?}"),
                field: format!("spec.usages[{i}]"),
            });
        }
    }
    if let Some(e) = spec.get("expirationSeconds").and_then(Value::as_i64)
        && e < 600
    {
        out.push(invalid(
            "spec.expirationSeconds",
            e.to_string(),
            "may not specify a duration less than 600 seconds (10 minutes)",
        ));
    }
    out
}

/// A PEM block of type `CERTIFICATE REQUEST` holding DER (kube also parses it as PKCS#10).
fn check_pem_request(bytes: &[u8]) -> Result<(), &'static str> {
    let text =
        std::str::from_utf8(bytes).map_err(|_| "PEM block type must be CERTIFICATE REQUEST")?;
    let begin = "-----BEGIN CERTIFICATE REQUEST-----";
    let end = "-----END CERTIFICATE REQUEST-----";
    let start = text
        .find(begin)
        .ok_or("PEM block type must be CERTIFICATE REQUEST")?;
    let rest = &text[start + begin.len()..];
    let stop = rest
        .find(end)
        .ok_or("PEM block type must be CERTIFICATE REQUEST")?;
    let body: String = rest[..stop]
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let der = base64::engine::general_purpose::STANDARD
        .decode(body)
        .map_err(|_| "PEM block type must be CERTIFICATE REQUEST")?;
    // A DER SEQUENCE: what x509.ParseCertificateRequest reads first.
    if der.first() != Some(&0x30) {
        return Err("asn1: structure error: tags don't match");
    }
    Ok(())
}

/// kube's signerName rule: `<domain>/<path>`, the domain a DNS-1123 subdomain.
fn signer_name_error(name: &str) -> Option<&'static str> {
    let Some((domain, path)) = name.split_once('/') else {
        return Some(
            "must be a fully qualified domain and path of the form 'example.com/signer-name'",
        );
    };
    if path.is_empty() {
        return Some("validating path: must not be empty");
    }
    let ok_domain = !domain.is_empty()
        && domain.len() <= 253
        && domain.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        });
    if !ok_domain {
        return Some(
            "must be a fully qualified domain and path of the form 'example.com/signer-name'",
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csr(request: &str, signer: &str, usages: Value) -> Value {
        json!({"spec": {"request": request, "signerName": signer, "usages": usages}})
    }

    #[test]
    fn the_requester_is_written_over_what_the_client_sent() {
        let mut o = json!({"spec": {"username": "mallory", "groups": ["system:masters"]}, "status": {"conditions": []}});
        let id = Identity {
            user: "user1".into(),
            groups: vec!["group1".into(), "system:authenticated".into()],
            uid: "u-1".into(),
            ..Identity::default()
        };
        set_requester(&mut o, &id);
        assert_eq!(o["spec"]["username"], "user1");
        assert_eq!(
            o["spec"]["groups"],
            json!(["group1", "system:authenticated"])
        );
        assert_eq!(o["spec"]["uid"], "u-1");
        assert!(o.get("status").is_none());
    }

    #[test]
    fn request_signer_and_usages_are_checked() {
        let pem = "-----BEGIN CERTIFICATE REQUEST-----\nMAA=\n-----END CERTIFICATE REQUEST-----\n";
        let good = base64::engine::general_purpose::STANDARD.encode(pem);
        assert!(
            causes(&csr(
                &good,
                "kubernetes.io/kube-apiserver-client",
                json!(["client auth"])
            ))
            .is_empty()
        );
        let bad = base64::engine::general_purpose::STANDARD.encode("hello");
        let c = causes(&csr(&bad, "nodomain", json!(["client auth", "flying"])));
        let fields: Vec<&str> = c.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(
            fields,
            ["spec.request", "spec.signerName", "spec.usages[1]"]
        );
        assert!(
            c[0].message
                .ends_with("PEM block type must be CERTIFICATE REQUEST"),
            "{}",
            c[0].message
        );
        assert!(
            c[0].message.starts_with("Invalid value: []byte{0x68, 0x65"),
            "{}",
            c[0].message
        );
        assert_eq!(c[2].reason, "FieldValueNotSupported");
    }
}
