//! The stage port's contract, on both backends: a command that waits for its job returns only
//! once the job's result is applied (recorded in the home's store by its family's handler) with
//! no `serve` running, and every job a command submits is recorded as the home's pending work.

use std::process::Command;

use skillforge_tests::{Home, Reaped, RedisServer, path_arg};

/// `SELECT <column> FROM <table> WHERE job_id = <job>` on the home's store, one row per line.
fn store_rows(home: &Home, table: &str, column: &str, job: &str) -> String {
    let db = home.path().join("skillforge.db");
    let out = Command::new("sqlite3")
        .arg(&db)
        .arg(format!(
            "SELECT {column} FROM {table} WHERE job_id = '{job}'"
        ))
        .output()
        .expect("run sqlite3");
    assert!(
        out.status.success(),
        "sqlite3 on {}: {}",
        path_arg(&db),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// `jobs submit --wait` of `true`; returns the job id once the command has returned.
fn submit_and_wait(home: &Home) -> String {
    let out = home.json(&["jobs", "submit", "--wait", "--", "true"]);
    assert_eq!(out["state"], "succeeded", "{out:#}");
    out["id"].as_str().expect("job id").to_owned()
}

#[test]
fn a_wait_on_the_embedded_queue_returns_with_the_result_applied() {
    let home = Home::embedded();
    let id = submit_and_wait(&home);
    assert_eq!(
        store_rows(&home, "applied_results", "state", &id),
        "succeeded",
        "applied before the command returned"
    );
    // Applied work is no longer pending (the row goes in the applying transaction).
    assert_eq!(store_rows(&home, "submitted_jobs", "workflow", &id), "");
}

#[test]
fn a_commands_job_is_recorded_as_pending_work_until_it_is_applied() {
    let home = Home::embedded();
    let id = home.submit(&["--idempotency-key", "pending-1"], &["true"]);
    assert_eq!(
        store_rows(&home, "submitted_jobs", "workflow", &id),
        "adhoc",
        "recorded as the home's pending work"
    );
    // The same key again returns the same job and records nothing twice.
    assert_eq!(
        home.submit(&["--idempotency-key", "pending-1"], &["true"]),
        id
    );
    assert_eq!(store_rows(&home, "submitted_jobs", "count(*)", &id), "1");
}

#[test]
fn a_wait_on_redis_returns_with_the_result_applied_without_serve() {
    let redis = RedisServer::start();
    let home = Home::redis(&redis.url());
    let _worker = Reaped(home.spawn_worker("w", &[]));
    let id = submit_and_wait(&home);
    // No `serve` ingests this queue: the waiting command applied the result itself.
    assert_eq!(
        store_rows(&home, "applied_results", "state", &id),
        "succeeded",
        "applied before the command returned\n{}",
        home.logs()
    );
    let pending = home.json(&["jobs", "show", &id]);
    assert_eq!(pending["state"], "succeeded", "{pending:#}");
}
