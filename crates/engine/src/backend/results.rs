//! [`QueueResults`]: the queue's side of exactly-once result application ([`crate::ingest`]):
//! results not yet applied, and the fenced acknowledgement that they were.

use std::collections::HashSet;

use crate::error::EngineError;
use crate::job::Job;

use super::QueueCore;

/// The results the control plane has still to apply. A terminal [`QueueCore::finish`] (or a
/// reap to `stale`) makes a job pending; [`Self::ack_result`], fenced on the attempt's token,
/// makes it applied.
///
/// # Errors
/// Every call returns [`EngineError::Backend`] when the queue cannot be read or written.
#[async_trait::async_trait]
pub trait QueueResults: QueueCore {
    /// Jobs that reached a terminal state (or `stale`) and whose result the control plane has
    /// not acknowledged yet, oldest first, at most `limit`.
    async fn pending_results(&self, limit: usize) -> Result<Vec<Job>, EngineError>;

    /// [`Self::pending_results`] passing over the jobs whose ids are in `skip` (results the
    /// control plane is backing off from, `ingest::Ingestion`): up to `limit` others, oldest
    /// first, so results that cannot be applied yet never hide newer ones. Default: reads
    /// `limit + skip.len()` and filters.
    ///
    /// # Errors
    /// As [`Self::pending_results`].
    async fn pending_results_skipping(
        &self,
        limit: usize,
        skip: &HashSet<String>,
    ) -> Result<Vec<Job>, EngineError> {
        let jobs = self
            .pending_results(limit.saturating_add(skip.len()))
            .await?;
        Ok(jobs
            .into_iter()
            .filter(|j| !skip.contains(&j.id))
            .take(limit)
            .collect())
    }

    /// The control plane applied this job's result under `fencing_token`: stop listing it in
    /// `pending_results`, fenced like a transition. When the job's current token differs (it was
    /// retried or re-leased since `pending_results` read it, and may already hold a newer
    /// attempt's result), nothing changes and the reply is `false`: the newer result stays
    /// pending. Errors with [`EngineError::NotFound`] when the id is unknown.
    async fn ack_result(&self, job_id: &str, fencing_token: u64) -> Result<bool, EngineError>;

    /// Puts a finished job whose result is pending under `fencing_token` back in the queue to run
    /// again, instead of applying that result: state `queued`, due now, its attempts counted so
    /// far kept (the attempt that ran is one of them), `error` = `reason`, the result no longer
    /// pending. What ingestion does with an idempotent job whose uploaded outputs expired before
    /// they could be delivered ([`crate::ingest`], issue 32 item 6). Returns false, changing
    /// nothing, when the job's token is not `fencing_token` or its result is not pending.
    /// Default: false (ingestion then applies the result as failed).
    ///
    /// # Errors
    /// [`EngineError::NotFound`] for an unknown job; [`EngineError::Backend`] as every call.
    async fn rerun_result(
        &self,
        job_id: &str,
        fencing_token: u64,
        reason: &str,
    ) -> Result<bool, EngineError> {
        let _ = (job_id, fencing_token, reason);
        Ok(false)
    }
}
