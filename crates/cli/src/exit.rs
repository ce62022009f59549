//! Documented exit codes of the `skillforge` binary (DESIGN §8).

/// Success.
pub const OK: u8 = 0;
/// The thing checked failed: a job that did not pass, a verifier, a gate.
pub const CHECK_FAILED: u8 = 1;
/// Usage error or invalid input.
pub const USAGE: u8 = 2;
/// Environment problem: missing tool, unreachable queue, unreadable home.
pub const ENVIRONMENT: u8 = 3;
/// Not decided yet: the answer waits — on time (ask again later: `harvest gate` saw an empty
/// gate once and waits for the second observation after `[merge_gate] min_ci_wait`, S-19; jobs
/// still running; a paused `optimize run`, which running again continues) or on a person (`train
/// continue` waiting for review feedback or a promote/reject decision, `candidate decide` leaving
/// the candidate for a person). The command's last line says what to do next. docs/jobs.md,
/// "Exit codes", lists every command that exits with it.
pub const WAITING: u8 = 4;

/// An error that carries the exit code it should end the process with.
#[derive(Debug)]
pub struct CliError {
    /// Process exit code.
    pub code: u8,
    /// The error, printed as `error: {err:#}`.
    pub error: anyhow::Error,
}

impl CliError {
    /// Invalid input (exit 2).
    pub fn usage(error: impl Into<anyhow::Error>) -> Self {
        Self {
            code: USAGE,
            error: error.into(),
        }
    }

    /// Environment problem (exit 3).
    pub fn env(error: impl Into<anyhow::Error>) -> Self {
        Self {
            code: ENVIRONMENT,
            error: error.into(),
        }
    }
}

impl<E: Into<anyhow::Error>> From<E> for CliError {
    fn from(error: E) -> Self {
        Self {
            code: ENVIRONMENT,
            error: error.into(),
        }
    }
}

/// Maps a workflow step's [`TrainError`] to its exit code: `Invalid`/`Refused` 2, `Failed` 1,
/// `Blocked`/`Env`/`Store`/`Engine` 3 (the `train` command's module docs).
///
/// [`TrainError`]: skillforge_skillopt::train::TrainError
pub fn train_error(e: skillforge_skillopt::train::TrainError) -> CliError {
    use skillforge_skillopt::train::TrainError;
    match e {
        TrainError::Invalid(_) | TrainError::Refused(_) => CliError::usage(anyhow::anyhow!(e)),
        TrainError::Failed(_) => CliError {
            code: CHECK_FAILED,
            error: anyhow::anyhow!(e),
        },
        TrainError::Blocked(_)
        | TrainError::Env(_)
        | TrainError::Store(_)
        | TrainError::Engine(_) => CliError::env(anyhow::anyhow!(e)),
    }
}

/// Result of a command: the exit code on success paths (0 or 1), a [`CliError`] otherwise.
pub type CliResult = Result<u8, CliError>;
