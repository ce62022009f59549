//! The closed loop and what it says (issue 37 items 7 and 11; seed: SkillOpt, "Promotion policy
//! + notifications" › Auto-promote; S-51, S-52, S-56, S-60, S-61): with `auto_promote` on, a
//! running `serve` re-runs the guardrails of every pending candidate when new evidence for it
//! arrives (`harvest outcome` from another process, a signed webhook to its own `POST /events`),
//! once per new evidence, and starts the canary with no `candidate decide`; events say when the
//! blocking guardrail changes, what a person decided, and the counts each decision rests on.
//! Real binary, embedded queue, the store read back with `sqlite3`, events from the JSONL sink.

use std::process::{Child, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use skillforge_tests::decide::{config, events, harvest_outcome, home, home_on, import, sql};
use skillforge_tests::run_code;
use skillforge_tests::webhook::{post, sign, wait_listening};
use skillforge_tests::{Home, Reaped, RedisServer, free_port};

const SECRET: &str = "webhook-s3cret";
const DECIDED: &str = "guardrails re-run on new evidence";

/// `serve --listen` with the secret, re-running the guardrails every 50 ms; its log in the home.
fn spawn_serve(home: &Home, port: u16) -> Child {
    spawn_serve_every(home, port, "50")
}

/// [`spawn_serve`] re-running the guardrails every `every_ms` milliseconds.
fn spawn_serve_every(home: &Home, port: u16, every_ms: &str) -> Child {
    let log = std::fs::File::create(home.path().join("serve.log")).unwrap();
    let mut cmd = home.cmd();
    cmd.args([
        "serve",
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--decide-every-ms",
        every_ms,
    ])
    .env("SKILLFORGE_WEBHOOK_SECRET", SECRET)
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(log);
    cmd.spawn().unwrap()
}

/// `serve`'s decision lines for `version`, oldest first.
fn decisions(home: &Home, version: &str) -> Vec<String> {
    std::fs::read_to_string(home.path().join("serve.log"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(DECIDED) && l.contains(version))
        .map(str::to_owned)
        .collect()
}

/// Waits (polling, 30 s deadline) until `serve` has decided `version` `n` times; returns the lines.
fn wait_decisions(home: &Home, version: &str, n: usize) -> Vec<String> {
    home.wait(
        Duration::from_secs(30),
        &format!("{n} guardrail decision(s) of {version} by serve"),
        || {
            let lines = decisions(home, version);
            (lines.len() >= n).then_some(lines)
        },
    )
}

// S-51, S-52, S-56, S-60 (issue 37 item 7)
#[test]
fn serve_reruns_the_guardrails_once_per_new_evidence_and_starts_the_canary() {
    serve_closes_the_loop(&home());
}

// The same on Redis, with serve's canary checks and ingestion on the shared queue.
#[test]
fn on_redis_serve_reruns_the_guardrails_once_per_new_evidence() {
    let redis = RedisServer::start();
    serve_closes_the_loop(&home_on(Home::redis(&redis.url())));
}

/// A pending candidate, `serve` running, one outcome by `harvest outcome` and one by a signed
/// webhook: three decisions by `serve` (first sight, each outcome) and the canary, no `decide`.
fn serve_closes_the_loop(home: &Home) {
    config(
        home,
        "[skillopt]\nauto_trace_enabled = true\nauto_promote = true\nauto_promote_min_samples = 2\nauto_promote_min_score = 0.5\n\
         auto_promote_canary = true\nauto_promote_canary_sample = 0.25\n[events]\njsonl = \"events.jsonl\"\n",
    );
    import(home, "Plan in steps.\n", 0.8);
    assert_eq!(
        sql(
            home,
            "SELECT state FROM agent_template_versions WHERE id = 'planner@v2'"
        ),
        "pending",
        "S-51"
    );
    let port = free_port();
    let _serve = Reaped(spawn_serve(home, port));
    wait_listening(home, port);
    // First sight: decided once, on no samples (S-56), and left pending.
    let first = wait_decisions(home, "planner@v2", 1);
    assert!(
        first[0].contains("no auto-trace feedback samples"),
        "{first:?}"
    );
    // An outcome harvested by another process is new evidence: one more decision, still short.
    harvest_outcome(home, 1, "planner@v2", true);
    let second = wait_decisions(home, "planner@v2", 2);
    assert!(
        second[1].contains("1 auto-trace samples < auto_promote_min_samples 2"),
        "{second:?}"
    );
    assert_eq!(
        sql(
            home,
            "SELECT state FROM agent_template_versions WHERE id = 'planner@v2'"
        ),
        "pending"
    );
    // A signed CI webhook to serve's own endpoint: the floor is reached and the canary starts.
    home.json(&[
        "harvest",
        "attribute",
        "--repo",
        "acme/app",
        "--pr",
        "2",
        "--template",
        "planner@v2",
        "--resolved-commit",
        "c0ffee",
    ]);
    let body =
        json!({"repo": "acme/app", "pr": 2, "outcome": "merged", "ci": "external"}).to_string();
    let (code, reply) = post(
        port,
        "skillforge_outcome",
        &body,
        Some(&sign(SECRET, &body)),
    );
    assert_eq!(
        (code, reply["rows"].as_array().map(Vec::len)),
        (200, Some(1)),
        "{reply}"
    );
    home.wait(
        Duration::from_secs(30),
        "planner@v2 to become the canary",
        || {
            (sql(
                home,
                "SELECT state FROM agent_template_versions WHERE id = 'planner@v2'",
            ) == "canary")
                .then_some(())
        },
    );
    assert_eq!(
        sql(
            home,
            "SELECT canary_sample FROM agent_template_versions WHERE id = 'planner@v2'"
        ),
        "0.25",
        "S-60"
    );
    assert_eq!(
        sql(
            home,
            "SELECT state FROM agent_template_versions WHERE id = 'planner@v1'"
        ),
        "current",
        "the champion stays current"
    );
    // Exactly one decision per new evidence, though serve checked every 50 ms all along.
    wait_decisions(home, "planner@v2", 3);
    let all = decisions(home, "planner@v2");
    assert_eq!(all.len(), 3, "{all:?}");
    assert!(
        all[2].contains("guardrails pass: canary at 0.25"),
        "{all:?}"
    );
    let names: Vec<String> = events(home)
        .iter()
        .map(|e| e["event"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        names,
        ["candidate.awaiting_promotion", "candidate.canary_started"],
        "S-52: every event once"
    );
}

// S-60 (issue 37 item 7): a webhook that writes feedback wakes the guardrails at once; the timer
// (ten minutes here) is only the fallback for evidence written by other processes.
#[test]
fn a_webhook_outcome_reruns_the_guardrails_without_waiting_for_the_timer() {
    let home = home();
    config(
        &home,
        "[skillopt]\nauto_trace_enabled = true\nauto_promote = true\nauto_promote_min_samples = 2\nauto_promote_min_score = 0.5\n\
         auto_promote_canary = true\nauto_promote_canary_sample = 0.25\n",
    );
    import(&home, "Plan in steps.\n", 0.8);
    let port = free_port();
    let _serve = Reaped(spawn_serve_every(&home, port, "600000"));
    wait_listening(&home, port);
    wait_decisions(&home, "planner@v2", 1);
    for pr in [1, 2] {
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
        let body = json!({"repo": "acme/app", "pr": pr, "outcome": "merged", "ci": "external"})
            .to_string();
        let (code, reply) = post(
            port,
            "skillforge_outcome",
            &body,
            Some(&sign(SECRET, &body)),
        );
        assert_eq!(code, 200, "{reply}");
        wait_decisions(&home, "planner@v2", 1 + pr);
    }
    assert_eq!(
        sql(
            &home,
            "SELECT state FROM agent_template_versions WHERE id = 'planner@v2'"
        ),
        "canary"
    );
}

// S-60 (issue 37 items 4 and 7): a pass blocked by the template's running canary is decided again
// by `serve` when that canary ends, with no new outcome for the blocked candidate.
#[test]
fn a_pass_blocked_by_a_running_canary_is_decided_again_when_it_ends() {
    let home = home();
    config(
        &home,
        "[skillopt]\nauto_trace_enabled = true\nauto_promote = true\nauto_promote_min_samples = 1\nauto_promote_min_score = 0.5\n\
         auto_promote_canary = true\nauto_promote_canary_sample = 0.25\n",
    );
    import(&home, "Plan in steps.\n", 0.8);
    home.json(&["candidate", "canary", "planner@v2", "--sample", "0.5"]);
    import(&home, "Plan in small steps.\n", 0.8);
    harvest_outcome(&home, 1, "planner@v3", true);
    let port = free_port();
    let _serve = Reaped(spawn_serve(&home, port));
    wait_listening(&home, port);
    let blocked = wait_decisions(&home, "planner@v3", 1);
    assert!(
        blocked[0].contains("planner@v2 is the running canary"),
        "{blocked:?}"
    );
    assert_eq!(
        sql(
            &home,
            "SELECT state FROM agent_template_versions WHERE id = 'planner@v3'"
        ),
        "pending"
    );
    home.json(&[
        "candidate",
        "reject",
        "planner@v2",
        "--reason",
        "worse on review",
    ]);
    let again = wait_decisions(&home, "planner@v3", 2);
    assert!(
        again[1].contains("guardrails pass: canary at 0.25"),
        "{again:?}"
    );
    assert_eq!(
        sql(
            &home,
            "SELECT state FROM agent_template_versions WHERE id = 'planner@v3'"
        ),
        "canary"
    );
}

/// The events of the sink named `name`, oldest first.
fn named(home: &Home, name: &str) -> Vec<Value> {
    events(home)
        .into_iter()
        .filter(|e| e["event"] == name)
        .collect()
}

// S-52 (issue 37 item 11): `candidate.awaiting_promotion` again when the guardrail that blocks the
// candidate changes, not once per candidate forever; the same guardrail again says nothing. Each
// carries the counts it was decided on and the guardrail by its config key, never a step number.
#[test]
fn s52_awaiting_promotion_again_when_the_blocking_guardrail_changes() {
    let home = home();
    config(
        &home,
        "[skillopt]\nauto_trace_enabled = true\nauto_promote = true\nauto_promote_min_samples = 2\nauto_promote_min_score = 0.9\n\
         [events]\njsonl = \"events.jsonl\"\n",
    );
    import(&home, "Plan in steps.\n", 0.8);
    skillforge_tests::decide_json(&home, &["candidate", "decide", "planner@v2"]);
    harvest_outcome(&home, 1, "planner@v2", true);
    skillforge_tests::decide_json(&home, &["candidate", "decide", "planner@v2"]);
    let awaiting = named(&home, "candidate.awaiting_promotion");
    assert_eq!(
        awaiting.len(),
        1,
        "one more sample, the same guardrail: nothing new to say: {awaiting:?}"
    );
    assert_eq!(
        awaiting[0]["detail"]["guardrail"], "auto_promote_min_samples",
        "{awaiting:?}"
    );
    harvest_outcome(&home, 2, "planner@v2", false);
    // Left for a person: not decided yet (exit 4).
    let (out, _) = run_code(&home, &["candidate", "decide", "planner@v2"], 4);
    assert!(
        out.contains("score 0.8 < auto_promote_min_score 0.9"),
        "{out}"
    );
    assert!(
        !out.contains("step"),
        "no step numbers in human output: {out}"
    );
    skillforge_tests::decide_json(&home, &["candidate", "decide", "planner@v2"]);
    let awaiting = named(&home, "candidate.awaiting_promotion");
    assert_eq!(
        awaiting.len(),
        2,
        "the blocking guardrail moved from the sample floor to the score floor: {awaiting:?}"
    );
    let detail = &awaiting[1]["detail"];
    assert_eq!(detail["guardrail"], "auto_promote_min_score", "{detail}");
    assert_eq!(
        (
            detail["samples"].as_u64(),
            detail["real_ci_positives"].as_u64(),
            detail["score"].as_f64()
        ),
        (Some(2), Some(1), Some(0.8)),
        "{detail}"
    );
    assert_eq!(
        sql(
            &home,
            "SELECT state FROM agent_template_versions WHERE id = 'planner@v2'"
        ),
        "pending"
    );
}

// Issue 37 item 11: a decision made by hand is an event too (with `[events]` configured).
#[test]
fn promote_and_reject_by_hand_send_their_events() {
    let home = home();
    config(&home, "[events]\njsonl = \"events.jsonl\"\n");
    import(&home, "Plan in steps.\n", 0.8);
    home.json(&[
        "candidate",
        "reject",
        "planner@v2",
        "--reason",
        "drops the risk section",
    ]);
    import(&home, "Plan in small steps.\n", 0.7);
    home.json(&[
        "candidate",
        "promote",
        "planner@v3",
        "--reason",
        "reviewed by the team",
    ]);
    let rejected = named(&home, "candidate.rejected");
    assert_eq!(rejected.len(), 1, "{rejected:?}");
    assert_eq!(
        (
            rejected[0]["job_id"].as_str(),
            rejected[0]["root_id"].as_str()
        ),
        (Some("planner@v2"), Some("planner"))
    );
    assert_eq!(rejected[0]["detail"]["reason"], "drops the risk section");
    let promoted = named(&home, "candidate.promoted");
    assert_eq!(promoted.len(), 1, "{promoted:?}");
    assert_eq!(
        (
            promoted[0]["job_id"].as_str(),
            promoted[0]["detail"]["reason"].as_str()
        ),
        (Some("planner@v3"), Some("reviewed by the team"))
    );
    assert_eq!(promoted[0]["detail"]["score"].as_f64(), Some(0.7));
    assert!(
        named(&home, "candidate.auto_promoted").is_empty(),
        "a person promoted it"
    );
}

// S-61 (issue 37 item 11): a canary started by hand that graduates on its window is
// `candidate.canary_graduated`, not `candidate.auto_promoted`; the event carries the outcomes and
// rates of both sides it graduated on.
#[test]
fn s61_a_hand_started_canary_graduates_without_an_auto_promoted_event() {
    let home = home();
    config(
        &home,
        "[skillopt]\nauto_trace_enabled = true\n[events]\njsonl = \"events.jsonl\"\n",
    );
    import(&home, "Plan in steps.\n", 0.8);
    home.json(&["candidate", "canary", "planner@v2", "--sample", "0.5"]);
    for pr in 1..=10 {
        harvest_outcome(&home, pr, "planner@v2", true);
        harvest_outcome(&home, 100 + pr, "planner@v1", pr % 2 == 0);
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
    assert_eq!(
        sql(
            &home,
            "SELECT state FROM agent_template_versions WHERE id = 'planner@v2'"
        ),
        "current"
    );
    assert!(
        named(&home, "candidate.auto_promoted").is_empty(),
        "a person started this canary: {:?}",
        events(&home)
    );
    let graduated = named(&home, "candidate.canary_graduated");
    assert_eq!(graduated.len(), 1, "{:?}", events(&home));
    let detail = &graduated[0]["detail"];
    assert_eq!(
        detail["canary_outcomes"],
        json!({"positives": 10, "total": 10, "rate": 1.0}),
        "{detail}"
    );
    assert_eq!(
        detail["champion_outcomes"],
        json!({"positives": 5, "total": 10, "rate": 0.5}),
        "{detail}"
    );
    skillforge_tests::canary_check_json(&home, &["candidate", "canary-check"]);
    assert_eq!(
        named(&home, "candidate.canary_graduated").len(),
        1,
        "sent once"
    );
}
