//! The evaluator family's job stages as data: `workflows/evaluator.toml` (embedded) with
//! `<home>/evaluator.toml` overrides, through the stage core [`skillforge_stage::def`].

use std::path::Path;

use skillforge_stage::{StageSource, StagesError, WorkflowDef};

use super::judge::{EVALUATE_WORKFLOW, JUDGE_STAGE};
use super::stages::STAGE_RENDER;

/// The shipped definition, `workflows/evaluator.toml`.
pub const SHIPPED_EVALUATOR_TOML: &str = include_str!("../../../../workflows/evaluator.toml");

/// Where the evaluator's job stages come from: `judge` (an `agent` job), `render` (a `process` job).
pub const SOURCE: StageSource = StageSource {
    family: "evaluator",
    workflow: EVALUATE_WORKFLOW,
    shipped: SHIPPED_EVALUATOR_TOML,
    stage_names: &[JUDGE_STAGE, STAGE_RENDER],
};

/// The evaluator's resolved job stages.
pub type EvaluatorStages = WorkflowDef;

/// The shipped stages with `<home>/evaluator.toml` applied when it exists.
///
/// # Errors
/// As [`StageSource::for_home`].
pub fn for_home(home: &Path) -> Result<EvaluatorStages, StagesError> {
    SOURCE.for_home(home)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_file_keeps_the_judge_and_render_budgets() {
        let def: EvaluatorStages = SOURCE.shipped().expect("shipped evaluator.toml");
        let judge = def.stage(JUDGE_STAGE);
        assert_eq!(
            (
                judge.runner.as_deref(),
                judge.timeout_secs,
                judge.setup_secs,
                judge.retry_failed_runs
            ),
            (Some("agent"), 600, 60, false)
        );
        let render = def.stage(STAGE_RENDER);
        assert_eq!(
            (
                render.runner.as_deref(),
                render.timeout_secs,
                render.retry_failed_runs
            ),
            (Some("process"), 120, false)
        );
    }
}
