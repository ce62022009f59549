//! `skillforge feedback github publish|sync`: review through GitHub issues and PR comments (seed
//! "GitHub Feedback Collector"; S-96, S-97). The logic is [`skillforge_skillopt::github_review`];
//! this module parses arguments, builds the GitHub client (base URL and token from the
//! environment — `SKILLFORGE_GITHUB_API_URL`, `SKILLFORGE_GITHUB_TOKEN` / `GITHUB_TOKEN` /
//! `GH_TOKEN` — else `[github] api_url` / `token`), maps errors to exit codes and prints.

use anyhow::anyhow;
use clap::{Args, Subcommand};
use serde_json::json;
use skillforge_forge::RepoRef;
use skillforge_forge::github::GitHub;
use skillforge_skillopt::github_review::{
    GithubReviewError, Target, publish_request, resolve_repo, sync,
};
use skillforge_skillopt::github_write::{
    WriteError, WriteJobs, WriteRequest, execute, write_durably,
};
use skillforge_store::blobs::BlobStore;

use crate::control::args::skillforge_bin;
use crate::control::waiter::CliJobs;

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
    /// Internal: the body of a GitHub write job (a write request as JSON on stdin, the result
    /// as one JSON line on stdout). Run by workers, not by people.
    #[command(hide = true)]
    Write(WriteArgs),
}

/// Arguments of the internal `feedback github write`.
#[derive(Debug, Args)]
pub struct WriteArgs {
    /// REST base URL.
    #[arg(long = "api-url")]
    api_url: String,
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
        GithubReviewError::Packet(skillforge_skillopt::packet::PacketError::Invalid(_)) => {
            CliError::usage(anyhow!(e))
        }
        GithubReviewError::Forge(skillforge_forge::ForgeError::Config(_)) => {
            CliError::usage(anyhow!(e))
        }
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
        GithubCommand::Write(args) => run_write(ctx, args).await,
    }
}

async fn run_publish(ctx: &Context, args: PublishArgs) -> CliResult {
    let store = ctx.store().await?;
    let run = skillforge_store::review::get_run(store.pool(), &args.run)
        .await
        .map_err(|e| CliError::env(anyhow!(e)))?
        .ok_or_else(|| {
            CliError::usage(anyhow!(
                "review run `{}` not found; create it with `skillforge review create`",
                args.run
            ))
        })?;
    let template_source =
        skillforge_store::templates::get_version(store.pool(), &run.template_version_id)
            .await
            .map_err(|e| CliError::env(anyhow!(e)))?
            .map(|v| v.source_repo)
            .unwrap_or_default();
    let repo = resolve_repo(
        args.repo.as_deref(),
        &run.target_repo,
        &template_source,
        ctx.config.feedback.repo.as_deref(),
    )
    .map_err(error)?;
    let target = args.pr.map_or(Target::NewIssue, Target::PullRequest);
    let forge = client(ctx)?;
    let req = publish_request(
        &store,
        &BlobStore::in_home(&ctx.home),
        &run.id,
        &repo,
        target,
    )
    .await
    .map_err(error)?;
    let queue = ctx.queue().await?;
    let jobs = CliJobs::new(ctx, queue, store.clone());
    let bin = skillforge_bin();
    let at = WriteJobs {
        skillforge_bin: &bin,
        home: &ctx.home,
        api_url: forge.api_url(),
    };
    let done = write_durably(&jobs, &store, &at, &req)
        .await
        .map_err(|e| match e {
            WriteError::Payload(p) => CliError::usage(anyhow!(p)),
            WriteError::Stages(s) => CliError::usage(anyhow!(s)),
            other => CliError::env(anyhow!(other)),
        })?;
    if ctx.json {
        print_json(
            &json!({"run_id": run.id, "repo": done.repo, "number": done.number, "url": done.url, "created": done.created}),
        );
    } else {
        let verb = if done.created {
            "published"
        } else {
            "already published"
        };
        println!("{verb} review packet for run {} to {}", run.id, done.url);
        let flag = if args.pr.is_some() { "--pr" } else { "--issue" };
        println!(
            "next: `skillforge feedback github sync --run {} --repo {} {flag} {}`",
            run.id, done.repo, done.number
        );
    }
    Ok(OK)
}

async fn run_sync(ctx: &Context, args: SyncArgs) -> CliResult {
    let repo = RepoRef::parse(&args.repo).map_err(|e| CliError::usage(anyhow!("--repo: {e}")))?;
    let number = args
        .issue
        .or(args.pr)
        .ok_or_else(|| CliError::usage(anyhow!("pass --issue N or --pr N")))?;
    let store = ctx.store().await?;
    let forge = client(ctx)?;
    let done = sync(&store, &forge, &args.run, &repo, number)
        .await
        .map_err(error)?;
    for refused in &done.refused {
        eprintln!(
            "warning: skipped malformed comment {}: {}",
            refused.url, refused.reason
        );
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
            args.run,
            done.review_issue,
            done.comments,
            done.imported,
            done.skipped,
            done.refused.len(),
            c.feedback_inserted + c.feedback_updated,
            c.feedback_inserted,
            c.ranked_inserted + c.ranked_updated,
            c.ranked_inserted
        );
    }
    Ok(OK)
}

/// The write job's body: the request from stdin, the client from `--api-url` and the token from
/// the environment, else `[github] token` of the home; prints the result as one JSON line.
/// Bad input is exit 2 (not retried usefully); a GitHub or network failure exit 3 (the engine
/// retries the job).
async fn run_write(ctx: &Context, args: WriteArgs) -> CliResult {
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
        .map_err(|e| CliError::usage(anyhow!("read the write request from stdin: {e}")))?;
    let req: WriteRequest = serde_json::from_str(&text)
        .map_err(|e| CliError::usage(anyhow!("the write request on stdin: {e}")))?;
    let mut config = ctx.config.github.client_config();
    config.api_url = args.api_url.trim().trim_end_matches('/').to_owned();
    let forge = GitHub::new(&config).map_err(|e| CliError::usage(anyhow!(e)))?;
    let done = execute(&forge, &req).await.map_err(|e| match e {
        skillforge_forge::ForgeError::Config(_) => CliError::usage(anyhow!(e)),
        other => CliError::env(anyhow!(other)),
    })?;
    println!("{}", serde_json::to_string(&done).unwrap_or_default());
    Ok(OK)
}
