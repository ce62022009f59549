//! Scoring a replay and deciding the gate (issue 34 item 11), pure.
//!
//! Each item is scored by the deterministic scorers: the hard verifier's pass/fail (the replay
//! command's exit status, or the agent having answered) and the expected text in the output.
//! A replay that could not run, timed out or was killed is *unscorable*, never a zero. The gate
//! accepts only when every item is scorable on both sides and the candidate's corpus mean is
//! strictly above the champion's.

use serde::{Deserialize, Serialize};
use skillforge_runner::ExitClass;

/// One side's replay of one item, scored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ItemScore {
    /// Scored: 1.0 passed, 0.0 failed; `note` says why.
    Scored {
        /// 1.0 or 0.0.
        score: f64,
        /// Why, in a few words.
        note: String,
    },
    /// No score: the replay never produced a verdict.
    Unscorable {
        /// Why.
        note: String,
    },
}

impl ItemScore {
    /// The score, `None` when unscorable.
    pub fn score(&self) -> Option<f64> {
        match self {
            ItemScore::Scored { score, .. } => Some(*score),
            ItemScore::Unscorable { .. } => None,
        }
    }

    /// The note.
    pub fn note(&self) -> &str {
        match self {
            ItemScore::Scored { note, .. } | ItemScore::Unscorable { note } => note,
        }
    }
}

fn contains_expected(output: &str, expected: &str) -> bool {
    let expected = expected.trim();
    expected.is_empty() || output.contains(expected)
}

/// Scores a finished replay job: `exit` is how its run ended (`None` when the job ended without
/// a run outcome: dead, cancelled), `output` its stdout (the agent's final message for an ask).
pub fn score_replay(exit: Option<&ExitClass>, output: &str, expected: &str) -> ItemScore {
    let Some(exit) = exit else {
        return ItemScore::Unscorable {
            note: "the replay job ended without a result".to_owned(),
        };
    };
    match exit {
        ExitClass::Passed if contains_expected(output, expected) => ItemScore::Scored {
            score: 1.0,
            note: "passed".to_owned(),
        },
        ExitClass::Passed => ItemScore::Scored {
            score: 0.0,
            note: "the output does not contain the expected text".to_owned(),
        },
        ExitClass::Failed { code } => ItemScore::Scored {
            score: 0.0,
            note: format!("the replay exited {code}"),
        },
        other => ItemScore::Unscorable {
            note: format!("the replay could not give a verdict ({})", other.label()),
        },
    }
}

/// One item's scores on both sides and their difference (candidate − champion), kept for audit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ItemDelta {
    /// The corpus item.
    pub id: String,
    /// The champion's replay.
    pub champion: ItemScore,
    /// The candidate's replay.
    pub candidate: ItemScore,
    /// candidate − champion; `None` when either side is unscorable.
    pub delta: Option<f64>,
}

impl ItemDelta {
    /// The delta of two scored sides.
    pub fn new(id: &str, champion: ItemScore, candidate: ItemScore) -> Self {
        let delta = match (champion.score(), candidate.score()) {
            (Some(h), Some(c)) => Some(c - h),
            _ => None,
        };
        Self {
            id: id.to_owned(),
            champion,
            candidate,
            delta,
        }
    }
}

/// The gate's verdict over a corpus.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateVerdict {
    /// Accepted: every item scorable on both sides and the candidate's mean strictly higher.
    pub accepted: bool,
    /// The champion's corpus mean in [0,1]; `None` unless every champion item was scorable.
    pub champion_mean: Option<f64>,
    /// The candidate's corpus mean in [0,1]; `None` unless every candidate item was scorable.
    pub candidate_mean: Option<f64>,
    /// Why, in one line.
    pub reason: String,
}

fn mean(scores: &[Option<f64>]) -> Option<f64> {
    let all: Option<Vec<f64>> = scores.iter().copied().collect();
    all.filter(|v| !v.is_empty())
        .map(|v| v.iter().sum::<f64>() / v.len() as f64)
}

/// Decides the gate over the per-item deltas.
pub fn decide_gate(deltas: &[ItemDelta]) -> GateVerdict {
    let champion_mean = mean(
        &deltas
            .iter()
            .map(|d| d.champion.score())
            .collect::<Vec<_>>(),
    );
    let candidate_mean = mean(
        &deltas
            .iter()
            .map(|d| d.candidate.score())
            .collect::<Vec<_>>(),
    );
    let unscorable: Vec<String> = deltas
        .iter()
        .filter(|d| d.delta.is_none())
        .map(|d| {
            let side = if d.champion.score().is_none() {
                "champion"
            } else {
                "candidate"
            };
            format!(
                "{} ({side}: {})",
                d.id,
                if side == "champion" {
                    d.champion.note()
                } else {
                    d.candidate.note()
                }
            )
        })
        .collect();
    let (accepted, reason) = match (champion_mean, candidate_mean) {
        _ if deltas.is_empty() => (false, "no items were replayed".to_owned()),
        _ if !unscorable.is_empty() => (
            false,
            format!(
                "not every item is scorable on both sides: {}",
                unscorable.join(", ")
            ),
        ),
        (Some(h), Some(c)) if c > h => (
            true,
            format!(
                "the candidate's corpus mean {c:.3} is above the champion's {h:.3} over {} items",
                deltas.len()
            ),
        ),
        (Some(h), Some(c)) => (
            false,
            format!(
                "the candidate's corpus mean {c:.3} is not above the champion's {h:.3} over {} items",
                deltas.len()
            ),
        ),
        _ => (false, "a corpus mean is missing".to_owned()),
    };
    GateVerdict {
        accepted,
        champion_mean,
        candidate_mean,
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pass() -> ItemScore {
        ItemScore::Scored {
            score: 1.0,
            note: "passed".into(),
        }
    }
    fn fail() -> ItemScore {
        ItemScore::Scored {
            score: 0.0,
            note: "failed".into(),
        }
    }
    fn gone() -> ItemScore {
        ItemScore::Unscorable {
            note: "timed out".into(),
        }
    }

    #[test]
    fn a_replay_is_scored_by_its_exit_and_the_expected_text() {
        assert_eq!(
            score_replay(Some(&ExitClass::Passed), "the answer is 4\n", " 4 ").score(),
            Some(1.0)
        );
        assert_eq!(
            score_replay(Some(&ExitClass::Passed), "five", "4").score(),
            Some(0.0)
        );
        assert_eq!(
            score_replay(Some(&ExitClass::Passed), "anything", "").score(),
            Some(1.0),
            "a command alone decides"
        );
        assert_eq!(
            score_replay(Some(&ExitClass::Failed { code: 1 }), "4", "4").score(),
            Some(0.0)
        );
        for unscorable in [
            ExitClass::TimedOut,
            ExitClass::Killed { signal: 9 },
            ExitClass::NotRunnable { reason: "x".into() },
            ExitClass::Censored,
        ] {
            assert_eq!(
                score_replay(Some(&unscorable), "4", "4").score(),
                None,
                "{unscorable:?}"
            );
        }
        assert_eq!(score_replay(None, "", "4").score(), None);
    }

    // Table: (champion, candidate) per item → accepted, means.
    #[test]
    fn the_gate_accepts_only_a_strict_improvement_with_every_item_scorable() {
        type Case = (
            Vec<(ItemScore, ItemScore)>,
            bool,
            Option<f64>,
            Option<f64>,
            &'static str,
        );
        let cases: Vec<Case> = vec![
            (
                vec![(fail(), pass()), (pass(), pass())],
                true,
                Some(0.5),
                Some(1.0),
                "above",
            ),
            (
                vec![(pass(), pass()), (pass(), pass())],
                false,
                Some(1.0),
                Some(1.0),
                "not above",
            ),
            (
                vec![(pass(), fail()), (fail(), pass())],
                false,
                Some(0.5),
                Some(0.5),
                "not above",
            ),
            (
                vec![(fail(), pass()), (fail(), gone())],
                false,
                Some(0.0),
                None,
                "not every item is scorable",
            ),
            (
                vec![(gone(), pass()), (fail(), pass())],
                false,
                None,
                Some(1.0),
                "i0 (champion: timed out)",
            ),
            (vec![], false, None, None, "no items"),
        ];
        for (pairs, accepted, champion_mean, candidate_mean, needle) in cases {
            let deltas: Vec<ItemDelta> = pairs
                .into_iter()
                .enumerate()
                .map(|(i, (h, c))| ItemDelta::new(&format!("i{i}"), h, c))
                .collect();
            let v = decide_gate(&deltas);
            assert_eq!(
                (v.accepted, v.champion_mean, v.candidate_mean),
                (accepted, champion_mean, candidate_mean),
                "{}",
                v.reason
            );
            assert!(v.reason.contains(needle), "{}", v.reason);
        }
    }
}
