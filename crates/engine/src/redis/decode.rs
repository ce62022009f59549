//! Decoding of the job hash (`{ns}:job:{id}`) and its history list, and of the scripts' lease
//! rows, into engine types.
//!
//! Both hash layouts are read (see "Key layout" in `redis.rs`): layout 1 (no `layout` field)
//! keeps every closed attempt in the history list; layout 2 keeps a terminally finished
//! attempt in the hash (`attempt_result` non-empty; its record is the lease fields, `attempts`,
//! `token`, ended at `updated_at`), writes `outcome` '' for "no outcome" and `error` as '' (none)
//! or '=' + text.

use std::collections::HashMap;
use std::str::FromStr;

use skillforge_runner::RunOutcome;

use crate::error::EngineError;
use crate::job::{
    AttemptRecord, Job, JobSpec, JobState, Lease, LeaseKind, LeaseView, LeasedJob, WorkerIdentity,
};

/// A job as `fetch_jobs`' pipeline returns it: the `HGETALL` of its hash and its history list
/// (closed attempts; in layout 2 only the superseded ones, the last terminal one being in the
/// hash).
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

/// Decodes job `job_id` (the id in its key); `Ok(None)` when the hash is empty (no such job).
/// Hashes written since issue 19 have no `id` field (it repeated the key); older ones do.
pub(super) fn job(job_id: &str, raw: RawJob) -> Result<Option<Job>, EngineError> {
    let (h, history) = raw;
    if h.is_empty() {
        return Ok(None);
    }
    let id = h.get("id").cloned().unwrap_or_else(|| job_id.to_owned());
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
    let outcome = outcome(&id, h.get("outcome").map(String::as_str))?;
    // Layout 2 stores `error` as '' (none) or '=' + text; layout 1 as the text, absent = none.
    let error = match (h.get("layout").map(String::as_str), h.get("error")) {
        (Some("2"), Some(e)) => e.strip_prefix('=').map(str::to_owned),
        (_, e) => e.cloned(),
    };
    let mut history = records(&id, &history)?;
    let attempts = num(&h, &id, "attempts")?;
    let token: u64 = num(&h, &id, "token")?;
    if let Some(lease) = &lease {
        push_open(&mut history, attempts, lease);
    } else if let Some(result) = h.get("attempt_result").filter(|r| !r.is_empty())
        && let Some(worker) = h.get("owner_worker")
        && history.last().is_none_or(|r| r.fencing_token != token)
    {
        // Layout 2: the last attempt ended terminally and its record is the hash itself.
        history.push(AttemptRecord {
            attempt: attempts,
            fencing_token: token,
            worker: worker.clone(),
            host: field(&h, &id, "owner_host")?.to_owned(),
            pid: num(&h, &id, "owner_pid")?,
            started_at_ms: num(&h, &id, "acquired_at")?,
            ended_at_ms: Some(num(&h, &id, "updated_at")?),
            result: Some(result.clone()),
            retry_delay_ms: None,
        });
    }
    Ok(Some(Job {
        spec,
        state,
        attempts,
        fencing_token: token,
        lease,
        not_before_ms: num(&h, &id, "not_before")?,
        created_at_ms: num(&h, &id, "created_at")?,
        updated_at_ms: num(&h, &id, "updated_at")?,
        cancel_requested: flag(&h, "cancel_requested"),
        recovery_available: flag(&h, "recovery_available"),
        outcome,
        error,
        history,
        id,
    }))
}

/// `outcome` field → run outcome; absent or '' (layout 2) = none.
fn outcome(id: &str, raw: Option<&str>) -> Result<Option<RunOutcome>, EngineError> {
    match raw {
        Some(raw) if !raw.is_empty() => serde_json::from_str(raw)
            .map(Some)
            .map_err(|e| corrupt(id, format!("run outcome: {e}"))),
        _ => Ok(None),
    }
}

/// The history list (JSON attempt records, oldest first) → records.
fn records(id: &str, raw: &[String]) -> Result<Vec<AttemptRecord>, EngineError> {
    raw.iter()
        .map(|r| {
            serde_json::from_str::<AttemptRecord>(r)
                .map_err(|e| corrupt(id, format!("attempt record: {e}")))
        })
        .collect()
}

/// The history list holds closed attempts; a running job's open attempt is its lease, appended
/// here. (A job leased by a build that stored the open record in the list already has it.)
fn push_open(history: &mut Vec<AttemptRecord>, attempts: u32, lease: &Lease) {
    if history.last().is_none_or(|r| r.fencing_token != lease.fencing_token) {
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
}

/// Fixed fields of a lease row before its history records (LEASE ROW in `transitions.lua`).
const ROW_FIXED: usize = 14;

/// Decodes a lease row of the lease / finish-batch scripts into (tag, leased job). The row is
/// flat: `[tag, id, spec, attempts, token, not_before, created_at, cancel_requested,
/// recovery_available, outcome, error, acquired_at, heartbeat_at, updated_at, history
/// record…]` (nil = absent; times in ms since the Unix epoch; the last three nil = `now`, the
/// script's clock). The tag is the caller's: the finished job's id in a finish batch, '' in a
/// lease. `owner` is the worker the script leased the job for.
///
/// Errors: [`EngineError::Corrupt`] when a field is missing or malformed.
pub(super) fn leased(
    row: Vec<Option<String>>,
    owner: &WorkerIdentity,
    now: i64,
) -> Result<(String, LeasedJob), EngineError> {
    let id = row.get(1).cloned().flatten().unwrap_or_default();
    if row.len() < ROW_FIXED {
        return Err(corrupt(&id, format!("lease row of {} fields", row.len())));
    }
    let mut it = row.into_iter();
    let mut next = || it.next().flatten();
    let need = |v: Option<String>, name: &str| v.ok_or_else(|| corrupt(&id, format!("missing field `{name}`")));
    fn parse<T: FromStr>(id: &str, v: Option<String>, name: &str) -> Result<T, EngineError> {
        let raw = v.ok_or_else(|| corrupt(id, format!("missing field `{name}`")))?;
        raw.parse()
            .map_err(|_| corrupt(id, format!("field `{name}` is not a number: `{raw}`")))
    }
    let tag = next().unwrap_or_default();
    let _id = next();
    let spec: JobSpec = serde_json::from_str(&need(next(), "spec")?)
        .map_err(|e| corrupt(&id, format!("job spec: {e}")))?;
    let attempts: u32 = parse(&id, next(), "attempts")?;
    let token: u64 = parse(&id, next(), "token")?;
    let not_before_ms = parse(&id, next(), "not_before")?;
    let created_at_ms = parse(&id, next(), "created_at")?;
    let cancel_requested = next().is_some_and(|v| v == "1");
    let recovery_available = next().is_some_and(|v| v == "1");
    let outcome = outcome(&id, next().as_deref())?;
    let error = next();
    let mut time = |name: &str| match next() {
        Some(v) => parse(&id, Some(v), name),
        None => Ok(now),
    };
    let acquired_at_ms = time("acquired_at")?;
    let heartbeat_at_ms = time("heartbeat_at")?;
    let updated_at_ms = time("updated_at")?;
    let raw_history: Vec<String> = it.flatten().collect();
    let mut history = records(&id, &raw_history)?;
    let lease = Lease {
        owner_worker: owner.worker_id.clone(),
        owner_host: owner.host.clone(),
        owner_pid: owner.pid,
        fencing_token: token,
        acquired_at_ms,
        heartbeat_at_ms,
    };
    push_open(&mut history, attempts, &lease);
    let job = Job {
        id,
        spec,
        state: JobState::Running,
        attempts,
        fencing_token: token,
        lease: Some(lease),
        not_before_ms,
        created_at_ms,
        updated_at_ms,
        cancel_requested,
        recovery_available,
        outcome,
        error,
        history,
    };
    Ok((tag, LeasedJob { fencing_token: token, job }))
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
