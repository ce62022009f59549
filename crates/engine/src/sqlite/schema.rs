//! Versioned schema migrations for the SQLite queue, tracked in `PRAGMA user_version`.
//!
//! Each migration runs inside one `BEGIN IMMEDIATE` transaction together with the
//! `user_version` bump, so several processes opening a fresh file at once apply it exactly once.

use std::path::Path;

use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{AssertSqlSafe, Connection, SqliteConnection, SqlitePool};

use crate::error::EngineError;

/// Migrations in order; migration `i` (0-based) brings the schema to version `i + 1`.
const MIGRATIONS: &[&str] = &[
    include_str!("migrations/0001_init.sql"),
    include_str!("migrations/0002_last_attempt_in_row.sql"),
    include_str!("migrations/0003_retention.sql"),
    include_str!("migrations/0004_job_output.sql"),
    include_str!("migrations/0005_compact_json.sql"),
    include_str!("migrations/0006_binary_ids.sql"),
    include_str!("migrations/0007_lock_tokens.sql"),
    include_str!("migrations/0008_broken_jobs.sql"),
];

/// The schema version this build writes.
pub(super) const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Refuses a file that is some other SQLite database: it has tables but no queue schema version
/// (`PRAGMA user_version` 0, which every queue file past its first migration has above 0), such
/// as the domain store given as the queue by mistake. Checked on a plain connection that only
/// reads, before the queue's own connections open the file (they would switch its journal to
/// WAL and migrate the queue's tables into it). A missing or empty file, or one this check
/// cannot open, passes: the open that follows creates it or reports its error.
///
/// # Errors
/// [`EngineError::Config`] naming the file and its tables (the first few).
pub(super) async fn refuse_foreign_file(path: &Path) -> Result<(), EngineError> {
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() > 0) {
        return Ok(());
    }
    // Read-write without creating (reading changes nothing, and a WAL file without its `-shm`
    // needs write access to read), else read-only (a read-only home).
    let options = SqliteConnectOptions::new().filename(path);
    let conn = match SqliteConnection::connect_with(&options).await {
        Ok(conn) => Ok(conn),
        Err(_) => SqliteConnection::connect_with(&options.clone().read_only(true)).await,
    };
    let Ok(mut conn) = conn else {
        return Ok(());
    };
    // Tables first, then the version: a first open that migrates the file concurrently commits
    // its tables and its version together, so a version of 0 read after tables were seen means no
    // migration (the other order could see 0 before that commit and the tables after it).
    let tables: Result<Vec<String>, _> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
    )
    .fetch_all(&mut conn)
    .await;
    let version: Result<i64, _> = sqlx::query_scalar("PRAGMA user_version")
        .fetch_one(&mut conn)
        .await;
    let _ = conn.close().await;
    let (Ok(0), Ok(tables)) = (version, tables) else {
        return Ok(());
    };
    if tables.is_empty() {
        return Ok(());
    }
    let shown: Vec<&str> = tables.iter().take(5).map(String::as_str).collect();
    let more = if tables.len() > shown.len() {
        format!(" and {} more", tables.len() - shown.len())
    } else {
        String::new()
    };
    Err(EngineError::Config(format!(
        "`{}` is not a skillforge queue file: it holds tables ({}{more}) but no queue schema version; \
         is it the domain store or another database? name a new file or an existing queue file (sqlite://PATH)",
        path.display(),
        shown.join(", ")
    )))
}

/// Brings the database behind `pool` to [`SCHEMA_VERSION`].
///
/// Errors with [`EngineError::Backend`] when a migration fails or the file was written by a
/// newer build (its version is above [`SCHEMA_VERSION`]).
pub(super) async fn migrate(pool: &SqlitePool) -> Result<(), EngineError> {
    let err = |what: &str, e: sqlx::Error| {
        EngineError::sqlite(format!("queue schema migration: {what}: {e}"))
    };
    // A current file needs no write lock (and a read-only home could not take one).
    let version: i64 = sqlx::query_scalar("PRAGMA user_version")
        .fetch_one(pool)
        .await
        .map_err(|e| err("read user_version", e))?;
    if version == SCHEMA_VERSION {
        return Ok(());
    }
    let mut tx = pool
        .begin_with("BEGIN IMMEDIATE")
        .await
        .map_err(|e| err("begin", e))?;
    let current: i64 = sqlx::query_scalar("PRAGMA user_version")
        .fetch_one(&mut *tx)
        .await
        .map_err(|e| err("read user_version", e))?;
    if current > SCHEMA_VERSION {
        return Err(EngineError::sqlite(format!(
            "queue schema version {current} is newer than this build supports ({SCHEMA_VERSION})"
        )));
    }
    if current == SCHEMA_VERSION {
        return Ok(());
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(current as usize) {
        sqlx::raw_sql(*sql)
            .execute(&mut *tx)
            .await
            .map_err(|e| err(&format!("apply version {}", index + 1), e))?;
    }
    sqlx::query(AssertSqlSafe(format!(
        "PRAGMA user_version = {SCHEMA_VERSION}"
    )))
    .execute(&mut *tx)
    .await
    .map_err(|e| err("write user_version", e))?;
    tx.commit().await.map_err(|e| err("commit", e))?;
    Ok(())
}
