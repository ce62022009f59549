//! `skillforge export --run ID --output FILE`: the training package for external optimizers
//! (seed "Training Package", "Ranked Exploration Export"; facts §1; S-01, S-03, S-04, S-05).
//!
//! The bytes are [`skillforge_contract::serialize_package`]'s (Go's `json.MarshalIndent(pkg, "",
//! "  ") + "\n"`). Artifacts are referenced by hash; their blobs stay in `<home>/blobs`, the
//! optimizer's `--artifact-root`. A package that the external optimizer would refuse
//! ([`skillforge_contract::validate_training_package`]) is not written. One its data loader would
//! refuse on a real (not `--dry-run`) run, for an item id that is not one path segment (auto-trace
//! ids `checker#owner/repo#N`) or an artifact it cannot read, is written with a warning naming them
//! ([`skillforge_contract::loader_warnings`]; stderr, and `warnings` in `--json`).

use std::path::PathBuf;

use anyhow::{Context as _, anyhow};
use clap::Args;
use serde_json::json;
use skillforge_contract::{
    LoaderWarning, loader_warnings, serialize_package, validate_training_package,
};
use skillforge_store::blobs::BlobStore;
use skillforge_store::review::package::{PackageError, training_package};

use crate::context::Context;
use crate::exit::{CliError, CliResult, OK};
use crate::output::print_json;

/// Arguments of `export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Run id.
    #[arg(long)]
    run: String,
    /// Where to write the package JSON.
    #[arg(long, value_name = "FILE")]
    output: PathBuf,
}

/// Exports run `--run` to `--output`.
pub async fn run(ctx: &Context, args: ExportArgs) -> CliResult {
    let store = ctx.store().await?;
    let package = training_package(store.pool(), &args.run)
        .await
        .map_err(|e| match e {
            PackageError::Store(e) => CliError::env(anyhow!(e).context("read review run")),
            other => CliError::usage(anyhow!(other).context("export training package")),
        })?;
    validate_training_package(&package).map_err(|e| {
        CliError::usage(anyhow!(
            "export training package for run `{}`: the optimizer would refuse it: {e}",
            args.run
        ))
    })?;
    let bytes = serialize_package(&package).context("encode training package")?;
    if let Some(parent) = args.output.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("create directory `{}`", parent.display()))
            .map_err(CliError::env)?;
    }
    std::fs::write(&args.output, &bytes)
        .with_context(|| format!("write training package `{}`", args.output.display()))
        .map_err(CliError::env)?;
    let artifact_root = BlobStore::in_home(&ctx.home).root().display().to_string();
    let warnings = loader_warnings(&package);
    if !warnings.is_empty() {
        eprintln!("{}", warning_text(&package.eval_run.id, &warnings));
    }
    if ctx.json {
        print_json(&json!({
            "run_id": package.eval_run.id,
            "output": args.output.display().to_string(),
            "bytes": bytes.len(),
            "training_mode": package.training_mode,
            "items": package.items.len(),
            "artifacts": package.artifacts.len(),
            "feedback_events": package.feedback_events.len(),
            "ranked_feedback_events": package.ranked_feedback_events.len(),
            "pairwise_preferences": package.pairwise_preferences.len(),
            "has_feedback_context": package.feedback_context.is_some(),
            "has_evaluator_profile": package.evaluator_profile.is_some(),
            "artifact_root": artifact_root,
            "warnings": warnings.iter().map(ToString::to_string).collect::<Vec<_>>(),
        }));
    } else {
        println!(
            "wrote training package for run {} to {} ({} items, {} artifacts, {} feedback events, {} ranked, {} pairwise)",
            package.eval_run.id,
            args.output.display(),
            package.items.len(),
            package.artifacts.len(),
            package.feedback_events.len(),
            package.ranked_feedback_events.len(),
            package.pairwise_preferences.len()
        );
        println!("artifact blobs: {artifact_root} (pass as --artifact-root)");
    }
    Ok(OK)
}

/// The stderr warning for a package the optimizer's data loader refuses: what it means for a real
/// run, then one line per item id or artifact.
fn warning_text(run_id: &str, warnings: &[LoaderWarning]) -> String {
    let mut text = format!(
        "warning: run {run_id}: the external optimizer's data loader refuses this package on a real run \
         (its --dry-run passes); see docs/train.md, \"Exporting for the external optimizer\":"
    );
    for warning in warnings {
        text.push_str(&format!("\n  - {warning}"));
    }
    text
}
