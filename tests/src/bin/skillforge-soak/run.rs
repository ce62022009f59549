//! One soak run of one seed on one backend: start the processes, submit the mix while the
//! operator cancels and retries and the fault schedule plays, heal everything, wait out the quiet
//! period, read the queue and the domain store, and hand the whole [`History`] to the checker.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;

use crate::checker::{self, NOT_SETTLED, RESULT_NOT_APPLIED, STUCK_RUNNING, Violation};
use crate::cluster::Cluster;
use crate::history::{Applied, Effect, FinalJob, Growth, History, Submitted};
use crate::plan::{Fault, JobPlan, Plan};

/// How one run is shaped besides its plan.
#[derive(Debug, Clone)]
pub(crate) struct Setup {
    /// The `skillforge` binary.
    pub(crate) bin: PathBuf,
    /// Redis backend (else the embedded queue).
    pub(crate) redis: bool,
    /// Worker slots and each worker's `--concurrency`.
    pub(crate) workers: usize,
    /// Jobs each worker runs at once.
    pub(crate) concurrency: usize,
    /// Concurrent `jobs submit` processes.
    pub(crate) submitters: usize,
    /// Longest wait for the jobs to settle once every fault is undone.
    pub(crate) quiet: Duration,
    /// The run's directory (home, effects log, logs).
    pub(crate) dir: PathBuf,
    /// How much the surviving processes' memory and open fds may grow.
    pub(crate) growth: Growth,
}

/// What a run produced.
pub(crate) struct Outcome {
    /// The recorded history.
    pub(crate) history: History,
    /// What the checker found.
    pub(crate) violations: Vec<Violation>,
    /// Faults executed, by name.
    pub(crate) faults: BTreeMap<&'static str, usize>,
    /// Submits that failed (a keyed submit is retried until it answers; these are unkeyed ones).
    pub(crate) failed_submits: Vec<String>,
    /// Processes that did not exit 0 at the final SIGTERM.
    pub(crate) unclean_shutdowns: Vec<(String, String)>,
    /// What the eviction-pressure windows did: writes refused with `OOM`, keys evicted.
    pub(crate) pressure_effect: (u64, u64),
    /// Seconds: submitting + faults, then the quiet period.
    pub(crate) phases: (f64, f64),
}

fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

/// State the submitters, the operator and the fault loop share.
#[derive(Default)]
struct Shared {
    submitted: Vec<Submitted>,
    key_returns: Vec<(String, String)>,
    cancels: Vec<(Instant, String)>,
    retries: Vec<(String, i64)>,
    failed_submits: Vec<String>,
}

/// Runs `plan` with `setup`.
pub(crate) fn run(plan: &Plan, setup: &Setup) -> Outcome {
    let home = setup.dir.join("home");
    std::fs::create_dir_all(&home).expect("create the soak home");
    let effects = setup.dir.join("effects.log");
    std::fs::write(&effects, "").expect("create the effects log");
    let warm_up = Duration::from_millis(setup.growth.warm_up_ms);
    let cluster = Arc::new(Mutex::new(Cluster::start(
        &setup.bin,
        &home,
        setup.redis,
        setup.workers,
        setup.concurrency,
        &effects,
        warm_up,
    )));
    let shared = Arc::new(Mutex::new(Shared::default()));
    let started = Instant::now();

    let next = Arc::new(AtomicUsize::new(0));
    let submitters: Vec<_> = (0..setup.submitters)
        .map(|_| {
            let (cluster, shared, next, jobs, effects) = (
                cluster.clone(),
                shared.clone(),
                next.clone(),
                plan.jobs.clone(),
                effects.clone(),
            );
            std::thread::spawn(move || {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(job) = jobs.get(i) else { break };
                    submit(&cluster, &shared, job, &effects);
                }
            })
        })
        .collect();
    let stop_operator = Arc::new(AtomicBool::new(false));
    let sweep = Arc::new(AtomicBool::new(false));
    let operator = {
        let (cluster, shared, stop, sweep) = (
            cluster.clone(),
            shared.clone(),
            stop_operator.clone(),
            sweep.clone(),
        );
        let seed = plan.seed;
        std::thread::spawn(move || operate(&cluster, &shared, &stop, &sweep, seed))
    };

    let faults = play_faults(plan, &cluster, &submitters, &sweep);
    for s in submitters {
        let _ = s.join();
    }
    stop_operator.store(true, Ordering::SeqCst);
    let _ = operator.join();
    let submitted_at = started.elapsed().as_secs_f64();

    cluster.lock().unwrap().heal();
    let (mut jobs, mut applied) = settle(&cluster, &shared, &home, setup.quiet);
    // The records the soak corrupted are checked on their own: quarantined, or applied when
    // the job ran before its corruption; nothing else of the run may notice them.
    let broken = cluster.lock().unwrap().broken.clone();
    let quarantined: Vec<String> = json(&cluster, &["jobs", "list", "--state", "broken"])
        .and_then(|v| {
            v.as_array().map(|a| {
                a.iter()
                    .filter_map(|r| r["id"].as_str().map(str::to_owned))
                    .collect()
            })
        })
        .unwrap_or_default();
    let mut broken_violations = Vec::new();
    for id in &broken {
        if !quarantined.contains(id) && !applied.iter().any(|a| &a.job == id) {
            broken_violations.push(checker::Violation {
                check: checker::BROKEN_NOT_QUARANTINED,
                subject: id.clone(),
                detail: "a corrupted record is neither quarantined nor applied".to_owned(),
            });
        }
    }
    jobs.retain(|id, _| !broken.contains(id));
    applied.retain(|a| !broken.contains(&a.job));
    let quiet = started.elapsed().as_secs_f64() - submitted_at;
    let unclean_shutdowns = cluster.lock().unwrap().shutdown();
    let pressure_effect = cluster.lock().unwrap().pressure_effect;

    let shared = Arc::try_unwrap(shared)
        .ok()
        .expect("threads joined")
        .into_inner()
        .unwrap();
    let processes = cluster.lock().unwrap().records.clone();
    let history = History {
        submitted: shared.submitted,
        key_returns: shared.key_returns,
        effects: read_effects(&effects),
        retries: shared.retries,
        jobs,
        applied,
        processes,
        growth: Some(setup.growth),
    };
    let mut violations = checker::check(&history);
    violations.extend(broken_violations);
    Outcome {
        history,
        violations,
        faults,
        failed_submits: shared.failed_submits,
        unclean_shutdowns,
        pressure_effect,
        phases: (submitted_at, quiet),
    }
}

fn submit(cluster: &Mutex<Cluster>, shared: &Mutex<Shared>, job: &JobPlan, effects: &Path) {
    let mut args: Vec<String> = ["--json", "jobs", "submit"].map(str::to_owned).to_vec();
    let mut flag = |k: &str, v: String| {
        args.push(k.to_owned());
        args.push(v);
    };
    flag("--attempts", job.max_attempts.to_string());
    flag("--heartbeat", job.heartbeat.to_string());
    flag("--stale-after", job.stale_after.to_string());
    flag("--timeout", "60".to_owned());
    flag("--env", format!("SOAK_LOG={}", effects.display()));
    if let Some(k) = &job.key {
        flag("--idempotency-key", k.clone());
    }
    if let Some(l) = &job.lock {
        flag("--lock", l.clone());
    }
    if !job.idempotent() {
        args.push("--non-idempotent".to_owned());
    }
    args.extend([
        "--".to_owned(),
        "bash".to_owned(),
        "-c".to_owned(),
        job.script(),
    ]);
    let deadline = Instant::now() + Duration::from_secs(60);
    for round in 0..if job.resubmit { 2 } else { 1 } {
        let id = loop {
            let mut cmd = cluster.lock().unwrap().cmd();
            let out = cmd.args(&args).output().expect("run jobs submit");
            let id = out
                .status
                .success()
                .then(|| serde_json::from_slice::<Value>(&out.stdout).ok())
                .flatten();
            if let Some(id) = id.as_ref().and_then(|v| v["id"].as_str()) {
                break Some(id.to_owned());
            }
            // Without a key a failed submit is not retried: it might be the second copy of a job.
            if job.key.is_none() || Instant::now() > deadline {
                shared
                    .lock()
                    .unwrap()
                    .failed_submits
                    .push(String::from_utf8_lossy(&out.stderr).trim().to_owned());
                break None;
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        let Some(id) = id else { return };
        let mut s = shared.lock().unwrap();
        if let Some(k) = &job.key {
            s.key_returns.push((k.clone(), id.clone()));
        }
        if round == 0 {
            s.submitted.push(Submitted {
                id: id.clone(),
                kind: job.kind.to_owned(),
                key: job.key.clone(),
                lock: job.lock.clone(),
                max_attempts: job.max_attempts,
                idempotent: job.idempotent(),
                stale_after_ms: (job.stale_after * 1000.0) as i64,
            });
            if let Some(after) = job.cancel_after_ms {
                s.cancels
                    .push((Instant::now() + Duration::from_millis(after), id));
            }
        }
    }
}

/// `skillforge --json ARGS` through the cluster's command; `None` when it fails.
fn json(cluster: &Mutex<Cluster>, args: &[&str]) -> Option<Value> {
    let mut cmd = cluster.lock().unwrap().cmd();
    let out = cmd.arg("--json").args(args).output().ok()?;
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).ok())
        .flatten()
}

/// The operator: cancels what the plan says when it says, and takes recovery decisions: every
/// stale job is retried, most dead jobs and some cancelled ones too (each at most twice), and a
/// few retried jobs are cancelled again at once (while queued). When `sweep` is raised it
/// retries every dead job at once.
fn operate(
    cluster: &Mutex<Cluster>,
    shared: &Mutex<Shared>,
    stop: &AtomicBool,
    sweep: &AtomicBool,
    seed: u64,
) {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed_0a7e);
    let mut retried: BTreeMap<String, usize> = BTreeMap::new();
    let mut round = Instant::now();
    while !stop.load(Ordering::SeqCst) {
        let swept = sweep.swap(false, Ordering::SeqCst);
        if !swept && round.elapsed() < Duration::from_millis(300) {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        }
        round = Instant::now();
        let due: Vec<String> = {
            let mut s = shared.lock().unwrap();
            let now = Instant::now();
            let (due, later): (Vec<_>, Vec<_>) =
                s.cancels.drain(..).partition(|(at, _)| *at <= now);
            s.cancels = later;
            due.into_iter().map(|(_, id)| id).collect()
        };
        for id in due {
            let _ = json(cluster, &["jobs", "cancel", &id]);
        }
        let states: &[(&str, f64)] = if swept {
            &[("dead", 1.0)]
        } else {
            &[("dead", 0.8), ("stale", 1.0), ("cancelled", 0.3)]
        };
        for &(state, p) in states {
            let Some(Value::Array(jobs)) = json(
                cluster,
                &["jobs", "list", "--state", state, "--limit", "100000"],
            ) else {
                continue;
            };
            for j in jobs {
                let Some(id) = j["id"].as_str() else { continue };
                let n = retried.entry(id.to_owned()).or_default();
                if *n >= 2 || !rng.random_bool(p) {
                    continue;
                }
                *n += 1;
                let at = now_us();
                if json(cluster, &["jobs", "retry", id]).is_some() {
                    shared.lock().unwrap().retries.push((id.to_owned(), at));
                    // Now and then the operator changes their mind: cancelled while queued again.
                    if rng.random_bool(0.15) {
                        let _ = json(cluster, &["jobs", "cancel", id]);
                    }
                }
            }
        }
    }
}

/// What undoes a fault (or finishes a compound one), when it is due.
#[derive(Debug, Clone, Copy)]
enum Undo {
    /// Start worker slot `n` (`None`: `serve`) again.
    Start(Option<usize>),
    /// SIGCONT worker slot `n`.
    Resume(usize),
    /// SIGCONT redis-server.
    ResumeRedis,
    /// Close the OOM window (tried again while redis-server is paused).
    EndOom,
    /// Close the eviction-pressure window (tried again while redis-server is paused).
    EndPressure,
    /// Put `serve` back on the real clock.
    ServeClockBack,
    /// Ask the operator to retry every dead job now.
    SweepDead,
}

/// Plays the schedule (and the undoing of each fault) until the fault window ends and every job
/// is submitted; meanwhile notices deaths and samples resources. Returns the faults executed.
fn play_faults(
    plan: &Plan,
    cluster: &Mutex<Cluster>,
    submitters: &[std::thread::JoinHandle<()>],
    sweep: &AtomicBool,
) -> BTreeMap<&'static str, usize> {
    let t0 = Instant::now();
    let mut done = BTreeMap::new();
    let mut pending = plan.faults.iter().peekable();
    let mut undo: Vec<(Instant, Undo)> = Vec::new();
    let mut sampled = Instant::now();
    let home = cluster.lock().unwrap().home().to_owned();
    loop {
        let elapsed = t0.elapsed().as_millis() as u64;
        let mut c = cluster.lock().unwrap();
        while let Some((_, f)) = pending.next_if(|(at, _)| *at <= elapsed) {
            let after = |ms: u64, u: Undo| vec![(Instant::now() + Duration::from_millis(ms), u)];
            let acted = match *f {
                Fault::KillWorker { slot, restart_ms } => c
                    .kill(Some(slot))
                    .then(|| after(restart_ms, Undo::Start(Some(slot)))),
                Fault::StopWorker { slot, restart_ms } => c
                    .stop_worker(slot)
                    .then(|| after(restart_ms, Undo::Start(Some(slot)))),
                Fault::KillServe { restart_ms } => {
                    c.kill(None).then(|| after(restart_ms, Undo::Start(None)))
                }
                Fault::PauseWorker { slot, for_ms } => c
                    .pause_worker(slot, true)
                    .then(|| after(for_ms, Undo::Resume(slot))),
                Fault::PauseRedis { for_ms } => c
                    .pause_redis(true)
                    .then(|| after(for_ms, Undo::ResumeRedis)),
                Fault::RestartRedis => c.restart_redis().then(Vec::new),
                Fault::OomRedis { for_ms } => {
                    c.oom_redis(true).then(|| after(for_ms, Undo::EndOom))
                }
                Fault::EvictionPressure { volatile, for_ms } => c
                    .eviction_pressure(Some(volatile))
                    .then(|| after(for_ms, Undo::EndPressure)),
                Fault::ServeClockStep { ahead, for_ms } => c
                    .serve_clock(Some(if ahead { "+60s" } else { "-60s" }))
                    .then(|| after(for_ms, Undo::ServeClockBack)),
                Fault::BreakRecord => c.break_record().then(Vec::new),
                Fault::HoldStoreLock { for_ms } => c
                    .hold_write_lock(&home.join("skillforge.db"), for_ms)
                    .then(Vec::new),
                Fault::HoldQueueLock { for_ms } => c
                    .hold_write_lock(&home.join("queue.db"), for_ms)
                    .then(Vec::new),
                Fault::ServeIntoHeldStore { for_ms } => (c.kill(None)
                    && c.hold_write_lock(&home.join("skillforge.db"), for_ms))
                .then(|| {
                    let mut u = after(1500, Undo::Start(None));
                    u.extend(after(for_ms / 2, Undo::SweepDead));
                    u
                }),
            };
            if let Some(u) = acted {
                *done.entry(f.name()).or_default() += 1;
                undo.extend(u);
            }
        }
        let now = Instant::now();
        let due: Vec<(Instant, Undo)> = undo.extract_if(.., |(at, _)| *at <= now).collect();
        for (_, u) in due {
            match u {
                Undo::Start(which) => {
                    c.ensure(which);
                }
                Undo::Resume(slot) => {
                    c.pause_worker(slot, false);
                }
                Undo::ResumeRedis => {
                    c.pause_redis(false);
                }
                Undo::ServeClockBack => {
                    c.serve_clock(None);
                }
                Undo::EndOom => {
                    if !c.oom_redis(false) && c.is_oom() {
                        undo.push((now + Duration::from_millis(200), Undo::EndOom));
                    }
                }
                Undo::EndPressure => {
                    if !c.eviction_pressure(None) && c.is_under_pressure() {
                        undo.push((now + Duration::from_millis(200), Undo::EndPressure));
                    }
                }
                Undo::SweepDead => sweep.store(true, Ordering::SeqCst),
            }
        }
        c.poll();
        if sampled.elapsed() > Duration::from_secs(1) {
            c.sample();
            sampled = Instant::now();
        }
        drop(c);
        if elapsed >= plan.fault_window_ms && submitters.iter().all(|s| s.is_finished()) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    done
}

/// Polls the queue and the store until every job is settled and applied, or `quiet` passed.
fn settle(
    cluster: &Mutex<Cluster>,
    shared: &Mutex<Shared>,
    home: &Path,
    quiet: Duration,
) -> (BTreeMap<String, FinalJob>, Vec<Applied>) {
    let deadline = Instant::now() + quiet;
    let submitted = shared.lock().unwrap().submitted.clone();
    loop {
        {
            let mut c = cluster.lock().unwrap();
            c.poll();
            c.sample();
        }
        let jobs = final_jobs(cluster);
        let applied = read_applied(&home.join("skillforge.db"));
        let probe = History {
            submitted: submitted.clone(),
            jobs: jobs.clone(),
            applied: applied.clone(),
            ..History::default()
        };
        let open = checker::check(&probe)
            .iter()
            .any(|v| [NOT_SETTLED, STUCK_RUNNING, RESULT_NOT_APPLIED].contains(&v.check));
        if !open || Instant::now() > deadline {
            return (jobs, applied);
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

fn final_jobs(cluster: &Mutex<Cluster>) -> BTreeMap<String, FinalJob> {
    let Some(Value::Array(list)) = json(cluster, &["jobs", "list", "--limit", "1000000"]) else {
        return BTreeMap::new();
    };
    list.iter()
        .filter_map(|j| {
            let history = j["history"]
                .as_array()
                .map(|h| {
                    h.iter()
                        .map(|a| {
                            (
                                a["fencing_token"].as_u64().unwrap_or(0),
                                a["result"].as_str().map(str::to_owned),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            Some((
                j["id"].as_str()?.to_owned(),
                FinalJob {
                    state: j["state"].as_str()?.to_owned(),
                    token: j["fencing_token"].as_u64()?,
                    attempts: j["attempts"].as_u64()? as u32,
                    max_attempts: j["max_attempts"].as_u64()? as u32,
                    recovery_available: j["recovery_available"].as_bool().unwrap_or(false),
                    heartbeat_age_ms: j["lease"]["heartbeat_age_ms"].as_i64(),
                    history,
                },
            ))
        })
        .collect()
}

/// The domain store's `applied_results`, read with the `sqlite3` CLI (another reader, as an operator would).
fn read_applied(db: &Path) -> Vec<Applied> {
    let out = Command::new("sqlite3")
        .args(["-readonly", "-separator", "\t", "-cmd", ".timeout 10000"])
        .arg(db)
        .arg("SELECT job_id, fencing_token, state FROM applied_results")
        .output();
    let Ok(out) = out else { return Vec::new() };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut f = l.split('\t');
            Some(Applied {
                job: f.next()?.to_owned(),
                token: f.next()?.parse().ok()?,
                state: f.next()?.to_owned(),
            })
        })
        .collect()
}

fn read_effects(path: &Path) -> Vec<Effect> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(Effect::parse)
        .collect()
}
