//! Importing a reviewer's blinded paired-review packet (the optimizer's `pairwise-review.json`,
//! its secret map and the picks): de-blinded and stored as ranked feedback events (seed: the
//! pairwise-packet import paragraph; "Champion-challenger A/B preferences" for the stored shape).
//!
//! Each picked item becomes a two-option item of the packet's run with options `champion` and
//! `challenger` (their outputs stored as artifacts) and one ranked event `ranking = [winner,
//! loser]`, source [`PAIRWISE_SOURCE`], upserted under the five-column key, so a re-import changes
//! no row count. The run is created (mode validate, 2 options) when the store does not have it
//! yet. Items that cannot be unblinded are reported and skipped; the rest are written in one
//! store transaction (all or nothing).

use skillforge_contract::{
    CHALLENGER, CHAMPION, PairwisePicks, PairwiseReviewPacket, PairwiseSecretMap,
    RankedFeedbackEvent, UnblindedPick, check_pairwise_runs, driver_for_media_type,
    ranked_feedback_event_id, unblind_pairwise,
};
use skillforge_store::Store;
use skillforge_store::artifacts::store_artifact;
use skillforge_store::blobs::BlobStore;
use skillforge_store::feedback::{Upserted, event_created_at_now, upsert_ranked_event};
use skillforge_store::review::{
    NewEvalRun, NewReviewItem, NewReviewOption, ReviewItem, RunSettings, add_item, create_run,
    get_run, list_items,
};
use skillforge_store::templates::get_version;

/// `source` of events imported from a pairwise review packet.
pub const PAIRWISE_SOURCE: &str = "pairwise-review";

/// Why a packet was not imported. Nothing is written in either case.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The packet, its secret map or picks disagree, or with the store (exit 2 in the CLI).
    #[error("{0}")]
    Invalid(String),
    /// The store or the blob store failed; the message names the step (exit 3 in the CLI).
    #[error("{0}")]
    Env(String),
}

/// One import: the parsed files, the reviewer and where the packet came from.
#[derive(Debug, Clone, Copy)]
pub struct PairwiseImport<'a> {
    /// `pairwise-review.json`.
    pub packet: &'a PairwiseReviewPacket,
    /// `pairwise-secret-map.json`.
    pub secret: &'a PairwiseSecretMap,
    /// `pairwise-picks.json`.
    pub picks: &'a PairwisePicks,
    /// Overrides the picks file's `reviewer` when non-empty.
    pub reviewer: Option<&'a str>,
    /// The events' `source_url` (the packet directory).
    pub source_url: &'a str,
}

impl PairwiseImport<'_> {
    /// Checks the files against each other (no store needed) and returns the reviewer, so a
    /// caller can refuse bad input before it opens the store.
    ///
    /// # Errors
    /// [`ImportError::Invalid`] for runs that disagree or no reviewer.
    pub fn check(&self) -> Result<String, ImportError> {
        check_pairwise_runs(self.packet, self.secret, self.picks)
            .map_err(|e| ImportError::Invalid(e.to_string()))?;
        let reviewer = self
            .reviewer
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .unwrap_or_else(|| self.picks.reviewer.trim())
            .to_owned();
        if reviewer.is_empty() {
            return Err(ImportError::Invalid(
                "pairwise reviewer is required: pass --reviewer or set `reviewer` in the picks file".into(),
            ));
        }
        crate::packet::check_reviewer(&reviewer)
            .map_err(|e| ImportError::Invalid(format!("pairwise import: {e}")))?;
        Ok(reviewer)
    }
}

/// What an import wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportReport {
    /// The packet's run.
    pub run_id: String,
    /// Reviewer of the events.
    pub reviewer: String,
    /// The picks imported, in packet order.
    pub imported: Vec<UnblindedPick>,
    /// Ranked events inserted now.
    pub inserted: usize,
    /// Ranked events that were already there (updated in place).
    pub updated: usize,
    /// Items skipped: (item id, reason).
    pub skipped: Vec<(String, String)>,
}

fn env(what: &str) -> impl Fn(skillforge_store::StoreError) -> ImportError + '_ {
    move |e| ImportError::Env(format!("{what}: {e}"))
}

/// Imports one de-blinded packet into `store` (artifacts into `blobs`), in one transaction.
///
/// # Errors
/// [`ImportError::Invalid`] for runs that disagree, no reviewer, a packet whose template differs
/// from the stored run's, or a new run whose base version is not installed;
/// [`ImportError::Env`] when the store or blob store fails.
pub async fn import_pairwise(
    store: &Store,
    blobs: &BlobStore,
    req: &PairwiseImport<'_>,
) -> Result<ImportReport, ImportError> {
    let (packet, secret, picks) = (req.packet, req.secret, req.picks);
    let reviewer = req.check()?;
    let run_id = packet.run_id.trim().to_owned();
    let existing_run = get_run(store.pool(), &run_id)
        .await
        .map_err(env("read review run"))?;
    let template_id = packet.template_id.trim();
    if let Some(run) = existing_run
        .as_ref()
        .filter(|r| !template_id.is_empty() && r.template_id != template_id)
    {
        return Err(ImportError::Invalid(format!(
            "pairwise packet template `{template_id}` does not match review run `{run_id}` template `{}`",
            run.template_id
        )));
    }
    let items = list_items(store.pool(), &run_id)
        .await
        .map_err(env("read review items"))?;
    let mut skipped: Vec<(String, String)> = Vec::new();
    let mut good: Vec<UnblindedPick> = Vec::new();
    for (result, item) in unblind_pairwise(packet, secret, picks)
        .into_iter()
        .zip(&packet.items)
    {
        match result {
            Err(e) => skipped.push((item.item_id.trim().to_owned(), e.to_string())),
            Ok(pick) => match items.iter().find(|i| i.item.item_id == pick.item_id) {
                Some(stored) if !has_roles(stored) => skipped.push((
                    pick.item_id.clone(),
                    format!("item exists in run `{run_id}` without champion/challenger options"),
                )),
                _ => good.push(pick),
            },
        }
    }
    let created_at = event_created_at_now();
    let mut tx = store
        .begin()
        .await
        .map_err(env("begin the pairwise import"))?;
    if existing_run.is_none() {
        let base_version = packet.base_version_id.trim();
        let version = get_version(store.pool(), base_version).await.map_err(env("read template version"))?.ok_or_else(|| {
            ImportError::Invalid(format!(
                "review run `{run_id}` does not exist and the packet's base version `{base_version}` is not installed"
            ))
        })?;
        let new = NewEvalRun {
            id: run_id.clone(),
            template_id: version.template_id.clone(),
            template_version_id: version.id.clone(),
            target_repo: String::new(),
            settings: RunSettings::normalize(Some("validate"), None, Some(2))
                .map_err(|e| ImportError::Invalid(e.to_string()))?,
            metadata_json: String::new(),
        };
        create_run(&mut tx, &new)
            .await
            .map_err(env("create review run"))?;
    }
    let (mut inserted, mut updated) = (0, 0);
    for pick in &good {
        if !items.iter().any(|i| i.item.item_id == pick.item_id) {
            add_pick_item(&mut tx, blobs, &run_id, pick).await?;
        }
        let event = RankedFeedbackEvent {
            id: ranked_feedback_event_id(
                &run_id,
                &pick.item_id,
                &reviewer,
                PAIRWISE_SOURCE,
                req.source_url,
            ),
            run_id: run_id.clone(),
            item_id: pick.item_id.clone(),
            ranking: vec![pick.winner.to_owned(), pick.loser.to_owned()],
            winner: pick.winner.to_owned(),
            reviewer: reviewer.clone(),
            source: PAIRWISE_SOURCE.to_owned(),
            source_url: req.source_url.to_owned(),
            created_at: created_at.clone(),
            ..Default::default()
        };
        match upsert_ranked_event(&mut tx, &event)
            .await
            .map_err(env("store ranked feedback event"))?
        {
            Upserted::Inserted => inserted += 1,
            Upserted::Updated => updated += 1,
        }
    }
    tx.commit()
        .await
        .map_err(|e| ImportError::Env(format!("commit pairwise import: {e}")))?;
    Ok(ImportReport {
        run_id,
        reviewer,
        imported: good,
        inserted,
        updated,
        skipped,
    })
}

/// The two-option item (`champion`, `challenger`) of a pick, its outputs stored as artifacts.
async fn add_pick_item(
    tx: &mut sqlx::SqliteConnection,
    blobs: &BlobStore,
    run_id: &str,
    pick: &UnblindedPick,
) -> Result<(), ImportError> {
    let mut new = NewReviewItem {
        item_id: pick.item_id.clone(),
        title: pick.title.clone(),
        ..Default::default()
    };
    for (role, response) in [
        (CHAMPION, &pick.champion_response),
        (CHALLENGER, &pick.challenger_response),
    ] {
        let artifact_id = format!("{run_id}/{}/{role}", pick.item_id);
        store_artifact(
            &mut *tx,
            blobs,
            &artifact_id,
            response.as_bytes(),
            "text/plain",
            driver_for_media_type("text/plain"),
        )
        .await
        .map_err(|e| ImportError::Env(format!("store artifact `{artifact_id}`: {e}")))?;
        new.options.push(NewReviewOption {
            label: role.to_owned(),
            artifact_id,
            role: role.to_owned(),
            metadata_json: String::new(),
        });
    }
    add_item(&mut *tx, run_id, &new)
        .await
        .map_err(env("add review item"))?;
    Ok(())
}

fn has_roles(item: &ReviewItem) -> bool {
    let labels: Vec<&str> = item.options.iter().map(|o| o.label.as_str()).collect();
    labels.contains(&CHAMPION) && labels.contains(&CHALLENGER) && labels.len() == 2
}
