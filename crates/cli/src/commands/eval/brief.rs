//! `eval brief --check F` validates a brief; `eval brief --knowledge-gap --draft D --out F`
//! writes a knowledge-gap brief from a drafted theme only when the user's rules appear in
//! neither its prompt nor its fixtures (E-02) and its verify passes the good example and fails
//! the bad one (E-01) — run for real, in a scratch work dir, as an arm's verify is.
//! `eval brief --knowledge-gap --theme T --out F` has a model draft it from a correction theme
//! first (an `agent` job of stage `draft`, [`skillforge_evalloop::draft`]), then runs
//! the same checks on the model's draft.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::anyhow;
use clap::Args;
use skillforge_evalloop::brief::{
    Brief, FINAL_ENV, KnowledgeGapDraft, check_rules_absent, check_self_test,
};
use skillforge_evalloop::draft::{DraftTheme, draft_job, parse_draft};
use skillforge_evalloop::stages::EvalStages;
use skillforge_runner_agent::AgentReport;
use skillforge_runner_process::{ProcessPayload, run_process};
use skillforge_stage::{Ran, Wait, run_jobs};
use tokio_util::sync::CancellationToken;

use crate::context::Context;
use crate::control::waiter::CliJobs;
use crate::exit::{CliError, CliResult, OK};

/// Arguments of `eval brief`.
#[derive(Debug, Args)]
pub struct BriefArgs {
    /// Validate this brief and exit.
    #[arg(long, value_name = "FILE", conflicts_with = "knowledge_gap")]
    check: Option<PathBuf>,
    /// Build a knowledge-gap brief from `--draft`.
    #[arg(long = "knowledge-gap", requires = "out")]
    knowledge_gap: bool,
    /// The drafted theme: {brief, rules, good_example, bad_example}.
    #[arg(long, value_name = "FILE", conflicts_with = "theme")]
    draft: Option<PathBuf>,
    /// A correction theme {name, rules, corrections}: a model drafts the brief from it.
    #[arg(long, value_name = "FILE")]
    theme: Option<PathBuf>,
    /// Agent runtime that drafts from `--theme` (`claude`, `codex`, `opencode`, `scripted`), else
    /// `FORGE_AGENT`; none is assumed.
    #[arg(long, env = "FORGE_AGENT")]
    runtime: Option<String>,
    /// Model of the drafting runtime.
    #[arg(long)]
    model: Option<String>,
    /// Where to write the brief.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

/// Runs the brief's verify on `example` as the deliverable; true when it exits 0.
async fn verify_passes(brief: &Brief, example: &str) -> Result<bool, CliError> {
    let dir = tempfile::tempdir().map_err(|e| CliError::env(anyhow!("scratch dir: {e}")))?;
    for (rel, text) in &brief.setup {
        let p = dir.path().join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).map_err(|e| CliError::env(anyhow!(e)))?;
        }
        std::fs::write(&p, text).map_err(|e| CliError::env(anyhow!(e)))?;
    }
    let final_path = dir.path().join(".forge-final.txt");
    std::fs::write(&final_path, example).map_err(|e| CliError::env(anyhow!(e)))?;
    if !brief.is_reply() {
        let out = dir.path().join(&brief.output);
        if let Some(parent) = out.parent() {
            std::fs::create_dir_all(parent).map_err(|e| CliError::env(anyhow!(e)))?;
        }
        std::fs::write(out, example).map_err(|e| CliError::env(anyhow!(e)))?;
    }
    let mut payload = ProcessPayload::shell(brief.verify.clone());
    payload.cwd = Some(dir.path().to_path_buf());
    payload
        .env
        .insert(FINAL_ENV.to_owned(), final_path.display().to_string());
    let outcome = run_process(
        &payload,
        Duration::from_secs(120),
        &CancellationToken::new(),
    )
    .await
    .map_err(|e| CliError::env(anyhow!("run verify: {e}")))?;
    Ok(outcome.exit.is_passed())
}

fn read(path: &Path) -> Result<String, CliError> {
    std::fs::read_to_string(path)
        .map_err(|e| CliError::usage(anyhow!("read `{}`: {e}", path.display())))
}

/// The agent runtime `given` (`--runtime` or `FORGE_AGENT`), for `what`; none is assumed.
///
/// # Errors
/// Exit 2 naming the flag and the variable to set, and the shipped runtimes, when none is given.
pub(super) fn require_runtime(given: Option<String>, what: &str) -> Result<String, CliError> {
    given.filter(|r| !r.trim().is_empty()).ok_or_else(|| {
        let names: Vec<&str> = skillforge_runner_agent::profile::all().iter().map(|p| p.name.as_str()).collect();
        CliError::usage(anyhow!(
            "no agent runtime for {what}: give --runtime RUNTIME or set FORGE_AGENT (one of {}; `skillforge doctor` shows which are installed); skillforge assumes none",
            names.join(", ")
        ))
    })
}

/// Has the runtime draft a brief from the theme at `theme_path` (one `agent` job, waited for);
/// returns the draft, how messages name it and the theme. The model's reply is kept as the job's
/// outcome (`jobs show`).
pub(super) async fn draft_from_theme(
    ctx: &Context,
    theme_path: &Path,
    runtime: &str,
    model: Option<&str>,
) -> Result<(KnowledgeGapDraft, String, DraftTheme), CliError> {
    let file = theme_path.display().to_string();
    let theme = DraftTheme::parse(&read(theme_path)?, &file)
        .map_err(|e| CliError::usage(anyhow!("{e}")))?;
    let stages =
        EvalStages::for_home(&ctx.home).map_err(|e| CliError::usage(anyhow!(e.to_string())))?;
    let spec = draft_job(&stages.draft, &theme, runtime, model)
        .map_err(|e| CliError::usage(anyhow!(e.to_string())))?;
    let store = ctx.store().await?;
    let queue = ctx.queue().await?;
    let jobs = CliJobs::new(ctx, queue, store);
    let Ran::Done(done) = run_jobs(&jobs, &[spec], Wait::Block, "drafting the brief")
        .await
        .map_err(|e| CliError::env(anyhow!(e)))?
    else {
        return Err(CliError::env(anyhow!("the drafting job did not finish")));
    };
    let job = done
        .into_iter()
        .next()
        .ok_or_else(|| CliError::env(anyhow!("the drafting job is gone")))?;
    let report: Option<AgentReport> = job
        .outcome
        .as_ref()
        .and_then(|o| serde_json::from_value(o.detail.clone()).ok());
    let reply = report.as_ref().and_then(|r| r.final_message.clone());
    let Some(reply) = reply.filter(|_| job.outcome.as_ref().is_some_and(|o| o.exit.is_passed()))
    else {
        let why = job.outcome.as_ref().map_or_else(
            || job.error.clone().unwrap_or_else(|| job.state.to_string()),
            |o| o.exit.label().to_owned(),
        );
        return Err(CliError::env(anyhow!(
            "runtime `{runtime}` did not draft the brief (job {}: {why}); no brief written",
            job.id
        )));
    };
    let draft = parse_draft(&reply, &theme)
        .map_err(|e| CliError::usage(anyhow!("{e} (job {}); no brief written", job.id)))?;
    Ok((
        draft,
        format!("the draft of theme `{file}` (job {})", job.id),
        theme,
    ))
}

/// Runs `eval brief`.
pub async fn run(ctx: &Context, args: BriefArgs) -> CliResult {
    if let Some(path) = &args.check {
        let brief =
            Brief::parse(&read(path)?, &path.display().to_string()).map_err(CliError::usage)?;
        if ctx.json {
            crate::output::print_json(
                &serde_json::json!({"valid": true, "file": path, "brief": brief}),
            );
        } else {
            println!(
                "brief `{}` is valid ({} setup file{}, output {})",
                brief.id,
                brief.setup.len(),
                if brief.setup.len() == 1 { "" } else { "s" },
                brief.output
            );
        }
        return Ok(OK);
    }
    let Some(out) = &args.out else {
        return Err(CliError::usage(anyhow!(
            "give --check FILE, or --knowledge-gap (--draft FILE | --theme FILE) --out FILE"
        )));
    };
    let (draft, file) = match (&args.draft, &args.theme) {
        (Some(draft_path), _) => {
            let file = draft_path.display().to_string();
            let text = read(draft_path)?;
            skillforge_contract::limits::check_json(&text).map_err(|e| {
                CliError::usage(anyhow!("invalid draft `{file}`: the document {e}"))
            })?;
            let draft: KnowledgeGapDraft = serde_json::from_str(&text)
                .map_err(|e| CliError::usage(anyhow!("invalid draft `{file}`: {e}")))?;
            (draft, file)
        }
        (None, Some(theme_path)) => {
            let (draft, file, _) = draft_from_theme(
                ctx,
                theme_path,
                &require_runtime(args.runtime.clone(), "drafting the brief")?,
                args.model.as_deref(),
            )
            .await?;
            (draft, file)
        }
        (None, None) => {
            return Err(CliError::usage(anyhow!(
                "--knowledge-gap needs --draft FILE or --theme FILE"
            )));
        }
    };
    let brief = check_and_write(&draft, &file, out).await?;
    println!(
        "brief `{}` written to {} (verify passes the good example and fails the bad one)",
        brief.id,
        out.display()
    );
    Ok(OK)
}

/// The knowledge-gap checks on `draft` (named `file` in messages): a valid brief (E-03), no rule
/// in its prompt or fixtures (E-02), a verify that passes the good example and fails the bad one
/// (E-01); only then is the brief written to `out`. Returns it.
///
/// # Errors
/// A failed check (exit 2; nothing written), or `out` cannot be written (exit 3).
pub(super) async fn check_and_write(
    draft: &KnowledgeGapDraft,
    file: &str,
    out: &Path,
) -> Result<Brief, CliError> {
    draft.brief.validate(file).map_err(CliError::usage)?;
    check_rules_absent(draft).map_err(CliError::usage)?;
    let good = verify_passes(&draft.brief, &draft.good_example).await?;
    let bad = verify_passes(&draft.brief, &draft.bad_example).await?;
    check_self_test(good, bad).map_err(CliError::usage)?;
    let text = serde_json::to_string_pretty(&draft.brief).map_err(|e| CliError::env(anyhow!(e)))?;
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| CliError::env(anyhow!("create `{}`: {e}", dir.display())))?;
    }
    std::fs::write(out, format!("{text}\n"))
        .map_err(|e| CliError::env(anyhow!("write `{}`: {e}", out.display())))?;
    Ok(draft.brief.clone())
}
