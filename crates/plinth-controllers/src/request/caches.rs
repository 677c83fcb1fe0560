//! What a Promise's request controller keeps in memory: reflector stores fed by the
//! watches that already wake its requests (the Promise, its revisions, its requests'
//! bindings and configure/delete Jobs).
//!
//! Questions about all of a Promise's requests (how many have a run in flight, how many
//! have run with the latest revision) and the revision lookup every reconcile makes are
//! answered from these stores instead of listing through the API, so their cost does not
//! grow with every request reconciled: a list of every Job of the Promise per admission
//! made a run of N requests cost N² parsed Jobs.
//!
//! Each store is updated before the watch event that changed it wakes any request, so a
//! reconcile woken by a change sees it. A write the controller has just made may not be
//! in a store yet; readers that must not miss one (the fan-out's in-flight count) account
//! for it themselves.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{Stream, StreamExt, TryStreamExt};
use k8s_openapi::api::batch::v1::Job;
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};

use crate::Error;
use crate::support::resources::promise_resource;
use crate::workflow::engine;
use plinth_api::constants::{annotations, labels};
use plinth_api::{PromiseRevision, ResourceBinding};

/// The stores of one Promise's request controller.
#[derive(Clone)]
pub struct RequestCaches {
    /// The Promise (one object at most).
    pub promise: Store<DynamicObject>,
    /// The Promise's PromiseRevisions.
    pub revisions: Store<PromiseRevision>,
    /// The ResourceBindings of the Promise's requests.
    pub bindings: Store<ResourceBinding>,
    /// The cached bindings by the request their labels name.
    pub bindings_by_request: Arc<BindingIndex>,
    /// The resource workflow Jobs of the Promise's requests, without their spec and
    /// managed fields (labels, annotations and status are what is read).
    pub jobs: Store<Job>,
    /// The cached Jobs by the request they run for.
    pub jobs_by_request: Arc<JobIndex>,
    /// The Promise's resource requests (the controller's own store).
    pub requests: Store<DynamicObject>,
}

/// A watch of `api` with `config`, reflected into a new store for `ar`, yielding the
/// objects it touched (for `Controller::watches_stream`).
pub fn reflect_dynamic(
    api: Api<DynamicObject>,
    ar: ApiResource,
    config: watcher::Config,
) -> (
    Store<DynamicObject>,
    impl Stream<Item = Result<DynamicObject, watcher::Error>> + Send + 'static,
) {
    let writer = reflector::store::Writer::new(ar);
    let store = writer.as_reader();
    let stream = watcher(api, config)
        .default_backoff()
        .modify(|o| o.managed_fields_mut().clear())
        .reflect(writer)
        .touched_objects();
    (store, stream)
}

/// A watch of the resource workflow Jobs matching `config`, reflected into a store of
/// Jobs reduced to their labels, annotations and status.
pub fn reflect_jobs(
    api: Api<Job>,
    config: watcher::Config,
    index: Arc<JobIndex>,
) -> (
    Store<Job>,
    impl Stream<Item = Result<Job, watcher::Error>> + Send + 'static,
) {
    let (store, writer) = reflector::store::<Job>();
    let mut seen: HashMap<String, u64> = HashMap::new();
    let stream = watcher(api, config)
        .default_backoff()
        .modify(|j| {
            j.managed_fields_mut().clear();
            j.spec = None;
        })
        .reflect(writer)
        .inspect_ok(move |ev| index.apply(ev))
        .filter_map(move |ev| {
            let woken = changed_jobs(&mut seen, ev);
            async move { woken }
        });
    (store, stream)
}

/// The Job an event should wake its request with: one first seen, deleted, or changed
/// in what a request reads of it ([`job_inputs`]). A running Job's status is written a
/// few times (`active`, `ready`) before it ends, and none of those change the request.
/// `seen` holds the last inputs of every Job; a re-list starts it afresh.
fn changed_jobs(
    seen: &mut HashMap<String, u64>,
    ev: Result<watcher::Event<Job>, watcher::Error>,
) -> Option<Result<Job, watcher::Error>> {
    let key = |j: &Job| format!("{}/{}", j.namespace().unwrap_or_default(), j.name_any());
    match ev {
        Ok(watcher::Event::Init) => {
            seen.clear();
            None
        }
        Ok(watcher::Event::InitDone) => None,
        Ok(watcher::Event::Apply(j) | watcher::Event::InitApply(j)) => {
            let inputs = job_inputs(&j);
            (seen.insert(key(&j), inputs) != Some(inputs)).then_some(Ok(j))
        }
        Ok(watcher::Event::Delete(j)) => {
            seen.remove(&key(&j));
            Some(Ok(j))
        }
        Err(e) => Some(Err(e)),
    }
}

/// What a request's reconcile reads of one of its Jobs: its state, when it finished,
/// its failed attempts, labels, annotations and whether it is being deleted.
fn job_inputs(job: &Job) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    engine::job_state(job).hash(&mut h);
    engine::finished_at(job).map(|t| t.to_string()).hash(&mut h);
    job.status.as_ref().and_then(|s| s.failed).hash(&mut h);
    job.labels().hash(&mut h);
    job.annotations().hash(&mut h);
    job.metadata.deletion_timestamp.is_some().hash(&mut h);
    h.finish()
}

/// The Promise's store and watch stream (`metadata.name=<promise>`).
pub fn reflect_promise(
    client: &kube::Client,
    promise: &str,
) -> (
    Store<DynamicObject>,
    impl Stream<Item = Result<DynamicObject, watcher::Error>> + Send + 'static,
) {
    reflect_dynamic(
        Api::all_with(client.clone(), &promise_resource()),
        promise_resource(),
        watcher::Config::default().fields(&format!("metadata.name={promise}")),
    )
}

/// A reflector's store and the stream that feeds it (and wakes the controller).
pub type Reflected<S> = (Store<DynamicObject>, S);

/// A watch stream of objects, as a controller takes it.
pub trait ObjectStream:
    Stream<Item = Result<DynamicObject, watcher::Error>> + Send + 'static
{
}

impl<S> ObjectStream for S where
    S: Stream<Item = Result<DynamicObject, watcher::Error>> + Send + 'static
{
}

/// The stores of the bindings (indexed by request in `index`) and revisions labelled
/// with `selector`, and the streams that feed them.
// Two (store, stream) pairs; a stream of `impl Trait` cannot be named in a type alias.
#[allow(clippy::type_complexity)]
pub fn reflect_versions(
    client: &kube::Client,
    selector: &str,
    index: Arc<BindingIndex>,
) -> (
    (
        Store<ResourceBinding>,
        impl Stream<Item = Result<ResourceBinding, watcher::Error>> + Send + 'static,
    ),
    (
        Store<PromiseRevision>,
        impl Stream<Item = Result<PromiseRevision, watcher::Error>> + Send + 'static,
    ),
) {
    let config = || watcher::Config::default().labels(selector);
    let (bindings, writer) = reflector::store::<ResourceBinding>();
    let binding_stream = watcher(Api::all(client.clone()), config())
        .default_backoff()
        .modify(|o: &mut ResourceBinding| o.managed_fields_mut().clear())
        .reflect(writer)
        .inspect_ok(move |ev| index.apply(ev))
        .touched_objects();
    let (revisions, writer) = reflector::store::<PromiseRevision>();
    let revision_stream = watcher(Api::all(client.clone()), config())
        .default_backoff()
        .modify(|o: &mut PromiseRevision| o.managed_fields_mut().clear())
        .reflect(writer)
        .touched_objects();
    ((bindings, binding_stream), (revisions, revision_stream))
}

/// Objects of each request (`namespace/name`): the Jobs by their annotations
/// ([`JobIndex`]), the bindings by their labels ([`BindingIndex`]). Kept up to date from
/// the same watch events as the object's store ([`RequestIndex::apply`]), so that a
/// request's objects are found without going through every cached one.
pub struct RequestIndex<K: kube::Resource>
where
    K::DynamicType: Eq + std::hash::Hash,
{
    key: fn(&K) -> Option<String>,
    dyntype: K::DynamicType,
    state: Mutex<IndexState<K>>,
}

/// A request's workflow Jobs, by the request their annotations name.
pub type JobIndex = RequestIndex<Job>;

/// A Promise's ResourceBindings, by the request their labels name
/// (`namespace/<kratix.io/resource-name>`): every binding carrying a request's labels,
/// whatever its name, so a second binding is seen.
pub type BindingIndex = RequestIndex<ResourceBinding>;

impl Default for JobIndex {
    fn default() -> Self {
        RequestIndex::new(request_of_job, ())
    }
}

impl Default for BindingIndex {
    fn default() -> Self {
        RequestIndex::new(request_of_binding, ())
    }
}

struct IndexState<K: kube::Resource>
where
    K::DynamicType: Eq + std::hash::Hash,
{
    current: Keyed<K>,
    /// Filled during a (re-)list and swapped in when it is complete, as the store does.
    listing: Option<Keyed<K>>,
}

/// Objects by the request they belong to.
struct Keyed<K: kube::Resource>
where
    K::DynamicType: Eq + std::hash::Hash,
{
    by_request: HashMap<String, HashSet<ObjectRef<K>>>,
    /// The key each indexed object is under, so a changed key moves it.
    key_of: HashMap<ObjectRef<K>, String>,
}

impl<K: kube::Resource> Keyed<K>
where
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    fn new() -> Self {
        Keyed {
            by_request: HashMap::new(),
            key_of: HashMap::new(),
        }
    }

    /// Indexes `r` under `key` (moving it from any other; `None`: not indexed).
    fn add(&mut self, key: Option<String>, r: ObjectRef<K>) {
        self.remove(&r);
        if let Some(key) = key {
            self.by_request
                .entry(key.clone())
                .or_default()
                .insert(r.clone());
            self.key_of.insert(r, key);
        }
    }

    fn remove(&mut self, r: &ObjectRef<K>) {
        let Some(old) = self.key_of.remove(r) else {
            return;
        };
        if let Some(set) = self.by_request.get_mut(&old) {
            set.remove(r);
            if set.is_empty() {
                self.by_request.remove(&old);
            }
        }
    }
}

impl<K: kube::Resource + Clone> RequestIndex<K>
where
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    /// An empty index of objects of type `dyntype`, keying each by `key` (None: not
    /// indexed).
    pub fn new(key: fn(&K) -> Option<String>, dyntype: K::DynamicType) -> Self {
        RequestIndex {
            key,
            dyntype,
            state: Mutex::new(IndexState {
                current: Keyed::new(),
                listing: None,
            }),
        }
    }

    /// Applies one event of the watch: a list replaces the index when it is done, an
    /// added or changed object is indexed under its request (moved if its key changed),
    /// a deleted one is removed.
    pub fn apply(&self, event: &watcher::Event<K>) {
        let mut st = self.state.lock().expect("request index");
        let st = &mut *st;
        match event {
            watcher::Event::Init => st.listing = Some(Keyed::new()),
            watcher::Event::InitApply(obj) => {
                if let Some(listing) = st.listing.as_mut() {
                    listing.add((self.key)(obj), self.reference(obj));
                }
            }
            watcher::Event::InitDone => {
                if let Some(listing) = st.listing.take() {
                    st.current = listing;
                }
            }
            watcher::Event::Apply(obj) => st.current.add((self.key)(obj), self.reference(obj)),
            watcher::Event::Delete(obj) => st.current.remove(&self.reference(obj)),
        }
    }

    fn reference(&self, obj: &K) -> ObjectRef<K> {
        ObjectRef::from_obj_with(obj, self.dyntype.clone())
    }

    /// The cached objects of request `key` (`namespace/name`), as `store` holds them now
    /// (an object the store does not hold is left out).
    pub fn of(&self, store: &Store<K>, key: &str) -> Vec<Arc<K>> {
        let st = self.state.lock().expect("request index");
        st.current
            .by_request
            .get(key)
            .into_iter()
            .flatten()
            .filter_map(|r| store.get(r))
            .collect()
    }
}

impl JobIndex {
    /// The cached Jobs of request `key` (`namespace/name`), as `store` holds them now
    /// (a Job the store does not hold is left out).
    pub fn jobs_of(&self, store: &Store<Job>, key: &str) -> Vec<Arc<Job>> {
        self.of(store, key)
    }
}

/// `namespace/<kratix.io/resource-name>` of the request a binding's labels name.
pub fn request_of_binding(binding: &ResourceBinding) -> Option<String> {
    Some(format!(
        "{}/{}",
        binding.namespace()?,
        binding.labels().get(labels::RESOURCE_NAME)?
    ))
}

/// `namespace/name` of the request a workflow Job runs for, from its annotations.
pub fn request_of_job(job: &Job) -> Option<String> {
    let a = job.annotations();
    Some(format!(
        "{}/{}",
        a.get(annotations::JOB_RESOURCE_NAMESPACE)?,
        a.get(annotations::JOB_RESOURCE_NAME)?
    ))
}

impl RequestCaches {
    /// Waits until every store has its first full list, at most `timeout`.
    ///
    /// # Errors
    ///
    /// [`Error::NotReady`] naming the Promise when a store is still empty of its first
    /// list after `timeout` (its watch cannot list).
    pub async fn ready(&self, promise: &str, timeout: Duration) -> Result<(), Error> {
        let all = async {
            let _ = self.promise.wait_until_ready().await;
            let _ = self.revisions.wait_until_ready().await;
            let _ = self.bindings.wait_until_ready().await;
            let _ = self.jobs.wait_until_ready().await;
            let _ = self.requests.wait_until_ready().await;
        };
        tokio::time::timeout(timeout, all).await.map_err(|_| {
            Error::NotReady(format!(
                "the request controller of Promise {promise} has not listed its Promise, revisions, bindings, Jobs and requests after {timeout:?}"
            ))
        })
    }

    /// The workflow's Jobs among the cached Jobs of its request, in the order of
    /// [`crate::workflow::engine::list_jobs`].
    pub fn workflow_jobs(&self, wf: &crate::workflow::Workflow) -> Vec<Job> {
        let key = format!(
            "{}/{}",
            wf.subject.object.namespace.clone().unwrap_or_default(),
            wf.subject.object.name
        );
        let jobs = self.jobs_by_request.jobs_of(&self.jobs, &key);
        crate::workflow::engine::workflow_jobs(wf, jobs.iter().map(|j| j.as_ref()))
    }

    /// The cached Promise, if it exists.
    pub fn promise(&self) -> Option<Arc<DynamicObject>> {
        self.promise.state().into_iter().next()
    }

    /// The Promise's cached revisions.
    pub fn revisions(&self) -> Vec<PromiseRevision> {
        self.revisions
            .state()
            .iter()
            .map(|r| r.as_ref().clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::watcher::Event;

    fn job(name: &str, request: &str) -> Job {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "team", "annotations": {
                annotations::JOB_RESOURCE_NAMESPACE: "team",
                annotations::JOB_RESOURCE_NAME: request,
            }},
        }))
        .expect("job")
    }

    #[test]
    fn only_job_changes_a_request_reads_wake_it() {
        let mut seen = HashMap::new();
        let with_status = |status: serde_json::Value| {
            let mut j = job("a-1", "a");
            j.status = Some(serde_json::from_value(status).expect("status"));
            j
        };
        let mut wakes = |ev: Event<Job>| {
            changed_jobs(&mut seen, Ok(ev)).map(|r| r.expect("job").status.and_then(|s| s.active))
        };
        assert_eq!(wakes(Event::Init), None);
        assert_eq!(
            wakes(Event::InitApply(job("a-1", "a"))),
            Some(None),
            "first sight"
        );
        assert_eq!(wakes(Event::InitDone), None);
        // Running with one, then with a ready Pod: the request reads neither.
        assert_eq!(
            wakes(Event::Apply(with_status(serde_json::json!({"active": 1})))),
            None
        );
        assert_eq!(
            wakes(Event::Apply(with_status(
                serde_json::json!({"active": 1, "ready": 1})
            ))),
            None
        );
        // A failed attempt, then the end, then its completion time: each wakes it.
        assert!(
            wakes(Event::Apply(with_status(
                serde_json::json!({"active": 1, "failed": 1})
            )))
            .is_some()
        );
        let done = serde_json::json!({"failed": 1, "succeeded": 1, "conditions": [
            {"type": "Complete", "status": "True", "lastTransitionTime": "2026-12-01T10:00:00Z"}]});
        assert!(wakes(Event::Apply(with_status(done.clone()))).is_some());
        let mut timed = done.clone();
        timed["completionTime"] = serde_json::json!("2026-12-01T10:00:01Z");
        assert!(wakes(Event::Apply(with_status(timed.clone()))).is_some());
        assert_eq!(
            wakes(Event::Apply(with_status(timed.clone()))),
            None,
            "no change"
        );
        assert!(wakes(Event::Delete(with_status(timed.clone()))).is_some());
        // After a re-list every Job wakes its request again.
        assert_eq!(wakes(Event::Init), None);
        assert!(wakes(Event::InitApply(with_status(timed))).is_some());
    }

    #[test]
    fn binding_index_finds_every_binding_of_a_request_and_follows_relabels() {
        let binding = |name: &str, request: &str| -> ResourceBinding {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "platform.kratix.io/v1alpha1", "kind": "ResourceBinding",
                "metadata": {"name": name, "namespace": "team", "labels": {
                    labels::PROMISE_NAME: "db", labels::RESOURCE_NAME: request}},
                "spec": {"version": "latest", "promiseRef": {"name": "db"},
                    "resourceRef": {"name": request}},
            }))
            .expect("binding")
        };
        let (store, mut writer) = reflector::store::<ResourceBinding>();
        let index = BindingIndex::default();
        let mut feed = |ev: Event<ResourceBinding>| {
            writer.apply_watcher_event(&ev);
            index.apply(&ev);
        };
        feed(Event::Init);
        feed(Event::InitApply(binding("a-db-auto", "a")));
        feed(Event::InitDone);
        // A second binding for the same request under another name is seen beside it.
        feed(Event::Apply(binding("a-db-pin", "a")));
        let names = |key: &str| {
            let mut v: Vec<String> = index.of(&store, key).iter().map(|b| b.name_any()).collect();
            v.sort();
            v
        };
        assert_eq!(names("team/a"), ["a-db-auto", "a-db-pin"]);
        // Relabelled to another request: it moves.
        feed(Event::Apply(binding("a-db-pin", "b")));
        assert_eq!(names("team/a"), ["a-db-auto"]);
        assert_eq!(names("team/b"), ["a-db-pin"]);
        feed(Event::Delete(binding("a-db-auto", "a")));
        assert!(names("team/a").is_empty());
    }

    #[test]
    fn job_index_follows_lists_adds_and_deletes_like_the_store() {
        let (store, mut writer) = reflector::store::<Job>();
        let index = JobIndex::default();
        let mut feed = |ev: Event<Job>| {
            writer.apply_watcher_event(&ev);
            index.apply(&ev);
        };
        // A first list: nothing is visible until it is done, then all of it.
        feed(Event::Init);
        feed(Event::InitApply(job("a-1", "a")));
        feed(Event::InitApply(job("b-1", "b")));
        feed(Event::InitDone);
        feed(Event::Apply(job("a-2", "a")));
        let names = |key: &str| {
            let mut v: Vec<String> = index
                .jobs_of(&store, key)
                .iter()
                .map(|j| j.name_any())
                .collect();
            v.sort();
            v
        };
        assert_eq!(names("team/a"), ["a-1", "a-2"]);
        assert_eq!(names("team/b"), ["b-1"]);
        assert!(names("team/c").is_empty());
        feed(Event::Delete(job("a-1", "a")));
        assert_eq!(names("team/a"), ["a-2"]);
        // A re-list after a watch gap: a Job deleted meanwhile is gone, one created
        // meanwhile is there.
        feed(Event::Init);
        feed(Event::InitApply(job("a-2", "a")));
        feed(Event::InitApply(job("c-1", "c")));
        feed(Event::InitDone);
        assert!(names("team/b").is_empty());
        assert_eq!(names("team/a"), ["a-2"]);
        assert_eq!(names("team/c"), ["c-1"]);
    }
}
