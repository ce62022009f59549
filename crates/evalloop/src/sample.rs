//! A sample's verdict (`s<n>/verdict.json`): what the judge stage decided about one pair, with
//! the three stored facts per arm (installed, offered, loaded) the aggregate and gate read.

use serde::{Deserialize, Serialize};

use super::arm::{ArmPair, ArmRecord, ArmSide};
use super::invalid::{Invalid, InvalidCode};
use super::mapping::Mapping;
use super::verdict::JudgeReading;

/// File name of a sample's verdict.
pub const VERDICT_FILE: &str = "verdict.json";

/// Who won a valid sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Winner {
    /// The candidate arm.
    With,
    /// The baseline arm.
    Without,
    /// A stated tie.
    Tie,
}

/// Per-arm skill facts as judged (`"unknown"` = not recorded).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkillFacts {
    /// Installed for or handed to the arm.
    pub installed: Vec<String>,
    /// Offered, per the transcript.
    #[serde(with = "super::arm::known_or_unknown")]
    pub offered: Option<Vec<String>>,
    /// Loaded, per the transcript.
    #[serde(with = "super::arm::known_or_unknown")]
    pub loaded: Option<Vec<String>>,
}

/// `verdict.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SampleVerdict {
    /// Sample number, from 1.
    pub sample: u32,
    /// Whether it counts toward the majority.
    pub valid: bool,
    /// Why not, when invalid.
    pub invalid_code: Option<InvalidCode>,
    /// The arm an invalid code is about.
    #[serde(default)]
    pub invalid_arm: Option<ArmSide>,
    /// Human reason (the judge's, or why the pair is invalid).
    pub reason: String,
    /// The winner of a valid sample (de-blinded through the mapping).
    pub winner: Option<Winner>,
    /// The mapping, when one was drawn (never before the judge stage).
    #[serde(default)]
    pub mapping: Option<Mapping>,
    /// Whether each arm passed the brief's verify.
    pub verify_passed: ArmPair<bool>,
    /// Tool errors per arm; `None` = the runtime records none.
    pub tool_errors: ArmPair<Option<u32>>,
    /// What each arm was given, offered and loaded. `None` in verdicts written before the field
    /// existed: not an empty baseline (E-53).
    #[serde(default)]
    pub skills: Option<ArmPair<SkillFacts>>,
    /// Tokens and cost the judge's transcript reported; absent = unknown or no judge ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_usage: Option<skillforge_runner_agent::Usage>,
    /// The judge (runtime, model) whose reply this verdict de-blinds; absent when no judge ran
    /// (a pair invalid before the judge) and in verdicts written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<AgentSetup>,
}

/// An agent as a forge ran it: the runtime profile and the model asked for (`None` = the
/// runtime's default). A forge records one for its arms and one for its judge
/// ([`crate::forge::ForgeState`]); a verdict and a ledger row name the judge that decided.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentSetup {
    /// Runtime profile (`claude`, `codex`, `opencode`, `scripted`, …).
    pub runtime: String,
    /// Model asked for; `None` = the runtime's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

impl AgentSetup {
    /// `runtime` with `model` when one was asked for: `scripted (model scripted-cheap)`.
    pub fn words(&self) -> String {
        match &self.model {
            Some(m) => format!("{} (model {m})", self.runtime),
            None => format!("{} (its default model)", self.runtime),
        }
    }
}

impl SampleVerdict {
    /// The verdict of a pair found invalid before (or without) the judge.
    pub fn invalid(
        sample: u32,
        invalid: &Invalid,
        records: &ArmPair<ArmRecord>,
        verify: ArmPair<bool>,
    ) -> Self {
        Self {
            sample,
            valid: false,
            invalid_code: Some(invalid.code),
            invalid_arm: invalid.arm,
            reason: invalid.reason.clone(),
            winner: None,
            mapping: None,
            verify_passed: verify,
            tool_errors: ArmPair {
                with: records.with.tool_errors,
                without: records.without.tool_errors,
            },
            skills: Some(skill_facts(records)),
            judge_usage: None,
            judge: None,
        }
    }

    /// The verdict from the judge's reading, de-blinded through `mapping`; an unreadable reply is
    /// invalid (`unreadable_verdict`), never a tie (E-07).
    pub fn judged(
        sample: u32,
        reading: &JudgeReading,
        mapping: Mapping,
        records: &ArmPair<ArmRecord>,
        verify: ArmPair<bool>,
    ) -> Self {
        let (valid, code, reason, winner) = match reading {
            JudgeReading::Pick { slot, reason } => {
                let w = match mapping.arm(*slot) {
                    ArmSide::With => Winner::With,
                    ArmSide::Without => Winner::Without,
                };
                (true, None, reason.clone(), Some(w))
            }
            JudgeReading::Tie { reason } => (true, None, reason.clone(), Some(Winner::Tie)),
            JudgeReading::Unreadable(why) => (
                false,
                Some(InvalidCode::UnreadableVerdict),
                format!("unreadable verdict: {why}"),
                None,
            ),
        };
        Self {
            sample,
            valid,
            invalid_code: code,
            invalid_arm: None,
            reason,
            winner,
            mapping: Some(mapping),
            verify_passed: verify,
            tool_errors: ArmPair {
                with: records.with.tool_errors,
                without: records.without.tool_errors,
            },
            skills: Some(skill_facts(records)),
            judge_usage: None,
            judge: None,
        }
    }
}

/// The three stored facts per arm, from the arms' records.
pub fn skill_facts(records: &ArmPair<ArmRecord>) -> ArmPair<SkillFacts> {
    let f = |r: &ArmRecord| SkillFacts {
        installed: r.skills_installed.clone(),
        offered: r.skills_offered.clone(),
        loaded: r.skills_loaded.clone(),
    };
    ArmPair {
        with: f(&records.with),
        without: f(&records.without),
    }
}
