//! The arm step of a forge: preparing a sample's two work dirs (refusing leftovers, E-46),
//! the `agent` job of one arm, and applying its finished job as `<arm>.meta/run.json` +
//! `final.txt` (seed: skill-eval-loop, "The loop", "Hard rules").

use std::path::{Path, PathBuf};

use skillforge_engine::{Job, JobSpec};
use skillforge_runner::{ExitClass, PayloadError};
use skillforge_runner_agent::{AgentPayload, AgentReport};

use skillforge_stage::files;
use skillforge_stage::fs::write_atomic;

use crate::arm::{ArmRecord, ArmSide, RUN_ERROR_CHARS, truncate_chars};
use crate::arm_runner::ArmRunner;
use crate::brief::Brief;
use crate::error::{IoError, StepError};
use crate::inventory::{HANDED_SKILL_DIR, installed_skills};
use crate::layout::{arm_dir, meta_dir, write_json};
use crate::stages::StageDef;
use crate::tool_errors::count_tool_errors;

/// `run.json`, `final.txt`, `transcript.jsonl` in an arm's meta dir.
pub const RUN_FILE: &str = "run.json";
/// The final message.
pub const FINAL_FILE: &str = "final.txt";
/// The transcript.
pub const TRANSCRIPT_FILE: &str = "transcript.jsonl";

/// Where `runtime` reads project skills from, under its work dir.
pub fn install_root(runtime: &str) -> &'static str {
    match runtime {
        "codex" => ".agents/skills",
        "opencode" => ".opencode/skill",
        _ => ".claude/skills",
    }
}

/// Why a sample's work dirs could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    /// E-46: an arm's work or meta dir is already there (an earlier run's evidence, never cleaned).
    #[error("`{}` already exists: an earlier run left evidence there; read it, then delete the sample dir `{}` to run this sample again", dir.display(), sample_dir.display())]
    Leftover {
        /// The dir found.
        dir: PathBuf,
        /// The sample dir to delete.
        sample_dir: PathBuf,
    },
    /// An arm's meta dir could not be created.
    #[error("create meta dir: {0}")]
    MetaDir(#[source] std::io::Error),
    /// A setup file of the brief could not be written.
    #[error("write setup file `{rel}`: {}", .source.source)]
    SetupFile {
        /// The file, relative to the work dir.
        rel: String,
        /// The atomic write's error (its I/O error is the message).
        #[source]
        source: skillforge_stage::fs::WriteError,
    },
    /// A skill dir ends in `..` or `/`.
    #[error("skill dir `{}` has no name", .0.display())]
    NoSkillName(PathBuf),
    /// A dir could not be created or a skill tree copied.
    #[error(transparent)]
    Io(#[from] IoError),
}

/// Creates sample `n`'s work dirs: the brief's setup files in both, the candidate skill installed
/// in `with`, the rival (if any) in `without` — copied into the runtime's project install root
/// of the work dir on the local runner, handed over as `<arm>.meta/skill/<name>` on the
/// container runner (mounted read-only into that arm's container only; E-09, E-49).
///
/// # Errors
/// E-46: [`PrepareError::Leftover`] naming the sample dir when an arm's work dir or meta dir
/// already exists (the earlier run is evidence: it is never cleaned); otherwise the I/O step that
/// failed, naming the path.
pub fn prepare_sample(
    sample_dir: &Path,
    brief: &Brief,
    runtime: &str,
    skill_dir: &Path,
    rival: Option<&Path>,
    runner: &ArmRunner,
) -> Result<(), PrepareError> {
    for side in ArmSide::BOTH {
        for dir in [arm_dir(sample_dir, side), meta_dir(sample_dir, side)] {
            if dir.exists() {
                return Err(PrepareError::Leftover {
                    dir,
                    sample_dir: sample_dir.to_owned(),
                });
            }
        }
    }
    for side in ArmSide::BOTH {
        let work = arm_dir(sample_dir, side);
        std::fs::create_dir_all(&work).map_err(IoError::on("create", &work))?;
        std::fs::create_dir_all(meta_dir(sample_dir, side)).map_err(PrepareError::MetaDir)?;
        for (rel, text) in &brief.setup {
            write_atomic(&work.join(rel), text.as_bytes()).map_err(|source| {
                PrepareError::SetupFile {
                    rel: rel.clone(),
                    source,
                }
            })?;
        }
        let skill = match side {
            ArmSide::With => Some(skill_dir),
            ArmSide::Without => rival,
        };
        if let Some(skill) = skill {
            let name = skill
                .file_name()
                .ok_or_else(|| PrepareError::NoSkillName(skill.to_owned()))?;
            let target = match runner.hands_skills_over() {
                true => meta_dir(sample_dir, side).join(HANDED_SKILL_DIR).join(name),
                false => work.join(install_root(runtime)).join(name),
            };
            copy_tree(skill, &target)?;
        }
    }
    Ok(())
}

/// Copies the directory tree `from` to `to` (regular files and directories).
///
/// # Errors
/// [`IoError`] naming the path that failed.
pub fn copy_tree(from: &Path, to: &Path) -> Result<(), IoError> {
    std::fs::create_dir_all(to).map_err(IoError::on("create", to))?;
    let entries = std::fs::read_dir(from).map_err(IoError::on("read", from))?;
    for entry in entries {
        let entry = entry.map_err(IoError::on("read", from))?;
        let kind = entry
            .file_type()
            .map_err(IoError::on("read", entry.path()))?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_tree(&entry.path(), &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target).map_err(IoError::on("copy", entry.path()))?;
        }
    }
    Ok(())
}

/// What one arm job is asked.
#[derive(Debug, Clone)]
pub struct ArmJob<'a> {
    /// The brief.
    pub brief: &'a Brief,
    /// Sample dir.
    pub sample_dir: &'a Path,
    /// Sample number.
    pub sample: u32,
    /// Which arm.
    pub side: ArmSide,
    /// Runtime profile.
    pub runtime: &'a str,
    /// Model, if any.
    pub model: Option<&'a str>,
    /// Idempotency key prefix of this forge (`eval:<brief>:<forge>`).
    pub key_prefix: &'a str,
    /// Where the arm runs.
    pub runner: &'a ArmRunner,
    /// The queue's workers do not share this disk: the payload names the job dir's `work/` and
    /// `meta/` ([`skillforge_stage::files`]), which the forge ships and gets back.
    pub ships: bool,
}

/// Name of an arm's work dir in its job dir on a fleet.
pub const SHIPPED_WORK: &str = "work";
/// Name of an arm's meta dir in its job dir on a fleet.
pub const SHIPPED_META: &str = "meta";

/// The arm's job: the brief's prompt verbatim in the arm's work dir (E-09: never a line saying a
/// skill is installed), project/local settings only (the user's own skills are never offered),
/// `FORGE_SAMPLE` in its environment, the transcript written to `<arm>.meta/transcript.jsonl`;
/// on the container runner, in a container of its own with the skills handed to it mounted.
/// Key `<prefix>:<n>:<side>`. With `ships`, the work dir and meta dir are the job dir's
/// `work/` and `meta/` (the forge adds them to the job's files, [`skillforge_stage::files`]).
///
/// # Errors
/// [`PayloadError`] when the payload does not serialize (a path that is not UTF-8).
pub fn arm_job(stage: &StageDef, job: &ArmJob<'_>) -> Result<JobSpec, PayloadError> {
    let work = arm_dir(job.sample_dir, job.side);
    let meta = meta_dir(job.sample_dir, job.side);
    let mut payload = AgentPayload::new(job.runtime, job.brief.prompt.clone());
    payload.model = job.model.map(str::to_owned);
    payload.skills = installed_skills(&work, &meta);
    payload.project_scope_only = true;
    payload.container = job.runner.container_for(&meta, job.runtime);
    let (work_at, meta_at) = match job.ships {
        true => (
            files::worker_path(SHIPPED_WORK),
            files::worker_path(SHIPPED_META),
        ),
        false => (work, meta.clone()),
    };
    if let Some(container) = payload.container.as_mut() {
        // The handed-over skills are mounted from the meta dir where the arm runs.
        for mount in &mut container.mounts {
            if let Ok(rest) = mount.source.strip_prefix(&meta) {
                mount.source = meta_at.join(rest);
            }
        }
    }
    payload.workdir = Some(work_at);
    payload
        .env
        .insert("FORGE_SAMPLE".to_owned(), job.sample.to_string());
    payload.timeout_secs = Some(stage.timeout_secs);
    payload.transcript_path = Some(meta_at.join(TRANSCRIPT_FILE));
    let key = format!("{}:{}:{}", job.key_prefix, job.sample, job.side);
    stage.job(&payload, Some(key))
}

/// Reads `(sample, side)` back from an arm job's idempotency key.
pub fn parse_arm_key(key: &str) -> Option<(u32, ArmSide)> {
    let mut parts = key.rsplitn(3, ':');
    let side = match parts.next()? {
        "with" => ArmSide::With,
        "without" => ArmSide::Without,
        _ => return None,
    };
    Some((parts.next()?.parse().ok()?, side))
}

/// Applies a finished (or stale/dead) arm job: writes `final.txt` (when the agent had a final
/// message) then `run.json`, each atomically. Idempotent: a job whose `run.json` exists is left
/// alone, so a second delivery changes nothing.
///
/// # Errors
/// [`StepError`] when the job is not an arm job of this shape or a file cannot be written.
pub fn apply_arm(job: &Job) -> Result<(), StepError> {
    let key = job.spec.idempotency_key.as_deref().unwrap_or_default();
    let (sample, side) = parse_arm_key(key).ok_or_else(|| StepError::NoKey {
        stage: "arm",
        job_id: job.id.clone(),
        key: key.to_owned(),
    })?;
    let payload: AgentPayload =
        serde_json::from_value(job.spec.payload.clone()).map_err(|source| StepError::Payload {
            stage: "arm",
            job_id: job.id.clone(),
            source,
        })?;
    let transcript_path = payload
        .transcript_path
        .clone()
        .ok_or_else(|| StepError::NoPath {
            stage: "arm",
            job_id: job.id.clone(),
            what: "transcript path",
        })?;
    // On a fleet the payload names the worker's job dir; its dirs were delivered back here.
    let transcript_path = files::delivered_path(job, &transcript_path);
    let meta = transcript_path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let work: PathBuf = files::delivered_path(job, &payload.workdir.clone().unwrap_or_default());
    if meta.join(RUN_FILE).exists() {
        return Ok(());
    }
    let outcome = job.outcome.as_ref();
    let report: Option<AgentReport> =
        outcome.and_then(|o| serde_json::from_value(o.detail.clone()).ok());
    let transcript = std::fs::read_to_string(&transcript_path).unwrap_or_default();
    let exit = outcome.map_or_else(
        || ExitClass::NotRunnable {
            reason: job
                .error
                .clone()
                .unwrap_or_else(|| format!("job ended {}", job.state)),
        },
        |o| o.exit.clone(),
    );
    let error = match &exit {
        ExitClass::NotRunnable { reason } => Some(reason.clone()),
        _ => outcome.and_then(|o| {
            o.stderr_tail
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(str::to_owned)
        }),
    };
    let record = ArmRecord {
        side,
        sample,
        runtime: payload.runtime.clone(),
        job_id: job.id.clone(),
        exit: exit.label().to_owned(),
        exit_code: outcome.and_then(|o| o.exit_code),
        signal: match exit {
            ExitClass::Killed { signal } => Some(signal),
            _ => None,
        },
        duration_ms: outcome.map_or(0, |o| o.duration_ms),
        error: error.map(|e| truncate_chars(e.trim(), RUN_ERROR_CHARS).to_owned()),
        transcript_bytes: transcript.len() as u64,
        skills_installed: installed_skills(&work, &meta),
        skills_offered: report.as_ref().and_then(|r| r.skills_offered.clone()),
        skills_offered_from: report.as_ref().and_then(|r| r.skills_offered_from),
        skills_offered_transcript: report
            .as_ref()
            .and_then(|r| r.skills_offered_transcript.clone()),
        skills_loaded: report.as_ref().and_then(|r| r.skills_loaded.clone()),
        tool_errors: count_tool_errors(&payload.runtime, &transcript),
        container: report.as_ref().and_then(|r| r.container.clone()),
        usage: report.as_ref().and_then(|r| r.usage),
        api_error: report.as_ref().and_then(|r| r.api_error.clone()),
        permission_denials: report
            .as_ref()
            .map(|r| r.permission_denials.clone())
            .unwrap_or_default(),
    };
    // An API error's text is the CLI talking, never the arm's answer: no final.txt then.
    if let Some(message) = report.as_ref().and_then(AgentReport::answer) {
        write_atomic(&meta.join(FINAL_FILE), message.as_bytes()).map_err(|source| {
            StepError::Write {
                what: FINAL_FILE,
                source,
            }
        })?;
    }
    Ok(write_json(&meta.join(RUN_FILE), &record)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    // E-46
    #[test]
    fn e46_leftover_meta_refused_untouched_naming_the_sample_dir() {
        let dir = tempfile::tempdir().unwrap();
        let sample = dir.path().join("s1");
        let skill = dir.path().join("tldr");
        std::fs::create_dir_all(&skill).unwrap();
        std::fs::write(skill.join("SKILL.md"), "# tldr").unwrap();
        let brief: Brief = serde_json::from_value(serde_json::json!({"id": "b", "prompt": "p", "verify": "true", "rubric": "r", "output": "reply"})).unwrap();
        std::fs::create_dir_all(sample.join("with.meta")).unwrap();
        std::fs::write(sample.join("with.meta/final.txt"), "earlier answer").unwrap();
        let e = prepare_sample(&sample, &brief, "claude", &skill, None, &ArmRunner::Local)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("delete the sample dir") && e.contains(&sample.display().to_string()),
            "{e}"
        );
        assert_eq!(
            std::fs::read_to_string(sample.join("with.meta/final.txt")).unwrap(),
            "earlier answer"
        );
        assert!(!sample.join("with").exists() && !sample.join("without").exists());
        std::fs::remove_dir_all(&sample).unwrap();
        prepare_sample(&sample, &brief, "codex", &skill, None, &ArmRunner::Local).unwrap();
        assert!(sample.join("with/.agents/skills/tldr/SKILL.md").is_file());
        assert!(!sample.join("without/.agents").exists());
    }

    #[test]
    fn arm_keys_round_trip() {
        assert_eq!(
            parse_arm_key("eval:b:f1:2:without"),
            Some((2, ArmSide::Without))
        );
        assert_eq!(parse_arm_key("eval:b:f1:2:judge"), None);
    }
}
