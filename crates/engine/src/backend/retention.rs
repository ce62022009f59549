//! [`QueueRetention`]: bounded pruning of finished jobs and the tombstones they leave
//! ([`crate::retention`] decides the rules and runs the passes).

use crate::error::EngineError;
use crate::retention::{PruneBatch, PruneRule, Tombstone};

use super::QueueCore;

/// Removal of finished, acknowledged jobs by class and age, each leaving a [`Tombstone`] that
/// keeps its idempotency key and says when and why it went.
///
/// # Errors
/// Every call returns [`EngineError::Backend`] when the queue cannot be read or written.
#[async_trait::async_trait]
pub trait QueueRetention: QueueCore {
    /// Prunes (see [`crate::retention`]) at most `limit` prunable jobs of `rule.class` selected by
    /// `rule.jobs` (oldest finish first), each leaving a [`Tombstone`], and at most `limit`
    /// tombstones of the class selected by `rule.tombstones` (oldest prune first; an expired
    /// tombstone frees its idempotency key). Atomic per call: a job is removed with its history,
    /// output tails and index entries, or not at all. Never removes a job that is not terminal
    /// or whose latest result is not acknowledged
    /// ([`QueueResults::ack_result`](super::QueueResults::ack_result)).
    async fn prune(&self, rule: &PruneRule, limit: usize) -> Result<PruneBatch, EngineError>;

    /// How many jobs and tombstones [`Self::prune`] would remove now under `rule`, without a
    /// limit, removing nothing.
    async fn prune_count(&self, rule: &PruneRule) -> Result<(u64, u64), EngineError>;

    /// The tombstone of a pruned job, `None` when the id names no pruned job (or its tombstone
    /// expired).
    async fn tombstone(&self, job_id: &str) -> Result<Option<Tombstone>, EngineError>;
}
