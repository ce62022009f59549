//! `skillforge jobs prune [--older-than D] [--dry-run]`, and how `jobs show` / `jobs submit`
//! report a job that was pruned under the queue's retention (issue 19).

use anyhow::anyhow;
use clap::Args;
use serde_json::{Value, json};
use skillforge_engine::QueueBackend;
use skillforge_engine::retention::{Tombstone, parse_age, prune_pass, prune_preview, rules};

use crate::context::Context;
use crate::exit::{CliError, CliResult, OK};
use crate::output::{print_json, rfc3339_ms};

/// Arguments of `jobs prune`.
#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Prune finished jobs (succeeded, failed, dead, cancelled, result applied) that finished
    /// longer ago than this (`7d`, `36h`, `30m`, `0s`) instead of `[queue] keep_succeeded` /
    /// `keep_failed`.
    #[arg(long = "older-than", value_name = "AGE")]
    older_than: Option<String>,
    /// Count what would be pruned; remove nothing.
    #[arg(long = "dry-run")]
    dry_run: bool,
}

/// Prunes (or, with `--dry-run`, counts) finished jobs past their retention, in bounded batches.
pub async fn prune(ctx: &Context, args: PruneArgs) -> CliResult {
    let older_than = args
        .older_than
        .as_deref()
        .map(parse_age)
        .transpose()
        .map_err(|e| CliError::usage(anyhow!("--older-than {e}")))?;
    let retention = ctx.config.queue.retention()?;
    let backend = ctx.queue().await?;
    let now = backend.now_ms().await?;
    let rules = rules(&retention, older_than, now);
    let (jobs, tombstones) = if args.dry_run {
        prune_preview(backend.as_ref(), &rules).await?
    } else {
        let report = prune_pass(backend.as_ref(), &rules, usize::MAX).await?;
        (report.jobs, report.tombstones)
    };
    if ctx.json {
        print_json(&json!({"dry_run": args.dry_run, "jobs": jobs, "tombstones": tombstones}));
    } else if args.dry_run {
        println!(
            "would prune {jobs} finished job(s) and {tombstones} expired tombstone(s) (dry run: nothing removed)"
        );
    } else {
        println!("pruned {jobs} finished job(s) and {tombstones} expired tombstone(s)");
    }
    Ok(OK)
}

/// One line saying `t`'s job was pruned.
pub fn pruned_line(t: &Tombstone) -> String {
    format!(
        "job {} was pruned at {} under the queue's retention ([queue] keep_succeeded / keep_failed): it finished {} at {}",
        t.job_id,
        rfc3339_ms(t.pruned_at_ms),
        t.state,
        rfc3339_ms(t.finished_at_ms)
    )
}

/// The JSON shape of a pruned job (`jobs show --json`).
pub fn pruned_json(t: &Tombstone) -> Value {
    json!({
        "id": t.job_id,
        "state": t.state,
        "pruned": true,
        "finished_at": rfc3339_ms(t.finished_at_ms),
        "pruned_at": rfc3339_ms(t.pruned_at_ms),
        "idempotency_key": t.idempotency_key,
    })
}

/// The tombstone of `job_id` when the queue no longer has the job but pruned it.
pub async fn pruned(
    backend: &dyn QueueBackend,
    job_id: &str,
) -> Result<Option<Tombstone>, CliError> {
    if backend.get(job_id).await?.is_some() {
        return Ok(None);
    }
    Ok(backend.tombstone(job_id).await?)
}
