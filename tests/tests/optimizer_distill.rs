//! `skillforge optimizer distill`, the built-in reference optimizer, through the built binary
//! (issue 5 item 4; seed "Training Package", "Candidate Package", "Binary-disagreement lessons";
//! facts §2, §9).
//!
//! Each test builds a training package with the contract types, runs the binary with the
//! external optimizer's flags, and checks the candidate package with the importer's own
//! validation ([`validate_candidate_import`]) and, for the round trip, with `skillforge import`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{Value, json};
use skillforge_contract::{
    BaseVersion, BinaryVerdict, CandidatePackage, EvalItem, EvalReviewOption, EvalRun,
    FeedbackEvent, ImportError, ImportOptions, ImportState, InstalledTemplate, RankedFeedbackEvent,
    TemplateSnapshot, TrainingPackage, VerifiedCandidate, content_hash, parse_template,
    ranked_feedback_event_id, serialize_package, validate_candidate_import,
};
use skillforge_tests::Home;
use tempfile::TempDir;

const RUN: &str = "run-distill-1";
const HEADING: &str = "## Guidance from review evidence";

fn template_text(body: &str) -> String {
    format!(
        "---\nid: planner\nname: Planner\ndescription: Plans work\nkind: agent-template\nversion: 1\ncapabilities: [ask]\nruntime_compatibility: [codex]\ntags: [planning]\ninputs: [task]\noutputs: [plan]\n---\n{body}"
    )
}

/// A valid package for `planner@v1` with an A/B item and a ranked item (options A, B, C), no feedback.
fn empty_package() -> TrainingPackage {
    let content = template_text("Plan the task.\n");
    let template = TemplateSnapshot {
        id: "planner".into(),
        version_id: "planner@v1".into(),
        version_number: 1,
        version_state: "current".into(),
        content_hash: content_hash(&content),
        source_repo: "local".into(),
        source_ref: "main".into(),
        source_path: "planner.md".into(),
        resolved_commit: "0000000".into(),
        metadata: parse_template(&content).expect("fixture template").metadata,
        content,
    };
    let run = EvalRun {
        id: RUN.into(),
        template_id: "planner".into(),
        template_version_id: "planner@v1".into(),
        target_repo: "owner/repo".into(),
        state: "reviewed".into(),
        mode: "distill".into(),
        ..EvalRun::default()
    };
    let mut package = TrainingPackage::new(template, run);
    package.training_mode = "distill".into();
    let option = |label: &str| EvalReviewOption {
        label: label.into(),
        artifact_id: format!("opt-{label}"),
        ..Default::default()
    };
    package.items = vec![
        EvalItem {
            id: "item-ab".into(),
            title: "A/B".into(),
            ..EvalItem::default()
        },
        EvalItem {
            id: "item-ranked".into(),
            title: "ranked".into(),
            options: vec![option("A"), option("B"), option("C")],
            ..EvalItem::default()
        },
    ];
    package.artifacts = ["A", "B", "C"]
        .iter()
        .map(|l| skillforge_contract::ArtifactRef {
            id: format!("opt-{l}"),
            hash: content_hash(l),
            media_type: "text/markdown".into(),
            size_bytes: 1,
            driver: "local".into(),
        })
        .collect();
    package
}

fn ranked(
    reviewer: &str,
    source: &str,
    improvements: Value,
    rejected: Value,
    useful: Value,
) -> RankedFeedbackEvent {
    RankedFeedbackEvent {
        id: ranked_feedback_event_id(RUN, "item-ranked", reviewer, source, ""),
        run_id: RUN.into(),
        item_id: "item-ranked".into(),
        ranking: vec!["C".into(), "A".into(), "B".into()],
        winner: "C".into(),
        required_improvements: Some(improvements),
        rejected_traits: Some(rejected),
        useful_traits: Some(useful),
        reviewer: reviewer.into(),
        source: source.into(),
        created_at: "2026-01-01T00:00:00Z".into(),
        ..RankedFeedbackEvent::default()
    }
}

/// Evidence of every kind: human ranked traits, a judge row repeating an improvement, a human A/B
/// pick, a verifiable failure packet on an item, and BINEVAL verdicts.
fn rich_package() -> TrainingPackage {
    let mut p = empty_package();
    p.ranked_feedback_events = vec![
        ranked(
            "alice",
            "markdown",
            json!(["Add a test plan.", "State assumptions up front"]),
            json!({"B": ["Marketing fluff"]}),
            json!({"C": ["Short summary first"]}),
        ),
        ranked(
            "gitmoot-review",
            "auto-trace",
            json!(["add a test-plan"]),
            json!({}),
            json!({}),
        ),
    ];
    p.feedback_events = vec![FeedbackEvent {
        run_id: RUN.into(),
        item_id: "item-ab".into(),
        choice: "b".into(),
        reasoning: "More concrete steps.".into(),
        reviewer: "bob".into(),
        source: "markdown".into(),
        source_url: String::new(),
        created_at: "2026-01-01T00:00:00Z".into(),
    }];
    p.items[0].metadata = Some(
        json!({"evaluator_score": {"hard": 0.0, "failure": {"optimizer_hint": "Name the files to change"}}}),
    );
    p.binary_verdicts = vec![
        BinaryVerdict {
            question_id: "has_test".into(),
            dimension: "correctness".into(),
            verdict: "no".into(),
            explanation: "No test was added.".into(),
            ..BinaryVerdict::default()
        },
        BinaryVerdict {
            question_id: "has_summary".into(),
            dimension: "clarity".into(),
            verdict: "yes".into(),
            ..BinaryVerdict::default()
        },
    ];
    p
}

/// A work dir with the package written, and the paths the optimizer writes to.
struct Run {
    home: Home,
    work: TempDir,
}

impl Run {
    /// A fresh home with its blob store directory (the `--artifact-root` every run passes).
    fn new() -> Self {
        let run = Self {
            home: Home::embedded(),
            work: tempfile::tempdir().expect("work dir"),
        };
        std::fs::create_dir_all(run.home.path().join("blobs")).expect("blob store dir");
        run
    }

    fn path(&self, name: &str) -> PathBuf {
        self.work.path().join(name)
    }

    fn write_package(&self, package: &TrainingPackage) -> PathBuf {
        let file = self.path("training.json");
        std::fs::write(&file, serialize_package(package).expect("encode package"))
            .expect("write package");
        file
    }

    /// `skillforge --json optimizer distill` with the external optimizer's flags (plus some of
    /// its ignored model flags, as a train backend would pass them).
    fn distill(&self, package_file: &Path, extra: &[&str]) -> Output {
        let mut args = vec![
            "--json".to_owned(),
            "optimizer".into(),
            "distill".into(),
            "--training-package".into(),
            package_file.display().to_string(),
            "--artifact-root".into(),
            self.home.path().join("blobs").display().to_string(),
            "--out-root".into(),
            self.path("out").display().to_string(),
            "--candidate-output".into(),
            self.path("candidate.json").display().to_string(),
            "--optimizer-model".into(),
            "none".into(),
            "--seed".into(),
            "42".into(),
        ];
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        self.home
            .cmd()
            .args(&args)
            .output()
            .expect("run skillforge")
    }

    fn candidate(&self) -> CandidatePackage {
        let text = std::fs::read_to_string(self.path("candidate.json")).expect("candidate written");
        serde_json::from_str(&text).expect("candidate package JSON")
    }

    fn artifact_dir(&self) -> PathBuf {
        self.path("out").join("artifacts")
    }
}

fn stdout_json(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "distill failed: {}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

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

fn validate(
    run: &Run,
    candidate: &CandidatePackage,
    package: &TrainingPackage,
) -> Result<VerifiedCandidate, ImportError> {
    let artifact_dir = run.artifact_dir();
    validate_candidate_import(
        candidate,
        ImportOptions {
            artifact_dir: Some(&artifact_dir),
            has_blob_store: true,
        },
        &import_state(package),
    )
}

#[test]
fn package_to_candidate_round_trip_is_accepted_by_the_importer() {
    let run = Run::new();
    let package = rich_package();
    let file = run.write_package(&package);
    let out = run.distill(&file, &[]);
    let report = stdout_json(&out);
    assert_eq!(report["promotable"], true, "{report}");
    assert_eq!(report["no_candidate_reason"], Value::Null);
    assert_eq!(report["guidance_lines"], 7, "{report}");
    assert_eq!(
        report["candidate_output"],
        run.path("candidate.json").display().to_string()
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("wrote candidate package"), "{stderr}");

    let candidate = run.candidate();
    assert_eq!(candidate.kind, "gitmoot-skillopt-candidate-package");
    assert_eq!(candidate.contract_version, 1);
    assert_eq!(candidate.template_id, "planner");
    assert_eq!(candidate.base_version_id, "planner@v1");
    assert_eq!(candidate.candidate.metadata, package.template.metadata);
    assert_eq!(
        candidate.summary.diff_artifact_id,
        format!("{RUN}/candidate-diff")
    );
    let ids: Vec<&str> = candidate.artifacts.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            format!("{RUN}/candidate-diff"),
            format!("{RUN}/eval-report")
        ]
    );
    let diff = &candidate.artifacts[0];
    assert_eq!(
        (diff.media_type.as_str(), diff.driver.as_str()),
        ("text/x-diff", "text")
    );

    let content = &candidate.candidate.content;
    assert!(
        content.starts_with(&package.template.content.replace("Plan the task.\n", "")),
        "frontmatter changed:\n{content}"
    );
    assert_eq!(content.matches(HEADING).count(), 1, "{content}");
    let first_line = content
        .lines()
        .find(|l| l.starts_with("- "))
        .expect("a guidance line");
    assert_eq!(
        first_line,
        "- Add a test plan. (support 2: human 1, judge 1)"
    );
    assert!(
        content.contains(
            "- Make sure `has_test` (correctness) holds: No test was added. (support 1: judge 1)"
        ),
        "{content}"
    );
    assert!(
        !content.contains("has_summary"),
        "a yes verdict is not a lesson:\n{content}"
    );

    let verified = validate(&run, &candidate, &package).expect("importer accepts the candidate");
    assert_eq!(verified.base_version_id, "planner@v1");
    assert_eq!(verified.artifacts.len(), 2);
    let diff_text = String::from_utf8_lossy(&verified.artifacts[0].bytes).into_owned();
    assert!(
        diff_text.contains("+## Guidance from review evidence"),
        "{diff_text}"
    );
}

#[test]
fn the_candidate_imports_as_a_pending_version_through_the_binary() {
    let run = Run::new();
    let package = rich_package();
    let template_file = run.path("planner.md");
    std::fs::write(&template_file, &package.template.content).unwrap();
    let added = run
        .home
        .json(&["template", "add", template_file.to_str().unwrap()]);
    assert_eq!(added["version_id"], "planner@v1");

    stdout_json(&run.distill(&run.write_package(&package), &[]));
    let candidate_file = run.path("candidate.json");
    let artifact_dir = run.artifact_dir();
    let imported = run.home.json(&[
        "import",
        "--file",
        candidate_file.to_str().unwrap(),
        "--artifact-dir",
        artifact_dir.to_str().unwrap(),
    ]);
    assert_eq!(imported["version_id"], "planner@v2", "{imported}");
    assert_eq!(imported["state"], "pending");
    assert_eq!(imported["base_version_id"], "planner@v1");
}

#[test]
fn empty_evidence_writes_a_no_candidate_package() {
    let run = Run::new();
    let package = empty_package();
    let report = stdout_json(&run.distill(&run.write_package(&package), &[]));
    assert_eq!(report["promotable"], false);
    assert_eq!(report["no_candidate_reason"], "no_actionable_feedback");
    assert_eq!(report["guidance_lines"], 0);

    let candidate = run.candidate();
    assert_eq!(candidate.candidate.content, package.template.content);
    assert_eq!(candidate.eval_report.as_ref().unwrap()["promotable"], false);
    assert_eq!(
        candidate.summary.metadata.as_ref().unwrap()["no_candidate_reason"],
        "no_actionable_feedback"
    );
    let err = validate(&run, &candidate, &package).expect_err("no candidate");
    assert!(err.is_no_candidate(), "{err}");
    let hint = candidate.eval_report.as_ref().unwrap()["no_candidate_hint"]
        .as_str()
        .expect("a hint")
        .to_owned();
    assert!(
        hint.contains("the package has no feedback events"),
        "{hint}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "optimizer produced no candidate: no_actionable_feedback (from eval_report) ({hint})"
        )
    );
}

/// A package as Go writes it (`json.MarshalIndent` of nil slices): `items`, `artifacts`,
/// `feedback_events` and the metadata's `tags` are `null`, every omitempty field is absent. The
/// built-in optimizer reads the `null` lists as empty (the Python optimizer would crash on them).
#[test]
fn a_go_written_package_with_null_lists_distills_to_no_candidate() {
    let run = Run::new();
    let mut raw = serde_json::to_value(empty_package()).unwrap();
    for key in ["items", "artifacts", "feedback_events"] {
        raw[key] = Value::Null;
    }
    raw["template"]["metadata"]["tags"] = Value::Null;
    for key in [
        "training_mode",
        "ranked_feedback_events",
        "pairwise_preferences",
        "feedback_context",
        "evaluator_config",
    ] {
        raw.as_object_mut().unwrap().remove(key);
    }
    let file = run.path("training.json");
    std::fs::write(&file, serde_json::to_vec_pretty(&raw).unwrap()).unwrap();
    let report = stdout_json(&run.distill(&file, &[]));
    assert_eq!(
        report["no_candidate_reason"], "no_actionable_feedback",
        "{report:#}"
    );
    assert_eq!(run.candidate().template_id, "planner");
}

#[test]
fn dry_run_keeps_the_content_and_reports_no_candidate() {
    let run = Run::new();
    let package = rich_package();
    let report = stdout_json(&run.distill(&run.write_package(&package), &["--dry-run"]));
    assert_eq!(report["promotable"], false);
    assert_eq!(report["no_candidate_reason"], "candidate_content_unchanged");

    let candidate = run.candidate();
    assert_eq!(candidate.candidate.content, package.template.content);
    assert!(run.path("out/initial_skill.md").is_file());
    let err = validate(&run, &candidate, &package).expect_err("no candidate");
    assert!(err.is_no_candidate(), "{err}");
    assert_eq!(
        err.to_string(),
        "optimizer produced no candidate: candidate_content_unchanged (from eval_report)"
    );
}

#[test]
fn a_missing_artifact_root_exits_2_naming_it() {
    let run = Run::new();
    std::fs::remove_dir(run.home.path().join("blobs")).unwrap();
    let out = run.distill(&run.write_package(&rich_package()), &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let want = format!(
        "--artifact-root `{}`: no such directory",
        run.home.path().join("blobs").display()
    );
    assert!(stderr.contains(&want), "{stderr}");
    assert!(!run.path("out").exists() && !run.path("candidate.json").exists());
}

#[test]
fn an_invalid_package_exits_2_and_writes_nothing() {
    type Mutation = fn(&mut Value);
    let cases: [(&str, Mutation); 3] = [
        ("content hash", |v| {
            v["template"]["content_hash"] = json!(content_hash("other"))
        }),
        ("items not a list", |v| v["items"] = json!("items")),
        ("wrong kind", |v| v["kind"] = json!("something-else")),
    ];
    for (name, mutate) in cases {
        let run = Run::new();
        let mut raw = serde_json::to_value(rich_package()).unwrap();
        mutate(&mut raw);
        let file = run.path("training.json");
        std::fs::write(&file, serde_json::to_vec_pretty(&raw).unwrap()).unwrap();
        let out = run.distill(&file, &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        assert!(
            stderr.contains(&file.display().to_string()),
            "{name}: error does not name the package: {stderr}"
        );
        assert!(
            out.stdout.is_empty(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(!run.path("out").exists(), "{name}: out-root written");
        assert!(
            !run.path("candidate.json").exists(),
            "{name}: candidate written"
        );
    }
}

// S-57 (issue 37 item 6): a distill candidate carries no made-up score; its package says why
// (`summary.metadata.score_unavailable`), and the guardrails take the path that needs no score: with
// `auto_promote_canary` on, harvested outcomes put it in a canary (whose outcomes decide it),
// never a direct promotion on a number nobody measured.
#[test]
fn s57_a_distill_candidate_says_why_it_has_no_score_and_goes_to_a_canary() {
    let run = Run::new();
    let package = rich_package();
    let template_file = run.path("planner.md");
    std::fs::write(&template_file, &package.template.content).unwrap();
    run.home
        .json(&["template", "add", template_file.to_str().unwrap()]);
    stdout_json(&run.distill(&run.write_package(&package), &[]));
    let candidate = run.candidate();
    assert_eq!(
        candidate.summary.score, None,
        "distill measures nothing: no score"
    );
    let why = candidate.summary.metadata.as_ref().unwrap()["score_unavailable"]
        .as_str()
        .map(str::to_owned);
    assert!(
        why.as_deref()
            .is_some_and(|w| w.contains("measures nothing")),
        "{:?}",
        candidate.summary.metadata
    );
    std::fs::write(
        run.home.path().join("config.toml"),
        "[skillopt]\nauto_trace_enabled = true\nauto_promote = true\nauto_promote_min_samples = 2\nauto_promote_min_score = 0.5\n\
         auto_promote_canary = true\nauto_promote_canary_sample = 0.2\n",
    )
    .unwrap();
    let (file, artifacts) = (run.path("candidate.json"), run.artifact_dir());
    run.home.json(&[
        "import",
        "--file",
        file.to_str().unwrap(),
        "--artifact-dir",
        artifacts.to_str().unwrap(),
    ]);
    for pr in ["1", "2"] {
        run.home.json(&[
            "harvest",
            "attribute",
            "--repo",
            "acme/app",
            "--pr",
            pr,
            "--template",
            "planner@v2",
            "--resolved-commit",
            "c0ffee",
        ]);
        run.home.json(&[
            "harvest",
            "outcome",
            "--repo",
            "acme/app",
            "--pr",
            pr,
            "--outcome",
            "merged",
            "--ci",
            "external",
        ]);
    }
    let decided = skillforge_tests::decide_json(&run.home, &["candidate", "decide", "planner@v2"]);
    assert_eq!(
        decided["decision"],
        json!({"decision": "promote", "canary_sample": 0.2}),
        "{decided}"
    );
    let state = run.home.json(&["candidate", "show", "planner@v2"]);
    assert_eq!(state["state"], "canary", "{state}");
    // Without a canary there is nothing to measure it: never promoted directly, and it says why.
    let direct = Run::new();
    std::fs::write(&template_file, &package.template.content).unwrap();
    direct
        .home
        .json(&["template", "add", template_file.to_str().unwrap()]);
    std::fs::write(
        direct.home.path().join("config.toml"),
        "[skillopt]\nauto_trace_enabled = true\nauto_promote = true\nauto_promote_min_samples = 1\nauto_promote_min_score = 0.5\n",
    )
    .unwrap();
    direct.home.json(&[
        "import",
        "--file",
        file.to_str().unwrap(),
        "--artifact-dir",
        artifacts.to_str().unwrap(),
    ]);
    direct.home.json(&[
        "harvest",
        "attribute",
        "--repo",
        "acme/app",
        "--pr",
        "1",
        "--template",
        "planner@v2",
        "--resolved-commit",
        "c0ffee",
    ]);
    direct.home.json(&[
        "harvest",
        "outcome",
        "--repo",
        "acme/app",
        "--pr",
        "1",
        "--outcome",
        "merged",
        "--ci",
        "external",
    ]);
    let out = direct
        .home
        .cmd()
        .args(["candidate", "decide", "planner@v2"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("has no score (distill turns ranked reviews")
            && text.contains("auto_promote_canary"),
        "{text}"
    );
    assert_eq!(
        direct.home.json(&["candidate", "show", "planner@v2"])["state"],
        "pending"
    );
}

// Issue 37 item 6: a distill candidate gets a real score from real jobs, never a made-up one —
// `candidate gate` replays a corpus for the champion and the candidate as durable jobs, and the
// candidate (which had none) takes its corpus mean as its score, with where it came from in its
// summary metadata; the guardrails then read that score and promote it directly.
#[test]
fn a_distill_candidate_with_a_corpus_gets_its_score_from_the_replay_gate() {
    let run = Run::new();
    let package = rich_package();
    let template_file = run.path("planner.md");
    std::fs::write(&template_file, &package.template.content).unwrap();
    run.home
        .json(&["template", "add", template_file.to_str().unwrap()]);
    stdout_json(&run.distill(&run.write_package(&package), &[]));
    std::fs::write(
        run.home.path().join("config.toml"),
        "[skillopt]\nauto_trace_enabled = true\nauto_promote = true\nauto_promote_min_samples = 1\nauto_promote_min_score = 0.5\n\
         gate_corpus = \"corpus.json\"\n",
    )
    .unwrap();
    let (file, artifacts) = (run.path("candidate.json"), run.artifact_dir());
    run.home.json(&[
        "import",
        "--file",
        file.to_str().unwrap(),
        "--artifact-dir",
        artifacts.to_str().unwrap(),
    ]);
    let before = run.home.json(&["candidate", "show", "planner@v2"]);
    assert_eq!(before["score"], Value::Null, "{before}");
    // The corpus: does the side's template carry the maintained guidance section?
    let corpus = json!({
        "kind": "skillforge-replay-corpus", "version": 1,
        "replay_command": "printf %s \"$SKILLFORGE_REPLAY_TEMPLATE\" | grep -F -- \"$SKILLFORGE_REPLAY_EXPECTED\"",
        "items": [
            {"id": "guidance", "prompt": "Is the guidance there?", "expected": HEADING},
            {"id": "planner", "prompt": "Is it a planner?", "expected": "id: planner"},
        ],
    });
    std::fs::write(run.home.path().join("corpus.json"), corpus.to_string()).unwrap();
    let gated = run.home.json(&["candidate", "gate", "planner@v2"]);
    assert_eq!(
        (
            gated["accepted"].as_bool(),
            gated["candidate_mean"].as_f64(),
            gated["champion_mean"].as_f64()
        ),
        (Some(true), Some(1.0), Some(0.5)),
        "{gated}"
    );
    assert_eq!(gated["candidate_scored"], true, "{gated}");
    let after = run.home.json(&["candidate", "show", "planner@v2"]);
    assert_eq!(after["score"], 1.0, "the corpus mean, measured: {after}");
    let metadata = &after["summary_metadata"];
    assert!(metadata.get("score_unavailable").is_none(), "{metadata}");
    assert!(
        metadata["score_evidence"]
            .as_str()
            .unwrap()
            .contains(gated["id"].as_str().unwrap()),
        "{metadata}"
    );
    let jobs = run.home.json(&["jobs", "list"]);
    assert_eq!(
        jobs.as_array()
            .unwrap()
            .iter()
            .filter(|j| j["workflow"] == "replay" && j["state"] == "succeeded")
            .count(),
        3,
        "{jobs:#}"
    );
    run.home.json(&[
        "harvest",
        "attribute",
        "--repo",
        "acme/app",
        "--pr",
        "1",
        "--template",
        "planner@v2",
        "--resolved-commit",
        "c0ffee",
    ]);
    run.home.json(&[
        "harvest",
        "outcome",
        "--repo",
        "acme/app",
        "--pr",
        "1",
        "--outcome",
        "merged",
        "--ci",
        "external",
    ]);
    let decided = skillforge_tests::decide_json(&run.home, &["candidate", "decide", "planner@v2"]);
    assert_eq!(
        decided["decision"],
        json!({"decision": "promote", "canary_sample": null}),
        "{decided}"
    );
    assert_eq!(
        run.home.json(&["candidate", "show", "planner@v2"])["state"],
        "current"
    );
}
