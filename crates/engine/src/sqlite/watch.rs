//! Wake-ups for idle `lease` calls and for waiters on job changes (`changed_since`): in-process
//! through a [`Notify`], cross-process by polling `PRAGMA data_version` on a dedicated connection.
//!
//! `data_version` changes whenever another connection (of this or any other process) commits
//! to the file, so a poll every [`POLL_EVERY`] (every [`POLL_EVERY_QUIET`] once nothing changed
//! for a while) detects another process's enqueue or finish within a few milliseconds. The
//! watcher only polls while some `lease` call or change waiter is waiting.

use std::sync::Arc;
use std::time::Duration;

use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, SqliteConnection};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::changes::{ChangeSignal, WaiterGuard};

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
    /// The change signal of `change_seq`/`changed_since`; its waiter count also counts the
    /// waiting `lease` calls (the watcher polls for both).
    jobs: ChangeSignal,
}

impl Wake {
    /// Registers a waiting `lease` call until the guard is dropped.
    pub(super) fn waiting(&self) -> WaiterGuard<'_> {
        self.jobs.waiting()
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
        self.jobs.signal();
    }

    /// See `QueueChanges::change_seq`.
    pub(super) fn generation(&self) -> u64 {
        self.jobs.generation()
    }

    /// See `QueueChanges::changed_since` and [`ChangeSignal::changed_since`].
    pub(super) async fn changed_since(&self, seen: u64, timeout: Duration) {
        self.jobs.changed_since(seen, timeout).await;
    }

    /// See `QueueChanges::changed_here_since` and [`ChangeSignal::changed_here_since`].
    pub(super) async fn changed_here_since(&self, seen: u64, timeout: Duration) {
        self.jobs.changed_here_since(seen, timeout).await;
    }
}

/// Spawns the `data_version` watcher; it stops when `stop` is cancelled.
pub(super) fn spawn_watcher(
    options: SqliteConnectOptions,
    wake: Arc<Wake>,
    stop: CancellationToken,
) {
    tokio::spawn(async move {
        let mut conn: Option<SqliteConnection> = None;
        let mut last: Option<i64> = None;
        let mut changed_at = tokio::time::Instant::now();
        loop {
            if !wake.jobs.has_waiters() {
                // Commits made while nobody polled are unknown: the next poll re-baselines.
                last = None;
                tokio::select! {
                    () = wake.jobs.waiter_arrived() => {}
                    _ = stop.cancelled() => break,
                }
                continue;
            }
            if conn.is_none() {
                match connect_keeping_wal_files(&options).await {
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
                match sqlx::query_scalar::<_, i64>("PRAGMA data_version")
                    .fetch_one(&mut *c)
                    .await
                {
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
            let every = if changed_at.elapsed() < RECENT {
                POLL_EVERY
            } else {
                POLL_EVERY_QUIET
            };
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
                match connect_keeping_wal_files(&options).await {
                    Ok(c) => conn = Some(c),
                    Err(e) => {
                        tracing::debug!(error = %e, "sqlite queue checkpointer: cannot open its connection");
                        continue;
                    }
                }
            }
            if let Some(c) = conn.as_mut()
                && let Err(e) = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
                    .execute(&mut *c)
                    .await
            {
                tracing::debug!(error = %e, "sqlite queue checkpoint failed");
                conn = None;
            }
        }
    });
}

/// A dedicated connection, set to keep the `-wal` and `-shm` files like the pools' connections
/// (`skillforge_store::wal_files`: whichever connection closes last decides).
async fn connect_keeping_wal_files(
    options: &SqliteConnectOptions,
) -> Result<sqlx::SqliteConnection, sqlx::Error> {
    let mut conn = options.connect().await?;
    if let Err(reason) = skillforge_store::wal_files::keep_wal_files(&mut conn).await {
        tracing::debug!(%reason, "SQLite -wal/-shm files not kept between processes");
    }
    Ok(conn)
}

#[cfg(test)]
mod wal_file_tests {
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;

    use sqlx::Connection;
    use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode};

    use super::connect_keeping_wal_files;
    use crate::sqlite::conn::connect_writer;

    // The queue's writer pool and a dedicated connection (watcher, checkpointer) both keep the
    // `-wal` and `-shm` files at the last close: `skillforge_store::wal_files`.
    #[tokio::test]
    async fn the_queues_connections_keep_the_wal_files_at_the_last_close() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("queue.db");
        let options = SqliteConnectOptions::new()
            .filename(&path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .pragma(
                "journal_size_limit",
                skillforge_store::wal_files::JOURNAL_SIZE_LIMIT,
            );
        let wal = dir.path().join("queue.db-wal");
        for dedicated_closes_last in [false, true] {
            let writer = connect_writer(&options, &Arc::new(AtomicBool::new(false)))
                .await
                .expect("writer");
            let dedicated = connect_keeping_wal_files(&options)
                .await
                .expect("dedicated connection");
            sqlx::query("CREATE TABLE IF NOT EXISTS t (v INTEGER)")
                .execute(&writer)
                .await
                .expect("create");
            sqlx::query("INSERT INTO t VALUES (1)")
                .execute(&writer)
                .await
                .expect("insert");
            if dedicated_closes_last {
                writer.close().await;
                dedicated.close().await.expect("close");
            } else {
                dedicated.close().await.expect("close");
                writer.close().await;
            }
            assert_eq!(
                std::fs::metadata(&wal).map(|m| m.len()).ok(),
                Some(0),
                "dedicated last: {dedicated_closes_last}"
            );
            assert!(
                dir.path().join("queue.db-shm").is_file(),
                "dedicated last: {dedicated_closes_last}"
            );
        }
    }
}
