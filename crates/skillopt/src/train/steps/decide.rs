//! `--promote V` / `--reject V --reason R` (seed step 9): the human decision on the candidate.

use skillforge_store::candidates::{
    DecisionOutcome, get_candidate, promote_candidate, reject_candidate,
};
use skillforge_store::train::set_decision_reason;

use crate::train::iteration::Iteration;
use crate::train::meta::IterationMeta;
use crate::train::session::*;
use crate::train::state::TrainState;
use crate::train::state::check_transition;
use crate::train::{TrainEnv, TrainError};

/// `--promote V` / `--reject V --reason R` (seed step 9): only at candidate_review_published and
/// only for this iteration's candidate.
pub(crate) async fn decide(
    env: &TrainEnv<'_>,
    it: &mut Iteration,
    req: &ContinueRequest,
    report: &mut StepReport,
) -> Result<(), TrainError> {
    let (version, reason, to) = match (&req.promote, &req.reject) {
        (Some(v), None) => (v.clone(), String::new(), TrainState::Promoted),
        (None, Some((v, r))) => {
            if r.trim().is_empty() {
                return Err(TrainError::Invalid("--reject needs --reason TEXT".into()));
            }
            (v.clone(), r.clone(), TrainState::Rejected)
        }
        _ => {
            return Err(TrainError::Invalid(
                "give either --promote or --reject, not both".into(),
            ));
        }
    };
    // Already decided outside the session (and recorded by `reconcile_decision`): the same
    // decision again is a no-op that says so.
    if matches!(
        (it.state, to),
        (TrainState::Promoted, TrainState::Promoted) | (TrainState::Rejected, TrainState::Rejected)
    ) && version == it.candidate_version_id
    {
        report.steps.push(format!(
            "candidate {version} was already {}",
            if to == TrainState::Promoted {
                "promoted"
            } else {
                "rejected"
            }
        ));
        report.next_action = next_action_for(it.state, &it.session_id);
        return Ok(());
    }
    if it.state != TrainState::CandidateReviewPublished {
        return Err(TrainError::Refused(not_decidable(it, &version)));
    }
    if version != it.candidate_version_id {
        return Err(TrainError::Invalid(format!(
            "version `{version}` is not this iteration's candidate (`{}`)",
            it.candidate_version_id
        )));
    }
    check_transition(it.state, to).map_err(|e| TrainError::Refused(e.to_string()))?;
    let outcome = if to == TrainState::Promoted {
        promote_candidate(env.store, &version, &reason).await?
    } else {
        reject_candidate(env.store, &version, &reason).await?
    };
    match outcome {
        DecisionOutcome::Done { .. } => {}
        DecisionOutcome::NotFound => {
            return Err(TrainError::Invalid(format!(
                "candidate `{version}` not found"
            )));
        }
        DecisionOutcome::WrongState(s) => {
            return Err(TrainError::Refused(format!(
                "candidate `{version}` is `{s}`, not pending"
            )));
        }
    }
    let mut meta = IterationMeta::parse(&it.metadata_json);
    meta.candidate_decision.status = if to == TrainState::Promoted {
        "promoted".into()
    } else {
        "rejected".into()
    };
    // The reason, the metadata and the state in one transaction.
    let mut tx = env.store.begin().await?;
    set_decision_reason(&mut tx, &it.id, &reason).await?;
    advance_on(&mut tx, it, to, Some(&meta)).await?;
    tx.commit().await?;
    it.decision_reason = reason;
    report.steps.push(format!(
        "candidate {version} {}",
        if to == TrainState::Promoted {
            "promoted"
        } else {
            "rejected"
        }
    ));
    report.next_action = next_action_for(it.state, &it.session_id);
    Ok(())
}

/// Why iteration `it` cannot take a decision on `version` now, in words, with the way on.
fn not_decidable(it: &Iteration, version: &str) -> String {
    let which = if !it.candidate_version_id.is_empty() && version != it.candidate_version_id {
        format!(
            " (and `{version}` is not its candidate, `{}`)",
            it.candidate_version_id
        )
    } else {
        String::new()
    };
    let start_next = format!(
        "to train further: `skillforge train continue --session {} --start-next`",
        it.session_id
    );
    match it.state {
        TrainState::Promoted | TrainState::Rejected => format!(
            "iteration `{}` is already decided: its candidate `{}` was {}{which}; {start_next}",
            it.id,
            it.candidate_version_id,
            if it.state == TrainState::Promoted {
                "promoted"
            } else {
                "rejected"
            }
        ),
        TrainState::NoCandidate | TrainState::Abandoned => format!(
            "iteration `{}` ended without a candidate to decide ({}); {start_next}",
            it.id,
            crate::train::phase::describe(it.state.as_str())
        ),
        _ => format!(
            "iteration `{}` has no candidate to decide yet ({}){which}; next: {}",
            it.id,
            crate::train::phase::describe(it.state.as_str()),
            next_action_for(it.state, &it.session_id)
        ),
    }
}

/// Records a decision made outside the session (seed step 9): at candidate_review_published,
/// when this iteration's candidate was promoted (`candidate promote`, auto-promotion, a canary's
/// graduation: the version is now `current` or later `superseded`) or rejected (`candidate
/// reject`, a roll-back), the iteration moves to promoted / rejected with the candidate's
/// decision reason, as `--promote` / `--reject` would have, and the report says so. A candidate
/// still pending or in canary changes nothing. Returns whether it recorded a decision.
///
/// # Errors
/// Store errors.
pub(crate) async fn reconcile_decision(
    env: &TrainEnv<'_>,
    it: &mut Iteration,
    report: &mut StepReport,
) -> Result<bool, TrainError> {
    if it.state != TrainState::CandidateReviewPublished || it.candidate_version_id.is_empty() {
        return Ok(false);
    }
    let Some(candidate) = get_candidate(env.store.pool(), &it.candidate_version_id).await? else {
        return Ok(false);
    };
    let (to, word) = match candidate.version_state.as_str() {
        "current" | "superseded" => (TrainState::Promoted, "promoted"),
        "rejected" => (TrainState::Rejected, "rejected"),
        _ => return Ok(false),
    };
    check_transition(it.state, to).map_err(|e| TrainError::Refused(e.to_string()))?;
    let mut meta = IterationMeta::parse(&it.metadata_json);
    meta.candidate_decision.status = word.into();
    let reason = candidate.decision_reason.clone();
    let mut tx = env.store.begin().await?;
    set_decision_reason(&mut tx, &it.id, &reason).await?;
    advance_on(&mut tx, it, to, Some(&meta)).await?;
    tx.commit().await?;
    it.decision_reason = reason;
    report.steps.push(format!(
        "candidate {} was {word} outside this session; the session records it",
        it.candidate_version_id
    ));
    Ok(true)
}
