//! What a seed decides, all of it up front so that a seed replays: the job mix (each job's kind,
//! flags and script) and the fault schedule (which fault, when, on which process, for how long).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// One job to submit.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct JobPlan {
    /// Mix kind: `short`, `long`, `flaky`, `nonidem` or `locked`.
    pub(crate) kind: &'static str,
    /// `--idempotency-key`.
    pub(crate) key: Option<String>,
    /// Submit the same key a second time (the second answer must be the same job).
    pub(crate) resubmit: bool,
    /// `--lock`.
    pub(crate) lock: Option<String>,
    /// `--attempts`.
    pub(crate) max_attempts: u32,
    /// `--heartbeat`, seconds.
    pub(crate) heartbeat: f64,
    /// `--stale-after`, seconds.
    pub(crate) stale_after: f64,
    /// Seconds the job works (sleeps, or ticks while holding its lock).
    pub(crate) work_secs: f64,
    /// A `flaky` job fails while its fencing token is below this.
    pub(crate) pass_at_token: u64,
    /// Cancel it this many ms after it was submitted.
    pub(crate) cancel_after_ms: Option<u64>,
}

impl JobPlan {
    /// Whether the job was submitted `--non-idempotent`.
    pub(crate) fn idempotent(&self) -> bool {
        self.kind != "nonidem"
    }

    /// The bash script the job runs: appends `start`, `tick`s (lock holders), `effect` and
    /// `exit CODE` lines to `$SOAK_LOG`, each `EVENT JOB ATTEMPT TOKEN $EPOCHREALTIME`.
    pub(crate) fn script(&self) -> String {
        let line = |event: &str, code: &str| {
            format!(
                "echo \"{event} $SKILLFORGE_JOB_ID $SKILLFORGE_JOB_ATTEMPT $SKILLFORGE_FENCING_TOKEN $EPOCHREALTIME{code}\" >> \"$SOAK_LOG\""
            )
        };
        let mut s = vec![line("start", "")];
        match self.kind {
            "flaky" => s.push(format!(
                "if [ \"$SKILLFORGE_FENCING_TOKEN\" -lt {} ]; then {}; exit 1; fi",
                self.pass_at_token,
                line("exit", " 1")
            )),
            "locked" => {
                let ticks = (self.work_secs / 0.1).ceil().max(1.0) as u32;
                s.push(format!(
                    "for _ in $(seq {ticks}); do {}; sleep 0.1; done",
                    line("tick", "")
                ));
                s.push(line("tick", ""));
            }
            _ if self.work_secs > 0.0 => s.push(format!("sleep {:.2}", self.work_secs)),
            _ => {}
        }
        s.push(line("effect", ""));
        s.push(line("exit", " 0"));
        s.join("\n")
    }
}

/// A fault (or its undoing) on the schedule.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Fault {
    /// SIGKILL worker slot `n`; it is started again `restart_ms` later.
    KillWorker { slot: usize, restart_ms: u64 },
    /// SIGSTOP worker slot `n`, SIGCONT after `for_ms`.
    PauseWorker { slot: usize, for_ms: u64 },
    /// SIGTERM worker slot `n` (graceful stop); started again `restart_ms` later.
    StopWorker { slot: usize, restart_ms: u64 },
    /// SIGKILL `serve`, started again `restart_ms` later.
    KillServe { restart_ms: u64 },
    /// Restart redis-server (AOF on); Redis backend only.
    RestartRedis,
    /// SIGSTOP redis-server, SIGCONT after `for_ms`; Redis backend only.
    PauseRedis { for_ms: u64 },
    /// Hold the domain store's write lock (`BEGIN IMMEDIATE` in another process) for `for_ms`.
    HoldStoreLock { for_ms: u64 },
    /// Issue 12 item 1's interleaving: SIGKILL `serve`, hold the domain store's write lock for
    /// `for_ms`, start `serve` again 1.5 s later (its first pass reads every result pending
    /// meanwhile, then waits for the store), and halfway through the hold the operator retries
    /// every dead job.
    ServeIntoHeldStore { for_ms: u64 },
    /// Hold the embedded queue file's write lock for `for_ms`; embedded backend only.
    HoldQueueLock { for_ms: u64 },
    /// An OOM window (issue 32 item 4): redis-server's `maxmemory` set to 1 byte under
    /// `noeviction`, so every write is refused with `OOM`, for `for_ms`; Redis backend only.
    OomRedis { for_ms: u64 },
    /// Eviction pressure (issue 32 item 1): redis-server's `maxmemory` set just above the
    /// memory it uses, under `noeviction` (writes that need more are refused with `OOM` while
    /// others go through) or `volatile-lru` (`volatile`: keys with a TTL are evicted first; no
    /// `worker` or `serve` starts meanwhile, as each refuses the policy), for `for_ms`; Redis
    /// backend only.
    EvictionPressure { volatile: bool, for_ms: u64 },
    /// A clock step (issue 32 item 11): `serve` restarted under `faketime +60s` (`ahead`) or
    /// `-60s` (its monotonic clock real), back to the real clock `for_ms` later; embedded
    /// backend only (Redis judges leases by the server's clock).
    ServeClockStep { ahead: bool, for_ms: u64 },
    /// A malformed record (issue 32 item 2): an extra job is submitted and its hash corrupted
    /// at once (its creation time no longer parses); it must end quarantined (or applied, when
    /// it ran before the corruption), and nothing else may notice. Redis backend only.
    BreakRecord,
}

impl Fault {
    /// The fault's name in the report.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Self::KillWorker { .. } => "sigkill worker",
            Self::PauseWorker { .. } => "sigstop/sigcont worker",
            Self::StopWorker { .. } => "stop/start worker",
            Self::KillServe { .. } => "sigkill+restart serve",
            Self::RestartRedis => "restart redis-server",
            Self::PauseRedis { .. } => "pause redis-server",
            Self::HoldStoreLock { .. } => "hold the domain store's write lock",
            Self::ServeIntoHeldStore { .. } => "restart serve into a held store, retry dead jobs",
            Self::HoldQueueLock { .. } => "hold the queue file's write lock",
            Self::OomRedis { .. } => "redis OOM window (maxmemory 1 byte, noeviction)",
            Self::EvictionPressure {
                volatile: false, ..
            } => "redis eviction pressure (maxmemory near use, noeviction)",
            Self::EvictionPressure { volatile: true, .. } => {
                "redis eviction pressure (maxmemory near use, volatile-lru)"
            }
            Self::ServeClockStep { ahead: true, .. } => "serve's clock 60 s ahead",
            Self::ServeClockStep { ahead: false, .. } => "serve's clock 60 s behind",
            Self::BreakRecord => "a malformed job record",
        }
    }
}

/// The whole plan of one seed.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// The seed.
    pub(crate) seed: u64,
    /// Jobs in submit order.
    pub(crate) jobs: Vec<JobPlan>,
    /// Faults: (ms after the start, fault), sorted.
    pub(crate) faults: Vec<(u64, Fault)>,
    /// Length of the fault window, ms (faults stop after it; then the quiet period).
    pub(crate) fault_window_ms: u64,
}

/// Sizes a plan is made for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape {
    /// Jobs to submit.
    pub(crate) jobs: usize,
    /// Worker slots.
    pub(crate) workers: usize,
    /// Redis backend (else embedded).
    pub(crate) redis: bool,
    /// Fault window, ms.
    pub(crate) fault_window_ms: u64,
    /// Mean gap between faults, ms.
    pub(crate) fault_every_ms: u64,
}

/// Lock names the `locked` jobs share.
pub(crate) const LOCKS: usize = 4;

/// The plan of `seed` for `shape`: the same seed and shape give the same plan.
pub(crate) fn plan(seed: u64, shape: Shape) -> Plan {
    let mut rng = StdRng::seed_from_u64(seed);
    let jobs = (0..shape.jobs).map(|i| job(&mut rng, seed, i)).collect();
    let mut faults = Vec::new();
    let mut at = 0u64;
    loop {
        at += rng.random_range(shape.fault_every_ms / 2..=shape.fault_every_ms * 3 / 2);
        if at >= shape.fault_window_ms {
            break;
        }
        faults.push((at, fault(&mut rng, shape)));
    }
    Plan {
        seed,
        jobs,
        faults,
        fault_window_ms: shape.fault_window_ms,
    }
}

fn job(rng: &mut StdRng, seed: u64, i: usize) -> JobPlan {
    let roll = rng.random_range(0..100);
    // Lock holders wait for their lock in a worker slot: few of them, over several locks, so
    // they never starve the fleet (the jobs, and the faults on them, stay in the fault window).
    let kind = match roll {
        0..45 => "short",
        45..55 => "long",
        55..80 => "flaky",
        80..92 => "nonidem",
        _ => "locked",
    };
    let max_attempts = rng.random_range(2..=3);
    let keyed = rng.random_bool(0.5);
    JobPlan {
        kind,
        key: keyed.then(|| format!("soak-{seed}-{i}")),
        resubmit: keyed && rng.random_bool(0.1),
        lock: (kind == "locked").then(|| format!("soak-lock-{}", rng.random_range(0..LOCKS))),
        max_attempts,
        // Lock holders outlive every pause the schedule makes (≤ 4 s, plus a heartbeat): their
        // named lock is only freed by a dead holder, so two holders at once is always a bug,
        // never a pause.
        heartbeat: if kind == "locked" { 1.0 } else { 0.5 },
        stale_after: if kind == "locked" { 8.0 } else { 3.0 },
        work_secs: match kind {
            "long" => rng.random_range(1.0..2.5),
            "nonidem" => rng.random_range(0.3..1.5),
            "locked" => rng.random_range(0.2..0.6),
            _ => 0.0,
        },
        // Half the flaky jobs pass within their attempts, half go dead and pass after a retry.
        pass_at_token: if rng.random_bool(0.5) {
            max_attempts as u64
        } else {
            max_attempts as u64 + 1
        },
        cancel_after_ms: rng.random_bool(0.04).then(|| rng.random_range(0..3000)),
    }
}

fn fault(rng: &mut StdRng, shape: Shape) -> Fault {
    let slot = rng.random_range(0..shape.workers);
    let roll = rng.random_range(0..100);
    match roll {
        0..16 => Fault::KillWorker {
            slot,
            restart_ms: rng.random_range(200..3000),
        },
        16..30 => Fault::PauseWorker {
            slot,
            for_ms: rng.random_range(500..4000),
        },
        30..40 => Fault::StopWorker {
            slot,
            restart_ms: rng.random_range(200..3000),
        },
        40..52 => Fault::KillServe {
            restart_ms: rng.random_range(100..2000),
        },
        52..64 if shape.redis => Fault::RestartRedis,
        64..76 if shape.redis => Fault::PauseRedis {
            for_ms: rng.random_range(500..4000),
        },
        52..76 => Fault::HoldQueueLock {
            for_ms: rng.random_range(300..2500),
        },
        76..88 => Fault::HoldStoreLock {
            for_ms: rng.random_range(1000..5000),
        },
        88..91 if shape.redis => Fault::OomRedis {
            for_ms: rng.random_range(500..4000),
        },
        91..94 if shape.redis => Fault::EvictionPressure {
            volatile: rng.random_bool(0.5),
            for_ms: rng.random_range(1000..5000),
        },
        88..94 => Fault::ServeClockStep {
            ahead: rng.random_bool(0.5),
            for_ms: rng.random_range(2000..8000),
        },
        94..97 if shape.redis => Fault::BreakRecord,
        _ => Fault::ServeIntoHeldStore {
            for_ms: rng.random_range(4000..6000),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape() -> Shape {
        Shape {
            jobs: 300,
            workers: 3,
            redis: true,
            fault_window_ms: 60_000,
            fault_every_ms: 2000,
        }
    }

    #[test]
    fn a_seed_replays_the_same_plan_and_another_seed_does_not() {
        let (a, b, c) = (plan(7, shape()), plan(7, shape()), plan(8, shape()));
        assert_eq!((&a.jobs, &a.faults), (&b.jobs, &b.faults));
        assert_ne!(a.faults, c.faults);
    }

    #[test]
    fn the_mix_has_every_kind_and_the_schedule_every_fault() {
        let p = plan(1, shape());
        for kind in ["short", "long", "flaky", "nonidem", "locked"] {
            assert!(p.jobs.iter().any(|j| j.kind == kind), "{kind}");
        }
        assert!(p.jobs.iter().any(|j| j.key.is_some()) && p.jobs.iter().any(|j| j.key.is_none()));
        assert!(
            p.jobs.iter().any(|j| j.cancel_after_ms.is_some()) && p.jobs.iter().any(|j| j.resubmit)
        );
        // Every Redis fault kind within a few seeds (the rarest is drawn 1.5 times in 100).
        let names: std::collections::BTreeSet<_> = (1..=8)
            .flat_map(|seed| plan(seed, shape()).faults)
            .map(|(_, f)| f.name())
            .collect();
        assert_eq!(names.len(), 12, "{names:?}");
        let embedded = plan(
            1,
            Shape {
                redis: false,
                ..shape()
            },
        );
        assert!(embedded.faults.iter().all(|(_, f)| !matches!(
            f,
            Fault::RestartRedis
                | Fault::PauseRedis { .. }
                | Fault::OomRedis { .. }
                | Fault::EvictionPressure { .. }
        )));
        assert!(
            p.faults
                .iter()
                .all(|(_, f)| !matches!(f, Fault::ServeClockStep { .. })),
            "embedded only"
        );
        let embedded_names: std::collections::BTreeSet<_> = (1..=5)
            .flat_map(|seed| {
                plan(
                    seed,
                    Shape {
                        redis: false,
                        ..shape()
                    },
                )
                .faults
            })
            .map(|(_, f)| f.name())
            .collect();
        assert!(
            embedded_names.contains("serve's clock 60 s ahead")
                && embedded_names.contains("serve's clock 60 s behind"),
            "{embedded_names:?}"
        );
    }

    #[test]
    fn a_flaky_script_fails_below_its_pass_token_and_every_script_ends_with_its_exit_line() {
        let mut rng = StdRng::seed_from_u64(3);
        let mut j = job(&mut rng, 3, 0);
        j.kind = "flaky";
        j.pass_at_token = 3;
        let s = j.script();
        assert!(
            s.contains("-lt 3 ]; then echo \"exit $SKILLFORGE_JOB_ID"),
            "{s}"
        );
        assert!(s.ends_with("$EPOCHREALTIME 0\" >> \"$SOAK_LOG\""), "{s}");
    }
}
