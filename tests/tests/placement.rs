//! The placement deadline (issue 35 item 6): a job that requires labels no live worker offers
//! fails after `[queue] unplaceable_after_secs`, naming the labels, instead of waiting to run
//! whenever such a worker appears; a job a live worker can take is never failed by it, however
//! long it waits. `serve` applies it to every job; a waiting command to the jobs it waits for.

use std::time::Duration;

use serde_json::Value;
use skillforge_tests::{Backend, Home, Reaped, on_both_backends};

const WAIT: Duration = Duration::from_secs(60);

/// `[queue] unplaceable_after_secs = SECS` in the home's config.
fn with_deadline(home: &Home, secs: u64) {
    std::fs::create_dir_all(home.path()).unwrap();
    skillforge_tests::write(
        &home.path().join("config.toml"),
        &format!("[queue]\nunplaceable_after_secs = {secs}\n"),
    );
}

fn presence(home: &Home, name: &str) {
    home.wait(WAIT, &format!("worker {name}'s presence lock"), || {
        let locks = home.json(&["locks"]);
        locks
            .as_array()?
            .iter()
            .any(|l| {
                l["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with(&format!("worker:{name}-")))
            })
            .then_some(())
    });
}

fn reason(job: &Value) -> String {
    job["outcome"]["exit"]["reason"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Under `serve`, a job requiring `host=db9` (no live worker has it) fails after the deadline,
/// unrun, naming the label and the worker to start; a job waiting as long behind a busy worker
/// that offers its label is not failed; once a `host=db9` worker runs, the old job stays failed
/// (nothing fires by itself) and a submit under its key runs it there.
fn serve_fails_a_job_no_live_worker_can_take_and_only_that(b: Backend) {
    let home = b.home();
    with_deadline(&home, 2);
    let _busy = Reaped(home.spawn_worker("busy", &["--label", "host=busy", "--concurrency", "1"]));
    presence(&home, "busy");
    let _serve = Reaped(home.spawn_serve());
    // The busy worker's only slot runs for longer than the deadline; the job behind it waits.
    let long = home.submit(
        &["--require", "host=busy", "--attempts", "1"],
        &["sleep", "4"],
    );
    home.wait_job(&long, WAIT, "the long job to run", |j| {
        j["state"] == "running"
    });
    let behind = home.submit(&["--require", "host=busy", "--attempts", "1"], &["true"]);
    let nowhere = home.submit(
        &[
            "--require",
            "host=db9",
            "--attempts",
            "1",
            "--idempotency-key",
            "deploy-db9",
        ],
        &["true"],
    );

    let failed = home.wait_job(&nowhere, WAIT, "the unplaceable job to fail", |j| {
        j["state"] != "queued"
    });
    assert_eq!(failed["state"], "failed", "{failed:#}");
    assert_eq!(failed["attempts"], 0, "it never ran: {failed:#}");
    let why = reason(&failed);
    assert!(
        why.contains("label(s) host=db9") && why.contains("for 2 s") && why.contains("busy-"),
        "{why}"
    );
    assert!(why.contains("skillforge worker --label host=db9"), "{why}");
    let human = String::from_utf8(home.run(&["jobs", "show", &nowhere]).stdout).unwrap();
    assert!(
        human.contains("host=db9"),
        "the human view gives the reason: {human}"
    );

    let behind = home.wait_job(
        &behind,
        WAIT,
        "the job behind the busy worker to end",
        |j| j["state"] == "succeeded" || j["state"] == "failed",
    );
    assert_eq!(
        behind["state"], "succeeded",
        "a job a live worker offers its labels for is never failed: {behind:#}"
    );

    // A db9 worker now: the failed job does not fire; submitting again under its key runs it.
    let _db9 = Reaped(home.spawn_worker("db9", &["--label", "host=db9"]));
    presence(&home, "db9");
    assert_eq!(home.job(&nowhere)["state"], "failed");
    let again = home.submit(
        &[
            "--require",
            "host=db9",
            "--attempts",
            "1",
            "--idempotency-key",
            "deploy-db9",
        ],
        &["true"],
    );
    assert_eq!(again, nowhere, "the same job, started anew");
    let ran = home.wait_job(&nowhere, WAIT, "the restarted job to succeed", |j| {
        j["state"] == "succeeded"
    });
    assert!(
        ran["history"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["worker"].as_str().unwrap().starts_with("db9-")),
        "{ran:#}"
    );
}

/// Without `serve`, the waiting command applies the deadline to its own job: `jobs submit
/// --wait` of a job no worker (the in-process one included) can take ends failed with the
/// reason, exit 1, and a deadline of 0 turns it off (the same job stays queued past 2 s).
fn a_waiting_command_fails_its_unplaceable_job(b: Backend) {
    let home = b.home();
    with_deadline(&home, 1);
    let _plain = Reaped(home.spawn_worker("plain", &[]));
    presence(&home, "plain");
    let log = home.path().join("waiting.txt");
    let mut waiting = Reaped(
        home.cmd()
            .args([
                "jobs",
                "submit",
                "--require",
                "host=db9",
                "--attempts",
                "1",
                "--wait",
                "--",
                "true",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    let status = skillforge_tests::wait_exit(&mut waiting.0, WAIT);
    let stderr = std::fs::read_to_string(&log).unwrap();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("failed (not runnable): no live worker offers the label(s) host=db9"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("ERROR"),
        "said once in words, not also as a log line:\n{stderr}"
    );

    with_deadline(&home, 0);
    let mut waiting = Reaped(
        home.cmd()
            .args([
                "jobs",
                "submit",
                "--require",
                "host=db9",
                "--attempts",
                "1",
                "--idempotency-key",
                "off",
                "--wait",
                "--",
                "true",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let id = home.wait(WAIT, "the second job to be queued", || {
        let jobs = home.json(&["jobs", "list"]);
        jobs.as_array()?
            .iter()
            .find(|j| j["idempotency_key"] == "off")
            .map(|j| j["id"].as_str().unwrap().to_owned())
    });
    // Nothing is to happen, so the check needs a window: three times the first part's deadline.
    let until = std::time::Instant::now() + Duration::from_secs(3);
    home.wait(WAIT, "three seconds of waiting", || {
        (std::time::Instant::now() >= until).then_some(())
    });
    assert!(waiting.0.try_wait().unwrap().is_none(), "the wait goes on");
    assert_eq!(home.job(&id)["state"], "queued", "0 turns the deadline off");
}

/// The case that asked for the deadline: `eval deploy --to` a host no worker serves fails,
/// naming the label, instead of leaving a job that installs the day a worker starts there.
#[test]
fn eval_deploy_to_a_host_without_a_worker_fails_naming_it() {
    let redis = skillforge_tests::RedisServer::start();
    let home = Home::redis(&redis.url());
    with_deadline(&home, 1);
    let tree = home.path().join("checkout/tldr");
    std::fs::create_dir_all(&tree).unwrap();
    std::fs::write(
        tree.join("SKILL.md"),
        "---\nname: tldr\ndescription: short replies\n---\nKeep it short.\n",
    )
    .unwrap();
    let _other = Reaped(home.spawn_worker("other", &["--label", "host=elsewhere"]));
    presence(&home, "other");
    let root = home.path().join("remote-skills");
    let log = home.path().join("deploy.txt");
    let mut deploy = Reaped(
        home.cmd()
            .args(["eval", "deploy", "--to", "db9", "--root"])
            .arg(&root)
            .arg(&tree)
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    let status = skillforge_tests::wait_exit(&mut deploy.0, WAIT);
    let stderr = std::fs::read_to_string(&log).unwrap();
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains("no live worker offers the label(s) host=db9"),
        "the failure names the label no worker has: {stderr}"
    );
    let jobs = home.json(&["jobs", "list"]);
    let job = jobs
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["stage"] == "deploy")
        .expect("the deploy job");
    assert_eq!(job["state"], "failed", "{job:#}");
    assert!(!root.exists(), "nothing installed");
}

on_both_backends!(
    serve_fails_a_job_no_live_worker_can_take_and_only_that,
    a_waiting_command_fails_its_unplaceable_job
);
