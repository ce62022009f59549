//! The eval loop's [`ResultHandler`]: a finished arm job becomes `<arm>.meta/run.json`, a verify
//! job `<arm>.meta/verify.json`, a judge job `verdict.json`. Both are idempotent (an existing file is kept), and the
//! engine's applied-result record makes each apply run once per (job, fencing token).

use skillforge_engine::Job;
use skillforge_engine::ingest::{ApplyError, ResultHandler};
use sqlx::SqliteConnection;

use super::stages::{
    ARM_STAGE, DEPLOY_STAGE, DRAFT_STAGE, EVAL_WORKFLOW, JUDGE_STAGE, VERIFY_STAGE,
};
use super::steps::arm::apply_arm;
use super::steps::judge::apply_judge;
use super::steps::verify::apply_verify;

/// Applies `evalloop` jobs (no domain-store tables: the evidence lives in files, as the seed keeps it).
#[derive(Debug, Clone, Copy, Default)]
pub struct EvalResultHandler;

#[async_trait::async_trait]
impl ResultHandler for EvalResultHandler {
    async fn apply(&self, _conn: &mut SqliteConnection, job: &Job) -> Result<(), ApplyError> {
        if job.spec.workflow != EVAL_WORKFLOW
            || !(job.state.is_terminal() || job.state == skillforge_engine::JobState::Stale)
        {
            return Ok(());
        }
        let applied = match job.spec.stage.as_str() {
            ARM_STAGE => apply_arm(job),
            VERIFY_STAGE => apply_verify(job),
            JUDGE_STAGE => apply_judge(job),
            // The drafting CLI reads the reply off the job itself; nothing to apply.
            DRAFT_STAGE => Ok(()),
            // `eval deploy --to` reads the remote's report off the job itself.
            DEPLOY_STAGE => Ok(()),
            other => {
                return Err(ApplyError::Unusable {
                    job_id: job.id.clone(),
                    reason: format!("evalloop job {} has unknown stage `{other}`", job.id),
                });
            }
        };
        applied.map_err(|e| ApplyError::Unusable {
            job_id: job.id.clone(),
            reason: e.to_string(),
        })
    }
}
