//! Automatic trace harvesting (Mode A) end to end through the built binary: outcome → row
//! mapping, revert flips, webhook signatures, legs on a fleet with a SIGKILLed worker, missing
//! toolchains, Mode A off, and the auto-trace export (seed: SkillOpt, "Automatic trace-harvested
//! feedback (Mode A, off by default)", "Cross-family review soft signal", "Deterministic checker
//! objective signal", "Deterministic hard-verifier tier"; rules S-13..S-33).

use std::io::Write;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use skillforge_contract::validate_training_package_json;
use skillforge_tests::webhook::{post, wait_listening};
use skillforge_tests::{
    CODER_TEMPLATE, Home, Reaped, RedisServer, add_template, free_port, two_commit_repo, write,
};

const RUN: &str = "auto-trace:coder@v1";
const SECRET: &str = "webhook-s3cret";

fn config(home: &Home, text: &str) {
    write(&home.path().join("config.toml"), text);
}

fn attribute(home: &Home, pr: u32, extra: &[&str]) {
    let pr = pr.to_string();
    let mut args = vec![
        "harvest",
        "attribute",
        "--repo",
        "acme/app",
        "--pr",
        &pr,
        "--template",
        "coder@v1",
        "--resolved-commit",
        "c0ffee",
    ];
    args.extend_from_slice(extra);
    home.json(&args);
}

fn outcome(home: &Home, pr: u32, extra: &[&str]) -> Value {
    let pr = pr.to_string();
    let mut args = vec!["harvest", "outcome", "--repo", "acme/app", "--pr", &pr];
    args.extend_from_slice(extra);
    home.json(&args)
}

fn status(home: &Home) -> Value {
    home.json(&["harvest", "status"])
}

/// Exports `run` while legs may still be writing: `None` when the export command fails (its
/// reads are not one snapshot, so it can see an event whose item it read before the commit).
fn try_export(home: &Home, run: &str) -> Option<(String, Value)> {
    let out = home.path().join("out/polled.json");
    home.run(&["export", "--run", run, "--output", out.to_str().unwrap()])
        .status
        .success()
        .then(|| {
            let text = std::fs::read_to_string(&out).unwrap();
            (text.clone(), serde_json::from_str(&text).unwrap())
        })
}

/// Exports `run`; returns (bytes, JSON).
fn export(home: &Home, run: &str) -> (String, Value) {
    let out = home
        .path()
        .join(format!("out/{}.json", run.replace([':', '@'], "_")));
    home.json(&["export", "--run", run, "--output", out.to_str().unwrap()]);
    let text = std::fs::read_to_string(&out).unwrap();
    (text.clone(), serde_json::from_str(&text).unwrap())
}

fn feedback<'a>(package: &'a Value, item: &str, reviewer: &str) -> Vec<&'a Value> {
    package["feedback_events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["item_id"] == item && e["reviewer"] == reviewer)
        .collect()
}

fn item<'a>(package: &'a Value, id: &str) -> &'a Value {
    package["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["id"] == id)
        .unwrap_or_else(|| panic!("no item {id} in {package:#}"))
}

fn on(extra: &str) -> String {
    format!("[skillopt]\nauto_trace_enabled = true\n{extra}")
}

#[test]
fn s15_s17_s18_s20_s21_outcome_mapping_and_in_place_upserts() {
    let home = Home::embedded();
    add_template(&home, CODER_TEMPLATE, "acme/templates");
    config(&home, &on(""));
    for pr in 1..=6 {
        attribute(&home, pr, &[]);
    }
    outcome(
        &home,
        1,
        &["--outcome", "merged", "--ci", "external", "--head", "aaa"],
    );
    outcome(&home, 2, &["--outcome", "merged", "--ci", "none"]);
    outcome(&home, 3, &["--outcome", "merged", "--ci", "gitmoot"]);
    outcome(&home, 4, &["--outcome", "blocked"]);
    outcome(
        &home,
        5,
        &["--outcome", "changes_requested", "--rounds", "1"],
    );
    outcome(
        &home,
        6,
        &["--outcome", "changes_requested", "--rounds", "3"],
    );
    let before = status(&home);
    // S-15: delivering the same outcome again changes no row count.
    let again = outcome(
        &home,
        1,
        &["--outcome", "merged", "--ci", "external", "--head", "aaa"],
    );
    assert_eq!(again["rows"][0]["inserted"], false, "{again}");
    assert_eq!(status(&home), before);
    assert_eq!(
        (
            before["eval_runs"].as_u64(),
            before["feedback_events"].as_u64()
        ),
        (Some(1), Some(6))
    );

    let (bytes, package) = export(&home, RUN);
    assert_eq!(package["eval_run"]["mode"], "validate");
    assert_eq!(
        package["feedback_context"]["feedback_source"],
        "automatic_trace"
    );
    let check = |pr: u32, choice: &str, score: Option<f64>| {
        let id = format!("acme/app#{pr}");
        let rows = feedback(&package, &id, "gitmoot-auto");
        assert_eq!(rows.len(), 1, "{id}");
        assert_eq!(
            (rows[0]["choice"].as_str(), rows[0]["source"].as_str()),
            (Some(choice), Some("auto-trace")),
            "{id}"
        );
        assert_eq!(
            item(&package, &id)["metadata"]["score"].as_f64(),
            score,
            "{id}"
        );
    };
    check(1, "a", Some(1.0));
    check(2, "a", None);
    check(3, "a", None);
    check(4, "b", Some(0.0));
    check(5, "b", Some(0.6));
    let low = item(&package, "acme/app#6")["metadata"]["score"]
        .as_f64()
        .unwrap();
    assert!(low < 0.6, "S-21: more fix rounds score lower ({low})");
    assert_eq!(item(&package, "acme/app#2")["metadata"]["has_score"], false);
    // S-18: an empty gate is never a fabricated 0.5; the confirmed one says so.
    assert!(!bytes.contains("0.5"), "{bytes}");
    assert!(
        feedback(&package, "acme/app#3", "gitmoot-auto")[0]["reasoning"]
            .as_str()
            .unwrap()
            .contains("confirmed empty gate")
    );
    assert!(
        !feedback(&package, "acme/app#2", "gitmoot-auto")[0]["reasoning"]
            .as_str()
            .unwrap()
            .contains("confirmed")
    );
    assert!(
        feedback(&package, "acme/app#1", "gitmoot-auto")[0]["reasoning"]
            .as_str()
            .unwrap()
            .contains("passing external CI")
    );
    validate_training_package_json(&bytes)
        .expect("the auto-trace export is a valid training package");
}

/// Every object key in `value` with its path (`items/*/metadata/score`; array indices as `*`).
fn key_paths(value: &Value, path: &str, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                let here = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}/{key}")
                };
                out.push(here.clone());
                key_paths(child, &here, out);
            }
        }
        Value::Array(items) => items
            .iter()
            .for_each(|child| key_paths(child, &format!("{path}/*"), out)),
        _ => {}
    }
}

/// S-06, decided: the `{score, has_score, feedback}` projection is never a wire field. What an
/// auto-trace item's metadata carries (`score`, `has_score`) is the harvester's record of the
/// outcome it observed (seed: the harvester writes the projected score and feedback into the
/// existing tables; Go's item metadata is raw JSON), so those keys appear only under
/// `items[].metadata` of an auto-trace run, never in a struct of the package, and a human run
/// whose items carry evaluator scores exports no projection key at all.
#[test]
fn s06_projection_keys_appear_only_as_harvested_item_metadata() {
    let home = Home::embedded();
    add_template(&home, CODER_TEMPLATE, "acme/templates");
    config(&home, &on(""));
    for (pr, extra) in [
        (1, &["--outcome", "merged", "--ci", "external"][..]),
        (2, &["--outcome", "blocked"][..]),
        (3, &["--outcome", "changes_requested", "--rounds", "2"][..]),
        (4, &["--outcome", "merged", "--ci", "none"][..]),
    ] {
        attribute(&home, pr, &[]);
        outcome(&home, pr, extra);
    }
    let (_, package) = export(&home, RUN);
    let mut paths = Vec::new();
    key_paths(&package, "", &mut paths);
    let projection = [
        "score",
        "has_score",
        "feedback",
        "normalized",
        "normalized_signal",
    ];
    let leaf = |p: &str| p.rsplit('/').next().unwrap().to_owned();
    let placed: Vec<&String> = paths
        .iter()
        .filter(|p| projection.contains(&leaf(p).as_str()))
        .collect();
    assert!(!placed.is_empty());
    for path in &placed {
        assert!(
            path.as_str() == "items/*/metadata/score"
                || path.as_str() == "items/*/metadata/has_score",
            "S-06: projection key at {path}"
        );
    }
    let event_keys: std::collections::BTreeSet<String> = paths
        .iter()
        .filter_map(|p| p.strip_prefix("feedback_events/*/"))
        .map(str::to_owned)
        .collect();
    let fields = [
        "run_id",
        "item_id",
        "choice",
        "reasoning",
        "reviewer",
        "source",
        "source_url",
        "created_at",
    ];
    assert!(
        event_keys.iter().all(|k| fields.contains(&k.as_str())),
        "feedback events carry FeedbackEvent fields only: {event_keys:?}"
    );
    for item in package["items"].as_array().unwrap() {
        let meta = &item["metadata"];
        assert_eq!(
            meta["has_score"].as_bool(),
            Some(!meta["score"].is_null()),
            "has_score says whether a score is recorded: {item}"
        );
    }

    // A human run whose item carries every score field the projection reads.
    home.json(&[
        "review",
        "create",
        "--template",
        "coder",
        "--repo",
        "acme/app",
        "--run",
        "scored-1",
    ]);
    let b = write(&home.path().join("in/b.md"), "baseline\n");
    let c = write(&home.path().join("in/c.md"), "candidate\n");
    let scores =
        r#"{"evaluator_score": {"hard": 1, "soft": 0.7, "dimension_scores": {"clarity": 0.5}}}"#;
    home.json(&[
        "review",
        "item",
        "add",
        "--run",
        "scored-1",
        "--item",
        "i1",
        "--baseline",
        b.to_str().unwrap(),
        "--candidate",
        c.to_str().unwrap(),
        "--metadata-json",
        scores,
    ]);
    let (_, human) = export(&home, "scored-1");
    let mut paths = Vec::new();
    key_paths(&human, "", &mut paths);
    let leaked: Vec<&String> = paths
        .iter()
        .filter(|p| projection.contains(&leaf(p).as_str()))
        .collect();
    assert!(
        leaked.is_empty(),
        "S-06: a human run exports projection keys {leaked:?}"
    );
}

#[test]
fn s16_unattributed_and_non_implement_changes_are_not_harvested() {
    let home = Home::embedded();
    add_template(&home, CODER_TEMPLATE, "acme/templates");
    config(&home, &on(""));
    attribute(&home, 2, &["--kind", "coordinator"]);
    let unattributed = outcome(&home, 1, &["--outcome", "merged", "--ci", "external"]);
    let coordinator = outcome(&home, 2, &["--outcome", "merged", "--ci", "external"]);
    assert_eq!(
        (
            unattributed["harvested"].as_bool(),
            coordinator["harvested"].as_bool()
        ),
        (Some(false), Some(false))
    );
    assert_eq!(status(&home)["feedback_events"], 0);
}

/// S-16: the operational events of an attributed implement job (runtime_lock_wait, repair_retry,
/// comment_post_failed, advance_retry), delivered to `serve`'s `POST /events` as a forge or CI
/// would, produce no feedback; an outcome named after one is refused. The same PR's merge then
/// does produce its row, so the zero is not a misconfigured harvester.
#[test]
fn s16_operational_events_of_an_attributed_job_produce_no_feedback() {
    let home = Home::embedded();
    add_template(&home, CODER_TEMPLATE, "acme/templates");
    config(&home, &on(""));
    attribute(&home, 4, &[]);
    let port = free_port();
    let _serve = Reaped(spawn_serve(&home, port, Some(SECRET)));
    wait_listening(&home, port);
    for event in [
        "runtime_lock_wait",
        "repair_retry",
        "comment_post_failed",
        "advance_retry",
    ] {
        let body = json!({"event": event, "repo": "acme/app", "pr": 4, "number": 4,
            "repository": {"full_name": "acme/app"}, "pull_request": {"number": 4}})
        .to_string();
        let (code, reply) = post(port, event, &body, Some(&sign(&body)));
        assert_eq!(code, 200, "{event}: {reply}");
        assert_eq!(reply["rows"], json!([]), "{event} produced rows: {reply}");
        let as_outcome = json!({"repo": "acme/app", "pr": 4, "outcome": event}).to_string();
        let (code, reply) = post(
            port,
            "skillforge_outcome",
            &as_outcome,
            Some(&sign(&as_outcome)),
        );
        assert_eq!(code, 400, "an outcome named {event} is refused: {reply}");
    }
    assert_eq!(
        status(&home)["feedback_events"],
        0,
        "S-16: operational events never produce feedback"
    );
    let merged =
        json!({"repo": "acme/app", "pr": 4, "outcome": "merged", "ci": "external"}).to_string();
    let (code, reply) = post(port, "skillforge_outcome", &merged, Some(&sign(&merged)));
    assert_eq!(
        (code, reply["rows"].as_array().map(Vec::len)),
        (200, Some(1)),
        "{reply}"
    );
    assert_eq!(status(&home)["feedback_events"], 1);
}

#[test]
fn s22_s23_revert_flips_the_row_in_place_and_cross_repo_reverts_are_ignored() {
    let home = Home::embedded();
    add_template(&home, CODER_TEMPLATE, "acme/templates");
    config(&home, &on(""));
    attribute(&home, 12, &[]);
    outcome(&home, 12, &["--outcome", "merged", "--ci", "external"]);
    let count = |home: &Home| status(home)["feedback_events"].as_u64().unwrap();
    assert_eq!(count(&home), 1);
    // S-23: another repository's PR #12, a malformed body and an unknown PR change nothing and never fail.
    for body in ["Reverts other/repo#12", "Reverts #12x", "Reverts #999"] {
        outcome(&home, 40, &["--outcome", "merged", "--reverts-body", body]);
    }
    let (_, package) = export(&home, RUN);
    assert_eq!(
        feedback(&package, "acme/app#12", "gitmoot-auto")[0]["choice"],
        "a"
    );
    // S-22: the revert PR #13 flips #12's row to b in place; polling it again is idempotent.
    for _ in 0..2 {
        outcome(
            &home,
            13,
            &[
                "--outcome",
                "merged",
                "--reverts-body",
                "Reverts acme/app#12",
            ],
        );
        let (_, package) = export(&home, RUN);
        let rows = feedback(&package, "acme/app#12", "gitmoot-auto");
        assert_eq!((rows.len(), rows[0]["choice"].as_str()), (1, Some("b")));
        assert_eq!(count(&home), 1, "row count unchanged");
    }
    // S-22: a re-delivered merge of #12 after its revert does not flip the corrective negative back.
    outcome(&home, 12, &["--outcome", "merged", "--ci", "external"]);
    let (_, package) = export(&home, RUN);
    assert_eq!(
        feedback(&package, "acme/app#12", "gitmoot-auto")[0]["choice"],
        "b",
        "the revert stands"
    );
    // revert_detection_enabled = false keeps the harvester but not the overwrite.
    config(&home, &on("revert_detection_enabled = false\n"));
    attribute(&home, 20, &[]);
    outcome(&home, 20, &["--outcome", "merged", "--ci", "external"]);
    outcome(
        &home,
        21,
        &["--outcome", "merged", "--reverts-body", "Reverts #20"],
    );
    let (_, package) = export(&home, RUN);
    assert_eq!(
        feedback(&package, "acme/app#20", "gitmoot-auto")[0]["choice"],
        "a"
    );
}

/// A human A/B run with one imported feedback event; returns its export bytes.
fn human_run(home: &Home) {
    home.json(&[
        "review",
        "create",
        "--template",
        "coder",
        "--repo",
        "acme/app",
        "--run",
        "human-1",
    ]);
    let baseline = write(&home.path().join("in/b.md"), "baseline\n");
    let candidate = write(&home.path().join("in/c.md"), "candidate\n");
    home.json(&[
        "review",
        "item",
        "add",
        "--run",
        "human-1",
        "--item",
        "i1",
        "--baseline",
        baseline.to_str().unwrap(),
        "--candidate",
        candidate.to_str().unwrap(),
    ]);
    let packet = home.path().join("packet");
    home.json(&[
        "feedback",
        "markdown",
        "export",
        "--run",
        "human-1",
        "--output",
        packet.to_str().unwrap(),
        "--force",
    ]);
    write(
        &packet.join("feedback.yml"),
        "run_id: human-1\nreviewer: carol\nitems:\n  - {item_id: i1, choice: a}\n",
    );
    home.json(&[
        "feedback",
        "markdown",
        "import",
        "--packet",
        packet.to_str().unwrap(),
    ]);
}

#[test]
fn s13_s25_mode_a_off_writes_nothing_and_human_exports_are_byte_identical() {
    let home = Home::embedded();
    add_template(&home, CODER_TEMPLATE, "acme/templates");
    human_run(&home);
    let (human_before, package) = export(&home, "human-1");
    assert_eq!(
        package["feedback_context"]["feedback_source"],
        "imported_human_review"
    );
    assert!(!human_before.contains("automatic_trace"));
    // Every key off (no [skillopt] at all): nothing is constructed, nothing written, the revert body
    // unread; an attribution neither (issue 37 item 5: it was written while harvesting was off).
    let before = status(&home);
    attribute(&home, 12, &["--checkout", home.path().to_str().unwrap()]);
    assert_eq!(
        status(&home),
        before,
        "no attribution written while harvesting is off"
    );
    assert_eq!(
        skillforge_tests::decide::sql(&home, "SELECT COUNT(*) FROM harvest_attributions"),
        "0"
    );
    for args in [
        &["--outcome", "merged", "--ci", "external", "--head", "aaa"][..],
        &["--outcome", "blocked"][..],
        &["--outcome", "merged", "--reverts-body", "Reverts #12"][..],
    ] {
        let report = outcome(&home, 12, args);
        assert_eq!(
            report,
            json!({"harvested": false, "reason": "auto_trace_disabled", "rows": [], "legs": []})
        );
    }
    assert_eq!(status(&home), before);
    assert_eq!(
        home.json(&["jobs", "list"]).as_array().map(Vec::len),
        Some(0),
        "no leg job enqueued"
    );
    // The legs' own switches without auto_trace_enabled do nothing either (S-26).
    config(
        &home,
        "[skillopt]\nhard_verifiers_enabled = true\nhard_verifier_commands = [\"true\"]\ncross_family_review_enabled = true\n",
    );
    outcome(
        &home,
        12,
        &["--outcome", "merged", "--ci", "external", "--head", "aaa"],
    );
    assert_eq!(status(&home), before);
    assert_eq!(export(&home, "human-1").0, human_before);
    // With the harvester on and harvesting the same template version, the human export is unchanged.
    config(&home, &on(""));
    attribute(&home, 12, &["--checkout", home.path().to_str().unwrap()]);
    outcome(&home, 12, &["--outcome", "merged", "--ci", "external"]);
    assert_eq!(status(&home)["feedback_events"], 2);
    assert_eq!(
        export(&home, "human-1").0,
        human_before,
        "S-25: byte-identical human export"
    );
}

#[test]
fn s26_s39_missing_toolchain_writes_no_hard_row_and_a_failing_verifier_writes_zero() {
    let (repo, _base, head) = two_commit_repo();
    let home = Home::embedded();
    add_template(&home, CODER_TEMPLATE, "acme/templates");
    config(
        &home,
        &on(
            "hard_verifiers_enabled = true\nhard_verifier_commands = [\"no-such-toolchain-xyz --version\"]\n",
        ),
    );
    attribute(&home, 1, &["--checkout", repo.path().to_str().unwrap()]);
    attribute(&home, 2, &["--checkout", repo.path().to_str().unwrap()]);
    let report = outcome(
        &home,
        1,
        &[
            "--outcome",
            "merged",
            "--ci",
            "none",
            "--head",
            &head,
            "--wait",
        ],
    );
    assert_eq!(report["legs"].as_array().unwrap().len(), 1, "{report}");
    let (_, package) = export(&home, RUN);
    assert!(
        feedback(&package, "hard#acme/app#1", "gitmoot-verifier").is_empty(),
        "not runnable ⇒ no hard row"
    );
    config(
        &home,
        &on(
            "hard_verifiers_enabled = true\nhard_verifier_commands = [\"test -f src/lib.rs\", \"exit 3\"]\n",
        ),
    );
    outcome(
        &home,
        2,
        &[
            "--outcome",
            "merged",
            "--ci",
            "none",
            "--head",
            &head,
            "--wait",
        ],
    );
    let (bytes, package) = export(&home, RUN);
    let rows = feedback(&package, "hard#acme/app#2", "gitmoot-verifier");
    assert_eq!((rows.len(), rows[0]["choice"].as_str()), (1, Some("b")));
    let tags = &item(&package, "hard#acme/app#2")["metadata"];
    assert_eq!(
        (
            tags["hard_verifier"].as_bool(),
            tags["hard_passed"].as_bool(),
            tags["hard_score"].as_f64()
        ),
        (Some(true), Some(false), Some(0.0))
    );
    assert_eq!(tags["command_results"].as_array().unwrap().len(), 2);
    // The floor row of the empty gate is untouched by the hard row (S-27).
    assert_eq!(
        feedback(&package, "acme/app#2", "gitmoot-auto")[0]["choice"],
        "a"
    );
    validate_training_package_json(&bytes).unwrap();
}

fn fake_claude(dir: &Path, rubric: &str) -> PathBuf {
    let bin = dir.join("fakebin");
    std::fs::create_dir_all(&bin).unwrap();
    let result = json!({"type": "result", "subtype": "success", "result": rubric}).to_string();
    let script = format!(
        "#!/bin/sh\ncat >/dev/null\nprintf '%s\\n' '{}'\n",
        result.replace('\'', "'\\''")
    );
    let path = write(&bin.join("claude"), &script);
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    bin
}

fn path_with(bin: &Path) -> String {
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

#[test]
fn s27_s29_s30_checker_and_review_legs_write_their_own_rows() {
    let (repo, base, head) = two_commit_repo();
    let home = Home::embedded();
    add_template(&home, CODER_TEMPLATE, "acme/templates");
    let bin = fake_claude(
        home.path(),
        r#"{"coverage":0.2,"containment":0.3,"fidelity":0.4,"notes":"misses the ask"}"#,
    );
    config(
        &home,
        &on(
            "deterministic_checkers_enabled = true\ncross_family_review_enabled = true\nreview_runtimes = [\"claude\"]\n",
        ),
    );
    attribute(
        &home,
        3,
        &[
            "--checkout",
            repo.path().to_str().unwrap(),
            "--base",
            &base,
            "--runtime",
            "claude",
            "--instructions",
            "add f0..f11",
        ],
    );
    let out = home
        .cmd()
        .env("PATH", path_with(&bin))
        .arg("--json")
        .args([
            "harvest",
            "outcome",
            "--repo",
            "acme/app",
            "--pr",
            "3",
            "--outcome",
            "merged",
            "--ci",
            "external",
            "--head",
            &head,
            "--wait",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (_, package) = export(&home, RUN);
    let checker = feedback(&package, "checker#acme/app#3", "gitmoot-checker");
    assert_eq!(checker.len(), 1, "{package:#}");
    let tags = &item(&package, "checker#acme/app#3")["metadata"];
    assert_eq!(tags["objective"], true);
    assert!(tags["dimension_scores"]["diff_size"].is_number());
    // S-29: the only reviewer shares the implementer's family: a tagged fallback row plus the event.
    let review = feedback(&package, "review#acme/app#3", "gitmoot-review");
    assert_eq!(
        (review.len(), review[0]["choice"].as_str()),
        (1, Some("b")),
        "S-30: mean 0.3 ⇒ b"
    );
    let tags = &item(&package, "review#acme/app#3")["metadata"];
    assert_eq!(
        (
            tags["self_family"].as_bool(),
            tags["judge_derived"].as_bool(),
            tags["reviewer_runtime"].as_str()
        ),
        (Some(true), Some(true), Some("claude"))
    );
    let events = home.json(&["harvest", "events", "--repo", "acme/app", "--pr", "3"]);
    assert!(
        events
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["event"] == "cross_family_review_samefamily_fallback"),
        "{events}"
    );
    assert_eq!(
        package["feedback_events"].as_array().unwrap().len(),
        3,
        "floor, checker, review coexist"
    );
}

/// `openssl dgst -sha256 -hmac SECRET` of `body` as `sha256=<hex>`.
fn sign(body: &str) -> String {
    skillforge_tests::webhook::sign(SECRET, body)
}

fn spawn_serve(home: &Home, port: u16, secret: Option<&str>) -> std::process::Child {
    skillforge_tests::webhook::spawn_serve(home, port, secret, &[])
}

#[test]
fn webhook_signature_good_bad_missing_and_no_secret_refuses_to_start() {
    let home = Home::embedded();
    add_template(&home, CODER_TEMPLATE, "acme/templates");
    config(&home, &on(""));
    // No secret ⇒ `serve --listen` refuses to start.
    let mut refused = spawn_serve(&home, free_port(), None);
    let code = skillforge_tests::wait_exit(&mut refused, Duration::from_secs(30));
    assert_eq!(code.code(), Some(2), "{}", home.logs());
    attribute(&home, 5, &[]);
    let port = free_port();
    let _serve = Reaped(spawn_serve(&home, port, Some(SECRET)));
    wait_listening(&home, port);
    let body = json!({"repo": "acme/app", "pr": 5, "outcome": "blocked"}).to_string();
    let before = status(&home);
    let (code, reply) = post(port, "skillforge_outcome", &body, None);
    assert_eq!(code, 401, "missing signature: {reply}");
    let (code, reply) = post(port, "skillforge_outcome", &body, Some("sha256=00ff"));
    assert_eq!(code, 401, "bad signature: {reply}");
    let bad = "{\"repo\": 5}";
    let (code, reply) = post(port, "skillforge_outcome", bad, Some(&sign(bad)));
    assert_eq!(code, 400, "bad payload: {reply}");
    assert!(reply["error"].as_str().unwrap().contains("repo"), "{reply}");
    assert_eq!(status(&home), before, "refused events write nothing");
    let (code, reply) = post(port, "skillforge_outcome", &body, Some(&sign(&body)));
    assert_eq!(code, 200, "{reply}");
    assert_eq!(reply["rows"][0]["choice"], "b");
    assert_eq!(status(&home)["feedback_events"], 1);
}

#[test]
fn s33_verifier_leg_rerun_after_sigkilled_worker_writes_exactly_one_row() {
    s33_sigkilled_leg(Home::embedded());
}

// S-33 — issue 13 item 10: the same SIGKILLed harvest leg on a Redis fleet.
#[test]
fn s33_verifier_leg_on_a_redis_fleet_rerun_after_sigkilled_worker_writes_exactly_one_row() {
    let redis = RedisServer::start();
    s33_sigkilled_leg(Home::redis(&redis.url()));
}

fn s33_sigkilled_leg(home: Home) {
    let (repo, _base, head) = two_commit_repo();
    add_template(&home, CODER_TEMPLATE, "acme/templates");
    config(
        &home,
        &on(
            "hard_verifiers_enabled = true\nhard_verifier_commands = [\"sleep 3 && test -f src/lib.rs\"]\n",
        ),
    );
    attribute(&home, 9, &["--checkout", repo.path().to_str().unwrap()]);
    let report = outcome(
        &home,
        9,
        &["--outcome", "merged", "--ci", "none", "--head", &head],
    );
    let job_id = report["legs"][0]["job_id"].as_str().unwrap().to_owned();
    let mut first = Reaped(home.spawn_worker("w1", &[]));
    home.wait_job(
        &job_id,
        Duration::from_secs(30),
        "the verifier leg to run",
        |j| j["state"] == "running",
    );
    first.0.kill().unwrap();
    let _ = first.0.wait();
    let _second = Reaped(home.spawn_worker("w2", &[]));
    let _serve = Reaped(home.spawn_serve());
    let job = home.wait_job(
        &job_id,
        Duration::from_secs(90),
        "the re-run verifier leg to finish",
        |j| j["state"] == "succeeded",
    );
    assert!(job["attempts"].as_u64().unwrap() >= 2, "{job:#}");
    let package = home.wait(Duration::from_secs(30), "the hard row", || {
        let (_, package) = try_export(&home, RUN)?;
        (!feedback(&package, "hard#acme/app#9", "gitmoot-verifier").is_empty()).then_some(package)
    });
    let rows = feedback(&package, "hard#acme/app#9", "gitmoot-verifier");
    assert_eq!((rows.len(), rows[0]["choice"].as_str()), (1, Some("a")));
    assert_eq!(
        item(&package, "hard#acme/app#9")["metadata"]["hard_score"],
        1.0
    );
    assert_eq!(
        status(&home)["feedback_events"],
        2,
        "floor + exactly one hard row"
    );
}

#[test]
fn ci_and_forge_report_to_a_running_serve_with_a_redis_fleet() {
    let redis = RedisServer::start();
    let (repo, base, head) = two_commit_repo();
    let home = Home::redis(&redis.url());
    add_template(&home, CODER_TEMPLATE, "acme/templates");
    let bin = fake_claude(
        home.path(),
        r#"{"coverage":0.9,"containment":0.8,"fidelity":0.9,"architecture":0.7,"readability":0.8,"abstraction":0.7}"#,
    );
    config(
        &home,
        &on(
            "hard_verifiers_enabled = true\nhard_verifier_commands = [\"test -f src/lib.rs\"]\n\
             deterministic_checkers_enabled = true\ncross_family_review_enabled = true\nreview_runtimes = [\"codex\", \"claude\"]\n",
        ),
    );
    attribute(
        &home,
        7,
        &[
            "--checkout",
            repo.path().to_str().unwrap(),
            "--base",
            &base,
            "--runtime",
            "codex",
            "--title",
            "Add functions",
        ],
    );
    let worker = home
        .cmd()
        .env("PATH", path_with(&bin))
        .args(["worker", "--name", "fleet"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(home.path().join("worker-fleet.log")).unwrap())
        .spawn()
        .unwrap();
    let _worker = Reaped(worker);
    let port = free_port();
    let _serve = Reaped(spawn_serve(&home, port, Some(SECRET)));
    wait_listening(&home, port);
    // The forge reports CI at the head, then the merge.
    let ci = json!({"sha": head, "state": "success", "context": "ci/build", "description": "", "repository": {"full_name": "acme/app"}}).to_string();
    assert_eq!(post(port, "status", &ci, Some(&sign(&ci))).0, 200);
    let merged = json!({"action": "closed", "number": 7, "repository": {"full_name": "acme/app"},
        "pull_request": {"number": 7, "merged": true, "merge_commit_sha": head, "head": {"sha": head}, "body": "Adds f0..f11"}}).to_string();
    let (code, reply) = post(port, "pull_request", &merged, Some(&sign(&merged)));
    assert_eq!(code, 200, "{reply}");
    assert_eq!(reply["legs"].as_array().unwrap().len(), 3, "{reply}");
    let (bytes, package) = home.wait(Duration::from_secs(90), "the three leg rows", || {
        let (bytes, package) = try_export(&home, RUN)?;
        (package["feedback_events"].as_array().unwrap().len() == 4).then_some((bytes, package))
    });
    assert_eq!(
        feedback(&package, "acme/app#7", "gitmoot-auto")[0]["choice"],
        "a"
    );
    assert_eq!(
        item(&package, "acme/app#7")["metadata"]["score"],
        1.0,
        "S-17: passing external CI"
    );
    assert_eq!(
        feedback(&package, "hard#acme/app#7", "gitmoot-verifier")[0]["choice"],
        "a"
    );
    assert_eq!(
        feedback(&package, "checker#acme/app#7", "gitmoot-checker").len(),
        1
    );
    let review = feedback(&package, "review#acme/app#7", "gitmoot-review");
    assert_eq!(review[0]["choice"], "a");
    let tags = &item(&package, "review#acme/app#7")["metadata"];
    assert_eq!(
        tags["reviewer_runtime"], "claude",
        "S-28: never the implementer's family (codex)"
    );
    assert!(tags.get("self_family").is_none());
    assert_eq!(
        package["feedback_context"]["feedback_source"],
        "automatic_trace"
    );
    validate_training_package_json(&bytes)
        .expect("the auto-trace export is a valid training package");
}

/// `src`'s files (a repository) copied to `dst`, with no remote: a checkout only this host sees.
fn copy_repo(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).unwrap();
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", src.display()))
        .arg(dst)
        .status()
        .unwrap();
    assert!(status.success());
}

// Issue 20: the hard-verifier and checker legs of a harvest run on a worker that cannot see the
// control plane's home, where the checkout lives: the checkout travels as a git bundle through
// the queue's transfer area, the worker fetches it into its mirror cache and clones from there.
#[test]
fn a_worker_that_cannot_see_the_checkout_runs_the_hard_verifier_and_checker_legs() {
    let redis = RedisServer::start();
    let (repo, base, head) = two_commit_repo();
    let home = Home::redis(&redis.url());
    let checkout = home.path().join("checkout");
    copy_repo(repo.path(), &checkout);
    drop(repo);
    add_template(&home, CODER_TEMPLATE, "acme/templates");
    config(
        &home,
        &on(
            "hard_verifiers_enabled = true\nhard_verifier_commands = [\"test -f src/lib.rs\"]\ndeterministic_checkers_enabled = true\n",
        ),
    );
    attribute(
        &home,
        8,
        &[
            "--checkout",
            checkout.to_str().unwrap(),
            "--base",
            &base,
            "--runtime",
            "codex",
        ],
    );
    let _vm = Reaped(skillforge_tests::isolated::spawn_isolated_worker(
        &home,
        "vm",
        &[],
    ));
    let port = free_port();
    let _serve = Reaped(spawn_serve(&home, port, Some(SECRET)));
    wait_listening(&home, port);
    outcome(
        &home,
        8,
        &["--outcome", "merged", "--ci", "external", "--head", &head],
    );
    let (_, package) = home.wait(
        Duration::from_secs(90),
        "the hard-verifier and checker rows",
        || {
            let (bytes, package) = try_export(&home, RUN)?;
            (package["feedback_events"].as_array().unwrap().len() == 3).then_some((bytes, package))
        },
    );
    assert_eq!(
        feedback(&package, "hard#acme/app#8", "gitmoot-verifier")[0]["choice"],
        "a",
        "{package:#}"
    );
    assert_eq!(
        feedback(&package, "checker#acme/app#8", "gitmoot-checker").len(),
        1
    );
    let home_text = home.path().display().to_string();
    for job in home
        .json(&["jobs", "list"])
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["workflow"] == "harvest")
    {
        let shown = home.job(job["id"].as_str().unwrap());
        assert!(
            shown["history"][0]["worker"]
                .as_str()
                .unwrap()
                .starts_with("vm-"),
            "{shown:#}"
        );
        let payload = shown["payload"].to_string();
        assert!(
            !payload.contains(&home_text),
            "no control-plane path in a fleet job: {payload}"
        );
        assert!(
            payload.contains("repo.bundle"),
            "the checkout travelled as a bundle: {payload}"
        );
    }
}

// Issue 13 item 12 (S-15, S-21): outcomes for one PR delivered at once by several processes
// (a webhook redelivery racing a manual report, a merge racing a block) leave one floor row and
// one eval run, whichever wins.
#[test]
fn outcomes_racing_for_one_pr_leave_one_row() {
    let home = Home::embedded();
    add_template(&home, CODER_TEMPLATE, "acme/templates");
    config(&home, &on(""));
    attribute(&home, 1, &[]);
    let racers: Vec<std::process::Child> = (0..6)
        .map(|i| {
            let outcome = if i % 2 == 0 {
                ["--outcome", "merged", "--ci", "none"].as_slice()
            } else {
                ["--outcome", "blocked"].as_slice()
            };
            home.cmd()
                .args([
                    "--json", "harvest", "outcome", "--repo", "acme/app", "--pr", "1",
                ])
                .args(outcome)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let results: Vec<(Option<i32>, String)> = racers
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            )
        })
        .collect();
    assert!(
        results.iter().all(|(c, _)| *c == Some(0)),
        "every delivery is accepted: {results:?}"
    );
    let st = status(&home);
    assert_eq!(
        (st["eval_runs"].as_u64(), st["feedback_events"].as_u64()),
        (Some(1), Some(1)),
        "{results:?}\n{st:#}"
    );
    let (_, package) = export(&home, RUN);
    assert_eq!(
        feedback(&package, "acme/app#1", "gitmoot-auto").len(),
        1,
        "{package:#}"
    );
}

/// A POST /events that may never be answered (its `serve` is killed meanwhile): sends and
/// returns without reading.
fn send_only(port: u16, event: &str, body: &str) -> TcpStream {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let request = format!(
        "POST /events HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nX-GitHub-Event: {event}\r\nX-GitHub-Delivery: d-1\r\nX-Hub-Signature-256: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        sign(body),
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    stream
}

fn review(pr: u32, id: u64, state: &str) -> String {
    json!({"action": "submitted", "repository": {"full_name": "acme/app"}, "pull_request": {"number": pr}, "review": {"id": id, "state": state}}).to_string()
}

fn merged_pr(pr: u32, head: &str, body: &str) -> String {
    json!({"action": "closed", "number": pr, "repository": {"full_name": "acme/app"},
        "pull_request": {"number": pr, "merged": true, "merge_commit_sha": head, "head": {"sha": head}, "body": body}})
    .to_string()
}

// Issue 13 item 11 (S-17, S-19..S-22): GitHub's own deliveries through `serve`: reviews asking
// for changes count fix rounds (a redelivered review counts once, an approval not at all),
// `check_suite` and `status` at the head make a merge's CI evidence, and the Revert button's PR
// body flips the original row.
#[test]
fn github_reviews_checks_and_the_revert_button_through_serve() {
    let home = Home::embedded();
    add_template(&home, CODER_TEMPLATE, "acme/templates");
    config(&home, &on(""));
    attribute(&home, 7, &[]);
    attribute(&home, 8, &[]);
    let port = free_port();
    let _serve = Reaped(spawn_serve(&home, port, Some(SECRET)));
    wait_listening(&home, port);
    let deliver = |event: &str, body: &str| {
        let (code, reply) = post(port, event, body, Some(&sign(body)));
        assert_eq!(code, 200, "{event}: {reply}");
        reply
    };
    let score = |pr: u32| {
        let (_, package) = export(&home, RUN);
        let id = format!("acme/app#{pr}");
        let rows = feedback(&package, &id, "gitmoot-auto")
            .into_iter()
            .cloned()
            .collect::<Vec<_>>();
        (rows, item(&package, &id)["metadata"]["score"].as_f64())
    };
    // Two change requests (fix rounds 1, 2); the second redelivered; an approval adds nothing.
    deliver("pull_request_review", &review(7, 101, "CHANGES_REQUESTED"));
    let (rows, one_round) = score(7);
    assert_eq!(
        (rows.len(), rows[0]["choice"].as_str(), one_round),
        (1, Some("b"), Some(0.6)),
        "S-20: one round"
    );
    deliver("pull_request_review", &review(7, 102, "changes_requested"));
    deliver("pull_request_review", &review(7, 102, "changes_requested"));
    deliver("pull_request_review", &review(7, 103, "approved"));
    let (rows, two_rounds) = score(7);
    assert_eq!(rows.len(), 1, "one row, upserted in place");
    assert!(
        two_rounds.unwrap() < 0.6,
        "S-21: two rounds score lower than one ({two_rounds:?})"
    );
    let (_, again) = score(7);
    assert_eq!(again, two_rounds);

    // CI at the head from a check suite and a status, then the merge: passing external CI.
    let head = "8888888888888888888888888888888888888888";
    deliver("check_suite", &json!({"action": "completed", "repository": {"full_name": "acme/app"},
        "check_suite": {"head_sha": head, "conclusion": "success", "app": {"slug": "github-actions"}}}).to_string());
    deliver("status", &json!({"sha": head, "state": "success", "context": "ci/build", "description": "", "repository": {"full_name": "acme/app"}}).to_string());
    deliver("pull_request", &merged_pr(8, head, "Adds the cache"));
    let (rows, merged) = score(8);
    assert_eq!(
        (rows.len(), rows[0]["choice"].as_str(), merged),
        (1, Some("a"), Some(1.0)),
        "S-17: {rows:?}"
    );
    assert!(
        rows[0]["reasoning"]
            .as_str()
            .unwrap()
            .contains("passing external CI"),
        "{rows:?}"
    );

    // GitHub's Revert button: PR #9 titled `Revert "…"`, body `Reverts acme/app#8`.
    deliver(
        "pull_request",
        &merged_pr(
            9,
            "9999999999999999999999999999999999999999",
            "Reverts acme/app#8",
        ),
    );
    let (rows, _) = score(8);
    assert_eq!(
        (rows.len(), rows[0]["choice"].as_str()),
        (1, Some("b")),
        "S-22: the revert flips #8 in place"
    );
    assert_eq!(
        status(&home)["feedback_events"],
        2,
        "#7 and #8, one row each"
    );
}

// Issue 13 item 11: a delivery whose `serve` was SIGKILLed while handling it (or before), then
// redelivered by GitHub (same delivery id and body) to the restarted `serve`, is applied once:
// one floor row, and the merge's leg enqueued once.
#[test]
fn a_delivery_redelivered_after_serve_was_sigkilled_is_applied_once() {
    let (repo, _base, head) = two_commit_repo();
    let home = Home::embedded();
    add_template(&home, CODER_TEMPLATE, "acme/templates");
    config(
        &home,
        &on("hard_verifiers_enabled = true\nhard_verifier_commands = [\"test -f src/lib.rs\"]\n"),
    );
    attribute(&home, 5, &["--checkout", repo.path().to_str().unwrap()]);
    let body = merged_pr(5, &head, "Adds f0..f11");
    let port = free_port();
    let mut first = Reaped(spawn_serve(&home, port, Some(SECRET)));
    wait_listening(&home, port);
    let _unanswered = send_only(port, "pull_request", &body);
    first.0.kill().unwrap();
    let _ = first.0.wait();
    let port = free_port();
    let _second = Reaped(spawn_serve(&home, port, Some(SECRET)));
    wait_listening(&home, port);
    for _ in 0..2 {
        let (code, reply) = post(port, "pull_request", &body, Some(&sign(&body)));
        assert_eq!(code, 200, "{reply}");
    }
    assert_eq!(status(&home)["feedback_events"], 1, "one floor row");
    let jobs = home.json(&["jobs", "list"]);
    let legs: Vec<&Value> = jobs
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["workflow"] == "harvest")
        .collect();
    assert_eq!(legs.len(), 1, "the verifier leg enqueued once: {jobs:#}");
}

// S-27: every leg on, one merged PR, each leg re-run twice (`harvest rerun`): exactly 4 rows
// for the PR, the floor row untouched, each leg's tags still there, the run still
// automatic_trace; each re-run is a new job whose result re-upserted its own row.
#[test]
fn s27_rerunning_each_leg_twice_keeps_four_rows_and_the_floor_row() {
    let (repo, base, head) = two_commit_repo();
    let home = Home::embedded();
    add_template(&home, CODER_TEMPLATE, "acme/templates");
    let bin = fake_claude(
        home.path(),
        r#"{"coverage":0.9,"containment":0.8,"fidelity":0.7,"notes":"ok"}"#,
    );
    config(
        &home,
        &on(
            "hard_verifiers_enabled = true\nhard_verifier_commands = [\"test -f src/lib.rs\"]\n\
             deterministic_checkers_enabled = true\ncross_family_review_enabled = true\nreview_runtimes = [\"claude\"]\n",
        ),
    );
    attribute(
        &home,
        3,
        &[
            "--checkout",
            repo.path().to_str().unwrap(),
            "--base",
            &base,
            "--runtime",
            "codex",
            "--instructions",
            "add f0..f11",
        ],
    );
    let run = |args: &[&str]| {
        let out = home
            .cmd()
            .env("PATH", path_with(&bin))
            .arg("--json")
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    run(&[
        "harvest",
        "outcome",
        "--repo",
        "acme/app",
        "--pr",
        "3",
        "--outcome",
        "merged",
        "--ci",
        "external",
        "--head",
        &head,
        "--wait",
    ]);
    let (_, before) = export(&home, RUN);
    assert_eq!(
        before["feedback_events"].as_array().unwrap().len(),
        4,
        "floor + three legs: {before:#}"
    );
    let floor_before = feedback(&before, "acme/app#3", "gitmoot-auto")[0].clone();
    let mut rerun_jobs = Vec::new();
    for _ in 0..2 {
        for leg in ["hard_verifier", "checkers", "review"] {
            let reply = run(&[
                "harvest", "rerun", "--repo", "acme/app", "--pr", "3", "--leg", leg, "--wait",
            ]);
            assert_eq!(reply["state"], "succeeded", "{leg}: {reply}");
            rerun_jobs.push(reply["job_id"].as_str().unwrap().to_owned());
        }
    }
    rerun_jobs.sort();
    rerun_jobs.dedup();
    assert_eq!(rerun_jobs.len(), 6, "every re-run is a job of its own");
    let (_, after) = export(&home, RUN);
    assert_eq!(
        after["feedback_events"].as_array().unwrap().len(),
        4,
        "still exactly 4 rows: {after:#}"
    );
    assert_eq!(
        feedback(&after, "acme/app#3", "gitmoot-auto")[0],
        &floor_before,
        "the floor row is untouched"
    );
    for (id, reviewer) in [
        ("hard#acme/app#3", "gitmoot-verifier"),
        ("checker#acme/app#3", "gitmoot-checker"),
        ("review#acme/app#3", "gitmoot-review"),
    ] {
        assert_eq!(feedback(&after, id, reviewer).len(), 1, "{id}");
    }
    let tags = |id: &str| item(&after, id)["metadata"].clone();
    assert_eq!(tags("hard#acme/app#3")["hard_verifier"], true);
    assert!(tags("hard#acme/app#3")["command_results"].is_array());
    assert_eq!(tags("checker#acme/app#3")["objective"], true);
    assert!(tags("checker#acme/app#3")["dimension_scores"].is_object());
    assert_eq!(
        (
            tags("review#acme/app#3")["judge_derived"].as_bool(),
            tags("review#acme/app#3")["reviewer_runtime"].as_str()
        ),
        (Some(true), Some("claude"))
    );
    assert_eq!(
        after["feedback_context"]["feedback_source"],
        "automatic_trace"
    );

    // A leg that was never dispatched cannot be re-run: exit 2 naming it, nothing enqueued.
    let jobs_before = home.json(&["jobs", "list"]).as_array().unwrap().len();
    let out = home.run(&[
        "harvest", "rerun", "--repo", "acme/app", "--pr", "4", "--leg", "checkers",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("acme/app#4 has no dispatched `checkers` leg"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        home.json(&["jobs", "list"]).as_array().unwrap().len(),
        jobs_before
    );
}
