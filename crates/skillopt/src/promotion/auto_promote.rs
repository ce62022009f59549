//! The auto-promote decision in exactly the order of facts §7 (seed: SkillOpt, "Promotion policy +
//! notifications (off by default)" › Auto-promote; S-51, S-53..S-60, S-63; resolutions 6).
//!
//! [`decide`] is pure: it reads the `[skillopt]` guardrail keys as given (unset ≠ 0) and the
//! evidence the caller could read, and says notify-only (with the step that stopped it) or
//! promote (directly, or to a canary with its sample). Every unset or unreadable input fails safe
//! to notify-only; nothing here promotes on evidence it could not read.

use serde::Serialize;

use crate::ab::agreement::{Agreement, JudgeGate, judge_name};

/// The `[skillopt]` auto-promote keys, each `None` when absent from the config (S-53, S-55).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Guardrails {
    /// `auto_promote` (absent = false: manual, S-53).
    pub auto_promote: Option<bool>,
    /// `auto_promote_min_samples` (absent = never promote, S-55).
    pub min_samples: Option<u64>,
    /// `auto_promote_min_score` (absent = never promote, S-57).
    pub min_score: Option<f64>,
    /// `auto_promote_require_external_ci`.
    pub require_external_ci: Option<bool>,
    /// `auto_promote_require_measured_judge`: true ⇒ every judge whose `--judge-only` picks
    /// count toward the candidate must be measured under [`Guardrails::judge_gate`] (S-59 step 3,
    /// issue 34 item 12).
    pub require_measured_judge: Option<bool>,
    /// The measured-judge gate (`judge_kappa_floor`, `judge_min_paired_picks`); `None` when
    /// unset (or invalid): then no judge is measured.
    pub judge_gate: Option<JudgeGate>,
    /// `auto_promote_canary`.
    pub canary: Option<bool>,
    /// `auto_promote_canary_sample` in (0,1].
    pub canary_sample: Option<f64>,
    /// `auto_promote_min_confidence` (absent = ignored, S-63).
    pub min_confidence: Option<f64>,
}

/// What the auto-trace run `auto-trace:<candidate>` says (S-54, resolutions 6).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AutoTraceEvidence {
    /// `feedback_events` in the run, all legs.
    pub samples: u64,
    /// At least one event with source `auto-trace`, reviewer `gitmoot-auto` and the real-CI
    /// phrase (S-58).
    pub has_real_ci_positive: bool,
}

/// The bandit's confidence at the notify seam (S-63).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BanditEvidence {
    /// P(challenger > champion).
    pub probability: f64,
    /// Pulls behind it (the challenger arm's).
    pub pulls: u64,
}

/// Everything [`decide`] reads besides the config.
#[derive(Debug, Clone, PartialEq)]
pub struct Evidence {
    /// The auto-trace run, or why it could not be read (⇒ notify-only, S-54).
    pub feedback: Result<AutoTraceEvidence, String>,
    /// The candidate's `summary.score`.
    pub score: Option<f64>,
    /// Why the candidate has no score, as its package says (`summary.metadata.score_unavailable`,
    /// issue 37 item 6): with `auto_promote_canary` on such a candidate passes the score floor to
    /// a canary, whose outcomes decide it; it is never promoted directly without a score.
    pub score_unavailable: Option<String>,
    /// The bandit confidence, when the arms exist.
    pub confidence: Option<BanditEvidence>,
    /// `Some((base, champion))` when the candidate was built on a version that is no longer the
    /// champion: promoting or canarying it would throw away what the champion changed since
    /// (issue 37 item 2).
    pub stale_base: Option<(String, String)>,
    /// The judges whose `--judge-only` A/B picks count toward the candidate, each with its
    /// agreement with the humans; read only with `auto_promote_require_measured_judge` on
    /// (empty otherwise, and when no judge-only pick exists).
    pub judges: Vec<JudgeEvidence>,
}

/// One judge behind the candidate's `--judge-only` picks (S-59 step 3).
#[derive(Debug, Clone, PartialEq)]
pub struct JudgeEvidence {
    /// Its runtime and model (`""`: not named); `None` when the A/B did not record which judge
    /// it was (no gate can measure it).
    pub judge: Option<(String, String)>,
    /// Its agreement with the humans (no paired picks ⇒ `n` 0).
    pub agreement: Agreement,
}

impl JudgeEvidence {
    /// `Ok` when the judge is measured under `gate`, else why not, naming the judge.
    pub fn measured(&self, gate: JudgeGate) -> Result<(), String> {
        let Some((runtime, model)) = &self.judge else {
            return Err(
                "a --judge-only pick whose judge was not recorded (it cannot be measured)"
                    .to_owned(),
            );
        };
        self.agreement
            .measured(gate.floor, gate.min_picks)
            .map_err(|why| {
                format!(
                    "the judge {} is not measured: {why}",
                    judge_name(runtime, model)
                )
            })
    }
}

/// Why the decision stopped at notify-only: the step of facts §7 and a one-line reason.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stop {
    /// 1..=9, the step of facts §7 that stopped it; 10 when every guardrail held but the
    /// candidate's base is not the champion any more; [`PACE_STEP`] when the PACE gate did not
    /// commit; [`GATE_STEP`] when the replay gate has not accepted it.
    pub step: u8,
    /// Human-readable, redacted (no content).
    pub reason: String,
}

impl Stop {
    /// The guardrail that stopped the candidate, by its config key (or what it checks), for
    /// events: `candidate.awaiting_promotion` is sent again when it changes (issue 37 item 11).
    pub fn guardrail(&self) -> &'static str {
        match self.step {
            1 => "auto_promote",
            2 => "auto_trace_feedback",
            3 => "auto_promote_require_measured_judge",
            4 => "auto_promote_canary_sample",
            5 => "auto_promote_min_samples_unset",
            6 => "auto_promote_min_samples",
            7 => "auto_promote_min_score",
            8 => "auto_promote_require_external_ci",
            9 => "auto_promote_min_confidence",
            PACE_STEP => skillforge_contract::pace::PACE_BLOCKED,
            GATE_STEP => crate::gate::GATE_BLOCKED,
            _ => "rebase_needed",
        }
    }
}

/// The step of a promotion every guardrail passed but the PACE gate did not commit (facts §7:
/// after the guardrails, on the promote path, `pace_enabled` → `pace_blocked`; issue 34 item 10).
pub const PACE_STEP: u8 = 11;

/// The step of a promotion every guardrail (and PACE, when on) passed but that has no accepted
/// replay gate run against the current champion (facts §7: `gate_enabled` → `gate_blocked`;
/// issue 34 item 11).
pub const GATE_STEP: u8 = 12;

/// What [`Decision::guardrail`] says when no guardrail stopped the candidate.
pub const PASSED: &str = "passed";

/// The outcome.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Decision {
    /// Notify only; the candidate stays pending.
    Notify(Stop),
    /// Every guardrail holds: promote through the normal path, to a canary with this sample
    /// when `auto_promote_canary` is on.
    Promote {
        /// The canary's traffic fraction, `None` for a direct promote.
        canary_sample: Option<f64>,
    },
}

impl Decision {
    /// The guardrail that stopped it ([`Stop::guardrail`]), or [`PASSED`].
    pub fn guardrail(&self) -> &'static str {
        match self {
            Decision::Notify(stop) => stop.guardrail(),
            Decision::Promote { .. } => PASSED,
        }
    }
}

fn stop(step: u8, reason: impl Into<String>) -> Decision {
    Decision::Notify(Stop {
        step,
        reason: reason.into(),
    })
}

fn valid_fraction(x: f64) -> bool {
    x.is_finite() && x > 0.0 && x <= 1.0
}

/// Facts §7, steps 1–10, in order. Each `return` is one step; the first that fails wins.
pub fn decide(g: &Guardrails, e: &Evidence) -> Decision {
    // 1
    if g.auto_promote != Some(true) {
        return stop(1, "auto_promote is off (manual promotion)");
    }
    // 2
    let feedback = match &e.feedback {
        Ok(f) => *f,
        Err(why) => return stop(2, format!("auto-trace feedback unavailable: {why}")),
    };
    // 3: judge-only picks count only from measured judges (issue 34 item 12)
    if g.require_measured_judge == Some(true) {
        let Some(gate) = g.judge_gate else {
            return stop(
                3,
                "auto_promote_require_measured_judge is on but no judge can be measured: set judge_kappa_floor and judge_min_paired_picks (`skillforge judge agreement` checks them)",
            );
        };
        if let Some(why) = e.judges.iter().find_map(|j| j.measured(gate).err()) {
            return stop(
                3,
                format!(
                    "auto_promote_require_measured_judge: the candidate's --judge-only picks count, and {why}"
                ),
            );
        }
    }
    // 4
    let canary_on = g.canary == Some(true);
    if canary_on && !g.canary_sample.is_some_and(valid_fraction) {
        return stop(
            4,
            "auto_promote_canary is on but auto_promote_canary_sample is unset or outside (0,1]",
        );
    }
    // 5
    let Some(min_samples) = g.min_samples else {
        return stop(5, "auto_promote_min_samples is unset (never read as 0)");
    };
    let mode_b = g.min_confidence.is_some() && e.confidence.is_some();
    // 6
    if !mode_b {
        // A/B picks exist but count only on the A/B path: say so rather than "no evidence".
        let picks_unused = match (&g.min_confidence, &e.confidence) {
            (None, Some(c)) if c.pulls > 0 => format!(
                "; its {} A/B pick(s) count only with auto_promote_min_confidence set",
                c.pulls
            ),
            _ => String::new(),
        };
        if feedback.samples == 0 {
            return stop(
                6,
                format!(
                    "no auto-trace feedback samples (zero evidence never promotes){picks_unused}"
                ),
            );
        }
        if feedback.samples < min_samples {
            return stop(
                6,
                format!(
                    "{} auto-trace samples < auto_promote_min_samples {min_samples}{picks_unused}",
                    feedback.samples
                ),
            );
        }
    }
    // 7
    let Some(min_score) = g.min_score.filter(|s| s.is_finite()) else {
        return stop(7, "auto_promote_min_score is unset");
    };
    match e.score {
        // The path that needs no score: the bandit's (S-63), or a canary's outcomes for a
        // candidate whose package says why it has none (issue 37 item 6).
        None if mode_b => {}
        None if canary_on && e.score_unavailable.is_some() => {}
        None => {
            return stop(
                7,
                match &e.score_unavailable {
                    Some(why) => format!(
                        "the candidate has no score ({why}); with auto_promote_canary on its canary outcomes decide it"
                    ),
                    None => "the candidate has no score".to_owned(),
                },
            );
        }
        Some(score) if !(score >= min_score) => {
            return stop(
                7,
                format!("score {score} < auto_promote_min_score {min_score}"),
            );
        }
        Some(_) => {}
    }
    // 8
    if g.require_external_ci == Some(true) && !feedback.has_real_ci_positive {
        return stop(
            8,
            "auto_promote_require_external_ci: no auto-trace event records a merge that passed real external CI",
        );
    }
    // 9
    if let Some(floor) = g.min_confidence {
        let Some(c) = e.confidence else {
            return stop(
                9,
                "auto_promote_min_confidence is set but there is no bandit confidence",
            );
        };
        if c.pulls == 0 || c.pulls < min_samples {
            return stop(
                9,
                format!(
                    "bandit confidence rests on {} pulls < auto_promote_min_samples {min_samples}",
                    c.pulls
                ),
            );
        }
        if !(c.probability >= floor) {
            // Enough digits that a value just under the floor never prints as the floor.
            let shown = [3, 6, 9]
                .iter()
                .map(|d| format!("{:.*}", *d, c.probability))
                .find(|t| t.parse::<f64>().is_ok_and(|v| v < floor))
                .unwrap_or_else(|| c.probability.to_string());
            return stop(
                9,
                format!("P(challenger > champion) {shown} < auto_promote_min_confidence {floor}"),
            );
        }
    }
    // 10: every guardrail holds; a candidate built on an older champion is refused (issue 37 item 2)
    if let Some((base, champion)) = &e.stale_base {
        return stop(
            10,
            format!(
                "rebase needed: the candidate was built on {base}, but {champion} is the champion now"
            ),
        );
    }
    Decision::Promote {
        canary_sample: if canary_on { g.canary_sample } else { None },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A config where every guardrail passes for [`passing`] evidence.
    fn open() -> Guardrails {
        Guardrails {
            auto_promote: Some(true),
            min_samples: Some(5),
            min_score: Some(0.7),
            ..Guardrails::default()
        }
    }

    fn passing() -> Evidence {
        Evidence {
            feedback: Ok(AutoTraceEvidence {
                samples: 5,
                has_real_ci_positive: true,
            }),
            score: Some(0.7),
            score_unavailable: None,
            confidence: None,
            stale_base: None,
            judges: vec![],
        }
    }

    fn step_of(d: &Decision) -> u8 {
        match d {
            Decision::Notify(s) => s.step,
            Decision::Promote { .. } => 10,
        }
    }

    #[test]
    fn every_guardrail_met_promotes_directly() {
        assert_eq!(
            decide(&open(), &passing()),
            Decision::Promote {
                canary_sample: None
            }
        );
    }

    // S-53
    #[test]
    fn s53_step1_auto_promote_absent_or_false_is_manual() {
        for flag in [None, Some(false)] {
            let d = decide(
                &Guardrails {
                    auto_promote: flag,
                    ..open()
                },
                &passing(),
            );
            assert_eq!(step_of(&d), 1, "{flag:?}");
        }
    }

    // S-54
    #[test]
    fn s54_step2_unreadable_feedback_notifies() {
        let e = Evidence {
            feedback: Err("database is locked".into()),
            ..passing()
        };
        assert_eq!(step_of(&decide(&open(), &e)), 2);
    }

    // S-59 (issue 34 item 12): with auto_promote_require_measured_judge on, a candidate whose
    // --judge-only picks came from a judge not measured (too few paired picks, κ's lower bound
    // under the floor, no judge recorded) or with no gate to measure it stops at step 3; a
    // measured judge, or no judge-only pick, passes; off never reads the judges
    #[test]
    fn s59_step3_require_measured_judge_blocks_unmeasured_judges() {
        use crate::ab::pick::Role::{Challenger as X, Champion as C};
        let gate = JudgeGate {
            floor: 0.2,
            min_picks: 10,
        };
        let required = Guardrails {
            require_measured_judge: Some(true),
            judge_gate: Some(gate),
            ..open()
        };
        let judge = |picks: &[(crate::ab::pick::Role, crate::ab::pick::Role)]| JudgeEvidence {
            judge: Some(("codex".into(), "gpt-5".into())),
            agreement: Agreement::of(picks),
        };
        let agreeing: Vec<_> = [(C, C); 5].into_iter().chain([(X, X); 5]).collect();
        let coin: Vec<_> = [(C, C), (C, X), (X, C), (X, X)].repeat(3);
        let with = |judges: Vec<JudgeEvidence>| Evidence {
            judges,
            ..passing()
        };
        let reason = |d: Decision| match d {
            Decision::Notify(s) if s.step == 3 => s.reason,
            other => panic!("not stopped at step 3: {other:?}"),
        };
        // no judge-only pick: nothing to measure
        assert_eq!(step_of(&decide(&required, &passing())), 10);
        // measured: 10 of 10 agree, κ 1
        assert_eq!(
            step_of(&decide(&required, &with(vec![judge(&agreeing)]))),
            10
        );
        // too few paired picks
        let few = reason(decide(&required, &with(vec![judge(&agreeing[..9])])));
        assert!(
            few.contains("the judge codex (model gpt-5) is not measured")
                && few.contains(
                    "9 paired pick(s) with a human, fewer than judge_min_paired_picks 10"
                ),
            "{few}"
        );
        // enough picks, κ 0: its lower bound is under the floor
        let low = reason(decide(
            &required,
            &with(vec![judge(&agreeing), judge(&coin)]),
        ));
        assert!(low.contains("below judge_kappa_floor 0.2"), "{low}");
        // a judge row without its juror
        let unknown = JudgeEvidence {
            judge: None,
            agreement: Agreement::of(&[]),
        };
        assert!(reason(decide(&required, &with(vec![unknown]))).contains("not recorded"));
        // no gate configured: nothing can be measured, even with no judge-only pick
        let no_gate = Guardrails {
            judge_gate: None,
            ..required
        };
        assert!(
            reason(decide(&no_gate, &passing()))
                .contains("set judge_kappa_floor and judge_min_paired_picks")
        );
        // off (unset or false): the judges are not read
        for flag in [None, Some(false)] {
            let off = Guardrails {
                require_measured_judge: flag,
                ..required
            };
            assert_eq!(step_of(&decide(&off, &with(vec![judge(&coin)]))), 10);
        }
    }

    // S-60
    #[test]
    fn s60_step4_canary_needs_a_sample_in_0_1() {
        for sample in [None, Some(0.0), Some(1.5), Some(f64::NAN), Some(-0.1)] {
            let g = Guardrails {
                canary: Some(true),
                canary_sample: sample,
                ..open()
            };
            assert_eq!(step_of(&decide(&g, &passing())), 4, "{sample:?}");
        }
        let g = Guardrails {
            canary: Some(true),
            canary_sample: Some(0.1),
            ..open()
        };
        assert_eq!(
            decide(&g, &passing()),
            Decision::Promote {
                canary_sample: Some(0.1)
            }
        );
        let g = Guardrails {
            canary: Some(true),
            canary_sample: Some(1.0),
            ..open()
        };
        assert_eq!(
            decide(&g, &passing()),
            Decision::Promote {
                canary_sample: Some(1.0)
            }
        );
        let g = Guardrails {
            canary: Some(false),
            canary_sample: Some(0.1),
            ..open()
        };
        assert_eq!(
            decide(&g, &passing()),
            Decision::Promote {
                canary_sample: None
            },
            "canary off ⇒ direct"
        );
    }

    // S-55
    #[test]
    fn s55_step5_min_samples_unset_never_promotes() {
        let g = Guardrails {
            min_samples: None,
            ..open()
        };
        let e = Evidence {
            feedback: Ok(AutoTraceEvidence {
                samples: 1_000,
                has_real_ci_positive: true,
            }),
            ..passing()
        };
        assert_eq!(step_of(&decide(&g, &e)), 5);
    }

    // S-56
    #[test]
    fn s56_step6_zero_samples_never_promote_and_the_floor_is_inclusive() {
        let check = |min: u64, samples: u64, expected: u8| {
            let g = Guardrails {
                min_samples: Some(min),
                ..open()
            };
            let e = Evidence {
                feedback: Ok(AutoTraceEvidence {
                    samples,
                    has_real_ci_positive: true,
                }),
                ..passing()
            };
            assert_eq!(
                step_of(&decide(&g, &e)),
                expected,
                "min {min} samples {samples}"
            );
        };
        check(0, 0, 6);
        check(5, 4, 6);
        check(5, 5, 10);
        // A/B picks off the A/B path (no min_confidence): still no evidence here, and it says why.
        let g = Guardrails {
            min_samples: Some(3),
            ..open()
        };
        let e = Evidence {
            feedback: Ok(AutoTraceEvidence {
                samples: 0,
                has_real_ci_positive: false,
            }),
            confidence: Some(BanditEvidence {
                probability: 0.9,
                pulls: 13,
            }),
            ..passing()
        };
        match decide(&g, &e) {
            Decision::Notify(s) => assert!(
                s.step == 6
                    && s.reason.contains(
                        "its 13 A/B pick(s) count only with auto_promote_min_confidence set"
                    ),
                "{s:?}"
            ),
            other => panic!("{other:?}"),
        }
    }

    // S-57
    #[test]
    fn s57_step7_score_floor() {
        let check = |floor: Option<f64>, score: Option<f64>, expected: u8| {
            let g = Guardrails {
                min_score: floor,
                ..open()
            };
            let e = Evidence { score, ..passing() };
            assert_eq!(
                step_of(&decide(&g, &e)),
                expected,
                "floor {floor:?} score {score:?}"
            );
        };
        check(Some(0.7), Some(0.7), 10);
        check(Some(0.7), Some(0.69), 7);
        check(Some(0.7), None, 7);
        check(None, Some(0.9), 7);
        check(Some(0.7), Some(f64::NAN), 7);
    }

    // S-57 (issue 37 item 6): a candidate whose package says why it has no score is not stopped
    // by the score floor when a canary will measure it; without a canary, or without a reason, it is.
    #[test]
    fn s57_a_candidate_without_a_score_goes_to_a_canary_only_when_its_package_says_why() {
        let why = Some("distill measures nothing".to_owned());
        let canary = Guardrails {
            canary: Some(true),
            canary_sample: Some(0.2),
            ..open()
        };
        let scoreless = |reason: Option<String>| Evidence {
            score: None,
            score_unavailable: reason,
            ..passing()
        };
        assert_eq!(
            decide(&canary, &scoreless(why.clone())),
            Decision::Promote {
                canary_sample: Some(0.2)
            }
        );
        assert_eq!(
            step_of(&decide(&canary, &scoreless(None))),
            7,
            "no score and no reason"
        );
        let Decision::Notify(stop) = decide(&open(), &scoreless(why.clone())) else {
            panic!("promoted directly without a score")
        };
        assert_eq!(stop.step, 7);
        assert!(
            stop.reason.contains("distill measures nothing")
                && stop.reason.contains("auto_promote_canary"),
            "{}",
            stop.reason
        );
        let unset = Guardrails {
            min_score: None,
            ..canary
        };
        assert_eq!(
            step_of(&decide(&unset, &scoreless(why))),
            7,
            "S-57: the floor unset never promotes"
        );
    }

    // S-58
    #[test]
    fn s58_step8_external_ci_needs_a_real_ci_positive() {
        let g = Guardrails {
            require_external_ci: Some(true),
            ..open()
        };
        let e = Evidence {
            feedback: Ok(AutoTraceEvidence {
                samples: 5,
                has_real_ci_positive: false,
            }),
            ..passing()
        };
        assert_eq!(step_of(&decide(&g, &e)), 8);
        assert_eq!(step_of(&decide(&g, &passing())), 10);
    }

    // S-63 on the auto-trace path (no bandit confidence, or confidence gated by step 9 after the
    // auto-trace floor): min_confidence is an additional requirement.
    #[test]
    fn s63_auto_trace_path_min_confidence_is_an_additional_requirement() {
        let g = Guardrails {
            min_confidence: Some(0.95),
            min_samples: Some(10),
            ..open()
        };
        let with = |p: f64, pulls: u64| Evidence {
            confidence: Some(BanditEvidence {
                probability: p,
                pulls,
            }),
            ..passing()
        };
        assert_eq!(step_of(&decide(&g, &with(0.97, 2))), 9, "thin");
        assert_eq!(step_of(&decide(&g, &with(0.90, 100))), 9, "low");
        assert_eq!(
            step_of(&decide(
                &g,
                &Evidence {
                    confidence: None,
                    ..passing()
                }
            )),
            6,
            "nil: not Mode B, 5 samples < 10"
        );
        let nil_enough = Evidence {
            feedback: Ok(AutoTraceEvidence {
                samples: 10,
                has_real_ci_positive: true,
            }),
            confidence: None,
            ..passing()
        };
        assert_eq!(
            step_of(&decide(&g, &nil_enough)),
            9,
            "nil confidence ⇒ notify"
        );
        assert_eq!(
            decide(&g, &with(0.97, 100)),
            Decision::Promote {
                canary_sample: None
            }
        );
        // Unset ⇒ ignored: the same decision as without any confidence.
        let unset = Guardrails {
            min_confidence: None,
            ..open()
        };
        assert_eq!(decide(&unset, &with(0.1, 1)), decide(&unset, &passing()));
    }

    // S-63 on the Mode B (bandit) path, as facts §7 and resolutions 23 say: with
    // min_confidence set and a confidence present, the bandit's pulls replace the auto-trace
    // sample floor and a missing score does not stop the decision.
    #[test]
    fn s63_mode_b_path_pulls_replace_the_sample_floor_and_no_score_is_needed() {
        let g = Guardrails {
            min_confidence: Some(0.95),
            min_samples: Some(10),
            ..open()
        };
        let with = |p: f64, pulls: u64| Evidence {
            confidence: Some(BanditEvidence {
                probability: p,
                pulls,
            }),
            ..passing()
        };
        let mode_b = Evidence {
            feedback: Ok(AutoTraceEvidence::default()),
            score: None,
            ..with(0.97, 100)
        };
        assert_eq!(
            decide(&g, &mode_b),
            Decision::Promote {
                canary_sample: None
            }
        );
        let zero = Guardrails {
            min_samples: Some(0),
            ..g
        };
        assert_eq!(
            step_of(&decide(&zero, &Evidence { ..with(0.99, 0) })),
            9,
            "zero pulls never promote"
        );
    }

    /// The steps run in the facts' order: with everything wrong at once, each fix moves the stop
    /// to the next step.
    #[test]
    fn steps_run_in_the_facts_order() {
        let mut g = Guardrails {
            auto_promote: None,
            min_samples: None,
            min_score: None,
            require_external_ci: Some(true),
            require_measured_judge: Some(true),
            canary: Some(true),
            canary_sample: None,
            min_confidence: Some(0.9),
            judge_gate: None,
        };
        let mut e = Evidence {
            feedback: Err("x".into()),
            score: None,
            score_unavailable: None,
            confidence: None,
            stale_base: None,
            judges: vec![],
        };
        let mut steps = vec![step_of(&decide(&g, &e))];
        g.auto_promote = Some(true);
        steps.push(step_of(&decide(&g, &e)));
        e.feedback = Ok(AutoTraceEvidence::default());
        steps.push(step_of(&decide(&g, &e)));
        g.require_measured_judge = None;
        steps.push(step_of(&decide(&g, &e)));
        g.canary_sample = Some(0.2);
        steps.push(step_of(&decide(&g, &e)));
        g.min_samples = Some(3);
        steps.push(step_of(&decide(&g, &e)));
        e.feedback = Ok(AutoTraceEvidence {
            samples: 3,
            has_real_ci_positive: false,
        });
        steps.push(step_of(&decide(&g, &e)));
        g.min_score = Some(0.5);
        e.score = Some(0.6);
        steps.push(step_of(&decide(&g, &e)));
        e.feedback = Ok(AutoTraceEvidence {
            samples: 3,
            has_real_ci_positive: true,
        });
        steps.push(step_of(&decide(&g, &e)));
        e.confidence = Some(BanditEvidence {
            probability: 0.95,
            pulls: 3,
        });
        steps.push(step_of(&decide(&g, &e)));
        assert_eq!(steps, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        assert_eq!(
            decide(&g, &e),
            Decision::Promote {
                canary_sample: Some(0.2)
            }
        );
    }

    // Issue 37 item 2: a candidate built on v1 while v3 is champion is refused, naming both.
    #[test]
    fn a_candidate_on_a_stale_base_is_refused_naming_both_versions() {
        let e = Evidence {
            stale_base: Some(("planner@v1".into(), "planner@v3".into())),
            ..passing()
        };
        let d = decide(&open(), &e);
        let Decision::Notify(stop) = d else {
            panic!("{d:?}")
        };
        assert_eq!(stop.step, 10);
        assert!(
            stop.reason.contains("rebase needed")
                && stop.reason.contains("planner@v1")
                && stop.reason.contains("planner@v3"),
            "{}",
            stop.reason
        );
        assert!(matches!(
            decide(&open(), &passing()),
            Decision::Promote { .. }
        ));
    }
}
