//! Train sessions and iterations (`skillopt_train_sessions`, `skillopt_train_iterations`; facts §3,
//! §8; seed SkillOpt "Complete train-mode path"), plus the one review write train needs beyond
//! [`crate::review`]: adding a generated option to an existing item.
//!
//! Repository functions only. Which transitions are allowed is decided by
//! `skillforge_skillopt::train::state`; [`set_iteration_state`] and
//! [`set_iteration_state_and_metadata`] only compare-and-set (the latter writing the metadata in
//! the same transaction), so two control planes racing on one iteration cannot both move it.

use sqlx::{Connection, SqliteConnection, SqliteExecutor};

use crate::StoreError;
use crate::templates::now_rfc3339;

/// One `skillopt_train_sessions` row.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct SessionRow {
    /// Session id.
    pub id: String,
    /// Template id.
    pub template_id: String,
    /// Template version the session started from (`<id>@vN`).
    pub template_version_id: String,
    /// `owner/repo` the template works on.
    pub target_repo: String,
    /// `owner/repo` where review work is published; '' until given (S-98).
    pub workspace_repo: String,
    /// Preview repository or ''.
    pub preview_repo: String,
    /// The operator's request text.
    pub request_summary: String,
    /// Task kind (`custom` by default).
    pub task_kind: String,
    /// State of the current iteration (same vocabulary).
    pub state: String,
    /// '' or a JSON object (items, runtime, options count, …).
    pub metadata_json: String,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
}

/// One `skillopt_train_iterations` row.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct IterationRow {
    /// Iteration id (`<session>-iNNN`).
    pub id: String,
    /// Session id.
    pub session_id: String,
    /// The review run of this iteration.
    pub eval_run_id: String,
    /// Template version reviewed in this iteration.
    pub base_template_version_id: String,
    /// Imported candidate version, '' until imported.
    pub candidate_version_id: String,
    /// Review mode.
    pub mode: String,
    /// Exploration level.
    pub exploration_level: String,
    /// Iteration state (facts §3).
    pub state: String,
    /// Review issue repo or ''.
    pub issue_repo: String,
    /// Review issue number or 0.
    pub issue_number: i64,
    /// Review issue URL or ''.
    pub issue_url: String,
    /// Candidate pull request repo or ''.
    pub pull_request_repo: String,
    /// Candidate pull request number or 0.
    pub pull_request_number: i64,
    /// Candidate pull request URL or ''.
    pub pull_request_url: String,
    /// Reason given with promote/reject.
    pub decision_reason: String,
    /// '' or a JSON object (per-stage status, job ids, paths, errors).
    pub metadata_json: String,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
}

/// A session to create (state `request_confirmed`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSession<'a> {
    /// Session id.
    pub id: &'a str,
    /// Template id.
    pub template_id: &'a str,
    /// Starting version.
    pub template_version_id: &'a str,
    /// Target repo.
    pub target_repo: &'a str,
    /// Workspace repo or ''.
    pub workspace_repo: &'a str,
    /// Request text.
    pub request_summary: &'a str,
    /// Task kind.
    pub task_kind: &'a str,
    /// JSON object text.
    pub metadata_json: &'a str,
}

/// An iteration to create (state `request_confirmed`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewIteration<'a> {
    /// Iteration id.
    pub id: &'a str,
    /// Session id.
    pub session_id: &'a str,
    /// Review run id.
    pub eval_run_id: &'a str,
    /// Reviewed version.
    pub base_template_version_id: &'a str,
    /// Review mode.
    pub mode: &'a str,
    /// Exploration level.
    pub exploration_level: &'a str,
    /// JSON object text.
    pub metadata_json: &'a str,
}

const SESSION_COLUMNS: &str = "id, template_id, template_version_id, target_repo, workspace_repo, preview_repo, \
    request_summary, task_kind, state, metadata_json, created_at, updated_at";
const ITERATION_COLUMNS: &str = "id, session_id, eval_run_id, base_template_version_id, candidate_version_id, mode, \
    exploration_level, state, issue_repo, issue_number, issue_url, pull_request_repo, pull_request_number, \
    pull_request_url, decision_reason, metadata_json, created_at, updated_at";

/// Creates a session in state `request_confirmed`. Returns false (writing nothing) when the id exists.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn create_session(
    conn: &mut SqliteConnection,
    s: &NewSession<'_>,
) -> Result<bool, StoreError> {
    let now = now_rfc3339();
    let done = sqlx::query(
        "INSERT INTO skillopt_train_sessions (id, template_id, template_version_id, target_repo, workspace_repo,
           request_summary, task_kind, state, metadata_json, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, 'request_confirmed', ?, ?, ?) ON CONFLICT (id) DO NOTHING",
    )
    .bind(s.id)
    .bind(s.template_id)
    .bind(s.template_version_id)
    .bind(s.target_repo)
    .bind(s.workspace_repo)
    .bind(s.request_summary)
    .bind(s.task_kind)
    .bind(s.metadata_json)
    .bind(&now)
    .bind(&now)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The session `id`, if any.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn get_session(
    db: impl SqliteExecutor<'_>,
    id: &str,
) -> Result<Option<SessionRow>, StoreError> {
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {SESSION_COLUMNS} FROM skillopt_train_sessions WHERE id = ?"
    )))
    .bind(id)
    .fetch_optional(db)
    .await?)
}

/// The ids of the sessions, newest first, at most `limit`.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn list_session_ids(
    db: impl SqliteExecutor<'_>,
    limit: u32,
) -> Result<Vec<String>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT id FROM skillopt_train_sessions ORDER BY created_at DESC, id DESC LIMIT ?",
    )
    .bind(i64::from(limit))
    .fetch_all(db)
    .await?)
}

/// Every session, newest first, at most `limit` (the web console's Work and Attention pages).
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn list_sessions(
    db: impl SqliteExecutor<'_>,
    limit: u32,
) -> Result<Vec<SessionRow>, StoreError> {
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(format!("SELECT {SESSION_COLUMNS} FROM skillopt_train_sessions ORDER BY created_at DESC, id DESC LIMIT ?")))
        .bind(limit)
        .fetch_all(db)
        .await?)
}

/// Sets the session's mirrored state.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn set_session_state(
    conn: &mut SqliteConnection,
    id: &str,
    state: &str,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE skillopt_train_sessions SET state = ?, updated_at = ? WHERE id = ?")
        .bind(state)
        .bind(now_rfc3339())
        .bind(id)
        .execute(conn)
        .await?;
    Ok(())
}

/// Creates an iteration in state `request_confirmed`. Returns false when the id exists.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn create_iteration(
    conn: &mut SqliteConnection,
    it: &NewIteration<'_>,
) -> Result<bool, StoreError> {
    let now = now_rfc3339();
    let done = sqlx::query(
        "INSERT INTO skillopt_train_iterations (id, session_id, eval_run_id, base_template_version_id, mode,
           exploration_level, state, metadata_json, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, 'request_confirmed', ?, ?, ?) ON CONFLICT (id) DO NOTHING",
    )
    .bind(it.id)
    .bind(it.session_id)
    .bind(it.eval_run_id)
    .bind(it.base_template_version_id)
    .bind(it.mode)
    .bind(it.exploration_level)
    .bind(it.metadata_json)
    .bind(&now)
    .bind(&now)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Every iteration of a session, oldest first.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn list_iterations(
    db: impl SqliteExecutor<'_>,
    session_id: &str,
) -> Result<Vec<IterationRow>, StoreError> {
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {ITERATION_COLUMNS} FROM skillopt_train_iterations WHERE session_id = ? ORDER BY created_at, id"
    )))
    .bind(session_id)
    .fetch_all(db)
    .await?)
}

/// The iteration `id`, if any.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn get_iteration(
    db: impl SqliteExecutor<'_>,
    id: &str,
) -> Result<Option<IterationRow>, StoreError> {
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {ITERATION_COLUMNS} FROM skillopt_train_iterations WHERE id = ?"
    )))
    .bind(id)
    .fetch_optional(db)
    .await?)
}

/// Moves an iteration from `from` to `to` (compare-and-set) and mirrors `to` on its session, in
/// one transaction. Returns false (writing nothing) when the iteration is no longer in `from`.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn set_iteration_state(
    conn: &mut SqliteConnection,
    id: &str,
    from: &str,
    to: &str,
) -> Result<bool, StoreError> {
    compare_and_set_state(conn, id, from, to, None).await
}

/// Replaces an iteration's metadata JSON and moves it from `from` to `to` (compare-and-set),
/// mirroring `to` on its session, all in one transaction: either the metadata and the state are
/// both written or neither is. Returns false (writing nothing) when the iteration is no longer
/// in `from`.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn set_iteration_state_and_metadata(
    conn: &mut SqliteConnection,
    id: &str,
    from: &str,
    to: &str,
    metadata_json: &str,
) -> Result<bool, StoreError> {
    compare_and_set_state(conn, id, from, to, Some(metadata_json)).await
}

/// The one compare-and-set of an iteration's state (and, with `metadata_json`, its metadata),
/// mirrored on its session, in a transaction (a savepoint when `conn` is already in one).
async fn compare_and_set_state(
    conn: &mut SqliteConnection,
    id: &str,
    from: &str,
    to: &str,
    metadata_json: Option<&str>,
) -> Result<bool, StoreError> {
    let now = now_rfc3339();
    let mut tx = conn.begin().await?;
    let done = sqlx::query(
        "UPDATE skillopt_train_iterations SET state = ?, metadata_json = COALESCE(?, metadata_json), updated_at = ?
         WHERE id = ? AND state = ?",
    )
    .bind(to)
    .bind(metadata_json)
    .bind(&now)
    .bind(id)
    .bind(from)
    .execute(&mut *tx)
    .await?;
    if done.rows_affected() != 1 {
        tx.rollback().await?;
        return Ok(false);
    }
    sqlx::query(
        "UPDATE skillopt_train_sessions SET state = ?, updated_at = ?
         WHERE id = (SELECT session_id FROM skillopt_train_iterations WHERE id = ?)",
    )
    .bind(to)
    .bind(&now)
    .bind(id)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(true)
}

/// Replaces an iteration's metadata JSON.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn set_iteration_metadata(
    conn: &mut SqliteConnection,
    id: &str,
    metadata_json: &str,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE skillopt_train_iterations SET metadata_json = ?, updated_at = ? WHERE id = ?",
    )
    .bind(metadata_json)
    .bind(now_rfc3339())
    .bind(id)
    .execute(conn)
    .await?;
    Ok(())
}

/// Records the review issue of an iteration (published on GitHub): `owner/repo`, number, web URL.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn set_iteration_issue(
    conn: &mut SqliteConnection,
    id: &str,
    repo: &str,
    number: i64,
    url: &str,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE skillopt_train_iterations SET issue_repo = ?, issue_number = ?, issue_url = ?, updated_at = ? WHERE id = ?")
        .bind(repo)
        .bind(number)
        .bind(url)
        .bind(now_rfc3339())
        .bind(id)
        .execute(conn)
        .await?;
    Ok(())
}

/// Records the imported candidate version of an iteration.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn set_candidate_version(
    conn: &mut SqliteConnection,
    id: &str,
    version_id: &str,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE skillopt_train_iterations SET candidate_version_id = ?, updated_at = ? WHERE id = ?")
        .bind(version_id)
        .bind(now_rfc3339())
        .bind(id)
        .execute(conn)
        .await?;
    Ok(())
}

/// Records the reason given with a promote or reject decision.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn set_decision_reason(
    conn: &mut SqliteConnection,
    id: &str,
    reason: &str,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE skillopt_train_iterations SET decision_reason = ?, updated_at = ? WHERE id = ?",
    )
    .bind(reason)
    .bind(now_rfc3339())
    .bind(id)
    .execute(conn)
    .await?;
    Ok(())
}

/// Adds one generated option `<run>/<item>/<label>` to an existing review item. Returns false (and
/// changes nothing) when the item already has an option with this label, so a re-applied
/// generation result never duplicates options.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn insert_generated_option(
    conn: &mut SqliteConnection,
    run_id: &str,
    item_id: &str,
    label: &str,
    artifact_id: &str,
    role: &str,
    metadata_json: &str,
) -> Result<bool, StoreError> {
    let now = now_rfc3339();
    let done = sqlx::query(
        "INSERT INTO eval_review_options (id, run_id, item_id, label, artifact_id, role, metadata_json, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
    )
    .bind(format!("{run_id}/{item_id}/{label}"))
    .bind(run_id)
    .bind(item_id)
    .bind(label)
    .bind(artifact_id)
    .bind(role)
    .bind(metadata_json)
    .bind(&now)
    .bind(&now)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Number of options of one review item.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn count_item_options(
    db: impl SqliteExecutor<'_>,
    run_id: &str,
    item_id: &str,
) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT COUNT(*) FROM eval_review_options WHERE run_id = ? AND item_id = ?",
    )
    .bind(run_id)
    .bind(item_id)
    .fetch_one(db)
    .await?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Store;

    #[tokio::test]
    async fn iteration_state_is_compare_and_set_and_mirrored_on_the_session() {
        let home = tempfile::tempdir().unwrap();
        let store = Store::open(home.path()).await.unwrap();
        let mut conn = store.pool().acquire().await.unwrap();
        let s = NewSession {
            id: "s1",
            template_id: "t",
            template_version_id: "t@v1",
            target_repo: "o/r",
            workspace_repo: "",
            request_summary: "r",
            task_kind: "custom",
            metadata_json: "{}",
        };
        assert!(create_session(&mut conn, &s).await.unwrap());
        assert!(!create_session(&mut conn, &s).await.unwrap());
        let it = NewIteration {
            id: "s1-i001",
            session_id: "s1",
            eval_run_id: "s1-i001",
            base_template_version_id: "t@v1",
            mode: "explore",
            exploration_level: "high",
            metadata_json: "{}",
        };
        assert!(create_iteration(&mut conn, &it).await.unwrap());
        assert!(
            set_iteration_state(&mut conn, "s1-i001", "request_confirmed", "workspace_ready")
                .await
                .unwrap()
        );
        assert!(
            !set_iteration_state(&mut conn, "s1-i001", "request_confirmed", "workspace_ready")
                .await
                .unwrap()
        );
        assert_eq!(
            get_session(store.pool(), "s1")
                .await
                .unwrap()
                .unwrap()
                .state,
            "workspace_ready"
        );
        assert_eq!(list_iterations(store.pool(), "s1").await.unwrap().len(), 1);
    }

    #[tokio::test]
    async fn a_transition_with_metadata_writes_both_or_neither() {
        let home = tempfile::tempdir().unwrap();
        let store = Store::open(home.path()).await.unwrap();
        let mut tx = store.begin().await.unwrap();
        let s = NewSession {
            id: "s1",
            template_id: "t",
            template_version_id: "t@v1",
            target_repo: "o/r",
            workspace_repo: "",
            request_summary: "r",
            task_kind: "custom",
            metadata_json: "{}",
        };
        create_session(&mut tx, &s).await.unwrap();
        let it = NewIteration {
            id: "s1-i001",
            session_id: "s1",
            eval_run_id: "s1-i001",
            base_template_version_id: "t@v1",
            mode: "explore",
            exploration_level: "high",
            metadata_json: "{}",
        };
        create_iteration(&mut tx, &it).await.unwrap();
        tx.commit().await.unwrap();
        let mut conn = store.pool().acquire().await.unwrap();
        let moved = set_iteration_state_and_metadata(
            &mut conn,
            "s1-i001",
            "request_confirmed",
            "workspace_ready",
            r#"{"a":1}"#,
        );
        assert!(moved.await.unwrap());
        let row = get_iteration(store.pool(), "s1-i001")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (row.state.as_str(), row.metadata_json.as_str()),
            ("workspace_ready", r#"{"a":1}"#)
        );
        assert_eq!(
            get_session(store.pool(), "s1")
                .await
                .unwrap()
                .unwrap()
                .state,
            "workspace_ready"
        );
        // A lost compare-and-set writes neither the metadata nor the state.
        let lost = set_iteration_state_and_metadata(
            &mut conn,
            "s1-i001",
            "request_confirmed",
            "items_ready",
            r#"{"b":2}"#,
        );
        assert!(!lost.await.unwrap());
        let row = get_iteration(store.pool(), "s1-i001")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (row.state.as_str(), row.metadata_json.as_str()),
            ("workspace_ready", r#"{"a":1}"#)
        );
        // Inside a caller's transaction it is a savepoint: the caller's rollback undoes it.
        let mut tx = store.begin().await.unwrap();
        assert!(
            set_iteration_state_and_metadata(
                &mut tx,
                "s1-i001",
                "workspace_ready",
                "items_ready",
                "{}"
            )
            .await
            .unwrap()
        );
        tx.rollback().await.unwrap();
        assert_eq!(
            get_iteration(store.pool(), "s1-i001")
                .await
                .unwrap()
                .unwrap()
                .state,
            "workspace_ready"
        );
    }
}
