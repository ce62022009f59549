//! The human pick of an A/B, asked for on a terminal: shared by `ab` (a pick is owed) and an
//! intercepted live `ask` (seed: SkillOpt, "Champion-challenger A/B preferences (Mode B)",
//! "Live-traffic A/B interception (off by default, #482)"; S-65, S-73).

use std::io::{BufRead, IsTerminal};

use anyhow::anyhow;
use skillforge_skillopt::ab::pick::Label;

use crate::exit::CliError;

/// Whether stdin is a terminal (a human can be asked).
pub fn stdin_is_terminal() -> bool {
    std::io::stdin().is_terminal()
}

/// Reads one line of stdin into `line`; returns the bytes read (0 at end of input).
///
/// # Errors
/// [`CliError::env`] when stdin cannot be read.
pub fn read_stdin_line(line: &mut String) -> Result<usize, CliError> {
    line.clear();
    std::io::stdin()
        .lock()
        .read_line(line)
        .map_err(|e| CliError::env(anyhow!("read the pick from stdin: {e}")))
}

/// Asks `Which answer is better? [a/b, s to skip]` on stderr until the human answers `a`, `b`,
/// `s`/`skip` or ends the input; anything else is asked again. `Ok(None)` is a skip (S-73: the
/// caller records no pick).
///
/// # Errors
/// [`CliError::env`] when stdin cannot be read.
pub fn ask_on_terminal() -> Result<Option<Label>, CliError> {
    let mut line = String::new();
    loop {
        eprint!("Which answer is better? [a/b, s to skip]: ");
        if read_stdin_line(&mut line)? == 0 {
            eprintln!();
            return Ok(None);
        }
        if let Some(label) = Label::parse(&line) {
            return Ok(Some(label));
        }
        match line.trim().to_ascii_lowercase().as_str() {
            "s" | "skip" => return Ok(None),
            other => eprintln!("`{other}` is not a pick: answer a, b, or s"),
        }
    }
}
