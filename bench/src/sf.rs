//! skillforge's side: the engine's real `Worker` with a no-op runner, on Redis and on SQLite.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use skillforge_engine::QueueBackend;
use skillforge_engine::job::JobSpec;
use skillforge_engine::redis::RedisBackend;
use skillforge_engine::registry::RunnerRegistry;
use skillforge_engine::sqlite::SqliteBackend;
use skillforge_engine::worker::{Worker, WorkerConfig};
use skillforge_runner::{ExitClass, RunContext, RunOutcome, RunSpec, Runner, RunnerError};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::model::{LatencyTrial, RecoveryTrial, ThroughputTrial};
use crate::util::{self, wall_ms, wall_us};

/// Which skillforge backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    Redis,
    Sqlite,
}

/// Where a backend lives: a Redis URL plus namespace, or a SQLite file.
#[derive(Debug, Clone)]
pub enum Target {
    Redis { url: String, namespace: String },
    Sqlite { path: PathBuf },
}

impl Target {
    pub async fn open(&self) -> Result<Arc<dyn QueueBackend>> {
        Ok(match self {
            Target::Redis { url, namespace } => Arc::new(RedisBackend::connect(url, namespace).await?),
            Target::Sqlite { path } => Arc::new(SqliteBackend::open(path).await?),
        })
    }

    /// Arguments that make a child process open the same backend.
    pub fn child_args(&self) -> Vec<String> {
        match self {
            Target::Redis { url, namespace } => {
                vec!["--backend".into(), "redis".into(), "--url".into(), url.clone(), "--namespace".into(), namespace.clone()]
            }
            Target::Sqlite { path } => {
                vec!["--backend".into(), "sqlite".into(), "--path".into(), path.display().to_string()]
            }
        }
    }

    pub fn from_args(backend: Backend, url: Option<String>, namespace: Option<String>, path: Option<PathBuf>) -> Result<Self> {
        Ok(match backend {
            Backend::Redis => Target::Redis {
                url: url.context("--url is required for redis")?,
                namespace: namespace.context("--namespace is required for redis")?,
            },
            Backend::Sqlite => Target::Sqlite { path: path.context("--path is required for sqlite")? },
        })
    }

    /// Whether all `n` started jobs have their completion persisted, read straight from the
    /// store (not through the engine), cheap enough to poll every millisecond whatever the
    /// backlog: on Redis `ZCARD results` ≥ n (terminal jobs not yet acknowledged; nothing
    /// acknowledges during a drain, every bench job succeeds, and a finish adds to it in the
    /// script that stores `succeeded`); on SQLite no job left `queued` or `running` (two
    /// lookups in the partial indexes `jobs_due` / `jobs_stale`: every job has started).
    async fn all_finished(&self, n: u64) -> Result<bool> {
        match self {
            Target::Redis { url, namespace } => {
                let client = redis::Client::open(url.as_str())?;
                let mut c = crate::util::patient(&client).await?;
                let done: u64 = redis::cmd("ZCARD").arg(format!("{namespace}:results")).query_async(&mut c).await?;
                Ok(done >= n)
            }
            Target::Sqlite { path } => {
                use sqlx::Connection;
                let opts = sqlx::sqlite::SqliteConnectOptions::new().filename(path).read_only(true);
                let mut c = sqlx::SqliteConnection::connect_with(&opts).await?;
                let busy: i64 = sqlx::query_scalar(
                    "SELECT EXISTS (SELECT 1 FROM jobs WHERE state = 'queued') \
                     OR EXISTS (SELECT 1 FROM jobs WHERE state = 'running')",
                )
                .fetch_one(&mut c)
                .await?;
                c.close().await?;
                Ok(busy == 0)
            }
        }
    }

    /// Finished jobs, counted by index: Redis `ZCARD results`, SQLite the `jobs_pending` partial
    /// index (finished, not yet acknowledged). O(finished) on SQLite: for the latency figure,
    /// whose few finished jobs may sit beside a large delayed backlog.
    async fn count_finished(&self) -> Result<u64> {
        match self {
            Target::Redis { url, namespace } => {
                let client = redis::Client::open(url.as_str())?;
                let mut c = crate::util::patient(&client).await?;
                Ok(redis::cmd("ZCARD").arg(format!("{namespace}:results")).query_async(&mut c).await?)
            }
            Target::Sqlite { path } => {
                use sqlx::Connection;
                let opts = sqlx::sqlite::SqliteConnectOptions::new().filename(path).read_only(true);
                let mut c = sqlx::SqliteConnection::connect_with(&opts).await?;
                let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM jobs WHERE result_pending = 1").fetch_one(&mut c).await?;
                c.close().await?;
                Ok(n as u64)
            }
        }
    }

    /// Finished jobs counted by index, checked by sampling (never one pass over every job):
    /// Redis `ZCARD results`, SQLite the `jobs_pending` partial index (finished, not yet
    /// acknowledged); then 1 000 finished jobs drawn at random (Redis `ZRANDMEMBER results`,
    /// SQLite a window of the `jobs_pending` index at a random offset) must all be `succeeded`.
    /// Errors when a sampled job is not.
    async fn count_succeeded(&self) -> Result<u64> {
        const SAMPLE: usize = 1000;
        match self {
            Target::Redis { url, namespace } => {
                let client = redis::Client::open(url.as_str())?;
                let mut c = crate::util::patient(&client).await?;
                let n: u64 = redis::cmd("ZCARD").arg(format!("{namespace}:results")).query_async(&mut c).await?;
                let ids: Vec<String> =
                    redis::cmd("ZRANDMEMBER").arg(format!("{namespace}:results")).arg(SAMPLE).query_async(&mut c).await?;
                let mut pipe = redis::pipe();
                for id in &ids {
                    pipe.cmd("HGET").arg(format!("{namespace}:job:{id}")).arg("s");
                }
                let states: Vec<Option<String>> = pipe.query_async(&mut c).await?;
                if let Some(bad) = states.iter().find(|s| s.as_deref() != Some("succeeded")) {
                    bail!("a sampled job is {bad:?}, not succeeded");
                }
                Ok(n)
            }
            Target::Sqlite { path } => {
                use sqlx::Connection;
                let opts = sqlx::sqlite::SqliteConnectOptions::new().filename(path).read_only(true);
                let mut c = sqlx::SqliteConnection::connect_with(&opts).await?;
                let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM jobs WHERE result_pending = 1")
                    .fetch_one(&mut c)
                    .await?;
                // A clock-derived offset is random enough for a spot check.
                let seed = u64::from(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.subsec_nanos());
                let offset = seed % (n as u64).saturating_sub(SAMPLE as u64).max(1);
                let not_succeeded: i64 = sqlx::query_scalar(
                    "SELECT COUNT(*) FROM (SELECT state FROM jobs WHERE result_pending = 1 \
                     ORDER BY updated_at_ms, seq LIMIT ?1 OFFSET ?2) WHERE state <> 'succeeded'",
                )
                .bind(SAMPLE as i64)
                .bind(offset as i64)
                .fetch_one(&mut c)
                .await?;
                c.close().await?;
                if not_succeeded > 0 {
                    bail!("{not_succeeded} sampled jobs are not succeeded");
                }
                Ok(n as u64)
            }
        }
    }
}

/// Shared between the bench and its no-op runner.
pub struct Probe {
    base: Instant,
    /// Nanoseconds since `base` of the first handler start (`u64::MAX` = none yet).
    first_ns: AtomicU64,
    started: AtomicU64,
    target: u64,
    all_started: Notify,
    /// Enqueue→start latencies (ms) when jobs carry `sent_us`.
    latencies: Mutex<Vec<f64>>,
}

impl Probe {
    pub fn new(target: u64) -> Arc<Self> {
        Arc::new(Self {
            base: Instant::now(),
            first_ns: AtomicU64::new(u64::MAX),
            started: AtomicU64::new(0),
            target,
            all_started: Notify::new(),
            latencies: Mutex::new(Vec::new()),
        })
    }

    /// Records one handler start (and its latency when the payload carries `sent_us`).
    pub fn hit(&self, sent_us: Option<f64>) {
        if let Some(sent) = sent_us {
            let lat = (wall_us() - sent) / 1000.0;
            self.latencies.lock().expect("latency lock").push(lat);
        }
        let ns = self.base.elapsed().as_nanos() as u64;
        self.first_ns.fetch_min(ns, Ordering::Relaxed);
        if self.started.fetch_add(1, Ordering::AcqRel) + 1 == self.target {
            self.all_started.notify_one();
        }
    }

    pub fn first_start(&self) -> Instant {
        self.base + Duration::from_nanos(self.first_ns.load(Ordering::Relaxed))
    }

    pub async fn wait_all(&self, limit: Duration) -> Result<()> {
        if self.started.load(Ordering::Acquire) >= self.target {
            return Ok(());
        }
        tokio::time::timeout(limit, self.all_started.notified()).await.with_context(|| {
            format!(
                "only {} of {} jobs started within {limit:?}",
                self.started.load(Ordering::Relaxed),
                self.target
            )
        })
    }

    pub fn latencies(&self) -> Vec<f64> {
        self.latencies.lock().expect("latency lock").clone()
    }
}

/// The no-op runner registered under kind `noop`.
struct NoopRunner(Arc<Probe>);

#[async_trait::async_trait]
impl Runner for NoopRunner {
    fn kind(&self) -> &'static str {
        "noop"
    }
    async fn run(&self, spec: &RunSpec, _ctx: &RunContext) -> Result<RunOutcome, RunnerError> {
        self.0.hit(spec.payload.get("sent_us").and_then(serde_json::Value::as_f64));
        Ok(passed())
    }
}

fn passed() -> RunOutcome {
    RunOutcome {
        exit: ExitClass::Passed,
        exit_code: Some(0),
        duration_ms: 0,
        stdout_tail: String::new(),
        stderr_tail: String::new(),
        detail: serde_json::Value::Null,
    }
}

/// A running in-process worker.
struct Running {
    stop: CancellationToken,
    handle: tokio::task::JoinHandle<skillforge_engine::worker::WorkerReport>,
    _scratch: tempfile::TempDir,
}

impl Running {
    async fn stop(self) -> Result<()> {
        self.stop.cancel();
        self.handle.await.context("worker task")?;
        Ok(())
    }
}

fn start_worker(backend: Arc<dyn QueueBackend>, runner: Arc<dyn Runner>, name: &str, concurrency: usize) -> Result<Running> {
    let scratch = tempfile::tempdir()?;
    let mut config = WorkerConfig::new(name, scratch.path().to_owned());
    config.concurrency = concurrency;
    let worker = Worker::new(config, backend, RunnerRegistry::new().with(runner));
    let stop = CancellationToken::new();
    let handle = tokio::spawn(worker.run(stop.clone()));
    Ok(Running { stop, handle, _scratch: scratch })
}

/// Drains the `n` no-op jobs already queued on `backend` with one worker at `concurrency`, until
/// their completions are persisted (the scale figures' memory pass).
pub async fn drain_existing(target: &Target, backend: Arc<dyn QueueBackend>, n: u64, concurrency: usize) -> Result<()> {
    let probe = Probe::new(n);
    let worker = start_worker(backend, Arc::new(NoopRunner(probe.clone())), "bench-drain", concurrency)?;
    probe.wait_all(Duration::from_secs(1800)).await?;
    let persisted = util::wait_until(Duration::from_millis(5), Duration::from_secs(600), || target.all_finished(n)).await?;
    worker.stop().await?;
    if !persisted {
        bail!("the backend never recorded {n} completions");
    }
    Ok(())
}

/// Figure 1 for skillforge: enqueue `n` no-op jobs in chunks of 1 000, then drain at `concurrency`.
pub async fn throughput(target: &Target, n: u64, concurrency: usize, profile: bool) -> Result<ThroughputTrial> {
    let sqlite = match target {
        Target::Sqlite { path } => Some(Arc::new(SqliteBackend::open(path).await?)),
        Target::Redis { .. } => None,
    };
    let backend: Arc<dyn QueueBackend> = match &sqlite {
        Some(b) => b.clone(),
        None => target.open().await?,
    };
    let spec = JobSpec::new("noop", serde_json::json!({}));
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
    let redis_url = match target {
        Target::Redis { url, .. } => Some(url.clone()),
        Target::Sqlite { .. } => None,
    };
    if let Some(url) = &redis_url {
        util::redis_reset_stats(url).await?;
    }
    let redis_before = match &redis_url {
        Some(url) => Some(util::redis_stats(url).await?),
        None => None,
    };
    let cpu0 = util::self_cpu_s();
    let probe = Probe::new(n);
    let recorder = Arc::new(crate::timed::Recorder::default());
    let worker_backend: Arc<dyn QueueBackend> = if profile {
        Arc::new(crate::timed::Timed { inner: backend.clone(), rec: recorder.clone() })
    } else {
        backend.clone()
    };
    let worker = start_worker(worker_backend, Arc::new(NoopRunner(probe.clone())), "bench-tp", concurrency)?;
    probe.wait_all(Duration::from_secs(1800)).await?;
    // The last completion is persisted when the backend counts n successes.
    let persisted = util::wait_until(Duration::from_millis(1), Duration::from_secs(600), || async {
        target.all_finished(n).await
    })
    .await?;
    let end = Instant::now();
    let cpu = util::self_cpu_s() - cpu0;
    let redis_after = match &redis_url {
        Some(url) => Some(util::redis_stats(url).await?),
        None => None,
    };
    worker.stop().await?;
    if !persisted {
        bail!("the backend never recorded {n} completions");
    }
    let verified = target.count_succeeded().await?;
    let elapsed = end.duration_since(probe.first_start()).as_secs_f64();
    let trial = ThroughputTrial {
        n,
        elapsed_s: elapsed,
        rate: n as f64 / elapsed,
        verified_completed: verified,
        client_cpu_s: cpu,
        redis_cpu_s: redis_after.as_ref().zip(redis_before.as_ref()).map(|(a, b)| a.cpu_s - b.cpu_s),
        backend_calls: profile.then(|| recorder.snapshot()),
        ..Default::default()
    };
    Ok(match redis_after {
        Some(stats) => trial.with_redis(&stats),
        None => trial,
    })
}

/// Figure 2 for skillforge: an idle in-process worker; a producer process (this binary, mode
/// `produce`) adds `n` jobs one at a time at `rate` per second, each stamped with its send time.
pub async fn latency(target: &Target, n: u64, rate: u64, concurrency: usize) -> Result<LatencyTrial> {
    let backend = target.open().await?;
    let probe = Probe::new(n);
    let worker = start_worker(backend.clone(), Arc::new(NoopRunner(probe.clone())), "bench-lat", concurrency)?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut producer = Command::new(std::env::current_exe()?)
        .arg("produce")
        .args(target.child_args())
        .args(["--n", &n.to_string(), "--rate", &rate.to_string()])
        .stdout(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .context("spawn the producer process")?;
    let limit = Duration::from_secs(n / rate.max(1) + 60);
    probe.wait_all(limit).await?;
    let status = producer.wait().await?;
    if !status.success() {
        bail!("producer failed: {status}");
    }
    util::wait_until(Duration::from_millis(5), Duration::from_secs(30), || async {
        Ok(target.count_finished().await? >= n)
    })
    .await?;
    worker.stop().await?;
    let verified = target.count_succeeded().await?;
    Ok(LatencyTrial::from_latencies(&probe.latencies(), verified))
}

/// Producer process: `n` jobs, one call each, paced at `rate` per second on an absolute schedule.
pub async fn produce(target: &Target, n: u64, rate: u64) -> Result<()> {
    let backend = target.open().await?;
    let every = Duration::from_secs_f64(1.0 / rate.max(1) as f64);
    let start = tokio::time::Instant::now();
    for i in 0..n {
        tokio::time::sleep_until(start + every * i as u32).await;
        let spec = JobSpec::new("noop", serde_json::json!({ "sent_us": wall_us() }));
        backend.enqueue(&spec).await?;
    }
    Ok(())
}

/// The long job of the recovery figure: announces its start on stdout, then runs until cancelled.
struct SleepRunner;

#[async_trait::async_trait]
impl Runner for SleepRunner {
    fn kind(&self) -> &'static str {
        "sleep"
    }
    async fn run(&self, spec: &RunSpec, ctx: &RunContext) -> Result<RunOutcome, RunnerError> {
        println!(
            "{}",
            serde_json::json!({ "event": "started", "at_ms": wall_ms(), "job": spec.job_id, "pid": std::process::id() })
        );
        tokio::select! {
            () = ctx.cancel.cancelled() => {}
            () = tokio::time::sleep(Duration::from_secs(600)) => {}
        }
        Ok(RunOutcome { exit: ExitClass::Killed { signal: 15 }, ..passed() })
    }
}

/// Child-process mode for figure 3: a worker (concurrency 1) with the `sleep` runner, until killed.
pub async fn recovery_worker(target: &Target, name: &str) -> Result<()> {
    let backend = target.open().await?;
    let worker = start_worker(backend, Arc::new(SleepRunner), name, 1)?;
    tokio::time::sleep(Duration::from_millis(50)).await;
    println!("{}", serde_json::json!({ "event": "ready", "pid": std::process::id() }));
    worker.handle.await?;
    Ok(())
}

/// A child process whose stdout carries JSON event lines.
pub struct EventChild {
    pub child: Child,
    lines: Lines<BufReader<ChildStdout>>,
}

impl EventChild {
    pub fn spawn(mut cmd: Command) -> Result<Self> {
        let mut child = cmd.stdout(Stdio::piped()).kill_on_drop(true).spawn().context("spawn child")?;
        let stdout = child.stdout.take().context("child stdout")?;
        Ok(Self { child, lines: BufReader::new(stdout).lines() })
    }

    /// Waits up to `limit` for the next line whose `event` is `event`.
    pub async fn expect(&mut self, event: &str, limit: Duration) -> Result<serde_json::Value> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let line = tokio::time::timeout_at(deadline, self.lines.next_line())
                .await
                .with_context(|| format!("no `{event}` event within {limit:?}"))??
                .with_context(|| format!("child exited before `{event}`"))?;
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line)
                && v.get("event").and_then(|e| e.as_str()) == Some(event)
            {
                return Ok(v);
            }
        }
    }

    /// The next non-event JSON line (a result), waiting up to `limit`.
    pub async fn result(&mut self, limit: Duration) -> Result<serde_json::Value> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let line = tokio::time::timeout_at(deadline, self.lines.next_line())
                .await
                .with_context(|| format!("no result within {limit:?}"))??
                .context("child exited without a result")?;
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line)
                && v.get("event").is_none()
            {
                return Ok(v);
            }
        }
    }

    pub async fn kill(&mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }
}

fn self_cmd(mode: &str) -> Result<Command> {
    let mut c = Command::new(std::env::current_exe()?);
    c.arg(mode);
    Ok(c)
}

/// Figure 3 for skillforge: victim and survivor are separate worker processes (this binary,
/// mode `recovery-worker`, running the engine's `Worker`); the victim is SIGKILLed
/// `offset` after its job started.
pub async fn recovery(target: &Target, heartbeat: Duration, stale_after: Duration, offset: Duration) -> Result<RecoveryTrial> {
    let backend = target.open().await?;
    let mut victim_cmd = self_cmd("recovery-worker")?;
    victim_cmd.args(target.child_args()).args(["--name", "victim"]);
    let mut victim = EventChild::spawn(victim_cmd)?;
    victim.expect("ready", Duration::from_secs(30)).await?;
    let mut spec = JobSpec::new("sleep", serde_json::json!({}));
    spec.heartbeat_ms = heartbeat.as_millis() as u64;
    spec.stale_after_ms = stale_after.as_millis() as u64;
    let job = backend.enqueue(&spec).await?;
    let started = victim.expect("started", Duration::from_secs(30)).await?;
    let started_ms = started["at_ms"].as_f64().context("started.at_ms")?;
    let mut survivor_cmd = self_cmd("recovery-worker")?;
    survivor_cmd.args(target.child_args()).args(["--name", "survivor"]);
    let mut survivor = EventChild::spawn(survivor_cmd)?;
    survivor.expect("ready", Duration::from_secs(30)).await?;
    let kill_at = started_ms + offset.as_secs_f64() * 1e3;
    let wait = kill_at - wall_ms();
    if wait > 0.0 {
        tokio::time::sleep(Duration::from_secs_f64(wait / 1e3)).await;
    }
    let killed_ms = wall_ms();
    victim.kill().await;
    let restarted = survivor.expect("started", Duration::from_secs(180)).await;
    survivor.kill().await;
    let restarted = restarted?;
    if restarted["job"].as_str() != Some(job.job_id.as_str()) {
        bail!("the survivor started another job: {restarted}");
    }
    let recovered_ms = restarted["at_ms"].as_f64().context("started.at_ms")?;
    Ok(RecoveryTrial { kill_offset_s: (killed_ms - started_ms) / 1e3, recovery_s: (recovered_ms - killed_ms) / 1e3 })
}

pub fn sqlite_file(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.db"))
}
