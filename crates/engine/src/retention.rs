//! Queue retention: how long finished jobs are kept, and the bounded pruning passes that remove
//! the rest (issue 19).
//!
//! A finished job is *prunable* when its state is terminal (`succeeded`, `failed`, `dead`,
//! `cancelled`) and the control plane has applied its latest result: the ack of that
//! (job, fencing token) by [`QueueResults::ack_result`] (a job whose result is pending, or that
//! is queued, running or `stale`, is never prunable). Jobs fall in two classes,
//! [`RetainClass::Succeeded`] and [`RetainClass::Failed`] (`failed`, `dead` and `cancelled`),
//! each with its own [`Keep`]: by age (since the job finished) and/or by count (the newest N of
//! the class). Both rules select a prefix of the class in finish order (oldest first), so a
//! pass removes the longer of the two prefixes.
//!
//! Pruning a job removes its record, its history, its output tails and its index entries, and
//! leaves a small *tombstone* (id, state, finish and prune times, idempotency key) so that
//! `jobs show` says the job was pruned and a resubmit under its idempotency key gets the pruned
//! job back instead of a new run. Tombstones follow the same [`Keep`], counted from the prune
//! time: an idempotency key outlives its job by the same retention, and the tombstones of a
//! class are bounded like its jobs.
//!
//! Every backend call removes at most [`PRUNE_BATCH`] jobs (Redis: one script touching a few
//! thousand keys; SQLite: one short `BEGIN IMMEDIATE` transaction), so pruning never blocks a
//! backend for long, and a pass killed half-way leaves every batch applied or not at all.
//!
//! [`QueueResults::ack_result`]: crate::backend::QueueResults::ack_result

use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::backend::QueueBackend;
use crate::error::EngineError;
use crate::job::JobState;

/// Most jobs (and, separately, tombstones) one backend call prunes.
pub const PRUNE_BATCH: usize = 400;
/// Most batches one pass of [`run_pruner`] runs before it waits for the next pass (a backlog
/// of prunable jobs is worked off over several passes, never in one long burst).
pub const MAX_BATCHES_PER_PASS: usize = 250;
/// How often the reaper loops (worker, `serve`) run a pruning pass.
pub const DEFAULT_PRUNE_EVERY: Duration = Duration::from_secs(30);
/// Default age of kept succeeded jobs: 7 days.
pub const DEFAULT_KEEP_SUCCEEDED: Duration = Duration::from_secs(7 * 24 * 3600);
/// Default age of kept failed, dead and cancelled jobs: 30 days.
pub const DEFAULT_KEEP_FAILED: Duration = Duration::from_secs(30 * 24 * 3600);

/// The two retention classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RetainClass {
    /// `succeeded` jobs (`[queue] keep_succeeded`).
    Succeeded,
    /// `failed`, `dead` and `cancelled` jobs (`[queue] keep_failed`).
    Failed,
}

impl RetainClass {
    /// Both classes.
    pub const ALL: [RetainClass; 2] = [RetainClass::Succeeded, RetainClass::Failed];

    /// Stable lowercase name (`succeeded` / `failed`).
    pub fn as_str(self) -> &'static str {
        match self {
            RetainClass::Succeeded => "succeeded",
            RetainClass::Failed => "failed",
        }
    }

    /// The terminal states of this class.
    pub fn states(self) -> &'static [JobState] {
        match self {
            RetainClass::Succeeded => &[JobState::Succeeded],
            RetainClass::Failed => &[JobState::Failed, JobState::Dead, JobState::Cancelled],
        }
    }
}

/// How much of one class is kept: jobs younger than `age` (since they finished) and at most the
/// newest `count`. Both `None` = kept forever.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Keep {
    /// Finished longer ago than this ⇒ prunable.
    pub age: Option<Duration>,
    /// Only the newest `count` of the class are kept.
    pub count: Option<u64>,
}

impl Keep {
    /// Kept for `age`.
    pub fn age(age: Duration) -> Self {
        Self {
            age: Some(age),
            count: None,
        }
    }

    /// Whether this keeps everything forever.
    pub fn is_forever(&self) -> bool {
        self.age.is_none() && self.count.is_none()
    }

    /// The bound this keep sets at backend time `now_ms`.
    pub fn bound_at(&self, now_ms: i64) -> Bound {
        Bound {
            before_ms: self
                .age
                .map(|a| now_ms.saturating_sub(i64::try_from(a.as_millis()).unwrap_or(i64::MAX))),
            keep_newest: self.count,
        }
    }
}

/// `[queue] keep_succeeded` / `keep_failed`: defaults 7 days and 30 days, no count bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Succeeded jobs.
    pub succeeded: Keep,
    /// Failed, dead and cancelled jobs.
    pub failed: Keep,
}

impl Default for Retention {
    fn default() -> Self {
        Self {
            succeeded: Keep::age(DEFAULT_KEEP_SUCCEEDED),
            failed: Keep::age(DEFAULT_KEEP_FAILED),
        }
    }
}

impl Retention {
    /// The keep of `class`.
    pub fn keep(&self, class: RetainClass) -> Keep {
        match class {
            RetainClass::Succeeded => self.succeeded,
            RetainClass::Failed => self.failed,
        }
    }
}

/// A prefix of one class in time order (oldest first): entries older than `before_ms`, and
/// entries beyond the newest `keep_newest`. Both `None` selects nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Bound {
    /// Entries whose time (ms since the Unix epoch, backend clock) is below this are selected.
    pub before_ms: Option<i64>,
    /// All but the newest `keep_newest` entries are selected.
    pub keep_newest: Option<u64>,
}

impl Bound {
    /// Whether this selects nothing.
    pub fn is_empty(&self) -> bool {
        self.before_ms.is_none() && self.keep_newest.is_none()
    }
}

/// One pruning request for a backend call: which class, which jobs (by finish time), which
/// tombstones (by prune time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PruneRule {
    /// The class.
    pub class: RetainClass,
    /// Prunable jobs of the class selected by finish time.
    pub jobs: Bound,
    /// Tombstones of the class selected by prune time.
    pub tombstones: Bound,
}

/// What one backend prune call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PruneBatch {
    /// Jobs removed (each leaving a tombstone).
    pub jobs: u64,
    /// Tombstones removed (their idempotency keys freed).
    pub tombstones: u64,
    /// Whether the rule still selects more (another call would prune again).
    pub more: bool,
}

/// What is left of a pruned job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tombstone {
    /// The pruned job's id.
    pub job_id: String,
    /// Its terminal state.
    pub state: JobState,
    /// When it finished (ms since the Unix epoch).
    pub finished_at_ms: i64,
    /// When it was pruned (ms since the Unix epoch, backend clock).
    pub pruned_at_ms: i64,
    /// Its idempotency key, if it had one (a resubmit under it returns this job's id).
    pub idempotency_key: Option<String>,
}

/// What a pruning pass did, per class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PruneReport {
    /// Jobs removed.
    pub jobs: u64,
    /// Tombstones removed.
    pub tombstones: u64,
    /// Whether prunable entries are left (the pass hit its batch limit).
    pub more: bool,
}

/// The rules of one pass: each class's jobs and tombstones bounded by `retention` at backend
/// time `now_ms`; `older_than` (a manual `jobs prune --older-than D`) replaces the job bound
/// of both classes (tombstones keep the configured retention).
pub fn rules(retention: &Retention, older_than: Option<Duration>, now_ms: i64) -> Vec<PruneRule> {
    RetainClass::ALL
        .iter()
        .map(|&class| {
            let keep = retention.keep(class);
            let jobs = match older_than {
                Some(d) => Keep::age(d).bound_at(now_ms),
                None => keep.bound_at(now_ms),
            };
            PruneRule {
                class,
                jobs,
                tombstones: keep.bound_at(now_ms),
            }
        })
        .collect()
}

/// Runs `rules` against `backend` in batches of [`PRUNE_BATCH`], at most `max_batches` calls
/// per rule.
///
/// # Errors
/// The backend's; batches applied before the error stay applied.
pub async fn prune_pass(
    backend: &dyn QueueBackend,
    rules: &[PruneRule],
    max_batches: usize,
) -> Result<PruneReport, EngineError> {
    let mut report = PruneReport::default();
    for rule in rules {
        if rule.jobs.is_empty() && rule.tombstones.is_empty() {
            continue;
        }
        let mut batches = 0;
        loop {
            let batch = backend.prune(rule, PRUNE_BATCH).await?;
            report.jobs += batch.jobs;
            report.tombstones += batch.tombstones;
            batches += 1;
            if !batch.more {
                break;
            }
            if batches >= max_batches {
                report.more = true;
                break;
            }
            // Let other callers of the backend in between batches.
            tokio::task::yield_now().await;
        }
    }
    Ok(report)
}

/// Counts what `rules` would prune now (jobs, tombstones), pruning nothing (`jobs prune --dry-run`).
///
/// # Errors
/// The backend's.
pub async fn prune_preview(
    backend: &dyn QueueBackend,
    rules: &[PruneRule],
) -> Result<(u64, u64), EngineError> {
    let (mut jobs, mut tombstones) = (0, 0);
    for rule in rules {
        let (j, t) = backend.prune_count(rule).await?;
        jobs += j;
        tombstones += t;
    }
    Ok((jobs, tombstones))
}

/// Runs a pruning pass under `retention` now and then every `every` until `shutdown` fires
/// (the reaper loops of workers and `serve` run it beside the reaper). Backend errors are
/// logged and retried at the next pass; a pass in flight at shutdown is dropped (each batch is
/// atomic, so a dropped pass applied whole batches or none).
pub async fn run_pruner(
    backend: &dyn QueueBackend,
    retention: Retention,
    every: Duration,
    shutdown: CancellationToken,
) {
    if retention.succeeded.is_forever() && retention.failed.is_forever() {
        return;
    }
    loop {
        let pass = async {
            let now = match backend.now_ms().await {
                Ok(now) => now,
                Err(e) => return warn!(error = %e, "pruning pass: read the queue clock"),
            };
            match prune_pass(backend, &rules(&retention, None, now), MAX_BATCHES_PER_PASS).await {
                Ok(r) if r.jobs > 0 || r.tombstones > 0 => {
                    info!(
                        jobs = r.jobs,
                        tombstones = r.tombstones,
                        more = r.more,
                        "pruned finished jobs"
                    )
                }
                Ok(_) => debug!("pruning pass: nothing to prune"),
                Err(e) => warn!(error = %e, "pruning pass failed"),
            }
        };
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = pass => {}
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
    }
}

/// Parses a retention age such as `"7d"`, `"36h"`, `"90m"`, `"30s"` or `"2w"` (one number and a
/// unit: s, m, h, d, w).
///
/// # Errors
/// A message naming the value when it is not such an age.
pub fn parse_age(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits.parse().map_err(|_| {
        format!("`{text}` is not an age (a number and a unit: s, m, h, d or w, e.g. \"7d\")")
    })?;
    let secs = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        _ => {
            return Err(format!(
                "`{text}`: unknown age unit `{unit}` (use s, m, h, d or w, e.g. \"7d\")"
            ));
        }
    };
    n.checked_mul(secs)
        .map(Duration::from_secs)
        .ok_or_else(|| format!("`{text}` is too long an age"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_parse_with_units() {
        assert_eq!(parse_age("7d"), Ok(Duration::from_secs(7 * 86_400)));
        assert_eq!(parse_age("36h"), Ok(Duration::from_secs(36 * 3600)));
        assert_eq!(parse_age("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_age("2w"), Ok(Duration::from_secs(14 * 86_400)));
        assert!(parse_age("7").unwrap_err().contains("unit"));
        assert!(parse_age("d").is_err());
        assert!(parse_age("7y").unwrap_err().contains("`y`"));
    }

    #[test]
    fn defaults_are_seven_and_thirty_days() {
        let r = Retention::default();
        assert_eq!(
            r.succeeded,
            Keep {
                age: Some(Duration::from_secs(604_800)),
                count: None
            }
        );
        assert_eq!(
            r.failed,
            Keep {
                age: Some(Duration::from_secs(2_592_000)),
                count: None
            }
        );
    }

    #[test]
    fn older_than_replaces_the_job_bound_but_not_the_tombstones() {
        let retention = Retention {
            succeeded: Keep {
                age: None,
                count: Some(5),
            },
            failed: Keep::default(),
        };
        let rules = rules(&retention, Some(Duration::from_secs(10)), 100_000);
        assert_eq!(
            rules[0].jobs,
            Bound {
                before_ms: Some(90_000),
                keep_newest: None
            }
        );
        assert_eq!(
            rules[0].tombstones,
            Bound {
                before_ms: None,
                keep_newest: Some(5)
            }
        );
        assert!(rules[1].tombstones.is_empty());
    }
}
