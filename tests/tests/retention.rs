//! Queue retention through the built binary (issue 19), on the embedded queue and a real Redis:
//! `jobs prune` (dry run, `--older-than`), `jobs show` and a keyed resubmit of a pruned job, and
//! `serve` killed mid-prune and restarted.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use skillforge_engine::open::{QueueUrl, open_queue};
use skillforge_engine::{Finish, JobSpec, JobState, QueueBackend, WorkerIdentity};
use skillforge_tests::{Backend, Home, Reaped, write};

skillforge_tests::on_both_backends!(
    prune_by_hand_then_show_and_resubmit_a_pruned_job,
    serve_killed_mid_prune_and_restarted_loses_nothing
);

const T: Duration = Duration::from_secs(60);

fn code(home: &Home, args: &[&str]) -> (Option<i32>, String, String) {
    let out = home.run(args);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Finished jobs are kept by the default retention; `--dry-run` counts without removing;
/// `--older-than 0s` prunes them; `jobs show` then says "pruned" (text and JSON, exit 0), a
/// resubmit under the idempotency key returns the pruned job instead of running it again, and
/// an unknown id is still "no job" (exit 2). A bad age is exit 2 naming the flag.
fn prune_by_hand_then_show_and_resubmit_a_pruned_job(b: Backend) {
    let home = b.home();
    // On Redis a worker runs the jobs and `serve` applies their results.
    let _fleet = match &b {
        Backend::Sqlite => None,
        Backend::Redis(_) => Some((
            Reaped(home.spawn_worker("w", &[])),
            Reaped(home.spawn_serve()),
        )),
    };
    let marker = home.path().join("runs");
    let script = format!("echo run >> {}", marker.display());
    for args in [
        &[
            "jobs",
            "submit",
            "--wait",
            "--idempotency-key",
            "nightly",
            "--",
            "sh",
            "-c",
            script.as_str(),
        ][..],
        &[
            "jobs",
            "submit",
            "--wait",
            "--attempts",
            "1",
            "--",
            "sh",
            "-c",
            "exit 3",
        ][..],
    ] {
        let (c, _, err) = code(&home, args);
        assert!(c == Some(0) || c == Some(1), "{args:?}: {c:?} {err}");
    }
    let jobs = home.json(&["jobs", "list"]);
    let ids: Vec<String> = jobs
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids.len(), 2);
    let keyed = jobs
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["idempotency_key"] == "nightly")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();

    let kept = home.json(&["jobs", "prune", "--dry-run"]);
    assert_eq!(
        (kept["jobs"].as_u64(), kept["dry_run"].as_bool()),
        (Some(0), Some(true)),
        "younger than the defaults"
    );
    // Prunable once their results are applied (at once on the embedded queue, by `serve` on Redis).
    home.wait(T, "both results applied", || {
        let would = home.json(&["jobs", "prune", "--older-than", "0s", "--dry-run"]);
        (would["jobs"] == 2).then_some(())
    });
    assert_eq!(
        home.json(&["jobs", "list"]).as_array().unwrap().len(),
        2,
        "a dry run removes nothing"
    );
    let (c, out, _) = code(&home, &["jobs", "prune", "--older-than", "0s"]);
    assert_eq!(c, Some(0));
    assert!(out.contains("pruned 2 finished job(s)"), "{out}");
    assert_eq!(home.json(&["jobs", "list"]), Value::Array(vec![]));

    let (c, out, err) = code(&home, &["jobs", "show", &keyed]);
    assert_eq!(c, Some(0), "{err}");
    assert!(
        out.contains(&format!("job {keyed} was pruned at")) && out.contains("finished succeeded"),
        "{out}"
    );
    let shown = home.job(&keyed);
    assert_eq!(
        (shown["pruned"].as_bool(), shown["state"].as_str()),
        (Some(true), Some("succeeded")),
        "{shown}"
    );
    assert_eq!(shown["idempotency_key"], "nightly");
    assert_eq!(
        shown["applied"].as_array().map(Vec::len),
        Some(1),
        "the store's record stays: {shown}"
    );
    let failed = ids.iter().find(|i| **i != keyed).unwrap();
    assert_eq!(home.job(failed)["state"], "dead", "its only attempt failed");

    let (c, out, err) = code(
        &home,
        &[
            "jobs",
            "submit",
            "--wait",
            "--idempotency-key",
            "nightly",
            "--",
            "sh",
            "-c",
            &script,
        ],
    );
    assert_eq!(c, Some(0), "the pruned job had succeeded: {err}");
    assert_eq!(out.trim(), keyed);
    assert!(err.contains("was pruned"), "{err}");
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap(),
        "run\n",
        "the work ran once"
    );
    assert_eq!(
        home.json(&["jobs", "list"]),
        Value::Array(vec![]),
        "nothing new was queued"
    );

    let (c, _, err) = code(
        &home,
        &["jobs", "show", "0190aaaa-0000-7000-8000-000000000000"],
    );
    assert_eq!(c, Some(2));
    assert!(err.contains("no job"), "{err}");
    let (c, _, err) = code(&home, &["jobs", "prune", "--older-than", "7 days"]);
    assert_eq!(c, Some(2));
    assert!(
        err.contains("--older-than") && err.contains("7 days"),
        "{err}"
    );
}

/// Opens the home's queue as the CLI does.
async fn queue_of(home: &Home) -> std::sync::Arc<dyn QueueBackend> {
    let url = QueueUrl::parse(home.queue.as_deref(), home.path()).unwrap();
    open_queue(&url).await.unwrap()
}

const SEEDED: usize = 10_000;
/// The retention of the serve test.
const KEEP: Duration = Duration::from_secs(10);

fn seed_spec(queue: &str) -> JobSpec {
    let mut spec = JobSpec::new(
        "process",
        serde_json::json!({"command": {"argv": ["true"]}}),
    );
    spec.queue = queue.into();
    spec
}

/// `SEEDED` jobs run to `succeeded` and acknowledged (as `serve`'s ingestion does), through the
/// engine's API, many calls at once; returns their ids.
async fn seed(q: &Arc<dyn QueueBackend>) -> Vec<String> {
    let w = WorkerIdentity::new("seed");
    let mut ids = Vec::with_capacity(SEEDED);
    for _ in 0..SEEDED / 500 {
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..500 {
            let q = q.clone();
            set.spawn(async move { q.enqueue(&seed_spec("seed")).await.unwrap().job_id });
        }
        ids.extend(set.join_all().await);
    }
    loop {
        let leased = q.lease("seed", &w, 1000, Duration::ZERO).await.unwrap();
        if leased.is_empty() {
            break;
        }
        let mut set = tokio::task::JoinSet::new();
        for l in leased {
            let q = q.clone();
            set.spawn(async move {
                let done = Finish {
                    next: JobState::Succeeded,
                    retry_delay_ms: 0,
                    attempt_result: "passed".into(),
                    outcome: None,
                    error: None,
                };
                q.finish(&l.job.id, l.fencing_token, &done).await.unwrap();
                assert!(q.ack_result(&l.job.id, l.fencing_token).await.unwrap());
            });
        }
        set.join_all().await;
    }
    ids
}

/// (kept, pruned) among `ids`; panics on a job that is both kept and tombstoned, or neither.
/// The job is read before its tombstone: a prune (which deletes the job and writes its
/// tombstone in one transaction) committing between the two reads shows both, so that case is
/// read again and the job must then be gone. With `expired_ok`, a job with neither counts as
/// pruned: its tombstone outlived it by the retention and was pruned too (a slow host can take
/// longer than that between the first prune and a restarted `serve`'s first pass).
async fn census(q: &dyn QueueBackend, ids: &[String], expired_ok: bool) -> (usize, usize) {
    let (mut kept, mut pruned) = (0, 0);
    for id in ids {
        let mut job = q.get(id).await.unwrap();
        let tomb = q.tombstone(id).await.unwrap();
        if job.is_some() && tomb.is_some() {
            job = q.get(id).await.unwrap();
        }
        match (job, tomb) {
            (Some(j), None) => {
                assert_eq!(
                    (j.state, j.history.len()),
                    (JobState::Succeeded, 1),
                    "kept job {id} is whole"
                );
                kept += 1;
            }
            (None, Some(t)) => {
                assert_eq!(t.state, JobState::Succeeded);
                pruned += 1;
            }
            (None, None) if expired_ok => pruned += 1,
            other => panic!("job {id}: {other:?}"),
        }
    }
    (kept, pruned)
}

/// `serve` under `keep_succeeded = "10s"` prunes a backlog of applied jobs in batches;
/// SIGKILLed in the middle, it leaves every job either whole or pruned with its tombstone
/// (never half of one), and a restarted `serve` finishes the work. An unfinished job survives.
fn serve_killed_mid_prune_and_restarted_loses_nothing(b: Backend) {
    let home = b.home();
    std::fs::create_dir_all(home.path()).unwrap();
    write(
        &home.path().join("config.toml"),
        &format!("[queue]\nkeep_succeeded = \"{}s\"\n", KEEP.as_secs()),
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    let q = rt.block_on(queue_of(&home));
    let ids = rt.block_on(seed(&q));
    // Queued in a queue no worker serves: not finished, never prunable.
    let queued = rt.block_on(q.enqueue(&seed_spec("nobody"))).unwrap().job_id;
    // Every seeded job is past its retention once the queue's clock is KEEP past the last finish
    // (its tombstone then lives KEEP more, past the end of the test: passes run every 30 s).
    let last_finish = rt.block_on(q.now_ms()).unwrap();
    let ripe = last_finish + i64::try_from(KEEP.as_millis()).unwrap();
    home.wait(T, "the seeded jobs to age", || {
        (rt.block_on(q.now_ms()).unwrap() > ripe).then_some(())
    });
    // Pruning goes oldest finish first: the first seeded job's tombstone shows it started.
    let first_pruned = || rt.block_on(q.tombstone(&ids[0])).unwrap().is_some();

    let mut serve = Reaped(home.spawn_serve());
    let started = Instant::now();
    while !first_pruned() {
        assert!(started.elapsed() < T, "serve never pruned\n{}", home.logs());
        std::thread::sleep(Duration::from_millis(1));
    }
    let _ = serve.0.kill();
    let _ = serve.0.wait();
    let (kept, pruned) = rt.block_on(census(q.as_ref(), &ids, false));
    assert!(
        kept > 0 && pruned > 0,
        "killed mid-prune: {kept} kept, {pruned} pruned"
    );

    let _serve = Reaped(home.spawn_serve());
    let deadline = Instant::now() + T;
    loop {
        let (kept, pruned) = rt.block_on(census(q.as_ref(), &ids, true));
        if kept == 0 {
            assert_eq!(pruned, SEEDED);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{kept} jobs left after the restart\n{}",
            home.logs()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let job = rt.block_on(q.get(&queued)).unwrap();
    assert_eq!(
        job.map(|j| j.state),
        Some(JobState::Queued),
        "an unfinished job is never pruned"
    );
}
