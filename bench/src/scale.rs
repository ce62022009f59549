//! Scale figures (issue 19), skillforge against BullMQ in the same run: bytes per job (queued and
//! finished-and-retained), drain rate with a large backlog vs a small one, enqueue→start p99 with
//! a large delayed backlog in the same queue, and `jobs list --state succeeded --limit 50` /
//! `jobs show` call times with a large number of finished jobs retained.
//!
//! Every count the bench checks is read by index or by sampling (never one script over every
//! job): see `sf::Target::count_finished` / `count_succeeded`.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use serde::Serialize;
use skillforge_engine::QueueBackend;
use skillforge_engine::job::{JobSpec, JobState, now_ms};
use skillforge_engine::sqlite::SqliteBackend;

use crate::bullmq::BullMq;
use crate::model::{LatencyTrial, ThroughputTrial};
use crate::sf::{self, Target};
use crate::util;

/// Workload of the scale figures.
#[derive(Debug, Clone, Serialize)]
pub struct ScaleParams {
    /// Jobs of the memory figure.
    pub memory_n: u64,
    /// The small and the large backlog of the drain figure.
    pub small_n: u64,
    pub large_n: u64,
    /// Delayed jobs queued behind the latency figure's jobs.
    pub backlog_n: u64,
    /// Calls of each page / show timing.
    pub page_calls: usize,
    pub concurrency: usize,
    pub latency_n: u64,
    pub latency_rate: u64,
    /// Only the enqueue→start figures, empty and with `backlog_n` delayed jobs behind (the
    /// `backlog` figure: the latency part of the scale figure without its memory, drain and
    /// page parts, which take most of its time).
    pub latency_only: bool,
}

/// Bytes per job, one system.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Memory {
    pub n: u64,
    /// redis-server `used_memory` (or SQLite used pages × page size) per queued job.
    pub queued_bytes_per_job: f64,
    /// The same per finished job kept after its result was acknowledged (BullMQ: `completed`).
    pub finished_bytes_per_job: f64,
}

/// p50 / p99 of one call, ms.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CallTimes {
    pub calls: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

impl CallTimes {
    pub fn of(ms: &[f64]) -> Self {
        Self { calls: ms.len(), p50_ms: util::percentile(ms, 50.0), p99_ms: util::percentile(ms, 99.0) }
    }
}

/// Everything the scale figure measured, per system (`skillforge_redis`, `bullmq`, `skillforge_sqlite`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct ScaleResults {
    pub memory: std::collections::BTreeMap<String, Memory>,
    pub drain_small: std::collections::BTreeMap<String, ThroughputTrial>,
    pub drain_large: std::collections::BTreeMap<String, ThroughputTrial>,
    pub latency_empty: std::collections::BTreeMap<String, LatencyTrial>,
    pub latency_backlog: std::collections::BTreeMap<String, LatencyTrial>,
    pub list_page: std::collections::BTreeMap<String, CallTimes>,
    pub show: std::collections::BTreeMap<String, CallTimes>,
}

async fn redis_used_memory(url: &str) -> Result<f64> {
    let client = redis::Client::open(url)?;
    let mut c = crate::util::patient(&client).await?;
    let _: redis::Value = redis::cmd("MEMORY").arg("PURGE").query_async(&mut c).await.unwrap_or(redis::Value::Nil);
    Ok(util::redis_info_field(url, "memory", "used_memory").await?.parse()?)
}

/// Used bytes of a SQLite file (pages in use × page size, after a WAL checkpoint).
async fn sqlite_used_bytes(path: &std::path::Path) -> Result<f64> {
    use sqlx::Connection;
    let opts = sqlx::sqlite::SqliteConnectOptions::new().filename(path);
    let mut c = sqlx::SqliteConnection::connect_with(&opts).await?;
    sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)").execute(&mut c).await?;
    let pages: i64 = sqlx::query_scalar("PRAGMA page_count").fetch_one(&mut c).await?;
    let free: i64 = sqlx::query_scalar("PRAGMA freelist_count").fetch_one(&mut c).await?;
    let size: i64 = sqlx::query_scalar("PRAGMA page_size").fetch_one(&mut c).await?;
    c.close().await?;
    Ok(((pages - free) * size) as f64)
}

/// Enqueues `n` no-op jobs (`not_before` = `delay_ms` from now when set), 1 000 at a time.
pub async fn fill(target: &Target, backend: &Arc<dyn QueueBackend>, n: u64, delay_ms: Option<i64>) -> Result<()> {
    let mut spec = JobSpec::new("noop", serde_json::json!({}));
    spec.not_before_ms = delay_ms.map(|d| now_ms() + d);
    let sqlite = match target {
        Target::Sqlite { path } => Some(SqliteBackend::open(path).await?),
        Target::Redis { .. } => None,
    };
    let mut left = n;
    while left > 0 {
        let k = left.min(1000);
        match &sqlite {
            Some(b) => {
                b.enqueue_batch(&vec![spec.clone(); k as usize]).await?;
            }
            None => {
                futures::future::try_join_all((0..k).map(|_| backend.enqueue(&spec))).await?;
            }
        }
        left -= k;
    }
    Ok(())
}

/// Acknowledges every pending result (what the control plane's ingestion does after applying).
pub async fn ack_all(backend: &Arc<dyn QueueBackend>) -> Result<()> {
    loop {
        let pending = backend.pending_results(1000).await?;
        if pending.is_empty() {
            return Ok(());
        }
        futures::future::try_join_all(pending.iter().map(|j| backend.ack_result(&j.id, j.fencing_token))).await?;
    }
}

/// skillforge's bytes per job on `target` (fresh): `n` queued, then drained and acknowledged.
async fn sf_memory(target: &Target, n: u64, concurrency: usize) -> Result<Memory> {
    let measure = || async {
        match target {
            Target::Redis { url, .. } => redis_used_memory(url).await,
            Target::Sqlite { path } => sqlite_used_bytes(path).await,
        }
    };
    let backend = target.open().await?;
    let base = measure().await?;
    fill(target, &backend, n, None).await?;
    let queued = measure().await?;
    sf::drain_existing(target, backend.clone(), n, concurrency).await?;
    ack_all(&backend).await?;
    let finished = measure().await?;
    Ok(Memory {
        n,
        queued_bytes_per_job: (queued - base) / n as f64,
        finished_bytes_per_job: (finished - base) / n as f64,
    })
}

/// `list(succeeded, 50)` and `get(random id)` `calls` times each, through the engine (what
/// `jobs list --state succeeded --limit 50` and `jobs show ID` call).
async fn sf_pages(backend: &Arc<dyn QueueBackend>, calls: usize) -> Result<(CallTimes, CallTimes)> {
    let ids: Vec<String> = backend.list(Some(JobState::Succeeded), 1000).await?.into_iter().map(|j| j.id).collect();
    anyhow::ensure!(!ids.is_empty(), "no succeeded jobs to show");
    let mut list = Vec::with_capacity(calls);
    let mut show = Vec::with_capacity(calls);
    for i in 0..calls {
        let t = Instant::now();
        let page = backend.list(Some(JobState::Succeeded), 50).await?;
        list.push(t.elapsed().as_secs_f64() * 1e3);
        anyhow::ensure!(page.len() == 50, "a page of {} jobs", page.len());
        let id = &ids[(i * 7919) % ids.len()];
        let t = Instant::now();
        let job = backend.get(id).await?;
        show.push(t.elapsed().as_secs_f64() * 1e3);
        anyhow::ensure!(job.is_some(), "job {id} missing");
    }
    Ok((CallTimes::of(&list), CallTimes::of(&show)))
}

/// The memory figure alone (`bench/run.sh --figures memory`, and the first part of the scale
/// figure): bytes per job of skillforge on Redis, BullMQ on the same redis-server, and skillforge
/// on SQLite, each from an empty store with `n` no-op jobs, keyed `skillforge_redis`, `bullmq`,
/// `skillforge_sqlite`. A system that fails is missing from the map, its error in `errors`.
pub async fn memory(
    url: &str,
    bull: &BullMq,
    n: u64,
    concurrency: usize,
    errors: &mut Vec<String>,
) -> Result<std::collections::BTreeMap<String, Memory>> {
    let mut out = std::collections::BTreeMap::new();
    let mut note = |what: &str, e: anyhow::Error| {
        let msg = format!("{what}: {e:#}");
        eprintln!("  ERROR {msg}");
        errors.push(msg);
    };
    eprintln!("memory per job (n = {n})");
    util::redis_flushall(url).await?;
    let redis = Target::Redis { url: url.to_owned(), namespace: "mem".into() };
    match sf_memory(&redis, n, concurrency).await {
        Ok(m) => drop(out.insert("skillforge_redis".into(), m)),
        Err(e) => note("memory skillforge redis", e),
    }
    util::redis_flushall(url).await?;
    match bull.memory("mem", n, concurrency).await {
        Ok(m) => drop(out.insert("bullmq".into(), m)),
        Err(e) => note("memory bullmq", e),
    }
    util::redis_flushall(url).await?;
    let dir = tempfile::tempdir()?;
    let sqlite = Target::Sqlite { path: sf::sqlite_file(dir.path(), "mem") };
    match sf_memory(&sqlite, n, concurrency).await {
        Ok(m) => drop(out.insert("skillforge_sqlite".into(), m)),
        Err(e) => note("memory skillforge sqlite", e),
    }
    drop(dir);
    util::redis_flushall(url).await?;
    eprintln!("  {out:?}");
    Ok(out)
}

/// The two bytes-per-job rows of the memory and scale tables (markdown, no header).
fn memory_rows(o: &mut String, memory: &std::collections::BTreeMap<String, Memory>) {
    let cell = |v: Option<f64>| v.map(|x| format!("{x:.0} B")).unwrap_or_else(|| "missing".into());
    let mem = |k: &str, f: fn(&Memory) -> f64| cell(memory.get(k).map(f));
    let _ = writeln!(
        o,
        "| bytes per queued job | {} | {} | {} | ≤ BullMQ |",
        mem("skillforge_redis", |m| m.queued_bytes_per_job),
        mem("bullmq", |m| m.queued_bytes_per_job),
        mem("skillforge_sqlite", |m| m.queued_bytes_per_job),
    );
    let _ = writeln!(
        o,
        "| bytes per retained finished job | {} | {} | {} | ≤ BullMQ |",
        mem("skillforge_redis", |m| m.finished_bytes_per_job),
        mem("bullmq", |m| m.finished_bytes_per_job),
        mem("skillforge_sqlite", |m| m.finished_bytes_per_job),
    );
}

/// The memory figure's table (markdown).
pub fn memory_markdown(memory: &std::collections::BTreeMap<String, Memory>, n: u64) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "\n#### Memory per job (one trial; n = {n})\n");
    let _ = writeln!(o, "| figure | skillforge Redis | BullMQ | skillforge SQLite | goal |\n|---|---|---|---|---|");
    memory_rows(&mut o, memory);
    o
}

/// Runs the scale figures (one trial each: the large backlogs take minutes on this machine).
pub async fn run(url: &str, bull: &BullMq, p: &ScaleParams, errors: &mut Vec<String>) -> Result<ScaleResults> {
    let mut r = ScaleResults::default();
    let note = |errors: &mut Vec<String>, what: &str, e: anyhow::Error| {
        let msg = format!("{what}: {e:#}");
        eprintln!("  ERROR {msg}");
        errors.push(msg);
    };

    if !p.latency_only {
        r.memory = memory(url, bull, p.memory_n, p.concurrency, errors).await?;
    }

    let drains = if p.latency_only { vec![] } else { vec![(p.small_n, false), (p.large_n, true)] };
    for (n, large) in drains {
        eprintln!("scale: drain of {n} queued");
        let out = if large { &mut r.drain_large } else { &mut r.drain_small };
        util::redis_flushall(url).await?;
        let target = Target::Redis { url: url.to_owned(), namespace: format!("drain{n}") };
        match sf::throughput(&target, n, p.concurrency, false).await {
            Ok(t) => drop(out.insert("skillforge_redis".into(), t)),
            Err(e) => note(errors, "drain skillforge redis", e),
        }
        if large {
            match async { sf_pages(&target.open().await?, p.page_calls).await }.await {
                Ok((l, s)) => {
                    r.list_page.insert("skillforge_redis".into(), l);
                    r.show.insert("skillforge_redis".into(), s);
                }
                Err(e) => note(errors, "pages skillforge redis", e),
            }
        }
        util::redis_flushall(url).await?;
        match bull.throughput_then_pages(&format!("drain{n}"), n, p.concurrency, large.then_some(p.page_calls)).await {
            Ok((t, pages)) => {
                out.insert("bullmq".into(), t);
                if let Some((l, s)) = pages {
                    r.list_page.insert("bullmq".into(), l);
                    r.show.insert("bullmq".into(), s);
                }
            }
            Err(e) => note(errors, "drain bullmq", e),
        }
        util::redis_flushall(url).await?;
        let dir = tempfile::tempdir()?;
        let target = Target::Sqlite { path: sf::sqlite_file(dir.path(), "drain") };
        match sf::throughput(&target, n, p.concurrency, false).await {
            Ok(t) => drop(out.insert("skillforge_sqlite".into(), t)),
            Err(e) => note(errors, "drain skillforge sqlite", e),
        }
        if large {
            match async { sf_pages(&target.open().await?, p.page_calls).await }.await {
                Ok((l, s)) => {
                    r.list_page.insert("skillforge_sqlite".into(), l);
                    r.show.insert("skillforge_sqlite".into(), s);
                }
                Err(e) => note(errors, "pages skillforge sqlite", e),
            }
        }
        eprintln!("  small {:?}\n  large {:?}", rates(&r.drain_small), rates(&r.drain_large));
    }

    for (backlog, out) in [(0, &mut r.latency_empty), (p.backlog_n, &mut r.latency_backlog)] {
        eprintln!("scale: enqueue→start with {backlog} delayed jobs behind");
        let day = 86_400_000;
        util::redis_flushall(url).await?;
        let target = Target::Redis { url: url.to_owned(), namespace: format!("lat{backlog}") };
        let v = async {
            fill(&target, &target.open().await?, backlog, Some(day)).await?;
            sf::latency(&target, p.latency_n, p.latency_rate, p.concurrency).await
        }
        .await;
        match v {
            Ok(t) => drop(out.insert("skillforge_redis".into(), t)),
            Err(e) => note(errors, "latency skillforge redis", e),
        }
        util::redis_flushall(url).await?;
        match bull.latency_with_backlog(&format!("lat{backlog}"), p.latency_n, p.latency_rate, p.concurrency, backlog).await {
            Ok(t) => drop(out.insert("bullmq".into(), t)),
            Err(e) => note(errors, "latency bullmq", e),
        }
        util::redis_flushall(url).await?;
        let dir = tempfile::tempdir()?;
        let target = Target::Sqlite { path: sf::sqlite_file(dir.path(), "lat") };
        let v = async {
            fill(&target, &target.open().await?, backlog, Some(day)).await?;
            sf::latency(&target, p.latency_n, p.latency_rate, p.concurrency).await
        }
        .await;
        match v {
            Ok(t) => drop(out.insert("skillforge_sqlite".into(), t)),
            Err(e) => note(errors, "latency skillforge sqlite", e),
        }
        eprintln!("  {:?}", out.iter().map(|(k, v)| (k.clone(), v.p99_ms)).collect::<Vec<_>>());
    }
    Ok(r)
}

fn rates(m: &std::collections::BTreeMap<String, ThroughputTrial>) -> Vec<(String, f64)> {
    m.iter().map(|(k, v)| (k.clone(), v.rate)).collect()
}

/// The scale table (markdown).
pub fn markdown(r: &ScaleResults, p: &ScaleParams) -> String {
    let mut o = String::new();
    if p.latency_only {
        let _ = writeln!(o, "\n#### Enqueue→start with a backlog (one trial; {} delayed jobs behind)\n", p.backlog_n);
        let _ = writeln!(o, "| figure | skillforge Redis | BullMQ | skillforge SQLite | goal |\n|---|---|---|---|---|");
        latency_rows(&mut o, r);
        return o;
    }
    let _ = writeln!(
        o,
        "\n#### Scale (one trial each; memory n = {}; drain {} vs {} queued; latency with {} delayed jobs behind; pages over {} retained)\n",
        p.memory_n, p.small_n, p.large_n, p.backlog_n, p.large_n
    );
    let _ = writeln!(o, "| figure | skillforge Redis | BullMQ | skillforge SQLite | goal |\n|---|---|---|---|---|");
    let cell = |v: Option<f64>, unit: &str| v.map(|x| format!("{x:.0}{unit}")).unwrap_or_else(|| "missing".into());
    let cellf = |v: Option<f64>| v.map(|x| format!("{x:.2}")).unwrap_or_else(|| "missing".into());
    memory_rows(&mut o, &r.memory);
    let rate = |m: &std::collections::BTreeMap<String, ThroughputTrial>, k: &str| m.get(k).map(|t| t.rate);
    for (label, m) in [("drain jobs/s, small backlog", &r.drain_small), ("drain jobs/s, large backlog", &r.drain_large)] {
        let _ = writeln!(
            o,
            "| {label} | {} | {} | {} | |",
            cell(rate(m, "skillforge_redis"), ""),
            cell(rate(m, "bullmq"), ""),
            cell(rate(m, "skillforge_sqlite"), "")
        );
    }
    let ratio = |k: &str| rate(&r.drain_large, k).zip(rate(&r.drain_small, k)).map(|(a, b)| a / b);
    let _ = writeln!(
        o,
        "| drain large / small | {} | {} | {} | ≥ 0.8 |",
        cellf(ratio("skillforge_redis")),
        cellf(ratio("bullmq")),
        cellf(ratio("skillforge_sqlite"))
    );
    latency_rows(&mut o, r);
    for (label, m) in [("list succeeded, limit 50: p99 ms", &r.list_page), ("show one job: p99 ms", &r.show)] {
        let get = |k: &str| m.get(k).map(|c| c.p99_ms);
        let _ = writeln!(
            o,
            "| {label} | {} | {} | {} | ≤ 50 ms |",
            cellf(get("skillforge_redis")),
            cellf(get("bullmq")),
            cellf(get("skillforge_sqlite"))
        );
    }
    o
}

/// The enqueue→start rows (empty, backlog behind, their ratio) of the scale table.
fn latency_rows(o: &mut String, r: &ScaleResults) {
    let cellf = |v: Option<f64>| v.map(|x| format!("{x:.2}")).unwrap_or_else(|| "missing".into());
    let p99 = |m: &std::collections::BTreeMap<String, LatencyTrial>, k: &str| m.get(k).map(|t| t.p99_ms);
    for (label, m) in [("enqueue→start p99 ms, empty", &r.latency_empty), ("enqueue→start p99 ms, backlog behind", &r.latency_backlog)] {
        let _ = writeln!(
            *o,
            "| {label} | {} | {} | {} | |",
            cellf(p99(m, "skillforge_redis")),
            cellf(p99(m, "bullmq")),
            cellf(p99(m, "skillforge_sqlite"))
        );
    }
    let lratio = |k: &str| p99(&r.latency_backlog, k).zip(p99(&r.latency_empty, k)).map(|(a, b)| a / b);
    let _ = writeln!(
        *o,
        "| p99 backlog / empty | {} | {} | {} | ≤ 1.5 |",
        cellf(lratio("skillforge_redis")),
        cellf(lratio("bullmq")),
        cellf(lratio("skillforge_sqlite"))
    );
}
