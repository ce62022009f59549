//! Evidence gathering, table-driven: each case is a package and the (kind, text, tier, origin)
//! items it must yield, in order.

use serde_json::{Value, json};

use super::*;
use crate::distill::fixtures::{feedback, package, ranked, rich_package, verdict};

type Want = (GuidanceKind, &'static str, EvidenceTier, EvidenceOrigin);

fn check(name: &str, package: &TrainingPackage, want: &[Want]) {
    let got: Vec<(GuidanceKind, String, EvidenceTier, EvidenceOrigin)> = gather_evidence(package)
        .items
        .into_iter()
        .map(|e| (e.kind, e.text, e.tier, e.origin))
        .collect();
    let want: Vec<(GuidanceKind, String, EvidenceTier, EvidenceOrigin)> = want
        .iter()
        .map(|(k, t, tier, o)| (*k, (*t).to_owned(), *tier, *o))
        .collect();
    assert_eq!(got, want, "{name}");
}

#[test]
fn gather_evidence_table() {
    use EvidenceOrigin::*;
    use EvidenceTier::*;
    use GuidanceKind::*;

    let mut p = package();
    p.ranked_feedback_events = vec![ranked(
        "item-2",
        "alice",
        "markdown",
        json!(["Add a test plan.", "  ", 7]),
        json!({"C": ["too long"], "B": ["marketing fluff"]}),
        json!(["short summary first"]),
    )];
    check(
        "ranked: improvements, rejected traits sorted by label, useful traits as a list",
        &p,
        &[
            (Improve, "Add a test plan", HumanGold, RequiredImprovement),
            (Avoid, "marketing fluff", HumanGold, RejectedTrait),
            (Avoid, "too long", HumanGold, RejectedTrait),
            (Keep, "short summary first", HumanGold, UsefulTrait),
        ],
    );

    let mut p = package();
    p.ranked_feedback_events = vec![ranked(
        "item-2",
        "alice",
        "markdown",
        json!(["Add a plan", "add a PLAN."]),
        json!("not a trait map"),
        Value::Null,
    )];
    check(
        "one event supports a key once; a string is not a trait map but one trait",
        &p,
        &[
            (Improve, "Add a plan", HumanGold, RequiredImprovement),
            (Avoid, "not a trait map", HumanGold, RejectedTrait),
        ],
    );

    let mut p = package();
    p.feedback_events = vec![
        feedback("item-1", "b", "More concrete steps.", "bob", "markdown"),
        feedback("item-1", "a", "Shorter.", "bob", "github"),
        feedback(
            "item-1",
            "neither",
            "Both skip the risks.",
            "bob",
            "markdown",
        ),
        feedback("item-1", "tie", "Same.", "bob", "markdown"),
        feedback("item-1", "skip", "n/a", "bob", "markdown"),
        feedback("item-1", "b", "", "bob", "markdown"),
        feedback(
            "owner/repo#3",
            "a",
            "Merged with real CI.",
            "gitmoot-auto",
            "auto-trace",
        ),
        feedback(
            "owner/repo#4",
            "b",
            "Blocked at the merge gate.",
            "gitmoot-auto",
            "auto-trace",
        ),
    ];
    check(
        "A/B choices: b human prefer, a human keep, neither address, automatic a skipped, b address",
        &p,
        &[
            (Prefer, "More concrete steps", HumanGold, FeedbackReasoning),
            (Keep, "Shorter", HumanGold, FeedbackReasoning),
            (Address, "Both skip the risks", HumanGold, FeedbackReasoning),
            (
                Address,
                "Blocked at the merge gate",
                VerifiableFloor,
                FeedbackReasoning,
            ),
        ],
    );

    let mut p = package();
    p.feedback_events = vec![feedback(
        "hard#owner/repo#5",
        "b",
        "Optimizer hint:\nRun the tests\nbefore finishing\n\nRequired improvements:\n- Add a test\n\nRejected traits:\nA: skipping tests\n\nReasoning:\nhard verifier failed",
        "gitmoot-verifier",
        "auto-trace",
    )];
    check(
        "projected reasoning of a negative outcome is split into its sections; a verifier's summary is no line",
        &p,
        &[
            (
                Improve,
                "Run the tests before finishing",
                VerifiableFloor,
                OptimizerHint,
            ),
            (Improve, "Add a test", VerifiableFloor, RequiredImprovement),
            (Avoid, "skipping tests", VerifiableFloor, RejectedTrait),
        ],
    );

    let mut p = package();
    p.items[0].metadata = Some(json!({
        "evaluator_score": {"contract_status": "failed", "failure": {
            "optimizer_hint": "Ship an index.html",
            "failed_checks": [{"check": "required_files", "reason": "index.html missing"}, {"check": "x", "reason": " "}]
        }},
        "evaluator_scores": [
            {"soft": 0.2, "judge_evaluator_id": "judge-1", "gate_rejection": {"optimizer_hint": "Use the brand colours"}},
            {"soft": 0.1, "fail_reason": "judge score below gate"},
            "not a score"
        ]
    }));
    check(
        "evaluator scores: hints by verdict source, failed checks verifiable, fail_reason only when unexplained",
        &p,
        &[
            (
                Improve,
                "Ship an index.html",
                VerifiableFloor,
                OptimizerHint,
            ),
            (
                Improve,
                "Pass the `required_files` check: index.html missing",
                VerifiableFloor,
                FailedCheck,
            ),
            (Improve, "Use the brand colours", Judge, OptimizerHint),
            (Address, "judge score below gate", Judge, FailedCheck),
        ],
    );

    let mut p = package();
    p.binary_verdicts = vec![
        verdict("has_test", "correctness", "no", "No test was added."),
        verdict("has_summary", "clarity", "yes", "ok"),
        verdict("cites", "", "NO", ""),
    ];
    check(
        "BINEVAL: a lesson per no verdict, none for yes",
        &p,
        &[
            (
                Lesson,
                "`has_test` (correctness) holds: No test was added",
                Judge,
                BinaryLesson,
            ),
            (Lesson, "`cites`", Judge, BinaryLesson),
        ],
    );

    check("no evidence", &package(), &[]);
}

#[test]
fn repeated_bineval_failures_share_a_key() {
    let mut p = package();
    p.binary_verdicts = vec![
        verdict("has_test", "correctness", "no", "first"),
        verdict("has_test", "correctness", "no", "second"),
    ];
    let gathered = gather_evidence(&p);
    assert_eq!(gathered.items.len(), 2);
    assert_eq!(gathered.items[0].key, gathered.items[1].key);
    assert_eq!(gathered.counts.binary_no_verdicts, 2);
}

#[test]
fn counts_every_source() {
    let gathered = gather_evidence(&rich_package());
    assert_eq!(
        gathered.counts,
        SourceCounts {
            ranked_feedback_events: 2,
            feedback_events: 2,
            evaluator_scores: 1,
            binary_no_verdicts: 1,
            replay_gate_failures: 0
        }
    );
}

#[test]
fn clean_text_and_keys() {
    let table: &[(&str, &str)] = &[
        ("  Add a\n test plan. ", "Add a test plan"),
        ("- bullet item;", "bullet item"),
        ("• dot bullet", "dot bullet"),
        ("...", ""),
        ("Ends with?", "Ends with?"),
    ];
    for (input, want) in table {
        assert_eq!(clean_text(input), *want, "{input:?}");
    }
    let long = "x".repeat(MAX_EVIDENCE_CHARS + 10);
    assert_eq!(clean_text(&long).chars().count(), MAX_EVIDENCE_CHARS);
    assert!(clean_text(&long).ends_with('…'));
    assert_eq!(
        normalize_key(GuidanceKind::Improve, "Add a test-plan!"),
        "improve:add a test plan"
    );
    assert_ne!(
        normalize_key(GuidanceKind::Improve, "x"),
        normalize_key(GuidanceKind::Avoid, "x")
    );
}

// Issue 34 item 11: the replay gate's retry feeds its failing items through
// `eval_run.metadata.replay_gate_failures`; each with an expected text is a verifiable rule naming
// the prompt, an item without one is skipped, and the count is reported only when there are any.
#[test]
fn replay_gate_failures_become_rules() {
    let mut p = package();
    assert_eq!(gather_evidence(&p).counts.replay_gate_failures, 0);
    assert!(
        serde_json::to_value(gather_evidence(&p).counts)
            .unwrap()
            .get("replay_gate_failures")
            .is_none()
    );
    p.eval_run.metadata = Some(json!({REPLAY_GATE_FAILURES_KEY: [
        {"id": "release", "prompt": "Plan the release", "expected": "update the changelog.", "note": "exit 1"},
        {"id": "bare", "prompt": "", "expected": "a title"},
        {"id": "empty", "prompt": "x", "expected": "  "},
    ]}));
    let gathered = gather_evidence(&p);
    assert_eq!(gathered.counts.replay_gate_failures, 2);
    let lines: Vec<(&str, EvidenceTier, EvidenceOrigin, &str)> = gathered
        .items
        .iter()
        .map(|e| (e.text.as_str(), e.tier, e.origin, e.source_ref.as_str()))
        .collect();
    assert_eq!(
        lines,
        [
            (
                "When asked \"Plan the release\", include \"update the changelog\"",
                EvidenceTier::VerifiableFloor,
                EvidenceOrigin::ReplayFailure,
                "replay:release"
            ),
            (
                "Include \"a title\"",
                EvidenceTier::VerifiableFloor,
                EvidenceOrigin::ReplayFailure,
                "replay:bare"
            ),
        ]
    );
}
