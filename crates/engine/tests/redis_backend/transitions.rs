//! Job transitions: round trip, listing by state, FIFO batched leases, idempotency keys, fencing, delayed retries and enqueues, reap actions.

use super::*;

#[tokio::test]
async fn enqueue_lease_finish_round_trip() {
    let server = RedisServer::start();
    let b = backend(&server).await;
    assert_eq!(b.name(), "redis");
    let w = worker("w");

    let e = b.enqueue(&spec("default")).await.unwrap();
    assert!(e.created);
    let job = b.get(&e.job_id).await.unwrap().expect("stored");
    assert_eq!(job.state, JobState::Queued);
    assert_eq!((job.attempts, job.fencing_token), (0, 0));
    assert!(job.lease.is_none() && job.history.is_empty());
    assert_eq!(job.spec, spec("default"));
    assert!(b.get("no-such-job").await.unwrap().is_none());

    // Another queue does not see it.
    assert!(
        b.lease("other", &w, 10, Duration::ZERO)
            .await
            .unwrap()
            .is_empty()
    );

    let leased = b.lease("default", &w, 10, Duration::ZERO).await.unwrap();
    assert_eq!(leased.len(), 1);
    let l = &leased[0];
    assert_eq!(l.job.id, e.job_id);
    assert_eq!(l.job.state, JobState::Running);
    assert_eq!(
        (l.job.attempts, l.fencing_token, l.job.fencing_token),
        (1, 1, 1)
    );
    let lease = l.job.lease.as_ref().expect("lease set");
    assert_eq!(lease.owner_worker, w.worker_id);
    assert_eq!(lease.owner_pid, w.pid);
    let now = b.now_ms().await.unwrap();
    assert!(
        (now - lease.acquired_at_ms).abs() < 5_000,
        "server clock stamps the lease"
    );
    assert_eq!(l.job.history.len(), 1);
    assert_eq!(l.job.history[0].attempt, 1);
    assert_eq!(l.job.history[0].fencing_token, 1);
    assert_eq!(l.job.history[0].worker, w.worker_id);
    assert!(l.job.history[0].ended_at_ms.is_none());

    let views = b.leases().await.unwrap();
    assert_eq!(views.len(), 1);
    assert_eq!(
        (views[0].kind, views[0].name.as_str()),
        (LeaseKind::Job, e.job_id.as_str())
    );
    assert_eq!(views[0].stale_after_ms, 15_000);

    assert_eq!(
        b.heartbeat(&e.job_id, 1).await.unwrap(),
        HeartbeatReply::Renewed
    );
    assert!(b.pending_results(10).await.unwrap().is_empty());

    let f = finish(JobState::Succeeded, 0, "passed");
    assert_eq!(
        b.finish(&e.job_id, 1, &f).await.unwrap(),
        FinishReply::Applied(JobState::Succeeded)
    );
    let done = b.get(&e.job_id).await.unwrap().unwrap();
    assert_eq!(done.state, JobState::Succeeded);
    assert!(done.lease.is_none());
    assert_eq!(done.outcome, f.outcome);
    assert_eq!(done.history[0].result.as_deref(), Some("passed"));
    assert!(done.history[0].ended_at_ms.is_some());
    assert!(b.leases().await.unwrap().is_empty());
    // Heartbeat after the end: the lease is gone.
    assert_eq!(
        b.heartbeat(&e.job_id, 1).await.unwrap(),
        HeartbeatReply::LeaseLost
    );

    let pending = b.pending_results(10).await.unwrap();
    assert_eq!(
        pending.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(),
        [e.job_id.as_str()]
    );
    assert!(
        !b.ack_result(&e.job_id, pending[0].fencing_token + 1)
            .await
            .unwrap(),
        "fenced on the token"
    );
    assert_eq!(b.pending_results(10).await.unwrap().len(), 1);
    assert!(
        b.ack_result(&e.job_id, pending[0].fencing_token)
            .await
            .unwrap()
    );
    assert!(b.pending_results(10).await.unwrap().is_empty());
    assert!(matches!(
        b.ack_result("nope", 1).await,
        Err(EngineError::NotFound(_))
    ));

    let second = b.enqueue(&spec("default")).await.unwrap();
    let all = b.list(None, 10).await.unwrap();
    assert_eq!(all.len(), 2);
    let succeeded = b.list(Some(JobState::Succeeded), 10).await.unwrap();
    assert_eq!(
        succeeded.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(),
        [e.job_id.as_str()]
    );
    let queued = b.list(Some(JobState::Queued), 10).await.unwrap();
    assert_eq!(
        queued.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(),
        [second.job_id.as_str()]
    );
    assert_eq!(b.list(None, 1).await.unwrap().len(), 1);
}

/// Calls of each Redis command since the last `CONFIG RESETSTAT` (commands run by scripts
/// included), from `INFO commandstats`.
fn command_calls(server: &RedisServer) -> std::collections::HashMap<String, u64> {
    server
        .cli(&["INFO", "commandstats"])
        .lines()
        .filter_map(|l| {
            let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = rest
                .split(',')
                .find_map(|kv| kv.strip_prefix("calls="))?
                .parse()
                .ok()?;
            Some((name.to_owned(), calls))
        })
        .collect()
}

/// `queued` and `succeeded` have no `state:*` set (the hot path writes none): they are listed
/// from the sets their jobs are in (`ready:*` / `delayed:*`; `done:succeeded` and the pending
/// `results`), reading O(page) jobs whatever the backlog — counted with `INFO commandstats`
/// behind 5 100 queued jobs; the rare states keep their sets. Only those index sets exist.
#[tokio::test]
async fn listing_by_state_reads_a_page_not_the_backlog() {
    let server = RedisServer::start();
    let b = backend(&server).await;
    let w = worker("lister");
    let acked = b.enqueue(&spec("q")).await.unwrap();
    let pending = b.enqueue(&spec("q")).await.unwrap();
    let doomed = b.enqueue(&spec("q")).await.unwrap();
    for (id, next) in [
        (&acked.job_id, JobState::Succeeded),
        (&pending.job_id, JobState::Succeeded),
        (&doomed.job_id, JobState::Dead),
    ] {
        let leased = b.lease("q", &w, 1, Duration::ZERO).await.unwrap();
        assert_eq!(&leased[0].job.id, id);
        assert_eq!(
            b.finish(id, 1, &finish(next, 0, "passed")).await.unwrap(),
            FinishReply::Applied(next)
        );
    }
    assert!(b.ack_result(&acked.job_id, 1).await.unwrap());
    let mut queued = Vec::new();
    for i in 0..5_100 {
        let mut s = spec(if i % 2 == 0 { "q" } else { "r" });
        if i % 10 == 0 {
            s.not_before_ms = Some(b.now_ms().await.unwrap() + 3_600_000);
        }
        queued.push(b.enqueue(&s).await.unwrap().job_id);
    }
    server.cli(&["CONFIG", "RESETSTAT"]);
    let succeeded = b.list(Some(JobState::Succeeded), 10).await.unwrap();
    assert_eq!(
        succeeded.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(),
        [pending.job_id.as_str(), acked.job_id.as_str()],
        "newest first, acknowledged or not"
    );
    let calls = command_calls(&server);
    assert!(
        calls.get("hgetall").copied().unwrap_or(0) <= 20,
        "{calls:?}"
    );
    assert!(calls.get("hget").copied().unwrap_or(0) <= 10, "{calls:?}");
    let dead = b.list(Some(JobState::Dead), 10).await.unwrap();
    assert_eq!(
        dead.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(),
        [doomed.job_id.as_str()]
    );
    server.cli(&["CONFIG", "RESETSTAT"]);
    let newest: Vec<String> = b
        .list(Some(JobState::Queued), 3)
        .await
        .unwrap()
        .into_iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(
        newest,
        queued.iter().rev().take(3).cloned().collect::<Vec<_>>(),
        "newest first, up to the limit"
    );
    let calls = command_calls(&server);
    assert!(
        calls.get("hgetall").copied().unwrap_or(0) <= 4 * 3,
        "two queues, ready and delayed: {calls:?}"
    );
    assert_eq!(
        b.list(Some(JobState::Queued), 10_000).await.unwrap().len(),
        5_100
    );
    assert!(b.list(Some(JobState::Failed), 10).await.unwrap().is_empty());
    let mut sets: Vec<String> = server
        .cli(&["--scan", "--pattern", "sftest:state:*"])
        .lines()
        .map(str::to_owned)
        .collect();
    sets.sort();
    assert_eq!(
        sets,
        ["sftest:state:dead"],
        "no index set for queued or succeeded jobs"
    );
}

#[tokio::test]
async fn leases_are_fifo_and_batched() {
    let server = RedisServer::start();
    let b = backend(&server).await;
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(b.enqueue(&spec("q")).await.unwrap().job_id);
    }
    let first = b.lease("q", &worker("w"), 3, Duration::ZERO).await.unwrap();
    let rest = b.lease("q", &worker("w"), 3, Duration::ZERO).await.unwrap();
    let got: Vec<String> = first
        .iter()
        .chain(&rest)
        .map(|l| l.job.id.clone())
        .collect();
    assert_eq!(first.len(), 3);
    assert_eq!(got, ids);
}

#[tokio::test]
async fn idempotency_key_returns_the_same_job() {
    let server = RedisServer::start();
    let b = backend(&server).await;
    let mut s = spec("default");
    s.idempotency_key = Some("verify:pr-7:abc".to_owned());
    let a = b.enqueue(&s).await.unwrap();
    let again = b.enqueue(&s).await.unwrap();
    assert!(a.created);
    assert!(!again.created);
    assert_eq!(a.job_id, again.job_id);
    assert_eq!(b.list(None, 10).await.unwrap().len(), 1);
    s.idempotency_key = Some("other".to_owned());
    assert_ne!(b.enqueue(&s).await.unwrap().job_id, a.job_id);
}

#[tokio::test]
async fn fencing_rejects_the_superseded_lease() {
    let server = RedisServer::start();
    let b = backend(&server).await;
    let mut s = spec("default");
    s.stale_after_ms = 150;
    let id = b.enqueue(&s).await.unwrap().job_id;
    let old = b
        .lease("default", &worker("old"), 1, Duration::ZERO)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(old.fencing_token, 1);

    let exp = expired(&b, &id).await;
    assert_eq!(
        (exp.fencing_token, exp.attempts, exp.max_attempts),
        (1, 1, 3)
    );
    assert!(exp.idempotent && !exp.cancel_requested);
    assert!(
        b.reap(
            &exp,
            &ReapAction::Requeue {
                delay: Duration::ZERO
            }
        )
        .await
        .unwrap()
    );

    let new = b
        .lease("default", &worker("new"), 1, Duration::ZERO)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(new.job.id, id);
    assert_eq!((new.fencing_token, new.job.attempts), (2, 2));

    let f = finish(JobState::Succeeded, 0, "passed");
    assert_eq!(
        b.finish(&id, 1, &f).await.unwrap(),
        FinishReply::Fenced { current_token: 2 }
    );
    assert_eq!(
        b.heartbeat(&id, 1).await.unwrap(),
        HeartbeatReply::LeaseLost
    );
    assert!(!b.release(&id, 1).await.unwrap());
    assert!(
        !b.reap(&exp, &ReapAction::Dead).await.unwrap(),
        "reap of the old token is fenced"
    );
    let job = b.get(&id).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Running);
    assert_eq!(
        job.lease.unwrap().owner_worker,
        new.job.lease.unwrap().owner_worker
    );
    assert_eq!(job.history[0].result.as_deref(), Some("stale"));

    assert_eq!(b.heartbeat(&id, 2).await.unwrap(), HeartbeatReply::Renewed);
    assert_eq!(
        b.finish(&id, 2, &f).await.unwrap(),
        FinishReply::Applied(JobState::Succeeded)
    );
    assert_eq!(
        b.finish(&id, 1, &f).await.unwrap(),
        FinishReply::Fenced { current_token: 2 }
    );
}

#[tokio::test]
async fn delayed_retry_is_not_leased_before_due() {
    let server = RedisServer::start();
    let b = backend(&server).await;
    let w = worker("w");
    let id = b.enqueue(&spec("default")).await.unwrap().job_id;
    let l = b
        .lease("default", &w, 1, Duration::ZERO)
        .await
        .unwrap()
        .remove(0);
    let delay_ms = 1_500;
    let reply = b
        .finish(
            &id,
            l.fencing_token,
            &finish(JobState::Queued, delay_ms, "failed"),
        )
        .await;
    assert_eq!(reply.unwrap(), FinishReply::Applied(JobState::Queued));
    let job = b.get(&id).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Queued);
    assert_eq!(job.history[0].retry_delay_ms, Some(delay_ms));
    assert_eq!(job.history[0].result.as_deref(), Some("failed"));
    let due_at = job.not_before_ms;
    assert!(due_at >= job.history[0].ended_at_ms.unwrap() + delay_ms as i64);

    assert!(
        b.lease("default", &w, 1, Duration::ZERO)
            .await
            .unwrap()
            .is_empty(),
        "not due yet"
    );
    let again = poll(
        "the retry to become due",
        Duration::from_secs(10),
        || async {
            b.lease("default", &w, 1, Duration::from_millis(200))
                .await
                .unwrap()
                .pop()
        },
    )
    .await;
    let leased_at = again.job.lease.as_ref().unwrap().acquired_at_ms;
    assert!(
        leased_at >= due_at,
        "leased at {leased_at}, due at {due_at}"
    );
    assert_eq!((again.job.attempts, again.fencing_token), (2, 2));
    assert_eq!(again.job.history.len(), 2);
}

#[tokio::test]
async fn delayed_enqueue_wakes_a_waiter_when_due() {
    let server = RedisServer::start();
    let b = backend(&server).await;
    let mut s = spec("default");
    let now = b.now_ms().await.unwrap();
    s.not_before_ms = Some(now + 700);
    let id = b.enqueue(&s).await.unwrap().job_id;
    assert!(
        b.lease("default", &worker("w"), 1, Duration::ZERO)
            .await
            .unwrap()
            .is_empty()
    );
    // One wait, long enough: the waiter must wake for the delayed job once it is due.
    let got = b
        .lease("default", &worker("w"), 1, Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].job.id, id);
    assert!(got[0].job.lease.as_ref().unwrap().acquired_at_ms >= now + 700);
}

#[tokio::test]
async fn reap_applies_each_action() {
    let server = RedisServer::start();
    let b = backend(&server).await;
    let mut s = spec("reap");
    s.stale_after_ms = 100;
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(b.enqueue(&s).await.unwrap().job_id);
    }
    let leased = b
        .lease("reap", &worker("w"), 5, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(leased.len(), 5);
    b.cancel(&ids[3]).await.unwrap();

    let mut exp = Vec::new();
    for id in &ids {
        exp.push(expired(&b, id).await);
    }
    assert!(exp[3].cancel_requested);

    // A heartbeat that arrives before the reap wins.
    assert_eq!(
        b.heartbeat(&ids[4], 1).await.unwrap(),
        HeartbeatReply::Renewed
    );
    assert!(!b.reap(&exp[4], &ReapAction::Dead).await.unwrap());
    assert_eq!(
        b.get(&ids[4]).await.unwrap().unwrap().state,
        JobState::Running
    );

    assert!(
        b.reap(
            &exp[0],
            &ReapAction::Requeue {
                delay: Duration::ZERO
            }
        )
        .await
        .unwrap()
    );
    assert!(
        b.reap(&exp[1], &ReapAction::RecoveryAvailable)
            .await
            .unwrap()
    );
    assert!(b.reap(&exp[2], &ReapAction::Dead).await.unwrap());
    assert!(b.reap(&exp[3], &ReapAction::Cancelled).await.unwrap());

    let j0 = b.get(&ids[0]).await.unwrap().unwrap();
    assert_eq!(
        (j0.state, j0.attempts),
        (JobState::Queued, 1),
        "the stale attempt stays counted"
    );
    assert!(j0.lease.is_none());
    assert_eq!(j0.history[0].result.as_deref(), Some("stale"));
    let j1 = b.get(&ids[1]).await.unwrap().unwrap();
    assert_eq!(j1.state, JobState::Stale);
    assert!(j1.recovery_available);
    assert_eq!(b.get(&ids[2]).await.unwrap().unwrap().state, JobState::Dead);
    assert_eq!(
        b.get(&ids[3]).await.unwrap().unwrap().state,
        JobState::Cancelled
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
        HashSet::from([ids[1].clone(), ids[2].clone(), ids[3].clone()])
    );
    let views = b.leases().await.unwrap();
    assert_eq!(
        views.iter().map(|v| v.name.clone()).collect::<Vec<_>>(),
        [ids[4].clone()]
    );

    let again = b
        .lease("reap", &worker("w2"), 5, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].job.id, ids[0]);
    assert_eq!((again[0].job.attempts, again[0].fencing_token), (2, 2));

    // Requeue with a delay: not leasable before it is due.
    let exp0 = expired(&b, &ids[0]).await;
    assert!(
        b.reap(
            &exp0,
            &ReapAction::Requeue {
                delay: Duration::from_secs(60)
            }
        )
        .await
        .unwrap()
    );
    let j0 = b.get(&ids[0]).await.unwrap().unwrap();
    assert_eq!(j0.history[1].retry_delay_ms, Some(60_000));
    assert!(
        b.lease("reap", &worker("w2"), 5, Duration::ZERO)
            .await
            .unwrap()
            .is_empty()
    );
}

/// Issue 35 item 6: see the scenario.
#[tokio::test]
async fn fail_queued_fails_only_queued_jobs_as_a_new_result() {
    let server = RedisServer::start();
    scenarios::placement::fail_queued_fails_only_queued_jobs_as_a_new_result(
        &backend(&server).await,
    )
    .await;
}

/// Issue 35 item 6: see the scenario.
#[tokio::test]
async fn the_deadline_fails_only_jobs_no_live_worker_can_take() {
    let server = RedisServer::start();
    scenarios::placement::the_deadline_fails_only_jobs_no_live_worker_can_take(
        &backend(&server).await,
    )
    .await;
}

/// Found by the lost-job test (issue 32 item 5): listing queued jobs of a namespace that has no
/// queue yet (new, or flushed) answers "none" instead of failing on an empty pipeline.
#[tokio::test]
async fn listing_queued_jobs_of_an_empty_namespace_answers_none() {
    let server = RedisServer::start();
    let b = backend(&server).await;
    assert!(b.list(Some(JobState::Queued), 10).await.unwrap().is_empty());
    b.enqueue(&spec("default")).await.unwrap();
    assert_eq!(b.list(Some(JobState::Queued), 10).await.unwrap().len(), 1);
    server.cli(&["FLUSHALL"]);
    assert!(
        b.list(Some(JobState::Queued), 10).await.unwrap().is_empty(),
        "flushed"
    );
}

/// Issue 32 item 7: see the scenario.
#[tokio::test]
async fn a_job_rewritten_on_the_queue_is_refused_at_ingestion() {
    let server = RedisServer::start();
    scenarios::trusted_spec::a_job_rewritten_on_the_queue_is_refused_at_ingestion(
        &backend(&server).await,
    )
    .await;
}

/// Issue 32 item 7, the attack itself: another job's worker, holding the queue's password,
/// rewrites a queued job's payload in its Redis key (the transcript path pointed at
/// `~/.ssh`). The job runs; ingestion refuses its result (nothing applied, the handler never
/// runs) and keeps it pending.
#[tokio::test]
async fn a_payload_rewritten_in_redis_is_refused_at_ingestion() {
    use scenarios::trusted_spec::{Seen, run_and_fail, submit};
    let server = RedisServer::start();
    let b = backend(&server).await;
    let home = tempfile::tempdir().unwrap();
    let store = skillforge_store::Store::open(home.path()).await.unwrap();
    let (id, spec) = submit(&b, &store, home.path(), "arm:1:with").await;
    let mut evil = spec.payload.clone();
    evil["transcript_path"] = "/root/.ssh/transcript.jsonl".into();
    let evil = serde_json::to_string(&evil).unwrap();
    let hkey = format!("sftest:job:{}", skillforge_engine::redis::id::stored(&id));
    assert_eq!(
        server.cli(&["HGET", &hkey, "p"]),
        "@",
        "a long payload is in its own key"
    );
    server.cli(&["SET", &format!("{hkey}:p"), &evil]);
    assert_eq!(
        b.get(&id).await.unwrap().unwrap().spec.payload["transcript_path"],
        "/root/.ssh/transcript.jsonl"
    );
    run_and_fail(&b, &id).await;
    let seen = Seen::default();
    assert_eq!(
        skillforge_engine::ingest::ingest_once(&b, &store, &seen)
            .await
            .unwrap()
            .applied,
        0
    );
    assert!(seen.0.lock().unwrap().is_empty(), "the handler never ran");
    assert!(
        b.pending_results(10)
            .await
            .unwrap()
            .iter()
            .any(|j| j.id == id),
        "its result stays pending"
    );
}

/// Issue 32 item 6: see the scenario.
#[tokio::test]
async fn rerun_result_requeues_only_a_pending_result_under_its_token() {
    let server = RedisServer::start();
    scenarios::rerun_result_requeues_only_a_pending_result_under_its_token(&backend(&server).await)
        .await;
}
