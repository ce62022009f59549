//! The seed's "Complete GitHub review path" steps 2–4 from the CLI against the fake GitHub API:
//! publish (through a secondary rate limit, never twice), reviewers' comments (unrelated,
//! malformed, edited, deleted) synced into feedback events, the training package's
//! `feedback_context.review_issue` (S-04, S-96, S-97).

use std::process::Output;

use serde_json::Value;
use skillforge_tests::fake_github::FakeGitHub;
use skillforge_tests::{Home, PLANNER_TEMPLATE, add_template, ok, path_arg};

fn gh(home: &Home, fake: &FakeGitHub, args: &[&str]) -> Output {
    home.cmd()
        .env("SKILLFORGE_GITHUB_API_URL", &fake.url)
        .env("SKILLFORGE_GITHUB_TOKEN", fake.token())
        .arg("--json")
        .args(args)
        .output()
        .expect("run skillforge")
}

fn gh_json(home: &Home, fake: &FakeGitHub, args: &[&str]) -> Value {
    let out = gh(home, fake, args);
    assert!(
        out.status.success(),
        "{args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn package(home: &Home) -> Value {
    let file = home.path().join("training.json");
    ok(
        home,
        &["export", "--run", "r1", "--output", path_arg(&file)],
    );
    serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap()
}

fn setup(run_repo: Option<&str>) -> Home {
    let home = Home::embedded();
    add_template(&home, PLANNER_TEMPLATE, "acme/templates");
    // An empty `--repo` leaves the run without a target repo.
    ok(
        &home,
        &[
            "review",
            "create",
            "--template",
            "planner",
            "--run",
            "r1",
            "--repo",
            run_repo.unwrap_or(""),
        ],
    );
    for item in ["i1", "i2"] {
        let baseline = skillforge_tests::write(
            &home.path().join(format!("in/{item}-b.md")),
            &format!("{item} baseline\n"),
        );
        let candidate = skillforge_tests::write(
            &home.path().join(format!("in/{item}-c.md")),
            &format!("{item} candidate with tests\n"),
        );
        ok(
            &home,
            &[
                "review",
                "item",
                "add",
                "--run",
                "r1",
                "--item",
                item,
                "--baseline",
                path_arg(&baseline),
                "--candidate",
                path_arg(&candidate),
            ],
        );
    }
    home
}

// S-97: sync ignores unrelated comments and de-duplicates repeated imports by comment URL.
#[test]
fn s85_s97_github_review_path_publish_sync_resync_edit_delete() {
    let fake = FakeGitHub::start("tok-e2e");
    let home = setup(Some("acme/reviews"));

    // Publish through a 403 secondary rate limit (retry-after), then a retried publish finds it.
    fake.state().rate_limit_next = 1;
    let first = gh_json(
        &home,
        &fake,
        &["feedback", "github", "publish", "--run", "r1"],
    );
    assert_eq!(
        (
            first["repo"].as_str(),
            first["number"].as_u64(),
            first["created"].as_bool()
        ),
        (Some("acme/reviews"), Some(1), Some(true))
    );
    let again = gh_json(
        &home,
        &fake,
        &["feedback", "github", "publish", "--run", "r1"],
    );
    assert_eq!(again["created"], false);
    // A write job whose result was lost (here: another home, so no applied-write row) finds the
    // issue by its marker and posts nothing.
    let elsewhere = setup(Some("acme/reviews"));
    let lost = gh_json(
        &elsewhere,
        &fake,
        &["feedback", "github", "publish", "--run", "r1"],
    );
    assert_eq!(
        (lost["number"].as_u64(), lost["created"].as_bool()),
        (Some(1), Some(false)),
        "{lost:#}"
    );
    {
        let s = fake.state();
        assert_eq!(
            s.issues["acme/reviews"].len(),
            1,
            "a retried publish never posts twice"
        );
        let body = &s.issues["acme/reviews"][&1].body;
        assert!(
            body.contains("<!-- gitmoot:skillopt-feedback-packet -->")
                && body.contains("i1 candidate with tests")
        );
        assert!(
            !body.contains("baseline artifact") && !body.contains("candidate:"),
            "the body is blind"
        );
        assert!(s.requests.iter().all(|(_, _, authorized)| *authorized));
    }

    // S-85 (below): the packet as a PR comment before any feedback exists.
    let pr_before = fake
        .state()
        .add_issue("acme/reviews", "a PR before feedback", "");
    gh_json(
        &home,
        &fake,
        &[
            "feedback",
            "github",
            "publish",
            "--run",
            "r1",
            "--pr",
            &pr_before.to_string(),
        ],
    );

    // Reviewers answer; five comments span three pages.
    let (bob, carol) = {
        let mut s = fake.state();
        s.add_comment("acme/reviews", 1, "ann", "LGTM, thanks for the packet!");
        let bob = s.add_comment(
            "acme/reviews",
            1,
            "bob",
            "run_id: r1\ni1: tie - both fine\ni2: b - has tests",
        );
        let carol = s.add_comment("acme/reviews", 1, "carol", "i1: maybe");
        s.add_comment("acme/reviews", 1, "dan", "```yaml\nrun_id: r1\nitems:\n- item_id: i2\n  choice: neither\n  reasoning: too short\n```");
        s.add_comment("acme/reviews", 1, "erin", "run_id: other-run\ni1: a");
        (bob, carol)
    };
    let synced = gh_json(
        &home,
        &fake,
        &[
            "feedback",
            "github",
            "sync",
            "--run",
            "r1",
            "--repo",
            "acme/reviews",
            "--issue",
            "1",
        ],
    );
    assert_eq!(synced["comments"], 5);
    assert_eq!(synced["imported"], 2);
    assert_eq!(synced["skipped"], 2, "ann's and erin's comments");
    let malformed = synced["malformed"].as_array().unwrap();
    assert_eq!(malformed.len(), 1);
    assert_eq!(
        malformed[0]["url"],
        format!("https://github.com/acme/reviews/issues/1#issuecomment-{carol}")
    );
    assert_eq!(synced["feedback_events"]["inserted"], 3);
    let pkg = package(&home);
    let events = pkg["feedback_events"].as_array().unwrap();
    assert_eq!(events.len(), 3);
    assert!(
        events
            .iter()
            .all(|e| e["source"] == "github" && e["reviewer"] != "ann" && e["reviewer"] != "carol")
    );
    assert_eq!(pkg["feedback_context"]["review_issue"], "acme/reviews#1");

    // A second sync writes no new row.
    let resynced = gh_json(
        &home,
        &fake,
        &[
            "feedback",
            "github",
            "sync",
            "--run",
            "r1",
            "--repo",
            "acme/reviews",
            "--issue",
            "1",
        ],
    );
    assert_eq!(resynced["feedback_events"]["inserted"], 0);
    assert_eq!(
        package(&home)["feedback_events"].as_array().unwrap().len(),
        3
    );

    // Bob edits his comment: his rows are re-upserted in place; carol deletes hers.
    fake.state().edit_comment(
        bob,
        "i1: neither - on reflection neither has a rollback\ni2: b - has tests",
    );
    fake.state().delete_comment(carol);
    let edited = gh_json(
        &home,
        &fake,
        &[
            "feedback",
            "github",
            "sync",
            "--run",
            "r1",
            "--repo",
            "acme/reviews",
            "--issue",
            "1",
        ],
    );
    assert_eq!(
        (
            edited["feedback_events"]["inserted"].as_u64(),
            edited["malformed"].as_array().unwrap().len()
        ),
        (Some(0), 0)
    );
    let pkg = package(&home);
    let events = pkg["feedback_events"].as_array().unwrap();
    assert_eq!(events.len(), 3);
    let bob_i1 = events
        .iter()
        .find(|e| e["reviewer"] == "bob" && e["item_id"] == "i1")
        .unwrap();
    assert_eq!(bob_i1["choice"], "neither");
    assert_eq!(
        bob_i1["source_url"],
        format!("https://github.com/acme/reviews/issues/1#issuecomment-{bob}")
    );

    // Bob edits again and drops i1: his old i1 row is superseded (removed), his i2 row stays.
    fake.state().edit_comment(bob, "i2: b - has tests");
    let dropped = gh_json(
        &home,
        &fake,
        &[
            "feedback",
            "github",
            "sync",
            "--run",
            "r1",
            "--repo",
            "acme/reviews",
            "--issue",
            "1",
        ],
    );
    assert_eq!(dropped["superseded"], 1, "{dropped:#}");
    let pkg = package(&home);
    let events = pkg["feedback_events"].as_array().unwrap();
    assert_eq!(events.len(), 2, "{events:#?}");
    assert!(
        !events
            .iter()
            .any(|e| e["reviewer"] == "bob" && e["item_id"] == "i1"),
        "{events:#?}"
    );
    assert!(
        events
            .iter()
            .any(|e| e["reviewer"] == "bob" && e["item_id"] == "i2")
    );
    assert!(
        events
            .iter()
            .any(|e| e["reviewer"] == "dan" && e["item_id"] == "i2"),
        "other comments' rows are untouched"
    );

    // S-85: published again once feedback exists, the GitHub body shows nothing the feedback
    // decided: it is the pre-feedback body but for its idempotency marker.
    let pr_after = fake
        .state()
        .add_issue("acme/reviews", "a PR after feedback", "");
    gh_json(
        &home,
        &fake,
        &[
            "feedback",
            "github",
            "publish",
            "--run",
            "r1",
            "--pr",
            &pr_after.to_string(),
        ],
    );
    let body_on = |pr: u64| {
        let s = fake.state();
        let id = s.issues["acme/reviews"][&pr].comments[0];
        s.comments[&id]
            .body
            .lines()
            .filter(|l| !l.starts_with("<!-- skillforge:publish-key="))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let (before, after) = (body_on(pr_before), body_on(pr_after));
    assert_eq!(
        before, after,
        "S-85: the body after feedback differs from the body before"
    );
    for word in ["winner", "stability", "recommend", "agreement"] {
        assert!(
            !after.to_lowercase().contains(word),
            "the body mentions {word:?}:\n{after}"
        );
    }
}

// S-96: --repo omitted → the run's target repo, else the template's source repo, else [feedback] repo.
#[test]
fn s96_publish_without_repo_uses_template_source_repo_then_errors() {
    let fake = FakeGitHub::start("tok");
    let home = setup(None);
    let published = gh_json(
        &home,
        &fake,
        &["feedback", "github", "publish", "--run", "r1"],
    );
    assert_eq!(published["repo"], "acme/templates");
    assert_eq!(fake.state().issues["acme/templates"].len(), 1);
    // A PR comment instead of an issue.
    fake.state().add_issue("acme/app", "a PR", "");
    let on_pr = gh_json(
        &home,
        &fake,
        &[
            "feedback", "github", "publish", "--run", "r1", "--repo", "acme/app", "--pr", "1",
        ],
    );
    assert!(
        on_pr["url"]
            .as_str()
            .unwrap()
            .starts_with("https://github.com/acme/app/issues/1#issuecomment-")
    );
    let bad = gh(
        &home,
        &fake,
        &[
            "feedback",
            "github",
            "publish",
            "--run",
            "r1",
            "--repo",
            "not-a-repo",
        ],
    );
    assert_eq!(bad.status.code(), Some(2));
}

// Issue 16: a GitHub write is a durable job. GitHub opens the issue but the answer is lost (502):
// the attempt fails, the engine retries the job, and the retry finds the issue by its marker
// instead of opening a second one.
#[test]
fn a_write_whose_answer_was_lost_is_retried_as_a_job_and_posts_once() {
    let fake = FakeGitHub::start("tok");
    let home = setup(Some("acme/reviews"));
    fake.state().lose_write_answers = 1;
    let published = gh_json(
        &home,
        &fake,
        &["feedback", "github", "publish", "--run", "r1"],
    );
    assert_eq!(
        (published["number"].as_u64(), published["created"].as_bool()),
        (Some(1), Some(false)),
        "{published:#}"
    );
    assert_eq!(fake.state().issues["acme/reviews"].len(), 1, "posted once");
    assert_eq!(fake.state().count("POST", "/repos/acme/reviews/issues"), 1);
    let jobs = home.json(&["jobs", "list"]);
    let write = jobs
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["workflow"] == "github")
        .expect("a github write job");
    assert_eq!(
        (write["state"].as_str(), write["attempts"].as_u64()),
        (Some("succeeded"), Some(2)),
        "{write:#}"
    );
}

// Issue 35 item 4: a publish whose write job ended dead for its environment (here an API it could
// not reach) is not a trap: publishing again with the environment fixed starts that job again
// under the same key, says so, and posts once.
#[test]
fn a_publish_that_died_on_an_unreachable_api_runs_again_once_it_is_fixed() {
    let fake = FakeGitHub::start("tok");
    let home = setup(Some("acme/reviews"));
    skillforge_tests::write(
        &home.path().join("github.toml"),
        "[stages.write]\nattempts = 1\n",
    );
    let publish = |api: &str| {
        home.cmd()
            .env("SKILLFORGE_GITHUB_API_URL", api)
            .env("SKILLFORGE_GITHUB_TOKEN", fake.token())
            .args(["feedback", "github", "publish", "--run", "r1"])
            .output()
            .expect("run skillforge")
    };
    // Nothing listens on port 1 of loopback.
    let first = publish("http://127.0.0.1:1");
    assert!(
        !first.status.success(),
        "an unreachable API fails: {}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert!(
        fake.state()
            .issues
            .get("acme/reviews")
            .is_none_or(|i| i.is_empty())
    );
    let second = publish(&fake.url);
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        second.status.success(),
        "publishing again with the API reachable works: {stderr}"
    );
    assert!(
        stderr.contains("started it again with this command's settings and environment"),
        "says the dead write was started again: {stderr}"
    );
    assert_eq!(fake.state().issues["acme/reviews"].len(), 1, "posted once");
    let jobs = home.json(&["jobs", "list"]);
    let writes: Vec<&Value> = jobs
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["workflow"] == "github")
        .collect();
    assert_eq!(
        writes.len(),
        1,
        "the same keyed job, not a second one: {jobs:#}"
    );
    assert_eq!(writes[0]["state"], "succeeded", "{jobs:#}");
}
