//! Cancel, retry and release of jobs, and named locks.

use super::*;

#[tokio::test]
async fn cancel_queued_and_running() {
    let server = RedisServer::start();
    let b = backend(&server).await;
    let w = worker("w");
    let queued = b.enqueue(&spec("c")).await.unwrap().job_id;
    assert_eq!(b.cancel(&queued).await.unwrap(), CancelReply::Cancelled);
    assert_eq!(
        b.get(&queued).await.unwrap().unwrap().state,
        JobState::Cancelled
    );
    assert!(
        b.lease("c", &w, 10, Duration::ZERO)
            .await
            .unwrap()
            .is_empty(),
        "cancelled job leased"
    );
    assert_eq!(
        b.cancel(&queued).await.unwrap(),
        CancelReply::AlreadyTerminal(JobState::Cancelled)
    );

    let mut delayed = spec("c");
    let delayed_due_ms = b.now_ms().await.unwrap() + 300;
    delayed.not_before_ms = Some(delayed_due_ms);
    let delayed = b.enqueue(&delayed).await.unwrap().job_id;
    assert_eq!(b.cancel(&delayed).await.unwrap(), CancelReply::Cancelled);

    let running = b.enqueue(&spec("c")).await.unwrap().job_id;
    let l = b.lease("c", &w, 10, Duration::ZERO).await.unwrap();
    assert_eq!(
        l.iter().map(|l| l.job.id.as_str()).collect::<Vec<_>>(),
        [running.as_str()]
    );
    assert_eq!(
        b.heartbeat(&running, 1).await.unwrap(),
        HeartbeatReply::Renewed
    );
    assert_eq!(b.cancel(&running).await.unwrap(), CancelReply::Requested);
    assert!(b.get(&running).await.unwrap().unwrap().cancel_requested);
    assert_eq!(
        b.heartbeat(&running, 1).await.unwrap(),
        HeartbeatReply::CancelRequested
    );
    let f = finish(JobState::Cancelled, 0, "cancelled");
    assert_eq!(
        b.finish(&running, 1, &f).await.unwrap(),
        FinishReply::Applied(JobState::Cancelled)
    );
    assert_eq!(
        b.cancel(&running).await.unwrap(),
        CancelReply::AlreadyTerminal(JobState::Cancelled)
    );

    // A cancel request wins over a retry or a hand-back (same rule as the SQLite backend).
    let raced = b.enqueue(&spec("c")).await.unwrap().job_id;
    b.lease("c", &w, 10, Duration::ZERO).await.unwrap();
    assert_eq!(b.cancel(&raced).await.unwrap(), CancelReply::Requested);
    assert_eq!(
        b.finish(&raced, 1, &finish(JobState::Queued, 10, "failed"))
            .await
            .unwrap(),
        FinishReply::Applied(JobState::Cancelled)
    );
    let handed = b.enqueue(&spec("c")).await.unwrap().job_id;
    b.lease("c", &w, 10, Duration::ZERO).await.unwrap();
    assert_eq!(b.cancel(&handed).await.unwrap(), CancelReply::Requested);
    assert!(b.release(&handed, 1).await.unwrap());
    assert_eq!(
        b.get(&handed).await.unwrap().unwrap().state,
        JobState::Cancelled
    );

    // The delayed one stays cancelled once its time has come (by the server's clock).
    poll(
        "the delayed job's not_before to pass",
        Duration::from_secs(10),
        || async { (b.now_ms().await.unwrap() > delayed_due_ms).then_some(()) },
    )
    .await;
    assert_eq!(
        b.get(&delayed).await.unwrap().unwrap().state,
        JobState::Cancelled
    );
    assert!(
        b.lease("c", &w, 10, Duration::ZERO)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(matches!(
        b.cancel("nope").await,
        Err(EngineError::NotFound(_))
    ));
}

#[tokio::test]
async fn retry_of_a_dead_job_resets_attempts_and_keeps_history() {
    let server = RedisServer::start();
    let b = backend(&server).await;
    let w = worker("w");
    let mut s = spec("r");
    s.max_attempts = 1;
    let id = b.enqueue(&s).await.unwrap().job_id;
    let l = b.lease("r", &w, 1, Duration::ZERO).await.unwrap().remove(0);
    b.finish(&id, l.fencing_token, &finish(JobState::Dead, 0, "failed"))
        .await
        .unwrap();
    assert_eq!(b.pending_results(10).await.unwrap().len(), 1);

    b.retry(&id).await.unwrap();
    let job = b.get(&id).await.unwrap().unwrap();
    assert_eq!(
        (job.state, job.attempts, job.history.len()),
        (JobState::Queued, 0, 1)
    );
    assert!(b.pending_results(10).await.unwrap().is_empty());
    match b.retry(&id).await {
        Err(EngineError::InvalidState {
            state: JobState::Queued,
            ..
        }) => {}
        other => panic!("retry of a queued job: {other:?}"),
    }
    assert!(matches!(
        b.retry("nope").await,
        Err(EngineError::NotFound(_))
    ));

    let l = b.lease("r", &w, 1, Duration::ZERO).await.unwrap().remove(0);
    assert_eq!(
        (l.job.attempts, l.fencing_token, l.job.history.len()),
        (1, 2, 2)
    );
    match b.retry(&id).await {
        Err(EngineError::InvalidState {
            state: JobState::Running,
            ..
        }) => {}
        other => panic!("retry of a running job: {other:?}"),
    }
}

#[tokio::test]
async fn release_refunds_the_attempt_and_is_due_now() {
    let server = RedisServer::start();
    let b = backend(&server).await;
    let w = worker("w");
    let first = b.enqueue(&spec("rel")).await.unwrap().job_id;
    let second = b.enqueue(&spec("rel")).await.unwrap().job_id;
    let l = b
        .lease("rel", &w, 1, Duration::ZERO)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(l.job.id, first);
    assert!(b.release(&first, 1).await.unwrap());
    let job = b.get(&first).await.unwrap().unwrap();
    assert_eq!((job.state, job.attempts), (JobState::Queued, 0));
    assert_eq!(job.history[0].result.as_deref(), Some("released"));
    assert!(b.leases().await.unwrap().is_empty());
    let again = b
        .lease("rel", &w, 1, Duration::ZERO)
        .await
        .unwrap()
        .remove(0);
    assert_eq!(again.job.id, first, "a released job keeps its place");
    assert_eq!((again.job.attempts, again.fencing_token), (1, 2));
    assert!(!b.release(&first, 1).await.unwrap());
    let _ = second;
}

#[tokio::test]
async fn named_locks() {
    let server = RedisServer::start();
    let b = backend(&server).await;
    let (a, other) = (worker("a"), worker("b"));
    let name = "skillopt-train:s1:optimizer";
    let hb = Duration::from_millis(50);
    let stale = Duration::from_millis(200);

    let t1 = match b.acquire_lock(name, &a, hb, stale).await.unwrap() {
        LockAcquire::Acquired { fencing_token } => fencing_token,
        held => panic!("free lock not acquired: {held:?}"),
    };
    match b.acquire_lock(name, &other, hb, stale).await.unwrap() {
        LockAcquire::Held(lease) => {
            assert_eq!(lease.owner_worker, a.worker_id);
            assert_eq!(lease.fencing_token, t1);
        }
        got => panic!("held lock taken: {got:?}"),
    }
    assert!(b.renew_lock(name, t1).await.unwrap());
    let views = b.leases().await.unwrap();
    assert_eq!(views.len(), 1);
    assert_eq!(
        (views[0].kind, views[0].name.as_str()),
        (LeaseKind::Lock, name)
    );
    assert_eq!((views[0].heartbeat_ms, views[0].stale_after_ms), (50, 200));

    // Stale holder: replaced with a higher token.
    let t2 = poll("the lock to go stale", Duration::from_secs(10), || async {
        match b.acquire_lock(name, &other, hb, stale).await.unwrap() {
            LockAcquire::Acquired { fencing_token } => Some(fencing_token),
            LockAcquire::Held(_) => None,
        }
    })
    .await;
    assert!(t2 > t1);
    assert!(!b.renew_lock(name, t1).await.unwrap());
    assert!(!b.release_lock(name, t1).await.unwrap());
    assert!(b.release_lock(name, t2).await.unwrap());
    assert!(!b.release_lock(name, t2).await.unwrap());
    assert!(b.leases().await.unwrap().is_empty());

    // Tokens keep increasing after a release.
    let t3 = match b.acquire_lock(name, &a, hb, stale).await.unwrap() {
        LockAcquire::Acquired { fencing_token } => fencing_token,
        held => panic!("released lock not acquired: {held:?}"),
    };
    assert!(t3 > t2);
    let held_other = b
        .acquire_lock("another", &a, hb, Duration::from_secs(60))
        .await
        .unwrap();
    assert!(matches!(held_other, LockAcquire::Acquired { fencing_token } if fencing_token > t3));

    let freed = poll(
        "reap_locks to free the stale lock",
        Duration::from_secs(10),
        || async {
            let freed = b.reap_locks().await.unwrap();
            (!freed.is_empty()).then_some(freed)
        },
    )
    .await;
    assert_eq!(freed, [name.to_owned()]);
    assert!(!b.renew_lock(name, t3).await.unwrap());
    let names: Vec<String> = b
        .leases()
        .await
        .unwrap()
        .into_iter()
        .map(|v| v.name)
        .collect();
    assert_eq!(names, ["another".to_owned()]);
}

/// A released or reaped lock leaves no hash behind (each worker holds its own presence lock
/// `worker:<id>`, a new name per process: kept, those hashes grew with every worker start),
/// and its tokens still strictly increase, also past a token an older build kept in the hash.
#[tokio::test]
async fn released_and_reaped_locks_leave_no_hash_and_tokens_keep_increasing() {
    use skillforge_engine::worker::{PRESENCE_LOCK_PREFIX, hold_presence};
    let server = RedisServer::start();
    let b = backend(&server).await;
    let a = worker("a");
    let acquire = |name: &'static str, stale: Duration| {
        let (b, a) = (&b, &a);
        async move {
            match b
                .acquire_lock(name, a, Duration::from_millis(20), stale)
                .await
                .unwrap()
            {
                LockAcquire::Acquired { fencing_token } => fencing_token,
                held => panic!("free lock `{name}` not acquired: {held:?}"),
            }
        }
    };
    let t1 = acquire("l", Duration::from_secs(60)).await;
    assert!(b.release_lock("l", t1).await.unwrap());
    assert_eq!(
        server.cli(&["EXISTS", "sftest:lock:l"]),
        "0",
        "released: no hash"
    );
    let t2 = acquire("l", Duration::from_secs(60)).await;
    assert!(t2 > t1);
    assert!(
        !b.release_lock("l", t1).await.unwrap(),
        "an old token is fenced"
    );

    // Reaped: the hash goes too.
    let t3 = acquire("gone", Duration::from_millis(50)).await;
    let freed = poll(
        "reap_locks to free the stale lock",
        Duration::from_secs(10),
        || async {
            let freed = b.reap_locks().await.unwrap();
            (!freed.is_empty()).then_some(freed)
        },
    )
    .await;
    assert_eq!(freed, ["gone".to_owned()]);
    assert_eq!(
        server.cli(&["EXISTS", "sftest:lock:gone"]),
        "0",
        "reaped: no hash"
    );
    assert!(acquire("gone", Duration::from_secs(60)).await > t3);

    // A lock an older build released kept its hash with its own counter: the next token is above it.
    server.cli(&["HSET", "sftest:lock:old", "held", "0", "token", "500"]);
    assert_eq!(acquire("old", Duration::from_secs(60)).await, 501);

    // A worker's presence lock: held while it runs, gone once it stops.
    let shared: std::sync::Arc<dyn QueueBackend> = std::sync::Arc::new(backend(&server).await);
    let me = worker("present");
    let key = format!("sftest:lock:{PRESENCE_LOCK_PREFIX}{}", me.worker_id);
    let stop = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(hold_presence(shared, me, stop.clone()));
    poll("the presence lock", Duration::from_secs(10), || async {
        (server.cli(&["HGET", &key, "held"]) == "1").then_some(())
    })
    .await;
    stop.cancel();
    task.await.unwrap();
    assert_eq!(
        server.cli(&["EXISTS", &key]),
        "0",
        "a stopped worker leaves no presence hash"
    );
}
