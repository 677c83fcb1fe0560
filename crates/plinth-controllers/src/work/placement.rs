//! Writing one WorkPlacement: its labels, annotations and spec from the Work and the
//! group, created with the repository-cleanup finalizer and owned by the Work, and its
//! `ScheduleSucceeded` condition.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use plinth_api::constants::{condition_types, finalizers, labels, messages, reasons};
use plinth_api::{Work, WorkPlacement, WorkloadGroup};
use serde_json::{Value, json};

use super::shared::{WorkCtx, wp_conditions};
use crate::Error;
use crate::support::{
    Basis, condition_is_false, patch_status, patch_status_from, publish, set_condition,
    typed_reference,
};
use crate::work::scheduler::workplacement_name;
use plinth_api::events::EventType;

/// The spec fields the scheduler owns, compared after normalising absent, `null`, `""`
/// and `[]` to one value.
const OWNED_SPEC_FIELDS: [&str; 6] = [
    "targetDestinationName",
    "workloads",
    "promiseName",
    "resourceName",
    "id",
    "generation",
];

/// A WorkPlacement as the scheduler wants it.
struct Desired {
    name: String,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
    spec: Value,
}

/// Creates or updates the WorkPlacement of `group` on `dest` and sets its scheduling
/// conditions. Returns its name.
pub(super) async fn upsert(
    state: &WorkCtx,
    work: &Work,
    group: &WorkloadGroup,
    dest: &str,
    existing: Option<&WorkPlacement>,
    misplaced: bool,
) -> Result<String, Error> {
    let ns = work.namespace().unwrap_or_default();
    let api: Api<WorkPlacement> = Api::namespaced(state.ctx.client.clone(), &ns);
    let desired = desired(work, group, dest, existing, misplaced);
    let what = format!("WorkPlacement {ns}/{}", desired.name);
    let written = match existing {
        Some(wp) => update(&api, wp, &desired, &what).await?,
        None => create(&api, work, &ns, &desired, &what).await?,
    };
    if written.is_some() {
        publish(
            &state.recorder,
            &typed_reference(work),
            EventType::Normal,
            plinth_api::constants::events::WORKPLACEMENT_RECONCILED,
            format!(
                "WorkPlacement {} reconciled for Destination {dest}",
                desired.name
            ),
        )
        .await;
    }
    let known = written.as_ref().or(existing);
    set_scheduled(
        state,
        &api,
        &desired.name,
        known,
        &what,
        dest,
        group,
        misplaced,
    )
    .await?;
    Ok(desired.name)
}

/// The WorkPlacement's name, labels, annotations (the existing ones plus the Work's,
/// without kubectl's last-applied configuration) and spec.
fn desired(
    work: &Work,
    group: &WorkloadGroup,
    dest: &str,
    existing: Option<&WorkPlacement>,
    misplaced: bool,
) -> Desired {
    let work_name = work.name_any();
    let name = existing
        .map(|wp| wp.name_any())
        .unwrap_or_else(|| workplacement_name(&work_name, dest, &group.id));
    let mut labels: BTreeMap<String, String> = BTreeMap::from([
        (labels::WORK.to_string(), work_name.clone()),
        (labels::WORKLOAD_GROUP_ID.to_string(), group.id.clone()),
        (
            labels::TARGET_DESTINATION_NAME.to_string(),
            dest.to_string(),
        ),
    ]);
    if let Some(p) = work.labels().get(labels::PIPELINE_NAME) {
        labels.insert(labels::PIPELINE_NAME.to_string(), p.clone());
    }
    if misplaced {
        labels.insert(labels::MISPLACED.to_string(), "true".to_string());
    }
    let mut annotations: BTreeMap<String, String> = existing
        .map(|wp| wp.annotations().clone())
        .unwrap_or_default();
    for (k, v) in work.annotations() {
        if k != "kubectl.kubernetes.io/last-applied-configuration" {
            annotations.insert(k.clone(), v.clone());
        }
    }
    let spec = json!({
        "targetDestinationName": dest,
        "workloads": group.workloads,
        "promiseName": work.spec.promise_name,
        "resourceName": work.spec.resource_name,
        "id": group.id,
        "generation": work.meta().generation.unwrap_or(0),
    });
    Desired {
        name,
        labels,
        annotations,
        spec,
    }
}

/// Patches an existing WorkPlacement (not being deleted) whose owned fields differ;
/// the placement as written, when it wrote.
async fn update(
    api: &Api<WorkPlacement>,
    wp: &WorkPlacement,
    desired: &Desired,
    what: &str,
) -> Result<Option<WorkPlacement>, Error> {
    let current_spec = serde_json::to_value(&wp.spec).unwrap_or(Value::Null);
    let spec_same = OWNED_SPEC_FIELDS
        .iter()
        .all(|k| json_field_eq(&current_spec, &desired.spec, k));
    let same =
        spec_same && wp.labels() == &desired.labels && wp.annotations() == &desired.annotations;
    if same || wp.meta().deletion_timestamp.is_some() {
        return Ok(None);
    }
    // Labels are replaced wholesale: keys no longer wanted are nulled.
    let mut label_patch = serde_json::Map::new();
    for k in wp.labels().keys() {
        label_patch.insert(k.clone(), Value::Null);
    }
    for (k, v) in &desired.labels {
        label_patch.insert(k.clone(), json!(v));
    }
    let body = json!({
        "metadata": {
            "resourceVersion": wp.meta().resource_version,
            "labels": label_patch,
            "annotations": desired.annotations,
        },
        "spec": desired.spec,
    });
    api.patch(&desired.name, &PatchParams::default(), &Patch::Merge(&body))
        .await
        .map(Some)
        .map_err(|e| Error::kube("updating", what, e))
}

/// Creates the WorkPlacement, owned by the Work; the placement as created, when it wrote
/// (an existing one of the same name is left to the next reconcile).
async fn create(
    api: &Api<WorkPlacement>,
    work: &Work,
    ns: &str,
    desired: &Desired,
    what: &str,
) -> Result<Option<WorkPlacement>, Error> {
    let owner = OwnerReference {
        api_version: Work::api_version(&()).into_owned(),
        kind: Work::kind(&()).into_owned(),
        name: work.name_any(),
        uid: work.meta().uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    let obj = json!({
        "apiVersion": WorkPlacement::api_version(&()),
        "kind": WorkPlacement::kind(&()),
        "metadata": {
            "name": desired.name,
            "namespace": ns,
            "labels": desired.labels,
            "annotations": desired.annotations,
            "finalizers": [finalizers::WORKPLACEMENT_REPO_CLEANUP],
            "ownerReferences": [owner],
        },
        "spec": desired.spec,
    });
    let wp: WorkPlacement = serde_json::from_value(obj).map_err(|e| Error::Invalid {
        object: what.to_string(),
        message: format!("building WorkPlacement: {e}"),
    })?;
    match api.create(&PostParams::default(), &wp).await {
        Ok(created) => Ok(Some(created)),
        // Created concurrently (or by a previous reconcile whose list was stale): the
        // next reconcile updates it.
        Err(ref e) if crate::support::is_already_exists(e) => Ok(None),
        Err(e) => Err(Error::kube("creating", what, e)),
    }
}

/// Sets the WorkPlacement's `ScheduleSucceeded` (False while misplaced), from `known`
/// (as just written or listed) when given, and warns once when it becomes misplaced.
/// `Ready` is the WorkPlacement controller's alone: it summarises this condition with
/// its own `WriteSucceeded`.
#[allow(clippy::too_many_arguments)]
async fn set_scheduled(
    state: &WorkCtx,
    api: &Api<WorkPlacement>,
    name: &str,
    known: Option<&WorkPlacement>,
    what: &str,
    dest: &str,
    group: &WorkloadGroup,
    misplaced: bool,
) -> Result<(), Error> {
    let mut became_misplaced = false;
    let compute = |cur: &WorkPlacement| {
        let mut conds = wp_conditions(cur);
        let gen_ = cur.meta().generation;
        let was = condition_is_false(&conds, condition_types::SCHEDULE_SUCCEEDED);
        let (status, reason, message) = if misplaced {
            (
                false,
                reasons::DESTINATION_SELECTOR_MISMATCH,
                messages::TARGET_NO_LONGER_MATCHES,
            )
        } else {
            (
                true,
                reasons::SCHEDULED_TO_DESTINATION,
                messages::SCHEDULED_TO_CORRECT_DESTINATION,
            )
        };
        became_misplaced = misplaced && !was;
        let ch = set_condition(
            &mut conds,
            condition_types::SCHEDULE_SUCCEEDED,
            status,
            reason,
            message,
            gen_,
        );
        ch.then(|| json!({"conditions": conds}))
    };
    match known {
        // Listed or written by this reconcile: as current as a read.
        Some(known) => patch_status_from(api, Basis::Fresh(known), compute).await,
        None => patch_status(api, name, compute).await,
    }
    .map_err(|e| Error::kube("writing status of", what, e))?;
    if became_misplaced && let Ok(Some(wp)) = api.get_opt(name).await {
        publish(
            &state.recorder,
            &typed_reference(&wp),
            EventType::Warning,
            plinth_api::constants::events::DESTINATION_SELECTOR_MISMATCH,
            format!(
                "Destination {dest} no longer matches the destinationSelectors of workload group {}",
                group.id
            ),
        )
        .await;
    }
    Ok(())
}

fn json_field_eq(a: &Value, b: &Value, key: &str) -> bool {
    let norm = |v: Option<&Value>| match v {
        None | Some(Value::Null) => Value::Null,
        Some(Value::String(s)) if s.is_empty() => Value::Null,
        Some(Value::Array(a)) if a.is_empty() => Value::Null,
        Some(v) => v.clone(),
    };
    norm(a.get(key)) == norm(b.get(key))
}
