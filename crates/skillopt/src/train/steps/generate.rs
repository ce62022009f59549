//! items_ready → options_generated (seed step 3): one `agent` job per item through the stage port.

use skillforge_engine::{Job, JobState};
use skillforge_runner::ExitClass;
use skillforge_runner_agent::AgentPayload;
use skillforge_store::blobs::BlobStore;
use skillforge_store::review::{get_run, list_items};
use skillforge_store::train::SessionRow;

use crate::train::generation::{generation_job, generation_key, generation_prompt};
use crate::train::iteration::Iteration;
use crate::train::meta::{IterationMeta, SessionMeta};
use crate::train::session::*;
use crate::train::state::TrainState;
use crate::train::{TrainEnv, TrainError, TrainResultHandler};

/// items_ready → options_generated: one `agent` job per item (idempotency key
/// `<session>:<iteration>:<item>:options`), results applied by [`TrainResultHandler`]. Returns
/// false when not every item has its options yet (jobs still running and `wait` is false).
pub(crate) async fn generate_options(
    env: &TrainEnv<'_>,
    session: &SessionRow,
    it: &mut Iteration,
    wait: bool,
    report: &mut StepReport,
) -> Result<bool, TrainError> {
    let smeta = SessionMeta::parse(&session.metadata_json);
    let stage = env.workflow.stage("option_generation");
    let version =
        skillforge_store::templates::get_version(env.store.pool(), &it.base_template_version_id)
            .await?
            .ok_or_else(|| {
                TrainError::Invalid(format!(
                    "template version `{}` is missing",
                    it.base_template_version_id
                ))
            })?;
    let run = get_run(env.store.pool(), &it.eval_run_id)
        .await?
        .ok_or_else(|| {
            TrainError::Invalid(format!("review run `{}` is missing", it.eval_run_id))
        })?;
    let mut meta = IterationMeta::parse(&it.metadata_json);
    let existing = list_items(env.store.pool(), &run.id).await?;
    let mut job_ids = Vec::new();
    let mut n_created = 0;
    for item in &smeta.items {
        let have = existing
            .iter()
            .find(|i| i.item.item_id == item.id)
            .map_or(0, |i| i.options.len());
        if i64::try_from(have).unwrap_or(0) >= run.options_count {
            continue;
        }
        let mut payload = AgentPayload::new(
            if smeta.runtime.is_empty() {
                DEFAULT_RUNTIME
            } else {
                &smeta.runtime
            },
            generation_prompt(
                &session.request_summary,
                item,
                run.options_count,
                &version.id,
                &version.content,
            ),
        );
        payload.model = smeta.model.clone();
        payload.timeout_secs = Some(stage.timeout_secs);
        let spec = generation_job(
            stage,
            &payload,
            generation_key(&session.id, &it.id, &item.id),
        )?;
        let enqueued = env.jobs.submit(&spec).await?;
        if let Some(job) = env.queue.get(&enqueued.job_id).await?
            && matches!(
                job.state,
                JobState::Failed | JobState::Dead | JobState::Cancelled | JobState::Stale
            )
        {
            // A generation that failed earlier is re-run by the next `continue` (fresh attempt
            // budget, history kept); options it may have written are never duplicated.
            env.queue.retry(&job.id).await?;
        }
        n_created += usize::from(enqueued.created);
        job_ids.push(enqueued.job_id);
    }
    if !job_ids.is_empty() {
        meta.generation.status = "running".into();
        meta.generation.error.clear();
        for id in &job_ids {
            if !meta.generation.job_ids.contains(id) {
                meta.generation.job_ids.push(id.clone());
            }
        }
        save_meta(env, it, &meta).await?;
        report.steps.push(format!(
            "option generation: {} job(s) for {} item(s) ({} new, runtime {})",
            job_ids.len(),
            job_ids.len(),
            n_created,
            if smeta.runtime.is_empty() {
                DEFAULT_RUNTIME
            } else {
                &smeta.runtime
            }
        ));
        if !wait {
            return Ok(false);
        }
        let jobs = env.jobs.wait(&job_ids, "generating options").await?;
        let failures = apply_generation_results(env, &jobs).await?;
        if !failures.is_empty() {
            // A runtime that cannot run at all (not installed, not logged in) blocks the stage on
            // the environment: exit 3, `blocked_config`, and no attempt was spent on retries.
            let blocked = jobs.iter().any(|j| {
                j.outcome
                    .as_ref()
                    .is_some_and(|o| matches!(o.exit, ExitClass::NotRunnable { .. }))
            });
            meta.generation.status = if blocked { "blocked_config" } else { "failed" }.into();
            meta.generation.error = failures.join("; ");
            save_meta(env, it, &meta).await?;
            if blocked {
                return Err(TrainError::Blocked(format!(
                    "option generation cannot run (blocked on configuration): {}; fix that and run \
                     `skillforge train continue --session {}` again, or start a new session on another \
                     runtime (`skillforge train start … --runtime scripted --session NEW`)",
                    meta.generation.error, session.id
                )));
            }
            return Err(TrainError::Failed(format!(
                "option generation failed: {}",
                meta.generation.error
            )));
        }
    }
    // Every item must now have its options (re-checked from the store, not from the jobs).
    let items = list_items(env.store.pool(), &run.id).await?;
    let missing: Vec<&str> = items
        .iter()
        .filter(|i| i64::try_from(i.options.len()).unwrap_or(0) < run.options_count)
        .map(|i| i.item.item_id.as_str())
        .collect();
    if !missing.is_empty() {
        return Err(TrainError::Failed(format!(
            "items without options after generation: {}",
            missing.join(", ")
        )));
    }
    meta.generation.status = "succeeded".into();
    advance_with_meta(env, it, TrainState::OptionsGenerated, &meta).await?;
    report.steps.push(format!(
        "options generated: {} items × {} options",
        items.len(),
        run.options_count
    ));
    Ok(true)
}

/// Applies finished generation jobs, each in its own store transaction; returns failure texts.
pub(crate) async fn apply_generation_results(
    env: &TrainEnv<'_>,
    jobs: &[Job],
) -> Result<Vec<String>, TrainError> {
    let handler = TrainResultHandler {
        blobs: BlobStore::in_home(env.home),
    };
    let mut failures = Vec::new();
    let mut scripted_reply = false;
    for job in jobs {
        if job.state != JobState::Succeeded {
            let why = job
                .error
                .clone()
                .or_else(|| job.outcome.as_ref().map(failed_run_text))
                .unwrap_or_default();
            failures.push(format!("job {} ended {} {why}", job.id, job.state));
            continue;
        }
        let mut tx = env.store.begin().await?;
        match handler.apply_generation(&mut tx, job).await {
            Ok(applied) => {
                tx.commit().await?;
                if let Some(why) = applied.unusable_output {
                    failures.push(why);
                    scripted_reply |= applied.scripted_reply;
                }
            }
            Err(e) => {
                let _ = tx.rollback().await;
                failures.push(e.to_string());
            }
        }
    }
    if scripted_reply {
        // Said once, after every item's failure.
        failures.push(crate::train::generation::SCRIPTED_REPLY_HINT.to_owned());
    }
    Ok(failures)
}

/// What a failed generation run says: its exit class, the not-runnable reason, the agent's own
/// final message (from the agent report in `detail`) and the stderr tail, non-empty parts only.
fn failed_run_text(outcome: &skillforge_runner::RunOutcome) -> String {
    let mut parts = vec![outcome.exit.label().to_owned()];
    if let ExitClass::NotRunnable { reason } = &outcome.exit {
        parts.push(reason.clone());
    }
    if let Some(message) = outcome
        .detail
        .get("final_message")
        .and_then(|m| m.as_str())
        .map(str::trim)
        .filter(|m| !m.is_empty())
        && !parts.iter().any(|p| p.contains(message))
    {
        parts.push(format!("agent said: {message}"));
    }
    let stderr = outcome.stderr_tail.trim();
    if !stderr.is_empty() {
        parts.push(stderr.to_owned());
    }
    parts.join(": ")
}
