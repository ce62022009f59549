//! Measures the embedded queue's bytes per job (issue 19): fills `N` no-op jobs, copies the file
//! (`<path>.queued`), drains them with an in-process worker, acknowledges every result, and
//! prints pages in use × page size per job after a checkpoint, as `bench --figures scale` does.
//!
//! `cargo run --release -p skillforge-engine --example sqlite_bytes -- <path> <n>`

use std::sync::Arc;
use std::time::Duration;

use skillforge_engine::backend::prelude::*;
use skillforge_engine::job::JobSpec;
use skillforge_engine::registry::RunnerRegistry;
use skillforge_engine::sqlite::SqliteBackend;
use skillforge_engine::worker::{Worker, WorkerConfig};
use skillforge_runner::{ExitClass, RunContext, RunOutcome, RunSpec, Runner, RunnerError};
use sqlx::Connection;

struct Noop;

#[async_trait::async_trait]
impl Runner for Noop {
    fn kind(&self) -> &'static str {
        "noop"
    }
    async fn run(&self, _spec: &RunSpec, _ctx: &RunContext) -> Result<RunOutcome, RunnerError> {
        Ok(RunOutcome {
            exit: ExitClass::Passed,
            exit_code: Some(0),
            duration_ms: 0,
            stdout_tail: String::new(),
            stderr_tail: String::new(),
            detail: serde_json::Value::Null,
        })
    }
}

async fn used(path: &std::path::Path) -> f64 {
    let opts = sqlx::sqlite::SqliteConnectOptions::new().filename(path);
    let mut c = sqlx::SqliteConnection::connect_with(&opts).await.unwrap();
    sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
        .execute(&mut c)
        .await
        .unwrap();
    let pages: i64 = sqlx::query_scalar("PRAGMA page_count")
        .fetch_one(&mut c)
        .await
        .unwrap();
    let free: i64 = sqlx::query_scalar("PRAGMA freelist_count")
        .fetch_one(&mut c)
        .await
        .unwrap();
    let size: i64 = sqlx::query_scalar("PRAGMA page_size")
        .fetch_one(&mut c)
        .await
        .unwrap();
    c.close().await.unwrap();
    ((pages - free) * size) as f64
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = std::path::PathBuf::from(&args[1]);
    let n: u64 = args[2].parse().unwrap();
    let b = SqliteBackend::open(&path).await.unwrap();
    let base = used(&path).await;
    let spec = JobSpec::new("noop", serde_json::json!({}));
    let mut left = n;
    while left > 0 {
        let k = left.min(1000);
        b.enqueue_batch(&vec![spec.clone(); k as usize])
            .await
            .unwrap();
        left -= k;
    }
    let queued = used(&path).await;
    std::fs::copy(&path, path.with_extension("queued")).unwrap();
    let backend: Arc<dyn QueueBackend> = Arc::new(b.clone());
    let scratch = tempfile::tempdir().unwrap();
    let mut config = WorkerConfig::new("bench-drain", scratch.path().to_owned());
    config.concurrency = 64;
    let worker = Worker::new(
        config,
        backend.clone(),
        RunnerRegistry::new().with(Arc::new(Noop)),
    );
    let stop = tokio_util::sync::CancellationToken::new();
    let handle = tokio::spawn(worker.run(stop.clone()));
    loop {
        let opts = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(&path)
            .read_only(true);
        let mut c = sqlx::SqliteConnection::connect_with(&opts).await.unwrap();
        let busy: i64 = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM jobs WHERE state = 'queued') OR EXISTS (SELECT 1 FROM jobs WHERE state = 'running')",
        )
        .fetch_one(&mut c)
        .await
        .unwrap();
        c.close().await.unwrap();
        if busy == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.cancel();
    handle.await.unwrap();
    loop {
        let pending = backend.pending_results(1000).await.unwrap();
        if pending.is_empty() {
            break;
        }
        futures::future::try_join_all(
            pending
                .iter()
                .map(|j| backend.ack_result(&j.id, j.fencing_token)),
        )
        .await
        .unwrap();
    }
    let finished = used(&path).await;
    println!(
        "n={n} queued_bytes_per_job={:.0} finished_bytes_per_job={:.0}",
        (queued - base) / n as f64,
        (finished - base) / n as f64
    );
}
