//! The bucket writer (`BucketStateStore`) on `object_store`.
//!
//! * S3-compatible: the endpoint is used exactly as written (no dual-stack or host
//!   rewriting); `insecure: true` means `http://`, otherwise `https://`; path-style addressing
//!   unless virtual-hosted style is asked for; static access keys or ambient (IAM / IRSA /
//!   instance-profile) credentials.
//! * Azure Blob and Google Cloud Storage through the same code (`BucketProvider`).
//! * A local directory laid out like a bucket ([`LocalDirConfig`], embedded mode).
//!
//! Writes put only objects whose content changed (an MD5 ETag is compared, or the object is
//! read back when the ETag is not an MD5), `ReplaceDir` lists the directory and deletes only the
//! keys it did not rewrite, and deletions use the bulk `DeleteObjects` call until the server
//! answers "not implemented", after which single-object deletes are used.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use md5::{Digest as _, Md5};
use object_store::path::Path as ObjPath;
use object_store::{
    BackoffConfig, ClientOptions, ObjectMeta, ObjectStore, ObjectStoreExt, PutPayload, RetryConfig,
};
use sha2::Sha256;

use crate::{
    ResolvedOp, StoreError, WriteOp, WriteOutcome, WriteRequest, layout, resolve_dir, resolve_file,
    resolve_ops,
};

/// Which object-storage service a [`BucketConfig`] talks to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BucketProvider {
    /// Amazon S3 or any S3-compatible server (Kratix's `BucketStateStore`).
    #[default]
    S3,
    /// Azure Blob Storage: `bucket` is the container; `AccessKey { id: account, secret: key }`;
    /// `endpoint` (optional) overrides the service URL (e.g. an emulator).
    Azure,
    /// Google Cloud Storage: `AccessKey { secret: service-account JSON }` (id unused);
    /// `endpoint` (optional) overrides the service URL.
    Gcs,
}

/// Credentials for a bucket (`authMethod`).
#[derive(Clone, PartialEq, Eq)]
pub enum BucketAuth {
    /// `accessKey`: Secret keys `accessKeyID`, `secretAccessKey`.
    AccessKey {
        /// Access key ID (Azure: account name).
        id: String,
        /// Secret access key (Azure: account key; GCS: service-account JSON). Never logged.
        secret: String,
    },
    /// `IAM`: ambient credentials (environment, web identity / IRSA, instance metadata); no
    /// Secret needed.
    Iam,
    /// Azure only: a shared access signature (query string, with or without a leading `?`),
    /// e.g. a read-only one for a reader. Never logged.
    AzureSas {
        /// Storage account name.
        account: String,
        /// The SAS query string.
        token: String,
    },
}

impl std::fmt::Debug for BucketAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BucketAuth::AccessKey { id, .. } => write!(f, "AccessKey {{ id: {id:?}, .. }}"),
            BucketAuth::Iam => write!(f, "Iam"),
            BucketAuth::AzureSas { account, .. } => {
                write!(f, "AzureSas {{ account: {account:?}, .. }}")
            }
        }
    }
}

/// How to reach a bucket.
#[derive(Clone, Debug)]
pub struct BucketConfig {
    /// Service kind; S3 unless set.
    pub provider: BucketProvider,
    /// `host[:port]` (Kratix form, scheme from `insecure`) or a full `http(s)://` URL, used as
    /// written.
    pub endpoint: String,
    /// Bucket (Azure: container) name.
    pub bucket: String,
    /// Key prefix (`spec.path`).
    pub path: String,
    /// Plain HTTP instead of HTTPS.
    pub insecure: bool,
    /// Credentials.
    pub auth: BucketAuth,
    /// Signing region (S3); `us-east-1` when unset.
    pub region: Option<String>,
    /// S3 virtual-hosted-style requests (`https://<bucket>.<endpoint>/key`). Off by default:
    /// path-style works with every S3-compatible server and needs no DNS for the bucket.
    pub virtual_hosted_style: bool,
    /// Use S3 bulk `DeleteObjects`; turned off automatically when the server does not
    /// implement it.
    pub bulk_delete: bool,
}

impl BucketConfig {
    /// An S3 configuration with defaults (HTTPS, path-style, bulk delete on, empty prefix).
    pub fn s3(endpoint: impl Into<String>, bucket: impl Into<String>, auth: BucketAuth) -> Self {
        BucketConfig {
            provider: BucketProvider::S3,
            endpoint: endpoint.into(),
            bucket: bucket.into(),
            path: String::new(),
            insecure: false,
            auth,
            region: None,
            virtual_hosted_style: false,
            bulk_delete: true,
        }
    }
}

/// A local directory used as a bucket (keys are files under `root`).
#[derive(Clone, Debug)]
pub struct LocalDirConfig {
    /// Root directory; created if missing.
    pub root: PathBuf,
    /// Key prefix inside the root (like a store's `spec.path`).
    pub path: String,
}

/// The bucket writer behind a [`crate::StateStore`].
pub(crate) struct BucketWriter {
    store: Arc<dyn ObjectStore>,
    /// Same store with single-object deletes (S3), used after bulk delete was refused.
    single_delete_store: Option<Arc<dyn ObjectStore>>,
    use_single_deletes: AtomicBool,
    prefix: String,
    bucket: String,
    endpoint: String,
    target: String,
    /// Serialises writes: a `ReplaceDir` must not interleave with another write of the same
    /// directory (Kratix holds a per-store mutex the same way).
    lock: tokio::sync::Mutex<()>,
}

/// Whether the request never got an answer: it could not connect, was cut off or timed out.
fn transport_failure(e: &(dyn std::error::Error + 'static)) -> bool {
    use object_store::client::{HttpError, HttpErrorKind};
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(http) = err.downcast_ref::<HttpError>() {
            return matches!(
                http.kind(),
                HttpErrorKind::Connect
                    | HttpErrorKind::Request
                    | HttpErrorKind::Timeout
                    | HttpErrorKind::Interrupted
            );
        }
        cur = err.source();
    }
    false
}

/// The endpoint as a URL: the configured one, with `https://` (or `http://` when
/// `insecure`) added when it names no scheme; empty when none is configured. Plain HTTP
/// must be asked for.
fn endpoint_url(cfg: &BucketConfig) -> Result<String, StoreError> {
    let scheme = if cfg.insecure { "http" } else { "https" };
    let url = if cfg.endpoint.contains("://") || cfg.endpoint.is_empty() {
        cfg.endpoint.clone()
    } else {
        format!("{scheme}://{}", cfg.endpoint)
    };
    if url.starts_with("http://") && !cfg.insecure {
        return Err(StoreError::InvalidConfig {
            field: "endpoint".into(),
            cause: format!("{url} is plain HTTP; set insecure: true to allow it"),
        });
    }
    Ok(url)
}

fn invalid_endpoint(e: object_store::Error) -> StoreError {
    StoreError::InvalidConfig {
        field: "endpoint".into(),
        cause: full_message(&e),
    }
}

fn sas_outside_azure() -> StoreError {
    StoreError::InvalidConfig {
        field: "authMethod".into(),
        cause: "a shared access signature is for Azure Blob Storage only".into(),
    }
}

type Stores = (Arc<dyn ObjectStore>, Option<Arc<dyn ObjectStore>>);

/// An S3 client, and a second one that deletes object by object (for endpoints that
/// refuse bulk delete).
fn s3_stores(
    cfg: &BucketConfig,
    endpoint_url: &str,
    client: ClientOptions,
) -> Result<Stores, StoreError> {
    if endpoint_url.is_empty() {
        return Err(StoreError::InvalidConfig {
            field: "endpoint".into(),
            cause: "empty".into(),
        });
    }
    let b = match &cfg.auth {
        // Ambient credentials: environment, web identity (IRSA), instance metadata.
        BucketAuth::Iam => object_store::aws::AmazonS3Builder::from_env(),
        BucketAuth::AccessKey { id, secret } => object_store::aws::AmazonS3Builder::new()
            .with_access_key_id(id)
            .with_secret_access_key(secret),
        BucketAuth::AzureSas { .. } => return Err(sas_outside_azure()),
    };
    let endpoint = if cfg.virtual_hosted_style {
        let (s, host) = endpoint_url.split_once("://").expect("scheme present");
        format!("{s}://{}.{host}", cfg.bucket)
    } else {
        endpoint_url.to_string()
    };
    let b = b
        .with_endpoint(endpoint)
        .with_bucket_name(&cfg.bucket)
        .with_region(cfg.region.clone().unwrap_or_else(|| "us-east-1".into()))
        .with_virtual_hosted_style_request(cfg.virtual_hosted_style)
        .with_allow_http(cfg.insecure)
        .with_client_options(client)
        .with_retry(retry_config());
    let single = b
        .clone()
        .with_disable_bulk_delete(true)
        .build()
        .map_err(invalid_endpoint)?;
    let bulk = b
        .with_disable_bulk_delete(!cfg.bulk_delete)
        .build()
        .map_err(invalid_endpoint)?;
    Ok((Arc::new(bulk), Some(Arc::new(single))))
}

fn azure_store(
    cfg: &BucketConfig,
    endpoint_url: &str,
    client: ClientOptions,
) -> Result<Arc<dyn ObjectStore>, StoreError> {
    use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
    let mut b = match &cfg.auth {
        BucketAuth::Iam => MicrosoftAzureBuilder::from_env(),
        BucketAuth::AccessKey { id, secret } => MicrosoftAzureBuilder::new()
            .with_account(id)
            .with_access_key(secret),
        BucketAuth::AzureSas { account, token } => MicrosoftAzureBuilder::new()
            .with_account(account)
            .with_config(AzureConfigKey::SasKey, token.trim_start_matches('?')),
    };
    b = b
        .with_container_name(&cfg.bucket)
        .with_allow_http(cfg.insecure)
        .with_client_options(client)
        .with_retry(retry_config());
    if !endpoint_url.is_empty() {
        b = b.with_endpoint(endpoint_url.to_string());
    }
    Ok(Arc::new(b.build().map_err(invalid_endpoint)?))
}

fn gcs_store(
    cfg: &BucketConfig,
    endpoint_url: &str,
    client: ClientOptions,
) -> Result<Arc<dyn ObjectStore>, StoreError> {
    use object_store::gcp::GoogleCloudStorageBuilder;
    let mut b = match &cfg.auth {
        BucketAuth::Iam => GoogleCloudStorageBuilder::from_env(),
        BucketAuth::AccessKey { secret, .. } => {
            GoogleCloudStorageBuilder::new().with_service_account_key(secret)
        }
        BucketAuth::AzureSas { .. } => return Err(sas_outside_azure()),
    };
    b = b
        .with_bucket_name(&cfg.bucket)
        .with_client_options(client)
        .with_retry(retry_config());
    if !endpoint_url.is_empty() {
        b = b.with_base_url(endpoint_url);
    }
    Ok(Arc::new(b.build().map_err(invalid_endpoint)?))
}

fn full_message(e: &(dyn std::error::Error + 'static)) -> String {
    let mut msg = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        let t = s.to_string();
        if !msg.contains(&t) {
            msg.push_str(": ");
            msg.push_str(&t);
        }
        src = s.source();
    }
    crate::error::stable_message(&msg)
}

fn is_not_implemented(e: &object_store::Error) -> bool {
    if matches!(e, object_store::Error::NotImplemented { .. }) {
        return true;
    }
    let m = full_message(e).to_lowercase();
    m.contains("notimplemented")
        || m.contains("not implemented")
        || crate::error::named_http_status(&m) == Some(501)
}

fn md5_hex(content: &[u8]) -> String {
    hex::encode(Md5::digest(content))
}

fn retry_config() -> RetryConfig {
    RetryConfig {
        backoff: BackoffConfig::default(),
        max_retries: 3,
        retry_timeout: Duration::from_secs(30),
    }
}

impl BucketWriter {
    pub(crate) fn describe(&self) -> &str {
        &self.target
    }

    /// The client and the key prefix, for the reader.
    pub(crate) fn parts(&self) -> (Arc<dyn ObjectStore>, &str) {
        (self.store.clone(), &self.prefix)
    }

    /// Maps a client error like the writer does (for the reader).
    pub(crate) fn error(&self, op: &str, e: object_store::Error) -> StoreError {
        self.map_err(op, e)
    }

    fn prefix_of(path: &str) -> Result<String, StoreError> {
        layout::normalize_path(path).map_err(|e| StoreError::InvalidConfig {
            field: "path".into(),
            cause: e.to_string(),
        })
    }

    pub(crate) async fn open(cfg: BucketConfig) -> Result<BucketWriter, StoreError> {
        let prefix = Self::prefix_of(&cfg.path)?;
        if cfg.bucket.is_empty() {
            return Err(StoreError::InvalidConfig {
                field: "bucketName".into(),
                cause: "empty".into(),
            });
        }
        let endpoint_url = endpoint_url(&cfg)?;
        let (connect, overall) = crate::network_timeouts();
        crate::install_tls_provider();
        let client = ClientOptions::new()
            .with_allow_http(cfg.insecure)
            .with_connect_timeout(connect)
            .with_timeout(overall);
        let (store, single) = match cfg.provider {
            BucketProvider::S3 => s3_stores(&cfg, &endpoint_url, client)?,
            BucketProvider::Azure => (azure_store(&cfg, &endpoint_url, client)?, None),
            BucketProvider::Gcs => (gcs_store(&cfg, &endpoint_url, client)?, None),
        };
        let writer = BucketWriter {
            store,
            single_delete_store: single,
            use_single_deletes: AtomicBool::new(!cfg.bulk_delete),
            prefix,
            target: format!("bucket {:?} at {}", cfg.bucket, cfg.endpoint),
            bucket: cfg.bucket,
            endpoint: cfg.endpoint,
            lock: tokio::sync::Mutex::new(()),
        };
        writer.check_bucket().await?;
        Ok(writer)
    }

    pub(crate) async fn open_local(cfg: LocalDirConfig) -> Result<BucketWriter, StoreError> {
        let prefix = Self::prefix_of(&cfg.path)?;
        let io = |e: std::io::Error| StoreError::Io {
            path: cfg.root.display().to_string(),
            cause: e.to_string(),
        };
        std::fs::create_dir_all(&cfg.root).map_err(io)?;
        let root = std::fs::canonicalize(&cfg.root).map_err(io)?;
        let fs = object_store::local::LocalFileSystem::new_with_prefix(&root)
            .map_err(|e| StoreError::InvalidConfig {
                field: "root".into(),
                cause: full_message(&e),
            })?
            .with_automatic_cleanup(true);
        Ok(BucketWriter {
            store: Arc::new(fs),
            single_delete_store: None,
            use_single_deletes: AtomicBool::new(false),
            prefix,
            bucket: root.display().to_string(),
            endpoint: "local".into(),
            target: format!("directory {}", root.display()),
            lock: tokio::sync::Mutex::new(()),
        })
    }

    /// Maps an object_store error to a specific [`StoreError`].
    ///
    /// The class comes from what the error is — the HTTP status object_store already read,
    /// a transport failure, or a provider error code in the answer's body — never from digits
    /// in the text: a port such as 41401 in a refused URL is not a 401.
    fn map_err(&self, op: &str, e: object_store::Error) -> StoreError {
        let msg = full_message(&e);
        let l = msg.to_lowercase();
        let target = self.target.clone();
        let has_code = |codes: &[&str]| codes.iter().any(|c| l.contains(c));
        if has_code(&["nosuchbucket", "bucket does not exist", "containernotfound"]) {
            return StoreError::BucketMissing {
                bucket: self.bucket.clone(),
                endpoint: self.endpoint.clone(),
            };
        }
        // S3 answers a wrong key or secret with 403 and one of these codes: the credentials
        // are at fault, not the policy.
        let bad_credentials = has_code(&["invalidaccesskeyid", "signaturedoesnotmatch"]);
        match &e {
            object_store::Error::Unauthenticated { .. } => {
                return StoreError::AuthFailed { target, cause: msg };
            }
            object_store::Error::PermissionDenied { .. } if bad_credentials => {
                return StoreError::AuthFailed { target, cause: msg };
            }
            object_store::Error::PermissionDenied { .. } => {
                return StoreError::PermissionDenied { target, cause: msg };
            }
            _ => {}
        }
        if transport_failure(&e) {
            return StoreError::Unreachable { target, cause: msg };
        }
        if bad_credentials || has_code(&["unauthorized", "authenticationfailed"]) {
            return StoreError::AuthFailed { target, cause: msg };
        }
        if has_code(&["accessdenied", "forbidden", "authorizationfailure"]) {
            return StoreError::PermissionDenied { target, cause: msg };
        }
        if has_code(&[
            "connection refused",
            "error sending request",
            "connect error",
            "tcp connect",
            "dns error",
            "failed to lookup address",
            "timed out",
            "network is unreachable",
        ]) {
            return StoreError::Unreachable { target, cause: msg };
        }
        StoreError::Bucket {
            op: op.into(),
            target,
            cause: msg,
        }
    }

    /// Lists the prefix once: a missing bucket or a dead endpoint shows up here (Kratix only
    /// logged a missing bucket).
    async fn check_bucket(&self) -> Result<(), StoreError> {
        let p = (!self.prefix.is_empty()).then(|| ObjPath::from(self.prefix.as_str()));
        match self.store.list_with_delimiter(p.as_ref()).await {
            Ok(_) => Ok(()),
            Err(object_store::Error::NotFound { .. }) => Err(StoreError::BucketMissing {
                bucket: self.bucket.clone(),
                endpoint: self.endpoint.clone(),
            }),
            Err(e) => Err(self.map_err("list", e)),
        }
    }

    pub(crate) async fn validate(&self) -> Result<(), StoreError> {
        self.check_bucket().await?;
        let probe = ObjPath::from(
            layout::safe_join(&self.prefix, ".kratix-write-permission-check")
                .expect("constant path is safe"),
        );
        let mut upload = self
            .store
            .put_multipart(&probe)
            .await
            .map_err(|e| self.map_err("multipart-initiate", e))?;
        upload
            .abort()
            .await
            .map_err(|e| self.map_err("multipart-abort", e))?;
        Ok(())
    }

    async fn list_meta(&self, dir: &str) -> Result<HashMap<ObjPath, ObjectMeta>, StoreError> {
        let p = (!dir.is_empty()).then(|| ObjPath::from(dir));
        let metas: Vec<ObjectMeta> =
            self.store
                .list(p.as_ref())
                .try_collect()
                .await
                .map_err(|e| match e {
                    object_store::Error::NotFound { .. } => StoreError::BucketMissing {
                        bucket: self.bucket.clone(),
                        endpoint: self.endpoint.clone(),
                    },
                    e => self.map_err("list", e),
                })?;
        Ok(metas.into_iter().map(|m| (m.location.clone(), m)).collect())
    }

    async fn head(&self, loc: &ObjPath) -> Result<Option<ObjectMeta>, StoreError> {
        match self.store.head(loc).await {
            Ok(m) => Ok(Some(m)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.map_err("head", e)),
        }
    }

    /// Puts `content` unless the object already holds exactly it. Returns whether it wrote.
    async fn put_if_changed(
        &self,
        loc: &ObjPath,
        content: &[u8],
        existing: Option<&ObjectMeta>,
    ) -> Result<bool, StoreError> {
        if let Some(m) = existing
            && m.size == content.len() as u64
        {
            let etag = m
                .e_tag
                .as_deref()
                .map(|t| t.trim_matches('"').to_ascii_lowercase());
            let md5_like = etag
                .as_deref()
                .is_some_and(|t| t.len() == 32 && t.bytes().all(|b| b.is_ascii_hexdigit()));
            if md5_like {
                if etag.as_deref() == Some(md5_hex(content).as_str()) {
                    return Ok(false);
                }
            } else {
                // Not an MD5 ETag (multipart upload, encryption, local filesystem): compare bytes.
                match self.store.get(loc).await {
                    Ok(r) => {
                        let got = r.bytes().await.map_err(|e| self.map_err("get", e))?;
                        if got.as_ref() == content {
                            return Ok(false);
                        }
                    }
                    Err(object_store::Error::NotFound { .. }) => {}
                    Err(e) => return Err(self.map_err("get", e)),
                }
            }
        }
        self.store
            .put(loc, PutPayload::from(content.to_vec()))
            .await
            .map_err(|e| self.map_err("put", e))?;
        Ok(true)
    }

    /// Deletes keys; bulk first, single-object deletes when the server does not implement bulk
    /// delete. Missing keys are fine.
    async fn delete_keys(&self, keys: Vec<ObjPath>) -> Result<(), StoreError> {
        if keys.is_empty() {
            return Ok(());
        }
        if !self.use_single_deletes.load(Ordering::Relaxed) {
            let stream = futures::stream::iter(keys.clone().into_iter().map(Ok)).boxed();
            let results: Vec<_> = self.store.delete_stream(stream).collect().await;
            let mut refused = None;
            for r in results {
                match r {
                    Ok(_) | Err(object_store::Error::NotFound { .. }) => {}
                    Err(e) if is_not_implemented(&e) => refused = Some(full_message(&e)),
                    Err(e) => return Err(self.map_err("delete", e)),
                }
            }
            match refused {
                None => return Ok(()),
                Some(cause) => {
                    tracing::warn!(store = %self.target, %cause, "bulk delete not implemented by the server; using single-object deletes from now on");
                    self.use_single_deletes.store(true, Ordering::Relaxed);
                }
            }
        }
        let store = self.single_delete_store.as_ref().unwrap_or(&self.store);
        let results: Vec<_> = store
            .delete_stream(futures::stream::iter(keys.into_iter().map(Ok)).boxed())
            .collect()
            .await;
        for r in results {
            match r {
                Ok(_) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(self.map_err("delete", e)),
            }
        }
        Ok(())
    }

    pub(crate) async fn write(&self, req: WriteRequest) -> Result<WriteOutcome, StoreError> {
        let ops = resolve_ops(&self.prefix, &req.ops)?;
        let _guard = self.lock.lock().await;
        let mut changed = false;
        // key → md5 of content, or "-" for a deleted key; feeds the version ID.
        let mut covered: BTreeMap<String, String> = BTreeMap::new();
        for ResolvedOp(op) in ops {
            match op {
                WriteOp::ReplaceDir { dir, files } => {
                    let existing = self.list_meta(&dir).await?;
                    let mut kept = HashSet::new();
                    for (key, content) in &files {
                        let loc = ObjPath::from(key.as_str());
                        changed |= self
                            .put_if_changed(&loc, content, existing.get(&loc))
                            .await?;
                        covered.insert(key.clone(), md5_hex(content));
                        kept.insert(loc);
                    }
                    let stale: Vec<ObjPath> =
                        existing.into_keys().filter(|k| !kept.contains(k)).collect();
                    if !stale.is_empty() {
                        for k in &stale {
                            covered.insert(k.to_string(), "-".into());
                        }
                        self.delete_keys(stale).await?;
                        changed = true;
                    }
                }
                WriteOp::Put { path, content } => {
                    let loc = ObjPath::from(path.as_str());
                    let existing = self.head(&loc).await?;
                    changed |= self
                        .put_if_changed(&loc, &content, existing.as_ref())
                        .await?;
                    covered.insert(path, md5_hex(&content));
                }
                WriteOp::Delete { path } => {
                    let loc = ObjPath::from(path.as_str());
                    if self.head(&loc).await?.is_some() {
                        self.delete_keys(vec![loc]).await?;
                        changed = true;
                    }
                    covered.insert(path, "-".into());
                }
                WriteOp::DeleteDir { dir } => {
                    let existing = self.list_meta(&dir).await?;
                    if !existing.is_empty() {
                        for k in existing.keys() {
                            covered.insert(k.to_string(), "-".into());
                        }
                        self.delete_keys(existing.into_keys().collect()).await?;
                        changed = true;
                    }
                }
            }
        }
        let mut h = <Sha256 as sha2::Digest>::new();
        for (k, v) in &covered {
            sha2::Digest::update(&mut h, k.as_bytes());
            sha2::Digest::update(&mut h, b"\0");
            sha2::Digest::update(&mut h, v.as_bytes());
            sha2::Digest::update(&mut h, b"\n");
        }
        Ok(WriteOutcome {
            version_id: hex::encode(sha2::Digest::finalize(h)),
            changed,
        })
    }

    pub(crate) async fn read(&self, path: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let full = resolve_file(&self.prefix, path)?;
        match self.store.get(&ObjPath::from(full.as_str())).await {
            Ok(r) => Ok(Some(
                r.bytes()
                    .await
                    .map_err(|e| self.map_err("get", e))?
                    .to_vec(),
            )),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.map_err("get", e)),
        }
    }

    pub(crate) async fn list(&self, dir: &str) -> Result<Vec<String>, StoreError> {
        let full = resolve_dir(&self.prefix, dir)?;
        let mut keys: Vec<String> = self
            .list_meta(&full)
            .await?
            .into_keys()
            .map(|k| crate::strip_prefix(&self.prefix, k.as_ref()))
            .collect();
        keys.sort();
        Ok(keys)
    }

    /// Version (SHA-256 over keys and ETags) and, when it differs from `since`, the
    /// content of every object under `dir` (keys relative to the store prefix).
    pub(crate) async fn snapshot(
        &self,
        dir: &str,
        since: Option<&str>,
    ) -> Result<crate::Snapshot, StoreError> {
        use sha2::Digest;
        let full = resolve_dir(&self.prefix, dir)?;
        let mut metas: Vec<(ObjPath, ObjectMeta)> =
            self.list_meta(&full).await?.into_iter().collect();
        metas.sort_by(|a, b| a.0.as_ref().cmp(b.0.as_ref()));
        let mut h = sha2::Sha256::new();
        for (k, m) in &metas {
            h.update(k.as_ref().as_bytes());
            h.update(b"\0");
            h.update(m.e_tag.as_deref().unwrap_or("").as_bytes());
            h.update(m.size.to_le_bytes());
            h.update(b"\0");
        }
        let version = hex::encode(h.finalize());
        if since == Some(version.as_str()) {
            return Ok(crate::Snapshot {
                version,
                files: None,
            });
        }
        let mut files = Vec::with_capacity(metas.len());
        for (k, _) in metas {
            let got = match self.store.get(&k).await {
                Ok(r) => r
                    .bytes()
                    .await
                    .map_err(|e| self.map_err("get", e))?
                    .to_vec(),
                // Deleted between list and get: the next snapshot sees it gone.
                Err(object_store::Error::NotFound { .. }) => continue,
                Err(e) => return Err(self.map_err("get", e)),
            };
            files.push((crate::strip_prefix(&self.prefix, k.as_ref()), got));
        }
        Ok(crate::Snapshot {
            version,
            files: Some(files),
        })
    }
}
