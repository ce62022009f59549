//! A held-out replay of the rankings distill learned from (issue 37 item 6): the evidence a
//! distill candidate carries for the guardrails, measured, never made up.
//!
//! **What is replayed.** Every ranked review whose item's options can be read from the artifact
//! root (`<root>/sha256/<hex[:2]>/<hex>`) and whose winner is one of them. Each is left out in
//! turn: guidance is learned from the package's evidence **without** any row of that item (the
//! template's maintained section is not read, it may hold what the left-out row taught), and the
//! left-out options are scored by the learned rules.
//!
//! **Scoring an option.** A rule matches an option when at least half of the rule's content words
//! (alphanumeric, four characters or more, lowercased) occur in the option's text; each matching
//! rule that asks for something (`Improve`, `Keep`, `Prefer`, a lesson or a finding) counts +1.
//! `Avoid` and `Address` lines are not scored: they name what is wrong or missing ("names no
//! file"), which shared words cannot tell from its opposite. The option with the highest score is
//! the rules' pick; a tie at the top (no rule matched, say) is no pick.
//!
//! **The score.** The left-out rankings whose winner the rules picked, over all rankings replayed
//! (no pick counts as a miss). With fewer than two readable rankings (nothing to learn from when
//! one is left out), or picks on fewer than [`MIN_PICKS`] or half of them, there is no score, and
//! [`HeldOut::unavailable`] says why.

use std::collections::BTreeSet;
use std::path::Path;

use serde::Serialize;
use skillforge_contract::TrainingPackage;

use super::evidence::{GuidanceKind, gather_evidence};
use super::guidance::{GuidanceLine, rank_guidance};

/// The fewest left-out rankings the rules must decide (and at least half of those replayed) for
/// the replay to be a score: fewer is too little to measure.
pub const MIN_PICKS: usize = 3;

/// The replay's counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct HeldOut {
    /// Rankings replayed (readable options, winner among them).
    pub rankings: usize,
    /// Rankings where the learned rules picked one option.
    pub picked: usize,
    /// Picks that were the reviewer's winner.
    pub agreed: usize,
}

impl HeldOut {
    /// `agreed / rankings`, or why there is none.
    ///
    /// # Errors
    /// The reason, in words, when the replay measured nothing.
    pub fn score(&self) -> Result<f64, String> {
        if self.rankings < 2 {
            return Err(format!(
                "{} ranked review(s) with readable options: leaving one out leaves nothing to learn from",
                self.rankings
            ));
        }
        if self.picked == 0 {
            return Err(format!(
                "the rules learned from the other rankings told no left-out ranking's options apart ({} replayed)",
                self.rankings
            ));
        }
        if self.picked < MIN_PICKS || 2 * self.picked < self.rankings {
            return Err(format!(
                "the rules learned from the other rankings decided only {} of {} left-out rankings (a score needs at least {MIN_PICKS} and half of them)",
                self.picked, self.rankings
            ));
        }
        Ok(self.agreed as f64 / self.rankings as f64)
    }

    /// Where a score came from, for `summary.metadata.score_evidence`.
    pub fn evidence(&self) -> String {
        format!(
            "held-out replay: rules learned from the other rankings picked the reviewer's winner in {} of {} left-out rankings ({} undecided)",
            self.agreed,
            self.rankings,
            self.rankings - self.picked
        )
    }

    /// Why there is no score (`None` when there is one).
    pub fn unavailable(&self) -> Option<String> {
        self.score().err()
    }
}

fn words(text: &str) -> BTreeSet<String> {
    text.to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 4)
        .map(str::to_owned)
        .collect()
}

fn option_score(rules: &[GuidanceLine], text: &str) -> i64 {
    let have = words(text);
    let matched = rules
        .iter()
        .filter(|r| !matches!(r.kind, GuidanceKind::Avoid | GuidanceKind::Address))
        .filter(|r| {
            let want = words(&r.text);
            !want.is_empty() && 2 * want.iter().filter(|w| have.contains(*w)).count() >= want.len()
        })
        .count();
    i64::try_from(matched).unwrap_or(i64::MAX)
}

/// Reads an artifact's text from the blob root by its manifest hash.
fn read_artifact(package: &TrainingPackage, root: &Path, id: &str) -> Option<String> {
    let hash = &package.artifacts.iter().find(|a| a.id == id)?.hash;
    let path = skillforge_store::blobs::BlobStore::at(root)
        .path_of(hash)
        .ok()?;
    std::fs::read_to_string(path).ok()
}

/// Replays the package's rankings held out one item at a time (see the module docs), reading
/// option texts from `artifact_root`.
pub fn held_out_replay(package: &TrainingPackage, artifact_root: &Path) -> HeldOut {
    let mut out = HeldOut::default();
    let mut seen = BTreeSet::new();
    for event in &package.ranked_feedback_events {
        let winner = if event.winner.trim().is_empty() {
            event.ranking.first().cloned().unwrap_or_default()
        } else {
            event.winner.trim().to_owned()
        };
        if !seen.insert(event.id.clone()) {
            continue;
        }
        let Some(item) = package.items.iter().find(|i| i.id == event.item_id) else {
            continue;
        };
        let options: Vec<(String, String)> = item
            .options
            .iter()
            .filter_map(|o| {
                Some((
                    o.label.clone(),
                    read_artifact(package, artifact_root, &o.artifact_id)?,
                ))
            })
            .collect();
        if options.len() < 2 || !options.iter().any(|(l, _)| *l == winner) {
            continue;
        }
        out.rankings += 1;
        let mut rest = package.clone();
        rest.ranked_feedback_events.retain(|e| e.item_id != item.id);
        rest.feedback_events.retain(|e| e.item_id != item.id);
        rest.items.retain(|i| i.id != item.id);
        let rules = rank_guidance(&gather_evidence(&rest).items, usize::MAX);
        let scored: Vec<(&str, i64)> = options
            .iter()
            .map(|(l, text)| (l.as_str(), option_score(&rules, text)))
            .collect();
        let top = scored.iter().map(|(_, s)| *s).max().unwrap_or(0);
        let at_top: Vec<&str> = scored
            .iter()
            .filter(|(_, s)| *s == top)
            .map(|(l, _)| *l)
            .collect();
        if let [pick] = at_top.as_slice() {
            out.picked += 1;
            if *pick == winner {
                out.agreed += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_out_score_is_agreement_over_every_replayed_ranking_or_says_why_not() {
        let none = HeldOut::default();
        assert!(none.score().unwrap_err().contains("0 ranked review(s)"));
        let one = HeldOut {
            rankings: 1,
            picked: 1,
            agreed: 1,
        };
        assert!(
            one.score()
                .unwrap_err()
                .contains("leaves nothing to learn from")
        );
        let blind = HeldOut {
            rankings: 3,
            picked: 0,
            agreed: 0,
        };
        assert!(blind.score().unwrap_err().contains("told no left-out"));
        let thin = HeldOut {
            rankings: 3,
            picked: 1,
            agreed: 0,
        };
        assert!(
            thin.score()
                .unwrap_err()
                .contains("decided only 1 of 3 left-out rankings"),
            "one pick is too little to measure"
        );
        let under_half = HeldOut {
            rankings: 8,
            picked: 3,
            agreed: 3,
        };
        assert!(under_half.score().is_err());
        let some = HeldOut {
            rankings: 4,
            picked: 3,
            agreed: 2,
        };
        assert_eq!(some.score(), Ok(0.5), "an undecided ranking is a miss");
        assert!(
            some.evidence()
                .contains("2 of 4 left-out rankings (1 undecided)")
        );
    }

    #[test]
    fn an_option_scores_the_rules_it_matches_and_avoid_rules_are_not_scored() {
        let line = |kind, text: &str| GuidanceLine {
            kind,
            key: String::new(),
            text: text.to_owned(),
            support: Default::default(),
            origins: Default::default(),
        };
        let rules = [
            line(GuidanceKind::Improve, "State the test plan before editing"),
            line(GuidanceKind::Avoid, "marketing fluff"),
        ];
        assert_eq!(
            option_score(&rules, "State the test plan first, then start editing."),
            1
        );
        // two of the rule's five content words are not half
        assert_eq!(option_score(&rules, "Test plan: run cargo test."), 0);
        assert_eq!(
            option_score(&rules, "Pure marketing fluff here"),
            0,
            "an avoid rule's words do not say whether the option avoided it"
        );
        assert_eq!(option_score(&rules, "nothing relevant"), 0);
    }
}
