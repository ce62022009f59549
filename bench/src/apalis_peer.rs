//! The embedded peer: apalis-sqlite 1.0 (WAL file), a no-op handler at concurrency 50.

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use apalis::prelude::*;
use apalis_sqlite::{Config, SqliteStorage};
use serde::{Deserialize, Serialize};
use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use tokio::process::Command;

use crate::model::{LatencyTrial, ThroughputTrial};
use crate::sf::Probe;
use crate::util::{self, wall_us};

/// Explicit queue name (apalis defaults to the Rust type name).
const QUEUE: &str = "bench";
/// Poll period of the worker: the "10 ms polling" variant of peers.md (the default strategy
/// only wakes on the worker's heartbeat).
pub const POLL: Duration = Duration::from_millis(10);

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BenchJob {
    sent_us: Option<f64>,
}

async fn handle(job: BenchJob, probe: Data<Arc<Probe>>) -> Result<(), BoxDynError> {
    probe.hit(job.sent_us);
    Ok(())
}

async fn pool(path: &Path) -> Result<SqlitePool> {
    let opts = SqliteConnectOptions::new().filename(path).create_if_missing(true);
    let pool = SqlitePoolOptions::new().connect_with(opts).await?;
    // WAL, synchronous = OFF, migrations (apalis-sqlite's own setup).
    SqliteStorage::setup(&pool).await?;
    Ok(pool)
}

fn config(concurrency: usize) -> Config {
    Config::default().queue(QUEUE).batch_size(concurrency)
}

async fn count_done(pool: &SqlitePool) -> Result<u64> {
    let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM Jobs WHERE status = 'Done'").fetch_one(pool).await?;
    Ok(n as u64)
}

struct Running {
    stop: tokio_util::sync::CancellationToken,
    handle: tokio::task::JoinHandle<Result<(), WorkerError>>,
}

fn start_worker(pool: &SqlitePool, probe: Arc<Probe>, concurrency: usize) -> Running {
    let backend = SqliteStorage::<BenchJob>::new(pool).with_config(config(concurrency)).poll_with_interval(POLL);
    let worker = WorkerBuilder::new(format!("bench-apalis-{:08x}", rand_u32()))
        .backend(backend)
        .data(probe)
        .concurrency(concurrency)
        .build(handle);
    let stop = tokio_util::sync::CancellationToken::new();
    let signal = stop.clone();
    let handle = tokio::spawn(worker.run_until(async move {
        signal.cancelled().await;
        Ok::<(), WorkerError>(())
    }));
    Running { stop, handle }
}

fn rand_u32() -> u32 {
    (wall_us() as u64 % 4_294_967_291) as u32
}

impl Running {
    async fn stop(self) {
        self.stop.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(10), self.handle).await;
    }
}

/// When apalis-sqlite's `setup` runs in the throughput figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setup {
    /// Before the bulk push and again when the worker starts, as an apalis worker process does
    /// on startup. Its `PRAGMA optimize` then analyzes the populated `Jobs` table, so the
    /// planner runs the ack (`UPDATE … FROM json_each … WHERE Jobs.id = … AND lock_by = ?`)
    /// through the `id` index. The figure's configuration.
    AtWorkerStart,
    /// Only before the push, on an empty table (the first runs' configuration): without
    /// statistics the planner runs every ack through the `lock_by` index, i.e. over every job
    /// this worker ever completed, so the drain slows down quadratically (~230 jobs/s at N = 20 000).
    BeforePushOnly,
}

/// Figure 1 for apalis-sqlite (fresh file in `dir`).
pub async fn throughput(dir: &Path, n: u64, concurrency: usize, setup: Setup) -> Result<ThroughputTrial> {
    let path = dir.join("apalis.db");
    let pool = pool(&path).await?;
    let mut storage = SqliteStorage::<BenchJob>::new(&pool).with_config(config(concurrency));
    let mut left = n;
    while left > 0 {
        let k = left.min(1000);
        storage
            .push_bulk(vec![BenchJob { sent_us: None }; k as usize])
            .await
            .map_err(|e| anyhow::anyhow!("apalis push: {e:?}"))?;
        left -= k;
    }
    if setup == Setup::AtWorkerStart {
        SqliteStorage::setup(&pool).await?;
    }
    let cpu0 = util::self_cpu_s();
    let probe = Probe::new(n);
    let worker = start_worker(&pool, probe.clone(), concurrency);
    probe.wait_all(Duration::from_secs(300)).await?;
    let persisted = util::wait_until(Duration::from_millis(1), Duration::from_secs(60), || async {
        Ok(count_done(&pool).await? >= n)
    })
    .await?;
    let end = Instant::now();
    let cpu = util::self_cpu_s() - cpu0;
    worker.stop().await;
    if !persisted {
        bail!("apalis-sqlite never recorded {n} completions");
    }
    let verified = count_done(&pool).await?;
    pool.close().await;
    let elapsed = end.duration_since(probe.first_start()).as_secs_f64();
    Ok(ThroughputTrial {
        n,
        elapsed_s: elapsed,
        rate: n as f64 / elapsed,
        verified_completed: verified,
        client_cpu_s: cpu,
        ..Default::default()
    })
}

/// Figure 2 for apalis-sqlite: idle worker (10 ms polling); producer process pushes one at a time.
pub async fn latency(dir: &Path, n: u64, rate: u64, concurrency: usize) -> Result<LatencyTrial> {
    let path = dir.join("apalis-lat.db");
    let pool = pool(&path).await?;
    let probe = Probe::new(n);
    let worker = start_worker(&pool, probe.clone(), concurrency);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut producer = Command::new(std::env::current_exe()?)
        .args(["produce-apalis", "--path", &path.display().to_string()])
        .args(["--n", &n.to_string(), "--rate", &rate.to_string()])
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .context("spawn the apalis producer")?;
    probe.wait_all(Duration::from_secs(n / rate.max(1) + 60)).await?;
    let status = producer.wait().await?;
    if !status.success() {
        bail!("apalis producer failed: {status}");
    }
    util::wait_until(Duration::from_millis(5), Duration::from_secs(30), || async {
        Ok(count_done(&pool).await? >= n)
    })
    .await?;
    worker.stop().await;
    let verified = count_done(&pool).await?;
    pool.close().await;
    Ok(LatencyTrial::from_latencies(&probe.latencies(), verified))
}

/// Producer process for apalis-sqlite.
pub async fn produce(path: &Path, n: u64, rate: u64) -> Result<()> {
    let pool = pool(path).await?;
    let mut storage = SqliteStorage::<BenchJob>::new(&pool).with_config(config(1));
    let every = Duration::from_secs_f64(1.0 / rate.max(1) as f64);
    let start = tokio::time::Instant::now();
    for i in 0..n {
        tokio::time::sleep_until(start + every * i as u32).await;
        storage
            .push(BenchJob { sent_us: Some(wall_us()) })
            .await
            .map_err(|e| anyhow::anyhow!("apalis push: {e:?}"))?;
    }
    pool.close().await;
    Ok(())
}
