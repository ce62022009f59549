//! A canary's graduate / roll-back decision jobs through the built binary (issue 15; seed:
//! SkillOpt, "Promotion policy + notifications" › auto_promote_canary (#484); S-61, S-62;
//! resolutions 7, 8): a decision job that fails on its worker applies nothing and is decided again
//! by the next check; one that arrives after its canary was decided by hand or its champion was
//! replaced changes nothing; and checks that see more evidence for the same outcome, without
//! waiting (a cron on a shared queue), find the job already submitted instead of making another.
//!
//! The jobs run on real `skillforge worker` processes; their results are applied by the
//! promotion family's handler inside `skillforge serve`'s ingestion (canary checks off), so each
//! step is observed on its own.

use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::{Value, json};
use skillforge_tests::decide::{config, events, harvest_outcome, home, home_on, import, sql};
use skillforge_tests::{Home, Reaped, RedisServer, signal, wait_exit};

const WAIT: Duration = Duration::from_secs(60);

fn state(home: &Home, version: &str) -> String {
    sql(
        home,
        &format!("SELECT state FROM agent_template_versions WHERE id = '{version}'"),
    )
}

/// The graduate / roll-back jobs in the queue, oldest first.
fn decision_jobs(home: &Home) -> Vec<Value> {
    let jobs = home.json(&["jobs", "list", "--limit", "1000"]);
    let mut found: Vec<Value> = jobs
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["workflow"] == "events" && j["stage"] != "webhook")
        .cloned()
        .collect();
    found.sort_by_key(|j| j["created_at"].as_str().unwrap_or_default().to_owned());
    found
}

/// `planner@v2` a canary at sample 0.5 whose window says graduate: 10 merged outcomes against
/// the champion's 5 of 10.
fn graduating_canary() -> Home {
    graduating_canary_on(home())
}

/// [`graduating_canary`] on a prepared home.
fn graduating_canary_on(home: Home) -> Home {
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
    home
}

/// `candidate canary-check --no-wait`: the one canary's line.
fn check_without_waiting(home: &Home) -> Value {
    let report =
        skillforge_tests::canary_check_json(home, &["candidate", "canary-check", "--no-wait"]);
    assert_eq!(report.as_array().map(Vec::len), Some(1), "{report}");
    report[0].clone()
}

/// Runs a `skillforge worker` (with `path` as its PATH when given) until job `id` is in a state
/// `done` accepts, then stops it (SIGTERM).
fn run_on_a_worker(
    home: &Home,
    id: &str,
    path: Option<&std::path::Path>,
    done: impl Fn(&str) -> bool,
) -> Value {
    let mut cmd = home.cmd();
    cmd.args(["worker", "--name", "decisions"])
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    cmd.stderr(std::fs::File::create(home.path().join("worker-decisions.log")).unwrap());
    if let Some(path) = path {
        cmd.env("PATH", path);
    }
    let mut worker = Reaped(cmd.spawn().expect("spawn the worker"));
    let job = home.wait_job(id, WAIT, "the decision job to finish", |j| {
        done(j["state"].as_str().unwrap_or_default())
    });
    signal(&worker.0, Signal::SIGTERM);
    wait_exit(&mut worker.0, Duration::from_secs(30));
    job
}

/// Runs `skillforge serve` (no canary checks) until job `id`'s result is applied, then stops it.
fn ingest(home: &Home, id: &str) {
    let log = std::fs::File::create(home.path().join("serve-ingest.log")).unwrap();
    let mut serve = Reaped(
        home.cmd()
            .args(["serve", "--canary-check-every-secs", "0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    home.wait_job(id, WAIT, "serve to apply the decision job's result", |j| {
        j["applied"].as_array().is_some_and(|a| !a.is_empty())
    });
    signal(&serve.0, Signal::SIGTERM);
    wait_exit(&mut serve.0, Duration::from_secs(30));
}

/// Graduation events of [`graduating_canary`]'s canary, which a person started: it graduates as
/// `candidate.canary_graduated`, never `candidate.auto_promoted` (issue 37 item 11).
fn graduated_events(home: &Home) -> usize {
    let sent = events(home);
    assert!(
        sent.iter().all(|e| e["event"] != "candidate.auto_promoted"),
        "a hand-started canary is not auto-promoted: {sent:?}"
    );
    sent.iter()
        .filter(|e| e["event"] == "candidate.canary_graduated")
        .count()
}

// S-61, S-62: a decision job that did not succeed applies nothing; the next check decides again.
#[test]
fn s61_a_failed_graduation_job_applies_nothing_and_the_next_check_decides_again() {
    let home = graduating_canary();
    let first = check_without_waiting(&home);
    assert_eq!(
        (
            first["window"]["decision"].as_str(),
            first["applied"].as_bool()
        ),
        (Some("graduate"), Some(false)),
        "{first}"
    );
    let id = first["job_id"].as_str().unwrap().to_owned();
    // The worker cannot run the job's `true` (no PATH): the job fails without a retry.
    let empty = tempfile::tempdir().unwrap();
    let failed = run_on_a_worker(&home, &id, Some(empty.path()), |s| {
        s == "failed" || s == "dead"
    });
    ingest(&home, &id);
    assert!(
        home.job(&id)["applied"]
            .as_array()
            .is_some_and(|a| !a.is_empty()),
        "its failed result was applied: {failed:#}"
    );
    assert_eq!(
        state(&home, "planner@v2"),
        "canary",
        "a failed decision job graduates nothing"
    );
    assert_eq!(state(&home, "planner@v1"), "current");
    assert_eq!(
        sql(
            &home,
            "SELECT state FROM agent_template_candidate_reviews WHERE version_id = 'planner@v2'"
        ),
        "pending"
    );
    // The next check finds that job ended unsucceeded and submits the next round's, which graduates.
    let again = skillforge_tests::canary_check_json(&home, &["candidate", "canary-check"]);
    assert_eq!(
        (
            again[0]["window"]["decision"].as_str(),
            again[0]["applied"].as_bool()
        ),
        (Some("graduate"), Some(true)),
        "{again}"
    );
    assert_ne!(again[0]["job_id"], first["job_id"]);
    let jobs = decision_jobs(&home);
    let keys: Vec<String> = jobs
        .iter()
        .map(|j| {
            home.job(j["id"].as_str().unwrap())["idempotency_key"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(jobs.len(), 2, "{keys:?}");
    assert!(
        keys[0].ends_with(":v1:r1:planner@v2") && keys[1].ends_with(":v1:r2:planner@v2"),
        "{keys:?}"
    );
    assert_eq!(state(&home, "planner@v2"), "current");
    assert_eq!(graduated_events(&home), 1);
}

// S-61: a decision that arrives after its canary stopped being that canary changes nothing.
#[test]
fn s61_a_decision_arriving_after_the_canary_changed_applies_nothing() {
    // The champion is replaced by hand while the graduate job waits: decided against planner@v1,
    // it must not make planner@v2 current over planner@v3.
    let home = graduating_canary();
    let id = check_without_waiting(&home)["job_id"]
        .as_str()
        .unwrap()
        .to_owned();
    import(&home, "Plan in numbered steps, each with an owner.\n", 0.9);
    home.json(&[
        "candidate",
        "promote",
        "planner@v3",
        "--reason",
        "operator's choice",
    ]);
    run_on_a_worker(&home, &id, None, |s| s == "succeeded");
    ingest(&home, &id);
    assert_eq!(
        state(&home, "planner@v3"),
        "current",
        "the replaced champion's decision changes nothing"
    );
    // Issue 37 item 2: the promotion by hand ended the canary (its base is stale now).
    assert_eq!(
        state(&home, "planner@v2"),
        "pending",
        "the canary ended when planner@v3 was promoted"
    );
    assert_eq!(graduated_events(&home), 0);

    // The canary is rolled back by hand while the graduate job waits: it stays rejected.
    let home = graduating_canary();
    let id = check_without_waiting(&home)["job_id"]
        .as_str()
        .unwrap()
        .to_owned();
    home.json(&[
        "candidate",
        "reject",
        "planner@v2",
        "--reason",
        "operator's call",
    ]);
    run_on_a_worker(&home, &id, None, |s| s == "succeeded");
    ingest(&home, &id);
    assert_eq!(
        (
            state(&home, "planner@v2").as_str(),
            state(&home, "planner@v1").as_str()
        ),
        ("rejected", "current")
    );
    assert_eq!(
        sql(
            &home,
            "SELECT decision_reason FROM agent_template_candidate_reviews WHERE version_id = 'planner@v2'"
        ),
        "operator's call"
    );
    assert_eq!(graduated_events(&home), 0);
}

// S-61, S-62: one decision job per (canary, champion, outcome), however often it is checked.
#[test]
fn s61_checks_that_see_more_evidence_for_the_same_outcome_submit_one_job() {
    let home = graduating_canary();
    let first = check_without_waiting(&home);
    // More evidence arrives before any worker ran the job; a second check (cron, `serve`) sees it.
    harvest_outcome(&home, 11, "planner@v2", true);
    harvest_outcome(&home, 111, "planner@v1", true);
    let second = check_without_waiting(&home);
    assert_eq!(second["window"]["decision"], "graduate", "{second}");
    assert_eq!(
        second["job_id"], first["job_id"],
        "the same decision, the same job"
    );
    assert_eq!(decision_jobs(&home).len(), 1);
    // `jobs list` names the decision by its stage and key, not by its no-op command (`true`).
    let listed = home.run(&["jobs", "list"]);
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.contains("events/graduate promotion:canary:graduate:") && !listed.contains("  true"),
        "{listed}"
    );
    // A waiting check runs that one job and graduates the canary.
    let done = skillforge_tests::canary_check_json(&home, &["candidate", "canary-check"]);
    assert_eq!(
        (done[0]["job_id"].as_str(), done[0]["applied"].as_bool()),
        (first["job_id"].as_str(), Some(true)),
        "{done}"
    );
    assert_eq!(state(&home, "planner@v2"), "current");
    assert_eq!(decision_jobs(&home).len(), 1);
    assert_eq!(graduated_events(&home), 1);
}

// S-61 (issue 37 item 11): a graduation applied by a worker and `serve`'s ingestion, its event
// sent by a later check that no longer sees the canary, still carries the outcomes and rates of
// both sides the window was decided on.
#[test]
fn s61_an_event_sent_by_a_later_check_carries_the_counts_its_decision_was_made_on() {
    let home = graduating_canary();
    let first = check_without_waiting(&home);
    assert_eq!(first["window"]["decision"], "graduate", "{first}");
    let id = first["job_id"].as_str().unwrap().to_owned();
    run_on_a_worker(&home, &id, None, |s| s == "succeeded");
    ingest(&home, &id);
    assert_eq!(state(&home, "planner@v2"), "current");
    assert_eq!(graduated_events(&home), 0, "not sent yet");
    assert_eq!(
        skillforge_tests::canary_check_json(&home, &["candidate", "canary-check"])
            .as_array()
            .map(Vec::len),
        Some(0),
        "no canary left"
    );
    let sent: Vec<Value> = events(&home)
        .into_iter()
        .filter(|e| e["event"] == "candidate.canary_graduated")
        .collect();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(
        sent[0]["detail"]["canary_outcomes"],
        json!({"positives": 10, "total": 10, "rate": 1.0}),
        "{sent:?}"
    );
    assert_eq!(
        sent[0]["detail"]["champion_outcomes"],
        json!({"positives": 5, "total": 10, "rate": 0.5}),
        "{sent:?}"
    );
}

// S-61 on a shared queue: the CLI's `canary-check` waits through the stage port, whose wait
// returns once the decision job's result is applied, so on Redis, with a worker and no `serve`,
// the graduation and its event are applied together before the command returns.
#[test]
fn s61_on_redis_canary_check_applies_the_decision_and_its_event_without_serve() {
    let redis = RedisServer::start();
    let home = graduating_canary_on(home_on(Home::redis(&redis.url())));
    let _worker = Reaped(home.spawn_worker("decisions", &[]));
    let report = skillforge_tests::canary_check_json(&home, &["candidate", "canary-check"]);
    assert_eq!(report.as_array().map(Vec::len), Some(1), "{report}");
    assert_eq!(report[0]["window"]["decision"], "graduate", "{report}");
    assert_eq!(report[0]["applied"], true, "{report}\n{}", home.logs());
    assert_eq!(
        state(&home, "planner@v2"),
        "current",
        "graduated before the command returned"
    );
    assert_eq!(graduated_events(&home), 1, "its event was written with it");
}
