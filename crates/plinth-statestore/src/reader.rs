//! Readers: list and fetch the objects under a store prefix, with cheap change detection,
//! for the platform's HealthSource (and anything else that consumes what Destinations
//! write). One implementation per transport behind [`RecordReader`]; adding a transport
//! (a message queue, a key-value store) is one more implementation.
//!
//! * [`ObjectReader`] — S3-compatible buckets, Azure Blob Storage, Google Cloud Storage and
//!   local directories (`object_store`). Change detection: one listing, compared by ETag.
//! * [`GitReader`] — a Git branch (same auth as the Git writer). Change detection: the
//!   fetched branch tip; per file, the blob id. A branch that does not exist is
//!   [`Listing::Absent`], not an error.
//!
//! Readers never write: a credential that can only read is enough.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::TryStreamExt;
use futures::future::BoxFuture;
use object_store::ObjectStore;
use object_store::path::Path as ObjPath;
use sha2::{Digest, Sha256};

use crate::bucket::BucketWriter;
use crate::git::GitHandle;
use crate::{BucketConfig, GitConfig, LocalDirConfig, StoreError};

/// One object found by a listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListedObject {
    /// Key relative to the reader's prefix (`a/b.yaml`).
    pub key: String,
    /// Changes whenever the content changes (an ETag, a Git blob id).
    pub version: String,
}

/// Result of [`RecordReader::list`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Listing {
    /// The store is as it was at the `since` version: nothing to read.
    Unchanged,
    /// The Git branch does not exist: nothing has been written to it yet (the first
    /// write creates it), or it was removed. The reader cannot tell which; the caller
    /// knows whether it ever read anything there.
    Absent,
    /// The store's current content.
    Changed {
        /// A version for the whole listing; pass it back as `since` next time.
        version: String,
        /// Every object under the prefix, sorted by key.
        objects: Vec<ListedObject>,
    },
}

/// Reads objects under a prefix of a store. Implementations are cheap to share between
/// tasks; every call goes to the store (no caching beyond what change detection needs).
pub trait RecordReader: Send + Sync {
    /// Human-readable target for messages (no secrets).
    fn describe(&self) -> String;

    /// Lists every object under the prefix. When `since` is the version of the previous
    /// listing and the store has provably not changed, [`Listing::Unchanged`].
    ///
    /// A Git branch that does not exist is [`Listing::Absent`].
    ///
    /// # Errors
    /// Transport, authentication and missing-bucket errors as [`StoreError`].
    fn list<'a>(&'a self, since: Option<&'a str>) -> BoxFuture<'a, Result<Listing, StoreError>>;

    /// Reads one object by key (as listed); `Ok(None)` when it no longer exists.
    ///
    /// # Errors
    /// Transport errors as [`StoreError`].
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Vec<u8>>, StoreError>>;
}

/// Opens a reader for a store configuration.
///
/// # Errors
/// As [`crate::StateStore::open`]: bad configuration, unreachable store, failed
/// authentication, missing bucket or branch.
pub async fn open_reader(cfg: crate::StoreConfig) -> Result<Arc<dyn RecordReader>, StoreError> {
    Ok(match cfg {
        crate::StoreConfig::Git(g) => Arc::new(GitReader::open(g).await?),
        crate::StoreConfig::Bucket(b) => Arc::new(ObjectReader::open(b).await?),
        crate::StoreConfig::LocalDir(l) => Arc::new(ObjectReader::open_local(l).await?),
    })
}

fn listing_version<'a>(items: impl Iterator<Item = (&'a str, &'a str)>) -> String {
    let mut h = Sha256::new();
    for (k, v) in items {
        h.update(k.as_bytes());
        h.update(b"\0");
        h.update(v.as_bytes());
        h.update(b"\n");
    }
    hex::encode(h.finalize())
}

/// Reader for object storage (S3-compatible, Azure Blob, GCS, a local directory).
pub struct ObjectReader {
    client: BucketWriter,
    store: Arc<dyn ObjectStore>,
    prefix: String,
}

impl ObjectReader {
    /// Opens the bucket and checks it can be listed (read access only).
    ///
    /// # Errors
    /// [`StoreError::InvalidConfig`], [`StoreError::BucketMissing`],
    /// [`StoreError::AuthFailed`], [`StoreError::PermissionDenied`],
    /// [`StoreError::Unreachable`].
    pub async fn open(cfg: BucketConfig) -> Result<ObjectReader, StoreError> {
        Ok(Self::from_client(BucketWriter::open(cfg).await?))
    }

    /// Opens a local directory laid out like a bucket.
    ///
    /// # Errors
    /// [`StoreError::Io`], [`StoreError::InvalidConfig`].
    pub async fn open_local(cfg: LocalDirConfig) -> Result<ObjectReader, StoreError> {
        Ok(Self::from_client(BucketWriter::open_local(cfg).await?))
    }

    fn from_client(client: BucketWriter) -> ObjectReader {
        let (store, prefix) = client.parts();
        let prefix = prefix.to_string();
        ObjectReader {
            client,
            store,
            prefix,
        }
    }

    async fn list_all(&self) -> Result<Vec<ListedObject>, StoreError> {
        let p = (!self.prefix.is_empty()).then(|| ObjPath::from(self.prefix.as_str()));
        let metas: Vec<object_store::ObjectMeta> = self
            .store
            .list(p.as_ref())
            .try_collect()
            .await
            .map_err(|e| self.client.error("list", e))?;
        let mut out: Vec<ListedObject> = metas
            .into_iter()
            .map(|m| ListedObject {
                key: crate::strip_prefix(&self.prefix, m.location.as_ref()),
                version: m.e_tag.clone().unwrap_or_else(|| {
                    format!("{}-{}", m.last_modified.timestamp_micros(), m.size)
                }),
            })
            .collect();
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }
}

impl RecordReader for ObjectReader {
    fn describe(&self) -> String {
        self.client.describe().to_string()
    }

    fn list<'a>(&'a self, since: Option<&'a str>) -> BoxFuture<'a, Result<Listing, StoreError>> {
        Box::pin(async move {
            let objects = self.list_all().await?;
            let version =
                listing_version(objects.iter().map(|o| (o.key.as_str(), o.version.as_str())));
            if since == Some(version.as_str()) {
                return Ok(Listing::Unchanged);
            }
            Ok(Listing::Changed { version, objects })
        })
    }

    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Vec<u8>>, StoreError>> {
        // The reader's store and prefix are its client's, so a key is read as the writer
        // reads a file.
        Box::pin(self.client.read(key))
    }
}

/// Reader for a Git branch: fetches (shallow over the network) into its own work
/// directory and reads blobs from the fetched tip. Needs only fetch rights.
pub struct GitReader {
    handle: Arc<GitHandle>,
    /// key → blob id at the last listing.
    blobs: Mutex<HashMap<String, String>>,
}

impl GitReader {
    /// Opens the repository and fetches the branch.
    ///
    /// # Errors
    /// As [`crate::StateStore::open`] for Git.
    pub async fn open(cfg: GitConfig) -> Result<GitReader, StoreError> {
        Ok(GitReader {
            handle: GitHandle::open(cfg).await?,
            blobs: Mutex::new(HashMap::new()),
        })
    }
}

impl RecordReader for GitReader {
    fn describe(&self) -> String {
        self.handle.describe().to_string()
    }

    fn list<'a>(&'a self, since: Option<&'a str>) -> BoxFuture<'a, Result<Listing, StoreError>> {
        Box::pin(async move {
            // A `since` from another reader (or before a restart) has no blob map yet.
            let since = since.filter(|_| !self.blobs.lock().expect("blobs").is_empty());
            let snap = match self.handle.snapshot_ids("", since).await {
                Ok(Some(snap)) => snap,
                Ok(None) => return Ok(Listing::Unchanged),
                // The first write creates the branch (as the Git writer does): not a
                // transport failure, and the caller decides what it means.
                Err(StoreError::BranchMissing { .. }) => {
                    self.blobs.lock().expect("blobs").clear();
                    return Ok(Listing::Absent);
                }
                Err(e) => return Err(e),
            };
            let objects: Vec<ListedObject> = snap
                .files
                .into_iter()
                .map(|(key, version)| ListedObject { key, version })
                .collect();
            *self.blobs.lock().expect("blobs") = objects
                .iter()
                .map(|o| (o.key.clone(), o.version.clone()))
                .collect();
            Ok(Listing::Changed {
                version: snap.tip,
                objects,
            })
        })
    }

    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Vec<u8>>, StoreError>> {
        Box::pin(async move {
            let id = self.blobs.lock().expect("blobs").get(key).cloned();
            match id {
                Some(id) => self.handle.read_blob(&id).await,
                None => self.handle.read(key).await,
            }
        })
    }
}
