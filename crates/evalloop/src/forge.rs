//! `eval forge`: the whole chain for one brief and one skill as a durable workflow (seed:
//! skill-eval-loop, "The loop"; issue 17 item 7). Arms of a sample run as two parallel `agent`
//! jobs; the judge of a sample is an `agent` job once both arms are applied, running while the
//! next sample's arms run; then aggregate → gate → ledger → install.
//!
//! On a fleet whose workers do not share this disk (Redis), each arm and verify job carries its
//! arm's work and meta dirs by content and the judge's transcript comes back the same way
//! ([`skillforge_stage::files`]): no job names a control-plane path.
//!
//! Resume: every job has an idempotency key `eval:<brief>:<forge id>:<n>:<with|without|judge>`
//! and every effect is a file written once (`run.json`, `verify.json`, `mapping.private.json`,
//! `verdict.json`, the ledger row carrying the forge id), so re-running the same forge after a
//! SIGKILL re-enqueues nothing that exists and re-applies nothing already applied.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::Utc;
use serde::{Deserialize, Serialize};
use skillforge_engine::{JobSpec, QueueBackend};
use skillforge_store::Store;

use super::aggregate::{AGGREGATE_FILE, Aggregate, aggregate};
use super::arm::{ArmPair, ArmSide};
use super::arm_runner::ArmRunner;
use super::brief::Brief;
use super::gate::{GateInput, GateOutcome, gate};
use super::install::{InstallTarget, install};
use super::layout::{
    FileError, arm_dir, brief_dir, eval_root, ledger_path, meta_dir, read_json, sample_dir,
    write_json,
};
use super::ledger::{
    LedgerRow, STAND_IN_RUNTIME, Signature, Versions, append_row, judged_by_stand_in, read_ledger,
    recheck_due, rejected,
};
use super::pace::{PACE_FILE, pace_gate, pace_over_forges};
use super::sample::{AgentSetup, SampleVerdict, VERDICT_FILE};
use super::stages::EvalStages;
use super::steps::arm::{ArmJob, RUN_FILE, SHIPPED_META, SHIPPED_WORK, arm_job, prepare_sample};
use super::steps::judge::{JUDGE_OUT, JudgeJob, PreJudge, prepare_judge};
use super::steps::verify::{VERIFY_FILE, verify_job};
use super::stop::brief_stop;
use skillforge_stage::Progress;
use skillforge_stage::StageJobs;
use skillforge_stage::files::{self, ShippedDir};

/// `<brief dir>/forge.json`: the forge in progress or done.
pub const FORGE_FILE: &str = "forge.json";
/// Default samples per arm (seed: "One sample is noise: run 3").
pub const DEFAULT_SAMPLES: u32 = 3;

/// What the forge is asked.
#[derive(Debug, Clone)]
pub struct ForgeRequest {
    /// The brief.
    pub brief: Brief,
    /// The candidate skill's directory (holds `SKILL.md`); its name is the directory name.
    pub skill_dir: PathBuf,
    /// Samples per arm.
    pub samples: u32,
    /// `--rival`: the incumbent installed in the baseline arm.
    pub rival: Option<PathBuf>,
    /// Arm runtime profile.
    pub runtime: String,
    /// Where the arms run (`--runner local|container`).
    pub runner: ArmRunner,
    /// Judge runtime profile.
    pub judge_runtime: String,
    /// Model for the arms.
    pub model: Option<String>,
    /// Model for the judge (issue 31 item 6: `--judge-model`, else the arms' `--model` when the
    /// judge runs on the arms' runtime, else the judge runtime's `cheap` tier).
    pub judge_model: Option<String>,
    /// Stop before any eval spend (E-18).
    pub dry_run: bool,
    /// `--fresh`: forge the brief anew; its earlier forge is moved to `<eval>/archive/` (kept, not
    /// reused, not pooled by PACE).
    pub fresh: bool,
    /// Where an adoption goes.
    pub install: InstallTarget,
    /// `--probation --failure-rate R`.
    pub probation_failure_rate: Option<f64>,
    /// `--pace`: the gate is PACE over every forge of this skill so far (see [`super::pace`]);
    /// `None` = the majority gate alone (the default).
    pub pace: Option<skillforge_contract::pace::Pace>,
    /// Why the judge (`judge_runtime`, `judge_model`) is not measured against the humans, when
    /// the measured-judge gate is configured and it is not (issue 34 item 12): its verdict is
    /// then not applied ([`super::gate::unmeasured_judge_gate`]). `None`: no gate, or measured.
    /// A forge reused only under the same judge ([`setup_changes`]), this is also the verdict
    /// for the judge recorded in the brief's `forge.json`, whose verdicts the gate reads.
    pub judge_unmeasured: Option<String>,
    /// The theme the brief was drafted from, when mined from sessions (`--mode corrections` with a
    /// theme file carrying a signature): written onto an adoption's ledger row for its recheck.
    pub signature: Option<Signature>,
    /// The template versions forged (`--skill-version`, `--rival-version`), named by the gate,
    /// the ledger row, `eval status` and `eval report`; `None` for a forge of directories.
    pub versions: Option<Versions>,
}

/// What the forge environment provides.
pub struct ForgeEnv<'a> {
    /// The queue.
    pub queue: &'a Arc<dyn QueueBackend>,
    /// The store (applied-result records).
    pub store: &'a Store,
    /// The home.
    pub home: &'a Path,
    /// Stage definitions.
    pub stages: &'a EvalStages,
    /// Waits for jobs (the CLI serves the embedded queue in-process).
    pub jobs: &'a dyn StageJobs,
    /// Progress lines.
    pub reporter: &'a dyn Progress,
}

/// `forge.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForgeState {
    /// This forge's id.
    pub forge_id: String,
    /// The brief.
    pub brief_id: String,
    /// The candidate.
    pub skill: String,
    /// The candidate's dir.
    pub skill_dir: PathBuf,
    /// The rival's dir.
    pub rival: Option<PathBuf>,
    /// Samples asked for.
    pub samples: u32,
    /// Samples whose dirs this forge prepared.
    pub prepared: Vec<u32>,
    /// Job ids per sample: `[with, without, judge?]`.
    #[serde(default)]
    pub jobs: Vec<(u32, String, String)>,
    /// `running` or `done`.
    pub status: String,
    /// Where the arms run; absent = local (forges written before container arms).
    #[serde(default, skip_serializing_if = "is_local")]
    pub runner: ArmRunner,
    /// `sha256:<hex>` of the skill's tree when the forge started; absent in forges written
    /// before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skill_digest: Option<String>,
    /// The arms' runtime and model (`--runtime`, `--model`); absent in forges written before it
    /// was recorded (unknown: such a forge with samples is not reused, see [`setup_changes`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arms: Option<AgentSetup>,
    /// The judge's runtime and model, whose verdicts this forge's samples hold; absent as
    /// `arms` is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<AgentSetup>,
    /// `sha256:<hex>` of the brief as parsed when the forge started; absent in forges written
    /// before it was recorded (their brief is not compared).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub brief_digest: Option<String>,
    /// The template versions forged (`--skill-version`, `--rival-version`); absent for a forge of
    /// directories.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub versions: Option<Versions>,
}

/// `sha256:<hex>` of `brief` as parsed (its JSON serialization, so formatting does not count).
pub fn brief_digest(brief: &Brief) -> String {
    use sha2::{Digest, Sha256};
    let bytes = serde_json::to_vec(brief).unwrap_or_default();
    format!("sha256:{}", hex::encode(Sha256::digest(&bytes)))
}

/// Where a brief's earlier forge goes when it is forged anew: `<eval>/archive/<brief>-<forge id>`.
pub fn archive_dir(home: &Path, brief_id: &str, forge_id: &str) -> PathBuf {
    eval_root(home)
        .join("archive")
        .join(format!("{brief_id}-{forge_id}"))
}

/// The setup fault an earlier forge stopped on (an arm never ran, an API error, a refused
/// write, an ambient copy of the skill offered to the baseline): what fixing the setup and
/// running the brief again is meant to retry, so its stop is not read back.
fn stopped_on_setup(dir: &Path, state: &ForgeState) -> Option<String> {
    if state.status != "done" {
        return None;
    }
    let verdicts = read_verdicts(dir, state.samples).ok()?;
    brief_stop(&verdicts)
        .filter(|stop| stop.code.stops_at_once())
        .map(|stop| stop.code.to_string())
}

fn is_local(runner: &ArmRunner) -> bool {
    *runner == ArmRunner::Local
}

/// What a forge ended with.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ForgeReport {
    /// The brief.
    pub brief_id: String,
    /// The candidate.
    pub skill: String,
    /// Set when nothing ran (a loser in the ledger, a dry run), with why.
    pub skipped: Option<String>,
    /// Sample verdicts, in order.
    pub samples: Vec<SampleVerdict>,
    /// The aggregate, when made.
    pub aggregate: Option<Aggregate>,
    /// The gate, when asked.
    pub gate: Option<GateOutcome>,
    /// The ledger row written (or found from an earlier pass of this forge).
    pub ledger_row: Option<LedgerRow>,
    /// PACE over every forge of the skill, with `--pace` (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pace: Option<skillforge_contract::pace::PaceReport>,
    /// The brief's run dir.
    pub dir: PathBuf,
    /// Set when this brief's forge had already finished: the report is its evidence, read
    /// again; nothing ran.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reused: bool,
}

/// Why a forge could not run.
#[derive(Debug, thiserror::Error)]
pub enum ForgeError {
    /// Bad input or a refusal (exit 2): a leftover dir, a missing SKILL.md, another forge's dir.
    #[error("{0}")]
    Refused(String),
    /// Queue, store or file trouble (exit 3).
    #[error("{0}")]
    Environment(String),
}

fn env_err(e: impl std::fmt::Display) -> ForgeError {
    ForgeError::Environment(e.to_string())
}

/// Runs (or resumes) a forge; see the module docs.
///
/// # Errors
/// [`ForgeError`].
pub async fn run_forge(env: &ForgeEnv<'_>, req: &ForgeRequest) -> Result<ForgeReport, ForgeError> {
    let skill = skill_name(&req.skill_dir)?;
    // What the baseline arm is given: the rival's name, or nothing (the question a reject
    // answered, E-17).
    let baseline: Vec<String> = match &req.rival {
        Some(rival) => vec![skill_name(rival)?],
        None => Vec::new(),
    };
    let dir = brief_dir(env.home, &req.brief.id);
    let mut report = ForgeReport {
        brief_id: req.brief.id.clone(),
        skill: skill.clone(),
        skipped: None,
        samples: vec![],
        aggregate: None,
        gate: None,
        ledger_row: None,
        pace: None,
        dir: dir.clone(),
        reused: false,
    };
    let digest = format!(
        "sha256:{}",
        crate::deploy::tree_digest(&req.skill_dir)
            .map_err(|e| ForgeError::Refused(e.to_string()))?
    );
    let ledger = ledger_path(env.home);
    let rows = read_ledger(&ledger).map_err(env_err)?;
    if let Some(row) = rejected(&rows, &skill, &digest, &req.judge_runtime, &baseline) {
        report.skipped = Some(skip_words(row, &skill, &ledger));
        return Ok(report);
    }
    let mut existing: Option<ForgeState> = read_json(&dir.join(FORGE_FILE)).map_err(env_err)?;
    let brief_now = brief_digest(&req.brief);
    // Forged anew: with `--fresh`, or after a stop on a setup fault (whose message says to fix
    // the setup and run the brief again). The earlier forge is archived, never deleted.
    if let Some(state) = &existing {
        let why = match stopped_on_setup(&dir, state) {
            _ if req.fresh => Some("--fresh".to_owned()),
            Some(code) => Some(format!(
                "its earlier forge stopped on a setup fault ({code})"
            )),
            None => None,
        };
        if let Some(why) = why {
            let to = archive_dir(env.home, &req.brief.id, &state.forge_id);
            if req.dry_run {
                env.reporter.step(&format!(
                    "dry run: the brief would be forged anew ({why}); its earlier forge would move to {}",
                    to.display()
                ));
            } else {
                if let Some(parent) = to.parent() {
                    std::fs::create_dir_all(parent).map_err(|e| {
                        ForgeError::Environment(format!("create `{}`: {e}", parent.display()))
                    })?;
                }
                std::fs::rename(&dir, &to).map_err(|e| {
                    ForgeError::Environment(format!(
                        "move `{}` to `{}`: {e}",
                        dir.display(),
                        to.display()
                    ))
                })?;
                env.reporter.step(&format!(
                    "forging the brief anew ({why}); its earlier forge is kept in {}",
                    to.display()
                ));
            }
            existing = None;
        }
    }
    if let Some(state) = &existing
        && state.brief_digest.as_ref().is_some_and(|d| *d != brief_now)
    {
        return Err(ForgeError::Refused(format!(
            "brief `{}` changed since its forge in `{}` ({} then, {brief_now} now); its evidence is that \
             brief's: forge it anew with --fresh (the earlier forge is kept in the home's eval/archive), \
             or give the brief a new id",
            req.brief.id,
            dir.display(),
            state.brief_digest.as_deref().unwrap_or_default()
        )));
    }
    if let Some(state) = &existing
        && state.skill == skill
        && state.skill_digest.as_ref().is_some_and(|d| *d != digest)
    {
        return Err(ForgeError::Refused(format!(
            "`{skill}` changed since this brief's forge in `{}` ({} then, {digest} now); its evidence stays: \
             forge the brief anew with --fresh (the earlier forge is kept in the home's eval/archive), or give the brief a new id",
            dir.display(),
            state.skill_digest.as_deref().unwrap_or_default()
        )));
    }
    if let Some(state) = &existing
        && (state.skill != skill
            || state.samples != req.samples
            || state.rival != req.rival
            || state.runner != req.runner)
    {
        // Each value that differs, was and now (a new user could not tell which one did).
        let rival = |dir: &Option<PathBuf>, versions: &Option<Versions>| match (
            versions.as_ref().and_then(|v| v.rival.clone()),
            dir,
        ) {
            (Some(version), _) => format!("`{version}`"),
            (None, Some(dir)) => format!("`{}`", dir.display()),
            (None, None) => "none".to_owned(),
        };
        let mut differ = Vec::new();
        if state.skill != skill {
            differ.push(format!("skill: was `{}`, now `{skill}`", state.skill));
        }
        if state.samples != req.samples {
            differ.push(format!(
                "samples: was {}, now {}",
                state.samples, req.samples
            ));
        }
        if state.rival != req.rival {
            differ.push(format!(
                "rival: was {}, now {}",
                rival(&state.rival, &state.versions),
                rival(&req.rival, &req.versions)
            ));
        }
        if state.runner != req.runner {
            differ.push(format!(
                "runner: was {}, now {}",
                state.runner.as_str(),
                req.runner.as_str()
            ));
        }
        return Err(ForgeError::Refused(format!(
            "`{}` holds a forge of `{}` under other settings ({}); its evidence stays: forge the brief anew \
             with --fresh (the earlier forge is kept in the home's eval/archive; or delete the brief's run dir `{}`)",
            dir.join(FORGE_FILE).display(),
            state.skill,
            differ.join("; "),
            dir.display()
        )));
    }
    if let Some(state) = &existing {
        let changes = setup_changes(state, req);
        if !changes.is_empty() {
            return Err(ForgeError::Refused(format!(
                "`{}` holds a forge of `{}` run under another setup ({}); its samples and verdicts are that \
                 setup's and are not reused for this one: forge it again with the same flags ({}), or forge it \
                 anew with --fresh (the earlier forge is kept in the home's eval/archive; or delete the brief's run dir `{}`)",
                dir.join(FORGE_FILE).display(),
                state.skill,
                changes.join("; "),
                same_flags(state),
                dir.display()
            )));
        }
    }
    if req.dry_run {
        report.skipped = Some(format!(
            "dry run: would run {} samples × 2 arms of `{}` on runtime `{}` ({} runner; judge `{}`) in {}; an \
             adoption would go to {}; no arm ran",
            req.samples,
            req.brief.id,
            req.runtime,
            req.runner.as_str(),
            req.judge_runtime,
            dir.display(),
            install_words(&req.install)
        ));
        return Ok(report);
    }
    let mut state = existing.unwrap_or_else(|| ForgeState {
        forge_id: uuid::Uuid::now_v7().simple().to_string()[..12].to_owned(),
        brief_id: req.brief.id.clone(),
        skill: skill.clone(),
        skill_dir: req.skill_dir.clone(),
        rival: req.rival.clone(),
        samples: req.samples,
        prepared: vec![],
        jobs: vec![],
        status: "running".to_owned(),
        runner: req.runner.clone(),
        skill_digest: Some(digest.clone()),
        arms: None,
        judge: None,
        brief_digest: Some(brief_now.clone()),
        versions: req.versions.clone(),
    });
    // A new forge, or an older one that had prepared nothing (no evidence to mismatch), records
    // who runs its arms and judges its samples.
    let (arms, judge) = (req.arms(), req.judge());
    if state.arms.is_none() || state.judge.is_none() {
        state.arms = Some(arms);
        state.judge = Some(judge);
        write_json(&dir.join(FORGE_FILE), &state).map_err(env_err)?;
    }
    report.reused = state.status == "done";
    let prefix = format!("eval:{}:{}", req.brief.id, state.forge_id);
    let ships = files::ships(env.queue.as_ref());
    let mut so_far: Vec<SampleVerdict> = Vec::new();
    let mut pending_judges: Vec<(u32, String)> = Vec::new();
    for n in 1..=req.samples {
        if let Some(stop) = brief_stop(&so_far) {
            env.reporter
                .step(&format!("brief stopped: {}", stop.reason));
            break;
        }
        let sdir = sample_dir(&dir, n);
        if !state.prepared.contains(&n) {
            prepare_sample(
                &sdir,
                &req.brief,
                &req.runtime,
                &req.skill_dir,
                req.rival.as_deref(),
                &req.runner,
            )
            .map_err(|e| ForgeError::Refused(e.to_string()))?;
            state.prepared.push(n);
            write_json(&dir.join(FORGE_FILE), &state).map_err(env_err)?;
        }
        // E-13 (resolutions 21): the seed's "no parallelism" is Harbor's fan-out to cloud sandboxes,
        // which would ship the arm's live credential to a third party. A sample's two arms are
        // submitted together and may run side by side on the user's own workers and local
        // engine; what is refused is a cloud environment or a remote engine, before anything
        // starts (`arm_runner::check_local_only`, and the worker's agent runner again).
        let mut ids = Vec::new();
        for side in ArmSide::BOTH {
            let job = ArmJob {
                brief: &req.brief,
                sample_dir: &sdir,
                sample: n,
                side,
                runtime: &req.runtime,
                model: req.model.as_deref(),
                key_prefix: &prefix,
                runner: &req.runner,
                ships,
            };
            let mut spec =
                arm_job(&env.stages.arm, &job).map_err(|e| ForgeError::Refused(e.to_string()))?;
            ship_arm(env, &mut spec, &sdir, side, ships).await?;
            ids.push(enqueue(env, &spec).await?);
        }
        if !state.jobs.iter().any(|j| j.0 == n) {
            state.jobs.push((n, ids[0].clone(), ids[1].clone()));
            write_json(&dir.join(FORGE_FILE), &state).map_err(env_err)?;
        }
        let files = ArmSide::BOTH.map(|side| meta_dir(&sdir, side).join(RUN_FILE));
        // Issue 35 item 4: an earlier forge's arms already applied are read back, not run.
        if files.iter().all(|f| f.exists()) {
            env.reporter.step(&format!(
                "sample {n}: arms ran before (jobs {} and {}): read back, nothing ran",
                ids[0], ids[1]
            ));
        } else {
            env.reporter.step(&format!(
                "sample {n}: arms running (jobs {} and {})",
                ids[0], ids[1]
            ));
        }
        env.jobs
            .wait(&ids, &format!("sample {n} arms"))
            .await
            .map_err(env_err)?;
        applied(&files)?;
        if let Some(v) = read_json::<SampleVerdict>(&sdir.join(VERDICT_FILE)).map_err(env_err)? {
            so_far.push(v);
            continue;
        }
        let verify_files = ArmSide::BOTH.map(|side| meta_dir(&sdir, side).join(VERIFY_FILE));
        if !verify_files.iter().all(|f| f.exists()) {
            if ships {
                bring_back_arms(env, &ids).await?;
            }
            let mut ids = Vec::new();
            for side in ArmSide::BOTH {
                let mut spec = verify_job(
                    &req.brief,
                    &sdir,
                    n,
                    side,
                    &env.stages.verify,
                    &prefix,
                    ships,
                )
                .map_err(|e| ForgeError::Refused(e.to_string()))?;
                ship_arm(env, &mut spec, &sdir, side, ships).await?;
                ids.push(enqueue(env, &spec).await?);
            }
            env.jobs
                .wait(&ids, &format!("sample {n} verify"))
                .await
                .map_err(env_err)?;
            applied(&verify_files)?;
        }
        let judge = JudgeJob {
            stage: &env.stages.judge,
            runtime: &req.judge_runtime,
            model: req.judge_model.as_deref(),
            key_prefix: &prefix,
            ships,
        };
        match prepare_judge(&req.brief, &sdir, n, &skill, &judge).map_err(env_err)? {
            PreJudge::Invalid(v) => {
                env.reporter.step(&format!(
                    "sample {n}: {}",
                    v.invalid_code
                        .map_or_else(|| format!("invalid: {}", v.reason), |c| c.line(&v.reason))
                ));
                so_far.push(v);
            }
            PreJudge::Judge(mut spec) => {
                if ships {
                    let out = [ShippedDir {
                        rel: JUDGE_OUT,
                        local: &sdir,
                        send: false,
                        deliver: true,
                        skip: &[],
                    }];
                    files::ship_dirs(env.queue.as_ref(), &mut spec, &out)
                        .await
                        .map_err(|e| ForgeError::Environment(e.to_string()))?;
                }
                let id = enqueue(env, &spec).await?;
                env.reporter.step(&format!("sample {n}: judge job {id}"));
                pending_judges.push((n, id));
                so_far.push(placeholder(n));
            }
        }
    }
    if !pending_judges.is_empty() {
        let ids: Vec<String> = pending_judges.iter().map(|(_, id)| id.clone()).collect();
        env.jobs.wait(&ids, "judges").await.map_err(env_err)?;
        let files: Vec<PathBuf> = pending_judges
            .iter()
            .map(|(n, _)| sample_dir(&dir, *n).join(VERDICT_FILE))
            .collect();
        applied(&files)?;
    }
    let verdicts = read_verdicts(&dir, req.samples).map_err(env_err)?;
    report.samples = verdicts.clone();
    let agg =
        aggregate(&req.brief.id, &verdicts).map_err(|e| ForgeError::Refused(e.to_string()))?;
    write_json(&dir.join(AGGREGATE_FILE), &agg).map_err(env_err)?;
    let outcome = gate(&GateInput {
        aggregate: &agg,
        skill: &skill,
        rival: req
            .rival
            .as_deref()
            .and_then(|r| r.file_name())
            .and_then(|n| n.to_str()),
        probation_failure_rate: req.probation_failure_rate,
        versions: state.versions.as_ref(),
    });
    // Issue 34 item 10: with `--pace`, PACE over every forge of the skill decides.
    let outcome = match req.pace {
        Some(pace) => {
            let (pace_report, pooled) = pace_over_forges(pace, env.home, &state, &verdicts);
            write_json(&dir.join(PACE_FILE), &pace_report).map_err(env_err)?;
            let decided = pace_gate(&skill, &outcome, &pace_report, &pooled);
            report.pace = Some(pace_report);
            decided
        }
        None => outcome,
    };
    // Issue 34 item 12: a verdict counts only from a measured judge, when the gate is on.
    let outcome = match &req.judge_unmeasured {
        Some(why) => super::gate::unmeasured_judge_gate(&skill, &outcome, why),
        None => outcome,
    };
    report.ledger_row = record_decision(env.home, req, &state, &agg, &outcome)?;
    report.aggregate = Some(agg);
    report.gate = Some(outcome);
    state.status = "done".to_owned();
    write_json(&dir.join(FORGE_FILE), &state).map_err(env_err)?;
    Ok(report)
}

impl ForgeRequest {
    /// The arms' runtime and model as asked.
    pub fn arms(&self) -> AgentSetup {
        AgentSetup {
            runtime: self.runtime.clone(),
            model: self.model.clone(),
        }
    }

    /// The judge's runtime and model as asked.
    pub fn judge(&self) -> AgentSetup {
        AgentSetup {
            runtime: self.judge_runtime.clone(),
            model: self.judge_model.clone(),
        }
    }
}

/// How `req` differs from the setup the brief's earlier forge `state` ran under, one phrase per
/// difference naming both values (empty: the same setup, the forge is resumed or read again).
/// A forge that did not record its arms or judge (written before they were recorded) and had
/// prepared a sample is a changed setup: which runtime and judge made its evidence is unknown.
pub fn setup_changes(state: &ForgeState, req: &ForgeRequest) -> Vec<String> {
    let mut out = Vec::new();
    let untouched = state.prepared.is_empty() && state.jobs.is_empty();
    let mut compare = |what: &str, flags: [&str; 2], then: Option<&AgentSetup>, now: AgentSetup| {
        let Some(then) = then else {
            if !untouched {
                let whose = if what == "arms" { "arms'" } else { "judge's" };
                out.push(format!(
                    "the {whose} runtime and model were not recorded (the forge predates that record), \
                     so which {what} made its evidence is unknown"
                ));
            }
            return;
        };
        if then.runtime != now.runtime {
            out.push(format!(
                "{what} runtime `{}` then, `{}` now ({})",
                then.runtime, now.runtime, flags[0]
            ));
        }
        if then.model != now.model {
            let m = |m: &Option<String>| {
                m.as_deref()
                    .map_or_else(|| "the runtime's default".to_owned(), |m| format!("`{m}`"))
            };
            out.push(format!(
                "{what} model {} then, {} now ({})",
                m(&then.model),
                m(&now.model),
                flags[1]
            ));
        }
    };
    compare(
        "arms",
        ["--runtime", "--model"],
        state.arms.as_ref(),
        req.arms(),
    );
    compare(
        "judge",
        ["--judge-runtime", "--judge-model"],
        state.judge.as_ref(),
        req.judge(),
    );
    out
}

/// The flags that reproduce `state`'s setup, for the refusal's way on.
fn same_flags(state: &ForgeState) -> String {
    let mut flags = vec![format!("--samples {}", state.samples)];
    if let Some(a) = &state.arms {
        flags.push(format!("--runtime {}", a.runtime));
        if let Some(m) = &a.model {
            flags.push(format!("--model {m}"));
        }
    }
    if let Some(j) = &state.judge {
        flags.push(format!("--judge-runtime {}", j.runtime));
        if let Some(m) = &j.model {
            flags.push(format!("--judge-model {m}"));
        }
    }
    flags.join(" ")
}

/// Writes the ledger row (and installs an adoption) once per forge.
fn record_decision(
    home: &Path,
    req: &ForgeRequest,
    state: &ForgeState,
    agg: &Aggregate,
    outcome: &GateOutcome,
) -> Result<Option<LedgerRow>, ForgeError> {
    if !outcome.decision.is_verdict() {
        return Ok(None);
    }
    let ledger = ledger_path(home);
    let tag = format!("forge:{}", state.forge_id);
    let rows = read_ledger(&ledger).map_err(env_err)?;
    if let Some(row) = rows.iter().find(|r| r.reason.ends_with(&tag)) {
        return Ok(Some(row.clone()));
    }
    let now = Utc::now();
    let installed = match outcome.decision.recheck_days() {
        Some(_) => install(home, &req.skill_dir, &req.install)
            .map_err(|e| ForgeError::Refused(e.to_string()))?,
        None => vec![],
    };
    let row = LedgerRow {
        skill: state.skill.clone(),
        brief_id: req.brief.id.clone(),
        decision: outcome.decision.as_str().to_owned(),
        at: now,
        recheck_due: outcome.decision.recheck_days().map(|d| recheck_due(now, d)),
        baseline_skills: agg
            .baseline_skills()
            .map(<[String]>::to_vec)
            .unwrap_or_default(),
        arms_never_loaded: agg.arms_never_loaded.clone(),
        n_valid: agg.n_valid,
        wins_with: agg.wins_with,
        failure_rate: req
            .probation_failure_rate
            .filter(|_| outcome.decision == super::gate::Decision::Probation),
        signature: req
            .signature
            .clone()
            .filter(|_| outcome.decision.recheck_days().is_some()),
        installed,
        loads: None,
        skill_digest: state.skill_digest.clone(),
        judge: state.judge.clone(),
        versions: state.versions.clone(),
        reason: format!(
            "{} {tag}",
            outcome.lines.first().cloned().unwrap_or_default()
        ),
    };
    append_row(&ledger, &row).map_err(env_err)?;
    Ok(Some(row))
}

/// Why a forge of `skill` is skipped as a loser (E-17): when, on which brief, under which judge
/// and against which baseline it was rejected, and what is still evaluated: an edited skill, the
/// content against another baseline, and (a reject the scripted stand-in judged bars only
/// scripted-judged forges) the content under a model judge.
fn skip_words(row: &LedgerRow, skill: &str, ledger: &Path) -> String {
    let judge = row.judge.as_ref().map_or_else(
        || "a judge the row does not record".to_owned(),
        |j| format!("the judge {}", j.words()),
    );
    let against = match (&row.versions, row.baseline_skills.as_slice()) {
        (Some(v), _) => format!("as {}", v.words()),
        (None, []) => "over an empty baseline".to_owned(),
        (None, names) => format!("against the rival {}", names.join(", ")),
    };
    let what = if row.skill_digest.is_some() {
        "this content is never evaluated again against this baseline; an edited skill is a new candidate, \
         and another baseline (another --rival, or none) another question: both are evaluated"
    } else {
        "it is never evaluated again under this name against this baseline (the ledger row predates content digests)"
    };
    let stand_in = if judged_by_stand_in(row) {
        format!(
            "; that reject was the `{STAND_IN_RUNTIME}` stand-in judge's, so it skips only scripted-judged runs: \
             a model judge evaluates it (e.g. --judge-runtime claude)"
        )
    } else {
        String::new()
    };
    format!(
        "`{skill}` was rejected on {} (brief `{}`, {judge}, {against}): {what}{stand_in}; ledger {}",
        row.at.format("%Y-%m-%d"),
        row.brief_id,
        ledger.display()
    )
}

fn placeholder(n: u32) -> SampleVerdict {
    SampleVerdict {
        sample: n,
        valid: true,
        invalid_code: None,
        invalid_arm: None,
        reason: "judge pending".to_owned(),
        winner: None,
        mapping: None,
        verify_passed: ArmPair::default(),
        tool_errors: ArmPair::default(),
        skills: None,
        judge_usage: None,
        judge: None,
    }
}

/// The name of a skill dir that holds a `SKILL.md`.
///
/// # Errors
/// [`ForgeError::Refused`] naming the dir.
pub fn skill_name(dir: &Path) -> Result<String, ForgeError> {
    if dir.file_name().is_some_and(|n| n == "SKILL.md") && dir.is_file() {
        return Err(ForgeError::Refused(format!(
            "`{}` is the skill's SKILL.md: give its directory, `{}`",
            dir.display(),
            dir.parent().unwrap_or(dir).display()
        )));
    }
    if !dir.exists() {
        return Err(ForgeError::Refused(format!(
            "skill dir `{}`: no such directory (give the directory that holds the skill's SKILL.md)",
            dir.display()
        )));
    }
    let file = dir.join("SKILL.md");
    if !file.is_file() {
        return Err(ForgeError::Refused(format!(
            "skill dir `{}` has no SKILL.md",
            dir.display()
        )));
    }
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .map(str::to_owned)
        .ok_or_else(|| {
            ForgeError::Refused(format!("skill dir `{}` has no usable name", dir.display()))
        })?;
    // The checks `template add` makes, so a skill the eval loop runs is one train can take.
    let content = std::fs::read_to_string(&file)
        .map_err(|e| ForgeError::Environment(format!("read `{}`: {e}", file.display())))?;
    let mut problems: Vec<String> = match skillforge_contract::parse_template(&content) {
        Ok(_) => Vec::new(),
        Err(e) => e
            .into_problems()
            .into_iter()
            .map(|p| p.to_string())
            .collect(),
    };
    if let Some(named) = skillforge_contract::frontmatter_name(&content)
        && named != name
    {
        problems.push(format!(
            "skill name {named:?} differs from its directory {name:?}; Agent Skills requires them equal (rename one)"
        ));
    }
    match problems.as_slice() {
        [] => Ok(name),
        [one] => Err(ForgeError::Refused(format!(
            "invalid skill `{}`: {one}",
            file.display()
        ))),
        many => Err(ForgeError::Refused(format!(
            "invalid skill `{}`: {} problems:\n{}",
            file.display(),
            many.len(),
            many.iter()
                .map(|p| format!("  - {p}"))
                .collect::<Vec<_>>()
                .join("\n")
        ))),
    }
}

/// Where an adoption would be installed, for the dry run's line.
fn install_words(target: &crate::install::InstallTarget) -> String {
    use crate::install::InstallTarget;
    match target {
        InstallTarget::Stage(dir) => format!("{} (staged, not installed)", dir.display()),
        InstallTarget::Root(root) => root.display().to_string(),
        InstallTarget::Roots(roots) if roots.is_empty() => {
            "this home only (`eval/installed`, linked for no agent: give --install-root or set `[eval] install_root`)".to_owned()
        }
        InstallTarget::Roots(roots) => roots
            .iter()
            .map(|r| r.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// Every `verdict.json` of samples 1..=n that exists.
///
/// # Errors
/// [`FileError`] naming a verdict that cannot be read or does not parse.
pub fn read_verdicts(dir: &Path, n: u32) -> Result<Vec<SampleVerdict>, FileError> {
    let mut out = Vec::new();
    for k in 1..=n {
        if let Some(v) = read_json(&sample_dir(dir, k).join(VERDICT_FILE))? {
            out.push(v);
        }
    }
    Ok(out)
}

/// On a fleet (`ships`), adds an arm's work dir and meta dir to `spec`'s files: sent to the
/// worker as the job dir's `work/` and `meta/`, delivered back at ingestion.
async fn ship_arm(
    env: &ForgeEnv<'_>,
    spec: &mut JobSpec,
    sample_dir: &Path,
    side: ArmSide,
    ships: bool,
) -> Result<(), ForgeError> {
    if !ships {
        return Ok(());
    }
    let (work, meta) = (arm_dir(sample_dir, side), meta_dir(sample_dir, side));
    let dirs = [
        ShippedDir {
            rel: SHIPPED_WORK,
            local: &work,
            send: true,
            deliver: true,
            skip: &[],
        },
        ShippedDir {
            rel: SHIPPED_META,
            local: &meta,
            send: true,
            deliver: true,
            skip: &[],
        },
    ];
    files::ship_dirs(env.queue.as_ref(), spec, &dirs)
        .await
        .map_err(|e| ForgeError::Environment(e.to_string()))
}

/// On a fleet, makes each arm's work dir the worker's copy before its verify is shipped: delivery
/// writes and never removes, so a file the agent deleted would otherwise reach the verify (and
/// the judge's diff) again ([`files::bring_back`]; idempotent, so a resumed forge repeats it).
async fn bring_back_arms(env: &ForgeEnv<'_>, ids: &[String]) -> Result<(), ForgeError> {
    for id in ids {
        let Some(job) = env.queue.get(id).await.map_err(env_err)? else {
            env.reporter.step(&format!("arm job {id} was pruned from the queue: its work dir stays as delivered (files it deleted cannot be known)"));
            continue;
        };
        let recorded = files::recorded_outputs(env.store, id)
            .await
            .map_err(|e| ForgeError::Environment(e.to_string()))?;
        files::bring_back(env.queue.as_ref(), &recorded, &job, SHIPPED_WORK, &[])
            .await
            .map_err(|e| ForgeError::Environment(e.to_string()))?;
    }
    Ok(())
}

/// Submits through the stage port (which records the job as the control plane's pending work).
async fn enqueue(env: &ForgeEnv<'_>, spec: &JobSpec) -> Result<String, ForgeError> {
    let enqueued = env.jobs.submit(spec).await.map_err(env_err)?;
    Ok(enqueued.job_id)
}

/// Checks that the ingestion of the jobs just waited for wrote `files` (the port's `wait` returns
/// only once their results are applied, so a missing file is a handler that did not write it).
fn applied(files: &[PathBuf]) -> Result<(), ForgeError> {
    let missing: Vec<String> = files
        .iter()
        .filter(|f| !f.exists())
        .map(|f| f.display().to_string())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(ForgeError::Environment(format!(
        "the jobs' results were applied but {} missing (did another control plane, with another home, apply them? see the log)",
        missing.join(", ")
    )))
}
