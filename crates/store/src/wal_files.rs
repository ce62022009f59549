//! Keeping a SQLite database's `-wal` and `-shm` files between processes
//! (`SQLITE_FCNTL_PERSIST_WAL`), for the domain store and the embedded queue.
//!
//! By default the last connection to close a WAL database checkpoints it and then deletes its
//! `-wal` and `-shm` files, and the next process to open it creates both again (and, on the
//! first sync of the new `-wal`, syncs the directory). A CLI invocation (`verify`, `jobs submit
//! --wait`) opens and closes both skillforge databases, so that is four files created and four
//! deleted per command: on ext4 under churn each new inode costs a scan past recently deleted
//! ones, which was the largest kernel cost of a verify's SQLite threads (bench/README.md, "The
//! CLI's wait"). With the files kept, the close still checkpoints (durability is unchanged) and
//! truncates the `-wal` to zero bytes (`journal_size_limit` set, [`JOURNAL_SIZE_LIMIT`]), and
//! the next open reuses both files.

use std::ffi::c_int;
use std::pin::Pin;

use sqlx::SqliteConnection;

/// `PRAGMA journal_size_limit` for both databases, bytes: a `-wal` larger than this after a
/// checkpoint is truncated to it, and a kept `-wal` is truncated to zero bytes at the last close
/// (SQLite truncates a kept `-wal` only when a limit is set).
pub const JOURNAL_SIZE_LIMIT: &str = "67108864";

/// Asks SQLite to keep `conn`'s database's `-wal` and `-shm` files when the last connection
/// closes (module docs). For a pool's `after_connect`: every connection sets it, since whichever
/// closes last decides.
///
/// # Errors
/// The SQLite result code when the file control is refused (a VFS without WAL files); callers
/// treat that as "files not kept", not as a failed open.
pub async fn keep_wal_files(conn: &mut SqliteConnection) -> Result<(), String> {
    let mut handle = conn.lock_handle().await.map_err(|e| e.to_string())?;
    let db = handle.as_raw_handle().as_ptr();
    let mut keep: c_int = 1;
    // SAFETY: `db` is this connection's open handle, held locked (no other use of it) for the
    // call; "main" is a NUL-terminated schema name; `keep` is the `int` that
    // SQLITE_FCNTL_PERSIST_WAL reads (and overwrites with the setting), and outlives the call.
    #[expect(
        unsafe_code,
        reason = "sqlx has no option for SQLITE_FCNTL_PERSIST_WAL; see SAFETY"
    )]
    let rc = unsafe {
        libsqlite3_sys::sqlite3_file_control(
            db,
            c"main".as_ptr(),
            libsqlite3_sys::SQLITE_FCNTL_PERSIST_WAL,
            (&raw mut keep).cast(),
        )
    };
    if rc == libsqlite3_sys::SQLITE_OK {
        Ok(())
    } else {
        Err(format!(
            "SQLITE_FCNTL_PERSIST_WAL refused: SQLite result code {rc}"
        ))
    }
}

/// A pool's `after_connect` hook: [`keep_wal_files`], a refusal logged at debug level.
pub fn after_connect(
    conn: &mut SqliteConnection,
    _meta: sqlx::pool::PoolConnectionMetadata,
) -> Pin<Box<dyn Future<Output = Result<(), sqlx::Error>> + Send + '_>> {
    Box::pin(async move {
        if let Err(reason) = keep_wal_files(conn).await {
            tracing::debug!(%reason, "SQLite -wal/-shm files not kept between processes");
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use crate::{DB_FILE, Store};

    #[tokio::test]
    async fn a_closed_store_keeps_its_wal_files_truncated_and_reopens_with_its_data() {
        let home = tempfile::tempdir().expect("tempdir");
        let store = Store::open(home.path()).await.expect("open");
        sqlx::query("CREATE TABLE kept (v TEXT)")
            .execute(store.pool())
            .await
            .expect("create");
        sqlx::query("INSERT INTO kept VALUES ('x')")
            .execute(store.pool())
            .await
            .expect("insert");
        // The last connection's close checkpoints: the data is in the main file, the `-wal`
        // is kept at zero bytes, the `-shm` kept.
        store.pool().close().await;
        let wal = home.path().join(format!("{DB_FILE}-wal"));
        let shm = home.path().join(format!("{DB_FILE}-shm"));
        assert_eq!(
            std::fs::metadata(&wal).map(|m| m.len()).ok(),
            Some(0),
            "the -wal is kept, truncated"
        );
        assert!(shm.is_file(), "the -shm is kept");
        let wal_inode = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&wal).expect("wal"));

        let again = Store::open(home.path()).await.expect("reopen");
        let v: String = sqlx::query_scalar("SELECT v FROM kept")
            .fetch_one(again.pool())
            .await
            .expect("read");
        assert_eq!(v, "x");
        sqlx::query("INSERT INTO kept VALUES ('y')")
            .execute(again.pool())
            .await
            .expect("insert");
        again.pool().close().await;
        // The same file was used again, not a new one.
        assert_eq!(
            std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&wal).expect("wal")),
            wal_inode
        );
    }
}
