//! Eval artifacts (`eval_artifacts`; facts §1 `ArtifactRef`, §8): the registry of blobs in the
//! content-addressed store ([`crate::blobs`]). A row names a blob by `hash`; the bytes live at
//! `<home>/blobs/sha256/<hex[:2]>/<hex>`.

use std::collections::BTreeSet;

use sqlx::{SqliteConnection, SqliteExecutor};

use crate::StoreError;
use crate::blobs::{BlobError, BlobStore};
use crate::templates::now_rfc3339;

/// One `eval_artifacts` row; the first five fields are the training package's `ArtifactRef`.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ArtifactRow {
    /// Artifact id, unique across the store.
    pub id: String,
    /// `sha256:<hex>` of the blob.
    pub hash: String,
    /// MIME type.
    pub media_type: String,
    /// Blob size in bytes.
    pub size_bytes: i64,
    /// Storage driver: what the external optimizer's loader reads, derived from the media type
    /// ([`skillforge_contract::driver_for_media_type`]) for skillforge's own artifacts; rows of
    /// older builds may hold `local` (mapped at export).
    pub driver: String,
    /// RFC 3339.
    pub created_at: String,
}

/// The artifact `id`, if registered.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn get_artifact(
    db: impl SqliteExecutor<'_>,
    id: &str,
) -> Result<Option<ArtifactRow>, StoreError> {
    Ok(sqlx::query_as("SELECT id, hash, media_type, size_bytes, driver, created_at FROM eval_artifacts WHERE id = ?")
        .bind(id)
        .fetch_optional(db)
        .await?)
}

/// Which of `ids` are registered (one query per id; the lists are short).
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn existing_artifact_ids<'i>(
    conn: &mut SqliteConnection,
    ids: impl IntoIterator<Item = &'i String>,
) -> Result<BTreeSet<String>, StoreError> {
    let mut found = BTreeSet::new();
    for id in ids {
        let hit: Option<i64> = sqlx::query_scalar("SELECT 1 FROM eval_artifacts WHERE id = ?")
            .bind(id)
            .fetch_optional(&mut *conn)
            .await?;
        if hit.is_some() {
            found.insert(id.clone());
        }
    }
    Ok(found)
}

/// Number of registered artifacts.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn count_artifacts(db: impl SqliteExecutor<'_>) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar("SELECT COUNT(*) FROM eval_artifacts")
        .fetch_one(db)
        .await?)
}

/// Registers an artifact whose blob is already stored. `created_at` is set now.
///
/// # Errors
/// [`StoreError::Sql`], including a primary-key conflict when `id` is taken.
pub async fn insert_artifact(
    conn: &mut SqliteConnection,
    id: &str,
    hash: &str,
    media_type: &str,
    size_bytes: i64,
    driver: &str,
) -> Result<ArtifactRow, StoreError> {
    let row = ArtifactRow {
        id: id.to_owned(),
        hash: hash.to_owned(),
        media_type: media_type.to_owned(),
        size_bytes,
        driver: driver.to_owned(),
        created_at: now_rfc3339(),
    };
    sqlx::query("INSERT INTO eval_artifacts (id, hash, media_type, size_bytes, driver, created_at) VALUES (?, ?, ?, ?, ?, ?)")
        .bind(&row.id)
        .bind(&row.hash)
        .bind(&row.media_type)
        .bind(row.size_bytes)
        .bind(&row.driver)
        .bind(&row.created_at)
        .execute(conn)
        .await?;
    Ok(row)
}

/// Errors of [`store_artifact`]: the blob write or the row insert.
#[derive(Debug, thiserror::Error)]
pub enum StoreArtifactError {
    /// Writing the blob failed.
    #[error(transparent)]
    Blob(#[from] BlobError),
    /// Registering the row failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Writes `bytes` to the blob store and registers them as artifact `id` in one step; `driver` is
/// [`skillforge_contract::driver_for_media_type`] for skillforge's own artifacts, or what a
/// candidate package declared. The blob is written first: if the
/// caller's transaction then rolls back, an unreferenced blob remains, which is harmless in a
/// content-addressed store.
///
/// # Errors
/// [`StoreArtifactError::Blob`] when the blob cannot be written, [`StoreArtifactError::Store`]
/// when the row cannot be inserted (e.g. the id is taken).
pub async fn store_artifact(
    conn: &mut SqliteConnection,
    blobs: &BlobStore,
    id: &str,
    bytes: &[u8],
    media_type: &str,
    driver: &str,
) -> Result<ArtifactRow, StoreArtifactError> {
    let hash = blobs.put(bytes)?;
    let size = i64::try_from(bytes.len()).unwrap_or(i64::MAX);
    Ok(insert_artifact(conn, id, &hash, media_type, size, driver).await?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Store;

    #[tokio::test]
    async fn store_artifact_writes_blob_and_row_and_refuses_a_taken_id() {
        let home = tempfile::tempdir().unwrap();
        let store = Store::open(home.path()).await.unwrap();
        let blobs = BlobStore::in_home(home.path());
        let mut conn = store.pool().acquire().await.unwrap();
        let row = store_artifact(
            &mut conn,
            &blobs,
            "diff-1",
            b"--- a\n+++ b\n",
            "text/x-diff",
            "text",
        )
        .await
        .unwrap();
        assert_eq!(row.size_bytes, 12);
        assert_eq!(blobs.get(&row.hash).unwrap(), b"--- a\n+++ b\n");
        assert_eq!(
            get_artifact(store.pool(), "diff-1").await.unwrap(),
            Some(row)
        );
        assert!(
            store_artifact(&mut conn, &blobs, "diff-1", b"x", "text/plain", "text")
                .await
                .is_err()
        );
        assert_eq!(count_artifacts(store.pool()).await.unwrap(), 1);
        let ids = ["diff-1".to_owned(), "nope".to_owned()];
        let found = existing_artifact_ids(&mut conn, &ids).await.unwrap();
        assert_eq!(
            found.into_iter().collect::<Vec<_>>(),
            vec!["diff-1".to_owned()]
        );
    }
}
