//! `skillforge verify`: a hard verifier as a durable job — a sandboxed clone at a rev, commands in it, a fail-closed verdict.

use std::path::PathBuf;

use anyhow::anyhow;
use clap::{Args, ValueEnum};
use serde_json::json;
use skillforge_engine::Job;
use skillforge_runner_sandbox::{ConfinementMode, SandboxPayload, Verdict, VerifyReport};

use crate::ci_output::{self, CiArgs, CiRun, Finished, Suite};
use crate::context::Context;
use crate::control::args::secs;
use crate::control::waiter::{await_job, submit_checked};
use crate::exit::{CHECK_FAILED, CliError, CliResult, ENVIRONMENT, OK};
use crate::output::{age, print_json};
use skillforge_stage::repo::RepoError;

/// Queue of verification jobs' default.
pub const VERIFY_QUEUE: &str = skillforge_engine::DEFAULT_QUEUE;

/// `--network` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Network {
    /// Commands may use the network (default: verifiers may fetch dependencies).
    On,
    /// No network: under bwrap, an empty network namespace.
    None,
}

/// `--confinement` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ConfinementArg {
    /// bwrap when it works here, else unconfined (reported as `confinement: none`).
    Auto,
    /// Require bwrap.
    Bwrap,
    /// Never confine.
    None,
}

/// Arguments of `skillforge verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// Repository to verify (a path the worker can see).
    #[arg(long)]
    repo: PathBuf,
    /// Revision to verify.
    #[arg(long, default_value = "HEAD")]
    rev: String,
    /// Budget for the whole run (clone and every command), seconds.
    #[arg(long, value_name = "SECS", default_value_t = 900)]
    timeout: u64,
    /// Enqueue and print the job id without waiting.
    #[arg(long = "no-wait", conflicts_with_all = ["junit", "format"])]
    no_wait: bool,
    /// Network for the commands.
    #[arg(long, value_enum, default_value_t = Network::On)]
    network: Network,
    /// Confinement of the commands.
    #[arg(long, value_enum, default_value_t = ConfinementArg::Auto)]
    confinement: ConfinementArg,
    /// Run the commands in containers from this image (confinement `container`, replacing bwrap);
    /// the worker needs a container engine (`DOCKER_HOST` or `[runners.container] host`).
    #[arg(long, value_name = "IMAGE", conflicts_with = "confinement")]
    image: Option<String>,
    /// Heartbeat period of the verification job's lease, seconds.
    #[arg(long, value_name = "SECS", default_value_t = 2.0)]
    heartbeat: f64,
    /// The lease is stale (worker presumed dead, job re-run elsewhere) after this long without a heartbeat, seconds.
    #[arg(long = "stale-after", value_name = "SECS", default_value_t = 15.0)]
    stale_after: f64,
    /// A second verify with the same key returns the recorded result without running again.
    #[arg(long = "idempotency-key")]
    idempotency_key: Option<String>,
    /// With the embedded queue, do not start an in-process worker when none is live.
    #[arg(long = "no-local-worker")]
    no_local_worker: bool,
    /// Commands, each run with `sh -c` in order inside the sandbox (may contain commas and shell operators).
    #[arg(last = true, required = true, value_name = "CMD")]
    commands: Vec<String>,
    #[command(flatten)]
    ci: CiArgs,
}

/// Enqueues one verification job and, unless `--no-wait`, prints its report (one JUnit testcase
/// per command with `--junit`, annotations with `--format github`).
/// Exit 0 pass, 1 fail, 3 skipped (not runnable) or could not run.
pub async fn run(ctx: &Context, args: VerifyArgs) -> CliResult {
    let ci = CiRun::start(args.ci.clone(), "verify", ctx.json)?;
    ci.finish(verify(ctx, args).await)
}

async fn verify(ctx: &Context, args: VerifyArgs) -> Result<Finished, CliError> {
    if args.timeout == 0 {
        return Err(CliError::usage(anyhow!(
            "--timeout must be at least 1 second"
        )));
    }
    // Resolve a relative path on this machine (a fleet gets a URL or a bundle instead, below).
    let repo = std::path::absolute(&args.repo)
        .map_err(|e| CliError::usage(anyhow!("repository path `{}`: {e}", args.repo.display())))?;
    crate::control::args::check_repo(&args.repo, &repo)?;
    crate::control::args::check_revision(&repo, &args.rev, "--rev")?;
    let mut payload = SandboxPayload::new(repo, args.rev.clone(), args.commands.clone());
    payload.timeout_secs = Some(args.timeout);
    payload.network = args.network == Network::On;
    payload.confinement = match args.confinement {
        ConfinementArg::Auto => ConfinementMode::Auto,
        ConfinementArg::Bwrap => ConfinementMode::Bwrap,
        ConfinementArg::None => ConfinementMode::None,
    };
    payload.image = args.image.clone();
    let stages: skillforge_stage::WorkflowDef = skillforge_stage::family::VERIFY_SOURCE
        .for_home(&ctx.home)
        .map_err(CliError::usage)?;
    let stage = stages.stage("hard_verifier");
    let mut spec = stage
        .job(&payload, args.idempotency_key.clone())
        .map_err(CliError::usage)?;
    spec.queue = VERIFY_QUEUE.to_owned();
    // `--timeout` is the commands' budget; the job gets the stage's `setup_secs` more for the clone.
    spec.timeout_ms = (args.timeout + stage.setup_secs) * 1000;
    spec.heartbeat_ms = secs("heartbeat", args.heartbeat)?;
    spec.stale_after_ms = secs("stale-after", args.stale_after)?;
    if spec.stale_after_ms <= spec.heartbeat_ms {
        return Err(CliError::usage(anyhow!(
            "--stale-after must be longer than --heartbeat"
        )));
    }

    let backend = ctx.queue().await?;
    // A fleet that does not share this disk gets the checkout's remote URL or a bundle.
    skillforge_stage::repo::route_repository(backend.as_ref(), &mut spec)
        .await
        .map_err(|e| match e {
            RepoError::Invalid(m) => CliError::usage(anyhow!(m)),
            RepoError::Env(m) => CliError::env(anyhow!(m)),
        })?;
    let enqueued = submit_checked(ctx, backend.as_ref(), &spec).await?.enqueued;
    if args.no_wait {
        if ctx.json {
            print_json(&json!({"id": enqueued.job_id, "created": enqueued.created}));
        } else {
            println!("{}", enqueued.job_id);
        }
        // `--no-wait` conflicts with `--junit` and `--format`: nothing reads this suite.
        return Ok(Finished {
            code: OK,
            suite: Suite::new("skillforge verify"),
        });
    }
    if !enqueued.created && !ctx.json {
        eprintln!(
            "recorded result of job {} (idempotency key)",
            enqueued.job_id
        );
    }
    let job = await_job(ctx, &backend, &enqueued.job_id, !args.no_local_worker).await?;
    report_verification(ctx, &job)
}

/// Prints a finished verification job; returns its exit code and its report as a CI suite.
fn report_verification(ctx: &Context, job: &Job) -> Result<Finished, CliError> {
    let Some(report) = job
        .outcome
        .as_ref()
        .and_then(|o| VerifyReport::from_json(&o.detail).ok())
    else {
        let why = job
            .error
            .clone()
            .unwrap_or_else(|| format!("job ended {} without a report", job.state));
        if ctx.json {
            print_json(
                &json!({"job_id": job.id, "state": job.state, "verdict": null, "hard": null, "error": why}),
            );
        } else {
            eprintln!("verification job {} could not run: {why}", job.id);
        }
        return Ok(Finished {
            code: ENVIRONMENT,
            suite: ci_output::verify::no_report(&job.id, &why),
        });
    };
    if ctx.json {
        let mut value = report.to_json();
        value["job_id"] = json!(job.id);
        print_json(&value);
    } else {
        println!(
            "verify {} @ {} ({}) — confinement {}",
            report.repo.display(),
            report.rev,
            short(&report.commit),
            confinement_label(&report)
        );
        for c in &report.commands {
            let status = serde_json::to_value(c.status)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            let code = c
                .exit_code
                .map(|c| format!(" exit {c}"))
                .unwrap_or_default();
            // In words (`not run`, `not runnable`); `--json` keeps the names.
            println!(
                "  [{}{code}, {}] {}",
                status.replace('_', " "),
                age(c.duration_ms as i64),
                c.command
            );
            for (name, tail) in [("stdout", &c.stdout_tail), ("stderr", &c.stderr_tail)] {
                if !tail.trim().is_empty() && status != "passed" {
                    println!("    {name}:");
                    for line in tail
                        .trim_end()
                        .lines()
                        .rev()
                        .take(20)
                        .collect::<Vec<_>>()
                        .into_iter()
                        .rev()
                    {
                        println!("      {line}");
                    }
                }
            }
        }
        let reason = report
            .reason
            .as_deref()
            .map(|r| format!(" ({r})"))
            .unwrap_or_default();
        println!("verdict: {}{reason}", verdict_label(report.verdict));
    }
    let code = match report.verdict {
        Verdict::Pass => OK,
        Verdict::Fail => CHECK_FAILED,
        Verdict::Skipped => ENVIRONMENT,
    };
    Ok(Finished {
        code,
        suite: ci_output::verify::suite(&job.id, &report),
    })
}

fn verdict_label(v: Verdict) -> &'static str {
    match v {
        Verdict::Pass => "pass",
        Verdict::Fail => "fail",
        Verdict::Skipped => "skipped",
    }
}

fn confinement_label(report: &VerifyReport) -> String {
    serde_json::to_value(report.confinement)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}
