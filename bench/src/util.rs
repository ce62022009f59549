//! Clocks, statistics, the CPU-speed probe, process CPU and Redis server counters.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use serde::Serialize;
use sha2::{Digest, Sha256};

/// Wall clock, microseconds since the Unix epoch (comparable across processes on this host).
pub fn wall_us() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64() * 1e6).unwrap_or(0.0)
}

/// Wall clock, milliseconds since the Unix epoch, fractional.
pub fn wall_ms() -> f64 {
    wall_us() / 1000.0
}

/// Median of a non-empty slice (mean of the two middle values for even lengths).
pub fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

/// Nearest-rank percentile (`p` in 0..=100) of a non-empty slice.
pub fn percentile(xs: &[f64], p: f64) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * v.len() as f64).ceil().max(1.0) as usize;
    v[rank.min(v.len()) - 1]
}

/// Median, min and max of one figure over its trials.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

pub fn summary(xs: &[f64]) -> Summary {
    Summary {
        median: median(xs),
        min: xs.iter().copied().fold(f64::INFINITY, f64::min),
        max: xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
    }
}

/// The machine: cores, model, and a fixed sha256 loop timed (lower = faster host right now).
#[derive(Debug, Clone, Serialize)]
pub struct CpuProbe {
    pub nproc: usize,
    pub model: String,
    /// Milliseconds for 1 000 000 chained sha256 hashes of 32 bytes (single thread).
    pub sha256_1m_ms: f64,
    /// 1-minute load average when probed (other builds on the host show up here).
    pub loadavg_1m: f64,
}

pub fn cpu_probe() -> CpuProbe {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned());
    let nproc = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let t = Instant::now();
        let mut h = [0u8; 32];
        for _ in 0..1_000_000 {
            h = Sha256::digest(h).into();
        }
        std::hint::black_box(h);
        best = best.min(t.elapsed().as_secs_f64() * 1e3);
    }
    let loadavg_1m = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|x| x.parse().ok()))
        .unwrap_or(f64::NAN);
    CpuProbe { nproc, model, sha256_1m_ms: best, loadavg_1m }
}

/// CPU seconds (user + system) used so far by this process.
pub fn self_cpu_s() -> f64 {
    proc_cpu_s("self").unwrap_or(f64::NAN)
}

fn proc_cpu_s(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After the command: state(0) ... utime(11) stime(12), in clock ticks (100 Hz on Linux).
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

/// Redis server counters: per-command calls/usec (`INFO commandstats`) and server CPU seconds.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RedisStats {
    pub commands: BTreeMap<String, (u64, u64)>,
    pub cpu_s: f64,
}

pub async fn redis_reset_stats(url: &str) -> Result<()> {
    let client = redis::Client::open(url)?;
    let mut c = crate::util::patient(&client).await?;
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query_async(&mut c).await?;
    Ok(())
}

pub async fn redis_stats(url: &str) -> Result<RedisStats> {
    let client = redis::Client::open(url)?;
    let mut c = crate::util::patient(&client).await?;
    let cmd: String = redis::cmd("INFO").arg("commandstats").query_async(&mut c).await?;
    let cpu: String = redis::cmd("INFO").arg("cpu").query_async(&mut c).await?;
    let mut out = RedisStats::default();
    for line in cmd.lines() {
        if let Some(rest) = line.strip_prefix("cmdstat_")
            && let Some((name, fields)) = rest.split_once(':')
        {
            let get = |k: &str| -> u64 {
                fields
                    .split(',')
                    .find_map(|kv| kv.strip_prefix(k).and_then(|v| v.strip_prefix('=')))
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0)
            };
            out.commands.insert(name.to_owned(), (get("calls"), get("usec")));
        }
    }
    for line in cpu.lines() {
        if let Some((k, v)) = line.trim().split_once(':')
            && (k == "used_cpu_sys" || k == "used_cpu_user")
        {
            out.cpu_s += v.parse::<f64>().unwrap_or(0.0);
        }
    }
    Ok(out)
}

pub async fn redis_info_field(url: &str, section: &str, field: &str) -> Result<String> {
    let client = redis::Client::open(url)?;
    let mut c = crate::util::patient(&client).await?;
    let info: String = redis::cmd("INFO").arg(section).query_async(&mut c).await?;
    info.lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{field}:")).map(str::to_owned))
        .with_context(|| format!("INFO {section} has no {field}"))
}

pub async fn redis_flushall(url: &str) -> Result<()> {
    let client = redis::Client::open(url)?;
    let mut c = crate::util::patient(&client).await?;
    let _: () = redis::cmd("FLUSHALL").query_async(&mut c).await?;
    Ok(())
}

/// Polls `f` every `every` until it returns true or `limit` passes; returns whether it did.
pub async fn wait_until<F, Fut>(every: Duration, limit: Duration, mut f: F) -> Result<bool>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<bool>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if f().await? {
            return Ok(true);
        }
        if Instant::now() >= deadline {
            return Ok(false);
        }
        tokio::time::sleep(every).await;
    }
}

/// A connection whose replies may take long (FLUSHALL of a million jobs, a loaded host): redis-rs's
/// default response timeout (500 ms) ends those calls.
pub async fn patient(client: &redis::Client) -> Result<redis::aio::MultiplexedConnection> {
    let config = redis::AsyncConnectionConfig::new().set_response_timeout(Some(Duration::from_secs(600)));
    Ok(client.get_multiplexed_async_connection_with_config(&config).await?)
}
