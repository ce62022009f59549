//! The `checker` runner: runs the check a [`CheckerPayload`] names (a diff as text, or two
//! commits of a repository); the outcome's `detail` is the [`CheckReport`] JSON.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;
use skillforge_runner::{
    CancellationToken, ExitClass, RunContext, RunOutcome, RunSpec, Runner, RunnerError,
    RunnerPayload, parse_payload,
};

use crate::CheckerError;
use crate::check::{CheckConfig, Workspace, run_checks};
use crate::diff::{DiffStats, parse_unified_diff};
use crate::payload::CheckerPayload;
use crate::report::{CheckReport, DimensionResult};

/// Signal number reported as [`ExitClass::Killed`] when the job is cancelled (SIGTERM).
pub const CANCEL_SIGNAL: i32 = 15;

/// Runs the check `payload` describes; tool report files and the head checkout go under
/// `scratch_dir` (which the caller removes).
///
/// Budget: `timeout` covers reading the repository and every tool. On cancel, running tools are
/// killed and the remaining tool dimensions skip with `cancelled`.
///
/// # Errors
/// [`CheckerError::InvalidRequest`] when [`CheckerPayload::validate`] fails,
/// [`CheckerError::Diff`] for unparsable diff text, [`CheckerError::Git`] when the repository or
/// a revision cannot be read, [`CheckerError::Io`] when the checkout cannot be written.
pub async fn check(
    payload: &CheckerPayload,
    scratch_dir: &Path,
    timeout: Duration,
    cancel: &CancellationToken,
) -> Result<CheckReport, CheckerError> {
    payload.validate().map_err(CheckerError::InvalidRequest)?;
    let started = Instant::now();
    let (diff, checkout) = match (&payload.diff, &payload.repo, &payload.base, &payload.head) {
        (Some(text), ..) => (parse_unified_diff(text)?, None),
        (None, Some(repo), Some(base), Some(head)) => {
            let needs_checkout = payload.checkers.iter().any(|c| c.is_tool_backed());
            let read = read_repository(
                repo,
                base,
                head,
                needs_checkout.then(|| scratch_dir.join("head")),
            );
            // libgit2 calls cannot be interrupted: on cancel or timeout stop waiting for them.
            tokio::select! {
                biased;
                () = cancel.cancelled() => return Ok(all_skipped(payload, "cancelled")),
                () = tokio::time::sleep(timeout) => return Ok(all_skipped(payload, "timed out reading the repository")),
                read = read => read?,
            }
        }
        _ => {
            return Err(CheckerError::InvalidRequest(
                "no diff source: give `diff` or `repo`, `base` and `head`".into(),
            ));
        }
    };
    let mut config = CheckConfig::new(
        payload.checkers.clone(),
        timeout.saturating_sub(started.elapsed()),
    );
    if let Some(diff_size) = payload.diff_size {
        config.diff_size = diff_size;
    }
    let workspace = Workspace {
        checkout: checkout.as_deref(),
        work_dir: scratch_dir,
    };
    Ok(run_checks(&diff, workspace, &config, cancel).await)
}

/// A report in which every requested dimension is skipped with `reason` (no score).
fn all_skipped(payload: &CheckerPayload, reason: &str) -> CheckReport {
    CheckReport::from_dimensions(
        payload
            .checkers
            .iter()
            .map(|&c| DimensionResult::skipped(c, reason, Value::Null))
            .collect(),
    )
}

/// The diff between `base` and `head` of `repo`, and a copy of `head`'s tree in `checkout_dir`
/// when given; libgit2 work runs on the blocking pool.
async fn read_repository(
    repo: &Path,
    base: &str,
    head: &str,
    checkout_dir: Option<PathBuf>,
) -> Result<(DiffStats, Option<PathBuf>), CheckerError> {
    let (repo, base, head) = (repo.to_path_buf(), base.to_string(), head.to_string());
    let context = format!("read repository `{}`", repo.display());
    tokio::task::spawn_blocking(move || {
        let diff = crate::git::diff_between(&repo, &base, &head)?;
        if let Some(dir) = &checkout_dir {
            crate::git::export_tree(&repo, &head, dir)?;
        }
        Ok((diff, checkout_dir))
    })
    .await
    .map_err(|e| CheckerError::Io {
        context,
        source: std::io::Error::other(e),
    })?
}

/// The `checker` runner (DESIGN §5): deterministic quality dimensions, each in [0,1].
#[derive(Debug, Default, Clone, Copy)]
pub struct CheckerRunner;

#[async_trait::async_trait]
impl Runner for CheckerRunner {
    fn kind(&self) -> &'static str {
        CheckerPayload::KIND
    }

    /// Parses a [`CheckerPayload`], runs [`check`] in `ctx.scratch_dir` and returns an outcome
    /// whose `detail` is the [`CheckReport`] and whose `stdout_tail` is a one-line-per-dimension
    /// summary. Exit: `passed` when the check completed (even if every dimension skipped: that
    /// is a report with `mean: null`), `timed_out` when `spec.timeout` ran out, `killed` (signal
    /// [`CANCEL_SIGNAL`]) on cancel; the partial report is still in `detail`.
    ///
    /// # Errors
    /// [`RunnerError::InvalidPayload`] for a bad payload; [`RunnerError::Other`] with the
    /// [`CheckerError`] message when the diff or repository cannot be read.
    async fn run(&self, spec: &RunSpec, ctx: &RunContext) -> Result<RunOutcome, RunnerError> {
        let mut payload: CheckerPayload = parse_payload(spec)?;
        if let Some(fetch) = payload.fetch.clone() {
            // A fleet job's repository: read from this worker's mirror cache.
            let root = skillforge_runner_process::mirror::mirror_root(&ctx.scratch_dir);
            let revs: Vec<String> = [&payload.base, &payload.head]
                .into_iter()
                .flatten()
                .cloned()
                .collect();
            let mirror = tokio::task::spawn_blocking(move || {
                let revs: Vec<&str> = revs.iter().map(String::as_str).collect();
                skillforge_runner_process::mirror::ensure_mirror(&root, &fetch, &revs)
            })
            .await
            .map_err(|e| RunnerError::Other(format!("mirror task failed: {e}")))?
            .map_err(RunnerError::Other)?;
            payload.repo = Some(mirror);
        }
        payload
            .validate()
            .map_err(|message| RunnerError::InvalidPayload {
                runner: CheckerPayload::KIND,
                message,
            })?;
        let started = Instant::now();
        // The engine passes the scratch dir as a path only; tool reports are written into it.
        tokio::fs::create_dir_all(&ctx.scratch_dir)
            .await
            .map_err(|source| RunnerError::Io {
                context: format!("create scratch dir `{}`", ctx.scratch_dir.display()),
                source,
            })?;
        // `check` honours the token itself (tools are killed, later dimensions skip), so the
        // partial report survives a cancel.
        let report = check(&payload, &ctx.scratch_dir, spec.timeout, &ctx.cancel)
            .await
            .map_err(|e| RunnerError::Other(e.to_string()))?;
        let exit = if ctx.cancel.is_cancelled() {
            ExitClass::Killed {
                signal: CANCEL_SIGNAL,
            }
        } else if started.elapsed() >= spec.timeout {
            ExitClass::TimedOut
        } else {
            ExitClass::Passed
        };
        Ok(outcome(exit, started, &report))
    }
}

fn outcome(exit: ExitClass, started: Instant, report: &CheckReport) -> RunOutcome {
    let exit_code = matches!(exit, ExitClass::Passed).then_some(0);
    RunOutcome {
        exit,
        exit_code,
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        stdout_tail: summary(report),
        stderr_tail: String::new(),
        detail: serde_json::to_value(report).expect("report serializes"),
    }
}

/// `name score` or `name skipped: reason` per dimension, then `mean …`.
fn summary(report: &CheckReport) -> String {
    let mut lines: Vec<String> = report
        .dimensions
        .iter()
        .map(|d| match (d.score, &d.skipped) {
            (Some(score), _) => format!("{} {score:.3}", d.name),
            (None, reason) => format!("{} skipped: {}", d.name, reason.as_deref().unwrap_or("")),
        })
        .collect();
    lines.push(match report.mean {
        Some(mean) => format!("mean {mean:.3}"),
        None => "mean none (every dimension skipped)".into(),
    });
    lines.join("\n")
}
