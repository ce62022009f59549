//! Decoding of `jobs`, `job_attempts` and `locks` rows into the engine's types.

use std::collections::HashMap;

use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqliteConnection};

use super::compact::{Doc, decode};
use super::key::{id_of, key_of_text};
use crate::error::EngineError;
use crate::job::{AttemptRecord, Job, JobSpec, JobState, Lease, WorkerIdentity};

/// The `jobs` columns [`job_from_row`] reads (and the spec from `job_specs`), as a SQL select
/// list over `jobs`.
macro_rules! job_columns {
    () => {
        "id, (SELECT spec FROM job_specs WHERE job_specs.seq = jobs.seq) AS spec, state, attempts, \
         fencing_token, owner_worker, owner_host, owner_pid, acquired_at_ms, heartbeat_at_ms, \
         not_before_ms, created_at_ms, updated_at_ms, cancel_requested, recovery_available, outcome, error, seq, attempt_no, \
         attempt_ended_at_ms, attempt_result, attempt_retry_delay_ms"
    };
}
pub(super) use job_columns;

/// The `jobs` columns [`leased_job_from_row`] reads (by position), and the spec from
/// `job_specs`, as a SQL select list over `jobs`: what a lease does not itself set.
macro_rules! leased_job_columns {
    () => {
        "id, (SELECT spec FROM job_specs WHERE job_specs.seq = jobs.seq), attempts, fencing_token, \
         not_before_ms, created_at_ms, cancel_requested, outcome, error, seq"
    };
}
pub(super) use leased_job_columns;
/// How many columns [`leased_job_columns`] selects.
pub(super) const LEASED_COLUMNS: usize = 10;

fn corrupt(job_id: &str, what: impl std::fmt::Display) -> EngineError {
    EngineError::Corrupt {
        job_id: job_id.to_owned(),
        message: what.to_string(),
    }
}

fn col<'r, T>(row: &'r SqliteRow, job_id: &str, name: &str) -> Result<T, EngineError>
where
    T: sqlx::Decode<'r, sqlx::Sqlite> + sqlx::Type<sqlx::Sqlite>,
{
    row.try_get(name)
        .map_err(|e| corrupt(job_id, format!("column `{name}`: {e}")))
}

/// A job row selected with [`job_columns`], and its `seq`. Its `history` holds only the attempt
/// kept in the row (schema v2: the latest one, when `attempt_no` is set);
/// [`attach_history`] adds the earlier ones from `job_attempts`.
pub(super) fn job_from_row(row: &SqliteRow) -> Result<(Job, i64), EngineError> {
    let id: String = id_of(row, "id").map_err(|e| corrupt("?", format!("column `id`: {e}")))?;
    let spec_text: String = col(row, &id, "spec")?;
    let spec: JobSpec =
        decode(Doc::Spec, &spec_text).map_err(|e| corrupt(&id, format!("spec json: {e}")))?;
    let state_text: String = col(row, &id, "state")?;
    let state: JobState = state_text.parse().map_err(|e: String| corrupt(&id, e))?;
    let owner_worker: Option<String> = col(row, &id, "owner_worker")?;
    // The owner columns describe the latest attempt (kept after it ended): a lease only while running.
    let lease = match owner_worker.clone().filter(|_| state == JobState::Running) {
        Some(owner_worker) => Some(Lease {
            owner_worker,
            owner_host: col::<Option<String>>(row, &id, "owner_host")?.unwrap_or_default(),
            owner_pid: col::<Option<i64>>(row, &id, "owner_pid")?.unwrap_or(0) as u32,
            fencing_token: col::<i64>(row, &id, "fencing_token")? as u64,
            acquired_at_ms: col::<Option<i64>>(row, &id, "acquired_at_ms")?.unwrap_or(0),
            heartbeat_at_ms: col::<Option<i64>>(row, &id, "heartbeat_at_ms")?.unwrap_or(0),
        }),
        None => None,
    };
    let outcome = match col::<Option<String>>(row, &id, "outcome")? {
        Some(text) => Some(
            decode(Doc::Outcome, &text).map_err(|e| corrupt(&id, format!("outcome json: {e}")))?,
        ),
        None => None,
    };
    let mut job = Job {
        spec,
        state,
        attempts: col::<i64>(row, &id, "attempts")? as u32,
        fencing_token: col::<i64>(row, &id, "fencing_token")? as u64,
        lease,
        not_before_ms: col(row, &id, "not_before_ms")?,
        created_at_ms: col(row, &id, "created_at_ms")?,
        updated_at_ms: col(row, &id, "updated_at_ms")?,
        cancel_requested: col::<i64>(row, &id, "cancel_requested")? != 0,
        recovery_available: col::<i64>(row, &id, "recovery_available")? != 0,
        outcome,
        error: col(row, &id, "error")?,
        history: Vec::new(),
        id,
    };
    if let (Some(attempt), Some(worker)) = (
        col::<Option<i64>>(row, &job.id, "attempt_no")?,
        owner_worker,
    ) {
        let id = job.id.as_str();
        job.history.push(AttemptRecord {
            attempt: attempt.max(0) as u32,
            fencing_token: job.fencing_token,
            worker,
            host: col::<Option<String>>(row, id, "owner_host")?.unwrap_or_default(),
            pid: col::<Option<i64>>(row, id, "owner_pid")?.unwrap_or(0) as u32,
            started_at_ms: col::<Option<i64>>(row, id, "acquired_at_ms")?.unwrap_or(0),
            ended_at_ms: col(row, id, "attempt_ended_at_ms")?,
            result: col(row, id, "attempt_result")?,
            retry_delay_ms: col::<Option<i64>>(row, id, "attempt_retry_delay_ms")?
                .map(|d| d.max(0) as u64),
        });
    }
    let seq: i64 = col(row, &job.id, "seq")?;
    Ok((job, seq))
}

/// A job just leased by `worker` at `now`, from a row selected (or returned) with
/// [`leased_job_columns`]: state `running`, its lease and its new attempt (the only entry of
/// `history`; [`attach_history`] adds earlier ones). Fewer columns than [`job_from_row`]: the
/// rest is what the lease wrote. Returns the job and its `seq`.
pub(super) fn leased_job_from_row(
    row: &SqliteRow,
    worker: &WorkerIdentity,
    now: i64,
) -> Result<(Job, i64), EngineError> {
    let id: String = id_of(row, 0).map_err(|e| corrupt("?", format!("column `id`: {e}")))?;
    let at =
        |i: usize, name: &str, e: sqlx::Error| corrupt(&id, format!("column `{name}` ({i}): {e}"));
    let spec_text: &str = row.try_get(1).map_err(|e| at(1, "spec", e))?;
    let spec: JobSpec =
        decode(Doc::Spec, spec_text).map_err(|e| corrupt(&id, format!("spec json: {e}")))?;
    let attempts = row
        .try_get::<i64, _>(2)
        .map_err(|e| at(2, "attempts", e))?
        .max(0) as u32;
    let fencing_token = row
        .try_get::<i64, _>(3)
        .map_err(|e| at(3, "fencing_token", e))?
        .max(0) as u64;
    let outcome = match row
        .try_get::<Option<&str>, _>(7)
        .map_err(|e| at(7, "outcome", e))?
    {
        Some(text) => Some(
            decode(Doc::Outcome, text).map_err(|e| corrupt(&id, format!("outcome json: {e}")))?,
        ),
        None => None,
    };
    let job = Job {
        spec,
        state: JobState::Running,
        attempts,
        fencing_token,
        lease: Some(Lease {
            owner_worker: worker.worker_id.clone(),
            owner_host: worker.host.clone(),
            owner_pid: worker.pid,
            fencing_token,
            acquired_at_ms: now,
            heartbeat_at_ms: now,
        }),
        not_before_ms: row.try_get(4).map_err(|e| at(4, "not_before_ms", e))?,
        created_at_ms: row.try_get(5).map_err(|e| at(5, "created_at_ms", e))?,
        updated_at_ms: now,
        cancel_requested: row
            .try_get::<i64, _>(6)
            .map_err(|e| at(6, "cancel_requested", e))?
            != 0,
        recovery_available: false,
        outcome,
        error: row.try_get(8).map_err(|e| at(8, "error", e))?,
        history: vec![AttemptRecord {
            attempt: attempts,
            fencing_token,
            worker: worker.worker_id.clone(),
            host: worker.host.clone(),
            pid: worker.pid,
            started_at_ms: now,
            ended_at_ms: None,
            result: None,
            retry_delay_ms: None,
        }],
        id,
    };
    let seq: i64 = row
        .try_get(9)
        .map_err(|e| corrupt(&job.id, format!("column `seq`: {e}")))?;
    Ok((job, seq))
}

/// One `job_attempts` row.
fn attempt_from_row(row: &SqliteRow, job_id: &str) -> Result<AttemptRecord, EngineError> {
    Ok(AttemptRecord {
        attempt: col::<i64>(row, job_id, "attempt")? as u32,
        fencing_token: col::<i64>(row, job_id, "fencing_token")? as u64,
        worker: col(row, job_id, "worker")?,
        host: col(row, job_id, "host")?,
        pid: col::<i64>(row, job_id, "pid")? as u32,
        started_at_ms: col(row, job_id, "started_at_ms")?,
        ended_at_ms: col(row, job_id, "ended_at_ms")?,
        result: col(row, job_id, "result")?,
        retry_delay_ms: col::<Option<i64>>(row, job_id, "retry_delay_ms")?.map(|d| d.max(0) as u64),
    })
}

/// The `job_attempts` rows of the job ids in the JSON array `?1`.
static HISTORY: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "SELECT job_id, attempt, fencing_token, worker, host, pid, started_at_ms, ended_at_ms, \
         result, retry_delay_ms FROM job_attempts \
         WHERE job_id IN (SELECT {} FROM json_each(?1)) ORDER BY job_id, fencing_token",
        key_of_text("value")
    )
});

/// Completes `history` (oldest first) of every job in `jobs` (as read by [`job_from_row`]) with
/// its `job_attempts` rows, in one query. A row with the fencing token of the attempt kept in
/// the job's row is an older copy of it (written by schema v1) and is skipped.
pub(super) async fn attach_history(
    conn: &mut SqliteConnection,
    jobs: &mut [&mut Job],
) -> Result<(), EngineError> {
    if jobs.is_empty() {
        return Ok(());
    }
    let ids = serde_json::to_string(&jobs.iter().map(|j| j.id.as_str()).collect::<Vec<_>>())
        .map_err(|e| EngineError::sqlite(format!("job history: encode ids: {e}")))?;
    let rows = sqlx::query(HISTORY.as_str())
        .bind(ids)
        .fetch_all(&mut *conn)
        .await
        .map_err(|e| EngineError::sqlite(format!("job history: {e}")))?;
    let mut by_job: HashMap<String, Vec<AttemptRecord>> = HashMap::new();
    for row in &rows {
        let job_id: String = id_of(row, "job_id")
            .map_err(|e| corrupt("?", format!("attempt column `job_id`: {e}")))?;
        let record = attempt_from_row(row, &job_id)?;
        by_job.entry(job_id).or_default().push(record);
    }
    for job in jobs.iter_mut() {
        let mut history = by_job.remove(&job.id).unwrap_or_default();
        if let Some(in_row) = job.history.pop() {
            history.retain(|a| a.fencing_token != in_row.fencing_token);
            history.push(in_row);
        }
        job.history = history;
    }
    Ok(())
}

/// A lease from a `locks` or `jobs` row (`owner_*`, `fencing_token`, `*_at_ms` columns).
pub(super) fn lock_lease_from_row(row: &SqliteRow, name: &str) -> Result<Lease, EngineError> {
    let get_err =
        |c: &str, e: sqlx::Error| EngineError::sqlite(format!("lease `{name}` column `{c}`: {e}"));
    Ok(Lease {
        owner_worker: row
            .try_get::<Option<String>, _>("owner_worker")
            .map_err(|e| get_err("owner_worker", e))?
            .unwrap_or_default(),
        owner_host: row
            .try_get::<Option<String>, _>("owner_host")
            .map_err(|e| get_err("owner_host", e))?
            .unwrap_or_default(),
        owner_pid: row
            .try_get::<Option<i64>, _>("owner_pid")
            .map_err(|e| get_err("owner_pid", e))?
            .unwrap_or(0) as u32,
        fencing_token: row
            .try_get::<i64, _>("fencing_token")
            .map_err(|e| get_err("fencing_token", e))? as u64,
        acquired_at_ms: row
            .try_get::<Option<i64>, _>("acquired_at_ms")
            .map_err(|e| get_err("acquired_at_ms", e))?
            .unwrap_or(0),
        heartbeat_at_ms: row
            .try_get::<Option<i64>, _>("heartbeat_at_ms")
            .map_err(|e| get_err("heartbeat_at_ms", e))?
            .unwrap_or(0),
    })
}
