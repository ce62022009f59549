//! Pruning on the Redis backend: `prune.lua` (one call removes at most `limit` jobs and
//! `limit` tombstones, a few thousand keys) and tombstone reads from the `pruned` hash.
//!
//! An acknowledged terminal job is in the list `done:{class}` (`ack.lua`), in acknowledgement
//! order; both retention bounds select a prefix of that list, so a call costs O(batch) whatever
//! the number of retained jobs. A dry run's count walks the selected prefix in calls of at most
//! 5 000 entries each.

use super::{RETRY_BUDGET, RedisBackend, transient, unexpected};
use crate::error::EngineError;
use crate::retention::{Bound, PruneBatch, PruneRule, Tombstone};
use std::time::Duration;
use tokio::time::Instant;

/// The two script arguments of a bound ('' = no such bound).
fn bound_args(b: &Bound) -> [String; 2] {
    [
        b.before_ms.map(|v| v.to_string()).unwrap_or_default(),
        b.keep_newest.map(|v| v.to_string()).unwrap_or_default(),
    ]
}

impl RedisBackend {
    async fn run_prune(
        &self,
        rule: &PruneRule,
        limit: usize,
        count: Option<(i64, u64)>,
    ) -> Result<Vec<i64>, EngineError> {
        let mut inv = self.scripts.prune.prepare_invoke();
        let [jb, jk] = bound_args(&rule.jobs);
        let [tb, tk] = bound_args(&rule.tombstones);
        inv.arg(&self.prefix)
            .arg(rule.class.as_str())
            .arg(limit)
            .arg(jb)
            .arg(jk)
            .arg(tb)
            .arg(tk)
            .arg(if count.is_some() { "1" } else { "0" });
        if let Some((from, counted)) = count {
            inv.arg(from).arg(counted);
        }
        let what = format!("prune {} jobs", rule.class.as_str());
        with_retry!(self, what, |c| inv.invoke_async(&mut c))
    }

    /// [`crate::backend::QueueRetention::prune`] on this backend.
    pub(super) async fn prune_batch(
        &self,
        rule: &PruneRule,
        limit: usize,
    ) -> Result<PruneBatch, EngineError> {
        match self.run_prune(rule, limit, None).await?.as_slice() {
            &[jobs, tombstones, more] if jobs >= 0 && tombstones >= 0 => Ok(PruneBatch {
                jobs: jobs as u64,
                tombstones: tombstones as u64,
                more: more == 1,
            }),
            other => Err(unexpected(
                "prune",
                &other.iter().map(i64::to_string).collect::<Vec<_>>(),
            )),
        }
    }

    /// [`crate::backend::QueueRetention::prune_count`] on this backend.
    pub(super) async fn prune_count_now(
        &self,
        rule: &PruneRule,
    ) -> Result<(u64, u64), EngineError> {
        let (mut from, mut jobs) = (0i64, 0u64);
        loop {
            match self
                .run_prune(rule, 0, Some((from, jobs)))
                .await?
                .as_slice()
            {
                &[n, tombstones, next] if n >= 0 && tombstones >= 0 => {
                    jobs += n as u64;
                    if next < 0 {
                        return Ok((jobs, tombstones as u64));
                    }
                    from = next;
                }
                other => {
                    return Err(unexpected(
                        "prune",
                        &other.iter().map(i64::to_string).collect::<Vec<_>>(),
                    ));
                }
            }
        }
    }

    /// [`crate::backend::QueueRetention::tombstone`] on this backend.
    pub(super) async fn tombstone_of(
        &self,
        job_id: &str,
    ) -> Result<Option<Tombstone>, EngineError> {
        let mut cmd = ::redis::cmd("HGET");
        cmd.arg(format!("{}pruned", self.prefix))
            .arg(super::id::stored(job_id).as_ref());
        let what = format!("read the tombstone of job `{job_id}`");
        let raw: Option<String> = with_retry!(self, what, |c| cmd.query_async(&mut c))?;
        raw.map(|t| decode_tombstone(job_id, &t)).transpose()
    }
}

/// A `pruned` hash value: `state<TAB>finished_at<TAB>pruned_at<TAB>idem_key`.
fn decode_tombstone(job_id: &str, raw: &str) -> Result<Tombstone, EngineError> {
    let corrupt = || EngineError::Corrupt {
        job_id: job_id.to_owned(),
        message: format!("tombstone `{raw}`"),
    };
    let mut parts = raw.splitn(4, '\t');
    let mut next = || parts.next().ok_or_else(corrupt);
    let state = next()?.parse().map_err(|_| corrupt())?;
    let finished_at_ms = next()?.parse().map_err(|_| corrupt())?;
    let pruned_at_ms = next()?.parse().map_err(|_| corrupt())?;
    let key = next()?;
    Ok(Tombstone {
        job_id: job_id.to_owned(),
        state,
        finished_at_ms,
        pruned_at_ms,
        idempotency_key: (!key.is_empty()).then(|| key.to_owned()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::JobState;

    #[test]
    fn tombstones_decode_with_and_without_a_key() {
        let t = decode_tombstone("j", "dead\t10\t20\tk\twith tab").unwrap();
        assert_eq!(
            (t.state, t.finished_at_ms, t.pruned_at_ms),
            (JobState::Dead, 10, 20)
        );
        assert_eq!(t.idempotency_key.as_deref(), Some("k\twith tab"));
        assert_eq!(
            decode_tombstone("j", "succeeded\t1\t2\t")
                .unwrap()
                .idempotency_key,
            None
        );
        assert!(decode_tombstone("j", "succeeded\t1").is_err());
    }
}
