//! The train iteration state machine (facts §3; seed "Complete train-mode path"): pure functions.
//!
//! Linear states advance one step at a time (index → index + 1 only). Terminal states have fixed
//! predecessors: `optimizer_completed_no_candidate` only from `optimizer_completed`,
//! `candidate_promoted` / `candidate_rejected` only from `candidate_review_published`,
//! `run_abandoned` from any non-terminal state. Moving to the same state is a no-op. An empty
//! "from" is `request_confirmed`. A next iteration may start only after
//! `optimizer_completed_no_candidate`, `candidate_promoted`, `run_abandoned` or
//! `candidate_rejected` — the last one only with a decision reason (S-99).

/// The linear states, in order (facts §3).
pub const LINEAR_STATES: [&str; 10] = [
    "request_confirmed",
    "workspace_ready",
    "items_ready",
    "options_generated",
    "review_published",
    "feedback_synced",
    "training_package_created",
    "optimizer_completed",
    "candidate_created",
    "candidate_review_published",
];

/// Terminal: the optimizer finished without promotable content (S-100).
pub const NO_CANDIDATE: &str = "optimizer_completed_no_candidate";
/// Terminal: the candidate was promoted.
pub const PROMOTED: &str = "candidate_promoted";
/// Terminal: the candidate was rejected (with a reason).
pub const REJECTED: &str = "candidate_rejected";
/// Terminal: the run was abandoned.
pub const ABANDONED: &str = "run_abandoned";
/// Every terminal state.
pub const TERMINAL_STATES: [&str; 4] = [NO_CANDIDATE, PROMOTED, REJECTED, ABANDONED];

/// A train iteration's state as a type: the linear states in order, then the terminal ones. Its
/// [`TrainState::as_str`] is the stored name (facts §3), exactly the string constants above.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TrainState {
    /// `request_confirmed`.
    RequestConfirmed,
    /// `workspace_ready`.
    WorkspaceReady,
    /// `items_ready`.
    ItemsReady,
    /// `options_generated`.
    OptionsGenerated,
    /// `review_published`.
    ReviewPublished,
    /// `feedback_synced`.
    FeedbackSynced,
    /// `training_package_created`.
    TrainingPackageCreated,
    /// `optimizer_completed`.
    OptimizerCompleted,
    /// `candidate_created`.
    CandidateCreated,
    /// `candidate_review_published`.
    CandidateReviewPublished,
    /// [`NO_CANDIDATE`].
    NoCandidate,
    /// [`PROMOTED`].
    Promoted,
    /// [`REJECTED`].
    Rejected,
    /// [`ABANDONED`].
    Abandoned,
}

impl TrainState {
    /// Every state: the linear ones in order, then the terminal ones.
    pub const ALL: [TrainState; 14] = [
        TrainState::RequestConfirmed,
        TrainState::WorkspaceReady,
        TrainState::ItemsReady,
        TrainState::OptionsGenerated,
        TrainState::ReviewPublished,
        TrainState::FeedbackSynced,
        TrainState::TrainingPackageCreated,
        TrainState::OptimizerCompleted,
        TrainState::CandidateCreated,
        TrainState::CandidateReviewPublished,
        TrainState::NoCandidate,
        TrainState::Promoted,
        TrainState::Rejected,
        TrainState::Abandoned,
    ];

    /// The stored name (facts §3).
    pub fn as_str(self) -> &'static str {
        let idx = TrainState::ALL.iter().position(|s| *s == self).unwrap_or_default();
        match LINEAR_STATES.get(idx) {
            Some(name) => name,
            None => TERMINAL_STATES[idx - LINEAR_STATES.len()],
        }
    }

    /// The state named `name`; `None` outside the vocabulary. An empty name is `request_confirmed`.
    pub fn parse(name: &str) -> Option<TrainState> {
        let name = if name.trim().is_empty() { LINEAR_STATES[0] } else { name };
        TrainState::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// Whether the state is terminal.
    pub fn is_terminal(self) -> bool {
        is_terminal(self.as_str())
    }
}

impl std::fmt::Display for TrainState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a transition or a start-next is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransitionError {
    /// A state name outside the vocabulary.
    #[error("unknown train state `{0}`")]
    Unknown(String),
    /// A terminal state cannot be left.
    #[error("train state `{from}` is terminal; it cannot move to `{to}`")]
    FromTerminal {
        /// Current state.
        from: String,
        /// Requested state.
        to: String,
    },
    /// Not the next step (skips or goes back), or a terminal state from the wrong predecessor.
    #[error("train state cannot move from `{from}` to `{to}`{hint}")]
    NotNext {
        /// Current state.
        from: String,
        /// Requested state.
        to: String,
        /// What would be allowed, as `; expected …`.
        hint: String,
    },
    /// Start-next before the iteration was resolved (S-99).
    #[error("the iteration is at `{0}`; start the next one only after it is resolved (promoted, rejected with a reason, no candidate, or abandoned)")]
    Unresolved(String),
    /// Start-next after a rejection without a recorded reason.
    #[error("the rejected iteration has no decision reason; reject with --reason before starting the next iteration")]
    RejectedWithoutReason,
}

/// What a valid transition does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// Same state: nothing to write.
    NoOp,
    /// A real step.
    Advance,
}

/// Index of a linear state.
pub fn linear_index(state: &str) -> Option<usize> {
    LINEAR_STATES.iter().position(|s| *s == state)
}

/// Whether `state` is terminal.
pub fn is_terminal(state: &str) -> bool {
    TERMINAL_STATES.contains(&state)
}

fn known(state: &str) -> bool {
    linear_index(state).is_some() || is_terminal(state)
}

/// Checks a transition `from → to` (facts §3). `from` empty means `request_confirmed`.
///
/// # Errors
/// [`TransitionError`] naming both states.
pub fn check_transition(from: &str, to: &str) -> Result<Transition, TransitionError> {
    let from = if from.trim().is_empty() { LINEAR_STATES[0] } else { from };
    for s in [from, to] {
        if !known(s) {
            return Err(TransitionError::Unknown(s.to_owned()));
        }
    }
    if from == to {
        return Ok(Transition::NoOp);
    }
    if is_terminal(from) {
        return Err(TransitionError::FromTerminal { from: from.to_owned(), to: to.to_owned() });
    }
    let not_next = |hint: String| TransitionError::NotNext { from: from.to_owned(), to: to.to_owned(), hint };
    let from_idx = linear_index(from).unwrap_or_default();
    match to {
        ABANDONED => Ok(Transition::Advance),
        NO_CANDIDATE if from == "optimizer_completed" => Ok(Transition::Advance),
        NO_CANDIDATE => Err(not_next("; only optimizer_completed may end without a candidate".into())),
        PROMOTED | REJECTED if from == "candidate_review_published" => Ok(Transition::Advance),
        PROMOTED | REJECTED => Err(not_next("; decide only after candidate_review_published".into())),
        _ => {
            let to_idx = linear_index(to).unwrap_or_default();
            if to_idx == from_idx + 1 {
                Ok(Transition::Advance)
            } else {
                let hint = LINEAR_STATES.get(from_idx + 1).map(|n| format!("; expected `{n}`")).unwrap_or_default();
                Err(not_next(hint))
            }
        }
    }
}

/// Whether the next iteration may start after an iteration in `state` whose decision reason is
/// `decision_reason` (facts §3 start-next; S-99).
///
/// # Errors
/// [`TransitionError::Unresolved`] or [`TransitionError::RejectedWithoutReason`].
pub fn check_start_next(state: &str, decision_reason: &str) -> Result<(), TransitionError> {
    match state {
        NO_CANDIDATE | PROMOTED | ABANDONED => Ok(()),
        REJECTED if !decision_reason.trim().is_empty() => Ok(()),
        REJECTED => Err(TransitionError::RejectedWithoutReason),
        other => Err(TransitionError::Unresolved(other.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transitions_table() {
        use Transition::*;
        let check = |from: &str, to: &str, want: Result<Transition, &str>| {
            let got = check_transition(from, to);
            match (&got, want) {
                (Ok(g), Ok(w)) => assert_eq!(*g, w, "{from} → {to}"),
                (Err(e), Err(fragment)) => assert!(e.to_string().contains(fragment), "{from} → {to}: {e}"),
                _ => panic!("{from} → {to}: got {got:?}, want {want:?}"),
            }
        };
        // Each linear step to index + 1 only.
        for pair in LINEAR_STATES.windows(2) {
            check(pair[0], pair[1], Ok(Advance));
            check(pair[1], pair[0], Err("cannot move"));
        }
        check("", "workspace_ready", Ok(Advance));
        check("request_confirmed", "items_ready", Err("expected `workspace_ready`"));
        check("items_ready", "review_published", Err("expected `options_generated`"));
        check("items_ready", "items_ready", Ok(NoOp));
        check(PROMOTED, PROMOTED, Ok(NoOp));
        // Terminal states and their only predecessors.
        check("optimizer_completed", NO_CANDIDATE, Ok(Advance));
        check("candidate_created", NO_CANDIDATE, Err("only optimizer_completed"));
        check("candidate_review_published", PROMOTED, Ok(Advance));
        check("candidate_review_published", REJECTED, Ok(Advance));
        check("candidate_created", PROMOTED, Err("after candidate_review_published"));
        check("optimizer_completed", REJECTED, Err("after candidate_review_published"));
        for s in LINEAR_STATES {
            check(s, ABANDONED, Ok(Advance));
        }
        for t in TERMINAL_STATES {
            if t != ABANDONED {
                check(t, ABANDONED, Err("terminal"));
            }
            check(t, "workspace_ready", Err("terminal"));
        }
        check("items_ready", "bogus", Err("unknown train state `bogus`"));
    }

    #[test]
    fn the_state_enum_names_every_state_in_order() {
        let names: Vec<&str> = TrainState::ALL.iter().map(|s| s.as_str()).collect();
        let want: Vec<&str> = LINEAR_STATES.iter().chain(TERMINAL_STATES.iter()).copied().collect();
        assert_eq!(names, want);
        for state in TrainState::ALL {
            assert_eq!(TrainState::parse(state.as_str()), Some(state));
            assert_eq!(state.is_terminal(), TERMINAL_STATES.contains(&state.as_str()));
        }
        assert_eq!(TrainState::parse(""), Some(TrainState::RequestConfirmed));
        assert_eq!(TrainState::parse("bogus"), None);
    }

    #[test]
    fn start_next_table() {
        let check = |state: &str, reason: &str, ok: bool| {
            assert_eq!(check_start_next(state, reason).is_ok(), ok, "{state} {reason:?}");
        };
        check(NO_CANDIDATE, "", true);
        check(PROMOTED, "", true);
        check(ABANDONED, "", true);
        check(REJECTED, "too generic", true);
        check(REJECTED, "  ", false);
        for s in LINEAR_STATES {
            check(s, "because", false);
        }
    }
}
