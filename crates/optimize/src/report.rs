//! The wrap-up report (`<state-root>/report.md`): the stop reason, baseline and best, and every
//! experiment's outcome explained with its measured numbers, sample counts and noise threshold;
//! claims from nonterminal entries are labelled preliminary (seed: optimize-loop, loop.md 3.6,
//! 3.7 "Progress reporting"; O-65).

use std::fmt::Write as _;

use super::OptimizeError;
use super::backlog::DepStatus;
use super::brief::fmt_num;
use super::ctx::Ctx;
use super::log::{ComparisonKind, Entry, ExperimentLog};
use super::snapshot::std_dev;
use super::spec::Spec;

/// Renders the report.
pub fn render(spec: &Spec, log: &ExperimentLog) -> String {
    let primary = &spec.metric.primary.name;
    let mut s = format!(
        "# Optimize report: {}\n\n{}\n\n",
        spec.name,
        spec.description.trim()
    );
    let stop = log.run_state.stop_reason.as_ref().map_or_else(
        || "still running (preliminary)".to_owned(),
        |r| r.describe(),
    );
    let _ = writeln!(
        s,
        "Status: {stop}. Ticks: {}. Experiments: {}. Active time: {:.0} s.\n",
        log.run_state.tick,
        log.experiments.len(),
        log.run_state.active_seconds
    );
    let base = log.baseline.aggregate(primary);
    let best = log.best.metrics.aggregate(primary);
    match (base, best) {
        (Some(b), Some(c)) => {
            let rel = if b != 0.0 {
                (c - b) / b.abs() * 100.0
            } else {
                0.0
            };
            let _ = writeln!(
                s,
                "Best {primary}: {} vs baseline {} ({rel:+.1}%), {} on `{}` at {}.\n",
                fmt_num(c),
                fmt_num(b),
                log.best
                    .experiment
                    .map_or("the baseline".to_owned(), |n| format!("exp-{n:03}")),
                spec.branch(),
                short(&log.best.sha)
            );
        }
        _ => s.push_str("No baseline measurement recorded.\n\n"),
    }
    if let Some(floor) = &log.noise_floor {
        let _ = writeln!(
            s,
            "Measurement noise: {}; effects below are 95% paired intervals read against it.\n",
            floor.human()
        );
    }
    let judges = if log.spend.judges.runs == 0 && log.spend.judge_usd == 0.0 {
        "none".to_owned()
    } else {
        format!("${:.4}", log.spend.judge_usd)
    };
    let _ = writeln!(s, "Spend: run {}; judges {judges}.", log.spend.human_cost());
    let _ = writeln!(
        s,
        "Agent runs as reported: workers {}; judges {}.\n",
        log.spend.workers.human(),
        log.spend.judges.human()
    );
    s.push_str("## Experiments\n\n");
    if log.experiments.is_empty() {
        s.push_str("None.\n");
    }
    for e in &log.experiments {
        explain(&mut s, e, primary);
        if let Some(effect) = log
            .noise_floor
            .as_ref()
            .and_then(|f| super::noise::keep_effect(e, f))
        {
            // after the entry's lines, before its blank line
            s.pop();
            let _ = writeln!(s, "- {}\n", effect.human(primary));
        }
    }
    let deferred: Vec<_> = log
        .hypothesis_backlog
        .iter()
        .filter(|h| h.dep_status == DepStatus::NeedsApproval)
        .collect();
    if !deferred.is_empty() {
        s.push_str("\n## Waiting for dependency approval\n\n");
        for h in deferred {
            let _ = writeln!(
                s,
                "- {} {} (needs: {})",
                h.id,
                h.description,
                h.required_deps.join(", ")
            );
        }
    }
    if !log.notes.is_empty() {
        s.push_str("\n## Notes\n\n");
        for n in log.notes.iter().filter(|n| !n.starts_with("theme tried:")) {
            let _ = writeln!(s, "- {n}");
        }
    }
    s
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(12)]
}

fn explain(s: &mut String, e: &Entry, primary: &str) {
    let label = if e.outcome.is_terminal() {
        e.outcome.label()
    } else {
        format!("{} (preliminary)", e.outcome.label())
    };
    let _ = writeln!(
        s,
        "### exp-{:03}: {label}\n\n{} [{}]\n",
        e.experiment, e.description, e.category
    );
    for c in &e.comparisons {
        let (Some(r), Some(k)) = (
            c.reference.snapshot.metrics.get(primary),
            c.candidate.snapshot.metrics.get(primary),
        ) else {
            continue;
        };
        let kind = match c.kind {
            ComparisonKind::Standalone => "standalone",
            ComparisonKind::Integrated => "integrated",
            ComparisonKind::Holdout => "holdout",
        };
        let thr = c
            .decision
            .as_ref()
            .and_then(|d| d.objectives.iter().find(|o| o.name == primary))
            .map(|o| format!(", noise threshold {:.1}%", o.threshold * 100.0))
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "- {kind}: {primary} {} -> {} over {} pair(s) (reference sd {}{thr}); {}",
            fmt_num(r.aggregate),
            fmt_num(k.aggregate),
            r.samples.len().min(k.samples.len()),
            fmt_num(std_dev(&r.samples)),
            c.decision
                .as_ref()
                .map_or("not decided".to_owned(), |d| format!(
                    "decision {} ({})",
                    d.decision.label(),
                    d.reason
                )),
        );
    }
    if e.spend.runs > 0 {
        let _ = writeln!(s, "- agent runs: {}", e.spend.human());
    }
    if !e.scope_violations.is_empty() {
        let _ = writeln!(
            s,
            "- out-of-scope changes reverted: {}",
            e.scope_violations.join(", ")
        );
    }
    for l in &e.learnings {
        let _ = writeln!(s, "- {}", never_blank(l));
    }
    s.push('\n');
}

/// A learning recorded before failures carried their reason (`the worker failed: not_runnable `)
/// says what the bare exit class means instead of ending blank.
fn never_blank(learning: &str) -> String {
    let trimmed = learning.trim_end();
    match trimmed.rsplit_once(": ") {
        Some((head, "not_runnable")) => format!(
            "{head}: could not run on its worker (an environment fault such as a runtime not logged in; no reason was recorded)"
        ),
        Some((head, label)) if ["failed", "timed_out", "killed"].contains(&label) => {
            format!(
                "{head}: {} (no reason was recorded)",
                label.replace('_', " ")
            )
        }
        _ => trimmed.to_owned(),
    }
}

/// Writes `report.md`.
///
/// # Errors
/// [`OptimizeError::Env`] when it cannot be written.
pub fn write(ctx: &Ctx<'_>, log: &ExperimentLog) -> Result<(), OptimizeError> {
    Ok(skillforge_stage::fs::write_atomic(
        &ctx.root.report(),
        render(&ctx.spec, log),
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::Measured;
    use crate::log::{Entry, Outcome};

    // A learning recorded before failures carried their reason never ends blank.
    #[test]
    fn a_bare_exit_class_learning_is_said_in_words() {
        for (learning, expected) in [
            (
                "the worker failed: not_runnable ",
                "the worker failed: could not run on its worker (an environment fault such as a runtime not logged in; no reason was recorded)",
            ),
            (
                "the worker failed: timed_out",
                "the worker failed: timed out (no reason was recorded)",
            ),
            (
                "the worker failed: could not run: agent runtime `claude` is not authenticated",
                "the worker failed: could not run: agent runtime `claude` is not authenticated",
            ),
        ] {
            assert_eq!(never_blank(learning), expected, "{learning}");
        }
    }

    // O-65
    #[test]
    fn o65_nonterminal_claims_are_labelled_preliminary() {
        let spec = Spec::parse("name: ops\ndescription: d\nmetric:\n  primary: { name: ops, direction: minimize }\nmeasurement: { command: sh m.sh }\nscope: { mutable: [src] }\n", "t.yaml").unwrap();
        let entry = |n: u32, outcome: Outcome| Entry {
            experiment: n,
            hypothesis_id: format!("h-{n}"),
            description: "d".into(),
            category: "c".into(),
            forecast: None,
            branch: String::new(),
            base_sha: String::new(),
            outcome,
            measured: Measured::Ok,
            decision: None,
            changed_files: vec![],
            scope_violations: vec![],
            comparisons: vec![],
            worst_cases: vec![],
            judge: None,
            learnings: vec![],
            cost: Default::default(),
            regressions: vec![],
            worker_message: String::new(),
            spend: Default::default(),
        };
        let mut log = ExperimentLog::default();
        log.upsert(entry(1, Outcome::Promising));
        log.upsert(entry(2, Outcome::Kept));
        let text = render(&spec, &log);
        assert!(
            text.contains("### exp-001: promising (preliminary)"),
            "{text}"
        );
        assert!(text.contains("### exp-002: kept\n"), "{text}");
        assert!(text.contains("still running (preliminary)"), "{text}");
    }
}
