//! The normalized {score, has_score, feedback} projection (seed "Normalized {score, feedback}
//! projection"; facts §5; resolutions §5). Read-side only: no package carries it (S-06).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::evaluator::EvaluatorScore;
use crate::training::RankedFeedbackEvent;

/// Byte cap on [`NormalizedSignal::feedback`] (8 KiB), marker included (resolutions §5).
pub const FEEDBACK_CAP_BYTES: usize = 8 * 1024;
/// Appended to truncated feedback; 15 bytes (`…` is 3).
pub const TRUNCATION_MARKER: &str = "… (truncated)";

/// The projection result.
#[derive(Debug, Clone, PartialEq)]
pub struct NormalizedSignal {
    /// Score in `[0,1]`; 0 when `has_score` is false (never read it then).
    pub score: f64,
    /// Whether any usable score field existed (S-09: never a fabricated 0.5).
    pub has_score: bool,
    /// Textual feedback, ≤ [`FEEDBACK_CAP_BYTES`] bytes, `""` when there is none.
    pub feedback: String,
}

/// The fields the projection reads. Build it by hand or with [`SignalInput::from_parts`].
#[derive(Debug, Clone, Copy, Default)]
pub struct SignalInput<'a> {
    /// Hard gate: 0 (or below) = failed.
    pub hard: Option<f64>,
    /// Soft quality score.
    pub soft: Option<f64>,
    /// Per-dimension scores.
    pub dimension_scores: Option<&'a BTreeMap<String, f64>>,
    /// Optimizer hint.
    pub optimizer_hint: &'a str,
    /// Raw `required_improvements` (`[string]`).
    pub required_improvements: Option<&'a Value>,
    /// Raw `useful_traits` (`{label: [string]}` or `[string]`).
    pub useful_traits: Option<&'a Value>,
    /// Raw `rejected_traits` (same shapes).
    pub rejected_traits: Option<&'a Value>,
    /// Reviewer notes.
    pub reasoning: &'a str,
}

impl<'a> SignalInput<'a> {
    /// Takes scores from `score` (hard, soft, dimension_scores; the optimizer hint from
    /// `failure`, else `gate_rejection`) and text from `event` (improvements, traits, reasoning).
    pub fn from_parts(
        score: Option<&'a EvaluatorScore>,
        event: Option<&'a RankedFeedbackEvent>,
    ) -> Self {
        let hint = score
            .and_then(|s| {
                let from_failure = s
                    .failure
                    .as_ref()
                    .map(|f| f.optimizer_hint.as_str())
                    .filter(|h| !h.trim().is_empty());
                from_failure
                    .or_else(|| s.gate_rejection.as_ref().map(|g| g.optimizer_hint.as_str()))
            })
            .unwrap_or("");
        SignalInput {
            hard: score.and_then(|s| s.hard),
            soft: score.and_then(|s| s.soft),
            dimension_scores: score.map(|s| &s.dimension_scores),
            optimizer_hint: hint,
            required_improvements: event.and_then(|e| e.required_improvements.as_ref()),
            useful_traits: event.and_then(|e| e.useful_traits.as_ref()),
            rejected_traits: event.and_then(|e| e.rejected_traits.as_ref()),
            reasoning: event.map(|e| e.reasoning.as_str()).unwrap_or(""),
        }
    }

    /// Whether `hard` is negative: projected as a failed gate, but callers should log it as
    /// malformed (resolutions §5).
    pub fn has_malformed_hard(&self) -> bool {
        self.hard.is_some_and(|h| h < 0.0)
    }
}

/// Projects scores and feedback into one signal.
///
/// Score (S-07..S-09): `hard ≤ 0` → (0, true), overriding everything; else `soft`; else the mean
/// of a non-empty `dimension_scores`; else `hard` when > 0 (a gate, never a multiplier); clamped to
/// `[0,1]`; nothing usable → `has_score = false`. NaN inputs count as absent.
///
/// Feedback (S-10..S-12): non-empty sections joined by `"\n\n"` in the order
/// `Optimizer hint:`, `Required improvements:`, `Useful traits:`, `Rejected traits:`, `Reasoning:`;
/// trait labels sorted; a section that does not decode is skipped; capped per [`cap_feedback`].
pub fn project_signal(input: &SignalInput<'_>) -> NormalizedSignal {
    let (score, has_score) = project_score(input);
    NormalizedSignal {
        score,
        has_score,
        feedback: cap_feedback(assemble_feedback(input)),
    }
}

fn finite(v: Option<f64>) -> Option<f64> {
    v.filter(|v| !v.is_nan())
}

fn project_score(input: &SignalInput<'_>) -> (f64, bool) {
    let hard = finite(input.hard);
    if hard.is_some_and(|h| h <= 0.0) {
        return (0.0, true);
    }
    let mean = input
        .dimension_scores
        .filter(|d| !d.is_empty())
        .and_then(|d| {
            let values: Vec<f64> = d.values().copied().filter(|v| !v.is_nan()).collect();
            (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
        });
    match finite(input.soft).or(mean).or(hard) {
        Some(component) => (component.clamp(0.0, 1.0), true),
        None => (0.0, false),
    }
}

fn assemble_feedback(input: &SignalInput<'_>) -> String {
    let mut sections = Vec::new();
    let hint = input.optimizer_hint.trim();
    if !hint.is_empty() {
        sections.push(format!("Optimizer hint:\n{hint}"));
    }
    if let Some(lines) = input.required_improvements.and_then(string_list) {
        let body: Vec<String> = lines.iter().map(|l| format!("- {l}")).collect();
        sections.push(format!("Required improvements:\n{}", body.join("\n")));
    }
    for (header, raw) in [
        ("Useful traits:", input.useful_traits),
        ("Rejected traits:", input.rejected_traits),
    ] {
        if let Some(body) = raw.and_then(trait_lines) {
            sections.push(format!("{header}\n{body}"));
        }
    }
    let reasoning = input.reasoning.trim();
    if !reasoning.is_empty() {
        sections.push(format!("Reasoning:\n{reasoning}"));
    }
    sections.join("\n\n")
}

/// Non-empty trimmed strings of a JSON string array; `None` if not an array of strings or empty.
fn string_list(value: &Value) -> Option<Vec<String>> {
    let items = value.as_array()?;
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let text = item.as_str()?.trim();
        if !text.is_empty() {
            out.push(text.to_owned());
        }
    }
    (!out.is_empty()).then_some(out)
}

/// `label: trait` lines (labels sorted) for a `{label: [string]}` map, `- trait` lines for a
/// `[string]` list; `None` when the value has neither shape (S-11) or no text.
fn trait_lines(value: &Value) -> Option<String> {
    match value {
        Value::Object(map) => {
            let mut by_label: BTreeMap<&str, Vec<String>> = BTreeMap::new();
            for (label, traits) in map {
                let traits = match traits {
                    Value::Null => Vec::new(),
                    other => {
                        let arr = other.as_array()?;
                        let mut list = Vec::new();
                        for t in arr {
                            let t = t.as_str()?.trim();
                            if !t.is_empty() {
                                list.push(t.to_owned());
                            }
                        }
                        list
                    }
                };
                by_label.insert(label.as_str(), traits);
            }
            let lines: Vec<String> = by_label
                .iter()
                .flat_map(|(label, traits)| traits.iter().map(move |t| format!("{label}: {t}")))
                .collect();
            (!lines.is_empty()).then(|| lines.join("\n"))
        }
        Value::Array(_) => {
            let lines = string_list(value)?;
            Some(
                lines
                    .iter()
                    .map(|l| format!("- {l}"))
                    .collect::<Vec<_>>()
                    .join("\n"),
            )
        }
        _ => None,
    }
}

/// Caps `text` at [`FEEDBACK_CAP_BYTES`]: when longer, cuts to `8192 − 15` bytes, backs up to a
/// UTF-8 char boundary, and appends [`TRUNCATION_MARKER`], so the result is ≤ 8192 bytes (S-12).
pub fn cap_feedback(text: String) -> String {
    if text.len() <= FEEDBACK_CAP_BYTES {
        return text;
    }
    let mut cut = FEEDBACK_CAP_BYTES - TRUNCATION_MARKER.len();
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut out = String::with_capacity(cut + TRUNCATION_MARKER.len());
    out.push_str(&text[..cut]);
    out.push_str(TRUNCATION_MARKER);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn dims(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
    }

    fn score_of(
        hard: Option<f64>,
        soft: Option<f64>,
        d: Option<&BTreeMap<String, f64>>,
    ) -> (f64, bool) {
        let s = project_signal(&SignalInput {
            hard,
            soft,
            dimension_scores: d,
            ..Default::default()
        });
        (s.score, s.has_score)
    }

    /// (name, hard, soft, dimension_scores, (score, has_score)).
    type ScoreCase<'a> = (
        &'a str,
        Option<f64>,
        Option<f64>,
        Option<&'a BTreeMap<String, f64>>,
        (f64, bool),
    );

    #[test]
    fn s07_s08_s09_score_precedence_table() {
        let d_1 = dims(&[("a", 1.0)]);
        let d_02_04 = dims(&[("a", 0.2), ("b", 0.4)]);
        let d_high = dims(&[("a", 3.0), ("b", 1.0)]);
        let empty = dims(&[]);
        let table: &[ScoreCase<'_>] = &[
            // S-07: hard 0 overrides soft and dimensions.
            (
                "s07 hard zero wins",
                Some(0.0),
                Some(0.9),
                Some(&d_1),
                (0.0, true),
            ),
            ("s07 hard zero alone", Some(0.0), None, None, (0.0, true)),
            // resolutions §5: negative hard is a failed gate.
            ("negative hard", Some(-1.0), Some(0.9), None, (0.0, true)),
            // S-08: soft > mean(dims) > hard>0.
            (
                "s08 soft over hard",
                Some(0.5),
                Some(0.6),
                None,
                (0.6, true),
            ),
            (
                "s08 soft over dims",
                None,
                Some(0.6),
                Some(&d_1),
                (0.6, true),
            ),
            (
                "s08 mean over hard",
                Some(1.0),
                None,
                Some(&d_02_04),
                (0.3, true),
            ),
            ("s08 hard alone", Some(1.0), None, None, (1.0, true)),
            (
                "s08 hard is a gate not a multiplier",
                Some(0.5),
                Some(0.8),
                None,
                (0.8, true),
            ),
            ("s08 clamp soft high", None, Some(1.4), None, (1.0, true)),
            ("s08 clamp soft low", None, Some(-0.2), None, (0.0, true)),
            ("s08 clamp mean", None, None, Some(&d_high), (1.0, true)),
            ("s08 clamp hard", Some(7.0), None, None, (1.0, true)),
            (
                "s08 empty dims fall to hard",
                Some(0.4),
                None,
                Some(&empty),
                (0.4, true),
            ),
            // S-09: nothing usable.
            ("s09 empty input", None, None, None, (0.0, false)),
            ("s09 empty dims", None, None, Some(&empty), (0.0, false)),
            (
                "nan soft is absent",
                None,
                Some(f64::NAN),
                None,
                (0.0, false),
            ),
        ];
        for (name, hard, soft, d, want) in table {
            let got = score_of(*hard, *soft, *d);
            assert!(
                (got.0 - want.0).abs() < 1e-12 && got.1 == want.1,
                "{name}: got {got:?}, want {want:?}"
            );
        }
    }

    #[test]
    fn s10_sections_in_fixed_order_with_sorted_labels() {
        let improvements = json!(["add tests", "  ", "name files"]);
        let useful_a = json!({"c": ["bold"], "a": ["short", "clear"]});
        let useful_b: Value =
            serde_json::from_str(r#"{"a": ["short", "clear"], "c": ["bold"]}"#).unwrap();
        let rejected = json!(["vague"]);
        let make = |useful: &Value| {
            project_signal(&SignalInput {
                optimizer_hint: "tighten scope",
                required_improvements: Some(&improvements),
                useful_traits: Some(useful),
                rejected_traits: Some(&rejected),
                reasoning: " C was clearest ",
                ..Default::default()
            })
            .feedback
        };
        let want = "Optimizer hint:\ntighten scope\n\nRequired improvements:\n- add tests\n- name files\n\nUseful traits:\na: short\na: clear\nc: bold\n\nRejected traits:\n- vague\n\nReasoning:\nC was clearest";
        assert_eq!(make(&useful_a), want);
        assert_eq!(
            make(&useful_b),
            want,
            "trait key order must not change the bytes"
        );
    }

    #[test]
    fn s10_no_text_gives_empty_feedback() {
        assert_eq!(project_signal(&SignalInput::default()).feedback, "");
        let empty = json!({});
        let s = project_signal(&SignalInput {
            useful_traits: Some(&empty),
            reasoning: "  ",
            ..Default::default()
        });
        assert_eq!(s.feedback, "");
    }

    #[test]
    fn s11_undecodable_trait_sections_are_skipped() {
        let forty_two = json!(42);
        let bad_map = json!({"A": 7});
        let improvements = json!(["keep"]);
        for bad in [&forty_two, &bad_map] {
            let s = project_signal(&SignalInput {
                useful_traits: Some(bad),
                rejected_traits: Some(bad),
                required_improvements: Some(&improvements),
                reasoning: "ok",
                ..Default::default()
            });
            assert_eq!(
                s.feedback,
                "Required improvements:\n- keep\n\nReasoning:\nok"
            );
            assert!(!s.feedback.contains("42") && !s.feedback.contains('7'));
        }
    }

    /// S-12's numbers as the rule states them (facts §5), not the code's constants: 8 KiB and the
    /// 15-byte marker "… (truncated)".
    const S12_CAP: usize = 8192;
    const S12_MARKER: &str = "… (truncated)";

    #[test]
    fn s12_feedback_truncated_at_8_kib() {
        assert_eq!(
            (FEEDBACK_CAP_BYTES, TRUNCATION_MARKER),
            (S12_CAP, S12_MARKER)
        );
        // 10,000 three-byte characters: the cut lands inside a code point.
        let reasoning = "€".repeat(10_000);
        let s = project_signal(&SignalInput {
            reasoning: &reasoning,
            ..Default::default()
        });
        assert!(s.feedback.len() <= 8192, "{}", s.feedback.len());
        // At most 8192 − 15 = 8177 bytes before the marker, backed up to a code-point boundary.
        assert_eq!(
            s.feedback.len(),
            "Reasoning:\n".len() + 3 * ((8177 - "Reasoning:\n".len()) / 3) + 15
        );
        assert!(s.feedback.ends_with("… (truncated)"));
        assert!(s.feedback.starts_with("Reasoning:\n€"));
        let body = s.feedback.strip_suffix("… (truncated)").unwrap();
        assert!(
            body.trim_start_matches("Reasoning:\n")
                .chars()
                .all(|c| c == '€')
        );
    }

    #[test]
    fn s12_cap_boundaries() {
        assert_eq!(S12_MARKER.len(), 15);
        let exact = "a".repeat(8192);
        assert_eq!(
            cap_feedback(exact.clone()),
            exact,
            "exactly 8192 bytes is kept whole"
        );
        let over = "a".repeat(8193);
        let capped = cap_feedback(over);
        assert_eq!(capped.len(), 8192);
        assert_eq!(capped, format!("{}{S12_MARKER}", "a".repeat(8192 - 15)));
        // Four-byte characters.
        let emoji = "🦀".repeat(3000);
        let capped = cap_feedback(emoji);
        assert!(capped.len() <= 8192 && capped.ends_with(S12_MARKER));
        assert_eq!(capped.len(), 4 * ((8192 - 15) / 4) + 15);
    }

    #[test]
    fn from_parts_reads_score_and_event() {
        let score = EvaluatorScore {
            soft: Some(0.7),
            failure: Some(crate::evaluator::EvaluatorFailurePacket {
                optimizer_hint: "hint".into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let event = RankedFeedbackEvent {
            reasoning: "why".into(),
            ..Default::default()
        };
        let s = project_signal(&SignalInput::from_parts(Some(&score), Some(&event)));
        assert_eq!((s.score, s.has_score), (0.7, true));
        assert_eq!(s.feedback, "Optimizer hint:\nhint\n\nReasoning:\nwhy");
        assert!(
            SignalInput {
                hard: Some(-0.5),
                ..Default::default()
            }
            .has_malformed_hard()
        );
    }
}
