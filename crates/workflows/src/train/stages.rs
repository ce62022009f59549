//! The train workflow's stage definitions (`workflows/train.toml`, embedded) and optimizer
//! backends, with the per-home overrides of `<home>/train.toml` (DESIGN §2 "workflows/", §9).
//!
//! Both files are parsed strictly: an unknown key is an error naming the key and the file; every
//! stage of [`STAGE_NAMES`] must be declared in the shipped file with either a `runner` or a
//! `handler`, positive times and `stale_after_secs > heartbeat_secs`.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

/// The shipped definition, `workflows/train.toml`.
pub const SHIPPED_TRAIN_TOML: &str = include_str!("../../../../workflows/train.toml");
/// Display name of the shipped file in error messages.
pub const SHIPPED_FILE_NAME: &str = "workflows/train.toml";
/// File name of the per-home overrides.
pub const HOME_OVERRIDE_FILE: &str = "train.toml";
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

/// Why a workflow file was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StagesError {
    /// Not TOML, an unknown key, or a wrong type (the message comes from the parser and names the key).
    #[error("invalid workflow file `{file}`: {message}")]
    Parse {
        /// The file.
        file: String,
        /// The parser's message.
        message: String,
    },
    /// A semantic check failed.
    #[error("invalid workflow file `{file}`: {message}")]
    Invalid {
        /// The file.
        file: String,
        /// What is wrong.
        message: String,
    },
    /// The override file could not be read.
    #[error("read workflow file `{file}`: {message}")]
    Read {
        /// The file.
        file: String,
        /// Why.
        message: String,
    },
}

/// One stage: how it runs and how long its leases live.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StageDef {
    /// Runner kind of a durable job (`agent`, `process`), when the stage is a job.
    #[serde(default)]
    pub runner: Option<String>,
    /// Control-plane step name, when the stage runs inside `train continue`.
    #[serde(default)]
    pub handler: Option<String>,
    /// Wall-clock budget of one attempt, seconds.
    pub timeout_secs: u64,
    /// Heartbeat period of a running attempt's lease, seconds.
    pub heartbeat_secs: u64,
    /// A lease with no heartbeat for this long is stale, seconds.
    pub stale_after_secs: u64,
    /// Attempts in total (≥ 1).
    pub attempts: u32,
    /// Whether a stale attempt may be re-run (false ⇒ `stale` with recovery available).
    pub idempotent: bool,
    /// status_phase values the stage reports (facts §3).
    #[serde(default)]
    pub status_phases: Vec<String>,
}

impl StageDef {
    /// `timeout_secs` as a duration.
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_secs)
    }
}

/// Field-wise override of a stage in `<home>/train.toml`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
struct StageOverride {
    timeout_secs: Option<u64>,
    heartbeat_secs: Option<u64>,
    stale_after_secs: Option<u64>,
    attempts: Option<u32>,
    idempotent: Option<bool>,
}

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

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ShippedFile {
    stages: BTreeMap<String, StageDef>,
    #[serde(default)]
    backends: BTreeMap<String, BackendDef>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct OverrideFile {
    #[serde(default)]
    stages: BTreeMap<String, StageOverride>,
    #[serde(default)]
    backends: BTreeMap<String, BackendDef>,
}

/// The resolved train workflow: every stage of [`STAGE_NAMES`] and the backends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrainWorkflow {
    /// Stage name → definition.
    pub stages: BTreeMap<String, StageDef>,
    /// Backend name → definition.
    pub backends: BTreeMap<String, BackendDef>,
}

impl TrainWorkflow {
    /// The shipped definition.
    ///
    /// # Errors
    /// [`StagesError`] when the embedded file is invalid (a build defect; a unit test guards it).
    pub fn shipped() -> Result<Self, StagesError> {
        Self::parse(SHIPPED_TRAIN_TOML, SHIPPED_FILE_NAME)
    }

    /// Parses a full definition (the shipped file's shape) and validates it.
    ///
    /// # Errors
    /// [`StagesError::Parse`] for bad TOML or an unknown key; [`StagesError::Invalid`] for a
    /// missing or unknown stage, a stage with neither or both of runner/handler, a zero time or
    /// attempt count, or `stale_after_secs <= heartbeat_secs`.
    pub fn parse(text: &str, file: &str) -> Result<Self, StagesError> {
        let parsed: ShippedFile =
            toml::from_str(text).map_err(|e| StagesError::Parse { file: file.to_owned(), message: e.to_string() })?;
        let workflow = Self { stages: parsed.stages, backends: parsed.backends };
        workflow.validate(file)?;
        Ok(workflow)
    }

    /// The shipped definition with `<home>/train.toml` applied when it exists.
    ///
    /// # Errors
    /// As [`Self::parse`] and [`Self::apply_override`].
    pub fn for_home(home: &Path) -> Result<Self, StagesError> {
        let mut workflow = Self::shipped()?;
        let path = home.join(HOME_OVERRIDE_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => workflow.apply_override(&text, &path.display().to_string())?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(StagesError::Read { file: path.display().to_string(), message: e.to_string() }),
        }
        Ok(workflow)
    }

    /// Applies an override file: `[stages.NAME]` fields replace the shipped ones (runner and
    /// handler cannot change), `[backends.NAME]` add or replace backends.
    ///
    /// # Errors
    /// [`StagesError::Parse`] for bad TOML or an unknown key; [`StagesError::Invalid`] for an
    /// unknown stage or a result that fails validation.
    pub fn apply_override(&mut self, text: &str, file: &str) -> Result<(), StagesError> {
        let parsed: OverrideFile =
            toml::from_str(text).map_err(|e| StagesError::Parse { file: file.to_owned(), message: e.to_string() })?;
        for (name, o) in parsed.stages {
            let stage = self.stages.get_mut(&name).ok_or_else(|| StagesError::Invalid {
                file: file.to_owned(),
                message: format!("unknown stage `{name}` (expected one of {})", STAGE_NAMES.join(", ")),
            })?;
            if let Some(v) = o.timeout_secs {
                stage.timeout_secs = v;
            }
            if let Some(v) = o.heartbeat_secs {
                stage.heartbeat_secs = v;
            }
            if let Some(v) = o.stale_after_secs {
                stage.stale_after_secs = v;
            }
            if let Some(v) = o.attempts {
                stage.attempts = v;
            }
            if let Some(v) = o.idempotent {
                stage.idempotent = v;
            }
        }
        self.backends.extend(parsed.backends);
        self.validate(file)
    }

    fn validate(&self, file: &str) -> Result<(), StagesError> {
        let invalid = |message: String| StagesError::Invalid { file: file.to_owned(), message };
        for name in STAGE_NAMES {
            if !self.stages.contains_key(name) {
                return Err(invalid(format!("stage `{name}` is missing")));
            }
        }
        for (name, stage) in &self.stages {
            if !STAGE_NAMES.contains(&name.as_str()) {
                return Err(invalid(format!("unknown stage `{name}` (expected one of {})", STAGE_NAMES.join(", "))));
            }
            if stage.runner.is_some() == stage.handler.is_some() {
                return Err(invalid(format!("stage `{name}` needs exactly one of `runner` and `handler`")));
            }
            if stage.timeout_secs == 0 || stage.heartbeat_secs == 0 || stage.attempts == 0 {
                return Err(invalid(format!("stage `{name}`: timeout_secs, heartbeat_secs and attempts must be at least 1")));
            }
            if stage.stale_after_secs <= stage.heartbeat_secs {
                return Err(invalid(format!("stage `{name}`: stale_after_secs must be longer than heartbeat_secs")));
            }
        }
        for (name, backend) in &self.backends {
            if backend.command.is_empty() || backend.command[0].trim().is_empty() {
                return Err(invalid(format!("backend `{name}` has an empty command")));
            }
        }
        Ok(())
    }

    /// The stage `name` (one of [`STAGE_NAMES`]; validated at load, so always present).
    ///
    /// # Panics
    /// When `name` is not in [`STAGE_NAMES`] (a programming error).
    pub fn stage(&self, name: &str) -> &StageDef {
        self.stages.get(name).unwrap_or_else(|| panic!("train stage `{name}` is declared by validation"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_file_is_valid_and_complete() {
        let w = TrainWorkflow::shipped().expect("shipped train.toml");
        assert_eq!(w.stages.len(), STAGE_NAMES.len());
        assert_eq!(w.stage("option_generation").runner.as_deref(), Some("agent"));
        assert_eq!(w.stage("optimizer").runner.as_deref(), Some("process"));
        assert!(!w.stage("optimizer").idempotent);
        assert!(w.backends.contains_key(DEFAULT_BACKEND));
    }

    #[test]
    fn refusals_name_the_key_and_the_file() {
        let check = |text: &str, want: &[&str]| {
            let err = TrainWorkflow::parse(text, "x/train.toml").expect_err(text).to_string();
            for w in want {
                assert!(err.contains(w), "{err:?} should contain {w:?}");
            }
        };
        let unknown_key = SHIPPED_TRAIN_TOML.replacen("attempts = 3", "attempts = 3\nretries = 2", 1);
        check(&unknown_key, &["x/train.toml", "retries"]);
        let no_runner = SHIPPED_TRAIN_TOML.replacen("runner = \"agent\"\n", "", 1);
        check(&no_runner, &["option_generation", "runner"]);
        let bad_stale = SHIPPED_TRAIN_TOML.replacen("stale_after_secs = 15", "stale_after_secs = 1", 1);
        check(&bad_stale, &["stale_after_secs"]);
        let extra = format!("{SHIPPED_TRAIN_TOML}\n[stages.bogus]\nhandler = \"x\"\ntimeout_secs = 1\nheartbeat_secs = 1\nstale_after_secs = 2\nattempts = 1\nidempotent = true\n");
        check(&extra, &["unknown stage `bogus`"]);
    }

    #[test]
    fn override_changes_times_and_adds_backends() {
        let mut w = TrainWorkflow::shipped().unwrap();
        w.apply_override(
            "[stages.optimizer]\nheartbeat_secs = 1\nstale_after_secs = 3\n[backends.slow]\ncommand = [\"sh\", \"slow.sh\"]\n",
            "home/train.toml",
        )
        .unwrap();
        assert_eq!((w.stage("optimizer").heartbeat_secs, w.stage("optimizer").stale_after_secs), (1, 3));
        assert_eq!(w.backends["slow"].command, vec!["sh", "slow.sh"]);
        let err = w.apply_override("[stages.optimizer]\nrunner = \"x\"\n", "home/train.toml").unwrap_err().to_string();
        assert!(err.contains("home/train.toml") && err.contains("runner"), "{err}");
    }
}
