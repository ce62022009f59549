//! The Redis server settings a queue cannot keep its jobs without (issue 32 item 1).
//!
//! `maxmemory-policy` must be `noeviction`: under any other policy a server at `maxmemory`
//! evicts keys, and a job's hash, its place in the ready list or its pending result vanish
//! without an error to anyone (BullMQ refuses the same way). Read with `CONFIG GET`; where
//! `CONFIG` is disabled or not permitted (hosted Redis, ACLs), from `INFO memory`
//! (`maxmemory_policy:`). When neither answers, the check says so once and lets the process run.

use ::redis::RedisError;
use ::redis::aio::ConnectionManager;

use super::{RedisBackend, transient};
use crate::backend::UnsafeSetting;
use crate::error::EngineError;

/// The only `maxmemory-policy` that never evicts a key.
pub(super) const REQUIRED_POLICY: &str = "noeviction";

impl RedisBackend {
    /// The server's `maxmemory-policy` judged: `None` when it is `noeviction` (or cannot be
    /// read: logged once as a warning), else the [`UnsafeSetting`].
    ///
    /// # Errors
    /// [`EngineError::Backend`] when the server cannot be reached.
    pub(super) async fn eviction_setting(&self) -> Result<Option<UnsafeSetting>, EngineError> {
        let mut conn = self.conn.clone();
        let policy = match eviction_policy(&mut conn).await {
            Ok(policy) => policy,
            Err(e) => return Err(EngineError::redis(format!("read maxmemory-policy: {e}"))),
        };
        let Some(policy) = policy else {
            static WARNED: std::sync::Once = std::sync::Once::new();
            WARNED.call_once(|| {
                tracing::warn!(
                    "could not read the Redis maxmemory-policy (CONFIG GET and INFO memory were refused): \
                     make sure it is `noeviction`, or jobs may vanish under memory pressure"
                );
            });
            return Ok(None);
        };
        Ok((policy != REQUIRED_POLICY).then(|| UnsafeSetting {
            setting: "maxmemory-policy".to_owned(),
            value: policy,
            required: REQUIRED_POLICY.to_owned(),
            why: "under memory pressure the server evicts keys, and jobs, leases and results vanish without an error"
                .to_owned(),
            fix: "`redis-cli CONFIG SET maxmemory-policy noeviction`, and `maxmemory-policy noeviction` in redis.conf \
                  so a restart keeps it"
                .to_owned(),
        }))
    }
}

/// `maxmemory-policy` by `CONFIG GET`, else by `INFO memory`; `Ok(None)` when the server
/// refuses both (disabled or renamed command, an ACL without the permission).
///
/// # Errors
/// A connection-level error (the server is not reachable).
async fn eviction_policy(conn: &mut ConnectionManager) -> Result<Option<String>, RedisError> {
    let config: Result<Vec<String>, RedisError> = ::redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxmemory-policy")
        .query_async(conn)
        .await;
    match config {
        Ok(pair) if pair.len() == 2 => return Ok(Some(pair[1].clone())),
        Ok(_) => {}
        Err(e) if transient(&e) => return Err(e),
        Err(_) => {}
    }
    let info: Result<String, RedisError> =
        ::redis::cmd("INFO").arg("memory").query_async(conn).await;
    match info {
        Ok(text) => Ok(policy_from_info(&text)),
        Err(e) if transient(&e) => Err(e),
        Err(_) => Ok(None),
    }
}

/// The `maxmemory_policy:` line of an `INFO memory` reply.
fn policy_from_info(info: &str) -> Option<String> {
    info.lines()
        .find_map(|line| line.strip_prefix("maxmemory_policy:"))
        .map(|v| v.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::policy_from_info;

    #[test]
    fn the_policy_is_read_from_info_memory() {
        let info = "# Memory\r\nused_memory:1\r\nmaxmemory_policy:allkeys-lru\r\nmem_fragmentation_ratio:1\r\n";
        assert_eq!(policy_from_info(info).as_deref(), Some("allkeys-lru"));
        assert_eq!(policy_from_info("# Memory\r\n"), None);
    }
}
