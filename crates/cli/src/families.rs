//! The one registry of workflow families: every product crate's lines plus the command
//! workflows. Adding a family is adding its crate's `FAMILY` here.

use std::path::Path;
use std::sync::LazyLock;

use skillforge_stage::{Families, Family};

static ALL: LazyLock<Vec<Family>> = LazyLock::new(|| {
    let mut all = Vec::new();
    all.extend_from_slice(&skillforge_skillopt::FAMILIES);
    all.push(skillforge_evalloop::FAMILY);
    all.push(skillforge_optimize::FAMILY);
    all.extend_from_slice(&skillforge_stage::family::COMMAND_FAMILIES);
    all
});

/// Every family, in registry order.
pub(crate) fn all() -> &'static [Family] {
    &ALL
}

/// The control plane's result handler for `home`: every family's handler by workflow.
pub(crate) fn for_home(home: &Path) -> Families {
    Families::new(all(), home)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A family's own tables, whatever they are (this test checks the stages only).
    #[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
    #[serde(transparent)]
    struct AnySections(toml::Table);

    impl skillforge_stage::Sections for AnySections {
        type Override = toml::Table;

        fn apply(&mut self, _: toml::Table) {}
    }

    #[test]
    fn workflows_are_unique_and_every_job_builder_is_registered() {
        let mut seen = std::collections::BTreeSet::new();
        for family in all() {
            assert!(
                seen.insert(family.workflow),
                "workflow `{}` registered twice",
                family.workflow
            );
        }
        let engine_default =
            skillforge_engine::JobSpec::new("process", serde_json::Value::Null).workflow;
        for workflow in [
            skillforge_skillopt::train::generation::TRAIN_WORKFLOW,
            skillforge_skillopt::harvest::WORKFLOW,
            skillforge_skillopt::evaluator::EVALUATE_WORKFLOW,
            skillforge_skillopt::promotion::events::EVENTS_WORKFLOW,
            skillforge_skillopt::github_write::GITHUB_WORKFLOW,
            skillforge_skillopt::AB_WORKFLOW,
            skillforge_skillopt::BINEVAL_WORKFLOW,
            skillforge_evalloop::stages::EVAL_WORKFLOW,
            skillforge_optimize::WORKFLOW,
            skillforge_stage::family::ASK_WORKFLOW,
            skillforge_stage::family::VERIFY_WORKFLOW,
            skillforge_stage::family::CHECK_WORKFLOW,
            skillforge_stage::family::APALIS_WORKFLOW,
            engine_default.as_str(),
        ] {
            assert!(
                all().iter().any(|f| f.workflow == workflow),
                "jobs of workflow `{workflow}` are enqueued but no family owns them"
            );
        }
        // Every family's stages are its own: same workflow, and the shipped file loads.
        for family in all() {
            if let Some(source) = family.stages {
                assert_eq!(
                    source.workflow, family.workflow,
                    "family `{}` reads another workflow's stages",
                    family.name
                );
                let def: skillforge_stage::WorkflowDef<AnySections> = source
                    .shipped()
                    .unwrap_or_else(|e| panic!("{}: {e}", source.shipped_file()));
                assert_eq!(
                    def.stages.len(),
                    source.stage_names.len(),
                    "{}",
                    source.shipped_file()
                );
            }
        }
        let families = for_home(Path::new("/nonexistent"));
        assert!(families.handler("bogus").is_none());
        assert!(families.handler("harvest").is_some());
    }
}
