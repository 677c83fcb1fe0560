//! The request a HealthRecord reports on, and that request's API resource.

use kube::ResourceExt;
use kube::api::{Api, ApiResource};
use plinth_api::HealthRecord;

use crate::Error;
use crate::context::Context;

/// The request a record reports on.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Target {
    /// Promise name.
    pub promise: String,
    /// Request namespace.
    pub namespace: String,
    /// Request name.
    pub name: String,
}

impl Target {
    /// The request `record` references (`resourceRef.namespace` defaults to the record's).
    pub fn of(record: &HealthRecord) -> Target {
        let d = &record.spec.data;
        Target {
            promise: d.promise_ref.name.clone(),
            namespace: d
                .resource_ref
                .namespace
                .clone()
                .filter(|n| !n.is_empty())
                .or_else(|| record.namespace())
                .unwrap_or_default(),
            name: d.resource_ref.name.clone(),
        }
    }
}

impl Target {
    /// The value of the request label (`names::REQUEST_LABEL`) on this request's
    /// records: the first 32 hex digits of SHA-256 over promise, namespace and name.
    pub fn label_value(&self) -> String {
        use sha2::Digest as _;
        let digest = sha2::Sha256::new()
            .chain_update(self.promise.as_bytes())
            .chain_update([0])
            .chain_update(self.namespace.as_bytes())
            .chain_update([0])
            .chain_update(self.name.as_bytes())
            .finalize();
        hex::encode(&digest[..16])
    }
}

/// The API resource of `promise`'s requests: from its running request controller, else
/// from the Promise's `spec.api`. `None` when the Promise is gone or has no API.
pub async fn request_resource(ctx: &Context, promise: &str) -> Result<Option<ApiResource>, Error> {
    if let Some(api) = ctx.request_controllers.api_of(promise) {
        return Ok(Some(api.resource()));
    }
    let promises: Api<plinth_api::Promise> = Api::all(ctx.client.clone());
    let Some(p) = promises.get_opt(promise).await? else {
        return Ok(None);
    };
    Ok(crate::support::resources::request_resource_of(&p))
}
