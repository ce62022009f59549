//! [`QueueIntegrity`]: whether the queue still holds the jobs it was given: a namespace emptied
//! or replaced, a server setting under which jobs vanish, and records that cannot be decoded.

use crate::error::EngineError;
use crate::job::{Job, JobState};

use super::QueueControl;

/// Checks a queue server can fail (data loss, unsafe settings) and records that cannot be read:
/// every default is the answer of a queue that keeps its data (no loss, no unsafe setting, no
/// unreadable record). Redis implements them all, the embedded queue the unreadable records
/// (`list_readable`, `quarantined`, `purge`); `serve`, `worker`, `jobs submit` and every reaper
/// pass call the checks.
#[async_trait::async_trait]
pub trait QueueIntegrity: QueueControl {
    /// Whether the queue's data is still the data this backend first saw. Redis keeps a
    /// namespace epoch (a random id written once into an empty namespace); when it is gone or
    /// changed (redis-server restarted without persistence, `FLUSHALL`, another server behind the
    /// URL), every job stored before is lost. Returns the loss once, at the first check that sees
    /// it (later checks compare with the new epoch). The embedded queue is a file that cannot
    /// lose part of itself this way: the default answers `None`.
    ///
    /// # Errors
    /// [`EngineError::Backend`] when the server cannot be reached.
    async fn check_namespace(&self) -> Result<Option<NamespaceLoss>, EngineError> {
        Ok(None)
    }

    /// The namespace epoch this backend knows (Redis: read at connect, replaced when
    /// [`Self::check_namespace`] reports a loss), for a control plane to keep in its store and
    /// compare at its next start. `None` for a backend without one (the embedded queue).
    fn namespace_epoch(&self) -> Option<String> {
        None
    }

    /// A server setting under which the queue cannot keep its jobs, if any: Redis with a
    /// `maxmemory-policy` other than `noeviction` (keys evicted under memory pressure, jobs
    /// vanish). `worker`, `serve` and `jobs submit` refuse to start on one; every reaper pass
    /// loop re-checks it (every [`crate::reaper::SETTINGS_CHECK_EVERY`]) and logs a change as an
    /// error. The embedded queue has no such setting: the default answers `None`.
    ///
    /// # Errors
    /// [`EngineError::Backend`] when the server cannot be reached.
    async fn check_settings(&self) -> Result<Option<UnsafeSetting>, EngineError> {
        Ok(None)
    }

    /// [`QueueControl::list`] that skips the records it cannot decode instead of failing: the
    /// page of readable jobs and the unreadable records met on the way (`quarantined_at_ms` =
    /// `None`), so one bad record does not hide every other job. Default:
    /// [`QueueControl::list`], none skipped.
    ///
    /// # Errors
    /// [`EngineError::Backend`] when the queue cannot be read at all.
    async fn list_readable(
        &self,
        state: Option<JobState>,
        limit: usize,
    ) -> Result<(Vec<Job>, Vec<UnreadableRecord>), EngineError> {
        Ok((self.list(state, limit).await?, Vec::new()))
    }

    /// The quarantined job records (at most `limit`): pending results ingestion could not
    /// decode, set aside so that every other result flows (`jobs list --state broken`).
    /// Default: none.
    ///
    /// # Errors
    /// [`EngineError::Backend`] when the queue cannot be read.
    async fn quarantined(&self, limit: usize) -> Result<Vec<UnreadableRecord>, EngineError> {
        let _ = limit;
        Ok(Vec::new())
    }

    /// Sets the running job `job_id` aside as an unreadable record with `reason` when the reaper
    /// cannot reap it (a transition that fails on its record, not on the queue): out of the
    /// lease index into the quarantined records ([`Self::quarantined`]), so it stops failing
    /// every reaper pass. Returns whether this call moved it. Default: false (nothing moved; the
    /// embedded queue's reap decodes nothing of the record, so it cannot fail on one).
    ///
    /// # Errors
    /// [`EngineError::Backend`] when the queue cannot be written.
    async fn quarantine(&self, job_id: &str, reason: &str) -> Result<bool, EngineError> {
        let _ = (job_id, reason);
        Ok(false)
    }

    /// Deletes the quarantined record `job_id` with everything of its job (`jobs purge ID`).
    /// Returns false, deleting nothing, when no such record is quarantined: a readable job is
    /// never purged. Default: false.
    ///
    /// # Errors
    /// [`EngineError::Backend`] when the queue cannot be written.
    async fn purge(&self, job_id: &str) -> Result<bool, EngineError> {
        let _ = job_id;
        Ok(false)
    }
}

/// A job record that cannot be decoded: see [`QueueIntegrity::list_readable`] and
/// [`QueueIntegrity::quarantined`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnreadableRecord {
    /// The job's id.
    pub job_id: String,
    /// Why it cannot be read (a missing field, a long value's key gone, a malformed value).
    pub reason: String,
    /// When ingestion quarantined it, ms since the Unix epoch (server clock); `None` for a
    /// record met by a listing and not quarantined (yet).
    pub quarantined_at_ms: Option<i64>,
}

/// A server setting the queue cannot keep its jobs under: see [`QueueIntegrity::check_settings`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsafeSetting {
    /// The setting's name as the server spells it, e.g. `maxmemory-policy`.
    pub setting: String,
    /// Its value now, e.g. `allkeys-lru`.
    pub value: String,
    /// The value skillforge requires, e.g. `noeviction`.
    pub required: String,
    /// What goes wrong under the value now.
    pub why: String,
    /// How to fix it.
    pub fix: String,
}

impl std::fmt::Display for UnsafeSetting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the queue server's `{}` is `{}`: {}; skillforge requires `{}`: set it with {}",
            self.setting, self.value, self.why, self.required, self.fix
        )
    }
}

/// A queue namespace found empty or replaced: see [`QueueIntegrity::check_namespace`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceLoss {
    /// The namespace (Redis key prefix without its `:`).
    pub namespace: String,
    /// The epoch this process knew.
    pub previous_epoch: String,
    /// The epoch found (or just created, when the namespace had none).
    pub current_epoch: String,
    /// Jobs in the namespace now (0 when it was emptied).
    pub jobs_now: u64,
}

impl std::fmt::Display for NamespaceLoss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the queue namespace `{}` lost its data: epoch `{}` is gone (now `{}`, {} job(s)); every job \
             enqueued before (queued, running, or finished with a result not yet applied) is missing and \
             will never report; its workflow state must be re-dispatched. Was redis-server restarted \
             without persistence, flushed, or is the URL pointing at another server?",
            self.namespace, self.previous_epoch, self.current_epoch, self.jobs_now
        )
    }
}
