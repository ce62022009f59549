//! `skillforge feedback markdown export|import`: the blind local review packet (seed "Markdown
//! Feedback Packet"; facts §4; S-85, S-94, S-95).
//!
//! A packet directory holds `index.md` (instructions and item links), `items/NNN-<item>.md` (one
//! file per item with its blind options), the editable `feedback.yml` and the hidden
//! `.assignments.json` that maps the blind labels back to artifacts.
//!
//! **Architecture Invariant:** packets never carry outcome-bearing details (current first place,
//! ranking stability, recommended mode). Before any feedback exists there are none to show (S-84
//! withholds them), and after feedback exists they must stay hidden (S-85); so an export is a pure
//! function of the run's items and artifacts, whatever feedback the store holds.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, anyhow};
use clap::{Args, Subcommand};
use serde_json::{Value, json};
use skillforge_contract::{
    ASSIGNMENTS_FILE, AssignmentOption, Assignments, BlindAssignment, FEEDBACK_FILE, FeedbackEntry, FeedbackFile,
    RankingText, blind_assignment, is_ranked_mode, parse_assignments, parse_feedback_yml, render_feedback_yml,
    resolve_feedback,
};
use skillforge_store::Store;
use skillforge_store::artifacts::get_artifact;
use skillforge_store::blobs::BlobStore;
use skillforge_store::feedback::{event_created_at_now, write_resolved};
use skillforge_store::review::{EvalRunRow, ReviewItem, list_items};

use crate::commands::review::load_run;
use crate::context::Context;
use crate::exit::{CliError, CliResult, OK};
use crate::output::print_json;

/// `source` of events imported from a Markdown packet (facts §4).
pub const MARKDOWN_SOURCE: &str = "markdown";
/// Index file of a packet.
pub const INDEX_FILE: &str = "index.md";
/// Directory of the per-item files.
pub const ITEMS_DIR: &str = "items";

/// `skillforge feedback ...`.
#[derive(Debug, Subcommand)]
pub enum FeedbackCommand {
    /// Blind local Markdown review packets.
    #[command(subcommand)]
    Markdown(MarkdownCommand),
}

/// `skillforge feedback markdown ...`.
#[derive(Debug, Subcommand)]
pub enum MarkdownCommand {
    /// Write a blind review packet for a run.
    Export(ExportArgs),
    /// Validate a filled packet's feedback.yml and store its de-blinded events (all or nothing).
    Import(ImportArgs),
}

/// Arguments of `feedback markdown export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Run id.
    #[arg(long)]
    run: String,
    /// Packet directory (created).
    #[arg(long, value_name = "DIR")]
    output: PathBuf,
    /// Overwrite a packet directory that already has a feedback.yml.
    #[arg(long)]
    force: bool,
}

/// Arguments of `feedback markdown import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// Packet directory written by `feedback markdown export`.
    #[arg(long, value_name = "DIR")]
    packet: PathBuf,
    /// Reviewer, overriding `reviewer:` in feedback.yml.
    #[arg(long)]
    reviewer: Option<String>,
}

/// Dispatches a `feedback` subcommand.
pub async fn run(ctx: &Context, cmd: FeedbackCommand) -> CliResult {
    match cmd {
        FeedbackCommand::Markdown(MarkdownCommand::Export(args)) => export(ctx, args).await,
        FeedbackCommand::Markdown(MarkdownCommand::Import(args)) => import(ctx, args).await,
    }
}

/// The assignment of one item (facts §4): an A/B item is blinded by
/// [`blind_assignment`]; a ranked item lists its options by label. In a ranked run every item must
/// have exactly `options_count` options.
///
/// # Errors
/// A message naming the item when it cannot be reviewed as the run's mode requires.
pub fn item_assignment(run: &EvalRunRow, item: &ReviewItem) -> Result<BlindAssignment, String> {
    let row = &item.item;
    if item.options.is_empty() {
        if is_ranked_mode(&run.mode, run.options_count) {
            return Err(format!("item `{}` has no options, but run `{}` is ranked", row.item_id, run.id));
        }
        if row.baseline_artifact_id.is_empty() || row.candidate_artifact_id.is_empty() {
            return Err(format!("item `{}` needs both a baseline and a candidate artifact", row.item_id));
        }
        return Ok(blind_assignment(&run.id, &row.item_id, &row.baseline_artifact_id, &row.candidate_artifact_id));
    }
    let n_options = i64::try_from(item.options.len()).unwrap_or(i64::MAX);
    if is_ranked_mode(&run.mode, run.options_count) && n_options != run.options_count {
        return Err(format!(
            "item `{}` has {} options, run `{}` expects {}",
            row.item_id,
            item.options.len(),
            run.id,
            run.options_count
        ));
    }
    Ok(BlindAssignment {
        item_id: row.item_id.clone(),
        options: item
            .options
            .iter()
            .map(|o| AssignmentOption {
                label: o.label.clone(),
                artifact_id: o.artifact_id.clone(),
                role: o.role.clone(),
                metadata_json: o.metadata_json.clone(),
            })
            .collect(),
        ..Default::default()
    })
}

/// File name of the `index`-th item (0-based) under `items/`: `NNN-<item id with anything but
/// ASCII letters, digits, `.`, `_`, `-` replaced by `-`>.md`.
pub fn item_file_name(index: usize, item_id: &str) -> String {
    let slug: String =
        item_id.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '-' }).collect();
    format!("{:03}-{}.md", index + 1, slug.trim_matches('.'))
}

/// A fenced block that cannot be closed early by the content: one backtick more than the longest
/// run inside, at least three.
fn fenced(content: &str) -> String {
    let mut longest = 0;
    let mut current = 0;
    for c in content.chars() {
        current = if c == '`' { current + 1 } else { 0 };
        longest = longest.max(current);
    }
    let fence = "`".repeat((longest + 1).max(3));
    let body = content.strip_suffix('\n').unwrap_or(content);
    format!("{fence}\n{body}\n{fence}\n")
}

/// What a reviewer sees of one artifact: its text fenced, or a note for non-text bytes.
fn artifact_block(bytes: &[u8], media_type: &str) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => fenced(text),
        Err(_) => format!("_Binary artifact ({media_type}, {} bytes); not shown inline._\n", bytes.len()),
    }
}

fn preview_url(metadata_json: &str) -> Option<String> {
    let value: Value = serde_json::from_str(metadata_json).ok()?;
    value.get("preview_url")?.as_str().map(str::to_owned)
}

/// Artifact id → (bytes, media type).
type ArtifactLookup<'a> = dyn Fn(&str) -> Result<(Vec<u8>, String), CliError> + 'a;

fn render_item(
    index: usize,
    item: &ReviewItem,
    assignment: &BlindAssignment,
    artifact: &ArtifactLookup<'_>,
) -> Result<String, CliError> {
    let row = &item.item;
    let title = if row.title.is_empty() { row.item_id.as_str() } else { row.title.as_str() };
    let mut out = format!("# Item {}: {title}\n\nItem id: `{}`\n", index + 1, row.item_id);
    if let Some(metadata) = serde_json::from_str::<Value>(&row.metadata_json).ok().filter(|m| m.as_object().is_some_and(|o| !o.is_empty())) {
        out.push_str(&format!("\n## Context\n\n{}", fenced(&serde_json::to_string_pretty(&metadata).unwrap_or_default())));
    }
    let sides: Vec<(String, &str, String)> = if assignment.options.is_empty() {
        vec![("A".into(), assignment.a.as_str(), String::new()), ("B".into(), assignment.b.as_str(), String::new())]
    } else {
        assignment.options.iter().map(|o| (o.label.to_uppercase(), o.artifact_id.as_str(), o.metadata_json.clone())).collect()
    };
    for (label, artifact_id, metadata_json) in sides {
        let (bytes, media_type) = artifact(artifact_id)?;
        out.push_str(&format!("\n## Option {label}\n\n"));
        if let Some(url) = preview_url(&metadata_json) {
            out.push_str(&format!("Preview: <{url}>\n\n"));
        }
        out.push_str(&artifact_block(&bytes, &media_type));
    }
    Ok(out)
}

fn render_index(run: &EvalRunRow, items: &[ReviewItem], files: &[String], is_ranked: bool) -> String {
    let mut out = format!(
        "# skillforge review packet: {}\n\nTemplate version: `{}` · mode: {} · items: {}\n\n## How to review\n\n",
        run.id,
        run.template_version_id,
        run.mode,
        items.len()
    );
    if is_ranked {
        out.push_str(
            "Open each item file and compare its options. In `feedback.yml`, give each item a `ranking` of every \
             option from best to worst, such as `C > A = D > B` (`>`, `,` or `|` separate ranks; `=` joins equal \
             options). Optionally add `useful_traits` and `rejected_traits` (lists keyed by option label), \
             `required_improvements`, `quality` (poor, acceptable, strong), `continue_mode` (explore, refine, \
             distill, validate), `promote` (yes, no) and `reasoning`. Set `choice: skip` to skip an item.\n",
        );
    } else {
        out.push_str(
            "Open each item file and compare Option A with Option B. In `feedback.yml`, set each item's `choice` to \
             exactly one of `a`, `b`, `tie`, `neither` or `skip`; `reasoning` is optional.\n",
        );
    }
    out.push_str(
        "\nSet `reviewer` at the top of `feedback.yml`, then run \
         `skillforge feedback markdown import --packet <this directory>`. Every item needs an answer; nothing is \
         stored unless the whole file is valid. Do not edit `.assignments.json`.\n\n## Items\n\n",
    );
    for (index, (item, file)) in items.iter().zip(files).enumerate() {
        let row = &item.item;
        let title = if row.title.is_empty() { row.item_id.as_str() } else { row.title.as_str() };
        out.push_str(&format!("{}. [{title}]({ITEMS_DIR}/{file}) (`{}`)\n", index + 1, row.item_id));
    }
    out
}

fn feedback_template(run: &EvalRunRow, assignments: &Assignments) -> Result<String, CliError> {
    let file = FeedbackFile {
        run_id: run.id.clone(),
        reviewer: String::new(),
        items: assignments
            .items
            .iter()
            .map(|a| FeedbackEntry {
                item_id: a.item_id.clone(),
                ranking: (!a.options.is_empty()).then(|| RankingText::One(String::new())),
                ..Default::default()
            })
            .collect(),
    };
    let yaml = render_feedback_yml(&file).context("render feedback.yml")?;
    Ok(format!(
        "# skillforge feedback for review run {}: set reviewer, then answer every item (see index.md).\n\
         # A/B items: choice is one of a, b, tie, neither, skip.\n\
         # Ranked items: ranking such as \"C > A = D > B\"; choice: skip skips the item.\n{yaml}",
        run.id
    ))
}

fn write(path: &Path, text: &str) -> Result<(), CliError> {
    std::fs::write(path, text).with_context(|| format!("write `{}`", path.display())).map_err(CliError::env)
}

async fn export(ctx: &Context, args: ExportArgs) -> CliResult {
    let store = ctx.store().await?;
    let run = load_run(&store, &args.run).await?;
    let items = list_items(store.pool(), &run.id).await.context("read review items")?;
    if items.is_empty() {
        return Err(CliError::usage(anyhow!("review run `{}` has no items; add them with `skillforge review item add`", run.id)));
    }
    let assignments = Assignments {
        run_id: run.id.clone(),
        items: items
            .iter()
            .map(|item| item_assignment(&run, item))
            .collect::<Result<_, _>>()
            .map_err(|e| CliError::usage(anyhow!("export packet for review run `{}`: {e}", run.id)))?,
    };
    let feedback_path = args.output.join(FEEDBACK_FILE);
    if feedback_path.exists() && !args.force {
        return Err(CliError::usage(anyhow!(
            "`{}` already exists; import it first or pass --force to overwrite the packet",
            feedback_path.display()
        )));
    }
    let blobs = BlobStore::in_home(&ctx.home);
    let mut contents = std::collections::BTreeMap::new();
    for assignment in &assignments.items {
        let ids = [assignment.a.clone(), assignment.b.clone()]
            .into_iter()
            .chain(assignment.options.iter().map(|o| o.artifact_id.clone()))
            .filter(|id| !id.is_empty());
        for id in ids {
            let row = get_artifact(store.pool(), &id)
                .await
                .context("read artifact")?
                .ok_or_else(|| CliError::usage(anyhow!("artifact `{id}` is not registered")))?;
            let bytes = blobs.get(&row.hash).with_context(|| format!("read artifact `{id}`")).map_err(CliError::env)?;
            contents.insert(id, (bytes, row.media_type));
        }
    }
    let artifact = |id: &str| -> Result<(Vec<u8>, String), CliError> {
        contents.get(id).cloned().ok_or_else(|| CliError::usage(anyhow!("artifact `{id}` is not registered")))
    };
    let items_dir = args.output.join(ITEMS_DIR);
    std::fs::create_dir_all(&items_dir)
        .with_context(|| format!("create packet directory `{}`", items_dir.display()))
        .map_err(CliError::env)?;
    let mut files = Vec::new();
    for (index, (item, assignment)) in items.iter().zip(&assignments.items).enumerate() {
        let name = item_file_name(index, &item.item.item_id);
        write(&items_dir.join(&name), &render_item(index, item, assignment, &artifact)?)?;
        files.push(name);
    }
    let is_ranked = assignments.items.iter().any(|a| !a.options.is_empty());
    write(&args.output.join(INDEX_FILE), &render_index(&run, &items, &files, is_ranked))?;
    let mut assignments_text = serde_json::to_string_pretty(&assignments).context("encode assignments")?;
    assignments_text.push('\n');
    write(&args.output.join(ASSIGNMENTS_FILE), &assignments_text)?;
    write(&feedback_path, &feedback_template(&run, &assignments)?)?;
    if ctx.json {
        print_json(&json!({
            "run_id": run.id,
            "packet": args.output.display().to_string(),
            "items": items.len(),
            "ranked": is_ranked,
            "files": [INDEX_FILE, FEEDBACK_FILE, ASSIGNMENTS_FILE],
        }));
    } else {
        println!("wrote review packet for run {} to {} ({} items)", run.id, args.output.display(), items.len());
        println!("next: fill {FEEDBACK_FILE}, then `skillforge feedback markdown import --packet {}`", args.output.display());
    }
    Ok(OK)
}

/// Checks that a packet still describes the run as stored: every assigned item exists and shows the
/// same artifacts (A/B) or the same option labels and artifacts (ranked).
fn check_packet_matches(run: &EvalRunRow, assignments: &Assignments, items: &[ReviewItem]) -> Result<(), String> {
    for assignment in &assignments.items {
        let item_id = assignment.item_id.trim();
        let item = items
            .iter()
            .find(|i| i.item.item_id == item_id)
            .ok_or_else(|| format!("packet item `{item_id}` is not in review run `{}`", run.id))?;
        let stale = || format!("packet item `{item_id}` no longer matches review run `{}`; export a fresh packet", run.id);
        if assignment.options.is_empty() {
            if assignment.baseline != item.item.baseline_artifact_id || assignment.candidate != item.item.candidate_artifact_id {
                return Err(stale());
            }
        } else {
            let stored: Vec<(&str, &str)> = item.options.iter().map(|o| (o.label.as_str(), o.artifact_id.as_str())).collect();
            let mut packet: Vec<(String, &str)> =
                assignment.options.iter().map(|o| (o.label.trim().to_lowercase(), o.artifact_id.as_str())).collect();
            packet.sort();
            if stored.len() != packet.len() || stored.iter().zip(&packet).any(|(s, p)| s.0 != p.0 || s.1 != p.1) {
                return Err(stale());
            }
        }
    }
    Ok(())
}

fn read_packet_file(dir: &Path, name: &str) -> Result<String, CliError> {
    let path = dir.join(name);
    std::fs::read_to_string(&path).map_err(|e| CliError::usage(anyhow!("read packet file `{}`: {e}", path.display())))
}

async fn import(ctx: &Context, args: ImportArgs) -> CliResult {
    let dir = std::fs::canonicalize(&args.packet)
        .map_err(|e| CliError::usage(anyhow!("open packet directory `{}`: {e}", args.packet.display())))?;
    let refuse = |e: &dyn std::fmt::Display| CliError::usage(anyhow!("import packet `{}`: {e}; nothing was written", dir.display()));
    let assignments = parse_assignments(&read_packet_file(&dir, ASSIGNMENTS_FILE)?).map_err(|e| refuse(&e))?;
    let feedback = parse_feedback_yml(&read_packet_file(&dir, FEEDBACK_FILE)?).map_err(|e| refuse(&e))?;
    let resolved = resolve_feedback(&assignments, &feedback, args.reviewer.as_deref()).map_err(|e| refuse(&e))?;
    let store: Store = ctx.store().await?;
    let run = load_run(&store, &resolved.run_id).await?;
    let items = list_items(store.pool(), &run.id).await.context("read review items")?;
    check_packet_matches(&run, &assignments, &items).map_err(|e| refuse(&e))?;
    let source_url = dir.display().to_string();
    let mut tx = store.begin().await?;
    let counts = write_resolved(&mut tx, &resolved, MARKDOWN_SOURCE, &source_url, &event_created_at_now())
        .await
        .context("store feedback events")?;
    tx.commit().await.context("commit feedback events")?;
    if ctx.json {
        print_json(&json!({
            "run_id": run.id,
            "reviewer": resolved.reviewer,
            "source": MARKDOWN_SOURCE,
            "source_url": source_url,
            "feedback_events": {"inserted": counts.feedback_inserted, "updated": counts.feedback_updated},
            "ranked_feedback_events": {"inserted": counts.ranked_inserted, "updated": counts.ranked_updated},
        }));
    } else {
        println!(
            "imported feedback from {} for run {}: {} A/B events ({} new), {} ranked events ({} new)",
            resolved.reviewer,
            run.id,
            counts.feedback_inserted + counts.feedback_updated,
            counts.feedback_inserted,
            counts.ranked_inserted + counts.ranked_updated,
            counts.ranked_inserted
        );
    }
    Ok(OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn item_file_names_are_ordered_and_safe() {
        assert_eq!(item_file_name(0, "item-001"), "001-item-001.md");
        assert_eq!(item_file_name(11, "../a b/c"), "012--a-b-c.md");
    }

    #[test]
    fn fence_outlasts_backticks_in_content() {
        assert_eq!(fenced("x\n"), "```\nx\n```\n");
        assert_eq!(fenced("a ```` b"), "`````\na ```` b\n`````\n");
    }
}
