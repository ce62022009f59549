//! What the control plane records about a session and an iteration in their `metadata_json`
//! (facts §3 `metadata_status`): per-stage status, job ids, paths and errors.

use serde::{Deserialize, Serialize};

use super::items::ItemSpec;

/// Session metadata: what every iteration reuses.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionMeta {
    /// The review items of every iteration.
    #[serde(default)]
    pub items: Vec<ItemSpec>,
    /// Agent runtime profile for option generation (`scripted` by default).
    #[serde(default)]
    pub runtime: String,
    /// Model passed to the runtime, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Review mode of new iterations.
    #[serde(default)]
    pub mode: String,
    /// Exploration level of new iterations.
    #[serde(default)]
    pub exploration_level: String,
    /// Options per item.
    #[serde(default)]
    pub options_count: i64,
    /// Evaluator profile id (`train start --evaluator`); also in each iteration's review-run
    /// metadata as `evaluator_id`. Absent ⇒ no evaluator stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluator_id: Option<String>,
    /// Judge runtime of the evaluator (`--judge-runtime`); run metadata `judge_runtime`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_runtime: Option<String>,
    /// Further evaluator profile config (`--evaluator-config-json`: `checks`, `check_config`,
    /// `judge_prompt_templates`, `judge_prompt_version`, `judge_model`), merged into each
    /// iteration's review-run metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluator_config: Option<serde_json::Map<String, serde_json::Value>>,
    /// Where review packets and candidate review context go: absent = local Markdown files;
    /// `github` = issues and comments of the workspace repository (`train start --forge github`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review_forge: Option<String>,
}

/// Status of one control-plane or job stage. `status`: '' (not started), `running`,
/// `succeeded`, `failed`, `waiting` (for a human).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageMeta {
    /// Status word.
    #[serde(default)]
    pub status: String,
    /// Error text of the last failure.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error: String,
    /// Jobs of the stage.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub job_ids: Vec<String>,
    /// File or directory the stage wrote.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub path: String,
    /// Web address of what the stage published on a forge (a review issue, a comment).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub url: String,
    /// sha256 hex of a file written for a human to fill (the review packet's `feedback.yml`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub written_sha256: String,
}

/// The optimizer stage (facts §3 `optimizer{..}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OptimizerMeta {
    /// '' | `preflight_running` | `running` | `succeeded` | `failed` | `stale`.
    #[serde(default)]
    pub status: String,
    /// Backend name.
    #[serde(default)]
    pub backend: String,
    /// The full argv of the current attempt.
    #[serde(default)]
    pub argv: Vec<String>,
    /// Attempt number (1-based) of the current attempt; 0 before the first.
    #[serde(default)]
    pub attempt: u32,
    /// Job of the current attempt.
    #[serde(default)]
    pub job_id: String,
    /// `--out-root` of the whole optimizer stage (attempts below `attempts/`).
    #[serde(default)]
    pub out_root: String,
    /// The current attempt's directory.
    #[serde(default)]
    pub attempt_dir: String,
    /// The current attempt's `--candidate-output`.
    #[serde(default)]
    pub candidate_output: String,
    /// Error text of a failed attempt.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error: String,
    /// running | completed_no_candidate | completed_candidate | candidate_import_failed (facts §3).
    #[serde(default)]
    pub optimizer_attempt_state: String,
    /// Whether recovery is available (recorded when the attempt ended).
    #[serde(default)]
    pub recovery_available: bool,
    /// Why the optimizer produced no candidate.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub no_candidate_reason: String,
    /// The optimizer's report for a no-candidate result, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_candidate_details: Option<serde_json::Value>,
}

/// The evaluator stage (S-101; seed step 5): run between feedback sync and the export when the
/// iteration's review run names an evaluator. Never written for a run without one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvaluationMeta {
    /// '' | `running` | `succeeded` | `failed`.
    #[serde(default)]
    pub status: String,
    /// Profile evaluated with.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub profile_id: String,
    /// Judge runtime ('' ⇒ the judge stage is skipped with a reason).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub judge_runtime: String,
    /// Judge and render jobs (keyed by prompt, so a re-run finds the same ones).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub job_ids: Vec<String>,
    /// Artifacts scored.
    #[serde(default)]
    pub evaluated: usize,
    /// Scores with a failure packet.
    #[serde(default)]
    pub failures: usize,
    /// Error text of the last failure.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub error: String,
}

impl EvaluationMeta {
    fn is_unset(&self) -> bool {
        *self == Self::default()
    }
}

/// Iteration metadata (facts §3 `metadata_status` keys).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IterationMeta {
    /// Option generation jobs.
    #[serde(default)]
    pub generation: StageMeta,
    /// Review packet publication.
    #[serde(default)]
    pub review: StageMeta,
    /// Feedback sync.
    #[serde(default)]
    pub feedback_sync: StageMeta,
    /// Evaluator stage (only for a run that names an evaluator).
    #[serde(default, skip_serializing_if = "EvaluationMeta::is_unset")]
    pub evaluation: EvaluationMeta,
    /// Training package export.
    #[serde(default)]
    pub export: StageMeta,
    /// The optimizer.
    #[serde(default)]
    pub optimizer: OptimizerMeta,
    /// Candidate import.
    #[serde(default)]
    pub candidate_import: StageMeta,
    /// Candidate review publication.
    #[serde(default)]
    pub candidate_review: StageMeta,
    /// promote / reject.
    #[serde(default)]
    pub candidate_decision: StageMeta,
}

impl IterationMeta {
    /// Parses the column ('' ⇒ default).
    pub fn parse(text: &str) -> Self {
        serde_json::from_str(text).unwrap_or_default()
    }

    /// Compact JSON for the column.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".to_owned())
    }
}

impl SessionMeta {
    /// Parses the column ('' ⇒ default).
    pub fn parse(text: &str) -> Self {
        serde_json::from_str(text).unwrap_or_default()
    }
}
