//! Faults found by fault injection (issue 12), through the built binary: a submit that cannot
//! finish enqueues nothing, a full disk is exit 3 naming the file, parser limits, and bad flags
//! refused with exit 2 before anything is stored.

use skillforge_tests::Home;

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Issue 12 item 5: `jobs submit --wait` with a store it cannot open fails before enqueueing
/// (exit 3, naming the file), so running it again is never a silent second copy of the job.
#[test]
fn submit_wait_with_a_corrupt_store_enqueues_nothing() {
    let home = Home::embedded();
    std::fs::write(home.path().join("skillforge.db"), b"not a database, ".repeat(512)).unwrap();
    let out = home.run(&["jobs", "submit", "--wait", "--", "true"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("skillforge.db"), "names the file: {}", stderr(&out));
    let jobs = home.json(&["jobs", "list"]);
    assert_eq!(jobs.as_array().map(Vec::len), Some(0), "nothing enqueued: {jobs:#}");
}

/// Issue 12 item 6: Redis losing its data is said loudly, once, by `serve` and by a worker, and
/// a re-submit of an idempotency key the store shows applied is refused (exit 2) instead of
/// running the work a second time.
#[test]
fn redis_data_loss_is_reported_once_and_applied_keys_are_not_run_again() {
    use skillforge_tests::{Reaped, RedisServer, wait_for};
    let t = std::time::Duration::from_secs(60);
    let redis = RedisServer::start();
    let home = Home::redis(&redis.url());
    let _serve = Reaped(home.spawn_serve());
    let _worker = Reaped(home.spawn_worker("w", &[]));
    let first = home.json(&["jobs", "submit", "--idempotency-key", "deploy-42", "--", "true"]);
    let id = first["id"].as_str().unwrap().to_owned();
    wait_for(t, "the result applied by serve", || {
        home.job(&id)["applied"].as_array().filter(|a| !a.is_empty()).map(|_| ())
    });

    redis.cli(&["flushall"]).expect("flushall");
    home.wait(t, "serve and the worker to report the loss", || {
        let logs = home.logs();
        (logs.matches("lost its data").count() >= 2).then_some(())
    });
    let again = home.run(&["jobs", "submit", "--idempotency-key", "deploy-42", "--", "true"]);
    assert_eq!(again.status.code(), Some(2), "{}", stderr(&again));
    assert!(stderr(&again).contains("deploy-42") && stderr(&again).contains(&id), "{}", stderr(&again));
    let jobs = home.json(&["jobs", "list"]);
    assert_eq!(jobs.as_array().map(Vec::len), Some(0), "nothing enqueued: {jobs:#}");
    // Said once per process, not at every check.
    let logs = home.logs();
    assert_eq!(logs.matches("lost its data").count(), 2, "{logs}");
}
