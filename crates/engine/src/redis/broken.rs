//! Job records that cannot be decoded (issue 32 item 2): a hash missing a field, a long value's
//! own key gone (evicted, deleted by hand, half written), a value that does not parse.
//!
//! One such record must not stop anything else. Reads that list jobs skip it and count it
//! ([`QueueIntegrity::list_readable`](crate::backend::QueueIntegrity::list_readable)); ingestion
//! quarantines a pending result it cannot read, and one whose record is gone altogether: the
//! id leaves the `results` index and enters the hash `broken` (stored id → `<ms>⇥<reason>`) in
//! one `MULTI`, and the process that moved it logs it once. `jobs list --state broken` lists
//! the quarantined records, `jobs purge ID` deletes one with every key and index entry of its
//! job (its ready-list entry, if any, is skipped by the next lease, which finds no hash).

use std::time::Duration;

use tokio::time::Instant;

use super::id::{public, stored};
use super::{RETRY_BUDGET, RedisBackend, decode, transient};
use crate::backend::UnreadableRecord;
use crate::error::EngineError;
use crate::job::Job;

/// What [`RedisBackend::fetch_jobs_lenient`] read.
#[derive(Debug, Default)]
pub(super) struct Fetched {
    /// The jobs decoded, in the order asked.
    pub(super) jobs: Vec<Job>,
    /// Records that exist but cannot be decoded (`quarantined_at_ms` = `None`).
    pub(super) unreadable: Vec<UnreadableRecord>,
    /// Stored ids with no record at all.
    pub(super) missing: Vec<String>,
}

/// Index sets a job id may be a member of, beside the per-queue `delayed:*` sets.
const INDEX_SETS: [&str; 7] = [
    "results",
    "leases",
    "jobs",
    "state:failed",
    "state:dead",
    "state:cancelled",
    "state:stale",
];

impl RedisBackend {
    /// Moves the pending result of `stored_id` out of `results` (or its lease out of `leases`:
    /// a running job the reaper cannot reap) into `broken` with `reason` and the server's time.
    /// Returns whether this call moved it (false: another process did, or it was no longer
    /// pending), so exactly one process logs it.
    pub(super) async fn quarantine_stored(
        &self,
        stored_id: &str,
        reason: &str,
        whatever_its_index: bool,
    ) -> Result<bool, EngineError> {
        // One script. From ingestion the record enters `broken` only if this call took it out
        // of `results` (a result acknowledged meanwhile is left alone); from the reaper
        // (`whatever_its_index`) also when a failed reap script already took it out of
        // `leases` (a script's writes before its error stay). Either way only the first call
        // records it (HSETNX), so it is logged once.
        let mut cmd = ::redis::cmd("EVAL");
        cmd.arg(
            "local moved = redis.call('ZREM', KEYS[1], ARGV[1]) + redis.call('ZREM', KEYS[3], ARGV[1]) \
             if moved > 0 or (ARGV[3] == '1' and redis.call('EXISTS', KEYS[4]) == 1) then \
               local t = redis.call('TIME') \
               return redis.call('HSETNX', KEYS[2], ARGV[1], (t[1] * 1000 + math.floor(t[2] / 1000)) .. '\t' .. ARGV[2]) \
             end return 0",
        )
        .arg(4)
        .arg(format!("{}results", self.prefix))
        .arg(format!("{}broken", self.prefix))
        .arg(format!("{}leases", self.prefix))
        .arg(format!("{}job:{stored_id}", self.prefix))
        .arg(stored_id)
        .arg(reason)
        .arg(if whatever_its_index { "1" } else { "0" });
        let moved: u64 = with_retry!(self, "quarantine an unreadable job record", |c| cmd
            .query_async(&mut c))?;
        Ok(moved == 1)
    }

    /// The quarantined records, at most `limit`, ordered by job id.
    pub(super) async fn quarantined_records(
        &self,
        limit: usize,
    ) -> Result<Vec<UnreadableRecord>, EngineError> {
        let mut cmd = ::redis::cmd("HGETALL");
        cmd.arg(format!("{}broken", self.prefix));
        let entries: std::collections::BTreeMap<String, String> =
            with_retry!(self, "read the quarantined job records", |c| cmd
                .query_async(&mut c))?;
        Ok(entries
            .into_iter()
            .take(limit)
            .map(|(id, value)| {
                let (at, reason) = value.split_once('\t').unwrap_or(("", &value));
                UnreadableRecord {
                    job_id: public(&id),
                    reason: reason.to_owned(),
                    quarantined_at_ms: at.parse().ok(),
                }
            })
            .collect())
    }

    /// Deletes quarantined record `job_id` (public id): its hash, history, long values, output
    /// stream, idempotency key entry and index entries. Returns false when no such record is
    /// quarantined (nothing is deleted: a readable job is never purged).
    pub(super) async fn purge_record(&self, job_id: &str) -> Result<bool, EngineError> {
        let id = stored(job_id).into_owned();
        let ns = &self.prefix;
        let mut check = ::redis::pipe();
        check
            .cmd("HEXISTS")
            .arg(format!("{ns}broken"))
            .arg(&id)
            .cmd("HGET")
            .arg(format!("{ns}job:{id}"))
            .arg("k")
            .cmd("SMEMBERS")
            .arg(format!("{ns}queues"));
        let (is_quarantined, key, queues): (bool, Option<String>, Vec<String>) =
            with_retry!(self, "read a quarantined job record", |c| check
                .query_async(&mut c))?;
        if !is_quarantined {
            return Ok(false);
        }
        let mut pipe = ::redis::pipe();
        pipe.atomic();
        let job = format!("{ns}job:{id}");
        pipe.cmd("DEL")
            .arg(&job)
            .arg(format!("{job}:history"))
            .arg(format!("{ns}out:{id}"))
            .ignore();
        for field in decode::SPILLED {
            pipe.cmd("DEL").arg(format!("{job}:{field}")).ignore();
        }
        for set in INDEX_SETS {
            pipe.cmd("ZREM").arg(format!("{ns}{set}")).arg(&id).ignore();
        }
        for queue in &queues {
            pipe.cmd("ZREM")
                .arg(format!("{ns}delayed:{queue}"))
                .arg(&id)
                .ignore();
        }
        if let Some(key) = &key {
            // Only this job's entry: HDEL of a key another job took since would be wrong, so
            // the script compares first.
            pipe.cmd("EVAL")
                .arg("if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then redis.call('HDEL', KEYS[1], ARGV[1]) end return 0")
                .arg(1)
                .arg(format!("{ns}idem"))
                .arg(key)
                .arg(&id)
                .ignore();
        }
        pipe.cmd("HDEL")
            .arg(format!("{ns}broken"))
            .arg(&id)
            .ignore();
        let () = with_retry!(self, "purge a quarantined job record", |c| pipe
            .query_async(&mut c))?;
        Ok(true)
    }
}
