//! The train workflow's stage definitions (`workflows/train.toml`, embedded, through the stage
//! core [`skillforge_stage::def`]) and optimizer backends (`[backends.NAME]`, train's own table), with
//! the per-home overrides of `<home>/train.toml` (DESIGN §2 "workflows/", §9).
//!
//! Both files are parsed strictly: an unknown key is an error naming the key and the file; every
//! stage of [`STAGE_NAMES`] must be declared in the shipped file with either a `runner` or a
//! `handler`, positive times and `stale_after_secs > heartbeat_secs`; a backend needs a command.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use skillforge_stage::{Sections, StageSource, WorkflowDef};
pub use skillforge_stage::{StageDef, StagesError};

use super::generation::TRAIN_WORKFLOW;

/// The shipped definition, `workflows/train.toml`.
pub const SHIPPED_TRAIN_TOML: &str = include_str!("../../../../workflows/train.toml");
/// Placeholder in a backend command for the running skillforge binary.
pub const SKILLFORGE_BIN_PLACEHOLDER: &str = "{skillforge_bin}";
/// The backend used when `--backend` is not given.
pub const DEFAULT_BACKEND: &str = "distill";

/// Every stage, in workflow order (seed "Complete train-mode path").
pub const STAGE_NAMES: [&str; 7] = [
    "option_generation",
    "review_publication",
    "feedback_sync",
    "export",
    "optimizer",
    "candidate_import",
    "candidate_review_publication",
];

/// Where train's stages come from.
pub const SOURCE: StageSource = StageSource {
    family: "train",
    workflow: TRAIN_WORKFLOW,
    shipped: SHIPPED_TRAIN_TOML,
    stage_names: &STAGE_NAMES,
};

/// An optimizer backend: the argv before the external optimizer's flags (facts §9).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackendDef {
    /// Program and leading arguments; `{skillforge_bin}` is the running skillforge binary.
    pub command: Vec<String>,
    /// Arguments after the standard flags (e.g. `--dry-run`).
    #[serde(default)]
    pub extra_args: Vec<String>,
    /// One line for the preflight report.
    #[serde(default)]
    pub description: String,
}

/// Train's tables besides `[stages]`: `[backends.NAME]` (an override adds or replaces backends).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainSections {
    /// Backend name → definition.
    #[serde(default)]
    pub backends: BTreeMap<String, BackendDef>,
}

impl Sections for TrainSections {
    type Override = TrainSections;

    fn apply(&mut self, o: TrainSections) {
        self.backends.extend(o.backends);
    }

    fn validate(&self) -> Result<(), String> {
        match self
            .backends
            .iter()
            .find(|(_, b)| b.command.first().is_none_or(|p| p.trim().is_empty()))
        {
            Some((name, _)) => Err(format!("backend `{name}` has an empty command")),
            None => Ok(()),
        }
    }
}

/// The resolved train workflow: every stage of [`STAGE_NAMES`] and the backends.
pub type TrainWorkflow = WorkflowDef<TrainSections>;

/// The shipped definition.
///
/// # Errors
/// [`StagesError`] when the embedded file is invalid (a build defect; a unit test guards it).
pub fn shipped() -> Result<TrainWorkflow, StagesError> {
    SOURCE.shipped()
}

/// Parses a full definition (the shipped file's shape) and validates it.
///
/// # Errors
/// As [`StageSource::parse`]; a backend with an empty command.
pub fn parse(text: &str, file: &str) -> Result<TrainWorkflow, StagesError> {
    SOURCE.parse(text, file)
}

/// The shipped definition with `<home>/train.toml` applied when it exists.
///
/// # Errors
/// As [`StageSource::for_home`].
pub fn for_home(home: &Path) -> Result<TrainWorkflow, StagesError> {
    SOURCE.for_home(home)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_file_is_valid_and_complete() {
        let w = shipped().expect("shipped train.toml");
        assert_eq!(w.stages.len(), STAGE_NAMES.len());
        assert_eq!(
            w.stage("option_generation").runner.as_deref(),
            Some("agent")
        );
        assert_eq!(w.stage("optimizer").runner.as_deref(), Some("process"));
        assert!(!w.stage("optimizer").idempotent);
        assert!(w.sections.backends.contains_key(DEFAULT_BACKEND));
    }

    #[test]
    fn refusals_name_the_key_and_the_file() {
        let check = |text: &str, want: &[&str]| {
            let err = parse(text, "x/train.toml").expect_err(text).to_string();
            for w in want {
                assert!(err.contains(w), "{err:?} should contain {w:?}");
            }
        };
        let unknown_key =
            SHIPPED_TRAIN_TOML.replacen("attempts = 3", "attempts = 3\nretries = 2", 1);
        check(&unknown_key, &["x/train.toml", "retries"]);
        let no_runner = SHIPPED_TRAIN_TOML.replacen("runner = \"agent\"\n", "", 1);
        check(&no_runner, &["option_generation", "runner"]);
        let bad_stale =
            SHIPPED_TRAIN_TOML.replacen("stale_after_secs = 15", "stale_after_secs = 1", 1);
        check(&bad_stale, &["stale_after_secs"]);
        let extra = format!(
            "{SHIPPED_TRAIN_TOML}\n[stages.bogus]\nhandler = \"x\"\ntimeout_secs = 1\nheartbeat_secs = 1\nstale_after_secs = 2\nattempts = 1\nidempotent = true\n"
        );
        check(&extra, &["unknown stage `bogus`"]);
    }

    #[test]
    fn override_changes_times_and_adds_backends() {
        let mut w = shipped().unwrap();
        w.apply_override(
            "[stages.optimizer]\nheartbeat_secs = 1\nstale_after_secs = 3\n[backends.slow]\ncommand = [\"sh\", \"slow.sh\"]\n",
            "home/train.toml",
        )
        .unwrap();
        assert_eq!(
            (
                w.stage("optimizer").heartbeat_secs,
                w.stage("optimizer").stale_after_secs
            ),
            (1, 3)
        );
        assert_eq!(w.sections.backends["slow"].command, vec!["sh", "slow.sh"]);
        let err = w
            .apply_override("[stages.optimizer]\nrunner = \"x\"\n", "home/train.toml")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("home/train.toml") && err.contains("runner"),
            "{err}"
        );
    }
}
