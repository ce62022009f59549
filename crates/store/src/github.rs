//! GitHub as a forge (migration `0010_github.sql`; issue 16): review watches on published review
//! issues (facts §3 "Review watch stale reminder", §8 `skillopt_review_watches`), the
//! pull-request watcher's memory (ETags per repository, the `updated_at` last harvested per PR),
//! and the GitHub writes the `github` family's result handler applied (`github_writes`).
//!
//! Repository functions only; what to post and when is decided in `skillforge-skillopt`.

use sqlx::{SqliteConnection, SqliteExecutor};

use crate::StoreError;
use crate::templates::now_rfc3339;

/// Default stale reminder threshold of a review watch: 24 h (facts §3).
pub const DEFAULT_STALE_THRESHOLD_SECS: i64 = 86_400;

/// One `skillopt_review_watches` row.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ReviewWatch {
    /// `owner/repo`.
    pub repo: String,
    /// Review issue number.
    pub issue_number: i64,
    /// Review run.
    pub run_id: String,
    /// JSON array of the item ids a review answers.
    pub expected_item_ids_json: String,
    /// `watching`, `synced` or `closed`.
    pub status: String,
    /// Highest comment id read by a sync.
    pub last_seen_comment_id: i64,
    /// sha256 hex of the last sync's malformed-comment report ('' = none).
    pub last_import_error_hash: String,
    /// RFC 3339: when a reminder is due if feedback is still missing.
    pub stale_after: String,
    /// Seconds from publishing to `stale_after`.
    pub stale_threshold_seconds: i64,
    /// 1 once the reminder was posted.
    pub stale_notified: i64,
    /// '' or a JSON object.
    pub metadata_json: String,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
}

impl ReviewWatch {
    /// The expected item ids.
    pub fn expected_item_ids(&self) -> Vec<String> {
        serde_json::from_str(&self.expected_item_ids_json).unwrap_or_default()
    }
}

const WATCH_COLUMNS: &str = "repo, issue_number, run_id, expected_item_ids_json, status, last_seen_comment_id, \
    last_import_error_hash, stale_after, stale_threshold_seconds, stale_notified, metadata_json, created_at, updated_at";

/// Starts watching `repo#issue_number` for run `run_id` (status `watching`, reminder due
/// `threshold_secs` from now). An existing watch of the same issue is kept as it is (a retried
/// publish does not move its reminder). Returns true when created.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn create_review_watch(
    conn: &mut SqliteConnection,
    repo: &str,
    issue_number: i64,
    run_id: &str,
    expected_item_ids: &[String],
    threshold_secs: i64,
) -> Result<bool, StoreError> {
    let now = chrono::Utc::now();
    let stale_after = (now + chrono::Duration::seconds(threshold_secs.max(1)))
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let stamp = now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let done = sqlx::query(
        "INSERT OR IGNORE INTO skillopt_review_watches (repo, issue_number, run_id, expected_item_ids_json, stale_after,
             stale_threshold_seconds, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(repo)
    .bind(issue_number)
    .bind(run_id)
    .bind(serde_json::to_string(expected_item_ids).unwrap_or_else(|_| "[]".into()))
    .bind(&stale_after)
    .bind(threshold_secs.max(1))
    .bind(&stamp)
    .bind(&stamp)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The watch of `repo#issue_number`.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn get_review_watch(
    ex: impl SqliteExecutor<'_>,
    repo: &str,
    issue_number: i64,
) -> Result<Option<ReviewWatch>, StoreError> {
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {WATCH_COLUMNS} FROM skillopt_review_watches WHERE repo = ? AND issue_number = ?"
    )))
    .bind(repo)
    .bind(issue_number)
    .fetch_optional(ex)
    .await?)
}

/// Watches in status `watching`, oldest first.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn list_watching(ex: impl SqliteExecutor<'_>) -> Result<Vec<ReviewWatch>, StoreError> {
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(format!("SELECT {WATCH_COLUMNS} FROM skillopt_review_watches WHERE status = 'watching' ORDER BY created_at")))
        .fetch_all(ex)
        .await?)
}

/// Records a sync of the watch: the highest comment id seen, the hash of its malformed report,
/// and `synced` once every expected item has feedback.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn record_watch_sync(
    conn: &mut SqliteConnection,
    repo: &str,
    issue_number: i64,
    last_seen_comment_id: i64,
    error_hash: &str,
    complete: bool,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE skillopt_review_watches SET last_seen_comment_id = max(last_seen_comment_id, ?), last_import_error_hash = ?,
             status = CASE WHEN ? THEN 'synced' ELSE status END, updated_at = ? WHERE repo = ? AND issue_number = ?",
    )
    .bind(last_seen_comment_id)
    .bind(error_hash)
    .bind(complete)
    .bind(now_rfc3339())
    .bind(repo)
    .bind(issue_number)
    .execute(conn)
    .await?;
    Ok(())
}

/// Marks the reminder of a watch as posted; false when it already was (so it is posted once).
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn mark_stale_notified(
    conn: &mut SqliteConnection,
    repo: &str,
    issue_number: i64,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE skillopt_review_watches SET stale_notified = 1, updated_at = ? WHERE repo = ? AND issue_number = ? AND stale_notified = 0",
    )
    .bind(now_rfc3339())
    .bind(repo)
    .bind(issue_number)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The ETag last answered for `repo`'s `resource`.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn get_etag(
    ex: impl SqliteExecutor<'_>,
    repo: &str,
    resource: &str,
) -> Result<Option<String>, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT etag FROM github_watch_etags WHERE repo = ? AND resource = ?")
            .bind(repo)
            .bind(resource)
            .fetch_optional(ex)
            .await?,
    )
}

/// Records the ETag of `repo`'s `resource`.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn set_etag(
    conn: &mut SqliteConnection,
    repo: &str,
    resource: &str,
    etag: &str,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO github_watch_etags (repo, resource, etag, updated_at) VALUES (?, ?, ?, ?)
         ON CONFLICT (repo, resource) DO UPDATE SET etag = excluded.etag, updated_at = excluded.updated_at",
    )
    .bind(repo)
    .bind(resource)
    .bind(etag)
    .bind(now_rfc3339())
    .execute(conn)
    .await?;
    Ok(())
}

/// The `updated_at` of `repo#pr` when last harvested.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn pull_seen_at(
    ex: impl SqliteExecutor<'_>,
    repo: &str,
    pr: i64,
) -> Result<Option<String>, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT updated_at FROM github_pull_watch WHERE repo = ? AND pr = ?")
            .bind(repo)
            .bind(pr)
            .fetch_optional(ex)
            .await?,
    )
}

/// Records that `repo#pr` was harvested at its `updated_at`, in `state`.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn set_pull_seen(
    conn: &mut SqliteConnection,
    repo: &str,
    pr: i64,
    updated_at: &str,
    state: &str,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO github_pull_watch (repo, pr, updated_at, state, seen_at) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (repo, pr) DO UPDATE SET updated_at = excluded.updated_at, state = excluded.state, seen_at = excluded.seen_at",
    )
    .bind(repo)
    .bind(pr)
    .bind(updated_at)
    .bind(state)
    .bind(now_rfc3339())
    .execute(conn)
    .await?;
    Ok(())
}

/// One applied GitHub write.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct AppliedWrite {
    /// The write's idempotency key.
    pub write_key: String,
    /// `owner/repo`.
    pub repo: String,
    /// Issue or PR number.
    pub number: i64,
    /// Web URL of the issue or comment.
    pub url: String,
    /// 0 when an earlier post carrying the marker was found instead.
    pub created: i64,
    /// The job that wrote it.
    pub job_id: String,
    /// RFC 3339.
    pub applied_at: String,
}

/// Records an applied write once: a second result for the same key changes nothing. Returns true
/// when recorded now.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn record_write(
    conn: &mut SqliteConnection,
    w: &AppliedWrite,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "INSERT OR IGNORE INTO github_writes (write_key, repo, number, url, created, job_id, applied_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(&w.write_key)
    .bind(&w.repo)
    .bind(w.number)
    .bind(&w.url)
    .bind(w.created)
    .bind(&w.job_id)
    .bind(now_rfc3339())
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The applied write of `key`.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn get_write(
    ex: impl SqliteExecutor<'_>,
    key: &str,
) -> Result<Option<AppliedWrite>, StoreError> {
    Ok(sqlx::query_as("SELECT write_key, repo, number, url, created, job_id, applied_at FROM github_writes WHERE write_key = ?")
        .bind(key)
        .fetch_optional(ex)
        .await?)
}
