//! The notify seam every candidate import goes through (seed: SkillOpt, "Promotion policy +
//! notifications"; S-51, S-52, S-54..S-60, S-63; facts §7): `import`, `train continue` (and its
//! recovery), `demo` and `candidate decide` call [`after_import`] once the import has returned,
//! never inside it.

use serde::Serialize;
use skillforge_store::Store;
use skillforge_store::bandit::{ArmRow, get_arm};
use skillforge_store::candidates::{
    CandidateRow, DecisionOutcome, get_candidate, promote_candidate,
};
use skillforge_store::promotion::{CanaryStart, auto_trace_counts, start_canary};
use skillforge_store::templates::{begin_write, current_version};

use super::auto_promote::{
    AutoTraceEvidence, BanditEvidence, Decision, Evidence, GATE_STEP, JudgeEvidence, PACE_STEP,
    Stop, decide,
};
use super::events::{Detail, Event, EventKind};
use super::notify::{PromotionEnv, PromotionError, emit, emit_on_change};
use crate::ab::bandit::{Arm, Confidence, NOTIFY_SEED};
use crate::distill::run::SCORE_UNAVAILABLE_KEY;
use crate::gate::GATE_BLOCKED;
use skillforge_contract::pace::{PACE_BLOCKED, Pace, PaceReport, Pair};

/// What the seam did for one candidate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SeamReport {
    /// The guardrails' decision; `None` when the version is not an imported candidate.
    pub decision: Option<Decision>,
    /// Why, in one line.
    pub reason: String,
    /// Set when the guardrails passed but nothing could change: another canary of the template
    /// runs (issue 37 item 4), or the store refused the canary; says which.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked: Option<String>,
}

impl SeamReport {
    /// Whether the guardrails stopped at step 1 (`auto_promote` off: the default, nothing to say).
    pub fn is_manual(&self) -> bool {
        matches!(&self.decision, Some(Decision::Notify(stop)) if stop.step == 1)
    }
}

/// The evidence the guardrails read for candidate `version_id` (S-54, S-63): the auto-trace run
/// only (a read error ⇒ unavailable), the candidate's score, and the bandit confidence when the
/// challenger arm exists (Monte Carlo at the notify seam's fixed seed 473; exact when possible),
/// and, when a measured judge is required, the judges of its `--judge-only` picks (S-59).
/// Also returns the real-CI positives counted (`None` when the run could not be read), which the
/// decision events carry.
async fn evidence(
    store: &Store,
    candidate: &CandidateRow,
    env_requires_measured_judge: bool,
) -> Result<(Evidence, Option<u64>), PromotionError> {
    let (template_id, version_id, score, base) = (
        candidate.template_id.as_str(),
        candidate.version_id.as_str(),
        candidate.score,
        candidate.base_version_id.as_str(),
    );
    let score_unavailable =
        serde_json::from_str::<serde_json::Value>(&candidate.summary_metadata_json)
            .ok()
            .and_then(|m| {
                m.get(SCORE_UNAVAILABLE_KEY)
                    .and_then(serde_json::Value::as_str)
                    .map(str::to_owned)
            });
    let counts = auto_trace_counts(store.pool(), version_id).await;
    let real_ci_positives = counts
        .as_ref()
        .ok()
        .map(|c| if c.run_exists { c.real_ci_positives } else { 0 });
    let feedback = match counts {
        Ok(c) if c.run_exists => Ok(AutoTraceEvidence {
            samples: c.samples,
            has_real_ci_positive: c.real_ci_positives > 0,
        }),
        Ok(_) => Ok(AutoTraceEvidence::default()),
        Err(e) => Err(e.to_string()),
    };
    let champion = current_version(store.pool(), template_id).await?;
    let stale_base = match &champion {
        Some(c) if !base.is_empty() && c.id != base && c.id != version_id => {
            Some((base.to_owned(), c.id.clone()))
        }
        _ => None,
    };
    let arm = |r: ArmRow| Arm {
        alpha: r.alpha,
        beta: r.beta,
        pulls: u64::try_from(r.pulls).unwrap_or(0),
    };
    let confidence = match (
        get_arm(store.pool(), template_id, version_id).await?,
        champion,
    ) {
        (Some(challenger), Some(champion)) => {
            let champion_arm = get_arm(store.pool(), template_id, &champion.id)
                .await?
                .map_or(Arm::PRIOR, arm);
            let challenger_arm = arm(challenger);
            let c = Confidence::compute(challenger_arm, champion_arm, 0, NOTIFY_SEED);
            Some(BanditEvidence {
                probability: c.probability(),
                pulls: challenger_arm.pulls,
            })
        }
        _ => None,
    };
    // S-59 step 3: read only when a measured judge is required (off ⇒ nothing read).
    let judges = if env_requires_measured_judge {
        let agreements = crate::ab::agreement::by_judge(
            &skillforge_store::judge_verdicts::paired_picks(store.pool()).await?,
        );
        skillforge_store::judge_verdicts::judge_only_judges(
            store.pool(),
            version_id,
            crate::ab::pick::JUDGE_SOURCE,
            crate::ab::pick::HUMAN_SOURCE,
        )
        .await?
        .into_iter()
        .map(|judge| JudgeEvidence {
            agreement: judge
                .as_ref()
                .and_then(|j| agreements.get(j).copied())
                .unwrap_or_else(|| crate::ab::agreement::Agreement::of(&[])),
            judge,
        })
        .collect()
    } else {
        Vec::new()
    };
    Ok((
        Evidence {
            feedback,
            score,
            score_unavailable,
            confidence,
            stale_base,
            judges,
        },
        real_ci_positives,
    ))
}

/// PACE over the candidate's A/B picks against the current champion, in the order they were
/// recorded (each pick is one paired comparison; issue 34 item 10). No champion ⇒ no pairs.
///
/// # Errors
/// [`PromotionError::Store`].
pub async fn pace_of_picks(
    store: &Store,
    candidate: &CandidateRow,
    pace: Pace,
) -> Result<PaceReport, PromotionError> {
    let picks = match current_version(store.pool(), &candidate.template_id).await? {
        Some(champion) => {
            skillforge_store::gates::pick_sequence(
                store.pool(),
                &candidate.version_id,
                &champion.id,
            )
            .await?
        }
        None => Vec::new(),
    };
    Ok(pace.run(
        picks
            .into_iter()
            .map(|won| if won { Pair::Win } else { Pair::Loss }),
    ))
}

/// The notify seam (S-51, S-52, facts §7): runs after an import has returned. Decides, emits
/// `candidate.awaiting_promotion` (when `[events]` is configured; again only when the guardrail
/// that blocks the candidate changed, issue 37 item 11), and on a guardrails
/// pass promotes through the normal path (direct, `candidate.auto_promoted`) or starts a canary
/// (`candidate.canary_started`). Idempotent: an event is sent once, a version already promoted
/// or already a canary is not changed again.
///
/// # Errors
/// [`PromotionError::Store`] when the store fails while reading evidence or applying a decision.
pub async fn after_import(
    env: &PromotionEnv<'_>,
    version_id: &str,
) -> Result<SeamReport, PromotionError> {
    let store = env.store;
    let Some(candidate) = get_candidate(store.pool(), version_id).await? else {
        return Ok(SeamReport {
            decision: None,
            reason: "not an imported candidate".to_owned(),
            blocked: None,
        });
    };
    let (evidence, real_ci_positives) = evidence(
        store,
        &candidate,
        env.policy.guardrails.require_measured_judge == Some(true),
    )
    .await?;
    let decision = decide(&env.policy.guardrails, &evidence);
    // facts §7: a promotion the guardrails pass must also be committed by PACE when it is on
    // (issue 34 item 10); off ⇒ nothing read, nothing recorded.
    let pace = match (&decision, env.policy.pace) {
        (Decision::Promote { .. }, Some(pace)) => {
            Some(pace_of_picks(store, &candidate, pace).await?)
        }
        _ => None,
    };
    let decision = match &pace {
        Some(report) if !report.committed() => Decision::Notify(Stop {
            step: PACE_STEP,
            reason: format!("{PACE_BLOCKED}: {}", report.reason),
        }),
        _ => decision,
    };
    // facts §7: then the replay gate, when on: an accepted gate run against the current champion
    // (issue 34 item 11).
    let gate_on = env.policy.gate_enabled && matches!(decision, Decision::Promote { .. });
    let gate_run = match gate_on {
        true => match current_version(store.pool(), &candidate.template_id).await? {
            Some(champion) => {
                skillforge_store::gates::accepted_gate_run(store.pool(), version_id, &champion.id)
                    .await?
                    .map(|r| r.id)
            }
            None => None,
        },
        false => None,
    };
    let decision = if gate_on && gate_run.is_none() {
        Decision::Notify(Stop {
            step: GATE_STEP,
            reason: format!(
                "{GATE_BLOCKED}: no accepted replay gate run against the current champion (run `skillforge candidate gate {version_id}`)"
            ),
        })
    } else {
        decision
    };
    // Issue 37 item 11: every decision event carries the counts and rates it decided on.
    let base = Detail {
        score: candidate.score,
        samples: evidence.feedback.as_ref().ok().map(|f| f.samples),
        confidence: evidence.confidence.map(|c| c.probability),
        pulls: evidence.confidence.map(|c| c.pulls),
        external_ci: evidence
            .feedback
            .as_ref()
            .ok()
            .map(|f| f.has_real_ci_positive),
        real_ci_positives,
        pace: pace.clone(),
        gate_run: gate_run.clone(),
        ..Detail::default()
    };
    let reason = match &decision {
        Decision::Notify(stop) => format!("notify only: {}", stop.reason),
        Decision::Promote {
            canary_sample: Some(s),
        } => format!("guardrails pass: canary at {s}"),
        Decision::Promote {
            canary_sample: None,
        } => "guardrails pass: promote".to_owned(),
    };
    // Sent again whenever the guardrail that blocks the candidate changes (issue 37 item 11).
    let guardrail = decision.guardrail();
    let awaiting_detail = Detail {
        guardrail: Some(guardrail.to_owned()),
        ..base.clone()
    }
    .with_reason(&reason);
    let awaiting = Event::new(
        EventKind::AwaitingPromotion,
        version_id,
        &candidate.template_id,
        awaiting_detail,
    );
    // A pass is no reason to say "awaiting" again (its canary or promotion event says what
    // happened); it is said only for a candidate that was never announced (S-52).
    let is_announced = skillforge_store::promotion::event_detail(
        store.pool(),
        EventKind::AwaitingPromotion.name(),
        version_id,
    )
    .await?
    .is_some();
    if matches!(decision, Decision::Notify(_)) || !is_announced {
        emit_on_change(env, &awaiting, guardrail).await?;
    }
    let mut reason = reason;
    let mut blocked = None;
    match &decision {
        Decision::Notify(_) => {}
        Decision::Promote {
            canary_sample: Some(sample),
        } => {
            let mut tx = begin_write(store).await?;
            let started = start_canary(&mut tx, version_id, *sample).await?;
            tx.commit()
                .await
                .map_err(skillforge_store::StoreError::from)?;
            let why = match &started {
                CanaryStart::Started => {
                    let detail = Detail {
                        canary_sample: Some(*sample),
                        ..base.clone()
                    }
                    .with_reason(&reason);
                    emit(
                        env,
                        &Event::new(
                            EventKind::CanaryStarted,
                            version_id,
                            &candidate.template_id,
                            detail,
                        ),
                    )
                    .await?;
                    None
                }
                CanaryStart::AlreadyCanary => None,
                CanaryStart::OtherCanary(other) => Some(format!(
                    "blocked: {other} is the running canary of `{}`; nothing changed (decide again once it graduates or rolls back)",
                    candidate.template_id
                )),
                CanaryStart::StaleBase { base, champion } => Some(format!(
                    "blocked: rebase needed, built on {base} while {champion} is the champion"
                )),
                CanaryStart::WrongState(state) => Some(format!("blocked: the version is {state}")),
                CanaryStart::NotFound => Some("blocked: no such version".to_owned()),
            };
            if let Some(why) = why {
                tracing::warn!(version = version_id, %why, "guardrails passed but the canary did not start");
                reason = format!("{reason}, but {why}");
                blocked = Some(why);
            }
        }
        Decision::Promote {
            canary_sample: None,
        } => {
            if let DecisionOutcome::Done { .. } =
                promote_candidate(store, version_id, &format!("auto-promote: {reason}")).await?
            {
                emit(
                    env,
                    &Event::new(
                        EventKind::AutoPromoted,
                        version_id,
                        &candidate.template_id,
                        base.with_reason(&reason),
                    ),
                )
                .await?;
            }
        }
    }
    Ok(SeamReport {
        decision: Some(decision),
        reason,
        blocked,
    })
}
