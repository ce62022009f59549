//! Hard verifiers in a container: the container runner's side of the sandbox runner's
//! [`ContainerExec`] port (`skillforge verify --image`, `[skillopt] hard_verifier_image`).

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

use serde_json::json;
use skillforge_runner::{CancellationToken, RunOutcome, RunnerError};
use skillforge_runner_sandbox::{ContainerExec, ImageCheck, TAIL_BYTES};

use crate::engine::{Engine, resolve_host};
use crate::payload::{Command, ContainerPayload, Network, PullPolicy};
use crate::run::run_container;

/// Runs verifier commands in containers on the engine [`resolve_host`] picks: one container per
/// command, the checkout mounted at `/work` as working directory, running as the checkout's
/// owner (uid:gid) so what commands write stays removable by the worker, output tails capped
/// at the sandbox's [`TAIL_BYTES`].
#[derive(Debug, Default, Clone, Copy)]
pub struct ContainerCommands;

#[async_trait::async_trait]
impl ContainerExec for ContainerCommands {
    async fn check_image(&self, image: &str) -> Result<ImageCheck, RunnerError> {
        let engine = Engine::connect(&resolve_host(None)).await?;
        Ok(match engine.image(image, PullPolicy::Missing).await? {
            Ok(info) => ImageCheck::Ready(json!({"engine": engine.info, "image": info})),
            Err(reason) => ImageCheck::NotRunnable(reason),
        })
    }

    async fn run_line(
        &self,
        image: &str,
        checkout: &Path,
        line: &str,
        network: bool,
        env: &BTreeMap<String, String>,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<RunOutcome, RunnerError> {
        let mut payload = ContainerPayload::new(image, Command::Shell(line.to_owned()));
        payload.env = env.clone();
        payload.network = if network {
            Network::Default
        } else {
            Network::None
        };
        // The image was checked (and pulled) before the clone.
        payload.pull = PullPolicy::Never;
        payload.max_output_bytes = Some(TAIL_BYTES);
        payload.user = std::fs::metadata(checkout)
            .ok()
            .map(|m| format!("{}:{}", m.uid(), m.gid()));
        let job = checkout
            .parent()
            .and_then(Path::file_name)
            .map_or_else(|| "verify".to_owned(), |n| n.to_string_lossy().into_owned());
        Ok(run_container(&payload, &job, checkout, timeout, cancel).await?)
    }
}
