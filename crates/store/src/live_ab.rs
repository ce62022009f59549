//! Live A/B picks still owed (`skillopt_live_ab_pending`, migration 0009; seed: SkillOpt,
//! "Live-traffic A/B interception (#482)"; S-73): what an intercepted ask showed when no pick was
//! captured at ask time, so the pick can be recorded afterwards through the manual A/B path.

use sqlx::{SqliteConnection, SqliteExecutor};

use crate::StoreError;
use crate::templates::now_rfc3339;

/// One owed pick.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct PendingPick {
    /// The pick id the pick will be recorded under (`pick-<champion answer job id>`).
    pub pick_id: String,
    /// Template id.
    pub template_id: String,
    /// Champion version id.
    pub champion_version_id: String,
    /// Challenger version id.
    pub challenger_version_id: String,
    /// The user's prompt.
    pub prompt: String,
    /// The champion's answer.
    pub champion_answer: String,
    /// The challenger's answer.
    pub challenger_answer: String,
    /// The label (`a` | `b`) the challenger was shown as.
    pub challenger_label: String,
    /// RFC 3339.
    pub created_at: String,
}

/// Records an owed pick (`created_at` is set to now); a second insert of the same pick id keeps
/// the first.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn insert_pending(
    conn: &mut SqliteConnection,
    p: &PendingPick,
) -> Result<bool, StoreError> {
    Ok(sqlx::query(
        "INSERT INTO skillopt_live_ab_pending (pick_id, template_id, champion_version_id, challenger_version_id, prompt,
             champion_answer, challenger_answer, challenger_label, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (pick_id) DO NOTHING",
    )
    .bind(&p.pick_id)
    .bind(&p.template_id)
    .bind(&p.champion_version_id)
    .bind(&p.challenger_version_id)
    .bind(&p.prompt)
    .bind(&p.champion_answer)
    .bind(&p.challenger_answer)
    .bind(&p.challenger_label)
    .bind(now_rfc3339())
    .execute(conn)
    .await?
    .rows_affected()
        == 1)
}

/// The owed pick `pick_id`, if any.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn get_pending(
    db: impl SqliteExecutor<'_>,
    pick_id: &str,
) -> Result<Option<PendingPick>, StoreError> {
    Ok(
        sqlx::query_as("SELECT * FROM skillopt_live_ab_pending WHERE pick_id = ?")
            .bind(pick_id)
            .fetch_optional(db)
            .await?,
    )
}

/// Every owed pick, oldest first.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn list_pending(db: impl SqliteExecutor<'_>) -> Result<Vec<PendingPick>, StoreError> {
    Ok(
        sqlx::query_as("SELECT * FROM skillopt_live_ab_pending ORDER BY created_at, pick_id")
            .fetch_all(db)
            .await?,
    )
}

/// Deletes the owed pick `pick_id` (in the transaction that records it); false when none was owed.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn delete_pending(
    conn: &mut SqliteConnection,
    pick_id: &str,
) -> Result<bool, StoreError> {
    Ok(
        sqlx::query("DELETE FROM skillopt_live_ab_pending WHERE pick_id = ?")
            .bind(pick_id)
            .execute(conn)
            .await?
            .rows_affected()
            == 1,
    )
}
