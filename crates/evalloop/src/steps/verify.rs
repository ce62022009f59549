//! The verify step of a forge (seed: skill-eval-loop, "Hard rules"; E-03, E-10): the brief's
//! verify as a `process` job in each arm's work dir, whatever runner ran the arm (one gate for
//! every runner), and applying its finished job as `<arm>.meta/verify.json`.

use std::path::Path;

use serde::{Deserialize, Serialize};
use skillforge_engine::{Job, JobSpec};
use skillforge_runner::PayloadError;
use skillforge_runner_process::ProcessPayload;
use skillforge_stage::files;

use super::arm::{FINAL_FILE, SHIPPED_META, SHIPPED_WORK};
use crate::arm::ArmSide;
use crate::brief::{Brief, FINAL_ENV};
use crate::error::StepError;
use crate::layout::{arm_dir, meta_dir, write_json};
use crate::stages::StageDef;

/// `<arm>.meta/verify.json`.
pub const VERIFY_FILE: &str = "verify.json";
/// `verify.json`: the brief's verify in one arm's work dir.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyResult {
    /// Exit 0.
    pub passed: bool,
    /// Exit class label.
    pub exit: String,
    /// Raw exit code.
    pub exit_code: Option<i32>,
}

/// The verify job of one arm: `sh -c <verify>` in the arm's work dir with `$FORGE_FINAL` naming
/// `<arm>.meta/final.txt` (E-03), key `<prefix>:<n>:<side>:verify`. Whatever runner ran the arm,
/// this is a `process` job on the host (E-10: one gate). With `ships` the work and meta dirs
/// are the job dir's `work/` and `meta/`, which the forge sends and gets back.
///
/// # Errors
/// [`PayloadError`] when the payload does not serialize (a path that is not UTF-8).
pub fn verify_job(
    brief: &Brief,
    sample_dir: &Path,
    sample: u32,
    side: ArmSide,
    stage: &StageDef,
    key_prefix: &str,
    ships: bool,
) -> Result<JobSpec, PayloadError> {
    let mut payload = ProcessPayload::shell(brief.verify.clone());
    let (work, meta) = match ships {
        true => (
            files::worker_path(SHIPPED_WORK),
            files::worker_path(SHIPPED_META),
        ),
        false => (arm_dir(sample_dir, side), meta_dir(sample_dir, side)),
    };
    payload.cwd = Some(work);
    payload.env.insert(
        FINAL_ENV.to_owned(),
        meta.join(FINAL_FILE).display().to_string(),
    );
    let key = format!("{key_prefix}:{sample}:{side}:verify");
    stage.job(&payload, Some(key))
}

/// Applies a finished verify job as `<arm>.meta/verify.json` (kept when it exists). A verify
/// that could not run at all (no outcome) fails.
///
/// # Errors
/// [`StepError`] when the job is not a verify job of this shape or the file cannot be written.
pub fn apply_verify(job: &Job) -> Result<(), StepError> {
    let payload: ProcessPayload =
        serde_json::from_value(job.spec.payload.clone()).map_err(|source| StepError::Payload {
            stage: "verify",
            job_id: job.id.clone(),
            source,
        })?;
    let meta = payload
        .env
        .get(FINAL_ENV)
        .and_then(|p| {
            files::delivered_path(job, Path::new(p))
                .parent()
                .map(Path::to_path_buf)
        })
        .ok_or_else(|| StepError::NoPath {
            stage: "verify",
            job_id: job.id.clone(),
            what: FINAL_ENV,
        })?;
    let path = meta.join(VERIFY_FILE);
    if path.exists() {
        return Ok(());
    }
    let result = match &job.outcome {
        Some(o) => VerifyResult {
            passed: o.exit.is_passed(),
            exit: o.exit.label().to_owned(),
            exit_code: o.exit_code,
        },
        None => VerifyResult {
            passed: false,
            exit: job.state.to_string(),
            exit_code: None,
        },
    };
    Ok(write_json(&path, &result)?)
}
