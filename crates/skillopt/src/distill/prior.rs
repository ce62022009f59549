//! Evidence across runs (issue 37 item 10): the guidance section a template already carries is
//! the evidence of the runs distilled before, with its support per tier written on each line
//! (`(support 3: human 2, judge 1)`). A new run's evidence is merged into it instead of replacing
//! it, so the human-gold lines of a first round survive a second round distilled from automatic
//! outcomes (seed: SkillOpt, "Cross-family review soft signal": human gold > verifiable floor >
//! judge).
//!
//! * A line of the section whose key the new evidence also has: the supports add up — unless the
//!   section already holds this run's evidence (its runs comment names the run: distilling a
//!   candidate's own output again), then the larger support per tier is kept, so the same evidence
//!   never counts twice.
//! * A line the new evidence does not mention: kept as it was.
//! * A line the new evidence contradicts (`Keep:`/`Aim for:` against `Avoid:` of the same text):
//!   the side with more weight (Σ tier weights, so one human line outweighs three judge lines)
//!   stays and the other goes; on equal weight the new evidence wins.

use std::collections::BTreeSet;

use super::evidence::{EvidenceOrigin, GuidanceKind, normalize_key};
use super::guidance::{GuidanceLine, Support, sort_lines};
use super::section::section_body;

/// Kind and text of a rendered line body (`Avoid: x`, `Make sure …`, an imperative).
fn kind_of(body: &str) -> (GuidanceKind, &str) {
    for (prefix, kind) in [
        ("Address: ", GuidanceKind::Address),
        ("Avoid: ", GuidanceKind::Avoid),
        ("Aim for: ", GuidanceKind::Prefer),
        ("Keep: ", GuidanceKind::Keep),
        ("Make sure ", GuidanceKind::Lesson),
    ] {
        if let Some(text) = body.strip_prefix(prefix) {
            return (kind, text);
        }
    }
    (GuidanceKind::Improve, body)
}

/// `3: human 2, judge 1` → the support per tier; `None` when it does not read.
fn parse_support(text: &str) -> Option<Support> {
    let (_, tiers) = text.split_once(':')?;
    let mut support = Support::default();
    for part in tiers.split(',') {
        let (label, n) = part.trim().rsplit_once(' ')?;
        let n: u32 = n.parse().ok()?;
        let tier = super::tier::EvidenceTier::ALL
            .into_iter()
            .find(|t| t.label() == label)?;
        for _ in 0..n {
            support.add(tier);
        }
    }
    (support.total() > 0).then_some(support)
}

/// The guidance lines of `content`'s maintained section ([`super::GUIDANCE_HEADING`]), with the
/// support written on each; empty when it has no section. Lines that do not read as distill
/// wrote them (edited by hand) are left out: the section says edits there are replaced.
pub fn prior_guidance(content: &str) -> Vec<GuidanceLine> {
    let Some(section) = section_body(content) else {
        return Vec::new();
    };
    let mut out: Vec<GuidanceLine> = Vec::new();
    for line in section.lines() {
        let Some(item) = line.trim_end().strip_prefix("- ") else {
            continue;
        };
        let Some((body, support)) = item.rsplit_once(" (support ") else {
            continue;
        };
        let Some(support) = support.strip_suffix(')').and_then(parse_support) else {
            continue;
        };
        let body = body.strip_suffix('.').unwrap_or(body);
        let (kind, text) = kind_of(body);
        if text.trim().is_empty() {
            continue;
        }
        let key = match kind {
            GuidanceKind::Lesson => match text.split('`').nth(1) {
                Some(question) if text.starts_with('`') => format!("lesson:{question}"),
                _ => normalize_key(kind, text),
            },
            _ => normalize_key(kind, text),
        };
        if out.iter().any(|l| l.key == key) {
            continue;
        }
        out.push(GuidanceLine {
            kind,
            key,
            text: text.to_owned(),
            support,
            origins: BTreeSet::from([EvidenceOrigin::PriorGuidance]),
        });
    }
    out
}

/// The text part of a key (`avoid:short intro` → `short intro`).
fn subject(key: &str) -> &str {
    key.split_once(':').map_or(key, |(_, rest)| rest)
}

/// Whether `a` and `b` ask opposite things of the same text.
fn contradicts(a: &GuidanceLine, b: &GuidanceLine) -> bool {
    use GuidanceKind::{Avoid, Keep, Prefer};
    let opposite = matches!(
        (a.kind, b.kind),
        (Keep | Prefer, Avoid) | (Avoid, Keep | Prefer)
    );
    opposite && subject(&a.key) == subject(&b.key)
}

/// Merges `fresh` lines (this run's evidence, from [`super::rank_guidance`] without a cap) into
/// `prior` (the template's section) as the module docs say, ranks them like
/// [`super::rank_guidance`] and keeps the first `max_lines`.
/// With `already_merged` (the section already holds this run's evidence) supports are merged by
/// the larger count per tier instead of the sum.
pub fn merge_guidance(
    prior: Vec<GuidanceLine>,
    fresh: Vec<GuidanceLine>,
    max_lines: usize,
    already_merged: bool,
) -> Vec<GuidanceLine> {
    let mut kept: Vec<GuidanceLine> = Vec::new();
    let mut fresh = fresh;
    for mut old in prior {
        if let Some(idx) = fresh.iter().position(|f| f.key == old.key) {
            let new = fresh.remove(idx);
            for tier in super::tier::EvidenceTier::ALL {
                let more = if already_merged {
                    new.support.of(tier).saturating_sub(old.support.of(tier))
                } else {
                    new.support.of(tier)
                };
                for _ in 0..more {
                    old.support.add(tier);
                }
            }
            if new.support.best_tier() > old.support.best_tier() {
                old.text = new.text;
            }
            old.origins.extend(new.origins);
        }
        kept.push(old);
    }
    // Contradictions between a kept prior line and a fresh one: the heavier stays.
    let mut dropped_fresh = BTreeSet::new();
    kept.retain(|old| {
        let Some((idx, new)) = fresh.iter().enumerate().find(|(_, f)| contradicts(old, f)) else {
            return true;
        };
        if old.support.weight() > new.support.weight() {
            dropped_fresh.insert(idx);
            true
        } else {
            false
        }
    });
    kept.extend(
        fresh
            .into_iter()
            .enumerate()
            .filter(|(i, _)| !dropped_fresh.contains(i))
            .map(|(_, l)| l),
    );
    sort_lines(&mut kept);
    kept.truncate(max_lines);
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distill::evidence::Evidence;
    use crate::distill::fixtures::template_content;
    use crate::distill::rank_guidance;
    use crate::distill::section::{apply_section, render_section};
    use crate::distill::tier::EvidenceTier;

    fn ev(kind: GuidanceKind, text: &str, tier: EvidenceTier, source: &str) -> Evidence {
        Evidence {
            kind,
            key: normalize_key(kind, text),
            text: text.to_owned(),
            tier,
            origin: EvidenceOrigin::RequiredImprovement,
            source_ref: source.to_owned(),
        }
    }

    fn rendered(lines: &[GuidanceLine]) -> Vec<String> {
        lines.iter().map(GuidanceLine::render).collect()
    }

    #[test]
    fn a_rendered_section_reads_back_as_the_same_lines() {
        let lines = rank_guidance(
            &[
                ev(
                    GuidanceKind::Improve,
                    "add a test plan",
                    EvidenceTier::HumanGold,
                    "1",
                ),
                ev(
                    GuidanceKind::Avoid,
                    "marketing fluff",
                    EvidenceTier::Judge,
                    "2",
                ),
                ev(
                    GuidanceKind::Keep,
                    "short summary first!",
                    EvidenceTier::VerifiableFloor,
                    "3",
                ),
            ],
            10,
        );
        let content = apply_section(
            &template_content("Plan the task.\n"),
            &render_section(&lines, &["run-1".to_owned()]),
        )
        .unwrap();
        assert_eq!(crate::distill::section::section_runs(&content), ["run-1"]);
        let back = prior_guidance(&content);
        assert_eq!(rendered(&back), rendered(&lines));
        assert_eq!(
            back.iter().map(|l| l.key.clone()).collect::<Vec<_>>(),
            lines.iter().map(|l| l.key.clone()).collect::<Vec<_>>()
        );
        assert!(prior_guidance(&template_content("Plan.\n")).is_empty());
    }

    #[test]
    fn prior_lines_are_kept_supported_or_outweighed() {
        let prior = rank_guidance(
            &[
                ev(
                    GuidanceKind::Improve,
                    "add a test plan",
                    EvidenceTier::HumanGold,
                    "1",
                ),
                ev(
                    GuidanceKind::Keep,
                    "short intro",
                    EvidenceTier::HumanGold,
                    "2",
                ),
                ev(GuidanceKind::Avoid, "tables", EvidenceTier::Judge, "3"),
            ],
            10,
        );
        let fresh = rank_guidance(
            &[
                ev(
                    GuidanceKind::Improve,
                    "Add a test plan.",
                    EvidenceTier::VerifiableFloor,
                    "a",
                ),
                ev(GuidanceKind::Avoid, "short intro", EvidenceTier::Judge, "b"),
                ev(
                    GuidanceKind::Keep,
                    "tables",
                    EvidenceTier::VerifiableFloor,
                    "c",
                ),
                ev(
                    GuidanceKind::Improve,
                    "run the linter",
                    EvidenceTier::VerifiableFloor,
                    "d",
                ),
            ],
            usize::MAX,
        );
        let merged = merge_guidance(prior.clone(), fresh.clone(), 10, false);
        assert_eq!(
            rendered(&merged),
            [
                "- Add a test plan. (support 2: human 1, verifiable 1)",
                "- Keep: short intro. (support 1: human 1)",
                "- Run the linter. (support 1: verifiable 1)",
                "- Keep: tables. (support 1: verifiable 1)",
            ],
            "the human line outweighs the judge's contradiction; a verifiable line outweighs a judge's prior line"
        );
        let again = merge_guidance(prior, fresh, 10, true);
        assert_eq!(
            again[0].render(),
            "- Add a test plan. (support 2: human 1, verifiable 1)",
            "the larger count per tier, not the sum"
        );
    }
}
