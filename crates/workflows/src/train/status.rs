//! `train status` (seed step 2; facts §3 status JSON): the session's current iteration with its
//! `status_phase`, derived from the engine's job leases and named locks and from metadata.

use serde_json::{Value, json};
use skillforge_engine::{Job, JobState, LeaseKind, LeaseStatus, LeaseView};
use skillforge_store::feedback::{list_ranked_events, count_events};
use skillforge_store::review::list_items;

use super::control::{load, next_action_for};
use crate::distill::{LEARNED_FIELDS, NO_ACTIONABLE_FEEDBACK};
use super::meta::{IterationMeta, SessionMeta};
use super::optimizer::optimizer_lock_key;
use super::phase::{LockState, PhaseInput, derive_status_phase};
use super::state::{LINEAR_STATES, linear_index};
use super::{TrainEnv, TrainError};

fn lock_state(status: LeaseStatus) -> LockState {
    match status {
        LeaseStatus::Active => LockState::Active,
        LeaseStatus::ActiveExpiredHeartbeat => LockState::ActiveExpiredHeartbeat,
        LeaseStatus::Stale => LockState::Stale,
    }
}

fn status_word(status: LeaseStatus) -> &'static str {
    match status {
        LeaseStatus::Active => "active",
        LeaseStatus::ActiveExpiredHeartbeat => "active_expired_heartbeat",
        LeaseStatus::Stale => "stale",
    }
}

fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_default()
}

/// Pairwise preferences a ranking of `k` options expands to: k(k−1)/2 minus pairs inside tie groups.
fn pairwise_count(k: usize, tie_groups: &[Vec<String>]) -> usize {
    let ties: usize = tie_groups.iter().map(|g| g.len() * g.len().saturating_sub(1) / 2).sum();
    (k * k.saturating_sub(1) / 2).saturating_sub(ties)
}

/// The facts §3 status JSON of session `session_id` (with `verbose` the `verbose{}` block).
///
/// # Errors
/// [`TrainError::Invalid`] for an unknown session; store/queue errors.
pub async fn session_status(env: &TrainEnv<'_>, session_id: &str, verbose: bool) -> Result<Value, TrainError> {
    let (session, it) = load(env, session_id).await?;
    let meta = IterationMeta::parse(&it.metadata_json);
    let now = env.queue.now_ms().await?;
    let leases = env.queue.leases().await?;

    // Jobs of this iteration: generation jobs, evaluator jobs and the optimizer job.
    let mut jobs: Vec<(&str, Job)> = Vec::new();
    for id in &meta.generation.job_ids {
        if let Some(job) = env.queue.get(id).await? {
            jobs.push(("option_generation", job));
        }
    }
    for id in &meta.evaluation.job_ids {
        if let Some(job) = env.queue.get(id).await? {
            jobs.push(("evaluation", job));
        }
    }
    let optimizer_job = if meta.optimizer.job_id.is_empty() { None } else { env.queue.get(&meta.optimizer.job_id).await? };
    if let Some(job) = &optimizer_job {
        jobs.push(("optimizer", job.clone()));
    }
    let job_ids: Vec<&str> = jobs.iter().map(|(_, j)| j.id.as_str()).collect();
    let lock_key = optimizer_lock_key(&session.id);
    let ours: Vec<&LeaseView> = leases
        .iter()
        .filter(|l| match l.kind {
            LeaseKind::Lock => l.name == lock_key || l.name.starts_with("skillopt-train-") && l.name.contains(&session.id),
            LeaseKind::Job => job_ids.contains(&l.name.as_str()),
        })
        .collect();

    let optimizer_lock = ours
        .iter()
        .find(|l| l.kind == LeaseKind::Lock && l.name == lock_key)
        .or_else(|| ours.iter().find(|l| l.kind == LeaseKind::Job && Some(l.name.as_str()) == optimizer_job.as_ref().map(|j| j.id.as_str())))
        .map(|l| lock_state(l.status(now)));
    let generation_lock = ours
        .iter()
        .filter(|l| l.kind == LeaseKind::Job && meta.generation.job_ids.contains(&l.name))
        .map(|l| lock_state(l.status(now)))
        .max();

    // The optimizer's effective status: metadata, refined by its job when metadata says running.
    let mut optimizer_status = meta.optimizer.status.clone();
    let mut optimizer_error = meta.optimizer.error.clone();
    let mut recovery_available = meta.optimizer.recovery_available;
    if let Some(job) = &optimizer_job
        && matches!(optimizer_status.as_str(), "running" | "stale")
    {
        {
            match job.state {
                JobState::Stale => {
                    optimizer_status = "stale".into();
                    recovery_available = true;
                }
                JobState::Failed | JobState::Dead | JobState::Cancelled => {
                    optimizer_status = "failed".into();
                    optimizer_error = job.error.clone().unwrap_or_else(|| format!("job ended {}", job.state));
                    recovery_available = super::optimizer::completed_attempt(std::path::Path::new(&meta.optimizer.attempt_dir)).is_some();
                }
                JobState::Succeeded => optimizer_status = "succeeded".into(),
                _ => {}
            }
        }
    }
    let generation_running = jobs
        .iter()
        .any(|(stage, j)| *stage == "option_generation" && matches!(j.state, JobState::Queued | JobState::Running));
    let status_phase = derive_status_phase(&PhaseInput {
        optimizer_lock,
        generation_lock,
        optimizer_status: &optimizer_status,
        optimizer_error: &optimizer_error,
        candidate_import_status: &meta.candidate_import.status,
        generation_status: if generation_running {
            "running"
        } else if meta.generation.status == "blocked_config" {
            "blocked_config"
        } else {
            ""
        },
        current_phase: &it.state,
        recovery_available,
    });

    let items = list_items(env.store.pool(), &it.eval_run_id).await?;
    let (n_feedback, n_ranked) = count_events(env.store.pool(), &it.eval_run_id).await?;
    let ranked = list_ranked_events(env.store.pool(), &it.eval_run_id).await?;
    let n_pairwise: usize = ranked.iter().map(|e| pairwise_count(e.ranking.len(), &e.tie_groups)).sum();
    let n_options: usize = items.iter().map(|i| i.options.len()).sum();
    let counts = json!({
        "review_items": items.len(),
        "feedback_events": n_feedback,
        "ranked_feedback_events": n_ranked,
        "pairwise_preferences": n_pairwise,
    });
    let mut progress = counts.clone();
    progress["generated_options"] = json!(n_options);
    progress["eta"] = json!("unknown");

    let idx = linear_index(&it.state);
    let completed_steps: Vec<&str> = match idx {
        Some(i) => LINEAR_STATES[..=i].to_vec(),
        None => LINEAR_STATES.to_vec(),
    };
    let current_step = idx.and_then(|i| LINEAR_STATES.get(i + 1)).copied().unwrap_or(it.state.as_str());
    let generation_blocked = meta.generation.status == "blocked_config";
    let blocked_step = match status_phase.as_str() {
        "blocked_config" if generation_blocked => Some("option_generation"),
        "blocked_config" | "failed_unrecoverable" | "recovery_available" | "optimizer_heartbeat_stale" => Some("optimizer"),
        "blocked_stale_lock" if optimizer_lock.is_some() => Some("optimizer"),
        "blocked_stale_lock" | "generating_options_heartbeat_stale" => Some("option_generation"),
        _ => None,
    };
    let next_action = match status_phase.as_str() {
        "recovery_available" if optimizer_status == "failed" => format!(
            "skillforge train recover --session {} --out-root {}",
            session.id, meta.optimizer.out_root
        ),
        "recovery_available" | "blocked_stale_lock" | "generating_options_heartbeat_stale" | "optimizer_heartbeat_stale" => {
            format!("skillforge train continue --session {} (recovers the stale job)", session.id)
        }
        "blocked_config" if generation_blocked => format!(
            "{}; then skillforge train continue --session {}",
            meta.generation.error, session.id
        ),
        "blocked_config" => format!("fix the optimizer backend, then skillforge train continue --session {} --backend NAME", session.id),
        "review_published" => format!("fill {}/feedback.yml, then skillforge train continue --session {}", meta.review.path, session.id),
        "optimizer_completed_no_candidate" if meta.optimizer.no_candidate_reason == NO_ACTIONABLE_FEEDBACK => format!(
            "the optimizer learns from {LEARNED_FIELDS}, and {}/feedback.yml filled none of them; start the next \
             iteration with skillforge train continue --session {} --start-next and fill those fields in its packet",
            meta.review.path, session.id
        ),
        _ => next_action_for(&it.state, &session.id),
    };
    let no_candidate_reason = (!meta.optimizer.no_candidate_reason.is_empty()).then(|| meta.optimizer.no_candidate_reason.clone());

    let mut out = json!({
        "session_id": session.id,
        "iteration_id": it.id,
        "template_id": session.template_id,
        "template_version": it.base_template_version_id,
        "target_repo": session.target_repo,
        "workspace_repo": if session.workspace_repo.is_empty() { Value::Null } else { json!(session.workspace_repo) },
        "task_kind": session.task_kind,
        "status_phase": status_phase,
        "current_phase": it.state,
        "current_step": current_step,
        "completed_steps": completed_steps,
        "blocked_step": blocked_step,
        "next_action": next_action,
        "issue_url": if it.issue_url.is_empty() { Value::Null } else { json!(it.issue_url) },
        "pull_request_url": if it.pull_request_url.is_empty() { Value::Null } else { json!(it.pull_request_url) },
        "continue_from_github": false,
        "candidate_version": if it.candidate_version_id.is_empty() { Value::Null } else { json!(it.candidate_version_id) },
        "recovery_available": recovery_available,
        "no_candidate_reason": no_candidate_reason,
        "no_candidate_details": meta.optimizer.no_candidate_details,
        "preview_policy": {"mode": "local", "renderer": "markdown", "publisher": "local", "repo": Value::Null, "route_template": Value::Null, "expected_review_repo": Value::Null},
        "counts": counts,
        "progress": progress,
        "review_packet": if meta.review.path.is_empty() { Value::Null } else { json!(meta.review.path) },
    });
    // Locks and leases of this session, with owner and heartbeat age, at the top level too (the
    // README's `train status --json`); facts §3 lists them in the verbose block, kept there.
    let active_locks: Vec<Value> = ours
        .iter()
        .map(|l| {
            let status = l.status(now);
            json!({
                "name": if l.kind == LeaseKind::Lock { l.name.clone() } else { format!("job:{}", l.name) },
                "key": l.name,
                "status": status_word(status),
                "owner_job_id": if l.kind == LeaseKind::Job { json!(l.name) } else { json!(optimizer_job.as_ref().map(|j| j.id.clone())) },
                "owner_pid": l.lease.owner_pid,
                "owner_hostname": l.lease.owner_host,
                "owner_worker": l.lease.owner_worker,
                "command_hash": Value::Null,
                "acquired_at": rfc3339(l.lease.acquired_at_ms),
                "updated_at": rfc3339(l.lease.heartbeat_at_ms),
                "expires_at": rfc3339(l.lease.heartbeat_at_ms + i64::try_from(l.stale_after_ms).unwrap_or(0)),
                "elapsed": format!("{}ms", now - l.lease.acquired_at_ms),
                "heartbeat_age_ms": now - l.lease.heartbeat_at_ms,
            })
        })
        .collect();
    out["active_locks"] = json!(active_locks);
    if verbose {
        let count = |f: &dyn Fn(JobState) -> bool| jobs.iter().filter(|(_, j)| f(j.state)).count();
        // The evaluator stage (S-101): `not_configured` when the session names no evaluator.
        let smeta = SessionMeta::parse(&session.metadata_json);
        let evaluation_status = match (&smeta.evaluator_id, meta.evaluation.status.as_str()) {
            (None, "") => "not_configured".to_owned(),
            (Some(_), "") => "pending".to_owned(),
            (_, status) => status.to_owned(),
        };
        let mut evaluation = serde_json::to_value(&meta.evaluation).unwrap_or_default();
        evaluation["status"] = json!(evaluation_status);
        evaluation["evaluator_id"] = json!(smeta.evaluator_id);
        if meta.evaluation.judge_runtime.is_empty() {
            evaluation["judge_runtime"] = json!(smeta.judge_runtime);
        }
        let mut optimizer = serde_json::to_value(&meta.optimizer).unwrap_or_default();
        optimizer["status"] = json!(optimizer_status);
        optimizer["recovery_available"] = json!(recovery_available);
        out["verbose"] = json!({
            "eval_run_id": it.eval_run_id,
            "base_template_version_id": it.base_template_version_id,
            "mode": it.mode,
            "exploration_level": it.exploration_level,
            "created_at": it.created_at,
            "updated_at": it.updated_at,
            "elapsed": chrono::DateTime::parse_from_rfc3339(&it.created_at).map(|t| format!("{}s", (now - t.timestamp_millis()) / 1000)).unwrap_or_default(),
            "review_issue": {"repo": it.issue_repo, "number": it.issue_number, "url": it.issue_url},
            "candidate": {
                "version_id": it.candidate_version_id,
                "pull_request_url": it.pull_request_url,
                "no_candidate_reason": meta.optimizer.no_candidate_reason,
                "no_candidate_details": meta.optimizer.no_candidate_details,
            },
            "optimizer": optimizer,
            "generation": meta.generation,
            "evaluation": evaluation,
            "jobs": {
                "total": jobs.len(),
                "queued": count(&|s| s == JobState::Queued),
                "running": count(&|s| s == JobState::Running),
                "succeeded": count(&|s| s == JobState::Succeeded),
                "failed": count(&|s| matches!(s, JobState::Failed | JobState::Dead)),
                "other": count(&|s| matches!(s, JobState::Cancelled | JobState::Stale)),
                "items": jobs.iter().map(|(stage, j)| json!({"id": j.id, "agent": j.spec.kind, "type": stage, "state": j.state, "attempts": j.attempts})).collect::<Vec<_>>(),
            },
            "active_locks": active_locks,
            "items": items.iter().map(|i| json!({
                "item_id": i.item.item_id,
                "title": i.item.title,
                "option_labels": i.options.iter().map(|o| o.label.clone()).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "metadata_status": {
                "generation": meta.generation.status,
                "review": meta.review.status,
                "feedback_sync": meta.feedback_sync.status,
                "evaluation": evaluation_status,
                "optimizer": optimizer_status,
                "candidate_import": meta.candidate_import.status,
                "candidate_review": meta.candidate_review.status,
                "candidate_decision": meta.candidate_decision.status,
            },
            "iterations": skillforge_store::train::list_iterations(env.store.pool(), &session.id).await?.iter().map(|i| json!({"id": i.id, "state": i.state, "candidate_version_id": i.candidate_version_id})).collect::<Vec<_>>(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairwise_counts() {
        assert_eq!(pairwise_count(4, &[]), 6);
        assert_eq!(pairwise_count(4, &[vec!["a".into(), "d".into()]]), 5);
        assert_eq!(pairwise_count(0, &[]), 0);
    }
}
