//! The training package skillforge exports for external optimizers
//! (`kind: gitmoot-skillopt-training-package`, `contract_version: 1`; seed "Training Package",
//! "Ranked Exploration Export"; facts §1). Field order and `omitempty` mirror the Go structs so
//! [`crate::serialize_package`] writes the Go exporter's bytes.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::evaluator::EvaluatorProfile;
use crate::omit::{is_zero_f64, is_zero_i64};
use crate::template::Metadata;

/// `kind` of a training package (S-01).
pub const TRAINING_PACKAGE_KIND: &str = "gitmoot-skillopt-training-package";
/// The only contract version (S-01: every additive feature keeps 1).
pub const CONTRACT_VERSION: i64 = 1;

/// The exported training package. `items`, `artifacts` and `feedback_events` are always written
/// as arrays (`[]` when empty; the Python optimizer crashes on `null`); other optional sections
/// are left out when empty (S-02: no `binary_verdicts` key without verdicts; S-04: no
/// `feedback_context`/`evaluator_profile` unless backed). The projection of
/// [`crate::project_signal`] is never a field here (S-06).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TrainingPackage {
    /// Always [`TRAINING_PACKAGE_KIND`].
    pub kind: String,
    /// Always [`CONTRACT_VERSION`].
    pub contract_version: i64,
    /// The run's workflow mode (explore|refine|distill|validate); S-03: only here, never in
    /// `evaluator_config.mode`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub training_mode: String,
    /// The template version under review.
    pub template: TemplateSnapshot,
    /// The eval run.
    pub eval_run: EvalRun,
    /// Review items, in store order.
    #[serde(deserialize_with = "crate::omit::null_as_default")]
    pub items: Vec<EvalItem>,
    /// Artifact manifests, sorted by id.
    #[serde(deserialize_with = "crate::omit::null_as_default")]
    pub artifacts: Vec<ArtifactRef>,
    /// A/B feedback events.
    #[serde(deserialize_with = "crate::omit::null_as_default")]
    pub feedback_events: Vec<FeedbackEvent>,
    /// Ranked (N-way) feedback events.
    #[serde(
        default,
        deserialize_with = "crate::omit::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub ranked_feedback_events: Vec<RankedFeedbackEvent>,
    /// Pairwise preferences derived from the ranked events (S-05, [`crate::derive_pairwise`]).
    #[serde(
        default,
        deserialize_with = "crate::omit::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub pairwise_preferences: Vec<PairwisePreference>,
    /// Feedback provenance (see [`FeedbackContext`]); only when the run has feedback (S-04).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback_context: Option<Value>,
    /// Run metadata minus `mode` (when a training mode) and `feedback_source` (S-03).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluator_config: Option<Value>,
    /// Only when the run metadata names an evaluator (S-04).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluator_profile: Option<EvaluatorProfile>,
    /// BINEVAL verdicts; absent without any (S-02).
    #[serde(
        default,
        deserialize_with = "crate::omit::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub binary_verdicts: Vec<BinaryVerdict>,
}

impl TrainingPackage {
    /// An empty package with the fixed `kind` and `contract_version` and empty arrays.
    pub fn new(template: TemplateSnapshot, eval_run: EvalRun) -> Self {
        TrainingPackage {
            kind: TRAINING_PACKAGE_KIND.to_owned(),
            contract_version: CONTRACT_VERSION,
            training_mode: String::new(),
            template,
            eval_run,
            items: Vec::new(),
            artifacts: Vec::new(),
            feedback_events: Vec::new(),
            ranked_feedback_events: Vec::new(),
            pairwise_preferences: Vec::new(),
            feedback_context: None,
            evaluator_config: None,
            evaluator_profile: None,
            binary_verdicts: Vec::new(),
        }
    }
}

/// `feedback_context` as a typed value; the package carries it raw (`serde_json::to_value`).
/// `review_issue` (`owner/repo#N`) only for GitHub-sourced feedback, `target_repo` only when the
/// run has one (S-04).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct FeedbackContext {
    /// `imported_human_review` for human runs, `automatic_trace` for auto-trace runs.
    pub feedback_source: String,
    /// `baseline_review_outputs`.
    pub feedback_target: String,
    /// The eval run id.
    pub review_run_id: String,
    /// The reviewed template version id.
    pub reviewed_skill_version: String,
    /// `owner/repo#N` when feedback came from GitHub.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub review_issue: String,
    /// The run's target repo.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub target_repo: String,
}

/// The template version the run reviewed; no field is omitted.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct TemplateSnapshot {
    /// Template id.
    pub id: String,
    /// Version id `<id>@v<N>`.
    pub version_id: String,
    /// N.
    pub version_number: i64,
    /// current|pending|rejected|superseded|canary.
    pub version_state: String,
    /// `sha256:<hex>` of `content` (the Python optimizer checks it).
    pub content_hash: String,
    /// Where the template came from.
    pub source_repo: String,
    /// Source ref.
    pub source_ref: String,
    /// Source path.
    pub source_path: String,
    /// Resolved commit.
    pub resolved_commit: String,
    /// Frontmatter metadata.
    pub metadata: Metadata,
    /// Full template Markdown.
    pub content: String,
}

/// The eval run (facts §1 `EvalRun`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct EvalRun {
    /// Run id.
    pub id: String,
    /// Template id.
    pub template_id: String,
    /// Template version id.
    pub template_version_id: String,
    /// Target repo.
    pub target_repo: String,
    /// Run state (non-empty for the Python consumer).
    pub state: String,
    /// explore|refine|distill|validate.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mode: String,
    /// high|medium|low.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub exploration_level: String,
    /// Options per item (omitted when 0).
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub options_count: i64,
    /// Raw run metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

/// One review item with its artifact ids (facts §1 `EvalItem`). The optimizer reads
/// `metadata.split` (train|val|test).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct EvalItem {
    /// Item id, unique in the run.
    pub id: String,
    /// Title.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub title: String,
    /// Source artifact id.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source_artifact_id: String,
    /// Baseline artifact id.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub baseline_artifact_id: String,
    /// Candidate artifact id.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub candidate_artifact_id: String,
    /// Preview artifact id.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub preview_artifact_id: String,
    /// Diff artifact id.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub diff_artifact_id: String,
    /// Ranked options, sorted by label.
    #[serde(
        default,
        deserialize_with = "crate::omit::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub options: Vec<EvalReviewOption>,
    /// Raw item metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

impl EvalItem {
    /// Every artifact id the item references (item fields, then options), non-empty only.
    pub fn artifact_ids(&self) -> Vec<&str> {
        [
            &self.source_artifact_id,
            &self.baseline_artifact_id,
            &self.candidate_artifact_id,
            &self.preview_artifact_id,
            &self.diff_artifact_id,
        ]
        .into_iter()
        .map(String::as_str)
        .chain(self.options.iter().map(|o| o.artifact_id.as_str()))
        .filter(|id| !id.is_empty())
        .collect()
    }
}

/// One blind ranked option (facts §1 `EvalReviewOption`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct EvalReviewOption {
    /// Blind label, unique per item.
    pub label: String,
    /// Artifact shown for this option.
    pub artifact_id: String,
    /// Role (e.g. baseline, candidate).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub role: String,
    /// Raw metadata, e.g. preview URLs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

/// Artifact manifest entry (facts §1 `ArtifactRef`); blobs live at `sha256/<hex[:2]>/<hex>`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct ArtifactRef {
    /// Artifact id, unique.
    pub id: String,
    /// `sha256:<hex>`.
    pub hash: String,
    /// MIME type.
    pub media_type: String,
    /// Size in bytes.
    pub size_bytes: i64,
    /// Storage driver.
    pub driver: String,
}

/// A/B feedback (facts §1 `FeedbackEvent`); `choice` is de-blinded: a = baseline, b = candidate.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct FeedbackEvent {
    /// Run id.
    pub run_id: String,
    /// Item id.
    pub item_id: String,
    /// a|b|tie|neither|skip.
    pub choice: String,
    /// Reviewer notes.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reasoning: String,
    /// Reviewer.
    pub reviewer: String,
    /// markdown|github|auto-trace|….
    pub source: String,
    /// Packet dir, comment URL, ….
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source_url: String,
    /// RFC 3339 UTC.
    pub created_at: String,
}

/// N-way ranked feedback (facts §1 `RankedFeedbackEvent`); traits are raw JSON keyed by label.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct RankedFeedbackEvent {
    /// `ranked-feedback:<sha256 hex>` ([`crate::ranked_feedback_event_id`]).
    pub id: String,
    /// Run id.
    pub run_id: String,
    /// Item id.
    pub item_id: String,
    /// Option labels best to worst.
    #[serde(deserialize_with = "crate::omit::null_as_default")]
    pub ranking: Vec<String>,
    /// Groups of tied labels (each ≥ 2 labels).
    #[serde(
        default,
        deserialize_with = "crate::omit::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub tie_groups: Vec<Vec<String>>,
    /// First-place label.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub winner: String,
    /// `{label: [trait]}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub useful_traits: Option<Value>,
    /// `{label: [trait]}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected_traits: Option<Value>,
    /// `[improvement]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_improvements: Option<Value>,
    /// poor|acceptable|strong.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub quality: String,
    /// explore|refine|distill|validate.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub continue_mode: String,
    /// yes|no.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub promote: String,
    /// Reviewer notes.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reasoning: String,
    /// Reviewer.
    pub reviewer: String,
    /// Source.
    pub source: String,
    /// Source URL.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source_url: String,
    /// RFC 3339 UTC.
    pub created_at: String,
}

/// One preference derived from a ranked event (S-05); carries no trait text.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct PairwisePreference {
    /// Run id.
    pub run_id: String,
    /// Item id.
    pub item_id: String,
    /// Preferred label.
    pub preferred: String,
    /// Rejected label.
    pub rejected: String,
    /// Id of the ranked event it came from.
    pub ranked_event_id: String,
    /// Reviewer.
    pub reviewer: String,
    /// Source.
    pub source: String,
    /// Source URL.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source_url: String,
    /// RFC 3339 UTC.
    pub created_at: String,
}

/// BINEVAL verdict (facts §1 `BinaryVerdict`); weights are omitted when 0 (Go float omitempty).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct BinaryVerdict {
    /// Question id.
    pub question_id: String,
    /// Dimension.
    pub dimension: String,
    /// yes|no.
    pub verdict: String,
    /// Explanation.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub explanation: String,
    /// Question weight.
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub question_weight: f64,
    /// Dimension weight.
    #[serde(default, skip_serializing_if = "is_zero_f64")]
    pub dimension_weight: f64,
    /// RFC 3339 UTC.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub created_at: String,
}

#[cfg(test)]
pub(crate) mod tests;
