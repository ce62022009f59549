//! The placement deadline (issue 35 item 6) on both backends: `fail_queued` fails only a queued
//! job, as a pending result under a new token when it ran before, and the deadline pass fails
//! a job on a route no live worker may take once its watch has seen it so for the deadline, never
//! one a live worker's labels satisfy.

use std::time::Duration;

use skillforge_engine::ingest::{RecordOnly, ingest_once};
use skillforge_engine::labels::labels_key;
use skillforge_engine::placement::{PlacementWatch, fail_unplaceable};
use skillforge_engine::worker::{PRESENCE_HEARTBEAT, PRESENCE_LOCK_PREFIX, PRESENCE_STALE_AFTER};
use skillforge_engine::{JobState, LockAcquire, QueueBackend, WorkerIdentity};
use skillforge_runner::{ExitClass, RunOutcome};
use skillforge_store::Store;
use skillforge_store::applied::applied_for_job;

use super::{finish, spec};

fn unplaceable(reason: &str) -> RunOutcome {
    RunOutcome {
        exit: ExitClass::NotRunnable {
            reason: reason.to_owned(),
        },
        exit_code: None,
        duration_ms: 0,
        stdout_tail: String::new(),
        stderr_tail: String::new(),
        detail: serde_json::Value::Null,
    }
}

/// `fail_queued` fails a queued job (due or delayed) with its outcome, as a pending result that
/// ingestion applies once; it leaves a running job alone and says so; a job that ran before
/// fails under a new token (its earlier result stays applied under the old one); a failed job
/// is never leased from its route afterwards.
pub(crate) async fn fail_queued_fails_only_queued_jobs_as_a_new_result(b: &dyn QueueBackend) {
    let home = tempfile::tempdir().unwrap();
    let store = Store::open(home.path()).await.unwrap();
    let w = WorkerIdentity::new("placement");
    let route = "q@host=db9";
    let due = b.enqueue(&spec(route)).await.unwrap().job_id;
    let mut later = spec(route);
    later.not_before_ms = Some(skillforge_engine::now_ms() + 3_600_000);
    let delayed = b.enqueue(&later).await.unwrap().job_id;
    let other = b.enqueue(&spec("q@gpu")).await.unwrap().job_id;

    let on_route: Vec<String> = b
        .queued_on(route, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(
        on_route,
        vec![due.clone(), delayed.clone()],
        "the route's jobs, due first, the delayed one too"
    );

    assert!(b.fail_queued(&due, &unplaceable("no db9")).await.unwrap());
    assert!(
        b.fail_queued(&delayed, &unplaceable("no db9"))
            .await
            .unwrap()
    );
    assert!(
        !b.fail_queued(&due, &unplaceable("again")).await.unwrap(),
        "no longer queued"
    );
    let job = b.get(&due).await.unwrap().unwrap();
    assert_eq!(
        (job.state, job.attempts, job.fencing_token),
        (JobState::Failed, 0, 0)
    );
    assert_eq!(
        job.outcome.map(|o| o.exit),
        Some(ExitClass::NotRunnable {
            reason: "no db9".into()
        })
    );
    assert!(b.queued_on(route, 10).await.unwrap().is_empty());
    assert!(
        b.lease(route, &w, 10, Duration::ZERO)
            .await
            .unwrap()
            .is_empty(),
        "a failed job is never leased"
    );
    assert_eq!(
        ingest_once(b, &store, &RecordOnly).await.unwrap().applied,
        2,
        "both failures are results"
    );
    assert_eq!(
        b.get(&other).await.unwrap().unwrap().state,
        JobState::Queued,
        "another route's job is untouched"
    );

    // A running job is left alone.
    let leased = b.lease("q@gpu", &w, 1, Duration::ZERO).await.unwrap();
    assert!(!b.fail_queued(&other, &unplaceable("x")).await.unwrap());
    assert_eq!(
        b.get(&other).await.unwrap().unwrap().state,
        JobState::Running
    );

    // One that ran (dead, applied under token 1) and was retried fails under token 2.
    b.finish(&other, leased[0].fencing_token, &finish(JobState::Dead))
        .await
        .unwrap();
    assert_eq!(
        ingest_once(b, &store, &RecordOnly).await.unwrap().applied,
        1
    );
    b.retry(&other).await.unwrap();
    assert!(b.fail_queued(&other, &unplaceable("no gpu")).await.unwrap());
    let job = b.get(&other).await.unwrap().unwrap();
    assert_eq!((job.state, job.fencing_token), (JobState::Failed, 2));
    let history: Vec<u64> = job.history.iter().map(|a| a.fencing_token).collect();
    assert_eq!(
        history,
        vec![1],
        "its one attempt, once, under the token it ran with"
    );
    assert_eq!(
        ingest_once(b, &store, &RecordOnly).await.unwrap().applied,
        1,
        "applied, not deduplicated"
    );
    let applied: Vec<(i64, String)> = applied_for_job(store.pool(), &other)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.fencing_token, r.state))
        .collect();
    assert_eq!(
        applied,
        vec![(1, "dead".to_owned()), (2, "failed".to_owned())]
    );
    assert!(
        b.fail_queued("no-such-job", &unplaceable("x"))
            .await
            .is_err()
    );
}

/// Makes worker `id` live with `labels`: its presence lock and its labels record.
async fn live_worker(b: &dyn QueueBackend, id: &str, labels: &[&str]) {
    let identity = WorkerIdentity::new(id);
    let taken = b
        .acquire_lock(
            &format!("{PRESENCE_LOCK_PREFIX}{id}"),
            &identity,
            PRESENCE_HEARTBEAT,
            PRESENCE_STALE_AFTER,
        )
        .await
        .unwrap();
    assert!(matches!(taken, LockAcquire::Acquired { .. }));
    let area = b.transfer_area().expect("a transfer area");
    area.put_record(&labels_key(id), &serde_json::to_vec(labels).unwrap())
        .await
        .unwrap();
}

/// The deadline pass: a job on a route no live worker may take is failed once the watch has
/// seen it so for the deadline (not before, and counted from the first pass that saw it), with
/// a reason naming the missing label and the live workers; a job whose labels a live worker
/// offers is never failed, however long it waits.
pub(crate) async fn the_deadline_fails_only_jobs_no_live_worker_can_take(b: &dyn QueueBackend) {
    let after = Duration::from_secs(600);
    live_worker(b, "w-linux", &["os=linux", "gpu"]).await;
    let db9 = routed(&["host=db9"]);
    let nowhere = b.enqueue(&db9).await.unwrap().job_id;
    let placeable = b.enqueue(&routed(&["gpu"])).await.unwrap().job_id;

    let mut watch = PlacementWatch::default();
    let t0 = tokio::time::Instant::now();
    assert!(
        fail_unplaceable(b, &mut watch, after, t0)
            .await
            .unwrap()
            .is_empty(),
        "first seen now"
    );
    let almost = t0 + after - Duration::from_secs(1);
    assert!(
        fail_unplaceable(b, &mut watch, after, almost)
            .await
            .unwrap()
            .is_empty(),
        "not yet"
    );
    let failed = fail_unplaceable(b, &mut watch, after, t0 + after)
        .await
        .unwrap();
    assert_eq!(
        failed.iter().map(|f| f.job_id.as_str()).collect::<Vec<_>>(),
        vec![nowhere.as_str()]
    );
    let reason = &failed[0].reason;
    assert!(
        reason.contains("label(s) host=db9") && reason.contains("w-linux [os=linux, gpu]"),
        "{reason}"
    );
    let job = b.get(&nowhere).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Failed);
    assert_eq!(
        b.get(&placeable).await.unwrap().unwrap().state,
        JobState::Queued,
        "a live worker offers gpu"
    );

    // A job first seen later gets the whole deadline from then, whatever the watch saw before.
    let late = b.enqueue(&db9_with_key(&db9, "late")).await.unwrap().job_id;
    let t1 = t0 + after * 2;
    assert!(
        fail_unplaceable(b, &mut watch, after, t1)
            .await
            .unwrap()
            .is_empty()
    );
    // A worker that offers host=db9 appears: the count is reset, nothing fails.
    live_worker(b, "w-db9", &["host=db9"]).await;
    assert!(
        fail_unplaceable(b, &mut watch, after, t1 + after * 2)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(watch.unplaceable_for(&late, t1 + after * 2), Duration::ZERO);
    assert_eq!(b.get(&late).await.unwrap().unwrap().state, JobState::Queued);
}

/// A job on queue `q` requiring `requires`, routed as `StageDef::job` and `jobs submit` route it.
fn routed(requires: &[&str]) -> skillforge_engine::JobSpec {
    let requires: Vec<String> = requires.iter().map(|r| (*r).to_owned()).collect();
    let mut s = spec(&skillforge_engine::labels::route("q", &requires));
    s.requires = requires;
    s
}

fn db9_with_key(db9: &skillforge_engine::JobSpec, key: &str) -> skillforge_engine::JobSpec {
    let mut s = db9.clone();
    s.idempotency_key = Some(key.to_owned());
    s
}
