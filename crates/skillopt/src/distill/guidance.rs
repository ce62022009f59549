//! Ranking evidence into deduplicated guidance lines: one line per normalised key, support
//! counted per tier, most-supported first (seed: SkillOpt, "Cross-family review soft signal":
//! weight tiers human gold > verifiable floor > judge).

use std::collections::{BTreeSet, HashMap};

use serde::Serialize;

use super::evidence::{Evidence, EvidenceOrigin, GuidanceKind};
use super::tier::EvidenceTier;

/// Supporting evidence items of one line, per tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Support {
    /// Human-gold items.
    pub human_gold: u32,
    /// Verifiable-floor items.
    pub verifiable_floor: u32,
    /// Judge items.
    pub judge: u32,
}

impl Support {
    /// Adds one item of `tier`.
    pub fn add(&mut self, tier: EvidenceTier) {
        match tier {
            EvidenceTier::HumanGold => self.human_gold += 1,
            EvidenceTier::VerifiableFloor => self.verifiable_floor += 1,
            EvidenceTier::Judge => self.judge += 1,
        }
    }

    /// Items of `tier`.
    pub fn of(&self, tier: EvidenceTier) -> u32 {
        match tier {
            EvidenceTier::HumanGold => self.human_gold,
            EvidenceTier::VerifiableFloor => self.verifiable_floor,
            EvidenceTier::Judge => self.judge,
        }
    }

    /// All items.
    pub fn total(&self) -> u32 {
        self.human_gold + self.verifiable_floor + self.judge
    }

    /// Σ items × [`EvidenceTier::weight`].
    pub fn weight(&self) -> u32 {
        EvidenceTier::ALL
            .iter()
            .map(|t| self.of(*t) * t.weight())
            .sum()
    }

    /// The most trusted tier with any support (`None` when empty).
    pub fn best_tier(&self) -> Option<EvidenceTier> {
        EvidenceTier::ALL.into_iter().find(|t| self.of(*t) > 0)
    }

    /// `support 3: human 2, judge 1` (tiers with no items left out).
    pub fn describe(&self) -> String {
        let parts: Vec<String> = EvidenceTier::ALL
            .iter()
            .filter(|t| self.of(**t) > 0)
            .map(|t| format!("{} {}", t.label(), self.of(*t)))
            .collect();
        format!("support {}: {}", self.total(), parts.join(", "))
    }
}

/// One deduplicated guidance line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GuidanceLine {
    /// What it asks for.
    pub kind: GuidanceKind,
    /// Deduplication key (see [`super::evidence::normalize_key`]).
    pub key: String,
    /// Display text: the first-seen text among the items of the line's best tier.
    pub text: String,
    /// Supporting items per tier.
    pub support: Support,
    /// Fields the supporting items came from, sorted.
    pub origins: BTreeSet<EvidenceOrigin>,
}

impl GuidanceLine {
    /// The Markdown list item: `- <imperative>. (support N: human a, verifiable b, judge c)`.
    /// [`GuidanceKind::Improve`] text is used as written (capitalised); other kinds get a
    /// prefix: `Address:`, `Avoid:`, `Aim for:`, `Keep:`, `Make sure`.
    pub fn render(&self) -> String {
        let body = match self.kind {
            GuidanceKind::Improve => capitalize(&self.text),
            GuidanceKind::Address => format!("Address: {}", self.text),
            GuidanceKind::Avoid => format!("Avoid: {}", self.text),
            GuidanceKind::Prefer => format!("Aim for: {}", self.text),
            GuidanceKind::Keep => format!("Keep: {}", self.text),
            GuidanceKind::Lesson => format!("Make sure {}", self.text),
        };
        let end = if body.ends_with(['.', '!', '?', '…']) {
            ""
        } else {
            "."
        };
        format!("- {body}{end} ({})", self.support.describe())
    }
}

fn capitalize(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// Merges evidence by key and orders the lines: Σ tier weights descending, then the best tier,
/// then the item count, then the key (so the order is total and deterministic); keeps the first
/// `max_lines`. Each item counts once per (key, `source_ref`) — [`super::gather_evidence`]
/// already guarantees that.
pub fn rank_guidance(evidence: &[Evidence], max_lines: usize) -> Vec<GuidanceLine> {
    let mut lines: Vec<GuidanceLine> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut text_tier: Vec<EvidenceTier> = Vec::new();
    for item in evidence {
        let idx = *index.entry(item.key.as_str()).or_insert_with(|| {
            lines.push(GuidanceLine {
                kind: item.kind,
                key: item.key.clone(),
                text: item.text.clone(),
                support: Support::default(),
                origins: BTreeSet::new(),
            });
            text_tier.push(item.tier);
            lines.len() - 1
        });
        let line = &mut lines[idx];
        line.support.add(item.tier);
        line.origins.insert(item.origin);
        if item.tier > text_tier[idx] {
            line.text = item.text.clone();
            text_tier[idx] = item.tier;
        }
    }
    sort_lines(&mut lines);
    lines.truncate(max_lines);
    lines
}

/// The order of guidance lines: Σ tier weights descending, then the best tier, then the item
/// count, then the key (total and deterministic).
pub fn sort_lines(lines: &mut [GuidanceLine]) {
    lines.sort_by(|a, b| {
        b.support
            .weight()
            .cmp(&a.support.weight())
            .then_with(|| b.support.best_tier().cmp(&a.support.best_tier()))
            .then_with(|| b.support.total().cmp(&a.support.total()))
            .then_with(|| a.key.cmp(&b.key))
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distill::evidence::normalize_key;

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

    #[test]
    fn ranking_table() {
        use EvidenceTier::*;
        use GuidanceKind::*;
        struct Case {
            name: &'static str,
            evidence: Vec<Evidence>,
            max: usize,
            want: Vec<(&'static str, u32)>,
        }
        let cases = vec![
            Case {
                name: "one human outweighs three judges",
                evidence: vec![
                    ev(Improve, "judge says", Judge, "1"),
                    ev(Improve, "judge says", Judge, "2"),
                    ev(Improve, "judge says", Judge, "3"),
                    ev(Improve, "human says", HumanGold, "4"),
                ],
                max: 10,
                want: vec![("Human says", 1), ("Judge says", 3)],
            },
            Case {
                name: "equal weight: the better tier first",
                evidence: vec![
                    ev(Improve, "two verifiable", VerifiableFloor, "1"),
                    ev(Improve, "two verifiable", VerifiableFloor, "2"),
                    ev(Improve, "one human", HumanGold, "3"),
                ],
                max: 10,
                want: vec![("One human", 1), ("Two verifiable", 2)],
            },
            Case {
                name: "case and punctuation variants merge",
                evidence: vec![
                    ev(Improve, "Add a test-plan", Judge, "1"),
                    ev(Improve, "add a test plan!", HumanGold, "2"),
                    ev(Avoid, "add a test plan", Judge, "3"),
                ],
                max: 10,
                want: vec![("Add a test plan!", 2), ("Avoid: add a test plan", 1)],
            },
            Case {
                name: "max lines keeps the best",
                evidence: vec![
                    ev(Keep, "b", Judge, "1"),
                    ev(Keep, "a", HumanGold, "2"),
                    ev(Keep, "c", VerifiableFloor, "3"),
                ],
                max: 2,
                want: vec![("Keep: a", 1), ("Keep: c", 1)],
            },
            Case {
                name: "nothing",
                evidence: vec![],
                max: 5,
                want: vec![],
            },
        ];
        for case in cases {
            let got = rank_guidance(&case.evidence, case.max);
            let got: Vec<(String, u32)> = got
                .iter()
                .map(|l| {
                    let rendered = l.render();
                    let body = rendered
                        .trim_start_matches("- ")
                        .split(" (support")
                        .next()
                        .unwrap_or("")
                        .to_owned();
                    (body.trim_end_matches('.').to_owned(), l.support.total())
                })
                .collect();
            let want: Vec<(String, u32)> = case
                .want
                .iter()
                .map(|(t, n)| ((*t).to_owned(), *n))
                .collect();
            assert_eq!(got, want, "{}", case.name);
        }
    }

    #[test]
    fn render_states_support_per_tier() {
        let mut support = Support::default();
        support.add(EvidenceTier::HumanGold);
        support.add(EvidenceTier::HumanGold);
        support.add(EvidenceTier::Judge);
        let line = GuidanceLine {
            kind: GuidanceKind::Avoid,
            key: "avoid:fluff".into(),
            text: "marketing fluff".into(),
            support,
            origins: BTreeSet::new(),
        };
        assert_eq!(
            line.render(),
            "- Avoid: marketing fluff. (support 3: human 2, judge 1)"
        );
        assert_eq!(support.weight(), 9);
    }
}
