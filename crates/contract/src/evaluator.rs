//! Evaluator shapes shared by the training and candidate packages: profile, checks, judge,
//! scores, failure and gate-rejection packets (facts §1). Every field is Go `omitempty`
//! unless noted; field order = Go struct order.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::omit::{is_false, is_zero_f64, is_zero_i64};

/// The resolved evaluator profile, exported only when the run metadata names an evaluator
/// (seed "Training Package", S-04).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct EvaluatorProfile {
    /// Profile id, e.g. `landing_page_v1`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub profile_id: String,
    /// Task kind, e.g. `vue_landing_page` or `generic`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub task_kind: String,
    /// Artifact contract for artifact-backed tasks.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub artifact_contract: String,
    /// Preview adapter for artifact-backed tasks.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub preview_adapter: String,
    /// Ordered cheap checks.
    #[serde(
        default,
        deserialize_with = "crate::omit::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub checks: Vec<EvaluatorCheckConfig>,
    /// LLM judge configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<EvaluatorJudgeConfig>,
    /// Raw evaluator config the profile came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

/// One evaluator check (facts §1 `EvaluatorCheckConfig`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct EvaluatorCheckConfig {
    /// Check id.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub id: String,
    /// Check type, e.g. `artifact_contract`, `playwright`.
    #[serde(default, rename = "type", skip_serializing_if = "String::is_empty")]
    pub check_type: String,
    /// When to run, e.g. `checks_pass`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub when: String,
    /// Whether failing blocks (omitted when false).
    #[serde(default, skip_serializing_if = "is_false")]
    pub required: bool,
    /// Raw check config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
}

/// LLM judge config (facts §1 `EvaluatorJudgeConfig`); `config` may carry
/// `judge_prompt_templates` and `judge_prompt_version`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct EvaluatorJudgeConfig {
    /// Judge type, e.g. `llm_judge`.
    #[serde(default, rename = "type", skip_serializing_if = "String::is_empty")]
    pub judge_type: String,
    /// When to run, e.g. `checks_pass`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub when: String,
    /// Judge model.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub model: String,
    /// Raw judge config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
}

/// Builds the evaluator profile from an evaluator id (facts §1 `BuildEvaluatorProfile`):
/// `landing_page_v1` / `vue_landing_page_v1` (case-insensitive) → the Vue landing-page profile;
/// any other non-empty id → `{profile_id: <as given>, task_kind: "generic"}` with the default judge.
/// `model` (may be empty) goes on the judge; `config` becomes `metadata`. Returns `None` for an empty id.
pub fn build_evaluator_profile(
    evaluator_id: &str,
    model: &str,
    config: Option<Value>,
) -> Option<EvaluatorProfile> {
    let id = evaluator_id.trim();
    if id.is_empty() {
        return None;
    }
    let judge = EvaluatorJudgeConfig {
        judge_type: "llm_judge".into(),
        when: "checks_pass".into(),
        model: model.trim().to_owned(),
        config: None,
    };
    let lowered = id.to_lowercase();
    let mut profile = if lowered == "landing_page_v1" || lowered == "vue_landing_page_v1" {
        EvaluatorProfile {
            profile_id: "landing_page_v1".into(),
            task_kind: "vue_landing_page".into(),
            artifact_contract: "vue_vite_bundle".into(),
            preview_adapter: "vue_vite".into(),
            checks: vec![
                EvaluatorCheckConfig {
                    id: "required_files".into(),
                    check_type: "artifact_contract".into(),
                    required: true,
                    ..Default::default()
                },
                EvaluatorCheckConfig {
                    id: "render_smoke".into(),
                    check_type: "playwright".into(),
                    when: "checks_pass".into(),
                    ..Default::default()
                },
            ],
            ..Default::default()
        }
    } else {
        EvaluatorProfile {
            profile_id: id.to_owned(),
            task_kind: "generic".into(),
            ..Default::default()
        }
    };
    profile.judge = Some(judge);
    profile.metadata = config;
    Some(profile)
}

/// An evaluator's score for a candidate (facts §1 `EvaluatorScore`). `hard`, `soft` are in
/// `[0,1]` by convention (not enforced); see [`crate::project_signal`] for how they combine.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct EvaluatorScore {
    /// Profile id.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub profile_id: String,
    /// Task kind.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub task_kind: String,
    /// Contract (cheap checks) status.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub contract_status: String,
    /// Quality (judge) status.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub quality_status: String,
    /// Raw alignment with human feedback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub human_feedback_alignment: Option<Value>,
    /// Hard gate: 0 = failed, positive = passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hard: Option<f64>,
    /// Soft quality score.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soft: Option<f64>,
    /// Per-dimension scores, keys sorted.
    #[serde(
        default,
        deserialize_with = "crate::omit::null_as_default",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub dimension_scores: BTreeMap<String, f64>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub fail_reason: String,
    /// Structured failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<EvaluatorFailurePacket>,
    /// Structured gate rejection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate_rejection: Option<GateRejectionPacket>,
    /// Per-stage status.
    #[serde(
        default,
        deserialize_with = "crate::omit::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub stage_status: Vec<EvaluatorStageStatus>,
    /// Raw extra data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
    /// Judge prompt version.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub judge_prompt_version: String,
    /// Judge evaluator id.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub judge_evaluator_id: String,
    /// Judge prompt hash.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub judge_prompt_hash: String,
}

/// Structured evaluator failure (facts §1 `EvaluatorFailurePacket`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct EvaluatorFailurePacket {
    /// Machine reason.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub primary_reason: String,
    /// Reason for humans.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub human_reason: String,
    /// Hint for the optimizer (first section of the projected feedback).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub optimizer_hint: String,
    /// Failed checks.
    #[serde(
        default,
        deserialize_with = "crate::omit::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub failed_checks: Vec<EvaluatorCheckResult>,
    /// Evidence lines.
    #[serde(
        default,
        deserialize_with = "crate::omit::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub evidence: Vec<String>,
    /// Per-stage status.
    #[serde(
        default,
        deserialize_with = "crate::omit::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub stage_status: Vec<EvaluatorStageStatus>,
}

/// One check result inside a failure packet.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct EvaluatorCheckResult {
    /// Check id.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub check: String,
    /// Severity.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub severity: String,
    /// Reason.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Evidence lines.
    #[serde(
        default,
        deserialize_with = "crate::omit::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub evidence: Vec<String>,
    /// Raw extra data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

/// Status of one evaluation stage; `duration_ms` in milliseconds.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct EvaluatorStageStatus {
    /// Stage name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stage: String,
    /// Status.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub status: String,
    /// RFC 3339 start time.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub started_at: String,
    /// RFC 3339 end time.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub finished_at: String,
    /// Duration in milliseconds (omitted when 0).
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub duration_ms: i64,
    /// Raw details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

/// Gate scores of one side (facts §1 `GateRejectionScores`). Go's float fields are plain
/// `omitempty` float64s: 0 is omitted. Python's extra `evaluator_reasoning` is not kept.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct GateRejectionScores {
    /// Hard gate score.
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub hard: f64,
    /// Soft score.
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub soft: f64,
    /// Combined gate score.
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub gate_score: f64,
}

/// Gate rejection (facts §1 `GateRejectionPacket`). `baseline` and `candidate` are always
/// written (as `{}` when empty). Python's extra keys are not kept on re-serialisation.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct GateRejectionPacket {
    /// Rejection type.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub rejection_type: String,
    /// Whether a retry may help (omitted when false).
    #[serde(default, skip_serializing_if = "is_false")]
    pub retryable: bool,
    /// Baseline gate scores.
    #[serde(default)]
    pub baseline: GateRejectionScores,
    /// Candidate gate scores.
    #[serde(default)]
    pub candidate: GateRejectionScores,
    /// Machine reason.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub primary_reason: String,
    /// Reason for humans.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub human_reason: String,
    /// Hint for the optimizer.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub optimizer_hint: String,
    /// Dimensions that failed.
    #[serde(
        default,
        deserialize_with = "crate::omit::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub failed_dimensions: Vec<String>,
    /// Evidence lines.
    #[serde(
        default,
        deserialize_with = "crate::omit::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub evidence: Vec<String>,
    /// Raw human feedback context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub human_feedback_context: Option<Value>,
    /// The patch that was tried.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub attempted_patch: String,
    /// Retry attempts, as a string (Go field type).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub retry_attempts: String,
    /// Suggested next action.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub next_action: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gojson::to_go_json_compact;

    #[test]
    fn landing_page_profile_shape() {
        let profile = build_evaluator_profile("Vue_Landing_Page_V1", "", None).unwrap();
        assert_eq!(
            to_go_json_compact(&profile).unwrap(),
            r#"{"profile_id":"landing_page_v1","task_kind":"vue_landing_page","artifact_contract":"vue_vite_bundle","preview_adapter":"vue_vite","checks":[{"id":"required_files","type":"artifact_contract","required":true},{"id":"render_smoke","type":"playwright","when":"checks_pass"}],"judge":{"type":"llm_judge","when":"checks_pass"}}"#
        );
        let generic = build_evaluator_profile("render-v1", "m1", None).unwrap();
        assert_eq!(generic.task_kind, "generic");
        assert_eq!(generic.profile_id, "render-v1");
        assert!(build_evaluator_profile("  ", "", None).is_none());
    }

    #[test]
    fn gate_rejection_always_writes_both_sides() {
        let packet = GateRejectionPacket::default();
        assert_eq!(
            to_go_json_compact(&packet).unwrap(),
            r#"{"baseline":{},"candidate":{}}"#
        );
    }
}
