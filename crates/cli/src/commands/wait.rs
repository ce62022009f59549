//! Waiting for a job from a CLI command: an in-process worker when the embedded queue has none, progress, ingestion.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::Duration;

use anyhow::anyhow;
use skillforge_engine::ingest::ingest_once;
use skillforge_engine::worker::{PRESENCE_LOCK_PREFIX, Worker, WorkerConfig};
use skillforge_engine::{EngineError, Job, JobState, LeaseKind, LeaseStatus, QueueBackend};
use tokio_util::sync::CancellationToken;

use crate::context::Context;
use crate::exit::CliError;

/// Waits until job `id` is terminal (or parked `stale`) and returns it.
///
/// On the embedded queue, when no live worker holds a presence lock and `local_worker` is set,
/// an in-process worker serves `queue` for the duration. On the embedded queue this process is
/// the control plane, so the result is applied to the store before returning.
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
    let local = if ctx.queue_url.is_embedded() && local_worker && !has_live_worker(backend.as_ref()).await? {
        Some(start_local_worker(ctx, backend.clone(), queue))
    } else {
        None
    };
    let job = poll_terminal(backend.as_ref(), id, !ctx.json).await;
    if let Some((stop, handle)) = local {
        stop.cancel();
        let _ = handle.await;
    }
    let job = job?;
    if ctx.queue_url.is_embedded() {
        let store = ctx.store().await?;
        ingest_once(backend.as_ref(), &store, &crate::commands::serve::WorkflowHandlers::new(&ctx.home)).await?;
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

/// Polls until the job is terminal (or parked `stale`), showing a spinner on a terminal.
async fn poll_terminal(backend: &dyn QueueBackend, id: &str, progress: bool) -> Result<Job, CliError> {
    let bar = (progress && std::io::stderr().is_terminal()).then(|| {
        let b = indicatif::ProgressBar::new_spinner();
        b.enable_steady_tick(Duration::from_millis(120));
        b
    });
    let mut delay = Duration::from_millis(5);
    loop {
        let job = backend.get(id).await?.ok_or_else(|| CliError::usage(anyhow!("no job `{id}`")))?;
        if let Some(b) = &bar {
            b.set_message(format!("job {} {} (attempt {}/{})", job.id, job.state, job.attempts, job.spec.max_attempts));
        }
        if job.state.is_terminal() || job.state == JobState::Stale {
            if let Some(b) = bar {
                b.finish_and_clear();
            }
            return Ok(job);
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_millis(250));
    }
}
