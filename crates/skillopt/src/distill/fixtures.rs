//! Test fixtures: a valid training package for `planner@v1` and event builders.

use serde_json::{Value, json};
use skillforge_contract::{
    BinaryVerdict, EvalItem, EvalRun, FeedbackEvent, Metadata, RankedFeedbackEvent,
    TemplateSnapshot, TrainingPackage, content_hash, parse_template, ranked_feedback_event_id,
};

pub(crate) const RUN: &str = "run-1";

pub(crate) fn template_content(body: &str) -> String {
    format!(
        "---\nid: planner\nname: Planner\ndescription: Plans work\nkind: agent-template\nversion: 1\ncapabilities: [ask]\nruntime_compatibility: [codex]\ntags: [planning]\ninputs: [task]\noutputs: [plan]\n---\n{body}"
    )
}

/// A package with items `item-1` (A/B) and `item-2` (options A, B, C), no feedback.
pub(crate) fn package_with_content(content: &str) -> TrainingPackage {
    let metadata: Metadata = parse_template(content).expect("fixture template").metadata;
    let template = TemplateSnapshot {
        id: "planner".into(),
        version_id: "planner@v1".into(),
        version_number: 1,
        version_state: "current".into(),
        content_hash: content_hash(content),
        source_repo: "local".into(),
        source_ref: "main".into(),
        source_path: "planner.md".into(),
        resolved_commit: "abc".into(),
        metadata,
        content: content.to_owned(),
    };
    let run = EvalRun {
        id: RUN.into(),
        template_id: "planner".into(),
        template_version_id: "planner@v1".into(),
        target_repo: "owner/repo".into(),
        state: "open".into(),
        mode: "distill".into(),
        ..EvalRun::default()
    };
    let mut package = TrainingPackage::new(template, run);
    package.training_mode = "distill".into();
    package.items = vec![
        EvalItem {
            id: "item-1".into(),
            title: "first".into(),
            ..EvalItem::default()
        },
        EvalItem {
            id: "item-2".into(),
            title: "second".into(),
            ..EvalItem::default()
        },
    ];
    package
}

pub(crate) fn package() -> TrainingPackage {
    package_with_content(&template_content("Plan the task.\n"))
}

pub(crate) fn ranked(
    item: &str,
    reviewer: &str,
    source: &str,
    improvements: Value,
    rejected: Value,
    useful: Value,
) -> RankedFeedbackEvent {
    RankedFeedbackEvent {
        id: ranked_feedback_event_id(RUN, item, reviewer, source, ""),
        run_id: RUN.into(),
        item_id: item.into(),
        ranking: vec![],
        required_improvements: (!improvements.is_null()).then_some(improvements),
        rejected_traits: (!rejected.is_null()).then_some(rejected),
        useful_traits: (!useful.is_null()).then_some(useful),
        reviewer: reviewer.into(),
        source: source.into(),
        created_at: "2026-01-01T00:00:00Z".into(),
        ..RankedFeedbackEvent::default()
    }
}

pub(crate) fn feedback(
    item: &str,
    choice: &str,
    reasoning: &str,
    reviewer: &str,
    source: &str,
) -> FeedbackEvent {
    FeedbackEvent {
        run_id: RUN.into(),
        item_id: item.into(),
        choice: choice.into(),
        reasoning: reasoning.into(),
        reviewer: reviewer.into(),
        source: source.into(),
        source_url: String::new(),
        created_at: "2026-01-01T00:00:00Z".into(),
    }
}

pub(crate) fn verdict(
    question: &str,
    dimension: &str,
    verdict: &str,
    explanation: &str,
) -> BinaryVerdict {
    BinaryVerdict {
        question_id: question.into(),
        dimension: dimension.into(),
        verdict: verdict.into(),
        explanation: explanation.into(),
        ..BinaryVerdict::default()
    }
}

/// A package with evidence of every kind and tier.
pub(crate) fn rich_package() -> TrainingPackage {
    let mut p = package();
    p.ranked_feedback_events = vec![
        ranked(
            "item-2",
            "alice",
            "markdown",
            json!(["Add a test plan.", "State assumptions up front"]),
            json!({"B": ["Marketing fluff"], "C": ["marketing fluff."]}),
            json!({"A": ["Short summary first"]}),
        ),
        ranked(
            "item-2",
            "gitmoot-review",
            "auto-trace",
            json!(["add a test-plan"]),
            Value::Null,
            Value::Null,
        ),
    ];
    p.feedback_events = vec![
        feedback("item-1", "b", "More concrete steps.", "bob", "markdown"),
        feedback("item-1", "tie", "Both fine.", "carol", "markdown"),
    ];
    p.items[0].metadata = Some(json!({
        "evaluator_score": {
            "hard": 0.0,
            "failure": {
                "optimizer_hint": "Name the files to change",
                "failed_checks": [{"check": "required_files", "reason": "plan.md missing"}]
            }
        }
    }));
    p.binary_verdicts = vec![
        verdict("has_test", "correctness", "no", "No test was added."),
        verdict("has_summary", "clarity", "yes", "Has one."),
    ];
    p
}
