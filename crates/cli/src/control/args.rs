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

/// Refuses (exit 2), before any job is queued, a `--repo` that is not a git repository on this
/// machine: a job reads it here (the embedded queue's workers share this disk) or ships it from
/// here (a queue whose workers do not). `given` is the path as typed, `repo` its absolute form.
///
/// # Errors
/// Exit 2 saying `--repo `./nope`: no such directory` (or not a directory, or not a git
/// repository) and what to do.
pub fn check_repo(
    given: &std::path::Path,
    repo: &std::path::Path,
) -> Result<(), crate::exit::CliError> {
    let shown = given.display();
    if !repo.exists() {
        return Err(CliError::usage(anyhow!(
            "--repo `{shown}`: no such directory: give the path of a git repository on this machine"
        )));
    }
    if !repo.is_dir() {
        return Err(CliError::usage(anyhow!(
            "--repo `{shown}`: not a directory: give the path of a git repository on this machine"
        )));
    }
    if skillforge_stage::git::git(repo, &["rev-parse", "--git-dir"]).is_err() {
        return Err(CliError::usage(anyhow!(
            "--repo `{shown}`: not a git repository: give the repository's own directory (or run `git init` there and commit)"
        )));
    }
    Ok(())
}

/// Refuses (exit 2) a revision that the repository `repo` (checked by [`check_repo`]) does not
/// have, before any job is queued: `flag` names where it came from (`--base`). A
/// remote-tracking name (`origin/main`) of a remote the repository does not have says so.
///
/// # Errors
/// Exit 2 naming the revision, the repository and how to get it.
pub fn check_revision(
    repo: &std::path::Path,
    rev: &str,
    flag: &str,
) -> Result<(), crate::exit::CliError> {
    let git = |args: &[&str]| skillforge_stage::git::git(repo, args);
    if git(&["rev-parse", "--git-dir"]).is_err() {
        return Ok(());
    }
    if git(&[
        "rev-parse",
        "--verify",
        "--quiet",
        &format!("{rev}^{{commit}}"),
    ])
    .is_ok()
    {
        return Ok(());
    }
    let remotes = git(&["remote"]).unwrap_or_default();
    let remotes: Vec<&str> = remotes
        .lines()
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .collect();
    if let Some((remote, branch)) = rev.split_once('/')
        && !remote.is_empty()
        && !branch.is_empty()
        && !remotes.contains(&remote)
    {
        let have = if remotes.is_empty() {
            "it has none".to_owned()
        } else {
            format!(
                "it has {}",
                remotes
                    .iter()
                    .map(|r| format!("`{r}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        return Err(CliError::usage(anyhow!(
            "{flag} `{rev}` is not a commit of {}: the repository has no remote `{remote}` ({have}) and no branch `{rev}`: give {flag} a local ref, e.g. `{branch}`, `HEAD~1` or a commit id",
            repo.display()
        )));
    }
    let fetch = match rev.split_once('/') {
        Some((remote, branch)) if remotes.contains(&remote) => {
            format!("fetch it (`git fetch {remote} {branch}`)")
        }
        _ => "check the name (`git log --oneline` lists commits, `git branch -a` branches)"
            .to_owned(),
    };
    Err(CliError::usage(anyhow!(
        "{flag} `{rev}` is not a commit of {}: {fetch} or name another one",
        repo.display()
    )))
}
