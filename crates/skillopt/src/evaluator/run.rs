//! Evaluating a whole review run: the one entry point both `skillforge review evaluate` and
//! train mode (`train continue`, before the export — seed "Complete train-mode path" step 5,
//! between feedback (4) and the export (6)) call, so scores, failure packets and judge jobs are
//! the same whichever command asked.
//!
//! For every item of the run, every option (ranked runs) or the candidate output (A/B runs) is
//! evaluated in the stage order of [`super::Evaluation`] (S-101): artifact checks, render
//! adapters as `process` jobs, the judge as an `agent` job. Jobs go through the stage port
//! [`StageJobs`] (submit, then wait or return pending), which the CLI implements once. Scores are stored in the item's metadata:
//! an A/B item's candidate score in `metadata.evaluator_score` (one object), a ranked item's
//! option scores in `metadata.evaluator_scores` (label order, each score's `metadata.option`
//! naming its label). Both keys are what the export carries and `optimizer distill` reads; a
//! re-run replaces them (never appends). Judge jobs carry the idempotency key
//! `evaluate:<run>:<item>:<label>:<sha256 of the prompt>`, so re-evaluating unchanged outputs
//! returns the recorded verdicts instead of asking again.
//!
//! Render adapters (`playwright`, `render_smoke`) run as `process` jobs only when their tool is
//! on PATH (`config.tool`, default `playwright`) and `config.command` (argv) is given; the
//! command reads the artifact from the file named by `SKILLFORGE_ARTIFACT`, exit 0 = pass.
//! Otherwise they are recorded as skipped with the reason.

use std::path::Path;

use chrono::Utc;
use serde_json::{Map, Value, json};
use skillforge_contract::{EvaluatorCheckConfig, EvaluatorProfile, EvaluatorScore};
use skillforge_engine::{EngineError, Job, JobSpec, JobState};
use skillforge_runner::PayloadError;
use skillforge_runner_agent::AgentReport;
use skillforge_runner_process::ProcessPayload;
use skillforge_store::artifacts::get_artifact;
use skillforge_store::blobs::BlobStore;
use skillforge_store::review::{EvalRunRow, ReviewItem, list_items, set_item_metadata};
use skillforge_store::{Store, StoreError};

use super::checks::{CheckOutcome, CheckState};
use super::judge::{
    JUDGE_STAGE, JudgeOutcome, judge_job, judge_runtime_problem, parse_judge_verdict, prompt_hash,
};
use super::stages::{Artifact, Evaluation, JudgeStep, RenderStep, STAGE_RENDER};
use skillforge_stage::{Ran, StageDef, StageJobs, Wait, run_jobs};

/// Why a run could not be evaluated (a failing artifact is a result, not an error).
#[derive(Debug, thiserror::Error)]
pub enum EvalRunError {
    /// The run's data is inconsistent (an unregistered artifact, a vanished item).
    #[error("{0}")]
    Invalid(String),
    /// A blob or a file could not be read or written.
    #[error("{0}")]
    Env(String),
    /// A job was enqueued but the caller does not wait for it (train `--no-wait`); evaluating
    /// again later picks the same job up by its idempotency key.
    #[error("evaluator job {0} is still running")]
    Pending(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The queue failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// A job payload that does not serialize is invalid input (e.g. a path that is not UTF-8).
impl From<PayloadError> for EvalRunError {
    fn from(e: PayloadError) -> Self {
        EvalRunError::Invalid(e.to_string())
    }
}

impl From<sqlx::Error> for EvalRunError {
    fn from(e: sqlx::Error) -> Self {
        EvalRunError::Store(StoreError::from(e))
    }
}

/// Runs one evaluator job through the stage port: submit `spec` (its idempotency key may name a
/// job that already exists — then that job is the answer) and return it once finished, or
/// [`EvalRunError::Pending`] when the caller does not wait and it is still running.
async fn run_job(jobs: &dyn StageJobs, wait: Wait, spec: &JobSpec) -> Result<Job, EvalRunError> {
    match run_jobs(jobs, std::slice::from_ref(spec), wait, "evaluating").await? {
        Ran::Done(mut done) => Ok(done.remove(0)),
        Ran::Pending(mut ids) => Err(EvalRunError::Pending(ids.remove(0))),
    }
}

/// What evaluating a run did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunEvaluation {
    /// One summary per evaluated artifact (`item_id`, `option`, statuses, stages, failure).
    pub evaluations: Vec<Value>,
    /// Engine jobs the evaluation used (judge and render jobs), in order.
    pub job_ids: Vec<String>,
    /// How many scores carry a failure packet.
    pub n_failures: usize,
}

/// One evaluated artifact: its label (`candidate` for A/B items) and artifact id.
struct Target {
    label: String,
    artifact_id: String,
}

fn targets(item: &ReviewItem) -> Vec<Target> {
    if !item.options.is_empty() {
        return item
            .options
            .iter()
            .map(|o| Target {
                label: o.label.clone(),
                artifact_id: o.artifact_id.clone(),
            })
            .collect();
    }
    let candidate = &item.item.candidate_artifact_id;
    if candidate.is_empty() {
        return Vec::new();
    }
    vec![Target {
        label: "candidate".into(),
        artifact_id: candidate.clone(),
    }]
}

/// Evaluates every item of `run` with `profile` (judge on `runtime`, none ⇒ the judge stage is
/// skipped with a reason) and stores the scores in the items' metadata, one store transaction
/// per item; jobs run through `jobs`, waited for unless `wait` is [`Wait::Return`]. `home` holds the blobs and the render adapters' artifact copies
/// (`<home>/evaluate/<run>/<item>/<label>/artifact`).
///
/// # Errors
/// See [`EvalRunError`]; items evaluated before the error keep their new scores (a re-run
/// replaces them and reuses finished judge jobs).
pub async fn evaluate_run(
    store: &Store,
    home: &Path,
    run: &EvalRunRow,
    profile: &EvaluatorProfile,
    runtime: Option<&str>,
    jobs: &dyn StageJobs,
    wait: Wait,
) -> Result<RunEvaluation, EvalRunError> {
    let stages = super::defs::for_home(home).map_err(|e| EvalRunError::Invalid(e.to_string()))?;
    let items = list_items(store.pool(), &run.id).await?;
    let blobs = BlobStore::in_home(home);
    let mut out = RunEvaluation::default();
    for item in &items {
        let item_id = item.item.item_id.clone();
        let mut scores: Vec<(String, EvaluatorScore)> = Vec::new();
        for target in targets(item) {
            let row = get_artifact(store.pool(), &target.artifact_id)
                .await?
                .ok_or_else(|| {
                    EvalRunError::Invalid(format!(
                        "artifact `{}` of item `{item_id}` is not registered",
                        target.artifact_id
                    ))
                })?;
            let bytes = blobs.get(&row.hash).map_err(|e| {
                EvalRunError::Env(format!("read blob of artifact `{}`: {e}", row.id))
            })?;
            let title = if item.item.title.is_empty() {
                item_id.as_str()
            } else {
                item.item.title.as_str()
            };
            let artifact = Artifact {
                id: &target.artifact_id,
                title,
                bytes: &bytes,
            };
            let mut evaluation = Evaluation::start(profile, &artifact);
            let started_at = Utc::now();
            let mut outcomes = Vec::new();
            for step in evaluation.render_steps() {
                outcomes.push(match step {
                    RenderStep::Skip(outcome) => outcome,
                    RenderStep::Run(check) => {
                        let place = home
                            .join("evaluate")
                            .join(&run.id)
                            .join(&item_id)
                            .join(&target.label);
                        run_render(
                            (jobs, wait),
                            stages.stage(STAGE_RENDER),
                            &check,
                            &place,
                            &bytes,
                            &mut out.job_ids,
                        )
                        .await?
                    }
                });
            }
            evaluation.record_render(outcomes, started_at, Utc::now());
            let problem = runtime.and_then(judge_runtime_problem);
            match evaluation.judge_step(runtime, problem) {
                JudgeStep::Skip(reason) => evaluation.record_judge_skip(&reason, Utc::now()),
                JudgeStep::Run(request) => {
                    let started_at = Utc::now();
                    let key = format!(
                        "evaluate:{}:{item_id}:{}:{}",
                        run.id,
                        target.label,
                        prompt_hash(&request.prompt)
                    );
                    let spec = judge_job(stages.stage(JUDGE_STAGE), &request, key)?;
                    let job = run_job(jobs, wait, &spec).await?;
                    push_unique(&mut out.job_ids, &job.id);
                    let outcome = judge_outcome(&job);
                    evaluation.record_judge(request, outcome, started_at, Utc::now());
                }
            }
            let mut score = evaluation.finish();
            score.metadata =
                Some(json!({"artifact_id": target.artifact_id, "option": target.label}));
            out.n_failures += usize::from(score.failure.is_some());
            out.evaluations
                .push(summary(&item_id, &target.label, &score));
            scores.push((target.label, score));
        }
        if scores.is_empty() {
            continue;
        }
        let metadata = item_metadata(&item.item.metadata_json, !item.options.is_empty(), &scores)?;
        let mut tx = store.begin().await?;
        if !set_item_metadata(&mut tx, &run.id, &item_id, &metadata).await? {
            return Err(EvalRunError::Invalid(format!(
                "review run `{}` has no item `{item_id}`",
                run.id
            )));
        }
        tx.commit().await?;
    }
    Ok(out)
}

fn push_unique(ids: &mut Vec<String>, id: &str) {
    if !ids.iter().any(|i| i == id) {
        ids.push(id.to_owned());
    }
}

/// The item's metadata object with `evaluator_score` (A/B) or `evaluator_scores` (ranked)
/// replaced; other keys kept.
fn item_metadata(
    existing: &str,
    is_ranked: bool,
    scores: &[(String, EvaluatorScore)],
) -> Result<String, EvalRunError> {
    let mut map = match serde_json::from_str::<Value>(existing) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    map.remove("evaluator_score");
    map.remove("evaluator_scores");
    let to_value = |s: &EvaluatorScore| {
        serde_json::to_value(s)
            .map_err(|e| EvalRunError::Invalid(format!("serialize evaluator score: {e}")))
    };
    if is_ranked {
        let list = scores
            .iter()
            .map(|(_, s)| to_value(s))
            .collect::<Result<Vec<_>, _>>()?;
        map.insert("evaluator_scores".into(), Value::Array(list));
    } else if let Some((_, score)) = scores.first() {
        map.insert("evaluator_score".into(), to_value(score)?);
    }
    Ok(Value::Object(map).to_string())
}

/// The judge's verdict from a finished `agent` job; anything else is a stage error.
fn judge_outcome(job: &Job) -> JudgeOutcome {
    let job_id = job.id.clone();
    let report = job
        .outcome
        .as_ref()
        .and_then(|o| serde_json::from_value::<AgentReport>(o.detail.clone()).ok());
    if job.state != JobState::Succeeded {
        let why = job
            .error
            .clone()
            .unwrap_or_else(|| format!("ended {}", job.state));
        return JudgeOutcome::Error {
            reason: format!("judge job failed: {why}"),
            job_id,
        };
    }
    let Some(report) = report else {
        return JudgeOutcome::Error {
            reason: "judge job left no agent report".into(),
            job_id,
        };
    };
    let Some(message) = report.final_message.as_deref() else {
        return JudgeOutcome::Error {
            reason: "judge verdict unreadable: no final message".into(),
            job_id,
        };
    };
    match parse_judge_verdict(message) {
        Ok((verdict, reasoning)) => JudgeOutcome::Verdict {
            verdict,
            reasoning,
            runtime: report.runtime,
            family: report.family,
            job_id,
        },
        Err(e) => JudgeOutcome::Error {
            reason: e.to_string(),
            job_id,
        },
    }
}

/// Runs render adapter `check` as a `process` job when its tool is present and a command is
/// configured (the artifact copied to `dir/artifact`); otherwise a `skipped` outcome with the
/// reason.
async fn run_render(
    (jobs, wait): (&dyn StageJobs, Wait),
    stage: &StageDef,
    check: &EvaluatorCheckConfig,
    dir: &Path,
    bytes: &[u8],
    job_ids: &mut Vec<String>,
) -> Result<CheckOutcome, EvalRunError> {
    let config = check.config.clone().unwrap_or(Value::Null);
    let tool = config
        .get("tool")
        .and_then(Value::as_str)
        .unwrap_or("playwright")
        .to_owned();
    if !on_path(&tool) {
        return Ok(CheckOutcome::new(
            check,
            CheckState::Skipped,
            format!("render tool `{tool}` not found on PATH"),
        ));
    }
    let command: Vec<String> = config
        .get("command")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    if command.is_empty() {
        return Ok(CheckOutcome::new(
            check,
            CheckState::Skipped,
            format!(
                "render tool `{tool}` is present but check `{}` configures no `command`",
                check.id
            ),
        ));
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| EvalRunError::Env(format!("create `{}`: {e}", dir.display())))?;
    let path = dir.join("artifact");
    std::fs::write(&path, bytes)
        .map_err(|e| EvalRunError::Env(format!("write `{}`: {e}", path.display())))?;
    let mut payload = ProcessPayload::argv(command);
    payload
        .env
        .insert("SKILLFORGE_ARTIFACT".into(), path.display().to_string());
    payload.cwd = Some(dir.to_path_buf());
    let mut spec = stage.job(&payload, None)?;
    if let Some(secs) = config.get("timeout_secs").and_then(Value::as_u64) {
        spec.timeout_ms = (secs + stage.setup_secs) * 1000;
    }
    let job = run_job(jobs, wait, &spec).await?;
    push_unique(job_ids, &job.id);
    let tail = job
        .outcome
        .as_ref()
        .map(|o| format!("{}{}", o.stdout_tail, o.stderr_tail))
        .unwrap_or_default();
    let mut outcome = if job.state == JobState::Succeeded {
        CheckOutcome::new(
            check,
            CheckState::Passed,
            format!("render command exited 0 (job {})", job.id),
        )
    } else {
        let why = job
            .error
            .clone()
            .unwrap_or_else(|| format!("ended {}", job.state));
        let mut failed = CheckOutcome::new(
            check,
            CheckState::Failed,
            format!("render command failed: {why}"),
        );
        failed.optimizer_hint = config
            .get("optimizer_hint")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| format!("Make the output pass the `{}` render check.", check.id));
        failed
    };
    let tail = tail.trim();
    if !tail.is_empty() {
        outcome.evidence.push(
            tail.chars()
                .rev()
                .take(400)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect(),
        );
    }
    Ok(outcome)
}

fn on_path(program: &str) -> bool {
    if program.contains('/') {
        return Path::new(program).is_file();
    }
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// One evaluated artifact's report line: item, option, statuses, stage statuses, failure.
fn summary(item_id: &str, label: &str, score: &EvaluatorScore) -> Value {
    let stage = |name: &str| {
        score
            .stage_status
            .iter()
            .find(|s| s.stage == name)
            .map(|s| s.status.clone())
    };
    json!({
        "item_id": item_id,
        "option": label,
        "contract_status": score.contract_status,
        "quality_status": score.quality_status,
        "hard": score.hard,
        "soft": score.soft,
        "stages": {"artifact_checks": stage("artifact_checks"), "render": stage("render"), "judge": stage("judge")},
        "failure": score.failure.as_ref().map(|f| json!({"primary_reason": f.primary_reason, "optimizer_hint": f.optimizer_hint})),
    })
}
