//! `skillforge check`: deterministic checker dimensions of a commit range, as a durable job.

use std::path::PathBuf;

use anyhow::anyhow;
use clap::Args;
use serde_json::json;

use skillforge_runner_checker::{CheckReport, CheckerPayload, parse_checker_list};

use crate::ci_output::check::Range;
use crate::ci_output::{self, CiArgs, CiRun, Finished};
use crate::context::Context;
use crate::control::waiter::await_job;
use crate::exit::{CliError, CliResult, ENVIRONMENT, OK};
use crate::output::print_json;

/// How many findings per dimension the human output lists (`--json` lists all).
const FINDINGS_SHOWN: usize = 10;

/// Arguments of `skillforge check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Repository (a path the worker can see).
    #[arg(long)]
    repo: PathBuf,
    /// Base revision.
    #[arg(long)]
    base: String,
    /// Head revision.
    #[arg(long)]
    head: String,
    /// Dimensions, comma-separated: diff_size, duplication, lint, complexity (default diff_size).
    #[arg(long, default_value = "diff_size")]
    checkers: String,
    /// Budget for the whole check, seconds.
    #[arg(long, value_name = "SECS", default_value_t = 600)]
    timeout: u64,
    /// With the embedded queue, do not start an in-process worker when none is live.
    #[arg(long = "no-local-worker")]
    no_local_worker: bool,
    #[command(flatten)]
    ci: CiArgs,
}

/// Enqueues a checker job, waits, prints each dimension's score or skip reason and the mean (one
/// JUnit testcase per dimension with `--junit`, annotations with `--format github`).
/// Exit 0 when the check ran (even with every dimension skipped: then the mean is absent), 3 when it could not run.
pub async fn run(ctx: &Context, args: CheckArgs) -> CliResult {
    let ci = CiRun::start(args.ci.clone(), "check", ctx.json)?;
    ci.finish(check(ctx, args).await)
}

async fn check(ctx: &Context, args: CheckArgs) -> Result<Finished, CliError> {
    let checkers = parse_checker_list(&args.checkers).map_err(CliError::usage)?;
    let announce = checkers_note(&checkers);
    let repo = std::path::absolute(&args.repo)
        .map_err(|e| CliError::usage(anyhow!("repository path `{}`: {e}", args.repo.display())))?;
    crate::control::args::check_repo(&args.repo, &repo)?;
    crate::control::args::check_revision(&repo, &args.base, "--base")?;
    crate::control::args::check_revision(&repo, &args.head, "--head")?;
    let payload = CheckerPayload::commits(repo, args.base.clone(), args.head.clone(), checkers);
    let stages: skillforge_stage::WorkflowDef = skillforge_stage::family::CHECK_SOURCE
        .for_home(&ctx.home)
        .map_err(CliError::usage)?;
    let stage = stages.stage("checkers");
    let mut spec = stage.job(&payload, None).map_err(CliError::usage)?;
    spec.timeout_ms = (args.timeout.max(1) + stage.setup_secs) * 1000;
    let backend = ctx.queue().await?;
    let enqueued = crate::control::waiter::submit_checked(ctx, backend.as_ref(), &spec)
        .await?
        .enqueued;
    if !ctx.json {
        eprintln!("check job {}: {announce}", enqueued.job_id);
    }
    let job = await_job(ctx, &backend, &enqueued.job_id, !args.no_local_worker).await?;
    let repo_text = args.repo.display().to_string();
    let range = Range {
        repo: &repo_text,
        base: &args.base,
        head: &args.head,
    };
    let Some(report) = job
        .outcome
        .as_ref()
        .and_then(|o| serde_json::from_value::<CheckReport>(o.detail.clone()).ok())
    else {
        let why = job
            .error
            .clone()
            .unwrap_or_else(|| format!("job ended {} without a report", job.state));
        if ctx.json {
            print_json(&json!({"job_id": job.id, "state": job.state, "mean": null, "error": why}));
        } else {
            eprintln!("check job {} could not run: {why}", job.id);
        }
        return Ok(Finished {
            code: ENVIRONMENT,
            suite: ci_output::check::no_report(&job.id, range, &why),
        });
    };
    let finished = Finished {
        code: OK,
        suite: ci_output::check::suite(&job.id, range, &report),
    };
    if ctx.json {
        let mut value = serde_json::to_value(&report).map_err(CliError::env)?;
        value["job_id"] = json!(job.id);
        print_json(&value);
        return Ok(finished);
    }
    println!("check {} {}..{}", args.repo.display(), args.base, args.head);
    for d in &report.dimensions {
        match (d.score, &d.skipped) {
            (Some(s), _) => match crate::output::dimension_basis(&d.raw) {
                basis if basis.is_empty() => println!("  {:<12} {s:.3}", d.name),
                basis => println!("  {:<12} {s:.3}  ({basis})", d.name),
            },
            (None, Some(reason)) => println!("  {:<12} skipped: {reason}", d.name),
            (None, None) => println!("  {:<12} no score", d.name),
        }
        // Issue 35 item 2: what the tools found, where, under the score they lowered.
        let findings = ci_output::check::findings(d);
        for f in findings.iter().take(FINDINGS_SHOWN) {
            println!("    {}:{}: {} ({})", f.file, f.line, f.message, f.tool);
        }
        if findings.len() > FINDINGS_SHOWN {
            println!(
                "    … and {} more (--json lists all)",
                findings.len() - FINDINGS_SHOWN
            );
        }
    }
    match report.mean {
        Some(m) => println!("mean: {m:.3}"),
        None => println!("mean: none (every dimension skipped; no score is fabricated)"),
    }
    Ok(finished)
}

/// What a check is about to do, for a person watching: each dimension and, for the tool-based
/// ones, that the tools run over the checkout (clippy builds a Rust checkout first).
fn checkers_note(checkers: &[skillforge_runner_checker::Checker]) -> String {
    use skillforge_runner_checker::Checker;
    let names: Vec<&str> = checkers.iter().map(|c| c.name()).collect();
    let mut note = format!(
        "running {} ({})",
        if names.len() == 1 {
            "1 checker"
        } else {
            "the checkers"
        },
        names.join(", ")
    );
    if checkers.contains(&Checker::Lint) {
        note.push_str("; lint runs each language's linter over the changed files (on a Rust checkout `cargo clippy` builds it first: the first run can take minutes)");
    }
    note
}
