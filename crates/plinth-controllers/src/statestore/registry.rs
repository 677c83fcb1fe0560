//! The registry of open state stores, shared by the state store, Destination and
//! WorkPlacement controllers (Kratix's repository cache).
//!
//! The state store controllers open and validate a store, then register it here with a
//! fingerprint of what it was built from (store generation + Secret resourceVersion), so
//! an unchanged store is not re-opened on every event and a changed Secret or spec
//! replaces the entry. Destinations and WorkPlacements only read, except that a write
//! refused for its credentials drops the entry and wakes the store's controller
//! ([`StoreRegistry::report_auth_failure`]).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};

use plinth_api::{BucketStateStore, GitStateStore, StateStoreKind};
use plinth_statestore::StateStore;

#[derive(Clone)]
struct Entry {
    store: StateStore,
    fingerprint: String,
}

/// Open state stores keyed by `<Kind>/<name>` (e.g. `GitStateStore/default`).
#[derive(Clone)]
pub struct StoreRegistry {
    inner: Arc<RwLock<HashMap<String, Entry>>>,
    /// `<Kind>/<name>` of stores a writer found refusing their credentials; their
    /// controller validates them again (and says so on the store).
    revalidate: tokio::sync::broadcast::Sender<String>,
    /// `<Kind>/<name>` of stores their controller found not ready (or deleted) since they
    /// were last opened: unlike a store not opened yet (just after a start), these hold
    /// back every placement, including ones written before.
    failed: Arc<RwLock<HashSet<String>>>,
}

impl Default for StoreRegistry {
    fn default() -> Self {
        StoreRegistry {
            inner: Arc::default(),
            // Bounded: a lagging subscriber skips old keys (it re-lists on its own).
            revalidate: tokio::sync::broadcast::channel(256).0,
            failed: Arc::default(),
        }
    }
}

impl StoreRegistry {
    /// A write found the store refusing its credentials (revoked or rotated token):
    /// forgets the open store, so no writer keeps using those credentials, and asks its
    /// controller to validate it again ([`StoreRegistry::revalidations`]).
    pub fn report_auth_failure(&self, kind: &str, name: &str) {
        self.mark_failed(kind, name);
        let _ = self.revalidate.send(key(kind, name));
    }

    /// Forgets the open store and records that it failed (not ready, or deleted), until
    /// it is registered again.
    pub fn mark_failed(&self, kind: &str, name: &str) {
        self.remove(kind, name);
        self.failed
            .write()
            .expect("store registry poisoned")
            .insert(key(kind, name));
    }

    /// True when the store failed since it was last registered ([`StoreRegistry::mark_failed`]).
    pub fn has_failed(&self, kind: &str, name: &str) -> bool {
        self.failed
            .read()
            .expect("store registry poisoned")
            .contains(&key(kind, name))
    }

    /// The `<Kind>/<name>` keys of [`StoreRegistry::report_auth_failure`], from now on.
    pub fn revalidations(&self) -> tokio::sync::broadcast::Receiver<String> {
        self.revalidate.subscribe()
    }

    /// The open store for `kind`/`name` if it was opened from `generation` of the store
    /// object (or registered without a fingerprint): a writer never uses a client built
    /// from an older spec, such as the repository a store pointed at before its URL
    /// changed. `None` while the store's controller has yet to open the new generation;
    /// its status write then wakes the writers again.
    pub fn get_current(&self, kind: &str, name: &str, generation: i64) -> Option<StateStore> {
        let map = self.inner.read().expect("store registry poisoned");
        let entry = map.get(&key(kind, name))?;
        let opened_from = entry.fingerprint.split('/').next().unwrap_or_default();
        (entry.fingerprint.is_empty() || opened_from == generation.to_string())
            .then(|| entry.store.clone())
    }

    /// The open store for `kind`/`name`, if its controller has opened and validated it.
    /// Writers use [`StoreRegistry::get_current`].
    pub fn get(&self, kind: &str, name: &str) -> Option<StateStore> {
        self.inner
            .read()
            .expect("store registry poisoned")
            .get(&key(kind, name))
            .map(|e| e.store.clone())
    }

    /// Registers (or replaces) the open store for `kind`/`name` with an empty fingerprint.
    pub fn insert(&self, kind: &str, name: &str, store: StateStore) {
        self.insert_with_fingerprint(kind, name, store, String::new());
    }

    /// Registers (or replaces) the open store for `kind`/`name`, remembering the
    /// fingerprint of the configuration it was opened with.
    pub fn insert_with_fingerprint(
        &self,
        kind: &str,
        name: &str,
        store: StateStore,
        fingerprint: String,
    ) {
        self.failed
            .write()
            .expect("store registry poisoned")
            .remove(&key(kind, name));
        self.inner
            .write()
            .expect("store registry poisoned")
            .insert(key(kind, name), Entry { store, fingerprint });
    }

    /// The fingerprint the registered store was opened with, if one is registered.
    pub fn fingerprint(&self, kind: &str, name: &str) -> Option<String> {
        self.inner
            .read()
            .expect("store registry poisoned")
            .get(&key(kind, name))
            .map(|e| e.fingerprint.clone())
    }

    /// Forgets the store for `kind`/`name` (deleted, or its credentials changed).
    pub fn remove(&self, kind: &str, name: &str) {
        self.inner
            .write()
            .expect("store registry poisoned")
            .remove(&key(kind, name));
    }
}

/// `metadata.generation` of state store `kind`/`name` as the API has it now (`None`
/// when it does not exist), read by writers before they write through
/// [`StoreRegistry::get_current`].
///
/// # Errors
///
/// The API's error reading the store.
pub async fn store_generation(
    client: &kube::Client,
    kind: StateStoreKind,
    name: &str,
) -> Result<Option<i64>, kube::Error> {
    use kube::api::Api;
    let c = client.clone();
    let meta = match kind {
        StateStoreKind::GitStateStore => Api::<GitStateStore>::all(c)
            .get_opt(name)
            .await?
            .map(|o| o.metadata),
        StateStoreKind::BucketStateStore => Api::<BucketStateStore>::all(c)
            .get_opt(name)
            .await?
            .map(|o| o.metadata),
    };
    Ok(meta.map(|m| m.generation.unwrap_or(0)))
}

fn key(kind: &str, name: &str) -> String {
    format!("{kind}/{name}")
}
