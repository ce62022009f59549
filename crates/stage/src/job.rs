//! One job builder for every family: a stage definition and a runner payload become the
//! [`JobSpec`] of one durable job.

use skillforge_engine::JobSpec;
use skillforge_runner::{PayloadError, RunnerPayload};

use super::def::StageDef;

impl StageDef {
    /// The job of this stage running `payload`: runner kind [`RunnerPayload::KIND`] (the stage's
    /// `runner` in `workflows/<family>.toml` names the same kind; each family's tests check it),
    /// workflow and stage from the definition, `idempotency_key` (a second enqueue with the same
    /// key returns the first job), attempts, heartbeat, stale threshold, `idempotent` and
    /// `retry_failed_runs` from the stage; timeout `timeout_secs + setup_secs` (in ms); the
    /// stage's `requires` labels, with the queue their route (`default@gpu`). Queue and
    /// locks are otherwise the engine's defaults; a caller that needs a lock adds it to the returned spec.
    ///
    /// # Errors
    /// [`PayloadError`] when `payload` does not serialize (never a `null` payload).
    pub fn job<P: RunnerPayload>(
        &self,
        payload: &P,
        idempotency_key: Option<String>,
    ) -> Result<JobSpec, PayloadError> {
        debug_assert_eq!(
            self.runner.as_deref(),
            Some(P::KIND),
            "{} stage `{}` runs on another runner",
            self.workflow,
            self.name
        );
        let mut spec = JobSpec::for_payload(payload)?;
        spec.workflow = self.workflow.clone();
        spec.stage = self.name.clone();
        spec.idempotency_key = idempotency_key;
        spec.max_attempts = self.attempts;
        spec.timeout_ms = (self.timeout_secs + self.setup_secs) * 1000;
        spec.heartbeat_ms = self.heartbeat_secs * 1000;
        spec.stale_after_ms = self.stale_after_secs * 1000;
        spec.idempotent = self.idempotent;
        spec.retry_failed_runs = self.retry_failed_runs;
        if !self.requires.is_empty() {
            spec.requires = skillforge_engine::labels::normalize(&self.requires);
            spec.queue = skillforge_engine::labels::route(&spec.queue, &spec.requires);
        }
        Ok(spec)
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;

    use skillforge_runner_process::ProcessPayload;

    use super::*;

    fn stage() -> StageDef {
        StageDef {
            workflow: "probe".into(),
            name: "run".into(),
            runner: Some("process".into()),
            handler: None,
            timeout_secs: 10,
            setup_secs: 5,
            heartbeat_secs: 2,
            stale_after_secs: 15,
            attempts: 3,
            idempotent: false,
            retry_failed_runs: false,
            status_phases: Vec::new(),
            requires: Vec::new(),
        }
    }

    #[test]
    fn the_job_carries_every_field_of_the_stage() {
        let spec = stage()
            .job(&ProcessPayload::argv(vec!["true".into()]), Some("k".into()))
            .unwrap();
        assert_eq!(
            (
                spec.kind.as_str(),
                spec.workflow.as_str(),
                spec.stage.as_str()
            ),
            ("process", "probe", "run")
        );
        assert_eq!(
            (
                spec.idempotency_key.as_deref(),
                spec.max_attempts,
                spec.timeout_ms
            ),
            (Some("k"), 3, 15_000)
        );
        assert_eq!(
            (
                spec.heartbeat_ms,
                spec.stale_after_ms,
                spec.idempotent,
                spec.retry_failed_runs
            ),
            (2000, 15_000, false, false)
        );
        assert_eq!(
            spec.payload,
            serde_json::to_value(ProcessPayload::argv(vec!["true".into()])).unwrap()
        );
    }

    #[test]
    fn a_payload_that_does_not_serialize_is_an_error_never_a_null_payload() {
        let mut payload = ProcessPayload::argv(vec!["true".into()]);
        payload.cwd = Some(OsStr::from_bytes(b"/work/\xff").into());
        let err = stage().job(&payload, None).unwrap_err();
        assert_eq!(err.kind, "process");
    }
}
