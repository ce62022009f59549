//! `plan` and `distill`: candidate vs no candidate, idempotence, and the written package
//! passing the importer's checks.

use std::collections::BTreeSet;

use skillforge_contract::{
    BaseVersion, ImportOptions, ImportState, InstalledTemplate, UNCHANGED_CONTENT_REASON,
    validate_candidate_import,
};

use super::*;
use crate::distill::fixtures::{package, package_with_content, rich_package, template_content};
use crate::distill::section::GUIDANCE_HEADING;

fn import_state(package: &TrainingPackage) -> ImportState {
    let base = BaseVersion {
        id: package.template.version_id.clone(),
        template_id: package.template.id.clone(),
        content_hash: package.template.content_hash.clone(),
        content: package.template.content.clone(),
    };
    ImportState {
        template: Some(InstalledTemplate {
            id: package.template.id.clone(),
            current_version: Some(base.clone()),
        }),
        pinned_base: Some(base),
        existing_artifact_ids: BTreeSet::new(),
    }
}

#[test]
fn plan_cases() {
    struct Case {
        name: &'static str,
        package: TrainingPackage,
        dry_run: bool,
        reason: Option<&'static str>,
    }
    let cases = [
        Case {
            name: "rich evidence",
            package: rich_package(),
            dry_run: false,
            reason: None,
        },
        Case {
            name: "no evidence",
            package: package(),
            dry_run: false,
            reason: Some(NO_ACTIONABLE_FEEDBACK),
        },
        Case {
            name: "dry run",
            package: rich_package(),
            dry_run: true,
            reason: Some(CANDIDATE_CONTENT_UNCHANGED),
        },
        Case {
            name: "dry run, no evidence",
            package: package(),
            dry_run: true,
            reason: Some(NO_ACTIONABLE_FEEDBACK),
        },
    ];
    for case in cases {
        let config = DistillConfig {
            dry_run: case.dry_run,
            ..DistillConfig::default()
        };
        let plan = plan(&case.package, &config).unwrap();
        assert_eq!(plan.no_candidate_reason, case.reason, "{}", case.name);
        assert_eq!(
            plan.content == case.package.template.content,
            case.reason.is_some(),
            "{}",
            case.name
        );
    }
}

#[test]
fn candidate_body_keeps_frontmatter_and_lists_most_supported_first() {
    // Ties (weight, tier, count) fall back to the key: avoid < improve < keep < prefer.
    let package = rich_package();
    let plan = plan(&package, &DistillConfig::default()).unwrap();
    let base = &package.template.content;
    let (fm, _) = base.split_at(base.find("---\nPlan").unwrap() + 4);
    assert!(
        plan.content.starts_with(fm),
        "frontmatter changed:\n{}",
        plan.content
    );
    assert!(
        plan.content
            .contains("Plan the task.\n\n## Guidance from review evidence\n"),
        "{}",
        plan.content
    );
    let lines: Vec<&str> = plan
        .content
        .lines()
        .filter(|l| l.starts_with("- "))
        .collect();
    assert_eq!(
        lines,
        [
            "- Add a test plan. (support 2: human 1, judge 1)",
            "- Avoid: Marketing fluff. (support 1: human 1)",
            "- State assumptions up front. (support 1: human 1)",
            "- Keep: Short summary first. (support 1: human 1)",
            "- Aim for: More concrete steps. (support 1: human 1)",
            "- Name the files to change. (support 1: verifiable 1)",
            "- Pass the `required_files` check: plan.md missing. (support 1: verifiable 1)",
            "- Make sure `has_test` (correctness) holds: No test was added. (support 1: judge 1)",
        ]
    );
    assert_eq!(plan.content.matches(GUIDANCE_HEADING).count(), 1);
}

#[test]
fn distilling_its_own_output_with_the_same_evidence_is_stable() {
    let first = plan(&rich_package(), &DistillConfig::default()).unwrap();
    assert!(first.no_candidate_reason.is_none());
    let mut again = rich_package();
    let revised = package_with_content(&first.content);
    again.template = revised.template;
    let second = plan(&again, &DistillConfig::default()).unwrap();
    assert_eq!(second.content, first.content);
    assert_eq!(
        second.no_candidate_reason,
        Some(CANDIDATE_CONTENT_UNCHANGED)
    );
}

// Issue 37 item 10: a new run's evidence is merged into the section, never in place of it.
#[test]
fn new_evidence_is_merged_into_the_section() {
    let first = plan(&rich_package(), &DistillConfig::default()).unwrap();
    let mut next = package_with_content(&first.content);
    next.eval_run.id = "run-2".into();
    next.feedback_events = vec![crate::distill::fixtures::feedback(
        "item-1",
        "neither",
        "Too vague",
        "bob",
        "markdown",
    )];
    let second = plan(&next, &DistillConfig::default()).unwrap();
    assert!(second.no_candidate_reason.is_none());
    assert_eq!(second.content.matches(GUIDANCE_HEADING).count(), 1);
    assert!(
        second
            .content
            .contains("- Address: Too vague. (support 1: human 1)")
    );
    assert!(
        second.content.contains("Add a test plan"),
        "the earlier run's guidance stays: {}",
        second.content
    );
    assert!(
        second
            .content
            .contains("<!-- Evidence from runs: run-1, run-2 -->"),
        "{}",
        second.content
    );
}

#[test]
fn invalid_template_is_refused_before_writing() {
    let mut p = package();
    p.template.content = "no frontmatter".into();
    let dir = tempfile::tempdir().unwrap();
    let out = DistillOutput::new(dir.path().join("out"), dir.path().join("candidate.json"));
    let err = distill(&p, dir.path(), &out, &DistillConfig::default()).unwrap_err();
    assert!(err.is_invalid_input(), "{err}");
    assert!(!dir.path().join("out").exists());
    assert!(!dir.path().join("candidate.json").exists());
}

#[test]
fn written_candidate_passes_import() {
    let package = rich_package();
    let dir = tempfile::tempdir().unwrap();
    let out = DistillOutput::new(dir.path().join("out"), dir.path().join("candidate.json"));
    let report = distill(&package, dir.path(), &out, &DistillConfig::default()).unwrap();
    assert!(report.promotable);
    assert_eq!(report.no_candidate_reason, None);
    let text = std::fs::read_to_string(&out.candidate_output).unwrap();
    let written: CandidatePackage = serde_json::from_str(&text).unwrap();
    assert_eq!(written, report.package);
    let options = ImportOptions {
        artifact_dir: Some(&out.artifact_dir),
        has_blob_store: true,
    };
    let verified = validate_candidate_import(&written, options, &import_state(&package)).unwrap();
    assert_eq!(verified.base_version_id, "planner@v1");
    assert_eq!(verified.diff_artifact_id, "run-1/candidate-diff");
    let diff = &verified
        .artifacts
        .iter()
        .find(|a| a.id == "run-1/candidate-diff")
        .unwrap()
        .bytes;
    let diff = String::from_utf8_lossy(diff);
    assert!(
        diff.starts_with("--- a/planner.md\n+++ b/planner.md\n"),
        "{diff}"
    );
    assert!(diff.contains("+## Guidance from review evidence"), "{diff}");
    assert_eq!(
        std::fs::read_to_string(out.out_root.join("initial_skill.md")).unwrap(),
        package.template.content
    );

    // Deterministic: a second run writes the same bytes.
    let again = distill(&package, dir.path(), &out, &DistillConfig::default()).unwrap();
    assert_eq!(again.package, report.package);
    assert_eq!(
        std::fs::read_to_string(&out.candidate_output).unwrap(),
        text
    );
}

#[test]
fn no_candidate_packages_are_refused_by_import_with_their_reason() {
    let cases = [
        (package(), false, NO_ACTIONABLE_FEEDBACK),
        (rich_package(), true, CANDIDATE_CONTENT_UNCHANGED),
        (
            package_with_content(&template_content("Plan the task.\n")),
            true,
            NO_ACTIONABLE_FEEDBACK,
        ),
    ];
    for (package, dry_run, reason) in cases {
        let dir = tempfile::tempdir().unwrap();
        let out = DistillOutput::new(dir.path().join("out"), dir.path().join("candidate.json"));
        let report = distill(
            &package,
            dir.path(),
            &out,
            &DistillConfig {
                dry_run,
                ..DistillConfig::default()
            },
        )
        .unwrap();
        assert!(!report.promotable);
        assert_eq!(report.no_candidate_reason.as_deref(), Some(reason));
        assert_eq!(report.package.candidate.content, package.template.content);
        let eval_report = report.package.eval_report.as_ref().unwrap();
        assert_eq!(eval_report["promotable"], false);
        assert_eq!(eval_report["no_candidate_reason"], reason);
        let options = ImportOptions {
            artifact_dir: Some(&out.artifact_dir),
            has_blob_store: true,
        };
        let err = validate_candidate_import(&report.package, options, &import_state(&package))
            .unwrap_err();
        assert!(err.is_no_candidate(), "{err}");
        match &report.no_candidate_hint {
            Some(hint) => {
                assert_eq!(reason, NO_ACTIONABLE_FEEDBACK);
                assert_eq!(eval_report["no_candidate_hint"], hint.as_str());
                assert_eq!(
                    err.to_string(),
                    format!(
                        "optimizer produced no candidate: {reason} (from eval_report) ({hint})"
                    )
                );
            }
            None => assert_eq!(
                err.to_string(),
                format!("optimizer produced no candidate: {reason} (from eval_report)")
            ),
        }
        assert_eq!(
            report.no_candidate_hint.is_some(),
            reason == NO_ACTIONABLE_FEEDBACK
        );
        assert!(!err.to_string().contains(UNCHANGED_CONTENT_REASON), "{err}");
    }
}

#[test]
fn run_ids_become_safe_path_components() {
    let table: &[(&str, &str)] = &[
        ("run-1", "run-1"),
        ("auto-trace:planner@v1", "auto-trace_planner@v1"),
        ("a/../b", "a_.._b"),
        ("..", "_"),
    ];
    for (input, want) in table {
        assert_eq!(path_component(input), *want, "{input}");
    }
}
