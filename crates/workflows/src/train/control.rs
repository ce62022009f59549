//! The control plane's train steps (seed "Complete train-mode path"): `start` (step 1),
//! `continue` (steps 3, 5, 6, 8, 9, 10 — one human gate at a time) and `recover` (step 7).
//!
//! Step 5 (evaluator profiles, S-101) runs where the seed puts it: after the human feedback is
//! synced (step 4) and before the training package is exported for the optimizer (step 6), and
//! only when the iteration's review run names an evaluator (`train start --evaluator`). It is
//! [`crate::evaluator::evaluate_run`], the function `review evaluate` calls, with this control
//! plane's queue and waiter; its judge jobs are keyed by prompt, so a repeated `continue` reuses
//! finished ones, and scores replace (never add to) the items' `evaluator_scores`.
//!
//! Each step checks the transition with [`super::state::check_transition`] and writes it with a
//! compare-and-set, so a step that already happened is not repeated and a racing control plane
//! cannot move the iteration twice. Job results are applied by [`TrainResultHandler`], which is
//! idempotent; candidate imports go through [`import_gate`], which never imports the same package
//! file twice.

use std::path::{Path, PathBuf};

use serde::Serialize;
use sha2::{Digest, Sha256};
use skillforge_contract::{serialize_package, validate_training_package};
use skillforge_engine::{Job, JobState};
use skillforge_runner_agent::AgentPayload;
use skillforge_store::blobs::BlobStore;
use skillforge_store::candidates::{DecisionOutcome, get_candidate, promote_candidate, reject_candidate};
use skillforge_store::review::package::{PackageError, training_package};
use skillforge_store::review::{NewEvalRun, NewReviewItem, RunSettings, create_run, get_run, list_items};
use skillforge_store::templates::{VersionRef, current_version, resolve};
use skillforge_store::train::{
    IterationRow, NewIteration, NewSession, SessionRow, create_iteration, create_session, get_session, list_iterations,
    set_candidate_version, set_decision_reason, set_iteration_metadata, set_iteration_state,
};

use super::generation::{generation_job, generation_key, generation_prompt};
use super::items::ItemSpec;
use super::meta::{IterationMeta, SessionMeta};
use super::optimizer::{
    GateResult, Preflight, attempt_dir, completed_attempt, import_gate, optimizer_job, preflight,
};
use super::phase::is_config_error;
use super::stages::DEFAULT_BACKEND;
use super::state::{ABANDONED, NO_CANDIDATE, PROMOTED, REJECTED, Transition, check_start_next, check_transition, is_terminal};
use super::{TrainEnv, TrainError, TrainResultHandler};
use crate::evaluator::{EvalJobs, EvalRunError, effective_profile, evaluate_run, judge_runtime_of};

/// Default agent runtime for option generation.
pub const DEFAULT_RUNTIME: &str = "scripted";
/// Default review mode of train iterations (facts §8 iteration default).
pub const DEFAULT_MODE: &str = "explore";
/// Review packet directory inside an iteration dir.
pub const REVIEW_DIR: &str = "review";
/// Training package file inside an iteration dir.
pub const TRAINING_FILE: &str = "training.json";
/// Optimizer out-root inside an iteration dir.
pub const OPTIMIZER_DIR: &str = "optimizer";
/// Candidate review file inside an iteration dir.
pub const CANDIDATE_REVIEW_FILE: &str = "candidate-review.md";

/// What `train start` asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartRequest {
    /// Session id; generated when `None`.
    pub session_id: Option<String>,
    /// `ID`, `ID@vN` or `ID@latest`.
    pub template: String,
    /// Target repo.
    pub repo: String,
    /// Workspace repo; `None` leaves the session at `request_confirmed` (S-98).
    pub workspace_repo: Option<String>,
    /// The request text.
    pub request: String,
    /// Parsed items.
    pub items: Vec<ItemSpec>,
    /// Agent runtime for generation.
    pub runtime: String,
    /// Model for the runtime.
    pub model: Option<String>,
    /// Review mode (explore by default).
    pub mode: Option<String>,
    /// Options per item (mode default).
    pub options: Option<i64>,
    /// Task kind (`custom` by default).
    pub task_kind: String,
}

/// The evaluator a session runs before each export (`train start --evaluator ID
/// [--judge-runtime NAME]`), recorded in the session metadata and in every iteration's review-run
/// metadata (`evaluator_id`, `judge_runtime`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EvaluatorChoice {
    /// Evaluator profile id, e.g. `release_notes_v1`.
    pub evaluator_id: String,
    /// Agent runtime of the judge; `None` ⇒ the judge stage is skipped with a reason.
    pub judge_runtime: Option<String>,
    /// Profile config merged into the run metadata (see
    /// [`crate::evaluator::effective_profile`]: `checks`, `check_config`, judge prompts); the
    /// keys train mode sets itself (`train_session`, `train_iteration`, `evaluator_id`,
    /// `judge_runtime`) are refused.
    pub config: Option<serde_json::Map<String, serde_json::Value>>,
}

/// Run-metadata keys train mode writes itself.
const RESERVED_RUN_KEYS: &[&str] = &["train_session", "train_iteration", "evaluator_id", "judge_runtime"];

/// What a train command did: the iteration afterwards, the steps taken, what to do next.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StepReport {
    /// Session id.
    pub session_id: String,
    /// Current iteration id.
    pub iteration_id: String,
    /// Iteration state afterwards.
    pub state: String,
    /// Human lines, one per step taken.
    pub steps: Vec<String>,
    /// What the operator does next.
    pub next_action: String,
    /// The optimizer preflight, when an optimizer attempt was started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preflight: Option<Preflight>,
    /// The review packet directory, once published.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub review_packet: Option<String>,
    /// The imported candidate version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub candidate_version: Option<String>,
}

/// What `train continue` may carry besides the session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContinueRequest {
    /// `--backend NAME`.
    pub backend: Option<String>,
    /// `--promote V`.
    pub promote: Option<String>,
    /// `--reject V --reason R`.
    pub reject: Option<(String, String)>,
    /// `--start-next`.
    pub start_next: bool,
    /// Wait for jobs (false: enqueue and return; the next `continue` picks them up).
    pub wait: bool,
}

fn new_session_id() -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!("ts-{}", &id[..10])
}

fn iteration_id(session_id: &str, n: usize) -> String {
    format!("{session_id}-i{n:03}")
}

/// Loads a session and its current (newest) iteration.
///
/// # Errors
/// [`TrainError::Invalid`] for an unknown session.
pub async fn load(env: &TrainEnv<'_>, session_id: &str) -> Result<(SessionRow, IterationRow), TrainError> {
    let session = get_session(env.store.pool(), session_id)
        .await?
        .ok_or_else(|| TrainError::Invalid(format!("train session `{session_id}` not found; start one with `skillforge train start`")))?;
    let iteration = list_iterations(env.store.pool(), session_id)
        .await?
        .pop()
        .ok_or_else(|| TrainError::Invalid(format!("train session `{session_id}` has no iteration")))?;
    Ok((session, iteration))
}

/// Moves `it` to `to` after checking the transition; a no-op when already there.
async fn advance(env: &TrainEnv<'_>, it: &mut IterationRow, to: &str) -> Result<(), TrainError> {
    match check_transition(&it.state, to).map_err(|e| TrainError::Refused(e.to_string()))? {
        Transition::NoOp => Ok(()),
        Transition::Advance => {
            let mut conn = env.store.pool().acquire().await?;
            if !set_iteration_state(&mut conn, &it.id, &it.state, to).await? {
                return Err(TrainError::Refused(format!(
                    "iteration `{}` changed while this command ran (another `train continue`?); run `train status`",
                    it.id
                )));
            }
            it.state = to.to_owned();
            Ok(())
        }
    }
}

async fn save_meta(env: &TrainEnv<'_>, it: &mut IterationRow, meta: &IterationMeta) -> Result<(), TrainError> {
    let json = meta.to_json();
    let mut conn = env.store.pool().acquire().await?;
    set_iteration_metadata(&mut conn, &it.id, &json).await?;
    it.metadata_json = json;
    Ok(())
}

/// `train start` (seed step 1): resolves the template, records the session and its first
/// iteration at `request_confirmed`; with a workspace repo, moves on to `workspace_ready` and
/// `items_ready` (the items become the iteration's review items). Without one the session stays
/// at `request_confirmed` and cannot reach option generation (S-98).
///
/// # Errors
/// [`TrainError::Invalid`] for an unknown template, a bad mode/option count, a taken session id.
pub async fn start(env: &TrainEnv<'_>, req: &StartRequest) -> Result<StepReport, TrainError> {
    start_with_evaluator(env, req, None).await
}

/// [`start`] with an evaluator (S-101): every iteration's review run names it, and `continue`
/// evaluates the generated options with it before exporting the training package.
///
/// # Errors
/// As [`start`]; [`TrainError::Invalid`] for an empty evaluator id or an unknown judge runtime.
pub async fn start_with_evaluator(
    env: &TrainEnv<'_>,
    req: &StartRequest,
    evaluator: Option<&EvaluatorChoice>,
) -> Result<StepReport, TrainError> {
    check_start_request(req)?;
    let evaluator_id = evaluator.map(|e| e.evaluator_id.trim().to_owned());
    if evaluator_id.as_deref() == Some("") {
        return Err(TrainError::Invalid("--evaluator needs a profile id".into()));
    }
    let judge_runtime = evaluator.and_then(|e| e.judge_runtime.as_deref()).map(str::trim).filter(|r| !r.is_empty()).map(str::to_owned);
    if let Some(runtime) = &judge_runtime {
        skillforge_runner_agent::find(runtime).map_err(|e| TrainError::Invalid(format!("--judge-runtime: {e}")))?;
    }
    let evaluator_config = evaluator.and_then(|e| e.config.clone()).filter(|c| !c.is_empty());
    if let Some(key) = evaluator_config.as_ref().and_then(|c| c.keys().find(|k| RESERVED_RUN_KEYS.contains(&k.as_str()))) {
        return Err(TrainError::Invalid(format!("evaluator config: `{key}` is set by train mode; use --evaluator / --judge-runtime")));
    }
    let reference = VersionRef::parse(&req.template)
        .ok_or_else(|| TrainError::Invalid(format!("--template `{}`: expected ID, ID@vN or ID@latest", req.template)))?;
    let version = resolve(env.store.pool(), &reference).await?.ok_or_else(|| {
        TrainError::Invalid(format!("template `{}` is not installed; add it with `skillforge template add`", req.template))
    })?;
    let settings = RunSettings::normalize(Some(req.mode.as_deref().unwrap_or(DEFAULT_MODE)), None, req.options)
        .map_err(|e| TrainError::Invalid(e.to_string()))?;
    let session_id = req.session_id.clone().unwrap_or_else(new_session_id);
    if session_id.is_empty() || !session_id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-')) {
        return Err(TrainError::Invalid(format!("session id {session_id:?} must be ASCII letters, digits, `_` or `-`")));
    }
    let meta = SessionMeta {
        items: req.items.clone(),
        runtime: req.runtime.clone(),
        model: req.model.clone(),
        mode: settings.mode.clone(),
        exploration_level: settings.exploration_level.clone(),
        options_count: settings.options_count,
        evaluator_id,
        judge_runtime,
        evaluator_config,
    };
    let workspace = req.workspace_repo.clone().unwrap_or_default();
    let it_id = iteration_id(&session_id, 1);
    {
        let mut tx = env.store.begin().await?;
        let session = NewSession {
            id: &session_id,
            template_id: &version.template_id,
            template_version_id: &version.id,
            target_repo: &req.repo,
            workspace_repo: &workspace,
            request_summary: &req.request,
            task_kind: if req.task_kind.is_empty() { "custom" } else { &req.task_kind },
            metadata_json: &serde_json::to_string(&meta).unwrap_or_default(),
        };
        if !create_session(&mut tx, &session).await? {
            return Err(TrainError::Invalid(format!("train session `{session_id}` already exists")));
        }
        create_iteration(
            &mut tx,
            &NewIteration {
                id: &it_id,
                session_id: &session_id,
                eval_run_id: &it_id,
                base_template_version_id: &version.id,
                mode: &settings.mode,
                exploration_level: &settings.exploration_level,
                metadata_json: "{}",
            },
        )
        .await?;
        tx.commit().await?;
    }
    let (session, mut it) = load(env, &session_id).await?;
    let mut report = StepReport { session_id: session_id.clone(), iteration_id: it.id.clone(), ..Default::default() };
    report.steps.push(format!("session {session_id} for {} (request confirmed)", version.id));
    if workspace.is_empty() {
        report.next_action =
            "no --workspace-repo: the session stays at request_confirmed (S-98); start a session with --workspace-repo".into();
    } else {
        prepare_items(env, &session, &mut it, &mut report).await?;
        report.next_action = format!("skillforge train continue --session {session_id}");
    }
    report.state = it.state.clone();
    Ok(report)
}

/// Whether `workspace` is a remote `owner/repo` (facts §3: sessions record `workspace_repo`, a
/// GitHub repository in the Go implementation): exactly one `/` between two non-empty names of
/// ASCII letters, digits, `.`, `_`, `-`, neither starting with `.`. Anything else is a local path.
fn is_remote_repo(workspace: &str) -> bool {
    let mut parts = workspace.split('/');
    let (Some(owner), Some(name), None) = (parts.next(), parts.next(), parts.next()) else { return false };
    [owner, name].iter().all(|part| {
        !part.is_empty()
            && !part.starts_with('.')
            && part.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    })
}

/// Checks a start request before anything is written: a non-empty `--request`, a known
/// `--runtime` (empty = [`DEFAULT_RUNTIME`]), and a `--workspace-repo` that is a remote
/// `owner/repo` or an existing local directory.
///
/// # Errors
/// [`TrainError::Invalid`] naming the flag and its value.
fn check_start_request(req: &StartRequest) -> Result<(), TrainError> {
    if req.request.trim().is_empty() {
        return Err(TrainError::Invalid("--request must not be empty: say what the template should learn".into()));
    }
    let runtime = if req.runtime.trim().is_empty() { DEFAULT_RUNTIME } else { req.runtime.trim() };
    skillforge_runner_agent::find(runtime).map_err(|e| TrainError::Invalid(format!("--runtime `{runtime}`: {e}")))?;
    if let Some(workspace) = req.workspace_repo.as_deref().map(str::trim).filter(|w| !w.is_empty())
        && !is_remote_repo(workspace)
        && !Path::new(workspace).is_dir()
    {
        return Err(TrainError::Invalid(format!(
            "--workspace-repo `{workspace}`: no such directory; give an existing local checkout or a remote owner/repo"
        )));
    }
    Ok(())
}

/// request_confirmed → workspace_ready → items_ready: the iteration's review run and items.
async fn prepare_items(env: &TrainEnv<'_>, session: &SessionRow, it: &mut IterationRow, report: &mut StepReport) -> Result<(), TrainError> {
    if session.workspace_repo.trim().is_empty() {
        return Err(TrainError::Refused(format!(
            "train session `{}` has no workspace repo, so it stays at request_confirmed and cannot generate options (S-98); \
             start a session with --workspace-repo",
            session.id
        )));
    }
    if it.state == "request_confirmed" {
        std::fs::create_dir_all(env.iteration_dir(&session.id, &it.id))
            .map_err(|e| TrainError::Env(format!("create the iteration directory: {e}")))?;
        advance(env, it, "workspace_ready").await?;
        report.steps.push(format!("workspace {} ready", session.workspace_repo));
    }
    if it.state == "workspace_ready" {
        let smeta = SessionMeta::parse(&session.metadata_json);
        let settings = RunSettings::normalize(Some(&it.mode), Some(&it.exploration_level), Some(smeta.options_count.max(2)))
            .map_err(|e| TrainError::Invalid(e.to_string()))?;
        let mut run_metadata = serde_json::json!({"train_session": session.id, "train_iteration": it.id});
        for (key, value) in smeta.evaluator_config.iter().flatten() {
            run_metadata[key.as_str()] = value.clone();
        }
        if let Some(evaluator_id) = &smeta.evaluator_id {
            run_metadata["evaluator_id"] = serde_json::json!(evaluator_id);
        }
        if let Some(runtime) = &smeta.judge_runtime {
            run_metadata["judge_runtime"] = serde_json::json!(runtime);
        }
        let mut tx = env.store.begin().await?;
        if get_run(env.store.pool(), &it.eval_run_id).await?.is_none() {
            create_run(
                &mut tx,
                &NewEvalRun {
                    id: it.eval_run_id.clone(),
                    template_id: session.template_id.clone(),
                    template_version_id: it.base_template_version_id.clone(),
                    target_repo: session.target_repo.clone(),
                    settings,
                    metadata_json: run_metadata.to_string(),
                },
            )
            .await?;
        }
        for item in &smeta.items {
            let metadata = serde_json::json!({"request": session.request_summary, "input": item.input});
            skillforge_store::review::add_item(
                &mut tx,
                &it.eval_run_id,
                &NewReviewItem {
                    item_id: item.id.clone(),
                    title: item.title.clone(),
                    metadata_json: metadata.to_string(),
                    ..Default::default()
                },
            )
            .await?;
        }
        tx.commit().await?;
        advance(env, it, "items_ready").await?;
        report.steps.push(format!("{} review items ready in run {}", smeta.items.len(), it.eval_run_id));
    }
    Ok(())
}

/// `train continue` (seed steps 3, 5, 6, 8, 9, 10): advances the current iteration until the next
/// human gate (or a failure), or applies a decision, or starts the next iteration.
///
/// # Errors
/// [`TrainError::Refused`] when the request does not fit the state (S-98, S-99, deciding before
/// the candidate review); [`TrainError::Failed`] when a stage failed; [`TrainError::Blocked`]
/// for a missing optimizer executable; store/queue errors.
pub async fn continue_session(env: &TrainEnv<'_>, session_id: &str, req: &ContinueRequest) -> Result<StepReport, TrainError> {
    let (session, mut it) = load(env, session_id).await?;
    let _ = skillforge_engine::reaper::reap_once(env.queue.as_ref()).await;
    let mut report = StepReport { session_id: session.id.clone(), iteration_id: it.id.clone(), ..Default::default() };
    if req.promote.is_some() || req.reject.is_some() {
        decide(env, &mut it, req, &mut report).await?;
        report.state = it.state.clone();
        return Ok(report);
    }
    if req.start_next {
        check_start_next(&it.state, &it.decision_reason).map_err(|e| TrainError::Refused(format!("--start-next refused (S-99): {e}")))?;
        let (session, mut next) = start_next(env, &session, &it, &mut report).await?;
        prepare_items(env, &session, &mut next, &mut report).await?;
        report.iteration_id = next.id.clone();
        report.state = next.state.clone();
        report.next_action = format!("skillforge train continue --session {}", session.id);
        return Ok(report);
    }
    loop {
        report.state = it.state.clone();
        let state = it.state.clone();
        match state.as_str() {
            "request_confirmed" | "workspace_ready" => prepare_items(env, &session, &mut it, &mut report).await?,
            "items_ready" => {
                if !generate_options(env, &session, &mut it, req.wait, &mut report).await? {
                    report.next_action = format!("options are being generated; run `skillforge train continue --session {}` again", session.id);
                    break;
                }
            }
            "options_generated" => {
                let dir = publish_review(env, &session, &mut it, &mut report).await?;
                report.next_action = format!(
                    "review the packet in {}: set reviewer and fill feedback.yml, then run `skillforge train continue --session {}`",
                    dir.display(),
                    session.id
                );
                report.review_packet = Some(dir.display().to_string());
                report.state = it.state.clone();
                break;
            }
            "review_published" => {
                if !sync_feedback(env, &session, &mut it, &mut report).await? {
                    let meta = IterationMeta::parse(&it.metadata_json);
                    report.review_packet = Some(meta.review.path.clone());
                    report.next_action = format!(
                        "waiting for human feedback: fill {}/feedback.yml, then run `skillforge train continue --session {}`",
                        meta.review.path, session.id
                    );
                    break;
                }
            }
            "feedback_synced" => {
                if !evaluate_options(env, &mut it, req.wait, &mut report).await? {
                    report.next_action =
                        format!("the evaluator's jobs are running; run `skillforge train continue --session {}` again", session.id);
                    break;
                }
                export(env, &session, &mut it, &mut report).await?;
            }
            "training_package_created" => {
                if !run_optimizer(env, &session, &mut it, req, &mut report).await? {
                    report.next_action =
                        format!("the optimizer is running; `skillforge train status --session {}` shows it", session.id);
                    break;
                }
            }
            "optimizer_completed" => {
                import_candidate(env, &mut it, &mut report).await?;
                report.state = it.state.clone();
                report.next_action = next_action_for(&it.state, &session.id);
                break;
            }
            "candidate_created" => {
                publish_candidate_review(env, &session, &mut it, &mut report).await?;
                report.state = it.state.clone();
                report.next_action = next_action_for(&it.state, &session.id);
                break;
            }
            _ => {
                report.next_action = next_action_for(&it.state, &session.id);
                break;
            }
        }
    }
    report.state = it.state.clone();
    if !it.candidate_version_id.is_empty() {
        report.candidate_version = Some(it.candidate_version_id.clone());
    }
    Ok(report)
}

/// The next action for a state where `continue` stops (facts §3 `next_action`).
pub fn next_action_for(state: &str, session_id: &str) -> String {
    match state {
        "request_confirmed" => "start a session with --workspace-repo (S-98)".into(),
        "candidate_created" => format!("skillforge train continue --session {session_id} (publish candidate review context)"),
        "candidate_review_published" => format!(
            "decide: skillforge train continue --session {session_id} --promote VERSION, or --reject VERSION --reason TEXT"
        ),
        s if is_terminal(s) => format!("skillforge train continue --session {session_id} --start-next"),
        _ => format!("skillforge train continue --session {session_id}"),
    }
}

/// items_ready → options_generated: one `agent` job per item (idempotency key
/// `<session>:<iteration>:<item>:options`), results applied by [`TrainResultHandler`]. Returns
/// false when not every item has its options yet (jobs still running and `wait` is false).
async fn generate_options(
    env: &TrainEnv<'_>,
    session: &SessionRow,
    it: &mut IterationRow,
    wait: bool,
    report: &mut StepReport,
) -> Result<bool, TrainError> {
    let smeta = SessionMeta::parse(&session.metadata_json);
    let stage = env.workflow.stage("option_generation");
    let version = skillforge_store::templates::get_version(env.store.pool(), &it.base_template_version_id)
        .await?
        .ok_or_else(|| TrainError::Invalid(format!("template version `{}` is missing", it.base_template_version_id)))?;
    let run = get_run(env.store.pool(), &it.eval_run_id)
        .await?
        .ok_or_else(|| TrainError::Invalid(format!("review run `{}` is missing", it.eval_run_id)))?;
    let mut meta = IterationMeta::parse(&it.metadata_json);
    let existing = list_items(env.store.pool(), &run.id).await?;
    let mut job_ids = Vec::new();
    let mut n_created = 0;
    for item in &smeta.items {
        let have = existing.iter().find(|i| i.item.item_id == item.id).map_or(0, |i| i.options.len());
        if i64::try_from(have).unwrap_or(0) >= run.options_count {
            continue;
        }
        let mut payload = AgentPayload::new(
            if smeta.runtime.is_empty() { super::control::DEFAULT_RUNTIME } else { &smeta.runtime },
            generation_prompt(&session.request_summary, item, run.options_count, &version.id, &version.content),
        );
        payload.model = smeta.model.clone();
        payload.timeout_secs = Some(stage.timeout_secs);
        let spec = generation_job(stage, &payload, generation_key(&session.id, &it.id, &item.id))?;
        let enqueued = env.queue.enqueue(&spec).await?;
        if let Some(job) = env.queue.get(&enqueued.job_id).await?
            && matches!(job.state, JobState::Failed | JobState::Dead | JobState::Cancelled | JobState::Stale)
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
            if smeta.runtime.is_empty() { DEFAULT_RUNTIME } else { &smeta.runtime }
        ));
        if !wait {
            return Ok(false);
        }
        let jobs = env.waiter.wait_jobs(&job_ids, "generating options").await?;
        let failures = apply_generation_results(env, &jobs).await?;
        if !failures.is_empty() {
            meta.generation.status = "failed".into();
            meta.generation.error = failures.join("; ");
            save_meta(env, it, &meta).await?;
            return Err(TrainError::Failed(format!("option generation failed: {}", meta.generation.error)));
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
        return Err(TrainError::Failed(format!("items without options after generation: {}", missing.join(", "))));
    }
    meta.generation.status = "succeeded".into();
    save_meta(env, it, &meta).await?;
    advance(env, it, "options_generated").await?;
    report.steps.push(format!("options generated: {} items × {} options", items.len(), run.options_count));
    Ok(true)
}

/// Applies finished generation jobs, each in its own store transaction; returns failure texts.
async fn apply_generation_results(env: &TrainEnv<'_>, jobs: &[Job]) -> Result<Vec<String>, TrainError> {
    let handler = TrainResultHandler { blobs: BlobStore::in_home(env.home) };
    let mut failures = Vec::new();
    for job in jobs {
        if job.state != JobState::Succeeded {
            let why = job.error.clone().or_else(|| job.outcome.as_ref().map(|o| format!("{} {}", o.exit.label(), o.stderr_tail.trim()))).unwrap_or_default();
            failures.push(format!("job {} ended {} {why}", job.id, job.state));
            continue;
        }
        let mut tx = env.store.begin().await?;
        match handler.apply_generation(&mut tx, job).await {
            Ok(_) => tx.commit().await?,
            Err(e) => {
                let _ = tx.rollback().await;
                failures.push(e);
            }
        }
    }
    Ok(failures)
}

fn sha256_hex(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// options_generated → review_published: the blind Markdown packet in `<iteration>/review`.
async fn publish_review(env: &TrainEnv<'_>, session: &SessionRow, it: &mut IterationRow, report: &mut StepReport) -> Result<PathBuf, TrainError> {
    let dir = env.iteration_dir(&session.id, &it.id).join(REVIEW_DIR);
    let blobs = BlobStore::in_home(env.home);
    let done = crate::packet::export_packet(env.store, &blobs, &it.eval_run_id, &dir, true).await.map_err(|e| match e {
        crate::packet::PacketError::Store(s) => TrainError::Store(s),
        crate::packet::PacketError::Io(m) => TrainError::Env(m),
        crate::packet::PacketError::Invalid(m) => TrainError::Failed(m),
    })?;
    let mut meta = IterationMeta::parse(&it.metadata_json);
    meta.review.status = "succeeded".into();
    meta.review.path = dir.display().to_string();
    meta.review.written_sha256 = sha256_hex(&done.feedback_template);
    meta.feedback_sync.status = "waiting".into();
    save_meta(env, it, &meta).await?;
    advance(env, it, "review_published").await?;
    report.steps.push(format!("review packet published: {} ({} items)", dir.display(), done.n_items));
    Ok(dir)
}

/// review_published → feedback_synced when a human filled `feedback.yml`; false while it is
/// still the template as written.
async fn sync_feedback(env: &TrainEnv<'_>, _session: &SessionRow, it: &mut IterationRow, report: &mut StepReport) -> Result<bool, TrainError> {
    let mut meta = IterationMeta::parse(&it.metadata_json);
    let dir = PathBuf::from(&meta.review.path);
    let text = std::fs::read_to_string(dir.join(skillforge_contract::FEEDBACK_FILE)).unwrap_or_default();
    if text.is_empty() || sha256_hex(&text) == meta.review.written_sha256 {
        return Ok(false);
    }
    let done = crate::packet::import_packet(env.store, &dir, None).await.map_err(|e| match e {
        crate::packet::PacketError::Store(s) => TrainError::Store(s),
        other => TrainError::Invalid(format!("{other}; fix feedback.yml and run `train continue` again")),
    })?;
    meta.feedback_sync.status = "succeeded".into();
    meta.feedback_sync.path = done.source_url.clone();
    save_meta(env, it, &meta).await?;
    advance(env, it, "feedback_synced").await?;
    report.steps.push(format!(
        "feedback synced from {} ({} ranked, {} A/B events)",
        done.reviewer,
        done.counts.ranked_inserted + done.counts.ranked_updated,
        done.counts.feedback_inserted + done.counts.feedback_updated
    ));
    Ok(true)
}

/// Evaluator jobs of train mode: enqueued on the session's queue and waited for with its waiter;
/// without `wait`, a job that is not finished yet is [`EvalRunError::Pending`].
struct TrainEvalJobs<'a, 'e> {
    env: &'a TrainEnv<'e>,
    wait: bool,
}

#[async_trait::async_trait]
impl EvalJobs for TrainEvalJobs<'_, '_> {
    async fn run_job(&self, spec: &skillforge_engine::JobSpec) -> Result<Job, EvalRunError> {
        let enqueued = self.env.queue.enqueue(spec).await?;
        if !self.wait {
            return match self.env.queue.get(&enqueued.job_id).await? {
                Some(job) if job.state.is_terminal() || job.state == JobState::Stale => Ok(job),
                _ => Err(EvalRunError::Pending(enqueued.job_id)),
            };
        }
        let mut jobs = self.env.waiter.wait_jobs(std::slice::from_ref(&enqueued.job_id), "evaluating options").await?;
        Ok(jobs.remove(0))
    }
}

/// Seed step 5, at feedback_synced before the export: when the review run names an evaluator,
/// scores every option through [`evaluate_run`] (checks → render → judge, S-101) so the export
/// carries the scores and failure packets. A run without an evaluator is left untouched (no
/// metadata written). Done once per iteration (`evaluation.status` `succeeded`); a re-run after
/// a failure or `--no-wait` reuses the judge jobs already enqueued (idempotency key by prompt)
/// and replaces the scores. Returns false when a job is still running and `wait` is false.
async fn evaluate_options(env: &TrainEnv<'_>, it: &mut IterationRow, wait: bool, report: &mut StepReport) -> Result<bool, TrainError> {
    let run = get_run(env.store.pool(), &it.eval_run_id)
        .await?
        .ok_or_else(|| TrainError::Invalid(format!("review run `{}` is missing", it.eval_run_id)))?;
    let Some(profile) = effective_profile(run.metadata().as_ref(), None) else { return Ok(true) };
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
    let jobs = TrainEvalJobs { env, wait };
    match evaluate_run(env.store, env.home, &run, &profile, runtime.as_deref(), &jobs).await {
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
            report.steps.push(format!("evaluator {}: job {job_id} enqueued", profile.profile_id));
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

/// feedback_synced → training_package_created: `<iteration>/training.json`.
async fn export(env: &TrainEnv<'_>, session: &SessionRow, it: &mut IterationRow, report: &mut StepReport) -> Result<(), TrainError> {
    let package = training_package(env.store.pool(), &it.eval_run_id).await.map_err(|e| match e {
        PackageError::Store(s) => TrainError::Store(s),
        other => TrainError::Failed(format!("export training package: {other}")),
    })?;
    validate_training_package(&package)
        .map_err(|e| TrainError::Failed(format!("export training package: the optimizer would refuse it: {e}")))?;
    let bytes = serialize_package(&package).map_err(|e| TrainError::Failed(format!("encode training package: {e}")))?;
    let path = env.iteration_dir(&session.id, &it.id).join(TRAINING_FILE);
    write_file(&path, bytes.as_bytes())?;
    let mut meta = IterationMeta::parse(&it.metadata_json);
    meta.export.status = "succeeded".into();
    meta.export.path = path.display().to_string();
    save_meta(env, it, &meta).await?;
    advance(env, it, "training_package_created").await?;
    report.steps.push(format!(
        "training package exported: {} ({} ranked events, {} pairwise preferences)",
        path.display(),
        package.ranked_feedback_events.len(),
        package.pairwise_preferences.len()
    ));
    for warning in skillforge_contract::loader_warnings(&package) {
        report.steps.push(format!("warning: the external optimizer's data loader refuses this package: {warning}"));
    }
    Ok(())
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), TrainError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| TrainError::Env(format!("create `{}`: {e}", parent.display())))?;
    }
    std::fs::write(path, bytes).map_err(|e| TrainError::Env(format!("write `{}`: {e}", path.display())))
}

/// training_package_created → optimizer_completed: resumes the current attempt's job or starts
/// a new attempt (after a stale or failed one that left no candidate). Returns false when the
/// job runs and `wait` is false.
async fn run_optimizer(
    env: &TrainEnv<'_>,
    session: &SessionRow,
    it: &mut IterationRow,
    req: &ContinueRequest,
    report: &mut StepReport,
) -> Result<bool, TrainError> {
    let mut meta = IterationMeta::parse(&it.metadata_json);
    let out_root = env.iteration_dir(&session.id, &it.id).join(OPTIMIZER_DIR);
    let mut job_id = meta.optimizer.job_id.clone();
    if !job_id.is_empty() {
        let job = env.queue.get(&job_id).await?;
        let state = job.as_ref().map(|j| j.state);
        let needs_new_attempt = match state {
            Some(JobState::Queued | JobState::Running) => false,
            Some(JobState::Succeeded) => false,
            Some(JobState::Stale) | Some(JobState::Failed | JobState::Dead | JobState::Cancelled) | None => {
                // Recovery: a completed package in this attempt is imported; otherwise a new attempt.
                if let Some((dir, file)) = completed_attempt(Path::new(&meta.optimizer.attempt_dir)) {
                    if state == Some(JobState::Stale) {
                        let _ = env.queue.cancel(&job_id).await;
                    }
                    meta.optimizer.attempt_dir = dir.display().to_string();
                    meta.optimizer.candidate_output = file.display().to_string();
                    if state == Some(JobState::Stale) || req.backend.is_none() {
                        meta.optimizer.status = "recovered".into();
                        meta.optimizer.recovery_available = false;
                        save_meta(env, it, &meta).await?;
                        report.steps.push(format!("recovered the completed optimizer attempt {}", dir.display()));
                        advance(env, it, "optimizer_completed").await?;
                        return Ok(true);
                    }
                    false
                } else {
                    if state == Some(JobState::Stale) {
                        let _ = env.queue.cancel(&job_id).await;
                        report.steps.push(format!("optimizer job {job_id} went stale without a result; starting a new attempt"));
                    }
                    true
                }
            }
        };
        if needs_new_attempt {
            job_id.clear();
        }
    }
    if job_id.is_empty() {
        let backend = req.backend.clone().or_else(|| (!meta.optimizer.backend.is_empty()).then(|| meta.optimizer.backend.clone()));
        let backend = backend.unwrap_or_else(|| DEFAULT_BACKEND.to_owned());
        let attempt = meta.optimizer.attempt + 1;
        let dir = attempt_dir(&out_root, attempt);
        meta.optimizer.backend = backend.clone();
        meta.optimizer.out_root = out_root.display().to_string();
        meta.optimizer.status = "preflight_running".into();
        save_meta(env, it, &meta).await?;
        let training = PathBuf::from(&meta.export.path);
        let artifact_root = BlobStore::in_home(env.home).root().to_path_buf();
        let pre = match preflight(env.workflow, &backend, &env.skillforge_bin, &training, &artifact_root, &dir, &session.id) {
            Ok(p) => p,
            Err(e) => {
                meta.optimizer.status = "failed".into();
                meta.optimizer.error = e.to_string();
                meta.optimizer.recovery_available = false;
                save_meta(env, it, &meta).await?;
                return Err(match e {
                    super::optimizer::BackendError::Unknown { .. } => TrainError::Invalid(e.to_string()),
                    super::optimizer::BackendError::MissingExecutable { .. } => TrainError::Blocked(format!("blocked_config: {e}")),
                });
            }
        };
        std::fs::create_dir_all(&dir).map_err(|e| TrainError::Env(format!("create `{}`: {e}", dir.display())))?;
        env.reporter.step(&format!(
            "optimizer preflight: backend {} ({}) → {}; attempt {}; lock {}\n  argv: {}",
            pre.backend,
            if pre.description.is_empty() { "configured" } else { &pre.description },
            pre.resolved_program.as_deref().unwrap_or("?"),
            pre.attempt_dir,
            pre.lock,
            pre.argv.join(" ")
        ));
        let spec = optimizer_job(env.workflow.stage("optimizer"), &pre, format!("{}:{}:optimizer:attempt-{attempt:03}", session.id, it.id))?;
        let enqueued = env.queue.enqueue(&spec).await?;
        meta.optimizer.attempt = attempt;
        meta.optimizer.argv = pre.argv.clone();
        meta.optimizer.job_id = enqueued.job_id.clone();
        meta.optimizer.attempt_dir = pre.attempt_dir.clone();
        meta.optimizer.candidate_output = pre.candidate_output.clone();
        meta.optimizer.status = "running".into();
        meta.optimizer.optimizer_attempt_state = "running".into();
        meta.optimizer.error.clear();
        meta.optimizer.recovery_available = false;
        save_meta(env, it, &meta).await?;
        report.steps.push(format!("optimizer attempt {attempt} enqueued as job {} (backend {backend})", enqueued.job_id));
        report.preflight = Some(pre);
        job_id = enqueued.job_id;
    }
    if !req.wait
        && let Some(job) = env.queue.get(&job_id).await?
        && job.state != JobState::Succeeded
    {
        return Ok(false);
    }
    let job = env.waiter.wait_jobs(std::slice::from_ref(&job_id), "optimizer").await?.remove(0);
    match job.state {
        JobState::Succeeded => {
            meta.optimizer.status = "succeeded".into();
            save_meta(env, it, &meta).await?;
            advance(env, it, "optimizer_completed").await?;
            report.steps.push(format!("optimizer attempt {} finished", meta.optimizer.attempt));
            Ok(true)
        }
        JobState::Stale => {
            meta.optimizer.status = "stale".into();
            meta.optimizer.recovery_available = true;
            save_meta(env, it, &meta).await?;
            Err(TrainError::Failed(format!(
                "optimizer job {} went stale (its worker stopped heartbeating); recovery is available: run `skillforge train continue --session {}`",
                job.id, session.id
            )))
        }
        _ => {
            let why = job
                .error
                .clone()
                .or_else(|| job.outcome.as_ref().map(|o| format!("{} (exit {:?}): {}", o.exit.label(), o.exit_code, o.stderr_tail.trim())))
                .unwrap_or_else(|| format!("job ended {}", job.state));
            let is_not_runnable = job.outcome.as_ref().is_some_and(|o| o.exit.label() == "not_runnable");
            let recovery = completed_attempt(Path::new(&meta.optimizer.attempt_dir)).is_some();
            meta.optimizer.status = "failed".into();
            meta.optimizer.error = if is_not_runnable { format!("executable not runnable: {why}") } else { why.clone() };
            meta.optimizer.recovery_available = recovery;
            save_meta(env, it, &meta).await?;
            if recovery {
                Err(TrainError::Failed(format!(
                    "optimizer failed ({why}) after writing a completed candidate package; recovery_available: run \
                     `skillforge train recover --session {} --out-root {}`",
                    session.id, meta.optimizer.out_root
                )))
            } else if is_config_error(&meta.optimizer.error) {
                Err(TrainError::Blocked(format!("blocked_config: optimizer failed: {}", meta.optimizer.error)))
            } else {
                Err(TrainError::Failed(format!("optimizer failed: {why}")))
            }
        }
    }
}

/// optimizer_completed → candidate_created | optimizer_completed_no_candidate through the import
/// gate (S-100).
async fn import_candidate(env: &TrainEnv<'_>, it: &mut IterationRow, report: &mut StepReport) -> Result<(), TrainError> {
    let mut meta = IterationMeta::parse(&it.metadata_json);
    let dir = PathBuf::from(&meta.optimizer.attempt_dir);
    let file = PathBuf::from(&meta.optimizer.candidate_output);
    let blobs = BlobStore::in_home(env.home);
    let result = if file.is_file() {
        import_gate(env.store, &blobs, &dir, &file).await
    } else {
        Err(format!("the optimizer wrote no candidate package at `{}`", file.display()))
    };
    match result {
        Ok(GateResult::Candidate { version_id, is_new }) => {
            {
                let mut conn = env.store.pool().acquire().await?;
                set_candidate_version(&mut conn, &it.id, &version_id).await?;
            }
            it.candidate_version_id = version_id.clone();
            meta.candidate_import.status = "succeeded".into();
            meta.candidate_import.error.clear();
            meta.optimizer.optimizer_attempt_state = "completed_candidate".into();
            meta.optimizer.recovery_available = false;
            save_meta(env, it, &meta).await?;
            advance(env, it, "candidate_created").await?;
            report.candidate_version = Some(version_id.clone());
            report.steps.push(format!(
                "candidate {version_id} imported as pending{}",
                if is_new { "" } else { " (already imported from this package; no duplicate)" }
            ));
            Ok(())
        }
        Ok(GateResult::NoCandidate { reason, details }) => {
            meta.candidate_import.status = "succeeded".into();
            meta.optimizer.optimizer_attempt_state = "completed_no_candidate".into();
            meta.optimizer.no_candidate_reason = reason.clone();
            meta.optimizer.no_candidate_details = details;
            meta.optimizer.recovery_available = false;
            save_meta(env, it, &meta).await?;
            advance(env, it, NO_CANDIDATE).await?;
            report.steps.push(format!("optimizer produced no candidate: {reason} (no pending version)"));
            Ok(())
        }
        Err(e) => {
            meta.candidate_import.status = "failed".into();
            meta.candidate_import.error = e.clone();
            meta.optimizer.optimizer_attempt_state = "candidate_import_failed".into();
            save_meta(env, it, &meta).await?;
            Err(TrainError::Failed(format!("candidate import failed: {e}")))
        }
    }
}

/// candidate_created → candidate_review_published: `<iteration>/candidate-review.md` with the
/// selection score, evaluator report, no-op status, promotability and the diff (seed step 8).
async fn publish_candidate_review(env: &TrainEnv<'_>, session: &SessionRow, it: &mut IterationRow, report: &mut StepReport) -> Result<(), TrainError> {
    let candidate = get_candidate(env.store.pool(), &it.candidate_version_id)
        .await?
        .ok_or_else(|| TrainError::Failed(format!("candidate `{}` is missing", it.candidate_version_id)))?;
    let eval_report: Option<serde_json::Value> = serde_json::from_str(&candidate.eval_report_json).ok();
    let promotable = eval_report.as_ref().and_then(|r| r.get("promotable")).map_or("unknown".to_owned(), |v| v.to_string());
    let diff = if candidate.diff_artifact_id.is_empty() {
        String::new()
    } else {
        match skillforge_store::artifacts::get_artifact(env.store.pool(), &candidate.diff_artifact_id).await? {
            Some(a) => BlobStore::in_home(env.home).get(&a.hash).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default(),
            None => String::new(),
        }
    };
    let base_content = skillforge_store::templates::get_version(env.store.pool(), &candidate.base_version_id).await?.map(|v| v.content_hash);
    let is_noop = base_content.as_deref() == Some(candidate.content_hash.as_str());
    let text = format!(
        "# Candidate review: {v}\n\nSession `{s}` · iteration `{i}` · base `{b}`\n\n\
         | | |\n|---|---|\n| selection score | {score} |\n| evaluator / test scores | {eval} |\n| gate status | not run |\n\
         | no-op (content unchanged) | {noop} |\n| promotable | {promotable} |\n| preference summary | {pref} |\n\n\
         ## Diff\n\n```diff\n{diff}\n```\n\n\
         Decide with `skillforge train continue --session {s} --promote {v}` or `--reject {v} --reason TEXT`.\n",
        v = candidate.version_id,
        s = session.id,
        i = it.id,
        b = candidate.base_version_id,
        score = candidate.score.map_or("none".to_owned(), |s| format!("{s:.3}")),
        eval = if candidate.eval_report_json.is_empty() { "none".to_owned() } else { format!("`{}`", candidate.eval_report_json) },
        noop = if is_noop { "yes" } else { "no" },
        pref = if candidate.preference_summary.is_empty() { "none" } else { &candidate.preference_summary },
        diff = diff.trim_end(),
    );
    let path = env.iteration_dir(&session.id, &it.id).join(CANDIDATE_REVIEW_FILE);
    write_file(&path, text.as_bytes())?;
    let mut meta = IterationMeta::parse(&it.metadata_json);
    meta.candidate_review.status = "succeeded".into();
    meta.candidate_review.path = path.display().to_string();
    meta.candidate_decision.status = "waiting".into();
    save_meta(env, it, &meta).await?;
    advance(env, it, "candidate_review_published").await?;
    report.steps.push(format!("candidate review published: {}", path.display()));
    Ok(())
}

/// `--promote V` / `--reject V --reason R` (seed step 9): only at candidate_review_published and
/// only for this iteration's candidate.
async fn decide(env: &TrainEnv<'_>, it: &mut IterationRow, req: &ContinueRequest, report: &mut StepReport) -> Result<(), TrainError> {
    let (version, reason, to) = match (&req.promote, &req.reject) {
        (Some(v), None) => (v.clone(), String::new(), PROMOTED),
        (None, Some((v, r))) => {
            if r.trim().is_empty() {
                return Err(TrainError::Invalid("--reject needs --reason TEXT".into()));
            }
            (v.clone(), r.clone(), REJECTED)
        }
        _ => return Err(TrainError::Invalid("give either --promote or --reject, not both".into())),
    };
    if it.state != "candidate_review_published" {
        return Err(TrainError::Refused(format!(
            "iteration `{}` is at `{}`; promote or reject only after the candidate review is published",
            it.id, it.state
        )));
    }
    if version != it.candidate_version_id {
        return Err(TrainError::Invalid(format!(
            "version `{version}` is not this iteration's candidate (`{}`)",
            it.candidate_version_id
        )));
    }
    check_transition(&it.state, to).map_err(|e| TrainError::Refused(e.to_string()))?;
    let outcome = if to == PROMOTED {
        promote_candidate(env.store, &version, &reason).await?
    } else {
        reject_candidate(env.store, &version, &reason).await?
    };
    match outcome {
        DecisionOutcome::Done { .. } => {}
        DecisionOutcome::NotFound => return Err(TrainError::Invalid(format!("candidate `{version}` not found"))),
        DecisionOutcome::WrongState(s) => return Err(TrainError::Refused(format!("candidate `{version}` is `{s}`, not pending"))),
    }
    {
        let mut conn = env.store.pool().acquire().await?;
        set_decision_reason(&mut conn, &it.id, &reason).await?;
    }
    it.decision_reason = reason;
    let mut meta = IterationMeta::parse(&it.metadata_json);
    meta.candidate_decision.status = if to == PROMOTED { "promoted".into() } else { "rejected".into() };
    save_meta(env, it, &meta).await?;
    advance(env, it, to).await?;
    report.steps.push(format!("candidate {version} {}", if to == PROMOTED { "promoted" } else { "rejected" }));
    report.next_action = next_action_for(&it.state, &it.session_id);
    Ok(())
}

/// `--start-next` (seed step 10): a new iteration on the template's current version.
async fn start_next(env: &TrainEnv<'_>, session: &SessionRow, prev: &IterationRow, report: &mut StepReport) -> Result<(SessionRow, IterationRow), TrainError> {
    let iterations = list_iterations(env.store.pool(), &session.id).await?;
    let base = current_version(env.store.pool(), &session.template_id)
        .await?
        .map_or_else(|| prev.base_template_version_id.clone(), |v| v.id);
    let id = iteration_id(&session.id, iterations.len() + 1);
    let mut conn = env.store.pool().acquire().await?;
    create_iteration(
        &mut conn,
        &NewIteration {
            id: &id,
            session_id: &session.id,
            eval_run_id: &id,
            base_template_version_id: &base,
            mode: &prev.mode,
            exploration_level: &prev.exploration_level,
            metadata_json: "{}",
        },
    )
    .await?;
    skillforge_store::train::set_session_state(&mut conn, &session.id, "request_confirmed").await?;
    drop(conn);
    report.steps.push(format!("iteration {id} started on {base} (previous iteration {} is {})", prev.id, prev.state));
    load(env, &session.id).await
}

/// `train recover` (seed step 7): imports a completed candidate from `out_root` (its newest
/// `attempts/attempt-NNN/candidate.json`, or `out_root/candidate.json`) or records the completed
/// no-candidate result, through the same gate as `continue`. Repeating it never duplicates a
/// version.
///
/// # Errors
/// [`TrainError::Refused`] while the optimizer still runs or before the package was exported;
/// [`TrainError::Invalid`] when `out_root` holds no completed package.
pub async fn recover(env: &TrainEnv<'_>, session_id: &str, out_root: &Path) -> Result<StepReport, TrainError> {
    let (session, mut it) = load(env, session_id).await?;
    let _ = skillforge_engine::reaper::reap_once(env.queue.as_ref()).await;
    let mut report = StepReport { session_id: session.id.clone(), iteration_id: it.id.clone(), ..Default::default() };
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
    let (dir, file) = completed_attempt(out_root).ok_or_else(|| {
        TrainError::Invalid(format!("no completed candidate package under `{}` (looked for attempts/attempt-NNN/candidate.json)", out_root.display()))
    })?;
    match it.state.as_str() {
        "training_package_created" | "optimizer_completed" => {
            meta.optimizer.attempt_dir = dir.display().to_string();
            meta.optimizer.candidate_output = file.display().to_string();
            meta.optimizer.status = "recovered".into();
            meta.optimizer.recovery_available = false;
            if meta.optimizer.out_root.is_empty() {
                meta.optimizer.out_root = out_root.display().to_string();
            }
            save_meta(env, &mut it, &meta).await?;
            advance(env, &mut it, "optimizer_completed").await?;
            report.steps.push(format!("recovering the completed optimizer attempt {}", dir.display()));
            import_candidate(env, &mut it, &mut report).await?;
        }
        s if s == NO_CANDIDATE || !it.candidate_version_id.is_empty() => {
            // Already recorded: run the gate again only to report the same result (no writes
            // for a known package or a no-candidate package).
            let blobs = BlobStore::in_home(env.home);
            match import_gate(env.store, &blobs, &dir, &file).await.map_err(TrainError::Failed)? {
                GateResult::Candidate { version_id, .. } => {
                    report.candidate_version = Some(version_id.clone());
                    report.steps.push(format!("already recorded: candidate {version_id} (no duplicate)"));
                }
                GateResult::NoCandidate { reason, .. } => {
                    report.steps.push(format!("already recorded: optimizer produced no candidate ({reason})"));
                }
            }
        }
        s if s == ABANDONED => return Err(TrainError::Refused(format!("iteration `{}` was abandoned", it.id))),
        other => {
            return Err(TrainError::Refused(format!(
                "iteration `{}` is at `{other}`; recover applies after the training package was exported",
                it.id
            )));
        }
    }
    report.state = it.state.clone();
    report.next_action = next_action_for(&it.state, &session.id);
    if !it.candidate_version_id.is_empty() {
        report.candidate_version = Some(it.candidate_version_id.clone());
    }
    Ok(report)
}
