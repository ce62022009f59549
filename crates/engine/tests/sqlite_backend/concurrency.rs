//! Named locks, two instances on one file, idle-lease wake-ups, the 100 000-job drain, group-committed finish-and-lease and the ingestion/ack race.

use super::*;

#[tokio::test]
async fn named_locks() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(&dir).await;
    let a = WorkerIdentity::new("a");
    let b = WorkerIdentity::new("b");
    let hb = Duration::from_millis(10);
    let stale = Duration::from_millis(60);
    let name = "skillopt-train:s1:optimizer";
    assert_eq!(
        q.acquire_lock(name, &a, hb, stale).await.unwrap(),
        LockAcquire::Acquired { fencing_token: 1 }
    );
    match q.acquire_lock(name, &b, hb, stale).await.unwrap() {
        LockAcquire::Held(lease) => {
            assert_eq!(
                (lease.owner_worker.as_str(), lease.fencing_token),
                (a.worker_id.as_str(), 1)
            )
        }
        other => panic!("expected held, got {other:?}"),
    }
    assert!(q.renew_lock(name, 1).await.unwrap());
    let views = q.leases().await.unwrap();
    assert!(
        views
            .iter()
            .any(|v| v.kind == LeaseKind::Lock && v.name == name && v.stale_after_ms == 60)
    );

    // a stops renewing: b takes over with a higher token.
    let taken = eventually(Duration::from_secs(5), "lock to go stale", || async {
        match q.acquire_lock(name, &b, hb, stale).await.unwrap() {
            LockAcquire::Acquired { fencing_token } => Some(fencing_token),
            LockAcquire::Held(_) => None,
        }
    })
    .await;
    assert_eq!(taken, 2);
    assert!(
        !q.renew_lock(name, 1).await.unwrap(),
        "old holder is fenced"
    );
    assert!(!q.release_lock(name, 1).await.unwrap());
    assert!(q.release_lock(name, 2).await.unwrap());
    assert!(!q.release_lock(name, 2).await.unwrap());
    assert!(!q.leases().await.unwrap().iter().any(|v| v.name == name));
    // Tokens keep increasing after a release.
    assert_eq!(
        q.acquire_lock(name, &a, hb, stale).await.unwrap(),
        LockAcquire::Acquired { fencing_token: 3 }
    );

    // reap_locks frees only stale locks. Tokens come from one counter for every name (schema v7).
    assert_eq!(
        q.acquire_lock("other", &a, hb, Duration::from_secs(60))
            .await
            .unwrap(),
        LockAcquire::Acquired { fencing_token: 4 }
    );
    let reaped = eventually(
        Duration::from_secs(5),
        "stale lock to be reaped",
        || async {
            let r = q.reap_locks().await.unwrap();
            (!r.is_empty()).then_some(r)
        },
    )
    .await;
    assert_eq!(reaped, vec![name.to_owned()]);
    assert!(!q.renew_lock(name, 3).await.unwrap());
    assert!(q.renew_lock("other", 4).await.unwrap());
    assert_eq!(
        q.acquire_lock(name, &b, hb, stale).await.unwrap(),
        LockAcquire::Acquired { fencing_token: 5 }
    );
}

/// Issue 19 item 4: `locks` holds only held locks. A released or reaped lock's row is deleted,
/// and a name's fencing tokens still strictly increase across release, re-acquire, reap and a
/// reopen of the file (they come from one counter, `lock_tokens`).
#[tokio::test]
async fn released_and_reaped_lock_rows_are_deleted_and_tokens_keep_increasing_across_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("queue.db");
    let rows = || async {
        let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display()))
            .await
            .unwrap();
        let names: Vec<String> = sqlx::query_scalar("SELECT name FROM locks ORDER BY name")
            .fetch_all(&pool)
            .await
            .unwrap();
        pool.close().await;
        names
    };
    let w = WorkerIdentity::new("w");
    let hb = Duration::from_millis(10);
    let (long, short) = (Duration::from_secs(60), Duration::from_millis(30));
    let token = |a: LockAcquire| match a {
        LockAcquire::Acquired { fencing_token } => fencing_token,
        held => panic!("expected to acquire, got {held:?}"),
    };
    let mut seen = Vec::new();
    {
        let q = SqliteBackend::open(&path).await.unwrap();
        for _ in 0..3 {
            let t = token(q.acquire_lock("l", &w, hb, long).await.unwrap());
            assert!(q.release_lock("l", t).await.unwrap());
            seen.push(t);
        }
        assert!(rows().await.is_empty(), "released rows are gone");
        token(q.acquire_lock("kept", &w, hb, long).await.unwrap());
        seen.push(token(q.acquire_lock("l", &w, hb, short).await.unwrap()));
        let reaped = eventually(
            Duration::from_secs(5),
            "the stale lock to be reaped",
            || async {
                let r = q.reap_locks().await.unwrap();
                (!r.is_empty()).then_some(r)
            },
        )
        .await;
        assert_eq!(reaped, vec!["l".to_owned()]);
        assert_eq!(
            rows().await,
            vec!["kept".to_owned()],
            "the reaped row is gone, the held one stays"
        );
    }
    let q = SqliteBackend::open(&path).await.unwrap();
    seen.push(token(q.acquire_lock("l", &w, hb, long).await.unwrap()));
    assert!(
        seen.windows(2).all(|p| p[0] < p[1]),
        "tokens of `l` strictly increase: {seen:?}"
    );
    assert_eq!(
        q.leases()
            .await
            .unwrap()
            .iter()
            .filter(|v| v.kind == LeaseKind::Lock)
            .count(),
        2
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_never_lease_a_job_twice() {
    const JOBS: usize = 2_000;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("queue.db");
    let a = SqliteBackend::open(&path).await.unwrap();
    let b = SqliteBackend::open(&path).await.unwrap();
    let specs: Vec<JobSpec> = (0..JOBS).map(|_| spec("race")).collect();
    a.enqueue_batch(&specs).await.unwrap();

    let finished = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for (i, q) in [
        a.clone(),
        b.clone(),
        a.clone(),
        b.clone(),
        a.clone(),
        b.clone(),
    ]
    .into_iter()
    .enumerate()
    {
        let finished = finished.clone();
        tasks.push(tokio::spawn(async move {
            let w = WorkerIdentity::new(&format!("w{i}"));
            let mut mine = Vec::new();
            while finished.load(Ordering::SeqCst) < JOBS {
                let leased = q
                    .lease("race", &w, 7, Duration::from_millis(50))
                    .await
                    .unwrap();
                for l in leased {
                    let reply = q
                        .finish(&l.job.id, l.fencing_token, &finish(JobState::Succeeded, 0))
                        .await
                        .unwrap();
                    assert_eq!(reply, FinishReply::Applied(JobState::Succeeded));
                    mine.push((l.job.id, l.fencing_token));
                    finished.fetch_add(1, Ordering::SeqCst);
                }
            }
            mine
        }));
    }
    let mut seen = HashSet::new();
    let mut per_task = Vec::new();
    for t in tasks {
        let mine = t.await.unwrap();
        per_task.push(mine.len());
        for (id, token) in mine {
            assert_eq!(token, 1, "job {id} leased more than once");
            assert!(seen.insert(id.clone()), "job {id} leased twice");
        }
    }
    assert_eq!(seen.len(), JOBS, "per task: {per_task:?}");
    assert!(a.list(Some(JobState::Queued), 1).await.unwrap().is_empty());
    assert!(b.list(Some(JobState::Running), 1).await.unwrap().is_empty());
    let (on_a, on_b): (usize, usize) = (
        per_task.iter().step_by(2).sum(),
        per_task.iter().skip(1).step_by(2).sum(),
    );
    assert!(on_a > 0 && on_b > 0, "both instances leased: {per_task:?}");
}

/// How long an idle `lease` call may wait in the wake-up tests: far past their deadline, so a
/// waiter that returns in time was woken by the enqueue, not by its own timeout.
const IDLE_WAIT: Duration = Duration::from_secs(600);
/// Deadline for a woken waiter to hand over the job (a condition deadline, not a latency bound;
/// latency is measured in `bench/`).
const WAKE_DEADLINE: Duration = Duration::from_secs(60);

/// Spawns `lease(queue, 1 slot, IDLE_WAIT)` on `q`; returns once the task is about to call it.
async fn idle_waiter(
    q: &SqliteBackend,
    queue: &'static str,
) -> tokio::task::JoinHandle<Vec<skillforge_engine::LeasedJob>> {
    let (started, ready) = tokio::sync::oneshot::channel();
    let q = q.clone();
    let waiter = tokio::spawn(async move {
        let w = WorkerIdentity::new("idle");
        let _ = started.send(());
        q.lease(queue, &w, 1, IDLE_WAIT).await.unwrap()
    });
    ready.await.unwrap();
    waiter
}

/// The waiter gets the enqueued job before [`WAKE_DEADLINE`] (it would otherwise sit out [`IDLE_WAIT`]).
async fn woken(
    waiter: tokio::task::JoinHandle<Vec<skillforge_engine::LeasedJob>>,
    what: &str,
) -> Vec<skillforge_engine::LeasedJob> {
    tokio::time::timeout(WAKE_DEADLINE, waiter)
        .await
        .unwrap_or_else(|_| panic!("{what}: the idle lease was not woken by the enqueue"))
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_lease_wakes_on_another_instances_enqueue() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("queue.db");
    let a = SqliteBackend::open(&path).await.unwrap();
    let b = SqliteBackend::open(&path).await.unwrap();
    for round in 0..3 {
        // The waiter's lease has begun (whether the enqueue lands before its first look or while
        // it waits, a correct backend hands the job over at once).
        let waiter = idle_waiter(&a, "wake").await;
        let id = b.enqueue(&spec("wake")).await.unwrap().job_id;
        let jobs = woken(waiter, &format!("round {round}")).await;
        assert_eq!(jobs.len(), 1, "round {round}");
        assert_eq!(jobs[0].job.id, id);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_lease_wakes_on_own_enqueue() {
    let dir = tempfile::tempdir().unwrap();
    let a = open(&dir).await;
    let waiter = idle_waiter(&a, "own").await;
    let id = a.enqueue(&spec("own")).await.unwrap().job_id;
    let jobs = woken(waiter, "own enqueue").await;
    assert_eq!(
        jobs.iter().map(|l| l.job.id.as_str()).collect::<Vec<_>>(),
        [id.as_str()]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundred_thousand_jobs_enqueue_and_drain() {
    const JOBS: usize = 100_000;
    const CONCURRENCY: usize = 50;
    let dir = tempfile::tempdir().unwrap();
    let q = open(&dir).await;
    let started = Instant::now();
    for _ in 0..JOBS / 1_000 {
        let specs: Vec<JobSpec> = (0..1_000).map(|_| spec("bulk")).collect();
        q.enqueue_batch(&specs).await.unwrap();
    }
    let enqueue_time = started.elapsed();

    let started = Instant::now();
    let done = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..CONCURRENCY {
        let q = q.clone();
        let done = done.clone();
        tasks.push(tokio::spawn(async move {
            let w = WorkerIdentity::new(&format!("bulk{i}"));
            loop {
                let leased = q.lease("bulk", &w, 4, Duration::ZERO).await.unwrap();
                if leased.is_empty() {
                    break;
                }
                for l in leased {
                    let reply = q
                        .finish(&l.job.id, l.fencing_token, &finish(JobState::Succeeded, 0))
                        .await
                        .unwrap();
                    assert_eq!(reply, FinishReply::Applied(JobState::Succeeded));
                    done.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let drain_time = started.elapsed();
    assert_eq!(done.load(Ordering::SeqCst), JOBS);
    assert!(q.list(Some(JobState::Queued), 1).await.unwrap().is_empty());
    assert!(q.list(Some(JobState::Running), 1).await.unwrap().is_empty());
    assert_eq!(q.pending_results(JOBS + 1).await.unwrap().len(), JOBS);
    eprintln!(
        "enqueued {JOBS} in {enqueue_time:?} ({:.0}/s); leased+finished in {drain_time:?} ({:.0}/s)",
        JOBS as f64 / enqueue_time.as_secs_f64(),
        JOBS as f64 / drain_time.as_secs_f64()
    );
}

#[tokio::test]
async fn finish_and_lease_refills_the_slot_in_one_call() {
    let dir = tempfile::tempdir().unwrap();
    scenarios::finish_and_lease_refills_the_slot_in_one_call(&open(&dir).await).await;
}

#[tokio::test]
async fn batched_finishes_refill_each_slot_from_its_queue_for_its_worker() {
    let dir = tempfile::tempdir().unwrap();
    scenarios::batched_finishes_refill_each_slot_from_its_queue_for_its_worker(&open(&dir).await)
        .await;
}

#[tokio::test]
async fn retry_finishing_between_ingestion_read_and_ack_is_not_lost() {
    let dir = tempfile::tempdir().unwrap();
    scenarios::retry_finishing_between_ingestion_read_and_ack_is_not_lost(&open(&dir).await).await;
}

#[tokio::test]
async fn a_retried_then_cancelled_job_gets_a_new_token_and_its_cancel_is_applied() {
    let dir = tempfile::tempdir().unwrap();
    scenarios::a_retried_then_cancelled_job_gets_a_new_token_and_its_cancel_is_applied(
        &open(&dir).await,
    )
    .await;
}

/// Found by the fault soak (issue 21): see the scenario.
#[tokio::test]
async fn ingestion_waits_for_another_writer_of_the_store() {
    let dir = tempfile::tempdir().unwrap();
    scenarios::ingestion_waits_for_another_writer_of_the_store(&open(&dir).await).await;
}

/// Found by the fault soak (issue 21): see the scenario.
#[tokio::test]
async fn a_cancelled_job_keeps_each_attempt_once_under_its_own_token() {
    let dir = tempfile::tempdir().unwrap();
    scenarios::a_cancelled_job_keeps_each_attempt_once_under_its_own_token(&open(&dir).await).await;
}

#[tokio::test]
async fn results_that_cannot_be_applied_yet_are_skipped_past_with_backoff() {
    let dir = tempfile::tempdir().unwrap();
    scenarios::results_that_cannot_be_applied_yet_are_skipped_past_with_backoff(&open(&dir).await)
        .await;
}
