//! Round two of the loop (issue 37 item 10): `optimizer distill` on the auto-trace export of a
//! version whose guidance came from human review keeps that guidance (evidence merged across runs,
//! weighted by tier), turns a failing hard verifier's message into a concrete rule instead of
//! "Address: Hard verifier failed …", and calls a run of merged outcomes only "no actionable
//! feedback" for the right reason. Every run is written by the real producers: a Markdown review
//! packet imported by `feedback markdown import`, and `harvest outcome --wait` with a hard-verifier
//! leg running real commands in a real clone (seed: SkillOpt, "Cross-family review soft signal":
//! human gold > verifiable floor > judge; "Automatic trace-harvested feedback (Mode A, off by
//! default)").

use std::path::{Path, PathBuf};

use serde_json::Value;
use skillforge_tests::{CODER_TEMPLATE, Home, add_template, path_arg, two_commit_repo, write};

/// Round one: a ranked human review of `coder@v1` through a Markdown packet.
fn human_run(home: &Home) {
    home.json(&[
        "review",
        "create",
        "--template",
        "coder",
        "--repo",
        "acme/app",
        "--run",
        "rk-1",
        "--mode",
        "explore",
        "--options",
        "2",
    ]);
    let (a, b) = (
        write(&home.path().join("in/a.md"), "option a\n"),
        write(&home.path().join("in/b.md"), "option b\n"),
    );
    home.json(&[
        "review",
        "item",
        "add",
        "--run",
        "rk-1",
        "--item",
        "add-cache",
        "--option",
        &format!("a={}", a.display()),
        "--option",
        &format!("b={}", b.display()),
    ]);
    let packet = home.path().join("packet");
    home.json(&[
        "feedback",
        "markdown",
        "export",
        "--run",
        "rk-1",
        "--output",
        path_arg(&packet),
        "--force",
    ]);
    write(
        &packet.join("feedback.yml"),
        "run_id: rk-1\nreviewer: alice\nitems:\n  - item_id: add-cache\n    ranking: \"b > a\"\n    useful_traits:\n      B: [names the files it changes first]\n    required_improvements: [state the test plan before editing]\n",
    );
    home.json(&[
        "feedback",
        "markdown",
        "import",
        "--packet",
        path_arg(&packet),
    ]);
}

/// `skillforge optimizer distill` of `run`'s export; returns (report, candidate file, artifacts dir).
fn distill(home: &Home, run: &str, tag: &str) -> (Value, PathBuf, PathBuf) {
    let (out, candidate, artifacts) = distill_output(home, run, tag);
    assert!(
        out.status.success(),
        "distill: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = serde_json::from_slice(&out.stdout).expect("distill --json prints JSON");
    (report, candidate, artifacts)
}

/// [`distill`]'s run as it ended (`--json`): (output, candidate file, artifacts dir).
fn distill_output(home: &Home, run: &str, tag: &str) -> (std::process::Output, PathBuf, PathBuf) {
    let training = home.path().join(format!("{tag}-training.json"));
    home.json(&["export", "--run", run, "--output", path_arg(&training)]);
    let out_root = home.path().join(format!("{tag}-out"));
    let candidate = home.path().join(format!("{tag}-candidate.json"));
    let out = home.run(&[
        "--json",
        "optimizer",
        "distill",
        "--training-package",
        path_arg(&training),
        "--artifact-root",
        path_arg(&home.path().join("blobs")),
        "--out-root",
        path_arg(&out_root),
        "--candidate-output",
        path_arg(&candidate),
    ]);
    (out, candidate, out_root.join("artifacts"))
}

fn content(candidate: &Path) -> String {
    let package: Value =
        serde_json::from_str(&std::fs::read_to_string(candidate).unwrap()).unwrap();
    package["candidate"]["content"].as_str().unwrap().to_owned()
}

fn guidance(content: &str) -> Vec<String> {
    content
        .lines()
        .filter(|l| l.starts_with("- "))
        .map(str::to_owned)
        .collect()
}

fn on(home: &Home, extra: &str) {
    write(
        &home.path().join("config.toml"),
        &format!("[skillopt]\nauto_trace_enabled = true\n{extra}"),
    );
}

#[test]
fn round_two_keeps_the_human_guidance_and_turns_a_verifier_failure_into_a_rule() {
    let (repo, _base, head) = two_commit_repo();
    let home = Home::embedded();
    std::fs::create_dir_all(home.path().join("blobs")).unwrap();
    add_template(&home, CODER_TEMPLATE, "acme/templates");
    human_run(&home);
    let (out, candidate, artifacts) = distill_output(&home, "rk-1", "round1");
    let report: Value = serde_json::from_slice(&out.stdout).expect("distill --json prints JSON");
    assert_eq!(report["promotable"], true, "{report:#}");
    // It says how to import what it wrote.
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains(&format!(
            "next: skillforge import --file {} --artifact-dir {}",
            candidate.display(),
            artifacts.display()
        )),
        "{said}"
    );
    let round1 = guidance(&content(&candidate));
    assert_eq!(
        round1,
        [
            "- State the test plan before editing. (support 1: human 1)",
            "- Keep: names the files it changes first. (support 1: human 1)"
        ],
        "{round1:#?}"
    );
    let imported = home.json(&[
        "import",
        "--file",
        path_arg(&candidate),
        "--artifact-dir",
        path_arg(&artifacts),
    ]);
    assert_eq!(imported["version_id"], "coder@v2", "{imported}");
    home.json(&["candidate", "promote", "coder@v2"]);

    // Round two: v2's pull requests, harvested. #1 merged with passing CI; #2 merged and its hard
    // verifier failed with a message; the guidance must come from that message.
    on(
        &home,
        "hard_verifiers_enabled = true\nhard_verifier_commands = [\"test -f src/lib.rs\", \"echo 'error: parse_date has no test for leap years' >&2; exit 1\"]\n",
    );
    for pr in ["1", "2"] {
        home.json(&[
            "harvest",
            "attribute",
            "--repo",
            "acme/app",
            "--pr",
            pr,
            "--template",
            "coder@v2",
            "--resolved-commit",
            "c0ffee",
            "--checkout",
            path_arg(repo.path()),
        ]);
    }
    home.json(&[
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
    let outcome = home.json(&[
        "harvest",
        "outcome",
        "--repo",
        "acme/app",
        "--pr",
        "2",
        "--outcome",
        "merged",
        "--ci",
        "external",
        "--head",
        &head,
        "--wait",
    ]);
    assert_eq!(
        outcome["legs"].as_array().map(Vec::len),
        Some(1),
        "{outcome:#}"
    );
    let (report, candidate, _) = distill(&home, "auto-trace:coder@v2", "round2");
    assert_eq!(report["promotable"], true, "{report:#}");
    let round2 = guidance(&content(&candidate));
    assert_eq!(
        round2,
        [
            "- State the test plan before editing. (support 1: human 1)",
            "- Keep: names the files it changes first. (support 1: human 1)",
            "- Make `echo 'error: parse_date has no test for leap years' >&2; exit 1` pass before finishing (it exited 1: error: parse_date has no test for leap years). (support 1: verifiable 1)",
        ],
        "the human lines survive and the verifier's message is the rule: {round2:#?}"
    );
    let text = content(&candidate);
    for vacuous in [
        "Hard verifier failed",
        "Deterministic checkers over",
        "Address: Merged",
    ] {
        assert!(
            !text.contains(vacuous),
            "no line nobody can act on ({vacuous}):\n{text}"
        );
    }
}

#[test]
fn an_auto_trace_run_of_merged_outcomes_only_has_no_actionable_feedback_for_the_right_reason() {
    let home = Home::embedded();
    std::fs::create_dir_all(home.path().join("blobs")).unwrap();
    add_template(&home, CODER_TEMPLATE, "acme/templates");
    on(&home, "");
    for pr in ["1", "2"] {
        home.json(&[
            "harvest",
            "attribute",
            "--repo",
            "acme/app",
            "--pr",
            pr,
            "--template",
            "coder@v1",
            "--resolved-commit",
            "c0ffee",
        ]);
        home.json(&[
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
    let (report, candidate, _) = distill(&home, "auto-trace:coder@v1", "merged");
    assert_eq!(
        report["no_candidate_reason"], "no_actionable_feedback",
        "{report:#}"
    );
    // Importing it says so first (exit 1), not that its artifacts need `--artifact-dir`.
    let out = home.run(&["import", "--file", path_arg(&candidate)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("optimizer produced no candidate: no_actionable_feedback")
            && !err.contains("--artifact-dir"),
        "{err}"
    );
    let hint = report["no_candidate_hint"].as_str().unwrap();
    assert!(
        hint.contains("2 feedback event(s) are harvested outcomes that all went well"),
        "{hint}"
    );
    assert!(
        !hint.contains("carry no"),
        "its events do carry reasoning: {hint}"
    );
}

/// A replay corpus whose `replay_command` passes an item when the side's template contains the
/// item's expected text; `coder` passes on both sides, `release` on neither before the retry.
fn replay_corpus(home: &Home) -> PathBuf {
    let corpus = serde_json::json!({
        "kind": "skillforge-replay-corpus",
        "version": 1,
        "replay_command": "printf %s \"$SKILLFORGE_REPLAY_TEMPLATE\" | grep -F -- \"$SKILLFORGE_REPLAY_EXPECTED\"",
        "items": [
            {"id": "coder", "prompt": "Which template is this?", "expected": "id: coder"},
            {"id": "release", "prompt": "Plan the release", "expected": "update the changelog"},
        ],
    });
    write(&home.path().join("corpus.json"), &corpus.to_string())
}

// Issue 34 item 11 (facts §7): a failing replay gate gets one retry that feeds the failing replay
// log to the optimizer. The distill candidate of a human review ties its champion on the corpus
// (not accepted, attempt 1); the retry exports the same eval run with the failing replays, the
// built-in optimizer turns each into a rule, the new candidate is imported and gated again
// (attempt 2) and accepted; exit 0. `--no-retry` gates once (exit 1, no new version), and a
// candidate the built-in optimizer did not make is not retried, saying why.
#[test]
fn a_failing_replay_gate_retries_once_with_the_failing_replays_fed_to_the_optimizer() {
    let home = Home::embedded();
    std::fs::create_dir_all(home.path().join("blobs")).unwrap();
    add_template(&home, CODER_TEMPLATE, "acme/templates");
    human_run(&home);
    let (report, candidate, artifacts) = distill(&home, "rk-1", "round1");
    assert_eq!(report["promotable"], true, "{report:#}");
    let imported = home.json(&[
        "import",
        "--file",
        path_arg(&candidate),
        "--artifact-dir",
        path_arg(&artifacts),
    ]);
    assert_eq!(imported["version_id"], "coder@v2", "{imported}");
    let corpus = replay_corpus(&home);
    let versions = |home: &Home| -> Vec<String> {
        home.json(&["candidate", "list", "--template", "coder"])
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["version_id"].as_str().unwrap().to_owned())
            .collect()
    };
    // --no-retry: one gate run, not accepted
    let before = versions(&home);
    let out = home.run(&[
        "--json",
        "candidate",
        "gate",
        "coder@v2",
        "--corpus",
        path_arg(&corpus),
        "--no-retry",
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let once: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (once["accepted"].as_bool(), once["attempts"].as_i64()),
        (Some(false), Some(1)),
        "{once:#}"
    );
    assert!(once.get("retry").is_none(), "{once:#}");
    assert_eq!(versions(&home), before, "no new candidate");
    // the retry
    let out = home.run(&[
        "--json",
        "candidate",
        "gate",
        "coder@v2",
        "--corpus",
        path_arg(&corpus),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let gated: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(gated["accepted"], false, "{gated:#}");
    assert_eq!(
        (
            gated["champion_mean"].as_f64(),
            gated["candidate_mean"].as_f64()
        ),
        (Some(0.5), Some(0.5)),
        "a tie is not accepted: {gated:#}"
    );
    let retry = &gated["retry"];
    assert_eq!(
        (retry["retried"].as_bool(), retry["candidate"].as_str()),
        (Some(true), Some("coder@v3")),
        "{gated:#}"
    );
    let run = &retry["run"];
    assert_eq!(
        (
            run["accepted"].as_bool(),
            run["attempts"].as_i64(),
            run["candidate_version_id"].as_str(),
            run["candidate_mean"].as_f64()
        ),
        (Some(true), Some(2), Some("coder@v3"), Some(1.0)),
        "{gated:#}"
    );
    // what the optimizer was fed became a rule of the new candidate, beside the human guidance
    let v3 = home.json(&["candidate", "show", "coder@v3"]);
    let content = v3["content"].as_str().unwrap().to_owned();
    assert!(
        content.contains("When asked \"Plan the release\", include \"update the changelog\"")
            && content.contains("State the test plan before editing"),
        "{content}"
    );
    assert_eq!(v3["base_version_id"], "coder@v1", "{v3:#}");
    // text: says what happened
    let text = home.run(&[
        "candidate",
        "gate",
        "coder@v2",
        "--corpus",
        path_arg(&corpus),
    ]);
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    assert!(
        text.contains("retry: the failing replays were fed to the optimizer, which proposed coder@v3; gating it (attempt 2)"),
        "{text}"
    );
    assert!(
        !home.path().join("gate/coder-v3-retry").exists(),
        "a repeated retry finds the version it imported"
    );
    assert_eq!(
        versions(&home),
        ["coder@v3", "coder@v2"],
        "one new candidate for both retries"
    );
}

/// A ranked human review of `coder@v1` with four items whose options are real files: three
/// rankings prefer the option that states its test plan, the fourth prefers a direct fix over it.
fn four_rankings(home: &Home) {
    home.json(&[
        "review",
        "create",
        "--template",
        "coder",
        "--repo",
        "acme/app",
        "--run",
        "rk-4",
        "--mode",
        "explore",
        "--options",
        "2",
    ]);
    let items = [
        (
            "parser",
            "State the test plan first, then start editing the parser.",
            "Edit the parser right away.",
        ),
        (
            "cache",
            "Edit the cache code.",
            "State the test plan, then start editing the cache.",
        ),
        (
            "release",
            "Marketing fluff about the release.",
            "State the test plan before editing the release notes.",
        ),
        (
            "docs",
            "State the test plan before editing the docs.",
            "Fix the typo in the docs directly.",
        ),
    ];
    for (id, a, b) in items {
        let (a, b) = (
            write(&home.path().join(format!("in/{id}-a.md")), a),
            write(&home.path().join(format!("in/{id}-b.md")), b),
        );
        home.json(&[
            "review",
            "item",
            "add",
            "--run",
            "rk-4",
            "--item",
            id,
            "--option",
            &format!("a={}", a.display()),
            "--option",
            &format!("b={}", b.display()),
        ]);
    }
    let packet = home.path().join("packet4");
    home.json(&[
        "feedback",
        "markdown",
        "export",
        "--run",
        "rk-4",
        "--output",
        path_arg(&packet),
        "--force",
    ]);
    write(
        &packet.join("feedback.yml"),
        "run_id: rk-4\nreviewer: alice\nitems:\n\
         \x20 - item_id: parser\n    ranking: \"a > b\"\n    required_improvements: [state the test plan before editing]\n\
         \x20 - item_id: cache\n    ranking: \"b > a\"\n    required_improvements: [state the test plan before editing]\n\
         \x20 - item_id: release\n    ranking: \"b > a\"\n    rejected_traits:\n      A: [marketing fluff]\n    required_improvements: [state the test plan before editing]\n\
         \x20 - item_id: docs\n    ranking: \"b > a\"\n    useful_traits:\n      B: [fixes the typo directly]\n",
    );
    home.json(&[
        "feedback",
        "markdown",
        "import",
        "--packet",
        path_arg(&packet),
    ]);
}

// Issue 37 item 6: a distill candidate carries the held-out replay of the rankings it learned
// from as its score — each ranking left out in turn and its options (the real stored files) scored
// by the rules learned from the others: the test-plan rule picks the winner of three and misses
// the fourth, 3 of 4 = 0.75, with where it came from in `summary.metadata.score_evidence`. The
// guardrails read it at step 7: a floor of 0.8 holds the candidate naming 0.75, a floor of 0.7
// promotes it. One ranking alone measures nothing: the package says why, and has no score.
#[test]
fn a_distill_candidate_carries_its_held_out_replay_and_the_guardrails_read_it() {
    let home = Home::embedded();
    add_template(&home, CODER_TEMPLATE, "acme/templates");
    four_rankings(&home);
    let (report, candidate, artifacts) = distill(&home, "rk-4", "held-out");
    assert_eq!(report["promotable"], true, "{report:#}");
    let package: Value =
        serde_json::from_str(&std::fs::read_to_string(&candidate).unwrap()).unwrap();
    assert_eq!(package["summary"]["score"], 0.75, "{package:#}");
    assert_eq!(
        package["eval_report"]["held_out_replay"],
        serde_json::json!({"rankings": 4, "picked": 4, "agreed": 3}),
        "{package:#}"
    );
    let metadata = &package["summary"]["metadata"];
    assert!(metadata.get("score_unavailable").is_none(), "{metadata}");
    assert!(
        metadata["score_evidence"]
            .as_str()
            .unwrap()
            .contains("picked the reviewer's winner in 3 of 4 left-out rankings (0 undecided)"),
        "{metadata}"
    );
    let imported = home.json(&[
        "import",
        "--file",
        path_arg(&candidate),
        "--artifact-dir",
        path_arg(&artifacts),
    ]);
    assert_eq!(imported["version_id"], "coder@v2", "{imported}");
    assert_eq!(home.json(&["candidate", "show", "coder@v2"])["score"], 0.75);
    // the guardrails read it (one harvested merge with external CI as the auto-trace sample)
    let guard = |floor: &str| {
        on(
            &home,
            &format!(
                "auto_promote = true\nauto_promote_min_samples = 1\nauto_promote_min_score = {floor}\n"
            ),
        )
    };
    guard("0.8");
    home.json(&[
        "harvest",
        "attribute",
        "--repo",
        "acme/app",
        "--pr",
        "1",
        "--template",
        "coder@v2",
        "--resolved-commit",
        "c0ffee",
    ]);
    home.json(&[
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
    let held = skillforge_tests::decide_json(&home, &["candidate", "decide", "coder@v2"]);
    assert_eq!(
        (
            held["decision"]["step"].as_u64(),
            held["decision"]["reason"].as_str()
        ),
        (Some(7), Some("score 0.75 < auto_promote_min_score 0.8")),
        "{held:#}"
    );
    guard("0.7");
    let promoted = skillforge_tests::decide_json(&home, &["candidate", "decide", "coder@v2"]);
    assert_eq!(promoted["decision"]["decision"], "promote", "{promoted:#}");
    assert_eq!(
        home.json(&["candidate", "show", "coder@v2"])["state"],
        "current"
    );

    // one ranking: nothing to learn from when it is left out
    let one = Home::embedded();
    add_template(&one, CODER_TEMPLATE, "acme/templates");
    human_run(&one);
    let (_, candidate, _) = distill(&one, "rk-1", "single");
    let package: Value =
        serde_json::from_str(&std::fs::read_to_string(&candidate).unwrap()).unwrap();
    assert!(package["summary"].get("score").is_none(), "{package:#}");
    let why = package["summary"]["metadata"]["score_unavailable"]
        .as_str()
        .unwrap();
    assert!(
        why.contains("held-out replay: 1 ranked review(s) with readable options: leaving one out leaves nothing to learn from"),
        "{why}"
    );
}
