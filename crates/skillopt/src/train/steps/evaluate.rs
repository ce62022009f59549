//! Seed step 5 at feedback_synced, before the export: the session's evaluator profile (S-101)
//! scores every option through [`crate::evaluator::evaluate_run`], the function `review evaluate` calls.

use skillforge_store::review::get_run;

use crate::evaluator::{EvalRunError, effective_profile, evaluate_run, judge_runtime_of};
use crate::train::iteration::Iteration;
use crate::train::meta::IterationMeta;
use crate::train::session::*;
use crate::train::{TrainEnv, TrainError};
use skillforge_stage::Wait;

/// Seed step 5, at feedback_synced before the export: when the review run names an evaluator,
/// scores every option through [`evaluate_run`] (checks → render → judge, S-101) so the export
/// carries the scores and failure packets. A run without an evaluator is left untouched (no
/// metadata written). Done once per iteration (`evaluation.status` `succeeded`); a re-run after
/// a failure or `--no-wait` reuses the judge jobs already enqueued (idempotency key by prompt)
/// and replaces the scores. Returns false when a job is still running and `wait` is false.
pub(crate) async fn evaluate_options(
    env: &TrainEnv<'_>,
    it: &mut Iteration,
    wait: bool,
    report: &mut StepReport,
) -> Result<bool, TrainError> {
    let run = get_run(env.store.pool(), &it.eval_run_id)
        .await?
        .ok_or_else(|| {
            TrainError::Invalid(format!("review run `{}` is missing", it.eval_run_id))
        })?;
    let Some(profile) = effective_profile(run.metadata().as_ref(), None) else {
        return Ok(true);
    };
    let mut meta = IterationMeta::parse(&it.metadata_json);
    if meta.evaluation.status == "succeeded" {
        return Ok(true);
    }
    let runtime = judge_runtime_of(&profile);
    meta.evaluation.status = "running".into();
    meta.evaluation.profile_id = profile.profile_id.clone();
    meta.evaluation.judge_runtime = runtime.clone().unwrap_or_default();
    meta.evaluation.error.clear();
    save_meta(env, it, &meta).await?;
    match evaluate_run(
        env.store,
        env.home,
        &run,
        &profile,
        runtime.as_deref(),
        env.jobs,
        Wait::from_flag(wait),
    )
    .await
    {
        Ok(done) => {
            for id in &done.job_ids {
                if !meta.evaluation.job_ids.contains(id) {
                    meta.evaluation.job_ids.push(id.clone());
                }
            }
            meta.evaluation.status = "succeeded".into();
            meta.evaluation.evaluated = done.evaluations.len();
            meta.evaluation.failures = done.n_failures;
            save_meta(env, it, &meta).await?;
            report.steps.push(format!(
                "evaluator {}: {} option(s) scored (checks → render → judge, judge runtime {}), {} with a failure packet",
                profile.profile_id,
                done.evaluations.len(),
                runtime.as_deref().unwrap_or("none"),
                done.n_failures
            ));
            Ok(true)
        }
        Err(EvalRunError::Pending(job_id)) => {
            if !meta.evaluation.job_ids.contains(&job_id) {
                meta.evaluation.job_ids.push(job_id.clone());
            }
            save_meta(env, it, &meta).await?;
            report.steps.push(format!(
                "evaluator {}: job {job_id} enqueued",
                profile.profile_id
            ));
            Ok(false)
        }
        Err(e) => {
            meta.evaluation.status = "failed".into();
            meta.evaluation.error = e.to_string();
            save_meta(env, it, &meta).await?;
            Err(match e {
                EvalRunError::Store(s) => TrainError::Store(s),
                EvalRunError::Engine(q) => TrainError::Engine(q),
                EvalRunError::Env(m) => TrainError::Env(format!("evaluator: {m}")),
                other => TrainError::Failed(format!("evaluator: {other}")),
            })
        }
    }
}
