//! The embedded server's transport of [`crate::admission`]: a Kratix object about to be
//! stored is validated in-process where kube-apiserver calls Kratix's validating webhook
//! (after the CRD schema; the defaulting, `admission::default`, runs before it in
//! `kinds::prepare`), what the rules read about other
//! objects answered from the store, and a refusal answered as 422 `Invalid` with the
//! field causes, so a bad Promise never reaches the controllers.

use serde_json::Value;

use crate::admission::{self, Lookup, LookupError, Operation};
use crate::app::App;
use crate::error::ApiError;
use crate::registry::rkey;
use crate::resource::ResourceInfo;
use crate::store::{ListRange, ObjKey};

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
                ListRange::all(rkey(plinth_api::GROUP, "destinations")),
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
            rkey: rkey(plinth_api::GROUP, plural),
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

/// The review of a Kratix object about to be stored, by the rules [`admission`] keeps.
async fn review(
    app: &App,
    info: &ResourceInfo,
    obj: &Value,
    old: Option<&Value>,
) -> Result<admission::Decision, ApiError> {
    let op = if old.is_some() {
        Operation::Update
    } else {
        Operation::Create
    };
    admission::review(&info.kind, op, obj, old, &StoreLookup { app })
        .await
        .map_err(|e| ApiError::internal(e.to_string()))
}

/// The validation step, where kube-apiserver calls Kratix's validating webhook: after
/// the CRD schema passed, so a value the schema refuses is reported in the schema's
/// words (`Unsupported value: …: supported values: …`), as on a real cluster. Answers
/// 422 `Invalid` with the causes when the rules refuse the object.
pub(crate) async fn validate(
    app: &App,
    info: &ResourceInfo,
    obj: &Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    let decision = review(app, info, obj, old).await?;
    if decision.causes.is_empty() {
        return Ok(());
    }
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    Err(ApiError::invalid(info, name, decision.causes))
}
