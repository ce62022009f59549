//! What a soak run recorded, in the shape the invariant checker reads: the jobs submitted, the
//! effects log the jobs wrote, the operator's recovery decisions, the queue's and the domain
//! store's final view, and the processes the soak started.

use std::collections::BTreeMap;

/// One job the soak submitted (`jobs submit` answered with `id`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Submitted {
    /// Job id the binary printed.
    pub(crate) id: String,
    /// Mix kind (`short`, `long`, `flaky`, `nonidem`, `locked`).
    pub(crate) kind: String,
    /// `--idempotency-key`, when given.
    pub(crate) key: Option<String>,
    /// `--lock`, when given.
    pub(crate) lock: Option<String>,
    /// `--attempts`.
    pub(crate) max_attempts: u32,
    /// `false` for `--non-idempotent`.
    pub(crate) idempotent: bool,
    /// `--stale-after`, milliseconds.
    pub(crate) stale_after_ms: i64,
}

/// What a job appended to the effects log (one line: `EVENT JOB ATTEMPT TOKEN EPOCH_SECONDS [CODE]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    /// The attempt's process started.
    Start,
    /// A lock holder saying it still holds its lock.
    Tick,
    /// The job's one effect (what an idempotent job may apply once per applied token).
    Effect,
    /// The process is about to exit with this code.
    Exit(i32),
}

/// One line of the effects log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Effect {
    /// What happened.
    pub(crate) event: Event,
    /// `SKILLFORGE_JOB_ID`.
    pub(crate) job: String,
    /// `SKILLFORGE_JOB_ATTEMPT`.
    pub(crate) attempt: u32,
    /// `SKILLFORGE_FENCING_TOKEN`.
    pub(crate) token: u64,
    /// Wall clock of the write, microseconds since the Unix epoch (bash `$EPOCHREALTIME`).
    pub(crate) at_us: i64,
}

impl Effect {
    /// Parses one effects-log line; `None` for a line that is not one (a torn write of a killed process).
    pub(crate) fn parse(line: &str) -> Option<Self> {
        let f: Vec<&str> = line.split_whitespace().collect();
        let event = match (f.first().copied()?, f.get(5)) {
            ("start", None) => Event::Start,
            ("tick", None) => Event::Tick,
            ("effect", None) => Event::Effect,
            ("exit", Some(code)) => Event::Exit(code.parse().ok()?),
            _ => return None,
        };
        if f.len()
            != if matches!(event, Event::Exit(_)) {
                6
            } else {
                5
            }
        {
            return None;
        }
        let (secs, micros) = f[4].split_once(['.', ','])?;
        let at_us = secs.parse::<i64>().ok()? * 1_000_000
            + format!("{micros:0<6}")[..6].parse::<i64>().ok()?;
        Some(Self {
            event,
            job: f[1].to_owned(),
            attempt: f[2].parse().ok()?,
            token: f[3].parse().ok()?,
            at_us,
        })
    }
}

/// A job as the queue shows it at the end (`jobs list --json`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct FinalJob {
    /// `queued`, `running`, `succeeded`, `failed`, `dead`, `cancelled` or `stale`.
    pub(crate) state: String,
    /// Current fencing token.
    pub(crate) token: u64,
    /// Attempts counted since the last `jobs retry`.
    pub(crate) attempts: u32,
    /// The job's `max_attempts`.
    pub(crate) max_attempts: u32,
    /// Parked stale with recovery available.
    pub(crate) recovery_available: bool,
    /// Heartbeat age of the lease of a running job, milliseconds.
    pub(crate) heartbeat_age_ms: Option<i64>,
    /// Attempt history: (fencing token, how it ended).
    pub(crate) history: Vec<(u64, Option<String>)>,
}

/// One row of the domain store's `applied_results`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Applied {
    /// Job id.
    pub(crate) job: String,
    /// The token whose result was applied.
    pub(crate) token: u64,
    /// The job state the result carried.
    pub(crate) state: String,
}

/// One reading of a process's resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Sample {
    /// Attempts started in the whole run when it was taken (`start` lines of the effects log):
    /// the work done between two samples.
    pub(crate) attempts: u64,
    /// Resident set, KiB (`VmRSS`).
    pub(crate) rss_kb: u64,
    /// Open file descriptors.
    pub(crate) fds: u64,
}

/// A worker or `serve` process the soak started.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct ProcessRecord {
    /// `worker-2#3` (slot and incarnation) or `serve#1`.
    pub(crate) name: String,
    /// Its pid.
    pub(crate) pid: u32,
    /// `Some(status text)` once it exited.
    pub(crate) exited: Option<String>,
    /// The soak stopped it (SIGKILL or SIGTERM): an exit on purpose.
    pub(crate) on_purpose: bool,
    /// It was still running when the quiet period ended (the final SIGTERM stopped it).
    pub(crate) survived: bool,
    /// Largest resident set seen, KiB (for the report).
    pub(crate) max_rss_kb: u64,
    /// Largest number of open file descriptors seen (for the report).
    pub(crate) max_fds: u64,
    /// The first sample taken once it had run for the warm-up ([`Growth::warm_up_ms`]).
    pub(crate) warm: Option<Sample>,
    /// The last sample taken (at the end of the quiet period for a survivor).
    pub(crate) last: Option<Sample>,
    /// The last lines of its log, for the report.
    pub(crate) log_tail: String,
}

/// How much a surviving process's resources may grow from its warm sample to its last: a fixed
/// slack (what a warmed-up process may still add: allocator arenas, connection pools filling up)
/// plus an amount per 1 000 attempts run in between (a leak per job grows past it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Growth {
    /// How long a process runs before its warm sample, milliseconds.
    pub(crate) warm_up_ms: u64,
    /// Resident-set growth allowed whatever the work, KiB.
    pub(crate) rss_slack_kb: u64,
    /// Resident-set growth allowed per 1 000 attempts, KiB.
    pub(crate) rss_kb_per_1000: u64,
    /// Open-fd growth allowed whatever the work.
    pub(crate) fds_slack: u64,
    /// Open-fd growth allowed per 1 000 attempts.
    pub(crate) fds_per_1000: u64,
}

impl Growth {
    /// Resident-set growth allowed over `attempts` attempts, KiB.
    pub(crate) fn rss_bound_kb(&self, attempts: u64) -> u64 {
        self.rss_slack_kb + self.rss_kb_per_1000 * attempts / 1000
    }

    /// Open-fd growth allowed over `attempts` attempts.
    pub(crate) fn fds_bound(&self, attempts: u64) -> u64 {
        self.fds_slack + self.fds_per_1000 * attempts / 1000
    }
}

/// Everything one run recorded.
#[derive(Debug, Clone, Default)]
pub(crate) struct History {
    /// Every job submitted, in submit order.
    pub(crate) submitted: Vec<Submitted>,
    /// Every submit that gave an idempotency key, with the id it returned (duplicates included).
    pub(crate) key_returns: Vec<(String, String)>,
    /// The effects log.
    pub(crate) effects: Vec<Effect>,
    /// Accepted `jobs retry` calls: (job, wall clock just before the call, microseconds).
    pub(crate) retries: Vec<(String, i64)>,
    /// The queue's final view, by job id.
    pub(crate) jobs: BTreeMap<String, FinalJob>,
    /// The domain store's `applied_results`.
    pub(crate) applied: Vec<Applied>,
    /// Workers and `serve`.
    pub(crate) processes: Vec<ProcessRecord>,
    /// Resource growth bounds (`None`: not checked).
    pub(crate) growth: Option<Growth>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effects_lines_parse_and_torn_lines_do_not() {
        let e = Effect::parse("exit 0191 2 7 1733100000.000123 1").unwrap();
        assert_eq!(
            (e.event, e.job.as_str(), e.attempt, e.token, e.at_us),
            (Event::Exit(1), "0191", 2, 7, 1_733_100_000_000_123)
        );
        assert_eq!(Effect::parse("start j 1 1 12,5").unwrap().at_us, 12_500_000);
        for torn in [
            "",
            "start j 1",
            "exit j 1 1 12.5",
            "effect j 1 x 12.5",
            "start j 1 1 12.5 extra",
            "nope j 1 1 1.0",
        ] {
            assert_eq!(Effect::parse(torn), None, "{torn:?}");
        }
    }
}
