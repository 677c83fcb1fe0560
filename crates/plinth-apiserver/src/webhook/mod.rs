//! Dynamic admission control: the API server calls the admission webhooks that
//! MutatingWebhookConfigurations and ValidatingWebhookConfigurations
//! (`admissionregistration.k8s.io/v1`) register, as kube-apiserver does, so that
//! `plinth operator`'s webhooks are called by `plinth up --no-controllers` exactly as
//! by a cluster's API server.
//!
//! * `config`: the stored configurations, read once and cached until one of them
//!   changes (the store's event sink bumps an epoch), sorted by configuration name.
//! * `matching`: which webhooks a request reaches (rules, scope, namespaceSelector,
//!   objectSelector).
//! * `client`: where a webhook is (`url`, or `service` resolved through the stored
//!   Endpoints, EndpointSlices or the Service's cluster IP), HTTPS verified against the
//!   `caBundle`, one pooled connection client per webhook, per-call timeout and a
//!   response size limit.
//! * `review`: the AdmissionReview request and the checks of its response.
//! * `dispatch`: mutating webhooks in series with their JSONPatches applied and one
//!   reinvocation round (`reinvocationPolicy: IfNeeded`), validating webhooks in
//!   parallel; `failurePolicy` decides what a failed call does.
//!
//! The request's attributes that the verbs do not carry (who asks, which subresource)
//! come from the request scope the router opens around every request ([`in_request`]),
//! as kube-apiserver reads them from the request context. Writes outside a request
//! (garbage collection, namespace cleanup, bootstrap) and server-internal writes call no
//! webhook. Not implemented: `matchConditions` (CEL; a webhook that has them is called
//! as if it had none), `scale` subresource writes (no webhook is called for them), and
//! `matchPolicy: Equivalent` across versions (each resource is matched in the version
//! it was requested in; Equivalent adds nothing here but for `autoscaling` v1/v2).

mod client;
mod config;
mod dispatch;
mod matching;
mod review;
mod validate;

use std::sync::{Arc, Mutex};

use serde_json::Value;

pub(crate) use config::Webhooks;
pub(crate) use dispatch::{mutate, validate};
pub(crate) use validate::{configuration_causes, is_configuration};

use crate::auth::Identity;
use crate::resource::ResourceInfo;
use crate::ssa::Owner;

/// The admission operation of a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Operation {
    /// POST, or server-side apply of an absent object.
    Create,
    /// PUT and PATCH.
    Update,
    /// DELETE.
    Delete,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        }
    }

    fn options_kind(self) -> &'static str {
        match self {
            Operation::Create => "CreateOptions",
            Operation::Update => "UpdateOptions",
            Operation::Delete => "DeleteOptions",
        }
    }
}

/// What the router knows about the request being served: who asks, which subresource,
/// and the warnings admission collects for the response.
struct RequestScope {
    user: Identity,
    subresource: String,
    warnings: Mutex<Vec<String>>,
}

tokio::task_local! {
    static REQUEST: Arc<RequestScope>;
}

/// Runs `f` (the handling of one API request by `user` on `subresource`) in a request
/// scope; returns its output and the `Warning` header values admission webhooks gave.
pub(crate) async fn in_request<F: Future>(
    user: Identity,
    subresource: Option<&str>,
    f: F,
) -> (F::Output, Vec<String>) {
    let scope = Arc::new(RequestScope {
        user,
        subresource: subresource.unwrap_or_default().to_string(),
        warnings: Mutex::new(Vec::new()),
    });
    let out = REQUEST.scope(scope.clone(), f).await;
    let warnings = std::mem::take(&mut *scope.warnings.lock().unwrap());
    (out, warnings)
}

/// The request being admitted: everything a webhook is told about it but the objects.
pub(crate) struct Attributes<'a> {
    /// The resource written.
    pub info: &'a ResourceInfo,
    /// CREATE, UPDATE or DELETE.
    pub operation: Operation,
    /// The object's namespace (empty for cluster-scoped objects).
    pub namespace: &'a str,
    /// The object's name.
    pub name: &'a str,
    /// `dryRun=All`.
    pub dry_run: bool,
    /// The field manager of the write, when the client named one.
    pub field_manager: Option<&'a str>,
}

impl<'a> Attributes<'a> {
    /// The attributes of a write by `owner`; `None` when the write calls no webhook:
    /// outside an API request, a server-internal write, a `scale` subresource write, or
    /// a write of a webhook configuration itself (kube-apiserver exempts those, so a
    /// configuration can never lock itself in).
    pub(crate) fn of(
        info: &'a ResourceInfo,
        operation: Operation,
        namespace: Option<&'a str>,
        name: &'a str,
        dry_run: bool,
        owner: Option<&'a Owner>,
    ) -> Option<Attributes<'a>> {
        if matches!(owner, Some(Owner::Internal)) || is_configuration(info) {
            return None;
        }
        let sub = REQUEST.try_with(|s| s.subresource.clone()).ok()?;
        if sub == "scale" {
            return None;
        }
        let field_manager = match owner {
            Some(Owner::Update(m)) => Some(m.as_str()),
            _ => None,
        };
        Some(Attributes {
            info,
            operation,
            namespace: if info.namespaced {
                namespace.unwrap_or_default()
            } else {
                ""
            },
            name,
            dry_run,
            field_manager,
        })
    }

    fn subresource(&self) -> String {
        REQUEST
            .try_with(|s| s.subresource.clone())
            .unwrap_or_default()
    }

    fn user(&self) -> Identity {
        REQUEST.try_with(|s| s.user.clone()).unwrap_or_default()
    }

    /// The namespace the namespaceSelector looks at: the object's, or for a Namespace
    /// its own name.
    fn selector_namespace(&self) -> &str {
        if is_namespaces(self.info) {
            self.name
        } else {
            self.namespace
        }
    }
}

fn is_namespaces(info: &ResourceInfo) -> bool {
    info.group.is_empty() && info.plural == "namespaces"
}

/// Hands a webhook's warning to the response (`Warning: 299 - "<text>"`), as
/// kube-apiserver does; control characters are dropped and the text is capped.
fn add_warning(text: &str) {
    const MAX: usize = 4096;
    let clean: String = text
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX)
        .collect::<String>()
        .replace('\\', "\\\\")
        .replace('"', "\\\"");
    let _ = REQUEST.try_with(|s| {
        s.warnings
            .lock()
            .unwrap()
            .push(format!("299 - \"{clean}\""))
    });
}

/// The labels of an object (empty when it has none).
fn labels_of(obj: Option<&Value>) -> std::collections::BTreeMap<String, String> {
    obj.and_then(|o| o.pointer("/metadata/labels"))
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default()
}
