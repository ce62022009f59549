//! The reaper: finds leases past `stale_after`, frees them and re-queues, parks or dead-letters their jobs.

use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use crate::backend::{QueueBackend, ReapAction};
use crate::error::EngineError;
use crate::policy::reap_action_for;

/// How often a reaper looks for stale leases by default.
pub const DEFAULT_REAP_EVERY: Duration = Duration::from_millis(250);

/// How often a reaper loop re-checks the queue server's settings
/// ([`QueueBackend::check_settings`]): a setting changed under a running fleet is logged within
/// this long.
pub const SETTINGS_CHECK_EVERY: Duration = Duration::from_secs(2);

/// One reaped lease, for logs and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reaped {
    /// The job whose lease went stale.
    pub job_id: String,
    /// The stale lease's fencing token.
    pub fencing_token: u64,
    /// What was done.
    pub action: ReapAction,
}

/// One pass: reaps every expired job lease (up to 1 000) and every stale named lock.
///
/// Safe to run from many processes at once: each reap is fenced on the lease's token and
/// re-checks the deadline atomically, so a lease is reaped once.
///
/// # Errors
/// The backend's, when it cannot be reached.
pub async fn reap_once(backend: &dyn QueueBackend) -> Result<Vec<Reaped>, EngineError> {
    let mut reaped = Vec::new();
    for lease in backend.expired_leases(1_000).await? {
        let action = reap_action_for(&lease);
        if backend.reap(&lease, &action).await? {
            info!(
                job_id = %lease.job_id,
                fencing_token = lease.fencing_token,
                attempts = lease.attempts,
                action = ?action,
                "stale lease reaped"
            );
            reaped.push(Reaped { job_id: lease.job_id, fencing_token: lease.fencing_token, action });
        }
    }
    for name in backend.reap_locks().await? {
        info!(lock = %name, "stale named lock freed");
    }
    Ok(reaped)
}

/// Runs [`reap_once`] every `every` until `shutdown` fires, and checks after each pass that the
/// queue still holds its data ([`QueueBackend::check_namespace`]; a loss is logged as an error,
/// once) and, every [`SETTINGS_CHECK_EVERY`], that the server's settings keep it
/// ([`QueueBackend::check_settings`]; a setting turning unsafe is logged as an error once per
/// change, its repair as info). Backend errors are logged and retried.
/// A pass in flight when `shutdown` fires is dropped (each reap is atomic and fenced, so a
/// dropped pass applied some reaps or none, never half of one), so a shutdown with the queue
/// unreachable does not wait out the backend's retries.
pub async fn run_reaper(backend: &dyn QueueBackend, every: Duration, shutdown: CancellationToken) {
    run_reaper_reporting(backend, every, shutdown, None).await;
}

/// [`run_reaper`], also sending each namespace loss to `losses` (when given), so a control
/// plane can say which of its own pending work the queue lost (issue 12 item 6).
pub async fn run_reaper_reporting(
    backend: &dyn QueueBackend,
    every: Duration,
    shutdown: CancellationToken,
    losses: Option<tokio::sync::mpsc::UnboundedSender<crate::backend::NamespaceLoss>>,
) {
    // The process refused to start on an unsafe setting, so the first one seen is a change.
    let mut unsafe_setting: Option<crate::backend::UnsafeSetting> = None;
    let mut settings_checked: Option<tokio::time::Instant> = None;
    loop {
        let check_settings = settings_checked.is_none_or(|at| at.elapsed() >= SETTINGS_CHECK_EVERY);
        let unsafe_setting = &mut unsafe_setting;
        let pass = async {
            if check_settings {
                match backend.check_settings().await {
                    Ok(now) if now != *unsafe_setting => {
                        match &now {
                            Some(problem) => error!(setting = %problem.setting, value = %problem.value, "{problem}"),
                            None => info!("the queue server's settings keep jobs again"),
                        }
                        *unsafe_setting = now;
                    }
                    Ok(_) => {}
                    Err(e) => debug!(error = %e, "queue server settings check failed"),
                }
            }
            match reap_once(backend).await {
                Ok(r) if !r.is_empty() => debug!(n = r.len(), "reaper pass"),
                Ok(_) => {}
                Err(e) => warn!(error = %e, "reaper pass failed"),
            }
            // A queue that lost its data is said once, loudly (the backend reports each loss once).
            match backend.check_namespace().await {
                Ok(Some(loss)) => {
                    error!(namespace = %loss.namespace, previous_epoch = %loss.previous_epoch,
                           current_epoch = %loss.current_epoch, "{loss}");
                    if let Some(tx) = &losses {
                        let _ = tx.send(loss);
                    }
                }
                Ok(None) => {}
                Err(e) => debug!(error = %e, "namespace check failed"),
            }
        };
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = pass => {}
        }
        if check_settings {
            settings_checked = Some(tokio::time::Instant::now());
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
    }
}
