//! The optimize loop's stage definitions on the shared stage core (`workflows/optimize.toml` with
//! `<home>/optimize.toml` overrides, [`skillforge_stage`]): experiments and judges are `agent` jobs,
//! measurements and locating measurements are `process` jobs; and the one way the loop runs a job
//! through the [`StageJobs`] port the CLI implements once.
//!
//! The loop never talks to the queue itself. A resubmitted idempotency key returns the job
//! already dispatched, which is what makes a resumed run repeat nothing.

use std::path::Path;
use std::time::Duration;

use skillforge_engine::{Job, JobSpec};
use skillforge_runner::RunnerPayload;

use super::OptimizeError;
use skillforge_stage::{Ran, StageJobs, StageSource, StagesError, Wait, WorkflowDef, run_jobs};

/// The workflow name every optimize job carries.
pub const WORKFLOW: &str = "optimize";
/// The shipped stage file.
pub const SHIPPED_OPTIMIZE_TOML: &str = include_str!("../../../workflows/optimize.toml");
/// Stage names, in loop order.
pub const STAGES: [&str; 4] = ["experiment", "measurement", "locating", "judge"];

/// Where the optimize stages come from.
pub const SOURCE: StageSource = StageSource {
    family: "optimize",
    workflow: WORKFLOW,
    shipped: SHIPPED_OPTIMIZE_TOML,
    stage_names: &STAGES,
};

/// The optimize loop's resolved stages.
pub type OptimizeStages = WorkflowDef;

fn invalid(e: StagesError) -> OptimizeError {
    OptimizeError::Invalid(e.to_string())
}

/// The shipped stages.
///
/// # Errors
/// [`OptimizeError::Invalid`] when the embedded file is invalid (a unit test guards it).
pub fn shipped() -> Result<OptimizeStages, OptimizeError> {
    SOURCE.shipped().map_err(invalid)
}

/// The shipped stages with `<home>/optimize.toml` applied when it exists.
///
/// # Errors
/// [`OptimizeError::Invalid`] naming the file and key for a bad override.
pub fn for_home(home: &Path) -> Result<OptimizeStages, OptimizeError> {
    SOURCE.for_home(home).map_err(invalid)
}

/// The job of `stage` running `payload` under `key` on `queue`; `timeout` (the spec's measurement
/// or worker budget) replaces the stage's.
///
/// # Errors
/// [`OptimizeError::Invalid`] when the payload does not serialize.
pub fn job<P: RunnerPayload>(
    stages: &OptimizeStages,
    stage: &str,
    payload: &P,
    key: String,
    timeout: Option<Duration>,
    queue: &str,
) -> Result<JobSpec, OptimizeError> {
    let mut spec = stages
        .stage(stage)
        .job(payload, Some(key))
        .map_err(|e| OptimizeError::Invalid(format!("{stage} payload: {e}")))?;
    spec.queue = queue.to_owned();
    if let Some(t) = timeout {
        spec.timeout_ms = u64::try_from(t.as_millis()).unwrap_or(u64::MAX);
    }
    Ok(spec)
}

/// Submits `specs` and waits until each is terminal (or parked stale); returns them in order.
///
/// # Errors
/// [`OptimizeError::Queue`] when the queue fails.
pub async fn run_all(
    jobs: &dyn StageJobs,
    specs: &[JobSpec],
    what: &str,
) -> Result<Vec<Job>, OptimizeError> {
    match run_jobs(jobs, specs, Wait::Block, what)
        .await
        .map_err(|e| OptimizeError::Queue(format!("{what}: {e}")))?
    {
        Ran::Done(jobs) => Ok(jobs),
        Ran::Pending(ids) => Err(OptimizeError::Queue(format!(
            "{what}: jobs {} still pending after a blocking wait",
            ids.join(", ")
        ))),
    }
}

/// [`run_all`] for one job.
///
/// # Errors
/// As [`run_all`].
pub async fn run_one(
    jobs: &dyn StageJobs,
    spec: JobSpec,
    what: &str,
) -> Result<Job, OptimizeError> {
    let mut done = run_all(jobs, std::slice::from_ref(&spec), what).await?;
    done.pop()
        .ok_or_else(|| OptimizeError::Queue(format!("{what}: no job came back")))
}

#[cfg(test)]
mod tests {
    use skillforge_runner_agent::AgentPayload;
    use skillforge_runner_process::ProcessPayload;

    use super::*;

    #[test]
    fn shipped_stages_are_valid() {
        let s = shipped().expect("shipped optimize.toml");
        let job = job(
            &s,
            "measurement",
            &ProcessPayload::shell("true"),
            "k".into(),
            Some(Duration::from_secs(5)),
            "default",
        )
        .unwrap();
        assert_eq!(
            (job.kind.as_str(), job.workflow.as_str(), job.stage.as_str()),
            ("process", WORKFLOW, "measurement")
        );
        assert_eq!(
            (job.idempotency_key.as_deref(), job.timeout_ms),
            (Some("k"), 5000)
        );
        assert!(job.idempotent);
        let worker = super::job(
            &s,
            "experiment",
            &AgentPayload::new("scripted", "p"),
            "k2".into(),
            None,
            "default",
        )
        .unwrap();
        assert_eq!(
            (worker.kind.as_str(), worker.timeout_ms),
            ("agent", 1_800_000)
        );
        assert_eq!(
            super::job(
                &s,
                "judge",
                &AgentPayload::new("scripted", "p"),
                "k3".into(),
                None,
                "q"
            )
            .unwrap()
            .kind,
            "agent"
        );
    }

    #[test]
    fn a_home_override_changes_the_stage_times() {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(
            home.path().join("optimize.toml"),
            "[stages.judge]\ntimeout_secs = 42\n",
        )
        .unwrap();
        assert_eq!(
            for_home(home.path()).unwrap().stage("judge").timeout_secs,
            42
        );
        std::fs::write(
            home.path().join("optimize.toml"),
            "[stages.judge]\nrunner = \"process\"\n",
        )
        .unwrap();
        let err = for_home(home.path()).unwrap_err().to_string();
        assert!(
            err.contains("optimize.toml") && err.contains("runner"),
            "{err}"
        );
    }
}
