//! `skillforge review evaluate --run ID [--evaluator ID] [--judge-runtime NAME]`: evaluates every
//! item's options (ranked runs) or candidate output (A/B runs) against the run's evaluator
//! profile — artifact checks, then render adapters, then the LLM judge as an engine `agent` job —
//! and stores the contract `EvaluatorScore`s in the item's metadata, so the training-package
//! export carries them and `optimizer distill` turns failure packets into guidance (seed
//! "Evaluator profiles and structured failures"; S-101).
//!
//! The evaluation itself — stage order, where scores go, judge idempotency keys, render
//! adapters — is [`skillforge_skillopt::evaluator::evaluate_run`], the same function train mode
//! calls before its export; this module resolves the profile, waits for the jobs and prints.

use anyhow::anyhow;
use clap::Args;
use serde_json::{Value, json};
use skillforge_contract::EvaluatorProfile;
use skillforge_skillopt::evaluator::{
    EvalRunError, effective_profile, evaluate_run, judge_runtime_of, known_evaluator_ids,
};
use skillforge_stage::Wait;

use super::load_run;
use crate::context::Context;
use crate::control::waiter::CliJobs;
use crate::exit::{CliError, CliResult, OK};
use crate::output::print_json;

/// Arguments of `review evaluate`.
#[derive(Debug, Args)]
pub struct EvaluateArgs {
    /// Run id.
    #[arg(long)]
    run: String,
    /// Evaluator id (default: the run metadata's `evaluator_id`).
    #[arg(long)]
    evaluator: Option<String>,
    /// Agent runtime of the judge, e.g. `scripted`, `claude` (default: the run metadata's
    /// `judge_runtime`; none ⇒ the judge stage is skipped with a reason).
    #[arg(long = "judge-runtime", value_name = "NAME")]
    judge_runtime: Option<String>,
    /// With the embedded queue, do not start an in-process worker when none is live.
    #[arg(long = "no-local-worker")]
    no_local_worker: bool,
}

/// Evaluates every item of the run and stores the scores; exit 0 when every evaluation ran (a
/// failing artifact is a result, not an error).
///
/// # Errors
/// Exit 2 for an unknown run, an `--evaluator` outside [`known_evaluator_ids`] or a run that
/// names no evaluator; exit 3 when the store, a blob or
/// the queue is unreachable.
pub async fn run(ctx: &Context, args: EvaluateArgs) -> CliResult {
    let store = ctx.store().await?;
    let run = load_run(&store, &args.run).await?;
    if let Some(id) = args.evaluator.as_deref().map(str::trim) {
        let known = known_evaluator_ids(run.metadata().as_ref());
        if !known.iter().any(|k| k.eq_ignore_ascii_case(id)) {
            return Err(CliError::usage(anyhow!(
                "--evaluator `{id}` is not known for review run `{}`; known: {}",
                run.id,
                known.join(", ")
            )));
        }
    }
    let profile = effective_profile(run.metadata().as_ref(), args.evaluator.as_deref()).ok_or_else(|| {
        CliError::usage(anyhow!(
            "review run `{}` names no evaluator; pass --evaluator ID or create the run with --metadata-json '{{\"evaluator_id\":\"...\"}}'",
            run.id
        ))
    })?;
    let runtime = args
        .judge_runtime
        .clone()
        .filter(|r| !r.trim().is_empty())
        .or_else(|| judge_runtime_of(&profile));
    let jobs =
        CliJobs::new(ctx, ctx.queue().await?, store.clone()).local_worker(!args.no_local_worker);
    let done = evaluate_run(
        &store,
        &ctx.home,
        &run,
        &profile,
        runtime.as_deref(),
        &jobs,
        Wait::Block,
    )
    .await
    .map_err(eval_error)?;
    print_report(
        ctx,
        &run.id,
        &profile,
        runtime.as_deref(),
        &done.evaluations,
    );
    Ok(OK)
}

/// Maps an evaluation error to the command's exit code: an inconsistent run 2, else 3.
fn eval_error(e: EvalRunError) -> CliError {
    match e {
        EvalRunError::Invalid(_) => CliError::usage(anyhow!(e)),
        _ => CliError::env(anyhow!(e)),
    }
}

fn print_report(
    ctx: &Context,
    run_id: &str,
    profile: &EvaluatorProfile,
    runtime: Option<&str>,
    report: &[Value],
) {
    if ctx.json {
        print_json(
            &json!({"run_id": run_id, "profile_id": profile.profile_id, "task_kind": profile.task_kind,
                           "judge_runtime": runtime, "evaluations": report}),
        );
        return;
    }
    println!(
        "evaluated run {run_id} with profile {} ({}), judge runtime {}",
        profile.profile_id,
        profile.task_kind,
        runtime.unwrap_or("none")
    );
    for entry in report {
        let s = |k: &str| entry["stages"][k].as_str().unwrap_or("-").to_owned();
        println!(
            "  {} / {}: checks {}, render {}, judge {}{}",
            entry["item_id"].as_str().unwrap_or(""),
            entry["option"].as_str().unwrap_or(""),
            s("artifact_checks"),
            s("render"),
            s("judge"),
            entry["failure"]["optimizer_hint"]
                .as_str()
                .map(|h| format!(" — hint: {h}"))
                .unwrap_or_default()
        );
    }
}
