//! The harvest family's leg stages as data: `workflows/harvest.toml` (embedded) with
//! `<home>/harvest.toml` overrides, through the stage core [`skillforge_stage::def`] (facts §5: the
//! legs' budgets).

use std::path::Path;

use skillforge_stage::{StageSource, StagesError, WorkflowDef};

use super::WORKFLOW;

/// The shipped definition, `workflows/harvest.toml`.
pub const SHIPPED_HARVEST_TOML: &str = include_str!("../../../../workflows/harvest.toml");

/// Where the legs' stages come from, one per [`super::legs::Leg`] (named by `Leg::name`).
pub const SOURCE: StageSource = StageSource {
    family: "harvest",
    workflow: WORKFLOW,
    shipped: SHIPPED_HARVEST_TOML,
    stage_names: &["hard_verifier", "checkers", "review"],
};

/// The legs' resolved stages (the [`Default`] is the shipped file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HarvestStages(pub WorkflowDef);

impl HarvestStages {
    /// The shipped stages with `<home>/harvest.toml` applied when it exists.
    ///
    /// # Errors
    /// As [`StageSource::for_home`].
    pub fn for_home(home: &Path) -> Result<Self, StagesError> {
        SOURCE.for_home(home).map(Self)
    }
}

impl Default for HarvestStages {
    /// The shipped stages.
    ///
    /// # Panics
    /// When the embedded file is invalid (a build defect the unit test below guards).
    fn default() -> Self {
        Self(
            SOURCE
                .shipped()
                .unwrap_or_else(|e| panic!("shipped harvest.toml: {e}")),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harvest::legs::Leg;

    #[test]
    fn shipped_file_has_every_leg_with_the_facts_budgets() {
        let stages = HarvestStages::default();
        let budget = |leg: Leg| {
            let s = stages.0.stage(leg.name());
            (s.timeout_secs, s.setup_secs, s.retry_failed_runs)
        };
        // facts §5: hard verifier 15 min, checkers 10 min, review 10 min; a fail is an answer.
        assert_eq!(budget(Leg::HardVerifier), (900, 60, false));
        assert_eq!(budget(Leg::Checkers), (600, 60, false));
        assert_eq!(budget(Leg::Review), (600, 60, false));
        assert_eq!(
            stages.0.stage("hard_verifier").runner.as_deref(),
            Some("sandbox")
        );
    }
}
