//! The hypothesis backlog: hypotheses with their opportunity records, locating measurements,
//! and batch selection (seed: optimize-loop, loop.md 2.1–2.4 and 3.1).
//!
//! Ranking uses the opportunity's estimate (expected benefit × confidence × (1 − risk) ÷ cost),
//! never the `priority` label (O-13); category diversity breaks remaining ties.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::spec::ExecutionMode;

/// Whether a hypothesis's dependencies are approved (loop.md 2.3).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum DepStatus {
    /// Nothing to approve, or approved.
    #[default]
    Approved,
    /// Waits for the user; excluded from the runnable backlog and listed at wrap-up.
    NeedsApproval,
}

/// A numeric estimate behind an opportunity, when one exists.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Estimate {
    /// Expected relative gain on the target metric (0.2 = 20 % better).
    pub benefit: f64,
    /// Upper bound of the gain, when a range is supported.
    #[serde(default)]
    pub benefit_high: Option<f64>,
    /// Confidence in the estimate, in [0,1].
    pub confidence: f64,
    /// Implementation plus measurement cost, relative units (1 = one ordinary experiment).
    #[serde(default = "unit")]
    pub cost: f64,
    /// Behavioural risk, in [0,1].
    #[serde(default)]
    pub risk: f64,
}

fn unit() -> f64 {
    1.0
}

impl Estimate {
    /// The ranking score: benefit × confidence × (1 − risk) ÷ cost.
    pub fn score(&self) -> f64 {
        self.benefit * self.confidence * (1.0 - self.risk.clamp(0.0, 1.0))
            / self.cost.max(f64::EPSILON)
    }
}

/// The log schema's `opportunity` record (loop.md 2.2): every hypothesis carries one (O-12).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Opportunity {
    /// The workload the estimate is about.
    pub workload: String,
    /// The comparison baseline.
    pub baseline: String,
    /// Observed evidence (profile, rubric evidence, locating results).
    pub evidence: String,
    /// Expected benefit with units and range, or `unknown; cheapest resolve: …`.
    pub expected_benefit: String,
    /// Confidence, in words.
    pub confidence: String,
    /// Implementation/measurement cost and behavioural risk, in words.
    pub cost_and_risk: String,
    /// The numbers ranking uses; `None` is an unknown benefit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate: Option<Estimate>,
}

/// A locating measurement: a cheap command that finds where the cost sits (loop.md 2.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Locating {
    /// Shell command run in the optimization branch's checkout; its stdout may be a JSON object
    /// with an `estimate` ([`Estimate`]) and is recorded as evidence.
    pub command: String,
    /// Set once taken: what it printed (trimmed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
}

/// One hypothesis of the backlog (loop.md 2.4, CP-2 shape).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Hypothesis {
    /// Stable id (`h-NNN` when not given).
    #[serde(default)]
    pub id: String,
    /// What to try.
    pub description: String,
    /// Category (signal-extraction, algorithm, parameter-tuning, …).
    pub category: String,
    /// Summary label only; never ranks (O-13).
    #[serde(default)]
    pub priority: Option<String>,
    /// approved | needs_approval.
    #[serde(default)]
    pub dep_status: DepStatus,
    /// Dependencies the hypothesis needs.
    #[serde(default)]
    pub required_deps: Vec<String>,
    /// The opportunity record (required at CP-2).
    #[serde(default)]
    pub opportunity: Option<Opportunity>,
    /// A locating measurement to take before implementing, when the benefit is unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub locating: Option<Locating>,
    /// Where it came from (`spec`, `failure_theme:<theme>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

impl Hypothesis {
    /// Checks the CP-2 shape: description, category and a complete opportunity record.
    ///
    /// # Errors
    /// `(key, message)` for the first missing field.
    pub fn validate(&self) -> Result<(), (String, String)> {
        if self.description.trim().is_empty() {
            return Err(("description".into(), "must not be empty".into()));
        }
        if self.category.trim().is_empty() {
            return Err(("category".into(), "must not be empty".into()));
        }
        let Some(o) = &self.opportunity else {
            return Err((
                "opportunity".into(),
                "is required on every hypothesis (CP-2)".into(),
            ));
        };
        for (key, v) in [
            ("workload", &o.workload),
            ("baseline", &o.baseline),
            ("evidence", &o.evidence),
            ("expected_benefit", &o.expected_benefit),
            ("confidence", &o.confidence),
            ("cost_and_risk", &o.cost_and_risk),
        ] {
            if v.trim().is_empty() {
                return Err((
                    format!("opportunity.{key}"),
                    "must not be empty (write `unknown` and the cheapest resolving measurement)"
                        .into(),
                ));
            }
        }
        if let Some(e) = &o.estimate
            && !(e.benefit.is_finite()
                && (0.0..=1.0).contains(&e.confidence)
                && e.cost > 0.0
                && (0.0..=1.0).contains(&e.risk))
        {
            return Err((
                "opportunity.estimate".into(),
                "needs a finite benefit, confidence and risk in [0,1], cost > 0".into(),
            ));
        }
        Ok(())
    }

    /// Whether a locating measurement is still to be taken before this hypothesis may run (O-14):
    /// the benefit is unknown and a locating command exists that has not run.
    pub fn needs_locating(&self) -> bool {
        let unknown = self
            .opportunity
            .as_ref()
            .is_none_or(|o| o.estimate.is_none());
        unknown && self.locating.as_ref().is_some_and(|l| l.result.is_none())
    }

    /// The ranking score; an unknown benefit ranks 0 (below every positive estimate).
    pub fn score(&self) -> f64 {
        self.opportunity
            .as_ref()
            .and_then(|o| o.estimate)
            .map_or(0.0, |e| e.score())
    }

    /// Whether the estimate says the hypothesis cannot help (benefit ≤ 0): skipped, not run.
    pub fn is_skip(&self) -> bool {
        self.opportunity
            .as_ref()
            .and_then(|o| o.estimate)
            .is_some_and(|e| e.benefit <= 0.0)
    }
}

/// Gives every hypothesis without an id one (`h-001`, …), keeping given ids.
pub fn assign_ids(backlog: &mut [Hypothesis], next: &mut u32) {
    for h in backlog.iter_mut().filter(|h| h.id.is_empty()) {
        *next += 1;
        h.id = format!("h-{:03}", *next);
    }
}

/// Spend already recorded and the caps, USD (3.6 spend cap; resolutions 16: allowed when
/// recorded + estimate ≤ cap).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Spend {
    /// Whole-run spend recorded so far.
    pub run_spent: f64,
    /// Judge spend recorded so far.
    pub judge_spent: f64,
    /// `stopping.max_total_cost_usd`.
    pub run_cap: Option<f64>,
    /// `metric.judge.max_total_cost_usd`.
    pub judge_cap: Option<f64>,
    /// Estimated worker cost of one experiment.
    pub worker_estimate: f64,
    /// Estimated judge cost of one experiment (all its batches).
    pub judge_estimate: f64,
}

impl Spend {
    /// How many experiments fit every cap (`u32::MAX` when uncapped).
    pub fn experiments_that_fit(&self) -> u32 {
        let fit = |spent: f64, cap: Option<f64>, each: f64| -> u32 {
            match cap {
                None => u32::MAX,
                Some(cap) if each <= 0.0 => {
                    if spent <= cap {
                        u32::MAX
                    } else {
                        0
                    }
                }
                Some(cap) => {
                    let n = ((cap - spent) / each + 1e-9).floor();
                    if n <= 0.0 {
                        0
                    } else {
                        n.min(f64::from(u32::MAX)) as u32
                    }
                }
            }
        };
        fit(
            self.run_spent,
            self.run_cap,
            self.worker_estimate + self.judge_estimate,
        )
        .min(fit(self.judge_spent, self.judge_cap, self.judge_estimate))
    }
}

/// What batch selection asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchRequest {
    /// `execution.mode`.
    pub mode: ExecutionMode,
    /// `execution.max_concurrent`.
    pub max_concurrent: u32,
    /// `execution.max_experiments_per_tick`.
    pub max_per_tick: Option<u32>,
    /// The current decision must attribute a cost change to one lever (forces 1).
    pub attribute_one_lever: bool,
    /// Spend and caps.
    pub spend: Spend,
    /// Categories already tried (for diversity among ties).
    pub tried_categories: BTreeSet<String>,
}

/// The next executable action (loop.md 3.1).
#[derive(Debug, Clone, PartialEq)]
pub enum Selection {
    /// Run these hypotheses (ids, in dispatch order).
    Batch(Vec<String>),
    /// Take these locating measurements first, then select again.
    Locate(Vec<String>),
    /// Not even one experiment fits a spend cap.
    SpendCap,
    /// No executable next action: wrap up (deferred hypotheses come back there).
    NothingRunnable,
}

/// Selects the next action from `backlog` (O-13 … O-17).
///
/// Order: locating measurements first (any hypothesis that [`Hypothesis::needs_locating`]);
/// then the runnable backlog (not `needs_approval`, not skipped) ranked by [`Hypothesis::score`]
/// descending, ties broken by categories not yet in the batch or tried, then backlog order; batch
/// size 1 in serial mode or when attributing one lever, else
/// `min(runnable, max_concurrent)` capped by `max_per_tick`, then shrunk to what fits the caps.
pub fn select_batch(backlog: &[Hypothesis], req: &BatchRequest) -> Selection {
    let locate: Vec<String> = backlog
        .iter()
        .filter(|h| h.dep_status == DepStatus::Approved && h.needs_locating())
        .map(|h| h.id.clone())
        .collect();
    if !locate.is_empty() {
        return Selection::Locate(locate);
    }
    let mut runnable: Vec<(usize, &Hypothesis)> = backlog
        .iter()
        .enumerate()
        .filter(|(_, h)| h.dep_status == DepStatus::Approved && !h.is_skip())
        .collect();
    if runnable.is_empty() {
        return Selection::NothingRunnable;
    }
    let mut size = if req.mode == ExecutionMode::Serial || req.attribute_one_lever {
        1
    } else {
        u32::try_from(runnable.len())
            .unwrap_or(u32::MAX)
            .min(req.max_concurrent)
    };
    if let Some(cap) = req.max_per_tick {
        size = size.min(cap);
    }
    size = size.min(req.spend.experiments_that_fit());
    if size == 0 {
        return Selection::SpendCap;
    }
    runnable.sort_by(|(ia, a), (ib, b)| b.score().total_cmp(&a.score()).then(ia.cmp(ib)));
    let mut chosen: Vec<&Hypothesis> = Vec::new();
    while chosen.len() < size as usize && !runnable.is_empty() {
        let top = runnable[0].1.score();
        let tied: Vec<usize> = (0..runnable.len())
            .filter(|&i| runnable[i].1.score() == top)
            .collect();
        let fresh = |h: &Hypothesis| {
            !chosen.iter().any(|c| c.category == h.category)
                && !req.tried_categories.contains(&h.category)
        };
        let new_in_batch = |h: &Hypothesis| !chosen.iter().any(|c| c.category == h.category);
        let pick = tied
            .iter()
            .copied()
            .find(|&i| fresh(runnable[i].1))
            .or_else(|| tied.iter().copied().find(|&i| new_in_batch(runnable[i].1)))
            .unwrap_or(tied[0]);
        chosen.push(runnable.remove(pick).1);
    }
    Selection::Batch(chosen.into_iter().map(|h| h.id.clone()).collect())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn hyp(
        id: &str,
        category: &str,
        priority: &str,
        benefit: Option<f64>,
    ) -> Hypothesis {
        Hypothesis {
            id: id.into(),
            description: format!("hypothesis {id}"),
            category: category.into(),
            priority: Some(priority.into()),
            dep_status: DepStatus::Approved,
            required_deps: vec![],
            opportunity: Some(Opportunity {
                workload: "fixture".into(),
                baseline: "CP-1 baseline".into(),
                evidence: "reading".into(),
                expected_benefit: benefit
                    .map_or("unknown; cheapest resolve: a profile".into(), |b| {
                        format!("{b} relative")
                    }),
                confidence: "medium".into(),
                cost_and_risk: "small".into(),
                estimate: benefit.map(|b| Estimate {
                    benefit: b,
                    benefit_high: None,
                    confidence: 0.5,
                    cost: 1.0,
                    risk: 0.0,
                }),
            }),
            locating: None,
            source: None,
        }
    }

    fn req(mode: ExecutionMode, max_concurrent: u32, max_per_tick: Option<u32>) -> BatchRequest {
        BatchRequest {
            mode,
            max_concurrent,
            max_per_tick,
            attribute_one_lever: false,
            spend: Spend::default(),
            tried_categories: BTreeSet::new(),
        }
    }

    // O-12
    #[test]
    fn o12_a_hypothesis_without_opportunity_fails_the_cp2_shape() {
        let mut h = hyp("a", "algorithm", "high", Some(0.1));
        assert!(h.validate().is_ok());
        h.opportunity = None;
        assert_eq!(h.validate().unwrap_err().0, "opportunity");
        let mut h = hyp("a", "algorithm", "high", Some(0.1));
        h.opportunity.as_mut().unwrap().evidence = " ".into();
        assert_eq!(h.validate().unwrap_err().0, "opportunity.evidence");
    }

    // O-13
    #[test]
    fn o13_priority_label_never_ranks_expected_benefit_does() {
        let backlog = vec![
            hyp("a", "algorithm", "high", Some(0.02)),
            hyp("b", "algorithm", "low", Some(0.4)),
        ];
        assert_eq!(
            select_batch(&backlog, &req(ExecutionMode::Serial, 1, None)),
            Selection::Batch(vec!["b".into()])
        );
        // category diversity breaks a tie
        let backlog = vec![
            hyp("a", "algorithm", "low", Some(0.2)),
            hyp("b", "algorithm", "low", Some(0.2)),
            hyp("c", "preprocessing", "low", Some(0.2)),
        ];
        assert_eq!(
            select_batch(&backlog, &req(ExecutionMode::Parallel, 2, None)),
            Selection::Batch(vec!["a".into(), "c".into()])
        );
    }

    // O-14
    #[test]
    fn o14_locating_measurement_comes_before_any_implementation() {
        let mut unknown = hyp("u", "algorithm", "high", None);
        unknown.locating = Some(Locating {
            command: "sh profile.sh".into(),
            result: None,
        });
        let backlog = vec![unknown.clone(), hyp("k", "algorithm", "low", Some(0.1))];
        assert_eq!(
            select_batch(&backlog, &req(ExecutionMode::Parallel, 4, None)),
            Selection::Locate(vec!["u".into()])
        );
        unknown.locating.as_mut().unwrap().result = Some("{}".into());
        assert!(!unknown.needs_locating());
        // an unknown benefit with no locating measurement available stays runnable (ranked last)
        let backlog = vec![
            hyp("u2", "a", "high", None),
            hyp("k", "b", "low", Some(0.1)),
        ];
        assert_eq!(
            select_batch(&backlog, &req(ExecutionMode::Parallel, 4, None)),
            Selection::Batch(vec!["k".into(), "u2".into()])
        );
    }

    // O-15
    #[test]
    fn o15_needs_approval_hypotheses_are_never_runnable() {
        let mut h = hyp("d", "algorithm", "high", Some(0.5));
        h.dep_status = DepStatus::NeedsApproval;
        assert_eq!(
            select_batch(&[h.clone()], &req(ExecutionMode::Parallel, 4, None)),
            Selection::NothingRunnable
        );
        let backlog = vec![h, hyp("k", "algorithm", "low", Some(0.1))];
        assert_eq!(
            select_batch(&backlog, &req(ExecutionMode::Parallel, 4, None)),
            Selection::Batch(vec!["k".into()])
        );
    }

    // O-16
    #[test]
    fn o16_batch_size_follows_mode_concurrency_and_tick_cap() {
        let backlog: Vec<_> = (0..7)
            .map(|i| hyp(&format!("h{i}"), &format!("c{i}"), "low", Some(0.1)))
            .collect();
        let batch_len = |r: BatchRequest| match select_batch(&backlog, &r) {
            Selection::Batch(ids) => ids.len(),
            other => panic!("{other:?}"),
        };
        assert_eq!(batch_len(req(ExecutionMode::Parallel, 4, Some(3))), 3);
        assert_eq!(batch_len(req(ExecutionMode::Parallel, 4, None)), 4);
        assert_eq!(batch_len(req(ExecutionMode::Parallel, 9, None)), 7);
        assert_eq!(batch_len(req(ExecutionMode::Serial, 4, None)), 1);
        let mut one_lever = req(ExecutionMode::Parallel, 4, None);
        one_lever.attribute_one_lever = true;
        assert_eq!(batch_len(one_lever), 1);
    }

    // O-17
    #[test]
    fn o17_batch_shrinks_to_fit_spend_caps_and_stops_when_none_fits() {
        let backlog: Vec<_> = (0..4)
            .map(|i| hyp(&format!("h{i}"), &format!("c{i}"), "low", Some(0.1)))
            .collect();
        let mut r = req(ExecutionMode::Parallel, 4, None);
        r.spend = Spend {
            run_spent: 9.0,
            run_cap: Some(10.0),
            worker_estimate: 0.4,
            ..Spend::default()
        };
        assert_eq!(
            select_batch(&backlog, &r),
            Selection::Batch(vec!["h0".into(), "h1".into()])
        );
        r.spend = Spend {
            run_spent: 9.5,
            run_cap: Some(10.0),
            worker_estimate: 0.8,
            ..Spend::default()
        };
        assert_eq!(select_batch(&backlog, &r), Selection::SpendCap);
        r.spend = Spend {
            judge_spent: 1.0,
            judge_cap: Some(1.5),
            judge_estimate: 0.5,
            ..Spend::default()
        };
        assert_eq!(
            select_batch(&backlog, &r),
            Selection::Batch(vec!["h0".into()])
        );
        // exactly at the cap is allowed (resolutions 16)
        r.spend = Spend {
            run_spent: 9.2,
            run_cap: Some(10.0),
            worker_estimate: 0.8,
            ..Spend::default()
        };
        assert_eq!(
            select_batch(&backlog, &r),
            Selection::Batch(vec!["h0".into()])
        );
    }

    // O-59
    #[test]
    fn o59_a_cap_limits_spend_before_the_dispatch_never_after() {
        let s = Spend {
            run_spent: 9.5,
            run_cap: Some(10.0),
            worker_estimate: 0.8,
            ..Spend::default()
        };
        assert_eq!(s.experiments_that_fit(), 0);
        let s = Spend {
            judge_spent: 2.0,
            judge_cap: Some(2.0),
            judge_estimate: 0.1,
            ..Spend::default()
        };
        assert_eq!(s.experiments_that_fit(), 0);
        assert_eq!(
            Spend::default().experiments_that_fit(),
            u32::MAX,
            "no cap configured: nothing limits"
        );
    }

    #[test]
    fn ids_are_assigned_once() {
        let mut backlog = vec![
            hyp("", "a", "low", None),
            hyp("mine", "a", "low", None),
            hyp("", "a", "low", None),
        ];
        let mut next = 0;
        assign_ids(&mut backlog, &mut next);
        let ids: Vec<_> = backlog.iter().map(|h| h.id.as_str()).collect();
        assert_eq!(ids, ["h-001", "mine", "h-002"]);
    }
}
