//! `--format github`: GitHub Actions workflow commands on stdout and a Markdown job summary.
//!
//! Escaping follows GitHub's rules (actions/toolkit `command.ts`, `escapeData` and
//! `escapeProperty`): in a command's data `%` → `%25`, `\r` → `%0D`, `\n` → `%0A`; in a property
//! value also `:` → `%3A` and `,` → `%2C`. So a message of many lines is one command, and text a
//! verified repository printed cannot end a command early and start another.
//!
//! The human report, which quotes the repository's own output (command tails), is printed
//! between `::stop-commands::TOKEN` and `::TOKEN::` with a fresh random token, so nothing in it is
//! read as a workflow command; it sits in a collapsed `::group::`.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use super::suite::{Annotation, Case, Level, Outcome, Suite, plain};

/// The workflow command `::NAME key=value,…::data`, with GitHub's escaping of `properties`'
/// values and of `data`. Properties with an empty value are left out.
pub fn command(name: &str, properties: &[(&str, &str)], data: &str) -> String {
    let props: Vec<String> = properties
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{k}={}", escape_property(v)))
        .collect();
    match props.is_empty() {
        true => format!("::{name}::{}", escape_data(data)),
        false => format!("::{name} {}::{}", props.join(","), escape_data(data)),
    }
}

/// GitHub's `escapeData`: `%`, `\r`, `\n`.
fn escape_data(text: &str) -> String {
    text.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// GitHub's `escapeProperty`: `escapeData` plus `:` and `,`.
fn escape_property(text: &str) -> String {
    escape_data(text).replace(':', "%3A").replace(',', "%2C")
}

/// The annotation as a workflow command (`::error file=…,line=…,title=…::message`).
pub fn annotation(a: &Annotation) -> String {
    let name = match a.level {
        Level::Error => "error",
        Level::Warning => "warning",
    };
    let line = a.line.map(|l| l.to_string()).unwrap_or_default();
    let file = a.file.as_deref().unwrap_or_default();
    command(
        name,
        &[("file", file), ("line", &line), ("title", &plain(&a.title))],
        &plain(&a.message),
    )
}

/// A fresh token for `::stop-commands::` (random, so the paused output cannot guess it).
pub fn stop_token() -> String {
    format!("skillforge-{}", uuid::Uuid::new_v4().simple())
}

/// The job summary of a suite in Markdown: a headline with the counts, the properties, a table
/// of the cases and, for each case that did not pass, its detail and output tails folded in a
/// `<details>` block.
pub fn summary(suite: &Suite) -> String {
    let tally = suite.tally();
    let mut counts = Vec::new();
    for (n, word) in [
        (tally.failed, "failed"),
        (tally.errored, "errored"),
        (tally.skipped, "skipped"),
        (tally.passed, "passed"),
    ] {
        if n > 0 {
            counts.push(format!("{n} {word}"));
        }
    }
    let mut md = String::new();
    let _ = writeln!(
        md,
        "### {}: {}\n",
        md_text(&suite.name),
        if counts.is_empty() {
            "no cases".to_owned()
        } else {
            counts.join(", ")
        }
    );
    if !suite.properties.is_empty() {
        let facts: Vec<String> = suite
            .properties
            .iter()
            .map(|(k, v)| format!("{}: {}", md_text(k), md_text(v)))
            .collect();
        let _ = writeln!(md, "{}\n", facts.join(" · "));
    }
    md.push_str("| | Case | Result | Time |\n|---|---|---|---|\n");
    for case in &suite.cases {
        let (mark, result) = match &case.outcome {
            Outcome::Passed => ("✅", "passed".to_owned()),
            Outcome::Failed { message, .. } => ("❌", format!("failed: {message}")),
            Outcome::Errored { message, .. } => ("⚠️", format!("error: {message}")),
            Outcome::Skipped { reason } => ("⏭️", format!("skipped: {reason}")),
        };
        let _ = writeln!(
            md,
            "| {mark} | {} | {} | {:.1}s |",
            md_text(&case.name),
            md_text(&result),
            case.time_ms as f64 / 1000.0
        );
    }
    for case in suite
        .cases
        .iter()
        .filter(|c| matches!(c.outcome, Outcome::Failed { .. } | Outcome::Errored { .. }))
    {
        details(&mut md, case);
    }
    md
}

fn details(md: &mut String, case: &Case) {
    let detail = match &case.outcome {
        Outcome::Failed { detail, .. } | Outcome::Errored { detail, .. } => detail.as_str(),
        _ => "",
    };
    // A detail that is the tail of an output shown below (a verify command's) is not shown twice.
    let is_output_tail = [&case.stdout, &case.stderr]
        .iter()
        .any(|out| out.trim_end().ends_with(detail.trim()));
    let detail = if is_output_tail { "" } else { detail };
    let blocks: Vec<(&str, &str)> = [
        ("detail", detail),
        ("stdout", case.stdout.as_str()),
        ("stderr", case.stderr.as_str()),
    ]
    .into_iter()
    .filter(|(_, t)| !t.trim().is_empty())
    .collect();
    if blocks.is_empty() {
        return;
    }
    let _ = writeln!(
        md,
        "\n<details><summary>{}</summary>\n",
        html_text(&case.name)
    );
    for (label, text) in blocks {
        let text = plain(text);
        let fence = "`".repeat(longest_backtick_run(&text).max(2) + 1);
        let _ = writeln!(
            md,
            "{label}:\n\n{fence}text\n{}\n{fence}\n",
            text.trim_end()
        );
    }
    md.push_str("</details>\n");
}

fn longest_backtick_run(text: &str) -> usize {
    text.split(|c| c != '`').map(str::len).max().unwrap_or(0)
}

/// `text` as inline Markdown on one line: the characters that could act as inline syntax in a
/// table cell (`\`, `` ` ``, `*`, `_`, `~`, `[`, `]`, `<`, `>`, `&`, `|`) backslash-escaped, as
/// CommonMark allows for any ASCII punctuation; line breaks become spaces.
fn md_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in plain(text).chars() {
        match c {
            '\r' | '\n' | '\t' => out.push(' '),
            '\\' | '`' | '*' | '_' | '~' | '[' | ']' | '<' | '>' | '&' | '|' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// `text` for an HTML element's content (`<summary>`).
fn html_text(text: &str) -> String {
    plain(text)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace(['\r', '\n'], " ")
}

/// Appends `markdown` to the step summary file, when `path` names one (`$GITHUB_STEP_SUMMARY`).
///
/// # Errors
/// The file could not be opened or written (the message names it).
pub fn append_summary(path: &Path, markdown: &str) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("open the step summary `{}`", path.display()))?;
    file.write_all(format!("{markdown}\n").as_bytes())
        .with_context(|| format!("append to the step summary `{}`", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workflow_commands_escape_data_and_properties() {
        for (name, props, data, expected) in [
            ("error", vec![], "plain", "::error::plain"),
            (
                "error",
                vec![("title", "t")],
                "100% done\r\nnext",
                "::error title=t::100%25 done%0D%0Anext",
            ),
            (
                "error",
                vec![
                    ("file", "src/a,b:c.py"),
                    ("line", "12"),
                    ("title", "lint: 2%"),
                ],
                "a::b, c",
                "::error file=src/a%2Cb%3Ac.py,line=12,title=lint%3A 2%25::a::b, c",
            ),
            (
                "warning",
                vec![("file", ""), ("title", "x\ny")],
                "m",
                "::warning title=x%0Ay::m",
            ),
        ] {
            assert_eq!(command(name, &props, data), expected);
        }
    }

    #[test]
    fn an_annotation_names_its_place_when_it_has_one() {
        let mut a = Annotation {
            level: Level::Error,
            title: "check: lint".into(),
            message: "E501\nline too long".into(),
            file: None,
            line: None,
        };
        assert_eq!(
            annotation(&a),
            "::error title=check%3A lint::E501%0Aline too long"
        );
        a.file = Some("src/app.py".into());
        a.line = Some(7);
        a.level = Level::Warning;
        assert_eq!(
            annotation(&a),
            "::warning file=src/app.py,line=7,title=check%3A lint::E501%0Aline too long"
        );
        a.message = "\u{1b}[31mred\u{1b}[0m".into();
        assert!(annotation(&a).ends_with("::red"), "colours are dropped");
    }

    #[test]
    fn the_summary_tables_the_cases_and_folds_the_failures() {
        let mut suite = Suite::new("skillforge verify");
        suite.property("verdict", "fail");
        let mut fail = Case::new(
            "c",
            "exit 4 | tee",
            Outcome::Failed {
                kind: "failed".into(),
                message: "exit 4".into(),
                detail: "fence".into(),
            },
        );
        fail.stderr = "boom ``` fence\n".into();
        suite.cases = vec![Case::new("c", "true", Outcome::Passed), fail];
        let md = summary(&suite);
        assert!(
            md.starts_with("### skillforge verify: 1 failed, 1 passed\n\nverdict: fail\n"),
            "{md}"
        );
        assert!(md.contains("| ✅ | true | passed | 0.0s |"), "{md}");
        assert!(
            md.contains("| ❌ | exit 4 \\| tee | failed: exit 4 | 0.0s |"),
            "a pipe in a cell is escaped: {md}"
        );
        assert!(
            md.contains("<details><summary>exit 4 | tee</summary>"),
            "{md}"
        );
        assert!(
            md.contains("stderr:\n\n````text\nboom ``` fence\n````\n"),
            "the fence outruns the text's backticks: {md}"
        );
        assert!(
            !md.contains("detail:"),
            "a detail that is the output's tail is shown once: {md}"
        );
        if let Outcome::Failed { detail, .. } = &mut suite.cases[1].outcome {
            *detail = "gate lines".into();
        }
        assert!(
            summary(&suite).contains("detail:\n\n```text\ngate lines\n```\n"),
            "{}",
            summary(&suite)
        );
    }
}
