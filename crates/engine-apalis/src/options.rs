//! How a [`SkillforgeBackend`](crate::SkillforgeBackend) leases and what the jobs it pushes look like.

use std::time::Duration;

use skillforge_engine::JobSpec;
use skillforge_engine::reaper::DEFAULT_REAP_EVERY;

/// Runner kind stamped on jobs pushed through the adapter (`JobSpec::kind`).
///
/// `skillforge worker` has no runner of this kind: keep apalis jobs on queues of their own.
pub const APALIS_KIND: &str = "apalis";

/// Default number of jobs one apalis worker holds leases on at once.
pub const DEFAULT_CONCURRENCY: usize = 4;

/// Default longest single lease call (a long poll that an enqueue ends at once).
pub const DEFAULT_POLL_WAIT: Duration = Duration::from_millis(500);

/// Options of one [`SkillforgeBackend`](crate::SkillforgeBackend) (a `Config` struct rather than
/// boolean parameters).
///
/// Leased jobs heartbeat, go stale and time out by *their own* spec (`heartbeat_ms`,
/// `stale_after_ms`, `timeout_ms`, `max_attempts`); `template` only shapes jobs pushed through
/// the adapter's `TaskSink`.
#[derive(Debug, Clone)]
pub struct SkillforgeOptions {
    /// The skillforge queue to lease from and push to (never derived from a Rust type name).
    pub queue: String,
    /// The spec of pushed jobs: everything but `payload` (the encoded task arguments),
    /// `idempotency_key`, `not_before_ms` and `max_attempts`, which a pushed task may set.
    /// `template.queue` is overwritten with [`Self::queue`].
    pub template: JobSpec,
    /// Most jobs leased and not yet finished at once by one worker (≥ 1): the adapter leases no
    /// more than this, whatever apalis layers sit above it.
    pub concurrency: usize,
    /// Longest one lease call waits for work before it is issued again (a long poll: the
    /// backend's wake-up ends it as soon as a job is enqueued). Bounds how long a stopping worker
    /// waits for an outstanding lease call.
    pub poll_wait: Duration,
    /// Period of the stale-lease reaper each worker runs; `None` runs none (then another process,
    /// e.g. `skillforge serve` or `skillforge worker`, must reap).
    pub reap_every: Option<Duration>,
}

impl SkillforgeOptions {
    /// Options for `queue` with the engine defaults: jobs of kind [`APALIS_KIND`], 3 attempts,
    /// heartbeat 2 s, stale after 15 s, timeout 1 h; concurrency 4, poll wait 0.5 s, reaper every
    /// 0.25 s.
    pub fn new(queue: impl Into<String>) -> Self {
        let queue = queue.into();
        let mut template = JobSpec::new(APALIS_KIND, serde_json::Value::Null);
        template.workflow = "apalis".to_owned();
        template.queue = queue.clone();
        Self {
            queue,
            template,
            concurrency: DEFAULT_CONCURRENCY,
            poll_wait: DEFAULT_POLL_WAIT,
            reap_every: Some(DEFAULT_REAP_EVERY),
        }
    }

    /// Sets [`Self::concurrency`] (0 is taken as 1).
    #[must_use]
    pub fn concurrency(mut self, n_jobs: usize) -> Self {
        self.concurrency = n_jobs.max(1);
        self
    }

    /// Sets [`Self::poll_wait`].
    #[must_use]
    pub fn poll_wait(mut self, wait: Duration) -> Self {
        self.poll_wait = wait;
        self
    }

    /// Sets [`Self::reap_every`].
    #[must_use]
    pub fn reap_every(mut self, every: Option<Duration>) -> Self {
        self.reap_every = every;
        self
    }

    /// Pushed jobs get `n` attempts in total, the first included (0 is taken as 1).
    #[must_use]
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.template.max_attempts = n.max(1);
        self
    }

    /// Pushed jobs renew their lease every `every` while their handler runs.
    #[must_use]
    pub fn heartbeat(mut self, every: Duration) -> Self {
        self.template.heartbeat_ms = every.as_millis() as u64;
        self
    }

    /// Pushed jobs' leases are stale (and reaped) after `after` without a heartbeat.
    #[must_use]
    pub fn stale_after(mut self, after: Duration) -> Self {
        self.template.stale_after_ms = after.as_millis() as u64;
        self
    }

    /// Pushed jobs' handlers are stopped after `timeout` (the attempt counts as timed out).
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.template.timeout_ms = timeout.as_millis() as u64;
        self
    }

    /// Replaces the whole template of pushed jobs (its `queue` is overwritten with [`Self::queue`]).
    #[must_use]
    pub fn template(mut self, template: JobSpec) -> Self {
        self.template = template;
        self.template.queue = self.queue.clone();
        self
    }
}
