//! The CLI's one waiter: the stage port ([`StageJobs`]) every command and workflow step uses to
//! submit jobs and wait for them — an in-process worker on the embedded queue while no worker is
//! live, a spinner on a terminal, a note when nobody serves a shared queue, and ingestion of the
//! finished results through the family registry.

use std::collections::BTreeSet;
use std::io::IsTerminal;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::families;
use anyhow::anyhow;
use skillforge_engine::health::WorkerHealth;
use skillforge_engine::ingest::Ingestion;
use skillforge_engine::placement::{PlacementWatch, fail_unplaceable_among};
use skillforge_engine::worker::{PRESENCE_LOCK_PREFIX, Worker, WorkerConfig};
use skillforge_engine::{
    EngineError, Enqueued, Job, JobSpec, JobState, LeaseKind, LeaseStatus, QueueBackend,
};
use skillforge_stage::StageJobs;
use skillforge_stage::jobs::is_finished;
use skillforge_store::Store;
use tokio_util::sync::CancellationToken;

use crate::context::Context;
use crate::exit::CliError;

/// How often the waiter looks for a live worker, and how long it waits before saying none is.
const WORKER_CHECK_EVERY: Duration = Duration::from_secs(1);
const NO_WORKER_NOTE_AFTER: Duration = Duration::from_secs(3);
/// Between two reads of the waited jobs the waiter sleeps until the queue signals a change
/// ([`skillforge_engine::backend::QueueChanges::changed_since`]: at once for the in-process worker's finish, within the
/// `data_version` poll for another process's on the embedded queue, on the `changed` channel's
/// message on Redis), at most this long, growing from the first to the second delay: the
/// fallback poll for a notification that was lost (e.g. across a Redis restart).
const POLL_FIRST: Duration = Duration::from_millis(5);
/// How often a wait without a terminal says it goes on.
const STILL_WAITING_EVERY: Duration = Duration::from_secs(20);
/// First wait before a result whose handler failed is offered again while a command waits for
/// it to be applied; doubles up to [`APPLY_RETRY_MAX`].
const APPLY_RETRY_FIRST: Duration = Duration::from_millis(100);
/// Longest wait between two tries of a result whose handler failed, while a command waits.
const APPLY_RETRY_MAX: Duration = Duration::from_secs(5);
const POLL_MAX: Duration = Duration::from_millis(250);
/// How long a wait keeps ingesting a finished job whose result its family's handler cannot apply
/// yet (outputs not recorded yet, a handler error) before it fails naming the job.
const APPLY_DEADLINE: Duration = Duration::from_secs(60);

/// Whether `job`'s result (this attempt's, or a later one's) is recorded applied in `store`.
async fn is_applied(store: &Store, job: &Job) -> Result<bool, EngineError> {
    let records = skillforge_store::applied::applied_for_job(store.pool(), &job.id)
        .await
        .map_err(EngineError::sqlite)?;
    Ok(records
        .iter()
        .any(|r| r.fencing_token >= job.fencing_token as i64))
}

/// The stage port of the CLI.
///
/// **One liveness rule:** a worker is live while it holds a presence lock (`worker:<id>`) whose
/// heartbeat is within its period ([`LeaseStatus::Active`]). On the embedded queue, with the local
/// worker allowed, an in-process worker (labelled with what this machine offers, `labels::detect`)
/// serves the waited jobs' queues, and the routes of them its labels satisfy, whenever no worker is live
/// — checked at once and every second, so the jobs of a worker that died mid-wait are picked up
/// without waiting for its lock to go stale. Otherwise a one-time note on stderr says how to start
/// one once a job has been queued for 3 s with nobody live. On the embedded queue this process is
/// the control plane. On either backend, a wait returns only once every waited job's result is
/// applied: ingested through [`skillforge_stage::Families`] (every family's handler) into this
/// home's store, or acknowledged by another control plane.
pub struct CliJobs<'a> {
    ctx: &'a Context,
    queue: Arc<dyn QueueBackend>,
    /// `None`: the invocation's store ([`Context::store`]), opened when first needed.
    store: Option<Store>,
    local_worker: bool,
}

impl<'a> CliJobs<'a> {
    /// The port over `queue` and `store`, with the local worker allowed.
    pub fn new(ctx: &'a Context, queue: Arc<dyn QueueBackend>, store: Store) -> Self {
        Self {
            ctx,
            queue,
            store: Some(store),
            local_worker: true,
        }
    }

    /// The store handle, or the invocation's store ([`Context::store`]) for a port made by
    /// [`await_job`].
    async fn store(&self) -> Result<Store, EngineError> {
        match &self.store {
            Some(store) => Ok(store.clone()),
            None => self.ctx.store().await.map_err(|e| EngineError::Backend {
                backend: "store",
                message: format!("{:#}", e.error),
            }),
        }
    }

    /// With `allowed` false (`--no-local-worker`), never starts an in-process worker.
    #[must_use]
    pub fn local_worker(mut self, allowed: bool) -> Self {
        self.local_worker = allowed;
        self
    }

    /// Waits for one job (see the type's docs).
    ///
    /// # Errors
    /// Exit 2 for an unknown job; exit 3 when the queue or store fails.
    pub async fn wait_one(&self, id: &str) -> Result<Job, CliError> {
        match self
            .wait_all(std::slice::from_ref(&id.to_owned()), "job")
            .await
        {
            Ok(mut jobs) => Ok(jobs.remove(0)),
            Err(EngineError::NotFound(id)) => Err(CliError::usage(anyhow!("no job `{id}`"))),
            Err(e) => Err(CliError::env(anyhow!(e))),
        }
    }

    async fn wait_all(&self, ids: &[String], what: &str) -> Result<Vec<Job>, EngineError> {
        // A job put back in the queue while its result was being applied (an idempotent job
        // whose outputs expired, `ingest`) is waited for again.
        loop {
            if let Some(jobs) = self.wait_round(ids, what).await? {
                return Ok(jobs);
            }
        }
    }

    /// Waits until every job of `ids` is finished, then until their results are applied;
    /// `None` when a job was put back in the queue meanwhile (wait again).
    async fn wait_round(
        &self,
        ids: &[String],
        what: &str,
    ) -> Result<Option<Vec<Job>>, EngineError> {
        let can_run_locally = self.ctx.queue_url.is_embedded() && self.local_worker;
        let bar = (!self.ctx.json && std::io::stderr().is_terminal()).then(|| {
            let b = indicatif::ProgressBar::new_spinner();
            b.enable_steady_tick(Duration::from_millis(120));
            b
        });
        let started = Instant::now();
        // Without a terminal (a CI log, a pipe) there is no spinner: a line every
        // STILL_WAITING_EVERY says the wait goes on, so a long one is never silent.
        let mut next_still_waiting = started + STILL_WAITING_EVERY;
        let mut next_worker_check = started;
        let mut noted_no_worker = false;
        let mut noted_unmet = false;
        let mut next_unmet_check = started;
        // The placement deadline for the waited jobs (`[queue] unplaceable_after_secs`), as
        // `serve` applies it to every job: this wait may be the only control plane running.
        let unplaceable_after = self.ctx.config.queue.unplaceable_after();
        let mut placement = PlacementWatch::default();
        let mut next_placement_check = started;
        let mut local: Option<(CancellationToken, tokio::task::JoinHandle<()>, String)> = None;
        let health = Arc::new(WorkerHealth::default());
        let mut delay = POLL_FIRST;
        // Which waited jobs this wait has read at least once: one gone since was lost.
        let mut seen_once = vec![false; ids.len()];
        let jobs = loop {
            // Read before the jobs, so a change between the reads and the wait is not missed.
            let seen = self.queue.change_seq();
            let mut jobs = Vec::with_capacity(ids.len());
            for (job_idx, id) in ids.iter().enumerate() {
                match self.queue.get(id).await? {
                    Some(job) => {
                        seen_once[job_idx] = true;
                        jobs.push(job);
                    }
                    None => return Err(self.missing(id, seen_once[job_idx]).await),
                }
            }
            let n_done = jobs.iter().filter(|j| is_finished(j)).count();
            if let Some(b) = &bar {
                b.set_message(progress(what, &jobs, n_done));
            }
            if n_done == jobs.len() {
                break jobs;
            }
            if bar.is_none() && !self.ctx.json && Instant::now() >= next_still_waiting {
                next_still_waiting = Instant::now() + STILL_WAITING_EVERY;
                eprintln!(
                    "… {} ({} s so far)",
                    progress(what, &jobs, n_done),
                    started.elapsed().as_secs()
                );
            }
            if local.is_some()
                && let Some(e) = local_worker_failure(self.queue.name(), &health, &jobs)
            {
                if let Some((stop, handle, _)) = local.take() {
                    stop.cancel();
                    let _ = handle.await;
                }
                return Err(e);
            }
            if !noted_unmet
                && started.elapsed() >= NO_WORKER_NOTE_AFTER
                && Instant::now() >= next_unmet_check
            {
                // A job that requires labels no live worker has (the in-process one included)
                // says so instead of waiting silently.
                next_unmet_check = Instant::now() + WORKER_CHECK_EVERY;
                for job in jobs
                    .iter()
                    .filter(|j| j.state == JobState::Queued && !j.spec.requires.is_empty())
                {
                    if let Some(mut note) =
                        skillforge_engine::labels::unmet_note(self.queue.as_ref(), job).await?
                    {
                        noted_unmet = true;
                        if !unplaceable_after.is_zero() {
                            note.push_str(&format!(
                                ", and fails after {} s without one ([queue] unplaceable_after_secs)",
                                unplaceable_after.as_secs()
                            ));
                        }
                        match &bar {
                            Some(b) => b.println(format!("note: {note}")),
                            None => eprintln!("note: {note}"),
                        }
                        break;
                    }
                }
            }
            if !unplaceable_after.is_zero()
                && Instant::now() >= next_placement_check
                && jobs
                    .iter()
                    .any(|j| j.state == JobState::Queued && !j.spec.requires.is_empty())
            {
                next_placement_check = Instant::now() + WORKER_CHECK_EVERY;
                let now = tokio::time::Instant::now();
                fail_unplaceable_among(
                    self.queue.as_ref(),
                    &mut placement,
                    unplaceable_after,
                    now,
                    &jobs,
                )
                .await?;
            }
            if local.is_none() && Instant::now() >= next_worker_check {
                next_worker_check = Instant::now() + WORKER_CHECK_EVERY;
                if !has_live_worker(self.queue.as_ref()).await? {
                    if can_run_locally {
                        // The jobs' base queues: the worker leases the routes its labels satisfy.
                        let queues: BTreeSet<String> = jobs
                            .iter()
                            .map(|j| {
                                skillforge_engine::labels::parse_route(&j.spec.queue)
                                    .0
                                    .to_owned()
                            })
                            .collect();
                        local = Some(
                            self.start_local_worker(queues.into_iter().collect(), health.clone()),
                        );
                    } else if !noted_no_worker
                        && started.elapsed() >= NO_WORKER_NOTE_AFTER
                        && jobs.iter().any(|j| j.state == JobState::Queued)
                    {
                        noted_no_worker = true;
                        let note = self.no_worker_note(ids);
                        match &bar {
                            Some(b) => b.println(note),
                            None => eprintln!("{note}"),
                        }
                    }
                }
            }
            let until_check = if local.is_none() {
                next_worker_check.saturating_duration_since(Instant::now())
            } else {
                POLL_MAX
            };
            let timeout = delay.min(until_check.max(POLL_FIRST));
            // Jobs that all run in the in-process worker end with its (in-process) finish: the
            // wait need not run the embedded queue's poll for other processes' commits (a
            // change made elsewhere, a reap, is still seen at the fallback re-read).
            let all_here = local.as_ref().is_some_and(|(_, _, id)| {
                jobs.iter().filter(|j| !is_finished(j)).all(|j| {
                    j.state == JobState::Running
                        && j.lease.as_ref().is_some_and(|l| &l.owner_worker == id)
                })
            });
            if all_here {
                self.queue.changed_here_since(seen, timeout).await;
            } else {
                self.queue.changed_since(seen, timeout).await;
            }
            delay = (delay * 2).min(POLL_MAX);
        };
        if let Some(b) = bar {
            b.finish_and_clear();
        }
        // The in-process worker stops (its attempts' scratch dirs removed, its presence
        // released) while the results are ingested, and is joined before the jobs are returned.
        let stopping = local.map(|(stop, handle, _)| {
            stop.cancel();
            handle
        });
        let applied = self.until_applied(&jobs).await;
        if let Some(handle) = stopping {
            let _ = handle.await;
        }
        Ok(applied?.then_some(jobs))
    }

    /// Ingests until every job of `jobs` (all finished) has its result applied: recorded in
    /// this control plane's store by its family's handler, or acknowledged by another control
    /// plane on the queue. This is the port's contract on both backends: once `wait` returns,
    /// a step reads the job's effects, never polls for them.
    ///
    /// Returns false as soon as one of them is no longer finished: ingestion put it back in the
    /// queue to run again (an idempotent job whose outputs expired), so it is to be waited for.
    ///
    /// # Errors
    /// The queue's or store's; [`EngineError::Backend`] naming the jobs whose results could not
    /// be applied within [`APPLY_DEADLINE`] (a handler that keeps failing, logged by ingestion).
    async fn until_applied(&self, jobs: &[Job]) -> Result<bool, EngineError> {
        let store = self.store().await?;
        let handlers = families::for_home(&self.ctx.home);
        let deadline = Instant::now() + APPLY_DEADLINE;
        let mut delay = POLL_FIRST;
        // A result its handler cannot apply waits out a backoff (logged once per step), not
        // offered again on every poll: a handler that keeps failing was logged thousands of
        // times a minute.
        let mut ingestion = Ingestion::with_backoff(APPLY_RETRY_FIRST, APPLY_RETRY_MAX);
        loop {
            let seen = self.queue.change_seq();
            ingestion
                .pass(self.queue.as_ref(), &store, &handlers)
                .await?;
            let mut unapplied = Vec::new();
            for job in jobs {
                if !is_applied(&store, job).await? {
                    unapplied.push(job.id.as_str());
                }
            }
            if unapplied.is_empty() {
                return Ok(true);
            }
            for id in &unapplied {
                if self
                    .queue
                    .get(id)
                    .await?
                    .is_some_and(|job| !is_finished(&job))
                {
                    return Ok(false);
                }
            }
            // A result no longer pending was acknowledged by another control plane (a `serve`
            // over the same queue with another store): applied there.
            let pending = self
                .queue
                .pending_results(skillforge_engine::ingest::PASS_BATCH)
                .await?;
            if pending.len() < skillforge_engine::ingest::PASS_BATCH {
                unapplied.retain(|id| pending.iter().any(|p| p.id == *id));
                if unapplied.is_empty() {
                    return Ok(true);
                }
            }
            if Instant::now() >= deadline {
                return Err(EngineError::Backend {
                    backend: "store",
                    message: format!(
                        "the result of job {} could not be applied within {} s (the log above names why); \
                         it stays pending and `skillforge serve` applies it once it can",
                        unapplied.join(", "),
                        APPLY_DEADLINE.as_secs()
                    ),
                });
            }
            self.queue.changed_since(seen, delay).await;
            delay = (delay * 2).min(POLL_MAX);
        }
    }

    /// The error for a waited job the queue does not have (issue 32 item 5): pruned (its
    /// tombstone says so) or never known ⇒ [`EngineError::NotFound`]; read earlier in this wait,
    /// or recorded by this home's store as enqueued ⇒ [`EngineError::Lost`], saying how to
    /// enqueue it again — never that it stays in the queue.
    async fn missing(&self, id: &str, seen_in_this_wait: bool) -> EngineError {
        match self.queue.tombstone(id).await {
            Ok(Some(_)) => return EngineError::NotFound(id.to_owned()),
            Ok(None) => {}
            Err(e) => return e,
        }
        let spec_kept = match self.store().await {
            Ok(store) => skillforge_store::submitted::spec_of(store.pool(), id)
                .await
                .ok()
                .flatten()
                .is_some(),
            Err(_) => false,
        };
        if !seen_in_this_wait && !spec_kept {
            return EngineError::NotFound(id.to_owned());
        }
        let what_now = if spec_kept {
            "`skillforge jobs resubmit-lost` enqueues it again from the spec this home's store kept (running the \
             command again submits it anew)"
        } else {
            "running the command again submits it anew"
        };
        EngineError::Lost {
            job_id: id.to_owned(),
            what_now: what_now.to_owned(),
        }
    }

    fn no_worker_note(&self, ids: &[String]) -> String {
        let queue = match &self.ctx.queue_url {
            skillforge_engine::open::QueueUrl::Redis(u) => {
                format!(" --queue {}", skillforge_engine::redact::redact_urls(u))
            }
            skillforge_engine::open::QueueUrl::Sqlite(_) => String::new(),
        };
        let which = if ids.len() == 1 {
            format!("job {}", ids[0])
        } else {
            format!("{} jobs", ids.len())
        };
        format!(
            "note: no live worker holds a presence lock on this queue; {which} waits until one runs \
             (start one with `skillforge{queue} worker`)"
        )
    }

    fn start_local_worker(
        &self,
        queues: Vec<String>,
        health: Arc<WorkerHealth>,
    ) -> (CancellationToken, tokio::task::JoinHandle<()>, String) {
        let mut config = WorkerConfig::new("local", self.ctx.scratch_root());
        config.queues = queues;
        // What this machine offers, as a standalone worker detects it: a job requiring more
        // waits (with the routing note) for a worker that has it.
        config.labels = skillforge_engine::labels::normalize(&skillforge_engine::labels::detect());
        config.health = Some(health);
        config.concurrency = self.ctx.config.worker.concurrency.unwrap_or(4);
        config.grace = Duration::from_secs(2);
        // A bad retention setting is reported by `serve` and `worker`; the short-lived local
        // worker then just prunes nothing.
        config.retention = self.ctx.config.queue.retention().ok();
        // A one-shot worker: its presence lock, reaper and pruner start one reap period in, so
        // a job done sooner (a `verify`, a short `submit --wait`) is leased without their writes
        // queued before it; a longer wait gets them then (stale jobs recovered, presence shown).
        // Long-lived `serve` and `worker` processes run them from their start.
        config.housekeeping_after = config.reap_every.unwrap_or_default();
        let worker = Worker::new(config, self.queue.clone(), crate::runners::all());
        let id = worker.identity().worker_id.clone();
        let stop = CancellationToken::new();
        let s = stop.clone();
        (
            stop,
            tokio::spawn(async move {
                worker.run(s).await;
            }),
            id,
        )
    }
}

/// Lease calls of the in-process worker failing this many times in a row, while a waited job
/// is queued, end the wait: nothing else would run the job.
const LEASE_FAILURES_TO_GIVE_UP: u32 = 3;

/// Why the in-process worker cannot bring `jobs` to an end (issue 12 item 3: a full disk after
/// the enqueue): a result it could not deliver, or lease calls failing in a row while a job is
/// queued. The error names the queue's own message (for a full disk: the file and "disk").
fn local_worker_failure(
    backend: &'static str,
    health: &WorkerHealth,
    jobs: &[Job],
) -> Option<EngineError> {
    for job in jobs.iter().filter(|j| !is_finished(j)) {
        if let Some(e) = health.undelivered(&job.id) {
            let message = format!(
                "the in-process worker ran job {} but could not record its result: {e}; the job goes stale and \
                 the reaper recovers it once the queue can be written again",
                job.id
            );
            return Some(EngineError::Backend { backend, message });
        }
    }
    let queued = jobs.iter().any(|j| j.state == JobState::Queued);
    match health.lease_failing() {
        Some((n, e)) if queued && n >= LEASE_FAILURES_TO_GIVE_UP => Some(EngineError::Backend {
            backend,
            message: format!(
                "the in-process worker could not lease the job ({n} attempts in a row): {e}"
            ),
        }),
        _ => None,
    }
}

fn progress(what: &str, jobs: &[Job], n_done: usize) -> String {
    match jobs {
        [job] => format!(
            "{what} {} {} (attempt {}/{})",
            job.id, job.state, job.attempts, job.spec.max_attempts
        ),
        _ => {
            let running = jobs.iter().filter(|j| j.state == JobState::Running).count();
            format!("{what}: {n_done}/{} done, {running} running", jobs.len())
        }
    }
}

/// Whether some worker holds a presence lock whose heartbeat is within its period.
pub async fn has_live_worker(queue: &dyn QueueBackend) -> Result<bool, EngineError> {
    let now = queue.now_ms().await?;
    Ok(queue.leases().await?.iter().any(|l| {
        l.kind == LeaseKind::Lock
            && l.name.starts_with(PRESENCE_LOCK_PREFIX)
            && l.status(now) == LeaseStatus::Active
    }))
}

#[async_trait::async_trait]
impl StageJobs for CliJobs<'_> {
    async fn recorded_outputs(
        &self,
        job_id: &str,
    ) -> Result<Vec<skillforge_engine::transfer::OutputDir>, EngineError> {
        let store = self.store().await?;
        skillforge_stage::files::recorded_outputs(&store, job_id)
            .await
            .map_err(|e| EngineError::Backend {
                backend: "store",
                message: e.to_string(),
            })
    }

    async fn submit(&self, spec: &JobSpec) -> Result<Enqueued, EngineError> {
        skillforge_stage::submit_recorded(self.queue.as_ref(), &self.store().await?, spec).await
    }

    async fn get(&self, id: &str) -> Result<Option<Job>, EngineError> {
        self.queue.get(id).await
    }

    async fn restart(&self, id: &str, spec: &JobSpec, why: &str) -> Result<(), EngineError> {
        self.queue.retry_with_payload(id, &spec.payload).await?;
        if !self.ctx.json {
            eprintln!(
                "• the earlier attempt (job {id}) ended without effect ({why}); started it again with this command's settings and environment"
            );
        }
        Ok(())
    }

    async fn wait(&self, ids: &[String], what: &str) -> Result<Vec<Job>, EngineError> {
        self.wait_all(ids, what).await
    }
}

/// What [`submit_checked`] did.
#[derive(Debug, Clone)]
pub struct Submitted {
    /// The job (new, or the one its idempotency key names).
    pub enqueued: Enqueued,
    /// When the keyed job had ended because it could not run and was started again with this
    /// submit's payload: why it could not run then.
    pub restarted: Option<String>,
}

/// The one way a command submits a job outside a workflow step: a key already applied for a job
/// the queue lost is refused, [`enqueue_checked`], the job is recorded as this control plane's
/// pending work ([`skillforge_stage::record_pending`]: what `serve` names and resubmits when
/// the queue loses its data), as the stage port does; and a keyed job that ended because it
/// could not run (`not_runnable`) starts again with this submit's payload, saying so.
///
/// # Errors
/// As [`enqueue_checked`]; exit 2 for a key applied for a job the queue no longer has; exit 3
/// when the store cannot be opened.
pub async fn submit_checked(
    ctx: &Context,
    backend: &dyn QueueBackend,
    spec: &JobSpec,
) -> Result<Submitted, CliError> {
    if let Some(key) = &spec.idempotency_key {
        refuse_rerun_of_applied(ctx, backend, key).await?;
    }
    // The job's trace starts here when telemetry is on (its `traceparent` rides on the spec).
    let (spec, span) = skillforge_engine::telemetry::start_enqueue(spec);
    let spec = spec.as_ref();
    let enqueued = enqueue_checked(backend, spec).await;
    span.end(match &enqueued {
        Ok(e) => Ok((e.job_id.as_str(), e.created)),
        Err(e) => Err(&e.error),
    });
    let enqueued = enqueued?;
    let store = ctx.store().await?;
    skillforge_stage::record_pending(&store, &enqueued, spec).await;
    let restarted = if enqueued.created {
        None
    } else {
        restart_not_runnable(ctx, backend, &enqueued.job_id, spec).await?
    };
    Ok(Submitted {
        enqueued,
        restarted,
    })
}

/// When the keyed job `id` this submit returned ended `failed` or `dead` because it could not run
/// (`not_runnable`: a missing program, a runtime not logged in), starts a new attempt of it with
/// this submit's payload — its command, env and cwd, i.e. the current environment — and says so
/// on stderr; returns the old reason. Any other job is left as the queue returned it.
///
/// # Errors
/// Exit 3 when the queue fails.
async fn restart_not_runnable(
    ctx: &Context,
    backend: &dyn QueueBackend,
    id: &str,
    spec: &JobSpec,
) -> Result<Option<String>, CliError> {
    let Some(job) = backend.get(id).await? else {
        return Ok(None);
    };
    let reason = match (&job.state, job.outcome.as_ref().map(|o| &o.exit)) {
        (
            JobState::Failed | JobState::Dead,
            Some(skillforge_runner::ExitClass::NotRunnable { reason }),
        ) => reason.clone(),
        _ => return Ok(None),
    };
    backend
        .retry_with_payload(id, &spec.payload)
        .await
        .map_err(|e| match e {
            EngineError::NotFound(_) | EngineError::InvalidState { .. } => CliError::usage(e),
            other => CliError::env(other),
        })?;
    if !ctx.json {
        eprintln!(
            "(existing job {id} for idempotency key `{}` ended {} because it could not run: {reason}; started a new attempt with this submit's command and environment)",
            spec.idempotency_key.as_deref().unwrap_or_default(),
            job.state
        );
    }
    Ok(Some(reason))
}

/// Refuses (exit 2) a submit whose idempotency key the store shows applied for a job the queue
/// no longer has (a Redis namespace that lost its data): enqueueing would run the work again.
/// A key whose job the queue still has is left to the queue (it returns that job).
async fn refuse_rerun_of_applied(
    ctx: &Context,
    backend: &dyn QueueBackend,
    key: &str,
) -> Result<(), CliError> {
    // The check needs the store; a submit that cannot open it is not refused for that.
    let Ok(store) = ctx.store().await else {
        return Ok(());
    };
    let mut conn = store.pool().acquire().await.map_err(CliError::env)?;
    let applied = skillforge_store::applied::applied_by_key(&mut conn, key, "")
        .await
        .map_err(CliError::env)?;
    let Some(first) = applied else { return Ok(()) };
    // A job the queue still has, or pruned with its key still held by the tombstone, is returned by the queue.
    if backend.get(&first.job_id).await?.is_some()
        || backend.tombstone(&first.job_id).await?.is_some()
    {
        return Ok(());
    }
    Err(CliError::usage(anyhow!(
        "idempotency key `{key}` was already applied (job {}, {} at {}), and the queue no longer has that job \
         (pruned under [queue] keep_succeeded / keep_failed, or did it lose its data?): refusing to run the work again",
        first.job_id,
        first.state,
        first.applied_at
    )))
}

/// Enqueues `spec`; when its idempotency key names an existing job, checks that the existing job
/// asked for the same thing (same runner and payload), so a key reused for different work is
/// refused (exit 2) instead of silently returning the other job's result. A key whose job was
/// pruned (its tombstone holds the key) returns that job's id unchecked.
///
/// # Errors
/// Exit 2 for a key reused with a different payload; exit 3 when the queue is unreachable.
async fn enqueue_checked(backend: &dyn QueueBackend, spec: &JobSpec) -> Result<Enqueued, CliError> {
    let enqueued = backend.enqueue(spec).await?;
    if !enqueued.created {
        let Some(existing) = backend.get(&enqueued.job_id).await? else {
            // Pruned under the queue's retention: its tombstone holds the key, not the payload,
            // so the caller reports the pruned job (there is nothing to compare with).
            if backend.tombstone(&enqueued.job_id).await?.is_some() {
                return Ok(enqueued);
            }
            return Err(CliError::env(anyhow!("job `{}` vanished", enqueued.job_id)));
        };
        if existing.spec.kind != spec.kind
            || (existing.spec.payload != spec.payload && !is_env_retry(&existing, spec))
        {
            return Err(CliError::usage(anyhow!(
                "idempotency key `{}` already belongs to job {} with a different {} (use another key, or the same command)",
                spec.idempotency_key.as_deref().unwrap_or_default(),
                existing.id,
                if existing.spec.kind != spec.kind {
                    "runner"
                } else {
                    "command or payload"
                }
            )));
        }
    }
    Ok(enqueued)
}

/// Whether `spec` differs from the keyed job `existing` only in its payload's `env`, and
/// `existing` ended `failed`/`dead` because it could not run (`not_runnable`): a submit fixing
/// the environment (a token set now) is a new attempt of the same work, not another command.
pub fn is_env_retry(existing: &Job, spec: &JobSpec) -> bool {
    let could_not_run = matches!(existing.state, JobState::Failed | JobState::Dead)
        && matches!(
            existing.outcome.as_ref().map(|o| &o.exit),
            Some(skillforge_runner::ExitClass::NotRunnable { .. })
        );
    let without_env = |payload: &serde_json::Value| {
        let mut p = payload.clone();
        if let Some(obj) = p.as_object_mut() {
            obj.remove("env");
        }
        p
    };
    could_not_run
        && existing.spec.kind == spec.kind
        && without_env(&existing.spec.payload) == without_env(&spec.payload)
}

/// Waits for job `id` on `backend` through a [`CliJobs`] (its liveness rule, its local worker
/// unless `local_worker` is false, its ingestion); returns the finished job.
///
/// # Errors
/// Exit 2 for an unknown job; exit 3 when the queue or store fails.
pub async fn await_job(
    ctx: &Context,
    backend: &Arc<dyn QueueBackend>,
    id: &str,
    local_worker: bool,
) -> Result<Job, CliError> {
    // The store is needed once the job has finished (to ingest its result): it opens while the
    // wait starts the in-process worker and the job runs, not before.
    let jobs = CliJobs {
        ctx,
        queue: backend.clone(),
        store: None,
        local_worker,
    };
    // A store that cannot be opened ends the wait at once (exit 3), as before the wait began; a
    // job the in-process worker had leased by then goes stale and the reaper recovers it.
    let (_, job) = tokio::try_join!(ctx.store(), jobs.wait_one(id))?;
    Ok(job)
}
