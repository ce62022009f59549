//! The candidate package an external optimizer writes back
//! (`kind: gitmoot-skillopt-candidate-package`; seed "Candidate Package"; facts §2).
//! Validation on import lives in [`crate::import`].

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::evaluator::{EvaluatorFailurePacket, EvaluatorScore, GateRejectionPacket};
use crate::template::Metadata;

/// `kind` of a candidate package (S-86).
pub const CANDIDATE_PACKAGE_KIND: &str = "gitmoot-skillopt-candidate-package";

/// The candidate package. Fields a producer may leave out deserialise to their zero value so
/// import can report which one is missing instead of a decode error.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct CandidatePackage {
    /// Must be [`CANDIDATE_PACKAGE_KIND`].
    #[serde(default)]
    pub kind: String,
    /// Must be 1.
    #[serde(default)]
    pub contract_version: i64,
    /// An installed template id.
    #[serde(default)]
    pub template_id: String,
    /// Version the optimizer started from; empty = the template's current version.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub base_version_id: String,
    /// The proposed template.
    #[serde(default)]
    pub candidate: CandidateTemplate,
    /// Raw optimizer report; may carry `promotable` / `no_candidate_reason` (S-88).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eval_report: Option<Value>,
    /// Always written.
    #[serde(default)]
    pub summary: CandidateSummary,
    /// Files under `--artifact-dir` to store (S-90, S-91).
    #[serde(
        default,
        deserialize_with = "crate::omit::null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub artifacts: Vec<CandidateArtifactRef>,
}

/// Candidate content and the metadata that must equal its frontmatter (S-87).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct CandidateTemplate {
    /// Full agent-template Markdown with YAML frontmatter.
    #[serde(default)]
    pub content: String,
    /// Metadata equal to the frontmatter of `content`.
    #[serde(default)]
    pub metadata: Metadata,
}

/// Candidate summary (facts §2 `CandidateSummary`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct CandidateSummary {
    /// One of the package artifacts or an existing eval artifact.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub diff_artifact_id: String,
    /// Optimizer score (Go `*float64`: 0 is kept, absence is omitted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// Free-text preference summary.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub preference_summary: String,
    /// Raw; may carry `promotable` / `no_candidate_reason` (S-88).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
    /// Evaluator score.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluator_score: Option<EvaluatorScore>,
    /// Structured failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<EvaluatorFailurePacket>,
    /// Structured gate rejection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate_rejection: Option<GateRejectionPacket>,
}

/// A file the optimizer wrote, to be verified and stored (facts §2 `CandidateArtifactRef`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
pub struct CandidateArtifactRef {
    /// Artifact id, unique in the package and new to the store.
    #[serde(default)]
    pub id: String,
    /// Path relative to the artifact dir.
    #[serde(default)]
    pub path: String,
    /// SHA-256, `sha256:` prefix optional.
    #[serde(default)]
    pub hash: String,
    /// MIME type.
    #[serde(default)]
    pub media_type: String,
    /// Storage driver.
    #[serde(default)]
    pub driver: String,
    /// Size in bytes, checked when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<i64>,
}
