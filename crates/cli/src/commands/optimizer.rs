//! `skillforge optimizer distill`: the built-in reference optimizer
//! ([`skillforge_skillopt::distill`]) behind the external optimizer's command line (facts §9:
//! `--training-package --artifact-root --out-root --candidate-output [--artifact-dir] [--dry-run]`),
//! so a train backend can run either one. The external optimizer's model, backend, budget and
//! evaluator flags are accepted and ignored: distill is deterministic and uses no model.
//!
//! Exit codes: 0 when a candidate or a no-candidate package was written; 2 when the training
//! package is unreadable or invalid (nothing is written); 3 when an output cannot be written.
//! One summary line goes to stderr; with `--json`, stdout gets
//! `{candidate_output, promotable, guidance_lines, no_candidate_reason}`.

use std::path::PathBuf;

use anyhow::anyhow;
use clap::{Args, Subcommand};
use serde_json::json;
use skillforge_skillopt::distill::{DistillConfig, DistillOutput, distill, load_training_package};

use crate::context::Context;
use crate::exit::{CliError, CliResult, OK};
use crate::output::print_json;

/// `optimizer` subcommands.
#[derive(Debug, Subcommand)]
pub enum OptimizerCommand {
    /// Deterministic reference optimizer: turn review evidence into a maintained guidance section
    /// and write a candidate package (or a no-candidate package) like the external optimizer.
    ///
    /// The external optimizer's other flags (--num-epochs, --batch-size, --seed, --optimizer-model,
    /// --target-model, --optimizer-backend, --target-backend, --evaluator-id, --gate-metric,
    /// --skill-update-mode, the retry budgets, --eval-test, ...) are accepted and ignored.
    Distill(DistillArgs),
}

/// Arguments of `optimizer distill` (the external optimizer's `optimize` flags).
#[derive(Debug, Args)]
pub struct DistillArgs {
    /// Training package JSON (`skillforge export`).
    #[arg(long, value_name = "FILE")]
    training_package: PathBuf,
    /// Artifact blob root (`<root>/sha256/<hex[:2]>/<hex>`): the options of the ranked reviews,
    /// read for the held-out replay that scores the candidate.
    #[arg(long, value_name = "DIR")]
    artifact_root: PathBuf,
    /// Directory for run output (`initial_skill.md`, `candidate_skill.md`, `guidance.json`).
    #[arg(long, value_name = "DIR")]
    out_root: PathBuf,
    /// Where to write the candidate package JSON.
    #[arg(long, value_name = "FILE")]
    candidate_output: PathBuf,
    /// Directory for candidate artifact files; default `<out-root>/artifacts`.
    #[arg(long, value_name = "DIR")]
    artifact_dir: Option<PathBuf>,
    /// Validate and write a no-candidate package with the template unchanged.
    #[arg(long)]
    dry_run: bool,
    /// Most guidance lines in the maintained section.
    #[arg(long, default_value_t = skillforge_skillopt::distill::DEFAULT_MAX_GUIDANCE_LINES)]
    max_guidance_lines: usize,
    #[command(flatten)]
    ignored: Box<IgnoredFlags>,
}

/// Flags of the external optimizer that have no meaning for a deterministic optimizer.
#[derive(Debug, Args)]
struct IgnoredFlags {
    #[arg(long, value_name = "N", hide = true)]
    num_epochs: Option<String>,
    #[arg(long, value_name = "N", hide = true)]
    batch_size: Option<String>,
    #[arg(long, value_name = "N", hide = true)]
    optimizer_views: Option<String>,
    #[arg(long, value_name = "V", hide = true)]
    retry_optimizer_views: Option<String>,
    #[arg(long, value_name = "N", hide = true)]
    seed: Option<String>,
    #[arg(long, value_name = "NAME", hide = true)]
    optimizer_model: Option<String>,
    #[arg(long, value_name = "NAME", hide = true)]
    target_model: Option<String>,
    #[arg(long, value_name = "NAME", hide = true)]
    optimizer_backend: Option<String>,
    #[arg(long, value_name = "NAME", hide = true)]
    target_backend: Option<String>,
    #[arg(long, value_name = "ID", hide = true)]
    evaluator_id: Option<String>,
    #[arg(long, value_name = "NAME", hide = true)]
    evaluator_model: Option<String>,
    #[arg(long, value_name = "NAME", hide = true)]
    evaluator_backend: Option<String>,
    #[arg(long, value_name = "METRIC", hide = true)]
    gate_metric: Option<String>,
    #[arg(long, value_name = "EFFORT", hide = true)]
    reasoning_effort: Option<String>,
    #[arg(long, value_name = "MODE", hide = true)]
    skill_update_mode: Option<String>,
    #[arg(long, value_name = "N", hide = true)]
    noop_retry_budget: Option<String>,
    #[arg(long, value_name = "N", hide = true)]
    gate_reject_retry_budget: Option<String>,
    #[arg(long, value_name = "N", hide = true)]
    wrong_artifact_retry_budget: Option<String>,
    #[arg(long, value_name = "GAP", hide = true)]
    gate_reject_retry_close_gap: Option<String>,
    #[arg(long, value_name = "MODE", hide = true)]
    feedback_direct_mode: Option<String>,
    #[arg(long, value_name = "N", hide = true)]
    target_artifact_retry_budget: Option<String>,
    #[arg(long, value_name = "N", hide = true)]
    hard_failure_retry_budget: Option<String>,
    #[arg(long, value_name = "N", hide = true)]
    evaluator_schema_retry_budget: Option<String>,
    #[arg(long, hide = true)]
    eval_test: bool,
}

/// Runs an `optimizer` subcommand.
pub async fn run(ctx: &Context, cmd: OptimizerCommand) -> CliResult {
    match cmd {
        OptimizerCommand::Distill(args) => run_distill(ctx, args),
    }
}

fn run_distill(ctx: &Context, args: DistillArgs) -> CliResult {
    let package =
        load_training_package(&args.training_package).map_err(|e| CliError::usage(anyhow!(e)))?;
    // Like the external optimizer, the root is only needed to read blobs: a package without
    // artifacts (an auto-trace run) distills even where no blob was ever stored.
    if !package.artifacts.is_empty() && !args.artifact_root.is_dir() {
        return Err(CliError::usage(anyhow!(
            "--artifact-root `{}`: no such directory (the blob store, e.g. $SKILLFORGE_HOME/blobs)",
            args.artifact_root.display()
        )));
    }
    // The external optimizer treats an empty `--artifact-dir` as unset.
    let mut out = DistillOutput::new(&args.out_root, &args.candidate_output);
    if let Some(dir) = args.artifact_dir.filter(|d| !d.as_os_str().is_empty()) {
        out.artifact_dir = dir;
    }
    let config = DistillConfig {
        dry_run: args.dry_run,
        max_guidance_lines: args.max_guidance_lines,
    };
    let report = distill(&package, &args.artifact_root, &out, &config).map_err(|e| {
        if e.is_invalid_input() {
            CliError::usage(
                anyhow!(e).context(format!("distill `{}`", args.training_package.display())),
            )
        } else {
            CliError::env(anyhow!(e))
        }
    })?;
    match &report.no_candidate_reason {
        Some(reason) => {
            eprintln!(
                "wrote no-candidate package: {} (no_candidate_reason: {reason}; {} guidance line(s))",
                report.candidate_output.display(),
                report.guidance_lines
            );
            if let Some(hint) = &report.no_candidate_hint {
                eprintln!("{hint}");
            }
        }
        None => {
            eprintln!(
                "wrote candidate package: {} ({} guidance line(s) for {} from {})",
                report.candidate_output.display(),
                report.guidance_lines,
                package.template.id,
                package.template.version_id
            );
            eprintln!(
                "next: skillforge import --file {} --artifact-dir {}",
                report.candidate_output.display(),
                out.artifact_dir.display()
            );
        }
    }
    if ctx.json {
        print_json(&json!({
            "candidate_output": report.candidate_output.display().to_string(),
            "promotable": report.promotable,
            "guidance_lines": report.guidance_lines,
            "no_candidate_reason": report.no_candidate_reason,
            "no_candidate_hint": report.no_candidate_hint,
        }));
    }
    Ok(OK)
}
