-- skillforge queue schema, version 6: job ids stored as 16 bytes, idempotency keys indexed only
-- where set (issue 19).
--
-- A job id in canonical UUID text form (36 characters, what `new_job_id` makes) is stored as
-- its 16 bytes (a BLOB) in `jobs.id`, `job_attempts.job_id`, `job_output.job_id` and
-- `pruned_jobs.id`, in the row and in each index entry: 20 bytes less twice per job. Any other
-- id stays TEXT (`sqlite/key.rs`, whose `key_of_text` is the CASE expression below). The
-- backend converts at its boundary; the public id is the text form.
--
-- `jobs.idempotency_key` was `UNIQUE`, an index holding one entry per job, NULL keys included
-- (most jobs have none); it becomes a partial unique index over the set keys.
--
-- Changing a column's constraints means rebuilding `jobs`. Dropping the old table would
-- cascade to `job_attempts` (ON DELETE CASCADE), so its rows wait in a scratch table meanwhile.
-- The AUTOINCREMENT counter carries over, so a `seq` of a pruned job is never reused.

CREATE TABLE jobs_v6 (
    -- Enqueue order (FIFO tie-break); never reused.
    seq                    INTEGER PRIMARY KEY AUTOINCREMENT,
    -- Job id: 16 bytes of a UUID (BLOB), or TEXT for other ids (`sqlite/key.rs`).
    id                     BLOB    NOT NULL UNIQUE,
    queue                  TEXT    NOT NULL,
    idempotency_key        TEXT,
    state                  TEXT    NOT NULL,
    attempts               INTEGER NOT NULL DEFAULT 0,
    max_attempts           INTEGER NOT NULL,
    idempotent             INTEGER NOT NULL,
    heartbeat_ms           INTEGER NOT NULL,
    stale_after_ms         INTEGER NOT NULL,
    fencing_token          INTEGER NOT NULL DEFAULT 0,
    owner_worker           TEXT,
    owner_host             TEXT,
    owner_pid              INTEGER,
    acquired_at_ms         INTEGER,
    heartbeat_at_ms        INTEGER,
    -- heartbeat_at_ms + stale_after_ms while running, else NULL.
    stale_deadline_ms      INTEGER,
    not_before_ms          INTEGER NOT NULL,
    created_at_ms          INTEGER NOT NULL,
    updated_at_ms          INTEGER NOT NULL,
    cancel_requested       INTEGER NOT NULL DEFAULT 0,
    recovery_available     INTEGER NOT NULL DEFAULT 0,
    -- RunOutcome JSON of the last finished attempt (compact from v5, `sqlite/compact.rs`).
    outcome                TEXT,
    error                  TEXT,
    -- 1 while a terminal (or stale) result awaits the control plane's ack.
    result_pending         INTEGER NOT NULL DEFAULT 0,
    -- The latest attempt (schema v2, `0002_last_attempt_in_row.sql`).
    attempt_no             INTEGER,
    attempt_ended_at_ms    INTEGER,
    attempt_result         TEXT,
    attempt_retry_delay_ms INTEGER
);
INSERT INTO jobs_v6 (id, seq, queue, idempotency_key, state, attempts, max_attempts, idempotent, heartbeat_ms, stale_after_ms, fencing_token, owner_worker, owner_host, owner_pid, acquired_at_ms, heartbeat_at_ms, stale_deadline_ms, not_before_ms, created_at_ms, updated_at_ms, cancel_requested, recovery_available, outcome, error, result_pending, attempt_no, attempt_ended_at_ms, attempt_result, attempt_retry_delay_ms)
SELECT (CASE WHEN length(id) = 36 AND id = lower(id) AND substr(id, 9, 1) = '-' AND substr(id, 14, 1) = '-' AND substr(id, 19, 1) = '-' AND substr(id, 24, 1) = '-' AND length(unhex(replace(id, '-', ''))) = 16 THEN unhex(replace(id, '-', '')) ELSE id END), seq, queue, idempotency_key, state, attempts, max_attempts, idempotent, heartbeat_ms, stale_after_ms, fencing_token, owner_worker, owner_host, owner_pid, acquired_at_ms, heartbeat_at_ms, stale_deadline_ms, not_before_ms, created_at_ms, updated_at_ms, cancel_requested, recovery_available, outcome, error, result_pending, attempt_no, attempt_ended_at_ms, attempt_result, attempt_retry_delay_ms FROM jobs;
UPDATE sqlite_sequence SET seq = max(seq, coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'jobs'), 0))
WHERE name = 'jobs_v6';

CREATE TABLE job_attempts_v5 AS SELECT * FROM job_attempts;
DROP TABLE job_attempts;
DROP TABLE jobs;
ALTER TABLE jobs_v6 RENAME TO jobs;

CREATE TABLE job_attempts (
    job_id         BLOB    NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    attempt        INTEGER NOT NULL,
    -- Strictly increasing per job, so it keys the attempt even after a retry resets `attempt`.
    fencing_token  INTEGER NOT NULL,
    worker         TEXT    NOT NULL,
    host           TEXT    NOT NULL,
    pid            INTEGER NOT NULL,
    started_at_ms  INTEGER NOT NULL,
    ended_at_ms    INTEGER,
    result         TEXT,
    retry_delay_ms INTEGER,
    PRIMARY KEY (job_id, fencing_token)
) WITHOUT ROWID;
INSERT INTO job_attempts (job_id, attempt, fencing_token, worker, host, pid, started_at_ms,
    ended_at_ms, result, retry_delay_ms)
SELECT (CASE WHEN length(job_id) = 36 AND job_id = lower(job_id) AND substr(job_id, 9, 1) = '-' AND substr(job_id, 14, 1) = '-' AND substr(job_id, 19, 1) = '-' AND substr(job_id, 24, 1) = '-' AND length(unhex(replace(job_id, '-', ''))) = 16 THEN unhex(replace(job_id, '-', '')) ELSE job_id END), attempt, fencing_token, worker, host, pid, started_at_ms, ended_at_ms,
    result, retry_delay_ms FROM job_attempts_v5;
DROP TABLE job_attempts_v5;

-- The indexes and the trigger of versions 1 to 3, unchanged (they went with the old table).
CREATE INDEX jobs_due ON jobs (queue, not_before_ms, seq) WHERE state = 'queued';
CREATE INDEX jobs_stale ON jobs (stale_deadline_ms) WHERE state = 'running';
CREATE INDEX jobs_pending ON jobs (updated_at_ms, seq) WHERE result_pending = 1;
CREATE INDEX jobs_retained_succeeded ON jobs (updated_at_ms)
    WHERE result_pending = 0 AND state = 'succeeded';
CREATE INDEX jobs_retained_failed ON jobs (updated_at_ms)
    WHERE result_pending = 0 AND state IN ('failed', 'dead', 'cancelled');
CREATE INDEX jobs_rare_state ON jobs (state, seq)
    WHERE state IN ('failed', 'dead', 'cancelled', 'stale');
CREATE TRIGGER jobs_attempt_superseded AFTER UPDATE OF fencing_token ON jobs
WHEN OLD.attempt_no IS NOT NULL AND OLD.owner_worker IS NOT NULL
     AND NEW.fencing_token <> OLD.fencing_token
BEGIN
    INSERT OR REPLACE INTO job_attempts (job_id, attempt, fencing_token, worker, host, pid,
        started_at_ms, ended_at_ms, result, retry_delay_ms)
    VALUES (OLD.id, OLD.attempt_no, OLD.fencing_token, OLD.owner_worker,
        COALESCE(OLD.owner_host, ''), COALESCE(OLD.owner_pid, 0),
        COALESCE(OLD.acquired_at_ms, 0), OLD.attempt_ended_at_ms, OLD.attempt_result,
        OLD.attempt_retry_delay_ms);
END;

-- Idempotency keys: only jobs that have one (an enqueue's upsert names this WHERE).
CREATE UNIQUE INDEX jobs_idempotency_key ON jobs (idempotency_key) WHERE idempotency_key IS NOT NULL;

-- Output chunks and tombstones keep their tables (their TEXT columns hold BLOB keys as they
-- are: SQLite converts only numbers to TEXT affinity).
UPDATE job_output SET job_id = (CASE WHEN length(job_id) = 36 AND job_id = lower(job_id) AND substr(job_id, 9, 1) = '-' AND substr(job_id, 14, 1) = '-' AND substr(job_id, 19, 1) = '-' AND substr(job_id, 24, 1) = '-' AND length(unhex(replace(job_id, '-', ''))) = 16 THEN unhex(replace(job_id, '-', '')) ELSE job_id END);
UPDATE pruned_jobs SET id = (CASE WHEN length(id) = 36 AND id = lower(id) AND substr(id, 9, 1) = '-' AND substr(id, 14, 1) = '-' AND substr(id, 19, 1) = '-' AND substr(id, 24, 1) = '-' AND length(unhex(replace(id, '-', ''))) = 16 THEN unhex(replace(id, '-', '')) ELSE id END);
