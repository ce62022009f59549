//! Candidate import refusals, one per check of facts §2, and the no-candidate gate.

use std::fs;

use serde_json::json;

use super::*;
use crate::candidate::{CandidateSummary, CandidateTemplate};
use crate::template::tests::template_text;

const BASE_BODY: &str = "# Planner\nPlan the work.\n";
const NEW_BODY: &str = "# Planner\nPlan the work in small steps.\n";

struct Fixture {
    dir: tempfile::TempDir,
    package: CandidatePackage,
    state: ImportState,
}

fn base_version() -> BaseVersion {
    let content = template_text("planner", "Planner", BASE_BODY);
    BaseVersion {
        id: "planner@v1".into(),
        template_id: "planner".into(),
        content_hash: content_hash(&content),
        content,
    }
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("diff.patch"), b"--- a\n+++ b\n").unwrap();
    let content = template_text("planner", "Planner", NEW_BODY);
    let metadata = parse_template(&content).unwrap().metadata;
    let package = CandidatePackage {
        kind: CANDIDATE_PACKAGE_KIND.into(),
        contract_version: 1,
        template_id: "planner".into(),
        base_version_id: String::new(),
        candidate: CandidateTemplate { content, metadata },
        eval_report: Some(json!({"promotable": true})),
        summary: CandidateSummary {
            diff_artifact_id: "run-1/candidate-diff".into(),
            score: Some(0.75),
            preference_summary: "C wins".into(),
            ..Default::default()
        },
        artifacts: vec![CandidateArtifactRef {
            id: "run-1/candidate-diff".into(),
            path: "diff.patch".into(),
            hash: content_hash(b"--- a\n+++ b\n"),
            media_type: "text/x-diff".into(),
            driver: "gitmoot-skillopt".into(),
            size_bytes: Some(12),
        }],
    };
    let state = ImportState {
        template: Some(InstalledTemplate {
            id: "planner".into(),
            current_version: Some(base_version()),
        }),
        pinned_base: None,
        existing_artifact_ids: BTreeSet::new(),
    };
    Fixture {
        dir,
        package,
        state,
    }
}

fn run(f: &Fixture) -> Result<VerifiedCandidate, ImportError> {
    validate_candidate_import(
        &f.package,
        ImportOptions {
            artifact_dir: Some(f.dir.path()),
            has_blob_store: true,
        },
        &f.state,
    )
}

#[test]
fn s51_valid_candidate_is_verified_not_promoted() {
    // S-51: validation only returns what to store as pending; it has no promote path.
    let f = fixture();
    let verified = run(&f).unwrap();
    assert_eq!(verified.base_version_id, "planner@v1");
    assert_eq!(verified.artifacts.len(), 1);
    assert_eq!(verified.artifacts[0].bytes, b"--- a\n+++ b\n");
    assert_eq!(verified.eval_report_json, r#"{"promotable":true}"#);
    assert_eq!(
        verified.content_hash,
        content_hash(&f.package.candidate.content)
    );
}

type Mutation = fn(&mut Fixture);

fn check_refusal(name: &str, mutate: Mutation, want: &str) {
    let mut f = fixture();
    mutate(&mut f);
    let err = run(&f).expect_err(name).to_string();
    assert!(err.contains(want), "{name}: got {err:?}, want {want:?}");
}

#[test]
fn s90_s91_artifact_refusals_in_check_order() {
    let table: &[(&str, Mutation, &str)] = &[
        (
            "missing id",
            |f| f.package.artifacts[0].id = " ".into(),
            "candidate artifact 1 id is required",
        ),
        (
            "duplicate id",
            |f| {
                let dup = f.package.artifacts[0].clone();
                f.package.artifacts.push(dup);
            },
            "candidate artifact \"run-1/candidate-diff\" is duplicated",
        ),
        (
            "media type",
            |f| f.package.artifacts[0].media_type.clear(),
            "media_type is required",
        ),
        (
            "driver",
            |f| f.package.artifacts[0].driver.clear(),
            "driver is required",
        ),
        (
            "negative size",
            |f| f.package.artifacts[0].size_bytes = Some(-1),
            "size_bytes cannot be negative",
        ),
        (
            "short hash",
            |f| f.package.artifacts[0].hash = "sha256:abc".into(),
            "artifact hash must be 64 hex characters",
        ),
        (
            "non-hex hash",
            |f| f.package.artifacts[0].hash = "g".repeat(64),
            "artifact hash is not valid hex",
        ),
        (
            "empty path",
            |f| f.package.artifacts[0].path.clear(),
            "path is required",
        ),
        (
            "absolute path",
            |f| f.package.artifacts[0].path = "/etc/passwd".into(),
            "must be a relative path inside artifact-dir",
        ),
        (
            "traversal",
            |f| f.package.artifacts[0].path = "../x".into(),
            "must be a relative path inside artifact-dir",
        ),
        (
            "hidden traversal",
            |f| f.package.artifacts[0].path = "a/../../x".into(),
            "must be a relative path inside artifact-dir",
        ),
        (
            "missing file",
            |f| f.package.artifacts[0].path = "missing.md".into(),
            "read \"missing.md\"",
        ),
        (
            "size mismatch",
            |f| f.package.artifacts[0].size_bytes = Some(5),
            "size_bytes is 5, want 12",
        ),
        (
            "hash mismatch",
            |f| f.package.artifacts[0].hash = content_hash("other"),
            "hash is sha256:",
        ),
    ];
    for (name, mutate, want) in table {
        check_refusal(name, *mutate, want);
    }
}

#[test]
fn s90_artifacts_require_artifact_dir() {
    let f = fixture();
    let err = validate_candidate_import(
        &f.package,
        ImportOptions {
            artifact_dir: None,
            has_blob_store: true,
        },
        &f.state,
    );
    assert_eq!(err.unwrap_err(), ImportError::ArtifactDirRequired);
    let err = validate_candidate_import(
        &f.package,
        ImportOptions {
            artifact_dir: Some(f.dir.path()),
            has_blob_store: false,
        },
        &f.state,
    );
    assert_eq!(err.unwrap_err(), ImportError::BlobStoreRequired);
}

#[test]
fn s91_symlink_resolving_outside_is_refused() {
    let f = fixture();
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("secret"), b"--- a\n+++ b\n").unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret"), f.dir.path().join("link")).unwrap();
    let mut f = f;
    f.package.artifacts[0].path = "link".into();
    let err = run(&f).unwrap_err();
    assert!(matches!(err, ImportError::ArtifactEscapes { .. }), "{err}");
    // A symlink that stays inside is fine.
    std::os::unix::fs::symlink(f.dir.path().join("diff.patch"), f.dir.path().join("inner"))
        .unwrap();
    f.package.artifacts[0].path = "inner".into();
    run(&f).unwrap();
}

#[test]
fn s86_s87_package_refusals_in_check_order() {
    let table: &[(&str, Mutation, &str)] = &[
        (
            "kind",
            |f| f.package.kind = "gitmoot-skillopt-training-package".into(),
            "candidate package kind must be",
        ),
        (
            "contract version",
            |f| f.package.contract_version = 2,
            "candidate package contract_version must be 1, got 2",
        ),
        (
            "empty template id",
            |f| f.package.template_id.clear(),
            "agent template id is required",
        ),
        (
            "bad template id",
            |f| f.package.template_id = "Planner".into(),
            "invalid agent template id \"Planner\"",
        ),
        (
            "not installed",
            |f| f.state.template = None,
            "agent template planner is not installed",
        ),
        (
            "empty content",
            |f| f.package.candidate.content.clear(),
            "validate candidate template: template content is empty",
        ),
        (
            "no frontmatter",
            |f| f.package.candidate.content = "body".into(),
            "validate candidate template: template must start",
        ),
        (
            "frontmatter id mismatch",
            |f| {
                f.package.candidate.content = template_text("other", "Planner", NEW_BODY);
                f.package.candidate.metadata.id = "other".into();
            },
            "candidate template id \"other\" does not match package template_id \"planner\"",
        ),
        (
            "metadata mismatch",
            |f| f.package.candidate.metadata.name = "planner2".into(),
            "candidate metadata does not match candidate template frontmatter",
        ),
        (
            "base not found",
            |f| f.package.base_version_id = "planner@v9".into(),
            "load base version \"planner@v9\": not found",
        ),
        (
            "base of another template",
            |f| {
                f.package.base_version_id = "coder@v1".into();
                f.state.pinned_base = Some(BaseVersion {
                    id: "coder@v1".into(),
                    template_id: "coder".into(),
                    ..base_version()
                });
            },
            "base version \"coder@v1\" belongs to template \"coder\", want \"planner\"",
        ),
        (
            "no current version",
            |f| f.state.template.as_mut().unwrap().current_version = None,
            "agent template planner has no current version",
        ),
        (
            "invalid diff artifact",
            |f| f.package.summary.diff_artifact_id = "nope".into(),
            "load summary diff artifact \"nope\": not found",
        ),
        (
            "artifact exists",
            |f| {
                f.state
                    .existing_artifact_ids
                    .insert("run-1/candidate-diff".into());
            },
            "candidate artifact \"run-1/candidate-diff\" already exists",
        ),
    ];
    for (name, mutate, want) in table {
        check_refusal(name, *mutate, want);
    }
}

#[test]
fn diff_artifact_may_name_a_stored_artifact() {
    let mut f = fixture();
    f.package.artifacts.clear();
    f.package.summary.diff_artifact_id = "old-diff".into();
    f.state.existing_artifact_ids.insert("old-diff".into());
    let verified = run(&f).unwrap();
    assert_eq!(verified.diff_artifact_id, "old-diff");
}

#[test]
fn s88_promotable_false_with_reason_is_no_candidate() {
    let mut f = fixture();
    f.package.summary.metadata =
        Some(json!({"promotable": false, "no_candidate_reason": "no gain"}));
    let err = run(&f).unwrap_err();
    assert!(err.is_no_candidate());
    // The refusal names the field that said no, and that the other one said promotable.
    assert_eq!(
        err.to_string(),
        "optimizer produced no candidate: no gain (from summary.metadata; eval_report says promotable: true)"
    );
    f.package.eval_report = None;
    assert_eq!(
        run(&f).unwrap_err().to_string(),
        "optimizer produced no candidate: no gain (from summary.metadata)"
    );

    // eval_report is consulted first.
    f.package.eval_report =
        Some(json!({"promotable": false, "no_candidate_reason": "report says so"}));
    assert_eq!(
        run(&f).unwrap_err().to_string(),
        "optimizer produced no candidate: report says so (from eval_report)"
    );

    // promotable true, or no reason, passes the metadata gate.
    f.package.eval_report = Some(json!({"promotable": true, "no_candidate_reason": "ignored"}));
    f.package.summary.metadata = Some(json!({"promotable": false}));
    run(&f).unwrap();
}

#[test]
fn s89_unchanged_content_is_no_candidate() {
    let mut f = fixture();
    f.package.candidate.content = base_version().content;
    let err = run(&f).unwrap_err();
    assert_eq!(
        err,
        ImportError::NoCandidate {
            reason: UNCHANGED_CONTENT_REASON.into(),
            field: "candidate.content",
            note: String::new(),
            hint: String::new()
        }
    );
    assert_eq!(
        err.to_string(),
        format!(
            "optimizer produced no candidate: {UNCHANGED_CONTENT_REASON} (from candidate.content)"
        )
    );

    // A stored hash without the prefix or in capitals still matches.
    let mut f = fixture();
    f.package.candidate.content = base_version().content;
    let current = f
        .state
        .template
        .as_mut()
        .unwrap()
        .current_version
        .as_mut()
        .unwrap();
    current.content_hash = current
        .content_hash
        .trim_start_matches("sha256:")
        .to_uppercase();
    current.content = "something else".into();
    assert!(run(&f).unwrap_err().is_no_candidate());
}

#[test]
fn s89_optimizer_dry_run_is_no_candidate() {
    // facts §9: the dry run echoes the template and says promotable false.
    let mut f = fixture();
    f.package.candidate.content = base_version().content;
    f.package.eval_report =
        Some(json!({"promotable": false, "no_candidate_reason": "candidate_content_unchanged"}));
    assert_eq!(
        run(&f).unwrap_err().to_string(),
        "optimizer produced no candidate: candidate_content_unchanged (from eval_report)"
    );
}

#[test]
fn import_needs_lists_lookups() {
    let mut f = fixture();
    f.package.base_version_id = " planner@v1 ".into();
    let needs = ImportState::needed(&f.package);
    assert_eq!(needs.template_id, "planner");
    assert_eq!(needs.base_version_id.as_deref(), Some("planner@v1"));
    assert_eq!(
        needs.artifact_ids.into_iter().collect::<Vec<_>>(),
        vec!["run-1/candidate-diff"]
    );
}

#[test]
fn local_path_rules() {
    for (path, ok) in [
        ("a.md", true),
        ("dir/a.md", true),
        ("a/../b", true),
        ("./a", true),
        ("", false),
        ("/abs", false),
        ("..", false),
        ("../a", false),
        ("a/../../b", false),
    ] {
        assert_eq!(is_local_path(path), ok, "path {path:?}");
    }
}

/// A candidate package as Go writes it: `artifacts` `null` (or absent), `base_version_id`,
/// `eval_report` and every summary field absent, `summary` `{}`; the metadata's optional
/// `evaluation` absent. It imports against the template's current version.
#[test]
fn go_shaped_candidate_bytes_with_null_lists_import() {
    let content = template_text("planner", "Planner", NEW_BODY);
    let metadata = serde_json::to_value(parse_template(&content).unwrap().metadata).unwrap();
    for artifacts in [", \"artifacts\": null", ""] {
        let go = format!(
            r#"{{"kind": "gitmoot-skillopt-candidate-package", "contract_version": 1, "template_id": "planner",
  "candidate": {{"content": {content:?}, "metadata": {metadata}}}, "summary": {{}}{artifacts}}}"#
        );
        let package: CandidatePackage = serde_json::from_str(&go).unwrap();
        assert!(
            package.artifacts.is_empty()
                && package.eval_report.is_none()
                && package.summary.metadata.is_none()
        );
        let f = fixture();
        let verified = validate_candidate_import(
            &package,
            ImportOptions {
                artifact_dir: None,
                has_blob_store: true,
            },
            &f.state,
        )
        .expect("Go-shaped candidate imports");
        assert_eq!(verified.base_version_id, "planner@v1");
        assert!(verified.artifacts.is_empty());
    }
}
