//! A [`JobSpec`] as the layout-3 job hash stores it: one short field per spec field the
//! scripts or most jobs need (`q` queue, `w` workflow, `g` stage, `kd` kind, `p` payload JSON,
//! `k` idempotency key, `m` max attempts, `to` timeout ms, `hb` heartbeat ms, `sa` stale after
//! ms, `i` idempotent 0/1) and `x`, the JSON of the remaining fields that differ from their
//! defaults ([`SpecExtra`]; absent for most jobs). Keeping the fields apart (instead of one
//! spec JSON of ~250 bytes) keeps every value of a typical job under Redis's listpack value
//! limit, so the hash is stored compactly (see "The job hash" in `redis.rs`).

use serde::{Deserialize, Serialize};

use crate::error::EngineError;
use crate::job::JobSpec;
use crate::transfer::JobFiles;

/// The spec fields without a hash field of their own, each omitted at its default.
#[derive(Debug, Default, Serialize, Deserialize)]
struct SpecExtra {
    /// `JobSpec::not_before_ms` as submitted (the job's scheduled time is the hash's `nb`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    nb: Option<i64>,
    /// `JobSpec::retry_failed_runs`, stored only when `false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rf: Option<bool>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    locks: Vec<String>,
    #[serde(default, skip_serializing_if = "JobFiles::is_empty")]
    files: JobFiles,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    requires: Vec<String>,
    /// `JobSpec::traceparent`, stored only while telemetry is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tp: Option<String>,
}

/// The encoded spec values `enqueue.lua` takes besides the plain fields: the payload JSON and
/// the extra JSON ('' = none).
pub(super) struct SpecParts {
    pub(super) payload: String,
    pub(super) extra: String,
}

/// Encodes the payload and the extra fields of `spec` (the other parts are sent as they are).
///
/// Errors: [`EngineError::Backend`] when the payload does not serialize.
pub(super) fn encode(spec: &JobSpec) -> Result<SpecParts, EngineError> {
    let payload = serde_json::to_string(&spec.payload)
        .map_err(|e| EngineError::redis(format!("encode job payload: {e}")))?;
    let extra = SpecExtra {
        nb: spec.not_before_ms,
        rf: (!spec.retry_failed_runs).then_some(false),
        locks: spec.locks.clone(),
        files: spec.files.clone(),
        requires: spec.requires.clone(),
        tp: spec.traceparent.clone(),
    };
    let extra = if extra.nb.is_none()
        && extra.rf.is_none()
        && extra.locks.is_empty()
        && extra.files.is_empty()
        && extra.requires.is_empty()
        && extra.tp.is_none()
    {
        String::new()
    } else {
        serde_json::to_string(&extra)
            .map_err(|e| EngineError::redis(format!("encode job spec: {e}")))?
    };
    Ok(SpecParts { payload, extra })
}

/// The raw spec fields of a job hash or lease row, in [`decode`]'s order.
pub(super) struct RawSpec<'a> {
    pub(super) queue: &'a str,
    pub(super) workflow: &'a str,
    pub(super) stage: &'a str,
    pub(super) kind: &'a str,
    pub(super) payload: &'a str,
    pub(super) idempotency_key: Option<&'a str>,
    pub(super) max_attempts: &'a str,
    pub(super) timeout_ms: &'a str,
    pub(super) heartbeat_ms: &'a str,
    pub(super) stale_after_ms: &'a str,
    pub(super) idempotent: &'a str,
    pub(super) extra: Option<&'a str>,
}

/// Rebuilds the spec of job `id` from its stored fields.
///
/// Errors: [`EngineError::Corrupt`] naming the field that does not parse.
pub(super) fn decode(id: &str, raw: &RawSpec<'_>) -> Result<JobSpec, EngineError> {
    let corrupt = |what: &str, e: &dyn std::fmt::Display| EngineError::Corrupt {
        job_id: id.to_owned(),
        message: format!("job spec {what}: {e}"),
    };
    fn num<T: std::str::FromStr>(id: &str, name: &str, raw: &str) -> Result<T, EngineError> {
        raw.parse().map_err(|_| EngineError::Corrupt {
            job_id: id.to_owned(),
            message: format!("field `{name}` is not a number: `{raw}`"),
        })
    }
    let payload = serde_json::from_str(raw.payload).map_err(|e| corrupt("payload", &e))?;
    let extra: SpecExtra = match raw.extra {
        Some(x) if !x.is_empty() => serde_json::from_str(x).map_err(|e| corrupt("extra", &e))?,
        _ => SpecExtra::default(),
    };
    Ok(JobSpec {
        queue: raw.queue.to_owned(),
        workflow: raw.workflow.to_owned(),
        stage: raw.stage.to_owned(),
        kind: raw.kind.to_owned(),
        payload,
        idempotency_key: raw.idempotency_key.map(str::to_owned),
        max_attempts: num(id, "m", raw.max_attempts)?,
        timeout_ms: num(id, "to", raw.timeout_ms)?,
        heartbeat_ms: num(id, "hb", raw.heartbeat_ms)?,
        stale_after_ms: num(id, "sa", raw.stale_after_ms)?,
        idempotent: raw.idempotent == "1",
        not_before_ms: extra.nb,
        retry_failed_runs: extra.rf.unwrap_or(true),
        locks: extra.locks,
        files: extra.files,
        requires: extra.requires,
        traceparent: extra.tp,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(spec: &JobSpec) -> JobSpec {
        let parts = encode(spec).unwrap();
        let (m, to, hb, sa) = (
            spec.max_attempts.to_string(),
            spec.timeout_ms.to_string(),
            spec.heartbeat_ms.to_string(),
            spec.stale_after_ms.to_string(),
        );
        let raw = RawSpec {
            queue: &spec.queue,
            workflow: &spec.workflow,
            stage: &spec.stage,
            kind: &spec.kind,
            payload: &parts.payload,
            idempotency_key: spec.idempotency_key.as_deref(),
            max_attempts: &m,
            timeout_ms: &to,
            heartbeat_ms: &hb,
            stale_after_ms: &sa,
            idempotent: if spec.idempotent { "1" } else { "0" },
            extra: (!parts.extra.is_empty()).then_some(parts.extra.as_str()),
        };
        decode("j", &raw).unwrap()
    }

    #[test]
    fn specs_round_trip_and_a_default_spec_has_no_extra() {
        let plain = JobSpec::new("noop", serde_json::json!({}));
        assert_eq!(encode(&plain).unwrap().extra, "");
        assert_eq!(round_trip(&plain), plain);
        let mut full = JobSpec::new(
            "process",
            serde_json::json!({"argv": ["sh", "-c", "true"], "n": 1.5}),
        );
        full.idempotency_key = Some("k".into());
        full.not_before_ms = Some(1_700_000_000_000);
        full.retry_failed_runs = false;
        full.locks = vec!["lock-a".into()];
        full.requires = vec!["os=linux".into()];
        full.idempotent = false;
        assert_eq!(round_trip(&full), full);
    }
}
