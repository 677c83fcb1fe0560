//! What one pass of the agent did, as the agent returns it and the observer records it.

/// What one pass did.
#[derive(Clone, Debug, Default)]
pub struct SyncReport {
    /// Objects applied (written) in this pass.
    pub applied: usize,
    /// Objects whose apply was skipped because nothing changed.
    pub unchanged: usize,
    /// Objects deleted because they left the store.
    pub pruned: usize,
    /// Objects whose declared fields another field manager had taken and the agent took
    /// back (server-side apply with force, only for objects it applied before).
    pub drift_corrected: usize,
    /// False when the store version had not moved and nothing was retried.
    pub read_store: bool,
    /// Errors of this pass (store and documents).
    pub errors: Vec<String>,
    /// Write requests sent to the target API (applies, deletes, the inventory).
    pub api_writes: u64,
}
