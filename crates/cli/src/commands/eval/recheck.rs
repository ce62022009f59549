//! `eval recheck [--dry-run] [--usage]`: the weekly recheck over real session corpora (seed:
//! skill-eval-loop, "recheck.py (weekly)"). Never calls a model. `--dry-run` prints every
//! decision and changes nothing; `--usage` lists loads since adoption per open entry, zeros
//! first, and decides nothing.

use std::path::{Path, PathBuf};

use anyhow::anyhow;
use chrono::{DateTime, Utc};
use clap::Args;
use skillforge_evalloop::install::{installed, uninstall};
use skillforge_evalloop::inventory::walk;
use skillforge_evalloop::layout::ledger_path;
use skillforge_evalloop::ledger::{LedgerRow, append_row, open_entries, read_ledger};
use skillforge_evalloop::recheck::{RecheckConfig, RecheckInput, RecheckVerdict, recheck};
use skillforge_evalloop::sessions::{Session, Source, check_limits, parse_session};

use crate::context::Context;
use crate::exit::{CliError, CliResult, OK};
use crate::output::print_json;

/// Where the session corpora are.
#[derive(Debug, Args)]
pub struct CorpusArgs {
    /// Session sources to read: any of claude, opencode, codex.
    #[arg(long, value_delimiter = ',', default_value = "claude,opencode,codex")]
    sources: Vec<String>,
    /// Claude Code projects dir (default `~/.claude/projects`).
    #[arg(long = "claude-dir", value_name = "DIR")]
    claude_dir: Option<PathBuf>,
    /// OpenCode session exports dir (`opencode export` JSON files).
    #[arg(long = "opencode-dir", value_name = "DIR")]
    opencode_dir: Option<PathBuf>,
    /// Codex sessions dir (default `~/.codex/sessions`).
    #[arg(long = "codex-dir", value_name = "DIR")]
    codex_dir: Option<PathBuf>,
}

/// Arguments of `eval recheck`.
#[derive(Debug, Args)]
pub struct RecheckArgs {
    #[command(flatten)]
    corpus: CorpusArgs,
    /// Print every decision; uninstall nothing, write nothing.
    #[arg(long = "dry-run")]
    dry_run: bool,
    /// Loads since adoption per open entry (zeros first); decides nothing.
    #[arg(long)]
    usage: bool,
    /// Recheck as of this time (RFC 3339), e.g. to replay a past week; default now.
    #[arg(long)]
    now: Option<DateTime<Utc>>,
}

/// Where a corpus was read from: each source's name, its directory and how many of its session
/// files were read (`None`: the directory does not exist).
#[derive(Debug, Default)]
pub(super) struct CorpusRead {
    /// Every session of the asked sources.
    pub sessions: Vec<Session>,
    /// (source, directory, files read) per asked source.
    pub looked: Vec<(String, PathBuf, Option<usize>)>,
}

impl CorpusRead {
    /// `claude ~/.claude/projects (3 files), codex ~/.codex/sessions (no such directory)`.
    pub fn places(&self) -> String {
        self.looked
            .iter()
            .map(|(name, dir, files)| match files {
                Some(n) => format!(
                    "{name} {} ({n} file{})",
                    dir.display(),
                    if *n == 1 { "" } else { "s" }
                ),
                None => format!("{name} {} (no such directory)", dir.display()),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Every session of the asked sources, and where they were looked for.
///
/// # Errors
/// An unknown source name, or a session file over the parser limits, named (exit 2).
pub(super) fn corpus(args: &CorpusArgs) -> Result<CorpusRead, CliError> {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    let mut sessions = Vec::new();
    let mut looked = Vec::new();
    for name in &args.sources {
        let source = Source::parse(name).ok_or_else(|| {
            CliError::usage(anyhow!(
                "--sources: unknown source `{name}` (claude, opencode, codex)"
            ))
        })?;
        let (dir, ext) = match source {
            Source::Claude => (
                args.claude_dir
                    .clone()
                    .unwrap_or_else(|| home.join(".claude/projects")),
                "jsonl",
            ),
            Source::Opencode => (
                args.opencode_dir
                    .clone()
                    .unwrap_or_else(|| home.join(".local/share/opencode/export")),
                "json",
            ),
            Source::Codex => (
                args.codex_dir
                    .clone()
                    .unwrap_or_else(|| home.join(".codex/sessions")),
                "jsonl",
            ),
        };
        let files: Vec<PathBuf> = walk(&dir)
            .into_iter()
            .filter(|f| f.extension().is_some_and(|e| e == ext))
            .collect();
        looked.push((
            name.clone(),
            dir.clone(),
            dir.is_dir().then_some(files.len()),
        ));
        for file in files {
            // An unreadable file is skipped; one over the parser limits stops the recheck (a
            // corpus read in part would decide on part of the evidence).
            let Ok(text) = std::fs::read_to_string(&file) else {
                continue;
            };
            check_limits(source, &text)
                .map_err(|e| CliError::usage(anyhow!("session `{}` {e}", file.display())))?;
            sessions.extend(parse_session(source, &text));
        }
    }
    Ok(CorpusRead { sessions, looked })
}

/// The `description:` of a SKILL.md front matter in the first recorded install path.
pub(super) fn description(paths: &[PathBuf]) -> Option<String> {
    let text = paths
        .iter()
        .find_map(|p| std::fs::read_to_string(Path::new(p).join("SKILL.md")).ok())?;
    text.lines().find_map(|l| {
        l.trim()
            .strip_prefix("description:")
            .map(|d| d.trim().trim_matches('"').to_owned())
    })
}

/// Runs `eval recheck`.
pub fn run(ctx: &Context, args: RecheckArgs) -> CliResult {
    let ledger = ledger_path(&ctx.home);
    let rows = read_ledger(&ledger).map_err(|e| CliError::env(anyhow!(e)))?;
    let now = args.now.unwrap_or_else(Utc::now);
    let read = corpus(&args.corpus)?;
    if read.sessions.is_empty() && !ctx.json {
        eprintln!(
            "note: no agent sessions found in {}; point --claude-dir, --codex-dir or --opencode-dir at yours",
            read.places()
        );
    }
    let sessions = read.sessions;
    let entries: Vec<LedgerRow> = open_entries(&rows).into_iter().cloned().collect();
    if args.usage {
        let mut usage: Vec<(u32, &LedgerRow)> = entries
            .iter()
            .map(|e| {
                (
                    sessions
                        .iter()
                        .filter(|s| s.started_at >= e.at && s.started_at <= now)
                        .map(|s| s.loads_of(&e.skill))
                        .sum(),
                    e,
                )
            })
            .collect();
        usage.sort_by_key(|(n, e)| (*n, e.skill.clone()));
        if ctx.json {
            print_json(
                &usage
                    .iter()
                    .map(
                        |(n, e)| serde_json::json!({"skill": e.skill, "loads": n, "adopted": e.at}),
                    )
                    .collect::<Vec<_>>(),
            );
        } else {
            for (n, e) in &usage {
                println!(
                    "{n:>4} loads since {}  {}",
                    e.at.format("%Y-%m-%d"),
                    e.skill
                );
            }
        }
        return Ok(OK);
    }
    let cfg = RecheckConfig::default();
    let mut outcomes = Vec::new();
    for entry in entries
        .iter()
        .filter(|e| e.recheck_due.is_none_or(|d| d <= now))
    {
        let desc = description(&entry.installed);
        let input = RecheckInput {
            entry,
            description: desc.as_deref(),
            installed: installed(&entry.installed),
            sessions: &sessions,
            now,
        };
        let outcome = recheck(&input, &cfg);
        let line = outcome.line();
        if !args.dry_run {
            let decision = match outcome.verdict {
                RecheckVerdict::AdoptConfirmed => Some("adopt-confirmed"),
                RecheckVerdict::Revoked => {
                    uninstall(&ctx.home, &entry.installed)
                        .map_err(|e| CliError::env(anyhow!("{e}")))?;
                    Some("revoked")
                }
                RecheckVerdict::Skip { .. } => None,
            };
            if let Some(decision) = decision {
                let mut row = entry.clone();
                row.decision = decision.to_owned();
                row.at = now;
                row.recheck_due = None;
                row.loads = Some(outcome.loads);
                row.reason = line.clone();
                append_row(&ledger, &row).map_err(|e| CliError::env(anyhow!(e)))?;
            }
        }
        if !ctx.json {
            println!("{}{line}", if args.dry_run { "[dry-run] " } else { "" });
        }
        outcomes.push(outcome);
    }
    if ctx.json {
        print_json(&outcomes);
    } else if outcomes.is_empty() {
        println!("no open entry is due for a recheck");
    }
    Ok(OK)
}
