//! The `skillforge` command-line interface: commands grouped by noun, human and `--json` output.
#![expect(
    unreachable_pub,
    reason = "a binary crate: `pub` marks what modules offer each other"
)]

mod ci_output;
mod commands;
mod config;
mod console;
mod context;
mod control;
mod exit;
mod families;
mod output;
mod runners;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::context::Context;

/// The help heading of the flags every command takes: one group after each command's own options,
/// never interleaved with them.
const GLOBAL_OPTIONS: &str = "Global options";

/// skillforge: improve LLM agent templates ("skills") with evidence, on durable jobs.
#[derive(Debug, Parser)]
#[command(name = "skillforge", version, about, propagate_version = true)]
struct Cli {
    /// Home directory (store, embedded queue, config). Default `$SKILLFORGE_HOME`, else `~/.skillforge`.
    #[arg(long, global = true, value_name = "DIR", help_heading = GLOBAL_OPTIONS)]
    home: Option<PathBuf>,
    /// Queue URL: `redis://HOST:PORT[/DB]` for a fleet; default the embedded SQLite queue (or `[queue] url`).
    #[arg(long, global = true, value_name = "URL", help_heading = GLOBAL_OPTIONS)]
    queue: Option<String>,
    /// Machine-readable JSON on stdout; everything else goes to stderr.
    #[arg(long, global = true, help_heading = GLOBAL_OPTIONS)]
    json: bool,
    /// More log output (repeat for more).
    #[arg(short, long, global = true, action = clap::ArgAction::Count, help_heading = GLOBAL_OPTIONS)]
    verbose: u8,
    /// Less log output.
    #[arg(short, long, global = true, help_heading = GLOBAL_OPTIONS)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Create a home: a commented config.toml, the file schemas and a starter file per family.
    Init(commands::init::InitArgs),
    /// Check this machine: git, bwrap, the queue, the container engine, agent runtimes, checker tools, disk; exit 1 when something needed is missing.
    Doctor(commands::doctor::DoctorArgs),
    /// Print the JSON Schema of a file you write (config, SKILL.md frontmatter, eval brief, items, optimize spec, BINEVAL set, …).
    Schema(commands::schema::SchemaArgs),
    /// Run the whole loop on a real git repository: train iteration to a pending candidate, then a harvest.
    Demo(commands::demo::DemoArgs),
    /// Submit, inspect, cancel and retry durable jobs.
    #[command(subcommand)]
    Jobs(commands::jobs::JobsCommand),
    /// Run a worker: lease jobs and run them until SIGTERM/SIGINT.
    Worker(commands::worker::WorkerArgs),
    /// Run the control plane: reaper and result ingestion, until SIGTERM/SIGINT.
    Serve(commands::serve::ServeArgs),
    /// List every active job lease and named lock with owner, heartbeat age and status.
    Locks,
    /// Run a hard verifier: commands in a sandboxed clone at a rev; exit 0 pass, 1 fail, 3 skipped.
    Verify(commands::verify::VerifyArgs),
    /// Score a commit range with the deterministic checkers (diff_size, duplication, lint, complexity).
    Check(commands::check::CheckArgs),
    /// Install agent templates and inspect their versions (`ID`, `ID@vN`, `ID@latest`).
    #[command(subcommand)]
    Template(commands::template::TemplateCommand),
    /// Import an optimizer's candidate package as a pending template version (never promotes).
    Import(commands::import::ImportArgs),
    /// Review imported candidates: list, show (with diff), promote, reject.
    #[command(subcommand)]
    Candidate(commands::candidate::CandidateCommand),
    /// Eval review runs: create, add items, status (advisory next mode).
    #[command(subcommand)]
    Review(commands::review::ReviewCommand),
    /// Human feedback packets: blind Markdown export and import.
    #[command(subcommand)]
    Feedback(commands::feedback::FeedbackCommand),
    /// Import a blinded paired-review packet (packet, secret map, picks).
    #[command(subcommand)]
    Pairwise(commands::pairwise::PairwiseCommand),
    /// Export a review run as a training package for external optimizers.
    Export(commands::export::ExportArgs),
    /// Built-in optimizers with the external optimizer's command line (`distill`: deterministic, no model).
    #[command(subcommand)]
    Optimizer(commands::optimizer::OptimizerCommand),
    /// The optimize loop: hypotheses -> experiments in worktrees -> measure -> decide -> keep/revert.
    #[command(subcommand)]
    Optimize(commands::optimize::OptimizeCommand),
    /// Automatic trace harvesting from pull requests: attributions, outcomes, leg events, status.
    #[command(subcommand)]
    Harvest(commands::harvest::HarvestCommand),
    /// A/B judges measured against the human picks: agreement and Cohen's κ per judge.
    #[command(subcommand)]
    Judge(commands::judge::JudgeCommand),
    /// Ask an agent: its current version (or its canary, for the sampled fraction) answers.
    Ask(commands::ask::AskArgs),
    /// Champion/challenger A/B of a template: both answers, a blind pick, the bandit's posterior.
    Ab(commands::ab::AbArgs),
    /// Live A/B picks owed by intercepted asks: list, show blind, record the pick.
    #[command(subcommand)]
    LiveAb(commands::live_ab::LiveAbCommand),
    /// BINEVAL binary evaluation: run a question set, show stored verdicts, derive lessons.
    #[command(subcommand)]
    Binary(commands::binary::BinaryCommand),
    /// Train mode: start a session, watch its status, continue through its gates, recover an optimizer result.
    #[command(subcommand)]
    Train(commands::train::TrainCommand),
    /// The skill eval loop: briefs, forge (arms → blind judge → aggregate → gate → ledger), status, recheck, report.
    #[command(subcommand)]
    Eval(commands::eval::EvalCommand),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) generated from this CLI.
    Completions(commands::completions::CompletionsArgs),
    /// Write the generated command reference and man pages (`docs/reference/commands.md`, `docs/man/`).
    #[command(hide = true)]
    Docs(commands::docs::DocsArgs),
    /// The scripted agent runtime (deterministic, no model): prompt on stdin, answer on stdout.
    #[command(name = "agent-scripted", hide = true)]
    AgentScripted {
        /// Passed to the scripted agent.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

/// Logging to stderr. A long-running process (`worker`, `serve`) logs at `info` by default: one
/// line per job started, finished and applied, so its log says what it is doing; every other
/// command logs warnings only unless `-v`.
fn init_tracing(verbose: u8, quiet: bool, long_running: bool) {
    let default = match (quiet, verbose) {
        (true, _) => "error",
        (false, 0) if long_running => "info",
        (false, 0) => "warn",
        (false, 1) => "info",
        (false, 2) => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("SKILLFORGE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        // Every log line without URL credentials or registered secrets (issue 32 item 8).
        .with_writer(control::redact::RedactingStderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .init();
}

/// Whether `command` may end quietly on SIGPIPE: every command that prints its answer, so
/// `skillforge jobs list | head` ends like other command-line tools. Not `worker` and `serve`:
/// they hold queue connections for hours, and a write to a connection the peer closed (a
/// worker paused across a Redis restart) must be an error they log and recover from, not a
/// silent exit with status 141.
fn quiet_on_sigpipe(command: &Command) -> bool {
    !matches!(command, Command::Worker(_) | Command::Serve(_))
}

/// Restores the default SIGPIPE action, so a printing command ends quietly on a closed stdout
/// instead of panicking (Rust ignores SIGPIPE by default). Only for [`quiet_on_sigpipe`] commands.
fn restore_default_sigpipe() {
    // SAFETY: called in `main` right after argument parsing, before any other thread exists; SIG_DFL installs no
    // handler code, so nothing can run in signal context.
    #[expect(
        unsafe_code,
        reason = "setting a signal disposition is unsafe in nix; see SAFETY"
    )]
    let _ = unsafe {
        nix::sys::signal::signal(
            nix::sys::signal::Signal::SIGPIPE,
            nix::sys::signal::SigHandler::SigDfl,
        )
    };
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if quiet_on_sigpipe(&cli.command) {
        restore_default_sigpipe();
    }
    if let Command::AgentScripted { args } = cli.command {
        return skillforge_runner_agent::scripted_main(args);
    }
    init_tracing(
        cli.verbose,
        cli.quiet,
        matches!(cli.command, Command::Worker(_) | Command::Serve(_)),
    );
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: start async runtime: {e}");
            return ExitCode::from(exit::ENVIRONMENT);
        }
    };
    let result = runtime.block_on(async move {
        // Commands that read no configuration (and so work in a home whose config.toml is broken).
        match cli.command {
            Command::Schema(args) => return commands::schema::run(cli.json, args),
            Command::Completions(args) => return commands::completions::run(args),
            Command::Docs(args) => return commands::docs::run(args),
            Command::Init(args) => return commands::init::run(cli.home, cli.json, args),
            Command::Doctor(args) => {
                return commands::doctor::run(cli.home, cli.queue, cli.json, args).await;
            }
            _ => {}
        }
        let ctx = Context::new(cli.home, cli.queue, cli.json)?;
        control::telemetry::install(&ctx.config.telemetry)?;
        match cli.command {
            Command::Demo(args) => commands::demo::run(&ctx, args).await,
            Command::Eval(cmd) => commands::eval::run(&ctx, cmd).await,
            Command::Jobs(cmd) => commands::jobs::run(&ctx, cmd).await,
            Command::Worker(args) => commands::worker::run(&ctx, args).await,
            Command::Serve(args) => commands::serve::run(&ctx, args).await,
            Command::Locks => commands::locks::run(&ctx).await,
            Command::Verify(args) => commands::verify::run(&ctx, args).await,
            Command::Check(args) => commands::check::run(&ctx, args).await,
            Command::Template(cmd) => commands::template::run(&ctx, cmd).await,
            Command::Import(args) => commands::import::run(&ctx, args).await,
            Command::Candidate(cmd) => commands::candidate::run(&ctx, cmd).await,
            Command::Review(cmd) => commands::review::run(&ctx, cmd).await,
            Command::Feedback(cmd) => commands::feedback::run(&ctx, cmd).await,
            Command::Pairwise(cmd) => commands::pairwise::run(&ctx, cmd).await,
            Command::Export(args) => commands::export::run(&ctx, args).await,
            Command::Optimizer(cmd) => commands::optimizer::run(&ctx, cmd).await,
            Command::Optimize(cmd) => commands::optimize::run(&ctx, cmd).await,
            Command::Harvest(cmd) => commands::harvest::run(&ctx, cmd).await,
            Command::Train(cmd) => commands::train::run(&ctx, cmd).await,
            Command::Ab(args) => commands::ab::run(&ctx, args).await,
            Command::Judge(cmd) => commands::judge::run(&ctx, cmd).await,
            Command::Ask(args) => commands::ask::run(&ctx, args).await,
            Command::LiveAb(cmd) => commands::live_ab::run(&ctx, cmd).await,
            Command::Binary(cmd) => commands::binary::run(&ctx, cmd).await,
            Command::AgentScripted { .. } => unreachable!("handled before the runtime starts"),
            Command::Schema(_)
            | Command::Init(_)
            | Command::Doctor(_)
            | Command::Completions(_)
            | Command::Docs(_) => {
                unreachable!("handled before the context is built")
            }
        }
    });
    // The spans still queued are sent before the process ends (bounded; never fails a command).
    control::telemetry::shutdown();
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!(
                "error: {}",
                control::redact::redact(&format!("{:#}", e.error))
            );
            ExitCode::from(e.code)
        }
    }
}
