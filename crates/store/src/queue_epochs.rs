//! The epoch of each queue namespace the control plane last saw (issue 32 item 5), so a queue
//! that lost its data while no process watched it is found by the next process that opens the
//! home ([`check_and_record`]), not only by one that saw the old epoch itself.

use sqlx::SqlitePool;

use crate::StoreError;
use crate::templates::now_rfc3339;

/// Compares `epoch`, the one queue `queue` (a URL without credentials, plus its namespace) has
/// now, with the one recorded for it, and records `epoch`. Returns the recorded epoch when it
/// differs (the queue lost its data since), `None` when it is the same or none was recorded.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn check_and_record(
    pool: &SqlitePool,
    queue: &str,
    epoch: &str,
) -> Result<Option<String>, StoreError> {
    let mut tx = pool.begin().await?;
    let previous: Option<String> =
        sqlx::query_scalar("SELECT epoch FROM queue_epochs WHERE queue = ?")
            .bind(queue)
            .fetch_optional(&mut *tx)
            .await?;
    sqlx::query(
        "INSERT INTO queue_epochs (queue, epoch, seen_at) VALUES (?, ?, ?)
         ON CONFLICT (queue) DO UPDATE SET epoch = excluded.epoch, seen_at = excluded.seen_at",
    )
    .bind(queue)
    .bind(epoch)
    .bind(now_rfc3339())
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(previous.filter(|p| p != epoch))
}
