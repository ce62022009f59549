//! `skillforge live-ab pending|show|pick`: live A/B picks recorded after the ask (issue 15 item 4;
//! seed: SkillOpt, "Live-traffic A/B interception (#482)"; S-72..S-74).
//!
//! An intercepted `ask` without `--pick` keeps what it showed (both answers, the label shuffle);
//! `pick PICK_ID a|b` records the human's pick through the same path as a manual A/B (the
//! `skillopt-ab` ranked event, one bandit update, origin `live`) and the pick is no longer owed.
//! `show` prints the blind Option A / Option B again. Live A/B never promotes (S-74).

use anyhow::anyhow;
use clap::Subcommand;
use serde_json::json;
use skillforge_skillopt::ab::pick::{Label, Role, Shuffle};
use skillforge_skillopt::ab::record::{AbRecord, record};
use skillforge_store::blobs::BlobStore;
use skillforge_store::live_ab::{PendingPick, get_pending, list_pending};

use crate::context::Context;
use crate::exit::{CliError, CliResult, OK};
use crate::output::print_json;

/// `skillforge live-ab ...`.
#[derive(Debug, Subcommand)]
pub enum LiveAbCommand {
    /// List the intercepted asks whose pick is still owed.
    Pending,
    /// Show an owed pick's two answers, blind (Option A / Option B).
    Show {
        /// The pick id `ask` printed (`pick-<job id>`).
        pick_id: String,
    },
    /// Record the human's pick of an owed live A/B (`a` or `b`, as shown).
    Pick {
        /// The pick id `ask` printed (`pick-<job id>`).
        pick_id: String,
        /// The option picked: `a` or `b`.
        label: String,
    },
}

/// Runs a `live-ab` subcommand.
pub async fn run(ctx: &Context, cmd: LiveAbCommand) -> CliResult {
    match cmd {
        LiveAbCommand::Pending => pending(ctx).await,
        LiveAbCommand::Show { pick_id } => show(ctx, &pick_id).await,
        LiveAbCommand::Pick { pick_id, label } => pick(ctx, &pick_id, &label).await,
    }
}

async fn owed(ctx: &Context, pick_id: &str) -> Result<PendingPick, CliError> {
    let store = ctx.store().await?;
    get_pending(store.pool(), pick_id).await?.ok_or_else(|| {
        CliError::usage(anyhow!(
            "no live A/B pick `{pick_id}` is owed (see `skillforge live-ab pending`)"
        ))
    })
}

fn shuffle_of(p: &PendingPick) -> Shuffle {
    Shuffle {
        challenger_is_a: p.challenger_label == "a",
    }
}

/// Option A's and Option B's text as shown at ask time.
fn shown(p: &PendingPick) -> (&str, &str) {
    if shuffle_of(p).challenger_is_a {
        (&p.challenger_answer, &p.champion_answer)
    } else {
        (&p.champion_answer, &p.challenger_answer)
    }
}

async fn pending(ctx: &Context) -> CliResult {
    let store = ctx.store().await?;
    let rows = list_pending(store.pool()).await?;
    if ctx.json {
        print_json(&rows.iter().map(|p| json!({"pick_id": p.pick_id, "template_id": p.template_id, "created_at": p.created_at})).collect::<Vec<_>>());
    } else if rows.is_empty() {
        eprintln!("no live A/B pick is owed");
    } else {
        for p in &rows {
            println!("{:<44} {:<16} {}", p.pick_id, p.template_id, p.created_at);
        }
    }
    Ok(OK)
}

async fn show(ctx: &Context, pick_id: &str) -> CliResult {
    let p = owed(ctx, pick_id).await?;
    let (a, b) = shown(&p);
    if ctx.json {
        print_json(
            &json!({"pick_id": p.pick_id, "template_id": p.template_id, "prompt": p.prompt, "option_a": a, "option_b": b}),
        );
    } else {
        println!("{}\n\nOption A:\n{a}\n\nOption B:\n{b}", p.prompt);
    }
    Ok(OK)
}

async fn pick(ctx: &Context, pick_id: &str, label: &str) -> CliResult {
    let label = Label::parse(label)
        .ok_or_else(|| CliError::usage(anyhow!("the pick must be `a` or `b`, got {label:?}")))?;
    let p = owed(ctx, pick_id).await?;
    let store = ctx.store().await?;
    let shuffle = shuffle_of(&p);
    let ab = AbRecord {
        pick_id: p.pick_id.clone(),
        template_id: p.template_id.clone(),
        champion: p.champion_version_id.clone(),
        challenger: p.challenger_version_id.clone(),
        prompt: p.prompt.clone(),
        champion_answer: p.champion_answer.clone(),
        challenger_answer: p.challenger_answer.clone(),
        shuffle,
        human: Some(shuffle.role_of(label)),
        judge: None,
        origin: "live",
    };
    let recorded = record(&store, &BlobStore::in_home(&ctx.home), &ab)
        .await
        .map_err(|e| CliError::env(anyhow!("record the live A/B pick: {e}")))?;
    let winner = shuffle.role_of(label);
    if ctx.json {
        print_json(
            &json!({"pick_id": ab.pick_id, "winner": winner, "arms_moved": recorded.arms_moved}),
        );
    } else {
        let loser = if winner == Role::Challenger {
            &ab.champion
        } else {
            &ab.challenger
        };
        let winner_id = if winner == Role::Challenger {
            &ab.challenger
        } else {
            &ab.champion
        };
        println!("recorded: {winner_id} ({}) over {loser}", winner.as_str());
    }
    Ok(OK)
}
