//! A train iteration as the control plane works with it: the stored row
//! (`skillopt_train_iterations`) with its state parsed once, at load, into a [`TrainState`].

use skillforge_store::train::IterationRow;

use crate::train::TrainError;
use crate::train::state::TrainState;

/// One train iteration: the columns of its [`IterationRow`], the state typed. Steps compare and
/// match [`TrainState`] values; the stored name is written only by the store's compare-and-set
/// (`crate::train::session::advance`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Iteration {
    /// Iteration id (`<session>-iNNN`).
    pub id: String,
    /// Session id.
    pub session_id: String,
    /// The review run of this iteration.
    pub eval_run_id: String,
    /// Template version reviewed in this iteration.
    pub base_template_version_id: String,
    /// Imported candidate version, '' until imported.
    pub candidate_version_id: String,
    /// Review mode.
    pub mode: String,
    /// Exploration level.
    pub exploration_level: String,
    /// Iteration state (facts §3).
    pub state: TrainState,
    /// Review issue repo or ''.
    pub issue_repo: String,
    /// Review issue number or 0.
    pub issue_number: i64,
    /// Review issue URL or ''.
    pub issue_url: String,
    /// Candidate pull request repo or ''.
    pub pull_request_repo: String,
    /// Candidate pull request number or 0.
    pub pull_request_number: i64,
    /// Candidate pull request URL or ''.
    pub pull_request_url: String,
    /// Reason given with promote/reject.
    pub decision_reason: String,
    /// '' or a JSON object (per-stage status, job ids, paths, errors).
    pub metadata_json: String,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
}

impl TryFrom<IterationRow> for Iteration {
    type Error = TrainError;

    /// The row with its state parsed (an empty state is `request_confirmed`).
    ///
    /// # Errors
    /// [`TrainError::Invalid`] for a state outside the vocabulary, naming the iteration.
    fn try_from(row: IterationRow) -> Result<Self, TrainError> {
        let IterationRow {
            id,
            session_id,
            eval_run_id,
            base_template_version_id,
            candidate_version_id,
            mode,
            exploration_level,
            state,
            issue_repo,
            issue_number,
            issue_url,
            pull_request_repo,
            pull_request_number,
            pull_request_url,
            decision_reason,
            metadata_json,
            created_at,
            updated_at,
        } = row;
        let state = parse_state(&id, &state)?;
        Ok(Iteration {
            id,
            session_id,
            eval_run_id,
            base_template_version_id,
            candidate_version_id,
            mode,
            exploration_level,
            state,
            issue_repo,
            issue_number,
            issue_url,
            pull_request_repo,
            pull_request_number,
            pull_request_url,
            decision_reason,
            metadata_json,
            created_at,
            updated_at,
        })
    }
}

/// The stored state `name` of iteration `id`.
///
/// # Errors
/// [`TrainError::Invalid`]: ``iteration `<id>`: unknown train state `<name>` ``.
pub(crate) fn parse_state(id: &str, name: &str) -> Result<TrainState, TrainError> {
    name.parse()
        .map_err(|e| TrainError::Invalid(format!("iteration `{id}`: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_is_parsed_once_and_an_unknown_state_is_named() {
        let row = |state: &str| IterationRow {
            id: "s-i001".into(),
            session_id: "s".into(),
            eval_run_id: "s-i001".into(),
            base_template_version_id: "t@v1".into(),
            candidate_version_id: String::new(),
            mode: "explore".into(),
            exploration_level: "high".into(),
            state: state.into(),
            issue_repo: String::new(),
            issue_number: 0,
            issue_url: String::new(),
            pull_request_repo: String::new(),
            pull_request_number: 0,
            pull_request_url: String::new(),
            decision_reason: String::new(),
            metadata_json: "{}".into(),
            created_at: String::new(),
            updated_at: String::new(),
        };
        let it = Iteration::try_from(row("optimizer_completed_no_candidate")).unwrap();
        assert_eq!(
            (it.id.as_str(), it.state),
            ("s-i001", TrainState::NoCandidate)
        );
        assert_eq!(
            Iteration::try_from(row("")).unwrap().state,
            TrainState::RequestConfirmed
        );
        let err = Iteration::try_from(row("bogus")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "iteration `s-i001`: unknown train state `bogus`"
        );
    }
}
