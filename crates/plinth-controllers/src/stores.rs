//! The registry of open state stores, shared by the state store, Destination and
//! WorkPlacement controllers (Kratix's repository cache).
//!
//! The state store controllers open and validate a store, then register it here with a
//! fingerprint of what it was built from (store generation + Secret resourceVersion), so
//! an unchanged store is not re-opened on every event and a changed Secret or spec
//! replaces the entry. Destinations and WorkPlacements only ever read.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use plinth_statestore::StateStore;

#[derive(Clone)]
struct Entry {
    store: StateStore,
    fingerprint: String,
}

/// Open state stores keyed by `<Kind>/<name>` (e.g. `GitStateStore/default`).
#[derive(Clone, Default)]
pub struct StoreRegistry {
    inner: Arc<RwLock<HashMap<String, Entry>>>,
}

impl StoreRegistry {
    /// The open store for `kind`/`name`, if its controller has opened and validated it.
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

fn key(kind: &str, name: &str) -> String {
    format!("{kind}/{name}")
}
