//! Group commit for `finish`: concurrent finishes are applied together, in one `BEGIN IMMEDIATE`
//! transaction and one statement whatever the batch size (plus one to read the current tokens
//! of fenced finishes, and the slots' next leases), by a task that owns the queue. When no
//! finish asks for `queued`, that statement returns no rows: its change count shows whether
//! every finish applied, and only when one did not is the transaction started over with the
//! statement returning which rows it updated. The attempt's
//! end is recorded in the job's row (schema v2), not in `job_attempts`.
//!
//! Each finish keeps its own fencing: a row is updated only when its job is still `running`
//! under the finish's token; the others are answered [`FinishReply::Fenced`] with the job's
//! current token. A batch that fails as a whole answers every finish in it with the error.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use sqlx::{Row, SqlitePool};
use tokio::sync::{mpsc, oneshot};

use super::CLEAR_LEASE;
use super::lease::lease_queue;
use super::watch::Wake;
use crate::error::EngineError;
use crate::job::{FinishReply, JobState, LeasedJob, WorkerIdentity, now_ms};

/// What a finish (and optional lease) call gets back.
pub(super) type Reply = Result<(FinishReply, Option<LeasedJob>), EngineError>;

/// Most finishes applied in one transaction.
const MAX_BATCH: usize = 512;

/// One pending finish, already validated and encoded.
pub(super) struct FinishRequest {
    pub(super) job_id: String,
    pub(super) fencing_token: i64,
    pub(super) next: JobState,
    pub(super) retry_delay_ms: i64,
    pub(super) attempt_result: String,
    /// `RunOutcome` as JSON text.
    pub(super) outcome: Option<String>,
    pub(super) error: Option<String>,
    /// Lease one next job from this queue for this worker in the same transaction.
    pub(super) lease: Option<(String, WorkerIdentity)>,
    pub(super) reply: oneshot::Sender<Reply>,
}

/// Starts the finisher task; it ends when the returned sender (and its clones) are dropped.
pub(super) fn spawn(writer: SqlitePool, wake: Arc<Wake>) -> mpsc::UnboundedSender<FinishRequest> {
    let (tx, mut rx) = mpsc::unbounded_channel::<FinishRequest>();
    tokio::spawn(async move {
        while let Some(first) = rx.recv().await {
            let mut batch = crate::backend::collect_batch(&mut rx, first, MAX_BATCH).await;
            for r in &mut batch {
                // A caller that gave up still gets its finish applied, but no job leased for it.
                if r.reply.is_closed() {
                    r.lease = None;
                }
            }
            // A job may appear twice (a duplicate finish); the copy goes in a later round so
            // it sees the first one's effect (and is fenced).
            while !batch.is_empty() {
                let mut seen = HashSet::new();
                let (round, rest): (Vec<_>, Vec<_>) =
                    batch.into_iter().partition(|r| seen.insert(r.job_id.clone()));
                batch = rest;
                match apply(&writer, &round).await {
                    Ok((replies, requeued)) => {
                        if requeued {
                            wake.wake_all();
                        }
                        for (req, reply) in round.into_iter().zip(replies) {
                            let _ = req.reply.send(reply);
                        }
                    }
                    Err(message) => {
                        for req in round {
                            let _ = req.reply.send(Err(EngineError::sqlite(format!(
                                "finish job `{}`: {message}",
                                req.job_id
                            ))));
                        }
                    }
                }
            }
        }
    });
    tx
}

type Replies = (Vec<Reply>, bool);

/// One finish as an element of the JSON array the batch statement reads with `json_each`: a
/// JSON array (read by position, `value ->> n`; shorter to write and to look into than an
/// object) of job id, fencing token, requested next state, retry delay (ms), `RunOutcome` JSON
/// text, error and attempt result label.
type FinishItem<'a> = (&'a str, i64, &'a str, i64, Option<&'a str>, Option<&'a str>, &'a str);

/// Applies one round (distinct job ids). Returns one reply per request, in order, and whether
/// a job went back to `queued`; or the error text when the transaction failed.
async fn apply(writer: &SqlitePool, round: &[FinishRequest]) -> Result<Replies, String> {
    let now = now_ms();
    let items: Vec<FinishItem<'_>> = round
        .iter()
        .map(|r| {
            (
                r.job_id.as_str(),
                r.fencing_token,
                r.next.as_str(),
                r.retry_delay_ms,
                r.outcome.as_deref(),
                r.error.as_deref(),
                r.attempt_result.as_str(),
            )
        })
        .collect();
    let items = serde_json::to_string(&items).map_err(|e| format!("encode finishes: {e}"))?;
    let update = format!(
        "UPDATE jobs SET \
         state = CASE WHEN f.next = 'queued' AND jobs.cancel_requested = 1 THEN 'cancelled' ELSE f.next END, \
         not_before_ms = CASE WHEN f.next = 'queued' THEN ?2 + f.delay ELSE jobs.not_before_ms END, \
         result_pending = CASE WHEN f.next = 'queued' AND jobs.cancel_requested = 0 THEN 0 ELSE 1 END, \
         outcome = f.outcome, error = f.error, updated_at_ms = ?2, {CLEAR_LEASE}, \
         attempt_ended_at_ms = ?2, attempt_result = f.result, \
         attempt_retry_delay_ms = CASE WHEN f.next = 'queued' AND jobs.cancel_requested = 0 \
                                  THEN f.delay END \
         FROM (SELECT value ->> 0 AS id, value ->> 1 AS token, value ->> 2 AS next, \
               value ->> 3 AS delay, value ->> 4 AS outcome, value ->> 5 AS error, \
               value ->> 6 AS result FROM json_each(?1)) AS f \
         WHERE jobs.id = f.id AND jobs.fencing_token = f.token AND +jobs.state = 'running'"
    );
    let mut tx = writer.begin_with("BEGIN IMMEDIATE").await.map_err(|e| format!("begin: {e}"))?;
    let mut applied: HashMap<String, JobState> = HashMap::with_capacity(round.len());
    // Fast path: when no finish asks for `queued` (the only request whose resulting state
    // depends on the row), every applied finish ends in its requested state, so the count of
    // updated rows (ids are distinct) tells whether all applied; no row comes back.
    let mut all_applied = false;
    if round.iter().all(|r| r.next != JobState::Queued) {
        let done = sqlx::query(sqlx::AssertSqlSafe(update.clone()))
            .bind(&items)
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(|e| format!("update jobs: {e}"))?;
        if done.rows_affected() == round.len() as u64 {
            all_applied = true;
            applied.extend(round.iter().map(|r| (r.job_id.clone(), r.next)));
        } else {
            // Some finish was fenced: start over, learning which rows applied.
            tx.rollback().await.map_err(|e| format!("rollback: {e}"))?;
            tx = writer.begin_with("BEGIN IMMEDIATE").await.map_err(|e| format!("begin: {e}"))?;
        }
    }
    if !all_applied {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!("{update} RETURNING jobs.id, jobs.state")))
            .bind(&items)
            .bind(now)
            .fetch_all(&mut *tx)
            .await
            .map_err(|e| format!("update jobs: {e}"))?;
        for row in &rows {
            let id: String = row.try_get(0).map_err(|e| format!("read updated id: {e}"))?;
            let state: String = row.try_get(1).map_err(|e| format!("read updated state: {e}"))?;
            let state: JobState = state.parse()?;
            applied.insert(id, state);
        }
    }
    let requeued = applied.values().any(|s| *s == JobState::Queued);
    let mut current: HashMap<String, i64> = HashMap::new();
    if applied.len() < round.len() {
        let fenced: Vec<&str> = round
            .iter()
            .filter(|r| !applied.contains_key(&r.job_id))
            .map(|r| r.job_id.as_str())
            .collect();
        let fenced = serde_json::to_string(&fenced).map_err(|e| format!("encode ids: {e}"))?;
        let rows = sqlx::query(
            "SELECT id, fencing_token FROM jobs WHERE id IN (SELECT value FROM json_each(?1))",
        )
        .bind(fenced)
        .fetch_all(&mut *tx)
        .await
        .map_err(|e| format!("read current tokens: {e}"))?;
        for row in &rows {
            let id: String = row.try_get(0).map_err(|e| format!("read id: {e}"))?;
            let token: i64 = row.try_get(1).map_err(|e| format!("read token: {e}"))?;
            current.insert(id, token);
        }
    }
    // The finishing slots' next jobs, leased in the same transaction (grouped per queue).
    let mut next: Vec<Option<LeasedJob>> = (0..round.len()).map(|_| None).collect();
    let mut queues: Vec<&str> = round.iter().filter_map(|r| r.lease.as_ref().map(|(q, _)| q.as_str())).collect();
    queues.sort_unstable();
    queues.dedup();
    for queue in queues {
        let items: Vec<usize> =
            (0..round.len()).filter(|&i| round[i].lease.as_ref().is_some_and(|(q, _)| q == queue)).collect();
        let wants: Vec<(&WorkerIdentity, usize)> =
            items.iter().filter_map(|&i| round[i].lease.as_ref().map(|(_, w)| (w, 1))).collect();
        let leased = lease_queue(&mut tx, queue, &wants, now).await?;
        for (i, jobs) in items.into_iter().zip(leased) {
            next[i] = jobs.into_iter().next();
        }
    }
    tx.commit().await.map_err(|e| format!("commit: {e}"))?;
    let replies = round
        .iter()
        .zip(next)
        .map(|(r, next)| match applied.get(&r.job_id) {
            Some(state) => Ok((FinishReply::Applied(*state), next)),
            None => match current.get(&r.job_id) {
                Some(token) => Ok((FinishReply::Fenced { current_token: *token as u64 }, next)),
                None => Err(EngineError::NotFound(r.job_id.clone())),
            },
        })
        .collect();
    Ok((replies, requeued))
}
