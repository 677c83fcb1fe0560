//! What wakes a controller. A settled platform is silent, so no controller may wake
//! itself with its own writes: each main watch passes only changes to what that
//! controller's reconcile reads (its *inputs*: the spec through `metadata.generation`,
//! the start of a deletion, and any status field another controller owns), and status
//! writes that change nothing are never sent (see [`crate::support::patch_status`]).

use std::collections::hash_map::DefaultHasher;
use std::fmt::Debug;
use std::hash::{Hash, Hasher};

use futures::{Stream, StreamExt};
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{PredicateConfig, WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;

/// Hashes the inputs every controller shares: the generation (spec changes), whether a
/// deletion has started, and the finalizers (so a finalizer removed by someone else is
/// seen), plus `extra`, the controller-specific inputs.
pub fn inputs_hash<K: Resource>(obj: &K, extra: impl Hash) -> u64 {
    let mut h = DefaultHasher::new();
    obj.meta().generation.hash(&mut h);
    obj.meta().deletion_timestamp.is_some().hash(&mut h);
    obj.finalizers().hash(&mut h);
    extra.hash(&mut h);
    h.finish()
}

/// A main-watch stream for `Controller::for_stream` that passes an object only when
/// `inputs` hashes differently from the last time (always on first sight), and the
/// reflector store behind it. The store keeps objects without `managedFields`: no
/// controller reads them, and they are half the size of a Job or Pod.
pub fn watch_inputs<K>(
    api: Api<K>,
    inputs: fn(&K) -> u64,
) -> (
    Store<K>,
    impl Stream<Item = Result<K, watcher::Error>> + Send + 'static,
)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let (reader, writer) = reflector::store::<K>();
    let stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .modify(|o| o.managed_fields_mut().clear())
        .reflect(writer)
        .applied_objects()
        .predicate_filter(move |o: &K| Some(inputs(o)), PredicateConfig::default());
    (reader, stream)
}

/// Deletions of `K` only, for controllers that drop caches when an object goes away.
pub fn deletions<K>(api: Api<K>) -> impl Stream<Item = Result<K, watcher::Error>> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    watcher(api, watcher::Config::default())
        .default_backoff()
        .filter_map(|ev| async move {
            match ev {
                Ok(watcher::Event::Delete(o)) => Some(Ok(o)),
                Ok(_) => None,
                Err(e) => Some(Err(e)),
            }
        })
}
