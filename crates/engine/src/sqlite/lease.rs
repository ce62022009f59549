//! Group commit for `lease`: concurrent lease calls are served together by one task, in one
//! `BEGIN IMMEDIATE` transaction and a few statements per queue whatever the number of callers.
//!
//! Per queue and run of callers with the same worker identity, one `UPDATE … WHERE seq IN
//! (SELECT … LIMIT n)` moves the due jobs that those callers together may take (oldest first:
//! `not_before_ms`, then enqueue order) to `running` under that identity; they are handed out
//! in call order (each caller up to its `max`). The new attempt is recorded in the job's row
//! (schema v2), so no `job_attempts` row is written.

use sqlx::sqlite::SqliteRow;
use sqlx::{Sqlite, SqlitePool, Transaction};
use tokio::sync::{mpsc, oneshot};

use super::rows::{attach_history, leased_job_columns, leased_job_from_row};
use crate::error::EngineError;
use crate::job::{Job, LeasedJob, WorkerIdentity, now_ms};

/// Most lease calls served in one transaction.
const MAX_BATCH: usize = 256;

/// One pending lease call.
pub(super) struct LeaseRequest {
    pub(super) queue: String,
    pub(super) worker: WorkerIdentity,
    pub(super) max: usize,
    pub(super) reply: oneshot::Sender<Result<Vec<LeasedJob>, EngineError>>,
}

/// Starts the lease task; it ends when the returned sender (and its clones) are dropped.
pub(super) fn spawn(
    writer: SqlitePool,
    path: std::path::PathBuf,
) -> mpsc::UnboundedSender<LeaseRequest> {
    let (tx, mut rx) = mpsc::unbounded_channel::<LeaseRequest>();
    tokio::spawn(async move {
        while let Some(first) = rx.recv().await {
            let mut batch = vec![first];
            while batch.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(r) => batch.push(r),
                    Err(_) => break,
                }
            }
            // Callers that gave up (dropped their future) take nothing.
            batch.retain(|r| !r.reply.is_closed());
            if batch.is_empty() {
                continue;
            }
            match apply(&writer, &batch).await {
                Ok(mut per_request) => {
                    for (i, req) in batch.into_iter().enumerate() {
                        let _ = req.reply.send(Ok(std::mem::take(&mut per_request[i])));
                    }
                }
                Err(message) => {
                    for req in batch {
                        let _ = req.reply.send(Err(EngineError::sqlite(format!(
                            "lease from queue `{}`: {message} (queue file `{}`)",
                            req.queue,
                            path.display()
                        ))));
                    }
                }
            }
        }
    });
    tx
}

/// Serves every request of `batch` in one transaction; one job list per request, in order.
async fn apply(writer: &SqlitePool, batch: &[LeaseRequest]) -> Result<Vec<Vec<LeasedJob>>, String> {
    let mut tx = super::begin_immediate(writer)
        .await
        .map_err(|e| format!("begin: {e}"))?;
    let now = now_ms();
    let mut out: Vec<Vec<LeasedJob>> = (0..batch.len()).map(|_| Vec::new()).collect();
    let mut queues: Vec<&str> = batch.iter().map(|r| r.queue.as_str()).collect();
    queues.sort_unstable();
    queues.dedup();
    for queue in queues {
        let requests: Vec<usize> = (0..batch.len())
            .filter(|&i| batch[i].queue == queue)
            .collect();
        let wants: Vec<(&WorkerIdentity, usize)> = requests
            .iter()
            .map(|&i| (&batch[i].worker, batch[i].max))
            .collect();
        let leased = lease_queue(&mut tx, queue, &wants, now).await?;
        for (i, jobs) in requests.into_iter().zip(leased) {
            out[i] = jobs;
        }
    }
    tx.commit().await.map_err(|e| format!("commit: {e}"))?;
    Ok(out)
}

/// Leases from one queue for each (worker, max) of `wants`, in order, inside `tx`; one job
/// list per want.
///
/// One statement per run of consecutive wants with the same worker identity (usually one per
/// batch: the finishing slots of one worker) selects the run's due jobs and leases them.
pub(super) async fn lease_queue(
    tx: &mut Transaction<'static, Sqlite>,
    queue: &str,
    wants: &[(&WorkerIdentity, usize)],
    now: i64,
) -> Result<Vec<Vec<LeasedJob>>, String> {
    let mut out: Vec<Vec<LeasedJob>> = (0..wants.len()).map(|_| Vec::new()).collect();
    let mut start = 0;
    while start < wants.len() {
        let worker = wants[start].0;
        let end = (start..wants.len())
            .find(|&i| wants[i].0 != worker)
            .unwrap_or(wants.len());
        let total: usize = wants[start..end]
            .iter()
            .map(|&(_, max)| max)
            .fold(0, usize::saturating_add);
        let (jobs, taken) = lease_for(tx, queue, worker, total, now).await?;
        let exhausted = taken < total;
        // Oldest first, handed out in call order (each want up to its max).
        let mut jobs = jobs.into_iter();
        for (i, &(_, max)) in wants.iter().enumerate().take(end).skip(start) {
            out[i].extend(jobs.by_ref().take(max));
        }
        if exhausted {
            break;
        }
        start = end;
    }
    Ok(out)
}

/// What [`lease_statement`] reads its values from: SQL expressions (parameters such as `?2`,
/// or expressions over them), each evaluated once per statement.
pub(super) struct LeaseParams {
    /// The time (ms).
    pub(super) now: String,
    /// The queue to lease from.
    pub(super) queue: String,
    /// Most jobs to lease.
    pub(super) limit: String,
    /// The lessee's worker id, host and pid.
    pub(super) worker: String,
    pub(super) host: String,
    pub(super) pid: String,
    /// When set, every returned row ends with this number (one more column).
    pub(super) tag: Option<usize>,
    /// Lease only jobs that never ran: the statement fails (an error, the script stops) when
    /// one of the jobs it would lease had an earlier attempt, whose history the caller would
    /// have to read in the same transaction.
    pub(super) first_attempts_only: bool,
}

/// The statement that leases up to `limit` due jobs of a queue for one worker, oldest first
/// (`not_before_ms`, then enqueue order), returning [`leased_job_columns`] (then the tag).
///
/// `LIMIT (…) + 0`, not `LIMIT ?n`: a bare parameter makes SQLite re-prepare the statement at
/// every execution (see the module docs of `sqlite`). The superseded attempt of a re-leased
/// job moves to `job_attempts` (trigger `jobs_attempt_superseded`); the new one lives in the row.
pub(super) fn lease_statement(p: LeaseParams) -> String {
    let LeaseParams {
        now,
        queue,
        limit,
        worker,
        host,
        pid,
        tag,
        first_attempts_only,
    } = p;
    let tag = tag.map(|t| format!(", {t}")).unwrap_or_default();
    // `json()` of a text that is not JSON raises an error; of NULL it is NULL (the argument
    // depends on the row, so SQLite cannot evaluate it once up front).
    let recovery_available = if first_attempts_only {
        "coalesce(json(CASE WHEN fencing_token > 0 THEN 'leased before' END), 0)"
    } else {
        "0"
    };
    format!(
        "UPDATE jobs SET state = 'running', attempts = attempts + 1, attempt_no = attempts + 1, \
         fencing_token = fencing_token + 1, owner_worker = {worker}, owner_host = {host}, \
         owner_pid = {pid}, acquired_at_ms = {now}, heartbeat_at_ms = {now}, \
         stale_deadline_ms = {now} + stale_after_ms, updated_at_ms = {now}, \
         recovery_available = {recovery_available}, attempt_ended_at_ms = NULL, attempt_result = NULL, \
         attempt_retry_delay_ms = NULL \
         WHERE seq IN (SELECT seq FROM jobs WHERE queue = {queue} AND state = 'queued' \
                       AND not_before_ms <= {now} ORDER BY not_before_ms, seq LIMIT {limit} + 0) \
         RETURNING {}{tag}",
        leased_job_columns!()
    )
}

/// Decodes a row returned by [`lease_statement`] into a job leased by `worker` at `now` (and
/// its `seq`). A row that cannot be decoded (a corrupt spec or outcome) is logged and skipped:
/// the job stays leased to `worker`, which never runs it, so the reaper recovers it after its
/// `stale_after` and its attempts bound how often that repeats (a failed decode does not fail
/// the other leases and finishes of its round, which would keep a corrupt job in front of its
/// queue forever). The Redis backend does the same.
pub(super) fn decode_leased(
    row: &SqliteRow,
    worker: &WorkerIdentity,
    now: i64,
) -> Option<(Job, i64)> {
    match leased_job_from_row(row, worker, now) {
        Ok(job) => Some(job),
        Err(e) => {
            tracing::warn!(error = %e, "a leased job could not be decoded; the reaper will recover it");
            None
        }
    }
}

/// The lease statement of [`lease_for`] (binds: now, queue, limit, worker, host, pid), built once;
/// the query-plan test of `sqlite/list.rs` checks this very statement.
pub(crate) static LEASE_STATEMENT: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    lease_statement(LeaseParams {
        now: "?1".into(),
        queue: "?2".into(),
        limit: "?3".into(),
        worker: "?4".into(),
        host: "?5".into(),
        pid: "?6".into(),
        tag: None,
        first_attempts_only: false,
    })
});

/// Leases up to `max` due jobs of `queue` for `worker` inside `tx` (one statement, plus one
/// history read when a re-leased job has earlier attempts), oldest first. Also returns how many
/// jobs the statement leased (undecodable ones included: see [`decode_leased`]).
async fn lease_for(
    tx: &mut Transaction<'static, Sqlite>,
    queue: &str,
    worker: &WorkerIdentity,
    max: usize,
    now: i64,
) -> Result<(Vec<LeasedJob>, usize), String> {
    if max == 0 {
        return Ok((Vec::new(), 0));
    }
    let rows = sqlx::query(LEASE_STATEMENT.as_str())
        .bind(now)
        .bind(queue)
        .bind(i64::try_from(max).unwrap_or(i64::MAX))
        .bind(&worker.worker_id)
        .bind(&worker.host)
        .bind(i64::from(worker.pid))
        .fetch_all(&mut **tx)
        .await
        .map_err(|e| format!("lease due jobs: {e}"))?;
    let mut jobs: Vec<(Job, i64)> = rows
        .iter()
        .filter_map(|row| decode_leased(row, worker, now))
        .collect();
    // A first lease's only attempt is the one in the row; others may have earlier ones.
    let mut with_history: Vec<&mut Job> = jobs
        .iter_mut()
        .filter(|(job, _)| job.fencing_token > 1)
        .map(|(job, _)| job)
        .collect();
    attach_history(tx, &mut with_history)
        .await
        .map_err(|e| e.to_string())?;
    // RETURNING order is unspecified: restore lease order.
    jobs.sort_by_key(|(job, seq)| (job.not_before_ms, *seq));
    Ok((
        jobs.into_iter()
            .map(|(job, _)| LeasedJob {
                fencing_token: job.fencing_token,
                job,
            })
            .collect(),
        rows.len(),
    ))
}
