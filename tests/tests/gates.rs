//! The promotion gates through the built binary (issue 34 items 10, 11; facts §7 `pace_enabled` →
//! `pace_blocked`, `gate_enabled` → `gate_blocked`): PACE, the anytime-valid betting gate over
//! paired candidate-vs-champion outcomes (A/B picks, a canary's window), and the replay gate.
//! Agent calls run the `scripted` runtime through the real `agent` runner as durable jobs on the
//! embedded queue; the store is read back with `sqlite3`, events from the JSONL sink.

use serde_json::Value;
use skillforge_tests::Home;
use skillforge_tests::decide::{ab, config, events, harvest_outcome, home, import, sql, stderr};

const MODE_B: &str = "[skillopt]\nauto_promote = true\nauto_promote_min_samples = 3\nauto_promote_min_score = 0.5\n\
    auto_promote_min_confidence = 0.9\nreview_runtimes = []\n";

/// The label `ab --seed SEED` shows the challenger under (the command's shuffle:
/// `StdRng::seed_from_u64(seed)`'s first bool says "challenger is A").
fn challenger_label(seed: u64) -> &'static str {
    use rand::{Rng, SeedableRng};
    if rand::rngs::StdRng::seed_from_u64(seed).random::<bool>() {
        "a"
    } else {
        "b"
    }
}

/// One A/B pick (`ab --json`, seed `round`) won by the challenger (`challenger_wins`) or the champion.
fn pick(home: &Home, round: u64, challenger_wins: bool) -> Value {
    let shown = challenger_label(round);
    let label = match (challenger_wins, shown) {
        (true, l) => l,
        (false, "a") => "b",
        (false, _) => "a",
    };
    let reply = ab(
        home,
        &[
            &format!("Question {round}"),
            "--pick",
            label,
            "--seed",
            &round.to_string(),
        ],
    );
    assert_eq!(
        reply["challenger_label"], shown,
        "the shuffle of seed {round}: {reply}"
    );
    assert_eq!(
        reply["human_winner"],
        if challenger_wins {
            "challenger"
        } else {
            "champion"
        },
        "{reply}"
    );
    reply
}

fn state(home: &Home, version: &str) -> String {
    sql(
        home,
        &format!("SELECT state FROM agent_template_versions WHERE id = '{version}'"),
    )
}

// Issue 34 item 10, facts §7: with `pace_enabled`, a Mode B pick that passes every guardrail is
// `pace_blocked` until PACE commits over the A/B picks (wealth ×1.5 per challenger win, commit at
// 20: eight straight wins), and the wealth, pairs and verdict are in the events, `candidate show`
// and `ab`. On today's code `pace_enabled` is an unknown key and the candidate promotes at three picks.
#[test]
fn pace_blocks_a_mode_b_promotion_until_the_picks_commit() {
    let home = home();
    config(
        &home,
        &format!("{MODE_B}pace_enabled = true\n[events]\njsonl = \"events.jsonl\"\n"),
    );
    import(&home, "Plan in numbered steps.\n", 0.8);
    // Three challenger wins pass every guardrail (P ≈ 0.98 ≥ 0.9 on 3 pulls); PACE has 1.5^3.
    for round in 1..=3 {
        let reply = pick(&home, round, true);
        assert_eq!(
            reply["pace"]["wins"], round,
            "ab reports PACE beside the posterior: {reply}"
        );
    }
    let decided = skillforge_tests::decide_json(&home, &["candidate", "decide", "planner@v2"]);
    assert_eq!(decided["decision"]["step"], 11, "{decided}");
    let reason = decided["reason"].as_str().unwrap();
    assert!(
        reason.contains("pace_blocked") && reason.contains("wealth 3.38 of 20"),
        "{reason}"
    );
    assert_eq!(state(&home, "planner@v2"), "pending");
    let shown = home.json(&["candidate", "show", "planner@v2"]);
    assert_eq!(shown["pace"]["verdict"], "continue", "{shown}");
    assert_eq!(shown["pace"]["pairs"], 3);
    assert!(
        (shown["pace"]["wealth"].as_f64().unwrap() - 3.375).abs() < 1e-9,
        "{shown}"
    );
    let text = home.run(&["candidate", "show", "planner@v2"]);
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    assert!(
        text.contains(
            "pace        PACE continues: wealth 3.38 of 20 after 3 of 200 discordant pairs"
        ),
        "{text}"
    );
    // A champion win halves the wealth (1.69); four more challenger wins reach 8.54, still blocked.
    pick(&home, 4, false);
    for round in 5..=8 {
        pick(&home, round, true);
    }
    let decided = skillforge_tests::decide_json(&home, &["candidate", "decide", "planner@v2"]);
    assert_eq!(decided["decision"]["step"], 11, "{decided}");
    assert!(
        decided["reason"]
            .as_str()
            .unwrap()
            .contains("wealth 8.54 of 20"),
        "{decided}"
    );
    // Two more: 19.22 < 20 — then the eleventh pick commits (28.83).
    for round in 9..=10 {
        pick(&home, round, true);
    }
    assert_eq!(
        skillforge_tests::decide_json(&home, &["candidate", "decide", "planner@v2"])["decision"]["step"],
        11
    );
    assert_eq!(state(&home, "planner@v2"), "pending");
    let last = pick(&home, 11, true);
    assert_eq!(last["pace"]["verdict"], "commit", "{last}");
    let wins = 10;
    let decided = skillforge_tests::decide_json(&home, &["candidate", "decide", "planner@v2"]);
    assert_eq!(decided["decision"]["decision"], "promote", "{decided}");
    assert_eq!(state(&home, "planner@v2"), "current");
    let all = events(&home);
    let blocked: Vec<&Value> = all
        .iter()
        .filter(|e| e["detail"]["guardrail"] == "pace_blocked")
        .collect();
    assert!(
        !blocked.is_empty(),
        "the block is announced with its guardrail: {all:?}"
    );
    assert_eq!(blocked[0]["event"], "candidate.awaiting_promotion");
    assert_eq!(
        blocked[0]["detail"]["pace"]["verdict"], "continue",
        "{:?}",
        blocked[0]
    );
    let promoted = all
        .iter()
        .find(|e| e["event"] == "candidate.auto_promoted")
        .expect("auto_promoted");
    assert_eq!(
        promoted["detail"]["pace"]["verdict"], "commit",
        "{promoted}"
    );
    assert_eq!(promoted["detail"]["pace"]["wins"], wins);
    assert!(
        promoted["detail"]["pace"]["wealth"].as_f64().unwrap() >= 20.0,
        "{promoted}"
    );
}

// Issue 34 item 10, issue 37 item 3: with `pace_enabled`, a canary window that holds (here on too
// few outcomes for the window's own rule) is decided by PACE over its paired outcomes — the i-th
// canary outcome against the i-th champion outcome after the canary started: a tie (both merged)
// bets nothing, eight canary wins commit and graduate it. On today's code the window holds.
#[test]
fn pace_graduates_a_holding_canary_window_on_its_paired_outcomes() {
    let home = home();
    config(
        &home,
        "[skillopt]\nauto_trace_enabled = true\npace_enabled = true\n[events]\njsonl = \"events.jsonl\"\n",
    );
    import(&home, "Plan in steps.\n", 0.8);
    let out = home.run(&["candidate", "canary", "planner@v2", "--sample", "0.2"]);
    assert!(out.status.success(), "{}", stderr(&out));
    harvest_outcome(&home, 1, "planner@v2", true);
    harvest_outcome(&home, 101, "planner@v1", true);
    for pr in 2..=8 {
        harvest_outcome(&home, pr, "planner@v2", true);
        harvest_outcome(&home, 100 + pr, "planner@v1", false);
    }
    // One tie and seven wins: wealth 1.5^7 = 17.09 < 20, PACE continues, the window holds.
    let held = skillforge_tests::canary_check_json(&home, &["candidate", "canary-check"]);
    assert_eq!(held[0]["window"]["decision"], "hold", "{held}");
    assert_eq!(held[0]["pace"]["verdict"], "continue", "{held}");
    assert_eq!(
        (
            held[0]["pace"]["wins"].as_u64(),
            held[0]["pace"]["ties"].as_u64()
        ),
        (Some(7), Some(1)),
        "{held}"
    );
    assert_eq!(state(&home, "planner@v2"), "canary");
    harvest_outcome(&home, 9, "planner@v2", true);
    harvest_outcome(&home, 109, "planner@v1", false);
    let out = home.run(&["candidate", "canary-check"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        text.contains("graduate")
            && text.contains("PACE commits: wealth 25.63 reached 20 after 8 discordant pairs"),
        "{text}"
    );
    assert_eq!(state(&home, "planner@v2"), "current");
    let graduated = events(&home)
        .into_iter()
        .find(|e| e["event"] == "candidate.canary_graduated")
        .expect("graduated event");
    assert_eq!(
        graduated["detail"]["pace"]["verdict"], "commit",
        "{graduated}"
    );
    assert_eq!(
        graduated["detail"]["canary_outcomes"]["total"], 9,
        "{graduated}"
    );
}

/// Everything a PACE-off run shows: the store's decision-bearing rows, `candidate show --json`,
/// `ab --json` (minus its answers' ids), `canary-check --json` and the events (minus times).
fn pace_off_run(cfg: &str) -> Vec<String> {
    let home = home();
    config(
        &home,
        &format!("{MODE_B}auto_trace_enabled = true\n{cfg}[events]\njsonl = \"events.jsonl\"\n"),
    );
    import(&home, "Plan in numbered steps.\n", 0.8);
    let mut replies = Vec::new();
    for round in 1..=4 {
        let mut reply = pick(&home, round, round != 2);
        for volatile in ["pick_id", "confidence", "summary"] {
            reply.as_object_mut().unwrap().remove(volatile);
        }
        replies.push(reply.to_string());
    }
    let decided = skillforge_tests::decide_json(&home, &["candidate", "decide", "planner@v2"]);
    let mut shown = home.json(&["candidate", "show", "planner@v2"]);
    for volatile in ["created_at", "decided_at", "diff", "content", "source_path"] {
        shown.as_object_mut().unwrap().remove(volatile);
    }
    let store = sql(
        &home,
        "SELECT group_concat(id || ':' || state, ',') FROM agent_template_versions",
    );
    let picks = sql(
        &home,
        "SELECT group_concat(winner, ',') FROM skillopt_ab_picks",
    );
    let events: Vec<String> = events(&home)
        .into_iter()
        .map(|mut e| {
            e.as_object_mut().unwrap().remove("created_at");
            e.to_string()
        })
        .collect();
    let mut all = replies;
    all.extend([decided.to_string(), shown.to_string(), store, picks]);
    all.extend(events);
    all
}

// Issue 34 item 10: off by default and byte-identical when off — `pace_enabled = false` and no
// key at all give the same store rows, replies and events, and none of them mentions PACE.
#[test]
fn pace_off_is_byte_identical_to_no_key() {
    let absent = pace_off_run("");
    let off = pace_off_run("pace_enabled = false\n");
    assert_eq!(absent.len(), off.len());
    for (a, b) in absent.iter().zip(&off) {
        assert_eq!(a, b);
        assert!(
            !a.contains("\"pace\"") && !a.contains("PACE") && !a.contains("pace_blocked"),
            "PACE leaked into an off run: {a}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The replay gate

/// A replay corpus whose `replay_command` passes an item when the side's template
/// (`$SKILLFORGE_REPLAY_TEMPLATE`) contains the item's expected text (`grep` prints the line, exit 0; no line, exit 1).
fn corpus(home: &Home, name: &str, command: &str) -> String {
    let corpus = serde_json::json!({
        "kind": "skillforge-replay-corpus",
        "version": 3,
        "replay_command": command,
        "items": [
            {"id": "steps", "prompt": "Plan the parser change", "expected": "numbered"},
            {"id": "tests", "prompt": "Plan the release", "expected": "tests"},
            {"id": "title", "prompt": "Plan anything", "expected": "# Plan"},
        ],
    });
    skillforge_tests::write(&home.path().join(name), &corpus.to_string())
        .display()
        .to_string()
}

const GREP: &str =
    "printf %s \"$SKILLFORGE_REPLAY_TEMPLATE\" | grep -F -- \"$SKILLFORGE_REPLAY_EXPECTED\"";

// Issue 34 item 11, facts §7 `gate_enabled` → `gate_blocked`: on a Redis queue with a worker, a
// candidate that passes every guardrail is `gate_blocked` until `candidate gate` replays the corpus
// for both sides as durable jobs and accepts it (corpus mean 1.000 against 0.333, every item
// scorable); the per-item deltas are kept and shown; then the same decision promotes it and its
// event names the gate run. On today's code `gate_enabled` is an unknown key.
#[test]
fn replay_gate_blocks_until_a_corpus_replay_on_a_worker_accepts_the_candidate() {
    let redis = skillforge_tests::RedisServer::start();
    let home = skillforge_tests::decide::home_on(Home::redis(&redis.url()));
    config(
        &home,
        "[skillopt]\nauto_trace_enabled = true\nauto_promote = true\nauto_promote_min_samples = 2\nauto_promote_min_score = 0.5\n\
         gate_enabled = true\n[events]\njsonl = \"events.jsonl\"\n",
    );
    import(
        &home,
        "# Plan\nWrite numbered steps.\nName the tests to run.\n",
        0.8,
    );
    for pr in 1..=2 {
        harvest_outcome(&home, pr, "planner@v2", true);
    }
    let decided = skillforge_tests::decide_json(&home, &["candidate", "decide", "planner@v2"]);
    assert_eq!(decided["decision"]["step"], 12, "{decided}");
    assert!(
        decided["reason"].as_str().unwrap().contains("gate_blocked"),
        "{decided}"
    );
    assert_eq!(state(&home, "planner@v2"), "pending");

    let _worker = skillforge_tests::Reaped(home.spawn_worker("replay", &[]));
    let file = corpus(&home, "corpus.json", GREP);
    let out = home
        .cmd()
        .args([
            "--json",
            "candidate",
            "gate",
            "planner@v2",
            "--corpus",
            &file,
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}\n{}",
        stderr(&out),
        home.logs()
    );
    let run: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(run["accepted"], true, "{run}");
    assert_eq!(
        (
            run["corpus_version"].as_i64(),
            run["corpus_items"].as_i64(),
            run["attempts"].as_i64()
        ),
        (Some(3), Some(3), Some(1))
    );
    assert!(
        (run["champion_mean"].as_f64().unwrap() - 1.0 / 3.0).abs() < 1e-9,
        "{run}"
    );
    assert_eq!(run["candidate_mean"], 1.0);
    let deltas: Vec<(String, Option<f64>)> = run["deltas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["id"].as_str().unwrap().to_owned(), d["delta"].as_f64()))
        .collect();
    assert_eq!(
        deltas,
        [
            ("steps".to_owned(), Some(1.0)),
            ("tests".to_owned(), Some(1.0)),
            ("title".to_owned(), Some(0.0))
        ]
    );
    // Six replay jobs (three items, two sides) ran on the queue.
    let jobs = home.json(&["jobs", "list"]);
    let replays = jobs
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["workflow"] == "replay")
        .count();
    assert_eq!(replays, 6, "{jobs:#}");
    // Kept for audit: `candidate show` has the run and its per-item deltas, in text and JSON.
    let shown = home.json(&["candidate", "show", "planner@v2"]);
    assert_eq!(
        shown["gate_runs"][0]["deltas"].as_array().unwrap().len(),
        3,
        "{shown}"
    );
    let text = String::from_utf8_lossy(&home.run(&["candidate", "show", "planner@v2"]).stdout)
        .into_owned();
    assert!(
        text.contains("gate        accepted against planner@v1 (corpus version 3, attempt 1)"),
        "{text}"
    );
    assert!(text.contains("steps            delta +1"), "{text}");

    let decided = skillforge_tests::decide_json(&home, &["candidate", "decide", "planner@v2"]);
    assert_eq!(decided["decision"]["decision"], "promote", "{decided}");
    assert_eq!(state(&home, "planner@v2"), "current");
    let promoted = events(&home)
        .into_iter()
        .find(|e| e["event"] == "candidate.auto_promoted")
        .expect("auto_promoted");
    assert_eq!(promoted["detail"]["gate_run"], run["id"], "{promoted}");
}

// Issue 34 item 11: the gate accepts only a strict improvement with every item scorable on both
// sides — an equal mean is not accepted (exit 1), an item that could not run (exit 127) leaves
// the run unaccepted whatever the means, and a bad corpus is refused (exit 2) with nothing recorded.
#[test]
fn replay_gate_refuses_an_equal_mean_an_unscorable_item_and_a_bad_corpus() {
    let home = home();
    import(&home, "# Plan\nDo it quickly.\n", 0.8);
    let file = corpus(&home, "corpus.json", GREP);
    let out = home
        .cmd()
        .args([
            "--json",
            "candidate",
            "gate",
            "planner@v2",
            "--corpus",
            &file,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let run: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (run["accepted"].as_bool(), run["candidate_mean"].as_f64()),
        (Some(false), run["champion_mean"].as_f64())
    );
    assert!(
        run["reason"].as_str().unwrap().contains("is not above"),
        "{run}"
    );
    // Issue 34 item 11: a hand-imported candidate has no optimizer here to retry with
    assert_eq!(run["retry"]["retried"], false, "{run}");
    assert!(
        run["retry"]["why"]
            .as_str()
            .unwrap()
            .contains("planner@v2 was not made by the built-in optimizer"),
        "{run}"
    );

    import(
        &home,
        "# Plan\nWrite numbered steps.\nName the tests to run.\n",
        0.8,
    );
    let flaky = corpus(
        &home,
        "flaky.json",
        &format!(
            "if [ \"$SKILLFORGE_REPLAY_SIDE\" = candidate ] && [ \"$SKILLFORGE_REPLAY_ITEM\" = tests ]; then exit 127; fi; {GREP}"
        ),
    );
    let out = home
        .cmd()
        .args([
            "--json",
            "candidate",
            "gate",
            "planner@v3",
            "--corpus",
            &flaky,
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}: {}",
        out.status,
        stderr(&out)
    );
    let run: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(run["accepted"], false, "{run}");
    assert_eq!(
        run["candidate_mean"],
        Value::Null,
        "no mean over an unscorable item, never a made-up one: {run}"
    );
    assert!(
        run["reason"].as_str().unwrap().contains("tests (candidate"),
        "{run}"
    );
    assert_eq!(
        run["deltas"][1]["candidate"]["status"], "unscorable",
        "{run}"
    );

    let before = sql(&home, "SELECT COUNT(*) FROM skillopt_gate_runs");
    let bad = skillforge_tests::write(
        &home.path().join("bad.json"),
        r#"{"kind": "skillforge-replay-corpus", "version": 1, "items": [{"id": "a", "prompt": "p"}]}"#,
    );
    let out = home.run(&[
        "candidate",
        "gate",
        "planner@v3",
        "--corpus",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("bad.json")
            && stderr(&out).contains("items[0] (`a`): `expected` is empty"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        sql(&home, "SELECT COUNT(*) FROM skillopt_gate_runs"),
        before,
        "store unchanged"
    );
}

// Issue 34 item 11: off by default — with `gate_enabled` absent, a recorded gate run changes no
// decision and the guardrails' events carry no gate field.
#[test]
fn replay_gate_off_changes_no_decision() {
    let home = home();
    config(
        &home,
        "[skillopt]\nauto_trace_enabled = true\nauto_promote = true\nauto_promote_min_samples = 2\nauto_promote_min_score = 0.5\n[events]\njsonl = \"events.jsonl\"\n",
    );
    import(&home, "# Plan\nWrite numbered steps.\n", 0.8);
    for pr in 1..=2 {
        harvest_outcome(&home, pr, "planner@v2", true);
    }
    let decided = skillforge_tests::decide_json(&home, &["candidate", "decide", "planner@v2"]);
    assert_eq!(decided["decision"]["decision"], "promote", "{decided}");
    assert!(
        events(&home)
            .iter()
            .all(|e| e["detail"].get("gate_run").is_none())
    );
}
