//! Binary-disagreement lessons (seed: SkillOpt, "Binary-disagreement lessons (#527)"; S-47..S-50):
//! per-question verdicts compared across a template's runs become optimizer-consumable lessons,
//! projected onto ranked feedback events of one synthetic run with no fabricated preference.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::json;
use skillforge_contract::{RankedFeedbackEvent, ranked_feedback_event_id};

use super::set::QuestionSet;

/// Source and reviewer of lesson events (S-49).
pub const LESSON_SOURCE: &str = "binary-disagreement";
/// Trait-map key of a lesson's `useful_traits` (the synthetic items have no options).
pub const LESSON_LABEL: &str = "lesson";

/// The synthetic run of `template_id`: `binary-disagreement:<template>` (deterministic, S-49).
pub fn lesson_run_id(template_id: &str) -> String {
    format!("{LESSON_SOURCE}:{template_id}")
}

/// How a question's verdicts behaved across runs (S-47).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LessonKind {
    /// Yes in some runs, no in others: an unstable, targeted improvement signal.
    Flip,
    /// No in every run: a failure lesson.
    StableNo,
    /// Yes in every run: a trait worth preserving.
    StableYes,
}

/// One question's lesson.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Lesson {
    /// Question id.
    pub question_id: String,
    /// Its dimension (from the verdicts).
    pub dimension: String,
    /// The classification.
    pub kind: LessonKind,
    /// Runs answering yes / no.
    pub yes_runs: Vec<String>,
    /// Runs answering no.
    pub no_runs: Vec<String>,
    /// The question's wording when a set was given, else its id.
    pub text: String,
}

/// A verdict as read for lessons: `(run_id, question_id, dimension, yes)`.
pub type RunVerdict = (String, String, String, bool);

/// Classifies every question seen in `verdicts` (S-47), by question id; the wording comes from
/// `set` when given. With `include_passes` false, stable yeses are dropped (`--no-passes`).
pub fn classify(
    verdicts: &[RunVerdict],
    set: Option<&QuestionSet>,
    include_passes: bool,
) -> Vec<Lesson> {
    let mut by_question: BTreeMap<&str, (String, Vec<String>, Vec<String>)> = BTreeMap::new();
    for (run, question, dimension, yes) in verdicts {
        let entry = by_question
            .entry(question.as_str())
            .or_insert_with(|| (dimension.clone(), Vec::new(), Vec::new()));
        if *yes {
            entry.1.push(run.clone())
        } else {
            entry.2.push(run.clone())
        }
    }
    by_question
        .into_iter()
        .filter_map(|(question_id, (dimension, yes_runs, no_runs))| {
            let kind = match (yes_runs.is_empty(), no_runs.is_empty()) {
                (false, false) => LessonKind::Flip,
                (true, false) => LessonKind::StableNo,
                (false, true) => LessonKind::StableYes,
                (true, true) => return None,
            };
            if kind == LessonKind::StableYes && !include_passes {
                return None;
            }
            let text = set
                .and_then(|s| s.question(question_id))
                .map_or_else(|| question_id.to_owned(), |q| q.text.clone());
            Some(Lesson {
                question_id: question_id.to_owned(),
                dimension,
                kind,
                yes_runs,
                no_runs,
                text,
            })
        })
        .collect()
}

/// The ranked events `--apply` writes for `lessons` (S-49, S-50): one per lesson, item
/// `<question id>` of [`lesson_run_id`], empty ranking, no winner, no tie group; failures and
/// flips → `required_improvements`, stable passes → `useful_traits` under [`LESSON_LABEL`].
pub fn lesson_events(
    template_id: &str,
    lessons: &[Lesson],
    created_at: &str,
) -> Vec<RankedFeedbackEvent> {
    let run_id = lesson_run_id(template_id);
    lessons
        .iter()
        .map(|lesson| {
            let (required, useful) = match lesson.kind {
                LessonKind::StableNo => (
                    Some(json!([format!(
                        "{} (answered no in every run: {})",
                        lesson.text,
                        lesson.no_runs.join(", ")
                    )])),
                    None,
                ),
                LessonKind::Flip => (
                    Some(json!([format!(
                        "{} (unstable: yes in {}, no in {})",
                        lesson.text,
                        lesson.yes_runs.join(", "),
                        lesson.no_runs.join(", ")
                    )])),
                    None,
                ),
                LessonKind::StableYes => {
                    (None, Some(json!({ LESSON_LABEL: [lesson.text.clone()] })))
                }
            };
            let source_url = format!("binary-lesson:{}", lesson.question_id);
            RankedFeedbackEvent {
                id: ranked_feedback_event_id(
                    &run_id,
                    &lesson.question_id,
                    LESSON_SOURCE,
                    LESSON_SOURCE,
                    &source_url,
                ),
                run_id: run_id.clone(),
                item_id: lesson.question_id.clone(),
                required_improvements: required,
                useful_traits: useful,
                reasoning: format!(
                    "BINEVAL lesson ({:?}) on dimension {}",
                    lesson.kind, lesson.dimension
                ),
                reviewer: LESSON_SOURCE.to_owned(),
                source: LESSON_SOURCE.to_owned(),
                source_url,
                created_at: created_at.to_owned(),
                ..RankedFeedbackEvent::default()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(run: &str, q: &str, yes: bool) -> RunVerdict {
        (run.into(), q.into(), "c".into(), yes)
    }

    // S-47
    #[test]
    fn s47_flip_stable_no_stable_yes() {
        let verdicts = [
            v("r1", "q1", true),
            v("r2", "q1", false),
            v("r1", "q2", false),
            v("r2", "q2", false),
            v("r1", "q3", true),
            v("r2", "q3", true),
        ];
        let lessons = classify(&verdicts, None, true);
        let kinds: Vec<_> = lessons
            .iter()
            .map(|l| (l.question_id.as_str(), l.kind))
            .collect();
        assert_eq!(
            kinds,
            [
                ("q1", LessonKind::Flip),
                ("q2", LessonKind::StableNo),
                ("q3", LessonKind::StableYes)
            ]
        );
        let no_passes = classify(&verdicts, None, false);
        assert_eq!(no_passes.len(), 2, "--no-passes drops the stable yes");
    }

    // S-50
    #[test]
    fn s50_lesson_events_carry_no_preference() {
        let verdicts = [
            v("r1", "q1", true),
            v("r2", "q1", false),
            v("r1", "q2", false),
            v("r1", "q3", true),
        ];
        let events = lesson_events(
            "planner",
            &classify(&verdicts, None, true),
            "2026-01-01T00:00:00Z",
        );
        assert_eq!(events.len(), 3);
        for e in &events {
            assert!(
                e.ranking.is_empty() && e.winner.is_empty() && e.tie_groups.is_empty(),
                "{e:?}"
            );
            assert_eq!(
                (e.source.as_str(), e.run_id.as_str()),
                ("binary-disagreement", "binary-disagreement:planner")
            );
        }
        assert!(
            events[0].required_improvements.is_some() && events[1].required_improvements.is_some()
        );
        assert_eq!(events[2].useful_traits, Some(json!({"lesson": ["q3"]})));
        assert!(
            events
                .iter()
                .all(|e| skillforge_contract::derive_pairwise(e).is_empty()),
            "no derived pairwise preference"
        );
    }
}
