//! Writing one A/B to the store (S-66..S-68, S-79, S-80; resolutions 4): the run
//! `skillopt-ab:<challenger>`, one item per pick with its two answers as artifacts and options
//! `champion` / `challenger`, the human ranked event plus the bandit update, and the judge row —
//! all in one transaction, so a refused pick writes nothing.

use serde_json::json;
use skillforge_store::artifacts::{get_artifact, store_artifact};
use skillforge_store::bandit::{NewPick, record_pick};
use skillforge_store::blobs::BlobStore;
use skillforge_store::feedback::{event_created_at_now, upsert_ranked_event};
use skillforge_store::review::{
    NewEvalRun, NewReviewItem, NewReviewOption, RunSettings, add_item, create_run,
};
use skillforge_store::templates::begin_write;
use skillforge_store::{Store, StoreError};

use super::pick::{
    FEEDBACK_SOURCE, HUMAN_REVIEWER, HUMAN_SOURCE, JUDGE_SOURCE, PickRecord, Role, Shuffle,
    pick_source_url, run_id,
};

/// Media type of stored answers.
pub const ANSWER_MEDIA_TYPE: &str = "text/markdown";

/// One A/B to record.
#[derive(Debug, Clone, PartialEq)]
pub struct AbRecord {
    /// Stable per pick: derived from the champion answer job id (resolutions 4).
    pub pick_id: String,
    /// Template id.
    pub template_id: String,
    /// Champion version id.
    pub champion: String,
    /// Challenger version id.
    pub challenger: String,
    /// The user's prompt (stored as the item title's source, by hash only).
    pub prompt: String,
    /// Champion answer.
    pub champion_answer: String,
    /// Challenger answer.
    pub challenger_answer: String,
    /// The label shuffle shown.
    pub shuffle: Shuffle,
    /// The human pick, mapped back to a role; `None` with `--judge-only`.
    pub human: Option<Role>,
    /// The judge (or jury) pick and its reasoning; `None` when there is no readable one.
    pub judge: Option<(Role, String)>,
    /// `manual` | `live`.
    pub origin: &'static str,
    /// Each juror's own verdict (one for a single judge), recorded beside the rows so the
    /// judge's agreement with the human pick can be measured (issue 34 item 12); empty without a
    /// judge.
    pub jurors: Vec<JurorVerdict>,
}

/// One juror's own verdict on an A/B.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JurorVerdict {
    /// The judge's agent runtime.
    pub runtime: String,
    /// The model its transcript named (`""` when none).
    pub model: String,
    /// Its pick mapped back to a role; `None` for a tie or an unreadable verdict.
    pub winner: Option<Role>,
}

/// What [`record`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Recorded {
    /// The human row was new and the arms moved (false on a retry of the same pick).
    pub arms_moved: bool,
    /// A human ranked row was written (new or in place).
    pub human_row: bool,
    /// A judge ranked row was written.
    pub judge_row: bool,
}

/// Why a record was refused.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// An answer's blob could not be written.
    #[error("store answer: {0}")]
    Artifact(String),
    /// The ranking names an option the item does not have (S-66).
    #[error("ranking names option `{0}`, which item `{1}` does not have")]
    UnknownOption(String, String),
}

/// Records the A/B in one transaction (see module docs); with neither a human pick nor a judge
/// pick it writes nothing. Re-recording the same `pick_id` rewrites
/// the rows in place and leaves the arms as they are.
///
/// # Errors
/// A [`RecordError`]; nothing is written then.
pub async fn record(
    store: &Store,
    blobs: &BlobStore,
    ab: &AbRecord,
) -> Result<Recorded, RecordError> {
    if ab.human.is_none() && ab.judge.is_none() {
        // S-78: no pick and no readable judge verdict ⇒ nothing at all is written.
        return Ok(Recorded::default());
    }
    let run = run_id(&ab.challenger);
    let mut tx = begin_write(store).await?;
    let settings = RunSettings::normalize(Some("validate"), None, Some(2))
        .map_err(|e| StoreError::Migrate(e.to_string()))?;
    create_run(
        &mut tx,
        &NewEvalRun {
            id: run.clone(),
            template_id: ab.template_id.clone(),
            template_version_id: ab.challenger.clone(),
            target_repo: String::new(),
            settings,
            metadata_json:
                json!({"feedback_source": FEEDBACK_SOURCE, "champion_version_id": ab.champion})
                    .to_string(),
        },
    )
    .await?;
    let mut options = Vec::new();
    for (role, answer) in [
        (Role::Champion, &ab.champion_answer),
        (Role::Challenger, &ab.challenger_answer),
    ] {
        let artifact_id = format!("{run}/{}/answer-{}", ab.pick_id, role.as_str());
        if get_artifact(&mut *tx, &artifact_id).await?.is_none() {
            store_artifact(
                &mut tx,
                blobs,
                &artifact_id,
                answer.as_bytes(),
                ANSWER_MEDIA_TYPE,
                "local",
            )
            .await
            .map_err(|e| RecordError::Artifact(e.to_string()))?;
        }
        options.push(NewReviewOption {
            label: role.as_str().to_owned(),
            artifact_id,
            role: role.as_str().to_owned(),
            metadata_json: json!({"shown_as": ab.shuffle.label_of(role).as_str()}).to_string(),
        });
    }
    let prompt_hash = skillforge_contract::content_hash(&ab.prompt);
    add_item(
        &mut tx,
        &run,
        &NewReviewItem {
            item_id: ab.pick_id.clone(),
            title: format!("A/B {} vs {}", ab.champion, ab.challenger),
            metadata_json: json!({
                "challenger_label": ab.shuffle.label_of(Role::Challenger).as_str(),
                "prompt_hash": prompt_hash,
                "origin": ab.origin,
            })
            .to_string(),
            options,
            ..NewReviewItem::default()
        },
    )
    .await?;
    let labels: Vec<String> = sqlx::query_scalar(
        "SELECT label FROM eval_review_options WHERE run_id = ? AND item_id = ?",
    )
    .bind(&run)
    .bind(&ab.pick_id)
    .fetch_all(&mut *tx)
    .await
    .map_err(StoreError::from)?;
    let now = event_created_at_now();
    let mut recorded = Recorded::default();
    let rows = [
        ab.human
            .map(|winner| (winner, HUMAN_REVIEWER, HUMAN_SOURCE, String::new())),
        ab.judge
            .as_ref()
            .map(|(winner, why)| (*winner, JUDGE_SOURCE, JUDGE_SOURCE, why.clone())),
    ];
    for (winner, reviewer, source, reasoning) in rows.into_iter().flatten() {
        let event = PickRecord {
            run_id: run.clone(),
            item_id: ab.pick_id.clone(),
            winner,
            reviewer: reviewer.to_owned(),
            source: source.to_owned(),
            source_url: pick_source_url(&ab.pick_id),
            reasoning,
        }
        .to_event(&now);
        if let Some(missing) = event.ranking.iter().find(|l| !labels.contains(l)) {
            return Err(RecordError::UnknownOption(
                missing.clone(),
                ab.pick_id.clone(),
            ));
        }
        upsert_ranked_event(&mut tx, &event).await?;
        if source == HUMAN_SOURCE {
            recorded.human_row = true;
            recorded.arms_moved = record_pick(
                &mut tx,
                &NewPick {
                    pick_id: &ab.pick_id,
                    template_id: &ab.template_id,
                    champion_version_id: &ab.champion,
                    challenger_version_id: &ab.challenger,
                    winner: winner.as_str(),
                    challenger_label: ab.shuffle.label_of(Role::Challenger).as_str(),
                    origin: ab.origin,
                },
            )
            .await?;
        } else {
            // S-80: a judge row never touches an arm.
            recorded.judge_row = true;
        }
    }
    for (juror, v) in ab.jurors.iter().enumerate() {
        let verdict = skillforge_store::judge_verdicts::NewJudgeVerdict {
            pick_id: &ab.pick_id,
            juror: i64::try_from(juror).unwrap_or(i64::MAX),
            runtime: &v.runtime,
            model: &v.model,
            winner: v.winner.map(Role::as_str),
        };
        skillforge_store::judge_verdicts::record_judge_verdict(&mut tx, &verdict).await?;
    }
    // A live pick recorded after its ask: it is no longer owed (same transaction).
    if recorded.human_row {
        skillforge_store::live_ab::delete_pending(&mut tx, &ab.pick_id).await?;
    }
    tx.commit().await.map_err(StoreError::from)?;
    Ok(recorded)
}
