//! What a worker tells the process it runs in about calls to the queue that keep failing:
//! results it could not deliver and lease calls failing in a row.
//!
//! A standalone `skillforge worker` logs these and retries (a full disk or an unreachable queue
//! may heal). A process that runs a worker for its own jobs (`jobs submit --wait`, `verify` on
//! the embedded queue) reads them instead: a result its worker could not deliver will never
//! arrive, so waiting on it would hang (issue 12 item 3).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

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
