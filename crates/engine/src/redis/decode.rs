//! Decoding of the job hash (`{ns}:job:{id}`) and its history list into engine types.

use std::collections::HashMap;
use std::str::FromStr;

use crate::error::EngineError;
use crate::job::{AttemptRecord, Job, JobSpec, JobState, Lease, LeaseKind, LeaseView};

/// A job as a script or pipeline returns it: the `HGETALL` of its hash and its history list
/// (closed attempts only).
pub(super) type RawJob = (HashMap<String, String>, Vec<String>);

fn corrupt(job_id: &str, message: impl Into<String>) -> EngineError {
    EngineError::Corrupt {
        job_id: job_id.to_owned(),
        message: message.into(),
    }
}

fn field<'a>(h: &'a HashMap<String, String>, id: &str, name: &str) -> Result<&'a str, EngineError> {
    h.get(name)
        .map(String::as_str)
        .ok_or_else(|| corrupt(id, format!("missing field `{name}`")))
}

fn num<T: FromStr>(h: &HashMap<String, String>, id: &str, name: &str) -> Result<T, EngineError> {
    let raw = field(h, id, name)?;
    raw.parse()
        .map_err(|_| corrupt(id, format!("field `{name}` is not a number: `{raw}`")))
}

fn flag(h: &HashMap<String, String>, name: &str) -> bool {
    h.get(name).is_some_and(|v| v == "1")
}

/// Decodes one job; `Ok(None)` when the hash is empty (no such job).
pub(super) fn job(raw: RawJob) -> Result<Option<Job>, EngineError> {
    let (h, history) = raw;
    if h.is_empty() {
        return Ok(None);
    }
    let id = h.get("id").cloned().unwrap_or_default();
    let spec: JobSpec = serde_json::from_str(field(&h, &id, "spec")?)
        .map_err(|e| corrupt(&id, format!("job spec: {e}")))?;
    let state = JobState::from_str(field(&h, &id, "state")?).map_err(|e| corrupt(&id, e))?;
    let lease = match (state, h.get("owner_worker")) {
        (JobState::Running, Some(worker)) => Some(Lease {
            owner_worker: worker.clone(),
            owner_host: field(&h, &id, "owner_host")?.to_owned(),
            owner_pid: num(&h, &id, "owner_pid")?,
            fencing_token: num(&h, &id, "token")?,
            acquired_at_ms: num(&h, &id, "acquired_at")?,
            heartbeat_at_ms: num(&h, &id, "heartbeat_at")?,
        }),
        _ => None,
    };
    let outcome = match h.get("outcome") {
        Some(raw) => {
            Some(serde_json::from_str(raw).map_err(|e| corrupt(&id, format!("run outcome: {e}")))?)
        }
        None => None,
    };
    let mut history = history
        .iter()
        .map(|raw| {
            serde_json::from_str::<AttemptRecord>(raw)
                .map_err(|e| corrupt(&id, format!("attempt record: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let attempts = num(&h, &id, "attempts")?;
    // The history list holds closed attempts; a running job's open attempt is its lease. (A job
    // leased by an older build, which stored the open record in the list, already has it.)
    if let Some(lease) = &lease
        && history.last().is_none_or(|r| r.fencing_token != lease.fencing_token)
    {
        history.push(AttemptRecord {
            attempt: attempts,
            fencing_token: lease.fencing_token,
            worker: lease.owner_worker.clone(),
            host: lease.owner_host.clone(),
            pid: lease.owner_pid,
            started_at_ms: lease.acquired_at_ms,
            ended_at_ms: None,
            result: None,
            retry_delay_ms: None,
        });
    }
    Ok(Some(Job {
        spec,
        state,
        attempts,
        fencing_token: num(&h, &id, "token")?,
        lease,
        not_before_ms: num(&h, &id, "not_before")?,
        created_at_ms: num(&h, &id, "created_at")?,
        updated_at_ms: num(&h, &id, "updated_at")?,
        cancel_requested: flag(&h, "cancel_requested"),
        recovery_available: flag(&h, "recovery_available"),
        outcome,
        error: h.get("error").cloned(),
        history,
        id,
    }))
}

/// Decodes a row of the `leases` script:
/// `[name, worker, host, pid, token, acquired_at, heartbeat_at, heartbeat_ms, stale_after_ms]`.
pub(super) fn lease_row(kind: LeaseKind, row: &[String]) -> Result<LeaseView, EngineError> {
    let name = row.first().cloned().unwrap_or_default();
    let bad = || EngineError::redis(format!("malformed lease row for `{name}`: {row:?}"));
    if row.len() != 9 {
        return Err(bad());
    }
    fn p<T: FromStr>(s: &str) -> Option<T> {
        s.parse().ok()
    }
    let view = (|| {
        Some(LeaseView {
            kind,
            name: name.clone(),
            lease: Lease {
                owner_worker: row[1].clone(),
                owner_host: row[2].clone(),
                owner_pid: p(&row[3])?,
                fencing_token: p(&row[4])?,
                acquired_at_ms: p(&row[5])?,
                heartbeat_at_ms: p(&row[6])?,
            },
            heartbeat_ms: p(&row[7])?,
            stale_after_ms: p(&row[8])?,
        })
    })();
    view.ok_or_else(bad)
}
