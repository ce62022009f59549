//! Answering and aggregating BINEVAL questions (seed: SkillOpt, "Binary evaluation (BINEVAL, off by
//! default)"; S-43, S-45): the deterministic runner, the reviewer's reply, and the weighted scores.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use super::set::{Question, QuestionSet};

/// One answered question as it is stored (`skillopt_binary_verdicts`), with the weights the run used.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VerdictRow {
    /// Question id.
    pub question_id: String,
    /// Its dimension.
    pub dimension: String,
    /// True = yes.
    pub yes: bool,
    /// Why.
    pub explanation: String,
    /// The question's weight (default 1).
    pub question_weight: f64,
    /// The dimension's weight (default 1).
    pub dimension_weight: f64,
}

/// Per-dimension weighted yes-fractions and their weighted mean (S-45), each in [0,1].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Scores {
    /// Dimension → Σ w_q·[yes] / Σ w_q.
    pub dimensions: BTreeMap<String, f64>,
    /// Σ w_d·score_d / Σ w_d over the dimensions present; `None` when there are no rows.
    pub overall: Option<f64>,
}

/// Aggregates stored or fresh rows: the same function serves `binary run` and `binary show`, so
/// `show` reproduces the run's scores exactly from the stored weights (S-45). A dimension's weight
/// is the one its rows carry (the first row's, they are written together).
pub fn aggregate(rows: &[VerdictRow]) -> Scores {
    let mut by_dim: BTreeMap<&str, (f64, f64, f64)> = BTreeMap::new();
    for row in rows {
        let entry =
            by_dim
                .entry(row.dimension.as_str())
                .or_insert((0.0, 0.0, row.dimension_weight));
        entry.0 += if row.yes { row.question_weight } else { 0.0 };
        entry.1 += row.question_weight;
    }
    let dimensions: BTreeMap<String, f64> = by_dim
        .iter()
        .map(|(d, (yes, total, _))| {
            (
                (*d).to_owned(),
                if *total > 0.0 { yes / total } else { 0.0 },
            )
        })
        .collect();
    let weight_sum: f64 = by_dim.values().map(|(_, _, w)| w).sum();
    let overall = (!rows.is_empty() && weight_sum > 0.0).then(|| {
        by_dim
            .iter()
            .map(|(d, (_, _, w))| w * dimensions[*d])
            .sum::<f64>()
            / weight_sum
    });
    Scores {
        dimensions,
        overall,
    }
}

/// The deterministic runner (S-43): every assertion of `question` on `source` must hold for a yes.
/// `None` when the question has no assertion (the runner cannot answer it; never a made-up no).
pub fn answer_deterministic(question: &Question, source: &str) -> Option<(bool, String)> {
    let a = &question.assertions;
    if a.is_empty() {
        return None;
    }
    let mut failed = Vec::new();
    failed.extend(
        a.contains
            .iter()
            .filter(|s| !source.contains(s.as_str()))
            .map(|s| format!("missing `{s}`")),
    );
    failed.extend(
        a.not_contains
            .iter()
            .filter(|s| source.contains(s.as_str()))
            .map(|s| format!("contains `{s}`")),
    );
    failed.extend(
        a.regex
            .iter()
            .filter(|r| !r.is_match(source))
            .map(|r| format!("no match for /{}/", r.as_str())),
    );
    failed.extend(
        a.not_regex
            .iter()
            .filter(|r| r.is_match(source))
            .map(|r| format!("matches /{}/", r.as_str())),
    );
    Some(if failed.is_empty() {
        (true, "every assertion holds".to_owned())
    } else {
        (false, failed.join("; "))
    })
}

/// Runs the deterministic runner over the whole set; the questions it cannot answer are returned
/// by id (the caller refuses the run rather than write a partial one).
pub fn run_deterministic(set: &QuestionSet, source: &str) -> (Vec<VerdictRow>, Vec<String>) {
    let mut rows = Vec::new();
    let mut unanswerable = Vec::new();
    for (dimension, question) in set.questions() {
        match answer_deterministic(question, source) {
            Some((yes, explanation)) => rows.push(VerdictRow {
                question_id: question.id.clone(),
                dimension: dimension.name.clone(),
                yes,
                explanation,
                question_weight: question.weight,
                dimension_weight: dimension.weight,
            }),
            None => unanswerable.push(question.id.clone()),
        }
    }
    (rows, unanswerable)
}

/// The reviewer prompt for one question (S-44: one question per call, read-only). The scripted
/// runtime reads the `task: judge` header; its `a`/`b` verdicts read as yes/no.
pub fn question_prompt(question: &Question, source: &str) -> String {
    let example = if question.violation_example.is_empty() {
        String::new()
    } else {
        format!("A \"no\" looks like: {}\n", question.violation_example)
    };
    format!(
        "task: judge\n\
         You are a read-only evaluator. Do not modify any file. Answer one yes/no question about the output below.\n\
         Question: {}\n{example}\
         Reply with one JSON object and nothing else: {{\"verdict\": \"yes\" or \"no\", \"explanation\": \"...\"}}.\n\n\
         Output:\n{source}\n",
        question.text
    )
}

/// Reads a reviewer's reply: the first JSON object with `verdict` yes/no (or `a` = yes, `b` = no,
/// the judge convention) and its `explanation`/`reasoning`; `None` when unreadable or a tie (the
/// question stays unanswered: reported missing, never a fabricated verdict).
pub fn parse_answer(message: &str) -> Option<(bool, String)> {
    for (start, _) in message.match_indices('{') {
        let mut stream = serde_json::Deserializer::from_str(&message[start..]).into_iter::<Value>();
        let Some(Ok(Value::Object(map))) = stream.next() else {
            continue;
        };
        let Some(verdict) = map.get("verdict").and_then(Value::as_str) else {
            continue;
        };
        let explanation = ["explanation", "reasoning"]
            .iter()
            .find_map(|k| map.get(*k).and_then(Value::as_str))
            .unwrap_or_default()
            .to_owned();
        return match verdict.trim().to_ascii_lowercase().as_str() {
            "yes" | "a" => Some((true, explanation)),
            "no" | "b" => Some((false, explanation)),
            _ => None,
        };
    }
    None
}

#[cfg(test)]
mod tests {
    use super::super::set::parse;
    use super::*;

    fn row(q: &str, d: &str, yes: bool, qw: f64, dw: f64) -> VerdictRow {
        VerdictRow {
            question_id: q.into(),
            dimension: d.into(),
            yes,
            explanation: String::new(),
            question_weight: qw,
            dimension_weight: dw,
        }
    }

    // S-45
    #[test]
    fn s45_weighted_aggregation_table() {
        let check = |rows: &[VerdictRow], dims: &[(&str, f64)], overall: Option<f64>| {
            let scores = aggregate(rows);
            assert_eq!(scores.dimensions.len(), dims.len());
            for (d, expected) in dims {
                assert!(
                    (scores.dimensions[*d] - expected).abs() < 1e-12,
                    "{d}: {scores:?}"
                );
            }
            match (scores.overall, overall) {
                (Some(got), Some(want)) => {
                    assert!((got - want).abs() < 1e-12, "overall {got} != {want}")
                }
                (got, want) => assert_eq!(got, want),
            }
        };
        check(&[], &[], None);
        check(
            &[
                row("q1", "c", true, 1.0, 1.0),
                row("q2", "c", false, 1.0, 1.0),
            ],
            &[("c", 0.5)],
            Some(0.5),
        );
        // question weights 2/1 inside a dimension: (2·yes + 1·no) / 3
        check(
            &[
                row("q1", "c", true, 2.0, 1.0),
                row("q2", "c", false, 1.0, 1.0),
            ],
            &[("c", 2.0 / 3.0)],
            Some(2.0 / 3.0),
        );
        // dimension weights 2/1: (2·1.0 + 1·0.0) / 3
        check(
            &[
                row("q1", "c", true, 1.0, 2.0),
                row("q2", "s", false, 1.0, 1.0),
            ],
            &[("c", 1.0), ("s", 0.0)],
            Some(2.0 / 3.0),
        );
        // both: c = (3·yes + 1·no)/4 = 0.75 with weight 2, s = 1.0 with weight 1 ⇒ (1.5 + 1)/3
        check(
            &[
                row("a", "c", true, 3.0, 2.0),
                row("b", "c", false, 1.0, 2.0),
                row("x", "s", true, 0.5, 1.0),
            ],
            &[("c", 0.75), ("s", 1.0)],
            Some(2.5 / 3.0),
        );
    }

    // S-43
    #[test]
    fn s43_deterministic_runner_is_reproducible_and_needs_no_llm() {
        let set = parse(
            "set.yml",
            "dimensions:\n  - name: c\n    questions:\n      - {id: has_test, text: t?, contains: \"func Test\"}\n      \
             - {id: no_panic, text: p?, not_regex: \"panic\\\\(\"}\n      - {id: free, text: f?}\n",
            false,
        )
        .unwrap();
        let source = "package x\nfunc Add() {}\npanic(\"x\")\n";
        let first = run_deterministic(&set, source);
        assert_eq!(
            first,
            run_deterministic(&set, source),
            "same input ⇒ same verdicts"
        );
        let (rows, unanswerable) = first;
        assert_eq!(
            rows.iter()
                .map(|r| (r.question_id.as_str(), r.yes))
                .collect::<Vec<_>>(),
            [("has_test", false), ("no_panic", false)]
        );
        assert!(
            rows[0].explanation.contains("missing `func Test`"),
            "{}",
            rows[0].explanation
        );
        assert_eq!(
            unanswerable,
            ["free"],
            "a question without assertions is not answered deterministically"
        );
        let (rows, _) = run_deterministic(&set, "func TestAdd(t *testing.T) {}");
        assert!(rows.iter().all(|r| r.yes));
    }

    #[test]
    fn reviewer_answers_parse_yes_no_or_nothing() {
        assert_eq!(
            parse_answer(r#"{"verdict":"YES","explanation":"adds TestX"}"#),
            Some((true, "adds TestX".into()))
        );
        assert_eq!(
            parse_answer(r#"{"verdict":"b","reasoning":"r"}"#),
            Some((false, "r".into()))
        );
        assert_eq!(parse_answer(r#"{"verdict":"tie"}"#), None);
        assert_eq!(parse_answer("probably"), None);
    }
}
