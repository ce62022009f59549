//! `eval backfill`, `eval theme`, `eval deploy`: giving adopted skills something to be measured by,
//! and shipping skill trees verified by digest (seed: skill-eval-loop, "backfill.py", "theme.py",
//! "deploy.sh").

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use anyhow::anyhow;
use chrono::Utc;
use clap::Args;
use skillforge_workflows::evalloop::arm_stage::copy_tree;
use skillforge_workflows::evalloop::backfill::backfill;
use skillforge_workflows::evalloop::corrections::{Episode, episodes};
use skillforge_workflows::evalloop::deploy::deploy_tree;
use skillforge_workflows::evalloop::layout::ledger_path;
use skillforge_workflows::evalloop::ledger::{LedgerRow, backup_ledger, read_ledger, rewrite_ledger};
use skillforge_workflows::evalloop::recheck::{RecheckConfig, WordStats, check_signature, usable_words};
use skillforge_workflows::evalloop::theme::{ThemeConfig, ThemeInput, derive_theme, matched_sessions};

use super::recheck::{CorpusArgs, corpus, description};
use crate::context::Context;
use crate::exit::{CHECK_FAILED, CliError, CliResult, OK};

fn skill_md(row: &LedgerRow) -> Option<(PathBuf, String)> {
    row.installed.iter().find_map(|p| {
        let path = p.join("SKILL.md");
        std::fs::read_to_string(&path).ok().map(|t| (path, t))
    })
}

/// Arguments of `eval backfill`.
#[derive(Debug, Args)]
pub struct BackfillArgs {
    /// Write the signatures (the ledger is backed up first); without it, print them.
    #[arg(long)]
    apply: bool,
    /// Re-derive signatures backfill wrote before (hand-written ones are never touched).
    #[arg(long)]
    redo: bool,
}

/// Runs `eval backfill`.
pub fn run_backfill(ctx: &Context, args: BackfillArgs) -> CliResult {
    let ledger = ledger_path(&ctx.home);
    let mut rows = read_ledger(&ledger).map_err(|e| CliError::env(anyhow!(e)))?;
    let changed = backfill(&mut rows, args.redo, skill_md);
    for row in rows.iter().filter(|r| changed.contains(&r.skill)) {
        if let Some(sig) = &row.signature {
            println!("{}: {} ({})", row.skill, sig.words.join(" "), sig.derived_from.as_deref().unwrap_or_default());
        }
    }
    if args.apply && !changed.is_empty() {
        let backup = backup_ledger(&ledger, Utc::now()).map_err(|e| CliError::env(anyhow!(e)))?;
        rewrite_ledger(&ledger, &rows).map_err(|e| CliError::env(anyhow!(e)))?;
        eprintln!("ledger backed up to {} and updated", backup.display());
    } else if changed.is_empty() {
        println!("nothing to backfill");
    }
    Ok(OK)
}

/// Arguments of `eval theme`.
#[derive(Debug, Args)]
pub struct ThemeArgs {
    /// The adopted skill to mine a theme for.
    #[arg(long)]
    skill: String,
    /// Write the theme onto the skill's ledger row (tagged `corrections:<n>`), backing the ledger up first.
    #[arg(long)]
    apply: bool,
    #[command(flatten)]
    corpus: CorpusArgs,
}

/// Runs `eval theme`.
pub fn run_theme(ctx: &Context, args: ThemeArgs) -> CliResult {
    let ledger = ledger_path(&ctx.home);
    let mut rows = read_ledger(&ledger).map_err(|e| CliError::env(anyhow!(e)))?;
    let idx = rows
        .iter()
        .rposition(|r| r.skill == args.skill && r.is_open_install())
        .ok_or_else(|| CliError::usage(anyhow!("`{}` has no open adoption in {}", args.skill, ledger.display())))?;
    let sessions = corpus(&args.corpus)?;
    let eps: Vec<Episode> = sessions.iter().flat_map(episodes).collect();
    let starts: BTreeMap<String, _> = sessions.iter().map(|s| (s.id.clone(), s.started_at)).collect();
    let stats = WordStats::of(&eps);
    let others: Vec<(String, BTreeSet<String>)> = rows
        .iter()
        .filter(|r| r.is_open_install() && r.skill != args.skill)
        .filter_map(|r| r.signature.as_ref().map(|s| (r.skill.clone(), matched_sessions(&usable_words(s, &stats, &RecheckConfig::default()), &eps, &stats))))
        .collect();
    let desc = description(&rows[idx].installed).unwrap_or_default();
    let input = ThemeInput { skill: &args.skill, description: &desc, episodes: &eps, session_start: &starts, adopted_at: rows[idx].at, others: &others };
    let theme = match derive_theme(&input, &ThemeConfig::default()) {
        Ok(t) => t,
        Err(why) => {
            println!("{}: no theme — {why}", args.skill);
            return Ok(CHECK_FAILED);
        }
    };
    println!("{}: {} ({} sessions, {})", args.skill, theme.signature.words.join(" "), theme.matched_sessions.len(), theme.signature.derived_from.as_deref().unwrap_or_default());
    if args.apply {
        if let Err(why) = check_signature(&theme.signature, Some(&desc), &stats, &RecheckConfig::default()) {
            println!("not applied: the recheck would refuse it: {why}");
            return Ok(CHECK_FAILED);
        }
        rows[idx].signature = Some(theme.signature);
        let backup = backup_ledger(&ledger, Utc::now()).map_err(|e| CliError::env(anyhow!(e)))?;
        rewrite_ledger(&ledger, &rows).map_err(|e| CliError::env(anyhow!(e)))?;
        eprintln!("ledger backed up to {} and updated", backup.display());
    }
    Ok(OK)
}

/// Arguments of `eval deploy`.
#[derive(Debug, Args)]
pub struct DeployArgs {
    /// The install root to copy into.
    #[arg(long, value_name = "DIR")]
    to: PathBuf,
    /// Skill trees to deploy.
    #[arg(required = true, value_name = "SKILL_DIR")]
    trees: Vec<PathBuf>,
}

/// Runs `eval deploy`.
pub fn run_deploy(_ctx: &Context, args: DeployArgs) -> CliResult {
    let mut failed = false;
    for tree in &args.trees {
        if !tree.join("SKILL.md").is_file() {
            return Err(CliError::usage(anyhow!("`{}` is not a skill tree (no SKILL.md)", tree.display())));
        }
        match deploy_tree(tree, &args.to, copy_tree) {
            Ok(digest) => println!("{} → {} sha256:{digest}", tree.display(), args.to.display()),
            Err(e) => {
                eprintln!("error: {e}");
                failed = true;
            }
        }
    }
    Ok(if failed { CHECK_FAILED } else { OK })
}
