//! The placement deadline (issue 35 item 6): a queued job that requires labels no live worker
//! offers fails once that has held for a configured time, naming the labels no worker has,
//! instead of waiting for ever and running whenever such a worker appears (`eval deploy --to` a
//! host that has no worker must not leave a job that fires the day one starts there).
//!
//! A job is *unplaceable* while it is queued and due, requires labels ([`crate::labels`]), and no
//! live worker ([`crate::labels::live_workers`]) may take it. The time is counted by the
//! process that applies the deadline, on its monotonic clock, from the first pass that saw the
//! job unplaceable; a live worker that may take it resets the count. So a control plane that
//! just started gives every job the whole deadline again, and a clock step changes nothing.
//! The job then fails ([`crate::backend::QueueControl::fail_queued`]) with a `not_runnable`
//! outcome whose reason names the requirements no live worker offers, the live workers' labels
//! and the `skillforge worker --label …` that would take it; its family sees a failed job like
//! any other, and a submit under the same idempotency key starts it again once such a worker
//! runs. `serve` applies the deadline all the time, a waiting command while it waits.

use std::collections::HashMap;
use std::time::Duration;

use skillforge_runner::{ExitClass, RunOutcome};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::backend::QueueBackend;
use crate::error::EngineError;
use crate::job::Job;
use crate::labels::{
    LiveWorker, describe_live, label_flags, live_workers, offered_by_none, parse_route,
};

/// Default of `[queue] unplaceable_after_secs`: how long a job may wait with no live worker able
/// to take it before it fails (10 minutes: a worker being restarted or a machine booting is
/// back well within it).
pub const DEFAULT_UNPLACEABLE_AFTER: Duration = Duration::from_secs(600);

/// How often a long-running control plane applies the deadline.
pub const PLACEMENT_CHECK_EVERY: Duration = Duration::from_secs(1);

/// Most jobs one pass looks at per route (oldest due first); the rest are looked at once these
/// have failed.
const PASS_LIMIT: usize = 500;

/// A job failed by the deadline, for logs and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unplaced {
    /// The job.
    pub job_id: String,
    /// The failure's reason (the outcome's `not_runnable` reason).
    pub reason: String,
}

/// What one process has seen: when each queued job was first seen unplaceable, on its monotonic
/// clock. Jobs no longer unplaceable are forgotten at the next pass.
#[derive(Debug, Default)]
pub struct PlacementWatch {
    since: HashMap<String, tokio::time::Instant>,
}

impl PlacementWatch {
    /// How long `job_id` has been seen unplaceable by `now` (zero when it is not).
    pub fn unplaceable_for(&self, job_id: &str, now: tokio::time::Instant) -> Duration {
        self.since.get(job_id).map_or(Duration::ZERO, |since| {
            now.saturating_duration_since(*since)
        })
    }
}

/// The reason a job requiring `requires` fails after `after` with the live workers `live`.
pub fn unplaceable_reason(requires: &[String], live: &[LiveWorker], after: Duration) -> String {
    let nobody = offered_by_none(live, requires);
    let which = if nobody.is_empty() {
        format!(
            "no live worker offers all of the labels it requires ({})",
            requires.join(", ")
        )
    } else {
        format!(
            "no live worker offers the label(s) {} it requires",
            nobody.join(", ")
        )
    };
    format!(
        "{which} for {} s ({}): start one with `skillforge worker {}` and submit it again \
         ([queue] unplaceable_after_secs sets this deadline)",
        after.as_secs(),
        describe_live(live),
        label_flags(requires)
    )
}

/// One pass: observes every queued, due job on a route no live worker may take, and fails
/// those seen so for `after` by `now` (see the module docs). Jobs on routes some live worker
/// may take are forgotten. Returns the jobs this pass failed (a job another process failed or
/// a worker leased meanwhile is not among them).
///
/// # Errors
/// The queue's.
pub async fn fail_unplaceable(
    backend: &dyn QueueBackend,
    watch: &mut PlacementWatch,
    after: Duration,
    now: tokio::time::Instant,
) -> Result<Vec<Unplaced>, EngineError> {
    let routes = backend.routes().await?;
    if routes.is_empty() || backend.transfer_area().is_none() {
        watch.since.clear();
        return Ok(Vec::new());
    }
    let live = live_workers(backend).await?;
    let mut queued = Vec::new();
    for route in &routes {
        let (_, requires) = parse_route(route);
        if !requires.is_empty() && !live.iter().any(|w| w.may_take(&requires)) {
            queued.extend(backend.queued_on(route, PASS_LIMIT).await?);
        }
    }
    fail_observed(backend, watch, after, now, &live, queued).await
}

/// [`fail_unplaceable`] for the jobs `jobs` only (as last read; the others are neither watched
/// nor failed): what a waiting command applies to the jobs it waits for.
///
/// # Errors
/// The queue's.
pub async fn fail_unplaceable_among(
    backend: &dyn QueueBackend,
    watch: &mut PlacementWatch,
    after: Duration,
    now: tokio::time::Instant,
    jobs: &[Job],
) -> Result<Vec<Unplaced>, EngineError> {
    let routed = || {
        jobs.iter()
            .filter(|j| j.state == crate::job::JobState::Queued && !j.spec.requires.is_empty())
    };
    if routed().next().is_none() || backend.transfer_area().is_none() {
        watch.since.clear();
        return Ok(Vec::new());
    }
    let live = live_workers(backend).await?;
    let queued = routed()
        .filter(|j| !live.iter().any(|w| w.may_take(&j.spec.requires)))
        .cloned()
        .collect();
    fail_observed(backend, watch, after, now, &live, queued).await
}

/// Records `queued` (jobs no worker of `live` may take) in `watch`, forgetting every other job,
/// and fails those due and seen so for `after` by `now`.
async fn fail_observed(
    backend: &dyn QueueBackend,
    watch: &mut PlacementWatch,
    after: Duration,
    now: tokio::time::Instant,
    live: &[LiveWorker],
    queued: Vec<Job>,
) -> Result<Vec<Unplaced>, EngineError> {
    let backend_now = backend.now_ms().await?;
    // A job not due yet (a retry's backoff, `not_before`) waits for its time, not for a worker.
    let unplaceable: Vec<Job> = queued
        .into_iter()
        .filter(|j| j.not_before_ms <= backend_now && !j.spec.requires.is_empty())
        .collect();
    let mut since = HashMap::with_capacity(unplaceable.len());
    for job in &unplaceable {
        since.insert(
            job.id.clone(),
            watch.since.get(&job.id).copied().unwrap_or(now),
        );
    }
    watch.since = since;
    let mut failed = Vec::new();
    for job in unplaceable {
        if watch.unplaceable_for(&job.id, now) < after {
            continue;
        }
        let reason = unplaceable_reason(&job.spec.requires, live, after);
        let outcome = RunOutcome {
            exit: ExitClass::NotRunnable {
                reason: reason.clone(),
            },
            exit_code: None,
            duration_ms: 0,
            stdout_tail: String::new(),
            stderr_tail: String::new(),
            detail: serde_json::Value::Null,
        };
        if backend.fail_queued(&job.id, &outcome).await? {
            // Info: `serve` logs it at its default level; a waiting command says it in words.
            info!(job_id = %job.id, requires = %job.spec.requires.join(","), "job failed: {reason}");
            watch.since.remove(&job.id);
            failed.push(Unplaced {
                job_id: job.id,
                reason,
            });
        }
    }
    Ok(failed)
}

/// Runs [`fail_unplaceable`] every `every` until `shutdown` fires (`serve`); `after` zero runs
/// nothing (the deadline is off). Queue errors are logged and retried at the next pass.
pub async fn run_placement_deadline(
    backend: &dyn QueueBackend,
    after: Duration,
    every: Duration,
    shutdown: CancellationToken,
) {
    if after.is_zero() {
        return;
    }
    let mut watch = PlacementWatch::default();
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            pass = fail_unplaceable(backend, &mut watch, after, tokio::time::Instant::now()) => match pass {
                Ok(failed) if !failed.is_empty() => debug!(n = failed.len(), "placement deadline pass"),
                Ok(_) => {}
                Err(e) => warn!(error = %e, "placement deadline pass failed"),
            },
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker(id: &str, labels: Option<&[&str]>) -> LiveWorker {
        LiveWorker {
            id: id.to_owned(),
            labels: labels.map(|l| l.iter().map(|s| (*s).to_owned()).collect()),
        }
    }

    fn v(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn the_reason_names_the_labels_no_live_worker_offers() {
        let after = Duration::from_secs(600);
        let check = |requires: &[&str], live: &[LiveWorker], expected: &[&str]| {
            let reason = unplaceable_reason(&v(requires), live, after);
            for part in expected {
                assert!(reason.contains(part), "`{part}` missing from: {reason}");
            }
        };
        check(
            &["host=db1"],
            &[],
            &[
                "label(s) host=db1 it requires",
                "for 600 s",
                "none is live",
                "--label host=db1",
            ],
        );
        check(
            &["gpu", "host=db1"],
            &[worker("w-1", Some(&["gpu", "os=linux"]))],
            &[
                "label(s) host=db1 it requires",
                "w-1 [gpu, os=linux]",
                "--label gpu --label host=db1",
            ],
        );
        // Each label offered by someone, all of them by nobody.
        check(
            &["gpu", "host=db1"],
            &[
                worker("w-1", Some(&["gpu"])),
                worker("w-2", Some(&["host=db1"])),
            ],
            &["offers all of the labels it requires (gpu, host=db1)"],
        );
        check(
            &["gpu"],
            &[worker("w-1", None), worker("w-2", Some(&[]))],
            &["w-1 [labels unknown]", "w-2 []"],
        );
    }

    #[test]
    fn a_worker_whose_labels_are_unknown_may_take_anything() {
        assert!(worker("w", None).may_take(&v(&["host=db1"])));
        assert!(!worker("w", Some(&[])).may_take(&v(&["host=db1"])));
        assert!(worker("w", Some(&["host=db1"])).may_take(&v(&["host"])));
    }
}
