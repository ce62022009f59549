//! `skillforge review …`: eval review runs and their items ([`review`]: `create`, `item add`,
//! `status`) and their evaluation by an evaluator profile ([`evaluate`]: `evaluate`). Both use
//! [`load_run`] from here; neither imports the other.

pub mod evaluate;
#[expect(
    clippy::module_inception,
    reason = "the noun's folder holds `review.rs` and `evaluate.rs` (issue 11)"
)]
pub mod review;

use anyhow::{Context as _, anyhow};
use clap::Subcommand;
use skillforge_store::Store;
use skillforge_store::review::{EvalRunRow, get_run};

use crate::context::Context;
use crate::exit::{CliError, CliResult};

/// `skillforge review ...`.
#[derive(Debug, Subcommand)]
pub enum ReviewCommand {
    /// Create a review run of a template version.
    Create(review::CreateArgs),
    /// Manage review items.
    #[command(subcommand)]
    Item(review::ItemCommand),
    /// Mode, feedback and pairwise counts, ranking stability and the advisory next mode.
    Status {
        /// Run id.
        #[arg(long)]
        run: String,
    },
    /// Evaluate every item's options/candidate with the run's evaluator profile (checks, render, judge).
    Evaluate(evaluate::EvaluateArgs),
}

/// Dispatches a `review` subcommand.
pub async fn run(ctx: &Context, cmd: ReviewCommand) -> CliResult {
    match cmd {
        ReviewCommand::Create(args) => review::create(ctx, args).await,
        ReviewCommand::Item(review::ItemCommand::Add(args)) => review::item_add(ctx, args).await,
        ReviewCommand::Status { run } => review::status(ctx, &run).await,
        ReviewCommand::Evaluate(args) => evaluate::run(ctx, args).await,
    }
}

/// Loads run `id`.
///
/// # Errors
/// Exit 2 when there is no such run, 3 when the store fails.
pub async fn load_run(store: &Store, id: &str) -> Result<EvalRunRow, CliError> {
    get_run(store.pool(), id)
        .await
        .context("read review run")?
        .ok_or_else(|| {
            CliError::usage(anyhow!(
                "review run `{id}` not found; create it with `skillforge review create`"
            ))
        })
}
