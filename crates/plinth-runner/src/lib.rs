//! Plinth's embedded-mode Job runner: "the kubelet for Jobs".
//!
//! The runner watches `batch/v1` Jobs in all namespaces through a `kube::Client` (the only
//! way it reaches the control plane, ARCHITECTURE.md), creates one Pod object per attempt,
//! runs it on this machine and writes Pod and Job status like the Kubernetes kubelet and
//! Job controller do (see [`job`]).
//!
//! How a container runs is decided from its image, in this order ([`backend::plan_container`]):
//! 1. an entry of the image map ([`image::ImageMap`]) — a local command in place of the image;
//! 2. Plinth's pipeline adapter image, or the Kratix adapter entrypoint `/bin/pipeline-adapter`
//!    — runs `plinth pipeline-adapter <args>`, or, given an adapter program, inside the
//!    runner's process ([`inprocess`]);
//! 3. a stock userland image (`busybox`, `alpine`, ...) — the container's command over a
//!    read-only view of the host in a bubblewrap sandbox;
//! 4. podman or docker, when installed — the real image;
//! 5. otherwise the container waits with `reason: ErrImagePull` and a message saying
//!    what to add (an image-map entry, or podman); an engine that cannot pull the image
//!    gives the same reason with its error.
//!
//! Each container's `containerID` names the backend that ran it (`sandbox://`, `host://`,
//! `podman://`, `plinth://` for an adapter the runner runs itself) and its `imageID` what
//! stood in for the image (`image-map:<entry>=<cmd>`,
//! `host-userland:<image>`, `plinth:pipeline-adapter`, `<engine>:<image>`). Standalone
//! Pods run too, and deleted Pods are stopped ([`pods`]); Job and Pod Events are written
//! through [`plinth_api::events`]; logs are capped and rotated ([`logfile`]).
//!
//! Volumes (emptyDir, configMap, secret, projected, downwardAPI) are materialised under
//! `<data_dir>/pods/<ns>/<pod>/volumes/<name>` and bound at their mount paths; container
//! logs go to `<data_dir>/pod-logs/<ns>/<pod>/<container>.log`. Every Pod gets its
//! ServiceAccount's identity through the TokenRequest API: the in-cluster files at
//! `/var/run/secrets/kubernetes.io/serviceaccount`, `KUBERNETES_SERVICE_HOST/PORT`, and a
//! kubeconfig named by `KUBECONFIG`.
#![deny(missing_docs)]

pub mod access;
pub mod adapter;
pub mod backend;
pub mod config;
pub mod cronjob;
mod ctx;
pub mod error;
pub mod expand;
pub mod image;
pub mod inprocess;
pub mod job;
pub mod logfile;
pub mod mount;
pub mod pod;
pub mod pod_status;
pub mod pods;
pub mod procs;
pub mod sweep;

pub use access::ClusterAccess;
pub use config::{DEFAULT_STOCK_IMAGES, EngineMode, RunnerConfig, SandboxMode};
pub use error::RunnerError;
pub use job::run;
pub use plinth_api::constants::DEFAULT_ADAPTER_IMAGE;
pub use pod::{RunOptions, run_pod_once};
