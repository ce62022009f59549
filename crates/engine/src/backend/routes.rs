//! [`QueueRoutes`]: the labelled queues a worker may lease from ([`crate::labels`]).

use crate::error::EngineError;

use super::QueueCore;

/// Routes: a job that requires worker labels is enqueued on `<queue>@<requirements>`, and a
/// worker leases from every route its labels satisfy, so the queue tells which routes exist.
///
/// # Errors
/// [`EngineError::Backend`] when the queue cannot be read.
#[async_trait::async_trait]
pub trait QueueRoutes: QueueCore {
    /// Queue names with label requirements (`<queue>@<requirements>`, [`crate::labels`]) that may
    /// hold jobs: workers lease from the ones their labels satisfy. Default: none.
    async fn routes(&self) -> Result<Vec<String>, EngineError> {
        Ok(Vec::new())
    }

    /// The jobs queued on the queue or route `queue` (due or not), oldest first (by due time), at
    /// most `limit`: what the placement deadline ([`crate::placement`]) looks at for a route no
    /// live worker serves. Default: none.
    async fn queued_on(
        &self,
        queue: &str,
        limit: usize,
    ) -> Result<Vec<crate::job::Job>, EngineError> {
        let _ = (queue, limit);
        Ok(Vec::new())
    }
}
