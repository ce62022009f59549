//! `skillforge binary run|show|lessons`: BINEVAL binary evaluation and its lessons (seed: SkillOpt,
//! "Binary evaluation (BINEVAL, off by default)", "Binary-disagreement lessons (#527)"; S-42..S-50).
//!
//! `run` answers every question of a set on a `--source` file, deterministically or one question
//! per `agent` job with a reviewer of another family than the template's, then upserts the
//! verdicts with their weights and prints the weighted scores; `show` re-aggregates the stored
//! rows to the same scores; `lessons` classifies verdicts across runs and, with `--apply` only,
//! replaces the template's synthetic lesson run.

use std::path::PathBuf;

use anyhow::anyhow;
use clap::{Args, Subcommand};
use serde_json::json;
use skillforge_skillopt::ab::ask::declared_runtimes;
use skillforge_skillopt::ab::judge::{JudgeSelection, agent_families, select_judges};
use skillforge_skillopt::bineval::aggregate::{
    Scores, VerdictRow, aggregate, parse_answer, question_prompt, run_deterministic,
};
use skillforge_skillopt::bineval::lessons::{classify, lesson_events, lesson_run_id};
use skillforge_skillopt::bineval::set::{QuestionSet, load};
use skillforge_store::binary::{
    VerdictRecord, list_verdicts, replace_lesson_run, upsert_verdict, verdicts_of_template,
};
use skillforge_store::review::get_run;
use skillforge_store::templates::{begin_write, current_version, get_template, get_version};

use crate::context::Context;
use crate::control::agent::{AgentCall, call_agent};
use crate::exit::{CliError, CliResult, OK};
use crate::output::print_json;

/// `skillforge binary ...`.
#[derive(Debug, Subcommand)]
pub enum BinaryCommand {
    /// Answer a question set on a source file and store the verdicts.
    Run(RunArgs),
    /// Re-aggregate the stored verdicts of a run.
    Show {
        /// Review run id.
        #[arg(long)]
        run: String,
    },
    /// Classify verdicts across a template's runs into lessons (preview; `--apply` writes).
    Lessons(LessonsArgs),
}

/// `binary run`.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("runner").required(true).args(["deterministic", "reviewer"])))]
pub struct RunArgs {
    /// Question set (YAML, or JSON by `.json`).
    #[arg(long)]
    pub set: PathBuf,
    /// Review run the verdicts belong to.
    #[arg(long)]
    pub run: String,
    /// The output to evaluate.
    #[arg(long)]
    pub source: PathBuf,
    /// Answer from the questions' contains / not_contains / regex / not_regex assertions.
    #[arg(long)]
    pub deterministic: bool,
    /// Reviewer runtimes in preference order (comma list); the first of a family other than the
    /// template's answers every question.
    #[arg(long, value_name = "RUNTIME")]
    pub reviewer: Option<String>,
}

/// `binary lessons`.
#[derive(Debug, Args)]
pub struct LessonsArgs {
    /// Template id.
    #[arg(long)]
    pub template: String,
    /// Question set, so lessons carry the questions' wording.
    #[arg(long)]
    pub set: Option<PathBuf>,
    /// Only these runs (repeatable).
    #[arg(long = "run")]
    pub runs: Vec<String>,
    /// Drop stable-yes traits.
    #[arg(long)]
    pub no_passes: bool,
    /// Write the lessons (a full replace of the synthetic run).
    #[arg(long)]
    pub apply: bool,
}

/// Dispatches a `binary` subcommand.
pub async fn run(ctx: &Context, cmd: BinaryCommand) -> CliResult {
    match cmd {
        BinaryCommand::Run(args) => run_set(ctx, args).await,
        BinaryCommand::Show { run } => show(ctx, &run).await,
        BinaryCommand::Lessons(args) => lessons(ctx, args).await,
    }
}

fn load_set(path: &std::path::Path) -> Result<QuestionSet, CliError> {
    load(path).map_err(CliError::usage)
}

async fn run_set(ctx: &Context, args: RunArgs) -> CliResult {
    let set = load_set(&args.set)?;
    let source = std::fs::read_to_string(&args.source)
        .map_err(|e| CliError::usage(anyhow!("read --source `{}`: {e}", args.source.display())))?;
    let store = ctx.store().await?;
    let run = get_run(store.pool(), &args.run).await?.ok_or_else(|| {
        CliError::usage(anyhow!(
            "review run `{}` not found (see `skillforge review create`)",
            args.run
        ))
    })?;
    let rows = if args.deterministic {
        let (rows, unanswerable) = run_deterministic(&set, &source);
        if !unanswerable.is_empty() {
            return Err(CliError::usage(anyhow!(
                "question set `{}`: question(s) {} have no deterministic assertion (contains, not_contains, regex, \
                 not_regex); use --reviewer, nothing was written",
                args.set.display(),
                unanswerable.join(", ")
            )));
        }
        rows
    } else {
        let version = get_version(store.pool(), &run.template_version_id).await?;
        let declared = version
            .map(|v| declared_runtimes(&v.metadata_json))
            .unwrap_or_default();
        reviewer_rows(ctx, &set, &source, &args, &declared).await?
    };
    let mut tx = begin_write(&store).await?;
    for row in &rows {
        upsert_verdict(&mut tx, &record_of(&args.run, row)).await?;
    }
    tx.commit().await?;
    print_scores(ctx, &args.run, &rows, &aggregate(&rows));
    Ok(OK)
}

/// One agent job per question (S-44), by the first reviewer of another family.
async fn reviewer_rows(
    ctx: &Context,
    set: &QuestionSet,
    source: &str,
    args: &RunArgs,
    declared: &[String],
) -> Result<Vec<VerdictRow>, CliError> {
    let listed: Vec<String> = args
        .reviewer
        .as_deref()
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .map(str::to_owned)
        .collect();
    let mut available = Vec::new();
    for runtime in &listed {
        let profile = skillforge_runner_agent::find(runtime)
            .map_err(|e| CliError::usage(anyhow!("--reviewer: {e}")))?;
        available.push((profile.name.clone(), profile.family.clone()));
    }
    let families = agent_families(declared, "scripted");
    let reviewer = match select_judges(&families, &available, 1) {
        JudgeSelection::Judges(j) => j[0].0.clone(),
        JudgeSelection::SelfFamily(message) => {
            return Err(CliError::usage(anyhow!("{message}; nothing was written")));
        }
    };
    let backend = ctx.queue().await?;
    let nonce = uuid::Uuid::now_v7().simple().to_string();
    let mut rows = Vec::new();
    let mut unanswered = Vec::new();
    for (dimension, question) in set.questions() {
        let call = AgentCall {
            stages: &skillforge_skillopt::BINEVAL_SOURCE,
            stage: "question",
            runtime: &reviewer,
            prompt: question_prompt(question, source),
            key: format!("bineval:{}:{nonce}:{}", args.run, question.id),
            template_version: None,
            model: None,
        };
        let answer = call_agent(ctx, &backend, call).await?;
        match parse_answer(&answer.message) {
            Some((yes, explanation)) => rows.push(VerdictRow {
                question_id: question.id.clone(),
                dimension: dimension.name.clone(),
                yes,
                explanation,
                question_weight: question.weight,
                dimension_weight: dimension.weight,
            }),
            None => unanswered.push(question.id.clone()),
        }
    }
    if !unanswered.is_empty() {
        eprintln!(
            "note: reviewer {reviewer} gave no readable yes/no for: {} (left unanswered, not scored)",
            unanswered.join(", ")
        );
    }
    Ok(rows)
}

fn record_of(run_id: &str, row: &VerdictRow) -> VerdictRecord {
    VerdictRecord {
        run_id: run_id.to_owned(),
        question_id: row.question_id.clone(),
        dimension: row.dimension.clone(),
        verdict: if row.yes { "yes" } else { "no" }.to_owned(),
        explanation: row.explanation.clone(),
        question_weight: row.question_weight,
        dimension_weight: row.dimension_weight,
        created_at: String::new(),
    }
}

fn row_of(r: &VerdictRecord) -> VerdictRow {
    VerdictRow {
        question_id: r.question_id.clone(),
        dimension: r.dimension.clone(),
        yes: r.verdict == "yes",
        explanation: r.explanation.clone(),
        question_weight: r.question_weight,
        dimension_weight: r.dimension_weight,
    }
}

fn print_scores(ctx: &Context, run_id: &str, rows: &[VerdictRow], scores: &Scores) {
    if ctx.json {
        print_json(
            &json!({"run_id": run_id, "verdicts": rows, "dimension_scores": scores.dimensions, "overall": scores.overall}),
        );
        return;
    }
    for row in rows {
        println!(
            "{:<24} {:<16} {:<3} {}",
            row.question_id,
            row.dimension,
            if row.yes { "yes" } else { "no" },
            row.explanation
        );
    }
    for (dimension, score) in &scores.dimensions {
        println!("dimension {dimension}: {score:.4}");
    }
    match scores.overall {
        Some(overall) => println!("overall: {overall:.4}"),
        None => println!("overall: none (no verdicts)"),
    }
}

async fn show(ctx: &Context, run_id: &str) -> CliResult {
    let store = ctx.store().await?;
    let rows: Vec<VerdictRow> = list_verdicts(store.pool(), run_id)
        .await?
        .iter()
        .map(row_of)
        .collect();
    if rows.is_empty() && get_run(store.pool(), run_id).await?.is_none() {
        return Err(CliError::usage(anyhow!("review run `{run_id}` not found")));
    }
    print_scores(ctx, run_id, &rows, &aggregate(&rows));
    Ok(OK)
}

async fn lessons(ctx: &Context, args: LessonsArgs) -> CliResult {
    let set = args.set.as_deref().map(load_set).transpose()?;
    let store = ctx.store().await?;
    if get_template(store.pool(), &args.template).await?.is_none() {
        return Err(CliError::usage(anyhow!(
            "agent template `{}` is not installed",
            args.template
        )));
    }
    let verdicts: Vec<_> = verdicts_of_template(store.pool(), &args.template, &args.runs)
        .await?
        .into_iter()
        .map(|r| (r.run_id, r.question_id, r.dimension, r.verdict == "yes"))
        .collect();
    let lessons = classify(&verdicts, set.as_ref(), !args.no_passes);
    let mut written = None;
    if args.apply {
        let version = current_version(store.pool(), &args.template)
            .await?
            .map(|v| v.id)
            .unwrap_or_default();
        let events = lesson_events(
            &args.template,
            &lessons,
            &skillforge_store::feedback::event_created_at_now(),
        );
        let mut tx = begin_write(&store).await?;
        let n = replace_lesson_run(
            &mut tx,
            &lesson_run_id(&args.template),
            &args.template,
            &version,
            &events,
        )
        .await?;
        tx.commit().await?;
        written = Some(n);
    }
    if ctx.json {
        print_json(
            &json!({"template": args.template, "run_id": lesson_run_id(&args.template), "lessons": lessons, "applied": written}),
        );
        return Ok(OK);
    }
    for lesson in &lessons {
        // The kind as its JSON name in words (`stable no`), not Rust's `StableNo`.
        let kind = serde_json::to_value(lesson.kind)
            .ok()
            .and_then(|v| v.as_str().map(|s| s.replace('_', " ")))
            .unwrap_or_default();
        println!(
            "{:<24} {:<10} {kind}: {}",
            lesson.question_id, lesson.dimension, lesson.text
        );
    }
    match written {
        Some(n) => println!(
            "applied: {n} lesson event(s) in run {}",
            lesson_run_id(&args.template)
        ),
        None => println!(
            "preview only: nothing written (add --apply to write {} lesson event(s))",
            lessons.len()
        ),
    }
    Ok(OK)
}
