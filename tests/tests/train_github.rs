//! Train mode through GitHub (issue 16 item 4; seed "Complete train-mode path" steps 3, 4 and 8;
//! facts §3 `issue_url`, `continue_from_github`, review watches) end to end through the built
//! binary against the fake GitHub API: `train start --forge github` on a workspace `owner/repo`,
//! `train continue` publishing the review issue, syncing reviewers' comments (a partial review
//! waits, a malformed comment is reported and skipped), the optimizer, the candidate review
//! context as a comment, promotion. The GitHub connection comes from `[github]` in config.toml
//! (the environment's GitHub variables are removed so the file's keys are what is used).

use std::process::Output;

use serde_json::Value;
use skillforge_tests::fake_github::FakeGitHub;
use skillforge_tests::train::{ITEMS, start_args};
use skillforge_tests::{Home, PLANNER_TEMPLATE, add_template, write};

const REPO: &str = "acme/workspace";

/// `skillforge ARGS` with the GitHub variables of the environment removed.
fn sf(home: &Home, args: &[&str]) -> Output {
    let mut cmd = home.cmd();
    for var in [
        "SKILLFORGE_GITHUB_API_URL",
        "SKILLFORGE_GITHUB_TOKEN",
        "GITHUB_TOKEN",
        "GH_TOKEN",
    ] {
        cmd.env_remove(var);
    }
    cmd.args(args).output().expect("run skillforge")
}

fn ok_json(home: &Home, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = sf(home, &all);
    assert!(
        out.status.success(),
        "{args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stdout)))
}

fn status(home: &Home) -> Value {
    ok_json(home, &["train", "status", "--session", "s1", "--detail"])
}

/// `train continue`: its report, its exit checked against the state it stopped at (4 while a
/// person must act: review comments to come, a candidate to promote or reject; else 0).
fn cont(home: &Home) -> Value {
    let args = ["--json", "train", "continue", "--session", "s1"];
    let out = sf(home, &args);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?}: {e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let waits = matches!(
        report["state"].as_str(),
        Some("review_published" | "candidate_review_published")
    );
    assert_eq!(
        out.status.code(),
        Some(if waits { 4 } else { 0 }),
        "{report:#}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    report
}

fn setup(fake: &FakeGitHub) -> Home {
    let home = Home::embedded();
    write(
        &home.path().join("config.toml"),
        &format!(
            "[github]\napi_url = \"{}\"\ntoken = \"{}\"\nreview_stale_after_secs = 3600\n",
            fake.url,
            fake.token()
        ),
    );
    add_template(&home, PLANNER_TEMPLATE, "owner/repo");
    home
}

fn start(home: &Home) -> Value {
    let items = write(&home.path().join("in/items.yml"), ITEMS);
    ok_json(
        home,
        &start_args(&items, &["--workspace-repo", REPO, "--forge", "github"]),
    )
}

/// The review issue's comments by the bot (packets and candidate context) and everyone.
fn comments_on(fake: &FakeGitHub, number: u64) -> Vec<(String, String)> {
    let s = fake.state();
    s.issues[REPO][&number]
        .comments
        .iter()
        .map(|id| (s.comments[id].login.clone(), s.comments[id].body.clone()))
        .collect()
}

#[test]
fn a_full_train_iteration_reviewed_through_github_comments() {
    let fake = FakeGitHub::start("tok-train");
    let home = setup(&fake);
    assert_eq!(start(&home)["state"], "items_ready");

    // Options are generated and the blind packet becomes an issue of the workspace repo.
    let published = cont(&home);
    assert_eq!(published["state"], "review_published", "{published:#}");
    let url = published["issue_url"]
        .as_str()
        .expect("issue url")
        .to_owned();
    assert_eq!(url, format!("https://github.com/{REPO}/issues/1"));
    {
        let s = fake.state();
        assert_eq!(s.issues[REPO].len(), 1);
        let body = &s.issues[REPO][&1].body;
        assert!(
            body.contains("<!-- gitmoot:skillopt-feedback-packet -->") && body.contains("s1-i001"),
            "{body}"
        );
        assert!(
            s.requests.iter().all(|(_, _, authorized)| *authorized),
            "the [github] token is sent on every call"
        );
    }
    let st = status(&home);
    assert_eq!(
        (
            st["issue_url"].as_str(),
            st["continue_from_github"].as_bool()
        ),
        (Some(url.as_str()), Some(true)),
        "{st:#}"
    );
    assert_eq!(st["verbose"]["review_issue"]["number"], 1);
    let watch = &st["review_watch"];
    assert_eq!(
        (watch["issue"].as_str(), watch["status"].as_str()),
        (Some("acme/workspace#1"), Some("watching")),
        "{st:#}"
    );
    assert_eq!(
        watch["stale_threshold_seconds"], 3600,
        "[github] review_stale_after_secs is the watch's threshold"
    );
    assert_eq!(
        watch["expected_item_ids"],
        serde_json::json!(["add-cache", "fix-login"])
    );

    // No comment yet: continue syncs, finds nothing and waits; no second issue is opened.
    let waiting = cont(&home);
    assert_eq!(waiting["state"], "review_published");
    assert!(
        waiting["next_action"]
            .as_str()
            .unwrap()
            .contains("waiting for review comments"),
        "{waiting:#}"
    );
    assert_eq!(fake.state().issues[REPO].len(), 1);

    // A partial review plus a malformed comment: still waiting for fix-login, the malformed one reported.
    let (bad, _) = {
        let mut s = fake.state();
        let good = s.add_comment(REPO, 1, "alice", "add-cache ranking: B > A > C\nbest traits:\n- B: lists each change as a bullet\nreject:\n- C: too terse");
        let bad = s.add_comment(REPO, 1, "bob", "fix-login ranking: A > B");
        s.add_comment(REPO, 1, "carol", "Thanks, will look tomorrow.");
        (bad, good)
    };
    let partial = cont(&home);
    assert_eq!(partial["state"], "review_published");
    assert!(
        partial["next_action"]
            .as_str()
            .unwrap()
            .contains("fix-login"),
        "{partial:#}"
    );
    let steps = partial["steps"].to_string();
    assert!(
        steps.contains(&format!("issuecomment-{bad}")),
        "the malformed comment is named by URL: {steps}"
    );
    assert_eq!(status(&home)["counts"]["ranked_feedback_events"], 1);

    // The second reviewer answers fix-login: continue syncs, exports, runs the optimizer, imports.
    fake.state().add_comment(REPO, 1, "dan", "```yaml\nitems:\n- item_id: fix-login\n  ranking: \"A > C > B\"\n  required_improvements: [name the user-visible effect first]\n```");
    let optimized = cont(&home);
    assert_eq!(optimized["state"], "candidate_created", "{optimized:#}");
    let version = optimized["candidate_version"].as_str().unwrap().to_owned();
    let st = status(&home);
    assert_eq!(st["counts"]["ranked_feedback_events"], 2, "{st:#}");
    assert_eq!(st["continue_from_github"], false);
    assert_eq!(st["review_watch"]["status"], "synced");
    let training: Value = serde_json::from_str(
        &std::fs::read_to_string(home.path().join("train/s1/s1-i001/training.json"))
            .expect("training package"),
    )
    .unwrap();
    assert_eq!(
        training["feedback_context"]["review_issue"], "acme/workspace#1",
        "S-04 through train"
    );

    // Candidate review context goes to the issue as a comment, once.
    let reviewed = cont(&home);
    assert_eq!(
        reviewed["state"], "candidate_review_published",
        "{reviewed:#}"
    );
    let bot: Vec<String> = comments_on(&fake, 1)
        .into_iter()
        .filter(|(login, _)| login == "skillforge-bot")
        .map(|(_, b)| b)
        .collect();
    assert_eq!(bot.len(), 1, "{bot:?}");
    for want in [
        version.as_str(),
        "selection score",
        "evaluator / test scores",
        "gate status",
        "no-op",
        "promotable | true",
    ] {
        assert!(
            bot[0].contains(want),
            "candidate context lacks {want:?}: {}",
            bot[0]
        );
    }
    cont(&home);
    assert_eq!(
        comments_on(&fake, 1)
            .iter()
            .filter(|(login, _)| login == "skillforge-bot")
            .count(),
        1,
        "no second post"
    );

    // A manual re-sync of the issue skips the packet and the candidate comment and adds no row.
    let resync = ok_json(
        &home,
        &[
            "feedback", "github", "sync", "--run", "s1-i001", "--repo", REPO, "--issue", "1",
        ],
    );
    assert_eq!(
        (
            resync["feedback_events"]["inserted"].as_u64(),
            resync["ranked_feedback_events"]["inserted"].as_u64()
        ),
        (Some(0), Some(0))
    );

    ok_json(
        &home,
        &[
            "train",
            "continue",
            "--session",
            "s1",
            "--promote",
            &version,
        ],
    );
    assert_eq!(status(&home)["current_phase"], "candidate_promoted");

    // Both writes ran as durable jobs of workflow `github` and were applied once each.
    let jobs = ok_json(&home, &["jobs", "list", "--limit", "1000"]);
    let writes: Vec<&Value> = jobs
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["workflow"] == "github")
        .collect();
    assert_eq!(
        writes.len(),
        2,
        "the review issue and the candidate comment: {jobs:#}"
    );
    assert!(
        writes.iter().all(|j| j["state"] == "succeeded"),
        "{writes:#?}"
    );
    let applied = std::process::Command::new("sqlite3")
        .arg(home.path().join("skillforge.db"))
        .arg("SELECT COUNT(*), COUNT(DISTINCT write_key) FROM github_writes")
        .output()
        .expect("sqlite3 (Debian package sqlite3) is installed");
    assert_eq!(String::from_utf8_lossy(&applied.stdout).trim(), "2|2");
}

#[test]
fn forge_github_needs_an_owner_repo_workspace_and_writes_nothing() {
    let fake = FakeGitHub::start("tok");
    let home = setup(&fake);
    let items = write(&home.path().join("in/items.yml"), ITEMS);
    let dir = home.path().display().to_string();
    for (workspace, forge, want) in [
        (dir.as_str(), "github", "owner/repo"),
        (REPO, "gitlab", "--forge `gitlab`"),
    ] {
        let out = sf(
            &home,
            &start_args(&items, &["--workspace-repo", workspace, "--forge", forge]),
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(want), "{err}");
    }
    let out = sf(&home, &["train", "status", "--session", "s1"]);
    assert_eq!(out.status.code(), Some(2), "no session was written");
    assert!(fake.state().requests.is_empty());
}

// Facts §3 review watch: past its stale threshold with feedback still missing, `serve` posts one
// reminder on the review issue naming the missing items, and marks the watch notified.
#[test]
fn a_stale_review_watch_gets_one_reminder_from_serve() {
    let fake = FakeGitHub::start("tok-stale");
    let home = setup(&fake);
    write(
        &home.path().join("config.toml"),
        &format!(
            "[github]\napi_url = \"{}\"\ntoken = \"{}\"\nreview_stale_after_secs = 1\nwatch_every_secs = 1\n",
            fake.url,
            fake.token()
        ),
    );
    start(&home);
    assert_eq!(cont(&home)["state"], "review_published");
    fake.state()
        .add_comment(REPO, 1, "alice", "add-cache ranking: B > A > C");
    let mut serve = home.cmd();
    for var in [
        "SKILLFORGE_GITHUB_API_URL",
        "SKILLFORGE_GITHUB_TOKEN",
        "GITHUB_TOKEN",
        "GH_TOKEN",
    ] {
        serve.env_remove(var);
    }
    let log = std::fs::File::create(home.path().join("serve.log")).unwrap();
    let _serve = skillforge_tests::Reaped(
        serve
            .arg("serve")
            .stdin(std::process::Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    // The reminder is a durable write job: a worker runs it (its child reads [github] token of the home).
    let mut worker = home.cmd();
    for var in [
        "SKILLFORGE_GITHUB_API_URL",
        "SKILLFORGE_GITHUB_TOKEN",
        "GITHUB_TOKEN",
        "GH_TOKEN",
    ] {
        worker.env_remove(var);
    }
    let log = std::fs::File::create(home.path().join("worker.log")).unwrap();
    let _worker = skillforge_tests::Reaped(
        worker
            .args(["worker", "--name", "w1"])
            .stdin(std::process::Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    let reminders = |fake: &FakeGitHub| {
        comments_on(fake, 1)
            .into_iter()
            .filter(|(_, b)| b.starts_with("<!-- skillforge:publish-key="))
            .count()
    };
    home.wait(
        std::time::Duration::from_secs(60),
        "the stale reminder",
        || (reminders(&fake) > 0).then_some(()),
    );
    let body = comments_on(&fake, 1)
        .into_iter()
        .map(|(_, b)| b)
        .find(|b| b.contains("Reminder"))
        .unwrap();
    assert!(
        body.contains("`fix-login`") && !body.contains("`add-cache`"),
        "names only the missing item: {body}"
    );
    // Two more passes: still one reminder.
    let reads = fake
        .state()
        .count("GET", "/repos/acme/workspace/issues/1/comments");
    home.wait(
        std::time::Duration::from_secs(60),
        "two more passes",
        || {
            (fake
                .state()
                .count("GET", "/repos/acme/workspace/issues/1/comments")
                >= reads + 2)
                .then_some(())
        },
    );
    assert_eq!(reminders(&fake), 1);
    assert!(
        fake.state()
            .requests
            .iter()
            .all(|(_, _, authorized)| *authorized),
        "the write job used the home's [github] token"
    );
    let st = status(&home);
    assert_eq!(
        (
            st["review_watch"]["stale_notified"].as_bool(),
            st["review_watch"]["stale_threshold_seconds"].as_i64()
        ),
        (Some(true), Some(1)),
        "{st:#}"
    );
    // serve synced alice's comment already; train continue still waits for fix-login.
    assert_eq!(st["counts"]["ranked_feedback_events"], 1);
    assert_eq!(cont(&home)["state"], "review_published");
}
