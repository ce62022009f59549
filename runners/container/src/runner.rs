//! The `container` runner: parses a [`ContainerPayload`] from a job and runs it in a container.

use std::path::Path;

use skillforge_runner::{RunContext, RunOutcome, RunSpec, Runner, RunnerError, RunnerPayload};

use crate::error::ContainerError;
use crate::payload::ContainerPayload;
use crate::run::run_container;
use crate::sweep::start_leftover_sweeper;

/// The `container` runner (kind `"container"`, DESIGN §5): runs the job's [`ContainerPayload`]
/// with [`run_container`] under `spec.timeout` and `ctx.cancel`; the work dir is the payload's,
/// else the attempt's scratch dir (created here, removed by the engine afterwards).
#[derive(Debug, Default, Clone, Copy)]
pub struct ContainerRunner;

#[async_trait::async_trait]
impl Runner for ContainerRunner {
    fn kind(&self) -> &'static str {
        ContainerPayload::KIND
    }

    /// Starts this process's sweeper of containers that dead workers of this host left
    /// ([`crate::start_leftover_sweeper`]; nothing when no engine is configured).
    fn on_worker_start(&self, _scratch_root: &Path) {
        start_leftover_sweeper();
    }

    /// # Errors
    /// [`RunnerError::InvalidPayload`] when `spec.payload` is not a valid [`ContainerPayload`];
    /// [`RunnerError::Io`] when the scratch dir cannot be created; [`RunnerError::Other`] when
    /// no engine answers (saying how to start one) or the engine fails. A failing command is
    /// `Ok`; on cancel the container is killed and removed and the outcome is `Killed`.
    async fn run(&self, spec: &RunSpec, ctx: &RunContext) -> Result<RunOutcome, RunnerError> {
        let payload = ContainerPayload::from_json(&spec.payload)?;
        let work_dir = match &payload.work_dir {
            Some(dir) => dir.clone(),
            None => {
                std::fs::create_dir_all(&ctx.scratch_dir).map_err(|source| ContainerError::Io {
                    context: format!("create work dir `{}`", ctx.scratch_dir.display()),
                    source,
                })?;
                ctx.scratch_dir.clone()
            }
        };
        tracing::info!(job_id = %spec.job_id, runner = "container", image = %payload.image, "container run started");
        Ok(run_container(&payload, &spec.job_id, &work_dir, spec.timeout, &ctx.cancel).await?)
    }
}
