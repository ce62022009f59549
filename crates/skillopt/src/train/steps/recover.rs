//! `train recover` (seed step 7): importing what a completed optimizer attempt left.

use std::path::Path;

use skillforge_engine::JobState;
use skillforge_store::blobs::BlobStore;

use crate::train::meta::IterationMeta;
use crate::train::optimizer::{GateResult, completed_attempt, import_gate};
use crate::train::session::*;
use crate::train::state::TrainState;
use crate::train::steps::optimize::import_candidate;
use crate::train::{TrainEnv, TrainError};

/// `train recover` (seed step 7): imports a completed candidate from `out_root` (its newest
/// `attempts/attempt-NNN/candidate.json`, or `out_root/candidate.json`) or records the completed
/// no-candidate result, through the same gate as `continue`. Repeating it never duplicates a
/// version.
///
/// # Errors
/// [`TrainError::Refused`] while the optimizer still runs or before the package was exported;
/// [`TrainError::Invalid`] when `out_root` holds no completed package.
pub async fn recover(
    env: &TrainEnv<'_>,
    session_id: &str,
    out_root: &Path,
) -> Result<StepReport, TrainError> {
    let (session, mut it) = load(env, session_id).await?;
    let _ = skillforge_engine::reaper::reap_once(env.queue.as_ref()).await;
    let mut report = StepReport {
        session_id: session.id.clone(),
        iteration_id: it.id.clone(),
        ..Default::default()
    };
    let mut meta = IterationMeta::parse(&it.metadata_json);
    if !meta.optimizer.job_id.is_empty()
        && let Some(job) = env.queue.get(&meta.optimizer.job_id).await?
        && matches!(job.state, JobState::Queued | JobState::Running)
    {
        return Err(TrainError::Refused(format!(
            "optimizer job {} is still {}; wait for it or for its lease to go stale",
            job.id, job.state
        )));
    }
    // A fleet worker's attempt dir comes back as the job's uploaded output (train/fleet.rs).
    if !meta.optimizer.job_id.is_empty()
        && let Some(job) = env.queue.get(&meta.optimizer.job_id).await?
    {
        crate::train::fleet::deliver(env.queue.as_ref(), env.store, &job).await?;
    }
    let (dir, file) = completed_attempt(out_root).ok_or_else(|| {
        TrainError::Invalid(format!("no completed candidate package under `{}` (looked for attempts/attempt-NNN/candidate.json)", out_root.display()))
    })?;
    match it.state {
        TrainState::TrainingPackageCreated | TrainState::OptimizerCompleted => {
            meta.optimizer.attempt_dir = dir.display().to_string();
            meta.optimizer.candidate_output = file.display().to_string();
            meta.optimizer.status = "recovered".into();
            meta.optimizer.recovery_available = false;
            if meta.optimizer.out_root.is_empty() {
                meta.optimizer.out_root = out_root.display().to_string();
            }
            advance_with_meta(env, &mut it, TrainState::OptimizerCompleted, &meta).await?;
            report.steps.push(format!(
                "recovering the completed optimizer attempt {}",
                dir.display()
            ));
            import_candidate(env, &mut it, &mut report).await?;
        }
        _ if it.state == TrainState::NoCandidate || !it.candidate_version_id.is_empty() => {
            // Already recorded: run the gate again only to report the same result (no writes
            // for a known package or a no-candidate package).
            let blobs = BlobStore::in_home(env.home);
            match import_gate(env.store, &blobs, &dir, &file)
                .await
                .map_err(|e| TrainError::Failed(e.to_string()))?
            {
                GateResult::Candidate { version_id, .. } => {
                    report.candidate_version = Some(version_id.clone());
                    report.steps.push(format!(
                        "already recorded: candidate {version_id} (no duplicate)"
                    ));
                }
                GateResult::NoCandidate { reason, .. } => {
                    report.steps.push(format!(
                        "already recorded: optimizer produced no candidate ({reason})"
                    ));
                }
            }
        }
        TrainState::Abandoned => {
            return Err(TrainError::Refused(format!(
                "iteration `{}` was abandoned",
                it.id
            )));
        }
        _ => {
            return Err(TrainError::Refused(format!(
                "iteration `{}` is at `{}`; recover applies after the training package was exported",
                it.id, it.state
            )));
        }
    }
    report.state = it.state;
    report.next_action = next_action_for(it.state, &session.id);
    if !it.candidate_version_id.is_empty() {
        report.candidate_version = Some(it.candidate_version_id.clone());
    }
    Ok(report)
}
