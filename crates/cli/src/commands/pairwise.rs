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
//! transaction, and the command exits 1 when any item was skipped. The import itself is
//! [`skillforge_skillopt::ab::import_pairwise`]; this module reads the files and prints.

use std::path::{Path, PathBuf};

use anyhow::anyhow;
use clap::Args;
use serde_json::json;
use skillforge_contract::{
    PAIRWISE_FILES, parse_pairwise_packet, parse_pairwise_picks, parse_pairwise_secret_map,
};
use skillforge_skillopt::ab::{ImportError, PAIRWISE_SOURCE, PairwiseImport, import_pairwise};
use skillforge_store::blobs::BlobStore;

use crate::context::Context;
use crate::exit::{CHECK_FAILED, CliError, CliResult, OK};
use crate::output::print_json;

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
    std::fs::read_to_string(path)
        .map_err(|e| CliError::usage(anyhow!("read pairwise file `{}`: {e}", path.display())))
}

async fn import(ctx: &Context, args: PairwiseImportArgs) -> CliResult {
    if let Some(r) = &args.reviewer {
        skillforge_skillopt::packet::check_reviewer(r)
            .map_err(|e| CliError::usage(anyhow!("--reviewer: {e}")))?;
    }
    let dir = std::fs::canonicalize(&args.dir).map_err(|e| {
        CliError::usage(anyhow!(
            "open pairwise packet directory `{}`: {e}",
            args.dir.display()
        ))
    })?;
    let [packet_name, secret_name, picks_name] = PAIRWISE_FILES;
    let packet = parse_pairwise_packet(&read(
        &args.packet.unwrap_or_else(|| dir.join(packet_name)),
    )?)
    .map_err(CliError::usage)?;
    let secret = parse_pairwise_secret_map(&read(
        &args.secret_map.unwrap_or_else(|| dir.join(secret_name)),
    )?)
    .map_err(CliError::usage)?;
    let picks = parse_pairwise_picks(&read(&args.picks.unwrap_or_else(|| dir.join(picks_name)))?)
        .map_err(CliError::usage)?;
    let source_url = dir.display().to_string();
    let request = PairwiseImport {
        packet: &packet,
        secret: &secret,
        picks: &picks,
        reviewer: args.reviewer.as_deref(),
        source_url: &source_url,
    };
    let exit = |e: ImportError| match e {
        ImportError::Invalid(_) => CliError::usage(anyhow!(e)),
        ImportError::Env(_) => CliError::env(anyhow!(e)),
    };
    request.check().map_err(exit)?;
    let store = ctx.store().await?;
    let done = import_pairwise(&store, &BlobStore::in_home(&ctx.home), &request)
        .await
        .map_err(exit)?;
    if ctx.json {
        print_json(&json!({
            "run_id": done.run_id,
            "reviewer": done.reviewer,
            "source": PAIRWISE_SOURCE,
            "source_url": source_url,
            "imported": done.imported.iter().map(|p| json!({"item_id": p.item_id, "winner": p.winner, "pick": p.pick})).collect::<Vec<_>>(),
            "ranked_feedback_events": {"inserted": done.inserted, "updated": done.updated},
            "skipped": done.skipped.iter().map(|(item, reason)| json!({"item_id": item, "reason": reason})).collect::<Vec<_>>(),
        }));
    } else {
        for pick in &done.imported {
            println!("{}: picked {} = {}", pick.item_id, pick.pick, pick.winner);
        }
        for (item, reason) in &done.skipped {
            eprintln!("skipped {item}: {reason}");
        }
        println!(
            "imported {} pairwise preferences into run {} ({} new)",
            done.imported.len(),
            done.run_id,
            done.inserted
        );
    }
    Ok(if done.skipped.is_empty() {
        OK
    } else {
        CHECK_FAILED
    })
}
