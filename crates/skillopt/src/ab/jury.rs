//! The judge jury (seed: SkillOpt, "Cross-family LLM-judge auto-pairwise" › jury (#349); S-81,
//! S-82; resolutions 11): majority over readable verdicts, a disagreement flag, and an optional
//! fail-closed minority veto. Evidence only, like the single judge.

use std::collections::BTreeMap;

use serde::Serialize;

use super::judge::Verdict;
use super::pick::Label;

/// The jury's `[skillopt]` keys with their defaults.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct JuryConfig {
    /// `mode_b_jury_size` (default 1; 0/1 = single judge).
    pub size: u32,
    /// `mode_b_jury_disagreement_tau` (default 0.0 = the std check is off).
    pub disagreement_tau: f64,
    /// `mode_b_jury_veto_dimensions` (default empty = no veto), lowercase.
    pub veto_dimensions: Vec<String>,
    /// `mode_b_jury_veto_floor` in [0,1] (default 0.0 = the veto is inert).
    pub veto_floor: f64,
}

impl JuryConfig {
    /// Whether a jury convenes at all (size ≥ 2); else the single judge, byte-identical (S-81).
    pub fn is_jury(&self) -> bool {
        self.size >= 2
    }

    /// Parses the comma list of `mode_b_jury_veto_dimensions` (trimmed, lowercase, blanks dropped).
    pub fn parse_dimensions(list: &str) -> Vec<String> {
        list.split(',')
            .map(|d| d.trim().to_ascii_lowercase())
            .filter(|d| !d.is_empty())
            .collect()
    }
}

/// What the jury decided.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JuryOutcome {
    /// The recorded pick; `None` on an even split, fewer than two readable verdicts, or a veto.
    pub pick: Option<Label>,
    /// Readable verdicts for A and for B.
    pub votes: (usize, usize),
    /// Verdicts that were ties or unreadable.
    pub abstained: usize,
    /// An even split, or a (label, dimension) score std above tau.
    pub disagreement: bool,
    /// `(dimension, score)` of the first juror score below the floor on the majority's option.
    pub vetoed: Option<(String, f64)>,
}

fn std_dev(values: &[f64]) -> f64 {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt()
}

/// Aggregates juror verdicts (S-81, S-82, resolutions 11).
pub fn aggregate(verdicts: &[Verdict], config: &JuryConfig) -> JuryOutcome {
    let mut votes = (0, 0);
    let mut scores: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
    for verdict in verdicts {
        if let Verdict::Parsed {
            pick,
            scores: by_label,
            ..
        } = verdict
        {
            match pick {
                Label::A => votes.0 += 1,
                Label::B => votes.1 += 1,
            }
            for (label, dims) in by_label {
                for (dim, score) in dims {
                    scores
                        .entry((label.clone(), dim.clone()))
                        .or_default()
                        .push(*score);
                }
            }
        }
    }
    let readable = votes.0 + votes.1;
    let even = votes.0 == votes.1;
    let spread = config.disagreement_tau > 0.0
        && scores
            .values()
            .any(|v| v.len() >= 2 && std_dev(v) > config.disagreement_tau);
    let majority = match (readable >= 2, even) {
        (true, false) => Some(if votes.0 > votes.1 {
            Label::A
        } else {
            Label::B
        }),
        _ => None,
    };
    let vetoed = majority.and_then(|label| {
        if config.veto_floor <= 0.0 {
            return None;
        }
        config.veto_dimensions.iter().find_map(|dim| {
            let low = scores
                .get(&(label.as_str().to_owned(), dim.clone()))?
                .iter()
                .copied()
                .find(|s| *s < config.veto_floor)?;
            Some((dim.clone(), low))
        })
    });
    JuryOutcome {
        pick: if vetoed.is_some() { None } else { majority },
        votes,
        abstained: verdicts.len() - readable,
        disagreement: spread || (readable > 0 && even),
        vetoed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vote(pick: Label, safety_of_a: Option<f64>) -> Verdict {
        let mut scores = BTreeMap::new();
        if let Some(s) = safety_of_a {
            scores.insert("a".to_owned(), BTreeMap::from([("safety".to_owned(), s)]));
        }
        Verdict::Parsed {
            pick,
            scores,
            reasoning: String::new(),
        }
    }

    // S-81
    #[test]
    fn s81_majority_with_disagreement_only_above_tau() {
        let verdicts = [
            vote(Label::A, Some(0.9)),
            vote(Label::A, Some(0.8)),
            vote(Label::B, Some(0.1)),
        ];
        let calm = aggregate(
            &verdicts,
            &JuryConfig {
                size: 3,
                disagreement_tau: 0.5,
                ..JuryConfig::default()
            },
        );
        assert_eq!(
            (calm.pick, calm.votes, calm.disagreement),
            (Some(Label::A), (2, 1), false)
        );
        let tight = aggregate(
            &verdicts,
            &JuryConfig {
                size: 3,
                disagreement_tau: 0.2,
                ..JuryConfig::default()
            },
        );
        assert_eq!(
            tight.pick,
            Some(Label::A),
            "disagreement is a flag, not a veto"
        );
        assert!(
            tight.disagreement,
            "std of a's safety {{0.9,0.8,0.1}} ≈ 0.36 > 0.2"
        );
        let off = aggregate(
            &verdicts,
            &JuryConfig {
                size: 3,
                disagreement_tau: 0.0,
                ..JuryConfig::default()
            },
        );
        assert!(!off.disagreement, "tau 0.0 disables the std check");
        assert!(
            !JuryConfig {
                size: 1,
                ..JuryConfig::default()
            }
            .is_jury()
        );
        assert!(
            !JuryConfig {
                size: 0,
                ..JuryConfig::default()
            }
            .is_jury()
        );
    }

    #[test]
    fn even_split_or_one_readable_verdict_records_no_pick() {
        let config = JuryConfig {
            size: 3,
            ..JuryConfig::default()
        };
        let split = aggregate(
            &[vote(Label::A, None), vote(Label::B, None), Verdict::Tie],
            &config,
        );
        assert_eq!(
            (split.pick, split.disagreement, split.abstained),
            (None, true, 1)
        );
        let lone = aggregate(
            &[vote(Label::B, None), Verdict::Unreadable, Verdict::Tie],
            &config,
        );
        assert_eq!(
            (lone.pick, lone.votes),
            (None, (0, 1)),
            "fewer than two readable verdicts"
        );
    }

    // S-82
    #[test]
    fn s82_minority_veto_fails_closed_and_floor_zero_is_inert() {
        let verdicts = [
            vote(Label::A, Some(0.9)),
            vote(Label::A, Some(0.8)),
            vote(Label::B, Some(0.2)),
        ];
        let veto = JuryConfig {
            size: 3,
            veto_dimensions: JuryConfig::parse_dimensions(" Safety , "),
            veto_floor: 0.5,
            ..JuryConfig::default()
        };
        let outcome = aggregate(&verdicts, &veto);
        assert_eq!(outcome.pick, None, "a's safety 0.2 from one juror vetoes a");
        assert_eq!(outcome.vetoed, Some(("safety".to_owned(), 0.2)));
        let inert = aggregate(
            &verdicts,
            &JuryConfig {
                veto_floor: 0.0,
                ..veto.clone()
            },
        );
        assert_eq!(inert.pick, Some(Label::A));
        let unlisted = aggregate(
            &verdicts,
            &JuryConfig {
                veto_dimensions: vec!["correctness".into()],
                ..veto
            },
        );
        assert_eq!(unlisted.pick, Some(Label::A), "only listed dimensions veto");
    }
}
