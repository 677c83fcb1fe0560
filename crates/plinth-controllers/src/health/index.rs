//! An index of the cached HealthRecords by the request they reference, so that
//! rebuilding one request's health reads that request's records only instead of
//! scanning every record on the platform on every event.
//!
//! Fed with the same watch events as the controller's reflector store (applied before
//! the controller sees the object), including a re-list (`Init` … `InitDone`), which
//! replaces the index at its end as the store does.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher::Event;
use plinth_api::HealthRecord;

use super::target::Target;

#[derive(Default)]
struct Maps {
    by_target: HashMap<Target, HashSet<ObjectRef<HealthRecord>>>,
    target_of: HashMap<ObjectRef<HealthRecord>, Target>,
}

impl Maps {
    fn insert(&mut self, rec: &HealthRecord) {
        let key = ObjectRef::from_obj(rec);
        let target = Target::of(rec);
        if let Some(old) = self.target_of.insert(key.clone(), target.clone()) {
            self.unlink(&old, &key);
        }
        self.by_target.entry(target).or_default().insert(key);
    }

    fn remove(&mut self, rec: &HealthRecord) {
        let key = ObjectRef::from_obj(rec);
        if let Some(old) = self.target_of.remove(&key) {
            self.unlink(&old, &key);
        }
    }

    fn unlink(&mut self, target: &Target, key: &ObjectRef<HealthRecord>) {
        if let Some(set) = self.by_target.get_mut(target) {
            set.remove(key);
            if set.is_empty() {
                self.by_target.remove(target);
            }
        }
    }
}

/// HealthRecords by the request ([`Target`]) they reference.
#[derive(Default)]
pub struct RecordIndex {
    live: Mutex<Maps>,
    /// The index being rebuilt during a re-list.
    pending: Mutex<Option<Maps>>,
}

impl RecordIndex {
    /// Applies one watch event.
    pub fn observe(&self, event: &Event<HealthRecord>) {
        match event {
            Event::Apply(r) => self.live.lock().expect("index lock").insert(r),
            Event::Delete(r) => self.live.lock().expect("index lock").remove(r),
            Event::Init => *self.pending.lock().expect("index lock") = Some(Maps::default()),
            Event::InitApply(r) => {
                if let Some(m) = self.pending.lock().expect("index lock").as_mut() {
                    m.insert(r);
                }
            }
            Event::InitDone => {
                if let Some(m) = self.pending.lock().expect("index lock").take() {
                    *self.live.lock().expect("index lock") = m;
                }
            }
        }
    }

    /// The records that reference `target`.
    pub fn records_of(&self, target: &Target) -> Vec<ObjectRef<HealthRecord>> {
        self.live
            .lock()
            .expect("index lock")
            .by_target
            .get(target)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(name: &str, request: &str) -> HealthRecord {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "platform.kratix.io/v1alpha1", "kind": "HealthRecord",
            "metadata": {"name": name, "namespace": "default"},
            "data": {"promiseRef": {"name": "p"}, "resourceRef": {"name": request},
                     "state": "healthy", "lastRun": 1},
        }))
        .unwrap()
    }

    fn target(request: &str) -> Target {
        Target::of(&rec("x", request))
    }

    fn names(idx: &RecordIndex, request: &str) -> Vec<String> {
        let mut v: Vec<String> = idx
            .records_of(&target(request))
            .into_iter()
            .map(|r| r.name)
            .collect();
        v.sort();
        v
    }

    #[test]
    fn follows_applies_retargets_deletes_and_relists() {
        let idx = RecordIndex::default();
        idx.observe(&Event::Apply(rec("a", "one")));
        idx.observe(&Event::Apply(rec("b", "one")));
        idx.observe(&Event::Apply(rec("c", "two")));
        assert_eq!(names(&idx, "one"), ["a", "b"]);
        assert_eq!(names(&idx, "two"), ["c"]);
        // A record whose resourceRef changes moves to the other request.
        idx.observe(&Event::Apply(rec("b", "two")));
        assert_eq!(names(&idx, "one"), ["a"]);
        assert_eq!(names(&idx, "two"), ["b", "c"]);
        idx.observe(&Event::Delete(rec("a", "one")));
        assert!(names(&idx, "one").is_empty());
        // A re-list replaces the index at its end; until then the old one answers.
        idx.observe(&Event::Init);
        idx.observe(&Event::InitApply(rec("d", "one")));
        assert_eq!(names(&idx, "two"), ["b", "c"]);
        idx.observe(&Event::InitDone);
        assert_eq!(names(&idx, "one"), ["d"]);
        assert!(names(&idx, "two").is_empty());
    }
}
