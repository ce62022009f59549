//! Evaluator profiles (seed: SkillOpt, "Complete train-mode path" step 5, "Training Package"
//! `evaluator_profile`; rule S-101): a produced artifact (a review option or a candidate output)
//! is evaluated against an [`skillforge_contract::EvaluatorProfile`] in a fixed stage order —
//!
//! 1. `artifact_checks`: cheap, deterministic checks of the bytes ([`checks`], type
//!    `artifact_contract`), configured from the profile's `checks[].config`;
//! 2. `render`: optional render adapters (`playwright`, `render_smoke`), run by the caller only
//!    when their tool is present and the required checks passed; absent ⇒ `skipped` with a
//!    reason, never a fabricated pass;
//! 3. `judge`: the LLM judge last, through the `agent` runner ([`judge`]); `when: checks_pass`
//!    ⇒ not invoked when a required check failed; no judge runtime ⇒ `skipped` with a reason.
//!
//! The result is a contract [`skillforge_contract::EvaluatorScore`] with `stage_status[]`, `hard`
//! (checks) and `soft` (judge) only where measured, and on failure an
//! [`skillforge_contract::EvaluatorFailurePacket`] that the training-package export carries in
//! the item's metadata and that `optimizer distill` turns into guidance.
//!
//! The core ([`Evaluation`]) is synchronous and pure apart from reading the clock: the caller
//! runs render adapters and the judge (an engine `agent` job) and hands their results back, so
//! stage order and packets are table-testable ([`evaluate`] drives all stages through a
//! [`StageEnv`] for synchronous callers and tests). [`evaluate_run`] evaluates a whole review
//! run with engine jobs and stores the scores: the one entry point of `review evaluate` and of
//! train mode's evaluator stage.

pub mod checks;
pub mod defs;
mod handler;
pub mod judge;
pub mod profile;
mod run;
mod score;
mod stages;

pub use checks::{CheckOutcome, CheckState, run_artifact_check};
pub use handler::EvaluatorHandler;
pub use judge::{
    DEFAULT_JUDGE_PROMPT_VERSION, EVALUATE_WORKFLOW, JUDGE_STAGE, JudgeOutcome, JudgeRequest,
    JudgeVerdict, VerdictError, judge_job, judge_runtime_problem, parse_judge_verdict,
};
pub use profile::{
    BUILTIN_EVALUATOR_IDS, CheckClass, check_class, effective_profile, judge_runtime_of,
    known_evaluator_ids,
};
pub use run::{EvalRunError, RunEvaluation, evaluate_run};
pub use stages::{
    Artifact, Evaluation, JudgeStep, RenderStep, STAGE_ARTIFACT_CHECKS, STAGE_JUDGE, STAGE_RENDER,
    StageEnv, evaluate,
};

#[cfg(test)]
mod tests;
