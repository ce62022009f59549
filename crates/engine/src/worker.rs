//! The worker loop: leases jobs, runs them through runners while heartbeating each lease, sends back fenced results.
//!
//! * `job_task.rs`: one leased job from its lease to its fenced finish (locks, runner, hand-back).
//! * `heartbeat.rs`: the lease heartbeat loop and its [`LeaseSignals`].
//! * `presence.rs`: the presence lock `worker:<id>` ([`hold_presence`]).
//! * `scratch.rs`: each attempt's scratch dir, removed after its run.

mod heartbeat;
mod job_task;
mod presence;
mod scratch;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::backend::QueueBackend;
use crate::health::WorkerHealth;
use crate::job::{JobState, LeasedJob, WorkerIdentity};
use crate::labels::labels_key;
use crate::reaper::{DEFAULT_REAP_EVERY, run_reaper};
use crate::registry::RunnerRegistry;

pub use heartbeat::{LeaseSignals, heartbeat_loop};
use job_task::JobTask;
pub use presence::{
    PRESENCE_HEARTBEAT, PRESENCE_LOCK_PREFIX, PRESENCE_STALE_AFTER, hold_presence, refresh_labels,
};

/// Default grace period on shutdown before running jobs are killed and handed back.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(10);
/// Least time the shutdown gives killing running jobs and handing their leases back (and,
/// then, releasing the presence lock and stopping the reaper), whatever the grace: the process
/// runner's own SIGTERM → SIGKILL grace (2 s by default) plus a round trip to the queue.
pub const MIN_HAND_BACK: Duration = Duration::from_secs(5);

/// How a worker runs (a `Config` struct rather than boolean parameters).
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Operator-chosen name; the identity adds a random suffix.
    pub name: String,
    /// Queue names to lease from, in order of preference.
    pub queues: Vec<String>,
    /// Jobs run at once.
    pub concurrency: usize,
    /// On shutdown, how long running jobs may go on before they are killed and handed back.
    pub grace: Duration,
    /// Reaper period; `None` runs no reaper in this worker.
    pub reap_every: Option<Duration>,
    /// Retention the reaper loop prunes finished jobs under (every
    /// [`DEFAULT_PRUNE_EVERY`](crate::retention::DEFAULT_PRUNE_EVERY), only with a reaper);
    /// `None` (the default of [`WorkerConfig::new`]) prunes nothing: a caller passes the
    /// configured retention (`[queue] keep_succeeded` / `keep_failed`).
    pub retention: Option<crate::retention::Retention>,
    /// Parent of each attempt's scratch dir.
    pub scratch_root: PathBuf,
    /// Longest a single lease call waits for work before the loop re-checks (a shutdown ends
    /// the wait at once: `QueueCore::lease_or_stop`).
    pub poll_wait: Duration,
    /// Where undelivered results and failing lease calls are also reported, for a process that
    /// runs this worker for its own jobs ([`WorkerHealth`]); `None` only logs them.
    pub health: Option<Arc<WorkerHealth>>,
    /// Labels this worker advertises ([`crate::labels`]): it also leases the routes of its
    /// queues whose requirements they satisfy. Empty = only jobs that require nothing.
    pub labels: Vec<String>,
    /// How long after the start the presence lock is first taken and the reaper's and pruner's
    /// first passes run (then every period as usual). Zero (the default) starts them at once.
    /// A one-shot worker that a waiting command starts for its own job (`verify`, `jobs submit
    /// --wait`) sets its reap period here: a job done sooner leases, runs and finishes without
    /// those writes queued before its lease on the process's one write connection, while a
    /// longer wait still gets its presence and its recovery of stale jobs within that period.
    /// During that period no other process relies on the worker (it shows no presence), so its
    /// idle leases wait only for this process's changes ([`QueueChanges::changed_here_since`],
    /// re-checking every [`QUIET_RECHECK`]): the embedded queue's `data_version` poll does not
    /// run for them.
    ///
    /// [`QueueChanges::changed_here_since`]: crate::backend::QueueChanges::changed_here_since
    pub housekeeping_after: Duration,
}

impl WorkerConfig {
    /// Defaults: queue `default`, concurrency 4, grace 10 s, reaper every 0.5 s.
    pub fn new(name: impl Into<String>, scratch_root: PathBuf) -> Self {
        Self {
            name: name.into(),
            queues: vec![crate::job::DEFAULT_QUEUE.to_owned()],
            concurrency: 4,
            grace: DEFAULT_GRACE,
            reap_every: Some(DEFAULT_REAP_EVERY),
            retention: None,
            scratch_root,
            poll_wait: Duration::from_millis(500),
            health: None,
            labels: Vec::new(),
            housekeeping_after: Duration::ZERO,
        }
    }
}

/// Runs `task` once `delay` has passed (at once for zero), or nothing when `stop` fires first.
async fn after_delay(
    delay: Duration,
    stop: CancellationToken,
    task: impl std::future::Future<Output = ()>,
) {
    if !delay.is_zero() {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(delay) => {}
        }
    }
    task.await;
}

/// Counts a worker reports when it stops.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct WorkerReport {
    /// Attempts whose result was applied.
    pub finished: u64,
    /// Attempts whose result was rejected by fencing (the lease had been superseded).
    pub fenced: u64,
    /// Attempts handed back on shutdown.
    pub released: u64,
    /// Leases this worker still held when it stopped, as (job id, fencing token), oldest job id
    /// first: their hand-back (or result) could not be delivered, typically because the queue
    /// was unreachable, so they go stale after their `stale_after` and the reaper recovers them.
    /// Empty after a clean shutdown.
    pub left_stale: Vec<(String, u64)>,
}

#[derive(Default)]
struct Counters {
    /// The embedding process's view of this worker (`worker --metrics`), when it has one.
    health: Option<Arc<WorkerHealth>>,
    finished: AtomicU64,
    fenced: AtomicU64,
    released: AtomicU64,
    /// Leases taken and not yet resolved (finished, fenced or handed back): job id → token.
    held: Mutex<BTreeMap<String, u64>>,
}

impl Counters {
    fn hold(&self, job_id: &str, token: u64) {
        self.held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(job_id.to_owned(), token);
        if let Some(h) = &self.health {
            h.leased();
        }
    }

    /// The lease of `job_id` under `token` is resolved: the queue answered for it.
    fn resolved(&self, job_id: &str, token: u64) {
        let mut held = self
            .held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if held.get(job_id) == Some(&token) {
            held.remove(job_id);
            if let Some(h) = &self.health {
                h.lease_resolved();
            }
        }
    }

    fn unresolved(&self) -> Vec<(String, u64)> {
        let held = self
            .held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        held.iter().map(|(id, t)| (id.clone(), *t)).collect()
    }
}

/// A worker process's job loop.
pub struct Worker {
    identity: WorkerIdentity,
    config: WorkerConfig,
    backend: Arc<dyn QueueBackend>,
    registry: RunnerRegistry,
    /// Routes this worker may lease, and when they were last read.
    routes: Mutex<(Option<tokio::time::Instant>, Vec<String>)>,
}

/// How often an idle worker re-checks for work during its `housekeeping_after` period, when only
/// this process's changes wake it.
pub const QUIET_RECHECK: Duration = Duration::from_millis(50);

/// How often a worker re-reads the backend's routes.
const ROUTES_REFRESH: Duration = Duration::from_secs(1);

impl Worker {
    /// A worker with a fresh, process-unique identity (`name-<suffix>`).
    pub fn new(
        config: WorkerConfig,
        backend: Arc<dyn QueueBackend>,
        registry: RunnerRegistry,
    ) -> Self {
        Self {
            identity: WorkerIdentity::new(&config.name),
            config,
            backend,
            registry,
            routes: Mutex::new((None, Vec::new())),
        }
    }

    /// This worker's identity.
    pub fn identity(&self) -> &WorkerIdentity {
        &self.identity
    }

    /// Calls every runner's `on_worker_start` with the scratch root (leftovers of dead workers on
    /// this host, per-process housekeeping), runs until `shutdown` fires, then stops leasing, waits up to `grace` for running jobs,
    /// kills what still runs (runners kill their process groups on cancel) and hands those
    /// leases back at once, so another worker may start them immediately.
    ///
    /// Every shutdown step is bounded, also with the queue unreachable: a pending lease call
    /// gets at most `grace`, running jobs `grace`, then killing them and handing their leases
    /// back, releasing the presence lock and stopping the reaper share
    /// `max(grace, `[`MIN_HAND_BACK`]`)`. What could not be handed back in time is abandoned
    /// and listed in [`WorkerReport::left_stale`].
    pub async fn run(self, shutdown: CancellationToken) -> WorkerReport {
        let worker_id = self.identity.worker_id.clone();
        info!(worker = %worker_id, host = %self.identity.host, pid = self.identity.pid,
              backend = self.backend.name(), concurrency = self.config.concurrency, "worker started");
        self.registry.on_worker_start(&self.config.scratch_root);
        self.advertise_labels().await;
        let background = CancellationToken::new();
        let after = self.config.housekeeping_after;
        let presence = tokio::spawn(after_delay(
            after,
            background.clone(),
            hold_presence(
                self.backend.clone(),
                self.identity.clone(),
                background.clone(),
            ),
        ));
        let labels = self.backend.transfer_area().map(|area| {
            let (key, labels, stop) = (
                labels_key(&worker_id),
                self.labels_json(),
                background.clone(),
            );
            tokio::spawn(async move { refresh_labels(area.as_ref(), &key, &labels, stop).await })
        });
        let reaper = self.config.reap_every.map(|every| {
            let backend = self.backend.clone();
            let stop = background.clone();
            tokio::spawn(after_delay(after, stop.clone(), async move {
                run_reaper(backend.as_ref(), every, stop).await
            }))
        });
        let pruner = self
            .config
            .retention
            .filter(|_| self.config.reap_every.is_some())
            .map(|retention| {
                let backend = self.backend.clone();
                let stop = background.clone();
                tokio::spawn(after_delay(after, stop.clone(), async move {
                    crate::retention::run_pruner(
                        backend.as_ref(),
                        retention,
                        crate::retention::DEFAULT_PRUNE_EVERY,
                        stop,
                    )
                    .await
                }))
            });

        let kill_all = CancellationToken::new();
        let counters = Arc::new(Counters {
            health: self.config.health.clone(),
            ..Counters::default()
        });
        let slots = Arc::new(Semaphore::new(self.config.concurrency.max(1)));
        let mut tasks = JoinSet::new();
        let next_queue = Arc::new(AtomicUsize::new(0));
        let queues: Arc<[String]> = self.config.queues.clone().into();
        // Opened once: `fstat` of it answers "no scratch dir to remove" without a path lookup.
        let scratch_root_dir = std::fs::File::open(&self.config.scratch_root)
            .ok()
            .map(Arc::new);
        let quiet_until = (!after.is_zero()).then(|| tokio::time::Instant::now() + after);
        while !shutdown.is_cancelled() {
            while tasks.try_join_next().is_some() {}
            let free = slots.available_permits();
            if free == 0 {
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    permit = slots.clone().acquire_owned() => drop(permit),
                }
                continue;
            }
            let quiet_left = quiet_until
                .map(|t| t.saturating_duration_since(tokio::time::Instant::now()))
                .filter(|d| !d.is_zero());
            let seen = self.backend.change_seq();
            let wait = if quiet_left.is_some() {
                Duration::ZERO
            } else {
                self.config.poll_wait
            };
            let lease = self.lease_round(free, &next_queue, &shutdown, wait);
            tokio::pin!(lease);
            let leased = tokio::select! {
                jobs = &mut lease => jobs,
                // A lease call in flight may already have leased jobs: let it answer (they are
                // then handed straight back), but not for longer than the grace. One that only
                // waits for work answers at once (`lease_or_stop`).
                () = shutdown.cancelled() => match tokio::time::timeout(self.config.grace, &mut lease).await {
                    Ok(jobs) => jobs,
                    Err(_) => {
                        warn!(worker = %worker_id, "a lease call was still unanswered after the grace: abandoned");
                        break;
                    }
                },
            };
            if leased.is_empty()
                && let Some(left) = quiet_left
            {
                tokio::select! {
                    () = shutdown.cancelled() => break,
                    () = self.backend.changed_here_since(seen, QUIET_RECHECK.min(left)) => {}
                }
                continue;
            }
            for job in leased {
                counters.hold(&job.job.id, job.fencing_token);
                let Ok(permit) = slots.clone().try_acquire_owned() else {
                    unreachable!("leased no more jobs than free slots")
                };
                let ctx = JobTask {
                    backend: self.backend.clone(),
                    registry: self.registry.clone(),
                    scratch_root: self.config.scratch_root.clone(),
                    scratch_root_dir: scratch_root_dir.clone(),
                    kill_all: kill_all.clone(),
                    shutdown: shutdown.clone(),
                    counters: counters.clone(),
                    identity: self.identity.clone(),
                    queues: queues.clone(),
                    next_queue: next_queue.clone(),
                    health: self.config.health.clone(),
                };
                tasks.spawn(async move {
                    ctx.run(job).await;
                    drop(permit);
                });
            }
        }

        info!(worker = %worker_id, running = tasks.len(), grace_ms = self.config.grace.as_millis() as u64,
              "worker stopping: no more leases");
        let drained = tokio::time::timeout(self.config.grace, async {
            while tasks.join_next().await.is_some() {}
        })
        .await;
        let hand_back_by = tokio::time::Instant::now() + self.config.grace.max(MIN_HAND_BACK);
        // Tasks whose jobs are all finished are only removing scratch dirs (a sandbox's clone, a
        // build's target dir): waited for, nothing killed, nothing to warn about.
        let drained = match drained {
            Err(_) if counters.unresolved().is_empty() => {
                info!(worker = %worker_id, running = tasks.len(), "every job finished; waiting for their scratch dirs to be removed");
                while tasks.join_next().await.is_some() {}
                Ok(())
            }
            other => other,
        };
        if drained.is_err() {
            warn!(worker = %worker_id, running = counters.unresolved().len(), "grace period over: killing running jobs and handing their leases back");
            kill_all.cancel();
            let handed = tokio::time::timeout_at(hand_back_by, async {
                while tasks.join_next().await.is_some() {}
            })
            .await;
            if handed.is_err() {
                warn!(worker = %worker_id, running = tasks.len(), "hand-back not answered in time (is the queue reachable?): abandoning it");
                tasks.abort_all();
                while tasks.join_next().await.is_some() {}
            }
        }
        background.cancel();
        for (what, task) in [
            ("presence lock release", Some(presence)),
            ("labels refresh", labels),
            ("reaper", reaper),
            ("pruner", pruner),
        ] {
            let Some(mut task) = task else { continue };
            if tokio::time::timeout_at(hand_back_by, &mut task)
                .await
                .is_err()
            {
                warn!(worker = %worker_id, "{what} not answered in time: abandoned");
                task.abort();
            }
        }
        // A finish whose reply was lost (the queue timed out) may still have landed: a lease
        // the queue no longer shows running under our token was not left stale. (It is never
        // handed back instead: its job ran, so a release would re-run it.)
        let mut left_stale = Vec::new();
        for (job_id, token) in counters.unresolved() {
            let still_ours = tokio::time::timeout_at(hand_back_by, self.backend.get(&job_id)).await;
            match still_ours {
                Ok(Ok(Some(job)))
                    if job.state != JobState::Running || job.fencing_token != token =>
                {
                    counters.resolved(&job_id, token);
                }
                _ => left_stale.push((job_id, token)),
            }
        }
        let report = WorkerReport {
            finished: counters.finished.load(Ordering::Relaxed),
            fenced: counters.fenced.load(Ordering::Relaxed),
            released: counters.released.load(Ordering::Relaxed),
            left_stale,
        };
        for (job_id, token) in &report.left_stale {
            warn!(worker = %worker_id, job_id = %job_id, fencing_token = token,
                  "lease not handed back: it goes stale after its stale_after and the reaper recovers it");
        }
        if let Some(area) = self.backend.transfer_area()
            && let Err(e) = area.remove_record(&labels_key(&worker_id)).await
        {
            debug!(error = %e, "labels record not removed");
        }
        info!(
            worker = %worker_id,
            finished = report.finished,
            fenced = report.fenced,
            released = report.released,
            left_stale = report.left_stale.len(),
            "worker stopped"
        );
        report
    }

    /// Records this worker's labels in the transfer area (`workers/<id>`; removed when it stops),
    /// so waiting commands and `jobs show` can tell when no live worker can take a job.
    /// While the worker runs, [`refresh_labels`] re-writes the record well inside the transfer
    /// area's TTL, so a worker that runs longer than the TTL keeps it.
    async fn advertise_labels(&self) {
        let Some(area) = self.backend.transfer_area() else {
            return;
        };
        if let Err(e) = area
            .put_record(&labels_key(&self.identity.worker_id), &self.labels_json())
            .await
        {
            warn!(error = %e, "labels not advertised");
        }
    }

    fn labels_json(&self) -> Vec<u8> {
        serde_json::to_vec(&self.config.labels).unwrap_or_default()
    }

    /// The worker's queues plus the routes of them its labels satisfy (re-read every
    /// [`ROUTES_REFRESH`]).
    async fn lease_queues(&self) -> Vec<String> {
        let stale = {
            let cache = self
                .routes
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            cache.0.is_none_or(|at| at.elapsed() >= ROUTES_REFRESH)
        };
        if stale && !self.config.labels.is_empty() {
            match self.backend.routes().await {
                Ok(all) => {
                    let mine =
                        crate::labels::routes_for(&self.config.queues, &self.config.labels, &all);
                    *self
                        .routes
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner) =
                        (Some(tokio::time::Instant::now()), mine);
                }
                Err(e) => debug!(error = %e, "routes not read"),
            }
        }
        let mut queues = self.config.queues.clone();
        queues.extend(
            self.routes
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .1
                .iter()
                .cloned(),
        );
        queues
    }

    /// Leases up to `free` jobs, trying queues round-robin; only the last queue tried waits (up to
    /// `wait`), and only until `shutdown` fires.
    async fn lease_round(
        &self,
        free: usize,
        next_queue: &AtomicUsize,
        shutdown: &CancellationToken,
        wait: Duration,
    ) -> Vec<LeasedJob> {
        let queues = self.lease_queues().await;
        let n = queues.len();
        let first = next_queue.load(Ordering::Relaxed);
        for i in 0..n {
            let queue = &queues[(first + i) % n];
            let wait = if i + 1 == n { wait } else { Duration::ZERO };
            match self
                .backend
                .lease_or_stop(queue, &self.identity, free, wait, shutdown)
                .await
            {
                Ok(jobs) if !jobs.is_empty() => {
                    if let Some(h) = &self.config.health {
                        h.lease_answered();
                    }
                    next_queue.store((first + i + 1) % n, Ordering::Relaxed);
                    return jobs;
                }
                Ok(_) => {
                    if let Some(h) = &self.config.health {
                        h.lease_answered();
                    }
                }
                Err(e) => {
                    warn!(queue = %queue, error = %e, "lease failed; retrying shortly");
                    if let Some(h) = &self.config.health {
                        h.lease_failed(&e.to_string());
                    }
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_millis(500)) => {}
                        () = shutdown.cancelled() => return Vec::new(),
                    }
                }
            }
        }
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use skillforge_runner::{ExitClass, RunContext, RunOutcome, RunSpec, Runner, RunnerError};

    use super::*;
    use crate::job::{JobSpec, JobState};

    /// Records the scratch roots `on_worker_start` saw, and whether it had been called by the
    /// time a job ran.
    #[derive(Default)]
    struct StartProbe {
        started_with: Mutex<Vec<PathBuf>>,
        ran_after_start: Mutex<Vec<bool>>,
    }

    #[async_trait::async_trait]
    impl Runner for StartProbe {
        fn kind(&self) -> &'static str {
            "probe"
        }

        fn on_worker_start(&self, scratch_root: &std::path::Path) {
            self.started_with
                .lock()
                .unwrap()
                .push(scratch_root.to_path_buf());
        }

        async fn run(&self, _spec: &RunSpec, _ctx: &RunContext) -> Result<RunOutcome, RunnerError> {
            let started = !self.started_with.lock().unwrap().is_empty();
            self.ran_after_start.lock().unwrap().push(started);
            let exit = ExitClass::Passed;
            Ok(RunOutcome {
                exit,
                exit_code: Some(0),
                duration_ms: 0,
                stdout_tail: String::new(),
                stderr_tail: String::new(),
                detail: serde_json::Value::Null,
            })
        }
    }

    #[tokio::test]
    async fn a_worker_calls_on_worker_start_once_with_its_scratch_root_before_running_jobs() {
        let dir = tempfile::tempdir().unwrap();
        let backend: Arc<dyn QueueBackend> = Arc::new(
            crate::sqlite::SqliteBackend::open(&dir.path().join("queue.db"))
                .await
                .unwrap(),
        );
        let job = backend
            .enqueue(&JobSpec::new("probe", serde_json::json!({})))
            .await
            .unwrap()
            .job_id;
        let probe = Arc::new(StartProbe::default());
        let scratch_root = dir.path().join("scratch");
        let worker = Worker::new(
            WorkerConfig::new("probe", scratch_root.clone()),
            backend.clone(),
            RunnerRegistry::new().with(probe.clone()),
        );
        let stop = CancellationToken::new();
        let running = tokio::spawn(worker.run(stop.clone()));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while backend
            .get(&job)
            .await
            .unwrap()
            .is_none_or(|j| j.state != JobState::Succeeded)
        {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the probe job never succeeded"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        stop.cancel();
        running.await.unwrap();
        assert_eq!(*probe.started_with.lock().unwrap(), vec![scratch_root]);
        assert_eq!(*probe.ran_after_start.lock().unwrap(), vec![true]);
    }

    /// Leaves files in its scratch dir (a directory of them read-only) for the worker to
    /// remove, as the sandbox runner leaves its clone; records `scratch_removed_after`.
    #[derive(Default)]
    struct LeavesFiles {
        dirs: Mutex<Vec<(PathBuf, bool)>>,
    }

    #[async_trait::async_trait]
    impl Runner for LeavesFiles {
        fn kind(&self) -> &'static str {
            "leaves"
        }

        async fn run(&self, _spec: &RunSpec, ctx: &RunContext) -> Result<RunOutcome, RunnerError> {
            let locked = ctx.scratch_dir.join("clone/locked");
            std::fs::create_dir_all(locked.join("inner")).unwrap();
            std::fs::write(locked.join("inner/file"), "x").unwrap();
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o500)).unwrap();
            }
            self.dirs
                .lock()
                .unwrap()
                .push((ctx.scratch_dir.clone(), ctx.scratch_removed_after));
            let exit = ExitClass::Passed;
            Ok(RunOutcome {
                exit,
                exit_code: Some(0),
                duration_ms: 0,
                stdout_tail: String::new(),
                stderr_tail: String::new(),
                detail: serde_json::Value::Null,
            })
        }
    }

    async fn wait_succeeded(backend: &dyn QueueBackend, job: &str) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while backend
            .get(job)
            .await
            .unwrap()
            .is_none_or(|j| j.state != JobState::Succeeded)
        {
            assert!(
                tokio::time::Instant::now() < deadline,
                "job {job} never succeeded"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    #[tokio::test]
    async fn an_attempts_scratch_dir_is_removed_by_the_time_the_worker_stops() {
        let dir = tempfile::tempdir().unwrap();
        let backend: Arc<dyn QueueBackend> = Arc::new(
            crate::sqlite::SqliteBackend::open(&dir.path().join("queue.db"))
                .await
                .unwrap(),
        );
        let job = backend
            .enqueue(&JobSpec::new("leaves", serde_json::json!({})))
            .await
            .unwrap()
            .job_id;
        let runner = Arc::new(LeavesFiles::default());
        let scratch_root = dir.path().join("scratch");
        std::fs::create_dir_all(&scratch_root).unwrap();
        let worker = Worker::new(
            WorkerConfig::new("leaves", scratch_root.clone()),
            backend.clone(),
            RunnerRegistry::new().with(runner.clone()),
        );
        let stop = CancellationToken::new();
        let running = tokio::spawn(worker.run(stop.clone()));
        wait_succeeded(backend.as_ref(), &job).await;
        stop.cancel();
        running.await.unwrap();
        let dirs = runner.dirs.lock().unwrap().clone();
        assert_eq!(dirs.len(), 1);
        assert!(
            dirs[0].1,
            "a worker's run is told the worker removes its scratch dir"
        );
        assert!(dirs[0].0.starts_with(&scratch_root));
        assert!(
            !dirs[0].0.exists(),
            "the scratch dir (with a read-only directory in it) is gone once the worker stopped"
        );
    }

    fn presence_locks(leases: &[crate::job::LeaseView]) -> usize {
        leases
            .iter()
            .filter(|l| {
                l.kind == crate::job::LeaseKind::Lock && l.name.starts_with(PRESENCE_LOCK_PREFIX)
            })
            .count()
    }

    #[tokio::test]
    async fn a_worker_with_housekeeping_after_runs_a_job_before_taking_its_presence_lock() {
        let dir = tempfile::tempdir().unwrap();
        let backend: Arc<dyn QueueBackend> = Arc::new(
            crate::sqlite::SqliteBackend::open(&dir.path().join("queue.db"))
                .await
                .unwrap(),
        );
        let job = backend
            .enqueue(&JobSpec::new("probe", serde_json::json!({})))
            .await
            .unwrap()
            .job_id;
        let mut config = WorkerConfig::new("oneshot", dir.path().join("scratch"));
        config.housekeeping_after = Duration::from_secs(3600);
        let worker = Worker::new(
            config,
            backend.clone(),
            RunnerRegistry::new().with(Arc::new(StartProbe::default())),
        );
        let stop = CancellationToken::new();
        let running = tokio::spawn(worker.run(stop.clone()));
        wait_succeeded(backend.as_ref(), &job).await;
        // Idle during the delay, it waits only for this process's changes: an enqueue of this
        // process wakes it, and another process's (a second handle on the file) is picked up at
        // its next re-check.
        let here = backend
            .enqueue(&JobSpec::new("probe", serde_json::json!({})))
            .await
            .unwrap()
            .job_id;
        wait_succeeded(backend.as_ref(), &here).await;
        let other: Arc<dyn QueueBackend> = Arc::new(
            crate::sqlite::SqliteBackend::open(&dir.path().join("queue.db"))
                .await
                .unwrap(),
        );
        let elsewhere = other
            .enqueue(&JobSpec::new("probe", serde_json::json!({})))
            .await
            .unwrap()
            .job_id;
        wait_succeeded(backend.as_ref(), &elsewhere).await;
        assert_eq!(
            presence_locks(&backend.leases().await.unwrap()),
            0,
            "no presence lock before the housekeeping delay"
        );
        stop.cancel();
        let report = tokio::time::timeout(Duration::from_secs(30), running)
            .await
            .expect("the stop ends the delay at once")
            .unwrap();
        assert_eq!(report.finished, 3);

        // A shorter delay: the presence lock is taken once it has passed.
        let mut config = WorkerConfig::new("later", dir.path().join("scratch"));
        config.housekeeping_after = Duration::from_millis(50);
        let worker = Worker::new(
            config,
            backend.clone(),
            RunnerRegistry::new().with(Arc::new(StartProbe::default())),
        );
        let stop = CancellationToken::new();
        let running = tokio::spawn(worker.run(stop.clone()));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while presence_locks(&backend.leases().await.unwrap()) == 0 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the presence lock was never taken"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        stop.cancel();
        running.await.unwrap();
        assert_eq!(
            presence_locks(&backend.leases().await.unwrap()),
            0,
            "released when the worker stopped"
        );
    }
}
