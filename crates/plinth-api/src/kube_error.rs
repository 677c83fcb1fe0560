//! One readable line for a Kubernetes client error. `kube::Error`'s own `Display` of an
//! API error appends the `Debug` form of the whole `Status`; people reading a CLI error,
//! a log line or a condition get the server's message instead, and every field cause the
//! message does not already name.

/// `err` as one line: for an API error the server's message, then `(<reason>, HTTP
/// <code>)`, then each field cause the message leaves out; any other error as it
/// displays itself.
pub fn describe(err: &kube::Error) -> String {
    match err {
        kube::Error::Api(status) => describe_status(status),
        other => other.to_string(),
    }
}

/// A `Status` answered by the API as [`describe`] shows it.
pub fn describe_status(status: &kube::core::Status) -> String {
    let mut out = if status.message.is_empty() {
        "the API refused the request".to_string()
    } else {
        status.message.clone()
    };
    let causes: Vec<String> = status
        .details
        .iter()
        .flat_map(|d| d.causes.iter())
        .filter(|c| !c.message.is_empty() && !status.message.contains(&c.message))
        .map(|c| match c.field.as_str() {
            "" => c.message.clone(),
            f => format!("{f}: {}", c.message),
        })
        .collect();
    if !causes.is_empty() {
        out.push_str(": ");
        out.push_str(&causes.join("; "));
    }
    match (status.reason.as_str(), status.code) {
        ("", 0) => {}
        ("", code) => out.push_str(&format!(" (HTTP {code})")),
        (reason, 0) => out.push_str(&format!(" ({reason})")),
        (reason, code) => out.push_str(&format!(" ({reason}, HTTP {code})")),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    #[test]
    fn an_api_error_is_its_message_and_causes_not_a_debug_struct() {
        let mut status = Status::failure(
            "Widget.example.test \"w\" is invalid: spec.size: Invalid value",
            "Invalid",
        )
        .with_code(422);
        status.details = Some(
            serde_json::from_value(serde_json::json!({"name": "w", "causes": [
                {"reason": "FieldValueInvalid", "message": "Invalid value", "field": "spec.size"},
                {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.colour"},
            ]}))
            .unwrap(),
        );
        let text = describe(&kube::Error::Api(Box::new(status)));
        assert_eq!(
            text,
            "Widget.example.test \"w\" is invalid: spec.size: Invalid value: spec.colour: Required value (Invalid, HTTP 422)"
        );
        assert!(!text.contains("Status {"), "{text}");
    }
}
