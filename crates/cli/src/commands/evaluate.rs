//! `skillforge review evaluate --run ID [--evaluator ID] [--judge-runtime NAME]`: evaluates every
//! item's options (ranked runs) or candidate output (A/B runs) against the run's evaluator
//! profile — artifact checks, then render adapters, then the LLM judge as an engine `agent` job —
//! and stores the contract `EvaluatorScore`s in the item's metadata, so the training-package
//! export carries them and `optimizer distill` turns failure packets into guidance (seed
//! "Evaluator profiles and structured failures"; S-101).
//!
//! Where a score goes: an A/B item's candidate score in `metadata.evaluator_score` (one object);
//! a ranked item's option scores in `metadata.evaluator_scores` (label order, each score's
//! `metadata.option` naming its label). Both keys are what `optimizer distill` reads; a re-run
//! replaces them. Judge jobs carry the idempotency key
//! `evaluate:<run>:<item>:<label>:<sha256 of the prompt>`, so re-evaluating unchanged outputs
//! returns the recorded verdicts instead of asking again.
//!
//! Render adapters (`playwright`, `render_smoke`) run as `process` jobs only when their tool is
//! on PATH (`config.tool`, default `playwright`) and `config.command` (argv) is given; the
//! command reads the artifact from the file named by `SKILLFORGE_ARTIFACT`, exit 0 = pass.
//! Otherwise they are recorded as skipped with the reason.

use std::sync::Arc;

use anyhow::{Context as _, anyhow};
use chrono::Utc;
use clap::Args;
use serde_json::{Map, Value, json};
use skillforge_contract::{EvaluatorCheckConfig, EvaluatorProfile, EvaluatorScore};
use skillforge_engine::{Job, JobSpec, JobState, QueueBackend};
use skillforge_runner_agent::AgentReport;
use skillforge_runner_process::ProcessPayload;
use skillforge_store::artifacts::get_artifact;
use skillforge_store::blobs::BlobStore;
use skillforge_store::review::{ReviewItem, list_items, set_item_metadata};
use skillforge_workflows::evaluator::{
    Artifact, CheckOutcome, CheckState, EVALUATE_WORKFLOW, Evaluation, JudgeOutcome, JudgeStep, RenderStep,
    effective_profile, judge_job, judge_runtime_of, judge_runtime_problem, parse_judge_verdict,
};

use crate::commands::review::load_run;
use crate::commands::wait::await_job;
use crate::context::Context;
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

/// One evaluated artifact: item, label (`candidate` for A/B items), artifact id.
struct Target {
    label: String,
    artifact_id: String,
}

fn targets(item: &ReviewItem) -> Vec<Target> {
    if !item.options.is_empty() {
        return item.options.iter().map(|o| Target { label: o.label.clone(), artifact_id: o.artifact_id.clone() }).collect();
    }
    let candidate = &item.item.candidate_artifact_id;
    if candidate.is_empty() {
        return Vec::new();
    }
    vec![Target { label: "candidate".into(), artifact_id: candidate.clone() }]
}

/// Evaluates every item of the run and stores the scores; exit 0 when every evaluation ran (a
/// failing artifact is a result, not an error).
///
/// # Errors
/// Exit 2 for an unknown run or a run that names no evaluator; exit 3 when the store, a blob or
/// the queue is unreachable.
pub async fn run(ctx: &Context, args: EvaluateArgs) -> CliResult {
    let store = ctx.store().await?;
    let run = load_run(&store, &args.run).await?;
    let profile = effective_profile(run.metadata().as_ref(), args.evaluator.as_deref()).ok_or_else(|| {
        CliError::usage(anyhow!(
            "review run `{}` names no evaluator; pass --evaluator ID or create the run with --metadata-json '{{\"evaluator_id\":\"...\"}}'",
            run.id
        ))
    })?;
    let runtime = args.judge_runtime.clone().filter(|r| !r.trim().is_empty()).or_else(|| judge_runtime_of(&profile));
    let items = list_items(store.pool(), &run.id).await.context("read review items")?;
    let blobs = BlobStore::in_home(&ctx.home);
    let mut queue: Option<Arc<dyn QueueBackend>> = None;
    let mut report = Vec::new();
    for item in &items {
        let item_id = item.item.item_id.clone();
        let mut scores: Vec<(String, EvaluatorScore)> = Vec::new();
        for target in targets(item) {
            let row = get_artifact(store.pool(), &target.artifact_id)
                .await
                .context("read artifact")?
                .ok_or_else(|| anyhow!("artifact `{}` of item `{item_id}` is not registered", target.artifact_id))?;
            let bytes = blobs.get(&row.hash).with_context(|| format!("read blob of artifact `{}`", row.id))?;
            let title = if item.item.title.is_empty() { item_id.as_str() } else { item.item.title.as_str() };
            let artifact = Artifact { id: &target.artifact_id, title, bytes: &bytes };
            let mut evaluation = Evaluation::start(&profile, &artifact);
            let started_at = Utc::now();
            let mut outcomes = Vec::new();
            for step in evaluation.render_steps() {
                outcomes.push(match step {
                    RenderStep::Skip(outcome) => outcome,
                    RenderStep::Run(check) => {
                        let place = RenderPlace { run: &run.id, item: &item_id, label: &target.label };
                        run_render(ctx, &args, &mut queue, &check, &place, &bytes).await?
                    }
                });
            }
            evaluation.record_render(outcomes, started_at, Utc::now());
            let problem = runtime.as_deref().and_then(judge_runtime_problem);
            match evaluation.judge_step(runtime.as_deref(), problem) {
                JudgeStep::Skip(reason) => evaluation.record_judge_skip(&reason, Utc::now()),
                JudgeStep::Run(request) => {
                    let started_at = Utc::now();
                    let key = format!(
                        "evaluate:{}:{item_id}:{}:{}",
                        run.id,
                        target.label,
                        skillforge_workflows::evaluator::judge::prompt_hash(&request.prompt)
                    );
                    let spec = judge_job(&request, key);
                    let job = submit_and_wait(ctx, &args, &mut queue, &spec).await?;
                    let outcome = judge_outcome(&job);
                    evaluation.record_judge(request, outcome, started_at, Utc::now());
                }
            }
            let mut score = evaluation.finish();
            score.metadata = Some(json!({"artifact_id": target.artifact_id, "option": target.label}));
            report.push(summary(&item_id, &target.label, &score));
            scores.push((target.label, score));
        }
        if scores.is_empty() {
            continue;
        }
        let metadata = item_metadata(&item.item.metadata_json, !item.options.is_empty(), &scores)?;
        let mut tx = store.begin().await?;
        if !set_item_metadata(&mut tx, &run.id, &item_id, &metadata).await.context("store evaluator scores")? {
            return Err(CliError::usage(anyhow!("review run `{}` has no item `{item_id}`", run.id)));
        }
        tx.commit().await.context("commit evaluator scores")?;
    }
    print_report(ctx, &run.id, &profile, runtime.as_deref(), &report);
    Ok(OK)
}

/// The item's metadata object with `evaluator_score` (A/B) or `evaluator_scores` (ranked)
/// replaced; other keys kept.
fn item_metadata(existing: &str, is_ranked: bool, scores: &[(String, EvaluatorScore)]) -> Result<String, CliError> {
    let mut map = match serde_json::from_str::<Value>(existing) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    map.remove("evaluator_score");
    map.remove("evaluator_scores");
    let to_value = |s: &EvaluatorScore| serde_json::to_value(s).context("serialize evaluator score");
    if is_ranked {
        let list = scores.iter().map(|(_, s)| to_value(s)).collect::<Result<Vec<_>, _>>()?;
        map.insert("evaluator_scores".into(), Value::Array(list));
    } else if let Some((_, score)) = scores.first() {
        map.insert("evaluator_score".into(), to_value(score)?);
    }
    Ok(Value::Object(map).to_string())
}

async fn submit_and_wait(
    ctx: &Context,
    args: &EvaluateArgs,
    queue: &mut Option<Arc<dyn QueueBackend>>,
    spec: &JobSpec,
) -> Result<Job, CliError> {
    let backend = match queue {
        Some(b) => b.clone(),
        None => {
            let b = ctx.queue().await?;
            *queue = Some(b.clone());
            b
        }
    };
    let enqueued = backend.enqueue(spec).await?;
    await_job(ctx, &backend, &enqueued.job_id, &spec.queue, !args.no_local_worker).await
}

/// The judge's verdict from a finished `agent` job; anything else is a stage error.
fn judge_outcome(job: &Job) -> JudgeOutcome {
    let job_id = job.id.clone();
    let report = job.outcome.as_ref().and_then(|o| serde_json::from_value::<AgentReport>(o.detail.clone()).ok());
    if job.state != JobState::Succeeded {
        let why = job.error.clone().unwrap_or_else(|| format!("ended {}", job.state));
        return JudgeOutcome::Error { reason: format!("judge job failed: {why}"), job_id };
    }
    let Some(report) = report else {
        return JudgeOutcome::Error { reason: "judge job left no agent report".into(), job_id };
    };
    let Some(message) = report.final_message.as_deref() else {
        return JudgeOutcome::Error { reason: "judge verdict unreadable: no final message".into(), job_id };
    };
    match parse_judge_verdict(message) {
        Ok((verdict, reasoning)) => {
            JudgeOutcome::Verdict { verdict, reasoning, runtime: report.runtime, family: report.family, job_id }
        }
        Err(reason) => JudgeOutcome::Error { reason, job_id },
    }
}

/// Where a render adapter's artifact copy goes.
struct RenderPlace<'a> {
    run: &'a str,
    item: &'a str,
    label: &'a str,
}

/// Runs render adapter `check` as a `process` job when its tool is present and a command is
/// configured; otherwise a `skipped` outcome with the reason.
async fn run_render(
    ctx: &Context,
    args: &EvaluateArgs,
    queue: &mut Option<Arc<dyn QueueBackend>>,
    check: &EvaluatorCheckConfig,
    place: &RenderPlace<'_>,
    bytes: &[u8],
) -> Result<CheckOutcome, CliError> {
    let config = check.config.clone().unwrap_or(Value::Null);
    let tool = config.get("tool").and_then(Value::as_str).unwrap_or("playwright").to_owned();
    if !on_path(&tool) {
        return Ok(CheckOutcome::new(check, CheckState::Skipped, format!("render tool `{tool}` not found on PATH")));
    }
    let command: Vec<String> = config
        .get("command")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default();
    if command.is_empty() {
        return Ok(CheckOutcome::new(
            check,
            CheckState::Skipped,
            format!("render tool `{tool}` is present but check `{}` configures no `command`", check.id),
        ));
    }
    let dir = ctx.home.join("evaluate").join(place.run).join(place.item).join(place.label);
    std::fs::create_dir_all(&dir).with_context(|| format!("create `{}`", dir.display()))?;
    let path = dir.join("artifact");
    std::fs::write(&path, bytes).with_context(|| format!("write `{}`", path.display()))?;
    let mut payload = ProcessPayload::argv(command);
    payload.env.insert("SKILLFORGE_ARTIFACT".into(), path.display().to_string());
    payload.cwd = Some(dir);
    let mut spec = JobSpec::new("process", serde_json::to_value(&payload).context("serialize render payload")?);
    spec.workflow = EVALUATE_WORKFLOW.to_owned();
    spec.stage = "render".to_owned();
    spec.timeout_ms = config.get("timeout_secs").and_then(Value::as_u64).unwrap_or(120) * 1000;
    spec.retry_failed_runs = false;
    let job = submit_and_wait(ctx, args, queue, &spec).await?;
    let tail = job.outcome.as_ref().map(|o| format!("{}{}", o.stdout_tail, o.stderr_tail)).unwrap_or_default();
    let mut outcome = if job.state == JobState::Succeeded {
        CheckOutcome::new(check, CheckState::Passed, format!("render command exited 0 (job {})", job.id))
    } else {
        let why = job.error.clone().unwrap_or_else(|| format!("ended {}", job.state));
        let mut failed = CheckOutcome::new(check, CheckState::Failed, format!("render command failed: {why}"));
        failed.optimizer_hint = config
            .get("optimizer_hint")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| format!("Make the output pass the `{}` render check.", check.id));
        failed
    };
    let tail = tail.trim();
    if !tail.is_empty() {
        outcome.evidence.push(tail.chars().rev().take(400).collect::<Vec<_>>().into_iter().rev().collect());
    }
    Ok(outcome)
}

fn on_path(program: &str) -> bool {
    if program.contains('/') {
        return std::path::Path::new(program).is_file();
    }
    std::env::var_os("PATH").is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

fn summary(item_id: &str, label: &str, score: &EvaluatorScore) -> Value {
    let stage = |name: &str| score.stage_status.iter().find(|s| s.stage == name).map(|s| s.status.clone());
    json!({
        "item_id": item_id,
        "option": label,
        "contract_status": score.contract_status,
        "quality_status": score.quality_status,
        "hard": score.hard,
        "soft": score.soft,
        "stages": {"artifact_checks": stage("artifact_checks"), "render": stage("render"), "judge": stage("judge")},
        "failure": score.failure.as_ref().map(|f| json!({"primary_reason": f.primary_reason, "optimizer_hint": f.optimizer_hint})),
    })
}

fn print_report(ctx: &Context, run_id: &str, profile: &EvaluatorProfile, runtime: Option<&str>, report: &[Value]) {
    if ctx.json {
        print_json(&json!({"run_id": run_id, "profile_id": profile.profile_id, "task_kind": profile.task_kind,
                           "judge_runtime": runtime, "evaluations": report}));
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
            entry["failure"]["optimizer_hint"].as_str().map(|h| format!(" — hint: {h}")).unwrap_or_default()
        );
    }
}
