//! The `process` runner: parses a [`ProcessPayload`] from a job and runs it.

use skillforge_runner::{RunContext, RunOutcome, RunSpec, Runner, RunnerError};

use crate::payload::ProcessPayload;
use crate::run::run_process;

/// The `process` runner (kind `"process"`): runs the job's [`ProcessPayload`] with
/// [`run_process`] under `spec.timeout` and `ctx.cancel`.
#[derive(Debug, Default, Clone, Copy)]
pub struct ProcessRunner;

#[async_trait::async_trait]
impl Runner for ProcessRunner {
    fn kind(&self) -> &'static str {
        "process"
    }

    /// # Errors
    /// [`RunnerError::InvalidPayload`] when `spec.payload` is not a [`ProcessPayload`]; otherwise
    /// as [`run_process`]. On cancel, kills everything it started and returns `Ok` with
    /// `Killed`.
    async fn run(&self, spec: &RunSpec, ctx: &RunContext) -> Result<RunOutcome, RunnerError> {
        let payload: ProcessPayload =
            serde_json::from_value(spec.payload.clone()).map_err(|e| {
                RunnerError::InvalidPayload {
                    runner: "process",
                    message: e.to_string(),
                }
            })?;
        run_process(&payload, spec.timeout, &ctx.cancel).await
    }
}
