//! Health on the platform (Kratix's HealthRecords, the HealthSource and Plinth's own
//! record of health).
//!
//! - [`record`]: the HealthRecord controller. On every record event it rebuilds the
//!   referenced request's `status.healthStatus` from the records of **that** request
//!   (resourceRef name and namespace and the Promise), worst state first, and appends to
//!   the request's health history when the overall state changes.
//! - [`source`]: the HealthSource controller, which polls a bucket, an Azure container, a
//!   GCS bucket or a Git branch for HealthRecords that Destinations write and applies them
//!   onto the platform ([`source::poll`]); [`source::stream`]: its consumers of a Redis
//!   or NATS JetStream stream.
//! - [`target`]: the request a record reports on.
//! - [`history`]: the history kept in `status.healthHistory` and the figures derived from
//!   it (uptime, time to first healthy, time to recover).
//! - [`aggregate`]: the pure aggregation of records into `healthStatus`.
//! - [`freshness`]: when a record is overdue, from the schedule and heartbeat its writer
//!   stamped on it (a stale record counts as `unknown`).
//! - [`index`]: the cached records by the request they reference.
//! - [`alerts`]: Alertmanager's webhook payload as HealthRecords (`plinth up
//!   --alertmanager-addr`).
//!
//! Which wins, a pipeline's `healthStatus` or the records: while at least one HealthRecord
//! references a request, the records are the truth and `status.healthStatus` is rebuilt
//! from them on every record event (a value a pipeline wrote through `status.yaml` is
//! replaced). A request that no record references keeps whatever its pipeline wrote; when
//! its last record goes, the health status the records built is removed.

pub mod aggregate;
pub mod alerts;
pub mod clock;
pub mod freshness;
pub mod history;
pub mod index;
pub mod record;
pub mod source;
pub mod target;
pub mod validate;

pub use clock::{Clock, ManualClock, SystemClock};

use std::sync::Arc;

use crate::context::Context;

/// Runs the HealthRecord and HealthSource controllers with `clock` (the system clock in
/// production, a [`ManualClock`] in tests) until the process stops.
pub async fn run(ctx: Arc<Context>, clock: Arc<dyn Clock>) {
    tokio::join!(
        record::run(ctx.clone(), clock.clone()),
        source::run(ctx, clock)
    );
}
