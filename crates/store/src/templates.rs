//! Agent templates and their versions (`agent_templates`, `agent_template_versions`; facts §8;
//! seed "Candidate Package").
//!
//! A version id is `<template>@v<N>`, N counting from 1 per template. States: `current` (at most
//! one per template), `pending` (an imported candidate), `rejected`, `superseded` (a former
//! current), `canary`. A reference `ID` names the current version, `ID@vN` one version and
//! `ID@latest` the highest-numbered version that is not rejected (S-93).
//!
//! Reads take any executor (pool or transaction); writes take `&mut SqliteConnection` so the
//! caller decides the transaction (`&mut *tx`).

use sqlx::{SqliteConnection, SqliteExecutor};

use crate::StoreError;

/// Version states (facts §2 "Version states").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VersionState {
    /// The version in use; at most one per template.
    Current,
    /// An imported candidate awaiting promote or reject (S-51).
    Pending,
    /// Rejected by a human; never selected by `@latest` (S-93).
    Rejected,
    /// A former current version.
    Superseded,
    /// Served to a sample of traffic before promotion.
    Canary,
}

impl VersionState {
    /// The stored spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            VersionState::Current => "current",
            VersionState::Pending => "pending",
            VersionState::Rejected => "rejected",
            VersionState::Superseded => "superseded",
            VersionState::Canary => "canary",
        }
    }
}

/// RFC 3339 UTC with milliseconds, the form of every `*_at` column.
pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Starts a write transaction with `BEGIN IMMEDIATE`, so the write lock is taken before the
/// first read: version numbers (`max(version) + 1`) and state checks read inside it cannot be
/// overtaken by a concurrent writer (which waits up to the store's busy timeout instead).
///
/// # Errors
/// [`StoreError::Sql`] when the database is unavailable or stays locked.
pub async fn begin_write(
    store: &crate::Store,
) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>, StoreError> {
    Ok(store.pool().begin_with("BEGIN IMMEDIATE").await?)
}

/// `<template>@v<number>`.
pub fn version_id(template_id: &str, number: i64) -> String {
    format!("{template_id}@v{number}")
}

/// Which version a reference selects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionSelector {
    /// Bare `ID`: the current version.
    Current,
    /// `ID@vN`.
    Number(i64),
    /// `ID@latest`: the highest-numbered version not rejected.
    Latest,
}

/// A parsed reference `ID`, `ID@vN` or `ID@latest`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionRef {
    /// Template id (not validated here).
    pub template_id: String,
    /// Which of its versions.
    pub selector: VersionSelector,
}

impl VersionRef {
    /// Parses `ID`, `ID@vN` (N ≥ 1) or `ID@latest`; `None` for any other suffix or an empty id.
    pub fn parse(reference: &str) -> Option<Self> {
        let reference = reference.trim();
        let (id, selector) = match reference.split_once('@') {
            None => (reference, VersionSelector::Current),
            Some((id, "latest")) => (id, VersionSelector::Latest),
            Some((id, suffix)) => {
                let n: i64 = suffix.strip_prefix('v')?.parse().ok()?;
                if n < 1 || suffix[1..].starts_with('+') {
                    return None;
                }
                (id, VersionSelector::Number(n))
            }
        };
        (!id.is_empty()).then(|| Self {
            template_id: id.to_owned(),
            selector,
        })
    }
}

/// One `agent_templates` row. `content`, `metadata_json` and the source columns mirror the
/// current version; `latest_version_id` is the highest version number created.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct TemplateRow {
    /// Template id.
    pub id: String,
    /// Metadata `name`.
    pub name: String,
    /// Metadata `description`.
    pub description: String,
    /// Where it came from (`--repo`, or `gitmoot-skillopt` for candidates).
    pub source_repo: String,
    /// Ref within the source.
    pub source_ref: String,
    /// Path within the source.
    pub source_path: String,
    /// Commit or content hex the content was resolved at.
    pub resolved_commit: String,
    /// Current content.
    pub content: String,
    /// Current normalised metadata as JSON.
    pub metadata_json: String,
    /// The version in state `current`.
    pub current_version_id: Option<String>,
    /// The highest-numbered version.
    pub latest_version_id: Option<String>,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
}

/// One `agent_template_versions` row.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct VersionRow {
    /// `<template>@v<N>`.
    pub id: String,
    /// Owning template.
    pub template_id: String,
    /// N (≥ 1).
    pub version: i64,
    /// `current|pending|rejected|superseded|canary`.
    pub state: String,
    /// Metadata `name`.
    pub name: String,
    /// Metadata `description`.
    pub description: String,
    /// Source repo.
    pub source_repo: String,
    /// Source ref.
    pub source_ref: String,
    /// Source path.
    pub source_path: String,
    /// Resolved commit (candidates: sha256 hex of the content, facts §2 step 6).
    pub resolved_commit: String,
    /// `sha256:<hex>` of `content`.
    pub content_hash: String,
    /// Full Markdown with frontmatter.
    pub content: String,
    /// Normalised metadata as JSON.
    pub metadata_json: String,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
    /// RFC 3339, when it last became current.
    pub promoted_at: Option<String>,
}

macro_rules! version_columns {
    () => {
        "id, template_id, version, state, name, description, source_repo, source_ref, source_path, \
         resolved_commit, content_hash, content, metadata_json, created_at, updated_at, promoted_at"
    };
}

macro_rules! template_columns {
    () => {
        "id, name, description, source_repo, source_ref, source_path, resolved_commit, content, \
         metadata_json, current_version_id, latest_version_id, created_at, updated_at"
    };
}

/// The template `id`, if installed.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn get_template(
    db: impl SqliteExecutor<'_>,
    id: &str,
) -> Result<Option<TemplateRow>, StoreError> {
    Ok(sqlx::query_as(concat!(
        "SELECT ",
        template_columns!(),
        " FROM agent_templates WHERE id = ?"
    ))
    .bind(id)
    .fetch_optional(db)
    .await?)
}

/// Every installed template, by id.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn list_templates(db: impl SqliteExecutor<'_>) -> Result<Vec<TemplateRow>, StoreError> {
    Ok(sqlx::query_as(concat!(
        "SELECT ",
        template_columns!(),
        " FROM agent_templates ORDER BY id"
    ))
    .fetch_all(db)
    .await?)
}

/// The version `id` (`<template>@v<N>`), whatever its state.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn get_version(
    db: impl SqliteExecutor<'_>,
    id: &str,
) -> Result<Option<VersionRow>, StoreError> {
    Ok(sqlx::query_as(concat!(
        "SELECT ",
        version_columns!(),
        " FROM agent_template_versions WHERE id = ?"
    ))
    .bind(id)
    .fetch_optional(db)
    .await?)
}

/// Every version of `template_id`, oldest first.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn list_versions(
    db: impl SqliteExecutor<'_>,
    template_id: &str,
) -> Result<Vec<VersionRow>, StoreError> {
    Ok(sqlx::query_as(concat!(
        "SELECT ",
        version_columns!(),
        " FROM agent_template_versions WHERE template_id = ? ORDER BY version"
    ))
    .bind(template_id)
    .fetch_all(db)
    .await?)
}

/// The version of `template_id` in state `current`.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn current_version(
    db: impl SqliteExecutor<'_>,
    template_id: &str,
) -> Result<Option<VersionRow>, StoreError> {
    Ok(sqlx::query_as(concat!(
        "SELECT ",
        version_columns!(),
        " FROM agent_template_versions WHERE template_id = ? AND state = 'current'"
    ))
    .bind(template_id)
    .fetch_optional(db)
    .await?)
}

/// `@latest`: the highest-numbered version of `template_id` that is not `rejected` (S-93).
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn latest_version(
    db: impl SqliteExecutor<'_>,
    template_id: &str,
) -> Result<Option<VersionRow>, StoreError> {
    Ok(sqlx::query_as(concat!(
        "SELECT ",
        version_columns!(),
        " FROM agent_template_versions WHERE template_id = ? AND state <> 'rejected' ORDER BY version DESC LIMIT 1"
    ))
    .bind(template_id)
    .fetch_optional(db)
    .await?)
}

/// The version a reference selects (see [`VersionRef`]); `None` when there is none.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn resolve(
    db: impl SqliteExecutor<'_>,
    reference: &VersionRef,
) -> Result<Option<VersionRow>, StoreError> {
    match reference.selector {
        VersionSelector::Current => current_version(db, &reference.template_id).await,
        VersionSelector::Latest => latest_version(db, &reference.template_id).await,
        VersionSelector::Number(n) => get_version(db, &version_id(&reference.template_id, n)).await,
    }
}

/// A version to create with [`insert_version`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewVersion<'a> {
    /// Template id; the template row is created when missing (only with `state` current).
    pub template_id: &'a str,
    /// Initial state: `Current` (supersedes the previous current) or `Pending`.
    pub state: VersionState,
    /// Metadata `name`.
    pub name: &'a str,
    /// Metadata `description`.
    pub description: &'a str,
    /// Normalised metadata as JSON.
    pub metadata_json: &'a str,
    /// Full content.
    pub content: &'a str,
    /// `sha256:<hex>` of `content`.
    pub content_hash: &'a str,
    /// Source repo.
    pub source_repo: &'a str,
    /// Source ref.
    pub source_ref: &'a str,
    /// Source path.
    pub source_path: &'a str,
    /// Resolved commit.
    pub resolved_commit: &'a str,
}

/// Creates the next version (`max(version) + 1`) of `new.template_id` and returns its row.
/// A `Current` version creates the template row if missing, moves the previous current version
/// to `superseded`, and mirrors its content onto the template row; any state updates the
/// template's `latest_version_id`. Call inside a transaction.
///
/// # Errors
/// [`StoreError::Sql`], including a foreign-key failure when a non-current version names a
/// template that is not installed.
pub async fn insert_version(
    conn: &mut SqliteConnection,
    new: &NewVersion<'_>,
) -> Result<VersionRow, StoreError> {
    let now = now_rfc3339();
    let is_current = new.state == VersionState::Current;
    if is_current {
        sqlx::query(
            "INSERT INTO agent_templates (id, name, description, created_at, updated_at) VALUES (?, ?, ?, ?, ?)
             ON CONFLICT (id) DO NOTHING",
        )
        .bind(new.template_id)
        .bind(new.name)
        .bind(new.description)
        .bind(&now)
        .bind(&now)
        .execute(&mut *conn)
        .await?;
    }
    let number: i64 = sqlx::query_scalar(
        "SELECT COALESCE(MAX(version), 0) + 1 FROM agent_template_versions WHERE template_id = ?",
    )
    .bind(new.template_id)
    .fetch_one(&mut *conn)
    .await?;
    let id = version_id(new.template_id, number);
    if is_current {
        supersede_current(conn, new.template_id, &now).await?;
    }
    sqlx::query(
        "INSERT INTO agent_template_versions (id, template_id, version, state, name, description, source_repo,
           source_ref, source_path, resolved_commit, content_hash, content, metadata_json, created_at, updated_at, promoted_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(&id)
    .bind(new.template_id)
    .bind(number)
    .bind(new.state.as_str())
    .bind(new.name)
    .bind(new.description)
    .bind(new.source_repo)
    .bind(new.source_ref)
    .bind(new.source_path)
    .bind(new.resolved_commit)
    .bind(new.content_hash)
    .bind(new.content)
    .bind(new.metadata_json)
    .bind(&now)
    .bind(&now)
    .bind(is_current.then_some(&now))
    .execute(&mut *conn)
    .await?;
    sqlx::query("UPDATE agent_templates SET latest_version_id = ?, updated_at = ? WHERE id = ?")
        .bind(&id)
        .bind(&now)
        .bind(new.template_id)
        .execute(&mut *conn)
        .await?;
    if is_current {
        mirror_current(conn, &id, &now).await?;
    }
    get_version(&mut *conn, &id)
        .await?
        .ok_or(StoreError::Sql(sqlx::Error::RowNotFound))
}

/// What [`promote_version`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromoteOutcome {
    /// The version is now current; `previous` (if any) is now superseded.
    Promoted {
        /// The former current version.
        previous: Option<String>,
    },
    /// No such version.
    NotFound,
    /// The version is not `pending` or `canary`; nothing changed.
    WrongState(String),
}

/// Makes a `pending` or `canary` version current: the previous current becomes `superseded`,
/// the template row mirrors the new content (seed "Candidate Package": "promotion updates the
/// template's current version"). Call inside a transaction so both changes land together.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn promote_version(
    conn: &mut SqliteConnection,
    id: &str,
) -> Result<PromoteOutcome, StoreError> {
    let Some(version) = get_version(&mut *conn, id).await? else {
        return Ok(PromoteOutcome::NotFound);
    };
    if version.state != "pending" && version.state != "canary" {
        return Ok(PromoteOutcome::WrongState(version.state));
    }
    let now = now_rfc3339();
    let previous = supersede_current(conn, &version.template_id, &now).await?;
    sqlx::query("UPDATE agent_template_versions SET state = 'current', promoted_at = ?, updated_at = ? WHERE id = ?")
        .bind(&now)
        .bind(&now)
        .bind(id)
        .execute(&mut *conn)
        .await?;
    mirror_current(conn, id, &now).await?;
    Ok(PromoteOutcome::Promoted { previous })
}

/// Sets a version's state without other effects (used for `rejected`); returns false when no
/// such version exists. Use [`promote_version`] to make a version current.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn set_version_state(
    conn: &mut SqliteConnection,
    id: &str,
    state: VersionState,
) -> Result<bool, StoreError> {
    let done =
        sqlx::query("UPDATE agent_template_versions SET state = ?, updated_at = ? WHERE id = ?")
            .bind(state.as_str())
            .bind(now_rfc3339())
            .bind(id)
            .execute(conn)
            .await?;
    Ok(done.rows_affected() == 1)
}

async fn supersede_current(
    conn: &mut SqliteConnection,
    template_id: &str,
    now: &str,
) -> Result<Option<String>, StoreError> {
    Ok(sqlx::query_scalar(
        "UPDATE agent_template_versions SET state = 'superseded', updated_at = ?
         WHERE template_id = ? AND state = 'current' RETURNING id",
    )
    .bind(now)
    .bind(template_id)
    .fetch_optional(conn)
    .await?)
}

async fn mirror_current(
    conn: &mut SqliteConnection,
    version_id: &str,
    now: &str,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE agent_templates SET (name, description, source_repo, source_ref, source_path, resolved_commit,
           content, metadata_json, current_version_id, updated_at) =
         (SELECT name, description, source_repo, source_ref, source_path, resolved_commit, content, metadata_json, id, ?
          FROM agent_template_versions WHERE id = ?)
         WHERE id = (SELECT template_id FROM agent_template_versions WHERE id = ?)",
    )
    .bind(now)
    .bind(version_id)
    .bind(version_id)
    .execute(conn)
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Store;

    fn new_version<'a>(
        id: &'a str,
        state: VersionState,
        content: &'a str,
        hash: &'a str,
    ) -> NewVersion<'a> {
        NewVersion {
            template_id: id,
            state,
            name: "Planner",
            description: "plans",
            metadata_json: "{}",
            content,
            content_hash: hash,
            source_repo: "local",
            source_ref: "file",
            source_path: "planner.md",
            resolved_commit: "",
        }
    }

    #[test]
    fn version_refs_parse() {
        let check = |input: &str, expected: Option<(&str, VersionSelector)>| {
            let got = VersionRef::parse(input).map(|r| (r.template_id, r.selector));
            assert_eq!(
                got,
                expected.map(|(id, s)| (id.to_owned(), s)),
                "input {input:?}"
            );
        };
        check("planner", Some(("planner", VersionSelector::Current)));
        check("planner@v3", Some(("planner", VersionSelector::Number(3))));
        check("planner@latest", Some(("planner", VersionSelector::Latest)));
        check("planner@v0", None);
        check("planner@3", None);
        check("planner@v+3", None);
        check("planner@vx", None);
        check("@v1", None);
        check("", None);
    }

    #[tokio::test]
    async fn current_versions_supersede_and_latest_skips_rejected() {
        let home = tempfile::tempdir().unwrap();
        let store = Store::open(home.path()).await.unwrap();
        let mut tx = store.begin().await.unwrap();
        let v1 = insert_version(
            &mut tx,
            &new_version("planner", VersionState::Current, "a", "sha256:a"),
        )
        .await
        .unwrap();
        let v2 = insert_version(
            &mut tx,
            &new_version("planner", VersionState::Pending, "b", "sha256:b"),
        )
        .await
        .unwrap();
        let v3 = insert_version(
            &mut tx,
            &new_version("planner", VersionState::Pending, "c", "sha256:c"),
        )
        .await
        .unwrap();
        tx.commit().await.unwrap();
        assert_eq!(
            (v1.id.as_str(), v2.id.as_str(), v3.id.as_str()),
            ("planner@v1", "planner@v2", "planner@v3")
        );
        assert_eq!(v1.state, "current");
        assert_eq!(v2.state, "pending");

        let mut conn = store.pool().acquire().await.unwrap();
        assert!(
            set_version_state(&mut conn, "planner@v3", VersionState::Rejected)
                .await
                .unwrap()
        );
        let latest = latest_version(store.pool(), "planner")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            latest.id, "planner@v2",
            "S-93: @latest skips the rejected v3"
        );

        let outcome = promote_version(&mut conn, "planner@v2").await.unwrap();
        assert_eq!(
            outcome,
            PromoteOutcome::Promoted {
                previous: Some("planner@v1".into())
            }
        );
        assert_eq!(
            get_version(store.pool(), "planner@v1")
                .await
                .unwrap()
                .unwrap()
                .state,
            "superseded"
        );
        let template = get_template(store.pool(), "planner")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(template.current_version_id.as_deref(), Some("planner@v2"));
        assert_eq!(template.latest_version_id.as_deref(), Some("planner@v3"));
        assert_eq!(template.content, "b");
        assert_eq!(
            promote_version(&mut conn, "planner@v3").await.unwrap(),
            PromoteOutcome::WrongState("rejected".into())
        );
        assert_eq!(
            promote_version(&mut conn, "planner@v9").await.unwrap(),
            PromoteOutcome::NotFound
        );
    }

    #[tokio::test]
    async fn pending_version_of_unknown_template_is_refused() {
        let home = tempfile::tempdir().unwrap();
        let store = Store::open(home.path()).await.unwrap();
        let mut conn = store.pool().acquire().await.unwrap();
        let err = insert_version(
            &mut conn,
            &new_version("ghost", VersionState::Pending, "x", "sha256:x"),
        )
        .await;
        assert!(err.is_err(), "foreign key to agent_templates");
    }
}
