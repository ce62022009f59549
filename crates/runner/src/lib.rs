//! The runner contract: one trait every pluggable runner implements, and the types that cross it.
//!
//! A runner executes one leased job. The engine hands it a [`RunSpec`] (the job's payload plus
//! limits) and a [`RunContext`] (cancellation, heartbeat, scratch directory) and gets back a
//! [`RunOutcome`]. A failed check is not an error: a command that exits 1 is
//! `Ok(RunOutcome { exit: ExitClass::Failed { code: 1 }, .. })`; `Err` means the runner could not
//! run the job at all (bad payload, I/O failure creating the scratch dir).
//!
//! A producer builds a job from a runner's payload type, which names its runner through
//! [`RunnerPayload::KIND`]; the runner parses it back with [`parse_payload`]. The payload and
//! report types of each runner crate build without its execution side (feature `exec`), so the
//! control plane depends on them without git2 or nix.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
pub use tokio_util::sync::CancellationToken;

/// What a runner is asked to do: the job's runner-specific payload plus the engine's limits.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunSpec {
    /// Job id, for logs and for naming scratch directories.
    pub job_id: String,
    /// Runner-specific payload (e.g. `ProcessPayload` for `process`); each runner parses its own.
    pub payload: serde_json::Value,
    /// Wall-clock budget for the whole run; on expiry the runner kills what it started and
    /// reports [`ExitClass::TimedOut`].
    pub timeout: Duration,
}

/// A runner's payload type: the JSON a job of kind [`RunnerPayload::KIND`] carries in
/// [`RunSpec::payload`]. Each runner crate implements it for its payload (`ProcessPayload`,
/// `SandboxPayload`, `CheckerPayload`, `AgentPayload`), so a job's kind follows from the type a
/// producer builds and is never a string literal.
pub trait RunnerPayload: Serialize {
    /// The kind of the runner that executes this payload; equals that runner's [`Runner::kind`].
    const KIND: &'static str;

    /// This payload as a job's JSON.
    ///
    /// # Errors
    /// [`PayloadError`] when it does not serialize (a path that is not UTF-8, a map whose keys
    /// are not strings): a job never carries a `null` payload in its place.
    fn to_json(&self) -> Result<serde_json::Value, PayloadError> {
        serde_json::to_value(self).map_err(|source| PayloadError {
            kind: Self::KIND,
            source,
        })
    }
}

/// A runner payload that did not serialize (see [`RunnerPayload::to_json`]).
#[derive(Debug, thiserror::Error)]
#[error("serialize the `{kind}` job payload: {source}")]
pub struct PayloadError {
    /// The payload's runner kind, e.g. `sandbox`.
    pub kind: &'static str,
    /// serde_json's error, e.g. ``path contains invalid UTF-8 characters``.
    #[source]
    pub source: serde_json::Error,
}

/// This process's executable, as a path a child process can run: `std::env::current_exe`,
/// except that when the binary was replaced on disk while this process runs (an upgrade of a
/// long-running worker), Linux reports `<path> (deleted)`; the path without the suffix, the
/// binary now installed there, is returned when it exists.
///
/// # Errors
/// The I/O error of `std::env::current_exe`.
pub fn current_exe() -> std::io::Result<std::path::PathBuf> {
    let exe = std::env::current_exe()?;
    Ok(exe
        .to_str()
        .and_then(|s| s.strip_suffix(" (deleted)"))
        .map(std::path::PathBuf::from)
        .filter(|installed| installed.exists())
        .unwrap_or(exe))
}

/// Parses `spec.payload` as the runner's payload type `P`.
///
/// # Errors
/// [`RunnerError::InvalidPayload`] naming `P::KIND` and serde's message when it does not parse.
pub fn parse_payload<P: RunnerPayload + DeserializeOwned>(
    spec: &RunSpec,
) -> Result<P, RunnerError> {
    P::deserialize(&spec.payload).map_err(|e| RunnerError::InvalidPayload {
        runner: P::KIND,
        message: e.to_string(),
    })
}

/// Where a worker fetches a repository from (the `fetch` field of the `sandbox` and `checker`
/// payloads; issue 20): a URL `git fetch` understands — a remote's URL, or a git bundle placed in
/// the job dir by the transfer area — fetched into the worker's mirror cache under `key`, then
/// cloned from there with `git clone --local`. A job for a fleet names its repository this way,
/// never by a path on the control plane's disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepoFetch {
    /// `https://…`, `ssh://…`, `git@host:path`, `/srv/git/app.git`, or a bundle file.
    pub url: String,
    /// The mirror this fetch goes into: the URL for a remote; `bundle:<hash of the control
    /// plane's host and checkout>` for bundles, so successive bundles of one checkout fetch into
    /// one mirror.
    pub key: String,
}

/// Callback the runner calls to report liveness (and optionally progress text).
pub type HeartbeatFn = Arc<dyn Fn(Option<&str>) + Send + Sync>;

/// Which of a job's output streams a chunk of live output came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutputStream {
    /// The process's standard output.
    Stdout,
    /// The process's standard error.
    Stderr,
}

impl OutputStream {
    /// `"stdout"` or `"stderr"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stdout => "stdout",
            Self::Stderr => "stderr",
        }
    }
}

/// Callback a runner calls with each piece of a job's output as it is read (live output, shown
/// by `skillforge jobs logs`), before and independently of the capped tails of its outcome. It
/// must not block: the engine's implementation only buffers.
pub type OutputFn = Arc<dyn Fn(OutputStream, &[u8]) + Send + Sync>;

/// What the engine gives a running job: cancellation, heartbeat, live output, a private scratch
/// dir and the lease it runs under (attempt, fencing token).
#[derive(Clone)]
pub struct RunContext {
    /// Cancelled when the job is cancelled, its lease is lost (fenced off) or the worker shuts
    /// down past its grace period. A runner that owns processes must kill them when this fires.
    pub cancel: CancellationToken,
    /// Reports liveness/progress. The engine already heartbeats the lease on its own timer, so
    /// calling this is optional; it only adds progress text.
    pub heartbeat: HeartbeatFn,
    /// Receives the job's output as it is written (see [`OutputFn`]); runners that run
    /// processes pass every chunk they read.
    pub output: OutputFn,
    /// A directory private to this attempt: a path only. A runner that needs it creates it
    /// (`create_dir_all`); the engine removes it after the run if it exists.
    pub scratch_dir: PathBuf,
    /// Whether whoever runs the runner removes `scratch_dir` (recursively, read-only
    /// directories included) once the run has returned: `true` under a worker, which removes it
    /// right after the run's result is committed (and before the worker stops); `false` for a
    /// detached run. When `true`, a runner may leave throwaway files under `scratch_dir` instead
    /// of removing them before it returns, so their removal is off the result's path.
    pub scratch_removed_after: bool,
    /// 1-based attempt number of the lease this run is under (the job's `attempts` when it was
    /// leased; `jobs retry` starts the count again); 0 when no engine lease backs the run.
    pub attempt: u32,
    /// Fencing token of that lease (strictly increasing per job); 0 when no lease backs the run.
    pub fencing_token: u64,
}

impl RunContext {
    /// A context with a fresh cancellation token, a no-op heartbeat, live output dropped, the
    /// given scratch dir (which nobody removes after the run: `scratch_removed_after` false) and
    /// no lease (attempt and fencing token 0). Used by tests and by commands that run a runner
    /// in-process.
    pub fn detached(scratch_dir: PathBuf) -> Self {
        Self {
            cancel: CancellationToken::new(),
            heartbeat: Arc::new(|_| {}),
            output: Arc::new(|_, _| {}),
            scratch_dir,
            scratch_removed_after: false,
            attempt: 0,
            fencing_token: 0,
        }
    }
}

/// How a run ended, classified once for every workflow (resolutions.md §1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ExitClass {
    /// Exit code 0.
    Passed,
    /// Any other exit code not listed below.
    Failed {
        /// The process exit code.
        code: i32,
    },
    /// Our own timeout fired, or the command exited 124 (as `timeout(1)` does).
    TimedOut,
    /// The command could not run at all: exit 126 or 127, or the program/interpreter is missing.
    NotRunnable {
        /// Why it could not run, e.g. ``program `foo` not found``.
        reason: String,
    },
    /// Killed by a signal (including exit 128+n from a shell), or cancelled.
    Killed {
        /// Signal number, e.g. 9 for SIGKILL, 14 for SIGALRM.
        signal: i32,
    },
    /// Exit 125 with the censor marker on stderr: the run declared its own result unusable.
    Censored,
}

impl ExitClass {
    /// True only for [`ExitClass::Passed`].
    pub fn is_passed(&self) -> bool {
        matches!(self, ExitClass::Passed)
    }

    /// Short stable label: `passed`, `failed`, `timed_out`, `not_runnable`, `killed`, `censored`.
    pub fn label(&self) -> &'static str {
        match self {
            ExitClass::Passed => "passed",
            ExitClass::Failed { .. } => "failed",
            ExitClass::TimedOut => "timed_out",
            ExitClass::NotRunnable { .. } => "not_runnable",
            ExitClass::Killed { .. } => "killed",
            ExitClass::Censored => "censored",
        }
    }
}

/// The result of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunOutcome {
    /// How it ended.
    pub exit: ExitClass,
    /// The raw exit code when the process exited normally.
    pub exit_code: Option<i32>,
    /// Wall-clock duration in milliseconds.
    pub duration_ms: u64,
    /// Tail of stdout (UTF-8, lossy), capped; starts with a `[... truncated N bytes]` line when cut.
    pub stdout_tail: String,
    /// Tail of stderr (UTF-8, lossy), capped; starts with a `[... truncated N bytes]` line when cut.
    pub stderr_tail: String,
    /// Runner-specific structured result (e.g. a verifier's per-command results); `null` if none.
    #[serde(default)]
    pub detail: serde_json::Value,
}

/// Errors a runner returns when it cannot run a job at all.
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// The payload did not parse as this runner's spec.
    #[error("invalid payload for runner `{runner}`: {message}")]
    InvalidPayload {
        /// Runner kind.
        runner: &'static str,
        /// What was wrong.
        message: String,
    },
    /// An I/O failure outside the job's own commands.
    #[error("{context}: {source}")]
    Io {
        /// What was being done, e.g. ``create sandbox dir `/tmp/x` ``.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Anything else the runner could not do, with a message naming the thing.
    #[error("{0}")]
    Other(String),
}

/// A pluggable executor of jobs (DESIGN §5).
#[async_trait::async_trait]
pub trait Runner: Send + Sync {
    /// Stable name used in workflow definitions and job envelopes, e.g. `"process"`: its payload
    /// type's [`RunnerPayload::KIND`].
    fn kind(&self) -> &'static str;

    /// Called once when a worker starts, before it leases a job, with the directory under which
    /// the worker's attempts get their scratch dirs: removes what this runner's jobs on a dead
    /// worker of this host left behind there (the sandbox runner's clones) and starts per-process
    /// housekeeping (the process runner's orphan sweeper). Runs on the worker's tokio runtime;
    /// failures are logged, never returned (a worker starts anyway). Default: nothing.
    fn on_worker_start(&self, scratch_root: &Path) {
        let _ = scratch_root;
    }

    /// Runs one job. Must honour `ctx.cancel` (kill everything it started, then return
    /// `Ok` with [`ExitClass::Killed`]) and stay within `spec.timeout`.
    ///
    /// # Errors
    /// [`RunnerError`] when the job could not be run at all; a failing command is `Ok`.
    async fn run(&self, spec: &RunSpec, ctx: &RunContext) -> Result<RunOutcome, RunnerError>;
}

#[cfg(test)]
mod tests {
    #[test]
    fn current_exe_is_this_test_binary() {
        let exe = super::current_exe().unwrap();
        assert_eq!(
            exe,
            std::env::current_exe().unwrap(),
            "not replaced: the same path"
        );
        assert!(exe.exists());
    }

    /// Child mode of the test below: waits for `<dir>/go`, then writes `current_exe()` to `<dir>/exe`.
    const PROBE_DIR_ENV: &str = "SKILLFORGE_TEST_EXE_PROBE";

    // A process whose binary is replaced on disk while it runs (an upgrade under a running
    // worker) still names the installed binary, not `<path> (deleted)`.
    #[test]
    fn current_exe_after_the_binary_is_replaced_is_the_installed_one() {
        use std::time::{Duration, Instant};
        let name = "tests::current_exe_after_the_binary_is_replaced_is_the_installed_one";
        if let Some(dir) = std::env::var_os(PROBE_DIR_ENV) {
            let dir = std::path::PathBuf::from(dir);
            std::fs::write(dir.join("ready"), b"").unwrap();
            let deadline = Instant::now() + Duration::from_secs(60);
            while !dir.join("go").exists() {
                assert!(Instant::now() < deadline, "never told to go");
                std::thread::sleep(Duration::from_millis(10));
            }
            let exe = super::current_exe().unwrap();
            std::fs::write(dir.join("exe"), exe.to_str().unwrap()).unwrap();
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let installed = dir.path().join("worker-bin");
        std::fs::copy(std::env::current_exe().unwrap(), &installed).unwrap();
        let mut child = std::process::Command::new(&installed)
            .args(["--exact", name, "--test-threads", "1"])
            .env(PROBE_DIR_ENV, dir.path())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while !dir.path().join("ready").exists() {
            assert!(Instant::now() < deadline, "the child never started");
            std::thread::sleep(Duration::from_millis(10));
        }
        // The upgrade: a new file at the same path (the running one's inode is unlinked).
        std::fs::remove_file(&installed).unwrap();
        std::fs::copy(std::env::current_exe().unwrap(), &installed).unwrap();
        std::fs::write(dir.path().join("go"), b"").unwrap();
        assert!(child.wait().unwrap().success());
        let seen = std::fs::read_to_string(dir.path().join("exe")).unwrap();
        assert_eq!(
            seen,
            installed.to_str().unwrap(),
            "the installed binary, not `… (deleted)`"
        );
    }

    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;

    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Probe {
        dir: PathBuf,
    }

    impl RunnerPayload for Probe {
        const KIND: &'static str = "probe";
    }

    #[test]
    fn a_payload_that_does_not_serialize_is_an_error_naming_its_kind_never_null() {
        let good = Probe {
            dir: "/work/x".into(),
        };
        assert_eq!(
            good.to_json().unwrap(),
            serde_json::json!({"dir": "/work/x"})
        );
        let bad = Probe {
            dir: OsStr::from_bytes(b"/work/\xff").into(),
        };
        let error = bad.to_json().unwrap_err();
        assert_eq!(error.kind, "probe");
        assert_eq!(
            error.to_string(),
            "serialize the `probe` job payload: path contains invalid UTF-8 characters"
        );
    }

    #[test]
    fn parse_payload_reads_the_runners_type_and_names_the_runner_when_it_does_not_parse() {
        let spec = |payload| RunSpec {
            job_id: "j1".into(),
            payload,
            timeout: Duration::from_secs(1),
        };
        let parsed: Probe = parse_payload(&spec(serde_json::json!({"dir": "/work/x"}))).unwrap();
        assert_eq!(
            parsed,
            Probe {
                dir: "/work/x".into()
            }
        );
        match parse_payload::<Probe>(&spec(serde_json::json!({"dir": 3}))) {
            Err(RunnerError::InvalidPayload { runner, message }) => {
                assert_eq!(runner, "probe");
                assert!(message.contains("invalid type"), "{message}");
            }
            other => panic!("expected InvalidPayload, got {other:?}"),
        }
    }
}
