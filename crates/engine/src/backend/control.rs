//! [`QueueControl`]: what an operator (and a workflow acting for one) does to jobs beyond running
//! them: cancel, retry, list, and see every lease held.

use crate::error::EngineError;
use crate::job::{CancelReply, Job, JobState, LeaseView};

use super::QueueCore;

/// Operator transitions and listings: `jobs cancel`, `jobs retry`, `jobs list`, `locks`, and the
/// steps that cancel or retry their own jobs.
///
/// # Errors
/// Every call returns [`EngineError::Backend`] when the queue cannot be read or
/// written; a call that can return another variant says so.
#[async_trait::async_trait]
pub trait QueueControl: QueueCore {
    /// Cancels a job: queued or stale ⇒ `cancelled` now; running ⇒ `cancel_requested`
    /// (the worker sees it at its next heartbeat).
    async fn cancel(&self, job_id: &str) -> Result<CancelReply, EngineError>;

    /// Puts a `failed`, `dead`, `cancelled` or `stale` job back in the queue with a fresh
    /// attempt budget (attempt history kept). Errors with [`EngineError::InvalidState`] otherwise.
    async fn retry(&self, job_id: &str) -> Result<(), EngineError>;

    /// [`QueueControl::retry`] that first replaces the job's payload with `payload` (the same
    /// runner kind's JSON), in the same atomic step: `jobs retry --env`, and a keyed submit
    /// starting a new attempt of a job that could not run in the environment it was given. The
    /// attempt history is kept. A backend without it (a test wrapper) refuses with
    /// [`EngineError::Config`].
    ///
    /// # Errors
    /// As [`QueueControl::retry`]; nothing changes on an error.
    async fn retry_with_payload(
        &self,
        job_id: &str,
        payload: &serde_json::Value,
    ) -> Result<(), EngineError> {
        let _ = payload;
        Err(EngineError::Config(format!(
            "this queue backend cannot replace the payload of job `{job_id}`"
        )))
    }

    /// Fails the queued job `job_id` without running it, with `outcome` as its result: state
    /// `failed`, attempts unchanged, a pending result like any other failure (ingestion applies
    /// it through the family's handler). A job that ran before gets a new fencing token for this
    /// result, as a cancel gives it. Used by the placement deadline ([`crate::placement`]).
    /// Returns false, changing nothing, when the job is no longer `queued`. Default: false (a
    /// backend without it fails nothing).
    ///
    /// # Errors
    /// [`EngineError::NotFound`] for an unknown job; [`EngineError::Backend`] as every call.
    async fn fail_queued(
        &self,
        job_id: &str,
        outcome: &skillforge_runner::RunOutcome,
    ) -> Result<bool, EngineError> {
        let _ = (job_id, outcome);
        Ok(false)
    }

    /// Jobs, newest first, optionally filtered by state, at most `limit`.
    async fn list(&self, state: Option<JobState>, limit: usize) -> Result<Vec<Job>, EngineError>;

    /// Every active job lease and named lock.
    async fn leases(&self) -> Result<Vec<LeaseView>, EngineError>;

    /// How many jobs the queue holds in each state, and the queued ones per queue name: the
    /// web console's queue page (issue 36 item 1), which must render in ≤ 100 ms with 100 000
    /// finished jobs retained. Both backends answer from their indexes (SQLite: a count over
    /// each state's partial index; Redis: the cardinality of each state's set), never by
    /// reading the jobs. The default lists every job (a test wrapper's answer).
    async fn counts(&self) -> Result<JobCounts, EngineError> {
        let mut counts = JobCounts::default();
        for job in self.list(None, usize::MAX).await? {
            counts.add(job.state, 1);
            if job.state == JobState::Queued {
                counts.add_queued(&job.spec.queue, 1);
            }
        }
        Ok(counts)
    }
}

/// Jobs per state and queued jobs per queue name ([`QueueControl::counts`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct JobCounts {
    /// Every state of [`JobState::ALL`] with its number of jobs, in that order (0 included).
    pub by_state: Vec<(JobState, u64)>,
    /// Queue (or route) name → queued jobs on it, by name; queues with none are left out.
    pub queued_by_queue: Vec<(String, u64)>,
}

impl JobCounts {
    /// Adds `n` jobs in `state`.
    pub fn add(&mut self, state: JobState, n: u64) {
        if self.by_state.is_empty() {
            self.by_state = JobState::ALL.iter().map(|s| (*s, 0)).collect();
        }
        if let Some(entry) = self.by_state.iter_mut().find(|(s, _)| *s == state) {
            entry.1 += n;
        }
    }

    /// Adds `n` queued jobs on `queue` (to the per-queue list only; see [`Self::add`]).
    pub fn add_queued(&mut self, queue: &str, n: u64) {
        if n == 0 {
            return;
        }
        match self
            .queued_by_queue
            .binary_search_by(|(q, _)| q.as_str().cmp(queue))
        {
            Ok(i) => self.queued_by_queue[i].1 += n,
            Err(i) => self.queued_by_queue.insert(i, (queue.to_owned(), n)),
        }
    }

    /// The number of jobs in `state`.
    pub fn of(&self, state: JobState) -> u64 {
        self.by_state
            .iter()
            .find(|(s, _)| *s == state)
            .map_or(0, |(_, n)| *n)
    }

    /// Every job counted.
    pub fn total(&self) -> u64 {
        self.by_state.iter().map(|(_, n)| n).sum()
    }
}
