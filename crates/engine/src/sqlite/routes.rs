//! The routes of the embedded queue (see [`crate::labels`]): the queue names with label
//! requirements (`<queue>@…`) of its queued jobs, read from the due-jobs index.

use super::SqliteBackend;
use crate::error::EngineError;

impl SqliteBackend {
    /// Distinct routed queue names among queued jobs.
    pub(super) async fn queued_routes(&self) -> Result<Vec<String>, EngineError> {
        sqlx::query_scalar("SELECT DISTINCT queue FROM jobs WHERE state = 'queued' AND instr(queue, '@') > 0 ORDER BY queue")
            .fetch_all(&self.inner.reader)
            .await
            .map_err(self.db("list the queue's routes"))
    }
}
