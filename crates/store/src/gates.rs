//! What the promotion gates read and record (issue 34 items 10, 11; facts §7 `pace_enabled`,
//! `gate_enabled`): the paired outcomes PACE bets on, in the order they were recorded.

use sqlx::SqliteExecutor;

use crate::StoreError;

/// The A/B picks of `challenger` against `champion`, oldest first: `true` where the challenger
/// won. The pairs of PACE on the Mode B path (one pick is one paired comparison; a pick always
/// has a winner, so there are no ties).
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn pick_sequence(
    db: impl SqliteExecutor<'_>,
    challenger: &str,
    champion: &str,
) -> Result<Vec<bool>, StoreError> {
    let rows: Vec<(String,)> = sqlx::query_as(
        "SELECT winner FROM skillopt_ab_picks WHERE challenger_version_id = ? AND champion_version_id = ? ORDER BY rowid",
    )
    .bind(challenger)
    .bind(champion)
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|(w,)| w == "challenger").collect())
}

/// The auto-trace outcomes of `version_id` recorded after event `after_seq` (a `feedback_events`
/// rowid) and before `until` (RFC 3339), oldest first: `true` for a positive (choice `a`). The
/// canary's window, one side at a time, as PACE pairs it (the i-th outcome of each side).
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn outcome_sequence(
    db: impl SqliteExecutor<'_>,
    version_id: &str,
    after_seq: i64,
    until: &str,
) -> Result<Vec<bool>, StoreError> {
    let rows: Vec<(String,)> = sqlx::query_as(
        "SELECT choice FROM feedback_events WHERE run_id = ? AND rowid > ? AND created_at < ? ORDER BY rowid",
    )
    .bind(format!("auto-trace:{version_id}"))
    .bind(after_seq)
    .bind(until)
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|(c,)| c == "a").collect())
}

/// One replay gate run (`skillopt_gate_runs`; facts §8).
#[derive(Debug, Clone, PartialEq, sqlx::FromRow, serde::Serialize)]
pub struct GateRunRow {
    /// `gate-<uuid v7>`.
    pub id: String,
    /// The template.
    pub template_id: String,
    /// The candidate replayed.
    pub candidate_version_id: String,
    /// The champion it was replayed against.
    pub champion_version_id: String,
    /// The corpus file as given.
    pub corpus_path: String,
    /// The corpus's own `version`.
    pub corpus_version: i64,
    /// Items replayed.
    pub corpus_items: i64,
    /// 1, or 2 for the retry after a failed run.
    pub attempts: i64,
    /// Whether the gate accepted the candidate.
    pub accepted: bool,
    /// The champion's corpus mean in [0,1], `None` when an item was unscorable.
    pub champion_mean: Option<f64>,
    /// The candidate's corpus mean in [0,1], `None` when an item was unscorable.
    pub candidate_mean: Option<f64>,
    /// Why.
    pub reason: String,
    /// The per-item scores and deltas (JSON array).
    pub deltas_json: String,
    /// RFC 3339.
    pub created_at: String,
    /// sha256 of the corpus's canonical JSON.
    pub corpus_hash: String,
}

/// Records a gate run (its `created_at` is now).
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn record_gate_run(
    db: impl SqliteExecutor<'_>,
    run: &GateRunRow,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO skillopt_gate_runs (id, template_id, candidate_version_id, champion_version_id, corpus_path, corpus_version,
           corpus_items, attempts, accepted, champion_mean, candidate_mean, reason, deltas_json, created_at, corpus_hash)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(&run.id)
    .bind(&run.template_id)
    .bind(&run.candidate_version_id)
    .bind(&run.champion_version_id)
    .bind(&run.corpus_path)
    .bind(run.corpus_version)
    .bind(run.corpus_items)
    .bind(run.attempts)
    .bind(run.accepted)
    .bind(run.champion_mean)
    .bind(run.candidate_mean)
    .bind(&run.reason)
    .bind(&run.deltas_json)
    .bind(crate::templates::now_rfc3339())
    .bind(&run.corpus_hash)
    .execute(db)
    .await?;
    Ok(())
}

/// The gate runs of `candidate`, oldest first.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn gate_runs(
    db: impl SqliteExecutor<'_>,
    candidate: &str,
) -> Result<Vec<GateRunRow>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT * FROM skillopt_gate_runs WHERE candidate_version_id = ? ORDER BY rowid",
    )
    .bind(candidate)
    .fetch_all(db)
    .await?)
}

/// The latest accepted gate run of `candidate` against `champion` (facts §7: `gate_enabled`
/// needs one, else `gate_blocked`).
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn accepted_gate_run(
    db: impl SqliteExecutor<'_>,
    candidate: &str,
    champion: &str,
) -> Result<Option<GateRunRow>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT * FROM skillopt_gate_runs WHERE candidate_version_id = ? AND champion_version_id = ? AND accepted = 1
         ORDER BY rowid DESC LIMIT 1",
    )
    .bind(candidate)
    .bind(champion)
    .fetch_optional(db)
    .await?)
}

/// Gives a candidate that has no score the replay gate's corpus mean as its score, with where it
/// came from in its summary metadata (`score_evidence`, replacing `score_unavailable`; issue 37
/// item 6). Nothing changes for a candidate that already has a score. Returns whether it changed.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn score_from_gate(
    db: impl SqliteExecutor<'_>,
    candidate: &str,
    score: f64,
    evidence: &str,
) -> Result<bool, StoreError> {
    let changed = sqlx::query(
        "UPDATE agent_template_candidate_reviews
         SET score = ?,
             summary_metadata_json = json_set(json_remove(CASE WHEN json_valid(summary_metadata_json) AND summary_metadata_json <> ''
                   THEN summary_metadata_json ELSE '{}' END, '$.score_unavailable'), '$.score_evidence', ?),
             updated_at = ?
         WHERE version_id = ? AND score IS NULL",
    )
    .bind(score)
    .bind(evidence)
    .bind(crate::templates::now_rfc3339())
    .bind(candidate)
    .execute(db)
    .await?
    .rows_affected();
    Ok(changed == 1)
}
