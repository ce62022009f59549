//! Automatic trace harvesting, Mode A (seed: SkillOpt, "Automatic trace-harvested feedback (Mode A,
//! off by default)", "Cross-family review soft signal", "Deterministic checker objective signal",
//! "Deterministic hard-verifier tier"; facts §5; rules S-13..S-33).
//!
//! * [`config`]: the `[skillopt]` switches as one [`HarvestConfig`]; everything off by default.
//! * [`outcome`]: an implement job's verifiable outcome → the floor row (pure).
//! * [`revert`]: `Reverts owner/repo#NN` / `Reverts #NN`, same repository only (pure).
//! * [`legs`]: the hard-verifier, checker and review legs as job specs, and their reports → rows (pure).
//! * [`review`]: reviewer selection (cross-family, else a tagged same-family fallback) and the rubric.
//! * [`gate`]: the merge side of the empty gate (grace window, `.github/workflows/` awareness,
//!   `require_external_ci`) and its `gitmoot/ci` stamp (S-19).
//! * [`stages`]: the legs' stage definitions, `workflows/harvest.toml` (budgets, retries).
//! * [`kind`]: which attributed kinds are harvested and which legs each gets (S-16, S-41).
//! * [`tier`]: the `evidence_tier` / `evidence_rank` item tags of every harvested row (S-31).
//! * [`webhook`]: GitHub webhook signatures and payloads → [`HarvestEvent`]s (pure).
//! * [`watcher`]: the ETag-conditional pull-request poller of `serve` → the same events.
//! * [`trailer`]: the `Skillforge-Template: <id>@v<N>` trailer of a PR body or commit, which
//!   attributes a PR without `harvest attribute` (issue 37 item 8).
//! * [`rerun`]: one leg of a merged PR run again, re-upserting only its own row (S-27).
//! * [`apply`]: the control-plane writes: events → rows in one transaction, leg dispatch, and
//!   [`HarvestHandler`], the engine `ResultHandler` that turns a finished leg job into its row.
//!
//! **Architecture Invariant:** the harvester writes only `eval_runs`, `eval_review_items` and
//! `feedback_events` (plus its own bookkeeping tables), and only from the control plane; a leg
//! job's worker never touches the store (S-14, DESIGN §3).

pub mod apply;
pub mod config;
pub mod gate;
pub mod kind;
pub mod legs;
pub mod outcome;
pub mod rerun;
pub mod revert;
pub mod review;
pub mod stages;
pub mod tier;
pub mod trailer;
pub mod watcher;
pub mod webhook;

pub use apply::{
    HarvestError, HarvestHandler, HarvestReport, LegDispatch, apply_event, available_reviewers,
    dispatch_legs, harvest,
};
pub use config::HarvestConfig;
pub use outcome::{CiEvidence, HarvestEvent, Outcome, RowPlan};

/// Source of every harvested feedback row (facts §5).
pub const AUTO_TRACE_SOURCE: &str = "auto-trace";
/// `eval_runs.metadata_json.feedback_source` of an auto-trace run.
pub const AUTOMATIC_TRACE: &str = "automatic_trace";
/// State of an auto-trace run (facts §5).
pub const AUTO_TRACE_RUN_STATE: &str = "ready";
/// Reviewer sentinel of the verifiable-floor row (item `<repo>#<pr>`).
pub const FLOOR_REVIEWER: &str = "gitmoot-auto";
/// Reviewer sentinel of the cross-family review row (item `review#<repo>#<pr>`).
pub const REVIEW_REVIEWER: &str = "gitmoot-review";
/// Reviewer sentinel of the deterministic checker row (item `checker#<repo>#<pr>`).
pub const CHECKER_REVIEWER: &str = "gitmoot-checker";
/// Reviewer sentinel of the hard-verifier row (item `hard#<repo>#<pr>`).
pub const VERIFIER_REVIEWER: &str = "gitmoot-verifier";
/// Workflow name of harvest leg jobs (what the dispatching result handler keys on).
pub const WORKFLOW: &str = "harvest";

/// `auto-trace:<template_version_id>` (S-15).
pub fn run_id(template_version_id: &str) -> String {
    format!("auto-trace:{template_version_id}")
}

/// The floor item id `<repo>#<pr>` (S-15).
pub fn floor_item_id(repo: &str, pr: i64) -> String {
    format!("{repo}#{pr}")
}
