//! Killing a run's processes: signals to its process group, plus a `/proc` sweep for every
//! process carrying the run's marker variable (catches descendants that left the group with
//! `setsid` or were reparented away).

use std::fs;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;
use tokio::time::Instant;

/// Name of the marker variable set on every child: `SKILLFORGE_RUN_ID=<32 hex digits>`, unique
/// per run. Descendants inherit it, which is how the sweep finds them; a descendant that
/// clears it from its own environment escapes the sweep (but not the process-group kill).
pub const RUN_ID_ENV: &str = "SKILLFORGE_RUN_ID";

/// How long the sweep keeps killing marked processes before giving up (and logging).
const SWEEP_TIMEOUT: Duration = Duration::from_secs(2);
/// Pause between two sweeps.
const SWEEP_INTERVAL: Duration = Duration::from_millis(10);

/// Sends `signal` to every process in group `pgid`. Returns false when the group is empty
/// (`ESRCH`); other failures are logged and also return false.
pub(crate) fn signal_group(pgid: Pid, signal: Signal) -> bool {
    match signal::killpg(pgid, signal) {
        Ok(()) => true,
        Err(Errno::ESRCH) => false,
        Err(error) => {
            tracing::warn!(pgid = pgid.as_raw(), %signal, %error, "signal process group failed");
            false
        }
    }
}

/// Pids of live processes (not zombies, not dead) whose environment holds
/// `SKILLFORGE_RUN_ID=run_id`. Processes whose `/proc` entries cannot be read (another user's,
/// or gone mid-scan) are skipped; the calling process is never included.
pub(crate) fn find_marked(run_id: &str) -> Vec<Pid> {
    let needle = format!("{RUN_ID_ENV}={run_id}");
    let Ok(entries) = fs::read_dir("/proc") else {
        tracing::warn!("read `/proc` failed; cannot sweep for marked processes");
        return Vec::new();
    };
    let own_pid = std::process::id();
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != own_pid)
        .filter(|&pid| is_marked(pid, needle.as_bytes()) && is_live(pid))
        .filter_map(|pid| i32::try_from(pid).ok().map(Pid::from_raw))
        .collect()
}

/// True when `/proc/<pid>/environ` holds exactly the entry `needle` (`NAME=value`).
fn is_marked(pid: u32, needle: &[u8]) -> bool {
    fs::read(format!("/proc/{pid}/environ")).is_ok_and(|environ| {
        environ
            .split(|&byte| byte == 0)
            .any(|entry| entry == needle)
    })
}

/// True unless `/proc/<pid>/stat` says the process is a zombie (`Z`) or dead (`X`/`x`), or
/// cannot be read.
fn is_live(pid: u32) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // `pid (comm) state ...`; comm may itself contain spaces and parentheses.
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next());
    !matches!(state, None | Some('Z' | 'X' | 'x'))
}

/// Sends `signal` to every live process marked with `run_id`; returns how many were found.
pub(crate) fn signal_marked(run_id: &str, signal: Signal) -> usize {
    let pids = find_marked(run_id);
    for &pid in &pids {
        if let Err(error) = signal::kill(pid, signal)
            && error != Errno::ESRCH
        {
            tracing::warn!(pid = pid.as_raw(), %signal, %error, "signal marked process failed");
        }
    }
    pids.len()
}

/// [`signal_marked`] off the async threads (the `/proc` scan is blocking file I/O); a
/// `signal` of `None` only counts.
pub(crate) async fn signal_marked_async(run_id: &str, signal: Option<Signal>) -> usize {
    let run_id = run_id.to_owned();
    let scan = move || match signal {
        Some(signal) => signal_marked(&run_id, signal),
        None => find_marked(&run_id).len(),
    };
    tokio::task::spawn_blocking(scan)
        .await
        .unwrap_or_else(|error| {
            tracing::warn!(%error, "sweep for marked processes failed");
            0
        })
}

/// SIGKILLs group `pgid` and every marked process, repeating the sweep until none is left
/// or [`SWEEP_TIMEOUT`] passes (then logs how many remain). Zombies count as gone.
pub(crate) async fn kill_all(pgid: Pid, run_id: &str) {
    signal_group(pgid, Signal::SIGKILL);
    let deadline = Instant::now() + SWEEP_TIMEOUT;
    loop {
        let n_found = signal_marked_async(run_id, Some(Signal::SIGKILL)).await;
        if n_found == 0 {
            return;
        }
        if Instant::now() >= deadline {
            tracing::warn!(run_id, n_left = n_found, "marked processes survive SIGKILL");
            return;
        }
        tokio::time::sleep(SWEEP_INTERVAL).await;
    }
}

/// Kills a run's group and marked processes if dropped while armed, so a run whose future is
/// dropped mid-flight (its task aborted) leaves nothing behind. The kill on drop is
/// synchronous: one SIGKILL to the group and one sweep.
#[derive(Debug)]
pub(crate) struct KillOnDrop {
    pgid: Pid,
    run_id: String,
    is_armed: bool,
}

impl KillOnDrop {
    /// An armed guard for group `pgid` and marker `run_id`.
    pub(crate) fn new(pgid: Pid, run_id: String) -> Self {
        Self {
            pgid,
            run_id,
            is_armed: true,
        }
    }

    /// Disarms the guard once the run cleaned up after itself.
    pub(crate) fn disarm(&mut self) {
        self.is_armed = false;
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if self.is_armed {
            signal_group(self.pgid, Signal::SIGKILL);
            signal_marked(&self.run_id, Signal::SIGKILL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_calling_process_is_live_and_never_marked() {
        assert!(is_live(std::process::id()));
        assert!(find_marked("no-such-run").is_empty());
    }
}
