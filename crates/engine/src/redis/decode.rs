//! Decoding of the job hash (`{ns}:job:{id}`, layout 4, or 3 as older builds wrote it), its
//! long-value keys and history list, and of the scripts' lease rows, into engine types.
//!
//! Layout 4 (see "The job hash" in `redis.rs`) is layout 3 without the fields at their defaults
//! (`defaults.rs`, filled in first): short field names; a terminally finished attempt
//! stays in the hash (`r` non-empty; its record is the lease fields, `a`, `t`, ended at `u`);
//! `o` '' = no outcome; `e` '' = no error, else '=' + text; `p`, `x`, `o` or `e` = '@' when the
//! value is in the string key `job:{id}:{field}`. Older layouts are rewritten on open
//! (`migrate.rs`), which reads them with [`old_spec`].

use std::collections::HashMap;
use std::str::FromStr;

use skillforge_runner::RunOutcome;

use super::spec::{self, RawSpec};
use crate::error::EngineError;
use crate::job::{
    AttemptRecord, Job, JobSpec, JobState, Lease, LeaseKind, LeaseView, LeasedJob, WorkerIdentity,
};

/// The hash fields whose value may live in a key of its own (`job:{id}:{field}`), in the order
/// `fetch_jobs` reads those keys.
pub(super) const SPILLED: [&str; 4] = ["p", "x", "o", "e"];

/// A job as `fetch_jobs`' pipeline returns it: the `HGETALL` of its hash, its history list
/// (the superseded closed attempts; the last terminal one is in the hash) and the values of its
/// long-value keys ([`SPILLED`] order, `None` = no such key).
pub(super) type RawJob = (HashMap<String, String>, Vec<String>, Vec<Option<String>>);

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

/// The value of a possibly spilled field: '@' resolves to its key's value (`spilled`).
fn long<'a>(
    id: &str,
    name: &str,
    v: Option<&'a str>,
    spilled: &'a Option<String>,
) -> Result<Option<&'a str>, EngineError> {
    match v {
        Some("@") => spilled.as_deref().map(Some).ok_or_else(|| {
            corrupt(
                id,
                format!("field `{name}` is in its own key, which is missing"),
            )
        }),
        other => Ok(other),
    }
}

/// Decodes job `job_id` (the id in its key); `Ok(None)` when the hash is empty (no such job).
pub(super) fn job(job_id: &str, raw: RawJob) -> Result<Option<Job>, EngineError> {
    let (mut h, history, spilled) = raw;
    if h.is_empty() {
        return Ok(None);
    }
    // Layout 4 leaves out the fields at their defaults (layout 3's hashes store them all).
    super::defaults::fill(&mut h);
    let id = job_id.to_owned();
    let side = |i: usize| spilled.get(i).unwrap_or(&None);
    let get = |name: &str| h.get(name).map(String::as_str);
    let payload =
        long(&id, "p", get("p"), side(0))?.ok_or_else(|| corrupt(&id, "missing field `p`"))?;
    let extra = long(&id, "x", get("x"), side(1))?;
    let spec = spec::decode(
        &id,
        &RawSpec {
            queue: field(&h, &id, "q")?,
            workflow: field(&h, &id, "w")?,
            stage: field(&h, &id, "g")?,
            kind: field(&h, &id, "kd")?,
            payload,
            idempotency_key: get("k"),
            max_attempts: field(&h, &id, "m")?,
            timeout_ms: field(&h, &id, "to")?,
            heartbeat_ms: field(&h, &id, "hb")?,
            stale_after_ms: field(&h, &id, "sa")?,
            idempotent: field(&h, &id, "i")?,
            extra,
        },
    )?;
    let state = JobState::from_str(field(&h, &id, "s")?).map_err(|e| corrupt(&id, e))?;
    let lease = match (state, h.get("ow")) {
        (JobState::Running, Some(worker)) => Some(Lease {
            owner_worker: worker.clone(),
            owner_host: field(&h, &id, "oh")?.to_owned(),
            owner_pid: num(&h, &id, "op")?,
            fencing_token: num(&h, &id, "t")?,
            acquired_at_ms: num(&h, &id, "la")?,
            heartbeat_at_ms: num(&h, &id, "hh")?,
        }),
        _ => None,
    };
    let outcome = outcome(&id, long(&id, "o", get("o"), side(2))?)?;
    let error = long(&id, "e", get("e"), side(3))?
        .and_then(|e| e.strip_prefix('='))
        .map(str::to_owned);
    let mut history = records(&id, &history)?;
    let attempts = num(&h, &id, "a")?;
    let token: u64 = num(&h, &id, "t")?;
    if let Some(lease) = &lease {
        push_open(&mut history, attempts, lease);
    } else if let Some(result) = h.get("r").filter(|r| !r.is_empty())
        && let Some(worker) = h.get("ow")
        && history.last().is_none_or(|r| r.fencing_token != token)
    {
        // The last attempt ended terminally and its record is the hash itself.
        history.push(AttemptRecord {
            attempt: attempts,
            fencing_token: token,
            worker: worker.clone(),
            host: field(&h, &id, "oh")?.to_owned(),
            pid: num(&h, &id, "op")?,
            started_at_ms: num(&h, &id, "la")?,
            ended_at_ms: Some(num(&h, &id, "u")?),
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
        not_before_ms: num(&h, &id, "nb")?,
        created_at_ms: num(&h, &id, "c")?,
        updated_at_ms: num(&h, &id, "u")?,
        cancel_requested: flag(&h, "cr"),
        recovery_available: flag(&h, "ra"),
        outcome,
        error,
        history,
        id,
    }))
}

/// The spec of a hash written by an older build (layouts 1 and 2: one `spec` JSON field).
pub(super) fn old_spec(id: &str, h: &HashMap<String, String>) -> Result<JobSpec, EngineError> {
    serde_json::from_str(field(h, id, "spec")?).map_err(|e| corrupt(id, format!("job spec: {e}")))
}

/// `o` field → run outcome; absent or '' = none.
fn outcome(id: &str, raw: Option<&str>) -> Result<Option<RunOutcome>, EngineError> {
    match raw {
        Some(raw) if !raw.is_empty() => super::outcome_json::decode(id, raw).map(Some),
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
    if history
        .last()
        .is_none_or(|r| r.fencing_token != lease.fencing_token)
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
}

/// Fixed fields of a lease row before its history records (LEASE ROW in `transitions.lua`).
const ROW_FIXED: usize = 25;

/// Decodes a lease row of the lease / finish-batch scripts into (tag, leased job). The row is
/// flat: `[tag, id, attempts, token, not_before, created_at, cancel_requested,
/// recovery_available, outcome, error, acquired_at, heartbeat_at, updated_at, queue, workflow,
/// stage, kind, payload, idempotency_key, max_attempts, timeout_ms, heartbeat_ms, stale_after,
/// idempotent, extra, history record…]` (nil = absent; a spec field nil = its default,
/// `defaults.rs`; ids stored as `redis/id.rs` says, returned public; times in ms since the Unix
/// epoch; acquired/heartbeat/updated nil = `now`, the script's clock). The tag is the caller's: the
/// finished job's id in a finish batch, '' in a lease. `owner` is the worker the script leased
/// the job for.
///
/// Errors: [`EngineError::Corrupt`] when a field is missing or malformed.
pub(super) fn leased(
    row: Vec<Option<String>>,
    owner: &WorkerIdentity,
    now: i64,
) -> Result<(String, LeasedJob), EngineError> {
    let id = super::id::public(row.get(1).and_then(Option::as_deref).unwrap_or_default());
    if row.len() < ROW_FIXED {
        return Err(corrupt(&id, format!("lease row of {} fields", row.len())));
    }
    fn parse<T: FromStr>(id: &str, v: Option<&str>, name: &str) -> Result<T, EngineError> {
        let raw = v.ok_or_else(|| corrupt(id, format!("missing field `{name}`")))?;
        raw.parse()
            .map_err(|_| corrupt(id, format!("field `{name}` is not a number: `{raw}`")))
    }
    let at = |i: usize| row[i].as_deref();
    let need =
        |i: usize, name: &str| at(i).ok_or_else(|| corrupt(&id, format!("missing field `{name}`")));
    // A spec field comes as stored: absent = its default (`defaults.rs`).
    let spec_field = |i: usize, name: &str| match at(i) {
        Some(v) => Ok(v),
        None => super::defaults::default_of(name)
            .ok_or_else(|| corrupt(&id, format!("missing field `{name}`"))),
    };
    let tag = super::id::public(at(0).unwrap_or_default());
    let attempts: u32 = parse(&id, at(2), "a")?;
    let token: u64 = parse(&id, at(3), "t")?;
    let not_before_ms = parse(&id, at(4), "nb")?;
    let created_at_ms = parse(&id, at(5), "c")?;
    let cancel_requested = at(6) == Some("1");
    let recovery_available = at(7) == Some("1");
    let outcome = outcome(&id, at(8))?;
    let error = at(9).map(str::to_owned);
    let time = |i: usize, name: &str| match at(i) {
        Some(v) => parse(&id, Some(v), name),
        None => Ok(now),
    };
    let acquired_at_ms = time(10, "la")?;
    let heartbeat_at_ms = time(11, "hh")?;
    let updated_at_ms = time(12, "u")?;
    let spec = spec::decode(
        &id,
        &RawSpec {
            queue: spec_field(13, "q")?,
            workflow: spec_field(14, "w")?,
            stage: spec_field(15, "g")?,
            kind: need(16, "kd")?,
            payload: spec_field(17, "p")?,
            idempotency_key: at(18),
            max_attempts: spec_field(19, "m")?,
            timeout_ms: spec_field(20, "to")?,
            heartbeat_ms: spec_field(21, "hb")?,
            stale_after_ms: spec_field(22, "sa")?,
            idempotent: spec_field(23, "i")?,
            extra: at(24),
        },
    )?;
    let raw_history: Vec<String> = row[ROW_FIXED..].iter().flatten().cloned().collect();
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
    Ok((
        tag,
        LeasedJob {
            fencing_token: token,
            job,
        },
    ))
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
