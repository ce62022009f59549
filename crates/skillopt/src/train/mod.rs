//! Train mode (seed SkillOpt "Complete train-mode path", steps 1–10; facts §3): sessions and
//! iterations that generate options, publish a blind review packet, sync human feedback, export
//! the training package, run an optimizer backend, import a pending candidate, publish candidate
//! review context, and start the next iteration only after a human decision.
//!
//! * [`stages`]: the stage definitions of `workflows/train.toml` and optimizer backends;
//! * [`state`]: the iteration state machine, its transition table as data (pure); [`phase`]:
//!   `status_phase` derivation (pure);
//! * [`items`], [`meta`]: the items file and what sessions/iterations record; [`iteration`]: an
//!   iteration with its state parsed once, at load;
//! * [`generation`]: option-generation jobs and the [`TrainResultHandler`];
//! * [`optimizer`]: backend preflight, the optimizer job, attempt dirs and the import gate;
//! * [`fleet`]: the optimizer's files through the queue's transfer area when workers do not
//!   share this disk (worker-local paths for the four flags, the attempt dir uploaded back);
//! * [`session`]: what every step shares (report, continue request, load, advance, save);
//! * [`steps`]: the steps, one per file (start, generate, review, evaluate, optimize, decide,
//!   recover); [`control`]: `continue` as a table from state to step, and the steps' entry points;
//! * [`status`]: the status JSON.
//!
//! **Architecture Invariant:** only the control plane (the `train` command's process) writes the
//! domain store; jobs run on workers (`agent`, `process` runners) and their results are applied
//! here, idempotently. A human decision (filled feedback, `--promote`, `--reject --reason`) is
//! the only thing that moves an iteration past its gates.

pub mod control;
pub mod fleet;
pub mod generation;
pub mod items;
pub mod iteration;
pub mod meta;
pub mod optimizer;
pub mod phase;
pub mod session;
pub mod stages;
pub mod state;
pub mod status;
pub mod steps;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use skillforge_engine::{EngineError, QueueBackend};
use skillforge_runner::PayloadError;
use skillforge_store::{Store, StoreError};

pub use generation::TrainResultHandler;
pub use stages::TrainWorkflow;

/// Why a train command could not do what was asked. The CLI maps these to exit codes:
/// `Invalid`/`Refused` 2, `Failed` 1, `Blocked`/`Env`/`Store`/`Engine` 3.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// Bad input (unknown session, template, items file, version).
    #[error("{0}")]
    Invalid(String),
    /// The state machine refuses the request (S-98, S-99, a decision at the wrong time).
    #[error("{0}")]
    Refused(String),
    /// A stage ran and failed (generation, optimizer, candidate import).
    #[error("{0}")]
    Failed(String),
    /// The environment blocks the stage (missing optimizer executable: `blocked_config`).
    #[error("{0}")]
    Blocked(String),
    /// A file could not be read or written.
    #[error("{0}")]
    Env(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The queue failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// A job payload that does not serialize is invalid input (e.g. a path that is not UTF-8).
impl From<PayloadError> for TrainError {
    fn from(e: PayloadError) -> Self {
        TrainError::Invalid(e.to_string())
    }
}

impl From<sqlx::Error> for TrainError {
    fn from(e: sqlx::Error) -> Self {
        TrainError::Store(StoreError::from(e))
    }
}

/// What every train operation needs.
pub struct TrainEnv<'a> {
    /// The domain store (this process is the control plane).
    pub store: &'a Store,
    /// The job queue.
    pub queue: &'a Arc<dyn QueueBackend>,
    /// The home directory (`<home>/train/<session>/…`, `<home>/blobs`).
    pub home: &'a Path,
    /// Stage definitions and backends.
    pub workflow: &'a TrainWorkflow,
    /// The skillforge binary for `{skillforge_bin}` in backend commands.
    pub skillforge_bin: PathBuf,
    /// Submits and waits for jobs (the stage port; the CLI serves the embedded queue while it waits).
    pub jobs: &'a dyn skillforge_stage::StageJobs,
    /// Progress lines.
    pub reporter: &'a dyn skillforge_stage::Progress,
    /// The promotion policy the notify seam applies to every candidate train imports (S-51).
    pub promotion: &'a crate::promotion::notify::Policy,
    /// The forge review packets go to in sessions started with `--forge github` (`None`: such a
    /// session's review steps fail with a configuration error).
    pub github: Option<GithubEnv<'a>>,
}

/// The GitHub side of a train control plane (issue 16).
#[derive(Clone, Copy)]
pub struct GithubEnv<'a> {
    /// The forge (reads: comments to sync).
    pub forge: &'a dyn skillforge_forge::Forge,
    /// Its REST base URL, for the write jobs ([`crate::github_write`]).
    pub api_url: &'a str,
    /// Seconds from publishing a review issue to its stale reminder (facts §3: 86 400).
    pub stale_threshold_secs: i64,
}

impl TrainEnv<'_> {
    /// `<home>/train/<session>`.
    pub fn session_dir(&self, session_id: &str) -> PathBuf {
        self.home.join("train").join(session_id)
    }

    /// `<home>/train/<session>/<iteration>`.
    pub fn iteration_dir(&self, session_id: &str, iteration_id: &str) -> PathBuf {
        self.session_dir(session_id).join(iteration_id)
    }
}
