//! `skillforge demo [--repo PATH]`: one whole train iteration and a harvest on a real git
//! repository, on the embedded queue, with no model and no human (issue 5 item 8, issue 6
//! item 6; seed SkillOpt "Complete train-mode path").
//!
//! 1. installs the bundled template `change-summarizer` ([`TEMPLATE`]);
//! 2. turns the repository's last N non-merge commits (subject, stat, capped diff) into review
//!    items and starts a train session on them (`train start`);
//! 3. generates options with the scripted runtime as durable agent jobs (`train continue`);
//! 4. fills the blind packet with the deterministic reviewer ([`reviewer`]);
//! 5. exports, runs the reference optimizer and imports the pending candidate, then publishes
//!    the candidate review (`train continue` twice);
//! 6. harvests the repository's recent merges (or commits) with the hard-verifier and checker
//!    legs and exports the auto-trace run ([`harvest`]);
//! 7. prints where everything is and what to run next.
//!
//! Every step calls the code the matching command calls (`skillforge_skillopt::train::control`,
//! the harvester, [`crate::control::templates::install`]). Each run is a new session
//! `demo-<time>-<pid>`; its own files go to `<home>/demo/<session>/`, the train packets to
//! `<home>/train/<session>/` as for any session. Re-running is safe: the template install and the
//! harvest are idempotent (rows upserted in place, leg jobs keyed by change and head).
//!
//! Exit codes: 0 done; 1 a stage failed; 2 `--repo` is not a git repository (or has no
//! commits); 3 environment (git missing, store or queue unavailable).

mod harvest;
mod history;
pub(crate) mod reviewer;

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::anyhow;
use clap::Args;
use serde_json::json;
use skillforge_skillopt::promotion::events::EventKind;
use skillforge_skillopt::train::TrainEnv;
use skillforge_skillopt::train::control::{
    ContinueRequest, DEFAULT_RUNTIME, StartRequest, StepReport, continue_session, load, start,
};
use skillforge_skillopt::train::items::parse_items;
use skillforge_skillopt::train::meta::IterationMeta;
use skillforge_store::candidates::{
    DecisionOutcome, get_candidate, list_candidates, reject_candidate,
};
use skillforge_store::templates::{VersionRow, current_version, get_version};

use crate::context::Context;
use crate::control::args::skillforge_bin;
use crate::control::waiter::CliJobs;
use crate::exit::{CliError, CliResult, OK, train_error};
use crate::output::print_json;

/// The bundled template the demo trains.
pub const TEMPLATE: &str = include_str!("../../assets/demo/change-summarizer.md");
/// Its id.
pub const TEMPLATE_ID: &str = "change-summarizer";
/// Options generated per item.
const N_OPTIONS: i64 = 3;
/// Number of steps printed.
const N_STEPS: usize = 7;

/// Arguments of `skillforge demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// The git repository to work on (default: the repository containing the current directory).
    #[arg(long, value_name = "PATH")]
    repo: Option<PathBuf>,
    /// How many recent non-merge commits become review items.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=20))]
    commits: u16,
    /// How many recent merges (or commits, when there are none) the harvest step reports.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u16).range(1..=20))]
    harvest: u16,
}

/// Prints step lines: to stdout, or to stderr under `--json` (stdout then holds the summary).
struct Out {
    json: bool,
}

impl Out {
    fn line(&self, text: &str) {
        if self.json {
            eprintln!("{text}");
        } else {
            println!("{text}");
        }
    }

    fn step(&self, n: usize, text: &str) {
        self.line(&format!("[{n}/{N_STEPS}] {text}"));
    }

    fn detail(&self, text: &str) {
        self.line(&format!("      {text}"));
    }

    fn steps(&self, report: &StepReport) {
        for s in &report.steps {
            self.detail(&format!("• {s}"));
        }
    }
}

/// The train workflow's progress lines (the optimizer preflight), first line only, indented.
struct DemoReporter {
    json: bool,
}

impl skillforge_stage::Progress for DemoReporter {
    fn step(&self, line: &str) {
        Out { json: self.json }.detail(&format!("• {}", line.lines().next().unwrap_or_default()));
    }
}

fn session_id() -> String {
    format!(
        "demo-{}-{}",
        chrono::Utc::now().format("%Y%m%d-%H%M%S"),
        std::process::id()
    )
}

fn write(path: &Path, text: &str) -> Result<(), CliError> {
    std::fs::write(path, text)
        .map_err(|e| CliError::env(anyhow!("write `{}`: {e}", path.display())))
}

/// Installs the bundled template unless the home already has it (then its current version,
/// which may be a candidate promoted after an earlier demo, is the one reviewed).
async fn install_template(
    store: &skillforge_store::Store,
    demo_dir: &Path,
) -> Result<(VersionRow, &'static str), CliError> {
    if let Some(current) = current_version(store.pool(), TEMPLATE_ID).await? {
        return Ok((current, "already installed"));
    }
    let path = demo_dir.join(format!("{TEMPLATE_ID}.md"));
    write(&path, TEMPLATE)?;
    let installed =
        crate::control::templates::install(store, TEMPLATE, &path.display().to_string(), None)
            .await?;
    Ok((
        installed.version,
        if installed.is_new {
            "installed"
        } else {
            "already installed"
        },
    ))
}

/// Rejects the candidates earlier demo runs on this home left pending (their packages live under
/// `<home>/train/demo-*`), so repeated demos do not pile up pending versions of the demo's
/// template; each rejection is recorded with its reason and event like `candidate reject`.
/// Candidates of that template from anything but a demo are left alone. Returns the ids rejected.
async fn retire_earlier_demo_candidates(
    ctx: &Context,
    store: &skillforge_store::Store,
    session: &str,
) -> Result<Vec<String>, CliError> {
    let demo_train = ctx.home.join("train").join("demo-");
    let demo_train = demo_train.display().to_string();
    let mut rejected = Vec::new();
    for candidate in list_candidates(store.pool(), TEMPLATE_ID).await? {
        if candidate.version_state != "pending" || !candidate.source_path.starts_with(&demo_train) {
            continue;
        }
        let reason = format!("replaced by the demo run {session}");
        if let DecisionOutcome::Done { .. } =
            reject_candidate(store, &candidate.version_id, &reason).await?
        {
            crate::commands::candidate::decided_by_hand(
                ctx,
                store,
                &candidate,
                EventKind::Rejected,
                &reason,
            )
            .await?;
            rejected.push(candidate.version_id);
        }
    }
    Ok(rejected)
}

/// `(+added, -removed)` lines from the candidate's base version to the candidate.
async fn diff_stat(
    store: &skillforge_store::Store,
    version_id: &str,
) -> Result<(usize, usize, Vec<String>), CliError> {
    let candidate = get_candidate(store.pool(), version_id)
        .await?
        .ok_or_else(|| CliError::env(anyhow!("candidate `{version_id}` is missing")))?;
    let text = |v: Option<VersionRow>| v.map(|v| v.content).unwrap_or_default();
    let base = text(get_version(store.pool(), &candidate.base_version_id).await?);
    let new = text(get_version(store.pool(), version_id).await?);
    let diff = similar::TextDiff::from_lines(&base, &new);
    let (mut added, mut removed, mut lines) = (0, 0, Vec::new());
    for change in diff.iter_all_changes() {
        match change.tag() {
            similar::ChangeTag::Insert => {
                added += 1;
                let line = change.value().trim_end();
                if !line.trim().is_empty() {
                    lines.push(line.to_owned());
                }
            }
            similar::ChangeTag::Delete => removed += 1,
            similar::ChangeTag::Equal => {}
        }
    }
    Ok((added, removed, lines))
}

/// Runs the demo.
pub async fn run(ctx: &Context, args: DemoArgs) -> CliResult {
    ctx.expect_new_home();
    let started = Instant::now();
    let out = Out { json: ctx.json };
    let path = match &args.repo {
        Some(p) => p.clone(),
        None => std::env::current_dir()
            .map_err(|e| CliError::env(anyhow!("read the current directory: {e}")))?,
    };
    let repo = history::open(&std::path::absolute(&path).unwrap_or(path))?;
    let commits = history::recent(
        &repo,
        usize::from(args.commits),
        history::Selection::NonMerges,
    )?;
    if commits.is_empty() {
        return Err(CliError::usage(anyhow!(
            "repository `{}` has no commits to review",
            repo.root.display()
        )));
    }
    let session = session_id();
    let demo_dir = ctx.home.join("demo").join(&session);
    std::fs::create_dir_all(&demo_dir)
        .map_err(|e| CliError::env(anyhow!("create `{}`: {e}", demo_dir.display())))?;
    out.line(&format!(
        "skillforge demo on {} (home {}, session {session})",
        repo.root.display(),
        ctx.home.display()
    ));

    if !ctx.queue_url.is_embedded() {
        out.detail("a shared queue is configured: its jobs run on its workers, so keep a `skillforge worker` running");
    }
    let store = ctx.store().await?;
    let queue = ctx.queue().await?;
    let workflow =
        skillforge_skillopt::train::stages::for_home(&ctx.home).map_err(CliError::usage)?;
    let jobs = CliJobs::new(ctx, queue.clone(), store.clone());
    let reporter = DemoReporter { json: ctx.json };
    let promotion = crate::control::promotion::policy(ctx);
    let env = TrainEnv {
        store: &store,
        queue: &queue,
        home: &ctx.home,
        workflow: &workflow,
        skillforge_bin: skillforge_bin(),
        jobs: &jobs,
        reporter: &reporter,
        promotion: &promotion,
        github: None,
    };

    // 1. The bundled template.
    let (version, how) = install_template(&store, &demo_dir).await?;
    out.step(
        1,
        &format!(
            "template {} {how} (bundled crates/cli/assets/demo/{TEMPLATE_ID}.md)",
            version.id
        ),
    );
    for earlier in retire_earlier_demo_candidates(ctx, &store, &session).await? {
        out.detail(&format!("• {earlier}, an earlier demo's candidate still pending, rejected: this run makes a new one"));
    }

    // 2. Review items from real history, a train session on them.
    let mut items = Vec::with_capacity(commits.len());
    for commit in &commits {
        items.push(history::review_item(&repo, commit)?);
    }
    let items_file = demo_dir.join("items.yml");
    // JSON is YAML: the items file `train start --items-file` reads, written without a YAML emitter.
    let items_text = format!(
        "# Review items built by `skillforge demo` from {}'s last {} non-merge commits.\n{}\n",
        repo.root.display(),
        items.len(),
        serde_json::to_string_pretty(&json!({ "items": items.iter().map(|i| json!({"id": i.id, "title": i.title, "input": i.input})).collect::<Vec<_>>() }))
            .unwrap_or_default()
    );
    write(&items_file, &items_text)?;
    let items = parse_items(&items_text, &items_file.display().to_string())
        .map_err(|e| CliError::usage(anyhow!(e)))?;
    let request = format!(
        "Summarize each commit of {} for a reviewer who has not read the diff: what changed, in which files, and why",
        repo.slug
    );
    let report = start(
        &env,
        &StartRequest {
            session_id: Some(session.clone()),
            template: version.id.clone(),
            repo: repo.slug.clone(),
            workspace_repo: Some(repo.root.display().to_string()),
            request,
            items,
            runtime: DEFAULT_RUNTIME.to_owned(),
            model: None,
            mode: None,
            options: Some(N_OPTIONS),
            task_kind: String::new(),
            forge: None,
        },
    )
    .await
    .map_err(train_error)?;
    out.step(
        2,
        &format!(
            "{} review items from the last {} non-merge commits → {}",
            commits.len(),
            commits.len(),
            items_file.display()
        ),
    );
    for commit in &commits {
        out.detail(&format!(
            "c-{}  {}",
            commit.short(),
            commit.subject.chars().take(70).collect::<String>()
        ));
    }
    out.steps(&report);

    // 3. Options from the scripted runtime (durable agent jobs, in-process worker).
    let advance = |req: ContinueRequest| {
        let env = &env;
        let session = session.clone();
        async move {
            continue_session(env, &session, &req)
                .await
                .map_err(train_error)
        }
    };
    let wait = || ContinueRequest {
        wait: true,
        ..ContinueRequest::default()
    };
    out.step(3, &format!("generating {N_OPTIONS} options per item with the {DEFAULT_RUNTIME} runtime (durable agent jobs)"));
    let report = advance(wait()).await?;
    out.steps(&report);
    let packet = report
        .review_packet
        .clone()
        .map(PathBuf::from)
        .ok_or_else(|| CliError {
            code: crate::exit::CHECK_FAILED,
            error: anyhow!("no review packet was published (state {})", report.state),
        })?;

    // 4. The deterministic reviewer fills the blind packet.
    let done =
        reviewer::fill_packet(&packet).map_err(|e| CliError::env(anyhow!("demo reviewer: {e}")))?;
    out.step(
        4,
        &format!(
            "{} (the demo's stand-in for a person) ranked {} items by its rule (names the changed files > shorter > label) → {}",
            reviewer::DEMO_REVIEWER,
            done.n_items,
            packet.join(skillforge_contract::FEEDBACK_FILE).display()
        ),
    );
    for (item, ranking) in &done.rankings {
        out.detail(&format!("{item}: {ranking}"));
    }

    // 5. Export, reference optimizer, pending candidate; candidate review.
    out.step(5, "syncing feedback, exporting the training package, running the distill optimizer, importing the candidate");
    let report = advance(wait()).await?;
    out.steps(&report);
    let candidate = report.candidate_version.clone();
    if candidate.is_some() {
        let review = advance(wait()).await?;
        out.steps(&review);
    }
    let (_, iteration) = load(&env, &session).await.map_err(train_error)?;
    let meta = IterationMeta::parse(&iteration.metadata_json);

    // 6. Harvest the repository's recent merges (or commits).
    let harvest_step = harvest::HarvestStep {
        store: &store,
        queue: &queue,
        jobs: &jobs,
        repo: &repo,
        version: &version,
        n_changes: usize::from(args.harvest),
        export: demo_dir.join("auto-trace.json"),
        progress: &reporter,
    };
    let config_file = demo_dir.join("skillopt.toml");
    write(&config_file, &harvest::demo_config_toml())?;
    out.step(6, &format!("harvesting recent merges (or commits) with the hard-verifier and checker legs; switches in {}", config_file.display()));
    let harvested = harvest::run(&harvest_step).await?;
    out.detail(&format!(
        "• {} recent {}{} attributed to {} and reported merged; {} leg jobs run",
        harvested.changes.len(),
        if harvested.changes.len() == 1 {
            harvested.source.trim_end_matches('s')
        } else {
            harvested.source
        },
        if harvested.source == "commits" {
            " (the history has no merges)"
        } else {
            ""
        },
        version.id,
        harvested.n_leg_jobs
    ));
    for change in &harvested.changes {
        out.detail(&format!(
            "  {}  {}  {}",
            change.item_id,
            &change.sha[..12.min(change.sha.len())],
            change.subject.chars().take(60).collect::<String>()
        ));
    }
    for why in &harvested.skipped {
        out.detail(&format!("• skipped: {why}"));
    }
    let export = harvested.export.as_ref().map_or_else(
        || "none (nothing harvested)".to_owned(),
        |p| p.display().to_string(),
    );
    out.detail(&format!(
        "• auto-trace run {}: {} floor, {} hard-verifier, {} checker rows → {export}",
        harvested.run_id,
        harvested.floor_rows,
        harvested.hard_verifier_rows,
        harvested.checker_rows,
    ));

    // 7. What happened and where everything is.
    let home = ctx.home.display().to_string();
    let stat = match &candidate {
        Some(v) => Some(diff_stat(&store, v).await?),
        None => None,
    };
    let mut next = Vec::new();
    if let Some(v) = &candidate {
        next.push(format!("skillforge --home {home} candidate show {v}"));
        next.push(format!("skillforge --home {home} candidate promote {v}"));
    }
    next.push(format!(
        "skillforge --home {home} train status --session {session}"
    ));
    let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let summary = json!({
        "session_id": session,
        "iteration_id": iteration.id,
        "state": iteration.state,
        "repo": repo.root.display().to_string(),
        "template_version": version.id,
        "candidate_version": candidate,
        "candidate_diff": stat.as_ref().map(|(a, r, _)| json!({"added": a, "removed": r})),
        "no_candidate_reason": (!meta.optimizer.no_candidate_reason.is_empty()).then_some(&meta.optimizer.no_candidate_reason),
        "demo_dir": demo_dir.display().to_string(),
        "items_file": items_file.display().to_string(),
        "review_packet": meta.review.path,
        "feedback_file": packet.join(skillforge_contract::FEEDBACK_FILE).display().to_string(),
        "training_package": meta.export.path,
        "candidate_package": meta.optimizer.candidate_output,
        "candidate_review": meta.candidate_review.path,
        "harvest": harvested,
        "next": next,
        "elapsed_ms": elapsed_ms,
    });
    if ctx.json {
        print_json(&summary);
        return Ok(OK);
    }
    out.step(7, &format!("done in {:.1}s", elapsed_ms as f64 / 1000.0));
    match (&candidate, &stat) {
        (Some(v), Some((added, removed, lines))) => {
            println!(
                "\npending candidate: {v} (+{added} -{removed} lines against {})",
                version.id
            );
            for line in lines.iter().take(6) {
                println!("  + {line}");
            }
            println!(
                "  (its `human` support counts are the demo's stand-in reviewer, `{}`: a fixed rule, not a person,\n   \
                 filling the review packet a person would; the optimizer weighs a packet's answers as a person's review)",
                reviewer::DEMO_REVIEWER
            );
        }
        _ => println!("\nno candidate: {}", meta.optimizer.no_candidate_reason),
    }
    println!(
        "\nsession             {session} ({})",
        skillforge_skillopt::train::phase::describe(iteration.state.as_str())
    );
    println!("items               {}", items_file.display());
    println!("review packet       {}", meta.review.path);
    println!("training package    {}", meta.export.path);
    println!("candidate package   {}", meta.optimizer.candidate_output);
    println!("candidate review    {}", meta.candidate_review.path);
    println!("auto-trace export   {export}");
    println!("\nnext:");
    for command in &next {
        println!("  {command}");
    }
    Ok(OK)
}
