//! The control-plane lock of one run: at most one `optimize init|run|resume` drives a spec's
//! state root at a time (two would both dispatch the next experiment and both write the log).
//!
//! The lock is `flock(LOCK_EX | LOCK_NB)` on `<state-root>/control.lock` (std's `File::try_lock`),
//! so the kernel releases it when the holder exits, even on SIGKILL: `resume` right after a kill
//! never waits for a lease to go stale. The file names the holder (pid, host, command, since) for
//! the refusal message; its content is never what grants the lock.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::PathBuf;

use super::OptimizeError;
use super::state::StateRoot;

/// The lock file's name inside the state root.
pub const LOCK_FILE: &str = "control.lock";

/// A held control-plane lock; released on drop (or when the process dies).
#[derive(Debug)]
pub struct RunLock {
    _file: File,
    /// The lock file.
    pub path: PathBuf,
}

impl RunLock {
    /// Takes the lock of `root` for `command` (`run`, `resume`, `init`), creating the state root
    /// when needed, and records this process as the holder.
    ///
    /// # Errors
    /// [`OptimizeError::Busy`] naming the holder when another process holds it;
    /// [`OptimizeError::Env`] when the lock file cannot be created or locked.
    pub fn acquire(root: &StateRoot, command: &str, host: &str) -> Result<Self, OptimizeError> {
        let path = root.root.join(LOCK_FILE);
        let env = |what: &str, e: std::io::Error| {
            OptimizeError::Env(format!("{what} `{}`: {e}", path.display()))
        };
        std::fs::create_dir_all(&root.root).map_err(|e| env("create the state root for", e))?;
        let mut file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)
            .map_err(|e| env("open the control lock", e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = holder.trim();
                let holder = if holder.is_empty() {
                    "another process (it has not recorded itself yet)"
                } else {
                    holder
                };
                return Err(OptimizeError::Busy(format!(
                    "optimize run at `{}` is already driven by {holder}; refusing to start a second control plane on it (lock `{}`); wait for it to stop, or stop it with SIGINT",
                    root.root.display(),
                    path.display()
                )));
            }
            Err(TryLockError::Error(e)) => return Err(env("lock", e)),
        }
        let since = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let me = format!(
            "pid {} on host {host} (`skillforge optimize {command}`, since {since})\n",
            std::process::id()
        );
        file.set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| file.write_all(me.as_bytes()))
            .and_then(|()| file.sync_all())
            .map_err(|e| env("record the holder in", e))?;
        Ok(Self { _file: file, path })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_naming_the_first_and_the_lock_frees_on_drop() {
        let home = tempfile::tempdir().unwrap();
        let root = StateRoot::new(home.path(), "ops");
        let first = RunLock::acquire(&root, "run", "box-1").expect("first");
        let err = RunLock::acquire(&root, "resume", "box-1").unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, OptimizeError::Busy(_)), "{msg}");
        assert!(
            msg.contains(&format!("pid {}", std::process::id()))
                && msg.contains("optimize run")
                && msg.contains("box-1")
                && msg.contains(LOCK_FILE),
            "{msg}"
        );
        drop(first);
        RunLock::acquire(&root, "resume", "box-1").expect("free after drop");
    }
}
