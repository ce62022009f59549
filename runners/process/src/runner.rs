//! The `process` runner: parses a [`ProcessPayload`] from a job and runs it.

use std::path::Path;

use skillforge_runner::{
    RunContext, RunOutcome, RunSpec, Runner, RunnerError, RunnerPayload, parse_payload,
};

use crate::orphans::start_orphan_sweeper;
use crate::payload::ProcessPayload;
use crate::run::run_process_with_output;

/// Environment variable naming the job a process runs for (set when an engine lease backs the run).
pub const JOB_ID_ENV: &str = "SKILLFORGE_JOB_ID";
/// Environment variable with the 1-based attempt of the lease the process runs under.
pub const ATTEMPT_ENV: &str = "SKILLFORGE_JOB_ATTEMPT";
/// Environment variable with the fencing token of the lease the process runs under: a command
/// with effects outside skillforge tags them with it (the fault soak's effects log does), so a
/// superseded attempt's effects can be told from the current one's.
pub const FENCING_TOKEN_ENV: &str = "SKILLFORGE_FENCING_TOKEN";

/// The `process` runner (kind `"process"`): runs the job's [`ProcessPayload`] with
/// [`run_process`](crate::run_process) under `spec.timeout` and `ctx.cancel`, its output streamed
/// live to `ctx.output`. When a lease backs the run (`ctx.fencing_token > 0`) the child also gets
/// [`JOB_ID_ENV`], [`ATTEMPT_ENV`] and [`FENCING_TOKEN_ENV`], which same-named `payload.env`
/// entries cannot override.
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
        let mut payload: ProcessPayload = parse_payload(spec)?;
        if ctx.fencing_token > 0 {
            payload
                .env
                .insert(JOB_ID_ENV.to_owned(), spec.job_id.clone());
            payload
                .env
                .insert(ATTEMPT_ENV.to_owned(), ctx.attempt.to_string());
            payload
                .env
                .insert(FENCING_TOKEN_ENV.to_owned(), ctx.fencing_token.to_string());
        }
        run_process_with_output(&payload, spec.timeout, &ctx.cancel, Some(&ctx.output)).await
    }
}
