//! `eval backfill`, `eval theme`: giving adopted skills something to be measured by (seed:
//! skill-eval-loop, "backfill.py", "theme.py").

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::anyhow;
use chrono::Utc;
use clap::Args;
use skillforge_evalloop::backfill::backfill;
use skillforge_evalloop::corrections::{Episode, episodes};
use skillforge_evalloop::deploy::skill_tree_name;
use skillforge_evalloop::inventory::walk;
use skillforge_evalloop::layout::ledger_path;
use skillforge_evalloop::ledger::{LedgerRow, backup_ledger, read_ledger, rewrite_ledger};
use skillforge_evalloop::recheck::{RecheckConfig, WordStats, check_signature, usable_words};
use skillforge_evalloop::theme::{
    ThemeConfig, ThemeInput, derive_theme, forge_theme, matched_sessions,
};

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
            println!(
                "{}: {} ({})",
                row.skill,
                sig.words.join(" "),
                sig.derived_from.as_deref().unwrap_or_default()
            );
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
    /// The adopted skill to mine a theme for (its ledger row; adoption date = the row's).
    #[arg(
        long,
        required_unless_present = "skill_dir",
        conflicts_with = "skill_dir"
    )]
    skill: Option<String>,
    /// A candidate skill (a dir holding SKILL.md) to mine a theme for before it is forged: seeded from its name and description; the baseline is every session before now.
    #[arg(long = "skill-dir", value_name = "DIR")]
    skill_dir: Option<PathBuf>,
    /// Write the theme onto the skill's ledger row (tagged `corrections:<n>`), backing the ledger up first.
    #[arg(long, conflicts_with = "skill_dir")]
    apply: bool,
    /// Write the theme file `eval forge --mode corrections --theme` reads: {name, rules, corrections, signature}.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// The user's notes (e.g. `~/.claude/projects/<proj>/memory`): their lines the theme matches become the theme's rules, with the skill's own SKILL.md lines.
    #[arg(long, value_name = "DIR")]
    memory: Option<PathBuf>,
    #[command(flatten)]
    corpus: CorpusArgs,
}

/// The rule sources of `--out`: every `.md`/`.txt` under `--memory`, then the skill's SKILL.md.
fn rule_sources(
    memory: Option<&Path>,
    skill_md: Option<&Path>,
) -> Result<Vec<(String, String)>, CliError> {
    let mut files: Vec<PathBuf> = Vec::new();
    if let Some(dir) = memory {
        if !dir.is_dir() {
            return Err(CliError::usage(anyhow!(
                "--memory `{}` is not a directory",
                dir.display()
            )));
        }
        let mut found: Vec<PathBuf> = walk(dir)
            .into_iter()
            .filter(|f| f.extension().is_some_and(|e| e == "md" || e == "txt"))
            .collect();
        found.sort();
        files.extend(found);
    }
    files.extend(skill_md.map(Path::to_path_buf));
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f)
            .map_err(|e| CliError::usage(anyhow!("read `{}`: {e}", f.display())))?;
        out.push((format!("`{}`", f.display()), text));
    }
    Ok(out)
}

/// Runs `eval theme`.
pub fn run_theme(ctx: &Context, args: ThemeArgs) -> CliResult {
    let ledger = ledger_path(&ctx.home);
    let mut rows = read_ledger(&ledger).map_err(|e| CliError::env(anyhow!(e)))?;
    // (skill, its dirs, adoption date, its ledger row when adopted)
    let (skill, dirs, adopted_at, idx) = match (&args.skill, &args.skill_dir) {
        (Some(skill), _) => {
            let idx = rows
                .iter()
                .rposition(|r| r.skill == *skill && r.is_open_install())
                .ok_or_else(|| {
                    CliError::usage(anyhow!(
                        "`{skill}` has no open adoption in {}",
                        ledger.display()
                    ))
                })?;
            (
                skill.clone(),
                rows[idx].installed.clone(),
                rows[idx].at,
                Some(idx),
            )
        }
        (None, Some(dir)) => {
            let name = skill_tree_name(dir).map_err(|e| CliError::usage(anyhow!(e)))?;
            (name, vec![dir.clone()], Utc::now(), None)
        }
        (None, None) => {
            return Err(CliError::usage(anyhow!(
                "give --skill NAME (adopted) or --skill-dir DIR (a candidate)"
            )));
        }
    };
    let read = corpus(&args.corpus)?;
    let sessions = &read.sessions;
    let eps: Vec<Episode> = sessions.iter().flat_map(episodes).collect();
    let starts: BTreeMap<String, _> = sessions
        .iter()
        .map(|s| (s.id.clone(), s.started_at))
        .collect();
    let stats = WordStats::of(&eps);
    let others: Vec<(String, BTreeSet<String>)> = rows
        .iter()
        .filter(|r| r.is_open_install() && r.skill != skill)
        .filter_map(|r| {
            r.signature.as_ref().map(|s| {
                (
                    r.skill.clone(),
                    matched_sessions(
                        &usable_words(s, &stats, &RecheckConfig::default()),
                        &eps,
                        &stats,
                    ),
                )
            })
        })
        .collect();
    let desc = description(&dirs).unwrap_or_default();
    let input = ThemeInput {
        skill: &skill,
        description: &desc,
        episodes: &eps,
        session_start: &starts,
        adopted_at,
        others: &others,
    };
    let theme = match derive_theme(&input, &ThemeConfig::default()) {
        Ok(t) => t,
        Err(why) => {
            println!("{skill}: no theme — {why}");
            println!(
                "read {} session{} from {}; point --claude-dir, --codex-dir or --opencode-dir at your sessions",
                sessions.len(),
                if sessions.len() == 1 { "" } else { "s" },
                read.places()
            );
            return Ok(CHECK_FAILED);
        }
    };
    println!(
        "{skill}: {} ({} sessions, {})",
        theme.signature.words.join(" "),
        theme.matched_sessions.len(),
        theme.signature.derived_from.as_deref().unwrap_or_default()
    );
    if args.apply || args.out.is_some() {
        if let Err(why) = check_signature(
            &theme.signature,
            Some(&desc),
            &stats,
            &RecheckConfig::default(),
        ) {
            println!(
                "not {}: the recheck would refuse it: {why}",
                if args.apply { "applied" } else { "written" }
            );
            return Ok(CHECK_FAILED);
        }
    }
    if let Some(out) = &args.out {
        let skill_md = dirs
            .iter()
            .map(|d| d.join("SKILL.md"))
            .find(|p| p.is_file());
        let sources = rule_sources(args.memory.as_deref(), skill_md.as_deref())?;
        let file = match forge_theme(&skill, &theme, &eps, &sources) {
            Ok(f) => f,
            Err(why) => {
                println!("{skill}: no theme file — {why}");
                return Ok(CHECK_FAILED);
            }
        };
        let text = serde_json::to_string_pretty(&file).map_err(|e| CliError::env(anyhow!(e)))?;
        std::fs::write(out, format!("{text}\n"))
            .map_err(|e| CliError::env(anyhow!("write `{}`: {e}", out.display())))?;
        eprintln!(
            "theme written to {} ({} rules, {} corrections): eval forge --mode corrections --theme {} --skill-dir ...",
            out.display(),
            file.rules.len(),
            file.corrections.len(),
            out.display()
        );
    }
    if let (true, Some(idx)) = (args.apply, idx) {
        rows[idx].signature = Some(theme.signature);
        let backup = backup_ledger(&ledger, Utc::now()).map_err(|e| CliError::env(anyhow!(e)))?;
        rewrite_ledger(&ledger, &rows).map_err(|e| CliError::env(anyhow!(e)))?;
        eprintln!("ledger backed up to {} and updated", backup.display());
    }
    Ok(OK)
}
