//! What wakes a controller. A settled platform is silent, so no controller may wake
//! itself with its own writes: each main watch passes only changes to what that
//! controller's reconcile reads (its *inputs*: the spec through `metadata.generation`,
//! the start of a deletion, and any status field another controller owns), and status
//! writes that change nothing are never sent (see [`crate::support::patch_status`]).

use std::collections::hash_map::DefaultHasher;
use std::fmt::Debug;
use std::hash::{Hash, Hasher};

use futures::{Stream, StreamExt, TryStreamExt};
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
    let (reader, events) = reflected(api);
    let stream = events
        .applied_objects()
        .predicate_filter(move |o: &K| Some(inputs(o)), PredicateConfig::default());
    (reader, stream)
}

/// A watch of every `K` (objects without `managedFields`) reflected into a new store,
/// and its events.
fn reflected<K>(
    api: Api<K>,
) -> (
    Store<K>,
    impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let (reader, writer) = reflector::store::<K>();
    let events = watcher(api, watcher::Config::default())
        .default_backoff()
        .modify(|o| o.managed_fields_mut().clear())
        .reflect(writer);
    (reader, events)
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

/// A watch of every `K` reflected into a store, and a stream of the objects it touched
/// (for `Controller::watches_stream`), each passed only once the store shows it (see
/// [`once_stored`]).
pub fn watched_cache<K>(
    api: Api<K>,
) -> (
    Store<K>,
    impl Stream<Item = Result<K, watcher::Error>> + Send + 'static,
)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let (reader, events) = reflected(api);
    (reader, once_stored(events))
}

/// The objects of reflected watch `events`, each once the store behind them shows it:
/// a change at once, the objects of a list (the first one, or a re-list after the watch
/// broke) when the list has ended and the store has swapped to it. A mapper or reconcile
/// woken by one never reads the store from before.
pub fn once_stored<K, S>(events: S) -> impl Stream<Item = Result<K, watcher::Error>> + Send
where
    K: Send,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send,
{
    let mut listed: Vec<K> = Vec::new();
    events
        .map_ok(move |ev| {
            let ready: Vec<K> = match ev {
                watcher::Event::Apply(o) | watcher::Event::Delete(o) => vec![o],
                watcher::Event::Init => {
                    listed.clear();
                    Vec::new()
                }
                watcher::Event::InitApply(o) => {
                    listed.push(o);
                    Vec::new()
                }
                watcher::Event::InitDone => std::mem::take(&mut listed),
            };
            futures::stream::iter(ready.into_iter().map(Ok))
        })
        .try_flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::watcher::Event;

    async fn passed(events: Vec<Event<&'static str>>) -> Vec<&'static str> {
        once_stored(futures::stream::iter(events.into_iter().map(Ok)))
            .map(|r| r.expect("no errors fed"))
            .collect()
            .await
    }

    #[tokio::test]
    async fn a_list_passes_its_objects_only_when_it_ends() {
        use Event::*;
        // A list still under way passes nothing: the store has not swapped to it.
        assert!(
            passed(vec![Init, InitApply("a"), InitApply("b")])
                .await
                .is_empty()
        );
        assert_eq!(
            passed(vec![
                Init,
                InitApply("a"),
                InitApply("b"),
                InitDone,
                Apply("c"),
                Delete("a")
            ])
            .await,
            ["a", "b", "c", "a"]
        );
    }

    #[tokio::test]
    async fn a_re_list_drops_what_the_broken_one_had_buffered() {
        use Event::*;
        let events = vec![
            Init,
            InitApply("a"),
            InitDone,
            Init,
            InitApply("stale"),
            Init,
            InitApply("b"),
            InitDone,
        ];
        assert_eq!(passed(events).await, ["a", "b"]);
    }
}
