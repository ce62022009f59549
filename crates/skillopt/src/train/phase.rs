//! `status_phase` derivation (facts §3 "status_phase derivation order"): a pure function of the
//! lock statuses the engine reports and the iteration's metadata.
//!
//! Order: (1) locks — optimizer active → `optimizer_running`, heartbeat expired →
//! `optimizer_heartbeat_stale`, stale → `blocked_stale_lock`; then generation likewise
//! (`generating_options`, `generating_options_heartbeat_stale`, `blocked_stale_lock`);
//! (2) metadata — optimizer preflight → `preflight_running`; recovery available and optimizer
//! failed → `recovery_available`; optimizer failed with configuration-like error text →
//! `blocked_config`; optimizer or candidate import failed → `failed_unrecoverable`;
//! (3) state `optimizer_completed_no_candidate` → itself; candidate states →
//! `optimizer_completed_candidate`; (4) recovery available → `recovery_available`;
//! (5) the current state.

use crate::train::state::TrainState;

/// A lock's status as the engine reports it (`LeaseView::status`; facts §3 lock status).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LockState {
    /// Heartbeat within its period.
    Active,
    /// Heartbeat late but not yet stale.
    ActiveExpiredHeartbeat,
    /// Past `stale_after`.
    Stale,
}

/// Everything [`derive_status_phase`] looks at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PhaseInput<'a> {
    /// The optimizer lock (`skillopt-train:<sid>`) or the optimizer job's lease, if held.
    pub optimizer_lock: Option<LockState>,
    /// The worst status among the generation jobs' leases, if any is held.
    pub generation_lock: Option<LockState>,
    /// Metadata optimizer status: `preflight_running`, `running`, `succeeded`, `failed`, ….
    pub optimizer_status: &'a str,
    /// Metadata optimizer error text.
    pub optimizer_error: &'a str,
    /// Metadata candidate import status (`failed` counts).
    pub candidate_import_status: &'a str,
    /// Metadata generation status (`running` while jobs are queued or running).
    pub generation_status: &'a str,
    /// The iteration state (`current_phase`).
    pub current_phase: TrainState,
    /// Whether recovery is available (a stale optimizer job, or a failed one that left a
    /// completed candidate package).
    pub recovery_available: bool,
}

/// Words in an optimizer error that make it a configuration problem (facts §3).
pub const CONFIG_ERROR_WORDS: [&str; 11] = [
    "config",
    "credential",
    "api key",
    "openai",
    "azure",
    "backend",
    "gitmoot-skillopt",
    "executable",
    "not found",
    "install",
    "path",
];

/// Whether an optimizer error reads as a configuration problem (case-insensitive).
pub fn is_config_error(error: &str) -> bool {
    let lower = error.to_lowercase();
    CONFIG_ERROR_WORDS.iter().any(|w| lower.contains(w))
}

/// The status_phase in the facts' priority order (see the module docs).
pub fn derive_status_phase(input: &PhaseInput<'_>) -> String {
    let lock_phase = |lock: Option<LockState>, active: &str, expired: &str| {
        lock.map(|l| match l {
            LockState::Active => active.to_owned(),
            LockState::ActiveExpiredHeartbeat => expired.to_owned(),
            LockState::Stale => "blocked_stale_lock".to_owned(),
        })
    };
    if let Some(p) = lock_phase(
        input.optimizer_lock,
        "optimizer_running",
        "optimizer_heartbeat_stale",
    ) {
        return p;
    }
    if let Some(p) = lock_phase(
        input.generation_lock,
        "generating_options",
        "generating_options_heartbeat_stale",
    ) {
        return p;
    }
    // Option generation blocked on its environment (a runtime not installed or not logged in).
    if input.generation_status == "blocked_config" {
        return "blocked_config".into();
    }
    let optimizer_failed = input.optimizer_status == "failed";
    if matches!(input.optimizer_status, "preflight_running" | "preflight") {
        return "preflight_running".into();
    }
    if input.recovery_available && optimizer_failed {
        return "recovery_available".into();
    }
    if optimizer_failed && is_config_error(input.optimizer_error) {
        return "blocked_config".into();
    }
    if optimizer_failed || input.candidate_import_status == "failed" {
        return "failed_unrecoverable".into();
    }
    match input.current_phase {
        TrainState::NoCandidate => return TrainState::NoCandidate.as_str().into(),
        TrainState::CandidateCreated
        | TrainState::CandidateReviewPublished
        | TrainState::Promoted
        | TrainState::Rejected => {
            return "optimizer_completed_candidate".into();
        }
        _ => {}
    }
    if input.recovery_available {
        return "recovery_available".into();
    }
    if input.generation_status == "running" && input.current_phase == TrainState::ItemsReady {
        // Jobs queued (not yet leased) or re-queued after a stale lease: still generating, so
        // polling does not look frozen at items_ready (seed step 2).
        return "generating_options".into();
    }
    input.current_phase.as_str().to_owned()
}

/// A `status_phase` (or a train state name) in words for people: what the session is doing or
/// waiting for. The names themselves stay in `--json` (facts §3); an unknown name is returned
/// as it is, its underscores as spaces.
pub fn describe(status_phase: &str) -> String {
    phase_words(status_phase).map_or_else(|| status_phase.replace('_', " "), str::to_owned)
}

/// The words of [`describe`] for a known `status_phase` or train state name.
fn phase_words(status_phase: &str) -> Option<&'static str> {
    Some(match status_phase {
        "optimizer_running" => "the optimizer is running",
        "optimizer_heartbeat_stale" => "the optimizer is running, but its heartbeat is late",
        "blocked_stale_lock" => {
            "blocked: the worker of a stage stopped (stale lock); `train continue` recovers it"
        }
        "generating_options" => "generating options for review",
        "generating_options_heartbeat_stale" => {
            "generating options, but a generator's heartbeat is late"
        }
        "blocked_config" => {
            "blocked by the environment (a runtime or optimizer that cannot run here)"
        }
        "preflight_running" => "checking the optimizer before it runs",
        "recovery_available" => "the optimizer failed; a recovery run is available",
        "failed_unrecoverable" => "failed (the optimizer or the candidate import)",
        "optimizer_completed_candidate" => "finished with a candidate",
        "optimizer_completed_no_candidate" => "finished without a candidate",
        "request_confirmed" => "request confirmed",
        "workspace_ready" => "workspace ready",
        "items_ready" => "review items ready",
        "options_generated" => "options generated",
        "review_published" => "review published, waiting for feedback",
        "feedback_synced" => "feedback received",
        "training_package_created" => "training package written",
        "optimizer_completed" => "the optimizer finished",
        "candidate_created" => "candidate created",
        "candidate_review_published" => "candidate published for review",
        "candidate_promoted" => "candidate promoted",
        "candidate_rejected" => "candidate rejected",
        "run_abandoned" => "abandoned",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    /// Every state and every phase `derive_status_phase` can return has words of its own.
    #[test]
    fn every_phase_and_state_is_described_in_words() {
        let phases = [
            "optimizer_running",
            "optimizer_heartbeat_stale",
            "blocked_stale_lock",
            "generating_options",
            "generating_options_heartbeat_stale",
            "blocked_config",
            "preflight_running",
            "recovery_available",
            "failed_unrecoverable",
            "optimizer_completed_candidate",
        ];
        for name in phases
            .into_iter()
            .chain(TrainState::ALL.iter().map(|s| s.as_str()))
        {
            assert!(phase_words(name).is_some(), "`{name}` has no words");
        }
        assert_eq!(
            describe("review_published"),
            "review published, waiting for feedback"
        );
    }

    use super::*;
    use LockState::*;

    #[test]
    fn derivation_order_table() {
        let base = PhaseInput {
            current_phase: TrainState::TrainingPackageCreated,
            ..Default::default()
        };
        let check = |input: PhaseInput<'_>, want: &str| {
            assert_eq!(derive_status_phase(&input), want, "{input:?}")
        };
        check(
            PhaseInput {
                optimizer_lock: Some(Active),
                ..base.clone()
            },
            "optimizer_running",
        );
        check(
            PhaseInput {
                optimizer_lock: Some(ActiveExpiredHeartbeat),
                ..base.clone()
            },
            "optimizer_heartbeat_stale",
        );
        check(
            PhaseInput {
                optimizer_lock: Some(Stale),
                ..base.clone()
            },
            "blocked_stale_lock",
        );
        // The optimizer lock wins over generation and over metadata.
        check(
            PhaseInput {
                optimizer_lock: Some(Active),
                generation_lock: Some(Stale),
                optimizer_status: "failed",
                ..base.clone()
            },
            "optimizer_running",
        );
        let items = PhaseInput {
            current_phase: TrainState::ItemsReady,
            ..Default::default()
        };
        check(
            PhaseInput {
                generation_lock: Some(Active),
                ..items.clone()
            },
            "generating_options",
        );
        check(
            PhaseInput {
                generation_lock: Some(ActiveExpiredHeartbeat),
                ..items.clone()
            },
            "generating_options_heartbeat_stale",
        );
        check(
            PhaseInput {
                generation_lock: Some(Stale),
                ..items.clone()
            },
            "blocked_stale_lock",
        );
        check(
            PhaseInput {
                generation_status: "running",
                ..items.clone()
            },
            "generating_options",
        );
        check(
            PhaseInput {
                generation_status: "blocked_config",
                ..items.clone()
            },
            "blocked_config",
        );
        check(items.clone(), "items_ready");
        check(
            PhaseInput {
                optimizer_status: "preflight_running",
                recovery_available: true,
                ..base.clone()
            },
            "preflight_running",
        );
        check(
            PhaseInput {
                optimizer_status: "failed",
                optimizer_error: "executable not found",
                recovery_available: true,
                ..base.clone()
            },
            "recovery_available",
        );
        check(
            PhaseInput {
                optimizer_status: "failed",
                optimizer_error: "optimizer backend `x`: executable `y` not found",
                ..base.clone()
            },
            "blocked_config",
        );
        check(
            PhaseInput {
                optimizer_status: "failed",
                optimizer_error: "exit 1",
                ..base.clone()
            },
            "failed_unrecoverable",
        );
        check(
            PhaseInput {
                candidate_import_status: "failed",
                ..base.clone()
            },
            "failed_unrecoverable",
        );
        check(
            PhaseInput {
                current_phase: TrainState::NoCandidate,
                ..Default::default()
            },
            "optimizer_completed_no_candidate",
        );
        for s in [
            "candidate_created",
            "candidate_review_published",
            "candidate_promoted",
            "candidate_rejected",
        ] {
            let current_phase = s.parse().unwrap();
            check(
                PhaseInput {
                    current_phase,
                    recovery_available: true,
                    ..Default::default()
                },
                "optimizer_completed_candidate",
            );
        }
        check(
            PhaseInput {
                recovery_available: true,
                ..base.clone()
            },
            "recovery_available",
        );
        check(base, "training_package_created");
    }
}
