//! Submitted jobs: the control plane's outbox of enqueued work whose result is not applied yet.
//!
//! A row is written right after a job is enqueued ([`record_submitted`]) and deleted in the
//! transaction that applies the job's first result ([`crate::applied::record_applied`]), so the
//! table holds only pending work and stays as small as the backlog. When a queue loses its data
//! (issue 12 item 6: a Redis namespace emptied), [`pending`] is what the store expected the
//! queue to still hold, and `serve` names the jobs among them the queue no longer has.

use sqlx::SqlitePool;

use crate::StoreError;
use crate::templates::now_rfc3339;

/// One enqueued job whose result the store has not applied.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Submitted {
    /// The queue's job id.
    pub job_id: String,
    /// Workflow family of the job's spec.
    pub workflow: String,
    /// Stage of the job's spec.
    pub stage: String,
    /// The spec's idempotency key, if any.
    pub idempotency_key: Option<String>,
    /// RFC 3339 time it was recorded.
    pub submitted_at: String,
}

/// Records that job `job_id` (workflow, stage, key) was enqueued and awaits its result. A job
/// already recorded (a re-submit of an idempotency key returning the same job) or already
/// applied (its result raced ahead of this record) is left as it is.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn record_submitted(
    pool: &SqlitePool,
    job_id: &str,
    workflow: &str,
    stage: &str,
    idempotency_key: Option<&str>,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO submitted_jobs (job_id, workflow, stage, idempotency_key, submitted_at)
         SELECT ?, ?, ?, ?, ?
         WHERE NOT EXISTS (SELECT 1 FROM applied_results WHERE job_id = ?)
         ON CONFLICT (job_id) DO NOTHING",
    )
    .bind(job_id)
    .bind(workflow)
    .bind(stage)
    .bind(idempotency_key)
    .bind(now_rfc3339())
    .bind(job_id)
    .execute(pool)
    .await?;
    Ok(())
}

/// Up to `limit` pending jobs, oldest first, and how many there are in all.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn pending(pool: &SqlitePool, limit: u32) -> Result<(Vec<Submitted>, u64), StoreError> {
    let rows = sqlx::query_as::<_, Submitted>(
        "SELECT job_id, workflow, stage, idempotency_key, submitted_at FROM submitted_jobs
         ORDER BY submitted_at, job_id LIMIT ?",
    )
    .bind(limit)
    .fetch_all(pool)
    .await?;
    let (total,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM submitted_jobs")
        .fetch_one(pool)
        .await?;
    Ok((rows, u64::try_from(total).unwrap_or(0)))
}

/// Records the spec `job_id` was enqueued with (JSON of the engine's `JobSpec`), so lost work
/// can be enqueued again ([`spec_of`]): nothing for a job not (or no longer) pending. A job with
/// recorded output dirs ([`crate::deliveries`], recorded first) also keeps its spec for good
/// ([`recorded_spec`]; the first record wins: a re-submit returning the same job does not
/// replace the spec it was created with).
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn record_spec(
    pool: &SqlitePool,
    job_id: &str,
    spec_json: &str,
) -> Result<(), StoreError> {
    let mut tx = pool.begin().await?;
    sqlx::query("UPDATE submitted_jobs SET spec_json = ? WHERE job_id = ?")
        .bind(spec_json)
        .bind(job_id)
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "INSERT INTO recorded_specs (job_id, spec_json, recorded_at)
         SELECT ?, ?, ? WHERE EXISTS (SELECT 1 FROM job_deliveries WHERE job_id = ?)
         ON CONFLICT (job_id) DO NOTHING",
    )
    .bind(job_id)
    .bind(spec_json)
    .bind(now_rfc3339())
    .bind(job_id)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

/// The spec job `job_id` (one with output dirs) was created with, as the control plane recorded
/// it ([`record_spec`]), whether or not its result was applied since; `None` for a job without
/// output dirs, or recorded by an older build. Read in the ingestion transaction.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn recorded_spec(
    conn: &mut sqlx::SqliteConnection,
    job_id: &str,
) -> Result<Option<String>, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT spec_json FROM recorded_specs WHERE job_id = ?")
            .bind(job_id)
            .fetch_optional(&mut *conn)
            .await?,
    )
}

/// The spec recorded for pending job `job_id` ([`record_spec`]); `None` when the job is not
/// pending or was recorded without one (by an older build).
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn spec_of(pool: &SqlitePool, job_id: &str) -> Result<Option<String>, StoreError> {
    let spec: Option<Option<String>> =
        sqlx::query_scalar("SELECT spec_json FROM submitted_jobs WHERE job_id = ?")
            .bind(job_id)
            .fetch_optional(pool)
            .await?;
    Ok(spec.flatten())
}

/// Forgets `job_id`'s record without applying anything (the job was found missing from the
/// queue and reported, or cancelled before it ran and applied elsewhere).
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn forget(pool: &SqlitePool, job_id: &str) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM submitted_jobs WHERE job_id = ?")
        .bind(job_id)
        .execute(pool)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Store;
    use crate::applied::{AppliedResult, record_applied};

    fn applied(job_id: &str) -> AppliedResult {
        AppliedResult {
            job_id: job_id.into(),
            fencing_token: 1,
            workflow: "adhoc".into(),
            stage: "run".into(),
            state: "succeeded".into(),
            idempotency_key: None,
            outcome_json: None,
            applied_at: now_rfc3339(),
        }
    }

    /// A submitted job is pending until its first result is applied, in that transaction; a
    /// record written after the result raced ahead is not written at all.
    #[tokio::test]
    async fn a_job_is_pending_from_submit_until_its_result_is_applied() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).await.unwrap();
        record_submitted(store.pool(), "j1", "adhoc", "run", Some("k"))
            .await
            .unwrap();
        record_submitted(store.pool(), "j2", "train", "optimizer", None)
            .await
            .unwrap();
        record_submitted(store.pool(), "j1", "adhoc", "run", Some("k"))
            .await
            .unwrap();
        let (rows, total) = pending(store.pool(), 10).await.unwrap();
        assert_eq!(total, 2);
        assert_eq!(
            rows.iter().map(|r| r.job_id.as_str()).collect::<Vec<_>>(),
            ["j1", "j2"]
        );
        assert_eq!(rows[0].idempotency_key.as_deref(), Some("k"));

        let mut tx = store.begin().await.unwrap();
        assert!(record_applied(&mut tx, &applied("j1")).await.unwrap());
        tx.commit().await.unwrap();
        let (rows, total) = pending(store.pool(), 10).await.unwrap();
        assert_eq!((rows.len(), total), (1, 1));
        assert_eq!(rows[0].job_id, "j2");

        record_submitted(store.pool(), "j1", "adhoc", "run", Some("k"))
            .await
            .unwrap();
        assert_eq!(
            pending(store.pool(), 10).await.unwrap().1,
            1,
            "an applied job is never pending again"
        );
        forget(store.pool(), "j2").await.unwrap();
        assert_eq!(pending(store.pool(), 10).await.unwrap().1, 0);
    }

    /// A job with output dirs keeps the spec it was created with after its result is applied
    /// (the first record wins); a job without output dirs keeps none beyond its pending record.
    #[tokio::test]
    async fn a_job_with_outputs_keeps_its_first_spec_for_good() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).await.unwrap();
        let delivery = crate::deliveries::Delivery {
            dir: "out".into(),
            deliver_to: dir.path().join("eval/s1/out"),
        };
        crate::deliveries::record_deliveries(store.pool(), "j1", &[delivery])
            .await
            .unwrap();
        for job in ["j1", "j2"] {
            record_submitted(store.pool(), job, "evalloop", "arm", None)
                .await
                .unwrap();
            record_spec(store.pool(), job, "{\"first\":1}")
                .await
                .unwrap();
            record_spec(store.pool(), job, "{\"second\":1}")
                .await
                .unwrap();
        }
        let mut tx = store.begin().await.unwrap();
        assert!(record_applied(&mut tx, &applied("j1")).await.unwrap());
        assert!(record_applied(&mut tx, &applied("j2")).await.unwrap());
        assert_eq!(
            recorded_spec(&mut tx, "j1").await.unwrap().as_deref(),
            Some("{\"first\":1}")
        );
        assert_eq!(
            recorded_spec(&mut tx, "j2").await.unwrap(),
            None,
            "no output dirs, nothing kept"
        );
        tx.commit().await.unwrap();
        assert_eq!(
            spec_of(store.pool(), "j1").await.unwrap(),
            None,
            "no longer pending"
        );
    }

    /// The key lookup of `applied_by_key` uses its index, not a scan of every result.
    #[tokio::test]
    async fn applied_by_key_uses_an_index() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).await.unwrap();
        let plan: Vec<(i64, i64, i64, String)> = sqlx::query_as(
            "EXPLAIN QUERY PLAN SELECT job_id FROM applied_results WHERE idempotency_key = ? AND job_id <> ?
             ORDER BY applied_at LIMIT 1",
        )
        .bind("k")
        .bind("j")
        .fetch_all(store.pool())
        .await
        .unwrap();
        let detail: Vec<&str> = plan.iter().map(|p| p.3.as_str()).collect();
        assert!(
            detail
                .iter()
                .any(|d| d.contains("USING INDEX applied_results_key")),
            "{detail:?}"
        );
    }
}
