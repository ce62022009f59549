//! One leased attempt: the lease a handler sees ([`JobLease`]), its per-job heartbeat, and its
//! fenced end (finish through the engine policy, or hand-back).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use apalis_core::task::Task;
use apalis_core::task::from_request::FromRequest;
use futures::task::AtomicWaker;
use skillforge_engine::policy::finish_for;
use skillforge_engine::worker::{LeaseSignals, heartbeat_loop};
use skillforge_engine::{FinishReply, LeasedJob, QueueBackend, WorkerIdentity};
use skillforge_runner::{ExitClass, RunOutcome};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

/// The lease a task runs under, as a handler sees it.
///
/// Every task the adapter yields carries one in its data; take it as a handler argument
/// (`async fn handle(args: A, lease: JobLease) -> ...`). The lease is renewed by the adapter's
/// layer, not by the handler.
#[derive(Debug, Clone)]
pub struct JobLease {
    /// The skillforge job id (UUID v7 text); the apalis `TaskId` is `<job_id>:<fencing_token>`.
    pub job_id: String,
    /// The lease's fencing token: the finish of this attempt is applied only while the job's
    /// current token is this one.
    pub fencing_token: u64,
    /// This attempt's number, 1-based (a stale recovery counted as an attempt).
    pub attempt: u32,
    /// Attempts the job may use in total.
    pub max_attempts: u32,
    /// The skillforge queue it was leased from.
    pub queue: String,
    /// Who holds the lease: the apalis worker's name plus a random suffix, host and pid.
    pub worker: WorkerIdentity,
    /// Heartbeat period of the lease.
    pub heartbeat: Duration,
    /// The lease is stale after this long without a heartbeat.
    pub stale_after: Duration,
    /// Wall-clock budget of the attempt; the handler is stopped after it.
    pub timeout: Duration,
    cancel: CancellationToken,
}

impl JobLease {
    /// True once the handler is being aborted: an operator cancelled the job, or the lease was
    /// lost (reaped as stale and possibly re-leased elsewhere).
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Completes when [`Self::is_cancelled`] becomes true. The adapter drops the handler's
    /// future at that moment anyway; this is for work the handler spawned itself.
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await;
    }
}

/// A task handed to a handler that does not carry a skillforge lease (it did not come from a
/// [`SkillforgeBackend`](crate::SkillforgeBackend)).
#[derive(Debug, thiserror::Error)]
#[error("task carries no skillforge lease (was it polled from a SkillforgeBackend?)")]
pub struct MissingLease;

impl<Args: Sync> FromRequest<Task<Args>> for JobLease {
    type Error = MissingLease;

    async fn from_request(req: &Task<Args>) -> Result<Self, Self::Error> {
        req.data().get::<JobLease>().cloned().ok_or(MissingLease)
    }
}

/// Counts of what the adapter's attempts ended as, shared by every clone of a backend.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct AdapterReport {
    /// Attempts whose fenced finish was applied.
    pub finished: u64,
    /// Attempts whose finish was rejected by fencing (the lease had been superseded).
    pub fenced: u64,
    /// Leased jobs handed back (worker stopping before they ran, or their task dropped).
    pub released: u64,
    /// Finishes that could not be delivered (queue unreachable); the reaper recovers those jobs.
    pub undelivered: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    finished: AtomicU64,
    fenced: AtomicU64,
    released: AtomicU64,
    undelivered: AtomicU64,
    /// Hand-backs of dropped attempts still in flight (spawned from `Drop`), for `settle`.
    pending: Mutex<Vec<JoinHandle<()>>>,
}

impl Counters {
    /// Remembers a spawned hand-back (finished ones are pruned on the way).
    fn track(&self, handle: JoinHandle<()>) {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        pending.retain(|h| !h.is_finished());
        pending.push(handle);
    }

    /// Waits for every hand-back spawned so far (and any spawned meanwhile) to end.
    pub(crate) async fn settle(&self) {
        loop {
            let batch: Vec<_> =
                std::mem::take(&mut *self.pending.lock().unwrap_or_else(PoisonError::into_inner));
            if batch.is_empty() {
                return;
            }
            for handle in batch {
                if let Err(e) = handle.await {
                    warn!(error = %e, "hand-back task failed; the reaper will recover its job");
                }
            }
        }
    }

    pub(crate) fn report(&self) -> AdapterReport {
        AdapterReport {
            finished: self.finished.load(Ordering::Relaxed),
            fenced: self.fenced.load(Ordering::Relaxed),
            released: self.released.load(Ordering::Relaxed),
            undelivered: self.undelivered.load(Ordering::Relaxed),
        }
    }
}

/// Lease slots of one worker: jobs leased and not yet settled, at most `limit`.
#[derive(Debug)]
pub(crate) struct Slots {
    limit: usize,
    used: AtomicUsize,
    waker: AtomicWaker,
}

impl Slots {
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            limit: limit.max(1),
            used: AtomicUsize::new(0),
            waker: AtomicWaker::new(),
        }
    }

    pub(crate) fn free(&self) -> usize {
        self.limit.saturating_sub(self.used.load(Ordering::SeqCst))
    }

    /// Registers the poller to wake when a slot frees.
    pub(crate) fn register(&self, waker: &std::task::Waker) {
        self.waker.register(waker);
    }

    fn take(&self) {
        self.used.fetch_add(1, Ordering::SeqCst);
    }

    fn give(&self) {
        self.used.fetch_sub(1, Ordering::SeqCst);
        self.waker.wake();
    }
}

/// How a handler's run ended, before the engine policy turns it into a [`skillforge_engine::Finish`].
#[derive(Debug)]
pub(crate) enum Verdict {
    /// `Ok` ⇒ `succeeded`.
    Passed,
    /// `Err` ⇒ queued with backoff, or `dead` after the last attempt (or `failed` at once when the
    /// spec has `retry_failed_runs = false`).
    Failed(String),
    /// The attempt's `timeout` fired ⇒ like `Failed` (retryable).
    TimedOut,
    /// Aborted (operator cancel ⇒ `cancelled`; lost lease ⇒ whatever, the finish is fenced).
    Aborted,
    /// Could not run at all (payload does not decode, apalis `AbortError`) ⇒ `failed`, no retry.
    Refused(String),
}

/// One leased job from lease to settlement. Holds a lease slot and the per-job heartbeat; when
/// dropped unsettled (its task was dropped), hands the job back.
pub(crate) struct Attempt {
    backend: Arc<dyn QueueBackend>,
    pub(crate) leased: LeasedJob,
    pub(crate) lease: JobLease,
    operator_cancel: Arc<AtomicBool>,
    lease_lost: Arc<AtomicBool>,
    stop: CancellationToken,
    heartbeat: Option<JoinHandle<()>>,
    slots: Arc<Slots>,
    counters: Arc<Counters>,
    settled: bool,
}

impl std::fmt::Debug for Attempt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attempt")
            .field("lease", &self.lease)
            .field("settled", &self.settled)
            .finish()
    }
}

impl Attempt {
    /// Takes a slot and starts the per-job heartbeat at once (a job waiting in the adapter's
    /// buffer or behind an apalis concurrency layer keeps its lease).
    ///
    /// Must run inside a tokio runtime.
    pub(crate) fn start(
        backend: Arc<dyn QueueBackend>,
        leased: LeasedJob,
        worker: WorkerIdentity,
        slots: Arc<Slots>,
        counters: Arc<Counters>,
    ) -> Self {
        slots.take();
        let spec = &leased.job.spec;
        let cancel = CancellationToken::new();
        let lease = JobLease {
            job_id: leased.job.id.clone(),
            fencing_token: leased.fencing_token,
            attempt: leased.job.attempts,
            max_attempts: spec.max_attempts,
            queue: spec.queue.clone(),
            worker,
            heartbeat: Duration::from_millis(spec.heartbeat_ms.max(50)),
            stale_after: Duration::from_millis(spec.stale_after_ms),
            timeout: Duration::from_millis(spec.timeout_ms),
            cancel: cancel.clone(),
        };
        let signals = LeaseSignals::new(cancel);
        let (operator_cancel, lease_lost) = (
            signals.cancelled_by_operator.clone(),
            signals.lease_lost.clone(),
        );
        let stop = CancellationToken::new();
        let heartbeat = tokio::spawn(heartbeat_loop(
            backend.clone(),
            lease.job_id.clone(),
            lease.fencing_token,
            lease.heartbeat,
            signals,
            Arc::default(),
            stop.clone(),
        ));
        Self {
            backend,
            leased,
            lease,
            operator_cancel,
            lease_lost,
            stop,
            heartbeat: Some(heartbeat),
            slots,
            counters,
            settled: false,
        }
    }

    /// Why the handler is being aborted, when it is.
    pub(crate) fn abort_reason(&self) -> Option<&'static str> {
        if self.operator_cancel.load(Ordering::SeqCst) {
            Some("cancelled by an operator")
        } else if self.lease_lost.load(Ordering::SeqCst) {
            Some("lease lost (stale and reaped)")
        } else if self.lease.is_cancelled() {
            Some("aborted")
        } else {
            None
        }
    }

    /// Stops the heartbeat and waits for it, so no renewal races the finish or release.
    async fn stop_heartbeat(&mut self) {
        self.stop.cancel();
        if let Some(h) = self.heartbeat.take() {
            let _ = h.await;
        }
    }

    /// Sends the attempt's fenced finish, decided by the engine policy
    /// ([`finish_for`]) from `verdict`. Returns the reply, `None` when it could not be delivered.
    pub(crate) async fn finish(mut self, verdict: Verdict) -> Option<FinishReply> {
        self.stop_heartbeat().await;
        self.settled = true;
        let job = &self.leased.job;
        let operator_cancel = self.operator_cancel.load(Ordering::SeqCst);
        let result = match verdict {
            Verdict::Passed => Ok(outcome(ExitClass::Passed, String::new())),
            Verdict::Failed(error) => Ok(outcome(ExitClass::Failed { code: 1 }, error)),
            Verdict::TimedOut => Ok(outcome(ExitClass::TimedOut, String::new())),
            Verdict::Aborted => Ok(outcome(ExitClass::Killed { signal: 9 }, String::new())),
            Verdict::Refused(error) => Err(error),
        };
        let finish = finish_for(
            job.attempts,
            job.spec.max_attempts,
            result,
            operator_cancel,
            job.spec.retry_failed_runs,
        );
        match self
            .backend
            .finish(&job.id, self.leased.fencing_token, &finish)
            .await
        {
            Ok(FinishReply::Applied(state)) => {
                self.counters.finished.fetch_add(1, Ordering::Relaxed);
                info!(job_id = %job.id, fencing_token = self.leased.fencing_token, attempt = job.attempts,
                      state = %state, result = %finish.attempt_result, retry_delay_ms = finish.retry_delay_ms,
                      "job finished");
                Some(FinishReply::Applied(state))
            }
            Ok(FinishReply::Fenced { current_token }) => {
                self.counters.fenced.fetch_add(1, Ordering::Relaxed);
                warn!(job_id = %job.id, fencing_token = self.leased.fencing_token, current_token,
                      "result rejected by fencing: this lease was superseded");
                Some(FinishReply::Fenced { current_token })
            }
            Err(e) => {
                self.counters.undelivered.fetch_add(1, Ordering::Relaxed);
                warn!(job_id = %job.id, error = %e, "result not delivered; the reaper will recover the job");
                None
            }
        }
    }

    /// Hands the job back (fenced): queued, due now, the attempt refunded.
    pub(crate) async fn release(mut self) {
        self.stop_heartbeat().await;
        self.settled = true;
        release(&*self.backend, &self.leased, &self.counters).await;
    }
}

async fn release(backend: &dyn QueueBackend, leased: &LeasedJob, counters: &Counters) {
    match backend.release(&leased.job.id, leased.fencing_token).await {
        Ok(true) => {
            counters.released.fetch_add(1, Ordering::Relaxed);
            info!(job_id = %leased.job.id, "job handed back before it ran");
        }
        Ok(false) => {
            warn!(job_id = %leased.job.id, "job not handed back: lease already superseded")
        }
        Err(e) => {
            warn!(job_id = %leased.job.id, error = %e, "job not handed back; the reaper will recover it")
        }
    }
}

impl Drop for Attempt {
    fn drop(&mut self) {
        self.stop.cancel();
        if !self.settled {
            // Dropped without a result (its task or worker future was dropped): hand it back now
            // rather than leave it to go stale.
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => {
                    let backend = self.backend.clone();
                    let leased = self.leased.clone();
                    let counters = self.counters.clone();
                    let tracker = counters.clone();
                    tracker.track(
                        rt.spawn(async move { release(&*backend, &leased, &counters).await }),
                    );
                }
                Err(_) => {
                    debug!(job_id = %self.leased.job.id, "attempt dropped outside a runtime; the reaper will recover it")
                }
            }
        }
        self.slots.give();
    }
}

/// Where an [`Attempt`] rides in a task's data until the adapter's layer takes it.
#[derive(Debug, Clone)]
pub(crate) struct AttemptSlot(Arc<Mutex<Option<Attempt>>>);

impl AttemptSlot {
    pub(crate) fn new(attempt: Attempt) -> Self {
        Self(Arc::new(Mutex::new(Some(attempt))))
    }

    pub(crate) fn take(&self) -> Option<Attempt> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

fn outcome(exit: ExitClass, error: String) -> RunOutcome {
    RunOutcome {
        exit,
        exit_code: None,
        duration_ms: 0,
        stdout_tail: String::new(),
        stderr_tail: error,
        detail: serde_json::json!({ "runner": "apalis" }),
    }
}
