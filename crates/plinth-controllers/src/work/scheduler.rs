//! The scheduling rules: which Destinations a Work's workload group goes to.
//!
//! A Work holds workload groups; scheduling turns each group into WorkPlacements —
//! one per chosen Destination. Everything here is pure (no I/O).
//!
//! # Placement rules
//!
//! * **Selectors** of a group are merged `resource-workflow` → `promise-workflow` →
//!   `promise` (later wins), so a Promise's own `destinationSelectors` always win
//!   ([`resolve_selectors`]). Dry-run Works (label `kratix.io/dry-run: "true"`) use
//!   `{kratix.io/dry-run: "true"}` instead.
//! * **Candidates** are Destinations whose labels contain every resolved key/value;
//!   Destinations being deleted never match; with no selectors, a Destination with
//!   `strictMatchLabels: true` and at least one label is skipped
//!   ([`destination_matches`]).
//! * **Dependency groups** (Works without `spec.resourceName`) go to *every* candidate.
//!   Placements on Destinations that stopped matching are kept, labelled
//!   `kratix.io/misplaced: "true"`, and still updated.
//! * **Resource groups** go to exactly *one* Destination and stay there. Kratix picks a
//!   random candidate; Plinth picks deterministically with rendezvous
//!   (highest-random-weight) hashing: every candidate name `d` is weighted with the
//!   first 8 bytes (big-endian) of `sha256("<work namespace>/<work name>\n<group id>\n<d>")`
//!   and the highest weight wins, ties going to the smaller name ([`rendezvous_choice`]).
//!   The result depends only on the Work identity, the group id and the candidate set,
//!   so re-reconciles and other replicas agree, groups spread evenly over equal
//!   Destinations, and a new Destination only attracts groups that are not yet placed.
//!   Candidates that are Ready are preferred: the choice is made among them when there
//!   is one, so a group does not land on a Destination whose store cannot be written
//!   ([`choose_for_resource`]).
//!   Once a WorkPlacement exists it is never moved: when its Destination stops matching
//!   it is marked misplaced instead.
//! * A group with no candidate is **unscheduled**: the Work gets
//!   `ScheduleSucceeded=False/UnscheduledWorkloads` naming the group ids.
//!
//! The Work controller ([`crate::work`]) applies these rules and writes the
//! WorkPlacements and the Work's status.

use std::collections::BTreeMap;

use kube::{Resource, ResourceExt};
use plinth_api::constants::{condition_types, labels, selector_source};
use plinth_api::{Destination, Work, WorkloadGroup};
use sha2::{Digest, Sha256};

// ---------------------------------------------------------------------------
// Pure scheduling rules (no I/O): selector resolution, matching, rendezvous choice.
// ---------------------------------------------------------------------------

/// Precedence rank of a selector source: merged in ascending rank, later wins
/// (promise > promise-workflow > resource-workflow). Unknown sources
/// rank lowest, like a resource-workflow entry.
fn source_rank(source: &str) -> u8 {
    match source {
        selector_source::PROMISE => 2,
        selector_source::PROMISE_WORKFLOW => 1,
        _ => 0,
    }
}

/// Resolves a workload group's selectors into one equality selector.
///
/// `selectors` are `(source, matchLabels)` pairs in Work order. They are merged
/// `resource-workflow` first, then `promise-workflow`, then `promise`, later keys
/// overriding earlier ones, so a Promise's own selectors always win.
/// The sort is stable: entries of one source keep their Work order.
pub fn resolve_selectors<'a, I>(selectors: I) -> BTreeMap<String, String>
where
    I: IntoIterator<Item = (&'a str, &'a BTreeMap<String, String>)>,
{
    let mut entries: Vec<(&str, &BTreeMap<String, String>)> = selectors.into_iter().collect();
    entries.sort_by_key(|(source, _)| source_rank(source));
    let mut resolved = BTreeMap::new();
    for (_, labels) in entries {
        for (k, v) in labels {
            resolved.insert(k.clone(), v.clone());
        }
    }
    resolved
}

/// What the scheduler needs to know about one Destination.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DestinationFacts {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.labels` (the scheduling targets).
    pub labels: BTreeMap<String, String>,
    /// `spec.strictMatchLabels`.
    pub strict_match_labels: bool,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// Its `Ready` condition is `True` (its state store takes writes).
    pub ready: bool,
}

impl DestinationFacts {
    /// Reads the facts from a Destination object.
    pub fn of(dest: &Destination) -> Self {
        DestinationFacts {
            name: dest.name_any(),
            labels: dest.labels().clone(),
            strict_match_labels: dest.spec.strict_match_labels(),
            deleting: dest.meta().deletion_timestamp.is_some(),
            ready: dest
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_deref())
                .and_then(|c| c.iter().find(|c| c.type_ == condition_types::READY))
                .is_some_and(|c| c.status == "True"),
        }
    }
}

/// Whether a Destination is a candidate for a group with the `resolved` selector
/// ("Candidate destinations" and the matching table).
///
/// Equality matching: every selector key must be present with the same value.
/// Destinations being deleted never match. With an empty selector, a Destination with
/// `strictMatchLabels: true` and at least one label is excluded. Destinations labelled
/// `kratix.io/dry-run: "true"` only match dry-run scheduling.
pub fn destination_matches(
    dest: &DestinationFacts,
    resolved: &BTreeMap<String, String>,
    dry_run: bool,
) -> bool {
    if dest.deleting {
        return false;
    }
    if !dry_run && dest.labels.get(labels::DRY_RUN).map(String::as_str) == Some("true") {
        return false;
    }
    if resolved.is_empty() {
        return !dest.strict_match_labels || dest.labels.is_empty();
    }
    resolved.iter().all(|(k, v)| dest.labels.get(k) == Some(v))
}

/// Rendezvous (highest-random-weight) choice of ONE Destination for a resource
/// workload group; see the module docs for the rule. Returns `None` when there are no
/// candidates.
pub fn rendezvous_choice<'a, I>(
    work_namespace: &str,
    work_name: &str,
    group_id: &str,
    candidates: I,
) -> Option<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    candidates
        .into_iter()
        .map(|d| (rendezvous_weight(work_namespace, work_name, group_id, d), d))
        .max_by(|(wa, da), (wb, db)| wa.cmp(wb).then_with(|| db.cmp(da)))
        .map(|(_, d)| d)
}

/// The Destination for a resource workload group that has none yet: the
/// [`rendezvous_choice`] among the candidates that are Ready, or among all candidates
/// when none is (its files are written once its store is). Kratix picks among all
/// candidates, so a group could land on a Destination whose store does not exist and
/// stay there, failing; preferring Ready ones avoids that without unscheduling anything.
/// `None` when there are no candidates.
pub fn choose_for_resource<'a>(
    work_namespace: &str,
    work_name: &str,
    group_id: &str,
    candidates: &[&'a DestinationFacts],
) -> Option<&'a str> {
    let any_ready = candidates.iter().any(|d| d.ready);
    let pool = candidates
        .iter()
        .filter(|d| d.ready || !any_ready)
        .map(|d| d.name.as_str());
    rendezvous_choice(work_namespace, work_name, group_id, pool)
}

/// The rendezvous weight of Destination `dest` for a group: the first 8 bytes
/// (big-endian) of `sha256("<ns>/<name>\n<group>\n<dest>")`.
pub fn rendezvous_weight(ns: &str, name: &str, group: &str, dest: &str) -> u64 {
    let mut h = Sha256::new();
    h.update(format!("{ns}/{name}\n{group}\n{dest}").as_bytes());
    let digest = h.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(first)
}

/// The WorkPlacement name `<work>.<destination>-<group id[0:5]>`,
/// shortened deterministically to a valid object name by plinth-api's name rules when
/// too long.
pub fn workplacement_name(work: &str, destination: &str, group_id: &str) -> String {
    plinth_api::names::work_placement_name(work, destination, group_id)
}

#[cfg(test)]
const MAX_NAME_LEN: usize = 253;

static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();

/// True for a dry-run Work (label `kratix.io/dry-run: "true"`).
pub fn is_dry_run(work: &Work) -> bool {
    work.labels().get(labels::DRY_RUN).map(String::as_str) == Some("true")
}

/// The resolved selector of a Work's group ([`resolve_selectors`]); a dry-run Work's
/// groups select `{kratix.io/dry-run: "true"}` instead.
pub fn group_selector(work: &Work, group: &WorkloadGroup) -> BTreeMap<String, String> {
    if is_dry_run(work) {
        return BTreeMap::from([(labels::DRY_RUN.to_string(), "true".to_string())]);
    }
    resolve_selectors(group.destination_selectors.iter().flatten().map(|s| {
        (
            s.source.as_deref().unwrap_or(""),
            s.match_labels.as_ref().unwrap_or(&NO_LABELS),
        )
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn dest(name: &str, l: &[(&str, &str)], strict: bool) -> DestinationFacts {
        DestinationFacts {
            name: name.into(),
            labels: labels(l),
            strict_match_labels: strict,
            deleting: false,
            ready: true,
        }
    }

    #[test]
    fn selector_precedence_promise_wins() {
        let rw = labels(&[("env", "dev"), ("zone", "eu")]);
        let pw = labels(&[("env", "staging"), ("tier", "gold")]);
        let p = labels(&[("env", "prod")]);
        // Order in the Work does not matter: promise > promise-workflow > resource-workflow.
        let resolved = resolve_selectors([
            (selector_source::PROMISE, &p),
            (selector_source::RESOURCE_WORKFLOW, &rw),
            (selector_source::PROMISE_WORKFLOW, &pw),
        ]);
        assert_eq!(
            resolved,
            labels(&[("env", "prod"), ("zone", "eu"), ("tier", "gold")])
        );
        let resolved = resolve_selectors([
            (selector_source::PROMISE_WORKFLOW, &pw),
            (selector_source::RESOURCE_WORKFLOW, &rw),
        ]);
        assert_eq!(resolved.get("env").unwrap(), "staging");
        assert!(resolve_selectors(std::iter::empty()).is_empty());
    }

    #[test]
    fn matching_table_of_section_5_4() {
        type Case<'a> = (&'a [(&'a str, &'a str)], &'a [(&'a str, &'a str)], bool);
        let cases: &[Case] = &[
            (&[], &[], true),
            (&[("env", "dev")], &[], true),
            (&[("env", "dev")], &[("env", "dev")], true),
            (&[("env", "dev"), ("zone", "eu")], &[("env", "dev")], true),
            (&[("env", "dev")], &[("env", "prod")], false),
            (&[("env", "dev")], &[("env", "dev"), ("zone", "eu")], false),
            (&[], &[("env", "dev")], false),
        ];
        for (dl, sel, want) in cases {
            let d = dest("d", dl, false);
            assert_eq!(
                destination_matches(&d, &labels(sel), false),
                *want,
                "dest {dl:?} selector {sel:?}"
            );
        }
    }

    #[test]
    fn strict_match_labels_b10() {
        // a: env=prod strict; b: no labels (strict irrelevant when unlabelled).
        let a = dest("a", &[("env", "prod")], true);
        let b = dest("b", &[], true);
        let none = BTreeMap::new();
        assert!(!destination_matches(&a, &none, false));
        assert!(destination_matches(&b, &none, false));
        assert!(destination_matches(&a, &labels(&[("env", "prod")]), false));
        let c = dest("c", &[("env", "testing")], false);
        assert!(destination_matches(
            &c,
            &labels(&[("env", "testing")]),
            false
        ));
        assert!(!destination_matches(
            &a,
            &labels(&[("env", "testing")]),
            false
        ));
    }

    #[test]
    fn deleting_and_dry_run_destinations() {
        let mut d = dest("d", &[], false);
        d.deleting = true;
        assert!(!destination_matches(&d, &BTreeMap::new(), false));
        let dry = dest("dry", &[(labels::DRY_RUN, "true")], false);
        assert!(!destination_matches(&dry, &BTreeMap::new(), false));
        assert!(destination_matches(
            &dry,
            &labels(&[(labels::DRY_RUN, "true")]),
            true
        ));
    }

    #[test]
    fn rendezvous_is_deterministic_and_order_independent() {
        let names = ["alpha", "beta", "gamma", "delta"];
        let first = rendezvous_choice("ns", "w", "g", names.iter().copied()).unwrap();
        let mut reversed = names;
        reversed.reverse();
        assert_eq!(
            rendezvous_choice("ns", "w", "g", reversed.iter().copied()).unwrap(),
            first
        );
        assert_eq!(rendezvous_choice("ns", "w", "g", std::iter::empty()), None);
        // Removing a loser never changes the winner; removing the winner picks the runner-up.
        let without_loser: Vec<&str> = names
            .iter()
            .copied()
            .filter(|n| *n != first)
            .take(2)
            .chain([first])
            .collect();
        assert_eq!(
            rendezvous_choice("ns", "w", "g", without_loser.iter().copied()).unwrap(),
            first
        );
        // The winner is the maximum weight.
        let max = names
            .iter()
            .map(|d| rendezvous_weight("ns", "w", "g", d))
            .max()
            .unwrap();
        assert_eq!(rendezvous_weight("ns", "w", "g", first), max);
    }

    #[test]
    fn resource_groups_prefer_ready_destinations() {
        let mut facts: Vec<DestinationFacts> = ["d1", "d2", "d3"]
            .iter()
            .map(|n| dest(n, &[], false))
            .collect();
        // With every candidate Ready, the plain rendezvous choice.
        let refs: Vec<&DestinationFacts> = facts.iter().collect();
        let names = ["d1", "d2", "d3"];
        let plain = rendezvous_choice("ns", "w", "g", names.iter().copied()).unwrap();
        assert_eq!(choose_for_resource("ns", "w", "g", &refs), Some(plain));
        // The winner not Ready: the best of the Ready ones.
        for f in &mut facts {
            f.ready = f.name != plain;
        }
        let refs: Vec<&DestinationFacts> = facts.iter().collect();
        let others: Vec<&str> = names.iter().copied().filter(|n| *n != plain).collect();
        let runner_up = rendezvous_choice("ns", "w", "g", others.iter().copied()).unwrap();
        assert_eq!(choose_for_resource("ns", "w", "g", &refs), Some(runner_up));
        // None Ready: still placed, among all of them.
        for f in &mut facts {
            f.ready = false;
        }
        let refs: Vec<&DestinationFacts> = facts.iter().collect();
        assert_eq!(choose_for_resource("ns", "w", "g", &refs), Some(plain));
        assert_eq!(choose_for_resource("ns", "w", "g", &[]), None);
    }

    #[test]
    fn rendezvous_spreads_groups() {
        let names = ["d1", "d2", "d3"];
        let mut counts: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
        for i in 0..600 {
            let w = format!("work-{i}");
            *counts
                .entry(
                    rendezvous_choice(
                        "team-a",
                        &w,
                        "5058f1af8388633f609cadb75a75dc9d",
                        names.iter().copied(),
                    )
                    .unwrap(),
                )
                .or_default() += 1;
        }
        for n in names {
            let c = counts.get(n).copied().unwrap_or(0);
            assert!((120..=280).contains(&c), "{n} got {c} of 600: {counts:?}");
        }
    }

    #[test]
    fn workplacement_names() {
        assert_eq!(
            workplacement_name(
                "redis-abc12",
                "worker-1",
                "5058f1af8388633f609cadb75a75dc9d"
            ),
            "redis-abc12.worker-1-5058f"
        );
        let long_work = "w".repeat(200);
        let long_dest = "d".repeat(100);
        let n = workplacement_name(&long_work, &long_dest, "5058f1af8388633f609cadb75a75dc9d");
        assert!(n.len() <= MAX_NAME_LEN, "{}", n.len());
        assert!(n.chars().last().unwrap().is_ascii_alphanumeric());
        // Deterministic.
        assert_eq!(
            n,
            workplacement_name(&long_work, &long_dest, "5058f1af8388633f609cadb75a75dc9d")
        );
        assert_ne!(
            n,
            workplacement_name(&long_work, &long_dest, "aaaaaf1af8388633f609cadb75a75dc9d")
        );
    }
}
