//! The check result: one entry per requested dimension plus the mean over the scored ones.
//!
//! This is the JSON of `skillforge check --json` and the `detail` of a checker job's outcome, so
//! field names are stable: `{dimensions: [{name, score, skipped, raw}], mean}`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::checker::Checker;

/// One dimension's result. Exactly one of `score` and `skipped` is set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DimensionResult {
    /// Dimension name: `diff_size`, `duplication`, `lint` or `complexity`.
    pub name: String,
    /// Score in [0,1] (higher is better); `None` when skipped. A skipped dimension is absent
    /// from the fused score, never 0 (rules S-35).
    pub score: Option<f64>,
    /// Why the dimension was not scored (missing tool, tool error, timeout, no checkout, no
    /// file in a profiled language); `None` when scored.
    pub skipped: Option<String>,
    /// Measurement details: line and file counts for `diff_size`; per language the tool, item
    /// count and score, or the attempts that failed, for tool dimensions.
    pub raw: Value,
}

impl DimensionResult {
    /// A scored dimension; `score` is clamped to [0,1].
    pub fn scored(checker: Checker, score: f64, raw: Value) -> Self {
        Self {
            name: checker.name().into(),
            score: Some(score.clamp(0.0, 1.0)),
            skipped: None,
            raw,
        }
    }

    /// A skipped dimension with its reason.
    pub fn skipped(checker: Checker, reason: impl Into<String>, raw: Value) -> Self {
        Self {
            name: checker.name().into(),
            score: None,
            skipped: Some(reason.into()),
            raw,
        }
    }

    /// True when this dimension has a score.
    pub fn has_score(&self) -> bool {
        self.score.is_some()
    }
}

/// All requested dimensions, in request order, and their mean.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckReport {
    /// One entry per requested checker.
    pub dimensions: Vec<DimensionResult>,
    /// Mean of the scored dimensions' scores, in [0,1]; `None` when every dimension was skipped
    /// (all skipped ⇒ no score, never a fabricated one; rules S-35; seed: "An all-skipped run
    /// yields an empty rubric ⇒ no checker row").
    pub mean: Option<f64>,
}

impl CheckReport {
    /// Builds the report and its mean from `dimensions`.
    pub fn from_dimensions(dimensions: Vec<DimensionResult>) -> Self {
        let scores: Vec<f64> = dimensions.iter().filter_map(|d| d.score).collect();
        let mean = (!scores.is_empty()).then(|| scores.iter().sum::<f64>() / scores.len() as f64);
        Self { dimensions, mean }
    }

    /// True when at least one dimension was scored (there is a checker row to write).
    pub fn has_score(&self) -> bool {
        self.mean.is_some()
    }

    /// The scored dimensions as `(name, score)`: the `dimension_scores` of a checker row.
    pub fn dimension_scores(&self) -> Vec<(&str, f64)> {
        self.dimensions
            .iter()
            .filter_map(|d| d.score.map(|s| (d.name.as_str(), s)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    // S-35: skipped dimensions are absent from the mean, not 0; all skipped ⇒ no score.
    #[test]
    fn s35_mean_over_scored_dimensions_only() {
        for (dimensions, expected) in [
            (vec![], None),
            (
                vec![DimensionResult::skipped(
                    Checker::Lint,
                    "tool `ruff` not runnable",
                    json!({}),
                )],
                None,
            ),
            (
                vec![
                    DimensionResult::scored(Checker::DiffSize, 1.0, json!({})),
                    DimensionResult::skipped(Checker::Lint, "tool `ruff` not runnable", json!({})),
                ],
                Some(1.0),
            ),
            (
                vec![
                    DimensionResult::scored(Checker::DiffSize, 0.5, json!({})),
                    DimensionResult::scored(Checker::Lint, 0.25, json!({})),
                    DimensionResult::skipped(Checker::Complexity, "timed out", json!({})),
                ],
                Some(0.375),
            ),
        ] {
            let report = CheckReport::from_dimensions(dimensions);
            assert_eq!(report.mean, expected, "{report:?}");
            assert_eq!(report.has_score(), expected.is_some());
        }
    }

    #[test]
    fn json_shape_is_stable() {
        let report = CheckReport::from_dimensions(vec![
            DimensionResult::scored(Checker::DiffSize, 1.5, json!({"changed_lines": 3})),
            DimensionResult::skipped(Checker::Lint, "no head checkout", json!(null)),
        ]);
        assert_eq!(
            serde_json::to_value(&report).unwrap(),
            json!({
                "dimensions": [
                    {"name": "diff_size", "score": 1.0, "skipped": null, "raw": {"changed_lines": 3}},
                    {"name": "lint", "score": null, "skipped": "no head checkout", "raw": null},
                ],
                "mean": 1.0,
            })
        );
        assert_eq!(report.dimension_scores(), [("diff_size", 1.0)]);
    }
}
