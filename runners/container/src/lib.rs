//! The container runner: a command in a container through the Docker Engine API (bollard, the
//! only crate that depends on it), with the same classification, timeout and cleanup as the
//! process runner (DESIGN §5).
//!
//! * [`ContainerPayload`]: image, command, bind-mounted work dir, env, limits, network, pull.
//! * [`run_container`]: one run — create, start, stream logs into capped tails, wait under a
//!   timeout and cancellation (SIGTERM → grace → SIGKILL), classify, always remove.
//! * [`Engine`] / [`resolve_host`]: the engine (`DOCKER_HOST`, else `[runners.container] host`
//!   via [`set_configured_host`], else a default socket); unreachable is an environment error
//!   whose message says how to start one.
//! * [`sweep_leftovers`] / [`start_leftover_sweeper`]: remove containers of dead workers of
//!   this host, found by their [`LABEL_OWNER`] / [`LABEL_HOST`] labels.
//! * [`ContainerRunner`]: the [`skillforge_runner::Runner`] of kind `container`.
//! * [`ContainerCommands`]: runs a hard verifier's commands in containers for the sandbox runner
//!   (`skillforge verify --image`).
//! * [`ContainerAgents`]: runs agent CLIs in containers for the agent runner (an `agent` payload
//!   with `container`: the eval loop's container arms).
//!
//! Everything that talks to an engine sits behind the default feature `exec`; without it the
//! crate is [`ContainerPayload`] (a [`skillforge_runner::RunnerPayload`]) and
//! [`ContainerError`], for producers of `container` jobs (no bollard).
//!
//! Podman's Docker-compatible API is what the tests run against (dependencies.md,
//! "Containers"); Docker's own engine speaks the same API.

#[cfg(feature = "exec")]
mod agents;
#[cfg(feature = "exec")]
mod engine;
mod error;
mod payload;
#[cfg(feature = "exec")]
mod run;
#[cfg(feature = "exec")]
mod runner;
#[cfg(feature = "exec")]
mod sweep;
#[cfg(feature = "exec")]
mod verify;

#[cfg(feature = "exec")]
pub use agents::{ContainerAgents, STDIN_FILE};
#[cfg(feature = "exec")]
pub use engine::{
    Engine, EngineInfo, ImageInfo, engine_configured, resolve_host, set_configured_host,
};
pub use error::ContainerError;
pub use payload::{
    Command, ContainerPayload, DEFAULT_MOUNT_PATH, Limits, Mount, Network, PullPolicy,
};
#[cfg(feature = "exec")]
pub use run::run_container;
#[cfg(feature = "exec")]
pub use runner::ContainerRunner;
#[cfg(feature = "exec")]
pub use sweep::{
    LABEL_HOST, LABEL_JOB, LABEL_OWNER, SWEEP_EVERY, host_name, start_leftover_sweeper,
    sweep_leftovers,
};
#[cfg(feature = "exec")]
pub use verify::ContainerCommands;
