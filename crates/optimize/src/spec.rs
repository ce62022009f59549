//! The optimize spec (YAML): what to improve, how to measure it, what may change, how to run and
//! when to stop (seed: optimize-loop, experiment-prompt-template.md variable table; loop.md 3.1–3.6).
//!
//! Parsing is strict: an unknown key, a wrong type or a failed semantic check is a
//! [`SpecError`] whose message names the key path (`metric.judge.batch_size`) and the file.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::OptimizeError;

/// Default `min_relative_change` of the noise threshold (resolutions 18): 1 %.
pub const DEFAULT_MIN_RELATIVE_CHANGE: f64 = 0.01;
/// Default `measurement.stability.repeat_count` (resolutions 18).
pub const DEFAULT_REPEAT_COUNT: u32 = 3;
/// Default measurement timeout, seconds.
pub const DEFAULT_MEASUREMENT_TIMEOUT_SECS: u64 = 600;
/// Default `execution.max_runner_up_merges_per_batch`.
pub const DEFAULT_MAX_RUNNER_UP_MERGES: u32 = 2;

/// Which way an objective improves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Larger is better.
    Maximize,
    /// Smaller is better.
    Minimize,
}

impl Direction {
    /// `+1` for maximize, `-1` for minimize: multiply a raw change by it to get "better is positive".
    pub fn sign(self) -> f64 {
        match self {
            Direction::Maximize => 1.0,
            Direction::Minimize => -1.0,
        }
    }

    /// Whether `value` meets `target` in this direction (`>=` for maximize, `<=` for minimize).
    pub fn meets(self, value: f64, target: f64) -> bool {
        match self {
            Direction::Maximize => value >= target,
            Direction::Minimize => value <= target,
        }
    }
}

/// Where an objective's value comes from.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum MetricKind {
    /// A number the measurement command prints.
    #[default]
    Hard,
    /// The aggregate of judge scores (`metric.judge`).
    Judge,
}

/// `metric.primary`: the metric that ranks experiments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PrimarySpec {
    /// Metric name as the measurement prints it (or the judge's scoring field).
    pub name: String,
    /// Which way is better.
    pub direction: Direction,
    /// Target value; reaching it can stop the run (`stopping.target_reached`).
    #[serde(default)]
    pub target: Option<f64>,
    /// `hard` (measured) or `judge`.
    #[serde(default, rename = "type")]
    pub kind: MetricKind,
    /// The metric is the measurement's own wall time in seconds, so elapsed time bounds it
    /// (what lets a measurement be censored early, O-28). Default false.
    #[serde(default)]
    pub elapsed: bool,
}

/// One entry of `metric.objectives`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ObjectiveSpec {
    /// Metric name.
    pub name: String,
    /// Which way is better.
    pub direction: Direction,
    /// Target value, if declared.
    #[serde(default)]
    pub target: Option<f64>,
    /// Whether the objective takes part in eligibility (default true).
    #[serde(default = "yes")]
    pub required: bool,
    /// As [`PrimarySpec::elapsed`].
    #[serde(default)]
    pub elapsed: bool,
}

fn yes() -> bool {
    true
}

/// `metric.judge.stratification`: sample proportionally from groups of items sharing `field`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StratificationSpec {
    /// The item field whose value names an item's stratum.
    pub field: String,
}

/// `metric.judge`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JudgeSpec {
    /// The scoring rubric (immutable harness).
    pub rubric: String,
    /// Rubric for singleton evaluation.
    #[serde(default)]
    pub singleton_rubric: Option<String>,
    /// Items per judge call (≥ 1).
    pub batch_size: u32,
    /// Items sampled per output (≥ 1).
    pub sample_size: u32,
    /// Singleton items sampled (0 = none).
    #[serde(default)]
    pub singleton_sample: u32,
    /// Stratified sampling; uniform when absent.
    #[serde(default)]
    pub stratification: Option<StratificationSpec>,
    /// Seed of the selection sample.
    pub sample_seed: u64,
    /// Seed of the holdout sample (must differ from `sample_seed`).
    #[serde(default)]
    pub confirmation_seed: Option<u64>,
    /// Model tier (`cheap` by default); the judge runtime's profile resolves it to a model
    /// (its `[models]` table, [`JudgeSpec::model_for`]).
    #[serde(default = "cheap")]
    pub model: String,
    /// Judge spend cap, USD.
    #[serde(default)]
    pub max_total_cost_usd: Option<f64>,
    /// Estimated cost of one judge call, USD (for spend caps).
    #[serde(default)]
    pub cost_per_batch_usd: f64,
    /// The judge field aggregated into the primary (defaults to `metric.primary.name`).
    #[serde(default)]
    pub score_field: Option<String>,
    /// Agent runtime profile of the judges (defaults to `execution.runtime`). Judges are always
    /// their own `agent` jobs, never the worker's context (O-11).
    #[serde(default)]
    pub runtime: Option<String>,
}

impl JudgeSpec {
    /// The judges' runtime profile name: `metric.judge.runtime`, else `execution.runtime`.
    pub fn runtime_for<'a>(&'a self, execution: &'a ExecutionSpec) -> &'a str {
        self.runtime.as_deref().unwrap_or(&execution.runtime)
    }

    /// The model every judge job is given: the tier [`JudgeSpec::model`] resolved by the judge
    /// runtime's profile (`runners/agent/runtimes/<runtime>.toml`, `[models]`; seed:
    /// judge-prompt-template.md, "the harness resolves the tier to a concrete model"), or
    /// `skillforge_runner_agent::CONFIGURED_MODEL` where the profile has no name fitting every
    /// user (OpenCode: the model its user configured runs).
    ///
    /// # Errors
    /// `(key, message)`: `metric.judge.model` for a tier the profile does not define (the
    /// message names the profile file and its tiers); the runtime's key for an unknown runtime.
    pub fn model_for(&self, execution: &ExecutionSpec) -> Result<String, (String, String)> {
        let runtime = self.runtime_for(execution);
        let key = if self.runtime.is_some() {
            "metric.judge.runtime"
        } else {
            "execution.runtime"
        };
        let profile =
            skillforge_runner_agent::find(runtime).map_err(|e| (key.to_owned(), e.to_string()))?;
        let model = profile
            .model_for_tier(&self.model)
            .map_err(|e| ("metric.judge.model".to_owned(), e.to_string()))?;
        Ok(model.to_owned())
    }
}

fn cheap() -> String {
    "cheap".to_owned()
}

/// `metric`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MetricSpec {
    /// The ranking metric.
    pub primary: PrimarySpec,
    /// Required/optional objectives; when absent the primary is the only required one.
    #[serde(default)]
    pub objectives: Vec<ObjectiveSpec>,
    /// Cheap hard checks, `<metric> <op> <number>` with op one of `>= > <= < == !=`.
    #[serde(default)]
    pub degenerate_gates: Vec<String>,
    /// Judge configuration (required when the primary is `type: judge`).
    #[serde(default)]
    pub judge: Option<JudgeSpec>,
    /// Smallest relative change that counts as a change (default 0.01).
    #[serde(default)]
    pub min_relative_change: Option<f64>,
}

/// `measurement.stability.mode`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum StabilityMode {
    /// One sample decides.
    #[default]
    Stable,
    /// `repeat_count` samples each side.
    Repeat,
    /// One exploratory pair, then pairs up to `repeat_count` while promising, then the holdout.
    Ladder,
    /// PACE, the anytime-valid keep rule: pairs one at a time until a betting e-process over the
    /// primary objective's pairs commits (keep, then the holdout when configured) or spends 200
    /// discordant pairs (reverted). A pair is a win when the candidate's sample beats the
    /// reference's by more than `min_relative_change`, a loss when it is worse by more, else a tie.
    Pace,
}

/// `measurement.stability`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StabilitySpec {
    /// The sampling protocol.
    #[serde(default)]
    pub mode: StabilityMode,
    /// Samples per side for `repeat`, ceiling for `ladder` (default 3).
    #[serde(default)]
    pub repeat_count: Option<u32>,
}

/// `measurement.holdout`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HoldoutSpec {
    /// The held-out measurement command (same output shape as `measurement.command`).
    pub command: String,
}

/// `measurement`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MeasurementSpec {
    /// Shell command printing the metrics JSON on stdout (see [`super::measure`]).
    pub command: String,
    /// Directory relative to the checkout the command runs in (default the checkout root).
    #[serde(default)]
    pub working_directory: Option<String>,
    /// Budget of one sample, seconds (default 600).
    #[serde(default)]
    pub timeout_seconds: Option<u64>,
    /// Sampling protocol.
    #[serde(default)]
    pub stability: StabilitySpec,
    /// Cheap check run first in `ladder` mode; a failure is `degenerate`.
    #[serde(default)]
    pub smoke_command: Option<String>,
    /// Held-out confirmation, run only after selection.
    #[serde(default)]
    pub holdout: Option<HoldoutSpec>,
    /// Whether the harness reports per-case results (`cases`).
    #[serde(default)]
    pub per_case: bool,
    /// Repeated measurements of the unchanged baseline taken at `init` to measure the noise
    /// floor of the primary metric, 2 to 100 ([`crate::noise`], issue 34 item 13); absent: no
    /// noise floor is measured and nothing about it is reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise_floor_samples: Option<u32>,
}

impl MeasurementSpec {
    /// The sample budget, defaulted.
    pub fn timeout_secs(&self) -> u64 {
        self.timeout_seconds
            .unwrap_or(DEFAULT_MEASUREMENT_TIMEOUT_SECS)
    }

    /// `repeat_count`, defaulted to 3.
    pub fn repeat_count(&self) -> u32 {
        self.stability.repeat_count.unwrap_or(DEFAULT_REPEAT_COUNT)
    }
}

/// `scope`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScopeSpec {
    /// Files or directories (relative to the repo root) a worker may modify.
    pub mutable: Vec<String>,
    /// Files or directories it must not modify (the harness, the evaluation data).
    #[serde(default)]
    pub immutable: Vec<String>,
}

impl ScopeSpec {
    /// Whether repo-relative `path` lies in `scope.mutable` and not in `scope.immutable`
    /// (immutable wins where the two overlap).
    pub fn is_mutable(&self, path: &str) -> bool {
        let under = |root: &String| {
            let root = root.trim_end_matches('/');
            root == "." || path == root || path.starts_with(&format!("{root}/"))
        };
        self.mutable.iter().any(under) && !self.immutable.iter().any(under)
    }
}

/// `dependencies`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DependenciesSpec {
    /// Dependencies a worker may add without asking.
    #[serde(default)]
    pub approved: Vec<String>,
}

/// `execution.mode`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ExecutionMode {
    /// One experiment at a time.
    #[default]
    Serial,
    /// A batch at a time.
    Parallel,
}

/// `execution.backend`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    /// A git worktree per experiment on this machine.
    #[default]
    Worktree,
    /// A detached worker with its own checkout, reporting `result.yaml` on a result ref.
    Remote,
}

/// `execution`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecutionSpec {
    /// serial | parallel.
    #[serde(default)]
    pub mode: ExecutionMode,
    /// worktree | remote.
    #[serde(default)]
    pub backend: Backend,
    /// Concurrent experiments (worktrees) in parallel mode (default 1).
    #[serde(default = "one")]
    pub max_concurrent: u32,
    /// Further cap on experiments per tick.
    #[serde(default)]
    pub max_experiments_per_tick: Option<u32>,
    /// Runner-ups tried per batch (default 2).
    #[serde(default)]
    pub max_runner_up_merges_per_batch: Option<u32>,
    /// Agent runtime profile of experiment workers and judges (`claude`, `codex`, `scripted`, …).
    #[serde(default = "scripted")]
    pub runtime: String,
    /// Runtime used when `codex` cannot be delegated to or was disabled by the failure cascade.
    #[serde(default = "claude")]
    pub fallback_runtime: String,
    /// Model passed to the runtime, if any.
    #[serde(default)]
    pub model: Option<String>,
    /// Estimated cost of one experiment worker, USD (for spend caps).
    #[serde(default)]
    pub worker_cost_usd: f64,
    /// Budget of one worker run, seconds (default 1800).
    #[serde(default)]
    pub worker_timeout_seconds: Option<u64>,
    /// The git remote detached (`remote` backend) workers clone from and push their result refs
    /// to; the control plane pushes `optimize/<spec>` there before each dispatch. Without it the
    /// remote backend has no detached-worker capability and the run uses worktrees (O-22).
    #[serde(default)]
    pub remote: Option<String>,
}

impl Default for ExecutionSpec {
    fn default() -> Self {
        Self {
            mode: ExecutionMode::Serial,
            backend: Backend::Worktree,
            max_concurrent: 1,
            max_experiments_per_tick: None,
            max_runner_up_merges_per_batch: None,
            runtime: scripted(),
            fallback_runtime: claude(),
            model: None,
            worker_cost_usd: 0.0,
            worker_timeout_seconds: None,
            remote: None,
        }
    }
}

fn one() -> u32 {
    1
}

fn claude() -> String {
    "claude".to_owned()
}

fn scripted() -> String {
    "scripted".to_owned()
}

/// `stopping`: every criterion is off when unset.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StoppingSpec {
    /// Experiments run (every dispatched one counts, resolutions 16).
    #[serde(default)]
    pub max_iterations: Option<u32>,
    /// Active hours (time inside ticks).
    #[serde(default)]
    pub max_hours: Option<f64>,
    /// Calendar hours since Phase 3 started.
    #[serde(default)]
    pub max_wall_hours: Option<f64>,
    /// Consecutive non-improving experiments.
    #[serde(default)]
    pub plateau_iterations: Option<u32>,
    /// Stop when the current best meets every declared required target.
    #[serde(default)]
    pub target_reached: bool,
    /// Whole-run spend cap, USD: reported costs plus estimates; a run whose cost is unknown
    /// (no cost reported, no estimate) stops the loop rather than pass the cap silently
    /// (`StopReason::SpendUnknown`).
    #[serde(default)]
    pub max_total_cost_usd: Option<f64>,
    /// Whole-run tokens cap: input + output (cache included) tokens the agent runs reported;
    /// the loop stops before the next dispatch once they reach it. For runtimes that report no
    /// cost (Codex).
    #[serde(default)]
    pub max_total_tokens: Option<u64>,
}

/// A user-provided hypothesis in the spec (`hypotheses:`), the seed of the backlog.
pub type HypothesisInput = super::backlog::Hypothesis;

/// A whole spec file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(title = "optimize spec")]
pub struct Spec {
    /// Identifier: `[a-z0-9][a-z0-9._-]*`, used in branch names.
    pub name: String,
    /// What the target is and what the metric stands for.
    pub description: String,
    /// Metrics.
    pub metric: MetricSpec,
    /// Measurement harness.
    pub measurement: MeasurementSpec,
    /// Mutable and immutable paths.
    pub scope: ScopeSpec,
    /// Free-text constraints.
    #[serde(default)]
    pub constraints: Vec<String>,
    /// Approved dependencies.
    #[serde(default)]
    pub dependencies: DependenciesSpec,
    /// How experiments run.
    #[serde(default)]
    pub execution: ExecutionSpec,
    /// Stopping criteria.
    #[serde(default)]
    pub stopping: StoppingSpec,
    /// User-provided hypotheses (the initial backlog).
    #[serde(default)]
    pub hypotheses: Vec<HypothesisInput>,
}

/// One required-or-not objective as the decide step sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Objective {
    /// Metric name.
    pub name: String,
    /// Which way is better.
    pub direction: Direction,
    /// Declared target.
    pub target: Option<f64>,
    /// Takes part in eligibility.
    pub required: bool,
}

impl Spec {
    /// Parses and validates spec text; `file` names it in errors. Every problem is reported at
    /// once: first every shape problem (unknown and missing keys, wrong types, values outside an
    /// enum) against the spec's JSON Schema (`skillforge schema optimize-spec`), then, when the
    /// shape is right, every failed semantic check.
    ///
    /// # Errors
    /// [`OptimizeError::Invalid`] naming the file and, per problem, the key path and what is
    /// allowed (`invalid spec `F`: 3 problems:` then one `  - `key`: …` line each).
    pub fn parse(text: &str, file: &str) -> Result<Self, OptimizeError> {
        super::check_yaml(text, &format!("invalid spec `{file}`:"))?;
        let de = serde_norway::Deserializer::from_str(text);
        let spec: Spec = match serde_path_to_error::deserialize(de) {
            Ok(spec) => spec,
            Err(e) => {
                // Every shape problem at once when there are several (the schema is generated from
                // these types, so it refuses what they refuse); one keeps serde's own message.
                let shape = shape_problems(text);
                if shape.len() > 1 {
                    return Err(problems_error(file, shape));
                }
                let path = e.path().to_string();
                let inner = e.into_inner().to_string();
                // serde_norway's message may start with the same path: say it once
                let inner = inner
                    .strip_prefix(&format!("{path}: "))
                    .map_or(inner.clone(), str::to_owned);
                return Err(OptimizeError::Invalid(if path == "." || path.is_empty() {
                    format!("invalid spec `{file}`: {inner}")
                } else {
                    format!("invalid spec `{file}`: `{path}`: {inner}")
                }));
            }
        };
        let problems = spec.problems();
        if !problems.is_empty() {
            return Err(problems_error(file, problems));
        }
        Ok(spec)
    }

    /// Whether spec text names no `execution.runtime` (the loaded spec then runs `scripted`, the
    /// stand-in with no model, and the CLI says so). False for text that does not parse.
    pub fn runtime_unset(text: &str) -> bool {
        serde_norway::from_str::<serde_json::Value>(text)
            .is_ok_and(|v| v.pointer("/execution/runtime").is_none())
    }

    /// Reads and parses a spec file.
    ///
    /// # Errors
    /// [`OptimizeError::Invalid`] for an unreadable or invalid file.
    pub fn load(path: &std::path::Path) -> Result<Self, OptimizeError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| OptimizeError::Invalid(format!("read spec `{}`: {e}", path.display())))?;
        Self::parse(&text, &path.display().to_string())
    }

    /// The objectives the decide step uses: `metric.objectives`, or the primary alone when absent.
    pub fn objectives(&self) -> Vec<Objective> {
        if self.metric.objectives.is_empty() {
            let p = &self.metric.primary;
            return vec![Objective {
                name: p.name.clone(),
                direction: p.direction,
                target: p.target,
                required: true,
            }];
        }
        self.metric
            .objectives
            .iter()
            .map(|o| Objective {
                name: o.name.clone(),
                direction: o.direction,
                target: o.target,
                required: o.required,
            })
            .collect()
    }

    /// The remote detached workers use, when the backend is `remote` and one is configured.
    pub fn remote_url(&self) -> Option<&str> {
        (self.execution.backend == Backend::Remote)
            .then_some(self.execution.remote.as_deref())
            .flatten()
    }

    /// Whether metric `name` is declared `elapsed` (the measurement's wall time, seconds).
    pub fn is_elapsed(&self, name: &str) -> bool {
        (self.metric.primary.name == name && self.metric.primary.elapsed)
            || self
                .metric
                .objectives
                .iter()
                .any(|o| o.name == name && o.elapsed)
    }

    /// The optimization branch, `optimize/<name>`.
    pub fn branch(&self) -> String {
        format!("optimize/{}", self.name)
    }

    /// The experiment branch of experiment `n`, `optimize-exp/<name>/exp-NNN`.
    pub fn experiment_branch(&self, n: u32) -> String {
        format!("optimize-exp/{}/exp-{n:03}", self.name)
    }

    /// Every failed semantic check as `(key path, message)`, in the spec's order.
    fn problems(&self) -> Vec<(String, String)> {
        let mut problems: Vec<(String, String)> = Vec::new();
        let mut bad =
            |key: &str, message: &str| problems.push((key.to_owned(), message.to_owned()));
        let name_ok = !self.name.is_empty()
            && self
                .name
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c))
            && !self.name.contains("..");
        if !name_ok {
            bad(
                "name",
                "must match [a-z0-9][a-z0-9._-]* (it names git branches)",
            );
        }
        if self.description.trim().is_empty() {
            bad("description", "must not be empty");
        }
        if self.metric.primary.name.trim().is_empty() {
            bad("metric.primary.name", "must not be empty");
        }
        if let Some(m) = self.metric.min_relative_change
            && !(m.is_finite() && m >= 0.0)
        {
            bad("metric.min_relative_change", "must be a number >= 0");
        }
        let mut seen = BTreeSet::new();
        for (idx, o) in self.metric.objectives.iter().enumerate() {
            if !seen.insert(o.name.as_str()) {
                bad(
                    &format!("metric.objectives[{idx}].name"),
                    &format!("duplicate objective `{}`", o.name),
                );
            }
        }
        if !self.metric.objectives.is_empty() && !self.metric.objectives.iter().any(|o| o.required)
        {
            bad(
                "metric.objectives",
                "at least one objective must be required",
            );
        }
        for (idx, gate) in self.metric.degenerate_gates.iter().enumerate() {
            if let Err(e) = super::gates::Gate::parse(gate) {
                bad(&format!("metric.degenerate_gates[{idx}]"), &e.to_string());
            }
        }
        match (&self.metric.judge, self.metric.primary.kind) {
            (None, MetricKind::Judge) => {
                bad(
                    "metric.judge",
                    "is required when metric.primary.type is judge",
                );
            }
            (Some(j), _) => {
                if j.batch_size == 0 {
                    bad("metric.judge.batch_size", "must be at least 1");
                }
                if j.sample_size == 0 {
                    bad("metric.judge.sample_size", "must be at least 1");
                }
                if j.confirmation_seed == Some(j.sample_seed) {
                    bad(
                        "metric.judge.confirmation_seed",
                        "must differ from sample_seed",
                    );
                }
                if j.rubric.trim().is_empty() {
                    bad("metric.judge.rubric", "must not be empty");
                }
                if let Err((key, message)) = j.model_for(&self.execution) {
                    bad(&key, &message);
                }
            }
            (None, MetricKind::Hard) => {}
        }
        if self.measurement.command.trim().is_empty() {
            bad("measurement.command", "must not be empty");
        }
        if self.measurement.timeout_seconds == Some(0) {
            bad("measurement.timeout_seconds", "must be at least 1");
        }
        if self
            .measurement
            .noise_floor_samples
            .is_some_and(|n| !(2..=100).contains(&n))
        {
            bad(
                "measurement.noise_floor_samples",
                "must be 2 to 100 (repeated baseline measurements; one says nothing about noise)",
            );
        }
        if self.measurement.stability.repeat_count == Some(0) {
            bad("measurement.stability.repeat_count", "must be at least 1");
        }
        if self.scope.mutable.is_empty() {
            bad("scope.mutable", "must list at least one path");
        }
        for (key, list) in [
            ("scope.mutable", &self.scope.mutable),
            ("scope.immutable", &self.scope.immutable),
        ] {
            for (idx, p) in list.iter().enumerate() {
                if p.starts_with('/') || p.split('/').any(|c| c == "..") || p.trim().is_empty() {
                    bad(
                        &format!("{key}[{idx}]"),
                        "must be a relative path inside the repository",
                    );
                }
            }
        }
        if self.execution.max_concurrent == 0 {
            bad("execution.max_concurrent", "must be at least 1");
        }
        if self.execution.max_experiments_per_tick == Some(0) {
            bad("execution.max_experiments_per_tick", "must be at least 1");
        }
        for (key, v) in [
            ("stopping.max_hours", self.stopping.max_hours),
            ("stopping.max_wall_hours", self.stopping.max_wall_hours),
            (
                "stopping.max_total_cost_usd",
                self.stopping.max_total_cost_usd,
            ),
        ] {
            if let Some(v) = v
                && !(v.is_finite() && v >= 0.0)
            {
                bad(key, "must be a number >= 0");
            }
        }
        for (idx, h) in self.hypotheses.iter().enumerate() {
            if let Err(e) = h.validate() {
                bad(&format!("hypotheses[{idx}].{}", e.0), &e.1);
            }
        }
        problems
    }
}

/// The shape problems of spec text against the spec's JSON Schema, as `(key path, message)`.
fn shape_problems(text: &str) -> Vec<(String, String)> {
    let Ok(value) = serde_norway::from_str::<serde_json::Value>(text) else {
        return Vec::new();
    };
    let schema = serde_json::to_value(schemars::schema_for!(Spec)).unwrap_or_default();
    skillforge_contract::shape::shape_problems(&schema, &value)
        .into_iter()
        .map(|p| (p.path, p.message))
        .collect()
}

/// One problem keeps the single-line message; several become a list, one line each.
fn problems_error(file: &str, mut problems: Vec<(String, String)>) -> OptimizeError {
    let line = |(key, message): &(String, String)| {
        if key.is_empty() {
            message.clone()
        } else {
            format!("`{key}`: {message}")
        }
    };
    if problems.len() == 1 {
        let only = problems.remove(0);
        return OptimizeError::Invalid(format!("invalid spec `{file}`: {}", line(&only)));
    }
    OptimizeError::Invalid(format!(
        "invalid spec `{file}`: {} problems:\n{}",
        problems.len(),
        problems
            .iter()
            .map(|p| format!("  - {}", line(p)))
            .collect::<Vec<_>>()
            .join("\n")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    // An invalid enum value names its path once (issue: `metric.primary.direction` twice).
    #[test]
    fn a_bad_value_names_its_path_once() {
        let text = "name: x\ndescription: d\nmetric:\n  primary: { name: ops, direction: upward }\n\
                    measurement: { command: sh m.sh }\nscope: { mutable: [src] }\n";
        let err = Spec::parse(text, "x.yml").unwrap_err().to_string();
        assert_eq!(
            err.matches("metric.primary.direction").count(),
            1,
            "the path once: {err}"
        );
        assert!(err.contains("unknown variant `upward`"), "{err}");
    }

    /// A valid spec used across the optimize tests.
    pub(crate) const SPEC: &str = "\
name: ops
description: reduce the operation count of the counting script
metric:
  primary: { name: ops, direction: minimize, target: 10 }
  degenerate_gates: [\"correct == 1\"]
measurement:
  command: sh measure.sh
  stability: { mode: ladder, repeat_count: 3 }
scope:
  mutable: [src]
  immutable: [measure.sh, data]
execution: { mode: parallel, max_concurrent: 4, max_experiments_per_tick: 3 }
stopping: { max_iterations: 10, plateau_iterations: 5, target_reached: true }
";

    #[test]
    fn a_valid_spec_parses_with_defaults() {
        let spec = Spec::parse(SPEC, "ops.yaml").expect("valid");
        assert_eq!(spec.measurement.repeat_count(), 3);
        assert_eq!(
            spec.measurement.timeout_secs(),
            DEFAULT_MEASUREMENT_TIMEOUT_SECS
        );
        assert_eq!(spec.execution.runtime, "scripted");
        assert_eq!(spec.branch(), "optimize/ops");
        assert_eq!(spec.experiment_branch(7), "optimize-exp/ops/exp-007");
        let objectives = spec.objectives();
        assert_eq!(objectives.len(), 1);
        assert!(objectives[0].required && objectives[0].target == Some(10.0));
    }

    #[test]
    fn errors_name_the_key_and_the_file() {
        let check = |text: String, want: &[&str]| {
            let err = Spec::parse(&text, "x/ops.yaml")
                .expect_err(&text)
                .to_string();
            for w in want {
                assert!(err.contains(w), "{err:?} should contain {w:?}");
            }
        };
        check(
            SPEC.replace("max_concurrent: 4", "max_concurent: 4"),
            &["x/ops.yaml", "execution", "max_concurent"],
        );
        check(
            SPEC.replace("direction: minimize", "direction: down"),
            &["metric.primary.direction", "down"],
        );
        check(
            SPEC.replace("name: ops\n", "name: Ops Run\n"),
            &["`name`", "[a-z0-9]"],
        );
        check(
            SPEC.replace("mutable: [src]", "mutable: []"),
            &["scope.mutable"],
        );
        check(
            SPEC.replace("mutable: [src]", "mutable: [../up]"),
            &["scope.mutable[0]"],
        );
        check(
            SPEC.replace("correct == 1", "correct ~ 1"),
            &["metric.degenerate_gates[0]"],
        );
        check(
            SPEC.replace("repeat_count: 3", "repeat_count: 0"),
            &["measurement.stability.repeat_count"],
        );
        check(
            SPEC.replace("max_concurrent: 4", "max_concurrent: 0"),
            &["execution.max_concurrent"],
        );
        check(
            SPEC.replace("  degenerate_gates", "  primary2: 1\n  degenerate_gates"),
            &["metric", "primary2"],
        );
        check(
            SPEC.replace(
                "{ name: ops, direction: minimize, target: 10 }",
                "{ name: ops, direction: minimize, type: judge }",
            ),
            &["metric.judge"],
        );
        check(
            format!("{SPEC}hypotheses:\n  - {{ description: d, category: c, priority: high }}\n"),
            &["hypotheses[0]", "opportunity"],
        );
    }

    // Issue 35: one parse lists every problem: shape problems together (unknown keys with the
    // allowed ones, a missing key, a value outside an enum), then every semantic one.
    #[test]
    fn every_problem_of_a_spec_is_reported_at_once() {
        let text = SPEC
            .replace("max_concurrent: 4", "max_concurent: 4")
            .replace("direction: minimize", "direction: down")
            .replace("  command: sh measure.sh\n", "  extra: 1\n");
        let e = Spec::parse(&text, "x/ops.yaml").unwrap_err().to_string();
        for want in [
            "invalid spec `x/ops.yaml`: 4 problems:",
            "  - `execution`: unknown key `max_concurent` (did you mean `max_concurrent`?); allowed: `mode`, ",
            "  - `metric.primary.direction`: `down` is not allowed; one of: `maximize`, `minimize`",
            "  - `measurement`: unknown key `extra`; allowed: `command`, ",
            "  - `measurement.command`: is required but missing",
        ] {
            assert!(e.contains(want), "{want:?} missing from {e}");
        }
        let text = SPEC
            .replace("name: ops\n", "name: Ops Run\n")
            .replace("mutable: [src]", "mutable: [../up]")
            .replace("max_concurrent: 4", "max_concurrent: 0");
        let e = Spec::parse(&text, "x/ops.yaml").unwrap_err().to_string();
        for want in [
            "3 problems:",
            "  - `name`: must match",
            "  - `scope.mutable[0]`: must be a relative path",
            "  - `execution.max_concurrent`: must be at least 1",
        ] {
            assert!(e.contains(want), "{want:?} missing from {e}");
        }
    }

    #[test]
    fn scope_membership_prefers_immutable() {
        let scope = ScopeSpec {
            mutable: vec!["src".into(), ".".into()],
            immutable: vec!["src/fixtures".into(), "measure.sh".into()],
        };
        assert!(scope.is_mutable("src/count.sh"));
        assert!(scope.is_mutable("README"));
        assert!(!scope.is_mutable("src/fixtures/a.txt"));
        assert!(!scope.is_mutable("measure.sh"));
        let narrow = ScopeSpec {
            mutable: vec!["src/".into()],
            immutable: vec![],
        };
        assert!(!narrow.is_mutable("srcx/a"));
        assert!(narrow.is_mutable("src/a"));
    }
}
