//! The target side: which kinds the API serves (discovery, cached per pass and refreshed
//! after CRDs land), listing live objects, server-side apply, deletion, and the
//! client-side no-op check.

use std::collections::HashMap;
use std::time::Duration;

use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::{ApiResource, Scope};
use serde_json::Value;

use crate::FIELD_MANAGER;
use crate::object_ref::ObjectRef;

/// A served kind.
#[derive(Clone, Debug)]
pub(crate) struct Served {
    pub resource: ApiResource,
    pub namespaced: bool,
}

/// The target API with a discovery cache.
pub(crate) struct Target {
    pub client: kube::Client,
    kinds: HashMap<(String, String), Option<Served>>,
    /// True when the target is Plinth's embedded server (version `+plinth`).
    pub embedded: bool,
    /// Number of write requests sent (apply, delete), for benchmarks and tests.
    pub writes: u64,
}

/// Why a document could not be applied.
pub(crate) enum ApplyError {
    /// The API answered 409 Conflict (ownership conflict of server-side apply).
    Conflict(String),
    /// Any other API answer or transport error.
    Other(String),
}

/// Why discovery, a list, a delete or a wait on the target failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TargetError {
    /// Discovery of a kind failed for another reason than the kind not being served.
    #[error("discovering {kind} ({api_version}): {cause}")]
    Discovery {
        kind: String,
        api_version: String,
        cause: String,
    },
    /// Listing the objects of a resource failed.
    #[error("listing {plural}: {cause}")]
    List { plural: String, cause: String },
    /// Deleting an object failed (other than it being gone already).
    #[error("deleting {object}: {cause}")]
    Delete { object: String, cause: String },
    /// A CRD did not report `Established=True` in time.
    #[error("CustomResourceDefinition {name} is not Established after {secs}s")]
    NotEstablished { name: String, secs: u64 },
}

impl Target {
    pub(crate) async fn new(client: kube::Client) -> Target {
        let embedded = client
            .apiserver_version()
            .await
            .map(|v| v.git_version.contains("plinth"))
            .unwrap_or(false);
        Target {
            client,
            kinds: HashMap::new(),
            embedded,
            writes: 0,
        }
    }

    /// Forgets cached answers (after CRDs were applied, or at the start of a pass).
    pub(crate) fn forget_kinds(&mut self) {
        self.kinds.clear();
    }

    /// The served resource of `apiVersion` + `kind`; `Ok(None)` when not served.
    pub(crate) async fn resolve(
        &mut self,
        api_version: &str,
        kind: &str,
    ) -> Result<Option<Served>, TargetError> {
        let key = (api_version.to_string(), kind.to_string());
        if let Some(s) = self.kinds.get(&key) {
            return Ok(s.clone());
        }
        let (group, version) = match api_version.rsplit_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let served = match kube::discovery::pinned_kind(&self.client, &gvk).await {
            Ok((ar, caps)) => Some(Served {
                resource: ar,
                namespaced: caps.scope == Scope::Namespaced,
            }),
            Err(kube::Error::Api(e)) if e.is_not_found() => None,
            Err(kube::Error::Discovery(_)) => None,
            Err(e) => {
                return Err(TargetError::Discovery {
                    kind: kind.to_string(),
                    api_version: api_version.to_string(),
                    cause: e.to_string(),
                });
            }
        };
        self.kinds.insert(key, served.clone());
        Ok(served)
    }

    fn api(&self, s: &Served, ns: Option<&str>) -> Api<DynamicObject> {
        match (s.namespaced, ns) {
            (true, Some(ns)) => Api::namespaced_with(self.client.clone(), ns, &s.resource),
            _ => Api::all_with(self.client.clone(), &s.resource),
        }
    }

    /// Every live object of a resource, by (namespace, name).
    pub(crate) async fn list(
        &self,
        s: &Served,
    ) -> Result<HashMap<(Option<String>, String), Value>, TargetError> {
        let api = self.api(s, None);
        let list = api
            .list(&ListParams::default())
            .await
            .map_err(|e| TargetError::List {
                plural: s.resource.plural.clone(),
                cause: e.to_string(),
            })?;
        let mut out = HashMap::new();
        for o in list.items {
            let ns = o.metadata.namespace.clone();
            let name = o.metadata.name.clone().unwrap_or_default();
            let mut v = serde_json::to_value(&o).unwrap_or(Value::Null);
            v["apiVersion"] = Value::String(s.resource.api_version.clone());
            v["kind"] = Value::String(s.resource.kind.clone());
            out.insert((ns, name), v);
        }
        Ok(out)
    }

    /// Server-side apply of one object.
    pub(crate) async fn apply(
        &mut self,
        s: &Served,
        id: &ObjectRef,
        obj: &Value,
        force: bool,
    ) -> Result<Value, ApplyError> {
        let api = self.api(s, id.namespace.as_deref());
        let mut pp = PatchParams::apply(FIELD_MANAGER);
        pp.force = force;
        self.writes += 1;
        match api.patch(&id.name, &pp, &Patch::Apply(obj)).await {
            Ok(o) => Ok(serde_json::to_value(&o).unwrap_or(Value::Null)),
            Err(kube::Error::Api(e)) if e.is_conflict() => Err(ApplyError::Conflict(e.message)),
            Err(kube::Error::Api(e)) => {
                Err(ApplyError::Other(format!("{} ({})", e.message, e.reason)))
            }
            Err(e) => Err(ApplyError::Other(e.to_string())),
        }
    }

    /// Deletes one object (background propagation); a missing object is fine.
    pub(crate) async fn delete(&mut self, s: &Served, id: &ObjectRef) -> Result<(), TargetError> {
        let api = self.api(s, id.namespace.as_deref());
        self.writes += 1;
        match api.delete(&id.name, &DeleteParams::background()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.is_not_found() => Ok(()),
            Err(e) => Err(TargetError::Delete {
                object: id.display(),
                cause: e.to_string(),
            }),
        }
    }

    /// Waits until a CRD reports `Established=True`.
    pub(crate) async fn wait_established(
        &self,
        name: &str,
        timeout: Duration,
    ) -> Result<(), TargetError> {
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
        let api: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Ok(Some(crd)) = api.get_opt(name).await {
                let established = crd
                    .status
                    .and_then(|s| s.conditions)
                    .unwrap_or_default()
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True");
                if established {
                    return Ok(());
                }
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(TargetError::NotEstablished {
                    name: name.to_string(),
                    secs: timeout.as_secs(),
                });
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// True when every field of `desired` is present with the same value in `live` (lists
/// item by item). Secret `stringData` is compared against the base64 `data` it becomes.
pub(crate) fn contains(live: &Value, desired: &Value) -> bool {
    match (live, desired) {
        (Value::Object(l), Value::Object(d)) => d.iter().all(|(k, dv)| {
            if k == "stringData" && l.get("kind").and_then(|k| k.as_str()) == Some("Secret") {
                return string_data_matches(l.get("data"), dv);
            }
            match l.get(k) {
                Some(lv) => contains(lv, dv),
                None => dv.is_null() || dv.as_object().is_some_and(|m| m.is_empty()),
            }
        }),
        (Value::Array(l), Value::Array(d)) => {
            l.len() == d.len() && l.iter().zip(d).all(|(a, b)| contains(a, b))
        }
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (l, d) => l == d,
    }
}

fn string_data_matches(data: Option<&Value>, string_data: &Value) -> bool {
    use base64::Engine;
    let Some(sd) = string_data.as_object() else {
        return false;
    };
    sd.iter().all(|(k, v)| {
        let want = v
            .as_str()
            .map(|s| base64::engine::general_purpose::STANDARD.encode(s));
        data.and_then(|d| d.get(k)).and_then(|x| x.as_str()) == want.as_deref()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn subset_check() {
        let live = json!({"kind": "Secret", "metadata": {"name": "a", "uid": "u"}, "data": {"k": "dg=="}, "spec": {"l": [{"a": 1, "b": 2}]}});
        assert!(contains(
            &live,
            &json!({"metadata": {"name": "a"}, "stringData": {"k": "v"}, "spec": {"l": [{"a": 1}]}})
        ));
        assert!(!contains(&live, &json!({"stringData": {"k": "w"}})));
        assert!(!contains(
            &live,
            &json!({"spec": {"l": [{"a": 1}, {"a": 2}]}})
        ));
    }
}
