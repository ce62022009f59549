//! Job records of the embedded queue that cannot be decoded (issue 32 item 2), handled as the
//! Redis backend handles its own (`redis/broken.rs`): a spec or outcome that does not parse (a
//! hand edit, a file written by a build with another format).
//!
//! One such row must not stop anything else. Reads that list jobs skip it and report it
//! ([`QueueIntegrity::list_readable`](crate::backend::QueueIntegrity::list_readable)); ingestion
//! quarantines a pending result it cannot read: in one transaction its row's `result_pending`
//! goes from 1 to 2 (neither pending nor acknowledged, so never offered again and never pruned)
//! and `broken_jobs` records why and when; the process that moved it logs it once. `jobs list
//! --state broken` lists the quarantined records; `jobs purge ID` deletes one with every row of
//! its job. A leased row that cannot be decoded is skipped by the lease ([`super::lease`]).

use sqlx::Sqlite;
use sqlx::query::Query;
use sqlx::sqlite::SqliteArguments;

use super::SqliteBackend;
use super::key::{Key, id_of};
use super::rows::{attach_history, job_from_row};
use crate::backend::UnreadableRecord;
use crate::error::EngineError;
use crate::job::{Job, now_ms};

/// `result_pending` of a quarantined job: neither pending (1) nor acknowledged (0).
pub(super) const QUARANTINED: i64 = 2;

impl SqliteBackend {
    /// [`SqliteBackend::read_jobs`] that keeps apart the rows it cannot decode: the jobs read
    /// (with their history) and the unreadable records (`quarantined_at_ms` = `None`). A row
    /// whose very id cannot be read is logged and left out.
    pub(super) async fn read_jobs_lenient(
        &self,
        query: Query<'_, Sqlite, SqliteArguments>,
        what: &str,
    ) -> Result<(Vec<Job>, Vec<UnreadableRecord>), EngineError> {
        let mut conn = self.inner.reader.acquire().await.map_err(self.db(what))?;
        let rows = query.fetch_all(&mut *conn).await.map_err(self.db(what))?;
        let mut jobs = Vec::with_capacity(rows.len());
        let mut unreadable = Vec::new();
        for row in &rows {
            match job_from_row(row) {
                Ok((job, _)) => jobs.push(job),
                Err(e) => match id_of(row, "id") {
                    Ok(job_id) => unreadable.push(UnreadableRecord {
                        job_id,
                        reason: reason_of(e),
                        quarantined_at_ms: None,
                    }),
                    Err(id_error) => {
                        tracing::error!(error = %e, id_error = %id_error, "a job row without a readable id was skipped")
                    }
                },
            }
        }
        let mut refs: Vec<&mut Job> = jobs.iter_mut().collect();
        attach_history(&mut conn, &mut refs).await?;
        Ok((jobs, unreadable))
    }

    /// Quarantines the pending result of `job_id` with `reason` (see the module docs). Returns
    /// whether this call moved it (false: no longer pending, or another process moved it), so
    /// exactly one process logs it.
    pub(super) async fn quarantine_pending(
        &self,
        job_id: &str,
        reason: &str,
    ) -> Result<bool, EngineError> {
        let what = format!("quarantine the unreadable record of job `{job_id}`");
        let mut tx = self.begin(&what).await?;
        let moved =
            sqlx::query("UPDATE jobs SET result_pending = ?2 WHERE id = ?1 AND result_pending = 1")
                .bind(Key::of(job_id))
                .bind(QUARANTINED)
                .execute(&mut *tx)
                .await
                .map_err(self.db(&what))?
                .rows_affected();
        if moved == 0 {
            return Ok(false);
        }
        sqlx::query("INSERT OR REPLACE INTO broken_jobs (id, reason, quarantined_at_ms) VALUES (?1, ?2, ?3)")
            .bind(Key::of(job_id))
            .bind(reason)
            .bind(now_ms())
            .execute(&mut *tx)
            .await
            .map_err(self.db(&what))?;
        tx.commit()
            .await
            .map_err(self.db(format!("{what}: commit")))?;
        Ok(true)
    }

    /// The quarantined records, at most `limit`, ordered by job id.
    pub(super) async fn quarantined_records(
        &self,
        limit: usize,
    ) -> Result<Vec<UnreadableRecord>, EngineError> {
        let rows: Vec<(Key, String, i64)> = sqlx::query_as(
            "SELECT id, reason, quarantined_at_ms FROM broken_jobs ORDER BY id LIMIT ?1 + 0",
        )
        .bind(i64::try_from(limit).unwrap_or(i64::MAX))
        .fetch_all(&self.inner.reader)
        .await
        .map_err(self.db("read the quarantined job records"))?;
        let mut records: Vec<UnreadableRecord> = rows
            .into_iter()
            .map(|(id, reason, at)| UnreadableRecord {
                job_id: id.into_id(),
                reason,
                quarantined_at_ms: Some(at),
            })
            .collect();
        records.sort_by(|a, b| a.job_id.cmp(&b.job_id));
        Ok(records)
    }

    /// Deletes quarantined record `job_id` with its spec, attempts and live output. Returns false
    /// when no such record is quarantined (nothing is deleted: a readable job is never purged).
    pub(super) async fn purge_record(&self, job_id: &str) -> Result<bool, EngineError> {
        let what = format!("purge the quarantined record of job `{job_id}`");
        let mut tx = self.begin(&what).await?;
        let quarantined = sqlx::query("DELETE FROM broken_jobs WHERE id = ?1")
            .bind(Key::of(job_id))
            .execute(&mut *tx)
            .await
            .map_err(self.db(&what))?
            .rows_affected();
        if quarantined == 0 {
            return Ok(false);
        }
        let seq: Option<i64> = sqlx::query_scalar("DELETE FROM jobs WHERE id = ?1 RETURNING seq")
            .bind(Key::of(job_id))
            .fetch_optional(&mut *tx)
            .await
            .map_err(self.db(&what))?;
        if let Some(seq) = seq {
            sqlx::query("DELETE FROM job_specs WHERE seq = ?1")
                .bind(seq)
                .execute(&mut *tx)
                .await
                .map_err(self.db(&what))?;
        }
        for table in ["job_attempts", "job_output"] {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "DELETE FROM {table} WHERE job_id = ?1"
            )))
            .bind(Key::of(job_id))
            .execute(&mut *tx)
            .await
            .map_err(self.db(&what))?;
        }
        tx.commit()
            .await
            .map_err(self.db(format!("{what}: commit")))?;
        Ok(true)
    }
}

/// The reason of a decode error, without the `corrupt job record` prefix when it is one.
fn reason_of(e: EngineError) -> String {
    match e {
        EngineError::Corrupt { message, .. } => message,
        other => other.to_string(),
    }
}
