//! The engine's error type.

/// Errors of the engine and its queue backends.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The queue backend could not be reached or answered with an error.
    #[error("queue backend `{backend}`: {message}")]
    Backend {
        /// `sqlite` or `redis`.
        backend: &'static str,
        /// What went wrong.
        message: String,
    },
    /// The queue backend refused the call for a reason that passes (Redis `OOM` under
    /// `noeviction`, `LOADING`, `BUSY`, a dropped or reset connection) and kept refusing for
    /// the call's whole retry budget. Trying again later may succeed ([`EngineError::is_transient`]).
    #[error("queue backend `{backend}`: {message}")]
    Unavailable {
        /// `sqlite` or `redis`.
        backend: &'static str,
        /// What went wrong.
        message: String,
    },
    /// No job with that id.
    #[error("no job `{0}`")]
    NotFound(String),
    /// A job known to have been enqueued (seen earlier, or recorded by the control plane's store)
    /// that the queue no longer has, without the tombstone a pruned job leaves: the queue lost
    /// it (its data flushed, or a restart without persistence). Nothing of it stays queued.
    #[error(
        "job `{job_id}` was lost: the queue no longer has it (did it lose its data: a restart without persistence, \
         a flush?); nothing of it stays queued or will report: {what_now}"
    )]
    Lost {
        /// The job.
        job_id: String,
        /// What to do about it, e.g. which command enqueues it again.
        what_now: String,
    },
    /// The job is in a state that does not allow the operation.
    #[error("job `{job_id}` is {state}: {message}")]
    InvalidState {
        /// The job.
        job_id: String,
        /// Its current state.
        state: crate::job::JobState,
        /// What was refused.
        message: String,
    },
    /// A queue URL or setting was not understood.
    #[error("invalid queue configuration: {0}")]
    Config(String),
    /// A stored job could not be decoded.
    #[error("corrupt job record `{job_id}`: {message}")]
    Corrupt {
        /// The job.
        job_id: String,
        /// What was wrong.
        message: String,
    },
}

impl EngineError {
    /// Wraps a SQLite error.
    pub fn sqlite(e: impl std::fmt::Display) -> Self {
        EngineError::Backend {
            backend: "sqlite",
            message: e.to_string(),
        }
    }

    /// Wraps a Redis error.
    pub fn redis(e: impl std::fmt::Display) -> Self {
        EngineError::Backend {
            backend: "redis",
            message: e.to_string(),
        }
    }

    /// Wraps a Redis error that passes ([`EngineError::Unavailable`]).
    pub fn redis_unavailable(e: impl std::fmt::Display) -> Self {
        EngineError::Unavailable {
            backend: "redis",
            message: e.to_string(),
        }
    }

    /// Whether the call may succeed if made again later ([`EngineError::Unavailable`]): a
    /// worker keeps retrying such a finish while it holds the lease.
    pub fn is_transient(&self) -> bool {
        matches!(self, EngineError::Unavailable { .. })
    }
}
