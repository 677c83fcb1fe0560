//! The pipeline's object ([`ObjectRef`], named by the `/kratix` contract), read from the
//! control plane.

use crate::PipelineError;
use kube::Client;
use kube::api::DynamicObject;
use plinth_api::contract::ObjectRef;

/// GETs the object.
///
/// # Errors
/// [`PipelineError`] naming the object when the API refuses or cannot be reached.
pub async fn get(object: &ObjectRef, client: Client) -> Result<DynamicObject, PipelineError> {
    object
        .api(client)
        .get(&object.name)
        .await
        .map_err(|e| PipelineError::kube(format!("getting {}", object.describe()), e))
}
