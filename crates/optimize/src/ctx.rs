//! The optimize loop's context, shared by every module of the loop: [`Ctx`] (the spec, state
//! root, repository, job port, stage definitions and progress sink of one invocation) with the
//! helpers each step uses to build, run and measure jobs and to checkpoint the log, the
//! [`Event`]s it reports, and [`passed`]. The loop's modules import it from here; none imports
//! [`super::run`] back.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use skillforge_runner::ExitClass;
use skillforge_stage::StageJobs;

use super::log::{ExperimentLog, write_verified};
use super::measure::{self, Sample};
use super::spec::Spec;
use super::stages::{self, OptimizeStages};
use super::state::StateRoot;
use super::{OptimizeError, decide};

/// What the loop reports as it goes (the CLI prints these on a terminal).
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Baseline measured.
    Baseline {
        /// Primary aggregate.
        primary: Option<f64>,
    },
    /// A tick started (number is the tick about to run, 1-based).
    Tick(u32),
    /// An experiment was dispatched.
    Dispatched {
        /// Experiment number.
        experiment: u32,
        /// Hypothesis description.
        hypothesis: String,
    },
    /// An experiment's outcome changed.
    Outcome {
        /// Experiment number.
        experiment: u32,
        /// Outcome label.
        outcome: String,
        /// Reference → candidate primary aggregates.
        primary: Option<(f64, f64)>,
        /// Whether the claim is confirmed (terminal) or preliminary (O-65).
        preliminary: bool,
    },
    /// The current best changed.
    Best {
        /// Primary aggregate.
        primary: Option<f64>,
        /// From which experiment.
        experiment: Option<u32>,
    },
    /// A note (fallbacks, recoveries, blockers).
    Note(String),
    /// The run stopped.
    Stopped(String),
}

/// An event as its progress line (`tick 3`, `  exp-004 kept (12 -> 9)`, `  note: …`).
impl std::fmt::Display for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use crate::brief::fmt_num;
        match self {
            Event::Baseline { primary } => {
                write!(f, "baseline: {}", primary.map_or("-".into(), fmt_num))
            }
            Event::Tick(t) => write!(f, "tick {t}"),
            Event::Dispatched {
                experiment,
                hypothesis,
            } => write!(f, "  exp-{experiment:03} dispatched: {hypothesis}"),
            Event::Outcome {
                experiment,
                outcome,
                primary,
                preliminary,
            } => write!(
                f,
                "  exp-{experiment:03} {outcome}{}{}",
                primary.map_or(String::new(), |(r, c)| format!(
                    " ({} -> {})",
                    fmt_num(r),
                    fmt_num(c)
                )),
                if *preliminary { " [preliminary]" } else { "" }
            ),
            Event::Best {
                primary,
                experiment,
            } => write!(
                f,
                "  best: {} ({})",
                primary.map_or("-".into(), fmt_num),
                experiment.map_or("baseline".into(), |n| format!("exp-{n:03}"))
            ),
            Event::Note(n) => write!(f, "  note: {n}"),
            Event::Stopped(r) => write!(f, "stopped: {r}"),
        }
    }
}

/// Everything one invocation needs.
pub struct Ctx<'a> {
    /// The spec as loaded.
    pub spec: Spec,
    /// The state root.
    pub root: StateRoot,
    /// The project repository.
    pub repo: PathBuf,
    /// The job port.
    pub port: &'a dyn StageJobs,
    /// The queue the port submits to (whether its workers share this disk, its transfer area).
    pub backend: std::sync::Arc<dyn skillforge_engine::QueueBackend>,
    /// Stage definitions.
    pub stages: OptimizeStages,
    /// Queue name jobs go to.
    pub queue: String,
    /// This host's name (recorded as `machine`).
    pub machine: String,
    /// Where progress goes: each [`Event`] as its line ([`Event`]'s `Display`).
    pub events: &'a dyn skillforge_stage::Progress,
    /// Set by the operator to stop at the next safe point (O-61).
    pub stop: &'a AtomicBool,
    /// Prefix of every idempotency key: `optimize:<spec>:<created_at>`.
    pub key_prefix: String,
}

impl std::fmt::Debug for Ctx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("spec", &self.spec.name)
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

impl Ctx<'_> {
    pub(crate) fn key(&self, rest: &str) -> String {
        format!("{}:{rest}", self.key_prefix)
    }

    /// The job of `stage` running `payload` under `key` on this run's queue (see [`stages::job`]).
    pub(crate) fn job<P: skillforge_runner::RunnerPayload>(
        &self,
        stage: &str,
        payload: &P,
        key: String,
        timeout: Option<std::time::Duration>,
    ) -> Result<skillforge_engine::JobSpec, OptimizeError> {
        stages::job(&self.stages, stage, payload, key, timeout, &self.queue)
    }

    /// Submits `spec` and waits for it through the port.
    pub(crate) async fn run_one(
        &self,
        spec: skillforge_engine::JobSpec,
        what: &str,
    ) -> Result<skillforge_engine::Job, OptimizeError> {
        stages::run_one(self.port, spec, what).await
    }

    /// The run's wall-clock deadline (O-58, [`super::stopping::wall_deadline`]): Unix seconds.
    pub(crate) fn wall_deadline(&self, log: &ExperimentLog) -> Option<f64> {
        super::stopping::wall_deadline(&self.spec.stopping, log.run_state.phase3_started_at)
    }

    /// Whether the run's wall-clock deadline has passed (O-58): no wait and no measurement
    /// starts after it.
    pub(crate) fn past_deadline(&self, log: &ExperimentLog) -> bool {
        self.wall_deadline(log).is_some_and(|at| now_f64() >= at)
    }

    /// Waits for job `id` until it is terminal (or parked stale), but never past `deadline`
    /// (Unix seconds, O-58): `None` when the deadline came first, and the job's state then is
    /// left to the caller. A job already terminal at or after the deadline is returned (it has
    /// arrived).
    ///
    /// # Errors
    /// The queue's, as [`OptimizeError::Queue`].
    pub(crate) async fn wait_until(
        &self,
        id: &str,
        deadline: Option<f64>,
        what: &str,
    ) -> Result<Option<skillforge_engine::Job>, OptimizeError> {
        let queue = |e: skillforge_engine::EngineError| {
            OptimizeError::Queue(format!("wait for job {id}: {e}"))
        };
        let ids = [id.to_owned()];
        let Some(at) = deadline else {
            return Ok(self.port.wait(&ids, what).await.map_err(queue)?.pop());
        };
        if let Some(job) = self.port.get(id).await.map_err(queue)?
            && (job.state.is_terminal() || job.state == skillforge_engine::JobState::Stale)
        {
            return Ok(Some(job));
        }
        let left = at - now_f64();
        if left <= 0.0 {
            return Ok(None);
        }
        tokio::select! {
            r = self.port.wait(&ids, what) => Ok(r.map_err(queue)?.pop()),
            () = tokio::time::sleep(std::time::Duration::from_secs_f64(left)) => Ok(None),
        }
    }

    pub(crate) fn emit(&self, e: Event) {
        self.events.step(&e.to_string());
    }

    /// Runs one measurement sample of `command` in `checkout` under `key` and classifies it.
    pub(crate) async fn sample(
        &self,
        command: &str,
        checkout: &Path,
        key: String,
    ) -> Result<Sample, OptimizeError> {
        self.sample_with(command, checkout, key, BTreeMap::new())
            .await
    }

    /// [`Self::sample`] with extra environment for the measurement (the censor bound, O-28).
    pub(crate) async fn sample_with(
        &self,
        command: &str,
        checkout: &Path,
        key: String,
        env: BTreeMap<String, String>,
    ) -> Result<Sample, OptimizeError> {
        let spec = self
            .checkout_job("measurement", command, checkout, env, key)
            .await?;
        let job = self.run_one(spec, "measuring").await?;
        Ok(match &job.outcome {
            Some(outcome) => measure::classify(outcome),
            None => Sample::Failed(decide::Measured::Error(format!(
                "measurement job {} ended {} without an outcome: {}",
                job.id,
                job.state,
                job.error.unwrap_or_default()
            ))),
        })
    }

    /// Writes the log verified with `check`, after re-reading nothing (the caller holds the log it read).
    pub(crate) fn save(
        &self,
        log: &ExperimentLog,
        checkpoint: &str,
        check: impl Fn(&ExperimentLog) -> bool,
    ) -> Result<(), OptimizeError> {
        write_verified(&self.root.root, log, checkpoint, check)
    }
}

/// Unix seconds now, fractional.
pub(crate) fn now_f64() -> f64 {
    chrono::Utc::now().timestamp_millis() as f64 / 1000.0
}

/// Whether a job's outcome passed.
pub(crate) fn passed(job: &skillforge_engine::Job) -> bool {
    job.outcome
        .as_ref()
        .is_some_and(|o| o.exit == ExitClass::Passed)
}

/// The reason a job that could not run here (`not_runnable`: a runtime not logged in, a model
/// API out of reach, a missing program) gave, in one line; `None` for any other ending. Such a
/// job is an environment fault, not a verdict on what it was asked to do.
pub(crate) fn not_runnable_reason(job: &skillforge_engine::Job) -> Option<String> {
    match &job.outcome.as_ref()?.exit {
        ExitClass::NotRunnable { reason } => Some(
            reason
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .unwrap_or("the job could not start on its worker (it gave no reason)")
                .to_owned(),
        ),
        _ => None,
    }
}

/// Why a finished job did not pass, in one line and never blank: the job's error, else the
/// reason it could not run, else its exit class with the last non-empty line of its stderr.
pub(crate) fn failure_reason(job: &skillforge_engine::Job) -> String {
    let one_line = |s: &str| {
        s.lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .map(str::to_owned)
    };
    if let Some(e) = job.error.as_deref().and_then(one_line) {
        return e;
    }
    if let Some(reason) = not_runnable_reason(job) {
        return format!("could not run: {reason}");
    }
    match &job.outcome {
        Some(o) => {
            let last = o
                .stderr_tail
                .lines()
                .rev()
                .map(str::trim)
                .find(|l| !l.is_empty());
            match last {
                Some(line) => format!("{} ({line})", o.exit.label().replace('_', " ")),
                None => format!("{} (no output on stderr)", o.exit.label().replace('_', " ")),
            }
        }
        None => format!("ended {} without an outcome", job.state),
    }
}
