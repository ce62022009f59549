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
//! compare-and-set (in the same store transaction as the step's metadata), so a step that already happened is not repeated and a racing control plane
//! cannot move the iteration twice. Job results are applied by [`TrainResultHandler`], which is
//! idempotent; candidate imports go through [`import_gate`], which never imports the same package
//! file twice.

use crate::train::iteration::Iteration;
use crate::train::meta::IterationMeta;
use skillforge_store::train::SessionRow;

use crate::train::state::{TrainState, check_start_next};
use crate::train::steps::{decide::*, evaluate::*, generate::*, optimize::*, review::*, start::*};
use crate::train::{TrainEnv, TrainError};

pub use crate::train::session::{
    CANDIDATE_REVIEW_FILE, ContinueRequest, DEFAULT_MODE, DEFAULT_RUNTIME, OPTIMIZER_DIR,
    REVIEW_DIR, StepReport, TRAINING_FILE, Waiting, load, next_action_for,
};
pub use crate::train::steps::recover::recover;
pub use crate::train::steps::start::{EvaluatorChoice, StartRequest, start, start_with_evaluator};

/// `train continue` (seed steps 3, 5, 6, 8, 9, 10): advances the current iteration until the next
/// human gate (or a failure), or applies a decision, or starts the next iteration.
///
/// # Errors
/// [`TrainError::Refused`] when the request does not fit the state (S-98, S-99, deciding before
/// the candidate review); [`TrainError::Failed`] when a stage failed; [`TrainError::Blocked`]
/// for a missing optimizer executable; store/queue errors.
pub async fn continue_session(
    env: &TrainEnv<'_>,
    session_id: &str,
    req: &ContinueRequest,
) -> Result<StepReport, TrainError> {
    let (session, mut it) = load(env, session_id).await?;
    let _ = skillforge_engine::reaper::reap_once(env.queue.as_ref()).await;
    let mut report = StepReport {
        session_id: session.id.clone(),
        iteration_id: it.id.clone(),
        ..Default::default()
    };
    if reconcile_decision(env, &mut it, &mut report).await? {
        report.state = it.state;
        report.next_action = next_action_for(it.state, &session.id);
    }
    if let Some(reason) = &req.abandon {
        abandon(env, &mut it, reason, &mut report).await?;
        report.state = it.state;
        return Ok(report);
    }
    if req.promote.is_some() || req.reject.is_some() {
        // The candidate the session just made, its review not published yet: published first,
        // so deciding on it needs no extra `continue` in between.
        if it.state == TrainState::CandidateCreated
            && let Some(step) = step_for(it.state)
        {
            run_step(step, env, &session, &mut it, req, &mut report).await?;
        }
        decide(env, &mut it, req, &mut report).await?;
        report.state = it.state;
        return Ok(report);
    }
    if req.start_next {
        check_start_next(it.state, &it.decision_reason)
            .map_err(|e| TrainError::Refused(format!("--start-next refused: {e}")))?;
        let (session, mut next) = start_next(env, &session, &it, &mut report).await?;
        prepare_items(env, &session, &mut next, &mut report).await?;
        report.iteration_id = next.id.clone();
        report.state = next.state;
        report.next_action = format!("skillforge train continue --session {}", session.id);
        return Ok(report);
    }
    loop {
        report.state = it.state;
        let Some(step) = step_for(it.state) else {
            report.next_action = next_action_for(it.state, &session.id);
            break;
        };
        if run_step(step, env, &session, &mut it, req, &mut report).await? == Flow::Stop {
            break;
        }
    }
    // The candidate review just published for a candidate already decided elsewhere.
    if reconcile_decision(env, &mut it, &mut report).await? {
        report.next_action = next_action_for(it.state, &session.id);
    }
    report.state = it.state;
    // The candidate review published (now or before): a person promotes or rejects it.
    if it.state == TrainState::CandidateReviewPublished {
        report.waiting = Some(Waiting::Person);
    }
    if !it.candidate_version_id.is_empty() {
        report.candidate_version = Some(it.candidate_version_id.clone());
    }
    Ok(report)
}

/// A step `continue` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    PrepareItems,
    GenerateOptions,
    PublishReview,
    SyncFeedback,
    EvaluateAndExport,
    RunOptimizer,
    ImportCandidate,
    PublishCandidateReview,
}

/// `train continue`'s table: the step each state runs (seed steps 1–8). A state not listed
/// (the candidate review awaiting a decision, the terminal states) stops with its next action.
const CONTINUE_TABLE: [(TrainState, Step); 9] = [
    (TrainState::RequestConfirmed, Step::PrepareItems),
    (TrainState::WorkspaceReady, Step::PrepareItems),
    (TrainState::ItemsReady, Step::GenerateOptions),
    (TrainState::OptionsGenerated, Step::PublishReview),
    (TrainState::ReviewPublished, Step::SyncFeedback),
    (TrainState::FeedbackSynced, Step::EvaluateAndExport),
    (TrainState::TrainingPackageCreated, Step::RunOptimizer),
    (TrainState::OptimizerCompleted, Step::ImportCandidate),
    (TrainState::CandidateCreated, Step::PublishCandidateReview),
];

fn step_for(state: TrainState) -> Option<Step> {
    CONTINUE_TABLE
        .iter()
        .find(|(s, _)| *s == state)
        .map(|(_, step)| *step)
}

/// Whether `continue` goes on after a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Next,
    Stop,
}

/// Runs one step of the table and says whether `continue` goes on (a gate, a running job or a
/// published packet stops it, with the report's next action set).
async fn run_step(
    step: Step,
    env: &TrainEnv<'_>,
    session: &SessionRow,
    it: &mut Iteration,
    req: &ContinueRequest,
    report: &mut StepReport,
) -> Result<Flow, TrainError> {
    let again = |what: &str| {
        format!(
            "{what}; run `skillforge train continue --session {}` again",
            session.id
        )
    };
    match step {
        Step::PrepareItems => prepare_items(env, session, it, report).await?,
        Step::GenerateOptions => {
            if !generate_options(env, session, it, req.wait, report).await? {
                report.next_action = again("options are being generated");
                report.waiting = Some(Waiting::Jobs);
                return Ok(Flow::Stop);
            }
        }
        Step::PublishReview => {
            let dir = publish_review(env, session, it, report).await?;
            report.review_packet = Some(dir.display().to_string());
            report.waiting = Some(Waiting::Person);
            if let Some(url) = &report.issue_url {
                report.next_action = format!(
                    "reviewers answer on {url} (one comment per review: short form or a fenced YAML block), then run `skillforge train continue --session {}`",
                    session.id
                );
                return Ok(Flow::Stop);
            }
            report.next_action = format!(
                "review the packet in {}: set reviewer and fill feedback.yml, then run `skillforge train continue --session {}`",
                dir.display(),
                session.id
            );
            return Ok(Flow::Stop);
        }
        Step::SyncFeedback => {
            if !sync_feedback(env, session, it, req.rankings_only, report).await? {
                report.waiting = Some(Waiting::Person);
                let meta = IterationMeta::parse(&it.metadata_json);
                if let Some(url) = &report.issue_url {
                    report.next_action = format!(
                        "waiting for review comments on {url} ({}), then run `skillforge train continue --session {}`",
                        meta.feedback_sync.error, session.id
                    );
                    return Ok(Flow::Stop);
                }
                report.review_packet = Some(meta.review.path.clone());
                report.next_action = format!(
                    "waiting for human feedback: fill {}/feedback.yml, then run `skillforge train continue --session {}`",
                    meta.review.path, session.id
                );
                return Ok(Flow::Stop);
            }
        }
        Step::EvaluateAndExport => {
            if !evaluate_options(env, it, req.wait, report).await? {
                report.next_action = again("the evaluator's jobs are running");
                report.waiting = Some(Waiting::Jobs);
                return Ok(Flow::Stop);
            }
            export(env, session, it, report).await?;
        }
        Step::RunOptimizer => {
            if !run_optimizer(env, session, it, req, report).await? {
                report.waiting = Some(Waiting::Jobs);
                report.next_action = format!(
                    "the optimizer is running; `skillforge train status --session {}` shows it",
                    session.id
                );
                return Ok(Flow::Stop);
            }
        }
        Step::ImportCandidate => {
            import_candidate(env, it, report).await?;
            report.next_action = next_action_for(it.state, &session.id);
            return Ok(Flow::Stop);
        }
        Step::PublishCandidateReview => {
            publish_candidate_review(env, session, it, report).await?;
            report.next_action = next_action_for(it.state, &session.id);
            return Ok(Flow::Stop);
        }
    }
    Ok(Flow::Next)
}

/// `--abandon --reason R`: the iteration moves to `run_abandoned` from any state that is not
/// terminal, its reason recorded with the state in one transaction; `--start-next` then starts
/// the next one. Jobs of the iteration still running finish without moving it.
///
/// # Errors
/// [`TrainError::Invalid`] without a reason; [`TrainError::Refused`] for an iteration already
/// resolved; store errors.
async fn abandon(
    env: &TrainEnv<'_>,
    it: &mut crate::train::iteration::Iteration,
    reason: &str,
    report: &mut StepReport,
) -> Result<(), TrainError> {
    if reason.trim().is_empty() {
        return Err(TrainError::Invalid("--abandon needs --reason TEXT".into()));
    }
    if it.state.is_terminal() {
        return Err(TrainError::Refused(format!(
            "iteration `{}` is already resolved ({}); start the next one with `skillforge train continue --session {} --start-next`",
            it.id,
            crate::train::phase::describe(it.state.as_str()),
            it.session_id
        )));
    }
    crate::train::state::check_transition(it.state, TrainState::Abandoned)
        .map_err(|e| TrainError::Refused(e.to_string()))?;
    let mut tx = env.store.begin().await?;
    skillforge_store::train::set_decision_reason(&mut tx, &it.id, reason.trim()).await?;
    crate::train::session::advance_on(&mut tx, it, TrainState::Abandoned, None).await?;
    tx.commit().await?;
    it.decision_reason = reason.trim().to_owned();
    report
        .steps
        .push(format!("iteration {} abandoned: {}", it.id, reason.trim()));
    report.next_action = next_action_for(it.state, &it.session_id);
    Ok(())
}
