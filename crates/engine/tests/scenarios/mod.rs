//! Backend scenarios shared by `sqlite_backend/` and `redis_backend/`: each takes any
//! [`QueueBackend`] and is run by a test in both files, so the two backends are held to the
//! same behaviour by the same code.

pub(crate) mod placement;
pub(crate) mod retention;
pub(crate) mod trusted_spec;

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

use skillforge_engine::ingest::{ResultHandler, ingest_once};
use skillforge_engine::{
    Finish, FinishReply, Job, JobSpec, JobState, QueueBackend, WorkerIdentity,
};
use skillforge_runner::{ExitClass, RunOutcome};
use skillforge_store::Store;
use skillforge_store::applied::applied_for_job;

pub(crate) mod live;

/// A job for `queue` (the runner kind does not matter to a backend).
pub(crate) fn spec(queue: &str) -> JobSpec {
    let mut s = JobSpec::new("noop", serde_json::json!({"n": 1}));
    s.queue = queue.to_owned();
    s
}

/// A finish to `next`: passed when `succeeded`, else a failed run (a retry due at once when
/// `queued`).
pub(crate) fn finish(next: JobState) -> Finish {
    let passed = next == JobState::Succeeded;
    Finish {
        next,
        retry_delay_ms: 0,
        attempt_result: if passed {
            "passed".into()
        } else {
            "failed".into()
        },
        outcome: Some(RunOutcome {
            exit: if passed {
                ExitClass::Passed
            } else {
                ExitClass::Failed { code: 1 }
            },
            exit_code: Some(if passed { 0 } else { 1 }),
            duration_ms: 3,
            stdout_tail: "ok".into(),
            stderr_tail: String::new(),
            detail: serde_json::Value::Null,
        }),
        error: None,
    }
}

/// A finishing slot leases its next job in the same call: the next job, its lease and history;
/// a fenced finish still refills the slot; nothing due, no next job; a retry due at once is
/// leased back by its own finish with its whole history; many concurrent (batched) finishes
/// each keep their own fencing.
pub(crate) async fn finish_and_lease_refills_the_slot_in_one_call(b: &dyn QueueBackend) {
    let w = WorkerIdentity::new("refill");
    let a = b.enqueue(&spec("q")).await.unwrap();
    let c = b.enqueue(&spec("q")).await.unwrap();
    let first = b.lease("q", &w, 1, Duration::ZERO).await.unwrap();
    assert_eq!(first[0].job.id, a.job_id);

    let (reply, next) = b
        .finish_and_lease(&a.job_id, 1, &finish(JobState::Succeeded), "q", &w)
        .await
        .unwrap();
    assert_eq!(reply, FinishReply::Applied(JobState::Succeeded));
    let next = next.expect("the next job is leased with the finish");
    assert_eq!(
        (next.job.id.as_str(), next.fencing_token, next.job.attempts),
        (c.job_id.as_str(), 1, 1)
    );
    assert_eq!(next.job.state, JobState::Running);
    assert_eq!(
        next.job.lease.as_ref().map(|l| l.owner_worker.as_str()),
        Some(w.worker_id.as_str())
    );
    assert_eq!(next.job.history.len(), 1);
    assert_eq!(next.job.history[0].worker, w.worker_id);
    assert!(next.job.history[0].ended_at_ms.is_none());
    assert_eq!(
        b.get(&c.job_id).await.unwrap().unwrap().history,
        next.job.history
    );

    // A fenced finish still frees (and refills) the slot.
    let d = b.enqueue(&spec("q")).await.unwrap();
    let (reply, next) = b
        .finish_and_lease(&a.job_id, 7, &finish(JobState::Succeeded), "q", &w)
        .await
        .unwrap();
    assert_eq!(reply, FinishReply::Fenced { current_token: 1 });
    assert_eq!(next.map(|n| n.job.id), Some(d.job_id.clone()));

    // Nothing due: no next job.
    let (reply, next) = b
        .finish_and_lease(&c.job_id, 1, &finish(JobState::Succeeded), "q", &w)
        .await
        .unwrap();
    assert_eq!(reply, FinishReply::Applied(JobState::Succeeded));
    assert!(next.is_none());

    // A retry due at once is leased back by its own finish, with its whole history.
    let (reply, next) = b
        .finish_and_lease(&d.job_id, 1, &finish(JobState::Queued), "q", &w)
        .await
        .unwrap();
    assert_eq!(reply, FinishReply::Applied(JobState::Queued));
    let again = next.expect("the retry is due now");
    assert_eq!(
        (
            again.job.id.as_str(),
            again.fencing_token,
            again.job.attempts
        ),
        (d.job_id.as_str(), 2, 2)
    );
    assert_eq!(again.job.history.len(), 2);
    assert_eq!(again.job.history[0].result.as_deref(), Some("failed"));

    // Many concurrent finishes (batched) each keep their own fencing.
    let mut ids = Vec::new();
    for _ in 0..120 {
        ids.push(b.enqueue(&spec("q")).await.unwrap().job_id);
    }
    let leased = b.lease("q", &w, 200, Duration::ZERO).await.unwrap();
    assert_eq!(leased.len(), 120);
    let f = finish(JobState::Succeeded);
    let replies = futures::future::join_all(leased.iter().enumerate().map(|(i, l)| {
        let token = if i % 10 == 0 {
            l.fencing_token + 1
        } else {
            l.fencing_token
        };
        let (f, w) = (&f, &w);
        async move {
            b.finish_and_lease(&l.job.id, token, f, "q", w)
                .await
                .unwrap()
        }
    }))
    .await;
    for (i, (reply, next)) in replies.into_iter().enumerate() {
        assert!(next.is_none());
        if i % 10 == 0 {
            assert_eq!(reply, FinishReply::Fenced { current_token: 1 });
        } else {
            assert_eq!(reply, FinishReply::Applied(JobState::Succeeded));
        }
    }
    let succeeded = b.list(Some(JobState::Succeeded), 1000).await.unwrap();
    assert_eq!(succeeded.len(), 2 + 108);
}

/// Concurrent finishes that refill their slots from several queues for several workers (one
/// batch; on SQLite one command to the write connection when no finish is fenced): every
/// slot gets a distinct job of the queue it asked for, leased to its own worker; a re-leased
/// job comes back with its whole history; a fenced finish in the batch is answered with the
/// current token while the others apply once, and its slot is still refilled.
pub(crate) async fn batched_finishes_refill_each_slot_from_its_queue_for_its_worker(
    b: &dyn QueueBackend,
) {
    let (w1, w2) = (WorkerIdentity::new("one"), WorkerIdentity::new("two"));
    for q in ["a", "a", "a", "a", "b", "b", "b", "b"] {
        b.enqueue(&spec(q)).await.unwrap();
    }
    let mut running = Vec::new();
    for (q, w) in [("a", &w1), ("a", &w2), ("b", &w1), ("b", &w2)] {
        running.extend(
            b.lease(q, w, 2, Duration::ZERO)
                .await
                .unwrap()
                .into_iter()
                .map(|l| (l, w.clone())),
        );
    }
    assert_eq!(running.len(), 8);
    let mut waiting = HashSet::new();
    for q in ["a", "a", "a", "a", "b", "b", "b", "b"] {
        waiting.insert(b.enqueue(&spec(q)).await.unwrap().job_id);
    }

    // Eight finishes at once; slot i refills from queue "a" or "b" for worker one or two.
    let wants: Vec<(&str, &WorkerIdentity)> = vec![
        ("b", &w1),
        ("a", &w1),
        ("b", &w2),
        ("a", &w2),
        ("a", &w1),
        ("b", &w1),
        ("a", &w2),
        ("b", &w2),
    ];
    let done = finish(JobState::Succeeded);
    let replies = futures::future::join_all(running.iter().zip(&wants).map(|((l, _), (q, w))| {
        let done = &done;
        async move {
            b.finish_and_lease(&l.job.id, l.fencing_token, done, q, w)
                .await
                .unwrap()
        }
    }))
    .await;
    let mut refilled = Vec::new();
    for (((l, _), (q, w)), (reply, next)) in running.iter().zip(&wants).zip(replies) {
        assert_eq!(
            reply,
            FinishReply::Applied(JobState::Succeeded),
            "finish of {}",
            l.job.id
        );
        assert_eq!(
            b.get(&l.job.id).await.unwrap().unwrap().state,
            JobState::Succeeded
        );
        let next = next.expect("a due job for every slot");
        assert_eq!(next.job.spec.queue, *q, "slot asked for queue {q}");
        assert_eq!(next.job.lease.as_ref().unwrap().owner_worker, w.worker_id);
        let stored = b.get(&next.job.id).await.unwrap().unwrap();
        assert_eq!((stored.state, stored.fencing_token), (JobState::Running, 1));
        assert_eq!(
            stored.lease.unwrap().owner_worker,
            w.worker_id,
            "stored owner of {}",
            next.job.id
        );
        assert_eq!(stored.history, next.job.history);
        assert!(
            waiting.remove(&next.job.id),
            "{} handed out twice or not waiting",
            next.job.id
        );
        refilled.push((next, (*w).clone()));
    }
    assert!(waiting.is_empty());

    // A failed attempt goes back to `queued` (the step-by-step path)...
    let (retried, retried_owner) = &refilled[0];
    let reply = b
        .finish(&retried.job.id, 1, &finish(JobState::Queued))
        .await
        .unwrap();
    assert_eq!(reply, FinishReply::Applied(JobState::Queued));
    // ...and another slot's finish leases it back, with both attempts in its history.
    let (other, other_owner) = &refilled[1];
    let (reply, next) = b
        .finish_and_lease(
            &other.job.id,
            1,
            &done,
            &retried.job.spec.queue,
            other_owner,
        )
        .await
        .unwrap();
    assert_eq!(reply, FinishReply::Applied(JobState::Succeeded));
    let again = next.expect("the retry is due");
    assert_eq!(
        (
            again.job.id.as_str(),
            again.fencing_token,
            again.job.attempts
        ),
        (retried.job.id.as_str(), 2, 2)
    );
    assert_eq!(again.job.history.len(), 2);
    assert_eq!(again.job.history[0].worker, retried_owner.worker_id);
    assert_eq!(again.job.history[0].result.as_deref(), Some("failed"));
    assert_eq!(again.job.history[1].worker, other_owner.worker_id);
    assert_eq!(
        b.get(&again.job.id).await.unwrap().unwrap().history,
        again.job.history
    );

    // A batch with one fenced finish: the fenced one is answered with the current token, the
    // others apply once, and every slot (the fenced one's too) gets its own next job.
    let mut slots: Vec<(String, u64, WorkerIdentity)> = refilled[2..]
        .iter()
        .map(|(l, w)| (l.job.id.clone(), l.fencing_token, w.clone()))
        .collect();
    slots.push((
        again.job.id.clone(),
        again.fencing_token,
        other_owner.clone(),
    ));
    let mut fresh = HashSet::new();
    for _ in 0..slots.len() {
        fresh.insert(b.enqueue(&spec("c")).await.unwrap().job_id);
    }
    let replies = futures::future::join_all(slots.iter().enumerate().map(|(i, (id, token, w))| {
        let done = &done;
        let token = if i == 2 { token + 5 } else { *token };
        async move { b.finish_and_lease(id, token, done, "c", w).await.unwrap() }
    }))
    .await;
    for (i, ((id, token, w), (reply, next))) in slots.iter().zip(replies).enumerate() {
        let stored = b.get(id).await.unwrap().unwrap();
        if i == 2 {
            assert_eq!(
                reply,
                FinishReply::Fenced {
                    current_token: *token
                }
            );
            assert_eq!(
                (stored.state, stored.fencing_token),
                (JobState::Running, *token),
                "fenced job untouched"
            );
        } else {
            assert_eq!(reply, FinishReply::Applied(JobState::Succeeded));
            assert_eq!(stored.state, JobState::Succeeded);
        }
        let next = next.expect("every slot refilled");
        assert_eq!(next.job.lease.as_ref().unwrap().owner_worker, w.worker_id);
        assert!(
            fresh.remove(&next.job.id),
            "{} handed out twice",
            next.job.id
        );
    }
    assert!(fresh.is_empty());
    // The write connection is usable after the aborted one-command attempt.
    let last = b.enqueue(&spec("c")).await.unwrap();
    assert_eq!(
        b.lease("c", &w1, 1, Duration::ZERO).await.unwrap()[0]
            .job
            .id,
        last.job_id
    );
}

/// Between ingestion's read of a pending result and its acknowledgement, the job is retried
/// (`jobs retry`) and its new attempt finishes: the handler applying the first result does both,
/// so the interleaving is deterministic. The acknowledgement of token 1 must not erase token 2's
/// result: the next pass applies it, and the store ends with both (job, token) records.
pub(crate) async fn retry_finishing_between_ingestion_read_and_ack_is_not_lost(
    b: &dyn QueueBackend,
) {
    /// Applies results; while applying `job`'s first one, retries the job and runs its next
    /// attempt to `succeeded` through the queue, as another worker would.
    struct RetryDuringApply<'a> {
        queue: &'a dyn QueueBackend,
        worker: WorkerIdentity,
        seen: Mutex<Vec<(String, u64, JobState)>>,
    }
    #[async_trait::async_trait]
    impl ResultHandler for RetryDuringApply<'_> {
        async fn apply(
            &self,
            _conn: &mut sqlx::SqliteConnection,
            job: &Job,
        ) -> Result<(), skillforge_engine::ingest::ApplyError> {
            let unusable = |e: skillforge_engine::EngineError| {
                skillforge_engine::ingest::ApplyError::Unusable {
                    job_id: job.id.clone(),
                    reason: e.to_string(),
                }
            };
            let first = self.seen.lock().unwrap().is_empty();
            self.seen
                .lock()
                .unwrap()
                .push((job.id.clone(), job.fencing_token, job.state));
            if first {
                self.queue.retry(&job.id).await.map_err(unusable)?;
                let leased = self
                    .queue
                    .lease("q", &self.worker, 1, Duration::ZERO)
                    .await
                    .map_err(unusable)?;
                let token = leased[0].fencing_token;
                let reply = self
                    .queue
                    .finish(&job.id, token, &finish(JobState::Succeeded))
                    .await
                    .map_err(unusable)?;
                assert_eq!(reply, FinishReply::Applied(JobState::Succeeded));
            }
            Ok(())
        }
    }

    let home = tempfile::tempdir().unwrap();
    let store = Store::open(home.path()).await.unwrap();
    let w = WorkerIdentity::new("interleave");
    let mut once = spec("q");
    once.max_attempts = 1;
    let id = b.enqueue(&once).await.unwrap().job_id;
    let leased = b.lease("q", &w, 1, Duration::ZERO).await.unwrap();
    assert_eq!(
        b.finish(&id, leased[0].fencing_token, &finish(JobState::Dead))
            .await
            .unwrap(),
        FinishReply::Applied(JobState::Dead)
    );

    let handler = RetryDuringApply {
        queue: b,
        worker: w,
        seen: Mutex::new(Vec::new()),
    };
    let first = ingest_once(b, &store, &handler).await.unwrap();
    assert_eq!(first.applied, 1);
    let pending: Vec<(String, u64)> = b
        .pending_results(10)
        .await
        .unwrap()
        .into_iter()
        .map(|j| (j.id, j.fencing_token))
        .collect();
    assert_eq!(
        pending,
        vec![(id.clone(), 2)],
        "the new attempt's result is still pending"
    );

    let second = ingest_once(b, &store, &handler).await.unwrap();
    assert_eq!(second.applied, 1, "the next pass applies token 2");
    assert!(b.pending_results(10).await.unwrap().is_empty());
    let seen = handler.seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![
            (id.clone(), 1, JobState::Dead),
            (id.clone(), 2, JobState::Succeeded)
        ]
    );
    let applied: Vec<(i64, String)> = applied_for_job(store.pool(), &id)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.fencing_token, r.state))
        .collect();
    assert_eq!(
        applied,
        vec![(1, "dead".to_owned()), (2, "succeeded".to_owned())]
    );
}

/// Found by the fault soak (issue 21): with another process holding the domain store's write
/// lock, an ingestion pass of a keyed job failed at once with `database is locked` (its deferred
/// transaction read `applied_by_key` first, and SQLite never runs the busy handler for a read →
/// write upgrade), so `serve` spun on failed passes for as long as the other writer held the
/// store. The pass now takes the write lock up front and waits (busy timeout), then applies.
pub(crate) async fn ingestion_waits_for_another_writer_of_the_store(b: &dyn QueueBackend) {
    use sqlx::Connection;
    let home = tempfile::tempdir().unwrap();
    let store = Store::open(home.path()).await.unwrap();
    let w = WorkerIdentity::new("held-store");
    let mut keyed = spec("q");
    keyed.idempotency_key = Some("soak-key".into());
    let id = b.enqueue(&keyed).await.unwrap().job_id;
    let leased = b.lease("q", &w, 1, Duration::ZERO).await.unwrap();
    b.finish(&id, leased[0].fencing_token, &finish(JobState::Succeeded))
        .await
        .unwrap();

    // Another writer, as a second process would be: its own connection, write lock taken.
    let url = format!("sqlite://{}", home.path().join("skillforge.db").display());
    let mut other = sqlx::SqliteConnection::connect(&url).await.unwrap();
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut other)
        .await
        .unwrap();
    let release = tokio::spawn(async move {
        // How long the other writer holds the store: the fault, not a wait for a condition.
        tokio::time::sleep(Duration::from_millis(300)).await;
        sqlx::query("COMMIT").execute(&mut other).await.unwrap();
    });
    let report = ingest_once(b, &store, &skillforge_engine::ingest::RecordOnly)
        .await
        .expect("the pass waits for the other writer");
    assert_eq!(report.applied, 1);
    release.await.unwrap();
    let applied: Vec<i64> = applied_for_job(store.pool(), &id)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.fencing_token)
        .collect();
    assert_eq!(applied, vec![1]);
    assert!(b.pending_results(10).await.unwrap().is_empty());
}

/// A job whose result was applied, retried, then cancelled while queued: the cancel is a new
/// result under a new fencing token, so ingestion applies it instead of taking it for the
/// applied one (issue 12: it kept its token and its cancel was deduplicated away). A job never
/// leased keeps token 0 when cancelled, so a later lease is still its first.
pub(crate) async fn a_retried_then_cancelled_job_gets_a_new_token_and_its_cancel_is_applied(
    b: &dyn QueueBackend,
) {
    struct Record;
    #[async_trait::async_trait]
    impl ResultHandler for Record {
        async fn apply(
            &self,
            _conn: &mut sqlx::SqliteConnection,
            _job: &Job,
        ) -> Result<(), skillforge_engine::ingest::ApplyError> {
            Ok(())
        }
    }
    let home = tempfile::tempdir().unwrap();
    let store = Store::open(home.path()).await.unwrap();
    let w = WorkerIdentity::new("cancel-after-retry");
    let mut once = spec("q");
    once.max_attempts = 1;
    let id = b.enqueue(&once).await.unwrap().job_id;
    let leased = b.lease("q", &w, 1, Duration::ZERO).await.unwrap();
    assert_eq!(
        b.finish(&id, leased[0].fencing_token, &finish(JobState::Dead))
            .await
            .unwrap(),
        FinishReply::Applied(JobState::Dead)
    );
    assert_eq!(ingest_once(b, &store, &Record).await.unwrap().applied, 1);

    b.retry(&id).await.unwrap();
    b.cancel(&id).await.unwrap();
    let job = b.get(&id).await.unwrap().unwrap();
    assert_eq!(
        (job.state, job.fencing_token),
        (JobState::Cancelled, 2),
        "the cancel runs under a new token"
    );
    assert_eq!(
        ingest_once(b, &store, &Record).await.unwrap().applied,
        1,
        "the cancel is applied, not deduplicated"
    );
    let applied: Vec<(i64, String)> = applied_for_job(store.pool(), &id)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.fencing_token, r.state))
        .collect();
    assert_eq!(
        applied,
        vec![(1, "dead".to_owned()), (2, "cancelled".to_owned())]
    );

    let never = b.enqueue(&spec("q")).await.unwrap().job_id;
    b.cancel(&never).await.unwrap();
    assert_eq!(
        b.get(&never).await.unwrap().unwrap().fencing_token,
        0,
        "never leased: still token 0"
    );
}

/// Found by the fault soak (issue 21): a cancel under a new token keeps the job's attempt under
/// the token it ran with, once, for a dead job retried then cancelled and for a stale job
/// cancelled (SQLite listed the attempt a second time, under the cancel's token).
pub(crate) async fn a_cancelled_job_keeps_each_attempt_once_under_its_own_token(
    b: &dyn QueueBackend,
) {
    let history = |job: Job| {
        job.history
            .iter()
            .map(|a| (a.fencing_token, a.result.clone()))
            .collect::<Vec<_>>()
    };
    let w = WorkerIdentity::new("cancel-history");
    let mut once = spec("h");
    once.max_attempts = 1;
    let dead = b.enqueue(&once).await.unwrap().job_id;
    let leased = b.lease("h", &w, 1, Duration::ZERO).await.unwrap();
    b.finish(&dead, leased[0].fencing_token, &finish(JobState::Dead))
        .await
        .unwrap();
    b.retry(&dead).await.unwrap();
    b.cancel(&dead).await.unwrap();
    let job = b.get(&dead).await.unwrap().unwrap();
    assert_eq!(job.fencing_token, 2);
    assert_eq!(
        history(job),
        vec![(1, Some("failed".to_owned()))],
        "one attempt, under token 1"
    );

    let mut nonidem = spec("s");
    nonidem.idempotent = false;
    nonidem.stale_after_ms = 100;
    let stale = b.enqueue(&nonidem).await.unwrap().job_id;
    b.lease("s", &w, 1, Duration::ZERO).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let expired = loop {
        if let Some(e) = b
            .expired_leases(10)
            .await
            .unwrap()
            .into_iter()
            .find(|e| e.job_id == stale)
        {
            break e;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the lease never expired"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        b.reap(&expired, &skillforge_engine::ReapAction::RecoveryAvailable)
            .await
            .unwrap()
    );
    b.cancel(&stale).await.unwrap();
    let job = b.get(&stale).await.unwrap().unwrap();
    assert_eq!((job.state, job.fencing_token), (JobState::Cancelled, 2));
    assert_eq!(
        history(job),
        vec![(1, Some("stale".to_owned()))],
        "one attempt, under token 1"
    );
}

/// Issue 32 item 3: results that cannot be applied yet (here 505 of a workflow no handler
/// knows, older than every other result) no longer block the newer ones: each is deferred with
/// its own backoff and passed over, so the newer result is applied within a pass or two, and a
/// deferred result is not offered again (nor logged) before its backoff ends.
pub(crate) async fn results_that_cannot_be_applied_yet_are_skipped_past_with_backoff(
    b: &dyn QueueBackend,
) {
    use skillforge_engine::ingest::{ApplyError, Ingestion};
    /// Refuses the workflow `unknown` (as a build without its family does), counting each try.
    #[derive(Default)]
    struct Refusing {
        tries: Mutex<std::collections::HashMap<String, u32>>,
    }
    #[async_trait::async_trait]
    impl ResultHandler for Refusing {
        async fn apply(
            &self,
            _conn: &mut sqlx::SqliteConnection,
            job: &Job,
        ) -> Result<(), ApplyError> {
            *self
                .tries
                .lock()
                .unwrap()
                .entry(job.id.clone())
                .or_default() += 1;
            if job.spec.workflow == "unknown" {
                return Err(ApplyError::NoHandler {
                    workflow: job.spec.workflow.clone(),
                    job_id: job.id.clone(),
                });
            }
            Ok(())
        }
    }
    const BLOCKED: usize = 505;
    let home = tempfile::tempdir().unwrap();
    let store = Store::open(home.path()).await.unwrap();
    let w = WorkerIdentity::new("blocked");
    let mut unknown = spec("q");
    unknown.workflow = "unknown".into();
    for _ in 0..BLOCKED {
        b.enqueue(&unknown).await.unwrap();
    }
    let mut finished = 0;
    while finished < BLOCKED {
        for leased in b.lease("q", &w, 100, Duration::ZERO).await.unwrap() {
            b.finish(
                &leased.job.id,
                leased.fencing_token,
                &finish(JobState::Succeeded),
            )
            .await
            .unwrap();
            finished += 1;
        }
    }
    let newer = b.enqueue(&spec("q")).await.unwrap().job_id;
    let leased = b.lease("q", &w, 1, Duration::ZERO).await.unwrap();
    b.finish(
        &newer,
        leased[0].fencing_token,
        &finish(JobState::Succeeded),
    )
    .await
    .unwrap();

    let handler = Refusing::default();
    // A backoff no test run outlasts: what is deferred stays passed over.
    let mut ingestion =
        Ingestion::with_backoff(Duration::from_secs(3600), Duration::from_secs(3600));
    let mut applied = 0;
    for _ in 0..3 {
        applied += ingestion.pass(b, &store, &handler).await.unwrap().applied;
    }
    assert_eq!(
        applied, 1,
        "the newer result is applied despite {BLOCKED} older ones that cannot be"
    );
    assert_eq!(
        applied_for_job(store.pool(), &newer).await.unwrap().len(),
        1
    );
    assert_eq!(ingestion.deferred(), BLOCKED);
    let tries = handler.tries.lock().unwrap().clone();
    assert_eq!(tries.len(), BLOCKED + 1);
    assert!(
        tries.values().all(|n| *n == 1),
        "each tried once, none again before its backoff ends: {:?}",
        tries.values().max()
    );
    assert_eq!(
        b.pending_results(1000).await.unwrap().len(),
        BLOCKED,
        "the deferred results stay pending"
    );
}

/// Issue 32 item 6: `rerun_result` puts a finished job whose result is pending under that token
/// back in the queue (attempts kept, the reason as its error, no longer a pending result); a
/// wrong token, or a result no longer pending, changes nothing.
pub(crate) async fn rerun_result_requeues_only_a_pending_result_under_its_token(
    b: &dyn QueueBackend,
) {
    let w = WorkerIdentity::new("rerun");
    let id = b.enqueue(&spec("r")).await.unwrap().job_id;
    let leased = b.lease("r", &w, 1, Duration::ZERO).await.unwrap();
    let token = leased[0].fencing_token;
    b.finish(&id, token, &finish(JobState::Succeeded))
        .await
        .unwrap();
    assert!(
        !b.rerun_result(&id, token + 1, "x").await.unwrap(),
        "another token"
    );
    assert!(b.rerun_result(&id, token, "outputs expired").await.unwrap());
    let job = b.get(&id).await.unwrap().unwrap();
    assert_eq!(
        (job.state, job.attempts, job.error.as_deref()),
        (JobState::Queued, 1, Some("outputs expired"))
    );
    assert!(
        b.pending_results(10).await.unwrap().is_empty(),
        "no longer a pending result"
    );
    assert!(
        !b.rerun_result(&id, token, "again").await.unwrap(),
        "not pending any more"
    );
    let again = b.lease("r", &w, 1, Duration::ZERO).await.unwrap();
    assert_eq!(
        (
            again[0].job.id.as_str(),
            again[0].fencing_token,
            again[0].job.attempts
        ),
        (id.as_str(), token + 1, 2)
    );
    b.finish(&id, token + 1, &finish(JobState::Succeeded))
        .await
        .unwrap();
    let job = b.get(&id).await.unwrap().unwrap();
    assert_eq!(
        (job.state, job.error),
        (JobState::Succeeded, None),
        "the next finish clears the error"
    );
    assert_eq!(
        job.history
            .iter()
            .map(|a| a.fencing_token)
            .collect::<Vec<_>>(),
        vec![token, token + 1],
        "both attempts, once each"
    );
    assert!(matches!(
        b.rerun_result("no-such-job", 1, "x").await,
        Err(skillforge_engine::EngineError::NotFound(_))
    ));
}
