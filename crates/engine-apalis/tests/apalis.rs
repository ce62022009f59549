//! apalis workers (`WorkerBuilder`, `Monitor`) consuming skillforge queues through
//! `SkillforgeBackend`, on a real SQLite file and a real `redis-server` (no mocks).

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apalis_core::backend::TaskSink;
use apalis_core::error::{BoxDynError, WorkerError};
use apalis_core::monitor::Monitor;
use apalis_core::task::data::Data;
use apalis_core::task::task_id::TaskId;
use apalis_core::worker::builder::WorkerBuilder;
use apalis_core::worker::context::WorkerContext;
use serde::{Deserialize, Serialize};
use skillforge_engine::redis::RedisBackend;
use skillforge_engine::sqlite::SqliteBackend;
use skillforge_engine::{CancelReply, Job, JobState, QueueBackend, ReapAction};
use skillforge_engine_apalis::{JobLease, SkillforgeBackend, SkillforgeOptions};
use skillforge_tests::RedisServer;
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinHandle;

/// Generous deadline for anything the tests wait for.
const DEADLINE: Duration = Duration::from_secs(60);

/// The task arguments of these tests.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Work {
    n: u32,
}

#[derive(Debug, Clone, Copy)]
enum Flavor {
    Sqlite,
    Redis,
}

/// A real queue: a SQLite file in a temp dir, or a fresh redis-server on a free loopback port.
struct RealQueue {
    backend: Arc<dyn QueueBackend>,
    _dir: tempfile::TempDir,
    _redis: Option<RedisServer>,
}

async fn real_queue(flavor: Flavor) -> RealQueue {
    let dir = tempfile::tempdir().expect("temp dir");
    match flavor {
        Flavor::Sqlite => {
            let backend = SqliteBackend::open(&dir.path().join("queue.db"))
                .await
                .expect("open sqlite queue");
            RealQueue {
                backend: Arc::new(backend),
                _dir: dir,
                _redis: None,
            }
        }
        Flavor::Redis => {
            let server = RedisServer::start();
            let backend = RedisBackend::connect(&server.url(), "skillforge")
                .await
                .expect("connect redis queue");
            RealQueue {
                backend: Arc::new(backend),
                _dir: dir,
                _redis: Some(server),
            }
        }
    }
}

/// Polls `check` every 20 ms until it returns `Some`, or panics with `what` after [`DEADLINE`].
async fn wait_until<T, F: Future<Output = Option<T>>>(
    what: &str,
    mut check: impl FnMut() -> F,
) -> T {
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {DEADLINE:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn job(queue: &dyn QueueBackend, id: &str) -> Job {
    queue
        .get(id)
        .await
        .expect("get job")
        .unwrap_or_else(|| panic!("job `{id}` exists"))
}

/// Waits until job `id` is in `state`.
async fn wait_state(queue: &dyn QueueBackend, id: &str, state: JobState) -> Job {
    wait_until(&format!("job {id} to be {state}"), || async {
        let j = job(queue, id).await;
        (j.state == state).then_some(j)
    })
    .await
}

/// An apalis worker running in its own task until [`Running::stop`].
struct Running {
    stop: oneshot::Sender<()>,
    join: JoinHandle<Result<(), WorkerError>>,
}

impl Running {
    async fn stop(self) {
        let _ = self.stop.send(());
        let ran = tokio::time::timeout(DEADLINE, self.join)
            .await
            .expect("apalis worker stops within the deadline");
        ran.expect("worker task did not panic")
            .expect("apalis worker ran without error");
    }
}

/// Builds an apalis worker named `$name` on `$backend` with data `$data` and handler `$handler`,
/// and runs it until stopped.
macro_rules! spawn_worker {
    ($name:expr, $backend:expr, $data:expr, $handler:expr) => {{
        let (stop, stopped) = oneshot::channel::<()>();
        let worker = WorkerBuilder::new($name)
            .backend($backend)
            .data($data)
            .build($handler);
        let join = tokio::spawn(worker.run_until(async move {
            let _ = stopped.await;
            Ok::<(), std::io::Error>(())
        }));
        Running { stop, join }
    }};
}

macro_rules! on_both_backends {
    ($($scenario:ident),* $(,)?) => {$(
        mod $scenario {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$scenario(super::Flavor::Sqlite).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn redis() {
                super::$scenario(super::Flavor::Redis).await;
            }
        }
    )*};
}

on_both_backends!(
    every_job_runs_exactly_once,
    failing_handler_uses_every_attempt_then_dies,
    heartbeat_keeps_a_long_handler_leased,
    late_result_of_a_superseded_lease_is_fenced,
    cancel_aborts_the_running_handler,
    panicking_handler_uses_its_attempt,
    timeout_stops_the_handler_and_uses_the_attempt,
    lost_lease_aborts_the_running_handler,
    close_hands_back_leased_jobs_not_started,
    task_dropped_by_the_monitor_is_handed_back,
);

type Seen = Arc<Mutex<HashMap<String, u32>>>;

async fn record_run(
    _work: Work,
    lease: JobLease,
    task_id: TaskId,
    seen: Data<Seen>,
) -> Result<(), BoxDynError> {
    assert_eq!(
        task_id.to_string(),
        format!("{}:{}", lease.job_id, lease.fencing_token),
        "apalis task id"
    );
    *seen
        .lock()
        .expect("seen lock")
        .entry(lease.job_id)
        .or_default() += 1;
    tokio::time::sleep(Duration::from_millis(5)).await;
    Ok(())
}

/// (1) N jobs pushed through apalis's `TaskSink`, consumed by two apalis workers under one
/// `Monitor`: each runs exactly once and ends `succeeded`.
async fn every_job_runs_exactly_once(flavor: Flavor) {
    const N_JOBS: usize = 40;
    let q = real_queue(flavor).await;
    let backend = SkillforgeBackend::<Work>::new(
        q.backend.clone(),
        SkillforgeOptions::new("apalis-once").concurrency(4),
    );
    let mut producer = backend.clone();
    producer
        .push_bulk((0..N_JOBS as u32).map(|n| Work { n }).collect())
        .await
        .expect("push tasks");

    let seen = Seen::default();
    let (stop, stopped) = oneshot::channel::<()>();
    let monitor = {
        let (b1, b2, s1, s2) = (backend.clone(), backend.clone(), seen.clone(), seen.clone());
        Monitor::new()
            .register(move |_| {
                WorkerBuilder::new("apalis-once-a")
                    .backend(b1.clone())
                    .data(s1.clone())
                    .build(record_run)
            })
            .register(move |_| {
                WorkerBuilder::new("apalis-once-b")
                    .backend(b2.clone())
                    .data(s2.clone())
                    .build(record_run)
            })
    };
    let monitor = tokio::spawn(monitor.run_with_signal(async move {
        let _ = stopped.await;
        Ok(())
    }));

    let done = wait_until(&format!("{N_JOBS} jobs to succeed"), || async {
        let done = q
            .backend
            .list(Some(JobState::Succeeded), 1_000)
            .await
            .expect("list");
        (done.len() == N_JOBS).then_some(done)
    })
    .await;
    let _ = stop.send(());
    tokio::time::timeout(DEADLINE, monitor)
        .await
        .expect("monitor stops within the deadline")
        .expect("monitor task did not panic")
        .expect("monitor ran without error");

    let seen = seen.lock().expect("seen lock").clone();
    assert_eq!(seen.len(), N_JOBS, "every job reached a handler: {seen:?}");
    for j in &done {
        assert_eq!(seen.get(&j.id), Some(&1), "job {} ran once", j.id);
        assert_eq!(
            j.attempts, 1,
            "job {} used one attempt: {:?}",
            j.id, j.history
        );
        assert_eq!(j.spec.kind, skillforge_engine_apalis::APALIS_KIND);
    }
    let report = backend.report();
    assert_eq!(
        (report.finished, report.fenced, report.undelivered),
        (N_JOBS as u64, 0, 0),
        "{report:?}"
    );
    assert!(
        q.backend
            .list(Some(JobState::Running), 10)
            .await
            .expect("list")
            .is_empty(),
        "no lease left running"
    );
}

async fn always_fail(_work: Work, calls: Data<Arc<AtomicU32>>) -> Result<(), BoxDynError> {
    calls.fetch_add(1, Ordering::SeqCst);
    Err("boom".into())
}

/// (2) A handler that fails runs exactly `max_attempts` times (engine backoff between them), then
/// the job is `dead`. No apalis retry layer is involved.
async fn failing_handler_uses_every_attempt_then_dies(flavor: Flavor) {
    let q = real_queue(flavor).await;
    let backend = SkillforgeBackend::<Work>::new(
        q.backend.clone(),
        SkillforgeOptions::new("apalis-fail").max_attempts(3),
    );
    let id = backend
        .enqueue(&Work { n: 1 })
        .await
        .expect("enqueue")
        .job_id;
    let calls = Arc::new(AtomicU32::new(0));
    let worker = spawn_worker!("apalis-fail", backend.clone(), calls.clone(), always_fail);

    let dead = wait_state(&*q.backend, &id, JobState::Dead).await;
    worker.stop().await;
    assert_eq!(
        calls.load(Ordering::SeqCst),
        3,
        "the handler ran once per attempt"
    );
    assert_eq!(dead.attempts, 3);
    assert_eq!(
        results(&dead),
        ["failed", "failed", "failed"],
        "{:?}",
        dead.history
    );
    assert!(
        dead.history[..2]
            .iter()
            .all(|a| a.retry_delay_ms.unwrap_or(0) > 0),
        "engine backoff: {:?}",
        dead.history
    );
    assert!(
        dead.outcome
            .expect("last outcome")
            .stderr_tail
            .contains("boom"),
        "handler error kept"
    );
}

async fn slow_success(_work: Work, calls: Data<Arc<AtomicU32>>) -> Result<(), BoxDynError> {
    calls.fetch_add(1, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    Ok(())
}

/// (3) A handler busy for over four times `stale_after` keeps its lease through the per-job
/// heartbeat, although the worker's own reaper runs every 250 ms: one attempt, no second run.
async fn heartbeat_keeps_a_long_handler_leased(flavor: Flavor) {
    let q = real_queue(flavor).await;
    let options = SkillforgeOptions::new("apalis-slow")
        .heartbeat(Duration::from_millis(100))
        .stale_after(Duration::from_millis(600));
    let backend = SkillforgeBackend::<Work>::new(q.backend.clone(), options);
    let id = backend
        .enqueue(&Work { n: 1 })
        .await
        .expect("enqueue")
        .job_id;
    let calls = Arc::new(AtomicU32::new(0));
    let worker = spawn_worker!("apalis-slow", backend.clone(), calls.clone(), slow_success);

    let done = wait_state(&*q.backend, &id, JobState::Succeeded).await;
    worker.stop().await;
    assert_eq!(calls.load(Ordering::SeqCst), 1, "no second run");
    assert_eq!(
        (done.attempts, done.fencing_token),
        (1, 1),
        "{:?}",
        done.history
    );
    assert_eq!(backend.report().fenced, 0);
}

/// What the first, stuck worker of scenario (4) shares with the test.
#[derive(Clone, Default)]
struct Gate {
    started: Arc<Notify>,
    open: Arc<Notify>,
}

/// Workers A and B of one name on `q` for the superseded-lease scenarios: concurrency 1, leases
/// stale after 300 ms while heartbeating every `heartbeat`, no reaper of their own (the test
/// reaps with [`reap`]); and the id of one job enqueued.
async fn rivals(
    q: &RealQueue,
    name: &str,
    heartbeat: Duration,
) -> (SkillforgeBackend<Work>, SkillforgeBackend<Work>, String) {
    let options = SkillforgeOptions::new(name)
        .heartbeat(heartbeat)
        .stale_after(Duration::from_millis(300))
        .concurrency(1)
        .reap_every(None);
    let a = SkillforgeBackend::<Work>::new(q.backend.clone(), options.clone());
    let b = SkillforgeBackend::<Work>::new(q.backend.clone(), options);
    let id = a.enqueue(&Work { n: 1 }).await.expect("enqueue").job_id;
    (a, b, id)
}

/// Runs the engine's reaper on `q` until it has recovered job `id`'s stale lease.
async fn reap(q: &RealQueue, id: &str) -> skillforge_engine::reaper::Reaped {
    wait_until("the stale lease to be reaped", || async {
        let reaped = skillforge_engine::reaper::reap_once(&*q.backend)
            .await
            .expect("reap");
        reaped.into_iter().find(|r| r.job_id == id)
    })
    .await
}

async fn stuck_then_fail(
    _work: Work,
    lease: JobLease,
    gate: Data<Gate>,
) -> Result<(), BoxDynError> {
    assert_eq!(
        lease.fencing_token, 1,
        "the stuck worker runs the first lease"
    );
    gate.started.notify_one();
    gate.open.notified().await;
    Err("late failure of a superseded lease".into())
}

async fn replacement(
    _work: Work,
    lease: JobLease,
    _calls: Data<Arc<AtomicU32>>,
) -> Result<(), BoxDynError> {
    assert!(
        lease.fencing_token >= 2,
        "the replacement runs under a newer lease"
    );
    Ok(())
}

/// (4) Worker A's lease goes stale while its handler is stuck (its heartbeat period is longer
/// than `stale_after`); the reaper re-queues the job, worker B re-leases and succeeds; then A's
/// handler returns a failure: its finish is fenced and the job stays B's `succeeded`.
async fn late_result_of_a_superseded_lease_is_fenced(flavor: Flavor) {
    let q = real_queue(flavor).await;
    let (a, b, id) = rivals(&q, "apalis-fence", Duration::from_secs(60)).await;

    let gate = Gate::default();
    let worker_a = spawn_worker!("apalis-fence-a", a.clone(), gate.clone(), stuck_then_fail);
    tokio::time::timeout(DEADLINE, gate.started.notified())
        .await
        .expect("worker A's handler starts");

    let reaped = reap(&q, &id).await;
    assert_eq!(
        (reaped.fencing_token, reaped.action),
        (
            1,
            ReapAction::Requeue {
                delay: Duration::ZERO
            }
        )
    );

    let worker_b = spawn_worker!(
        "apalis-fence-b",
        b.clone(),
        Arc::new(AtomicU32::new(0)),
        replacement
    );
    let done = wait_state(&*q.backend, &id, JobState::Succeeded).await;
    assert_eq!(done.fencing_token, 2);

    gate.open.notify_one();
    wait_until("A's late result to be fenced", || async {
        (a.report().fenced == 1).then_some(())
    })
    .await;
    worker_a.stop().await;
    worker_b.stop().await;

    let last = job(&*q.backend, &id).await;
    assert_eq!(
        (last.state, last.fencing_token, last.attempts),
        (JobState::Succeeded, 2, 2),
        "{:?}",
        last.history
    );
    assert_eq!(results(&last), ["stale", "passed"], "{:?}", last.history);
    assert_eq!((a.report().finished, b.report().finished), (0, 1));
}

/// What the handler of scenario (5) tells the test.
#[derive(Clone, Default)]
struct Probe {
    started: Arc<Notify>,
    dropped: Arc<AtomicBool>,
    completed: Arc<AtomicBool>,
}

struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

async fn run_until_aborted(_work: Work, probe: Data<Probe>) -> Result<(), BoxDynError> {
    let _dropped = SetOnDrop(probe.dropped.clone());
    probe.started.notify_one();
    tokio::time::sleep(DEADLINE * 2).await;
    probe.completed.store(true, Ordering::SeqCst);
    Ok(())
}

/// (5) `cancel` of a running job reaches the worker at its next heartbeat; the adapter drops the
/// handler's future (it never completes) and the job ends `cancelled`.
async fn cancel_aborts_the_running_handler(flavor: Flavor) {
    let q = real_queue(flavor).await;
    let options = SkillforgeOptions::new("apalis-cancel").heartbeat(Duration::from_millis(100));
    let backend = SkillforgeBackend::<Work>::new(q.backend.clone(), options);
    let id = backend
        .enqueue(&Work { n: 1 })
        .await
        .expect("enqueue")
        .job_id;
    let probe = Probe::default();
    let worker = spawn_worker!(
        "apalis-cancel",
        backend.clone(),
        probe.clone(),
        run_until_aborted
    );
    tokio::time::timeout(DEADLINE, probe.started.notified())
        .await
        .expect("handler starts");

    assert_eq!(
        q.backend.cancel(&id).await.expect("cancel"),
        CancelReply::Requested
    );
    let cancelled = wait_state(&*q.backend, &id, JobState::Cancelled).await;
    wait_until("the handler's future to be dropped", || async {
        probe.dropped.load(Ordering::SeqCst).then_some(())
    })
    .await;
    worker.stop().await;
    assert!(
        !probe.completed.load(Ordering::SeqCst),
        "the handler was aborted, not run to completion"
    );
    assert_eq!(cancelled.attempts, 1);
    assert_eq!(
        cancelled.history.last().and_then(|a| a.result.as_deref()),
        Some("cancelled")
    );
    assert_eq!(backend.report().finished, 1);
}

async fn panic_then_count(work: Work, calls: Data<Arc<AtomicU32>>) -> Result<(), BoxDynError> {
    calls.fetch_add(1, Ordering::SeqCst);
    if work.n == 0 {
        panic!("handler bug");
    }
    Ok(())
}

/// (6) A panicking handler uses its attempt (here the only one: the job is `dead`) instead of
/// taking the worker down or being handed back forever; the worker goes on with the next job.
async fn panicking_handler_uses_its_attempt(flavor: Flavor) {
    let q = real_queue(flavor).await;
    let backend = SkillforgeBackend::<Work>::new(
        q.backend.clone(),
        SkillforgeOptions::new("apalis-panic").max_attempts(1),
    );
    let bad = backend
        .enqueue(&Work { n: 0 })
        .await
        .expect("enqueue")
        .job_id;
    let good = backend
        .enqueue(&Work { n: 1 })
        .await
        .expect("enqueue")
        .job_id;
    let calls = Arc::new(AtomicU32::new(0));
    let worker = spawn_worker!(
        "apalis-panic",
        backend.clone(),
        calls.clone(),
        panic_then_count
    );

    let dead = wait_state(&*q.backend, &bad, JobState::Dead).await;
    wait_state(&*q.backend, &good, JobState::Succeeded).await;
    worker.stop().await;
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert!(
        dead.outcome
            .expect("outcome")
            .stderr_tail
            .contains("handler bug"),
        "panic message kept"
    );
}

/// apalis's `TaskSink::push_task`: the task's idempotency key, `max_attempts` and `run_at` reach
/// the job spec (a second push with the same key is the same job); the rest is the template's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pushed_task_context_shapes_the_job() {
    use apalis_core::task::builder::TaskBuilder;
    let q = real_queue(Flavor::Sqlite).await;
    let mut backend =
        SkillforgeBackend::<Work>::new(q.backend.clone(), SkillforgeOptions::new("apalis-push"));
    for _ in 0..2 {
        let task = TaskBuilder::new(Work { n: 7 })
            .idempotency_key("push-once")
            .max_attempts(7)
            .run_after(Duration::from_secs(3_600));
        backend.push_task(task.build()).await.expect("push task");
    }
    let jobs = q.backend.list(None, 10).await.expect("list");
    assert_eq!(jobs.len(), 1, "one job per idempotency key: {jobs:?}");
    let spec = &jobs[0].spec;
    assert_eq!(
        (
            spec.queue.as_str(),
            spec.max_attempts,
            spec.idempotency_key.as_deref()
        ),
        ("apalis-push", 7, Some("push-once"))
    );
    assert_eq!(spec.payload, serde_json::json!({ "n": 7 }));
    let not_before = spec.not_before_ms.expect("not_before set from run_at");
    assert!(
        not_before > skillforge_engine::now_ms() + 3_500_000,
        "delayed by about an hour: {not_before}"
    );
}

/// (7) The spec's `timeout_ms` bounds the handler: its future is dropped and the attempt counts
/// as timed out (here the only attempt: the job is `dead`).
async fn timeout_stops_the_handler_and_uses_the_attempt(flavor: Flavor) {
    let q = real_queue(flavor).await;
    let options = SkillforgeOptions::new("apalis-timeout")
        .timeout(Duration::from_millis(200))
        .max_attempts(1);
    let backend = SkillforgeBackend::<Work>::new(q.backend.clone(), options);
    let id = backend
        .enqueue(&Work { n: 1 })
        .await
        .expect("enqueue")
        .job_id;
    let probe = Probe::default();
    let worker = spawn_worker!(
        "apalis-timeout",
        backend.clone(),
        probe.clone(),
        run_until_aborted
    );

    let dead = wait_state(&*q.backend, &id, JobState::Dead).await;
    worker.stop().await;
    assert!(
        probe.dropped.load(Ordering::SeqCst) && !probe.completed.load(Ordering::SeqCst),
        "handler stopped"
    );
    assert_eq!(
        dead.history.last().and_then(|a| a.result.as_deref()),
        Some("timed_out"),
        "{:?}",
        dead.history
    );
}

/// The results of every attempt of `job`, oldest first.
fn results(job: &Job) -> Vec<String> {
    job.history
        .iter()
        .map(|a| a.result.clone().unwrap_or_default())
        .collect()
}

async fn replacement_held(
    _work: Work,
    lease: JobLease,
    gate: Data<Gate>,
) -> Result<(), BoxDynError> {
    assert!(
        lease.fencing_token >= 2,
        "the replacement runs under a newer lease"
    );
    gate.started.notify_one();
    gate.open.notified().await;
    Ok(())
}

/// (8) Worker A's handler is running (blocked until aborted) when its lease is superseded: the
/// lease goes stale between two heartbeats (`stale_after` shorter than the heartbeat period), the
/// test reaps it and worker B, idle on the queue, re-leases the job under token 2. At A's next
/// heartbeat (`LeaseLost`) the adapter drops A's handler future; A's aborted result is fenced,
/// never applied, and the job ends as B's attempt makes it.
async fn lost_lease_aborts_the_running_handler(flavor: Flavor) {
    let q = real_queue(flavor).await;
    let (a, b, id) = rivals(&q, "apalis-lost", Duration::from_secs(2)).await;

    let probe = Probe::default();
    let worker_a = spawn_worker!("apalis-lost-a", a.clone(), probe.clone(), run_until_aborted);
    tokio::time::timeout(DEADLINE, probe.started.notified())
        .await
        .expect("worker A's handler starts");
    assert_eq!(
        job(&*q.backend, &id).await.fencing_token,
        1,
        "A runs the first lease"
    );

    // B waits on the queue first, so it (not A, whose only slot is busy) takes the requeued job.
    let gate = Gate::default();
    let worker_b = spawn_worker!("apalis-lost-b", b.clone(), gate.clone(), replacement_held);
    let reaped = reap(&q, &id).await;
    assert_eq!(reaped.fencing_token, 1, "A's lease was the one reaped");
    tokio::time::timeout(DEADLINE, gate.started.notified())
        .await
        .expect("worker B re-leases the job and starts");

    wait_until(
        "A's handler future to be dropped at its next heartbeat",
        || async { probe.dropped.load(Ordering::SeqCst).then_some(()) },
    )
    .await;
    assert!(
        !probe.completed.load(Ordering::SeqCst),
        "A's handler was aborted, not run to completion"
    );
    wait_until("A's aborted result to be fenced", || async {
        (a.report().fenced == 1).then_some(())
    })
    .await;
    let running = job(&*q.backend, &id).await;
    let holder = running
        .lease
        .as_ref()
        .map(|l| l.owner_worker.clone())
        .unwrap_or_default();
    assert!(
        running.state == JobState::Running
            && running.fencing_token == 2
            && holder.starts_with("apalis-lost-b-"),
        "A's abort changed nothing: B still holds the job ({:?}, token {}, holder `{holder}`): {:?}",
        running.state,
        running.fencing_token,
        running.history
    );

    gate.open.notify_one();
    let done = wait_state(&*q.backend, &id, JobState::Succeeded).await;
    worker_a.stop().await;
    worker_b.stop().await;
    assert_eq!(
        (done.fencing_token, done.attempts),
        (2, 2),
        "{:?}",
        done.history
    );
    assert_eq!(results(&done), ["stale", "passed"], "{:?}", done.history);
    assert_eq!(
        (a.report().finished, a.report().fenced, b.report().finished),
        (0, 1, 1)
    );
}

/// Records the run, then holds apalis's only concurrency slot until the worker shuts down.
async fn run_until_shutdown(
    _work: Work,
    lease: JobLease,
    worker: WorkerContext,
    seen: Data<Seen>,
) -> Result<(), BoxDynError> {
    *seen
        .lock()
        .expect("seen lock")
        .entry(lease.job_id)
        .or_default() += 1;
    wait_until("the worker to be told to stop", || async {
        worker.is_shutting_down().then_some(())
    })
    .await;
    Ok(())
}

/// (9) Worker A leases 4 jobs (adapter `concurrency` 4) but apalis runs one at a time (tower's
/// `ConcurrencyLimitLayer`, what apalis's `concurrency(1)` adds), and that one runs until A is
/// told to stop. On close the 3 leased-but-unstarted jobs are handed back: `queued`, attempt
/// refunded (0), no lease, at once (no waiting for `stale_after`). Worker B then runs each
/// exactly once.
async fn close_hands_back_leased_jobs_not_started(flavor: Flavor) {
    const N_JOBS: usize = 4;
    let q = real_queue(flavor).await;
    let options = SkillforgeOptions::new("apalis-close")
        .concurrency(N_JOBS)
        .stale_after(Duration::from_secs(600));
    let a = SkillforgeBackend::<Work>::new(q.backend.clone(), options);
    let mut ids = Vec::new();
    for n in 0..N_JOBS as u32 {
        ids.push(a.enqueue(&Work { n }).await.expect("enqueue").job_id);
    }

    let seen_a = Seen::default();
    let worker_a = {
        let (stop, stopped) = oneshot::channel::<()>();
        let worker = WorkerBuilder::new("apalis-close-a")
            .backend(a.clone())
            .layer(tower::limit::ConcurrencyLimitLayer::new(1))
            .data(seen_a.clone())
            .build(run_until_shutdown);
        let join = tokio::spawn(worker.run_until(async move {
            let _ = stopped.await;
            Ok::<(), std::io::Error>(())
        }));
        Running { stop, join }
    };
    wait_until(
        &format!("worker A to lease all {N_JOBS} jobs and start one"),
        || async {
            let running = q
                .backend
                .list(Some(JobState::Running), 100)
                .await
                .expect("list");
            (running.len() == N_JOBS && seen_a.lock().expect("seen lock").len() == 1).then_some(())
        },
    )
    .await;
    worker_a.stop().await;

    let seen_a = seen_a.lock().expect("seen lock").clone();
    let (ran, _) = seen_a.iter().next().expect("A ran one job");
    assert_eq!(
        job(&*q.backend, ran).await.state,
        JobState::Succeeded,
        "A's running job finished normally"
    );
    let handed_back: Vec<String> = ids.iter().filter(|id| *id != ran).cloned().collect();
    for id in &handed_back {
        let j = job(&*q.backend, id).await;
        assert_eq!(
            (j.state, j.attempts, j.lease.is_some()),
            (JobState::Queued, 0, false),
            "job {id} handed back on close with its attempt refunded: {:?}",
            j.history
        );
        assert_eq!(results(&j), ["released"], "job {id}: {:?}", j.history);
    }
    assert_eq!(
        (a.report().released, a.report().finished),
        (handed_back.len() as u64, 1),
        "{:?}",
        a.report()
    );

    let b =
        SkillforgeBackend::<Work>::new(q.backend.clone(), SkillforgeOptions::new("apalis-close"));
    let seen_b = Seen::default();
    let worker_b = spawn_worker!("apalis-close-b", b.clone(), seen_b.clone(), record_run);
    for id in &handed_back {
        let done = wait_state(&*q.backend, id, JobState::Succeeded).await;
        assert_eq!(
            done.attempts, 1,
            "job {id}: the hand-back did not use an attempt: {:?}",
            done.history
        );
        assert_eq!(
            results(&done),
            ["released", "passed"],
            "job {id}: {:?}",
            done.history
        );
    }
    worker_b.stop().await;
    let seen_b = seen_b.lock().expect("seen lock").clone();
    for id in &handed_back {
        assert_eq!(
            seen_b.get(id),
            Some(&1),
            "B ran job {id} exactly once: {seen_b:?}"
        );
    }
    assert!(
        !seen_b.contains_key(ran),
        "A's finished job did not run again: {seen_b:?}"
    );
}

/// (10) A `Monitor` whose shutdown grace (`with_terminator`, what `shutdown_timeout` installs)
/// expires while a handler still runs drops the worker, and with it the handler's future. The
/// adapter hands that job back at once: `queued`, attempt refunded, no lease — although its lease
/// would only go stale after 10 minutes. Another worker then runs it once.
async fn task_dropped_by_the_monitor_is_handed_back(flavor: Flavor) {
    let q = real_queue(flavor).await;
    // Concurrency 1: with its only slot busy the worker has no lease call outstanding when it
    // is dropped (such a call outlives the worker for up to `poll_wait`, and could lease the
    // handed-back job once more before handing it back again).
    let options = SkillforgeOptions::new("apalis-drop")
        .heartbeat(Duration::from_millis(100))
        .stale_after(Duration::from_secs(600))
        .concurrency(1);
    let a = SkillforgeBackend::<Work>::new(q.backend.clone(), options);
    let id = a.enqueue(&Work { n: 1 }).await.expect("enqueue").job_id;

    let probe = Probe::default();
    let (stop, stopped) = oneshot::channel::<()>();
    let monitor = {
        let (a, probe) = (a.clone(), probe.clone());
        Monitor::new()
            .register(move |_| {
                WorkerBuilder::new("apalis-drop-a")
                    .backend(a.clone())
                    .data(probe.clone())
                    .build(run_until_aborted)
            })
            // The grace period starts when the signal has fired (the async block is first polled then).
            .with_terminator(async { tokio::time::sleep(Duration::from_millis(300)).await })
    };
    let monitor = tokio::spawn(monitor.run_with_signal(async move {
        let _ = stopped.await;
        Ok(())
    }));
    tokio::time::timeout(DEADLINE, probe.started.notified())
        .await
        .expect("the handler starts");
    assert_eq!(job(&*q.backend, &id).await.state, JobState::Running);

    let _ = stop.send(());
    tokio::time::timeout(DEADLINE, monitor)
        .await
        .expect("monitor stops within the deadline")
        .expect("monitor task did not panic")
        .expect("monitor ran without error");
    assert!(
        probe.dropped.load(Ordering::SeqCst),
        "the monitor dropped the running handler's future"
    );
    assert!(
        !probe.completed.load(Ordering::SeqCst),
        "the handler did not run to completion"
    );

    // `settle` returns once the hand-back reached the queue: no polling needed after it (a
    // process may exit right here).
    tokio::time::timeout(DEADLINE, a.settle())
        .await
        .expect("hand-backs settle");
    let back = job(&*q.backend, &id).await;
    assert_eq!(
        back.state,
        JobState::Queued,
        "handed back by the time settle returns: {:?}",
        back.history
    );
    assert_eq!(
        (back.attempts, back.lease.is_some()),
        (0, false),
        "attempt refunded, lease cleared: {:?}",
        back.history
    );
    assert_eq!(results(&back), ["released"], "{:?}", back.history);
    assert_eq!((a.report().released, a.report().finished), (1, 0));

    let b =
        SkillforgeBackend::<Work>::new(q.backend.clone(), SkillforgeOptions::new("apalis-drop"));
    let seen = Seen::default();
    let worker_b = spawn_worker!("apalis-drop-b", b.clone(), seen.clone(), record_run);
    let done = wait_state(&*q.backend, &id, JobState::Succeeded).await;
    worker_b.stop().await;
    assert_eq!(
        seen.lock().expect("seen lock").get(&id),
        Some(&1),
        "B ran it once"
    );
    assert_eq!(
        (done.attempts, results(&done)),
        (1, vec!["released".to_owned(), "passed".to_owned()]),
        "{:?}",
        done.history
    );
}
