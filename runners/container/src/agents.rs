//! Agents in containers: the container runner's side of the agent runner's
//! [`AgentContainerExec`] port (payload `container` of an `agent` job; the eval loop's container
//! arms).

use std::os::unix::fs::MetadataExt;
use std::time::Duration;

use skillforge_runner::{CancellationToken, RunOutcome, RunnerError};
use skillforge_runner_agent::{
    AgentContainerExec, CONTAINER_SCRATCH, CONTAINER_WORKDIR, ContainerAgentRun,
};

use crate::error::ContainerError;
use crate::payload::{Command, ContainerPayload, Mount, Network};
use crate::run::run_container;

/// File in the scratch dir the agent's stdin is read from (the image's `/bin/sh` redirects it).
pub const STDIN_FILE: &str = "agent.stdin";

/// Runs agent CLIs in containers on the engine [`crate::resolve_host`] picks: the work dir at
/// [`CONTAINER_WORKDIR`] (working directory), the scratch dir at [`CONTAINER_SCRATCH`], the
/// run's further mounts read-only, running as the work dir's owner (uid:gid) so what the agent
/// writes stays the worker's. A stdin prompt is written to the scratch dir and redirected by
/// `/bin/sh` (`exec "$@" < FILE`): the image needs a shell.
#[derive(Debug, Default, Clone, Copy)]
pub struct ContainerAgents;

#[async_trait::async_trait]
impl AgentContainerExec for ContainerAgents {
    fn engine(&self, explicit: Option<&str>) -> String {
        crate::resolve_host(explicit)
    }

    async fn run_agent(
        &self,
        run: &ContainerAgentRun,
        timeout: Duration,
        cancel: &CancellationToken,
    ) -> Result<RunOutcome, RunnerError> {
        Ok(run_agent(run, timeout, cancel).await?)
    }
}

async fn run_agent(
    run: &ContainerAgentRun,
    timeout: Duration,
    cancel: &CancellationToken,
) -> Result<RunOutcome, ContainerError> {
    let command = match &run.stdin {
        Some(text) => {
            let path = run.scratch_dir.join(STDIN_FILE);
            std::fs::write(&path, text).map_err(|source| ContainerError::Io {
                context: format!("write the agent's stdin `{}`", path.display()),
                source,
            })?;
            let mut argv: Vec<String> = vec![
                "/bin/sh".into(),
                "-c".into(),
                format!("exec \"$@\" < {CONTAINER_SCRATCH}/{STDIN_FILE}"),
                "sh".into(),
            ];
            argv.extend(run.argv.iter().cloned());
            Command::Argv(argv)
        }
        None => Command::Argv(run.argv.clone()),
    };
    let mut payload = ContainerPayload::new(run.image.clone(), command);
    payload.mount_path = Some(CONTAINER_WORKDIR.to_owned());
    payload.env = run.env.clone();
    payload.network = if run.network {
        Network::Default
    } else {
        Network::None
    };
    payload.host = run.host.clone();
    payload.max_output_bytes = Some(run.max_output_bytes);
    payload.user = std::fs::metadata(&run.workdir)
        .ok()
        .map(|m| format!("{}:{}", m.uid(), m.gid()));
    payload.mounts.push(Mount {
        source: run.scratch_dir.clone(),
        target: CONTAINER_SCRATCH.to_owned(),
        read_only: false,
    });
    payload
        .mounts
        .extend(run.mounts.iter().map(|(source, target)| Mount {
            source: source.clone(),
            target: target.clone(),
            read_only: true,
        }));
    run_container(&payload, &run.job_id, &run.workdir, timeout, cancel).await
}
