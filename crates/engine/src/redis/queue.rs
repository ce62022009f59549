//! The queue traits' implementation for [`RedisBackend`] ([`crate::backend`], one `impl` per
//! trait): each call one Lua script (or one read), retried on connection-level failures (see the
//! parent module for the key layout).

use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::id::{public, stored};
use super::{
    RETRY_BUDGET, RedisBackend, SCAN_BATCH, STATE_INDEXED, decode, parse_state, reap_action_name,
    transient, unexpected,
};
use crate::backend::prelude::*;
use crate::backend::{NamespaceLoss, ReapAction, UnreadableRecord, UnsafeSetting};
use crate::error::EngineError;
use crate::job::{
    CancelReply, Enqueued, ExpiredLease, Finish, FinishReply, HeartbeatReply, Job, JobSpec,
    JobState, Lease, LeaseKind, LeaseView, LeasedJob, LockAcquire, WorkerIdentity, new_job_id,
};
use crate::output::{NewOutput, OutputChunk};
use crate::retention::{PruneBatch, PruneRule, Tombstone};

#[async_trait::async_trait]
impl QueueCore for RedisBackend {
    fn name(&self) -> &'static str {
        "redis"
    }

    async fn enqueue(&self, spec: &JobSpec) -> Result<Enqueued, EngineError> {
        self.note_route(&spec.queue).await?;
        let id = new_job_id();
        let parts = super::spec::encode(spec)?;
        let mut inv = self.scripts.enqueue.prepare_invoke();
        inv.arg(&self.prefix)
            .arg(stored(&id).as_ref())
            .arg(&spec.queue)
            .arg(spec.idempotency_key.as_deref().unwrap_or(""))
            .arg(spec.max_attempts)
            .arg(spec.heartbeat_ms)
            .arg(spec.stale_after_ms)
            .arg(u8::from(spec.idempotent))
            .arg(
                spec.not_before_ms
                    .map(|t| t.to_string())
                    .unwrap_or_default(),
            )
            .arg(&spec.workflow)
            .arg(&spec.stage)
            .arg(&spec.kind)
            .arg(parts.payload)
            .arg(spec.timeout_ms)
            .arg(parts.extra);
        let what = format!("enqueue on queue `{}`", spec.queue);
        let (job_id, created): (String, u8) =
            with_retry!(self, what, |c| inv.invoke_async(&mut c))?;
        Ok(Enqueued {
            job_id: public(&job_id),
            created: created == 1,
        })
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
        let mut inv = self.scripts.heartbeat.prepare_invoke();
        inv.arg(&self.prefix)
            .arg(stored(job_id).as_ref())
            .arg(fencing_token);
        let what = format!("heartbeat of job `{job_id}`");
        let reply: String = with_retry!(self, what, |c| inv.invoke_async(&mut c))?;
        match reply.as_str() {
            "renewed" => Ok(HeartbeatReply::Renewed),
            "cancel" => Ok(HeartbeatReply::CancelRequested),
            "lost" => Ok(HeartbeatReply::LeaseLost),
            _ => Err(unexpected("heartbeat", &[reply])),
        }
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
        let mut inv = self.scripts.release.prepare_invoke();
        inv.arg(&self.prefix)
            .arg(stored(job_id).as_ref())
            .arg(fencing_token);
        let what = format!("release of job `{job_id}`");
        let applied: u8 = with_retry!(self, what, |c| inv.invoke_async(&mut c))?;
        Ok(applied == 1)
    }

    async fn get(&self, job_id: &str) -> Result<Option<Job>, EngineError> {
        Ok(self
            .fetch_jobs(&[stored(job_id).into_owned()])
            .await?
            .into_iter()
            .next())
    }

    async fn now_ms(&self) -> Result<i64, EngineError> {
        let cmd = ::redis::cmd("TIME");
        let (secs, micros): (i64, i64) =
            with_retry!(self, "read server time", |c| cmd.query_async(&mut c))?;
        Ok(secs * 1000 + micros / 1000)
    }
}

#[async_trait::async_trait]
impl QueueControl for RedisBackend {
    async fn cancel(&self, job_id: &str) -> Result<CancelReply, EngineError> {
        let mut inv = self.scripts.cancel.prepare_invoke();
        inv.arg(&self.prefix).arg(stored(job_id).as_ref());
        let what = format!("cancel of job `{job_id}`");
        let reply: Vec<String> = with_retry!(self, what, |c| inv.invoke_async(&mut c))?;
        match reply.as_slice() {
            [tag] if tag == "cancelled" => Ok(CancelReply::Cancelled),
            [tag] if tag == "requested" => Ok(CancelReply::Requested),
            [tag, state] if tag == "terminal" => {
                Ok(CancelReply::AlreadyTerminal(parse_state(job_id, state)?))
            }
            [tag] if tag == "missing" => Err(EngineError::NotFound(job_id.to_owned())),
            _ => Err(unexpected("cancel", &reply)),
        }
    }

    async fn retry(&self, job_id: &str) -> Result<(), EngineError> {
        self.retry_replacing(job_id, None).await
    }

    async fn fail_queued(
        &self,
        job_id: &str,
        outcome: &skillforge_runner::RunOutcome,
    ) -> Result<bool, EngineError> {
        let encoded = super::outcome_json::encode(job_id, outcome)?;
        let mut inv = self.scripts.fail_queued.prepare_invoke();
        inv.arg(&self.prefix)
            .arg(stored(job_id).as_ref())
            .arg(&encoded);
        let what = format!("fail of queued job `{job_id}`");
        let reply: Vec<String> = with_retry!(self, what, |c| inv.invoke_async(&mut c))?;
        match reply.as_slice() {
            [tag] if tag == "failed" => Ok(true),
            [tag, _] if tag == "not_queued" => Ok(false),
            [tag] if tag == "missing" => Err(EngineError::NotFound(job_id.to_owned())),
            _ => Err(unexpected("fail_queued", &reply)),
        }
    }

    async fn retry_with_payload(
        &self,
        job_id: &str,
        payload: &serde_json::Value,
    ) -> Result<(), EngineError> {
        let json = serde_json::to_string(payload)
            .map_err(|e| EngineError::redis(format!("encode job payload: {e}")))?;
        self.retry_replacing(job_id, Some(&json)).await
    }

    async fn list(&self, state: Option<JobState>, limit: usize) -> Result<Vec<Job>, EngineError> {
        Ok(self.list_readable(state, limit).await?.0)
    }

    async fn counts(&self) -> Result<crate::backend::JobCounts, EngineError> {
        let mut inv = self.scripts.counts.prepare_invoke();
        inv.arg(&self.prefix).arg(super::LIST_WALK_BUDGET);
        let (queued, running, succeeded, failed, dead, cancelled, stale, per): (
            u64,
            u64,
            u64,
            u64,
            u64,
            u64,
            u64,
            Vec<String>,
        ) = with_retry!(self, "count jobs", |c| inv.invoke_async(&mut c))?;
        let mut counts = crate::backend::JobCounts::default();
        for (state, n) in [
            (JobState::Queued, queued),
            (JobState::Running, running),
            (JobState::Succeeded, succeeded),
            (JobState::Failed, failed),
            (JobState::Dead, dead),
            (JobState::Cancelled, cancelled),
            (JobState::Stale, stale),
        ] {
            counts.add(state, n);
        }
        for pair in per.chunks(2) {
            if let [queue, n] = pair {
                counts.add_queued(queue, n.parse().map_err(|_| unexpected("counts", &per))?);
            }
        }
        Ok(counts)
    }

    async fn leases(&self) -> Result<Vec<LeaseView>, EngineError> {
        let mut inv = self.scripts.leases.prepare_invoke();
        inv.arg(&self.prefix);
        let (jobs, locks): (Vec<Vec<String>>, Vec<Vec<String>>) =
            with_retry!(self, "list leases", |c| inv.invoke_async(&mut c))?;
        let mut out = Vec::with_capacity(jobs.len() + locks.len());
        for row in &jobs {
            let mut view = decode::lease_row(LeaseKind::Job, row)?;
            view.name = public(&view.name);
            out.push(view);
        }
        for row in &locks {
            out.push(decode::lease_row(LeaseKind::Lock, row)?);
        }
        Ok(out)
    }
}

#[async_trait::async_trait]
impl QueueChanges for RedisBackend {
    fn change_seq(&self) -> u64 {
        self.changes.generation()
    }

    /// Wakes on a message on the namespace's `changed` channel (any process's finish, cancel,
    /// reap), within one round trip; at most `timeout` when a message was lost (the caller's
    /// fallback poll).
    async fn changed_since(&self, seen: u64, timeout: Duration) {
        self.changes.changed_since(seen, timeout).await;
    }
}

#[async_trait::async_trait]
impl QueueResults for RedisBackend {
    async fn pending_results(&self, limit: usize) -> Result<Vec<Job>, EngineError> {
        self.pending_results_skipping(limit, &std::collections::HashSet::new())
            .await
    }

    async fn pending_results_skipping(
        &self,
        limit: usize,
        skip: &std::collections::HashSet<String>,
    ) -> Result<Vec<Job>, EngineError> {
        // Passed over by id before any hash is read: a backlog of results that cannot be
        // applied yet costs one index read, not their hashes (issue 32 item 3).
        let ids: Vec<String> = self
            .zrange(
                &format!("{}results", self.prefix),
                false,
                limit.saturating_add(skip.len()),
            )
            .await?
            .into_iter()
            .filter(|id| skip.is_empty() || !skip.contains(&public(id)))
            .take(limit)
            .collect();
        // The index and the hashes are read in two round trips: a job retried (and maybe leased
        // again) in between is no longer a pending result. Handed out in its new state, it was
        // applied as `queued` or `running` under its token, and its real result under that
        // token was then dropped as a duplicate (found by the fault soak, issue 21).
        let fetched = self.fetch_jobs_lenient(&ids).await?;
        // A result that cannot be read would stop every pass: quarantined, logged once (by the
        // process that moved it), and the others flow (issue 32 item 2).
        let gone = fetched.missing.iter().map(|id| {
            (
                id.clone(),
                public(id),
                "the job's record is gone (evicted or deleted)".to_owned(),
            )
        });
        let bad = fetched.unreadable.iter().map(|u| {
            (
                stored(&u.job_id).into_owned(),
                u.job_id.clone(),
                u.reason.clone(),
            )
        });
        for (stored_id, job_id, reason) in gone.chain(bad) {
            if self.quarantine_stored(&stored_id, &reason, false).await? {
                tracing::error!(job_id = %job_id, reason = %reason,
                    "an unreadable job record was quarantined: its result is not applied; \
                     `skillforge jobs list --state broken` lists it, `skillforge jobs purge ID` removes it");
            }
        }
        Ok(fetched
            .jobs
            .into_iter()
            .filter(|j| j.state.is_terminal() || j.state == JobState::Stale)
            .collect())
    }

    async fn ack_result(&self, job_id: &str, fencing_token: u64) -> Result<bool, EngineError> {
        let mut inv = self.scripts.ack.prepare_invoke();
        inv.arg(&self.prefix)
            .arg(stored(job_id).as_ref())
            .arg(fencing_token);
        let what = format!("acknowledge result of job `{job_id}` at fencing token {fencing_token}");
        let reply: Vec<String> = with_retry!(self, what, |c| inv.invoke_async(&mut c))?;
        match reply.as_slice() {
            [tag] if tag == "acked" => Ok(true),
            [tag, _current] if tag == "fenced" => Ok(false),
            [tag] if tag == "missing" => Err(EngineError::NotFound(job_id.to_owned())),
            _ => Err(unexpected("ack_result", &reply)),
        }
    }

    async fn rerun_result(
        &self,
        job_id: &str,
        fencing_token: u64,
        reason: &str,
    ) -> Result<bool, EngineError> {
        let mut inv = self.scripts.rerun.prepare_invoke();
        inv.arg(&self.prefix)
            .arg(stored(job_id).as_ref())
            .arg(fencing_token)
            .arg(reason);
        let what = format!("run job `{job_id}` again after fencing token {fencing_token}");
        let reply: Vec<String> = with_retry!(self, what, |c| inv.invoke_async(&mut c))?;
        match reply.as_slice() {
            [tag] if tag == "queued" => Ok(true),
            [tag] if tag == "fenced" => Ok(false),
            [tag] if tag == "missing" => Err(EngineError::NotFound(job_id.to_owned())),
            _ => Err(unexpected("rerun_result", &reply)),
        }
    }
}

#[async_trait::async_trait]
impl QueueOutput for RedisBackend {
    /// `XREAD BLOCK` on the job's output stream beside the `changed` wait
    /// (`redis/output.rs`).
    async fn output_since(&self, job_id: &str, after: Option<&str>, seen: u64, timeout: Duration) {
        self.wait_output_stream(job_id, after, seen, timeout).await;
    }

    async fn append_output(
        &self,
        job_id: &str,
        fencing_token: u64,
        chunks: &[NewOutput],
    ) -> Result<bool, EngineError> {
        self.append_output_stream(job_id, fencing_token, chunks)
            .await
    }

    async fn read_output(
        &self,
        job_id: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<OutputChunk>, EngineError> {
        self.read_output_stream(job_id, after, limit).await
    }

    async fn trim_output(&self, job_id: &str) -> Result<(), EngineError> {
        self.trim_output_stream(job_id).await
    }
}

#[async_trait::async_trait]
impl QueueRecovery for RedisBackend {
    async fn expired_leases(&self, limit: usize) -> Result<Vec<ExpiredLease>, EngineError> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        let mut inv = self.scripts.expired.prepare_invoke();
        inv.arg(&self.prefix).arg(limit);
        let rows: Vec<(String, u64, u32, u32, u8, u8)> =
            with_retry!(self, "list expired leases", |c| inv.invoke_async(&mut c))?;
        Ok(rows
            .into_iter()
            .map(
                |(job_id, fencing_token, attempts, max_attempts, idempotent, cancel)| {
                    ExpiredLease {
                        job_id: public(&job_id),
                        fencing_token,
                        attempts,
                        max_attempts,
                        idempotent: idempotent == 1,
                        cancel_requested: cancel == 1,
                    }
                },
            )
            .collect())
    }

    async fn reap(&self, lease: &ExpiredLease, action: &ReapAction) -> Result<bool, EngineError> {
        let (name, delay_ms) = reap_action_name(action);
        let mut inv = self.scripts.reap.prepare_invoke();
        inv.arg(&self.prefix)
            .arg(stored(&lease.job_id).as_ref())
            .arg(lease.fencing_token)
            .arg(name)
            .arg(delay_ms);
        let what = format!("reap of job `{}`", lease.job_id);
        let applied: u8 = with_retry!(self, what, |c| inv.invoke_async(&mut c))?;
        Ok(applied == 1)
    }

    fn clock_is_shared(&self) -> bool {
        // Every script stamps and judges with the server's `TIME`.
        true
    }
}

#[async_trait::async_trait]
impl QueueLocks for RedisBackend {
    async fn acquire_lock(
        &self,
        name: &str,
        owner: &WorkerIdentity,
        heartbeat: Duration,
        stale_after: Duration,
    ) -> Result<LockAcquire, EngineError> {
        let mut inv = self.scripts.lock_acquire.prepare_invoke();
        inv.arg(&self.prefix)
            .arg(name)
            .arg(&owner.worker_id)
            .arg(&owner.host)
            .arg(owner.pid)
            .arg(heartbeat.as_millis() as u64)
            .arg(stale_after.as_millis() as u64);
        let what = format!("acquire lock `{name}`");
        let reply: Vec<String> = with_retry!(self, what, |c| inv.invoke_async(&mut c))?;
        let bad = || unexpected("lock acquire", &reply);
        match reply.as_slice() {
            [tag, token] if tag == "acquired" => Ok(LockAcquire::Acquired {
                fencing_token: token.parse().map_err(|_| bad())?,
            }),
            [tag, worker, host, pid, token, acquired, heartbeat] if tag == "held" => {
                Ok(LockAcquire::Held(Lease {
                    owner_worker: worker.clone(),
                    owner_host: host.clone(),
                    owner_pid: pid.parse().map_err(|_| bad())?,
                    fencing_token: token.parse().map_err(|_| bad())?,
                    acquired_at_ms: acquired.parse().map_err(|_| bad())?,
                    heartbeat_at_ms: heartbeat.parse().map_err(|_| bad())?,
                }))
            }
            _ => Err(bad()),
        }
    }

    async fn renew_lock(&self, name: &str, fencing_token: u64) -> Result<bool, EngineError> {
        let mut inv = self.scripts.lock_renew.prepare_invoke();
        inv.arg(&self.prefix).arg(name).arg(fencing_token);
        let what = format!("renew lock `{name}`");
        let renewed: u8 = with_retry!(self, what, |c| inv.invoke_async(&mut c))?;
        Ok(renewed == 1)
    }

    async fn release_lock(&self, name: &str, fencing_token: u64) -> Result<bool, EngineError> {
        let mut inv = self.scripts.lock_release.prepare_invoke();
        inv.arg(&self.prefix).arg(name).arg(fencing_token);
        let what = format!("release lock `{name}`");
        let released: u8 = with_retry!(self, what, |c| inv.invoke_async(&mut c))?;
        Ok(released == 1)
    }

    async fn reap_locks(&self) -> Result<Vec<String>, EngineError> {
        let mut freed = Vec::new();
        loop {
            let mut inv = self.scripts.reap_locks.prepare_invoke();
            inv.arg(&self.prefix).arg(SCAN_BATCH);
            let batch: Vec<String> =
                with_retry!(self, "reap stale locks", |c| inv.invoke_async(&mut c))?;
            let done = batch.len() < SCAN_BATCH;
            freed.extend(batch);
            if done {
                return Ok(freed);
            }
        }
    }
}

#[async_trait::async_trait]
impl QueueRetention for RedisBackend {
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
impl QueueRoutes for RedisBackend {
    async fn routes(&self) -> Result<Vec<String>, EngineError> {
        self.all_routes().await
    }

    async fn queued_on(&self, queue: &str, limit: usize) -> Result<Vec<Job>, EngineError> {
        self.jobs_queued_on(queue, limit).await
    }
}

impl QueueTransfer for RedisBackend {
    fn transfer_area(&self) -> Option<std::sync::Arc<dyn crate::transfer::TransferArea>> {
        Some(std::sync::Arc::new(self.transfer.clone()))
    }

    fn shares_disk(&self) -> bool {
        false
    }
}

#[async_trait::async_trait]
impl QueueIntegrity for RedisBackend {
    async fn list_readable(
        &self,
        state: Option<JobState>,
        limit: usize,
    ) -> Result<(Vec<Job>, Vec<UnreadableRecord>), EngineError> {
        if state == Some(JobState::Running) {
            // Running jobs are indexed by the `leases` set (by heartbeat deadline), not by a
            // state set: newest first by creation time, like the other states.
            let ids = self
                .zrange(&format!("{}leases", self.prefix), false, usize::MAX)
                .await?;
            let fetched = self.fetch_jobs_lenient(&ids).await?;
            let mut jobs: Vec<Job> = fetched
                .jobs
                .into_iter()
                .filter(|j| j.state == JobState::Running)
                .collect();
            jobs.sort_by(|a, b| (b.created_at_ms, &b.id).cmp(&(a.created_at_ms, &a.id)));
            jobs.truncate(limit);
            return Ok((jobs, fetched.unreadable));
        }
        let ids = match state {
            None => self.ids_in_any_state(limit).await?,
            Some(s) if STATE_INDEXED.contains(&s) => {
                self.zrange(&format!("{}state:{}", self.prefix, s.as_str()), true, limit)
                    .await?
            }
            Some(s) => self.ids_in_unindexed_state(s, limit).await?,
        };
        let mut seen = std::collections::HashSet::new();
        let ids: Vec<String> = ids
            .into_iter()
            .filter(|id| seen.insert(id.clone()))
            .collect();
        let fetched = self.fetch_jobs_lenient(&ids).await?;
        let mut jobs: Vec<Job> = fetched
            .jobs
            .into_iter()
            // The index and the hashes are read separately: drop a job that changed state meanwhile.
            .filter(|j| state.is_none_or(|s| j.state == s))
            .collect();
        if matches!(state, None | Some(JobState::Queued | JobState::Succeeded)) {
            // Gathered from several sets: newest first by creation time, like the other states.
            jobs.sort_by(|a, b| (b.created_at_ms, &b.id).cmp(&(a.created_at_ms, &a.id)));
            jobs.dedup_by(|a, b| a.id == b.id);
            jobs.truncate(limit);
        }
        let mut unreadable = fetched.unreadable;
        unreadable.dedup_by(|a, b| a.job_id == b.job_id);
        Ok((jobs, unreadable))
    }

    async fn quarantined(&self, limit: usize) -> Result<Vec<UnreadableRecord>, EngineError> {
        self.quarantined_records(limit).await
    }

    async fn quarantine(&self, job_id: &str, reason: &str) -> Result<bool, EngineError> {
        self.quarantine_stored(&stored(job_id), reason, true).await
    }

    async fn purge(&self, job_id: &str) -> Result<bool, EngineError> {
        self.purge_record(job_id).await
    }

    fn namespace_epoch(&self) -> Option<String> {
        Some(
            self.epoch
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone(),
        )
    }

    async fn check_settings(&self) -> Result<Option<UnsafeSetting>, EngineError> {
        self.eviction_setting().await
    }

    async fn check_namespace(&self) -> Result<Option<NamespaceLoss>, EngineError> {
        let (now, _, jobs) = self.read_epoch().await?;
        let mut known = self
            .epoch
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if *known == now {
            return Ok(None);
        }
        let previous = std::mem::replace(&mut *known, now.clone());
        Ok(Some(NamespaceLoss {
            namespace: self.prefix.trim_end_matches(':').to_owned(),
            previous_epoch: previous,
            current_epoch: now,
            jobs_now: jobs,
        }))
    }
}

impl RedisBackend {
    /// `retry`, with the payload JSON replaced in the same script when `payload` is given.
    async fn retry_replacing(
        &self,
        job_id: &str,
        payload: Option<&str>,
    ) -> Result<(), EngineError> {
        let mut inv = self.scripts.retry.prepare_invoke();
        inv.arg(&self.prefix).arg(stored(job_id).as_ref());
        if let Some(payload) = payload {
            inv.arg(payload);
        }
        let what = format!("retry of job `{job_id}`");
        let reply: Vec<String> = with_retry!(self, what, |c| inv.invoke_async(&mut c))?;
        match reply.as_slice() {
            [tag] if tag == "ok" => Ok(()),
            [tag, state] if tag == "invalid" => Err(EngineError::InvalidState {
                job_id: job_id.to_owned(),
                state: parse_state(job_id, state)?,
                message: "only failed, dead, cancelled or stale jobs can be retried".to_owned(),
            }),
            [tag] if tag == "missing" => Err(EngineError::NotFound(job_id.to_owned())),
            _ => Err(unexpected("retry", &reply)),
        }
    }
}

#[async_trait::async_trait]
impl QueueMetrics for RedisBackend {
    /// The `metrics` hash (kept by each transition's script), the fresh presence locks and the
    /// oldest pending result, in one script call: O(fields + held locks), never O(jobs).
    async fn metrics(&self) -> Result<Option<crate::metrics::MetricsSnapshot>, EngineError> {
        let mut inv = self.scripts.metrics.prepare_invoke();
        inv.arg(&self.prefix);
        let (_now, alive, lag, fields): (String, u64, String, Vec<String>) =
            with_retry!(self, "read the queue's metrics", |c| inv
                .invoke_async(&mut c))?;
        let mut rows: std::collections::BTreeMap<[String; 6], crate::metrics::MetricRow> =
            std::collections::BTreeMap::new();
        for pair in fields.chunks(2) {
            let [field, value] = pair else { continue };
            let value: i64 = value.parse().unwrap_or(0);
            let parts: Vec<&str> = field.split('\u{1f}').collect();
            let (key, is_sum) = match parts.as_slice() {
                [n, q, w, g, o, le] => ([*n, *q, *w, *g, *o, *le], false),
                [n, q, w, g, o, le, "sum"] => ([*n, *q, *w, *g, *o, *le], true),
                _ => continue,
            };
            let row =
                rows.entry(key.map(str::to_owned))
                    .or_insert_with(|| crate::metrics::MetricRow {
                        name: key[0].to_owned(),
                        queue: key[1].to_owned(),
                        workflow: key[2].to_owned(),
                        stage: key[3].to_owned(),
                        outcome: key[4].to_owned(),
                        le_ms: key[5].parse().unwrap_or(0),
                        value: 0,
                        sum_ms: 0,
                    });
            if is_sum {
                row.sum_ms = value;
            } else {
                row.value = value;
            }
        }
        Ok(Some(crate::metrics::MetricsSnapshot {
            rows: rows.into_values().collect(),
            workers_alive: alive,
            oldest_pending_result_ms: lag.parse().ok(),
        }))
    }
}
