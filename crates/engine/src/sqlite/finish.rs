//! Group commit for `finish`: concurrent finishes (each optionally leasing its slot's next job)
//! are applied together, in one `BEGIN IMMEDIATE` transaction, by a task that owns the queue.
//! When no finish asks for `queued` (the only request whose resulting state depends on the
//! row), the whole round is one command to the write connection: begin, one finish statement
//! whatever the batch size, a check that every finish applied, one lease statement per queue
//! and worker identity, commit ([`apply_in_one_command`]). A fenced finish (the check fails),
//! a `queued` request or a next job that ran before (its history must be read in the
//! transaction) sends the round down the step-by-step path instead: the finish statement
//! returns which rows it updated, the current tokens of the fenced ones are read, the leases
//! and the histories of re-leased jobs follow, each statement its own command. The attempt's
//! end is recorded in the job's row (schema v2), not in `job_attempts`.
//!
//! Each finish keeps its own fencing: a row is updated only when its job is still `running`
//! under the finish's token; the others are answered [`FinishReply::Fenced`] with the job's
//! current token. A batch that fails as a whole answers every finish in it with the error.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use sqlx::{Row, SqlitePool};
use tokio::sync::{mpsc, oneshot};

use super::CLEAR_LEASE;
use super::key::{id_of, key_of_text};
use super::lease::{LeaseParams, decode_leased, lease_queue, lease_statement};
use super::rows::LEASED_COLUMNS;
use super::watch::Wake;
use crate::error::EngineError;
use crate::job::{FinishReply, Job, JobState, LeasedJob, WorkerIdentity, now_ms};

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
///
/// `script_open` is set while a one-command script runs (see [`apply_in_one_command`]); the
/// write pool's release hook rolls back a script whose future was dropped before it ended.
///
/// `path` (the queue file) is named in every error the task replies with.
pub(super) fn spawn(
    writer: SqlitePool,
    wake: Arc<Wake>,
    script_open: Arc<AtomicBool>,
    path: std::path::PathBuf,
) -> mpsc::UnboundedSender<FinishRequest> {
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
                let (round, rest): (Vec<_>, Vec<_>) = batch
                    .into_iter()
                    .partition(|r| seen.insert(r.job_id.clone()));
                batch = rest;
                match apply(&writer, &round, &script_open).await {
                    Ok((replies, requeued)) => {
                        if requeued {
                            wake.wake_all();
                        } else {
                            wake.jobs_changed();
                        }
                        for (req, reply) in round.into_iter().zip(replies) {
                            let _ = req.reply.send(reply);
                        }
                    }
                    Err(message) => {
                        for req in round {
                            let _ = req.reply.send(Err(EngineError::sqlite(format!(
                                "finish job `{}`: {message} (queue file `{}`)",
                                req.job_id,
                                path.display()
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
type FinishItem<'a> = (
    &'a str,
    i64,
    &'a str,
    i64,
    Option<&'a str>,
    Option<&'a str>,
    &'a str,
);

/// Applies one round (distinct job ids). Returns one reply per request, in order, and whether
/// a job went back to `queued`; or the error text when the transaction failed.
async fn apply(
    writer: &SqlitePool,
    round: &[FinishRequest],
    script_open: &AtomicBool,
) -> Result<Replies, String> {
    let now = now_ms();
    let items = encode(round)?;
    // When no finish asks for `queued` (the only request whose resulting state depends on the
    // row), every applied finish ends in its requested state: the whole round can go to the
    // connection as one command, and only a fenced finish sends it down the longer path.
    if round.iter().all(|r| r.next != JobState::Queued)
        && let Some(replies) = apply_in_one_command(writer, round, &items, now, script_open).await?
    {
        return Ok(replies);
    }
    apply_step_by_step(writer, round, &items, now).await
}

/// The finish items of `round` as the JSON array the batch statement reads.
fn encode(round: &[FinishRequest]) -> Result<String, String> {
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
    serde_json::to_string(&items).map_err(|e| format!("encode finishes: {e}"))
}

/// The statement that applies the finishes of a JSON array of [`FinishItem`]s (`items`: the
/// `json_each` arguments that yield it, e.g. `?1`) at a time (`?2`, ms): each updates its
/// job's row only when the job is still `running` under the item's fencing token.
fn finish_statement(items: &str) -> String {
    let id = key_of_text("(value ->> 0)");
    format!(
        "UPDATE jobs SET \
         state = CASE WHEN f.next = 'queued' AND jobs.cancel_requested = 1 THEN 'cancelled' ELSE f.next END, \
         not_before_ms = CASE WHEN f.next = 'queued' THEN ?2 + f.delay ELSE jobs.not_before_ms END, \
         result_pending = CASE WHEN f.next = 'queued' AND jobs.cancel_requested = 0 THEN 0 ELSE 1 END, \
         outcome = f.outcome, error = f.error, updated_at_ms = ?2, {CLEAR_LEASE}, \
         attempt_ended_at_ms = ?2, attempt_result = f.result, \
         attempt_retry_delay_ms = CASE WHEN f.next = 'queued' AND jobs.cancel_requested = 0 \
                                  THEN f.delay END \
         FROM (SELECT {id} AS id, value ->> 1 AS token, value ->> 2 AS next, \
               value ->> 3 AS delay, value ->> 4 AS outcome, value ->> 5 AS error, \
               value ->> 6 AS result FROM json_each({items})) AS f \
         WHERE jobs.id = f.id AND jobs.fencing_token = f.token AND +jobs.state = 'running'"
    )
}

/// Applies a round in which no finish asks for `queued`, finishes and the slots' next leases,
/// as ONE command to the write connection (one hand-off to its thread and back instead of one
/// per statement, which was most of a batch's cost): `BEGIN IMMEDIATE`, the finish statement,
/// a check that stops the script unless every finish applied (`json()` of a text that is not
/// JSON raises an error, and an error ends the script there), one lease statement per queue
/// and run of requests with the same worker identity (its rows tagged with the run), `COMMIT`.
/// The lease statements stop the script too when they would lease a job that ran before (a
/// retry): its earlier attempts are read in the transaction, on the step-by-step path.
///
/// Parameters: `?1` one JSON document `{"f": [finish items], "r": [[queue, limit, worker id,
/// host, pid] per run]}`, `?2` the time. Every statement of the script uses exactly the
/// parameters `?1` … `?k` for some k: sqlx binds a multi-statement query's numbered parameters
/// from one list, but a number a statement skips counts as a positional parameter and shifts
/// (and at the end cuts off) the binding of the statements after it.
///
/// Returns `Ok(None)` when the script did not run to its end (a fenced finish, a retry to
/// lease, or any other error): the transaction is then rolled back and the caller applies the
/// round step by step, which learns which finishes were fenced and reports errors from the
/// statement that failed. Errs when the rollback itself failed (the connection is then closed,
/// not reused), and when another process held the write lock past the busy timeout (the
/// step-by-step path would only wait as long again); nothing of the round was applied then.
async fn apply_in_one_command(
    writer: &SqlitePool,
    round: &[FinishRequest],
    items: &str,
    now: i64,
    script_open: &AtomicBool,
) -> Result<Option<Replies>, String> {
    // Lease runs: per queue (sorted), consecutive requests with the same identity.
    let mut queues: Vec<&str> = round
        .iter()
        .filter_map(|r| r.lease.as_ref().map(|(q, _)| q.as_str()))
        .collect();
    queues.sort_unstable();
    queues.dedup();
    let mut runs: Vec<(&str, &WorkerIdentity, Vec<usize>)> = Vec::new();
    for queue in queues {
        for (i, r) in round.iter().enumerate() {
            let Some((q, worker)) = r.lease.as_ref().filter(|(q, _)| q == queue) else {
                continue;
            };
            match runs.last_mut() {
                Some((rq, rw, members)) if *rq == q.as_str() && *rw == worker => members.push(i),
                _ => runs.push((q.as_str(), worker, vec![i])),
            }
        }
    }
    let mut script = format!(
        "BEGIN IMMEDIATE; {}; \
         SELECT 1 WHERE json(CASE WHEN changes() = json_array_length(?1, '$.f') THEN '0' \
                                  ELSE 'fenced' END) IS NULL; ",
        finish_statement("?1, '$.f'")
    );
    let mut run_params = Vec::with_capacity(runs.len());
    for (k, (queue, worker, members)) in runs.iter().enumerate() {
        let field = |i: usize| format!("(?1 ->> '$.r[{k}][{i}]')");
        let statement = lease_statement(LeaseParams {
            now: "?2".into(),
            queue: field(0),
            limit: field(1),
            worker: field(2),
            host: field(3),
            pid: field(4),
            tag: Some(k),
            first_attempts_only: true,
        });
        script.push_str(&statement);
        script.push_str("; ");
        run_params.push((
            *queue,
            members.len(),
            &worker.worker_id,
            &worker.host,
            worker.pid,
        ));
    }
    script.push_str("COMMIT");
    let runs_json =
        serde_json::to_string(&run_params).map_err(|e| format!("encode lease runs: {e}"))?;
    let batch = format!("{{\"f\":{items},\"r\":{runs_json}}}");
    let query = sqlx::query(sqlx::AssertSqlSafe(script))
        .bind(batch)
        .bind(now);
    let mut conn = writer
        .acquire()
        .await
        .map_err(|e| format!("acquire the write connection: {e}"))?;
    script_open.store(true, Ordering::Release);
    let result = query.fetch_all(&mut *conn).await;
    let rows = match result {
        Ok(rows) => rows,
        Err(error) => {
            // The script stopped at its check or at an error: nothing of it may stay.
            if let Err(e) = sqlx::query("ROLLBACK").execute(&mut *conn).await
                && !e.to_string().contains("no transaction is active")
            {
                conn.close_on_drop();
                script_open.store(false, Ordering::Release);
                return Err(format!("rollback: {e}"));
            }
            script_open.store(false, Ordering::Release);
            // Another process held the write lock past the busy timeout: the step-by-step path
            // would only wait as long again.
            if super::is_busy(&error) {
                return Err(error.to_string());
            }
            return Ok(None);
        }
    };
    script_open.store(false, Ordering::Release);
    // Committed: from here on nothing may fail the round. A leased job that cannot be decoded
    // stays leased to this worker and no slot gets it; the reaper recovers it after its
    // `stale_after` (as on Redis, and on the step-by-step path: `lease::decode_leased`).
    let mut leased: Vec<Vec<(Job, i64)>> = (0..runs.len()).map(|_| Vec::new()).collect();
    for row in &rows {
        let run = row
            .try_get::<i64, _>(LEASED_COLUMNS)
            .ok()
            .and_then(|k| usize::try_from(k).ok());
        let Some((k, (_, worker, _))) = run.and_then(|k| runs.get(k).map(|r| (k, r))) else {
            let id = id_of(row, 0).unwrap_or_default();
            tracing::warn!(job_id = %id, "a leased job came back without its run; the reaper will recover it");
            continue;
        };
        leased[k].extend(decode_leased(row, worker, now));
    }
    drop(conn);
    let mut next: Vec<Option<LeasedJob>> = (0..round.len()).map(|_| None).collect();
    for ((_, _, members), mut jobs) in runs.iter().zip(leased) {
        // RETURNING order is unspecified: oldest first, handed out in call order.
        jobs.sort_by_key(|(job, seq)| (job.not_before_ms, *seq));
        for (&i, (job, _)) in members.iter().zip(jobs) {
            next[i] = Some(LeasedJob {
                fencing_token: job.fencing_token,
                job,
            });
        }
    }
    let replies = round
        .iter()
        .zip(next)
        .map(|(r, next)| Ok((FinishReply::Applied(r.next), next)))
        .collect();
    Ok(Some((replies, false)))
}

/// Applies one round statement by statement (see the module docs).
async fn apply_step_by_step(
    writer: &SqlitePool,
    round: &[FinishRequest],
    items: &str,
    now: i64,
) -> Result<Replies, String> {
    let update = finish_statement("?1");
    let mut tx = super::begin_immediate(writer)
        .await
        .map_err(|e| format!("begin: {e}"))?;
    let mut applied: HashMap<String, JobState> = HashMap::with_capacity(round.len());
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "{update} RETURNING jobs.id, jobs.state"
    )))
    .bind(items)
    .bind(now)
    .fetch_all(&mut *tx)
    .await
    .map_err(|e| format!("update jobs: {e}"))?;
    for row in &rows {
        let id: String = id_of(row, 0).map_err(|e| format!("read updated id: {e}"))?;
        let state: String = row
            .try_get(1)
            .map_err(|e| format!("read updated state: {e}"))?;
        let state: JobState = state.parse()?;
        applied.insert(id, state);
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
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT id, fencing_token FROM jobs WHERE id IN (SELECT {} FROM json_each(?1))",
            key_of_text("value")
        )))
        .bind(fenced)
        .fetch_all(&mut *tx)
        .await
        .map_err(|e| format!("read current tokens: {e}"))?;
        for row in &rows {
            let id: String = id_of(row, 0).map_err(|e| format!("read id: {e}"))?;
            let token: i64 = row.try_get(1).map_err(|e| format!("read token: {e}"))?;
            current.insert(id, token);
        }
    }
    // The finishing slots' next jobs, leased in the same transaction (grouped per queue).
    let mut next: Vec<Option<LeasedJob>> = (0..round.len()).map(|_| None).collect();
    let mut queues: Vec<&str> = round
        .iter()
        .filter_map(|r| r.lease.as_ref().map(|(q, _)| q.as_str()))
        .collect();
    queues.sort_unstable();
    queues.dedup();
    for queue in queues {
        let items: Vec<usize> = (0..round.len())
            .filter(|&i| round[i].lease.as_ref().is_some_and(|(q, _)| q == queue))
            .collect();
        let wants: Vec<(&WorkerIdentity, usize)> = items
            .iter()
            .filter_map(|&i| round[i].lease.as_ref().map(|(_, w)| (w, 1)))
            .collect();
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
                Some(token) => Ok((
                    FinishReply::Fenced {
                        current_token: *token as u64,
                    },
                    next,
                )),
                None => Err(EngineError::NotFound(r.job_id.clone())),
            },
        })
        .collect();
    Ok((replies, requeued))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use sqlx::Connection;

    use super::*;
    use crate::backend::prelude::*;
    use crate::job::JobSpec;
    use crate::sqlite::SqliteBackend;
    use crate::sqlite::key::Key;

    /// A one-command script whose future is dropped while it runs (what a runtime shutdown does
    /// to the finisher task) leaves its transaction open on the connection; the write pool's
    /// release hook rolls it back, so the next writer finds a clean connection and the dropped
    /// round applied nothing.
    #[tokio::test]
    async fn a_dropped_script_is_rolled_back_before_the_connection_is_reused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("queue.db");
        let b = SqliteBackend::open(&path).await.unwrap();
        let w = WorkerIdentity::new("w");
        let job = b
            .enqueue(&JobSpec::new("noop", serde_json::json!({})))
            .await
            .unwrap()
            .job_id;
        assert_eq!(
            b.lease("default", &w, 1, Duration::ZERO)
                .await
                .unwrap()
                .len(),
            1
        );

        // Another connection holds the write lock, so the script waits in its BEGIN.
        let url = format!("sqlite://{}", path.display());
        let mut holder = sqlx::SqliteConnection::connect(&url).await.unwrap();
        sqlx::query("BEGIN IMMEDIATE")
            .execute(&mut holder)
            .await
            .unwrap();
        let (reply, _answer) = oneshot::channel();
        let round = [FinishRequest {
            job_id: job.clone(),
            fencing_token: 1,
            next: JobState::Succeeded,
            retry_delay_ms: 0,
            attempt_result: "passed".to_owned(),
            outcome: None,
            error: None,
            lease: None,
            reply,
        }];
        let items = encode(&round).unwrap();
        {
            let script = apply_in_one_command(
                &b.inner.writer,
                &round,
                &items,
                now_ms(),
                &b.inner.script_open,
            );
            tokio::pin!(script);
            // Polled until it sent the script (it first waits for the write connection, which
            // the lease above hands back to the pool in a task of its own).
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            while !b.inner.script_open.load(Ordering::Acquire) {
                assert!(
                    futures::poll!(&mut script).is_pending(),
                    "the script waits for the lock"
                );
                assert!(
                    std::time::Instant::now() < deadline,
                    "the script was never sent"
                );
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        sqlx::query("COMMIT").execute(&mut holder).await.unwrap();

        // The connection's thread runs the script's BEGIN, finds nobody listening and stops
        // there; the pool's hook rolls the open transaction back. Writes work again.
        let mut again = None;
        for _ in 0..200 {
            match b
                .enqueue(&JobSpec::new("noop", serde_json::json!({})))
                .await
            {
                Ok(e) => {
                    again = Some(e.job_id);
                    break;
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
        let again = again.expect("the write connection is usable again");
        let state: String = sqlx::query_scalar("SELECT state FROM jobs WHERE id = ?1")
            .bind(Key::of(&job))
            .fetch_one(&mut holder)
            .await
            .unwrap();
        assert_eq!(state, "running", "the dropped round applied nothing");
        let seen: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM jobs WHERE id = ?1")
            .bind(Key::of(&again))
            .fetch_one(&mut holder)
            .await
            .unwrap();
        assert_eq!(
            seen, 1,
            "the next write is committed, not caught in a stale transaction"
        );
    }
}
