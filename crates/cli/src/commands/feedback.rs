//! `skillforge feedback markdown export|import`: the blind local review packet (seed "Markdown
//! Feedback Packet"; facts §4; S-85, S-94, S-95).
//!
//! The packet logic lives in [`skillforge_skillopt::packet`] (the train workflow publishes and
//! syncs the same packets); this module parses arguments, maps errors to exit codes and prints.

use std::path::PathBuf;

use anyhow::anyhow;
use clap::{Args, Subcommand};
use serde_json::json;
use skillforge_contract::{ASSIGNMENTS_FILE, FEEDBACK_FILE};
use skillforge_skillopt::packet::{
    INDEX_FILE, MARKDOWN_SOURCE, PacketError, export_packet, import_packet,
};
use skillforge_store::blobs::BlobStore;

use crate::context::Context;
use crate::exit::{CliError, CliResult, OK};
use crate::output::print_json;

pub mod github;

/// `skillforge feedback ...`.
#[derive(Debug, Subcommand)]
pub enum FeedbackCommand {
    /// Blind local Markdown review packets.
    #[command(subcommand)]
    Markdown(MarkdownCommand),
    /// Review through GitHub: publish packets to issues or PRs, sync reviewers' comments.
    #[command(subcommand)]
    Github(github::GithubCommand),
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
        FeedbackCommand::Github(cmd) => github::run(ctx, cmd).await,
    }
}

/// Maps a packet error to its exit code: invalid input 2, files and store 3.
fn packet_error(e: PacketError) -> CliError {
    match e {
        PacketError::Invalid(_) => CliError::usage(anyhow!(e)),
        PacketError::Io(_) | PacketError::Store(_) => CliError::env(anyhow!(e)),
    }
}

async fn export(ctx: &Context, args: ExportArgs) -> CliResult {
    let store = ctx.store().await?;
    let blobs = BlobStore::in_home(&ctx.home);
    let done = export_packet(
        &store,
        &blobs,
        &ctx.home,
        &args.run,
        &args.output,
        args.force,
    )
    .await
    .map_err(packet_error)?;
    if ctx.json {
        print_json(&json!({
            "run_id": done.run_id,
            "packet": args.output.display().to_string(),
            "items": done.n_items,
            "ranked": done.is_ranked,
            "files": [INDEX_FILE, FEEDBACK_FILE, ASSIGNMENTS_FILE],
        }));
    } else {
        println!(
            "wrote review packet for run {} to {} ({} items)",
            done.run_id,
            args.output.display(),
            done.n_items
        );
        println!(
            "next: fill {FEEDBACK_FILE}, then `skillforge feedback markdown import --packet {}`",
            args.output.display()
        );
    }
    Ok(OK)
}

async fn import(ctx: &Context, args: ImportArgs) -> CliResult {
    if let Some(r) = &args.reviewer {
        skillforge_skillopt::packet::check_reviewer(r)
            .map_err(|e| CliError::usage(anyhow!("--reviewer: {e}")))?;
    }
    let store = ctx.store().await?;
    let done = import_packet(&store, &args.packet, args.reviewer.as_deref())
        .await
        .map_err(packet_error)?;
    let counts = done.counts;
    if ctx.json {
        print_json(&json!({
            "run_id": done.run_id,
            "reviewer": done.reviewer,
            "source": MARKDOWN_SOURCE,
            "source_url": done.source_url,
            "feedback_events": {"inserted": counts.feedback_inserted, "updated": counts.feedback_updated},
            "ranked_feedback_events": {"inserted": counts.ranked_inserted, "updated": counts.ranked_updated},
            "read": {"file": FEEDBACK_FILE, "bytes": done.read.bytes, "lines": done.read.lines, "sha256": done.read.sha256, "items": done.read.items},
        }));
    } else {
        println!(
            "imported feedback from {} for run {}: {} A/B events ({} new), {} ranked events ({} new)",
            done.reviewer,
            done.run_id,
            counts.feedback_inserted + counts.feedback_updated,
            counts.feedback_inserted,
            counts.ranked_inserted + counts.ranked_updated,
            counts.ranked_inserted
        );
        // What was read, so that a file cut short but still valid shows here.
        println!(
            "read {FEEDBACK_FILE}: {} bytes, {} lines, {} items, sha256 {}",
            done.read.bytes, done.read.lines, done.read.items, done.read.sha256
        );
    }
    Ok(OK)
}
