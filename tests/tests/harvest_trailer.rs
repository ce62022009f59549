//! Attribution by trailer (issue 37 item 8): a merged PR whose body or commits carry
//! `Skillforge-Template: coder@vN` yields an outcome for that template version through `serve`'s
//! signed webhook and through the PR watcher, with no `harvest attribute` call; the commits are
//! read from the fake GitHub's `GET /pulls/{n}/commits` (GitHub's payload shape); a manual
//! attribution wins over a disagreeing trailer, which is recorded as a harvest event; on the
//! embedded queue and on Redis (seed: SkillOpt, "Automatic trace-harvested feedback (Mode A, off
//! by default)" › Scope; S-15, S-16).

use std::time::Duration;

use serde_json::{Value, json};
use skillforge_tests::fake_github::FakeGitHub;
use skillforge_tests::webhook::{post, sign, spawn_serve, wait_listening};
use skillforge_tests::{CODER_TEMPLATE, Home, Reaped, RedisServer, add_template, free_port, write};

const SECRET: &str = "webhook-s3cret";
const REPO: &str = "acme/app";
const WAIT: Duration = Duration::from_secs(60);

/// The floor rows (`gitmoot-auto`) of `acme/app#pr` in `run`'s export; empty when the run does not exist.
fn floor_rows(home: &Home, run: &str, pr: u32) -> Vec<Value> {
    let out = home
        .path()
        .join(format!("out/{}.json", run.replace([':', '@'], "_")));
    if !home
        .run(&["export", "--run", run, "--output", out.to_str().unwrap()])
        .status
        .success()
    {
        return Vec::new();
    }
    let package: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let item = format!("{REPO}#{pr}");
    package["feedback_events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["item_id"] == item.as_str() && e["reviewer"] == "gitmoot-auto")
        .cloned()
        .collect()
}

fn merged(pr: u32, head: &str, body: &str) -> String {
    json!({
        "action": "closed", "number": pr,
        "pull_request": {"number": pr, "merged": true, "merge_commit_sha": format!("m{pr}"), "head": {"sha": head}, "body": body},
        "repository": {"full_name": REPO},
    })
    .to_string()
}

fn deliver(port: u16, event: &str, body: &str) -> Value {
    let (code, reply) = post(port, event, body, Some(&sign(SECRET, body)));
    assert_eq!(code, 200, "{reply}");
    reply
}

fn setup(home: &Home, fake: &FakeGitHub) {
    add_template(home, CODER_TEMPLATE, "acme/templates");
    write(
        &home.path().join("config.toml"),
        &format!(
            "[skillopt]\nauto_trace_enabled = true\n\n[github]\napi_url = \"{}\"\ntoken = \"{}\"\n",
            fake.url,
            fake.token()
        ),
    );
}

/// A delivery whose PR body carries the trailer, and one whose body has none but whose newest
/// trailered commit does: both yield the floor row of `coder@v1` with no `harvest attribute`.
fn trailers_attribute_webhook_deliveries(home: Home) {
    let fake = FakeGitHub::start("tok-trailer");
    setup(&home, &fake);
    {
        let mut s = fake.state();
        s.add_pull(REPO, 11, "Speeds up the cache", "h11", Some("m11"));
        s.add_pull_commit(
            REPO,
            11,
            "c11a",
            "Add the cache\n\nSkillforge-Template: coder@v7",
        );
        s.add_pull_commit(
            REPO,
            11,
            "c11b",
            "Use the cache\n\nSkillforge-Template: coder@v1",
        );
        s.add_pull_commit(REPO, 11, "c11c", "fixup: typo");
    }
    let port = free_port();
    let _serve = Reaped(spawn_serve(&home, port, Some(SECRET), &[]));
    wait_listening(&home, port);
    // Passing external CI at the head, then the merge whose body names the version.
    let ci = json!({"sha": "h7", "state": "success", "context": "ci/build", "description": "", "repository": {"full_name": REPO}}).to_string();
    deliver(port, "status", &ci);
    let reply = deliver(
        port,
        "pull_request",
        &merged(
            7,
            "h7",
            "Adds the cache.\n\nSkillforge-Template: coder@v1\n",
        ),
    );
    assert_eq!(
        reply["attributed"],
        json!(["acme/app#7 → coder@v1 (from the PR body)"]),
        "{reply}"
    );
    assert_eq!(reply["rows"].as_array().unwrap().len(), 1, "{reply}");
    let rows = floor_rows(&home, "auto-trace:coder@v1", 7);
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert_eq!(rows[0]["choice"], "a");
    assert_eq!(
        fake.state().count("GET", "/repos/acme/app/pulls/7/commits"),
        0,
        "a body trailer needs no GitHub call"
    );

    // No trailer in the body: the commits list is read and its newest trailer wins (v1 over v7).
    let reply = deliver(
        port,
        "pull_request",
        &merged(11, "h11", "Speeds up the cache"),
    );
    assert_eq!(
        reply["attributed"],
        json!(["acme/app#11 → coder@v1 (from commit c11b)"]),
        "{reply}"
    );
    assert_eq!(floor_rows(&home, "auto-trace:coder@v1", 11).len(), 1);
    assert_eq!(
        fake.state()
            .count("GET", "/repos/acme/app/pulls/11/commits"),
        2,
        "two pages of two commits each"
    );
    assert!(
        fake.state()
            .requests
            .iter()
            .all(|(_, _, authorized)| *authorized)
    );

    // Delivered again: nothing new is attributed and the row count is unchanged (S-15).
    let reply = deliver(
        port,
        "pull_request",
        &merged(
            7,
            "h7",
            "Adds the cache.\n\nSkillforge-Template: coder@v1\n",
        ),
    );
    assert!(reply.get("attributed").is_none(), "{reply}");
    assert_eq!(floor_rows(&home, "auto-trace:coder@v1", 7).len(), 1);
    let status = home.json(&["harvest", "status"]);
    assert_eq!(status["feedback_events"], 2, "{status:#}");
}

#[test]
fn s15_s16_a_trailer_in_the_body_or_a_commit_attributes_a_webhook_merge_embedded() {
    trailers_attribute_webhook_deliveries(Home::embedded());
}

#[test]
fn s15_s16_a_trailer_in_the_body_or_a_commit_attributes_a_webhook_merge_on_redis() {
    let redis = RedisServer::start();
    trailers_attribute_webhook_deliveries(Home::redis(&redis.url()));
}

/// A candidate `coder@v2` (imported, pending).
fn import_v2(home: &Home) {
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
    let imported = home.json(&["import", "--file", file.to_str().unwrap()]);
    assert_eq!(imported["version_id"], "coder@v2", "{imported}");
}

fn events_named(home: &Home, name: &str) -> Vec<Value> {
    let events = home.json(&["harvest", "events"]);
    let list = events
        .as_array()
        .cloned()
        .or_else(|| events["events"].as_array().cloned())
        .unwrap_or_default();
    list.into_iter().filter(|e| e["event"] == name).collect()
}

// The manual attribution wins: a trailer naming another version leaves the row with the manual
// version and says so once; a trailer naming no installed version attributes nothing; a trailer
// attribution is replaced by a later `harvest attribute`.
#[test]
fn a_manual_attribution_wins_over_a_disagreeing_trailer() {
    let fake = FakeGitHub::start("tok-trailer");
    let home = Home::embedded();
    setup(&home, &fake);
    import_v2(&home);
    home.json(&[
        "harvest",
        "attribute",
        "--repo",
        REPO,
        "--pr",
        "8",
        "--template",
        "coder@v1",
        "--resolved-commit",
        "c0ffee",
    ]);
    let port = free_port();
    let _serve = Reaped(spawn_serve(&home, port, Some(SECRET), &[]));
    wait_listening(&home, port);
    let body = merged(8, "h8", "Refactor\n\nSkillforge-Template: coder@v2");
    for _ in 0..2 {
        let reply = deliver(port, "pull_request", &body);
        assert!(reply.get("attributed").is_none(), "{reply}");
        assert!(
            reply["skipped"]
                .to_string()
                .contains("manual attribution is kept"),
            "{reply}"
        );
    }
    assert_eq!(
        floor_rows(&home, "auto-trace:coder@v1", 8).len(),
        1,
        "the manual version keeps the outcome"
    );
    assert!(floor_rows(&home, "auto-trace:coder@v2", 8).is_empty());
    let disagreements = events_named(&home, "attribution_trailer_disagrees");
    assert_eq!(
        disagreements.len(),
        1,
        "said once though delivered twice: {disagreements:#?}"
    );
    assert!(
        disagreements[0]["detail"]
            .as_str()
            .unwrap()
            .contains("coder@v2"),
        "{disagreements:#?}"
    );

    // A version this store does not hold: nothing attributed, nothing harvested, said once.
    let reply = deliver(
        port,
        "pull_request",
        &merged(9, "h9", "x\n\nSkillforge-Template: coder@v9"),
    );
    assert!(reply["rows"].as_array().unwrap().is_empty(), "{reply}");
    assert_eq!(events_named(&home, "attribution_trailer_unknown").len(), 1);

    // A trailer attribution, then the operator attributes the PR by hand: the manual one replaces it.
    deliver(
        port,
        "pull_request",
        &merged(10, "h10", "y\n\nSkillforge-Template: coder@v2"),
    );
    assert_eq!(floor_rows(&home, "auto-trace:coder@v2", 10).len(), 1);
    home.json(&[
        "harvest",
        "attribute",
        "--repo",
        REPO,
        "--pr",
        "10",
        "--template",
        "coder@v1",
        "--resolved-commit",
        "c0ffee",
    ]);
    deliver(
        port,
        "pull_request",
        &merged(10, "h10", "y\n\nSkillforge-Template: coder@v2"),
    );
    assert_eq!(
        floor_rows(&home, "auto-trace:coder@v1", 10).len(),
        1,
        "after `harvest attribute` the outcome goes to the manual version"
    );
}

// The PR watcher reads the same trailer: a merged PR whose commits carry it is harvested for that
// version with no `harvest attribute` and no webhook.
#[test]
fn s15_the_pr_watcher_attributes_a_merged_pr_by_its_commit_trailer() {
    let fake = FakeGitHub::start("tok-watch");
    let home = Home::embedded();
    setup(&home, &fake);
    let mut config = std::fs::read_to_string(home.path().join("config.toml")).unwrap();
    config.push_str(&format!(
        "watch_repos = [\"{REPO}\"]\nwatch_every_secs = 1\n"
    ));
    write(&home.path().join("config.toml"), &config);
    {
        let mut s = fake.state();
        s.add_pull(REPO, 5, "Adds the cache", "h5", Some("m5"));
        s.add_status(REPO, "h5", "ci/test", "success");
        s.add_pull_commit(
            REPO,
            5,
            "c5",
            "Add the cache\n\nSkillforge-Template: coder@v1",
        );
        s.add_pull(
            REPO,
            6,
            "Open, not merged\n\nSkillforge-Template: coder@v1",
            "h6",
            None,
        );
    }
    let port = free_port();
    let _serve = Reaped(spawn_serve(&home, port, Some(SECRET), &[]));
    wait_listening(&home, port);
    home.wait(WAIT, "the watcher's merge row", || {
        floor_rows(&home, "auto-trace:coder@v1", 5).first().cloned()
    });
    assert_eq!(
        floor_rows(&home, "auto-trace:coder@v1", 5)[0]["choice"],
        "a"
    );
    assert!(
        floor_rows(&home, "auto-trace:coder@v1", 6).is_empty(),
        "an open PR has no outcome"
    );
    assert_eq!(
        fake.state().count("GET", "/repos/acme/app/pulls/6/commits"),
        0,
        "an open PR's commits are not read"
    );
}

// The version `ask` served rides with its agent job (the runner turns it into the commit trailer:
// `runners/agent/src/trailer.rs` tests that with real `git commit`s), only while harvesting is on:
// off, the job is what it was.
#[test]
fn an_ask_records_the_version_it_served_with_its_agent_job_while_harvesting_is_on() {
    let home = Home::embedded();
    add_template(&home, CODER_TEMPLATE, "acme/templates");
    let payload = |answer: &Value| {
        home.json(&["jobs", "show", answer["job_id"].as_str().unwrap()])["payload"].clone()
    };
    let off = home.json(&["ask", "coder", "Add a cache"]);
    assert!(payload(&off).get("template_version").is_none(), "{off}");
    write(
        &home.path().join("config.toml"),
        "[skillopt]\nauto_trace_enabled = true\n",
    );
    let on = home.json(&["ask", "coder", "Add a cache, again"]);
    assert_eq!(payload(&on)["template_version"], "coder@v1", "{on}");
}

fn review_of(pr: u32, review_id: u32, state: &str, body: &str) -> String {
    json!({
        "action": "submitted",
        "review": {"id": review_id, "state": state},
        "pull_request": {"number": pr, "body": body, "head": {"sha": format!("h{pr}")}},
        "repository": {"full_name": REPO},
    })
    .to_string()
}

fn pull_request(action: &str, pr: u32, merged: bool, body: &str) -> String {
    json!({
        "action": action, "number": pr,
        "pull_request": {"number": pr, "merged": merged, "head": {"sha": format!("h{pr}")}, "body": body},
        "repository": {"full_name": REPO},
    })
    .to_string()
}

/// What the harvester has written: counts of runs, items, rows, and the harvest events.
fn written(home: &Home) -> (Value, Vec<Value>) {
    let status = home.json(&["harvest", "status"]);
    let counts = json!([
        status["eval_runs"],
        status["eval_review_items"],
        status["feedback_events"]
    ]);
    let events = home.json(&["harvest", "events"]);
    let events = events
        .as_array()
        .cloned()
        .or_else(|| events["events"].as_array().cloned())
        .unwrap_or_default();
    (counts, events)
}

// Negative evidence by webhooks alone: a review requesting changes whose PR body carries the
// trailer is attributed and harvested as a fix round (choice b) with no `harvest attribute`; a
// `pull_request` `opened` with the trailer attributes the PR for a later review whose body has
// none; a re-delivered review counts once (S-15); a PR with no trailer anywhere is not harvested
// (S-16); a manual attribution still wins over a review's trailer.
#[test]
fn s15_s16_a_review_with_the_trailer_in_the_pr_body_is_harvested_as_a_fix_round() {
    let fake = FakeGitHub::start("tok-review");
    let home = Home::embedded();
    setup(&home, &fake);
    import_v2(&home);
    home.json(&[
        "harvest",
        "attribute",
        "--repo",
        REPO,
        "--pr",
        "308",
        "--template",
        "coder@v1",
        "--resolved-commit",
        "c0ffee",
    ]);
    let port = free_port();
    let _serve = Reaped(spawn_serve(&home, port, Some(SECRET), &[]));
    wait_listening(&home, port);
    let trailered = "Summarizes changes.\n\nSkillforge-Template: coder@v1\n";

    let review = review_of(304, 1, "changes_requested", trailered);
    let reply = deliver(port, "pull_request_review", &review);
    assert_eq!(
        reply["attributed"],
        json!(["acme/app#304 → coder@v1 (from the PR body)"]),
        "{reply}"
    );
    assert_eq!(reply["skipped"], json!([]), "{reply}");
    let rows = floor_rows(&home, "auto-trace:coder@v1", 304);
    assert_eq!(rows.len(), 1, "{rows:#?}");
    assert_eq!(rows[0]["choice"], "b", "a fix round is negative evidence");
    let again = deliver(port, "pull_request_review", &review);
    assert!(again.get("attributed").is_none(), "{again}");
    assert_eq!(floor_rows(&home, "auto-trace:coder@v1", 304).len(), 1);

    // `opened` with the trailer attributes the PR; the review, its body edited since, finds it.
    let reply = deliver(
        port,
        "pull_request",
        &pull_request("opened", 305, false, trailered),
    );
    assert_eq!(
        reply["attributed"],
        json!(["acme/app#305 → coder@v1 (from the PR body)"]),
        "{reply}"
    );
    assert_eq!(reply["rows"], json!([]), "an open PR has no outcome yet");
    let reply = deliver(
        port,
        "pull_request_review",
        &review_of(305, 2, "CHANGES_REQUESTED", "Summarizes changes."),
    );
    assert_eq!(reply["rows"].as_array().unwrap().len(), 1, "{reply}");
    assert_eq!(
        floor_rows(&home, "auto-trace:coder@v1", 305)[0]["choice"],
        "b"
    );

    // No trailer in the body nor in its commits: not attributed, not harvested.
    let reply = deliver(
        port,
        "pull_request_review",
        &review_of(306, 3, "changes_requested", "No trailer."),
    );
    assert!(reply["rows"].as_array().unwrap().is_empty(), "{reply}");
    assert!(
        reply["skipped"]
            .to_string()
            .contains("acme/app#306 has no template attribution"),
        "{reply}"
    );

    // The manual attribution to v1 keeps the fix round though the body names v2.
    let reply = deliver(
        port,
        "pull_request_review",
        &review_of(
            308,
            4,
            "changes_requested",
            "x\n\nSkillforge-Template: coder@v2",
        ),
    );
    assert!(
        reply["skipped"]
            .to_string()
            .contains("manual attribution is kept"),
        "{reply}"
    );
    assert_eq!(floor_rows(&home, "auto-trace:coder@v1", 308).len(), 1);
    assert!(floor_rows(&home, "auto-trace:coder@v2", 308).is_empty());
    assert_eq!(home.json(&["harvest", "status"])["feedback_events"], 3);
}

// Deliveries that carry no outcome answer 200 with the reason and write nothing: a PR closed
// without merging (its body's trailer attributes nothing), an event type skillforge does not read,
// an approving review (S-16: nothing outside an attributed change's outcome is harvested).
#[test]
fn s16_closed_unmerged_prs_and_unread_events_say_why_and_write_nothing() {
    let fake = FakeGitHub::start("tok-skip");
    let home = Home::embedded();
    setup(&home, &fake);
    let port = free_port();
    let _serve = Reaped(spawn_serve(&home, port, Some(SECRET), &[]));
    wait_listening(&home, port);
    let before = written(&home);
    let trailered = "Abandoned.\n\nSkillforge-Template: coder@v1\n";
    let reply = deliver(
        port,
        "pull_request",
        &pull_request("closed", 7, false, trailered),
    );
    assert_eq!(
        reply["skipped"],
        json!(["acme/app#7 closed without merging: not an outcome"]),
        "{reply}"
    );
    assert_eq!((&reply["rows"], &reply["legs"]), (&json!([]), &json!([])));
    assert!(reply.get("attributed").is_none(), "{reply}");
    for event in ["issues", "check_run"] {
        let body = json!({"action": "opened", "repository": {"full_name": REPO},
            "issue": {"number": 7, "body": trailered}})
        .to_string();
        let reply = deliver(port, event, &body);
        assert_eq!(
            reply["skipped"],
            json!([format!(
                "event `{event}` is not read: skillforge reads pull_request, pull_request_review, status, check_suite, skillforge_outcome, ping"
            )]),
            "{reply}"
        );
        assert_eq!(reply["rows"], json!([]), "{reply}");
    }
    let reply = deliver(
        port,
        "pull_request_review",
        &review_of(7, 1, "approved", trailered),
    );
    assert!(
        reply["skipped"]
            .to_string()
            .contains("review of acme/app#7 is `approved`"),
        "{reply}"
    );
    assert_eq!(written(&home), before, "nothing is written");
    // The closed PR's trailer attributed nothing: a later fix round on it finds no attribution.
    let reply = deliver(
        port,
        "pull_request_review",
        &review_of(7, 2, "changes_requested", "No trailer."),
    );
    assert!(
        reply["skipped"]
            .to_string()
            .contains("acme/app#7 has no template attribution"),
        "{reply}"
    );
    assert!(floor_rows(&home, "auto-trace:coder@v1", 7).is_empty());
}
