//! Output helpers: JSON on stdout, human text, ages and times.

use serde::Serialize;

/// Prints `value` as pretty JSON on stdout.
pub fn print_json(value: &impl Serialize) {
    match serde_json::to_string_pretty(value) {
        Ok(s) => println!("{s}"),
        Err(e) => eprintln!("error: encode JSON output: {e}"),
    }
}

/// RFC 3339 (UTC, milliseconds) of a time in ms since the Unix epoch.
pub fn rfc3339_ms(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_else(|| ms.to_string())
}

/// A short human age: `850ms`, `12.3s`, `4m05s`, `2h03m`.
pub fn age(ms: i64) -> String {
    let ms = ms.max(0);
    if ms < 1_000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else if ms < 3_600_000 {
        format!("{}m{:02}s", ms / 60_000, (ms / 1000) % 60)
    } else {
        format!("{}h{:02}m", ms / 3_600_000, (ms / 60_000) % 60)
    }
}

/// Progress lines of a long step on stderr, each after `prefix` (e.g. `"• "`); nothing with
/// `quiet`.
pub struct StderrProgress {
    /// Printed before each line.
    pub prefix: &'static str,
    /// No output at all (`--json` runs keep stderr for errors).
    pub quiet: bool,
}

impl skillforge_stage::Progress for StderrProgress {
    fn step(&self, line: &str) {
        if !self.quiet {
            eprintln!("{}{line}", self.prefix);
        }
    }
}
