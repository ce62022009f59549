//! A check as a suite: one case per requested checker dimension.
//!
//! A dimension that scored 1 passes; one that scored below 1 (the tool counted items, the diff
//! passed its soft cap) fails with its score and what it came from; a skipped one is skipped
//! with its reason. `check` gates nothing (it exits 0 whenever it ran), so its annotations are
//! warnings. The dimension's `raw` measurement is the case's output.
//!
//! Each item a tool placed (`raw.languages.<lang>.locations`: file, line, message; the first 50
//! per language) is also a warning at its file and line.

use skillforge_runner_checker::{CheckReport, DimensionResult};

use super::suite::{Annotation, Case, Level, Outcome, Suite};

const CLASS: &str = "skillforge.check";

/// What `check` was asked: the repository and the commit range.
#[derive(Debug, Clone, Copy)]
pub struct Range<'a> {
    /// The repository as given.
    pub repo: &'a str,
    /// Base revision.
    pub base: &'a str,
    /// Head revision.
    pub head: &'a str,
}

/// The suite of a finished checker job `job_id` over `range` with `report`.
pub fn suite(job_id: &str, range: Range<'_>, report: &CheckReport) -> Suite {
    let mut suite = named(job_id, range);
    suite.property(
        "mean",
        report
            .mean
            .map(|m| format!("{m:.3}"))
            .unwrap_or_else(|| "none (every dimension skipped)".to_owned()),
    );
    suite.cases = report.dimensions.iter().map(dimension_case).collect();
    suite
}

/// The suite of a checker job `job_id` that ended without a report, with why.
pub fn no_report(job_id: &str, range: Range<'_>, why: &str) -> Suite {
    let mut suite = named(job_id, range);
    let message = format!("check job {job_id} could not run: {why}");
    suite.cases.push(Case::new(
        CLASS,
        "check job",
        Outcome::Errored {
            kind: "environment".into(),
            message,
            detail: String::new(),
        },
    ));
    suite
}

fn named(job_id: &str, range: Range<'_>) -> Suite {
    let mut suite = Suite::new(format!(
        "skillforge check {} {}..{}",
        range.repo, range.base, range.head
    ));
    suite.property("job_id", job_id);
    suite.property("repo", range.repo);
    suite.property("base", range.base);
    suite.property("head", range.head);
    suite
}

fn dimension_case(d: &DimensionResult) -> Case {
    let basis = crate::output::dimension_basis(&d.raw);
    let measured = if basis.is_empty() {
        String::new()
    } else {
        format!(" ({basis})")
    };
    let outcome = match (d.score, &d.skipped) {
        (Some(score), _) if score >= 1.0 => Outcome::Passed,
        (Some(score), _) => Outcome::Failed {
            kind: "score".into(),
            message: format!("scored {score:.3} of 1{measured}"),
            detail: String::new(),
        },
        (None, Some(reason)) => Outcome::Skipped {
            reason: reason.clone(),
        },
        (None, None) => Outcome::Skipped {
            reason: "no score and no reason in the report".into(),
        },
    };
    let mut case = Case::new(CLASS, d.name.clone(), outcome);
    if !d.raw.is_null() {
        case.stdout = serde_json::to_string_pretty(&d.raw).unwrap_or_default();
    }
    if let Some(a) = &mut case.annotation {
        a.level = Level::Warning;
        a.title = format!("check: {}", d.name);
    }
    case.located = located(d);
    case
}

/// A warning per item a tool placed, titled with the dimension and the tool.
fn located(d: &DimensionResult) -> Vec<Annotation> {
    findings(d)
        .into_iter()
        .map(|f| Annotation {
            level: Level::Warning,
            title: format!("check: {} ({})", d.name, f.tool),
            message: f.message,
            file: Some(f.file),
            line: Some(f.line),
        })
        .collect()
}

/// One item a checker's tool placed in a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Finding {
    /// The file, as the tool named it (relative to the checkout).
    pub(crate) file: String,
    /// 1-based line.
    pub(crate) line: u32,
    /// The tool's message (`reported here` when it gave none).
    pub(crate) message: String,
    /// The tool that reported it (`ruff`, `eslint`).
    pub(crate) tool: String,
}

/// The items a dimension's tools placed (`raw.languages.*.locations` with a file and a line), in
/// the report's order.
pub(crate) fn findings(d: &DimensionResult) -> Vec<Finding> {
    let Some(languages) = d
        .raw
        .get("languages")
        .and_then(serde_json::Value::as_object)
    else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in languages.values() {
        let tool = entry
            .get("tool")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default();
        let Some(locations) = entry.get("locations").and_then(serde_json::Value::as_array) else {
            continue;
        };
        for l in locations {
            let (Some(file), Some(line)) = (
                l.get("file").and_then(serde_json::Value::as_str),
                l.get("line")
                    .and_then(serde_json::Value::as_u64)
                    .and_then(|n| u32::try_from(n).ok()),
            ) else {
                continue;
            };
            let message = l
                .get("message")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("reported here");
            out.push(Finding {
                file: file.to_owned(),
                line,
                message: message.to_owned(),
                tool: tool.to_owned(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_dimension_is_a_case() {
        let report: CheckReport = serde_json::from_value(json!({
            "dimensions": [
                {"name": "diff_size", "score": 1.0, "skipped": null, "raw": {"changed_lines": 14}},
                {"name": "lint", "score": 0.9, "skipped": null, "raw": {"languages": {"python": {"tool": "ruff", "count": 2, "score": 0.9}}}},
                {"name": "complexity", "score": null, "skipped": "python: tool `radon` not runnable", "raw": null},
            ],
            "mean": 0.95,
        }))
        .unwrap();
        let s = suite(
            "j",
            Range {
                repo: "/r",
                base: "a",
                head: "b",
            },
            &report,
        );
        assert_eq!(s.name, "skillforge check /r a..b");
        assert_eq!(s.cases[0].outcome, Outcome::Passed);
        assert_eq!(s.cases[0].annotation, None);
        assert_eq!(
            s.cases[1].outcome,
            Outcome::Failed {
                kind: "score".into(),
                message: "scored 0.900 of 1 (ruff: 2 in python)".into(),
                detail: String::new()
            }
        );
        assert!(
            s.cases[1].stdout.contains("\"tool\": \"ruff\""),
            "{}",
            s.cases[1].stdout
        );
        let a = s.cases[1].annotation.as_ref().unwrap();
        assert_eq!((a.level, a.title.as_str()), (Level::Warning, "check: lint"));
        assert_eq!(
            s.cases[2].outcome,
            Outcome::Skipped {
                reason: "python: tool `radon` not runnable".into()
            }
        );
        assert_eq!(
            s.cases[2].annotation.as_ref().map(|a| a.level),
            Some(Level::Warning)
        );
        assert!(s.properties.contains(&("mean".into(), "0.950".into())));
    }
}
