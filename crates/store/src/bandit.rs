//! The Mode B bandit's arms and the recorded picks (`skillopt_bandit_arms`, `skillopt_ab_picks`;
//! facts §6, §8; S-66..S-68; resolutions 4).
//!
//! [`record_pick`] is the only writer of arms: it inserts the pick row and, only when that row is
//! new, moves both arms, in the caller's transaction — so a pick retried with the same pick id
//! changes nothing (exactly once).

use sqlx::{SqliteConnection, SqliteExecutor};

use crate::StoreError;
use crate::templates::now_rfc3339;

/// One arm row.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct ArmRow {
    /// Template id.
    pub template_id: String,
    /// `<template>@vN`.
    pub template_version_id: String,
    /// 1 + wins.
    pub alpha: f64,
    /// 1 + losses.
    pub beta: f64,
    /// wins + losses.
    pub pulls: i64,
    /// RFC 3339.
    pub updated_at: String,
}

/// The arm of `version_id`, `None` when it was never pulled (callers read that as Beta(1,1)).
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn get_arm(
    db: impl SqliteExecutor<'_>,
    template_id: &str,
    version_id: &str,
) -> Result<Option<ArmRow>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT template_id, template_version_id, alpha, beta, pulls, updated_at FROM skillopt_bandit_arms
         WHERE template_id = ? AND template_version_id = ?",
    )
    .bind(template_id)
    .bind(version_id)
    .fetch_optional(db)
    .await?)
}

/// Every arm row, by template and version.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn list_arms(db: impl SqliteExecutor<'_>) -> Result<Vec<ArmRow>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT template_id, template_version_id, alpha, beta, pulls, updated_at FROM skillopt_bandit_arms
         ORDER BY template_id, template_version_id",
    )
    .fetch_all(db)
    .await?)
}

/// A human pick to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPick<'a> {
    /// Stable per pick (derived from the answer job id).
    pub pick_id: &'a str,
    /// Template id.
    pub template_id: &'a str,
    /// The champion's version.
    pub champion_version_id: &'a str,
    /// The challenger's version.
    pub challenger_version_id: &'a str,
    /// `champion` | `challenger`.
    pub winner: &'a str,
    /// `a` | `b`: the label the challenger was shown under.
    pub challenger_label: &'a str,
    /// `manual` | `live`.
    pub origin: &'a str,
}

/// Records a pick and, when it is new, adds a win to the winner's arm and a loss to the
/// loser's (creating Beta(1,1) arms first). Returns true when the arms moved. Call inside the
/// transaction that also writes the pick's ranked event.
///
/// # Errors
/// [`StoreError::Sql`], including a winner other than champion/challenger.
pub async fn record_pick(
    conn: &mut SqliteConnection,
    pick: &NewPick<'_>,
) -> Result<bool, StoreError> {
    let now = now_rfc3339();
    let inserted = sqlx::query(
        "INSERT INTO skillopt_ab_picks (pick_id, template_id, champion_version_id, challenger_version_id, winner,
           challenger_label, origin, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (pick_id) DO NOTHING",
    )
    .bind(pick.pick_id)
    .bind(pick.template_id)
    .bind(pick.champion_version_id)
    .bind(pick.challenger_version_id)
    .bind(pick.winner)
    .bind(pick.challenger_label)
    .bind(pick.origin)
    .bind(&now)
    .execute(&mut *conn)
    .await?
    .rows_affected()
        == 1;
    if !inserted {
        return Ok(false);
    }
    let (winner, loser) = if pick.winner == "challenger" {
        (pick.challenger_version_id, pick.champion_version_id)
    } else {
        (pick.champion_version_id, pick.challenger_version_id)
    };
    for (version, column) in [(winner, "alpha"), (loser, "beta")] {
        sqlx::query(
            "INSERT INTO skillopt_bandit_arms (template_id, template_version_id, alpha, beta, pulls, updated_at)
             VALUES (?, ?, 1, 1, 0, ?) ON CONFLICT (template_id, template_version_id) DO NOTHING",
        )
        .bind(pick.template_id)
        .bind(version)
        .bind(&now)
        .execute(&mut *conn)
        .await?;
        // `column` is one of two literals, never input.
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE skillopt_bandit_arms SET {column} = {column} + 1, pulls = pulls + 1, updated_at = ?
             WHERE template_id = ? AND template_version_id = ?"
        )))
        .bind(&now)
        .bind(pick.template_id)
        .bind(version)
        .execute(&mut *conn)
        .await?;
    }
    Ok(true)
}

/// Picks recorded for `challenger_version_id`.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn count_picks(
    db: impl SqliteExecutor<'_>,
    challenger_version_id: &str,
) -> Result<i64, StoreError> {
    Ok(
        sqlx::query_scalar(
            "SELECT COUNT(*) FROM skillopt_ab_picks WHERE challenger_version_id = ?",
        )
        .bind(challenger_version_id)
        .fetch_one(db)
        .await?,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Store;

    // S-68
    #[tokio::test]
    async fn s68_a_pick_moves_both_arms_once() {
        let home = tempfile::tempdir().unwrap();
        let store = Store::open(home.path()).await.unwrap();
        let pick = NewPick {
            pick_id: "ab-job-1",
            template_id: "t",
            champion_version_id: "t@v1",
            challenger_version_id: "t@v2",
            winner: "challenger",
            challenger_label: "a",
            origin: "manual",
        };
        let mut tx = store.begin().await.unwrap();
        assert!(record_pick(&mut tx, &pick).await.unwrap());
        assert!(
            !record_pick(&mut tx, &pick).await.unwrap(),
            "the same pick id again changes nothing"
        );
        tx.commit().await.unwrap();
        let challenger = get_arm(store.pool(), "t", "t@v2").await.unwrap().unwrap();
        let champion = get_arm(store.pool(), "t", "t@v1").await.unwrap().unwrap();
        assert_eq!(
            (challenger.alpha, challenger.beta, challenger.pulls),
            (2.0, 1.0, 1)
        );
        assert_eq!(
            (champion.alpha, champion.beta, champion.pulls),
            (1.0, 2.0, 1)
        );
        let mut conn = store.pool().acquire().await.unwrap();
        let second = NewPick {
            pick_id: "ab-job-2",
            winner: "champion",
            ..pick
        };
        assert!(record_pick(&mut conn, &second).await.unwrap());
        let champion = get_arm(store.pool(), "t", "t@v1").await.unwrap().unwrap();
        assert_eq!(
            (champion.alpha, champion.beta, champion.pulls),
            (2.0, 2.0, 2)
        );
        assert_eq!(count_picks(store.pool(), "t@v2").await.unwrap(), 2);
        let bad = NewPick {
            pick_id: "ab-job-3",
            winner: "tie",
            ..pick
        };
        assert!(
            record_pick(&mut conn, &bad).await.is_err(),
            "winner is champion or challenger"
        );
        assert_eq!(count_picks(store.pool(), "t@v2").await.unwrap(), 2);
    }
}
