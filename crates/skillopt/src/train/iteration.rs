//! A train iteration as the control plane works with it: the stored row
//! (`skillopt_train_iterations`) with its state parsed once, at load, into a [`TrainState`].

use skillforge_store::train::IterationRow;

use crate::train::TrainError;
use crate::train::state::TrainState;

/// One train iteration: its stored [`IterationRow`] (every column, read through `Deref`, e.g.
/// `it.session_id`) with the state typed. Steps compare and match [`TrainState`] values through
/// `it.state` (this struct's field, which shadows the row's text column; that column is not
/// read after load); the stored name is written only by the store's compare-and-set
/// (`crate::train::session::advance`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Iteration {
    row: IterationRow,
    /// Iteration state (facts §3), parsed at load.
    pub state: TrainState,
}

impl std::ops::Deref for Iteration {
    type Target = IterationRow;

    fn deref(&self) -> &IterationRow {
        &self.row
    }
}

impl std::ops::DerefMut for Iteration {
    fn deref_mut(&mut self) -> &mut IterationRow {
        &mut self.row
    }
}

impl TryFrom<IterationRow> for Iteration {
    type Error = TrainError;

    /// The row with its state parsed (an empty state is `request_confirmed`).
    ///
    /// # Errors
    /// [`TrainError::Invalid`] for a state outside the vocabulary, naming the iteration.
    fn try_from(row: IterationRow) -> Result<Self, TrainError> {
        let state = parse_state(&row.id, &row.state)?;
        Ok(Iteration { row, state })
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
