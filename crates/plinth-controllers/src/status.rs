//! Status writes shared by the Promise, resource-request and workflow code.
//!
//! Every write is a read-modify-write through the `/status` subresource carrying the
//! object's `resourceVersion`, retried on 409 Conflict with a fresh read, so a status
//! key written meanwhile by a pipeline's status-writer is never lost (reference §4.11
//! and §13: Kratix does not retry).

use jiff::Timestamp;
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::{Map, Value, json};

use crate::Error;

/// How many times a conflicting status write is retried before giving up.
const CONFLICT_RETRIES: usize = 8;

/// Reads `name`, lets `mutate` change its `status` (a JSON object, created if absent) and
/// writes it back through `/status`. `mutate` returns false to skip the write (nothing
/// changed). Returns the object as stored after the write (or as read when skipped).
pub async fn update_status<F>(
    api: &Api<DynamicObject>,
    name: &str,
    mut mutate: F,
) -> Result<DynamicObject, Error>
where
    F: FnMut(&mut Value, &DynamicObject) -> bool,
{
    let mut attempt = 0;
    loop {
        let mut obj = api.get(name).await?;
        let mut status = obj.data.get("status").cloned().unwrap_or_else(|| json!({}));
        if !status.is_object() {
            status = json!({});
        }
        let before = status.clone();
        if !mutate(&mut status, &obj) || status == before {
            return Ok(obj);
        }
        obj.data["status"] = status;
        match api.replace_status(name, &PostParams::default(), &obj).await {
            Ok(stored) => return Ok(stored),
            Err(kube::Error::Api(e)) if e.code == 409 && attempt < CONFLICT_RETRIES => {
                attempt += 1;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Current time as an RFC 3339 string with second precision, as Kubernetes writes
/// `metav1.Time`.
pub fn now_rfc3339() -> String {
    Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Upserts a condition by `type` in `status.conditions`. `lastTransitionTime` changes
/// only when the condition's `status` changes (Kubernetes condition convention).
/// Returns true when anything changed.
pub fn set_condition(
    status: &mut Value,
    type_: &str,
    cond_status: &str,
    reason: &str,
    message: &str,
) -> bool {
    let obj = ensure_object(status);
    let conditions = obj.entry("conditions").or_insert_with(|| json!([]));
    if !conditions.is_array() {
        *conditions = json!([]);
    }
    let list = conditions.as_array_mut().expect("array");
    if let Some(existing) = list.iter_mut().find(|c| c["type"] == type_) {
        let same_status = existing["status"] == cond_status;
        if same_status && existing["reason"] == reason && existing["message"] == message {
            return false;
        }
        if !same_status {
            existing["lastTransitionTime"] = json!(now_rfc3339());
        }
        existing["status"] = json!(cond_status);
        existing["reason"] = json!(reason);
        existing["message"] = json!(message);
        return true;
    }
    list.push(json!({
        "type": type_,
        "status": cond_status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": now_rfc3339(),
    }));
    true
}

/// The condition of `type_` in an object's status, if present.
pub fn condition<'a>(status: &'a Value, type_: &str) -> Option<&'a Value> {
    status
        .get("conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// True when the condition of `type_` exists with status `"True"`.
pub fn condition_true(status: &Value, type_: &str) -> bool {
    condition(status, type_).is_some_and(|c| c["status"] == "True")
}

/// Makes `value` an object (replacing anything else) and returns its map.
pub fn ensure_object(value: &mut Value) -> &mut Map<String, Value> {
    if !value.is_object() {
        *value = json!({});
    }
    value.as_object_mut().expect("object")
}

/// Sets `value[key]`, returning true when it changed.
pub fn set_field(value: &mut Value, key: &str, new: Value) -> bool {
    let obj = ensure_object(value);
    if obj.get(key) == Some(&new) {
        return false;
    }
    obj.insert(key.to_string(), new);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn condition_transition_time_moves_only_on_status_change() {
        let mut status = json!({});
        assert!(set_condition(
            &mut status,
            "Ready",
            "False",
            "Pending",
            "Pending"
        ));
        let first = condition(&status, "Ready").unwrap()["lastTransitionTime"].clone();
        assert!(!set_condition(
            &mut status,
            "Ready",
            "False",
            "Pending",
            "Pending"
        ));
        assert!(set_condition(
            &mut status,
            "Ready",
            "False",
            "Other",
            "changed reason"
        ));
        assert_eq!(
            condition(&status, "Ready").unwrap()["lastTransitionTime"],
            first
        );
        assert!(set_condition(&mut status, "Ready", "True", "Done", "Ready"));
        assert_eq!(status["conditions"].as_array().unwrap().len(), 1);
        assert!(condition_true(&status, "Ready"));
    }
}
