//! One job builder for every family: a stage definition and a runner payload become the
//! [`JobSpec`] of one durable job.

use serde::Serialize;
use skillforge_engine::JobSpec;

use super::def::StageDef;

/// Why a stage's job could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    /// The stage is a control-plane step (`handler`), not a job.
    #[error("{workflow} stage `{stage}` is a control-plane step, not a job (it has no `runner`)")]
    NotAJob {
        /// Family workflow.
        workflow: String,
        /// Stage name.
        stage: String,
    },
    /// The payload could not be serialized (never sent as a `null` payload).
    #[error("serialize the payload of {workflow} stage `{stage}`: {message}")]
    Payload {
        /// Family workflow.
        workflow: String,
        /// Stage name.
        stage: String,
        /// The serializer's message.
        message: String,
    },
}

impl StageDef {
    /// The job of this stage running `payload` on the stage's runner: workflow and stage from the
    /// definition, `idempotency_key` (a second enqueue with the same key returns the first job),
    /// attempts, heartbeat, stale threshold, `idempotent` and `retry_failed_runs` from the
    /// stage; timeout `timeout_secs + setup_secs` (in ms). Queue and locks are the engine's
    /// defaults; a caller that needs a lock adds it to the returned spec.
    ///
    /// # Errors
    /// [`JobError::NotAJob`] for a `handler` stage; [`JobError::Payload`] when `payload` does not serialize.
    pub fn job<P: Serialize>(&self, payload: &P, idempotency_key: Option<String>) -> Result<JobSpec, JobError> {
        let Some(runner) = &self.runner else {
            return Err(JobError::NotAJob { workflow: self.workflow.clone(), stage: self.name.clone() });
        };
        let payload = serde_json::to_value(payload).map_err(|e| JobError::Payload {
            workflow: self.workflow.clone(),
            stage: self.name.clone(),
            message: e.to_string(),
        })?;
        let mut spec = JobSpec::new(runner.clone(), payload);
        spec.workflow = self.workflow.clone();
        spec.stage = self.name.clone();
        spec.idempotency_key = idempotency_key;
        spec.max_attempts = self.attempts;
        spec.timeout_ms = (self.timeout_secs + self.setup_secs) * 1000;
        spec.heartbeat_ms = self.heartbeat_secs * 1000;
        spec.stale_after_ms = self.stale_after_secs * 1000;
        spec.idempotent = self.idempotent;
        spec.retry_failed_runs = self.retry_failed_runs;
        Ok(spec)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn stage(runner: Option<&str>) -> StageDef {
        StageDef {
            workflow: "probe".into(),
            name: "run".into(),
            runner: runner.map(str::to_owned),
            handler: runner.is_none().then(|| "step".to_owned()),
            timeout_secs: 10,
            setup_secs: 5,
            heartbeat_secs: 2,
            stale_after_secs: 15,
            attempts: 3,
            idempotent: false,
            retry_failed_runs: false,
            status_phases: Vec::new(),
        }
    }

    #[test]
    fn the_job_carries_every_field_of_the_stage() {
        let spec = stage(Some("process")).job(&serde_json::json!({"argv": ["true"]}), Some("k".into())).unwrap();
        assert_eq!((spec.kind.as_str(), spec.workflow.as_str(), spec.stage.as_str()), ("process", "probe", "run"));
        assert_eq!((spec.idempotency_key.as_deref(), spec.max_attempts, spec.timeout_ms), (Some("k"), 3, 15_000));
        assert_eq!((spec.heartbeat_ms, spec.stale_after_ms, spec.idempotent, spec.retry_failed_runs), (2000, 15_000, false, false));
        assert_eq!(spec.payload["argv"][0], "true");
    }

    #[test]
    fn a_step_is_not_a_job_and_a_bad_payload_is_an_error() {
        assert!(matches!(stage(None).job(&1, None), Err(JobError::NotAJob { .. })));
        // A map with non-string keys does not serialize to JSON: an error, never a null payload.
        let bad: BTreeMap<(u8, u8), u8> = BTreeMap::from([((1, 2), 3)]);
        let err = stage(Some("process")).job(&bad, None).unwrap_err();
        assert!(matches!(err, JobError::Payload { .. }), "{err}");
    }
}
