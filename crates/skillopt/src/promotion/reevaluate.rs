//! Re-running the guardrails as evidence arrives (issue 37 item 7; seed: SkillOpt, "Promotion
//! policy + notifications" › Auto-promote; S-51, S-52, S-54, S-56, S-60, S-63).
//!
//! The notify seam ([`after_import`]) decides a candidate when it is imported; the evidence it
//! reads (the harvested run `auto-trace:<version>`, the bandit arms, the champion) keeps changing
//! afterwards, as `harvest outcome`, signed webhooks and A/B picks are applied. With
//! `auto_promote` on, the control plane calls [`reevaluate_pending`] on a timer: every pending
//! candidate whose [`EvidenceMark`] differs from the one it was last decided on goes through the
//! seam again, once per new evidence. The seam is idempotent (an event is sent once, a canary is
//! started once), so deciding again after a restart changes nothing that was already applied.

use std::collections::HashMap;

use skillforge_store::Store;
use skillforge_store::bandit::{ArmRow, get_arm};
use skillforge_store::candidates::get_candidate;
use skillforge_store::promotion::{auto_trace_counts, canary_of, pending_versions};
use skillforge_store::templates::{current_version, list_templates};

use super::notify::{PromotionEnv, PromotionError};
use super::seam::{SeamReport, after_import};

/// Everything the guardrails read for one candidate, as a comparable value: two equal marks give
/// the same decision, so a candidate is decided again only when its mark changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvidenceMark {
    /// `auto-trace:<version>`'s `feedback_events` rows and its real-CI positives (S-54, S-56,
    /// S-58); `None` when the run could not be read. Whether the run exists is not evidence: an
    /// attribution that creates it with no outcome decides the same.
    auto_trace: Option<(u64, u64)>,
    /// The current champion's version id.
    champion: Option<String>,
    /// The template's running canary: a pass blocked by it is decided again once it ends.
    canary: Option<String>,
    /// The challenger's and the champion's arms: pulls and the bits of alpha, beta (S-63).
    arms: [Option<(i64, u64, u64)>; 2],
    /// The bits of the candidate's `summary.score`.
    score: Option<u64>,
    /// Replay gate runs recorded for the candidate (issue 34 item 11).
    gate_runs: usize,
}

fn arm_mark(arm: Option<ArmRow>) -> Option<(i64, u64, u64)> {
    arm.map(|a| (a.pulls, a.alpha.to_bits(), a.beta.to_bits()))
}

/// The mark of pending candidate `version_id` of `template_id` with score `score`.
///
/// # Errors
/// [`PromotionError::Store`] when the champion or the arms cannot be read (an unreadable
/// auto-trace run is part of the mark: the seam treats it as feedback unavailable).
pub async fn evidence_mark(
    store: &Store,
    template_id: &str,
    version_id: &str,
    score: Option<f64>,
) -> Result<EvidenceMark, PromotionError> {
    let auto_trace = auto_trace_counts(store.pool(), version_id)
        .await
        .ok()
        .map(|c| (c.samples, c.real_ci_positives));
    let champion = current_version(store.pool(), template_id)
        .await?
        .map(|c| c.id);
    let canary = canary_of(store.pool(), template_id).await?.map(|c| c.id);
    let challenger_arm = arm_mark(get_arm(store.pool(), template_id, version_id).await?);
    let champion_arm = match &champion {
        Some(id) => arm_mark(get_arm(store.pool(), template_id, id).await?),
        None => None,
    };
    let gate_runs = skillforge_store::gates::gate_runs(store.pool(), version_id)
        .await?
        .len();
    Ok(EvidenceMark {
        auto_trace,
        champion,
        canary,
        arms: [challenger_arm, champion_arm],
        score: score.map(f64::to_bits),
        gate_runs,
    })
}

/// One re-run of the guardrails: the candidate, the evidence it was decided on, what the seam did.
#[derive(Debug, Clone, PartialEq)]
pub struct Redecision {
    /// `<template>@vN`.
    pub version_id: String,
    /// The auto-trace samples read (`None`: the run could not be read).
    pub samples: Option<u64>,
    /// The seam's report.
    pub report: SeamReport,
}

/// The marks each pending candidate was last decided on, kept by the caller between passes.
#[derive(Debug, Default)]
pub struct Decided {
    marks: HashMap<String, EvidenceMark>,
}

/// One pass: with `auto_promote` on, every pending candidate (all templates) whose evidence mark
/// differs from the one in `decided` (or that `decided` has not seen) goes through the notify seam
/// again; its new mark is recorded once the seam returned. Candidates no longer pending are
/// forgotten. With `auto_promote` off (absent or false, S-53) nothing is read or written and the
/// result is empty. Returns the candidates decided in this pass, in template and version order.
///
/// # Errors
/// [`PromotionError::Store`] when the store fails; the candidates decided before the failure keep
/// their marks, the failing one is decided again on the next pass.
pub async fn reevaluate_pending(
    env: &PromotionEnv<'_>,
    decided: &mut Decided,
) -> Result<Vec<Redecision>, PromotionError> {
    if env.policy.guardrails.auto_promote != Some(true) {
        decided.marks.clear();
        return Ok(Vec::new());
    }
    let store = env.store;
    let mut pending = Vec::new();
    for template in list_templates(store.pool()).await? {
        pending.extend(pending_versions(store.pool(), &template.id).await?);
    }
    decided
        .marks
        .retain(|version_id, _| pending.contains(version_id));
    let mut redecided = Vec::new();
    for version_id in pending {
        let Some(candidate) = get_candidate(store.pool(), &version_id).await? else {
            continue;
        };
        let mark =
            evidence_mark(store, &candidate.template_id, &version_id, candidate.score).await?;
        if decided.marks.get(&version_id) == Some(&mark) {
            continue;
        }
        let report = after_import(env, &version_id).await?;
        let samples = mark.auto_trace.map(|(samples, _)| samples);
        decided.marks.insert(version_id.clone(), mark);
        redecided.push(Redecision {
            version_id,
            samples,
            report,
        });
    }
    Ok(redecided)
}
