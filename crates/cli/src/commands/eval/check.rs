//! `eval check [--file PATH] [--forbid WORD]... [--max-words N]`: a verify for briefs that checks
//! the delivered document — the file, or the first fenced block of the reply in `$FORGE_FINAL` —
//! with comment spans stripped (E-47). Exit 0 acceptable, 1 violations (listed on stderr).

use std::path::PathBuf;

use anyhow::anyhow;
use clap::Args;
use skillforge_evalloop::brief::FINAL_ENV;
use skillforge_evalloop::check::{delivered_document, violations};

use crate::context::Context;
use crate::exit::{CHECK_FAILED, CliError, CliResult, OK};

/// Arguments of `eval check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The delivered file; default the reply in `$FORGE_FINAL` (its first fenced block, if any).
    #[arg(long, value_name = "PATH")]
    file: Option<PathBuf>,
    /// A word the document must not contain (whole word, any case); repeatable.
    #[arg(long)]
    forbid: Vec<String>,
    /// Most words the document may have.
    #[arg(long = "max-words")]
    max_words: Option<usize>,
}

/// Runs `eval check`.
pub fn run(_ctx: &Context, args: CheckArgs) -> CliResult {
    let (path, is_reply) = match args.file {
        Some(p) => (p, false),
        None => (
            std::env::var_os(FINAL_ENV)
                .map(PathBuf::from)
                .ok_or_else(|| CliError::usage(anyhow!("give --file or set {FINAL_ENV}")))?,
            true,
        ),
    };
    let text = std::fs::read_to_string(&path)
        .map_err(|e| CliError::usage(anyhow!("read `{}`: {e}", path.display())))?;
    let document = if is_reply {
        delivered_document(&text)
    } else {
        &text
    };
    let found = violations(document, &args.forbid, args.max_words);
    for v in &found {
        eprintln!("violation: {v}");
    }
    Ok(if found.is_empty() { OK } else { CHECK_FAILED })
}
