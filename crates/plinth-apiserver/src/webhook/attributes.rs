//! The request being admitted, as admission reads it: its operation and attributes, and
//! the scope the router opens around every request (who asks, which subresource, the
//! warnings webhooks give for the response).

use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::auth::Identity;
use crate::resource::ResourceInfo;
use crate::ssa::Owner;

use super::validate::is_configuration;

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
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        }
    }

    pub(super) fn options_kind(self) -> &'static str {
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

    pub(super) fn subresource(&self) -> String {
        REQUEST
            .try_with(|s| s.subresource.clone())
            .unwrap_or_default()
    }

    pub(crate) fn user(&self) -> Identity {
        REQUEST.try_with(|s| s.user.clone()).unwrap_or_default()
    }

    /// The namespace the namespaceSelector looks at: the object's, or for a Namespace
    /// its own name.
    pub(super) fn selector_namespace(&self) -> &str {
        if is_namespaces(self.info) {
            self.name
        } else {
            self.namespace
        }
    }
}

pub(super) fn is_namespaces(info: &ResourceInfo) -> bool {
    info.group.is_empty() && info.plural == "namespaces"
}

/// Hands a webhook's warning to the response (`Warning: 299 - "<text>"`), as
/// kube-apiserver does; control characters are dropped and the text is capped.
pub(super) fn add_warning(text: &str) {
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
pub(super) fn labels_of(obj: Option<&Value>) -> std::collections::BTreeMap<String, String> {
    obj.and_then(|o| o.pointer("/metadata/labels"))
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default()
}
