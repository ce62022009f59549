//! [`QueueCore`]: the job state machine every backend implements and every other queue trait
//! builds on: a job goes in (`enqueue`), is leased, heartbeated and finished or released by a
//! worker, and can be read back (`get`).

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::error::EngineError;
use crate::job::{
    Enqueued, Finish, FinishReply, HeartbeatReply, Job, JobSpec, LeasedJob, WorkerIdentity,
};

/// The core of a job queue: durable jobs with per-job leases, heartbeats and fencing tokens.
///
/// This is what a submitter and a worker need to run a job once: store it (`enqueue`), lease it
/// (`lease`, `lease_or_stop`), keep the lease alive (`heartbeat`), apply the attempt's result
/// (`finish`, `finish_and_lease`) or hand the job back (`release`), and read a job (`get`). What
/// else a queue does is a capability trait with this one as its supertrait (see
/// [`crate::backend`]); [`crate::QueueBackend`] is all of them together.
///
/// Every mutating call that names a `fencing_token` must be atomic and must do nothing (and
/// say so) when the job's current token differs or the job is not `running`. Times in ms are
/// since the Unix epoch ([`Self::now_ms`] reads the backend's clock).
///
/// # Errors
/// Every call that returns a `Result` returns [`EngineError::Backend`] when the queue cannot be
/// read or written; a call that can return another variant says so.
#[async_trait::async_trait]
pub trait QueueCore: Send + Sync + 'static {
    /// `"sqlite"` or `"redis"`.
    fn name(&self) -> &'static str;

    /// Stores a new job in state `queued`. When `spec.idempotency_key` was seen before,
    /// returns the existing job id with `created: false` and stores nothing; that job may have
    /// been pruned since (its tombstone keeps the key for the class's retention).
    async fn enqueue(&self, spec: &JobSpec) -> Result<Enqueued, EngineError>;

    /// Leases up to `max` due jobs from `queue` for `worker`, oldest first: state `running`,
    /// attempts + 1, fencing token + 1, lease set, a new attempt record. When none is due,
    /// waits up to `wait` for one (an enqueue wakes idle waiters at once) and returns empty
    /// on expiry.
    async fn lease(
        &self,
        queue: &str,
        worker: &WorkerIdentity,
        max: usize,
        wait: Duration,
    ) -> Result<Vec<LeasedJob>, EngineError>;

    /// Leases exactly like [`Self::lease`], except that a wait for work ends, empty, as soon as
    /// `stop` fires: a worker told to stop does not sit out the rest of `wait` on an empty
    /// queue. Only the waiting is cut short, never a lease in progress (jobs it leased are
    /// returned). The default ignores `stop` (correct, only slower to stop); both backends cut
    /// the wait.
    async fn lease_or_stop(
        &self,
        queue: &str,
        worker: &WorkerIdentity,
        max: usize,
        wait: Duration,
        stop: &CancellationToken,
    ) -> Result<Vec<LeasedJob>, EngineError> {
        let _ = stop;
        self.lease(queue, worker, max, wait).await
    }

    /// Renews the lease's heartbeat (fenced).
    async fn heartbeat(
        &self,
        job_id: &str,
        fencing_token: u64,
    ) -> Result<HeartbeatReply, EngineError>;

    /// Applies a finished attempt (fenced): records outcome and attempt result, moves the job
    /// to `finish.next` (a `queued` retry becomes due after `finish.retry_delay_ms`), clears the
    /// lease, and, for a terminal state, makes the job visible to
    /// [`QueueResults::pending_results`](super::QueueResults::pending_results).
    async fn finish(
        &self,
        job_id: &str,
        fencing_token: u64,
        finish: &Finish,
    ) -> Result<FinishReply, EngineError>;

    /// Applies a finished attempt exactly like [`Self::finish`], then leases at most one due job
    /// from `queue` for `worker` (like [`Self::lease`] with `max` 1, without waiting), so a worker
    /// slot refills without a separate round trip. The lease part runs whatever the finish's
    /// reply (a fenced finish still frees the worker's slot).
    ///
    /// The default calls `finish` then `lease`; a lease error after an applied finish is logged
    /// and reported as "no next job" (the finish reply is never lost). Backends override it to do
    /// both in one round trip / transaction; then an error means the finish's fate is unknown, as
    /// with a failed `finish` (it is idempotent per token, and the reaper recovers the job).
    async fn finish_and_lease(
        &self,
        job_id: &str,
        fencing_token: u64,
        finish: &Finish,
        queue: &str,
        worker: &WorkerIdentity,
    ) -> Result<(FinishReply, Option<LeasedJob>), EngineError> {
        let reply = self.finish(job_id, fencing_token, finish).await?;
        let next = match self.lease(queue, worker, 1, Duration::ZERO).await {
            Ok(jobs) => jobs.into_iter().next(),
            Err(e) => {
                tracing::debug!(queue = %queue, error = %e, "lease after finish failed");
                None
            }
        };
        Ok((reply, next))
    }

    /// Hands a running job back (graceful shutdown, fenced): state `queued`, due now, the
    /// attempt refunded (it was interrupted by the operator, not by the job), attempt result
    /// `released`. Returns false when the lease was no longer ours.
    async fn release(&self, job_id: &str, fencing_token: u64) -> Result<bool, EngineError>;

    /// One job, or `None` when the id is unknown (or the job was pruned: see
    /// [`QueueRetention::tombstone`](super::QueueRetention::tombstone)).
    async fn get(&self, job_id: &str) -> Result<Option<Job>, EngineError>;

    /// The backend's clock in ms since the Unix epoch (Redis: server `TIME`), so lease ages are
    /// computed against the same clock that stamped them.
    async fn now_ms(&self) -> Result<i64, EngineError>;
}
