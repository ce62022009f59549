//! Turning a finished [`Evaluation`] into the contract score and failure packet (facts §1
//! `EvaluatorScore`, `EvaluatorFailurePacket`; seed "Evaluator profiles and structured failures":
//! structured failures carry reasons, hints, evidence, failed checks and stage status).
//!
//! * `contract_status` / `hard`: from the checks that ran (artifact and render): `failed` / 0.0
//!   when a required check failed, `error` (no `hard`) when a required check could not run,
//!   `passed` / 1.0 when some check ran; omitted when none ran (missing evidence stays missing).
//! * `quality_status` / `soft`: from a judge verdict (`passed` 1.0, `tie` 0.5, `failed` 0.0);
//!   `skipped` or `error` without `soft` otherwise. `judge_evaluator_id` (the runtime),
//!   `judge_prompt_version`, `judge_prompt_hash` only when the judge answered.
//! * `failure`: when a required check failed (`primary_reason` `required_check_failed`) or the
//!   judge said the output falls short (`judge_rejected`); `failed_checks` lists every failed
//!   check (`severity` `error` when required, `warning` otherwise), `optimizer_hint` joins the
//!   failed checks' hints (and the judge's reasoning), `stage_status` repeats the score's.

use serde_json::json;
use skillforge_contract::{EvaluatorCheckResult, EvaluatorFailurePacket, EvaluatorScore};

use super::checks::{CheckOutcome, CheckState};
use super::judge::{JudgeOutcome, JudgeVerdict};
use super::stages::{Evaluation, STAGE_JUDGE};

pub(super) fn assemble(evaluation: &Evaluation) -> EvaluatorScore {
    let checks: Vec<&CheckOutcome> = evaluation.checks.iter().chain(&evaluation.render).collect();
    let is_required = |state: CheckState| checks.iter().any(|c| c.required && c.state == state);
    let has_ran = checks
        .iter()
        .any(|c| matches!(c.state, CheckState::Passed | CheckState::Failed));
    let (contract_status, hard) = if is_required(CheckState::Failed) {
        ("failed", Some(0.0))
    } else if is_required(CheckState::Error) {
        ("error", None)
    } else if has_ran {
        ("passed", Some(1.0))
    } else {
        ("", None)
    };
    let stage_status: Vec<_> = evaluation.stages.iter().map(|s| s.to_contract()).collect();
    let mut score = EvaluatorScore {
        profile_id: evaluation.profile.profile_id.clone(),
        task_kind: evaluation.profile.task_kind.clone(),
        contract_status: contract_status.to_owned(),
        hard,
        stage_status: stage_status.clone(),
        metadata: Some(json!({"artifact_id": evaluation.artifact_id})),
        ..Default::default()
    };
    let mut judge_rejection: Option<String> = None;
    match &evaluation.judge {
        Some((
            request,
            JudgeOutcome::Verdict {
                verdict,
                reasoning,
                runtime,
                ..
            },
        )) => {
            score.quality_status = verdict.quality_status().to_owned();
            score.soft = Some(verdict.soft());
            score.judge_evaluator_id = runtime.clone();
            score.judge_prompt_version = request.prompt_version.clone();
            score.judge_prompt_hash = request.prompt_hash.clone();
            if *verdict == JudgeVerdict::FallsShort {
                judge_rejection = Some(reasoning.clone());
            }
        }
        Some((_, JudgeOutcome::Error { .. })) => {
            score.quality_status = CheckState::Error.as_str().into()
        }
        None => {
            let judge_stage = evaluation.stages.iter().find(|s| s.stage == STAGE_JUDGE);
            score.quality_status = judge_stage
                .map(|s| s.status.clone())
                .unwrap_or_else(|| "skipped".into());
        }
    }
    let failed: Vec<&&CheckOutcome> = checks
        .iter()
        .filter(|c| c.state == CheckState::Failed)
        .collect();
    let required_failed: Vec<&&&CheckOutcome> = failed.iter().filter(|c| c.required).collect();
    if required_failed.is_empty() && judge_rejection.is_none() {
        return score;
    }
    let mut hints: Vec<String> = required_failed
        .iter()
        .map(|c| c.optimizer_hint.clone())
        .filter(|h| !h.is_empty())
        .collect();
    let mut human: Vec<String> = required_failed
        .iter()
        .map(|c| format!("required check `{}` failed: {}", c.check_id, c.reason))
        .collect();
    let mut evidence = vec![format!("artifact `{}`", evaluation.artifact_id)];
    evidence.extend(failed.iter().flat_map(|c| {
        c.evidence
            .iter()
            .map(move |e| format!("{}: {e}", c.check_id))
    }));
    if let Some(reasoning) = &judge_rejection {
        let reasoning = if reasoning.trim().is_empty() {
            "no reasoning given"
        } else {
            reasoning.trim()
        };
        human.push(format!(
            "the judge found the output falls short: {reasoning}"
        ));
        hints.push(format!("Address the judge's concern: {reasoning}"));
        evidence.push(format!("judge: {reasoning}"));
    }
    let primary_reason = if required_failed.is_empty() {
        "judge_rejected"
    } else {
        "required_check_failed"
    };
    score.fail_reason = human.first().cloned().unwrap_or_default();
    score.failure = Some(EvaluatorFailurePacket {
        primary_reason: primary_reason.to_owned(),
        human_reason: human.join("; "),
        optimizer_hint: hints.join(" "),
        failed_checks: failed
            .iter()
            .map(|c| EvaluatorCheckResult {
                check: c.check_id.clone(),
                severity: if c.required { "error" } else { "warning" }.to_owned(),
                reason: c.reason.clone(),
                evidence: c.evidence.clone(),
                metadata: Some(json!({"type": c.check_type})),
            })
            .collect(),
        evidence,
        stage_status,
    });
    score
}
