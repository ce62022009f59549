//! The evaluator family's result handler: what ingestion does with a finished judge or render job.
//!
//! An evaluator job's effect (a score in the item's metadata) is written by [`super::evaluate_run`]
//! when its caller (`review evaluate`, `train continue`) has the job back through its stage port;
//! a re-run reads the same job by its idempotency key. So ingestion records the result and
//! writes nothing else. A job of this workflow with a stage the evaluator does not have is not
//! acknowledged: it stays pending with the reason logged.

use skillforge_engine::Job;
use skillforge_engine::ingest::{ApplyError, ResultHandler};
use sqlx::SqliteConnection;

use super::judge::JUDGE_STAGE;
use super::stages::STAGE_RENDER;

/// Result handler of workflow [`super::EVALUATE_WORKFLOW`] (stages `judge`, `render`).
#[derive(Debug, Default, Clone, Copy)]
pub struct EvaluatorHandler;

#[async_trait::async_trait]
impl ResultHandler for EvaluatorHandler {
    async fn apply(&self, _conn: &mut SqliteConnection, job: &Job) -> Result<(), ApplyError> {
        if job.spec.stage == JUDGE_STAGE || job.spec.stage == STAGE_RENDER {
            return Ok(());
        }
        Err(ApplyError::Unusable {
            job_id: job.id.clone(),
            reason: format!(
                "evaluator job of unknown stage `{}` (expected `{JUDGE_STAGE}` or `{STAGE_RENDER}`)",
                job.spec.stage
            ),
        })
    }
}
