//! The train iteration state machine (facts §3; seed "Complete train-mode path"): the state as a
//! type ([`TrainState`]), its transition table as data ([`TRANSITIONS`]) and pure checks.
//!
//! Linear states advance one step at a time (index → index + 1 only). Terminal states have fixed
//! predecessors: `optimizer_completed_no_candidate` only from `optimizer_completed`,
//! `candidate_promoted` / `candidate_rejected` only from `candidate_review_published`,
//! `run_abandoned` from any non-terminal state. Moving to the same state is a no-op. An empty
//! stored state is `request_confirmed`. A next iteration may start only after
//! `optimizer_completed_no_candidate`, `candidate_promoted`, `run_abandoned` or
//! `candidate_rejected` — the last one only with a decision reason (S-99).

use std::str::FromStr;

use TrainState::*;

/// A train iteration's state: the linear states in order, then the terminal ones. Its
/// [`TrainState::as_str`] is the stored name (facts §3), in the store's `state` columns and in
/// every JSON output; it is parsed once, when an iteration is loaded. The default is
/// `request_confirmed`, the state of an empty stored name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum TrainState {
    /// `request_confirmed`.
    #[default]
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
    /// Terminal `optimizer_completed_no_candidate`: the optimizer finished without promotable
    /// content (S-100).
    NoCandidate,
    /// Terminal `candidate_promoted`: the candidate was promoted.
    Promoted,
    /// Terminal `candidate_rejected`: the candidate was rejected (with a reason).
    Rejected,
    /// Terminal `run_abandoned`: the run was abandoned.
    Abandoned,
}

/// The transition table (facts §3): every state with the states it may move to, in the order of
/// [`TrainState::ALL`]. `run_abandoned` follows every non-terminal state; a terminal state has no
/// successor.
pub const TRANSITIONS: [(TrainState, &[TrainState]); 14] = [
    (RequestConfirmed, &[WorkspaceReady, Abandoned]),
    (WorkspaceReady, &[ItemsReady, Abandoned]),
    (ItemsReady, &[OptionsGenerated, Abandoned]),
    (OptionsGenerated, &[ReviewPublished, Abandoned]),
    (ReviewPublished, &[FeedbackSynced, Abandoned]),
    (FeedbackSynced, &[TrainingPackageCreated, Abandoned]),
    (TrainingPackageCreated, &[OptimizerCompleted, Abandoned]),
    (
        OptimizerCompleted,
        &[CandidateCreated, NoCandidate, Abandoned],
    ),
    (CandidateCreated, &[CandidateReviewPublished, Abandoned]),
    (CandidateReviewPublished, &[Promoted, Rejected, Abandoned]),
    (NoCandidate, &[]),
    (Promoted, &[]),
    (Rejected, &[]),
    (Abandoned, &[]),
];

impl TrainState {
    /// Every state: the linear ones in order, then the terminal ones.
    pub const ALL: [TrainState; 14] = [
        RequestConfirmed,
        WorkspaceReady,
        ItemsReady,
        OptionsGenerated,
        ReviewPublished,
        FeedbackSynced,
        TrainingPackageCreated,
        OptimizerCompleted,
        CandidateCreated,
        CandidateReviewPublished,
        NoCandidate,
        Promoted,
        Rejected,
        Abandoned,
    ];

    /// The linear states, in order (facts §3).
    pub const LINEAR: [TrainState; 10] = [
        RequestConfirmed,
        WorkspaceReady,
        ItemsReady,
        OptionsGenerated,
        ReviewPublished,
        FeedbackSynced,
        TrainingPackageCreated,
        OptimizerCompleted,
        CandidateCreated,
        CandidateReviewPublished,
    ];

    /// The terminal states.
    pub const TERMINAL: [TrainState; 4] = [NoCandidate, Promoted, Rejected, Abandoned];

    /// The stored name (facts §3).
    pub fn as_str(self) -> &'static str {
        match self {
            RequestConfirmed => "request_confirmed",
            WorkspaceReady => "workspace_ready",
            ItemsReady => "items_ready",
            OptionsGenerated => "options_generated",
            ReviewPublished => "review_published",
            FeedbackSynced => "feedback_synced",
            TrainingPackageCreated => "training_package_created",
            OptimizerCompleted => "optimizer_completed",
            CandidateCreated => "candidate_created",
            CandidateReviewPublished => "candidate_review_published",
            NoCandidate => "optimizer_completed_no_candidate",
            Promoted => "candidate_promoted",
            Rejected => "candidate_rejected",
            Abandoned => "run_abandoned",
        }
    }

    /// The state named `name`; `None` outside the vocabulary. An empty name is `request_confirmed`.
    pub fn parse(name: &str) -> Option<TrainState> {
        if name.trim().is_empty() {
            return Some(RequestConfirmed);
        }
        TrainState::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// The states this one may move to ([`TRANSITIONS`]); empty for a terminal state.
    pub fn successors(self) -> &'static [TrainState] {
        TRANSITIONS
            .iter()
            .find(|(from, _)| *from == self)
            .map_or(&[], |(_, to)| *to)
    }

    /// Whether the state is terminal (it has no successor).
    pub fn is_terminal(self) -> bool {
        self.successors().is_empty()
    }

    /// Position among [`TrainState::LINEAR`]; `None` for a terminal state.
    pub fn linear_index(self) -> Option<usize> {
        TrainState::LINEAR.iter().position(|s| *s == self)
    }

    /// The next linear state; `None` after `candidate_review_published` and for terminal states.
    pub fn next_linear(self) -> Option<TrainState> {
        self.linear_index()
            .and_then(|i| TrainState::LINEAR.get(i + 1))
            .copied()
    }
}

impl std::fmt::Display for TrainState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Parses a stored name as [`TrainState::parse`] does.
impl FromStr for TrainState {
    type Err = TransitionError;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        TrainState::parse(name).ok_or_else(|| TransitionError::Unknown(name.to_owned()))
    }
}

/// Serializes as the stored name, so JSON output carries the same strings as the store.
impl serde::Serialize for TrainState {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
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
        from: TrainState,
        /// Requested state.
        to: TrainState,
    },
    /// Not the next step (skips or goes back), or a terminal state from the wrong predecessor.
    #[error("train state cannot move from `{from}` to `{to}`{hint}")]
    NotNext {
        /// Current state.
        from: TrainState,
        /// Requested state.
        to: TrainState,
        /// What would be allowed, as `; expected …`.
        hint: String,
    },
    /// Start-next before the iteration was resolved (S-99).
    #[error(
        "the iteration is at `{0}`; start the next one only after it is resolved (promoted, rejected with a reason, no candidate, or abandoned: `train continue --abandon --reason TEXT`)"
    )]
    Unresolved(TrainState),
    /// Start-next after a rejection without a recorded reason.
    #[error(
        "the rejected iteration has no decision reason; reject with --reason before starting the next iteration"
    )]
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

/// Checks a transition `from → to` against [`TRANSITIONS`] (facts §3).
///
/// # Errors
/// [`TransitionError::FromTerminal`] or [`TransitionError::NotNext`] naming both states.
pub fn check_transition(from: TrainState, to: TrainState) -> Result<Transition, TransitionError> {
    if from == to {
        return Ok(Transition::NoOp);
    }
    if from.is_terminal() {
        return Err(TransitionError::FromTerminal { from, to });
    }
    if from.successors().contains(&to) {
        return Ok(Transition::Advance);
    }
    let hint = match to {
        NoCandidate => "; only optimizer_completed may end without a candidate".to_owned(),
        Promoted | Rejected => "; decide only after candidate_review_published".to_owned(),
        _ => from
            .next_linear()
            .map(|n| format!("; expected `{n}`"))
            .unwrap_or_default(),
    };
    Err(TransitionError::NotNext { from, to, hint })
}

/// Whether the next iteration may start after an iteration in `state` whose decision reason is
/// `decision_reason` (facts §3 start-next; S-99).
///
/// # Errors
/// [`TransitionError::Unresolved`] or [`TransitionError::RejectedWithoutReason`].
pub fn check_start_next(state: TrainState, decision_reason: &str) -> Result<(), TransitionError> {
    match state {
        NoCandidate | Promoted | Abandoned => Ok(()),
        Rejected if !decision_reason.trim().is_empty() => Ok(()),
        Rejected => Err(TransitionError::RejectedWithoutReason),
        RequestConfirmed
        | WorkspaceReady
        | ItemsReady
        | OptionsGenerated
        | ReviewPublished
        | FeedbackSynced
        | TrainingPackageCreated
        | OptimizerCompleted
        | CandidateCreated
        | CandidateReviewPublished => Err(TransitionError::Unresolved(state)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINEAR_NAMES: [&str; 10] = [
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
    const NO_CANDIDATE: &str = "optimizer_completed_no_candidate";
    const PROMOTED: &str = "candidate_promoted";
    const REJECTED: &str = "candidate_rejected";
    const ABANDONED: &str = "run_abandoned";
    const TERMINAL_NAMES: [&str; 4] = [NO_CANDIDATE, PROMOTED, REJECTED, ABANDONED];

    #[test]
    fn transitions_table() {
        use Transition::*;
        let check = |from: &str, to: &str, want: Result<Transition, &str>| {
            let got = from
                .parse()
                .and_then(|f| to.parse().and_then(|t| check_transition(f, t)));
            match (&got, want) {
                (Ok(g), Ok(w)) => assert_eq!(*g, w, "{from} → {to}"),
                (Err(e), Err(fragment)) => {
                    assert!(e.to_string().contains(fragment), "{from} → {to}: {e}")
                }
                _ => panic!("{from} → {to}: got {got:?}, want {want:?}"),
            }
        };
        // Each linear step to index + 1 only.
        for pair in LINEAR_NAMES.windows(2) {
            check(pair[0], pair[1], Ok(Advance));
            check(pair[1], pair[0], Err("cannot move"));
        }
        check("", "workspace_ready", Ok(Advance));
        check(
            "request_confirmed",
            "items_ready",
            Err("expected `workspace_ready`"),
        );
        check(
            "items_ready",
            "review_published",
            Err("expected `options_generated`"),
        );
        check("items_ready", "items_ready", Ok(NoOp));
        check(PROMOTED, PROMOTED, Ok(NoOp));
        // Terminal states and their only predecessors.
        check("optimizer_completed", NO_CANDIDATE, Ok(Advance));
        check(
            "candidate_created",
            NO_CANDIDATE,
            Err("only optimizer_completed"),
        );
        check("candidate_review_published", PROMOTED, Ok(Advance));
        check("candidate_review_published", REJECTED, Ok(Advance));
        check(
            "candidate_created",
            PROMOTED,
            Err("after candidate_review_published"),
        );
        check(
            "optimizer_completed",
            REJECTED,
            Err("after candidate_review_published"),
        );
        for s in LINEAR_NAMES {
            check(s, ABANDONED, Ok(Advance));
        }
        for t in TERMINAL_NAMES {
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
        let want: Vec<&str> = LINEAR_NAMES
            .iter()
            .chain(TERMINAL_NAMES.iter())
            .copied()
            .collect();
        assert_eq!(names, want);
        let linear: Vec<&str> = TrainState::LINEAR.iter().map(|s| s.as_str()).collect();
        assert_eq!(linear, LINEAR_NAMES);
        for state in TrainState::ALL {
            assert_eq!(TrainState::parse(state.as_str()), Some(state));
            assert_eq!(
                state.is_terminal(),
                TERMINAL_NAMES.contains(&state.as_str())
            );
            assert_eq!(
                serde_json::to_value(state).unwrap(),
                serde_json::json!(state.as_str())
            );
        }
        assert_eq!(TrainState::parse(""), Some(TrainState::RequestConfirmed));
        assert_eq!(TrainState::parse("bogus"), None);
        assert_eq!(TrainState::default(), TrainState::RequestConfirmed);
    }

    #[test]
    fn the_transition_table_lists_every_state_once_in_order() {
        let from: Vec<TrainState> = TRANSITIONS.iter().map(|(s, _)| *s).collect();
        assert_eq!(from, TrainState::ALL);
        for (state, successors) in TRANSITIONS {
            assert_eq!(
                successors.contains(&TrainState::Abandoned),
                !state.is_terminal(),
                "{state}"
            );
        }
    }

    #[test]
    fn start_next_table() {
        let check = |state: &str, reason: &str, ok: bool| {
            let state: TrainState = state.parse().unwrap();
            assert_eq!(
                check_start_next(state, reason).is_ok(),
                ok,
                "{state} {reason:?}"
            );
        };
        check(NO_CANDIDATE, "", true);
        check(PROMOTED, "", true);
        check(ABANDONED, "", true);
        check(REJECTED, "too generic", true);
        check(REJECTED, "  ", false);
        for s in LINEAR_NAMES {
            check(s, "because", false);
        }
    }
}
