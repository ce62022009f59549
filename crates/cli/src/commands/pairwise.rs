//! `skillforge pairwise import DIR`: a reviewer's blinded paired-review packet (the optimizer's
//! `pairwise-review.json`, its secret map and the picks), de-blinded and stored as ranked
//! feedback events (seed: the pairwise-packet import paragraph; "Champion-challenger A/B
//! preferences" for the stored shape).
//!
//! Each picked item becomes a two-option item of the packet's run with options `champion` and
//! `challenger` (their outputs stored as artifacts) and one ranked event `ranking = [winner,
//! loser]`, source `pairwise-review`, upserted under the five-column key, so a re-import changes no
//! row count. The run is created (mode validate, 2 options) when the store does not have it yet.
//! Items that cannot be unblinded are reported and skipped; the rest are written in one
//! transaction, and the command exits 1 when any item was skipped.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, anyhow};
use clap::Args;
use serde_json::json;
use skillforge_contract::{
    CHALLENGER, CHAMPION, PAIRWISE_FILES, RankedFeedbackEvent, UnblindedPick, check_pairwise_runs, parse_pairwise_packet,
    driver_for_media_type, parse_pairwise_picks, parse_pairwise_secret_map, ranked_feedback_event_id, unblind_pairwise,
};
use skillforge_store::artifacts::store_artifact;
use skillforge_store::blobs::BlobStore;
use skillforge_store::feedback::{Upserted, event_created_at_now, upsert_ranked_event};
use skillforge_store::review::{
    NewEvalRun, NewReviewItem, NewReviewOption, RunSettings, add_item, create_run, get_run, list_items,
};
use skillforge_store::templates::get_version;

use crate::context::Context;
use crate::exit::{CHECK_FAILED, CliError, CliResult, OK};
use crate::output::print_json;

/// `source` of events imported from a pairwise review packet.
pub const PAIRWISE_SOURCE: &str = "pairwise-review";

/// Arguments of `pairwise import`.
#[derive(Debug, Args)]
pub struct PairwiseImportArgs {
    /// Packet directory.
    dir: PathBuf,
    /// Blinded packet (default `DIR/pairwise-review.json`).
    #[arg(long, value_name = "FILE")]
    packet: Option<PathBuf>,
    /// Secret unblinding map (default `DIR/pairwise-secret-map.json`).
    #[arg(long = "secret-map", value_name = "FILE")]
    secret_map: Option<PathBuf>,
    /// Reviewer picks (default `DIR/pairwise-picks.json`).
    #[arg(long, value_name = "FILE")]
    picks: Option<PathBuf>,
    /// Reviewer, overriding the picks file's `reviewer`.
    #[arg(long)]
    reviewer: Option<String>,
}

/// `skillforge pairwise ...`.
#[derive(Debug, clap::Subcommand)]
pub enum PairwiseCommand {
    /// Import a blinded paired-review packet and store the de-blinded preferences.
    Import(PairwiseImportArgs),
}

/// Dispatches a `pairwise` subcommand.
pub async fn run(ctx: &Context, cmd: PairwiseCommand) -> CliResult {
    match cmd {
        PairwiseCommand::Import(args) => import(ctx, args).await,
    }
}

fn read(path: &Path) -> Result<String, CliError> {
    std::fs::read_to_string(path).map_err(|e| CliError::usage(anyhow!("read pairwise file `{}`: {e}", path.display())))
}

async fn import(ctx: &Context, args: PairwiseImportArgs) -> CliResult {
    if let Some(r) = &args.reviewer {
        skillforge_workflows::packet::check_reviewer(r).map_err(|e| CliError::usage(anyhow!("--reviewer: {e}")))?;
    }
    let dir = std::fs::canonicalize(&args.dir)
        .map_err(|e| CliError::usage(anyhow!("open pairwise packet directory `{}`: {e}", args.dir.display())))?;
    let [packet_name, secret_name, picks_name] = PAIRWISE_FILES;
    let packet = parse_pairwise_packet(&read(&args.packet.unwrap_or_else(|| dir.join(packet_name)))?).map_err(CliError::usage)?;
    let secret =
        parse_pairwise_secret_map(&read(&args.secret_map.unwrap_or_else(|| dir.join(secret_name)))?).map_err(CliError::usage)?;
    let picks = parse_pairwise_picks(&read(&args.picks.unwrap_or_else(|| dir.join(picks_name)))?).map_err(CliError::usage)?;
    check_pairwise_runs(&packet, &secret, &picks).map_err(CliError::usage)?;
    let reviewer = args
        .reviewer
        .as_deref()
        .map(str::trim)
        .filter(|r| !r.is_empty())
        .unwrap_or_else(|| picks.reviewer.trim())
        .to_owned();
    if reviewer.is_empty() {
        return Err(CliError::usage(anyhow!("pairwise reviewer is required: pass --reviewer or set `reviewer` in the picks file")));
    }
    skillforge_workflows::packet::check_reviewer(&reviewer).map_err(|e| CliError::usage(anyhow!("pairwise import: {e}")))?;
    let run_id = packet.run_id.trim().to_owned();
    let store = ctx.store().await?;
    let existing_run = get_run(store.pool(), &run_id).await.context("read review run")?;
    let template_id = packet.template_id.trim();
    if let Some(run) = existing_run.as_ref().filter(|r| !template_id.is_empty() && r.template_id != template_id) {
        return Err(CliError::usage(anyhow!(
            "pairwise packet template `{template_id}` does not match review run `{run_id}` template `{}`",
            run.template_id
        )));
    }
    let results = unblind_pairwise(&packet, &secret, &picks);
    let items = list_items(store.pool(), &run_id).await.context("read review items")?;
    let mut skipped: Vec<(String, String)> = Vec::new();
    let mut good: Vec<UnblindedPick> = Vec::new();
    for (result, item) in results.into_iter().zip(&packet.items) {
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
    let blobs = BlobStore::in_home(&ctx.home);
    let source_url = dir.display().to_string();
    let created_at = event_created_at_now();
    let mut tx = store.begin().await?;
    if existing_run.is_none() {
        let base_version = packet.base_version_id.trim();
        let version = get_version(store.pool(), base_version).await.context("read template version")?.ok_or_else(|| {
            CliError::usage(anyhow!(
                "review run `{run_id}` does not exist and the packet's base version `{base_version}` is not installed"
            ))
        })?;
        let new = NewEvalRun {
            id: run_id.clone(),
            template_id: version.template_id.clone(),
            template_version_id: version.id.clone(),
            target_repo: String::new(),
            settings: RunSettings::normalize(Some("validate"), None, Some(2)).map_err(CliError::usage)?,
            metadata_json: String::new(),
        };
        create_run(&mut tx, &new).await.context("create review run")?;
    }
    let (mut inserted, mut updated) = (0, 0);
    for pick in &good {
        if !items.iter().any(|i| i.item.item_id == pick.item_id) {
            let mut new = NewReviewItem { item_id: pick.item_id.clone(), title: pick.title.clone(), ..Default::default() };
            for (role, response) in [(CHAMPION, &pick.champion_response), (CHALLENGER, &pick.challenger_response)] {
                let artifact_id = format!("{run_id}/{}/{role}", pick.item_id);
                store_artifact(&mut tx, &blobs, &artifact_id, response.as_bytes(), "text/plain", driver_for_media_type("text/plain"))
                    .await
                    .with_context(|| format!("store artifact `{artifact_id}`"))?;
                new.options.push(NewReviewOption {
                    label: role.to_owned(),
                    artifact_id,
                    role: role.to_owned(),
                    metadata_json: String::new(),
                });
            }
            add_item(&mut tx, &run_id, &new).await.context("add review item")?;
        }
        let event = RankedFeedbackEvent {
            id: ranked_feedback_event_id(&run_id, &pick.item_id, &reviewer, PAIRWISE_SOURCE, &source_url),
            run_id: run_id.clone(),
            item_id: pick.item_id.clone(),
            ranking: vec![pick.winner.to_owned(), pick.loser.to_owned()],
            winner: pick.winner.to_owned(),
            reviewer: reviewer.clone(),
            source: PAIRWISE_SOURCE.to_owned(),
            source_url: source_url.clone(),
            created_at: created_at.clone(),
            ..Default::default()
        };
        match upsert_ranked_event(&mut tx, &event).await.context("store ranked feedback event")? {
            Upserted::Inserted => inserted += 1,
            Upserted::Updated => updated += 1,
        }
    }
    tx.commit().await.context("commit pairwise import")?;
    if ctx.json {
        print_json(&json!({
            "run_id": run_id,
            "reviewer": reviewer,
            "source": PAIRWISE_SOURCE,
            "source_url": source_url,
            "imported": good.iter().map(|p| json!({"item_id": p.item_id, "winner": p.winner, "pick": p.pick})).collect::<Vec<_>>(),
            "ranked_feedback_events": {"inserted": inserted, "updated": updated},
            "skipped": skipped.iter().map(|(item, reason)| json!({"item_id": item, "reason": reason})).collect::<Vec<_>>(),
        }));
    } else {
        for pick in &good {
            println!("{}: picked {} = {}", pick.item_id, pick.pick, pick.winner);
        }
        for (item, reason) in &skipped {
            eprintln!("skipped {item}: {reason}");
        }
        println!("imported {} pairwise preferences into run {run_id} ({inserted} new)", good.len());
    }
    Ok(if skipped.is_empty() { OK } else { CHECK_FAILED })
}

fn has_roles(item: &skillforge_store::review::ReviewItem) -> bool {
    let labels: Vec<&str> = item.options.iter().map(|o| o.label.as_str()).collect();
    labels.contains(&CHAMPION) && labels.contains(&CHALLENGER) && labels.len() == 2
}
