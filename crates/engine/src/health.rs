//! What a worker tells the process it runs in about calls to the queue that keep failing:
//! results it could not deliver and lease calls failing in a row; and its own figures for
//! `worker --metrics` ([`WorkerFigures`]: leases, results, heartbeats).
//!
//! A standalone `skillforge worker` logs these and retries (a full disk or an unreachable queue
//! may heal). A process that runs a worker for its own jobs (`jobs submit --wait`, `verify` on
//! the embedded queue) reads them instead: a result its worker could not deliver will never
//! arrive, so waiting on it would hang (issue 12 item 3).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Shared between a [`crate::worker::Worker`] (which writes) and the process embedding it
/// (which reads); see the module docs. `Default` is healthy.
#[derive(Debug, Default)]
pub struct WorkerHealth {
    /// (job id, error) of each result that could not be delivered, oldest first.
    undelivered: Mutex<Vec<(String, String)>>,
    /// Lease calls failed since the last one that answered.
    lease_failures: AtomicU32,
    /// The error of the last failed lease call.
    last_lease_error: Mutex<Option<String>>,
    leased: AtomicU64,
    resolved: AtomicU64,
    finished: AtomicU64,
    fenced: AtomicU64,
    released: AtomicU64,
    heartbeats: AtomicU64,
    heartbeat_errors: AtomicU64,
    leases_lost: AtomicU64,
    undelivered_count: AtomicU64,
}

/// A worker's own counts since it started (`worker --metrics`, issue 36 item 2).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerFigures {
    /// Leases this worker took.
    pub leased: u64,
    /// Leases it holds now (taken and not yet resolved by a finish, a fence or a hand-back).
    pub running: u64,
    /// Results it delivered that were applied.
    pub finished: u64,
    /// Results it delivered that fencing rejected (the lease had been superseded).
    pub fenced: u64,
    /// Jobs it handed back on shutdown.
    pub released: u64,
    /// Results it could not deliver (left to the reaper).
    pub undelivered: u64,
    /// Lease heartbeats the queue answered.
    pub heartbeats: u64,
    /// Lease heartbeats that failed (queue errors; retried at the next beat).
    pub heartbeat_errors: u64,
    /// Leases its heartbeats found lost (stale and reaped, or a held lock taken over).
    pub leases_lost: u64,
}

impl WorkerHealth {
    /// The error that kept job `job_id`'s result from being delivered, if it was not.
    pub fn undelivered(&self, job_id: &str) -> Option<String> {
        lock(&self.undelivered)
            .iter()
            .find(|(id, _)| id == job_id)
            .map(|(_, e)| e.clone())
    }

    /// `(failures in a row, last error)` while lease calls keep failing; `None` once one answers.
    pub fn lease_failing(&self) -> Option<(u32, String)> {
        let n = self.lease_failures.load(Ordering::SeqCst);
        (n > 0).then(|| (n, lock(&self.last_lease_error).clone().unwrap_or_default()))
    }

    pub(crate) fn result_not_delivered(&self, job_id: &str, error: &str) {
        lock(&self.undelivered).push((job_id.to_owned(), error.to_owned()));
        self.undelivered_count.fetch_add(1, Ordering::Relaxed);
    }

    /// This worker's counts so far.
    pub fn figures(&self) -> WorkerFigures {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        WorkerFigures {
            leased: get(&self.leased),
            running: get(&self.leased).saturating_sub(get(&self.resolved)),
            finished: get(&self.finished),
            fenced: get(&self.fenced),
            released: get(&self.released),
            undelivered: get(&self.undelivered_count),
            heartbeats: get(&self.heartbeats),
            heartbeat_errors: get(&self.heartbeat_errors),
            leases_lost: get(&self.leases_lost),
        }
    }

    pub(crate) fn leased(&self) {
        self.leased.fetch_add(1, Ordering::Relaxed);
    }

    /// A lease this worker held is resolved (finished, fenced, handed back, or given up).
    pub(crate) fn lease_resolved(&self) {
        self.resolved.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn result_applied(&self, applied: bool) {
        if applied {
            &self.finished
        } else {
            &self.fenced
        }
        .fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn handed_back(&self) {
        self.released.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn heartbeat(&self, answered: bool, lost: bool) {
        if answered {
            &self.heartbeats
        } else {
            &self.heartbeat_errors
        }
        .fetch_add(1, Ordering::Relaxed);
        if lost {
            self.leases_lost.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn lease_failed(&self, error: &str) {
        *lock(&self.last_lease_error) = Some(error.to_owned());
        self.lease_failures.fetch_add(1, Ordering::SeqCst);
    }

    pub(crate) fn lease_answered(&self) {
        self.lease_failures.store(0, Ordering::SeqCst);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
