//! Pruning on the embedded queue (schema v3, `migrations/0003_retention.sql`): finished jobs out
//! of their retention are deleted in short `BEGIN IMMEDIATE` transactions, each leaving a row
//! in `pruned_jobs` (the tombstone).
//!
//! Prunable jobs are found through two partial indexes over `updated_at_ms` (a terminal job's
//! finish time; nothing writes a terminal job's row again until `jobs retry`), holding only
//! terminal jobs whose result is acknowledged (`result_pending = 0`): a job enters its index once,
//! at the ack. A bound (age and/or count) is turned into one boundary (`updated_at_ms`, `seq`),
//! and a batch deletes the oldest index entries up to it: O(batch) whatever the number of
//! retained jobs. Deleting a job cascades to its `job_attempts` rows; its `job_specs` row is
//! deleted by `seq`.

use sqlx::{Row, Sqlite, Transaction};

use super::SqliteBackend;
use super::key::Key;
use crate::error::EngineError;
use crate::job::now_ms;
use crate::retention::{Bound, PruneBatch, PruneRule, RetainClass, Tombstone};

/// The `WHERE` terms of a class's partial index (must match `0003_retention.sql` exactly, or
/// SQLite cannot use the index).
fn prunable(class: RetainClass) -> &'static str {
    match class {
        RetainClass::Succeeded => "result_pending = 0 AND state = 'succeeded'",
        RetainClass::Failed => "result_pending = 0 AND state IN ('failed', 'dead', 'cancelled')",
    }
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The inclusive boundary (time, tie-break) of the entries `bound` selects: the later of the
/// age boundary (`before_ms` − 1, any tie-break) and the count boundary (`newest_excluded`: the
/// newest entry beyond the `keep_newest` newest, when there is one).
fn boundary<T: Ord + Clone>(
    bound: &Bound,
    newest_excluded: Option<(i64, T)>,
    any: T,
) -> Option<(i64, T)> {
    let by_age = bound.before_ms.map(|b| (b.saturating_sub(1), any));
    match (by_age, newest_excluded) {
        (Some(a), Some(c)) => Some(a.max(c)),
        (a, c) => a.or(c),
    }
}

impl SqliteBackend {
    /// [`crate::backend::QueueRetention::prune`] on this backend.
    pub(super) async fn prune_batch(
        &self,
        rule: &PruneRule,
        limit: usize,
    ) -> Result<PruneBatch, EngineError> {
        let what = format!("prune {} jobs", rule.class.as_str());
        let mut tx = self.begin(&what).await?;
        let now = now_ms();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let jobs = self.prune_jobs(&mut tx, rule, limit, now, &what).await?;
        let tombstones = self.prune_tombstones(&mut tx, rule, limit, &what).await?;
        tx.commit()
            .await
            .map_err(self.db(format!("{what}: commit")))?;
        Ok(PruneBatch {
            jobs,
            tombstones,
            more: to_i64(jobs) >= limit || to_i64(tombstones) >= limit,
        })
    }

    /// Deletes up to `limit` prunable jobs selected by `rule.jobs`, writing their tombstones.
    async fn prune_jobs(
        &self,
        tx: &mut Transaction<'static, Sqlite>,
        rule: &PruneRule,
        limit: i64,
        now: i64,
        what: &str,
    ) -> Result<u64, EngineError> {
        let Some((until_ms, until_seq)) =
            self.job_boundary(tx, rule.class, &rule.jobs, what).await?
        else {
            return Ok(0);
        };
        let cond = prunable(rule.class);
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DELETE FROM jobs WHERE seq IN (SELECT seq FROM jobs WHERE {cond} \
             AND (updated_at_ms, seq) <= (?1, ?2) ORDER BY updated_at_ms, seq LIMIT ?3 + 0) \
             RETURNING seq, id, state, idempotency_key, updated_at_ms"
        )))
        .bind(until_ms)
        .bind(until_seq)
        .bind(limit)
        .fetch_all(&mut **tx)
        .await
        .map_err(self.db(what))?;
        let succeeded = rule.class == RetainClass::Succeeded;
        for row in &rows {
            let seq: i64 = row.try_get("seq").map_err(self.db(what))?;
            sqlx::query("DELETE FROM job_specs WHERE seq = ?1")
                .bind(seq)
                .execute(&mut **tx)
                .await
                .map_err(self.db(what))?;
            // Its live output (schema v4) goes with it.
            let key: Key = row.try_get("id").map_err(self.db(what))?;
            sqlx::query("DELETE FROM job_output WHERE job_id = ?1")
                .bind(&key)
                .execute(&mut **tx)
                .await
                .map_err(self.db(what))?;
            sqlx::query(
                "INSERT OR REPLACE INTO pruned_jobs (id, succeeded, state, idempotency_key, finished_at_ms, pruned_at_ms) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )
            .bind(key)
            .bind(succeeded)
            .bind(row.try_get::<String, _>("state").map_err(self.db(what))?)
            .bind(row.try_get::<Option<String>, _>("idempotency_key").map_err(self.db(what))?)
            .bind(row.try_get::<i64, _>("updated_at_ms").map_err(self.db(what))?)
            .bind(now)
            .execute(&mut **tx)
            .await
            .map_err(self.db(what))?;
        }
        Ok(rows.len() as u64)
    }

    /// The inclusive (`updated_at_ms`, `seq`) boundary of the jobs `bound` selects in `class`.
    async fn job_boundary(
        &self,
        tx: &mut Transaction<'static, Sqlite>,
        class: RetainClass,
        bound: &Bound,
        what: &str,
    ) -> Result<Option<(i64, i64)>, EngineError> {
        let newest_excluded = match bound.keep_newest {
            None => None,
            Some(n) => sqlx::query_as::<_, (i64, i64)>(sqlx::AssertSqlSafe(format!(
                "SELECT updated_at_ms, seq FROM jobs WHERE {} ORDER BY updated_at_ms DESC, seq DESC \
                 LIMIT 1 OFFSET ?1 + 0",
                prunable(class)
            )))
            .bind(to_i64(n))
            .fetch_optional(&mut **tx)
            .await
            .map_err(self.db(what))?,
        };
        Ok(boundary(bound, newest_excluded, i64::MAX))
    }

    /// Deletes up to `limit` tombstones of `rule.class` selected by `rule.tombstones`.
    async fn prune_tombstones(
        &self,
        tx: &mut Transaction<'static, Sqlite>,
        rule: &PruneRule,
        limit: i64,
        what: &str,
    ) -> Result<u64, EngineError> {
        let succeeded = rule.class == RetainClass::Succeeded;
        let newest_excluded = match rule.tombstones.keep_newest {
            None => None,
            Some(n) => sqlx::query_as::<_, (i64, Key)>(
                "SELECT pruned_at_ms, id FROM pruned_jobs WHERE succeeded = ?1 \
                 ORDER BY pruned_at_ms DESC, id DESC LIMIT 1 OFFSET ?2 + 0",
            )
            .bind(succeeded)
            .bind(to_i64(n))
            .fetch_optional(&mut **tx)
            .await
            .map_err(self.db(what))?,
        };
        let Some((until_ms, until_id)) =
            boundary(&rule.tombstones, newest_excluded, Key::after_all())
        else {
            return Ok(0);
        };
        let done = sqlx::query(
            "DELETE FROM pruned_jobs WHERE id IN (SELECT id FROM pruned_jobs WHERE succeeded = ?1 \
             AND (pruned_at_ms, id) <= (?2, ?3) ORDER BY pruned_at_ms, id LIMIT ?4 + 0)",
        )
        .bind(succeeded)
        .bind(until_ms)
        .bind(until_id)
        .bind(limit)
        .execute(&mut **tx)
        .await
        .map_err(self.db(what))?;
        Ok(done.rows_affected())
    }

    /// [`crate::backend::QueueRetention::prune_count`] on this backend (one read transaction).
    pub(super) async fn prune_count_now(
        &self,
        rule: &PruneRule,
    ) -> Result<(u64, u64), EngineError> {
        let what = format!("count prunable {} jobs", rule.class.as_str());
        let mut tx = self.inner.reader.begin().await.map_err(self.db(&what))?;
        let count = |sql: String| sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql));
        let cond = prunable(rule.class);
        let mut jobs = 0;
        if let Some(before) = rule.jobs.before_ms {
            jobs = count(format!(
                "SELECT COUNT(*) FROM jobs WHERE {cond} AND updated_at_ms < ?1"
            ))
            .bind(before)
            .fetch_one(&mut *tx)
            .await
            .map_err(self.db(&what))?;
        }
        if let Some(n) = rule.jobs.keep_newest {
            let total = count(format!("SELECT COUNT(*) FROM jobs WHERE {cond}"))
                .fetch_one(&mut *tx)
                .await
                .map_err(self.db(&what))?;
            jobs = jobs.max(total - to_i64(n));
        }
        let succeeded = rule.class == RetainClass::Succeeded;
        let mut tombstones = 0;
        if let Some(before) = rule.tombstones.before_ms {
            tombstones = count(
                "SELECT COUNT(*) FROM pruned_jobs WHERE succeeded = ?1 AND pruned_at_ms < ?2"
                    .into(),
            )
            .bind(succeeded)
            .bind(before)
            .fetch_one(&mut *tx)
            .await
            .map_err(self.db(&what))?;
        }
        if let Some(n) = rule.tombstones.keep_newest {
            let total = count("SELECT COUNT(*) FROM pruned_jobs WHERE succeeded = ?1".into())
                .bind(succeeded)
                .fetch_one(&mut *tx)
                .await
                .map_err(self.db(&what))?;
            tombstones = tombstones.max(total - to_i64(n));
        }
        Ok((jobs.max(0) as u64, tombstones.max(0) as u64))
    }

    /// [`crate::backend::QueueRetention::tombstone`] on this backend.
    pub(super) async fn tombstone_of(
        &self,
        job_id: &str,
    ) -> Result<Option<Tombstone>, EngineError> {
        let what = format!("read the tombstone of job `{job_id}`");
        let row = sqlx::query(
            "SELECT state, idempotency_key, finished_at_ms, pruned_at_ms FROM pruned_jobs WHERE id = ?1",
        )
        .bind(Key::of(job_id))
        .fetch_optional(&self.inner.reader)
        .await
        .map_err(self.db(&what))?;
        let Some(row) = row else { return Ok(None) };
        let state: String = row.try_get("state").map_err(self.db(&what))?;
        Ok(Some(Tombstone {
            job_id: job_id.to_owned(),
            state: state.parse().map_err(|e: String| EngineError::Corrupt {
                job_id: job_id.to_owned(),
                message: e,
            })?,
            finished_at_ms: row.try_get("finished_at_ms").map_err(self.db(&what))?,
            pruned_at_ms: row.try_get("pruned_at_ms").map_err(self.db(&what))?,
            idempotency_key: row.try_get("idempotency_key").map_err(self.db(&what))?,
        }))
    }

    /// The pruned job that holds idempotency key `key` (inside the enqueue transaction `tx`).
    pub(super) async fn pruned_with_key(
        &self,
        tx: &mut Transaction<'static, Sqlite>,
        key: &str,
        what: &str,
    ) -> Result<Option<String>, EngineError> {
        let id: Option<Key> =
            sqlx::query_scalar("SELECT id FROM pruned_jobs WHERE idempotency_key = ?1")
                .bind(key)
                .fetch_optional(&mut **tx)
                .await
                .map_err(self.db(format!(
                    "{what}: look up pruned jobs with idempotency key `{key}`"
                )))?;
        Ok(id.map(Key::into_id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_later_boundary_wins() {
        let bound = Bound {
            before_ms: Some(100),
            keep_newest: Some(3),
        };
        assert_eq!(boundary(&bound, Some((150, 7)), i64::MAX), Some((150, 7)));
        assert_eq!(
            boundary(&bound, Some((50, 7)), i64::MAX),
            Some((99, i64::MAX))
        );
        assert_eq!(boundary(&bound, None, i64::MAX), Some((99, i64::MAX)));
        assert_eq!(
            boundary(
                &Bound {
                    before_ms: None,
                    keep_newest: Some(3)
                },
                None,
                0
            ),
            None
        );
    }
}
