//! `plinth operator`'s admission webhooks: the Kratix kinds' admission rules
//! (`plinth_apiserver::admission`, the same the embedded server applies in-process)
//! served as `admission.k8s.io/v1` webhooks over HTTPS, by every replica, leader or not.
//! At start the operator gets its certificate (`certs`), registers its webhook
//! configurations (`config`) with the CA it serves from, and listens with the limits of
//! every Plinth listener (`plinth_apiserver::listener`).

pub mod certs;
pub mod config;
pub mod handler;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use tokio::task::JoinHandle;

/// The webhook flags of `plinth operator`.
#[derive(clap::Args, Clone, Debug)]
pub struct WebhookArgs {
    /// Address of the admission webhook listener (HTTPS), or `off`.
    #[arg(long, default_value = "0.0.0.0:9443")]
    pub webhook_addr: String,
    /// A directory holding a mounted `tls.crt` and `tls.key` (e.g. cert-manager's) to
    /// serve with; the webhook configurations' caBundle is then left to whoever injects
    /// it. Without it a self-signed CA is kept in Secret `plinth-webhook-ca`.
    #[arg(long, value_name = "DIR")]
    pub webhook_cert_dir: Option<PathBuf>,
    /// Extra names (DNS names or IP addresses) on the self-issued serving certificate
    /// besides the Service's, e.g. `127.0.0.1` for an operator run outside the cluster.
    #[arg(long, value_name = "NAME")]
    pub webhook_host: Vec<String>,
    /// Register the webhooks with `url: BASE/<path>` instead of the Service (for an
    /// operator outside the cluster), e.g. `https://127.0.0.1:9443`.
    #[arg(long, value_name = "BASE")]
    pub webhook_url: Option<String>,
}

/// A running webhook server.
pub struct Webhooks {
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Webhooks {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Starts the webhook server unless `--webhook-addr off`: certificate, registration,
/// listener, renewal.
///
/// # Errors
/// The address is not one, the certificate cannot be got, the configurations cannot be
/// applied, or the address cannot be bound.
pub async fn start(
    client: kube::Client,
    namespace: &str,
    args: &WebhookArgs,
) -> anyhow::Result<Option<Webhooks>> {
    if args.webhook_addr == "off" {
        warn_if_registered(&client).await;
        return Ok(None);
    }
    let addr: SocketAddr = args.webhook_addr.parse().with_context(|| {
        format!(
            "--webhook-addr {:?}: not an address or `off`",
            args.webhook_addr
        )
    })?;
    let mut names = config::service_names(namespace);
    names.extend(args.webhook_host.iter().cloned());
    let (current, ca, renew) = match &args.webhook_cert_dir {
        Some(dir) => {
            let (crt, key) = certs::read_dir(dir)?;
            let current = Arc::new(certs::CurrentCert::new(&crt, &key)?);
            let task = tokio::spawn(reread_dir(dir.clone(), current.clone(), (crt, key)));
            (current, None, task)
        }
        None => {
            let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
            let ca = certs::Ca::load_or_create(&secrets, namespace).await?;
            let (crt, key) = ca.issue(&names)?;
            let current = Arc::new(certs::CurrentCert::new(&crt, &key)?);
            let task = tokio::spawn(renew(ca.clone(), names.clone(), current.clone()));
            (current, Some(ca.cert_pem), task)
        }
    };
    let target = match &args.webhook_url {
        Some(url) => config::Target::Url(url.clone()),
        None => config::Target::Service {
            namespace: namespace.to_string(),
        },
    };
    register(&client, &target, ca.as_deref()).await?;
    let limits = plinth_apiserver::listener::ListenerLimits {
        max_connections: 256,
        ..Default::default()
    };
    let listener = plinth_apiserver::listener::bind(addr, limits.backlog)
        .with_context(|| format!("--webhook-addr {addr}: cannot listen"))?;
    let local = listener.local_addr()?;
    let router = handler::router(Arc::new(handler::KubeLookup::new(client)));
    let serve = tokio::spawn(plinth_apiserver::listener::serve(
        listener,
        Some(current.server_config()?),
        router,
        limits,
        "webhook",
    ));
    tracing::info!(addr = %local, "serving admission webhooks on https://{local}");
    Ok(Some(Webhooks {
        tasks: vec![serve, renew],
    }))
}

/// One webhook configuration document with its kind, name, resource and API.
struct Configuration {
    doc: serde_json::Value,
    kind: String,
    name: String,
    plural: String,
    api: Api<DynamicObject>,
}

/// The webhook configurations the operator registers (both kinds), for `target`.
fn configurations(
    client: &kube::Client,
    target: &config::Target,
    ca_bundle: Option<&str>,
) -> Vec<Configuration> {
    config::configurations(target, ca_bundle)
        .into_iter()
        .map(|doc| {
            let kind = doc["kind"].as_str().unwrap_or_default().to_string();
            let name = doc["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let gvk = GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", &kind);
            let plural = format!("{}s", kind.to_ascii_lowercase());
            let api = Api::all_with(
                client.clone(),
                &ApiResource::from_gvk_with_plural(&gvk, &plural),
            );
            Configuration {
                doc,
                kind,
                name,
                plural,
                api,
            }
        })
        .collect()
}

/// With `--webhook-addr off`, says so when the webhook configurations are still
/// registered: their `failurePolicy: Fail` refuses every Kratix write while no replica
/// answers them.
async fn warn_if_registered(client: &kube::Client) {
    let target = config::Target::Service {
        namespace: String::new(),
    };
    for c in configurations(client, &target, None) {
        if let Ok(Some(_)) = c.api.get_opt(&c.name).await {
            tracing::warn!(
                "--webhook-addr off, but {} {} is registered: while no operator replica serves the webhooks it names, every create and update of a Kratix object is refused (failurePolicy: Fail); serve them from another replica, or delete it (kubectl delete {} {})",
                c.kind,
                c.name,
                c.plural,
                c.name
            );
        }
    }
}

/// Applies both webhook configurations (server-side apply, this operator's field
/// manager, so a second replica's identical apply changes nothing).
async fn register(
    client: &kube::Client,
    target: &config::Target,
    ca_bundle: Option<&str>,
) -> anyhow::Result<()> {
    let params = PatchParams::apply("plinth-operator").force();
    for Configuration {
        doc,
        kind,
        name,
        api,
        ..
    } in configurations(client, target, ca_bundle)
    {
        api.patch(&name, &params, &Patch::Apply(&doc))
            .await
            .map_err(|e| {
                anyhow::anyhow!(
                    "applying {kind} {name}: {}",
                    plinth_api::kube_error::describe(&e)
                )
            })?;
    }
    Ok(())
}

/// Issues the serving certificate again before it expires.
async fn renew(ca: certs::Ca, names: Vec<String>, current: Arc<certs::CurrentCert>) {
    let lifetime = certs::SERVING_LIFETIME;
    let mut issued = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        if issued.elapsed() + certs::RENEW_BEFORE < lifetime {
            continue;
        }
        match ca.issue(&names).and_then(|(c, k)| current.replace(&c, &k)) {
            Ok(()) => {
                issued = Instant::now();
                tracing::info!("webhook serving certificate issued again");
            }
            Err(e) => tracing::warn!("renewing the webhook serving certificate: {e}"),
        }
    }
}

/// Serves a mounted certificate again when its files change (cert-manager renews them).
async fn reread_dir(dir: PathBuf, current: Arc<certs::CurrentCert>, mut last: (String, String)) {
    loop {
        tokio::time::sleep(Duration::from_secs(60)).await;
        match certs::read_dir(&dir) {
            Ok(now) if now != last => match current.replace(&now.0, &now.1) {
                Ok(()) => last = now,
                Err(e) => tracing::warn!("{}: {e}", dir.display()),
            },
            Ok(_) => {}
            Err(e) => tracing::warn!("{e}"),
        }
    }
}
