//! The agent crate's one error enum.
//!
//! A failing or missing agent is not an error: the runner reports it as an outcome
//! (`failed`, `timed_out`, `not_runnable`, ...). `Err` means the job could not be prepared at
//! all: a broken runtime profile, an unknown runtime, an unresolvable program.

/// Errors from loading runtime profiles and preparing an agent invocation.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// A runtime profile under `runners/agent/runtimes/` did not parse or is inconsistent.
    #[error("load runtime profile `{file}`: {message}")]
    Profile {
        /// The profile file name, e.g. `claude.toml`.
        file: String,
        /// What was wrong.
        message: String,
    },
    /// The payload names a runtime no profile defines.
    #[error("unknown agent runtime `{name}` (known: {known})")]
    UnknownRuntime {
        /// The runtime asked for.
        name: String,
        /// Comma-separated known runtime names.
        known: String,
    },
    /// A model tier (`metric.judge.model`) the runtime profile's `[models]` table does not define.
    #[error("unknown model tier `{tier}` in `{file}` [models] (it defines: {known})")]
    UnknownModelTier {
        /// The tier asked for, e.g. `cheap`.
        tier: String,
        /// The profile file, e.g. `runners/agent/runtimes/claude.toml`.
        file: String,
        /// Comma-separated tiers the profile defines.
        known: String,
    },
    /// The payload is inconsistent with the runtime (e.g. a workdir that is not absolute).
    #[error("invalid agent payload for runtime `{runtime}`: {message}")]
    InvalidPayload {
        /// The runtime asked for.
        runtime: String,
        /// What was wrong.
        message: String,
    },
    /// The running skillforge binary could not be located for `{skillforge_bin}`.
    #[error("locate the skillforge binary for runtime `{runtime}`: {source}")]
    SkillforgeBin {
        /// The runtime whose program is `{skillforge_bin}`.
        runtime: String,
        /// The underlying error from `std::env::current_exe`.
        #[source]
        source: std::io::Error,
    },
    /// The scripted agent's prompt or arguments are unusable (unknown task, bad option count).
    #[error("scripted agent: {0}")]
    Scripted(String),
}
