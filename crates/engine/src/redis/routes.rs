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
        ::redis::cmd("SADD").arg(&key).arg(queue).query_async::<i64>(&mut c).await.map(|_| ()).map_err(|e| EngineError::redis(format!("record route `{queue}`: {e}")))
    }

    /// Every routed queue name seen on this namespace.
    pub(super) async fn all_routes(&self) -> Result<Vec<String>, EngineError> {
        let key = format!("{}routes", self.prefix);
        let mut c = self.conn.clone();
        let mut routes: Vec<String> =
            ::redis::cmd("SMEMBERS").arg(&key).query_async(&mut c).await.map_err(|e| EngineError::redis(format!("read routes: {e}")))?;
        routes.sort();
        Ok(routes)
    }
}
