//! `skillforge worker`: lease and run jobs until SIGTERM/SIGINT.

use std::time::Duration;

use clap::Args;
use skillforge_engine::worker::{Worker, WorkerConfig};

use crate::context::Context;
use crate::control::args::queue_label;
use crate::control::signals::shutdown_on_signal;
use crate::exit::{CliError, CliResult, OK};
use crate::output::print_json;

/// Arguments of `skillforge worker`.
#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// Jobs run at once, at least 1 (default `[worker] concurrency`, else 4).
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
    /// A label this worker advertises, `KEY=VALUE` or `KEY` (repeatable): it also runs jobs
    /// that require it. `os=…`, `arch=…` and `tool:<name>` for tools on PATH are added.
    #[arg(long = "label", value_name = "LABEL")]
    labels: Vec<String>,
    /// Serve `GET /metrics`, `/health` and `/ready` on this address (e.g. `127.0.0.1:9187`): this
    /// worker's leases, results and heartbeats, and the queue's figures; default `[worker]
    /// metrics`, else off.
    #[arg(long = "metrics", value_name = "ADDR")]
    metrics: Option<String>,
}

/// Runs the worker until a signal, then prints what it did. Exits 3 (environment) naming the
/// jobs whose leases could not be handed back (left to go stale), e.g. with the queue down.
///
/// # Errors
/// Exit 2 for a concurrency of 0 (`--concurrency` or `[worker] concurrency`), before the queue
/// is opened; exit 3 when the queue cannot be opened or its server loses jobs (Redis
/// `maxmemory-policy` other than `noeviction`, named with the fix).
pub async fn run(ctx: &Context, args: WorkerArgs) -> CliResult {
    let concurrency = concurrency(args.concurrency, ctx.config.worker.concurrency)?;
    // Bound before the queue is opened: a bad address is the user's input (exit 2).
    let listener = match args
        .metrics
        .as_deref()
        .or(ctx.config.worker.metrics.as_deref())
    {
        Some(addr) => Some(crate::control::http::bind("--metrics", addr).await?),
        None => None,
    };
    let backend = ctx.queue_for_service().await?;
    let mut config = WorkerConfig::new(
        args.name
            .or_else(|| ctx.config.worker.name.clone())
            .unwrap_or_else(|| "worker".to_owned()),
        ctx.scratch_root(),
    );
    config.queues = args.queues;
    config.retention = Some(ctx.config.queue.retention()?);
    config.concurrency = concurrency;
    if let Some(g) = args.grace_secs.or(ctx.config.worker.grace_secs) {
        config.grace = Duration::from_secs(g);
    }
    let mut labels = args.labels;
    labels.extend(skillforge_engine::labels::detect());
    config.labels = skillforge_engine::labels::normalize(&labels);
    let health = std::sync::Arc::new(skillforge_engine::health::WorkerHealth::default());
    config.health = Some(health.clone());
    let worker = Worker::new(config, backend.clone(), crate::runners::all());
    let identity = worker.identity().clone();
    let labels_shown = skillforge_engine::labels::normalize(&labels).join(", ");
    eprintln!(
        "worker {} (host {}, pid {}) on {}; labels {}",
        identity.worker_id,
        identity.host,
        identity.pid,
        queue_label(ctx),
        labels_shown
    );
    let shutdown = shutdown_on_signal();
    let http = listener.map(|listener| {
        if let Ok(addr) = listener.local_addr() {
            eprintln!("metrics on http://{addr}/metrics (and /health, /ready)");
        }
        let state = crate::control::metrics::MetricsState {
            backend,
            store: None,
            optimize_home: None,
            worker: Some(crate::control::metrics::WorkerView {
                worker_id: identity.worker_id.clone(),
                health,
            }),
        };
        let app = crate::control::http::router([crate::control::metrics::router(state)]);
        tokio::spawn(crate::control::http::serve(listener, app, shutdown.clone()))
    });
    let report = worker.run(shutdown.clone()).await;
    if let Some(server) = http {
        shutdown.cancel();
        let _ = server.await;
    }
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
    let ids: Vec<&str> = report
        .left_stale
        .iter()
        .map(|(id, _)| id.as_str())
        .collect();
    Err(CliError::env(anyhow::anyhow!(
        "{} lease(s) could not be handed back ({}): they go stale after their stale_after and the reaper recovers them",
        ids.len(),
        ids.join(", ")
    )))
}

/// The worker's concurrency: `--concurrency`, else `[worker] concurrency`, else 4.
///
/// # Errors
/// Exit 2 naming where a 0 came from: a worker that may run no job would idle forever holding a
/// presence lock, looking live to every waiter.
fn concurrency(flag: Option<usize>, configured: Option<usize>) -> Result<usize, CliError> {
    match (flag, configured) {
        (Some(0), _) => Err(CliError::usage(anyhow::anyhow!(
            "--concurrency 0 would run no job: give at least 1"
        ))),
        (None, Some(0)) => Err(CliError::usage(anyhow::anyhow!(
            "[worker] concurrency = 0 in config.toml would run no job: set at least 1"
        ))),
        (Some(n), _) | (None, Some(n)) => Ok(n),
        (None, None) => Ok(4),
    }
}
