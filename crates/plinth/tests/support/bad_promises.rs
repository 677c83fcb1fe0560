//! Promises that admission refuses, and the causes it names, shared by the embedded
//! server's tests and the operator webhooks' tests so both modes are held to the same
//! messages.

/// A pipeline container whose `command` is a string.
pub const STRING_COMMAND: &str = r#"
apiVersion: platform.kratix.io/v1alpha1
kind: Promise
metadata:
  name: stringcmd
spec:
  workflows:
    resource:
      configure:
      - apiVersion: platform.kratix.io/v1alpha1
        kind: Pipeline
        metadata:
          name: instance
        spec:
          containers:
          - name: hello
            image: busybox
            command: "echo hi"
"#;

/// The cause admission names for [`STRING_COMMAND`].
pub const STRING_COMMAND_CAUSE: &str = "spec.workflows.resource.configure[0].spec.containers[0].command: Invalid value: invalid type: string \"echo hi\", expected a sequence";

/// Pipeline containers that fail as a Pod's would: no image, a duplicate name, a mount of
/// an undeclared volume.
pub const BAD_PIPELINE: &str = r#"
apiVersion: platform.kratix.io/v1alpha1
kind: Promise
metadata:
  name: badpipe
spec:
  workflows:
    resource:
      configure:
      - apiVersion: platform.kratix.io/v1alpha1
        kind: Pipeline
        metadata:
          name: instance
        spec:
          volumes:
          - name: cache
            emptyDir: {}
          containers:
          - name: first
            imag: busybox
          - name: first
            image: busybox
            volumeMounts:
            - name: missing
              mountPath: /data
"#;

/// The causes admission names for [`BAD_PIPELINE`].
pub const BAD_PIPELINE_CAUSES: [&str; 3] = [
    r#"spec.workflows.resource.configure[0].spec.containers[0].image: Required value"#,
    r#"spec.workflows.resource.configure[0].spec.containers[1].name: Duplicate value: "first""#,
    r#"spec.workflows.resource.configure[0].spec.containers[1].volumeMounts[0].name: Not found: "missing""#,
];
