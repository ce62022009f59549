//! Stored layouts (layout 4, and the rewrite of an older build's layouts 1, 2 and 3 at connect),
//! the ingestion/ack race, and a namespace that lost its data.

use super::*;
use skillforge_engine::redis::id;

/// Layout 4 (every job this build enqueues): fields at their defaults are not stored; a terminal
/// attempt's record stays in the job hash and only superseded attempts are pushed to the history
/// list; the decoded history is the same.
#[tokio::test]
async fn terminal_attempt_stays_in_the_hash_and_is_listed_once_superseded() {
    let server = RedisServer::start();
    let b = backend(&server).await;
    let w = worker("w");
    let id = b.enqueue(&spec("h")).await.unwrap().job_id;
    let hkey = format!("sftest:job:{}", id::stored(&id));
    let list = format!("{hkey}:history");
    let mut fields: Vec<String> = server
        .cli(&["HKEYS", &hkey])
        .lines()
        .map(str::to_owned)
        .collect();
    fields.sort();
    assert_eq!(
        fields,
        ["c", "kd", "p", "q"],
        "only what differs from the defaults: no state, attempts, times…"
    );
    assert_eq!(
        b.get(&id).await.unwrap().unwrap().state,
        JobState::Queued,
        "the state at its default"
    );
    assert_eq!(server.cli(&["OBJECT", "ENCODING", &hkey]), "listpack");
    assert_eq!(
        server.cli(&["GET", "sftest:layout"]),
        "4",
        "a new namespace is in layout 4 at once"
    );
    assert_eq!(server.cli(&["TYPE", "sftest:ready:h"]), "list");

    // Attempt 1 fails with an error and is retried: its record goes to the list at once.
    let l = b.lease("h", &w, 1, Duration::ZERO).await.unwrap().remove(0);
    let mut retry = finish(JobState::Queued, 0, "failed");
    retry.error = Some("boom".to_owned());
    assert_eq!(
        b.finish(&id, l.fencing_token, &retry).await.unwrap(),
        FinishReply::Applied(JobState::Queued)
    );
    assert_eq!(server.cli(&["LLEN", &list]), "1");
    let queued = b.get(&id).await.unwrap().unwrap();
    assert!(
        queued.lease.is_none(),
        "not running: no lease, whatever fields the hash keeps"
    );
    assert_eq!(queued.error.as_deref(), Some("boom"));
    assert_eq!(queued.history.len(), 1);
    assert_eq!(queued.history[0].retry_delay_ms, Some(0));

    // Attempt 2 fails terminally without outcome or error: no list write, its closed record is
    // the hash.
    let l = b.lease("h", &w, 1, Duration::ZERO).await.unwrap().remove(0);
    assert_eq!(
        (l.job.attempts, l.fencing_token, l.job.history.len()),
        (2, 2, 2)
    );
    assert_eq!(
        l.job.error.as_deref(),
        Some("boom"),
        "the last attempt's error, as stored"
    );
    let done_finish = Finish {
        next: JobState::Failed,
        retry_delay_ms: 0,
        attempt_result: "not_runnable".to_owned(),
        outcome: None,
        error: None,
    };
    b.finish(&id, 2, &done_finish).await.unwrap();
    assert_eq!(server.cli(&["LLEN", &list]), "1");
    let done = b.get(&id).await.unwrap().unwrap();
    assert_eq!(done.state, JobState::Failed);
    assert!(done.lease.is_none());
    assert_eq!((done.outcome, done.error), (None, None));
    assert_eq!(done.history.len(), 2);
    let last = &done.history[1];
    assert_eq!(
        (last.attempt, last.fencing_token, last.worker.as_str()),
        (2, 2, w.worker_id.as_str())
    );
    assert_eq!(last.result.as_deref(), Some("not_runnable"));
    assert_eq!(last.ended_at_ms, Some(done.updated_at_ms));
    assert_eq!(
        last.started_at_ms,
        l.job.lease.as_ref().unwrap().acquired_at_ms
    );
    assert_eq!(last.retry_delay_ms, None);
    // Every value stays short: the outcome JSON (over 64 bytes) went to its own key,
    // so the finished job's hash is still a listpack.
    assert_eq!(server.cli(&["OBJECT", "ENCODING", &hkey]), "listpack");
    // A retried finish of the applied attempt reports the same success; an old token is fenced.
    assert_eq!(
        b.finish(&id, 2, &done_finish).await.unwrap(),
        FinishReply::Applied(JobState::Failed)
    );
    assert_eq!(
        b.finish(&id, 1, &done_finish).await.unwrap(),
        FinishReply::Fenced { current_token: 2 }
    );
    assert_eq!(b.get(&id).await.unwrap().unwrap().history, done.history);

    // A release marks no finish in the hash: a lease closed by a release under the current
    // token must still fence a late finish of it (not report it applied).
    let other = b.enqueue(&spec("h2")).await.unwrap().job_id;
    let lo = b
        .lease("h2", &w, 1, Duration::ZERO)
        .await
        .unwrap()
        .remove(0);
    assert!(b.release(&other, lo.fencing_token).await.unwrap());
    assert_eq!(
        b.finish(&other, lo.fencing_token, &done_finish)
            .await
            .unwrap(),
        FinishReply::Fenced { current_token: 1 }
    );

    // `jobs retry` supersedes it: the record moves to the list, and the next lease shows all.
    b.retry(&id).await.unwrap();
    assert_eq!(server.cli(&["LLEN", &list]), "2");
    let again = b.get(&id).await.unwrap().unwrap();
    assert_eq!(again.history, done.history);
    let l = b.lease("h", &w, 1, Duration::ZERO).await.unwrap().remove(0);
    assert_eq!(
        (l.job.attempts, l.fencing_token, l.job.history.len()),
        (1, 3, 3)
    );
    assert_eq!(&l.job.history[..2], &done.history[..]);
}

/// A script of the previous build (layout 2), from the verbatim copies in `layout2/`.
fn old_script(body: &str) -> redis::Script {
    const COMMON: &str = include_str!("layout2/common.lua");
    const TRANSITIONS: &str = include_str!("layout2/transitions.lua");
    redis::Script::new(&format!("{COMMON}\n{TRANSITIONS}\n{body}"))
}

/// A namespace written by the previous builds — layout 2 by that build's own scripts (queued,
/// running, succeeded, retried-then-dead with an error, keyed, and long-payload jobs), layout 1
/// as its hashes looked (queued, running on its second attempt, dead) — is rewritten into
/// layout 3 when this build connects, every hash then compact (listpack), and its jobs carry on:
/// shown as before, leased in FIFO order, finished, retried, deduplicated by their key.
#[tokio::test]
async fn an_older_builds_namespace_is_rewritten_on_open_and_its_jobs_carry_on() {
    let server = RedisServer::start();
    let client = redis::Client::open(server.url()).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    let (enqueue, lease, finish_batch) = (
        old_script(include_str!("layout2/enqueue.lua")),
        old_script(include_str!("layout2/lease.lua")),
        old_script(include_str!("layout2/finish_batch.lua")),
    );
    let long_payload = serde_json::json!({"cmd": ["sh", "-c", "echo a payload longer than the sixty-four bytes of a listpack value"]});
    let mut specs: Vec<(&str, JobSpec)> = [
        "v2-queued",
        "v2-running",
        "v2-done",
        "v2-dead",
        "v2-keyed",
        "v2-long",
    ]
    .into_iter()
    .map(|id| (id, spec("v2")))
    .collect();
    specs[4].1.idempotency_key = Some("key-e".into());
    specs[5].1.payload = long_payload.clone();
    specs[1].1.locks = vec!["a-lock".into()];
    for (id, s) in &specs {
        let _: (String, i64) = enqueue
            .prepare_invoke()
            .arg("sftest:")
            .arg(*id)
            .arg(&s.queue)
            .arg(serde_json::to_string(s).unwrap())
            .arg(s.idempotency_key.as_deref().unwrap_or(""))
            .arg(s.max_attempts)
            .arg(s.heartbeat_ms)
            .arg(s.stale_after_ms)
            .arg(u8::from(s.idempotent))
            .arg("")
            .invoke_async(&mut c)
            .await
            .unwrap();
    }
    let lease_one = |req: &'static str| {
        let mut inv = lease.prepare_invoke();
        inv.arg("sftest:")
            .arg("v2")
            .arg(1)
            .arg("old-w")
            .arg("old-h")
            .arg(42)
            .arg(req)
            .arg(1000);
        inv
    };
    let old_finish = |id: &str, token: u64, next: &str, label: &str, outcome: &str, error: &str| {
        let mut inv = finish_batch.prepare_invoke();
        inv.arg("sftest:")
            .arg(uuid_like(id, token))
            .arg(1000)
            .arg(1)
            .arg(0)
            .arg(id)
            .arg(token)
            .arg(next)
            .arg(0)
            .arg(label)
            .arg(outcome)
            .arg(error)
            .arg(0);
        inv
    };
    // The old lease pops in FIFO order: move the queued and keyed jobs behind the others first.
    for id in ["v2-queued", "v2-keyed", "v2-long"] {
        server.cli(&["ZADD", "sftest:ready:v2", "XX", "INCR", "100", id]);
    }
    type Leased = (Vec<Vec<Option<String>>>, i64, i64);
    for req in ["r1", "r2", "r3"] {
        let _: Leased = lease_one(req).invoke_async(&mut c).await.unwrap();
    }
    assert_eq!(
        server.cli(&["HGET", "sftest:job:v2-dead", "state"]),
        "running",
        "leased by the old build"
    );
    let passed = serde_json::to_string(&outcome(ExitClass::Passed)).unwrap();
    let failed = serde_json::to_string(&outcome(ExitClass::Failed { code: 1 })).unwrap();
    let _: redis::Value = old_finish("v2-done", 1, "succeeded", "passed", &passed, "")
        .invoke_async(&mut c)
        .await
        .unwrap();
    let _: redis::Value = old_finish("v2-dead", 1, "queued", "failed", &failed, "=first")
        .invoke_async(&mut c)
        .await
        .unwrap();
    let _: Leased = lease_one("r4").invoke_async(&mut c).await.unwrap();
    let _: redis::Value = old_finish("v2-dead", 2, "dead", "failed", &failed, "=boom")
        .invoke_async(&mut c)
        .await
        .unwrap();
    assert_eq!(server.cli(&["HGET", "sftest:job:v2-dead", "layout"]), "2");
    assert_eq!(
        server.cli(&["OBJECT", "ENCODING", "sftest:job:v2-done"]),
        "hashtable",
        "the old layout's cost"
    );

    // Layout 1 (the build before), as its hashes looked.
    let now = server
        .cli(&["TIME"])
        .lines()
        .next()
        .unwrap()
        .parse::<i64>()
        .unwrap()
        * 1000;
    let t = now.to_string();
    let spec_json = serde_json::to_string(&spec("old")).unwrap();
    let old_hash = |id: &str, state: &str, attempts: &str, token: &str| {
        let key = format!("sftest:job:{id}");
        let out = server.cli(&[
            "HSET",
            &key,
            "id",
            id,
            "queue",
            "old",
            "spec",
            &spec_json,
            "state",
            state,
            "attempts",
            attempts,
            "max_attempts",
            "3",
            "token",
            token,
            "seq",
            "1",
            "heartbeat_ms",
            "2000",
            "stale_after",
            "15000",
            "idempotent",
            "1",
            "created_at",
            &t,
            "updated_at",
            &t,
            "cancel_requested",
            "0",
            "recovery_available",
            "0",
            "not_before",
            &t,
        ]);
        assert_ne!(out, "0", "HSET {key}: {out}");
        server.cli(&["ZADD", "sftest:jobs", &t, id]);
    };
    let record = |attempt: u32, result: &str, delay: Option<u64>| {
        let mut r = serde_json::json!({"attempt": attempt, "fencing_token": attempt, "worker": "old-w",
            "host": "old-h", "pid": 42, "started_at_ms": now - 10, "ended_at_ms": now - 5,
            "result": result});
        if let Some(d) = delay {
            r["retry_delay_ms"] = d.into();
        }
        r.to_string()
    };
    old_hash("job-a", "queued", "0", "0");
    server.cli(&["ZADD", "sftest:ready:old", "1", "job-a"]);
    old_hash("job-b", "running", "2", "2");
    server.cli(&[
        "HSET",
        "sftest:job:job-b",
        "owner_worker",
        "old-w",
        "owner_host",
        "old-h",
        "owner_pid",
        "42",
        "acquired_at",
        &t,
        "heartbeat_at",
        &t,
    ]);
    server.cli(&[
        "RPUSH",
        "sftest:job:job-b:history",
        &record(1, "failed", Some(0)),
    ]);
    server.cli(&[
        "ZADD",
        "sftest:leases",
        &(now + 15_000).to_string(),
        "job-b",
    ]);
    old_hash("job-c", "dead", "1", "1");
    server.cli(&[
        "HSET",
        "sftest:job:job-c",
        "outcome",
        &failed,
        "closed_token",
        "1",
        "closed_by",
        "finish",
        "error",
        "old boom",
    ]);
    server.cli(&[
        "RPUSH",
        "sftest:job:job-c:history",
        &record(1, "failed", None),
    ]);
    server.cli(&["ZADD", "sftest:state:dead", &t, "job-c"]);

    // This build connects: every hash is rewritten, compact, and the ready sets become lists.
    let b = backend(&server).await;
    assert_eq!(server.cli(&["GET", "sftest:layout"]), "4");
    for q in ["v2", "old"] {
        assert_eq!(
            server.cli(&["TYPE", &format!("sftest:ready:{q}")]),
            "list",
            "ready:{q}"
        );
    }
    let ids = [
        "v2-queued",
        "v2-running",
        "v2-done",
        "v2-dead",
        "v2-keyed",
        "v2-long",
        "job-a",
        "job-b",
        "job-c",
    ];
    for id in ids {
        let key = format!("sftest:job:{id}");
        assert_eq!(
            server.cli(&["HEXISTS", &key, "spec"]),
            "0",
            "{id} rewritten"
        );
        assert_eq!(
            server.cli(&["HEXISTS", &key, "id"]),
            "0",
            "{id}: no copy of its id"
        );
        assert_eq!(
            server.cli(&["OBJECT", "ENCODING", &key]),
            "listpack",
            "{id} is compact"
        );
    }
    assert_eq!(
        server.cli(&["EXISTS", "sftest:job:v2-long:p"]),
        "1",
        "the long payload in its own key"
    );
    // A second connect finds nothing left to do.
    drop(backend(&server).await);

    // Shown as the old build stored them.
    for (id, s) in &specs {
        assert_eq!(&b.get(id).await.unwrap().unwrap().spec, s, "{id}'s spec");
    }
    let running = b.get("v2-running").await.unwrap().unwrap();
    assert_eq!(
        (
            running.state,
            running.lease.as_ref().unwrap().owner_worker.as_str()
        ),
        (JobState::Running, "old-w")
    );
    let done = b.get("v2-done").await.unwrap().unwrap();
    assert_eq!(
        (done.state, done.outcome.clone(), done.error.clone()),
        (JobState::Succeeded, Some(outcome(ExitClass::Passed)), None)
    );
    assert_eq!(
        done.history
            .iter()
            .map(|r| r.result.as_deref())
            .collect::<Vec<_>>(),
        [Some("passed")]
    );
    let dead = b.get("v2-dead").await.unwrap().unwrap();
    assert_eq!(
        (dead.state, dead.error.as_deref(), dead.attempts),
        (JobState::Dead, Some("boom"), 2)
    );
    assert_eq!(
        dead.history
            .iter()
            .map(|r| (r.attempt, r.result.as_deref()))
            .collect::<Vec<_>>(),
        [(1, Some("failed")), (2, Some("failed"))]
    );
    let c_job = b.get("job-c").await.unwrap().unwrap();
    assert_eq!(
        (c_job.state, c_job.history.len(), c_job.error.as_deref()),
        (JobState::Dead, 1, Some("old boom"))
    );
    assert_eq!(c_job.outcome, Some(outcome(ExitClass::Failed { code: 1 })));
    let job_b = b.get("job-b").await.unwrap().unwrap();
    assert_eq!((job_b.state, job_b.history.len()), (JobState::Running, 2));
    assert!(job_b.history[1].ended_at_ms.is_none());

    // They carry on: the keyed job deduplicates, the running ones finish, the queued ones lease
    // in FIFO order, the dead ones retry with their history.
    let again = b.enqueue(&specs[4].1).await.unwrap();
    assert_eq!((again.job_id.as_str(), again.created), ("v2-keyed", false));
    assert_eq!(
        b.finish("v2-running", 1, &finish(JobState::Succeeded, 0, "passed"))
            .await
            .unwrap(),
        FinishReply::Applied(JobState::Succeeded)
    );
    assert_eq!(
        b.finish("job-b", 1, &finish(JobState::Succeeded, 0, "passed"))
            .await
            .unwrap(),
        FinishReply::Fenced { current_token: 2 }
    );
    assert_eq!(
        b.finish("job-b", 2, &finish(JobState::Succeeded, 0, "passed"))
            .await
            .unwrap(),
        FinishReply::Applied(JobState::Succeeded)
    );
    let b_done = b.get("job-b").await.unwrap().unwrap();
    assert_eq!(
        b_done
            .history
            .iter()
            .map(|r| (r.attempt, r.worker.as_str(), r.result.as_deref()))
            .collect::<Vec<_>>(),
        [(1, "old-w", Some("failed")), (2, "old-w", Some("passed"))]
    );
    let w = worker("new");
    let leased: Vec<String> = b
        .lease("v2", &w, 10, Duration::ZERO)
        .await
        .unwrap()
        .into_iter()
        .map(|l| l.job.id)
        .collect();
    assert_eq!(leased, ["v2-queued", "v2-keyed", "v2-long"]);
    let long = b.get("v2-long").await.unwrap().unwrap();
    assert_eq!(long.spec.payload, long_payload);
    let l = b.lease("old", &w, 10, Duration::ZERO).await.unwrap();
    assert_eq!(
        (l.len(), l[0].job.id.as_str(), l[0].fencing_token),
        (1, "job-a", 1)
    );
    for id in ["v2-dead", "job-c"] {
        b.retry(id).await.unwrap();
    }
    let dead_again = b
        .lease("v2", &w, 1, Duration::ZERO)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(
        (
            dead_again.job.id.as_str(),
            dead_again.fencing_token,
            dead_again.job.history.len()
        ),
        ("v2-dead", 3, 3)
    );
    let c_again = b
        .lease("old", &w, 1, Duration::ZERO)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(
        (
            c_again.job.id.as_str(),
            c_again.fencing_token,
            c_again.job.history.len()
        ),
        ("job-c", 2, 2)
    );
    let listed = b.list(Some(JobState::Succeeded), 10).await.unwrap();
    assert_eq!(
        listed.iter().map(|j| j.id.as_str()).collect::<HashSet<_>>(),
        HashSet::from(["v2-done", "v2-running", "job-b"])
    );
}

/// A client-made request id for the old finish batch.
fn uuid_like(id: &str, token: u64) -> String {
    format!("req-{id}-{token}")
}

#[tokio::test]
async fn retry_finishing_between_ingestion_read_and_ack_is_not_lost() {
    let server = RedisServer::start();
    scenarios::retry_finishing_between_ingestion_read_and_ack_is_not_lost(&backend(&server).await)
        .await;
}

#[tokio::test]
async fn a_retried_then_cancelled_job_gets_a_new_token_and_its_cancel_is_applied() {
    let server = RedisServer::start();
    scenarios::a_retried_then_cancelled_job_gets_a_new_token_and_its_cancel_is_applied(
        &backend(&server).await,
    )
    .await;
}

/// Found by the fault soak (issue 21): see the scenario.
#[tokio::test]
async fn ingestion_waits_for_another_writer_of_the_store() {
    let server = RedisServer::start();
    scenarios::ingestion_waits_for_another_writer_of_the_store(&backend(&server).await).await;
}

/// Found by the fault soak (issue 21): `pending_results` reads the `results` index and the job
/// hashes in two round trips. A job retried in between (here: its id put back into the index
/// as the first read saw it) is no longer a pending result; it was handed out as `queued` and
/// applied so, and its real result under that token was later dropped as a duplicate.
#[tokio::test]
async fn a_job_retried_between_reading_the_results_index_and_its_hash_is_not_a_pending_result() {
    use skillforge_engine::ingest::{RecordOnly, ingest_once};
    let server = RedisServer::start();
    let b = backend(&server).await;
    let home = tempfile::tempdir().unwrap();
    let store = skillforge_store::Store::open(home.path()).await.unwrap();
    let w = worker("index-then-hash");
    let mut once = spec("q");
    once.max_attempts = 1;
    let id = b.enqueue(&once).await.unwrap().job_id;
    let leased = b.lease("q", &w, 1, Duration::ZERO).await.unwrap();
    b.finish(
        &id,
        leased[0].fencing_token,
        &finish(JobState::Dead, 0, "failed"),
    )
    .await
    .unwrap();
    b.retry(&id).await.unwrap();
    server.cli(&["ZADD", "sftest:results", "1", &id]);
    assert!(
        b.pending_results(10).await.unwrap().is_empty(),
        "a queued job is no pending result"
    );
    assert_eq!(
        ingest_once(&b, &store, &RecordOnly).await.unwrap().applied,
        0
    );
    let rows = skillforge_store::applied::applied_for_job(store.pool(), &id)
        .await
        .unwrap();
    assert!(rows.is_empty(), "nothing applied as `queued`: {rows:?}");
}

/// Found by the fault soak (issue 21): see the scenario.
#[tokio::test]
async fn a_cancelled_job_keeps_each_attempt_once_under_its_own_token() {
    let server = RedisServer::start();
    scenarios::a_cancelled_job_keeps_each_attempt_once_under_its_own_token(&backend(&server).await)
        .await;
}

/// Issue 12 item 6: Redis losing its data (here `FLUSHALL`; a restart without persistence is the
/// same) is reported once by the namespace check, and a re-run of the lost job under the same
/// idempotency key is not applied a second time: the store shows the key applied.
#[tokio::test]
async fn a_namespace_that_lost_its_data_is_reported_once_and_applied_work_is_not_applied_again() {
    use skillforge_engine::ingest::{RecordOnly, ingest_once};
    let server = RedisServer::start();
    let b = backend(&server).await;
    let home = tempfile::tempdir().unwrap();
    let store = skillforge_store::Store::open(home.path()).await.unwrap();
    let w = worker("epoch");
    let mut keyed = spec("default");
    keyed.idempotency_key = Some("once".into());
    let run = |id: String| {
        let (b, w) = (&b, &w);
        async move {
            let leased = b.lease("default", w, 1, Duration::ZERO).await.unwrap();
            assert_eq!(leased[0].job.id, id);
            b.finish(
                &id,
                leased[0].fencing_token,
                &finish(JobState::Succeeded, 0, "passed"),
            )
            .await
            .unwrap();
        }
    };
    let first = b.enqueue(&keyed).await.unwrap().job_id;
    run(first.clone()).await;
    assert_eq!(
        ingest_once(&b, &store, &RecordOnly).await.unwrap().applied,
        1
    );
    assert_eq!(b.check_namespace().await.unwrap(), None, "nothing lost yet");

    server.cli(&["flushall"]);
    let loss = b
        .check_namespace()
        .await
        .unwrap()
        .expect("the loss is reported");
    assert_eq!((loss.namespace.as_str(), loss.jobs_now), ("sftest", 0));
    assert_ne!(loss.previous_epoch, loss.current_epoch);
    assert!(loss.to_string().contains("lost its data"), "{loss}");
    assert_eq!(b.check_namespace().await.unwrap(), None, "reported once");
    // Another process connecting now sees the new epoch, not a loss.
    assert_eq!(
        backend(&server).await.check_namespace().await.unwrap(),
        None
    );

    // The producer submits the key again: the emptied queue makes a new job, which runs...
    let again = b.enqueue(&keyed).await.unwrap();
    assert!(again.created && again.job_id != first);
    run(again.job_id.clone()).await;
    // ...but its result is not applied: the store shows the key applied by the first job.
    let report = ingest_once(&b, &store, &RecordOnly).await.unwrap();
    assert_eq!((report.applied, report.duplicates), (0, 1));
    assert!(
        b.pending_results(10).await.unwrap().is_empty(),
        "acknowledged"
    );
    let applied = skillforge_store::applied::applied_for_job(store.pool(), &again.job_id)
        .await
        .unwrap();
    assert!(applied.is_empty(), "{applied:?}");
}

/// A script of the layout-3 build, from the verbatim copies in `layout3/`.
fn layout3_script(body: &str) -> redis::Script {
    const COMMON: &str = include_str!("layout3/common.lua");
    const TRANSITIONS: &str = include_str!("layout3/transitions.lua");
    redis::Script::new(&format!("{COMMON}\n{TRANSITIONS}\n{body}"))
}

/// A namespace the layout-3 build wrote with its own scripts (queued jobs in FIFO order, a
/// delayed one, a running one, succeeded and failed jobs acknowledged, a cancelled one, a pending
/// result) is rewritten into layout 4 when this build connects: its ready and done sorted sets
/// become lists in the same order, and its jobs carry on (leased in FIFO order, finished,
/// acknowledged, retried, listed and pruned).
#[tokio::test]
async fn a_layout_3_namespace_becomes_layout_4_on_open_and_its_jobs_carry_on() {
    use skillforge_engine::retention::{Bound, PruneRule, RetainClass, prune_pass};
    let server = RedisServer::start();
    let client = redis::Client::open(server.url()).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    let enqueue = layout3_script(include_str!("layout3/enqueue.lua"));
    let lease = layout3_script(include_str!("layout3/lease.lua"));
    let finish_batch = layout3_script(include_str!("layout3/finish_batch.lua"));
    let ack = layout3_script(include_str!("layout3/ack.lua"));
    let cancel = layout3_script(include_str!("layout3/cancel.lua"));
    let prune = layout3_script(include_str!("layout3/prune.lua"));
    // The epoch and layout keys as the layout-3 build's connect left them.
    server.cli(&["SET", "sftest:layout", "3"]);
    server.cli(&["SET", "sftest:epoch", "old-epoch"]);
    server.cli(&["SET", "sftest:done:backfill", "done"]);
    let s = spec("l3");
    let old_enqueue = |id: &'static str, not_before: String, key: &'static str| {
        let mut inv = enqueue.prepare_invoke();
        inv.arg("sftest:")
            .arg(id)
            .arg(&s.queue)
            .arg(key)
            .arg(s.max_attempts)
            .arg(s.heartbeat_ms)
            .arg(s.stale_after_ms)
            .arg(u8::from(s.idempotent))
            .arg(not_before)
            .arg(&s.workflow)
            .arg(&s.stage)
            .arg(&s.kind)
            .arg(serde_json::to_string(&s.payload).unwrap())
            .arg(s.timeout_ms)
            .arg("");
        inv
    };
    let later = (server_now_ms(&server) + 3_600_000).to_string();
    for id in [
        l3("run"),
        l3("ok"),
        l3("fail"),
        l3("pending"),
        l3("gone"),
        l3("cancel"),
        l3("q1"),
        l3("q2"),
        l3("q3"),
    ] {
        let _: (String, i64) = old_enqueue(id, String::new(), "")
            .invoke_async(&mut c)
            .await
            .unwrap();
    }
    let _: (String, i64) = old_enqueue(l3("keyed"), String::new(), "k-old")
        .invoke_async(&mut c)
        .await
        .unwrap();
    let _: (String, i64) = old_enqueue(l3("later"), later, "")
        .invoke_async(&mut c)
        .await
        .unwrap();
    assert_eq!(
        server.cli(&["TYPE", "sftest:ready:l3"]),
        "zset",
        "the old layout"
    );
    type Leased = (Vec<Vec<Option<String>>>, i64, i64);
    let (rows, _, _): Leased = lease
        .prepare_invoke()
        .arg("sftest:")
        .arg("l3")
        .arg(5)
        .arg("old-w")
        .arg("old-h")
        .arg(42)
        .arg("req-1")
        .arg(1000)
        .invoke_async(&mut c)
        .await
        .unwrap();
    assert_eq!(rows.len(), 5);
    let passed = serde_json::to_string(&outcome(ExitClass::Passed)).unwrap();
    let mut old_finish = finish_batch.prepare_invoke();
    old_finish
        .arg("sftest:")
        .arg("req-2")
        .arg(1000)
        .arg(4)
        .arg(0);
    for (id, next, label) in [
        (l3("ok"), "succeeded", "passed"),
        (l3("fail"), "failed", "failed"),
        (l3("pending"), "succeeded", "passed"),
        (l3("gone"), "succeeded", "passed"),
    ] {
        old_finish
            .arg(id)
            .arg(1)
            .arg(next)
            .arg(0)
            .arg(label)
            .arg(&passed)
            .arg("")
            .arg(0);
    }
    let _: redis::Value = old_finish.invoke_async(&mut c).await.unwrap();
    for (id, token) in [(l3("ok"), 1), (l3("fail"), 1), (l3("gone"), 1)] {
        let _: Vec<String> = ack
            .prepare_invoke()
            .arg("sftest:")
            .arg(id)
            .arg(token)
            .invoke_async(&mut c)
            .await
            .unwrap();
    }
    // `gone` is pruned by the old build (keep the newest 1: `ok` and `gone` finished at the same
    // ms, and the sorted set orders them by id).
    let pruned: Vec<i64> = prune
        .prepare_invoke()
        .arg("sftest:")
        .arg("succeeded")
        .arg(10)
        .arg("")
        .arg(1)
        .arg("")
        .arg("")
        .arg("0")
        .invoke_async(&mut c)
        .await
        .unwrap();
    assert_eq!(pruned[0], 1);
    assert!(server.cli(&["HEXISTS", "sftest:pruned", l3("gone")]) == "1");
    let _: Vec<String> = cancel
        .prepare_invoke()
        .arg("sftest:")
        .arg(l3("cancel"))
        .invoke_async(&mut c)
        .await
        .unwrap();
    let _: Vec<String> = ack
        .prepare_invoke()
        .arg("sftest:")
        .arg(l3("cancel"))
        .arg(0)
        .invoke_async(&mut c)
        .await
        .unwrap();
    assert_eq!(server.cli(&["TYPE", "sftest:done:failed"]), "zset");
    assert_eq!(
        server.cli(&["HGET", &format!("sftest:job:{}", l3("q1")), "s"]),
        "queued",
        "layout 3 stores every field"
    );

    // This build connects: the sets become lists, in their order; the hashes stay.
    let b = backend(&server).await;
    assert_eq!(server.cli(&["GET", "sftest:layout"]), "4");
    let list = |key: &str| {
        server
            .cli(&["LRANGE", key, "0", "-1"])
            .lines()
            .map(id::public)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        list("sftest:ready:l3"),
        [l3("q1"), l3("q2"), l3("q3"), l3("keyed")]
    );
    assert_eq!(list("sftest:done:succeeded"), [l3("ok")]);
    let mut failed = list("sftest:done:failed");
    failed.sort();
    let mut want = vec![l3("cancel"), l3("fail")];
    want.sort();
    assert_eq!(failed, want);
    assert_eq!(
        server.cli(&["KEYS", "sftest:*:l4"]),
        "",
        "no staging list left"
    );
    assert_eq!(
        server.cli(&["KEYS", "sftest:layout:*"]),
        "",
        "no migration cursor left"
    );
    assert_eq!(
        server.cli(&["ZCARD", "sftest:results"]),
        "1",
        "the pending result stays pending"
    );
    // Every key and member is under the stored (short) ids now, the Lua rule being Rust's.
    for label in [
        "run", "ok", "fail", "pending", "cancel", "q1", "q2", "q3", "later", "keyed",
    ] {
        let key = format!("sftest:job:{}", id::stored(l3(label)));
        assert_eq!(
            server.cli(&["EXISTS", &key]),
            "1",
            "{label} renamed to {key}"
        );
        assert_eq!(
            server.cli(&["EXISTS", &format!("sftest:job:{}", l3(label))]),
            "0"
        );
    }
    assert_eq!(
        server
            .cli(&["ZSCORE", "sftest:results", &id::stored(l3("pending"))])
            .is_empty(),
        false
    );
    assert_eq!(
        server.cli(&["HGET", "sftest:idem", "k-old"]),
        id::stored(l3("keyed"))
    );
    let tomb = b
        .tombstone(l3("gone"))
        .await
        .unwrap()
        .expect("the old tombstone, renamed");
    assert_eq!(tomb.state, JobState::Succeeded);
    drop(backend(&server).await);

    // Shown as stored, and they carry on.
    let run = b.get(l3("run")).await.unwrap().unwrap();
    assert_eq!(
        (
            run.state,
            run.lease.as_ref().map(|l| l.owner_worker.as_str())
        ),
        (JobState::Running, Some("old-w"))
    );
    assert_eq!(
        b.get(l3("ok")).await.unwrap().unwrap().state,
        JobState::Succeeded
    );
    assert_eq!(
        b.get(l3("later")).await.unwrap().unwrap().state,
        JobState::Queued
    );
    let mut keyed = spec("l3");
    keyed.idempotency_key = Some("k-old".into());
    let again = b.enqueue(&keyed).await.unwrap();
    assert_eq!(
        (again.job_id.as_str(), again.created),
        (l3("keyed"), false),
        "the old key still deduplicates"
    );
    let fresh = b.enqueue(&spec("l3")).await.unwrap().job_id;
    let w = worker("new");
    let leased: Vec<String> = b
        .lease("l3", &w, 10, Duration::ZERO)
        .await
        .unwrap()
        .into_iter()
        .map(|l| l.job.id)
        .collect();
    assert_eq!(
        leased,
        [l3("q1"), l3("q2"), l3("q3"), l3("keyed"), fresh.as_str()],
        "FIFO across the rewrite"
    );
    assert_eq!(
        b.finish(l3("run"), 1, &finish(JobState::Succeeded, 0, "passed"))
            .await
            .unwrap(),
        FinishReply::Applied(JobState::Succeeded)
    );
    let running: Vec<String> = b
        .leases()
        .await
        .unwrap()
        .into_iter()
        .map(|l| l.name)
        .collect();
    assert!(
        running.contains(&l3("q1").to_owned()),
        "leases are listed by public id: {running:?}"
    );
    let pending: HashSet<String> = b
        .pending_results(10)
        .await
        .unwrap()
        .into_iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(
        pending,
        HashSet::from([l3("pending").to_owned(), l3("run").to_owned()])
    );
    for id in [l3("pending"), l3("run")] {
        assert!(b.ack_result(id, 1).await.unwrap());
    }
    b.retry(l3("fail")).await.unwrap();
    let again = b
        .lease("l3", &w, 1, Duration::ZERO)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(
        (again.job.id.as_str(), again.fencing_token),
        (l3("fail"), 2)
    );
    let succeeded: HashSet<String> = b
        .list(Some(JobState::Succeeded), 10)
        .await
        .unwrap()
        .into_iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(
        succeeded,
        HashSet::from([
            l3("ok").to_owned(),
            l3("pending").to_owned(),
            l3("run").to_owned()
        ])
    );
    let all = Bound {
        before_ms: Some(b.now_ms().await.unwrap() + 1_000),
        keep_newest: None,
    };
    let rule = PruneRule {
        class: RetainClass::Succeeded,
        jobs: all,
        tombstones: Bound::default(),
    };
    assert_eq!(prune_pass(&b, &[rule], 100).await.unwrap().jobs, 3);
    assert!(b.get(l3("ok")).await.unwrap().is_none());
}

/// The fixed UUID job ids of the layout-3 namespace (every hex digit used, so the rename's
/// base64url text is checked on all its characters).
fn l3(label: &str) -> &'static str {
    match label {
        "run" => "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a01",
        "ok" => "0193a1b2-c3d4-7e5f-8a9b-ffeeddccbb02",
        "fail" => "0193a1b2-c3d4-7e5f-8a9b-123456789a03",
        "pending" => "0193a1b2-c3d4-7e5f-8a9b-abcdef012304",
        "cancel" => "0193a1b2-c3d4-7e5f-8a9b-0f1e2d3c4b05",
        "gone" => "0193a1b2-c3d4-7e5f-8a9b-5a6b7c8d9e06",
        "q1" => "0193a1b2-c3d4-7e5f-8a9b-000000000007",
        "q2" => "0193a1b2-c3d4-7e5f-8a9b-fffffffffff8",
        "q3" => "0193a1b2-c3d4-7e5f-8a9b-7777777777a9",
        "later" => "0193a1b2-c3d4-7e5f-8a9b-0000000000aa",
        "keyed" => "0193a1b2-c3d4-7e5f-8a9b-0000000000bb",
        other => panic!("no id for {other}"),
    }
}

/// The server's clock, ms.
fn server_now_ms(server: &RedisServer) -> i64 {
    server
        .cli(&["TIME"])
        .lines()
        .next()
        .unwrap()
        .parse::<i64>()
        .unwrap()
        * 1000
}

/// Ready lists are lazy: a cancelled queued job leaves its entry, counted in `sr`; the lease
/// skips it, also after the job is retried (its live entry is at the tail), and a cancelled
/// delayed job leaves none.
#[tokio::test]
async fn a_cancelled_queued_jobs_entry_is_skipped_and_a_retry_leases_it_at_its_new_place() {
    let server = RedisServer::start();
    let b = backend(&server).await;
    let ids: Vec<String> = enqueue_in_order(&b, "lz", 3).await;
    let mut delayed = spec("lz");
    delayed.not_before_ms = Some(b.now_ms().await.unwrap() + 3_600_000);
    let later = b.enqueue(&delayed).await.unwrap().job_id;
    assert_eq!(
        b.cancel(&ids[1]).await.unwrap(),
        skillforge_engine::CancelReply::Cancelled
    );
    assert_eq!(
        b.cancel(&later).await.unwrap(),
        skillforge_engine::CancelReply::Cancelled
    );
    assert_eq!(
        server.cli(&["HGET", &format!("sftest:job:{}", id::stored(&ids[1])), "sr"]),
        "1"
    );
    assert_eq!(
        server.cli(&[
            "HEXISTS",
            &format!("sftest:job:{}", id::stored(&later)),
            "sr"
        ]),
        "0",
        "a delayed job leaves no entry"
    );
    assert_eq!(
        server.cli(&["LLEN", "sftest:ready:lz"]),
        "3",
        "the entry stays (no O(n) removal)"
    );
    assert_eq!(server.cli(&["ZCARD", "sftest:delayed:lz"]), "0");
    b.retry(&ids[1]).await.unwrap();
    let last = b.enqueue(&spec("lz")).await.unwrap().job_id;
    let w = worker("lz");
    let leased: Vec<String> = b
        .lease("lz", &w, 10, Duration::ZERO)
        .await
        .unwrap()
        .into_iter()
        .map(|l| l.job.id)
        .collect();
    assert_eq!(
        leased,
        [ids[0].clone(), ids[2].clone(), ids[1].clone(), last],
        "the stale entry is skipped once"
    );
    assert_eq!(
        server.cli(&[
            "HEXISTS",
            &format!("sftest:job:{}", id::stored(&ids[1])),
            "sr"
        ]),
        "0"
    );
    assert_eq!(server.cli(&["LLEN", "sftest:ready:lz"]), "0");
    // A cancelled job whose entry is never popped before it is pruned: the entry is dropped.
    let gone = b.enqueue(&spec("lz")).await.unwrap().job_id;
    b.cancel(&gone).await.unwrap();
    server.cli(&["DEL", &format!("sftest:job:{}", id::stored(&gone))]);
    let next = b.enqueue(&spec("lz")).await.unwrap().job_id;
    let leased: Vec<String> = b
        .lease("lz", &w, 10, Duration::ZERO)
        .await
        .unwrap()
        .into_iter()
        .map(|l| l.job.id)
        .collect();
    assert_eq!(leased, [next]);
}

/// Enqueues `n` jobs on `queue` one after the other (FIFO order).
async fn enqueue_in_order(b: &RedisBackend, queue: &str, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for _ in 0..n {
        ids.push(b.enqueue(&spec(queue)).await.unwrap().job_id);
    }
    ids
}

/// Done lists are lazy: retrying an acknowledged failed job leaves its entry, counted in the
/// job's `sd` and in `done:failed:stale`; prune drops it and counts the retained jobs right (a
/// count bound keeps the newest live ones), and a job pruned with stale entries left has them
/// uncounted.
#[tokio::test]
async fn a_retried_acknowledged_jobs_done_entry_is_dropped_and_counts_stay_right() {
    use skillforge_engine::retention::{Bound, PruneRule, RetainClass, prune_pass};
    let server = RedisServer::start();
    let b = backend(&server).await;
    let w = worker("dn");
    let mut ids = Vec::new();
    for _ in 0..3 {
        let id = b.enqueue(&spec("dn")).await.unwrap().job_id;
        let l = b
            .lease("dn", &w, 1, Duration::ZERO)
            .await
            .unwrap()
            .remove(0);
        b.finish(&id, l.fencing_token, &finish(JobState::Failed, 0, "failed"))
            .await
            .unwrap();
        assert!(b.ack_result(&id, l.fencing_token).await.unwrap());
        ids.push(id);
    }
    // The oldest is retried and fails again: two entries, the first stale.
    b.retry(&ids[0]).await.unwrap();
    assert_eq!(server.cli(&["GET", "sftest:done:failed:stale"]), "1");
    let l = b
        .lease("dn", &w, 1, Duration::ZERO)
        .await
        .unwrap()
        .remove(0);
    b.finish(
        &ids[0],
        l.fencing_token,
        &finish(JobState::Failed, 0, "failed"),
    )
    .await
    .unwrap();
    assert!(b.ack_result(&ids[0], l.fencing_token).await.unwrap());
    assert_eq!(server.cli(&["LLEN", "sftest:done:failed"]), "4");
    // Keep the newest 2 of the 3 live jobs: exactly one goes (ids[1]), the stale entry with it.
    let keep2 = PruneRule {
        class: RetainClass::Failed,
        jobs: Bound {
            before_ms: None,
            keep_newest: Some(2),
        },
        tombstones: Bound::default(),
    };
    assert_eq!(b.prune_count(&keep2).await.unwrap().0, 1);
    assert_eq!(prune_pass(&b, &[keep2], 10).await.unwrap().jobs, 1);
    assert!(b.get(&ids[1]).await.unwrap().is_none());
    for id in [&ids[0], &ids[2]] {
        assert!(b.get(id).await.unwrap().is_some(), "{id} kept");
    }
    assert_eq!(server.cli(&["GET", "sftest:done:failed:stale"]), "0");
    assert_eq!(
        server.cli(&[
            "HEXISTS",
            &format!("sftest:job:{}", id::stored(&ids[0])),
            "sd"
        ]),
        "0"
    );
    assert_eq!(server.cli(&["LLEN", "sftest:done:failed"]), "2");
}

/// The record a lease request keeps for a retry after a lost reply (`leasereq:{id}`) is deleted
/// by the next call once its reply arrived, and otherwise expires within two minutes: a drain
/// leaves at most the last one.
#[tokio::test]
async fn lease_request_records_go_once_answered() {
    let server = RedisServer::start();
    let b = backend(&server).await;
    let w = worker("lr");
    for _ in 0..20 {
        b.enqueue(&spec("lr")).await.unwrap();
    }
    let mut l = b
        .lease("lr", &w, 1, Duration::ZERO)
        .await
        .unwrap()
        .remove(0);
    let records = || server.cli(&["KEYS", "sftest:leasereq:*"]).lines().count();
    assert_eq!(records(), 1);
    let ttl: i64 = server
        .cli(&["PTTL", server.cli(&["KEYS", "sftest:leasereq:*"]).trim()])
        .parse()
        .unwrap();
    assert!(ttl > 0 && ttl <= 120_000, "{ttl}");
    for _ in 0..19 {
        let (_, next) = b
            .finish_and_lease(
                &l.job.id,
                l.fencing_token,
                &finish(JobState::Succeeded, 0, "passed"),
                "lr",
                &w,
            )
            .await
            .unwrap();
        l = next.expect("a next job");
        assert_eq!(
            records(),
            1,
            "only the last answered request's record is left"
        );
    }
    b.finish(
        &l.job.id,
        l.fencing_token,
        &finish(JobState::Succeeded, 0, "passed"),
    )
    .await
    .unwrap();
    assert!(
        b.lease("lr", &w, 1, Duration::ZERO)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(records(), 0, "a lease call deletes the last one");
}

/// Issue 32 item 3: see the scenario.
#[tokio::test]
async fn results_that_cannot_be_applied_yet_are_skipped_past_with_backoff() {
    let server = RedisServer::start();
    scenarios::results_that_cannot_be_applied_yet_are_skipped_past_with_backoff(
        &backend(&server).await,
    )
    .await;
}
