//! The Redis peer: BullMQ (Node), driven through `bench/bullmq/bench.js` on the same redis-server.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use tokio::process::Command;

use crate::model::{LatencyTrial, RecoveryTrial, ThroughputTrial};
use crate::scale::{CallTimes, Memory};
use crate::sf::EventChild;
use crate::util::{RedisStats, wall_ms};

pub struct BullMq {
    pub dir: PathBuf,
    pub port: u16,
}

impl BullMq {
    fn cmd(&self, mode: &str, queue: &str) -> Command {
        let mut c = Command::new("node");
        c.current_dir(&self.dir)
            .arg(self.dir.join("bench.js"))
            .arg(mode)
            .args(["--port", &self.port.to_string(), "--queue", queue])
            .stderr(Stdio::inherit());
        c
    }

    /// The installed BullMQ version (node_modules/bullmq/package.json).
    pub fn version(&self) -> String {
        version_of(&self.dir, "bullmq")
    }

    pub async fn throughput(&self, queue: &str, n: u64, concurrency: usize) -> Result<ThroughputTrial> {
        Ok(self.throughput_then_pages(queue, n, concurrency, None).await?.0)
    }

    /// A throughput trial; with `pages`, then that many `getJobs(['completed'], 0, 49)` and
    /// `getJob(id)` calls timed over the retained completed jobs (the scale figures).
    pub async fn throughput_then_pages(
        &self,
        queue: &str,
        n: u64,
        concurrency: usize,
        pages: Option<usize>,
    ) -> Result<(ThroughputTrial, Option<(CallTimes, CallTimes)>)> {
        let mut c = self.cmd("throughput", queue);
        c.args(["--n", &n.to_string(), "--concurrency", &concurrency.to_string()]);
        if let Some(k) = pages {
            c.args(["--pages", &k.to_string()]);
        }
        let mut child = EventChild::spawn(c)?;
        let r = child.result(Duration::from_secs(3600)).await?;
        let _ = child.child.wait().await;
        let mut stats = RedisStats { cpu_s: 0.0, ..Default::default() };
        if let Some(cmds) = r["redis_commands"].as_object() {
            for (k, v) in cmds {
                stats.commands.insert(
                    k.clone(),
                    (v["calls"].as_u64().unwrap_or(0), v["usec"].as_u64().unwrap_or(0)),
                );
            }
        }
        let trial = ThroughputTrial {
            n,
            elapsed_s: r["elapsed_s"].as_f64().context("elapsed_s")?,
            rate: r["rate"].as_f64().context("rate")?,
            verified_completed: r["verified_completed"].as_u64().context("verified_completed")?,
            client_cpu_s: r["client_cpu_s"].as_f64().unwrap_or(f64::NAN),
            redis_cpu_s: r["redis_cpu_s"].as_f64(),
            ..Default::default()
        };
        let ms = |v: &serde_json::Value| -> Vec<f64> {
            v.as_array().map(|a| a.iter().filter_map(serde_json::Value::as_f64).collect()).unwrap_or_default()
        };
        let pages = r["pages"].is_object().then(|| (CallTimes::of(&ms(&r["pages"]["list_ms"])), CallTimes::of(&ms(&r["pages"]["show_ms"]))));
        Ok((trial.with_redis(&stats), pages))
    }

    /// Bytes per job in redis-server: `n` added, then drained (completed kept, BullMQ's default).
    pub async fn memory(&self, queue: &str, n: u64, concurrency: usize) -> Result<Memory> {
        let mut c = self.cmd("memory", queue);
        c.args(["--n", &n.to_string(), "--concurrency", &concurrency.to_string()]);
        let mut child = EventChild::spawn(c)?;
        let r = child.result(Duration::from_secs(3600)).await?;
        let _ = child.child.wait().await;
        let verified = r["verified_completed"].as_u64().context("verified_completed")?;
        if verified != n {
            bail!("BullMQ kept {verified} completed jobs, not {n}");
        }
        Ok(Memory {
            n,
            queued_bytes_per_job: r["queued_bytes_per_job"].as_f64().context("queued_bytes_per_job")?,
            finished_bytes_per_job: r["finished_bytes_per_job"].as_f64().context("finished_bytes_per_job")?,
        })
    }

    /// The latency trial with `backlog` delayed jobs added to the queue first.
    pub async fn latency_with_backlog(&self, queue: &str, n: u64, rate: u64, concurrency: usize, backlog: u64) -> Result<LatencyTrial> {
        self.latency_inner(queue, n, rate, concurrency, backlog).await
    }

    pub async fn latency(&self, queue: &str, n: u64, rate: u64, concurrency: usize) -> Result<LatencyTrial> {
        self.latency_inner(queue, n, rate, concurrency, 0).await
    }

    async fn latency_inner(&self, queue: &str, n: u64, rate: u64, concurrency: usize, backlog: u64) -> Result<LatencyTrial> {
        let mut c = self.cmd("latency-worker", queue);
        c.args(["--n", &n.to_string(), "--concurrency", &concurrency.to_string()]);
        if backlog > 0 {
            c.args(["--backlog", &backlog.to_string()]);
        }
        let mut worker = EventChild::spawn(c)?;
        worker.expect("ready", Duration::from_secs(1800)).await?;
        let mut p = self.cmd("produce", queue);
        p.args(["--n", &n.to_string(), "--rate", &rate.to_string()]).stdout(Stdio::null());
        let mut producer = p.kill_on_drop(true).spawn().context("spawn the BullMQ producer")?;
        let r = worker.result(Duration::from_secs(n / rate.max(1) + 60)).await?;
        let status = producer.wait().await?;
        if !status.success() {
            bail!("BullMQ producer failed: {status}");
        }
        let _ = worker.child.wait().await;
        let lat: Vec<f64> = r["latencies_ms"]
            .as_array()
            .context("latencies_ms")?
            .iter()
            .filter_map(serde_json::Value::as_f64)
            .collect();
        Ok(LatencyTrial::from_latencies(&lat, r["verified_completed"].as_u64().unwrap_or(0)))
    }

    /// BullMQ with its defaults (lock 30 s renewed every 15 s, stalled check every 30 s).
    pub async fn recovery(&self, queue: &str, offset: Duration) -> Result<RecoveryTrial> {
        let mut v = self.cmd("recovery", queue);
        v.args(["--role", "victim"]);
        let mut victim = EventChild::spawn(v)?;
        victim.expect("ready", Duration::from_secs(30)).await?;
        let started = victim.expect("started", Duration::from_secs(30)).await?;
        let started_ms = started["at_ms"].as_f64().context("at_ms")?;
        let mut s = self.cmd("recovery", queue);
        s.args(["--role", "survivor"]);
        let mut survivor = EventChild::spawn(s)?;
        survivor.expect("ready", Duration::from_secs(30)).await?;
        let wait = started_ms + offset.as_secs_f64() * 1e3 - wall_ms();
        if wait > 0.0 {
            tokio::time::sleep(Duration::from_secs_f64(wait / 1e3)).await;
        }
        let killed_ms = wall_ms();
        victim.kill().await;
        let restarted = survivor.expect("started", Duration::from_secs(300)).await;
        survivor.kill().await;
        let recovered_ms = restarted?["at_ms"].as_f64().context("at_ms")?;
        Ok(RecoveryTrial { kill_offset_s: (killed_ms - started_ms) / 1e3, recovery_s: (recovered_ms - killed_ms) / 1e3 })
    }
}

pub fn version_of(dir: &Path, package: &str) -> String {
    std::fs::read_to_string(dir.join("node_modules").join(package).join("package.json"))
        .ok()
        .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
        .and_then(|v| v["version"].as_str().map(str::to_owned))
        .unwrap_or_else(|| "unknown".to_owned())
}
