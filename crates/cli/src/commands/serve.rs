//! `skillforge serve`: the control plane — reaper and result ingestion — until SIGTERM/SIGINT.

use std::time::Duration;

use clap::Args;
use skillforge_engine::ingest::{RecordOnly, run_ingestion};
use skillforge_engine::reaper::{DEFAULT_REAP_EVERY, run_reaper};

use crate::commands::signals::shutdown_on_signal;
use crate::commands::worker::queue_label;
use crate::context::Context;
use crate::exit::{CliResult, OK};

/// Arguments of `skillforge serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Milliseconds between result-ingestion passes.
    #[arg(long, default_value_t = 200)]
    ingest_every_ms: u64,
}

/// Runs the reaper and the ingestion loop until a signal.
pub async fn run(ctx: &Context, args: ServeArgs) -> CliResult {
    let backend = ctx.queue().await?;
    let store = ctx.store().await?;
    let shutdown = shutdown_on_signal();
    eprintln!("control plane on {} with store {}", queue_label(ctx), ctx.home.display());
    let reaper = run_reaper(backend.as_ref(), DEFAULT_REAP_EVERY, shutdown.clone());
    let ingestion = run_ingestion(
        backend.as_ref(),
        &store,
        &RecordOnly,
        Duration::from_millis(args.ingest_every_ms.max(10)),
        shutdown.clone(),
    );
    tokio::join!(reaper, ingestion);
    Ok(OK)
}
