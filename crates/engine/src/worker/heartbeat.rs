//! The lease heartbeat of a running job, independent of the job's own work (DESIGN §4).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::backend::QueueBackend;
use crate::job::HeartbeatReply;

/// What a running job learns from its [`heartbeat_loop`]: `cancel` fires on an operator
/// cancel, a lost lease or a lost lock; the flags say which (`cancelled_by_operator`, or
/// `lease_lost` for either loss). Clones share the same token and flags.
#[derive(Debug, Clone)]
pub struct LeaseSignals {
    /// Fired when the job must stop.
    pub cancel: CancellationToken,
    /// Set when the stop is an operator's `jobs cancel` (the heartbeat reply `CancelRequested`).
    pub cancelled_by_operator: Arc<AtomicBool>,
    /// Set when the lease (heartbeat reply `LeaseLost`: stale and reaped) or a held lock was lost.
    pub lease_lost: Arc<AtomicBool>,
    /// Where the loop counts its heartbeats (`worker --metrics`); `None` counts nothing.
    pub health: Option<Arc<crate::health::WorkerHealth>>,
}

impl LeaseSignals {
    /// Signals that fire `cancel`, both flags unset.
    pub fn new(cancel: CancellationToken) -> Self {
        Self {
            cancel,
            cancelled_by_operator: Arc::default(),
            lease_lost: Arc::default(),
            health: None,
        }
    }
}

/// Renews the lease of `job_id` under fencing token `token`, and the named locks in `held`
/// (name, token), every `every` until `done` fires, independently of the job's own work (DESIGN
/// §4: a busy job is never mistaken for a dead one). Reports through `signals`: an operator
/// cancel fires `cancel` and goes on renewing; a lost lease fires it and ends the loop; a lost
/// lock fires it. Queue errors are logged and retried at the next beat, never returned. Used by
/// [`Worker`] and by the apalis adapter (`skillforge-engine-apalis`, with no locks).
pub async fn heartbeat_loop(
    backend: Arc<dyn QueueBackend>,
    job_id: String,
    token: u64,
    every: Duration,
    signals: LeaseSignals,
    held: Arc<tokio::sync::Mutex<Vec<(String, u64)>>>,
    done: CancellationToken,
) {
    let LeaseSignals {
        cancel,
        cancelled_by_operator,
        lease_lost,
        health,
    } = signals;
    let count = |answered: bool, lost: bool| {
        if let Some(h) = &health {
            h.heartbeat(answered, lost);
        }
    };
    loop {
        tokio::select! {
            () = done.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
        for (name, lock_token) in held.lock().await.iter() {
            match backend.renew_lock(name, *lock_token).await {
                Ok(true) => {}
                Ok(false) => {
                    warn!(job_id = %job_id, lock = %name, "lock lost (stale and taken over): stopping the job");
                    lease_lost.store(true, Ordering::SeqCst);
                    cancel.cancel();
                }
                Err(e) => {
                    warn!(job_id = %job_id, lock = %name, error = %e, "lock renewal failed; retrying")
                }
            }
        }
        let reply = backend.heartbeat(&job_id, token).await;
        count(
            reply.is_ok(),
            matches!(reply, Ok(HeartbeatReply::LeaseLost)),
        );
        match reply {
            Ok(HeartbeatReply::Renewed) => {}
            Ok(HeartbeatReply::CancelRequested) => {
                if !cancelled_by_operator.swap(true, Ordering::SeqCst) {
                    info!(job_id = %job_id, "cancel requested: stopping the job");
                }
                cancel.cancel();
            }
            Ok(HeartbeatReply::LeaseLost) => {
                warn!(job_id = %job_id, fencing_token = token, "lease lost (stale and reaped): stopping the job");
                lease_lost.store(true, Ordering::SeqCst);
                cancel.cancel();
                return;
            }
            Err(e) => warn!(job_id = %job_id, error = %e, "heartbeat failed; retrying"),
        }
    }
}
