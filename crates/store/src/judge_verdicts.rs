//! Each judge's own verdict on an A/B (`skillopt_ab_judge_verdicts`, issue 34 item 12), and the
//! A/Bs where a human and a judge both picked, for measuring a judge's agreement with the humans
//! (`skillforge judge agreement`). Evidence only: no arm is read or moved here (S-80).

use sqlx::{SqliteConnection, SqliteExecutor};

use crate::StoreError;
use crate::templates::now_rfc3339;

/// One juror's verdict on the A/B `pick_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewJudgeVerdict<'a> {
    /// The A/B's pick id (the same as its human pick's, `skillopt_ab_picks.pick_id`).
    pub pick_id: &'a str,
    /// 0-based juror index (0 for a single judge).
    pub juror: i64,
    /// The judge's agent runtime.
    pub runtime: &'a str,
    /// The model its transcript named; `""` when it named none.
    pub model: &'a str,
    /// `champion` | `challenger`; `None` for no readable pick.
    pub winner: Option<&'a str>,
}

/// Records (or rewrites in place, on a retried A/B) one juror's verdict, in the caller's
/// transaction.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn record_judge_verdict(
    conn: &mut SqliteConnection,
    v: &NewJudgeVerdict<'_>,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO skillopt_ab_judge_verdicts (pick_id, juror, judge_runtime, judge_model, winner, created_at)
         VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT (pick_id, juror) DO UPDATE SET judge_runtime = excluded.judge_runtime,
           judge_model = excluded.judge_model, winner = excluded.winner",
    )
    .bind(v.pick_id)
    .bind(v.juror)
    .bind(v.runtime)
    .bind(v.model)
    .bind(v.winner)
    .bind(now_rfc3339())
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// One A/B a human and a judge both picked.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct PairedPickRow {
    /// The judge's runtime.
    pub judge_runtime: String,
    /// The judge's model (`""`: not named).
    pub judge_model: String,
    /// The A/B.
    pub pick_id: String,
    /// The challenger version it compared.
    pub challenger_version_id: String,
    /// The human's winner: `champion` | `challenger`.
    pub human: String,
    /// The judge's winner: `champion` | `challenger`.
    pub judge: String,
}

/// Every (judge, A/B) where the human and that judge both named a winner, ordered by judge then
/// A/B.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn paired_picks(db: impl SqliteExecutor<'_>) -> Result<Vec<PairedPickRow>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT v.judge_runtime, v.judge_model, v.pick_id, p.challenger_version_id, p.winner AS human, v.winner AS judge
         FROM skillopt_ab_judge_verdicts v JOIN skillopt_ab_picks p ON p.pick_id = v.pick_id
         WHERE v.winner IS NOT NULL
         ORDER BY v.judge_runtime, v.judge_model, v.pick_id, v.juror",
    )
    .fetch_all(db)
    .await?)
}

/// The judges (runtime, model) that gave a readable verdict on an A/B of `challenger_version_id`.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn judges_of_challenger(
    db: impl SqliteExecutor<'_>,
    challenger_version_id: &str,
) -> Result<Vec<(String, String)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT DISTINCT v.judge_runtime, v.judge_model FROM skillopt_ab_judge_verdicts v
         JOIN eval_review_items i ON i.item_id = v.pick_id AND i.run_id = ?
         WHERE v.winner IS NOT NULL ORDER BY 1, 2",
    )
    .bind(format!("skillopt-ab:{challenger_version_id}"))
    .fetch_all(db)
    .await?)
}

/// The judges whose picks count toward `challenger_version_id` on their own: the `--judge-only`
/// A/Bs of its run (a judge ranked row with no human ranked row for the same A/B), one entry per
/// (runtime, model) juror; `None` for a judge row whose juror was not recorded (an A/B written
/// before the verdicts were kept), which no gate can measure. Ordered, distinct.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn judge_only_judges(
    db: impl SqliteExecutor<'_>,
    challenger_version_id: &str,
    judge_source: &str,
    human_source: &str,
) -> Result<Vec<Option<(String, String)>>, StoreError> {
    let rows: Vec<(Option<String>, Option<String>)> = sqlx::query_as(
        "SELECT DISTINCT v.judge_runtime, v.judge_model FROM ranked_feedback_events e
         LEFT JOIN skillopt_ab_judge_verdicts v ON v.pick_id = e.item_id
         WHERE e.run_id = ?1 AND e.source = ?2
           AND NOT EXISTS (SELECT 1 FROM ranked_feedback_events h
                           WHERE h.run_id = e.run_id AND h.item_id = e.item_id AND h.source = ?3)
         ORDER BY 1, 2",
    )
    .bind(format!("skillopt-ab:{challenger_version_id}"))
    .bind(judge_source)
    .bind(human_source)
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(runtime, model)| runtime.map(|r| (r, model.unwrap_or_default())))
        .collect())
}
