//! Measurement: the `process` job that runs `measurement.command`, and the classification of
//! what it signalled (seed: optimize-loop, loop.md 3.3 steps 1–3 and 3.7 "Error handling";
//! resolutions 1: `timed_out` → `timeout`, `censored` → `censored`, any other non-zero → `error`).
//!
//! The command prints one JSON object on stdout (the whole stdout, or its last non-empty line):
//!
//! ```json
//! {"metrics": {"ops": 412, "correct": 1},
//!  "cases": [{"id": "case-3", "value": 97, "reason": "nested loop"}],
//!  "items": [{"id": "c-1", "stratum": "small", "content": {...}}],
//!  "diagnostics": {"cost_usd": 0.0}}
//! ```
//!
//! `metrics` is required; `cases` (per-case results), `items` (judge input), `singletons` and
//! `cluster_summaries` (singleton evaluation input) and `diagnostics` are optional.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use skillforge_runner::{ExitClass, RunOutcome};
use skillforge_runner_process::ProcessPayload;

use super::decide::Measured;
use super::snapshot::WorstCase;
use super::spec::Direction;

/// Worst cases kept per snapshot (O-34: "about five").
pub const N_WORST_CASES: usize = 5;

/// One per-case result.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
pub struct Case {
    /// Case id.
    pub id: String,
    /// Its value on the primary metric.
    pub value: f64,
    /// What went wrong (or right).
    #[serde(default)]
    pub reason: String,
}

/// What one sample printed.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
pub struct SampleOutput {
    /// Metric name → value.
    pub metrics: BTreeMap<String, f64>,
    /// Per-case results.
    #[serde(default)]
    pub cases: Vec<Case>,
    /// Judge input items.
    #[serde(default)]
    pub items: Vec<serde_json::Value>,
    /// Items in no cluster, for singleton evaluation.
    #[serde(default)]
    pub singletons: Vec<serde_json::Value>,
    /// Summaries (titles/themes) of the clusters, for singleton judges; derived from `items`
    /// (`id` with `title`, `summary` or the first 80 characters of `content`) when absent.
    #[serde(default)]
    pub cluster_summaries: Vec<serde_json::Value>,
    /// Diagnostics.
    #[serde(default)]
    pub diagnostics: BTreeMap<String, serde_json::Value>,
}

/// One classified sample.
#[derive(Debug, Clone, PartialEq)]
pub enum Sample {
    /// Passed and printed a valid object.
    Ok(SampleOutput),
    /// Failed as classified (never `Measured::Ok`).
    Failed(Measured),
}

/// The process payload of one measurement sample: `sh -c command` in `checkout/working_directory`.
pub fn payload(
    command: &str,
    checkout: &Path,
    working_directory: Option<&str>,
    env: BTreeMap<String, String>,
) -> ProcessPayload {
    let mut p = ProcessPayload::shell(command);
    p.cwd = Some(match working_directory {
        Some(dir) if !dir.is_empty() && dir != "." => checkout.join(dir),
        _ => checkout.to_path_buf(),
    });
    p.env = env;
    p
}

/// The variable a candidate measurement gets when it may censor itself (seed: loop.md 3.3 step 1).
pub const CENSOR_ENV: &str = "CE_OPTIMIZE_CENSOR_AFTER";

/// Seconds after which the candidate's measurement may censor itself ([`CENSOR_ENV`]), given the
/// reference's metrics of the same pair (O-28): only when elapsed time alone proves the candidate
/// cannot become eligible, i.e. every required objective is an `elapsed`, minimized one (a
/// candidate still running at `reference × (1 − min_relative_change)` seconds can improve none of
/// them). Any other required objective could still win, so `None`: the measurement runs to the end.
pub fn censor_after(spec: &super::spec::Spec, reference: &BTreeMap<String, f64>) -> Option<u64> {
    let min_rel = spec.metric.min_relative_change.unwrap_or(0.01);
    let mut bound = 0.0_f64;
    for o in spec.objectives().iter().filter(|o| o.required) {
        if !spec.is_elapsed(&o.name) || o.direction != Direction::Minimize {
            return None;
        }
        bound = bound.max(reference.get(&o.name)? * (1.0 - min_rel));
    }
    (bound > 0.0).then(|| bound.ceil() as u64)
}

/// Classifies a finished measurement (O-64): passed + parsable output → [`Sample::Ok`]; our
/// timeout or exit 124 → `timeout`; exit 125 with the censor marker → `censored`; anything else
/// (125 without the marker, other codes, signals, not runnable, unparsable output) → `error`
/// with the reason.
pub fn classify(outcome: &RunOutcome) -> Sample {
    match &outcome.exit {
        ExitClass::Passed => match parse_output(&outcome.stdout_tail) {
            Ok(out) => Sample::Ok(out),
            Err(e) => Sample::Failed(Measured::Error(e.to_string())),
        },
        ExitClass::TimedOut => Sample::Failed(Measured::Timeout),
        ExitClass::Censored => Sample::Failed(Measured::Censored),
        ExitClass::Failed { code } => Sample::Failed(Measured::Error(format!(
            "measurement exited {code}: {}",
            last_line(&outcome.stderr_tail)
        ))),
        ExitClass::Killed { signal } => Sample::Failed(Measured::Error(format!(
            "measurement killed by signal {signal}"
        ))),
        ExitClass::NotRunnable { reason } => Sample::Failed(Measured::Error(format!(
            "measurement could not run: {reason}"
        ))),
    }
}

fn last_line(text: &str) -> String {
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .chars()
        .take(200)
        .collect()
}

/// Why a measurement's stdout is not a [`SampleOutput`].
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// Over the parser limits (`contract::limits`).
    #[error("measurement output {0}")]
    Limits(#[from] skillforge_contract::limits::LimitError),
    /// Neither the whole output nor its last non-empty line is the object; the parser's message
    /// about the whole output.
    #[error("measurement output is not a JSON object with a `metrics` map of numbers: {0}")]
    NotMetrics(serde_json::Error),
    /// The object's `metrics` map is empty.
    #[error("measurement output has an empty `metrics` map")]
    EmptyMetrics,
}

/// Parses the measurement's stdout (see module docs): the whole output, else its last non-empty
/// line, as a JSON object with a non-empty `metrics` map of numbers.
///
/// # Errors
/// [`OutputError`]: over the parser limits, no such object, or an empty `metrics` map.
pub fn parse_output(stdout: &str) -> Result<SampleOutput, OutputError> {
    let trimmed = stdout.trim();
    skillforge_contract::limits::check_json(trimmed)?;
    let whole = serde_json::from_str::<SampleOutput>(trimmed);
    let out = match whole {
        Ok(o) => o,
        Err(first) => {
            let line = trimmed
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("");
            serde_json::from_str::<SampleOutput>(line.trim())
                .map_err(|_| OutputError::NotMetrics(first))?
        }
    };
    if out.metrics.is_empty() {
        return Err(OutputError::EmptyMetrics);
    }
    Ok(out)
}

/// The worst [`N_WORST_CASES`] cases by `direction` (lowest first for maximize, highest first
/// for minimize), with their reasons (O-34).
pub fn worst_cases(cases: &[Case], direction: Direction) -> Vec<WorstCase> {
    let mut sorted: Vec<&Case> = cases.iter().collect();
    sorted.sort_by(|a, b| match direction {
        Direction::Maximize => a.value.total_cmp(&b.value),
        Direction::Minimize => b.value.total_cmp(&a.value),
    });
    sorted
        .into_iter()
        .take(N_WORST_CASES)
        .map(|c| WorstCase {
            id: c.id.clone(),
            value: c.value,
            reason: c.reason.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(exit: ExitClass, stdout: &str, stderr: &str) -> RunOutcome {
        RunOutcome {
            exit,
            exit_code: None,
            duration_ms: 1,
            stdout_tail: stdout.into(),
            stderr_tail: stderr.into(),
            detail: serde_json::Value::Null,
        }
    }

    // O-64
    #[test]
    fn o64_measurement_failures_are_classified_from_what_the_process_signalled() {
        assert_eq!(
            classify(&outcome(ExitClass::Censored, "", "SKILLFORGE_CENSORED")),
            Sample::Failed(Measured::Censored)
        );
        assert_eq!(
            classify(&outcome(ExitClass::TimedOut, "", "")),
            Sample::Failed(Measured::Timeout)
        );
        match classify(&outcome(
            ExitClass::Failed { code: 125 },
            "",
            "no marker here",
        )) {
            Sample::Failed(Measured::Error(reason)) => assert!(
                reason.contains("125") && reason.contains("no marker"),
                "{reason}"
            ),
            other => panic!("125 without the marker must be error: {other:?}"),
        }
        assert!(matches!(
            classify(&outcome(ExitClass::Killed { signal: 9 }, "", "")),
            Sample::Failed(Measured::Error(_))
        ));
        assert!(matches!(
            classify(&outcome(ExitClass::Passed, "not json", "")),
            Sample::Failed(Measured::Error(_))
        ));
        match classify(&outcome(
            ExitClass::Passed,
            "log line\n{\"metrics\":{\"ops\":12}}\n",
            "",
        )) {
            Sample::Ok(out) => assert_eq!(out.metrics["ops"], 12.0),
            other => panic!("{other:?}"),
        }
    }

    // O-28
    #[test]
    fn o28_censoring_only_when_every_required_objective_is_hopeless_by_elapsed_time() {
        let spec = |objectives: &str| {
            super::super::spec::Spec::parse(&format!("name: t\ndescription: d\nmetric:\n  primary: {{ name: seconds, direction: minimize, elapsed: true }}\n{objectives}measurement: {{ command: sh m.sh }}\nscope: {{ mutable: [src] }}\n"), "t.yaml").unwrap()
        };
        let reference = BTreeMap::from([("seconds".to_string(), 10.0), ("ops".to_string(), 50.0)]);
        assert_eq!(
            censor_after(&spec(""), &reference),
            Some(10),
            "only the elapsed primary: hopeless past 9.9 s"
        );
        let with_ops = spec(
            "  objectives:\n    - { name: seconds, direction: minimize, elapsed: true }\n    - { name: ops, direction: minimize }\n",
        );
        assert_eq!(
            censor_after(&with_ops, &reference),
            None,
            "ops could still win: the measurement runs to completion"
        );
        let optional_ops = spec(
            "  objectives:\n    - { name: seconds, direction: minimize, elapsed: true }\n    - { name: ops, direction: minimize, required: false }\n",
        );
        assert_eq!(
            censor_after(&optional_ops, &reference),
            Some(10),
            "an optional objective does not keep a hopeless run alive"
        );
        assert_eq!(
            censor_after(&spec(""), &BTreeMap::new()),
            None,
            "no reference value, no bound"
        );
    }

    // O-34
    #[test]
    fn o34_about_five_worst_cases_are_kept_with_reasons() {
        let cases: Vec<Case> = (0..10)
            .map(|i| Case {
                id: format!("c{i}"),
                value: f64::from(i),
                reason: format!("r{i}"),
            })
            .collect();
        let worst = worst_cases(&cases, Direction::Maximize);
        assert_eq!(
            worst.iter().map(|w| w.id.as_str()).collect::<Vec<_>>(),
            ["c0", "c1", "c2", "c3", "c4"]
        );
        assert_eq!(worst[0].reason, "r0");
        let worst = worst_cases(&cases, Direction::Minimize);
        assert_eq!(worst[0].id, "c9");
    }
}
