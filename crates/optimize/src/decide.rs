//! The decide step: one pure function in the role of the seed's `decide.mjs`
//! (seed: optimize-loop, loop.md 3.3 step 6 and 3.4; resolutions 18).
//!
//! * An objective **improves** when the candidate beats the reference by more than the noise
//!   threshold `max(min_relative_change (default 1 %), 2 × sd(reference samples) / |mean|)`,
//!   and **regresses** when it is worse by more than that.
//! * **Eligible**: at least one required objective improves and no required objective regresses
//!   (O-44). Optional objectives are reported, never decisive.
//! * **Protocol**: `stable` decides on one pair; `repeat` on `repeat_count` pairs (fewer ⇒
//!   `measured` + `add_sample`); `ladder` takes one exploratory pair, asks `confirm` when it is
//!   promising, then `add_sample` up to `repeat_count`; then `holdout` when configured (O-38).
//! * **PACE** (`stability.mode: pace`, issue 34 item 10): one pair at a time until the betting
//!   e-process over the primary objective's pairs commits (eligible; then the holdout) or spends
//!   its budget (reverted); a required objective that regressed still reverts.
//! * **Keep** only with `next_measurement: none` (O-37, O-47).

use serde::{Deserialize, Serialize};

use skillforge_contract::pace::{Pace, PaceReport, Pair, Verdict};

use super::snapshot::{Snapshot, mean, std_dev};
use super::spec::{DEFAULT_MIN_RELATIVE_CHANGE, Objective, Spec, StabilityMode};

/// What the decide step returns as `decision`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Eligible at the full protocol (and confirmed by the holdout when configured).
    Keep,
    /// Eligible so far; the keep path still needs the measurement in `next_measurement`.
    Promising,
    /// Measured; the protocol wants more samples before anything is decided.
    Measured,
    /// A required objective regressed beyond noise (or nothing improved and one got worse).
    Reverted,
    /// Within noise: no required objective moved beyond the threshold.
    Inconclusive,
    /// The measurement declared its result unusable (exit 125 + censor marker).
    Censored,
    /// A degenerate gate failed.
    Degenerate,
    /// The measurement failed, or the payload is missing a required objective.
    Error,
    /// The measurement timed out (exit 124 or our own timeout).
    Timeout,
}

impl Decision {
    /// Snake-case label.
    pub fn label(self) -> &'static str {
        match self {
            Decision::Keep => "keep",
            Decision::Promising => "promising",
            Decision::Measured => "measured",
            Decision::Reverted => "reverted",
            Decision::Inconclusive => "inconclusive",
            Decision::Censored => "censored",
            Decision::Degenerate => "degenerate",
            Decision::Error => "error",
            Decision::Timeout => "timeout",
        }
    }
}

/// What to measure next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NextMeasurement {
    /// Decided.
    None,
    /// One more selection pair.
    AddSample,
    /// The ladder's confirmation pairs after a promising exploratory pair.
    Confirm,
    /// The held-out pair (only after selection).
    Holdout,
}

/// How the candidate's measurement ended before any comparison.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "status", content = "reason")]
pub enum Measured {
    /// Samples are in the snapshots.
    Ok,
    /// Exit 125 with the censor marker.
    Censored,
    /// Timed out.
    Timeout,
    /// Failed otherwise (the reason).
    Error(String),
}

/// The decide step's configuration, read from the spec as loaded (never flattened, O-35).
#[derive(Debug, Clone, PartialEq)]
pub struct DecideConfig {
    /// Objectives ([`Spec::objectives`]).
    pub objectives: Vec<Objective>,
    /// The primary metric's name (ranks experiments).
    pub primary: String,
    /// `metric.min_relative_change`, defaulted.
    pub min_relative_change: f64,
    /// `measurement.stability.mode`.
    pub mode: StabilityMode,
    /// `measurement.stability.repeat_count`, defaulted.
    pub repeat_count: usize,
    /// Whether a holdout is configured (`measurement.holdout`, or a judge `confirmation_seed`).
    pub has_holdout: bool,
}

impl DecideConfig {
    /// From the spec.
    pub fn from_spec(spec: &Spec) -> Self {
        Self {
            objectives: spec.objectives(),
            primary: spec.metric.primary.name.clone(),
            min_relative_change: spec
                .metric
                .min_relative_change
                .unwrap_or(DEFAULT_MIN_RELATIVE_CHANGE),
            mode: spec.measurement.stability.mode,
            repeat_count: spec.measurement.repeat_count() as usize,
            has_holdout: spec.measurement.holdout.is_some()
                || spec
                    .metric
                    .judge
                    .as_ref()
                    .is_some_and(|j| j.confirmation_seed.is_some()),
        }
    }
}

/// One objective's comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObjectiveResult {
    /// Metric name.
    pub name: String,
    /// Required objective.
    pub required: bool,
    /// Reference mean.
    pub reference: f64,
    /// Candidate mean.
    pub candidate: f64,
    /// Relative change, signed so that positive is better.
    pub relative_gain: f64,
    /// The noise threshold it was compared against.
    pub threshold: f64,
    /// `improved`, `regressed` or `neutral`.
    pub verdict: String,
}

/// The decide step's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecideResult {
    /// The decision.
    pub decision: Decision,
    /// What to measure next (`none` once decided).
    pub next_measurement: NextMeasurement,
    /// Whether the selection comparison is eligible (O-44).
    pub eligible: bool,
    /// Primary relative gain when the primary moved, else the strongest required-objective gain (O-45).
    pub rank_score: Option<f64>,
    /// Whether the candidate meets every declared required target (O-55).
    pub target_reached: bool,
    /// Per-objective comparisons of the selection pair.
    pub objectives: Vec<ObjectiveResult>,
    /// Why, in one line.
    pub reason: String,
    /// The PACE keep rule's state over the primary objective's pairs (`stability.mode: pace`
    /// only; issue 34 item 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pace: Option<PaceReport>,
}

impl DecideResult {
    fn terminal(decision: Decision, reason: impl Into<String>) -> Self {
        Self {
            decision,
            next_measurement: NextMeasurement::None,
            eligible: false,
            rank_score: None,
            target_reached: false,
            objectives: vec![],
            reason: reason.into(),
            pace: None,
        }
    }
}

/// PACE over the primary objective's pairs (the i-th reference sample against the i-th candidate
/// sample): a relative gain beyond `min_relative_change` is a win, a loss beyond it a loss, else a tie.
fn pace_of_pairs(cfg: &DecideConfig, reference: &Snapshot, candidate: &Snapshot) -> PaceReport {
    let direction = cfg
        .objectives
        .iter()
        .find(|o| o.name == cfg.primary)
        .map_or(1.0, |o| o.direction.sign());
    let samples = |s: &Snapshot| {
        s.metrics
            .get(&cfg.primary)
            .map(|m| m.samples.clone())
            .unwrap_or_default()
    };
    let (r, c) = (samples(reference), samples(candidate));
    let pairs = r.iter().zip(&c).map(|(r, c)| {
        let gain = direction * (c - r) / r.abs().max(f64::EPSILON);
        if gain > cfg.min_relative_change {
            Pair::Win
        } else if gain < -cfg.min_relative_change {
            Pair::Loss
        } else {
            Pair::Tie
        }
    });
    Pace::default().run(pairs)
}

/// The payload: the candidate's status plus the selection pair and, once collected, the holdout pair.
#[derive(Debug, Clone, Copy)]
pub struct DecideInput<'a> {
    /// How the candidate's measurement ended.
    pub measured: &'a Measured,
    /// Reference (the optimization branch at dispatch) selection snapshot.
    pub reference: &'a Snapshot,
    /// Candidate selection snapshot.
    pub candidate: &'a Snapshot,
    /// `(reference, candidate)` holdout snapshots, when collected.
    pub holdout: Option<(&'a Snapshot, &'a Snapshot)>,
}

/// Compares the objectives of one pairing; `Err(name)` for a required objective missing on a side.
fn compare(
    cfg: &DecideConfig,
    reference: &Snapshot,
    candidate: &Snapshot,
) -> Result<Vec<ObjectiveResult>, String> {
    let mut out = Vec::new();
    for o in &cfg.objectives {
        let (Some(r), Some(c)) = (
            reference.metrics.get(&o.name),
            candidate.metrics.get(&o.name),
        ) else {
            if o.required {
                return Err(o.name.clone());
            }
            continue;
        };
        if r.samples.is_empty() || c.samples.is_empty() {
            if o.required {
                return Err(o.name.clone());
            }
            continue;
        }
        let (rm, cm) = (mean(&r.samples), mean(&c.samples));
        let scale = rm.abs().max(f64::EPSILON);
        let relative_gain = o.direction.sign() * (cm - rm) / scale;
        let threshold = cfg
            .min_relative_change
            .max(2.0 * std_dev(&r.samples) / scale);
        let verdict = if relative_gain > threshold {
            "improved"
        } else if relative_gain < -threshold {
            "regressed"
        } else {
            "neutral"
        };
        out.push(ObjectiveResult {
            name: o.name.clone(),
            required: o.required,
            reference: rm,
            candidate: cm,
            relative_gain,
            threshold,
            verdict: verdict.into(),
        });
    }
    Ok(out)
}

fn eligible(results: &[ObjectiveResult]) -> bool {
    let req = || results.iter().filter(|r| r.required);
    req().any(|r| r.verdict == "improved") && !req().any(|r| r.verdict == "regressed")
}

/// Whether `snapshot` meets every declared required target (false when none is declared).
pub fn target_reached(objectives: &[Objective], snapshot: &Snapshot) -> bool {
    let declared: Vec<_> = objectives
        .iter()
        .filter(|o| o.required && o.target.is_some())
        .collect();
    !declared.is_empty()
        && declared.iter().all(|o| {
            snapshot
                .aggregate(&o.name)
                .is_some_and(|v| o.direction.meets(v, o.target.unwrap_or_default()))
        })
}

/// The decide step (see module docs for the rules).
pub fn decide(cfg: &DecideConfig, input: DecideInput<'_>) -> DecideResult {
    match input.measured {
        Measured::Ok => {}
        Measured::Censored => {
            return DecideResult::terminal(
                Decision::Censored,
                "measurement censored itself (exit 125 + marker)",
            );
        }
        Measured::Timeout => {
            return DecideResult::terminal(Decision::Timeout, "measurement timed out");
        }
        Measured::Error(reason) => return DecideResult::terminal(Decision::Error, reason.clone()),
    }
    if let Some((gate, _)) = input.candidate.gates.iter().find(|(_, passed)| !**passed) {
        return DecideResult::terminal(
            Decision::Degenerate,
            format!("degenerate gate `{gate}` failed"),
        );
    }
    let results = match compare(cfg, input.reference, input.candidate) {
        Ok(r) => r,
        Err(name) => {
            return DecideResult::terminal(
                Decision::Error,
                format!("payload is missing required objective `{name}`"),
            );
        }
    };
    let is_eligible = eligible(&results);
    let primary_moved = results
        .iter()
        .find(|r| r.name == cfg.primary && r.verdict != "neutral");
    let rank_score = match primary_moved {
        Some(p) => Some(p.relative_gain),
        None => results
            .iter()
            .filter(|r| r.required && r.verdict == "improved")
            .map(|r| r.relative_gain)
            .max_by(f64::total_cmp),
    };
    let mut out = DecideResult {
        decision: Decision::Measured,
        next_measurement: NextMeasurement::None,
        eligible: is_eligible,
        rank_score,
        target_reached: target_reached(&cfg.objectives, input.candidate),
        objectives: results.clone(),
        reason: String::new(),
        pace: None,
    };
    let n = input.reference.n_samples().min(input.candidate.n_samples());
    let full = match cfg.mode {
        StabilityMode::Stable | StabilityMode::Pace => 1,
        StabilityMode::Repeat | StabilityMode::Ladder => cfg.repeat_count.max(1),
    };
    let any_regressed = results
        .iter()
        .any(|r| r.required && r.verdict == "regressed");
    // Issue 34 item 10: the PACE keep rule decides eligibility pair by pair.
    if cfg.mode == StabilityMode::Pace {
        let report = pace_of_pairs(cfg, input.reference, input.candidate);
        out.reason = report.reason.clone();
        out.eligible = report.committed() && !any_regressed;
        match report.verdict {
            Verdict::Continue => {
                out.next_measurement = NextMeasurement::AddSample;
                out.pace = Some(report);
                return out;
            }
            Verdict::Reject => {
                out.decision = Decision::Reverted;
                out.pace = Some(report);
                return out;
            }
            Verdict::Commit if any_regressed => {
                out.decision = Decision::Reverted;
                out.reason = format!(
                    "{}, but a required objective regressed beyond noise",
                    report.reason
                );
                out.pace = Some(report);
                return out;
            }
            Verdict::Commit => out.pace = Some(report),
        }
    }
    if cfg.mode == StabilityMode::Repeat && n < full {
        out.next_measurement = NextMeasurement::AddSample;
        out.reason = format!("repeat protocol: {n} of {full} pairs");
        return out;
    }
    if !is_eligible && cfg.mode != StabilityMode::Pace {
        out.decision = if any_regressed {
            Decision::Reverted
        } else {
            Decision::Inconclusive
        };
        out.reason = if any_regressed {
            "a required objective regressed beyond noise".into()
        } else {
            "no required objective moved beyond noise".into()
        };
        return out;
    }
    if cfg.mode == StabilityMode::Ladder && n < full {
        out.decision = Decision::Promising;
        out.next_measurement = if n <= 1 {
            NextMeasurement::Confirm
        } else {
            NextMeasurement::AddSample
        };
        out.reason = format!("promising on {n} of {full} pairs");
        return out;
    }
    if !cfg.has_holdout {
        out.decision = Decision::Keep;
        if out.pace.is_none() {
            out.reason = format!("eligible on {n} pair(s)");
        }
        return out;
    }
    let Some((h_ref, h_cand)) = input.holdout else {
        out.decision = Decision::Promising;
        out.next_measurement = NextMeasurement::Holdout;
        out.reason = "eligible on the selection sample; the holdout decides".into();
        return out;
    };
    match compare(cfg, h_ref, h_cand) {
        Err(name) => {
            out.decision = Decision::Error;
            out.reason = format!("holdout payload is missing required objective `{name}`");
        }
        Ok(h) if eligible(&h) => {
            out.decision = Decision::Keep;
            out.reason = "eligible on the selection sample and confirmed on the holdout".into();
        }
        Ok(h) => {
            let regressed = h.iter().any(|r| r.required && r.verdict == "regressed");
            out.decision = if regressed {
                Decision::Reverted
            } else {
                Decision::Inconclusive
            };
            out.reason = "the holdout does not confirm the gain".into();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::spec::Direction;

    fn obj(name: &str, direction: Direction, target: Option<f64>, required: bool) -> Objective {
        Objective {
            name: name.into(),
            direction,
            target,
            required,
        }
    }

    fn cfg(mode: StabilityMode, objectives: Vec<Objective>, has_holdout: bool) -> DecideConfig {
        DecideConfig {
            primary: objectives[0].name.clone(),
            objectives,
            min_relative_change: 0.01,
            mode,
            repeat_count: 3,
            has_holdout,
        }
    }

    fn snap(metrics: &[(&str, &[f64])]) -> Snapshot {
        let mut s = Snapshot::default();
        for (name, samples) in metrics {
            s.metrics.insert(
                (*name).into(),
                crate::snapshot::MetricSamples::from_samples(samples.to_vec()),
            );
        }
        s
    }

    fn ops() -> Vec<Objective> {
        vec![obj("ops", Direction::Minimize, Some(50.0), true)]
    }

    struct Row {
        name: &'static str,
        cfg: DecideConfig,
        measured: Measured,
        reference: Snapshot,
        candidate: Snapshot,
        holdout: Option<(Snapshot, Snapshot)>,
        want: (Decision, NextMeasurement, bool),
    }

    fn row(
        name: &'static str,
        cfg: DecideConfig,
        reference: Snapshot,
        candidate: Snapshot,
        want: (Decision, NextMeasurement, bool),
    ) -> Row {
        Row {
            name,
            cfg,
            measured: Measured::Ok,
            reference,
            candidate,
            holdout: None,
            want,
        }
    }

    fn check(rows: Vec<Row>) {
        for r in rows {
            let got = decide(
                &r.cfg,
                DecideInput {
                    measured: &r.measured,
                    reference: &r.reference,
                    candidate: &r.candidate,
                    holdout: r.holdout.as_ref().map(|(a, b)| (a, b)),
                },
            );
            assert_eq!(
                (got.decision, got.next_measurement, got.eligible),
                r.want,
                "row `{}`: {got:?}",
                r.name
            );
            if got.decision == Decision::Keep {
                assert_eq!(
                    got.next_measurement,
                    NextMeasurement::None,
                    "row `{}`: keep only with next none",
                    r.name
                );
            }
        }
    }

    use Decision as D;
    use NextMeasurement as N;
    use StabilityMode as M;

    // O-36: the seed's decide step ran as `node decide.mjs` and could be unavailable (no Node
    // runtime); here it is this crate's own function, called in process where the experiment is
    // collected (`experiment::collect`), so it cannot be missing. The failure it guarded against —
    // an experiment that cannot be decided — is an `error` entry with the reason, and the batch
    // goes on with the other experiments (`tests/tests/optimize.rs`
    // `remote_workers_push_results_that_are_checked_confirmed_and_merged_by_head_sha` runs a batch
    // whose `error` experiments sit beside a kept one).
    #[test]
    fn o36_an_undecidable_experiment_is_an_error_with_its_reason_never_an_empty_decision() {
        let cfg = cfg(M::Stable, ops(), false);
        let (reference, candidate) = (snap(&[("ops", &[100.0])]), snap(&[]));
        let d = decide(
            &cfg,
            DecideInput {
                measured: &Measured::Error("measurement exited 127: node not found".into()),
                reference: &reference,
                candidate: &candidate,
                holdout: None,
            },
        );
        assert_eq!(d.decision, Decision::Error);
        assert_eq!(d.reason, "measurement exited 127: node not found");
        assert_eq!(d.next_measurement, NextMeasurement::None);
        assert!(!d.eligible);
    }

    // O-37, O-38, O-47 (keep only with next_measurement none; promising + holdout is not a keep)
    #[test]
    fn decide_table_every_outcome_and_ladder_step() {
        let base = || snap(&[("ops", &[100.0])]);
        let mut censored = row(
            "censored",
            cfg(M::Stable, ops(), false),
            base(),
            snap(&[]),
            (D::Censored, N::None, false),
        );
        censored.measured = Measured::Censored;
        let mut timeout = row(
            "timeout",
            cfg(M::Stable, ops(), false),
            base(),
            snap(&[]),
            (D::Timeout, N::None, false),
        );
        timeout.measured = Measured::Timeout;
        let mut error = row(
            "error",
            cfg(M::Stable, ops(), false),
            base(),
            snap(&[]),
            (D::Error, N::None, false),
        );
        error.measured = Measured::Error("exit 1".into());
        let mut degenerate_cand = snap(&[("ops", &[10.0])]);
        degenerate_cand.gates = BTreeMap::from([("correct == 1".to_string(), false)]);
        let degenerate = row(
            "degenerate",
            cfg(M::Stable, ops(), false),
            base(),
            degenerate_cand,
            (D::Degenerate, N::None, false),
        );
        let mut holdout_confirms = row(
            "ladder holdout confirms → keep",
            cfg(M::Ladder, ops(), true),
            snap(&[("ops", &[100.0, 100.0, 100.0])]),
            snap(&[("ops", &[80.0, 80.0, 80.0])]),
            (D::Keep, N::None, true),
        );
        holdout_confirms.holdout = Some((snap(&[("ops", &[200.0])]), snap(&[("ops", &[150.0])])));
        let mut holdout_neutral = row(
            "holdout within noise → inconclusive, not kept",
            cfg(M::Ladder, ops(), true),
            snap(&[("ops", &[100.0, 100.0, 100.0])]),
            snap(&[("ops", &[80.0, 80.0, 80.0])]),
            (D::Inconclusive, N::None, true),
        );
        holdout_neutral.holdout = Some((snap(&[("ops", &[200.0])]), snap(&[("ops", &[199.5])])));
        let mut holdout_worse = row(
            "holdout regresses → reverted",
            cfg(M::Ladder, ops(), true),
            snap(&[("ops", &[100.0, 100.0, 100.0])]),
            snap(&[("ops", &[80.0, 80.0, 80.0])]),
            (D::Reverted, N::None, true),
        );
        holdout_worse.holdout = Some((snap(&[("ops", &[200.0])]), snap(&[("ops", &[260.0])])));
        check(vec![
            censored,
            timeout,
            error,
            degenerate,
            row(
                "stable improved → keep",
                cfg(M::Stable, ops(), false),
                base(),
                snap(&[("ops", &[80.0])]),
                (D::Keep, N::None, true),
            ),
            row(
                "stable worse → reverted",
                cfg(M::Stable, ops(), false),
                base(),
                snap(&[("ops", &[120.0])]),
                (D::Reverted, N::None, false),
            ),
            row(
                "stable within 1% → inconclusive",
                cfg(M::Stable, ops(), false),
                base(),
                snap(&[("ops", &[99.5])]),
                (D::Inconclusive, N::None, false),
            ),
            row(
                "repeat 1 of 3 → measured/add_sample",
                cfg(M::Repeat, ops(), false),
                base(),
                snap(&[("ops", &[80.0])]),
                (D::Measured, N::AddSample, true),
            ),
            row(
                "repeat inconclusive still wants samples → measured",
                cfg(M::Repeat, ops(), false),
                snap(&[("ops", &[100.0, 100.0])]),
                snap(&[("ops", &[100.0, 100.0])]),
                (D::Measured, N::AddSample, false),
            ),
            row(
                "repeat 3 of 3 → keep",
                cfg(M::Repeat, ops(), false),
                snap(&[("ops", &[100.0, 101.0, 99.0])]),
                snap(&[("ops", &[80.0, 81.0, 79.0])]),
                (D::Keep, N::None, true),
            ),
            row(
                "ladder exploratory promising → confirm",
                cfg(M::Ladder, ops(), false),
                base(),
                snap(&[("ops", &[80.0])]),
                (D::Promising, N::Confirm, true),
            ),
            row(
                "ladder 2 of 3 → add_sample",
                cfg(M::Ladder, ops(), false),
                snap(&[("ops", &[100.0, 100.0])]),
                snap(&[("ops", &[80.0, 80.0])]),
                (D::Promising, N::AddSample, true),
            ),
            row(
                "ladder exploratory not promising → reverted",
                cfg(M::Ladder, ops(), false),
                base(),
                snap(&[("ops", &[130.0])]),
                (D::Reverted, N::None, false),
            ),
            row(
                "ladder full → keep",
                cfg(M::Ladder, ops(), false),
                snap(&[("ops", &[100.0; 3])]),
                snap(&[("ops", &[80.0; 3])]),
                (D::Keep, N::None, true),
            ),
            row(
                "ladder full with holdout → promising/holdout",
                cfg(M::Ladder, ops(), true),
                snap(&[("ops", &[100.0; 3])]),
                snap(&[("ops", &[80.0; 3])]),
                (D::Promising, N::Holdout, true),
            ),
            row(
                "stable with holdout → promising/holdout",
                cfg(M::Stable, ops(), true),
                base(),
                snap(&[("ops", &[80.0])]),
                (D::Promising, N::Holdout, true),
            ),
            holdout_confirms,
            holdout_neutral,
            holdout_worse,
            row(
                "noise: large reference spread hides a 10% gain",
                cfg(M::Repeat, ops(), false),
                snap(&[("ops", &[80.0, 100.0, 120.0])]),
                snap(&[("ops", &[90.0, 90.0, 90.0])]),
                (D::Inconclusive, N::None, false),
            ),
        ]);
    }

    // O-44
    #[test]
    fn o44_objective_combinations_decide_eligibility() {
        let two = |second_required: bool| {
            vec![
                obj("ops", Direction::Minimize, None, true),
                obj("latency", Direction::Minimize, None, second_required),
            ]
        };
        let r = || snap(&[("ops", &[100.0]), ("latency", &[10.0])]);
        check(vec![
            row(
                "primary better, required latency worse → reverted",
                cfg(M::Stable, two(true), false),
                r(),
                snap(&[("ops", &[95.0]), ("latency", &[12.0])]),
                (D::Reverted, N::None, false),
            ),
            row(
                "primary better, optional latency worse → keep",
                cfg(M::Stable, two(false), false),
                r(),
                snap(&[("ops", &[95.0]), ("latency", &[12.0])]),
                (D::Keep, N::None, true),
            ),
            row(
                "primary flat, required latency better → keep",
                cfg(M::Stable, two(true), false),
                r(),
                snap(&[("ops", &[100.0]), ("latency", &[8.0])]),
                (D::Keep, N::None, true),
            ),
            row(
                "both better → keep",
                cfg(M::Stable, two(true), false),
                r(),
                snap(&[("ops", &[90.0]), ("latency", &[8.0])]),
                (D::Keep, N::None, true),
            ),
            row(
                "both flat → inconclusive",
                cfg(M::Stable, two(true), false),
                r(),
                snap(&[("ops", &[100.0]), ("latency", &[10.0])]),
                (D::Inconclusive, N::None, false),
            ),
            row(
                "both worse → reverted",
                cfg(M::Stable, two(true), false),
                r(),
                snap(&[("ops", &[110.0]), ("latency", &[12.0])]),
                (D::Reverted, N::None, false),
            ),
            row(
                "maximize direction",
                cfg(
                    M::Stable,
                    vec![obj("score", Direction::Maximize, None, true)],
                    false,
                ),
                snap(&[("score", &[3.0])]),
                snap(&[("score", &[3.5])]),
                (D::Keep, N::None, true),
            ),
        ]);
    }

    // O-35
    #[test]
    fn o35_missing_required_objective_is_an_error_never_a_decision() {
        let two = vec![
            obj("ops", Direction::Minimize, None, true),
            obj("latency", Direction::Minimize, None, true),
        ];
        check(vec![row(
            "candidate lacks latency",
            cfg(M::Stable, two, false),
            snap(&[("ops", &[100.0]), ("latency", &[10.0])]),
            snap(&[("ops", &[50.0])]),
            (D::Error, N::None, false),
        )]);
    }

    // O-37
    #[test]
    fn o37_inconclusive_and_censored_are_recorded_as_such_never_reverted() {
        let c = cfg(M::Stable, ops(), false);
        let got = decide(
            &c,
            DecideInput {
                measured: &Measured::Ok,
                reference: &snap(&[("ops", &[100.0])]),
                candidate: &snap(&[("ops", &[100.2])]),
                holdout: None,
            },
        );
        assert_eq!(
            (got.decision, got.next_measurement),
            (D::Inconclusive, N::None)
        );
        let got = decide(
            &c,
            DecideInput {
                measured: &Measured::Censored,
                reference: &snap(&[]),
                candidate: &snap(&[]),
                holdout: None,
            },
        );
        assert_eq!(got.decision, D::Censored);
    }

    // O-45
    #[test]
    fn o45_rank_score_is_primary_gain_else_strongest_required_gain() {
        let c = cfg(M::Stable, ops(), false);
        let a = decide(
            &c,
            DecideInput {
                measured: &Measured::Ok,
                reference: &snap(&[("ops", &[100.0])]),
                candidate: &snap(&[("ops", &[97.0])]),
                holdout: None,
            },
        );
        let b = decide(
            &c,
            DecideInput {
                measured: &Measured::Ok,
                reference: &snap(&[("ops", &[100.0])]),
                candidate: &snap(&[("ops", &[95.0])]),
                holdout: None,
            },
        );
        assert!(
            (a.rank_score.unwrap() - 0.03).abs() < 1e-9
                && (b.rank_score.unwrap() - 0.05).abs() < 1e-9
        );
        let two = vec![
            obj("ops", Direction::Minimize, None, true),
            obj("latency", Direction::Minimize, None, true),
        ];
        let c = cfg(M::Stable, two, false);
        let got = decide(
            &c,
            DecideInput {
                measured: &Measured::Ok,
                reference: &snap(&[("ops", &[100.0]), ("latency", &[10.0])]),
                candidate: &snap(&[("ops", &[100.0]), ("latency", &[8.0])]),
                holdout: None,
            },
        );
        assert_eq!(got.decision, D::Keep);
        assert!((got.rank_score.unwrap() - 0.2).abs() < 1e-9, "{got:?}");
    }

    // O-40
    #[test]
    fn o40_diagnostics_never_change_the_decision() {
        let c = cfg(M::Stable, ops(), false);
        let plain = snap(&[("ops", &[90.0])]);
        let mut with_cost = plain.clone();
        with_cost
            .diagnostics
            .insert("cost_usd".into(), serde_json::json!(12.5));
        with_cost
            .diagnostics
            .insert("regressions".into(), serde_json::json!(["case-3"]));
        let r = snap(&[("ops", &[100.0])]);
        let a = decide(
            &c,
            DecideInput {
                measured: &Measured::Ok,
                reference: &r,
                candidate: &plain,
                holdout: None,
            },
        );
        let b = decide(
            &c,
            DecideInput {
                measured: &Measured::Ok,
                reference: &r,
                candidate: &with_cost,
                holdout: None,
            },
        );
        assert_eq!(a, b);
    }

    // O-55
    #[test]
    fn o55_target_reached_needs_every_required_target() {
        let two = vec![
            obj("ops", Direction::Minimize, Some(50.0), true),
            obj("latency", Direction::Minimize, Some(5.0), true),
        ];
        assert!(
            !target_reached(&two, &snap(&[("ops", &[40.0]), ("latency", &[7.0])])),
            "primary-only hit"
        );
        assert!(target_reached(
            &two,
            &snap(&[("ops", &[40.0]), ("latency", &[5.0])])
        ));
        assert!(
            !target_reached(
                &[obj("ops", Direction::Minimize, None, true)],
                &snap(&[("ops", &[1.0])])
            ),
            "no declared target"
        );
        let optional = vec![
            obj("ops", Direction::Minimize, Some(50.0), true),
            obj("latency", Direction::Minimize, Some(5.0), false),
        ];
        assert!(target_reached(
            &optional,
            &snap(&[("ops", &[40.0]), ("latency", &[7.0])])
        ));
    }

    // Issue 34 item 10: the PACE keep rule, one pair at a time (ops minimized: 100 → 90 is a win,
    // 100 → 110 a loss, within 1 % a tie).
    #[test]
    fn pace_keep_rule_pairs_until_the_e_process_commits_or_spends_its_budget() {
        let run = |c: &DecideConfig, r: &[f64], cand: &[f64]| {
            decide(
                c,
                DecideInput {
                    measured: &Measured::Ok,
                    reference: &snap(&[("ops", r)]),
                    candidate: &snap(&[("ops", cand)]),
                    holdout: None,
                },
            )
        };
        let c = cfg(StabilityMode::Pace, ops(), false);
        let cases: &[(&[f64], Decision, NextMeasurement, bool, u64)] = &[
            // (candidate samples against 100 each, decision, next, eligible, discordant pairs)
            (
                &[90.0; 7],
                Decision::Measured,
                NextMeasurement::AddSample,
                false,
                7,
            ),
            (&[90.0; 8], Decision::Keep, NextMeasurement::None, true, 8),
            (
                &[99.5; 8],
                Decision::Measured,
                NextMeasurement::AddSample,
                false,
                0,
            ),
            // A loss first halves the wealth: nine wins after it (19.2) are not enough, ten are (28.8).
            (
                &[110.0, 90.0, 90.0, 90.0, 90.0, 90.0, 90.0, 90.0, 90.0, 90.0],
                Decision::Measured,
                NextMeasurement::AddSample,
                false,
                10,
            ),
            (
                &[
                    110.0, 90.0, 90.0, 90.0, 90.0, 90.0, 90.0, 90.0, 90.0, 90.0, 90.0,
                ],
                Decision::Keep,
                NextMeasurement::None,
                true,
                11,
            ),
        ];
        for (cand, decision, next, eligible, pairs) in cases {
            let d = run(&c, &vec![100.0; cand.len()], cand);
            assert_eq!(
                (d.decision, d.next_measurement, d.eligible),
                (*decision, *next, *eligible),
                "{cand:?}: {}",
                d.reason
            );
            assert_eq!(d.pace.as_ref().map(|p| p.pairs), Some(*pairs), "{cand:?}");
        }
        let alternating: Vec<f64> = (0..200)
            .map(|i| if i % 2 == 0 { 90.0 } else { 110.0 })
            .collect();
        let d = run(&c, &[100.0; 200], &alternating);
        assert_eq!(
            (d.decision, d.next_measurement),
            (Decision::Reverted, NextMeasurement::None),
            "{}",
            d.reason
        );
        assert!(d.reason.starts_with("PACE rejects"), "{}", d.reason);
        // A commit still waits for the holdout when one is configured.
        let d = run(
            &cfg(StabilityMode::Pace, ops(), true),
            &[100.0; 8],
            &[90.0; 8],
        );
        assert_eq!(
            (d.decision, d.next_measurement),
            (Decision::Promising, NextMeasurement::Holdout)
        );
        // Off (any other mode): no PACE field at all.
        assert_eq!(
            run(&cfg(StabilityMode::Stable, ops(), false), &[100.0], &[90.0]).pace,
            None
        );
    }
}
