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
/// ([`QueueIntegrity::check_settings`]): a setting changed under a running fleet is logged within
/// this long.
///
/// [`QueueIntegrity::check_settings`]: crate::backend::QueueIntegrity::check_settings
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

/// Longest a one-shot [`reap_once`] waits to confirm, on its own monotonic clock, that the
/// leases past their deadline by its wall clock really stopped heartbeating.
pub const ONE_SHOT_CONFIRM_MAX: Duration = Duration::from_secs(10);
/// How often a one-shot [`reap_once`] looks again while it confirms.
const ONE_SHOT_POLL: Duration = Duration::from_millis(100);

/// A one-shot reap for a command that runs no reaper loop (`train recover`): reaps every
/// expired job lease (up to 1 000) and every stale named lock, then returns.
///
/// On a queue whose processes share one clock (Redis) that is one pass. On one whose processes
/// judge deadlines by their own wall clocks (the embedded queue), a lease past its deadline by
/// this process's clock is reaped only once this call has seen its heartbeat unchanged for
/// [`StaleWatch::confirm_after`] on its monotonic clock, as the long-running reapers do (issue
/// 32 item 11): a forward step of this process's clock does not reap live work. The call then
/// waits up to that long (at most [`ONE_SHOT_CONFIRM_MAX`]), only when such a lease exists.
///
/// Safe to run from many processes at once: each reap is fenced on the lease's token and
/// re-checks the deadline atomically, so a lease is reaped once.
///
/// # Errors
/// The backend's, when it cannot be reached.
pub async fn reap_once(backend: &dyn QueueBackend) -> Result<Vec<Reaped>, EngineError> {
    if backend.clock_is_shared() {
        return reap_expired(backend).await;
    }
    let mut watch = StaleWatch::default();
    let started = tokio::time::Instant::now();
    let mut reaped = Vec::new();
    loop {
        reaped.extend(reap_watched(backend, &mut watch).await?);
        // What still looks stale by this clock, and how long its confirmation takes.
        let now = backend.now_ms().await?;
        let unconfirmed = backend
            .leases()
            .await?
            .iter()
            .filter(|v| v.status(now) == crate::job::LeaseStatus::Stale)
            .map(|v| {
                StaleWatch::confirm_after(
                    Duration::from_millis(v.heartbeat_ms),
                    Duration::from_millis(v.stale_after_ms),
                )
            })
            .max();
        match unconfirmed {
            Some(needed)
                if started.elapsed() < needed.min(ONE_SHOT_CONFIRM_MAX) + ONE_SHOT_POLL =>
            {
                tokio::time::sleep(ONE_SHOT_POLL).await;
            }
            _ => return Ok(reaped),
        }
    }
}

/// One pass by the backend's deadlines alone: every expired job lease (up to 1 000) and every
/// stale named lock (a queue with one clock for all its processes).
async fn reap_expired(backend: &dyn QueueBackend) -> Result<Vec<Reaped>, EngineError> {
    let mut reaped = Vec::new();
    for lease in backend.expired_leases(1_000).await? {
        let action = reap_action_for(&lease);
        if reap_one(backend, &lease, &action).await? {
            info!(
                job_id = %lease.job_id,
                fencing_token = lease.fencing_token,
                attempts = lease.attempts,
                action = %action,
                "stale lease reaped"
            );
            reaped.push(Reaped {
                job_id: lease.job_id,
                fencing_token: lease.fencing_token,
                action,
            });
        }
    }
    for name in backend.reap_locks().await? {
        info!(lock = %name, "stale named lock freed");
    }
    Ok(reaped)
}

/// Reaps one lease. A reap refused by the job's own record (not by the queue: the error is not
/// transient) would fail every pass and hold up every lease after it: the job is quarantined
/// instead ([`QueueIntegrity::quarantine`], logged once) and the pass goes on (issue 32 item 2).
///
/// # Errors
/// A transient backend error (the queue is unreachable): the pass stops and is retried.
///
/// [`QueueIntegrity::quarantine`]: crate::backend::QueueIntegrity::quarantine
async fn reap_one(
    backend: &dyn QueueBackend,
    lease: &crate::job::ExpiredLease,
    action: &ReapAction,
) -> Result<bool, EngineError> {
    match backend.reap(lease, action).await {
        Ok(reaped) => Ok(reaped),
        Err(e) if e.is_transient() => Err(e),
        Err(e) => {
            let reason = format!("the reaper cannot reap it: {e}");
            if backend.quarantine(&lease.job_id, &reason).await? {
                error!(job_id = %lease.job_id, reason = %reason,
                    "an unreadable job record was quarantined: `skillforge jobs list --state broken` lists it, `skillforge jobs purge ID` removes it");
            } else {
                warn!(job_id = %lease.job_id, error = %e, "stale lease not reaped");
            }
            Ok(false)
        }
    }
}

/// A long-running reaper's own record of when it last saw each running lease's heartbeat
/// change, on its monotonic clock (issue 32 item 11). On a queue whose processes judge
/// deadlines by their own wall clocks (the embedded queue, [`QueueRecovery::clock_is_shared`]
/// false), a lease past its deadline is reaped only once this reaper has also seen its
/// heartbeat unchanged for [`StaleWatch::confirm_after`]: a forward step of the reaper's clock
/// makes every lease look expired, but a live worker keeps heartbeating, so its lease keeps
/// changing and is never confirmed. A dead or paused worker's heartbeat stops changing, and a
/// reaper that watched it all along confirms it by the time its deadline passes; a reaper that
/// just started waits up to the confirmation time. Named locks are watched and freed the same
/// way, one by one ([`QueueLocks::reap_lock`]). A backward step, which would stretch
/// deadlines, is corrected for job leases and named locks alike: one whose heartbeat this
/// reaper has seen unchanged for its whole `stale_after` is reaped whatever the wall clock says
/// ([`QueueRecovery::reap_unchanged`], [`QueueLocks::reap_lock_unchanged`], fenced on that
/// heartbeat). The one-shot [`reap_once`] watches for the confirmation time only.
///
/// [`QueueRecovery::clock_is_shared`]: crate::backend::QueueRecovery::clock_is_shared
/// [`QueueLocks::reap_lock`]: crate::backend::QueueLocks::reap_lock
/// [`QueueLocks::reap_lock_unchanged`]: crate::backend::QueueLocks::reap_lock_unchanged
/// [`QueueRecovery::reap_unchanged`]: crate::backend::QueueRecovery::reap_unchanged
#[derive(Debug, Default)]
pub struct StaleWatch {
    /// (job, token) → (heartbeat seen, when it was first seen with that heartbeat).
    seen: std::collections::HashMap<(String, u64), (i64, tokio::time::Instant)>,
}

impl StaleWatch {
    /// How long a heartbeat must be seen unchanged before its lease counts as stale here:
    /// three heartbeat periods, at most `stale_after` (a live worker beats every period).
    pub fn confirm_after(heartbeat: Duration, stale_after: Duration) -> Duration {
        heartbeat.saturating_mul(3).min(stale_after)
    }

    /// The watch's key of a job lease or a named lock (they have separate name spaces).
    fn key(kind: crate::job::LeaseKind, name: &str) -> String {
        match kind {
            crate::job::LeaseKind::Job => format!("job:{name}"),
            crate::job::LeaseKind::Lock => format!("lock:{name}"),
        }
    }

    /// Records the heartbeats of the running job leases and held named locks `leases` seen
    /// `now` (dropping those no longer held).
    pub fn observe(&mut self, leases: &[crate::job::LeaseView], now: tokio::time::Instant) {
        let mut current = std::collections::HashMap::with_capacity(leases.len());
        for view in leases {
            let key = (Self::key(view.kind, &view.name), view.lease.fencing_token);
            let since = match self.seen.get(&key) {
                Some((heartbeat, since)) if *heartbeat == view.lease.heartbeat_at_ms => *since,
                _ => now,
            };
            current.insert(key, (view.lease.heartbeat_at_ms, since));
        }
        self.seen = current;
    }

    /// Whether the job lease (job, token) has been seen with an unchanged heartbeat for `needed` by `now`.
    pub fn confirmed(
        &self,
        job_id: &str,
        token: u64,
        needed: Duration,
        now: tokio::time::Instant,
    ) -> bool {
        self.confirmed_as(crate::job::LeaseKind::Job, job_id, token, needed, now)
    }

    /// [`Self::confirmed`] for a job lease or a named lock.
    pub fn confirmed_as(
        &self,
        kind: crate::job::LeaseKind,
        name: &str,
        token: u64,
        needed: Duration,
        now: tokio::time::Instant,
    ) -> bool {
        self.seen
            .get(&(Self::key(kind, name), token))
            .is_some_and(|(_, since)| now.saturating_duration_since(*since) >= needed)
    }
}

/// One pass of a long-running reaper: on a queue without a shared clock, each expired lease is
/// reaped only when `watch` confirms it (see [`StaleWatch`]); on one with a shared clock, every
/// expired lease and stale lock.
///
/// # Errors
/// The backend's, when it cannot be reached.
pub async fn reap_watched(
    backend: &dyn QueueBackend,
    watch: &mut StaleWatch,
) -> Result<Vec<Reaped>, EngineError> {
    if backend.clock_is_shared() {
        return reap_expired(backend).await;
    }
    let views = backend.leases().await?;
    let now = tokio::time::Instant::now();
    watch.observe(&views, now);
    let mut reaped = Vec::new();
    for lease in backend.expired_leases(1_000).await? {
        let view = views
            .iter()
            .find(|v| v.kind == crate::job::LeaseKind::Job && v.name == lease.job_id);
        let needed = view.map_or(Duration::ZERO, |v| {
            StaleWatch::confirm_after(
                Duration::from_millis(v.heartbeat_ms),
                Duration::from_millis(v.stale_after_ms),
            )
        });
        if view.is_some() && !watch.confirmed(&lease.job_id, lease.fencing_token, needed, now) {
            debug!(job_id = %lease.job_id, fencing_token = lease.fencing_token,
                   "lease past its deadline by this clock but its heartbeat moved lately: not reaped yet");
            continue;
        }
        let action = reap_action_for(&lease);
        if reap_one(backend, &lease, &action).await? {
            info!(
                job_id = %lease.job_id,
                fencing_token = lease.fencing_token,
                attempts = lease.attempts,
                action = %action,
                "stale lease reaped"
            );
            reaped.push(Reaped {
                job_id: lease.job_id,
                fencing_token: lease.fencing_token,
                action,
            });
        }
    }
    // A lease whose heartbeat this reaper has seen unchanged for its whole `stale_after`, on its
    // monotonic clock, is stale whatever its deadline by the wall clock says: a reaper whose
    // clock stepped back does not wait out the step.
    let expired: std::collections::HashSet<String> =
        reaped.iter().map(|r| r.job_id.clone()).collect();
    for view in views
        .iter()
        .filter(|v| v.kind == crate::job::LeaseKind::Job && !expired.contains(v.name.as_str()))
    {
        let stale_after = Duration::from_millis(view.stale_after_ms);
        if !watch.confirmed(&view.name, view.lease.fencing_token, stale_after, now) {
            continue;
        }
        let Some(job) = backend.get(&view.name).await? else {
            continue;
        };
        if job.state != crate::job::JobState::Running
            || job.fencing_token != view.lease.fencing_token
        {
            continue;
        }
        let lease = crate::job::ExpiredLease {
            job_id: job.id.clone(),
            fencing_token: job.fencing_token,
            attempts: job.attempts,
            max_attempts: job.spec.max_attempts,
            idempotent: job.spec.idempotent,
            cancel_requested: job.cancel_requested,
        };
        let action = reap_action_for(&lease);
        if backend
            .reap_unchanged(&lease, &action, view.lease.heartbeat_at_ms)
            .await?
        {
            info!(job_id = %lease.job_id, fencing_token = lease.fencing_token, attempts = lease.attempts, action = %action,
                  "stale lease reaped (its heartbeat stopped for stale_after by this reaper's own clock)");
            reaped.push(Reaped {
                job_id: lease.job_id,
                fencing_token: lease.fencing_token,
                action,
            });
        }
    }
    // Named locks the same way, one by one: a stepped clock must not free a live holder's lock
    // (forward), nor keep a dead holder's (backward).
    let backend_now = backend.now_ms().await?;
    for view in views
        .iter()
        .filter(|v| v.kind == crate::job::LeaseKind::Lock)
    {
        let (name, token, heartbeat_at) = (
            &view.name,
            view.lease.fencing_token,
            view.lease.heartbeat_at_ms,
        );
        let stale_after = Duration::from_millis(view.stale_after_ms);
        if watch.confirmed_as(crate::job::LeaseKind::Lock, name, token, stale_after, now) {
            if backend
                .reap_lock_unchanged(name, token, heartbeat_at)
                .await?
            {
                info!(lock = %name, "stale named lock freed (its heartbeat stopped for stale_after by this reaper's own clock)");
            }
            continue;
        }
        if view.status(backend_now) != crate::job::LeaseStatus::Stale {
            continue;
        }
        let needed =
            StaleWatch::confirm_after(Duration::from_millis(view.heartbeat_ms), stale_after);
        if watch.confirmed_as(crate::job::LeaseKind::Lock, name, token, needed, now)
            && backend.reap_lock(name, token, heartbeat_at).await?
        {
            info!(lock = %name, "stale named lock freed");
        }
    }
    Ok(reaped)
}

/// Runs [`reap_watched`] every `every` until `shutdown` fires, and checks after each pass that the
/// queue still holds its data ([`QueueIntegrity::check_namespace`]; a loss is logged as an error,
/// once) and, every [`SETTINGS_CHECK_EVERY`], that the server's settings keep it
/// ([`QueueIntegrity::check_settings`]; a setting turning unsafe is logged as an error once per
/// change, its repair as info). Backend errors are logged and retried.
/// A pass in flight when `shutdown` fires is dropped (each reap is atomic and fenced, so a
/// dropped pass applied some reaps or none, never half of one), so a shutdown with the queue
/// unreachable does not wait out the backend's retries.
///
/// [`QueueIntegrity::check_namespace`]: crate::backend::QueueIntegrity::check_namespace
/// [`QueueIntegrity::check_settings`]: crate::backend::QueueIntegrity::check_settings
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
    let mut watch = StaleWatch::default();
    loop {
        let check_settings = settings_checked.is_none_or(|at| at.elapsed() >= SETTINGS_CHECK_EVERY);
        let unsafe_setting = &mut unsafe_setting;
        let pass = async {
            if check_settings {
                match backend.check_settings().await {
                    Ok(now) if now != *unsafe_setting => {
                        match &now {
                            Some(problem) => {
                                error!(setting = %problem.setting, value = %problem.value, "{problem}")
                            }
                            None => info!("the queue server's settings keep jobs again"),
                        }
                        *unsafe_setting = now;
                    }
                    Ok(_) => {}
                    Err(e) => debug!(error = %e, "queue server settings check failed"),
                }
            }
            match reap_watched(backend, &mut watch).await {
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::StaleWatch;
    use crate::job::{Lease, LeaseKind, LeaseView};

    fn view(job: &str, token: u64, heartbeat_at_ms: i64) -> LeaseView {
        LeaseView {
            kind: LeaseKind::Job,
            name: job.to_owned(),
            lease: Lease {
                owner_worker: "w".into(),
                owner_host: "h".into(),
                owner_pid: 1,
                fencing_token: token,
                acquired_at_ms: 0,
                heartbeat_at_ms,
            },
            heartbeat_ms: 1000,
            stale_after_ms: 15_000,
        }
    }

    #[test]
    fn a_heartbeat_that_keeps_moving_is_never_confirmed_and_one_that_stopped_is() {
        let t0 = tokio::time::Instant::now();
        let need = StaleWatch::confirm_after(Duration::from_secs(1), Duration::from_secs(15));
        assert_eq!(need, Duration::from_secs(3));
        let mut w = StaleWatch::default();
        // A live worker beats every second: each pass sees a new heartbeat.
        for i in 0..10_i64 {
            let now = t0 + Duration::from_secs(i as u64);
            w.observe(&[view("live", 1, 1_000 * i), view("dead", 1, 0)], now);
            assert!(!w.confirmed("live", 1, need, now), "pass {i}");
            assert_eq!(w.confirmed("dead", 1, need, now), i >= 3, "pass {i}");
        }
        // A new token is a new lease: watched from scratch.
        let now = t0 + Duration::from_secs(10);
        w.observe(&[view("dead", 2, 0)], now);
        assert!(!w.confirmed("dead", 2, need, now));
        assert!(
            !w.confirmed("live", 1, need, now),
            "a lease no longer running is forgotten"
        );
        assert_eq!(
            StaleWatch::confirm_after(Duration::from_secs(10), Duration::from_secs(15)),
            Duration::from_secs(15)
        );
    }
}
