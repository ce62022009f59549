//! [`SkillforgeBackend`]: a skillforge queue as an apalis 1.0 `Backend` and `TaskSink`.

use std::collections::VecDeque;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use apalis_core::backend::finalize::Ephemeral;
use apalis_core::backend::{Backend, BackendConfig};
use apalis_core::task::Task;
use apalis_core::task::builder::TaskBuilder;
use apalis_core::task::task_id::TaskId;
use apalis_core::worker::context::WorkerContext;
use futures::Sink;
use futures::future::BoxFuture;
use serde::Serialize;
use serde::de::DeserializeOwned;
use skillforge_engine::{EngineError, Enqueued, JobSpec, QueueBackend, WorkerIdentity};
use tokio::task::JoinHandle;
use tracing::{debug, warn};

use crate::error::AdapterError;
use crate::layer::LeaseLayer;
use crate::lease::{AdapterReport, Attempt, AttemptSlot, Counters, Slots, Verdict};
use crate::options::SkillforgeOptions;
use crate::presence::Background;

/// Pause after a failed lease call before the next one.
const LEASE_RETRY: Duration = Duration::from_millis(500);

/// A skillforge queue (SQLite or Redis, any [`QueueBackend`]) as an apalis 1.0 backend.
///
/// * **Tasks**: `Task<Args>` whose `args` is the job's JSON `payload` decoded as `Args`; the
///   task's data carries the [`JobLease`](crate::JobLease) (job id, fencing token, attempt,
///   worker identity); its `TaskId` is `<job id>:<fencing token>` (a string id, unique per lease,
///   as apalis's `task-context` feature requires even when a stale job is re-leased by the worker
///   still running its first attempt), its apalis attempt the engine's attempt number, `lock_by`
///   the worker id.
/// * **Polling** leases up to `concurrency` jobs at a time for the worker identity
///   `<apalis worker name>-<8 hex digits>` (unique per process), waiting for work with the
///   queue's own wake-up (an enqueue ends the wait at once), never busy-polling. A leased job's
///   per-job heartbeat starts at lease time.
/// * **Middleware**: [`LeaseLayer`] (per-job heartbeat, cancel ⇒ abort, fenced finish through
///   the engine policy).
/// * **Worker presence**: while polled it holds the `worker:<id>` lock as `skillforge worker`
///   does, and (by default) runs the stale-lease reaper.
/// * **Close**: jobs leased but not started are handed back (attempt refunded), the presence
///   lock is released.
/// * **`TaskSink`** (apalis's blanket impl over this type's `Sink<Task<Args>>`): `push(args)`
///   enqueues a job built from [`SkillforgeOptions::template`]; of a pushed task's context, the
///   idempotency key, `max_attempts` and `run_at` (seconds) are kept, the task id is not (the
///   engine assigns a UUID v7); use [`Self::enqueue`] to learn the job id.
///
/// Each clone shares the queue, options and [`AdapterReport`] counters, but has its own poll
/// state: give every apalis worker its own clone. Polling requires a tokio runtime.
pub struct SkillforgeBackend<Args> {
    queue: Arc<dyn QueueBackend>,
    options: Arc<SkillforgeOptions>,
    counters: Arc<Counters>,
    state: Mutex<PollState>,
    _args: PhantomData<fn() -> Args>,
}

/// One instance's poll and push state.
struct PollState {
    identity: Option<WorkerIdentity>,
    slots: Arc<Slots>,
    buffer: VecDeque<Attempt>,
    leasing: Option<JoinHandle<Result<Vec<Attempt>, EngineError>>>,
    backoff: Option<Pin<Box<tokio::time::Sleep>>>,
    background: Option<Background>,
    closing: Option<BoxFuture<'static, ()>>,
    to_push: Vec<JobSpec>,
    pushing: Option<BoxFuture<'static, Result<(), AdapterError>>>,
}

impl PollState {
    fn new(concurrency: usize) -> Self {
        Self {
            identity: None,
            slots: Arc::new(Slots::new(concurrency)),
            buffer: VecDeque::new(),
            leasing: None,
            backoff: None,
            background: None,
            closing: None,
            to_push: Vec::new(),
            pushing: None,
        }
    }
}

impl<Args> SkillforgeBackend<Args> {
    /// A backend on `queue` (e.g. from [`skillforge_engine::open::open_queue`]) with `options`.
    pub fn new(queue: Arc<dyn QueueBackend>, options: SkillforgeOptions) -> Self {
        let mut options = options;
        options.template.queue = options.queue.clone();
        let state = Mutex::new(PollState::new(options.concurrency));
        Self {
            queue,
            options: Arc::new(options),
            counters: Arc::default(),
            state,
            _args: PhantomData,
        }
    }

    /// The options.
    pub fn options(&self) -> &SkillforgeOptions {
        &self.options
    }

    /// The skillforge queue backend underneath (for `get`, `cancel`, `list`, ...).
    pub fn queue_backend(&self) -> &Arc<dyn QueueBackend> {
        &self.queue
    }

    /// What the attempts of this backend and all its clones ended as, so far.
    pub fn report(&self) -> AdapterReport {
        self.counters.report()
    }

    /// Waits until every hand-back of a dropped task (one the `Monitor`'s shutdown timeout or
    /// any other owner dropped before it finished) has reached the queue. Call it after the
    /// `Monitor` returned and before the process exits: the hand-backs run as spawned tasks, and
    /// a runtime that shuts down first leaves their jobs `running` until they go stale.
    /// Returns at once when nothing is pending; shared by this backend and all its clones.
    pub async fn settle(&self) {
        self.counters.settle().await;
    }

    /// The lease-holder identity of this instance, once an apalis worker has started polling it.
    pub fn identity(&self) -> Option<WorkerIdentity> {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .identity
            .clone()
    }

    fn state(&mut self) -> &mut PollState {
        self.state.get_mut().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<Args: Serialize> SkillforgeBackend<Args> {
    /// The job spec `args` is pushed as: [`SkillforgeOptions::template`] with `args` as JSON payload.
    ///
    /// # Errors
    /// [`AdapterError::Encode`] when `args` does not serialize to JSON.
    pub fn spec_for(&self, args: &Args) -> Result<JobSpec, AdapterError> {
        let mut spec = self.options.template.clone();
        spec.queue = self.options.queue.clone();
        spec.payload = serde_json::to_value(args).map_err(AdapterError::Encode)?;
        Ok(spec)
    }

    /// Enqueues `args` as a job (see [`Self::spec_for`]) and returns its id.
    ///
    /// # Errors
    /// [`AdapterError::Encode`], or [`AdapterError::Engine`] when the queue refuses or is unreachable.
    pub async fn enqueue(&self, args: &Args) -> Result<Enqueued, AdapterError> {
        let spec = self.spec_for(args)?;
        Ok(self.queue.enqueue(&spec).await?)
    }

    /// [`Self::spec_for`] plus what a pushed task's context may set.
    fn spec_for_task(&self, task: &Task<Args>) -> Result<JobSpec, AdapterError> {
        let mut spec = self.spec_for(&task.args)?;
        if let Some(key) = task.idempotency_key() {
            spec.idempotency_key = Some(key.to_owned());
        }
        if let Some(n) = task.max_attempts() {
            spec.max_attempts = u32::try_from(n).unwrap_or(u32::MAX).max(1);
        }
        if let Some(at_secs) = task.run_at() {
            spec.not_before_ms = Some(
                i64::try_from(at_secs)
                    .unwrap_or(i64::MAX / 1000)
                    .saturating_mul(1000),
            );
        }
        Ok(spec)
    }
}

impl<Args> Clone for SkillforgeBackend<Args> {
    /// Same queue, options and counters; fresh poll state (a new worker identity once polled).
    fn clone(&self) -> Self {
        Self {
            queue: self.queue.clone(),
            options: self.options.clone(),
            counters: self.counters.clone(),
            state: Mutex::new(PollState::new(self.options.concurrency)),
            _args: PhantomData,
        }
    }
}

impl<Args> std::fmt::Debug for SkillforgeBackend<Args> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SkillforgeBackend")
            .field("backend", &self.queue.name())
            .field("options", &self.options)
            .field("identity", &self.identity())
            .finish()
    }
}

impl<Args> SkillforgeBackend<Args> {
    /// Fixes the identity and starts presence and reaper, once.
    fn ensure_started(&mut self, worker: &WorkerContext) -> WorkerIdentity {
        let queue = self.queue.clone();
        let reap_every = self.options.reap_every;
        let state = self.state();
        let identity = state
            .identity
            .get_or_insert_with(|| WorkerIdentity::new(worker.name()))
            .clone();
        if state.background.is_none() {
            state.background = Some(Background::start(queue, identity.clone(), reap_every));
        }
        identity
    }
}

impl<Args: DeserializeOwned + Send + 'static> Backend for SkillforgeBackend<Args> {
    type Task = Task<Args>;
    type Error = AdapterError;

    fn poll_ready(
        &mut self,
        _cx: &mut Context<'_>,
        worker: &WorkerContext,
    ) -> Poll<Result<(), AdapterError>> {
        self.ensure_started(worker);
        Poll::Ready(Ok(()))
    }

    fn poll_next(
        &mut self,
        cx: &mut Context<'_>,
        worker: &WorkerContext,
    ) -> Poll<Option<Result<Task<Args>, AdapterError>>> {
        let identity = self.ensure_started(worker);
        let queue = self.queue.clone();
        let options = self.options.clone();
        let counters = self.counters.clone();
        let state = self.state();
        loop {
            if let Some(attempt) = state.buffer.pop_front() {
                match into_task::<Args>(attempt) {
                    Some(task) => return Poll::Ready(Some(Ok(task))),
                    None => continue,
                }
            }
            if let Some(leasing) = state.leasing.as_mut() {
                let joined = ready!(Pin::new(leasing).poll(cx));
                state.leasing = None;
                match joined {
                    Ok(Ok(attempts)) => state.buffer.extend(attempts),
                    Ok(Err(e)) => {
                        warn!(queue = %options.queue, error = %e, "lease failed; retrying shortly");
                        state.backoff = Some(Box::pin(tokio::time::sleep(LEASE_RETRY)));
                    }
                    Err(e) => {
                        warn!(queue = %options.queue, error = %e, "lease task failed; retrying shortly");
                        state.backoff = Some(Box::pin(tokio::time::sleep(LEASE_RETRY)));
                    }
                }
                continue;
            }
            if let Some(backoff) = state.backoff.as_mut() {
                ready!(backoff.as_mut().poll(cx));
                state.backoff = None;
            }
            let free = state.slots.free();
            if free == 0 {
                state.slots.register(cx.waker());
                if state.slots.free() == 0 {
                    return Poll::Pending;
                }
                continue;
            }
            // The lease call runs as its own task: it makes progress (and its transaction or
            // script completes) even while apalis is not polling us, e.g. during shutdown.
            state.leasing = Some(tokio::spawn(lease_round(
                queue.clone(),
                options.queue.clone(),
                identity.clone(),
                free,
                options.poll_wait,
                state.slots.clone(),
                counters.clone(),
            )));
        }
    }

    fn poll_close(
        &mut self,
        cx: &mut Context<'_>,
        _worker: &WorkerContext,
    ) -> Poll<Result<(), AdapterError>> {
        let state = self.state();
        let closing = state.closing.get_or_insert_with(|| {
            let leasing = state.leasing.take();
            let mut unstarted: Vec<Attempt> = state.buffer.drain(..).collect();
            let background = state.background.take();
            state.backoff = None;
            Box::pin(async move {
                if let Some(leasing) = leasing
                    && let Ok(Ok(more)) = leasing.await
                {
                    unstarted.extend(more);
                }
                for attempt in unstarted {
                    attempt.release().await;
                }
                if let Some(background) = background {
                    background.stop().await;
                }
            })
        });
        ready!(closing.as_mut().poll(cx));
        state.closing = None;
        Poll::Ready(Ok(()))
    }
}

/// One lease call: up to `max` jobs, waiting up to `wait`; each leased job's attempt (slot and
/// heartbeat) starts at once.
async fn lease_round(
    backend: Arc<dyn QueueBackend>,
    queue: String,
    identity: WorkerIdentity,
    max: usize,
    wait: Duration,
    slots: Arc<Slots>,
    counters: Arc<Counters>,
) -> Result<Vec<Attempt>, EngineError> {
    let leased = backend.lease(&queue, &identity, max, wait).await?;
    Ok(leased
        .into_iter()
        .map(|job| {
            Attempt::start(
                backend.clone(),
                job,
                identity.clone(),
                slots.clone(),
                counters.clone(),
            )
        })
        .collect())
}

/// The apalis task of a leased job; `None` (and the job failed through the policy, no retry)
/// when it cannot run here.
fn into_task<Args: DeserializeOwned>(attempt: Attempt) -> Option<Task<Args>> {
    let job = &attempt.leased.job;
    if !job.spec.locks.is_empty() {
        let why = format!(
            "job names locks {:?}: the apalis adapter does not take named locks (run it with `skillforge worker`)",
            job.spec.locks
        );
        refuse(attempt, why);
        return None;
    }
    let args = match serde_json::from_value::<Args>(job.spec.payload.clone()) {
        Ok(args) => args,
        Err(e) => {
            let why = format!(
                "job payload does not decode as `{}`: {e}",
                std::any::type_name::<Args>()
            );
            refuse(attempt, why);
            return None;
        }
    };
    let mut builder = TaskBuilder::new(args)
        .task_id(TaskId::from_string(format!(
            "{}:{}",
            job.id, attempt.leased.fencing_token
        )))
        .attempt(job.attempts.saturating_sub(1) as usize)
        .max_attempts(job.spec.max_attempts as usize)
        .lock_by(Some(attempt.lease.worker.worker_id.clone()))
        .lock_at(
            job.lease
                .as_ref()
                .map(|l| u64::try_from(l.acquired_at_ms / 1000).unwrap_or(0)),
        )
        .run_at_timestamp(u64::try_from(job.not_before_ms / 1000).unwrap_or(0))
        .data(attempt.lease.clone());
    if let Some(key) = &job.spec.idempotency_key {
        builder = builder.idempotency_key(key);
    }
    Some(builder.data(AttemptSlot::new(attempt)).build())
}

/// Fails a leased job that cannot run here (policy: `failed`, no retry).
fn refuse(attempt: Attempt, why: String) {
    warn!(job_id = %attempt.lease.job_id, reason = %why, "job cannot run under apalis; failing it");
    tokio::spawn(async move {
        attempt.finish(Verdict::Refused(why)).await;
    });
}

impl<Args> BackendConfig for SkillforgeBackend<Args> {
    type Args = Args;
    type Id = String;
    type Kind = Ephemeral;
    type Config = SkillforgeOptions;
    type Layer = LeaseLayer;

    fn config(&self) -> &SkillforgeOptions {
        &self.options
    }

    fn middleware(&mut self, worker: &mut WorkerContext) -> LeaseLayer {
        let state = self.state();
        state
            .identity
            .get_or_insert_with(|| WorkerIdentity::new(worker.name()));
        LeaseLayer
    }
}

impl<Args: Serialize> Sink<Task<Args>> for SkillforgeBackend<Args> {
    type Error = AdapterError;

    fn poll_ready(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Result<(), AdapterError>> {
        Poll::Ready(Ok(()))
    }

    fn start_send(self: Pin<&mut Self>, task: Task<Args>) -> Result<(), AdapterError> {
        let this = self.get_mut();
        let spec = this.spec_for_task(&task)?;
        this.state().to_push.push(spec);
        Ok(())
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), AdapterError>> {
        let this = self.get_mut();
        let queue = this.queue.clone();
        let state = this.state();
        loop {
            if let Some(pushing) = state.pushing.as_mut() {
                let pushed = ready!(pushing.as_mut().poll(cx));
                state.pushing = None;
                pushed?;
            }
            if state.to_push.is_empty() {
                return Poll::Ready(Ok(()));
            }
            let specs = std::mem::take(&mut state.to_push);
            let queue = queue.clone();
            state.pushing = Some(Box::pin(async move {
                for spec in &specs {
                    let enqueued = queue.enqueue(spec).await?;
                    debug!(job_id = %enqueued.job_id, created = enqueued.created, queue = %spec.queue, "task pushed");
                }
                Ok(())
            }));
        }
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), AdapterError>> {
        self.poll_flush(cx)
    }
}
