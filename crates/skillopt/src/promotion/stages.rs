//! The promotion family's stages as data: `workflows/promotion.toml` (embedded) with
//! `<home>/promotion.toml` overrides, through the stage core [`skillforge_stage::def`]: the webhook
//! delivery job and the canary's two decision jobs (graduate, roll back).

use std::path::Path;

use skillforge_stage::{StageDef, StageSource, StagesError, WorkflowDef};

use super::events::EVENTS_WORKFLOW;

/// The shipped definition, `workflows/promotion.toml`.
pub const SHIPPED_PROMOTION_TOML: &str = include_str!("../../../../workflows/promotion.toml");

/// Stage of webhook delivery jobs.
pub const WEBHOOK_STAGE: &str = "webhook";
/// Stage of the job that graduates a canary (S-61).
pub const GRADUATE_STAGE: &str = "graduate";
/// Stage of the job that rolls a canary back (S-61).
pub const ROLL_BACK_STAGE: &str = "roll_back";
/// Stage of the job that rolls back a canary whose spent window never decided (issue 37 item 3).
pub const INCONCLUSIVE_STAGE: &str = "inconclusive";

/// Where the promotion stages come from.
pub const SOURCE: StageSource = StageSource {
    family: "promotion",
    workflow: EVENTS_WORKFLOW,
    shipped: SHIPPED_PROMOTION_TOML,
    stage_names: &[
        WEBHOOK_STAGE,
        GRADUATE_STAGE,
        ROLL_BACK_STAGE,
        INCONCLUSIVE_STAGE,
    ],
};

/// The promotion family's resolved stages (the [`Default`] is the shipped file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromotionStages(pub WorkflowDef);

impl PromotionStages {
    /// The shipped stages with `<home>/promotion.toml` applied when it exists.
    ///
    /// # Errors
    /// As [`StageSource::for_home`].
    pub fn for_home(home: &Path) -> Result<Self, StagesError> {
        SOURCE.for_home(home).map(Self)
    }

    /// The stage `name` (one of [`SOURCE`]'s stage names).
    pub fn stage(&self, name: &str) -> &StageDef {
        self.0.stage(name)
    }
}

impl Default for PromotionStages {
    /// The shipped stages.
    ///
    /// # Panics
    /// When the embedded file is invalid (a build defect the unit test below guards).
    fn default() -> Self {
        Self(
            SOURCE
                .shipped()
                .unwrap_or_else(|e| panic!("shipped promotion.toml: {e}")),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_file_declares_every_stage_as_a_process_job() {
        let stages = PromotionStages::default();
        for name in SOURCE.stage_names {
            assert_eq!(
                stages.stage(name).runner.as_deref(),
                Some("process"),
                "{name}"
            );
        }
        assert_eq!(
            stages.stage(WEBHOOK_STAGE).attempts,
            5,
            "a failed delivery is retried"
        );
    }
}
