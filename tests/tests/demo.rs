//! `skillforge demo` end to end through the built binary (issue 5 item 8, issue 6 item 6): on a
//! real git repository with code changes and a merge, one run ends with a pending candidate, a
//! readable summary and a valid auto-trace export holding hard-verifier and checker rows on the
//! merge; a second run in the same home works and makes a second session; `--repo` on a
//! directory that is not a repository is refused with exit 2 naming it; the demo's candidate is
//! decided with evidence end to end (issue 15).

use std::path::{Path, PathBuf};

use serde_json::Value;
use skillforge_contract::validate_training_package_json;
use skillforge_tests::{Home, git, ok, write};
use tempfile::TempDir;

const TEMPLATE_ID: &str = "change-summarizer";

fn commit(dir: &Path, message: &str) -> String {
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", message]);
    git(dir, &["rev-parse", "HEAD"])
}

/// A repository with real code changes on `main`, a feature branch merged with `--no-ff`, and
/// one more commit after the merge. Returns (dir, merge SHA, the last three non-merge SHAs, newest first).
fn repo_with_a_merge() -> (TempDir, String, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    git(p, &["init", "-q", "-b", "main"]);
    write(
        &p.join("Cargo.toml"),
        "[package]\nname = \"calc\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    );
    write(
        &p.join("src/lib.rs"),
        "pub fn add(a: i64, b: i64) -> i64 {\n    a + b\n}\n",
    );
    commit(p, "calc: add the add function");
    write(
        &p.join("src/lib.rs"),
        "pub fn add(a: i64, b: i64) -> i64 {\n    a + b\n}\n\npub fn sub(a: i64, b: i64) -> i64 {\n    a - b\n}\n",
    );
    let c2 = commit(p, "calc: subtract");
    git(p, &["checkout", "-q", "-b", "feature/parse"]);
    write(
        &p.join("src/parse.rs"),
        "pub fn parse_number(text: &str) -> Option<i64> {\n    text.trim().parse().ok()\n}\n",
    );
    write(
        &p.join("src/lib.rs"),
        "pub mod parse;\n\npub fn add(a: i64, b: i64) -> i64 {\n    a + b\n}\n\npub fn sub(a: i64, b: i64) -> i64 {\n    a - b\n}\n",
    );
    let c3 = commit(p, "parse: read numbers from text");
    git(p, &["checkout", "-q", "main"]);
    git(
        p,
        &[
            "-c",
            "user.name=skillforge tests",
            "-c",
            "user.email=tests@skillforge.invalid",
            "merge",
            "-q",
            "--no-ff",
            "-m",
            "Merge branch 'feature/parse'",
            "feature/parse",
        ],
    );
    let merge = git(p, &["rev-parse", "HEAD"]);
    write(
        &p.join("README.md"),
        "# calc\n\nAdds, subtracts and parses numbers.\n",
    );
    let c4 = commit(p, "docs: README");
    (dir, merge, vec![c4, c3, c2])
}

fn run(home: &Home, args: &[&str]) -> (i32, String, String) {
    let out = home.run(args);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The value after `label` on a summary line `label   value`.
fn summary_path(stdout: &str, label: &str) -> PathBuf {
    let line = stdout
        .lines()
        .find(|l| l.starts_with(label))
        .unwrap_or_else(|| panic!("no `{label}` line in:\n{stdout}"));
    PathBuf::from(line[label.len()..].trim())
}

fn rows<'a>(package: &'a Value, reviewer: &str) -> Vec<&'a Value> {
    package["feedback_events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["reviewer"] == reviewer)
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

fn candidates(home: &Home) -> Vec<Value> {
    home.json(&["candidate", "list", "--template", TEMPLATE_ID])
        .as_array()
        .cloned()
        .unwrap()
}

#[test]
fn demo_on_a_real_repository_ends_with_a_pending_candidate_and_an_auto_trace_export() {
    let (repo, merge, non_merges) = repo_with_a_merge();
    let repo_path = repo.path().to_str().unwrap();
    let home = Home::embedded();
    let (code, stdout, stderr) = run(&home, &["demo", "--repo", repo_path]);
    assert_eq!(
        code,
        0,
        "stdout:\n{stdout}\nstderr:\n{stderr}\n{}",
        home.logs()
    );

    // A readable summary: every step, the candidate, where things are, what to run next.
    for n in 1..=7 {
        assert!(
            stdout.contains(&format!("[{n}/7]")),
            "step {n} missing:\n{stdout}"
        );
    }
    assert!(
        stdout.contains("pending candidate: change-summarizer@v2"),
        "{stdout}"
    );
    assert!(
        stdout.contains("stand-in reviewer, `demo-stand-in`: a fixed rule, not a person"),
        "the stand-in reviewer is named as such: {stdout}"
    );
    assert!(
        stdout.contains("1 recent merge attributed"),
        "the history has a merge:\n{stdout}"
    );
    // The harvest's wait for its legs is said before it starts, after step 6 (a new user sat
    // through seconds of silence there).
    let waiting = stdout.find("waiting for 2 leg jobs").expect(&stdout);
    assert!(
        stdout.find("[6/7]").is_some_and(|six| six < waiting)
            && stdout
                .find("1 recent merge attributed")
                .is_some_and(|done| waiting < done),
        "{stdout}"
    );
    let home_dir = home.path().display().to_string();
    assert!(
        stdout.contains(&format!(
            "skillforge --home {home_dir} candidate promote change-summarizer@v2"
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!(
            "skillforge --home {home_dir} train status --session demo-"
        )),
        "{stdout}"
    );

    // The pending candidate.
    let listed = candidates(&home);
    assert_eq!(listed.len(), 1, "{listed:#?}");
    assert_eq!(
        (
            listed[0]["version_id"].as_str(),
            listed[0]["state"].as_str()
        ),
        (Some("change-summarizer@v2"), Some("pending"))
    );

    // Review items are the last three non-merge commits with their real diffs.
    let items_file = summary_path(&stdout, "items");
    assert!(
        items_file.starts_with(home.path().join("demo")),
        "{}",
        items_file.display()
    );
    let items = std::fs::read_to_string(&items_file).unwrap();
    for sha in &non_merges {
        assert!(
            items.contains(&format!("c-{}", &sha[..12])),
            "{sha} missing from {items}"
        );
    }
    assert!(
        items.contains("+pub fn parse_number(text: &str) -> Option<i64> {"),
        "the real diff: {items}"
    );
    let training: Value = serde_json::from_str(
        &std::fs::read_to_string(summary_path(&stdout, "training package")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        training["ranked_feedback_events"].as_array().unwrap().len(),
        3,
        "{training:#}"
    );

    // The deterministic reviewer filled the blind packet.
    let feedback =
        std::fs::read_to_string(summary_path(&stdout, "review packet").join("feedback.yml"))
            .unwrap();
    assert!(
        feedback.contains("reviewer: demo-stand-in") && feedback.contains("ranking:"),
        "{feedback}"
    );
    // Issue 35 item 10: the options are summaries of each commit's diff (its subject, the files
    // it touches with their line counts), not placeholders quoting diff lines; a trait says
    // something about an option, never that "the demo rule" ranked it.
    let packet_items = summary_path(&stdout, "review packet").join("items");
    let mut parse_item = String::new();
    for entry in std::fs::read_dir(&packet_items).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        let options = &text[text.find("## Option A").expect("options")..];
        assert!(
            !options.contains("starting from") && !options.contains("Option a ("),
            "no placeholder options: {options}"
        );
        if text.contains("parse: read numbers from text") {
            parse_item = options.to_owned();
        }
    }
    assert!(
        parse_item.contains("Parse: read numbers from text")
            && parse_item.contains("src/parse.rs (3 lines)"),
        "the parse commit's options summarise its diff: {parse_item}"
    );
    assert!(
        !feedback.contains("demo rule\n") && !feedback.contains("by the demo rule"),
        "{feedback}"
    );
    assert!(summary_path(&stdout, "candidate package").is_file());
    // The stand-in is labelled as one where the candidate is shown.
    let shown = ok(&home, &["candidate", "show", "change-summarizer@v2"]);
    assert!(
        shown.contains("reviewers   demo-stand-in, 3 ranked rows (the demo's stand-in reviewer: a fixed rule, not a person"),
        "{shown}"
    );
    assert!(
        !shown.contains("demo rule"),
        "nothing learned names the rule: {shown}"
    );
    // The evidence is in words: why there is no score (the package's own reason), and what the
    // report's terms mean.
    let unavailable = shown
        .lines()
        .find(|l| l.starts_with("score       "))
        .expect(&shown);
    assert!(
        unavailable.starts_with("score       none (") && unavailable.contains("held-out replay"),
        "{shown}"
    );
    assert!(
        shown.contains("(evidence by source: human gold = a person's review")
            && shown.contains("(held out replay: each ranking left out in turn"),
        "{shown}"
    );
    let shown = home.json(&["candidate", "show", "change-summarizer@v2"]);
    assert_eq!(
        shown["reviewers"],
        serde_json::json!([{"reviewer": "demo-stand-in", "rows": 3, "stand_in": true}]),
        "{shown:#}"
    );
    let review = std::fs::read_to_string(summary_path(&stdout, "candidate review")).unwrap();
    assert!(review.contains("change-summarizer@v2"), "{review}");

    // The auto-trace export: a valid package with the merge's floor, hard-verifier and checker rows.
    let export = summary_path(&stdout, "auto-trace export");
    let bytes = std::fs::read_to_string(&export).unwrap();
    validate_training_package_json(&bytes)
        .expect("the auto-trace export is a valid training package");
    let package: Value = serde_json::from_str(&bytes).unwrap();
    assert_eq!(
        package["feedback_context"]["feedback_source"],
        "automatic_trace"
    );
    assert_eq!(package["eval_run"]["id"], "auto-trace:change-summarizer@v1");
    let hard = rows(&package, "gitmoot-verifier");
    let checker = rows(&package, "gitmoot-checker");
    let floor = rows(&package, "gitmoot-auto");
    assert_eq!(
        (floor.len(), hard.len(), checker.len()),
        (1, 1, 1),
        "{package:#}"
    );
    let hard_item = item(&package, hard[0]["item_id"].as_str().unwrap());
    assert_eq!(
        hard[0]["choice"], "a",
        "the cheap verifier passes on the merge: {hard_item:#}"
    );
    assert_eq!(hard_item["metadata"]["hard_passed"], true);
    let checker_item = item(&package, checker[0]["item_id"].as_str().unwrap());
    assert!(
        checker_item["metadata"]["dimension_scores"]["diff_size"].is_number(),
        "{checker_item:#}"
    );
    let text = bytes.to_string();
    assert!(
        text.contains(&merge) || text.contains(&merge[..12]),
        "rows are about the merge {merge}: {text}"
    );

    // A second run in the same home: a second session, a second candidate, the harvest unchanged.
    let second = home.json(&["demo", "--repo", repo_path]);
    let first_session = summary_path(&stdout, "session").display().to_string();
    let second_session = second["session_id"].as_str().unwrap();
    assert!(
        !first_session.starts_with(second_session),
        "{first_session} vs {second_session}"
    );
    assert_eq!(second["state"], "candidate_review_published", "{second:#}");
    assert_eq!(second["harvest"]["source"], "merges");
    assert_eq!(second["harvest"]["changes"][0]["sha"], merge.as_str());
    assert_eq!(
        (
            second["harvest"]["floor_rows"].as_u64(),
            second["harvest"]["hard_verifier_rows"].as_u64(),
            second["harvest"]["checker_rows"].as_u64()
        ),
        (Some(1), Some(1), Some(1)),
        "re-harvesting rewrites rows in place: {second:#}"
    );
    // The first run's candidate, still pending, is rejected as replaced: one pending at a time.
    let listed = candidates(&home);
    let states: Vec<_> = listed
        .iter()
        .map(|c| {
            (
                c["version_id"].as_str().unwrap(),
                c["state"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        states,
        [
            ("change-summarizer@v3", "pending"),
            ("change-summarizer@v2", "rejected")
        ],
        "{listed:#?}"
    );
    assert_eq!(
        home.json(&["candidate", "list", "--pending"])
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let text = run(&home, &["demo", "--repo", repo_path]).1;
    assert!(
        text.contains("change-summarizer@v3, an earlier demo's candidate still pending, rejected"),
        "{text}"
    );
    let status = home.json(&["train", "status", "--session", second_session]);
    assert_eq!(
        status["current_phase"], "candidate_review_published",
        "{status:#}"
    );
    let sessions = std::fs::read_dir(home.path().join("demo")).unwrap().count();
    assert_eq!(sessions, 3, "each run writes under <home>/demo/<session>/");
}

#[test]
fn demo_refuses_a_directory_that_is_not_a_git_repository() {
    let home = Home::embedded();
    let plain = tempfile::tempdir().unwrap();
    let missing = plain.path().join("nowhere");
    for path in [plain.path().to_path_buf(), missing] {
        let shown = path.display().to_string();
        let (code, stdout, stderr) = run(&home, &["demo", "--repo", &shown]);
        assert_eq!(code, 2, "stdout:\n{stdout}\nstderr:\n{stderr}");
        assert!(
            stderr.contains(&format!("`{shown}` is not a git repository")),
            "{stderr}"
        );
    }
    assert!(
        !home.path().join("demo").exists(),
        "nothing was written for a refused repository"
    );
}

const SET: &str = "version: 1\ndimensions:\n  - name: clarity\n    questions:\n      - id: says_what\n        text: Does it say what the change does?\n        contains: scripted\n      - id: no_todo\n        text: Is it free of TODOs?\n        not_contains: TODO\n";

// Issue 15 "Done when": the demo's candidate asked, A/B'd with a pick and a judge, BINEVAL'd and
// turned into lessons, auto-promoted to a canary under configured guardrails (the reference
// optimizer's held-out replay may or may not score it, as its options summarise real diffs; the
// score floor is 0, so the guardrails decide on the bandit's confidence from the A/B picks:
// facts §7 steps 5–10, S-63), then graduated from harvested outcomes, all from the CLI,
// the events in a JSONL file and a Redis stream (S-52, S-57, S-60, S-61, S-63, S-65, S-79).
#[test]
fn the_demos_candidate_is_decided_with_evidence_end_to_end() {
    use skillforge_tests::decide::{config, events, harvest_outcome, sql};
    let redis = skillforge_tests::RedisServer::start();
    let (repo, _, _) = repo_with_a_merge();
    let home = Home::embedded();
    config(
        &home,
        &format!(
            "[skillopt]\nauto_trace_enabled = true\nauto_promote = true\nauto_promote_min_samples = 3\nauto_promote_min_score = 0.0\n\
             auto_promote_min_confidence = 0.8\nauto_promote_canary = true\nauto_promote_canary_sample = 0.5\n\
             review_runtimes = [\"scripted-b\"]\n\
             [events]\njsonl = \"events.jsonl\"\nredis_url = \"{}\"\nredis_stream = \"sf:events\"\n",
            redis.url()
        ),
    );
    let (code, stdout, stderr) = run(&home, &["demo", "--repo", repo.path().to_str().unwrap()]);
    assert_eq!(
        code,
        0,
        "stdout:\n{stdout}\nstderr:\n{stderr}\n{}",
        home.logs()
    );
    let candidate = format!("{TEMPLATE_ID}@v2");
    let state = |v: &str| {
        sql(
            &home,
            &format!("SELECT state FROM agent_template_versions WHERE id = '{v}'"),
        )
    };
    assert_eq!(state(&candidate), "pending");
    // The demo's train import went through the notify seam (zero auto-trace samples: notify only).
    assert_eq!(
        events(&home)
            .iter()
            .map(|e| e["event"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["candidate.awaiting_promotion"]
    );
    // Asked, then A/B'd with a human pick and a cross-family judge.
    assert_eq!(
        home.json(&["ask", TEMPLATE_ID, "Summarize the last change"])["version"],
        format!("{TEMPLATE_ID}@v1")
    );
    let prompt = "Summarize the parse change\nscripted%b: judge-reply {\"pick\":\"a\"}\n";
    let ab = home.json(&[
        "ab",
        TEMPLATE_ID,
        prompt,
        "--pick",
        "a",
        "--judge",
        "--seed",
        "3",
    ]);
    assert_eq!(ab["challenger"], candidate.as_str());
    assert!(
        ab["human_winner"].is_string() && ab["judge_winner"] == ab["human_winner"],
        "{ab}"
    );
    // BINEVAL'd and turned into lessons.
    let out = home.run(&[
        "review",
        "create",
        "--template",
        TEMPLATE_ID,
        "--repo",
        "acme/app",
        "--run",
        "r1",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let set = write(&home.path().join("in/set.yml"), SET);
    let src = write(
        &home.path().join("in/src.txt"),
        "scripted answer: adds parse_number\n",
    );
    let scored = home.json(&[
        "binary",
        "run",
        "--set",
        set.to_str().unwrap(),
        "--run",
        "r1",
        "--source",
        src.to_str().unwrap(),
        "--deterministic",
    ]);
    assert_eq!(scored["overall"], 1.0, "{scored}");
    let lessons = home.json(&["binary", "lessons", "--template", TEMPLATE_ID, "--apply"]);
    assert_eq!(lessons["applied"], 2, "{lessons}");
    // With one pick the confidence rests on too few pulls (S-57, S-63): notify only.
    let decided = skillforge_tests::decide_json(&home, &["candidate", "decide", &candidate]);
    assert_eq!(decided["decision"]["decision"], "notify", "{decided}");
    assert_eq!(state(&candidate), "pending");
    // More picks for the challenger (the seed's shuffle shows it under the same label each time)
    // until the bandit's confidence and pulls meet the floors: auto-promoted to a canary (S-63).
    let challenger_label = ab["challenger_label"].as_str().unwrap().to_owned();
    let mut promoted = false;
    for round in 0..8 {
        let picked = home.json(&[
            "ab",
            TEMPLATE_ID,
            &format!("Summarize change {round}"),
            "--pick",
            &challenger_label,
            "--seed",
            "3",
        ]);
        assert_eq!(picked["human_winner"], "challenger", "{picked}");
        let decided = skillforge_tests::decide_json(&home, &["candidate", "decide", &candidate]);
        if decided["decision"]["decision"] == "promote" {
            promoted = true;
            break;
        }
        assert_eq!(
            decided["decision"]["step"], 9,
            "thin or low confidence stops at step 9: {decided}"
        );
    }
    assert!(promoted, "the picks never met the guardrails");
    assert_eq!(
        sql(
            &home,
            &format!(
                "SELECT state || '|' || canary_sample FROM agent_template_versions WHERE id = '{candidate}'"
            )
        ),
        "canary|0.5"
    );
    assert_eq!(
        state(&format!("{TEMPLATE_ID}@v1")),
        "current",
        "the champion stays current"
    );
    // The window fills from harvested outcomes on both sides; the canary graduates by its job.
    for pr in 1..=10 {
        harvest_outcome(&home, pr, &candidate, true);
        harvest_outcome(&home, 100 + pr, &format!("{TEMPLATE_ID}@v1"), pr % 2 == 0);
    }
    let checked = skillforge_tests::canary_check_json(&home, &["candidate", "canary-check"]);
    assert_eq!(
        (
            checked[0]["window"]["decision"].as_str(),
            checked[0]["applied"].as_bool()
        ),
        (Some("graduate"), Some(true)),
        "{checked}"
    );
    assert_eq!(state(&candidate), "current");
    // Awaiting once more when the blocking guardrail moved from the sample floor to the bandit's
    // confidence (issue 37 item 11).
    let names = [
        "candidate.awaiting_promotion",
        "candidate.awaiting_promotion",
        "candidate.canary_started",
        "candidate.auto_promoted",
    ];
    let sent = events(&home);
    assert_eq!(
        sent.iter()
            .map(|e| e["event"].as_str().unwrap())
            .collect::<Vec<_>>(),
        names
    );
    let guardrails: Vec<&str> = sent[..2]
        .iter()
        .map(|e| e["detail"]["guardrail"].as_str().unwrap())
        .collect();
    assert_eq!(
        guardrails,
        ["auto_promote_min_samples", "auto_promote_min_confidence"]
    );
    let stream = redis
        .cli(&["XRANGE", "sf:events", "-", "+"])
        .expect("XRANGE");
    for name in names {
        assert!(stream.contains(name), "{name} in the stream:\n{stream}");
    }
}

/// Whether `text` is exactly one JSON document (surrounding whitespace aside).
fn one_json_document(text: &str) -> bool {
    let mut docs = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    matches!(docs.next(), Some(Ok(_))) && docs.next().is_none()
}

// Every read command honours `--json` with one JSON document, and its human output is never raw
// JSON: run each both ways on the home a demo leaves (a template, a session, a candidate, jobs,
// harvested events).
#[test]
fn every_read_command_answers_one_json_document_with_json_and_text_without() {
    let (repo, _, _) = repo_with_a_merge();
    let home = Home::embedded();
    let (code, stdout, stderr) = run(&home, &["demo", "--repo", repo.path().to_str().unwrap()]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let session_id = stdout
        .lines()
        .find_map(|l| l.strip_prefix("session "))
        .and_then(|rest| rest.split_whitespace().next())
        .map(str::to_owned);
    assert!(
        session_id.is_some(),
        "the demo names its session:\n{stdout}"
    );
    let job = home.json(&["jobs", "list"])[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let candidate = format!("{TEMPLATE_ID}@v2");
    let mut commands: Vec<Vec<String>> = [
        &["jobs", "list"][..],
        &["jobs", "show", &job],
        &["locks"],
        &["template", "list"],
        &["template", "show", TEMPLATE_ID],
        &["candidate", "list", "--template", TEMPLATE_ID],
        &["candidate", "list", "--pending"],
        &["candidate", "show", &candidate],
        &["harvest", "status"],
        &["harvest", "events"],
        &["eval", "status"],
    ]
    .iter()
    .map(|a| a.iter().map(|s| s.to_string()).collect())
    .collect();
    if let Some(id) = session_id {
        commands.push(vec![
            "train".into(),
            "status".into(),
            "--session".into(),
            id,
        ]);
    }
    for args in &commands {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut with_json = vec!["--json"];
        with_json.extend_from_slice(&args);
        let json = home.run(&with_json);
        let out = String::from_utf8_lossy(&json.stdout);
        assert!(
            json.status.success(),
            "{args:?} --json: {}",
            String::from_utf8_lossy(&json.stderr)
        );
        assert!(
            one_json_document(&out),
            "{args:?} --json does not print one JSON document:\n{out}"
        );
        let text = home.run(&args);
        let out = String::from_utf8_lossy(&text.stdout);
        assert!(
            text.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&text.stderr)
        );
        assert!(
            !out.trim().is_empty(),
            "{args:?} prints nothing in human mode"
        );
        assert!(
            !one_json_document(&out),
            "{args:?} prints raw JSON in human mode:\n{out}"
        );
    }
}

/// A promoted candidate is current: adding the older file would silently drop its guidance, so
/// it is refused naming how to write the current version back; `template show --content` writes
/// it, and the file then adds as unchanged (`--force` replaces anyway).
#[test]
fn template_add_refuses_to_replace_a_promoted_candidate_with_an_older_file() {
    let (repo, _, _) = repo_with_a_merge();
    let home = Home::embedded();
    let (code, stdout, stderr) = run(&home, &["demo", "--repo", repo.path().to_str().unwrap()]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    // A bare id names the current version: promoting it points at the pending candidate.
    let (code, _, stderr) = run(&home, &["candidate", "promote", "change-summarizer"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("names its current version, change-summarizer@v1")
            && stderr.contains("its undecided candidate is: change-summarizer@v2"),
        "{stderr}"
    );
    run(&home, &["candidate", "promote", "change-summarizer@v2"]);
    let file = home.path().join("mine/change-summarizer.md");
    write(&file, skillforge_cli_template());
    let (code, _, stderr) = run(&home, &["template", "add", file.to_str().unwrap()]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("change-summarizer@v2")
            && stderr.contains("template show change-summarizer@v2 --content"),
        "{stderr}"
    );
    // The refusal lists what the promoted version has and the file lacks, to merge by hand:
    // writing the promoted version over the file would lose the user's own edits.
    assert!(
        stderr.contains("  | ## Guidance from review evidence")
            && stderr.contains("Merge them into your file"),
        "{stderr}"
    );
    let (code, content, _) = run(
        &home,
        &["template", "show", "change-summarizer", "--content"],
    );
    assert_eq!(code, 0);
    assert!(
        content.contains("## Guidance from review evidence"),
        "{content}"
    );
    std::fs::write(&file, &content).unwrap();
    let (code, stdout, stderr) = run(&home, &["template", "add", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("unchanged"), "{stdout}");
    write(&file, skillforge_cli_template());
    let (code, stdout, stderr) = run(
        &home,
        &["template", "add", "--force", file.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("change-summarizer@v3 (current)"),
        "{stdout}"
    );
}

/// The demo's bundled template as shipped.
fn skillforge_cli_template() -> &'static str {
    include_str!("../../crates/cli/assets/demo/change-summarizer.md")
}
