//! The routes of a Redis namespace (see [`crate::labels`]): the set `routes` of every routed
//! queue name (`<queue>@…`) a job was enqueued on, added before the enqueue.

use super::RedisBackend;
use crate::error::EngineError;

impl RedisBackend {
    /// Records `queue` in the routes set when it is a route (one `SADD`, only for routed jobs).
    pub(super) async fn note_route(&self, queue: &str) -> Result<(), EngineError> {
        if !queue.contains(crate::labels::ROUTE_SEPARATOR) {
            return Ok(());
        }
        let key = format!("{}routes", self.prefix);
        let mut c = self.conn.clone();
        ::redis::cmd("SADD")
            .arg(&key)
            .arg(queue)
            .query_async::<i64>(&mut c)
            .await
            .map(|_| ())
            .map_err(|e| EngineError::redis(format!("record route `{queue}`: {e}")))
    }

    /// Every routed queue name seen on this namespace.
    pub(super) async fn all_routes(&self) -> Result<Vec<String>, EngineError> {
        let key = format!("{}routes", self.prefix);
        let mut c = self.conn.clone();
        let mut routes: Vec<String> = ::redis::cmd("SMEMBERS")
            .arg(&key)
            .query_async(&mut c)
            .await
            .map_err(|e| EngineError::redis(format!("read routes: {e}")))?;
        routes.sort();
        Ok(routes)
    }

    /// The jobs queued on `queue` (its ready list, lazy entries skipped, and its delayed set),
    /// oldest due first, at most `limit`.
    pub(super) async fn jobs_queued_on(
        &self,
        queue: &str,
        limit: usize,
    ) -> Result<Vec<crate::job::Job>, EngineError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let stop = limit.min(isize::MAX as usize) as isize - 1;
        let mut pipe = ::redis::pipe();
        pipe.cmd("LRANGE")
            .arg(format!("{}ready:{queue}", self.prefix))
            .arg(0)
            .arg(stop);
        pipe.cmd("ZRANGE")
            .arg(format!("{}delayed:{queue}", self.prefix))
            .arg(0)
            .arg(stop);
        let mut c = self.conn.clone();
        let (ready, delayed): (Vec<String>, Vec<String>) = pipe
            .query_async(&mut c)
            .await
            .map_err(|e| EngineError::redis(format!("list the jobs queued on `{queue}`: {e}")))?;
        let mut seen = std::collections::HashSet::new();
        let ids: Vec<String> = ready
            .into_iter()
            .chain(delayed)
            .filter(|id| seen.insert(id.clone()))
            .collect();
        let mut jobs: Vec<crate::job::Job> = self
            .fetch_jobs_lenient(&ids)
            .await?
            .jobs
            .into_iter()
            .filter(|j| j.state == crate::job::JobState::Queued && j.spec.queue == queue)
            .collect();
        jobs.sort_by_key(|j| (j.not_before_ms, j.created_at_ms));
        jobs.truncate(limit);
        Ok(jobs)
    }
}
