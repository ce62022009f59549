//! The eval loop's stage definitions (`workflows/evalloop.toml`, embedded; `<home>/evalloop.toml`
//! replaces it when present): `arm` and `judge` (`agent` jobs), `verify` (a `process` job). Stage
//! fields are train's [`StageDef`].

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use skillforge_engine::JobSpec;

pub use crate::train::stages::StageDef;

/// The shipped definition.
pub const SHIPPED_EVALLOOP_TOML: &str = include_str!("../../../../workflows/evalloop.toml");
/// Workflow name of every eval-loop job.
pub const EVAL_WORKFLOW: &str = "evalloop";
/// Stage of an arm job.
pub const ARM_STAGE: &str = "arm";
/// Stage of a verify job.
pub const VERIFY_STAGE: &str = "verify";
/// Stage of a judge job.
pub const JUDGE_STAGE: &str = "judge";

/// The two stages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvalStages {
    /// `arm`.
    pub arm: StageDef,
    /// `verify`.
    pub verify: StageDef,
    /// `judge`.
    pub judge: StageDef,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    stages: BTreeMap<String, StageDef>,
}

impl EvalStages {
    /// Parses a definition file named `file` in messages.
    ///
    /// # Errors
    /// A message naming the file: bad TOML, an unknown key, a missing or unknown stage, a stage
    /// that is not an `agent` job, or `stale_after_secs <= heartbeat_secs`.
    pub fn parse(text: &str, file: &str) -> Result<Self, String> {
        let mut parsed: File = toml::from_str(text).map_err(|e| format!("invalid workflow file `{file}`: {e}"))?;
        if let Some(extra) = parsed.stages.keys().find(|k| ![ARM_STAGE, VERIFY_STAGE, JUDGE_STAGE].contains(&k.as_str())) {
            return Err(format!("invalid workflow file `{file}`: unknown stage `{extra}` (expected arm, verify, judge)"));
        }
        let mut take = |name: &str, runner: &str| {
            let stage = parsed.stages.remove(name).ok_or_else(|| format!("invalid workflow file `{file}`: stage `{name}` is missing"))?;
            if stage.runner.as_deref() != Some(runner) || stage.attempts == 0 || stage.stale_after_secs <= stage.heartbeat_secs {
                return Err(format!("invalid workflow file `{file}`: stage `{name}` must be a `{runner}` job with attempts >= 1 and stale_after_secs > heartbeat_secs"));
            }
            Ok(stage)
        };
        Ok(Self { arm: take(ARM_STAGE, "agent")?, verify: take(VERIFY_STAGE, "process")?, judge: take(JUDGE_STAGE, "agent")? })
    }

    /// The home's definition: `<home>/evalloop.toml` when it exists, else the shipped one.
    ///
    /// # Errors
    /// As [`EvalStages::parse`], or the override cannot be read.
    pub fn for_home(home: &Path) -> Result<Self, String> {
        let path = home.join("evalloop.toml");
        match std::fs::read_to_string(&path) {
            Ok(text) => Self::parse(&text, &path.display().to_string()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Self::parse(SHIPPED_EVALLOOP_TOML, "workflows/evalloop.toml"),
            Err(e) => Err(format!("read workflow file `{}`: {e}", path.display())),
        }
    }
}

/// An `agent` job of `stage` with `payload` and idempotency key `key`.
pub fn agent_job(stage_name: &str, stage: &StageDef, payload: serde_json::Value, key: String) -> JobSpec {
    stage_job("agent", stage_name, stage, payload, key)
}

/// A job of runner `kind` for `stage` (a failing run is the answer: never retried; a dead
/// worker's job is recovered).
pub fn stage_job(kind: &str, stage_name: &str, stage: &StageDef, payload: serde_json::Value, key: String) -> JobSpec {
    let mut spec = JobSpec::new(kind, payload);
    spec.workflow = EVAL_WORKFLOW.to_owned();
    spec.stage = stage_name.to_owned();
    spec.idempotency_key = Some(key);
    spec.max_attempts = stage.attempts;
    spec.timeout_ms = stage.timeout_secs * 1000;
    spec.heartbeat_ms = stage.heartbeat_secs * 1000;
    spec.stale_after_ms = stage.stale_after_secs * 1000;
    spec.idempotent = stage.idempotent;
    spec.retry_failed_runs = false;
    spec
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_file_is_valid_and_overrides_are_checked() {
        let s = EvalStages::parse(SHIPPED_EVALLOOP_TOML, "x").unwrap();
        assert_eq!(s.arm.timeout_secs, 1200);
        let e = EvalStages::parse(&SHIPPED_EVALLOOP_TOML.replace("[stages.judge]", "[stages.jduge]"), "h/evalloop.toml").unwrap_err();
        assert!(e.contains("h/evalloop.toml") && e.contains("jduge"), "{e}");
        let e = EvalStages::parse(&SHIPPED_EVALLOOP_TOML.replacen("attempts = 3", "attempts = 3\nretries = 1", 1), "f").unwrap_err();
        assert!(e.contains("retries"), "{e}");
    }
}
