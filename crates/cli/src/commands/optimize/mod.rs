//! `skillforge optimize init|run|status|resume|report --spec F`: the optimize loop
//! ([`skillforge_optimize`]) with this process as its control plane.
//!
//! * `init` validates the spec, creates `optimize/<spec>`, measures the baseline and writes the
//!   backlog (CP-2) under `<home>/optimize/<spec>/`;
//! * `run` runs ticks until a stopping criterion holds (SIGINT/SIGTERM stops at the next safe
//!   point, saving state), showing tick, experiment, outcome and current best on a terminal;
//! * `resume` is `run` after a crash: it recovers `result.yaml` markers and pending waits first;
//! * `status` prints `run_state`, the best and every experiment's outcome;
//! * `report` writes and prints the wrap-up report.
//!
//! `init`, `run` and `resume` hold the run's control-plane lock (`<state-root>/control.lock`,
//! [`skillforge_optimize::lock`]) while they work: a second control plane on the same
//! spec is refused with exit 3 and a message naming the holder (pid, host, command, since).
//!
//! Exit codes: 0 ok; 2 invalid spec, a spec changed since `init`, or no run; 3 environment
//! (git, queue, unwritable state, a baseline that cannot be measured, another control plane
//! holding the run, a runtime that cannot run here with the embedded queue). `run`/`resume` end by their stop reason:
//!
//! | stop reason | exit |
//! |---|---|
//! | `target_reached`, `max_iterations`, `max_hours`, `max_wall_hours`, `plateau`, `spend_cap`, `nothing_runnable` | 0 (a criterion of the spec ended the run) |
//! | `blocked` (a locating measurement that decides keep-or-skip cannot be taken) | 3 |
//! | `spend_unknown` (a cost cap with agent runs that reported no cost and no estimate, or a tokens cap with runs that reported no tokens) | 3 |
//! | `not_runnable` (an experiment's job could not run here: `resume` after the fix starts it again; the hypothesis is not spent) | 3 |
//! | `manual_stop` (SIGINT/SIGTERM: paused, `run` again continues the same batch) | 4 |

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::anyhow;
use clap::{Args, Subcommand};
use serde_json::json;
use skillforge_engine::DEFAULT_QUEUE;
use skillforge_optimize::brief::fmt_num;
use skillforge_optimize::ctx::Ctx;
use skillforge_optimize::lock::RunLock;
use skillforge_optimize::run;
use skillforge_optimize::spec::Spec;
use skillforge_optimize::stages;
use skillforge_optimize::state::StateRoot;
use skillforge_optimize::stopping::StopReason;
use skillforge_optimize::{OptimizeError, log, report};

use crate::context::Context;
use crate::control::waiter::CliJobs;
use crate::exit::{CliError, CliResult, ENVIRONMENT, OK, WAITING};
use crate::output::print_json;

/// `optimize` subcommands.
#[derive(Debug, Subcommand)]
pub enum OptimizeCommand {
    /// Validate the spec, create the optimization branch, measure the baseline, write the backlog.
    Init(SpecArgs),
    /// Run ticks until a stopping criterion holds.
    Run(SpecArgs),
    /// Continue a run after a crash or a stop signal (recovers markers and pending waits).
    Resume(SpecArgs),
    /// Show run state, the current best and every experiment's outcome.
    Status(SpecArgs),
    /// Write and print the wrap-up report.
    Report(SpecArgs),
}

/// The spec argument every subcommand takes.
#[derive(Debug, Args)]
pub struct SpecArgs {
    /// The optimize spec (YAML).
    #[arg(long, value_name = "FILE")]
    spec: PathBuf,
    /// The project repository (default: the git repository holding the spec).
    #[arg(long, value_name = "DIR")]
    repo: Option<PathBuf>,
}

fn map_err(e: OptimizeError) -> CliError {
    match e {
        OptimizeError::Invalid(_) => CliError::usage(anyhow!("{e}")),
        _ => CliError::env(anyhow!("{e}")),
    }
}

/// Runs an `optimize` subcommand.
///
/// # Errors
/// See the module docs for the exit codes.
pub async fn run(ctx: &Context, cmd: OptimizeCommand) -> CliResult {
    match cmd {
        OptimizeCommand::Init(a) => init(ctx, a).await,
        OptimizeCommand::Run(a) => run_loop(ctx, a, false).await,
        OptimizeCommand::Resume(a) => run_loop(ctx, a, true).await,
        OptimizeCommand::Status(a) => status(ctx, a),
        OptimizeCommand::Report(a) => print_report(ctx, a),
    }
}

fn load(a: &SpecArgs) -> Result<(Spec, String), CliError> {
    let text = std::fs::read_to_string(&a.spec)
        .map_err(|e| CliError::usage(anyhow!("read spec `{}`: {e}", a.spec.display())))?;
    let spec = Spec::parse(&text, &a.spec.display().to_string()).map_err(map_err)?;
    Ok((spec, text))
}

fn printer(json: bool) -> crate::output::StderrProgress {
    // Progress lines for a person at a terminal; `--json` and pipes get the report only.
    crate::output::StderrProgress {
        prefix: "",
        quiet: json || !std::io::stderr().is_terminal(),
    }
}

async fn init(ctx: &Context, a: SpecArgs) -> CliResult {
    let (spec, text) = load(&a)?;
    let repo = match &a.repo {
        Some(r) => r.clone(),
        None => run::repo_of(&a.spec).map_err(map_err)?,
    };
    // What the repository lacks is said before the home is touched (nothing is written then).
    for note in run::check_repo(&repo, &spec).map_err(map_err)? {
        eprintln!("{note}");
    }
    if let Some(note) = runtime_note(&text) {
        eprintln!("{note}");
    }
    check_runtimes(ctx, &spec, "init").await?;
    let root = StateRoot::new(&ctx.home, &spec.name);
    let existed = root.root.exists();
    let parent = root.root.parent().map(std::path::Path::to_path_buf);
    let parent_existed = parent.as_ref().is_some_and(|p| p.exists());
    let lock = RunLock::acquire(&root, "init", &machine()).map_err(map_err)?;
    let backend = ctx.queue().await?;
    let jobs = CliJobs::new(ctx, backend.clone(), ctx.store().await?);
    let events = printer(ctx.json);
    let stop = AtomicBool::new(false);
    let created_at = run::now_secs();
    let octx = Ctx {
        spec: spec.clone(),
        root: root.clone(),
        repo,
        port: &jobs,
        backend: backend.clone(),
        stages: stages::for_home(&ctx.home).map_err(map_err)?,
        queue: DEFAULT_QUEUE.to_owned(),
        machine: machine(),
        events: &events,
        stop: &stop,
        key_prefix: format!("optimize:{}:{created_at}", spec.name),
    };
    let spec_path = std::fs::canonicalize(&a.spec).unwrap_or(a.spec.clone());
    let log = match run::init(&octx, &spec_path, &text, created_at).await {
        Ok(log) => log,
        Err(e) => {
            if !existed {
                // nothing of a refused init stays behind, not even the state root the lock created
                drop(lock);
                let _ = std::fs::remove_dir_all(&root.root);
                if let Some(parent) = parent.filter(|_| !parent_existed) {
                    let _ = std::fs::remove_dir(parent); // only when empty: other runs' state stays
                }
            }
            return Err(map_err(e));
        }
    };
    if ctx.json {
        print_json(
            &json!({"spec": spec.name, "state_root": root.root, "baseline_sha": log.baseline_sha, "baseline": log.baseline.metrics, "backlog": log.hypothesis_backlog.len()}),
        );
    } else {
        let n = log.hypothesis_backlog.len();
        eprintln!(
            "initialised optimize run `{}` at {} (baseline {}, {n} {})",
            spec.name,
            root.root.display(),
            &log.baseline_sha[..12],
            if n == 1 { "hypothesis" } else { "hypotheses" }
        );
    }
    Ok(OK)
}

/// The note for a spec that names no `execution.runtime`: its experiments run on the `scripted`
/// stand-in, which needs no model and edits only what its directives say; said, never assumed
/// silently (issue 35 item 7).
fn runtime_note(text: &str) -> Option<String> {
    Spec::runtime_unset(text).then(|| {
        "note: the spec sets no `execution.runtime`: experiments run on `scripted`, a stand-in \
             with no model that edits only what SKILLFORGE_SCRIPTED_EDITS says; set \
             `execution.runtime` to claude, codex or opencode to have a model edit the code"
            .to_owned()
    })
}

/// The runtimes the spec runs on this machine whose program is installed here: the workers'
/// (`execution.runtime`, unless a remote backend runs them elsewhere) and the judges'. A runtime
/// not installed here is not checked (its job fails at once, naming the missing program).
fn local_runtimes(spec: &Spec) -> Vec<&str> {
    let mut runtimes = Vec::new();
    if spec.remote_url().is_none() {
        runtimes.push(spec.execution.runtime.as_str());
    }
    if let Some(judge) = &spec.metric.judge {
        runtimes.push(judge.runtime_for(&spec.execution));
    }
    runtimes.retain(|r| {
        skillforge_runner_agent::find(r)
            .is_ok_and(|p| crate::control::model_api::installed(&p.program))
    });
    runtimes.dedup();
    runtimes
}

/// Before any experiment: whether the spec's runtimes can run on this machine (credentials,
/// model API reachable; [`crate::control::model_api::readiness_problems`], the checks `eval
/// forge` makes). With the embedded queue the experiments run here, so a problem refuses
/// `command` (exit 3, nothing written, no hypothesis spent); with a shared queue a worker
/// elsewhere may have what this machine lacks, so it is said as a warning.
async fn check_runtimes(ctx: &Context, spec: &Spec, command: &str) -> Result<(), CliError> {
    let runtimes = local_runtimes(spec);
    if runtimes.is_empty() {
        return Ok(());
    }
    let problems = crate::control::model_api::readiness_problems(&runtimes).await;
    if problems.is_empty() {
        return Ok(());
    }
    let embedded = matches!(ctx.queue_url, skillforge_engine::open::QueueUrl::Sqlite(_));
    if embedded {
        return Err(CliError::env(anyhow!(
            "`optimize {command}` cannot run the experiments on this machine (the embedded queue runs them here): {}; \
             {}: fix that and run `optimize {command}` again",
            problems.join("; and "),
            if command == "init" {
                "nothing was written"
            } else {
                "no experiment was started and no hypothesis was spent"
            }
        )));
    }
    for problem in problems {
        eprintln!(
            "warning: experiments cannot run on this machine: {problem}; a worker elsewhere on the shared queue must have what it needs"
        );
    }
    Ok(())
}

fn machine() -> String {
    std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

async fn run_loop(ctx: &Context, a: SpecArgs, resume: bool) -> CliResult {
    let (spec, text) = load(&a)?;
    let root = StateRoot::new(&ctx.home, &spec.name);
    let run_file = run::read_run_file(&root).map_err(map_err)?;
    if run_file.spec_text != text {
        return Err(CliError::usage(anyhow!(
            "spec `{}` changed since `optimize init` (a run keeps the spec it started with; start a new run under another name)",
            a.spec.display()
        )));
    }
    let _lock = RunLock::acquire(&root, if resume { "resume" } else { "run" }, &machine())
        .map_err(map_err)?;
    if let Some(note) = runtime_note(&text) {
        eprintln!("{note}");
    }
    check_runtimes(ctx, &spec, if resume { "resume" } else { "run" }).await?;
    let backend = ctx.queue().await?;
    let jobs = CliJobs::new(ctx, backend.clone(), ctx.store().await?);
    let events = printer(ctx.json);
    let stop = Arc::new(AtomicBool::new(false));
    let token = crate::control::signals::shutdown_on_signal();
    let flag = stop.clone();
    tokio::spawn(async move {
        token.cancelled().await;
        flag.store(true, Ordering::SeqCst);
    });
    if resume && !ctx.json && std::io::stderr().is_terminal() {
        eprintln!("resuming `{}` from {}", spec.name, root.root.display());
    }
    let octx = Ctx {
        spec: spec.clone(),
        root: root.clone(),
        repo: run_file.repo.clone(),
        port: &jobs,
        backend: backend.clone(),
        stages: stages::for_home(&ctx.home).map_err(map_err)?,
        queue: DEFAULT_QUEUE.to_owned(),
        machine: machine(),
        events: &events,
        stop: &stop,
        key_prefix: format!("optimize:{}:{}", spec.name, run_file.created_at),
    };
    if let Some(note) = run::delegation_note(&octx).map_err(map_err)? {
        // said when the run starts, whatever the terminal (issue 38 item 8); the log keeps it too
        eprintln!("note: {note}");
    }
    let summary = run::run(&octx).await.map_err(map_err)?;
    let reason = summary
        .stop_reason
        .as_ref()
        .map(|r| r.describe())
        .unwrap_or_default();
    if ctx.json {
        print_json(
            &json!({"spec": spec.name, "stop_reason": summary.stop_reason, "experiments": summary.experiments, "kept": summary.kept, "report": root.report()}),
        );
    } else {
        let kept = if summary.kept.is_empty() {
            "none".to_owned()
        } else {
            summary
                .kept
                .iter()
                .map(|n| format!("exp-{n:03}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        eprintln!(
            "{}: {} experiment(s), kept {kept}; {reason}; report {}",
            spec.name,
            summary.experiments,
            root.report().display()
        );
    }
    Ok(exit_for(summary.stop_reason.as_ref()))
}

/// The exit code of a finished `run`/`resume` by its stop reason (module docs).
fn exit_for(reason: Option<&StopReason>) -> u8 {
    match reason {
        Some(StopReason::Blocked(_) | StopReason::SpendUnknown(_) | StopReason::NotRunnable(_)) => {
            ENVIRONMENT
        }
        Some(StopReason::ManualStop) => WAITING,
        _ => OK,
    }
}

fn status(ctx: &Context, a: SpecArgs) -> CliResult {
    let (spec, _) = load(&a)?;
    let root = StateRoot::new(&ctx.home, &spec.name);
    run::read_run_file(&root).map_err(map_err)?;
    let log = log::read(&root.root).map_err(map_err)?;
    let primary = &spec.metric.primary.name;
    let experiments: Vec<_> = log
        .experiments
        .iter()
        .map(|e| {
            let s = e.standalone();
            let mut v = json!({
                "experiment": e.experiment, "hypothesis_id": e.hypothesis_id, "description": e.description,
                "outcome": e.outcome, "terminal": e.outcome.is_terminal(),
                "reference": s.and_then(|c| c.reference.snapshot.aggregate(primary)),
                "candidate": s.and_then(|c| c.candidate.snapshot.aggregate(primary)),
                "samples": s.map(|c| c.candidate.snapshot.n_samples()),
                "scope_violations": e.scope_violations,
                "spend": e.spend,
            });
            // issue 34 item 13: only with a measured noise floor (absent otherwise, byte-identical)
            if let Some(effect) = log.noise_floor.as_ref().and_then(|f| skillforge_optimize::noise::keep_effect(e, f)) {
                v["effect"] = json!(effect);
            }
            v
        })
        .collect();
    let mut value = json!({
        "spec": spec.name,
        "run_state": log.run_state,
        "baseline": log.baseline.aggregate(primary),
        "best": {"experiment": log.best.experiment, "sha": log.best.sha, primary.clone(): log.best.metrics.aggregate(primary)},
        "backlog": log.hypothesis_backlog.iter().map(|h| json!({"id": h.id, "description": h.description, "dep_status": h.dep_status})).collect::<Vec<_>>(),
        "experiments": experiments,
        "spend": {
            "run_usd": log.spend.run_usd, "judge_usd": log.spend.judge_usd, "estimated": log.spend.estimated,
            "unpriced_runs": log.spend.unpriced_runs, "cost_known": log.spend.unpriced_runs == 0,
            "workers": log.spend.workers, "judges": log.spend.judges, "agents": log.spend.agents(),
        },
    });
    if let Some(floor) = &log.noise_floor {
        value["noise_floor"] = json!(floor);
    }
    if ctx.json {
        print_json(&value);
    } else {
        println!(
            "{}: tick {}, status {}, {} experiment(s), best {} {} (baseline {})",
            spec.name,
            log.run_state.tick,
            log.run_state.status,
            log.experiments.len(),
            primary,
            log.best
                .metrics
                .aggregate(primary)
                .map_or("-".into(), fmt_num),
            log.baseline.aggregate(primary).map_or("-".into(), fmt_num)
        );
        println!(
            "spend: {}; agent runs: {}",
            log.spend.human_cost(),
            log.spend.agents().human()
        );
        if let Some(floor) = &log.noise_floor {
            println!("measurement: {}", floor.human());
        }
        for e in &log.experiments {
            println!(
                "  exp-{:03} {:<18} {} ({})",
                e.experiment,
                e.outcome.label().replace('_', " "),
                e.description,
                e.spend.human()
            );
            if let Some(effect) = log
                .noise_floor
                .as_ref()
                .and_then(|f| skillforge_optimize::noise::keep_effect(e, f))
            {
                println!("           {}", effect.human(primary));
            }
        }
        if let Some(r) = &log.run_state.stop_reason {
            println!("stopped: {}", r.describe());
        }
    }
    Ok(OK)
}

fn print_report(ctx: &Context, a: SpecArgs) -> CliResult {
    let (spec, _) = load(&a)?;
    let root = StateRoot::new(&ctx.home, &spec.name);
    run::read_run_file(&root).map_err(map_err)?;
    let log = log::read(&root.root).map_err(map_err)?;
    let text = report::render(&spec, &log);
    skillforge_stage::fs::write_atomic(&root.report(), &text).map_err(|e| map_err(e.into()))?;
    if ctx.json {
        print_json(&json!({"report": root.report(), "text": text}));
    } else {
        print!("{text}");
    }
    Ok(OK)
}
