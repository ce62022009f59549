//! Eval review runs, their items and ranked options (tables `eval_runs`, `eval_review_items`,
//! `eval_review_options`; facts §8; seed "Human Feedback Trial Happy Path", "Ranked Exploration
//! Workflow").
//!
//! Repository functions only: they report "not found" / "already exists" as `None` / `false` and
//! leave the wording of those refusals to the caller. [`RunSettings::normalize`] is the one piece
//! of decision logic: the SkillOpt defaults for mode, exploration level and option count.

use serde_json::Value;
use skillforge_contract::{EvalItem, EvalReviewOption, EvalRun};
use sqlx::{SqliteConnection, SqlitePool};

use crate::StoreError;
use crate::templates::now_rfc3339;

pub mod package;
pub mod status;

/// The four workflow modes, in workflow order (seed "Ranked Exploration Export").
pub const MODES: [&str; 4] = ["explore", "refine", "distill", "validate"];
/// The three exploration levels, widest first.
pub const EXPLORATION_LEVELS: [&str; 3] = ["high", "medium", "low"];
/// State of a freshly created run (facts §8 default).
pub const RUN_STATE_DRAFT: &str = "draft";

/// A run's mode, exploration level and options per item after the SkillOpt defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSettings {
    /// explore|refine|distill|validate.
    pub mode: String,
    /// high|medium|low.
    pub exploration_level: String,
    /// Options per item, ≥ 2.
    pub options_count: i64,
}

/// Why run settings are refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunSettingsError {
    /// Mode outside [`MODES`].
    #[error("review mode {0:?} is invalid; use explore, refine, distill, or validate")]
    Mode(String),
    /// Level outside [`EXPLORATION_LEVELS`].
    #[error("exploration level {0:?} is invalid; use high, medium, or low")]
    Level(String),
    /// Fewer than two options.
    #[error("options count must be at least 2, got {0}")]
    Options(i64),
}

impl RunSettings {
    /// Applies the SkillOpt defaults (facts §8 `eval_runs` normalize): mode defaults to
    /// `validate`; the level defaults to `high` for explore, `medium` for refine, else `low`; the
    /// option count defaults to 5 for explore, else 2, and must be ≥ 2. Values are trimmed and
    /// lowercased.
    ///
    /// # Errors
    /// A [`RunSettingsError`] naming the bad value.
    pub fn normalize(
        mode: Option<&str>,
        exploration_level: Option<&str>,
        options_count: Option<i64>,
    ) -> Result<RunSettings, RunSettingsError> {
        let mode = mode
            .map(|m| m.trim().to_lowercase())
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| "validate".into());
        if !MODES.contains(&mode.as_str()) {
            return Err(RunSettingsError::Mode(mode));
        }
        let default_level = match mode.as_str() {
            "explore" => "high",
            "refine" => "medium",
            _ => "low",
        };
        let exploration_level = exploration_level
            .map(|l| l.trim().to_lowercase())
            .filter(|l| !l.is_empty())
            .unwrap_or_else(|| default_level.into());
        if !EXPLORATION_LEVELS.contains(&exploration_level.as_str()) {
            return Err(RunSettingsError::Level(exploration_level));
        }
        let options_count = options_count.unwrap_or(if mode == "explore" { 5 } else { 2 });
        if options_count < 2 {
            return Err(RunSettingsError::Options(options_count));
        }
        Ok(RunSettings {
            mode,
            exploration_level,
            options_count,
        })
    }
}

/// One `eval_runs` row. `metadata_json` is `''` or a JSON object.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct EvalRunRow {
    /// Run id.
    pub id: String,
    /// Template id.
    pub template_id: String,
    /// Reviewed template version id `<id>@v<N>`.
    pub template_version_id: String,
    /// `owner/repo` or ''.
    pub target_repo: String,
    /// Run state (`draft` when created).
    pub state: String,
    /// Raw metadata JSON or ''.
    pub metadata_json: String,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
    /// explore|refine|distill|validate.
    pub mode: String,
    /// high|medium|low.
    pub exploration_level: String,
    /// Options per item.
    pub options_count: i64,
}

impl EvalRunRow {
    /// The run metadata as JSON, `None` when empty or not JSON.
    pub fn metadata(&self) -> Option<Value> {
        parse_json(&self.metadata_json)
    }

    /// The wire `eval_run` (facts §1 `EvalRun`).
    pub fn to_contract(&self) -> EvalRun {
        EvalRun {
            id: self.id.clone(),
            template_id: self.template_id.clone(),
            template_version_id: self.template_version_id.clone(),
            target_repo: self.target_repo.clone(),
            state: self.state.clone(),
            mode: self.mode.clone(),
            exploration_level: self.exploration_level.clone(),
            options_count: self.options_count,
            metadata: self.metadata(),
        }
    }
}

/// A run to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEvalRun {
    /// Run id.
    pub id: String,
    /// Template id.
    pub template_id: String,
    /// Reviewed version id.
    pub template_version_id: String,
    /// `owner/repo` or ''.
    pub target_repo: String,
    /// Normalised settings.
    pub settings: RunSettings,
    /// Compact JSON object or ''.
    pub metadata_json: String,
}

/// One `eval_review_items` row; artifact ids are '' when unset.
#[derive(Debug, Clone, PartialEq, Eq, Default, sqlx::FromRow)]
pub struct ReviewItemRow {
    /// `<run>/<item>`.
    pub id: String,
    /// Run id.
    pub run_id: String,
    /// Item id, unique in the run.
    pub item_id: String,
    /// Title or ''.
    pub title: String,
    /// Source artifact id.
    pub source_artifact_id: String,
    /// Baseline artifact id (A/B items).
    pub baseline_artifact_id: String,
    /// Candidate artifact id (A/B items).
    pub candidate_artifact_id: String,
    /// Preview artifact id.
    pub preview_artifact_id: String,
    /// Diff artifact id.
    pub diff_artifact_id: String,
    /// Raw metadata JSON or ''.
    pub metadata_json: String,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
}

/// One `eval_review_options` row.
#[derive(Debug, Clone, PartialEq, Eq, Default, sqlx::FromRow)]
pub struct ReviewOptionRow {
    /// `<run>/<item>/<label>`.
    pub id: String,
    /// Run id.
    pub run_id: String,
    /// Item id.
    pub item_id: String,
    /// Lowercase blind label.
    pub label: String,
    /// Artifact shown for the option.
    pub artifact_id: String,
    /// Role or ''.
    pub role: String,
    /// Raw metadata JSON or ''.
    pub metadata_json: String,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
}

/// An item with its options (sorted by label).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReviewItem {
    /// The item row.
    pub item: ReviewItemRow,
    /// Its options, sorted by label; empty for A/B items.
    pub options: Vec<ReviewOptionRow>,
}

impl ReviewItem {
    /// The wire item (facts §1 `EvalItem`), options sorted by label.
    pub fn to_contract(&self) -> EvalItem {
        let item = &self.item;
        EvalItem {
            id: item.item_id.clone(),
            title: item.title.clone(),
            source_artifact_id: item.source_artifact_id.clone(),
            baseline_artifact_id: item.baseline_artifact_id.clone(),
            candidate_artifact_id: item.candidate_artifact_id.clone(),
            preview_artifact_id: item.preview_artifact_id.clone(),
            diff_artifact_id: item.diff_artifact_id.clone(),
            options: self
                .options
                .iter()
                .map(|o| EvalReviewOption {
                    label: o.label.clone(),
                    artifact_id: o.artifact_id.clone(),
                    role: o.role.clone(),
                    metadata: parse_json(&o.metadata_json),
                })
                .collect(),
            metadata: parse_json(&item.metadata_json),
        }
    }
}

/// An item to add: the item's artifact ids and, for ranked items, `(label, artifact_id, role,
/// metadata_json)` per option.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NewReviewItem {
    /// Item id.
    pub item_id: String,
    /// Title or ''.
    pub title: String,
    /// Baseline artifact id or ''.
    pub baseline_artifact_id: String,
    /// Candidate artifact id or ''.
    pub candidate_artifact_id: String,
    /// Compact JSON or ''.
    pub metadata_json: String,
    /// Options (label lowercase, artifact id, role, metadata JSON).
    pub options: Vec<NewReviewOption>,
}

/// An option to add.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NewReviewOption {
    /// Lowercase blind label.
    pub label: String,
    /// Artifact id.
    pub artifact_id: String,
    /// Role or ''.
    pub role: String,
    /// Compact JSON or ''.
    pub metadata_json: String,
}

fn parse_json(text: &str) -> Option<Value> {
    if text.trim().is_empty() {
        return None;
    }
    serde_json::from_str(text).ok()
}

const RUN_COLUMNS: &str = "id, template_id, template_version_id, target_repo, state, metadata_json, created_at, \
                           updated_at, mode, exploration_level, options_count";

/// Creates a run in state `draft`. Returns false (and writes nothing) when the id exists.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn create_run(conn: &mut SqliteConnection, run: &NewEvalRun) -> Result<bool, StoreError> {
    let now = now_rfc3339();
    let done = sqlx::query(
        "INSERT INTO eval_runs (id, template_id, template_version_id, target_repo, state, metadata_json, created_at,
                                updated_at, mode, exploration_level, options_count)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
    )
    .bind(&run.id)
    .bind(&run.template_id)
    .bind(&run.template_version_id)
    .bind(&run.target_repo)
    .bind(RUN_STATE_DRAFT)
    .bind(&run.metadata_json)
    .bind(&now)
    .bind(&now)
    .bind(&run.settings.mode)
    .bind(&run.settings.exploration_level)
    .bind(run.settings.options_count)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The run `id`, if any.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn get_run(pool: &SqlitePool, id: &str) -> Result<Option<EvalRunRow>, StoreError> {
    Ok(sqlx::query_as::<_, EvalRunRow>(sqlx::AssertSqlSafe(format!(
        "SELECT {RUN_COLUMNS} FROM eval_runs WHERE id = ?"
    )))
    .bind(id)
    .fetch_optional(pool)
    .await?)
}

/// Every run, newest first.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn list_runs(pool: &SqlitePool) -> Result<Vec<EvalRunRow>, StoreError> {
    Ok(sqlx::query_as::<_, EvalRunRow>(sqlx::AssertSqlSafe(format!(
        "SELECT {RUN_COLUMNS} FROM eval_runs ORDER BY created_at DESC, id"
    )))
    .fetch_all(pool)
    .await?)
}

/// Adds an item and its options in the caller's transaction. Returns false (and writes nothing)
/// when the run already has an item with this id.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn add_item(
    conn: &mut SqliteConnection,
    run_id: &str,
    item: &NewReviewItem,
) -> Result<bool, StoreError> {
    let now = now_rfc3339();
    let done = sqlx::query(
        "INSERT INTO eval_review_items (id, run_id, item_id, title, baseline_artifact_id, candidate_artifact_id,
                                        metadata_json, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
    )
    .bind(format!("{run_id}/{}", item.item_id))
    .bind(run_id)
    .bind(&item.item_id)
    .bind(&item.title)
    .bind(&item.baseline_artifact_id)
    .bind(&item.candidate_artifact_id)
    .bind(&item.metadata_json)
    .bind(&now)
    .bind(&now)
    .execute(&mut *conn)
    .await?;
    if done.rows_affected() != 1 {
        return Ok(false);
    }
    for option in &item.options {
        sqlx::query(
            "INSERT INTO eval_review_options (id, run_id, item_id, label, artifact_id, role, metadata_json, created_at, updated_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        )
        .bind(format!("{run_id}/{}/{}", item.item_id, option.label))
        .bind(run_id)
        .bind(&item.item_id)
        .bind(&option.label)
        .bind(&option.artifact_id)
        .bind(&option.role)
        .bind(&option.metadata_json)
        .bind(&now)
        .bind(&now)
        .execute(&mut *conn)
        .await?;
    }
    sqlx::query("UPDATE eval_runs SET updated_at = ? WHERE id = ?")
        .bind(&now)
        .bind(run_id)
        .execute(&mut *conn)
        .await?;
    Ok(true)
}

/// Replaces the metadata of item `item_id` of run `run_id` with `metadata_json` (compact JSON
/// object or `''`) in the caller's transaction and touches the item's and run's `updated_at`.
/// Returns false (and writes nothing) when there is no such item.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn set_item_metadata(
    conn: &mut SqliteConnection,
    run_id: &str,
    item_id: &str,
    metadata_json: &str,
) -> Result<bool, StoreError> {
    let now = now_rfc3339();
    let done = sqlx::query("UPDATE eval_review_items SET metadata_json = ?, updated_at = ? WHERE run_id = ? AND item_id = ?")
        .bind(metadata_json)
        .bind(&now)
        .bind(run_id)
        .bind(item_id)
        .execute(&mut *conn)
        .await?;
    if done.rows_affected() != 1 {
        return Ok(false);
    }
    sqlx::query("UPDATE eval_runs SET updated_at = ? WHERE id = ?")
        .bind(&now)
        .bind(run_id)
        .execute(&mut *conn)
        .await?;
    Ok(true)
}

/// Every item of a run with its options, items by `item_id`, options by label.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn list_items(pool: &SqlitePool, run_id: &str) -> Result<Vec<ReviewItem>, StoreError> {
    let items = sqlx::query_as::<_, ReviewItemRow>(
        "SELECT id, run_id, item_id, title, source_artifact_id, baseline_artifact_id, candidate_artifact_id,
                preview_artifact_id, diff_artifact_id, metadata_json, created_at, updated_at
         FROM eval_review_items WHERE run_id = ? ORDER BY item_id",
    )
    .bind(run_id)
    .fetch_all(pool)
    .await?;
    let options = sqlx::query_as::<_, ReviewOptionRow>(
        "SELECT id, run_id, item_id, label, artifact_id, role, metadata_json, created_at, updated_at
         FROM eval_review_options WHERE run_id = ? ORDER BY item_id, label",
    )
    .bind(run_id)
    .fetch_all(pool)
    .await?;
    Ok(items
        .into_iter()
        .map(|item| {
            let options = options
                .iter()
                .filter(|o| o.item_id == item.item_id)
                .cloned()
                .collect();
            ReviewItem { item, options }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_settings_defaults_table() {
        let check =
            |mode: Option<&str>, level: Option<&str>, n: Option<i64>, want: (&str, &str, i64)| {
                let got = RunSettings::normalize(mode, level, n).unwrap();
                assert_eq!(
                    (
                        got.mode.as_str(),
                        got.exploration_level.as_str(),
                        got.options_count
                    ),
                    want,
                    "{mode:?} {level:?} {n:?}"
                );
            };
        check(None, None, None, ("validate", "low", 2));
        check(Some("explore"), None, None, ("explore", "high", 5));
        check(
            Some("Explore"),
            Some("medium"),
            Some(4),
            ("explore", "medium", 4),
        );
        check(Some("refine"), None, None, ("refine", "medium", 2));
        check(Some("distill"), None, Some(3), ("distill", "low", 3));
        assert_eq!(
            RunSettings::normalize(Some("train"), None, None),
            Err(RunSettingsError::Mode("train".into()))
        );
        assert_eq!(
            RunSettings::normalize(None, Some("huge"), None),
            Err(RunSettingsError::Level("huge".into()))
        );
        assert_eq!(
            RunSettings::normalize(None, None, Some(1)),
            Err(RunSettingsError::Options(1))
        );
    }
}
