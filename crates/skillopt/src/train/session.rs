//! The session plumbing every train step shares: what a step reports ([`StepReport`]), what
//! `train continue` may carry ([`ContinueRequest`]), loading a session, advancing its iteration
//! through the state machine (compare-and-set) and saving the iteration's metadata.

use std::path::Path;

use serde::Serialize;
use sha2::{Digest, Sha256};
use skillforge_store::train::{
    IterationRow, SessionRow, get_session, list_iterations, set_iteration_metadata, set_iteration_state,
};

use crate::train::meta::IterationMeta;
use crate::train::optimizer::Preflight;
use crate::train::state::TrainState;
use crate::train::state::{Transition, check_transition, is_terminal};
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
    /// The review issue, for a session reviewing on GitHub.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub issue_url: Option<String>,
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

pub(crate) fn new_session_id() -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!("ts-{}", &id[..10])
}

pub(crate) fn iteration_id(session_id: &str, n: usize) -> String {
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
pub(crate) async fn advance(env: &TrainEnv<'_>, it: &mut IterationRow, to: TrainState) -> Result<(), TrainError> {
    let to = to.as_str();
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

pub(crate) async fn save_meta(env: &TrainEnv<'_>, it: &mut IterationRow, meta: &IterationMeta) -> Result<(), TrainError> {
    let json = meta.to_json();
    let mut conn = env.store.pool().acquire().await?;
    set_iteration_metadata(&mut conn, &it.id, &json).await?;
    it.metadata_json = json;
    Ok(())
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

pub(crate) fn sha256_hex(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

pub(crate) fn write_file(path: &Path, bytes: &[u8]) -> Result<(), TrainError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| TrainError::Env(format!("create `{}`: {e}", parent.display())))?;
    }
    std::fs::write(path, bytes).map_err(|e| TrainError::Env(format!("write `{}`: {e}", path.display())))
}
