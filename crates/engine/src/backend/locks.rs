//! [`QueueLocks`]: named locks with heartbeats and fencing tokens, kept in the queue so that
//! every process of a fleet sees them (worker presence, lock-holding jobs, A/B sessions).

use std::time::Duration;

use crate::error::EngineError;
use crate::job::{LockAcquire, WorkerIdentity};

use super::QueueCore;

/// Named locks, leased like jobs: taken for an owner with a heartbeat period and a stale
/// deadline, renewed and released fenced on the token the acquisition returned, freed by the
/// reaper when their holder stops heartbeating. [`QueueControl::leases`](super::QueueControl::leases)
/// lists them beside the job leases.
///
/// # Errors
/// Every call returns [`EngineError::Backend`] when the queue cannot be read or written.
#[async_trait::async_trait]
pub trait QueueLocks: QueueCore {
    /// Takes the named lock for `owner` when free or stale (a stale holder is replaced, with
    /// a higher fencing token).
    async fn acquire_lock(
        &self,
        name: &str,
        owner: &WorkerIdentity,
        heartbeat: Duration,
        stale_after: Duration,
    ) -> Result<LockAcquire, EngineError>;

    /// Renews a named lock's heartbeat (fenced). False when it is no longer ours.
    async fn renew_lock(&self, name: &str, fencing_token: u64) -> Result<bool, EngineError>;

    /// Releases a named lock (fenced). False when it was no longer ours.
    async fn release_lock(&self, name: &str, fencing_token: u64) -> Result<bool, EngineError>;

    /// Frees named locks whose heartbeat is past their `stale_after`; returns their names.
    async fn reap_locks(&self) -> Result<Vec<String>, EngineError>;

    /// Frees the named lock `name` if it is still held under `fencing_token` with its heartbeat
    /// at `heartbeat_at_ms` and is past its stale deadline by this backend's clock: the
    /// one-lock reap of a reaper that confirmed the lock's staleness on its own monotonic clock
    /// (`reaper::StaleWatch`). Returns whether it freed it. Default: false (a backend whose
    /// processes share one clock reaps with [`Self::reap_locks`]).
    ///
    /// # Errors
    /// [`EngineError::Backend`] when the queue cannot be written.
    async fn reap_lock(
        &self,
        name: &str,
        fencing_token: u64,
        heartbeat_at_ms: i64,
    ) -> Result<bool, EngineError> {
        let _ = (name, fencing_token, heartbeat_at_ms);
        Ok(false)
    }

    /// [`Self::reap_lock`] judged by a reaper's own monotonic clock instead of this backend's
    /// wall clock: frees `name` if it is still held under `fencing_token` with its heartbeat at
    /// `heartbeat_at_ms`, whatever its deadline says (a reaper whose wall clock stepped back
    /// would otherwise wait out the step; `reaper::StaleWatch`, as
    /// [`QueueRecovery::reap_unchanged`](super::QueueRecovery::reap_unchanged) for job leases).
    /// Returns whether it freed it. Default: false.
    ///
    /// # Errors
    /// [`EngineError::Backend`] when the queue cannot be written.
    async fn reap_lock_unchanged(
        &self,
        name: &str,
        fencing_token: u64,
        heartbeat_at_ms: i64,
    ) -> Result<bool, EngineError> {
        let _ = (name, fencing_token, heartbeat_at_ms);
        Ok(false)
    }
}
