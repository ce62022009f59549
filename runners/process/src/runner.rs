//! The `process` runner: parses a [`ProcessPayload`] from a job and runs it.

use std::path::Path;

use skillforge_runner::{RunContext, RunOutcome, RunSpec, Runner, RunnerError, RunnerPayload, parse_payload};

use crate::orphans::start_orphan_sweeper;
use crate::payload::ProcessPayload;
use crate::run::run_process_with_output;

/// The `process` runner (kind `"process"`): runs the job's [`ProcessPayload`] with
/// [`run_process`](crate::run_process) under `spec.timeout` and `ctx.cancel`, its output streamed live to
/// `ctx.output`.
#[derive(Debug, Default, Clone, Copy)]
pub struct ProcessRunner;

#[async_trait::async_trait]
impl Runner for ProcessRunner {
    fn kind(&self) -> &'static str {
        ProcessPayload::KIND
    }

    /// Starts this process's orphan sweeper ([`start_orphan_sweeper`]), which kills job processes
    /// a dead worker left running on this host, now and every second.
    fn on_worker_start(&self, _scratch_root: &Path) {
        start_orphan_sweeper();
    }

    /// # Errors
    /// [`RunnerError::InvalidPayload`] when `spec.payload` is not a [`ProcessPayload`]; otherwise
    /// as [`run_process`](crate::run_process). On cancel, kills everything it started and returns `Ok` with
    /// `Killed`.
    async fn run(&self, spec: &RunSpec, ctx: &RunContext) -> Result<RunOutcome, RunnerError> {
        let payload: ProcessPayload = parse_payload(spec)?;
        run_process_with_output(&payload, spec.timeout, &ctx.cancel, Some(&ctx.output)).await
    }
}
