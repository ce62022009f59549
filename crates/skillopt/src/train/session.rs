//! The session plumbing every train step shares: what a step reports ([`StepReport`]), what
//! `train continue` may carry ([`ContinueRequest`]), loading a session, advancing its iteration
//! through the state machine (compare-and-set, with the metadata of the step in the same store
//! transaction) and saving the iteration's metadata.

use std::path::Path;

use serde::Serialize;
use skillforge_stage::fs::write_atomic;
use skillforge_store::train::{
    SessionRow, get_session, list_iterations, set_iteration_metadata, set_iteration_state,
    set_iteration_state_and_metadata,
};
use sqlx::SqliteConnection;

use crate::train::iteration::Iteration;
use crate::train::meta::IterationMeta;
use crate::train::optimizer::Preflight;
use crate::train::state::TrainState;
use crate::train::state::{Transition, check_transition};
use crate::train::{TrainEnv, TrainError};

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

/// What a train command did: the iteration afterwards, the steps taken, what to do next.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StepReport {
    /// Session id.
    pub session_id: String,
    /// Current iteration id.
    pub iteration_id: String,
    /// Iteration state afterwards (serialized as its stored name).
    pub state: TrainState,
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
    /// The review issue, for a session reviewing on GitHub.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issue_url: Option<String>,
    /// What the session waits for when the command stopped before its next step could run:
    /// `None` when nothing is waited for (the next step is the operator's to run, or the
    /// iteration ended). Not serialized (the `--json` report is unchanged); the CLI maps it to
    /// exit 4 ("not decided yet").
    #[serde(skip)]
    pub waiting: Option<Waiting>,
}

/// What a train session waits for when a command stops ([`StepReport::waiting`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Waiting {
    /// A person: review feedback on the published packet or issue, or a promote/reject decision
    /// on the candidate review.
    Person,
    /// Jobs still running (`--no-wait`, or the optimizer, which runs detached): ask again later.
    Jobs,
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
    /// `--abandon --reason R`: the reason.
    pub abandon: Option<String>,
    /// `--rankings-only`: sync feedback whose items rank options but name no traits or
    /// improvements (refused otherwise: the built-in optimizer learns nothing from it).
    pub rankings_only: bool,
    /// Wait for jobs (false: enqueue and return; the next `continue` picks them up).
    pub wait: bool,
}

pub(crate) fn new_session_id() -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!("ts-{}", &id[..10])
}

pub(crate) fn iteration_id(session_id: &str, n: usize) -> String {
    format!("{session_id}-i{n:03}")
}

/// Loads a session and its current (newest) iteration, the iteration's state parsed.
///
/// # Errors
/// [`TrainError::Invalid`] for an unknown session, a session without an iteration, or a stored
/// state outside the vocabulary.
pub async fn load(
    env: &TrainEnv<'_>,
    session_id: &str,
) -> Result<(SessionRow, Iteration), TrainError> {
    let Some(session) = get_session(env.store.pool(), session_id).await? else {
        let known = skillforge_store::train::list_session_ids(env.store.pool(), 10).await?;
        let which = match known.as_slice() {
            [] => "this home has none yet".to_owned(),
            ids => format!("this home has: {}", ids.join(", ")),
        };
        return Err(TrainError::Invalid(format!(
            "train session `{session_id}` not found ({which}); start one with `skillforge train start`"
        )));
    };
    let iteration = list_iterations(env.store.pool(), session_id)
        .await?
        .pop()
        .ok_or_else(|| {
            TrainError::Invalid(format!("train session `{session_id}` has no iteration"))
        })?;
    Ok((session, Iteration::try_from(iteration)?))
}

/// Moves `it` to `to` after checking the transition; a no-op when already there.
///
/// # Errors
/// [`TrainError::Refused`] for a transition the table does not allow or a lost compare-and-set.
pub(crate) async fn advance(
    env: &TrainEnv<'_>,
    it: &mut Iteration,
    to: TrainState,
) -> Result<(), TrainError> {
    let mut conn = env.store.pool().acquire().await?;
    advance_on(&mut conn, it, to, None).await
}

/// Moves `it` to `to` and records `meta` on it in one store transaction (both written or
/// neither); when `it` is already at `to`, only `meta` is written.
///
/// # Errors
/// As [`advance`].
pub(crate) async fn advance_with_meta(
    env: &TrainEnv<'_>,
    it: &mut Iteration,
    to: TrainState,
    meta: &IterationMeta,
) -> Result<(), TrainError> {
    let mut conn = env.store.pool().acquire().await?;
    advance_on(&mut conn, it, to, Some(meta)).await
}

/// [`advance`] (with `meta`: [`advance_with_meta`]) on `conn`. Inside a caller's transaction the
/// transition commits or rolls back with the caller's other writes of the step; `it` shows the
/// transition once this returns.
///
/// # Errors
/// As [`advance`].
pub(crate) async fn advance_on(
    conn: &mut SqliteConnection,
    it: &mut Iteration,
    to: TrainState,
    meta: Option<&IterationMeta>,
) -> Result<(), TrainError> {
    let kind = check_transition(it.state, to).map_err(|e| TrainError::Refused(e.to_string()))?;
    let json = meta.map(IterationMeta::to_json);
    match kind {
        Transition::NoOp => {
            if let Some(json) = json {
                set_iteration_metadata(conn, &it.id, &json).await?;
                it.metadata_json = json;
            }
        }
        Transition::Advance => {
            let (from, to_name) = (it.state.as_str(), to.as_str());
            let is_moved = match &json {
                Some(json) => {
                    set_iteration_state_and_metadata(conn, &it.id, from, to_name, json).await?
                }
                None => set_iteration_state(conn, &it.id, from, to_name).await?,
            };
            if !is_moved {
                return Err(TrainError::Refused(format!(
                    "iteration `{}` changed while this command ran (another `train continue`?); run `train status`",
                    it.id
                )));
            }
            it.state = to;
            if let Some(json) = json {
                it.metadata_json = json;
            }
        }
    }
    Ok(())
}

/// Records `meta` on `it` (no state change).
///
/// # Errors
/// Store errors.
pub(crate) async fn save_meta(
    env: &TrainEnv<'_>,
    it: &mut Iteration,
    meta: &IterationMeta,
) -> Result<(), TrainError> {
    let json = meta.to_json();
    let mut conn = env.store.pool().acquire().await?;
    set_iteration_metadata(&mut conn, &it.id, &json).await?;
    it.metadata_json = json;
    Ok(())
}

/// What a session without a workspace repository asks for (it stops at request_confirmed).
pub const WITHOUT_WORKSPACE: &str = "start a new session with --workspace-repo (a local checkout \
     such as `.`, or owner/repo for review on GitHub): this one has nowhere to do review work";

/// The next action for a state where `continue` stops (facts §3 `next_action`).
pub fn next_action_for(state: TrainState, session_id: &str) -> String {
    match state {
        // S-98: no review work without a workspace repository.
        TrainState::RequestConfirmed => WITHOUT_WORKSPACE.into(),
        TrainState::CandidateCreated => {
            format!(
                "skillforge train continue --session {session_id} (publish candidate review context)"
            )
        }
        TrainState::CandidateReviewPublished => format!(
            "decide: skillforge train continue --session {session_id} --promote VERSION, or --reject VERSION --reason TEXT"
        ),
        TrainState::NoCandidate
        | TrainState::Promoted
        | TrainState::Rejected
        | TrainState::Abandoned => {
            format!("skillforge train continue --session {session_id} --start-next")
        }
        TrainState::WorkspaceReady
        | TrainState::ItemsReady
        | TrainState::OptionsGenerated
        | TrainState::ReviewPublished
        | TrainState::FeedbackSynced
        | TrainState::TrainingPackageCreated
        | TrainState::OptimizerCompleted => {
            format!("skillforge train continue --session {session_id}")
        }
    }
}

/// Writes `bytes` to `path` atomically, its parent dirs created ([`write_atomic`]).
///
/// # Errors
/// [`TrainError::Env`] naming the file and the step that failed.
pub(crate) fn write_file(path: &Path, bytes: &[u8]) -> Result<(), TrainError> {
    write_atomic(path, bytes).map_err(|e| TrainError::Env(e.to_string()))
}
