//! No idempotency traps (issue 35 item 6): a keyed submit whose job ended `failed`/`dead` because
//! it could not run (`not_runnable`) starts a new attempt with this submit's environment and says
//! so; a job that ran and failed is returned as it is; `jobs retry --env` replaces env values.
//! On both queue backends, with a real worker process.

use std::time::Duration;

use serde_json::Value;
use skillforge_tests::{Backend, Home, Reaped, on_both_backends};

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
    retry_env_replaces_values
);
