//! The processes of one soak run: worker slots and `serve` (the real binary), redis-server (AOF
//! on), and the lock holders; killing, pausing, stopping and restarting them, noticing deaths the
//! soak did not cause, and sampling memory and file descriptors.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use skillforge_tests::RedisServer;

use crate::history::{ProcessRecord, Sample};

/// libfaketime (multi-threaded build; Debian's `faketime` package installs it).
const FAKETIME_LIB: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

/// How far above the memory redis-server uses when an eviction-pressure window opens its
/// `maxmemory` is set: a few dozen jobs' worth, so the window's writes soon reach it (and the
/// server's own churn, client buffers and the like, moves it across the limit and back).
const PRESSURE_HEADROOM: u64 = 64 * 1024;

/// redis-server's count of commands refused with `OOM` (`INFO errorstats`) and of keys it
/// evicted (`INFO stats`), zero where it does not say.
fn pressure_counters(redis: &RedisServer) -> (u64, u64) {
    let field = |section: &str, prefix: &str| {
        redis.cli(&["info", section]).and_then(|info| {
            info.lines()
                .find_map(|l| l.strip_prefix(prefix))
                .and_then(|v| {
                    v.trim()
                        .trim_start_matches("count=")
                        .split(',')
                        .next()?
                        .parse()
                        .ok()
                })
        })
    };
    (
        field("errorstats", "errorstat_OOM:").unwrap_or(0),
        field("stats", "evicted_keys:").unwrap_or(0),
    )
}

/// Seconds a stopped worker's running jobs may go on (`worker --grace`): longer than any job of
/// the mix, so a graceful stop never kills a job mid-effect.
pub(crate) const WORKER_GRACE_SECS: u64 = 10;

struct Slot {
    name: String,
    incarnation: usize,
    child: Option<Child>,
    record: usize,
    paused: bool,
    /// When the running incarnation started (its warm-up counts from here).
    started: Instant,
}

/// The soak's processes.
pub(crate) struct Cluster {
    bin: PathBuf,
    home: PathBuf,
    logs: PathBuf,
    /// The Redis server of the Redis backend.
    pub(crate) redis: Option<RedisServer>,
    redis_paused: bool,
    /// Whether an OOM window is open (`maxmemory` 1 byte).
    redis_oom: bool,
    /// An eviction-pressure window: `None` when none is open, else whether its policy is
    /// `volatile-lru` (keys with a TTL evicted; a start of `worker` or `serve` is refused then,
    /// so none is started until the window closes).
    redis_pressure: Option<bool>,
    /// redis-server's (OOM refusals, evicted keys) counters when the open pressure window opened.
    pressure_base: (u64, u64),
    /// What the pressure windows did so far: writes refused with `OOM`, keys evicted.
    pub(crate) pressure_effect: (u64, u64),
    /// The `faketime` offset `serve` runs (and restarts) under, if any (`+60s`, `-60s`).
    serve_clock: Option<&'static str>,
    /// Jobs whose records [`Cluster::break_record`] corrupted.
    pub(crate) broken: Vec<String>,
    concurrency: usize,
    workers: Vec<Slot>,
    serve: Slot,
    stopping: Vec<(Child, usize, Instant)>,
    holders: Vec<Child>,
    /// Every worker and `serve` process started, for the checker.
    pub(crate) records: Vec<ProcessRecord>,
    /// The effects log, how far [`Cluster::sample`] has read it, and the `start` lines so far.
    effects: PathBuf,
    effects_read: u64,
    attempts: u64,
    /// How long a process runs before its warm sample.
    warm_up: Duration,
}

impl Cluster {
    /// Starts redis-server (Redis backend), `serve` and `workers` worker slots on `home`; the
    /// jobs write to `effects`, and each process's warm sample is taken once it ran `warm_up`.
    pub(crate) fn start(
        bin: &Path,
        home: &Path,
        redis: bool,
        workers: usize,
        concurrency: usize,
        effects: &Path,
        warm_up: Duration,
    ) -> Self {
        let logs = home.join("logs");
        std::fs::create_dir_all(&logs).expect("create the logs dir");
        let slot = |name: String| Slot {
            name,
            incarnation: 0,
            child: None,
            record: 0,
            paused: false,
            started: Instant::now(),
        };
        let mut c = Self {
            bin: bin.to_owned(),
            home: home.to_owned(),
            logs,
            redis: redis.then(|| RedisServer::start_with(true)),
            redis_paused: false,
            redis_oom: false,
            redis_pressure: None,
            pressure_base: (0, 0),
            pressure_effect: (0, 0),
            serve_clock: None,
            broken: Vec::new(),
            concurrency,
            workers: (0..workers).map(|i| slot(format!("worker-{i}"))).collect(),
            serve: slot("serve".to_owned()),
            stopping: Vec::new(),
            holders: Vec::new(),
            records: Vec::new(),
            effects: effects.to_owned(),
            effects_read: 0,
            attempts: 0,
            warm_up,
        };
        c.launch_serve();
        for i in 0..workers {
            c.launch_worker(i);
        }
        c
    }

    /// The soak's skillforge home.
    pub(crate) fn home(&self) -> &Path {
        &self.home
    }

    /// `skillforge --home HOME [--queue URL]` with `SKILLFORGE_LOG=info`.
    pub(crate) fn cmd(&self) -> Command {
        let mut c = Command::new(&self.bin);
        c.arg("--home").arg(&self.home);
        if let Some(r) = &self.redis {
            c.arg("--queue").arg(r.url());
        }
        c.env("SKILLFORGE_LOG", "info");
        c
    }

    fn launch(&mut self, base: &[String], which: Option<usize>) {
        let slot = match which {
            Some(i) => &mut self.workers[i],
            None => &mut self.serve,
        };
        slot.incarnation += 1;
        let name = format!("{}#{}", slot.name, slot.incarnation);
        let log_path = self.logs.join(format!("{name}.log"));
        let log = File::create(&log_path).expect("create a process log");
        let mut cmd = if let (None, Some(offset)) = (which, self.serve_clock) {
            // A clock step for this process only; its monotonic clock stays real. libfaketime is
            // preloaded into `serve` itself: the `faketime` program runs its command as a child,
            // so killing it would leave that `serve` running (and holding the home's serve lock).
            let mut c = Command::new(&self.bin);
            c.env("LD_PRELOAD", FAKETIME_LIB)
                .env("FAKETIME", offset)
                .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
            c
        } else {
            Command::new(&self.bin)
        };
        cmd.arg("--home").arg(&self.home);
        if let Some(r) = &self.redis {
            cmd.arg("--queue").arg(r.url());
        }
        let child = cmd
            .env("SKILLFORGE_LOG", "info")
            .args(base)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn skillforge");
        self.records.push(ProcessRecord {
            name,
            pid: child.id(),
            ..ProcessRecord::default()
        });
        let slot = match which {
            Some(i) => &mut self.workers[i],
            None => &mut self.serve,
        };
        slot.record = self.records.len() - 1;
        slot.child = Some(child);
        slot.paused = false;
        slot.started = Instant::now();
    }

    fn launch_worker(&mut self, i: usize) {
        let base = [
            "worker",
            "--name",
            &format!("soak{i}"),
            "--concurrency",
            &self.concurrency.to_string(),
            "--grace",
            &WORKER_GRACE_SECS.to_string(),
        ]
        .map(str::to_owned);
        self.launch(&base, Some(i));
    }

    fn launch_serve(&mut self) {
        self.launch(
            &[
                "serve".to_owned(),
                "--canary-check-every-secs".to_owned(),
                "0".to_owned(),
            ],
            None,
        );
    }

    fn slot(&mut self, which: Option<usize>) -> &mut Slot {
        match which {
            Some(i) => &mut self.workers[i],
            None => &mut self.serve,
        }
    }

    /// SIGKILLs worker slot `which` (`None`: `serve`), if running; `false` when it was not.
    pub(crate) fn kill(&mut self, which: Option<usize>) -> bool {
        let slot = self.slot(which);
        let (Some(mut child), record) = (slot.child.take(), slot.record) else {
            return false;
        };
        self.records[record].on_purpose = true;
        let _ = child.kill();
        let status = child
            .wait()
            .map(|s| format!("{s}"))
            .unwrap_or_else(|e| e.to_string());
        self.records[record].exited = Some(status);
        true
    }

    /// SIGSTOPs (`pause`) or SIGCONTs worker slot `which`; `false` when there is nothing to do.
    pub(crate) fn pause_worker(&mut self, which: usize, pause: bool) -> bool {
        let slot = &mut self.workers[which];
        let Some(child) = &slot.child else {
            return false;
        };
        if slot.paused == pause {
            return false;
        }
        slot.paused = pause;
        let _ = kill(
            Pid::from_raw(child.id() as i32),
            if pause {
                Signal::SIGSTOP
            } else {
                Signal::SIGCONT
            },
        );
        true
    }

    /// SIGTERMs worker slot `which` (a graceful stop); its exit is awaited by [`Cluster::poll`].
    /// A paused worker is not stopped (its jobs could not finish within the grace).
    pub(crate) fn stop_worker(&mut self, which: usize) -> bool {
        let slot = &mut self.workers[which];
        if slot.paused {
            return false;
        }
        let (Some(child), record) = (slot.child.take(), slot.record) else {
            return false;
        };
        self.records[record].on_purpose = true;
        let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
        self.stopping.push((
            child,
            record,
            Instant::now() + Duration::from_secs(WORKER_GRACE_SECS + 15),
        ));
        true
    }

    /// Starts worker slot `which` (`None`: `serve`) when it is not running. Not while an
    /// eviction-pressure window with a volatile policy is open: the start would be refused (issue
    /// 32 item 1), so the slot is filled when the window closes ([`Cluster::fill_slots`]).
    pub(crate) fn ensure(&mut self, which: Option<usize>) -> bool {
        if self.slot(which).child.is_some() || self.redis_pressure == Some(true) {
            return false;
        }
        match which {
            Some(i) => self.launch_worker(i),
            None => self.launch_serve(),
        }
        true
    }

    /// SIGSTOPs or SIGCONTs redis-server.
    pub(crate) fn pause_redis(&mut self, pause: bool) -> bool {
        let Some(pid) = self.redis.as_ref().and_then(RedisServer::pid) else {
            return false;
        };
        if self.redis_paused == pause {
            return false;
        }
        self.redis_paused = pause;
        let _ = kill(
            Pid::from_raw(pid),
            if pause {
                Signal::SIGSTOP
            } else {
                Signal::SIGCONT
            },
        );
        true
    }

    /// Restarts `serve` with its clock stepped by `offset` (`+60s`, `-60s`; `None`: back on the
    /// real clock); false when nothing changes or `faketime` is not installed.
    pub(crate) fn serve_clock(&mut self, offset: Option<&'static str>) -> bool {
        let installed = std::path::Path::new(FAKETIME_LIB).is_file();
        if self.serve_clock == offset || (offset.is_some() && !installed) {
            return false;
        }
        self.serve_clock = offset;
        self.kill(None);
        self.ensure(None);
        true
    }

    /// Submits an extra job (`true` with a marked argument long enough that its payload is
    /// kept in its own key) and corrupts its hash at once: its creation time `c` no longer
    /// parses, so no read, lease or reap of it can decode it. Returns false when Redis is
    /// unavailable (paused, OOM) or the job cannot be found.
    pub(crate) fn break_record(&mut self) -> bool {
        if self.redis_paused || self.redis_oom {
            return false;
        }
        let Some(redis) = &self.redis else {
            return false;
        };
        let marker = format!("soak-broken-{}-{}", self.broken.len(), "z".repeat(80));
        let out = self
            .cmd()
            .args([
                "--json",
                "jobs",
                "submit",
                "--attempts",
                "1",
                "--heartbeat",
                "0.5",
                "--stale-after",
                "2",
                "--",
                "true",
                &marker,
            ])
            .output();
        let Some(id) = out
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| serde_json::from_slice::<serde_json::Value>(&o.stdout).ok())
            .and_then(|v| v["id"].as_str().map(str::to_owned))
        else {
            return false;
        };
        let keys = redis
            .cli(&["--scan", "--pattern", "skillforge:job:*:p"])
            .unwrap_or_default();
        let Some(key) = keys
            .lines()
            .find(|k| !k.is_empty() && redis.cli(&["get", k]).is_some_and(|v| v.contains(&marker)))
        else {
            return false;
        };
        if redis
            .cli(&["hset", key.trim_end_matches(":p"), "c", "not-a-time"])
            .is_none()
        {
            return false;
        }
        self.broken.push(id);
        true
    }

    /// Whether an OOM window is open.
    pub(crate) fn is_oom(&self) -> bool {
        self.redis_oom
    }

    /// Whether an eviction-pressure window is open.
    pub(crate) fn is_under_pressure(&self) -> bool {
        self.redis_pressure.is_some()
    }

    /// Starts every worker slot and `serve` that is not running.
    pub(crate) fn fill_slots(&mut self) {
        for i in 0..self.workers.len() {
            self.ensure(Some(i));
        }
        self.ensure(None);
    }

    /// Opens (`Some(volatile)`) or closes (`None`) an eviction-pressure window: `maxmemory` set
    /// [`PRESSURE_HEADROOM`] above the memory redis-server uses now, under `noeviction` (writes
    /// that need more are refused with `OOM` as the queue grows, others go through) or
    /// `volatile-lru` (keys with a TTL — lease-request records, transfer records — are evicted
    /// first); closing puts `maxmemory` 0 and `noeviction` back. Not while redis-server is paused
    /// or an OOM window is open, nor (volatile) while a process of the soak is still starting (it
    /// would refuse the policy): false then.
    pub(crate) fn eviction_pressure(&mut self, window: Option<bool>) -> bool {
        if self.redis_paused || self.redis_oom || self.redis_pressure.is_some() == window.is_some()
        {
            return false;
        }
        let Some(redis) = &self.redis else {
            return false;
        };
        let Some(volatile) = window else {
            let closed = redis.cli(&["config", "set", "maxmemory", "0"]).is_some()
                && redis
                    .cli(&["config", "set", "maxmemory-policy", "noeviction"])
                    .is_some();
            if closed {
                let (ooms, evicted) = pressure_counters(redis);
                self.pressure_effect.0 += ooms.saturating_sub(self.pressure_base.0);
                self.pressure_effect.1 += evicted.saturating_sub(self.pressure_base.1);
                self.redis_pressure = None;
                self.fill_slots();
            }
            return closed;
        };
        let base = pressure_counters(redis);
        let starting = self
            .workers
            .iter()
            .chain([&self.serve])
            .any(|s| s.child.is_some() && s.started.elapsed() < Duration::from_secs(2));
        if volatile && starting {
            return false;
        }
        let used = redis.cli(&["info", "memory"]).and_then(|info| {
            info.lines().find_map(|l| {
                l.strip_prefix("used_memory:")
                    .and_then(|v| v.trim().parse::<u64>().ok())
            })
        });
        let Some(used) = used else { return false };
        let policy = if volatile {
            "volatile-lru"
        } else {
            "noeviction"
        };
        if redis
            .cli(&["config", "set", "maxmemory-policy", policy])
            .is_none()
            || redis
                .cli(&[
                    "config",
                    "set",
                    "maxmemory",
                    &(used + PRESSURE_HEADROOM).to_string(),
                ])
                .is_none()
        {
            return false;
        }
        self.redis_pressure = Some(volatile);
        self.pressure_base = base;
        true
    }

    /// Opens (`oom`) or closes an OOM window: `maxmemory` 1 byte (every write refused with `OOM`
    /// under the default `noeviction`) or 0 (no limit). Not while redis-server is paused (the
    /// `CONFIG SET` would wait for it): false then, and the caller tries again later.
    pub(crate) fn oom_redis(&mut self, oom: bool) -> bool {
        if self.redis_paused || self.redis_oom == oom || self.redis_pressure.is_some() {
            return false;
        }
        let Some(redis) = &self.redis else {
            return false;
        };
        if redis
            .cli(&["config", "set", "maxmemory", if oom { "1" } else { "0" }])
            .is_none()
        {
            return false;
        }
        self.redis_oom = oom;
        true
    }

    /// Restarts redis-server (its AOF, fsync always, keeps every write).
    pub(crate) fn restart_redis(&mut self) -> bool {
        if self.redis_paused {
            return false;
        }
        match &self.redis {
            Some(r) => {
                r.restart();
                // A restarted server starts without the window's `maxmemory` and policy.
                self.redis_oom = false;
                if self.redis_pressure.take().is_some() {
                    self.fill_slots();
                }
                true
            }
            None => false,
        }
    }

    /// Holds the write lock of the SQLite file `db` from another process for `for_ms`.
    pub(crate) fn hold_write_lock(&mut self, db: &Path, for_ms: u64) -> bool {
        let script = format!(
            "PRAGMA busy_timeout = 5000;\nBEGIN IMMEDIATE;\n.system sleep {:.3}\nCOMMIT;\n",
            for_ms as f64 / 1000.0
        );
        let child = Command::new("sqlite3")
            .arg(db)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let Ok(mut child) = child else { return false };
        if let Some(mut stdin) = child.stdin.take() {
            let _ = std::io::Write::write_all(&mut stdin, script.as_bytes());
        }
        self.holders.push(child);
        true
    }

    /// Notices exits: a worker or `serve` that died without the soak stopping it is recorded (a
    /// silent death) and started again; stopped workers that exited are recorded; finished lock
    /// holders are reaped. A stopped worker still alive past its grace is SIGKILLed.
    pub(crate) fn poll(&mut self) {
        for which in (0..self.workers.len()).map(Some).chain([None]) {
            let slot = self.slot(which);
            let record = slot.record;
            let Some(child) = &mut slot.child else {
                continue;
            };
            if let Ok(Some(status)) = child.try_wait() {
                slot.child = None;
                self.records[record].exited = Some(format!("{status}"));
                self.records[record].log_tail = self.log_tail(record);
                self.ensure(which);
            }
        }
        let mut still = Vec::new();
        for (mut child, record, deadline) in self.stopping.drain(..) {
            match child.try_wait() {
                Ok(Some(status)) => self.records[record].exited = Some(format!("{status}")),
                _ if Instant::now() > deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    self.records[record].exited =
                        Some("did not stop within its grace: SIGKILLed".to_owned());
                }
                _ => still.push((child, record, deadline)),
            }
        }
        self.stopping = still;
        self.holders
            .retain_mut(|c| !matches!(c.try_wait(), Ok(Some(_))));
    }

    fn log_tail(&self, record: usize) -> String {
        let text =
            std::fs::read_to_string(self.logs.join(format!("{}.log", self.records[record].name)))
                .unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(8)..].join("\n")
    }

    /// Samples resident set size and open fds of every running worker and `serve`, with the
    /// attempts started so far: the last sample of each, its largest values, and its warm sample
    /// (the first once it ran the warm-up).
    pub(crate) fn sample(&mut self) {
        self.count_attempts();
        let (attempts, warm_up) = (self.attempts, self.warm_up);
        for which in (0..self.workers.len()).map(Some).chain([None]) {
            let slot = self.slot(which);
            let (Some(child), record, warmed) =
                (&slot.child, slot.record, slot.started.elapsed() >= warm_up)
            else {
                continue;
            };
            let pid = child.id();
            let rss = std::fs::read_to_string(format!("/proc/{pid}/status"))
                .ok()
                .and_then(|s| {
                    s.lines().find_map(|l| {
                        l.strip_prefix("VmRSS:").map(|v| {
                            v.trim()
                                .trim_end_matches("kB")
                                .trim()
                                .parse::<u64>()
                                .unwrap_or(0)
                        })
                    })
                });
            let fds = std::fs::read_dir(format!("/proc/{pid}/fd"))
                .map(|d| d.count() as u64)
                .ok();
            let (Some(rss_kb), Some(fds)) = (rss, fds) else {
                continue;
            };
            let sample = Sample {
                attempts,
                rss_kb,
                fds,
            };
            let r = &mut self.records[record];
            r.max_rss_kb = r.max_rss_kb.max(rss_kb);
            r.max_fds = r.max_fds.max(fds);
            r.last = Some(sample);
            if warmed && r.warm.is_none() {
                r.warm = Some(sample);
            }
        }
    }

    /// Counts the `start` lines the effects log gained since the last call (whole lines only:
    /// a line being written is counted next time).
    fn count_attempts(&mut self) {
        use std::io::{Read, Seek, SeekFrom};
        let Ok(mut f) = File::open(&self.effects) else {
            return;
        };
        if f.seek(SeekFrom::Start(self.effects_read)).is_err() {
            return;
        }
        let mut buf = Vec::new();
        if f.read_to_end(&mut buf).is_err() {
            return;
        }
        let Some(end) = buf.iter().rposition(|b| *b == b'\n') else {
            return;
        };
        let whole = &buf[..=end];
        self.attempts += whole
            .split(|b| *b == b'\n')
            .filter(|l| l.starts_with(b"start "))
            .count() as u64;
        self.effects_read += whole.len() as u64;
    }

    /// Undoes every fault: SIGCONTs what is paused, starts what is not running, waits for the lock holders.
    pub(crate) fn heal(&mut self) {
        self.pause_redis(false);
        self.oom_redis(false);
        self.eviction_pressure(None);
        self.serve_clock(None);
        for i in 0..self.workers.len() {
            self.pause_worker(i, false);
            self.ensure(Some(i));
        }
        self.ensure(None);
        for mut h in self.holders.drain(..) {
            let _ = h.wait();
        }
    }

    /// Stops every worker and `serve` with SIGTERM and waits for them; returns (name, exit status)
    /// of each that did not exit 0.
    pub(crate) fn shutdown(&mut self) -> Vec<(String, String)> {
        let first = self.records.len();
        let live: Vec<usize> = self
            .workers
            .iter()
            .chain([&self.serve])
            .filter(|s| s.child.is_some())
            .map(|s| s.record)
            .collect();
        for &i in &live {
            self.records[i].survived = true;
        }
        for i in 0..self.workers.len() {
            self.stop_worker(i);
        }
        if let (Some(child), record) = (self.serve.child.take(), self.serve.record) {
            self.records[record].on_purpose = true;
            let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
            self.stopping
                .push((child, record, Instant::now() + Duration::from_secs(30)));
        }
        while !self.stopping.is_empty() {
            self.poll();
            std::thread::sleep(Duration::from_millis(50));
        }
        debug_assert_eq!(first, self.records.len(), "shutdown starts nothing");
        live.into_iter()
            .map(|i| &self.records[i])
            .filter_map(|r| {
                r.exited
                    .as_ref()
                    .filter(|s| s.as_str() != "exit status: 0")
                    .map(|s| (r.name.clone(), s.clone()))
            })
            .collect()
    }
}
