//! The runner contract: one trait every pluggable runner implements, and the types that cross it.
//!
//! A runner executes one leased job. The engine hands it a [`RunSpec`] (the job's payload plus
//! limits) and a [`RunContext`] (cancellation, heartbeat, scratch directory) and gets back a
//! [`RunOutcome`]. A failed check is not an error: a command that exits 1 is
//! `Ok(RunOutcome { exit: ExitClass::Failed { code: 1 }, .. })`; `Err` means the runner could not
//! run the job at all (bad payload, I/O failure creating the scratch dir).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
pub use tokio_util::sync::CancellationToken;

/// What a runner is asked to do: the job's runner-specific payload plus the engine's limits.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunSpec {
    /// Job id, for logs and for naming scratch directories.
    pub job_id: String,
    /// Runner-specific payload (e.g. `ProcessPayload` for `process`); each runner parses its own.
    pub payload: serde_json::Value,
    /// Wall-clock budget for the whole run; on expiry the runner kills what it started and
    /// reports [`ExitClass::TimedOut`].
    pub timeout: Duration,
}

/// Callback the runner calls to report liveness (and optionally progress text).
pub type HeartbeatFn = Arc<dyn Fn(Option<&str>) + Send + Sync>;

/// What the engine gives a running job: cancellation, heartbeat and a private scratch dir.
#[derive(Clone)]
pub struct RunContext {
    /// Cancelled when the job is cancelled, its lease is lost (fenced off) or the worker shuts
    /// down past its grace period. A runner that owns processes must kill them when this fires.
    pub cancel: CancellationToken,
    /// Reports liveness/progress. The engine already heartbeats the lease on its own timer, so
    /// calling this is optional; it only adds progress text.
    pub heartbeat: HeartbeatFn,
    /// A directory private to this attempt: a path only. A runner that needs it creates it
    /// (`create_dir_all`); the engine removes it after the run if it exists.
    pub scratch_dir: PathBuf,
}

impl RunContext {
    /// A context with a fresh cancellation token, a no-op heartbeat and the given scratch dir.
    /// Used by tests and by commands that run a runner in-process.
    pub fn detached(scratch_dir: PathBuf) -> Self {
        Self {
            cancel: CancellationToken::new(),
            heartbeat: Arc::new(|_| {}),
            scratch_dir,
        }
    }
}

/// How a run ended, classified once for every workflow (resolutions.md §1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ExitClass {
    /// Exit code 0.
    Passed,
    /// Any other exit code not listed below.
    Failed {
        /// The process exit code.
        code: i32,
    },
    /// Our own timeout fired, or the command exited 124 (as `timeout(1)` does).
    TimedOut,
    /// The command could not run at all: exit 126 or 127, or the program/interpreter is missing.
    NotRunnable {
        /// Why it could not run, e.g. ``program `foo` not found``.
        reason: String,
    },
    /// Killed by a signal (including exit 128+n from a shell), or cancelled.
    Killed {
        /// Signal number, e.g. 9 for SIGKILL, 14 for SIGALRM.
        signal: i32,
    },
    /// Exit 125 with the censor marker on stderr: the run declared its own result unusable.
    Censored,
}

impl ExitClass {
    /// True only for [`ExitClass::Passed`].
    pub fn is_passed(&self) -> bool {
        matches!(self, ExitClass::Passed)
    }

    /// Short stable label: `passed`, `failed`, `timed_out`, `not_runnable`, `killed`, `censored`.
    pub fn label(&self) -> &'static str {
        match self {
            ExitClass::Passed => "passed",
            ExitClass::Failed { .. } => "failed",
            ExitClass::TimedOut => "timed_out",
            ExitClass::NotRunnable { .. } => "not_runnable",
            ExitClass::Killed { .. } => "killed",
            ExitClass::Censored => "censored",
        }
    }
}

/// The result of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunOutcome {
    /// How it ended.
    pub exit: ExitClass,
    /// The raw exit code when the process exited normally.
    pub exit_code: Option<i32>,
    /// Wall-clock duration in milliseconds.
    pub duration_ms: u64,
    /// Tail of stdout (UTF-8, lossy), capped; starts with a `[... truncated N bytes]` line when cut.
    pub stdout_tail: String,
    /// Tail of stderr (UTF-8, lossy), capped; starts with a `[... truncated N bytes]` line when cut.
    pub stderr_tail: String,
    /// Runner-specific structured result (e.g. a verifier's per-command results); `null` if none.
    #[serde(default)]
    pub detail: serde_json::Value,
}

/// Errors a runner returns when it cannot run a job at all.
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// The payload did not parse as this runner's spec.
    #[error("invalid payload for runner `{runner}`: {message}")]
    InvalidPayload {
        /// Runner kind.
        runner: &'static str,
        /// What was wrong.
        message: String,
    },
    /// An I/O failure outside the job's own commands.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, e.g. ``create sandbox dir `/tmp/x` ``.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Anything else the runner could not do, with a message naming the thing.
    #[error("{0}")]
    Other(String),
}

/// A pluggable executor of jobs (DESIGN §5).
#[async_trait::async_trait]
pub trait Runner: Send + Sync {
    /// Stable name used in workflow definitions and job envelopes, e.g. `"process"`.
    fn kind(&self) -> &'static str;
    /// Runs one job. Must honour `ctx.cancel` (kill everything it started, then return
    /// `Ok` with [`ExitClass::Killed`]) and stay within `spec.timeout`.
    ///
    /// # Errors
    /// [`RunnerError`] when the job could not be run at all; a failing command is `Ok`.
    async fn run(&self, spec: &RunSpec, ctx: &RunContext) -> Result<RunOutcome, RunnerError>;
}
