//! Measures the Redis backend's bytes per job (issue 19) and where they go: enqueues `N` no-op
//! jobs into a namespace of a running redis-server, drains them with an in-process worker,
//! acknowledges every result, and prints `used_memory` per job after each phase with, for each
//! key kind (`job:*`, `ready:*`, `done:*`, …), its key count and `MEMORY USAGE` total.
//!
//! `cargo run --release -p skillforge-engine --example redis_bytes -- redis://127.0.0.1:6379 <ns> <n>`

use std::collections::BTreeMap;
use std::sync::Arc;

use skillforge_engine::backend::prelude::*;
use skillforge_engine::job::JobSpec;
use skillforge_engine::redis::RedisBackend;
use skillforge_engine::registry::RunnerRegistry;
use skillforge_engine::worker::{Worker, WorkerConfig};
use skillforge_runner::{ExitClass, RunContext, RunOutcome, RunSpec, Runner, RunnerError};

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

/// `used_memory` (bytes) and, per key kind under `prefix`, (keys, `MEMORY USAGE` bytes).
async fn measure(
    c: &mut redis::aio::MultiplexedConnection,
    prefix: &str,
) -> (f64, BTreeMap<String, (u64, u64)>) {
    let _: redis::Value = redis::cmd("MEMORY")
        .arg("PURGE")
        .query_async(c)
        .await
        .unwrap();
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(c)
        .await
        .unwrap();
    let used = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap();
    let mut kinds: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut cursor = 0u64;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{prefix}*"))
            .arg("COUNT")
            .arg(1000)
            .query_async(c)
            .await
            .unwrap();
        for key in keys {
            let rest = &key[prefix.len()..];
            let kind = match rest.split(':').collect::<Vec<_>>().as_slice() {
                ["job", _] => "job:{id}".to_owned(),
                ["job", _, f] => format!("job:{{id}}:{f}"),
                ["leasereq", _] => "leasereq:{id}".to_owned(),
                ["out", _] => "out:{id}".to_owned(),
                _ => rest.to_owned(),
            };
            let bytes: Option<u64> = redis::cmd("MEMORY")
                .arg("USAGE")
                .arg(&key)
                .arg("SAMPLES")
                .arg(0)
                .query_async(c)
                .await
                .unwrap();
            let e = kinds.entry(kind).or_default();
            e.0 += 1;
            e.1 += bytes.unwrap_or(0);
        }
        if next == 0 {
            break;
        }
        cursor = next;
    }
    (used, kinds)
}

fn report(phase: &str, n: u64, base: f64, (used, kinds): &(f64, BTreeMap<String, (u64, u64)>)) {
    println!(
        "{phase}: {:.1} B per job (used_memory)",
        (used - base) / n as f64
    );
    for (kind, (keys, bytes)) in kinds {
        println!(
            "  {kind:<24} {keys:>8} keys {:>10.1} B per job",
            *bytes as f64 / n as f64
        );
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (url, ns, n): (&str, &str, u64) = (&args[1], &args[2], args[3].parse().unwrap());
    let prefix = format!("{ns}:");
    let client = redis::Client::open(url).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    let b = Arc::new(RedisBackend::connect(url, ns).await.unwrap());
    let (base, _) = measure(&mut c, &prefix).await;
    let spec = JobSpec::new("noop", serde_json::json!({}));
    let mut left = n;
    while left > 0 {
        let k = left.min(1000);
        futures::future::try_join_all((0..k).map(|_| b.enqueue(&spec)))
            .await
            .unwrap();
        left -= k;
    }
    report("queued", n, base, &measure(&mut c, &prefix).await);
    let backend: Arc<dyn QueueBackend> = b.clone();
    let scratch = tempfile::tempdir().unwrap();
    let mut config = WorkerConfig::new("bench-drain", scratch.path().to_owned());
    config.concurrency = 50;
    let worker = Worker::new(
        config,
        backend.clone(),
        RunnerRegistry::new().with(Arc::new(Noop)),
    );
    let stop = tokio_util::sync::CancellationToken::new();
    let handle = tokio::spawn(worker.run(stop.clone()));
    let mut acked = 0u64;
    while acked < n {
        let pending = backend.pending_results(1000).await.unwrap();
        if pending.is_empty() {
            tokio::task::yield_now().await;
            continue;
        }
        for j in &pending {
            assert!(backend.ack_result(&j.id, j.fencing_token).await.unwrap());
        }
        acked += pending.len() as u64;
    }
    stop.cancel();
    handle.await.unwrap();
    report("finished", n, base, &measure(&mut c, &prefix).await);
}
