//! `skillforge feedback github publish|sync`: review through GitHub issues and PR comments (seed
//! "GitHub Feedback Collector"; S-96, S-97). The logic is [`skillforge_workflows::github_review`];
//! this module parses arguments, builds the GitHub client (base URL and token from the
//! environment — `SKILLFORGE_GITHUB_API_URL`, `SKILLFORGE_GITHUB_TOKEN` / `GITHUB_TOKEN` /
//! `GH_TOKEN` — else `[github] api_url` / `token`), maps errors to exit codes and prints.

use anyhow::anyhow;
use clap::{Args, Subcommand};
use serde_json::json;
use skillforge_forge::RepoRef;
use skillforge_forge::github::GitHub;
use skillforge_store::blobs::BlobStore;
use skillforge_workflows::github_review::{GithubReviewError, Target, publish, resolve_repo, sync};

use crate::context::Context;
use crate::exit::{CliError, CliResult, OK};
use crate::output::print_json;

/// `skillforge feedback github ...`.
#[derive(Debug, Subcommand)]
pub enum GithubCommand {
    /// Publish a run's blind review packet to a new issue, or as a comment on a PR.
    Publish(PublishArgs),
    /// Import reviewers' comments of an issue or PR as feedback events.
    Sync(SyncArgs),
}

/// Arguments of `feedback github publish`.
#[derive(Debug, Args)]
pub struct PublishArgs {
    /// Run id.
    #[arg(long)]
    run: String,
    /// `owner/repo`; default the run's target repo, the template's source repo, `[feedback] repo`.
    #[arg(long)]
    repo: Option<String>,
    /// Comment on this PR instead of opening an issue.
    #[arg(long)]
    pr: Option<u64>,
}

/// Arguments of `feedback github sync`.
#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("thread").required(true).args(["issue", "pr"]))]
pub struct SyncArgs {
    /// Run id.
    #[arg(long)]
    run: String,
    /// `owner/repo`.
    #[arg(long)]
    repo: String,
    /// The review issue.
    #[arg(long)]
    issue: Option<u64>,
    /// The PR whose conversation holds the review.
    #[arg(long)]
    pr: Option<u64>,
}

fn error(e: GithubReviewError) -> CliError {
    match e {
        GithubReviewError::Invalid(_) => CliError::usage(anyhow!(e)),
        GithubReviewError::Packet(skillforge_workflows::packet::PacketError::Invalid(_)) => CliError::usage(anyhow!(e)),
        GithubReviewError::Forge(skillforge_forge::ForgeError::Config(_)) => CliError::usage(anyhow!(e)),
        other => CliError::env(anyhow!(other)),
    }
}

fn client(ctx: &Context) -> Result<GitHub, CliError> {
    GitHub::new(&ctx.config.github.client_config()).map_err(|e| CliError::usage(anyhow!(e)))
}

/// Dispatches a `feedback github` subcommand.
pub async fn run(ctx: &Context, cmd: GithubCommand) -> CliResult {
    match cmd {
        GithubCommand::Publish(args) => run_publish(ctx, args).await,
        GithubCommand::Sync(args) => run_sync(ctx, args).await,
    }
}

async fn run_publish(ctx: &Context, args: PublishArgs) -> CliResult {
    let store = ctx.store().await?;
    let run = skillforge_store::review::get_run(store.pool(), &args.run)
        .await
        .map_err(|e| CliError::env(anyhow!(e)))?
        .ok_or_else(|| CliError::usage(anyhow!("review run `{}` not found; create it with `skillforge review create`", args.run)))?;
    let template_source = skillforge_store::templates::get_version(store.pool(), &run.template_version_id)
        .await
        .map_err(|e| CliError::env(anyhow!(e)))?
        .map(|v| v.source_repo)
        .unwrap_or_default();
    let repo = resolve_repo(args.repo.as_deref(), &run.target_repo, &template_source, ctx.config.feedback.repo.as_deref()).map_err(error)?;
    let target = args.pr.map_or(Target::NewIssue, Target::PullRequest);
    let forge = client(ctx)?;
    let done = publish(&store, &BlobStore::in_home(&ctx.home), &forge, &run.id, &repo, target).await.map_err(error)?;
    if ctx.json {
        print_json(&json!({"run_id": run.id, "repo": done.repo.to_string(), "number": done.number, "url": done.url, "created": done.created}));
    } else {
        let verb = if done.created { "published" } else { "already published" };
        println!("{verb} review packet for run {} to {}", run.id, done.url);
        let flag = if args.pr.is_some() { "--pr" } else { "--issue" };
        println!("next: `skillforge feedback github sync --run {} --repo {} {flag} {}`", run.id, done.repo, done.number);
    }
    Ok(OK)
}

async fn run_sync(ctx: &Context, args: SyncArgs) -> CliResult {
    let repo = RepoRef::parse(&args.repo).map_err(|e| CliError::usage(anyhow!("--repo: {e}")))?;
    let number = args.issue.or(args.pr).ok_or_else(|| CliError::usage(anyhow!("pass --issue N or --pr N")))?;
    let store = ctx.store().await?;
    let forge = client(ctx)?;
    let done = sync(&store, &forge, &args.run, &repo, number).await.map_err(error)?;
    for refused in &done.refused {
        eprintln!("warning: skipped malformed comment {}: {}", refused.url, refused.reason);
    }
    let c = done.counts;
    if ctx.json {
        print_json(&json!({
            "run_id": args.run,
            "review_issue": done.review_issue,
            "comments": done.comments,
            "imported": done.imported,
            "skipped": done.skipped,
            "malformed": done.refused.iter().map(|r| json!({"url": r.url, "reason": r.reason})).collect::<Vec<_>>(),
            "feedback_events": {"inserted": c.feedback_inserted, "updated": c.feedback_updated},
            "ranked_feedback_events": {"inserted": c.ranked_inserted, "updated": c.ranked_updated},
            "superseded": done.superseded,
        }));
    } else {
        println!(
            "synced {} from {}: {} comments, {} imported, {} skipped, {} malformed; {} A/B events ({} new), {} ranked events ({} new)",
            args.run, done.review_issue, done.comments, done.imported, done.skipped, done.refused.len(),
            c.feedback_inserted + c.feedback_updated, c.feedback_inserted, c.ranked_inserted + c.ranked_updated, c.ranked_inserted
        );
    }
    Ok(OK)
}
