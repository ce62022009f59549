-- skillforge queue schema, version 2: the last attempt lives in the `jobs` row, the spec does not.
-- Times are ms since the Unix epoch; durations are ms.
--
-- Version 1 wrote a `job_attempts` row at every lease and updated it at every finish: two more
-- B-tree writes per job on the hot path. From version 2 on, a job's latest attempt is kept in
-- its own row (the owner columns, `acquired_at_ms`, `fencing_token` and the columns below), and
-- is copied to `job_attempts` only when a new lease supersedes it (trigger below). A job's
-- history is therefore its `job_attempts` rows plus, when `attempt_no` is set, the attempt in
-- the row; when both hold the same fencing token (a job leased by version 1 and finished by
-- version 2), the row is the current one.
--
-- Also from version 2 on, the owner columns (`owner_worker`, `owner_host`, `owner_pid`,
-- `acquired_at_ms`, `heartbeat_at_ms`) describe the latest attempt and are kept after it ended;
-- the job holds a lease only while `state = 'running'`. `stale_deadline_ms` is still NULL
-- whenever the job is not running.

-- Attempt number (1-based) of the latest attempt, the one run under `fencing_token`; NULL while
-- the row holds no attempt (never leased, or every attempt already in `job_attempts`).
ALTER TABLE jobs ADD COLUMN attempt_no INTEGER;
-- When the latest attempt ended (result, stale detection, release); NULL while it runs.
ALTER TABLE jobs ADD COLUMN attempt_ended_at_ms INTEGER;
-- How the latest attempt ended (`AttemptRecord::result` labels); NULL while it runs.
ALTER TABLE jobs ADD COLUMN attempt_result TEXT;
-- Delay before the next attempt that the latest attempt's end scheduled, if any.
ALTER TABLE jobs ADD COLUMN attempt_retry_delay_ms INTEGER;

-- Version 1 rows of running jobs: their attempt is both in `job_attempts` (open) and in the
-- owner columns; from now on the row is authoritative for it.
UPDATE jobs SET attempt_no = attempts WHERE state = 'running' AND owner_worker IS NOT NULL;

-- A lease (the only statement that changes `fencing_token`) moves the superseded attempt of
-- the row into `job_attempts` (REPLACE: a version 1 file already has an open row for it).
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

-- The `JobSpec` JSON (most of a row's bytes) moves out of `jobs` into `job_specs`: it is written
-- once at enqueue and only read, while every lease and finish rewrites the `jobs` row, so a
-- narrow row means fewer pages rewritten (and logged to the WAL) per batch. A job's spec is the
-- `job_specs` row with its `seq`; jobs are never deleted.
CREATE TABLE job_specs (
    -- The job's `jobs.seq`.
    seq  INTEGER PRIMARY KEY,
    -- The full JobSpec as JSON; the `jobs` columns duplicate what queries need.
    spec TEXT    NOT NULL
);
INSERT INTO job_specs (seq, spec) SELECT seq, spec FROM jobs;
ALTER TABLE jobs DROP COLUMN spec;

-- `jobs list --state S` scans the table newest first instead: keeping this index cost two
-- B-tree writes per lease and two per finish.
DROP INDEX jobs_state;
