//! The control plane's one `git` wrapper: `git -C <dir> <args>` with prompts off, stdout back,
//! stderr in the error. Jobs' own git work runs in the runners (git2), never here.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Why a `git` command failed.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// `git` could not be started (not installed, not on `PATH`).
    #[error("run `git {command}` in `{}`: {source} (is git installed?)", dir.display())]
    Start {
        /// The arguments, joined.
        command: String,
        /// The dir it ran in.
        dir: PathBuf,
        /// The spawn error.
        #[source]
        source: std::io::Error,
    },
    /// `git` exited non-zero.
    #[error("git {command} in `{}`: {stderr}", dir.display())]
    Failed {
        /// The arguments, joined.
        command: String,
        /// The dir it ran in.
        dir: PathBuf,
        /// Its trimmed stderr.
        stderr: String,
    },
}

impl GitError {
    /// Git's own message (its stderr), or the spawn error's.
    pub fn stderr(&self) -> String {
        match self {
            GitError::Start { source, .. } => source.to_string(),
            GitError::Failed { stderr, .. } => stderr.clone(),
        }
    }
}

/// Runs `git -C dir args…` (`GIT_TERMINAL_PROMPT=0`) and returns its stdout without the trailing
/// newline(s).
///
/// # Errors
/// [`GitError`] naming the command, the dir and git's stderr.
pub fn git(dir: &Path, args: &[&str]) -> Result<String, GitError> {
    let command = args.join(" ");
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .map_err(|source| GitError::Start {
            command: command.clone(),
            dir: dir.to_owned(),
            source,
        })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
        return Err(GitError::Failed {
            command,
            dir: dir.to_owned(),
            stderr,
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_owned())
}
