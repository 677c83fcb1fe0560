//! Status conditions (the Kubernetes API conventions for `metav1.Condition`): one
//! [`set_condition`] for both shapes the controllers keep conditions in, the JSON
//! `status` of a dynamic object and the typed `Vec<Condition>` of a typed status.

use std::borrow::Cow;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde_json::{Map, Value, json};

/// Current time as an RFC 3339 string with second precision, as Kubernetes writes
/// `metav1.Time`.
pub fn now_rfc3339() -> String {
    Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// A condition's `status`: `"True"`, `"False"` or `"Unknown"`; `bool` gives the first two.
pub trait ConditionStatus {
    /// The `status` string.
    fn as_status(&self) -> &str;
}

impl ConditionStatus for bool {
    fn as_status(&self) -> &str {
        if *self { "True" } else { "False" }
    }
}

impl ConditionStatus for &str {
    fn as_status(&self) -> &str {
        self
    }
}

/// Somewhere conditions are kept: a typed list, or a JSON `status` object whose
/// `conditions` array is created when absent (and replaced when not an array).
pub trait ConditionList {
    /// Upserts the condition of `type_`; see [`set_condition`].
    fn upsert(&mut self, c: Wanted<'_>) -> bool;
}

/// The wanted state of one condition.
pub struct Wanted<'a> {
    type_: &'a str,
    status: &'a str,
    reason: &'a str,
    message: Cow<'a, str>,
    observed_generation: Option<i64>,
}

/// Sets condition `type_` with the Kubernetes convention: `lastTransitionTime` changes
/// only when `status` flips; reason, message and `observedGeneration` (when given) are
/// updated in place. Returns whether anything changed, so an unchanged status is not
/// written.
pub fn set_condition(
    list: &mut impl ConditionList,
    type_: &str,
    status: impl ConditionStatus,
    reason: &str,
    message: &str,
    observed_generation: Option<i64>,
) -> bool {
    list.upsert(Wanted {
        type_,
        status: status.as_status(),
        reason,
        message: bounded_message(message),
        observed_generation,
    })
}

/// Longest condition `message` the API takes (`metav1.Condition`: 32768 bytes).
pub const MAX_MESSAGE_BYTES: usize = 32 * 1024;

/// `message` cut to fit a condition (at a character boundary, marked), so an error that
/// quotes a huge value cannot make the status write itself fail.
///
/// ```
/// use plinth_controllers::support::conditions::{bounded_message, MAX_MESSAGE_BYTES};
///
/// assert_eq!(bounded_message("short"), "short");
/// let long = "é".repeat(MAX_MESSAGE_BYTES);
/// let cut = bounded_message(&long);
/// assert!(cut.len() <= MAX_MESSAGE_BYTES && cut.ends_with("… (truncated)"));
/// ```
pub fn bounded_message(message: &str) -> Cow<'_, str> {
    if message.len() <= MAX_MESSAGE_BYTES {
        return Cow::Borrowed(message);
    }
    const MARK: &str = "… (truncated)";
    let mut end = MAX_MESSAGE_BYTES - MARK.len();
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}{MARK}", &message[..end]))
}

impl ConditionList for Vec<Condition> {
    fn upsert(&mut self, w: Wanted<'_>) -> bool {
        let Some(c) = self.iter_mut().find(|c| c.type_ == w.type_) else {
            self.push(Condition {
                type_: w.type_.into(),
                status: w.status.into(),
                reason: w.reason.into(),
                message: w.message.into_owned(),
                observed_generation: w.observed_generation,
                last_transition_time: Time(Timestamp::now()),
            });
            return true;
        };
        let changed = c.status != w.status
            || c.reason != w.reason
            || c.message != *w.message
            || c.observed_generation != w.observed_generation;
        if c.status != w.status {
            c.last_transition_time = Time(Timestamp::now());
        }
        c.status = w.status.into();
        c.reason = w.reason.into();
        c.message = w.message.into_owned();
        c.observed_generation = w.observed_generation;
        changed
    }
}

impl ConditionList for Value {
    fn upsert(&mut self, w: Wanted<'_>) -> bool {
        let conditions = ensure_object(self)
            .entry("conditions")
            .or_insert_with(|| json!([]));
        if !conditions.is_array() {
            *conditions = json!([]);
        }
        let list = conditions.as_array_mut().expect("array");
        let Some(c) = list.iter_mut().find(|c| c["type"] == w.type_) else {
            let mut c = json!({
                "type": w.type_,
                "status": w.status,
                "reason": w.reason,
                "message": w.message,
                "lastTransitionTime": now_rfc3339(),
            });
            if let Some(g) = w.observed_generation {
                c["observedGeneration"] = json!(g);
            }
            list.push(c);
            return true;
        };
        let same_status = c["status"] == w.status;
        let same_generation = w
            .observed_generation
            .is_none_or(|g| c["observedGeneration"] == g);
        if same_status && c["reason"] == w.reason && c["message"] == *w.message && same_generation {
            return false;
        }
        if !same_status {
            c["lastTransitionTime"] = json!(now_rfc3339());
        }
        c["status"] = json!(w.status);
        c["reason"] = json!(w.reason);
        c["message"] = json!(w.message);
        if let Some(g) = w.observed_generation {
            c["observedGeneration"] = json!(g);
        }
        true
    }
}

/// The condition of `type_` in a JSON status, if present.
pub fn condition<'a>(status: &'a Value, type_: &str) -> Option<&'a Value> {
    status
        .get("conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// True when the condition of `type_` exists in a JSON status with status `"True"`.
pub fn condition_true(status: &Value, type_: &str) -> bool {
    condition(status, type_).is_some_and(|c| c["status"] == "True")
}

/// The condition of `type_` in a typed list, if present.
pub fn get_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// True if the condition `type_` is present with status `"False"`.
pub fn condition_is_false(conditions: &[Condition], type_: &str) -> bool {
    condition_has_status(conditions, type_, false)
}

/// True if the condition `type_` is present with status `"True"`.
pub fn condition_is_true(conditions: &[Condition], type_: &str) -> bool {
    condition_has_status(conditions, type_, true)
}

fn condition_has_status(conditions: &[Condition], type_: &str, status: bool) -> bool {
    get_condition(conditions, type_).is_some_and(|c| c.status == status.as_status())
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

    /// An error quoting a huge value still makes a status the API takes, in both shapes.
    #[test]
    fn a_huge_message_is_cut_to_what_a_condition_holds() {
        let huge = "x".repeat(100_000);
        let mut typed: Vec<Condition> = Vec::new();
        assert!(set_condition(
            &mut typed,
            "Ready",
            false,
            "StoreError",
            &huge,
            None
        ));
        assert!(typed[0].message.len() <= MAX_MESSAGE_BYTES);
        assert!(typed[0].message.ends_with("(truncated)"));
        assert!(
            !set_condition(&mut typed, "Ready", false, "StoreError", &huge, None),
            "settled"
        );
        let mut status = json!({});
        set_condition(&mut status, "Ready", false, "StoreError", &huge, None);
        let m = status["conditions"][0]["message"].as_str().unwrap();
        assert!(m.len() <= MAX_MESSAGE_BYTES, "{}", m.len());
        assert!(
            !set_condition(&mut status, "Ready", false, "StoreError", &huge, None),
            "settled"
        );
    }

    #[test]
    fn json_transition_time_moves_only_on_status_change() {
        let mut status = json!({});
        assert!(set_condition(
            &mut status,
            "Ready",
            "False",
            "Pending",
            "Pending",
            None
        ));
        let first = condition(&status, "Ready").unwrap()["lastTransitionTime"].clone();
        assert!(!set_condition(
            &mut status,
            "Ready",
            "False",
            "Pending",
            "Pending",
            None
        ));
        assert!(set_condition(
            &mut status,
            "Ready",
            "False",
            "Other",
            "changed",
            None
        ));
        assert_eq!(
            condition(&status, "Ready").unwrap()["lastTransitionTime"],
            first
        );
        assert!(set_condition(
            &mut status,
            "Ready",
            "True",
            "Done",
            "Ready",
            None
        ));
        assert_eq!(status["conditions"].as_array().unwrap().len(), 1);
        assert!(condition_true(&status, "Ready"));
        assert!(
            condition(&status, "Ready")
                .unwrap()
                .get("observedGeneration")
                .is_none()
        );
    }

    #[test]
    fn typed_transition_time_moves_only_on_status_change() {
        let mut conds = Vec::new();
        assert!(set_condition(
            &mut conds, "Ready", false, "Pending", "Pending", None
        ));
        let t0 = conds[0].last_transition_time.clone();
        assert!(set_condition(
            &mut conds, "Ready", false, "Other", "Other", None
        ));
        assert_eq!(conds[0].last_transition_time, t0);
        assert!(!set_condition(
            &mut conds, "Ready", false, "Other", "Other", None
        ));
        assert!(set_condition(
            &mut conds,
            "Ready",
            true,
            "Ok",
            "Ok",
            Some(2)
        ));
        assert_eq!(conds.len(), 1);
        assert_eq!(conds[0].status, "True");
        assert!(condition_is_true(&conds, "Ready"));
        assert!(!condition_is_false(&conds, "Ready"));
    }
}
