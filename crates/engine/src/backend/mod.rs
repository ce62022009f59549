//! The queue backend trait: a fenced job state machine that both the SQLite and Redis backends implement.
//!
//! Backends are deliberately dumb: they store jobs and apply transitions atomically, fenced on
//! the lease's token. Every policy (attempt counting, backoff with jitter, what a stale lease
//! becomes) is decided once in the engine (`policy`), so both backends behave identically.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::error::EngineError;
use crate::transfer::TransferArea;
use crate::output::{NewOutput, OutputChunk};
use crate::job::{
    CancelReply, Enqueued, ExpiredLease, Finish, FinishReply, HeartbeatReply, Job, JobSpec,
    JobState, LeaseView, LeasedJob, LockAcquire, WorkerIdentity,
};
use crate::retention::{PruneBatch, PruneRule, Tombstone};

/// Most times a group-commit task yields to the runtime while collecting one batch.
const BATCH_YIELDS: usize = 8;

/// Collects one group-commit batch (used by both backends' finish tasks): `first`, then
/// whatever else is queued, up to `max`. Between drains it yields to the runtime (up to
/// [`BATCH_YIELDS`] times, and only while a yield brought more requests), so that the slots just
/// woken by the previous batch's replies, which finish again within microseconds when their
/// jobs are short, join this batch instead of forming the next one: fewer, fuller transactions
/// or script calls for the same work. An isolated request costs one extra yield.
pub(crate) async fn collect_batch<T>(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<T>,
    first: T,
    max: usize,
) -> Vec<T> {
    let mut batch = vec![first];
    let drain = |rx: &mut tokio::sync::mpsc::UnboundedReceiver<T>, batch: &mut Vec<T>| {
        while batch.len() < max {
            match rx.try_recv() {
                Ok(r) => batch.push(r),
                Err(_) => break,
            }
        }
    };
    drain(rx, &mut batch);
    for _ in 0..BATCH_YIELDS {
        if batch.len() >= max {
            break;
        }
        let before = batch.len();
        tokio::task::yield_now().await;
        drain(rx, &mut batch);
        if batch.len() == before {
            break;
        }
    }
    batch
}

/// Resolves when `stop` fires; never without one (the wait of a plain `lease`).
pub(crate) async fn until_stopped(stop: Option<&CancellationToken>) {
    match stop {
        Some(stop) => stop.cancelled().await,
        None => std::future::pending().await,
    }
}

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

/// A job queue with per-job leases, heartbeats and fencing tokens.
///
/// Every mutating call that names a `fencing_token` must be atomic and must do nothing (and
/// say so) when the job's current token differs or the job is not `running`.
#[async_trait::async_trait]
pub trait QueueBackend: Send + Sync + 'static {
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

    /// A counter that moves whenever some job's state may have changed (a finish, cancel, reap,
    /// enqueue; on the embedded queue also any other process's commit to the file; on Redis any
    /// process's finish, cancel or reap). Read it
    /// *before* reading the jobs you wait for, then pass it to [`Self::changed_since`], so a
    /// change between the read and the wait is not missed. The default is a constant `0`.
    fn change_seq(&self) -> u64 {
        0
    }

    /// Returns once [`Self::change_seq`] moved past `seen`, or after `timeout`, whichever is
    /// first. Spurious returns are allowed (callers re-read what they wait for). The embedded
    /// queue wakes at once for a change of this process and within its `data_version` poll
    /// (1–2 ms) for another process's commit; Redis wakes on a message on the namespace's
    /// `changed` channel, which every script ending a job publishes (any process's finish,
    /// cancel, reap), within a round trip. A lost notification (Redis restarted, a subscription
    /// being set up) costs at most `timeout`: pass a bounded one and re-read. The default, for a
    /// backend that cannot tell, sleeps `timeout`: the caller polls.
    async fn changed_since(&self, seen: u64, timeout: Duration) {
        let _ = seen;
        tokio::time::sleep(timeout).await;
    }

    /// [`Self::changed_since`] for a caller that needs only this process's changes at once: a
    /// waiter whose jobs all run in its own in-process worker, that worker's idle leases while
    /// no other process relies on it. The embedded queue then does not run its `data_version`
    /// poll (every 1–2 ms) for this wait: this process's changes wake it at once, another
    /// process's only while some other wait keeps the poll running, else at `timeout` (pass a
    /// short one and re-read). The default is [`Self::changed_since`].
    async fn changed_here_since(&self, seen: u64, timeout: Duration) {
        self.changed_since(seen, timeout).await;
    }

    /// Appends live output of a running attempt ([`crate::output`]), fenced: nothing is written
    /// (and the reply is `false`) unless the job is `running` under `fencing_token`. A job keeps
    /// at most [`crate::output::OUTPUT_CAP_CHUNKS`] chunks, the oldest dropped first.
    async fn append_output(&self, job_id: &str, fencing_token: u64, chunks: &[NewOutput]) -> Result<bool, EngineError>;

    /// A job's kept output chunks after the chunk whose cursor is `after` (`None`: from the
    /// oldest kept), oldest first, at most `limit`. Empty for an unknown job or one that wrote
    /// nothing (or whose output was trimmed away).
    async fn read_output(&self, job_id: &str, after: Option<&str>, limit: usize) -> Result<Vec<OutputChunk>, EngineError>;

    /// Returns once job `job_id` may have output after the chunk whose cursor is `after`
    /// (`None`: any output), or [`Self::change_seq`] moved past `seen` (e.g. the job ended), or
    /// after `timeout`, whichever is first; spurious returns are allowed (callers re-read). For
    /// `jobs logs --follow`. Redis blocks on the job's output stream (`XREAD BLOCK`, on a
    /// dedicated connection) beside the `changed` wait, so another process's append wakes it
    /// within a round trip; a connection lost to a Redis restart costs one short pause and is
    /// replaced on the next call. The default is [`Self::changed_since`]: the embedded queue
    /// signals every append (of this process at once, of another within its `data_version`
    /// poll).
    async fn output_since(&self, job_id: &str, after: Option<&str>, seen: u64, timeout: Duration) {
        let _ = (job_id, after);
        self.changed_since(seen, timeout).await;
    }

    /// The job ended: keeps only its last [`crate::output::OUTPUT_TAIL_CHUNKS`] chunks.
    async fn trim_output(&self, job_id: &str) -> Result<(), EngineError>;

    /// Renews the lease's heartbeat (fenced).
    async fn heartbeat(&self, job_id: &str, fencing_token: u64)
    -> Result<HeartbeatReply, EngineError>;

    /// Applies a finished attempt (fenced): records outcome and attempt result, moves the job
    /// to `finish.next` (a `queued` retry becomes due after `finish.retry_delay_ms`), clears the
    /// lease, and, for a terminal state, makes the job visible to [`Self::pending_results`].
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

    /// Leases whose heartbeat is older than their job's `stale_after`, up to `limit`.
    async fn expired_leases(&self, limit: usize) -> Result<Vec<ExpiredLease>, EngineError>;

    /// Applies `action` to an expired lease, fenced on its token and re-checking, atomically,
    /// that the heartbeat is still past `stale_after` (a heartbeat that arrived meanwhile wins).
    /// Returns whether it was applied.
    async fn reap(
        &self,
        lease: &ExpiredLease,
        action: &ReapAction,
    ) -> Result<bool, EngineError>;

    /// Cancels a job: queued or stale ⇒ `cancelled` now; running ⇒ `cancel_requested`
    /// (the worker sees it at its next heartbeat).
    async fn cancel(&self, job_id: &str) -> Result<CancelReply, EngineError>;

    /// Puts a `failed`, `dead`, `cancelled` or `stale` job back in the queue with a fresh
    /// attempt budget (attempt history kept). Errors with [`EngineError::InvalidState`] otherwise.
    async fn retry(&self, job_id: &str) -> Result<(), EngineError>;

    /// [`QueueBackend::retry`] that first replaces the job's payload with `payload` (the same
    /// runner kind's JSON), in the same atomic step: `jobs retry --env`, and a keyed submit
    /// starting a new attempt of a job that could not run in the environment it was given. The
    /// attempt history is kept. A backend without it (a test wrapper) refuses with
    /// [`EngineError::Config`].
    ///
    /// # Errors
    /// As [`QueueBackend::retry`]; nothing changes on an error.
    async fn retry_with_payload(&self, job_id: &str, payload: &serde_json::Value) -> Result<(), EngineError> {
        let _ = payload;
        Err(EngineError::Config(format!("this queue backend cannot replace the payload of job `{job_id}`")))
    }

    /// One job, or `None` when the id is unknown (or the job was pruned: see [`Self::tombstone`]).
    async fn get(&self, job_id: &str) -> Result<Option<Job>, EngineError>;

    /// Jobs, newest first, optionally filtered by state, at most `limit`.
    async fn list(&self, state: Option<JobState>, limit: usize) -> Result<Vec<Job>, EngineError>;

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
    async fn pending_results_skipping(&self, limit: usize, skip: &std::collections::HashSet<String>) -> Result<Vec<Job>, EngineError> {
        let jobs = self.pending_results(limit.saturating_add(skip.len())).await?;
        Ok(jobs.into_iter().filter(|j| !skip.contains(&j.id)).take(limit).collect())
    }

    /// The control plane applied this job's result under `fencing_token`: stop listing it in
    /// `pending_results`, fenced like a transition. When the job's current token differs (it was
    /// retried or re-leased since `pending_results` read it, and may already hold a newer
    /// attempt's result), nothing changes and the reply is `false`: the newer result stays
    /// pending. Errors with [`EngineError::NotFound`] when the id is unknown.
    async fn ack_result(&self, job_id: &str, fencing_token: u64) -> Result<bool, EngineError>;

    /// Prunes (see [`crate::retention`]) at most `limit` prunable jobs of `rule.class` selected by
    /// `rule.jobs` (oldest finish first), each leaving a [`Tombstone`], and at most `limit`
    /// tombstones of the class selected by `rule.tombstones` (oldest prune first; an expired
    /// tombstone frees its idempotency key). Atomic per call: a job is removed with its history,
    /// output tails and index entries, or not at all. Never removes a job that is not terminal
    /// or whose latest result is not acknowledged ([`Self::ack_result`]).
    async fn prune(&self, rule: &PruneRule, limit: usize) -> Result<PruneBatch, EngineError>;

    /// How many jobs and tombstones [`Self::prune`] would remove now under `rule`, without a
    /// limit, removing nothing.
    async fn prune_count(&self, rule: &PruneRule) -> Result<(u64, u64), EngineError>;

    /// The tombstone of a pruned job, `None` when the id names no pruned job (or its tombstone
    /// expired).
    async fn tombstone(&self, job_id: &str) -> Result<Option<Tombstone>, EngineError>;

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

    /// [`Self::reap`] judged by a reaper's own monotonic clock instead of this backend's wall
    /// clock: fenced on the lease's token and on its heartbeat still being `heartbeat_at_ms`,
    /// whatever its deadline says (a reaper whose wall clock stepped back would otherwise wait
    /// out the step; `reaper::StaleWatch`). Returns whether it reaped. Default: false.
    ///
    /// # Errors
    /// [`EngineError::Backend`] when the queue cannot be written.
    async fn reap_unchanged(&self, lease: &ExpiredLease, action: &ReapAction, heartbeat_at_ms: i64) -> Result<bool, EngineError> {
        let _ = (lease, action, heartbeat_at_ms);
        Ok(false)
    }

    /// Frees the named lock `name` if it is still held under `fencing_token` with its heartbeat
    /// at `heartbeat_at_ms` and is past its stale deadline by this backend's clock: the
    /// one-lock reap of a reaper that confirmed the lock's staleness on its own monotonic clock
    /// (`reaper::StaleWatch`). Returns whether it freed it. Default: false (a backend whose
    /// processes share one clock reaps with [`Self::reap_locks`]).
    ///
    /// # Errors
    /// [`EngineError::Backend`] when the queue cannot be written.
    async fn reap_lock(&self, name: &str, fencing_token: u64, heartbeat_at_ms: i64) -> Result<bool, EngineError> {
        let _ = (name, fencing_token, heartbeat_at_ms);
        Ok(false)
    }

    /// Every active job lease and named lock.
    async fn leases(&self) -> Result<Vec<LeaseView>, EngineError>;

    /// The backend's clock in ms since the Unix epoch (Redis: server `TIME`), so lease ages are
    /// computed against the same clock that stamped them.
    async fn now_ms(&self) -> Result<i64, EngineError>;

    /// Whether the queue's data is still the data this backend first saw. Redis keeps a
    /// namespace epoch (a random id written once into an empty namespace); when it is gone or
    /// changed (redis-server restarted without persistence, `FLUSHALL`, another server behind the
    /// URL), every job stored before is lost. Returns the loss once, at the first check that sees
    /// it (later checks compare with the new epoch). The embedded queue is a file that cannot
    /// lose part of itself this way: the default answers `None`.
    async fn check_namespace(&self) -> Result<Option<NamespaceLoss>, EngineError> {
        Ok(None)
    }

    /// Whether every process of this queue reads one clock for lease deadlines (Redis: the
    /// server's `TIME`). False for the embedded queue, whose processes stamp heartbeats and
    /// judge deadlines with their own wall clocks: there a long-running reaper also confirms a
    /// lease's staleness on its monotonic clock (`reaper::StaleWatch`), so a wall-clock step
    /// does not reap live, heartbeating work. Default: false.
    fn clock_is_shared(&self) -> bool {
        false
    }

    /// The namespace epoch this backend knows (Redis: read at connect, replaced when
    /// [`Self::check_namespace`] reports a loss), for a control plane to keep in its store and
    /// compare at its next start. `None` for a backend without one (the embedded queue).
    fn namespace_epoch(&self) -> Option<String> {
        None
    }

    /// [`Self::list`] that skips the records it cannot decode instead of failing: the page of
    /// readable jobs and the unreadable records met on the way (`quarantined_at_ms` = `None`),
    /// so one bad record does not hide every other job. Default: [`Self::list`], none skipped.
    ///
    /// # Errors
    /// [`EngineError::Backend`] when the queue cannot be read at all.
    async fn list_readable(&self, state: Option<JobState>, limit: usize) -> Result<(Vec<Job>, Vec<UnreadableRecord>), EngineError> {
        Ok((self.list(state, limit).await?, Vec::new()))
    }

    /// The quarantined job records (at most `limit`): pending results ingestion could not
    /// decode, set aside so that every other result flows (`jobs list --state broken`).
    /// Default: none (the embedded queue quarantines nothing).
    ///
    /// # Errors
    /// [`EngineError::Backend`] when the queue cannot be read.
    async fn quarantined(&self, limit: usize) -> Result<Vec<UnreadableRecord>, EngineError> {
        let _ = limit;
        Ok(Vec::new())
    }

    /// Sets the running job `job_id` aside as an unreadable record with `reason` when the reaper
    /// cannot reap it (a transition that fails on its record, not on the queue): out of the
    /// lease index into the quarantined records ([`Self::quarantined`]), so it stops failing
    /// every reaper pass. Returns whether this call moved it. Default: false (nothing moved).
    ///
    /// # Errors
    /// [`EngineError::Backend`] when the queue cannot be written.
    async fn quarantine(&self, job_id: &str, reason: &str) -> Result<bool, EngineError> {
        let _ = (job_id, reason);
        Ok(false)
    }

    /// Deletes the quarantined record `job_id` with everything of its job (`jobs purge ID`).
    /// Returns false, deleting nothing, when no such record is quarantined: a readable job is
    /// never purged. Default: false.
    ///
    /// # Errors
    /// [`EngineError::Backend`] when the queue cannot be written.
    async fn purge(&self, job_id: &str) -> Result<bool, EngineError> {
        let _ = job_id;
        Ok(false)
    }

    /// A server setting under which the queue cannot keep its jobs, if any: Redis with a
    /// `maxmemory-policy` other than `noeviction` (keys evicted under memory pressure, jobs
    /// vanish). `worker`, `serve` and `jobs submit` refuse to start on one; every reaper pass
    /// loop re-checks it (every [`crate::reaper::SETTINGS_CHECK_EVERY`]) and logs a change as an
    /// error. The embedded queue has no such setting: the default answers `None`.
    ///
    /// # Errors
    /// [`EngineError::Backend`] when the server cannot be reached.
    async fn check_settings(&self) -> Result<Option<UnsafeSetting>, EngineError> {
        Ok(None)
    }

    /// The queue's transfer area (see [`crate::transfer`]): where a job's input files and
    /// uploaded outputs live by content. Redis: chunked keys with a TTL; the embedded queue: the
    /// blob store next to its file. `None` for a backend that has none (then a job with files
    /// fails on the worker with a message saying so).
    fn transfer_area(&self) -> Option<Arc<dyn TransferArea>> {
        None
    }

    /// Whether every worker of this queue sees the control plane's disk (the embedded queue:
    /// its workers run on the home's host), so a stage may pass paths. False for Redis: a
    /// fleet worker may be another machine, and a stage sends its files through
    /// [`Self::transfer_area`] instead.
    fn shares_disk(&self) -> bool {
        true
    }

    /// Queue names with label requirements (`<queue>@<requirements>`, [`crate::labels`]) that may
    /// hold jobs: workers lease from the ones their labels satisfy. Default: none.
    async fn routes(&self) -> Result<Vec<String>, EngineError> {
        Ok(Vec::new())
    }
}

/// A job record that cannot be decoded: see [`QueueBackend::list_readable`] and
/// [`QueueBackend::quarantined`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnreadableRecord {
    /// The job's id.
    pub job_id: String,
    /// Why it cannot be read (a missing field, a long value's key gone, a malformed value).
    pub reason: String,
    /// When ingestion quarantined it, ms since the Unix epoch (server clock); `None` for a
    /// record met by a listing and not quarantined (yet).
    pub quarantined_at_ms: Option<i64>,
}

/// A server setting the queue cannot keep its jobs under: see [`QueueBackend::check_settings`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsafeSetting {
    /// The setting's name as the server spells it, e.g. `maxmemory-policy`.
    pub setting: String,
    /// Its value now, e.g. `allkeys-lru`.
    pub value: String,
    /// The value skillforge requires, e.g. `noeviction`.
    pub required: String,
    /// What goes wrong under the value now.
    pub why: String,
    /// How to fix it.
    pub fix: String,
}

impl std::fmt::Display for UnsafeSetting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the queue server's `{}` is `{}`: {}; skillforge requires `{}`: set it with {}",
            self.setting, self.value, self.why, self.required, self.fix
        )
    }
}

/// A queue namespace found empty or replaced: see [`QueueBackend::check_namespace`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceLoss {
    /// The namespace (Redis key prefix without its `:`).
    pub namespace: String,
    /// The epoch this process knew.
    pub previous_epoch: String,
    /// The epoch found (or just created, when the namespace had none).
    pub current_epoch: String,
    /// Jobs in the namespace now (0 when it was emptied).
    pub jobs_now: u64,
}

impl std::fmt::Display for NamespaceLoss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the queue namespace `{}` lost its data: epoch `{}` is gone (now `{}`, {} job(s)); every job \
             enqueued before (queued, running, or finished with a result not yet applied) is missing and \
             will never report; its workflow state must be re-dispatched. Was redis-server restarted \
             without persistence, flushed, or is the URL pointing at another server?",
            self.namespace, self.previous_epoch, self.current_epoch, self.jobs_now
        )
    }
}
