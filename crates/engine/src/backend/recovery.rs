//! [`QueueRecovery`]: what the reaper ([`crate::reaper`]) needs to find leases whose worker
//! stopped heartbeating and apply the policy's transition to them.

use std::time::Duration;

use crate::error::EngineError;
use crate::job::ExpiredLease;

use super::QueueCore;

/// Transition applied by the reaper to an expired lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReapAction {
    /// Re-queue after this delay (idempotent stage with attempts left).
    Requeue {
        /// Backoff before the next attempt.
        delay: Duration,
    },
    /// Park as `stale` with `recovery_available` (non-idempotent stage).
    RecoveryAvailable,
    /// Dead-letter (no attempts left).
    Dead,
    /// Mark `cancelled` (an operator asked to cancel before the worker died).
    Cancelled,
}

impl std::fmt::Display for ReapAction {
    /// The action in words for logs: `requeue after 1.5s`, `park stale (recovery available)`,
    /// `dead-letter`, `cancel`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReapAction::Requeue { delay } => write!(f, "requeue after {:.1}s", delay.as_secs_f64()),
            ReapAction::RecoveryAvailable => f.write_str("park stale (recovery available)"),
            ReapAction::Dead => f.write_str("dead-letter"),
            ReapAction::Cancelled => f.write_str("cancel"),
        }
    }
}

/// Stale recovery of job leases: list the expired ones, reap each fenced on its token (and, on a
/// queue whose processes do not share one clock, on its heartbeat being unchanged). What becomes
/// of a lease is decided by [`crate::policy`], never here. Named locks are reaped through
/// [`QueueLocks`](super::QueueLocks).
///
/// # Errors
/// Every call that returns a `Result` returns [`EngineError::Backend`] when the queue cannot be
/// read or written.
#[async_trait::async_trait]
pub trait QueueRecovery: QueueCore {
    /// Leases whose heartbeat is older than their job's `stale_after`, up to `limit`.
    async fn expired_leases(&self, limit: usize) -> Result<Vec<ExpiredLease>, EngineError>;

    /// Applies `action` to an expired lease, fenced on its token and re-checking, atomically,
    /// that the heartbeat is still past `stale_after` (a heartbeat that arrived meanwhile wins).
    /// Returns whether it was applied.
    async fn reap(&self, lease: &ExpiredLease, action: &ReapAction) -> Result<bool, EngineError>;

    /// [`Self::reap`] judged by a reaper's own monotonic clock instead of this backend's wall
    /// clock: fenced on the lease's token and on its heartbeat still being `heartbeat_at_ms`,
    /// whatever its deadline says (a reaper whose wall clock stepped back would otherwise wait
    /// out the step; `reaper::StaleWatch`). Returns whether it reaped. Default: false.
    ///
    /// # Errors
    /// [`EngineError::Backend`] when the queue cannot be written.
    async fn reap_unchanged(
        &self,
        lease: &ExpiredLease,
        action: &ReapAction,
        heartbeat_at_ms: i64,
    ) -> Result<bool, EngineError> {
        let _ = (lease, action, heartbeat_at_ms);
        Ok(false)
    }

    /// Whether every process of this queue reads one clock for lease deadlines (Redis: the
    /// server's `TIME`). False for the embedded queue, whose processes stamp heartbeats and
    /// judge deadlines with their own wall clocks: there a long-running reaper also confirms a
    /// lease's staleness on its monotonic clock (`reaper::StaleWatch`), so a wall-clock step
    /// does not reap live, heartbeating work. Default: false.
    fn clock_is_shared(&self) -> bool {
        false
    }
}
