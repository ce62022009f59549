//! The experiment log (`<state-root>/experiment-log.yaml`): baseline, best, spend, the
//! hypothesis backlog, one entry per experiment, and `run_state` (seed: optimize-loop,
//! loop.md 2.4 CP-2, 3.3 step 7 CP-3, 3.5 CP-4).
//!
//! Every write is a whole-file replace (temp file + rename) followed by a read-back that checks
//! what the checkpoint promises; a failed check retries the write ([`MAX_WRITE_ATTEMPTS`]) and
//! then errs, so the loop never proceeds on an unverified write (O-42, O-53).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use skillforge_runner_agent::{Spend as AgentSpend, Usage};

use skillforge_stage::fs::write_atomic;

use super::OptimizeError;
use super::backlog::{Hypothesis, Opportunity};
use super::decide::{DecideResult, Measured, NextMeasurement};
use super::judge::JudgedItem;
use super::snapshot::{Snapshot, WorstCase};
use super::stopping::StopReason;

/// File name of the log under the state root.
pub const LOG_FILE: &str = "experiment-log.yaml";
/// Attempts of one verified write.
pub const MAX_WRITE_ATTEMPTS: u32 = 3;

/// An experiment's outcome in the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Nonterminal: the keep path still needs samples.
    Promising,
    /// Nonterminal: measured, more samples wanted, or eligible and waiting for integration.
    Measured,
    /// Integrated as the batch's winner.
    Kept,
    /// Integrated as a file-disjoint runner-up.
    RunnerUpKept,
    /// Promising alone, neutral or harmful in combination.
    RunnerUpReverted,
    /// Eligible, not integrated.
    NotSelected,
    /// Not eligible.
    Reverted,
    /// Within noise.
    Inconclusive,
    /// Censored by the harness.
    Censored,
    /// A degenerate gate (or the smoke check) failed.
    Degenerate,
    /// Failed (measurement, dispatch, scope, decision engine).
    Error,
    /// The measurement timed out.
    Timeout,
    /// Needs an unapproved dependency; never ran.
    DeferredNeedsApproval,
}

impl Outcome {
    /// Whether the outcome is final.
    pub fn is_terminal(self) -> bool {
        !matches!(self, Outcome::Promising | Outcome::Measured)
    }

    /// Snake-case label.
    pub fn label(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default()
    }
}

/// Which pairing a comparison records (O-24).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ComparisonKind {
    /// Candidate vs the branch it was dispatched from.
    Standalone,
    /// A runner-up cherry-picked onto the new baseline vs that baseline.
    Integrated,
    /// The held-out pair.
    Holdout,
}

/// One side of a pairing, identified by the bytes measured (a tree hash, never just HEAD).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Side {
    /// `tree:<sha>` of the measured checkout (uncommitted changes included).
    pub identity: String,
    /// The samples.
    pub snapshot: Snapshot,
}

/// One distinct (reference, candidate, workload) pairing used in a decision (O-24).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// standalone | integrated | holdout.
    pub kind: ComparisonKind,
    /// What was measured (`measurement.command` or the holdout command).
    pub workload: String,
    /// Reference side.
    pub reference: Side,
    /// Candidate side.
    pub candidate: Side,
    /// Host that measured.
    pub machine: String,
    /// `orchestrator` or `worker`.
    pub measured_by: String,
    /// The decision on this pairing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<DecideResult>,
}

/// Judge results of an experiment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct JudgeRecord {
    /// Selection-sample items (holdout items never appear here, O-39).
    pub items: Vec<JudgedItem>,
    /// Judge calls dispatched.
    pub calls: u32,
    /// Items scored from the cache.
    pub cached: u32,
    /// Items missing from both replies.
    pub unscored: u32,
    /// Singleton evaluations (`metric.judge.singleton_sample`), kept apart from the items whose
    /// feedback feeds the digest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub singletons: Vec<JudgedItem>,
    /// Tokens and cost the judge runs of this pass reported (carried to the pair's
    /// `JudgedPair::spend`; the log keeps the entry's `spend` instead).
    #[serde(skip)]
    pub spend: AgentSpend,
}

/// One experiment (CP-3: exactly one per experiment, updated in place, O-41).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// Experiment number (1-based).
    pub experiment: u32,
    /// Hypothesis id.
    pub hypothesis_id: String,
    /// Hypothesis description.
    pub description: String,
    /// Hypothesis category.
    pub category: String,
    /// The backlog opportunity as of dispatch (frozen, O-19); `None` only for legacy entries.
    #[serde(default)]
    pub forecast: Option<Opportunity>,
    /// `optimize-exp/<spec>/exp-NNN`.
    pub branch: String,
    /// The optimization branch commit it started from.
    pub base_sha: String,
    /// Current outcome.
    pub outcome: Outcome,
    /// How the last measurement ended.
    pub measured: Measured,
    /// The last decision.
    #[serde(default)]
    pub decision: Option<DecideResult>,
    /// Files the worker changed inside `scope.mutable`.
    #[serde(default)]
    pub changed_files: Vec<String>,
    /// Files it changed outside the scope, reverted (O-01).
    #[serde(default)]
    pub scope_violations: Vec<String>,
    /// Pairings (O-24).
    #[serde(default)]
    pub comparisons: Vec<Comparison>,
    /// Worst cases of the candidate's selection measurement.
    #[serde(default)]
    pub worst_cases: Vec<WorstCase>,
    /// Judge results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<JudgeRecord>,
    /// What was learned (including anti-gaming notes, unconfirmed worker claims).
    #[serde(default)]
    pub learnings: Vec<String>,
    /// Diagnostics (cost, tokens, latency); never decisive (O-40).
    #[serde(default)]
    pub cost: BTreeMap<String, serde_json::Value>,
    /// Per-case regressions when `measurement.per_case`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub regressions: Vec<String>,
    /// The worker's final message (its claims are never measurements, O-03).
    #[serde(default)]
    pub worker_message: String,
    /// Tokens and cost of the experiment's agent runs (its worker and the judges of its sampled
    /// pairs; a holdout's judges count in the run's totals only) as their
    /// transcripts reported them; a run that reported none is counted in `runs_without_*`
    /// ("unknown", never 0; issue 31 item 7).
    #[serde(default)]
    pub spend: AgentSpend,
}

impl Entry {
    /// The standalone comparison, if measured (the independent one for a remote experiment).
    pub fn standalone(&self) -> Option<&Comparison> {
        // the last one: a remote experiment's independent confirmation after the worker's own pair
        self.comparisons
            .iter()
            .rev()
            .find(|c| c.kind == ComparisonKind::Standalone)
    }

    /// The comparison of `kind`, mutable, created from `make` when absent.
    pub fn comparison_mut(
        &mut self,
        kind: ComparisonKind,
        make: impl FnOnce() -> Comparison,
    ) -> &mut Comparison {
        if let Some(idx) = self.comparisons.iter().position(|c| c.kind == kind) {
            return &mut self.comparisons[idx];
        }
        self.comparisons.push(make());
        self.comparisons.last_mut().expect("just pushed")
    }

    /// The next measurement the last decision asked for.
    pub fn next_measurement(&self) -> NextMeasurement {
        self.decision
            .as_ref()
            .map_or(NextMeasurement::None, |d| d.next_measurement)
    }
}

/// The current best (`best` section).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Best {
    /// The kept experiment, `None` while the baseline is best.
    pub experiment: Option<u32>,
    /// The optimization branch commit.
    pub sha: String,
    /// Its metrics.
    pub metrics: Snapshot,
    /// Its worst cases.
    #[serde(default)]
    pub worst_cases: Vec<WorstCase>,
}

/// Spend totals: the USD counted against the caps, and the tokens and cost the agent runs
/// reported.
///
/// A run's cost counts as its transcript reported it; a run that reported none (Codex never
/// does) counts at the spec's estimate (`execution.worker_cost_usd`, `metric.judge.
/// cost_per_batch_usd`), named in `estimated`; with no estimate either it is counted in
/// `unpriced_runs`, and a cost cap then stops the run instead of passing it silently
/// (`StopReason::SpendUnknown`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct SpendTotals {
    /// Judge spend, USD (reported plus estimated).
    pub judge_usd: f64,
    /// Whole-run spend, USD (workers + judges + research; reported plus estimated).
    pub run_usd: f64,
    /// Which parts are estimates rather than host-reported usage.
    #[serde(default)]
    pub estimated: Vec<String>,
    /// Experiment workers' tokens and cost as reported.
    #[serde(default)]
    pub workers: AgentSpend,
    /// Judges' tokens and cost as reported.
    #[serde(default)]
    pub judges: AgentSpend,
    /// Agent runs whose cost is unknown: none reported and no estimate configured.
    #[serde(default)]
    pub unpriced_runs: u32,
    /// Of `unpriced_runs`, the judges' (what `metric.judge.max_total_cost_usd` cannot hold).
    #[serde(default)]
    pub unpriced_judge_runs: u32,
}

impl SpendTotals {
    /// Every agent run of the run (workers and judges).
    pub fn agents(&self) -> AgentSpend {
        let mut all = self.workers;
        all.merge(&self.judges);
        all
    }

    /// Tokens reported so far by every agent run (0 when none reported any).
    pub fn tokens(&self) -> u64 {
        self.agents().usage.total_tokens().unwrap_or(0)
    }

    /// Books `spend` (runs of one kind, `what` = `workers` or `judges`) against the USD totals:
    /// the reported cost, plus `estimate_each` for every run that reported none (marked
    /// estimated), or counted in `unpriced_runs` when there is no estimate. Returns the USD
    /// booked.
    pub fn book(&mut self, what: &str, spend: &AgentSpend, estimate_each: f64) -> f64 {
        let known = spend.usage.cost_usd.unwrap_or(0.0);
        let mut usd = known;
        if spend.runs_without_cost > 0 {
            if estimate_each > 0.0 {
                usd += estimate_each * f64::from(spend.runs_without_cost);
                if !self.estimated.iter().any(|s| s == what) {
                    self.estimated.push(what.to_owned());
                }
            } else {
                self.unpriced_runs += spend.runs_without_cost;
                if what == "judges" {
                    self.unpriced_judge_runs += spend.runs_without_cost;
                }
            }
        }
        self.run_usd += usd;
        match what {
            "judges" => {
                self.judge_usd += usd;
                self.judges.merge(spend);
            }
            _ => self.workers.merge(spend),
        }
        usd
    }

    /// The run's cost for people: `$0.0123`, `$0.0123 (estimated: workers)`, `unknown (2 agent
    /// run(s) reported no cost; $0.0100 known)`, or `unknown (2 agent run(s) reported no cost)`;
    /// never `$0` for a cost nobody reported.
    pub fn human_cost(&self) -> String {
        let estimated = if self.estimated.is_empty() {
            String::new()
        } else {
            format!(" (estimated: {})", self.estimated.join(", "))
        };
        if self.unpriced_runs > 0 && self.run_usd == 0.0 {
            return format!(
                "unknown ({} agent run(s) reported no cost)",
                self.unpriced_runs
            );
        }
        if self.unpriced_runs > 0 {
            return format!(
                "unknown ({} agent run(s) reported no cost; ${:.4} known{estimated})",
                self.unpriced_runs, self.run_usd
            );
        }
        format!("${:.4}{estimated}", self.run_usd)
    }
}

/// An outstanding wait: a dispatched experiment whose result has not been collected (O-23).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingWait {
    /// Experiment number.
    pub experiment: u32,
    /// Hypothesis id.
    pub hypothesis_id: String,
    /// The observable that carries the result: the worker job's idempotency key.
    pub observable: String,
    /// What to do when it arrives.
    pub action: String,
    /// Base commit at dispatch.
    pub base_sha: String,
    /// The agent runtime the worker was dispatched to.
    #[serde(default)]
    pub runtime: String,
    /// Set once the worker finished and its scope was enforced (so a resumed run does not lose
    /// what was reverted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub collected: Option<WorkerResult>,
    /// Times the worker ended on its runtime's capacity or rate limit and was queued again
    /// (O-20: backpressure, never a failure); absent when never.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub backpressure: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// What the orchestrator recorded when a worker finished.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerResult {
    /// Whether the worker job succeeded.
    pub ok: bool,
    /// Its final message, or the failure.
    pub message: String,
    /// In-scope changed files.
    pub changed_files: Vec<String>,
    /// Out-of-scope files, reverted (O-01).
    pub scope_violations: Vec<String>,
    /// Tokens and cost the worker's transcript reported (`None`: it reported none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Writes or commands the worker's runtime refused, one line each (`Write of `src/a.sh`
    /// refused`), from the agent report's `permission_denials`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<String>,
}

/// `run_state`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct RunState {
    /// Completed ticks.
    pub tick: u32,
    /// `running`, `waiting`, `stopped`.
    pub status: String,
    /// Seconds spent inside ticks.
    pub active_seconds: f64,
    /// When Phase 3 started (unix seconds).
    pub phase3_started_at: Option<i64>,
    /// Outstanding waits.
    #[serde(default)]
    pub pending_waits: Vec<PendingWait>,
    /// Experiments dispatched so far (the next number is this + 1).
    pub experiments_run: u32,
    /// Consecutive experiments without a keep.
    pub consecutive_non_improving: u32,
    /// Why the run stopped.
    #[serde(default)]
    pub stop_reason: Option<StopReason>,
    /// Counter behind generated hypothesis ids.
    #[serde(default)]
    pub hypotheses_created: u32,
    /// Codex delegation state (O-21, O-63).
    #[serde(default)]
    pub delegation: super::delegation::Delegation,
}

/// The whole log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct ExperimentLog {
    /// Spec name.
    pub spec: String,
    /// Baseline commit.
    pub baseline_sha: String,
    /// Baseline measurement (CP-1), with `worst_cases`.
    pub baseline: Snapshot,
    /// The current best.
    pub best: Best,
    /// Spend.
    pub spend: SpendTotals,
    /// The backlog (tested hypotheses leave it; deferred ones stay).
    pub hypothesis_backlog: Vec<Hypothesis>,
    /// One entry per experiment.
    pub experiments: Vec<Entry>,
    /// Run state.
    pub run_state: RunState,
    /// Logged notes (fallbacks, blockers, recoveries).
    #[serde(default)]
    pub notes: Vec<String>,
    /// The measured noise floor of the primary metric (`measurement.noise_floor_samples`,
    /// [`crate::noise`]); absent when not configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise_floor: Option<crate::noise::NoiseFloor>,
}

impl ExperimentLog {
    /// The entry of experiment `n`.
    pub fn entry(&self, n: u32) -> Option<&Entry> {
        self.experiments.iter().find(|e| e.experiment == n)
    }

    /// The entry of experiment `n`, mutable.
    pub fn entry_mut(&mut self, n: u32) -> Option<&mut Entry> {
        self.experiments.iter_mut().find(|e| e.experiment == n)
    }

    /// Appends or replaces the entry of `entry.experiment` (one entry per experiment, O-41).
    pub fn upsert(&mut self, entry: Entry) {
        match self.entry_mut(entry.experiment) {
            Some(slot) => *slot = entry,
            None => self.experiments.push(entry),
        }
    }

    /// The last `n` entries (the rolling window), oldest first.
    pub fn window(&self, n: usize) -> &[Entry] {
        &self.experiments[self.experiments.len().saturating_sub(n)..]
    }
}

/// The log file under `state_root`.
pub fn log_path(state_root: &Path) -> PathBuf {
    state_root.join(LOG_FILE)
}

/// Reads the log.
///
/// # Errors
/// [`OptimizeError::Env`] when the file cannot be read; [`OptimizeError::Invalid`] when it does not parse.
pub fn read(state_root: &Path) -> Result<ExperimentLog, OptimizeError> {
    let path = log_path(state_root);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| OptimizeError::Env(format!("read `{}`: {e}", path.display())))?;
    super::check_yaml(&text, &format!("experiment log `{}`", path.display()))?;
    serde_norway::from_str(&text)
        .map_err(|e| OptimizeError::Invalid(format!("experiment log `{}`: {e}", path.display())))
}

/// Writes the log and reads it back, retrying until `verify(read_back)` holds (O-42).
///
/// `fail_first` injects that many failed writes (tests of the retry only; 0 in production).
///
/// # Errors
/// [`OptimizeError::Env`] when no attempt verifies.
pub fn write_verified(
    state_root: &Path,
    log: &ExperimentLog,
    checkpoint: &str,
    verify: impl Fn(&ExperimentLog) -> bool,
) -> Result<(), OptimizeError> {
    write_verified_with(state_root, log, checkpoint, verify, 0)
}

pub(crate) fn write_verified_with(
    state_root: &Path,
    log: &ExperimentLog,
    checkpoint: &str,
    verify: impl Fn(&ExperimentLog) -> bool,
    fail_first: u32,
) -> Result<(), OptimizeError> {
    let text = serde_norway::to_string(log)
        .map_err(|e| OptimizeError::Invalid(format!("serialize experiment log: {e}")))?;
    let path = log_path(state_root);
    let mut last = String::new();
    for attempt in 0..MAX_WRITE_ATTEMPTS {
        let body = if attempt < fail_first {
            "spec: [truncated"
        } else {
            text.as_str()
        };
        if let Err(e) = write_atomic(&path, body) {
            last = e.to_string();
            continue;
        }
        match read(state_root) {
            Ok(back) if back == *log && verify(&back) => return Ok(()),
            Ok(_) => last = format!("{checkpoint}: read-back does not match what was written"),
            Err(e) => last = e.to_string(),
        }
        tracing::warn!(checkpoint, attempt, error = %last, "experiment log write not verified; retrying");
    }
    Err(OptimizeError::Env(format!(
        "{checkpoint} verification failed after {MAX_WRITE_ATTEMPTS} writes of `{}`: {last}",
        path.display()
    )))
}

/// CP-2 check: every hypothesis carries a complete opportunity record (O-12).
pub fn cp2_ok(log: &ExperimentLog) -> bool {
    log.hypothesis_backlog.iter().all(|h| h.validate().is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(n: u32) -> Entry {
        Entry {
            experiment: n,
            hypothesis_id: format!("h-{n}"),
            description: "d".into(),
            category: "c".into(),
            forecast: None,
            branch: format!("optimize-exp/ops/exp-{n:03}"),
            base_sha: "abc".into(),
            outcome: Outcome::Measured,
            measured: Measured::Ok,
            decision: None,
            changed_files: vec![],
            scope_violations: vec![],
            comparisons: vec![],
            worst_cases: vec![],
            judge: None,
            learnings: vec![],
            cost: BTreeMap::new(),
            regressions: vec![],
            worker_message: String::new(),
            spend: Default::default(),
        }
    }

    // O-42
    #[test]
    fn o42_a_failed_write_is_retried_until_the_read_back_verifies() {
        let dir = tempfile::tempdir().unwrap();
        let mut log = ExperimentLog {
            spec: "ops".into(),
            ..ExperimentLog::default()
        };
        log.upsert(entry(1));
        write_verified_with(dir.path(), &log, "CP-3", |l| l.entry(1).is_some(), 1)
            .expect("second attempt verifies");
        assert_eq!(read(dir.path()).unwrap(), log);
        let err = write_verified_with(
            dir.path(),
            &log,
            "CP-3",
            |l| l.entry(1).is_some(),
            MAX_WRITE_ATTEMPTS,
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("CP-3 verification failed"),
            "{err}"
        );
        let err = write_verified(dir.path(), &log, "CP-3", |l| l.entry(2).is_some()).unwrap_err();
        assert!(
            err.to_string().contains("CP-3"),
            "a failing check never passes: {err}"
        );
    }

    // O-41
    #[test]
    fn o41_one_entry_per_experiment_updated_in_place() {
        let mut log = ExperimentLog::default();
        log.upsert(entry(1));
        log.upsert(entry(2));
        let mut again = entry(1);
        again.outcome = Outcome::Promising;
        log.upsert(again);
        assert_eq!(log.experiments.len(), 2);
        assert_eq!(log.entry(1).unwrap().outcome, Outcome::Promising);
        assert_eq!(
            log.entry(2).unwrap().outcome,
            Outcome::Measured,
            "another experiment's entry is untouched"
        );
        assert!(
            !Outcome::Promising.is_terminal()
                && !Outcome::Measured.is_terminal()
                && Outcome::Kept.is_terminal()
        );
    }
}
