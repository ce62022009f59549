//! One run of a process: spawn, wait under a timeout and cancellation, terminate the group,
//! kill every leftover descendant, collect the capped output and classify the ending.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;

use nix::sys::signal::Signal;
use nix::unistd::Pid;
use skillforge_runner::{CancellationToken, OutputFn, OutputStream, RunOutcome, RunnerError};
use tokio::process::Child;
use tokio::task::{JoinError, JoinHandle};
use tokio::time::Instant;

use crate::capture::{StreamCapture, capture_stream};
use crate::classify::{Ending, classify};
use crate::payload::ProcessPayload;
use crate::reap::{KillOnDrop, kill_all, signal_group, signal_marked_async};
use crate::spawn::{build_command, spawn_failure};

/// How long output pipes may stay open once the child exited and its processes were killed;
/// after that the capture keeps what it has (a pipe held by an unreachable process must not
/// hang the run).
const DRAIN_TIMEOUT: Duration = Duration::from_secs(1);
/// Pause between checks, during the grace, whether the marked processes are gone.
const GRACE_POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Runs one process to completion, timeout or cancellation.
///
/// The child runs in a new process group with a cleared environment (allowlisted worker
/// variables, then `payload.env`, then a unique `SKILLFORGE_RUN_ID` marker, see
/// [`crate::RUN_ID_ENV`]); stdout and stderr are captured concurrently, each keeping its last
/// `max_output_bytes` (see [`crate::TRUNCATION_MARKER`]).
///
/// On `timeout` (wall clock from spawn) or when `cancel` fires: SIGTERM to the group and to every
/// marked process, wait up to `grace_ms` for the child and all marked processes to go, then
/// SIGKILL the group. Whatever way the child ends, the group and every process still carrying
/// the marker (also those that `setsid`/`nohup` themselves away or ignore SIGTERM) are then
/// SIGKILLed, sweeping `/proc` until none is left (zombies ignored, up to 2 s); output still
/// open after that is read for at most 1 s more. Dropping the returned future mid-run SIGKILLs
/// the group and the marked processes.
///
/// The outcome: `exit` from [`crate::classify`] (timeout → `TimedOut`, cancel → `Killed` with
/// 15 if the child ended within the grace, else 9); `exit_code` when the child exited normally;
/// `duration_ms` from spawn until the direct child was reaped; `detail` is
/// `{"run_id": "<hex>", "stdout_truncated_bytes": n, "stderr_truncated_bytes": n}`.
///
/// # Errors
/// [`RunnerError::InvalidPayload`] for an empty argv; [`RunnerError::Io`] for a missing working
/// directory, a spawn failure that is not the command's fault (e.g. out of processes), or a
/// failed wait. A missing program or interpreter is `Ok` with
/// [`skillforge_runner::ExitClass::NotRunnable`].
pub async fn run_process(
    payload: &ProcessPayload,
    timeout: Duration,
    cancel: &CancellationToken,
) -> Result<RunOutcome, RunnerError> {
    run_process_with_output(payload, timeout, cancel, None).await
}

/// [`run_process`], passing every chunk of stdout and stderr to `output` as it is read (a job's
/// live output, `RunContext::output`), in addition to the capped tails of the outcome.
///
/// # Errors
/// As [`run_process`].
pub async fn run_process_with_output(
    payload: &ProcessPayload,
    timeout: Duration,
    cancel: &CancellationToken,
    output: Option<&OutputFn>,
) -> Result<RunOutcome, RunnerError> {
    let run_id = uuid::Uuid::new_v4().simple().to_string();
    let mut command = build_command(payload, &run_id)?;
    let started = Instant::now();
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(error) => {
            let reason = spawn_failure(payload.command.program().unwrap_or_default(), error)?;
            let ending = Ending::NotStarted { reason };
            tracing::debug!(run_id, ?ending, "process not started");
            return Ok(RunOutcome {
                exit: classify(&ending, false, false),
                exit_code: None,
                duration_ms: millis(started.elapsed()),
                stdout_tail: String::new(),
                stderr_tail: String::new(),
                detail: detail(&run_id, 0, 0),
            });
        }
    };
    let pid = child
        .id()
        .and_then(|pid| i32::try_from(pid).ok())
        .ok_or_else(|| RunnerError::Other("spawned child process reports no pid".into()))?;
    // The child leads its own group: pgid == pid.
    let pgid = Pid::from_raw(pid);
    let mut kill_on_drop = KillOnDrop::new(pgid, run_id.clone());
    tracing::debug!(run_id, pid, "process started");

    let stdin_task = feed_stdin(&mut child, payload.stdin.as_deref());
    let stop_reading = CancellationToken::new();
    let cap = payload.effective_max_output_bytes();
    let stdout_task = child.stdout.take().map(|pipe| {
        let live = output.map(|o| (o.clone(), OutputStream::Stdout));
        tokio::spawn(capture_stream(pipe, cap, false, stop_reading.clone(), live))
    });
    let stderr_task = child.stderr.take().map(|pipe| {
        let live = output.map(|o| (o.clone(), OutputStream::Stderr));
        tokio::spawn(capture_stream(pipe, cap, true, stop_reading.clone(), live))
    });

    let waited = wait_or_terminate(
        &mut child,
        pgid,
        &run_id,
        timeout,
        payload.effective_grace(),
        cancel,
    )
    .await;
    let duration_ms = millis(started.elapsed());
    kill_all(pgid, &run_id).await;
    kill_on_drop.disarm();
    // The process group is gone, so the pipe's reader is too: the writer ends with EPIPE.
    drop(stdin_task);
    let (stdout, stderr) = drain(stdout_task, stderr_task, stop_reading).await?;
    let (status, ending) = waited?;

    if stdout.was_stopped || stderr.was_stopped {
        tracing::warn!(
            run_id,
            "output pipe held open after the run was killed; output may be cut"
        );
    }
    let (stdout_tail, n_stdout_truncated) = stdout.tail.into_text();
    let (stderr_tail, n_stderr_truncated) = stderr.tail.into_text();
    let exit = classify(
        &ending,
        payload.command.is_shell(),
        stderr.has_censor_marker,
    );
    tracing::debug!(run_id, exit = exit.label(), duration_ms, "process finished");
    Ok(RunOutcome {
        exit,
        exit_code: status.code(),
        duration_ms,
        stdout_tail,
        stderr_tail,
        detail: detail(&run_id, n_stdout_truncated, n_stderr_truncated),
    })
}

/// Writes `input` to the child's stdin in the background, then closes it. A child that exits
/// without reading it all is not an error.
///
/// The write runs on its own thread with SIGPIPE blocked: a command that restores SIGPIPE's
/// default action so `skillforge … | head` ends quietly also runs jobs in-process (`eval
/// forge`, `candidate gate`), and a write to a child that exited unread must end this write
/// with `EPIPE`, never the whole command. The signal raised by the write is directed at the
/// writing thread and dies with it.
fn feed_stdin(child: &mut Child, input: Option<&str>) -> Option<std::thread::JoinHandle<()>> {
    let pipe = child.stdin.take()?;
    let bytes = input?.as_bytes().to_vec();
    let fd = match pipe.into_owned_fd() {
        Ok(fd) => fd,
        Err(error) => {
            tracing::debug!(%error, "child stdin cannot be handed to a writer thread");
            return None;
        }
    };
    let spawned = std::thread::Builder::new()
        .name("child-stdin".to_owned())
        .spawn(move || {
            let mut blocked = nix::sys::signal::SigSet::empty();
            blocked.add(nix::sys::signal::Signal::SIGPIPE);
            if let Err(error) = blocked.thread_block() {
                tracing::debug!(%error, "block SIGPIPE for the stdin writer");
                return;
            }
            // tokio left the pipe non-blocking; this thread writes it blocking.
            let flags = nix::fcntl::fcntl(&fd, nix::fcntl::FcntlArg::F_GETFL)
                .map(nix::fcntl::OFlag::from_bits_truncate)
                .unwrap_or(nix::fcntl::OFlag::empty());
            let _ = nix::fcntl::fcntl(
                &fd,
                nix::fcntl::FcntlArg::F_SETFL(flags - nix::fcntl::OFlag::O_NONBLOCK),
            );
            let mut file = std::fs::File::from(fd);
            if let Err(error) = std::io::Write::write_all(&mut file, &bytes) {
                tracing::debug!(%error, "write child stdin stopped early");
            }
        });
    match spawned {
        Ok(handle) => Some(handle),
        Err(error) => {
            tracing::warn!(%error, "start the child's stdin writer");
            None
        }
    }
}

/// Waits for the child to exit, or for `timeout` / `cancel`, in which case it terminates
/// the run (see [`terminate`]). Returns the child's status and how the run ended.
async fn wait_or_terminate(
    child: &mut Child,
    pgid: Pid,
    run_id: &str,
    timeout: Duration,
    grace: Duration,
    cancel: &CancellationToken,
) -> Result<(ExitStatus, Ending), RunnerError> {
    let is_timeout = tokio::select! {
        biased;
        status = child.wait() => {
            let status = status.map_err(wait_error)?;
            return Ok((status, natural_ending(status)));
        }
        () = cancel.cancelled() => false,
        () = tokio::time::sleep(timeout) => true,
    };
    tracing::debug!(run_id, is_timeout, "terminating process group");
    let (status, signal) = terminate(child, pgid, run_id, grace).await?;
    let ending = if is_timeout {
        Ending::TimedOut
    } else {
        Ending::Cancelled {
            signal: signal as i32,
        }
    };
    Ok((status, ending))
}

/// SIGTERMs the group and every marked process, waits up to `grace` for the child to exit and
/// every marked process to go, then SIGKILLs the group and reaps the child. Returns the child's
/// status and the signal that ended it: SIGTERM when it exited within the grace, else SIGKILL.
async fn terminate(
    child: &mut Child,
    pgid: Pid,
    run_id: &str,
    grace: Duration,
) -> Result<(ExitStatus, Signal), RunnerError> {
    signal_group(pgid, Signal::SIGTERM);
    signal_marked_async(run_id, Some(Signal::SIGTERM)).await;
    let gone_within_grace = tokio::time::timeout(grace, async {
        let status = child.wait().await.map_err(wait_error)?;
        while signal_marked_async(run_id, None).await > 0 {
            tokio::time::sleep(GRACE_POLL_INTERVAL).await;
        }
        Ok::<_, RunnerError>(status)
    })
    .await;
    if let Ok(status) = gone_within_grace {
        return Ok((status?, Signal::SIGTERM));
    }
    // The child may have exited within the grace while descendants lingered; ask before the
    // SIGKILL so its death by that SIGKILL is not taken for an exit within the grace.
    let exited_within_grace = child.try_wait().map_err(wait_error)?;
    signal_group(pgid, Signal::SIGKILL);
    if let Some(status) = exited_within_grace {
        return Ok((status, Signal::SIGTERM));
    }
    let status = child.wait().await.map_err(wait_error)?;
    Ok((status, Signal::SIGKILL))
}

/// Waits for both captures to finish, for at most [`DRAIN_TIMEOUT`]; then stops them and
/// takes what they have.
async fn drain(
    stdout_task: Option<JoinHandle<StreamCapture>>,
    stderr_task: Option<JoinHandle<StreamCapture>>,
    stop_reading: CancellationToken,
) -> Result<(StreamCapture, StreamCapture), RunnerError> {
    let joined = async { tokio::join!(join_capture(stdout_task), join_capture(stderr_task)) };
    tokio::pin!(joined);
    let (stdout, stderr) = tokio::select! {
        joined = &mut joined => joined,
        () = tokio::time::sleep(DRAIN_TIMEOUT) => {
            stop_reading.cancel();
            joined.await
        }
    };
    let task_error = |stream: &str, error: JoinError| {
        RunnerError::Other(format!("capture {stream} of child process failed: {error}"))
    };
    Ok((
        stdout.map_err(|error| task_error("stdout", error))?,
        stderr.map_err(|error| task_error("stderr", error))?,
    ))
}

/// The capture a task produced, or an empty one when the stream was never piped.
async fn join_capture(task: Option<JoinHandle<StreamCapture>>) -> Result<StreamCapture, JoinError> {
    match task {
        Some(task) => task.await,
        None => Ok(StreamCapture::empty()),
    }
}

/// How a child that ended on its own ended.
fn natural_ending(status: ExitStatus) -> Ending {
    match (status.code(), status.signal()) {
        (Some(code), _) => Ending::Exited { code },
        (None, Some(signal)) => Ending::Signalled { signal },
        // Unreachable for a reaped child on Unix; reported as an unknown failure.
        (None, None) => Ending::Exited { code: -1 },
    }
}

fn wait_error(source: std::io::Error) -> RunnerError {
    RunnerError::Io {
        context: "wait for child process".into(),
        source,
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

fn detail(run_id: &str, n_stdout_truncated: u64, n_stderr_truncated: u64) -> serde_json::Value {
    serde_json::json!({
        "run_id": run_id,
        "stdout_truncated_bytes": n_stdout_truncated,
        "stderr_truncated_bytes": n_stderr_truncated,
    })
}
