//! Applied job results: the exactly-once record written in the same transaction as a result's effects.

use sqlx::SqliteConnection;

use crate::StoreError;

/// One applied result.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct AppliedResult {
    /// The job.
    pub job_id: String,
    /// The fencing token of the lease the result ran under.
    pub fencing_token: i64,
    /// Workflow family.
    pub workflow: String,
    /// Stage.
    pub stage: String,
    /// Terminal job state (`succeeded`, `failed`, `dead`, `cancelled`, `stale`).
    pub state: String,
    /// The job's idempotency key, if any.
    pub idempotency_key: Option<String>,
    /// The runner outcome as JSON, if the job ran.
    pub outcome_json: Option<String>,
    /// RFC 3339 time of application.
    pub applied_at: String,
}

/// Records `result` unless a row for the same (job, fencing token) exists.
///
/// Returns true when recorded now (the caller then applies the result's effects in the same
/// transaction), false when it had already been applied (the caller applies nothing). The job's
/// [`crate::submitted`] record, if any, is deleted in the same transaction.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn record_applied(
    conn: &mut SqliteConnection,
    result: &AppliedResult,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "INSERT INTO applied_results (job_id, fencing_token, workflow, stage, state, idempotency_key, outcome_json, applied_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (job_id, fencing_token) DO NOTHING",
    )
    .bind(&result.job_id)
    .bind(result.fencing_token)
    .bind(&result.workflow)
    .bind(&result.stage)
    .bind(&result.state)
    .bind(&result.idempotency_key)
    .bind(&result.outcome_json)
    .bind(&result.applied_at)
    .execute(&mut *conn)
    .await?;
    // The job is no longer pending work of the control plane (see `submitted`).
    sqlx::query("DELETE FROM submitted_jobs WHERE job_id = ?")
        .bind(&result.job_id)
        .execute(&mut *conn)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// The first applied result carrying idempotency key `key` from a job other than `job_id`, if
/// any. A queue hands out one job per key, so such a row means the queue lost that job (a
/// Redis namespace emptied) and `job_id` is a re-run of work already applied.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn applied_by_key(
    conn: &mut SqliteConnection,
    key: &str,
    job_id: &str,
) -> Result<Option<AppliedResult>, StoreError> {
    Ok(sqlx::query_as::<_, AppliedResult>(
        "SELECT job_id, fencing_token, workflow, stage, state, idempotency_key, outcome_json, applied_at
         FROM applied_results WHERE idempotency_key = ? AND job_id <> ? ORDER BY applied_at LIMIT 1",
    )
    .bind(key)
    .bind(job_id)
    .fetch_optional(conn)
    .await?)
}

/// Every applied result of `job_id`, oldest first.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn applied_for_job(
    pool: &sqlx::SqlitePool,
    job_id: &str,
) -> Result<Vec<AppliedResult>, StoreError> {
    Ok(sqlx::query_as::<_, AppliedResult>(
        "SELECT job_id, fencing_token, workflow, stage, state, idempotency_key, outcome_json, applied_at
         FROM applied_results WHERE job_id = ? ORDER BY applied_at, fencing_token",
    )
    .bind(job_id)
    .fetch_all(pool)
    .await?)
}
