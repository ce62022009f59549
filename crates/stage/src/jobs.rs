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

    /// Starts a new attempt of the keyed job `id`, which ended `failed` or `dead`, with `spec`'s
    /// payload (this submit's arguments and environment). Only for a job whose effect is looked up
    /// before it is made (a GitHub write finds its own marker first), so running it again cannot
    /// make the effect twice. Says so on the port's progress output.
    ///
    /// # Errors
    /// The queue's; [`EngineError::InvalidState`] when the job is not `failed` or `dead`.
    async fn restart(&self, id: &str, spec: &JobSpec, why: &str) -> Result<(), EngineError>;

    /// Where the control plane recorded `job_id`'s output dirs go (its store, never the
    /// queue): what bringing the job's files back writes to. Empty when none were recorded.
    ///
    /// # Errors
    /// The store's, as [`EngineError::Backend`].
    async fn recorded_outputs(
        &self,
        job_id: &str,
    ) -> Result<Vec<skillforge_engine::transfer::OutputDir>, EngineError>;

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
pub async fn submit_recorded(
    queue: &dyn QueueBackend,
    store: &Store,
    spec: &JobSpec,
) -> Result<Enqueued, EngineError> {
    // The job's trace starts here when telemetry is on (its `traceparent` rides on the spec).
    let (spec, span) = skillforge_engine::telemetry::start_enqueue(spec);
    let enqueued = queue.enqueue(&spec).await;
    span.end(match &enqueued {
        Ok(e) => Ok((e.job_id.as_str(), e.created)),
        Err(e) => Err(e),
    });
    let enqueued = enqueued?;
    record_pending(store, &enqueued, &spec).await;
    Ok(enqueued)
}

/// Records an enqueued job as pending work in `store` (see [`submit_recorded`]), and where its
/// output dirs go ([`skillforge_store::deliveries`]: the only `deliver_to` a delivery uses; a
/// dir outside the home's job areas is not recorded, so its delivery is refused); failures are
/// logged.
pub async fn record_pending(store: &Store, enqueued: &Enqueued, spec: &JobSpec) {
    record_deliveries(store, enqueued, spec).await;
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
        return;
    }
    // Its spec too, so the work can be enqueued again if the queue loses it (issue 32 item 5).
    match serde_json::to_string(spec) {
        Ok(json) => {
            if let Err(e) =
                skillforge_store::submitted::record_spec(store.pool(), &enqueued.job_id, &json)
                    .await
            {
                warn!(job_id = %enqueued.job_id, error = %e, "the job's spec is not recorded in the store");
            }
        }
        Err(e) => warn!(job_id = %enqueued.job_id, error = %e, "the job's spec does not serialize"),
    }
}

async fn record_deliveries(store: &Store, enqueued: &Enqueued, spec: &JobSpec) {
    use skillforge_store::deliveries::{Delivery, check_delivery_path};
    if spec.files.outputs.is_empty() {
        return;
    }
    let mut deliveries = Vec::with_capacity(spec.files.outputs.len());
    for out in &spec.files.outputs {
        match check_delivery_path(store.home(), &out.deliver_to) {
            Ok(()) => deliveries.push(Delivery {
                dir: out.dir.clone(),
                deliver_to: out.deliver_to.clone(),
            }),
            Err(why) => {
                tracing::error!(job_id = %enqueued.job_id, dir = %out.dir, "output dir not recorded, its delivery will be refused: {why}")
            }
        }
    }
    if let Err(e) =
        skillforge_store::deliveries::record_deliveries(store.pool(), &enqueued.job_id, &deliveries)
            .await
    {
        tracing::error!(job_id = %enqueued.job_id, error = %e, "where the job's outputs go is not recorded; their delivery will be refused");
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
pub async fn run_jobs(
    jobs: &dyn StageJobs,
    specs: &[JobSpec],
    wait: Wait,
    what: &str,
) -> Result<Ran, EngineError> {
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
pub async fn wait_for(
    jobs: &dyn StageJobs,
    ids: Vec<String>,
    wait: Wait,
    what: &str,
) -> Result<Ran, EngineError> {
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
