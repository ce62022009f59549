//! Invalid-pair codes and their precedence (seed: skill-eval-loop, "Hard rules"; E-06, E-41..E-56).
//!
//! Precedence, first match wins: `arm_never_ran` (checked before the mapping is drawn or a model is
//! called; stops the brief) > `arm_api_error` (an arm's run ended on an API error its runner did
//! not get past: no answer to judge; stops the brief, issue 31 item 4) > `write_denied` (the
//! runtime refused an arm's write or command: the deliverable never landed, a setup fault, never
//! a loss; stops the brief, issue 31 item 3) > `arm_timed_out` (stops nothing, res. 15) > `skill_never_loaded`
//! (either side, naming the arm; stops nothing; a verify failure stays in its reason) >
//! `baseline_had_the_skill` (stops the brief) > `skill_named` (an arm names a skill; stops
//! nothing) > `both_arms_failed_verify` (stops on the second in a row). `unreadable_verdict` comes from
//! the judge's reply, after all of these.

use serde::{Deserialize, Serialize};

use super::arm::{ArmPair, ArmRecord, ArmSide, NeverRanShape, never_ran, timed_out};
use super::predicate::never_used_its_skill;

/// Why a sample is invalid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InvalidCode {
    /// An arm's agent never started (a runner fault).
    ArmNeverRan,
    /// An arm's run ended on an API error (HTTP 400, an exhausted rate limit …): no answer.
    ArmApiError,
    /// The runtime's permission rules refused an arm's write or command.
    WriteDenied,
    /// An arm was killed by the clock (exit 124/142).
    ArmTimedOut,
    /// An arm given a skill never loaded it.
    SkillNeverLoaded,
    /// The baseline was offered the skill under test without being handed it (an ambient install).
    BaselineHadTheSkill,
    /// An arm's output names a skill: not a blind verdict.
    SkillNamed,
    /// Both arms failed the brief's verify.
    BothArmsFailedVerify,
    /// The judge did not state a readable verdict.
    UnreadableVerdict,
}

impl InvalidCode {
    /// The code as written in `verdict.json`.
    pub fn as_str(self) -> &'static str {
        match self {
            InvalidCode::ArmNeverRan => "arm_never_ran",
            InvalidCode::ArmApiError => "arm_api_error",
            InvalidCode::WriteDenied => "write_denied",
            InvalidCode::ArmTimedOut => "arm_timed_out",
            InvalidCode::SkillNeverLoaded => "skill_never_loaded",
            InvalidCode::BaselineHadTheSkill => "baseline_had_the_skill",
            InvalidCode::SkillNamed => "skill_named",
            InvalidCode::BothArmsFailedVerify => "both_arms_failed_verify",
            InvalidCode::UnreadableVerdict => "unreadable_verdict",
        }
    }

    /// The code in words, for people (`both arms failed verify`); files and `--json` keep
    /// [`InvalidCode::as_str`].
    pub fn words(self) -> String {
        self.as_str().replace('_', " ")
    }

    /// `invalid: <reason>` for people: the code in words, then the reason unless it already
    /// starts with them (reasons usually do).
    pub fn line(self, reason: &str) -> String {
        let words = self.words();
        if reason.is_empty() {
            format!("invalid: {words}")
        } else if reason.starts_with(&words) {
            format!("invalid: {reason}")
        } else {
            format!("invalid ({words}): {reason}")
        }
    }

    /// Whether this code alone stops the brief on the first sample (E-45, E-55).
    pub fn stops_at_once(self) -> bool {
        matches!(
            self,
            InvalidCode::ArmNeverRan
                | InvalidCode::ArmApiError
                | InvalidCode::WriteDenied
                | InvalidCode::BaselineHadTheSkill
        )
    }
}

impl std::fmt::Display for InvalidCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An invalid verdict: the code, and a reason naming the arm and what was seen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Invalid {
    /// The code.
    pub code: InvalidCode,
    /// The arm it is about, when it is about one.
    pub arm: Option<ArmSide>,
    /// Human reason.
    pub reason: String,
}

/// Everything the judge knows about one arm before any model is called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArmFacts {
    /// `run.json`.
    pub record: ArmRecord,
    /// `final.txt`, when there is one.
    pub final_message: Option<String>,
    /// Whether the brief's verify exited 0 in the arm's work dir.
    pub verify_passed: bool,
}

/// E-45: the check run before the mapping is drawn: the first arm (with, then without) that
/// never ran, in either shape (E-43, E-44).
pub fn check_never_ran(arms: &ArmPair<ArmFacts>) -> Option<Invalid> {
    ArmSide::BOTH.into_iter().find_map(|side| {
        let facts = arms.get(side);
        never_ran(&facts.record, facts.final_message.as_deref()).map(|shape| Invalid {
            code: InvalidCode::ArmNeverRan,
            arm: Some(side),
            reason: match shape {
                NeverRanShape::NoTrace => format!(
                    "the {side} arm never ran: exit {} with an empty transcript and no final message (a runner fault, not the brief)",
                    exit_text(&facts.record)
                ),
                NeverRanShape::RunnerError => format!(
                    "the {side} arm never ran: its final message is the runner's own error ({:?}), exit {}",
                    facts.record.error.as_deref().unwrap_or_default(),
                    exit_text(&facts.record)
                ),
            },
        })
    })
}

fn exit_text(record: &ArmRecord) -> String {
    record
        .exit_code
        .map_or_else(|| record.exit.clone(), |c| c.to_string())
}

/// Classifies a pair in the precedence of the module docs; `None` = valid, judge it.
///
/// `skill` is the candidate's name (what the with-arm was given).
pub fn classify(arms: &ArmPair<ArmFacts>, skill: &str) -> Option<Invalid> {
    if let Some(invalid) = check_never_ran(arms) {
        return Some(invalid);
    }
    if let Some(side) = ArmSide::BOTH
        .into_iter()
        .find(|s| arms.get(*s).record.api_error.is_some())
    {
        let r = &arms.get(side).record;
        let e = r.api_error.as_ref().expect("found above");
        let status = e.status.map(|s| format!("HTTP {s}, ")).unwrap_or_default();
        return Some(Invalid {
            code: InvalidCode::ArmApiError,
            arm: Some(side),
            reason: format!(
                "the {side} arm's {} run ended on an API error ({status}{}): it gave no answer, so the pair measures nothing; fix the runtime's model or API settings and run the brief again",
                r.runtime, e.message
            ),
        });
    }
    if let Some(side) = ArmSide::BOTH
        .into_iter()
        .find(|s| !arms.get(*s).record.permission_denials.is_empty())
    {
        let r = &arms.get(side).record;
        let denied: Vec<String> = r.permission_denials.iter().map(|d| d.human()).collect();
        return Some(Invalid {
            code: InvalidCode::WriteDenied,
            arm: Some(side),
            reason: format!(
                "the {side} arm's {} run was refused: {}; its deliverable never landed, so the pair is no loss and no win (the runtime profile's access settings decide what an arm may write)",
                r.runtime,
                denied.join(", ")
            ),
        });
    }
    let both_failed = !arms.with.verify_passed && !arms.without.verify_passed;
    let verify_note = if both_failed {
        "; both arms also failed verify, so the gate is still unmeasured"
    } else {
        ""
    };
    if let Some(side) = ArmSide::BOTH
        .into_iter()
        .find(|s| timed_out(&arms.get(*s).record))
    {
        let r = &arms.get(side).record;
        return Some(Invalid {
            code: InvalidCode::ArmTimedOut,
            arm: Some(side),
            reason: format!(
                "the {side} arm was killed by the clock after {} ms (exit {}); not a verdict on the brief{verify_note}",
                r.duration_ms,
                exit_text(r)
            ),
        });
    }
    for side in ArmSide::BOTH {
        let r = &arms.get(side).record;
        if never_used_its_skill(&r.skills_installed, r.skills_loaded.as_deref()) {
            return Some(Invalid {
                code: InvalidCode::SkillNeverLoaded,
                arm: Some(side),
                reason: format!(
                    "the {side} arm was given {} and never loaded it{verify_note}",
                    r.skills_installed.join(", ")
                ),
            });
        }
    }
    let baseline = &arms.without.record;
    // Issue 38 item 1: a baseline that loaded the skill under test (or a same-name copy) was not
    // handed had it, whatever its offered inventory says (unknown for Codex and OpenCode).
    if !baseline.skills_installed.iter().any(|s| s == skill)
        && baseline
            .skills_loaded
            .as_ref()
            .is_some_and(|l| l.iter().any(|s| s == skill))
    {
        return Some(Invalid {
            code: InvalidCode::BaselineHadTheSkill,
            arm: Some(ArmSide::Without),
            reason: format!(
                "the without arm loaded a skill named `{skill}` without being handed it (a user-level or project copy reached it); the pair measures nothing"
            ),
        });
    }
    if let Some(offered) = &baseline.skills_offered {
        let ambient: Vec<&String> = offered
            .iter()
            .filter(|s| !baseline.skills_installed.contains(s))
            .collect();
        if ambient.iter().any(|s| s.as_str() == skill) {
            return Some(Invalid {
                code: InvalidCode::BaselineHadTheSkill,
                arm: Some(ArmSide::Without),
                reason: format!(
                    "the without arm was offered `{skill}` without being handed it (an ambient install); the pair measures nothing"
                ),
            });
        }
    }
    let mut names: Vec<&String> = arms
        .with
        .record
        .skills_installed
        .iter()
        .chain(&baseline.skills_installed)
        .collect();
    names.sort();
    names.dedup();
    for side in ArmSide::BOTH {
        let message = arms
            .get(side)
            .final_message
            .as_deref()
            .unwrap_or_default()
            .to_lowercase();
        if let Some(name) = names
            .iter()
            .find(|n| names_word(&message, &n.to_lowercase()))
        {
            return Some(Invalid {
                code: InvalidCode::SkillNamed,
                arm: Some(side),
                reason: format!(
                    "the {side} arm's output names the skill `{name}`; not a blind verdict"
                ),
            });
        }
    }
    if both_failed {
        // Two scripted arms with one answer: the scripted agent followed no instruction of the
        // skill or the brief, so the verify measured the stand-in, not the brief.
        let same_stand_in = ArmSide::BOTH
            .iter()
            .all(|side| arms.get(*side).record.runtime.starts_with("scripted"))
            && arms.with.final_message.is_some()
            && arms.with.final_message == arms.without.final_message;
        let reason = if same_stand_in {
            SAME_STAND_IN_FAILED_VERIFY
        } else {
            "both arms failed verify: no winner is picked over two broken runs (fix the brief, not the loop)"
        };
        return Some(Invalid {
            code: InvalidCode::BothArmsFailedVerify,
            arm: None,
            reason: reason.to_owned(),
        });
    }
    None
}

/// The reason of a both-arms-failed-verify sample whose two scripted arms gave one answer: the
/// verify measured the scripted stand-in, not the brief (a new user was told to fix a sound brief).
pub const SAME_STAND_IN_FAILED_VERIFY: &str = "both arms failed verify with the same answer: the \
     scripted agent follows no instruction but its `scripted:` lines, so both gave a stand-in and the \
     verify measured that, not the brief; give the skill a `scripted: reply TEXT` line (and the \
     brief's prompt one for the baseline), or forge with a model runtime";

/// Whether `name` occurs in `text` as a whole word (not inside a longer name).
fn names_word(text: &str, name: &str) -> bool {
    let is_word = |c: char| c.is_alphanumeric() || c == '-' || c == '_';
    text.match_indices(name).any(|(idx, _)| {
        let before = text[..idx].chars().next_back();
        let after = text[idx + name.len()..].chars().next();
        !before.is_some_and(is_word) && !after.is_some_and(is_word)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arm::tests::record;

    fn facts(side: ArmSide, installed: &[&str], loaded: Option<&[&str]>, verify: bool) -> ArmFacts {
        let mut r = record("passed", Some(0), 100, None);
        r.side = side;
        r.skills_installed = installed.iter().map(|s| s.to_string()).collect();
        r.skills_offered = Some(r.skills_installed.clone());
        r.skills_loaded = loaded.map(|l| l.iter().map(|s| s.to_string()).collect());
        ArmFacts {
            record: r,
            final_message: Some("a real answer".into()),
            verify_passed: verify,
        }
    }

    fn pair(with: ArmFacts, without: ArmFacts) -> ArmPair<ArmFacts> {
        ArmPair { with, without }
    }

    fn code(p: &ArmPair<ArmFacts>) -> Option<InvalidCode> {
        classify(p, "tldr").map(|i| i.code)
    }

    // E-41: two scripted arms that failed verify with one answer say the stand-in is why.
    #[test]
    fn e41_two_scripted_stand_ins_that_fail_verify_say_so() {
        let mut with = facts(ArmSide::With, &["tldr"], Some(&["tldr"]), false);
        let mut without = facts(ArmSide::Without, &[], Some(&[]), false);
        with.record.runtime = "scripted".into();
        without.record.runtime = "scripted".into();
        let invalid = classify(&pair(with.clone(), without.clone()), "tldr").unwrap();
        assert_eq!(invalid.code, InvalidCode::BothArmsFailedVerify);
        assert_eq!(invalid.reason, SAME_STAND_IN_FAILED_VERIFY);
        without.final_message = Some("another answer".into());
        let invalid = classify(&pair(with, without), "tldr").unwrap();
        assert!(
            invalid.reason.contains("fix the brief"),
            "{}",
            invalid.reason
        );
    }

    // E-41
    #[test]
    fn e41_both_arms_failed_verify_is_invalid() {
        let p = pair(
            facts(ArmSide::With, &["tldr"], Some(&["tldr"]), false),
            facts(ArmSide::Without, &[], Some(&[]), false),
        );
        assert_eq!(code(&p), Some(InvalidCode::BothArmsFailedVerify));
        let ok = pair(
            facts(ArmSide::With, &["tldr"], Some(&["tldr"]), true),
            facts(ArmSide::Without, &[], Some(&[]), false),
        );
        assert_eq!(code(&ok), None);
    }

    // E-50
    #[test]
    fn e50_never_loaded_outranks_both_failed_and_keeps_the_verify_note() {
        let p = pair(
            facts(ArmSide::With, &["tldr"], Some(&[]), false),
            facts(ArmSide::Without, &[], Some(&[]), false),
        );
        let invalid = classify(&p, "tldr").unwrap();
        assert_eq!(
            (invalid.code, invalid.arm),
            (InvalidCode::SkillNeverLoaded, Some(ArmSide::With))
        );
        assert!(invalid.reason.contains("verify"), "{}", invalid.reason);
        assert!(!invalid.code.stops_at_once());
    }

    // E-51
    #[test]
    fn e51_rival_never_loaded_names_the_baseline_arm() {
        let p = pair(
            facts(ArmSide::With, &["tldr"], Some(&["tldr"]), true),
            facts(ArmSide::Without, &["incumbent"], Some(&[]), true),
        );
        let invalid = classify(&p, "tldr").unwrap();
        assert_eq!(
            (invalid.code, invalid.arm),
            (InvalidCode::SkillNeverLoaded, Some(ArmSide::Without))
        );
        assert!(
            invalid.reason.contains("without arm") && invalid.reason.contains("incumbent"),
            "{}",
            invalid.reason
        );
    }

    // E-55
    #[test]
    fn e55_ambient_offer_is_baseline_had_the_skill_unknown_is_not_checked() {
        let mut without = facts(ArmSide::Without, &["incumbent"], Some(&["incumbent"]), true);
        without.record.skills_offered = Some(vec!["incumbent".into(), "tldr".into()]);
        let with = facts(ArmSide::With, &["tldr"], Some(&["tldr"]), true);
        assert_eq!(
            code(&pair(with.clone(), without.clone())),
            Some(InvalidCode::BaselineHadTheSkill)
        );
        assert!(InvalidCode::BaselineHadTheSkill.stops_at_once());
        without.record.skills_offered = None;
        assert_eq!(
            code(&pair(with.clone(), without.clone())),
            None,
            "unknown inventory is not an empty one, and not checked"
        );
        let mut handed = facts(ArmSide::Without, &["tldr"], Some(&["tldr"]), true);
        handed.record.skills_offered = Some(vec!["tldr".into()]);
        assert_ne!(
            code(&pair(with, handed)),
            Some(InvalidCode::BaselineHadTheSkill),
            "what the baseline was handed is subtracted"
        );
    }

    // E-06
    #[test]
    fn e06_an_arm_naming_the_skill_is_invalid_not_a_win() {
        let mut with = facts(
            ArmSide::With,
            &["li-post-fede"],
            Some(&["li-post-fede"]),
            true,
        );
        with.final_message = Some("Following the li-post-fede skill, here is the post.".into());
        let p = pair(with.clone(), facts(ArmSide::Without, &[], Some(&[]), true));
        assert_eq!(
            classify(&p, "li-post-fede").map(|i| i.code),
            Some(InvalidCode::SkillNamed)
        );
        with.final_message = Some("Here is the li-post-fedex summary.".into());
        assert_eq!(
            classify(
                &pair(with, facts(ArmSide::Without, &[], Some(&[]), true)),
                "li-post-fede"
            ),
            None
        );
    }

    // E-56
    #[test]
    fn e56_timed_out_arm_is_not_both_failed_verify() {
        let mut with = facts(ArmSide::With, &["tldr"], Some(&["tldr"]), false);
        with.record.exit = "timed_out".into();
        with.record.exit_code = Some(124);
        with.final_message = Some("Now rendering...".into());
        let p = pair(with, facts(ArmSide::Without, &[], Some(&[]), false));
        let invalid = classify(&p, "tldr").unwrap();
        assert_eq!(invalid.code, InvalidCode::ArmTimedOut);
        assert!(!invalid.code.stops_at_once());
    }

    // E-45
    #[test]
    fn e45_never_ran_first_and_stops_at_once() {
        let mut without = facts(ArmSide::Without, &[], Some(&[]), false);
        without.record.exit = "not_runnable".into();
        without.record.exit_code = Some(127);
        without.record.transcript_bytes = 0;
        without.final_message = None;
        let p = pair(facts(ArmSide::With, &["tldr"], Some(&[]), false), without);
        let invalid = check_never_ran(&p).unwrap();
        assert_eq!(
            (invalid.code, invalid.arm),
            (InvalidCode::ArmNeverRan, Some(ArmSide::Without))
        );
        assert_eq!(
            code(&p),
            Some(InvalidCode::ArmNeverRan),
            "outranks skill_never_loaded"
        );
        assert!(invalid.code.stops_at_once());
        assert!(
            invalid.reason.contains("empty transcript"),
            "{}",
            invalid.reason
        );
    }

    // Issue 31 item 4: an arm whose run ended on an API error (an HTTP 400 on the without-arm)
    // makes the sample invalid with its own code, before any judge, and stops the brief; never
    // an adoption "over an empty baseline".
    #[test]
    fn an_arm_that_met_an_api_error_is_invalid_and_stops_the_brief() {
        let mut without = facts(ArmSide::Without, &[], Some(&[]), false);
        without.record.exit = "failed".into();
        without.record.exit_code = Some(1);
        without.record.api_error = Some(skillforge_runner_agent::ApiError::new(
            Some(400),
            "API Error: 400 prompt is too long",
        ));
        without.final_message = None;
        let p = pair(
            facts(ArmSide::With, &["tldr"], Some(&["tldr"]), true),
            without,
        );
        let invalid = classify(&p, "tldr").unwrap();
        assert_eq!(
            (invalid.code, invalid.arm),
            (InvalidCode::ArmApiError, Some(ArmSide::Without))
        );
        assert!(
            invalid.reason.contains("HTTP 400") && invalid.reason.contains("prompt is too long"),
            "{}",
            invalid.reason
        );
        assert!(invalid.code.stops_at_once());
    }

    // Issue 31 item 3: a refused write is named, and the sample is invalid (never a loss).
    #[test]
    fn a_refused_write_is_named_and_the_sample_is_invalid_not_a_loss() {
        let mut with = facts(ArmSide::With, &["tldr"], Some(&["tldr"]), false);
        with.record.permission_denials = vec![skillforge_runner_agent::PermissionDenial {
            tool: "Write".into(),
            path: Some("/w/out.md".into()),
            message: None,
        }];
        let p = pair(with, facts(ArmSide::Without, &[], Some(&[]), true));
        let invalid = classify(&p, "tldr").unwrap();
        assert_eq!(
            (invalid.code, invalid.arm),
            (InvalidCode::WriteDenied, Some(ArmSide::With))
        );
        assert!(
            invalid.reason.contains("Write of `/w/out.md` refused"),
            "{}",
            invalid.reason
        );
    }

    // Issue 38 item 1 (E-55's second line): a baseline that loaded the skill under test without
    // being handed it is baseline_had_the_skill even when its offered inventory is unknown.
    #[test]
    fn e55_a_baseline_that_loaded_the_skill_had_it_whatever_the_inventory() {
        let mut without = facts(ArmSide::Without, &[], Some(&["tldr"]), true);
        without.record.skills_offered = None;
        let p = pair(
            facts(ArmSide::With, &["tldr"], Some(&["tldr"]), true),
            without,
        );
        let invalid = classify(&p, "tldr").unwrap();
        assert_eq!(
            (invalid.code, invalid.arm),
            (InvalidCode::BaselineHadTheSkill, Some(ArmSide::Without))
        );
        assert!(invalid.reason.contains("loaded"), "{}", invalid.reason);
    }
}
