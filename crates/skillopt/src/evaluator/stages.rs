//! The stage machine of one evaluation: artifact checks → render adapters → judge, in that
//! order, each recorded with its times and details (S-101). [`Evaluation`] runs stage 1 itself
//! (pure), tells the caller which render adapters and whether the judge are due, takes their
//! results back, and [`Evaluation::finish`]es into a contract score.

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Value, json};
use skillforge_contract::{
    EvaluatorCheckConfig, EvaluatorProfile, EvaluatorScore, EvaluatorStageStatus,
};

use super::checks::{CheckOutcome, CheckState, run_artifact_check};
use super::judge::{JudgeOutcome, JudgeRequest, judge_prompt, judge_rubric, prompt_hash};
use super::profile::{CheckClass, check_class};
use super::score::assemble;

/// Stage 1: cheap artifact checks.
pub const STAGE_ARTIFACT_CHECKS: &str = "artifact_checks";
/// Stage 2: render adapters.
pub const STAGE_RENDER: &str = "render";
/// Stage 3: the LLM judge.
pub const STAGE_JUDGE: &str = "judge";

/// The artifact under evaluation.
#[derive(Debug, Clone, Copy)]
pub struct Artifact<'a> {
    /// Artifact id (recorded as evidence).
    pub id: &'a str,
    /// What the item is about (shown to the judge; never the option's blind label).
    pub title: &'a str,
    /// The artifact's bytes.
    pub bytes: &'a [u8],
}

/// A render adapter the caller must run, or the recorded reason it does not run.
#[derive(Debug, Clone, PartialEq)]
pub enum RenderStep {
    /// Run this check if its tool is present (absent ⇒ a `skipped` outcome with the reason).
    Run(EvaluatorCheckConfig),
    /// Not run; the outcome (state `skipped`) says why.
    Skip(CheckOutcome),
}

/// Whether the judge runs, and with what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JudgeStep {
    /// Run this request through the `agent` runner.
    Run(JudgeRequest),
    /// Not invoked, with the reason recorded in `stage_status`.
    Skip(String),
}

#[derive(Debug, Clone)]
pub(super) struct StageRecord {
    pub(super) stage: &'static str,
    pub(super) status: String,
    pub(super) started_at: DateTime<Utc>,
    pub(super) finished_at: DateTime<Utc>,
    pub(super) details: Value,
}

impl StageRecord {
    pub(super) fn to_contract(&self) -> EvaluatorStageStatus {
        EvaluatorStageStatus {
            stage: self.stage.to_owned(),
            status: self.status.clone(),
            started_at: self.started_at.to_rfc3339_opts(SecondsFormat::Millis, true),
            finished_at: self
                .finished_at
                .to_rfc3339_opts(SecondsFormat::Millis, true),
            duration_ms: (self.finished_at - self.started_at)
                .num_milliseconds()
                .max(0),
            details: Some(self.details.clone()),
        }
    }
}

/// One artifact's evaluation in progress. Stage 1 runs in [`Evaluation::start`]; the caller then
/// records stage 2 ([`Evaluation::render_steps`] → [`Evaluation::record_render`]) and stage 3
/// ([`Evaluation::judge_step`] → [`Evaluation::record_judge`]) and calls [`Evaluation::finish`].
/// A stage the caller never recorded is reported as `skipped` ("not run").
#[derive(Debug, Clone)]
pub struct Evaluation {
    pub(super) profile: EvaluatorProfile,
    pub(super) artifact_id: String,
    title: String,
    text: Option<String>,
    pub(super) checks: Vec<CheckOutcome>,
    pub(super) render: Vec<CheckOutcome>,
    pub(super) stages: Vec<StageRecord>,
    pub(super) judge: Option<(JudgeRequest, JudgeOutcome)>,
}

impl Evaluation {
    /// Starts evaluating `artifact` against `profile` and runs stage 1 now: every
    /// artifact-class check in profile order ([`run_artifact_check`]); unknown check types are
    /// recorded as `skipped`.
    pub fn start(profile: &EvaluatorProfile, artifact: &Artifact<'_>) -> Self {
        let started_at = Utc::now();
        let mut checks = Vec::new();
        for check in &profile.checks {
            match check_class(&check.check_type) {
                CheckClass::Artifact => checks.push(run_artifact_check(check, artifact.bytes)),
                CheckClass::Unknown => checks.push(CheckOutcome::new(
                    check,
                    CheckState::Skipped,
                    format!("unknown check type `{}`; not evaluated", check.check_type),
                )),
                CheckClass::Render => {}
            }
        }
        let empty_reason = "the profile has no artifact checks";
        let stage = stage_record(
            STAGE_ARTIFACT_CHECKS,
            &checks,
            empty_reason,
            started_at,
            Utc::now(),
        );
        Self {
            profile: profile.clone(),
            artifact_id: artifact.id.to_owned(),
            title: artifact.title.to_owned(),
            text: std::str::from_utf8(artifact.bytes).ok().map(str::to_owned),
            checks,
            render: Vec::new(),
            stages: vec![stage],
            judge: None,
        }
    }

    /// Required checks (of stages run so far) that did not pass: `(check id, state)`.
    pub fn required_not_passed(&self) -> Vec<(String, CheckState)> {
        self.checks
            .iter()
            .chain(&self.render)
            .filter(|c| c.required && matches!(c.state, CheckState::Failed | CheckState::Error))
            .map(|c| (c.check_id.clone(), c.state))
            .collect()
    }

    /// Stage 2's plan: each render-class check in profile order, `Run` unless a required artifact
    /// check did not pass (then `Skip`, unless the check says `when: always`).
    pub fn render_steps(&self) -> Vec<RenderStep> {
        let blocked = self.required_not_passed();
        self.profile
            .checks
            .iter()
            .filter(|c| check_class(&c.check_type) == CheckClass::Render)
            .map(|check| {
                if blocked.is_empty() || check.when.trim().eq_ignore_ascii_case("always") {
                    RenderStep::Run(check.clone())
                } else {
                    RenderStep::Skip(CheckOutcome::new(
                        check,
                        CheckState::Skipped,
                        format!("required check {} did not pass; render adapters run only when checks pass", id_list(&blocked)),
                    ))
                }
            })
            .collect()
    }

    /// Records stage 2: `outcomes` of every render step (skips included), run between
    /// `started_at` and `finished_at`.
    pub fn record_render(
        &mut self,
        outcomes: Vec<CheckOutcome>,
        started_at: DateTime<Utc>,
        finished_at: DateTime<Utc>,
    ) {
        let stage = stage_record(
            STAGE_RENDER,
            &outcomes,
            "the profile has no render adapters",
            started_at,
            finished_at,
        );
        self.render = outcomes;
        self.stages.retain(|s| s.stage != STAGE_RENDER);
        self.stages.push(stage);
    }

    /// Stage 3's plan. In order: no `judge` in the profile, a required check that did not pass
    /// (unless `judge.when` is `always`), an artifact that is not UTF-8 text, no `runtime`, and
    /// `runtime_problem` each give `Skip` with that reason; otherwise `Run` with the prompt.
    pub fn judge_step(&self, runtime: Option<&str>, runtime_problem: Option<String>) -> JudgeStep {
        let Some(judge) = &self.profile.judge else {
            return JudgeStep::Skip("the profile has no judge".into());
        };
        let blocked = self.required_not_passed();
        let when = if judge.when.trim().is_empty() {
            "checks_pass"
        } else {
            judge.when.trim()
        };
        if !blocked.is_empty() && !when.eq_ignore_ascii_case("always") {
            return JudgeStep::Skip(format!(
                "required check {} did not pass; the judge runs only when checks pass (when: {when})",
                id_list(&blocked)
            ));
        }
        let Some(text) = &self.text else {
            return JudgeStep::Skip("the artifact is not UTF-8 text".into());
        };
        let Some(runtime) = runtime.map(str::trim).filter(|r| !r.is_empty()) else {
            return JudgeStep::Skip(
                "no judge runtime configured (pass --judge-runtime or set `judge_runtime` in the run metadata)".into(),
            );
        };
        if let Some(problem) = runtime_problem {
            return JudgeStep::Skip(problem);
        }
        let (rubric, prompt_version) = judge_rubric(&self.profile);
        let title = if self.title.is_empty() {
            self.artifact_id.as_str()
        } else {
            self.title.as_str()
        };
        JudgeStep::Run(JudgeRequest {
            runtime: runtime.to_owned(),
            model: Some(judge.model.trim().to_owned()).filter(|m| !m.is_empty()),
            prompt: judge_prompt(&self.profile, &rubric, title, text),
            prompt_version,
            prompt_hash: prompt_hash(&rubric),
        })
    }

    /// Records a judge stage that was not invoked, at `at`.
    pub fn record_judge_skip(&mut self, reason: &str, at: DateTime<Utc>) {
        self.stages.retain(|s| s.stage != STAGE_JUDGE);
        self.stages.push(StageRecord {
            stage: STAGE_JUDGE,
            status: CheckState::Skipped.as_str().into(),
            started_at: at,
            finished_at: at,
            details: json!({ "reason": reason }),
        });
    }

    /// Records the judge's run of `request`, between `started_at` and `finished_at`.
    pub fn record_judge(
        &mut self,
        request: JudgeRequest,
        outcome: JudgeOutcome,
        started_at: DateTime<Utc>,
        finished_at: DateTime<Utc>,
    ) {
        let (status, details) = match &outcome {
            JudgeOutcome::Verdict {
                verdict,
                reasoning,
                runtime,
                family,
                job_id,
            } => (
                verdict.quality_status().to_owned(),
                json!({"runtime": runtime, "family": family, "job_id": job_id, "verdict": verdict.as_str(),
                       "reasoning": reasoning, "judge_prompt_version": request.prompt_version,
                       "judge_prompt_hash": request.prompt_hash}),
            ),
            JudgeOutcome::Error { reason, job_id } => (
                CheckState::Error.as_str().to_owned(),
                json!({"runtime": request.runtime, "job_id": job_id, "reason": reason}),
            ),
        };
        self.stages.retain(|s| s.stage != STAGE_JUDGE);
        self.stages.push(StageRecord {
            stage: STAGE_JUDGE,
            status,
            started_at,
            finished_at,
            details,
        });
        self.judge = Some((request, outcome));
    }

    /// The score: stages in order (a stage never recorded is `skipped`, "not run"), `hard` from
    /// the checks that ran, `soft` from a judge verdict, a failure packet when a required check
    /// failed or the judge found the output falls short (see `score.rs`).
    pub fn finish(mut self) -> EvaluatorScore {
        let now = Utc::now();
        for stage in [STAGE_RENDER, STAGE_JUDGE] {
            if !self.stages.iter().any(|s| s.stage == stage) {
                self.stages.push(StageRecord {
                    stage,
                    status: CheckState::Skipped.as_str().into(),
                    started_at: now,
                    finished_at: now,
                    details: json!({"reason": "not run"}),
                });
            }
        }
        let rank = |s: &str| {
            [STAGE_ARTIFACT_CHECKS, STAGE_RENDER, STAGE_JUDGE]
                .iter()
                .position(|x| *x == s)
        };
        self.stages.sort_by_key(|s| rank(s.stage));
        assemble(&self)
    }
}

/// Drives the stages an [`Evaluation`] asks for, for synchronous callers and tests.
pub trait StageEnv {
    /// Runs render adapter `check` on `artifact`; a missing tool returns a `skipped` outcome.
    fn render(&mut self, check: &EvaluatorCheckConfig, artifact: &Artifact<'_>) -> CheckOutcome;
    /// The judge runtime to use, if any.
    fn judge_runtime(&self) -> Option<String>;
    /// Why `runtime` cannot judge here, or `None`.
    fn judge_runtime_problem(&self, runtime: &str) -> Option<String>;
    /// Runs the judge.
    fn judge(&mut self, request: &JudgeRequest) -> JudgeOutcome;
}

/// Evaluates `artifact` against `profile` through all three stages in order, with `env` running
/// render adapters and the judge. Never fails: what could not run is recorded in the score.
pub fn evaluate(
    profile: &EvaluatorProfile,
    artifact: &Artifact<'_>,
    env: &mut dyn StageEnv,
) -> EvaluatorScore {
    let mut evaluation = Evaluation::start(profile, artifact);
    let started_at = Utc::now();
    let outcomes = evaluation
        .render_steps()
        .into_iter()
        .map(|step| match step {
            RenderStep::Run(check) => env.render(&check, artifact),
            RenderStep::Skip(outcome) => outcome,
        })
        .collect();
    evaluation.record_render(outcomes, started_at, Utc::now());
    let runtime = env.judge_runtime();
    let problem = runtime
        .as_deref()
        .and_then(|r| env.judge_runtime_problem(r));
    match evaluation.judge_step(runtime.as_deref(), problem) {
        JudgeStep::Skip(reason) => evaluation.record_judge_skip(&reason, Utc::now()),
        JudgeStep::Run(request) => {
            let started_at = Utc::now();
            let outcome = env.judge(&request);
            evaluation.record_judge(request, outcome, started_at, Utc::now());
        }
    }
    evaluation.finish()
}

fn id_list(checks: &[(String, CheckState)]) -> String {
    checks
        .iter()
        .map(|(id, _)| format!("`{id}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A check stage's record: `failed` when a required check failed, else `error` when a required
/// check errored, else `passed` when any check ran, else `skipped` (with `empty_reason` when
/// there were no checks).
fn stage_record(
    stage: &'static str,
    outcomes: &[CheckOutcome],
    empty_reason: &str,
    started_at: DateTime<Utc>,
    finished_at: DateTime<Utc>,
) -> StageRecord {
    let has_required = |state: CheckState| outcomes.iter().any(|c| c.required && c.state == state);
    let has_ran = outcomes
        .iter()
        .any(|c| matches!(c.state, CheckState::Passed | CheckState::Failed));
    let status = if has_required(CheckState::Failed) {
        CheckState::Failed
    } else if has_required(CheckState::Error) {
        CheckState::Error
    } else if has_ran {
        CheckState::Passed
    } else {
        CheckState::Skipped
    };
    let details = if outcomes.is_empty() {
        json!({ "reason": empty_reason })
    } else {
        json!({ "checks": outcomes.iter().map(check_details).collect::<Vec<_>>() })
    };
    StageRecord {
        stage,
        status: status.as_str().to_owned(),
        started_at,
        finished_at,
        details,
    }
}

fn check_details(c: &CheckOutcome) -> Value {
    let mut v = json!({"id": c.check_id, "type": c.check_type, "required": c.required, "status": c.state.as_str(), "reason": c.reason});
    if !c.evidence.is_empty() {
        v["evidence"] = json!(c.evidence);
    }
    v
}
