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

/// Why a finished job did not succeed, in one line for human output: the job's error, else the
/// reason a run could not start (`not_runnable`), else an agent's API error or final message,
/// else the last non-empty line of its stderr. `None` for a job that succeeded or says nothing.
pub fn failure_reason(job: &skillforge_engine::Job) -> Option<String> {
    if job.state == skillforge_engine::JobState::Succeeded {
        return None;
    }
    let one_line = |s: &str| {
        s.lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .map(str::to_owned)
    };
    if let Some(e) = job.error.as_deref().and_then(one_line) {
        return Some(e);
    }
    let outcome = job.outcome.as_ref()?;
    if let skillforge_runner::ExitClass::NotRunnable { reason } = &outcome.exit {
        return one_line(reason);
    }
    if let Some(api) = outcome.detail.get("api_error").filter(|v| !v.is_null()) {
        let message = api
            .get("message")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default();
        let status = api
            .get("status")
            .and_then(serde_json::Value::as_u64)
            .map(|s| format!("HTTP {s}: "))
            .unwrap_or_default();
        return Some(format!("model API error: {status}{message}"));
    }
    outcome
        .stderr_tail
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(str::to_owned)
}

/// What a checker dimension's score came from, in a few words: per language, the tool and its
/// count (`clippy: 57 in rust`), or why a language was skipped. Empty when `raw` names none.
pub fn dimension_basis(raw: &serde_json::Value) -> String {
    let Some(languages) = raw.get("languages").and_then(serde_json::Value::as_object) else {
        return String::new();
    };
    languages
        .iter()
        .map(|(language, v)| {
            match (
                v.get("tool").and_then(serde_json::Value::as_str),
                v.get("count"),
            ) {
                (Some(tool), Some(count)) => format!("{tool}: {count} in {language}"),
                _ => match v.get("skipped").and_then(serde_json::Value::as_str) {
                    Some(why) => format!("{language} skipped: {why}"),
                    None => language.clone(),
                },
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// `rows` under `header` as aligned columns (two spaces apart, each as wide as its widest cell;
/// the columns whose index is in `right` right-aligned, the last column never padded).
pub fn table(header: &[&str], rows: &[Vec<String>], right: &[usize]) -> String {
    let width = |col: usize| {
        rows.iter()
            .map(|r| r.get(col).map_or(0, |c| c.chars().count()))
            .chain([header[col].chars().count()])
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..header.len()).map(width).collect();
    let line = |cells: Vec<&str>| {
        let last = cells.len().saturating_sub(1);
        let mut out = String::new();
        for (col, cell) in cells.into_iter().enumerate() {
            let pad = widths[col].saturating_sub(cell.chars().count());
            match (col == last, right.contains(&col)) {
                (_, true) => out.push_str(&format!("{}{cell}", " ".repeat(pad))),
                (true, false) => out.push_str(cell),
                (false, false) => out.push_str(&format!("{cell}{}", " ".repeat(pad))),
            }
            if col != last {
                out.push_str("  ");
            }
        }
        out.trim_end().to_owned()
    };
    let mut out = line(header.to_vec());
    for row in rows {
        out.push('\n');
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_aligns_every_column_to_its_widest_cell() {
        let rows = vec![
            vec![
                "a1".to_owned(),
                "queued".to_owned(),
                "0/3".to_owned(),
                "sh -c echo".to_owned(),
            ],
            vec![
                "b".to_owned(),
                "succeeded".to_owned(),
                "10/10".to_owned(),
                "true".to_owned(),
            ],
        ];
        let text = table(&["ID", "STATE", "ATTEMPTS", "WHAT"], &rows, &[2]);
        assert_eq!(
            text,
            "ID  STATE      ATTEMPTS  WHAT\na1  queued          0/3  sh -c echo\nb   succeeded     10/10  true"
        );
    }

    #[test]
    fn a_dimension_says_what_its_score_came_from() {
        let raw = serde_json::json!({"languages": {
            "rust": {"tool": "clippy", "count": 57, "score": 0.0, "files": 3, "failed_attempts": []},
            "python": {"skipped": "ruff not installed", "files": 1},
        }});
        assert_eq!(
            dimension_basis(&raw),
            "clippy: 57 in rust; python skipped: ruff not installed"
        );
        assert_eq!(
            dimension_basis(&serde_json::json!({"lines": 12})),
            "",
            "diff_size's raw names no tool"
        );
    }
}

/// `path` quoted for a shell when it needs it.
pub fn shell_word(path: &std::path::Path) -> String {
    let s = path.display().to_string();
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+".contains(c))
    {
        s
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}
