//! Stored layouts (layout 2 and an older build's layout 1), the ingestion/ack race, and a namespace that lost its data.

use super::*;

/// Layout 2 (every job this build enqueues): a terminal attempt's record stays in the job hash
/// and only superseded attempts are pushed to the history list; the decoded history is the same.
#[tokio::test]
async fn terminal_attempt_stays_in_the_hash_and_is_listed_once_superseded() {
    let server = RedisServer::start();
    let b = backend(&server).await;
    let w = worker("w");
    let id = b.enqueue(&spec("h")).await.unwrap().job_id;
    let hkey = format!("sftest:job:{id}");
    let list = format!("sftest:job:{id}:history");
    assert_eq!(server.cli(&["HGET", &hkey, "layout"]), "2");

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
    assert!(queued.lease.is_none(), "not running: no lease, whatever fields the hash keeps");
    assert_eq!(queued.error.as_deref(), Some("boom"));
    assert_eq!(queued.history.len(), 1);
    assert_eq!(queued.history[0].retry_delay_ms, Some(0));

    // Attempt 2 fails terminally without outcome or error: no list write, its closed record is
    // the hash.
    let l = b.lease("h", &w, 1, Duration::ZERO).await.unwrap().remove(0);
    assert_eq!((l.job.attempts, l.fencing_token, l.job.history.len()), (2, 2, 2));
    assert_eq!(l.job.error.as_deref(), Some("boom"), "the last attempt's error, as stored");
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
    assert_eq!((last.attempt, last.fencing_token, last.worker.as_str()), (2, 2, w.worker_id.as_str()));
    assert_eq!(last.result.as_deref(), Some("not_runnable"));
    assert_eq!(last.ended_at_ms, Some(done.updated_at_ms));
    assert_eq!(last.started_at_ms, l.job.lease.as_ref().unwrap().acquired_at_ms);
    assert_eq!(last.retry_delay_ms, None);
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

    // Layout 2 marks no finish in the hash: a lease closed by a release under the current
    // token must still fence a late finish of it (not report it applied).
    let other = b.enqueue(&spec("h2")).await.unwrap().job_id;
    let lo = b.lease("h2", &w, 1, Duration::ZERO).await.unwrap().remove(0);
    assert!(b.release(&other, lo.fencing_token).await.unwrap());
    assert_eq!(
        b.finish(&other, lo.fencing_token, &done_finish).await.unwrap(),
        FinishReply::Fenced { current_token: 1 }
    );

    // `jobs retry` supersedes it: the record moves to the list, and the next lease shows all.
    b.retry(&id).await.unwrap();
    assert_eq!(server.cli(&["LLEN", &list]), "2");
    let again = b.get(&id).await.unwrap().unwrap();
    assert_eq!(again.history, done.history);
    let l = b.lease("h", &w, 1, Duration::ZERO).await.unwrap().remove(0);
    assert_eq!((l.job.attempts, l.fencing_token, l.job.history.len()), (1, 3, 3));
    assert_eq!(&l.job.history[..2], &done.history[..]);
}

/// Jobs written by the previous build (layout 1: no `layout` field, every closed attempt in the
/// history list, lease fields deleted at the end) — e.g. in flight in an existing Redis during
/// an upgrade — are leased, finished and shown as before.
#[tokio::test]
async fn layout_1_jobs_from_an_older_build_still_work() {
    let server = RedisServer::start();
    let b = backend(&server).await;
    let w = worker("new");
    let now = b.now_ms().await.unwrap();
    let t = now.to_string();
    let spec_json = serde_json::to_string(&spec("old")).unwrap();
    // The old enqueue.lua's hash, as a queued, a running (second attempt) and a succeeded job.
    let old_hash = |id: &str, state: &str, attempts: &str, token: &str| {
        let key = format!("sftest:job:{id}");
        let out = server.cli(&[
            "HSET", &key, "id", id, "queue", "old", "spec", &spec_json, "state", state,
            "attempts", attempts, "max_attempts", "3", "token", token, "seq", "1",
            "heartbeat_ms", "2000", "stale_after", "15000", "idempotent", "1", "created_at", &t,
            "updated_at", &t, "cancel_requested", "0", "recovery_available", "0", "not_before", &t,
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
    server.cli(&["ZADD", "sftest:state:queued", &t, "job-a"]);
    server.cli(&["ZADD", "sftest:ready:old", "1", "job-a"]);
    old_hash("job-b", "running", "2", "2");
    server.cli(&[
        "HSET", "sftest:job:job-b", "owner_worker", "old-w", "owner_host", "old-h", "owner_pid",
        "42", "acquired_at", &t, "heartbeat_at", &t,
    ]);
    server.cli(&["RPUSH", "sftest:job:job-b:history", &record(1, "failed", Some(0))]);
    server.cli(&["ZADD", "sftest:leases", &(now + 15_000).to_string(), "job-b"]);
    old_hash("job-c", "dead", "1", "1");
    let out_json = serde_json::to_string(&outcome(ExitClass::Failed { code: 1 })).unwrap();
    server.cli(&["HSET", "sftest:job:job-c", "outcome", &out_json, "closed_token", "1", "closed_by", "finish"]);
    server.cli(&["RPUSH", "sftest:job:job-c:history", &record(1, "failed", None)]);
    server.cli(&["ZADD", "sftest:state:dead", &t, "job-c"]);
    server.cli(&["SET", "sftest:seq", "10"]);

    // The running job: shown with its lease and open attempt, finished by the new scripts.
    let running = b.get("job-b").await.unwrap().unwrap();
    assert_eq!(running.state, JobState::Running);
    assert_eq!(running.lease.as_ref().unwrap().owner_worker, "old-w");
    assert_eq!(running.history.len(), 2);
    assert!(running.history[1].ended_at_ms.is_none());
    assert_eq!(
        b.finish("job-b", 1, &finish(JobState::Succeeded, 0, "passed")).await.unwrap(),
        FinishReply::Fenced { current_token: 2 }
    );
    assert_eq!(
        b.finish("job-b", 2, &finish(JobState::Succeeded, 0, "passed")).await.unwrap(),
        FinishReply::Applied(JobState::Succeeded)
    );
    let b_done = b.get("job-b").await.unwrap().unwrap();
    assert!(b_done.lease.is_none());
    assert_eq!(b_done.history.len(), 2);
    assert_eq!(b_done.history[0].result.as_deref(), Some("failed"));
    assert_eq!(
        (b_done.history[1].attempt, b_done.history[1].worker.as_str(), b_done.history[1].result.as_deref()),
        (2, "old-w", Some("passed"))
    );
    // Layout 1 stays layout 1: the record went to the list, the lease fields were deleted.
    assert_eq!(server.cli(&["LLEN", "sftest:job:job-b:history"]), "2");
    assert_eq!(server.cli(&["HEXISTS", "sftest:job:job-b", "owner_worker"]), "0");
    assert_eq!(server.cli(&["HEXISTS", "sftest:job:job-b", "layout"]), "0");

    // The queued job: leased (with finish_and_lease's path too), retried, finished.
    let l = b.lease("old", &w, 10, Duration::ZERO).await.unwrap();
    assert_eq!(l.len(), 1);
    assert_eq!((l[0].job.id.as_str(), l[0].fencing_token, l[0].job.history.len()), ("job-a", 1, 1));
    let (reply, next) = b
        .finish_and_lease("job-a", 1, &finish(JobState::Queued, 0, "failed"), "old", &w)
        .await
        .unwrap();
    assert_eq!(reply, FinishReply::Applied(JobState::Queued));
    let next = next.expect("the retried job is due at once");
    assert_eq!((next.job.id.as_str(), next.fencing_token, next.job.history.len()), ("job-a", 2, 2));
    assert_eq!(next.job.history[0].result.as_deref(), Some("failed"));
    b.finish("job-a", 2, &finish(JobState::Succeeded, 0, "passed")).await.unwrap();
    let a_done = b.get("job-a").await.unwrap().unwrap();
    assert_eq!(a_done.state, JobState::Succeeded);
    assert!(a_done.lease.is_none());
    assert_eq!(
        a_done.history.iter().map(|r| (r.attempt, r.result.as_deref())).collect::<Vec<_>>(),
        [(1, Some("failed")), (2, Some("passed"))]
    );
    assert_eq!(server.cli(&["LLEN", "sftest:job:job-a:history"]), "2");

    // The terminal job: shown as stored, retried and leased again with its full history.
    let c = b.get("job-c").await.unwrap().unwrap();
    assert_eq!((c.state, c.history.len()), (JobState::Dead, 1));
    assert!(c.lease.is_none());
    assert_eq!(c.outcome, Some(outcome(ExitClass::Failed { code: 1 })));
    b.retry("job-c").await.unwrap();
    let l = b.lease("old", &w, 1, Duration::ZERO).await.unwrap().remove(0);
    assert_eq!((l.job.id.as_str(), l.fencing_token, l.job.history.len()), ("job-c", 2, 2));
    assert_eq!(l.job.history[0].result.as_deref(), Some("failed"));
    assert_eq!(server.cli(&["LLEN", "sftest:job:job-c:history"]), "1");
    let listed = b.list(Some(JobState::Succeeded), 10).await.unwrap();
    assert_eq!(listed.iter().map(|j| j.id.as_str()).collect::<HashSet<_>>(), HashSet::from(["job-a", "job-b"]));
}

#[tokio::test]
async fn retry_finishing_between_ingestion_read_and_ack_is_not_lost() {
    let server = RedisServer::start();
    scenarios::retry_finishing_between_ingestion_read_and_ack_is_not_lost(&backend(&server).await).await;
}

#[tokio::test]
async fn a_retried_then_cancelled_job_gets_a_new_token_and_its_cancel_is_applied() {
    let server = RedisServer::start();
    scenarios::a_retried_then_cancelled_job_gets_a_new_token_and_its_cancel_is_applied(&backend(&server).await).await;
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
            b.finish(&id, leased[0].fencing_token, &finish(JobState::Succeeded, 0, "passed")).await.unwrap();
        }
    };
    let first = b.enqueue(&keyed).await.unwrap().job_id;
    run(first.clone()).await;
    assert_eq!(ingest_once(&b, &store, &RecordOnly).await.unwrap().applied, 1);
    assert_eq!(b.check_namespace().await.unwrap(), None, "nothing lost yet");

    server.cli(&["flushall"]);
    let loss = b.check_namespace().await.unwrap().expect("the loss is reported");
    assert_eq!((loss.namespace.as_str(), loss.jobs_now), ("sftest", 0));
    assert_ne!(loss.previous_epoch, loss.current_epoch);
    assert!(loss.to_string().contains("lost its data"), "{loss}");
    assert_eq!(b.check_namespace().await.unwrap(), None, "reported once");
    // Another process connecting now sees the new epoch, not a loss.
    assert_eq!(backend(&server).await.check_namespace().await.unwrap(), None);

    // The producer submits the key again: the emptied queue makes a new job, which runs...
    let again = b.enqueue(&keyed).await.unwrap();
    assert!(again.created && again.job_id != first);
    run(again.job_id.clone()).await;
    // ...but its result is not applied: the store shows the key applied by the first job.
    let report = ingest_once(&b, &store, &RecordOnly).await.unwrap();
    assert_eq!((report.applied, report.duplicates), (0, 1));
    assert!(b.pending_results(10).await.unwrap().is_empty(), "acknowledged");
    let applied = skillforge_store::applied::applied_for_job(store.pool(), &again.job_id).await.unwrap();
    assert!(applied.is_empty(), "{applied:?}");
}
