//! The demo's harvest step (issue 6 item 6): the repository's real recent merges — or, when its
//! history has none, its recent mainline commits — are attributed to the reviewed template
//! version and reported as merged, so the hard-verifier and checker legs run on real commits and
//! their rows land in the auto-trace run, which is then exported.
//!
//! The `[skillopt]` switches are the demo's own ([`demo_config`]): they are applied to this
//! harvest only and never written to `config.toml`, so the home's harvester stays as configured
//! (off by default, S-13). The calls are the ones `harvest attribute` and `harvest outcome`
//! make: [`upsert_attribution`], [`harvest`], [`dispatch_legs`], then the leg results are applied
//! by the same ingestion handler `serve` uses.

use std::path::PathBuf;

use anyhow::anyhow;
use serde::Serialize;
use skillforge_contract::{serialize_package, validate_training_package};
use skillforge_engine::QueueBackend;
use skillforge_skillopt::harvest::webhook::parse_outcome;
use skillforge_skillopt::harvest::{
    CHECKER_REVIEWER, FLOOR_REVIEWER, HarvestConfig, HarvestEvent, VERIFIER_REVIEWER,
    dispatch_legs, harvest, run_id,
};
use skillforge_stage::StageJobs;
use skillforge_store::Store;
use skillforge_store::harvest::{Attribution, upsert_attribution};
use skillforge_store::review::package::training_package;
use skillforge_store::templates::VersionRow;

use super::history::{self, Commit, Repo, Selection};
use crate::exit::CliError;

/// The demo's hard verifier: cheap and real — the merged head has a readable commit and tracked
/// files — so the demo stays fast on any repository.
pub const HARD_VERIFIER_COMMAND: &str =
    r#"git log -1 --format=%H >/dev/null && test -n "$(git ls-files | head -1)""#;
/// Job family the demo attributes changes as (only implement changes are harvested, S-16).
const IMPLEMENT_KIND: &str = "implement";

/// The `[skillopt]` switches of the demo's harvest: the harvester, the hard verifier with
/// [`HARD_VERIFIER_COMMAND`], and the deterministic checkers (`diff_size`) on; the cross-family
/// review off (it needs a model runtime).
pub fn demo_config() -> HarvestConfig {
    HarvestConfig {
        auto_trace_enabled: true,
        hard_verifiers_enabled: true,
        hard_verifier_commands: vec![HARD_VERIFIER_COMMAND.to_owned()],
        deterministic_checkers_enabled: true,
        ..HarvestConfig::default()
    }
}

/// The same switches as `config.toml` lines, written next to the demo's files for reference.
pub fn demo_config_toml() -> String {
    format!(
        "# The [skillopt] switches `skillforge demo` applied to its harvest step only (config.toml is not changed).\n\
         [skillopt]\nauto_trace_enabled = true\nhard_verifiers_enabled = true\nhard_verifier_commands = [{}]\n\
         deterministic_checkers_enabled = true\n",
        toml_string(HARD_VERIFIER_COMMAND)
    )
}

fn toml_string(s: &str) -> String {
    format!("'{s}'")
}

/// One harvested change.
#[derive(Debug, Clone, Serialize)]
pub struct Change {
    /// `owner/repo#N` item id of its floor row.
    pub item_id: String,
    /// Merged head.
    pub sha: String,
    /// Subject.
    pub subject: String,
}

/// What the harvest step did.
#[derive(Debug, Clone, Serialize)]
pub struct HarvestSummary {
    /// `merges` or `commits` (the history had no merges).
    pub source: &'static str,
    /// The auto-trace run.
    pub run_id: String,
    /// The changes attributed and reported.
    pub changes: Vec<Change>,
    /// Leg jobs run.
    pub n_leg_jobs: usize,
    /// Rows in the exported run, by reviewer sentinel.
    pub floor_rows: usize,
    /// Hard-verifier rows.
    pub hard_verifier_rows: usize,
    /// Checker rows.
    pub checker_rows: usize,
    /// The exported training package of the auto-trace run (`None`: nothing to harvest).
    pub export: Option<PathBuf>,
    /// Why parts wrote nothing.
    pub skipped: Vec<String>,
}

/// Where and with what the harvest step runs.
pub struct HarvestStep<'a> {
    /// The domain store.
    pub store: &'a Store,
    /// The job queue.
    pub queue: &'a std::sync::Arc<dyn QueueBackend>,
    /// Waits for the leg jobs.
    pub jobs: &'a dyn StageJobs,
    /// The repository.
    pub repo: &'a Repo,
    /// The template version changes are attributed to.
    pub version: &'a VersionRow,
    /// How many merges (or commits) to harvest.
    pub n_changes: usize,
    /// Where the auto-trace export is written.
    pub export: PathBuf,
    /// Where the step says what it waits for.
    pub progress: &'a dyn skillforge_stage::Progress,
}

/// The merges to harvest, else mainline commits; with which of the two it is.
///
/// # Errors
/// Exit 3 when git fails.
pub fn changes(repo: &Repo, n: usize) -> Result<(&'static str, Vec<Commit>), CliError> {
    let merges = history::recent(repo, n, Selection::Merges)?;
    if !merges.is_empty() {
        return Ok(("merges", merges));
    }
    Ok((
        "commits",
        history::recent(repo, n, Selection::MainlineCommits)?,
    ))
}

/// Runs the harvest step: attribute, report merged, run the legs, apply their rows, export.
///
/// # Errors
/// Exit 3 for git, store or queue failures; exit 1 when the export is not a valid package.
pub async fn run(step: &HarvestStep<'_>) -> Result<HarvestSummary, CliError> {
    let config = demo_config();
    let (source, commits) = changes(step.repo, step.n_changes)?;
    let mut summary = HarvestSummary {
        source,
        run_id: run_id(&step.version.id),
        changes: Vec::new(),
        n_leg_jobs: 0,
        floor_rows: 0,
        hard_verifier_rows: 0,
        checker_rows: 0,
        export: None,
        skipped: Vec::new(),
    };
    let mut job_ids = Vec::new();
    for commit in &commits {
        let pr = history::change_number(step.repo, commit)?;
        let attribution = Attribution {
            repo: step.repo.slug.clone(),
            pr,
            template_id: step.version.template_id.clone(),
            template_version_id: step.version.id.clone(),
            resolved_commit: step.version.resolved_commit.clone(),
            kind: IMPLEMENT_KIND.to_owned(),
            checkout: step.repo.root.display().to_string(),
            base: commit.parents.first().cloned().unwrap_or_default(),
            title: commit.subject.clone(),
            ..Attribution::default()
        };
        let mut tx = skillforge_store::templates::begin_write(step.store).await?;
        upsert_attribution(&mut tx, &attribution).await?;
        tx.commit().await?;
        // Nothing local says whether external CI passed: an (unconfirmed) empty gate, `--ci none`.
        let outcome =
            parse_outcome("merged", Some("none"), None).map_err(|m| CliError::usage(anyhow!(m)))?;
        let event = HarvestEvent::Outcome {
            repo: step.repo.slug.clone(),
            pr,
            outcome,
            head: Some(commit.sha.clone()),
            ci_shas: vec![commit.sha.clone()],
            body: Some(commit.body.clone()),
        };
        let report = harvest(step.store, &config, &event, &[])
            .await
            .map_err(|e| CliError::env(anyhow!(e).context("harvest outcome")))?;
        summary.skipped.extend(report.skipped.iter().cloned());
        let legs = dispatch_legs(step.queue.as_ref(), step.store, &report.legs)
            .await
            .map_err(|e| CliError::env(anyhow!(e)))?;
        job_ids.extend(legs.into_iter().map(|(_, id)| id));
        summary.changes.push(Change {
            item_id: format!("{}#{pr}", step.repo.slug),
            sha: commit.sha.clone(),
            subject: commit.subject.clone(),
        });
    }
    summary.n_leg_jobs = job_ids.len();
    if !job_ids.is_empty() {
        step.progress.step(&format!(
            "waiting for {} leg jobs: each change's verifier clones the repository and runs its \
             command, the checkers measure its diff (a few seconds)",
            job_ids.len()
        ));
        // The port's wait returns once the legs' rows are applied (on either backend).
        step.jobs
            .wait(&job_ids, "harvest legs")
            .await
            .map_err(|e| CliError::env(anyhow!(e)))?;
    }
    if summary.changes.is_empty() {
        summary.skipped.push("the history has no merge and no commit with a parent (a shallow clone?); nothing harvested".into());
        return Ok(summary);
    }
    let package = training_package(step.store.pool(), &summary.run_id)
        .await
        .map_err(|e| CliError::env(anyhow!("export auto-trace run `{}`: {e}", summary.run_id)))?;
    validate_training_package(&package).map_err(|e| CliError {
        code: crate::exit::CHECK_FAILED,
        error: anyhow!(
            "export auto-trace run `{}`: the optimizer would refuse it: {e}",
            summary.run_id
        ),
    })?;
    let bytes = serialize_package(&package)
        .map_err(|e| CliError::env(anyhow!("encode auto-trace package: {e}")))?;
    if let Some(parent) = step.export.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| CliError::env(anyhow!("create `{}`: {e}", parent.display())))?;
    }
    std::fs::write(&step.export, bytes.as_bytes())
        .map_err(|e| CliError::env(anyhow!("write `{}`: {e}", step.export.display())))?;
    let count = |reviewer: &str| {
        package
            .feedback_events
            .iter()
            .filter(|e| e.reviewer == reviewer)
            .count()
    };
    summary.floor_rows = count(FLOOR_REVIEWER);
    summary.hard_verifier_rows = count(VERIFIER_REVIEWER);
    summary.checker_rows = count(CHECKER_REVIEWER);
    summary.export = Some(step.export.clone());
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_demo_config_turns_on_the_harvester_hard_verifier_and_checkers_only() {
        let config = demo_config();
        assert!(config.is_enabled() && config.checkers_leg() && !config.review_leg());
        assert_eq!(
            config.hard_verifier_commands(),
            Some(vec![HARD_VERIFIER_COMMAND.to_owned()])
        );
        // The reference file parses as the same switches.
        let parsed: toml::Value = toml::from_str(&demo_config_toml()).unwrap();
        assert_eq!(
            parsed["skillopt"]["hard_verifier_commands"][0].as_str(),
            Some(HARD_VERIFIER_COMMAND)
        );
    }
}
