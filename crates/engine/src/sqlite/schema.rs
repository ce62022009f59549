//! Versioned schema migrations for the SQLite queue, tracked in `PRAGMA user_version`.
//!
//! Each migration runs inside one `BEGIN IMMEDIATE` transaction together with the
//! `user_version` bump, so several processes opening a fresh file at once apply it exactly once.

use sqlx::{AssertSqlSafe, SqlitePool};

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
];

/// The schema version this build writes.
pub(super) const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Brings the database behind `pool` to [`SCHEMA_VERSION`].
///
/// Errors with [`EngineError::Backend`] when a migration fails or the file was written by a
/// newer build (its version is above [`SCHEMA_VERSION`]).
pub(super) async fn migrate(pool: &SqlitePool) -> Result<(), EngineError> {
    let err = |what: &str, e: sqlx::Error| EngineError::sqlite(format!("queue schema migration: {what}: {e}"));
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
    sqlx::query(AssertSqlSafe(format!("PRAGMA user_version = {SCHEMA_VERSION}")))
        .execute(&mut *tx)
        .await
        .map_err(|e| err("write user_version", e))?;
    tx.commit().await.map_err(|e| err("commit", e))?;
    Ok(())
}
