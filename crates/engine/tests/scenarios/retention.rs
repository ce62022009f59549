//! Retention scenarios (issue 19) shared by both backends: pruning by age and by count, the
//! rule that an unapplied result is never pruned (also raced against ingestion and retries),
//! the idempotency window and tombstones. Results are applied by the real ingestion
//! (`ingest_once`) into a real store, as the control plane does.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use skillforge_engine::ingest::{ApplyError, ResultHandler, ingest_once};
use skillforge_engine::retention::{Bound, PruneRule, RetainClass, prune_pass};
use skillforge_engine::{FinishReply, Job, JobSpec, JobState, QueueBackend, WorkerIdentity};
use skillforge_store::Store;
use skillforge_store::applied::applied_for_job;

use super::{finish, spec};

/// Accepts every result (the store still records each applied (job, token)).
struct Accept;

#[async_trait::async_trait]
impl ResultHandler for Accept {
    async fn apply(
        &self,
        _conn: &mut sqlx::SqliteConnection,
        _job: &Job,
    ) -> Result<(), ApplyError> {
        Ok(())
    }
}

/// Applies every pending result (as `serve` does), until none is left.
async fn ingest_all(b: &dyn QueueBackend, store: &Store) {
    while ingest_once(b, store, &Accept).await.unwrap().applied > 0 {}
}

/// Enqueues `spec`, leases it and finishes it to `next`; returns its id.
async fn run_to(b: &dyn QueueBackend, spec: &JobSpec, next: JobState) -> String {
    let w = WorkerIdentity::new("retention");
    let id = b.enqueue(spec).await.unwrap().job_id;
    let leased = b.lease(&spec.queue, &w, 1, Duration::ZERO).await.unwrap();
    assert_eq!(
        leased[0].job.id, id,
        "the job just enqueued is the only one due in `{}`",
        spec.queue
    );
    let reply = b
        .finish(&id, leased[0].fencing_token, &finish(next))
        .await
        .unwrap();
    assert_eq!(reply, FinishReply::Applied(next));
    id
}

/// Waits until the backend's clock is past `t` (polling, no fixed sleep).
async fn clock_past(b: &dyn QueueBackend, t: i64) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = b.now_ms().await.unwrap();
        if now > t {
            return now;
        }
        assert!(Instant::now() < deadline, "backend clock stuck at {now}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

fn jobs_rule(class: RetainClass, jobs: Bound) -> PruneRule {
    PruneRule {
        class,
        jobs,
        tombstones: Bound::default(),
    }
}

/// Everything of the class, however young.
async fn everything(b: &dyn QueueBackend) -> Bound {
    Bound {
        before_ms: Some(b.now_ms().await.unwrap() + 60_000),
        keep_newest: None,
    }
}

async fn exists(b: &dyn QueueBackend, id: &str) -> bool {
    b.get(id).await.unwrap().is_some()
}

/// By age: jobs that finished before the bound are pruned, younger ones and the other class are
/// kept; a pruned job leaves a tombstone with its state and finish time; the batch limit holds.
pub(crate) async fn retention_by_age(b: &dyn QueueBackend) {
    let home = tempfile::tempdir().unwrap();
    let store = Store::open(home.path()).await.unwrap();
    let mut old = Vec::new();
    for _ in 0..5 {
        old.push(run_to(b, &spec("age"), JobState::Succeeded).await);
    }
    let old_failed = run_to(b, &spec("age"), JobState::Dead).await;
    let finished_old = b.get(&old_failed).await.unwrap().unwrap().updated_at_ms;
    let cut = clock_past(b, finished_old).await;
    clock_past(b, cut).await;
    let young = run_to(b, &spec("age"), JobState::Succeeded).await;
    ingest_all(b, &store).await;

    let rule = jobs_rule(
        RetainClass::Succeeded,
        Bound {
            before_ms: Some(cut),
            keep_newest: None,
        },
    );
    assert_eq!(
        b.prune_count(&rule).await.unwrap(),
        (5, 0),
        "dry count: the five old succeeded jobs"
    );
    assert!(exists(b, &old[0]).await, "a dry count removes nothing");
    let first = b.prune(&rule, 2).await.unwrap();
    assert_eq!(
        (first.jobs, first.more),
        (2, true),
        "a batch prunes at most its limit"
    );
    let report = prune_pass(b, &[rule], 100).await.unwrap();
    assert_eq!(report.jobs, 3);
    for id in &old {
        assert!(!exists(b, id).await, "old succeeded job {id} pruned");
        let t = b.tombstone(id).await.unwrap().expect("a tombstone");
        assert_eq!((t.state, t.idempotency_key), (JobState::Succeeded, None));
        assert!(t.finished_at_ms < cut && t.pruned_at_ms >= cut);
    }
    assert!(
        exists(b, &young).await,
        "a job younger than the bound is kept"
    );
    assert!(b.tombstone(&young).await.unwrap().is_none());
    assert!(
        exists(b, &old_failed).await,
        "the failed class has its own retention"
    );
    assert!(
        b.list(None, 100)
            .await
            .unwrap()
            .iter()
            .all(|j| !old.contains(&j.id)),
        "gone from the job index"
    );

    let failed_rule = jobs_rule(
        RetainClass::Failed,
        Bound {
            before_ms: Some(cut),
            keep_newest: None,
        },
    );
    assert_eq!(prune_pass(b, &[failed_rule], 100).await.unwrap().jobs, 1);
    assert_eq!(
        b.tombstone(&old_failed).await.unwrap().unwrap().state,
        JobState::Dead
    );
    assert!(
        b.list(Some(JobState::Dead), 10).await.unwrap().is_empty(),
        "gone from the state index"
    );
    // Nothing selected any more: a second pass prunes nothing.
    assert_eq!(
        prune_pass(b, &[rule, failed_rule], 100).await.unwrap().jobs,
        0
    );
}

/// By count: only the newest N finished jobs of the class stay (in finish order, not creation
/// order); tombstones are bounded by count the same way.
pub(crate) async fn retention_by_count(b: &dyn QueueBackend) {
    let home = tempfile::tempdir().unwrap();
    let store = Store::open(home.path()).await.unwrap();
    let w = WorkerIdentity::new("count");
    // Created first, finished last: the newest by finish time.
    let late = b.enqueue(&spec("count")).await.unwrap().job_id;
    let late_lease = b.lease("count", &w, 1, Duration::ZERO).await.unwrap();
    let mut ids = Vec::new();
    for _ in 0..8 {
        let id = run_to(b, &spec("count"), JobState::Failed).await;
        clock_past(b, b.get(&id).await.unwrap().unwrap().updated_at_ms).await;
        ids.push(id);
    }
    b.finish(
        &late,
        late_lease[0].fencing_token,
        &finish(JobState::Cancelled),
    )
    .await
    .unwrap();
    ingest_all(b, &store).await;

    let rule = PruneRule {
        class: RetainClass::Failed,
        jobs: Bound {
            before_ms: None,
            keep_newest: Some(3),
        },
        tombstones: Bound {
            before_ms: None,
            keep_newest: Some(4),
        },
    };
    assert_eq!(b.prune_count(&rule).await.unwrap(), (6, 0));
    let report = prune_pass(b, &[rule], 100).await.unwrap();
    assert_eq!(
        (report.jobs, report.tombstones),
        (6, 2),
        "6 pruned, then their tombstones cut to 4"
    );
    let kept: Vec<bool> = futures::future::join_all(ids.iter().map(|id| exists(b, id))).await;
    assert_eq!(
        kept,
        [false, false, false, false, false, false, true, true],
        "the newest by finish time stay"
    );
    assert!(
        exists(b, &late).await,
        "created first but finished last: kept"
    );
    let tombs: Vec<bool> = futures::future::join_all(
        ids[..6]
            .iter()
            .map(|id| async move { b.tombstone(id).await.unwrap().is_some() }),
    )
    .await;
    assert_eq!(
        tombs,
        [false, false, true, true, true, true],
        "the oldest tombstones go first"
    );
    assert_eq!(b.prune_count(&rule).await.unwrap(), (0, 0));
}

/// Never pruned, however old: a queued, running or stale job, a terminal job whose result is
/// pending (not yet applied), one whose ack was fenced (a newer attempt's result is pending) and
/// one retried after its result was applied. Only the applied terminal job goes.
pub(crate) async fn pruning_never_removes_an_unapplied_result(b: &dyn QueueBackend) {
    let home = tempfile::tempdir().unwrap();
    let store = Store::open(home.path()).await.unwrap();
    let w = WorkerIdentity::new("unapplied");
    let applied = run_to(b, &spec("u"), JobState::Succeeded).await;
    let applied_dead = run_to(b, &spec("u"), JobState::Dead).await;
    let retried = run_to(b, &spec("u-retried"), JobState::Failed).await;
    ingest_all(b, &store).await;
    b.retry(&retried).await.unwrap();

    let pending = run_to(b, &spec("u"), JobState::Succeeded).await;
    let pending_failed = run_to(b, &spec("u"), JobState::Cancelled).await;
    // A result read at token 1, then the job retried and finished again at token 2: the ack of
    // token 1 is fenced and token 2's result stays pending.
    let fenced = run_to(b, &spec("u2"), JobState::Dead).await;
    b.retry(&fenced).await.unwrap();
    let again = b.lease("u2", &w, 1, Duration::ZERO).await.unwrap();
    b.finish(
        &fenced,
        again[0].fencing_token,
        &finish(JobState::Succeeded),
    )
    .await
    .unwrap();
    assert!(
        !b.ack_result(&fenced, 1).await.unwrap(),
        "the ack of token 1 is fenced"
    );
    let queued = b.enqueue(&spec("idle")).await.unwrap().job_id;
    let running = b.enqueue(&spec("busy")).await.unwrap().job_id;
    b.lease("busy", &w, 1, Duration::ZERO).await.unwrap();
    let mut fragile = spec("fragile");
    fragile.idempotent = false;
    fragile.heartbeat_ms = 10;
    fragile.stale_after_ms = 20;
    let stale = b.enqueue(&fragile).await.unwrap().job_id;
    b.lease("fragile", &w, 1, Duration::ZERO).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while b.get(&stale).await.unwrap().unwrap().state != JobState::Stale {
        skillforge_engine::reaper::reap_once(b).await.unwrap();
        assert!(
            Instant::now() < deadline,
            "the fragile job never went stale"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    let all = everything(b).await;
    let rules = [
        jobs_rule(RetainClass::Succeeded, all),
        jobs_rule(RetainClass::Failed, all),
    ];
    let report = prune_pass(b, &rules, 100).await.unwrap();
    assert_eq!(report.jobs, 2, "only the two applied terminal jobs");
    assert!(!exists(b, &applied).await && !exists(b, &applied_dead).await);
    for (what, id) in [
        ("pending succeeded", &pending),
        ("pending cancelled", &pending_failed),
        ("fenced ack", &fenced),
        ("retried after apply", &retried),
        ("queued", &queued),
        ("running", &running),
        ("stale", &stale),
    ] {
        assert!(exists(b, id).await, "{what} job {id} was pruned");
        assert!(
            b.tombstone(id).await.unwrap().is_none(),
            "{what}: no tombstone"
        );
    }
    // Once applied, the pending ones are prunable.
    ingest_all(b, &store).await;
    let report = prune_pass(b, &rules, 100).await.unwrap();
    assert_eq!(
        report.jobs, 3,
        "pending succeeded, pending cancelled, and the fenced job's token-2 result"
    );
    assert_eq!(
        b.tombstone(&fenced).await.unwrap().unwrap().state,
        JobState::Succeeded
    );
}

/// Pruning (everything prunable, in small batches, in a loop) races ingestion, retries of
/// applied failed jobs and workers running those retries: no result is lost. At the end every
/// job is pruned, and for each the store holds the applied result of its last attempt, with the
/// state its tombstone records.
pub(crate) async fn pruning_races_ingestion_and_retries_without_losing_a_result(
    b: &dyn QueueBackend,
) {
    const JOBS: usize = 120;
    let home = tempfile::tempdir().unwrap();
    let store = Store::open(home.path()).await.unwrap();
    let w = WorkerIdentity::new("race");
    let mut ids = Vec::new();
    for i in 0..JOBS {
        let next = if i % 2 == 0 {
            JobState::Failed
        } else {
            JobState::Succeeded
        };
        ids.push(run_to(b, &spec("race"), next).await);
    }
    let stop = AtomicBool::new(false);
    let far = b.now_ms().await.unwrap() + 3_600_000;
    let all = Bound {
        before_ms: Some(far),
        keep_newest: None,
    };
    let rules = [
        jobs_rule(RetainClass::Succeeded, all),
        jobs_rule(RetainClass::Failed, all),
    ];
    // Pruning starts once a few retries went through (so the race surely includes retried
    // jobs), then races the rest.
    let retries = AtomicUsize::new(0);
    let pruner = async {
        while !stop.load(Ordering::Relaxed) {
            if retries.load(Ordering::Relaxed) < 5 {
                tokio::task::yield_now().await;
                continue;
            }
            for rule in &rules {
                b.prune(rule, 7).await.unwrap();
            }
            tokio::task::yield_now().await;
        }
    };
    let ingestion = async {
        while !stop.load(Ordering::Relaxed) {
            ingest_once(b, &store, &Accept).await.unwrap();
            tokio::task::yield_now().await;
        }
    };
    // Retries each even (failed) job once its result was applied, and runs it again to succeeded.
    let retrier = async {
        let mut left: Vec<&String> = ids.iter().step_by(2).collect();
        let deadline = Instant::now() + Duration::from_secs(60);
        while !left.is_empty() {
            assert!(
                Instant::now() < deadline,
                "{} failed jobs never applied",
                left.len()
            );
            let mut still = Vec::new();
            for id in left {
                let job = b.get(id).await.unwrap();
                let applied = applied_for_job(store.pool(), id).await.unwrap();
                match job {
                    Some(j) if j.state == JobState::Failed && !applied.is_empty() => {
                        // Pruning may win the race to an applied failed job: then it is not retried.
                        if b.retry(id).await.is_ok() {
                            retries.fetch_add(1, Ordering::Relaxed);
                            let leased = b.lease("race", &w, 1, Duration::ZERO).await.unwrap();
                            let token = leased[0].fencing_token;
                            b.finish(&leased[0].job.id, token, &finish(JobState::Succeeded))
                                .await
                                .unwrap();
                        }
                    }
                    // Not applied yet.
                    Some(j) if j.state == JobState::Failed => still.push(id),
                    // Retried already, or pruned.
                    _ => {}
                }
            }
            left = still;
            tokio::task::yield_now().await;
        }
    };
    let driver = async {
        retrier.await;
        // Let the others settle: everything applied and pruned.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let mut gone = 0;
            for id in &ids {
                gone += usize::from(!exists(b, id).await);
            }
            if gone == JOBS {
                break;
            }
            assert!(Instant::now() < deadline, "only {gone}/{JOBS} jobs pruned");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        stop.store(true, Ordering::Relaxed);
    };
    tokio::join!(pruner, ingestion, driver);

    let mut retried = 0;
    for id in &ids {
        let t = b
            .tombstone(id)
            .await
            .unwrap()
            .expect("every job pruned with a tombstone");
        let applied = applied_for_job(store.pool(), id).await.unwrap();
        let last = applied
            .iter()
            .max_by_key(|a| a.fencing_token)
            .expect("its result was applied");
        assert_eq!(
            last.state,
            t.state.as_str(),
            "job {id}: the pruned state is the last applied one"
        );
        let tokens: HashMap<i64, usize> = applied.iter().fold(HashMap::new(), |mut m, a| {
            *m.entry(a.fencing_token).or_default() += 1;
            m
        });
        assert!(
            tokens.values().all(|&n| n == 1),
            "job {id}: each token applied once"
        );
        retried += usize::from(applied.len() == 2);
    }
    assert!(
        b.pending_results(10).await.unwrap().is_empty(),
        "nothing pending is left behind"
    );
    assert!(retried >= 5, "failed jobs were retried while pruning ran");
}

/// The idempotency window: a resubmit under the key of a finished job returns that job while it
/// is kept, and its id while its tombstone is kept (the job "was pruned"); once the tombstone
/// expires the key is free again.
pub(crate) async fn idempotency_key_outlives_its_job_by_the_retention(b: &dyn QueueBackend) {
    let home = tempfile::tempdir().unwrap();
    let store = Store::open(home.path()).await.unwrap();
    let mut keyed = spec("idem");
    keyed.idempotency_key = Some("nightly-2026-12-01".into());
    let id = run_to(b, &keyed, JobState::Succeeded).await;
    ingest_all(b, &store).await;
    let again = b.enqueue(&keyed).await.unwrap();
    assert_eq!(
        (again.job_id.as_str(), again.created),
        (id.as_str(), false),
        "inside the job's retention"
    );
    assert_eq!(
        b.get(&id).await.unwrap().unwrap().state,
        JobState::Succeeded
    );

    let all = everything(b).await;
    assert_eq!(
        prune_pass(b, &[jobs_rule(RetainClass::Succeeded, all)], 10)
            .await
            .unwrap()
            .jobs,
        1
    );
    let again = b.enqueue(&keyed).await.unwrap();
    assert_eq!(
        (again.job_id.as_str(), again.created),
        (id.as_str(), false),
        "the pruned job's id, nothing new"
    );
    assert!(b.get(&id).await.unwrap().is_none());
    let t = b.tombstone(&id).await.unwrap().expect("says it was pruned");
    assert_eq!(t.idempotency_key.as_deref(), Some("nightly-2026-12-01"));
    assert_eq!(
        b.list(None, 10).await.unwrap().len(),
        0,
        "no job was created by the resubmits"
    );

    // The tombstone's own retention ends: the key is free.
    let tombs = PruneRule {
        class: RetainClass::Succeeded,
        jobs: Bound::default(),
        tombstones: everything(b).await,
    };
    assert_eq!(prune_pass(b, &[tombs], 10).await.unwrap().tombstones, 1);
    assert!(b.tombstone(&id).await.unwrap().is_none());
    let fresh = b.enqueue(&keyed).await.unwrap();
    assert!(
        fresh.created && fresh.job_id != id,
        "after the window a new job"
    );
}
