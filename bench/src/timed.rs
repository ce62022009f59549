//! A profiling wrapper around a [`QueueBackend`]: counts and times every call the worker makes,
//! so a throughput figure can be broken down into backend round trips (used by the profile pass,
//! never by the measured trials).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use skillforge_engine::job::{
    CancelReply, Enqueued, ExpiredLease, Finish, FinishReply, HeartbeatReply, Job, JobSpec, JobState,
    LeaseView, LeasedJob, LockAcquire, WorkerIdentity,
};
use skillforge_engine::output::{NewOutput, OutputChunk};
use skillforge_engine::backend::prelude::*;
use skillforge_engine::{EngineError, ReapAction};
use skillforge_engine::retention::{PruneBatch, PruneRule, Tombstone};

#[derive(Debug, Clone, Default, Serialize)]
pub struct CallStats {
    pub calls: u64,
    pub total_ms: f64,
    pub mean_ms: f64,
    pub max_ms: f64,
    /// Jobs returned (lease only).
    pub items: u64,
}

#[derive(Default)]
pub struct Recorder(Mutex<BTreeMap<&'static str, CallStats>>);

impl Recorder {
    fn add(&self, what: &'static str, d: Duration, items: u64) {
        let ms = d.as_secs_f64() * 1e3;
        let mut m = self.0.lock().expect("recorder lock");
        let s = m.entry(what).or_default();
        s.calls += 1;
        s.total_ms += ms;
        s.max_ms = s.max_ms.max(ms);
        s.items += items;
        s.mean_ms = s.total_ms / s.calls as f64;
    }

    pub fn snapshot(&self) -> BTreeMap<String, CallStats> {
        self.0.lock().expect("recorder lock").iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect()
    }
}

pub struct Timed {
    pub inner: Arc<dyn QueueBackend>,
    pub rec: Arc<Recorder>,
}

macro_rules! timed {
    ($self:ident, $what:literal, $call:expr) => {{
        let t = Instant::now();
        let r = $call.await;
        $self.rec.add($what, t.elapsed(), 0);
        r
    }};
}

#[async_trait::async_trait]
impl QueueCore for Timed {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    async fn enqueue(&self, spec: &JobSpec) -> Result<Enqueued, EngineError> {
        timed!(self, "enqueue", self.inner.enqueue(spec))
    }
    async fn lease(&self, queue: &str, worker: &WorkerIdentity, max: usize, wait: Duration) -> Result<Vec<LeasedJob>, EngineError> {
        let t = Instant::now();
        let r = self.inner.lease(queue, worker, max, wait).await;
        let n = r.as_ref().map(|v| v.len() as u64).unwrap_or(0);
        self.rec.add(if n > 0 { "lease" } else { "lease (empty)" }, t.elapsed(), n);
        r
    }
    async fn lease_or_stop(
        &self,
        queue: &str,
        worker: &WorkerIdentity,
        max: usize,
        wait: Duration,
        stop: &tokio_util::sync::CancellationToken,
    ) -> Result<Vec<LeasedJob>, EngineError> {
        let t = Instant::now();
        let r = self.inner.lease_or_stop(queue, worker, max, wait, stop).await;
        let n = r.as_ref().map(|v| v.len() as u64).unwrap_or(0);
        self.rec.add(if n > 0 { "lease" } else { "lease (empty)" }, t.elapsed(), n);
        r
    }
    async fn heartbeat(&self, job_id: &str, fencing_token: u64) -> Result<HeartbeatReply, EngineError> {
        timed!(self, "heartbeat", self.inner.heartbeat(job_id, fencing_token))
    }
    async fn finish(&self, job_id: &str, fencing_token: u64, finish: &Finish) -> Result<FinishReply, EngineError> {
        timed!(self, "finish", self.inner.finish(job_id, fencing_token, finish))
    }
    async fn finish_and_lease(
        &self,
        job_id: &str,
        fencing_token: u64,
        finish: &Finish,
        queue: &str,
        worker: &WorkerIdentity,
    ) -> Result<(FinishReply, Option<LeasedJob>), EngineError> {
        let t = Instant::now();
        let r = self.inner.finish_and_lease(job_id, fencing_token, finish, queue, worker).await;
        let n = r.as_ref().map(|(_, next)| u64::from(next.is_some())).unwrap_or(0);
        self.rec.add(if n > 0 { "finish_and_lease" } else { "finish_and_lease (none)" }, t.elapsed(), n);
        r
    }
    async fn release(&self, job_id: &str, fencing_token: u64) -> Result<bool, EngineError> {
        timed!(self, "release", self.inner.release(job_id, fencing_token))
    }
    async fn get(&self, job_id: &str) -> Result<Option<Job>, EngineError> {
        self.inner.get(job_id).await
    }
    async fn now_ms(&self) -> Result<i64, EngineError> {
        self.inner.now_ms().await
    }
}

#[async_trait::async_trait]
impl QueueControl for Timed {
    async fn cancel(&self, job_id: &str) -> Result<CancelReply, EngineError> {
        self.inner.cancel(job_id).await
    }
    async fn retry(&self, job_id: &str) -> Result<(), EngineError> {
        self.inner.retry(job_id).await
    }
    async fn list(&self, state: Option<JobState>, limit: usize) -> Result<Vec<Job>, EngineError> {
        self.inner.list(state, limit).await
    }
    async fn leases(&self) -> Result<Vec<LeaseView>, EngineError> {
        self.inner.leases().await
    }
}

#[async_trait::async_trait]
impl QueueChanges for Timed {
    fn change_seq(&self) -> u64 {
        self.inner.change_seq()
    }
    async fn changed_since(&self, seen: u64, timeout: Duration) {
        self.inner.changed_since(seen, timeout).await;
    }
}

#[async_trait::async_trait]
impl QueueResults for Timed {
    async fn pending_results(&self, limit: usize) -> Result<Vec<Job>, EngineError> {
        self.inner.pending_results(limit).await
    }
    async fn ack_result(&self, job_id: &str, fencing_token: u64) -> Result<bool, EngineError> {
        self.inner.ack_result(job_id, fencing_token).await
    }
}

#[async_trait::async_trait]
impl QueueOutput for Timed {
    async fn append_output(&self, job_id: &str, fencing_token: u64, chunks: &[NewOutput]) -> Result<bool, EngineError> {
        timed!(self, "append_output", self.inner.append_output(job_id, fencing_token, chunks))
    }
    async fn read_output(&self, job_id: &str, after: Option<&str>, limit: usize) -> Result<Vec<OutputChunk>, EngineError> {
        self.inner.read_output(job_id, after, limit).await
    }
    async fn trim_output(&self, job_id: &str) -> Result<(), EngineError> {
        timed!(self, "trim_output", self.inner.trim_output(job_id))
    }
}

#[async_trait::async_trait]
impl QueueRecovery for Timed {
    async fn expired_leases(&self, limit: usize) -> Result<Vec<ExpiredLease>, EngineError> {
        timed!(self, "expired_leases", self.inner.expired_leases(limit))
    }
    async fn reap(&self, lease: &ExpiredLease, action: &ReapAction) -> Result<bool, EngineError> {
        timed!(self, "reap", self.inner.reap(lease, action))
    }
}

#[async_trait::async_trait]
impl QueueLocks for Timed {
    async fn acquire_lock(&self, name: &str, owner: &WorkerIdentity, heartbeat: Duration, stale_after: Duration) -> Result<LockAcquire, EngineError> {
        timed!(self, "acquire_lock", self.inner.acquire_lock(name, owner, heartbeat, stale_after))
    }
    async fn renew_lock(&self, name: &str, fencing_token: u64) -> Result<bool, EngineError> {
        timed!(self, "renew_lock", self.inner.renew_lock(name, fencing_token))
    }
    async fn release_lock(&self, name: &str, fencing_token: u64) -> Result<bool, EngineError> {
        timed!(self, "release_lock", self.inner.release_lock(name, fencing_token))
    }
    async fn reap_locks(&self) -> Result<Vec<String>, EngineError> {
        timed!(self, "reap_locks", self.inner.reap_locks())
    }
}

#[async_trait::async_trait]
impl QueueRetention for Timed {
    async fn prune(&self, rule: &PruneRule, limit: usize) -> Result<PruneBatch, EngineError> {
        timed!(self, "prune", self.inner.prune(rule, limit))
    }
    async fn prune_count(&self, rule: &PruneRule) -> Result<(u64, u64), EngineError> {
        self.inner.prune_count(rule).await
    }
    async fn tombstone(&self, job_id: &str) -> Result<Option<Tombstone>, EngineError> {
        self.inner.tombstone(job_id).await
    }
}

impl QueueRoutes for Timed {}

impl QueueTransfer for Timed {}

#[async_trait::async_trait]
impl QueueIntegrity for Timed {
    async fn check_namespace(&self) -> Result<Option<skillforge_engine::NamespaceLoss>, EngineError> {
        self.inner.check_namespace().await
    }
}

#[async_trait::async_trait]
impl QueueMetrics for Timed {
    async fn metrics(&self) -> Result<Option<skillforge_engine::metrics::MetricsSnapshot>, EngineError> {
        self.inner.metrics().await
    }
}
