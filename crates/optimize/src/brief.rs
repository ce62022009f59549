//! The experiment worker brief, rendered from the seed's template with every variable, and the
//! remote delta (seed: optimize-loop, experiment-prompt-template.md; O-04, O-05).
//!
//! The brief carries the rolling window of the last [`WINDOW`] experiments (2–3 lines each), the
//! source digest and the current best's worst cases; never the full log, the strategy digest or
//! any holdout result (O-39).

use std::fmt::Write as _;

use super::log::{Entry, ExperimentLog};
use super::snapshot::{Snapshot, WorstCase};
use super::spec::{Spec, StabilityMode};

/// Experiments in the rolling window.
pub const WINDOW: usize = 10;
/// What `{failure_cases}` says when the current best recorded none (never invented).
pub const NONE_RECORDED: &str = "none recorded";

/// The remote-only variables.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteVars {
    /// `git rev-parse optimize/<spec>` at dispatch.
    pub base_sha: String,
    /// Paired samples per side the current ladder step needs ([`sample_count`]).
    pub sample_count: u32,
    /// The git remote to clone or fetch (`execution.remote`).
    pub url: String,
}

/// Paired samples per side for a remote worker's first dispatch (O-05): 1 for `ladder` and
/// `stable`, `repeat_count` for `repeat`.
pub fn sample_count(spec: &Spec) -> u32 {
    match spec.measurement.stability.mode {
        StabilityMode::Repeat => spec.measurement.repeat_count(),
        StabilityMode::Stable | StabilityMode::Ladder | StabilityMode::Pace => 1,
    }
}

fn metrics_block(s: &Snapshot) -> String {
    if s.metrics.is_empty() {
        return "(not measured)".into();
    }
    s.metrics
        .iter()
        .map(|(k, m)| format!("{k}: {}", fmt_num(m.aggregate)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A number without trailing zeros.
pub fn fmt_num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{x:.0}")
    } else {
        format!("{x:.4}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_owned()
    }
}

fn list(items: &[String], empty: &str) -> String {
    if items.is_empty() {
        return empty.to_owned();
    }
    items
        .iter()
        .map(|i| format!("- {i}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn failure_cases(cases: &[WorstCase]) -> String {
    if cases.is_empty() {
        return NONE_RECORDED.to_owned();
    }
    cases
        .iter()
        .map(|c| {
            format!(
                "- {} ({}): {}",
                c.id,
                fmt_num(c.value),
                if c.reason.is_empty() {
                    "no reason recorded"
                } else {
                    &c.reason
                }
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Two or three lines for one experiment: hypothesis, outcome with the selection numbers, learnings.
pub fn summary(entry: &Entry, primary: &str) -> String {
    let mut s = format!(
        "- exp-{:03} [{}] {}\n  outcome: {}",
        entry.experiment,
        entry.category,
        entry.description,
        entry.outcome.label()
    );
    if let Some(c) = entry.standalone()
        && let (Some(r), Some(k)) = (
            c.reference.snapshot.aggregate(primary),
            c.candidate.snapshot.aggregate(primary),
        )
    {
        let _ = write!(s, "; {primary} {} -> {}", fmt_num(r), fmt_num(k));
    }
    if !entry.scope_violations.is_empty() {
        let _ = write!(
            s,
            "; out-of-scope edits reverted: {}",
            entry.scope_violations.join(", ")
        );
    }
    if let Some(l) = entry.learnings.last() {
        let _ = write!(s, "\n  learnings: {l}");
    }
    s
}

/// The rolling window (last [`WINDOW`] entries), or `none yet`.
pub fn recent_summaries(log: &ExperimentLog, primary: &str) -> String {
    let window = log.window(WINDOW);
    if window.is_empty() {
        return "none yet".into();
    }
    window
        .iter()
        .map(|e| summary(e, primary))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Renders the worker brief for experiment `iteration` of `hypothesis` (description, category).
pub fn render(
    spec: &Spec,
    log: &ExperimentLog,
    source_digest: &str,
    iteration: u32,
    hypothesis: (&str, &str),
    remote: Option<&RemoteVars>,
) -> String {
    let best_cases: &[WorstCase] = if log.best.experiment.is_some() {
        &log.best.worst_cases
    } else {
        &log.baseline.worst_cases
    };
    let current_best = if log.best.metrics.metrics.is_empty() {
        &log.baseline
    } else {
        &log.best.metrics
    };
    let instruction4 = if remote.is_some() {
        "4. Measure PAIRED as the remote-worker block below says (the harness is immutable)"
    } else {
        "4. Do NOT run the measurement harness (the orchestrator handles this)"
    };
    let mut out = format!(
        "You are an optimization experiment worker.\n\n\
Your job is to implement a single hypothesis to improve a measurable outcome. You will modify code within a defined scope, then stop. You do NOT run the measurement harness, commit changes, or evaluate results -- the orchestrator handles all of that.\n\n\
<experiment-context>\nExperiment: #{iteration} for optimization target: {spec_name}\nHypothesis: {desc}\nCategory: {cat}\n\n\
Current best metrics:\n{best}\n\nBaseline metrics (before any optimization):\n{baseline}\n</experiment-context>\n\n\
<scope-rules>\nYou MAY modify files in these paths:\n{mutable}\n\nYou MUST NOT modify files in these paths:\n{immutable}\n\n\
CRITICAL: Do not modify any file outside the mutable scope. The measurement harness and evaluation data are immutable, which means the metric cannot be changed, not that it cannot be gamed: a gain from anything other than doing the work the metric stands for, or one that breaks a constraint below, is reverted by the orchestrator however well it scores.\n</scope-rules>\n\n\
<constraints>\n{constraints}\n</constraints>\n\n\
<approved-dependencies>\nYou may add or use these dependencies without further approval:\n{deps}\n\n\
If your implementation requires a dependency NOT in this list, STOP and note it in your output. Do not install unapproved dependencies.\n</approved-dependencies>\n\n\
<source-digest>\nWhat you need to know about the material this target works on and the current approach:\n\n{digest}\n</source-digest>\n\n\
<failure-evidence>\nWorst cases from the current best that bear on this hypothesis, with what went wrong. Use them to check your change against real failures. The hypothesis still decides what you implement, and it may replace the approach rather than fix these cases:\n\n{failures}\n</failure-evidence>\n\n\
<previous-experiments>\nRecent experiments and their outcomes (for context -- avoid re-trying approaches that already failed):\n\n{recent}\n</previous-experiments>\n\n\
<instructions>\n\
1. Read the mutable files your change touches. Rely on the source digest for the rest of the material, and open other files only when the hypothesis depends on a detail the digest lacks\n\
2. Implement the hypothesis described above\n\
3. Make your changes focused and minimal -- change only what is needed for this hypothesis\n\
{instruction4}\n\
5. Do NOT commit (the orchestrator will commit the winning diff before merge if this experiment succeeds)\n\
6. Do NOT modify files outside the mutable scope\n\
7. When done, run `git diff --stat` so the orchestrator can see your changes\n\
8. If you discover you need an unapproved dependency, note it and stop\n\n\
Focus on implementing the hypothesis well. The orchestrator will measure and evaluate the results.\n</instructions>\n",
        spec_name = spec.name,
        desc = hypothesis.0,
        cat = hypothesis.1,
        best = metrics_block(current_best),
        baseline = metrics_block(&log.baseline),
        mutable = list(&spec.scope.mutable, "(none)"),
        immutable = list(&spec.scope.immutable, "(none listed)"),
        constraints = list(&spec.constraints, "none"),
        deps = list(&spec.dependencies.approved, "none"),
        digest = source_digest.trim(),
        failures = failure_cases(best_cases),
        recent = recent_summaries(log, &spec.metric.primary.name),
    );
    if let Some(r) = remote {
        let branch = spec.branch();
        let result_ref = spec.experiment_branch(iteration);
        let command = match spec.measurement.working_directory.as_deref() {
            Some(dir) if dir != "." && !dir.is_empty() => {
                format!("cd {dir} && {}", spec.measurement.command)
            }
            _ => spec.measurement.command.clone(),
        };
        let _ = write!(
            out,
            "\n<remote-worker>\nYou are running detached, on your own checkout. The orchestrator will not see your tree; it sees only the branch you push and the result you report.\n\n\
Repository: clone or fetch `{url}`; the base commit and your result ref live there.\n\n\
Base: commit {base} on branch {branch}. Before changing anything, verify your HEAD is exactly {base}. If it is not, check it out; if you cannot, stop and report that.\n\n\
After implementing the hypothesis, measure PAIRED on this machine, using the immutable harness as-is:\n\
1. Baseline: check out {base} (stash or branch your change), run `{command}` {n} time(s), record every sample.\n\
2. Candidate: restore your change, run the same command the same number of times, record every sample.\n\
Alternate baseline and candidate runs when {n} > 1. Never edit the measurement command, its working directory, or any file in the immutable scope; a changed harness makes your result unusable.\n\n\
Commit your mutable-scope changes, and nothing else, with the message `optimize({name}): exp-{iteration} <hypothesis, short>`. That commit is the candidate; its SHA is `head_sha`.\n\n\
Then write `result.yaml` at the repo root of your checkout with exactly this shape:\n  experiment: {iteration}\n  base_sha: {base}\n  head_sha: <the candidate commit's SHA>\n  machine: <a stable identifier for this machine or worker>\n  measured_at: <ISO 8601>\n\
  baseline:  {{ gates: {{...}}, metrics: {{ <name>: {{ aggregate: <n>, samples: [...] }} }}, diagnostics: {{...}} }}\n\
  candidate: {{ gates: {{...}}, metrics: {{ <name>: {{ aggregate: <n>, samples: [...] }} }}, diagnostics: {{...}} }}\n\
  correctness: <checks you ran and their results, or \"none\">\n\
Include the harness's per-case `cases` object and any cost, tokens, or latency fields in each snapshot only when the harness emits them; do not compute them yourself.\n\
Commit `result.yaml` alone on top of the candidate commit, so the pushed tip's parent is `head_sha`, and push to `{result_ref}`. Do not push to {branch} or any other branch.\n\n\
Your final message is the structured result: the pushed ref, head_sha, machine, and the two aggregates. Report an unapproved dependency, a base mismatch, or a harness you could not run as a blocker instead of a result.\n</remote-worker>\n",
            base = r.base_sha,
            url = r.url,
            n = r.sample_count,
            name = spec.name,
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::Measured;
    use crate::log::{Entry, Outcome};
    use crate::snapshot::MetricSamples;

    fn spec(mode: &str) -> Spec {
        Spec::parse(&format!("name: ops\ndescription: cut ops\nmetric:\n  primary: {{ name: ops, direction: minimize }}\nmeasurement:\n  command: sh measure.sh\n  stability: {{ mode: {mode}, repeat_count: 5 }}\nscope:\n  mutable: [src]\n  immutable: [measure.sh]\nconstraints: [keep output identical]\ndependencies: {{ approved: [jq] }}\n"), "t.yaml").unwrap()
    }

    fn entry(n: u32) -> Entry {
        Entry {
            experiment: n,
            hypothesis_id: format!("h-{n}"),
            description: format!("idea number {n}"),
            category: "algorithm".into(),
            forecast: None,
            branch: String::new(),
            base_sha: String::new(),
            outcome: Outcome::Reverted,
            measured: Measured::Ok,
            decision: None,
            changed_files: vec![],
            scope_violations: vec![],
            comparisons: vec![],
            worst_cases: vec![],
            judge: None,
            learnings: vec![format!("learned {n}")],
            cost: Default::default(),
            regressions: vec![],
            worker_message: String::new(),
            spend: Default::default(),
        }
    }

    // O-04
    #[test]
    fn o04_brief_has_every_variable_a_window_of_ten_and_never_invents_failures() {
        let s = spec("ladder");
        let mut log = ExperimentLog::default();
        log.baseline
            .metrics
            .insert("ops".into(), MetricSamples::from_samples(vec![120.0]));
        for n in 1..=25 {
            log.upsert(entry(n));
        }
        let brief = render(
            &s,
            &log,
            "the counter walks data/input.txt",
            26,
            ("use a lookup table", "algorithm"),
            None,
        );
        for want in [
            "Experiment: #26 for optimization target: ops",
            "Hypothesis: use a lookup table",
            "Category: algorithm",
            "ops: 120",
            "- src",
            "- measure.sh",
            "- keep output identical",
            "- jq",
            "the counter walks data/input.txt",
            "Do NOT run the measurement harness",
        ] {
            assert!(brief.contains(want), "brief lacks {want:?}:\n{brief}");
        }
        assert_eq!(brief.matches("- exp-").count(), 10, "rolling window of 10");
        assert!(
            brief.contains("exp-016") && brief.contains("exp-025") && !brief.contains("exp-015 ")
        );
        assert!(brief.contains("<failure-evidence>") && brief.contains(NONE_RECORDED));
        assert!(
            !brief.contains('{') || !brief.contains("{spec_name}"),
            "no unfilled variable"
        );
        assert!(!brief.contains("<remote-worker>"));
    }

    // O-05
    #[test]
    fn o05_remote_sample_count_follows_the_stability_mode() {
        assert_eq!(sample_count(&spec("ladder")), 1);
        assert_eq!(sample_count(&spec("stable")), 1);
        assert_eq!(sample_count(&spec("repeat")), 5);
        let s = spec("repeat");
        let brief = render(
            &s,
            &ExperimentLog::default(),
            "d",
            3,
            ("h", "c"),
            Some(&RemoteVars {
                base_sha: "abc123".into(),
                sample_count: sample_count(&s),
                url: "file:///r.git".into(),
            }),
        );
        assert!(brief.contains("run `sh measure.sh` 5 time(s)"), "{brief}");
        assert!(
            brief.contains("push to `optimize-exp/ops/exp-003`")
                && brief.contains("Do not push to optimize/ops")
        );
        assert!(brief.contains("verify your HEAD is exactly abc123"));
        assert!(
            !brief.contains("Do NOT run the measurement harness"),
            "instruction 4 is replaced"
        );
    }
}
