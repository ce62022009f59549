//! skillforge domain store: SQLite (sqlx) aggregates and the content-addressed blob store (DESIGN §6).
//!
//! The control plane is the only writer. Every domain write that follows a job result happens in
//! one transaction together with [`applied::record_applied`], so a result is applied exactly once.

pub mod applied;
pub mod artifacts;
pub mod bandit;
pub mod binary;
pub mod blobs;
pub mod candidates;
pub mod deliveries;
mod error;
pub mod feedback;
pub mod github;
pub mod harvest;
pub mod live_ab;
pub mod promotion;
pub mod queue_epochs;
pub mod review;
pub mod submitted;
pub mod templates;
pub mod train;
pub mod wal_files;

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};

pub use error::StoreError;

/// File name of the domain database inside `$SKILLFORGE_HOME`.
pub const DB_FILE: &str = "skillforge.db";
/// Lock file serializing migrations between processes that open the same home.
pub const MIGRATE_LOCK_FILE: &str = "skillforge.db.migrate-lock";

/// Opens `path` and takes an exclusive advisory lock on it (`flock(LOCK_EX)` through std's
/// `File::lock`, blocking); released when the returned file is dropped.
fn take_file_lock(path: &Path) -> Result<std::fs::File, StoreError> {
    let open_err = |message: String| StoreError::Open {
        path: path.to_path_buf(),
        message,
    };
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| open_err(e.to_string()))?;
    file.lock().map_err(|e| open_err(e.to_string()))?;
    Ok(file)
}

/// The domain store: one SQLite file (WAL) plus, beside it, the blob directory.
#[derive(Debug, Clone)]
pub struct Store {
    pool: SqlitePool,
    home: PathBuf,
}

/// The store at `path` when it exists and every migration of this build is applied: opened
/// without the migration lock (a read-only home could not create its lock file), read-only
/// when the file cannot be opened for writing (then every write fails naming the file).
/// `None` otherwise: the caller takes the lock and migrates.
async fn open_current(path: &Path, options: &SqliteConnectOptions) -> Option<SqlitePool> {
    if !path.is_file() {
        return None;
    }
    let connect = |o: SqliteConnectOptions| {
        SqlitePoolOptions::new()
            .max_connections(4)
            .after_connect(wal_files::after_connect)
            .connect_with(o)
    };
    let pool = match connect(options.clone()).await {
        Ok(pool) => pool,
        // Not writable (read-only, cannot open for writing): read-only. A full or failing disk
        // is not hidden behind a read-only store: the locked path reports it.
        Err(sqlx::Error::Database(e))
            if e.code()
                .and_then(|c| c.parse::<i32>().ok())
                .is_some_and(|c| matches!(c & 0xff, 8 | 14)) =>
        {
            connect(
                SqliteConnectOptions::new()
                    .filename(path)
                    .read_only(true)
                    .immutable(true)
                    .busy_timeout(Duration::from_secs(10))
                    .foreign_keys(true),
            )
            .await
            .ok()?
        }
        Err(_) => return None,
    };
    let migrator = sqlx::migrate!("./migrations");
    let applied: Vec<i64> =
        sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success ORDER BY version")
            .fetch_all(&pool)
            .await
            .ok()?;
    let wanted: Vec<i64> = migrator.iter().map(|m| m.version).collect();
    if applied == wanted {
        Some(pool)
    } else {
        pool.close().await;
        None
    }
}

impl Store {
    /// Opens (creating if missing) `<home>/skillforge.db` and applies pending migrations.
    ///
    /// # Errors
    /// [`StoreError::Open`] when the file cannot be opened, [`StoreError::Migrate`] when a
    /// migration fails (the database is left at the last good version).
    pub async fn open(home: &Path) -> Result<Self, StoreError> {
        std::fs::create_dir_all(home).map_err(|e| StoreError::Open {
            path: home.to_path_buf(),
            message: e.to_string(),
        })?;
        let path = home.join(DB_FILE);
        let options = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))
            .map_err(|e| StoreError::Open {
                path: path.clone(),
                message: e.to_string(),
            })?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true)
            .pragma("journal_size_limit", wal_files::JOURNAL_SIZE_LIMIT);
        // Several processes (CLI, serve, workers' control planes) may open a fresh home at the same
        // moment. Neither the first connection (its `PRAGMA journal_mode = WAL` needs an exclusive
        // lock that SQLite's busy handler does not wait for: `database is locked` at once) nor
        // sqlx's migrator is safe against that, so both run under an exclusive advisory lock on a
        // file beside the database.
        if let Some(pool) = open_current(&path, &options).await {
            return Ok(Self {
                pool,
                home: home.to_path_buf(),
            });
        }
        let lock_path = home.join(MIGRATE_LOCK_FILE);
        let lock = tokio::task::spawn_blocking(move || take_file_lock(&lock_path))
            .await
            .map_err(|e| StoreError::Migrate(e.to_string()))??;
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .after_connect(wal_files::after_connect)
            .connect_with(options)
            .await
            .map_err(|e| StoreError::Open {
                path: path.clone(),
                message: e.to_string(),
            })?;
        let migrated = sqlx::migrate!("./migrations").run(&pool).await;
        drop(lock);
        migrated.map_err(|e| StoreError::Migrate(e.to_string()))?;
        Ok(Self {
            pool,
            home: home.to_path_buf(),
        })
    }

    /// The connection pool, for repositories and transactions.
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// The home directory this store lives in.
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// Starts a write transaction.
    ///
    /// # Errors
    /// [`StoreError::Sql`] when the database is unavailable.
    pub async fn begin(&self) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>, StoreError> {
        self.pool.begin().await.map_err(StoreError::from)
    }

    /// A write transaction that takes the write lock when it starts (`BEGIN IMMEDIATE`), so a
    /// concurrent writer is waited for up to the busy timeout (10 s). A deferred transaction
    /// ([`Store::begin`]) that reads first fails at its first write with `database is locked` at
    /// once instead: SQLite never runs the busy handler for a read → write upgrade. Result
    /// ingestion reads (`applied_by_key`) before it writes, so it uses this.
    ///
    /// # Errors
    /// [`StoreError`] when the lock is not had within the busy timeout or the store cannot be written.
    pub async fn begin_write(
        &self,
    ) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>, StoreError> {
        self.pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(StoreError::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Many processes opening a fresh home at once all succeed (migrations are serialized).
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_opens_of_a_fresh_home_all_migrate() {
        for _ in 0..5 {
            let home = tempfile::tempdir().unwrap();
            let opens: Vec<_> = (0..8)
                .map(|_| {
                    let path = home.path().to_path_buf();
                    tokio::spawn(async move { Store::open(&path).await })
                })
                .collect();
            for open in opens {
                open.await.unwrap().expect("every concurrent open succeeds");
            }
        }
    }
}
