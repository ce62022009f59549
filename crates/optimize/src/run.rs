//! The loop's control: `init` (baseline, source digest, backlog at CP-2), ticks (select,
//! dispatch, collect, evaluate, CP-4, stopping), resume, and manual stop (seed: optimize-loop,
//! loop.md Phases 2–3).
//!
//! A tick that was interrupted resumes the same batch from `run_state.pending_waits` with `tick`
//! unchanged and no new selection (O-62); the experiment log is re-read from disk at every
//! checkpoint (O-53).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Instant;

use skillforge_stage::fs::write_atomic;

use super::backlog::{BatchRequest, DepStatus, Selection, Spend, assign_ids, select_batch};
use super::ctx::{Ctx, Event};
use super::digest::{hypotheses_from_themes, themes};
use super::git::{self, rev_parse};
use super::log::{self, ExperimentLog, Outcome, RunState};
use super::measure::{self, Sample};
use super::snapshot::Snapshot;
use super::spec::{Backend, Spec, StabilityMode};
use super::state::{RunFile, StateRoot, recover_markers};
use super::steps::judging::Judged;
use super::stopping::{self, Progress, StopReason};
use super::{OptimizeError, decide};

/// Unix seconds now.
pub fn now_secs() -> i64 {
    chrono::Utc::now().timestamp()
}

/// The repository holding `spec_path`.
///
/// # Errors
/// [`OptimizeError::Invalid`] when the spec is not inside a git repository.
pub fn repo_of(spec_path: &Path) -> Result<PathBuf, OptimizeError> {
    let dir = spec_path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    git::git(dir, &["rev-parse", "--show-toplevel"])
        .map(PathBuf::from)
        .map_err(|e| {
            OptimizeError::Invalid(format!(
                "spec `{}` is not inside a git repository ({e}): keep the spec in the project it optimizes, or \
                 give that project with --repo DIR",
                spec_path.display()
            ))
        })
}

/// What `optimize init` needs of the project repository before anything is written: a
/// directory, inside a git work tree, with a commit for the optimization branch to start from
/// (unless that branch exists already). Returns notes for the person: uncommitted changes to
/// tracked files (the baseline is measured at HEAD, without them), and each `scope` path that is
/// not in HEAD's tree (a typo there protects or frees nothing).
///
/// # Errors
/// [`OptimizeError::Invalid`] saying what is wrong and what to do: a missing directory, a
/// directory that is not a git repository, a repository without a commit.
pub fn check_repo(repo: &Path, spec: &Spec) -> Result<Vec<String>, OptimizeError> {
    if !repo.is_dir() {
        return Err(OptimizeError::Invalid(format!(
            "the repository directory `{}` does not exist: give the project's directory with --repo DIR",
            repo.display()
        )));
    }
    if git::git(repo, &["rev-parse", "--show-toplevel"]).is_err() {
        return Err(OptimizeError::Invalid(format!(
            "`{}` is not a git repository: the optimize loop works on git branches; run `git init` there and \
             commit your project (e.g. `git add -A && git commit -m initial`), or give the project with --repo DIR",
            repo.display()
        )));
    }
    let branch = spec.branch();
    if !git::branch_exists(repo, &branch) && rev_parse(repo, "HEAD").is_err() {
        return Err(OptimizeError::Invalid(format!(
            "the repository `{}` has no commit yet: the optimization branch `{branch}` starts from HEAD; commit your \
             project first (e.g. `git add -A && git commit -m initial`), then run `optimize init` again",
            repo.display()
        )));
    }
    let mut notes = Vec::new();
    let dirty = git::git(repo, &["status", "--porcelain", "--untracked-files=no"])
        .map(|s| !s.trim().is_empty())
        .unwrap_or(false);
    if dirty {
        notes.push(format!(
            "note: `{}` has uncommitted changes; the baseline is measured at the last commit, without them \
             (commit them first to include them)",
            repo.display()
        ));
    }
    let start = if git::branch_exists(repo, &branch) {
        branch.as_str()
    } else {
        "HEAD"
    };
    for (key, list, what) in [
        (
            "scope.mutable",
            &spec.scope.mutable,
            "experiments may create it; if it is a typo, the code it meant cannot change",
        ),
        (
            "scope.immutable",
            &spec.scope.immutable,
            "if it is a typo, the file it meant is not protected",
        ),
    ] {
        for (idx, path) in list.iter().enumerate() {
            let path = path.trim_end_matches('/');
            if path.is_empty() || path == "." {
                continue;
            }
            if git::git(repo, &["cat-file", "-e", &format!("{start}:{path}")]).is_err() {
                notes.push(format!(
                    "note: `{key}[{idx}]` `{path}` is not in the repository at {start} ({what})"
                ));
            }
        }
    }
    Ok(notes)
}

/// Reads `run.yaml`.
///
/// # Errors
/// [`OptimizeError::Invalid`] when the run was never initialised.
pub fn read_run_file(root: &StateRoot) -> Result<RunFile, OptimizeError> {
    let path = root.run_file();
    let text = std::fs::read_to_string(&path).map_err(|_| {
        OptimizeError::Invalid(format!(
            "no optimize run at `{}` (run `skillforge optimize init --spec F` first)",
            root.root.display()
        ))
    })?;
    super::check_yaml(&text, &format!("`{}`", path.display()))?;
    serde_norway::from_str(&text)
        .map_err(|e| OptimizeError::Invalid(format!("`{}`: {e}", path.display())))
}

/// `optimize init`: the optimization branch, the baseline measurement with its worst cases, the
/// source digest and the backlog at CP-2 (O-12). Refuses a run that already exists.
///
/// # Errors
/// [`OptimizeError::Invalid`] for an existing run, an invalid spec or a repository without a
/// commit; [`OptimizeError::Env`]
/// when the baseline cannot be measured (nothing is left behind then).
pub async fn init(
    ctx: &Ctx<'_>,
    spec_path: &Path,
    spec_text: &str,
    created_at: i64,
) -> Result<ExperimentLog, OptimizeError> {
    if log::log_path(&ctx.root.root).exists() {
        return Err(OptimizeError::Invalid(format!(
            "an optimize run for `{}` already exists at `{}` (use `skillforge optimize resume`)",
            ctx.spec.name,
            ctx.root.root.display()
        )));
    }
    let spec = &ctx.spec;
    let branch = spec.branch();
    let created_branch = !git::branch_exists(&ctx.repo, &branch);
    check_repo(&ctx.repo, spec)?;
    if created_branch {
        git::git(&ctx.repo, &["branch", &branch, "HEAD"])?;
    }
    let result = init_inner(ctx, spec_path, spec_text, created_at).await;
    if result.is_err() {
        let _ = git::remove_worktree(&ctx.repo, &ctx.root.integration_worktree());
        if let Ok(sha) = rev_parse(&ctx.repo, &branch) {
            let _ = git::remove_worktree(&ctx.repo, &ctx.root.reference_worktree(&sha));
        }
        if created_branch {
            let _ = git::git(&ctx.repo, &["branch", "-D", &branch]);
        }
        let _ = std::fs::remove_dir_all(&ctx.root.root);
    }
    result
}

async fn init_inner(
    ctx: &Ctx<'_>,
    spec_path: &Path,
    spec_text: &str,
    created_at: i64,
) -> Result<ExperimentLog, OptimizeError> {
    let spec = &ctx.spec;
    std::fs::create_dir_all(&ctx.root.root)
        .map_err(|e| OptimizeError::Env(format!("create `{}`: {e}", ctx.root.root.display())))?;
    let base = rev_parse(&ctx.repo, &spec.branch())?;
    git::worktree_for_branch(
        &ctx.repo,
        &ctx.root.integration_worktree(),
        &spec.branch(),
        &base,
    )?;
    let n = match spec.measurement.stability.mode {
        StabilityMode::Repeat => spec.measurement.repeat_count() as usize,
        StabilityMode::Stable | StabilityMode::Ladder | StabilityMode::Pace => 1,
    };
    let mut baseline = Snapshot::default();
    // the baseline's judge runs are booked like every other (issue 31 item 7)
    let mut baseline_judges = skillforge_runner_agent::Spend::default();
    for i in 0..n {
        match ctx
            .sample(
                &spec.measurement.command,
                &ctx.root.integration_worktree(),
                ctx.key(&format!("baseline:{i}")),
            )
            .await?
        {
            Sample::Ok(mut out) => {
                let seed = super::steps::judging::judges(ctx).map_or(0, |j| j.sample_seed);
                let worst = match super::steps::judging::judge_output(
                    ctx,
                    &mut out,
                    seed,
                    &BTreeSet::new(),
                    &format!("baseline:{i}"),
                )
                .await?
                {
                    Judged::Scored { record, worst } => {
                        baseline_judges.merge(&record.spend);
                        worst
                    }
                    Judged::Undispatchable(reason) => {
                        return Err(OptimizeError::Env(format!(
                            "the baseline cannot be judged: {}: {reason} (no score is produced inline)",
                            super::steps::judging::UNDISPATCHABLE
                        )));
                    }
                };
                baseline.push_sample(&out.metrics);
                baseline.gates =
                    super::gates::evaluate(&spec.metric.degenerate_gates, &out.metrics);
                baseline.worst_cases = if worst.is_empty() {
                    measure::worst_cases(&out.cases, spec.metric.primary.direction)
                } else {
                    worst
                };
                baseline.diagnostics = out.diagnostics;
            }
            Sample::Failed(m) => {
                let why = match m {
                    super::decide::Measured::Error(reason) => reason,
                    super::decide::Measured::Timeout => format!(
                        "it ran past measurement.timeout_seconds ({} s)",
                        spec.measurement.timeout_secs()
                    ),
                    super::decide::Measured::Censored => {
                        "it exited 125, the censor marker (no sample)".to_owned()
                    }
                    super::decide::Measured::Ok => "no sample".to_owned(),
                };
                return Err(OptimizeError::Env(format!(
                    "baseline measurement of `{}` failed at the last commit: {why}; run the command \
                     in a clean checkout of it to see why (a file it needs may be uncommitted)",
                    spec.measurement.command
                )));
            }
        }
    }
    if let Some(name) = spec
        .objectives()
        .iter()
        .filter(|o| o.required)
        .map(|o| o.name.clone())
        .find(|n| baseline.aggregate(n).is_none())
    {
        return Err(OptimizeError::Invalid(format!(
            "the measurement does not print required objective `{name}` (metrics: {})",
            baseline
                .metrics
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    ctx.emit(Event::Baseline {
        primary: baseline.aggregate(&spec.metric.primary.name),
    });
    let noise_floor = match spec.measurement.noise_floor_samples {
        Some(n) => Some(measure_noise_floor(ctx, n).await?),
        None => None,
    };
    let mut backlog = spec.hypotheses.clone();
    let mut next_id = 0;
    assign_ids(&mut backlog, &mut next_id);
    let approved: BTreeSet<&String> = spec.dependencies.approved.iter().collect();
    for h in &mut backlog {
        if h.required_deps.iter().any(|d| !approved.contains(d)) {
            h.dep_status = DepStatus::NeedsApproval;
        }
        h.source.get_or_insert_with(|| "spec".into());
    }
    let mut notes = Vec::new();
    if spec.execution.backend == Backend::Remote && spec.remote_url().is_none() {
        // O-22: no detached-worker capability is wired into this control plane yet
        notes.push("execution.backend remote: no detached-worker capability on this control plane (no execution.remote); using the worktree backend for the whole run".to_owned());
    }
    let mut spend = log::SpendTotals::default();
    spend.book(
        "judges",
        &baseline_judges,
        spec.metric
            .judge
            .as_ref()
            .map_or(0.0, |j| j.cost_per_batch_usd),
    );
    let log = ExperimentLog {
        spec: spec.name.clone(),
        baseline_sha: base.clone(),
        best: log::Best {
            experiment: None,
            sha: base,
            metrics: baseline.clone(),
            worst_cases: baseline.worst_cases.clone(),
        },
        baseline,
        spend,
        hypothesis_backlog: backlog,
        experiments: vec![],
        run_state: RunState {
            status: "initialised".into(),
            hypotheses_created: next_id,
            ..RunState::default()
        },
        notes,
        noise_floor,
    };
    write_atomic(
        &ctx.root.source_digest(),
        source_digest(spec, &ctx.root.integration_worktree()),
    )?;
    ctx.save(&log, "CP-2", log::cp2_ok)?;
    let run = RunFile {
        repo: ctx.repo.clone(),
        spec_path: spec_path.to_path_buf(),
        spec_text: spec_text.to_owned(),
        created_at,
    };
    write_atomic(
        &ctx.root.run_file(),
        &serde_norway::to_string(&run).map_err(|e| OptimizeError::Invalid(e.to_string()))?,
    )?;
    Ok(log)
}

/// Measures the unchanged baseline `n` more times for the noise floor of the primary metric
/// ([`super::noise`], `measurement.noise_floor_samples`).
///
/// # Errors
/// [`OptimizeError::Env`] when a measurement fails or does not print the primary metric: a noise
/// floor is measured in full or not at all.
async fn measure_noise_floor(
    ctx: &Ctx<'_>,
    n: u32,
) -> Result<super::noise::NoiseFloor, OptimizeError> {
    let primary = &ctx.spec.metric.primary.name;
    let mut samples = Vec::new();
    for i in 0..n {
        match ctx
            .sample(
                &ctx.spec.measurement.command,
                &ctx.root.integration_worktree(),
                ctx.key(&format!("noise:{i}")),
            )
            .await?
        {
            Sample::Ok(out) => match out.metrics.get(primary) {
                Some(v) => samples.push(*v),
                None => {
                    return Err(OptimizeError::Env(format!(
                        "noise floor measurement {} of {n} printed no `{primary}`",
                        i + 1
                    )));
                }
            },
            Sample::Failed(m) => {
                return Err(OptimizeError::Env(format!(
                    "noise floor measurement {} of {n} of `{}` failed: {m:?}",
                    i + 1,
                    ctx.spec.measurement.command
                )));
            }
        }
    }
    let floor = super::noise::NoiseFloor::from_samples(primary, samples).ok_or_else(|| {
        OptimizeError::Invalid("measurement.noise_floor_samples must be at least 2".into())
    })?;
    ctx.emit(Event::Note(floor.human()));
    Ok(floor)
}

/// The source digest (written once at init): the target, the harness, and the mutable files
/// with their sizes.
fn source_digest(spec: &Spec, checkout: &Path) -> String {
    let mut s = format!(
        "Target: {}\nMeasurement: `{}` (immutable)\n\nMutable files:\n",
        spec.description.trim(),
        spec.measurement.command
    );
    let files = git::git(checkout, &["ls-files"]).unwrap_or_default();
    for f in files.lines().filter(|f| spec.scope.is_mutable(f)) {
        let lines = std::fs::read_to_string(checkout.join(f))
            .map(|t| t.lines().count())
            .unwrap_or(0);
        s.push_str(&format!("- {f} ({lines} lines)\n"));
    }
    if !spec.scope.immutable.is_empty() {
        s.push_str(&format!(
            "\nImmutable (harness and evaluation data): {}\n",
            spec.scope.immutable.join(", ")
        ));
    }
    s
}

/// How a run ended (or paused).
#[derive(Debug, Clone, PartialEq)]
pub struct RunSummary {
    /// The stop reason (`None` never happens at return; kept optional for status output).
    pub stop_reason: Option<StopReason>,
    /// Experiments recorded.
    pub experiments: usize,
    /// Kept experiments (winners and runner-ups).
    pub kept: Vec<u32>,
}

fn summary(log: &ExperimentLog) -> RunSummary {
    RunSummary {
        stop_reason: log.run_state.stop_reason.clone(),
        experiments: log.experiments.len(),
        kept: log
            .experiments
            .iter()
            .filter(|e| matches!(e.outcome, Outcome::Kept | Outcome::RunnerUpKept))
            .map(|e| e.experiment)
            .collect(),
    }
}

/// Counters the stopping criteria read, from the log (resolutions 16: deferred never counts).
pub fn progress(log: &ExperimentLog, spec: &Spec, now: i64) -> Progress {
    let counted: Vec<_> = log
        .experiments
        .iter()
        .filter(|e| e.outcome != Outcome::DeferredNeedsApproval)
        .collect();
    let run = counted.len() as u32
        + log
            .run_state
            .pending_waits
            .iter()
            .filter(|w| log.entry(w.experiment).is_none())
            .count() as u32;
    let mut plateau = 0;
    for e in &counted {
        if matches!(e.outcome, Outcome::Kept | Outcome::RunnerUpKept) {
            plateau = 0;
        } else {
            plateau += 1;
        }
    }
    let current = if log.best.metrics.metrics.is_empty() {
        &log.baseline
    } else {
        &log.best.metrics
    };
    Progress {
        experiments_run: run,
        active_seconds: log.run_state.active_seconds,
        wall_seconds: log
            .run_state
            .phase3_started_at
            .map_or(0.0, |t| (now - t).max(0) as f64),
        consecutive_non_improving: plateau,
        best_meets_targets: log.best.experiment.is_some()
            && decide::target_reached(&spec.objectives(), current),
    }
}

/// The note to print when `optimize run`/`resume` starts and the spec's Codex workers will run
/// on the fallback runtime instead ([`super::delegation::startup_note`]); the dispatch logs it
/// per experiment as well.
///
/// # Errors
/// As [`log::read`].
pub fn delegation_note(ctx: &Ctx<'_>) -> Result<Option<String>, OptimizeError> {
    let log = log::read(&ctx.root.root)?;
    let exec = &ctx.spec.execution;
    Ok(super::delegation::startup_note(
        &exec.runtime,
        &exec.fallback_runtime,
        super::delegation::Host::detect(&ctx.repo),
        &log.run_state.delegation,
    ))
}

/// `optimize run` / `resume`: recovers markers and pending waits, then runs ticks until a
/// stopping criterion holds; writes the report at the end.
///
/// # Errors
/// As the steps: [`OptimizeError::Env`] for unverifiable writes, [`OptimizeError::Git`],
/// [`OptimizeError::Queue`].
pub async fn run(ctx: &Ctx<'_>) -> Result<RunSummary, OptimizeError> {
    let mut log = log::read(&ctx.root.root)?;
    if log.run_state.stop_reason == Some(StopReason::ManualStop) {
        // an operator's stop pauses the run; running it again continues where it stopped
        log.run_state.stop_reason = None;
        log.notes.push("continued after a manual stop".into());
    }
    if let Some(StopReason::NotRunnable(why)) = &log.run_state.stop_reason {
        // an environment fault paused the run; running it again (after the fix) continues it
        log.notes.push(format!(
            "continued after a stop on a job that could not run ({why})"
        ));
        log.run_state.stop_reason = None;
    }
    if log.run_state.stop_reason.is_some() {
        super::report::write(ctx, &log)?;
        return Ok(summary(&log));
    }
    let recovered = recover_markers(&ctx.root, &mut log, &ctx.spec, &ctx.machine)?;
    for n in &recovered {
        ctx.emit(Event::Note(format!(
            "recovered exp-{n:03} from its result.yaml marker"
        )));
    }
    log.run_state.phase3_started_at.get_or_insert_with(now_secs);
    log.run_state.status = "running".into();
    ctx.save(&log, "resume", |_| true)?;
    loop {
        let started = Instant::now();
        let batch: Vec<u32> = if log.run_state.pending_waits.is_empty() {
            if let Some(reason) =
                stopping::check(&ctx.spec.stopping, &progress(&log, &ctx.spec, now_secs()))
            {
                return finish(ctx, log, reason);
            }
            if ctx.stop.load(Ordering::SeqCst) {
                return finish(ctx, log, StopReason::ManualStop);
            }
            if let Some(reason) = stopping::spend_check(
                &ctx.spec.stopping,
                ctx.spec
                    .metric
                    .judge
                    .as_ref()
                    .and_then(|j| j.max_total_cost_usd),
                &log.spend,
            ) {
                return finish(ctx, log, reason);
            }
            match select(ctx, &log) {
                Selection::Locate(ids) => {
                    if let super::steps::locate::Located::Blocked(reason) =
                        super::steps::locate::locate(ctx, &mut log, &ids).await?
                    {
                        return finish(ctx, log, StopReason::Blocked(reason));
                    }
                    continue;
                }
                Selection::SpendCap => {
                    return finish(ctx, log, StopReason::SpendCap(spend_cap_name(&ctx.spec)));
                }
                Selection::NothingRunnable => return finish(ctx, log, StopReason::NothingRunnable),
                Selection::Batch(ids) => {
                    ctx.emit(Event::Tick(log.run_state.tick + 1));
                    super::steps::experiment::dispatch_batch(ctx, &mut log, &ids).await?
                }
            }
        } else {
            let pending: Vec<u32> = log
                .run_state
                .pending_waits
                .iter()
                .map(|w| w.experiment)
                .collect();
            ctx.emit(Event::Note(format!(
                "resuming tick {} at its waiting step: {}",
                log.run_state.tick + 1,
                pending
                    .iter()
                    .map(|n| format!("exp-{n:03}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
            if !ctx.past_deadline(&log) {
                // O-58: after the deadline nothing is (re)submitted; what arrived is collected
                for n in &pending {
                    super::steps::experiment::submit_worker(ctx, &log, *n).await?;
                }
            }
            pending
        };
        for n in &batch {
            match super::steps::experiment::collect(ctx, &mut log, *n).await {
                Err(OptimizeError::NotRunnable { experiment, reason }) => {
                    // the receipt stays: `resume` starts the job again, the hypothesis unspent
                    log.run_state.active_seconds += started.elapsed().as_secs_f64();
                    let why = format!("the worker of exp-{experiment:03} could not run: {reason}");
                    return finish(ctx, log, StopReason::NotRunnable(why));
                }
                other => other?,
            }
            if ctx.stop.load(Ordering::SeqCst) {
                log.run_state.active_seconds += started.elapsed().as_secs_f64();
                ctx.save(&log, "manual stop", |_| true)?;
                return finish(ctx, log, StopReason::ManualStop);
            }
        }
        let deadline = stopping::wall_deadline_passed(
            &ctx.spec.stopping,
            &progress(&log, &ctx.spec, now_secs()),
        );
        super::steps::integrate::evaluate(ctx, &mut log, &batch, deadline).await?;
        log = cp4(ctx, &batch, started)?;
        if deadline {
            return finish(ctx, log, StopReason::MaxWallHours);
        }
    }
}

fn spend_cap_name(spec: &Spec) -> String {
    if spec
        .metric
        .judge
        .as_ref()
        .is_some_and(|j| j.max_total_cost_usd.is_some())
        && spec.stopping.max_total_cost_usd.is_none()
    {
        "metric.judge.max_total_cost_usd".into()
    } else {
        "stopping.max_total_cost_usd".into()
    }
}

fn select(ctx: &Ctx<'_>, log: &ExperimentLog) -> Selection {
    let spec = &ctx.spec;
    let judge_estimate = spec.metric.judge.as_ref().map_or(0.0, |j| {
        j.cost_per_batch_usd
            * super::judge::n_batches(j.sample_size as usize, j.batch_size as usize) as f64
    });
    let req = BatchRequest {
        mode: spec.execution.mode,
        max_concurrent: spec.execution.max_concurrent,
        max_per_tick: Some(
            spec.execution
                .max_experiments_per_tick
                .unwrap_or(u32::MAX)
                .min(stopping::iterations_left(
                    &spec.stopping,
                    progress(log, spec, now_secs()).experiments_run,
                )),
        ),
        attribute_one_lever: false,
        spend: Spend {
            run_spent: log.spend.run_usd,
            judge_spent: log.spend.judge_usd,
            run_cap: spec.stopping.max_total_cost_usd,
            judge_cap: spec
                .metric
                .judge
                .as_ref()
                .and_then(|j| j.max_total_cost_usd),
            worker_estimate: spec.execution.worker_cost_usd,
            judge_estimate,
        },
        tried_categories: log.experiments.iter().map(|e| e.category.clone()).collect(),
    };
    select_batch(&log.hypothesis_backlog, &req)
}

/// CP-4 (O-53): re-read the log, finalize outcomes, best, spend, backlog, digest and
/// `run_state`, verify, and return the log as read back.
fn cp4(ctx: &Ctx<'_>, batch: &[u32], started: Instant) -> Result<ExperimentLog, OptimizeError> {
    let mut log = log::read(&ctx.root.root)?;
    let spec = &ctx.spec;
    let mut tested = BTreeSet::new();
    for n in batch {
        let Some(e) = log.entry_mut(*n) else { continue };
        if !e.outcome.is_terminal() {
            e.outcome = if e.decision.as_ref().is_some_and(|d| d.eligible) {
                Outcome::NotSelected
            } else {
                Outcome::Inconclusive
            };
        }
        if e.outcome == Outcome::DeferredNeedsApproval {
            let id = e.hypothesis_id.clone();
            if let Some(h) = log.hypothesis_backlog.iter_mut().find(|h| h.id == id) {
                h.dep_status = DepStatus::NeedsApproval;
            }
        } else {
            tested.insert(e.hypothesis_id.clone());
        }
    }
    log.hypothesis_backlog.retain(|h| !tested.contains(&h.id));
    let best_items = log
        .best
        .experiment
        .and_then(|n| log.entry(n))
        .and_then(|e| e.judge.as_ref())
        .map(|j| j.items.clone())
        .unwrap_or_default();
    let best_cases = if log.best.experiment.is_some() {
        log.best.worst_cases.clone()
    } else {
        log.baseline.worst_cases.clone()
    };
    let mut fresh = hypotheses_from_themes(&themes(&best_items, &best_cases), &log);
    let mut next = log.run_state.hypotheses_created;
    assign_ids(&mut fresh, &mut next);
    log.run_state.hypotheses_created = next;
    for h in &fresh {
        log.notes.push(format!(
            "theme tried: {}",
            h.source
                .as_deref()
                .unwrap_or("")
                .trim_start_matches("failure_theme:")
        ));
    }
    log.hypothesis_backlog.extend(fresh);
    log.run_state.tick += 1;
    log.run_state.pending_waits.clear();
    log.run_state.active_seconds += started.elapsed().as_secs_f64();
    log.run_state.status = "running".into();
    let digest = super::digest::render(&log, &spec.metric.primary.name);
    write_atomic(&ctx.root.strategy_digest(), &digest)?;
    if std::fs::read_to_string(ctx.root.strategy_digest())
        .ok()
        .as_deref()
        != Some(digest.as_str())
    {
        return Err(OptimizeError::Env(format!(
            "CP-4: `{}` did not read back",
            ctx.root.strategy_digest().display()
        )));
    }
    let tick = log.run_state.tick;
    let batch_final = batch.to_vec();
    ctx.save(&log, "CP-4", move |l| {
        batch_final
            .iter()
            .all(|n| l.entry(*n).is_none_or(|e| e.outcome.is_terminal()))
            && l.run_state.tick == tick
            && l.run_state.pending_waits.is_empty()
    })?;
    if let Some(best) = log.best.metrics.aggregate(&spec.metric.primary.name) {
        ctx.emit(Event::Best {
            primary: Some(best),
            experiment: log.best.experiment,
        });
    }
    Ok(log)
}

/// Records the stop reason, writes the report, and returns the summary (O-61).
fn finish(
    ctx: &Ctx<'_>,
    mut log: ExperimentLog,
    reason: StopReason,
) -> Result<RunSummary, OptimizeError> {
    log.run_state.stop_reason = Some(reason.clone());
    log.run_state.status = "stopped".into();
    ctx.save(&log, "stop", |l| l.run_state.stop_reason.is_some())?;
    super::report::write(ctx, &log)?;
    ctx.emit(Event::Stopped(reason.describe()));
    Ok(summary(&log))
}
