//! `train status` (seed step 2; facts §3 status JSON): the session's current iteration with its
//! `status_phase`, derived from the engine's job leases and named locks and from metadata.

use serde::Serialize;
use serde_json::{Value, json};
use skillforge_engine::{Job, JobState, LeaseKind, LeaseStatus, LeaseView};
use skillforge_store::feedback::{count_events, list_ranked_events};
use skillforge_store::review::list_items;

use super::control::{load, next_action_for};
use super::iteration::{Iteration, parse_state};
use super::meta::{IterationMeta, SessionMeta};
use super::optimizer::optimizer_lock_key;
use super::phase::{LockState, PhaseInput, derive_status_phase};
use super::state::TrainState;
use super::{TrainEnv, TrainError};
use crate::distill::{LEARNED_FIELDS, NO_ACTIONABLE_FEEDBACK};

/// `train status` (facts §3): the session's current iteration, its phase, progress and locks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionStatus {
    /// Session id.
    pub session_id: String,
    /// Current (newest) iteration id.
    pub iteration_id: String,
    /// Template id.
    pub template_id: String,
    /// The iteration's base template version.
    pub template_version: String,
    /// Target repository.
    pub target_repo: String,
    /// Workspace repository (`null` when none: S-98).
    pub workspace_repo: Option<String>,
    /// Task kind.
    pub task_kind: String,
    /// Derived phase (facts §3 priority), e.g. `generating_options`, `review_published`.
    pub status_phase: String,
    /// The iteration's state.
    pub current_phase: TrainState,
    /// The next linear state (the state itself when terminal).
    pub current_step: TrainState,
    /// Linear states done, in order.
    pub completed_steps: Vec<TrainState>,
    /// The stage a blocking phase is about (`optimizer`, `option_generation`).
    pub blocked_step: Option<&'static str>,
    /// What the operator does next.
    pub next_action: String,
    /// Review issue URL, when published to a forge.
    pub issue_url: Option<String>,
    /// Candidate pull request URL.
    pub pull_request_url: Option<String>,
    /// True while the review is published on GitHub and feedback is still missing: `train
    /// continue` then syncs the issue's comments (facts §3).
    pub continue_from_github: bool,
    /// The candidate version.
    pub candidate_version: Option<String>,
    /// Whether a recovery is available.
    pub recovery_available: bool,
    /// Why the optimizer produced no candidate.
    pub no_candidate_reason: Option<String>,
    /// Its details.
    pub no_candidate_details: Option<Value>,
    /// Where previews go (local Markdown).
    pub preview_policy: PreviewPolicy,
    /// Feedback counts of the iteration's run.
    pub counts: Counts,
    /// The counts with generated options and the ETA.
    pub progress: Progress,
    /// The review packet directory, once published.
    pub review_packet: Option<String>,
    /// Locks and leases of this session.
    pub active_locks: Vec<LockStatus>,
    /// Tokens and cost of the iteration's option generation runs as their transcripts reported
    /// them (issue 31 item 7): a run that reported none, or whose job the queue no longer
    /// holds, is counted in `runs_without_tokens`/`runs_without_cost` ("unknown", never 0).
    pub option_generation_spend: skillforge_runner_agent::Spend,
    /// The review watch of a review published on GitHub (absent for local review).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub review_watch: Option<ReviewWatchStatus>,
    /// The verbose block (`--verbose`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verbose: Option<VerboseStatus>,
}

/// `review_watch`: the watch of a GitHub review issue (facts §3, §8 `skillopt_review_watches`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReviewWatchStatus {
    /// `owner/repo#N`.
    pub issue: String,
    /// `watching` or `synced`.
    pub status: String,
    /// Seconds from publishing to the stale reminder (default 86 400).
    pub stale_threshold_seconds: i64,
    /// RFC 3339: when the reminder is due while feedback is missing.
    pub stale_after: String,
    /// Whether the reminder was posted.
    pub stale_notified: bool,
    /// Item ids a review answers.
    pub expected_item_ids: Vec<String>,
}

/// `preview_policy`: always local Markdown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PreviewPolicy {
    /// `local`.
    pub mode: &'static str,
    /// `markdown`.
    pub renderer: &'static str,
    /// `local`.
    pub publisher: &'static str,
    /// `null`.
    pub repo: Option<String>,
    /// `null`.
    pub route_template: Option<String>,
    /// `null`.
    pub expected_review_repo: Option<String>,
}

impl Default for PreviewPolicy {
    fn default() -> Self {
        Self {
            mode: "local",
            renderer: "markdown",
            publisher: "local",
            repo: None,
            route_template: None,
            expected_review_repo: None,
        }
    }
}

/// Feedback counts of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Review items.
    pub review_items: usize,
    /// A/B feedback events.
    pub feedback_events: i64,
    /// Ranked feedback events.
    pub ranked_feedback_events: i64,
    /// Pairwise preferences the rankings expand to.
    pub pairwise_preferences: usize,
}

/// [`Counts`] plus generation progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Progress {
    /// The counts.
    #[serde(flatten)]
    pub counts: Counts,
    /// Options generated so far.
    pub generated_options: usize,
    /// Always `unknown` (no ETA is fabricated).
    pub eta: &'static str,
}

/// One lock or job lease of the session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LockStatus {
    /// Lock name, or `job:<id>` for a job lease.
    pub name: String,
    /// Lock name or job id.
    pub key: String,
    /// `active`, `active_expired_heartbeat` or `stale`.
    pub status: &'static str,
    /// The job holding it.
    pub owner_job_id: Option<String>,
    /// Holder's pid.
    pub owner_pid: u32,
    /// Holder's host.
    pub owner_hostname: String,
    /// Holder's worker id.
    pub owner_worker: String,
    /// Always `null`.
    pub command_hash: Option<String>,
    /// RFC 3339.
    pub acquired_at: String,
    /// Last heartbeat, RFC 3339.
    pub updated_at: String,
    /// When it goes stale, RFC 3339.
    pub expires_at: String,
    /// Held for, `<ms>ms`.
    pub elapsed: String,
    /// Milliseconds since the last heartbeat.
    pub heartbeat_age_ms: i64,
}

/// The verbose block (facts §3 `--json --verbose`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VerboseStatus {
    /// The iteration's review run.
    pub eval_run_id: String,
    /// Base version.
    pub base_template_version_id: String,
    /// Review mode.
    pub mode: String,
    /// Exploration level.
    pub exploration_level: String,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
    /// Since creation, `<s>s`.
    pub elapsed: String,
    /// The forge review issue.
    pub review_issue: ReviewIssue,
    /// The candidate.
    pub candidate: CandidateStatus,
    /// The optimizer metadata with its effective `status` and `recovery_available`.
    pub optimizer: Value,
    /// The generation metadata.
    pub generation: super::meta::StageMeta,
    /// The evaluation metadata with its effective `status`, `evaluator_id`, `judge_runtime`.
    pub evaluation: Value,
    /// The iteration's jobs.
    pub jobs: JobsStatus,
    /// As [`SessionStatus::active_locks`].
    pub active_locks: Vec<LockStatus>,
    /// Items and their option labels.
    pub items: Vec<ItemStatus>,
    /// Each stage's metadata status.
    pub metadata_status: MetadataStatus,
    /// Every iteration of the session.
    pub iterations: Vec<IterationStatus>,
}

/// `verbose.review_issue`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReviewIssue {
    /// Forge repository.
    pub repo: String,
    /// Issue number.
    pub number: i64,
    /// URL.
    pub url: String,
}

/// `verbose.candidate`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CandidateStatus {
    /// Candidate version id (empty when none).
    pub version_id: String,
    /// Its pull request.
    pub pull_request_url: String,
    /// Why no candidate (empty when one).
    pub no_candidate_reason: String,
    /// Its details.
    pub no_candidate_details: Option<Value>,
}

/// `verbose.jobs`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobsStatus {
    /// All jobs.
    pub total: usize,
    /// Queued.
    pub queued: usize,
    /// Running.
    pub running: usize,
    /// Succeeded.
    pub succeeded: usize,
    /// Failed or dead.
    pub failed: usize,
    /// Cancelled or stale.
    pub other: usize,
    /// Each job.
    pub items: Vec<JobStatus>,
}

/// One job of `verbose.jobs.items`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobStatus {
    /// Job id.
    pub id: String,
    /// Runner kind.
    pub agent: String,
    /// `option_generation`, `evaluation` or `optimizer`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Job state.
    pub state: JobState,
    /// Attempts started.
    pub attempts: u32,
}

/// One item of `verbose.items`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ItemStatus {
    /// Item id.
    pub item_id: String,
    /// Title.
    pub title: String,
    /// Its options' labels.
    pub option_labels: Vec<String>,
}

/// `verbose.metadata_status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MetadataStatus {
    /// Generation.
    pub generation: String,
    /// Review packet.
    pub review: String,
    /// Feedback sync.
    pub feedback_sync: String,
    /// Evaluation.
    pub evaluation: String,
    /// Optimizer (effective).
    pub optimizer: String,
    /// Candidate import.
    pub candidate_import: String,
    /// Candidate review.
    pub candidate_review: String,
    /// Candidate decision.
    pub candidate_decision: String,
}

/// One iteration of `verbose.iterations`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IterationStatus {
    /// Iteration id.
    pub id: String,
    /// State (serialized as its stored name).
    pub state: TrainState,
    /// Candidate version id.
    pub candidate_version_id: String,
}

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
    let ties: usize = tie_groups
        .iter()
        .map(|g| g.len() * g.len().saturating_sub(1) / 2)
        .sum();
    (k * k.saturating_sub(1) / 2).saturating_sub(ties)
}

/// The facts §3 status of session `session_id` (with `verbose` the `verbose{}` block); it
/// serializes to the status JSON, field for field in this order.
///
/// # Errors
/// [`TrainError::Invalid`] for an unknown session; store/queue errors.
pub async fn session_status(
    env: &TrainEnv<'_>,
    session_id: &str,
    verbose: bool,
) -> Result<SessionStatus, TrainError> {
    let (session, it) = load(env, session_id).await?;
    let meta = IterationMeta::parse(&it.metadata_json);
    let now = env.queue.now_ms().await?;
    let leases = env.queue.leases().await?;

    let (jobs, optimizer_job) = iteration_jobs(env, &meta).await?;
    let (ours, optimizer_lock, generation_lock) = session_leases(
        &leases,
        &session.id,
        &jobs,
        optimizer_job.as_ref(),
        &meta,
        now,
    );

    let (optimizer_status, optimizer_error, recovery_available) =
        effective_optimizer(&meta, optimizer_job.as_ref());
    let generation_running = jobs.iter().any(|(stage, j)| {
        *stage == "option_generation" && matches!(j.state, JobState::Queued | JobState::Running)
    });
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
        current_phase: it.state,
        recovery_available,
    });

    let items = list_items(env.store.pool(), &it.eval_run_id).await?;
    let counts = feedback_counts(env, &it.eval_run_id, items.len()).await?;
    let n_options: usize = items.iter().map(|i| i.options.len()).sum();
    let progress = Progress {
        counts: counts.clone(),
        generated_options: n_options,
        eta: "unknown",
    };

    let (completed_steps, current_step) = step_progress(it.state);
    let generation_blocked = meta.generation.status == "blocked_config";
    let blocked_step = blocked_step(&status_phase, generation_blocked, optimizer_lock.is_some());
    let mut next_action = next_action(
        &status_phase,
        &session.id,
        it.state,
        &meta,
        &optimizer_status,
    );
    // A candidate decided outside the session (`candidate promote` / `reject`), before or after
    // its review was published: one `continue` records it (issue 35 item 4).
    if matches!(
        it.state,
        TrainState::CandidateCreated | TrainState::CandidateReviewPublished
    ) && !it.candidate_version_id.is_empty()
    {
        let (v, sid) = (&it.candidate_version_id, &session.id);
        let state = skillforge_store::candidates::get_candidate(env.store.pool(), v)
            .await?
            .map(|c| c.version_state);
        next_action = match state.as_deref() {
            Some("current" | "superseded") => format!(
                "{v} was promoted outside this session: skillforge train continue --session {sid} records it, then --start-next"
            ),
            Some("rejected") => format!(
                "{v} was rejected outside this session: skillforge train continue --session {sid} records it, then --start-next"
            ),
            _ if it.state == TrainState::CandidateCreated => next_action,
            _ => format!(
                "decide: skillforge train continue --session {sid} --promote {v}, or --reject {v} --reason TEXT"
            ),
        };
    }
    let no_candidate_reason = (!meta.optimizer.no_candidate_reason.is_empty())
        .then(|| meta.optimizer.no_candidate_reason.clone());

    // Locks and leases of this session, with owner and heartbeat age, at the top level too (the
    // README's `train status --json`); facts §3 lists them in the verbose block, kept there.
    let active_locks = lock_statuses(&ours, now, optimizer_job.as_ref());
    let verbose = if verbose {
        let facts = VerboseFacts {
            jobs: &jobs,
            items: &items,
            optimizer_status: &optimizer_status,
            recovery_available,
            now,
        };
        Some(verbose_block(env, &session, &it, &meta, &facts, active_locks.clone()).await?)
    } else {
        None
    };
    let some = |s: &str| (!s.is_empty()).then(|| s.to_owned());
    let review_watch = review_watch_status(env, &it).await?;
    let option_generation_spend = generation_spend(&meta, &jobs);
    Ok(SessionStatus {
        session_id: session.id.clone(),
        iteration_id: it.id.clone(),
        template_id: session.template_id.clone(),
        template_version: it.base_template_version_id.clone(),
        target_repo: session.target_repo.clone(),
        workspace_repo: some(&session.workspace_repo),
        task_kind: session.task_kind.clone(),
        status_phase,
        current_phase: it.state,
        current_step,
        completed_steps,
        blocked_step,
        next_action,
        issue_url: some(&it.issue_url),
        pull_request_url: some(&it.pull_request_url),
        continue_from_github: it.issue_number > 0 && it.state == TrainState::ReviewPublished,
        candidate_version: some(&it.candidate_version_id),
        recovery_available,
        no_candidate_reason,
        no_candidate_details: meta.optimizer.no_candidate_details.clone(),
        preview_policy: PreviewPolicy::default(),
        counts,
        progress,
        review_packet: some(&meta.review.path),
        active_locks,
        option_generation_spend,
        review_watch,
        verbose,
    })
}

/// The spend of the finished option generation jobs of `meta` (the `option_generation` entries
/// of `jobs`, read from the queue); a finished job the queue pruned counts as unknown.
fn generation_spend(
    meta: &IterationMeta,
    jobs: &[(&'static str, Job)],
) -> skillforge_runner_agent::Spend {
    let mut spend = skillforge_runner_agent::Spend::default();
    let generation: Vec<&Job> = jobs
        .iter()
        .filter(|(stage, _)| *stage == "option_generation")
        .map(|(_, j)| j)
        .collect();
    for job in &generation {
        if let Some(outcome) = &job.outcome {
            let usage: Option<skillforge_runner_agent::Usage> = outcome
                .detail
                .get("usage")
                .and_then(|u| serde_json::from_value(u.clone()).ok());
            spend.add_run(usage.as_ref());
        }
    }
    for _pruned in generation.len()..meta.generation.job_ids.len() {
        spend.add_run(None);
    }
    spend
}

/// The review watch of an iteration published on GitHub (`None` for local review).
async fn review_watch_status(
    env: &TrainEnv<'_>,
    it: &Iteration,
) -> Result<Option<ReviewWatchStatus>, TrainError> {
    if it.issue_number == 0 {
        return Ok(None);
    }
    let watch = skillforge_store::github::get_review_watch(
        env.store.pool(),
        &it.issue_repo,
        it.issue_number,
    )
    .await?;
    Ok(watch.map(|w| ReviewWatchStatus {
        issue: format!("{}#{}", w.repo, w.issue_number),
        expected_item_ids: w.expected_item_ids(),
        status: w.status,
        stale_threshold_seconds: w.stale_threshold_seconds,
        stale_after: w.stale_after,
        stale_notified: w.stale_notified != 0,
    }))
}

/// This session's leases and locks (its optimizer lock, its jobs' leases), and from them the
/// state of the optimizer's lock (its named lock, else its job's lease) and the most urgent
/// state among the generation jobs' leases.
fn session_leases<'a>(
    leases: &'a [LeaseView],
    session_id: &str,
    jobs: &[(&str, Job)],
    optimizer_job: Option<&Job>,
    meta: &IterationMeta,
    now: i64,
) -> (Vec<&'a LeaseView>, Option<LockState>, Option<LockState>) {
    let job_ids: Vec<&str> = jobs.iter().map(|(_, j)| j.id.as_str()).collect();
    let lock_key = optimizer_lock_key(session_id);
    let ours: Vec<&LeaseView> = leases
        .iter()
        .filter(|l| match l.kind {
            LeaseKind::Lock => {
                l.name == lock_key
                    || l.name.starts_with("skillopt-train-") && l.name.contains(session_id)
            }
            LeaseKind::Job => job_ids.contains(&l.name.as_str()),
        })
        .collect();
    let optimizer_lock = ours
        .iter()
        .find(|l| l.kind == LeaseKind::Lock && l.name == lock_key)
        .or_else(|| {
            ours.iter().find(|l| {
                l.kind == LeaseKind::Job
                    && Some(l.name.as_str()) == optimizer_job.map(|j| j.id.as_str())
            })
        })
        .map(|l| lock_state(l.status(now)));
    let generation_lock = ours
        .iter()
        .filter(|l| l.kind == LeaseKind::Job && meta.generation.job_ids.contains(&l.name))
        .map(|l| lock_state(l.status(now)))
        .max();
    (ours, optimizer_lock, generation_lock)
}

/// `(completed steps, current step)` of an iteration in `state` along [`TrainState::LINEAR`]:
/// a terminal state has completed every linear step and is its own current step.
fn step_progress(state: TrainState) -> (Vec<TrainState>, TrainState) {
    let completed = match state.linear_index() {
        Some(i) => TrainState::LINEAR[..=i].to_vec(),
        None => TrainState::LINEAR.to_vec(),
    };
    (completed, state.next_linear().unwrap_or(state))
}

/// The jobs of this iteration (generation, evaluator, optimizer) the queue still has, each with
/// its stage, and the optimizer's job on its own.
async fn iteration_jobs(
    env: &TrainEnv<'_>,
    meta: &IterationMeta,
) -> Result<(Vec<(&'static str, Job)>, Option<Job>), TrainError> {
    let mut jobs: Vec<(&'static str, Job)> = Vec::new();
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
    let optimizer_job = if meta.optimizer.job_id.is_empty() {
        None
    } else {
        env.queue.get(&meta.optimizer.job_id).await?
    };
    if let Some(job) = &optimizer_job {
        jobs.push(("optimizer", job.clone()));
    }
    Ok((jobs, optimizer_job))
}

/// The optimizer's effective `(status, error, recovery_available)`: its metadata, refined by
/// its job while the metadata says `running` or `stale`.
fn effective_optimizer(
    meta: &IterationMeta,
    optimizer_job: Option<&Job>,
) -> (String, String, bool) {
    let mut status = meta.optimizer.status.clone();
    let mut error = meta.optimizer.error.clone();
    let mut recovery_available = meta.optimizer.recovery_available;
    if let Some(job) = optimizer_job
        && matches!(status.as_str(), "running" | "stale")
    {
        match job.state {
            JobState::Stale => {
                status = "stale".into();
                recovery_available = true;
            }
            JobState::Failed | JobState::Dead | JobState::Cancelled => {
                status = "failed".into();
                error = job
                    .error
                    .clone()
                    .unwrap_or_else(|| format!("job ended {}", job.state));
                recovery_available = super::optimizer::completed_attempt(std::path::Path::new(
                    &meta.optimizer.attempt_dir,
                ))
                .is_some();
            }
            JobState::Succeeded => status = "succeeded".into(),
            _ => {}
        }
    }
    (status, error, recovery_available)
}

/// Facts §3 counts of run `eval_run_id` with `review_items` items.
async fn feedback_counts(
    env: &TrainEnv<'_>,
    eval_run_id: &str,
    review_items: usize,
) -> Result<Counts, TrainError> {
    let (n_feedback, n_ranked) = count_events(env.store.pool(), eval_run_id).await?;
    let ranked = list_ranked_events(env.store.pool(), eval_run_id).await?;
    let n_pairwise: usize = ranked
        .iter()
        .map(|e| pairwise_count(e.ranking.len(), &e.tie_groups))
        .sum();
    Ok(Counts {
        review_items,
        feedback_events: n_feedback,
        ranked_feedback_events: n_ranked,
        pairwise_preferences: n_pairwise,
    })
}

/// The step a blocked `status_phase` is blocked at, if any.
fn blocked_step(
    status_phase: &str,
    generation_blocked: bool,
    optimizer_locked: bool,
) -> Option<&'static str> {
    match status_phase {
        "blocked_config" if generation_blocked => Some("option_generation"),
        "blocked_config"
        | "failed_unrecoverable"
        | "recovery_available"
        | "optimizer_heartbeat_stale" => Some("optimizer"),
        "blocked_stale_lock" if optimizer_locked => Some("optimizer"),
        "blocked_stale_lock" | "generating_options_heartbeat_stale" => Some("option_generation"),
        _ => None,
    }
}

/// The command (or human step) that moves the session on from `status_phase`.
fn next_action(
    status_phase: &str,
    session_id: &str,
    state: TrainState,
    meta: &IterationMeta,
    optimizer_status: &str,
) -> String {
    let generation_blocked = meta.generation.status == "blocked_config";
    match status_phase {
        "recovery_available" if optimizer_status == "failed" => {
            format!(
                "skillforge train recover --session {session_id} --out-root {}",
                meta.optimizer.out_root
            )
        }
        "recovery_available"
        | "blocked_stale_lock"
        | "generating_options_heartbeat_stale"
        | "optimizer_heartbeat_stale" => {
            format!("skillforge train continue --session {session_id} (recovers the stale job)")
        }
        "blocked_config" if generation_blocked => {
            format!(
                "{}; then skillforge train continue --session {session_id}",
                meta.generation.error
            )
        }
        "blocked_config" => format!(
            "fix the optimizer backend, then skillforge train continue --session {session_id} --backend NAME"
        ),
        "review_published" => format!(
            "fill {}/feedback.yml, then skillforge train continue --session {session_id}",
            meta.review.path
        ),
        // The agents' answers are applied: continuing fails the same way. A new session
        // generates new options.
        _ if meta.generation.status == "failed" && state == TrainState::ItemsReady => format!(
            "option generation failed ({}); its answers are kept, so continuing fails the same way: \
             fix what it says, then start a new session (`skillforge train start … --session NEW`)",
            meta.generation.error
        ),
        "optimizer_completed_no_candidate"
            if meta.optimizer.no_candidate_reason == NO_ACTIONABLE_FEEDBACK =>
        {
            format!(
                "the optimizer learns from {LEARNED_FIELDS}, and {}/feedback.yml filled none of them; start the next \
             iteration with skillforge train continue --session {session_id} --start-next and fill those fields in its packet",
                meta.review.path
            )
        }
        _ => next_action_for(state, session_id),
    }
}

/// Locks and leases of this session, with owner and heartbeat age (the README's `train status
/// --json` shows them at the top level; facts §3 lists them in the verbose block, kept there).
fn lock_statuses(ours: &[&LeaseView], now: i64, optimizer_job: Option<&Job>) -> Vec<LockStatus> {
    ours.iter()
        .map(|l| LockStatus {
            name: if l.kind == LeaseKind::Lock {
                l.name.clone()
            } else {
                format!("job:{}", l.name)
            },
            key: l.name.clone(),
            status: status_word(l.status(now)),
            owner_job_id: if l.kind == LeaseKind::Job {
                Some(l.name.clone())
            } else {
                optimizer_job.map(|j| j.id.clone())
            },
            owner_pid: l.lease.owner_pid,
            owner_hostname: l.lease.owner_host.clone(),
            owner_worker: l.lease.owner_worker.clone(),
            command_hash: None,
            acquired_at: rfc3339(l.lease.acquired_at_ms),
            updated_at: rfc3339(l.lease.heartbeat_at_ms),
            expires_at: rfc3339(
                l.lease.heartbeat_at_ms + i64::try_from(l.stale_after_ms).unwrap_or(0),
            ),
            elapsed: format!("{}ms", now - l.lease.acquired_at_ms),
            heartbeat_age_ms: now - l.lease.heartbeat_at_ms,
        })
        .collect()
}

/// What the verbose block needs from the status computation.
struct VerboseFacts<'a> {
    jobs: &'a [(&'a str, Job)],
    items: &'a [skillforge_store::review::ReviewItem],
    optimizer_status: &'a str,
    recovery_available: bool,
    now: i64,
}

async fn verbose_block(
    env: &TrainEnv<'_>,
    session: &skillforge_store::train::SessionRow,
    it: &Iteration,
    meta: &IterationMeta,
    facts: &VerboseFacts<'_>,
    active_locks: Vec<LockStatus>,
) -> Result<VerboseStatus, TrainError> {
    let jobs = facts.jobs;
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
    optimizer["status"] = json!(facts.optimizer_status);
    optimizer["recovery_available"] = json!(facts.recovery_available);
    let mut iterations = Vec::new();
    for row in skillforge_store::train::list_iterations(env.store.pool(), &session.id).await? {
        let state = parse_state(&row.id, &row.state)?;
        iterations.push(IterationStatus {
            id: row.id,
            state,
            candidate_version_id: row.candidate_version_id,
        });
    }
    Ok(VerboseStatus {
        eval_run_id: it.eval_run_id.clone(),
        base_template_version_id: it.base_template_version_id.clone(),
        mode: it.mode.clone(),
        exploration_level: it.exploration_level.clone(),
        created_at: it.created_at.clone(),
        updated_at: it.updated_at.clone(),
        elapsed: chrono::DateTime::parse_from_rfc3339(&it.created_at)
            .map(|t| format!("{}s", (facts.now - t.timestamp_millis()) / 1000))
            .unwrap_or_default(),
        review_issue: ReviewIssue {
            repo: it.issue_repo.clone(),
            number: it.issue_number,
            url: it.issue_url.clone(),
        },
        candidate: CandidateStatus {
            version_id: it.candidate_version_id.clone(),
            pull_request_url: it.pull_request_url.clone(),
            no_candidate_reason: meta.optimizer.no_candidate_reason.clone(),
            no_candidate_details: meta.optimizer.no_candidate_details.clone(),
        },
        optimizer,
        generation: meta.generation.clone(),
        evaluation,
        jobs: JobsStatus {
            total: jobs.len(),
            queued: count(&|s| s == JobState::Queued),
            running: count(&|s| s == JobState::Running),
            succeeded: count(&|s| s == JobState::Succeeded),
            failed: count(&|s| matches!(s, JobState::Failed | JobState::Dead)),
            other: count(&|s| matches!(s, JobState::Cancelled | JobState::Stale)),
            items: jobs
                .iter()
                .map(|(stage, j)| JobStatus {
                    id: j.id.clone(),
                    agent: j.spec.kind.clone(),
                    kind: (*stage).to_owned(),
                    state: j.state,
                    attempts: j.attempts,
                })
                .collect(),
        },
        active_locks,
        items: facts
            .items
            .iter()
            .map(|i| ItemStatus {
                item_id: i.item.item_id.clone(),
                title: i.item.title.clone(),
                option_labels: i.options.iter().map(|o| o.label.clone()).collect(),
            })
            .collect(),
        metadata_status: MetadataStatus {
            generation: meta.generation.status.clone(),
            review: meta.review.status.clone(),
            feedback_sync: meta.feedback_sync.status.clone(),
            evaluation: evaluation_status,
            optimizer: facts.optimizer_status.to_owned(),
            candidate_import: meta.candidate_import.status.clone(),
            candidate_review: meta.candidate_review.status.clone(),
            candidate_decision: meta.candidate_decision.status.clone(),
        },
        iterations,
    })
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
