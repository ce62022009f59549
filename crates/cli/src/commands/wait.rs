//! Waiting for a job from a CLI command: an in-process worker when the embedded queue has none, progress, ingestion.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::anyhow;
use skillforge_engine::ingest::ingest_once;
use skillforge_engine::worker::{PRESENCE_LOCK_PREFIX, Worker, WorkerConfig};
use skillforge_engine::{Enqueued, EngineError, Job, JobSpec, JobState, LeaseKind, LeaseStatus, QueueBackend};
use skillforge_workflows::families::Families;
use tokio_util::sync::CancellationToken;

use crate::context::Context;
use crate::exit::CliError;

/// Waits until job `id` is terminal (or parked `stale`) and returns it.
///
/// On the embedded queue with `local_worker` set, an in-process worker serves `queue` whenever no
/// other live worker holds a presence lock — checked at the start and again every second, so a
/// worker (or an earlier waiting command) that died mid-wait does not leave this one waiting on a
/// lock that has not gone stale yet. Otherwise, when no live worker is seen for a few seconds,
/// a one-time note on stderr says how to start one. On the embedded queue this process is the
/// control plane, so the result is applied to the store before returning.
///
/// # Errors
/// Queue or store unreachable (exit 3); unknown job (exit 2).
pub async fn await_job(
    ctx: &Context,
    backend: &Arc<dyn QueueBackend>,
    id: &str,
    queue: &str,
    local_worker: bool,
) -> Result<Job, CliError> {
    let can_run_locally = ctx.queue_url.is_embedded() && local_worker;
    let mut local = None;
    let bar = (!ctx.json && std::io::stderr().is_terminal()).then(|| {
        let b = indicatif::ProgressBar::new_spinner();
        b.enable_steady_tick(Duration::from_millis(120));
        b
    });
    let started = Instant::now();
    let mut next_worker_check = Instant::now();
    let mut noted_no_worker = false;
    let mut delay = Duration::from_millis(5);
    let job = loop {
        let job = backend.get(id).await?.ok_or_else(|| CliError::usage(anyhow!("no job `{id}`")))?;
        if job.state.is_terminal() || job.state == JobState::Stale {
            break job;
        }
        if let Some(b) = &bar {
            b.set_message(format!("job {} {} (attempt {}/{})", job.id, job.state, job.attempts, job.spec.max_attempts));
        }
        if local.is_none() && Instant::now() >= next_worker_check {
            next_worker_check = Instant::now() + Duration::from_secs(1);
            if !has_live_worker(backend.as_ref()).await? {
                if can_run_locally {
                    local = Some(start_local_worker(ctx, backend.clone(), queue));
                } else if !noted_no_worker && started.elapsed() >= Duration::from_secs(3) && job.state == JobState::Queued {
                    noted_no_worker = true;
                    let note = format!(
                        "note: no live worker holds a presence lock on this queue; job {id} waits until one runs \
                         (start one with `skillforge{} worker`)",
                        match &ctx.queue_url {
                            skillforge_engine::open::QueueUrl::Redis(u) => format!(" --queue {u}"),
                            skillforge_engine::open::QueueUrl::Sqlite(_) => String::new(),
                        }
                    );
                    match &bar {
                        Some(b) => b.println(note),
                        None => eprintln!("{note}"),
                    }
                }
            }
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_millis(250));
    };
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if let Some((stop, handle)) = local {
        stop.cancel();
        let _ = handle.await;
    }
    if ctx.queue_url.is_embedded() {
        let store = ctx.store().await?;
        ingest_once(backend.as_ref(), &store, &Families::for_home(&ctx.home)).await?;
    }
    Ok(job)
}

/// Whether some worker holds a non-stale presence lock on this queue backend.
async fn has_live_worker(backend: &dyn QueueBackend) -> Result<bool, EngineError> {
    let now = backend.now_ms().await?;
    Ok(backend.leases().await?.iter().any(|l| {
        l.kind == LeaseKind::Lock && l.name.starts_with(PRESENCE_LOCK_PREFIX) && l.status(now) != LeaseStatus::Stale
    }))
}

fn start_local_worker(
    ctx: &Context,
    backend: Arc<dyn QueueBackend>,
    queue: &str,
) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let mut config = WorkerConfig::new("local", ctx.scratch_root());
    config.queues = vec![queue.to_owned()];
    config.concurrency = ctx.config.worker.concurrency.unwrap_or(4);
    config.grace = Duration::from_secs(2);
    let stop = CancellationToken::new();
    crate::runners::clean_leftovers(&ctx.scratch_root());
    let worker = Worker::new(config, backend, crate::runners::all());
    let s = stop.clone();
    let handle = tokio::spawn(async move {
        worker.run(s).await;
    });
    (stop, handle)
}

/// Enqueues `spec`; when its idempotency key names an existing job, checks that the existing job
/// asked for the same thing (same runner and payload), so a key reused for different work is
/// refused (exit 2) instead of silently returning the other job's result.
///
/// # Errors
/// Exit 2 for a key reused with a different payload; exit 3 when the queue is unreachable.
pub async fn enqueue_checked(backend: &dyn QueueBackend, spec: &JobSpec) -> Result<Enqueued, CliError> {
    let enqueued = backend.enqueue(spec).await?;
    if !enqueued.created {
        let existing = backend
            .get(&enqueued.job_id)
            .await?
            .ok_or_else(|| CliError::env(anyhow!("job `{}` vanished", enqueued.job_id)))?;
        if existing.spec.kind != spec.kind || existing.spec.payload != spec.payload {
            return Err(CliError::usage(anyhow!(
                "idempotency key `{}` already belongs to job {} with a different {} (use another key, or the same command)",
                spec.idempotency_key.as_deref().unwrap_or_default(),
                existing.id,
                if existing.spec.kind != spec.kind { "runner" } else { "command or payload" }
            )));
        }
    }
    Ok(enqueued)
}
