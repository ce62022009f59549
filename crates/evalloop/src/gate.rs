//! The three-tier gate (seed: skill-eval-loop, "Three-tier gate", "Hard rules"; E-14..E-17,
//! E-52, E-54; resolutions 12, 13, 20): ADOPT, PROBATION or REJECT — or undecided (fewer than two
//! valid samples) or stopped (nothing to decide on), neither of which writes a ledger verdict.

use serde::{Deserialize, Serialize};

use super::aggregate::Aggregate;

/// Days to an adopted skill's recheck (E-20).
pub const ADOPT_RECHECK_DAYS: i64 = 14;
/// Days to a probation skill's recheck (E-20).
pub const PROBATION_RECHECK_DAYS: i64 = 7;

/// The gate's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// Install (or stage) with a 14-day recheck.
    Adopt,
    /// Install with a 7-day recheck.
    Probation,
    /// A loser: recorded, never re-evaluated.
    Reject,
    /// Fewer than two valid samples (res. 12): nothing is written as a loss.
    Undecided,
    /// The aggregate cannot carry a decision (stopped brief, missing inventory, empty rival).
    Stopped,
}

impl Decision {
    /// Ledger spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Adopt => "adopt",
            Decision::Probation => "probation",
            Decision::Reject => "reject",
            Decision::Undecided => "undecided",
            Decision::Stopped => "stopped",
        }
    }

    /// Whether a ledger row is written.
    pub fn is_verdict(self) -> bool {
        matches!(
            self,
            Decision::Adopt | Decision::Probation | Decision::Reject
        )
    }

    /// Days to the recheck, for the two installs.
    pub fn recheck_days(self) -> Option<i64> {
        match self {
            Decision::Adopt => Some(ADOPT_RECHECK_DAYS),
            Decision::Probation => Some(PROBATION_RECHECK_DAYS),
            _ => None,
        }
    }
}

/// What the gate is asked.
#[derive(Debug, Clone, PartialEq)]
pub struct GateInput<'a> {
    /// The aggregate.
    pub aggregate: &'a Aggregate,
    /// The candidate's name.
    pub skill: &'a str,
    /// `--rival`: the incumbent the baseline was meant to carry.
    pub rival: Option<&'a str>,
    /// `--probation --failure-rate R`: the operator's claim that the production failure is real
    /// and costly (recorded on the row).
    pub probation_failure_rate: Option<f64>,
    /// The template versions compared, when the forge is of versions: the headline names them.
    pub versions: Option<&'a super::ledger::Versions>,
}

/// The decision and the lines that explain it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateOutcome {
    /// The decision.
    pub decision: Decision,
    /// Human lines, first the headline.
    pub lines: Vec<String>,
}

/// The measured-judge gate on a forge's verdict (issue 34 item 12): with `[skillopt]
/// judge_kappa_floor` / `judge_min_paired_picks` set and a judge that is not measured against the
/// humans (`why`), an adopt, probation or reject is not applied: the forge ends UNDECIDED (no
/// ledger row, nothing installed), the judge's verdict kept below the headline as context.
/// Anything else (undecided, stopped) stands.
pub fn unmeasured_judge_gate(skill: &str, decided: &GateOutcome, why: &str) -> GateOutcome {
    if !decided.decision.is_verdict() {
        return decided.clone();
    }
    let mut lines = vec![format!(
        "UNDECIDED (judge not measured): {why}; the verdict `{}` on `{skill}` is not applied. Measure the judge \
         (`skillforge ab AGENT PROMPT --judge --pick a|b`, then `skillforge judge agreement`) and forge the brief again: \
         its samples are reused",
        decided.decision.as_str()
    )];
    lines.extend(
        decided
            .lines
            .iter()
            .map(|l| format!("unmeasured judge's verdict: {l}")),
    );
    GateOutcome {
        decision: Decision::Undecided,
        lines,
    }
}

/// Decides (see the module docs and the seed's rules).
pub fn gate(input: &GateInput<'_>) -> GateOutcome {
    let agg = input.aggregate;
    let out = |decision, lines: Vec<String>| GateOutcome { decision, lines };
    if let Some(why) = &agg.stopped {
        return out(
            Decision::Stopped,
            vec![format!("STOPPED: {why}"), "no ledger verdict".to_owned()],
        );
    }
    let Some(baseline) = agg.baseline_skills() else {
        return out(
            Decision::Stopped,
            vec!["STOPPED: this aggregate does not record what the arms were given; re-aggregate (re-reads the stored samples, spends no eval)".to_owned()],
        );
    };
    if let (Some(rival), true) = (input.rival, baseline.is_empty()) {
        return out(
            Decision::Stopped,
            vec![format!(
                "STOPPED: --rival `{rival}` was asked for but the baseline arm installed nothing; no contest happened, no ledger verdict"
            )],
        );
    }
    // A forge of versions names both (`changelog-writer@v4 over changelog-writer@v3`): the
    // candidate and the incumbent share the skill's name.
    let rival_version = input.versions.and_then(|v| v.rival.as_deref());
    let candidate = input
        .versions
        .map_or_else(|| input.skill.to_owned(), |v| v.candidate.clone());
    let over = match rival_version {
        Some(rival) => format!("over `{rival}`"),
        None if baseline.is_empty() => "over an empty baseline".to_owned(),
        None => format!("over baseline {}", baseline.join(", ")),
    };
    let rejected = |why: String| match rival_version {
        Some(rival) => format!("REJECT: {candidate} did not beat {rival}: {why}"),
        None => format!("REJECT `{candidate}`: {why}"),
    };
    let tally = format!(
        "{} valid of {} samples: with {} / without {} / tie {}",
        agg.n_valid, agg.n_samples, agg.wins_with, agg.wins_without, agg.ties
    );
    if agg.n_valid < 2 {
        let mut lines = vec![format!(
            "UNDECIDED: {tally}; neither adoption is available on fewer than two valid samples"
        )];
        let silent = &agg.arms_never_loaded;
        if silent.without > 0 && !baseline.is_empty() {
            lines.push(format!(
                "the baseline never loaded {} in {} of {} samples: the model passed the incumbent over, a measurement of the incumbent rather than a fault",
                baseline.join(", "), silent.without, agg.n_samples
            ));
        } else if silent.with > 0 {
            lines.push(format!(
                "the candidate `{}` was passed over in {} of {} samples",
                input.skill, silent.with, agg.n_samples
            ));
        } else {
            // Run again as it is, the brief's forge is read back (or refused as changed when the
            // fix was to the brief or the skill): the way on is a fresh forge.
            lines.push(
                "fix whatever invalidated the others (the samples' reasons above say what), then forge the \
                 brief anew with --fresh (the earlier forge is kept in the home's eval/archive)"
                    .to_owned(),
            );
        }
        return out(Decision::Undecided, lines);
    }
    let majority = |n: u32| n * 2 > agg.n_valid;
    let tool_line = match (agg.tool_errors.with, agg.tool_errors.without) {
        (Some(w), Some(b)) => (w <= b, format!("tool errors with {w} / without {b}")),
        _ => (
            true,
            "tool errors could not be compared (a runtime records none)".to_owned(),
        ),
    };
    if majority(agg.wins_with) && majority(agg.with_verify_passes) && tool_line.0 {
        return out(
            Decision::Adopt,
            vec![format!("ADOPT `{candidate}` {over}: {tally}"), tool_line.1],
        );
    }
    let clean_tie = agg.wins_with == agg.wins_without;
    if clean_tie {
        if let Some(rate) = input.probation_failure_rate {
            return out(
                Decision::Probation,
                vec![format!(
                    "PROBATION `{candidate}` {over}: clean tie ({tally}); production failure rate {rate} claimed by the operator; recheck in {PROBATION_RECHECK_DAYS} days"
                )],
            );
        }
        return out(
            Decision::Reject,
            vec![rejected(format!(
                "clean tie ({tally}) without --probation --failure-rate R"
            ))],
        );
    }
    let why = if !majority(agg.wins_with) {
        "no strict majority of valid samples".to_owned()
    } else if !majority(agg.with_verify_passes) {
        format!(
            "the with-arm passed verify in only {} of {} valid samples",
            agg.with_verify_passes, agg.n_valid
        )
    } else {
        format!("more tool errors than the baseline ({})", tool_line.1)
    };
    out(Decision::Reject, vec![rejected(format!("{why}; {tally}"))])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::aggregate;
    use crate::aggregate::tests::verdict;
    use crate::arm::ArmPair;
    use crate::invalid::InvalidCode;
    use crate::sample::Winner;

    fn input<'a>(
        agg: &'a Aggregate,
        rival: Option<&'a str>,
        probation: Option<f64>,
    ) -> GateInput<'a> {
        GateInput {
            aggregate: agg,
            skill: "cand",
            rival,
            probation_failure_rate: probation,
            versions: None,
        }
    }

    fn agg_of(winners: &[Option<Winner>]) -> Aggregate {
        let vs: Vec<_> = winners
            .iter()
            .enumerate()
            .map(|(i, w)| {
                verdict(
                    i as u32 + 1,
                    *w,
                    if w.is_none() {
                        Some(InvalidCode::SkillNamed)
                    } else {
                        None
                    },
                    &[],
                    &[],
                )
            })
            .collect();
        aggregate("b", &vs).unwrap()
    }

    // E-14
    #[test]
    fn e14_adopt_needs_majority_verify_and_no_more_tool_errors() {
        let mut agg = agg_of(&[
            Some(Winner::With),
            Some(Winner::With),
            Some(Winner::Without),
        ]);
        agg.tool_errors = ArmPair {
            with: Some(3),
            without: Some(2),
        };
        assert_eq!(gate(&input(&agg, None, None)).decision, Decision::Reject);
        agg.tool_errors = ArmPair {
            with: Some(2),
            without: Some(2),
        };
        let g = gate(&input(&agg, None, None));
        assert_eq!(g.decision, Decision::Adopt);
        agg.with_verify_passes = 1;
        assert_eq!(gate(&input(&agg, None, None)).decision, Decision::Reject);
        agg.with_verify_passes = 3;
        agg.tool_errors.without = None;
        let g = gate(&input(&agg, None, None));
        assert_eq!(
            g.decision,
            Decision::Adopt,
            "an unknown count never blocks on its own"
        );
        assert!(g.lines.iter().any(|l| l.contains("could not be compared")));
    }

    // E-15
    #[test]
    fn e15_no_adoption_on_fewer_than_two_valid() {
        let agg = agg_of(&[Some(Winner::With), None, None]);
        let g = gate(&input(&agg, None, Some(0.4)));
        assert_eq!(
            g.decision,
            Decision::Undecided,
            "resolution 12: undecided, not reject"
        );
        assert!(!g.decision.is_verdict());
        assert!(g.lines[1].contains("anew with --fresh"), "{:?}", g.lines);
    }

    // E-16
    #[test]
    fn e16_probation_only_on_a_clean_tie_with_the_flag() {
        let agg = agg_of(&[Some(Winner::With), Some(Winner::Without), Some(Winner::Tie)]);
        assert_eq!(gate(&input(&agg, None, None)).decision, Decision::Reject);
        let g = gate(&input(&agg, None, Some(0.3)));
        assert_eq!(g.decision, Decision::Probation);
        assert_eq!(g.decision.recheck_days(), Some(7));
        let lost = agg_of(&[
            Some(Winner::Without),
            Some(Winner::Without),
            Some(Winner::Tie),
        ]);
        assert_eq!(
            gate(&input(&lost, None, Some(0.3))).decision,
            Decision::Reject
        );
        // A forge of versions names both in the headline.
        let versions = crate::ledger::Versions {
            candidate: "cand@v4".into(),
            rival: Some("cand@v3".into()),
        };
        let mut tie = agg.clone();
        tie.skills_installed = Some(ArmPair {
            with: vec!["cand".into()],
            without: vec!["cand".into()],
        });
        let g = gate(&GateInput {
            versions: Some(&versions),
            ..input(&tie, Some("cand"), None)
        });
        assert!(
            g.lines[0].starts_with("REJECT: cand@v4 did not beat cand@v3: clean tie"),
            "{:?}",
            g.lines
        );
    }

    // E-52
    #[test]
    fn e52_empty_baseline_said_out_loud_and_rival_without_install_stops() {
        let agg = agg_of(&[Some(Winner::With), Some(Winner::With), Some(Winner::With)]);
        let g = gate(&input(&agg, None, None));
        assert!(
            g.lines[0].contains("over an empty baseline"),
            "{:?}",
            g.lines
        );
        let g = gate(&input(&agg, Some("z"), None));
        assert_eq!(g.decision, Decision::Stopped);
        assert!(g.lines[0].contains("--rival `z`"));
        let mut old = agg.clone();
        old.skills_installed = None;
        let g = gate(&input(&old, None, None));
        assert!(g.lines[0].contains("re-aggregate") && !g.lines[0].contains("empty baseline"));
    }

    // E-54
    #[test]
    fn e54_gate_names_the_passed_over_incumbent_without_rerun_text() {
        let vs: Vec<_> = (1..=3)
            .map(|n| verdict(n, None, Some(InvalidCode::SkillNeverLoaded), &["inc"], &[]))
            .collect();
        let agg = aggregate("b", &vs).unwrap();
        let g = gate(&input(&agg, Some("inc"), None));
        assert_eq!(g.decision, Decision::Undecided);
        let text = g.lines.join("\n");
        assert!(text.contains("never loaded inc in 3 of 3"), "{text}");
        assert!(!text.contains("rerun"), "{text}");
    }
}
