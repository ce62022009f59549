//! Group commit for `lease`: concurrent lease calls are served together by one task, in one
//! `BEGIN IMMEDIATE` transaction and a few statements per queue whatever the number of callers.
//!
//! Per queue, the batch selects the due jobs that all callers together may take (oldest first:
//! `not_before_ms`, then enqueue order), hands them out in call order (each caller up to its
//! `max`), and moves them to `running` with each caller's identity in one `UPDATE … FROM
//! json_each(…)`; the attempt rows are inserted with one more statement.

use std::collections::HashMap;

use sqlx::{Sqlite, SqlitePool, Transaction};
use tokio::sync::{mpsc, oneshot};

use super::rows::{attach_history, job_columns, job_from_row};
use crate::error::EngineError;
use crate::job::{AttemptRecord, Job, LeasedJob, WorkerIdentity, now_ms};

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
pub(super) fn spawn(writer: SqlitePool) -> mpsc::UnboundedSender<LeaseRequest> {
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
                            "lease from queue `{}`: {message}",
                            req.queue
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
    let mut tx = writer.begin_with("BEGIN IMMEDIATE").await.map_err(|e| format!("begin: {e}"))?;
    let now = now_ms();
    let mut out: Vec<Vec<LeasedJob>> = (0..batch.len()).map(|_| Vec::new()).collect();
    let mut queues: Vec<&str> = batch.iter().map(|r| r.queue.as_str()).collect();
    queues.sort_unstable();
    queues.dedup();
    for queue in queues {
        let requests: Vec<usize> = (0..batch.len()).filter(|&i| batch[i].queue == queue).collect();
        let wants: Vec<(&WorkerIdentity, usize)> =
            requests.iter().map(|&i| (&batch[i].worker, batch[i].max)).collect();
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
pub(super) async fn lease_queue(
    tx: &mut Transaction<'static, Sqlite>,
    queue: &str,
    wants: &[(&WorkerIdentity, usize)],
    now: i64,
) -> Result<Vec<Vec<LeasedJob>>, String> {
    let mut out: Vec<Vec<LeasedJob>> = (0..wants.len()).map(|_| Vec::new()).collect();
    let total: usize = wants.iter().map(|&(_, max)| max).fold(0, usize::saturating_add);
    let seqs: Vec<i64> = sqlx::query_scalar(
        "SELECT seq FROM jobs WHERE queue = ?1 AND state = 'queued' AND not_before_ms <= ?2 \
         ORDER BY not_before_ms, seq LIMIT ?3",
    )
    .bind(queue)
    .bind(now)
    .bind(i64::try_from(total).unwrap_or(i64::MAX))
    .fetch_all(&mut **tx)
    .await
    .map_err(|e| format!("select due jobs: {e}"))?;
    if seqs.is_empty() {
        return Ok(out);
    }
    // Hand out in call order; remember which request each seq went to.
    let mut owner_of: HashMap<i64, usize> = HashMap::with_capacity(seqs.len());
    let mut assignments = Vec::with_capacity(seqs.len());
    let mut next = seqs.iter();
    'requests: for (i, &(w, max)) in wants.iter().enumerate() {
        for _ in 0..max {
            let Some(&seq) = next.next() else { break 'requests };
            owner_of.insert(seq, i);
            assignments.push(serde_json::json!({
                "seq": seq, "worker": w.worker_id, "host": w.host, "pid": w.pid,
            }));
        }
    }
    let rows = sqlx::query(concat!(
        "UPDATE jobs SET state = 'running', attempts = attempts + 1, \
         fencing_token = fencing_token + 1, owner_worker = f.worker, owner_host = f.host, \
         owner_pid = f.pid, acquired_at_ms = ?2, heartbeat_at_ms = ?2, \
         stale_deadline_ms = ?2 + stale_after_ms, updated_at_ms = ?2, recovery_available = 0 \
         FROM (SELECT json_extract(value, '$.seq') AS seq, json_extract(value, '$.worker') AS worker, \
               json_extract(value, '$.host') AS host, json_extract(value, '$.pid') AS pid \
               FROM json_each(?1)) AS f \
         WHERE jobs.seq = f.seq AND +jobs.state = 'queued' \
         RETURNING ",
        job_columns!()
    ))
    .bind(serde_json::Value::Array(assignments).to_string())
    .bind(now)
    .fetch_all(&mut **tx)
    .await
    .map_err(|e| format!("update leased jobs: {e}"))?;
    let mut jobs: Vec<(Job, i64)> = Vec::with_capacity(rows.len());
    for row in &rows {
        jobs.push(job_from_row(row).map_err(|e| e.to_string())?);
    }
    let leased_seqs: Vec<i64> = jobs.iter().map(|(_, seq)| *seq).collect();
    sqlx::query(
        "INSERT INTO job_attempts (job_id, attempt, fencing_token, worker, host, pid, started_at_ms) \
         SELECT j.id, j.attempts, j.fencing_token, j.owner_worker, j.owner_host, j.owner_pid, \
         j.acquired_at_ms FROM json_each(?1) AS e JOIN jobs AS j ON j.seq = e.value",
    )
    .bind(serde_json::to_string(&leased_seqs).map_err(|e| format!("encode seqs: {e}"))?)
    .execute(&mut **tx)
    .await
    .map_err(|e| format!("record attempts: {e}"))?;
    // First leases have exactly one attempt, known here; others need their history.
    let mut with_history: Vec<&mut Job> = Vec::new();
    for (job, _) in jobs.iter_mut() {
        match &job.lease {
            Some(lease) if job.fencing_token == 1 => {
                job.history = vec![AttemptRecord {
                    attempt: job.attempts,
                    fencing_token: 1,
                    worker: lease.owner_worker.clone(),
                    host: lease.owner_host.clone(),
                    pid: lease.owner_pid,
                    started_at_ms: now,
                    ended_at_ms: None,
                    result: None,
                    retry_delay_ms: None,
                }];
            }
            _ => with_history.push(job),
        }
    }
    attach_history(tx, &mut with_history).await.map_err(|e| e.to_string())?;
    // RETURNING order is unspecified: restore lease order.
    jobs.sort_by_key(|(job, seq)| (job.not_before_ms, *seq));
    for (job, seq) in jobs {
        if let Some(&i) = owner_of.get(&seq) {
            out[i].push(LeasedJob { fencing_token: job.fencing_token, job });
        }
    }
    Ok(out)
}
