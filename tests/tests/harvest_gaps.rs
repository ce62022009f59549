//! Mode A rules the first harvest tests left open, through the built binary: the merge side of
//! the empty gate (S-19), what a harvest may write (S-14), a store failure during a harvest
//! (S-24), evidence tiers in the export (S-31), a review-quality kind with hard verifiers on
//! (S-41), and a crash in each leg (S-33) (seed: SkillOpt, "Automatic trace-harvested feedback
//! (Mode A, off by default)", "Cross-family review soft signal", "Deterministic hard-verifier
//! tier"; resolutions §8). S-32 is pinned by unit tests next to the prompts
//! (`harvest::review::tests::s32_*` in skillforge-skillopt).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};
use skillforge_contract::validate_training_package_json;
use skillforge_tests::{CODER_TEMPLATE, Home, add_template, two_commit_repo, write};

const RUN: &str = "auto-trace:coder@v1";

fn config(home: &Home, text: &str) {
    write(&home.path().join("config.toml"), text);
}

fn on(extra: &str) -> String {
    format!("[skillopt]\nauto_trace_enabled = true\n{extra}")
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
        "--resolved-commit",
        "c0ffee",
    ];
    if !extra.contains(&"--template") {
        args.extend_from_slice(&["--template", "coder@v1"]);
    }
    args.extend_from_slice(extra);
    home.json(&args);
}

fn outcome(home: &Home, pr: u32, extra: &[&str]) -> Value {
    let pr = pr.to_string();
    let mut args = vec!["harvest", "outcome", "--repo", "acme/app", "--pr", &pr];
    args.extend_from_slice(extra);
    home.json(&args)
}

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

fn events(home: &Home, pr: u32) -> Vec<String> {
    let pr = pr.to_string();
    let list = home.json(&["harvest", "events", "--repo", "acme/app", "--pr", &pr]);
    list.as_array()
        .unwrap()
        .iter()
        .map(|e| e["event"].as_str().unwrap().to_owned())
        .collect()
}

/// `sqlite3 <home>/skillforge.db SQL` (the domain store), stdout trimmed.
fn sql(home: &Home, statement: &str) -> String {
    let out = Command::new("sqlite3")
        .arg(home.path().join("skillforge.db"))
        .arg(statement)
        .output()
        .expect("sqlite3 is installed");
    assert!(
        out.status.success(),
        "sqlite3 {statement}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Row count of every table of the domain store.
fn table_counts(home: &Home) -> BTreeMap<String, i64> {
    let tables = sql(
        home,
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
    );
    tables
        .lines()
        .map(|t| {
            (
                t.to_owned(),
                sql(home, &format!("SELECT COUNT(*) FROM \"{t}\""))
                    .parse()
                    .unwrap(),
            )
        })
        .collect()
}

/// `skillforge --json harvest gate …` → (exit code, report).
fn gate(home: &Home, pr: u32, head: &str, extra: &[&str]) -> (i32, Value) {
    let pr = pr.to_string();
    let out: Output = home
        .cmd()
        .arg("--json")
        .args([
            "harvest", "gate", "--repo", "acme/app", "--pr", &pr, "--head", head,
        ])
        .args(extra)
        .output()
        .unwrap();
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "gate stdout is not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap(), report)
}

const T0: &str = "2030-01-01T00:00:00Z";
const T0_PLUS_30S: &str = "2030-01-01T00:00:30Z";
const T0_PLUS_60S: &str = "2030-01-01T00:01:00Z";

#[test]
fn s19_empty_gate_is_stamped_only_after_a_second_zero_observation_min_ci_wait_later() {
    let home = Home::embedded();
    add_template(&home, CODER_TEMPLATE, "acme/templates");
    config(
        &home,
        &format!("{}[merge_gate]\nmin_ci_wait = 60\n", on("")),
    );
    let repo = tempfile::tempdir().unwrap();
    write(
        &repo.path().join(".github/workflows/ci.yml"),
        "on: [pull_request]\n",
    );
    let repo_path = repo.path().to_str().unwrap();
    let observe = |at: &str| gate(&home, 5, "h5", &["--repo-path", repo_path, "--at", at]);

    // First zero-external observation: no stamp, exit 4 = wait until T0 + min_ci_wait.
    let (code, first) = observe(T0);
    assert_eq!(
        (
            code,
            first["decision"].as_str(),
            first["workflows"].as_str()
        ),
        (4, Some("wait"), Some("present")),
        "{first}"
    );
    assert_eq!(first["not_before"], "2030-01-01T00:01:00.000Z");
    // A second one before min_ci_wait: still no stamp; the same observation again is idempotent.
    for _ in 0..2 {
        let (code, second) = observe(T0_PLUS_30S);
        assert_eq!(
            (
                code,
                second["decision"].as_str(),
                second["stamped"].as_bool()
            ),
            (4, Some("wait"), Some(false)),
            "{second}"
        );
    }
    assert_eq!(
        sql(&home, "SELECT COUNT(*) FROM merge_gate_observations"),
        "2",
        "one row per (repo, pr, head, time)"
    );
    assert_eq!(
        sql(&home, "SELECT COUNT(*) FROM harvest_ci_observations"),
        "0",
        "no stamp yet"
    );
    // After min_ci_wait, still zero external: stamp.
    let (code, third) = observe(T0_PLUS_60S);
    assert_eq!(
        (code, third["decision"].as_str(), third["stamped"].as_bool()),
        (0, Some("stamp"), Some(true)),
        "{third}"
    );
    assert_eq!(third["first_zero_at"], "2030-01-01T00:00:00.000Z");
    assert_eq!(
        sql(
            &home,
            "SELECT context || '|' || state || '|' || description FROM harvest_ci_observations WHERE sha = 'h5'"
        ),
        "gitmoot/ci|success|no external CI"
    );

    // The stamp feeds outcome ingestion: a merge at the head is a confirmed empty gate (S-18).
    attribute(&home, 5, &[]);
    let merged = outcome(&home, 5, &["--outcome", "merged", "--head", "h5"]);
    assert_eq!(
        (
            merged["rows"][0]["choice"].as_str(),
            merged["rows"][0]["score"].is_null()
        ),
        (Some("a"), true),
        "{merged}"
    );
    let (_, package) = export(&home, RUN);
    let floor = feedback(&package, "acme/app#5", "gitmoot-auto");
    assert!(
        floor[0]["reasoning"]
            .as_str()
            .unwrap()
            .contains("confirmed empty gate"),
        "{floor:?}"
    );
    assert_eq!(item(&package, "acme/app#5")["metadata"]["has_score"], false);

    // External CI at the head (given, or recorded by a webhook): not an empty gate, exit 0.
    let (code, ext) = gate(
        &home,
        6,
        "h6",
        &[
            "--repo-path",
            repo_path,
            "--external-contexts",
            "1",
            "--at",
            T0,
        ],
    );
    assert_eq!(
        (code, ext["decision"].as_str()),
        (0, Some("external")),
        "{ext}"
    );

    // Awareness: no workflow file gets the same window (issue 34 item 3: CI outside GitHub
    // Actions posts statuses too); it was stamped 1 s after the first look.
    let bare = tempfile::tempdir().unwrap();
    let bare_path = bare.path().to_str().unwrap();
    let (code, a) = gate(&home, 7, "h7", &["--repo-path", bare_path, "--at", T0]);
    assert_eq!(
        (code, a["decision"].as_str(), a["workflows"].as_str()),
        (4, Some("wait"), Some("absent")),
        "{a}"
    );
    let (code, b) = gate(
        &home,
        7,
        "h7",
        &["--repo-path", bare_path, "--at", "2030-01-01T00:00:01Z"],
    );
    assert_eq!(
        (code, b["decision"].as_str(), b["not_before"].as_str()),
        (4, Some("wait"), Some("2030-01-01T00:01:00.000Z")),
        "{b}"
    );
    let (code, b) = gate(
        &home,
        7,
        "h7",
        &["--repo-path", bare_path, "--at", T0_PLUS_60S],
    );
    assert_eq!((code, b["decision"].as_str()), (0, Some("stamp")), "{b}");
    // No repository path: awareness unknown ⇒ treated as workflows present (the full wait).
    gate(&home, 8, "h8", &["--at", T0]);
    let (code, c) = gate(&home, 8, "h8", &["--at", T0_PLUS_30S]);
    assert_eq!(
        (code, c["decision"].as_str(), c["workflows"].as_str()),
        (4, Some("wait"), Some("unknown")),
        "{c}"
    );

    // require_external_ci = true: an empty gate is refused (exit 1), never stamped.
    config(
        &home,
        "[merge_gate]\nmin_ci_wait = 60\nrequire_external_ci = true\n",
    );
    for at in [T0, T0_PLUS_60S, "2030-01-01T01:00:00Z"] {
        let (code, blocked) = gate(&home, 9, "h9", &["--repo-path", repo_path, "--at", at]);
        assert_eq!(
            (
                code,
                blocked["decision"].as_str(),
                blocked["stamped"].as_bool()
            ),
            (1, Some("blocked"), Some(false)),
            "{blocked}"
        );
    }
    assert_eq!(
        sql(
            &home,
            "SELECT COUNT(*) FROM harvest_ci_observations WHERE sha = 'h9'"
        ),
        "0"
    );
    // Human output and a bad --at.
    let out = home.run(&[
        "harvest",
        "gate",
        "--repo",
        "acme/app",
        "--pr",
        "9",
        "--head",
        "h9",
        "--at",
        "yesterday",
    ]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A candidate package for `coder` whose body differs from v1.
fn candidate(home: &Home) -> Value {
    let content = CODER_TEMPLATE.replace("Do it.\n", "Do it, with tests.\n");
    let package = json!({
        "kind": "gitmoot-skillopt-candidate-package",
        "contract_version": 1,
        "template_id": "coder",
        "candidate": {"content": content, "metadata": {
            "id": "coder", "name": "Coder", "description": "Implements changes", "kind": "agent-template", "version": 1,
            "capabilities": ["implement"], "runtime_compatibility": ["codex", "claude"], "tags": ["code"],
            "inputs": ["task"], "outputs": ["diff"]}},
        "eval_report": {"promotable": true, "baseline_score": 0.5},
        "summary": {"score": 0.8, "preference_summary": "candidate preferred 3/4"},
    });
    let file = write(&home.path().join("in/candidate.json"), &package.to_string());
    home.json(&["import", "--file", file.to_str().unwrap()])
}

#[test]
fn s14_harvesting_a_strong_positive_for_a_pending_candidate_writes_only_the_three_feedback_tables()
{
    let (repo, _base, head) = two_commit_repo();
    let home = Home::embedded();
    add_template(&home, CODER_TEMPLATE, "acme/templates");
    let imported = candidate(&home);
    assert_eq!(
        (imported["version_id"].as_str(), imported["state"].as_str()),
        (Some("coder@v2"), Some("pending")),
        "{imported}"
    );
    config(
        &home,
        &on("hard_verifiers_enabled = true\nhard_verifier_commands = [\"test -f src/lib.rs\"]\n"),
    );
    attribute(
        &home,
        3,
        &[
            "--template",
            "coder@v2",
            "--checkout",
            repo.path().to_str().unwrap(),
        ],
    );
    let template_before = home.json(&["template", "show", "coder"]);
    let candidates_before = home.json(&["candidate", "list", "--template", "coder"]);
    let before = table_counts(&home);

    // Merged with passing external CI and a passing hard verifier: the strongest positive.
    let report = outcome(
        &home,
        3,
        &[
            "--outcome",
            "merged",
            "--ci",
            "external",
            "--head",
            &head,
            "--wait",
        ],
    );
    assert_eq!(report["rows"][0]["score"], 1.0, "{report}");
    let (_, package) = export(&home, "auto-trace:coder@v2");
    assert_eq!(
        feedback(&package, "hard#acme/app#3", "gitmoot-verifier")[0]["choice"],
        "a"
    );

    let after = table_counts(&home);
    let changed: Vec<&String> = after
        .keys()
        .filter(|t| before.get(*t) != after.get(*t))
        .collect();
    // The harvester's own bookkeeping (attributions, leg dispatches, events, CI observations, the
    // merge gate), the engine's exactly-once ingestion record and the `/metrics` counters the
    // store's triggers keep are not template state.
    let bookkeeping = |t: &str| {
        t.starts_with("harvest_")
            || t.starts_with("merge_gate_")
            || t == "applied_results"
            || t == "metric_counters"
    };
    let feedback_tables: Vec<&String> = changed
        .iter()
        .copied()
        .filter(|t| !bookkeeping(t))
        .collect();
    assert_eq!(
        feedback_tables,
        ["eval_review_items", "eval_runs", "feedback_events"],
        "S-14: changed tables {changed:?}"
    );
    assert_eq!(
        home.json(&["template", "show", "coder"]),
        template_before,
        "current version unchanged"
    );
    assert_eq!(
        home.json(&["template", "show", "coder"])["version_id"],
        "coder@v1"
    );
    assert_eq!(
        home.json(&["candidate", "list", "--template", "coder"]),
        candidates_before,
        "candidate still pending"
    );
}

#[test]
fn s24_a_store_failure_during_a_harvest_is_recorded_and_reported_without_failing_the_caller() {
    let home = Home::embedded();
    add_template(&home, CODER_TEMPLATE, "acme/templates");
    config(&home, &on(""));
    attribute(&home, 4, &[]);
    sql(
        &home,
        "CREATE TRIGGER s24_reject BEFORE INSERT ON feedback_events BEGIN SELECT RAISE(ABORT, 's24 injected store failure'); END;",
    );

    // The seed: a harvest error never blocks or fails a job; it is swallowed and recorded.
    let report = outcome(&home, 4, &["--outcome", "merged", "--ci", "external"]);
    assert_eq!(
        (report["harvested"].as_bool(), report["failed"].as_bool()),
        (Some(false), Some(true)),
        "{report}"
    );
    assert_eq!(report["event"], "auto_trace_harvest_failed");
    assert!(
        report["error"]
            .as_str()
            .unwrap()
            .contains("s24 injected store failure"),
        "{report}"
    );
    assert_eq!(events(&home, 4), ["auto_trace_harvest_failed"]);
    // Rolled back: no half-written run or item.
    let counts = table_counts(&home);
    assert_eq!(
        (
            counts["eval_runs"],
            counts["eval_review_items"],
            counts["feedback_events"]
        ),
        (0, 0, 0)
    );
    // An operator who wants to alert on it: --strict exits 3 (environment), still recorded.
    let out = home.run(&[
        "harvest",
        "outcome",
        "--repo",
        "acme/app",
        "--pr",
        "4",
        "--outcome",
        "merged",
        "--ci",
        "external",
        "--strict",
    ]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("auto_trace_harvest_failed"));
    assert_eq!(events(&home, 4).len(), 2);
    // Once the store accepts writes again the same outcome harvests normally.
    sql(&home, "DROP TRIGGER s24_reject;");
    assert_eq!(
        outcome(&home, 4, &["--outcome", "merged", "--ci", "external"])["rows"][0]["choice"],
        "a"
    );
}

fn fake_claude(dir: &Path, script_body: &str) -> PathBuf {
    let bin = dir.join("fakebin");
    std::fs::create_dir_all(&bin).unwrap();
    let path = write(
        &bin.join("claude"),
        &format!("#!/bin/sh\ncat >/dev/null\n{script_body}\n"),
    );
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    bin
}

fn rubric_reply(rubric: &str) -> String {
    let result = json!({"type": "result", "subtype": "success", "result": rubric}).to_string();
    format!("printf '%s\\n' '{}'", result.replace('\'', "'\\''"))
}

fn path_with(bin: &Path) -> String {
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// `harvest outcome … --wait` with `bin` first on PATH (the in-process worker runs the legs).
fn outcome_with_path(home: &Home, bin: &Path, pr: u32, head: &str) -> Value {
    let pr = pr.to_string();
    let out = home
        .cmd()
        .env("PATH", path_with(bin))
        .arg("--json")
        .args([
            "harvest",
            "outcome",
            "--repo",
            "acme/app",
            "--pr",
            &pr,
            "--outcome",
            "merged",
            "--ci",
            "external",
            "--head",
            head,
            "--wait",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn s31_exported_tags_order_human_floor_checker_cross_family_same_family() {
    let (repo, base, head) = two_commit_repo();
    let home = Home::embedded();
    add_template(&home, CODER_TEMPLATE, "acme/templates");
    let checkout = repo.path().to_str().unwrap();
    let rubric = r#"{"coverage":0.9,"containment":0.8,"fidelity":0.9}"#;
    let bin = fake_claude(home.path(), &rubric_reply(rubric));
    // PR 1: implementer codex, reviewer claude (cross-family); PR 2: implementer claude (same family).
    config(
        &home,
        &on(
            "hard_verifiers_enabled = true\nhard_verifier_commands = [\"test -f src/lib.rs\"]\n\
        deterministic_checkers_enabled = true\ncross_family_review_enabled = true\nreview_runtimes = [\"claude\"]\n",
        ),
    );
    attribute(
        &home,
        1,
        &[
            "--checkout",
            checkout,
            "--base",
            &base,
            "--runtime",
            "codex",
        ],
    );
    attribute(
        &home,
        2,
        &[
            "--checkout",
            checkout,
            "--base",
            &base,
            "--runtime",
            "claude",
        ],
    );
    outcome_with_path(&home, &bin, 1, &head);
    outcome_with_path(&home, &bin, 2, &head);
    // A person reviews the PR's change in the same run, through the real blind packet: the item
    // is added with the change's before/after text (harvested items carry none), the packet is
    // exported and filled, and the import writes the row.
    let before = write(
        &home.path().join("in/before.md"),
        "README before the change\n",
    );
    let after = write(
        &home.path().join("in/after.md"),
        "README after the change\n",
    );
    home.json(&[
        "review",
        "item",
        "add",
        "--run",
        RUN,
        "--item",
        "human-acme-app-1",
        "--title",
        "acme/app#1 by hand",
        "--baseline",
        before.to_str().unwrap(),
        "--candidate",
        after.to_str().unwrap(),
    ]);
    let packet = home.path().join("human-packet");
    home.json(&[
        "feedback",
        "markdown",
        "export",
        "--run",
        RUN,
        "--output",
        packet.to_str().unwrap(),
    ]);
    let assignments = std::fs::read_to_string(packet.join(".assignments.json")).unwrap();
    assert!(
        assignments.contains("human-acme-app-1") && !assignments.contains("hard#"),
        "only the reviewable item: {assignments}"
    );
    write(
        &packet.join("feedback.yml"),
        &format!(
            "run_id: \"{RUN}\"\nreviewer: carol\nitems:\n  - item_id: human-acme-app-1\n    choice: a\n    reasoning: Reviewed by hand.\n"
        ),
    );
    let imported = home.json(&[
        "feedback",
        "markdown",
        "import",
        "--packet",
        packet.to_str().unwrap(),
    ]);
    assert_eq!(imported["feedback_events"]["inserted"], 1, "{imported:#}");
    let (bytes, package) = export(&home, RUN);
    validate_training_package_json(&bytes).expect("valid training package");

    // The reference consumer rule (harvest::tier::tier_of_row): a human source is human gold;
    // otherwise the row's item carries evidence_tier / evidence_rank.
    let human_sources = [
        "markdown",
        "github",
        "pairwise-review",
        "pairwise",
        "skillopt-ab",
        "human",
        "manual",
    ];
    let tier_of = |event: &Value| -> (i64, String) {
        if human_sources.contains(&event["source"].as_str().unwrap()) {
            return (1, "human_gold".into());
        }
        let meta = &item(&package, event["item_id"].as_str().unwrap())["metadata"];
        (
            meta["evidence_rank"].as_i64().unwrap(),
            meta["evidence_tier"].as_str().unwrap().to_owned(),
        )
    };
    let rank = |item_id: &str, reviewer: &str| {
        let rows = feedback(&package, item_id, reviewer);
        assert_eq!(rows.len(), 1, "{item_id}/{reviewer} in {package:#}");
        tier_of(rows[0])
    };
    let human = feedback(&package, "human-acme-app-1", "carol");
    assert_eq!(human.len(), 1, "{package:#}");
    assert_eq!(
        human[0]["source"], "markdown",
        "the importer wrote it: {}",
        human[0]
    );
    assert_eq!(
        human[0]["source_url"].as_str(),
        std::fs::canonicalize(&packet).unwrap().to_str(),
        "{}",
        human[0]
    );
    let ordered = [
        rank("human-acme-app-1", "carol"),
        rank("acme/app#1", "gitmoot-auto"),
        rank("hard#acme/app#1", "gitmoot-verifier"),
        rank("checker#acme/app#1", "gitmoot-checker"),
        rank("review#acme/app#1", "gitmoot-review"),
        rank("review#acme/app#2", "gitmoot-review"),
    ];
    let names: Vec<&str> = ordered.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "human_gold",
            "verifiable_floor",
            "verifiable_floor",
            "objective_checker",
            "cross_family_judge",
            "same_family_judge"
        ]
    );
    let ranks: Vec<i64> = ordered.iter().map(|(r, _)| *r).collect();
    assert!(
        ranks.windows(2).all(|w| w[0] <= w[1])
            && ranks[0] < ranks[1]
            && ranks[2] < ranks[3]
            && ranks[3] < ranks[4]
            && ranks[4] < ranks[5],
        "{ranks:?}"
    );
    // No judge row carries a human or floor tag; the checker is tagged apart from the judges.
    for event in package["feedback_events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["reviewer"] == "gitmoot-review")
    {
        let (_, tier) = tier_of(event);
        assert!(tier.ends_with("_judge"), "judge row tagged {tier}");
        let meta = &item(&package, event["item_id"].as_str().unwrap())["metadata"];
        assert_eq!(meta["judge_derived"], true);
    }
    assert_eq!(
        item(&package, "review#acme/app#2")["metadata"]["self_family"],
        true
    );
}

#[test]
fn s41_review_quality_kind_with_hard_verifiers_on_gets_no_hard_row() {
    let (repo, base, head) = two_commit_repo();
    let home = Home::embedded();
    add_template(&home, CODER_TEMPLATE, "acme/templates");
    let bin = fake_claude(
        home.path(),
        &rubric_reply(r#"{"coverage":0.7,"readability":0.9}"#),
    );
    let checkout = repo.path().to_str().unwrap();
    config(
        &home,
        &on(
            "hard_verifiers_enabled = true\nhard_verifier_commands = [\"test -f src/lib.rs\"]\n\
        deterministic_checkers_enabled = true\ncross_family_review_enabled = true\nreview_runtimes = [\"claude\"]\n",
        ),
    );
    attribute(
        &home,
        1,
        &[
            "--kind",
            "review-quality",
            "--checkout",
            checkout,
            "--base",
            &base,
            "--runtime",
            "codex",
        ],
    );
    attribute(
        &home,
        2,
        &[
            "--checkout",
            checkout,
            "--base",
            &base,
            "--runtime",
            "codex",
        ],
    );
    let report = outcome_with_path(&home, &bin, 1, &head);
    assert_eq!(
        report["legs"].as_array().unwrap().len(),
        1,
        "only the review leg: {report}"
    );
    assert!(
        report["skipped"].to_string().contains("review-quality"),
        "{report}"
    );
    outcome_with_path(&home, &bin, 2, &head);
    let (_, package) = export(&home, RUN);
    assert!(
        feedback(&package, "hard#acme/app#1", "gitmoot-verifier").is_empty(),
        "S-41: no hard row for a review-quality kind"
    );
    assert!(feedback(&package, "checker#acme/app#1", "gitmoot-checker").is_empty());
    assert_eq!(
        feedback(&package, "review#acme/app#1", "gitmoot-review").len(),
        1,
        "the soft cross-family signal stays"
    );
    assert_eq!(feedback(&package, "acme/app#1", "gitmoot-auto").len(), 1);
    // The same switches on a testable implement job do give a hard row (the check can fail).
    assert_eq!(
        feedback(&package, "hard#acme/app#2", "gitmoot-verifier").len(),
        1
    );
}

#[test]
fn s33_a_crash_in_each_leg_records_exactly_its_event_and_the_harvest_succeeds() {
    let (repo, base, head) = two_commit_repo();
    let home = Home::embedded();
    add_template(&home, CODER_TEMPLATE, "acme/templates");
    let missing = home.path().join("no-such-checkout");
    let missing = missing.to_str().unwrap();
    // Hard verifier and checkers: the checkout the workers should run in is gone (the runner
    // cannot even start: a crash, not a verdict). Review: the reviewer's runtime exits 1.
    // Attributions are recorded only while harvesting is on (issue 37 item 5).
    config(&home, &on(""));
    attribute(&home, 1, &["--checkout", missing, "--base", &base]);
    attribute(&home, 2, &["--checkout", missing, "--base", &base]);
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
        ],
    );
    let bin = fake_claude(home.path(), "echo 'reviewer crashed' >&2\nexit 1");
    let legs = [
        (
            1,
            "hard_verifiers_enabled = true\nhard_verifier_commands = [\"true\"]\n",
            "hard_verifiers_failed",
            "hard#acme/app#1",
        ),
        (
            2,
            "deterministic_checkers_enabled = true\n",
            "deterministic_checkers_failed",
            "checker#acme/app#2",
        ),
        (
            3,
            "cross_family_review_enabled = true\nreview_runtimes = [\"claude\"]\n",
            "cross_family_review_failed",
            "review#acme/app#3",
        ),
    ];
    for (pr, switches, event, leg_item) in legs {
        config(&home, &on(switches));
        let report = outcome_with_path(&home, &bin, pr, &head);
        assert_eq!(report["legs"].as_array().unwrap().len(), 1, "{report}");
        assert_eq!(
            report["rows"][0]["choice"], "a",
            "the merge's floor row is written: {report}"
        );
        let seen = events(&home, pr);
        assert_eq!(seen, [event], "exactly the named event for PR {pr}");
        let (_, package) = export(&home, RUN);
        assert!(
            package["items"]
                .as_array()
                .unwrap()
                .iter()
                .all(|i| i["id"] != leg_item),
            "no {leg_item} row"
        );
        assert_eq!(
            feedback(&package, &format!("acme/app#{pr}"), "gitmoot-auto").len(),
            1
        );
    }
    assert_eq!(
        home.json(&["harvest", "status"])["feedback_events"],
        3,
        "three floor rows, no leg row"
    );
}

/// The auto-trace export goes through `skillforge optimizer distill` with the harvester as its
/// producer (no hand-built rows): a merge whose hard verifier fails and whose cross-family review
/// scores low gives a candidate whose guidance cites verifiable and judge evidence, from
/// `feedback_events` only (the harvester writes no ranked event).
#[test]
fn the_harvesters_auto_trace_export_distills_into_a_candidate() {
    let (repo, base, head) = two_commit_repo();
    let home = Home::embedded();
    add_template(&home, CODER_TEMPLATE, "acme/templates");
    let rubric = r#"{"coverage":0.2,"containment":0.3,"fidelity":0.2,"notes":"Explain why each new function exists."}"#;
    let bin = fake_claude(home.path(), &rubric_reply(rubric));
    config(
        &home,
        &on(
            "hard_verifiers_enabled = true\nhard_verifier_commands = [\"test -f src/missing.rs\"]\n\
        deterministic_checkers_enabled = true\ncross_family_review_enabled = true\nreview_runtimes = [\"claude\"]\n",
        ),
    );
    attribute(
        &home,
        1,
        &[
            "--checkout",
            repo.path().to_str().unwrap(),
            "--base",
            &base,
            "--runtime",
            "codex",
        ],
    );
    outcome_with_path(&home, &bin, 1, &head);
    let (_, package) = export(&home, RUN);
    assert!(
        package.get("ranked_feedback_events").is_none(),
        "the harvester writes A/B rows only: {package:#}"
    );
    assert_eq!(
        feedback(&package, "hard#acme/app#1", "gitmoot-verifier")[0]["choice"],
        "b",
        "{package:#}"
    );
    assert_eq!(
        feedback(&package, "review#acme/app#1", "gitmoot-review")[0]["choice"],
        "b",
        "{package:#}"
    );

    let training = home.path().join("out/auto-trace_coder_v1.json");
    let out_root = home.path().join("distill-out");
    let candidate_file = home.path().join("candidate.json");
    let out = home
        .cmd()
        .arg("--json")
        .args([
            "optimizer",
            "distill",
            "--training-package",
            training.to_str().unwrap(),
        ])
        .args([
            "--artifact-root",
            home.path().join("blobs").to_str().unwrap(),
            "--out-root",
            out_root.to_str().unwrap(),
        ])
        .args(["--candidate-output", candidate_file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["promotable"], true, "{report:#}");
    let candidate: Value =
        serde_json::from_str(&std::fs::read_to_string(&candidate_file).unwrap()).unwrap();
    let by_tier = &candidate["summary"]["metadata"]["evidence"]["by_tier"];
    assert!(
        by_tier["verifiable_floor"].as_u64() >= Some(1) && by_tier["judge"].as_u64() >= Some(1),
        "{by_tier}"
    );
    assert_eq!(by_tier["human_gold"], 0, "{by_tier}");
    let content = candidate["candidate"]["content"].as_str().unwrap();
    assert!(
        content.contains("Explain why each new function exists.") && content.contains("judge 1"),
        "the review leg's notes: {content}"
    );
    assert!(
        content
            .lines()
            .any(|l| l.starts_with("- ") && l.contains("verifiable")),
        "a hard-verifier line: {content}"
    );
    // The candidate imports against the harvested version.
    let imported = home.json(&[
        "import",
        "--file",
        candidate_file.to_str().unwrap(),
        "--artifact-dir",
        out_root.join("artifacts").to_str().unwrap(),
    ]);
    assert_eq!(imported["base_version_id"], "coder@v1", "{imported:#}");
}
