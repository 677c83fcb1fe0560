#!/usr/bin/env python3
"""Generates crates/plinth-apiserver/src/protobuf/descriptors.rs: the field numbers, JSON
names and types of the Kubernetes protobuf messages of every built-in kind the embedded
API server serves and kubectl sends as protobuf.

Field numbers and types come from the `k8s-pb` crate (generated from Kubernetes'
generated.proto files); JSON names from `k8s-openapi` (the same API types' JSON form).

Usage: scripts/gen-protobuf-descriptors.py <k8s-pb src dir> <k8s-openapi src/v1_XX dir> > out.rs
"""
import os
import re
import sys

PB, OPENAPI = sys.argv[1], sys.argv[2]

# (apiVersion, kind, module, message)
ROOTS = [
    ("v1", "Namespace", "api/core/v1", "Namespace"),
    ("v1", "ConfigMap", "api/core/v1", "ConfigMap"),
    ("v1", "Secret", "api/core/v1", "Secret"),
    ("v1", "ServiceAccount", "api/core/v1", "ServiceAccount"),
    ("v1", "Pod", "api/core/v1", "Pod"),
    ("v1", "Event", "api/core/v1", "Event"),
    ("v1", "Service", "api/core/v1", "Service"),
    ("v1", "Endpoints", "api/core/v1", "Endpoints"),
    ("v1", "PersistentVolumeClaim", "api/core/v1", "PersistentVolumeClaim"),
    ("v1", "PersistentVolume", "api/core/v1", "PersistentVolume"),
    ("v1", "Node", "api/core/v1", "Node"),
    ("v1", "LimitRange", "api/core/v1", "LimitRange"),
    ("v1", "ResourceQuota", "api/core/v1", "ResourceQuota"),
    ("v1", "PodTemplate", "api/core/v1", "PodTemplate"),
    ("v1", "ReplicationController", "api/core/v1", "ReplicationController"),
    ("events.k8s.io/v1", "Event", "api/events/v1", "Event"),
    ("apps/v1", "Deployment", "api/apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet", "api/apps/v1", "StatefulSet"),
    ("apps/v1", "DaemonSet", "api/apps/v1", "DaemonSet"),
    ("apps/v1", "ReplicaSet", "api/apps/v1", "ReplicaSet"),
    ("apps/v1", "ControllerRevision", "api/apps/v1", "ControllerRevision"),
    ("batch/v1", "Job", "api/batch/v1", "Job"),
    ("batch/v1", "CronJob", "api/batch/v1", "CronJob"),
    ("autoscaling/v2", "HorizontalPodAutoscaler", "api/autoscaling/v2", "HorizontalPodAutoscaler"),
    ("autoscaling/v1", "HorizontalPodAutoscaler", "api/autoscaling/v1", "HorizontalPodAutoscaler"),
    ("policy/v1", "PodDisruptionBudget", "api/policy/v1", "PodDisruptionBudget"),
    ("networking.k8s.io/v1", "Ingress", "api/networking/v1", "Ingress"),
    ("networking.k8s.io/v1", "IngressClass", "api/networking/v1", "IngressClass"),
    ("networking.k8s.io/v1", "NetworkPolicy", "api/networking/v1", "NetworkPolicy"),
    ("discovery.k8s.io/v1", "EndpointSlice", "api/discovery/v1", "EndpointSlice"),
    ("storage.k8s.io/v1", "StorageClass", "api/storage/v1", "StorageClass"),
    ("storage.k8s.io/v1", "CSIDriver", "api/storage/v1", "CSIDriver"),
    ("storage.k8s.io/v1", "VolumeAttachment", "api/storage/v1", "VolumeAttachment"),
    ("scheduling.k8s.io/v1", "PriorityClass", "api/scheduling/v1", "PriorityClass"),
    ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "api/admissionregistration/v1",
     "ValidatingWebhookConfiguration"),
    ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", "api/admissionregistration/v1",
     "MutatingWebhookConfiguration"),
    ("rbac.authorization.k8s.io/v1", "Role", "api/rbac/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole", "api/rbac/v1", "ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding", "api/rbac/v1", "RoleBinding"),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "api/rbac/v1", "ClusterRoleBinding"),
    ("coordination.k8s.io/v1", "Lease", "api/coordination/v1", "Lease"),
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview", "api/authorization/v1", "SelfSubjectAccessReview"),
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview", "api/authorization/v1", "SelfSubjectRulesReview"),
    ("authorization.k8s.io/v1", "SubjectAccessReview", "api/authorization/v1", "SubjectAccessReview"),
    ("authorization.k8s.io/v1", "LocalSubjectAccessReview", "api/authorization/v1", "LocalSubjectAccessReview"),
    ("certificates.k8s.io/v1", "CertificateSigningRequest", "api/certificates/v1", "CertificateSigningRequest"),
    ("authentication.k8s.io/v1", "TokenRequest", "api/authentication/v1", "TokenRequest"),
    ("authentication.k8s.io/v1", "SelfSubjectReview", "api/authentication/v1", "SelfSubjectReview"),
]

# Messages with a JSON form of their own.
SPECIAL = {
    "apimachinery/pkg/apis/meta/v1::Time": "Ty::Time",
    "apimachinery/pkg/apis/meta/v1::MicroTime": "Ty::Time",
    "apimachinery/pkg/apis/meta/v1::FieldsV1": "Ty::Raw",
    "apimachinery/pkg/apis/meta/v1::Duration": "Ty::Duration",
    "apimachinery/pkg/runtime::RawExtension": "Ty::Raw",
    "apimachinery/pkg/api/resource::Quantity": "Ty::Quantity",
    "apimachinery/pkg/util/intstr::IntOrString": "Ty::IntOrString",
}

FIELD_RE = re.compile(r'#\[prost\(([^)]*)\)\]\s*pub (?:r#)?(\w+): ([^,\n]+(?:<[^\n]*>)?),\s*$')


def parse_module(mod):
    path = os.path.join(PB, mod, "mod.rs")
    text = open(path).read()
    msgs = {}
    for m in re.finditer(r'pub struct (\w+) \{(.*?)\n\}', text, re.S):
        name, body = m.group(1), m.group(2)
        fields = []
        lines = body.split("\n")
        attr = None
        pending = ""
        for line in lines:
            line = line.strip()
            a = re.match(r'#\[prost\((.*)\)\]$', line)
            if a:
                attr = a.group(1)
                continue
            if attr and (pending or line.startswith("pub ")):
                # A field's type may span several lines (maps).
                pending += (" " if pending else "") + line
                if pending.count("<") != pending.count(">") or not pending.endswith(","):
                    continue
                f = re.match(r"pub (?:r#)?(\w+):\s*(.+),$", pending.replace(", >", ">").replace(",>", ">"))
                if f:
                    fields.append((attr, f.group(1), f.group(2)))
                attr, pending = None, ""
        msgs[name] = fields
    return msgs


MODULES = {}


def module(mod):
    if mod not in MODULES:
        MODULES[mod] = parse_module(mod)
    return MODULES[mod]


def resolve(mod, rust_type):
    """Absolute (module, message) of a prost type path seen from `mod`."""
    t = rust_type.replace(" ", "")
    for wrap in ["::core::option::Option<", "::prost::alloc::vec::Vec<", "::prost::alloc::boxed::Box<"]:
        if t.startswith(wrap):
            t = t[len(wrap):-1]
    if t.startswith("::prost::alloc::collections::BTreeMap<") or t.startswith("::std::collections::BTreeMap<"):
        t = t[t.index("<") + 1:-1].split(",", 1)[1].strip()
        return resolve(mod, t)
    segs = t.split("::")
    parts = mod.split("/")
    while segs and segs[0] == "super":
        segs.pop(0)
        parts.pop()
    return "/".join(parts + segs[:-1]), segs[-1]


def openapi_source(mod, msg):
    snake = re.sub(r'(?<!^)(?=[A-Z][a-z])|(?<=[a-z0-9])(?=[A-Z])', '_', msg).lower()
    path = os.path.join(OPENAPI, mod, snake + ".rs")
    return open(path).read() if os.path.exists(path) else ""


def json_names(mod, msg):
    names = {}
    for j, k in re.findall(r'"(\w+)" => Field::Key_(\w+),', openapi_source(mod, msg)):
        names[k] = j
    return names


def required_scalars(mod, msg):
    """Rust names of the integer and boolean fields k8s-openapi declares without Option:
    their JSON form is always written, so a zero value is a value."""
    return set(re.findall(r'^\s*pub (?:r#)?(\w+): (?:i32|i64|bool),$', openapi_source(mod, msg), re.M))


def camel(s):
    p = s.split("_")
    return p[0] + "".join(x[:1].upper() + x[1:] for x in p[1:])


def ident(mod, msg):
    return (mod.replace("/", "_") + "_" + msg).upper()


out = {}
queue = [(m, t) for (_, _, m, t) in ROOTS]
while queue:
    mod, msg = queue.pop()
    key = ident(mod, msg)
    if key in out:
        continue
    fields = module(mod)[msg]
    names = json_names(mod, msg)
    req = required_scalars(mod, msg)
    entries = []
    for attr, fname, rtype in fields:
        tag = int(re.search(r'tag = "(\d+)"', attr).group(1))
        jname = names.get(fname, camel(fname))
        kind = attr.split(",")[0].strip()

        def scalar(k):
            return {"string": "Ty::Str", "int32": "Ty::Int", "int64": "Ty::Int", "bool": "Ty::Bool",
                    "double": "Ty::F64"}.get(k)

        def msg_ty():
            m2, t2 = resolve(mod, rtype)
            special = SPECIAL.get(f"{m2}::{t2}")
            if special:
                return special
            queue.append((m2, t2))
            return f"Ty::Msg({ident(m2, t2)})"

        if kind.startswith("btree_map"):
            vt = re.search(r'"string, (\w+)"', attr).group(1)
            inner = {"string": "Ty::Str", "bytes": "Ty::Bytes"}.get(vt) or msg_ty()
            ty = f"Ty::Map(&{inner})"
        elif kind.startswith("bytes"):
            ty = "Ty::Bytes"
            if "repeated" in attr:
                ty = "Ty::Rep(&Ty::Bytes)"
        else:
            inner = scalar(kind) or msg_ty()
            ty = f"Ty::Rep(&{inner})" if "repeated" in attr else inner
        # Required integers and booleans keep their zero value (see mod.rs).
        keep = "true" if fname in req else "false"
        entries.append(f"    ({tag}, \"{jname}\", {ty}, {keep}),")
    out[key] = f"/// `{mod}` `{msg}`.\npub(super) const {key}: &[F] = &[\n" + "\n".join(entries) + "\n];"

print("//! Generated by scripts/gen-protobuf-descriptors.py from the k8s-pb and k8s-openapi")
print("//! crates: protobuf field numbers, JSON names and types. Do not edit by hand.")
print()
print("use super::field::{F, Ty};")
print()
print("/// The message of each (apiVersion, kind) accepted as a protobuf request body.")
print("pub(super) const ROOTS: &[(&str, &str, &[F])] = &[")
for av, kind, mod, msg in ROOTS:
    print(f"    (\"{av}\", \"{kind}\", {ident(mod, msg)}),")
print("];")
for k in sorted(out):
    print()
    print(out[k])
