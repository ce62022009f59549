//! Deciding what becomes current, through the built binary (issue 15; seed: SkillOpt, "Binary
//! evaluation (BINEVAL)", "Binary-disagreement lessons", "Promotion policy + notifications",
//! "Champion-challenger A/B preferences (Mode B)", "Cross-family LLM-judge auto-pairwise";
//! S-42..S-82). Every agent call runs the `scripted` runtime through the real `agent` runner as a
//! durable job on the embedded queue; the store is read back with `sqlite3` and `export`.

use std::process::Command;

use serde_json::{Value, json};
use skillforge_tests::decide::{
    ab, config, count, decide_tables, events, harvest_outcome, home, import, sql, stderr,
};
use skillforge_tests::{Home, PLANNER_TEMPLATE, write};

// ---------------------------------------------------------------------------------------------
// Mode B: ab, the bandit, the judge

// S-64
#[test]
fn s64_ab_without_a_pending_challenger_is_a_clean_no_op() {
    let home = home();
    let before = decide_tables(&home);
    let out = home.run(&["ab", "planner", "What changed?", "--pick", "a"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("nothing to A/B"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(decide_tables(&home), before, "no rows written");
    assert_eq!(count(&home, "skillopt_bandit_arms"), 0);
}

// resolutions 10
#[test]
fn ab_with_several_pending_and_no_challenger_is_refused_with_the_list() {
    let home = home();
    import(&home, "Plan in steps.\n", 0.8);
    import(&home, "Plan briefly.\n", 0.8);
    let before = decide_tables(&home);
    let out = home.run(&["ab", "planner", "What changed?", "--pick", "a"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("planner@v2, planner@v3"),
        "{}",
        stderr(&out)
    );
    assert_eq!(decide_tables(&home), before);
}

// S-66: a pick between two answers of the same text is no preference: nothing is recorded and
// the bandit does not move (a new user's pick between two identical scripted answers moved it).
#[test]
fn s66_a_pick_between_identical_answers_records_nothing() {
    let home = home();
    import(&home, "Plan in numbered steps.\n", 0.8);
    let before = decide_tables(&home);
    let out = home.run(&[
        "ab",
        "planner",
        "What changed?\nscripted: reply the same answer for both",
        "--pick",
        "a",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout.contains("answered with the same text") && stdout.contains("nothing was recorded"),
        "{stdout}"
    );
    assert_eq!(decide_tables(&home), before, "no rows written");
    assert_eq!(count(&home, "skillopt_bandit_arms"), 0);
}

// S-65, S-66, S-67, S-68
#[test]
fn s65_s68_picks_map_back_accumulate_and_move_the_bandit() {
    let home = home();
    import(&home, "Plan in numbered steps.\n", 0.8);
    let first = ab(
        &home,
        &["What changed in the parser?", "--pick", "a", "--seed", "1"],
    );
    let challenger_is_a = first["challenger_label"] == "a";
    let expected = if challenger_is_a {
        "challenger"
    } else {
        "champion"
    };
    assert_eq!(
        first["human_winner"], expected,
        "S-65: the pick maps back through the shuffle: {first}"
    );
    assert_eq!(first["arms_moved"], true);
    let (winner, loser) = if challenger_is_a {
        ("planner@v2", "planner@v1")
    } else {
        ("planner@v1", "planner@v2")
    };
    assert_eq!(
        sql(
            &home,
            &format!(
                "SELECT alpha, beta, pulls FROM skillopt_bandit_arms WHERE template_version_id = '{winner}'"
            )
        ),
        "2.0|1.0|1"
    );
    assert_eq!(
        sql(
            &home,
            &format!(
                "SELECT alpha, beta, pulls FROM skillopt_bandit_arms WHERE template_version_id = '{loser}'"
            )
        ),
        "1.0|2.0|1"
    );
    let p_exact = first["confidence"]["p_exact"].as_f64().unwrap();
    let expected_p = if challenger_is_a {
        5.0 / 6.0
    } else {
        1.0 / 6.0
    };
    assert!((p_exact - expected_p).abs() < 1e-9, "{p_exact}");
    assert!(
        first["summary"]
            .as_str()
            .unwrap()
            .ends_with("likely better over 20000 samples"),
        "{first}"
    );
    // S-68: the same seed reproduces the Monte Carlo estimate on the same arms.
    let again = ab(
        &home,
        &["What changed in the parser?", "--pick", "b", "--seed", "1"],
    );
    assert_eq!(again["challenger_label"], first["challenger_label"]);
    // S-66: run, item per pick, two options, one ranked event [winner, loser] by human/skillopt-ab.
    assert_eq!(
        sql(
            &home,
            "SELECT options_count, json_extract(metadata_json, '$.feedback_source') FROM eval_runs WHERE id = 'skillopt-ab:planner@v2'"
        ),
        "2|preference_ab"
    );
    let pick = first["pick_id"].as_str().unwrap();
    assert_eq!(
        sql(
            &home,
            &format!(
                "SELECT group_concat(label, ',') FROM (SELECT label FROM eval_review_options WHERE item_id = '{pick}' ORDER BY label)"
            )
        ),
        "challenger,champion"
    );
    assert_eq!(
        sql(
            &home,
            &format!(
                "SELECT ranking_json, reviewer, source FROM ranked_feedback_events WHERE item_id = '{pick}'"
            )
        ),
        format!(
            "[\"{expected}\",\"{}\"]|human|skillopt-ab",
            if challenger_is_a {
                "champion"
            } else {
                "challenger"
            }
        )
    );
    // S-67: a third pick; three picks are three rows with distinct source URLs.
    ab(&home, &["Another question", "--pick", "a", "--seed", "2"]);
    assert_eq!(
        sql(
            &home,
            "SELECT COUNT(*), COUNT(DISTINCT source_url) FROM ranked_feedback_events WHERE run_id = 'skillopt-ab:planner@v2'"
        ),
        "3|3"
    );
    assert_eq!(
        sql(
            &home,
            "SELECT pulls FROM skillopt_bandit_arms WHERE template_version_id = 'planner@v2'"
        ),
        "3"
    );
    // The answers are artifacts in the blob store; the export of the run passes the package checks.
    let out_file = home.path().join("ab-export.json");
    let out = home.run(&[
        "export",
        "--run",
        "skillopt-ab:planner@v2",
        "--output",
        out_file.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let package: Value =
        serde_json::from_str(&std::fs::read_to_string(&out_file).unwrap()).unwrap();
    assert_eq!(
        package["ranked_feedback_events"].as_array().unwrap().len(),
        3
    );
    assert_eq!(
        package["artifacts"].as_array().unwrap().len(),
        6,
        "two answers per pick"
    );
    assert!(
        package.get("binary_verdicts").is_none(),
        "S-02: no BINEVAL section without verdicts"
    );
    // Four agent jobs of workflow ab per... two per pick, serialized (S-65): champion then challenger.
    let jobs = home.json(&["jobs", "list"]);
    let ab_jobs: Vec<&Value> = jobs
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["workflow"] == "ab")
        .collect();
    assert_eq!(ab_jobs.len(), 6, "{jobs:#}");
}

// S-65 (issue 34 item 6): the text shown as Option A is the answer of the version the shuffle
// puts in slot A, read from the job records, and the two answers never overlap in time (the
// challenger is asked after the champion's answer is in).
#[test]
fn s65_option_a_is_the_mapped_versions_answer_and_the_runs_never_overlap() {
    let home = home();
    import(&home, "Plan in numbered steps.\n", 0.8);
    for seed in ["1", "2", "3", "4"] {
        let out = home
            .cmd()
            .args([
                "--json",
                "ab",
                "planner",
                "What changed in the parser?",
                "--pick",
                "a",
                "--seed",
                seed,
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        let shown = stderr(&out);
        let option_a = shown
            .split("Option A:\n")
            .nth(1)
            .and_then(|r| r.split("\n\nOption B:\n").next())
            .unwrap_or_else(|| panic!("{shown}"));
        let jobs = home.json(&["jobs", "list", "--limit", "1000"]);
        let mut ab_jobs: Vec<Value> = jobs
            .as_array()
            .unwrap()
            .iter()
            .filter(|j| j["workflow"] == "ab")
            .map(|j| home.job(j["id"].as_str().unwrap()))
            .collect();
        ab_jobs.sort_by_key(|j| j["created_at"].as_str().map(str::to_owned));
        let (champion, challenger) = {
            let last_two: Vec<&Value> = ab_jobs.iter().rev().take(2).collect();
            let by = |stage: &str| {
                (*last_two
                    .iter()
                    .find(|j| j["stage"] == stage)
                    .unwrap_or_else(|| panic!("no {stage} job: {last_two:#?}")))
                .clone()
            };
            (by("champion"), by("challenger"))
        };
        let answer = |job: &Value| {
            job["outcome"]["detail"]["final_message"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        };
        let in_a = if report["challenger_label"] == "a" {
            &challenger
        } else {
            &champion
        };
        assert_eq!(
            option_a.trim(),
            answer(in_a).trim(),
            "seed {seed}: Option A is the answer of the version in slot A"
        );
        // RFC 3339 UTC with milliseconds: compared as written.
        let span = |job: &Value| {
            let attempt = &job["history"][0];
            (
                attempt["started_at"].as_str().unwrap().to_owned(),
                attempt["ended_at"].as_str().unwrap().to_owned(),
            )
        };
        let ((_, champion_end), (challenger_start, _)) = (span(&champion), span(&challenger));
        assert!(
            champion_end <= challenger_start,
            "seed {seed}: the runs overlap: champion ended {champion_end}, challenger started {challenger_start}"
        );
    }
}

// S-75, S-77, S-79, S-80
#[test]
fn s75_s80_judge_rows_are_evidence_only() {
    let home = home();
    import(&home, "Plan in numbered steps.\n", 0.8);
    // S-75: default ab runs exactly the two answer jobs and writes no judge row.
    ab(&home, &["Default run", "--pick", "a", "--seed", "3"]);
    assert_eq!(count(&home, "ranked_feedback_events"), 1);
    config(&home, "[skillopt]\nreview_runtimes = [\"scripted\"]\n");
    let arms_before = sql(
        &home,
        "SELECT group_concat(alpha || '/' || beta || '/' || pulls) FROM skillopt_bandit_arms",
    );
    // The scripted judge's verdict follows its prompt's digest: ask a few prompts until it picks.
    let mut judge_rows = 0;
    for idx in 0..8 {
        let out = ab(
            &home,
            &[&format!("Judge only {idx}"), "--judge-only", "--seed", "4"],
        );
        assert_eq!(out["human_winner"], Value::Null);
        judge_rows = sql(
            &home,
            "SELECT COUNT(*) FROM ranked_feedback_events WHERE source = 'skillopt-ab-judge'",
        )
        .parse()
        .unwrap();
        if judge_rows > 0 {
            let pick = out["pick_id"].as_str().unwrap();
            assert_eq!(
                sql(
                    &home,
                    &format!(
                        "SELECT reviewer, source, winner FROM ranked_feedback_events WHERE item_id = '{pick}'"
                    )
                ),
                format!(
                    "skillopt-ab-judge|skillopt-ab-judge|{}",
                    out["judge_winner"].as_str().unwrap()
                )
            );
            break;
        }
    }
    assert!(judge_rows > 0, "some judge replies pick a or b");
    // S-80: judge rows never move the arms.
    assert_eq!(
        sql(
            &home,
            "SELECT group_concat(alpha || '/' || beta || '/' || pulls) FROM skillopt_bandit_arms"
        ),
        arms_before
    );
    // S-79: with a human pick too, both rows coexist on one item when the judge picks.
    for idx in 0..8 {
        let out = ab(
            &home,
            &[
                &format!("Both {idx}"),
                "--judge",
                "--pick",
                "a",
                "--seed",
                "5",
            ],
        );
        if out["judge_winner"].is_string() {
            let pick = out["pick_id"].as_str().unwrap();
            assert_eq!(
                sql(
                    &home,
                    &format!(
                        "SELECT COUNT(DISTINCT source) FROM ranked_feedback_events WHERE item_id = '{pick}'"
                    )
                ),
                "2"
            );
            return;
        }
    }
    panic!("the judge never picked across 8 prompts");
}

// S-76
#[test]
fn s76_only_the_templates_own_family_skips_the_judge() {
    let home = home();
    import(&home, "Plan in numbered steps.\n", 0.8);
    config(&home, "[skillopt]\nreview_runtimes = [\"codex\"]\n");
    let out = home
        .cmd()
        .args([
            "--json", "ab", "planner", "q", "--judge", "--pick", "a", "--seed", "1",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("no judge of a family other than `codex`"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        sql(
            &home,
            "SELECT group_concat(source) FROM ranked_feedback_events"
        ),
        "skillopt-ab",
        "human row only"
    );
    // With --judge-only the judge is the whole A/B: no judge is an error, never a dropped verdict.
    let before = sql(&home, "SELECT count(*) FROM ranked_feedback_events");
    let out = home
        .cmd()
        .args(["ab", "planner", "q2", "--judge-only", "--seed", "2"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("nothing was recorded")
            && stderr(&out).contains("[skillopt] review_runtimes"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        sql(&home, "SELECT count(*) FROM ranked_feedback_events"),
        before,
        "nothing recorded"
    );
}

// ---------------------------------------------------------------------------------------------
// BINEVAL

const SET: &str = "\
version: 1
template_or_task_kind: planning
dimensions:
  - name: correctness
    weight: 2
    questions:
      - id: has_steps
        text: Does the plan have numbered steps?
        weight: 3
        regex: \"(?m)^1\\\\. \"
      - id: has_test
        text: Does the plan mention a test?
        contains: test
  - name: style
    questions:
      - id: no_todo
        text: Is it free of TODOs?
        not_contains: TODO
";

fn review_run(home: &Home, run: &str) {
    let out = home.run(&[
        "review",
        "create",
        "--template",
        "planner",
        "--repo",
        "acme/app",
        "--run",
        run,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
}

fn binary_run(home: &Home, run: &str, source: &str) -> Value {
    let set = write(&home.path().join("in/set.yml"), SET);
    let src = write(&home.path().join(format!("in/{run}.txt")), source);
    home.json(&[
        "binary",
        "run",
        "--set",
        set.to_str().unwrap(),
        "--run",
        run,
        "--source",
        src.to_str().unwrap(),
        "--deterministic",
    ])
}

// S-42, S-43, S-45
#[test]
fn s42_s45_binary_run_show_and_export_agree_with_weights() {
    let home = home();
    review_run(&home, "r1");
    let run = binary_run(&home, "r1", "1. write a test\n2. ship\nTODO: docs\n");
    // correctness = (3·yes + 1·yes)/4 = 1.0, style = 0 ⇒ overall (2·1 + 1·0)/3
    assert_eq!(
        run["dimension_scores"],
        json!({"correctness": 1.0, "style": 0.0})
    );
    assert!(
        (run["overall"].as_f64().unwrap() - 2.0 / 3.0).abs() < 1e-12,
        "{run}"
    );
    let again = binary_run(&home, "r1", "1. write a plan\n2. ship\n");
    assert_eq!(
        count(&home, "skillopt_binary_verdicts"),
        3,
        "S-45: upsert per (run, question)"
    );
    let show = home.json(&["binary", "show", "--run", "r1"]);
    assert_eq!(
        (show["dimension_scores"].clone(), show["overall"].clone()),
        (again["dimension_scores"].clone(), again["overall"].clone())
    );
    assert_eq!(
        again["dimension_scores"]["correctness"],
        json!(0.75),
        "(3·yes + 1·no)/4 with non-uniform weights"
    );
    assert_eq!(
        sql(
            &home,
            "SELECT question_weight, dimension_weight FROM skillopt_binary_verdicts WHERE question_id = 'has_steps'"
        ),
        "3.0|2.0"
    );
    assert_eq!(
        sql(
            &home,
            "SELECT question_weight, dimension_weight FROM skillopt_binary_verdicts WHERE question_id = 'no_todo'"
        ),
        "1.0|1.0",
        "S-42: weights default to 1"
    );
    let out_file = home.path().join("r1.json");
    let out = home.run(&[
        "export",
        "--run",
        "r1",
        "--output",
        out_file.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let package: Value =
        serde_json::from_str(&std::fs::read_to_string(&out_file).unwrap()).unwrap();
    assert_eq!(package["binary_verdicts"].as_array().unwrap().len(), 3);
    // S-42: a duplicate id anywhere in the set is refused and nothing is written.
    let dup = write(
        &home.path().join("in/dup.yml"),
        &SET.replace("id: no_todo", "id: has_test"),
    );
    let src = write(&home.path().join("in/x.txt"), "x");
    review_run(&home, "r2");
    let out = home.run(&[
        "binary",
        "run",
        "--set",
        dup.to_str().unwrap(),
        "--run",
        "r2",
        "--source",
        src.to_str().unwrap(),
        "--deterministic",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("dup.yml") && stderr(&out).contains("`has_test` appears twice"),
        "{}",
        stderr(&out)
    );
    assert_eq!(count(&home, "skillopt_binary_verdicts"), 3);
}

// S-46
#[test]
fn s46_bineval_is_inert_unless_a_binary_command_runs_on_the_run() {
    let home = home();
    review_run(&home, "r1");
    review_run(&home, "r2");
    let export = |run: &str| {
        let file = home.path().join(format!("{run}-export.json"));
        let out = home.run(&["export", "--run", run, "--output", file.to_str().unwrap()]);
        assert!(out.status.success(), "{}", stderr(&out));
        std::fs::read(&file).unwrap()
    };
    let before = export("r1");
    binary_run(&home, "r2", "1. test\n");
    assert_eq!(
        export("r1"),
        before,
        "verdicts of another run leave r1's export byte-identical"
    );
    assert!(!String::from_utf8_lossy(&before).contains("binary_verdicts"));
    binary_run(&home, "r1", "1. test\n");
    assert!(
        String::from_utf8_lossy(&export("r1")).contains("binary_verdicts"),
        "the section appears with verdicts"
    );
}

// S-44
#[test]
fn s44_reviewer_answers_one_question_per_job_from_another_family() {
    let home = home();
    review_run(&home, "r1");
    let set = write(&home.path().join("in/set.yml"), SET);
    let src = write(&home.path().join("in/src.txt"), "1. test it\n");
    let (set, src) = (set.to_str().unwrap(), src.to_str().unwrap());
    // The template is codex-family: codex may not answer; scripted (another family) does.
    let out = home.run(&[
        "binary",
        "run",
        "--set",
        set,
        "--run",
        "r1",
        "--source",
        src,
        "--reviewer",
        "codex",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(count(&home, "skillopt_binary_verdicts"), 0);
    let run = home.json(&[
        "binary",
        "run",
        "--set",
        set,
        "--run",
        "r1",
        "--source",
        src,
        "--reviewer",
        "codex,scripted",
    ]);
    let jobs = home.json(&["jobs", "list"]);
    let question_jobs: Vec<&Value> = jobs
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["workflow"] == "bineval")
        .collect();
    assert_eq!(question_jobs.len(), 3, "one call per question: {jobs:#}");
    let answered = run["verdicts"].as_array().unwrap().len() as i64;
    assert_eq!(
        count(&home, "skillopt_binary_verdicts"),
        answered,
        "only readable answers are stored"
    );
}

// S-47, S-48, S-49, S-50
#[test]
fn s47_s49_lessons_preview_then_apply_idempotently_and_shrink() {
    let home = home();
    review_run(&home, "r1");
    review_run(&home, "r2");
    binary_run(&home, "r1", "1. plan\nTODO\n"); // has_steps yes, has_test no, no_todo no
    binary_run(&home, "r2", "plan\nTODO\n"); // has_steps no, has_test no, no_todo no
    let set = home.path().join("in/set.yml");
    let set = set.to_str().unwrap();
    let preview = home.json(&["binary", "lessons", "--template", "planner", "--set", set]);
    let kinds: Vec<(&str, &str)> = preview["lessons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["question_id"].as_str().unwrap(),
                l["kind"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("has_steps", "flip"),
            ("has_test", "stable_no"),
            ("no_todo", "stable_no")
        ]
    );
    assert_eq!(
        count(&home, "ranked_feedback_events"),
        0,
        "S-48: preview writes nothing"
    );
    // A stable yes appears once r1 is narrowed to itself.
    let applied = home.json(&[
        "binary",
        "lessons",
        "--template",
        "planner",
        "--set",
        set,
        "--apply",
    ]);
    assert_eq!(applied["applied"], 3);
    home.json(&[
        "binary",
        "lessons",
        "--template",
        "planner",
        "--set",
        set,
        "--apply",
    ]);
    assert_eq!(
        count(&home, "ranked_feedback_events"),
        3,
        "S-49: re-applying is idempotent"
    );
    let narrow = home.json(&[
        "binary",
        "lessons",
        "--template",
        "planner",
        "--run",
        "r1",
        "--apply",
    ]);
    assert_eq!(narrow["applied"], 3);
    assert_eq!(
        sql(
            &home,
            "SELECT COUNT(*) FROM ranked_feedback_events WHERE useful_traits_json <> ''"
        ),
        "1",
        "has_steps is a stable yes in r1 alone"
    );
    home.json(&[
        "binary",
        "lessons",
        "--template",
        "planner",
        "--run",
        "r1",
        "--no-passes",
        "--apply",
    ]);
    assert_eq!(
        count(&home, "ranked_feedback_events"),
        2,
        "--no-passes removes the stale trait event"
    );
    assert_eq!(
        sql(
            &home,
            "SELECT COUNT(*) FROM ranked_feedback_events WHERE winner <> '' OR ranking_json <> '[]'"
        ),
        "0",
        "S-50"
    );
    home.json(&[
        "binary",
        "lessons",
        "--template",
        "planner",
        "--run",
        "none",
        "--apply",
    ]);
    assert_eq!(
        count(&home, "ranked_feedback_events"),
        0,
        "no lessons ⇒ no events"
    );
}

// ---------------------------------------------------------------------------------------------
// Auto-promote, events, canary

// S-51, S-52, S-53, S-55
#[test]
fn s52_s55_import_notifies_once_and_unset_floors_never_promote() {
    let home = home();
    config(
        &home,
        "[skillopt]\nauto_promote = true\nauto_promote_min_score = 0.5\n[events]\njsonl = \"events.jsonl\"\n",
    );
    let note = import(&home, "Plan in steps.\n", 0.8);
    assert!(note.contains("auto_promote_min_samples is unset"), "{note}");
    assert_eq!(
        sql(
            &home,
            "SELECT state FROM agent_template_versions WHERE id = 'planner@v2'"
        ),
        "pending",
        "S-51, S-55"
    );
    let sent = events(&home);
    assert_eq!(sent.len(), 1);
    assert_eq!(
        (
            sent[0]["event"].as_str(),
            sent[0]["job_id"].as_str(),
            sent[0]["root_id"].as_str()
        ),
        (
            Some("candidate.awaiting_promotion"),
            Some("planner@v2"),
            Some("planner")
        )
    );
    // `candidate decide` re-runs the seam; the notification is not sent twice.
    skillforge_tests::decide_json(&home, &["candidate", "decide", "planner@v2"]);
    assert_eq!(events(&home).len(), 1);
    // S-52: pending candidates are listed across templates, with or without [events].
    let pending = home.json(&["candidate", "list", "--pending"]);
    assert_eq!(pending[0]["version_id"], "planner@v2");
}

// S-53
#[test]
fn s53_auto_promote_absent_and_false_leave_the_same_store() {
    let snapshot = |cfg: &str| {
        let home = home();
        config(&home, cfg);
        import(&home, "Plan in steps.\n", 0.8);
        (
            decide_tables(&home),
            sql(
                &home,
                "SELECT group_concat(id || ':' || state) FROM agent_template_versions",
            ),
        )
    };
    assert_eq!(snapshot(""), snapshot("[skillopt]\nauto_promote = false\n"));
}

// facts §7 steps 6, 8, 10; S-54, S-56, S-58, S-60, S-61 (harvest → auto-promote → canary → graduate)
#[test]
fn s60_s61_harvested_outcomes_auto_promote_to_a_canary_that_graduates() {
    let home = home();
    config(
        &home,
        "[skillopt]\nauto_trace_enabled = true\nauto_promote = true\nauto_promote_min_samples = 2\nauto_promote_min_score = 0.5\n\
         auto_promote_require_external_ci = true\nauto_promote_canary = true\nauto_promote_canary_sample = 0.25\n\
         [events]\njsonl = \"events.jsonl\"\n",
    );
    let note = import(&home, "Plan in steps.\n", 0.8);
    assert!(
        note.contains("no auto-trace feedback samples"),
        "S-56: zero auto-trace samples never promote: {note}"
    );
    // The human review run is not read (S-54); only auto-trace:planner@v2 is.
    for pr in 1..=2 {
        harvest_outcome(&home, pr, "planner@v2", true);
    }
    let decided = skillforge_tests::decide_json(&home, &["candidate", "decide", "planner@v2"]);
    assert_eq!(decided["decision"]["decision"], "promote", "{decided}");
    assert_eq!(
        sql(
            &home,
            "SELECT state, canary_sample FROM agent_template_versions WHERE id = 'planner@v2'"
        ),
        "canary|0.25"
    );
    assert_eq!(
        sql(
            &home,
            "SELECT state FROM agent_template_versions WHERE id = 'planner@v1'"
        ),
        "current",
        "the champion stays current"
    );
    // S-62: too few outcomes on either side ⇒ hold, no event.
    let held = skillforge_tests::canary_check_json(&home, &["candidate", "canary-check"]);
    assert_eq!(held[0]["window"]["decision"], "hold", "{held}");
    for pr in 3..=12 {
        harvest_outcome(&home, pr, "planner@v2", true);
        harvest_outcome(&home, 100 + pr, "planner@v1", pr % 2 == 0);
    }
    let graduated = skillforge_tests::canary_check_json(&home, &["candidate", "canary-check"]);
    assert_eq!(
        graduated[0]["window"]["decision"], "graduate",
        "{graduated}"
    );
    assert_eq!(
        sql(
            &home,
            "SELECT state FROM agent_template_versions WHERE id = 'planner@v2'"
        ),
        "current"
    );
    assert_eq!(
        skillforge_tests::canary_check_json(&home, &["candidate", "canary-check"])
            .as_array()
            .unwrap()
            .len(),
        0,
        "idempotent: no canary left"
    );
    let names: Vec<String> = events(&home)
        .iter()
        .map(|e| e["event"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        names,
        [
            "candidate.awaiting_promotion",
            "candidate.canary_started",
            "candidate.auto_promoted"
        ]
    );
}

// S-58 (issue 34 item 1): merges with no external CI ("no passing external CI at the merged
// head") never satisfy `auto_promote_require_external_ci`, however their reasoning reads; merges
// with external CI do. The harvester writes the rows both times.
#[test]
fn s58_merges_without_external_ci_never_promote() {
    let home = home();
    config(
        &home,
        "[skillopt]\nauto_trace_enabled = true\nauto_promote = true\nauto_promote_min_samples = 3\nauto_promote_min_score = 0.5\nauto_promote_require_external_ci = true\n",
    );
    import(&home, "Plan in steps.\n", 0.8);
    for pr in 1..=3 {
        let pr_s = pr.to_string();
        home.json(&[
            "harvest",
            "attribute",
            "--repo",
            "acme/app",
            "--pr",
            &pr_s,
            "--template",
            "planner@v2",
            "--resolved-commit",
            "c0ffee",
        ]);
        home.json(&[
            "harvest",
            "outcome",
            "--repo",
            "acme/app",
            "--pr",
            &pr_s,
            "--outcome",
            "merged",
            "--ci",
            "none",
        ]);
    }
    let decided = skillforge_tests::decide_json(&home, &["candidate", "decide", "planner@v2"]);
    assert_ne!(
        decided["decision"]["decision"], "promote",
        "three no-CI merges promoted: {decided}"
    );
    assert!(
        decided
            .to_string()
            .contains("auto_promote_require_external_ci"),
        "{decided}"
    );
    assert_eq!(
        sql(
            &home,
            "SELECT state FROM agent_template_versions WHERE id = 'planner@v2'"
        ),
        "pending"
    );
    for pr in 4..=6 {
        harvest_outcome(&home, pr, "planner@v2", true);
    }
    let decided = skillforge_tests::decide_json(&home, &["candidate", "decide", "planner@v2"]);
    assert_eq!(decided["decision"]["decision"], "promote", "{decided}");
    assert_eq!(
        sql(
            &home,
            "SELECT state FROM agent_template_versions WHERE id = 'planner@v2'"
        ),
        "current"
    );
}

// S-61, S-62 (issue 37 item 1): the guardrails' evidence is never the canary's window. Outcomes
// harvested before `candidate decide` started the canary (in the same second: `created_at` has
// one-second resolution) do not count; the canary holds until outcomes after its start arrive.
#[test]
fn s61_a_canary_window_counts_only_outcomes_after_its_start() {
    let home = home();
    config(
        &home,
        "[skillopt]\nauto_trace_enabled = true\nauto_promote = true\nauto_promote_min_samples = 2\nauto_promote_min_score = 0.5\n\
         auto_promote_canary = true\nauto_promote_canary_sample = 0.2\n",
    );
    import(&home, "Plan in steps.\n", 0.8);
    for pr in 1..=10 {
        harvest_outcome(&home, pr, "planner@v2", true);
        harvest_outcome(&home, 100 + pr, "planner@v1", false);
    }
    let decided = skillforge_tests::decide_json(&home, &["candidate", "decide", "planner@v2"]);
    assert_eq!(decided["decision"]["decision"], "promote", "{decided}");
    assert_eq!(
        sql(
            &home,
            "SELECT state FROM agent_template_versions WHERE id = 'planner@v2'"
        ),
        "canary"
    );
    let held = skillforge_tests::canary_check_json(&home, &["candidate", "canary-check"]);
    assert_eq!(
        held[0]["window"]["decision"], "hold",
        "the guardrails' outcomes were served again as the canary's: {held}"
    );
    assert_eq!(
        sql(
            &home,
            "SELECT state FROM agent_template_versions WHERE id = 'planner@v2'"
        ),
        "canary"
    );
    for pr in 11..=20 {
        harvest_outcome(&home, pr, "planner@v2", true);
        harvest_outcome(&home, 100 + pr, "planner@v1", pr % 2 == 0);
    }
    let graduated = skillforge_tests::canary_check_json(&home, &["candidate", "canary-check"]);
    assert_eq!(
        graduated[0]["window"]["decision"], "graduate",
        "{graduated}"
    );
}

// Issue 37 items 2 and 4: a second candidate that passes the guardrails while another canary
// runs is blocked, says so and exits non-zero; promoting a version by hand ends the running
// canary with an event; a candidate built on the old champion is then refused ("rebase
// needed", naming both), by the guardrails and by `candidate canary`.
#[test]
fn a_blocked_decision_says_so_and_a_stale_base_is_refused() {
    let home = home();
    config(
        &home,
        "[skillopt]\nauto_trace_enabled = true\nauto_promote = true\nauto_promote_min_samples = 2\nauto_promote_min_score = 0.5\n\
         auto_promote_canary = true\nauto_promote_canary_sample = 0.2\n[events]\njsonl = \"events.jsonl\"\n",
    );
    import(&home, "Plan in steps.\n", 0.8);
    import(&home, "Plan in small steps.\n", 0.8);
    for pr in 1..=2 {
        harvest_outcome(&home, pr, "planner@v2", true);
        harvest_outcome(&home, 10 + pr, "planner@v3", true);
    }
    assert_eq!(
        skillforge_tests::decide_json(&home, &["candidate", "decide", "planner@v2"])["decision"]["decision"],
        "promote"
    );
    assert_eq!(
        sql(
            &home,
            "SELECT state FROM agent_template_versions WHERE id = 'planner@v2'"
        ),
        "canary"
    );
    let out = home.run(&["candidate", "decide", "planner@v3"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a pass that changed nothing is no success: {said}"
    );
    assert!(
        said.contains("blocked: planner@v2 is the running canary"),
        "{said}"
    );
    assert_eq!(
        sql(
            &home,
            "SELECT state FROM agent_template_versions WHERE id = 'planner@v3'"
        ),
        "pending"
    );

    // A promotion by hand ends the running canary, with an event.
    let out = home.run(&["candidate", "promote", "planner@v3"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("canary ended: planner@v3 was promoted by hand")
    );
    assert_eq!(
        sql(
            &home,
            "SELECT state FROM agent_template_versions WHERE id = 'planner@v2'"
        ),
        "pending"
    );
    let ended: Vec<Value> = events(&home)
        .into_iter()
        .filter(|e| e["event"] == "candidate.rolled_back")
        .collect();
    assert_eq!(ended.len(), 1, "{ended:?}");
    assert_eq!(ended[0]["job_id"], "planner@v2");

    // planner@v2 was built on planner@v1: rebase needed, by the guardrails and by hand.
    let decided = skillforge_tests::decide_json(&home, &["candidate", "decide", "planner@v2"]);
    assert_eq!(decided["decision"]["step"], 10, "{decided}");
    let reason = decided["reason"].as_str().unwrap();
    assert!(
        reason.contains("rebase needed")
            && reason.contains("planner@v1")
            && reason.contains("planner@v3"),
        "{reason}"
    );
    let out = home.run(&["candidate", "canary", "planner@v2", "--sample", "0.5"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("rebase needed"), "{}", stderr(&out));
    assert_eq!(
        sql(
            &home,
            "SELECT state FROM agent_template_versions WHERE id = 'planner@v2'"
        ),
        "pending"
    );
}

// Issue 37 item 3: 0.90 against 1.00 "within the margin" held forever, keeping its traffic with
// no event; a window spent (here `auto_promote_canary_max_outcomes = 10` outcomes on each side)
// still holding ends inconclusive: the canary is rolled back, the champion stays, the event says so.
#[test]
fn a_canary_whose_spent_window_never_decides_is_rolled_back_as_inconclusive() {
    let home = home();
    config(
        &home,
        "[skillopt]\nauto_trace_enabled = true\nauto_promote_canary_max_outcomes = 10\n[events]\njsonl = \"events.jsonl\"\n",
    );
    import(&home, "Plan in steps.\n", 0.8);
    home.json(&["candidate", "canary", "planner@v2", "--sample", "0.2"]);
    for pr in 1..=9 {
        harvest_outcome(&home, pr, "planner@v2", pr != 1);
        harvest_outcome(&home, 100 + pr, "planner@v1", true);
    }
    let held = skillforge_tests::canary_check_json(&home, &["candidate", "canary-check"]);
    assert_eq!(held[0]["window"]["decision"], "hold", "{held}");
    harvest_outcome(&home, 10, "planner@v2", true);
    harvest_outcome(&home, 110, "planner@v1", true);
    let checked = skillforge_tests::canary_check_json(&home, &["candidate", "canary-check"]);
    assert_eq!(
        checked[0]["window"]["decision"], "inconclusive",
        "{checked}"
    );
    assert!(
        checked[0]["window"]["reason"]
            .as_str()
            .unwrap()
            .contains("10 outcomes on each side"),
        "{checked}"
    );
    assert_eq!(
        sql(
            &home,
            "SELECT state FROM agent_template_versions WHERE id = 'planner@v2'"
        ),
        "rejected"
    );
    assert_eq!(
        sql(
            &home,
            "SELECT state FROM agent_template_versions WHERE id = 'planner@v1'"
        ),
        "current",
        "the champion stays"
    );
    let rolled: Vec<Value> = events(&home)
        .into_iter()
        .filter(|e| e["event"] == "candidate.rolled_back")
        .collect();
    assert_eq!(rolled.len(), 1, "{rolled:?}");
    assert!(
        rolled[0].to_string().contains("inconclusive"),
        "{:?}",
        rolled[0]
    );
}

// S-61 (rollback), S-58
#[test]
fn s61_a_materially_worse_canary_rolls_back() {
    let home = home();
    config(
        &home,
        "[skillopt]\nauto_trace_enabled = true\n[events]\njsonl = \"events.jsonl\"\n",
    );
    import(&home, "Plan in steps.\n", 0.8);
    home.json(&["candidate", "canary", "planner@v2", "--sample", "0.5"]);
    for pr in 1..=10 {
        harvest_outcome(&home, pr, "planner@v2", pr <= 2);
        harvest_outcome(&home, 100 + pr, "planner@v1", true);
    }
    let checked = skillforge_tests::canary_check_json(&home, &["candidate", "canary-check"]);
    assert_eq!(checked[0]["window"]["decision"], "roll_back", "{checked}");
    assert_eq!(
        sql(
            &home,
            "SELECT state FROM agent_template_versions WHERE id = 'planner@v2'"
        ),
        "rejected"
    );
    assert_eq!(
        sql(
            &home,
            "SELECT state FROM agent_template_versions WHERE id = 'planner@v1'"
        ),
        "current"
    );
    assert_eq!(
        events(&home).last().unwrap()["event"],
        "candidate.rolled_back"
    );
}

// S-63, facts §7 step 9: ab → bandit → auto-promote
#[test]
fn s63_bandit_confidence_from_ab_picks_feeds_auto_promote() {
    let home = home();
    config(
        &home,
        // No judge runtime, whatever agent CLIs this machine has on PATH (scripts/test installs a
        // logged-out Claude Code; a judge it ran would stop `ab` with exit 3).
        "[skillopt]\nauto_promote = true\nauto_promote_min_samples = 3\nauto_promote_min_score = 0.5\nauto_promote_min_confidence = 0.9\n\
         review_runtimes = []\n",
    );
    import(&home, "Plan in numbered steps.\n", 0.8);
    // The shuffle follows the seed: once a seed has shown the challenger as A, `--pick a` with that
    // seed is a challenger win every time.
    let mut decided = Value::Null;
    let mut winning_seed = None;
    for round in 0..12u64 {
        let seed = winning_seed.unwrap_or(round + 10).to_string();
        let reply = ab(
            &home,
            &[&format!("Q{round}"), "--pick", "a", "--seed", &seed],
        );
        if reply["challenger_label"] == "a" {
            winning_seed.get_or_insert(round + 10);
        }
        decided = skillforge_tests::decide_json(&home, &["candidate", "decide", "planner@v2"]);
        if decided["decision"]["decision"] == "promote" {
            break;
        }
        assert_eq!(
            decided["decision"]["step"], 9,
            "thin or low confidence stops at step 9: {decided}"
        );
    }
    assert_eq!(decided["decision"]["decision"], "promote", "{decided}");
    assert_eq!(
        sql(
            &home,
            "SELECT state FROM agent_template_versions WHERE id = 'planner@v2'"
        ),
        "current"
    );
}

// ---------------------------------------------------------------------------------------------
// ask, live A/B, canary routing

fn job_count(home: &Home) -> usize {
    home.json(&["jobs", "list", "--limit", "1000"])
        .as_array()
        .unwrap()
        .len()
}

// S-70
#[test]
fn s70_ask_with_live_ab_off_writes_nothing_beyond_the_ask_job() {
    let home = home();
    import(&home, "Plan in numbered steps.\n", 0.8);
    let before = decide_tables(&home);
    let asked = home.json(&["ask", "planner", "What changed?"]);
    assert_eq!(asked["version"], "planner@v1");
    assert!(
        asked["answer"]
            .as_str()
            .unwrap()
            .starts_with("scripted answer "),
        "{asked}"
    );
    assert_eq!(
        asked.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["version", "job_id", "answer"]
    );
    assert_eq!(job_count(&home), 1, "exactly one delivery");
    assert_eq!(decide_tables(&home), before, "no A/B row, arms unchanged");
}

// S-69, S-71, S-72, S-73, S-74
#[test]
fn s71_s73_live_ab_needs_the_floor_and_degrades_to_the_champion() {
    let home = home();
    import(&home, "Plan in numbered steps.\n", 0.8);
    config(
        &home,
        "[skillopt]\nlive_ab_sample_rate = 1.0\nbandit_min_samples = 2\n",
    );
    // S-71: champion at 0 pulls < 2 ⇒ never intercepted.
    let asked = home.json(&["ask", "planner", "Q0", "--pick", "a"]);
    assert!(asked.get("live_ab").is_none(), "{asked}");
    assert_eq!(job_count(&home), 1);
    // S-69: manual ab is always allowed and moves the arms below the floor.
    ab(&home, &["Q1", "--pick", "a", "--seed", "1"]);
    ab(&home, &["Q2", "--pick", "a", "--seed", "2"]);
    // At the floor, rate 1.0 intercepts every ask; a pick is recorded like a manual one.
    let live = home.json(&["ask", "planner", "Q3", "--pick", "b"]);
    assert_eq!(
        live["version"], "planner@v1",
        "the champion's answer is the one returned"
    );
    assert_eq!(live["live_ab"]["intercepted"], true, "{live}");
    assert_eq!(live["live_ab"]["arms_moved"], true);
    assert_eq!(
        sql(
            &home,
            "SELECT origin FROM skillopt_ab_picks ORDER BY created_at DESC LIMIT 1"
        ),
        "live"
    );
    // S-72: champion first (its answer is the one returned), then the challenger, strictly
    // serialized in the ask's own path: the challenger's job exists only after the champion's
    // finished (both under the ask's one session lock: decide_routes.rs, decide_ask.rs).
    let jobs = home.json(&["jobs", "list", "--limit", "1000"]);
    let ask_jobs: Vec<&Value> = jobs
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["workflow"] == "ask")
        .collect();
    let champion = ask_jobs
        .iter()
        .find(|j| j["stage"] == "answer" && j["id"] == live["job_id"])
        .expect("champion job");
    let challenger = ask_jobs
        .iter()
        .find(|j| j["stage"] == "live_ab_challenger")
        .expect("challenger job");
    let (champion, challenger) = (
        home.job(champion["id"].as_str().unwrap()),
        home.job(challenger["id"].as_str().unwrap()),
    );
    assert_eq!(champion["state"], "succeeded");
    assert!(
        challenger["created_at"].as_str().unwrap() >= champion["updated_at"].as_str().unwrap(),
        "{champion:#}\n{challenger:#}"
    );
    // S-73: no pick captured ⇒ the champion answer alone, a live_ab_skipped job event, no A/B row.
    let rows = count(&home, "ranked_feedback_events");
    let skipped = home.json(&["ask", "planner", "Q4"]);
    assert_eq!(
        skipped["live_ab"]["skipped"], "no pick captured",
        "{skipped}"
    );
    assert!(
        skipped["answer"]
            .as_str()
            .unwrap()
            .starts_with("scripted answer ")
    );
    assert_eq!(count(&home, "ranked_feedback_events"), rows);
    assert_eq!(
        sql(
            &home,
            "SELECT event FROM promotion_events WHERE event = 'live_ab_skipped'"
        ),
        "live_ab_skipped"
    );
    // S-74: live A/B never promotes.
    assert_eq!(
        sql(
            &home,
            "SELECT state FROM agent_template_versions WHERE id = 'planner@v2'"
        ),
        "pending"
    );
}

// S-60
#[test]
fn s60_a_canary_serves_about_its_sample_of_asks() {
    let home = home();
    import(&home, "Plan in numbered steps.\n", 0.8);
    home.json(&["candidate", "canary", "planner@v2", "--sample", "0.5"]);
    let n = 40;
    let canary_hits = (0..n)
        .filter(|i| home.json(&["ask", "planner", &format!("Q{i}")])["version"] == "planner@v2")
        .count();
    // Binomial(40, 0.5): outside [8, 32] has probability < 1e-4.
    assert!(
        (8..=32).contains(&canary_hits),
        "{canary_hits} of {n} asks hit the canary"
    );
    assert_eq!(
        sql(
            &home,
            "SELECT state FROM agent_template_versions WHERE id = 'planner@v1'"
        ),
        "current"
    );
}

// resolutions 4: a pick retried after its worker was SIGKILLed moves the bandit once.
#[test]
fn a_pick_whose_worker_was_sigkilled_is_retried_and_moves_the_bandit_once() {
    use std::process::Stdio;
    use std::time::Duration;
    let home = home();
    import(&home, "Plan in numbered steps.\n", 0.8);
    let log = std::fs::File::create(home.path().join("worker-victim.log")).unwrap();
    // Only the victim's agent runs are slow; the retry on the waiting command's own worker is not.
    let mut victim = skillforge_tests::Reaped(
        home.cmd()
            .args(["worker", "--name", "victim"])
            .env("SKILLFORGE_SCRIPTED_DELAY_MS", "120000")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    home.wait(
        Duration::from_secs(30),
        "the victim's presence lock",
        || {
            String::from_utf8_lossy(&home.run(&["locks"]).stdout)
                .contains("worker:victim")
                .then_some(())
        },
    );
    let ab_log = std::fs::File::create(home.path().join("ab.log")).unwrap();
    let ab_child = home
        .cmd()
        .args(["--json", "ab", "planner", "Q", "--pick", "a", "--seed", "1"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(ab_log)
        .spawn()
        .unwrap();
    let champion_job = home.wait(
        Duration::from_secs(60),
        "the champion answer running on the victim",
        || {
            let jobs = home.json(&["jobs", "list"]);
            jobs.as_array()
                .unwrap()
                .iter()
                .find(|j| j["workflow"] == "ab" && j["state"] == "running")
                .map(|j| j["id"].as_str().unwrap().to_owned())
        },
    );
    victim.0.kill().unwrap();
    let _ = victim.0.wait();
    let out = ab_child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "ab after the SIGKILL:\n{}",
        home.logs()
    );
    let reply: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        reply["pick_id"],
        format!("pick-{champion_job}"),
        "the pick id is the retried job's"
    );
    let job = home.job(&champion_job);
    assert_eq!(
        job["history"].as_array().unwrap().len(),
        2,
        "one stale attempt, one retry: {job:#}"
    );
    assert_eq!(count(&home, "skillopt_ab_picks"), 1);
    assert_eq!(
        sql(
            &home,
            "SELECT group_concat(pulls) FROM skillopt_bandit_arms"
        ),
        "1,1",
        "the bandit moved once"
    );
}

// ---------------------------------------------------------------------------------------------
// event sinks: JSONL + Redis stream together, and the signed webhook as a durable job

// S-52
#[test]
fn s52_events_land_in_a_jsonl_file_and_a_redis_stream() {
    let redis = skillforge_tests::RedisServer::start();
    let home = home();
    config(
        &home,
        &format!(
            "[events]\njsonl = \"events.jsonl\"\nredis_url = \"{}\"\nredis_stream = \"sf:events\"\n",
            redis.url()
        ),
    );
    import(&home, "Plan in steps.\n", 0.8);
    assert_eq!(events(&home).len(), 1);
    let stream = redis
        .cli(&["XRANGE", "sf:events", "-", "+"])
        .expect("XRANGE");
    assert!(
        stream.contains("candidate.awaiting_promotion") && stream.contains("planner@v2"),
        "{stream}"
    );
    assert!(
        !stream.contains("Plan in steps"),
        "details are redacted: no template content"
    );
}

/// A one-request HTTP server on a free loopback port: returns the port and a handle yielding the
/// raw request (headers and body).
fn one_request_server() -> (u16, std::thread::JoinHandle<String>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut request = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = stream.read(&mut buf).unwrap();
            request.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&request).into_owned();
            if let Some(split) = text.find("\r\n\r\n") {
                let length = text[..split]
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().parse::<usize>().unwrap())
                    })
                    .unwrap_or(0);
                if request.len() >= split + 4 + length || n == 0 {
                    break;
                }
            }
        }
        stream
            .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
            .unwrap();
        String::from_utf8_lossy(&request).into_owned()
    });
    (port, handle)
}

#[test]
fn webhook_events_are_hmac_signed_and_delivered_by_a_durable_job() {
    let (port, server) = one_request_server();
    let home = home();
    config(
        &home,
        &format!(
            "[events]\nwebhook_url = \"http://127.0.0.1:{port}/hook\"\nwebhook_secret = \"s3cret\"\n"
        ),
    );
    import(&home, "Plan in steps.\n", 0.8);
    let jobs = home.json(&["jobs", "list"]);
    let job = jobs
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["workflow"] == "events")
        .expect("a webhook delivery job")
        .clone();
    assert!(
        !job["payload"].to_string().contains("s3cret"),
        "the secret never reaches the job"
    );
    let _worker = skillforge_tests::Reaped(home.spawn_worker("hooks", &[]));
    let request = server.join().unwrap();
    let id = job["id"].as_str().unwrap();
    home.wait_job(
        id,
        std::time::Duration::from_secs(30),
        "webhook job to succeed",
        |j| j["state"] == "succeeded",
    );
    let (head, body) = request.split_once("\r\n\r\n").unwrap();
    let signature = head
        .lines()
        .find_map(|l| {
            l.strip_prefix("X-Skillforge-Signature-256: ")
                .or_else(|| l.strip_prefix("x-skillforge-signature-256: "))
        })
        .expect("signature header")
        .trim()
        .to_owned();
    let mut openssl = Command::new("openssl")
        .args(["dgst", "-sha256", "-hmac", "s3cret", "-hex"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(openssl.stdin.as_mut().unwrap(), body.as_bytes()).unwrap();
    let digest = String::from_utf8_lossy(&openssl.wait_with_output().unwrap().stdout)
        .trim()
        .rsplit(' ')
        .next()
        .unwrap()
        .to_owned();
    assert_eq!(signature, format!("sha256={digest}"), "body:\n{body}");
    let event: Value = serde_json::from_str(body).unwrap();
    assert_eq!(event["event"], "candidate.awaiting_promotion");
}

// Issue 13 item 6: a judge runtime that is installed but not logged in (the real Claude Code CLI,
// installed by scripts/test) stops `ab` with exit 3 naming the runtime and the login, once.
#[test]
fn a_not_logged_in_judge_stops_ab_with_exit_3_naming_the_login() {
    let home = home();
    config(&home, "[skillopt]\nreview_runtimes = [\"claude\"]\n");
    import(&home, "Plan in numbered steps.\n", 0.8);
    let out = home
        .cmd()
        .env("CLAUDE_CONFIG_DIR", home.path().join("claude-config"))
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("ANTHROPIC_AUTH_TOKEN")
        .env_remove("CLAUDE_CODE_OAUTH_TOKEN")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_TELEMETRY", "1")
        .args(["ab", "planner", "Q0", "--judge-only", "--seed", "10"])
        .output()
        .unwrap();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("runtime claude")
            && err.contains("is not authenticated")
            && err.contains("/login"),
        "{err}"
    );
    let jobs = home.json(&["jobs", "list", "--limit", "1000"]);
    let judge: Vec<&Value> = jobs
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["stage"] == "judge")
        .collect();
    assert_eq!(judge.len(), 1, "{jobs:#}");
    assert_eq!(
        (judge[0]["state"].as_str(), judge[0]["attempts"].as_u64()),
        (Some("failed"), Some(1)),
        "not retried: {jobs:#}"
    );
}

// S-61: serve runs the regression window on its own.
#[test]
fn s61_serve_graduates_a_canary_from_harvested_outcomes() {
    let home = home();
    config(&home, "[skillopt]\nauto_trace_enabled = true\n");
    import(&home, "Plan in steps.\n", 0.8);
    home.json(&["candidate", "canary", "planner@v2", "--sample", "0.2"]);
    for pr in 1..=10 {
        harvest_outcome(&home, pr, "planner@v2", true);
        harvest_outcome(&home, 100 + pr, "planner@v1", pr % 3 != 0);
    }
    let _serve = skillforge_tests::Reaped(
        home.cmd()
            .args(["serve", "--canary-check-every-secs", "1"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(home.path().join("serve.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    home.wait(
        std::time::Duration::from_secs(30),
        "serve to graduate the canary",
        || {
            (sql(
                &home,
                "SELECT state FROM agent_template_versions WHERE id = 'planner@v2'",
            ) == "current")
                .then_some(())
        },
    );
    assert_eq!(
        sql(
            &home,
            "SELECT state FROM agent_template_versions WHERE id = 'planner@v1'"
        ),
        "superseded"
    );
}

// Issue 35 item 7: a judge that cannot run (here Claude Code with no login) is an error, never a
// dropped verdict: exit 3 naming the judge and what to do, and nothing recorded — not even the
// human's pick, which the same command then records without the judge.
#[test]
fn a_judge_that_cannot_run_is_an_error_and_records_nothing() {
    let home = home();
    import(&home, "Plan in numbered steps.\n", 0.8);
    config(&home, "[skillopt]\nreview_runtimes = [\"claude\"]\n");
    let user = tempfile::tempdir().unwrap();
    let ab = |extra: &[&str]| {
        let mut args = vec!["ab", "planner", "q", "--pick", "a", "--seed", "1"];
        args.extend_from_slice(extra);
        home.cmd()
            .env("HOME", user.path())
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("CLAUDE_CODE_OAUTH_TOKEN")
            .env_remove("ANTHROPIC_AUTH_TOKEN")
            .args(&args)
            .output()
            .unwrap()
    };
    let out = ab(&["--judge"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("the judge `claude` cannot run")
            && stderr(&out).contains("nothing was recorded"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        sql(&home, "SELECT count(*) FROM ranked_feedback_events"),
        "0",
        "nothing recorded"
    );
    let out = ab(&[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        sql(
            &home,
            "SELECT group_concat(source) FROM ranked_feedback_events"
        ),
        "skillopt-ab",
        "the human pick, without the judge"
    );
}

// A candidate made from an older version than the current one, promoted by hand: promoted (a
// person chose it), and the output says the current version's changes are not in it.
#[test]
fn promoting_a_candidate_made_from_an_older_version_says_what_it_leaves_out() {
    let home = home();
    import(&home, "Plan in numbered steps.\n", 0.8);
    // A newer version of the template added since: v3 current, the candidate v2 made from v1.
    let newer = PLANNER_TEMPLATE.replace("Do it.", "Do it, then check it.");
    let file = write(&home.path().join("in/planner-new.md"), &newer);
    let added = home.run(&[
        "template",
        "add",
        file.to_str().unwrap(),
        "--repo",
        "acme/templates",
    ]);
    assert!(added.status.success(), "{}", stderr(&added));
    let out = home.run(&["candidate", "promote", "planner@v2"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("planner@v2 was made from planner@v1, not from planner@v3"),
        "{}",
        stderr(&out)
    );
    let json = home.json(&["template", "show", "planner"]);
    assert_eq!(json["version_id"], "planner@v2", "{json:#}");
}
