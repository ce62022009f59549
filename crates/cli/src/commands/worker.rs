//! `skillforge worker`: lease and run jobs until SIGTERM/SIGINT.

use std::time::Duration;

use clap::Args;
use skillforge_engine::worker::{Worker, WorkerConfig};

use crate::control::args::queue_label;
use crate::control::signals::shutdown_on_signal;
use crate::context::Context;
use crate::exit::{CliError, CliResult, OK};
use crate::output::print_json;

/// Arguments of `skillforge worker`.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// Jobs run at once (default `[worker] concurrency`, else 4).
    #[arg(long)]
    concurrency: Option<usize>,
    /// Worker name; a random suffix makes the identity unique per process (default `worker`).
    #[arg(long)]
    name: Option<String>,
    /// Queue names to serve, comma-separated.
    #[arg(long = "queues", value_delimiter = ',', default_value = "default")]
    queues: Vec<String>,
    /// Seconds running jobs may go on after SIGTERM before they are killed and handed back.
    #[arg(long = "grace", value_name = "SECS")]
    grace_secs: Option<u64>,
}

/// Runs the worker until a signal, then prints what it did. Exits 3 (environment) naming the
/// jobs whose leases could not be handed back (left to go stale), e.g. with the queue down.
pub async fn run(ctx: &Context, args: WorkerArgs) -> CliResult {
    let backend = ctx.queue().await?;
    let mut config = WorkerConfig::new(
        args.name.or_else(|| ctx.config.worker.name.clone()).unwrap_or_else(|| "worker".to_owned()),
        ctx.scratch_root(),
    );
    config.queues = args.queues;
    config.retention = Some(ctx.config.queue.retention()?);
    config.concurrency = args.concurrency.or(ctx.config.worker.concurrency).unwrap_or(4).max(1);
    if let Some(g) = args.grace_secs.or(ctx.config.worker.grace_secs) {
        config.grace = Duration::from_secs(g);
    }
    let worker = Worker::new(config, backend, crate::runners::all());
    let identity = worker.identity().clone();
    eprintln!("worker {} (host {}, pid {}) on {}", identity.worker_id, identity.host, identity.pid, queue_label(ctx));
    let report = worker.run(shutdown_on_signal()).await;
    if ctx.json {
        print_json(&serde_json::json!({
            "worker_id": identity.worker_id,
            "finished": report.finished,
            "fenced": report.fenced,
            "released": report.released,
            "left_stale": report.left_stale.iter().map(|(id, token)| serde_json::json!({"job_id": id, "fencing_token": token})).collect::<Vec<_>>(),
        }));
    } else {
        eprintln!(
            "worker {} stopped: {} finished, {} rejected by fencing, {} handed back",
            identity.worker_id, report.finished, report.fenced, report.released
        );
    }
    if report.left_stale.is_empty() {
        return Ok(OK);
    }
    let ids: Vec<&str> = report.left_stale.iter().map(|(id, _)| id.as_str()).collect();
    Err(CliError::env(anyhow::anyhow!(
        "{} lease(s) could not be handed back ({}): they go stale after their stale_after and the reaper recovers them",
        ids.len(),
        ids.join(", ")
    )))
}
