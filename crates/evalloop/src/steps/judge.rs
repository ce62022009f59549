//! The judge step of a forge (seed: skill-eval-loop, "The blind is enforced, not assumed",
//! "Hard rules"): the pre-judge checks on both arms' facts (`arm_never_ran` before any mapping is
//! drawn, E-45), the invalid codes in precedence, the mapping kept on disk, the blind judge's
//! `agent` job, and applying its reply as `verdict.json`.

use std::path::Path;

use skillforge_engine::{Job, JobSpec};
use skillforge_runner_agent::{Access, AgentPayload, AgentReport};
use skillforge_stage::files;
use skillforge_stage::fs::write_atomic;

use super::arm::{FINAL_FILE, RUN_FILE};
use super::verify::{VERIFY_FILE, VerifyResult};
use crate::arm::{ArmPair, ArmRecord, ArmSide};
use crate::brief::Brief;
use crate::error::StepError;
use crate::invalid::{ArmFacts, Invalid, check_never_ran, classify};
use crate::inventory::judge_manifest;
use crate::layout::{arm_dir, meta_dir, read_json, write_json};
use crate::mapping::{MAPPING_FILE, Mapping, Slot, SlotView, deliverable, judge_prompt};
use crate::sample::{SampleVerdict, VERDICT_FILE};
use crate::stages::StageDef;
use crate::verdict::{JudgeReading, parse_verdict};

/// Name of the judge's output dir in its job dir on a fleet (delivered to the sample dir).
pub const JUDGE_OUT: &str = "out";

/// The judge's transcript in the sample dir.
pub const JUDGE_TRANSCRIPT_FILE: &str = "judge.transcript.jsonl";
/// The judge's prompt as sent (kept for the report and for checking the blind; the mapping is
/// in its own file).
pub const JUDGE_PROMPT_FILE: &str = "judge.prompt.txt";

/// The stored facts of both arms of a sample (run.json, final.txt, verify.json).
///
/// # Errors
/// [`StepError::Missing`] or [`StepError::File`], naming the file.
pub fn read_facts(sample_dir: &Path) -> Result<ArmPair<ArmFacts>, StepError> {
    let one = |side: ArmSide| -> Result<ArmFacts, StepError> {
        let meta = meta_dir(sample_dir, side);
        let record: ArmRecord = read_json(&meta.join(RUN_FILE))?
            .ok_or_else(|| StepError::Missing(meta.join(RUN_FILE)))?;
        let verify: VerifyResult = read_json(&meta.join(VERIFY_FILE))?
            .ok_or_else(|| StepError::Missing(meta.join(VERIFY_FILE)))?;
        let final_message = std::fs::read_to_string(meta.join(FINAL_FILE)).ok();
        Ok(ArmFacts {
            record,
            final_message,
            verify_passed: verify.passed,
        })
    };
    Ok(ArmPair {
        with: one(ArmSide::With)?,
        without: one(ArmSide::Without)?,
    })
}

fn records(facts: &ArmPair<ArmFacts>) -> ArmPair<ArmRecord> {
    ArmPair {
        with: facts.with.record.clone(),
        without: facts.without.record.clone(),
    }
}

fn verify(facts: &ArmPair<ArmFacts>) -> ArmPair<bool> {
    ArmPair {
        with: facts.with.verify_passed,
        without: facts.without.verify_passed,
    }
}

/// What the pre-judge step decided for a sample.
#[derive(Debug, Clone, PartialEq)]
pub enum PreJudge {
    /// Invalid before any model call; `verdict.json` is written.
    Invalid(SampleVerdict),
    /// Judge it with this job.
    Judge(Box<JobSpec>),
}

/// How a sample's judge job is built.
#[derive(Debug, Clone, Copy)]
pub struct JudgeJob<'a> {
    /// The judge stage.
    pub stage: &'a StageDef,
    /// Judge runtime profile.
    pub runtime: &'a str,
    /// The judge's model (`--judge-model`, else the forge's `--model`, else the runtime's `cheap`
    /// tier).
    pub model: Option<&'a str>,
    /// Idempotency key prefix of the forge (`eval:<brief>:<forge>`).
    pub key_prefix: &'a str,
    /// The queue's workers do not share this disk: the transcript goes to the job dir's `out/`.
    pub ships: bool,
}

/// The pre-judge step: `arm_never_ran` first, before any mapping exists (E-45); then the other
/// codes; a valid pair gets a mapping (drawn once, kept in `mapping.private.json`) and a judge
/// job (key `<prefix>:<n>:judge`).
///
/// # Errors
/// [`StepError`]: missing arm files, or a file that cannot be written.
pub fn prepare_judge(
    brief: &Brief,
    sample_dir: &Path,
    sample: u32,
    skill: &str,
    judge: &JudgeJob<'_>,
) -> Result<PreJudge, StepError> {
    let JudgeJob {
        stage,
        runtime: judge_runtime,
        model,
        key_prefix,
        ships,
    } = *judge;
    let facts = read_facts(sample_dir)?;
    let invalid = |i: Invalid| -> Result<PreJudge, StepError> {
        let v = SampleVerdict::invalid(sample, &i, &records(&facts), verify(&facts));
        write_json(&sample_dir.join(VERDICT_FILE), &v)?;
        Ok(PreJudge::Invalid(v))
    };
    if let Some(i) = check_never_ran(&facts) {
        return invalid(i);
    }
    if let Some(i) = classify(&facts, skill) {
        return invalid(i);
    }
    let mapping_path = sample_dir.join(MAPPING_FILE);
    let mapping = match read_json::<Mapping>(&mapping_path)? {
        Some(m) => m,
        None => {
            let m = Mapping::draw();
            write_json(&mapping_path, &m)?;
            m
        }
    };
    let view = |slot: Slot| {
        let side = mapping.arm(slot);
        let work = arm_dir(sample_dir, side);
        let files = judge_manifest(&work);
        let delivered = if brief.is_reply() {
            Vec::new()
        } else {
            deliverable(&work, &brief.output, &files)
        };
        SlotView {
            final_message: facts.get(side).final_message.clone().unwrap_or_default(),
            files,
            delivered,
        }
    };
    let prompt = judge_prompt(brief, &view(Slot::A), &view(Slot::B));
    write_atomic(&sample_dir.join(JUDGE_PROMPT_FILE), prompt.as_bytes()).map_err(|source| {
        StepError::Write {
            what: "judge prompt",
            source,
        }
    })?;
    let mut payload = AgentPayload::new(judge_runtime, prompt);
    payload.timeout_secs = Some(stage.timeout_secs);
    // Issue 31 item 6: the judge reads what its prompt shows it and nothing else: no tools that
    // act, project scope only (its private home carries no user skill or instruction), and the
    // model it was given.
    payload.access = Access::ReadOnly;
    payload.project_scope_only = true;
    payload.model = model.map(str::to_owned);
    // On a fleet the transcript is written in the job dir's `out/`, delivered to the sample dir
    // (whose other files, the mapping above all, never reach the judge's worker).
    let transcript_dir = if ships {
        files::worker_path(JUDGE_OUT)
    } else {
        sample_dir.to_path_buf()
    };
    payload.transcript_path = Some(transcript_dir.join(JUDGE_TRANSCRIPT_FILE));
    let key = format!("{key_prefix}:{sample}:judge");
    let spec = stage.job(&payload, Some(key))?;
    Ok(PreJudge::Judge(Box::new(spec)))
}

/// Applies a finished judge job: the reply read to the end of its first JSON object and
/// de-blinded through the stored mapping into `verdict.json`; no reply or an unreadable one is
/// `unreadable_verdict`, never a tie. Idempotent (an existing verdict is kept).
///
/// # Errors
/// [`StepError`] when the job's key or files are not a judge's, or the verdict cannot be written.
pub fn apply_judge(job: &Job) -> Result<(), StepError> {
    let key = job.spec.idempotency_key.as_deref().unwrap_or_default();
    let sample: u32 = key
        .strip_suffix(":judge")
        .and_then(|k| k.rsplit(':').next())
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| StepError::NoKey {
            stage: "judge",
            job_id: job.id.clone(),
            key: key.to_owned(),
        })?;
    let payload: AgentPayload =
        serde_json::from_value(job.spec.payload.clone()).map_err(|source| StepError::Payload {
            stage: "judge",
            job_id: job.id.clone(),
            source,
        })?;
    let transcript = payload
        .transcript_path
        .as_deref()
        .map(|p| files::delivered_path(job, p));
    let sample_dir = transcript
        .as_deref()
        .and_then(Path::parent)
        .ok_or_else(|| StepError::NoPath {
            stage: "judge",
            job_id: job.id.clone(),
            what: "transcript path",
        })?;
    if sample_dir.join(VERDICT_FILE).exists() {
        return Ok(());
    }
    let mapping: Mapping =
        read_json(&sample_dir.join(MAPPING_FILE))?.ok_or(StepError::NoMapping {
            sample,
            file: MAPPING_FILE,
        })?;
    let facts = read_facts(sample_dir)?;
    let report: Option<AgentReport> = job
        .outcome
        .as_ref()
        .and_then(|o| serde_json::from_value(o.detail.clone()).ok());
    let reading = match report.as_ref().map(|r| (r.answer(), &r.api_error)) {
        Some((Some(reply), _)) => parse_verdict(reply),
        Some((None, Some(error))) => JudgeReading::Unreadable(format!(
            "the judge's run ended on an API error: {}",
            error.message
        )),
        _ => JudgeReading::Unreadable(format!("the judge's run ended {} with no reply", job.state)),
    };
    let mut v = SampleVerdict::judged(sample, &reading, mapping, &records(&facts), verify(&facts));
    v.judge_usage = report.and_then(|r| r.usage);
    v.judge = Some(crate::sample::AgentSetup {
        runtime: payload.runtime.clone(),
        model: payload.model.clone(),
    });
    Ok(write_json(&sample_dir.join(VERDICT_FILE), &v)?)
}
