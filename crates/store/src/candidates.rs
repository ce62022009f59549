//! Imported candidates and their review (`agent_template_candidate_reviews`; facts §2 step 6,
//! §8; seed "Candidate Package"; S-51, S-93).
//!
//! [`load_import_state`] reads what [`skillforge_contract::validate_candidate_import`] checks
//! against; [`import_verified`] writes a verified candidate — blobs, `eval_artifacts` rows, the
//! `pending` version and the review row — in one transaction and never promotes (S-51).
//! [`promote_candidate`] and [`reject_candidate`] are the human decisions; the review row keeps
//! the decision, its reason and time as the audit record (S-93).

use skillforge_contract::{
    BaseVersion, ImportNeeds, ImportState, InstalledTemplate, VerifiedCandidate, hash_hex,
    to_go_json_compact,
};
use sqlx::{SqliteConnection, SqliteExecutor};

use crate::artifacts::{
    ArtifactRow, StoreArtifactError, existing_artifact_ids, get_artifact, store_artifact,
};
use crate::blobs::BlobStore;
use crate::templates::{
    NewVersion, PromoteOutcome, VersionRow, VersionState, begin_write, current_version,
    get_template, get_version, now_rfc3339, promote_version, set_version_state,
};
use crate::{Store, StoreError};

/// `source_repo` of an imported candidate version (facts §2 step 6).
pub const CANDIDATE_SOURCE_REPO: &str = "gitmoot-skillopt";
/// `source_ref` of an imported candidate version (facts §2 step 6).
pub const CANDIDATE_SOURCE_REF: &str = "candidate";
/// `source_path` when the package path is unknown (facts §2 step 6).
pub const DEFAULT_SOURCE_PATH: &str = "candidate-package.json";

/// A candidate: its review row joined with its version.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct CandidateRow {
    /// `<template>@v<N>`.
    pub version_id: String,
    /// Template id.
    pub template_id: String,
    /// N.
    pub version: i64,
    /// Version state (`pending`, `current`, `superseded`, `rejected`, `canary`).
    pub version_state: String,
    /// `sha256:<hex>` of the candidate content.
    pub content_hash: String,
    /// `gitmoot-skillopt`.
    pub source_repo: String,
    /// `candidate`.
    pub source_ref: String,
    /// The package file path given to import.
    pub source_path: String,
    /// The version the optimizer started from.
    pub base_version_id: String,
    /// `summary.diff_artifact_id`, '' when none.
    pub diff_artifact_id: String,
    /// Optimizer score (`summary.score`).
    pub score: Option<f64>,
    /// `summary.preference_summary`.
    pub preference_summary: String,
    /// Compact JSON of `eval_report`, '' when absent.
    pub eval_report_json: String,
    /// Compact JSON of `summary.metadata`, '' when absent.
    pub summary_metadata_json: String,
    /// Review state: `pending`, `promoted` or `rejected`.
    pub review_state: String,
    /// Reason given with the decision (required for reject).
    pub decision_reason: String,
    /// RFC 3339 import time.
    pub created_at: String,
    /// RFC 3339 decision time.
    pub decided_at: Option<String>,
}

macro_rules! candidate_select {
    () => {
        "SELECT r.version_id, r.template_id, v.version, v.state AS version_state, v.content_hash, v.source_repo,
           v.source_ref, v.source_path, r.base_version_id, r.diff_artifact_id, r.score, r.preference_summary,
           r.eval_report_json, r.summary_metadata_json, r.state AS review_state, r.decision_reason, r.created_at,
           r.decided_at
         FROM agent_template_candidate_reviews r JOIN agent_template_versions v ON v.id = r.version_id"
    };
}

/// Candidates of `template_id`, newest version first.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn list_candidates(
    db: impl SqliteExecutor<'_>,
    template_id: &str,
) -> Result<Vec<CandidateRow>, StoreError> {
    Ok(sqlx::query_as(concat!(
        candidate_select!(),
        " WHERE r.template_id = ? ORDER BY v.version DESC"
    ))
    .bind(template_id)
    .fetch_all(db)
    .await?)
}

/// The candidate whose version is `version_id`; `None` when that version was not imported.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn get_candidate(
    db: impl SqliteExecutor<'_>,
    version_id: &str,
) -> Result<Option<CandidateRow>, StoreError> {
    Ok(
        sqlx::query_as(concat!(candidate_select!(), " WHERE r.version_id = ?"))
            .bind(version_id)
            .fetch_optional(db)
            .await?,
    )
}

fn base_of(row: VersionRow) -> BaseVersion {
    BaseVersion {
        id: row.id,
        template_id: row.template_id,
        content_hash: row.content_hash,
        content: row.content,
    }
}

/// Loads the store state [`skillforge_contract::validate_candidate_import`] needs: the template
/// and its current version, the pinned base version (whatever template it belongs to) and which
/// of the package's artifact ids are already registered.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn load_import_state(
    conn: &mut SqliteConnection,
    needs: &ImportNeeds,
) -> Result<ImportState, StoreError> {
    let template = match get_template(&mut *conn, &needs.template_id).await? {
        Some(t) => Some(InstalledTemplate {
            current_version: current_version(&mut *conn, &t.id).await?.map(base_of),
            id: t.id,
        }),
        None => None,
    };
    let pinned_base = match &needs.base_version_id {
        Some(id) => get_version(&mut *conn, id).await?.map(base_of),
        None => None,
    };
    let existing_artifact_ids = existing_artifact_ids(conn, &needs.artifact_ids).await?;
    Ok(ImportState {
        template,
        pinned_base,
        existing_artifact_ids,
    })
}

/// How a verified package whose artifact ids are already registered relates to the store
/// ([`find_prior_import`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PriorImport {
    /// None of the package's artifact ids is registered: import it as new.
    NotImported,
    /// The same package was imported before: a candidate of the template with the same content
    /// hash and base, and every package artifact registered with the same hash.
    Same {
        /// `<template>@vN` of that import.
        version_id: String,
    },
    /// An artifact id is registered with other content.
    HashConflict {
        /// The artifact id.
        artifact_id: String,
        /// `sha256:<hex>` registered.
        stored_hash: String,
        /// `sha256:<hex>` of the package's file.
        package_hash: String,
    },
    /// Artifact ids are registered with the same content, but no imported candidate has this
    /// content and base (another package reused them).
    Taken {
        /// The first registered artifact id.
        artifact_id: String,
    },
}

/// Compares a verified package with earlier imports, for idempotent re-import (a re-run of
/// `skillforge import` on the same file). Only packages that list artifacts are matched: their
/// ids are what would collide (facts §2 check 4).
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn find_prior_import(
    conn: &mut SqliteConnection,
    verified: &VerifiedCandidate,
) -> Result<PriorImport, StoreError> {
    let mut first_registered = None;
    let mut n_registered = 0;
    for artifact in &verified.artifacts {
        let Some(row) = get_artifact(&mut *conn, &artifact.id).await? else {
            continue;
        };
        if row.hash != artifact.hash {
            return Ok(PriorImport::HashConflict {
                artifact_id: artifact.id.clone(),
                stored_hash: row.hash,
                package_hash: artifact.hash.clone(),
            });
        }
        n_registered += 1;
        first_registered.get_or_insert_with(|| artifact.id.clone());
    }
    let Some(artifact_id) = first_registered else {
        return Ok(PriorImport::NotImported);
    };
    if n_registered == verified.artifacts.len() {
        let same = list_candidates(&mut *conn, &verified.template_id)
            .await?
            .into_iter()
            .find(|c| {
                c.content_hash == verified.content_hash
                    && c.base_version_id == verified.base_version_id
                    && c.diff_artifact_id == verified.diff_artifact_id
            });
        if let Some(candidate) = same {
            return Ok(PriorImport::Same {
                version_id: candidate.version_id,
            });
        }
    }
    Ok(PriorImport::Taken { artifact_id })
}

/// What [`import_verified`] wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportedCandidate {
    /// The new `pending` version.
    pub version: VersionRow,
    /// The registered artifacts, in package order.
    pub artifacts: Vec<ArtifactRow>,
}

/// Writes a verified candidate in one transaction: each artifact's blob and `eval_artifacts`
/// row, the next version of the template in state `pending` (source `gitmoot-skillopt` /
/// `candidate` / `source_path`, resolved commit = content sha256 hex), and its review row in
/// state `pending`. Never promotes (S-51). On any error the transaction rolls back; blobs already
/// written stay as unreferenced content-addressed files.
///
/// # Errors
/// [`StoreArtifactError::Blob`] when a blob cannot be written, [`StoreArtifactError::Store`] when
/// a row cannot be inserted (e.g. an artifact id registered since validation).
pub async fn import_verified(
    store: &Store,
    blobs: &BlobStore,
    verified: &VerifiedCandidate,
    source_path: &str,
) -> Result<ImportedCandidate, StoreArtifactError> {
    let metadata_json = to_go_json_compact(&verified.metadata).unwrap_or_else(|_| "{}".to_owned());
    let source_path = if source_path.is_empty() {
        DEFAULT_SOURCE_PATH
    } else {
        source_path
    };
    let mut tx = begin_write(store).await?;
    let mut artifacts = Vec::with_capacity(verified.artifacts.len());
    for artifact in &verified.artifacts {
        artifacts.push(
            store_artifact(
                &mut tx,
                blobs,
                &artifact.id,
                &artifact.bytes,
                &artifact.media_type,
                &artifact.driver,
            )
            .await?,
        );
    }
    let version = crate::templates::insert_version(
        &mut tx,
        &NewVersion {
            template_id: &verified.template_id,
            state: VersionState::Pending,
            name: &verified.metadata.name,
            description: &verified.metadata.description,
            metadata_json: &metadata_json,
            content: &verified.content,
            content_hash: &verified.content_hash,
            source_repo: CANDIDATE_SOURCE_REPO,
            source_ref: CANDIDATE_SOURCE_REF,
            source_path,
            resolved_commit: hash_hex(&verified.content_hash),
        },
    )
    .await?;
    let now = now_rfc3339();
    sqlx::query(
        "INSERT INTO agent_template_candidate_reviews (version_id, template_id, base_version_id, diff_artifact_id,
           score, preference_summary, eval_report_json, summary_metadata_json, state, decision_reason, created_at,
           updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'pending', '', ?, ?)",
    )
    .bind(&version.id)
    .bind(&verified.template_id)
    .bind(&verified.base_version_id)
    .bind(&verified.diff_artifact_id)
    .bind(verified.score)
    .bind(&verified.preference_summary)
    .bind(&verified.eval_report_json)
    .bind(&verified.summary_metadata_json)
    .bind(&now)
    .bind(&now)
    .execute(&mut *tx)
    .await
    .map_err(StoreError::from)?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(ImportedCandidate { version, artifacts })
}

/// What a promote or reject decision did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecisionOutcome {
    /// Applied; for a promote, `previous` is the former current version (now superseded).
    Done {
        /// The former current version, for a promote.
        previous: Option<String>,
    },
    /// No imported candidate has this version id.
    NotFound,
    /// The candidate's version is not `pending` or `canary`; nothing changed.
    WrongState(String),
}

/// Promotes candidate `version_id` in one transaction: version → `current`, the previous current
/// → `superseded`, the template row follows, the review row → `promoted` with `reason` and time; a
/// running canary of another version of the template goes back to `pending` (issue 37 item 2).
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn promote_candidate(
    store: &Store,
    version_id: &str,
    reason: &str,
) -> Result<DecisionOutcome, StoreError> {
    let mut tx = begin_write(store).await?;
    let outcome = promote_candidate_in(&mut tx, version_id, reason).await?;
    if matches!(outcome, DecisionOutcome::Done { .. }) {
        end_other_canary(&mut tx, version_id).await?;
        tx.commit().await?;
    }
    Ok(outcome)
}

/// Issue 37 item 2: a decision on any version of a template ends a running canary of it (the
/// canary was measured against the champion of its start), in the decision's transaction.
async fn end_other_canary(conn: &mut SqliteConnection, version_id: &str) -> Result<(), StoreError> {
    let template: Option<String> =
        sqlx::query_scalar("SELECT template_id FROM agent_template_versions WHERE id = ?")
            .bind(version_id)
            .fetch_optional(&mut *conn)
            .await?;
    if let Some(template) = template {
        crate::promotion::end_canary(conn, &template, version_id).await?;
    }
    Ok(())
}

/// [`promote_candidate`] inside the caller's write transaction (a result handler's ingestion
/// transaction): writes only when the outcome is [`DecisionOutcome::Done`].
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn promote_candidate_in(
    conn: &mut SqliteConnection,
    version_id: &str,
    reason: &str,
) -> Result<DecisionOutcome, StoreError> {
    if get_candidate(&mut *conn, version_id).await?.is_none() {
        return Ok(DecisionOutcome::NotFound);
    }
    let outcome = match promote_version(conn, version_id).await? {
        PromoteOutcome::Promoted { previous } => DecisionOutcome::Done { previous },
        PromoteOutcome::NotFound => DecisionOutcome::NotFound,
        PromoteOutcome::WrongState(state) => DecisionOutcome::WrongState(state),
    };
    if matches!(outcome, DecisionOutcome::Done { .. }) {
        decide(conn, version_id, "promoted", reason).await?;
    }
    Ok(outcome)
}

/// Rejects candidate `version_id` in one transaction: version → `rejected` (so `@latest` never
/// selects it), review row → `rejected` with `reason` and time, the audit record (S-93); a
/// running canary of another version of the template goes back to `pending` (issue 37 item 2).
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn reject_candidate(
    store: &Store,
    version_id: &str,
    reason: &str,
) -> Result<DecisionOutcome, StoreError> {
    let mut tx = begin_write(store).await?;
    let outcome = reject_candidate_in(&mut tx, version_id, reason).await?;
    if matches!(outcome, DecisionOutcome::Done { .. }) {
        end_other_canary(&mut tx, version_id).await?;
        tx.commit().await?;
    }
    Ok(outcome)
}

/// [`reject_candidate`] inside the caller's write transaction: writes only when the outcome is
/// [`DecisionOutcome::Done`].
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn reject_candidate_in(
    conn: &mut SqliteConnection,
    version_id: &str,
    reason: &str,
) -> Result<DecisionOutcome, StoreError> {
    let Some(candidate) = get_candidate(&mut *conn, version_id).await? else {
        return Ok(DecisionOutcome::NotFound);
    };
    if candidate.version_state != "pending" && candidate.version_state != "canary" {
        return Ok(DecisionOutcome::WrongState(candidate.version_state));
    }
    set_version_state(conn, version_id, VersionState::Rejected).await?;
    decide(conn, version_id, "rejected", reason).await?;
    Ok(DecisionOutcome::Done { previous: None })
}

async fn decide(
    conn: &mut SqliteConnection,
    version_id: &str,
    state: &str,
    reason: &str,
) -> Result<(), StoreError> {
    let now = now_rfc3339();
    sqlx::query(
        "UPDATE agent_template_candidate_reviews SET state = ?, decision_reason = ?, decided_at = ?, updated_at = ?
         WHERE version_id = ?",
    )
    .bind(state)
    .bind(reason)
    .bind(&now)
    .bind(&now)
    .bind(version_id)
    .execute(conn)
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use skillforge_contract::{
        CandidatePackage, ImportOptions, ImportState, content_hash, validate_candidate_import,
    };

    use super::*;
    use crate::templates::insert_version;

    const BASE: &str = "---\nid: planner\nname: Planner\ndescription: Plans work\nkind: agent-template\nversion: 1\ncapabilities: [ask]\nruntime_compatibility: [codex]\ntags: [planning]\ninputs: [task]\noutputs: [plan]\n---\nPlan the task.\n";

    async fn install(store: &Store) {
        let mut conn = store.pool().acquire().await.unwrap();
        let hash = content_hash(BASE);
        insert_version(
            &mut conn,
            &NewVersion {
                template_id: "planner",
                state: VersionState::Current,
                name: "Planner",
                description: "Plans work",
                metadata_json: "{}",
                content: BASE,
                content_hash: &hash,
                source_repo: "local",
                source_ref: "",
                source_path: "planner.md",
                resolved_commit: "",
            },
        )
        .await
        .unwrap();
    }

    fn package(content: &str) -> CandidatePackage {
        let parsed = skillforge_contract::parse_template(content).unwrap();
        let mut pkg = CandidatePackage {
            kind: "gitmoot-skillopt-candidate-package".into(),
            contract_version: 1,
            template_id: "planner".into(),
            ..Default::default()
        };
        pkg.candidate.content = content.to_owned();
        pkg.candidate.metadata = parsed.metadata;
        pkg.summary.score = Some(0.75);
        pkg
    }

    async fn verify(store: &Store, pkg: &CandidatePackage) -> VerifiedCandidate {
        let mut conn = store.pool().acquire().await.unwrap();
        let state: ImportState = load_import_state(&mut conn, &ImportState::needed(pkg))
            .await
            .unwrap();
        validate_candidate_import(
            pkg,
            ImportOptions {
                artifact_dir: None,
                has_blob_store: true,
            },
            &state,
        )
        .unwrap()
    }

    #[tokio::test]
    async fn concurrent_imports_get_distinct_version_numbers() {
        let home = tempfile::tempdir().unwrap();
        let store = Store::open(home.path()).await.unwrap();
        let blobs = BlobStore::in_home(home.path());
        install(&store).await;
        let mut verified = Vec::new();
        for n in 0..4 {
            verified.push(
                verify(
                    &store,
                    &package(&BASE.replace("Plan the task.", &format!("Plan variant {n}."))),
                )
                .await,
            );
        }
        let tasks: Vec<_> = verified
            .into_iter()
            .map(|v| {
                let (store, blobs) = (store.clone(), blobs.clone());
                tokio::spawn(async move {
                    import_verified(&store, &blobs, &v, "")
                        .await
                        .map(|i| i.version.id)
                })
            })
            .collect();
        let mut ids = Vec::new();
        for task in tasks {
            ids.push(task.await.unwrap().unwrap());
        }
        ids.sort();
        assert_eq!(
            ids,
            ["planner@v2", "planner@v3", "planner@v4", "planner@v5"]
        );
    }

    #[tokio::test]
    async fn s51_import_writes_pending_and_promote_then_reject_decide() {
        let home = tempfile::tempdir().unwrap();
        let store = Store::open(home.path()).await.unwrap();
        let blobs = BlobStore::in_home(home.path());
        install(&store).await;

        let verified = verify(
            &store,
            &package(&BASE.replace("Plan the task.", "Plan the task briefly.")),
        )
        .await;
        assert_eq!(verified.base_version_id, "planner@v1");
        let imported = import_verified(&store, &blobs, &verified, "candidate.json")
            .await
            .unwrap();
        assert_eq!(imported.version.id, "planner@v2");
        assert_eq!(imported.version.state, "pending");
        assert_eq!(imported.version.source_repo, CANDIDATE_SOURCE_REPO);
        assert_eq!(
            current_version(store.pool(), "planner")
                .await
                .unwrap()
                .unwrap()
                .id,
            "planner@v1",
            "S-51"
        );

        let verified = verify(
            &store,
            &package(&BASE.replace("Plan the task.", "Plan it.")),
        )
        .await;
        import_verified(&store, &blobs, &verified, "")
            .await
            .unwrap();
        let listed: Vec<_> = list_candidates(store.pool(), "planner").await.unwrap();
        assert_eq!(
            listed
                .iter()
                .map(|c| c.version_id.as_str())
                .collect::<Vec<_>>(),
            ["planner@v3", "planner@v2"]
        );
        assert_eq!(listed[0].source_path, DEFAULT_SOURCE_PATH);
        assert_eq!(listed[1].score, Some(0.75));

        assert_eq!(
            promote_candidate(&store, "planner@v2", "").await.unwrap(),
            DecisionOutcome::Done {
                previous: Some("planner@v1".into())
            }
        );
        assert_eq!(
            current_version(store.pool(), "planner")
                .await
                .unwrap()
                .unwrap()
                .id,
            "planner@v2"
        );
        assert_eq!(
            get_version(store.pool(), "planner@v1")
                .await
                .unwrap()
                .unwrap()
                .state,
            "superseded"
        );
        assert_eq!(
            promote_candidate(&store, "planner@v2", "").await.unwrap(),
            DecisionOutcome::WrongState("current".into())
        );

        assert_eq!(
            reject_candidate(&store, "planner@v3", "too broad")
                .await
                .unwrap(),
            DecisionOutcome::Done { previous: None }
        );
        let rejected = get_candidate(store.pool(), "planner@v3")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (
                rejected.version_state.as_str(),
                rejected.review_state.as_str()
            ),
            ("rejected", "rejected")
        );
        assert_eq!(rejected.decision_reason, "too broad");
        assert!(rejected.decided_at.is_some());
        assert_eq!(
            reject_candidate(&store, "planner@v1", "x").await.unwrap(),
            DecisionOutcome::NotFound
        );
    }
}
