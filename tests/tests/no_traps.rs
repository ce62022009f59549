//! No idempotency traps (issue 35 item 6): a keyed submit whose job ended `failed`/`dead` because
//! it could not run (`not_runnable`) starts a new attempt with this submit's environment and says
//! so; a job that ran and failed is returned as it is; `jobs retry --env` replaces env values.
//! On both queue backends, with a real worker process.

use std::time::Duration;

use serde_json::Value;
use skillforge_tests::{Backend, Home, Reaped, RedisServer, on_both_backends};

const WAIT: Duration = Duration::from_secs(30);

/// A command that cannot run without `TOKEN` (exit 127, as a missing program exits).
const NEEDS_TOKEN: &str = "test -n \"$TOKEN\" || exit 127; echo \"token ok\"";

fn state(job: &Value) -> &str {
    job["state"].as_str().unwrap_or("")
}

fn settled(home: &Home, id: &str) -> Value {
    home.wait_job(id, WAIT, "job settled", |j| {
        matches!(state(j), "succeeded" | "failed" | "dead")
    })
}

fn submit(home: &Home, flags: &[&str], cmd: &str) -> std::process::Output {
    let mut args = vec!["jobs", "submit", "--attempts", "1"];
    args.extend_from_slice(flags);
    args.extend(["--", "sh", "-c", cmd]);
    home.run(&args)
}

fn keyed_not_runnable_job_restarts_with_the_new_environment(b: Backend) {
    let home = b.home();
    let _worker = Reaped(home.spawn_worker("w", &[]));
    let out = submit(&home, &["--idempotency-key", "publish-1"], NEEDS_TOKEN);
    assert!(out.status.success());
    let id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let first = settled(&home, &id);
    assert!(matches!(state(&first), "failed" | "dead"), "{first:#}");
    assert_eq!(
        first["outcome"]["exit"]["status"], "not_runnable",
        "{first:#}"
    );

    // The same key, now with the token: a new attempt of the same job, said on stderr.
    let out = submit(
        &home,
        &["--idempotency-key", "publish-1", "--env", "TOKEN=s3cret"],
        NEEDS_TOKEN,
    );
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        id,
        "the key still names the same job"
    );
    assert!(
        stderr.contains("could not run") && stderr.contains("started a new attempt"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("s3cret"),
        "env values are never printed: {stderr}"
    );
    let second = settled(&home, &id);
    assert_eq!(state(&second), "succeeded", "{second:#}");

    // A job that ran and failed is not restarted: the key returns it as it is.
    let out = submit(&home, &["--idempotency-key", "fails-1"], "exit 1");
    let failed_id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert_eq!(state(&settled(&home, &failed_id)), "dead");
    let out = submit(
        &home,
        &["--idempotency-key", "fails-1", "--json", "--env", "TOKEN=x"],
        "exit 1",
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "another environment for a job that ran is another payload: refused"
    );
    let out = submit(&home, &["--idempotency-key", "fails-1", "--json"], "exit 1");
    let again: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (
            again["id"].as_str(),
            again["created"].as_bool(),
            &again["restarted"]
        ),
        (Some(failed_id.as_str()), Some(false), &Value::Null)
    );
    assert_eq!(state(&home.job(&failed_id)), "dead");
}

fn retry_env_replaces_values(b: Backend) {
    let home = b.home();
    let _worker = Reaped(home.spawn_worker("w", &[]));
    let out = submit(
        &home,
        &["--env", "TOKEN=old", "--env", "KEEP=1"],
        "test \"$TOKEN\" = new && test \"$KEEP\" = 1",
    );
    let id = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert_eq!(state(&settled(&home, &id)), "dead");
    let out = home.run(&["jobs", "retry", &id, "--env", "TOKEN=new"]);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success()
            && stdout.contains("queued again with TOKEN replaced")
            && !stdout.contains("new"),
        "{stdout}"
    );
    let job = home.wait_job(&id, WAIT, "retried job succeeded", |j| {
        state(j) == "succeeded"
    });
    assert_eq!(
        job["attempts_history"]
            .as_array()
            .map_or(2, |h| h.len().max(2)),
        2
    );
    // Bad input leaves the job as it was.
    let out = home.run(&["jobs", "retry", &id, "--env", "NOEQUALS"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--env `NOEQUALS` is not NAME=VALUE"));
    assert_eq!(state(&home.job(&id)), "succeeded");
}

on_both_backends!(
    keyed_not_runnable_job_restarts_with_the_new_environment,
    retry_env_replaces_values,
    a_second_serve_on_one_home_refuses_to_start_and_names_the_first
);

/// A second `serve` on a home whose control plane runs refuses to start (exit 2), naming the
/// running one (pid, host, how long it has run) and what to do; once that one is gone (even
/// killed with SIGKILL, leaving its lock file behind) a new one starts. On both queue backends.
fn a_second_serve_on_one_home_refuses_to_start_and_names_the_first(b: Backend) {
    let home = b.home();
    let mut first = Reaped(home.spawn_serve());
    home.wait(WAIT, "the first serve to take the home", || {
        home.logs().contains("control plane on").then_some(())
    });
    let out = home.run(&["serve"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let host = this_host();
    let pid = first.0.id();
    assert!(
        stderr.contains("already running")
            && stderr.contains(&format!("pid {pid} on host {}", host))
            && stderr.contains("running for ")
            && stderr.contains(&format!("stop it (`kill {pid}`)")),
        "{stderr}"
    );
    first.0.kill().unwrap();
    let _ = first.0.wait();
    let mut second = Reaped(home.spawn_serve());
    home.wait(WAIT, "a new serve after the first was killed", || {
        (home.logs().matches("control plane on").count() == 2).then_some(())
    });
    assert!(second.0.try_wait().unwrap().is_none(), "{}", home.logs());
}

/// This machine's hostname, as a `serve` names it.
fn this_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_owned()
}

/// Two `serve`s of different homes over one Redis queue both run, and the second says so at
/// start, naming the first (pid, host); when the first is killed (SIGKILL) the second takes over
/// the queue's control-plane lock once the first's heartbeat is stale (docs/fleet.md).
#[test]
fn a_second_serve_on_one_queue_from_another_home_says_so_and_takes_over() {
    let redis = RedisServer::start();
    let (a, b) = (Home::redis(&redis.url()), Home::redis(&redis.url()));
    let lock_holder = |home: &Home| -> Option<u64> {
        home.json(&["locks"])
            .as_array()?
            .iter()
            .find(|l| l["name"] == "control-plane:serve" && l["status"] == "active")
            .and_then(|l| l["owner_pid"].as_u64())
    };
    let mut first = Reaped(a.spawn_serve());
    let first_pid = u64::from(first.0.id());
    a.wait(WAIT, "the first serve to hold the queue lock", || {
        (lock_holder(&a) == Some(first_pid)).then_some(())
    });
    let second = Reaped(b.spawn_serve());
    let host = this_host();
    let said = b.wait(WAIT, "the second serve to say the first runs", || {
        let logs = b.logs();
        logs.contains("another serve (").then_some(logs)
    });
    assert!(
        said.contains(&format!(
            "another serve (pid {first_pid} on host {}, running for ",
            host
        )) && said.contains("results are ingested by whichever applies first"),
        "{said}"
    );
    assert!(second.0.id() > 0);
    first.0.kill().unwrap();
    let _ = first.0.wait();
    let second_pid = u64::from(second.0.id());
    b.wait(WAIT, "the second serve to take the queue lock over", || {
        (lock_holder(&b) == Some(second_pid)).then_some(())
    });
    // One home, one serve each: neither refused.
    assert!(!b.logs().contains("already running"), "{}", b.logs());
}

/// A command run on a home that does not exist (a mistyped `--home`) says it starts an empty one
/// there, once; on the next run, the home exists and nothing is said.
#[test]
fn a_command_on_a_missing_home_says_it_starts_an_empty_one() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("typo-home");
    let run = || {
        std::process::Command::new(skillforge_tests::bin())
            .args(["--home", home.to_str().unwrap(), "template", "list"])
            .output()
            .unwrap()
    };
    let first = run();
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert!(first.status.success(), "{stderr}");
    assert_eq!(
        stderr
            .matches("did not exist; starting an empty one")
            .count(),
        1,
        "{stderr}"
    );
    assert!(
        stderr.contains("typo-home") && stderr.contains("skillforge init"),
        "{stderr}"
    );
    let second = run();
    assert!(
        !String::from_utf8_lossy(&second.stderr).contains("did not exist"),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
}
