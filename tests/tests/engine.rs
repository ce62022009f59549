//! Engine conformance: the same scenarios against the embedded SQLite queue and a real Redis, through the built binary.

use std::time::Duration;

use nix::sys::signal::Signal;
use serde_json::Value;
use skillforge_tests::{Backend, Home, Reaped, RedisServer, signal, wait_exit, wait_for};

skillforge_tests::on_both_backends!(
    submit_wait_echo,
    sigkill_mid_job_completes_elsewhere_with_one_effect,
    sigstop_past_stale_after_then_resumed_is_fenced,
    always_failing_job_runs_exactly_attempts_times_then_dead,
    job_that_kills_its_worker_is_bounded_by_attempts,
    two_workers_with_the_same_name_never_mask_each_other,
    cancel_reaches_a_running_job,
    graceful_shutdown_hands_leases_back,
    long_job_under_full_cpu_load_keeps_its_lease,
    idempotency_key_returns_the_first_job,
    jobs_sharing_a_lock_never_overlap,
    a_sigkilled_workers_job_process_dies_with_it,
);

const T: Duration = Duration::from_secs(60);

fn state(job: &Value) -> &str {
    job["state"].as_str().unwrap_or("?")
}

fn owner(job: &Value) -> Option<String> {
    job["lease"]["owner_worker"].as_str().map(str::to_owned)
}

fn history_results(job: &Value) -> Vec<String> {
    job["history"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["result"].as_str().unwrap_or("running").to_owned())
        .collect()
}

fn submit_wait_echo(b: Backend) {
    let home = b.home();
    let _worker = match &b {
        Backend::Sqlite => None,
        Backend::Redis(_) => Some(Reaped(home.spawn_worker("w", &[]))),
    };
    let out = home.run(&["jobs", "submit", "--wait", "--", "echo", "hello"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hello\n");
    let out = home.run(&[
        "jobs",
        "submit",
        "--wait",
        "--attempts",
        "1",
        "--",
        "sh",
        "-c",
        "exit 7",
    ]);
    assert_eq!(out.status.code(), Some(1), "a failing job exits 1");
}

/// A worker SIGKILLed mid-job: the job completes on another worker, and its result is applied once.
fn sigkill_mid_job_completes_elsewhere_with_one_effect(b: Backend) {
    let home = b.home();
    let _serve = Reaped(home.spawn_serve());
    let mut victim = Reaped(home.spawn_worker("victim", &[]));
    let id = home.submit(
        &["--heartbeat", "0.3", "--stale-after", "1.5"],
        &["sleep", "2"],
    );
    let running = home.wait_job(&id, T, "job running on the victim", |j| {
        state(j) == "running"
    });
    let victim_id = owner(&running).unwrap();
    assert!(victim_id.starts_with("victim-"));
    victim.0.kill().unwrap();
    let _ = victim.0.wait();
    let _survivor = Reaped(home.spawn_worker("survivor", &[]));
    let done = home.wait_job(&id, T, "job to succeed elsewhere", |j| {
        state(j) == "succeeded"
    });
    let history = done["history"].as_array().unwrap();
    assert_eq!(history.len(), 2, "{done:#}");
    assert_eq!(history[0]["worker"], victim_id.as_str());
    assert_eq!(history[0]["result"], "stale");
    assert!(
        history[1]["worker"]
            .as_str()
            .unwrap()
            .starts_with("survivor-")
    );
    assert_eq!(history[1]["result"], "passed");
    assert_eq!(done["fencing_token"], 2);
    let applied = wait_for(T, "result applied by the control plane", || {
        let j = home.job(&id);
        j["applied"].as_array().filter(|a| !a.is_empty()).cloned()
    });
    assert_eq!(applied.len(), 1, "effect applied exactly once: {applied:?}");
    assert_eq!(applied[0]["fencing_token"], 2);
}

/// A worker SIGSTOPped past stale_after then resumed: its late result is rejected by fencing.
fn sigstop_past_stale_after_then_resumed_is_fenced(b: Backend) {
    let home = b.home();
    let _serve = Reaped(home.spawn_serve());
    let stopped = Reaped(home.spawn_worker("sleepy", &[]));
    // The first attempt runs until killed (so it cannot finish before the kill, however loaded
    // the machine), the recovered one ends at once.
    let marker = home.path().join("twin-first-attempt");
    let script = format!(
        "if [ -e '{0}' ]; then exit 0; fi; touch '{0}'; sleep 120",
        marker.display()
    );
    let id = home.submit(
        &["--heartbeat", "0.3", "--stale-after", "1.5"],
        &["sh", "-c", &script],
    );
    home.wait_job(&id, T, "job running on the stopped-to-be worker", |j| {
        state(j) == "running"
    });
    home.pause_outside_writes(&stopped.0);
    let _replacement = Reaped(home.spawn_worker("replacement", &[]));
    let done = home.wait_job(&id, T, "replacement to finish the job", |j| {
        state(j) == "succeeded"
    });
    assert_eq!(done["fencing_token"], 2);
    signal(&stopped.0, Signal::SIGCONT);
    home.wait(T, "the resumed worker to log its rejected result", || {
        home.logs().contains("rejected by fencing").then_some(())
    });
    let after = home.job(&id);
    assert_eq!(state(&after), "succeeded");
    assert_eq!(after["fencing_token"], 2, "the replacement's result stands");
    assert_eq!(history_results(&after), ["stale", "passed"]);
    let applied = wait_for(T, "result applied", || {
        home.job(&id)["applied"]
            .as_array()
            .filter(|a| !a.is_empty())
            .cloned()
    });
    assert_eq!(applied.len(), 1);
}

fn always_failing_job_runs_exactly_attempts_times_then_dead(b: Backend) {
    let home = b.home();
    let _worker = Reaped(home.spawn_worker("w", &[]));
    let id = home.submit(&["--attempts", "3"], &["sh", "-c", "exit 3"]);
    let dead = home.wait_job(&id, T, "job dead", |j| state(j) == "dead");
    assert_eq!(dead["attempts"], 3);
    assert_eq!(history_results(&dead), ["failed", "failed", "failed"]);
    let delays: Vec<u64> = dead["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["retry_delay_ms"].as_u64())
        .collect();
    assert_eq!(delays.len(), 2, "two retries were scheduled: {dead:#}");
    assert!(
        delays[0] >= 500 && delays[1] > delays[0],
        "delays grow: {delays:?}"
    );
}

/// A job that SIGKILLs its own worker every time ends dead after its attempts, not in a loop.
fn job_that_kills_its_worker_is_bounded_by_attempts(b: Backend) {
    let home = b.home();
    let _serve = Reaped(home.spawn_serve());
    let id = home.submit(
        &[
            "--attempts",
            "2",
            "--heartbeat",
            "0.2",
            "--stale-after",
            "1",
        ],
        &["sh", "-c", "kill -9 $PPID; sleep 5"],
    );
    let mut workers = Vec::new();
    let dead = wait_for(T, "job dead after its attempts", || {
        let j = home.job(&id);
        if state(&j) == "dead" {
            return Some(j);
        }
        if workers
            .iter_mut()
            .all(|w: &mut Reaped| w.0.try_wait().ok().flatten().is_some())
        {
            workers.push(Reaped(home.spawn_worker("victim", &[])));
        }
        None
    });
    assert_eq!(dead["attempts"], 2);
    assert_eq!(history_results(&dead), ["stale", "stale"]);
    assert!(workers.len() >= 2, "each attempt killed its worker");
}

fn two_workers_with_the_same_name_never_mask_each_other(b: Backend) {
    let home = b.home();
    let a = Reaped(home.spawn_worker("twin", &[]));
    let twin_b = Reaped(home.spawn_worker("twin", &[]));
    let owners = wait_for(T, "both presence locks", || {
        let locks = home.json(&["locks"]);
        let names: Vec<String> = locks
            .as_array()?
            .iter()
            .filter(|l| {
                l["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("worker:twin-"))
            })
            .map(|l| l["owner_worker"].as_str().unwrap().to_owned())
            .collect();
        (names.len() == 2).then_some(names)
    });
    assert_ne!(owners[0], owners[1]);
    // The first attempt runs until killed (so it cannot finish before the kill, however loaded
    // the machine), the recovered one ends at once.
    let marker = home.path().join("twin-first-attempt");
    let script = format!(
        "if [ -e '{0}' ]; then exit 0; fi; touch '{0}'; sleep 120",
        marker.display()
    );
    let id = home.submit(
        &["--heartbeat", "0.3", "--stale-after", "1.5"],
        &["sh", "-c", &script],
    );
    let running = home.wait_job(&id, T, "job running", |j| state(j) == "running");
    wait_for(T, "the first attempt to start its command", || {
        marker.exists().then_some(())
    });
    let first = owner(&running).unwrap();
    // SIGKILL whichever twin holds the job; the other must notice and recover it.
    let pid = running["lease"]["owner_pid"].as_u64().unwrap() as i32;
    assert!(pid == a.0.id() as i32 || pid == twin_b.0.id() as i32);
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), Signal::SIGKILL).unwrap();
    let done = home.wait_job(&id, T, "job recovered by the other twin", |j| {
        state(j) == "succeeded"
    });
    let last = done["history"].as_array().unwrap().last().unwrap()["worker"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(last.starts_with("twin-"));
    assert_ne!(last, first, "the dead twin's death was noticed");
}

fn cancel_reaches_a_running_job(b: Backend) {
    let home = b.home();
    let _worker = Reaped(home.spawn_worker("w", &[]));
    let id = home.submit(&["--heartbeat", "0.3"], &["sleep", "60"]);
    home.wait_job(&id, T, "job running", |j| state(j) == "running");
    let reply = home.json(&["jobs", "cancel", &id]);
    assert_eq!(reply["result"], "cancel_requested");
    let done = home.wait_job(&id, Duration::from_secs(20), "job cancelled", |j| {
        state(j) == "cancelled"
    });
    assert_eq!(history_results(&done), ["cancelled"]);
    // A queued job is cancelled at once.
    let queued = home.submit(&["--queue-name", "nobody-serves-this"], &["true"]);
    assert_eq!(
        home.json(&["jobs", "cancel", &queued])["result"],
        "cancelled"
    );
    assert_eq!(state(&home.job(&queued)), "cancelled");
}

fn graceful_shutdown_hands_leases_back(b: Backend) {
    let home = b.home();
    let mut first = Reaped(home.spawn_worker("first", &["--grace", "1"]));
    let id = home.submit(&["--stale-after", "600"], &["sleep", "3"]);
    home.wait_job(&id, T, "job running on the first worker", |j| {
        state(j) == "running"
    });
    signal(&first.0, Signal::SIGTERM);
    assert!(wait_exit(&mut first.0, T).success());
    let back = home.job(&id);
    assert_eq!(
        state(&back),
        "queued",
        "handed back at once, not after stale_after: {back:#}"
    );
    assert_eq!(history_results(&back), ["released"]);
    assert_eq!(back["attempts"], 0, "a release refunds the attempt");
    let _second = Reaped(home.spawn_worker("second", &[]));
    let done = home.wait_job(&id, T, "job finished by the second worker", |j| {
        state(j) == "succeeded"
    });
    assert!(
        done["history"][1]["worker"]
            .as_str()
            .unwrap()
            .starts_with("second-")
    );
}

fn long_job_under_full_cpu_load_keeps_its_lease(b: Backend) {
    let home = b.home();
    let burners: Vec<Reaped> = (0..2)
        .map(|_| {
            Reaped(
                std::process::Command::new("sh")
                    .args(["-c", "while :; do :; done"])
                    .spawn()
                    .unwrap(),
            )
        })
        .collect();
    let _worker = Reaped(home.spawn_worker("w", &[]));
    let id = home.submit(
        &["--heartbeat", "0.5", "--stale-after", "3"],
        &[
            "sh",
            "-c",
            "i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done; sleep 4",
        ],
    );
    let done = home.wait_job(&id, Duration::from_secs(120), "long job to succeed", |j| {
        state(j) == "succeeded"
    });
    drop(burners);
    assert_eq!(done["attempts"], 1, "never mistaken for dead: {done:#}");
    assert_eq!(done["fencing_token"], 1);
}

fn idempotency_key_returns_the_first_job(b: Backend) {
    let home = b.home();
    let a = home.json(&["jobs", "submit", "--idempotency-key", "k1", "--", "true"]);
    let again = home.json(&["jobs", "submit", "--idempotency-key", "k1", "--", "true"]);
    assert_eq!(a["id"], again["id"]);
    assert_eq!(a["created"], true);
    assert_eq!(again["created"], false);
    // The same key for different work is refused, not answered with the other job.
    let before = home.json(&["jobs", "list"]);
    let other = home.run(&["jobs", "submit", "--idempotency-key", "k1", "--", "false"]);
    assert_eq!(other.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&other.stderr);
    assert!(
        stderr.contains("k1") && stderr.contains(a["id"].as_str().unwrap()),
        "{stderr}"
    );
    assert_eq!(home.json(&["jobs", "list"]), before, "nothing enqueued");
}

#[test]
fn redis_restart_mid_run_with_aof_loses_nothing() {
    let redis = RedisServer::start_with(true);
    let home = Home::redis(&redis.url());
    let ids: Vec<String> = (0..20)
        .map(|_| home.submit(&["--stale-after", "30"], &["sleep", "0.2"]))
        .collect();
    let _worker = Reaped(home.spawn_worker("w", &["--concurrency", "2"]));
    wait_for(T, "some jobs done", || {
        (ids.iter()
            .filter(|id| state(&home.job(id)) == "succeeded")
            .count()
            >= 3)
            .then_some(())
    });
    redis.restart();
    for id in &ids {
        home.wait_job(id, T, "every job to succeed after the restart", |j| {
            state(j) == "succeeded"
        });
    }
}

/// Jobs that share a named lock never overlap, and the lock shows in `skillforge locks` while held.
fn jobs_sharing_a_lock_never_overlap(b: Backend) {
    let home = b.home();
    let dir = tempfile::tempdir().unwrap();
    let guard = dir.path().join("inside");
    let script = format!("mkdir {0} || exit 9; sleep 0.7; rmdir {0}", guard.display());
    let ids: Vec<String> = (0..3)
        .map(|_| {
            home.submit(
                &[
                    "--lock",
                    "shared-resource",
                    "--heartbeat",
                    "0.2",
                    "--stale-after",
                    "2",
                ],
                &["sh", "-c", &script],
            )
        })
        .collect();
    let _worker = Reaped(home.spawn_worker("w", &["--concurrency", "3"]));
    let holder = wait_for(T, "the lock to be listed", || {
        home.json(&["locks"])
            .as_array()?
            .iter()
            .find(|l| l["name"] == "shared-resource")
            .cloned()
    });
    assert!(holder["owner_worker"].as_str().unwrap().starts_with("w-"));
    for id in &ids {
        let done = home.wait_job(id, T, "every job to succeed", |j| state(j) == "succeeded");
        assert_eq!(
            done["attempts"], 1,
            "no overlap, so no job saw another inside: {done:#}"
        );
    }
}

/// A SIGKILLed worker's job process does not run on beside the retry that recovers it.
fn a_sigkilled_workers_job_process_dies_with_it(b: Backend) {
    let home = b.home();
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let mut worker = Reaped(home.spawn_worker("victim", &[]));
    let script = format!("echo $$ > {}; exec sleep 60", pid_file.display());
    let id = home.submit(&["--stale-after", "600"], &["sh", "-c", &script]);
    home.wait_job(&id, T, "job running", |j| state(j) == "running");
    let pid: i32 = wait_for(T, "the job to write its pid", || {
        std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|t| t.trim().parse().ok())
    });
    assert!(alive(pid), "the job process runs");
    worker.0.kill().unwrap();
    let _ = worker.0.wait();
    wait_for(
        Duration::from_secs(10),
        "the job process to die with its worker",
        || (!alive(pid)).then_some(()),
    );
}

/// Alive and not a zombie.
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            stat.rsplit_once(") ")
                .map(|(_, rest)| !rest.starts_with('Z'))
        })
        .unwrap_or(false)
}

/// `jobs submit --wait` notices when the process that was running the queue dies mid-wait and
/// serves the queue itself (embedded), instead of waiting on a presence lock until it goes stale.
#[test]
fn wait_takes_over_when_the_other_waiter_dies() {
    let home = Home::embedded();
    let mut first = Reaped(
        home.cmd()
            .args([
                "jobs",
                "submit",
                "--wait",
                "--stale-after",
                "3",
                "--heartbeat",
                "0.5",
                "--",
                "sleep",
                "30",
            ])
            .spawn()
            .unwrap(),
    );
    wait_for(T, "the first waiter's job to run", || {
        home.json(&["jobs", "list", "--state", "running"])
            .as_array()
            .is_some_and(|a| !a.is_empty())
            .then_some(())
    });
    first.0.kill().unwrap();
    let _ = first.0.wait();
    let out = home.run(&["jobs", "submit", "--wait", "--", "echo", "second"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "second\n");
}

/// A worker paused (SIGSTOP) across a restart of what it talks to, and kept paused until it
/// is presumed dead (its presence lock stale), then resumed, keeps serving: on Redis the server
/// restarts under it (its connections are gone, and a write to one used to kill it silently
/// with SIGPIPE, status 141); on the embedded queue the control plane (`serve`) restarts.
/// Three rounds, each ending with a job the resumed worker runs.
fn sigstopped_worker_survives_a_restart_and_keeps_serving(b: &Backend) {
    let home = b.home();
    let mut serve = Reaped(home.spawn_serve());
    let mut paused = Reaped(home.spawn_worker("paused", &["--concurrency", "2"]));
    let first = home.submit(&[], &["true"]);
    let done = home.wait_job(&first, T, "the worker to run a first job", |j| {
        state(j) == "succeeded"
    });
    let worker_id = done["history"][0]["worker"].as_str().unwrap().to_owned();
    for round in 0..3 {
        home.pause_outside_writes(&paused.0);
        match b {
            Backend::Redis(redis) => redis.restart(),
            Backend::Sqlite => {
                drop(serve);
                serve = Reaped(home.spawn_serve());
            }
        }
        let presence = format!("worker:{worker_id}");
        home.wait(
            T,
            &format!("round {round}: the paused worker's presence lock to go stale"),
            || {
                let locks = home.json(&["locks"]);
                let live = locks
                    .as_array()?
                    .iter()
                    .any(|l| l["name"] == presence.as_str() && l["status"] != "stale");
                (!live).then_some(())
            },
        );
        signal(&paused.0, Signal::SIGCONT);
        let id = home.submit(&[], &["echo", "after the restart"]);
        let done = home.wait(
            T,
            &format!("round {round}: the resumed worker to run a job"),
            || {
                let exited = paused.0.try_wait();
                assert!(
                    matches!(exited, Ok(None)),
                    "round {round}: the worker exited: {exited:?}\n{}",
                    home.logs()
                );
                let job = home.job(&id);
                (state(&job) == "succeeded").then_some(job)
            },
        );
        assert_eq!(
            done["history"][0]["worker"],
            worker_id.as_str(),
            "round {round}: {done:#}"
        );
        let exited = paused.0.try_wait();
        assert!(
            matches!(exited, Ok(None)),
            "round {round}: the worker exited: {exited:?}\n{}",
            home.logs()
        );
    }
}

#[test]
fn sqlite_sigstopped_worker_survives_a_restart_and_keeps_serving() {
    sigstopped_worker_survives_a_restart_and_keeps_serving(&Backend::Sqlite);
}

#[test]
fn redis_sigstopped_worker_survives_a_restart_and_keeps_serving() {
    // With persistence, so the restart loses no job (a restart that loses data is another case).
    sigstopped_worker_survives_a_restart_and_keeps_serving(&Backend::Redis(
        RedisServer::start_with(true),
    ));
}

/// With Redis down, a worker's and `serve`'s shutdown is bounded by the grace (not by the
/// backend's retry budget per call): the worker names the job whose lease it could not hand
/// back and exits 3; `serve` has nothing to hand back and exits 0.
#[test]
fn shutdown_with_redis_down_is_bounded_and_names_the_leases_left_stale() {
    let redis = RedisServer::start();
    let home = Home::redis(&redis.url());
    let mut serve = Reaped(home.spawn_serve());
    let mut worker = Reaped(home.spawn_worker("w", &["--grace", "1"]));
    let id = home.submit(&["--stale-after", "600"], &["sleep", "60"]);
    home.wait_job(&id, T, "job running", |j| state(j) == "running");
    let _ = redis.cli(&["shutdown", "nosave"]);
    wait_for(T, "redis-server to stop", || {
        redis.cli(&["ping"]).is_none().then_some(())
    });
    signal(&worker.0, Signal::SIGTERM);
    signal(&serve.0, Signal::SIGTERM);
    // Grace 1 s, then at most MIN_HAND_BACK (5 s) to kill and hand back; the backend alone
    // would retry each call for 30 s.
    let bound = Duration::from_secs(20);
    let worker_exit = wait_exit(&mut worker.0, bound);
    let serve_exit = wait_exit(&mut serve.0, bound);
    let logs = home.logs();
    assert_eq!(worker_exit.code(), Some(3), "{logs}");
    assert!(
        logs.contains("could not be handed back") && logs.contains(&id),
        "{logs}"
    );
    assert_eq!(serve_exit.code(), Some(0), "{logs}");
}
