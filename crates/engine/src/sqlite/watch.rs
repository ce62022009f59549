//! Wake-ups for idle `lease` calls and for waiters on job changes (`changed_since`): in-process
//! through a [`Notify`], cross-process by polling `PRAGMA data_version` on a dedicated connection.
//!
//! `data_version` changes whenever another connection (of this or any other process) commits
//! to the file, so a poll every [`POLL_EVERY`] (every [`POLL_EVERY_QUIET`] once nothing changed
//! for a while) detects another process's enqueue or finish within a few milliseconds. The
//! watcher only polls while some `lease` call or change waiter is waiting.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, SqliteConnection};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Poll period of `PRAGMA data_version` while a lease call waits and the file changed recently
/// (within [`RECENT`]): a steady stream of jobs from another process is seen within ~1 ms.
pub(super) const POLL_EVERY: Duration = Duration::from_millis(1);
/// Poll period while nothing changed for [`RECENT`] (half the idle polling cost).
pub(super) const POLL_EVERY_QUIET: Duration = Duration::from_millis(2);
/// How long after the last seen change polling stays at [`POLL_EVERY`].
const RECENT: Duration = Duration::from_secs(2);

/// Period of the background WAL checkpoint.
pub(super) const CHECKPOINT_EVERY: Duration = Duration::from_millis(200);

/// Shared between the backend, its waiters and the watcher task.
#[derive(Debug, Default)]
pub(super) struct Wake {
    /// Signalled (to every current waiter) when jobs may have become due.
    pub(super) changed: Notify,
    /// Signalled (to every current waiter) when some job's state may have changed.
    jobs_changed: Notify,
    /// Moves with every `jobs_changed` signal (`QueueBackend::change_seq`).
    generation: AtomicU64,
    /// How many `lease` calls and change waiters are waiting.
    waiters: AtomicUsize,
    /// Tells the idle watcher that a waiter arrived.
    waiter_arrived: Notify,
}

/// Counts one waiting `lease` call while alive.
pub(super) struct WaiterGuard<'a>(&'a Wake);

impl Drop for WaiterGuard<'_> {
    fn drop(&mut self) {
        self.0.waiters.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Wake {
    /// Registers a waiting `lease` call until the guard is dropped.
    pub(super) fn waiting(&self) -> WaiterGuard<'_> {
        self.waiters.fetch_add(1, Ordering::SeqCst);
        self.waiter_arrived.notify_one();
        WaiterGuard(self)
    }

    /// Wakes every waiting `lease` call of this process (and every change waiter: what wakes a
    /// lease is a change too).
    pub(super) fn wake_all(&self) {
        self.changed.notify_waiters();
        self.jobs_changed();
    }

    /// Wakes every change waiter of this process (not the idle `lease` calls: a finish that
    /// re-queued nothing gives them no work).
    pub(super) fn jobs_changed(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.jobs_changed.notify_waiters();
    }

    /// See `QueueBackend::change_seq`.
    pub(super) fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// See `QueueBackend::changed_since`. While it waits, it counts as a waiter, so the watcher
    /// polls `data_version` and another process's commit wakes it too (a watcher that was idle
    /// re-baselines on its first poll, which wakes: a commit made before the registration is
    /// not missed).
    pub(super) async fn changed_since(&self, seen: u64, timeout: Duration) {
        let notified = self.jobs_changed.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let _waiting = self.waiting();
        if self.generation() != seen {
            return;
        }
        tokio::select! {
            () = &mut notified => {}
            () = tokio::time::sleep(timeout) => {}
        }
    }
}

/// Spawns the `data_version` watcher; it stops when `stop` is cancelled.
pub(super) fn spawn_watcher(options: SqliteConnectOptions, wake: Arc<Wake>, stop: CancellationToken) {
    tokio::spawn(async move {
        let mut conn: Option<SqliteConnection> = None;
        let mut last: Option<i64> = None;
        let mut changed_at = tokio::time::Instant::now();
        loop {
            if wake.waiters.load(Ordering::SeqCst) == 0 {
                // Commits made while nobody polled are unknown: the next poll re-baselines.
                last = None;
                tokio::select! {
                    _ = wake.waiter_arrived.notified() => {}
                    _ = stop.cancelled() => break,
                }
                continue;
            }
            if conn.is_none() {
                match options.connect().await {
                    Ok(c) => conn = Some(c),
                    Err(e) => {
                        tracing::warn!(error = %e, "sqlite queue watcher: cannot open its connection");
                        tokio::select! {
                            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                            _ = stop.cancelled() => break,
                        }
                        continue;
                    }
                }
            }
            if let Some(c) = conn.as_mut() {
                match sqlx::query_scalar::<_, i64>("PRAGMA data_version").fetch_one(&mut *c).await {
                    Ok(v) => {
                        // A fresh baseline also wakes: a commit may have landed between a
                        // waiter's own check and this first read.
                        if last != Some(v) {
                            wake.wake_all();
                            last = Some(v);
                            changed_at = tokio::time::Instant::now();
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "sqlite queue watcher: data_version poll failed");
                        conn = None;
                        last = None;
                        // A change may have been missed: let waiters re-check.
                        wake.wake_all();
                    }
                }
            }
            let every = if changed_at.elapsed() < RECENT { POLL_EVERY } else { POLL_EVERY_QUIET };
            tokio::select! {
                _ = tokio::time::sleep(every) => {}
                _ = stop.cancelled() => break,
            }
        }
    });
}

/// Spawns the WAL checkpointer: `PRAGMA wal_checkpoint(PASSIVE)` every [`CHECKPOINT_EVERY`] on a
/// dedicated connection, until `stop` is cancelled. Connections are opened with
/// `wal_autocheckpoint = 0`, so the checkpoint (copying WAL pages back and its fsyncs) runs here
/// instead of inside a lease, finish or enqueue transaction. A passive checkpoint waits for no
/// reader or writer; several processes on one file each run one (they take turns).
pub(super) fn spawn_checkpointer(options: SqliteConnectOptions, stop: CancellationToken) {
    tokio::spawn(async move {
        let mut conn: Option<SqliteConnection> = None;
        loop {
            tokio::select! {
                _ = tokio::time::sleep(CHECKPOINT_EVERY) => {}
                _ = stop.cancelled() => break,
            }
            if conn.is_none() {
                match options.connect().await {
                    Ok(c) => conn = Some(c),
                    Err(e) => {
                        tracing::debug!(error = %e, "sqlite queue checkpointer: cannot open its connection");
                        continue;
                    }
                }
            }
            if let Some(c) = conn.as_mut()
                && let Err(e) = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)").execute(&mut *c).await
            {
                tracing::debug!(error = %e, "sqlite queue checkpoint failed");
                conn = None;
            }
        }
    });
}
