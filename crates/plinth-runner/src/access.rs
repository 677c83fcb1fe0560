//! What a Pod needs from the control plane, behind a trait so the executor can be driven
//! by a `kube::Client` (always, in the product) or by fixed objects (unit tests).

use std::future::Future;

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, ServiceAccount};
use kube::api::{Api, PostParams};

use crate::error::RunnerError;

/// Read access to the objects a Pod references, and ServiceAccount tokens.
pub trait ClusterAccess: Send + Sync {
    /// `GET /api/v1/namespaces/{ns}/configmaps/{name}`; `Ok(None)` when it does not exist.
    fn config_map(
        &self,
        ns: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<ConfigMap>, RunnerError>> + Send;
    /// `GET /api/v1/namespaces/{ns}/secrets/{name}`; `Ok(None)` when it does not exist.
    fn secret(
        &self,
        ns: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<Secret>, RunnerError>> + Send;
    /// A token for ServiceAccount `ns/sa` bound to `pod`, through the TokenRequest API
    /// (`POST /api/v1/namespaces/{ns}/serviceaccounts/{sa}/token`).
    fn service_account_token(
        &self,
        ns: &str,
        sa: &str,
        pod: &Pod,
        audiences: Vec<String>,
        expiration_seconds: i64,
    ) -> impl Future<Output = Result<String, RunnerError>> + Send;
}

impl ClusterAccess for kube::Client {
    async fn config_map(&self, ns: &str, name: &str) -> Result<Option<ConfigMap>, RunnerError> {
        Api::<ConfigMap>::namespaced(self.clone(), ns)
            .get_opt(name)
            .await
            .map_err(|e| RunnerError::kube(format!("get ConfigMap {ns}/{name}"), e))
    }

    async fn secret(&self, ns: &str, name: &str) -> Result<Option<Secret>, RunnerError> {
        Api::<Secret>::namespaced(self.clone(), ns)
            .get_opt(name)
            .await
            .map_err(|e| RunnerError::kube(format!("get Secret {ns}/{name}"), e))
    }

    async fn service_account_token(
        &self,
        ns: &str,
        sa: &str,
        pod: &Pod,
        audiences: Vec<String>,
        expiration_seconds: i64,
    ) -> Result<String, RunnerError> {
        let bound = pod.metadata.uid.as_ref().map(|uid| BoundObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: pod.metadata.name.clone(),
            uid: Some(uid.clone()),
        });
        let req = TokenRequest {
            spec: TokenRequestSpec {
                audiences,
                bound_object_ref: bound,
                expiration_seconds: Some(expiration_seconds),
            },
            ..Default::default()
        };
        let resp = Api::<ServiceAccount>::namespaced(self.clone(), ns)
            .create_token_request(sa, &PostParams::default(), &req)
            .await
            .map_err(|e| {
                RunnerError::kube(format!("TokenRequest for ServiceAccount {ns}/{sa}"), e)
            })?;
        resp.status
            .map(|s| s.token)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| RunnerError::InvalidSpec {
                object: format!("ServiceAccount {ns}/{sa}"),
                field: "status.token".into(),
                message: "TokenRequest returned no token".into(),
            })
    }
}
