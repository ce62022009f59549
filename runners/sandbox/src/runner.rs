//! The `sandbox` runner: parses a [`SandboxPayload`] from a job and runs [`crate::verify`]
//! (or [`verify_with`] its container port when the payload names an image).

use std::path::Path;
use std::sync::Arc;

use skillforge_runner::{RunContext, RunOutcome, RunSpec, Runner, RunnerError, RunnerPayload};

use crate::container::ContainerExec;
use crate::payload::SandboxPayload;
use crate::sandbox_dir::clean_leftovers;
use crate::verify::verify_with;

/// The `sandbox` runner (kind `"sandbox"`, DESIGN §5): a hard-verifier run of the job's
/// [`SandboxPayload`] under `spec.timeout` (or the payload's shorter `timeout_secs`) and
/// `ctx.cancel`; the outcome's `detail` is a [`crate::VerifyReport`]. A payload naming an `image`
/// runs its commands through the [`ContainerExec`] given to [`SandboxRunner::with_containers`]
/// (and errors without one).
#[derive(Debug, Default, Clone)]
pub struct SandboxRunner {
    containers: Option<Arc<dyn ContainerExec>>,
}

impl SandboxRunner {
    /// A sandbox runner that runs payloads with an `image` through `containers`.
    pub fn with_containers(containers: Arc<dyn ContainerExec>) -> Self {
        Self {
            containers: Some(containers),
        }
    }
}

#[async_trait::async_trait]
impl Runner for SandboxRunner {
    fn kind(&self) -> &'static str {
        SandboxPayload::KIND
    }

    /// Removes the sandboxes that workers of this host which died mid-verification (SIGKILL)
    /// left under `scratch_root` ([`clean_leftovers`]); each removal and failure is logged.
    /// Remembers a successful bwrap probe in `scratch_root` for the rest of the boot
    /// ([`crate::set_probe_cache`]).
    fn on_worker_start(&self, scratch_root: &Path) {
        crate::confine::set_probe_cache(scratch_root);
        match clean_leftovers(scratch_root) {
            Ok(report) => {
                for path in &report.removed {
                    tracing::info!(path = %path.display(), "removed a dead worker's sandbox");
                }
                for (path, error) in &report.failed {
                    tracing::warn!(path = %path.display(), %error, "could not remove a dead worker's sandbox");
                }
            }
            Err(error) => tracing::warn!(%error, "could not look for leftover sandboxes"),
        }
    }

    /// # Errors
    /// [`RunnerError::InvalidPayload`] when `spec.payload` is not a [`SandboxPayload`];
    /// [`RunnerError::Other`] naming the path and worker host when the repository is missing or
    /// not a git repository, when the rev does not resolve or the sandbox cannot be provisioned;
    /// otherwise as [`verify`]. A failing or skipped verification is `Ok`. On cancel, kills the
    /// running command, removes the sandbox and returns `Ok` with `Killed`.
    async fn run(&self, spec: &RunSpec, ctx: &RunContext) -> Result<RunOutcome, RunnerError> {
        let mut payload = SandboxPayload::from_json(&spec.payload)?;
        if let Some(fetch) = payload.fetch.clone() {
            // A fleet job's repository: fetched into this worker's mirror cache, then cloned
            // from the mirror like any live repository (hard links, origin removed).
            let root = skillforge_runner_process::mirror::mirror_root(&ctx.scratch_dir);
            let rev = payload.rev.clone();
            let mirror = tokio::task::spawn_blocking(move || {
                skillforge_runner_process::mirror::ensure_mirror(&root, &fetch, &[&rev])
            })
            .await
            .map_err(|e| RunnerError::Other(format!("mirror task failed: {e}")))?
            .map_err(|e| {
                RunnerError::Other(format!("on worker {}: {e}", crate::error::worker_host()))
            })?;
            payload.repo = mirror;
        }
        let budget = payload.run_budget(spec.timeout);
        tracing::info!(
            job_id = %spec.job_id, runner = SandboxPayload::KIND, repo = %payload.repo.display(),
            rev = %payload.rev, n_commands = payload.commands.len(), "verification started"
        );
        let verification = verify_with(&payload, budget, ctx, self.containers.as_deref()).await?;
        Ok(verification.into_outcome())
    }
}
