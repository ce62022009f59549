-- Schema v3 (issue 19): queue retention.
--
-- Prunable jobs (terminal, result acknowledged) per retention class, by finish time: a pruning
-- batch deletes the oldest entries up to a boundary. A job enters its index once, when its
-- result is acknowledged (`result_pending` 1 → 0), and leaves it when pruned or retried. The
-- WHERE terms must match `sqlite/retention.rs` exactly.
CREATE INDEX jobs_retained_succeeded ON jobs (updated_at_ms)
    WHERE result_pending = 0 AND state = 'succeeded';
CREATE INDEX jobs_retained_failed ON jobs (updated_at_ms)
    WHERE result_pending = 0 AND state IN ('failed', 'dead', 'cancelled');

-- `jobs list --state` of a rare state reads its page from here (newest first) instead of scanning
-- every retained succeeded job; the hot path (queued → running → succeeded) never writes it.
CREATE INDEX jobs_rare_state ON jobs (state, seq)
    WHERE state IN ('failed', 'dead', 'cancelled', 'stale');

-- Tombstones of pruned jobs: `jobs show` says "pruned", and a resubmit under the idempotency key
-- returns the pruned job's id. Pruned themselves under the class's retention, by prune time.
CREATE TABLE pruned_jobs (
    id              TEXT    PRIMARY KEY,
    succeeded       INTEGER NOT NULL,
    state           TEXT    NOT NULL,
    idempotency_key TEXT    UNIQUE,
    finished_at_ms  INTEGER NOT NULL,
    pruned_at_ms    INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX pruned_jobs_age ON pruned_jobs (succeeded, pruned_at_ms);
