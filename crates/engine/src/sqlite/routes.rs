//! The routes of the embedded queue (see [`crate::labels`]): the queue names with label
//! requirements (`<queue>@…`) of its queued jobs, read from the due-jobs index by a skip-scan
//! (one index seek per distinct queue name), so a refresh costs O(queues · log queued), not
//! O(queued) (issue 19 item 4): a `SELECT DISTINCT` walked every queued job, delayed ones too.

use super::SqliteBackend;
use crate::error::EngineError;

/// The routes statement: a recursive skip-scan over `jobs_due` (`queue` is its first column),
/// each step seeking the next queue name after the previous one. The query-plan test of
/// `sqlite/list.rs` checks that no step scans `jobs`.
pub(super) const ROUTES: &str = "WITH RECURSIVE q(name) AS (\
       SELECT (SELECT MIN(queue) FROM jobs INDEXED BY jobs_due WHERE state = 'queued') \
       UNION ALL \
       SELECT (SELECT MIN(queue) FROM jobs INDEXED BY jobs_due WHERE state = 'queued' AND queue > q.name) \
       FROM q WHERE q.name IS NOT NULL) \
     SELECT name FROM q WHERE name IS NOT NULL AND instr(name, '@') > 0 ORDER BY name";

impl SqliteBackend {
    /// Distinct routed queue names among queued jobs, in name order.
    pub(super) async fn queued_routes(&self) -> Result<Vec<String>, EngineError> {
        sqlx::query_scalar(ROUTES)
            .fetch_all(&self.inner.reader)
            .await
            .map_err(self.db("list the queue's routes"))
    }
}
