//! Building and starting the child: program, working directory, environment, stdio and its
//! own process group; and what a failed start means.

use std::io;
use std::process::Stdio;

use skillforge_runner::RunnerError;

use crate::orphans::{OWNER_ENV, owner_marker};
use crate::payload::{Command, ProcessPayload, SHELL_PATH};
use crate::reap::RUN_ID_ENV;

/// Names never copied from the worker's environment, whatever the payload's allowlist says:
/// the worker's queue password (`SKILLFORGE_QUEUE_PASSWORD`; a job is not given the queue's
/// credentials by the worker that runs it).
pub const NEVER_INHERITED: &[&str] = &["SKILLFORGE_QUEUE_PASSWORD"];

/// `ENOEXEC`: the file is executable but not in a format the kernel can run.
const ENOEXEC: i32 = 8;

/// Builds the child command for `payload`, marked with `SKILLFORGE_RUN_ID=run_id`.
///
/// The child gets: its own process group (pgid = its pid); environment cleared, then the
/// allowlisted names copied from the worker's environment (when set there; never the
/// [`NEVER_INHERITED`] ones), then
/// `payload.env`, then the markers [`RUN_ID_ENV`] and [`OWNER_ENV`] (which same-named
/// `payload.env` entries cannot override);
/// stdin piped when `payload.stdin` is set, else `/dev/null`; stdout and stderr piped.
///
/// # Errors
/// [`RunnerError::InvalidPayload`] for an empty argv; [`RunnerError::Io`] when the working
/// directory cannot be read or is not a directory.
pub(crate) fn build_command(
    payload: &ProcessPayload,
    run_id: &str,
) -> Result<tokio::process::Command, RunnerError> {
    let mut command = match &payload.command {
        Command::Shell(line) => {
            let mut command = tokio::process::Command::new(SHELL_PATH);
            command.arg("-c").arg(line);
            command
        }
        Command::Argv(argv) => {
            let (program, args) =
                argv.split_first()
                    .ok_or_else(|| RunnerError::InvalidPayload {
                        runner: "process",
                        message: "`command.argv` is empty".into(),
                    })?;
            let mut command = tokio::process::Command::new(program);
            command.args(args);
            command
        }
    };
    if let Some(cwd) = &payload.cwd {
        let context = || format!("open working directory `{}`", cwd.display());
        let metadata = std::fs::metadata(cwd).map_err(|source| RunnerError::Io {
            context: context(),
            source,
        })?;
        if !metadata.is_dir() {
            let source = io::Error::new(io::ErrorKind::NotADirectory, "not a directory");
            return Err(RunnerError::Io {
                context: context(),
                source,
            });
        }
        command.current_dir(cwd);
    }
    command.env_clear();
    for name in payload.effective_env_allowlist() {
        if NEVER_INHERITED.contains(&name) {
            continue;
        }
        if let Some(value) = std::env::var_os(name) {
            command.env(name, value);
        }
    }
    command.envs(&payload.env);
    command.env(RUN_ID_ENV, run_id);
    command.env(OWNER_ENV, owner_marker());
    command
        .stdin(if payload.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    // SAFETY: the closure runs in the forked child between fork and exec and only makes the
    // prctl(2) syscall, which is async-signal-safe; it allocates nothing and takes no lock.
    #[expect(unsafe_code, reason = "pre_exec is unsafe; see SAFETY")]
    unsafe {
        command.pre_exec(|| {
            // The direct child dies with its worker (a SIGKILLed worker must not leave its job
            // running beside the retry that recovers it). Its descendants are not signalled by
            // the kernel: the next orphan sweep on this host kills them (crate::orphans).
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                .map_err(std::io::Error::from)
        });
    }
    Ok(command)
}

/// Interprets a failed spawn of `program`: `Ok(reason)` when the command cannot run at all
/// (program or its `#!` interpreter missing, not executable, unknown format), which the run
/// reports as `not_runnable`.
///
/// # Errors
/// [`RunnerError::Io`] for any other failure (out of processes, file descriptors, memory):
/// the worker, not the command, is at fault.
pub(crate) fn spawn_failure(program: &str, error: io::Error) -> Result<String, RunnerError> {
    match error.kind() {
        io::ErrorKind::NotFound => Ok(format!("program `{program}` or its interpreter not found")),
        io::ErrorKind::PermissionDenied => Ok(format!(
            "program `{program}` not executable (permission denied)"
        )),
        _ if error.raw_os_error() == Some(ENOEXEC) => Ok(format!(
            "program `{program}` has an unrecognised executable format"
        )),
        _ => Err(RunnerError::Io {
            context: format!("spawn program `{program}`"),
            source: error,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spawn_failures() {
        let check = |error: io::Error, expected: Option<&str>| {
            let got = spawn_failure("x", error).ok();
            assert_eq!(got.as_deref(), expected);
        };
        check(
            io::ErrorKind::NotFound.into(),
            Some("program `x` or its interpreter not found"),
        );
        check(
            io::ErrorKind::PermissionDenied.into(),
            Some("program `x` not executable (permission denied)"),
        );
        check(
            io::Error::from_raw_os_error(ENOEXEC),
            Some("program `x` has an unrecognised executable format"),
        );
        check(io::Error::from_raw_os_error(11), None); // EAGAIN: the worker is out of processes
    }

    #[test]
    fn empty_argv_is_an_invalid_payload() {
        let payload = ProcessPayload::argv(Vec::new());
        assert!(matches!(
            build_command(&payload, "id"),
            Err(RunnerError::InvalidPayload {
                runner: "process",
                ..
            })
        ));
    }

    #[test]
    fn missing_cwd_is_an_io_error_naming_it() {
        let payload = ProcessPayload {
            cwd: Some("/nonexistent/dir".into()),
            ..ProcessPayload::shell("true")
        };
        let error = build_command(&payload, "id").expect_err("missing cwd");
        assert!(error.to_string().contains("`/nonexistent/dir`"), "{error}");
    }
}
