//! The sandbox runner's one error enum: everything that stops a verification from running at
//! all. A command that fails is not an error (it is a `fail` verdict in the report).

use std::path::PathBuf;

use skillforge_runner::RunnerError;

/// Why a verification could not run. Converts into [`RunnerError`] for the runner contract.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The payload did not parse or is unusable.
    #[error("invalid sandbox payload: {0}")]
    InvalidPayload(String),
    /// The repository path does not exist on this worker.
    #[error("open repository `{path}` on worker `{host}`: path does not exist")]
    RepoMissing {
        /// The path from the payload.
        path: PathBuf,
        /// This worker's host name.
        host: String,
    },
    /// The path exists but is not the root of a git repository (no parent directory is searched).
    #[error("open repository `{path}` on worker `{host}`: not a git repository: {message}")]
    NotARepo {
        /// The path from the payload.
        path: PathBuf,
        /// This worker's host name.
        host: String,
        /// libgit2's message.
        message: String,
    },
    /// `rev` does not name a commit in the repository.
    #[error("resolve rev `{rev}` in repository `{path}`: {message}")]
    RevNotFound {
        /// The rev from the payload.
        rev: String,
        /// The repository path.
        path: PathBuf,
        /// libgit2's message.
        message: String,
    },
    /// Cloning or checking out the sandbox failed (the sandbox could not be provisioned).
    #[error("provision sandbox `{path}` from repository `{repo}`: {message}")]
    Provision {
        /// The sandbox checkout path.
        path: PathBuf,
        /// The repository path.
        repo: PathBuf,
        /// What failed.
        message: String,
    },
    /// Confinement `bwrap` was required by the payload but bwrap does not work here.
    #[error("require bwrap confinement on worker `{host}`: {message}")]
    BwrapUnavailable {
        /// This worker's host name.
        host: String,
        /// Why the probe failed.
        message: String,
    },
    /// The payload names an image but this worker has no container engine port, or the engine
    /// failed (unreachable: the message says how to start one).
    #[error("run verifier in container image `{image}` on worker `{host}`: {message}")]
    Container {
        /// The image from the payload.
        image: String,
        /// This worker's host name.
        host: String,
        /// What went wrong.
        message: String,
    },
    /// A filesystem operation outside the commands failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, naming the path.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The process runner could not run a command at all (not the command's own failure).
    #[error("run sandbox command `{command}`: {source}")]
    Process {
        /// The command line.
        command: String,
        /// The process runner's error.
        #[source]
        source: RunnerError,
    },
}

impl From<SandboxError> for RunnerError {
    fn from(error: SandboxError) -> Self {
        match error {
            SandboxError::InvalidPayload(message) => RunnerError::InvalidPayload {
                runner: <crate::SandboxPayload as skillforge_runner::RunnerPayload>::KIND,
                message,
            },
            SandboxError::Io { context, source } => RunnerError::Io { context, source },
            other => RunnerError::Other(other.to_string()),
        }
    }
}

/// This worker's host name, for error messages (`unknown-host` if it cannot be read).
#[cfg(feature = "exec")]
pub(crate) fn worker_host() -> String {
    hostname::get()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "unknown-host".to_owned())
}
