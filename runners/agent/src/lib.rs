//! The agent runner: runs agent CLIs (claude, codex, opencode) and skillforge's scripted agent
//! from runtime profiles, and reads their transcripts.
//!
//! * [`profile`]: runtime profiles as data (`runners/agent/runtimes/*.toml`); [`all`] is the
//!   registry, [`find`] looks one up.
//! * [`build_invocation`]: payload + profile → one `skillforge-runner-process` run. The prompt
//!   goes to stdin or a file, never argv; credentials only through env.
//! * [`parse_transcript`]: final message and skills offered/loaded per transcript format,
//!   `None` ("unknown") when the runtime does not record them.
//! * [`AgentRunner`]: the [`skillforge_runner::Runner`] of kind `agent`; its
//!   `RunOutcome::detail` is an [`AgentReport`].
//! * [`proxy`]: the recording proxy a local run's CLI talks to instead of its model API, and
//!   [`offered`]: the skills each model request offers, read from its body (issue 31 item 9).
//! * [`container`]: the [`AgentContainerExec`] port for payloads that run the agent in a
//!   container (the container runner crate implements it).
//! * [`scripted`]: the deterministic scripted agent ([`run_scripted`], [`scripted_main`]) used by
//!   tests and the demo; shipped as the hidden `skillforge agent-scripted` subcommand and as
//!   this crate's `skillforge-agent-scripted` binary.
//!
//! **API Boundary:** the runner depends on `skillforge-runner` and `skillforge-runner-process`
//! only; it never handles processes itself. Everything that runs an agent ([`build_invocation`],
//! [`AgentRunner`]) sits behind the default feature `exec`; without it the crate is
//! [`AgentPayload`] (a [`skillforge_runner::RunnerPayload`]), the profiles, transcript parsing,
//! the scripted agent and [`AgentReport`] (no process runner, no nix).

#[cfg(feature = "exec")]
pub mod container;
mod error;
#[cfg(feature = "exec")]
pub mod home;
#[cfg(feature = "exec")]
mod invocation;
#[cfg(feature = "exec")]
mod mirror;
pub mod offered;
mod payload;
pub mod profile;
#[cfg(feature = "exec")]
pub mod proxy;
mod report;
#[cfg(feature = "exec")]
mod runner;
pub mod scripted;
mod signals;
#[cfg(feature = "exec")]
mod telemetry;
#[cfg(feature = "exec")]
pub mod trailer;
mod transcript;

#[cfg(feature = "exec")]
pub use container::{
    AgentContainerExec, CONTAINER_SCRATCH, CONTAINER_SKILLFORGE_BIN, CONTAINER_WORKDIR,
    ContainerAgentRun, build_container_run,
};
pub use error::AgentError;
#[cfg(feature = "exec")]
pub use invocation::{
    Invocation, PROMPT_FILE_NAME, SKILLFORGE_BIN_ENV, TRANSCRIPT_MAX_BYTES, build_invocation,
    resolve_program,
};
pub use payload::{AgentContainer, AgentMount, AgentPayload, local_engine_only};
pub use profile::{
    Access, AccessArgs, AccessSpec, CONFIGURED_MODEL, Carry, HomeFile, HomeSpec, MODEL_TIERS,
    PromptDelivery, ProxyKind, RUNTIME_SOURCES, Requirement, RuntimeProfile,
    SKILLFORGE_BIN_PLACEHOLDER, TranscriptFormat, TranscriptSpec, all, find,
};
pub use report::{AgentReport, OfferedFrom};
#[cfg(feature = "exec")]
pub use runner::{AgentRunner, AgentRunnerConfig, TRANSCRIPT_TAIL_BYTES};
pub use scripted::{
    DEFAULT_N_OPTIONS, MAX_N_OPTIONS, SCRIPTED_DELAY_ENV, SCRIPTED_SUBCOMMAND, ScriptedPrompt,
    ScriptedRun, ScriptedTask, parse_scripted_prompt, run_scripted, scripted_main, scripted_run,
    scripted_transcript,
};
pub use signals::{ApiError, ApiErrorKind, PermissionDenial, Spend, Usage};
pub use transcript::{TranscriptSummary, parse_transcript, session_log_denials};
