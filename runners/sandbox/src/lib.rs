//! The sandbox runner: an independent `git clone --local` at a commit, then commands in it
//! (DESIGN §5; seed: SkillOpt, "Deterministic hard-verifier tier").
//!
//! * [`SandboxPayload`]: repository, rev, command lines, budgets, network, env, confinement.
//! * [`verify`]: one verification — resolve the rev, clone, run the commands fail-closed under
//!   bwrap when it works, remove the sandbox — returning a [`Verification`].
//! * [`VerifyReport`]: the verdict (`pass`/`fail`/`skipped`), `hard` (1.0/0.0/null) and
//!   per-command results; the runner outcome's `detail` and `skillforge verify --json`.
//! * [`SandboxRunner`]: the [`skillforge_runner::Runner`] of kind `sandbox`.
//! * [`ContainerExec`]: the port for running the commands in a container instead (`image` in
//!   the payload), implemented by the `container` runner crate.
//! * [`clean_leftovers`]: removes sandboxes a dead worker left behind (the runner's
//!   `on_worker_start`).
//!
//! Everything that clones or runs sits behind the default feature `exec`; without it the crate
//! is [`SandboxPayload`] (a [`skillforge_runner::RunnerPayload`]), [`VerifyReport`] and
//! [`SandboxError`], for producers of `sandbox` jobs and readers of their reports (no git2).
//!
//! **Architecture Invariant:** nothing a command does through git reaches the live repository:
//! the clone has its own git dir (config, refs, packed refs, gc, worktree registry), no
//! alternates and no remote naming the live repository. Loose objects are packed into a pack of
//! the clone's own; the live repository's pack files are hard links shared with it (as `git
//! clone --local` makes them), so a command that rewrites a pack file *in place* (not something
//! git does) would change it; under bwrap the live repository itself is read-only. (A clone made
//! by libgit2's fallback, `clone` module docs, also hard-links the loose objects.)

#[cfg(feature = "exec")]
mod clone;
#[cfg(feature = "exec")]
mod confine;
#[cfg(feature = "exec")]
mod container;
mod error;
mod payload;
mod report;
#[cfg(feature = "exec")]
mod runner;
#[cfg(feature = "exec")]
mod sandbox_dir;
#[cfg(feature = "exec")]
mod verify;

#[cfg(feature = "exec")]
pub use confine::{PROBE_CACHE_FILE, bwrap_probe, probe_cached, probe_key, set_probe_cache};
#[cfg(feature = "exec")]
pub use container::{ContainerExec, ImageCheck};
pub use error::SandboxError;
pub use payload::{
    ConfinementMode, DEFAULT_RUN_TIMEOUT, SANDBOX_ENV_ALLOWLIST, SandboxPayload, TAIL_BYTES,
};
pub use report::{CommandReport, CommandStatus, Confinement, Verdict, VerifyReport};
#[cfg(feature = "exec")]
pub use runner::SandboxRunner;
#[cfg(feature = "exec")]
pub use sandbox_dir::{CleanReport, MARKER_FILE, SANDBOX_DIR_PREFIX, clean_leftovers};
#[cfg(feature = "exec")]
pub use verify::{Verification, verify, verify_with};
