//! The optimizer leg (seed steps 6–7): the training package export, the optimizer job (with
//! recovery of a stale or failed attempt) and the candidate import gate (S-100).

use std::path::{Path, PathBuf};

use skillforge_contract::{serialize_package, validate_training_package};
use skillforge_engine::transfer;
use skillforge_engine::{Job, JobState};
use skillforge_runner::ExitClass;
use skillforge_store::blobs::BlobStore;
use skillforge_store::review::package::{PackageError, training_package};
use skillforge_store::train::{SessionRow, set_candidate_version};

use crate::train::fleet;
use crate::train::iteration::Iteration;
use crate::train::meta::IterationMeta;
use crate::train::optimizer::{
    BackendError, CANDIDATE_FILE, GateError, GateResult, attempt_dir, completed_attempt,
    import_gate, optimizer_job, preflight,
};
use crate::train::phase::is_config_error;
use crate::train::session::*;
use crate::train::stages::DEFAULT_BACKEND;
use crate::train::state::TrainState;
use crate::train::{TrainEnv, TrainError};

/// feedback_synced → training_package_created: `<iteration>/training.json`.
pub(crate) async fn export(
    env: &TrainEnv<'_>,
    session: &SessionRow,
    it: &mut Iteration,
    report: &mut StepReport,
) -> Result<(), TrainError> {
    let package = training_package(env.store.pool(), &it.eval_run_id)
        .await
        .map_err(|e| match e {
            PackageError::Store(s) => TrainError::Store(s),
            other => TrainError::Failed(format!("export training package: {other}")),
        })?;
    validate_training_package(&package).map_err(|e| {
        TrainError::Failed(format!(
            "export training package: the optimizer would refuse it: {e}"
        ))
    })?;
    let bytes = serialize_package(&package)
        .map_err(|e| TrainError::Failed(format!("encode training package: {e}")))?;
    let path = env.iteration_dir(&session.id, &it.id).join(TRAINING_FILE);
    write_file(&path, bytes.as_bytes())?;
    let mut meta = IterationMeta::parse(&it.metadata_json);
    meta.export.status = "succeeded".into();
    meta.export.path = path.display().to_string();
    advance_with_meta(env, it, TrainState::TrainingPackageCreated, &meta).await?;
    report.steps.push(format!(
        "training package exported: {} ({} ranked events, {} pairwise preferences)",
        path.display(),
        package.ranked_feedback_events.len(),
        package.pairwise_preferences.len()
    ));
    for warning in skillforge_contract::loader_warnings(&package) {
        report.steps.push(format!(
            "warning: the external optimizer's data loader refuses this package: {warning}"
        ));
    }
    Ok(())
}

/// training_package_created → optimizer_completed: resumes the current attempt's job or starts
/// a new attempt (after a stale or failed one that left no candidate), then settles its result.
/// Returns false when the job runs and `wait` is false.
pub(crate) async fn run_optimizer(
    env: &TrainEnv<'_>,
    session: &SessionRow,
    it: &mut Iteration,
    req: &ContinueRequest,
    report: &mut StepReport,
) -> Result<bool, TrainError> {
    let mut meta = IterationMeta::parse(&it.metadata_json);
    let job_id = match resume_attempt(env, it, &mut meta, req, report).await? {
        Resume::Recovered => return Ok(true),
        Resume::Wait(job_id) => job_id,
        Resume::NewAttempt => enqueue_attempt(env, session, it, &mut meta, req, report).await?,
    };
    if !req.wait
        && let Some(job) = env.queue.get(&job_id).await?
        && job.state != JobState::Succeeded
    {
        return Ok(false);
    }
    // The port's wait returns once the job's result is applied: its outputs are delivered
    // into the attempt dir by ingestion.
    let job = env
        .jobs
        .wait(std::slice::from_ref(&job_id), "optimizer")
        .await?
        .remove(0);
    settle(env, session, it, &mut meta, &job, report).await
}

/// What the iteration's current optimizer attempt (if any) asks for next.
enum Resume {
    /// A completed candidate package of the ended attempt was recovered: the step is done.
    Recovered,
    /// Wait for this job (running, succeeded, or ended with a package a new `--backend` does
    /// not recover; [`settle`] then reports it).
    Wait(String),
    /// No attempt yet, or one that ended without a candidate package: enqueue the next.
    NewAttempt,
}

/// Looks at the attempt `meta` names. A stale, failed, dead, cancelled or vanished job is
/// recovered when its attempt dir holds a completed package (a stale one is cancelled first),
/// unless a new `--backend` was asked for an attempt that did not go stale; otherwise a new
/// attempt is due.
async fn resume_attempt(
    env: &TrainEnv<'_>,
    it: &mut Iteration,
    meta: &mut IterationMeta,
    req: &ContinueRequest,
    report: &mut StepReport,
) -> Result<Resume, TrainError> {
    let job_id = meta.optimizer.job_id.clone();
    if job_id.is_empty() {
        return Ok(Resume::NewAttempt);
    }
    let job = env.queue.get(&job_id).await?;
    let state = job.as_ref().map(|j| j.state);
    if matches!(
        state,
        Some(JobState::Queued | JobState::Running | JobState::Succeeded)
    ) {
        return Ok(Resume::Wait(job_id));
    }
    // Recovery: a completed package in this attempt is imported; otherwise a new attempt.
    if let Some(job) = &job {
        fleet::deliver(env.queue.as_ref(), env.store, job).await?;
    }
    let is_stale = state == Some(JobState::Stale);
    let Some((dir, file)) = completed_attempt(Path::new(&meta.optimizer.attempt_dir)) else {
        if is_stale {
            let _ = env.queue.cancel(&job_id).await;
            report.steps.push(format!(
                "optimizer job {job_id} went stale without a result; starting a new attempt"
            ));
        }
        return Ok(Resume::NewAttempt);
    };
    if is_stale {
        let _ = env.queue.cancel(&job_id).await;
    }
    meta.optimizer.attempt_dir = dir.display().to_string();
    meta.optimizer.candidate_output = file.display().to_string();
    if !is_stale && req.backend.is_some() {
        return Ok(Resume::Wait(job_id));
    }
    meta.optimizer.status = "recovered".into();
    meta.optimizer.recovery_available = false;
    advance_with_meta(env, it, TrainState::OptimizerCompleted, meta).await?;
    report.steps.push(format!(
        "recovered the completed optimizer attempt {}",
        dir.display()
    ));
    Ok(Resume::Recovered)
}

/// The optimizer's four paths (program, training package, artifact root, attempt dir) as the
/// worker sees them: this machine's, or worker-local ones for a fleet that does not share this
/// disk (`train/fleet.rs`).
struct WorkerPaths {
    bin: PathBuf,
    package: PathBuf,
    artifact_root: PathBuf,
    out: PathBuf,
    is_fleet: bool,
}

impl WorkerPaths {
    fn for_attempt(env: &TrainEnv<'_>, training: &Path, blobs: &BlobStore, dir: &Path) -> Self {
        if env.queue.shares_disk() {
            let (bin, package, artifact_root) = (
                env.skillforge_bin.clone(),
                training.to_path_buf(),
                blobs.root().to_path_buf(),
            );
            return Self {
                bin,
                package,
                artifact_root,
                out: dir.to_path_buf(),
                is_fleet: false,
            };
        }
        Self {
            bin: PathBuf::from(transfer::WORKER_EXE),
            package: PathBuf::from(fleet::training_package_path()),
            artifact_root: PathBuf::from(fleet::artifact_root_path()),
            out: PathBuf::from(fleet::out_root_path()),
            is_fleet: true,
        }
    }
}

/// Preflights the backend (`--backend`, else the iteration's, else the default) and enqueues
/// attempt N+1 in its own attempt dir; returns its job id. A failed preflight is recorded on
/// the iteration: an unknown backend is invalid input, a missing executable `blocked_config`.
async fn enqueue_attempt(
    env: &TrainEnv<'_>,
    session: &SessionRow,
    it: &mut Iteration,
    meta: &mut IterationMeta,
    req: &ContinueRequest,
    report: &mut StepReport,
) -> Result<String, TrainError> {
    let backend = req
        .backend
        .clone()
        .or_else(|| (!meta.optimizer.backend.is_empty()).then(|| meta.optimizer.backend.clone()));
    let backend = backend.unwrap_or_else(|| DEFAULT_BACKEND.to_owned());
    let out_root = env.iteration_dir(&session.id, &it.id).join(OPTIMIZER_DIR);
    let attempt = meta.optimizer.attempt + 1;
    let dir = attempt_dir(&out_root, attempt);
    meta.optimizer.backend = backend.clone();
    meta.optimizer.out_root = out_root.display().to_string();
    meta.optimizer.status = "preflight_running".into();
    save_meta(env, it, meta).await?;
    let training = PathBuf::from(&meta.export.path);
    let blobs = BlobStore::in_home(env.home);
    let paths = WorkerPaths::for_attempt(env, &training, &blobs, &dir);
    let pre = match preflight(
        env.workflow,
        &backend,
        &paths.bin,
        &paths.package,
        &paths.artifact_root,
        &paths.out,
        &session.id,
    ) {
        Ok(p) => p,
        Err(e) => {
            meta.optimizer.status = "failed".into();
            meta.optimizer.error = e.to_string();
            meta.optimizer.recovery_available = false;
            save_meta(env, it, meta).await?;
            return Err(match e {
                BackendError::Unknown { .. } => TrainError::Invalid(e.to_string()),
                BackendError::MissingExecutable { .. } => TrainError::Blocked(format!(
                    "the optimizer cannot run (blocked on configuration): {e}"
                )),
            });
        }
    };
    std::fs::create_dir_all(&dir)
        .map_err(|e| TrainError::Env(format!("create `{}`: {e}", dir.display())))?;
    // On a fleet the worker fills the program and the job dir in: say so in words, not as the
    // payload's placeholders.
    let worded = |text: &str| {
        text.replace("@worker_exe@", "the worker's skillforge")
            .replace("@job_dir@", "<the job's dir on the worker>")
    };
    // Issue 35 item 3: the backend and the attempt at the default level; the lock and the
    // optimizer's argv (internals a person rarely needs) at `-v`.
    env.reporter.step(&worded(&format!(
        "optimizer preflight: backend {} ({}) → {}; attempt {}",
        pre.backend,
        if pre.description.is_empty() {
            "configured"
        } else {
            &pre.description
        },
        pre.resolved_program.as_deref().unwrap_or("?"),
        if paths.is_fleet {
            format!(
                "{} (on the worker in {}, uploaded here when it ends)",
                dir.display(),
                pre.attempt_dir
            )
        } else {
            pre.attempt_dir.clone()
        },
    )));
    tracing::info!(
        lock = %pre.lock,
        argv = %worded(&pre.argv.join(" ")),
        "optimizer command"
    );
    let mut spec = optimizer_job(
        env.workflow.stage("optimizer"),
        &pre,
        format!("{}:{}:optimizer:attempt-{attempt:03}", session.id, it.id),
    )?;
    if paths.is_fleet {
        spec.files = fleet::stage_inputs(env.queue.as_ref(), &training, &blobs, &dir).await?;
    }
    let enqueued = env.jobs.submit(&spec).await?;
    meta.optimizer.attempt = attempt;
    meta.optimizer.argv = pre.argv.clone();
    meta.optimizer.job_id = enqueued.job_id.clone();
    meta.optimizer.attempt_dir = dir.display().to_string();
    meta.optimizer.candidate_output = dir.join(CANDIDATE_FILE).display().to_string();
    meta.optimizer.status = "running".into();
    meta.optimizer.optimizer_attempt_state = "running".into();
    meta.optimizer.error.clear();
    meta.optimizer.recovery_available = false;
    save_meta(env, it, meta).await?;
    report.steps.push(format!(
        "optimizer attempt {attempt} enqueued as job {} (backend {backend})",
        enqueued.job_id
    ));
    report.preflight = Some(pre);
    Ok(enqueued.job_id)
}

/// Records the ended optimizer `job` on the iteration: succeeded → optimizer_completed;
/// stale → recovery available (`train continue`); anything else failed, with `train recover`
/// offered when the attempt left a completed package, `blocked_config` for a configuration
/// error.
async fn settle(
    env: &TrainEnv<'_>,
    session: &SessionRow,
    it: &mut Iteration,
    meta: &mut IterationMeta,
    job: &Job,
    report: &mut StepReport,
) -> Result<bool, TrainError> {
    match job.state {
        JobState::Succeeded => {
            meta.optimizer.status = "succeeded".into();
            advance_with_meta(env, it, TrainState::OptimizerCompleted, meta).await?;
            report.steps.push(format!(
                "optimizer attempt {} finished",
                meta.optimizer.attempt
            ));
            Ok(true)
        }
        JobState::Stale => {
            meta.optimizer.status = "stale".into();
            meta.optimizer.recovery_available = true;
            save_meta(env, it, meta).await?;
            Err(TrainError::Failed(format!(
                "optimizer job {} went stale (its worker stopped heartbeating); recovery is available: run `skillforge train continue --session {}`",
                job.id, session.id
            )))
        }
        _ => settle_failure(env, session, it, meta, job).await,
    }
}

/// A failed, dead or cancelled optimizer job (see [`settle`]); always an error.
async fn settle_failure(
    env: &TrainEnv<'_>,
    session: &SessionRow,
    it: &mut Iteration,
    meta: &mut IterationMeta,
    job: &Job,
) -> Result<bool, TrainError> {
    let why = job
        .error
        .clone()
        .or_else(|| {
            job.outcome.as_ref().map(|o| {
                format!(
                    "{} (exit {}): {}",
                    o.exit.label(),
                    o.exit_code
                        .map_or_else(|| "code unknown".to_owned(), |c| c.to_string()),
                    o.stderr_tail.trim()
                )
            })
        })
        .unwrap_or_else(|| format!("job ended {}", job.state));
    let is_not_runnable = job
        .outcome
        .as_ref()
        .is_some_and(|o| matches!(o.exit, ExitClass::NotRunnable { .. }));
    let recovery = completed_attempt(Path::new(&meta.optimizer.attempt_dir)).is_some();
    meta.optimizer.status = "failed".into();
    meta.optimizer.error = if is_not_runnable {
        format!("executable not runnable: {why}")
    } else {
        why.clone()
    };
    meta.optimizer.recovery_available = recovery;
    save_meta(env, it, meta).await?;
    if recovery {
        Err(TrainError::Failed(format!(
            "optimizer failed ({why}) after writing a completed candidate package; recovery_available: run \
             `skillforge train recover --session {} --out-root {}`",
            session.id, meta.optimizer.out_root
        )))
    } else if is_config_error(&meta.optimizer.error) {
        Err(TrainError::Blocked(format!(
            "the optimizer cannot run (blocked on configuration): {}",
            meta.optimizer.error
        )))
    } else {
        Err(TrainError::Failed(format!("optimizer failed: {why}")))
    }
}

/// The notify seam for a candidate train imported ([`crate::promotion::seam::after_import`]).
async fn after_import(
    env: &TrainEnv<'_>,
    version_id: &str,
) -> Result<crate::promotion::seam::SeamReport, crate::promotion::notify::PromotionError> {
    let stages = crate::promotion::stages::PromotionStages::for_home(env.home)
        .map_err(|e| crate::promotion::notify::PromotionError::Stages(e.to_string()))?;
    let promotion = crate::promotion::notify::PromotionEnv {
        store: env.store,
        policy: env.promotion,
        stages: &stages,
        jobs: Some(env.jobs),
    };
    crate::promotion::seam::after_import(&promotion, version_id).await
}

/// optimizer_completed → candidate_created | optimizer_completed_no_candidate through the import
/// gate (S-100), then the notify seam.
pub(crate) async fn import_candidate(
    env: &TrainEnv<'_>,
    it: &mut Iteration,
    report: &mut StepReport,
) -> Result<(), TrainError> {
    let mut meta = IterationMeta::parse(&it.metadata_json);
    let dir = PathBuf::from(&meta.optimizer.attempt_dir);
    let file = PathBuf::from(&meta.optimizer.candidate_output);
    let blobs = BlobStore::in_home(env.home);
    let result = if file.is_file() {
        import_gate(env.store, &blobs, &dir, &file).await
    } else {
        Err(GateError::NoPackage(file.clone()))
    };
    match result {
        Ok(GateResult::Candidate { version_id, is_new }) => {
            meta.candidate_import.status = "succeeded".into();
            meta.candidate_import.error.clear();
            meta.optimizer.optimizer_attempt_state = "completed_candidate".into();
            meta.optimizer.recovery_available = false;
            // The candidate, the metadata and the state in one transaction.
            let mut tx = env.store.begin().await?;
            set_candidate_version(&mut tx, &it.id, &version_id).await?;
            advance_on(&mut tx, it, TrainState::CandidateCreated, Some(&meta)).await?;
            tx.commit().await?;
            it.candidate_version_id = version_id.clone();
            report.candidate_version = Some(version_id.clone());
            report.steps.push(format!(
                "candidate {version_id} imported as pending{}",
                if is_new {
                    ""
                } else {
                    " (already imported from this package; no duplicate)"
                }
            ));
            // The import has returned: the same notify / auto-promote seam as `skillforge import`
            // (S-51). It never fails the step: the candidate stays pending, `candidate decide`
            // re-runs the seam.
            match after_import(env, &version_id).await {
                Ok(seam) if seam.is_manual() => {}
                Ok(seam) => report.steps.push(format!("auto-promote: {}", seam.reason)),
                Err(e) => {
                    tracing::warn!(error = %e, version = %version_id, "the notify seam failed; the candidate stays pending");
                    report.steps.push(format!("auto-promote not decided ({e}); run `skillforge candidate decide {version_id}`"));
                }
            }
            Ok(())
        }
        Ok(GateResult::NoCandidate { reason, details }) => {
            meta.candidate_import.status = "succeeded".into();
            meta.optimizer.optimizer_attempt_state = "completed_no_candidate".into();
            meta.optimizer.no_candidate_reason = reason.clone();
            meta.optimizer.no_candidate_details = details;
            meta.optimizer.recovery_available = false;
            advance_with_meta(env, it, TrainState::NoCandidate, &meta).await?;
            report.steps.push(format!(
                "optimizer produced no candidate: {reason} (no pending version)"
            ));
            Ok(())
        }
        Err(e) => {
            meta.candidate_import.status = "failed".into();
            meta.candidate_import.error = e.to_string();
            meta.optimizer.optimizer_attempt_state = "candidate_import_failed".into();
            save_meta(env, it, &meta).await?;
            Err(TrainError::Failed(format!("candidate import failed: {e}")))
        }
    }
}
