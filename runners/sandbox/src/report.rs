//! The verification report: the verdict, the hard score it projects to, and one entry per
//! command. It is the `detail` of the sandbox runner's `RunOutcome` and what
//! `skillforge verify --json` prints.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use skillforge_runner::ExitClass;

/// The binary verdict of a hard-verifier run (seed: SkillOpt, "Deterministic hard-verifier
/// tier"): fail-closed, `pass` only when every command exited 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Every command exited 0 ⇒ `hard = 1.0`.
    Pass,
    /// A runnable command exited non-zero, timed out or was killed by a signal ⇒ `hard = 0.0`.
    Fail,
    /// No verdict: a command could not run at all (126/127, missing `sh`), the command list was
    /// empty, or the run was cancelled ⇒ `hard = null`, never a fabricated 0 (S-39).
    Skipped,
}

impl Verdict {
    /// The projected `EvaluatorScore.Hard`: pass → 1.0, fail → 0.0, skipped → `None` (S-38).
    pub fn hard(self) -> Option<f64> {
        match self {
            Verdict::Pass => Some(1.0),
            Verdict::Fail => Some(0.0),
            Verdict::Skipped => None,
        }
    }
}

/// How the commands were confined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Confinement {
    /// Under bubblewrap: read-only filesystem except the checkout and a private `/tmp`, own PID
    /// namespace, network off unless the payload allows it.
    Bwrap,
    /// Unconfined: only the git clone's independence protects the live repository.
    None,
    /// In a container from the payload's `image` (one per command): the checkout bind-mounted
    /// as the working directory, nothing else of the worker's filesystem, no network unless
    /// the payload allows it; removed afterwards.
    Container,
}

/// How one command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CommandStatus {
    /// Exit 0.
    Passed,
    /// Non-zero exit.
    Failed,
    /// Its timeout (or the run's) expired; its process group was killed.
    TimedOut,
    /// It could not run at all (126/127, missing interpreter).
    NotRunnable,
    /// Killed by a signal, or by cancellation of the run.
    Killed,
    /// Exit 125 with the censor marker (counts as a failure here).
    Censored,
    /// Not started because an earlier command failed or the run stopped.
    NotRun,
}

impl CommandStatus {
    /// The status for a process runner exit class.
    pub fn from_exit(exit: &ExitClass) -> Self {
        match exit {
            ExitClass::Passed => CommandStatus::Passed,
            ExitClass::Failed { .. } => CommandStatus::Failed,
            ExitClass::TimedOut => CommandStatus::TimedOut,
            ExitClass::NotRunnable { .. } => CommandStatus::NotRunnable,
            ExitClass::Killed { .. } => CommandStatus::Killed,
            ExitClass::Censored => CommandStatus::Censored,
        }
    }
}

/// One command's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandReport {
    /// The command line as given (run as `sh -c LINE`).
    pub command: String,
    /// How it ended.
    pub status: CommandStatus,
    /// Exit code when it exited normally; `None` when killed, not started or not run.
    pub exit_code: Option<i32>,
    /// Wall-clock milliseconds (0 when not run).
    pub duration_ms: u64,
    /// Last bytes of stdout (at most [`crate::TAIL_BYTES`] plus the truncation marker).
    pub stdout_tail: String,
    /// Last bytes of stderr (same cap).
    pub stderr_tail: String,
}

impl CommandReport {
    /// A command that was never started.
    pub fn not_run(command: &str) -> Self {
        Self {
            command: command.to_owned(),
            status: CommandStatus::NotRun,
            exit_code: None,
            duration_ms: 0,
            stdout_tail: String::new(),
            stderr_tail: String::new(),
        }
    }
}

/// The result of one verification; serialized as the sandbox runner's `RunOutcome::detail`.
///
/// JSON: `{"verdict": "pass"|"fail"|"skipped", "hard": 1.0|0.0|null, "reason": "…" (absent when
/// none), "commands": [CommandReport…], "repo": "/path", "rev": "HEAD", "commit": "<40 hex>",
/// "confinement": "bwrap"|"none", "network": false, "sandbox_removed": true, "duration_ms": n}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerifyReport {
    /// The verdict.
    pub verdict: Verdict,
    /// `verdict.hard()`: 1.0, 0.0 or `null`.
    pub hard: Option<f64>,
    /// Why the run failed or was skipped (the first failing command, the un-runnable one, an
    /// empty command list, a timeout, a cancellation); absent on pass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// One entry per payload command, in order; those after the stopping one are `not_run`.
    pub commands: Vec<CommandReport>,
    /// The live repository path as given.
    pub repo: PathBuf,
    /// The rev as given.
    pub rev: String,
    /// The commit `rev` resolved to (40 hex digits), which is what was verified.
    pub commit: String,
    /// How commands were confined.
    pub confinement: Confinement,
    /// Whether commands could use the network (always reachable when `confinement` is `none`).
    pub network: bool,
    /// Whether the sandbox directory was removed afterwards: removed before the report, or —
    /// under a worker ([`RunContext::scratch_removed_after`](skillforge_runner::RunContext)) —
    /// handed to the worker's removal of the attempt's scratch dir, which runs beside the
    /// commit of this result and ends before the worker stops (a failure there is logged, and a
    /// worker that died first leaves it to [`clean_leftovers`](crate::clean_leftovers)). False
    /// only when the runner's own removal failed.
    pub sandbox_removed: bool,
    /// Wall-clock milliseconds of the whole run, clone included.
    pub duration_ms: u64,
    /// Under container confinement: the image asked for and what ran it,
    /// `{"engine": {...}, "image": {"reference", "digest", "repo_digests"}}`; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container: Option<serde_json::Value>,
}

impl VerifyReport {
    /// The report as JSON.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }

    /// Parses a report from a `RunOutcome::detail`.
    ///
    /// # Errors
    /// The serde error when `detail` is not a report.
    pub fn from_json(detail: &serde_json::Value) -> Result<Self, serde_json::Error> {
        serde_json::from_value(detail.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s38_verdict_projects_onto_hard() {
        let check = |verdict: Verdict, expected: Option<f64>| {
            assert_eq!(verdict.hard(), expected, "{verdict:?}");
        };
        check(Verdict::Pass, Some(1.0));
        check(Verdict::Fail, Some(0.0));
        check(Verdict::Skipped, None);
    }

    #[test]
    fn report_serializes_with_the_documented_keys() {
        let report = VerifyReport {
            verdict: Verdict::Skipped,
            hard: None,
            reason: None,
            commands: vec![CommandReport::not_run("true")],
            repo: PathBuf::from("/r"),
            rev: "HEAD".into(),
            commit: "0".repeat(40),
            confinement: Confinement::None,
            network: false,
            sandbox_removed: true,
            duration_ms: 1,
            container: None,
        };
        let json = report.to_json();
        assert_eq!(json["verdict"], "skipped");
        assert!(json["hard"].is_null());
        assert!(json.get("reason").is_none());
        assert_eq!(json["commands"][0]["status"], "not_run");
        assert_eq!(json["confinement"], "none");
        assert!(
            json.get("container").is_none(),
            "absent without a container"
        );
        assert_eq!(VerifyReport::from_json(&json).expect("round trip"), report);
    }
}
