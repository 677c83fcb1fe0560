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
//! come from the request scope the router opens around every request ([`attributes::in_request`]),
//! as kube-apiserver reads them from the request context. Writes outside a request
//! (garbage collection, namespace cleanup, bootstrap) and server-internal writes call no
//! webhook. Not implemented: `matchConditions` (CEL; a webhook that has them is called
//! as if it had none), `scale` subresource writes (no webhook is called for them), and
//! `matchPolicy: Equivalent` across versions (each resource is matched in the version
//! it was requested in; Equivalent adds nothing here but for `autoscaling` v1/v2).

mod attributes;
mod client;
pub(crate) mod config;
mod dispatch;
mod matching;
mod review;
mod validate;

pub(crate) use attributes::{Attributes, Operation, in_request};
pub(crate) use config::Webhooks;
pub(crate) use dispatch::{mutate, validate};
pub(crate) use validate::{configuration_causes, is_configuration};
