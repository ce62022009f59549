//! The stage port: how a family's step submits its jobs and gets them back, implemented once by
//! the CLI (`crates/cli/src/control/waiter.rs`: an in-process worker on the embedded queue while no
//! worker is live, progress on a terminal, ingestion afterwards).
//!
//! Steps never wait on their own: they call [`run_jobs`] with [`Wait::Block`] (the port waits)
//! or [`Wait::Return`] (`--no-wait`: jobs still running come back as [`Ran::Pending`], and the
//! next call with the same idempotency keys picks the same jobs up).

use skillforge_engine::{EngineError, Enqueued, Job, JobSpec, JobState, QueueBackend};
use skillforge_store::Store;
use tracing::warn;

/// Whether a step waits for its jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Wait until every job is terminal or parked `stale`.
    Block,
    /// Submit and return; unfinished jobs are [`Ran::Pending`].
    Return,
}

impl Wait {
    /// `Block` when `wait` is true.
    pub fn from_flag(wait: bool) -> Self {
        if wait { Wait::Block } else { Wait::Return }
    }
}

/// What [`run_jobs`] got back.
#[derive(Debug, Clone, PartialEq)]
pub enum Ran {
    /// Every job is terminal or `stale`, in the order of the specs.
    Done(Vec<Job>),
    /// Some jobs are still queued or running ([`Wait::Return`]): their ids, in order.
    Pending(Vec<String>),
}

/// The port a family's steps use to run jobs.
#[async_trait::async_trait]
pub trait StageJobs: Send + Sync {
    /// Enqueues `spec`. An idempotency key seen before returns that job (`created: false`).
    ///
    /// # Errors
    /// The queue's.
    async fn submit(&self, spec: &JobSpec) -> Result<Enqueued, EngineError>;

    /// The job `id` as it is now.
    ///
    /// # Errors
    /// The queue's.
    async fn get(&self, id: &str) -> Result<Option<Job>, EngineError>;

    /// Waits until every job in `ids` is terminal or parked `stale`; returns them in order.
    /// `what` names the wait in progress lines (`generating options`).
    ///
    /// # Errors
    /// The queue's; [`EngineError::NotFound`] for an unknown id.
    async fn wait(&self, ids: &[String], what: &str) -> Result<Vec<Job>, EngineError>;
}

/// Enqueues `spec` on `queue` and records it in `store` as pending work of the control plane
/// ([`skillforge_store::submitted`]: what `serve` names when the queue loses its data). The
/// record is best effort: a store that cannot take it is logged, never an error, since the job
/// is already enqueued and failing the caller would invite a duplicate submit.
///
/// # Errors
/// The queue's.
pub async fn submit_recorded(queue: &dyn QueueBackend, store: &Store, spec: &JobSpec) -> Result<Enqueued, EngineError> {
    let enqueued = queue.enqueue(spec).await?;
    record_pending(store, &enqueued, spec).await;
    Ok(enqueued)
}

/// Records an enqueued job as pending work in `store` (see [`submit_recorded`]); failures are
/// logged.
pub async fn record_pending(store: &Store, enqueued: &Enqueued, spec: &JobSpec) {
    let recorded = skillforge_store::submitted::record_submitted(
        store.pool(),
        &enqueued.job_id,
        &spec.workflow,
        &spec.stage,
        spec.idempotency_key.as_deref(),
    )
    .await;
    if let Err(e) = recorded {
        warn!(job_id = %enqueued.job_id, error = %e, "the job is enqueued but not recorded as pending in the store");
    }
}

/// Whether a job will not move on its own any more (terminal or parked `stale`).
pub fn is_finished(job: &Job) -> bool {
    job.state.is_terminal() || job.state == JobState::Stale
}

/// Submits `specs`, then waits for them ([`Wait::Block`]) or returns what is finished
/// ([`Wait::Return`]: [`Ran::Pending`] as soon as one is not).
///
/// # Errors
/// The port's.
pub async fn run_jobs(jobs: &dyn StageJobs, specs: &[JobSpec], wait: Wait, what: &str) -> Result<Ran, EngineError> {
    let mut ids = Vec::with_capacity(specs.len());
    for spec in specs {
        ids.push(jobs.submit(spec).await?.job_id);
    }
    wait_for(jobs, ids, wait, what).await
}

/// [`run_jobs`] for jobs already submitted.
///
/// # Errors
/// The port's; [`EngineError::NotFound`] for an unknown id.
pub async fn wait_for(jobs: &dyn StageJobs, ids: Vec<String>, wait: Wait, what: &str) -> Result<Ran, EngineError> {
    match wait {
        Wait::Block => Ok(Ran::Done(jobs.wait(&ids, what).await?)),
        Wait::Return => {
            let mut done = Vec::with_capacity(ids.len());
            for id in &ids {
                match jobs.get(id).await? {
                    Some(job) if is_finished(&job) => done.push(job),
                    Some(_) => return Ok(Ran::Pending(ids)),
                    None => return Err(EngineError::NotFound(id.clone())),
                }
            }
            Ok(Ran::Done(done))
        }
    }
}
