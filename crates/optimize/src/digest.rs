//! The strategy digest (`<state-root>/strategy-digest.md`), failure themes, and hypotheses
//! generated from them (seed: optimize-loop, loop.md 3.5 steps 4–5; O-39, O-54).
//!
//! Themes come only from the current best's selection-sample judge items (or its failing
//! cases): holdout results never enter (O-39). Each theme with at least [`MIN_THEME_COUNT`]
//! items yields at most one hypothesis.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::backlog::{DepStatus, Hypothesis, Opportunity};
use super::brief::fmt_num;
use super::judge::JudgedItem;
use super::log::{ExperimentLog, Outcome};
use super::snapshot::WorstCase;

/// File name under the state root.
pub const DIGEST_FILE: &str = "strategy-digest.md";
/// Items sharing a theme before it is worth a hypothesis.
pub const MIN_THEME_COUNT: usize = 2;

/// A recurring failure.
#[derive(Debug, Clone, PartialEq)]
pub struct Theme {
    /// The normalized theme (first clause of the feedback, lowercased).
    pub theme: String,
    /// Items sharing it.
    pub count: usize,
    /// One representative item id and its feedback.
    pub example: (String, String),
}

fn theme_key(text: &str) -> String {
    let first = text.split(['.', ';']).next().unwrap_or(text);
    first
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// Groups judge feedback (or worst-case reasons) by theme, largest first.
pub fn themes(items: &[JudgedItem], cases: &[WorstCase]) -> Vec<Theme> {
    let mut groups: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for i in items
        .iter()
        .filter(|i| !i.unscored && !i.feedback.is_empty())
    {
        groups
            .entry(theme_key(&i.feedback))
            .or_default()
            .push((i.item_id.clone(), i.feedback.clone()));
    }
    if items.is_empty() {
        for c in cases.iter().filter(|c| !c.reason.is_empty()) {
            groups
                .entry(theme_key(&c.reason))
                .or_default()
                .push((c.id.clone(), c.reason.clone()));
        }
    }
    let mut out: Vec<Theme> = groups
        .into_iter()
        .map(|(theme, members)| Theme {
            theme,
            count: members.len(),
            example: members[0].clone(),
        })
        .collect();
    out.sort_by(|a, b| b.count.cmp(&a.count).then(a.theme.cmp(&b.theme)));
    out
}

/// At most one new hypothesis per theme worth acting on, skipping themes already in the backlog
/// or already tried (O-54). Ids are assigned by the caller.
pub fn hypotheses_from_themes(themes: &[Theme], log: &ExperimentLog) -> Vec<Hypothesis> {
    let known = |t: &str| {
        let src = format!("failure_theme:{t}");
        log.hypothesis_backlog
            .iter()
            .any(|h| h.source.as_deref() == Some(&src))
            || log.notes.iter().any(|n| n == &format!("theme tried: {t}"))
    };
    themes
        .iter()
        .filter(|t| t.count >= MIN_THEME_COUNT && !known(&t.theme))
        .map(|t| Hypothesis {
            id: String::new(),
            description: format!(
                "Address the recurring failure \"{}\" ({} items, e.g. {})",
                t.theme, t.count, t.example.0
            ),
            category: "failure-theme".into(),
            priority: None,
            dep_status: DepStatus::Approved,
            required_deps: vec![],
            opportunity: Some(Opportunity {
                workload: "selection sample of the current best".into(),
                baseline: "current best".into(),
                evidence: format!(
                    "{} items share the feedback theme; representative {}: {}",
                    t.count, t.example.0, t.example.1
                ),
                expected_benefit: "unknown; cheapest resolve: one exploratory run".into(),
                confidence: "low: unmeasured".into(),
                cost_and_risk: "one experiment".into(),
                estimate: None,
            }),
            locating: None,
            source: Some(format!("failure_theme:{}", t.theme)),
        })
        .collect()
}

/// Renders the digest from the log (selection data only).
pub fn render(log: &ExperimentLog, primary: &str) -> String {
    let mut s = format!("# Strategy digest: {}\n\n## Categories tried\n", log.spec);
    let mut cats: BTreeMap<&str, (u32, u32)> = BTreeMap::new();
    for e in &log.experiments {
        let slot = cats.entry(e.category.as_str()).or_default();
        if matches!(e.outcome, Outcome::Kept | Outcome::RunnerUpKept) {
            slot.0 += 1;
        } else {
            slot.1 += 1;
        }
    }
    if cats.is_empty() {
        s.push_str("- none yet\n");
    }
    for (c, (ok, bad)) in &cats {
        let _ = writeln!(s, "- {c}: {ok} kept, {bad} not kept");
    }
    s.push_str("\n## Key learnings\n");
    let learnings: Vec<_> = log
        .experiments
        .iter()
        .flat_map(|e| {
            e.learnings
                .iter()
                .map(move |l| format!("exp-{:03}: {l}", e.experiment))
        })
        .collect();
    if learnings.is_empty() {
        s.push_str("- none yet\n");
    }
    for l in learnings.iter().rev().take(10).rev() {
        let _ = writeln!(s, "- {l}");
    }
    s.push_str("\n## Failure patterns in worst cases\n");
    let best_cases = if log.best.experiment.is_some() {
        &log.best.worst_cases
    } else {
        &log.baseline.worst_cases
    };
    if best_cases.is_empty() {
        s.push_str("- none recorded\n");
    }
    for c in best_cases {
        let _ = writeln!(s, "- {} ({}): {}", c.id, fmt_num(c.value), c.reason);
    }
    s.push_str("\n## Remaining opportunities\n");
    if log.hypothesis_backlog.is_empty() {
        s.push_str("- none\n");
    }
    for h in &log.hypothesis_backlog {
        let benefit = h
            .opportunity
            .as_ref()
            .map_or("unknown", |o| o.expected_benefit.as_str());
        let dep = if h.dep_status == DepStatus::NeedsApproval {
            " (needs dependency approval)"
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "- {} [{}] {}: {benefit}{dep}",
            h.id, h.category, h.description
        );
    }
    s.push_str("\n## Current best\n");
    match (
        log.baseline.aggregate(primary),
        log.best.metrics.aggregate(primary),
    ) {
        (Some(b), Some(c)) => {
            let rel = if b != 0.0 {
                (c - b) / b.abs() * 100.0
            } else {
                0.0
            };
            let _ = writeln!(
                s,
                "- {primary}: {} (baseline {}, {rel:+.1}%), from {}",
                fmt_num(c),
                fmt_num(b),
                log.best
                    .experiment
                    .map_or("the baseline".into(), |n| format!("exp-{n:03}"))
            );
        }
        (Some(b), None) => {
            let _ = writeln!(s, "- {primary}: {} (baseline)", fmt_num(b));
        }
        _ => s.push_str("- not measured\n"),
    }
    s.push_str("\n## Failure themes\n");
    let best_items: Vec<JudgedItem> = log
        .best
        .experiment
        .and_then(|n| log.entry(n))
        .and_then(|e| e.judge.as_ref())
        .map(|j| j.items.clone())
        .unwrap_or_default();
    let ts = themes(&best_items, best_cases);
    if ts.is_empty() {
        s.push_str("- none\n");
    }
    for t in ts {
        let _ = writeln!(
            s,
            "- {} ({}x), e.g. {}: {}",
            t.theme, t.count, t.example.0, t.example.1
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(id: &str, feedback: &str) -> JudgedItem {
        JudgedItem {
            item_id: id.into(),
            content_hash: format!("h-{id}"),
            scores: Default::default(),
            reason: String::new(),
            feedback: feedback.into(),
            ambiguous: false,
            unscored: false,
        }
    }

    // O-54
    #[test]
    fn o54_one_theme_yields_one_hypothesis() {
        let items: Vec<JudgedItem> = (0..12)
            .map(|i| {
                item(
                    &format!("c-{i}"),
                    &format!(
                        "Unrelated topics merged on a shared word. Item {i} mixes login and billing"
                    ),
                )
            })
            .collect();
        let ts = themes(&items, &[]);
        assert_eq!(ts.len(), 1);
        assert_eq!(ts[0].count, 12);
        let log = ExperimentLog::default();
        let hs = hypotheses_from_themes(&ts, &log);
        assert_eq!(hs.len(), 1, "a rule per failing item is not a hypothesis");
        assert!(
            hs[0].validate().is_ok(),
            "generated hypotheses carry an opportunity"
        );
        let log = ExperimentLog {
            hypothesis_backlog: hs.clone(),
            ..ExperimentLog::default()
        };
        assert!(
            hypotheses_from_themes(&ts, &log).is_empty(),
            "a theme already in the backlog is not added again"
        );
    }

    // O-39
    #[test]
    fn o39_the_digest_reads_selection_items_of_the_best_only() {
        let mut log = ExperimentLog {
            spec: "ops".into(),
            ..ExperimentLog::default()
        };
        log.baseline.worst_cases = vec![WorstCase {
            id: "case-1".into(),
            value: 9.0,
            reason: "nested loop over input".into(),
        }];
        let digest = render(&log, "ops");
        assert!(digest.contains("nested loop over input"));
        assert!(digest.contains("## Failure themes"));
        // holdout snapshots live only in `comparisons` of kind holdout, which render never reads
        assert!(!digest.contains("holdout"), "{digest}");
    }
}
