//! Connections of the embedded queue: opening pools (busy retries, the write pool's release
//! hook), starting write transactions that survive a failed commit, and classifying errors
//! (busy, about the file) so messages name the queue file.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use sqlx::{Sqlite, SqlitePool, Transaction};

use super::BUSY_TIMEOUT;

/// Whether `e` is about the database file itself (SQLite's `SQLITE_READONLY`, `SQLITE_IOERR`,
/// `SQLITE_CORRUPT`, `SQLITE_FULL`, `SQLITE_CANTOPEN`, `SQLITE_NOTADB`, any extended code of
/// them): an error of the environment, whose message must name the file.
pub(super) fn is_file_error(e: &sqlx::Error) -> bool {
    let sqlx::Error::Database(e) = e else {
        return false;
    };
    e.code()
        .and_then(|c| c.parse::<i32>().ok())
        .is_some_and(|c| matches!(c & 0xff, 8 | 10 | 11 | 13 | 14 | 26))
}

/// Whether opening for writing failed because the file or its directory is not writable
/// (`SQLITE_READONLY`, `SQLITE_CANTOPEN`), not because the disk is full or failing.
pub(super) fn is_not_writable(e: &sqlx::Error) -> bool {
    let sqlx::Error::Database(e) = e else {
        return false;
    };
    e.code()
        .and_then(|c| c.parse::<i32>().ok())
        .is_some_and(|c| matches!(c & 0xff, 8 | 14))
}

/// `"{what}: {e}"`, plus ` (queue file `{path}`)` when `e` is about the file ([`is_file_error`]:
/// disk full, read-only, I/O error, corrupt).
pub(super) fn describe(path: &Path, what: impl std::fmt::Display, e: &sqlx::Error) -> String {
    if is_file_error(e) {
        format!("{what}: {e} (queue file `{}`)", path.display())
    } else {
        format!("{what}: {e}")
    }
}

/// Starts a `BEGIN IMMEDIATE` transaction on `pool` (the process's write connection).
///
/// A COMMIT or statement that fails with disk full or an I/O error makes SQLite roll the
/// transaction back by itself; the rollback sqlx then sends finds no transaction, and sqlx keeps
/// counting one open, so that connection refuses every later `BEGIN` ("attempted to call
/// begin_with at non-zero transaction depth") until the process restarts. Such a connection is
/// closed here and the pool opens a fresh one, so a failed commit never wedges the queue.
pub(super) async fn begin_immediate(
    pool: &SqlitePool,
) -> Result<Transaction<'static, Sqlite>, sqlx::Error> {
    match pool.begin_with("BEGIN IMMEDIATE").await {
        Err(sqlx::Error::InvalidSavePointStatement) => {
            tracing::warn!("the write connection lost track of a failed transaction: reopening it");
            let mut stuck = pool.acquire().await?;
            stuck.close_on_drop();
            drop(stuck);
            pool.begin_with("BEGIN IMMEDIATE").await
        }
        other => other,
    }
}

/// Whether `e` is SQLite's `SQLITE_BUSY` or `SQLITE_LOCKED` (any extended code of them): another
/// connection held the lock past the busy timeout, or would have deadlocked.
pub(super) fn is_busy(e: &sqlx::Error) -> bool {
    let sqlx::Error::Database(e) = e else {
        return false;
    };
    e.code()
        .and_then(|c| c.parse::<i32>().ok())
        .is_some_and(|c| matches!(c & 0xff, 5 | 6))
}

/// Opens a pool, retrying while SQLite reports the file busy (for up to [`BUSY_TIMEOUT`]).
/// Connecting runs `PRAGMA journal_mode = WAL`, which needs an exclusive lock that SQLite's
/// busy handler does not wait for, so several processes opening the same (new) file at once
/// can get `database is locked` at once instead of waiting.
pub(super) async fn connect_retrying_busy<F, Fut>(connect: F) -> Result<SqlitePool, sqlx::Error>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<SqlitePool, sqlx::Error>>,
{
    let started = std::time::Instant::now();
    let mut pause = Duration::from_millis(5);
    loop {
        match connect().await {
            Err(e) if is_busy(&e) && started.elapsed() < BUSY_TIMEOUT => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(100));
            }
            other => return other,
        }
    }
}

/// The process's write pool (one connection) on `options`; its release hook rolls back a
/// one-command finish script that was dropped mid-run (`script_open`).
pub(super) async fn connect_writer(
    options: &SqliteConnectOptions,
    script_open: &Arc<AtomicBool>,
) -> Result<SqlitePool, sqlx::Error> {
    connect_retrying_busy(|| {
        let open_script = script_open.clone();
        SqlitePoolOptions::new()
            .after_release(move |conn, _| {
                let open_script = open_script.clone();
                Box::pin(async move {
                    if open_script.swap(false, Ordering::AcqRel) {
                        tracing::warn!(
                            "a finish script was interrupted: rolling back its transaction"
                        );
                        if let Err(e) = sqlx::query("ROLLBACK").execute(&mut *conn).await {
                            // No transaction was open (the script ended anyway) or the
                            // connection is broken: keep it only in the first case.
                            return Ok(e.to_string().contains("no transaction is active"));
                        }
                    }
                    Ok(true)
                })
            })
            .after_connect(skillforge_store::wal_files::after_connect)
            .max_connections(1)
            .min_connections(1)
            .test_before_acquire(false)
            .acquire_timeout(BUSY_TIMEOUT * 6)
            .idle_timeout(None)
            .max_lifetime(None)
            .connect_with(options.clone())
    })
    .await
}
