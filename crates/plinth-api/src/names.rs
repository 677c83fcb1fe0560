//! Deterministic generated names.
//!
//! Kratix appends random suffixes to Job and Work names and cuts names at a fixed length,
//! which could leave a trailing `-` or `.` (an invalid name). Every function here returns a
//! lower-case DNS-1123 label (`[a-z0-9]([-a-z0-9]*[a-z0-9])?`) of at most the stated length
//! (except [`work_placement_name`], a DNS-1123 subdomain), never empty, and the same name for
//! the same inputs. Uniqueness comes from a short md5 suffix of the inputs.

use crate::hash::md5_hex;

/// Default maximum name length (DNS-1123 label, label values).
pub const MAX_NAME_LEN: usize = 63;
/// Maximum length for Job names: CronJob names and Job-derived pod names need room.
pub const MAX_JOB_NAME_LEN: usize = 52;
/// Maximum length of a DNS-1123 subdomain (WorkPlacement names).
pub const MAX_SUBDOMAIN_LEN: usize = 253;
/// Length of the hash suffix (hex characters), as in Kratix's
/// `GenerateDeterministicObjectName`.
pub const HASH_SUFFIX_LEN: usize = 5;
/// Prefix used when a base name has no usable character at all.
pub const FALLBACK_PREFIX: &str = "plinth";
/// Kratix truncates the base of generated names to this many characters.
const KRATIX_BASE_LEN: usize = 56;

/// Deterministic object name: `<sanitised base, trimmed>-<md5(inputs joined by "-")[0:5]>`.
///
/// * `base` is lower-cased; every character outside `[a-z0-9-]` becomes `-`; runs of `-`
///   collapse; leading and trailing `-` are removed.
/// * The base is cut to `min(56, max_len - 6)` characters (Kratix's 56 for normal lengths),
///   then trailing `-` removed again, so the cut never ends on a separator.
/// * If nothing usable is left, [`FALLBACK_PREFIX`] is used.
/// * The suffix is md5 of `inputs` joined with `-` (of `base` when `inputs` is empty) —
///   the same as Kratix's `GenerateDeterministicObjectName`, so names of already-valid
///   short bases match Kratix's.
///
/// `max_len` below 7 is raised to 7 (one character, `-`, five hex digits).
pub fn object_name(base: &str, inputs: &[&str], max_len: usize) -> String {
    let max_len = max_len.max(HASH_SUFFIX_LEN + 2);
    let hash_input = if inputs.is_empty() {
        base.to_string()
    } else {
        inputs.join("-")
    };
    let suffix = &md5_hex(hash_input.as_bytes())[..HASH_SUFFIX_LEN];
    let budget = KRATIX_BASE_LEN.min(max_len - HASH_SUFFIX_LEN - 1);
    let mut head = sanitize_label(base);
    if head.len() > budget {
        head.truncate(budget);
    }
    let mut head = head.trim_end_matches('-').to_string();
    if head.is_empty() {
        head = FALLBACK_PREFIX[..FALLBACK_PREFIX.len().min(budget)].to_string();
    }
    format!("{head}-{suffix}")
}

/// Lower-cases and maps to `[a-z0-9-]`, collapsing `-` runs and trimming `-` at both ends.
/// May return an empty string.
pub fn sanitize_label(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        let c = c.to_ascii_lowercase();
        let c = if c.is_ascii_lowercase() || c.is_ascii_digit() {
            c
        } else {
            '-'
        };
        if c == '-' && (out.is_empty() || out.ends_with('-')) {
            continue;
        }
        out.push(c);
    }
    while out.ends_with('-') {
        out.pop();
    }
    out
}

/// True if `s` is a DNS-1123 label of at most `max_len` characters.
pub fn is_dns1123_label(s: &str, max_len: usize) -> bool {
    !s.is_empty()
        && s.len() <= max_len
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && s.as_bytes()[0].is_ascii_alphanumeric()
        && s.as_bytes()[s.len() - 1].is_ascii_alphanumeric()
}

/// True if `s` is a DNS-1123 subdomain (dot-separated labels, ≤ 253 characters).
pub fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= MAX_SUBDOMAIN_LEN
        && !s.is_empty()
        && s.split('.').all(|l| is_dns1123_label(l, MAX_NAME_LEN))
}

/// PromiseRevision name: `<promise>-<md5(version)[0:5]>` (any
/// label-legal version, e.g. `V1_RC`, gives a DNS-safe name).
pub fn promise_revision_name(promise: &str, version: &str) -> String {
    object_name(promise, &[version], MAX_NAME_LEN)
}

/// ResourceBinding name: `GenerateDeterministicObjectName("<rr>-<promise>")`.
pub fn resource_binding_name(resource: &str, promise: &str) -> String {
    object_name(&format!("{resource}-{promise}"), &[], MAX_NAME_LEN)
}

/// Value for the `kratix.io/resource-name` label on a ResourceBinding: the request name, or
/// a hashed name when it is longer than 63 characters (label values are limited).
pub fn resource_name_label_value(resource: &str) -> String {
    if resource.len() <= MAX_NAME_LEN {
        resource.to_string()
    } else {
        object_name(resource, &[], MAX_NAME_LEN)
    }
}

/// Name of the HealthRecord a HealthDefinition produces: `<request>-<definition>` made
/// DNS-safe, at most 63 characters, with a hash of the Promise, the request's namespace and
/// name and the definition's namespace and name, so two definitions never share a record.
pub fn health_record_name(
    promise: &str,
    request_namespace: &str,
    request: &str,
    definition_namespace: &str,
    definition: &str,
) -> String {
    object_name(
        &format!("{request}-{definition}"),
        &[
            promise,
            request_namespace,
            request,
            definition_namespace,
            definition,
        ],
        MAX_NAME_LEN,
    )
}

/// Name of the CronJob that runs a HealthDefinition's check: `health-<definition>` made
/// DNS-safe, at most [`MAX_JOB_NAME_LEN`] characters (a CronJob's Jobs add 11), with a hash
/// of the definition's namespace and name.
pub fn health_cronjob_name(definition_namespace: &str, definition: &str) -> String {
    object_name(
        &format!("health-{definition}"),
        &[definition_namespace, definition],
        MAX_JOB_NAME_LEN,
    )
}

/// Pipeline ID `<promise>-<type>-<action>-<pipeline>`: name of the
/// pipeline's ServiceAccount and default Role/ClusterRole(Binding). Kratix's webhook limits
/// it to [`crate::constants::MAX_PIPELINE_ID_LEN`] characters; see [`validate_pipeline_id`].
pub fn pipeline_id(promise: &str, workflow_type: &str, action: &str, pipeline: &str) -> String {
    format!("{promise}-{workflow_type}-{action}-{pipeline}")
}

/// Why a generated name is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// A pipeline ID is longer than the webhook allows.
    #[error(
        "pipeline ID {id:?} is {len} characters; it must be at most {max} (<promise>-<type>-<action>-<pipeline>)"
    )]
    PipelineIdTooLong {
        /// The pipeline ID.
        id: String,
        /// Its length.
        len: usize,
        /// The limit ([`crate::constants::MAX_PIPELINE_ID_LEN`]).
        max: usize,
    },
}

/// Checks a pipeline ID against the webhook's length rule (≤ 60 characters).
///
/// # Errors
/// [`NameError::PipelineIdTooLong`] naming the ID and its length.
pub fn validate_pipeline_id(id: &str) -> Result<(), NameError> {
    if id.len() > crate::constants::MAX_PIPELINE_ID_LEN {
        return Err(NameError::PipelineIdTooLong {
            id: id.to_string(),
            len: id.len(),
            max: crate::constants::MAX_PIPELINE_ID_LEN,
        });
    }
    Ok(())
}

/// Job name for one run of a pipeline: base `kratix-<promise>[-<rr>[-<rrns>]]-<pipeline>`,
/// at most [`MAX_JOB_NAME_LEN`] characters. `run` distinguishes runs
/// (e.g. the spec hash plus a run counter or the parent's generation and attempt); the same
/// `run` gives the same name, so a retried create is idempotent.
pub fn job_name(
    promise: &str,
    resource: Option<&str>,
    resource_namespace: Option<&str>,
    pipeline: &str,
    run: &str,
) -> String {
    let mut inputs = pipeline_parts(promise, resource, resource_namespace, pipeline);
    let base = format!("kratix-{}", inputs.join("-"));
    inputs.push(run);
    object_name(&base, &inputs, MAX_JOB_NAME_LEN)
}

/// `<promise>[, <rr>[, <rrns>]], <pipeline>`: what a pipeline's Job and Work names are
/// built from (a namespace only with a request).
fn pipeline_parts<'a>(
    promise: &'a str,
    resource: Option<&'a str>,
    resource_namespace: Option<&'a str>,
    pipeline: &'a str,
) -> Vec<&'a str> {
    let mut parts = vec![promise];
    if let Some(rr) = resource {
        parts.push(rr);
        parts.extend(resource_namespace);
    }
    parts.push(pipeline);
    parts
}

/// Work name of a pipeline (made deterministic): base
/// `<promise>[-<rr>[-<rrns>]]-<pipeline>`, at most 63 characters. One Work per (promise,
/// pipeline[, resource request]).
pub fn work_name(
    promise: &str,
    resource: Option<&str>,
    resource_namespace: Option<&str>,
    pipeline: &str,
) -> String {
    let inputs = pipeline_parts(promise, resource, resource_namespace, pipeline);
    object_name(&inputs.join("-"), &inputs, MAX_NAME_LEN)
}

/// Static-dependency Work name: base `<promise>-static-deps`.
pub fn static_dependency_work_name(promise: &str) -> String {
    object_name(
        &format!("{promise}-static-deps"),
        &[promise, "static-deps"],
        MAX_NAME_LEN,
    )
}

/// WorkPlacement name `<work>.<destination>-<groupId[0:5]>`.
///
/// When that is longer than [`MAX_SUBDOMAIN_LEN`] (or not a valid subdomain), both parts are
/// shortened with [`object_name`] so the result stays a valid, unique, stable subdomain.
pub fn work_placement_name(work: &str, destination: &str, group_id: &str) -> String {
    let id5: String = group_id.chars().take(HASH_SUFFIX_LEN).collect();
    let id5 = sanitize_label(&id5);
    let plain = format!("{work}.{destination}-{id5}");
    if is_dns1123_subdomain(&plain) {
        return plain;
    }
    let w = object_name(work, &[work], MAX_NAME_LEN);
    let d = object_name(
        &format!("{destination}-{id5}"),
        &[destination, group_id],
        MAX_NAME_LEN,
    );
    format!("{w}.{d}")
}

/// Scheduling ConfigMap name `destination-selectors-<promise>`,
/// shortened deterministically if longer than 63 characters.
pub fn scheduling_configmap_name(promise: &str) -> String {
    let plain = format!("destination-selectors-{promise}");
    if is_dns1123_label(&plain, MAX_NAME_LEN) {
        plain
    } else {
        object_name(&plain, &[promise], MAX_NAME_LEN)
    }
}

/// Dynamic controller RBAC name `<promise>-promise-controller`,
/// shortened deterministically if longer than 63 characters.
pub fn promise_controller_name(promise: &str) -> String {
    let plain = format!("{promise}-promise-controller");
    if is_dns1123_label(&plain, MAX_NAME_LEN) {
        plain
    } else {
        object_name(&plain, &[promise], MAX_NAME_LEN)
    }
}

/// User-permission Role/RoleBinding name in the pipeline namespace:
/// `GenerateDeterministicObjectName(<pipeline ID>)`.
pub fn user_role_name(pipeline_id: &str) -> String {
    object_name(pipeline_id, &[], MAX_NAME_LEN)
}

/// User-permission ClusterRole name for a `resourceNamespace`:
/// `GenerateDeterministicObjectName(<pipeline ID>-<ns>)`, `*` spelled `kratix-all-namespaces`.
pub fn user_cluster_role_name(pipeline_id: &str, resource_namespace: &str) -> String {
    let ns = if resource_namespace == "*" {
        "kratix-all-namespaces"
    } else {
        resource_namespace
    };
    object_name(&format!("{pipeline_id}-{ns}"), &[], MAX_NAME_LEN)
}

/// User-permission (Cluster)RoleBinding name for the ClusterRole(s):
/// `GenerateDeterministicObjectName(<pipeline ID>-<SA namespace>)`.
pub fn user_binding_name(pipeline_id: &str, service_account_namespace: &str) -> String {
    object_name(
        &format!("{pipeline_id}-{service_account_namespace}"),
        &[],
        MAX_NAME_LEN,
    )
}

/// Ephemeral dry-run resource request name `GenerateDeterministicObjectName("kratix-dry-run-<dryrun>")`.
pub fn dry_run_resource_name(dry_run: &str) -> String {
    object_name(&format!("kratix-dry-run-{dry_run}"), &[], MAX_NAME_LEN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn b04_example_names_are_valid_and_stable() {
        let job = job_name(
            "platform-database-service-tier",
            Some("team.alpha.orders.primary-db"),
            Some("team-a"),
            "instance-configure",
            "run-1",
        );
        assert!(is_dns1123_label(&job, MAX_JOB_NAME_LEN), "{job}");
        assert!(
            job.starts_with("kratix-platform-database-service-tier-team-alp"),
            "{job}"
        );
        assert_eq!(job.len(), 52);
        assert_eq!(
            job,
            job_name(
                "platform-database-service-tier",
                Some("team.alpha.orders.primary-db"),
                Some("team-a"),
                "instance-configure",
                "run-1"
            )
        );
        let job2 = job_name(
            "platform-database-service-tier",
            Some("team.alpha.orders.primary-db"),
            Some("team-a"),
            "instance-configure",
            "run-2",
        );
        assert_ne!(job, job2, "each run gets its own Job");

        let work = work_name(
            "platform-database-service-tier",
            Some("team.alpha.orders.primary-db"),
            None,
            "instance-configure",
        );
        assert!(is_dns1123_label(&work, MAX_NAME_LEN), "{work}");
        assert_eq!(work.len(), 62, "{work}");
        let other_ns = work_name(
            "platform-database-service-tier",
            Some("team.alpha.orders.primary-db"),
            Some("team-b"),
            "instance-configure",
        );
        assert_ne!(work, other_ns);
    }

    #[test]
    fn b04_cut_point_on_a_run_of_dash_dot() {
        // 50 characters, then a run of "-." right where the 56-character cut lands.
        let base = format!("{}-.-.-.-.-.-.-.-.tail", "a".repeat(50));
        let n = object_name(&base, &["x"], MAX_NAME_LEN);
        assert!(is_dns1123_label(&n, MAX_NAME_LEN), "{n}");
        assert!(n.starts_with(&"a".repeat(50)), "{n}");
        let n52 = object_name(&base, &["x"], MAX_JOB_NAME_LEN);
        let cj = health_cronjob_name("team-a", &"a-very-long-health-definition-name".repeat(3));
        assert!(is_dns1123_label(&cj, MAX_JOB_NAME_LEN), "{cj}");
        assert_eq!(
            cj,
            health_cronjob_name("team-a", &"a-very-long-health-definition-name".repeat(3))
        );
        assert_ne!(
            cj,
            health_cronjob_name("team-b", &"a-very-long-health-definition-name".repeat(3))
        );
        let rec = health_record_name("pg", "default", &"r".repeat(70), "default", "check");
        assert!(is_dns1123_label(&rec, MAX_NAME_LEN), "{rec}");
        assert!(is_dns1123_label(&n52, MAX_JOB_NAME_LEN), "{n52}");
    }

    #[test]
    fn names_from_nothing_usable_fall_back() {
        let n = object_name("-.-.__", &[], MAX_NAME_LEN);
        assert!(n.starts_with("plinth-"), "{n}");
        assert!(is_dns1123_label(&n, MAX_NAME_LEN));
        assert!(is_dns1123_label(&object_name("", &[], 1), 7));
    }

    #[test]
    fn matches_kratix_for_valid_short_names() {
        // GenerateDeterministicObjectName("redis", "v1.0.0") = "redis-" + md5("v1.0.0")[0:5]
        let expect = format!("redis-{}", &md5_hex("v1.0.0")[..5]);
        assert_eq!(promise_revision_name("redis", "v1.0.0"), expect);
        let r = promise_revision_name("redis", "V1_RC");
        assert!(is_dns1123_label(&r, MAX_NAME_LEN));
    }

    #[test]
    fn fixed_names() {
        assert_eq!(
            pipeline_id("redis", "resource", "configure", "instance"),
            "redis-resource-configure-instance"
        );
        assert!(
            validate_pipeline_id(&"x".repeat(61))
                .unwrap_err()
                .to_string()
                .contains("61 characters")
        );
        assert_eq!(
            scheduling_configmap_name("redis"),
            "destination-selectors-redis"
        );
        assert_eq!(promise_controller_name("redis"), "redis-promise-controller");
        assert_eq!(
            work_placement_name(
                "redis-abc-12345",
                "worker-1",
                crate::constants::DEFAULT_WORKLOAD_GROUP_ID
            ),
            "redis-abc-12345.worker-1-5058f"
        );
        let long = work_placement_name(&"w".repeat(200), &"d".repeat(100), "abcdef");
        assert!(is_dns1123_subdomain(&long), "{long}");
        assert_eq!(
            long,
            work_placement_name(&"w".repeat(200), &"d".repeat(100), "abcdef")
        );
        assert!(
            user_cluster_role_name("p-resource-configure-x", "*")
                .starts_with("p-resource-configure-x-kratix-all-namespaces-")
        );
        assert_eq!(resource_name_label_value("short"), "short");
        assert!(resource_name_label_value(&"r".repeat(70)).len() <= 63);
    }

    proptest! {
        #[test]
        fn object_names_are_always_valid(base in ".{0,120}", inputs in proptest::collection::vec(".{0,40}", 0..4), max_len in 7usize..80) {
            let refs: Vec<&str> = inputs.iter().map(String::as_str).collect();
            let n = object_name(&base, &refs, max_len);
            prop_assert!(is_dns1123_label(&n, max_len), "{n:?} from {base:?}");
            prop_assert_eq!(&n, &object_name(&base, &refs, max_len));
        }

        #[test]
        fn job_and_work_names_are_valid(p in "[a-z0-9.-]{1,80}", rr in "[a-z0-9.-]{1,80}", ns in "[a-z0-9-]{1,63}", pl in "[a-z0-9-]{1,63}", run in ".{0,20}") {
            let j = job_name(&p, Some(&rr), Some(&ns), &pl, &run);
            prop_assert!(is_dns1123_label(&j, MAX_JOB_NAME_LEN), "{j:?}");
            let w = work_name(&p, Some(&rr), None, &pl);
            prop_assert!(is_dns1123_label(&w, MAX_NAME_LEN), "{w:?}");
            let wp = work_placement_name(&w, &ns, &crate::hash::md5_hex(&pl));
            prop_assert!(is_dns1123_subdomain(&wp), "{wp:?}");
        }

        #[test]
        fn different_inputs_give_different_names(a in "[a-z]{1,10}", b in "[a-z]{1,10}") {
            prop_assume!(a != b);
            prop_assert_ne!(object_name("same-base", &[&a], 63), object_name("same-base", &[&b], 63));
        }
    }
}
