//! Calling one webhook: its address (`url`, or `service` resolved from the store), an
//! HTTPS client that trusts the webhook's `caBundle` only (the built-in roots when it has
//! none), pooled per webhook and configuration version, and one POST bounded by the
//! webhook's timeout and a response size limit. Redirects and proxies are not followed.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::ServiceReference;
use serde_json::Value;

use super::config::Hook;
use crate::app::App;
use crate::registry::rkey;
use crate::store::{ListRange, ObjKey};

/// The largest AdmissionReview response read.
const MAX_RESPONSE_BYTES: usize = 3 * 1024 * 1024;
/// The connect timeout, below the webhook's own timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a webhook could not be called or answered unusably (a "call failure", handled by
/// the webhook's failurePolicy).
#[derive(Debug, thiserror::Error)]
pub(super) enum CallError {
    /// The clientConfig cannot be used.
    #[error("invalid webhook clientConfig: {0}")]
    ClientConfig(String),
    /// The `service` reference names no reachable address.
    #[error("cannot resolve service {namespace}/{name}: {why}")]
    Unresolved {
        /// The Service's namespace.
        namespace: String,
        /// The Service's name.
        name: String,
        /// What is missing.
        why: String,
    },
    /// The HTTPS client could not be built (the caBundle holds no usable certificate).
    #[error("cannot build the webhook client: {0}")]
    Client(String),
    /// Connecting, TLS, sending or reading failed, or the timeout passed.
    #[error("failed to call webhook: Post \"{url}\": {cause}")]
    Transport {
        /// The URL called.
        url: String,
        /// The cause chain.
        cause: String,
    },
    /// The webhook answered with a non-success HTTP status.
    #[error("failed to call webhook: the server responded with the status code {code}: {body}")]
    HttpStatus {
        /// The HTTP status code.
        code: u16,
        /// The start of the body.
        body: String,
    },
    /// The response exceeded the size limit.
    #[error("failed to call webhook: the response is larger than {MAX_RESPONSE_BYTES} bytes")]
    TooLarge,
    /// The response is no AdmissionReview, or breaks its rules.
    #[error("received invalid webhook response: {0}")]
    InvalidResponse(String),
}

/// Where a webhook is reached: the URL called and, for a Service, the address its host
/// name stands for.
struct Target {
    url: reqwest::Url,
    host_addr: Option<(String, SocketAddr)>,
}

/// Posts `review` to the hook and returns the decoded response body.
///
/// # Errors
/// [`CallError`]: an unusable clientConfig or caBundle, an unresolvable Service, a
/// transport failure or timeout, a non-2xx answer, or a response too large or not JSON.
pub(super) async fn call(app: &App, hook: &Hook, review: &Value) -> Result<Value, CallError> {
    let target = target(app, hook).await?;
    let client_key = match &target.host_addr {
        Some((_, addr)) => format!("{}@{addr}", hook.key),
        None => hook.key.clone(),
    };
    let client = app
        .webhooks
        .client(&client_key, || build_client(hook, &target))?;
    let mut url = target.url.clone();
    url.query_pairs_mut()
        .append_pair("timeout", &format!("{}s", hook.timeout.as_secs()));
    let transport = |e: &dyn std::error::Error| CallError::Transport {
        url: url.to_string(),
        cause: plinth_api::cause_chain(e),
    };
    let send = async {
        let resp = client
            .post(url.clone())
            .timeout(hook.timeout)
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json")
            .body(serde_json::to_vec(review).unwrap_or_default())
            .send()
            .await
            .map_err(|e| transport(&e))?;
        let status = resp.status();
        let body = read_limited(resp).await.map_err(|e| match e {
            ReadError::TooLarge => CallError::TooLarge,
            ReadError::Transport(e) => transport(&e),
        })?;
        if !status.is_success() {
            return Err(CallError::HttpStatus {
                code: status.as_u16(),
                body: String::from_utf8_lossy(&body[..body.len().min(512)]).into_owned(),
            });
        }
        serde_json::from_slice(&body)
            .map_err(|e| CallError::InvalidResponse(format!("the body is not JSON: {e}")))
    };
    match tokio::time::timeout(hook.timeout, send).await {
        Ok(r) => r,
        Err(_) => Err(CallError::Transport {
            url: url.to_string(),
            cause: format!(
                "context deadline exceeded (timeoutSeconds {})",
                hook.timeout.as_secs()
            ),
        }),
    }
}

enum ReadError {
    TooLarge,
    Transport(reqwest::Error),
}

/// The response body, refused beyond [`MAX_RESPONSE_BYTES`] (read in chunks, so a huge
/// answer is never held).
async fn read_limited(mut resp: reqwest::Response) -> Result<Vec<u8>, ReadError> {
    if resp
        .content_length()
        .is_some_and(|l| l > MAX_RESPONSE_BYTES as u64)
    {
        return Err(ReadError::TooLarge);
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(ReadError::Transport)? {
        if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return Err(ReadError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The HTTPS client of one webhook: only the caBundle's certificates are trusted.
fn build_client(hook: &Hook, target: &Target) -> Result<reqwest::Client, CallError> {
    // The process-wide provider: ring, the only one compiled in.
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
    let mut b = reqwest::Client::builder()
        .tls_backend_rustls()
        .https_only(true)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .connect_timeout(CONNECT_TIMEOUT.min(hook.timeout))
        .pool_idle_timeout(Duration::from_secs(90))
        .pool_max_idle_per_host(8);
    if let Some(ca) = hook
        .client_config
        .ca_bundle
        .as_ref()
        .filter(|c| !c.0.is_empty())
    {
        let certs = reqwest::Certificate::from_pem_bundle(&ca.0)
            .map_err(|e| CallError::Client(format!("caBundle: {e}")))?;
        if certs.is_empty() {
            return Err(CallError::Client(
                "caBundle holds no PEM certificate".into(),
            ));
        }
        b = b.tls_certs_only(certs);
    }
    if let Some((host, addr)) = &target.host_addr {
        b = b.resolve(host, *addr);
    }
    b.build()
        .map_err(|e| CallError::Client(plinth_api::cause_chain(&e)))
}

/// The URL to call: `url` (https only, no user info, query or fragment), or
/// `https://<service>.<namespace>.svc:<port><path>` with the Service's address.
async fn target(app: &App, hook: &Hook) -> Result<Target, CallError> {
    let cc = &hook.client_config;
    match (&cc.url, &cc.service) {
        (Some(u), None) => Ok(Target {
            url: checked_url(u)?,
            host_addr: None,
        }),
        (None, Some(svc)) => service_target(app, svc).await,
        _ => Err(CallError::ClientConfig(
            "exactly one of url or service is required".into(),
        )),
    }
}

fn checked_url(u: &str) -> Result<reqwest::Url, CallError> {
    let url =
        reqwest::Url::parse(u).map_err(|e| CallError::ClientConfig(format!("url {u:?}: {e}")))?;
    if url.scheme() != "https" {
        return Err(CallError::ClientConfig(format!(
            "url {u:?}: the scheme must be https"
        )));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(CallError::ClientConfig(format!(
            "url {u:?}: user information is not permitted"
        )));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(CallError::ClientConfig(format!(
            "url {u:?}: a query or fragment is not permitted"
        )));
    }
    Ok(url)
}

/// A Service reference as a URL whose host name is the Service's DNS name (what its
/// certificate is checked against) and the address it stands for.
async fn service_target(app: &App, svc: &ServiceReference) -> Result<Target, CallError> {
    let port = svc.port.unwrap_or(443);
    let addr = resolve_service(app, &svc.namespace, &svc.name, port).await?;
    let host = format!("{}.{}.svc", svc.name, svc.namespace);
    let path = svc.path.as_deref().unwrap_or("/");
    let url = checked_url(&format!("https://{host}:{}{path}", addr.port()))?;
    Ok(Target {
        url,
        host_addr: Some((host, addr)),
    })
}

/// The address of Service `ns/name`'s port `port`: a ready address of its Endpoints or
/// EndpointSlices with the port's target port, else its cluster IP and `port`.
async fn resolve_service(
    app: &App,
    ns: &str,
    name: &str,
    port: i32,
) -> Result<SocketAddr, CallError> {
    let unresolved = |why: String| CallError::Unresolved {
        namespace: ns.to_string(),
        name: name.to_string(),
        why,
    };
    let get = |group: &str, plural: &str| ObjKey {
        rkey: rkey(group, plural),
        ns: ns.to_string(),
        name: name.to_string(),
    };
    let store_err = |e: crate::store::StoreError| unresolved(format!("reading the store: {e}"));
    let Some(service) = app
        .store
        .get(get("", "services"))
        .await
        .map_err(store_err)?
    else {
        return Err(unresolved("the Service does not exist".into()));
    };
    let Some(sp) = service_port(&service, port) else {
        return Err(unresolved(format!("the Service has no port {port}")));
    };
    if let Some(ep) = app
        .store
        .get(get("", "endpoints"))
        .await
        .map_err(store_err)?
        && let Some(addr) = from_endpoints(&ep, &sp)
    {
        return Ok(addr);
    }
    let slices = app
        .store
        .list(
            ListRange::all(rkey("discovery.k8s.io", "endpointslices"))
                .in_namespace(Some(ns.to_string())),
            Box::new({
                let name = name.to_string();
                move |o| {
                    o.pointer("/metadata/labels/kubernetes.io~1service-name")
                        .and_then(Value::as_str)
                        == Some(name.as_str())
                }
            }),
        )
        .await
        .map_err(store_err)?;
    if let Some(addr) = slices.items.iter().find_map(|s| from_slice(s, &sp)) {
        return Ok(addr);
    }
    let cluster_ip = service
        .pointer("/spec/clusterIP")
        .and_then(Value::as_str)
        .and_then(|ip| ip.parse::<IpAddr>().ok());
    match cluster_ip {
        Some(ip) => Ok(SocketAddr::new(ip, port as u16)),
        None => Err(unresolved(
            "it has no ready endpoint address and no cluster IP".into(),
        )),
    }
}

/// One port of a Service, by the name its endpoints' ports carry.
struct ServicePort {
    name: String,
}

fn service_port(service: &Value, port: i32) -> Option<ServicePort> {
    let p = service
        .pointer("/spec/ports")?
        .as_array()?
        .iter()
        .find(|p| p.get("port").and_then(Value::as_i64) == Some(port as i64))?;
    Some(ServicePort {
        name: p
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
    })
}

/// The endpoint port that serves the Service port: the one of the same name, or the
/// only one.
fn port_of(ports: &[Value], sp: &ServicePort) -> Option<u16> {
    let by_name = ports
        .iter()
        .find(|p| p.get("name").and_then(Value::as_str).unwrap_or_default() == sp.name);
    let chosen = by_name.or(if ports.len() == 1 {
        ports.first()
    } else {
        None
    })?;
    u16::try_from(chosen.get("port").and_then(Value::as_u64)?).ok()
}

fn from_endpoints(ep: &Value, sp: &ServicePort) -> Option<SocketAddr> {
    ep.get("subsets")?.as_array()?.iter().find_map(|s| {
        let ports = s.get("ports")?.as_array()?;
        let port = port_of(ports, sp)?;
        let ip = s
            .get("addresses")?
            .as_array()?
            .iter()
            .find_map(|a| a.get("ip")?.as_str()?.parse::<IpAddr>().ok())?;
        Some(SocketAddr::new(ip, port))
    })
}

fn from_slice(slice: &Value, sp: &ServicePort) -> Option<SocketAddr> {
    let ports = slice.get("ports")?.as_array()?;
    let port = port_of(ports, sp)?;
    slice.get("endpoints")?.as_array()?.iter().find_map(|e| {
        if e.pointer("/conditions/ready") == Some(&Value::Bool(false)) {
            return None;
        }
        let ip = e
            .get("addresses")?
            .as_array()?
            .iter()
            .find_map(|a| a.as_str()?.parse::<IpAddr>().ok())?;
        Some(SocketAddr::new(ip, port))
    })
}
