//! Automatic trace harvesting (Mode A): implement-job attributions, CI observations, review
//! rounds, dispatched leg jobs, harvester job events (tables of migration `0005_harvest.sql`),
//! merge-gate observations (`0006_merge_gate.sql`, S-19),
//! and the in-place upserts of the auto-trace run and its items (seed "Automatic trace-harvested
//! feedback (Mode A, off by default)"; facts §5; S-15, S-27).
//!
//! Repository functions only; the decisions (scores, choices, which leg runs) live in
//! `skillforge-skillopt`' `harvest` module. Reads take any executor, writes take
//! `&mut SqliteConnection` so the caller owns the transaction.
//!
//! **Invariant:** the auto-trace run and its items are written by upsert keyed on their ids, and
//! feedback rows by [`crate::feedback::upsert_feedback_event`]'s five-column key, so re-harvesting
//! changes no row count.

use sqlx::{SqliteConnection, SqliteExecutor};

use crate::StoreError;
use crate::templates::now_rfc3339;

/// The implement job behind a pull request: which template version produced the change.
#[derive(Debug, Clone, PartialEq, Eq, Default, sqlx::FromRow)]
pub struct Attribution {
    /// `owner/repo`.
    pub repo: String,
    /// Pull-request number, ≥ 1.
    pub pr: i64,
    /// Template id.
    pub template_id: String,
    /// Template version id `<id>@v<N>`.
    pub template_version_id: String,
    /// The implement job's `template_resolved_commit`.
    pub resolved_commit: String,
    /// Job family, e.g. `implement`; only `implement` is harvested (S-16).
    pub kind: String,
    /// Agent runtime that implemented the change (`''` = unknown), for the cross-family reviewer.
    pub implementer_runtime: String,
    /// Path of a clone the workers can see (`''` = none: the legs cannot run).
    pub checkout: String,
    /// Base revision of the change (`''` = the merged head's first parent).
    pub base: String,
    /// Title of the change.
    pub title: String,
    /// The implement job's instructions (the review leg's intended scope).
    pub instructions: String,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
}

/// Records `a` (insert, or overwrite the row of the same `(repo, pr)`); `created_at` of an
/// existing row is kept. Returns true when a new row was created.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn upsert_attribution(
    conn: &mut SqliteConnection,
    a: &Attribution,
) -> Result<bool, StoreError> {
    let existed = get_attribution(&mut *conn, &a.repo, a.pr).await?.is_some();
    let now = now_rfc3339();
    sqlx::query(
        "INSERT INTO harvest_attributions (repo, pr, template_id, template_version_id, resolved_commit, kind,
            implementer_runtime, checkout, base, title, instructions, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (repo, pr) DO UPDATE SET template_id = excluded.template_id,
           template_version_id = excluded.template_version_id, resolved_commit = excluded.resolved_commit,
           kind = excluded.kind, implementer_runtime = excluded.implementer_runtime, checkout = excluded.checkout,
           base = excluded.base, title = excluded.title, instructions = excluded.instructions,
           updated_at = excluded.updated_at",
    )
    .bind(&a.repo)
    .bind(a.pr)
    .bind(&a.template_id)
    .bind(&a.template_version_id)
    .bind(&a.resolved_commit)
    .bind(&a.kind)
    .bind(&a.implementer_runtime)
    .bind(&a.checkout)
    .bind(&a.base)
    .bind(&a.title)
    .bind(&a.instructions)
    .bind(&now)
    .bind(&now)
    .execute(conn)
    .await?;
    Ok(!existed)
}

/// The attribution of `repo#pr`, if recorded.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn get_attribution(
    db: impl SqliteExecutor<'_>,
    repo: &str,
    pr: i64,
) -> Result<Option<Attribution>, StoreError> {
    Ok(sqlx::query_as::<_, Attribution>(
        "SELECT repo, pr, template_id, template_version_id, resolved_commit, kind, implementer_runtime, checkout,
                base, title, instructions, created_at, updated_at
         FROM harvest_attributions WHERE repo = ? AND pr = ?",
    )
    .bind(repo)
    .bind(pr)
    .fetch_optional(db)
    .await?)
}

/// One commit status or check suite seen at a SHA.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct CiObservation {
    /// `owner/repo`.
    pub repo: String,
    /// Commit SHA.
    pub sha: String,
    /// Status context or check-suite app slug, e.g. `ci/build`, `gitmoot/ci`.
    pub context: String,
    /// `success`, `failure`, `error`, `pending`, `neutral`, ….
    pub state: String,
    /// Status description (the `gitmoot/ci` stamp says "no external CI" here).
    pub description: String,
    /// RFC 3339.
    pub observed_at: String,
}

/// Records (or replaces) the observation of `context` at `repo@sha`.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn record_ci(
    conn: &mut SqliteConnection,
    repo: &str,
    sha: &str,
    context: &str,
    state: &str,
    description: &str,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO harvest_ci_observations (repo, sha, context, state, description, observed_at)
         VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT (repo, sha, context) DO UPDATE SET state = excluded.state, description = excluded.description,
           observed_at = excluded.observed_at",
    )
    .bind(repo)
    .bind(sha)
    .bind(context)
    .bind(state)
    .bind(description)
    .bind(now_rfc3339())
    .execute(conn)
    .await?;
    Ok(())
}

/// Every observation at `repo@sha`, by context.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn ci_at(
    db: impl SqliteExecutor<'_>,
    repo: &str,
    sha: &str,
) -> Result<Vec<CiObservation>, StoreError> {
    Ok(sqlx::query_as::<_, CiObservation>(
        "SELECT repo, sha, context, state, description, observed_at FROM harvest_ci_observations
         WHERE repo = ? AND sha = ? ORDER BY context",
    )
    .bind(repo)
    .bind(sha)
    .fetch_all(db)
    .await?)
}

/// Records a review that requested changes (once per `review_id`); returns the number of such
/// rounds recorded for the PR afterwards.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn record_review_round(
    conn: &mut SqliteConnection,
    repo: &str,
    pr: i64,
    review_id: &str,
) -> Result<i64, StoreError> {
    sqlx::query(
        "INSERT INTO harvest_review_rounds (repo, pr, review_id, observed_at) VALUES (?, ?, ?, ?)
         ON CONFLICT DO NOTHING",
    )
    .bind(repo)
    .bind(pr)
    .bind(review_id)
    .bind(now_rfc3339())
    .execute(&mut *conn)
    .await?;
    Ok(
        sqlx::query_scalar("SELECT COUNT(*) FROM harvest_review_rounds WHERE repo = ? AND pr = ?")
            .bind(repo)
            .bind(pr)
            .fetch_one(conn)
            .await?,
    )
}

/// A leg job the control plane dispatches, recorded (by its idempotency key) before it is
/// enqueued; ingestion reads it back to know which row the job's result becomes.
#[derive(Debug, Clone, PartialEq, Eq, Default, sqlx::FromRow)]
pub struct LegJob {
    /// The job's idempotency key.
    pub dispatch_key: String,
    /// Engine job id once enqueued, else `''`.
    pub job_id: String,
    /// `hard_verifier`, `checkers` or `review`.
    pub leg: String,
    /// `owner/repo`.
    pub repo: String,
    /// PR number.
    pub pr: i64,
    /// Template id the row is attributed to.
    pub template_id: String,
    /// Template version the row is attributed to.
    pub template_version_id: String,
    /// Merged head SHA the leg runs at.
    pub head: String,
    /// Leg-specific JSON object (e.g. the reviewer runtime and whether it is same-family).
    pub context_json: String,
    /// RFC 3339.
    pub created_at: String,
}

/// Records a leg dispatch under its key (a second record of the same key rewrites the context
/// and keeps the job id).
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn record_leg_job(conn: &mut SqliteConnection, leg: &LegJob) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO harvest_leg_jobs (dispatch_key, job_id, leg, repo, pr, template_id, template_version_id, head,
                                       context_json, created_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (dispatch_key) DO UPDATE SET context_json = excluded.context_json",
    )
    .bind(&leg.dispatch_key)
    .bind(&leg.job_id)
    .bind(&leg.leg)
    .bind(&leg.repo)
    .bind(leg.pr)
    .bind(&leg.template_id)
    .bind(&leg.template_version_id)
    .bind(&leg.head)
    .bind(&leg.context_json)
    .bind(now_rfc3339())
    .execute(conn)
    .await?;
    Ok(())
}

/// Sets the job id of the dispatch `dispatch_key`.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn set_leg_job_id(
    conn: &mut SqliteConnection,
    dispatch_key: &str,
    job_id: &str,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE harvest_leg_jobs SET job_id = ? WHERE dispatch_key = ?")
        .bind(job_id)
        .bind(dispatch_key)
        .execute(conn)
        .await?;
    Ok(())
}

/// The dispatch recorded under `dispatch_key`, if any.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn get_leg_job(
    db: impl SqliteExecutor<'_>,
    dispatch_key: &str,
) -> Result<Option<LegJob>, StoreError> {
    Ok(sqlx::query_as::<_, LegJob>(
        "SELECT dispatch_key, job_id, leg, repo, pr, template_id, template_version_id, head, context_json, created_at
         FROM harvest_leg_jobs WHERE dispatch_key = ?",
    )
    .bind(dispatch_key)
    .fetch_optional(db)
    .await?)
}

/// Every dispatch of `repo#pr`'s `leg`, oldest first (the merge's dispatch, then its re-runs).
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn leg_jobs_of(
    db: impl SqliteExecutor<'_>,
    repo: &str,
    pr: i64,
    leg: &str,
) -> Result<Vec<LegJob>, StoreError> {
    Ok(sqlx::query_as::<_, LegJob>(
        "SELECT dispatch_key, job_id, leg, repo, pr, template_id, template_version_id, head, context_json, created_at
         FROM harvest_leg_jobs WHERE repo = ? AND pr = ? AND leg = ? ORDER BY created_at, rowid",
    )
    .bind(repo)
    .bind(pr)
    .bind(leg)
    .fetch_all(db)
    .await?)
}

/// One harvester job event.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct HarvestEvent {
    /// Row id.
    pub id: i64,
    /// Engine job id, `''` when the event belongs to no job.
    pub job_id: String,
    /// `owner/repo` or `''`.
    pub repo: String,
    /// PR number or 0.
    pub pr: i64,
    /// Event name, e.g. `hard_verifiers_failed`.
    pub event: String,
    /// Free text.
    pub detail: String,
    /// RFC 3339.
    pub created_at: String,
}

/// Appends a job event.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn record_event(
    conn: &mut SqliteConnection,
    job_id: &str,
    repo: &str,
    pr: i64,
    event: &str,
    detail: &str,
) -> Result<(), StoreError> {
    sqlx::query("INSERT INTO harvest_events (job_id, repo, pr, event, detail, created_at) VALUES (?, ?, ?, ?, ?, ?)")
        .bind(job_id)
        .bind(repo)
        .bind(pr)
        .bind(event)
        .bind(detail)
        .bind(now_rfc3339())
        .execute(conn)
        .await?;
    Ok(())
}

/// Every event, oldest first; only those of `repo#pr` when given.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn list_events(
    db: impl SqliteExecutor<'_>,
    pr: Option<(&str, i64)>,
) -> Result<Vec<HarvestEvent>, StoreError> {
    let query = "SELECT id, job_id, repo, pr, event, detail, created_at FROM harvest_events";
    Ok(match pr {
        Some((repo, pr)) => {
            sqlx::query_as::<_, HarvestEvent>(sqlx::AssertSqlSafe(format!(
                "{query} WHERE repo = ? AND pr = ? ORDER BY id"
            )))
            .bind(repo)
            .bind(pr)
            .fetch_all(db)
            .await?
        }
        None => {
            sqlx::query_as::<_, HarvestEvent>(sqlx::AssertSqlSafe(format!("{query} ORDER BY id")))
                .fetch_all(db)
                .await?
        }
    })
}

/// The auto-trace run to upsert for one template version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AutoTraceRun<'a> {
    /// `auto-trace:<template_version_id>`.
    pub id: &'a str,
    /// Template id.
    pub template_id: &'a str,
    /// Template version id.
    pub template_version_id: &'a str,
    /// `owner/repo` of the first harvested change (kept on later upserts).
    pub target_repo: &'a str,
    /// Run state, `ready` (facts §5).
    pub state: &'a str,
    /// Compact metadata JSON, `{"feedback_source":"automatic_trace"}`.
    pub metadata_json: &'a str,
}

/// Creates the run (mode `validate`, level `low`, 2 options) or, when it exists, rewrites its
/// state and metadata in place; returns true when created.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn upsert_auto_trace_run(
    conn: &mut SqliteConnection,
    run: &AutoTraceRun<'_>,
) -> Result<bool, StoreError> {
    let existed: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM eval_runs WHERE id = ?")
        .bind(run.id)
        .fetch_one(&mut *conn)
        .await?;
    let now = now_rfc3339();
    sqlx::query(
        "INSERT INTO eval_runs (id, template_id, template_version_id, target_repo, state, metadata_json, created_at,
                                updated_at, mode, exploration_level, options_count)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'validate', 'low', 2)
         ON CONFLICT (id) DO UPDATE SET state = excluded.state, metadata_json = excluded.metadata_json",
    )
    .bind(run.id)
    .bind(run.template_id)
    .bind(run.template_version_id)
    .bind(run.target_repo)
    .bind(run.state)
    .bind(run.metadata_json)
    .bind(&now)
    .bind(&now)
    .execute(conn)
    .await?;
    Ok(existed == 0)
}

/// Creates item `item_id` of `run_id` or rewrites its title and metadata in place; returns true
/// when created.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn upsert_item(
    conn: &mut SqliteConnection,
    run_id: &str,
    item_id: &str,
    title: &str,
    metadata_json: &str,
) -> Result<bool, StoreError> {
    let existed: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM eval_review_items WHERE run_id = ? AND item_id = ?",
    )
    .bind(run_id)
    .bind(item_id)
    .fetch_one(&mut *conn)
    .await?;
    let now = now_rfc3339();
    sqlx::query(
        "INSERT INTO eval_review_items (id, run_id, item_id, title, metadata_json, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (run_id, item_id) DO UPDATE SET title = excluded.title, metadata_json = excluded.metadata_json,
           updated_at = excluded.updated_at",
    )
    .bind(format!("{run_id}/{item_id}"))
    .bind(run_id)
    .bind(item_id)
    .bind(title)
    .bind(metadata_json)
    .bind(&now)
    .bind(&now)
    .execute(&mut *conn)
    .await?;
    sqlx::query("UPDATE eval_runs SET updated_at = ? WHERE id = ?")
        .bind(&now)
        .bind(run_id)
        .execute(conn)
        .await?;
    Ok(existed == 0)
}

/// The `outcome` recorded in the metadata of item `item_id` of run `run_id` (e.g. `reverted`),
/// if the item exists and records one.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn item_outcome(
    db: impl SqliteExecutor<'_>,
    run_id: &str,
    item_id: &str,
) -> Result<Option<String>, StoreError> {
    Ok(sqlx::query_scalar::<_, Option<String>>(
        "SELECT json_extract(metadata_json, '$.outcome') FROM eval_review_items
          WHERE run_id = ? AND item_id = ? AND json_valid(metadata_json)",
    )
    .bind(run_id)
    .bind(item_id)
    .fetch_optional(db)
    .await?
    .flatten())
}

/// The choice of the feedback row `(run_id, item_id, reviewer, source, '')`, if it exists.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn feedback_choice(
    db: impl SqliteExecutor<'_>,
    run_id: &str,
    item_id: &str,
    reviewer: &str,
    source: &str,
) -> Result<Option<String>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT choice FROM feedback_events WHERE run_id = ? AND item_id = ? AND reviewer = ? AND source = ?
           AND source_url = ''",
    )
    .bind(run_id)
    .bind(item_id)
    .bind(reviewer)
    .bind(source)
    .fetch_optional(db)
    .await?)
}

/// One observation of the merge gate at a PR head (migration `0006_merge_gate.sql`; S-19).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct GateObservation {
    /// `owner/repo`.
    pub repo: String,
    /// PR number, ≥ 1.
    pub pr: i64,
    /// PR head SHA.
    pub head: String,
    /// RFC 3339 UTC with milliseconds (the observation's identity together with repo, pr, head).
    pub observed_at: String,
    /// Non-synthetic CI contexts seen at the head (any state), ≥ 0.
    pub external_contexts: i64,
    /// `.github/workflows/` awareness: `present`, `absent` or `unknown`.
    pub workflows: String,
    /// `external`, `stamp`, `wait` or `blocked`.
    pub decision: String,
}

/// Records `o` once: a second record of the same `(repo, pr, head, observed_at)` changes nothing
/// (the first decision stands). Returns true when the row was created.
///
/// # Errors
/// [`StoreError::Sql`] (including a `CHECK` violation for an unknown decision or awareness).
pub async fn record_gate_observation(
    conn: &mut SqliteConnection,
    o: &GateObservation,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "INSERT INTO merge_gate_observations (repo, pr, head, observed_at, external_contexts, workflows, decision)
         VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
    )
    .bind(&o.repo)
    .bind(o.pr)
    .bind(&o.head)
    .bind(&o.observed_at)
    .bind(o.external_contexts)
    .bind(&o.workflows)
    .bind(&o.decision)
    .execute(conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The earliest zero-external observation of `repo#pr` at `head` (RFC 3339 text, which orders
/// chronologically because every row is UTC with the same precision), if any.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn first_zero_observation(
    db: impl SqliteExecutor<'_>,
    repo: &str,
    pr: i64,
    head: &str,
) -> Result<Option<String>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT MIN(observed_at) FROM merge_gate_observations
         WHERE repo = ? AND pr = ? AND head = ? AND external_contexts = 0",
    )
    .bind(repo)
    .bind(pr)
    .bind(head)
    .fetch_one(db)
    .await?)
}

/// Every gate observation of `repo#pr`, oldest first.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn gate_observations(
    db: impl SqliteExecutor<'_>,
    repo: &str,
    pr: i64,
) -> Result<Vec<GateObservation>, StoreError> {
    Ok(sqlx::query_as::<_, GateObservation>(
        "SELECT repo, pr, head, observed_at, external_contexts, workflows, decision FROM merge_gate_observations
         WHERE repo = ? AND pr = ? ORDER BY observed_at",
    )
    .bind(repo)
    .bind(pr)
    .fetch_all(db)
    .await?)
}
