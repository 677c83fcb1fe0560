//! The object a pipeline works on (Promise or resource request), identified by the
//! `KRATIX_OBJECT_*` environment, and access to it through the dynamic API.

use crate::PipelineError;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::{Api, Client};
use plinth_api::contract::env;

/// Group/version/kind/plural, name and namespace of the pipeline's object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectRef {
    /// API group (`platform.kratix.io` for Promises).
    pub group: String,
    /// API version.
    pub version: String,
    /// Kind.
    pub kind: String,
    /// Plural resource name.
    pub plural: String,
    /// Object name.
    pub name: String,
    /// Namespace (`None` for cluster-scoped objects).
    pub namespace: Option<String>,
}

impl ObjectRef {
    /// Reads `KRATIX_OBJECT_GROUP`, `KRATIX_OBJECT_VERSION`, `KRATIX_OBJECT_KIND`,
    /// `KRATIX_CRD_PLURAL`, `KRATIX_OBJECT_NAME`, `KRATIX_OBJECT_NAMESPACE` and
    /// `KRATIX_CLUSTER_SCOPED` through `get` (e.g. `|k| std::env::var(k).ok()`).
    ///
    /// The namespace defaults to `default` when empty and the object is not cluster-scoped.
    /// Errors name the first missing variable.
    pub fn from_env_with(get: impl Fn(&str) -> Option<String>) -> Result<ObjectRef, PipelineError> {
        let req = |k: &str| {
            get(k).filter(|v| !v.is_empty()).ok_or_else(|| {
                PipelineError::Config(format!("environment variable {k} is required"))
            })
        };
        let version = req(env::OBJECT_VERSION)?;
        let kind = req(env::OBJECT_KIND)?;
        let plural = req(env::CRD_PLURAL)?;
        let name = req(env::OBJECT_NAME)?;
        let group = get(env::OBJECT_GROUP).unwrap_or_default();
        let cluster_scoped =
            get(env::CLUSTER_SCOPED).is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let namespace = if cluster_scoped {
            None
        } else {
            Some(
                get(env::OBJECT_NAMESPACE)
                    .filter(|s| !s.is_empty())
                    .unwrap_or_else(|| "default".to_string()),
            )
        };
        Ok(ObjectRef {
            group,
            version,
            kind,
            plural,
            name,
            namespace,
        })
    }

    /// [`ObjectRef::from_env_with`] on the process environment.
    pub fn from_env() -> Result<ObjectRef, PipelineError> {
        Self::from_env_with(|k| std::env::var(k).ok())
    }

    /// The dynamic API resource.
    pub fn api_resource(&self) -> ApiResource {
        let gvk = GroupVersionKind::gvk(&self.group, &self.version, &self.kind);
        ApiResource::from_gvk_with_plural(&gvk, &self.plural)
    }

    /// A dynamic `Api` for the object's resource and namespace.
    pub fn api(&self, client: Client) -> Api<DynamicObject> {
        let ar = self.api_resource();
        match &self.namespace {
            Some(ns) => Api::namespaced_with(client, ns, &ar),
            None => Api::all_with(client, &ar),
        }
    }

    /// `kind namespace/name` for messages.
    pub fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }

    /// GETs the object.
    pub async fn get(&self, client: Client) -> Result<DynamicObject, PipelineError> {
        self.api(client)
            .get(&self.name)
            .await
            .map_err(|e| PipelineError::kube(format!("getting {}", self.describe()), e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn from_env_defaults_and_errors() {
        let mut m: HashMap<&'static str, &'static str> = HashMap::from([
            ("KRATIX_OBJECT_GROUP", "marketplace.kratix.io"),
            ("KRATIX_OBJECT_VERSION", "v1"),
            ("KRATIX_OBJECT_KIND", "redis"),
            ("KRATIX_CRD_PLURAL", "redises"),
            ("KRATIX_OBJECT_NAME", "r1"),
            ("KRATIX_OBJECT_NAMESPACE", ""),
            ("KRATIX_CLUSTER_SCOPED", "false"),
        ]);
        fn get(m: &HashMap<&'static str, &'static str>) -> impl Fn(&str) -> Option<String> + use<> {
            let m = m.clone();
            move |k: &str| m.get(k).map(|v| v.to_string())
        }
        let r = ObjectRef::from_env_with(get(&m)).unwrap();
        assert_eq!(r.namespace.as_deref(), Some("default"));
        assert_eq!(r.api_resource().plural, "redises");
        m.insert("KRATIX_CLUSTER_SCOPED", "true");
        assert_eq!(ObjectRef::from_env_with(get(&m)).unwrap().namespace, None);
        m.remove("KRATIX_CRD_PLURAL");
        let e = ObjectRef::from_env_with(get(&m)).unwrap_err().to_string();
        assert!(e.contains("KRATIX_CRD_PLURAL"), "{e}");
    }
}
