//! The eval loop's stage definitions, through the stage core [`skillforge_stage::def`]:
//! `workflows/evalloop.toml` (embedded) with `<home>/evalloop.toml` overrides of times and
//! attempts. Stages `arm`, `judge` and `draft` are `agent` jobs, `verify` and `deploy` `process` jobs; their
//! jobs are built by [`StageDef::job`].

use std::path::Path;

pub use skillforge_stage::StageDef;
use skillforge_stage::{StageSource, StagesError, WorkflowDef};

/// The shipped definition.
pub const SHIPPED_EVALLOOP_TOML: &str = include_str!("../../../workflows/evalloop.toml");
/// Workflow name of every eval-loop job.
pub const EVAL_WORKFLOW: &str = "evalloop";
/// Stage of an arm job.
pub const ARM_STAGE: &str = "arm";
/// Stage of a verify job.
pub const VERIFY_STAGE: &str = "verify";
/// Stage of a judge job.
pub const JUDGE_STAGE: &str = "judge";
/// Stage of a knowledge-gap brief's drafting job.
pub const DRAFT_STAGE: &str = "draft";
/// Stage of a remote deploy (`eval deploy --to HOST`).
pub const DEPLOY_STAGE: &str = "deploy";

/// Where the eval loop's stages come from.
pub const SOURCE: StageSource = StageSource {
    family: "evalloop",
    workflow: EVAL_WORKFLOW,
    shipped: SHIPPED_EVALLOOP_TOML,
    stage_names: &[
        ARM_STAGE,
        VERIFY_STAGE,
        JUDGE_STAGE,
        DRAFT_STAGE,
        DEPLOY_STAGE,
    ],
};

/// The stages, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvalStages {
    /// `arm`.
    pub arm: StageDef,
    /// `verify`.
    pub verify: StageDef,
    /// `judge`.
    pub judge: StageDef,
    /// `draft`.
    pub draft: StageDef,
    /// `deploy`.
    pub deploy: StageDef,
}

impl EvalStages {
    fn from_def(def: &WorkflowDef) -> Self {
        Self {
            arm: def.stage(ARM_STAGE).clone(),
            verify: def.stage(VERIFY_STAGE).clone(),
            judge: def.stage(JUDGE_STAGE).clone(),
            draft: def.stage(DRAFT_STAGE).clone(),
            deploy: def.stage(DEPLOY_STAGE).clone(),
        }
    }

    /// The shipped stages with the override `text` (named `file` in messages) applied.
    ///
    /// # Errors
    /// [`StagesError`] naming the file: bad TOML, an unknown key, an unknown stage, a time or
    /// attempt count of 0, or `stale_after_secs <= heartbeat_secs`.
    pub fn with_override(text: &str, file: &str) -> Result<Self, StagesError> {
        let mut def = SOURCE.shipped()?;
        def.apply_override(text, file)?;
        Ok(Self::from_def(&def))
    }

    /// The home's stages: the shipped ones with `<home>/evalloop.toml` applied when it exists.
    ///
    /// # Errors
    /// As [`StageSource::for_home`].
    pub fn for_home(home: &Path) -> Result<Self, StagesError> {
        SOURCE.for_home(home).map(|def| Self::from_def(&def))
    }
}

impl Default for EvalStages {
    /// The shipped stages.
    ///
    /// # Panics
    /// When the embedded file is invalid (a build defect the unit test below guards).
    fn default() -> Self {
        Self::from_def(
            &SOURCE
                .shipped()
                .unwrap_or_else(|e| panic!("shipped evalloop.toml: {e}")),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_file_is_valid_and_overrides_are_checked() {
        let s = EvalStages::default();
        assert_eq!(s.arm.timeout_secs, 1200);
        assert_eq!(
            [
                s.arm.runner.as_deref(),
                s.verify.runner.as_deref(),
                s.judge.runner.as_deref()
            ],
            [Some("agent"), Some("process"), Some("agent")]
        );
        assert!(
            !s.arm.retry_failed_runs && !s.verify.retry_failed_runs && !s.judge.retry_failed_runs,
            "a failing run is the answer"
        );
        let e = EvalStages::with_override("[stages.jduge]\ntimeout_secs = 5\n", "h/evalloop.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("h/evalloop.toml") && e.contains("jduge"), "{e}");
        let e = EvalStages::with_override("[stages.arm]\nretries = 1\n", "f")
            .unwrap_err()
            .to_string();
        assert!(e.contains("retries"), "{e}");
        let s = EvalStages::with_override("[stages.arm]\ntimeout_secs = 30\n", "f").unwrap();
        assert_eq!((s.arm.timeout_secs, s.judge.timeout_secs), (30, 600));
    }
}
