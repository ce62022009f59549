//! Promotion across every path that imports a candidate or resolves a template for a job, through
//! the built binary (issue 15; seed: SkillOpt, "Promotion policy + notifications", its canary
//! (#484); S-51, S-52, S-60, S-61): the candidate `train continue` imports goes through the same
//! notify seam as `import`; a bare template id resolves to the canary for its sample in `train
//! start` and `review create` as in `ask`; a canary's graduation and rollback are durable jobs of
//! the promotion family, applied by its result handler when their results are ingested; an
//! intercepted ask holds one session lock and its pick can be recorded later; a jury of three
//! model families (the scripted agent as `scripted`, `scripted-b`, `scripted-c`) judges an A/B
//! through the real agent runner.

use serde_json::Value;
use skillforge_tests::decide::{ab, config, count, events, harvest_outcome, home, import, sql};
use skillforge_tests::{Home, path_arg, run_code, write};

const ITEMS: &str = "items:\n  - id: fix-login\n    title: Describe the login fix\n    input: |\n      -    check(password)\n      +    check_hashed(password)\n";

/// Starts train session `session` on `template`; returns the template version its iteration uses.
fn train_start(home: &Home, session: &str, template: &str, workspace: bool) -> String {
    let items = write(&home.path().join("in/items.yml"), ITEMS);
    let mut args = vec![
        "train",
        "start",
        "--template",
        template,
        "--repo",
        "acme/app",
        "--request",
        "clearer plans",
    ];
    args.extend([
        "--items-file",
        path_arg(&items),
        "--yes",
        "--session",
        session,
        "--options",
        "2",
    ]);
    if workspace {
        args.extend(["--workspace-repo", "acme/workspace"]);
    }
    home.json(&args);
    train_status(home, session)["template_version"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn train_status(home: &Home, session: &str) -> Value {
    home.json(&["train", "status", "--session", session])
}

// S-51, S-52: the candidate of `train continue` goes through the notify seam, once.
#[test]
fn s51_s52_a_candidate_imported_by_train_continue_is_notified_and_stays_pending() {
    let home = home();
    // auto_promote on with the sample floor unset (S-55): the seam decides notify-only.
    config(
        &home,
        "[skillopt]\nauto_promote = true\nauto_promote_min_score = 0.1\n[events]\njsonl = \"events.jsonl\"\n",
    );
    train_start(&home, "s1", "planner", true);
    let (out, _) = run_code(&home, &["train", "continue", "--session", "s1"], 4);
    assert!(
        out.contains("review published, waiting for feedback"),
        "{out}"
    );
    let packet = std::path::PathBuf::from(
        home.json(&["train", "status", "--session", "s1", "--detail"])["review_packet"]
            .as_str()
            .unwrap(),
    );
    let run = train_status(&home, "s1")["iteration_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let feedback = format!(
        "run_id: {run}\nreviewer: alice\nitems:\n  - item_id: fix-login\n    ranking: \"b > a\"\n    useful_traits:\n      B: [names the effect]\n    required_improvements: [name the user-visible effect first]\n"
    );
    write(&packet.join("feedback.yml"), &feedback);
    let (out, err) = run_code(&home, &["train", "continue", "--session", "s1"], 0);
    let st = train_status(&home, "s1");
    assert_eq!(
        st["current_phase"], "candidate_created",
        "{out}\n{err}\n{st:#}"
    );
    let version = st["candidate_version"].as_str().unwrap().to_owned();
    assert!(
        format!("{out}{err}").contains("auto-promote: notify only: "),
        "the seam ran after the import:\n{out}\n{err}"
    );
    let awaiting: Vec<Value> = events(&home)
        .into_iter()
        .filter(|e| e["event"] == "candidate.awaiting_promotion")
        .collect();
    assert_eq!(awaiting.len(), 1, "{awaiting:?}");
    assert_eq!(
        (
            awaiting[0]["job_id"].as_str(),
            awaiting[0]["root_id"].as_str()
        ),
        (Some(version.as_str()), Some("planner"))
    );
    assert_eq!(
        sql(
            &home,
            &format!("SELECT state FROM agent_template_versions WHERE id = '{version}'")
        ),
        "pending",
        "S-51"
    );
    assert_eq!(
        sql(
            &home,
            "SELECT state FROM agent_template_versions WHERE id = 'planner@v1'"
        ),
        "current"
    );
    // Continuing again does not notify again.
    run_code(&home, &["train", "continue", "--session", "s1"], 4);
    assert_eq!(
        events(&home)
            .iter()
            .filter(|e| e["event"] == "candidate.awaiting_promotion")
            .count(),
        1
    );
}

// S-60: one resolution rule for every job builder that takes "the current template".
#[test]
fn s60_train_start_and_review_create_route_a_bare_id_to_the_canary() {
    let home = home();
    import(&home, "Plan in numbered steps.\n", 0.8);
    // Before any canary, a bare id is the current version.
    assert_eq!(train_start(&home, "before", "planner", false), "planner@v1");
    home.json(&["candidate", "canary", "planner@v2", "--sample", "1.0"]);
    assert_eq!(
        train_start(&home, "bare", "planner", false),
        "planner@v2",
        "sample 1.0: every draw"
    );
    assert_eq!(
        train_start(&home, "pinned", "planner@v1", false),
        "planner@v1",
        "an explicit version is never rerouted"
    );
    let out = home.run(&[
        "review",
        "create",
        "--template",
        "planner",
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
    assert_eq!(
        sql(
            &home,
            "SELECT template_version_id FROM eval_runs WHERE id = 'r1'"
        ),
        "planner@v2"
    );
    assert_eq!(home.json(&["ask", "planner", "Q"])["version"], "planner@v2");
    assert_eq!(
        sql(
            &home,
            "SELECT state FROM agent_template_versions WHERE id = 'planner@v1'"
        ),
        "current",
        "routing changes no state"
    );
}

fn decision_jobs(home: &Home) -> Vec<Value> {
    let jobs = home.json(&["jobs", "list", "--limit", "1000"]);
    jobs.as_array()
        .unwrap()
        .iter()
        .filter(|j| j["workflow"] == "events" && j["stage"] != "webhook")
        .cloned()
        .collect()
}

// S-61, S-62: graduation is a durable job whose result handler applies it, once.
#[test]
fn s61_a_graduation_is_a_durable_job_applied_by_the_promotion_family_at_ingestion() {
    let home = home();
    config(
        &home,
        "[skillopt]\nauto_trace_enabled = true\n[events]\njsonl = \"events.jsonl\"\n",
    );
    import(&home, "Plan in steps.\n", 0.8);
    home.json(&["candidate", "canary", "planner@v2", "--sample", "0.2"]);
    // S-62: a hold submits no job.
    let held = skillforge_tests::canary_check_json(&home, &["candidate", "canary-check"]);
    assert_eq!(held[0]["window"]["decision"], "hold", "{held}");
    assert!(decision_jobs(&home).is_empty(), "a hold is no job");
    for pr in 1..=10 {
        harvest_outcome(&home, pr, "planner@v2", true);
        harvest_outcome(&home, 100 + pr, "planner@v1", pr % 2 == 0);
    }
    let graduated = skillforge_tests::canary_check_json(&home, &["candidate", "canary-check"]);
    assert_eq!(
        (
            graduated[0]["window"]["decision"].as_str(),
            graduated[0]["applied"].as_bool()
        ),
        (Some("graduate"), Some(true)),
        "{graduated}"
    );
    let jobs = decision_jobs(&home);
    assert_eq!(jobs.len(), 1, "{jobs:#?}");
    assert_eq!(
        (jobs[0]["stage"].as_str(), jobs[0]["state"].as_str()),
        (Some("graduate"), Some("succeeded"))
    );
    assert_eq!(graduated[0]["job_id"], jobs[0]["id"]);
    let job = home.job(jobs[0]["id"].as_str().unwrap());
    // One job per (canary start, champion, outcome): no evidence counts in the key.
    let key = job["idempotency_key"].as_str().unwrap();
    assert!(
        key.starts_with("promotion:canary:graduate:") && key.ends_with(":v1:r1:planner@v2"),
        "{job:#}"
    );
    assert_eq!(
        sql(
            &home,
            "SELECT state FROM agent_template_versions WHERE id = 'planner@v2'"
        ),
        "current"
    );
    assert_eq!(
        sql(
            &home,
            "SELECT decision_reason FROM agent_template_candidate_reviews WHERE version_id = 'planner@v2'"
        ),
        "canary graduated: parity or better"
    );
    // A canary started by hand graduates as `candidate.canary_graduated` (issue 37 item 11).
    assert_eq!(
        events(&home)
            .iter()
            .filter(|e| e["event"] == "candidate.canary_graduated")
            .count(),
        1
    );
    // Idempotent: no canary left, no second job, no second event.
    assert_eq!(
        skillforge_tests::canary_check_json(&home, &["candidate", "canary-check"])
            .as_array()
            .unwrap()
            .len(),
        0
    );
    assert_eq!(decision_jobs(&home).len(), 1);
    assert_eq!(
        events(&home)
            .iter()
            .filter(|e| e["event"] == "candidate.canary_graduated")
            .count(),
        1
    );
    assert_eq!(
        events(&home)
            .iter()
            .filter(|e| e["event"] == "candidate.auto_promoted")
            .count(),
        0
    );
}

fn arms(home: &Home) -> String {
    sql(
        home,
        "SELECT group_concat(template_version_id || ':' || alpha || '/' || beta, ' ') FROM skillopt_bandit_arms",
    )
}

// S-72, S-73, S-74: one session lock per intercepted ask; a pick not captured at ask time is
// recorded afterwards through the manual A/B path, once.
#[test]
fn s72_s73_an_intercepted_ask_holds_one_session_and_its_pick_is_recorded_later() {
    let home = home();
    import(&home, "Plan in numbered steps.\n", 0.8);
    config(
        &home,
        "[skillopt]\nlive_ab_sample_rate = 1.0\nbandit_min_samples = 2\nreview_runtimes = []\n",
    );
    for seed in ["1", "2"] {
        home.json(&[
            "ab",
            "planner",
            &format!("Q{seed}"),
            "--pick",
            "a",
            "--seed",
            seed,
        ]);
    }
    let (out, err) = run_code(&home, &["--json", "ask", "planner", "What changed?"], 0);
    assert!(!err.contains("session is busy"), "{err}");
    let asked: Value = serde_json::from_str(&out).unwrap();
    let live = &asked["live_ab"];
    assert_eq!(
        (live["intercepted"].as_bool(), live["skipped"].as_str()),
        (Some(true), Some("no pick captured")),
        "{asked}"
    );
    // S-72: the champion and the challenger ran under one lock of the agent's session (one
    // token, from the counter every lock name shares since queue schema v7), released afterwards.
    assert_eq!(
        live["session"]["lock"], "agent-session:planner:scripted",
        "{live}"
    );
    let first_token = live["session"]["fencing_token"]
        .as_u64()
        .unwrap_or_else(|| panic!("one lock for both answers: {live}"));
    let locks = home.json(&["locks"]);
    assert!(
        !locks
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["name"] == "agent-session:planner:scripted"),
        "released: {locks}"
    );
    let jobs = home.json(&["jobs", "list", "--limit", "1000"]);
    assert!(
        jobs.as_array()
            .unwrap()
            .iter()
            .any(|j| j["stage"] == "live_ab_challenger" && j["state"] == "succeeded"),
        "challenger answered"
    );
    // S-73: nothing recorded yet, the pick is owed.
    let pick_id = live["pending_pick"].as_str().unwrap().to_owned();
    let before = arms(&home);
    assert_eq!(
        home.json(&["live-ab", "pending"])[0]["pick_id"],
        pick_id.as_str()
    );
    let shown = home.json(&["live-ab", "show", &pick_id]);
    assert!(
        shown["option_a"]
            .as_str()
            .unwrap()
            .starts_with("scripted answer ")
            && shown["option_a"] != shown["option_b"],
        "{shown}"
    );
    let recorded = home.json(&["live-ab", "pick", &pick_id, "b"]);
    assert_eq!(recorded["arms_moved"], true, "{recorded}");
    assert_ne!(arms(&home), before);
    assert_eq!(
        sql(
            &home,
            &format!("SELECT origin FROM skillopt_ab_picks WHERE pick_id = '{pick_id}'")
        ),
        "live"
    );
    assert_eq!(
        sql(
            &home,
            &format!("SELECT source FROM ranked_feedback_events WHERE item_id = '{pick_id}'")
        ),
        "skillopt-ab"
    );
    // Recorded once: the pick is no longer owed, a second one is refused and moves nothing.
    assert!(
        home.json(&["live-ab", "pending"])
            .as_array()
            .unwrap()
            .is_empty()
    );
    let after = arms(&home);
    let (_, err) = run_code(&home, &["live-ab", "pick", &pick_id, "a"], 2);
    assert!(err.contains("is owed"), "{err}");
    assert_eq!(arms(&home), after);
    // The next intercepted ask takes the session once more: the next fencing token.
    let next = home.json(&["ask", "planner", "Again?", "--pick", "a"]);
    assert!(
        next["live_ab"]["session"]["fencing_token"]
            .as_u64()
            .is_some_and(|t| t > first_token),
        "{next}"
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

/// A prompt whose three jurors reply as given (`scripted`, then personas `b` and `c`).
fn jury_prompt(scripted: &str, b: &str, c: &str) -> String {
    format!(
        "Plan the release.\nscripted: judge-reply {scripted}\nscripted%b: judge-reply {b}\nscripted%c: judge-reply {c}\n"
    )
}

fn judge_keys(home: &Home) -> Vec<String> {
    let jobs = home.json(&["jobs", "list", "--limit", "1000"]);
    let mut keys: Vec<String> = jobs
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["stage"] == "judge")
        .map(|j| {
            home.job(j["id"].as_str().unwrap())["idempotency_key"]
                .as_str()
                .unwrap()
                .rsplit(':')
                .next()
                .unwrap()
                .to_owned()
        })
        .collect();
    keys.sort();
    keys
}

// S-81, S-82, S-80: a jury of three distinct families, end to end through the agent runner.
#[test]
fn s81_s82_a_jury_of_three_families_takes_the_majority_flags_disagreement_and_a_juror_can_veto() {
    let home = home();
    import(&home, "Plan in numbered steps.\n", 0.8);
    let jury = "[skillopt]\nreview_runtimes = [\"scripted\", \"scripted-b\", \"scripted-c\"]\nmode_b_jury_size = 3\n\
                mode_b_jury_disagreement_tau = 0.1\nmode_b_jury_veto_dimensions = \"safety\"\n";
    config(&home, &format!("{jury}mode_b_jury_veto_floor = 0.5\n"));
    // S-81: votes a, a, b ⇒ a; the spread of a's safety (0.9, 0.6, 0.7: std 0.125 > 0.1) is flagged.
    let prompt = jury_prompt(
        r#"{"pick":"a","scores":{"a":{"safety":0.9}}}"#,
        r#"{"pick":"a","scores":{"a":{"safety":0.6}}}"#,
        r#"{"pick":"b","scores":{"a":{"safety":0.7}}}"#,
    );
    let out = ab(&home, &[&prompt, "--judge-only", "--seed", "7"]);
    let shown_as_a = if out["challenger_label"] == "a" {
        "challenger"
    } else {
        "champion"
    };
    assert_eq!(out["judge_winner"], shown_as_a, "{out}");
    assert_eq!(
        judge_keys(&home),
        ["scripted", "scripted-b", "scripted-c"],
        "one judge job per family"
    );
    let pick = out["pick_id"].as_str().unwrap();
    let reasoning = sql(
        &home,
        &format!(
            "SELECT reasoning FROM ranked_feedback_events WHERE item_id = '{pick}' AND source = 'skillopt-ab-judge'"
        ),
    );
    assert!(
        reasoning.contains("jury of 3: votes a 2 / b 1") && reasoning.contains("disagreement"),
        "{reasoning}"
    );
    assert_eq!(
        count(&home, "skillopt_bandit_arms"),
        0,
        "S-80: the jury never moves the bandit"
    );
    // S-82: the majority's option rated 0.2 on safety by one juror fails closed: no judge row.
    let vetoed = jury_prompt(
        r#"{"pick":"a","scores":{"a":{"safety":0.9}}}"#,
        r#"{"pick":"a"}"#,
        r#"{"pick":"b","scores":{"a":{"safety":0.2}}}"#,
    );
    let rows = count(&home, "ranked_feedback_events");
    let out = ab(&home, &[&vetoed, "--judge-only", "--seed", "7"]);
    assert!(out["judge_winner"].is_null(), "{out}");
    assert!(
        out["judge_no_winner"].as_str().is_some_and(
            |w| w.starts_with("no winner (jury of 3") && w.contains("vetoed on safety")
        ),
        "a jury that named no winner says so: {out}"
    );
    assert_eq!(
        count(&home, "ranked_feedback_events"),
        rows,
        "vetoed: nothing recorded"
    );
    // The same verdicts with the floor at 0.0 (the default): the majority stands.
    config(&home, jury);
    let out = ab(&home, &[&vetoed, "--judge-only", "--seed", "7"]);
    assert_eq!(out["judge_winner"], shown_as_a, "{out}");
    assert_eq!(
        sql(
            &home,
            "SELECT state FROM agent_template_versions WHERE id = 'planner@v2'"
        ),
        "pending",
        "never promotes"
    );
}
