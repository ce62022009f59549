//! Byte shape of the exported training package: Go field order, omitempty, arrays always present.

use serde_json::json;

use super::*;
use crate::gojson::serialize_package;
use crate::hash::content_hash;
use crate::ranking::{derive_pairwise, parse_ranking, ranked_feedback_event_id};
use crate::template::parse_template;
use crate::template::tests::template_text;
use crate::validate::validate_training_package_json;

pub(crate) fn minimal_package() -> TrainingPackage {
    let content = template_text("planner", "Planner", "# Plan <carefully> & well\n");
    let metadata = parse_template(&content).unwrap().metadata;
    TrainingPackage::new(
        TemplateSnapshot {
            id: "planner".into(),
            version_id: "planner@v1".into(),
            version_number: 1,
            version_state: "current".into(),
            content_hash: content_hash(&content),
            source_repo: "owner/repo".into(),
            source_ref: "main".into(),
            source_path: "agents/planner.md".into(),
            resolved_commit: "abc".into(),
            metadata,
            content,
        },
        EvalRun {
            id: "run-1".into(),
            template_id: "planner".into(),
            template_version_id: "planner@v1".into(),
            target_repo: "owner/repo".into(),
            state: "draft".into(),
            ..Default::default()
        },
    )
}

/// A ranked explore run with one item of four options and a ranking with a tie.
pub(crate) fn ranked_package() -> TrainingPackage {
    let mut pkg = minimal_package();
    pkg.training_mode = "explore".into();
    pkg.eval_run.mode = "explore".into();
    pkg.eval_run.exploration_level = "high".into();
    pkg.eval_run.options_count = 4;
    let labels = ["a", "b", "c", "d"];
    pkg.artifacts = labels
        .iter()
        .map(|l| ArtifactRef {
            id: format!("art-{l}"),
            hash: content_hash(l),
            media_type: "text/markdown".into(),
            size_bytes: 1,
            driver: "local".into(),
        })
        .collect();
    pkg.items = vec![EvalItem {
        id: "item-1".into(),
        title: "README plan".into(),
        options: labels
            .iter()
            .map(|l| EvalReviewOption {
                label: (*l).into(),
                artifact_id: format!("art-{l}"),
                ..Default::default()
            })
            .collect(),
        metadata: Some(json!({"split": "train"})),
        ..Default::default()
    }];
    let ranking = parse_ranking(&["C > A = D > B"], None).unwrap();
    let id = ranked_feedback_event_id("run-1", "item-1", "alice", "markdown", "/packets/run-1");
    let event = RankedFeedbackEvent {
        id,
        run_id: "run-1".into(),
        item_id: "item-1".into(),
        ranking: ranking.labels(),
        tie_groups: ranking.tie_groups(),
        winner: "c".into(),
        useful_traits: Some(json!({"c": ["bold"]})),
        reviewer: "alice".into(),
        source: "markdown".into(),
        source_url: "/packets/run-1".into(),
        created_at: "2026-05-31T10:00:00Z".into(),
        ..Default::default()
    };
    pkg.pairwise_preferences = derive_pairwise(&event);
    pkg.ranked_feedback_events = vec![event];
    pkg
}

#[test]
fn s01_s02_minimal_package_top_level_keys_in_go_order() {
    let text = serialize_package(&minimal_package()).unwrap();
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    let keys: Vec<&str> = value
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "kind",
            "contract_version",
            "template",
            "eval_run",
            "items",
            "artifacts",
            "feedback_events"
        ]
    );
    assert!(text.starts_with(
        "{\n  \"kind\": \"gitmoot-skillopt-training-package\",\n  \"contract_version\": 1,\n"
    ));
    assert!(
        text.contains("\n  \"items\": [],\n  \"artifacts\": [],\n  \"feedback_events\": []\n}\n"),
        "{text}"
    );
    // S-02: no binary_verdicts key without verdicts; S-06: no projection fields.
    for absent in [
        "binary_verdicts",
        "has_score",
        "normalized",
        "feedback_context",
        "evaluator_profile",
        "training_mode",
    ] {
        assert!(!text.contains(absent), "{absent} must be absent");
    }
}

#[test]
fn go_escapes_html_in_template_content() {
    let text = serialize_package(&minimal_package()).unwrap();
    assert!(
        text.contains(r"# Plan \u003ccarefully\u003e \u0026 well\n"),
        "{text}"
    );
    assert!(!text.contains("<carefully>"));
}

#[test]
fn template_snapshot_and_metadata_field_order() {
    let text = serialize_package(&minimal_package().template).unwrap();
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    let keys: Vec<&str> = value
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "id",
            "version_id",
            "version_number",
            "version_state",
            "content_hash",
            "source_repo",
            "source_ref",
            "source_path",
            "resolved_commit",
            "metadata",
            "content"
        ]
    );
    let meta: Vec<&str> = value["metadata"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        meta,
        [
            "id",
            "name",
            "description",
            "kind",
            "version",
            "capabilities",
            "runtime_compatibility",
            "tags",
            "inputs",
            "outputs"
        ]
    );
}

#[test]
fn s02_binary_verdicts_appear_only_when_recorded() {
    let mut pkg = minimal_package();
    let before = serialize_package(&pkg).unwrap();
    pkg.binary_verdicts = vec![BinaryVerdict {
        question_id: "q1".into(),
        dimension: "clarity".into(),
        verdict: "yes".into(),
        explanation: "clear".into(),
        question_weight: 1.0,
        dimension_weight: 0.0,
        created_at: "2026-05-31T10:00:00Z".into(),
    }];
    let after = serialize_package(&pkg).unwrap();
    assert!(after.ends_with(
        "  \"binary_verdicts\": [\n    {\n      \"question_id\": \"q1\",\n      \"dimension\": \"clarity\",\n      \"verdict\": \"yes\",\n      \"explanation\": \"clear\",\n      \"question_weight\": 1,\n      \"created_at\": \"2026-05-31T10:00:00Z\"\n    }\n  ]\n}\n"
    ), "{after}");
    pkg.binary_verdicts.clear();
    assert_eq!(serialize_package(&pkg).unwrap(), before);
}

#[test]
fn s03_training_mode_is_top_level_only() {
    let mut pkg = minimal_package();
    pkg.training_mode = "refine".into();
    pkg.evaluator_config = Some(json!({"mode": "render-v1", "evaluator_id": "render-v1"}));
    let text = serialize_package(&pkg).unwrap();
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    let keys: Vec<&str> = value
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(&keys[..3], ["kind", "contract_version", "training_mode"]);
    assert_eq!(value["evaluator_config"]["mode"], "render-v1");
}

#[test]
fn s04_feedback_context_shape() {
    let ctx = FeedbackContext {
        feedback_source: "imported_human_review".into(),
        feedback_target: "baseline_review_outputs".into(),
        review_run_id: "run-1".into(),
        reviewed_skill_version: "planner@v1".into(),
        review_issue: String::new(),
        target_repo: "owner/repo".into(),
    };
    assert_eq!(
        crate::gojson::to_go_json_compact(&ctx).unwrap(),
        r#"{"feedback_source":"imported_human_review","feedback_target":"baseline_review_outputs","review_run_id":"run-1","reviewed_skill_version":"planner@v1","target_repo":"owner/repo"}"#
    );
}

#[test]
fn s05_ranked_package_with_ties_passes_the_strict_validator() {
    let pkg = ranked_package();
    assert_eq!(pkg.pairwise_preferences.len(), 5);
    let text = serialize_package(&pkg).unwrap();
    let parsed = validate_training_package_json(&text).unwrap();
    assert_eq!(parsed, pkg);
    // Round trip is byte-stable.
    assert_eq!(serialize_package(&parsed).unwrap(), text);
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        value["ranked_feedback_events"][0]["tie_groups"],
        json!([["a", "d"]])
    );
    assert!(
        value["pairwise_preferences"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p.get("useful_traits").is_none())
    );
}

#[test]
fn omitempty_rules_of_nested_types() {
    let item = EvalItem {
        id: "i".into(),
        ..Default::default()
    };
    assert_eq!(
        crate::gojson::to_go_json_compact(&item).unwrap(),
        r#"{"id":"i"}"#
    );
    let event = FeedbackEvent {
        choice: "a".into(),
        ..Default::default()
    };
    assert_eq!(
        crate::gojson::to_go_json_compact(&event).unwrap(),
        r#"{"run_id":"","item_id":"","choice":"a","reviewer":"","source":"","created_at":""}"#
    );
    let run = EvalRun {
        options_count: 0,
        metadata: Some(serde_json::Value::Null),
        ..Default::default()
    };
    // A present-but-null raw field is written, as Go writes a non-empty RawMessage "null".
    assert!(
        crate::gojson::to_go_json_compact(&run)
            .unwrap()
            .ends_with(r#""state":"","metadata":null}"#)
    );
}

/// Bytes shaped as Go's `json.MarshalIndent` writes a package built from nil slices: the
/// non-omitempty lists are `null` (`items`, `artifacts`, `feedback_events`, an event's `ranking`,
/// metadata `tags`) and every omitempty field is absent. They read as empty lists.
#[test]
fn go_shaped_bytes_with_null_lists_and_no_omitempty_fields_parse_as_empty() {
    let content = template_text("planner", "Planner", "# Plan\n");
    let hash = content_hash(&content);
    let go = format!(
        r#"{{
  "kind": "gitmoot-skillopt-training-package",
  "contract_version": 1,
  "template": {{
    "id": "planner", "version_id": "planner@v1", "version_number": 1, "version_state": "current",
    "content_hash": "{hash}", "source_repo": "", "source_ref": "", "source_path": "", "resolved_commit": "",
    "metadata": {{"id": "planner", "name": "Planner", "description": "Plans work", "kind": "agent-template",
      "version": 1, "capabilities": ["ask"], "runtime_compatibility": ["codex"], "tags": null, "inputs": null,
      "outputs": null}},
    "content": {content:?}
  }},
  "eval_run": {{"id": "run-1", "template_id": "planner", "template_version_id": "planner@v1", "target_repo": "", "state": "ready"}},
  "items": null,
  "artifacts": null,
  "feedback_events": null
}}
"#
    );
    let package = crate::validate::read_training_package(&go).expect("Go-shaped bytes read");
    assert!(
        package.items.is_empty()
            && package.artifacts.is_empty()
            && package.feedback_events.is_empty()
    );
    assert!(
        package.template.metadata.tags.is_empty() && package.template.metadata.outputs.is_empty()
    );
    assert_eq!(
        (
            package.training_mode.as_str(),
            package.eval_run.options_count
        ),
        ("", 0)
    );
    assert_eq!(package.feedback_context, None);
    // The Python optimizer's view still refuses the `null` lists (it crashes on them).
    assert_eq!(
        validate_training_package_json(&go).unwrap_err().to_string(),
        "training package items must be an array"
    );

    // Nested lists: an item without options (omitempty) and an event whose ranking is `null`.
    let event = r#"{"id": "ranked-feedback:x", "run_id": "run-1", "item_id": "i1", "ranking": null, "reviewer": "r", "source": "markdown", "created_at": "t"}"#;
    let event: RankedFeedbackEvent = serde_json::from_str(event).unwrap();
    assert!(
        event.ranking.is_empty() && event.tie_groups.is_empty() && event.useful_traits.is_none()
    );
    let item: EvalItem =
        serde_json::from_str(r#"{"id": "i1", "options": null, "metadata": null}"#).unwrap();
    assert_eq!((item.options.len(), item.metadata), (0, None));
}
