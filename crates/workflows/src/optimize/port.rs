//! The job port the loop submits to and waits on, and the optimize stage definitions
//! (`workflows/optimize.toml`): experiments and judges are `agent` jobs, measurements and
//! locating measurements are `process` jobs.
//!
//! The CLI implements [`JobPort`] once (enqueue with the idempotency key, wait, apply); the loop
//! never talks to the queue itself. A resubmitted key returns the job already dispatched, which
//! is what makes a resumed run repeat nothing.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;
use skillforge_engine::{Job, JobSpec};

use super::{OptimizeError, WORKFLOW};
use crate::train::stages::StageDef;

/// The shipped stage file.
pub const SHIPPED_OPTIMIZE_TOML: &str = include_str!("../../../../workflows/optimize.toml");
/// Stage names, in loop order.
pub const STAGES: [&str; 4] = ["experiment", "measurement", "locating", "judge"];

/// Submits jobs and waits for them.
#[async_trait::async_trait]
pub trait JobPort: Send + Sync {
    /// Enqueues `spec` (its idempotency key set) and returns the job id; an existing job with the
    /// same key is returned, never a second one.
    async fn submit(&self, spec: JobSpec) -> Result<String, OptimizeError>;
    /// Waits until job `id` is terminal (or parked stale) and returns it.
    async fn wait(&self, id: &str) -> Result<Job, OptimizeError>;
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StagesFile {
    stages: BTreeMap<String, StageDef>,
}

/// The optimize stages.
#[derive(Debug, Clone)]
pub struct OptimizeStages {
    stages: BTreeMap<String, StageDef>,
}

impl OptimizeStages {
    /// The shipped definition.
    ///
    /// # Errors
    /// [`OptimizeError::Invalid`] when the file is invalid (a unit test guards it).
    pub fn shipped() -> Result<Self, OptimizeError> {
        let file: StagesFile = toml::from_str(SHIPPED_OPTIMIZE_TOML).map_err(|e| OptimizeError::Invalid(format!("workflows/optimize.toml: {e}")))?;
        for name in STAGES {
            let Some(s) = file.stages.get(name) else {
                return Err(OptimizeError::Invalid(format!("workflows/optimize.toml: stage `{name}` is missing")));
            };
            if s.runner.is_none() || s.stale_after_secs <= s.heartbeat_secs {
                return Err(OptimizeError::Invalid(format!("workflows/optimize.toml: stage `{name}` needs a runner and stale_after_secs > heartbeat_secs")));
            }
        }
        Ok(Self { stages: file.stages })
    }

    /// A job of stage `stage` with `payload` under `key`; `timeout` overrides the stage's.
    ///
    /// # Panics
    /// When `stage` is not one of [`STAGES`] (validated at load).
    pub fn job(&self, stage: &str, payload: serde_json::Value, key: String, timeout: Option<Duration>, queue: &str) -> JobSpec {
        let def = self.stages.get(stage).unwrap_or_else(|| panic!("optimize stage `{stage}` is validated at load"));
        let mut spec = JobSpec::new(def.runner.clone().unwrap_or_default(), payload);
        spec.queue = queue.to_owned();
        spec.workflow = WORKFLOW.to_owned();
        spec.stage = stage.to_owned();
        spec.idempotency_key = Some(key);
        spec.max_attempts = def.attempts;
        let t = timeout.unwrap_or(def.timeout());
        spec.timeout_ms = u64::try_from(t.as_millis()).unwrap_or(u64::MAX);
        spec.heartbeat_ms = def.heartbeat_secs * 1000;
        spec.stale_after_ms = def.stale_after_secs * 1000;
        spec.idempotent = def.idempotent;
        spec
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_stages_are_valid() {
        let s = OptimizeStages::shipped().expect("shipped optimize.toml");
        let job = s.job("measurement", serde_json::json!({}), "k".into(), Some(Duration::from_secs(5)), "default");
        assert_eq!((job.kind.as_str(), job.workflow.as_str(), job.stage.as_str()), ("process", WORKFLOW, "measurement"));
        assert_eq!(job.idempotency_key.as_deref(), Some("k"));
        assert!(job.idempotent);
        assert_eq!(s.job("experiment", serde_json::json!({}), "k2".into(), None, "default").kind, "agent");
    }
}
