//! Container confinement of a hard verifier: the port through which the sandbox runner runs its
//! commands in a container (`skillforge verify --image`, `[skillopt] hard_verifier_image`).
//!
//! The sandbox runner does not talk to a container engine itself; the `container` runner crate
//! implements [`ContainerExec`] and the binary hands it to [`crate::SandboxRunner::with_containers`].
//! The clone, the fail-closed verdict and the report are the sandbox runner's, as without a
//! container; only where each command runs changes.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use skillforge_runner::{CancellationToken, RunOutcome, RunnerError};

/// Whether an image can run the commands.
#[derive(Debug, Clone, PartialEq)]
pub enum ImageCheck {
    /// The engine has the image; the value is what the report records as `container`
    /// (engine and image digest).
    Ready(serde_json::Value),
    /// The image is not there (and could not be pulled): the run is skipped with this reason.
    NotRunnable(String),
}

/// Runs a hard verifier's command lines in containers.
#[async_trait::async_trait]
pub trait ContainerExec: Send + Sync + std::fmt::Debug {
    /// Checks that the engine answers and has `image`, before anything is cloned.
    ///
    /// # Errors
    /// [`RunnerError`] when no engine answers (its message says how to start one) or the engine
    /// fails; a missing image is `Ok(ImageCheck::NotRunnable)`.
    async fn check_image(&self, image: &str) -> Result<ImageCheck, RunnerError>;

    /// Runs `sh -c LINE` in a fresh container from `image` with `checkout` bind-mounted as its
    /// working directory, `env` as its environment, no network unless `network`, under `timeout`
    /// and `cancel`; the container is removed afterwards. Output tails are capped at
    /// [`crate::TAIL_BYTES`]; the exit is classified like the process runner's.
    ///
    /// # Errors
    /// [`RunnerError`] when the engine cannot run the container for reasons not the command's.
    #[expect(
        clippy::too_many_arguments,
        reason = "one command's whole context, passed as is"
    )]
    async fn run_line(
        &self,
        image: &str,
        checkout: &Path,
        line: &str,
        network: bool,
        env: &BTreeMap<String, String>,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<RunOutcome, RunnerError>;
}
