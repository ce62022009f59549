//! Wake-ups across connections, a 20 000-job backlog, a Redis restart, connection errors, and group-committed finish-and-lease.

use super::*;

#[tokio::test]
async fn idle_lease_wakes_on_enqueue_from_another_connection() {
    let server = RedisServer::start();
    let b = Arc::new(backend(&server).await);
    let producer = backend(&server).await;
    let wait = Duration::from_secs(5);

    let waiter = {
        let b = Arc::clone(&b);
        tokio::spawn(async move {
            let r = b.lease("wake", &worker("idle"), 1, wait).await;
            (r, Instant::now())
        })
    };
    // Enqueue only once the waiter is really blocked on Redis.
    poll("the waiter to block", Duration::from_secs(10), || async {
        let info = server.cli(&["info", "clients"]);
        info.lines()
            .any(|l| l.starts_with("blocked_clients:") && l.trim_end() != "blocked_clients:0")
            .then_some(())
    })
    .await;
    // The blocked waiter does not stall other calls on the same backend.
    let now = tokio::time::timeout(Duration::from_secs(3), b.now_ms()).await;
    assert!(
        now.expect("a call on the same backend stalled behind BLPOP")
            .is_ok()
    );

    let enqueued_at = Instant::now();
    let id = producer.enqueue(&spec("wake")).await.unwrap().job_id;
    let (leased, returned_at) = waiter.await.unwrap();
    let leased = leased.unwrap();
    assert_eq!(leased.len(), 1, "the waiter came back without the job");
    assert_eq!(leased[0].job.id, id);
    // Returned before its wait ran out (without a wake-up it would only retry at the end).
    assert!(
        returned_at.duration_since(enqueued_at) < wait - Duration::from_secs(1),
        "woke only after {:?}",
        returned_at.duration_since(enqueued_at)
    );
}

#[tokio::test]
async fn backlog_of_20000_drains() {
    let server = RedisServer::start();
    let b = Arc::new(backend(&server).await);
    const N: usize = 20_000;
    // Half due now (ready set), half scheduled (delayed set, the path that broke apalis-redis).
    let due_at = b.now_ms().await.unwrap() + 500;
    let mut tasks = Vec::new();
    for chunk in 0..20 {
        let b = Arc::clone(&b);
        tasks.push(tokio::spawn(async move {
            for i in 0..N / 20 {
                let mut s = spec("bulk");
                if (chunk * (N / 20) + i) % 2 == 1 {
                    s.not_before_ms = Some(due_at);
                }
                b.enqueue(&s).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    // Wait until the scheduled half is due, so one lease sees all 10 000 of them due at once.
    poll(
        "the scheduled jobs to be due",
        Duration::from_secs(10),
        || async { (b.now_ms().await.unwrap() > due_at).then_some(()) },
    )
    .await;

    let w = worker("bulk");
    let mut seen = HashSet::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let batch = b.lease("bulk", &w, 500, Duration::ZERO).await.unwrap();
        if batch.is_empty() {
            break;
        }
        for l in batch {
            assert!(seen.insert(l.job.id), "job leased twice");
        }
        assert!(
            Instant::now() < deadline,
            "draining took too long: {} leased",
            seen.len()
        );
    }
    assert_eq!(seen.len(), N);
    assert_eq!(
        b.list(Some(JobState::Running), N + 1).await.unwrap().len(),
        N
    );
}

#[tokio::test]
async fn redis_restart_loses_nothing() {
    let server = RedisServer::start_with(true);
    let b = backend(&server).await;
    let mut ids = HashSet::new();
    for _ in 0..50 {
        ids.insert(b.enqueue(&spec("durable")).await.unwrap().job_id);
    }
    let mut s = spec("durable");
    s.idempotency_key = Some("once".to_owned());
    let keyed = b.enqueue(&s).await.unwrap().job_id;
    ids.insert(keyed.clone());

    server.crash();
    server.launch();

    // The same backend object reconnects by itself.
    let mut leased = HashSet::new();
    for _ in 0..100 {
        let batch = b
            .lease("durable", &worker("w"), 10, Duration::ZERO)
            .await
            .unwrap();
        if batch.is_empty() {
            break;
        }
        for l in batch {
            assert_eq!(l.job.attempts, 1);
            leased.insert(l.job.id);
        }
    }
    assert_eq!(leased, ids);
    let again = b.enqueue(&s).await.unwrap();
    assert_eq!(
        (again.job_id.as_str(), again.created),
        (keyed.as_str(), false)
    );
    let fresh = b.enqueue(&spec("durable")).await.unwrap().job_id;
    let l = b
        .lease("durable", &worker("w"), 10, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(
        l.iter().map(|l| l.job.id.clone()).collect::<Vec<_>>(),
        [fresh]
    );

    // A crash while a waiter blocks: it survives and still gets the next job.
    let b = Arc::new(b);
    let waiter = {
        let b = Arc::clone(&b);
        tokio::spawn(async move {
            b.lease("durable", &worker("w"), 1, Duration::from_secs(20))
                .await
        })
    };
    // Crash only once the waiter is blocked on the server (a client in BLPOP).
    poll(
        "the waiter to block in BLPOP",
        Duration::from_secs(10),
        || async {
            server
                .cli(&["client", "list"])
                .contains("cmd=blpop")
                .then_some(())
        },
    )
    .await;
    server.crash();
    server.launch();
    let late = b.enqueue(&spec("durable")).await.unwrap().job_id;
    let got = waiter.await.unwrap().unwrap();
    assert_eq!(
        got.iter().map(|l| l.job.id.clone()).collect::<Vec<_>>(),
        [late]
    );
}

#[tokio::test]
async fn connect_errors_name_the_problem() {
    let err = RedisBackend::connect("not a url", "ns").await.unwrap_err();
    assert!(matches!(err, EngineError::Config(_)), "{err}");
    let server = RedisServer::start();
    let err = RedisBackend::connect(&server.url(), "").await.unwrap_err();
    assert!(err.to_string().contains("namespace"), "{err}");
    // Two namespaces on one server do not see each other's jobs.
    let a = RedisBackend::connect(&server.url(), "a").await.unwrap();
    let other = RedisBackend::connect(&server.url(), "b").await.unwrap();
    a.enqueue(&spec("default")).await.unwrap();
    assert!(
        other
            .lease("default", &worker("w"), 1, Duration::ZERO)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        a.lease("default", &worker("w"), 1, Duration::ZERO)
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn finish_and_lease_refills_the_slot_in_one_call() {
    let server = RedisServer::start();
    scenarios::finish_and_lease_refills_the_slot_in_one_call(&backend(&server).await).await;
}

#[tokio::test]
async fn batched_finishes_refill_each_slot_from_its_queue_for_its_worker() {
    let server = RedisServer::start();
    scenarios::batched_finishes_refill_each_slot_from_its_queue_for_its_worker(
        &backend(&server).await,
    )
    .await;
}
