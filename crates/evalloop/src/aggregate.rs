//! The aggregate over a brief's samples (`aggregate.json`; seed: skill-eval-loop, "Three-tier
//! gate", "Hard rules"; E-15, E-53, E-54; resolution 12).
//!
//! Wins are counted over valid samples only. What each arm was given is read off every sample,
//! valid or not; samples that disagree stop the aggregate (two experiments, not one comparison).
//! `arms_never_loaded` counts silent arms per side through the judge's own predicate.

use serde::{Deserialize, Serialize};

use super::arm::{ArmPair, ArmSide};
use super::invalid::InvalidCode;
use super::predicate::never_used_its_skill;
use super::sample::{SampleVerdict, Winner};
use super::stop::brief_stop;

/// File name of a brief's aggregate.
pub const AGGREGATE_FILE: &str = "aggregate.json";

/// One invalid sample as the aggregate lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InvalidSample {
    /// Sample number.
    pub sample: u32,
    /// Its code.
    pub code: InvalidCode,
    /// The arm the code names.
    pub arm: Option<ArmSide>,
}

/// `aggregate.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Aggregate {
    /// The brief.
    pub brief_id: String,
    /// Samples read.
    pub n_samples: u32,
    /// Samples that count.
    pub n_valid: u32,
    /// Valid samples won by the candidate.
    pub wins_with: u32,
    /// Valid samples won by the baseline.
    pub wins_without: u32,
    /// Valid samples judged a tie.
    pub ties: u32,
    /// Valid samples in which the with-arm passed verify.
    pub with_verify_passes: u32,
    /// Tool errors summed over valid samples; `None` when any valid sample's runtime records none.
    pub tool_errors: ArmPair<Option<u32>>,
    /// Invalid samples with their codes.
    pub invalid: Vec<InvalidSample>,
    /// What each arm was given, agreed by every sample. `None` in aggregates written before the
    /// field existed (re-aggregate; never read as an empty baseline).
    #[serde(default)]
    pub skills_installed: Option<ArmPair<Vec<String>>>,
    /// Samples per side whose arm never loaded the skill it was given (E-54).
    #[serde(default)]
    pub arms_never_loaded: ArmPair<u32>,
    /// Why the brief stopped taking samples, if it did.
    #[serde(default)]
    pub stopped: Option<String>,
}

impl Aggregate {
    /// `baseline_skills`: what the baseline arm was given, read off the run.
    pub fn baseline_skills(&self) -> Option<&[String]> {
        self.skills_installed.as_ref().map(|s| s.without.as_slice())
    }
}

/// Why no aggregate could be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AggregateError {
    /// No verdicts at all.
    #[error("brief `{0}` has no sample verdicts to aggregate")]
    NoSamples(String),
    /// A verdict lacks the arm inventory.
    #[error(
        "sample {sample}'s verdict does not record what the arms were given; re-judge it (its stored arm outputs are enough, no eval spend)"
    )]
    MissingInventory {
        /// The sample.
        sample: u32,
    },
    /// Samples disagree about what an arm was given (E-53).
    #[error(
        "samples disagree about what the {side} arm was given (sample {first}: {first_skills:?}, sample {other}: {other_skills:?}); those are two experiments, not one comparison"
    )]
    InventoryDisagrees {
        /// The arm.
        side: ArmSide,
        /// First sample.
        first: u32,
        /// Its skills.
        first_skills: Vec<String>,
        /// A disagreeing sample.
        other: u32,
        /// Its skills.
        other_skills: Vec<String>,
    },
}

/// Aggregates `verdicts` of brief `brief_id`.
///
/// # Errors
/// [`AggregateError`] as its variants say.
pub fn aggregate(brief_id: &str, verdicts: &[SampleVerdict]) -> Result<Aggregate, AggregateError> {
    let mut sorted: Vec<&SampleVerdict> = verdicts.iter().collect();
    sorted.sort_by_key(|v| v.sample);
    let Some(first) = sorted.first() else {
        return Err(AggregateError::NoSamples(brief_id.to_owned()));
    };
    let first_skills = first
        .skills
        .as_ref()
        .ok_or(AggregateError::MissingInventory {
            sample: first.sample,
        })?;
    let mut never_loaded = ArmPair::<u32>::default();
    for v in &sorted {
        let skills = v
            .skills
            .as_ref()
            .ok_or(AggregateError::MissingInventory { sample: v.sample })?;
        for side in ArmSide::BOTH {
            let (a, b) = (
                &first_skills.get(side).installed,
                &skills.get(side).installed,
            );
            if a != b {
                return Err(AggregateError::InventoryDisagrees {
                    side,
                    first: first.sample,
                    first_skills: a.clone(),
                    other: v.sample,
                    other_skills: b.clone(),
                });
            }
            let facts = skills.get(side);
            if never_used_its_skill(&facts.installed, facts.loaded.as_deref()) {
                *never_loaded.get_mut(side) += 1;
            }
        }
    }
    let valid: Vec<&&SampleVerdict> = sorted.iter().filter(|v| v.valid).collect();
    let count = |w: Winner| valid.iter().filter(|v| v.winner == Some(w)).count() as u32;
    let sum = |side: ArmSide| {
        valid
            .iter()
            .try_fold(0u32, |acc, v| v.tool_errors.get(side).map(|n| acc + n))
    };
    Ok(Aggregate {
        brief_id: brief_id.to_owned(),
        n_samples: sorted.len() as u32,
        n_valid: valid.len() as u32,
        wins_with: count(Winner::With),
        wins_without: count(Winner::Without),
        ties: count(Winner::Tie),
        with_verify_passes: valid.iter().filter(|v| v.verify_passed.with).count() as u32,
        tool_errors: ArmPair {
            with: sum(ArmSide::With),
            without: sum(ArmSide::Without),
        },
        invalid: sorted
            .iter()
            .filter_map(|v| {
                v.invalid_code.map(|code| InvalidSample {
                    sample: v.sample,
                    code,
                    arm: v.invalid_arm,
                })
            })
            .collect(),
        skills_installed: Some(ArmPair {
            with: first_skills.with.installed.clone(),
            without: first_skills.without.installed.clone(),
        }),
        arms_never_loaded: never_loaded,
        stopped: brief_stop(verdicts).map(|s| s.reason),
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::sample::SkillFacts;

    pub(crate) fn verdict(
        sample: u32,
        winner: Option<Winner>,
        code: Option<InvalidCode>,
        baseline: &[&str],
        baseline_loaded: &[&str],
    ) -> SampleVerdict {
        let names = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        SampleVerdict {
            sample,
            valid: code.is_none(),
            invalid_code: code,
            invalid_arm: None,
            reason: "r".into(),
            winner,
            mapping: None,
            verify_passed: ArmPair {
                with: true,
                without: true,
            },
            tool_errors: ArmPair {
                with: Some(0),
                without: Some(0),
            },
            skills: Some(ArmPair {
                with: SkillFacts {
                    installed: names(&["cand"]),
                    offered: Some(names(&["cand"])),
                    loaded: Some(names(&["cand"])),
                },
                without: SkillFacts {
                    installed: names(baseline),
                    offered: Some(names(baseline)),
                    loaded: Some(names(baseline_loaded)),
                },
            }),
            judge_usage: None,
            judge: None,
        }
    }

    // E-15
    #[test]
    fn e15_majority_over_valid_samples_only() {
        let vs = [
            verdict(1, Some(Winner::With), None, &[], &[]),
            verdict(2, None, Some(InvalidCode::SkillNeverLoaded), &[], &[]),
            verdict(3, None, Some(InvalidCode::SkillNamed), &[], &[]),
        ];
        let agg = aggregate("b", &vs).unwrap();
        assert_eq!((agg.n_samples, agg.n_valid, agg.wins_with), (3, 1, 1));
        assert_eq!(agg.invalid.len(), 2);
    }

    // E-53
    #[test]
    fn e53_disagreeing_inventories_stop_and_missing_is_not_empty() {
        let vs = [
            verdict(1, Some(Winner::With), None, &[], &[]),
            verdict(2, Some(Winner::With), None, &["z"], &["z"]),
            verdict(3, Some(Winner::With), None, &[], &[]),
        ];
        let e = aggregate("b", &vs).unwrap_err();
        assert!(
            matches!(
                e,
                AggregateError::InventoryDisagrees {
                    side: ArmSide::Without,
                    other: 2,
                    ..
                }
            ),
            "{e}"
        );
        let mut invalid_disagrees = vs.clone();
        invalid_disagrees[1].valid = false;
        invalid_disagrees[1].invalid_code = Some(InvalidCode::SkillNamed);
        assert!(
            aggregate("b", &invalid_disagrees).is_err(),
            "read off every sample, valid or not"
        );
        let mut old = vs.clone();
        old[1].skills = None;
        let e = aggregate("b", &old).unwrap_err().to_string();
        assert!(e.contains("does not record") && !e.contains("empty"), "{e}");
    }

    // E-54
    #[test]
    fn e54_silent_arms_counted_per_side_unknown_never() {
        let vs: Vec<_> = (1..=3)
            .map(|n| verdict(n, None, Some(InvalidCode::SkillNeverLoaded), &["inc"], &[]))
            .collect();
        let agg = aggregate("b", &vs).unwrap();
        assert_eq!(
            (agg.arms_never_loaded.with, agg.arms_never_loaded.without),
            (0, 3)
        );
        let mut codex = vs.clone();
        for v in &mut codex {
            v.skills.as_mut().unwrap().without.loaded = None;
        }
        assert_eq!(aggregate("b", &codex).unwrap().arms_never_loaded.without, 0);
    }
}
