//! The process runner: runs argv or `sh -c` in its own process group, with timeout, output caps and exit classification.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use skillforge_runner::{
    CancellationToken, RunContext, RunOutcome, RunSpec, Runner, RunnerError,
};

/// Default cap on captured bytes per stream (64 KiB).
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 64 * 1024;
/// Default grace between SIGTERM and SIGKILL to the process group (2 s).
pub const DEFAULT_GRACE_MS: u64 = 2_000;
/// Environment variables a child inherits from the worker by default.
pub const DEFAULT_ENV_ALLOWLIST: &[&str] = &["PATH", "HOME", "LANG", "LC_ALL", "TERM", "TMPDIR", "USER", "SHELL"];
/// Marker appended to a captured stream that was cut at its cap.
pub const TRUNCATION_MARKER: &str = "\n[... truncated]";

/// What to run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Command {
    /// Program and arguments, no shell.
    Argv(Vec<String>),
    /// A shell command line, run as `sh -c LINE`.
    Shell(String),
}

/// The `process` runner's payload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessPayload {
    /// What to run.
    pub command: Command,
    /// Working directory; the worker's own when `None`.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// Variables set explicitly (secrets travel only this way, never in argv).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Names inherited from the worker's environment; [`DEFAULT_ENV_ALLOWLIST`] when `None`.
    #[serde(default)]
    pub env_allowlist: Option<Vec<String>>,
    /// Bytes written to the child's stdin, then closed; stdin is empty when `None`.
    #[serde(default)]
    pub stdin: Option<String>,
    /// Cap on captured bytes per stream; [`DEFAULT_MAX_OUTPUT_BYTES`] when `None`.
    #[serde(default)]
    pub max_output_bytes: Option<usize>,
    /// Grace between SIGTERM and SIGKILL, ms; [`DEFAULT_GRACE_MS`] when `None`.
    #[serde(default)]
    pub grace_ms: Option<u64>,
}

impl ProcessPayload {
    /// A payload running `argv` with every default.
    pub fn argv(argv: Vec<String>) -> Self {
        Self {
            command: Command::Argv(argv),
            cwd: None,
            env: BTreeMap::new(),
            env_allowlist: None,
            stdin: None,
            max_output_bytes: None,
            grace_ms: None,
        }
    }

    /// A payload running `sh -c line` with every default.
    pub fn shell(line: impl Into<String>) -> Self {
        Self { command: Command::Shell(line.into()), ..Self::argv(Vec::new()) }
    }
}

/// Runs one process to completion, timeout or cancellation.
///
/// The child runs in a new process group. On timeout or when `cancel` fires: SIGTERM to the
/// group, wait `grace`, SIGKILL to the group; no descendant survives (the group is killed even
/// after the direct child exits, so backgrounded grandchildren do not outlive the run).
///
/// # Errors
/// Only I/O failures outside the child (e.g. pipes); a missing program is
/// `Ok` with [`skillforge_runner::ExitClass::NotRunnable`].
pub async fn run_process(
    payload: &ProcessPayload,
    timeout: Duration,
    cancel: &CancellationToken,
) -> Result<RunOutcome, RunnerError> {
    let _ = (payload, timeout, cancel);
    Err(RunnerError::Other("process runner not implemented yet".into()))
}

/// The `process` runner.
#[derive(Debug, Default, Clone, Copy)]
pub struct ProcessRunner;

#[async_trait::async_trait]
impl Runner for ProcessRunner {
    fn kind(&self) -> &'static str {
        "process"
    }

    async fn run(&self, spec: &RunSpec, ctx: &RunContext) -> Result<RunOutcome, RunnerError> {
        let payload: ProcessPayload = serde_json::from_value(spec.payload.clone()).map_err(|e| {
            RunnerError::InvalidPayload { runner: "process", message: e.to_string() }
        })?;
        run_process(&payload, spec.timeout, &ctx.cancel).await
    }
}
