//! What promotion decisions read and write besides the candidate itself (seed: SkillOpt,
//! "Promotion policy + notifications"; S-52, S-54, S-58, S-60..S-62): the emitted-event log,
//! pending candidates across templates, the auto-trace evidence of a version, and canary state.

use sqlx::{SqliteConnection, SqliteExecutor};

use crate::StoreError;
use crate::templates::now_rfc3339;

/// Records that `event` was emitted for `job_id`; false when it already was (emit once).
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn record_event(
    conn: &mut SqliteConnection,
    event: &str,
    job_id: &str,
    root_id: &str,
    detail_json: &str,
) -> Result<bool, StoreError> {
    Ok(sqlx::query(
        "INSERT INTO promotion_events (event, job_id, root_id, detail_json, created_at) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (event, job_id, change_key) DO NOTHING",
    )
    .bind(event)
    .bind(job_id)
    .bind(root_id)
    .bind(detail_json)
    .bind(now_rfc3339())
    .execute(conn)
    .await?
    .rows_affected()
        == 1)
}

/// Records `event` for `job_id` when `what` differs from what its last record of that event said
/// (issue 37 item 11: an event sent again when the thing it reports changes); false when it is the
/// same (or a concurrent writer recorded the same change first). The n-th change is stored under
/// `change_key` `<n>:<what>`; a record made by [`record_event`] counts as saying nothing.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn record_event_on_change(
    conn: &mut SqliteConnection,
    event: &str,
    job_id: &str,
    root_id: &str,
    detail_json: &str,
    what: &str,
) -> Result<bool, StoreError> {
    Ok(sqlx::query(
        "INSERT INTO promotion_events (event, job_id, root_id, detail_json, created_at, change_key)
         SELECT ?1, ?2, ?3, ?4, ?5, (SELECT COUNT(*) FROM promotion_events WHERE event = ?1 AND job_id = ?2) || ':' || ?6
         WHERE COALESCE((SELECT CASE WHEN instr(change_key, ':') > 0 THEN substr(change_key, instr(change_key, ':') + 1) END
                         FROM promotion_events WHERE event = ?1 AND job_id = ?2 ORDER BY rowid DESC LIMIT 1), '') IS NOT ?6
         ON CONFLICT (event, job_id, change_key) DO NOTHING",
    )
    .bind(event)
    .bind(job_id)
    .bind(root_id)
    .bind(detail_json)
    .bind(now_rfc3339())
    .bind(what)
    .execute(conn)
    .await?
    .rows_affected()
        == 1)
}

/// The detail JSON `event` was first logged with for `job_id`, `None` when it was not logged.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn event_detail(
    db: impl SqliteExecutor<'_>,
    event: &str,
    job_id: &str,
) -> Result<Option<String>, StoreError> {
    Ok(sqlx::query_scalar("SELECT detail_json FROM promotion_events WHERE event = ? AND job_id = ? ORDER BY rowid LIMIT 1")
        .bind(event)
        .bind(job_id)
        .fetch_optional(db)
        .await?)
}

/// Records the counts canary `version_id`'s window decision `stage` (`graduate`, `roll_back`,
/// `inconclusive`) was made on (issue 37 item 11), replacing what an earlier check recorded.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn record_window_evidence(
    db: impl SqliteExecutor<'_>,
    version_id: &str,
    stage: &str,
    detail_json: &str,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO canary_window_evidence (version_id, stage, detail_json, updated_at) VALUES (?, ?, ?, ?)
         ON CONFLICT (version_id, stage) DO UPDATE SET detail_json = excluded.detail_json, updated_at = excluded.updated_at",
    )
    .bind(version_id)
    .bind(stage)
    .bind(detail_json)
    .bind(now_rfc3339())
    .execute(db)
    .await?;
    Ok(())
}

/// The counts recorded by [`record_window_evidence`], `None` when none were.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn window_evidence(
    db: impl SqliteExecutor<'_>,
    version_id: &str,
    stage: &str,
) -> Result<Option<String>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT detail_json FROM canary_window_evidence WHERE version_id = ? AND stage = ?",
    )
    .bind(version_id)
    .bind(stage)
    .fetch_optional(db)
    .await?)
}

/// One logged event.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct EventRow {
    /// Wire name.
    pub event: String,
    /// Version (or ask job) id.
    pub job_id: String,
    /// Template id.
    pub root_id: String,
    /// The redacted detail JSON.
    pub detail_json: String,
    /// RFC 3339.
    pub created_at: String,
}

/// Logged events, oldest first.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn list_events(db: impl SqliteExecutor<'_>) -> Result<Vec<EventRow>, StoreError> {
    Ok(sqlx::query_as("SELECT event, job_id, root_id, detail_json, created_at FROM promotion_events ORDER BY created_at, event")
        .fetch_all(db)
        .await?)
}

/// Ids of `template_id`'s versions in state `pending`, oldest first.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn pending_versions(
    db: impl SqliteExecutor<'_>,
    template_id: &str,
) -> Result<Vec<String>, StoreError> {
    Ok(sqlx::query_scalar("SELECT id FROM agent_template_versions WHERE template_id = ? AND state = 'pending' ORDER BY version")
        .bind(template_id)
        .fetch_all(db)
        .await?)
}

/// What the guardrails read from `auto-trace:<version>` (S-54, S-58, resolutions 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AutoTraceCounts {
    /// Whether the run exists.
    pub run_exists: bool,
    /// `feedback_events` rows in the run, all legs.
    pub samples: u64,
    /// The harvester's own floor rows (source `auto-trace`, reviewer `gitmoot-auto`, choice `a`)
    /// whose item the harvester recorded as merged with external CI (item metadata `outcome` =
    /// `merged`, `ci` = `external`).
    pub real_ci_positives: u64,
}

/// Reads the auto-trace evidence of `version_id`: only run `auto-trace:<version_id>`, never a
/// human review run (S-54). A real-CI positive (S-58) is decided from the structured fields the
/// harvester writes on the floor row's item (its outcome and CI class) and the row's choice,
/// never from the reasoning's text: "no passing external CI" contains "passing external CI".
///
/// # Errors
/// [`StoreError::Sql`] (callers treat it as feedback unavailable).
pub async fn auto_trace_counts(
    db: &sqlx::SqlitePool,
    version_id: &str,
) -> Result<AutoTraceCounts, StoreError> {
    let run_id = format!("auto-trace:{version_id}");
    let run_exists: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM eval_runs WHERE id = ?")
        .bind(&run_id)
        .fetch_one(db)
        .await?;
    let (samples, real_ci): (i64, i64) = sqlx::query_as(
        "SELECT COUNT(*), COALESCE(SUM(CASE WHEN f.source = 'auto-trace' AND f.reviewer = 'gitmoot-auto' AND f.choice = 'a'
                 AND json_valid(i.metadata_json)
                 AND json_extract(i.metadata_json, '$.outcome') = 'merged'
                 AND json_extract(i.metadata_json, '$.ci') = 'external' THEN 1 ELSE 0 END), 0)
         FROM feedback_events f
         LEFT JOIN eval_review_items i ON i.run_id = f.run_id AND i.item_id = f.item_id
         WHERE f.run_id = ?",
    )
    .bind(&run_id)
    .fetch_one(db)
    .await?;
    Ok(AutoTraceCounts {
        run_exists: run_exists > 0,
        samples: samples as u64,
        real_ci_positives: real_ci as u64,
    })
}

/// `(positives, total)` of `auto-trace:<version_id>` feedback events created in `[since, until)`
/// (RFC 3339 strings compare in time order); positive = choice `a` (S-61).
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn outcomes_between(
    db: impl SqliteExecutor<'_>,
    version_id: &str,
    since: &str,
    until: &str,
) -> Result<(u64, u64), StoreError> {
    let (pos, total): (i64, i64) = sqlx::query_as(
        "SELECT COALESCE(SUM(CASE WHEN choice = 'a' THEN 1 ELSE 0 END), 0), COUNT(*) FROM feedback_events
         WHERE run_id = ? AND created_at >= ? AND created_at < ?",
    )
    .bind(format!("auto-trace:{version_id}"))
    .bind(since)
    .bind(until)
    .fetch_one(db)
    .await?;
    Ok((pos as u64, total as u64))
}

/// `(positives, total)` of `auto-trace:<version_id>` feedback events written after the event
/// with rowid `after_seq` (a canary's start, [`CanaryRow::canary_started_seq`]) and created
/// before `until` (RFC 3339): the events of a canary's window, never one written before it
/// started whatever its one-second `created_at` says (issue 37 item 1; S-61).
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn outcomes_after_seq(
    db: impl SqliteExecutor<'_>,
    version_id: &str,
    after_seq: i64,
    until: &str,
) -> Result<(u64, u64), StoreError> {
    let (pos, total): (i64, i64) = sqlx::query_as(
        "SELECT COALESCE(SUM(CASE WHEN choice = 'a' THEN 1 ELSE 0 END), 0), COUNT(*) FROM feedback_events
         WHERE run_id = ? AND rowid > ? AND created_at < ?",
    )
    .bind(format!("auto-trace:{version_id}"))
    .bind(after_seq)
    .bind(until)
    .fetch_one(db)
    .await?;
    Ok((pos as u64, total as u64))
}

/// Ends the running canary of `template_id`, if any, other than `except`: back to `pending`
/// (its window measured it against a champion that just changed, so it is decided again
/// against the new one), its window's start cleared. Returns the ended canary's id. Call inside
/// the write transaction that changed the template (issue 37 item 2).
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn end_canary(
    conn: &mut SqliteConnection,
    template_id: &str,
    except: &str,
) -> Result<Option<String>, StoreError> {
    let Some(canary) = canary_of(&mut *conn, template_id).await? else {
        return Ok(None);
    };
    if canary.id == except {
        return Ok(None);
    }
    sqlx::query(
        "UPDATE agent_template_versions SET state = 'pending', canary_sample = NULL, canary_started_at = NULL, canary_started_seq = NULL, updated_at = ?
         WHERE id = ? AND state = 'canary'",
    )
    .bind(now_rfc3339())
    .bind(&canary.id)
    .execute(conn)
    .await?;
    Ok(Some(canary.id))
}

/// Versions whose candidate decision carries `reason` and for which `event` has not been logged
/// yet, as `(version_id, template_id)`: the decisions a result handler applied whose notification
/// the control plane still owes (the outbox of the canary's durable decision jobs, S-61).
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn decided_without_event(
    db: impl SqliteExecutor<'_>,
    reason: &str,
    event: &str,
) -> Result<Vec<(String, String)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT r.version_id, v.template_id FROM agent_template_candidate_reviews r
         JOIN agent_template_versions v ON v.id = r.version_id
         WHERE r.decision_reason = ?
           AND NOT EXISTS (SELECT 1 FROM promotion_events e WHERE e.event = ? AND e.job_id = r.version_id)
         ORDER BY r.version_id",
    )
    .bind(reason)
    .bind(event)
    .fetch_all(db)
    .await?)
}

/// A canary version.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct CanaryRow {
    /// `<template>@vN`.
    pub id: String,
    /// Template id.
    pub template_id: String,
    /// Traffic fraction in (0,1].
    pub canary_sample: f64,
    /// RFC 3339.
    pub canary_started_at: String,
    /// The last `feedback_events` rowid when the canary started: its window reads only rows after
    /// it (issue 37 item 1). `None` for a canary started before the column existed.
    pub canary_started_seq: Option<i64>,
}

/// The canary of `template_id`, if any.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn canary_of(
    db: impl SqliteExecutor<'_>,
    template_id: &str,
) -> Result<Option<CanaryRow>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT id, template_id, COALESCE(canary_sample, 0.0) AS canary_sample, COALESCE(canary_started_at, '') AS canary_started_at,
                canary_started_seq
         FROM agent_template_versions WHERE template_id = ? AND state = 'canary' ORDER BY version DESC LIMIT 1",
    )
    .bind(template_id)
    .fetch_optional(db)
    .await?)
}

/// Every canary, by template.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn list_canaries(db: impl SqliteExecutor<'_>) -> Result<Vec<CanaryRow>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT id, template_id, COALESCE(canary_sample, 0.0) AS canary_sample, COALESCE(canary_started_at, '') AS canary_started_at,
                canary_started_seq
         FROM agent_template_versions WHERE state = 'canary' ORDER BY template_id",
    )
    .fetch_all(db)
    .await?)
}

/// What [`start_canary`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CanaryStart {
    /// The version is now the template's canary.
    Started,
    /// It already was (idempotent).
    AlreadyCanary,
    /// Not a pending version (its state).
    WrongState(String),
    /// Another version of the template is the canary.
    OtherCanary(String),
    /// The candidate was built on `base`, which is no longer the champion `champion`
    /// (issue 37 item 2: "rebase needed").
    StaleBase {
        /// The version it was built on.
        base: String,
        /// The current champion.
        champion: String,
    },
    /// No such version.
    NotFound,
}

/// Puts pending `version_id` behind the live champion as canary with `sample` in (0,1], unless
/// another version is the canary or the candidate's base is not the champion
/// (S-60): state `canary`, `canary_sample`, `canary_started_at` = now, `canary_started_seq` = the
/// last feedback event's rowid (its window starts after it). The current version is untouched. Call inside a write transaction.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn start_canary(
    conn: &mut SqliteConnection,
    version_id: &str,
    sample: f64,
) -> Result<CanaryStart, StoreError> {
    let row: Option<(String, String)> =
        sqlx::query_as("SELECT template_id, state FROM agent_template_versions WHERE id = ?")
            .bind(version_id)
            .fetch_optional(&mut *conn)
            .await?;
    let Some((template_id, state)) = row else {
        return Ok(CanaryStart::NotFound);
    };
    if state == "canary" {
        return Ok(CanaryStart::AlreadyCanary);
    }
    if state != "pending" {
        return Ok(CanaryStart::WrongState(state));
    }
    if let Some(other) = canary_of(&mut *conn, &template_id).await? {
        return Ok(CanaryStart::OtherCanary(other.id));
    }
    let base: Option<String> = sqlx::query_scalar(
        "SELECT base_version_id FROM agent_template_candidate_reviews WHERE version_id = ?",
    )
    .bind(version_id)
    .fetch_optional(&mut *conn)
    .await?;
    let champion: Option<String> = sqlx::query_scalar(
        "SELECT id FROM agent_template_versions WHERE template_id = ? AND state = 'current'",
    )
    .bind(&template_id)
    .fetch_optional(&mut *conn)
    .await?;
    if let (Some(base), Some(champion)) = (base.filter(|b| !b.is_empty()), champion)
        && base != champion
    {
        return Ok(CanaryStart::StaleBase { base, champion });
    }
    let now = now_rfc3339();
    sqlx::query(
        "UPDATE agent_template_versions SET state = 'canary', canary_sample = ?, canary_started_at = ?, updated_at = ?,
                canary_started_seq = (SELECT COALESCE(MAX(rowid), 0) FROM feedback_events)
         WHERE id = ?",
    )
    .bind(sample)
    .bind(&now)
    .bind(&now)
    .bind(version_id)
    .execute(conn)
    .await?;
    Ok(CanaryStart::Started)
}

#[cfg(test)]
mod tests {
    use skillforge_contract::FeedbackEvent;

    use super::*;
    use crate::Store;
    use crate::feedback::upsert_feedback_event;
    use crate::review::{NewEvalRun, RunSettings, create_run};

    fn event(reviewer: &str, source: &str, item: &str, reasoning: &str) -> FeedbackEvent {
        FeedbackEvent {
            run_id: "auto-trace:t@v2".into(),
            item_id: item.into(),
            choice: "a".into(),
            reasoning: reasoning.into(),
            reviewer: reviewer.into(),
            source: source.into(),
            source_url: String::new(),
            created_at: "2026-01-01T00:00:00Z".into(),
        }
    }

    // S-54 (S-58's real-CI count is tested end to end with the harvester as its producer:
    // tests/tests/decide.rs `s58_merges_without_external_ci_never_promote`)
    #[tokio::test]
    async fn s54_only_the_auto_trace_run_is_read_and_outcomes_are_windowed() {
        let home = tempfile::tempdir().unwrap();
        let store = Store::open(home.path()).await.unwrap();
        let missing = auto_trace_counts(store.pool(), "t@v2").await.unwrap();
        assert_eq!(
            missing,
            AutoTraceCounts {
                run_exists: false,
                samples: 0,
                real_ci_positives: 0
            }
        );
        let mut conn = store.pool().acquire().await.unwrap();
        let run = NewEvalRun {
            id: "auto-trace:t@v2".into(),
            template_id: "t".into(),
            template_version_id: "t@v2".into(),
            target_repo: String::new(),
            settings: RunSettings::normalize(None, None, None).unwrap(),
            metadata_json: String::new(),
        };
        create_run(&mut conn, &run).await.unwrap();
        upsert_feedback_event(
            &mut conn,
            &event(
                "gitmoot-auto",
                "auto-trace",
                "a/b#1",
                "Merged with passing external CI",
            ),
        )
        .await
        .unwrap();
        upsert_feedback_event(
            &mut conn,
            &event(
                "gitmoot-review",
                "auto-trace",
                "review#a/b#1",
                "claims passing external CI",
            ),
        )
        .await
        .unwrap();
        let counts = auto_trace_counts(store.pool(), "t@v2").await.unwrap();
        assert_eq!(
            (counts.samples, counts.real_ci_positives),
            (2, 0),
            "text never counts as real CI: no item records external CI"
        );
        let (pos, total) = outcomes_between(
            store.pool(),
            "t@v2",
            "2025-12-31T00:00:00Z",
            "2026-01-02T00:00:00Z",
        )
        .await
        .unwrap();
        assert_eq!((pos, total), (2, 2));
        assert_eq!(
            outcomes_between(
                store.pool(),
                "t@v2",
                "2026-01-02T00:00:00Z",
                "2026-01-03T00:00:00Z"
            )
            .await
            .unwrap(),
            (0, 0)
        );
    }

    #[tokio::test]
    async fn events_are_logged_once_per_event_and_job() {
        let home = tempfile::tempdir().unwrap();
        let store = Store::open(home.path()).await.unwrap();
        let mut conn = store.pool().acquire().await.unwrap();
        assert!(
            record_event(&mut conn, "candidate.awaiting_promotion", "t@v2", "t", "{}")
                .await
                .unwrap()
        );
        assert!(
            !record_event(&mut conn, "candidate.awaiting_promotion", "t@v2", "t", "{}")
                .await
                .unwrap()
        );
        // Issue 37 item 11: sent again only when what it says changes, however often it is asked.
        let mut said = Vec::new();
        for what in [
            "min_samples",
            "min_samples",
            "min_score",
            "min_score",
            "min_samples",
        ] {
            said.push(
                record_event_on_change(
                    &mut conn,
                    "candidate.awaiting_promotion",
                    "t@v3",
                    "t",
                    "{}",
                    what,
                )
                .await
                .unwrap(),
            );
        }
        assert_eq!(said, [true, false, true, false, true]);
        assert!(
            record_event(&mut conn, "candidate.auto_promoted", "t@v2", "t", "{}")
                .await
                .unwrap()
        );
        assert_eq!(list_events(store.pool()).await.unwrap().len(), 5);
    }
}
