//! The queue traits' implementation for [`SqliteBackend`] ([`crate::backend`], one `impl` per
//! trait): every job and lock transition, each one `BEGIN IMMEDIATE` transaction or one
//! single-statement write (see the parent module for the rules they share).

use std::time::Duration;

use sqlx::Row;
use tokio_util::sync::CancellationToken;

use super::key::{Key, id_of};
use super::rows::{job_columns, lock_lease_from_row};
use super::{CLEAR_LEASE, SqliteBackend, to_i64};
use crate::backend::ReapAction;
use crate::backend::prelude::*;
use crate::error::EngineError;
use crate::job::{
    CancelReply, Enqueued, ExpiredLease, Finish, FinishReply, HeartbeatReply, Job, JobSpec,
    JobState, LeaseKind, LeaseView, LeasedJob, LockAcquire, WorkerIdentity, now_ms,
};
use crate::output::{NewOutput, OutputChunk};
use crate::retention::{PruneBatch, PruneRule, Tombstone};

/// The reaper's read (`?1` = now, `?2` = limit): expired running leases, through `jobs_stale`
/// (O(running)); the query-plan test of `sqlite/list.rs` checks it.
pub(super) const EXPIRED_LEASES: &str = "SELECT id, fencing_token, attempts, max_attempts, idempotent, cancel_requested \
     FROM jobs WHERE state = 'running' AND stale_deadline_ms < ?1 ORDER BY stale_deadline_ms LIMIT ?2 + 0";

#[async_trait::async_trait]
impl QueueCore for SqliteBackend {
    fn name(&self) -> &'static str {
        "sqlite"
    }

    async fn enqueue(&self, spec: &JobSpec) -> Result<Enqueued, EngineError> {
        let now = now_ms();
        let mut tx = self.begin("enqueue").await?;
        let out = self.insert_job(&mut tx, spec, now).await?;
        tx.commit().await.map_err(self.db("enqueue: commit"))?;
        if out.created {
            self.inner.wake.wake_all();
        }
        Ok(out)
    }

    async fn lease(
        &self,
        queue: &str,
        worker: &WorkerIdentity,
        max: usize,
        wait: Duration,
    ) -> Result<Vec<LeasedJob>, EngineError> {
        self.lease_waiting(queue, worker, max, wait, None).await
    }

    async fn lease_or_stop(
        &self,
        queue: &str,
        worker: &WorkerIdentity,
        max: usize,
        wait: Duration,
        stop: &CancellationToken,
    ) -> Result<Vec<LeasedJob>, EngineError> {
        self.lease_waiting(queue, worker, max, wait, Some(stop))
            .await
    }

    async fn heartbeat(
        &self,
        job_id: &str,
        fencing_token: u64,
    ) -> Result<HeartbeatReply, EngineError> {
        let now = now_ms();
        let cancel: Option<i64> = sqlx::query_scalar(
            "UPDATE jobs SET heartbeat_at_ms = ?3, stale_deadline_ms = ?3 + stale_after_ms \
             WHERE id = ?1 AND fencing_token = ?2 AND state = 'running' RETURNING cancel_requested",
        )
        .bind(Key::of(job_id))
        .bind(to_i64(fencing_token))
        .bind(now)
        .fetch_optional(&self.inner.writer)
        .await
        .map_err(self.db(format!("heartbeat of job `{job_id}`")))?;
        Ok(match cancel {
            None => HeartbeatReply::LeaseLost,
            Some(0) => HeartbeatReply::Renewed,
            Some(_) => HeartbeatReply::CancelRequested,
        })
    }

    async fn finish(
        &self,
        job_id: &str,
        fencing_token: u64,
        finish: &Finish,
    ) -> Result<FinishReply, EngineError> {
        Ok(self
            .send_finish(job_id, fencing_token, finish, None)
            .await?
            .0)
    }

    async fn finish_and_lease(
        &self,
        job_id: &str,
        fencing_token: u64,
        finish: &Finish,
        queue: &str,
        worker: &WorkerIdentity,
    ) -> Result<(FinishReply, Option<LeasedJob>), EngineError> {
        self.send_finish(
            job_id,
            fencing_token,
            finish,
            Some((queue.to_owned(), worker.clone())),
        )
        .await
    }

    async fn release(&self, job_id: &str, fencing_token: u64) -> Result<bool, EngineError> {
        let what = format!("release job `{job_id}`");
        let now = now_ms();
        let mut tx = self.begin(&what).await?;
        let state: Option<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "UPDATE jobs SET \
             state = CASE WHEN cancel_requested = 1 THEN 'cancelled' ELSE 'queued' END, \
             result_pending = cancel_requested, attempts = MAX(attempts - 1, 0), \
             not_before_ms = ?3, updated_at_ms = ?3, {CLEAR_LEASE}, \
             attempt_ended_at_ms = ?3, attempt_result = 'released', attempt_retry_delay_ms = NULL \
             WHERE id = ?1 AND fencing_token = ?2 AND state = 'running' RETURNING state"
        )))
        .bind(Key::of(job_id))
        .bind(to_i64(fencing_token))
        .bind(now)
        .fetch_optional(&mut *tx)
        .await
        .map_err(self.db(&what))?;
        let Some(state) = state else {
            return Ok(false);
        };
        tx.commit()
            .await
            .map_err(self.db(format!("{what}: commit")))?;
        if state == "queued" {
            self.inner.wake.wake_all();
        }
        Ok(true)
    }

    async fn get(&self, job_id: &str) -> Result<Option<Job>, EngineError> {
        let jobs = self
            .read_jobs(
                sqlx::query(concat!(
                    "SELECT ",
                    job_columns!(),
                    " FROM jobs WHERE id = ?1"
                ))
                .bind(Key::of(job_id)),
                &format!("get job `{job_id}`"),
            )
            .await?;
        Ok(jobs.into_iter().next())
    }

    async fn now_ms(&self) -> Result<i64, EngineError> {
        Ok(now_ms())
    }
}

#[async_trait::async_trait]
impl QueueControl for SqliteBackend {
    async fn cancel(&self, job_id: &str) -> Result<CancelReply, EngineError> {
        let what = format!("cancel job `{job_id}`");
        let now = now_ms();
        let mut tx = self.begin(&what).await?;
        let state = self.state_of(&mut tx, job_id, &what).await?;
        let reply = match state {
            JobState::Queued | JobState::Stale => {
                sqlx::query(
                    // A job leased before (retried, or stale) may have a result applied under
                    // its current token: the cancel is a new result, so it gets a new token (a
                    // never-leased job keeps 0, so a later lease is still its first). The token
                    // change moves the row's attempt into `job_attempts` (trigger), under the
                    // token it ran with; the row then holds none (`attempt_no` NULL), or the
                    // history would list that attempt twice (found by the fault soak, issue 21).
                    "UPDATE jobs SET state = 'cancelled', recovery_available = 0, result_pending = 1, \
                     fencing_token = fencing_token + (fencing_token > 0), attempt_no = NULL, updated_at_ms = ?2 WHERE id = ?1",
                )
                .bind(Key::of(job_id))
                .bind(now)
                .execute(&mut *tx)
                .await
                .map_err(self.db(&what))?;
                CancelReply::Cancelled
            }
            JobState::Running => {
                sqlx::query(
                    "UPDATE jobs SET cancel_requested = 1, updated_at_ms = ?2 WHERE id = ?1",
                )
                .bind(Key::of(job_id))
                .bind(now)
                .execute(&mut *tx)
                .await
                .map_err(self.db(&what))?;
                CancelReply::Requested
            }
            terminal => return Ok(CancelReply::AlreadyTerminal(terminal)),
        };
        tx.commit()
            .await
            .map_err(self.db(format!("{what}: commit")))?;
        Ok(reply)
    }

    async fn retry(&self, job_id: &str) -> Result<(), EngineError> {
        self.retry_replacing(job_id, None).await
    }

    async fn fail_queued(
        &self,
        job_id: &str,
        outcome: &skillforge_runner::RunOutcome,
    ) -> Result<bool, EngineError> {
        let what = format!("fail queued job `{job_id}`");
        let outcome = super::compact::encode(super::compact::Doc::Outcome, outcome)
            .map_err(|e| EngineError::sqlite(format!("{what}: encode outcome: {e}")))?;
        let mut tx = self.begin(&what).await?;
        self.state_of(&mut tx, job_id, &what).await?;
        // As a cancel: a job leased before gets a new token for this result, its attempt moved
        // to `job_attempts` by the token change (see `cancel`).
        let failed: Option<i64> = sqlx::query_scalar(
            "UPDATE jobs SET state = 'failed', outcome = ?2, error = NULL, recovery_available = 0, result_pending = 1, \
             fencing_token = fencing_token + (fencing_token > 0), attempt_no = NULL, updated_at_ms = ?3 \
             WHERE id = ?1 AND state = 'queued' RETURNING 1",
        )
        .bind(Key::of(job_id))
        .bind(outcome)
        .bind(now_ms())
        .fetch_optional(&mut *tx)
        .await
        .map_err(self.db(&what))?;
        if failed.is_none() {
            return Ok(false);
        }
        tx.commit()
            .await
            .map_err(self.db(format!("{what}: commit")))?;
        self.inner.wake.jobs_changed();
        Ok(true)
    }

    async fn retry_with_payload(
        &self,
        job_id: &str,
        payload: &serde_json::Value,
    ) -> Result<(), EngineError> {
        self.retry_replacing(job_id, Some(payload)).await
    }

    async fn list(&self, state: Option<JobState>, limit: usize) -> Result<Vec<Job>, EngineError> {
        Ok(self.list_readable(state, limit).await?.0)
    }

    async fn leases(&self) -> Result<Vec<LeaseView>, EngineError> {
        self.lease_views().await
    }

    async fn counts(&self) -> Result<crate::backend::JobCounts, EngineError> {
        let what = "count jobs";
        let mut conn = self.inner.reader.acquire().await.map_err(self.db(what))?;
        let mut counts = crate::backend::JobCounts::default();
        // Each count reads one state's partial index (`sqlite/list.rs`), never the rows.
        let queued = sqlx::query(super::list::COUNT_QUEUED)
            .fetch_all(&mut *conn)
            .await
            .map_err(self.db(what))?;
        for row in &queued {
            let n = u64::try_from(row.get::<i64, _>(1)).unwrap_or(0);
            counts.add(JobState::Queued, n);
            counts.add_queued(&row.get::<String, _>(0), n);
        }
        let running: i64 = sqlx::query_scalar(super::list::COUNT_RUNNING)
            .fetch_one(&mut *conn)
            .await
            .map_err(self.db(what))?;
        counts.add(JobState::Running, u64::try_from(running).unwrap_or(0));
        let succeeded: i64 = sqlx::query_scalar(super::list::COUNT_SUCCEEDED)
            .fetch_one(&mut *conn)
            .await
            .map_err(self.db(what))?;
        counts.add(JobState::Succeeded, u64::try_from(succeeded).unwrap_or(0));
        for row in sqlx::query(super::list::COUNT_RARE)
            .fetch_all(&mut *conn)
            .await
            .map_err(self.db(what))?
        {
            let state: String = row.get(0);
            if let Ok(state) = state.parse::<JobState>() {
                counts.add(state, u64::try_from(row.get::<i64, _>(1)).unwrap_or(0));
            }
        }
        Ok(counts)
    }
}

impl SqliteBackend {
    /// The page of jobs `list` shows and the unreadable rows met on the way.
    async fn list_lenient(
        &self,
        state: Option<JobState>,
        limit: usize,
    ) -> Result<(Vec<Job>, Vec<crate::backend::UnreadableRecord>), EngineError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        // Each state reads through an index of its own jobs (see `sqlite/list.rs`).
        let query = match state {
            Some(JobState::Queued) => sqlx::query(super::list::QUEUED).bind(limit),
            Some(JobState::Running) => sqlx::query(super::list::RUNNING).bind(limit),
            Some(JobState::Succeeded) => sqlx::query(super::list::SUCCEEDED).bind(limit),
            Some(state) => sqlx::query(super::list::RARE)
                .bind(state.as_str())
                .bind(limit),
            None => sqlx::query(super::list::ALL).bind(limit),
        };
        self.read_jobs_lenient(query, "list jobs").await
    }

    /// Every active job lease and named lock.
    async fn lease_views(&self) -> Result<Vec<LeaseView>, EngineError> {
        let what = "list leases";
        let mut conn = self.inner.reader.acquire().await.map_err(self.db(what))?;
        let job_rows = sqlx::query(
            "SELECT id, fencing_token, owner_worker, owner_host, owner_pid, acquired_at_ms, \
             heartbeat_at_ms, heartbeat_ms, stale_after_ms FROM jobs \
             WHERE state = 'running' AND stale_deadline_ms IS NOT NULL ORDER BY stale_deadline_ms",
        )
        .fetch_all(&mut *conn)
        .await
        .map_err(self.db(what))?;
        let lock_rows = sqlx::query(
            "SELECT name, fencing_token, owner_worker, owner_host, owner_pid, acquired_at_ms, \
             heartbeat_at_ms, heartbeat_ms, stale_after_ms FROM locks ORDER BY name",
        )
        .fetch_all(&mut *conn)
        .await
        .map_err(self.db(what))?;
        let mut out = Vec::with_capacity(job_rows.len() + lock_rows.len());
        for (kind, rows, key) in [
            (LeaseKind::Job, &job_rows, "id"),
            (LeaseKind::Lock, &lock_rows, "name"),
        ] {
            for row in rows {
                let name: String = match kind {
                    LeaseKind::Job => id_of(row, key),
                    LeaseKind::Lock => row.try_get(key),
                }
                .map_err(self.db(what))?;
                let lease = lock_lease_from_row(row, &name)?;
                out.push(LeaseView {
                    kind,
                    lease,
                    heartbeat_ms: row
                        .try_get::<i64, _>("heartbeat_ms")
                        .map_err(self.db(what))?
                        .max(0) as u64,
                    stale_after_ms: row
                        .try_get::<i64, _>("stale_after_ms")
                        .map_err(self.db(what))?
                        .max(0) as u64,
                    name,
                });
            }
        }
        Ok(out)
    }
}

#[async_trait::async_trait]
impl QueueChanges for SqliteBackend {
    fn change_seq(&self) -> u64 {
        self.inner.wake.generation()
    }

    async fn changed_since(&self, seen: u64, timeout: Duration) {
        self.inner.wake.changed_since(seen, timeout).await;
    }

    async fn changed_here_since(&self, seen: u64, timeout: Duration) {
        self.inner.wake.changed_here_since(seen, timeout).await;
    }
}

#[async_trait::async_trait]
impl QueueResults for SqliteBackend {
    async fn pending_results(&self, limit: usize) -> Result<Vec<Job>, EngineError> {
        let (jobs, unreadable) = self
            .read_jobs_lenient(
                sqlx::query(concat!(
                    "SELECT ",
                    job_columns!(),
                    " FROM jobs WHERE result_pending = 1 ORDER BY updated_at_ms, seq LIMIT ?1 + 0"
                ))
                .bind(i64::try_from(limit).unwrap_or(i64::MAX)),
                "list pending results",
            )
            .await?;
        // A result that cannot be read would stop every pass: quarantined, logged once (by the
        // process that moved it), and the others flow (issue 32 item 2).
        for bad in unreadable {
            if self.quarantine_pending(&bad.job_id, &bad.reason).await? {
                tracing::error!(job_id = %bad.job_id, reason = %bad.reason,
                    "an unreadable job record was quarantined: its result is not applied; \
                     `skillforge jobs list --state broken` lists it, `skillforge jobs purge ID` removes it");
            }
        }
        Ok(jobs)
    }

    async fn ack_result(&self, job_id: &str, fencing_token: u64) -> Result<bool, EngineError> {
        let acked: Option<i64> = sqlx::query_scalar(
            "UPDATE jobs SET result_pending = 0 WHERE id = ?1 AND fencing_token = ?2 RETURNING 1",
        )
        .bind(Key::of(job_id))
        .bind(to_i64(fencing_token))
        .fetch_optional(&self.inner.writer)
        .await
        .map_err(self.db(format!(
            "ack result of job `{job_id}` at fencing token {fencing_token}"
        )))?;
        if acked.is_some() {
            return Ok(true);
        }
        match self.get(job_id).await? {
            Some(_) => Ok(false),
            None => Err(EngineError::NotFound(job_id.to_owned())),
        }
    }

    async fn rerun_result(
        &self,
        job_id: &str,
        fencing_token: u64,
        reason: &str,
    ) -> Result<bool, EngineError> {
        let what = format!("run job `{job_id}` again");
        let now = now_ms();
        let mut tx = self.begin(&what).await?;
        self.state_of(&mut tx, job_id, &what).await?;
        let requeued: Option<i64> = sqlx::query_scalar(
            "UPDATE jobs SET state = 'queued', not_before_ms = ?3, error = ?4, cancel_requested = 0, recovery_available = 0, \
             result_pending = 0, updated_at_ms = ?3 \
             WHERE id = ?1 AND fencing_token = ?2 AND result_pending = 1 AND state IN ('succeeded', 'failed', 'dead') RETURNING 1",
        )
        .bind(Key::of(job_id))
        .bind(to_i64(fencing_token))
        .bind(now)
        .bind(reason)
        .fetch_optional(&mut *tx)
        .await
        .map_err(self.db(&what))?;
        if requeued.is_none() {
            return Ok(false);
        }
        tx.commit()
            .await
            .map_err(self.db(format!("{what}: commit")))?;
        self.inner.wake.wake_all();
        Ok(true)
    }
}

#[async_trait::async_trait]
impl QueueOutput for SqliteBackend {
    async fn append_output(
        &self,
        job_id: &str,
        fencing_token: u64,
        chunks: &[NewOutput],
    ) -> Result<bool, EngineError> {
        self.append_output_rows(job_id, fencing_token, chunks).await
    }

    async fn read_output(
        &self,
        job_id: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<OutputChunk>, EngineError> {
        self.read_output_rows(job_id, after, limit).await
    }

    async fn trim_output(&self, job_id: &str) -> Result<(), EngineError> {
        self.trim_output_rows(job_id).await
    }
}

#[async_trait::async_trait]
impl QueueRecovery for SqliteBackend {
    async fn expired_leases(&self, limit: usize) -> Result<Vec<ExpiredLease>, EngineError> {
        let rows = sqlx::query(EXPIRED_LEASES)
            .bind(now_ms())
            .bind(i64::try_from(limit).unwrap_or(i64::MAX))
            .fetch_all(&self.inner.reader)
            .await
            .map_err(self.db("list expired leases"))?;
        rows.iter()
            .map(|row| {
                let get = |e: sqlx::Error| EngineError::sqlite(format!("list expired leases: {e}"));
                Ok(ExpiredLease {
                    job_id: id_of(row, "id").map_err(get)?,
                    fencing_token: row.try_get::<i64, _>("fencing_token").map_err(get)? as u64,
                    attempts: row.try_get::<i64, _>("attempts").map_err(get)? as u32,
                    max_attempts: row.try_get::<i64, _>("max_attempts").map_err(get)? as u32,
                    idempotent: row.try_get::<bool, _>("idempotent").map_err(get)?,
                    cancel_requested: row.try_get::<bool, _>("cancel_requested").map_err(get)?,
                })
            })
            .collect()
    }

    async fn reap(&self, lease: &ExpiredLease, action: &ReapAction) -> Result<bool, EngineError> {
        self.reap_if(lease, action, None).await
    }

    async fn reap_unchanged(
        &self,
        lease: &ExpiredLease,
        action: &ReapAction,
        heartbeat_at_ms: i64,
    ) -> Result<bool, EngineError> {
        self.reap_if(lease, action, Some(heartbeat_at_ms)).await
    }
}

#[async_trait::async_trait]
impl QueueLocks for SqliteBackend {
    async fn acquire_lock(
        &self,
        name: &str,
        owner: &WorkerIdentity,
        heartbeat: Duration,
        stale_after: Duration,
    ) -> Result<LockAcquire, EngineError> {
        let what = format!("acquire lock `{name}`");
        let now = now_ms();
        let mut tx = self.begin(&what).await?;
        let row = sqlx::query(
            "SELECT fencing_token, owner_worker, owner_host, owner_pid, acquired_at_ms, \
             heartbeat_at_ms, stale_after_ms FROM locks WHERE name = ?1",
        )
        .bind(name)
        .fetch_optional(&mut *tx)
        .await
        .map_err(self.db(&what))?;
        if let Some(row) = row {
            // A row is a held lock (schema v7): free unless its holder went stale.
            let stale_after_ms: i64 = row.try_get("stale_after_ms").map_err(self.db(&what))?;
            let lease = lock_lease_from_row(&row, name)?;
            if now - lease.heartbeat_at_ms <= stale_after_ms {
                return Ok(LockAcquire::Held(lease));
            }
        }
        // The next token of the one counter (schema v7): higher than any this name ever had.
        let token: i64 = sqlx::query_scalar(
            "UPDATE lock_tokens SET last = last + 1 WHERE id = 1 RETURNING last",
        )
        .fetch_one(&mut *tx)
        .await
        .map_err(self.db(&what))?;
        sqlx::query(
            "INSERT INTO locks (name, fencing_token, owner_worker, owner_host, owner_pid, \
             acquired_at_ms, heartbeat_at_ms, heartbeat_ms, stale_after_ms) \
             VALUES (?1, ?8, ?2, ?3, ?4, ?5, ?5, ?6, ?7) \
             ON CONFLICT (name) DO UPDATE SET fencing_token = excluded.fencing_token, \
             owner_worker = excluded.owner_worker, owner_host = excluded.owner_host, \
             owner_pid = excluded.owner_pid, acquired_at_ms = excluded.acquired_at_ms, \
             heartbeat_at_ms = excluded.heartbeat_at_ms, heartbeat_ms = excluded.heartbeat_ms, \
             stale_after_ms = excluded.stale_after_ms",
        )
        .bind(name)
        .bind(&owner.worker_id)
        .bind(&owner.host)
        .bind(i64::from(owner.pid))
        .bind(now)
        .bind(to_i64(heartbeat.as_millis() as u64))
        .bind(to_i64(stale_after.as_millis() as u64))
        .bind(token)
        .execute(&mut *tx)
        .await
        .map_err(self.db(&what))?;
        tx.commit()
            .await
            .map_err(self.db(format!("{what}: commit")))?;
        Ok(LockAcquire::Acquired {
            fencing_token: token as u64,
        })
    }

    async fn renew_lock(&self, name: &str, fencing_token: u64) -> Result<bool, EngineError> {
        let done = sqlx::query(
            "UPDATE locks SET heartbeat_at_ms = ?3 WHERE name = ?1 AND fencing_token = ?2",
        )
        .bind(name)
        .bind(to_i64(fencing_token))
        .bind(now_ms())
        .execute(&self.inner.writer)
        .await
        .map_err(self.db(format!("renew lock `{name}`")))?;
        Ok(done.rows_affected() == 1)
    }

    async fn release_lock(&self, name: &str, fencing_token: u64) -> Result<bool, EngineError> {
        let done = sqlx::query("DELETE FROM locks WHERE name = ?1 AND fencing_token = ?2")
            .bind(name)
            .bind(to_i64(fencing_token))
            .execute(&self.inner.writer)
            .await
            .map_err(self.db(format!("release lock `{name}`")))?;
        Ok(done.rows_affected() == 1)
    }

    async fn reap_locks(&self) -> Result<Vec<String>, EngineError> {
        sqlx::query_scalar(
            "DELETE FROM locks WHERE heartbeat_at_ms + stale_after_ms < ?1 RETURNING name",
        )
        .bind(now_ms())
        .fetch_all(&self.inner.writer)
        .await
        .map_err(self.db("reap stale locks"))
    }

    async fn reap_lock(
        &self,
        name: &str,
        fencing_token: u64,
        heartbeat_at_ms: i64,
    ) -> Result<bool, EngineError> {
        self.reap_lock_if(name, fencing_token, heartbeat_at_ms, Some(now_ms()))
            .await
    }

    async fn reap_lock_unchanged(
        &self,
        name: &str,
        fencing_token: u64,
        heartbeat_at_ms: i64,
    ) -> Result<bool, EngineError> {
        self.reap_lock_if(name, fencing_token, heartbeat_at_ms, None)
            .await
    }
}

#[async_trait::async_trait]
impl QueueRetention for SqliteBackend {
    async fn prune(&self, rule: &PruneRule, limit: usize) -> Result<PruneBatch, EngineError> {
        self.prune_batch(rule, limit).await
    }

    async fn prune_count(&self, rule: &PruneRule) -> Result<(u64, u64), EngineError> {
        self.prune_count_now(rule).await
    }

    async fn tombstone(&self, job_id: &str) -> Result<Option<Tombstone>, EngineError> {
        self.tombstone_of(job_id).await
    }
}

#[async_trait::async_trait]
impl QueueRoutes for SqliteBackend {
    async fn routes(&self) -> Result<Vec<String>, EngineError> {
        self.queued_routes().await
    }

    async fn queued_on(&self, queue: &str, limit: usize) -> Result<Vec<Job>, EngineError> {
        self.read_jobs(
            sqlx::query(super::list::QUEUED_ON)
                .bind(queue.to_owned())
                .bind(i64::try_from(limit).unwrap_or(i64::MAX)),
            "list the jobs queued on a route",
        )
        .await
    }
}

impl QueueTransfer for SqliteBackend {
    /// The blob store next to the queue file (`<home>/blobs` for `<home>/queue.db`).
    fn transfer_area(&self) -> Option<std::sync::Arc<dyn crate::transfer::TransferArea>> {
        let root = self
            .inner
            .path
            .parent()
            .unwrap_or(std::path::Path::new("."))
            .join("blobs");
        Some(std::sync::Arc::new(crate::transfer::LocalTransfer::new(
            root,
            crate::transfer::TransferLimits::default(),
        )))
    }
}

#[async_trait::async_trait]
impl QueueIntegrity for SqliteBackend {
    async fn list_readable(
        &self,
        state: Option<JobState>,
        limit: usize,
    ) -> Result<(Vec<Job>, Vec<crate::backend::UnreadableRecord>), EngineError> {
        self.list_lenient(state, limit).await
    }

    async fn quarantined(
        &self,
        limit: usize,
    ) -> Result<Vec<crate::backend::UnreadableRecord>, EngineError> {
        self.quarantined_records(limit).await
    }

    async fn purge(&self, job_id: &str) -> Result<bool, EngineError> {
        self.purge_record(job_id).await
    }
}

impl SqliteBackend {
    /// Frees lock `name` held under `fencing_token` with its heartbeat at `heartbeat_at_ms`, and
    /// past its stale deadline at `now` by this process's clock (`None`: whatever the deadline
    /// says, for a reaper that confirmed it on its own monotonic clock).
    async fn reap_lock_if(
        &self,
        name: &str,
        fencing_token: u64,
        heartbeat_at_ms: i64,
        now: Option<i64>,
    ) -> Result<bool, EngineError> {
        let freed: Option<String> = sqlx::query_scalar(
            "DELETE FROM locks WHERE name = ?1 AND fencing_token = ?2 AND heartbeat_at_ms = ?3 \
             AND (?4 IS NULL OR heartbeat_at_ms + stale_after_ms < ?4) RETURNING name",
        )
        .bind(name)
        .bind(to_i64(fencing_token))
        .bind(heartbeat_at_ms)
        .bind(now)
        .fetch_optional(&self.inner.writer)
        .await
        .map_err(self.db(format!("reap stale lock `{name}`")))?;
        Ok(freed.is_some())
    }

    /// `retry`, with the payload replaced first when `payload` is given (one transaction).
    async fn retry_replacing(
        &self,
        job_id: &str,
        payload: Option<&serde_json::Value>,
    ) -> Result<(), EngineError> {
        let what = format!("retry job `{job_id}`");
        let now = now_ms();
        let mut tx = self.begin(&what).await?;
        let state = self.state_of(&mut tx, job_id, &what).await?;
        if !matches!(
            state,
            JobState::Failed | JobState::Dead | JobState::Cancelled | JobState::Stale
        ) {
            return Err(EngineError::InvalidState {
                job_id: job_id.to_owned(),
                state,
                message: "only failed, dead, cancelled or stale jobs can be retried".to_owned(),
            });
        }
        if let Some(payload) = payload {
            let row = sqlx::query(
                "SELECT spec FROM job_specs WHERE seq = (SELECT seq FROM jobs WHERE id = ?1)",
            )
            .bind(Key::of(job_id))
            .fetch_one(&mut *tx)
            .await
            .map_err(self.db(&what))?;
            let text: String = row.try_get(0).map_err(self.db(&what))?;
            let corrupt = |e: serde_json::Error| EngineError::Corrupt {
                job_id: job_id.to_owned(),
                message: e.to_string(),
            };
            let mut spec: crate::job::JobSpec =
                super::compact::decode(super::compact::Doc::Spec, &text).map_err(corrupt)?;
            spec.payload = payload.clone();
            let text = super::compact::encode(super::compact::Doc::Spec, &spec).map_err(corrupt)?;
            sqlx::query(
                "UPDATE job_specs SET spec = ?2 WHERE seq = (SELECT seq FROM jobs WHERE id = ?1)",
            )
            .bind(Key::of(job_id))
            .bind(text)
            .execute(&mut *tx)
            .await
            .map_err(self.db(&what))?;
        }
        sqlx::query(
            "UPDATE jobs SET state = 'queued', attempts = 0, not_before_ms = ?2, \
             cancel_requested = 0, recovery_available = 0, result_pending = 0, updated_at_ms = ?2 \
             WHERE id = ?1",
        )
        .bind(Key::of(job_id))
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(self.db(&what))?;
        tx.commit()
            .await
            .map_err(self.db(format!("{what}: commit")))?;
        self.inner.wake.wake_all();
        Ok(())
    }

    /// The reap of a running lease, fenced on its token and on its stale deadline by this
    /// process's clock (`heartbeat_at_ms` `None`) or on its heartbeat still being
    /// `heartbeat_at_ms` (a reaper that confirmed it on its own monotonic clock).
    async fn reap_if(
        &self,
        lease: &ExpiredLease,
        action: &ReapAction,
        heartbeat_at_ms: Option<i64>,
    ) -> Result<bool, EngineError> {
        let job_id = lease.job_id.as_str();
        let what = format!("reap job `{job_id}`");
        let (next, delay, recovery) = match action {
            ReapAction::Requeue { delay } => (
                JobState::Queued,
                Some(to_i64(delay.as_millis() as u64)),
                false,
            ),
            ReapAction::RecoveryAvailable => (JobState::Stale, None, true),
            ReapAction::Dead => (JobState::Dead, None, false),
            ReapAction::Cancelled => (JobState::Cancelled, None, false),
        };
        let now = now_ms();
        let mut tx = self.begin(&what).await?;
        let state: Option<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "UPDATE jobs SET \
             state = CASE WHEN ?3 = 'queued' AND cancel_requested = 1 THEN 'cancelled' ELSE ?3 END, \
             not_before_ms = CASE WHEN ?3 = 'queued' THEN ?4 + ?5 ELSE not_before_ms END, \
             result_pending = CASE WHEN ?3 = 'queued' AND cancel_requested = 0 THEN 0 ELSE 1 END, \
             recovery_available = ?6, updated_at_ms = ?4, {CLEAR_LEASE}, \
             attempt_ended_at_ms = ?4, attempt_result = 'stale', \
             attempt_retry_delay_ms = CASE WHEN ?3 = 'queued' AND cancel_requested = 0 THEN ?5 END \
             WHERE id = ?1 AND fencing_token = ?2 AND state = 'running' \
             AND ((?7 IS NULL AND stale_deadline_ms < ?4) OR heartbeat_at_ms = ?7) RETURNING state"
        )))
        .bind(Key::of(job_id))
        .bind(to_i64(lease.fencing_token))
        .bind(next.as_str())
        .bind(now)
        .bind(delay.unwrap_or(0))
        .bind(recovery)
        .bind(heartbeat_at_ms)
        .fetch_optional(&mut *tx)
        .await
        .map_err(self.db(&what))?;
        let Some(state) = state else {
            return Ok(false);
        };
        tx.commit()
            .await
            .map_err(self.db(format!("{what}: commit")))?;
        if state == "queued" {
            self.inner.wake.wake_all();
        }
        Ok(true)
    }
}

#[async_trait::async_trait]
impl QueueMetrics for SqliteBackend {
    /// The `metrics` rows (schema v9, kept by triggers), the fresh presence locks and the oldest
    /// pending result (an index lookup): O(label sets + live workers), never O(jobs).
    async fn metrics(&self) -> Result<Option<crate::metrics::MetricsSnapshot>, EngineError> {
        let what = "read the queue's metrics";
        let now = crate::job::now_ms();
        let mut conn = self.inner.reader.acquire().await.map_err(self.db(what))?;
        let rows = sqlx::query(super::METRICS_SQL)
            .fetch_all(&mut *conn)
            .await
            .map_err(self.db(what))?;
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            out.push(crate::metrics::MetricRow {
                name: row.try_get(0).map_err(self.db(what))?,
                queue: row.try_get(1).map_err(self.db(what))?,
                workflow: row.try_get(2).map_err(self.db(what))?,
                stage: row.try_get(3).map_err(self.db(what))?,
                outcome: row.try_get(4).map_err(self.db(what))?,
                le_ms: row.try_get(5).map_err(self.db(what))?,
                value: row.try_get(6).map_err(self.db(what))?,
                sum_ms: row.try_get(7).map_err(self.db(what))?,
            });
        }
        let alive: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM locks WHERE name >= 'worker:' AND name < 'worker;' \
             AND heartbeat_at_ms + stale_after_ms >= ?1",
        )
        .bind(now)
        .fetch_one(&mut *conn)
        .await
        .map_err(self.db(what))?;
        let oldest: Option<i64> = sqlx::query_scalar(super::OLDEST_PENDING_RESULT_SQL)
            .fetch_one(&mut *conn)
            .await
            .map_err(self.db(what))?;
        Ok(Some(crate::metrics::MetricsSnapshot {
            rows: out,
            workers_alive: u64::try_from(alive).unwrap_or(0),
            oldest_pending_result_ms: oldest.map(|t| (now - t).max(0)),
        }))
    }
}
