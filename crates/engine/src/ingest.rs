//! Result ingestion: the control plane applies finished jobs' results to the domain store exactly once.

use std::time::Duration;

use opentelemetry::context::FutureExt as _;
use skillforge_store::applied::{AppliedResult, applied_by_key, record_applied};
use skillforge_store::{Store, StoreError};
use sqlx::SqliteConnection;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use crate::backend::QueueBackend;
use crate::error::EngineError;
use crate::job::Job;

/// Why a handler could not apply a result. Every variant rolls the ingestion transaction back
/// and leaves the result pending (it is offered again on the next pass); none is acknowledged.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// No handler knows the job's workflow (a job of a family this build does not register):
    /// logged as an error, never recorded as applied.
    #[error("no result handler for workflow `{workflow}` (job {job_id}); the result stays pending")]
    NoHandler {
        /// `JobSpec::workflow` of the job.
        workflow: String,
        /// The job.
        job_id: String,
    },
    /// The result cannot become its effects (an unreadable report, a row it names is missing).
    #[error("job {job_id}: {reason}")]
    Unusable {
        /// The job.
        job_id: String,
        /// What is wrong with the result.
        reason: String,
    },
    /// A file the effects need could not be written (the blob store).
    #[error("job {job_id}: {reason}")]
    Env {
        /// The job.
        job_id: String,
        /// What failed.
        reason: String,
    },
    /// The store refused a read or write.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<sqlx::Error> for ApplyError {
    fn from(e: sqlx::Error) -> Self {
        ApplyError::Store(StoreError::from(e))
    }
}

/// Applies the domain effects of one finished job, inside the ingestion transaction.
///
/// Called at most once per (job, fencing token): the transaction also records the applied
/// result, and a second delivery of the same result finds that record and skips the handler.
#[async_trait::async_trait]
pub trait ResultHandler: Send + Sync {
    /// Writes the effects of `job` (terminal or `stale`) through `conn`.
    ///
    /// # Errors
    /// [`ApplyError`]; the transaction is rolled back and the result stays pending.
    async fn apply(&self, conn: &mut SqliteConnection, job: &Job) -> Result<(), ApplyError>;
}

/// A handler with no domain effects beyond the applied-result record (jobs whose command reads
/// their result from the queue, e.g. `jobs submit`).
#[derive(Debug, Default, Clone, Copy)]
pub struct RecordOnly;

#[async_trait::async_trait]
impl ResultHandler for RecordOnly {
    async fn apply(&self, _conn: &mut SqliteConnection, _job: &Job) -> Result<(), ApplyError> {
        Ok(())
    }
}

/// Counts of one ingestion pass.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct IngestReport {
    /// Results applied now.
    pub applied: usize,
    /// Results found already applied (a re-delivery), acknowledged without effect.
    pub duplicates: usize,
    /// Results not applied because their job was put back in the queue to run again (an
    /// idempotent job whose outputs expired before ingestion).
    pub rerun: usize,
}

/// Results one pass reads at most.
pub const PASS_BATCH: usize = 500;
/// First wait before a result that could not be applied is tried again; it doubles per try.
pub const DEFER_FIRST: Duration = Duration::from_secs(1);
/// Longest wait between two tries of a result that could not be applied.
pub const DEFER_MAX: Duration = Duration::from_secs(300);

/// Applies every pending result (up to [`PASS_BATCH`]), each once, retrying nothing it could not
/// apply within the pass: [`Ingestion::pass`] without memory between calls (what a waiting
/// command runs after its wait).
///
/// # Errors
/// As [`Ingestion::pass`].
pub async fn ingest_once(
    backend: &dyn QueueBackend,
    store: &Store,
    handler: &dyn ResultHandler,
) -> Result<IngestReport, EngineError> {
    Ingestion::with_backoff(Duration::ZERO, Duration::ZERO)
        .pass(backend, store, handler)
        .await
}

/// A result that could not be applied yet, waiting out its backoff.
#[derive(Debug, Clone, Copy)]
struct Deferred {
    /// Tries so far.
    tries: u32,
    /// Not offered again before this.
    until: tokio::time::Instant,
}

/// Ingestion that remembers, across passes, the results it could not apply yet (a workflow this
/// build does not know, outputs that fail delivery, a handler's error): each waits out its own
/// backoff ([`DEFER_FIRST`] doubling to [`DEFER_MAX`]) and is passed over meanwhile
/// ([`QueueResults::pending_results_skipping`]), so it never blocks newer results, and its
/// failure is logged once per backoff step (issue 32 item 3).
///
/// [`QueueResults::pending_results_skipping`]: crate::backend::QueueResults::pending_results_skipping
#[derive(Debug)]
pub struct Ingestion {
    deferred: std::collections::HashMap<String, Deferred>,
    first: Duration,
    max: Duration,
}

impl Default for Ingestion {
    fn default() -> Self {
        Self::with_backoff(DEFER_FIRST, DEFER_MAX)
    }
}

impl Ingestion {
    /// Ingestion whose deferred results wait `first`, doubling up to `max` (zero: every pass
    /// offers every pending result again, as [`ingest_once`] does).
    pub fn with_backoff(first: Duration, max: Duration) -> Self {
        Self {
            deferred: std::collections::HashMap::new(),
            first,
            max,
        }
    }

    /// How many results are waiting out a backoff now.
    pub fn deferred(&self) -> usize {
        self.deferred.len()
    }

    /// Records that `job_id`'s result could not be applied; returns how long it now waits.
    fn defer(&mut self, job_id: &str) -> Duration {
        let tries = self.deferred.get(job_id).map_or(0, |d| d.tries) + 1;
        let wait = self
            .first
            .saturating_mul(1 << (tries - 1).min(20))
            .min(self.max);
        self.deferred.insert(
            job_id.to_owned(),
            Deferred {
                tries,
                until: tokio::time::Instant::now() + wait,
            },
        );
        wait
    }

    /// Applies every pending result (up to [`PASS_BATCH`], passing over those waiting out a
    /// backoff): per job, one store transaction records the applied result, delivers the
    /// outputs its attempt uploaded ([`crate::transfer::deliver_outputs`], to where the control
    /// plane recorded, verified by hash; a failure leaves the result pending) and runs
    /// `handler`; then the queue is acknowledged for that (job, fencing token) only. A crash
    /// between commit and acknowledgement re-delivers the result, which the record turns into a
    /// no-op; a job retried and finished again between the read and the acknowledgement keeps
    /// its newer result pending, applied by the next pass. A result whose idempotency key the
    /// store shows applied by another job (the queue lost that job and the work ran again) is
    /// acknowledged without effect and logged as an error. A result that cannot be applied yet
    /// is deferred (see the type's docs). A result whose uploaded outputs expired before this
    /// pass is applied as failed, unless its job is idempotent with an attempt left: then the
    /// job runs again ([`QueueResults::rerun_result`]; counted in [`IngestReport::rerun`]).
    ///
    /// [`QueueResults::rerun_result`]: crate::backend::QueueResults::rerun_result
    ///
    /// # Errors
    /// Queue or store unavailable. A handler error leaves that result pending and is logged (an
    /// [`ApplyError::NoHandler`] at error level: a result nobody can apply is never acknowledged).
    pub async fn pass(
        &mut self,
        backend: &dyn QueueBackend,
        store: &Store,
        handler: &dyn ResultHandler,
    ) -> Result<IngestReport, EngineError> {
        let now = tokio::time::Instant::now();
        let skip: std::collections::HashSet<String> = self
            .deferred
            .iter()
            .filter(|(_, d)| d.until > now)
            .map(|(id, _)| id.clone())
            .collect();
        let jobs = backend.pending_results_skipping(PASS_BATCH, &skip).await?;
        if jobs.len() < PASS_BATCH {
            // Every pending result was seen: a deferred one that is due and not among them is
            // no longer pending (applied by another process, pruned, retried and running).
            let seen: std::collections::HashSet<&str> =
                jobs.iter().map(|j| j.id.as_str()).collect();
            self.deferred
                .retain(|id, d| d.until > now || seen.contains(id.as_str()));
        }
        let mut report = IngestReport::default();
        for job in jobs {
            // The apply span of this result, a child of the job's enqueue (one trace per job).
            let span = crate::telemetry::start_apply(&job);
            let applied = self
                .apply_one(backend, store, handler, &job)
                .with_context(span.clone())
                .await;
            crate::telemetry::end_apply(
                &span,
                applied
                    .as_ref()
                    .map(Applied::name)
                    .map_err(|e| e.to_string()),
            );
            match applied? {
                Applied::New => report.applied += 1,
                Applied::Duplicate => report.duplicates += 1,
                Applied::Rerun => report.rerun += 1,
                Applied::Deferred => {}
            }
        }
        Ok(report)
    }

    async fn apply_one(
        &mut self,
        backend: &dyn QueueBackend,
        store: &Store,
        handler: &dyn ResultHandler,
        job: &Job,
    ) -> Result<Applied, EngineError> {
        // The write lock up front: with another writer on the store this waits (busy timeout)
        // instead of failing the whole pass at its first write.
        let mut tx = store.begin_write().await.map_err(EngineError::sqlite)?;
        // The spec the control plane recorded, when it kept one (jobs with output dirs): a
        // queued job that disagrees was rewritten on the queue and is refused before anything
        // is written; otherwise the handler sees the recorded payload and files, so every path
        // it maps (`stage::files::delivered_path`) comes from the control plane's own record.
        let trusted_job;
        let job = match recorded_spec(&mut tx, job).await? {
            Ok(None) => job,
            Ok(Some(recorded)) => {
                let mut trusted = job.clone();
                trusted.spec.payload = recorded.payload;
                trusted.spec.files = recorded.files;
                trusted_job = trusted;
                &trusted_job
            }
            Err(why) => {
                let _ = tx.rollback().await;
                let retry_in_ms = self.defer(&job.id).as_millis() as u64;
                error!(job_id = %job.id, retry_in_ms, "the queued job was refused: {why}; result left pending (nothing written)");
                return Ok(Applied::Deferred);
            }
        };
        // The job's uploaded outputs are in place before its handler reads them, where the
        // control plane recorded they go (never where the queued job says). Outputs that
        // expired before this pass (issue 32 item 6) send an idempotent job with an attempt
        // left back to the queue to run again; any other job's result is applied as a
        // failure: a result whose declared outputs are missing is never applied as it ran.
        let mut expired = None;
        if !job.spec.files.outputs.is_empty()
            && let Some(area) = backend.transfer_area()
        {
            let recorded = recorded_outputs(&mut tx, store.home(), &job.id).await?;
            match crate::transfer::deliver_outputs(area.as_ref(), job, &recorded).await {
                Ok(_) => {}
                Err(
                    e @ (crate::transfer::TransferError::OutputsExpired { .. }
                    | crate::transfer::TransferError::Missing { .. }),
                ) => {
                    // An idempotent job with an attempt left runs again instead: its next
                    // attempt's outputs are delivered if they are ingested in time.
                    if job.spec.idempotent && job.attempts < job.spec.max_attempts {
                        let _ = tx.rollback().await;
                        let reason = format!(
                            "the outputs of attempt {} expired before ingestion ({e}); run again",
                            job.attempts
                        );
                        if backend
                            .rerun_result(&job.id, job.fencing_token, &reason)
                            .await?
                        {
                            self.deferred.remove(&job.id);
                            warn!(job_id = %job.id, attempt = job.attempts, max_attempts = job.spec.max_attempts, error = %e,
                                  "the job's outputs expired before ingestion: an idempotent job, run again");
                            return Ok(Applied::Rerun);
                        }
                        // A newer attempt (or another control plane) moved the job on: offered again.
                        return Ok(Applied::Deferred);
                    }
                    error!(job_id = %job.id, error = %e, "the job's outputs expired before ingestion: its result is applied as failed");
                    expired = Some(e.to_string());
                }
                Err(e) => {
                    let _ = tx.rollback().await;
                    let retry_in_ms = self.defer(&job.id).as_millis() as u64;
                    match &e {
                        // The stage port records where outputs go right after the enqueue: a
                        // fast job's result can come first. Not an alarm until it disagrees.
                        crate::transfer::TransferError::Refused { .. } if recorded.is_empty() => {
                            warn!(job_id = %job.id, error = %e, retry_in_ms, "the job's outputs are not recorded (yet); result left pending");
                        }
                        crate::transfer::TransferError::Refused { .. } => {
                            error!(job_id = %job.id, error = %e, retry_in_ms, "the job's outputs were refused; result left pending");
                        }
                        _ => {
                            warn!(job_id = %job.id, error = %e, retry_in_ms, "the job's outputs could not be delivered; result left pending")
                        }
                    }
                    return Ok(Applied::Deferred);
                }
            }
        }
        let expired_job;
        let job = match expired {
            Some(why) => {
                let mut failed = job.clone();
                failed.state = crate::job::JobState::Failed;
                failed.error = Some(why);
                expired_job = failed;
                &expired_job
            }
            None => job,
        };
        let row = AppliedResult {
            job_id: job.id.clone(),
            fencing_token: job.fencing_token as i64,
            workflow: job.spec.workflow.clone(),
            stage: job.spec.stage.clone(),
            state: job.state.as_str().to_owned(),
            idempotency_key: job.spec.idempotency_key.clone(),
            outcome_json: job
                .outcome
                .as_ref()
                .and_then(|o| serde_json::to_string(o).ok()),
            applied_at: chrono::Utc::now().to_rfc3339(),
        };
        if let Some(key) = &job.spec.idempotency_key
            && let Some(first) = applied_by_key(&mut tx, key, &job.id)
                .await
                .map_err(EngineError::sqlite)?
        {
            // The queue lost the first job of this key and ran the work again: its effects are
            // in the store already, so this copy's result is acknowledged without effect.
            error!(job_id = %job.id, idempotency_key = %key, applied_job = %first.job_id,
                   applied_state = %first.state, applied_at = %first.applied_at,
                   "a re-run of work already applied (the queue lost the first job of this idempotency key?): result not applied");
            drop(tx);
            self.deferred.remove(&job.id);
            backend.ack_result(&job.id, job.fencing_token).await?;
            return Ok(Applied::Duplicate);
        }
        let is_new = record_applied(&mut tx, &row)
            .await
            .map_err(EngineError::sqlite)?;
        if is_new {
            if let Err(e) = handler.apply(&mut tx, job).await {
                let _ = tx.rollback().await;
                let retry_in_ms = self.defer(&job.id).as_millis() as u64;
                match &e {
                    ApplyError::NoHandler { workflow, .. } => {
                        error!(job_id = %job.id, workflow = %workflow, retry_in_ms, "no result handler for the job's workflow; result left pending");
                    }
                    _ => {
                        warn!(job_id = %job.id, error = %e, retry_in_ms, "result handler failed; result left pending")
                    }
                }
                return Ok(Applied::Deferred);
            }
            info!(job_id = %job.id, state = %job.state, fencing_token = job.fencing_token, "result applied");
        } else {
            debug!(job_id = %job.id, fencing_token = job.fencing_token, "result already applied; ignored");
        }
        tx.commit().await.map_err(EngineError::sqlite)?;
        self.deferred.remove(&job.id);
        // Fenced on the token just applied: a retry whose new attempt finished since the read
        // keeps its result pending for the next pass.
        if !backend.ack_result(&job.id, job.fencing_token).await? {
            info!(job_id = %job.id, fencing_token = job.fencing_token, "a newer attempt's result is pending; left for the next pass");
        }
        Ok(if is_new {
            Applied::New
        } else {
            Applied::Duplicate
        })
    }
}

/// What [`Ingestion::apply_one`] did with one result.
enum Applied {
    /// Applied now.
    New,
    /// Found applied before (a re-delivery), or a re-run of an applied key: acknowledged.
    Duplicate,
    /// Not applied; waits out its backoff.
    Deferred,
    /// Not applied: the job was put back in the queue to run again.
    Rerun,
}

impl Applied {
    /// The stable lowercase name of what happened (the apply span's `skillforge.applied`).
    fn name(&self) -> &'static str {
        match self {
            Applied::New => "new",
            Applied::Duplicate => "duplicate",
            Applied::Deferred => "deferred",
            Applied::Rerun => "rerun",
        }
    }
}

/// The spec the control plane recorded for `job` ([`skillforge_store::submitted::recorded_spec`]):
/// `Ok(None)` when it kept none, `Err(why)` when the queued job disagrees with it (or it cannot
/// be read), naming the field.
///
/// # Errors
/// The store's.
async fn recorded_spec(
    conn: &mut SqliteConnection,
    job: &Job,
) -> Result<Result<Option<crate::job::JobSpec>, String>, EngineError> {
    let Some(json) = skillforge_store::submitted::recorded_spec(conn, &job.id)
        .await
        .map_err(EngineError::sqlite)?
    else {
        return Ok(Ok(None));
    };
    let recorded: crate::job::JobSpec = match serde_json::from_str(&json) {
        Ok(spec) => spec,
        Err(e) => {
            return Ok(Err(format!(
                "the spec this control plane recorded for it does not parse ({e})"
            )));
        }
    };
    Ok(match job.spec.disagreement_with(&recorded) {
        Some(field) => Err(format!(
            "its {field} differs from what this control plane submitted (was it rewritten on the queue?)"
        )),
        None => Ok(Some(recorded)),
    })
}

/// The control plane's record of where job `job_id`'s output dirs go
/// ([`skillforge_store::deliveries`]), keeping only dirs inside the home's job areas (a
/// recorded dir outside them is logged and dropped, so a job naming it is refused).
///
/// # Errors
/// The store's.
pub async fn recorded_outputs(
    conn: &mut SqliteConnection,
    home: &std::path::Path,
    job_id: &str,
) -> Result<Vec<crate::transfer::OutputDir>, EngineError> {
    let rows = skillforge_store::deliveries::deliveries_for(conn, job_id)
        .await
        .map_err(EngineError::sqlite)?;
    Ok(rows
        .into_iter()
        .filter(
            |d| match skillforge_store::deliveries::check_delivery_path(home, &d.deliver_to) {
                Ok(()) => true,
                Err(why) => {
                    error!(job_id = %job_id, dir = %d.dir, "recorded delivery refused: {why}");
                    false
                }
            },
        )
        .map(|d| crate::transfer::OutputDir {
            dir: d.dir,
            deliver_to: d.deliver_to,
        })
        .collect())
}

/// Runs [`Ingestion::pass`] every `every` until `shutdown` (results that cannot be applied yet
/// backing off one by one); errors are logged and retried. A pass
/// in flight when `shutdown` fires is dropped (applied at most once either way), so shutting
/// down with the queue unreachable does not wait out the backend's retries.
pub async fn run_ingestion(
    backend: &dyn QueueBackend,
    store: &Store,
    handler: &dyn ResultHandler,
    every: Duration,
    shutdown: CancellationToken,
) {
    let mut ingestion = Ingestion::default();
    loop {
        // A pass in flight at shutdown is dropped: its open store transaction rolls back, and a
        // result committed but not yet acknowledged is re-delivered and found applied.
        let pass = tokio::select! {
            () = shutdown.cancelled() => return,
            pass = ingestion.pass(backend, store, handler) => pass,
        };
        if let Err(e) = pass {
            warn!(error = %e, "ingestion pass failed");
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
    }
}
