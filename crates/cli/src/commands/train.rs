//! `skillforge train start|status|continue|recover`: train mode (seed SkillOpt "Complete
//! train-mode path", steps 1–10; facts §3). The steps live in [`skillforge_skillopt::train`];
//! this module parses arguments, waits for jobs (serving the embedded queue with an in-process
//! worker when no worker is live), shows progress and maps errors to exit codes.
//!
//! Exit codes: 0 done (the next step is the operator's to run, or the iteration ended); 4 the
//! session waits for a person (review feedback, a promote/reject decision) or for jobs still
//! running, the `next:` line saying what to do; 1 a stage failed (generation, optimizer,
//! candidate import; `recovery_available` is said when it is); 2 invalid input or a refused
//! request (S-98, S-99, a decision at the wrong time); 3 blocked by the environment
//! (`blocked_config`: a missing optimizer executable) or an unreachable queue/store.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::anyhow;
use clap::{Args, Subcommand};
use skillforge_skillopt::train::control::{
    ContinueRequest, DEFAULT_RUNTIME, EvaluatorChoice, StartRequest, StepReport, Waiting,
    continue_session, recover, start_with_evaluator,
};
use skillforge_skillopt::train::generation::TRAIN_WORKFLOW;
use skillforge_skillopt::train::items::parse_items;
use skillforge_skillopt::train::phase::describe;
use skillforge_skillopt::train::status::{SessionStatus, session_status};
use skillforge_skillopt::train::{GithubEnv, TrainEnv, TrainError};

use crate::context::Context;
use crate::control::args::skillforge_bin;
use crate::control::tail::{print_tail, running_tail};
use crate::control::waiter::CliJobs;
use crate::exit::{CliError, CliResult, OK, train_error};
use crate::output::print_json;

/// `skillforge train ...`.
#[derive(Debug, Subcommand)]
pub enum TrainCommand {
    /// Start a train session: template, target repo, workspace repo, request and review items.
    Start(StartArgs),
    /// Show a session's status_phase, progress, locks, candidate and next action.
    Status(StatusArgs),
    /// Advance a session to its next human gate, apply a decision, or start the next iteration.
    Continue(ContinueArgs),
    /// Import a completed optimizer result (candidate or no-candidate) from an out-root.
    Recover(RecoverArgs),
}

/// Arguments of `train start`.
#[derive(Debug, Args)]
pub struct StartArgs {
    /// Template: `ID` (current version), `ID@vN` or `ID@latest`.
    #[arg(long)]
    template: String,
    /// The repository the template's work is for (`owner/repo`), recorded on the session and its
    /// review runs; default: the one the template was added from (`template add --repo`, else
    /// `local`).
    #[arg(long)]
    repo: Option<String>,
    /// Where review work happens: a local checkout (a path, e.g. `.`) or `owner/repo` (which
    /// `--forge github` publishes review issues to). Without it the session is recorded but stops
    /// before generating options.
    #[arg(long = "workspace-repo")]
    workspace_repo: Option<String>,
    /// `github`: publish review packets and candidate review context as issues and comments of the
    /// workspace repository (`owner/repo`); default: local Markdown packets.
    #[arg(long, value_name = "FORGE")]
    forge: Option<String>,
    /// What the operator wants improved.
    #[arg(long)]
    request: String,
    /// YAML file with the review items (`items: [{id, title, input}]`).
    #[arg(long = "items-file", value_name = "FILE")]
    items_file: PathBuf,
    /// Confirm the request without asking.
    #[arg(long)]
    yes: bool,
    /// Session id (default: generated).
    #[arg(long)]
    session: Option<String>,
    /// Agent runtime that generates options (`scripted`, `claude`, `codex`, `opencode`).
    #[arg(long, default_value = DEFAULT_RUNTIME)]
    runtime: String,
    /// Model for the runtime.
    #[arg(long)]
    model: Option<String>,
    /// Review mode: explore (default), refine, distill, validate.
    #[arg(long)]
    mode: Option<String>,
    /// Options per item (default by mode: explore 5, else 2).
    #[arg(long)]
    options: Option<i64>,
    /// Evaluator profile that scores the generated options — artifact checks, render
    /// adapters, judge — before each export; stored in the session and review-run metadata
    /// (`evaluator_id`; further profile config can be added to the run metadata).
    #[arg(long, value_name = "ID")]
    evaluator: Option<String>,
    /// Agent runtime of the evaluator's judge, e.g. `scripted`, `claude` (run metadata
    /// `judge_runtime`; none ⇒ the judge stage is skipped with a reason).
    #[arg(long = "judge-runtime", value_name = "NAME", requires = "evaluator")]
    judge_runtime: Option<String>,
    /// The evaluator's profile config as a JSON object, merged into the review-run metadata:
    /// `checks` (e.g. a required `artifact_contract` check with `config.required_sections`),
    /// `check_config`, `judge_prompt_templates`, `judge_prompt_version`, `judge_model`.
    #[arg(
        long = "evaluator-config-json",
        value_name = "JSON",
        requires = "evaluator"
    )]
    evaluator_config_json: Option<String>,
}

/// Arguments of `train status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Session id.
    #[arg(long)]
    session: String,
    /// Include the verbose block (jobs, active locks, items, metadata status). The global
    /// `--verbose`/`-v` given to `train status` does the same (also with `--json`).
    #[arg(long)]
    detail: bool,
    /// Redraw every second until interrupted.
    #[arg(long)]
    watch: bool,
}

/// Arguments of `train continue`.
#[derive(Debug, Args)]
pub struct ContinueArgs {
    /// Session id.
    #[arg(long)]
    session: String,
    /// Optimizer backend (`distill` by default; see workflows/train.toml and <home>/train.toml).
    #[arg(long)]
    backend: Option<String>,
    /// Promote this candidate version.
    #[arg(long, conflicts_with = "reject")]
    promote: Option<String>,
    /// Reject this candidate version (needs --reason).
    #[arg(long, requires = "reason")]
    reject: Option<String>,
    /// Why the candidate is rejected, or the iteration abandoned.
    #[arg(long)]
    reason: Option<String>,
    /// Abandon the current iteration (needs --reason), wherever it is: a way out of one that
    /// cannot go on (a runtime that cannot run, a review never coming); then `--start-next`.
    #[arg(long, requires = "reason", conflicts_with_all = ["promote", "reject", "start_next"])]
    abandon: bool,
    /// Start the next iteration (only after the current one's candidate is promoted or rejected,
    /// it ended without one, or it was abandoned).
    #[arg(long = "start-next")]
    start_next: bool,
    /// Sync feedback whose items rank the options but name no useful_traits, rejected_traits or
    /// required_improvements (refused without this flag: the built-in optimizer learns nothing
    /// from rankings alone, so the round ends without a candidate).
    #[arg(long = "rankings-only")]
    rankings_only: bool,
    /// Enqueue this step's jobs and return without waiting; the next `continue` picks them up.
    #[arg(long = "no-wait")]
    no_wait: bool,
}

/// Arguments of `train recover`.
#[derive(Debug, Args)]
pub struct RecoverArgs {
    /// Session id.
    #[arg(long)]
    session: String,
    /// The optimizer's out-root (its `attempts/attempt-NNN/candidate.json`).
    #[arg(long = "out-root", value_name = "DIR")]
    out_root: PathBuf,
}

/// Dispatches a `train` subcommand.
pub async fn run(ctx: &Context, cmd: TrainCommand) -> CliResult {
    let workflow =
        skillforge_skillopt::train::stages::for_home(&ctx.home).map_err(CliError::usage)?;
    let store = ctx.store().await?;
    let queue = ctx.queue().await?;
    let jobs = CliJobs::new(ctx, queue.clone(), store.clone());
    let reporter = crate::output::StderrProgress {
        prefix: "",
        quiet: false,
    };
    let promotion = crate::control::promotion::policy(ctx);
    let stale_threshold_secs = ctx
        .config
        .github
        .stale_threshold_secs()
        .map_err(|e| CliError::usage(anyhow!(e)))?;
    let github = skillforge_forge::github::GitHub::new(&ctx.config.github.client_config());
    let github_env = github.as_ref().ok().map(|forge| GithubEnv {
        forge,
        api_url: forge.api_url(),
        stale_threshold_secs,
    });
    let env = TrainEnv {
        store: &store,
        queue: &queue,
        home: &ctx.home,
        workflow: &workflow,
        skillforge_bin: skillforge_bin(),
        jobs: &jobs,
        reporter: &reporter,
        promotion: &promotion,
        github: github_env,
    };
    match cmd {
        TrainCommand::Start(args) => run_start(ctx, &env, args).await,
        TrainCommand::Status(args) => run_status(ctx, &env, args).await,
        TrainCommand::Continue(args) => {
            let req = ContinueRequest {
                backend: args.backend,
                promote: args.promote,
                reject: args
                    .reject
                    .map(|v| (v, args.reason.clone().unwrap_or_default())),
                start_next: args.start_next,
                abandon: args
                    .abandon
                    .then(|| args.reason.clone().unwrap_or_default()),
                rankings_only: args.rankings_only,
                wait: !args.no_wait,
            };
            if req.promote.is_none()
                && req.reject.is_none()
                && req.abandon.is_none()
                && !req.start_next
            {
                before_generation(ctx, &env, &args.session).await?;
            }
            finish(ctx, continue_session(&env, &args.session, &req).await)
        }
        TrainCommand::Recover(args) => {
            let out_root = std::path::absolute(&args.out_root).unwrap_or(args.out_root);
            finish(ctx, recover(&env, &args.session, &out_root).await)
        }
    }
}

async fn run_start(ctx: &Context, env: &TrainEnv<'_>, args: StartArgs) -> CliResult {
    let file = args.items_file.display().to_string();
    let text = std::fs::read_to_string(&args.items_file)
        .map_err(|e| CliError::usage(anyhow!("read items file `{file}`: {e}")))?;
    let items = parse_items(&text, &file).map_err(|e| CliError::usage(anyhow!(e)))?;
    if !args.yes {
        if !std::io::stdin().is_terminal() {
            return Err(CliError::usage(anyhow!(
                "confirm the request with --yes (stdin is not a terminal)"
            )));
        }
        eprintln!(
            "train {}{} for: {}\n{} items. Start? [y/N] ",
            args.template,
            args.repo
                .as_deref()
                .map(|r| format!(" on {r}"))
                .unwrap_or_default(),
            args.request,
            items.len()
        );
        let mut answer = String::new();
        let _ = std::io::stdin().read_line(&mut answer);
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            return Err(CliError::usage(anyhow!(
                "not confirmed; nothing was written"
            )));
        }
    }
    let req = StartRequest {
        session_id: args.session,
        template: args.template,
        repo: args.repo.unwrap_or_default(),
        workspace_repo: args.workspace_repo.filter(|w| !w.trim().is_empty()),
        request: args.request,
        items,
        runtime: args.runtime,
        model: args.model,
        mode: args.mode,
        options: args.options,
        task_kind: String::new(),
        forge: args.forge.filter(|f| !f.trim().is_empty()),
    };
    if let Some(raw) = args.evaluator_config_json.as_deref() {
        skillforge_contract::limits::check_json(raw)
            .map_err(|e| CliError::usage(anyhow!("--evaluator-config-json {e}")))?;
    }
    let config = match args
        .evaluator_config_json
        .as_deref()
        .map(serde_json::from_str::<serde_json::Value>)
    {
        None => None,
        Some(Ok(serde_json::Value::Object(map))) => Some(map),
        Some(Ok(_)) => {
            return Err(CliError::usage(anyhow!(
                "--evaluator-config-json must be a JSON object"
            )));
        }
        Some(Err(e)) => return Err(CliError::usage(anyhow!("--evaluator-config-json: {e}"))),
    };
    let evaluator = args.evaluator.map(|evaluator_id| EvaluatorChoice {
        evaluator_id,
        judge_runtime: args.judge_runtime,
        config,
    });
    let runtime = req.runtime.clone();
    let report = start_with_evaluator(env, &req, evaluator.as_ref()).await;
    if report.is_ok() {
        // Said (on stderr, also with --json), not refused: option generation may run on another machine's worker.
        for problem in crate::control::model_api::readiness_problems(&[runtime.as_str()]).await {
            eprintln!(
                "warning: option generation cannot run on this machine: {problem}; fix it here, or \
                 run `train continue` where a worker has what it needs (`--runtime scripted` needs no model)"
            );
        }
    }
    finish(ctx, report)
}

/// When the session's next step generates options: its runtime must be able to run where the jobs
/// run (`control::model_api::before_agent_jobs`: refused on the embedded queue before anything is
/// queued, a warning on a shared one). An unknown session is left to `continue` to report.
async fn before_generation(
    ctx: &Context,
    env: &TrainEnv<'_>,
    session: &str,
) -> Result<(), CliError> {
    use skillforge_skillopt::train::state::TrainState;
    let Ok((row, it)) = skillforge_skillopt::train::session::load(env, session).await else {
        return Ok(());
    };
    let generating = matches!(
        it.state,
        TrainState::WorkspaceReady | TrainState::ItemsReady
    ) && !row.workspace_repo.trim().is_empty();
    if !generating {
        return Ok(());
    }
    let meta = skillforge_skillopt::train::meta::SessionMeta::parse(&row.metadata_json);
    let runtime = if meta.runtime.trim().is_empty() {
        DEFAULT_RUNTIME.to_owned()
    } else {
        meta.runtime
    };
    crate::control::model_api::before_agent_jobs(ctx, &[runtime.as_str()], "option generation")
        .await
}

/// Prints a step report (or the error) and returns the exit code.
fn finish(ctx: &Context, result: Result<StepReport, TrainError>) -> CliResult {
    match result {
        Ok(report) => {
            if ctx.json {
                print_json(&report);
            } else {
                for step in &report.steps {
                    eprintln!("• {step}");
                }
                println!(
                    "session {} · iteration {} · {}",
                    report.session_id,
                    report.iteration_id,
                    describe(report.state.as_str())
                );
                if let Some(v) = &report.candidate_version {
                    println!("candidate: {v}");
                }
                println!("next: {}", report.next_action);
            }
            Ok(waiting_exit(&report))
        }
        Err(e) => Err(train_error(e)),
    }
}

/// The exit code of a step that ended well: 4 ("not decided yet") when the session waits for a
/// person (review feedback, a promote/reject decision) or for jobs still running, 0 otherwise
/// (docs/jobs.md, "Exit codes"). A `--json` report carries the same state either way.
fn waiting_exit(report: &StepReport) -> u8 {
    match report.waiting {
        Some(Waiting::Person | Waiting::Jobs) => crate::exit::WAITING,
        None => OK,
    }
}

/// Lines of the running stage's output `train status --watch` shows under the status.
const WATCH_TAIL_LINES: usize = 5;

async fn run_status(ctx: &Context, env: &TrainEnv<'_>, mut args: StatusArgs) -> CliResult {
    // `--verbose` is also the global log-level flag; on `train status` it asks for the verbose block.
    args.detail |= std::env::args().any(|a| {
        a == "--verbose" || (a.starts_with('-') && !a.starts_with("--") && a.contains('v'))
    });
    let verbose = args.detail;
    if !args.watch {
        let status = session_status(env, &args.session, verbose)
            .await
            .map_err(train_error)?;
        print_status(ctx, &status, verbose);
        return Ok(OK);
    }
    let stop = crate::control::signals::shutdown_on_signal();
    let is_terminal = std::io::stdout().is_terminal();
    let mut last = String::new();
    while !stop.is_cancelled() {
        let status = session_status(env, &args.session, verbose)
            .await
            .map_err(train_error)?;
        let phase = status.status_phase.clone();
        if is_terminal || phase != last {
            if is_terminal {
                print!("\x1b[2J\x1b[H");
            }
            print_status(ctx, &status, verbose);
            if !ctx.json {
                let prefix = format!("{}:", status.session_id);
                if let Some(tail) = running_tail(
                    env.queue.as_ref(),
                    TRAIN_WORKFLOW,
                    &prefix,
                    WATCH_TAIL_LINES,
                )
                .await?
                {
                    print_tail(&tail);
                }
            }
        }
        last = phase;
        tokio::select! {
            () = stop.cancelled() => {}
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
    Ok(OK)
}

fn print_status(ctx: &Context, status: &SessionStatus, verbose: bool) {
    if ctx.json {
        print_json(status);
        return;
    }
    println!(
        "session {} · iteration {} · {}",
        status.session_id, status.iteration_id, status.template_version
    );
    println!("phase: {}", describe(&status.status_phase));
    let p = &status.progress;
    println!(
        "progress: {} items, {} options, {} ranked events, {} pairwise preferences",
        p.counts.review_items,
        p.generated_options,
        p.counts.ranked_feedback_events,
        p.counts.pairwise_preferences
    );
    if status.option_generation_spend.runs > 0 {
        println!(
            "option generation: {}",
            status.option_generation_spend.human()
        );
    }
    if let Some(url) = &status.issue_url {
        let sync = if status.continue_from_github {
            " (feedback missing: `train continue` syncs its comments)"
        } else {
            ""
        };
        println!("review issue: {url}{sync}");
    }
    if let Some(v) = &status.candidate_version {
        println!("candidate: {v}");
    }
    if let Some(r) = &status.no_candidate_reason {
        if r == skillforge_skillopt::distill::NO_ACTIONABLE_FEEDBACK {
            println!("no candidate: the feedback said which options won but not what to change");
        } else {
            println!("no candidate: {r}");
        }
        // The optimizer's own hint is for a package handled by hand (re-import, re-export); in a
        // session the next step below is the way on (the next iteration's packet), so a
        // no-actionable-feedback stop shows only that.
        let in_session = r == skillforge_skillopt::distill::NO_ACTIONABLE_FEEDBACK;
        if let Some(hint) = status
            .no_candidate_details
            .as_ref()
            .and_then(|d| d["no_candidate_hint"].as_str())
            .filter(|_| !in_session)
        {
            println!("  {hint}");
        }
    }
    if status.recovery_available {
        println!("recovery available");
    }
    if let Some(block) = status.verbose.as_ref().filter(|_| verbose) {
        let evaluation = &block.evaluation;
        if let Some(evaluator) = evaluation["evaluator_id"].as_str() {
            println!(
                "evaluator {evaluator}: {} ({} scored, {} with a failure packet, judge runtime {})",
                evaluation["status"]
                    .as_str()
                    .unwrap_or("-")
                    .replace('_', " "),
                evaluation["evaluated"],
                evaluation["failures"],
                evaluation["judge_runtime"]
                    .as_str()
                    .filter(|r| !r.is_empty())
                    .unwrap_or("none")
            );
        }
        for lock in &block.active_locks {
            println!(
                "lock {} [{}] owner {}@{} pid {} heartbeat {}ms ago",
                lock.key,
                lock.status.replace('_', " "),
                lock.owner_worker,
                lock.owner_hostname,
                lock.owner_pid,
                lock.heartbeat_age_ms
            );
        }
    }
    println!("next: {}", status.next_action);
}
