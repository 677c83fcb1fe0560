//! Which webhooks a request reaches, by kube-apiserver's rules: a rule matches the
//! operation, group, version, resource (with `*`, `res/sub`, `res/*`, `*/*`) and scope;
//! the objectSelector matches the old or the new object's labels; the
//! namespaceSelector matches the labels of the object's Namespace (a Namespace's own
//! labels when it is created or updated; cluster-scoped objects always match).

use kube::core::SelectorExt;
use serde_json::Value;

use super::attributes::{Attributes, Operation, labels_of};
use super::config::Hook;
use crate::app::App;
use crate::error::ApiError;
use crate::registry::rkey;
use crate::store::ObjKey;

/// Whether one of the hook's rules covers the request.
pub(super) fn rules_match(hook: &Hook, attrs: &Attributes<'_>) -> bool {
    let sub = attrs.subresource();
    hook.rules.iter().any(|r| {
        let any_or = |list: &Option<Vec<String>>, v: &str| {
            list.as_ref()
                .is_some_and(|l| l.iter().any(|x| x == "*" || x == v))
        };
        any_or(&r.operations, attrs.operation.as_str())
            && any_or(&r.api_groups, &attrs.info.group)
            && any_or(&r.api_versions, &attrs.info.version)
            && resource_matches(r.resources.as_deref().unwrap_or_default(), attrs, &sub)
            && scope_matches(r.scope.as_deref(), attrs)
    })
}

fn resource_matches(resources: &[String], attrs: &Attributes<'_>, sub: &str) -> bool {
    resources.iter().any(|r| {
        let (res, rsub) = r.split_once('/').unwrap_or((r.as_str(), ""));
        (res == "*" || res == attrs.info.plural) && (rsub == "*" || rsub == sub)
    })
}

fn scope_matches(scope: Option<&str>, attrs: &Attributes<'_>) -> bool {
    let is_ns = super::attributes::is_namespaces(attrs.info);
    match scope {
        Some("Namespaced") => !is_ns && !attrs.namespace.is_empty(),
        Some("Cluster") => is_ns || attrs.namespace.is_empty(),
        _ => true,
    }
}

/// Whether the objectSelector matches the new or the old object.
pub(super) fn object_matches(hook: &Hook, new: Option<&Value>, old: Option<&Value>) -> bool {
    if hook.object_selector.selects_all() {
        return true;
    }
    [new, old]
        .into_iter()
        .flatten()
        .any(|o| hook.object_selector.matches(&labels_of(Some(o))))
}

/// The labels the namespaceSelectors look at, read once per request when a selector
/// needs them; `None` for cluster-scoped objects, which every namespaceSelector matches.
pub(super) struct NamespaceLabels<'a> {
    attrs: &'a Attributes<'a>,
    read: Option<std::collections::BTreeMap<String, String>>,
}

impl<'a> NamespaceLabels<'a> {
    pub(super) fn new(attrs: &'a Attributes<'a>) -> Self {
        NamespaceLabels { attrs, read: None }
    }

    /// Whether the hook's namespaceSelector matches the request (`new`: the object as
    /// it is now, whose own labels a Namespace is matched by).
    ///
    /// # Errors
    /// 404 when the object's Namespace does not exist; storage errors.
    pub(super) async fn matches(
        &mut self,
        app: &App,
        hook: &Hook,
        new: Option<&Value>,
    ) -> Result<bool, ApiError> {
        let ns = self.attrs.selector_namespace();
        if ns.is_empty() || hook.namespace_selector.selects_all() {
            return Ok(true);
        }
        if self.own_labels() {
            return Ok(hook.namespace_selector.matches(&labels_of(new)));
        }
        if self.read.is_none() {
            self.read = Some(self.labels(app, ns).await?);
        }
        Ok(hook
            .namespace_selector
            .matches(self.read.as_ref().expect("read above")))
    }

    /// A Namespace created or updated is matched by its own (new) labels.
    fn own_labels(&self) -> bool {
        super::attributes::is_namespaces(self.attrs.info)
            && self.attrs.operation != Operation::Delete
            && self.attrs.subresource().is_empty()
    }

    async fn labels(
        &self,
        app: &App,
        ns: &str,
    ) -> Result<std::collections::BTreeMap<String, String>, ApiError> {
        let key = ObjKey {
            rkey: rkey("", "namespaces"),
            ns: String::new(),
            name: ns.to_string(),
        };
        match app.store.get(key).await? {
            Some(n) => Ok(labels_of(Some(&n))),
            None => Err(ApiError::not_found("", "namespaces", ns)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use k8s_openapi::api::admissionregistration::v1::{RuleWithOperations, WebhookClientConfig};
    use serde_json::json;

    use super::*;
    use crate::registry::Registry;

    fn hook(resources: &[&str], scope: &str) -> Hook {
        let list = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect());
        Hook {
            name: "t.example.test".into(),
            configuration: "t".into(),
            key: "t".into(),
            client_config: WebhookClientConfig::default(),
            rules: vec![RuleWithOperations {
                api_groups: list(&[""]),
                api_versions: list(&["*"]),
                operations: list(&["CREATE", "UPDATE"]),
                resources: list(resources),
                scope: Some(scope.into()),
            }],
            ignore_failures: false,
            namespace_selector: Default::default(),
            object_selector: Default::default(),
            dry_run_safe: true,
            timeout: Duration::from_secs(10),
            reinvoke: false,
        }
    }

    /// Whether `hook` matches an UPDATE of `plural` (in `ns`) through `sub`.
    async fn matches(hook: &Hook, plural: &str, ns: Option<&str>, sub: Option<&str>) -> bool {
        let info = Registry::with_builtins().lookup("", "v1", plural).unwrap();
        let check = async {
            let attrs = Attributes::of(&info, Operation::Update, ns, "x", false, None)
                .expect("in a request");
            rules_match(hook, &attrs)
        };
        super::super::in_request(Default::default(), sub, check)
            .await
            .0
    }

    #[tokio::test]
    async fn resources_and_subresources_match_as_upstream() {
        let main_only = hook(&["*"], "*");
        assert!(matches(&main_only, "pods", Some("a"), None).await);
        assert!(!matches(&main_only, "pods", Some("a"), Some("status")).await);
        let status = hook(&["pods/status"], "*");
        assert!(matches(&status, "pods", Some("a"), Some("status")).await);
        assert!(!matches(&status, "pods", Some("a"), None).await);
        let all_of_pods = hook(&["pods/*"], "*");
        assert!(matches(&all_of_pods, "pods", Some("a"), Some("status")).await);
        assert!(matches(&all_of_pods, "pods", Some("a"), None).await);
        assert!(!matches(&all_of_pods, "configmaps", Some("a"), None).await);
        let everything = hook(&["*/*"], "*");
        assert!(matches(&everything, "configmaps", Some("a"), Some("status")).await);
    }

    #[tokio::test]
    async fn scope_counts_namespaces_as_cluster_scoped() {
        let namespaced = hook(&["*"], "Namespaced");
        let cluster = hook(&["*"], "Cluster");
        assert!(matches(&namespaced, "configmaps", Some("a"), None).await);
        assert!(!matches(&cluster, "configmaps", Some("a"), None).await);
        assert!(matches(&cluster, "namespaces", None, None).await);
        assert!(!matches(&namespaced, "namespaces", None, None).await);
        assert!(matches(&cluster, "nodes", None, None).await);
    }

    #[tokio::test]
    async fn object_selector_matches_old_or_new_labels() {
        let mut h = hook(&["*"], "*");
        h.object_selector =
            kube::core::Selector::try_from(
                serde_json::from_value::<
                    k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
                >(json!({"matchLabels": {"app": "web"}}))
                .unwrap(),
            )
            .unwrap();
        let web = json!({"metadata": {"labels": {"app": "web"}}});
        let other = json!({"metadata": {"labels": {"app": "db"}}});
        assert!(object_matches(&h, Some(&other), Some(&web)));
        assert!(object_matches(&h, Some(&web), None));
        assert!(!object_matches(&h, Some(&other), None));
        assert!(!object_matches(&h, None, Some(&other)));
    }
}
