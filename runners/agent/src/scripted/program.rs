//! The scripted agent as a program: read the prompt on stdin, write the transcript on stdout.
//!
//! This is a process entry point, so unlike the rest of the library it writes to stdout and
//! stderr.

use std::io::{Read, Write};
use std::process::ExitCode;
use std::time::Duration;

use super::scripted_transcript;

/// The CLI's hidden subcommand that runs [`scripted_main`] (`skillforge agent-scripted`); the
/// `scripted` runtime profile passes it as the first argument, and `skillforge-agent-scripted`
/// accepts it too.
pub const SCRIPTED_SUBCOMMAND: &str = "agent-scripted";

/// Milliseconds the scripted agent sleeps before answering (unset: none). For tests that need a
/// run to still be going when they kill or cancel it; the `scripted` profile passes it through.
pub const SCRIPTED_DELAY_ENV: &str = "SKILLFORGE_SCRIPTED_DELAY_MS";

/// Runs the scripted agent: `args` are the arguments after the program name (an optional leading
/// [`SCRIPTED_SUBCOMMAND`], nothing else). Reads the whole prompt from stdin, sleeps
/// [`SCRIPTED_DELAY_ENV`] ms if set, writes the `scripted_jsonl` transcript (see
/// [`super::scripted_transcript`]) to stdout.
///
/// Exit codes: 0 on success; 2 for unexpected arguments, a non-UTF-8 prompt, an unknown task or
/// a bad option count (message on stderr); 1 when stdin or stdout fail.
pub fn scripted_main(args: impl IntoIterator<Item = String>) -> ExitCode {
    let extra: Vec<String> = args
        .into_iter()
        .enumerate()
        .filter(|(idx, arg)| !(*idx == 0 && arg == SCRIPTED_SUBCOMMAND))
        .map(|(_, arg)| arg)
        .collect();
    if !extra.is_empty() {
        eprintln!("scripted agent: unexpected arguments {extra:?} (the prompt is read from stdin)");
        return ExitCode::from(2);
    }
    let mut bytes = Vec::new();
    if let Err(error) = std::io::stdin().read_to_end(&mut bytes) {
        eprintln!("scripted agent: read prompt from stdin: {error}");
        return ExitCode::from(1);
    }
    let Ok(prompt) = String::from_utf8(bytes) else {
        eprintln!("scripted agent: prompt on stdin is not UTF-8");
        return ExitCode::from(2);
    };
    let cwd = std::env::current_dir().unwrap_or_default();
    let plan = std::env::var(super::edits::SCRIPTED_EDITS_ENV).ok();
    let edited = match super::edits::experiment_transcript(&prompt, plan.as_deref(), &cwd) {
        Ok(t) => t,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::from(2);
        }
    };
    let transcript = match edited.map_or_else(|| scripted_transcript(&prompt), Ok) {
        Ok(transcript) => transcript,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::from(2);
        }
    };
    if let Some(delay_ms) = std::env::var(SCRIPTED_DELAY_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
    {
        std::thread::sleep(Duration::from_millis(delay_ms));
    }
    let mut stdout = std::io::stdout().lock();
    if let Err(error) = stdout
        .write_all(transcript.as_bytes())
        .and_then(|()| stdout.flush())
    {
        eprintln!("scripted agent: write transcript to stdout: {error}");
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}
