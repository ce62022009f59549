//! One distill run: [`plan`] (pure: evidence → guidance → revised content or a no-candidate
//! reason) and [`distill`] (writes the out-root files, the artifacts and the candidate package).
//! The candidate package follows facts §2 and the external optimizer's dry-run layout (facts §9):
//! artifacts `<run_id>/candidate-diff` and `<run_id>/eval-report`, `summary.metadata.artifact_ids`,
//! and `promotable: false` + `no_candidate_reason` when there is nothing to propose (S-88).

use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Value, json};
use skillforge_contract::{
    CANDIDATE_PACKAGE_KIND, CONTRACT_VERSION, CandidateArtifactRef, CandidatePackage,
    CandidateSummary, CandidateTemplate, PackageValidationError, TemplateError, TrainingPackage,
    content_hash, driver_for_media_type, parse_template, read_training_package, serialize_package,
};
use skillforge_stage::fs::{WriteError, write_atomic};

use super::evidence::{SourceCounts, gather_evidence};
use super::guidance::{GuidanceLine, Support, rank_guidance};
use super::hint::no_actionable_hint;
use super::prior::{merge_guidance, prior_guidance};
use super::section::{apply_section, render_section, section_runs};
use super::tier::EvidenceTier;

/// `optimizer` name in the eval report and summary metadata.
pub const OPTIMIZER_NAME: &str = "skillforge-distill";
/// No evidence yielded a guidance line.
pub const NO_ACTIONABLE_FEEDBACK: &str = "no_actionable_feedback";
/// `--dry-run`, or the revised content equals the base (the external optimizer's dry-run reason).
pub const CANDIDATE_CONTENT_UNCHANGED: &str = "candidate_content_unchanged";
/// The `summary.metadata` key saying why a candidate carries no `summary.score` (issue 37 item 6):
/// the guardrails then never promote it directly, and let its canary outcomes decide it.
pub const SCORE_UNAVAILABLE_KEY: &str = "score_unavailable";
/// Why a distill candidate has no score: distill measures nothing, and a made-up number would be
/// read by the guardrails as evidence.
pub const SCORE_UNAVAILABLE: &str = "distill turns ranked reviews into guidance and measures nothing: no held-out replay or replay-gate corpus scored this candidate";
/// Default cap on guidance lines in the section.
pub const DEFAULT_MAX_GUIDANCE_LINES: usize = 24;

/// Options of a run. `Default` = a real run with [`DEFAULT_MAX_GUIDANCE_LINES`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DistillConfig {
    /// `--dry-run`: validate and write everything, but propose the template unchanged
    /// (`no_candidate_reason: candidate_content_unchanged`).
    pub dry_run: bool,
    /// Most guidance lines written into the section.
    pub max_guidance_lines: usize,
}

impl Default for DistillConfig {
    fn default() -> Self {
        Self {
            dry_run: false,
            max_guidance_lines: DEFAULT_MAX_GUIDANCE_LINES,
        }
    }
}

/// Where a run writes (the external optimizer's `--out-root`, `--artifact-dir`,
/// `--candidate-output`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DistillOutput {
    /// `--out-root`: `initial_skill.md`, `candidate_skill.md`, `guidance.json`.
    pub out_root: PathBuf,
    /// `--artifact-dir`: artifact files; candidate artifact paths are relative to it.
    pub artifact_dir: PathBuf,
    /// `--candidate-output`: the candidate package JSON, written last.
    pub candidate_output: PathBuf,
}

impl DistillOutput {
    /// Paths with the default artifact dir `<out_root>/artifacts`.
    pub fn new(out_root: impl Into<PathBuf>, candidate_output: impl Into<PathBuf>) -> Self {
        let out_root = out_root.into();
        Self {
            artifact_dir: out_root.join("artifacts"),
            out_root,
            candidate_output: candidate_output.into(),
        }
    }
}

/// Why a run could not produce a package. [`DistillError::is_invalid_input`] separates bad input
/// (exit 2) from environment failures.
#[derive(Debug, thiserror::Error)]
pub enum DistillError {
    /// The package file cannot be read.
    #[error("read training package `{path}`: {message}")]
    ReadPackage {
        /// The file.
        path: PathBuf,
        /// OS error text.
        message: String,
    },
    /// The package breaks a contract rule.
    #[error("invalid training package `{path}`: {source}")]
    InvalidPackage {
        /// The file.
        path: PathBuf,
        /// The broken rule.
        source: PackageValidationError,
    },
    /// The package's template content is not a valid agent template.
    #[error(
        "template {version_id} in the training package is not a valid agent template: {source}"
    )]
    InvalidTemplate {
        /// `template.version_id`.
        version_id: String,
        /// What is wrong.
        source: TemplateError,
    },
    /// An output file cannot be written (``write `<path>`: <step>: <OS error>``).
    #[error(transparent)]
    Write(#[from] WriteError),
    /// JSON encoding failed.
    #[error("encode {what}: {message}")]
    Encode {
        /// What was encoded.
        what: &'static str,
        /// serde error text.
        message: String,
    },
}

impl DistillError {
    /// Whether the input was at fault (unreadable or invalid package, invalid template).
    pub fn is_invalid_input(&self) -> bool {
        matches!(
            self,
            DistillError::ReadPackage { .. }
                | DistillError::InvalidPackage { .. }
                | DistillError::InvalidTemplate { .. }
        )
    }
}

/// Reads and validates a training package file with the external optimizer's rules
/// ([`read_training_package`]: lists a Go producer wrote as `null` read as empty).
///
/// # Errors
/// [`DistillError::ReadPackage`], [`DistillError::InvalidPackage`] (both name the file).
pub fn load_training_package(path: &Path) -> Result<TrainingPackage, DistillError> {
    let text = fs::read_to_string(path).map_err(|e| DistillError::ReadPackage {
        path: path.to_owned(),
        message: e.to_string(),
    })?;
    read_training_package(&text).map_err(|source| DistillError::InvalidPackage {
        path: path.to_owned(),
        source,
    })
}

/// Evidence totals of a run, as written into the report and `summary.metadata.evidence`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct EvidenceCounts {
    /// Rows read per source.
    #[serde(flatten)]
    pub sources: SourceCounts,
    /// Evidence items found (before deduplication).
    pub evidence_items: usize,
    /// Evidence items per tier.
    pub by_tier: Support,
}

/// What [`plan`] decided.
#[derive(Debug, Clone, PartialEq)]
pub struct DistillPlan {
    /// The base content (`template.content`).
    pub base_content: String,
    /// Proposed content; equal to `base_content` when there is no candidate.
    pub content: String,
    /// Ranked guidance lines (empty when nothing is actionable).
    pub guidance: Vec<GuidanceLine>,
    /// Evidence totals.
    pub counts: EvidenceCounts,
    /// [`NO_ACTIONABLE_FEEDBACK`] or [`CANDIDATE_CONTENT_UNCHANGED`]; `None` = a real candidate.
    pub no_candidate_reason: Option<&'static str>,
    /// With [`NO_ACTIONABLE_FEEDBACK`]: which `feedback.yml` fields to fill and where
    /// ([`no_actionable_hint`]); written as `no_candidate_hint` beside the reason.
    pub no_candidate_hint: Option<String>,
}

/// Plans a run without writing: gathers and ranks evidence, renders the guidance section and
/// applies it to the template body. No evidence → [`NO_ACTIONABLE_FEEDBACK`] with the content
/// unchanged; `dry_run`, or a revision equal to the base → [`CANDIDATE_CONTENT_UNCHANGED`] with
/// the content unchanged.
///
/// # Errors
/// [`DistillError::InvalidTemplate`] when `template.content` does not parse.
pub fn plan(
    package: &TrainingPackage,
    config: &DistillConfig,
) -> Result<DistillPlan, DistillError> {
    let base = &package.template.content;
    parse_template(base).map_err(|source| DistillError::InvalidTemplate {
        version_id: package.template.version_id.clone(),
        source,
    })?;
    let gathered = gather_evidence(package);
    let mut by_tier = Support::default();
    for item in &gathered.items {
        by_tier.add(item.tier);
    }
    let counts = EvidenceCounts {
        sources: gathered.counts,
        evidence_items: gathered.items.len(),
        by_tier,
    };
    // Issue 37 item 10: this run's evidence merged into the section's (earlier runs'), never in
    // place of it; with no new evidence there is nothing to propose.
    let fresh = rank_guidance(&gathered.items, usize::MAX);
    let has_fresh = !fresh.is_empty();
    let run = package.eval_run.id.trim().to_owned();
    let mut runs = section_runs(base);
    let already_merged = !run.is_empty() && runs.contains(&run);
    let guidance = merge_guidance(
        prior_guidance(base),
        fresh,
        config.max_guidance_lines,
        already_merged,
    );
    if !already_merged && !run.is_empty() {
        runs.push(run);
    }
    let unchanged = |reason| DistillPlan {
        base_content: base.clone(),
        content: base.clone(),
        guidance: guidance.clone(),
        counts,
        no_candidate_reason: Some(reason),
        no_candidate_hint: None,
    };
    if !has_fresh {
        return Ok(DistillPlan {
            guidance: Vec::new(),
            no_candidate_hint: Some(no_actionable_hint(package)),
            ..unchanged(NO_ACTIONABLE_FEEDBACK)
        });
    }
    if config.dry_run {
        return Ok(unchanged(CANDIDATE_CONTENT_UNCHANGED));
    }
    let revised = apply_section(base, &render_section(&guidance, &runs)).map_err(|source| {
        DistillError::InvalidTemplate {
            version_id: package.template.version_id.clone(),
            source,
        }
    })?;
    if revised == *base {
        return Ok(unchanged(CANDIDATE_CONTENT_UNCHANGED));
    }
    Ok(DistillPlan {
        base_content: base.clone(),
        content: revised,
        guidance,
        counts,
        no_candidate_reason: None,
        no_candidate_hint: None,
    })
}

/// What a run wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct DistillReport {
    /// The candidate package file.
    pub candidate_output: PathBuf,
    /// `true` for a real candidate; `false` for a no-candidate package.
    pub promotable: bool,
    /// Guidance lines in the proposed section (also reported for dry runs).
    pub guidance_lines: usize,
    /// Set exactly when `promotable` is false.
    pub no_candidate_reason: Option<String>,
    /// What to fill in to get a candidate (with [`NO_ACTIONABLE_FEEDBACK`] only).
    pub no_candidate_hint: Option<String>,
    /// The package as written.
    pub package: CandidatePackage,
}

/// Runs the reference optimizer on a validated package: [`plan`], then writes
/// `<out_root>/initial_skill.md`, `<out_root>/candidate_skill.md`, `<out_root>/guidance.json`, the
/// artifacts `<artifact_dir>/<run>/candidate.diff` (unified diff base → candidate, `text/x-diff`)
/// and `<artifact_dir>/<run>/eval-report.json`, and last the candidate package at
/// `out.candidate_output` (through a temp file and rename, so a present file is complete).
/// Deterministic: the same package and config write the same bytes.
///
/// `artifact_root` (the blob store, `<root>/sha256/<hex[:2]>/<hex>`) is read for the held-out
/// replay's option texts ([`super::heldout`]): its score becomes `summary.score` with
/// `summary.metadata.score_evidence`, or `summary.metadata.score_unavailable` says why there is none.
///
/// # Errors
/// [`DistillError::InvalidTemplate`] before anything is written; [`DistillError::Write`] /
/// [`DistillError::Encode`] when an output cannot be written.
pub fn distill(
    package: &TrainingPackage,
    artifact_root: &Path,
    out: &DistillOutput,
    config: &DistillConfig,
) -> Result<DistillReport, DistillError> {
    let plan = plan(package, config)?;
    let run_id = if package.eval_run.id.trim().is_empty() {
        "run"
    } else {
        package.eval_run.id.trim()
    };
    let run_dir = path_component(run_id);
    let diff_id = format!("{run_id}/candidate-diff");
    let report_id = format!("{run_id}/eval-report");
    let diff_path = format!("{run_dir}/candidate.diff");
    let report_path = format!("{run_dir}/eval-report.json");
    let artifact_ids = vec![diff_id.clone(), report_id.clone()];

    let diff = unified_diff(&package.template.id, &plan.base_content, &plan.content);
    let promotable = plan.no_candidate_reason.is_none();
    let guidance_json: Vec<Value> = plan.guidance.iter().map(guidance_entry).collect();
    let mut summary_metadata = json!({
        "optimizer": OPTIMIZER_NAME,
        "promotable": promotable,
        "dry_run": config.dry_run,
        "guidance_lines": plan.guidance.len(),
        "evidence": plan.counts,
        "artifact_ids": artifact_ids,
    });
    let mut eval_report = json!({
        "optimizer": OPTIMIZER_NAME,
        "run_id": run_id,
        "template_id": package.template.id,
        "base_version_id": package.template.version_id,
        "training_mode": package.training_mode,
        "promotable": promotable,
        "dry_run": config.dry_run,
        "base_content_hash": content_hash(&plan.base_content),
        "candidate_content_hash": content_hash(&plan.content),
        "guidance_lines": plan.guidance.len(),
        "evidence": plan.counts,
        "guidance": guidance_json,
    });
    // Issue 37 item 6: the rankings it learned from, replayed held out, are the candidate's
    // evidence; without a measurement the package says why, never a made-up number.
    let mut score = None;
    if promotable {
        let held_out = super::heldout::held_out_replay(package, artifact_root);
        eval_report["held_out_replay"] = json!(held_out);
        match held_out.score() {
            Ok(s) => {
                score = Some(s);
                summary_metadata["score_evidence"] = json!(held_out.evidence());
            }
            Err(why) => {
                summary_metadata[SCORE_UNAVAILABLE_KEY] =
                    json!(format!("{SCORE_UNAVAILABLE} (held-out replay: {why})"));
            }
        }
    }
    if let Some(reason) = plan.no_candidate_reason {
        summary_metadata["no_candidate_reason"] = json!(reason);
        eval_report["no_candidate_reason"] = json!(reason);
    }
    if let Some(hint) = &plan.no_candidate_hint {
        summary_metadata["no_candidate_hint"] = json!(hint);
        eval_report["no_candidate_hint"] = json!(hint);
    }
    let report_text = pretty(&eval_report, "eval report")?;

    write_atomic(
        &out.out_root.join("initial_skill.md"),
        plan.base_content.as_bytes(),
    )?;
    write_atomic(
        &out.out_root.join("candidate_skill.md"),
        plan.content.as_bytes(),
    )?;
    write_atomic(
        &out.out_root.join("guidance.json"),
        pretty(&plan.guidance, "guidance")?.as_bytes(),
    )?;
    let diff_ref = write_artifact(
        &out.artifact_dir,
        &diff_id,
        &diff_path,
        "text/x-diff",
        diff.as_bytes(),
    )?;
    let report_ref = write_artifact(
        &out.artifact_dir,
        &report_id,
        &report_path,
        "application/json",
        report_text.as_bytes(),
    )?;

    let preference_summary = format!(
        "{} guidance line(s) from {} evidence item(s): {}",
        plan.guidance.len(),
        plan.counts.evidence_items,
        EvidenceTier::ALL
            .iter()
            .map(|t| format!(
                "{} {}",
                t.as_str().replace('_', " "),
                plan.counts.by_tier.of(*t)
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let metadata = package.template.metadata.clone();
    let candidate = CandidatePackage {
        kind: CANDIDATE_PACKAGE_KIND.to_owned(),
        contract_version: CONTRACT_VERSION,
        template_id: package.template.id.clone(),
        base_version_id: package.template.version_id.clone(),
        candidate: CandidateTemplate {
            content: plan.content.clone(),
            metadata,
        },
        eval_report: Some(eval_report),
        summary: CandidateSummary {
            diff_artifact_id: diff_id,
            preference_summary,
            metadata: Some(summary_metadata),
            score,
            ..CandidateSummary::default()
        },
        artifacts: vec![diff_ref, report_ref],
    };
    let bytes = serialize_package(&candidate).map_err(|e| DistillError::Encode {
        what: "candidate package",
        message: e.to_string(),
    })?;
    write_atomic(&out.candidate_output, bytes.as_bytes())?;
    Ok(DistillReport {
        candidate_output: out.candidate_output.clone(),
        promotable,
        guidance_lines: plan.guidance.len(),
        no_candidate_reason: plan.no_candidate_reason.map(str::to_owned),
        no_candidate_hint: plan.no_candidate_hint,
        package: candidate,
    })
}

fn guidance_entry(line: &GuidanceLine) -> Value {
    json!({
        "kind": line.kind,
        "text": line.text,
        "line": line.render(),
        "support": line.support.total(),
        "weight": line.support.weight(),
        "tiers": line.support,
        "origins": line.origins,
    })
}

/// Unified diff (3 lines of context) with `a/<id>.md` / `b/<id>.md` headers; `""` when equal.
fn unified_diff(template_id: &str, old: &str, new: &str) -> String {
    if old == new {
        return String::new();
    }
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(
            &format!("a/{template_id}.md"),
            &format!("b/{template_id}.md"),
        )
        .to_string()
}

/// A run id as one safe path component: characters other than ASCII alphanumerics and `._-@`
/// become `_`; `.`/`..` become `_`.
fn path_component(run_id: &str) -> String {
    let s: String = run_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s == "." || s == ".." {
        "_".to_owned()
    } else {
        s
    }
}

fn pretty<T: Serialize + ?Sized>(value: &T, what: &'static str) -> Result<String, DistillError> {
    serialize_package(value).map_err(|e| DistillError::Encode {
        what,
        message: e.to_string(),
    })
}

fn write_artifact(
    dir: &Path,
    id: &str,
    rel_path: &str,
    media_type: &str,
    bytes: &[u8],
) -> Result<CandidateArtifactRef, DistillError> {
    write_atomic(&dir.join(rel_path), bytes)?;
    Ok(CandidateArtifactRef {
        id: id.to_owned(),
        path: rel_path.to_owned(),
        hash: content_hash(bytes),
        media_type: media_type.to_owned(),
        driver: driver_for_media_type(media_type).to_owned(),
        size_bytes: Some(i64::try_from(bytes.len()).unwrap_or(i64::MAX)),
    })
}

#[cfg(test)]
mod tests;
