//! Stopping criteria (seed: optimize-loop, loop.md 3.6; resolutions 16): each reason is recorded
//! in `run_state.stop_reason`.

use serde::{Deserialize, Serialize};

use super::log::SpendTotals;
use super::spec::StoppingSpec;

/// Why the loop stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "reason", content = "detail")]
pub enum StopReason {
    /// The current best meets every declared required target.
    TargetReached,
    /// `max_iterations` experiments have run.
    MaxIterations,
    /// `max_hours` of active (in-tick) time.
    MaxHours,
    /// `max_wall_hours` since Phase 3 started.
    MaxWallHours,
    /// The next dispatch would pass a spend cap (which one).
    SpendCap(String),
    /// `plateau_iterations` consecutive experiments without improvement.
    Plateau,
    /// The operator stopped the run.
    ManualStop,
    /// No executable next action remains.
    NothingRunnable,
    /// A locating measurement that would change a keep-or-skip decision cannot be taken.
    Blocked(String),
    /// A spend cap cannot be enforced: agent runs reported no cost (or no tokens, for a tokens
    /// cap) and the spec gives no estimate; the detail says which cap and what to do
    /// (issue 31 item 7: an unknown spend never passes a cap silently).
    SpendUnknown(String),
    /// An experiment's job could not run on this machine (its runtime not logged in, its model
    /// API out of reach, its program missing): an environment fault, not a verdict on the
    /// hypothesis, which stays runnable. The detail names the experiment and the job's reason.
    /// Like [`StopReason::ManualStop`], running the run again continues it (the job starts again).
    NotRunnable(String),
}

impl StopReason {
    /// One line for status and the report.
    pub fn describe(&self) -> String {
        match self {
            StopReason::TargetReached => {
                "target reached: the current best meets every declared required target".into()
            }
            StopReason::MaxIterations => "max_iterations reached".into(),
            StopReason::MaxHours => "max_hours of active time reached".into(),
            StopReason::MaxWallHours => "max_wall_hours since phase 3 started reached".into(),
            StopReason::SpendCap(which) => {
                format!("spend cap: the next dispatch would pass {which}")
            }
            StopReason::Plateau => {
                "plateau: no improvement for plateau_iterations consecutive experiments".into()
            }
            StopReason::ManualStop => "stopped by the operator".into(),
            StopReason::NothingRunnable => "no runnable hypothesis left".into(),
            StopReason::Blocked(what) => format!("blocked: {what}"),
            StopReason::SpendUnknown(why) => format!("spend cap cannot be enforced: {why}"),
            StopReason::NotRunnable(why) => format!(
                "stopped, nothing spent: {why}; fix that, then `optimize resume` starts the same experiment again (its hypothesis is not used up)"
            ),
        }
    }
}

/// The counters the criteria read.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Progress {
    /// Experiments dispatched (every outcome counts; deferred ones never ran, resolutions 16).
    pub experiments_run: u32,
    /// `run_state.active_seconds`.
    pub active_seconds: f64,
    /// Seconds since `run_state.phase3_started_at`.
    pub wall_seconds: f64,
    /// Consecutive experiments without a keep.
    pub consecutive_non_improving: u32,
    /// `target_reached` of the current best.
    pub best_meets_targets: bool,
}

/// The first criterion that holds, checked in the seed's order (target, iterations, active
/// hours, wall hours, plateau); spend caps are checked before each dispatch by batch selection.
pub fn check(spec: &StoppingSpec, p: &Progress) -> Option<StopReason> {
    if spec.target_reached && p.best_meets_targets {
        return Some(StopReason::TargetReached);
    }
    if spec.max_iterations.is_some_and(|n| p.experiments_run >= n) {
        return Some(StopReason::MaxIterations);
    }
    if spec
        .max_hours
        .is_some_and(|h| p.active_seconds >= h * 3600.0)
    {
        return Some(StopReason::MaxHours);
    }
    if wall_deadline_passed(spec, p) {
        return Some(StopReason::MaxWallHours);
    }
    if spec
        .plateau_iterations
        .is_some_and(|n| n > 0 && p.consecutive_non_improving >= n)
    {
        return Some(StopReason::Plateau);
    }
    None
}

/// The spend check before each selection (issue 31 item 7): a cost cap (`stopping.
/// max_total_cost_usd`, `metric.judge.max_total_cost_usd` = `judge_cap`) with agent runs whose
/// cost is unknown ([`SpendTotals::unpriced_runs`]) stops the run as [`StopReason::SpendUnknown`]
/// instead of treating the unknown as $0; `stopping.max_total_tokens` stops it once the tokens
/// reported reach the cap ([`StopReason::SpendCap`]), or as `SpendUnknown` when some run
/// reported no tokens. Cost caps against estimates are batch selection's ([`super::backlog::Spend`]).
pub fn spend_check(
    spec: &StoppingSpec,
    judge_cap: Option<f64>,
    spend: &SpendTotals,
) -> Option<StopReason> {
    let unpriced = [
        (
            "stopping.max_total_cost_usd",
            spec.max_total_cost_usd.is_some(),
            spend.unpriced_runs,
        ),
        (
            "metric.judge.max_total_cost_usd",
            judge_cap.is_some(),
            spend.unpriced_judge_runs,
        ),
    ];
    if let Some((cap, _, n)) = unpriced
        .into_iter()
        .find(|(_, capped, n)| *capped && *n > 0)
    {
        return Some(StopReason::SpendUnknown(format!(
            "{cap} cannot be enforced: {n} agent run(s) reported no cost (Codex reports tokens only); set execution.worker_cost_usd \
             (and metric.judge.cost_per_batch_usd) to book an estimate per run, or cap tokens with stopping.max_total_tokens"
        )));
    }
    if let Some(cap) = spec.max_total_tokens {
        let agents = spend.agents();
        if agents.runs_without_tokens > 0 {
            return Some(StopReason::SpendUnknown(format!(
                "stopping.max_total_tokens cannot be enforced: {} agent run(s) reported no tokens; cap the cost with stopping.max_total_cost_usd instead",
                agents.runs_without_tokens
            )));
        }
        if spend.tokens() >= cap {
            return Some(StopReason::SpendCap(format!(
                "stopping.max_total_tokens ({} of {cap} tokens used)",
                spend.tokens()
            )));
        }
    }
    None
}

/// Whether the calendar backstop has passed (O-58): checked before crossing a tick boundary and
/// before integrating; no wake extends it.
pub fn wall_deadline_passed(spec: &StoppingSpec, p: &Progress) -> bool {
    spec.max_wall_hours
        .is_some_and(|h| p.wall_seconds >= h * 3600.0)
}

/// The calendar deadline of a run (O-58): Unix seconds (fractional) at which
/// `stopping.max_wall_hours` since `run_state.phase3_started_at` passes; `None` without the key or
/// before phase 3 started. Waits for workers end at it, and no measurement starts after it.
pub fn wall_deadline(spec: &StoppingSpec, phase3_started_at: Option<i64>) -> Option<f64> {
    Some(phase3_started_at? as f64 + spec.max_wall_hours? * 3600.0)
}

/// Remaining experiments before `max_iterations` (`u32::MAX` when unset), for batch sizing (O-56).
pub fn iterations_left(spec: &StoppingSpec, experiments_run: u32) -> u32 {
    spec.max_iterations
        .map_or(u32::MAX, |n| n.saturating_sub(experiments_run))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> StoppingSpec {
        StoppingSpec::default()
    }

    // O-55
    #[test]
    fn o55_target_stop_only_when_enabled_and_every_target_met() {
        let s = StoppingSpec {
            target_reached: true,
            ..spec()
        };
        assert_eq!(
            check(
                &s,
                &Progress {
                    best_meets_targets: true,
                    ..Progress::default()
                }
            ),
            Some(StopReason::TargetReached)
        );
        assert_eq!(check(&s, &Progress::default()), None);
        assert_eq!(
            check(
                &spec(),
                &Progress {
                    best_meets_targets: true,
                    ..Progress::default()
                }
            ),
            None,
            "off unless stopping.target_reached"
        );
    }

    // O-56
    #[test]
    fn o56_max_iterations_counts_experiments_run() {
        let s = StoppingSpec {
            max_iterations: Some(10),
            ..spec()
        };
        assert_eq!(
            check(
                &s,
                &Progress {
                    experiments_run: 9,
                    ..Progress::default()
                }
            ),
            None
        );
        assert_eq!(
            check(
                &s,
                &Progress {
                    experiments_run: 10,
                    ..Progress::default()
                }
            ),
            Some(StopReason::MaxIterations)
        );
        assert_eq!(iterations_left(&s, 9), 1);
        assert_eq!(iterations_left(&s, 12), 0);
    }

    // O-57
    #[test]
    fn o57_max_hours_reads_active_time_not_waiting_time() {
        let s = StoppingSpec {
            max_hours: Some(1.0),
            ..spec()
        };
        let waiting = Progress {
            active_seconds: 1800.0,
            wall_seconds: 3.5 * 3600.0,
            ..Progress::default()
        };
        assert_eq!(check(&s, &waiting), None);
        assert_eq!(
            check(
                &s,
                &Progress {
                    active_seconds: 3600.0,
                    ..Progress::default()
                }
            ),
            Some(StopReason::MaxHours)
        );
    }

    // O-58
    #[test]
    fn o58_wall_clock_backstop() {
        let s = StoppingSpec {
            max_wall_hours: Some(2.0),
            ..spec()
        };
        let p = Progress {
            wall_seconds: 7200.0,
            active_seconds: 10.0,
            ..Progress::default()
        };
        assert!(wall_deadline_passed(&s, &p));
        assert_eq!(check(&s, &p), Some(StopReason::MaxWallHours));
        assert!(!wall_deadline_passed(
            &s,
            &Progress {
                wall_seconds: 7199.0,
                ..Progress::default()
            }
        ));
        assert_eq!(wall_deadline(&s, Some(1_000)), Some(8_200.0));
        assert_eq!(
            wall_deadline(&s, None),
            None,
            "before phase 3 there is no deadline"
        );
        assert_eq!(wall_deadline(&spec(), Some(1_000)), None);
    }

    // O-60
    #[test]
    fn o60_plateau_counts_consecutive_non_improving() {
        let s = StoppingSpec {
            plateau_iterations: Some(5),
            ..spec()
        };
        assert_eq!(
            check(
                &s,
                &Progress {
                    consecutive_non_improving: 4,
                    ..Progress::default()
                }
            ),
            None
        );
        assert_eq!(
            check(
                &s,
                &Progress {
                    consecutive_non_improving: 5,
                    ..Progress::default()
                }
            ),
            Some(StopReason::Plateau)
        );
    }

    // issue 31 item 7
    #[test]
    fn an_unknown_cost_never_passes_a_cost_cap_and_tokens_caps_hold() {
        use skillforge_runner_agent::{Spend as AgentSpend, Usage};
        let run = |tokens: Option<u64>, cost: Option<f64>| {
            let mut s = AgentSpend::default();
            s.add_run(Some(&Usage {
                input_tokens: tokens,
                cost_usd: cost,
                ..Usage::default()
            }));
            s
        };
        let capped = StoppingSpec {
            max_total_cost_usd: Some(5.0),
            ..spec()
        };
        let mut spend = SpendTotals::default();
        spend.book("workers", &run(Some(900), Some(0.5)), 0.0);
        assert_eq!(
            spend_check(&capped, None, &spend),
            None,
            "a reported cost under the cap"
        );
        spend.book("workers", &run(Some(900), None), 0.0);
        let Some(StopReason::SpendUnknown(why)) = spend_check(&capped, None, &spend) else {
            panic!("an unknown cost passed the cap")
        };
        assert!(
            why.contains("stopping.max_total_cost_usd")
                && why.contains("1 agent run(s) reported no cost"),
            "{why}"
        );
        assert_eq!(
            spend_check(&spec(), None, &spend),
            None,
            "no cap: nothing to enforce"
        );
        assert_eq!(
            spend_check(&spec(), Some(1.0), &spend),
            None,
            "a judge cap holds judges' spend only"
        );
        let mut judged = SpendTotals::default();
        judged.book("judges", &run(Some(10), None), 0.0);
        assert!(
            matches!(spend_check(&spec(), Some(1.0), &judged), Some(StopReason::SpendUnknown(w)) if w.contains("metric.judge.max_total_cost_usd"))
        );
        let mut estimated = SpendTotals::default();
        estimated.book("workers", &run(Some(900), None), 0.25);
        assert_eq!(
            spend_check(&capped, None, &estimated),
            None,
            "an estimate prices the run"
        );
        assert_eq!(
            (estimated.run_usd, estimated.estimated.clone()),
            (0.25, vec!["workers".to_owned()])
        );
        let tokens = StoppingSpec {
            max_total_tokens: Some(2000),
            ..spec()
        };
        assert_eq!(
            spend_check(&tokens, None, &spend),
            None,
            "1800 of 2000 tokens"
        );
        spend.book("judges", &run(Some(300), Some(0.1)), 0.0);
        assert!(
            matches!(spend_check(&tokens, None, &spend), Some(StopReason::SpendCap(w)) if w.contains("2100 of 2000"))
        );
        let mut silent = SpendTotals::default();
        silent.book("workers", &run(None, Some(0.1)), 0.0);
        assert!(
            matches!(spend_check(&tokens, None, &silent), Some(StopReason::SpendUnknown(w)) if w.contains("reported no tokens"))
        );
    }

    #[test]
    fn reasons_describe_themselves() {
        assert!(
            StopReason::SpendCap("stopping.max_total_cost_usd".into())
                .describe()
                .contains("max_total_cost_usd")
        );
        assert!(
            StopReason::Blocked("profiler missing".into())
                .describe()
                .contains("profiler missing")
        );
    }
}
