//! When a brief stops taking samples (seed: skill-eval-loop, "Hard rules"; E-42, E-45, E-55;
//! resolution 15).

use super::invalid::InvalidCode;
use super::sample::SampleVerdict;

/// Why the brief stopped: the sample and code that stopped it, and the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stopped {
    /// The sample after which no more run.
    pub sample: u32,
    /// The code that stopped it.
    pub code: InvalidCode,
    /// Human reason.
    pub reason: String,
}

/// Reads the verdicts so far, in sample order: `arm_never_ran` or `baseline_had_the_skill` stop
/// at once; `both_arms_failed_verify` stops on the second consecutive one — an intervening
/// sample of any other outcome resets the count (res. 15). Every other code stops nothing.
pub fn brief_stop(verdicts: &[SampleVerdict]) -> Option<Stopped> {
    let mut run = 0;
    let mut sorted: Vec<&SampleVerdict> = verdicts.iter().collect();
    sorted.sort_by_key(|v| v.sample);
    for v in sorted {
        match v.invalid_code {
            Some(code) if code.stops_at_once() => {
                return Some(Stopped {
                    sample: v.sample,
                    code,
                    reason: format!(
                        "sample {}: {} stops the brief: {}",
                        v.sample,
                        code.words(),
                        v.reason
                    ),
                });
            }
            Some(InvalidCode::BothArmsFailedVerify) => {
                run += 1;
                if run >= 2 {
                    return Some(Stopped {
                        sample: v.sample,
                        code: InvalidCode::BothArmsFailedVerify,
                        reason: if v.reason == crate::invalid::SAME_STAND_IN_FAILED_VERIFY {
                            format!(
                                "samples {} and {} both had both arms fail verify: {}",
                                v.sample - 1,
                                v.sample,
                                v.reason.trim_start_matches(
                                    "both arms failed verify with the same answer: "
                                )
                            )
                        } else {
                            format!(
                                "samples {} and {} both had both arms fail verify: a gate nothing passes; fix the brief",
                                v.sample - 1,
                                v.sample
                            )
                        },
                    });
                }
            }
            _ => run = 0,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arm::ArmPair;

    fn v(sample: u32, code: Option<InvalidCode>) -> SampleVerdict {
        SampleVerdict {
            sample,
            valid: code.is_none(),
            invalid_code: code,
            invalid_arm: None,
            reason: "r".into(),
            winner: None,
            mapping: None,
            verify_passed: ArmPair::default(),
            tool_errors: ArmPair::default(),
            skills: None,
            judge_usage: None,
            judge: None,
        }
    }

    // E-42: the stop over two scripted stand-ins names the stand-in, not the brief, as the cause.
    #[test]
    fn e42_a_stop_over_scripted_stand_ins_says_so() {
        let mut vs = vec![
            v(1, Some(InvalidCode::BothArmsFailedVerify)),
            v(2, Some(InvalidCode::BothArmsFailedVerify)),
        ];
        for verdict in &mut vs {
            verdict.reason = crate::invalid::SAME_STAND_IN_FAILED_VERIFY.to_owned();
        }
        let stop = brief_stop(&vs).unwrap();
        assert!(
            stop.reason
                .starts_with("samples 1 and 2 both had both arms fail verify: the scripted agent")
                && !stop.reason.contains("fix the brief"),
            "{}",
            stop.reason
        );
    }

    // E-42
    #[test]
    fn e42_two_both_failed_in_a_row_stop_one_does_not() {
        use InvalidCode::*;
        let check = |codes: &[Option<InvalidCode>], want: Option<u32>| {
            let vs: Vec<_> = codes
                .iter()
                .enumerate()
                .map(|(i, c)| v(i as u32 + 1, *c))
                .collect();
            assert_eq!(brief_stop(&vs).map(|s| s.sample), want, "{codes:?}");
        };
        check(&[Some(BothArmsFailedVerify)], None);
        check(
            &[Some(BothArmsFailedVerify), Some(BothArmsFailedVerify)],
            Some(2),
        );
        check(
            &[
                Some(BothArmsFailedVerify),
                Some(SkillNamed),
                Some(BothArmsFailedVerify),
            ],
            None,
        );
        check(
            &[Some(SkillNamed), Some(SkillNamed), Some(SkillNamed)],
            None,
        );
        check(
            &[
                Some(ArmTimedOut),
                Some(BothArmsFailedVerify),
                Some(ArmTimedOut),
            ],
            None,
        );
        check(&[None, Some(ArmNeverRan)], Some(2));
        check(&[Some(BaselineHadTheSkill)], Some(1));
    }
}
