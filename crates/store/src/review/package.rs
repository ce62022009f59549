//! The training package of a review run (seed "Training Package", "Ranked Exploration Export";
//! facts §1; S-01, S-03, S-04, S-05): everything the external optimizer reads, assembled from the
//! store. Writing the bytes is [`skillforge_contract::serialize_package`]'s job.

use serde_json::{Map, Value};
use skillforge_contract::{
    ArtifactRef, EvalItem, FeedbackContext, FeedbackEvent, Metadata, RankedFeedbackEvent,
    TemplateSnapshot, TrainingPackage, build_evaluator_profile, derive_pairwise, export_driver,
    parse_template,
};
use sqlx::SqlitePool;

use super::{EvalRunRow, MODES, ReviewItem, get_run, list_items};
use crate::StoreError;
use crate::artifacts::get_artifact;
use crate::feedback::{list_feedback_events, list_ranked_events};
use crate::templates::get_version;

/// `feedback_context.feedback_source` of human-reviewed runs.
pub const IMPORTED_HUMAN_REVIEW: &str = "imported_human_review";
/// `feedback_context.feedback_target`.
pub const BASELINE_REVIEW_OUTPUTS: &str = "baseline_review_outputs";

/// Why a run's package cannot be assembled.
#[derive(Debug, thiserror::Error)]
pub enum PackageError {
    /// No such run.
    #[error("review run `{0}` not found")]
    RunNotFound(String),
    /// The run's template version is not installed.
    #[error("review run `{run}`: template version `{version}` not found")]
    VersionNotFound {
        /// Run id.
        run: String,
        /// Version id.
        version: String,
    },
    /// An item references an artifact that is not registered.
    #[error(
        "review run `{run}`: item `{item}` references artifact `{artifact}`, which is not registered"
    )]
    MissingArtifact {
        /// Run id.
        run: String,
        /// Item id.
        item: String,
        /// Artifact id.
        artifact: String,
    },
    /// A query failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<sqlx::Error> for PackageError {
    fn from(e: sqlx::Error) -> Self {
        PackageError::Store(StoreError::Sql(e))
    }
}

/// Reads run `run_id` with its template version, items, artifacts and events and assembles its
/// package ([`assemble_package`]).
///
/// # Errors
/// A [`PackageError`].
pub async fn training_package(
    pool: &SqlitePool,
    run_id: &str,
) -> Result<TrainingPackage, PackageError> {
    let run = get_run(pool, run_id)
        .await?
        .ok_or_else(|| PackageError::RunNotFound(run_id.to_owned()))?;
    let template = template_snapshot(pool, &run.template_version_id)
        .await?
        .ok_or_else(|| PackageError::VersionNotFound {
            run: run.id.clone(),
            version: run.template_version_id.clone(),
        })?;
    // Events first, then items: items are never deleted and every event's item is written before
    // (or with) the event, so each event read here finds its item below even while a harvester
    // leg writes concurrently (reading items first could miss the item of a newer event).
    let feedback = list_feedback_events(pool, run_id).await?;
    let ranked = list_ranked_events(pool, run_id).await?;
    let items = list_items(pool, run_id).await?;
    let mut artifacts = Vec::new();
    for item in &items {
        let wire = item.to_contract();
        for artifact_id in wire.artifact_ids() {
            if artifacts.iter().any(|a: &ArtifactRef| a.id == artifact_id) {
                continue;
            }
            let artifact = artifact_ref(pool, artifact_id).await?.ok_or_else(|| {
                PackageError::MissingArtifact {
                    run: run.id.clone(),
                    item: wire.id.clone(),
                    artifact: artifact_id.to_owned(),
                }
            })?;
            artifacts.push(artifact);
        }
    }
    let mut package = assemble_package(&run, template, &items, artifacts, feedback, ranked);
    // BINEVAL verdicts ride along only when the run has some (S-02: the section is absent, and
    // the export bytes unchanged, otherwise).
    package.binary_verdicts = crate::binary::list_verdicts(pool, run_id)
        .await?
        .iter()
        .map(crate::binary::VerdictRecord::to_contract)
        .collect();
    Ok(package)
}

/// Assembles a package (pure). `training_mode` is the run mode (S-03); `items` keep store order
/// (by item id) with options by label; `artifacts` are sorted by id; `pairwise_preferences` are
/// derived from every ranked event with its `ranked_event_id` (S-05); `feedback_context` only when
/// there is an event (S-04); `evaluator_config` is the run metadata minus a training-mode `mode`
/// and `feedback_source` (absent when empty); `evaluator_profile` only when that config names an
/// evaluator (`evaluator_id`, or `evaluation.evaluator_id`; judge model from `judge_model`).
pub fn assemble_package(
    run: &EvalRunRow,
    template: TemplateSnapshot,
    items: &[ReviewItem],
    mut artifacts: Vec<ArtifactRef>,
    feedback: Vec<FeedbackEvent>,
    ranked: Vec<RankedFeedbackEvent>,
) -> TrainingPackage {
    let mut package = TrainingPackage::new(template, run.to_contract());
    if MODES.contains(&run.mode.as_str()) {
        package.training_mode = run.mode.clone();
    }
    package.items = items
        .iter()
        .map(ReviewItem::to_contract)
        .collect::<Vec<EvalItem>>();
    artifacts.sort_by(|a, b| a.id.cmp(&b.id));
    package.artifacts = artifacts;
    let metadata = run.metadata();
    if !feedback.is_empty() || !ranked.is_empty() {
        let feedback_source = metadata
            .as_ref()
            .and_then(|m| m.get("feedback_source"))
            .and_then(Value::as_str)
            .filter(|s| !s.trim().is_empty())
            .unwrap_or(IMPORTED_HUMAN_REVIEW);
        let review_issue = feedback
            .iter()
            .map(|e| (&e.source, &e.source_url))
            .chain(ranked.iter().map(|e| (&e.source, &e.source_url)))
            .filter(|(source, _)| source.as_str() == "github")
            .find_map(|(_, url)| github_issue_ref(url))
            .unwrap_or_default();
        let context = FeedbackContext {
            feedback_source: feedback_source.to_owned(),
            feedback_target: BASELINE_REVIEW_OUTPUTS.to_owned(),
            review_run_id: run.id.clone(),
            reviewed_skill_version: run.template_version_id.clone(),
            review_issue,
            target_repo: run.target_repo.clone(),
        };
        package.feedback_context = serde_json::to_value(context).ok();
    }
    package.evaluator_config = evaluator_config(metadata.as_ref());
    if let Some(config) = &package.evaluator_config {
        let field = |key: &str| {
            config
                .get(key)
                .or_else(|| config.get("evaluation").and_then(|e| e.get(key)))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        package.evaluator_profile = build_evaluator_profile(
            &field("evaluator_id"),
            &field("judge_model"),
            Some(config.clone()),
        );
    }
    package.pairwise_preferences = ranked.iter().flat_map(derive_pairwise).collect();
    package.feedback_events = feedback;
    package.ranked_feedback_events = ranked;
    package
}

/// Run metadata minus `mode` when it holds a training mode (S-03: workflow mode travels only as
/// `training_mode`) and minus `feedback_source`; `None` when nothing is left or the metadata is not
/// an object.
pub fn evaluator_config(metadata: Option<&Value>) -> Option<Value> {
    let Some(Value::Object(map)) = metadata else {
        return None;
    };
    let config: Map<String, Value> = map
        .iter()
        .filter(|(key, value)| {
            let is_training_mode =
                key.as_str() == "mode" && value.as_str().is_some_and(|m| MODES.contains(&m));
            !is_training_mode && key.as_str() != "feedback_source"
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    (!config.is_empty()).then_some(Value::Object(config))
}

/// `owner/repo#N` from a GitHub issue, pull-request or comment web URL on github.com or a GitHub
/// Enterprise server (`https://HOST/owner/repo/issues/N#issuecomment-…`, `…/pull/N`; any
/// `http(s)` host, since the caller only passes URLs of `github`-sourced rows).
pub fn github_issue_ref(url: &str) -> Option<String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))?;
    let (_host, path) = rest.split_once('/')?;
    let mut parts = path.split(['/', '#', '?']);
    let (owner, repo, kind, number) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let is_number = !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit());
    (matches!(kind, "issues" | "pull") && is_number && !owner.is_empty() && !repo.is_empty())
        .then(|| format!("{owner}/{repo}#{number}"))
}

/// The snapshot of template version `version_id` ([`crate::templates::get_version`]): stored
/// metadata, else the content's frontmatter.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn template_snapshot(
    pool: &SqlitePool,
    version_id: &str,
) -> Result<Option<TemplateSnapshot>, StoreError> {
    Ok(get_version(pool, version_id).await?.map(|r| {
        let metadata = serde_json::from_str::<Metadata>(&r.metadata_json)
            .ok()
            .filter(|m| !m.id.is_empty())
            .or_else(|| parse_template(&r.content).ok().map(|t| t.metadata))
            .unwrap_or_default();
        TemplateSnapshot {
            id: r.template_id,
            version_id: r.id,
            version_number: r.version,
            version_state: r.state,
            content_hash: r.content_hash,
            source_repo: r.source_repo,
            source_ref: r.source_ref,
            source_path: r.source_path,
            resolved_commit: r.resolved_commit,
            metadata,
            content: r.content,
        }
    }))
}

/// The manifest entry of artifact `id` ([`crate::artifacts::get_artifact`]), if registered. The
/// driver is the one the external optimizer's loader reads: a row stored by an older build with
/// driver `local` (or `skillforge-distill`) exports the driver derived from its media type
/// ([`skillforge_contract::export_driver`]), so existing homes need no migration.
///
/// # Errors
/// [`StoreError::Sql`].
pub async fn artifact_ref(pool: &SqlitePool, id: &str) -> Result<Option<ArtifactRef>, StoreError> {
    Ok(get_artifact(pool, id).await?.map(|a| ArtifactRef {
        driver: export_driver(&a.driver, &a.media_type),
        id: a.id,
        hash: a.hash,
        media_type: a.media_type,
        size_bytes: a.size_bytes,
    }))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn s03_evaluator_config_never_carries_the_workflow_mode() {
        let table = [
            (
                json!({"mode": "refine", "evaluator_id": "x"}),
                Some(json!({"evaluator_id": "x"})),
            ),
            (
                json!({"mode": "render-v1"}),
                Some(json!({"mode": "render-v1"})),
            ),
            (json!({"feedback_source": "automatic_trace"}), None),
            (json!({}), None),
            (json!("text"), None),
        ];
        for (metadata, want) in table {
            assert_eq!(evaluator_config(Some(&metadata)), want, "{metadata}");
        }
        assert_eq!(evaluator_config(None), None);
    }

    #[test]
    fn github_issue_ref_table() {
        let table = [
            (
                "https://github.com/o/r/issues/12#issuecomment-9",
                Some("o/r#12"),
            ),
            ("https://github.com/o/r/pull/3", Some("o/r#3")),
            // GitHub Enterprise web URLs.
            (
                "https://ghe.example.com/o/r/issues/7#issuecomment-1",
                Some("o/r#7"),
            ),
            (
                "http://ghe.local:8080/team/app/pull/31",
                Some("team/app#31"),
            ),
            ("https://ghe.example.com/o/r", None),
            ("https://github.com/o/r/tree/main", None),
            ("github-comment:55", None),
            ("/tmp/packet", None),
        ];
        for (url, want) in table {
            assert_eq!(github_issue_ref(url).as_deref(), want, "{url}");
        }
    }
}
