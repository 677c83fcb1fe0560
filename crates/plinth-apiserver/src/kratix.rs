//! The embedded server's transport of [`crate::admission`]: a Kratix object about to be
//! stored is defaulted and validated in-process, what the rules read about other
//! objects answered from the store, and a refusal answered as 422 `Invalid` with the
//! field causes, so a bad Promise never reaches the controllers.

use serde_json::Value;

use crate::admission::{self, Lookup, LookupError, Operation};
use crate::app::App;
use crate::error::ApiError;
use crate::registry::rkey;
use crate::resource::ResourceInfo;
use crate::store::ObjKey;

/// Whether `info` is a kind [`admission`] admits.
pub(crate) fn admits(info: &ResourceInfo) -> bool {
    admission::AdmittedKind::find(&info.group, &info.kind).is_some()
}

/// The store as a [`Lookup`].
struct StoreLookup<'a> {
    app: &'a App,
}

fn lookup_err(what: impl Into<String>) -> impl FnOnce(crate::store::StoreError) -> LookupError {
    let what = what.into();
    move |e| LookupError {
        what,
        message: e.to_string(),
    }
}

impl Lookup for StoreLookup<'_> {
    async fn destinations(&self) -> Result<Vec<Value>, LookupError> {
        Ok(self
            .app
            .store
            .list(
                rkey(admission::KRATIX_GROUP, "destinations"),
                None,
                None,
                0,
                Box::new(|_| true),
            )
            .await
            .map_err(lookup_err("Destinations"))?
            .items)
    }

    async fn store_path(&self, kind: &str, name: &str) -> Result<Option<String>, LookupError> {
        let plural = match kind {
            "BucketStateStore" => "bucketstatestores",
            _ => "gitstatestores",
        };
        let key = ObjKey {
            rkey: rkey(admission::KRATIX_GROUP, plural),
            ns: String::new(),
            name: name.to_string(),
        };
        let found = self
            .app
            .store
            .get(key)
            .await
            .map_err(lookup_err(format!("{kind} {name:?}")))?;
        Ok(found.and_then(|s| {
            s.pointer("/spec/path")
                .and_then(Value::as_str)
                .map(str::to_string)
        }))
    }
}

/// The admission step for a Kratix object about to be stored: defaults `obj` in place,
/// then answers 422 `Invalid` with the causes when the rules refuse it.
pub(crate) async fn admit(
    app: &App,
    info: &ResourceInfo,
    obj: &mut Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    let op = if old.is_some() {
        Operation::Update
    } else {
        Operation::Create
    };
    let decision = admission::review(&info.kind, op, obj, old, &StoreLookup { app })
        .await
        .map_err(|e| ApiError::internal(e.to_string()))?;
    *obj = decision.object;
    if decision.causes.is_empty() {
        return Ok(());
    }
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    Err(ApiError::invalid(info, name, decision.causes))
}
