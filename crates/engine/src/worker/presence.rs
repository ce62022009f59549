//! A worker's presence while alive: the lock `worker:<id>` (shown by `skillforge locks`) and the
//! refresh of its labels record in the transfer area.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::backend::QueueBackend;
use crate::job::{LockAcquire, WorkerIdentity};

/// Prefix of the named lock each worker holds while alive (its presence in `skillforge locks`).
pub const PRESENCE_LOCK_PREFIX: &str = "worker:";
/// Heartbeat period of the presence lock.
pub const PRESENCE_HEARTBEAT: Duration = Duration::from_secs(1);
/// Stale threshold of the presence lock.
pub const PRESENCE_STALE_AFTER: Duration = Duration::from_secs(5);

/// Holds the presence lock `worker:<id>` ([`PRESENCE_LOCK_PREFIX`] + `identity.worker_id`) until
/// `stop` fires, then releases it: acquired with [`PRESENCE_HEARTBEAT`] / [`PRESENCE_STALE_AFTER`],
/// renewed every [`PRESENCE_HEARTBEAT`], re-acquired when a renewal finds it lost. Queue errors
/// are logged and retried at the next beat, never returned. Used by [`Worker`] and by the apalis
/// adapter (`skillforge-engine-apalis`), so both show in `skillforge locks` the same way.
pub async fn hold_presence(
    backend: Arc<dyn QueueBackend>,
    identity: WorkerIdentity,
    stop: CancellationToken,
) {
    let name = format!("{PRESENCE_LOCK_PREFIX}{}", identity.worker_id);
    let mut token = None;
    loop {
        match token {
            None => match backend
                .acquire_lock(&name, &identity, PRESENCE_HEARTBEAT, PRESENCE_STALE_AFTER)
                .await
            {
                Ok(LockAcquire::Acquired { fencing_token }) => token = Some(fencing_token),
                Ok(LockAcquire::Held(_)) => {
                    warn!(lock = %name, "presence lock held by another process")
                }
                Err(e) => debug!(error = %e, "presence lock not taken"),
            },
            Some(t) => match backend.renew_lock(&name, t).await {
                Ok(true) => {}
                Ok(false) => token = None,
                Err(e) => debug!(error = %e, "presence lock not renewed"),
            },
        }
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(PRESENCE_HEARTBEAT) => {}
        }
    }
    if let Some(t) = token {
        let _ = backend.release_lock(&name, t).await;
    }
}

/// Re-writes a worker's labels record (`key` in `area`, see [`crate::labels::labels_key`]) every
/// third of the transfer area's TTL (at least every second, at most every 10 minutes) until
/// `stop` fires, so the record never expires under a live worker (issue 20: a routing note must
/// not say a long-running worker lacks its labels). A failed write is logged and retried at the
/// next period.
pub async fn refresh_labels(
    area: &dyn crate::transfer::TransferArea,
    key: &str,
    labels: &[u8],
    stop: CancellationToken,
) {
    let every = (area.limits().ttl / 3).clamp(Duration::from_secs(1), Duration::from_secs(600));
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
        if let Err(e) = area.put_record(key, labels).await {
            debug!(error = %e, "labels record not refreshed");
        }
    }
}
