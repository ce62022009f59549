//! The closed loop with no human step (issue 37, "Done when"; seed: SkillOpt, "Automatic
//! trace-harvested feedback (Mode A, off by default)", "Promotion policy + notifications" ›
//! Auto-promote; S-51, S-52, S-56, S-60, S-61, S-62): on each backend, with `serve` and a
//! worker running, the demo's candidate is decided by webhooks alone. Its pull requests arrive as
//! signed GitHub deliveries whose bodies carry the `Skillforge-Template` trailer (no `harvest
//! attribute`); `serve` re-runs the guardrails on that evidence and starts the canary; the
//! outcomes from before the canary started do not count toward its window, which holds until
//! outcomes after its start arrive, then graduates. Round two: the graduated version's auto-trace
//! run is exported, the built-in optimizer distills a candidate from it, and that candidate,
//! imported, goes the same way until its worse outcomes roll it back. `ask` serves the right
//! version at every step; every event is sent once.

use std::process::{Child, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use skillforge_tests::decide::{config, events, sql};
use skillforge_tests::webhook::{post, sign, wait_listening};
use skillforge_tests::{Home, Reaped, RedisServer, free_port, git, path_arg, write};

const SECRET: &str = "webhook-s3cret";
const REPO: &str = "acme/app";
const TEMPLATE: &str = "change-summarizer";
const WAIT: Duration = Duration::from_secs(90);

/// A small repository for the demo: three commits on `main`.
fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    git(p, &["init", "-q", "-b", "main"]);
    for (n, text) in [
        "pub fn add(a: i64, b: i64) -> i64 {\n    a + b\n}\n",
        "pub fn add(a: i64, b: i64) -> i64 {\n    a + b\n}\n\npub fn sub(a: i64, b: i64) -> i64 {\n    a - b\n}\n",
        "pub fn add(a: i64, b: i64) -> i64 {\n    a + b\n}\n\npub fn sub(a: i64, b: i64) -> i64 {\n    a - b\n}\n\npub fn neg(a: i64) -> i64 {\n    -a\n}\n",
    ]
    .iter()
    .enumerate()
    {
        write(&p.join("src/lib.rs"), text);
        git(p, &["add", "-A"]);
        git(p, &["commit", "-q", "-m", &format!("calc: step {n}")]);
    }
    dir
}

fn version(n: u32) -> String {
    format!("{TEMPLATE}@v{n}")
}

fn state(home: &Home, version: &str) -> String {
    sql(
        home,
        &format!("SELECT state FROM agent_template_versions WHERE id = '{version}'"),
    )
}

fn wait_state(home: &Home, version: &str, want: &str) {
    home.wait(WAIT, &format!("{version} to be {want}"), || {
        (state(home, version) == want).then_some(())
    });
}

/// `serve` with the webhook secret, re-running the guardrails every 50 ms and checking the
/// canaries every second; its log `<home>/serve.log`.
fn spawn_serve(home: &Home, port: u16) -> Child {
    let log = std::fs::File::create(home.path().join("serve.log")).unwrap();
    home.cmd()
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--decide-every-ms",
            "50",
            "--canary-check-every-secs",
            "1",
        ])
        .env("SKILLFORGE_WEBHOOK_SECRET", SECRET)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap()
}

fn serve_log(home: &Home) -> String {
    std::fs::read_to_string(home.path().join("serve.log")).unwrap_or_default()
}

/// The webhook sender: GitHub deliveries signed with the secret, each pull request numbered anew.
struct Forge {
    port: u16,
    next_pr: u32,
}

impl Forge {
    fn deliver(&self, event: &str, body: &Value) -> Value {
        let body = body.to_string();
        let (code, reply) = post(self.port, event, &body, Some(&sign(SECRET, &body)));
        assert_eq!(code, 200, "{event}: {reply}");
        reply
    }

    /// A pull request written by `version`: passing external CI at its head, then merged with
    /// the trailer in its body; `reverted`: then reverted by another merged pull request.
    /// Returns the pull request's number.
    fn merged(&mut self, version: &str, reverted: bool) -> u32 {
        self.next_pr += 1;
        let pr = self.next_pr;
        let head = format!("h{pr}");
        self.deliver(
            "status",
            &json!({"sha": head, "state": "success", "context": "ci/build", "description": "",
                    "repository": {"full_name": REPO}}),
        );
        let reply = self.deliver(
            "pull_request",
            &json!({"action": "closed", "number": pr,
                    "pull_request": {"number": pr, "merged": true, "merge_commit_sha": format!("m{pr}"),
                                     "head": {"sha": head},
                                     "body": format!("Summarizes the change.\n\nSkillforge-Template: {version}\n")},
                    "repository": {"full_name": REPO}}),
        );
        assert_eq!(
            reply["attributed"][0].as_str().map(|a| a.contains(version)),
            Some(true),
            "{reply}"
        );
        if reverted {
            self.deliver(
                "skillforge_outcome",
                &json!({"repo": REPO, "pr": pr, "outcome": "reverted"}),
            );
        }
        pr
    }
}

/// `ask` answers from `allowed` versions only; returns the version that answered.
fn ask(home: &Home, allowed: &[&str]) -> String {
    let answer = home.json(&["ask", TEMPLATE, "Summarize the last change"]);
    let served = answer["version"].as_str().unwrap_or_default().to_owned();
    assert!(
        allowed.contains(&served.as_str()),
        "ask served {served}, expected one of {allowed:?}: {answer}"
    );
    served
}

/// Asks until each of `versions` has answered at least once (the canary is a sampled fraction).
fn ask_until_each_served(home: &Home, versions: &[&str]) {
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..60 {
        seen.insert(ask(home, versions));
        if seen.len() == versions.len() {
            return;
        }
    }
    panic!("in 60 asks only {seen:?} of {versions:?} answered");
}

/// The events sent, oldest first: (name, candidate version).
fn event_names(home: &Home) -> Vec<(String, String)> {
    events(home)
        .iter()
        .map(|e| {
            (
                e["event"].as_str().unwrap_or_default().to_owned(),
                e["job_id"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

fn closed_loop(home: Home) {
    let repo = repo();
    config(
        &home,
        "[skillopt]\nauto_trace_enabled = true\nauto_promote = true\nauto_promote_min_samples = 10\n\
         auto_promote_min_score = 0.0\nauto_promote_canary = true\nauto_promote_canary_sample = 0.5\n\
         [events]\njsonl = \"events.jsonl\"\n",
    );
    let _worker = Reaped(home.spawn_worker("loop", &[]));
    // Setup: the demo leaves its candidate pending.
    let demo = home.run(&["demo", "--repo", path_arg(repo.path())]);
    assert!(
        demo.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&demo.stderr),
        home.logs()
    );
    assert_eq!(state(&home, &version(2)), "pending");
    assert_eq!(ask(&home, &[&version(1)]), version(1));

    let port = free_port();
    let _serve = Reaped(spawn_serve(&home, port));
    wait_listening(&home, port);
    let mut forge = Forge { port, next_pr: 0 };

    // Round one. The champion's pull requests fail, the candidate's pass; the tenth outcome of
    // the candidate meets the sample floor and serve starts the canary. The demo's candidate has
    // a held-out replay score when its rankings allow one, else none (its canary outcomes decide
    // it); the score floor is 0 so either way the outcomes decide here.
    for _ in 0..10 {
        forge.merged(&version(1), true);
    }
    for _ in 0..10 {
        forge.merged(&version(2), false);
    }
    wait_state(&home, &version(2), "canary");
    // Issue 37 item 1: the twenty outcomes from before the start are the guardrails' evidence,
    // not the canary's: its window holds with nothing of its own.
    home.wait(WAIT, "serve to check the new canary's window", || {
        serve_log(&home)
            .lines()
            .find(|l| l.contains(&format!("canary window of {}", version(2))))
            .map(str::to_owned)
    });
    let first = serve_log(&home)
        .lines()
        .find(|l| l.contains(&format!("canary window of {}", version(2))))
        .unwrap()
        .to_owned();
    assert!(first.contains(": hold ("), "{first}");
    assert_eq!(state(&home, &version(2)), "canary", "{first}");
    ask_until_each_served(&home, &[&version(1), &version(2)]);

    // Outcomes after the start: the canary at parity or better graduates, by serve alone.
    for n in 0..10 {
        forge.merged(&version(2), n == 0);
        forge.merged(&version(1), n % 2 == 0);
    }
    wait_state(&home, &version(2), "current");
    assert_eq!(state(&home, &version(1)), "superseded");
    for _ in 0..3 {
        assert_eq!(ask(&home, &[&version(2)]), version(2));
    }

    // Round two: the graduated version's harvested run, distilled and imported.
    let training = home.path().join("round2-training.json");
    home.json(&[
        "export",
        "--run",
        &format!("auto-trace:{}", version(2)),
        "--output",
        path_arg(&training),
    ]);
    let out_root = home.path().join("round2-out");
    let candidate = home.path().join("round2-candidate.json");
    let report = home.json(&[
        "optimizer",
        "distill",
        "--training-package",
        path_arg(&training),
        "--artifact-root",
        path_arg(&home.path().join("blobs")),
        "--out-root",
        path_arg(&out_root),
        "--candidate-output",
        path_arg(&candidate),
    ]);
    assert_eq!(report["promotable"], true, "{report:#}");
    let imported = home.json(&[
        "import",
        "--file",
        path_arg(&candidate),
        "--artifact-dir",
        path_arg(&out_root.join("artifacts")),
    ]);
    assert_eq!(imported["version_id"], version(3), "{imported}");
    assert_eq!(ask(&home, &[&version(2)]), version(2));
    for _ in 0..10 {
        forge.merged(&version(3), false);
    }
    wait_state(&home, &version(3), "canary");
    // Worse after its start: rolled back, the champion stays.
    for _ in 0..10 {
        forge.merged(&version(3), true);
        forge.merged(&version(2), false);
    }
    wait_state(&home, &version(3), "rejected");
    assert_eq!(state(&home, &version(2)), "current");
    for _ in 0..3 {
        assert_eq!(ask(&home, &[&version(2)]), version(2));
    }

    // A decision's event follows its state change (on a shared queue, by one ingestion pass).
    home.wait(WAIT, "the rollback's event", || {
        (events(&home).len() >= 6).then_some(())
    });
    let sent = event_names(&home);
    let (v2, v3) = (version(2), version(3));
    assert_eq!(
        sent,
        [
            ("candidate.awaiting_promotion", &v2),
            ("candidate.canary_started", &v2),
            ("candidate.auto_promoted", &v2),
            ("candidate.awaiting_promotion", &v3),
            ("candidate.canary_started", &v3),
            ("candidate.rolled_back", &v3),
        ]
        .map(|(n, v)| (n.to_owned(), v.clone())),
        "every event once"
    );
    // Each window decided on its own outcomes: ten a side after its start, none from before.
    let all = events(&home);
    let graduated = &all[2]["detail"];
    assert_eq!(
        (
            &graduated["canary_outcomes"]["total"],
            &graduated["champion_outcomes"]["total"],
            &graduated["canary_outcomes"]["positives"]
        ),
        (&json!(10), &json!(10), &json!(9)),
        "{graduated}"
    );
    let rolled_back = &all[5]["detail"];
    assert_eq!(
        (
            &rolled_back["canary_outcomes"]["positives"],
            &rolled_back["canary_outcomes"]["total"]
        ),
        (&json!(0), &json!(10)),
        "{rolled_back}"
    );
}

#[test]
fn the_loop_closes_by_webhooks_alone_on_the_embedded_queue() {
    closed_loop(Home::embedded());
}

#[test]
fn the_loop_closes_by_webhooks_alone_on_redis() {
    let redis = RedisServer::start();
    closed_loop(Home::redis(&redis.url()));
}
