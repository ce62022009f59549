//! The pull-request watcher of `skillforge serve` (issue 16 item 5) against the fake GitHub API:
//! ETag-conditional polls of `[github] watch_repos` feed the harvester through the same path as
//! `POST /events` — a merge with its statuses at the merged head, a review requesting changes (a
//! fix round), a Revert-button PR — so a webhook and a poll of one event apply once (S-15, S-22).

use std::time::Duration;

use serde_json::{Value, json};
use skillforge_tests::fake_github::FakeGitHub;
use skillforge_tests::webhook::{post, sign, spawn_serve, wait_listening};
use skillforge_tests::{CODER_TEMPLATE, Home, Reaped, add_template, free_port, write};

const SECRET: &str = "webhook-s3cret";
const REPO: &str = "acme/app";
const RUN: &str = "auto-trace:coder@v1";
const WAIT: Duration = Duration::from_secs(60);

fn floor_rows(home: &Home, pr: u32) -> Vec<Value> {
    let out = home.path().join("out/pkg.json");
    home.json(&["export", "--run", RUN, "--output", out.to_str().unwrap()]);
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

fn count(fake: &FakeGitHub, prefix: &str) -> usize {
    fake.state().count("GET", prefix)
}

fn setup(fake: &FakeGitHub, harvester: bool) -> Home {
    let home = Home::embedded();
    add_template(&home, CODER_TEMPLATE, "acme/templates");
    let skillopt = if harvester {
        "[skillopt]\nauto_trace_enabled = true\nreview_runtimes = []\n\n"
    } else {
        ""
    };
    write(
        &home.path().join("config.toml"),
        &format!(
            "{skillopt}[github]\napi_url = \"{}\"\ntoken = \"{}\"\nwatch_repos = [\"{REPO}\"]\nwatch_every_secs = 1\n",
            fake.url,
            fake.token()
        ),
    );
    for pr in ["5", "6"] {
        home.json(&[
            "harvest",
            "attribute",
            "--repo",
            REPO,
            "--pr",
            pr,
            "--template",
            "coder@v1",
            "--resolved-commit",
            "c0ffee",
        ]);
    }
    home
}

// S-15, S-22: a merge seen by the watcher and delivered by the webhook is one row; a fix round and a
// Revert-button PR come through the poll; an unchanged list is a 304 that costs no further calls.
#[test]
fn s15_s22_the_watcher_and_the_webhook_deliver_one_merge_as_one_row() {
    let fake = FakeGitHub::start("tok-watch");
    {
        let mut s = fake.state();
        s.add_pull(REPO, 5, "Adds the cache", "h5", Some("m5"));
        s.add_status(REPO, "h5", "ci/test", "success");
        s.add_pull(REPO, 6, "Login fix", "h6", None);
    }
    let home = setup(&fake, true);
    let port = free_port();
    let _serve = Reaped(spawn_serve(
        &home,
        port,
        Some(SECRET),
        &[("SKILLFORGE_GITHUB_API_URL", &fake.url)],
    ));
    wait_listening(&home, port);

    // The webhook delivers the same merge (GitHub's `pull_request` closed+merged payload).
    let delivery = json!({
        "action": "closed", "number": 5,
        "pull_request": {"number": 5, "merged": true, "merge_commit_sha": "m5", "head": {"sha": "h5"}, "body": "Adds the cache"},
        "repository": {"full_name": REPO},
    })
    .to_string();
    let (code, reply) = post(
        port,
        "pull_request",
        &delivery,
        Some(&sign(SECRET, &delivery)),
    );
    assert_eq!(code, 200, "{reply}");
    // The watcher read the merged head's statuses: then both have applied.
    home.wait(WAIT, "the watcher to read CI at the merged head", || {
        (count(&fake, "/repos/acme/app/commits/h5/status") > 0).then_some(())
    });
    home.wait(WAIT, "the merge row", || {
        (!floor_rows(&home, 5).is_empty()).then_some(())
    });
    let rows = floor_rows(&home, 5);
    assert_eq!(rows.len(), 1, "one merge, one row: {rows:#?}");
    assert_eq!(rows[0]["choice"], "a");

    // Unchanged: the list answers 304 and nothing more is read.
    let reviews_read = count(&fake, "/repos/acme/app/pulls/5/reviews");
    let answered_304 = fake.state().not_modified;
    home.wait(WAIT, "two conditional polls answered 304", || {
        (fake.state().not_modified >= answered_304 + 2).then_some(())
    });
    assert_eq!(
        count(&fake, "/repos/acme/app/pulls/5/reviews"),
        reviews_read,
        "a 304 poll reads no PR"
    );

    // A review requests changes on #6: a fix round, counted once though polled again.
    fake.state()
        .add_review(REPO, 6, 900, "CHANGES_REQUESTED", "rita");
    home.wait(WAIT, "the fix-round row", || {
        (!floor_rows(&home, 6).is_empty()).then_some(())
    });
    let lists = count(&fake, "/repos/acme/app/pulls?");
    home.wait(WAIT, "two more polls", || {
        (count(&fake, "/repos/acme/app/pulls?") >= lists + 2).then_some(())
    });
    let rows = floor_rows(&home, 6);
    assert_eq!(
        (rows.len(), rows[0]["choice"].as_str()),
        (1, Some("b")),
        "{rows:#?}"
    );
    let events = home.json(&["harvest", "status"]);
    assert_eq!(events["feedback_events"], 2, "{events:#}");

    // A Revert-button PR merged in the same repository flips #5's row in place (S-22).
    fake.state().add_pull(
        REPO,
        7,
        "Reverts acme/app#5\n\nThis reverts commit m5.",
        "h7",
        Some("m7"),
    );
    home.wait(WAIT, "the revert to flip #5", || {
        floor_rows(&home, 5)
            .first()
            .filter(|r| r["choice"] == "b")
            .map(|_| ())
    });
    assert_eq!(floor_rows(&home, 5).len(), 1, "the row count is unchanged");
    assert!(
        fake.state()
            .requests
            .iter()
            .all(|(_, _, authorized)| *authorized)
    );
}

// S-13: with the harvester off the watcher requests nothing from GitHub.
#[test]
fn s13_the_watcher_is_off_while_the_harvester_is() {
    let fake = FakeGitHub::start("tok");
    fake.state().add_pull(REPO, 5, "", "h5", Some("m5"));
    let home = setup(&fake, false);
    let port = free_port();
    let _serve = Reaped(spawn_serve(&home, port, Some(SECRET), &[]));
    wait_listening(&home, port);
    home.wait(WAIT, "serve to log the watcher is off", || {
        home.logs()
            .contains("pull requests are not polled")
            .then_some(())
    });
    assert_eq!(fake.state().requests.len(), 0);
}
