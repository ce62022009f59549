//! Group commit for `finish` and `finish_and_lease` on Redis: concurrent calls are sent by one
//! task as one `finish_batch.lua` call, so a busy worker pays one round trip and one script
//! invocation for many finishes, and each finishing slot gets its next job in the same call.
//!
//! Each finish keeps its own fencing (the script applies them one by one, atomically as a
//! whole). Up to [`MAX_IN_FLIGHT`] batches are in flight; meanwhile the next one accumulates. A retried batch (lost reply)
//! re-applies its idempotent finishes and gets back the jobs its first try leased, keyed by
//! the batch's request id.

use std::sync::Arc;
use std::time::Duration;

use ::redis::Script;
use ::redis::aio::ConnectionManager;
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio::time::Instant;

use super::{PROMOTE_LIMIT, RETRY_BUDGET, decode, parse_state, transient, unexpected};
use crate::error::EngineError;
use crate::job::{FinishReply, LeasedJob, WorkerIdentity};

/// Most finishes sent in one script call.
const MAX_BATCH: usize = 256;
/// Batches in flight at once (pipelined on the connection; Redis runs them in order), so the
/// server runs one batch while the worker handles the previous batch's replies.
const MAX_IN_FLIGHT: usize = 2;

/// Ids of lease requests (`lease.lua`, `finish_batch.lua`) whose replies arrived, so their
/// records (`leasereq:{id}`, kept for a retry after a lost reply) can go: the next lease or
/// finish-batch call of this process deletes them (`forget_requests` in `common.lua`). One that
/// is never sent (the process ends, or a call fails after taking it) expires on its own.
#[derive(Debug, Default)]
pub(super) struct Answered(std::sync::Mutex<Vec<String>>);

impl Answered {
    /// Most ids one call deletes.
    const PER_CALL: usize = 64;

    /// Records that the reply of request `id` arrived.
    pub(super) fn push(&self, id: String) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(id);
    }

    /// Up to [`Self::PER_CALL`] ids to delete with the next call.
    pub(super) fn take(&self) -> Vec<String> {
        let mut ids = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let at = ids.len().saturating_sub(Self::PER_CALL);
        ids.split_off(at)
    }
}

/// Adds the forget list to a script call: the count, then the ids.
pub(super) fn forget_args(inv: &mut ::redis::ScriptInvocation<'_>, ids: &[String]) {
    inv.arg(ids.len());
    for id in ids {
        inv.arg(id);
    }
}

/// What a finish (and optional lease) call gets back.
pub(super) type Reply = Result<(FinishReply, Option<LeasedJob>), EngineError>;

/// One pending finish, already validated and encoded.
pub(super) struct Item {
    pub(super) job_id: String,
    pub(super) token: u64,
    pub(super) next: &'static str,
    pub(super) delay_ms: u64,
    pub(super) result: String,
    /// `RunOutcome` JSON, empty for none.
    pub(super) outcome: String,
    pub(super) error: Option<String>,
    /// Lease one next job from this queue for this worker after the finish.
    pub(super) lease: Option<(String, WorkerIdentity)>,
    pub(super) reply: oneshot::Sender<Reply>,
}

/// Starts the batching task; it ends when the returned sender (and its clones) are dropped.
pub(super) fn spawn(
    conn: ConnectionManager,
    prefix: String,
    script: Script,
    answered: Arc<Answered>,
) -> mpsc::UnboundedSender<Item> {
    let (tx, mut rx) = mpsc::unbounded_channel::<Item>();
    tokio::spawn(async move {
        let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
        let prefix: Arc<str> = prefix.into();
        while let Some(first) = rx.recv().await {
            // While the maximum of batches is in flight, the next one accumulates.
            let Ok(permit) = in_flight.clone().acquire_owned().await else {
                break;
            };
            let mut batch = crate::backend::collect_batch(&mut rx, first, MAX_BATCH).await;
            for item in &mut batch {
                // A caller that gave up still gets its finish applied, but no job leased for it.
                if item.reply.is_closed() {
                    item.lease = None;
                }
            }
            let (conn, prefix, script, answered) = (
                conn.clone(),
                prefix.clone(),
                script.clone(),
                answered.clone(),
            );
            tokio::spawn(async move {
                match run(&conn, &prefix, &script, &batch, &answered).await {
                    Ok(replies) => {
                        for (item, reply) in batch.into_iter().zip(replies) {
                            let _ = item.reply.send(reply);
                        }
                    }
                    Err((e, is_transient)) => {
                        for item in batch {
                            let message = format!("finish of job `{}`: {e}", item.job_id);
                            let error = if is_transient {
                                EngineError::redis_unavailable(message)
                            } else {
                                EngineError::redis(message)
                            };
                            let _ = item.reply.send(Err(error));
                        }
                    }
                }
                drop(permit);
            });
        }
    });
    tx
}

/// One script call for `batch` (retrying transient failures with the same request id); one
/// reply per item, in order. The error says whether the last failure was transient (the
/// server refused for now: OOM, loading, busy, a dropped connection).
async fn run(
    conn: &ConnectionManager,
    prefix: &str,
    script: &Script,
    batch: &[Item],
    answered: &Answered,
) -> Result<Vec<Reply>, (String, bool)> {
    let request_id = uuid::Uuid::new_v4().to_string();
    // Distinct (queue, worker) pairs that want a next job, sent once; items refer to them by
    // 1-based index (0 = lease nothing). A worker's slots all share one pair.
    let mut lessees: Vec<(&str, &WorkerIdentity)> = Vec::new();
    let mut lessee_of = Vec::with_capacity(batch.len());
    for item in batch {
        lessee_of.push(match &item.lease {
            Some((q, w)) => match lessees.iter().position(|(lq, lw)| lq == q && *lw == w) {
                Some(i) => i + 1,
                None => {
                    lessees.push((q.as_str(), w));
                    lessees.len()
                }
            },
            None => 0,
        });
    }
    let mut inv = script.prepare_invoke();
    inv.arg(prefix)
        .arg(&request_id)
        .arg(PROMOTE_LIMIT)
        .arg(batch.len())
        .arg(lessees.len());
    for (queue, worker) in &lessees {
        inv.arg(*queue)
            .arg(&worker.worker_id)
            .arg(&worker.host)
            .arg(worker.pid);
    }
    let mut error = String::new();
    for (item, lessee) in batch.iter().zip(&lessee_of) {
        // '' = no error, else '=' + text.
        error.clear();
        if let Some(e) = &item.error {
            error.push('=');
            error.push_str(e);
        }
        inv.arg(super::id::stored(&item.job_id).as_ref())
            .arg(item.token)
            .arg(item.next)
            .arg(item.delay_ms)
            .arg(&item.result)
            .arg(&item.outcome)
            .arg(error.as_str())
            .arg(*lessee);
    }
    forget_args(&mut inv, &answered.take());
    let started = Instant::now();
    let mut pause = Duration::from_millis(50);
    let (finishes, leased, now): (Vec<String>, Vec<Vec<Option<String>>>, i64) = loop {
        let mut c = conn.clone();
        match inv.invoke_async(&mut c).await {
            Ok(v) => break v,
            Err(e) if transient(&e) && started.elapsed() < RETRY_BUDGET => {
                tracing::debug!(error = %e, "redis finish batch failed, retrying");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
            }
            Err(e) => return Err((super::explain(&e), transient(&e))),
        }
    };
    if finishes.len() != batch.len() {
        return Err((
            format!(
                "finish batch: {} replies for {} finishes",
                finishes.len(),
                batch.len()
            ),
            false,
        ));
    }
    if !leased.is_empty() {
        // The script kept a record of what it leased only when it leased something.
        answered.push(request_id);
    }
    let mut next: Vec<Option<LeasedJob>> = (0..batch.len()).map(|_| None).collect();
    let mut lease_error = None;
    // A row's tag is the job id of the item it answers; rows come in item order per queue, so
    // the search starts after the previous match.
    let mut cursor = 0;
    for row in leased {
        let Some(tag) = row
            .first()
            .and_then(Option::as_deref)
            .map(super::id::public)
        else {
            lease_error = Some("lease row without a tag".to_owned());
            continue;
        };
        let n = batch.len();
        let found = (0..n)
            .map(|k| (cursor + k) % n)
            .find(|&i| next[i].is_none() && batch[i].lease.is_some() && batch[i].job_id == tag);
        let Some(i) = found else {
            lease_error = Some(format!("lease row for `{tag}`, which asked for none"));
            continue;
        };
        cursor = i + 1;
        let owner = lessees[lessee_of[i] - 1].1;
        match decode::leased(row, owner, now) {
            Ok((_, job)) => next[i] = Some(job),
            Err(e) => lease_error = Some(e.to_string()),
        }
    }
    if let Some(e) = lease_error {
        // A leased job that cannot be decoded stays leased to this worker; the reaper frees it.
        tracing::warn!(error = %e, "a job leased after a finish could not be decoded");
    }
    Ok(batch
        .iter()
        .zip(finishes)
        .zip(next)
        .map(|((item, reply), next)| Ok((finish_reply(&item.job_id, &reply)?, next)))
        .collect())
}

/// A finish reply of `finish_batch.lua`: the new state when applied, `#<current token>` when
/// fenced, '' when the job does not exist.
fn finish_reply(job_id: &str, reply: &str) -> Result<FinishReply, EngineError> {
    if reply.is_empty() {
        return Err(EngineError::NotFound(job_id.to_owned()));
    }
    if let Some(token) = reply.strip_prefix('#') {
        let current_token = token
            .parse()
            .map_err(|_| unexpected("finish", &[reply.to_owned()]))?;
        return Ok(FinishReply::Fenced { current_token });
    }
    Ok(FinishReply::Applied(parse_state(job_id, reply)?))
}
