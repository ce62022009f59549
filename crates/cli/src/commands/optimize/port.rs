//! The CLI's [`JobPort`]: enqueue under the idempotency key, wait with the shared waiter
//! (an in-process worker on the embedded queue when none is live), apply results.

use std::sync::Arc;

use skillforge_engine::{Job, JobSpec, QueueBackend};
use skillforge_workflows::optimize::OptimizeError;
use skillforge_workflows::optimize::port::JobPort;

use crate::control::waiter::await_job;
use crate::context::Context;

/// Submits to and waits on the context's queue.
pub struct CliJobPort<'a> {
    /// The CLI context.
    pub ctx: &'a Context,
    /// The queue backend.
    pub backend: Arc<dyn QueueBackend>,
}

#[async_trait::async_trait]
impl JobPort for CliJobPort<'_> {
    async fn submit(&self, spec: JobSpec) -> Result<String, OptimizeError> {
        // an existing job under the key is returned as is: a resumed run finds what it dispatched
        self.backend.enqueue(&spec).await.map(|e| e.job_id).map_err(|e| OptimizeError::Queue(format!("enqueue {} job: {e}", spec.stage)))
    }

    async fn wait(&self, id: &str) -> Result<Job, OptimizeError> {
        await_job(self.ctx, &self.backend, id, true).await.map_err(|e| OptimizeError::Queue(format!("wait for job {id}: {:#}", e.error)))
    }
}
