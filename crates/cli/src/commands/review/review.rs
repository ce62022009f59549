//! `skillforge review create | review item add | review status`: eval review runs, their items
//! (saved baseline/candidate outputs or ranked options, stored as content-addressed artifacts) and
//! the advisory status (seed "Human Feedback Trial Happy Path", "Ranked Exploration Workflow";
//! S-83, S-84).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, anyhow};
use clap::{Args, Subcommand};
use serde_json::{Value, json};
use skillforge_contract::{driver_for_media_type, is_ranked_mode};
use skillforge_skillopt::promotion::resolve::{draw, version_for_job};
use skillforge_store::artifacts::store_artifact;
use skillforge_store::blobs::BlobStore;
use skillforge_store::feedback::{list_feedback_events, list_ranked_events};
use skillforge_store::review::status::review_status;
use skillforge_store::review::{
    EvalRunRow, NewEvalRun, NewReviewItem, NewReviewOption, RunSettings, add_item, create_run,
    list_items,
};
use skillforge_store::templates::VersionRef;

use super::load_run;
use crate::context::Context;
use crate::exit::{CliError, CliResult, OK};
use crate::output::print_json;

/// `skillforge review item ...`.
#[derive(Debug, Subcommand)]
pub enum ItemCommand {
    /// Add an item: saved baseline and candidate outputs, or one file per ranked option.
    Add(ItemAddArgs),
}

/// Arguments of `review create`.
#[derive(Debug, Args)]
pub struct CreateArgs {
    /// Template `ID` (its current version) or `ID@vN`.
    #[arg(long)]
    template: String,
    /// Target repository (`owner/repo`) the reviewed outputs are for.
    #[arg(long)]
    repo: String,
    /// Run id.
    #[arg(long)]
    run: String,
    /// explore | refine | distill | validate (default validate).
    #[arg(long)]
    mode: Option<String>,
    /// high | medium | low (default: high for explore, medium for refine, else low).
    #[arg(long = "exploration-level")]
    exploration_level: Option<String>,
    /// Options per item, at least 2 (default: 5 for explore, else 2).
    #[arg(long)]
    options: Option<i64>,
    /// Run metadata, a JSON object (e.g. `{"evaluator_id":"landing_page_v1"}`).
    #[arg(long = "metadata-json", value_name = "JSON")]
    metadata_json: Option<String>,
}

/// Arguments of `review item add`.
#[derive(Debug, Args)]
pub struct ItemAddArgs {
    /// Run id.
    #[arg(long)]
    run: String,
    /// Item id, unique in the run.
    #[arg(long)]
    item: String,
    /// Title shown to reviewers.
    #[arg(long)]
    title: Option<String>,
    /// The current template's saved output (A/B runs).
    #[arg(
        long,
        value_name = "FILE",
        requires = "candidate",
        conflicts_with = "option"
    )]
    baseline: Option<PathBuf>,
    /// The candidate's saved output (A/B runs).
    #[arg(long, value_name = "FILE", requires = "baseline")]
    candidate: Option<PathBuf>,
    /// A ranked option `LABEL=FILE` (repeat once per option; labels such as a, b, c).
    #[arg(long = "option", value_name = "LABEL=FILE")]
    option: Vec<String>,
    /// Item metadata, a JSON object (e.g. `{"split":"train"}`).
    #[arg(long = "metadata-json", value_name = "JSON")]
    metadata_json: Option<String>,
}

/// Parses `--metadata-json`: a JSON object, returned compact; `''` when absent.
///
/// # Errors
/// Exit 2 when it is not a JSON object.
pub fn metadata_arg(raw: Option<&str>) -> Result<String, CliError> {
    let Some(raw) = raw.filter(|r| !r.trim().is_empty()) else {
        return Ok(String::new());
    };
    skillforge_contract::limits::check_json(raw)
        .map_err(|e| CliError::usage(anyhow!("--metadata-json {e}")))?;
    let value: Value = serde_json::from_str(raw)
        .map_err(|e| CliError::usage(anyhow!("--metadata-json is not valid JSON: {e}")))?;
    if !value.is_object() {
        return Err(CliError::usage(anyhow!(
            "--metadata-json must be a JSON object"
        )));
    }
    Ok(value.to_string())
}

pub(super) async fn create(ctx: &Context, args: CreateArgs) -> CliResult {
    let settings = RunSettings::normalize(
        args.mode.as_deref(),
        args.exploration_level.as_deref(),
        args.options,
    )
    .map_err(CliError::usage)?;
    let run_id = args.run.trim();
    if run_id.is_empty() || run_id.contains('/') {
        return Err(CliError::usage(anyhow!(
            "--run must be a non-empty id without `/`, got {:?}",
            args.run
        )));
    }
    let metadata_json = metadata_arg(args.metadata_json.as_deref())?;
    let reference = VersionRef::parse(&args.template).ok_or_else(|| {
        CliError::usage(anyhow!(
            "--template {:?} is not `ID` or `ID@vN`",
            args.template
        ))
    })?;
    let store = ctx.store().await?;
    // S-60: a bare `ID` is the current version, or its canary for the sampled fraction.
    let version = version_for_job(store.pool(), &reference, draw()).await.context("resolve template")?.map(|r| r.version).ok_or_else(|| {
        CliError::usage(anyhow!(
            "template `{}` has no such version installed; add it with `skillforge template add`",
            args.template
        ))
    })?;
    let new = NewEvalRun {
        id: run_id.to_owned(),
        template_id: version.template_id.clone(),
        template_version_id: version.id.clone(),
        target_repo: args.repo.trim().to_owned(),
        settings,
        metadata_json,
    };
    let mut tx = store.begin().await?;
    if !create_run(&mut tx, &new)
        .await
        .context("create review run")?
    {
        return Err(CliError::usage(anyhow!(
            "review run `{run_id}` already exists"
        )));
    }
    tx.commit().await.context("commit review run")?;
    let run = load_run(&store, run_id).await?;
    if ctx.json {
        print_json(&run_json(&run));
    } else {
        println!(
            "created review run {} of {} (mode {}, exploration level {}, {} options per item)",
            run.id, run.template_version_id, run.mode, run.exploration_level, run.options_count
        );
    }
    Ok(OK)
}

fn run_json(run: &EvalRunRow) -> Value {
    json!({
        "id": run.id,
        "template_id": run.template_id,
        "template_version_id": run.template_version_id,
        "target_repo": run.target_repo,
        "state": run.state,
        "mode": run.mode,
        "exploration_level": run.exploration_level,
        "options_count": run.options_count,
        "metadata": run.metadata(),
        "created_at": run.created_at,
    })
}

/// Media type from a file extension; `application/octet-stream` when unknown.
pub fn media_type_for(path: &Path) -> &'static str {
    match path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("md" | "markdown") => "text/markdown",
        Some("txt" | "text") => "text/plain",
        Some("json") => "application/json",
        Some("html" | "htm") => "text/html",
        Some("diff" | "patch") => "text/x-diff",
        Some("yml" | "yaml") => "application/yaml",
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("svg") => "image/svg+xml",
        _ => "application/octet-stream",
    }
}

/// Whether `label` is a usable blind option label: lowercase ASCII letters and digits, starting
/// with a letter (the ranking grammar splits on `>`, `=`, `,`, `|`).
fn is_valid_label(label: &str) -> bool {
    label.starts_with(|c: char| c.is_ascii_lowercase())
        && label
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
}

fn parse_options(raw: &[String]) -> Result<Vec<(String, PathBuf)>, CliError> {
    let mut seen = BTreeSet::new();
    let mut options = Vec::new();
    for spec in raw {
        let (label, file) = spec
            .split_once('=')
            .ok_or_else(|| CliError::usage(anyhow!("--option {spec:?} must be LABEL=FILE")))?;
        let label = label.trim().to_lowercase();
        if !is_valid_label(&label) {
            return Err(CliError::usage(anyhow!(
                "--option label {label:?} is invalid; use lowercase letters and digits, starting with a letter"
            )));
        }
        if !seen.insert(label.clone()) {
            return Err(CliError::usage(anyhow!(
                "--option label {label:?} is given twice"
            )));
        }
        options.push((label, PathBuf::from(file)));
    }
    options.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(options)
}

pub(super) async fn item_add(ctx: &Context, args: ItemAddArgs) -> CliResult {
    let item_id = args.item.trim().to_owned();
    if item_id.is_empty() {
        return Err(CliError::usage(anyhow!("--item must not be empty")));
    }
    let metadata_json = metadata_arg(args.metadata_json.as_deref())?;
    let options = parse_options(&args.option)?;
    let store = ctx.store().await?;
    let run = load_run(&store, &args.run).await?;
    let existing = list_items(store.pool(), &run.id)
        .await
        .context("read review items")?;
    if existing.iter().any(|i| i.item.item_id == item_id) {
        return Err(CliError::usage(anyhow!(
            "review run `{}` already has item `{item_id}`",
            run.id
        )));
    }
    let ranked = is_ranked_mode(&run.mode, run.options_count);
    // (artifact id suffix, file, flag) per file to store.
    let mut files: Vec<(String, PathBuf, &str)> = Vec::new();
    match (&args.baseline, &args.candidate, ranked) {
        (Some(baseline), Some(candidate), false) => {
            files.push(("baseline".into(), baseline.clone(), "--baseline"));
            files.push(("candidate".into(), candidate.clone(), "--candidate"));
        }
        (None, None, true) => {
            let n_options = i64::try_from(options.len()).unwrap_or(i64::MAX);
            if n_options != run.options_count {
                return Err(CliError::usage(anyhow!(
                    "review run `{}` is ranked with {} options per item; got {} --option",
                    run.id,
                    run.options_count,
                    options.len()
                )));
            }
            for (label, file) in &options {
                files.push((format!("option-{label}"), file.clone(), "--option"));
            }
        }
        (_, _, true) => {
            return Err(CliError::usage(anyhow!(
                "review run `{}` is ranked (mode {}): give {} --option LABEL=FILE instead of --baseline/--candidate",
                run.id,
                run.mode,
                run.options_count
            )));
        }
        (_, _, false) => {
            return Err(CliError::usage(anyhow!(
                "review run `{}` is an A/B run (mode {}): give --baseline FILE and --candidate FILE",
                run.id,
                run.mode
            )));
        }
    }
    // Every file that cannot be read is named at once (issue 35), before anything is stored.
    let mut contents: Vec<Vec<u8>> = Vec::with_capacity(files.len());
    let mut unreadable: Vec<String> = Vec::new();
    for (_, path, flag) in &files {
        match std::fs::read(path) {
            Ok(bytes) => contents.push(bytes),
            Err(e) => unreadable.push(format!("{flag} file `{}`: {e}", path.display())),
        }
    }
    match unreadable.len() {
        0 => {}
        1 => return Err(CliError::usage(anyhow!("read {}", unreadable[0]))),
        n => {
            return Err(CliError::usage(anyhow!(
                "{n} files cannot be read; nothing was added:\n{}",
                unreadable
                    .iter()
                    .map(|u| format!("  - {u}"))
                    .collect::<Vec<_>>()
                    .join("\n")
            )));
        }
    }
    let blobs = BlobStore::in_home(&ctx.home);
    let mut tx = store.begin().await?;
    let mut new = NewReviewItem {
        item_id: item_id.clone(),
        title: args.title.unwrap_or_default().trim().to_owned(),
        metadata_json,
        ..Default::default()
    };
    let mut artifacts = Vec::new();
    for ((suffix, path, _), bytes) in files.iter().zip(&contents) {
        let artifact_id = format!("{}/{}/{}", run.id, item_id, suffix);
        let media_type = media_type_for(path);
        let row = store_artifact(
            &mut tx,
            &blobs,
            &artifact_id,
            bytes,
            media_type,
            driver_for_media_type(media_type),
        )
        .await
        .with_context(|| format!("store artifact `{artifact_id}`"))?;
        match suffix.as_str() {
            "baseline" => new.baseline_artifact_id = row.id.clone(),
            "candidate" => new.candidate_artifact_id = row.id.clone(),
            other => new.options.push(NewReviewOption {
                label: other.trim_start_matches("option-").to_owned(),
                artifact_id: row.id.clone(),
                ..Default::default()
            }),
        }
        artifacts.push(json!({"id": row.id, "hash": row.hash, "size_bytes": row.size_bytes, "media_type": row.media_type}));
    }
    if !add_item(&mut tx, &run.id, &new)
        .await
        .context("add review item")?
    {
        return Err(CliError::usage(anyhow!(
            "review run `{}` already has item `{item_id}`",
            run.id
        )));
    }
    tx.commit().await.context("commit review item")?;
    if ctx.json {
        print_json(&json!({"run_id": run.id, "item_id": item_id, "artifacts": artifacts}));
    } else {
        println!(
            "added item {item_id} to review run {} ({} artifacts)",
            run.id,
            artifacts.len()
        );
    }
    Ok(OK)
}

pub(super) async fn status(ctx: &Context, run_id: &str) -> CliResult {
    let store = ctx.store().await?;
    let run = load_run(&store, run_id).await?;
    let items = list_items(store.pool(), run_id)
        .await
        .context("read review items")?;
    let feedback = list_feedback_events(store.pool(), run_id)
        .await
        .context("read feedback events")?;
    let ranked = list_ranked_events(store.pool(), run_id)
        .await
        .context("read ranked feedback events")?;
    let status = review_status(&run, &items, &feedback, &ranked);
    if ctx.json {
        print_json(&status);
        return Ok(OK);
    }
    println!(
        "run {} of {} ({})",
        status.run_id,
        status.template_version_id,
        status.state.replace('_', " ")
    );
    println!(
        "mode: {} (exploration level {}, {} options per item)",
        status.mode, status.exploration_level, status.options_count
    );
    println!(
        "items: {} ({} with feedback)",
        status.items, status.items_with_feedback
    );
    println!(
        "feedback: {} events ({} A/B, {} ranked); pairwise preferences: {}",
        status.feedback_count,
        status.feedback_events,
        status.ranked_feedback_events,
        status.pairwise_preferences
    );
    let agreement = status
        .ranking_stability
        .agreement
        .map(|a| format!(", agreement {:.0}%", a * 100.0))
        .unwrap_or_default();
    println!(
        "ranking stability: {}{agreement}",
        status.ranking_stability.level
    );
    let rec = &status.recommendation;
    match (&rec.next_mode, rec.status.as_str()) {
        (_, "withheld") => println!("recommended next mode: withheld ({})", rec.reason),
        (Some(mode), _) => println!(
            "recommended next mode: {mode} ({}; advisory only)",
            rec.reason
        ),
        (None, _) => println!("recommendation: {} (advisory only)", rec.reason),
    }
    Ok(OK)
}
