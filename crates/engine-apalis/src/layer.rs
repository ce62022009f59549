//! The adapter's tower layer: runs each task's handler under its lease and sends the fenced finish.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::task::{Context, Poll};

use apalis_core::error::{AbortError, BoxDynError};
use apalis_core::layers::{Layer, Service};
use apalis_core::task::Task;
use futures::FutureExt;
use futures::future::BoxFuture;
use tracing::{Instrument, info_span};

use crate::lease::{Attempt, AttemptSlot, Verdict};

/// The layer [`SkillforgeBackend`](crate::SkillforgeBackend) hands to apalis as its middleware
/// (apalis puts it outside every layer of the `WorkerBuilder`, so it sees the handler's final
/// result).
///
/// For each task it:
/// * runs the handler while the per-job heartbeat (started at lease time) renews the lease every
///   `heartbeat_ms` of the job's spec, independently of the handler's progress;
/// * drops (aborts) the handler's future when an operator cancels the job or the lease is lost,
///   and when the spec's `timeout_ms` elapses;
/// * catches a panic of the handler (counted as a failed attempt);
/// * then sends the fenced finish through the engine policy: `Ok` ⇒ `succeeded`; `Err` ⇒ `queued`
///   with backoff, or `dead` after the last attempt; an apalis [`AbortError`] ⇒ `failed` without
///   retry; operator cancel ⇒ `cancelled`. A superseded lease's finish is rejected and logged.
///
/// Its response is the handler's; an aborted or timed-out handler yields an `AbortError`
/// (apalis status `Killed`). Tasks that carry no skillforge lease pass through untouched.
#[derive(Debug, Clone, Copy, Default)]
pub struct LeaseLayer;

impl<S> Layer<S> for LeaseLayer {
    type Service = LeaseService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        LeaseService { inner }
    }
}

/// The service of [`LeaseLayer`].
#[derive(Debug, Clone)]
pub struct LeaseService<S> {
    inner: S,
}

impl<S, Args> Service<Task<Args>> for LeaseService<S>
where
    S: Service<Task<Args>>,
    S::Future: Send + 'static,
    S::Error: Into<BoxDynError> + Send + 'static,
    S::Response: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxDynError;
    type Future = BoxFuture<'static, Result<S::Response, BoxDynError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, task: Task<Args>) -> Self::Future {
        let attempt = task.data().get::<AttemptSlot>().and_then(AttemptSlot::take);
        let handler = self.inner.call(task);
        match attempt {
            None => Box::pin(async move { handler.await.map_err(Into::into) }),
            Some(attempt) => Box::pin(run_attempt(attempt, handler)),
        }
    }
}

/// Runs `handler` under `attempt`'s lease, then settles the attempt.
async fn run_attempt<R, E: Into<BoxDynError>>(
    attempt: Attempt,
    handler: impl Future<Output = Result<R, E>> + Send,
) -> Result<R, BoxDynError> {
    let lease = attempt.lease.clone();
    let span = info_span!("job", job_id = %lease.job_id, queue = %lease.queue, attempt = lease.attempt,
                          fencing_token = lease.fencing_token, worker = %lease.worker.worker_id);
    async move {
        tracing::info!("job started");
        let ran = if lease.is_cancelled() {
            None
        } else {
            tokio::select! {
                biased;
                () = lease.cancelled() => None,
                r = tokio::time::timeout(lease.timeout, AssertUnwindSafe(handler).catch_unwind()) => Some(r),
            }
        };
        match ran {
            None => {
                let why = attempt.abort_reason().unwrap_or("aborted");
                let message = format!("job `{}` attempt {}: {why}", lease.job_id, lease.attempt);
                attempt.finish(Verdict::Aborted).await;
                Err(Box::new(AbortError::new(message)) as BoxDynError)
            }
            Some(Err(_elapsed)) => {
                attempt.finish(Verdict::TimedOut).await;
                let message = format!("job `{}` attempt {}: timed out after {:?}", lease.job_id, lease.attempt, lease.timeout);
                Err(Box::new(AbortError::new(message)) as BoxDynError)
            }
            Some(Ok(Err(panic))) => {
                // A panicking handler uses its attempt like a failure (not a hand-back), so a job
                // that always panics ends `dead` instead of looping.
                let message = format!("handler panicked: {}", panic_message(panic.as_ref()));
                attempt.finish(Verdict::Failed(message.clone())).await;
                Err(message.into())
            }
            Some(Ok(Ok(Ok(response)))) => {
                attempt.finish(Verdict::Passed).await;
                Ok(response)
            }
            Some(Ok(Ok(Err(e)))) => {
                let e: BoxDynError = e.into();
                let verdict = if e.downcast_ref::<AbortError>().is_some() {
                    Verdict::Refused(e.to_string())
                } else {
                    Verdict::Failed(e.to_string())
                };
                attempt.finish(verdict).await;
                Err(e)
            }
        }
    }
    .instrument(span)
    .await
}

/// The text of a caught panic's payload.
fn panic_message(panic: &(dyn Any + Send)) -> &str {
    if let Some(s) = panic.downcast_ref::<&str>() {
        s
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s
    } else {
        "non-text panic payload"
    }
}
