//! What the runner's Job controller and its Pod runs share: the client, the
//! configuration, the running Jobs, the slots for Pods, the stop channels of running Pods
//! and the Event recorders. A leaf: it knows neither Jobs nor Pods.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use plinth_api::events::EventRecorder;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinHandle;

use crate::config::RunnerConfig;

pub(crate) struct Ctx {
    pub(crate) client: kube::Client,
    pub(crate) config: RunnerConfig,
    /// Job uid → its task; `dirty` is set when the Job changed while the task ran, so
    /// the task takes another look before it ends (no change is lost).
    pub(crate) running: Mutex<HashMap<String, Running>>,
    pub(crate) slots: Semaphore,
    /// Pod uid → the stop channel of its run (see [`crate::pods`]).
    pub(crate) stops: Mutex<HashMap<String, StopHandle>>,
    /// Events of the Job controller (`job-controller`).
    pub(crate) jobs_events: EventRecorder,
    /// Events of the kubelet (`kubelet`, host = node name).
    pub(crate) kubelet: EventRecorder,
    /// Events of the scheduler (`default-scheduler`).
    pub(crate) scheduler: EventRecorder,
}

pub(crate) struct Running {
    pub(crate) handle: Option<JoinHandle<()>>,
    pub(crate) dirty: bool,
}

/// How to stop a running Pod: its stop channel and the grace period its spec asks for
/// (used when the Pod is gone before its deletion was seen).
pub(crate) struct StopHandle {
    pub(crate) tx: watch::Sender<Option<Duration>>,
    pub(crate) grace: Duration,
}
