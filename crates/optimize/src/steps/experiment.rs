//! One experiment from dispatch to its selection decision: the worktree and branch, the brief,
//! the `agent` job, scope enforcement, the smoke check, and the sampling ladder of paired
//! `process` measurements, each sample persisted as the marker and then at CP-3 (seed:
//! optimize-loop, loop.md 3.2 and 3.3; O-01, O-19, O-23, O-27, O-29, O-41).

use std::path::Path;

use skillforge_runner_agent::{AgentPayload, PermissionDenial, Spend as AgentSpend, Usage};

use super::judging;
use crate::OptimizeError;
use crate::brief;
use crate::ctx::{Ctx, Event, passed};
use crate::decide::{
    self, DecideConfig, DecideInput, DecideResult, Decision, Measured, NextMeasurement,
};
use crate::delegation;
use crate::git;
use crate::log::{
    Comparison, ComparisonKind, Entry, ExperimentLog, Outcome, PendingWait, WorkerResult,
};
use crate::measure::{self, Sample};
use crate::state::{Marker, OWN_FILES, side, write_marker};

/// The prefix of a worker's final-message line naming a dependency it needs and may not install (O-02).
pub const NEEDS_DEPENDENCY: &str = "needs_dependency:";

/// The log outcome a decision stands for before integration (O-41): a keep stays `measured`
/// until its diff is on the optimization branch.
pub fn outcome_of(d: &DecideResult) -> Outcome {
    match d.decision {
        Decision::Keep | Decision::Measured => Outcome::Measured,
        Decision::Promising => Outcome::Promising,
        Decision::Reverted => Outcome::Reverted,
        Decision::Inconclusive => Outcome::Inconclusive,
        Decision::Censored => Outcome::Censored,
        Decision::Degenerate => Outcome::Degenerate,
        Decision::Error => Outcome::Error,
        Decision::Timeout => Outcome::Timeout,
    }
}

/// Assigns experiment numbers to `ids`, records each receipt in `run_state.pending_waits` and
/// verifies it on disk before dispatching (O-23), then submits the worker jobs.
///
/// # Errors
/// As [`Ctx::save`], [`submit_worker`].
pub async fn dispatch_batch(
    ctx: &Ctx<'_>,
    log: &mut ExperimentLog,
    ids: &[String],
) -> Result<Vec<u32>, OptimizeError> {
    let mut numbers = Vec::new();
    for id in ids {
        let n = log.run_state.experiments_run + 1;
        log.run_state.experiments_run = n;
        let base_sha = git::rev_parse(&ctx.repo, &ctx.spec.branch())?;
        let exec = &ctx.spec.execution;
        let (runtime, note) = delegation::runtime_for(
            &exec.runtime,
            &exec.fallback_runtime,
            delegation::Host::detect(&ctx.repo),
            &log.run_state.delegation,
        );
        if let Some(note) = note {
            log.notes.push(format!("exp-{n:03}: {note}"));
            ctx.emit(Event::Note(note));
        }
        log.run_state.pending_waits.push(PendingWait {
            experiment: n,
            hypothesis_id: id.clone(),
            observable: ctx.key(&format!("exp-{n:03}:worker")),
            action: "collect through loop.md 3.3".into(),
            base_sha,
            runtime,
            collected: None,
            backpressure: 0,
        });
        ctx.save(log, "receipt", |l| {
            l.run_state.pending_waits.iter().any(|w| w.experiment == n)
        })?;
        submit_worker(ctx, log, n).await?;
        let description = log
            .hypothesis_backlog
            .iter()
            .find(|h| &h.id == id)
            .map(|h| h.description.clone())
            .unwrap_or_default();
        ctx.emit(Event::Dispatched {
            experiment: n,
            hypothesis: description,
        });
        numbers.push(n);
    }
    Ok(numbers)
}

pub(crate) fn pending(log: &ExperimentLog, n: u32) -> Result<&PendingWait, OptimizeError> {
    log.run_state
        .pending_waits
        .iter()
        .find(|w| w.experiment == n)
        .ok_or_else(|| OptimizeError::Invalid(format!("exp-{n:03} has no pending wait")))
}

/// Creates the experiment's worktree and branch (idempotent) and submits its worker job under its
/// idempotency key; the brief is rendered once and kept in `briefs/exp-NNN.md`, so a resumed run
/// resubmits the same job. Returns the job id.
///
/// # Errors
/// [`OptimizeError::Git`], [`OptimizeError::Queue`], [`OptimizeError::Env`].
pub async fn submit_worker(
    ctx: &Ctx<'_>,
    log: &ExperimentLog,
    n: u32,
) -> Result<String, OptimizeError> {
    let wait = pending(log, n)?;
    let worktree = ctx.root.experiment_worktree(n);
    let remote = ctx.spec.remote_url().map(|url| brief::RemoteVars {
        base_sha: wait.base_sha.clone(),
        sample_count: brief::sample_count(&ctx.spec),
        url: url.to_owned(),
    });
    match &remote {
        // the worker's own checkout is its isolation; it fetches base_sha from the remote (loop.md 3.2 step 1)
        Some(r) => super::remote_exp::publish_base(ctx, &r.url, &wait.base_sha)?,
        None => git::worktree_for_branch(
            &ctx.repo,
            &worktree,
            &ctx.spec.experiment_branch(n),
            &wait.base_sha,
        )?,
    }
    let brief_path = ctx.root.root.join("briefs").join(format!("exp-{n:03}.md"));
    let prompt = match std::fs::read_to_string(&brief_path) {
        Ok(text) => text,
        Err(_) => {
            let h = log
                .hypothesis_backlog
                .iter()
                .find(|h| h.id == wait.hypothesis_id)
                .ok_or_else(|| {
                    OptimizeError::Invalid(format!(
                        "hypothesis `{}` is not in the backlog",
                        wait.hypothesis_id
                    ))
                })?;
            let digest = std::fs::read_to_string(ctx.root.source_digest()).unwrap_or_default();
            let text = brief::render(
                &ctx.spec,
                log,
                &digest,
                n,
                (&h.description, &h.category),
                remote.as_ref(),
            );
            skillforge_stage::fs::write_atomic(&brief_path, &text)?;
            text
        }
    };
    let runtime = if wait.runtime.is_empty() {
        ctx.spec.execution.runtime.clone()
    } else {
        wait.runtime.clone()
    };
    let mut payload = AgentPayload::new(runtime, prompt);
    payload.model = ctx.spec.execution.model.clone();
    let transcripts = ctx.root.root.join("transcripts");
    // on a fleet the worktree travels to the job dir and back (`fleet.rs`)
    let (workdir, transcript) =
        ctx.experiment_paths(&worktree, &transcripts.join(format!("exp-{n:03}.jsonl")));
    // a remote worker runs in its attempt's scratch dir, where it makes its own clone
    payload.workdir = remote.is_none().then_some(workdir);
    payload.timeout_secs = ctx.spec.execution.worker_timeout_seconds;
    payload.transcript_path = Some(transcript);
    let timeout = ctx
        .spec
        .execution
        .worker_timeout_seconds
        .map(std::time::Duration::from_secs);
    let mut spec = ctx.job("experiment", &payload, wait.observable.clone(), timeout)?;
    if remote.is_none() {
        ctx.ship_experiment(&mut spec, &worktree, &transcripts)
            .await?;
    }
    let enqueued = ctx
        .port
        .submit(&spec)
        .await
        .map_err(|e| OptimizeError::Queue(format!("enqueue the exp-{n:03} worker: {e}")))?;
    if !enqueued.created {
        restart_not_runnable(ctx, &enqueued.job_id, &spec, n).await?;
    }
    Ok(enqueued.job_id)
}

/// A worker job under this experiment's key that ended because it could not run (a runtime not
/// logged in then, say) starts again with this submit's payload: the run stopped on it and was
/// resumed after the fix. Any other job is left as it is.
async fn restart_not_runnable(
    ctx: &Ctx<'_>,
    id: &str,
    spec: &skillforge_engine::JobSpec,
    n: u32,
) -> Result<(), OptimizeError> {
    let queue = |e: skillforge_engine::EngineError| {
        OptimizeError::Queue(format!("start the exp-{n:03} worker again: {e}"))
    };
    let Some(job) = ctx.port.get(id).await.map_err(queue)? else {
        return Ok(());
    };
    let ended = matches!(
        job.state,
        skillforge_engine::JobState::Failed | skillforge_engine::JobState::Dead
    );
    if let Some(reason) = crate::ctx::not_runnable_reason(&job).filter(|_| ended) {
        ctx.port
            .restart(id, spec, &format!("it could not run: {reason}"))
            .await
            .map_err(queue)?;
    }
    Ok(())
}

/// The capacity class of a worker job that ended on its runtime's rate limit or overload (429,
/// 529/`overloaded`, 5xx: the agent runner's transient API errors, read from the job's agent
/// report `api_error.kind`), after the runner's own retries: `rate_limit`, `overloaded` or
/// `server`. `None` for every other ending (O-20: only capacity is backpressure).
pub fn capacity_class(job: &skillforge_engine::Job) -> Option<&'static str> {
    if passed(job) {
        return None;
    }
    let error: skillforge_runner_agent::ApiError =
        serde_json::from_value(job.outcome.as_ref()?.detail.get("api_error")?.clone()).ok()?;
    error.kind.is_transient().then(|| error.kind.label())
}

/// Seconds to hold a worker that met its runtime's capacity before queueing it again (O-20):
/// 2, 4, 8 … doubling per time, at most 60.
pub fn backpressure_delay(times: u32) -> u64 {
    (1u64 << times.clamp(1, 6)).min(60)
}

/// Waits for the worker, enforces the scope (reverting out-of-scope changes, O-01) and records
/// what it found on the pending wait, verified, so a resumed run keeps it.
///
/// A worker that ended on its runtime's capacity or rate limit ([`capacity_class`]) is
/// backpressure (O-20): after [`backpressure_delay`] its job is queued again (it runs when a
/// worker slot frees) and the count is kept on the pending wait; it is never an `error`.
///
/// `None` when the run's wall-clock deadline (O-58) passed before the worker arrived: it is not
/// waited for and its job is cancelled.
pub(crate) async fn collect_worker(
    ctx: &Ctx<'_>,
    log: &mut ExperimentLog,
    n: u32,
) -> Result<Option<WorkerResult>, OptimizeError> {
    if let Some(done) = pending(log, n)?.collected.clone() {
        return Ok(Some(done));
    }
    let id = submit_worker(ctx, log, n).await?;
    let deadline = ctx.wall_deadline(log);
    let job = loop {
        let Some(job) = ctx.wait_until(&id, deadline, "experiment running").await? else {
            // O-58: nothing arrived by the deadline: no waiting, and nobody will read its result
            let _ = ctx.backend.cancel(&id).await;
            return Ok(None);
        };
        let Some(class) = capacity_class(&job) else {
            break job;
        };
        let times = pending(log, n)?.backpressure + 1;
        if let Some(w) = log
            .run_state
            .pending_waits
            .iter_mut()
            .find(|w| w.experiment == n)
        {
            w.backpressure = times;
        }
        let delay = backpressure_delay(times);
        let note = format!(
            "exp-{n:03}: the worker's runtime answered at capacity ({class}); queued again in {delay}s (backpressure {times}, not a failure)"
        );
        log.notes.push(note.clone());
        ctx.save(log, "backpressure", |l| {
            l.run_state
                .pending_waits
                .iter()
                .any(|w| w.experiment == n && w.backpressure == times)
        })?;
        ctx.emit(Event::Note(note));
        let until = crate::ctx::now_f64() + delay as f64;
        while crate::ctx::now_f64() < until
            && !ctx.stop.load(std::sync::atomic::Ordering::SeqCst)
            && !ctx.past_deadline(log)
        {
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        }
        if ctx.past_deadline(log) {
            // O-58: the deadline passed during the pause: nothing is queued again
            return Ok(None);
        }
        if ctx.spec.remote_url().is_none()
            && ctx.root.experiment_worktree(n).exists()
            && !ctx.ships()
        {
            // the next attempt starts from the base again, not from a half-done edit
            let worktree = ctx.root.experiment_worktree(n);
            git::revert_paths(&worktree, &git::changed_paths(&worktree, OWN_FILES)?)?;
        }
        ctx.backend
            .retry(&id)
            .await
            .map_err(|e| OptimizeError::Queue(format!("queue the exp-{n:03} worker again: {e}")))?;
    };
    if let Some(reason) = crate::ctx::not_runnable_reason(&job) {
        // An environment fault, not a verdict: nothing is recorded against the hypothesis; the
        // receipt stays so a resumed run starts this job again ([`submit_worker`]).
        return Err(OptimizeError::NotRunnable {
            experiment: n,
            reason,
        });
    }
    let worktree = ctx.root.experiment_worktree(n);
    if ctx.spec.remote_url().is_none() {
        ctx.bring_back_experiment(&job).await?;
    }
    let detail = job.outcome.as_ref().map(|o| &o.detail);
    let message = detail
        .and_then(|d| d.get("final_message"))
        .and_then(|m| m.as_str())
        .unwrap_or("")
        .to_owned();
    let usage: Option<Usage> = detail
        .and_then(|d| d.get("usage"))
        .and_then(|u| serde_json::from_value(u.clone()).ok());
    let refused: Vec<String> = detail
        .and_then(|d| d.get("permission_denials"))
        .and_then(|v| serde_json::from_value::<Vec<PermissionDenial>>(v.clone()).ok())
        .unwrap_or_default()
        .iter()
        .map(PermissionDenial::human)
        .collect();
    let result = if passed(&job) && ctx.spec.remote_url().is_some() {
        // a remote worker's tree is its own: its scope is checked on the result ref (O-25)
        WorkerResult {
            ok: true,
            message,
            changed_files: vec![],
            scope_violations: vec![],
            usage,
            refused,
        }
    } else if passed(&job) {
        let changed = git::changed_paths(&worktree, OWN_FILES)?;
        let (in_scope, outside): (Vec<String>, Vec<String>) = changed
            .into_iter()
            .partition(|p| ctx.spec.scope.is_mutable(p));
        git::revert_paths(&worktree, &outside)?;
        WorkerResult {
            ok: true,
            message,
            changed_files: in_scope,
            scope_violations: outside,
            usage,
            refused,
        }
    } else {
        let why = crate::ctx::failure_reason(&job);
        WorkerResult {
            ok: false,
            message: format!("the worker {}: {why}", job.state),
            changed_files: vec![],
            scope_violations: vec![],
            usage,
            refused,
        }
    };
    // the worker's spend is booked once, in the same verified save that records the collection
    if job.outcome.is_some() {
        log.spend.book(
            "workers",
            &worker_spend(&result),
            ctx.spec.execution.worker_cost_usd,
        );
    }
    let runtime = pending(log, n)?.runtime.clone();
    if let Some(note) = delegation::record(
        &mut log.run_state.delegation,
        &runtime,
        result.ok,
        &ctx.spec.execution.fallback_runtime,
    ) {
        log.notes.push(note.clone());
        ctx.emit(Event::Note(note));
    }
    if let Some(w) = log
        .run_state
        .pending_waits
        .iter_mut()
        .find(|w| w.experiment == n)
    {
        w.collected = Some(result.clone());
    }
    ctx.save(log, "worker collected", |l| {
        l.run_state
            .pending_waits
            .iter()
            .any(|w| w.experiment == n && w.collected.is_some())
    })?;
    Ok(Some(result))
}

/// The spend of a collected worker: one run with the usage its transcript reported.
fn worker_spend(wr: &WorkerResult) -> AgentSpend {
    let mut spend = AgentSpend::default();
    spend.add_run(wr.usage.as_ref());
    spend
}

/// Why an experiment whose worker left no change inside `scope.mutable` is reverted: the writes
/// its runtime refused when there were any (issue 38 item 8), else the plain finding — for the
/// `scripted` runtime saying that it is a stand-in that edits only what its directives say.
pub fn no_change_reason(wr: &WorkerResult, runtime: &str) -> String {
    if wr.refused.is_empty() && runtime == "scripted" {
        return "no change inside scope.mutable remained; treated as non-improving (the worker is \
                the `scripted` stand-in, which edits only what SKILLFORGE_SCRIPTED_EDITS or a \
                `scripted:` line says: set `execution.runtime` to claude, codex or opencode for a \
                model)"
            .into();
    }
    if wr.refused.is_empty() {
        return "no change inside scope.mutable remained; treated as non-improving".into();
    }
    format!(
        "the runtime refused the worker's write(s): {}; nothing inside scope.mutable changed (a write outside the experiment's work dir is refused by design; check the runtime's `[access.edit_workdir]` in runners/agent/runtimes/<runtime>.toml)",
        wr.refused.join("; ")
    )
}

pub(crate) fn skeleton(
    ctx: &Ctx<'_>,
    log: &ExperimentLog,
    n: u32,
    wr: &WorkerResult,
) -> Result<Entry, OptimizeError> {
    let wait = pending(log, n)?;
    let h = log
        .hypothesis_backlog
        .iter()
        .find(|h| h.id == wait.hypothesis_id);
    Ok(Entry {
        experiment: n,
        hypothesis_id: wait.hypothesis_id.clone(),
        description: h.map(|h| h.description.clone()).unwrap_or_default(),
        category: h.map(|h| h.category.clone()).unwrap_or_default(),
        forecast: h.and_then(|h| h.opportunity.clone()),
        branch: ctx.spec.experiment_branch(n),
        base_sha: wait.base_sha.clone(),
        outcome: Outcome::Measured,
        measured: Measured::Ok,
        decision: None,
        changed_files: wr.changed_files.clone(),
        scope_violations: wr.scope_violations.clone(),
        comparisons: vec![],
        worst_cases: vec![],
        judge: None,
        learnings: if wr.scope_violations.is_empty() {
            vec![]
        } else {
            vec![format!(
                "out-of-scope changes reverted, never kept: {}",
                wr.scope_violations.join(", ")
            )]
        },
        cost: Default::default(),
        regressions: vec![],
        worker_message: wr.message.clone(),
        spend: worker_spend(wr),
    })
}

pub(crate) fn terminal(
    ctx: &Ctx<'_>,
    log: &mut ExperimentLog,
    mut entry: Entry,
    outcome: Outcome,
    measured: Measured,
    learning: String,
) -> Result<(), OptimizeError> {
    entry.outcome = outcome;
    entry.measured = measured;
    entry.learnings.push(learning);
    let n = entry.experiment;
    log.upsert(entry);
    ctx.save(log, "CP-3", |l| {
        l.entry(n).is_some_and(|e| e.outcome == outcome)
    })?;
    ctx.emit(Event::Outcome {
        experiment: n,
        outcome: outcome.label(),
        primary: None,
        preliminary: false,
    });
    Ok(())
}

/// Collects experiment `n` through its selection decision (loop.md 3.3): re-entrant, so a
/// resumed run continues where the log and the marker say it stopped.
///
/// # Errors
/// As the steps; a failed measurement is an outcome, not an error.
pub async fn collect(ctx: &Ctx<'_>, log: &mut ExperimentLog, n: u32) -> Result<(), OptimizeError> {
    if let Some(url) = ctx.spec.remote_url() {
        return super::remote_exp::collect(ctx, log, n, url).await;
    }
    let worktree = ctx.root.experiment_worktree(n);
    let mut entry = match log.entry(n) {
        Some(e) => e.clone(),
        None => {
            let Some(wr) = collect_worker(ctx, log, n).await? else {
                return not_arrived(ctx, log, n);
            };
            let mut entry = skeleton(ctx, log, n, &wr)?;
            if !wr.ok {
                return terminal(
                    ctx,
                    log,
                    entry,
                    Outcome::Error,
                    Measured::Error(wr.message.clone()),
                    wr.message,
                );
            }
            let deps: Vec<String> = wr
                .message
                .lines()
                .filter_map(|l| l.trim().strip_prefix(NEEDS_DEPENDENCY))
                .flat_map(|d| d.split(',').map(|s| s.trim().to_owned()))
                .filter(|d| !d.is_empty())
                .collect();
            if !deps.is_empty() {
                // O-02: nothing the worker left is kept; the hypothesis waits for approval
                let all = git::changed_paths(&worktree, OWN_FILES)?;
                git::revert_paths(&worktree, &all)?;
                if let Some(h) = log
                    .hypothesis_backlog
                    .iter_mut()
                    .find(|h| h.id == entry.hypothesis_id)
                {
                    for d in &deps {
                        if !h.required_deps.contains(d) {
                            h.required_deps.push(d.clone());
                        }
                    }
                }
                return terminal(
                    ctx,
                    log,
                    entry,
                    Outcome::DeferredNeedsApproval,
                    Measured::Ok,
                    format!("needs unapproved dependencies: {}", deps.join(", ")),
                );
            }
            if wr.changed_files.is_empty() {
                return terminal(
                    ctx,
                    log,
                    entry,
                    Outcome::Reverted,
                    Measured::Ok,
                    no_change_reason(&wr, &ctx.spec.execution.runtime),
                );
            }
            if ctx.past_deadline(log) {
                return arrived_unmeasured(ctx, log, entry);
            }
            if ctx.spec.measurement.stability.mode == crate::spec::StabilityMode::Ladder
                && let Some(smoke) = &ctx.spec.measurement.smoke_command
            {
                let spec = ctx
                    .checkout_job(
                        "measurement",
                        smoke,
                        &worktree,
                        Default::default(),
                        ctx.key(&format!("exp-{n:03}:smoke")),
                    )
                    .await?;
                let job = ctx.run_one(spec, "smoke check").await?;
                if !passed(&job) {
                    let label = job
                        .outcome
                        .as_ref()
                        .map_or_else(|| job.state.to_string(), |o| o.exit.label().to_owned());
                    return terminal(
                        ctx,
                        log,
                        entry,
                        Outcome::Degenerate,
                        Measured::Ok,
                        format!(
                            "smoke check `{smoke}` failed ({label}); measurement.command not run"
                        ),
                    );
                }
            }
            let base_tree = git::git(
                &ctx.repo,
                &["rev-parse", &format!("{}^{{tree}}", entry.base_sha)],
            )?;
            let candidate_identity = git::content_identity(&worktree, OWN_FILES)?;
            entry.comparisons.push(Comparison {
                kind: ComparisonKind::Standalone,
                workload: ctx.spec.measurement.command.clone(),
                reference: side(format!("tree:{base_tree}")),
                candidate: side(candidate_identity),
                machine: ctx.machine.clone(),
                measured_by: "orchestrator".into(),
                decision: None,
            });
            entry
        }
    };
    if entry.outcome.is_terminal() || ctx.past_deadline(log) {
        // O-58: an entry measured in part keeps its samples; no further sample is taken
        return Ok(());
    }
    let reference_dir = ctx.root.reference_worktree(&entry.base_sha);
    git::worktree_detached(&ctx.repo, &reference_dir, &entry.base_sha)?;
    ladder(
        ctx,
        log,
        &mut entry,
        ComparisonKind::Standalone,
        &reference_dir,
        &worktree,
        "sel",
    )
    .await?;
    Ok(())
}

/// The learning of an experiment whose worker had not returned when the wall-clock deadline
/// passed (O-58).
pub const NOT_ARRIVED: &str = "the worker had not returned when stopping.max_wall_hours passed: not waited for (its job is cancelled), not measured, not merged";

/// The learning of an experiment whose worker returned but which was not measured because the
/// wall-clock deadline had passed (O-58).
pub const ARRIVED_UNMEASURED: &str = "the worker returned but stopping.max_wall_hours had passed: its change is persisted, not measured, not merged";

/// O-58: experiment `n`'s worker had not arrived by the deadline: it is recorded as `timeout`
/// (never measured, never eligible) so the report accounts for every dispatched experiment.
pub(crate) fn not_arrived(
    ctx: &Ctx<'_>,
    log: &mut ExperimentLog,
    n: u32,
) -> Result<(), OptimizeError> {
    let wr = WorkerResult {
        ok: false,
        message: "not returned by the wall-clock deadline".into(),
        changed_files: vec![],
        scope_violations: vec![],
        usage: None,
        refused: vec![],
    };
    let mut entry = skeleton(ctx, log, n, &wr)?;
    // no run was collected: nothing to book
    entry.spend = AgentSpend::default();
    terminal(
        ctx,
        log,
        entry,
        Outcome::Timeout,
        Measured::Timeout,
        NOT_ARRIVED.into(),
    )
}

/// O-58: the worker of `entry` arrived but the deadline has passed: its in-scope change is
/// persisted as `<state-root>/patches/exp-NNN.patch` (the worktree is removed at wrap-up) and the
/// entry is `inconclusive`, unmeasured.
fn arrived_unmeasured(
    ctx: &Ctx<'_>,
    log: &mut ExperimentLog,
    mut entry: Entry,
) -> Result<(), OptimizeError> {
    let n = entry.experiment;
    let worktree = ctx.root.experiment_worktree(n);
    let tree = git::content_identity(&worktree, OWN_FILES)?;
    let patch = git::git(
        &ctx.repo,
        &[
            "diff",
            "--binary",
            &entry.base_sha,
            tree.trim_start_matches("tree:"),
        ],
    )?;
    let path = ctx
        .root
        .root
        .join("patches")
        .join(format!("exp-{n:03}.patch"));
    skillforge_stage::fs::write_atomic(&path, format!("{patch}\n"))?;
    entry
        .learnings
        .push(format!("{ARRIVED_UNMEASURED} (`{}`)", path.display()));
    terminal(
        ctx,
        log,
        entry,
        Outcome::Inconclusive,
        Measured::Ok,
        "no sample was taken".into(),
    )
}

/// Whether `c` is the orchestrator's pairing of `kind` (a remote worker's own pairing is never
/// sampled further or re-decided here; its confirmation is a separate pairing, O-46).
pub(crate) fn ours(c: &Comparison, kind: ComparisonKind) -> bool {
    c.kind == kind && c.measured_by != super::remote_exp::MEASURED_BY_WORKER
}

/// Samples pairs for the comparison of `kind` until the decision asks for nothing more than the
/// holdout (or is terminal), persisting the marker and then the entry after every pair.
pub(crate) async fn ladder(
    ctx: &Ctx<'_>,
    log: &mut ExperimentLog,
    entry: &mut Entry,
    kind: ComparisonKind,
    reference_dir: &Path,
    candidate_dir: &Path,
    tag: &str,
) -> Result<DecideResult, OptimizeError> {
    let cfg = DecideConfig::from_spec(&ctx.spec);
    let n = entry.experiment;
    loop {
        let comp = entry
            .comparisons
            .iter()
            .find(|c| ours(c, kind))
            .ok_or_else(|| {
                OptimizeError::Invalid(format!("exp-{n:03} has no {kind:?} comparison"))
            })?;
        if let Some(d) = &comp.decision
            && !matches!(
                d.next_measurement,
                NextMeasurement::AddSample | NextMeasurement::Confirm
            )
        {
            return Ok(d.clone());
        }
        if ctx.past_deadline(log)
            && let Some(d) = &comp.decision
        {
            // O-58: no sample starts after the deadline; the decision so far stands
            return Ok(d.clone());
        }
        let i = comp.candidate.snapshot.n_samples();
        let (r, c) = pair(
            ctx,
            &ctx.spec.measurement.command,
            &format!("exp-{n:03}:{tag}:{i}"),
            reference_dir,
            candidate_dir,
        )
        .await?;
        let seed = judging::judges(ctx).map_or(0, |j| j.sample_seed);
        let judged = judging::judge_pair(
            ctx,
            r,
            c,
            &format!("exp-{n:03}:{tag}:{i}"),
            seed,
            &Default::default(),
        )
        .await?;
        record_judges(ctx, log, entry, kind, &judged);
        let worst = judged.worst.clone();
        let measured = apply_pair(ctx, entry, kind, judged.reference, judged.candidate);
        if !worst.is_empty() {
            let comp = entry
                .comparisons
                .iter_mut()
                .find(|c| ours(c, kind))
                .expect("comparison exists");
            comp.candidate.snapshot.worst_cases = worst.clone();
            if kind == ComparisonKind::Standalone {
                entry.worst_cases = worst;
            }
        }
        let comp = entry
            .comparisons
            .iter()
            .find(|c| ours(c, kind))
            .expect("found above");
        if kind == ComparisonKind::Standalone {
            write_marker(
                candidate_dir,
                &Marker {
                    experiment: n,
                    hypothesis_id: entry.hypothesis_id.clone(),
                    base_sha: entry.base_sha.clone(),
                    measured: measured.clone(),
                    reference: comp.reference.clone(),
                    candidate: comp.candidate.clone(),
                    changed_files: entry.changed_files.clone(),
                    scope_violations: entry.scope_violations.clone(),
                    worst_cases: entry.worst_cases.clone(),
                    worker_message: entry.worker_message.clone(),
                },
            )?;
        }
        let d = decide::decide(
            &cfg,
            DecideInput {
                measured: &measured,
                reference: &comp.reference.snapshot,
                candidate: &comp.candidate.snapshot,
                holdout: None,
            },
        );
        let primary = (
            comp.reference.snapshot.aggregate(&cfg.primary),
            comp.candidate.snapshot.aggregate(&cfg.primary),
        );
        entry
            .comparisons
            .iter_mut()
            .find(|c| ours(c, kind))
            .expect("found above")
            .decision = Some(d.clone());
        if kind == ComparisonKind::Standalone {
            entry.measured = measured;
            entry.decision = Some(d.clone());
            entry.outcome = outcome_of(&d);
        }
        let samples = i + 1;
        log.upsert(entry.clone());
        ctx.save(log, "CP-3", |l| {
            l.entry(n)
                .and_then(|e| e.comparisons.iter().find(|c| ours(c, kind)))
                .is_some_and(|c| {
                    c.candidate.snapshot.n_samples()
                        >= samples.min(c.candidate.snapshot.n_samples())
                        && c.decision.is_some()
                })
        })?;
        ctx.emit(Event::Outcome {
            experiment: n,
            outcome: if kind == ComparisonKind::Standalone {
                entry.outcome.label()
            } else {
                format!("{} (integrated)", d.decision.label())
            },
            primary: primary.0.zip(primary.1),
            preliminary: d.next_measurement != NextMeasurement::None
                || d.decision == Decision::Keep,
        });
    }
}

/// Books a pair's judge calls (spend, estimated from `cost_per_batch_usd`), keeps the
/// selection sample's judged items on the entry (`standalone`: the selection pairing; never a
/// holdout's or a combination's, O-39) and reports a judge that could not run (O-31).
pub(crate) fn record_judges(
    ctx: &Ctx<'_>,
    log: &mut ExperimentLog,
    entry: &mut Entry,
    kind: ComparisonKind,
    judged: &judging::JudgedPair,
) {
    book_judges(ctx, log, entry.experiment, judged);
    entry.spend.merge(&judged.spend);
    if kind != ComparisonKind::Standalone {
        return;
    }
    let before = entry.judge.as_ref().map_or(0, |j| j.calls);
    if let Some(record) = &judged.record {
        let mut record = record.clone();
        record.calls = before + judged.calls;
        // the log keeps spend on the entry; the record's is only the carrier (never written)
        record.spend = AgentSpend::default();
        entry.judge = Some(record);
    } else if judged.calls > 0 {
        entry.judge.get_or_insert_with(Default::default).calls = before + judged.calls;
    }
}

/// Books the judge runs of a pair (any kind): their reported tokens and cost, a run that
/// reported no cost at `metric.judge.cost_per_batch_usd` (estimated); and reports a blocker.
pub(crate) fn book_judges(
    ctx: &Ctx<'_>,
    log: &mut ExperimentLog,
    n: u32,
    judged: &judging::JudgedPair,
) {
    let estimate = ctx
        .spec
        .metric
        .judge
        .as_ref()
        .map_or(0.0, |j| j.cost_per_batch_usd);
    log.spend.book("judges", &judged.spend, estimate);
    if let Some(reason) = &judged.blocker {
        let note = format!(
            "exp-{n:03}: {}: {reason}; the experiment is error (unmeasured, never eligible) and no score was produced inline",
            judging::UNDISPATCHABLE
        );
        log.notes.push(note.clone());
        ctx.emit(Event::Note(note));
    }
}

/// One paired sample: the reference, then the candidate (whose censor bound, O-28, depends on
/// the reference of the same pair).
pub(crate) async fn pair(
    ctx: &Ctx<'_>,
    command: &str,
    key: &str,
    reference_dir: &Path,
    candidate_dir: &Path,
) -> Result<(Sample, Sample), OptimizeError> {
    let r = ctx
        .sample(command, reference_dir, ctx.key(&format!("{key}:ref")))
        .await?;
    // O-28: the candidate may censor itself only when elapsed time alone proves it hopeless
    let env = match &r {
        Sample::Ok(out) => measure::censor_after(&ctx.spec, &out.metrics)
            .map(|s| (measure::CENSOR_ENV.to_owned(), s.to_string()))
            .into_iter()
            .collect(),
        Sample::Failed(_) => Default::default(),
    };
    let c = ctx
        .sample_with(command, candidate_dir, ctx.key(&format!("{key}:cand")), env)
        .await?;
    Ok((r, c))
}

/// Adds one pair to the comparison of `kind`; returns how the pair's measurement ended.
fn apply_pair(
    ctx: &Ctx<'_>,
    entry: &mut Entry,
    kind: ComparisonKind,
    r: Sample,
    c: Sample,
) -> Measured {
    let gates = &ctx.spec.metric.degenerate_gates;
    let direction = ctx.spec.metric.primary.direction;
    let mut worst = None;
    let mut cost = None;
    let comp = entry
        .comparisons
        .iter_mut()
        .find(|x| ours(x, kind))
        .expect("comparison exists");
    let measured = match (r, c) {
        (Sample::Failed(m), _) => Measured::Error(format!("reference measurement failed: {m:?}")),
        (Sample::Ok(ro), Sample::Failed(m)) => {
            comp.reference.snapshot.push_sample(&ro.metrics);
            m
        }
        (Sample::Ok(ro), Sample::Ok(co)) => {
            comp.reference.snapshot.push_sample(&ro.metrics);
            comp.candidate.snapshot.push_sample(&co.metrics);
            for (gate, ok) in crate::gates::evaluate(gates, &co.metrics) {
                let slot = comp.candidate.snapshot.gates.entry(gate).or_insert(true);
                *slot &= ok;
            }
            comp.candidate.snapshot.diagnostics = co.diagnostics.clone();
            worst = Some(measure::worst_cases(&co.cases, direction));
            cost = Some(co.diagnostics);
            Measured::Ok
        }
    };
    if let Some(w) = worst {
        comp.candidate.snapshot.worst_cases = w.clone();
        if kind == ComparisonKind::Standalone {
            entry.worst_cases = w;
        }
    }
    if let Some(cost) = cost {
        entry.cost.extend(cost);
    }
    measured
}
