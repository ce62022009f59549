//! BINEVAL verdicts (`skillopt_binary_verdicts`; facts §8; seed: SkillOpt, "Binary evaluation
//! (BINEVAL)"; S-45, S-49).
//!
//! Rows upsert on `(run_id, question_id)` and keep the weights the run used. Lesson events are a
//! full replace of one synthetic run ([`replace_lesson_run`]).

use skillforge_contract::{BinaryVerdict, RankedFeedbackEvent};
use sqlx::{SqliteConnection, SqliteExecutor};

use crate::StoreError;
use crate::feedback::upsert_ranked_event;
use crate::templates::now_rfc3339;

/// One stored verdict.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct VerdictRecord {
    /// The run it was asked for.
    pub run_id: String,
    /// Question id.
    pub question_id: String,
    /// Dimension.
    pub dimension: String,
    /// `yes` | `no`.
    pub verdict: String,
    /// Why.
    pub explanation: String,
    /// Question weight used.
    pub question_weight: f64,
    /// Dimension weight used.
    pub dimension_weight: f64,
    /// RFC 3339.
    pub created_at: String,
}

impl VerdictRecord {
    /// The training-package shape (`binary_verdicts[]`).
    pub fn to_contract(&self) -> BinaryVerdict {
        BinaryVerdict {
            question_id: self.question_id.clone(),
            dimension: self.dimension.clone(),
            verdict: self.verdict.clone(),
            explanation: self.explanation.clone(),
            question_weight: self.question_weight,
            dimension_weight: self.dimension_weight,
            created_at: self.created_at.clone(),
        }
    }
}

/// Upserts one verdict on `(run_id, question_id)`; `created_at` is set now.
///
/// # Errors
/// [`StoreError::Sql`], including a verdict other than yes/no or a weight ≤ 0.
pub async fn upsert_verdict(
    conn: &mut SqliteConnection,
    v: &VerdictRecord,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO skillopt_binary_verdicts (run_id, question_id, dimension, verdict, explanation, question_weight,
           dimension_weight, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (run_id, question_id) DO UPDATE SET dimension = excluded.dimension, verdict = excluded.verdict,
           explanation = excluded.explanation, question_weight = excluded.question_weight,
           dimension_weight = excluded.dimension_weight, created_at = excluded.created_at",
    )
    .bind(&v.run_id)
    .bind(&v.question_id)
    .bind(&v.dimension)
    .bind(&v.verdict)
    .bind(&v.explanation)
    .bind(v.question_weight)
    .bind(v.dimension_weight)
    .bind(now_rfc3339())
    .execute(conn)
    .await?;
    Ok(())
}

/// A run's verdicts, by question id.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn list_verdicts(
    db: impl SqliteExecutor<'_>,
    run_id: &str,
) -> Result<Vec<VerdictRecord>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT run_id, question_id, dimension, verdict, explanation, question_weight, dimension_weight, created_at
         FROM skillopt_binary_verdicts WHERE run_id = ? ORDER BY question_id",
    )
    .bind(run_id)
    .fetch_all(db)
    .await?)
}

/// Verdicts of every run of `template_id` (runs in `eval_runs` with that template), optionally
/// only the runs in `run_ids`; by run then question.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn verdicts_of_template(
    db: impl SqliteExecutor<'_>,
    template_id: &str,
    run_ids: &[String],
) -> Result<Vec<VerdictRecord>, StoreError> {
    let rows: Vec<VerdictRecord> = sqlx::query_as(
        "SELECT v.run_id, v.question_id, v.dimension, v.verdict, v.explanation, v.question_weight, v.dimension_weight,
                v.created_at
         FROM skillopt_binary_verdicts v JOIN eval_runs r ON r.id = v.run_id
         WHERE r.template_id = ? ORDER BY v.run_id, v.question_id",
    )
    .bind(template_id)
    .fetch_all(db)
    .await?;
    Ok(if run_ids.is_empty() {
        rows
    } else {
        rows.into_iter()
            .filter(|r| run_ids.contains(&r.run_id))
            .collect()
    })
}

/// Replaces every ranked event of the synthetic lesson run `run_id` with `events` (creating the
/// run and one item per event when missing, deleting the items of lessons that went away), in the
/// caller's transaction (S-49: re-applying is idempotent; a shrinking lesson set removes stale
/// events). Returns the number of events written.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn replace_lesson_run(
    conn: &mut SqliteConnection,
    run_id: &str,
    template_id: &str,
    template_version_id: &str,
    events: &[RankedFeedbackEvent],
) -> Result<usize, StoreError> {
    let now = now_rfc3339();
    sqlx::query(
        "INSERT INTO eval_runs (id, template_id, template_version_id, state, metadata_json, created_at, updated_at)
         VALUES (?, ?, ?, 'ready', '{\"feedback_source\":\"binary_disagreement\"}', ?, ?)
         ON CONFLICT (id) DO UPDATE SET template_version_id = excluded.template_version_id, updated_at = excluded.updated_at",
    )
    .bind(run_id)
    .bind(template_id)
    .bind(template_version_id)
    .bind(&now)
    .bind(&now)
    .execute(&mut *conn)
    .await?;
    sqlx::query("DELETE FROM ranked_feedback_events WHERE run_id = ?")
        .bind(run_id)
        .execute(&mut *conn)
        .await?;
    sqlx::query("DELETE FROM eval_review_items WHERE run_id = ?")
        .bind(run_id)
        .execute(&mut *conn)
        .await?;
    for event in events {
        sqlx::query(
            "INSERT INTO eval_review_items (id, run_id, item_id, title, metadata_json, created_at, updated_at)
             VALUES (?, ?, ?, ?, '{\"binary_lesson\":true}', ?, ?) ON CONFLICT (run_id, item_id) DO NOTHING",
        )
        .bind(format!("{run_id}/{}", event.item_id))
        .bind(run_id)
        .bind(&event.item_id)
        .bind(format!("lesson {}", event.item_id))
        .bind(&now)
        .bind(&now)
        .execute(&mut *conn)
        .await?;
        upsert_ranked_event(&mut *conn, event).await?;
    }
    Ok(events.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Store;

    fn record(run: &str, q: &str, verdict: &str, qw: f64) -> VerdictRecord {
        VerdictRecord {
            run_id: run.into(),
            question_id: q.into(),
            dimension: "c".into(),
            verdict: verdict.into(),
            explanation: String::new(),
            question_weight: qw,
            dimension_weight: 2.0,
            created_at: String::new(),
        }
    }

    // S-45
    #[tokio::test]
    async fn s45_verdicts_upsert_per_run_and_question_and_keep_weights() {
        let home = tempfile::tempdir().unwrap();
        let store = Store::open(home.path()).await.unwrap();
        let mut conn = store.pool().acquire().await.unwrap();
        upsert_verdict(&mut conn, &record("r1", "q1", "no", 2.0))
            .await
            .unwrap();
        upsert_verdict(&mut conn, &record("r1", "q1", "yes", 2.0))
            .await
            .unwrap();
        upsert_verdict(&mut conn, &record("r1", "q2", "no", 1.0))
            .await
            .unwrap();
        let rows = list_verdicts(store.pool(), "r1").await.unwrap();
        assert_eq!(rows.len(), 2, "same (run, question) upserts in place");
        assert_eq!(
            (
                rows[0].verdict.as_str(),
                rows[0].question_weight,
                rows[0].dimension_weight
            ),
            ("yes", 2.0, 2.0)
        );
        assert!(
            upsert_verdict(&mut conn, &record("r1", "q3", "maybe", 1.0))
                .await
                .is_err()
        );
        assert!(
            upsert_verdict(&mut conn, &record("r1", "q3", "yes", 0.0))
                .await
                .is_err()
        );
    }
}
