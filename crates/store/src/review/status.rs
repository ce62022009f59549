//! `review status`: counts, ranking stability and the advisory next-mode recommendation of a run
//! (seed "Ranked Exploration Workflow"; S-83, S-84).
//!
//! Pure: computed from rows already read. **Architecture Invariant:** nothing here writes; a
//! recommendation never changes the run mode, imports a candidate or promotes (S-83).

use std::collections::BTreeMap;

use serde::Serialize;
use skillforge_contract::{FeedbackEvent, RankedFeedbackEvent, derive_pairwise, is_ranked_mode};

use super::{EvalRunRow, ReviewItem};

/// Agreement at or above which rankings count as stable.
pub const STABLE_AGREEMENT: f64 = 0.8;
/// Agreement at or above which rankings count as mixed (below: unstable).
pub const MIXED_AGREEMENT: f64 = 0.6;
/// Rankings per item needed before stability is judged.
pub const MIN_RANKINGS_PER_ITEM: usize = 2;

/// The status of one run, as `review status --json` prints it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReviewStatus {
    /// Run id.
    pub run_id: String,
    /// Template id.
    pub template_id: String,
    /// Reviewed version id.
    pub template_version_id: String,
    /// Run state.
    pub state: String,
    /// explore|refine|distill|validate.
    pub mode: String,
    /// high|medium|low.
    pub exploration_level: String,
    /// Options per item.
    pub options_count: i64,
    /// Whether items are reviewed by ranking (facts §4).
    pub is_ranked: bool,
    /// Review items in the run.
    pub items: usize,
    /// Items with at least one imported event.
    pub items_with_feedback: usize,
    /// Item ids still without feedback.
    pub items_without_feedback: Vec<String>,
    /// A/B plus ranked events.
    pub feedback_count: usize,
    /// `feedback_events` rows.
    pub feedback_events: usize,
    /// `ranked_feedback_events` rows.
    pub ranked_feedback_events: usize,
    /// Pairwise preferences derived from the ranked events (S-05).
    pub pairwise_preferences: usize,
    /// A/B choices by stored meaning (a = baseline, b = candidate).
    pub choices: BTreeMap<String, usize>,
    /// How consistently reviewers order the options.
    pub ranking_stability: RankingStability,
    /// The advisory next step.
    pub recommendation: Recommendation,
}

/// Ranking stability: over every item and unordered option pair ordered by at least one ranking,
/// the share of pairwise preferences that agree with the majority direction for that pair.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankingStability {
    /// `none` (no rankings), `insufficient` (an item has fewer than [`MIN_RANKINGS_PER_ITEM`]
    /// rankings), `stable` (agreement ≥ [`STABLE_AGREEMENT`]), `mixed` (≥ [`MIXED_AGREEMENT`]) or
    /// `unstable`.
    pub level: String,
    /// Agreement in `[0, 1]`; absent without any ordered pair.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agreement: Option<f64>,
    /// The fewest rankings any ranked item has.
    pub min_rankings_per_item: usize,
}

/// The advisory recommendation (S-83): `withheld` until every item has feedback (S-84), then
/// `ready` with an optional next mode and the reason.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recommendation {
    /// `withheld` or `ready`.
    pub status: String,
    /// explore|refine|distill|validate; absent when withheld or when no mode change is advised.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_mode: Option<String>,
    /// Why, in one sentence.
    pub reason: String,
    /// Always true: nothing is changed automatically (S-83).
    pub advisory_only: bool,
}

/// Computes the status of `run` from its items and events.
pub fn review_status(
    run: &EvalRunRow,
    items: &[ReviewItem],
    feedback: &[FeedbackEvent],
    ranked: &[RankedFeedbackEvent],
) -> ReviewStatus {
    let with_feedback: std::collections::BTreeSet<&str> = feedback
        .iter()
        .map(|e| e.item_id.as_str())
        .chain(ranked.iter().map(|e| e.item_id.as_str()))
        .collect();
    let items_without_feedback: Vec<String> = items
        .iter()
        .map(|i| i.item.item_id.clone())
        .filter(|id| !with_feedback.contains(id.as_str()))
        .collect();
    let mut choices = BTreeMap::new();
    for event in feedback {
        *choices.entry(event.choice.clone()).or_insert(0) += 1;
    }
    let pairwise_preferences = ranked.iter().map(|e| derive_pairwise(e).len()).sum();
    let ranked_items: Vec<&str> = items
        .iter()
        .filter(|i| !i.options.is_empty())
        .map(|i| i.item.item_id.as_str())
        .collect();
    let ranking_stability = stability(&ranked_items, ranked);
    let recommendation = if items.is_empty() {
        withheld("the run has no review items yet".into())
    } else if !items_without_feedback.is_empty() {
        withheld(format!(
            "{} of {} items have no feedback yet; recommendations wait for every item",
            items_without_feedback.len(),
            items.len()
        ))
    } else {
        recommend(&run.mode, &choices, ranked, &ranking_stability)
    };
    ReviewStatus {
        run_id: run.id.clone(),
        template_id: run.template_id.clone(),
        template_version_id: run.template_version_id.clone(),
        state: run.state.clone(),
        mode: run.mode.clone(),
        exploration_level: run.exploration_level.clone(),
        options_count: run.options_count,
        is_ranked: is_ranked_mode(&run.mode, run.options_count),
        items: items.len(),
        items_with_feedback: items.len() - items_without_feedback.len(),
        items_without_feedback,
        feedback_count: feedback.len() + ranked.len(),
        feedback_events: feedback.len(),
        ranked_feedback_events: ranked.len(),
        pairwise_preferences,
        choices,
        ranking_stability,
        recommendation,
    }
}

fn withheld(reason: String) -> Recommendation {
    Recommendation {
        status: "withheld".into(),
        next_mode: None,
        reason,
        advisory_only: true,
    }
}

fn ready(next_mode: Option<&str>, reason: String) -> Recommendation {
    Recommendation {
        status: "ready".into(),
        next_mode: next_mode.map(str::to_owned),
        reason,
        advisory_only: true,
    }
}

fn stability(ranked_items: &[&str], ranked: &[RankedFeedbackEvent]) -> RankingStability {
    if ranked.is_empty() {
        return RankingStability {
            level: "none".into(),
            agreement: None,
            min_rankings_per_item: 0,
        };
    }
    let min_rankings = ranked_items
        .iter()
        .map(|item| ranked.iter().filter(|e| e.item_id == *item).count())
        .min()
        .unwrap_or(0);
    // (item, low label, high label) → (low preferred count, high preferred count)
    let mut pairs: BTreeMap<(String, String, String), (usize, usize)> = BTreeMap::new();
    for event in ranked {
        for pref in derive_pairwise(event) {
            let (low, high, low_won) = if pref.preferred <= pref.rejected {
                (pref.preferred, pref.rejected, true)
            } else {
                (pref.rejected, pref.preferred, false)
            };
            let slot = pairs.entry((pref.item_id, low, high)).or_default();
            if low_won { slot.0 += 1 } else { slot.1 += 1 }
        }
    }
    let total: usize = pairs.values().map(|(a, b)| a + b).sum();
    let agree: usize = pairs.values().map(|(a, b)| (*a).max(*b)).sum();
    let agreement = (total > 0).then(|| agree as f64 / total as f64);
    let level = if min_rankings < MIN_RANKINGS_PER_ITEM {
        "insufficient"
    } else {
        match agreement {
            Some(a) if a >= STABLE_AGREEMENT => "stable",
            Some(a) if a >= MIXED_AGREEMENT => "mixed",
            Some(_) => "unstable",
            None => "insufficient",
        }
    };
    RankingStability {
        level: level.into(),
        agreement,
        min_rankings_per_item: min_rankings,
    }
}

/// The reviewers' `continue_mode` with the most votes, when one mode has strictly the most.
fn voted_mode(ranked: &[RankedFeedbackEvent]) -> Option<(String, usize, usize)> {
    let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
    for event in ranked.iter().filter(|e| !e.continue_mode.is_empty()) {
        *votes.entry(event.continue_mode.as_str()).or_insert(0) += 1;
    }
    let cast: usize = votes.values().sum();
    let best = *votes.values().max()?;
    let mut leaders = votes.iter().filter(|(_, n)| **n == best);
    let (mode, _) = leaders.next()?;
    leaders
        .next()
        .is_none()
        .then(|| ((*mode).to_owned(), best, cast))
}

fn recommend(
    mode: &str,
    choices: &BTreeMap<String, usize>,
    ranked: &[RankedFeedbackEvent],
    stability: &RankingStability,
) -> Recommendation {
    if let Some((voted, n, cast)) = voted_mode(ranked) {
        return ready(
            Some(&voted),
            format!("reviewers asked to continue with {voted} ({n} of {cast} votes)"),
        );
    }
    let is_stable = stability.level == "stable";
    match mode {
        "explore" if is_stable => ready(
            Some("refine"),
            "rankings are stable; combine the winning traits".into(),
        ),
        "explore" => ready(
            Some("explore"),
            format!("rankings are {}; keep exploring", stability.level),
        ),
        "refine" if is_stable => ready(
            Some("distill"),
            "refined rankings are stable; distill them into the template".into(),
        ),
        "refine" => ready(
            Some("refine"),
            format!("rankings are {}; keep refining", stability.level),
        ),
        "distill" => ready(
            Some("validate"),
            "validate the distilled candidate on fresh items".into(),
        ),
        _ => {
            let candidate = choices.get("b").copied().unwrap_or(0);
            let baseline = choices.get("a").copied().unwrap_or(0);
            if candidate > baseline {
                ready(
                    None,
                    format!(
                        "candidate preferred on {candidate} items, baseline on {baseline}; review it for promotion"
                    ),
                )
            } else {
                ready(
                    Some("refine"),
                    format!(
                        "baseline preferred or level ({baseline} vs {candidate}); refine further"
                    ),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::review::{ReviewItemRow, ReviewOptionRow};

    fn run(mode: &str) -> EvalRunRow {
        EvalRunRow {
            id: "r".into(),
            template_id: "t".into(),
            template_version_id: "t@v1".into(),
            target_repo: String::new(),
            state: "draft".into(),
            metadata_json: String::new(),
            created_at: String::new(),
            updated_at: String::new(),
            mode: mode.into(),
            exploration_level: "high".into(),
            options_count: 3,
        }
    }

    fn item(id: &str) -> ReviewItem {
        ReviewItem {
            item: ReviewItemRow {
                item_id: id.into(),
                ..Default::default()
            },
            options: ["a", "b", "c"]
                .iter()
                .map(|l| ReviewOptionRow {
                    item_id: id.into(),
                    label: (*l).into(),
                    ..Default::default()
                })
                .collect(),
        }
    }

    fn ranking(
        item: &str,
        reviewer: &str,
        order: &[&str],
        continue_mode: &str,
    ) -> RankedFeedbackEvent {
        RankedFeedbackEvent {
            id: format!("{item}-{reviewer}"),
            run_id: "r".into(),
            item_id: item.into(),
            ranking: order.iter().map(|s| (*s).to_owned()).collect(),
            reviewer: reviewer.into(),
            continue_mode: continue_mode.into(),
            ..Default::default()
        }
    }

    #[test]
    fn s84_recommendation_waits_for_every_item() {
        let items = [item("i1"), item("i2"), item("i3")];
        let events: Vec<_> = ["alice", "bob", "carol"]
            .iter()
            .flat_map(|r| {
                [
                    ranking("i1", r, &["a", "b", "c"], "refine"),
                    ranking("i2", r, &["a", "b", "c"], "refine"),
                ]
            })
            .collect();
        let status = review_status(&run("explore"), &items, &[], &events);
        assert_eq!(status.recommendation.status, "withheld");
        assert_eq!(status.recommendation.next_mode, None);
        assert_eq!(status.items_without_feedback, vec!["i3".to_owned()]);
        let mut all = events.clone();
        all.push(ranking("i3", "alice", &["c", "b", "a"], ""));
        let status = review_status(&run("explore"), &items, &[], &all);
        assert_eq!(status.recommendation.status, "ready");
        assert_eq!(status.recommendation.next_mode.as_deref(), Some("refine"));
        assert!(status.recommendation.advisory_only);
    }

    #[test]
    fn stability_and_mode_progression_table() {
        let items = [item("i1")];
        let agree = [
            ranking("i1", "x", &["a", "b", "c"], ""),
            ranking("i1", "y", &["a", "b", "c"], ""),
        ];
        let disagree = [
            ranking("i1", "x", &["a", "b", "c"], ""),
            ranking("i1", "y", &["c", "b", "a"], ""),
        ];
        let one = [ranking("i1", "x", &["a", "b", "c"], "")];
        let check =
            |mode: &str, events: &[RankedFeedbackEvent], level: &str, next: Option<&str>| {
                let status = review_status(&run(mode), &items, &[], events);
                assert_eq!(status.ranking_stability.level, level, "{mode} {level}");
                assert_eq!(
                    status.recommendation.next_mode.as_deref(),
                    next,
                    "{mode} {level}"
                );
            };
        check("explore", &agree, "stable", Some("refine"));
        check("explore", &disagree, "unstable", Some("explore"));
        check("explore", &one, "insufficient", Some("explore"));
        check("refine", &agree, "stable", Some("distill"));
        check("refine", &disagree, "unstable", Some("refine"));
        check("distill", &one, "insufficient", Some("validate"));
        let status = review_status(&run("explore"), &items, &[], &disagree);
        assert_eq!(status.ranking_stability.agreement, Some(0.5));
        assert_eq!(status.pairwise_preferences, 6);
    }
}
