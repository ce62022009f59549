//! The process runner: runs argv or `sh -c` in its own process group, with timeout, output caps and exit classification.
//!
//! * [`ProcessPayload`]: what to run, cwd, environment, stdin, output cap, grace.
//! * [`run_process`]: one run — spawn in a new process group, capture, timeout/cancel with
//!   SIGTERM → grace → SIGKILL, then kill every leftover descendant (group kill plus a `/proc`
//!   sweep for the run's [`RUN_ID_ENV`] marker).
//! * [`classify`]: the one exit classification function (resolutions.md §1).
//! * [`sweep_orphans`] / [`start_orphan_sweeper`]: kill what a dead worker's jobs left running
//!   on this host (found by the [`OWNER_ENV`] marker).
//! * [`ProcessRunner`]: the [`skillforge_runner::Runner`] of kind `process`; a leased run's
//!   child sees its job id, attempt and fencing token ([`JOB_ID_ENV`], [`ATTEMPT_ENV`],
//!   [`FENCING_TOKEN_ENV`]).
//!
//! Everything that runs processes sits behind the default feature `exec`; without it the crate
//! is [`ProcessPayload`] (a [`skillforge_runner::RunnerPayload`]), [`classify`] and the censor
//! markers, for producers of `process` jobs that never run one.

#[cfg(feature = "exec")]
mod capture;
mod censor;
mod classify;
#[cfg(feature = "exec")]
pub mod mirror;
#[cfg(feature = "exec")]
mod orphans;
mod payload;
#[cfg(feature = "exec")]
mod reap;
#[cfg(feature = "exec")]
mod run;
#[cfg(feature = "exec")]
mod runner;
#[cfg(feature = "exec")]
mod spawn;

#[cfg(feature = "exec")]
pub use capture::{TRUNCATION_MARKER, TailBuffer, truncation_marker};
#[cfg(feature = "exec")]
pub use censor::CensorScanner;
pub use censor::{CENSOR_MARKERS, is_censor_line};
pub use classify::{
    EXIT_CENSORED, EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND, EXIT_TIMED_OUT, Ending, classify,
};
#[cfg(feature = "exec")]
pub use orphans::{
    OWNER_ENV, SWEEP_EVERY, owner_alive, owner_marker, start_orphan_sweeper, sweep_orphans,
};
pub use payload::{
    Command, DEFAULT_ENV_ALLOWLIST, DEFAULT_GRACE_MS, DEFAULT_MAX_OUTPUT_BYTES, ProcessPayload,
};
#[cfg(feature = "exec")]
pub use reap::RUN_ID_ENV;
#[cfg(feature = "exec")]
pub use run::{run_process, run_process_with_output};
#[cfg(feature = "exec")]
pub use runner::{ATTEMPT_ENV, FENCING_TOKEN_ENV, JOB_ID_ENV, ProcessRunner};
#[cfg(feature = "exec")]
pub use spawn::NEVER_INHERITED;
