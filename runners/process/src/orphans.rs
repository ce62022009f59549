//! Orphans of dead workers: processes that a worker's job left running on this host after the
//! worker itself died (SIGKILL, OOM kill, power-off of its container), found by their owner
//! marker and killed, so a recovered job never runs beside its predecessor's leftovers.
//!
//! Every child the runner starts carries [`OWNER_ENV`]`=<pid>:<start time>:<pid namespace>` of the
//! worker process that started it, and its descendants inherit it. The job's direct child already dies
//! with its worker (`PR_SET_PDEATHSIG`); its descendants do not (they are reparented, not
//! signalled). [`sweep_orphans`] kills every live marked process whose owner is gone: no process
//! with that pid, or one with a different start time (the pid was reused). A marker from another
//! PID namespace (a worker in a container seen from the host, or the reverse) is never judged:
//! its pid means nothing here. Each worker sweeps
//! when it starts and then every [`SWEEP_EVERY`] ([`start_orphan_sweeper`]), so leftovers of a
//! dead worker die within about a second while another worker runs on the same host; with no
//! worker left on that host they live until one starts there.
//!
//! A descendant that removes the marker from its own environment escapes the sweep. Processes
//! of other users are not readable and are never touched.
//!
//! Rule source: DESIGN §5 (`process` runner: "no descendant survives") and §4 ("Exactly-once
//! effects": a re-queued job must not run beside what is left of its previous attempt).

use std::fs;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nix::sys::signal::{self, Signal};
use nix::unistd::{self, Pid};

/// Name of the owner marker set on every child: `SKILLFORGE_RUN_OWNER=<pid>:<start time>:<pid
/// namespace>`: the pid of the worker process that started the run, that process's start time
/// (clock ticks after boot, field 22 of `/proc/<pid>/stat`), so a reused pid is not taken for the
/// owner, and the inode number of its PID namespace (`/proc/self/ns/pid`), so only a process in
/// the same namespace judges the pid.
pub const OWNER_ENV: &str = "SKILLFORGE_RUN_OWNER";

/// Pause between two sweeps of [`start_orphan_sweeper`].
pub const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// This process's owner marker value, `<pid>:<start time>:<pid namespace>` (see [`OWNER_ENV`]).
pub fn owner_marker() -> &'static str {
    static MARKER: OnceLock<String> = OnceLock::new();
    MARKER.get_or_init(|| {
        let pid = std::process::id();
        format!("{pid}:{}:{}", start_time(pid).unwrap_or(0), pid_namespace())
    })
}

/// The inode number of this process's PID namespace (`pid:[N]` of `/proc/self/ns/pid`), or 0
/// when it cannot be read.
fn pid_namespace() -> u64 {
    static NS: OnceLock<u64> = OnceLock::new();
    *NS.get_or_init(|| {
        fs::read_link("/proc/self/ns/pid")
            .ok()
            .and_then(|link| {
                let link = link.to_string_lossy().into_owned();
                link.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()
            })
            .unwrap_or(0)
    })
}

/// Start time of `pid` in clock ticks after boot (field 22 of `/proc/<pid>/stat`), or `None`
/// when there is no such process or its entry cannot be read.
fn start_time(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid ...`: comm may contain spaces and parentheses; field 3 (state) is
    // the first after the last `)`, so start time (field 22) is the 20th after it.
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// The state letter of `pid` (`R`, `S`, `Z`, …), or `None` when it cannot be read.
fn state(pid: u32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// The owner marker value in `/proc/<pid>/environ`, if any.
fn owner_of(pid: u32) -> Option<String> {
    let environ = fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{OWNER_ENV}=");
    environ
        .split(|&byte| byte == 0)
        .find_map(|entry| entry.strip_prefix(prefix.as_bytes()))
        .map(|value| String::from_utf8_lossy(value).into_owned())
}

/// True while the process named by an owner marker value (`<pid>:<start time>:<pid namespace>`)
/// runs. A value that does not parse, or names another PID namespace (or an unknown one), counts
/// as alive: never kill on a marker this process cannot judge. (Also how the container runner
/// judges the owner label of a leftover container.)
pub fn owner_alive(marker: &str) -> bool {
    let mut parts = marker.split(':');
    let (Some(pid), Some(started), Some(ns), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return true;
    };
    let (Ok(pid), Ok(started), Ok(ns)) = (
        pid.parse::<u32>(),
        started.parse::<u64>(),
        ns.parse::<u64>(),
    ) else {
        return true;
    };
    if ns == 0 || ns != pid_namespace() {
        return true;
    }
    start_time(pid).is_some_and(|t| t == started) && !matches!(state(pid), Some('Z' | 'X' | 'x'))
}

/// Kills (SIGKILL) every live process on this host whose owner marker names a dead worker,
/// together with its process group; returns the pids it killed. The calling process and its own
/// process group are never signalled.
pub fn sweep_orphans() -> Vec<i32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        tracing::warn!("read `/proc` failed; cannot look for orphaned job processes");
        return Vec::new();
    };
    let own_pid = std::process::id();
    let own_group = unistd::getpgrp();
    let mut killed = Vec::new();
    for pid in entries.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok()) {
        if pid == own_pid {
            continue;
        }
        let Some(owner) = owner_of(pid) else { continue };
        if owner_alive(&owner) || matches!(state(pid), None | Some('Z' | 'X' | 'x')) {
            continue;
        }
        let Ok(raw) = i32::try_from(pid) else {
            continue;
        };
        let target = Pid::from_raw(raw);
        if let Ok(group) = unistd::getpgid(Some(target))
            && group != own_group
            && group.as_raw() > 1
        {
            let _ = signal::killpg(group, Signal::SIGKILL);
        }
        let _ = signal::kill(target, Signal::SIGKILL);
        tracing::warn!(
            pid,
            owner,
            "killed a process left running by a dead worker's job"
        );
        killed.push(raw);
    }
    killed
}

/// Starts, once per process, a background task on the current tokio runtime that runs
/// [`sweep_orphans`] now and then every [`SWEEP_EVERY`] (off the async threads). Later calls do
/// nothing. Call it from every process that runs jobs.
pub fn start_orphan_sweeper() {
    static STARTED: AtomicBool = AtomicBool::new(false);
    if STARTED.swap(true, Ordering::SeqCst) {
        return;
    }
    tokio::spawn(async {
        loop {
            match tokio::task::spawn_blocking(sweep_orphans).await {
                // One line per pass, so a test (or an operator) can tell that sweeps ran.
                Ok(killed) => tracing::debug!(killed = killed.len(), "orphan sweep pass"),
                Err(error) => tracing::warn!(%error, "orphan sweep failed"),
            }
            tokio::time::sleep(SWEEP_EVERY).await;
        }
    });
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::CommandExt;

    use super::*;

    #[test]
    fn the_calling_process_is_its_own_live_owner() {
        let marker = owner_marker();
        assert!(
            marker.starts_with(&format!("{}:", std::process::id())),
            "{marker}"
        );
        assert!(
            !marker.ends_with(":0"),
            "start time read from /proc: {marker}"
        );
        assert!(owner_alive(marker));
    }

    #[test]
    fn a_reused_pid_or_a_missing_process_is_a_dead_owner() {
        let pid = std::process::id();
        let started = start_time(pid).unwrap();
        let ns = pid_namespace();
        assert_ne!(ns, 0, "/proc/self/ns/pid is readable");
        assert!(
            !owner_alive(&format!("{pid}:{}:{ns}", started + 1)),
            "same pid, other start time"
        );
        assert!(
            !owner_alive(&format!("{}:{started}:{ns}", i32::MAX)),
            "no such pid"
        );
        assert!(
            owner_alive(&format!("{}:{started}:{}", i32::MAX, ns + 1)),
            "another namespace is never judged"
        );
        assert!(
            owner_alive("garbage"),
            "an unparsable marker is never taken for dead"
        );
        assert!(
            owner_alive(&format!("{pid}:{started}")),
            "a marker without namespace is never judged"
        );
    }

    #[test]
    fn sweep_kills_a_process_whose_owner_is_dead_and_spares_a_live_owners() {
        // Two children marked like job processes: one with a dead owner, one with this process.
        let dead = std::process::Command::new("sleep")
            .arg("30")
            .env(OWNER_ENV, format!("{}:1:{}", i32::MAX, pid_namespace()))
            .process_group(0)
            .spawn()
            .unwrap();
        let live = std::process::Command::new("sleep")
            .arg("30")
            .env(OWNER_ENV, owner_marker())
            .process_group(0)
            .spawn()
            .unwrap();
        let (mut dead, mut live) = (dead, live);
        let live_pid = i32::try_from(live.id()).unwrap();
        // Right after spawn, /proc may still show the pre-exec environment: wait for the marker.
        for child in [dead.id(), live.id()] {
            for _ in 0..500 {
                if owner_of(child).is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        // The sweep is host-wide: another skillforge worker on this machine may sweep first and
        // kill the orphan itself. Play that worker here (a sweep from another thread that runs
        // before ours), so the test asserts what the sweep is for, that the orphan is gone, and
        // not which sweep killed it.
        let rival = std::thread::spawn(sweep_orphans).join().unwrap();
        let killed = sweep_orphans();
        assert!(
            !killed.contains(&live_pid) && !rival.contains(&live_pid),
            "killed {killed:?}, rival killed {rival:?}"
        );
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(status) = dead.try_wait().unwrap() {
                break status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the orphan still runs after the sweeps (killed {killed:?}, rival {rival:?})"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9)
        );
        assert!(
            live.try_wait().unwrap().is_none(),
            "the live owner's process still runs"
        );
        live.kill().unwrap();
        let _ = live.wait();
    }
}
