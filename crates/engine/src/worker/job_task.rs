//! One leased job from its lease to its fenced finish: locks, the runner (with its job dir of
//! transferred files), the heartbeat beside it, the hand-back on shutdown, finish-and-lease.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use opentelemetry::context::FutureExt as _;
use skillforge_runner::{RunContext, RunSpec};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info, info_span, warn};

use super::Counters;
use super::heartbeat::{LeaseSignals, heartbeat_loop};
use super::scratch::start_removal;
use crate::backend::QueueBackend;
use crate::health::WorkerHealth;
use crate::job::{FinishReply, LeasedJob, LockAcquire, WorkerIdentity};
use crate::output::OutputForwarder;
use crate::policy::finish_for;
use crate::registry::RunnerRegistry;
use crate::transfer;

/// This worker's own executable, for [`transfer::WORKER_EXE`] (`skillforge` itself).
fn worker_exe() -> String {
    skillforge_runner::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "skillforge".to_owned())
}

/// What an attempt's run left for the hand-over: the runner's result, whether it wrote live
/// output, and the attempt's span.
struct Ran {
    result: Result<skillforge_runner::RunOutcome, String>,
    wrote_output: bool,
    attempt: crate::telemetry::AttemptSpan,
}

/// Everything one running job needs.
pub(super) struct JobTask {
    pub(super) backend: Arc<dyn QueueBackend>,
    pub(super) registry: RunnerRegistry,
    pub(super) scratch_root: PathBuf,
    /// `scratch_root` opened at worker start, when it existed.
    pub(super) scratch_root_dir: Option<Arc<std::fs::File>>,
    pub(super) kill_all: CancellationToken,
    /// The worker's shutdown: once it fired, a finished slot leases nothing more.
    pub(super) shutdown: CancellationToken,
    pub(super) counters: Arc<Counters>,
    pub(super) identity: WorkerIdentity,
    /// The worker's queues and its round-robin position, shared with the lease loop.
    pub(super) queues: Arc<[String]>,
    pub(super) next_queue: Arc<AtomicUsize>,
    pub(super) health: Option<Arc<WorkerHealth>>,
}

impl JobTask {
    /// Runs `leased`, then, while the slot's finish brings back a next job, that one too
    /// (finish-and-lease: a busy slot refills in the same round trip as its result).
    pub(super) async fn run(self, leased: LeasedJob) {
        let mut next = Some(leased);
        while let Some(job) = next.take() {
            if self.shutdown.is_cancelled() || self.kill_all.is_cancelled() {
                // Leased while the worker began to stop: hand it straight back (attempt refunded).
                match self.backend.release(&job.job.id, job.fencing_token).await {
                    Ok(true) => {
                        self.counters.released.fetch_add(1, Ordering::Relaxed);
                        info!(job_id = %job.job.id, "job handed back on shutdown before it started");
                    }
                    Ok(false) => {
                        warn!(job_id = %job.job.id, "job not handed back: lease already superseded")
                    }
                    Err(e) => {
                        warn!(job_id = %job.job.id, error = %e, "job not handed back; the reaper will recover it");
                        return;
                    }
                }
                self.counters.resolved(&job.job.id, job.fencing_token);
                return;
            }
            next = self.run_one(job).await;
        }
    }

    /// The queue a finishing slot leases its next job from (round-robin over the worker's queues).
    fn refill_queue(&self) -> Option<&str> {
        let n = self.queues.len();
        if n == 0 {
            return None;
        }
        let i = self.next_queue.fetch_add(1, Ordering::Relaxed) % n;
        Some(self.queues[i].as_str())
    }

    /// Runs one leased job to its fenced result; returns the slot's next job when the finish
    /// leased one.
    async fn run_one(&self, leased: LeasedJob) -> Option<LeasedJob> {
        let job = leased.job;
        let token = leased.fencing_token;
        let span = info_span!("job", job_id = %job.id, workflow = %job.spec.workflow,
                              stage = %job.spec.stage, attempt = job.attempts, fencing_token = token);
        let attempt = crate::telemetry::start_attempt(&job, token, &self.identity.worker_id);
        async move {
            info!(kind = %job.spec.kind, worker = %self.identity.worker_id, "job started");
            let mut signals = LeaseSignals::new(self.kill_all.child_token());
            signals.health = self.health.clone();
            let LeaseSignals {
                cancel,
                cancelled_by_operator,
                lease_lost,
                ..
            } = signals.clone();
            let done = CancellationToken::new();
            let every = Duration::from_millis(job.spec.heartbeat_ms.max(50));
            let held = Arc::new(tokio::sync::Mutex::new(Vec::<(String, u64)>::new()));
            let heartbeat = tokio::spawn(heartbeat_loop(
                self.backend.clone(),
                job.id.clone(),
                token,
                every,
                signals,
                held.clone(),
                done.clone(),
            ));
            if !job.spec.locks.is_empty() {
                let locks = self.take_locks(&job, every, &cancel).await;
                *held.lock().await = locks;
            }

            let scratch_dir = self.scratch_root.join(format!("{}-{token}", job.id));
            let mut wrote_output = false;
            let result = match self.registry.get(&job.spec.kind) {
                _ if cancel.is_cancelled() => Err("cancelled before the runner started".to_owned()),
                None => Err(format!(
                    "worker `{}` has no runner `{}` (it has: {})",
                    self.identity.worker_id,
                    job.spec.kind,
                    self.registry.kinds().join(", ")
                )),
                Some(runner) => {
                    let output = OutputForwarder::start(self.backend.clone(), &job.id, token);
                    let run = attempt.start_run(&job.spec.kind);
                    let result = self
                        .run_runner(
                            runner.as_ref(),
                            &job,
                            token,
                            &scratch_dir,
                            &cancel,
                            output.output_fn(),
                        )
                        .with_context(run.clone())
                        .await;
                    crate::telemetry::end_run(&run, &result);
                    wrote_output = output.finish().await;
                    result
                }
            };
            done.cancel();
            let _ = heartbeat.await;
            // The attempt's scratch dir (a sandbox's clone, a job dir) is removed beside the
            // hand-over of the result (on a blocking thread), not before it: its removal is off
            // the result's path. The task joins it before it ends, so a stopping worker still
            // waits for it.
            let removal = start_removal(
                self.scratch_root_dir.as_deref(),
                &self.scratch_root,
                scratch_dir,
            );
            let next = self
                .hand_over(
                    &job,
                    token,
                    Ran {
                        result,
                        wrote_output,
                        attempt,
                    },
                    &held,
                    (&cancelled_by_operator, &lease_lost),
                )
                .await;
            removal.join().await;
            next
        }
        .instrument(span)
        .await
    }

    /// Releases the job's locks, then hands the run's result to the queue: the lease back on
    /// shutdown (unless cancelled or lost), else the fenced finish (with the slot's next lease).
    /// The attempt's span ends with what happened.
    async fn hand_over(
        &self,
        job: &crate::job::Job,
        token: u64,
        ran: Ran,
        held: &tokio::sync::Mutex<Vec<(String, u64)>>,
        (cancelled_by_operator, lease_lost): (&AtomicBool, &AtomicBool),
    ) -> Option<LeasedJob> {
        let Ran {
            result,
            wrote_output,
            attempt,
        } = ran;
        for (name, lock_token) in held.lock().await.drain(..) {
            if let Err(e) = self.backend.release_lock(&name, lock_token).await {
                warn!(lock = %name, error = %e, "lock not released; it goes stale after stale_after");
            }
        }

        let operator_cancel = cancelled_by_operator.load(Ordering::SeqCst);
        if self.kill_all.is_cancelled() && !operator_cancel && !lease_lost.load(Ordering::SeqCst) {
            match self.backend.release(&job.id, token).await {
                Ok(true) => {
                    self.counters.released.fetch_add(1, Ordering::Relaxed);
                    if let Some(h) = &self.health {
                        h.handed_back();
                    }
                    info!("job handed back on shutdown");
                }
                Ok(false) => warn!("job not handed back: lease already superseded"),
                Err(e) => {
                    warn!(error = %e, "job not handed back; the reaper will recover it");
                    attempt.end(Err("not handed back on shutdown"));
                    return None;
                }
            }
            attempt.end(Err("handed back on shutdown"));
            self.counters.resolved(&job.id, token);
            return None;
        }
        let finish = finish_for(
            job.attempts,
            job.spec.max_attempts,
            result,
            operator_cancel,
            job.spec.retry_failed_runs,
        );
        let delivered = self.deliver(job, token, &finish).await;
        match delivered {
            Ok((reply, next)) => {
                self.counters.resolved(&job.id, token);
                if let Some(n) = &next {
                    self.counters.hold(&n.job.id, n.fencing_token);
                }
                match &reply {
                    FinishReply::Applied(state) => attempt.end(Ok(state.as_str())),
                    FinishReply::Fenced { .. } => {
                        attempt.end(Err("result rejected by fencing: the lease was superseded"))
                    }
                }
                match reply {
                    FinishReply::Applied(state) => {
                        self.counters.finished.fetch_add(1, Ordering::Relaxed);
                        if let Some(h) = &self.health {
                            h.result_applied(true);
                        }
                        info!(state = %state, result = %finish.attempt_result, retry_delay_ms = finish.retry_delay_ms, "job finished");
                        if state.is_terminal()
                            && wrote_output
                            && let Err(e) = self.backend.trim_output(&job.id).await
                        {
                            debug!(error = %e, "live output not trimmed");
                        }
                    }
                    FinishReply::Fenced { current_token } => {
                        self.counters.fenced.fetch_add(1, Ordering::Relaxed);
                        if let Some(h) = &self.health {
                            h.result_applied(false);
                        }
                        warn!(
                            current_token,
                            "result rejected by fencing: this lease was superseded"
                        );
                    }
                }
                next
            }
            Err(e) => {
                attempt.end(Err("result not delivered; the reaper recovers the job"));
                warn!(error = %e, "result not delivered; the reaper will recover the job");
                if let Some(h) = &self.health {
                    h.result_not_delivered(&job.id, &e.to_string());
                }
                None
            }
        }
    }
}

/// First pause before a finish the queue refused for now is sent again; it doubles up to
/// [`FINISH_RETRY_MAX`].
const FINISH_RETRY_FIRST: Duration = Duration::from_millis(200);
/// Longest pause between two tries of a refused finish.
const FINISH_RETRY_MAX: Duration = Duration::from_secs(5);

impl JobTask {
    /// The fenced finish (with the slot's next lease unless the worker stops). A finish the
    /// queue refuses for a reason that passes ([`crate::EngineError::is_transient`]: Redis OOM
    /// under `noeviction`, `LOADING`, `BUSY`, a reset connection, each already retried for the
    /// backend's own budget) is sent again with backoff ([`FINISH_RETRY_FIRST`] doubling to
    /// [`FINISH_RETRY_MAX`]) while a heartbeat keeps the lease alive (started as soon as a try
    /// outlasts one heartbeat period, since the backend retries inside a call), until it is delivered,
    /// refused for good, or the worker is killed (`kill_all`: then the reaper recovers the job).
    /// A lease the reaper took meanwhile answers the finish `Fenced`, ending the loop. Each
    /// backoff step is logged once (issue 32 item 4).
    async fn deliver(
        &self,
        job: &crate::job::Job,
        token: u64,
        finish: &crate::job::Finish,
    ) -> Result<(FinishReply, Option<LeasedJob>), crate::EngineError> {
        let every = Duration::from_millis(job.spec.heartbeat_ms.max(50));
        let done = CancellationToken::new();
        let mut heartbeat = None;
        let start_heartbeat = || {
            tokio::spawn(heartbeat_loop(
                self.backend.clone(),
                job.id.clone(),
                token,
                every,
                LeaseSignals::new(CancellationToken::new()),
                Arc::default(),
                done.clone(),
            ))
        };
        // A finish the backend keeps retrying (a refused write, a restart) may take longer than
        // a heartbeat period: from then on the lease is renewed beside it.
        let first = self.finish_once(job, token, finish);
        tokio::pin!(first);
        let mut delivered = tokio::select! {
            delivered = &mut first => delivered,
            () = tokio::time::sleep(every) => {
                heartbeat = Some(start_heartbeat());
                first.await
            }
        };
        let mut pause = FINISH_RETRY_FIRST;
        while let Err(error) = &delivered
            && error.is_transient()
        {
            if heartbeat.is_none() {
                heartbeat = Some(start_heartbeat());
            }
            warn!(error = %error, retry_in_ms = pause.as_millis() as u64,
                  "the queue refused the result for now; sending it again while the lease is held");
            tokio::select! {
                () = self.kill_all.cancelled() => break,
                () = tokio::time::sleep(pause) => {}
            }
            delivered = self.finish_once(job, token, finish).await;
            pause = (pause * 2).min(FINISH_RETRY_MAX);
            if delivered.is_ok() {
                info!("result delivered after the queue refused it for a while");
            }
        }
        done.cancel();
        if let Some(heartbeat) = heartbeat {
            let _ = heartbeat.await;
        }
        delivered
    }

    /// One try of the fenced finish, with the slot's next lease unless the worker stops.
    async fn finish_once(
        &self,
        job: &crate::job::Job,
        token: u64,
        finish: &crate::job::Finish,
    ) -> Result<(FinishReply, Option<LeasedJob>), crate::EngineError> {
        let refill = if self.shutdown.is_cancelled() {
            None
        } else {
            self.refill_queue()
        };
        match refill {
            Some(queue) => {
                self.backend
                    .finish_and_lease(&job.id, token, finish, queue, &self.identity)
                    .await
            }
            None => self
                .backend
                .finish(&job.id, token, finish)
                .await
                .map(|reply| (reply, None)),
        }
    }

    /// Runs `job` on `runner`. A job with files ([`crate::transfer`]) first gets its job dir
    /// `<scratch>/job` with the inputs materialized (verified by hash) and its payload's
    /// placeholders filled; its output dirs are uploaded when the runner returns, whatever the
    /// outcome, before the result is sent. A failed materialization is a job that could not
    /// run; a failed upload turns the outcome into an error naming both.
    async fn run_runner(
        &self,
        runner: &dyn skillforge_runner::Runner,
        job: &crate::job::Job,
        token: u64,
        scratch_dir: &std::path::Path,
        cancel: &CancellationToken,
        output: skillforge_runner::OutputFn,
    ) -> Result<skillforge_runner::RunOutcome, String> {
        let files = &job.spec.files;
        let mut payload = job.spec.payload.clone();
        let job_dir = scratch_dir.join(transfer::JOB_DIR_NAME);
        let area = if files.is_empty() {
            // A job without files may still run in its job dir (`jobs submit` on a fleet).
            if transfer::names_job_dir(&payload) {
                transfer::fill_placeholders(
                    &mut payload,
                    &job_dir.display().to_string(),
                    &worker_exe(),
                );
                tokio::fs::create_dir_all(&job_dir).await.map_err(|e| {
                    format!(
                        "worker `{}`: create the job dir `{}`: {e}",
                        self.identity.worker_id,
                        job_dir.display()
                    )
                })?;
            }
            None
        } else {
            let Some(area) = self.backend.transfer_area() else {
                return Err(format!(
                    "the job carries files but the `{}` queue has no transfer area",
                    self.backend.name()
                ));
            };
            transfer::fill_placeholders(
                &mut payload,
                &job_dir.display().to_string(),
                &worker_exe(),
            );
            transfer::prepare_job_dir(area.as_ref(), files, &job_dir).await.map_err(|e| {
                let age_secs = (crate::job::now_ms() - job.created_at_ms).max(0) / 1000;
                format!("worker `{}`: materialize the job's input files (the job was queued {age_secs} s ago): {e}", self.identity.worker_id)
            })?;
            Some(area)
        };
        // The scratch dir is only a path: a runner that needs it creates it (no file-system
        // work on the async threads for the jobs that do not).
        let spec = RunSpec {
            job_id: job.id.clone(),
            payload,
            timeout: Duration::from_millis(job.spec.timeout_ms),
        };
        let ctx = RunContext {
            cancel: cancel.clone(),
            heartbeat: Arc::new(|_| {}),
            output,
            scratch_dir: scratch_dir.to_path_buf(),
            scratch_removed_after: true,
            attempt: job.attempts,
            fencing_token: token,
        };
        let result = runner.run(&spec, &ctx).await.map_err(|e| e.to_string());
        let Some(area) = area.filter(|_| !files.outputs.is_empty()) else {
            return result;
        };
        match transfer::upload_outputs(area.as_ref(), &job.id, token, files, &job_dir).await {
            Ok(dirs) => {
                info!(
                    files = dirs.iter().map(|d| d.files.len()).sum::<usize>(),
                    "job outputs uploaded"
                );
                result
            }
            Err(e) => {
                let ran = match &result {
                    Ok(outcome) => format!("the run ended {}", outcome.exit.label()),
                    Err(why) => why.clone(),
                };
                Err(format!("{ran}; upload the job's outputs: {e}"))
            }
        }
    }

    /// Takes every lock of `job.spec.locks`, all or none, retrying every `every` while another
    /// holder has one (the lease keeps heartbeating meanwhile). Returns the held (name, token)
    /// pairs; empty when `cancel` fired first.
    async fn take_locks(
        &self,
        job: &crate::job::Job,
        every: Duration,
        cancel: &CancellationToken,
    ) -> Vec<(String, u64)> {
        let stale_after = Duration::from_millis(job.spec.stale_after_ms);
        loop {
            let mut taken = Vec::new();
            let mut blocked = None;
            for name in &job.spec.locks {
                match self
                    .backend
                    .acquire_lock(name, &self.identity, every, stale_after)
                    .await
                {
                    Ok(LockAcquire::Acquired { fencing_token }) => {
                        taken.push((name.clone(), fencing_token))
                    }
                    Ok(LockAcquire::Held(by)) => {
                        blocked = Some(format!(
                            "`{name}` held by {}@{}:{}",
                            by.owner_worker, by.owner_host, by.owner_pid
                        ));
                        break;
                    }
                    Err(e) => {
                        blocked = Some(format!("`{name}`: {e}"));
                        break;
                    }
                }
            }
            let Some(why) = blocked else { return taken };
            for (name, t) in taken {
                let _ = self.backend.release_lock(&name, t).await;
            }
            info!(lock = %why, "waiting for a lock");
            tokio::select! {
                () = cancel.cancelled() => return Vec::new(),
                () = tokio::time::sleep(every) => {}
            }
        }
    }
}
