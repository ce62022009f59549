//! Single-instance transitions: round trip, pending results, idempotency keys, fencing, delayed retries, reap actions, cancel, release, retry.

use super::*;

#[tokio::test]
async fn open_creates_parent_dir_and_sets_pragmas() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested/deeper/queue.db");
    let q = SqliteBackend::open(&path).await.unwrap();
    assert!(path.exists());
    assert_eq!(q.name(), "sqlite");
    // Reopening an up-to-date file is a no-op migration.
    let _again = SqliteBackend::open(&path).await.unwrap();
    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(mode, "wal");
    let version: i64 = sqlx::query_scalar("PRAGMA user_version")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(version, SqliteBackend::schema_version());
    // Leasing uses the partial due index, not a scan and sort.
    let plan: Vec<String> = sqlx::query_scalar(
        "SELECT detail FROM (EXPLAIN QUERY PLAN SELECT seq FROM jobs WHERE queue = 'q' \
         AND state = 'queued' AND not_before_ms <= 5 ORDER BY not_before_ms, seq LIMIT 8)",
    )
    .fetch_all(&pool)
    .await
    .unwrap_or_default();
    if !plan.is_empty() {
        let joined = plan.join(" | ");
        assert!(
            joined.contains("jobs_due") && !joined.contains("TEMP B-TREE"),
            "{joined}"
        );
    }
}

#[tokio::test]
async fn round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(&dir).await;
    let w = WorkerIdentity::new("w");
    let a = q.enqueue(&spec("rt")).await.unwrap();
    let b = q.enqueue(&spec("rt")).await.unwrap();
    assert!(a.created && b.created && a.job_id != b.job_id);
    let job = q.get(&a.job_id).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Queued);
    assert_eq!((job.attempts, job.fencing_token), (0, 0));
    assert!(q.get("nope").await.unwrap().is_none());
    // Other queues see nothing.
    assert!(
        q.lease("other", &w, 8, Duration::ZERO)
            .await
            .unwrap()
            .is_empty()
    );

    let leased = q.lease("rt", &w, 1, Duration::ZERO).await.unwrap();
    assert_eq!(leased.len(), 1);
    let l = &leased[0];
    assert_eq!(l.job.id, a.job_id, "oldest first");
    assert_eq!(l.job.state, JobState::Running);
    assert_eq!(
        (l.job.attempts, l.fencing_token, l.job.fencing_token),
        (1, 1, 1)
    );
    let lease = l.job.lease.as_ref().unwrap();
    assert_eq!(
        (lease.owner_worker.as_str(), lease.owner_pid),
        (w.worker_id.as_str(), w.pid)
    );
    assert_eq!(l.job.history.len(), 1);
    assert_eq!(l.job.history[0].worker, w.worker_id);

    let views = q.leases().await.unwrap();
    assert_eq!(views.len(), 1);
    assert_eq!(
        (views[0].kind, views[0].name.as_str()),
        (LeaseKind::Job, a.job_id.as_str())
    );

    assert_eq!(
        q.heartbeat(&a.job_id, 1).await.unwrap(),
        HeartbeatReply::Renewed
    );
    assert_eq!(
        q.finish(&a.job_id, 1, &finish(JobState::Succeeded, 0))
            .await
            .unwrap(),
        FinishReply::Applied(JobState::Succeeded)
    );
    let done = q.get(&a.job_id).await.unwrap().unwrap();
    assert_eq!(done.state, JobState::Succeeded);
    assert!(done.lease.is_none());
    assert_eq!(done.outcome.as_ref().unwrap().exit, ExitClass::Passed);
    assert_eq!(done.history.len(), 1);
    assert_eq!(done.history[0].result.as_deref(), Some("passed"));
    assert!(done.history[0].ended_at_ms.is_some());
    assert!(q.leases().await.unwrap().is_empty());

    // A second finish with the same token is fenced (no longer running).
    assert_eq!(
        q.finish(&a.job_id, 1, &finish(JobState::Failed, 0))
            .await
            .unwrap(),
        FinishReply::Fenced { current_token: 1 }
    );
    assert!(matches!(
        q.finish("nope", 1, &finish(JobState::Failed, 0)).await,
        Err(EngineError::NotFound(_))
    ));

    let listed: Vec<String> = q
        .list(None, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(
        listed,
        vec![b.job_id.clone(), a.job_id.clone()],
        "newest first"
    );
    let queued = q.list(Some(JobState::Queued), 10).await.unwrap();
    assert_eq!(queued.len(), 1);
    assert_eq!(queued[0].id, b.job_id);

    let pending = q.pending_results(10).await.unwrap();
    assert_eq!(
        pending.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(),
        vec![a.job_id.as_str()]
    );
    assert!(
        !q.ack_result(&a.job_id, pending[0].fencing_token + 1)
            .await
            .unwrap(),
        "fenced on the token"
    );
    assert_eq!(q.pending_results(10).await.unwrap().len(), 1);
    assert!(
        q.ack_result(&a.job_id, pending[0].fencing_token)
            .await
            .unwrap()
    );
    assert!(q.pending_results(10).await.unwrap().is_empty());
    assert!(matches!(
        q.ack_result("nope", 1).await,
        Err(EngineError::NotFound(_))
    ));
}

#[tokio::test]
async fn pending_results_oldest_first() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(&dir).await;
    let w = WorkerIdentity::new("w");
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(q.enqueue(&spec("p")).await.unwrap().job_id);
    }
    // Finish in reverse order, each at a later ms than the previous one.
    let leased = q.lease("p", &w, 3, Duration::ZERO).await.unwrap();
    assert_eq!(leased.len(), 3);
    for id in ids.iter().rev() {
        q.finish(id, 1, &finish(JobState::Succeeded, 0))
            .await
            .unwrap();
        let stamped = q.get(id).await.unwrap().unwrap().updated_at_ms;
        eventually(Duration::from_secs(1), "clock tick", || async {
            (skillforge_engine::now_ms() > stamped).then_some(())
        })
        .await;
    }
    let pending: Vec<String> = q
        .pending_results(10)
        .await
        .unwrap()
        .into_iter()
        .map(|j| j.id)
        .collect();
    let want: Vec<String> = ids.iter().rev().cloned().collect();
    assert_eq!(pending, want);
}

#[tokio::test]
async fn idempotency_key_returns_the_first_job() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(&dir).await;
    let mut s = spec("idem");
    s.idempotency_key = Some("pr-42-head-abc".into());
    let first = q.enqueue(&s).await.unwrap();
    let second = q.enqueue(&s).await.unwrap();
    assert!(first.created);
    assert!(!second.created);
    assert_eq!(first.job_id, second.job_id);
    let batch = q.enqueue_batch(&[s.clone(), spec("idem")]).await.unwrap();
    assert_eq!(batch[0].job_id, first.job_id);
    assert!(!batch[0].created && batch[1].created);
    assert_eq!(q.list(None, 10).await.unwrap().len(), 2);
}

#[tokio::test]
async fn fencing_after_reap_and_re_lease() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(&dir).await;
    let old = WorkerIdentity::new("old");
    let new = WorkerIdentity::new("new");
    let mut s = spec("fence");
    s.stale_after_ms = 50;
    let id = q.enqueue(&s).await.unwrap().job_id;
    let first = q.lease("fence", &old, 1, Duration::ZERO).await.unwrap();
    assert_eq!(first[0].fencing_token, 1);

    let expired = wait_expired(&q, &id).await;
    assert_eq!(
        (
            expired.fencing_token,
            expired.attempts,
            expired.max_attempts
        ),
        (1, 1, 3)
    );
    assert!(
        q.reap(
            &expired,
            &ReapAction::Requeue {
                delay: Duration::ZERO
            }
        )
        .await
        .unwrap()
    );
    // Reaping the same lease twice does nothing.
    assert!(!q.reap(&expired, &ReapAction::Dead).await.unwrap());

    let second = q
        .lease("fence", &new, 1, Duration::from_secs(2))
        .await
        .unwrap();
    assert_eq!(second.len(), 1);
    assert_eq!((second[0].fencing_token, second[0].job.attempts), (2, 2));
    assert_eq!(second[0].job.history.len(), 2);
    assert_eq!(second[0].job.history[0].result.as_deref(), Some("stale"));

    // The presumed-dead worker comes back: everything it does is rejected.
    assert_eq!(
        q.heartbeat(&id, 1).await.unwrap(),
        HeartbeatReply::LeaseLost
    );
    assert_eq!(
        q.finish(&id, 1, &finish(JobState::Succeeded, 0))
            .await
            .unwrap(),
        FinishReply::Fenced { current_token: 2 }
    );
    assert!(!q.release(&id, 1).await.unwrap());
    let job = q.get(&id).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Running);
    assert_eq!(job.lease.unwrap().owner_worker, new.worker_id);

    assert_eq!(q.heartbeat(&id, 2).await.unwrap(), HeartbeatReply::Renewed);
    assert_eq!(
        q.finish(&id, 2, &finish(JobState::Succeeded, 0))
            .await
            .unwrap(),
        FinishReply::Applied(JobState::Succeeded)
    );
}

#[tokio::test]
async fn reap_loses_to_a_heartbeat_that_arrived_meanwhile() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(&dir).await;
    let w = WorkerIdentity::new("w");
    let mut s = spec("hb");
    s.stale_after_ms = 300;
    let id = q.enqueue(&s).await.unwrap().job_id;
    q.lease("hb", &w, 1, Duration::ZERO).await.unwrap();
    let expired = wait_expired(&q, &id).await;
    assert_eq!(q.heartbeat(&id, 1).await.unwrap(), HeartbeatReply::Renewed);
    assert!(!q.reap(&expired, &ReapAction::Dead).await.unwrap());
    assert_eq!(q.get(&id).await.unwrap().unwrap().state, JobState::Running);
}

#[tokio::test]
async fn delayed_retry_is_leased_only_when_due() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(&dir).await;
    let w = WorkerIdentity::new("w");
    let id = q.enqueue(&spec("delay")).await.unwrap().job_id;
    q.lease("delay", &w, 1, Duration::ZERO).await.unwrap();
    assert_eq!(
        q.finish(
            &id,
            1,
            &finish(JobState::Failed, 400).tap_next(JobState::Queued)
        )
        .await
        .unwrap(),
        FinishReply::Applied(JobState::Queued)
    );
    let job = q.get(&id).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Queued);
    assert!(
        q.pending_results(10).await.unwrap().is_empty(),
        "a retry is not a result"
    );
    assert_eq!(job.history[0].retry_delay_ms, Some(400));
    let due = job.not_before_ms;

    assert!(
        q.lease("delay", &w, 1, Duration::ZERO)
            .await
            .unwrap()
            .is_empty(),
        "not due yet"
    );
    // An idle lease wakes up when the delayed job becomes due (no enqueue signals it).
    let leased = q
        .lease("delay", &w, 1, Duration::from_secs(5))
        .await
        .unwrap();
    let at = skillforge_engine::now_ms();
    assert_eq!(leased.len(), 1);
    assert!(at >= due, "leased at {at} before due {due}");
    assert!(at < due + 1_000, "leased at {at}, long after due {due}");
    assert_eq!((leased[0].job.attempts, leased[0].fencing_token), (2, 2));
}

trait TapNext {
    fn tap_next(self, next: JobState) -> Self;
}

impl TapNext for Finish {
    fn tap_next(mut self, next: JobState) -> Self {
        self.next = next;
        self
    }
}

#[tokio::test]
async fn each_reap_action() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(&dir).await;
    let w = WorkerIdentity::new("w");
    let actions = [
        (
            ReapAction::Requeue {
                delay: Duration::from_secs(60),
            },
            JobState::Queued,
        ),
        (ReapAction::RecoveryAvailable, JobState::Stale),
        (ReapAction::Dead, JobState::Dead),
        (ReapAction::Cancelled, JobState::Cancelled),
    ];
    for (action, want) in actions {
        let mut s = spec("reap");
        s.stale_after_ms = 30;
        s.idempotent = want != JobState::Stale;
        let id = q.enqueue(&s).await.unwrap().job_id;
        let leased = q.lease("reap", &w, 1, Duration::ZERO).await.unwrap();
        assert_eq!(leased[0].job.id, id);
        let expired = wait_expired(&q, &id).await;
        assert_eq!(expired.idempotent, s.idempotent);
        let before = skillforge_engine::now_ms();
        assert!(q.reap(&expired, &action).await.unwrap(), "{action:?}");
        let job = q.get(&id).await.unwrap().unwrap();
        assert_eq!(job.state, want, "{action:?}");
        assert!(job.lease.is_none());
        assert_eq!(job.history[0].result.as_deref(), Some("stale"));
        assert_eq!(job.recovery_available, want == JobState::Stale);
        let pending = q
            .pending_results(100)
            .await
            .unwrap()
            .iter()
            .any(|j| j.id == id);
        assert_eq!(pending, want != JobState::Queued, "{action:?}");
        if want == JobState::Queued {
            assert!(job.not_before_ms >= before + 60_000);
            assert_eq!(job.history[0].retry_delay_ms, Some(60_000));
            assert!(
                q.lease("reap", &w, 1, Duration::ZERO)
                    .await
                    .unwrap()
                    .is_empty()
            );
        }
        assert!(q.ack_result(&id, job.fencing_token).await.unwrap());
    }
    assert!(q.expired_leases(10).await.unwrap().is_empty());
}

#[tokio::test]
async fn cancel_queued_and_running() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(&dir).await;
    let w = WorkerIdentity::new("w");
    let queued = q.enqueue(&spec("c")).await.unwrap().job_id;
    assert_eq!(q.cancel(&queued).await.unwrap(), CancelReply::Cancelled);
    assert_eq!(
        q.get(&queued).await.unwrap().unwrap().state,
        JobState::Cancelled
    );
    assert!(
        q.lease("c", &w, 1, Duration::ZERO)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        q.cancel(&queued).await.unwrap(),
        CancelReply::AlreadyTerminal(JobState::Cancelled)
    );
    assert!(matches!(
        q.cancel("nope").await,
        Err(EngineError::NotFound(_))
    ));

    let running = q.enqueue(&spec("c")).await.unwrap().job_id;
    q.lease("c", &w, 1, Duration::ZERO).await.unwrap();
    assert_eq!(
        q.heartbeat(&running, 1).await.unwrap(),
        HeartbeatReply::Renewed
    );
    assert_eq!(q.cancel(&running).await.unwrap(), CancelReply::Requested);
    let job = q.get(&running).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Running);
    assert!(job.cancel_requested);
    assert_eq!(
        q.heartbeat(&running, 1).await.unwrap(),
        HeartbeatReply::CancelRequested
    );
    assert_eq!(
        q.finish(&running, 1, &finish(JobState::Cancelled, 0))
            .await
            .unwrap(),
        FinishReply::Applied(JobState::Cancelled)
    );
    assert_eq!(
        q.heartbeat(&running, 1).await.unwrap(),
        HeartbeatReply::LeaseLost
    );

    // A cancel-requested job never goes back to the queue, even if the finish says retry.
    let third = q.enqueue(&spec("c")).await.unwrap().job_id;
    q.lease("c", &w, 1, Duration::ZERO).await.unwrap();
    q.cancel(&third).await.unwrap();
    assert_eq!(
        q.finish(&third, 1, &finish(JobState::Queued, 0))
            .await
            .unwrap(),
        FinishReply::Applied(JobState::Cancelled)
    );
}

#[tokio::test]
async fn release_refunds_the_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(&dir).await;
    let w = WorkerIdentity::new("w");
    let id = q.enqueue(&spec("rel")).await.unwrap().job_id;
    q.lease("rel", &w, 1, Duration::ZERO).await.unwrap();
    assert!(q.release(&id, 1).await.unwrap());
    assert!(!q.release(&id, 1).await.unwrap());
    let job = q.get(&id).await.unwrap().unwrap();
    assert_eq!((job.state, job.attempts), (JobState::Queued, 0));
    assert_eq!(job.history[0].result.as_deref(), Some("released"));
    let again = q.lease("rel", &w, 1, Duration::ZERO).await.unwrap();
    assert_eq!(
        (again[0].job.attempts, again[0].fencing_token),
        (1, 2),
        "due at once"
    );
}

#[tokio::test]
async fn retry_of_dead_job() {
    let dir = tempfile::tempdir().unwrap();
    let q = open(&dir).await;
    let w = WorkerIdentity::new("w");
    let mut s = spec("retry");
    s.max_attempts = 1;
    let id = q.enqueue(&s).await.unwrap().job_id;
    assert!(matches!(
        q.retry(&id).await,
        Err(EngineError::InvalidState {
            state: JobState::Queued,
            ..
        })
    ));
    q.lease("retry", &w, 1, Duration::ZERO).await.unwrap();
    assert!(matches!(
        q.retry(&id).await,
        Err(EngineError::InvalidState {
            state: JobState::Running,
            ..
        })
    ));
    assert_eq!(
        q.finish(&id, 1, &finish(JobState::Dead, 0)).await.unwrap(),
        FinishReply::Applied(JobState::Dead)
    );
    assert_eq!(q.pending_results(10).await.unwrap().len(), 1);
    q.retry(&id).await.unwrap();
    let job = q.get(&id).await.unwrap().unwrap();
    assert_eq!((job.state, job.attempts), (JobState::Queued, 0));
    assert_eq!(job.history.len(), 1, "history kept");
    assert!(q.pending_results(10).await.unwrap().is_empty());
    let leased = q.lease("retry", &w, 1, Duration::ZERO).await.unwrap();
    assert_eq!((leased[0].job.attempts, leased[0].fencing_token), (1, 2));
    assert_eq!(leased[0].job.history.len(), 2);
    assert!(matches!(
        q.retry("nope").await,
        Err(EngineError::NotFound(_))
    ));
}

/// Issue 35 item 6: see the scenario.
#[tokio::test]
async fn fail_queued_fails_only_queued_jobs_as_a_new_result() {
    let dir = tempfile::tempdir().unwrap();
    scenarios::placement::fail_queued_fails_only_queued_jobs_as_a_new_result(&open(&dir).await)
        .await;
}

/// Issue 35 item 6: see the scenario.
#[tokio::test]
async fn the_deadline_fails_only_jobs_no_live_worker_can_take() {
    let dir = tempfile::tempdir().unwrap();
    scenarios::placement::the_deadline_fails_only_jobs_no_live_worker_can_take(&open(&dir).await)
        .await;
}

/// Issue 32 item 7: see the scenario.
#[tokio::test]
async fn a_job_rewritten_on_the_queue_is_refused_at_ingestion() {
    let dir = tempfile::tempdir().unwrap();
    scenarios::trusted_spec::a_job_rewritten_on_the_queue_is_refused_at_ingestion(
        &open(&dir).await,
    )
    .await;
}

/// Issue 32 item 6: see the scenario.
#[tokio::test]
async fn rerun_result_requeues_only_a_pending_result_under_its_token() {
    let dir = tempfile::tempdir().unwrap();
    scenarios::rerun_result_requeues_only_a_pending_result_under_its_token(&open(&dir).await).await;
}
