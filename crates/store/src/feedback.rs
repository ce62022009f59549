//! Feedback events (A/B) and ranked feedback events (N-way) on review items (tables
//! `feedback_events`, `ranked_feedback_events`; facts §4, §8; seed "Markdown Feedback Packet",
//! "Ranked Exploration Export").
//!
//! **Invariant:** both tables are keyed for conflicts by `(run_id, item_id, reviewer, source,
//! source_url)` and rows are written by in-place upsert, with ids derived from that key
//! ([`skillforge_contract::feedback_event_id`]); importing the same response twice changes no row
//! count.

use std::collections::BTreeSet;

use serde_json::Value;
use skillforge_contract::{
    FeedbackEvent, RankedFeedbackEvent, ResolvedEntry, ResolvedFeedback, feedback_event_id,
    ranked_feedback_event_id,
};
use sqlx::{SqliteConnection, SqlitePool};

use crate::StoreError;

/// `created_at` of an event written now: RFC 3339 UTC with seconds, as Go's `time.RFC3339`
/// (facts §4: "created_at RFC3339 UTC now").
pub fn event_created_at_now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Whether an upsert created a row or rewrote an existing one in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upserted {
    /// A new row.
    Inserted,
    /// An existing row (same five-column key) was updated.
    Updated,
}

/// What writing a response did, per table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WriteCounts {
    /// New `feedback_events` rows.
    pub feedback_inserted: usize,
    /// Rewritten `feedback_events` rows.
    pub feedback_updated: usize,
    /// New `ranked_feedback_events` rows.
    pub ranked_inserted: usize,
    /// Rewritten `ranked_feedback_events` rows.
    pub ranked_updated: usize,
}

impl WriteCounts {
    fn add(&mut self, ranked: bool, outcome: Upserted) {
        match (ranked, outcome) {
            (false, Upserted::Inserted) => self.feedback_inserted += 1,
            (false, Upserted::Updated) => self.feedback_updated += 1,
            (true, Upserted::Inserted) => self.ranked_inserted += 1,
            (true, Upserted::Updated) => self.ranked_updated += 1,
        }
    }
}

/// Turns a validated, de-blinded response into events: A/B entries (and skipped ranked items)
/// become [`FeedbackEvent`]s with the stored choice (a = baseline, b = candidate, S-95); ranked
/// entries become [`RankedFeedbackEvent`]s with `ranking`, `tie_groups` (groups of ≥ 2), the winner,
/// trait maps keyed by lowercase label, and `required_improvements` (omitted when empty). Ids come
/// from the five-column key; every event gets `source`, `source_url` and `created_at` (RFC 3339).
pub fn events_from_resolved(
    resolved: &ResolvedFeedback,
    source: &str,
    source_url: &str,
    created_at: &str,
) -> (Vec<FeedbackEvent>, Vec<RankedFeedbackEvent>) {
    let mut plain = Vec::new();
    let mut ranked = Vec::new();
    let reviewer = resolved.reviewer.as_str();
    for entry in &resolved.entries {
        match entry {
            ResolvedEntry::Choice {
                item_id,
                choice,
                reasoning,
            } => plain.push(FeedbackEvent {
                run_id: resolved.run_id.clone(),
                item_id: item_id.clone(),
                choice: choice.as_str().to_owned(),
                reasoning: reasoning.clone(),
                reviewer: reviewer.to_owned(),
                source: source.to_owned(),
                source_url: source_url.to_owned(),
                created_at: created_at.to_owned(),
            }),
            ResolvedEntry::Ranked(entry) => {
                let traits = |map: &std::collections::BTreeMap<String, Vec<String>>| {
                    (!map.is_empty()).then(|| serde_json::to_value(map).unwrap_or(Value::Null))
                };
                ranked.push(RankedFeedbackEvent {
                    id: ranked_feedback_event_id(
                        &resolved.run_id,
                        &entry.item_id,
                        reviewer,
                        source,
                        source_url,
                    ),
                    run_id: resolved.run_id.clone(),
                    item_id: entry.item_id.clone(),
                    ranking: entry.ranking.labels(),
                    tie_groups: entry.ranking.tie_groups(),
                    winner: entry.winner.clone().unwrap_or_default(),
                    useful_traits: traits(&entry.useful_traits),
                    rejected_traits: traits(&entry.rejected_traits),
                    required_improvements: (!entry.required_improvements.is_empty())
                        .then(|| Value::from(entry.required_improvements.clone())),
                    quality: entry.quality.clone(),
                    continue_mode: entry.continue_mode.clone(),
                    promote: entry.promote.clone(),
                    reasoning: entry.reasoning.clone(),
                    reviewer: reviewer.to_owned(),
                    source: source.to_owned(),
                    source_url: source_url.to_owned(),
                    created_at: created_at.to_owned(),
                });
            }
        }
    }
    (plain, ranked)
}

async fn key_exists(
    conn: &mut SqliteConnection,
    table: &str,
    run_id: &str,
    item_id: &str,
    reviewer: &str,
    source: &str,
    source_url: &str,
) -> Result<bool, StoreError> {
    // `table` is one of this module's two table names, never input.
    let n: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT COUNT(*) FROM {table} WHERE run_id = ? AND item_id = ? AND reviewer = ? AND source = ? AND source_url = ?"
    )))
    .bind(run_id)
    .bind(item_id)
    .bind(reviewer)
    .bind(source)
    .bind(source_url)
    .fetch_one(conn)
    .await?;
    Ok(n > 0)
}

/// Upserts an A/B event under the five-column key; the id is recomputed from the key. An
/// existing row keeps its id and gets the new choice, reasoning and created_at.
///
/// # Errors
/// [`StoreError::Sql`] (including a choice outside a|b|tie|neither|skip, refused by the table).
pub async fn upsert_feedback_event(
    conn: &mut SqliteConnection,
    event: &FeedbackEvent,
) -> Result<Upserted, StoreError> {
    let e = event;
    let existed = key_exists(
        conn,
        "feedback_events",
        &e.run_id,
        &e.item_id,
        &e.reviewer,
        &e.source,
        &e.source_url,
    )
    .await?;
    sqlx::query(
        "INSERT INTO feedback_events (id, run_id, item_id, choice, reasoning, reviewer, source, source_url, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (run_id, item_id, reviewer, source, source_url) DO UPDATE SET
           choice = excluded.choice, reasoning = excluded.reasoning, created_at = excluded.created_at",
    )
    .bind(feedback_event_id(&e.run_id, &e.item_id, &e.reviewer, &e.source, &e.source_url))
    .bind(&e.run_id)
    .bind(&e.item_id)
    .bind(&e.choice)
    .bind(&e.reasoning)
    .bind(&e.reviewer)
    .bind(&e.source)
    .bind(&e.source_url)
    .bind(&e.created_at)
    .execute(conn)
    .await?;
    Ok(if existed {
        Upserted::Updated
    } else {
        Upserted::Inserted
    })
}

fn json_or_empty(value: Option<&Value>) -> String {
    value.map(Value::to_string).unwrap_or_default()
}

/// Upserts a ranked event under the five-column key; `event.id` is replaced by the key-derived id
/// ([`ranked_feedback_event_id`]). An existing row keeps its id and gets every other column anew.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn upsert_ranked_event(
    conn: &mut SqliteConnection,
    event: &RankedFeedbackEvent,
) -> Result<Upserted, StoreError> {
    let e = event;
    let existed = key_exists(
        conn,
        "ranked_feedback_events",
        &e.run_id,
        &e.item_id,
        &e.reviewer,
        &e.source,
        &e.source_url,
    )
    .await?;
    let tie_groups = if e.tie_groups.is_empty() {
        String::new()
    } else {
        Value::from(e.tie_groups.clone()).to_string()
    };
    sqlx::query(
        "INSERT INTO ranked_feedback_events (id, run_id, item_id, ranking_json, winner, useful_traits_json,
            rejected_traits_json, reasoning, reviewer, source, source_url, created_at, quality, continue_mode, promote,
            required_improvements_json, tie_groups_json)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (run_id, item_id, reviewer, source, source_url) DO UPDATE SET
           ranking_json = excluded.ranking_json, winner = excluded.winner,
           useful_traits_json = excluded.useful_traits_json, rejected_traits_json = excluded.rejected_traits_json,
           reasoning = excluded.reasoning, created_at = excluded.created_at, quality = excluded.quality,
           continue_mode = excluded.continue_mode, promote = excluded.promote,
           required_improvements_json = excluded.required_improvements_json, tie_groups_json = excluded.tie_groups_json",
    )
    .bind(ranked_feedback_event_id(&e.run_id, &e.item_id, &e.reviewer, &e.source, &e.source_url))
    .bind(&e.run_id)
    .bind(&e.item_id)
    .bind(Value::from(e.ranking.clone()).to_string())
    .bind(&e.winner)
    .bind(json_or_empty(e.useful_traits.as_ref()))
    .bind(json_or_empty(e.rejected_traits.as_ref()))
    .bind(&e.reasoning)
    .bind(&e.reviewer)
    .bind(&e.source)
    .bind(&e.source_url)
    .bind(&e.created_at)
    .bind(&e.quality)
    .bind(&e.continue_mode)
    .bind(&e.promote)
    .bind(json_or_empty(e.required_improvements.as_ref()))
    .bind(tie_groups)
    .execute(conn)
    .await?;
    Ok(if existed {
        Upserted::Updated
    } else {
        Upserted::Inserted
    })
}

/// Writes a whole validated response in the caller's transaction ([`events_from_resolved`] then
/// the upserts). The caller commits; dropping the transaction writes nothing (S-94).
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn write_resolved(
    conn: &mut SqliteConnection,
    resolved: &ResolvedFeedback,
    source: &str,
    source_url: &str,
    created_at: &str,
) -> Result<WriteCounts, StoreError> {
    let (plain, ranked) = events_from_resolved(resolved, source, source_url, created_at);
    let mut counts = WriteCounts::default();
    for event in &plain {
        counts.add(false, upsert_feedback_event(&mut *conn, event).await?);
    }
    for event in &ranked {
        counts.add(true, upsert_ranked_event(&mut *conn, event).await?);
    }
    Ok(counts)
}

#[derive(sqlx::FromRow)]
struct FeedbackRow {
    run_id: String,
    item_id: String,
    choice: String,
    reasoning: String,
    reviewer: String,
    source: String,
    source_url: String,
    created_at: String,
}

/// A run's A/B events, by item, reviewer, source, source_url.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn list_feedback_events(
    pool: &SqlitePool,
    run_id: &str,
) -> Result<Vec<FeedbackEvent>, StoreError> {
    let rows = sqlx::query_as::<_, FeedbackRow>(
        "SELECT run_id, item_id, choice, reasoning, reviewer, source, source_url, created_at FROM feedback_events
         WHERE run_id = ? ORDER BY item_id, reviewer, source, source_url",
    )
    .bind(run_id)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| FeedbackEvent {
            run_id: r.run_id,
            item_id: r.item_id,
            choice: r.choice,
            reasoning: r.reasoning,
            reviewer: r.reviewer,
            source: r.source,
            source_url: r.source_url,
            created_at: r.created_at,
        })
        .collect())
}

#[derive(sqlx::FromRow)]
struct RankedRow {
    id: String,
    run_id: String,
    item_id: String,
    ranking_json: String,
    winner: String,
    useful_traits_json: String,
    rejected_traits_json: String,
    reasoning: String,
    reviewer: String,
    source: String,
    source_url: String,
    created_at: String,
    quality: String,
    continue_mode: String,
    promote: String,
    required_improvements_json: String,
    tie_groups_json: String,
}

fn raw(text: &str) -> Option<Value> {
    if text.trim().is_empty() {
        None
    } else {
        serde_json::from_str(text).ok()
    }
}

/// A run's ranked events, by item, reviewer, source, source_url. JSON columns that fail to decode
/// read as absent.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn list_ranked_events(
    pool: &SqlitePool,
    run_id: &str,
) -> Result<Vec<RankedFeedbackEvent>, StoreError> {
    let rows = sqlx::query_as::<_, RankedRow>(
        "SELECT id, run_id, item_id, ranking_json, winner, useful_traits_json, rejected_traits_json, reasoning, reviewer,
                source, source_url, created_at, quality, continue_mode, promote, required_improvements_json, tie_groups_json
         FROM ranked_feedback_events WHERE run_id = ? ORDER BY item_id, reviewer, source, source_url",
    )
    .bind(run_id)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| RankedFeedbackEvent {
            id: r.id,
            run_id: r.run_id,
            item_id: r.item_id,
            ranking: serde_json::from_str(&r.ranking_json).unwrap_or_default(),
            tie_groups: serde_json::from_str(&r.tie_groups_json).unwrap_or_default(),
            winner: r.winner,
            useful_traits: raw(&r.useful_traits_json),
            rejected_traits: raw(&r.rejected_traits_json),
            required_improvements: raw(&r.required_improvements_json),
            quality: r.quality,
            continue_mode: r.continue_mode,
            promote: r.promote,
            reasoning: r.reasoning,
            reviewer: r.reviewer,
            source: r.source,
            source_url: r.source_url,
            created_at: r.created_at,
        })
        .collect())
}

/// Row counts of a run: `(feedback_events, ranked_feedback_events)`.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn count_events(pool: &SqlitePool, run_id: &str) -> Result<(i64, i64), StoreError> {
    let plain: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM feedback_events WHERE run_id = ?")
        .bind(run_id)
        .fetch_one(pool)
        .await?;
    let ranked: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM ranked_feedback_events WHERE run_id = ?")
            .bind(run_id)
            .fetch_one(pool)
            .await?;
    Ok((plain, ranked))
}

/// Removes the rows of one source document (`source`, `source_url`, e.g. a GitHub comment) of run
/// `run_id` whose item is not in `keep`: an edited comment that no longer answers an item
/// supersedes that item's old row (issue 16). Returns the rows removed (both kinds).
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn delete_superseded(
    conn: &mut SqliteConnection,
    run_id: &str,
    source: &str,
    source_url: &str,
    keep: &BTreeSet<String>,
) -> Result<u64, StoreError> {
    let keep_json = serde_json::to_string(keep).unwrap_or_else(|_| "[]".into());
    let mut removed = 0;
    for table in ["feedback_events", "ranked_feedback_events"] {
        let done = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DELETE FROM {table} WHERE run_id = ? AND source = ? AND source_url = ? AND item_id NOT IN (SELECT value FROM json_each(?))"
        )))
        .bind(run_id)
        .bind(source)
        .bind(source_url)
        .bind(&keep_json)
        .execute(&mut *conn)
        .await?;
        removed += done.rows_affected();
    }
    Ok(removed)
}

/// Item ids of a run that have at least one event of either kind.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn items_with_feedback(
    pool: &SqlitePool,
    run_id: &str,
) -> Result<BTreeSet<String>, StoreError> {
    let ids: Vec<String> = sqlx::query_scalar(
        "SELECT item_id FROM feedback_events WHERE run_id = ? UNION SELECT item_id FROM ranked_feedback_events WHERE run_id = ?",
    )
    .bind(run_id)
    .bind(run_id)
    .fetch_all(pool)
    .await?;
    Ok(ids.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use skillforge_contract::{
        Assignments, blind_assignment, parse_feedback_yml, resolve_feedback,
    };

    use super::*;
    use crate::Store;
    use crate::review::{NewEvalRun, RunSettings, create_run};

    async fn store_with_run() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).await.unwrap();
        let run = NewEvalRun {
            id: "r1".into(),
            template_id: "planner".into(),
            template_version_id: "planner@v1".into(),
            target_repo: String::new(),
            settings: RunSettings::normalize(None, None, None).unwrap(),
            metadata_json: String::new(),
        };
        let mut tx = store.begin().await.unwrap();
        assert!(create_run(&mut tx, &run).await.unwrap());
        tx.commit().await.unwrap();
        (dir, store)
    }

    fn resolved(choice: &str) -> ResolvedFeedback {
        let assignments = Assignments {
            run_id: "r1".into(),
            items: vec![blind_assignment("r1", "i1", "base", "cand")],
        };
        let yml =
            format!("run_id: r1\nreviewer: alice\nitems:\n  - item_id: i1\n    choice: {choice}\n");
        resolve_feedback(&assignments, &parse_feedback_yml(&yml).unwrap(), None).unwrap()
    }

    #[tokio::test]
    async fn reimport_upserts_in_place_under_the_five_column_key() {
        let (_dir, store) = store_with_run().await;
        let mut tx = store.begin().await.unwrap();
        let first = write_resolved(
            &mut tx,
            &resolved("tie"),
            "markdown",
            "/p",
            "2026-01-01T00:00:00Z",
        )
        .await
        .unwrap();
        tx.commit().await.unwrap();
        assert_eq!(first.feedback_inserted, 1);
        let mut tx = store.begin().await.unwrap();
        let again = write_resolved(
            &mut tx,
            &resolved("neither"),
            "markdown",
            "/p",
            "2026-01-02T00:00:00Z",
        )
        .await
        .unwrap();
        tx.commit().await.unwrap();
        assert_eq!((again.feedback_inserted, again.feedback_updated), (0, 1));
        assert_eq!(count_events(store.pool(), "r1").await.unwrap(), (1, 0));
        let events = list_feedback_events(store.pool(), "r1").await.unwrap();
        assert_eq!(
            (events[0].choice.as_str(), events[0].created_at.as_str()),
            ("neither", "2026-01-02T00:00:00Z")
        );
        // Another source_url is another key: a second row.
        let mut tx = store.begin().await.unwrap();
        write_resolved(
            &mut tx,
            &resolved("tie"),
            "markdown",
            "/other",
            "2026-01-03T00:00:00Z",
        )
        .await
        .unwrap();
        tx.commit().await.unwrap();
        assert_eq!(count_events(store.pool(), "r1").await.unwrap(), (2, 0));
    }

    #[tokio::test]
    async fn ranked_event_round_trips_through_the_table() {
        let (_dir, store) = store_with_run().await;
        let event = RankedFeedbackEvent {
            id: "ignored".into(),
            run_id: "r1".into(),
            item_id: "i1".into(),
            ranking: vec!["c".into(), "a".into(), "d".into(), "b".into()],
            tie_groups: vec![vec!["a".into(), "d".into()]],
            winner: "c".into(),
            useful_traits: Some(serde_json::json!({"c": ["clear"]})),
            required_improvements: Some(serde_json::json!(["mobile"])),
            reviewer: "alice".into(),
            source: "markdown".into(),
            source_url: "/p".into(),
            created_at: "2026-01-01T00:00:00Z".into(),
            ..Default::default()
        };
        let mut tx = store.begin().await.unwrap();
        assert_eq!(
            upsert_ranked_event(&mut tx, &event).await.unwrap(),
            Upserted::Inserted
        );
        assert_eq!(
            upsert_ranked_event(&mut tx, &event).await.unwrap(),
            Upserted::Updated
        );
        tx.commit().await.unwrap();
        let got = list_ranked_events(store.pool(), "r1").await.unwrap();
        let want = RankedFeedbackEvent {
            id: ranked_feedback_event_id("r1", "i1", "alice", "markdown", "/p"),
            ..event
        };
        assert_eq!(got, vec![want]);
    }

    #[tokio::test]
    async fn s94_dropped_transaction_writes_nothing() {
        let (_dir, store) = store_with_run().await;
        {
            let mut tx = store.begin().await.unwrap();
            write_resolved(
                &mut tx,
                &resolved("a"),
                "markdown",
                "/p",
                "2026-01-01T00:00:00Z",
            )
            .await
            .unwrap();
        }
        assert_eq!(count_events(store.pool(), "r1").await.unwrap(), (0, 0));
    }
}
