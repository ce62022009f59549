//! One verification: resolve the rev, provision the sandbox, run the commands fail-closed,
//! remove the sandbox, and summarize (seed: SkillOpt, "Deterministic hard-verifier tier").

use std::path::Path;
use std::time::Duration;

use skillforge_runner::{ExitClass, RunContext, RunOutcome};
use skillforge_runner_process::run_process_with_output;
use tokio::time::Instant;

use crate::clone::{ResolvedRev, clone_at, resolve_rev};
use crate::confine::{bwrap_probe, command_payload};
use crate::container::{ContainerExec, ImageCheck};
use crate::error::{SandboxError, worker_host};
use crate::payload::{ConfinementMode, SandboxPayload};
use crate::report::{CommandReport, CommandStatus, Confinement, Verdict, VerifyReport};
use crate::sandbox_dir::SandboxDir;

/// A finished verification: the report plus the exit class summarizing it.
#[derive(Debug, Clone, PartialEq)]
pub struct Verification {
    /// The full report.
    pub report: VerifyReport,
    /// Summary: `Passed` on pass; on fail the stopping command's class (`Failed{code}` — a
    /// censored exit is `Failed{125}` —, `TimedOut` or `Killed{signal}`); on skip
    /// `NotRunnable{reason}`, or `Killed{signal}` when the run was cancelled.
    pub exit: ExitClass,
}

impl Verification {
    /// The runner outcome: `exit`, the stopping (else last run) command's exit code and output
    /// tails, the whole run's duration, and the report as `detail`.
    pub fn into_outcome(self) -> RunOutcome {
        let last = self
            .report
            .commands
            .iter()
            .rev()
            .find(|c| c.status != CommandStatus::NotRun);
        RunOutcome {
            exit: self.exit,
            exit_code: last.and_then(|c| c.exit_code),
            duration_ms: self.report.duration_ms,
            stdout_tail: last.map(|c| c.stdout_tail.clone()).unwrap_or_default(),
            stderr_tail: last.map(|c| c.stderr_tail.clone()).unwrap_or_default(),
            detail: self.report.to_json(),
        }
    }
}

/// Verifies `payload.rev` of `payload.repo` by running `payload.commands` in a throwaway clone.
///
/// * The rev is resolved to a commit in the live repository first (recorded in the report).
/// * An empty command list is `skipped` (S-39) without provisioning anything.
/// * The sandbox is `<ctx.scratch_dir>/skillforge-sandbox-<uuid>/checkout`, an independent
///   `git clone --local` at the commit with a detached HEAD (S-36).
/// * Commands run in order as `sh -c LINE` with the checkout as working directory, confined by
///   bwrap when available (see [`crate::bwrap_probe`]). The run stops at the first command that
///   does not pass; later ones are reported `not_run`. Verdict: every command exited 0 ⇒
///   `pass`; a command exited non-zero, timed out or died of a signal ⇒ `fail` (S-38,
///   resolutions §1); a command could not run (126/127) ⇒ `skipped` with the reason (S-39).
/// * `budget` bounds the whole run: the clone's time counts against it (the clone itself is
///   not interrupted; a budget spent by then fails the run before its first command); each
///   command gets what is left, capped by `payload.command_timeout_secs`. On expiry the command's process group (and, under bwrap,
///   its PID namespace) is killed and the run fails (S-40).
/// * On `ctx.cancel` the running command is killed (SIGTERM, grace, SIGKILL) and the run is
///   `skipped` with reason `cancelled` and exit `Killed` — a cancelled run is no evidence.
///   Cancellation during the clone takes effect once the clone returns.
/// * The sandbox directory is removed in every case before returning (also when the future is
///   dropped, best effort); `sandbox_removed` reports whether that worked. Under a worker
///   (`ctx.scratch_removed_after`), a run that returns leaves it in `ctx.scratch_dir` instead,
///   whose removal the worker runs beside the commit of the result (off the result's path).
///
/// # Errors
/// [`SandboxError::RepoMissing`] / [`SandboxError::NotARepo`] naming the path and this worker's
/// host; [`SandboxError::RevNotFound`]; [`SandboxError::BwrapUnavailable`] when
/// `confinement: bwrap` is required but unusable; [`SandboxError::Provision`] when the clone or
/// checkout fails; [`SandboxError::Io`] for the sandbox directory; [`SandboxError::Process`] when
/// the process runner cannot start a command for reasons not the command's own.
pub async fn verify(
    payload: &SandboxPayload,
    budget: Duration,
    ctx: &RunContext,
) -> Result<Verification, SandboxError> {
    verify_with(payload, budget, ctx, None).await
}

/// [`verify`], with `containers` to run the commands through when the payload names an `image`.
///
/// With an image, confinement is `container` (the payload's `confinement` is ignored): the
/// engine and image are checked before the clone (a missing image ⇒ `skipped` with the reason,
/// S-39), then each command runs in its own container from the image with the checkout mounted
/// as working directory ([`ContainerExec::run_line`]). The verdict rules, budgets, cancellation
/// and sandbox removal are those of [`verify`]; the report's `container` records engine and image
/// digest.
///
/// # Errors
/// As [`verify`], plus [`SandboxError::Container`] when the payload names an image and
/// `containers` is `None` or the engine does not answer (the message says how to start one).
pub async fn verify_with(
    payload: &SandboxPayload,
    budget: Duration,
    ctx: &RunContext,
    containers: Option<&dyn ContainerExec>,
) -> Result<Verification, SandboxError> {
    let started = Instant::now();
    let deadline = started + budget;
    let resolved = {
        let (repo, rev) = (payload.repo.clone(), payload.rev.clone());
        tokio::task::spawn_blocking(move || resolve_rev(&repo, &rev))
            .await
            .map_err(|e| SandboxError::InvalidPayload(format!("resolve rev task failed: {e}")))??
    };
    if payload.commands.is_empty() {
        let confinement = match payload.image {
            Some(_) => Confinement::Container,
            None => choose_confinement(payload.confinement).await?,
        };
        let mut run = RunState::new(payload, &resolved, confinement);
        run.skip(
            "no commands to run".into(),
            not_runnable("no commands to run"),
        );
        return Ok(run.finish(started, true));
    }
    // In a container the image is checked first (an image that cannot run provisions nothing).
    let mut container = None;
    let executor = match &payload.image {
        Some(image) => {
            let exec = containers.ok_or_else(|| {
                container_error(image, "this worker has no container runner".into())
            })?;
            match exec
                .check_image(image)
                .await
                .map_err(|e| container_error(image, e.to_string()))?
            {
                ImageCheck::Ready(info) => container = Some(info),
                ImageCheck::NotRunnable(reason) => {
                    let mut run = RunState::new(payload, &resolved, Confinement::Container);
                    run.report.container = Some(serde_json::json!({"image": {"reference": image}}));
                    run.skip(reason.clone(), not_runnable(&reason));
                    return Ok(run.finish(started, true));
                }
            }
            Some((exec, image.as_str()))
        }
        None => None,
    };
    let dir = SandboxDir::create(&ctx.scratch_dir)?;
    let guard = RemoveOnDrop {
        dir: Some(dir),
        left_to_caller: ctx.scratch_removed_after,
    };
    let checkout = guard.checkout();
    let clone = {
        let (repo, resolved, dest) = (payload.repo.clone(), resolved.clone(), checkout.clone());
        tokio::task::spawn_blocking(move || clone_at(&repo, &resolved, &dest))
    };
    // bwrap's probe (once per process) runs while the checkout is cloned, not before it.
    let confinement = async {
        match payload.image {
            Some(_) => Ok(Confinement::Container),
            None => choose_confinement(payload.confinement).await,
        }
    };
    let (cloned, confinement) = tokio::join!(clone, confinement);
    let cloned = cloned.map_err(|e| SandboxError::Provision {
        path: checkout.clone(),
        repo: payload.repo.clone(),
        message: format!("clone task failed: {e}"),
    });
    let (way, confinement) = match cloned
        .and_then(|result| result)
        .and_then(|way| Ok((way, confinement?)))
    {
        Ok(done) => done,
        Err(error) => {
            guard.finish();
            return Err(error);
        }
    };
    let mut run = RunState::new(payload, &resolved, confinement);
    run.report.container = container;
    tracing::debug!(runner = "sandbox", commit = %resolved.commit, ?confinement, clone = ?way, "sandbox provisioned");
    let ran = run_commands(&mut run, &checkout, deadline, ctx, executor).await;
    let is_removed = guard.finish();
    ran?;
    Ok(run.finish(started, is_removed))
}

/// Runs the commands in order until one does not pass, recording each in `run`; in a container
/// from the image when `containers` is given, else through the process runner.
async fn run_commands(
    run: &mut RunState,
    checkout: &Path,
    deadline: Instant,
    ctx: &RunContext,
    containers: Option<(&dyn ContainerExec, &str)>,
) -> Result<(), SandboxError> {
    let payload = run.payload.clone();
    let n_commands = payload.commands.len();
    for (command_idx, line) in payload.commands.iter().enumerate() {
        let number = command_idx + 1;
        if ctx.cancel.is_cancelled() {
            run.skip("cancelled".into(), ExitClass::Killed { signal: 15 });
            return Ok(());
        }
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            run.fail(
                format!("run budget spent before command {number} `{line}`"),
                ExitClass::TimedOut,
            );
            return Ok(());
        }
        let per_command = payload.command_timeout_secs.map(Duration::from_secs);
        let timeout = per_command.map_or(remaining, |cap| cap.min(remaining));
        (ctx.heartbeat)(Some(&format!("command {number}/{n_commands}: {line}")));
        let outcome = match containers {
            Some((exec, image)) => {
                let env = &payload.env;
                exec.run_line(
                    image,
                    checkout,
                    line,
                    payload.network,
                    env,
                    timeout,
                    &ctx.cancel,
                )
                .await
            }
            None => {
                let process = command_payload(
                    run.report.confinement,
                    checkout,
                    payload.network,
                    &payload.env,
                    line,
                );
                run_process_with_output(&process, timeout, &ctx.cancel, Some(&ctx.output)).await
            }
        };
        let outcome = outcome.map_err(|source| SandboxError::Process {
            command: line.clone(),
            source,
        })?;
        run.record(line, &outcome);
        let what = format!("command {number} `{line}`");
        match &outcome.exit {
            ExitClass::Passed => continue,
            ExitClass::NotRunnable { reason } => {
                run.skip(
                    format!("{what} could not run: {reason}"),
                    outcome.exit.clone(),
                );
            }
            ExitClass::Killed { .. } if ctx.cancel.is_cancelled() => {
                run.skip("cancelled".into(), outcome.exit.clone());
            }
            ExitClass::TimedOut => {
                run.fail(
                    format!("{what} timed out after {} ms", timeout.as_millis()),
                    ExitClass::TimedOut,
                );
            }
            ExitClass::Killed { signal } => {
                run.fail(
                    format!("{what} was killed by signal {signal}"),
                    outcome.exit.clone(),
                );
            }
            ExitClass::Failed { code } => {
                run.fail(
                    format!("{what} exited with code {code}"),
                    outcome.exit.clone(),
                );
            }
            ExitClass::Censored => {
                run.fail(
                    format!("{what} exited with code 125 (censored)"),
                    ExitClass::Failed { code: 125 },
                );
            }
        }
        return Ok(());
    }
    Ok(())
}

/// Picks the confinement for this run.
async fn choose_confinement(mode: ConfinementMode) -> Result<Confinement, SandboxError> {
    match mode {
        ConfinementMode::None => Ok(Confinement::None),
        ConfinementMode::Auto => Ok(match bwrap_probe().await {
            Ok(()) => Confinement::Bwrap,
            Err(_) => Confinement::None,
        }),
        ConfinementMode::Bwrap => {
            bwrap_probe()
                .await
                .map(|()| Confinement::Bwrap)
                .map_err(|message| SandboxError::BwrapUnavailable {
                    host: worker_host(),
                    message,
                })
        }
    }
}

fn container_error(image: &str, message: String) -> SandboxError {
    SandboxError::Container {
        image: image.to_owned(),
        host: worker_host(),
        message,
    }
}

fn not_runnable(reason: &str) -> ExitClass {
    ExitClass::NotRunnable {
        reason: reason.to_owned(),
    }
}

/// The report under construction. The verdict starts as `pass` and only moves to `fail` or
/// `skipped` (fail-closed: nothing turns a recorded failure back into a pass).
struct RunState {
    payload: SandboxPayload,
    report: VerifyReport,
    exit: ExitClass,
}

impl RunState {
    fn new(payload: &SandboxPayload, resolved: &ResolvedRev, confinement: Confinement) -> Self {
        Self {
            payload: payload.clone(),
            report: VerifyReport {
                verdict: Verdict::Pass,
                hard: None,
                reason: None,
                commands: Vec::new(),
                repo: payload.repo.clone(),
                rev: payload.rev.clone(),
                commit: resolved.commit.clone(),
                confinement,
                network: payload.network,
                sandbox_removed: false,
                duration_ms: 0,
                container: None,
            },
            exit: ExitClass::Passed,
        }
    }

    fn record(&mut self, line: &str, outcome: &RunOutcome) {
        self.report.commands.push(CommandReport {
            command: line.to_owned(),
            status: CommandStatus::from_exit(&outcome.exit),
            exit_code: outcome.exit_code,
            duration_ms: outcome.duration_ms,
            stdout_tail: outcome.stdout_tail.clone(),
            stderr_tail: outcome.stderr_tail.clone(),
        });
    }

    fn fail(&mut self, reason: String, exit: ExitClass) {
        self.stop(Verdict::Fail, reason, exit);
    }

    fn skip(&mut self, reason: String, exit: ExitClass) {
        self.stop(Verdict::Skipped, reason, exit);
    }

    fn stop(&mut self, verdict: Verdict, reason: String, exit: ExitClass) {
        tracing::info!(runner = "sandbox", ?verdict, %reason, "verification stopped");
        self.report.verdict = verdict;
        self.report.reason = Some(reason);
        self.exit = exit;
    }

    fn finish(mut self, started: Instant, is_removed: bool) -> Verification {
        let n_recorded = self.report.commands.len();
        for line in &self.payload.commands[n_recorded..] {
            self.report.commands.push(CommandReport::not_run(line));
        }
        // A pass needs every command recorded as passed (fail-closed even against a bug above).
        let is_all_passed = !self.report.commands.is_empty()
            && self
                .report
                .commands
                .iter()
                .all(|c| c.status == CommandStatus::Passed);
        if self.report.verdict == Verdict::Pass && !is_all_passed {
            self.fail(
                "not every command passed".into(),
                ExitClass::Failed { code: -1 },
            );
        }
        self.report.hard = self.report.verdict.hard();
        self.report.sandbox_removed = is_removed;
        self.report.duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        Verification {
            report: self.report,
            exit: self.exit,
        }
    }
}

/// Removes the sandbox when finished explicitly or, best effort, when dropped (a dropped run
/// future: the process runner kills its processes first, as its future is dropped before this).
/// With `left_to_caller` (the worker removes the attempt's scratch dir once the result is
/// committed: `RunContext::scratch_removed_after`) an explicit finish leaves it there; a drop
/// still removes it (a dropped run's task may never reach the worker's removal).
struct RemoveOnDrop {
    dir: Option<SandboxDir>,
    left_to_caller: bool,
}

impl RemoveOnDrop {
    fn checkout(&self) -> std::path::PathBuf {
        self.dir
            .as_ref()
            .map(SandboxDir::checkout)
            .unwrap_or_default()
    }

    /// Whether the sandbox is removed (or left to the caller's removal).
    fn finish(mut self) -> bool {
        let dir = self.dir.take();
        if self.left_to_caller {
            return true;
        }
        dir.is_none_or(|dir| dir.remove())
    }
}

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if let Some(dir) = self.dir.take() {
            dir.remove();
        }
    }
}
