//! `plinth manifests flux DESTINATION` and `plinth manifests argocd DESTINATION`: the
//! objects that make a GitOps agent the users already run (Flux, Argo CD) sync one
//! Destination's directory of a Git state store into its cluster.
//!
//! The Destination and its GitStateStore are read from the running platform (kubeconfig),
//! which gives the repository URL, the branch and the directory
//! (`<store spec.path>/<destination spec.path>`). The layout follows what Kratix documents
//! for both agents: with the default `nestedByMetadata` file layout the directory holds
//! `dependencies/` (Promise dependencies and Promise workflow output) and `resources/`
//! (resource workflow output), synced separately, dependencies first — a Flux
//! `Kustomization` for `resources/` `dependsOn` the one for `dependencies/`; Argo CD has no
//! ordering between Applications, so the `resources` Application carries a later sync
//! wave and retries until what it needs exists. With `none` and `aggregatedYAML` the
//! directory is synced as one; the `.kratix/` index files Plinth keeps there are excluded.
//!
//! A store whose URL is a local `file://` repository of `plinth up` is reached through
//! the platform's read-only Git endpoint (`https://<API server>/git/<store>`), with the
//! read token from `git-read-token` next to the kubeconfig and the platform's CA.
//! A remote store's URL is used as it is, with the credentials of its Secret.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::config::Kubeconfig;
use plinth_statestore::layout::{FilepathMode, effective_root};
use serde_json::{Value, json};

/// Arguments of `plinth manifests flux|argocd`.
#[derive(clap::Args, Clone, Debug)]
pub struct GitOpsArgs {
    /// Name of the Destination whose directory the agent should sync.
    pub destination: String,
    /// Kubeconfig of the platform [default: $KUBECONFIG, then ~/.kube/config].
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Namespace of the printed objects [default: flux-system for Flux, argocd for Argo CD].
    #[arg(long)]
    pub namespace: Option<String>,
    /// Read token of a state store served by `plinth up`
    /// [default: `git-read-token` next to the kubeconfig].
    #[arg(long)]
    pub git_token_file: Option<PathBuf>,
    /// Host[:port] the agent reaches the platform at, replacing the kubeconfig's (e.g. from
    /// inside a kind cluster). The platform's certificate must name that host.
    #[arg(long)]
    pub git_host: Option<String>,
    /// How often the agent checks the repository (Flux duration syntax).
    #[arg(long, default_value = "1m")]
    pub interval: String,
}

/// Credentials for the repository, as the agents' Secrets name them.
#[derive(Clone, Debug, PartialEq)]
pub enum RepoAuth {
    /// No credentials.
    None,
    /// HTTP basic auth (the read token of `plinth up` is the password).
    Basic { username: String, password: String },
    /// An SSH private key and the known_hosts lines of the server.
    Ssh {
        private_key: String,
        known_hosts: String,
    },
}

/// Everything the generators need about one Destination's directory.
#[derive(Clone, Debug)]
pub struct DestinationSource {
    /// Destination name (prefixes the generated object names).
    pub destination: String,
    /// Repository URL the agent clones.
    pub url: String,
    /// Branch.
    pub branch: String,
    /// The Destination's directory in the repository, normalised (`""` = repository root).
    pub root: String,
    /// The Destination's file layout.
    pub mode: FilepathMode,
    /// Credentials.
    pub auth: RepoAuth,
    /// CA certificate (PEM) the agent must trust, when the server's is not public.
    pub ca_pem: Option<String>,
}

impl DestinationSource {
    /// The directories synced, in order, with a short name each: `dependencies` then
    /// `resources` for `nestedByMetadata`, the directory itself (named `workloads`)
    /// otherwise.
    pub fn parts(&self) -> Vec<(&'static str, String)> {
        let join = |sub: &str| {
            if self.root.is_empty() {
                sub.to_string()
            } else {
                format!("{}/{sub}", self.root)
            }
        };
        match self.mode {
            FilepathMode::NestedByMetadata => vec![
                ("dependencies", join("dependencies")),
                ("resources", join("resources")),
            ],
            FilepathMode::None | FilepathMode::AggregatedYaml => {
                vec![("workloads", self.root.clone())]
            }
        }
    }

    fn prefix(&self) -> String {
        format!("kratix-{}", self.destination)
    }
}

/// Flux: a Secret (credentials, CA), a `GitRepository` narrowed to the Destination's
/// directory, and one `Kustomization` per part; the later ones `dependsOn` the earlier.
pub fn flux_documents(src: &DestinationSource, namespace: &str, interval: &str) -> Vec<Value> {
    let prefix = src.prefix();
    let mut docs = Vec::new();
    let mut repo_spec = json!({
        "interval": interval,
        "url": src.url,
        "ref": {"branch": src.branch},
        "ignore": flux_ignore(&src.root),
    });
    let mut secret = serde_json::Map::new();
    match &src.auth {
        RepoAuth::None => {}
        RepoAuth::Basic { username, password } => {
            secret.insert("username".into(), json!(username));
            secret.insert("password".into(), json!(password));
        }
        RepoAuth::Ssh {
            private_key,
            known_hosts,
        } => {
            secret.insert("identity".into(), json!(private_key));
            secret.insert("known_hosts".into(), json!(known_hosts));
        }
    }
    if let Some(ca) = &src.ca_pem {
        secret.insert("ca.crt".into(), json!(ca));
    }
    if !secret.is_empty() {
        let name = format!("{prefix}-git");
        docs.push(json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace},
            "type": "Opaque",
            "stringData": secret,
        }));
        repo_spec["secretRef"] = json!({"name": name});
    }
    docs.push(json!({
        "apiVersion": "source.toolkit.fluxcd.io/v1", "kind": "GitRepository",
        "metadata": {"name": prefix, "namespace": namespace},
        "spec": repo_spec,
    }));
    let mut previous: Option<String> = None;
    for (part, path) in src.parts() {
        let name = format!("{prefix}-{part}");
        let mut spec = json!({
            "interval": interval,
            "sourceRef": {"kind": "GitRepository", "name": prefix},
            "path": format!("./{path}"),
            "prune": true,
        });
        if let Some(dep) = &previous {
            spec["dependsOn"] = json!([{"name": dep}]);
        }
        docs.push(json!({
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization",
            "metadata": {"name": name, "namespace": namespace},
            "spec": spec,
        }));
        previous = Some(name);
    }
    docs
}

/// `.sourceignore` lines that keep only the Destination's directory in Flux's artifact
/// and drop its `.kratix/` index files (git-ignore rules cannot re-include a path under
/// an excluded parent, so each level is re-included on its way down).
pub fn flux_ignore(root: &str) -> String {
    let mut lines = Vec::new();
    let mut prefix = String::new();
    for seg in root.split('/').filter(|s| !s.is_empty()) {
        lines.push(format!("{prefix}/*"));
        prefix.push('/');
        prefix.push_str(seg);
        lines.push(format!("!{prefix}/"));
    }
    lines.push(format!("{prefix}/.kratix/"));
    let mut out = lines.join("\n");
    out.push('\n');
    out
}

/// Argo CD: the repository Secret (label `argocd.argoproj.io/secret-type: repository`),
/// the CA in `argocd-tls-certs-cm` when one is needed (keyed by host; applying it adds
/// the key and keeps the others), and one `Application` per part with automated sync,
/// prune and self-heal, recursing into the directory and skipping `.kratix/`.
pub fn argocd_documents(src: &DestinationSource, namespace: &str) -> anyhow::Result<Vec<Value>> {
    let prefix = src.prefix();
    let mut docs = Vec::new();
    let mut secret = serde_json::Map::new();
    secret.insert("type".into(), json!("git"));
    secret.insert("url".into(), json!(src.url));
    match &src.auth {
        RepoAuth::None => {}
        RepoAuth::Basic { username, password } => {
            secret.insert("username".into(), json!(username));
            secret.insert("password".into(), json!(password));
        }
        RepoAuth::Ssh { private_key, .. } => {
            secret.insert("sshPrivateKey".into(), json!(private_key));
        }
    }
    docs.push(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": format!("{prefix}-repository"), "namespace": namespace,
                     "labels": {"argocd.argoproj.io/secret-type": "repository"}},
        "type": "Opaque",
        "stringData": secret,
    }));
    if let Some(ca) = &src.ca_pem {
        let host = url_host(&src.url)
            .with_context(|| format!("repository URL {} names no host", src.url))?;
        docs.push(argocd_config_map(
            "argocd-tls-certs-cm",
            namespace,
            json!({host: ca}),
        ));
    }
    for (wave, (part, path)) in src.parts().into_iter().enumerate() {
        docs.push(json!({
            "apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
            "metadata": {"name": format!("{prefix}-{part}"), "namespace": namespace,
                         "annotations": {"argocd.argoproj.io/sync-wave": wave.to_string()}},
            "spec": {
                "project": "default",
                "source": {
                    "repoURL": src.url,
                    "targetRevision": src.branch,
                    "path": if path.is_empty() { ".".to_string() } else { path },
                    "directory": {"recurse": true, "exclude": ".kratix/*"},
                },
                "destination": {"server": "https://kubernetes.default.svc"},
                "syncPolicy": {
                    "automated": {"prune": true, "selfHeal": true},
                    "retry": {"limit": -1, "backoff": {"duration": "5s", "factor": 2, "maxDuration": "3m"}},
                },
            },
        }));
    }
    Ok(docs)
}

/// One of Argo CD's configuration ConfigMaps: Argo CD reads it by its fixed name, and its
/// own manifests label each with that name and `part-of: argocd`.
fn argocd_config_map(name: &str, namespace: &str, data: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "argocd"}},
        "data": data,
    })
}

/// The host of an `https://` or `ssh://` URL, without user or port.
fn url_host(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split('/').next()?;
    let host_port = authority.rsplit('@').next()?;
    let host = if let Some(v6) = host_port.strip_prefix('[') {
        v6.split(']').next()?
    } else {
        host_port.split(':').next()?
    };
    (!host.is_empty()).then(|| host.to_string())
}

/// The platform as the kubeconfig describes it: server URL and CA.
struct PlatformEndpoint {
    server: String,
    ca_pem: Option<String>,
}

fn kubeconfig_path(arg: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(p) = arg {
        return Ok(p.to_path_buf());
    }
    if let Some(first) = std::env::var_os("KUBECONFIG")
        .as_deref()
        .and_then(|v| std::env::split_paths(v).next())
    {
        return Ok(first);
    }
    dirs::home_dir()
        .map(|h| h.join(".kube").join("config"))
        .context("no --kubeconfig, no KUBECONFIG and no home directory")
}

fn endpoint(kc: &Kubeconfig, path: &Path) -> anyhow::Result<PlatformEndpoint> {
    let ctx_name = kc
        .current_context
        .clone()
        .with_context(|| format!("kubeconfig {} has no current-context", path.display()))?;
    let ctx = kc
        .contexts
        .iter()
        .find(|c| c.name == ctx_name)
        .and_then(|c| c.context.clone())
        .with_context(|| {
            format!(
                "kubeconfig {}: context {ctx_name} not found",
                path.display()
            )
        })?;
    let cluster = kc
        .clusters
        .iter()
        .find(|c| c.name == ctx.cluster)
        .and_then(|c| c.cluster.clone())
        .with_context(|| {
            format!(
                "kubeconfig {}: cluster {} not found",
                path.display(),
                ctx.cluster
            )
        })?;
    let server = cluster
        .server
        .with_context(|| format!("kubeconfig {}: cluster has no server", path.display()))?;
    let ca_pem = match (
        &cluster.certificate_authority_data,
        &cluster.certificate_authority,
    ) {
        (Some(data), _) => {
            use base64::Engine;
            let raw = base64::engine::general_purpose::STANDARD
                .decode(data.trim())
                .context("kubeconfig certificate-authority-data is not base64")?;
            Some(String::from_utf8(raw).context("kubeconfig CA is not PEM text")?)
        }
        (None, Some(file)) => {
            Some(std::fs::read_to_string(file).with_context(|| format!("reading CA file {file}"))?)
        }
        _ => None,
    };
    Ok(PlatformEndpoint { server, ca_pem })
}

fn platform_api(client: &kube::Client, kind: &str, plural: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(plinth_api::GROUP, plinth_api::VERSION, kind);
    Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, plural),
    )
}

/// Reads the Destination and its state store from the platform and works out what an
/// agent must clone.
///
/// Errors: the Destination or its GitStateStore is missing, the store is a
/// BucketStateStore, a local store's read token cannot be read, or the store's Secret is
/// missing keys.
pub async fn resolve(args: &GitOpsArgs) -> anyhow::Result<DestinationSource> {
    let kc_path = kubeconfig_path(args.kubeconfig.as_deref())?;
    let kc = Kubeconfig::read_from(&kc_path)
        .with_context(|| format!("reading kubeconfig {}", kc_path.display()))?;
    let ep = endpoint(&kc, &kc_path)?;
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .with_context(|| format!("using kubeconfig {}", kc_path.display()))?;
    let client = kube::Client::try_from(config).context("building the Kubernetes client")?;
    let name = &args.destination;
    let dest = platform_api(&client, "Destination", "destinations")
        .get_opt(name)
        .await
        .with_context(|| format!("reading Destination {name}"))?
        .with_context(|| format!("Destination {name} not found on the platform"))?;
    let spec = &dest.data["spec"];
    let kind = spec["stateStoreRef"]["kind"].as_str().unwrap_or_default();
    let store_name = spec["stateStoreRef"]["name"].as_str().unwrap_or_default();
    if kind != "GitStateStore" {
        bail!(
            "Destination {name}: spec.stateStoreRef is {kind}/{store_name}; only Git state stores can be synced by these manifests (a bucket needs Flux's Bucket source)"
        );
    }
    let store = platform_api(&client, "GitStateStore", "gitstatestores")
        .get_opt(store_name)
        .await
        .with_context(|| format!("reading GitStateStore {store_name}"))?
        .with_context(|| format!("Destination {name}: GitStateStore {store_name} not found"))?;
    let sspec = &store.data["spec"];
    let mode = FilepathMode::parse(spec["filepath"]["mode"].as_str().unwrap_or_default())
        .with_context(|| format!("Destination {name}: spec.filepath.mode"))?;
    let root = effective_root(
        sspec["path"].as_str().unwrap_or_default(),
        spec["path"].as_str().unwrap_or_default(),
    )
    .with_context(|| format!("Destination {name}: spec.path"))?;
    let branch = sspec["branch"].as_str().unwrap_or("main").to_string();
    let url = sspec["url"].as_str().unwrap_or_default().to_string();
    let (url, auth, ca_pem) = if let Some(local) = url.strip_prefix("file://") {
        check_served(&kc_path, store_name, local)?;
        local_store_access(args, &kc_path, &ep, store_name)?
    } else {
        (
            url.clone(),
            remote_store_auth(&client, store_name, sspec, &url).await?,
            None,
        )
    };
    Ok(DestinationSource {
        destination: name.clone(),
        url,
        branch,
        root,
        mode,
        auth,
        ca_pem,
    })
}

/// Refuses a `file://` store whose repository is not the one `plinth up` serves (its
/// local state store next to the kubeconfig), which the Git endpoint answers with 404.
/// Unchecked when the kubeconfig is not in a data directory (copied elsewhere).
fn check_served(kc_path: &Path, store: &str, local: &str) -> anyhow::Result<()> {
    let served = kc_path
        .parent()
        .unwrap_or(Path::new("."))
        .join(crate::gitserve::LOCAL_STORE_REPO);
    let Ok(served) = served.canonicalize() else {
        return Ok(());
    };
    if Path::new(local).canonicalize().is_ok_and(|p| p == served) {
        return Ok(());
    }
    bail!(
        "GitStateStore {store}: spec.url names the local repository {local}, which the platform does not serve; only its local state store {} is served over HTTPS",
        served.display()
    )
}

/// URL, token and CA of a local store served by `plinth up`.
fn local_store_access(
    args: &GitOpsArgs,
    kc_path: &Path,
    ep: &PlatformEndpoint,
    store: &str,
) -> anyhow::Result<(String, RepoAuth, Option<String>)> {
    let token_path = args.git_token_file.clone().unwrap_or_else(|| {
        kc_path
            .parent()
            .unwrap_or(Path::new("."))
            .join(crate::gitserve::TOKEN_FILE)
    });
    let token = std::fs::read_to_string(&token_path)
        .with_context(|| {
            format!(
                "GitStateStore {store} is a local repository served by `plinth up`, but its read token {} cannot be read (pass --git-token-file)",
                token_path.display()
            )
        })?
        .trim()
        .to_string();
    let mut server = ep.server.trim_end_matches('/').to_string();
    if let Some(host) = &args.git_host {
        let scheme_end = server.find("://").map(|i| i + 3).unwrap_or(0);
        server = format!("{}{host}", &server[..scheme_end]);
    }
    let url = format!("{server}{}/{store}", crate::gitserve::ROUTE_PREFIX);
    let auth = RepoAuth::Basic {
        username: "plinth".into(),
        password: token,
    };
    Ok((url, auth, ep.ca_pem.clone()))
}

/// Credentials of a remote store, from the Secret its `spec.secretRef` names.
async fn remote_store_auth(
    client: &kube::Client,
    store: &str,
    sspec: &Value,
    url: &str,
) -> anyhow::Result<RepoAuth> {
    let Some(secret_name) = sspec["secretRef"]["name"].as_str() else {
        return Ok(RepoAuth::None);
    };
    let ns = sspec["secretRef"]["namespace"]
        .as_str()
        .unwrap_or("default");
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), ns);
    let secret = secrets
        .get(secret_name)
        .await
        .with_context(|| format!("GitStateStore {store}: reading Secret {ns}/{secret_name}"))?;
    let data = secret.data.unwrap_or_default();
    let key = |k: &str| {
        data.get(k)
            .map(|v| String::from_utf8_lossy(&v.0).into_owned())
    };
    match sspec["authMethod"].as_str().unwrap_or("basicAuth") {
        "ssh" => Ok(RepoAuth::Ssh {
            private_key: key("sshPrivateKey").with_context(|| {
                format!("GitStateStore {store}: Secret {ns}/{secret_name} has no sshPrivateKey")
            })?,
            known_hosts: key("knownHosts").unwrap_or_default(),
        }),
        "basicAuth" => Ok(RepoAuth::Basic {
            username: key("username").unwrap_or_else(|| {
                if url.contains("github") {
                    "x-access-token".into()
                } else {
                    String::new()
                }
            }),
            password: key("password").with_context(|| {
                format!("GitStateStore {store}: Secret {ns}/{secret_name} has no password")
            })?,
        }),
        other => bail!(
            "GitStateStore {store}: authMethod {other} cannot be given to a GitOps agent; create its repository credentials by hand"
        ),
    }
}

/// Runs `plinth manifests flux` (`argo = false`) or `plinth manifests argocd`.
pub async fn documents(args: &GitOpsArgs, argo: bool) -> anyhow::Result<Vec<Value>> {
    let src = resolve(args).await?;
    if argo {
        argocd_documents(&src, args.namespace.as_deref().unwrap_or("argocd"))
    } else {
        Ok(flux_documents(
            &src,
            args.namespace.as_deref().unwrap_or("flux-system"),
            &args.interval,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(root: &str, mode: FilepathMode) -> DestinationSource {
        DestinationSource {
            destination: "worker-1".into(),
            url: "https://127.0.0.1:6443/git/local".into(),
            branch: "main".into(),
            root: root.into(),
            mode,
            auth: RepoAuth::Basic {
                username: "plinth".into(),
                password: "tok".into(),
            },
            ca_pem: Some("-----BEGIN CERTIFICATE-----\n".into()),
        }
    }

    #[test]
    fn ignore_keeps_only_the_destination_directory() {
        assert_eq!(flux_ignore(""), "/.kratix/\n");
        assert_eq!(
            flux_ignore("clusters/eu/worker-1"),
            "/*\n!/clusters/\n/clusters/*\n!/clusters/eu/\n/clusters/eu/*\n!/clusters/eu/worker-1/\n/clusters/eu/worker-1/.kratix/\n"
        );
    }

    #[test]
    fn flux_resources_depend_on_dependencies() {
        let docs = flux_documents(
            &source("a/b", FilepathMode::NestedByMetadata),
            "flux-system",
            "1m",
        );
        let kinds: Vec<_> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            ["Secret", "GitRepository", "Kustomization", "Kustomization"]
        );
        assert_eq!(docs[2]["spec"]["path"], "./a/b/dependencies");
        assert_eq!(docs[3]["spec"]["path"], "./a/b/resources");
        assert_eq!(
            docs[3]["spec"]["dependsOn"],
            json!([{"name": "kratix-worker-1-dependencies"}])
        );
        assert!(docs[2]["spec"].get("dependsOn").is_none());
        assert_eq!(docs[0]["stringData"]["password"], "tok");
        assert_eq!(docs[1]["spec"]["secretRef"]["name"], "kratix-worker-1-git");
    }

    #[test]
    fn argocd_has_repository_secret_ca_and_one_application_per_part() {
        let docs = argocd_documents(&source("", FilepathMode::None), "argocd").unwrap();
        let kinds: Vec<_> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["Secret", "ConfigMap", "Application"]);
        assert_eq!(
            docs[0]["metadata"]["labels"]["argocd.argoproj.io/secret-type"],
            "repository"
        );
        assert!(docs[1]["data"]["127.0.0.1"].is_string());
        assert_eq!(docs[2]["spec"]["source"]["path"], ".");
    }

    #[test]
    fn argocd_objects_carry_the_labels_argo_cd_reads() {
        for mode in [FilepathMode::None, FilepathMode::NestedByMetadata] {
            let docs = argocd_documents(&source("a", mode), "argocd").unwrap();
            for d in &docs {
                let labels = &d["metadata"]["labels"];
                match d["kind"].as_str().unwrap() {
                    // Argo CD finds repositories by this label only.
                    "Secret" => assert_eq!(
                        labels["argocd.argoproj.io/secret-type"], "repository",
                        "{d}"
                    ),
                    "ConfigMap" => {
                        assert_eq!(
                            labels["app.kubernetes.io/name"], d["metadata"]["name"],
                            "{d}"
                        );
                        assert_eq!(labels["app.kubernetes.io/part-of"], "argocd", "{d}");
                    }
                    "Application" => assert_eq!(d["metadata"]["namespace"], "argocd", "{d}"),
                    other => panic!("unexpected kind {other}"),
                }
            }
        }
    }

    #[test]
    fn hosts_of_urls() {
        assert_eq!(
            url_host("https://127.0.0.1:6443/git/x").as_deref(),
            Some("127.0.0.1")
        );
        assert_eq!(
            url_host("ssh://git@example.com/r.git").as_deref(),
            Some("example.com")
        );
        assert_eq!(url_host("https://[::1]:8443/x").as_deref(), Some("::1"));
    }
}
