//! Errors of the container runner: bad payloads, an unreachable engine, engine failures.

use skillforge_runner::RunnerError;

/// What the container runner could not do (a command that fails is not an error).
#[derive(Debug, thiserror::Error)]
pub enum ContainerError {
    /// The payload did not parse or was inconsistent.
    #[error("invalid payload for runner `container`: {0}")]
    InvalidPayload(String),
    /// No engine answered at `host` (an environment problem: exit 3 in the CLI).
    #[error(
        "no container engine answers at `{host}` ({message}). Start one and point skillforge at it: \
         `podman system service --time=0 unix:///run/podman/podman.sock &` then \
         `export DOCKER_HOST=unix:///run/podman/podman.sock` (or set `[runners.container] host` in \
         config.toml), or start the Docker daemon (`sudo systemctl start docker`)"
    )]
    EngineUnreachable {
        /// The engine address tried, e.g. `unix:///var/run/docker.sock`.
        host: String,
        /// Why it did not answer.
        message: String,
    },
    /// The engine answered but refused or failed an operation.
    #[error("container engine at `{host}`: {action}: {message}")]
    Engine {
        /// The engine address.
        host: String,
        /// What was being done, e.g. ``create container from `img` ``.
        action: String,
        /// The engine's message.
        message: String,
    },
    /// A host-side I/O failure (creating the work dir).
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl ContainerError {
    /// True for [`ContainerError::EngineUnreachable`]: the worker's environment, not the job.
    pub fn is_environment(&self) -> bool {
        matches!(self, ContainerError::EngineUnreachable { .. })
    }
}

impl From<ContainerError> for RunnerError {
    fn from(error: ContainerError) -> Self {
        match error {
            ContainerError::InvalidPayload(message) => RunnerError::InvalidPayload {
                runner: "container",
                message,
            },
            ContainerError::Io { context, source } => RunnerError::Io { context, source },
            other => RunnerError::Other(other.to_string()),
        }
    }
}
