//! The worker loop: leases jobs, runs them through runners while heartbeating each lease, sends back fenced results.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use skillforge_runner::{RunContext, RunSpec};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug, info, info_span, warn};

use crate::backend::QueueBackend;
use crate::health::WorkerHealth;
use crate::job::{FinishReply, HeartbeatReply, JobState, LeasedJob, LockAcquire, WorkerIdentity};
use crate::output::OutputForwarder;
use crate::policy::finish_for;
use crate::reaper::{DEFAULT_REAP_EVERY, run_reaper};
use crate::registry::RunnerRegistry;
use crate::transfer;

/// Default grace period on shutdown before running jobs are killed and handed back.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(10);
/// Least time the shutdown gives killing running jobs and handing their leases back (and,
/// then, releasing the presence lock and stopping the reaper), whatever the grace: the process
/// runner's own SIGTERM → SIGKILL grace (2 s by default) plus a round trip to the queue.
pub const MIN_HAND_BACK: Duration = Duration::from_secs(5);
/// Prefix of the named lock each worker holds while alive (its presence in `skillforge locks`).
pub const PRESENCE_LOCK_PREFIX: &str = "worker:";
/// Heartbeat period of the presence lock.
pub const PRESENCE_HEARTBEAT: Duration = Duration::from_secs(1);
/// Stale threshold of the presence lock.
pub const PRESENCE_STALE_AFTER: Duration = Duration::from_secs(5);

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
    /// the wait at once: `QueueBackend::lease_or_stop`).
    pub poll_wait: Duration,
    /// Where undelivered results and failing lease calls are also reported, for a process that
    /// runs this worker for its own jobs ([`WorkerHealth`]); `None` only logs them.
    pub health: Option<Arc<WorkerHealth>>,
    /// Labels this worker advertises ([`crate::labels`]): it also leases the routes of its
    /// queues whose requirements they satisfy. Empty = only jobs that require nothing.
    pub labels: Vec<String>,
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
        }
    }
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
    finished: AtomicU64,
    fenced: AtomicU64,
    released: AtomicU64,
    /// Leases taken and not yet resolved (finished, fenced or handed back): job id → token.
    held: Mutex<BTreeMap<String, u64>>,
}

impl Counters {
    fn hold(&self, job_id: &str, token: u64) {
        self.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(job_id.to_owned(), token);
    }

    /// The lease of `job_id` under `token` is resolved: the queue answered for it.
    fn resolved(&self, job_id: &str, token: u64) {
        let mut held = self.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if held.get(job_id) == Some(&token) {
            held.remove(job_id);
        }
    }

    fn unresolved(&self) -> Vec<(String, u64)> {
        let held = self.held.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
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

/// How often a worker re-reads the backend's routes.
const ROUTES_REFRESH: Duration = Duration::from_secs(1);

impl Worker {
    /// A worker with a fresh, process-unique identity (`name-<suffix>`).
    pub fn new(config: WorkerConfig, backend: Arc<dyn QueueBackend>, registry: RunnerRegistry) -> Self {
        Self { identity: WorkerIdentity::new(&config.name), config, backend, registry, routes: Mutex::new((None, Vec::new())) }
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
        let presence = tokio::spawn(hold_presence(self.backend.clone(), self.identity.clone(), background.clone()));
        let reaper = self.config.reap_every.map(|every| {
            let backend = self.backend.clone();
            let stop = background.clone();
            tokio::spawn(async move { run_reaper(backend.as_ref(), every, stop).await })
        });
        let pruner = self.config.retention.filter(|_| self.config.reap_every.is_some()).map(|retention| {
            let backend = self.backend.clone();
            let stop = background.clone();
            tokio::spawn(async move {
                crate::retention::run_pruner(backend.as_ref(), retention, crate::retention::DEFAULT_PRUNE_EVERY, stop).await
            })
        });

        let kill_all = CancellationToken::new();
        let counters = Arc::new(Counters::default());
        let slots = Arc::new(Semaphore::new(self.config.concurrency.max(1)));
        let mut tasks = JoinSet::new();
        let next_queue = Arc::new(AtomicUsize::new(0));
        let queues: Arc<[String]> = self.config.queues.clone().into();
        // Opened once: `fstat` of it answers "no scratch dir to remove" without a path lookup.
        let scratch_root_dir = std::fs::File::open(&self.config.scratch_root).ok().map(Arc::new);
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
            let lease = self.lease_round(free, &next_queue, &shutdown);
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
        if drained.is_err() {
            warn!(worker = %worker_id, running = tasks.len(), "grace period over: killing running jobs and handing their leases back");
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
        for (what, task) in [("presence lock release", Some(presence)), ("reaper", reaper), ("pruner", pruner)] {
            let Some(mut task) = task else { continue };
            if tokio::time::timeout_at(hand_back_by, &mut task).await.is_err() {
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
                Ok(Ok(Some(job))) if job.state != JobState::Running || job.fencing_token != token => {
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
            && let Err(e) = area.remove_record(&crate::labels::labels_key(&worker_id)).await
        {
            debug!(error = %e, "labels record not removed");
        }
        info!(worker = %worker_id, ?report, "worker stopped");
        report
    }

    /// Records this worker's labels in the transfer area (`workers/<id>`; removed when it stops),
    /// so waiting commands and `jobs show` can tell when no live worker can take a job.
    async fn advertise_labels(&self) {
        let Some(area) = self.backend.transfer_area() else { return };
        let labels = serde_json::to_vec(&self.config.labels).unwrap_or_default();
        if let Err(e) = area.put_record(&crate::labels::labels_key(&self.identity.worker_id), &labels).await {
            warn!(error = %e, "labels not advertised");
        }
    }

    /// The worker's queues plus the routes of them its labels satisfy (re-read every
    /// [`ROUTES_REFRESH`]).
    async fn lease_queues(&self) -> Vec<String> {
        let stale = {
            let cache = self.routes.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            cache.0.is_none_or(|at| at.elapsed() >= ROUTES_REFRESH)
        };
        if stale && !self.config.labels.is_empty() {
            match self.backend.routes().await {
                Ok(all) => {
                    let mine = crate::labels::routes_for(&self.config.queues, &self.config.labels, &all);
                    *self.routes.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = (Some(tokio::time::Instant::now()), mine);
                }
                Err(e) => debug!(error = %e, "routes not read"),
            }
        }
        let mut queues = self.config.queues.clone();
        queues.extend(self.routes.lock().unwrap_or_else(std::sync::PoisonError::into_inner).1.iter().cloned());
        queues
    }

    /// Leases up to `free` jobs, trying queues round-robin; only the last queue tried waits, and
    /// only until `shutdown` fires.
    async fn lease_round(&self, free: usize, next_queue: &AtomicUsize, shutdown: &CancellationToken) -> Vec<LeasedJob> {
        let queues = self.lease_queues().await;
        let n = queues.len();
        let first = next_queue.load(Ordering::Relaxed);
        for i in 0..n {
            let queue = &queues[(first + i) % n];
            let wait = if i + 1 == n { self.config.poll_wait } else { Duration::ZERO };
            match self.backend.lease_or_stop(queue, &self.identity, free, wait, shutdown).await {
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

/// This worker's own executable, for [`transfer::WORKER_EXE`] (`skillforge` itself).
fn worker_exe() -> String {
    std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_else(|_| "skillforge".to_owned())
}

/// Whether `root` (the parent of every scratch dir; `opened`: the same directory opened
/// earlier) certainly has no subdirectory, from one `fstat` (or `stat`) of it: a directory's
/// link count is 2 plus its subdirectories on Linux file systems that count them (ext4, xfs,
/// tmpfs); others (btrfs: 1), a removed directory (0) and errors answer "maybe".
fn no_scratch_dirs(opened: Option<&std::fs::File>, root: &std::path::Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let meta = match opened {
            Some(dir) => dir.metadata(),
            None => std::fs::metadata(root),
        };
        meta.is_ok_and(|m| m.is_dir() && m.nlink() == 2)
    }
    #[cfg(not(unix))]
    {
        let _ = (opened, root);
        false
    }
}

/// Removes an attempt's scratch dir (a child of `root`, which `opened` is when given) if its
/// runner created one, off the async threads.
async fn remove_scratch(opened: Option<&std::fs::File>, root: &std::path::Path, dir: PathBuf) {
    // Most runners create no scratch dir. A `stat` of the (cached) root usually proves that;
    // else one `lstat` of the attempt's unique path, which the kernel cannot answer from its
    // name cache. Neither is blocking work worth a thread hop.
    if no_scratch_dirs(opened, root) || std::fs::symlink_metadata(&dir).is_err() {
        return;
    }
    let shown = dir.display().to_string();
    match tokio::task::spawn_blocking(move || std::fs::remove_dir_all(&dir)).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => debug!(dir = %shown, error = %e, "scratch dir not removed"),
        Err(e) => debug!(dir = %shown, error = %e, "scratch dir removal task failed"),
    }
}

/// Holds the presence lock `worker:<id>` ([`PRESENCE_LOCK_PREFIX`] + `identity.worker_id`) until
/// `stop` fires, then releases it: acquired with [`PRESENCE_HEARTBEAT`] / [`PRESENCE_STALE_AFTER`],
/// renewed every [`PRESENCE_HEARTBEAT`], re-acquired when a renewal finds it lost. Queue errors
/// are logged and retried at the next beat, never returned. Used by [`Worker`] and by the apalis
/// adapter (`skillforge-engine-apalis`), so both show in `skillforge locks` the same way.
pub async fn hold_presence(backend: Arc<dyn QueueBackend>, identity: WorkerIdentity, stop: CancellationToken) {
    let name = format!("{PRESENCE_LOCK_PREFIX}{}", identity.worker_id);
    let mut token = None;
    loop {
        match token {
            None => match backend.acquire_lock(&name, &identity, PRESENCE_HEARTBEAT, PRESENCE_STALE_AFTER).await {
                Ok(LockAcquire::Acquired { fencing_token }) => token = Some(fencing_token),
                Ok(LockAcquire::Held(_)) => warn!(lock = %name, "presence lock held by another process"),
                Err(e) => debug!(error = %e, "presence lock not taken"),
            },
            Some(t) => match backend.renew_lock(&name, t).await {
                Ok(true) => {}
                Ok(false) => token = None,
                Err(e) => debug!(error = %e, "presence lock not renewed"),
            },
        }
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(PRESENCE_HEARTBEAT) => {}
        }
    }
    if let Some(t) = token {
        let _ = backend.release_lock(&name, t).await;
    }
}

/// Everything one running job needs.
struct JobTask {
    backend: Arc<dyn QueueBackend>,
    registry: RunnerRegistry,
    scratch_root: PathBuf,
    /// `scratch_root` opened at worker start, when it existed.
    scratch_root_dir: Option<Arc<std::fs::File>>,
    kill_all: CancellationToken,
    /// The worker's shutdown: once it fired, a finished slot leases nothing more.
    shutdown: CancellationToken,
    counters: Arc<Counters>,
    identity: WorkerIdentity,
    /// The worker's queues and its round-robin position, shared with the lease loop.
    queues: Arc<[String]>,
    next_queue: Arc<AtomicUsize>,
    health: Option<Arc<WorkerHealth>>,
}

impl JobTask {
    /// Runs `leased`, then, while the slot's finish brings back a next job, that one too
    /// (finish-and-lease: a busy slot refills in the same round trip as its result).
    async fn run(self, leased: LeasedJob) {
        let mut next = Some(leased);
        while let Some(job) = next.take() {
            if self.shutdown.is_cancelled() || self.kill_all.is_cancelled() {
                // Leased while the worker began to stop: hand it straight back (attempt refunded).
                match self.backend.release(&job.job.id, job.fencing_token).await {
                    Ok(true) => {
                        self.counters.released.fetch_add(1, Ordering::Relaxed);
                        info!(job_id = %job.job.id, "job handed back on shutdown before it started");
                    }
                    Ok(false) => warn!(job_id = %job.job.id, "job not handed back: lease already superseded"),
                    Err(e) => {
                        warn!(job_id = %job.job.id, error = %e, "job not handed back; the reaper will recover it");
                        return;
                    }
                }
                self.counters.resolved(&job.job.id, job.fencing_token);
                return;
            }
            next = self.run_one(job).await;
        }
    }

    /// The queue a finishing slot leases its next job from (round-robin over the worker's queues).
    fn refill_queue(&self) -> Option<&str> {
        let n = self.queues.len();
        if n == 0 {
            return None;
        }
        let i = self.next_queue.fetch_add(1, Ordering::Relaxed) % n;
        Some(self.queues[i].as_str())
    }

    /// Runs one leased job to its fenced result; returns the slot's next job when the finish
    /// leased one.
    async fn run_one(&self, leased: LeasedJob) -> Option<LeasedJob> {
        let job = leased.job;
        let token = leased.fencing_token;
        let span = info_span!("job", job_id = %job.id, workflow = %job.spec.workflow,
                              stage = %job.spec.stage, attempt = job.attempts, fencing_token = token);
        async move {
            info!(kind = %job.spec.kind, worker = %self.identity.worker_id, "job started");
            let signals = LeaseSignals::new(self.kill_all.child_token());
            let LeaseSignals { cancel, cancelled_by_operator, lease_lost } = signals.clone();
            let done = CancellationToken::new();
            let every = Duration::from_millis(job.spec.heartbeat_ms.max(50));
            let held = Arc::new(tokio::sync::Mutex::new(Vec::<(String, u64)>::new()));
            let heartbeat = tokio::spawn(heartbeat_loop(
                self.backend.clone(),
                job.id.clone(),
                token,
                every,
                signals,
                held.clone(),
                done.clone(),
            ));
            if !job.spec.locks.is_empty() {
                let locks = self.take_locks(&job, every, &cancel).await;
                *held.lock().await = locks;
            }

            let scratch_dir = self.scratch_root.join(format!("{}-{token}", job.id));
            let mut wrote_output = false;
            let result = match self.registry.get(&job.spec.kind) {
                _ if cancel.is_cancelled() => Err("cancelled before the runner started".to_owned()),
                None => Err(format!(
                    "worker `{}` has no runner `{}` (it has: {})",
                    self.identity.worker_id,
                    job.spec.kind,
                    self.registry.kinds().join(", ")
                )),
                Some(runner) => {
                    let output = OutputForwarder::start(self.backend.clone(), &job.id, token);
                    let result =
                        self.run_runner(runner.as_ref(), &job, token, &scratch_dir, &cancel, output.output_fn()).await;
                    wrote_output = output.finish().await;
                    result
                }
            };
            done.cancel();
            let _ = heartbeat.await;
            remove_scratch(self.scratch_root_dir.as_deref(), &self.scratch_root, scratch_dir).await;
            for (name, lock_token) in held.lock().await.drain(..) {
                if let Err(e) = self.backend.release_lock(&name, lock_token).await {
                    warn!(lock = %name, error = %e, "lock not released; it goes stale after stale_after");
                }
            }

            let operator_cancel = cancelled_by_operator.load(Ordering::SeqCst);
            if self.kill_all.is_cancelled() && !operator_cancel && !lease_lost.load(Ordering::SeqCst) {
                match self.backend.release(&job.id, token).await {
                    Ok(true) => {
                        self.counters.released.fetch_add(1, Ordering::Relaxed);
                        info!("job handed back on shutdown");
                    }
                    Ok(false) => warn!("job not handed back: lease already superseded"),
                    Err(e) => {
                        warn!(error = %e, "job not handed back; the reaper will recover it");
                        return None;
                    }
                }
                self.counters.resolved(&job.id, token);
                return None;
            }
            let finish =
                finish_for(job.attempts, job.spec.max_attempts, result, operator_cancel, job.spec.retry_failed_runs);
            let refill = if self.shutdown.is_cancelled() { None } else { self.refill_queue() };
            let delivered = match refill {
                Some(queue) => self.backend.finish_and_lease(&job.id, token, &finish, queue, &self.identity).await,
                None => self.backend.finish(&job.id, token, &finish).await.map(|reply| (reply, None)),
            };
            match delivered {
                Ok((reply, next)) => {
                    self.counters.resolved(&job.id, token);
                    if let Some(n) = &next {
                        self.counters.hold(&n.job.id, n.fencing_token);
                    }
                    match reply {
                        FinishReply::Applied(state) => {
                            self.counters.finished.fetch_add(1, Ordering::Relaxed);
                            info!(state = %state, result = %finish.attempt_result, retry_delay_ms = finish.retry_delay_ms, "job finished");
                            if state.is_terminal() && wrote_output {
                                if let Err(e) = self.backend.trim_output(&job.id).await {
                                    debug!(error = %e, "live output not trimmed");
                                }
                            }
                        }
                        FinishReply::Fenced { current_token } => {
                            self.counters.fenced.fetch_add(1, Ordering::Relaxed);
                            warn!(current_token, "result rejected by fencing: this lease was superseded");
                        }
                    }
                    next
                }
                Err(e) => {
                    warn!(error = %e, "result not delivered; the reaper will recover the job");
                    if let Some(h) = &self.health {
                        h.result_not_delivered(&job.id, &e.to_string());
                    }
                    None
                }
            }
        }
        .instrument(span)
        .await
    }
}

impl JobTask {
    /// Runs `job` on `runner`. A job with files ([`crate::transfer`]) first gets its job dir
    /// `<scratch>/job` with the inputs materialized (verified by hash) and its payload's
    /// placeholders filled (a job without files whose payload names [`transfer::JOB_DIR`] gets
    /// the empty dir); its output dirs are uploaded when the runner returns, whatever the
    /// outcome, before the result is sent. A failed materialization is a job that could not
    /// run; a failed upload turns the outcome into an error naming both.
    async fn run_runner(
        &self,
        runner: &dyn skillforge_runner::Runner,
        job: &crate::job::Job,
        token: u64,
        scratch_dir: &std::path::Path,
        cancel: &CancellationToken,
        output: skillforge_runner::OutputFn,
    ) -> Result<skillforge_runner::RunOutcome, String> {
        let files = &job.spec.files;
        let mut payload = job.spec.payload.clone();
        let job_dir = scratch_dir.join(transfer::JOB_DIR_NAME);
        let area = if files.is_empty() {
            // A job without files may still run in its job dir (`jobs submit` on a fleet).
            if transfer::names_job_dir(&payload) {
                transfer::fill_placeholders(&mut payload, &job_dir.display().to_string(), &worker_exe());
                tokio::fs::create_dir_all(&job_dir)
                    .await
                    .map_err(|e| format!("worker `{}`: create the job dir `{}`: {e}", self.identity.worker_id, job_dir.display()))?;
            }
            None
        } else {
            let Some(area) = self.backend.transfer_area() else {
                return Err(format!("the job carries files but the `{}` queue has no transfer area", self.backend.name()));
            };
            transfer::fill_placeholders(&mut payload, &job_dir.display().to_string(), &worker_exe());
            transfer::prepare_job_dir(area.as_ref(), files, &job_dir).await.map_err(|e| {
                let age_secs = (crate::job::now_ms() - job.created_at_ms).max(0) / 1000;
                format!("worker `{}`: materialize the job's input files (the job was queued {age_secs} s ago): {e}", self.identity.worker_id)
            })?;
            Some(area)
        };
        // The scratch dir is only a path: a runner that needs it creates it (no file-system
        // work on the async threads for the jobs that do not).
        let spec = RunSpec { job_id: job.id.clone(), payload, timeout: Duration::from_millis(job.spec.timeout_ms) };
        let ctx = RunContext {
            cancel: cancel.clone(),
            heartbeat: Arc::new(|_| {}),
            output,
            scratch_dir: scratch_dir.to_path_buf(),
            attempt: job.attempts,
            fencing_token: token,
        };
        let result = runner.run(&spec, &ctx).await.map_err(|e| e.to_string());
        let Some(area) = area.filter(|_| !files.outputs.is_empty()) else { return result };
        match transfer::upload_outputs(area.as_ref(), &job.id, token, files, &job_dir).await {
            Ok(dirs) => {
                info!(files = dirs.iter().map(|d| d.files.len()).sum::<usize>(), "job outputs uploaded");
                result
            }
            Err(e) => {
                let ran = match &result {
                    Ok(outcome) => format!("the run ended {}", outcome.exit.label()),
                    Err(why) => why.clone(),
                };
                Err(format!("{ran}; upload the job's outputs: {e}"))
            }
        }
    }

    /// Takes every lock of `job.spec.locks`, all or none, retrying every `every` while another
    /// holder has one (the lease keeps heartbeating meanwhile). Returns the held (name, token)
    /// pairs; empty when `cancel` fired first.
    async fn take_locks(&self, job: &crate::job::Job, every: Duration, cancel: &CancellationToken) -> Vec<(String, u64)> {
        let stale_after = Duration::from_millis(job.spec.stale_after_ms);
        loop {
            let mut taken = Vec::new();
            let mut blocked = None;
            for name in &job.spec.locks {
                match self.backend.acquire_lock(name, &self.identity, every, stale_after).await {
                    Ok(LockAcquire::Acquired { fencing_token }) => taken.push((name.clone(), fencing_token)),
                    Ok(LockAcquire::Held(by)) => {
                        blocked = Some(format!("`{name}` held by {}@{}:{}", by.owner_worker, by.owner_host, by.owner_pid));
                        break;
                    }
                    Err(e) => {
                        blocked = Some(format!("`{name}`: {e}"));
                        break;
                    }
                }
            }
            let Some(why) = blocked else { return taken };
            for (name, t) in taken {
                let _ = self.backend.release_lock(&name, t).await;
            }
            info!(lock = %why, "waiting for a lock");
            tokio::select! {
                () = cancel.cancelled() => return Vec::new(),
                () = tokio::time::sleep(every) => {}
            }
        }
    }
}

/// What a running job learns from its [`heartbeat_loop`]: `cancel` fires on an operator
/// cancel, a lost lease or a lost lock; the flags say which (`cancelled_by_operator`, or
/// `lease_lost` for either loss). Clones share the same token and flags.
#[derive(Debug, Clone)]
pub struct LeaseSignals {
    /// Fired when the job must stop.
    pub cancel: CancellationToken,
    /// Set when the stop is an operator's `jobs cancel` (the heartbeat reply `CancelRequested`).
    pub cancelled_by_operator: Arc<AtomicBool>,
    /// Set when the lease (heartbeat reply `LeaseLost`: stale and reaped) or a held lock was lost.
    pub lease_lost: Arc<AtomicBool>,
}

impl LeaseSignals {
    /// Signals that fire `cancel`, both flags unset.
    pub fn new(cancel: CancellationToken) -> Self {
        Self { cancel, cancelled_by_operator: Arc::default(), lease_lost: Arc::default() }
    }
}

/// Renews the lease of `job_id` under fencing token `token`, and the named locks in `held`
/// (name, token), every `every` until `done` fires, independently of the job's own work (DESIGN
/// §4: a busy job is never mistaken for a dead one). Reports through `signals`: an operator
/// cancel fires `cancel` and goes on renewing; a lost lease fires it and ends the loop; a lost
/// lock fires it. Queue errors are logged and retried at the next beat, never returned. Used by
/// [`Worker`] and by the apalis adapter (`skillforge-engine-apalis`, with no locks).
pub async fn heartbeat_loop(
    backend: Arc<dyn QueueBackend>,
    job_id: String,
    token: u64,
    every: Duration,
    signals: LeaseSignals,
    held: Arc<tokio::sync::Mutex<Vec<(String, u64)>>>,
    done: CancellationToken,
) {
    let LeaseSignals { cancel, cancelled_by_operator, lease_lost } = signals;
    loop {
        tokio::select! {
            () = done.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
        for (name, lock_token) in held.lock().await.iter() {
            match backend.renew_lock(name, *lock_token).await {
                Ok(true) => {}
                Ok(false) => {
                    warn!(job_id = %job_id, lock = %name, "lock lost (stale and taken over): stopping the job");
                    lease_lost.store(true, Ordering::SeqCst);
                    cancel.cancel();
                }
                Err(e) => warn!(job_id = %job_id, lock = %name, error = %e, "lock renewal failed; retrying"),
            }
        }
        match backend.heartbeat(&job_id, token).await {
            Ok(HeartbeatReply::Renewed) => {}
            Ok(HeartbeatReply::CancelRequested) => {
                if !cancelled_by_operator.swap(true, Ordering::SeqCst) {
                    info!(job_id = %job_id, "cancel requested: stopping the job");
                }
                cancel.cancel();
            }
            Ok(HeartbeatReply::LeaseLost) => {
                warn!(job_id = %job_id, fencing_token = token, "lease lost (stale and reaped): stopping the job");
                lease_lost.store(true, Ordering::SeqCst);
                cancel.cancel();
                return;
            }
            Err(e) => warn!(job_id = %job_id, error = %e, "heartbeat failed; retrying"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use skillforge_runner::{ExitClass, RunOutcome, Runner, RunnerError};

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
            self.started_with.lock().unwrap().push(scratch_root.to_path_buf());
        }

        async fn run(&self, _spec: &RunSpec, _ctx: &RunContext) -> Result<RunOutcome, RunnerError> {
            let started = !self.started_with.lock().unwrap().is_empty();
            self.ran_after_start.lock().unwrap().push(started);
            let exit = ExitClass::Passed;
            Ok(RunOutcome { exit, exit_code: Some(0), duration_ms: 0, stdout_tail: String::new(), stderr_tail: String::new(), detail: serde_json::Value::Null })
        }
    }

    #[tokio::test]
    async fn a_worker_calls_on_worker_start_once_with_its_scratch_root_before_running_jobs() {
        let dir = tempfile::tempdir().unwrap();
        let backend: Arc<dyn QueueBackend> = Arc::new(crate::sqlite::SqliteBackend::open(&dir.path().join("queue.db")).await.unwrap());
        let job = backend.enqueue(&JobSpec::new("probe", serde_json::json!({}))).await.unwrap().job_id;
        let probe = Arc::new(StartProbe::default());
        let scratch_root = dir.path().join("scratch");
        let worker = Worker::new(WorkerConfig::new("probe", scratch_root.clone()), backend.clone(), RunnerRegistry::new().with(probe.clone()));
        let stop = CancellationToken::new();
        let running = tokio::spawn(worker.run(stop.clone()));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while backend.get(&job).await.unwrap().is_none_or(|j| j.state != JobState::Succeeded) {
            assert!(tokio::time::Instant::now() < deadline, "the probe job never succeeded");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        stop.cancel();
        running.await.unwrap();
        assert_eq!(*probe.started_with.lock().unwrap(), vec![scratch_root]);
        assert_eq!(*probe.ran_after_start.lock().unwrap(), vec![true]);
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn scratch_dirs_are_found_and_removed() {
        let root = tempfile::tempdir().unwrap();
        let mine = root.path().join("job-1");
        let opened = std::fs::File::open(root.path()).unwrap();
        // Nothing created: the root's own stat proves it (where link counts are kept).
        if cfg!(target_os = "linux") && std::fs::metadata(root.path()).map(|m| {
            use std::os::unix::fs::MetadataExt;
            m.nlink()
        }).unwrap_or(0) == 2 {
            assert!(no_scratch_dirs(None, root.path()));
            assert!(no_scratch_dirs(Some(&opened), root.path()));
        }
        std::fs::create_dir_all(mine.join("deep")).unwrap();
        assert!(!no_scratch_dirs(None, root.path()), "a subdirectory is never missed");
        assert!(!no_scratch_dirs(Some(&opened), root.path()), "seen through the open directory too");
        remove_scratch(Some(&opened), root.path(), mine.clone()).await;
        assert!(!mine.exists());
        assert!(!no_scratch_dirs(None, &root.path().join("missing")), "an unreadable root means maybe");
        // Another attempt's dir does not stop this one's (absent) from being skipped correctly.
        let other = root.path().join("job-2");
        std::fs::create_dir(&other).unwrap();
        remove_scratch(None, root.path(), mine.clone()).await;
        assert!(other.exists());
    }
}
