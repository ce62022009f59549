//! `skillforge harvest`: automatic trace harvesting, Mode A (seed: SkillOpt, "Automatic
//! trace-harvested feedback (Mode A, off by default)" and its legs; S-13..S-33).
//!
//! * `attribute`: record which template version produced a PR's change (S-16).
//! * `outcome`: report an outcome (a CI pipeline or script); writes the floor row, flips a
//!   reverted PR's row, and enqueues the enabled legs; `--wait` waits for them and applies their
//!   rows (the embedded queue's control plane is this process).
//! * `gate`: the merge side of an empty gate for CI pipelines and forges: records one observation
//!   at a PR head and answers `external | stamp | wait | blocked` (S-19; exit codes on
//!   [`crate::exit::WAITING`]); a stamp feeds `outcome` as a confirmed empty gate (S-18).
//! * `rerun`: one leg of a merged PR again, its own row re-upserted in place (S-27).
//! * `events`: the harvester's job events (failures, fallbacks).
//! * `status`: row counts of the feedback tables and the auto-trace runs.
//!
//! With `[skillopt] auto_trace_enabled` unset or false, `outcome` constructs no harvester and
//! writes nothing (S-13).

use std::path::PathBuf;

use anyhow::{Context as _, anyhow};
use clap::{Args, Subcommand, ValueEnum};
use serde_json::json;
use skillforge_skillopt::harvest::apply::HARVEST_FAILED_EVENT;
use skillforge_skillopt::harvest::gate::{GateDecision, GateQuery, Workflows, observe};
use skillforge_skillopt::harvest::webhook::parse_outcome;
use skillforge_skillopt::harvest::{
    HarvestEvent, HarvestReport, available_reviewers, dispatch_legs, harvest,
};
use skillforge_store::harvest::{Attribution, list_events, upsert_attribution};
use skillforge_store::templates::{VersionRef, list_versions, resolve};

use crate::context::Context;
use crate::control::waiter::await_job;
use crate::exit::{CHECK_FAILED, CliError, CliResult, OK};
use crate::output::print_json;

/// `skillforge harvest …`.
#[derive(Debug, Subcommand)]
pub enum HarvestCommand {
    /// Record the implement job behind a PR: template version and resolved commit.
    Attribute(AttributeArgs),
    /// Report a PR outcome: merged, blocked, changes_requested or reverted.
    Outcome(OutcomeArgs),
    /// Observe the merge gate of a PR head with no external CI: stamp, wait or blocked.
    ///
    /// Exit codes: 0 `stamp` (the `gitmoot/ci` "no external CI" stamp is recorded at the head;
    /// gitmoot (the Go tool whose SkillOpt formats and status names skillforge keeps)) or
    /// `external` (external CI exists: not an empty gate); 1 `blocked` (`[merge_gate]
    /// require_external_ci = true`: refuse the merge); 4 `wait` (observe again at or after
    /// `not_before`); 2 usage; 3 environment.
    Gate(GateArgs),
    /// Run one leg of a merged PR again: its row is re-upserted in place; the floor row
    /// and the other legs' rows are untouched.
    Rerun(RerunArgs),
    /// List the harvester's job events (leg failures, same-family fallbacks, …).
    Events(EventsArgs),
    /// Row counts of eval_runs / eval_review_items / feedback_events and the auto-trace runs.
    Status,
}

/// Arguments of `harvest attribute`.
#[derive(Debug, Args)]
pub struct AttributeArgs {
    /// `owner/repo`.
    #[arg(long)]
    repo: String,
    /// Pull-request number.
    #[arg(long)]
    pr: i64,
    /// Template: `ID` (the version whose resolved commit is `--resolved-commit`) or `ID@vN`.
    #[arg(long)]
    template: String,
    /// The implement job's template_resolved_commit.
    #[arg(long = "resolved-commit")]
    resolved_commit: String,
    /// Job family; only `implement` is harvested.
    #[arg(long, default_value = "implement")]
    kind: String,
    /// Agent runtime that implemented the change (claude, codex, …), for the cross-family reviewer.
    #[arg(long)]
    runtime: Option<String>,
    /// A clone of the repository the workers can see (the legs run there); none = no legs.
    #[arg(long)]
    checkout: Option<PathBuf>,
    /// Base revision of the change (default: the merged head's first parent).
    #[arg(long)]
    base: Option<String>,
    /// Title of the change.
    #[arg(long, default_value = "")]
    title: String,
    /// The implement job's instructions (the review leg's intended scope).
    #[arg(long, default_value = "")]
    instructions: String,
}

/// `--outcome` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum OutcomeArg {
    /// Merged.
    Merged,
    /// Blocked at the merge gate.
    Blocked,
    /// A review requested changes.
    ChangesRequested,
    /// Reverted.
    Reverted,
}

/// `--ci` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CiArg {
    /// A passing external status or check at the merged head (one not named `gitmoot/…`, the
    /// stamps of gitmoot (the Go tool whose SkillOpt formats and status names skillforge keeps)).
    External,
    /// No external CI at the merged head (an empty gate).
    None,
    /// Only the synthetic `gitmoot/ci` "no external CI" stamp (a confirmed empty gate).
    Gitmoot,
}

/// Arguments of `harvest outcome`.
#[derive(Debug, Args)]
pub struct OutcomeArgs {
    /// `owner/repo`.
    #[arg(long)]
    repo: String,
    /// Pull-request number.
    #[arg(long)]
    pr: i64,
    /// What happened.
    #[arg(long, value_enum)]
    outcome: OutcomeArg,
    /// CI at the merged head (merged only); absent = what webhooks recorded for the head.
    #[arg(long, value_enum)]
    ci: Option<CiArg>,
    /// Fix rounds so far (changes_requested; default 1, at least 1).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    rounds: Option<u32>,
    /// Merged head SHA (where the legs run).
    #[arg(long)]
    head: Option<String>,
    /// Body of the merged PR; `Reverts #NN` / `Reverts owner/repo#NN` flips PR NN's row.
    #[arg(long = "reverts-body")]
    reverts_body: Option<String>,
    /// Wait for the enqueued legs and apply their rows before returning.
    #[arg(long)]
    wait: bool,
    /// Exit 3 when the harvest could not be written (default: report it and exit 0, so a CI step
    /// reporting an outcome never fails on the harvester).
    #[arg(long)]
    strict: bool,
}

/// Arguments of `harvest gate`.
#[derive(Debug, Args)]
pub struct GateArgs {
    /// `owner/repo`.
    #[arg(long)]
    repo: String,
    /// Pull-request number.
    #[arg(long)]
    pr: i64,
    /// PR head SHA observed.
    #[arg(long)]
    head: String,
    /// A checkout of the repository at the head, for `.github/workflows/` awareness; absent =
    /// unknown, treated as workflows present (the full `min_ci_wait`).
    #[arg(long = "repo-path")]
    repo_path: Option<PathBuf>,
    /// CI contexts at the head not named `gitmoot/…` (any state; gitmoot (the Go tool whose SkillOpt formats and status names skillforge keeps)); absent = those
    /// recorded by webhooks.
    #[arg(long = "external-contexts")]
    external_contexts: Option<u64>,
    /// Observation time, RFC 3339 (tests and replays); default now.
    #[arg(long, hide = true)]
    at: Option<String>,
}

/// Arguments of `harvest rerun`.
#[derive(Debug, Args)]
pub struct RerunArgs {
    /// `owner/repo`.
    #[arg(long)]
    repo: String,
    /// Pull-request number.
    #[arg(long)]
    pr: i64,
    /// The leg: `hard_verifier`, `checkers` or `review`.
    #[arg(long, value_parser = ["hard_verifier", "checkers", "review"])]
    leg: String,
    /// Wait for the leg's job and apply its row before returning.
    #[arg(long)]
    wait: bool,
}

/// Arguments of `harvest events`.
#[derive(Debug, Args)]
pub struct EventsArgs {
    /// Only this repository's events (with `--pr`).
    #[arg(long, requires = "pr")]
    repo: Option<String>,
    /// Only this PR's events (with `--repo`).
    #[arg(long, requires = "repo")]
    pr: Option<i64>,
}

/// Runs a `harvest` subcommand.
pub async fn run(ctx: &Context, cmd: HarvestCommand) -> CliResult {
    match cmd {
        HarvestCommand::Attribute(args) => attribute(ctx, args).await,
        HarvestCommand::Outcome(args) => outcome(ctx, args).await,
        HarvestCommand::Gate(args) => gate(ctx, args).await,
        HarvestCommand::Rerun(args) => rerun(ctx, args).await,
        HarvestCommand::Events(args) => events(ctx, args).await,
        HarvestCommand::Status => status(ctx).await,
    }
}

fn check_pr(repo: &str, pr: i64) -> Result<(), CliError> {
    if !repo.contains('/') || repo.starts_with('/') || repo.ends_with('/') {
        return Err(CliError::usage(anyhow!(
            "--repo `{repo}` must be owner/repo"
        )));
    }
    if pr < 1 {
        return Err(CliError::usage(anyhow!(
            "--pr must be at least 1, got {pr}"
        )));
    }
    Ok(())
}

async fn attribute(ctx: &Context, args: AttributeArgs) -> CliResult {
    check_pr(&args.repo, args.pr)?;
    let config = ctx
        .config
        .skillopt
        .harvest_config(&ctx.home)
        .map_err(CliError::usage)?;
    if !config.is_enabled() {
        // S-13 (issue 37 item 5): off means off: no attribution is written either, so the store is
        // byte-identical to one where nothing was asked.
        if ctx.json {
            print_json(&json!({"attributed": false, "reason": "auto_trace_disabled"}));
        } else {
            eprintln!(
                "auto-trace harvesting is off ([skillopt] auto_trace_enabled); nothing recorded: turn it on to attribute pull requests"
            );
        }
        return Ok(OK);
    }
    let store = ctx.store().await?;
    let reference = VersionRef::parse(&args.template).ok_or_else(|| {
        CliError::usage(anyhow!(
            "--template `{}` must be ID or ID@vN",
            args.template
        ))
    })?;
    let version = if args.template.contains('@') {
        resolve(store.pool(), &reference).await?
    } else {
        let versions = list_versions(store.pool(), &reference.template_id).await?;
        versions
            .into_iter()
            .find(|v| v.resolved_commit == args.resolved_commit)
    }
    .ok_or_else(|| {
        CliError::usage(anyhow!(
            "attribute {}#{}: no version of template `{}` matches `{}` with resolved commit `{}`",
            args.repo,
            args.pr,
            reference.template_id,
            args.template,
            args.resolved_commit
        ))
    })?;
    let checkout = match &args.checkout {
        Some(p) => std::path::absolute(p)
            .map_err(|e| CliError::usage(anyhow!("checkout path `{}`: {e}", p.display())))?
            .display()
            .to_string(),
        None => String::new(),
    };
    let attribution = Attribution {
        repo: args.repo.clone(),
        pr: args.pr,
        template_id: version.template_id.clone(),
        template_version_id: version.id.clone(),
        resolved_commit: args.resolved_commit.clone(),
        kind: args.kind.clone(),
        implementer_runtime: args.runtime.clone().unwrap_or_default(),
        checkout,
        base: args.base.clone().unwrap_or_default(),
        title: args.title.clone(),
        instructions: args.instructions.clone(),
        ..Attribution::default()
    };
    let mut tx = skillforge_store::templates::begin_write(&store).await?;
    let created = upsert_attribution(&mut tx, &attribution).await?;
    tx.commit().await.context("commit attribution")?;
    if ctx.json {
        print_json(&json!({
            "repo": attribution.repo, "pr": attribution.pr, "template_id": attribution.template_id,
            "template_version_id": attribution.template_version_id, "resolved_commit": attribution.resolved_commit,
            "kind": attribution.kind, "created": created,
        }));
    } else {
        println!(
            "{}#{} attributed to {} ({})",
            attribution.repo, attribution.pr, attribution.template_version_id, attribution.kind
        );
    }
    Ok(OK)
}

async fn outcome(ctx: &Context, args: OutcomeArgs) -> CliResult {
    check_pr(&args.repo, args.pr)?;
    let name = match args.outcome {
        OutcomeArg::Merged => "merged",
        OutcomeArg::Blocked => "blocked",
        OutcomeArg::ChangesRequested => "changes_requested",
        OutcomeArg::Reverted => "reverted",
    };
    let ci = args.ci.map(|c| match c {
        CiArg::External => "external",
        CiArg::None => "none",
        CiArg::Gitmoot => "gitmoot",
    });
    let outcome = parse_outcome(name, ci, args.rounds).map_err(|m| CliError::usage(anyhow!(m)))?;
    let config = ctx
        .config
        .skillopt
        .harvest_config(&ctx.home)
        .map_err(CliError::usage)?;
    if !config.is_enabled() {
        // S-13: no harvester is constructed; nothing is read or written.
        if ctx.json {
            print_json(
                &json!({"harvested": false, "reason": "auto_trace_disabled", "rows": [], "legs": []}),
            );
        } else {
            eprintln!(
                "auto-trace harvesting is off ([skillopt] auto_trace_enabled); nothing recorded"
            );
        }
        return Ok(OK);
    }
    let event = HarvestEvent::Outcome {
        repo: args.repo.clone(),
        pr: args.pr,
        outcome,
        ci_shas: args.head.iter().cloned().collect(),
        head: args.head.clone(),
        body: args.reverts_body.clone(),
    };
    let store = ctx.store().await?;
    let reviewers = available_reviewers(&config);
    // S-24 (seed: "Harvesting is best-effort: a harvest error never blocks or fails a job; it is
    // swallowed and recorded as an auto_trace_harvest_failed job event"): this command is what a
    // CI pipeline runs after a merge, so a harvest failure is reported (stderr, `--json`
    // `failed`) and recorded, and the exit stays 0 so the pipeline's job does not fail. `--strict`
    // (an operator who wants to alert on it) exits 3; so does a failure whose event could not be
    // recorded either, since nothing would remember it.
    let report = match harvest(&store, &config, &event, &reviewers).await {
        Ok(report) => report,
        Err(e) => return harvest_failed(ctx, &store, &args, e).await,
    };
    let legs = if report.legs.is_empty() {
        Vec::new()
    } else {
        let backend = ctx.queue().await?;
        let legs = dispatch_legs(backend.as_ref(), &store, &report.legs)
            .await
            .map_err(|e| CliError::env(anyhow!(e)))?;
        if args.wait {
            for (_, job_id) in &legs {
                await_job(ctx, &backend, job_id, true).await?;
            }
        }
        legs
    };
    print_report(ctx, &report, &legs);
    Ok(OK)
}

async fn harvest_failed(
    ctx: &Context,
    store: &skillforge_store::Store,
    args: &OutcomeArgs,
    error: skillforge_skillopt::harvest::HarvestError,
) -> CliResult {
    let recorded = list_events(store.pool(), Some((&args.repo, args.pr)))
        .await
        .map(|events| events.iter().any(|e| e.event == HARVEST_FAILED_EVENT))
        .unwrap_or(false);
    if args.strict || !recorded {
        let what = if recorded {
            "recorded as auto_trace_harvest_failed"
        } else {
            "and its failure event could not be recorded"
        };
        return Err(CliError::env(
            anyhow!(error).context(format!("harvest outcome ({what})")),
        ));
    }
    if ctx.json {
        print_json(&json!({
            "harvested": false, "failed": true, "event": HARVEST_FAILED_EVENT, "error": format!("{error:#}"),
            "rows": [], "legs": [],
        }));
    } else {
        eprintln!(
            "warning: harvest of {}#{} failed (recorded as {HARVEST_FAILED_EVENT}): {error:#}",
            args.repo, args.pr
        );
    }
    Ok(OK)
}

async fn gate(ctx: &Context, args: GateArgs) -> CliResult {
    check_pr(&args.repo, args.pr)?;
    if args.head.trim().is_empty() {
        return Err(CliError::usage(anyhow!("--head must name the PR head SHA")));
    }
    let now = match &args.at {
        Some(t) => chrono::DateTime::parse_from_rfc3339(t)
            .map_err(|e| CliError::usage(anyhow!("--at `{t}` is not RFC 3339: {e}")))?
            .with_timezone(&chrono::Utc),
        None => chrono::Utc::now(),
    };
    let workflows = match &args.repo_path {
        Some(p) if !p.is_dir() => {
            return Err(CliError::usage(anyhow!(
                "--repo-path `{}` is not a directory",
                p.display()
            )));
        }
        Some(p) => Workflows::at(p),
        None => Workflows::Unknown,
    };
    let store = ctx.store().await?;
    let query = GateQuery {
        repo: &args.repo,
        pr: args.pr,
        head: &args.head,
        workflows,
        external_contexts: args.external_contexts,
        now,
    };
    let report = observe(&store, &ctx.config.merge_gate.gate_config(), &query)
        .await
        .map_err(|e| CliError::env(anyhow!(e).context("observe the merge gate")))?;
    if ctx.json {
        print_json(&report);
    } else {
        match &report.decision {
            GateDecision::Stamp => println!(
                "stamp: {}@{} has no external CI; stamped gitmoot/ci \"no external CI\"",
                report.repo, report.head
            ),
            GateDecision::External => println!(
                "external: {} external CI context(s) at {}; not an empty gate",
                report.external_contexts, report.head
            ),
            GateDecision::Wait { not_before } => println!(
                "wait: no external CI at {} yet; observe again at or after {not_before}",
                report.head
            ),
            GateDecision::Blocked => println!(
                "blocked: no external CI at {} and [merge_gate] require_external_ci = true; merge refused",
                report.head
            ),
        }
    }
    Ok(match report.decision {
        GateDecision::Stamp | GateDecision::External => OK,
        GateDecision::Blocked => CHECK_FAILED,
        GateDecision::Wait { .. } => crate::exit::WAITING,
    })
}

fn print_report(
    ctx: &Context,
    report: &HarvestReport,
    legs: &[(skillforge_skillopt::harvest::legs::Leg, String)],
) {
    let legs_json: Vec<_> = legs
        .iter()
        .map(|(leg, id)| json!({"leg": leg.name(), "job_id": id}))
        .collect();
    if ctx.json {
        print_json(
            &json!({"harvested": !report.rows.is_empty(), "rows": report.rows, "skipped": report.skipped, "legs": legs_json}),
        );
        return;
    }
    for row in &report.rows {
        let score = row
            .score
            .map(|s| format!("{s:.3}"))
            .unwrap_or_else(|| "none".into());
        let how = if row.inserted { "wrote" } else { "rewrote" };
        println!(
            "{how} {} {} ({}): choice {}, score {score}",
            row.run_id, row.item_id, row.reviewer, row.choice
        );
    }
    for why in &report.skipped {
        eprintln!("skipped: {why}");
    }
    for (leg, id) in legs {
        println!("leg {} enqueued as job {id}", leg.name());
    }
}

async fn rerun(ctx: &Context, args: RerunArgs) -> CliResult {
    use skillforge_skillopt::harvest::legs::Leg;
    use skillforge_skillopt::harvest::rerun::{RerunError, rerun_leg};
    let Some(leg) = Leg::from_name(&args.leg) else {
        return Err(CliError::usage(anyhow!(
            "--leg `{}` is not hard_verifier, checkers or review",
            args.leg
        )));
    };
    let store = ctx.store().await?;
    let backend = ctx.queue().await?;
    let job_id = match rerun_leg(backend.as_ref(), &store, &args.repo, args.pr, leg).await {
        Ok(id) => id,
        Err(e @ (RerunError::NotDispatched { .. } | RerunError::JobGone { .. })) => {
            return Err(CliError::usage(anyhow!(e)));
        }
        Err(e) => return Err(CliError::env(anyhow!(e))),
    };
    let state = if args.wait {
        Some(await_job(ctx, &backend, &job_id, true).await?.state)
    } else {
        None
    };
    if ctx.json {
        print_json(
            &json!({"leg": leg.name(), "job_id": job_id, "state": state.map(|s| s.to_string())}),
        );
    } else {
        println!(
            "leg {} re-run as job {job_id}{}",
            leg.name(),
            state.map(|s| format!(" ({s})")).unwrap_or_default()
        );
    }
    Ok(OK)
}

async fn events(ctx: &Context, args: EventsArgs) -> CliResult {
    let store = ctx.store().await?;
    let filter = args.repo.as_deref().zip(args.pr);
    let events = list_events(store.pool(), filter).await?;
    if ctx.json {
        let rows: Vec<_> = events
            .iter()
            .map(|e| json!({"job_id": e.job_id, "repo": e.repo, "pr": e.pr, "event": e.event, "detail": e.detail, "created_at": e.created_at}))
            .collect();
        print_json(&rows);
    } else if events.is_empty() {
        println!(
            "no harvest events{}",
            filter
                .map(|(repo, pr)| format!(" for {repo}#{pr}"))
                .unwrap_or_default()
        );
    } else {
        for e in &events {
            println!(
                "{} {}#{} {} {}",
                e.created_at, e.repo, e.pr, e.event, e.detail
            );
        }
    }
    Ok(OK)
}

async fn status(ctx: &Context) -> CliResult {
    let store = ctx.store().await?;
    let count = |table: &'static str| {
        let pool = store.pool().clone();
        async move {
            sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(format!(
                "SELECT COUNT(*) FROM {table}"
            )))
            .fetch_one(&pool)
            .await
        }
    };
    let runs: Vec<String> =
        sqlx::query_scalar("SELECT id FROM eval_runs WHERE id LIKE 'auto-trace:%' ORDER BY id")
            .fetch_all(store.pool())
            .await?;
    let value = json!({
        "eval_runs": count("eval_runs").await?,
        "eval_review_items": count("eval_review_items").await?,
        "feedback_events": count("feedback_events").await?,
        "auto_trace_runs": runs,
        "auto_trace_enabled": ctx.config.skillopt.auto_trace_enabled.unwrap_or(false),
    });
    if ctx.json {
        print_json(&value);
    } else {
        let enabled = value["auto_trace_enabled"] == true;
        println!(
            "harvesting          {} ([skillopt] auto_trace_enabled)",
            if enabled { "on" } else { "off" }
        );
        println!("eval runs           {}", value["eval_runs"]);
        println!("review items        {}", value["eval_review_items"]);
        println!("feedback events     {}", value["feedback_events"]);
        let runs: Vec<&str> = value["auto_trace_runs"]
            .as_array()
            .map(|a| a.iter().filter_map(serde_json::Value::as_str).collect())
            .unwrap_or_default();
        println!(
            "auto-trace runs     {}",
            if runs.is_empty() {
                "none".to_owned()
            } else {
                runs.join(", ")
            }
        );
    }
    Ok(OK)
}
