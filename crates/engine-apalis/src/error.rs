//! The adapter's error type.

use skillforge_engine::EngineError;

/// Errors of [`SkillforgeBackend`](crate::SkillforgeBackend) as an apalis backend and task sink.
///
/// Per-job problems never surface here (a payload that does not decode fails that job through the
/// engine policy; a transient queue error is logged and the lease retried), so an apalis worker is
/// not stopped by them.
#[derive(Debug, thiserror::Error)]
pub enum AdapterError {
    /// The skillforge queue backend could not be reached or refused the operation.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// Task arguments could not be encoded as a job payload (JSON).
    #[error("encode task arguments as a job payload: {0}")]
    Encode(#[source] serde_json::Error),
}
