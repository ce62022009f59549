//! `skillforge eval ...`: the skill eval loop (seed: skill-eval-loop). The logic lives in
//! [`skillforge_evalloop`]; these modules parse arguments, wait for jobs, print and map
//! errors to exit codes (0 adopted / probation / nothing to do, 1 the gate did not adopt or a
//! recheck revoked, 2 invalid input or a refusal, 3 the environment).

mod brief;
mod check;
mod deploy;
mod forge;
mod recheck;
mod report;

pub(crate) use report::report_html;
mod status;
mod upkeep;

use clap::Subcommand;

use crate::context::Context;
use crate::exit::CliError;

/// The error for `--brief ID` naming no forge of this home: says when the argument is a brief
/// file (whose id is what `--brief` takes here) and lists the forges there are.
/// A ledger reason without its trailing `forge:<id>` tag (how the ledger row finds its forge),
/// for human output, which names the forge already.
fn untagged<'a>(reason: &'a str, forge_id: &str) -> &'a str {
    reason
        .strip_suffix(&format!("forge:{forge_id}"))
        .map_or(reason, str::trim_end)
}

/// The arms' names for human output: `with` and `without`, each with the template version it
/// ran when the forge is of versions (`with (tldr@v2)`, `without (tldr@v1)`).
fn side_names(state: &skillforge_evalloop::forge::ForgeState) -> [String; 2] {
    let named = |side: &str, version: Option<&str>| match version {
        Some(v) => format!("{side} ({v})"),
        None => side.to_owned(),
    };
    let versions = state.versions.as_ref();
    [
        named("with", versions.map(|v| v.candidate.as_str())),
        named("without", versions.and_then(|v| v.rival.as_deref())),
    ]
}

/// The skill a forge evaluated, for human output: `` `tldr` ``, or the versions it compared
/// (`` `tldr@v2` against `tldr@v1` ``).
fn forged_words(state: &skillforge_evalloop::forge::ForgeState) -> String {
    match &state.versions {
        Some(v) => match &v.rival {
            Some(r) => format!("`{}` against `{r}`", v.candidate),
            None => format!("`{}`", v.candidate),
        },
        None => format!("`{}`", state.skill),
    }
}

fn no_forge(home: &std::path::Path, brief: &str) -> CliError {
    let runs = skillforge_evalloop::layout::eval_root(home).join("runs");
    let mut ids: Vec<String> = std::fs::read_dir(&runs)
        .map(|d| {
            d.flatten()
                .filter(|e| e.path().is_dir())
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    ids.sort();
    let from_file = std::fs::read_to_string(brief)
        .ok()
        .and_then(|text| skillforge_evalloop::brief::Brief::parse(&text, brief).ok())
        .map(|b| {
            format!(
                "; `{brief}` is a brief file: --brief here takes its id, `{}`",
                b.id
            )
        })
        .unwrap_or_default();
    let which = if ids.is_empty() {
        "this home has no forge yet".to_owned()
    } else {
        format!("forges here: {}", ids.join(", "))
    };
    CliError::usage(anyhow::anyhow!(
        "no forge of brief `{brief}` in `{}` ({which}){from_file}",
        runs.display()
    ))
}
use crate::exit::CliResult;

/// `skillforge eval ...`.
#[derive(Debug, Subcommand)]
pub enum EvalCommand {
    /// Validate a brief, or build a knowledge-gap brief from a drafted theme (written only when its verify passes the good example and fails the bad one).
    Brief(brief::BriefArgs),
    /// Run a brief against a skill: N samples × with/without arms → blind judge → aggregate → gate → ledger, as durable jobs.
    Forge(forge::ForgeArgs),
    /// Where a brief's forge stands: samples, arms, verdicts, aggregate, ledger row.
    Status(status::StatusArgs),
    /// Weekly recheck of adopted skills against real session corpora: confirm, revoke or skip (no model calls).
    Recheck(recheck::RecheckArgs),
    /// A verify helper: check the delivered document (file, or the reply's first fenced block) with comment spans stripped.
    Check(check::CheckArgs),
    /// Lift signatures out of adopted skills' SKILL.md (tagged skill_md; `--apply` backs the ledger up first).
    Backfill(upkeep::BackfillArgs),
    /// Mine a correction theme from real sessions for an adopted skill (`--apply` writes it tagged corrections:N) or a candidate (`--skill-dir`); `--out FILE` writes the theme `eval forge --mode corrections` drafts from.
    Theme(upkeep::ThemeArgs),
    /// Copy skill trees (default: the ledger's open adoptions) to an install root, here or on the worker labelled `host=NAME` (`--to NAME`), verifying each copy by digest where it landed.
    Deploy(deploy::DeployArgs),
    /// A brief's samples side by side (de-blinded after the verdict), the gate and the ledger row; `--html FILE` writes one self-contained page.
    Report(report::ReportArgs),
}

/// Runs an `eval` subcommand.
pub async fn run(ctx: &Context, cmd: EvalCommand) -> CliResult {
    match cmd {
        EvalCommand::Brief(args) => brief::run(ctx, args).await,
        EvalCommand::Forge(args) => forge::run(ctx, args).await,
        EvalCommand::Status(args) => status::run(ctx, args).await,
        EvalCommand::Recheck(args) => recheck::run(ctx, args),
        EvalCommand::Report(args) => report::run(ctx, args),
        EvalCommand::Check(args) => check::run(ctx, args),
        EvalCommand::Backfill(args) => upkeep::run_backfill(ctx, args),
        EvalCommand::Theme(args) => upkeep::run_theme(ctx, args),
        EvalCommand::Deploy(args) => deploy::run(ctx, args).await,
    }
}
