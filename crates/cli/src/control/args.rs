//! Argument helpers shared by commands: durations from flags, the skillforge binary backends run,
//! the queue's label.

use std::path::PathBuf;

use anyhow::anyhow;

use crate::context::Context;
use crate::exit::CliError;

/// Seconds from a flag to milliseconds; exit 2 unless finite and at least 1 ms (a smaller
/// value would round to 0 ms: a timeout that fires at once, a heartbeat that spins).
/// # Errors
/// Exit 2 naming `--{name}` and the value.
pub fn secs(name: &str, v: f64) -> Result<u64, CliError> {
    if !(v.is_finite() && v > 0.0) {
        return Err(CliError::usage(anyhow!(
            "--{name} must be a positive number of seconds, got {v}"
        )));
    }
    let ms = (v * 1000.0).round();
    if ms < 1.0 {
        return Err(CliError::usage(anyhow!(
            "--{name} {v} is below the 1 ms resolution (0.001 s at least)"
        )));
    }
    Ok(ms.min(u64::MAX as f64) as u64)
}

/// A name given on the command line (`--lock`, `--queue-name`, `--idempotency-key`): exit 2 when
/// it is empty, only white space, or holds a control character (NUL included).
/// # Errors
/// Exit 2 naming the flag.
pub fn check_name(flag: &str, value: &str) -> Result<(), CliError> {
    if value.trim().is_empty() {
        return Err(CliError::usage(anyhow!("--{flag} must not be empty")));
    }
    if let Some(c) = value.chars().find(|c| c.is_control()) {
        return Err(CliError::usage(anyhow!(
            "--{flag} `{}` holds the control character {c:?}",
            value.escape_debug()
        )));
    }
    Ok(())
}

/// The skillforge binary backend commands run as `{skillforge_bin}`: `$SKILLFORGE_BIN`, else
/// this executable, else `skillforge` on PATH.
pub fn skillforge_bin() -> PathBuf {
    std::env::var_os("SKILLFORGE_BIN")
        .map(PathBuf::from)
        .or_else(|| skillforge_runner::current_exe().ok())
        .unwrap_or_else(|| PathBuf::from("skillforge"))
}

/// A human label of the queue backend in use (a Redis URL without its credentials).
pub fn queue_label(ctx: &Context) -> String {
    match &ctx.queue_url {
        skillforge_engine::open::QueueUrl::Sqlite(p) => format!("embedded queue {}", p.display()),
        skillforge_engine::open::QueueUrl::Redis(u) => {
            format!("redis queue {}", skillforge_engine::redact::redact_urls(u))
        }
    }
}

/// Refuses (exit 2) a revision that a repository on this machine does not have, before any job
/// is queued: `flag` names where it came from (`--base`). A path that is not a git repository
/// here (one only the workers see) is left to the job.
///
/// # Errors
/// Exit 2 naming the revision, the repository and how to get it.
pub fn check_revision(
    repo: &std::path::Path,
    rev: &str,
    flag: &str,
) -> Result<(), crate::exit::CliError> {
    if skillforge_stage::git::git(repo, &["rev-parse", "--git-dir"]).is_err() {
        return Ok(());
    }
    match skillforge_stage::git::git(
        repo,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{rev}^{{commit}}"),
        ],
    ) {
        Ok(_) => Ok(()),
        Err(_) => Err(crate::exit::CliError::usage(anyhow::anyhow!(
            "{flag} `{rev}` is not a commit of {}: fetch it (e.g. `git fetch origin main`) or name another one",
            repo.display()
        ))),
    }
}
