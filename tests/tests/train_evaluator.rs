//! Train mode with an evaluator profile, end to end through the built binary (issue 5 items 5
//! and 6; seed SkillOpt "Complete train-mode path" step 5 — evaluator profiles between the
//! feedback sync (step 4) and the export (step 6); rule S-101): `train start --evaluator ID
//! --judge-runtime NAME` makes `train continue` score the generated options (artifact checks →
//! render adapters → judge as `agent` jobs, through the function `review evaluate` calls) before
//! it exports the training package, so the failure packet reaches the package and `optimizer
//! distill`'s guidance; a session without an evaluator exports the same bytes as before the
//! evaluator stage existed.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;
use skillforge_contract::validate_training_package_json;
use skillforge_tests::train::{SESSION, start_with, status};
use skillforge_tests::{Home, ok, path_arg, run_code, write};

const RUN: &str = "s1-i001";

const HINT: &str = "Never answer in one short sentence: say what changed, where and why.";

/// A required artifact check that fails exactly the scripted options written in the `concise`
/// style (a required-section check cannot tell the scripted runtime's options apart: each is
/// one line, so none has a section and all would fail).
const EVALUATOR_CONFIG: &str = r#"{"checks":[{"id":"no_one_liners","type":"artifact_contract","required":true,
"config":{"forbidden_strings":["(concise)"],"optimizer_hint":"Never answer in one short sentence: say what changed, where and why."}}]}"#;

/// The training package a session without an evaluator exported before the evaluator stage
/// existed (the pre-change binary, this file's flow), normalized by [`normalize`].
const GOLDEN: &str = include_str!("train_evaluator/no_evaluator_training.golden.json");

/// Template, items, `train start` (3 options per item) with `extra` arguments.
fn start(home: &Home, extra: &[&str]) -> Value {
    start_with(
        home,
        &[&["--workspace-repo", "owner/workspace"], extra].concat(),
    )
}

/// Generates options and publishes the packet, then a human fills feedback.yml.
fn generate_and_review(home: &Home) -> PathBuf {
    run_code(home, &["train", "continue", "--session", SESSION], 4);
    let st = status(home);
    assert_eq!(st["current_phase"], "review_published", "{st:#}");
    let dir = PathBuf::from(st["review_packet"].as_str().unwrap());
    let text = format!(
        "run_id: {RUN}\nreviewer: alice\nitems:\n  - item_id: add-cache\n    ranking: \"b > a > c\"\n    useful_traits:\n      \
         B: [lists each change as a bullet]\n    rejected_traits:\n      C: [too terse]\n    required_improvements: [name the user-visible effect first]\n  \
         - item_id: fix-login\n    ranking: \"a > c > b\"\n"
    );
    write(&dir.join("feedback.yml"), &text);
    dir
}

fn training_path(home: &Home) -> PathBuf {
    home.path()
        .join("train")
        .join(SESSION)
        .join(RUN)
        .join("training.json")
}

/// The packet's options as (item id, label) whose text contains `needle`, and all options.
fn options_containing(packet: &Path, needle: &str) -> (BTreeSet<(String, String)>, usize) {
    let mut hits = BTreeSet::new();
    let mut n = 0;
    for entry in std::fs::read_dir(packet.join("items")).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        let item = text
            .split("Item id: `")
            .nth(1)
            .and_then(|r| r.split('`').next())
            .unwrap()
            .to_owned();
        for section in text.split("\n## Option ").skip(1) {
            n += 1;
            let label = section[..1].to_ascii_lowercase();
            if section.contains(needle) {
                hits.insert((item.clone(), label));
            }
        }
    }
    (hits, n)
}

fn stage<'a>(score: &'a Value, name: &str) -> &'a Value {
    score["stage_status"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["stage"] == name)
        .unwrap_or_else(|| panic!("stage {name}: {score}"))
}

fn judge_jobs(home: &Home) -> Vec<Value> {
    let jobs = home.json(&["jobs", "list"]);
    let list = jobs
        .as_array()
        .or_else(|| jobs["jobs"].as_array())
        .cloned()
        .unwrap_or_default();
    list.into_iter()
        .filter(|j| j["kind"] == "agent" && j.to_string().contains("task: judge"))
        .collect()
}

#[test]
fn s101_train_continue_evaluates_options_before_export_and_the_failure_packet_reaches_distill() {
    let home = Home::embedded();
    let started = start(
        &home,
        &[
            "--evaluator",
            "commit_notes_v1",
            "--judge-runtime",
            "scripted",
            "--evaluator-config-json",
            EVALUATOR_CONFIG,
        ],
    );
    assert_eq!(started["state"], "items_ready", "{started:#}");
    let st = status(&home);
    assert_eq!(
        st["verbose"]["metadata_status"]["evaluation"], "pending",
        "{st:#}"
    );
    assert_eq!(
        st["verbose"]["evaluation"]["evaluator_id"], "commit_notes_v1",
        "{st:#}"
    );
    let packet = generate_and_review(&home);
    assert!(
        judge_jobs(&home).is_empty(),
        "nothing is evaluated before the feedback is synced (seed step order 4 → 5 → 6)"
    );

    let (failing, n_options) = options_containing(&packet, "(concise)");
    assert_eq!(n_options, 6);
    assert!(
        !failing.is_empty() && failing.len() < n_options,
        "the check must fail some options, not all: {failing:?}"
    );

    // --no-wait: the feedback is synced and the first judge job enqueued; nothing exported yet.
    let (out, err) = run_code(
        &home,
        &["train", "continue", "--session", SESSION, "--no-wait"],
        4,
    );
    assert!(out.contains("evaluator's jobs are running"), "{out}\n{err}");
    let st = status(&home);
    assert_eq!(st["current_phase"], "feedback_synced", "{st:#}");
    assert_eq!(
        st["verbose"]["metadata_status"]["evaluation"], "running",
        "{st:#}"
    );
    assert_eq!(judge_jobs(&home).len(), 1);
    assert!(
        !training_path(&home).exists(),
        "the export waits for the evaluator"
    );

    // The next continue reuses that job (idempotency key by prompt), evaluates the rest, exports.
    let (_, err) = run_code(&home, &["train", "continue", "--session", SESSION], 0);
    assert!(
        err.contains("evaluator commit_notes_v1: 6 option(s) scored"),
        "{err}"
    );
    let evaluated_at = err.find("evaluator commit_notes_v1: 6").unwrap();
    assert!(
        evaluated_at < err.find("training package exported").unwrap(),
        "evaluation comes before the export:\n{err}"
    );
    let st = status(&home);
    assert_eq!(st["current_phase"], "candidate_created", "{st:#}");
    assert_eq!(
        st["verbose"]["metadata_status"]["evaluation"], "succeeded",
        "{st:#}"
    );
    let judged = judge_jobs(&home);
    assert_eq!(
        judged.len(),
        n_options - failing.len(),
        "one judge job per option that passed its checks: {judged:#?}"
    );
    assert!(
        judged.iter().all(|j| j["state"] == "succeeded"),
        "{judged:#?}"
    );
    let recorded: BTreeSet<&str> = st["verbose"]["evaluation"]["job_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let queued: BTreeSet<&str> = judged.iter().map(|j| j["id"].as_str().unwrap()).collect();
    assert_eq!(recorded, queued, "train status lists the evaluator's jobs");
    let kinds: Vec<&str> = st["verbose"]["jobs"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds.iter().filter(|k| **k == "evaluation").count(),
        judged.len(),
        "{kinds:?}"
    );

    // The package exported by train continue carries one score per option, the failure packet
    // on exactly the options that failed the required check.
    let bytes = std::fs::read_to_string(training_path(&home)).unwrap();
    validate_training_package_json(&bytes)
        .expect("the strict external-optimizer rules accept the export");
    let package: Value = serde_json::from_str(&bytes).unwrap();
    assert_eq!(
        package["evaluator_profile"]["profile_id"],
        "commit_notes_v1"
    );
    assert_eq!(
        package["evaluator_config"]["evaluator_id"],
        "commit_notes_v1"
    );
    assert_eq!(package["evaluator_config"]["judge_runtime"], "scripted");
    let mut failed = BTreeSet::new();
    for item in package["items"].as_array().unwrap() {
        let item_id = item["id"].as_str().unwrap().to_owned();
        let scores = item["metadata"]["evaluator_scores"]
            .as_array()
            .unwrap_or_else(|| panic!("evaluator_scores: {item}"));
        let labels: Vec<&str> = scores
            .iter()
            .map(|s| s["metadata"]["option"].as_str().unwrap())
            .collect();
        assert_eq!(
            labels,
            ["a", "b", "c"],
            "one score per option, none duplicated by the re-run"
        );
        for score in scores {
            let label = score["metadata"]["option"].as_str().unwrap().to_owned();
            let order: Vec<&str> = score["stage_status"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["stage"].as_str().unwrap())
                .collect();
            assert_eq!(order, ["artifact_checks", "render", "judge"], "{score}");
            if stage(score, "artifact_checks")["status"] != "failed" {
                assert_ne!(
                    stage(score, "judge")["status"],
                    "skipped",
                    "the judge ran for a passing option: {score}"
                );
                assert!(
                    stage(score, "judge")["details"]["job_id"]
                        .as_str()
                        .is_some_and(|id| queued.contains(id)),
                    "{score}"
                );
                continue;
            }
            failed.insert((item_id.clone(), label));
            assert_eq!(score["contract_status"], "failed");
            assert_eq!(stage(score, "judge")["status"], "skipped");
            assert!(
                stage(score, "judge")["details"]["reason"]
                    .as_str()
                    .unwrap()
                    .contains("`no_one_liners`"),
                "{score}"
            );
            let failure = &score["failure"];
            assert_eq!(
                failure["primary_reason"], "required_check_failed",
                "{score}"
            );
            assert_eq!(failure["optimizer_hint"], HINT);
            assert_eq!(failure["failed_checks"][0]["check"], "no_one_liners");
            assert_eq!(failure["failed_checks"][0]["severity"], "error");
            assert_eq!(failure["stage_status"], score["stage_status"]);
        }
    }
    assert_eq!(
        failed, failing,
        "exactly the options with the forbidden text carry the check's failure packet"
    );

    // distill (run by train continue) turned the hint into candidate guidance.
    let candidate = st["candidate_version"]
        .as_str()
        .expect("a pending candidate")
        .to_owned();
    let shown = home.json(&["candidate", "show", &candidate]);
    assert!(
        shown.to_string().contains(HINT),
        "the candidate's guidance carries the optimizer hint: {shown:#}"
    );

    // `review evaluate` is the same code path: re-evaluating the run reuses every judge job and
    // replaces (never adds) scores.
    home.json(&["review", "evaluate", "--run", RUN]);
    assert_eq!(judge_jobs(&home).len(), judged.len(), "no judge job re-run");
    ok(
        &home,
        &[
            "export",
            "--run",
            RUN,
            "--output",
            path_arg(&home.path().join("again.json")),
        ],
    );
    let again: Value =
        serde_json::from_str(&std::fs::read_to_string(home.path().join("again.json")).unwrap())
            .unwrap();
    for item in again["items"].as_array().unwrap() {
        assert_eq!(
            item["metadata"]["evaluator_scores"]
                .as_array()
                .unwrap()
                .len(),
            3
        );
    }
}

/// Replaces what differs between two runs of the same flow (the home path, job ids, event ids
/// derived from them, clock times) so bytes can be compared; everything else is kept as written.
fn normalize(text: &str, home: &Path) -> String {
    let home = home.to_str().unwrap();
    text.split('\n')
        .map(|line| {
            let line = line.replace(home, "<HOME>");
            if !["\"job_id\": \"", "\"created_at\": \"", "\"ranked-feedback:"]
                .iter()
                .any(|m| line.contains(m))
            {
                return line;
            }
            let body = line.trim_end().trim_end_matches(',');
            let end = body.rfind('"').unwrap();
            let start = body[..end].rfind('"').unwrap();
            format!("{}<volatile>{}", &line[..=start], &line[end..])
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_session_without_an_evaluator_exports_the_same_bytes_as_before_the_evaluator_stage() {
    let home = Home::embedded();
    start(&home, &[]);
    let st = status(&home);
    assert_eq!(
        st["verbose"]["metadata_status"]["evaluation"], "not_configured",
        "{st:#}"
    );
    generate_and_review(&home);
    let (_, err) = run_code(&home, &["train", "continue", "--session", SESSION], 0);
    assert!(!err.contains("evaluator"), "no evaluator stage: {err}");
    let st = status(&home);
    assert_eq!(st["current_phase"], "candidate_created", "{st:#}");
    assert_eq!(
        st["verbose"]["metadata_status"]["evaluation"], "not_configured",
        "{st:#}"
    );
    assert!(judge_jobs(&home).is_empty());
    let bytes = std::fs::read_to_string(training_path(&home)).unwrap();
    let normalized = normalize(&bytes, home.path());
    assert!(
        normalized == GOLDEN,
        "the export changed:\n--- now\n{normalized}\n--- before\n{GOLDEN}"
    );
    assert!(
        !bytes.contains("evaluator_score") && !bytes.contains("evaluator_profile"),
        "no evaluator scores or profile"
    );
}
