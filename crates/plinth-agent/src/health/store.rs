//! The health store's configuration: SKE's `health-state-store-config` ConfigMap plus the
//! Secret it names, read from the agent's own cluster.
//!
//! ConfigMap keys: `stateStoreKind` (`GitStateStore` or `BucketStateStore`), `path` (prefix
//! of the records), `secretName` (a Secret in the ConfigMap's namespace), `insecure`
//! (`true`: plain HTTP to the bucket, or no TLS verification for Git); Git: `url`,
//! `branch` (default `main`); bucket: `endpoint`, `bucketName`, `authMethod` (`accessKey`
//! — the Secret's `accessKeyID`/`secretAccessKey` — or `IAM`), `region`. Secret keys are a
//! state store's (Git `username`/`password`, `sshPrivateKey`/`knownHosts`, ...).
//!
//! Streams: `stateStoreKind: Redis` with `address` (`redis://host:port`, `rediss://` for
//! TLS), `stream` (the key) and `secretName` (optional keys `username`, `password`);
//! `stateStoreKind: NATS` with `servers` (comma-separated URLs), `stream` (the JetStream
//! stream, created with the subject if missing), `subject`, and `secretName` (optional key
//! `token`, or `username`/`password`).

use std::collections::BTreeMap;
use std::path::Path;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use plinth_statestore::{
    BucketAuth, BucketConfig, GitConfig, NatsConfig, RedisConfig, StoreConfig, StreamConfig,
};

use crate::credentials::{Credentials, CredentialsError};

/// Why the health store's configuration cannot be read or used. Messages name the
/// ConfigMap (or Secret) and the key at fault.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HealthStoreError {
    /// A key the store kind needs is missing or empty.
    #[error("key {key} is required")]
    MissingKey {
        /// The ConfigMap key.
        key: String,
    },
    /// `stateStoreKind` names no supported store.
    #[error("key stateStoreKind: {kind:?} is not GitStateStore, BucketStateStore, Redis or NATS")]
    UnknownKind {
        /// The value given.
        kind: String,
    },
    /// `authMethod` is neither `accessKey` nor `IAM`.
    #[error("key authMethod: {method:?} is not accessKey or IAM")]
    UnknownAuthMethod {
        /// The value given.
        method: String,
    },
    /// `authMethod: accessKey` without a Secret holding the keys.
    #[error(
        "authMethod accessKey needs secretName naming a Secret with accessKeyID and secretAccessKey"
    )]
    AccessKeyNeedsSecret,
    /// The Secret's keys do not describe a complete method.
    #[error("secret: {0}")]
    Credentials(CredentialsError),
    /// The ConfigMap could not be read.
    #[error("ConfigMap {namespace}/{name}: {cause}")]
    ReadConfigMap {
        /// The ConfigMap's namespace.
        namespace: String,
        /// The ConfigMap's name.
        name: String,
        /// The API's message.
        cause: String,
    },
    /// The Secret named by `secretName` could not be read.
    #[error("ConfigMap {namespace}/{name}: Secret {namespace}/{secret}: {cause}")]
    ReadSecret {
        /// The namespace of the ConfigMap and the Secret.
        namespace: String,
        /// The ConfigMap's name.
        name: String,
        /// The Secret's name.
        secret: String,
        /// The API's message.
        cause: String,
    },
    /// The Secret named by `secretName` does not exist.
    #[error("ConfigMap {namespace}/{name}: Secret {namespace}/{secret} not found")]
    SecretMissing {
        /// The namespace of the ConfigMap and the Secret.
        namespace: String,
        /// The ConfigMap's name.
        name: String,
        /// The Secret's name.
        secret: String,
    },
    /// The Secret could not be turned into JSON.
    #[error("{cause}")]
    SecretJson {
        /// The encoder's message.
        cause: String,
    },
    /// The Secret's `data`/`stringData` are not credentials.
    #[error("ConfigMap {namespace}/{name}: Secret {namespace}/{secret}: {cause}")]
    InvalidSecret {
        /// The namespace of the ConfigMap and the Secret.
        namespace: String,
        /// The ConfigMap's name.
        name: String,
        /// The Secret's name.
        secret: String,
        /// What is wrong with it.
        cause: Box<CredentialsError>,
    },
    /// The ConfigMap's keys do not describe a store.
    #[error("ConfigMap {namespace}/{name}: {cause}")]
    InConfigMap {
        /// The ConfigMap's namespace.
        namespace: String,
        /// The ConfigMap's name.
        name: String,
        /// What is wrong with its keys.
        cause: Box<HealthStoreError>,
    },
}

fn required_key<'a>(
    get: impl Fn(&str) -> Option<&'a str>,
    key: &str,
) -> Result<&'a str, HealthStoreError> {
    get(key).ok_or_else(|| HealthStoreError::MissingKey {
        key: key.to_string(),
    })
}

/// Where the health writer writes: a state store (one object or file per record) or a
/// stream (one message per record write).
#[derive(Clone, Debug)]
pub enum HealthStore {
    /// A Git repository, a bucket or a directory.
    Store(StoreConfig),
    /// A Redis or NATS JetStream stream.
    Stream(StreamConfig),
}

/// A store configuration read from the cluster, with a fingerprint that changes when the
/// ConfigMap or its Secret changes.
#[derive(Clone, Debug)]
pub struct LoadedStore {
    /// The store to write to.
    pub config: HealthStore,
    /// `resourceVersion`s of the ConfigMap and the Secret.
    pub fingerprint: String,
}

/// Builds the store from the ConfigMap's `data` and the Secret's credentials.
///
/// # Errors
/// A [`HealthStoreError`] naming the ConfigMap key and the cause: a missing key, an
/// unknown `stateStoreKind` or `authMethod`, or incomplete Secret credentials.
pub fn store_from_data(
    data: &BTreeMap<String, String>,
    creds: &Credentials,
    work_dir: &Path,
) -> Result<HealthStore, HealthStoreError> {
    let get = |k: &str| data.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
    let required = |k: &str| required_key(get, k);
    let secret = |k: &str| creds.0.get(k).filter(|v| !v.is_empty()).cloned();
    match required("stateStoreKind")? {
        "Redis" => {
            let mut r = RedisConfig::new(required("address")?, required("stream")?);
            r.username = secret("username");
            r.password = secret("password");
            return Ok(HealthStore::Stream(StreamConfig::Redis(r)));
        }
        "NATS" => {
            let servers: Vec<String> = required("servers")?
                .split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect();
            let mut n = NatsConfig::new(servers, required("stream")?, required("subject")?);
            n.token = secret("token");
            n.username = secret("username");
            n.password = secret("password");
            return Ok(HealthStore::Stream(StreamConfig::Nats(n)));
        }
        _ => {}
    }
    store_config_from_data(data, creds, work_dir).map(HealthStore::Store)
}

fn store_config_from_data(
    data: &BTreeMap<String, String>,
    creds: &Credentials,
    work_dir: &Path,
) -> Result<StoreConfig, HealthStoreError> {
    let get = |k: &str| data.get(k).map(|v| v.trim()).filter(|v| !v.is_empty());
    let required = |k: &str| required_key(get, k);
    let insecure = get("insecure").is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let path = get("path").unwrap_or_default().to_string();
    match required("stateStoreKind")? {
        "GitStateStore" => {
            let mut g = GitConfig::new(
                required("url")?,
                get("branch").unwrap_or("main"),
                work_dir.join("health-store"),
            );
            g.path = path;
            g.insecure_skip_tls_verify = insecure;
            g.auth = creds.git_auth().map_err(HealthStoreError::Credentials)?;
            Ok(StoreConfig::Git(g))
        }
        "BucketStateStore" => {
            let auth = match get("authMethod").unwrap_or("accessKey") {
                "IAM" => BucketAuth::Iam,
                "accessKey" => match creds.bucket_auth().map_err(HealthStoreError::Credentials)? {
                    BucketAuth::Iam => return Err(HealthStoreError::AccessKeyNeedsSecret),
                    a => a,
                },
                other => {
                    return Err(HealthStoreError::UnknownAuthMethod {
                        method: other.to_string(),
                    });
                }
            };
            let mut b = BucketConfig::s3(required("endpoint")?, required("bucketName")?, auth);
            b.path = path;
            b.insecure = insecure;
            b.region = get("region").map(str::to_string);
            Ok(StoreConfig::Bucket(b))
        }
        other => Err(HealthStoreError::UnknownKind {
            kind: other.to_string(),
        }),
    }
}

/// Reads ConfigMap `namespace/name` and its Secret: `Ok(None)` while the ConfigMap does
/// not exist.
///
/// # Errors
/// A [`HealthStoreError`] naming the ConfigMap or Secret and the cause: an API error,
/// a missing Secret, invalid credentials, or keys that describe no store (as
/// [`store_from_data`], inside [`HealthStoreError::InConfigMap`]).
pub async fn load(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    work_dir: &Path,
) -> Result<Option<LoadedStore>, HealthStoreError> {
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let Some(cm) = cms
        .get_opt(name)
        .await
        .map_err(|e| HealthStoreError::ReadConfigMap {
            namespace: namespace.to_string(),
            name: name.to_string(),
            cause: e.to_string(),
        })?
    else {
        return Ok(None);
    };
    let data = cm.data.clone().unwrap_or_default();
    let mut fingerprint = cm.metadata.resource_version.clone().unwrap_or_default();
    let creds = match data.get("secretName").filter(|s| !s.is_empty()) {
        None => Credentials::default(),
        Some(secret) => {
            let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
            let s = secrets
                .get_opt(secret)
                .await
                .map_err(|e| HealthStoreError::ReadSecret {
                    namespace: namespace.to_string(),
                    name: name.to_string(),
                    secret: secret.clone(),
                    cause: e.to_string(),
                })?
                .ok_or_else(|| HealthStoreError::SecretMissing {
                    namespace: namespace.to_string(),
                    name: name.to_string(),
                    secret: secret.clone(),
                })?;
            fingerprint.push('/');
            fingerprint.push_str(s.metadata.resource_version.as_deref().unwrap_or_default());
            let v = serde_json::to_value(&s).map_err(|e| HealthStoreError::SecretJson {
                cause: e.to_string(),
            })?;
            Credentials::from_secret_json(&v).map_err(|cause| HealthStoreError::InvalidSecret {
                namespace: namespace.to_string(),
                name: name.to_string(),
                secret: secret.clone(),
                cause: Box::new(cause),
            })?
        }
    };
    let config = store_from_data(&data, &creds, work_dir).map_err(|cause| {
        HealthStoreError::InConfigMap {
            namespace: namespace.to_string(),
            name: name.to_string(),
            cause: Box::new(cause),
        }
    })?;
    Ok(Some(LoadedStore {
        config,
        fingerprint,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn git_and_bucket_stores_are_built_and_bad_keys_named() {
        let creds = Credentials(BTreeMap::from([
            ("accessKeyID".to_string(), "id".to_string()),
            ("secretAccessKey".to_string(), "s".to_string()),
        ]));
        let dir = Path::new("/tmp/x");
        let HealthStore::Store(StoreConfig::Bucket(b)) = store_from_data(
            &data(&[
                ("stateStoreKind", "BucketStateStore"),
                ("endpoint", "127.0.0.1:9000"),
                ("bucketName", "health"),
                ("path", "records"),
                ("insecure", "true"),
            ]),
            &creds,
            dir,
        )
        .unwrap() else {
            panic!("bucket expected")
        };
        assert_eq!(
            (b.bucket.as_str(), b.path.as_str(), b.insecure),
            ("health", "records", true)
        );
        let HealthStore::Store(StoreConfig::Git(g)) = store_from_data(
            &data(&[
                ("stateStoreKind", "GitStateStore"),
                ("url", "file:///srv/h.git"),
            ]),
            &Credentials::default(),
            dir,
        )
        .unwrap() else {
            panic!("git expected")
        };
        assert_eq!(g.branch, "main");
        let e = store_from_data(&data(&[("stateStoreKind", "Bucket")]), &creds, dir).unwrap_err();
        assert!(e.to_string().contains("stateStoreKind"), "{e}");
        let e = store_from_data(&data(&[("stateStoreKind", "GitStateStore")]), &creds, dir)
            .unwrap_err();
        assert!(e.to_string().contains("key url is required"), "{e}");
        let e = store_from_data(
            &data(&[
                ("stateStoreKind", "BucketStateStore"),
                ("endpoint", "e"),
                ("bucketName", "b"),
            ]),
            &Credentials::default(),
            dir,
        )
        .unwrap_err();
        assert!(e.to_string().contains("secretName"), "{e}");
        let creds = Credentials(BTreeMap::from([
            ("username".to_string(), "u".to_string()),
            ("password".to_string(), "p".to_string()),
        ]));
        let HealthStore::Stream(StreamConfig::Redis(r)) = store_from_data(
            &data(&[
                ("stateStoreKind", "Redis"),
                ("address", "rediss://redis.example.test:6380"),
                ("stream", "health"),
            ]),
            &creds,
            dir,
        )
        .unwrap() else {
            panic!("redis expected")
        };
        assert_eq!(
            (
                r.stream.as_str(),
                r.username.as_deref(),
                r.password.as_deref()
            ),
            ("health", Some("u"), Some("p"))
        );
        let HealthStore::Stream(StreamConfig::Nats(n)) = store_from_data(
            &data(&[
                ("stateStoreKind", "NATS"),
                ("servers", "nats://a:4222, nats://b:4222"),
                ("stream", "HEALTH"),
                ("subject", "health.records"),
            ]),
            &Credentials::default(),
            dir,
        )
        .unwrap() else {
            panic!("nats expected")
        };
        assert_eq!(n.servers, ["nats://a:4222", "nats://b:4222"]);
        let e = store_from_data(&data(&[("stateStoreKind", "Redis")]), &creds, dir).unwrap_err();
        assert!(e.to_string().contains("key address is required"), "{e}");
    }
}
