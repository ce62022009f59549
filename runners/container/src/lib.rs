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
//!
//! Podman's Docker-compatible API is what the tests run against (dependencies.md,
//! "Containers"); Docker's own engine speaks the same API.

mod engine;
mod error;
mod payload;
mod run;
mod runner;
mod sweep;
mod verify;

pub use engine::{
    Engine, EngineInfo, ImageInfo, engine_configured, resolve_host, set_configured_host,
};
pub use error::ContainerError;
pub use payload::{Command, ContainerPayload, DEFAULT_MOUNT_PATH, Limits, Network, PullPolicy};
pub use run::run_container;
pub use runner::ContainerRunner;
pub use sweep::{
    LABEL_HOST, LABEL_JOB, LABEL_OWNER, SWEEP_EVERY, host_name, start_leftover_sweeper,
    sweep_leftovers,
};
pub use verify::ContainerCommands;
