//! A finish whose reply is lost on the way back (the queue applied it, the worker saw an error):
//! found by the fault soak (issue 21) with Redis paused, where the worker then exited 3 at a
//! clean shutdown claiming a lease it had left to go stale.

use super::*;
use skillforge_engine::RunnerRegistry;
use skillforge_engine::retention::{PruneBatch, PruneRule, Tombstone};
use skillforge_engine::worker::{Worker, WorkerConfig};
use skillforge_engine::{CancelReply as Cancel, Enqueued, Job, LeaseView, LeasedJob};
use skillforge_runner::{RunContext, RunSpec, Runner, RunnerError};

/// The real SQLite backend, except that every finish's reply is lost after the finish applied.
struct LostFinishReplies(SqliteBackend);

fn lost() -> EngineError {
    EngineError::Backend {
        backend: "sqlite",
        message: "reply lost (injected)".into(),
    }
}

#[async_trait::async_trait]
impl QueueCore for LostFinishReplies {
    fn name(&self) -> &'static str {
        self.0.name()
    }
    async fn enqueue(&self, spec: &JobSpec) -> Result<Enqueued, EngineError> {
        self.0.enqueue(spec).await
    }
    async fn lease(
        &self,
        queue: &str,
        worker: &WorkerIdentity,
        max: usize,
        wait: Duration,
    ) -> Result<Vec<LeasedJob>, EngineError> {
        self.0.lease(queue, worker, max, wait).await
    }
    async fn lease_or_stop(
        &self,
        queue: &str,
        worker: &WorkerIdentity,
        max: usize,
        wait: Duration,
        stop: &tokio_util::sync::CancellationToken,
    ) -> Result<Vec<LeasedJob>, EngineError> {
        self.0.lease_or_stop(queue, worker, max, wait, stop).await
    }
    async fn heartbeat(
        &self,
        job_id: &str,
        fencing_token: u64,
    ) -> Result<HeartbeatReply, EngineError> {
        self.0.heartbeat(job_id, fencing_token).await
    }
    async fn finish(
        &self,
        job_id: &str,
        fencing_token: u64,
        finish: &Finish,
    ) -> Result<FinishReply, EngineError> {
        self.0.finish(job_id, fencing_token, finish).await?;
        Err(lost())
    }
    async fn release(&self, job_id: &str, fencing_token: u64) -> Result<bool, EngineError> {
        self.0.release(job_id, fencing_token).await
    }
    async fn get(&self, job_id: &str) -> Result<Option<Job>, EngineError> {
        self.0.get(job_id).await
    }
    async fn now_ms(&self) -> Result<i64, EngineError> {
        self.0.now_ms().await
    }
}

#[async_trait::async_trait]
impl QueueControl for LostFinishReplies {
    async fn cancel(&self, job_id: &str) -> Result<Cancel, EngineError> {
        self.0.cancel(job_id).await
    }
    async fn retry(&self, job_id: &str) -> Result<(), EngineError> {
        self.0.retry(job_id).await
    }
    async fn list(&self, state: Option<JobState>, limit: usize) -> Result<Vec<Job>, EngineError> {
        self.0.list(state, limit).await
    }
    async fn leases(&self) -> Result<Vec<LeaseView>, EngineError> {
        self.0.leases().await
    }
}

#[async_trait::async_trait]
impl QueueChanges for LostFinishReplies {
    fn change_seq(&self) -> u64 {
        self.0.change_seq()
    }
    async fn changed_since(&self, seen: u64, timeout: Duration) {
        self.0.changed_since(seen, timeout).await;
    }
}

#[async_trait::async_trait]
impl QueueResults for LostFinishReplies {
    async fn pending_results(&self, limit: usize) -> Result<Vec<Job>, EngineError> {
        self.0.pending_results(limit).await
    }
    async fn ack_result(&self, job_id: &str, fencing_token: u64) -> Result<bool, EngineError> {
        self.0.ack_result(job_id, fencing_token).await
    }
}

#[async_trait::async_trait]
impl QueueOutput for LostFinishReplies {
    async fn append_output(
        &self,
        job_id: &str,
        fencing_token: u64,
        chunks: &[skillforge_engine::output::NewOutput],
    ) -> Result<bool, EngineError> {
        self.0.append_output(job_id, fencing_token, chunks).await
    }
    async fn read_output(
        &self,
        job_id: &str,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<skillforge_engine::output::OutputChunk>, EngineError> {
        self.0.read_output(job_id, after, limit).await
    }
    async fn trim_output(&self, job_id: &str) -> Result<(), EngineError> {
        self.0.trim_output(job_id).await
    }
}

#[async_trait::async_trait]
impl QueueRecovery for LostFinishReplies {
    async fn expired_leases(&self, limit: usize) -> Result<Vec<ExpiredLease>, EngineError> {
        self.0.expired_leases(limit).await
    }
    async fn reap(&self, lease: &ExpiredLease, action: &ReapAction) -> Result<bool, EngineError> {
        self.0.reap(lease, action).await
    }
}

#[async_trait::async_trait]
impl QueueLocks for LostFinishReplies {
    async fn acquire_lock(
        &self,
        name: &str,
        owner: &WorkerIdentity,
        heartbeat: Duration,
        stale_after: Duration,
    ) -> Result<LockAcquire, EngineError> {
        self.0
            .acquire_lock(name, owner, heartbeat, stale_after)
            .await
    }
    async fn renew_lock(&self, name: &str, fencing_token: u64) -> Result<bool, EngineError> {
        self.0.renew_lock(name, fencing_token).await
    }
    async fn release_lock(&self, name: &str, fencing_token: u64) -> Result<bool, EngineError> {
        self.0.release_lock(name, fencing_token).await
    }
    async fn reap_locks(&self) -> Result<Vec<String>, EngineError> {
        self.0.reap_locks().await
    }
}

#[async_trait::async_trait]
impl QueueRetention for LostFinishReplies {
    async fn prune(&self, rule: &PruneRule, limit: usize) -> Result<PruneBatch, EngineError> {
        self.0.prune(rule, limit).await
    }
    async fn prune_count(&self, rule: &PruneRule) -> Result<(u64, u64), EngineError> {
        self.0.prune_count(rule).await
    }
    async fn tombstone(&self, job_id: &str) -> Result<Option<Tombstone>, EngineError> {
        self.0.tombstone(job_id).await
    }
}

impl QueueRoutes for LostFinishReplies {}

impl QueueTransfer for LostFinishReplies {
    fn shares_disk(&self) -> bool {
        self.0.shares_disk()
    }
}

impl QueueIntegrity for LostFinishReplies {}

struct Passes;

#[async_trait::async_trait]
impl Runner for Passes {
    fn kind(&self) -> &'static str {
        "noop"
    }
    async fn run(&self, _spec: &RunSpec, _ctx: &RunContext) -> Result<RunOutcome, RunnerError> {
        Ok(outcome(ExitClass::Passed))
    }
}

/// The finish landed (the job is `succeeded` under the worker's token) though its reply was
/// lost: at shutdown the worker finds the lease no longer running and reports nothing left
/// stale (it used to list the job and exit 3). A lease still running under its token would be.
#[tokio::test]
async fn a_finish_whose_reply_was_lost_but_landed_is_not_reported_left_stale() {
    let dir = tempfile::tempdir().unwrap();
    let backend: Arc<dyn QueueBackend> = Arc::new(LostFinishReplies(open(&dir).await));
    let id = backend.enqueue(&spec("default")).await.unwrap().job_id;
    let config = WorkerConfig::new("lost-reply", dir.path().join("scratch"));
    let worker = Worker::new(
        config,
        backend.clone(),
        RunnerRegistry::new().with(Arc::new(Passes)),
    );
    let stop = tokio_util::sync::CancellationToken::new();
    let running = tokio::spawn(worker.run(stop.clone()));
    let deadline = Instant::now() + Duration::from_secs(30);
    while backend
        .get(&id)
        .await
        .unwrap()
        .is_none_or(|j| j.state != JobState::Succeeded)
    {
        assert!(Instant::now() < deadline, "the job never succeeded");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    stop.cancel();
    let report = running.await.unwrap();
    assert_eq!(report.left_stale, vec![], "{report:?}");
}
